//go:build linux || darwin

package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/proptest"
)

// needGPU skips t, with the reason, unless the driver loads and sees a
// GPU; it returns the number of GPUs.
func needGPU(t testing.TB) int {
	t.Helper()
	devs, err := Devices()
	if err != nil {
		t.Skip(err)
	}
	if len(devs) == 0 {
		t.Skip("cuda backend: the driver sees no GPU")
	}
	return len(devs)
}

// openWorld opens a world that t closes when it ends.
func openWorld(t testing.TB, p int, pl Placement) (*hw.World, []*Device) {
	t.Helper()
	w, closeWorld, err := NewWorld(p, pl)
	return w, keepWorld(t, w, closeWorld, err)
}

// keepWorld fails t if opening w failed, closes w when t ends, and
// returns its devices in rank order.
func keepWorld(t testing.TB, w *hw.World, closeWorld func() error, err error) []*Device {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := closeWorld(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	devs := make([]*Device, w.Size())
	for r := range devs {
		d, _ := w.Device(r)
		devs[r] = d.(*Device)
	}
	return devs
}

func alloc(t testing.TB, d hw.Device, dt hw.DType, n int) hw.Buffer {
	t.Helper()
	b, err := d.Alloc(dt, n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func stream(t testing.TB, d hw.Device) hw.Stream {
	t.Helper()
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func event(t testing.TB, d hw.Device) hw.Event {
	t.Helper()
	e, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// fastest times runs runs of enqueue, by events recorded on timer before
// and after, each waiting for streams to drain, and returns the fastest
// run's seconds but the first's: a warm-up that pays for staging memory
// and the JIT. enqueue gets the run's index.
func fastest(t testing.TB, runs int, timer hw.Stream, start, end hw.Event, streams []hw.Stream, enqueue func(run int) error) float64 {
	t.Helper()
	best := 0.0
	for run := range runs {
		if err := timer.Record(start); err != nil {
			t.Fatal(err)
		}
		if err := enqueue(run); err != nil {
			t.Fatal(err)
		}
		if err := timer.Record(end); err != nil {
			t.Fatal(err)
		}
		for _, s := range streams {
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
		}
		sec, err := end.ElapsedSince(start)
		if err != nil {
			t.Fatal(err)
		}
		if run > 0 && (best == 0 || sec < best) {
			best = sec
		}
	}
	return best
}

func encode(t testing.TB, dt hw.DType, vals []float64) []byte {
	t.Helper()
	b, err := hw.FromFloat64s(dt, vals)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newBuf(t testing.TB, d hw.Device, dt hw.DType, data []byte) hw.Buffer {
	t.Helper()
	b := alloc(t, d, dt, len(data)/dt.Size())
	if err := b.Write(data); err != nil {
		t.Fatal(err)
	}
	return b
}

func readAll(t testing.TB, b hw.Buffer) []byte {
	t.Helper()
	out := make([]byte, b.Len()*b.DType().Size())
	if err := b.Read(out); err != nil {
		t.Fatal(err)
	}
	return out
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestBufferRoundTrip(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		_, devs := e.open(t, 1, Virtual)
		d := devs[0]
		rng := rand.New(rand.NewPCG(1, 2))
		for _, dt := range hw.DTypes() {
			b := alloc(t, d, dt, 1001)
			if got := readAll(t, b); !bytes.Equal(got, make([]byte, len(got))) {
				t.Errorf("%s: Alloc did not zero", dt)
			}
			data := randomBytes(rng, 1001*dt.Size())
			if err := b.Write(data); err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, b); !bytes.Equal(got, data) {
				t.Errorf("%s: read back differs", dt)
			}
			if err := b.Read(make([]byte, 3)); !errors.Is(err, hw.ErrSizeMismatch) {
				t.Errorf("%s: short read: %v", dt, err)
			}
			if err := b.Free(); err != nil {
				t.Fatal(err)
			}
			if err := b.Free(); !errors.Is(err, hw.ErrFreed) {
				t.Errorf("second free: %v", err)
			}
			if err := b.Write(data); !errors.Is(err, hw.ErrFreed) {
				t.Errorf("write after free: %v", err)
			}
		}
		empty := alloc(t, d, hw.F64, 0)
		if err := errors.Join(empty.Write(nil), empty.Read(nil), empty.Free()); err != nil {
			t.Errorf("empty buffer: %v", err)
		}
	})
}

// operands returns two equal-length operand arrays for dt: every pair of
// proptest's special values (NaNs, ±Inf, ±0, subnormals, extremes), then
// random bit patterns, then random values near 1.
func operands(t testing.TB, rng *rand.Rand, dt hw.DType) (a, b []byte) {
	sp := proptest.Specials(dt)
	size := dt.Size()
	ns := len(sp) / size
	for i := range ns {
		for j := range ns {
			a = append(a, sp[i*size:(i+1)*size]...)
			b = append(b, sp[j*size:(j+1)*size]...)
		}
	}
	a = append(a, randomBytes(rng, 3000*size)...)
	b = append(b, randomBytes(rng, 3000*size)...)
	near := make([]float64, 1000)
	for i := range near {
		near[i] = 1 + (rng.Float64()-0.5)/64
	}
	enc := encode(t, dt, near)
	a = append(a, enc...)
	return a, append(b, enc[len(enc)/2:]...)[:len(a)]
}

// TestKernelsMatchReduceBytes runs every reduce kernel on special and
// random operands, at offsets that take the vector path with a scalar head
// and tail, and the all-scalar path (dst and src aligned differently), and
// compares every bit with hw.ReduceBytes.
func TestKernelsMatchReduceBytes(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		_, devs := e.open(t, 1, Virtual)
		d := devs[0]
		s := stream(t, d)
		rng := rand.New(rand.NewPCG(3, 4))
		for _, dt := range hw.DTypes() {
			a, b := operands(t, rng, dt)
			size := dt.Size()
			n := len(a) / size
			for _, op := range []hw.ReduceOp{hw.Sum, hw.Prod, hw.Min, hw.Max} {
				for _, off := range [][2]int{{0, 0}, {1, 1}, {3, 3}, {0, 1}, {5, 2}} {
					pad := 8
					da := append(append(randomBytes(rng, off[0]*size), a...), randomBytes(rng, pad*size)...)
					sa := append(append(randomBytes(rng, off[1]*size), b...), randomBytes(rng, pad*size)...)
					dst, src := newBuf(t, d, dt, da), newBuf(t, d, dt, sa)
					if err := s.Reduce(op, hw.Slice{Buf: dst, Off: off[0], Len: n}, hw.Slice{Buf: src, Off: off[1], Len: n}); err != nil {
						t.Fatal(err)
					}
					if err := s.Synchronize(); err != nil {
						t.Fatal(err)
					}
					want := append([]byte(nil), da...)
					if err := hw.ReduceBytes(op, dt, want[off[0]*size:(off[0]+n)*size], sa[off[1]*size:(off[1]+n)*size]); err != nil {
						t.Fatal(err)
					}
					// The source as it lines up with dst, for the report.
					srcAt := make([]byte, len(da))
					copy(srcAt[off[0]*size:], sa[off[1]*size:(off[1]+n)*size])
					compareElems(t, fmt.Sprintf("reduce %s %s offsets %v", op, dt, off), dt, readAll(t, dst), want, da, srcAt)
					dst.Free()
					src.Free()
				}
			}
		}
	})
}

// compareElems reports the first few elements where got and want differ,
// with the operands.
func compareElems(t *testing.T, what string, dt hw.DType, got, want, a, b []byte) {
	t.Helper()
	if bytes.Equal(got, want) {
		return
	}
	size := dt.Size()
	bad := 0
	for i := 0; i+size <= len(got); i += size {
		if bytes.Equal(got[i:i+size], want[i:i+size]) {
			continue
		}
		if bad++; bad <= 5 {
			t.Errorf("%s: element %d: got %x want %x (dst was %x, src %x)", what, i/size,
				rev(got[i:i+size]), rev(want[i:i+size]), rev(a[i:i+size]), rev(elem(b, i, size)))
		}
	}
	t.Errorf("%s: %d elements differ", what, bad)
}

func elem(b []byte, i, size int) []byte {
	if i+size > len(b) {
		return nil
	}
	return b[i : i+size]
}

// rev prints little-endian bytes most significant first.
func rev(b []byte) []byte {
	out := make([]byte, len(b))
	for i := range b {
		out[i] = b[len(b)-1-i]
	}
	return out
}

func TestDivideMatchesDivideBytes(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		_, devs := e.open(t, 1, Virtual)
		d := devs[0]
		s := stream(t, d)
		rng := rand.New(rand.NewPCG(5, 6))
		for _, dt := range hw.DTypes() {
			a, _ := operands(t, rng, dt)
			size := dt.Size()
			for _, n := range []int{1, 2, 3, 7, 8, 255, 256, 257, 8191, 1 << 24, 1<<24 + 1, 1 << 31, 1<<31 + 1, 1<<53 + 1, math.MaxInt64} {
				for _, off := range []int{0, 1} {
					buf := newBuf(t, d, dt, a)
					cnt := len(a)/size - off
					if err := s.Divide(hw.Slice{Buf: buf, Off: off, Len: cnt}, n); err != nil {
						t.Fatal(err)
					}
					if err := s.Synchronize(); err != nil {
						t.Fatal(err)
					}
					want := append([]byte(nil), a...)
					if err := hw.DivideBytes(dt, want[off*size:], n); err != nil {
						t.Fatal(err)
					}
					compareElems(t, fmt.Sprintf("divide %s by %d offset %d", dt, n, off), dt, readAll(t, buf), want, a, nil)
					buf.Free()
				}
			}
		}
	})
}

func TestCopy(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		_, devs := e.open(t, 1, Virtual)
		d := devs[0]
		s := stream(t, d)
		rng := rand.New(rand.NewPCG(7, 8))
		data := randomBytes(rng, 4*1000)
		b := newBuf(t, d, hw.F32, data)
		c := alloc(t, d, hw.F32, 1000)
		// Disjoint, identical and overlapping (memmove) ranges.
		steps := []struct{ dst, src hw.Slice }{
			{hw.Whole(c), hw.Whole(b)},
			{hw.Slice{Buf: c, Off: 10, Len: 50}, hw.Slice{Buf: c, Off: 10, Len: 50}},
			{hw.Slice{Buf: c, Off: 100, Len: 500}, hw.Slice{Buf: c, Off: 0, Len: 500}},
			{hw.Slice{Buf: c, Off: 0, Len: 300}, hw.Slice{Buf: c, Off: 7, Len: 300}},
		}
		want := append([]byte(nil), data...)
		for _, st := range steps {
			if err := s.Copy(st.dst, st.src); err != nil {
				t.Fatal(err)
			}
			copy(want[4*st.dst.Off:4*(st.dst.Off+st.dst.Len)], want[4*st.src.Off:4*(st.src.Off+st.src.Len)])
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(readAll(t, c), want) {
			t.Error("copies differ from memmove")
		}
	})
}

// TestSendRecv sends between every pair of ranks with the receive
// enqueued first, in FIFO order per tag, with empty messages among them;
// spread over GPUs when the machine has more than one.
func TestSendRecv(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		gpus := e.gpus
		pls := []Placement{Virtual}
		if gpus > 1 {
			pls = append(pls, VirtualSpread)
		}
		for _, pl := range pls {
			t.Run(pl.String(), func(t *testing.T) {
				const p = 3
				w, devs := e.open(t, p, pl)
				rng := rand.New(rand.NewPCG(9, 10))
				streams := make([]hw.Stream, p)
				for r := range streams {
					streams[r] = stream(t, devs[r])
				}
				type msg struct {
					from, to int
					tag      uint32
					data     []byte
					dst      hw.Buffer
				}
				var msgs []msg
				for from := range p {
					for to := range p {
						if from == to {
							continue
						}
						for k, n := range []int{100, 0, 33, 4096} {
							msgs = append(msgs, msg{from: from, to: to, tag: uint32(k % 2), data: randomBytes(rng, 8*n)})
						}
					}
				}
				// Receives first, in order; then the sends.
				for i := range msgs {
					m := &msgs[i]
					m.dst = alloc(t, devs[m.to], hw.I64, len(m.data)/8)
					if err := w.Recv(streams[m.to], m.from, hw.Whole(m.dst), m.tag); err != nil {
						t.Fatal(err)
					}
				}
				// Sends go on streams of their own: queued behind the
				// receives they would deadlock.
				senders := make([]hw.Stream, p)
				for r := range senders {
					senders[r] = stream(t, devs[r])
				}
				for _, m := range msgs {
					src := newBuf(t, devs[m.from], hw.I64, m.data)
					if err := w.Send(senders[m.from], m.to, hw.Whole(src), m.tag); err != nil {
						t.Fatal(err)
					}
				}
				for r, s := range append(streams, senders...) {
					if err := s.Synchronize(); err != nil {
						t.Fatalf("rank %d: %v", r, err)
					}
				}
				for i, m := range msgs {
					if got := readAll(t, m.dst); !bytes.Equal(got, m.data) {
						t.Errorf("message %d (%d -> %d tag %d, %d bytes) arrived wrong", i, m.from, m.to, m.tag, len(m.data))
					}
				}
			})
		}
	})
}

func TestRecvMismatchFailsNamingRanks(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		w, devs := e.open(t, 2, Virtual)
		s0, s1 := stream(t, devs[0]), stream(t, devs[1])
		src := alloc(t, devs[0], hw.F32, 8)
		dst := alloc(t, devs[1], hw.I32, 8)
		ev := event(t, devs[1])
		s2 := stream(t, devs[0])
		if err := errors.Join(w.Send(s0, 1, hw.Whole(src), 3), w.Recv(s1, 0, hw.Whole(dst), 3), s1.Record(ev), s2.Wait(ev)); err != nil {
			t.Fatal(err)
		}
		err := s1.Synchronize()
		if !errors.Is(err, hw.ErrDTypeMismatch) || !strings.Contains(err.Error(), "rank 1 (cuda:gpu0/r1)") || !strings.Contains(err.Error(), "rank 0 (cuda:gpu0/r0)") {
			t.Fatalf("mismatch: %v", err)
		}
		// The record the failed stream skipped fails its waiter.
		if err := s2.Synchronize(); !errors.Is(err, hw.ErrDTypeMismatch) {
			t.Errorf("waiter of a skipped record: %v", err)
		}
		if err := s0.Synchronize(); err != nil {
			t.Errorf("sender: %v", err)
		}
	})
}

// TestEventsOrderAndTime makes a stream wait for a Record that is
// enqueued on another stream before the Wait but issued after it, and
// times a stretch of work.
func TestEventsOrderAndTime(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		w, devs := e.open(t, 2, Virtual)
		d := devs[0]
		a, b := stream(t, d), stream(t, d)
		ev, start, end := event(t, d), event(t, d), event(t, d)
		if _, err := end.ElapsedSince(start); !errors.Is(err, hw.ErrNotReady) {
			t.Errorf("elapsed before any record: %v", err)
		}
		const n = 1 << 22
		x := alloc(t, d, hw.F32, n)
		y := newBuf(t, d, hw.F32, encode(t, hw.F32, make([]float64, n)))
		peerStream := stream(t, devs[1])
		// a: wait for a message, then fill x and record ev; b: wait for ev and
		// copy x to y. b's Wait is enqueued after a's Record but a cannot
		// issue it until the message (sent last) arrives.
		one := newBuf(t, devs[1], hw.F32, encode(t, hw.F32, []float64{1}))
		ones := newBuf(t, d, hw.F32, bytes.Repeat(encode(t, hw.F32, []float64{1}), n))
		tmp := alloc(t, d, hw.F32, 1)
		if err := errors.Join(
			a.Record(start), w.Recv(a, 1, hw.Whole(tmp), 0), a.Copy(hw.Whole(x), hw.Whole(ones)), a.Record(ev), a.Record(end),
			b.Wait(ev), b.Copy(hw.Whole(y), hw.Whole(x)),
		); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if err := w.Send(peerStream, 0, hw.Whole(one), 0); err != nil {
			t.Fatal(err)
		}
		for _, s := range []hw.Stream{a, b, peerStream} {
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(readAll(t, y), readAll(t, ones)) {
			t.Error("the waiting stream ran before the record it waited for")
		}
		sec, err := end.ElapsedSince(start)
		if err != nil || sec <= 0 || sec > 10 {
			t.Errorf("elapsed = %v s, %v", sec, err)
		}
		t.Logf("recorded stretch: %.3f ms", sec*1e3)
	})
}

// TestAbortUnblocks holds a Synchronize on a receive that nothing will
// satisfy while another stream is busy (so the world is not deadlocked,
// just stuck), and checks that Abort ends it with the reason.
func TestAbortUnblocks(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		w, devs := e.open(t, 2, Virtual)
		s := stream(t, devs[0])
		busy := stream(t, devs[1]).(*Stream)
		release := make(chan struct{})
		defer close(release)
		if err := busy.enqueueHost("busy host function", func(uintptr) error { <-release; return nil }); err != nil {
			t.Fatal(err)
		}
		dst := alloc(t, devs[0], hw.F32, 4)
		if err := w.Recv(s, 1, hw.Whole(dst), 9); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Synchronize() }()
		select {
		case err := <-done:
			t.Fatalf("synchronize returned %v before the abort", err)
		case <-time.After(50 * time.Millisecond):
		}
		reason := errors.New("watchdog fired")
		if err := devs[0].Abort(reason); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, reason) {
				t.Fatalf("after abort: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("Abort did not end the pending Synchronize")
		}
		if err := s.Copy(hw.Whole(dst), hw.Whole(dst)); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); !errors.Is(err, reason) {
			t.Fatalf("later synchronize: %v", err)
		}
	})
}

func TestDeadlockDetected(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		w, devs := e.open(t, 3, Virtual)
		streams := make([]hw.Stream, 3)
		for r := range streams {
			streams[r] = stream(t, devs[r])
			buf := alloc(t, devs[r], hw.F32, 16)
			// Every rank receives from the next one before sending to it.
			next := (r + 1) % 3
			if err := errors.Join(w.Recv(streams[r], next, hw.Whole(buf), 1), w.Send(streams[r], next, hw.Whole(buf), 1)); err != nil {
				t.Fatal(err)
			}
		}
		done := make(chan error, 1)
		go func() { done <- streams[1].Synchronize() }()
		select {
		case err := <-done:
			var dl *DeadlockError
			if !errors.Is(err, hw.ErrDeadlock) || !errors.As(err, &dl) || len(dl.Blocked) != 3 {
				t.Fatalf("synchronize: %v", err)
			}
			for r := range 3 {
				if !strings.Contains(err.Error(), fmt.Sprintf("rank %d (cuda:gpu0/r%d)", r, r)) {
					t.Errorf("report lacks rank %d:\n%v", r, err)
				}
			}
			t.Log(err)
		case <-time.After(30 * time.Second):
			t.Fatal("Synchronize hangs on a deadlocked plan")
		}
	})
}

func TestBadArgumentsOnGPU(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		_, devs := e.open(t, 2, Virtual)
		_, others := e.open(t, 1, Virtual)
		s := stream(t, devs[0])
		mine := alloc(t, devs[0], hw.F32, 4)
		theirs := alloc(t, others[0], hw.F32, 4)
		for name, err := range map[string]error{
			"other world's buffer": s.Copy(hw.Whole(mine), hw.Whole(theirs)),
			"other world's peer":   s.Send(hw.Whole(mine), others[0], 0),
			"other world's event":  s.Wait(event(t, others[0])),
			"divide by 0":          s.Divide(hw.Whole(mine), 0),
		} {
			if err == nil {
				t.Errorf("%s: accepted", name)
			}
		}
		if _, err := devs[0].Alloc(hw.F32, -1); !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("negative alloc: %v", err)
		}
		if err := s.Synchronize(); err != nil {
			t.Errorf("nothing was enqueued, yet: %v", err)
		}
	})
}
