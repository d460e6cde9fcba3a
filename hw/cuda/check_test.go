//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/commsim/commsim/hw"
)

// These tests need no GPU: they build devices, buffers and streams by hand
// (no driver, no worker) and exercise what happens before anything reaches
// the driver: argument checks, message checks and the deadlock analysis.

func fakeDevices(n int) []*Device {
	h := newHub(nil)
	g := &gpu{ordinal: 0, sms: 1}
	gpus := make([]int, n)
	devs := make([]*Device, n)
	for r := range devs {
		devs[r] = &Device{h: h, g: g, rank: r, name: deviceName(gpus, r), bufs: map[*Buffer]struct{}{}}
		h.devs = append(h.devs, devs[r])
	}
	return devs
}

func fakeStream(d *Device) *Stream {
	s := &Stream{dev: d, id: len(d.h.streams)}
	s.wake = sync.NewCond(&d.h.mu)
	d.h.streams = append(d.h.streams, s)
	d.strms = append(d.strms, s)
	return s
}

func fakeBuffer(d *Device, dt hw.DType, n int) *Buffer {
	return &Buffer{dev: d, dt: dt, n: n, ptr: 0x10000}
}

// foreignBuffer is an hw.Buffer of no backend.
type foreignBuffer struct{ dev hw.Device }

func (b foreignBuffer) Device() hw.Device { return b.dev }
func (foreignBuffer) DType() hw.DType     { return hw.F32 }
func (foreignBuffer) Len() int            { return 8 }
func (foreignBuffer) Phantom() bool       { return false }
func (foreignBuffer) Write([]byte) error  { return nil }
func (foreignBuffer) Read([]byte) error   { return nil }
func (foreignBuffer) Free() error         { return nil }

func TestArgumentChecks(t *testing.T) {
	devs := fakeDevices(2)
	other := fakeDevices(1)[0]
	d := devs[0]
	s := fakeStream(d)
	a, b := fakeBuffer(d, hw.F32, 8), fakeBuffer(d, hw.F32, 8)
	i32 := fakeBuffer(d, hw.I32, 8)
	short := fakeBuffer(d, hw.F32, 4)
	onPeer := fakeBuffer(devs[1], hw.F32, 8)
	freed := fakeBuffer(d, hw.F32, 8)
	freed.freed = true
	ev := &Event{dev: d, id: 1}
	foreignEv := &Event{dev: other, id: 1}
	w, fb := hw.Whole, foreignBuffer{dev: d}
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"copy nil dst", func() error { return s.Copy(hw.Slice{}, w(a)) }, hw.ErrBadArgument},
		{"copy out of range", func() error { return s.Copy(hw.Slice{Buf: a, Off: 4, Len: 5}, w(b)) }, hw.ErrBadArgument},
		{"copy negative offset", func() error { return s.Copy(hw.Slice{Buf: a, Off: -1, Len: 2}, hw.Slice{Buf: b, Len: 2}) }, hw.ErrBadArgument},
		{"copy other device", func() error { return s.Copy(w(a), w(onPeer)) }, hw.ErrBadArgument},
		{"copy dtype mismatch", func() error { return s.Copy(w(a), w(i32)) }, hw.ErrDTypeMismatch},
		{"copy size mismatch", func() error { return s.Copy(w(a), w(short)) }, hw.ErrSizeMismatch},
		{"copy freed", func() error { return s.Copy(w(a), w(freed)) }, hw.ErrFreed},
		{"copy foreign buffer", func() error { return s.Copy(w(a), w(fb)) }, hw.ErrBadArgument},
		{"reduce avg", func() error { return s.Reduce(hw.Avg, w(a), w(b)) }, hw.ErrBadArgument},
		{"reduce invalid op", func() error { return s.Reduce(hw.ReduceOp(99), w(a), w(b)) }, hw.ErrBadArgument},
		{"reduce mismatch", func() error { return s.Reduce(hw.Sum, w(a), w(i32)) }, hw.ErrDTypeMismatch},
		{"divide by zero", func() error { return s.Divide(w(a), 0) }, hw.ErrBadArgument},
		{"divide freed", func() error { return s.Divide(w(freed), 2) }, hw.ErrFreed},
		{"send unknown peer", func() error { return s.Send(w(a), other, 1) }, hw.ErrUnknownPeer},
		{"send nil peer", func() error { return s.Send(w(a), nil, 1) }, hw.ErrUnknownPeer},
		{"send nil buffer", func() error { return s.Send(hw.Slice{}, devs[1], 1) }, hw.ErrBadArgument},
		{"recv into peer's buffer", func() error { return s.Recv(w(onPeer), devs[1], 1) }, hw.ErrBadArgument},
		{"record foreign event", func() error { return s.Record(foreignEv) }, hw.ErrBadArgument},
		{"wait nil event", func() error { return s.Wait(nil) }, hw.ErrBadArgument},
		{"host nil func", func() error { return s.enqueueHost("nccl", nil) }, hw.ErrBadArgument},
	}
	for _, c := range cases {
		err := c.call()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.want)
			continue
		}
		if !strings.Contains(err.Error(), d.name) {
			t.Errorf("%s: error %q does not name the device", c.name, err)
		}
	}
	if len(s.queue) != 0 {
		t.Fatalf("bad calls enqueued %d ops", len(s.queue))
	}
	// Good calls enqueue, numbered in order.
	good := []error{
		s.Copy(w(a), w(b)), s.Reduce(hw.Max, w(a), w(b)), s.Divide(hw.Slice{Buf: a, Off: 2, Len: 3}, 3),
		s.Send(w(a), devs[1], 7), s.Recv(hw.Slice{Buf: a, Off: 8, Len: 0}, devs[1], 7), s.Record(ev), s.Wait(ev),
	}
	if err := errors.Join(good...); err != nil {
		t.Fatal(err)
	}
	for i, o := range s.queue {
		if o.index != i {
			t.Errorf("op %d has index %d", i, o.index)
		}
	}
	if w := s.queue[6]; w.gen != s.queue[5].gen || w.gen.refs != 1 {
		t.Errorf("wait did not capture the record's generation")
	}
	// A closed world refuses everything.
	d.h.closed = true
	for name, err := range map[string]error{
		"copy": s.Copy(w(a), w(b)), "record": s.Record(ev), "sync": s.Synchronize(),
		"alloc":  func() error { _, err := d.Alloc(hw.F32, 1); return err }(),
		"stream": func() error { _, err := d.NewStream(); return err }(),
		"event":  func() error { _, err := d.NewEvent(); return err }(),
		"read":   a.Read(make([]byte, 32)),
	} {
		if !errors.Is(err, hw.ErrClosed) {
			t.Errorf("%s on a closed world: %v", name, err)
		}
	}
}

func TestAllocAndHostCopyChecks(t *testing.T) {
	if err := checkAlloc("cuda:gpu0", hw.DType(0), 1); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("invalid dtype: %v", err)
	}
	if err := checkAlloc("cuda:gpu0", hw.F32, -1); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("negative length: %v", err)
	}
	if err := checkHostCopy("cuda:gpu0", "read", false, 7, 2, hw.F32); !errors.Is(err, hw.ErrSizeMismatch) || !strings.Contains(err.Error(), "8 bytes") {
		t.Errorf("short host slice: %v", err)
	}
	if err := checkHostCopy("cuda:gpu0", "write", true, 8, 2, hw.F32); !errors.Is(err, hw.ErrFreed) {
		t.Errorf("freed: %v", err)
	}
	if err := checkHostCopy("cuda:gpu0", "write", false, 8, 2, hw.F32); err != nil {
		t.Errorf("good copy: %v", err)
	}
}

func TestMessageCheckNamesRanks(t *testing.T) {
	devs := fakeDevices(3)
	dst := hw.Whole(fakeBuffer(devs[1], hw.F32, 4))
	err := checkMessage(devs[2], hw.F16, 4, dst)
	if !errors.Is(err, hw.ErrDTypeMismatch) || !strings.Contains(err.Error(), "rank 2 (cuda:gpu0/r2)") {
		t.Errorf("dtype: %v", err)
	}
	if err := checkMessage(devs[2], hw.F32, 5, dst); !errors.Is(err, hw.ErrSizeMismatch) {
		t.Errorf("size: %v", err)
	}
	if err := checkMessage(devs[2], hw.F32, 4, dst); err != nil {
		t.Errorf("match: %v", err)
	}
}

// TestDeadlockAnalysis checks the host-level deadlock rule on queues built
// by hand: two ranks that both receive first are stuck; a message, a
// failed stream or a worker inside the driver means they are not.
func TestDeadlockAnalysis(t *testing.T) {
	devs := fakeDevices(2)
	h := devs[0].h
	s0, s1 := fakeStream(devs[0]), fakeStream(devs[1])
	b0, b1 := fakeBuffer(devs[0], hw.F32, 4), fakeBuffer(devs[1], hw.F32, 4)
	if err := errors.Join(
		s0.Recv(hw.Whole(b0), devs[1], 1), s0.Send(hw.Whole(b0), devs[1], 2),
		s1.Recv(hw.Whole(b1), devs[0], 2), s1.Send(hw.Whole(b1), devs[0], 1),
	); err != nil {
		t.Fatal(err)
	}
	dl := h.deadlock()
	if dl == nil {
		t.Fatal("two ranks receiving first: no deadlock reported")
	}
	if !errors.Is(dl, hw.ErrDeadlock) || len(dl.Blocked) != 2 {
		t.Fatalf("deadlock = %v", dl)
	}
	msg := dl.Error()
	for _, want := range []string{"rank 0 (cuda:gpu0/r0)", "rank 1 (cuda:gpu0/r1)", "recv 4 x f32", "from rank 1", "1 more queued"} {
		if !strings.Contains(msg, want) {
			t.Errorf("deadlock report lacks %q:\n%s", want, msg)
		}
	}
	s0.inflight = true
	if h.deadlock() != nil {
		t.Error("deadlock reported while a worker is in the driver")
	}
	s0.inflight = false
	h.boxes[mailKey{from: devs[1], to: devs[0], tag: 1}] = &mailbox{msgs: []*message{{from: devs[1], dt: hw.F32, n: 4}}}
	if h.deadlock() != nil {
		t.Error("deadlock reported with rank 0's message in its mailbox")
	}
	delete(h.boxes, mailKey{from: devs[1], to: devs[0], tag: 1})
	s1.err = errors.New("failed")
	if h.deadlock() != nil {
		t.Error("deadlock reported while a failed stream can still skip its queue")
	}
	s1.err = nil

	// A Wait for a Record nobody has issued is a host wait too; once the
	// Record's generation fails, the waiter can move (and will fail).
	devs = fakeDevices(1)
	h = devs[0].h
	a, b := fakeStream(devs[0]), fakeStream(devs[0])
	ev := &Event{dev: devs[0], id: 1}
	if err := errors.Join(a.Wait(&Event{dev: devs[0], id: 2}), b.Record(ev), a.Wait(ev)); err != nil {
		t.Fatal(err)
	}
	if h.deadlock() != nil {
		t.Error("a wait on a never-recorded event is not a wait")
	}
	a.queue = a.queue[1:]
	b.queue = nil // b's record is "issued later": not reachable any more
	dl = h.deadlock()
	if dl == nil || !strings.Contains(dl.Error(), "wait for event 1 of cuda:gpu0 (record #1)") {
		t.Fatalf("stuck wait: %v", dl)
	}
	ev.last.failed(errors.New("stream failed"))
	if h.deadlock() != nil {
		t.Error("deadlock reported after the awaited record failed")
	}
}

func TestLayout(t *testing.T) {
	for _, c := range []struct {
		p, gpus int
		pl      Placement
		want    string
	}{
		{4, 8, OnePerGPU, "[0 1 2 3]"},
		{5, 1, Virtual, "[0 0 0 0 0]"},
		{5, 2, VirtualSpread, "[0 1 0 1 0]"},
	} {
		got, err := Layout(c.p, c.pl, c.gpus)
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("Layout(%d, %v, %d) = %v, %v; want %s", c.p, c.pl, c.gpus, got, err, c.want)
		}
	}
	if _, err := Layout(3, OnePerGPU, 2); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "need 3 GPUs") {
		t.Errorf("too few GPUs: %v", err)
	}
	if _, err := Layout(0, Virtual, 1); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("no ranks: %v", err)
	}
	// NewWorld refuses what no machine could lay out before it looks for
	// a driver, so the error says what is wrong on a machine without one.
	for _, c := range []struct {
		p  int
		pl Placement
	}{{-1, Virtual}, {0, OnePerGPU}, {2, Placement(99)}, {2, 0}} {
		if w, _, err := NewWorld(c.p, c.pl); w != nil || !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("NewWorld(%d, %v): %v, want ErrBadArgument whether or not there is a driver", c.p, c.pl, err)
		}
	}
	for _, s := range []string{"gpu", "Virtual", " spread "} {
		if p, err := ParsePlacement(s); err != nil || !strings.EqualFold(p.String(), strings.TrimSpace(s)) {
			t.Errorf("ParsePlacement(%q) = %v, %v", s, p, err)
		}
	}
	if names := []string{deviceName([]int{0, 1}, 1), deviceName([]int{0, 0, 1}, 1), deviceName([]int{0, 0, 1}, 2)}; fmt.Sprint(names) != "[cuda:gpu1 cuda:gpu0/r1 cuda:gpu1]" {
		t.Errorf("names %v", names)
	}
}

func TestShapes(t *testing.T) {
	// Every element is covered exactly once by the kernel's index map, for
	// every alignment and length, and the grid stays within the GPU.
	for _, size := range []int{1, 2, 4, 8} {
		for dmis := 0; dmis < 16; dmis += size {
			for _, smis := range []int{dmis, (dmis + size) % 16} {
				for _, n := range []int{0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 100, 1000} {
					sh := shapeFor(uint64(0x1000+dmis), uint64(0x9000+smis), true, n, size, 2)
					seen := make([]int, n)
					epv := 16 / size
					for v := range sh.nvec {
						for k := range epv {
							seen[sh.head+v*epv+k]++
						}
						if (0x1000+dmis+(sh.head+v*epv)*size)%16 != 0 || (0x9000+smis+(sh.head+v*epv)*size)%16 != 0 {
							t.Fatalf("size %d mis %d/%d n %d: vector %d misaligned", size, dmis, smis, n, v)
						}
					}
					for j := 0; j < n-sh.nvec*epv; j++ {
						e := j
						if j >= sh.head {
							e = j + sh.nvec*epv
						}
						seen[e]++
					}
					for i, c := range seen {
						if c != 1 {
							t.Fatalf("size %d mis %d/%d n %d: element %d covered %d times (head %d nvec %d)", size, dmis, smis, n, i, c, sh.head, sh.nvec)
						}
					}
					if sh.blocks < 1 || sh.blocks > 2*blocksPerSM {
						t.Fatalf("grid of %d blocks", sh.blocks)
					}
				}
			}
		}
	}
	if sh := shapeFor(0x1000, 0x2000, true, 1<<30, 4, 132); sh.blocks != 132*blocksPerSM || sh.nvec != 1<<28 {
		t.Errorf("large shape %+v", sh)
	}
	for n, want := range map[int]int{1: 8, 256: 8, 257: 9, 4096: 12, 4097: 13} {
		if got := sizeClass(n); got != want {
			t.Errorf("sizeClass(%d) = %d, want %d", n, got, want)
		}
	}
}
