package sim_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// switchRig is a cluster with one buffer of n f32 and one stream per rank.
type switchRig struct {
	c    *sim.Cluster
	devs []*sim.Device
	bufs []hw.Buffer
	strs []*sim.Stream
}

func newSwitchRig(t *testing.T, spec string, cfg sim.Config, n int) *switchRig {
	t.Helper()
	c := newCluster(t, spec, cfg)
	t.Cleanup(func() { c.Close() })
	r := &switchRig{c: c, devs: c.Devices()}
	for _, d := range r.devs {
		r.bufs = append(r.bufs, try(d.Alloc(hw.F32, n))(t))
		r.strs = append(r.strs, try(d.NewStream())(t).(*sim.Stream))
	}
	return r
}

// all is every rank's whole buffer, in rank order.
func (r *switchRig) all() []hw.Slice {
	var out []hw.Slice
	for _, b := range r.bufs {
		out = append(out, hw.Whole(b))
	}
	return out
}

// timed runs enqueue on rank's stream between two events and returns the
// simulated time between them.
func (r *switchRig) timed(t *testing.T, rank int, enqueue func(s *sim.Stream) error) (sim.Time, error) {
	t.Helper()
	d, s := r.devs[rank], r.strs[rank]
	start, end := try(d.NewEvent())(t), try(d.NewEvent())(t)
	ok(t, s.Record(start))
	ok(t, enqueue(s))
	ok(t, s.Record(end))
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	return sim.FromSeconds(try(end.ElapsedSince(start))(t)), nil
}

// TestSwitchReduceCombinesInMemberOrder: a switch reduction writes, on
// the rank that asks, every member's values combined in the order the
// members are given, rounding after each step as hw.ReduceBytes does
// (1e8, −1e8, 1 sums to 1 left to right, to 0 the other way in f32), in
// place as well; a multicast then writes the result into every member.
func TestSwitchReduceCombinesInMemberOrder(t *testing.T) {
	r := newSwitchRig(t, "switch:3,nvls=inf", sim.Config{}, 2)
	for i, v := range [][]float32{{1e8, 2}, {-1e8, 3}, {1, 4}} {
		ok(t, r.bufs[i].Write(hw.Encode(v)))
	}
	// In place: rank 1's destination is its own source.
	ok(t, r.strs[1].SwitchReduce(hw.Sum, hw.Whole(r.bufs[1]), r.all()))
	ok(t, r.strs[1].Multicast(r.all(), hw.Whole(r.bufs[1])))
	ok(t, r.c.Run())
	for i, b := range r.bufs {
		if got := download(t, b); got[0] != 1 || got[1] != 9 {
			t.Errorf("rank %d holds %v, want [1 9]", i, got)
		}
	}
	// Reversed, the same values reduce otherwise: the order is the
	// members'.
	for i, v := range [][]float32{{1e8, 2}, {-1e8, 3}, {1, 4}} {
		ok(t, r.bufs[i].Write(hw.Encode(v)))
	}
	rev := r.all()
	rev[0], rev[2] = rev[2], rev[0]
	ok(t, r.strs[0].SwitchReduce(hw.Sum, hw.Whole(r.bufs[0]), rev))
	ok(t, r.c.Run())
	if got := download(t, r.bufs[0]); got[0] != 0 || got[1] != 9 {
		t.Errorf("reversed: rank 0 holds %v, want [0 9]", got)
	}
}

// TestSwitchOpsTakeTheirWayThroughTheSwitch: alone, a switch operation
// takes its way's latency plus its bytes at the narrowest of its links and,
// for a reduction, the switch's reduction unit; with a Wire, the wire's
// NVLink latency, its bytes grown by the efficiency, and at most its
// rate.
func TestSwitchOpsTakeTheirWayThroughTheSwitch(t *testing.T) {
	const n = 1000 // 4000 bytes
	wire := &sim.Wire{Latency: [3]sim.Time{3 * sim.Microsecond, 9 * sim.Microsecond, 9 * sim.Microsecond}, Efficiency: [3]float64{0.5, 1, 1}}
	capped := *wire
	capped.Rate = 5e9
	for _, tc := range []struct {
		name   string
		spec   string
		reduce bool
		wire   *sim.Wire
		want   sim.Time
	}{
		// 2 links of 1 µs; 4000 B at the switch's 50 GB/s = 80 ns.
		{"reduce, switch-bound", "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", true, nil, 2*sim.Microsecond + 80*sim.Nanosecond},
		// At the links' 100 GB/s = 40 ns.
		{"reduce, link-bound", "switch:4,bw=100GB/s,lat=1us,nvls=inf", true, nil, 2*sim.Microsecond + 40*sim.Nanosecond},
		{"multicast", "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", false, nil, 2*sim.Microsecond + 40*sim.Nanosecond},
		// 3 µs; 8000 wire bytes at 50 GB/s = 160 ns.
		{"reduce, wire", "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", true, wire, 3*sim.Microsecond + 160*sim.Nanosecond},
		{"multicast, wire", "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", false, wire, 3*sim.Microsecond + 80*sim.Nanosecond},
		// 4000 B at the wire's 5 GB/s = 800 ns.
		{"multicast, capped wire", "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", false, &capped, 3*sim.Microsecond + 800*sim.Nanosecond},
	} {
		r := newSwitchRig(t, tc.spec, sim.Config{TimingOnly: true}, n)
		got, err := r.timed(t, 2, func(s *sim.Stream) error {
			o := sim.Op{Kind: sim.OpMulticast, Src: hw.Whole(r.bufs[2]), Members: r.all(), Wire: tc.wire}
			if tc.reduce {
				o = sim.Op{Kind: sim.OpSwitchReduce, Redop: hw.Sum, Dst: hw.Whole(r.bufs[2]), Members: r.all(), Wire: tc.wire}
			}
			return s.Feed(&ops{list: []sim.Op{o}, n: 4})
		})
		if err != nil || got != tc.want {
			t.Errorf("%s: %v (%v), want %v", tc.name, got, err, tc.want)
		}
	}
}

// TestSwitchReductionsShareTheSwitch: two reductions through one switch
// at once share its reduction unit, half of it each; a multicast beside a
// reduction crosses none of it, and shares only links, fairly.
func TestSwitchReductionsShareTheSwitch(t *testing.T) {
	const spec = "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s" // 4000 B: 80 ns alone at the switch's rate
	for _, tc := range []struct {
		name      string
		multicast [2]bool
		want      sim.Time
	}{
		{"two reductions", [2]bool{false, false}, 2*sim.Microsecond + 160*sim.Nanosecond},
		{"a reduction and a multicast", [2]bool{false, true}, 2*sim.Microsecond + 80*sim.Nanosecond},
	} {
		r := newSwitchRig(t, spec, sim.Config{TimingOnly: true}, 1000)
		var starts, ends [2]hw.Event
		for i, cast := range tc.multicast {
			rank := 2 * i
			d, s := r.devs[rank], r.strs[rank]
			starts[i], ends[i] = try(d.NewEvent())(t), try(d.NewEvent())(t)
			ok(t, s.Record(starts[i]))
			if cast {
				ok(t, s.Multicast(r.all(), hw.Whole(r.bufs[rank])))
			} else {
				ok(t, s.SwitchReduce(hw.Max, hw.Whole(r.bufs[rank]), r.all()))
			}
			ok(t, s.Record(ends[i]))
		}
		ok(t, r.c.Run())
		for i := range 2 {
			if got := sim.FromSeconds(try(ends[i].ElapsedSince(starts[i]))(t)); got != tc.want {
				t.Errorf("%s: operation %d took %v, want %v", tc.name, i, got, tc.want)
			}
		}
	}
}

// TestSwitchOpsRefuseBadArguments: a switch operation with no members,
// a member twice, a member of another cluster, a stream whose device is
// not a member, slices that differ in length or dtype, or avg, is refused
// when enqueued, with the reason.
func TestSwitchOpsRefuseBadArguments(t *testing.T) {
	r := newSwitchRig(t, "switch:3,nvls=inf", sim.Config{}, 4)
	other := newSwitchRig(t, "switch:3,nvls=inf", sim.Config{}, 4)
	short := try(r.devs[1].Alloc(hw.F32, 3))(t)
	wide := try(r.devs[1].Alloc(hw.F64, 4))(t)
	members := func(edit func([]hw.Slice) []hw.Slice) []hw.Slice { return edit(r.all()) }
	own := hw.Whole(r.bufs[0])
	for _, tc := range []struct {
		name string
		err  error
		run  func() error
	}{
		{"no members", hw.ErrBadArgument, func() error { return r.strs[0].Multicast(nil, own) }},
		{"a member twice", hw.ErrBadArgument, func() error {
			return r.strs[0].Multicast(members(func(m []hw.Slice) []hw.Slice { m[2] = m[1]; return m }), own)
		}},
		{"a member of another cluster", hw.ErrUnknownPeer, func() error {
			return r.strs[0].Multicast(members(func(m []hw.Slice) []hw.Slice { m[2] = hw.Whole(other.bufs[2]); return m }), own)
		}},
		{"the stream not a member", hw.ErrBadArgument, func() error {
			return r.strs[0].Multicast(members(func(m []hw.Slice) []hw.Slice { return m[1:] }), own)
		}},
		{"a shorter member", hw.ErrSizeMismatch, func() error {
			return r.strs[0].SwitchReduce(hw.Sum, own, members(func(m []hw.Slice) []hw.Slice { m[1] = hw.Whole(short); return m }))
		}},
		{"another dtype", hw.ErrDTypeMismatch, func() error {
			return r.strs[0].SwitchReduce(hw.Sum, own, members(func(m []hw.Slice) []hw.Slice { m[1] = hw.Whole(wide); return m }))
		}},
		{"avg", hw.ErrBadArgument, func() error { return r.strs[0].SwitchReduce(hw.Avg, own, r.all()) }},
	} {
		if err := tc.run(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	ok(t, r.c.Run()) // nothing was queued
}

// TestSwitchOpsNeedAReducingSwitch: where no switch that reduces links
// every member (a switch without nvls, a ring), the operation fails with
// the reason, and no panic.
func TestSwitchOpsNeedAReducingSwitch(t *testing.T) {
	for _, spec := range []string{"switch:3", "ring:3"} {
		r := newSwitchRig(t, spec, sim.Config{}, 4)
		ok(t, r.strs[1].SwitchReduce(hw.Sum, hw.Whole(r.bufs[1]), r.all()))
		err := r.strs[1].Synchronize()
		if !errors.Is(err, topology.ErrRoute) || !strings.Contains(err.Error(), "in-network reduction") {
			t.Errorf("%s: %v, want an error wrapping topology.ErrRoute that names in-network reduction", spec, err)
		}
	}
}

// TestSwitchOpsFailWithTheirWay: a member that crashes before or during a
// switch operation fails it with the crash; a link of its way that goes
// down before or during it fails it too, as it takes no other way.
func TestSwitchOpsFailWithTheirWay(t *testing.T) {
	const spec = "switch:4,bw=100GB/s,lat=1us,nvls=inf" // 400 KB: 4 µs of bytes after 2 µs
	for _, tc := range []struct {
		name  string
		fault sim.Fault
		want  string
	}{
		{"member crashed before", sim.Fault{Kind: sim.RankCrash, Rank: 3}, "member rank 3"},
		{"member crashes during", sim.Fault{Kind: sim.RankCrash, Rank: 3, At: 3 * sim.Microsecond}, "during the switch operation"},
		{"link down before", sim.Fault{Kind: sim.LinkDown, Link: "gpu3-sw0"}, "is down"},
		{"link down during", sim.Fault{Kind: sim.LinkDown, Link: "gpu3-sw0", At: 3 * sim.Microsecond}, "is down"},
	} {
		for _, reduce := range []bool{false, true} {
			r := newSwitchRig(t, spec, sim.Config{}, 100_000)
			ok(t, r.c.Inject(tc.fault))
			ok(t, r.strs[1].Compute(1e-9, "after the fault"))
			if reduce {
				ok(t, r.strs[1].SwitchReduce(hw.Sum, hw.Whole(r.bufs[1]), r.all()))
			} else {
				ok(t, r.strs[1].Multicast(r.all(), hw.Whole(r.bufs[1])))
			}
			err := r.strs[1].Synchronize()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s, reduce %v: %v, want an error naming %q", tc.name, reduce, err, tc.want)
			}
			if tc.fault.Kind == sim.RankCrash && !errors.Is(err, sim.ErrCrashed) {
				t.Errorf("%s: %v does not wrap sim.ErrCrashed", tc.name, err)
			}
		}
	}
}

// TestSwitchOpsInARowPipeline: with a Wire, a switch operation followed
// on its stream by another goes on without waiting to land, as NCCL's
// kernels keep several steps in flight: three multicasts of 4000 bytes
// (8000 on the wire at the links' 100 GB/s, 80 ns each) take 3 × 80 ns
// plus one landing of 3 µs, not three, fed a few at a time or one at a
// time (the next is pulled from the feed); what follows the run (a copy
// of the last multicast's data) waits for every one to land, and sees
// their data; a copy within the run breaks it in two.
func TestSwitchOpsInARowPipeline(t *testing.T) {
	wire := &sim.Wire{Latency: [3]sim.Time{3 * sim.Microsecond, 9 * sim.Microsecond, 9 * sim.Microsecond}, Efficiency: [3]float64{0.5, 1, 1}}
	for _, tc := range []struct {
		batch int
		split bool
		want  sim.Time
	}{
		{4, false, 3*80*sim.Nanosecond + 3*sim.Microsecond},
		{1, false, 3*80*sim.Nanosecond + 3*sim.Microsecond},
		{4, true, 3*80*sim.Nanosecond + 6*sim.Microsecond},
	} {
		r := newSwitchRig(t, "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", sim.Config{}, 3000)
		src, seen := try(r.devs[2].Alloc(hw.F32, 1000))(t), try(r.devs[2].Alloc(hw.F32, 1000))(t)
		ok(t, src.Write(hw.Encode(slices.Repeat([]float32{7}, 1000))))
		at := func(i int) []hw.Slice {
			var out []hw.Slice
			for _, b := range r.bufs {
				out = append(out, hw.Slice{Buf: b, Off: 1000 * i, Len: 1000})
			}
			return out
		}
		list := []sim.Op{
			{Kind: sim.OpMulticast, Src: hw.Whole(src), Members: at(0), Wire: wire},
			{Kind: sim.OpMulticast, Src: hw.Whole(src), Members: at(1), Wire: wire},
			{Kind: sim.OpMulticast, Src: hw.Whole(src), Members: at(2), Wire: wire},
			{Kind: sim.OpCopy, Dst: hw.Whole(seen), Src: at(2)[2]},
		}
		if tc.split {
			list = slices.Insert(list, 2, sim.Op{Kind: sim.OpCopy, Dst: hw.Whole(seen), Src: at(0)[2]})
		}
		got, err := r.timed(t, 2, func(s *sim.Stream) error { return s.Feed(&ops{list: list, n: tc.batch}) })
		if err != nil || got != tc.want {
			t.Errorf("batches of %d, split %v: %v (%v), want %v", tc.batch, tc.split, got, err, tc.want)
		}
		if v := download(t, seen); v[0] != 7 || v[999] != 7 {
			t.Errorf("batches of %d: the copy after the run saw %v %v, want the last multicast's 7s", tc.batch, v[0], v[999])
		}
		for i, b := range r.bufs {
			if v := download(t, b); v[0] != 7 || v[1500] != 7 || v[2999] != 7 {
				t.Errorf("batches of %d: rank %d holds %v %v %v, want 7s", tc.batch, i, v[0], v[1500], v[2999])
			}
		}
	}
	// A slower multicast before a faster one: what follows waits for the
	// slower's landing (9 µs after its 80 ns), not only the last's.
	r := newSwitchRig(t, "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", sim.Config{}, 2000)
	src, seen := try(r.devs[2].Alloc(hw.F32, 1000))(t), try(r.devs[2].Alloc(hw.F32, 1000))(t)
	ok(t, src.Write(hw.Encode(slices.Repeat([]float32{7}, 1000))))
	slow, fast := *wire, *wire
	slow.Latency[0], fast.Latency[0] = 9*sim.Microsecond, sim.Microsecond
	var first, second []hw.Slice
	for _, b := range r.bufs {
		first, second = append(first, hw.Slice{Buf: b, Len: 1000}), append(second, hw.Slice{Buf: b, Off: 1000, Len: 1000})
	}
	list := []sim.Op{
		{Kind: sim.OpMulticast, Src: hw.Whole(src), Members: first, Wire: &slow},
		{Kind: sim.OpMulticast, Src: hw.Whole(src), Members: second, Wire: &fast},
		{Kind: sim.OpCopy, Dst: hw.Whole(seen), Src: first[2]},
	}
	got, err := r.timed(t, 2, func(s *sim.Stream) error { return s.Feed(&ops{list: list, n: 4}) })
	if want := 80*sim.Nanosecond + 9*sim.Microsecond; err != nil || got != want {
		t.Errorf("a slower landing first: %v (%v), want %v", got, err, want)
	}
	if v := download(t, seen); v[0] != 7 {
		t.Errorf("a slower landing first: the copy after the run saw %v, want the first multicast's 7", v[0])
	}
}

// Two disjoint groups on one NVSwitch share its reduction unit:
// 4000 B each at 50/2 GB/s = 160 ns, after α = 2 us.
func TestDisjointGroupsShareTheSwitchReducer(t *testing.T) {
	r := newSwitchRig(t, "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", sim.Config{TimingOnly: true}, 1000)
	var starts, ends [2]hw.Event
	for i, rank := range []int{0, 2} {
		d, s := r.devs[rank], r.strs[rank]
		starts[i], ends[i] = try(d.NewEvent())(t), try(d.NewEvent())(t)
		ok(t, s.Record(starts[i]))
		group := []hw.Slice{hw.Whole(r.bufs[rank]), hw.Whole(r.bufs[rank+1])}
		ok(t, s.SwitchReduce(hw.Sum, hw.Whole(r.bufs[rank]), group))
		ok(t, s.Record(ends[i]))
	}
	ok(t, r.c.Run())
	for i := range 2 {
		if got := sim.FromSeconds(try(ends[i].ElapsedSince(starts[i]))(t)); got != 2*sim.Microsecond+160*sim.Nanosecond {
			t.Errorf("group %d took %v, want 2.16us", i, got)
		}
	}
}

// switchWire is a Wire whose NVLink crossing takes 3 µs and carries half
// its bytes as payload.
var switchWire = sim.Wire{Latency: [3]sim.Time{3 * sim.Microsecond, 9 * sim.Microsecond, 9 * sim.Microsecond}, Efficiency: [3]float64{0.5, 1, 1}}

// A switch operation with a Wire lands Latency + (α − Reference) after
// it drains: 8000 wire B at 100 GB/s = 80 ns, + 3 us + (2 us − 1 us).
func TestSwitchLandingAddsRouteBeyondReference(t *testing.T) {
	w := switchWire
	w.Reference[sim.PathNVLink] = sim.Microsecond
	r := newSwitchRig(t, "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", sim.Config{TimingOnly: true}, 1000)
	got, err := r.timed(t, 2, func(s *sim.Stream) error {
		return s.Feed(&ops{list: []sim.Op{{Kind: sim.OpMulticast, Src: hw.Whole(r.bufs[2]), Members: r.all(), Wire: &w}}, n: 4})
	})
	if want := 80*sim.Nanosecond + 4*sim.Microsecond; err != nil || got != want {
		t.Fatalf("multicast took %v (%v), want %v", got, err, want)
	}
}

// A switch reduction followed by a multicast pipelines too:
// 8000 wire B through the 50 GB/s reducer (160 ns) + 80 ns + one 3 us landing.
func TestMixedSwitchRunPipelines(t *testing.T) {
	w := switchWire
	r := newSwitchRig(t, "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", sim.Config{TimingOnly: true}, 2000)
	at := func(i int) []hw.Slice {
		var out []hw.Slice
		for _, b := range r.bufs {
			out = append(out, hw.Slice{Buf: b, Off: 1000 * i, Len: 1000})
		}
		return out
	}
	got, err := r.timed(t, 2, func(s *sim.Stream) error {
		return s.Feed(&ops{list: []sim.Op{
			{Kind: sim.OpSwitchReduce, Redop: hw.Sum, Dst: at(0)[2], Members: at(0), Wire: &w},
			{Kind: sim.OpMulticast, Src: at(1)[2], Members: at(1), Wire: &w},
		}, n: 4})
	})
	if want := 240*sim.Nanosecond + 3*sim.Microsecond; err != nil || got != want {
		t.Fatalf("run took %v (%v), want %v", got, err, want)
	}
}
