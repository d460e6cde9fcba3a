package proptest

import (
	"fmt"
	"strconv"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// mirrorFabric is a generated fabric for MirrorProperty: the switch of a
// moreTimingCase, or, when Nodes is not 0, a cluster of nodes of
// P/Nodes GPUs with the switch's link bandwidth and latency inside nodes
// and NICs of NICMilli thousandths of a GB/s and NICLatPs picoseconds.
type mirrorFabric struct {
	Nodes, NICMilli, NICLatPs int
}

func (f mirrorFabric) spec(c moreTimingCase) string {
	if f.Nodes == 0 || c.Fabric.P%f.Nodes != 0 {
		return c.Fabric.Spec()
	}
	milli := func(m int) string { return strconv.FormatFloat(float64(m)/1000, 'f', -1, 64) + "GB/s" }
	return fmt.Sprintf("cluster:%dx%d,bw=%s,lat=%dps,nicbw=%s,niclat=%dps", f.Nodes, c.Fabric.P/f.Nodes,
		milli(max(c.Fabric.BWMilli, 1)), c.Fabric.LatPs, milli(f.NICMilli), f.NICLatPs)
}

// MirrorProperty is the property that with sim.Config.Symmetry a
// timing-only run takes the full simulation's time to the picosecond, for
// any algorithm × op, root, dtype and reduction, on 2 to 12 ranks or a
// power of two up to 64, on a generated switch (any bandwidth, latency and
// reduction bandwidth, exact or decimal) or cluster (nodes of any size,
// any NIC bandwidth and latency). Half the cases round the count to a
// multiple of the ranks, so that chunked plans (ring, rhd) are symmetric.
// It also checks that on a switch, every plan that ops.Plan.Symmetry
// finds symmetric and whose messages pair up is run on the mirror: there,
// ring, rd, rhd and pairwise plans always are.
func MirrorProperty() gopter.Prop {
	return prop.ForAll(func(c moreTimingCase, even bool, f mirrorFabric) string {
		spec := c.Spec
		if even && spec.Count > 0 {
			spec.Count = (spec.Count + spec.Ranks - 1) / spec.Ranks * spec.Ranks
		}
		fabric := f.spec(c)
		topo, err := topology.Parse(fabric)
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
			return fmt.Sprintf("%v on %s: mirrored %v: %.15g s, full simulation %.15g s", spec, fabric, mirrored, fast, full)
		}
		pairs := map[string]bool{"ring": true, "rd": true, "rhd": true, "pairwise": true}
		if f.Nodes == 0 && plan.Symmetry() != ops.NotSymmetric && pairs[spec.Algo] && !mirrored {
			return fmt.Sprintf("%v on %s: rank-symmetric but not mirrored", spec, fabric)
		}
		return ""
	}, moreBoundCaseGenOf(gen.OneGenOf(gen.IntRange(2, 12), gen.OneConstOf(16, 32, 64))), gen.Bool(),
		gopter.DeriveGen(
			func(nodes, nicMilli, nicLat int) mirrorFabric { return mirrorFabric{nodes, nicMilli, nicLat} },
			func(f mirrorFabric) (int, int, int) { return f.Nodes, f.NICMilli, f.NICLatPs },
			gen.OneGenOf(gen.Const(0), gen.IntRange(1, 8)), gen.IntRange(1000, 400000), gen.IntRange(10000, 10000000)))
}
