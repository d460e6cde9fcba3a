package ops

import (
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestCountingFindsTheOddRank: Compile's count of a streamed plan checks
// every rank against rank 0, on several cores; one rank whose peer differs
// makes the plan not symmetric, wherever it lies.
func TestCountingFindsTheOddRank(t *testing.T) {
	const p = 130
	ringWithOdd := func(odd int) generator {
		return func(b *builder) error {
			for r := range b.ranks() {
				to := (r + 1) % p
				if r == odd {
					to = (r + 2) % p
				}
				b.send(r, to, ref(In, 0, 1), 0)
				b.recv(r, (r+p-1)%p, ref(Out, 0, 1), 0)
			}
			return nil
		}
	}
	spec := Spec{Op: AllReduce, Algo: "ring", Ranks: p, Count: 1, DType: hw.F32, Redop: hw.Sum}
	defer StreamEverything()()
	for _, tc := range []struct {
		odd  int
		want rankMap
	}{{-1, rotation}, {1, notSymmetric}, {77, notSymmetric}, {p - 1, notSymmetric}} {
		plan, err := compileStreamable(spec, ringWithOdd(tc.odd), 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Streamed() || plan.symmetry() != tc.want {
			t.Errorf("odd rank %d: streamed %v, symmetry %d, want %d", tc.odd, plan.Streamed(), plan.symmetry(), tc.want)
		}
	}
}
