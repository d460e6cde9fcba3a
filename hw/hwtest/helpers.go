package hwtest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
)

// hangAfter bounds every call that could block. It is a guard against
// hangs, not a measure of speed: nothing in the suite should take a
// noticeable fraction of it, even under the race detector.
const hangAfter = 2 * time.Minute

// start runs f in a goroutine of its own. The returned wait gives f's
// error; it fails t if f panicked or has not returned after hangAfter.
func start(t *testing.T, what string, f func() error) (wait func() error) {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				err := fmt.Errorf("%s panicked: %v", what, r)
				t.Errorf("%v (bad calls must never panic)\n%s", err, debug.Stack())
				done <- err
			}
		}()
		done <- f()
	}()
	return func() error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(hangAfter):
			t.Fatalf("%s has not returned after %v: the backend hangs", what, hangAfter)
			return nil
		}
	}
}

// within runs f under the hang guard and returns its error.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	return start(t, what, f)()
}

func synchronize(t *testing.T, s hw.Stream) error {
	t.Helper()
	return within(t, fmt.Sprintf("Synchronize of a stream of %s", s.Device().Name()), s.Synchronize)
}

// noPanic, deferred by every check, turns a panic on the test's goroutine
// into that check's failure.
func noPanic(t *testing.T) {
	if r := recover(); r != nil {
		t.Fatalf("panic (bad calls must never panic): %v\n%s", r, debug.Stack())
	}
}

// openWorld opens a world of ranks devices that is closed when t ends.
func openWorld(t *testing.T, newWorld func(int) (*hw.World, func() error, error), ranks int) *hw.World {
	t.Helper()
	w, _ := openClosable(t, newWorld, ranks)
	return w
}

// openClosable is openWorld that also returns the world's close, for a check
// that closes it itself; the cleanup then does not close it again.
func openClosable(t *testing.T, newWorld func(int) (*hw.World, func() error, error), ranks int) (*hw.World, func() error) {
	t.Helper()
	w, closeWorld, err := newWorld(ranks)
	if err != nil {
		t.Fatalf("open a world of %d ranks: %v", ranks, err)
	}
	if w == nil || closeWorld == nil || w.Size() != ranks {
		t.Fatalf("open a world of %d ranks: got world %v and close %v", ranks, w, closeWorld != nil)
	}
	var once sync.Once
	var closeErr error
	closeOnce := func() error {
		once.Do(func() { closeErr = closeWorld() })
		return closeErr
	}
	t.Cleanup(func() {
		if err := within(t, "closing the world", closeOnce); err != nil {
			t.Errorf("close the world: %v", err)
		}
	})
	return w, closeOnce
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newStream(t *testing.T, d hw.Device) hw.Stream {
	t.Helper()
	s, err := d.NewStream()
	must(t, err)
	return s
}

func newEvent(t *testing.T, d hw.Device) hw.Event {
	t.Helper()
	e, err := d.NewEvent()
	must(t, err)
	return e
}

func alloc(t *testing.T, d hw.Device, dt hw.DType, n int) hw.Buffer {
	t.Helper()
	b, err := d.Alloc(dt, n)
	must(t, err)
	return b
}

// filled returns an i32 buffer of n elements, each v.
func filled(t *testing.T, d hw.Device, v int32, n int) hw.Buffer {
	t.Helper()
	b := alloc(t, d, hw.I32, n)
	must(t, b.Write(int32s(slices.Repeat([]int32{v}, n))))
	return b
}

func int32s(vals []int32) []byte {
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
	}
	return out
}

// readInt32s reads an i32 buffer.
func readInt32s(t *testing.T, b hw.Buffer) []int32 {
	t.Helper()
	raw := make([]byte, 4*b.Len())
	if err := b.Read(raw); err != nil {
		t.Fatalf("read back: %v", err)
	}
	out := make([]int32, b.Len())
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// wantAll reports the elements of an i32 buffer that are not v.
func wantAll(t *testing.T, what string, b hw.Buffer, v int32) {
	t.Helper()
	if got := readInt32s(t, b); slices.ContainsFunc(got, func(x int32) bool { return x != v }) {
		t.Errorf("%s: got %v, want every element %d", what, got, v)
	}
}

// wantErr checks that err wraps want and names each of names (devices,
// operations), as the contract says errors do.
func wantErr(t *testing.T, what string, err, want error, names ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got %v, want an error wrapping %q", what, err, want)
		return
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("%s: the error does not name %s: %v", what, n, err)
		}
	}
}

// wantNoDeadlock checks that a failure caused by another stream's failure
// is reported as that cause and not as a deadlock.
func wantNoDeadlock(t *testing.T, what string, err error) {
	t.Helper()
	if errors.Is(err, hw.ErrDeadlock) {
		t.Errorf("%s: reported as a deadlock; want the cause: %v", what, err)
	}
}

// wantPeerFailed checks that a receive whose sender failed reports the
// sender's cause wrapped in hw.ErrPeerFailed, and no deadlock.
func wantPeerFailed(t *testing.T, what string, err error) {
	t.Helper()
	wantNoDeadlock(t, what, err)
	if !errors.Is(err, hw.ErrPeerFailed) {
		t.Errorf("%s: %v does not wrap hw.ErrPeerFailed", what, err)
	}
}

// gate is a message that holds a stream's later work until the test sends
// it: the one host-controlled wait that the hw API offers.
type gate struct {
	w        *hw.World
	from, to int
	tag      uint32
}

// block enqueues the gate's receive on s, a stream of rank g.to.
func (g gate) block(t *testing.T, s hw.Stream) {
	t.Helper()
	d, err := g.w.Device(g.to)
	must(t, err)
	must(t, g.w.Recv(s, g.from, hw.Whole(alloc(t, d, hw.I32, 1)), g.tag))
}

// open enqueues the gate's send on s, a stream of rank g.from.
func (g gate) open(t *testing.T, s hw.Stream) {
	t.Helper()
	d, err := g.w.Device(g.from)
	must(t, err)
	must(t, g.w.Send(s, g.to, hw.Whole(alloc(t, d, hw.I32, 1)), g.tag))
}
