package sim

import (
	"math"
	"testing"
)

var inf = math.Inf(1)

// flowRig drives the engine and fabric directly, below the hw layer, so the
// network model can be checked against hand calculations.
type flowRig struct {
	eng engine
	fab fabric
}

func newFlowRig() *flowRig {
	r := &flowRig{}
	r.fab.eng = &r.eng
	r.eng.settle = r.fab.settle
	return r
}

// gbps makes a link of bw GB/s (10^9 bytes per second).
func gbps(id int, bw float64) *link {
	return &link{id: id, capacity: bw * 1e9 / float64(Second)}
}

// finishRecorder remembers when its flow finished.
type finishRecorder struct{ at Time }

func (f *finishRecorder) flowDone(now Time, _ *op) { f.at = now }

// start begins a flow at the current time and returns where its finish time
// will be written.
func (r *flowRig) start(links []*link, lat Time, n float64) *Time {
	rec := &finishRecorder{at: -1}
	r.fab.start(links, lat, n, rec, nil)
	return &rec.at
}

func (r *flowRig) run() {
	for r.eng.step() {
	}
}

func TestUncontendedTransferIsLatencyPlusSizeOverBandwidth(t *testing.T) {
	r := newFlowRig()
	// 1 MB over two 100 GB/s links with 0.5 us each:
	// 1 us + 1e6 B / 1e11 B/s = 1 us + 10 us = 11 us.
	a, b := gbps(0, 100), gbps(1, 100)
	got := r.start([]*link{a, b}, 1*Microsecond, 1e6)
	r.run()
	if want := 11 * Microsecond; *got != want {
		t.Fatalf("finish = %v, want %v", *got, want)
	}
}

func TestBottleneckIsSlowestLink(t *testing.T) {
	r := newFlowRig()
	// 1e6 B at min(100, 25) GB/s = 40 us, plus 2 us latency.
	got := r.start([]*link{gbps(0, 100), gbps(1, 25)}, 2*Microsecond, 1e6)
	r.run()
	if want := 42 * Microsecond; *got != want {
		t.Fatalf("finish = %v, want %v", *got, want)
	}
}

func TestTwoFlowsOnOneLinkGetHalfEach(t *testing.T) {
	r := newFlowRig()
	l := gbps(0, 100)
	// Each gets 50 GB/s: 1e6 B takes 20 us.
	a := r.start([]*link{l}, 0, 1e6)
	b := r.start([]*link{l}, 0, 1e6)
	r.run()
	if want := 20 * Microsecond; *a != want || *b != want {
		t.Fatalf("finish = %v and %v, want both %v", *a, *b, want)
	}
}

func TestShortFlowLeavesBandwidthToLongOne(t *testing.T) {
	r := newFlowRig()
	l := gbps(0, 100)
	// Both at 50 GB/s until the short one (0.5 MB) ends at 10 us; the long
	// one (1.5 MB) has 1 MB left, alone at 100 GB/s: 10 us more.
	short := r.start([]*link{l}, 0, 5e5)
	long := r.start([]*link{l}, 0, 1.5e6)
	r.run()
	if *short != 10*Microsecond || *long != 20*Microsecond {
		t.Fatalf("finish = %v and %v, want 10us and 20us", *short, *long)
	}
}

func TestThreeFlowProgressiveFilling(t *testing.T) {
	r := newFlowRig()
	// L1 = 10 GB/s carries A and B; L2 = 30 GB/s carries B and C.
	// Filling: L1's share 5 < L2's 15, so A = B = 5 GB/s; C takes the
	// rest of L2, 25 GB/s.
	// A, B: 5e4 B at 5 GB/s = 10 us. By then C moved 2.5e5 of 5e5 B; the
	// rest goes at 30 GB/s: 2.5e5/3e10 s = 8.3333 us, rounded to the
	// picosecond: 18,333,333 ps.
	l1, l2 := gbps(1, 10), gbps(2, 30)
	a := r.start([]*link{l1}, 0, 5e4)
	b := r.start([]*link{l1, l2}, 0, 5e4)
	c := r.start([]*link{l2}, 0, 5e5)
	r.run()
	if *a != 10*Microsecond || *b != 10*Microsecond {
		t.Fatalf("A, B finish = %v, %v, want 10us", *a, *b)
	}
	if want := Time(18_333_333); *c != want {
		t.Fatalf("C finish = %v, want %v", *c, want)
	}
}

func TestOppositeDirectionsDoNotContend(t *testing.T) {
	r := newFlowRig()
	// A full-duplex link is two capacities, one per direction.
	fwd, rev := gbps(0, 100), gbps(1, 100)
	a := r.start([]*link{fwd}, Microsecond, 1e6)
	b := r.start([]*link{rev}, Microsecond, 1e6)
	r.run()
	if *a != 11*Microsecond || *b != 11*Microsecond {
		t.Fatalf("finish = %v and %v, want both 11us", *a, *b)
	}
}

func TestLatencyPhaseUsesNoBandwidth(t *testing.T) {
	r := newFlowRig()
	l := gbps(0, 100)
	// The first flow drains 1e6 B in [0, 10us]. The second spends 10 us in
	// latency, so it never overlaps: 10 + 10 = 20 us.
	a := r.start([]*link{l}, 0, 1e6)
	b := r.start([]*link{l}, 10*Microsecond, 1e6)
	r.run()
	if *a != 10*Microsecond || *b != 20*Microsecond {
		t.Fatalf("finish = %v and %v, want 10us and 20us", *a, *b)
	}
}

func TestZeroByteFlowTakesOnlyLatency(t *testing.T) {
	r := newFlowRig()
	got := r.start([]*link{gbps(0, 1)}, 3*Microsecond, 0)
	r.run()
	if *got != 3*Microsecond {
		t.Fatalf("finish = %v, want 3us", *got)
	}
}

func TestUnlimitedLinkNeverBottlenecks(t *testing.T) {
	r := newFlowRig()
	free := &link{id: 9, capacity: inf}
	got := r.start([]*link{free, gbps(0, 100)}, 0, 1e6)
	alone := r.start([]*link{free}, 0, 1e9)
	r.run()
	if *got != 10*Microsecond || *alone != 0 {
		t.Fatalf("finish = %v and %v, want 10us and 0", *got, *alone)
	}
}

func TestManyFlowsShareFairly(t *testing.T) {
	r := newFlowRig()
	l := gbps(0, 64)
	var done []*Time
	for range 64 {
		done = append(done, r.start([]*link{l}, 0, 1e6))
	}
	r.run()
	// 64 flows of 1e6 B at 1 GB/s each: 1 ms.
	for i, d := range done {
		if *d != Millisecond {
			t.Fatalf("flow %d finish = %v, want 1ms", i, *d)
		}
	}
}

func TestChangesResolveOnlyConnectedFlows(t *testing.T) {
	r := newFlowRig()
	shared, apart := gbps(0, 100), gbps(1, 100)
	for range 10 {
		r.start([]*link{apart}, 0, 1e9)
	}
	r.eng.step() // the ten start together: one solve of ten flows
	before := r.fab.resolved
	r.start([]*link{shared}, 0, 1e3)
	r.start([]*link{shared}, 0, 1e3)
	r.eng.step()
	if got := r.fab.resolved - before; got != 2 {
		t.Fatalf("starting two flows on another link re-solved %d flows, want 2", got)
	}
}

// TestRepeatedCrossingsTakeTheRateOncePerCrossing: a flow that crosses a
// link more than once (a switch operation on a folded cluster: see
// flow.repeats) takes its rate there once per crossing, as the flows it
// stands for would, alone and beside others; and leaving the link, in
// any order, keeps every other flow's place on it.
func TestRepeatedCrossingsTakeTheRateOncePerCrossing(t *testing.T) {
	r := newFlowRig()
	a, b := gbps(0, 100), gbps(1, 100)
	repeat := func(links []*link, n float64) *Time {
		rec := &finishRecorder{at: -1}
		r.fab.start(links, 0, n, rec, nil).repeats = true
		return &rec.at
	}
	// Alone, crossing a twice: 50 GB/s, 1 MB in 20 us.
	alone := repeat([]*link{a, b, a}, 1e6)
	r.run()
	if want := 20 * Microsecond; *alone != want {
		t.Errorf("alone: finish %v, want %v", *alone, want)
	}
	// Three crossings of a, one by another flow: a quarter each. The
	// single one (250 KB at 25 GB/s) ends at 10 us; then 1.25 MB of the
	// repeated flow's 1.5 MB are left, at 100/3 GB/s: 37.5 us more.
	r = newFlowRig()
	a, b = gbps(0, 100), gbps(1, 100)
	many := repeat([]*link{a, a, b, a}, 1.5e6)
	single := r.start([]*link{a}, 0, 0.25e6)
	r.run()
	if *single != 10*Microsecond || *many != 47500*Nanosecond {
		t.Errorf("finishes %v and %v, want 10us and 47.5us", *single, *many)
	}
	// Flows leave a link whose list holds repeated crossings in any
	// order: every place stays right (detach would index out of range or
	// leave a finished flow on the link). Flows of 3, 1, 2, 3 and 1
	// crossings start 1 us apart, with their sizes in every order.
	crossings := []int{3, 1, 2, 3, 1}
	sizes := []float64{1e5, 2e5, 3e5, 4e5, 5e5}
	var permute func(k int)
	permute = func(k int) {
		if k < len(sizes) {
			for i := k; i < len(sizes); i++ {
				sizes[k], sizes[i] = sizes[i], sizes[k]
				permute(k + 1)
				sizes[k], sizes[i] = sizes[i], sizes[k]
			}
			return
		}
		r = newFlowRig()
		a := gbps(0, 100)
		var ends []*Time
		for i, n := range crossings {
			links := make([]*link, n)
			for j := range links {
				links[j] = a
			}
			rec := &finishRecorder{at: -1}
			r.fab.start(links, Time(i)*Microsecond, sizes[i], rec, nil).repeats = true
			ends = append(ends, &rec.at)
		}
		r.run()
		if len(a.flows) != 0 {
			t.Fatalf("sizes %v: %d flows left on the link", sizes, len(a.flows))
		}
		for i, end := range ends {
			if *end <= 0 {
				t.Fatalf("sizes %v: flow %d never finished", sizes, i)
			}
		}
	}
	permute(0)
}
