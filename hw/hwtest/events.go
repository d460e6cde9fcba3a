package hwtest

import (
	"testing"

	"github.com/commsim/commsim/hw"
)

// WaitsFollowRecords checks Wait: it holds later work until the most
// recent Record of the event enqueued before the Wait has completed, even
// when that Record runs after the Wait was enqueued; it does not wait for
// Records enqueued after it; and a Wait on an event that had never been
// recorded when the Wait was enqueued does not wait. Events are recorded
// on streams of a device other than the one that made them.
func WaitsFollowRecords(t *testing.T, b Backend) {
	defer noPanic(t)
	w := openWorld(t, b.NewWorld, 2)
	d := w.Devices()
	a, waiter, peer := newStream(t, d[0]), newStream(t, d[0]), newStream(t, d[1])
	ev, fresh := newEvent(t, d[0]), newEvent(t, d[1])
	const n = 64
	x, ones, y := alloc(t, d[0], hw.I32, n), filled(t, d[0], 1, n), alloc(t, d[0], hw.I32, n)
	first := gate{w: w, from: 1, to: 0, tag: 1}
	second := gate{w: w, from: 1, to: 0, tag: 2}

	first.block(t, a)
	must(t, a.Copy(hw.Whole(x), hw.Whole(ones)))
	must(t, a.Record(ev))
	must(t, waiter.Wait(fresh))
	must(t, waiter.Wait(ev))
	must(t, waiter.Copy(hw.Whole(y), hw.Whole(x)))
	// Records enqueued after the Waits, behind a gate that opens only once
	// the waiter has finished: waiting for them would deadlock.
	second.block(t, a)
	must(t, a.Record(ev))
	must(t, a.Record(fresh))
	first.open(t, peer)

	if err := synchronize(t, waiter); err != nil {
		t.Fatalf("the waiter: %v (did it wait for a Record enqueued after its Wait?)", err)
	}
	wantAll(t, "data copied after the Wait", y, 1)
	second.open(t, peer)
	for _, s := range []hw.Stream{a, peer} {
		must(t, synchronize(t, s))
	}
}

// ElapsedNeedsCompletedRecords checks ElapsedSince: an error wrapping
// hw.ErrNotReady until both events have completed a Record, whether the
// Record was never enqueued or is enqueued and not yet done; then the
// seconds between them, zero from an event to itself.
func ElapsedNeedsCompletedRecords(t *testing.T, b Backend) {
	defer noPanic(t)
	w := openWorld(t, b.NewWorld, 2)
	d := w.Devices()
	a, peer := newStream(t, d[0]), newStream(t, d[1])
	begin, end := newEvent(t, d[0]), newEvent(t, d[0])
	notReady := func(what string) {
		t.Helper()
		if _, err := end.ElapsedSince(begin); err == nil {
			t.Errorf("%s: ElapsedSince succeeded", what)
		} else {
			wantErr(t, what, err, hw.ErrNotReady)
		}
	}
	notReady("neither event recorded")
	must(t, a.Record(begin))
	must(t, synchronize(t, a))
	notReady("end never recorded")
	if _, err := begin.ElapsedSince(end); err == nil {
		t.Error("begin since an unrecorded end: ElapsedSince succeeded")
	} else {
		wantErr(t, "begin since an unrecorded end", err, hw.ErrNotReady)
	}
	if sec, err := begin.ElapsedSince(begin); err != nil || sec != 0 {
		t.Errorf("an event since itself: %v s, %v; want 0", sec, err)
	}
	g := gate{w: w, from: 1, to: 0, tag: 1}
	g.block(t, a)
	must(t, a.Record(end))
	notReady("end recorded but still queued")
	g.open(t, peer)
	for _, s := range []hw.Stream{a, peer} {
		must(t, synchronize(t, s))
	}
	if sec, err := end.ElapsedSince(begin); err != nil || sec < 0 {
		t.Errorf("after both records: %v s, %v", sec, err)
	}
}

// FailedStreamFailsEventWaiters checks what follows a failure at run time:
// the stream skips the rest of its queue, Synchronize keeps returning the
// failure, and the events the stream would have recorded fail their
// waiters on other devices, including Waits enqueued after the failure,
// with the cause rather than a deadlock.
func FailedStreamFailsEventWaiters(t *testing.T, b Backend) {
	defer noPanic(t)
	w := openWorld(t, b.NewWorld, 3)
	d := w.Devices()
	snd, f, waiter := newStream(t, d[0]), newStream(t, d[1]), newStream(t, d[2])
	ev := newEvent(t, d[1])
	kept, src := filled(t, d[1], 7, 4), filled(t, d[1], 8, 4)
	must(t, w.Send(snd, 1, hw.Whole(alloc(t, d[0], hw.F32, 4)), 1))
	must(t, w.Recv(f, 0, hw.Whole(alloc(t, d[1], hw.I32, 4)), 1)) // fails: the message is f32
	must(t, f.Copy(hw.Whole(kept), hw.Whole(src)))                // skipped
	must(t, f.Record(ev))                                         // skipped
	must(t, waiter.Wait(ev))
	must(t, waiter.Copy(hw.Whole(alloc(t, d[2], hw.I32, 4)), hw.Whole(alloc(t, d[2], hw.I32, 4))))

	err := synchronize(t, waiter)
	wantErr(t, "the waiter", err, hw.ErrDTypeMismatch, d[2].Name())
	wantNoDeadlock(t, "the waiter", err)
	wantErr(t, "the failed stream", synchronize(t, f), hw.ErrDTypeMismatch, d[1].Name(), "recv")
	wantErr(t, "the failed stream again", synchronize(t, f), hw.ErrDTypeMismatch, d[1].Name())
	wantAll(t, "the copy queued after the failure", kept, 7)
	late := newStream(t, d[2])
	must(t, late.Wait(ev))
	err = synchronize(t, late)
	wantErr(t, "a Wait enqueued after the failure", err, hw.ErrDTypeMismatch, d[2].Name())
	wantNoDeadlock(t, "a Wait enqueued after the failure", err)
	if err := synchronize(t, snd); err != nil {
		t.Errorf("the sender: %v", err)
	}
}
