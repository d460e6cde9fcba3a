package hwtest

import (
	"fmt"
	"testing"

	"github.com/commsim/commsim/hw"
)

// MessagesMatchFIFO checks Recv's matching: messages between one pair of
// devices with one tag match receives in FIFO order, whether the receives
// or the sends are enqueued first and however tags interleave; a message
// from another sender with the same tag does not match; and an empty
// message takes its place in the order like any other.
func MessagesMatchFIFO(t *testing.T, b Backend) {
	defer noPanic(t)
	w := openWorld(t, b.NewWorld, 3)
	d := w.Devices()
	streams := []hw.Stream{newStream(t, d[0]), newStream(t, d[1]), newStream(t, d[2])}
	const n = 4
	// Rank 0 sends tags 1 and 2 interleaved, rank 2 sends tag 1 as well;
	// rank 1 receives them in another interleaving.
	sends := []struct {
		from  int
		tag   uint32
		value int32
	}{{0, 1, 10}, {0, 2, 20}, {0, 1, 11}, {2, 1, 30}, {0, 2, 21}, {0, 1, 12}}
	recvs := []struct {
		from  int
		tag   uint32
		value int32 // the value that must arrive
	}{{0, 2, 20}, {2, 1, 30}, {0, 1, 10}, {0, 1, 11}, {0, 2, 21}, {0, 1, 12}}

	for phase, recvFirst := range []bool{true, false} {
		base := uint32(10 * phase) // fresh tags per phase
		dst := make([]hw.Buffer, len(recvs))
		enqueueRecvs := func() {
			for i, r := range recvs {
				dst[i] = alloc(t, d[1], hw.I32, n)
				must(t, w.Recv(streams[1], r.from, hw.Whole(dst[i]), base+r.tag))
			}
		}
		enqueueSends := func() {
			for _, s := range sends {
				must(t, w.Send(streams[s.from], 1, hw.Whole(filled(t, d[s.from], s.value, n)), base+s.tag))
			}
		}
		if recvFirst {
			enqueueRecvs()
			enqueueSends()
		} else {
			enqueueSends()
			enqueueRecvs()
		}
		for r, s := range streams {
			if err := synchronize(t, s); err != nil {
				t.Fatalf("receives first %v: rank %d: %v", recvFirst, r, err)
			}
		}
		for i, r := range recvs {
			wantAll(t, fmt.Sprintf("receives first %v: receive %d (from rank %d, tag %d)", recvFirst, i, r.from, base+r.tag), dst[i], r.value)
		}
	}

	// An empty message, then a full one, on one tag.
	empty, full := alloc(t, d[1], hw.I32, 0), alloc(t, d[1], hw.I32, n)
	must(t, w.Send(streams[2], 1, hw.Whole(alloc(t, d[2], hw.I32, 0)), 99))
	must(t, w.Send(streams[2], 1, hw.Whole(filled(t, d[2], 40, n)), 99))
	must(t, w.Recv(streams[1], 2, hw.Whole(empty), 99))
	must(t, w.Recv(streams[1], 2, hw.Whole(full), 99))
	for r, s := range streams {
		if err := synchronize(t, s); err != nil {
			t.Fatalf("empty message: rank %d: %v", r, err)
		}
	}
	wantAll(t, "the message after an empty one", full, 40)
}

// MismatchedMessageFails checks that a message whose dtype or length
// differs from the receive buffer is accepted by Recv and is an error at
// Synchronize, wrapping hw.ErrDTypeMismatch or hw.ErrSizeMismatch and
// naming the receiving device and the operation. The eager send completes
// regardless.
func MismatchedMessageFails(t *testing.T, b Backend) {
	defer noPanic(t)
	w := openWorld(t, b.NewWorld, 2)
	d := w.Devices()
	cases := []struct {
		name string
		dt   hw.DType
		n    int
		want error
	}{
		{"dtype", hw.I32, 4, hw.ErrDTypeMismatch},
		{"shorter", hw.F32, 3, hw.ErrSizeMismatch},
		{"longer", hw.F32, 5, hw.ErrSizeMismatch},
	}
	for i, c := range cases {
		snd, rcv := newStream(t, d[0]), newStream(t, d[1])
		tag := uint32(i)
		must(t, w.Send(snd, 1, hw.Whole(alloc(t, d[0], hw.F32, 4)), tag))
		if err := w.Recv(rcv, 0, hw.Whole(alloc(t, d[1], c.dt, c.n)), tag); err != nil {
			t.Errorf("%s: Recv refused at enqueue time: %v (the contract makes it an error at Synchronize)", c.name, err)
			continue
		}
		err := synchronize(t, rcv)
		wantErr(t, fmt.Sprintf("4 x f32 received into %d x %s", c.n, c.dt), err, c.want, d[1].Name(), "recv")
		if err := synchronize(t, snd); err != nil {
			t.Errorf("%s: the sender's Synchronize: %v (a send completes once its bytes arrive)", c.name, err)
		}
	}
}

// SplitWorldsKeepTagsApart checks that a sub-world's messages do not match
// the parent world's receives between the same devices with the same
// caller's tag (hw.World puts the world's id in the tag).
func SplitWorldsKeepTagsApart(t *testing.T, b Backend) {
	defer noPanic(t)
	w := openWorld(t, b.NewWorld, 2)
	subs, err := w.Split([]int{0, 0}, []int{0, 0})
	must(t, err)
	sub := subs[0]
	d := w.Devices()
	snd, rcv := newStream(t, d[0]), newStream(t, d[1])
	fromParent, fromSub := alloc(t, d[1], hw.I32, 4), alloc(t, d[1], hw.I32, 4)
	// The parent's message goes first: a backend that matched on the
	// caller's tag alone would hand it to the sub-world's receive.
	must(t, w.Send(snd, 1, hw.Whole(filled(t, d[0], 1, 4)), 7))
	must(t, sub.Send(snd, 1, hw.Whole(filled(t, d[0], 2, 4)), 7))
	must(t, sub.Recv(rcv, 0, hw.Whole(fromSub), 7))
	must(t, w.Recv(rcv, 0, hw.Whole(fromParent), 7))
	for _, s := range []hw.Stream{snd, rcv} {
		must(t, synchronize(t, s))
	}
	wantAll(t, "the sub-world's receive", fromSub, 2)
	wantAll(t, "the parent world's receive", fromParent, 1)
}

// DeadlockIsReported checks that Synchronize on work that can never finish
// returns, with an error wrapping hw.ErrDeadlock that names every blocked
// device: two ranks that both receive before they send, and a Wait for a
// Record that sits behind a receive nobody sends.
func DeadlockIsReported(t *testing.T, b Backend) {
	defer noPanic(t)
	t.Run("both receive first", func(t *testing.T) {
		defer noPanic(t)
		w := openWorld(t, b.NewWorld, 2)
		d := w.Devices()
		var streams []hw.Stream
		for r := range 2 {
			s := newStream(t, d[r])
			buf := alloc(t, d[r], hw.I32, 4)
			must(t, w.Recv(s, 1-r, hw.Whole(buf), 1))
			must(t, w.Send(s, 1-r, hw.Whole(buf), 1))
			streams = append(streams, s)
		}
		for r, s := range streams {
			wantErr(t, fmt.Sprintf("rank %d", r), synchronize(t, s), hw.ErrDeadlock, d[0].Name(), d[1].Name())
		}
	})
	t.Run("wait behind a stuck receive", func(t *testing.T) {
		defer noPanic(t)
		// Rank 2 has no work: what ranks 0 and 1 wait for names it, so
		// the report must name them itself.
		w := openWorld(t, b.NewWorld, 3)
		d := w.Devices()
		a, waiter := newStream(t, d[0]), newStream(t, d[1])
		ev := newEvent(t, d[2])
		gate{w: w, from: 2, to: 0, tag: 1}.block(t, a) // never opened
		must(t, a.Record(ev))
		must(t, waiter.Wait(ev))
		must(t, waiter.Copy(hw.Whole(alloc(t, d[1], hw.I32, 4)), hw.Whole(alloc(t, d[1], hw.I32, 4))))
		wantErr(t, "the waiter", synchronize(t, waiter), hw.ErrDeadlock, d[0].Name(), d[1].Name())
	})
}

// FailedSenderFailsReceivers checks that a stream which fails before or at
// a Send makes the receive of that message fail with the sender's cause,
// named by the receiving device, and not report a deadlock. hw.Stream says
// this of events (those a failed stream would have recorded fail their
// waiters); for messages it follows from Synchronize naming the cause: the
// receive did not deadlock, it lost its message to the sender's failure.
func FailedSenderFailsReceivers(t *testing.T, b Backend) {
	defer noPanic(t)
	t.Run("failed before the send", func(t *testing.T) {
		defer noPanic(t)
		w := openWorld(t, b.NewWorld, 3)
		d := w.Devices()
		s0, s1, s2, r2 := newStream(t, d[0]), newStream(t, d[1]), newStream(t, d[2]), newStream(t, d[2])
		// Rank 0 fails on a message of the wrong dtype, then reaches its
		// sends to ranks 1 and 2.
		must(t, w.Send(s2, 0, hw.Whole(alloc(t, d[2], hw.F32, 4)), 1))
		must(t, w.Recv(s0, 2, hw.Whole(alloc(t, d[0], hw.I32, 4)), 1))
		must(t, w.Send(s0, 1, hw.Whole(alloc(t, d[0], hw.I32, 4)), 2))
		must(t, w.Send(s0, 2, hw.Whole(alloc(t, d[0], hw.I32, 4)), 2))
		must(t, w.Recv(s1, 0, hw.Whole(alloc(t, d[1], hw.I32, 4)), 2))
		must(t, w.Recv(r2, 0, hw.Whole(alloc(t, d[2], hw.I32, 4)), 2))
		receivers := []struct {
			rank int
			s    hw.Stream
		}{{1, s1}, {2, r2}}
		for _, rcv := range receivers {
			what := fmt.Sprintf("the receiver on rank %d", rcv.rank)
			err := synchronize(t, rcv.s)
			wantErr(t, what, err, hw.ErrDTypeMismatch, d[rcv.rank].Name(), d[0].Name())
			wantPeerFailed(t, what, err)
		}
		wantErr(t, "the failed sender", synchronize(t, s0), hw.ErrDTypeMismatch, d[0].Name())
		if err := synchronize(t, s2); err != nil {
			t.Errorf("rank 2's send: %v", err)
		}
	})
	t.Run("send of a buffer freed while queued", func(t *testing.T) {
		defer noPanic(t)
		w := openWorld(t, b.NewWorld, 3)
		d := w.Devices()
		s0, s1, s2 := newStream(t, d[0]), newStream(t, d[1]), newStream(t, d[2])
		g := gate{w: w, from: 2, to: 0, tag: 1}
		src := filled(t, d[0], 5, 4)
		g.block(t, s0)
		must(t, w.Send(s0, 1, hw.Whole(src), 2))
		must(t, src.Free())
		g.open(t, s2)
		must(t, w.Recv(s1, 0, hw.Whole(alloc(t, d[1], hw.I32, 4)), 2))
		err := synchronize(t, s1)
		wantErr(t, "the receiver", err, hw.ErrFreed, d[1].Name())
		wantPeerFailed(t, "the receiver", err)
		wantErr(t, "the sender", synchronize(t, s0), hw.ErrFreed, d[0].Name())
	})
}
