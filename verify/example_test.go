package verify_test

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// Run a reduce-scatter on a simulated switch, in place, with the input
// pattern of commsim bench --check, and judge every rank's output.
func Example() {
	topo, err := topology.Parse("switch:4")
	if err != nil {
		panic(err)
	}
	cl, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	w := cl.World()

	c := verify.Case{Spec: ops.Spec{Op: ops.ReduceScatter, Algo: "ring", Ranks: 4, Count: 1000, DType: hw.F16, Redop: hw.Sum}, Topo: "switch:4"}
	if c.Inputs, err = verify.PatternInputs(c.Spec); err != nil {
		panic(err)
	}
	res, err := verify.Run(ops.NewExecutor(w), w, c, true)
	if err != nil {
		panic(err)
	}
	wrong, _, err := verify.CountWrong(c, res.Outputs)
	fmt.Printf("%v: %d wrong, %v\n", c, wrong, err)

	res.Outputs[2][1] ^= 0x40 // an exponent bit of rank 2's first element
	fmt.Println(verify.CheckReference(c, res.Outputs) != nil)
	// Output:
	// reducescatter/ring p=4 count=1000 f16 sum on switch:4: 0 wrong, <nil>
	// true
}
