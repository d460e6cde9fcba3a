package metal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
)

// The behaviour tests of the backend, written once against a worldMaker:
// cpu_test.go runs them on the CPU fake of the GPU (every OS), and
// metal_darwin_test.go runs them on the Mac's GPU (TestMetal…).

// worldMaker returns a world of p ranks that lives until the test ends.
type worldMaker func(t testing.TB, p int, opts ...Option) *hw.World

func device(t testing.TB, w *hw.World, r int) hw.Device {
	t.Helper()
	d, err := w.Device(r)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newStream(t testing.TB, d hw.Device) hw.Stream {
	t.Helper()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newEvent(t testing.TB, d hw.Device) hw.Event {
	t.Helper()
	e, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func alloc(t testing.TB, d hw.Device, dt hw.DType, n int) hw.Buffer {
	t.Helper()
	b, err := d.Alloc(dt, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t testing.TB, b hw.Buffer, data []byte) {
	t.Helper()
	if err := b.Write(data); err != nil {
		t.Fatal(err)
	}
}

func read(t testing.TB, b hw.Buffer) []byte {
	t.Helper()
	out := make([]byte, b.Len()*b.DType().Size())
	if err := b.Read(out); err != nil {
		t.Fatal(err)
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// testData is n elements of dt: special values mixed with random bits.
func testData(dt hw.DType, n int, seed int64) []byte {
	rng := rand.New(rand.NewSource(seed))
	b := make([]byte, n*dt.Size())
	rng.Read(b)
	for i := 0; i < n; i += 3 {
		e := b[i*dt.Size() : (i+1)*dt.Size()]
		switch dt {
		case hw.F32:
			le.PutUint32(e, specialsF32[rng.Intn(len(specialsF32))])
		case hw.F16:
			le.PutUint16(e, specialsF16[rng.Intn(len(specialsF16))])
		case hw.BF16:
			le.PutUint16(e, specialsBF16[rng.Intn(len(specialsBF16))])
		}
	}
	return b
}

// within fails the test if f has not returned after a generous time: a
// guard against hangs, not a timing assertion.
func within(t testing.TB, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

func testBufferRoundTrip(t *testing.T, mk worldMaker) {
	w := mk(t, 1)
	d := device(t, w, 0)
	for _, dt := range kernelDTypes {
		for _, n := range []int{0, 1, 7, 1000} {
			b := alloc(t, d, dt, n)
			if b.Len() != n || b.DType() != dt || b.Phantom() || b.Device() != d {
				t.Fatalf("buffer %v: len %d dtype %s phantom %v", dt, b.Len(), b.DType(), b.Phantom())
			}
			if got := read(t, b); !bytes.Equal(got, make([]byte, n*dt.Size())) {
				t.Fatalf("%d x %s not zeroed: % x", n, dt, got)
			}
			data := testData(dt, n, int64(n))
			write(t, b, data)
			if got := read(t, b); !bytes.Equal(got, data) {
				t.Fatalf("%d x %s: read back differs", n, dt)
			}
			if err := b.Write(make([]byte, n*dt.Size()+1)); !errors.Is(err, hw.ErrSizeMismatch) {
				t.Errorf("write of the wrong size: %v", err)
			}
			must(t, b.Free())
			if err := b.Read(make([]byte, n*dt.Size())); !errors.Is(err, hw.ErrFreed) {
				t.Errorf("read after free: %v", err)
			}
			if err := b.Free(); !errors.Is(err, hw.ErrFreed) {
				t.Errorf("double free: %v", err)
			}
		}
	}
	if _, err := d.Alloc(hw.F64, 4); !errors.Is(err, ErrF64) || !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "Metal has no 64-bit floats") {
		t.Errorf("f64 alloc: %v", err)
	}
	if _, err := d.Alloc(hw.F32, -1); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("negative alloc: %v", err)
	}
	if _, err := d.Alloc(hw.DType(0), 1); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("invalid dtype alloc: %v", err)
	}
}

// testReduceDivide runs every dtype x op and divide on the device, with
// slices that start inside their buffers, and compares with hw.
func testReduceDivide(t *testing.T, mk worldMaker) {
	w := mk(t, 1)
	d := device(t, w, 0)
	s := newStream(t, d)
	const n = 1000
	for _, dt := range kernelDTypes {
		size := dt.Size()
		for i, op := range kernelOps {
			a, b := testData(dt, n, int64(10*i)), testData(dt, n, int64(10*i+1))
			da, db := alloc(t, d, dt, n), alloc(t, d, dt, n)
			write(t, da, a)
			write(t, db, b)
			// dst elements [3, 3+m), src [11, 11+m): odd offsets for u8.
			m := n - 20
			must(t, s.Reduce(op, hw.Slice{Buf: da, Off: 3, Len: m}, hw.Slice{Buf: db, Off: 11, Len: m}))
			must(t, s.Synchronize())
			want := append([]byte(nil), a...)
			must(t, hw.ReduceBytes(op, dt, want[3*size:(3+m)*size], b[11*size:(11+m)*size]))
			if got := read(t, da); !bytes.Equal(got, want) {
				compareElems(t, "device reduce "+op.String(), dt, a, b, got, want)
			}
			must(t, da.Free())
			must(t, db.Free())
		}
		for _, q := range []int{1, 3, 7, 1000} {
			a := testData(dt, n, int64(q))
			da := alloc(t, d, dt, n)
			write(t, da, a)
			must(t, s.Divide(hw.Slice{Buf: da, Off: 1, Len: n - 2}, q))
			must(t, s.Synchronize())
			want := append([]byte(nil), a...)
			must(t, hw.DivideBytes(dt, want[size:(n-1)*size], q))
			if got := read(t, da); !bytes.Equal(got, want) {
				compareElems(t, fmt.Sprintf("device divide by %d", q), dt, a, a, got, want)
			}
			must(t, da.Free())
		}
	}
}

// testCopy: plain, onto itself, and overlapping both ways (memmove).
func testCopy(t *testing.T, mk worldMaker) {
	w := mk(t, 1)
	d := device(t, w, 0)
	s := newStream(t, d)
	for _, dt := range kernelDTypes {
		size := dt.Size()
		data := testData(dt, 64, 5)
		for _, c := range []struct{ dst, src, n int }{{0, 32, 32}, {0, 0, 64}, {4, 0, 40}, {0, 4, 40}, {10, 11, 20}} {
			b := alloc(t, d, dt, 64)
			write(t, b, data)
			must(t, s.Copy(hw.Slice{Buf: b, Off: c.dst, Len: c.n}, hw.Slice{Buf: b, Off: c.src, Len: c.n}))
			must(t, s.Synchronize())
			want := append([]byte(nil), data...)
			copy(want[c.dst*size:(c.dst+c.n)*size], data[c.src*size:(c.src+c.n)*size])
			if got := read(t, b); !bytes.Equal(got, want) {
				t.Errorf("%s copy [%d:] <- [%d:] x %d: got % x, want % x", dt, c.dst, c.src, c.n, got, want)
			}
			must(t, b.Free())
		}
	}
}

// testSendRecv: a Recv enqueued before its Send, FIFO per tag, tags
// matched out of order, an empty message, and mismatches.
func testSendRecv(t *testing.T, mk worldMaker) {
	w := mk(t, 3)
	d0, d1, d2 := device(t, w, 0), device(t, w, 1), device(t, w, 2)
	s0, s1, s2 := newStream(t, d0), newStream(t, d1), newStream(t, d2)
	const n = 300
	a, b := testData(hw.F32, n, 1), testData(hw.F32, n, 2)
	src0, src1 := alloc(t, d0, hw.F32, n), alloc(t, d0, hw.F32, n)
	write(t, src0, a)
	write(t, src1, b)
	dst := []hw.Buffer{alloc(t, d1, hw.F32, n), alloc(t, d1, hw.F32, n), alloc(t, d1, hw.F32, n), alloc(t, d1, hw.F32, n)}
	empty := alloc(t, d1, hw.F32, 0)

	// Rank 1 enqueues everything first, as ops' executor does for rank 0.
	must(t, w.Recv(s1, 0, hw.Whole(dst[0]), 7))
	must(t, w.Recv(s1, 0, hw.Whole(dst[1]), 7))
	must(t, w.Recv(s1, 0, hw.Whole(dst[2]), 9)) // tag 9 is sent before tag 7
	must(t, w.Recv(s1, 2, hw.Whole(empty), 1))
	must(t, s1.Copy(hw.Whole(dst[3]), hw.Whole(dst[2])))

	must(t, w.Send(s0, 1, hw.Whole(src1), 9))
	must(t, w.Send(s0, 1, hw.Whole(src0), 7))
	must(t, w.Send(s0, 1, hw.Whole(src1), 7))
	// src0 may be reused once the send completes: overwrite it after.
	must(t, s0.Copy(hw.Whole(src0), hw.Whole(src1)))
	must(t, w.Send(s2, 1, hw.Whole(alloc(t, d2, hw.F32, 0)), 1))

	for _, s := range []hw.Stream{s0, s1, s2} {
		must(t, within(t, "synchronize", s.Synchronize))
	}
	for i, want := range [][]byte{a, b, b, b} {
		if got := read(t, dst[i]); !bytes.Equal(got, want) {
			t.Errorf("receive %d got the wrong message", i)
		}
	}

	// A message of another dtype or size fails the receiver at Synchronize.
	for _, c := range []struct {
		dt   hw.DType
		n    int
		want error
	}{{hw.I32, n, hw.ErrDTypeMismatch}, {hw.F32, n - 1, hw.ErrSizeMismatch}} {
		r := newStream(t, d1)
		must(t, w.Send(s0, 1, hw.Whole(src0), 11))
		must(t, w.Recv(r, 0, hw.Whole(alloc(t, d1, c.dt, c.n)), 11))
		err := within(t, "synchronize", r.Synchronize)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), "recv") {
			t.Errorf("receiving %d x %s into %d x %s: %v", n, hw.F32, c.n, c.dt, err)
		}
		must(t, s0.Synchronize())
	}
}

// testEvents: waits order streams; a Wait captures the Record enqueued
// before it; a never-recorded event does not wait; timing.
func testEvents(t *testing.T, mk worldMaker) {
	w := mk(t, 3)
	d0, d1, d2 := device(t, w, 0), device(t, w, 1), device(t, w, 2)
	a, b := newStream(t, d0), newStream(t, d0)
	ev, never := newEvent(t, d0), newEvent(t, d1)
	const n = 4096
	x := alloc(t, d0, hw.I32, n)
	y := alloc(t, d0, hw.I32, n)
	ones := make([]byte, 4*n)
	for i := range n {
		le.PutUint32(ones[4*i:], 1)
	}
	write(t, x, ones)

	if _, err := ev.ElapsedSince(ev); !errors.Is(err, hw.ErrNotReady) {
		t.Errorf("elapsed before any record: %v", err)
	}
	// b copies x after a's ten doublings; the copy must see all of them.
	start := newEvent(t, d0)
	must(t, a.Record(start))
	for range 10 {
		must(t, a.Reduce(hw.Sum, hw.Whole(x), hw.Whole(x)))
	}
	must(t, a.Record(ev))
	must(t, b.Wait(never)) // never recorded: no wait
	must(t, b.Wait(ev))
	must(t, b.Copy(hw.Whole(y), hw.Whole(x)))

	// The Wait above captured record #1. Record #2 comes after a receive
	// that nobody has sent yet: b must not wait for it.
	z := alloc(t, d0, hw.I32, 1)
	must(t, w.Recv(a, 2, hw.Whole(z), 3))
	must(t, a.Record(ev))
	must(t, within(t, "synchronize b", b.Synchronize))
	ys := read(t, y)
	for i := 0; i < 4*n; i += 4 {
		if v := le.Uint32(ys[i:]); v != 1024 {
			t.Fatalf("y[%d] = %d, want 1024: the copy did not wait for the ten doublings", i/4, v)
		}
	}
	s2 := newStream(t, d2)
	must(t, w.Send(s2, 0, hw.Whole(alloc(t, d2, hw.I32, 1)), 3))
	must(t, within(t, "synchronize a", a.Synchronize))
	sec, err := ev.ElapsedSince(start)
	if err != nil || sec < 0 {
		t.Errorf("elapsed %v s, %v", sec, err)
	}
	other := mk(t, 1)
	if _, err := ev.ElapsedSince(newEvent(t, device(t, other, 0))); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("elapsed across worlds: %v", err)
	}

	// A stream that fails fails the waiters of the records it skips.
	f := newStream(t, d1)
	g := newStream(t, d2)
	failed := newEvent(t, d1)
	must(t, w.Send(a, 1, hw.Whole(x), 5))
	must(t, w.Recv(f, 0, hw.Whole(alloc(t, d1, hw.F32, n)), 5)) // dtype mismatch
	must(t, f.Record(failed))
	must(t, g.Wait(failed))
	must(t, g.Copy(hw.Whole(alloc(t, d2, hw.I32, 1)), hw.Whole(alloc(t, d2, hw.I32, 1))))
	errF := within(t, "synchronize f", f.Synchronize)
	errG := within(t, "synchronize g", g.Synchronize)
	if !errors.Is(errF, hw.ErrDTypeMismatch) || !errors.Is(errG, hw.ErrDTypeMismatch) || !strings.Contains(errG.Error(), "r2") {
		t.Errorf("failure did not reach the waiter:\n  f: %v\n  g: %v", errF, errG)
	}
	must(t, a.Synchronize())
}

// testBadArguments: every bad call returns an error at enqueue time and
// panics nowhere.
func testBadArguments(t *testing.T, mk worldMaker) {
	w := mk(t, 2)
	other := mk(t, 1)
	d0, d1 := device(t, w, 0), device(t, w, 1)
	od := device(t, other, 0)
	s := newStream(t, d0)
	f := alloc(t, d0, hw.F32, 8)
	i := alloc(t, d0, hw.I32, 8)
	short := alloc(t, d0, hw.F32, 4)
	remote := alloc(t, d1, hw.F32, 8)
	freed := alloc(t, d0, hw.F32, 8)
	must(t, freed.Free())
	ev := newEvent(t, d0)
	foreignEv := newEvent(t, od)
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"copy nil", s.Copy(hw.Slice{}, hw.Whole(f)), hw.ErrBadArgument},
		{"copy out of range", s.Copy(hw.Slice{Buf: f, Off: 6, Len: 4}, hw.Slice{Buf: f, Len: 4}), hw.ErrBadArgument},
		{"copy negative", s.Copy(hw.Slice{Buf: f, Off: -1, Len: 4}, hw.Slice{Buf: f, Len: 4}), hw.ErrBadArgument},
		{"copy other device", s.Copy(hw.Whole(remote), hw.Whole(f)), hw.ErrBadArgument},
		{"copy dtypes", s.Copy(hw.Whole(f), hw.Whole(i)), hw.ErrDTypeMismatch},
		{"copy sizes", s.Copy(hw.Whole(f), hw.Whole(short)), hw.ErrSizeMismatch},
		{"copy freed", s.Copy(hw.Whole(f), hw.Whole(freed)), hw.ErrFreed},
		{"reduce avg", s.Reduce(hw.Avg, hw.Whole(f), hw.Whole(f)), hw.ErrBadArgument},
		{"reduce invalid op", s.Reduce(hw.ReduceOp(99), hw.Whole(f), hw.Whole(f)), hw.ErrBadArgument},
		{"reduce dtypes", s.Reduce(hw.Sum, hw.Whole(f), hw.Whole(i)), hw.ErrDTypeMismatch},
		{"divide by 0", s.Divide(hw.Whole(f), 0), hw.ErrBadArgument},
		{"divide freed", s.Divide(hw.Whole(freed), 2), hw.ErrFreed},
		{"send to foreign device", s.Send(hw.Whole(f), od, 1), hw.ErrUnknownPeer},
		{"send to nil", s.Send(hw.Whole(f), nil, 1), hw.ErrUnknownPeer},
		{"send remote buffer", s.Send(hw.Whole(remote), d1, 1), hw.ErrBadArgument},
		{"recv from foreign device", s.Recv(hw.Whole(f), od, 1), hw.ErrUnknownPeer},
		{"recv out of range", s.Recv(hw.Slice{Buf: f, Len: 9}, d1, 1), hw.ErrBadArgument},
		{"record foreign event", s.Record(foreignEv), hw.ErrBadArgument},
		{"record nil event", s.Record(nil), hw.ErrBadArgument},
		{"wait foreign event", s.Wait(foreignEv), hw.ErrBadArgument},
		{"world send bad rank", w.Send(s, 5, hw.Whole(f), 1), hw.ErrUnknownPeer},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, c.err, c.want)
		}
	}
	// Nothing was enqueued, so the stream is idle and healthy.
	must(t, s.Record(ev))
	must(t, within(t, "synchronize", s.Synchronize))
	// A buffer freed after its op was enqueued fails the op at run time.
	late := alloc(t, d0, hw.F32, 8)
	blocker := alloc(t, d0, hw.F32, 1)
	must(t, w.Recv(s, 1, hw.Whole(blocker), 2)) // holds the queue
	must(t, s.Copy(hw.Whole(f), hw.Whole(late)))
	must(t, late.Free())
	s1 := newStream(t, d1)
	must(t, w.Send(s1, 0, hw.Whole(alloc(t, d1, hw.F32, 1)), 2))
	if err := within(t, "synchronize", s.Synchronize); !errors.Is(err, hw.ErrFreed) {
		t.Errorf("copy from a buffer freed after enqueue: %v", err)
	}
}

// testAbort: a stream stuck on a receive nobody sends is released by
// Abort, with an error wrapping the reason; the device then refuses work.
func testAbort(t *testing.T, mk worldMaker) {
	w := mk(t, 2, WithDeadlockAfter(0))
	d0 := device(t, w, 0)
	s := newStream(t, d0)
	must(t, w.Recv(s, 1, hw.Whole(alloc(t, d0, hw.F32, 4)), 1))
	reason := errors.New("watchdog says stop")
	done := make(chan error, 1)
	go func() { done <- s.Synchronize() }()
	a, ok := hw.As[hw.Aborter](d0)
	if !ok {
		t.Fatal("metal devices are not hw.Aborters")
	}
	time.Sleep(10 * time.Millisecond) // let Synchronize start waiting (either order must work)
	must(t, a.Abort(reason))
	select {
	case err := <-done:
		if !errors.Is(err, reason) {
			t.Errorf("Synchronize after Abort: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Abort did not release Synchronize")
	}
	if err := s.Synchronize(); !errors.Is(err, reason) {
		t.Errorf("later Synchronize: %v", err)
	}
	if err := s.Copy(hw.Whole(alloc(t, device(t, w, 1), hw.F32, 1)), hw.Whole(alloc(t, device(t, w, 1), hw.F32, 1))); err == nil {
		t.Error("an aborted device took work")
	}
	if _, err := d0.Alloc(hw.F32, 1); !errors.Is(err, reason) {
		t.Errorf("alloc after abort: %v", err)
	}
	// The peer stays usable; a receive from the aborted rank fails.
	d1 := device(t, w, 1)
	s1 := newStream(t, d1)
	must(t, w.Recv(s1, 0, hw.Whole(alloc(t, d1, hw.F32, 4)), 9))
	if err := within(t, "synchronize", s1.Synchronize); !errors.Is(err, reason) {
		t.Errorf("receive from an aborted rank: %v", err)
	}
}

// testDeadlock: two ranks that each receive first deadlock, and the
// error names both.
func testDeadlock(t *testing.T, mk worldMaker) {
	w := mk(t, 2, WithDeadlockAfter(50*time.Millisecond))
	var ss []hw.Stream
	for r := range 2 {
		d := device(t, w, r)
		s := newStream(t, d)
		buf := alloc(t, d, hw.F32, 4)
		must(t, w.Recv(s, 1-r, hw.Whole(buf), 1))
		must(t, w.Send(s, 1-r, hw.Whole(buf), 1))
		ss = append(ss, s)
	}
	err := within(t, "synchronize", ss[0].Synchronize)
	var de *DeadlockError
	if !errors.Is(err, hw.ErrDeadlock) || !errors.As(err, &de) || len(de.Blocked) != 2 ||
		!strings.Contains(err.Error(), "rank 0") || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("deadlock: %v", err)
	}
	if err := within(t, "synchronize", ss[1].Synchronize); !errors.Is(err, hw.ErrDeadlock) {
		t.Errorf("the other rank: %v", err)
	}
}

// testClosed: a closed world refuses everything with hw.ErrClosed.
func testClosed(t *testing.T, w *hw.World, closeFn func() error) {
	d := device(t, w, 0)
	s := newStream(t, d)
	b := alloc(t, d, hw.F32, 4)
	must(t, closeFn())
	must(t, closeFn()) // idempotent
	for name, err := range map[string]error{
		"copy":        s.Copy(hw.Whole(b), hw.Whole(b)),
		"synchronize": s.Synchronize(),
		"read":        b.Read(make([]byte, 16)),
		"new stream":  func() error { _, err := d.NewStream(); return err }(),
		"alloc":       func() error { _, err := d.Alloc(hw.F32, 1); return err }(),
	} {
		if !errors.Is(err, hw.ErrClosed) {
			t.Errorf("%s after close: %v", name, err)
		}
	}
}
