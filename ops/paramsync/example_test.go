package paramsync_test

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops/paramsync"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// Two data-parallel ranks on the simulator synchronise one replicated
// parameter (averaged by all-reduce) and one sharded one (averaged by
// reduce-scatter: each rank keeps its half). Rank r's gradients are all
// r+1, so every average is 1.5. Sharded and replicated parameters never
// share a bucket. On a switch of 1 µs links (2 µs a hop) the buckets run
// one after the other on each rank's stream: the reduce-scatter's one
// hop, then the all-reduce's two.
func Example() {
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
	s, err := paramsync.Start(c.World(), paramsync.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	params := []paramsync.Param{
		{ID: "layer0.weight", Len: 4, DType: hw.F32},
		{ID: "embedding", Len: 4, DType: hw.F32, Sharded: true},
	}
	grads := make([][]hw.Buffer, 2)
	for r, d := range c.Devices() {
		if err := s.Register(r, params); err != nil {
			fmt.Println(err)
			return
		}
		for _, p := range params {
			b, _ := d.Alloc(p.DType, p.Len)
			b.Write(hw.Encode([]float32{float32(r + 1), float32(r + 1), float32(r + 1), float32(r + 1)}))
			grads[r] = append(grads[r], b)
		}
	}
	// Backward produces the last layers' gradients first; any order works.
	for r := range 2 {
		for i := len(params) - 1; i >= 0; i-- {
			if err := s.SubmitGradient(r, params[i].ID, grads[r][i], nil); err != nil {
				fmt.Println(err)
				return
			}
		}
	}
	for r := range 2 {
		if err := s.Sync(r); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Printf("%d bucket(s), done at %v simulated\n", len(s.Buckets()), c.Now())
	for r := range 2 {
		for i, p := range params {
			raw := make([]byte, 4*p.Len)
			grads[r][i].Read(raw)
			vals, _ := hw.ToFloat64s(p.DType, raw)
			if p.Sharded {
				half := p.Len / 2
				vals = vals[r*half : (r+1)*half]
			}
			fmt.Printf("rank %d %s: %v\n", r, p.ID, vals)
		}
	}
	// Output:
	// 2 bucket(s), done at 6.000240us simulated
	// rank 0 layer0.weight: [1.5 1.5 1.5 1.5]
	// rank 0 embedding: [1.5 1.5]
	// rank 1 layer0.weight: [1.5 1.5 1.5 1.5]
	// rank 1 embedding: [1.5 1.5]
}
