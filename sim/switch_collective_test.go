package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
)

// TestSwitchAllReduceCombinesInGroupOrder: a switch all-reduce writes, on
// every member, every member's values combined in the group's order,
// rounding after each step as hw.ReduceBytes does (1e8, −1e8, 1 sums to 1
// left to right, to 0 the other way in f32), in place.
func TestSwitchAllReduceCombinesInGroupOrder(t *testing.T) {
	r := newSwitchRig(t, "switch:3,nvls=inf", sim.Config{}, 2)
	for _, tc := range []struct {
		order []int
		want  float32
	}{{[]int{0, 1, 2}, 1}, {[]int{2, 1, 0}, 0}} {
		for i, v := range [][]float32{{1e8, 2}, {-1e8, 3}, {1, 4}} {
			ok(t, r.bufs[i].Write(hw.Encode(v)))
		}
		group := make([]*sim.Device, 3)
		for i, q := range tc.order {
			group[i] = r.devs[q]
		}
		for i, s := range r.strs {
			ok(t, s.SwitchAllReduce(hw.Sum, hw.Whole(r.bufs[i]), hw.Whole(r.bufs[i]), group, 7))
		}
		ok(t, r.c.Run())
		for i, b := range r.bufs {
			if got := download(t, b); got[0] != tc.want || got[1] != 9 {
				t.Errorf("group %v: rank %d holds %v, want [%v 9]", tc.order, i, got, tc.want)
			}
		}
	}
}

// TestSwitchAllReduceWaitsForTheLastMember: every member finishes when
// the last to come (rank 3, after 5 µs of compute) has, plus the way
// through the switch (2 links of 1 µs) and its bytes (4000) at the
// narrowest of every member's links (100 GB/s) and the switch's
// reduction unit (50 GB/s): 80 ns; with a Wire, its network latency
// (3 µs) in place of the way's and its bytes grown by its network
// efficiency (0.5).
func TestSwitchAllReduceWaitsForTheLastMember(t *testing.T) {
	wire := &sim.Wire{Latency: [3]sim.Time{9 * sim.Microsecond, 9 * sim.Microsecond, 3 * sim.Microsecond}, Efficiency: [3]float64{1, 1, 0.5}}
	for _, tc := range []struct {
		wire *sim.Wire
		want sim.Time
	}{
		{nil, 7*sim.Microsecond + 80*sim.Nanosecond},
		{wire, 8*sim.Microsecond + 160*sim.Nanosecond},
	} {
		r := newSwitchRig(t, "switch:4,bw=100GB/s,lat=1us,nvls=50GB/s", sim.Config{TimingOnly: true}, 1000)
		var starts, ends []hw.Event
		for i, s := range r.strs {
			starts, ends = append(starts, try(r.devs[i].NewEvent())(t)), append(ends, try(r.devs[i].NewEvent())(t))
			ok(t, s.Record(starts[i]))
			if i == 3 {
				ok(t, s.Compute(5e-6, "late"))
			}
			o := sim.Op{Kind: sim.OpSwitchAllReduce, Redop: hw.Sum, Dst: hw.Whole(r.bufs[i]), Src: hw.Whole(r.bufs[i]), Group: r.devs, Tag: 1, Wire: tc.wire}
			ok(t, s.Feed(&ops{list: []sim.Op{o}, n: 1}))
			ok(t, s.Record(ends[i]))
		}
		ok(t, r.c.Run())
		for i := range r.strs {
			if got := sim.FromSeconds(try(ends[i].ElapsedSince(starts[i]))(t)); got != tc.want {
				t.Errorf("wire %v: rank %d took %v, want %v", tc.wire != nil, i, got, tc.want)
			}
		}
	}
}

// TestSwitchAllReduceFailsEveryMember: members that disagree on the
// length fail together, naming why; a member whose stream fails before
// its all-reduce fails the others that wait for it; a member that never
// comes leaves the others in a deadlock that names it. None hangs.
func TestSwitchAllReduceFailsEveryMember(t *testing.T) {
	join := func(r *switchRig, ranks []int, n func(rank int) int) {
		for _, i := range ranks {
			dst := hw.Slice{Buf: r.bufs[i], Len: n(i)}
			ok(t, r.strs[i].SwitchAllReduce(hw.Max, dst, dst, r.devs, 3))
		}
	}
	all := []int{0, 1, 2}
	t.Run("lengths", func(t *testing.T) {
		r := newSwitchRig(t, "switch:3,nvls=inf", sim.Config{}, 4)
		join(r, all, func(rank int) int { return 4 - rank/2 })
		err := r.c.Run()
		if !errors.Is(err, hw.ErrSizeMismatch) {
			t.Fatalf("run: %v, want ErrSizeMismatch", err)
		}
		for i, s := range r.strs {
			if err := s.Synchronize(); !errors.Is(err, hw.ErrSizeMismatch) {
				t.Errorf("rank %d: %v, want ErrSizeMismatch", i, err)
			}
		}
	})
	t.Run("a failed member", func(t *testing.T) {
		r := newSwitchRig(t, "switch:3,nvls=inf", sim.Config{}, 4)
		short := try(r.devs[2].Alloc(hw.F32, 3))(t)
		ok(t, r.strs[0].Send(hw.Whole(r.bufs[0]), r.devs[2], 9))
		ok(t, r.strs[2].Recv(hw.Whole(short), r.devs[0], 9)) // 4 floats into 3: fails
		join(r, all, func(int) int { return 4 })
		if err := r.c.Run(); err == nil {
			t.Fatal("run: nil, want the failed receive")
		}
		for _, i := range []int{0, 1} {
			if err := r.strs[i].Synchronize(); !errors.Is(err, hw.ErrPeerFailed) {
				t.Errorf("rank %d: %v, want ErrPeerFailed", i, err)
			}
		}
	})
	t.Run("a missing member", func(t *testing.T) {
		r := newSwitchRig(t, "switch:3,nvls=inf", sim.Config{}, 4)
		join(r, []int{0, 2}, func(int) int { return 4 })
		err := r.c.Run()
		if !sim.IsDeadlock(err) || !strings.Contains(err.Error(), "waiting for rank(s) 1") {
			t.Fatalf("run: %v, want a deadlock naming rank 1", err)
		}
	})
}

// TestSwitchAllReduceRefusesBadArguments: avg, a group without the
// stream's device, a device twice, one of another cluster, or slices that
// differ in length are refused when enqueued, with the reason; a group
// with no switch that reduces for it fails when it meets.
func TestSwitchAllReduceRefusesBadArguments(t *testing.T) {
	r := newSwitchRig(t, "switch:3,nvls=inf", sim.Config{}, 4)
	other := newSwitchRig(t, "switch:3,nvls=inf", sim.Config{}, 4)
	own := hw.Whole(r.bufs[0])
	for _, tc := range []struct {
		name  string
		err   error
		rop   hw.ReduceOp
		dst   hw.Slice
		group []*sim.Device
	}{
		{"avg", hw.ErrBadArgument, hw.Avg, own, r.devs},
		{"not a member", hw.ErrBadArgument, hw.Sum, own, r.devs[1:]},
		{"a member twice", hw.ErrBadArgument, hw.Sum, own, []*sim.Device{r.devs[0], r.devs[1], r.devs[1]}},
		{"another cluster's", hw.ErrUnknownPeer, hw.Sum, own, []*sim.Device{r.devs[0], other.devs[1]}},
		{"a shorter destination", hw.ErrSizeMismatch, hw.Sum, hw.Slice{Buf: r.bufs[0], Len: 3}, r.devs},
	} {
		if err := r.strs[0].SwitchAllReduce(tc.rop, tc.dst, own, tc.group, 1); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	plain := newSwitchRig(t, "switch:2", sim.Config{}, 4)
	for i, s := range plain.strs {
		ok(t, s.SwitchAllReduce(hw.Sum, hw.Whole(plain.bufs[i]), hw.Whole(plain.bufs[i]), plain.devs, 1))
	}
	if err := plain.c.Run(); err == nil || !strings.Contains(err.Error(), "in-network reduction") {
		t.Errorf("no reducing switch: %v, want an error naming in-network reduction", err)
	}
}

// TestSwitchGatherAndScatter: a switch all-gather writes member i's
// source as block i of every member's destination; a switch
// reduce-scatter writes, on member i, block i of every member's source
// combined in the group's order; each takes the way through the switch
// and its larger side's bytes (the all-gather's result, 3 × 4000, at the
// links' 100 GB/s: 120 ns; the reduce-scatter's input at the switch's
// 50 GB/s: 240 ns). Lengths that do not fit the group are refused.
func TestSwitchGatherAndScatter(t *testing.T) {
	r := newSwitchRig(t, "switch:3,bw=100GB/s,lat=1us,nvls=50GB/s", sim.Config{}, 3000)
	srcs := make([]hw.Buffer, 3)
	for i := range srcs {
		srcs[i] = try(r.devs[i].Alloc(hw.F32, 1000))(t)
		v := make([]float32, 1000)
		for j := range v {
			v[j] = float32(10*i + j%7)
		}
		ok(t, srcs[i].Write(hw.Encode(v)))
	}
	var starts, ends []hw.Event
	for i, s := range r.strs {
		starts, ends = append(starts, try(r.devs[i].NewEvent())(t)), append(ends, try(r.devs[i].NewEvent())(t))
		ok(t, s.Record(starts[i]))
		o := sim.Op{Kind: sim.OpSwitchAllGather, Dst: hw.Whole(r.bufs[i]), Src: hw.Whole(srcs[i]), Group: r.devs, Tag: 4}
		ok(t, s.Feed(&ops{list: []sim.Op{o}, n: 1}))
		ok(t, s.Record(ends[i]))
	}
	ok(t, r.c.Run())
	for i, b := range r.bufs {
		got := download(t, b)
		for q := range 3 {
			if got[q*1000+5] != float32(10*q+5) {
				t.Fatalf("all-gather: rank %d's block %d starts %v, want rank %d's", i, q, got[q*1000:q*1000+6], q)
			}
		}
		if took := sim.FromSeconds(try(ends[i].ElapsedSince(starts[i]))(t)); took != 2*sim.Microsecond+120*sim.Nanosecond {
			t.Errorf("all-gather: rank %d took %v, want 2.12µs", i, took)
		}
	}
	// Every rank now holds the gathered blocks 0, 10, 20 (+ j%7): block
	// q summed over 3 ranks is 3 × (10q + j%7).
	for i, s := range r.strs {
		starts[i], ends[i] = try(r.devs[i].NewEvent())(t), try(r.devs[i].NewEvent())(t)
		ok(t, s.Record(starts[i]))
		o := sim.Op{Kind: sim.OpSwitchReduceScatter, Redop: hw.Sum, Dst: hw.Whole(srcs[i]), Src: hw.Whole(r.bufs[i]), Group: r.devs, Tag: 5}
		ok(t, s.Feed(&ops{list: []sim.Op{o}, n: 1}))
		ok(t, s.Record(ends[i]))
	}
	ok(t, r.c.Run())
	for i, b := range srcs {
		if got := download(t, b); got[5] != float32(3*(10*i+5)) {
			t.Errorf("reduce-scatter: rank %d holds %v…, want %v", i, got[:6], 3*(10*i+5))
		}
		if took := sim.FromSeconds(try(ends[i].ElapsedSince(starts[i]))(t)); took != 2*sim.Microsecond+240*sim.Nanosecond {
			t.Errorf("reduce-scatter: rank %d took %v, want 2.24µs", i, took)
		}
	}
	bad := sim.Op{Kind: sim.OpSwitchAllGather, Dst: hw.Whole(r.bufs[0]), Src: hw.Whole(r.bufs[0]), Group: r.devs}
	ok(t, r.strs[0].Feed(&ops{list: []sim.Op{bad}, n: 1}))
	if err := r.c.Run(); !errors.Is(err, hw.ErrSizeMismatch) {
		t.Errorf("an all-gather into a slice as long as its source: %v, want ErrSizeMismatch", err)
	}
}

// TestSwitchCollectiveCrashes: a member that crashes while the others
// wait for it, or during the switch's flow, or a link of the way that
// goes down during it, fails every member with the reason; none hangs.
func TestSwitchCollectiveCrashes(t *testing.T) {
	for _, tc := range []struct {
		name, fault string
		late        bool // rank 2 computes 5 µs before it comes
		want        error
		says        string
	}{
		{"a member crashes while the others wait", "rank 2 crash at 1us", true, sim.ErrCrashed, "crashed"},
		{"a member crashes during the flow", "rank 1 crash at 1.5us", false, sim.ErrCrashed, "crashed"},
		{"a link goes down during the flow", "link sw0-gpu1 down at 1.5us", false, nil, "is down"},
	} {
		r := newSwitchRig(t, "switch:3,bw=100GB/s,lat=1us,nvls=inf", sim.Config{TimingOnly: true}, 1000)
		ok(t, r.c.Inject(try(sim.ParseFault(tc.fault))(t)))
		for i, s := range r.strs {
			if tc.late && i == 2 {
				ok(t, s.Compute(5e-6, "late"))
			}
			ok(t, s.SwitchAllReduce(hw.Sum, hw.Whole(r.bufs[i]), hw.Whole(r.bufs[i]), r.devs, 1))
		}
		err := r.c.Run()
		if err == nil || sim.IsDeadlock(err) || !strings.Contains(err.Error(), tc.says) || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want a failure saying %q", tc.name, err, tc.says)
		}
		for i, s := range r.strs {
			if err := s.Synchronize(); err == nil || sim.IsDeadlock(err) {
				t.Errorf("%s: rank %d: %v, want its failure", tc.name, i, err)
			}
		}
	}
}
