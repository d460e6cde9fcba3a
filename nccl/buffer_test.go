package nccl_test

import (
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
		tp, err := topology.Resolve(tc.topo)
		if err != nil {
			t.Fatal(err)
		}
		o := nccl.Options{Protos: []ops.Protocol{tc.proto}}
		if tc.algo != nccl.P2P {
			o.Algos = []nccl.Algo{tc.algo}
		}
		tu, err := nccl.NewTuner(tp, o)
		if err != nil {
			t.Fatal(err)
		}
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
