package simexec_test

import (
	"fmt"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// TestThinnedRunsTakeTheFullTime: NCCL's plans whose channels come in
// identical copies (16 channels over 8 GPUs a node: c and c+8) are timed
// by running one copy on a cluster with every bandwidth divided by their
// number, to the picosecond of running them all: rings with Simple, NVLS
// within a node (16 alike), NVLSTree across nodes (c and c+2 alike) and
// NVLS across nodes over the rails' SHARP. Each is also rotated: rings'
// channels turn into each other as every node's GPUs rotate, and NVLS's
// and NVLSTree's ranks into each other (the nodes' first GPUs stand for
// all, their switch's reductions shared out). Trees with LL and LL128
// have no copies (k 1: each GPU heads one channel of each of NCCL's two
// trees), and are rotated alone, two channels a GPU.
func TestThinnedRunsTakeTheFullTime(t *testing.T) {
	for _, tc := range []struct {
		topo    string
		op      ops.Op
		bytes   int
		algo    nccl.Algo
		k       int
		rotated int // 1: its channels also fold by rotating each node's GPUs
	}{
		{"dgx-h100x2", ops.AllReduce, 1 << 20, nccl.Tree, 1, 1},
		{"dgx-h100x2", ops.AllReduce, 16 << 20, nccl.Tree, 1, 1},
		{"dgx-h100x4,rail=true", ops.AllReduce, 16 << 20, nccl.Tree, 1, 1},
		{"dgx-h100x2", ops.AllReduce, 256 << 20, nccl.Ring, 2, 1},
		{"dgx-h100x2", ops.AllGather, 64 << 20, nccl.Ring, 2, 1},
		{"dgx-h100", ops.AllReduce, 64 << 20, nccl.NVLS, 16, 1}, // NVLS channels are alike; GPU i owns part i
		{"dgx-h100", ops.AllGather, 64 << 20, nccl.NVLS, 16, 1},
		{"dgx-h100", ops.ReduceScatter, 64 << 20, nccl.NVLS, 16, 1},
		{"dgx-h100x4,rail=true", ops.AllReduce, 64 << 20, nccl.NVLSTree, 8, 1}, // c and c+2: tree c%2
		// NVLS across nodes over CollNet: each node's switch, the rails'
		// switches (SHARP) between the nodes.
		{"dgx-h100x4,rail=true,sharp=inf", ops.AllReduce, 64 << 20, nccl.NVLS, 16, 1},
		{"dgx-h100x4,rail=true,sharp=inf", ops.AllGather, 64 << 20, nccl.NVLS, 16, 1},
		{"dgx-h100x2,rail=true,sharp=100GB/s", ops.ReduceScatter, 64 << 20, nccl.NVLS, 16, 1},
	} {
		topo, err := topology.Resolve(tc.topo)
		if err != nil {
			t.Fatal(err)
		}
		plan := ncclPlan(t, topo, nccl.Options{Algos: []nccl.Algo{tc.algo}, Channels: 16}, tc.op, tc.bytes/4/topo.NumGPUs())
		name := tc.topo + " " + nccl.Label(plan)
		if _, k, ok := plan.FoldChannels(); ok != (tc.k > 1) || k != tc.k {
			t.Errorf("%s: folds %d channels into one (%v), want %d", name, k, ok, tc.k)
		}
		full, fd := runOn(t, topo, plan, false)
		thinned, td := runOn(t, topo, plan, true)
		if fd.ThinnedRuns()+fd.RotatedRuns() != 0 || td.ThinnedRuns()+td.RotatedRuns() != 1 || td.RotatedRuns() != tc.rotated {
			t.Fatalf("%s: %d+%d and %d+%d thinned+rotated runs, want none without symmetry and %d rotated with", name,
				fd.ThinnedRuns(), fd.RotatedRuns(), td.ThinnedRuns(), td.RotatedRuns(), tc.rotated)
		}
		if thinned != full {
			t.Errorf("%s: thinned %.15g s, every channel %.15g s", name, thinned, full)
		}
	}
}

// TestSplitTreesFoldToOneChannel: NCCL's split trees (each GPU heads a
// channel of each tree) have no copies, but the rotation of every node's
// GPUs and the mirror of the nodes make a group of order 16 that moves
// every channel: channel 0 alone, on the fabric folded by that group,
// takes the whole plan's time on the whole fabric to the picosecond,
// where NICs bound the trees (50 Gb/s) as where they do not, and through
// a spine. The driver folds so too (or by the rotation alone, which keeps
// two channels, on three nodes), one run alone or three back to back.
func TestSplitTreesFoldToOneChannel(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); TestFedRunsEqualEnqueuedRuns takes the same concurrent paths under it")
	}
	for _, tc := range []struct {
		topo  string
		bytes int
		fold  bool // by the rotation and the mirror
	}{
		{"dgx-h100x2", 1 << 20, true},
		{"dgx-h100x4,nicbw=50Gb/s", 64 << 20, true},
		{"dgx-h100x4,rail=true", 16 << 20, true},
		{"dgx-h100x3", 12 << 20, false},
	} {
		topo, err := topology.Resolve(tc.topo)
		if err != nil {
			t.Fatal(err)
		}
		plan := ncclPlan(t, topo, nccl.Options{Algos: []nccl.Algo{nccl.Tree}, Channels: 16}, ops.AllReduce, tc.bytes/4/topo.NumGPUs())
		name := tc.topo + " " + nccl.Label(plan)
		full, _ := runOn(t, topo, plan, false)
		folded, d := runOn(t, topo, plan, true)
		if d.RotatedRuns() != 1 || folded != full {
			t.Errorf("%s: folded by the driver (%d rotated runs) %.15g s, every channel %.15g s", name, d.RotatedRuns(), folded, full)
		}
		// Back to back, a rank there waits for its orbit's ranks, which
		// run the images of the channels it does not keep.
		full, _ = runsOn(t, topo, plan, false, 3)
		folded, d = runsOn(t, topo, plan, true, 3)
		if d.RotatedRuns() != 1 || folded != full {
			t.Errorf("%s: three runs back to back folded by the driver (%d rotated runs) %.15g s a run, every channel %.15g s", name, d.RotatedRuns(), folded, full)
		}
		kept, perms, order, ok := plan.FoldRotationAndMirror()
		if ok != tc.fold {
			t.Fatalf("%s: folds by the rotation and the mirror: %v, want %v", name, ok, tc.fold)
		}
		if !ok {
			continue
		}
		c, err := sim.NewCluster(topo, sim.Config{TimingOnly: true, Symmetry: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		rc, ok, err := c.Rotated(perms, order, 1)
		if err != nil || !ok {
			t.Fatalf("%s: the fabric does not fold by the group of order %d: %v, %v", name, order, ok, err)
		}
		in, out := buffers(t, rc, kept, false)
		one, err := simexec.NewExecutor(rc).RunBackToBack(kept, in, out, 1)
		if err != nil {
			t.Fatal(err)
		}
		if one != full {
			t.Errorf("%s: channel 0 on the fold %.15g s, every channel %.15g s", name, one, full)
		}
	}
}

// TestRackTreesFoldByTheMirror: on two racks of 64 GB200s (one NCCL node
// each, MNNVL), NCCL's 32 tree channels have 16 heads a rack, so no
// rotation of a rack's GPUs maps them, but tree 1 is tree 0 mirrored:
// mirroring the racks maps channel c onto c+16, and the first 16 channels
// on the fabric folded by it take the whole plan's time to the
// picosecond, one run alone or two back to back.
func TestRackTreesFoldByTheMirror(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); TestNVLSPlansRunRight takes the same concurrent paths under it")
	}
	topo, err := topology.Resolve("cluster:2x64,arch=blackwell,bw=900GB/s,reduce=2.39TB/s,nicbw=800Gb/s,nicports=2,cpu=arm,rail=true")
	if err != nil {
		t.Fatal(err)
	}
	plan := ncclPlan(t, topo, nccl.Options{Algos: []nccl.Algo{nccl.Tree}}, ops.AllReduce, 1<<18)
	name := nccl.Label(plan)
	kept, perm, order, ok := plan.FoldMirror()
	if !ok || order != 2 || kept.Channels != plan.Channels/2 || perm[0] != 64 || perm[127] != 63 {
		t.Fatalf("%s: folds by the mirror %v, order %d, kept %v", name, ok, order, kept)
	}
	if _, _, _, ok := plan.FoldRotationAndMirror(); ok {
		t.Errorf("%s: folds by a rotation of 64 GPUs that head 16 channels", name)
	}
	for _, runs := range []int{1, 2} {
		full, _ := runsOn(t, topo, plan, false, runs)
		folded, d := runsOn(t, topo, plan, true, runs)
		if d.RotatedRuns() != 1 || folded != full {
			t.Errorf("%s, %d runs: folded by the driver (%d rotated runs) %.15g s a run, every channel %.15g s", name, runs, d.RotatedRuns(), folded, full)
		}
	}
}

// TestFoldsKeepEachDevicesWork: without a Wire a plan's reductions take
// each GPU's reduction bandwidth, shared by all its channels. Copies share
// it on a thinned cluster as they would (its bandwidth divided too), but a
// rotated fold would leave each GPU its own channels only: such a plan is
// thinned (16 channels on nodes of 8) or run whole (8), never rotated, and
// takes the full run's time either way.
func TestFoldsKeepEachDevicesWork(t *testing.T) {
	topo, err := topology.Resolve("dgx-h100x2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ channels, thinned int }{{8, 0}, {16, 1}} {
		plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-tree", Ranks: 16, NodeRanks: 8, Channels: tc.channels,
			Count: 1 << 22, DType: hw.F32, Redop: hw.Sum, Chunk: 1 << 14})
		if err != nil {
			t.Fatal(err)
		}
		full, _ := runOn(t, topo, plan, false)
		folded, d := runOn(t, topo, plan, true)
		if d.RotatedRuns() != 0 || d.ThinnedRuns() != tc.thinned || folded != full {
			t.Errorf("%d channels: %.15g s (%d thinned, %d rotated runs), every channel %.15g s", tc.channels, folded, d.ThinnedRuns(), d.RotatedRuns(), full)
		}
	}
}

// ncclPlan is the plan NCCL's tuner, with opts, makes on topo for op over
// count f32 elements a rank (summed where it reduces).
func ncclPlan(t *testing.T, topo *topology.Topology, opts nccl.Options, op ops.Op, count int) *ops.Plan {
	t.Helper()
	tuner, err := nccl.NewTuner(topo, opts)
	if err != nil {
		t.Fatal(err)
	}
	plan, _, err := tuner.Plan(ops.Spec{Op: op, Ranks: topo.NumGPUs(), Count: count, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// runOn times plan on a timing-only cluster over topo, with or without
// Symmetry (which lets the driver mirror or fold it), and returns its
// driver.
func runOn(t *testing.T, topo *topology.Topology, plan *ops.Plan, symmetry bool) (float64, *simexec.Driver) {
	t.Helper()
	return runsOn(t, topo, plan, symmetry, 1)
}

// runsOn is runOn timing runs back to back (ops.Executor.RunBackToBack).
func runsOn(t *testing.T, topo *topology.Topology, plan *ops.Plan, symmetry bool, runs int) (float64, *simexec.Driver) {
	t.Helper()
	c, err := sim.NewCluster(topo, sim.Config{TimingOnly: true, Symmetry: symmetry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	exec := simexec.NewExecutor(c)
	in, out := buffers(t, c, plan, false)
	secs, err := exec.RunBackToBack(plan, in, out, runs)
	if err != nil {
		t.Fatalf("%v: %v", plan.Spec, err)
	}
	return secs, exec.Driver().(*simexec.Driver)
}

// TestNCCLRingsMirrorByTwoNodes: NCCL's rings alternate their way through
// a node from node to node, so no rank renaming of a whole group maps
// them onto themselves, but a shift by two nodes does: on 4 DGX H100
// nodes (rail-optimised or not) every ring all-gather, reduce-scatter and
// all-reduce, at any channel count NCCL picks, is timed on the mirror by
// the 16 ranks of two nodes, to the picosecond of the full run.
func TestNCCLRingsMirrorByTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); TestFedRunsEqualEnqueuedRuns takes the same concurrent paths under it")
	}
	for _, fabric := range []string{"dgx-h100x4,rail=true", "dgx-h100x4"} {
		topo, err := topology.Resolve(fabric)
		if err != nil {
			t.Fatal(err)
		}
		tuner, err := nccl.NewTuner(topo, nccl.Options{Algos: []nccl.Algo{nccl.Ring}})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []ops.Op{ops.AllGather, ops.ReduceScatter, ops.AllReduce} {
			for _, count := range []int{1 << 10, 1 << 16, 1 << 20} {
				plan, _, err := tuner.Plan(ops.Spec{Op: op, Ranks: 32, Count: count, DType: hw.F32, Redop: hw.Sum})
				if err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("%s %s %d: %s", fabric, op, count, nccl.Label(plan))
				if plan.Symmetry() != ops.NotSymmetric || !plan.MirrorsInBlocks(16) || plan.MirrorsInBlocks(8) {
					t.Fatalf("%s: symmetric %v, by two nodes %v, by one %v; want by two only", name, plan.Symmetry(), plan.MirrorsInBlocks(16), plan.MirrorsInBlocks(8))
				}
				full, _ := runOn(t, topo, plan, false)
				fast, d := runOn(t, topo, plan, true)
				if d.MirroredRuns() != 1 || fast != full {
					t.Errorf("%s: %d mirrored runs, %.15g s against the full run's %.15g s", name, d.MirroredRuns(), fast, full)
				}
			}
		}
	}
}

// TestRefinedFoldsTakeTheFinePlansTime: where a plan's pieces were
// coarsened to hold every lane in memory (Plan.FineChunk, as package nccl
// sets it at scale), a folded run makes the lanes it keeps again at the
// fine chunk, and a run that cannot fold, or of every rank (Symmetry
// off), makes every lane again (the executor), and each takes, to the
// picosecond, the time of every rank and channel running the plan made
// whole at that chunk, which the coarse plan does not: NCCL's trees,
// rotated and thinned (coarser pieces fill them later), its NVLSTree
// (the ranks that stand for all made again), and a tree with
// no Wire, thinned only or, of one channel, not folded (whose every
// message pays the α that fewer pieces pay less often). Every lane fits at
// the fine chunk here, so no run counts as refined: one of every rank
// takes the same time.
func TestRefinedFoldsTakeTheFinePlansTime(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); TestNVLSPlansRunRight takes the same concurrent paths under it")
	}
	for _, tc := range []struct {
		topo     string
		tuned    bool // NCCL's tree of 16 channels, as its tuner plans it; else ops' own
		folds    int  // runs thinned or rotated: 0 where the refined plan runs whole
		rotated  int
		coarsen  int
		bytes    int
		channels int
	}{
		{"dgx-h100x2", true, 1, 1, 8, 16 << 20, 16},
		{"dgx-h100x2", true, 1, 1, 8, 256 << 20, 0}, // NVLSTree: its ranks fold (FoldRanks)
		{"dgx-h100x4,rail=true", true, 1, 1, 4, 16 << 20, 16},
		{"dgx-h100x2", false, 1, 0, 8, 16 << 20, 16},
		{"dgx-h100x2", false, 0, 0, 8, 4 << 20, 1}, // one channel: nothing folds
	} {
		topo, err := topology.Resolve(tc.topo)
		if err != nil {
			t.Fatal(err)
		}
		spec := ops.Spec{Op: ops.AllReduce, Ranks: topo.NumGPUs(), Count: tc.bytes / 4, DType: hw.F32, Redop: hw.Sum}
		var fine *ops.Plan
		if tc.tuned {
			o := nccl.Options{Algos: []nccl.Algo{nccl.Tree}, Protos: []ops.Protocol{ops.ProtoLL128}, Channels: tc.channels}
			if tc.channels == 0 {
				o = nccl.Options{Algos: []nccl.Algo{nccl.NVLSTree}}
			}
			tuner, err := nccl.NewTuner(topo, o)
			if err != nil {
				t.Fatal(err)
			}
			if fine, _, err = tuner.Plan(spec); err != nil {
				t.Fatal(err)
			}
		} else {
			spec.Algo, spec.Channels, spec.NodeRanks, spec.Chunk = "nccl-tree", tc.channels, 8, 1<<14
			if fine, err = ops.Compile(spec); err != nil {
				t.Fatal(err)
			}
		}
		if fine.FineChunk != 0 {
			t.Fatalf("%s: FineChunk %d on a plan that fits", tc.topo, fine.FineChunk)
		}
		coarseSpec := fine.Spec
		coarseSpec.Chunk *= tc.coarsen
		coarse, err := ops.Compile(coarseSpec)
		if err != nil {
			t.Fatal(err)
		}
		coarse.Protocol, coarse.Wire, coarse.Launch, coarse.FineChunk = fine.Protocol, fine.Wire, fine.Launch, fine.Chunk
		name := fmt.Sprintf("%s %s, chunk %d coarsened %dx", tc.topo, nccl.Label(fine), fine.Chunk, tc.coarsen)

		whole, _ := runOn(t, topo, fine, false)
		refinedWhole, _ := runOn(t, topo, coarse, false)
		folded, d := runOn(t, topo, coarse, true)
		if d.RefinedRuns() != 0 || d.RotatedRuns() != tc.rotated || d.ThinnedRuns()+d.RotatedRuns() != tc.folds || d.MirroredRuns() != 0 {
			t.Errorf("%s: %d refined, %d rotated, %d thinned, %d mirrored runs; want 0, %d, %d, 0", name, d.RefinedRuns(), d.RotatedRuns(), d.ThinnedRuns(), d.MirroredRuns(), tc.rotated, tc.folds-tc.rotated)
		}
		if folded != whole || refinedWhole != whole {
			t.Errorf("%s: folded and refined %.15g s, every rank refined %.15g s, the fine plan whole %.15g s", name, folded, refinedWhole, whole)
		}
		coarse.FineChunk = 0
		if coarseWhole, _ := runOn(t, topo, coarse, false); coarseWhole == whole {
			t.Errorf("%s: the coarse plan whole takes the fine one's %.15g s", name, whole)
		}
	}
}
