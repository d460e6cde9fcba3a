//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/commsim/commsim/hw"
)

// hub is the state one world's devices share: the lock every stream,
// mailbox and event is guarded by, the mailboxes, and the per-GPU pools.
// One lock keeps the deadlock check exact: it sees every stream, message
// and event generation at one instant.
type hub struct {
	d       *driver
	mu      sync.Mutex
	idle    *sync.Cond // Synchronize and Free wait here; broadcast on progress
	devs    []*Device
	streams []*Stream
	pools   map[*gpu]*pool
	boxes   map[mailKey]*mailbox
	events  int // events created, to number them
	closed  bool
	workers sync.WaitGroup
	// watches counts the watchdogs of native collectives (native.go);
	// close waits for them before it tears the streams down.
	watches sync.WaitGroup
	// comms are the native communicators over the world's devices that
	// are not closed yet; close destroys them.
	comms []*NativeComm
	// nccl loads NCCL for NewNativeComm: loadNCCL, or a test's stand-in.
	nccl func() (*ncclLib, error)
}

func newHub(d *driver) *hub {
	h := &hub{d: d, pools: map[*gpu]*pool{}, boxes: map[mailKey]*mailbox{}}
	h.idle = sync.NewCond(&h.mu)
	return h
}

// Device is one rank: a whole GPU or one of several virtual ranks sharing
// a GPU, each with its own allocations and streams.
type Device struct {
	h     *hub
	g     *gpu
	rank  int
	name  string
	strms []*Stream
	bufs  map[*Buffer]struct{}
	// abortErr is set by Abort; Synchronize on the device's streams returns
	// it from then on.
	abortErr error
	// comms are the open native communicators that include the device;
	// Abort aborts them too.
	comms []*NativeComm
}

var (
	_ hw.Device  = (*Device)(nil)
	_ hw.Aborter = (*Device)(nil)
)

// Kind is "cuda".
func (d *Device) Kind() string { return "cuda" }

// Name is "cuda:gpuG" for a rank that has GPU G to itself and
// "cuda:gpuG/rR" for virtual rank R on GPU G; "" for a Device not opened.
func (d *Device) Name() string {
	if d == nil {
		return ""
	}
	return d.name
}

// Rank is the device's rank in the world NewWorld made; 0 for a Device
// not opened.
func (d *Device) Rank() int {
	if d == nil {
		return 0
	}
	return d.rank
}

// GPU is the ordinal of the device's GPU; -1 for a Device not opened,
// since 0 is a GPU.
func (d *Device) GPU() int {
	if d.opened() != nil {
		return -1
	}
	return d.g.ordinal
}

// opened refuses a Device that NewWorld did not make.
func (d *Device) opened() error {
	if d == nil || d.h == nil {
		return notOpened("Device", "cuda.NewWorld")
	}
	return nil
}

func (d *Device) closedErr(what string) error {
	if d.h.closed {
		return fmt.Errorf("cuda: %s: %s: %w", d.name, what, hw.ErrClosed)
	}
	return nil
}

// Alloc returns a zeroed buffer of n elements of dt in the device's GPU
// memory. A buffer of 0 elements holds no memory.
func (d *Device) Alloc(dt hw.DType, n int) (hw.Buffer, error) {
	if err := d.opened(); err != nil {
		return nil, err
	}
	if err := checkAlloc(d.name, dt, n); err != nil {
		return nil, err
	}
	h := d.h
	h.mu.Lock()
	err := d.closedErr("alloc")
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	b := &Buffer{dev: d, dt: dt, n: n}
	if size := n * dt.Size(); size > 0 {
		err := withContext(h.d, d.g.ctx, func() error {
			if err := h.d.check("cuMemAlloc_v2", callPinned(&b.ptr, func(p *uint64) cuResult { return h.d.cuMemAlloc(p, uintptr(size)) })); err != nil {
				return err
			}
			// hw promises zeroed buffers; cuMemAlloc does not.
			if err := h.d.check("cuMemsetD8Async", h.d.cuMemsetD8Async(b.ptr, 0, uintptr(size), d.g.hostStream)); err != nil {
				h.d.cuMemFree(b.ptr)
				return err
			}
			return h.d.check("cuStreamSynchronize(host copies)", h.d.cuStreamSynchronize(d.g.hostStream))
		})
		if err != nil {
			return nil, fmt.Errorf("cuda: %s: alloc %d x %s (%d bytes): %w", d.name, n, dt, size, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := d.closedErr("alloc"); err != nil {
		// Closed while allocating: the world's teardown did not see it.
		if b.ptr != 0 {
			withContext(h.d, d.g.ctx, func() error { return h.d.check("cuMemFree_v2", h.d.cuMemFree(b.ptr)) })
		}
		return nil, err
	}
	d.bufs[b] = struct{}{}
	return b, nil
}

// checkAlloc checks Alloc's arguments.
func checkAlloc(name string, dt hw.DType, n int) error {
	if !dt.Valid() {
		return fmt.Errorf("cuda: %s: alloc: %w: invalid dtype %d", name, hw.ErrBadArgument, dt)
	}
	if n < 0 {
		return fmt.Errorf("cuda: %s: alloc: %w: negative length %d", name, hw.ErrBadArgument, n)
	}
	if n > math.MaxInt64/dt.Size() {
		return fmt.Errorf("cuda: %s: alloc: %w: %d x %s is over the limit of %d bytes", name, hw.ErrBadArgument, n, dt, int64(math.MaxInt64))
	}
	return nil
}

// NewStream returns a new stream: a CUDA stream (non-blocking with respect
// to the null stream) and the goroutine that feeds it.
func (d *Device) NewStream() (hw.Stream, error) {
	if err := d.opened(); err != nil {
		return nil, err
	}
	h := d.h
	h.mu.Lock()
	err := d.closedErr("new stream")
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s := &Stream{dev: d}
	s.wake = sync.NewCond(&h.mu)
	err = withContext(h.d, d.g.ctx, func() error {
		return h.d.check("cuStreamCreate", callPinned(&s.cu, func(p *uintptr) cuResult { return h.d.cuStreamCreate(p, streamNonBlocking) }))
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: new stream: %w", d.name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := d.closedErr("new stream"); err != nil {
		withContext(h.d, d.g.ctx, func() error { return h.d.check("cuStreamDestroy_v2", h.d.cuStreamDestroy(s.cu)) })
		return nil, err
	}
	s.id = len(h.streams)
	h.streams = append(h.streams, s)
	d.strms = append(d.strms, s)
	h.workers.Add(1)
	go s.run()
	return s, nil
}

// NewEvent returns an event that streams of any device of the world can
// record and wait on. It holds no CUDA event itself: each Record takes one
// from a pool (see Event).
func (d *Device) NewEvent() (hw.Event, error) {
	if err := d.opened(); err != nil {
		return nil, err
	}
	h := d.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := d.closedErr("new event"); err != nil {
		return nil, err
	}
	h.events++
	return &Event{dev: d, id: h.events}, nil
}

// Abort fails every stream of the device with reason: queued work is
// skipped (events it would have recorded fail their waiters), workers
// blocked on a message or an event give up, and pending and later
// Synchronize calls return an error wrapping reason. Work already handed to
// the GPU runs to its end, which is never long: every CUDA-level wait the
// backend issues is on work issued before it. The one exception is a
// native collective (NCCL), whose kernels wait for their peers: Abort
// therefore also aborts every open native communicator that includes the
// device (ncclCommAbort), which ends those kernels on every rank.
func (d *Device) Abort(reason error) error {
	if err := d.opened(); err != nil {
		return err
	}
	if reason == nil {
		reason = errors.New("aborted")
	}
	h := d.h
	h.mu.Lock()
	if err := d.closedErr("abort"); err != nil {
		h.mu.Unlock()
		return err
	}
	if d.abortErr == nil {
		d.abortErr = fmt.Errorf("cuda: %s: aborted: %w", d.name, reason)
	}
	for _, s := range d.strms {
		if s.err == nil {
			s.err = d.abortErr
		}
		s.wake.Signal()
	}
	comms := slices.Clone(d.comms)
	h.idle.Broadcast()
	h.mu.Unlock()
	// Outside the hub lock: an abort waits for a group launch in progress
	// to return, and that launch takes the lock when it ends.
	var errs []error
	for _, c := range comms {
		errs = append(errs, c.Abort(reason))
	}
	return errors.Join(errs...)
}

// Buffer is device memory on one GPU.
type Buffer struct {
	dev   *Device
	dt    hw.DType
	n     int
	ptr   uint64 // 0 for an empty buffer
	freed bool
}

var _ hw.Buffer = (*Buffer)(nil)

// opened refuses a Buffer that Device.Alloc did not make.
func (b *Buffer) opened() error {
	if b == nil || b.dev == nil {
		return notOpened("Buffer", "Device.Alloc")
	}
	return nil
}

// Device is the buffer's device; nil for a Buffer not opened.
func (b *Buffer) Device() hw.Device {
	if b.opened() != nil {
		return nil // not a typed nil, which would compare != nil
	}
	return b.dev
}

// DType is 0 for a Buffer not opened.
func (b *Buffer) DType() hw.DType {
	if b == nil {
		return 0
	}
	return b.dt
}

// Len is 0 for a Buffer not opened.
func (b *Buffer) Len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// Phantom is false: CUDA buffers always hold data.
func (b *Buffer) Phantom() bool { return false }

// Freed reports whether the buffer was freed (hw.FreedReporter).
func (b *Buffer) Freed() bool {
	if b.opened() != nil {
		return false
	}
	h := b.dev.h
	h.mu.Lock()
	defer h.mu.Unlock()
	return b.freed
}

// addr is the device address of element off.
func (b *Buffer) addr(off int) uint64 { return b.ptr + uint64(off*b.dt.Size()) }

// Write copies host bytes into the buffer. Like Read it is synchronous and
// not ordered against the device's streams: it returns once the bytes are
// in device memory, and work still queued on a stream may overwrite them
// later (synchronize first).
func (b *Buffer) Write(src []byte) error {
	return b.hostCopy("write", src, true)
}

// Read copies the buffer to host bytes. It sees the work that completed
// before the call, never work still queued: Synchronize the streams that
// write the buffer first.
func (b *Buffer) Read(dst []byte) error {
	return b.hostCopy("read", dst, false)
}

func (b *Buffer) hostCopy(what string, host []byte, toDevice bool) error {
	if err := b.opened(); err != nil {
		return err
	}
	d := b.dev
	h := d.h
	h.mu.Lock()
	err := d.closedErr(what)
	if err == nil {
		err = checkHostCopy(d.name, what, b.freed, len(host), b.n, b.dt)
	}
	h.mu.Unlock()
	if err != nil || len(host) == 0 {
		return err
	}
	var pin runtime.Pinner
	pin.Pin(&host[0])
	defer pin.Unpin()
	p := unsafe.Pointer(&host[0])
	err = withContext(h.d, d.g.ctx, func() error {
		if toDevice {
			if err := h.d.check("cuMemcpyHtoDAsync_v2", h.d.cuMemcpyHtoDAsync(b.ptr, p, uintptr(len(host)), d.g.hostStream)); err != nil {
				return err
			}
		} else if err := h.d.check("cuMemcpyDtoHAsync_v2", h.d.cuMemcpyDtoHAsync(p, b.ptr, uintptr(len(host)), d.g.hostStream)); err != nil {
			return err
		}
		return h.d.check("cuStreamSynchronize(host copies)", h.d.cuStreamSynchronize(d.g.hostStream))
	})
	if err != nil {
		return fmt.Errorf("cuda: %s: %s %d bytes: %w", d.name, what, len(host), err)
	}
	return nil
}

// checkHostCopy checks a Read or Write of n host bytes.
func checkHostCopy(dev, what string, freed bool, n, elems int, dt hw.DType) error {
	if freed {
		return fmt.Errorf("cuda: %s: %s: %w", dev, what, hw.ErrFreed)
	}
	if want := elems * dt.Size(); n != want {
		return fmt.Errorf("cuda: %s: %s: %w: buffer holds %d bytes (%d x %s), host slice %d",
			dev, what, hw.ErrSizeMismatch, want, elems, dt, n)
	}
	return nil
}

// Free releases the buffer's memory. It first waits for work already
// handed to the GPU by the device's streams (which may still use the
// memory); queued work that reaches the buffer afterwards fails with
// hw.ErrFreed.
func (b *Buffer) Free() error {
	if err := b.opened(); err != nil {
		return err
	}
	d := b.dev
	h := d.h
	h.mu.Lock()
	if b.freed {
		h.mu.Unlock()
		return fmt.Errorf("cuda: %s: free: %w", d.name, hw.ErrFreed)
	}
	if h.closed {
		// The world's teardown freed it already.
		b.freed = true
		h.mu.Unlock()
		return nil
	}
	b.freed = true
	delete(d.bufs, b)
	// A worker between its freed check and its driver call must finish
	// that call before the memory goes.
	for d.inflight() {
		h.idle.Wait()
	}
	strms := append([]*Stream(nil), d.strms...)
	h.mu.Unlock()
	if b.ptr == 0 {
		return nil
	}
	err := withContext(h.d, d.g.ctx, func() error {
		for _, s := range strms {
			if err := h.d.check("cuStreamSynchronize", h.d.cuStreamSynchronize(s.cu)); err != nil {
				return err
			}
		}
		return h.d.check("cuMemFree_v2", h.d.cuMemFree(b.ptr))
	})
	if err != nil {
		return fmt.Errorf("cuda: %s: free %d x %s: %w", d.name, b.n, b.dt, err)
	}
	return nil
}

// inflight reports whether a worker of the device is inside a driver call.
func (d *Device) inflight() bool {
	for _, s := range d.strms {
		if s.inflight {
			return true
		}
	}
	return false
}
