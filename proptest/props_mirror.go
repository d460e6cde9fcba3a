package proptest

import (
	"fmt"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// MirrorProperty is the property that with sim.Config.Symmetry a
// timing-only run on a generated uniform switch fabric (any bandwidth,
// latency and reduction bandwidth, exact or decimal) takes the full
// simulation's time to the picosecond, for any algorithm × op, root,
// dtype and reduction, on 2 to 12 ranks or a power of two up to 64; and
// that every plan ops.Plan.RankSymmetric accepts is indeed run on the
// mirror. Half the cases round the count to a multiple of the ranks, so
// that chunked plans (ring, rhd) are symmetric.
func MirrorProperty() gopter.Prop {
	return prop.ForAll(func(c moreTimingCase, even bool) string {
		spec := c.Spec
		if even && spec.Count > 0 {
			spec.Count = (spec.Count + spec.Ranks - 1) / spec.Ranks * spec.Ranks
		}
		topo, err := topology.Parse(c.Fabric.Spec())
		if err != nil {
			return err.Error()
		}
		full, _, _, err := moreTimeWith(spec, topo, sim.Config{TimingOnly: true})
		if err != nil {
			return err.Error()
		}
		fast, plan, mirrored, err := moreTimeWith(spec, topo, sim.Config{TimingOnly: true, Symmetry: true})
		if err != nil {
			return err.Error()
		}
		if fast != full {
			return fmt.Sprintf("%v on %s: mirrored %v: %.15g s, full simulation %.15g s", spec, c.Fabric.Spec(), mirrored, fast, full)
		}
		if plan.RankSymmetric() != mirrored {
			return fmt.Sprintf("%v on %s: rank-symmetric %v but mirrored %v", spec, c.Fabric.Spec(), plan.RankSymmetric(), mirrored)
		}
		return ""
	}, moreBoundCaseGenOf(gen.OneGenOf(gen.IntRange(2, 12), gen.OneConstOf(16, 32, 64))), gen.Bool())
}
