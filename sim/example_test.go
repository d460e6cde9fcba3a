package sim_test

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// A 1 MB send across a switch: two 1 us links at 100 GB/s take
// 2 us + 1e6 B / 1e11 B/s = 12 us, and the data arrives.
func ExampleCluster() {
	topo, err := topology.Parse("switch:2,bw=100GB/s,lat=1us")
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	d := c.Devices()
	src, _ := d[0].Alloc(hw.F32, 250_000)
	dst, _ := d[1].Alloc(hw.F32, 250_000)
	src.Write(hw.Encode(make([]float32, 250_000)))
	s0, _ := d[0].NewStream()
	s1, _ := d[1].NewStream()
	s0.Send(hw.Whole(src), d[1], 0)
	s1.Recv(hw.Whole(dst), d[0], 0)
	if err := s1.Synchronize(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Now())
	// Output: 12.000000us
}

// A receive that no one sends to is reported, not hung.
func ExampleDeadlockError() {
	topo, _ := topology.Parse("ring:2")
	c, _ := sim.NewCluster(topo, sim.Config{})
	d := c.Devices()
	buf, _ := d[1].Alloc(hw.I32, 4)
	s, _ := d[1].NewStream()
	s.Recv(hw.Whole(buf), d[0], 9)
	fmt.Println(s.Synchronize())
	// Output:
	// sim: deadlock at 0.000000us: 1 stream(s) can never finish:
	//   rank 1 (sim:gpu1) stream 0 blocked at op #0: recv 4 x i32 (16 bytes) from rank 0 (sim:gpu0) tag 0x9 (0 more queued)
}
