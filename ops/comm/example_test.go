package comm_test

import (
	"errors"
	"fmt"
	"sync"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/comm"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// Four ranks, a goroutine each, all-reduce their buffers in place, as
// they would call ncclAllReduce: the call returns once every rank has
// made it and the collective has run, with its simulated time (a ring of
// 4 ranks makes 6 steps of one 2 µs hop each).
func Example() {
	topo, _ := topology.Parse("switch:4,bw=100GB/s,lat=1us")
	c, _ := sim.NewCluster(topo, sim.Config{})
	cm, err := comm.New(c.World(), comm.Config{Algo: "ring"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cm.Close()
	bufs := make([]hw.Buffer, 4)
	for r, d := range c.Devices() {
		bufs[r], _ = d.Alloc(hw.F32, 4)
		bufs[r].Write(hw.Encode([]float32{float32(r), 1, 2, 3}))
	}
	seconds := make([]float64, 4)
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			call := comm.Call{Op: ops.AllReduce, Count: 4, DType: hw.F32, Redop: hw.Sum}
			secs, err := cm.Do(r, call, hw.Whole(bufs[r]), hw.Whole(bufs[r]))
			if err != nil {
				fmt.Println(err)
			}
			seconds[r] = secs
		})
	}
	wg.Wait()
	raw := make([]byte, 16)
	bufs[3].Read(raw)
	vals, _ := hw.ToFloat64s(hw.F32, raw)
	fmt.Printf("rank 3 holds %v after %.3f µs\n", vals, seconds[3]*1e6)
	// Output: rank 3 holds [6 4 8 12] after 12.000 µs
}

// Ranks that ask for different collectives in the same slot get an
// error naming each rank's call before any data moves, where NCCL leaves
// the outcome undefined.
func ExampleMismatchError() {
	topo, _ := topology.Parse("switch:2")
	c, _ := sim.NewCluster(topo, sim.Config{})
	cm, _ := comm.New(c.World(), comm.Config{})
	defer cm.Close()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, d := range c.Devices() {
		buf, _ := d.Alloc(hw.F32, 8)
		wg.Go(func() {
			call := comm.Call{Op: ops.AllReduce, Count: 8 - 4*r, DType: hw.F32, Redop: hw.Sum}
			_, errs[r] = cm.Do(r, call, hw.Whole(buf), hw.Whole(buf))
		})
	}
	wg.Wait()
	var m *comm.MismatchError
	fmt.Println(errors.As(errs[0], &m), errors.As(errs[1], &m))
	fmt.Println(m)
	// Output:
	// true true
	// comm: slot 0: ranks disagree: rank 0 asked for allreduce count=8 f32 sum algo=ring; rank 1 asked for allreduce count=4 f32 sum algo=ring
}
