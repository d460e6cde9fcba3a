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
