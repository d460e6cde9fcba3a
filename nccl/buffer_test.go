package nccl_test

import (
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// TestPlansCarryNCCLsBuffers: NCCL's plans hold their sends to
// NCCL_STEPS = 8 slots of the protocol's step per connection (Simple
// 512 KiB, LL 32 KiB of payload, LL128 576,000 bytes; p2p: the p2p
// chunk, 512 KiB on one NVLink node, 128 KiB across nodes), and PAT's,
// which send further ahead, are eager.
func TestPlansCarryNCCLsBuffers(t *testing.T) {
	for _, tc := range []struct {
		topo      string
		algo      nccl.Algo
		proto     ops.Protocol
		op        ops.Op
		slotBytes int64
	}{
		{"dgx-h100", nccl.Ring, ops.ProtoSimple, ops.AllReduce, 512 << 10},
		{"dgx-h100", nccl.Ring, ops.ProtoLL, ops.AllGather, 32 << 10},
		{"dgx-h100", nccl.Ring, ops.ProtoLL128, ops.Broadcast, 576000},
		{"dgx-a100x2", nccl.Tree, ops.ProtoSimple, ops.AllReduce, 512 << 10},
		{"dgx-h100", nccl.NVLS, ops.ProtoSimple, ops.AllReduce, 512 << 10},
		{"dgx-h100", nccl.P2P, ops.ProtoSimple, ops.SendRecv, 512 << 10},
		{"dgx-a100x2", nccl.P2P, ops.ProtoSimple, ops.AllToAll, 128 << 10},
		{"cluster:8x1,arch=hopper", nccl.PAT, ops.ProtoSimple, ops.AllGather, 0},
	} {
		o := nccl.Options{Protos: []ops.Protocol{tc.proto}}
		if tc.algo != nccl.P2P {
			o.Algos = []nccl.Algo{tc.algo}
		}
		tu := try(nccl.NewTuner(try(topology.Resolve(tc.topo))(t), o))(t)
		count := 1 << 24
		if tc.op == ops.AllToAll || tc.op == ops.AllGather {
			count /= tu.System.Ranks
		}
		plan, _, err := tu.Plan(ops.Spec{Op: tc.op, Ranks: tu.System.Ranks, Count: count, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatalf("%s %v: %v", tc.topo, tc.algo, err)
		}
		slots := 8
		if tc.slotBytes == 0 {
			slots = 0
		}
		if w := plan.Wire; w == nil || w.Slots != slots || w.SlotBytes != tc.slotBytes {
			t.Errorf("%s %s: wire %+v, want %d slots of %d bytes", tc.topo, nccl.Label(plan), w, slots, tc.slotBytes)
		}
	}
}

// TestBuffSizeSetsTheSimpleStep: NCCL_BUFFSIZE (Options.BuffSize) sets
// the Simple step, an eighth of it, which a Simple chain forwards at a
// time and the slots hold; NCCL's choice does not read it. A buffer out
// of bounds is refused.
func TestBuffSizeSetsTheSimpleStep(t *testing.T) {
	tp := try(topology.Resolve("dgx-h100"))(t)
	spec := ops.Spec{Op: ops.Broadcast, Ranks: 8, Count: 1 << 24, DType: hw.F32, Root: 2}
	plan := func(buff int64) (*ops.Plan, nccl.Choice) {
		tu := try(nccl.NewTuner(tp, nccl.Options{Protos: []ops.Protocol{ops.ProtoSimple}, BuffSize: buff}))(t)
		p, c, err := tu.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		return p, c
	}
	for _, tc := range []struct{ buff, step int64 }{{0, 512 << 10}, {4 << 20, 512 << 10}, {8 << 20, 1 << 20}, {nccl.MinBuffSize, 4 << 10}} {
		p, c := plan(tc.buff)
		if got := int64(p.Chunk) * 4; got != tc.step || p.Wire.SlotBytes != tc.step {
			t.Errorf("buffer %d: chain chunk %d bytes, slots of %d, want %d", tc.buff, got, p.Wire.SlotBytes, tc.step)
		}
		if _, c0 := plan(0); c.Estimate != c0.Estimate {
			t.Errorf("buffer %d: chose %v, want NCCL's choice %v whatever the buffer", tc.buff, c.Estimate, c0.Estimate)
		}
	}
	for _, buff := range []int64{-1, nccl.MinBuffSize - 1, nccl.MaxBuffSize + 1} {
		if _, err := nccl.NewTuner(tp, nccl.Options{BuffSize: buff}); err == nil || !strings.Contains(err.Error(), "NCCL_BUFFSIZE") {
			t.Errorf("buffer %d: %v, want a refusal naming NCCL_BUFFSIZE", buff, err)
		}
	}
}

// TestPlanSaysWhereItsPiecesWereCoarsened: a tree's plan of every lane,
// made to be checked and folded, makes its pieces coarser than NCCL's
// where every lane would not fit at NCCL's in a sixteenth of
// ops.MaxPlanSteps (128 ranks × 16 channels, 64 MiB), and says which chunk
// NCCL uses (Plan.FineChunk), so that what runs can be made again at it;
// where they fit (2 MiB), FineChunk is 0.
func TestPlanSaysWhereItsPiecesWereCoarsened(t *testing.T) {
	tp := try(topology.Resolve("dgx-h100x16,rail=true"))(t)
	tu := try(nccl.NewTuner(tp, nccl.Options{Algos: []nccl.Algo{nccl.Tree}, Protos: []ops.Protocol{ops.ProtoLL128}}))(t)
	plan := func(bytes int) *ops.Plan {
		p, _, err := tu.Plan(ops.Spec{Op: ops.AllReduce, Ranks: tp.NumGPUs(), Count: bytes / 4, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := plan(2 << 20); p.FineChunk != 0 {
		t.Errorf("2 MiB: chunk %d, FineChunk %d; want 0: its lanes fit", p.Chunk, p.FineChunk)
	}
	if p := plan(64 << 20); p.FineChunk <= 0 || p.FineChunk >= p.Chunk || p.NumSteps() > ops.MaxPlanSteps/16 {
		t.Errorf("64 MiB: chunk %d, FineChunk %d, %d steps; want a finer chunk than the plan's and at most %d steps", p.Chunk, p.FineChunk, p.NumSteps(), ops.MaxPlanSteps/16)
	}
}
