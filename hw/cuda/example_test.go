package cuda_test

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda"
	"github.com/commsim/commsim/ops"
)

// Eight virtual ranks on GPU 0 run a ring all-reduce plan: the same plan,
// and the same bits, as on the simulator.
func ExampleNewWorld() {
	w, closeWorld, err := cuda.NewWorld(8, cuda.Virtual)
	if err != nil {
		fmt.Println(err) // e.g. no driver: "cuda backend: no usable NVIDIA driver: …"
		return
	}
	defer closeWorld()
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 8, Count: 1 << 20, DType: hw.BF16, Redop: hw.Sum})
	if err != nil {
		fmt.Println(err)
		return
	}
	bufs := make([]hw.Slice, 8)
	for r, dev := range w.Devices() {
		b, err := dev.Alloc(hw.BF16, plan.InLen)
		if err != nil {
			fmt.Println(err)
			return
		}
		bufs[r] = hw.Whole(b) // in place: input and output are one buffer
	}
	secs, err := ops.NewExecutor(w).Run(plan, bufs, bufs)
	fmt.Println(secs, err)
}
