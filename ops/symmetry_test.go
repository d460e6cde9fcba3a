package ops_test

import (
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// TestSymmetryFindsTheGroup: rings rotate, recursive halving and doubling
// exchange by xor, and plans that differ between ranks are not symmetric.
func TestSymmetryFindsTheGroup(t *testing.T) {
	for _, tc := range []struct {
		spec ops.Spec
		want string
	}{
		{ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 8, Count: 64}, "rotation"},
		{ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 8, Count: 63}, "none"}, // uneven chunks
		{ops.Spec{Op: ops.AllReduce, Algo: "rhd", Ranks: 8, Count: 64}, "xor"},
		{ops.Spec{Op: ops.AllReduce, Algo: "rhd", Ranks: 6, Count: 60}, "none"}, // folds ranks 4 and 5 in
		{ops.Spec{Op: ops.AllToAll, Algo: "pairwise", Ranks: 5, Count: 3}, "rotation"},
		{ops.Spec{Op: ops.AllReduce, Algo: "tree", Ranks: 8, Count: 64}, "none"},
		{ops.Spec{Op: ops.Broadcast, Algo: "ring", Ranks: 8, Count: 64}, "none"},
		{ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 130, Count: 260}, "rotation"},
		{ops.Spec{Op: ops.AllReduce, Algo: "rhd", Ranks: 128, Count: 256}, "xor"},
		{ops.Spec{Op: ops.Gather, Algo: "direct", Ranks: 130, Count: 2}, "none"},
	} {
		// Held plans are checked step by step, streamed ones by Compile's
		// count, on several cores at 130 ranks.
		tc.spec.DType, tc.spec.Redop = hw.F32, hw.Sum
		for _, streamed := range []bool{false, true} {
			compile := ops.Compile
			if streamed {
				compile = ops.CompileStreamed
			}
			plan, err := compile(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if got := plan.Symmetry().String(); plan.Streamed() != streamed || got != tc.want {
				t.Errorf("%v (streamed %v): %s, want %s", tc.spec, plan.Streamed(), got, tc.want)
			}
		}
	}
}

// TestMirrorsInBlocks: NCCL's ring all-gather on 4 nodes of 8, whose way
// through a node alternates from node to node, maps onto itself under a
// shift by 16 ranks, not by 8, nor under any rank renaming (Symmetry); a
// block that does not divide the ranks, or all of them, is refused; and a
// pairwise all-to-all, shift-symmetric by 2, is refused there because a
// lane of rank 0 sends to ranks 1 and 3, whom one rank stands for on a
// mirror of 2 (their messages would share one connection's buffer).
func TestMirrorsInBlocks(t *testing.T) {
	ring, err := ops.Compile(ops.Spec{Op: ops.AllGather, Algo: "nccl-ring", Ranks: 32, NodeRanks: 8, Count: 1024, DType: hw.F32, Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ring.Symmetry() != ops.NotSymmetric {
		t.Errorf("NCCL's ring: symmetric under %v, want none", ring.Symmetry())
	}
	for block, want := range map[int]bool{16: true, 8: false, 3: false, 32: false, 0: false} {
		if got := ring.MirrorsInBlocks(block); got != want {
			t.Errorf("NCCL's ring by %d: %v, want %v", block, got, want)
		}
	}
	a2a, err := ops.Compile(ops.Spec{Op: ops.AllToAll, Algo: "pairwise", Ranks: 4, Count: 8, DType: hw.F32})
	if err != nil {
		t.Fatal(err)
	}
	if a2a.MirrorsInBlocks(2) {
		t.Error("pairwise all-to-all by 2: true, want false (one lane sends to ranks 1 and 3)")
	}
}
