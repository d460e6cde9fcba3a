package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
)

// pingPong has rank 0 send four buffers to rank 1 one after another, with a
// reduce after each on rank 1, and returns the time from rank 0's start to
// rank 1's end, and rank 1's data. With feed, both ranks' work is handed
// over one op per refill.
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
	var work0, work1 []func() error
	for tag := range uint64(4) {
		work0 = append(work0, func() error { return s0.Send(whole(src), d1, tag) })
		work1 = append(work1,
			func() error { return s1.Recv(whole(inc), d0, tag) },
			func() error { return s1.Reduce(hw.Sum, whole(acc), whole(inc)) })
	}
	work1 = append(work1, func() error { return s1.Record(end) })
	for i, st := range []struct {
		s    hw.Stream
		work []func() error
	}{{s0, work0}, {s1, work1}} {
		if !feed {
			for _, w := range st.work {
				ok(t, w())
			}
			continue
		}
		next := 0
		ok(t, st.s.(hw.Feeder).Feed(func() (bool, error) {
			if err := st.work[next](); err != nil {
				t.Errorf("stream %d: %v", i, err)
			}
			next++
			return next < len(st.work), nil
		}))
	}
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

func TestFeedErrors(t *testing.T) {
	c := newCluster(t, "switch:2", sim.Config{})
	d0 := c.Devices()[0]
	buf := try(d0.Alloc(hw.F32, 4))(t)
	whole := hw.Slice{Buf: buf, Len: 4}
	s := try(d0.NewStream())(t)
	f := s.(hw.Feeder)
	if err := f.Feed(nil); !errors.Is(err, hw.ErrBadArgument) {
		t.Fatalf("nil refill: %v", err)
	}
	calls := 0
	ok(t, f.Feed(func() (bool, error) {
		calls++
		if calls == 1 {
			return true, s.Copy(whole, whole)
		}
		return false, errors.New("generator broke")
	}))
	if err := f.Feed(func() (bool, error) { return false, nil }); !errors.Is(err, hw.ErrBadArgument) {
		t.Fatalf("second feed: %v", err)
	}
	if err := s.Copy(whole, whole); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "being fed") {
		t.Fatalf("enqueue while fed: %v", err)
	}
	if err := s.Synchronize(); err == nil || !strings.Contains(err.Error(), "generator broke") {
		t.Fatalf("refill error: %v", err)
	}
	if calls != 2 {
		t.Fatalf("refill called %d times, want 2", calls)
	}

	// A refill that promises more but enqueues nothing would spin forever.
	s2 := try(d0.NewStream())(t)
	ok(t, s2.(hw.Feeder).Feed(func() (bool, error) { return true, nil }))
	if err := s2.Synchronize(); err == nil || !strings.Contains(err.Error(), "enqueued nothing") {
		t.Fatalf("empty refill: %v", err)
	}
}
