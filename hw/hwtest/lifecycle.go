package hwtest

import (
	"errors"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
)

// AbortEndsSynchronize checks hw.Aborter where the backend has it: after
// Abort, a Synchronize that was pending on a receive nobody sends, and a
// later one, return an error wrapping the reason and naming the device.
// It also checks that Backend.Aborts tells the truth, and skips where the
// devices are no Aborters.
func AbortEndsSynchronize(t *testing.T, b Backend) {
	defer noPanic(t)
	w := openWorld(t, b.NewWorld, 2)
	d := w.Devices()
	aborter, ok := hw.As[hw.Aborter](d[0])
	if ok != b.Aborts {
		t.Fatalf("Backend.Aborts is %v, but the devices implementing hw.Aborter is %v", b.Aborts, ok)
	}
	if !ok {
		t.Skip("the backend's devices do not implement hw.Aborter")
	}
	s := newStream(t, d[0])
	gate{w: w, from: 1, to: 0, tag: 1}.block(t, s) // never opened
	if b.Hold != nil {
		release, err := b.Hold(newStream(t, d[1]))
		must(t, err)
		t.Cleanup(release) // before the world closes: cleanups run last first
	}
	reason := errors.New("hwtest: the watchdog gave up")
	pending := start(t, "Synchronize pending at Abort", s.Synchronize)
	// Give Synchronize time to start waiting; either order must pass.
	time.Sleep(10 * time.Millisecond)
	if err := aborter.Abort(reason); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	// Without Hold nothing keeps the world busy: the stuck receive is a
	// deadlock, which the backend may have reported before the Abort.
	if err := pending(); b.Hold != nil || !errors.Is(err, hw.ErrDeadlock) {
		wantErr(t, "the Synchronize pending at Abort", err, reason, d[0].Name())
	}
	wantErr(t, "a Synchronize after Abort", synchronize(t, s), reason, d[0].Name())
}

// ClosedWorldRefusesCalls checks hw.ErrClosed: once the world is closed,
// the devices' Alloc, NewStream and NewEvent, every enqueueing method and
// Synchronize of a stream, and Read and Write of a buffer return errors
// wrapping it.
func ClosedWorldRefusesCalls(t *testing.T, b Backend) {
	defer noPanic(t)
	w, closeWorld := openClosable(t, b.NewWorld, 2)
	d := w.Devices()
	s := newStream(t, d[0])
	ev := newEvent(t, d[0])
	x := alloc(t, d[0], hw.I32, 4)
	must(t, within(t, "closing the world", closeWorld))
	whole := hw.Whole(x)
	cases := []struct {
		name string
		err  error
	}{
		{"Alloc", func() error { _, err := d[0].Alloc(hw.I32, 1); return err }()},
		{"NewStream", func() error { _, err := d[0].NewStream(); return err }()},
		{"NewEvent", func() error { _, err := d[0].NewEvent(); return err }()},
		{"Copy", s.Copy(whole, whole)},
		{"Reduce", s.Reduce(hw.Sum, whole, whole)},
		{"Divide", s.Divide(whole, 2)},
		{"Send", s.Send(whole, d[1], 1)},
		{"Recv", s.Recv(whole, d[1], 1)},
		{"Record", s.Record(ev)},
		{"Wait", s.Wait(ev)},
		{"Synchronize", synchronize(t, s)},
		{"Read", x.Read(make([]byte, 16))},
		{"Write", x.Write(make([]byte, 16))},
	}
	for _, c := range cases {
		wantErr(t, c.name+" after close", c.err, hw.ErrClosed, d[0].Name())
	}
}
