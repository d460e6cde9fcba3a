package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
)

// ops is a Source that hands over a list of operations, n at a time, and
// counts how it was used.
type ops struct {
	list   []sim.Op
	n      int
	err    error // returned once the list is done
	calls  int
	closed int
}

func (o *ops) Next(buf []sim.Op) (int, error) {
	o.calls++
	if len(o.list) == 0 {
		return 0, o.err
	}
	k := copy(buf[:min(len(buf), o.n)], o.list)
	o.list = o.list[k:]
	return k, nil
}

func (o *ops) Close() { o.closed++ }

// pingPong has rank 0 send four buffers to rank 1 one after another, with a
// reduce after each on rank 1, and returns the time from rank 0's start to
// rank 1's end, and rank 1's data. With feed, both ranks' work is handed
// over by sources, one op at a time, between ops enqueued directly.
func pingPong(t *testing.T, feed bool) (float64, []float32) {
	c := newCluster(t, "switch:2", sim.Config{})
	d0, d1 := c.Devices()[0], c.Devices()[1]
	src := upload(t, d0, []float32{1, 2, 3, 4})
	acc := upload(t, d1, []float32{10, 20, 30, 40})
	inc := try(d1.Alloc(hw.F32, 4))(t)
	s0, s1 := try(d0.NewStream())(t), try(d1.NewStream())(t)
	start, end := try(d0.NewEvent())(t), try(d1.NewEvent())(t)
	ok(t, s0.Record(start))
	whole := func(b hw.Buffer) hw.Slice { return hw.Slice{Buf: b, Len: b.Len()} }
	var work0, work1 []sim.Op
	for tag := range uint64(4) {
		work0 = append(work0, sim.Op{Kind: sim.OpSend, Src: whole(src), Peer: d1, Tag: tag})
		work1 = append(work1,
			sim.Op{Kind: sim.OpRecv, Dst: whole(inc), Peer: d0, Tag: tag},
			sim.Op{Kind: sim.OpReduce, Redop: hw.Sum, Dst: whole(acc), Src: whole(inc)})
	}
	if !feed {
		ok(t, s0.Send(whole(src), d1, 0))
		ok(t, s0.Send(whole(src), d1, 1))
		ok(t, s0.Send(whole(src), d1, 2))
		ok(t, s0.Send(whole(src), d1, 3))
		for tag := range uint64(4) {
			ok(t, s1.Recv(whole(inc), d0, tag))
			ok(t, s1.Reduce(hw.Sum, whole(acc), whole(inc)))
		}
	} else {
		// Half of rank 1's work is fed, half enqueued after the feed.
		src0, src1 := &ops{list: work0, n: 1}, &ops{list: work1[:4], n: 1}
		ok(t, s0.(*sim.Stream).Feed(src0))
		ok(t, s1.(*sim.Stream).Feed(src1))
		for tag := uint64(2); tag < 4; tag++ {
			ok(t, s1.Recv(whole(inc), d0, tag))
			ok(t, s1.Reduce(hw.Sum, whole(acc), whole(inc)))
		}
		defer func() {
			if src0.closed != 1 || src1.closed != 1 || src0.calls != 5 {
				t.Errorf("sources closed %d and %d times, %d calls: want once each, 5 calls", src0.closed, src1.closed, src0.calls)
			}
		}()
	}
	ok(t, s1.Record(end))
	ok(t, s0.Synchronize())
	ok(t, s1.Synchronize())
	return try(end.ElapsedSince(start))(t), download(t, acc)
}

func TestFedStreamsRunLikeFilledOnes(t *testing.T) {
	upfront, want := pingPong(t, false)
	fed, got := pingPong(t, true)
	if fed != upfront || !equal(got, want) {
		t.Fatalf("fed: %v s, %v; enqueued up front: %v s, %v", fed, got, upfront, want)
	}
	if want[0] != 14 {
		t.Fatalf("acc[0] = %v, want 10 + 4×1", want[0])
	}
}

// TestFedWaitCountsRecords: a fed Wait with a Count waits for that Record
// of its event even when it is fed before the Record is (lanes are fed in
// either order); with Count 0 it waits, as Stream.Wait, only for Records
// enqueued before it, here none.
func TestFedWaitCountsRecords(t *testing.T) {
	for _, tc := range []struct {
		count int
		want  float64
	}{{1, 3e-6}, {0, 0}} {
		c := newCluster(t, "switch:2", sim.Config{})
		d := c.Devices()[0]
		ev, start, end := try(d.NewEvent())(t), try(d.NewEvent())(t), try(d.NewEvent())(t)
		waiter := try(d.NewStream())(t).(*sim.Stream)
		worker := try(d.NewStream())(t).(*sim.Stream)
		ok(t, waiter.Record(start))
		ok(t, waiter.Feed(&ops{list: []sim.Op{{Kind: sim.OpWait, Event: ev.(*sim.Event), Count: tc.count}}, n: 4}))
		ok(t, waiter.Record(end))
		ok(t, worker.Compute(3e-6, "work"))
		ok(t, worker.Feed(&ops{list: []sim.Op{{Kind: sim.OpRecord, Event: ev.(*sim.Event)}}, n: 4}))
		ok(t, worker.Synchronize())
		ok(t, waiter.Synchronize())
		if got := try(end.ElapsedSince(start))(t); got != tc.want {
			t.Errorf("count %d: the fed wait ended after %v s, want %v", tc.count, got, tc.want)
		}
	}
}

func TestFeedErrors(t *testing.T) {
	c := newCluster(t, "switch:2", sim.Config{})
	d0 := c.Devices()[0]
	buf := try(d0.Alloc(hw.F32, 4))(t)
	whole := hw.Slice{Buf: buf, Len: 4}
	s := try(d0.NewStream())(t).(*sim.Stream)
	if err := s.Feed(nil); !errors.Is(err, hw.ErrBadArgument) {
		t.Fatalf("nil source: %v", err)
	}
	broken := &ops{list: []sim.Op{{Kind: sim.OpCopy, Dst: whole, Src: whole}}, n: 1, err: errors.New("generator broke")}
	ok(t, s.Feed(broken))
	if err := s.Synchronize(); err == nil || !strings.Contains(err.Error(), "generator broke") {
		t.Fatalf("source error: %v", err)
	}
	if broken.calls != 2 || broken.closed != 1 {
		t.Fatalf("source called %d times, closed %d times; want 2 and 1", broken.calls, broken.closed)
	}

	// A fed op is checked as its Stream method checks it.
	s2 := try(d0.NewStream())(t).(*sim.Stream)
	bad := &ops{list: []sim.Op{{Kind: sim.OpReduce, Redop: hw.Avg, Dst: whole, Src: whole}}, n: 1}
	ok(t, s2.Feed(bad))
	if err := s2.Synchronize(); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "not elementwise") {
		t.Fatalf("a fed Avg reduce: %v", err)
	}
	if bad.closed != 1 {
		t.Fatalf("the failed stream closed its source %d times, want 1", bad.closed)
	}

	// Closing the cluster closes the sources it still holds.
	s3 := try(d0.NewStream())(t).(*sim.Stream)
	waiting := &ops{list: []sim.Op{{Kind: sim.OpCopy, Dst: whole, Src: whole}}, n: 1}
	blocker := try(d0.NewEvent())(t)
	ok(t, s3.Record(blocker))
	ok(t, s3.Feed(waiting))
	ok(t, c.Close())
	if waiting.closed != 1 || waiting.calls != 0 {
		t.Fatalf("after Close: source called %d times, closed %d times; want 0 and 1", waiting.calls, waiting.closed)
	}
}
