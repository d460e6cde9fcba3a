package sim

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/topology"
)

// BenchmarkDisjointFlows starts n flows that share no link at one instant
// and runs them to completion. flow-events/s counts each flow's start and
// end: the figure the simulator's speed target is stated in. "step" flows
// have one size, as in a step of a collective, so they also end together;
// "staggered" flows all differ in size, so each ends at its own instant.
func BenchmarkDisjointFlows(b *testing.B) {
	for _, tc := range []struct {
		n       int
		stagger float64
	}{{1024, 0}, {16384, 0}, {1024, 1}, {16384, 1}} {
		n := tc.n
		name := fmt.Sprintf("step/%d", n)
		if tc.stagger != 0 {
			name = fmt.Sprintf("staggered/%d", n)
		}
		b.Run(name, func(b *testing.B) {
			links := make([]*link, n)
			for i := range links {
				links[i] = gbps(i, 100)
			}
			paths := make([][]*link, n)
			for i := range paths {
				paths[i] = links[i : i+1]
			}
			// One rig for all iterations: a long simulation, where finished
			// flows are reused.
			r := newFlowRig()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				for i := range n {
					r.fab.start(paths[i], Microsecond, 1e6+tc.stagger*float64(i), nil, nil)
				}
				r.run()
			}
			b.ReportMetric(float64(2*n*b.N)/b.Elapsed().Seconds(), "flow-events/s")
		})
	}
}

// BenchmarkSharedLink runs 64 flows of different sizes over one link, so
// every start and end re-solves all of them.
func BenchmarkSharedLink(b *testing.B) {
	const n = 64
	l := gbps(0, 100)
	path := []*link{l}
	r := newFlowRig()
	b.ReportAllocs()
	for range b.N {
		for i := range n {
			r.fab.start(path, Time(i)*Nanosecond, float64(1000*(i+1)), nil, nil)
		}
		r.run()
	}
	b.ReportMetric(float64(2*n*b.N)/b.Elapsed().Seconds(), "flow-events/s")
}

// BenchmarkChainedFlows runs n flows of different sizes, flow i over
// links i and i+1 of a chain and a slower channel of its own, as the steps
// of a pipelined collective cross its GPUs' links: one component joined
// across the whole chain, where no link is tight. "local" settles each
// start and end on the flow's own links (fabric.settleLocally), "solved"
// re-solves the component, as every change did before: their ratio is
// the gain in the same run.
//
//	go test -run X -bench ChainedFlows ./sim/
func BenchmarkChainedFlows(b *testing.B) {
	const n = 1024
	for _, way := range []string{"local", "solved"} {
		b.Run(way, func(b *testing.B) {
			chain := make([]*link, n+1)
			for i := range chain {
				chain[i] = gbps(i, 900)
			}
			paths := make([][]*link, n)
			for i := range paths {
				paths[i] = []*link{chain[i], chain[i+1], gbps(n+1+i, 22.5)}
			}
			r := newFlowRig()
			r.fab.faulted = way == "solved" // turns settleLocally off
			b.ReportAllocs()
			for range b.N {
				for i := range n {
					r.fab.start(paths[i], Microsecond, 1e6+float64(i), nil, nil)
				}
				r.run()
			}
			b.ReportMetric(float64(2*n*b.N)/b.Elapsed().Seconds(), "flow-events/s")
		})
	}
}

// BenchmarkRingSends measures the whole hw path: every rank of a ring sends
// to its successor (disjoint links) through streams, sends and receives.
func BenchmarkRingSends(b *testing.B) {
	for _, n := range []int{1024, 16384} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			topo, err := topology.Parse(fmt.Sprintf("ring:%d", n))
			if err != nil {
				b.Fatal(err)
			}
			c, err := NewCluster(topo, Config{TimingOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			d := c.Devices()
			streams := make([]hw.Stream, n)
			bufs := make([]hw.Buffer, n)
			for r := range n {
				streams[r], _ = d[r].NewStream()
				bufs[r], _ = d[r].Alloc(hw.F32, 1<<20)
			}
			round := func() {
				for r := range n {
					if err := streams[r].Send(hw.Whole(bufs[r]), d[(r+1)%n], 0); err != nil {
						b.Fatal(err)
					}
					if err := streams[r].Recv(hw.Whole(bufs[r]), d[(r+n-1)%n], 0); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.Run(); err != nil {
					b.Fatal(err)
				}
			}
			round() // routes are computed once per pair; time the steady state
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				round()
			}
			b.ReportMetric(float64(2*n*b.N)/b.Elapsed().Seconds(), "flow-events/s")
		})
	}
}

// BenchmarkIdleRankMemory reports the heap bytes per rank of a timing-only
// cluster of 16,384 ranks on one switch: the topology, the devices and one
// stream and one phantom buffer per rank.
func BenchmarkIdleRankMemory(b *testing.B) {
	const n = 16384
	var perRank, clusterOnly float64
	for range b.N {
		runtime.GC()
		var before, mid, after runtime.MemStats
		runtime.ReadMemStats(&before)
		topo, err := topology.Parse(fmt.Sprintf("switch:%d", n))
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&mid)
		c, err := NewCluster(topo, Config{TimingOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		keep := make([]any, 0, 2*n)
		for _, d := range c.Devices() {
			s, _ := d.NewStream()
			buf, _ := d.Alloc(hw.F32, 1<<20)
			keep = append(keep, s, buf)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perRank = float64(after.HeapAlloc-before.HeapAlloc) / n
		clusterOnly = float64(after.HeapAlloc-mid.HeapAlloc) / n
		runtime.KeepAlive(keep)
		runtime.KeepAlive(c)
	}
	b.ReportMetric(perRank, "bytes/rank")
	b.ReportMetric(clusterOnly, "sim-bytes/rank")
}
