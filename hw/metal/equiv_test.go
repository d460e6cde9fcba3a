package metal

import (
	"fmt"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/proptest"
	"github.com/commsim/commsim/sim"
)

// checkEquivalenceMatrix runs proptest's equivalence harness (the
// simulator as reference, test under test; out of place and in place) on
// every op x algorithm x dtype x reduce op, perCase generated cases each,
// with 2 to 8 ranks. f64 is left out: Metal has no 64-bit floats.
func checkEquivalenceMatrix(t *testing.T, test proptest.Backend, perCase, maxElems int) {
	t.Logf("f64 is skipped in every combination: %v", ErrF64)
	ref := proptest.SimBackend(sim.Config{})
	for _, op := range ops.Ops() {
		redops := []hw.ReduceOp{0} // a collective without reduction: any
		if op.Reduces() {
			redops = hw.ReduceOps()
		}
		dtypes := kernelDTypes
		if op == ops.Barrier {
			dtypes = dtypes[:1] // a barrier moves no data
		}
		for _, algo := range ops.AlgorithmsFor(op) {
			for _, dt := range dtypes {
				for _, rop := range redops {
					name := fmt.Sprintf("%s/%s/%s", op, algo, dt)
					if op.Reduces() {
						name += "/" + rop.String()
					}
					t.Run(name, func(t *testing.T) {
						o := proptest.GenOptions{MinRanks: 2, MaxRanks: 8, Ops: []ops.Op{op}, Algos: []string{algo},
							DTypes: []hw.DType{dt}, MaxElems: maxElems, TopoKinds: []string{"switch"}}
						if op.Reduces() {
							o.Redops = []hw.ReduceOp{rop}
						}
						proptest.CheckEquivalence(t, ref, test,
							proptest.EquivalenceCases(proptest.GenCase(o)), proptest.EquivalenceTests(perCase))
					})
				}
			}
		}
	}
}
