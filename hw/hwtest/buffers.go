package hwtest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/commsim/commsim/hw"
)

// HostReadWrite checks Buffer: Alloc returns a zeroed buffer with the
// asked dtype and length that is not a phantom; Write and Read move exactly
// Len()*DType().Size() bytes and refuse other sizes with
// hw.ErrSizeMismatch; after Free, Read, Write and Free return hw.ErrFreed;
// and Read sees work that completed before it, never work still queued.
func HostReadWrite(t *testing.T, b Backend) {
	defer noPanic(t)
	w := openWorld(t, b.NewWorld, 2)
	d := w.Devices()
	for _, n := range []int{0, 5} {
		what := func(s string) string { return fmt.Sprintf("%d x i32: %s", n, s) }
		buf := alloc(t, d[0], hw.I32, n)
		if buf.Len() != n || buf.DType() != hw.I32 || buf.Device() != d[0] || buf.Phantom() {
			t.Errorf("%s: Len %d, DType %s, Device %v, Phantom %v", what("Alloc"), buf.Len(), buf.DType(), buf.Device(), buf.Phantom())
		}
		wantAll(t, what("a new buffer"), buf, 0)
		vals := make([]int32, n)
		for i := range vals {
			vals[i] = int32(i*1000 - 7)
		}
		must(t, buf.Write(int32s(vals)))
		if got := readInt32s(t, buf); !slices.Equal(got, vals) {
			t.Errorf("%s: wrote %v, read %v", what("round trip"), vals, got)
		}
		sizes := []int{4*n + 1}
		if n > 0 {
			sizes = append(sizes, 4*n-1)
		}
		for _, size := range sizes {
			wantErr(t, what(fmt.Sprintf("Write of %d bytes", size)), buf.Write(make([]byte, size)), hw.ErrSizeMismatch, d[0].Name())
			wantErr(t, what(fmt.Sprintf("Read of %d bytes", size)), buf.Read(make([]byte, size)), hw.ErrSizeMismatch, d[0].Name())
		}
		must(t, buf.Free())
		wantErr(t, what("Read after Free"), buf.Read(make([]byte, 4*n)), hw.ErrFreed, d[0].Name())
		wantErr(t, what("Write after Free"), buf.Write(make([]byte, 4*n)), hw.ErrFreed, d[0].Name())
		wantErr(t, what("second Free"), buf.Free(), hw.ErrFreed, d[0].Name())
	}

	a, peer := newStream(t, d[0]), newStream(t, d[1])
	x, y := filled(t, d[0], 1, 4), filled(t, d[0], 2, 4)
	g := gate{w: w, from: 1, to: 0, tag: 1}
	g.block(t, a)
	must(t, a.Copy(hw.Whole(x), hw.Whole(y)))
	wantAll(t, "Read while the copy is queued", x, 1)
	g.open(t, peer)
	for _, s := range []hw.Stream{a, peer} {
		must(t, synchronize(t, s))
	}
	wantAll(t, "Read after the copy", x, 2)
}

// FreedWhileQueued checks that a buffer freed while an operation that uses
// it is still queued makes that operation fail at Synchronize with an
// error wrapping hw.ErrFreed ("later use of the buffer is an error").
func FreedWhileQueued(t *testing.T, b Backend) {
	defer noPanic(t)
	ops := []struct {
		name    string
		enqueue func(s hw.Stream, dst, src hw.Buffer) error
	}{
		{"copy", func(s hw.Stream, dst, src hw.Buffer) error { return s.Copy(hw.Whole(dst), hw.Whole(src)) }},
		{"reduce", func(s hw.Stream, dst, src hw.Buffer) error { return s.Reduce(hw.Sum, hw.Whole(dst), hw.Whole(src)) }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			defer noPanic(t)
			w := openWorld(t, b.NewWorld, 2)
			d := w.Devices()
			a, peer := newStream(t, d[0]), newStream(t, d[1])
			dst, src := filled(t, d[0], 1, 4), filled(t, d[0], 2, 4)
			g := gate{w: w, from: 1, to: 0, tag: 1}
			g.block(t, a)
			must(t, op.enqueue(a, dst, src))
			must(t, src.Free())
			g.open(t, peer)
			wantErr(t, op.name+" from a buffer freed while queued", synchronize(t, a), hw.ErrFreed, d[0].Name())
			must(t, synchronize(t, peer))
		})
	}
}

// noTimingWorlds says why b makes no timing-only worlds, or "".
func noTimingWorlds(b Backend) string {
	if b.NewTimingWorld == nil {
		return "the backend makes no timing-only worlds (Backend.NewTimingWorld is nil)"
	}
	return ""
}

// PhantomBuffers checks a timing-only world: its buffers are phantoms with
// the asked dtype and length; Read and Write return hw.ErrPhantom; every
// kind of work still runs and synchronizes, events time it, and Free
// works once.
func PhantomBuffers(t *testing.T, b Backend) {
	defer noPanic(t)
	if why := noTimingWorlds(b); why != "" {
		t.Skip(why)
	}
	w := openWorld(t, b.NewTimingWorld, 2)
	d := w.Devices()
	x, y := alloc(t, d[0], hw.F32, 8), alloc(t, d[0], hw.F32, 8)
	z := alloc(t, d[1], hw.F32, 8)
	for _, buf := range []hw.Buffer{x, y, z} {
		if !buf.Phantom() || buf.Len() != 8 || buf.DType() != hw.F32 {
			t.Errorf("timing-only Alloc: Phantom %v, Len %d, DType %s", buf.Phantom(), buf.Len(), buf.DType())
		}
	}
	wantErr(t, "Read of a phantom", x.Read(make([]byte, 32)), hw.ErrPhantom, d[0].Name())
	wantErr(t, "Write of a phantom", x.Write(make([]byte, 32)), hw.ErrPhantom, d[0].Name())

	a, r := newStream(t, d[0]), newStream(t, d[1])
	begin, end := newEvent(t, d[0]), newEvent(t, d[0])
	must(t, a.Record(begin))
	must(t, a.Copy(hw.Whole(y), hw.Whole(x)))
	must(t, a.Reduce(hw.Sum, hw.Whole(y), hw.Whole(x)))
	must(t, a.Divide(hw.Whole(y), 2))
	must(t, w.Send(a, 1, hw.Whole(y), 1))
	must(t, a.Record(end))
	must(t, w.Recv(r, 0, hw.Whole(z), 1))
	for _, s := range []hw.Stream{a, r} {
		if err := synchronize(t, s); err != nil {
			t.Errorf("timing-only work: %v", err)
		}
	}
	if sec, err := end.ElapsedSince(begin); err != nil || sec < 0 {
		t.Errorf("timing-only ElapsedSince: %v s, %v", sec, err)
	}
	must(t, x.Free())
	wantErr(t, "second Free of a phantom", x.Free(), hw.ErrFreed, d[0].Name())
}
