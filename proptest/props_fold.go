package proptest

import (
	"fmt"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// foldCase is a generated NCCL collective for FoldProperty: nodes DGX
// H100 boxes (rail-optimised or not), NCCL's algorithm algo (an index
// into foldAlgos) forced with channels channels, op, and count elements
// of f32 per rank, run runs times back to back.
type foldCase struct {
	Nodes    int
	Rail     bool
	Algo     int
	Channels int
	Op       int
	Count    int
	Runs     int
}

var (
	foldAlgos = []nccl.Algo{nccl.Ring, nccl.Tree, nccl.NVLS, nccl.NVLSTree, nccl.CollNetDirect, nccl.CollNetChain}
	foldOps   = []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter}
)

func (c foldCase) String() string {
	return fmt.Sprintf("%s on %s, %s, %d channels, %d elements a rank, %d runs back to back", foldOps[c.Op], c.topo(), foldAlgos[c.Algo], c.Channels, c.Count, c.Runs)
}

// runnable is the case made one NCCL runs: trees, NVLSTree and CollNet
// chain all-reduce only, NVLSTree and CollNet across several nodes.
func (c foldCase) runnable() foldCase {
	switch foldAlgos[c.Algo] {
	case nccl.Tree:
		c.Op = 0
	case nccl.NVLSTree, nccl.CollNetChain:
		c.Op, c.Nodes = 0, max(c.Nodes, 2)
	case nccl.CollNetDirect:
		c.Nodes = max(c.Nodes, 2)
	}
	return c
}

// topo is the case's fabric; its network switches reduce (SHARP) for
// CollNet, and for NVLS across nodes.
func (c foldCase) topo() string {
	if c.Nodes == 1 {
		return "dgx-h100"
	}
	s := fmt.Sprintf("dgx-h100x%d", c.Nodes)
	if c.Rail {
		s += ",rail=true"
	}
	if a := foldAlgos[c.Algo]; a == nccl.NVLS || a == nccl.CollNetDirect || a == nccl.CollNetChain {
		s += ",sharp=inf"
	}
	return s
}

// FoldProperty is the property that NCCL's plans take the full
// simulation's time to the picosecond when the driver folds them
// (sim.Config.Symmetry): duplicate channels thinned, channels rotated
// (with the nodes mirrored on an even number of them), NVLS and NVLSTree
// ranks folded, rings mirrored by two nodes; on 1 to 4 DGX H100 nodes,
// rail-optimised or not (with SHARP for CollNet and NVLS across nodes),
// with 8 or 16 channels, for every op each algorithm runs and any count,
// even or not (an uneven one is not folded), one to three runs back to
// back (a rank of a rotated fold waiting for its orbit between them). It
// adds the folded runs to folded, for a test to see that folds were
// tried.
func FoldProperty(folded *int) gopter.Prop {
	return prop.ForAll(func(c foldCase) string {
		c = c.runnable()
		topo, err := topology.Resolve(c.topo())
		if err != nil {
			return err.Error()
		}
		algo, op := foldAlgos[c.Algo], foldOps[c.Op]
		tuner, err := nccl.NewTuner(topo, nccl.Options{Algos: []nccl.Algo{algo}, Channels: c.Channels})
		if err != nil {
			return err.Error()
		}
		plan, _, err := tuner.Plan(ops.Spec{Op: op, Ranks: topo.NumGPUs(), Count: c.Count, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			return err.Error()
		}
		full, _, err := timeFolds(plan, topo, false, c.Runs)
		if err != nil {
			return err.Error()
		}
		fast, folds, err := timeFolds(plan, topo, true, c.Runs)
		if err != nil {
			return err.Error()
		}
		*folded += folds
		if fast != full {
			return fmt.Sprintf("%v (%s): %d folded runs: %.15g s, full simulation %.15g s", c, nccl.Label(plan), folds, fast, full)
		}
		return ""
	}, gopter.DeriveGen(
		func(nodes int, rail bool, algo, channels, op, count, runs int) foldCase {
			return foldCase{nodes, rail, algo, channels, op, count, runs}
		},
		func(c foldCase) (int, bool, int, int, int, int, int) {
			return c.Nodes, c.Rail, c.Algo, c.Channels, c.Op, c.Count, c.Runs
		},
		gen.IntRange(1, 4), gen.Bool(), gen.IntRange(0, len(foldAlgos)-1), gen.OneConstOf(8, 16), gen.IntRange(0, len(foldOps)-1),
		gen.OneGenOf(gen.IntRange(1, 1<<16), gen.IntRange(1, 64).Map(func(k int) int { return k << 14 })), gen.IntRange(1, 3)))
}

// timeFolds times runs of plan back to back on a timing-only cluster over
// topo, with or without Symmetry, and says how many were thinned, rotated
// or mirrored.
func timeFolds(plan *ops.Plan, topo *topology.Topology, symmetry bool, runs int) (float64, int, error) {
	t, driver, err := timeDriven(plan, topo, sim.Config{TimingOnly: true, Symmetry: symmetry}, runs)
	if err != nil {
		return 0, 0, err
	}
	return t, driver.ThinnedRuns() + driver.RotatedRuns() + driver.MirroredRuns(), nil
}
