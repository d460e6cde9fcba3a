package ops

import (
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestCountingFindsTheOddRank: Compile's count of a streamed plan checks
// every rank against rank 0, on several cores; one rank that sends with
// another tag (and its successor, which receives it) makes the plan not
// symmetric, wherever it lies.
func TestCountingFindsTheOddRank(t *testing.T) {
	const p = 130
	ringWithOdd := func(odd int) generator {
		return func(b *builder) error {
			for r := range b.ranks() {
				var sendTag, recvTag uint32
				if r == odd {
					sendTag = 1
				}
				if odd >= 0 && r == (odd+1)%p {
					recvTag = 1
				}
				b.send(r, (r+1)%p, ref(In, 0, 1), sendTag)
				b.recv(r, (r+p-1)%p, ref(Out, 0, 1), recvTag)
			}
			return nil
		}
	}
	spec := Spec{Op: AllReduce, Algo: "ring", Ranks: p, Count: 1, DType: hw.F32, Redop: hw.Sum}
	for _, tc := range []struct {
		odd  int
		want Symmetry
	}{{-1, Rotation}, {1, NotSymmetric}, {77, NotSymmetric}, {p - 1, NotSymmetric}} {
		plan, err := compile(spec, ringWithOdd(tc.odd), 1, 1, -1)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Streamed() || plan.Symmetry() != tc.want || plan.SymmetricUnder(Xor) {
			t.Errorf("odd rank %d: streamed %v, symmetry %d, want %d", tc.odd, plan.Streamed(), plan.Symmetry(), tc.want)
		}
	}
}
