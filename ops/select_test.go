package ops_test

import (
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// TestSelectCostsStreamedPlans: auto prices every candidate, streamed or
// held. On a ring of 1024 GPUs at 1 GiB the ring plan (5M steps, streamed)
// is the cheapest by far; it used to be dropped for want of held steps,
// leaving rhd, 312 times slower.
func TestSelectCostsStreamedPlans(t *testing.T) {
	spec := ops.Spec{Op: ops.AllReduce, Ranks: 1024, Count: 1 << 28, DType: hw.F32, Redop: hw.Sum}
	plan, cands, err := ops.Select(spec, mustTopo(t, "ring:1024"))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Algo != "ring" || !plan.Streamed() {
		t.Errorf("auto picked %s (streamed %v), want the streamed ring", plan.Algo, plan.Streamed())
	}
	for _, c := range cands {
		if c.Err != nil {
			t.Errorf("%s: %v", c.Algo, c.Err)
		}
		t.Logf("%-8s %12.1f us", c.Algo, c.Cost*1e6)
	}
}
