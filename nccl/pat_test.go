package nccl_test

import (
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
)

// TestPATFollowsNCCLsModel: on nodes of one GPU, where NCCL's tuner
// allows PAT, the simulator runs NCCL's PAT all-gathers and
// reduce-scatters (nccl-pat) in the time NCCL's own model gives, within
// 15% from a few bytes to 64 MiB: the model's fixed part (base, a
// network hop over 3.5 per step, 2.8 µs per rank) and its bandwidth,
// which the simulator reaches over log2(ranks) steps. PAT runs Simple
// only (tuning.cc): forced to LL or LL128, the tuner names why it cannot.
func TestPATFollowsNCCLsModel(t *testing.T) {
	for _, topo := range []string{"cluster:8x1,arch=hopper", "cluster:16x1,arch=hopper"} {
		c, tp := simtest.World(t, topo, sim.Config{TimingOnly: true})
		for _, proto := range []ops.Protocol{ops.ProtoLL, ops.ProtoLL128} {
			o := nccl.Options{Algos: []nccl.Algo{nccl.PAT}, Protos: []ops.Protocol{proto}}
			if _, err := nccl.Tune(describeTopology(t, tp), ops.AllGather, 4096, o); err == nil || !strings.Contains(err.Error(), "PAT runs Simple only") {
				t.Errorf("%s: PAT forced to %v: %v, want an error naming Simple", topo, proto, err)
			}
		}
		tu, err := nccl.NewTuner(tp, nccl.Options{Algos: []nccl.Algo{nccl.PAT}, Protos: []ops.Protocol{ops.ProtoSimple}})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []ops.Op{ops.AllGather, ops.ReduceScatter} {
			for _, bytes := range []int{1 << 12, 1 << 20, 64 << 20} {
				spec := ops.Spec{Op: op, Ranks: tu.System.Ranks, Count: bytes / 4 / tu.System.Ranks, DType: hw.F32, Redop: hw.Sum}
				plan, choice, err := tu.Plan(spec)
				if err != nil {
					t.Fatal(err)
				}
				if plan.Algo != "nccl-pat" || choice.Algo != nccl.PAT || choice.NCCL != choice.Estimate {
					t.Fatalf("%s %v: planned %s for %v (NCCL: %v), want PAT simulated", topo, spec, plan.Algo, choice.Estimate, choice.NCCL)
				}
				got := simtest.Time(t, c, plan)
				ratio := got * 1e6 / choice.TimeUS
				if !(ratio >= 0.85 && ratio <= 1.15) || math.IsNaN(ratio) {
					t.Errorf("%s %v %s %d B: simulated %.1f µs, NCCL's model %.1f µs (ratio %.3f, want 0.85 to 1.15)", topo, op, nccl.Label(plan), bytes, got*1e6, choice.TimeUS, ratio)
				}
			}
		}
	}
}

// TestPATEnableOneRunsPATOnNodesOfSeveralGPUs: NCCL keeps PAT to one GPU a
// node by default (NCCL_PAT_ENABLE=2), and NCCL_PAT_ENABLE=1 lifts that
// (tuning.cc, ncclPatEnable): on two DGX H100s PAT is off, with the
// variable named, and with ForcePAT on, priced from the tree's graph at
// 0.75 with its latency terms, and planned over ranks whatever their
// nodes (its near steps on NVLink, its far ones across the network): a
// plan ops.Check proves, which the simulator runs.
func TestPATEnableOneRunsPATOnNodesOfSeveralGPUs(t *testing.T) {
	c, tp := simtest.World(t, "dgx-h100x2", sim.Config{TimingOnly: true})
	s := describeTopology(t, tp)
	if e := estimate(t, s, ops.AllGather, 1<<20, nccl.PAT, ops.ProtoSimple, nccl.Options{}); !strings.Contains(e.Off, "NCCL_PAT_ENABLE=1") {
		t.Errorf("PAT on nodes of 8 by default: %q, want off, naming NCCL_PAT_ENABLE=1", e.Off)
	}
	forced := nccl.Options{ForcePAT: true}
	pat := estimate(t, s, ops.AllGather, 1<<30, nccl.PAT, ops.ProtoSimple, forced)
	tree := estimate(t, s, ops.AllReduce, 1<<30, nccl.Tree, ops.ProtoSimple, forced)
	// The tree all-reduce's bus bandwidth is its graph's × 0.92 (8
	// channels of 45 GB/s: 41.4 a channel, Hopper's cap on 2 nodes too),
	// PAT's all-gather its graph's × 0.75.
	if pat.Off != "" || math.Abs(pat.BusBW-tree.BusBW/0.92*0.75) > 1e-9 {
		t.Errorf("forced PAT: %v (%q) at %.2f GB/s, want the tree's graph (%.2f/0.92) × 0.75", pat, pat.Off, pat.BusBW, tree.BusBW)
	}
	tu, err := nccl.NewTuner(tp, nccl.Options{ForcePAT: true, Algos: []nccl.Algo{nccl.PAT}})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []ops.Op{ops.AllGather, ops.ReduceScatter} {
		plan, choice, err := tu.Plan(ops.Spec{Op: op, Ranks: 16, Count: 64, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		if plan.Algo != "nccl-pat" || choice.Algo != nccl.PAT {
			t.Fatalf("%v: planned %s for %v, want PAT", op, plan.Algo, choice.Estimate)
		}
		if err := ops.Check(plan); err != nil {
			t.Errorf("%v: %v", op, err)
		}
		if got := simtest.Time(t, c, plan); !(got > 0) {
			t.Errorf("%v: simulated %v s", op, got)
		}
	}
}
