package metal_test

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/metal"
	"github.com/commsim/commsim/ops"
)

// Four virtual ranks share the Mac's GPU and run a recursive-halving
// all-reduce plan, bit for bit as the simulator does.
func ExampleNewWorld() {
	w, closeWorld, err := metal.NewWorld(4)
	if err != nil {
		fmt.Println(err) // elsewhere: "metal backend: needs macOS with a Metal GPU"
		return
	}
	defer closeWorld()
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "rhd", Ranks: 4, Count: 1 << 20, DType: hw.F16, Redop: hw.Sum})
	if err != nil {
		fmt.Println(err)
		return
	}
	bufs := make([]hw.Slice, 4)
	for r, dev := range w.Devices() {
		b, err := dev.Alloc(hw.F16, plan.InLen)
		if err != nil {
			fmt.Println(err)
			return
		}
		bufs[r] = hw.Whole(b)
	}
	secs, err := ops.NewExecutor(w).Run(plan, bufs, bufs)
	fmt.Println(secs, err)
}
