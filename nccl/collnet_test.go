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

// TestCollNetRunsWhereNCCLPicksIt: on eight nodes of one GPU whose
// network switch reduces (sharp=), NCCL's tuner picks CollNet direct for
// all-reduce at every size, and the simulator runs it (nccl-collnet-
// direct through the network switch): in NCCL's model's time, within
// 10% at small sizes, where its one network hop is all there is, and
// within 25% at large ones, where the NICs' links and the switch set the
// simulator's pace and NCCL's modelled bandwidth (with its factors for
// GPUs per NIC and Hopper) the model's. On nodes of eight GPUs NCCL would still pick it, and the
// simulator, which cannot run CollNet there, runs the best other choice
// and names NCCL's.
func TestCollNetRunsWhereNCCLPicksIt(t *testing.T) {
	c, tp := simtest.World(t, "cluster:8x1,arch=hopper,sharp=inf", sim.Config{TimingOnly: true})
	tu, err := nccl.NewTuner(tp, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tu.System.SHARP {
		t.Fatalf("%s: no SHARP", tu.System)
	}
	for _, bytes := range []int{1 << 10, 1 << 20, 256 << 20} {
		spec := ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: bytes / 4, DType: hw.F32, Redop: hw.Sum}
		plan, choice, err := tu.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		if plan.Algo != "nccl-collnet-direct" || choice.NCCL != choice.Estimate || !plan.UsesSwitch() {
			t.Fatalf("%d B: planned %s for %v (NCCL: %v), want CollNet direct simulated", bytes, plan.Algo, choice.Estimate, choice.NCCL)
		}
		got := simtest.Time(t, c, plan)
		ratio := got * 1e6 / choice.TimeUS
		lo, hi := 0.9, 1.1
		if bytes >= 1<<20 {
			lo, hi = 0.75, 1.25
		}
		if !(ratio >= lo && ratio <= hi) || math.IsNaN(ratio) {
			t.Errorf("%d B: simulated %.1f µs, NCCL's model %.1f µs (ratio %.3f, want %.2f to %.2f)", bytes, got*1e6, choice.TimeUS, ratio, lo, hi)
		}
	}
	_, eight := simtest.World(t, "cluster:2x8,arch=hopper,sharp=inf", sim.Config{TimingOnly: true})
	tu, err = nccl.NewTuner(eight, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, choice, err := tu.Plan(ops.Spec{Op: ops.AllReduce, Ranks: 16, Count: 1 << 20, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if choice.NCCL.Algo != nccl.CollNetDirect || strings.Contains(plan.Algo, "collnet") || choice.Algo == nccl.CollNetDirect {
		t.Errorf("nodes of 8: planned %s for %v, NCCL %v; want a fallback from CollNet direct", plan.Algo, choice.Estimate, choice.NCCL)
	}
	if _, err := nccl.Tune(tu.System, ops.AllReduce, 1<<20, nccl.Options{Algos: []nccl.Algo{nccl.CollNetChain}}); err == nil || !strings.Contains(err.Error(), "cannot simulate collnet-chain") {
		t.Errorf("NCCL_ALGO=collnet_chain on nodes of 8: %v, want an error saying commsim cannot simulate it", err)
	}
}

// TestNVLSAcrossNodesIsNotSimulated: NCCL runs NVLS across nodes only
// over CollNet (SHARP), which commsim does not combine with it: where
// NCCL's tuner would pick it, the simulator runs another choice (here
// NVLSTree for 64 MiB) instead of a plan whose switch group spans nodes
// no switch joins.
func TestNVLSAcrossNodesIsNotSimulated(t *testing.T) {
	_, tp := simtest.World(t, "cluster:4x8,arch=hopper,sharp=inf,nvls=inf", sim.Config{TimingOnly: true})
	tu, err := nccl.NewTuner(tp, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, choice, err := tu.Plan(ops.Spec{Op: ops.AllReduce, Ranks: 32, Count: 16 << 20, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if choice.NCCL.Algo != nccl.NVLS || plan.Algo != "nccl-nvlstree" {
		t.Errorf("64 MiB: planned %s for %v, NCCL %v; want NVLSTree for NCCL's NVLS", plan.Algo, choice.Estimate, choice.NCCL)
	}
}
