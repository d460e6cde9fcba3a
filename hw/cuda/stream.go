//go:build linux || darwin

package cuda

import (
	"fmt"
	"sync"

	"github.com/commsim/commsim/hw"
)

// Stream is an hw.Stream: a host-side FIFO of operations, fed by one
// goroutine (its worker, see run) that issues them in order to one CUDA
// stream. Enqueueing checks the arguments and returns at once; the worker
// blocks only where hw's semantics need the host to wait (a Recv whose
// message has not been sent, a Wait whose Record has not been issued).
type Stream struct {
	dev  *Device
	id   int     // number within the world, for errors
	cu   uintptr // the CUDA stream
	wake *sync.Cond

	// Guarded by the hub lock.
	queue    []*op // enqueued, not yet taken by the worker
	enqueued int   // ops ever enqueued; numbers them
	done     int   // ops the worker has finished issuing (or skipped)
	inflight bool  // the worker is inside driver calls for an op
	err      error // the first failure; later ops are skipped
	// watches are the indices of this stream's native collectives whose
	// watchdog is still running (see nativeLaunch.watch); Synchronize
	// waits for them, so a collective that fails late still fails it.
	watches []int

	// Owned by the worker.
	args     *launchArgs
	releases []release
}

var _ hw.Stream = (*Stream)(nil)

// Device is the stream's device; nil for a Stream not opened.
func (s *Stream) Device() hw.Device {
	if s.opened() != nil {
		return nil // not a typed nil, which would compare != nil
	}
	return s.dev
}

// opened refuses a Stream that Device.NewStream did not make.
func (s *Stream) opened() error {
	if s == nil || s.dev == nil {
		return notOpened("Stream", "Device.NewStream")
	}
	return nil
}

type opKind uint8

const (
	opCopy opKind = iota
	opReduce
	opDivide
	opSend
	opRecv
	opRecord
	opWait
	opHost
	opNative // a part of an NCCL group launch (native.go)
)

// op is one queued operation: plain data, printed by String in errors.
type op struct {
	kind     opKind
	index    int // position in the stream, from 0
	dst, src hw.Slice
	redop    hw.ReduceOp
	n        int     // Divide
	peer     *Device // Send, Recv
	tag      uint64
	ev       *Event // Record, Wait
	gen      *gen   // Record: the generation it makes; Wait: the one it waits for (nil: none)
	host     func(stream uintptr) error
	label    string // opHost, opNative
	native   *nativeLaunch
}

func (o *op) String() string {
	switch o.kind {
	case opCopy:
		return hw.DescribeCopy(o.dst)
	case opReduce:
		return hw.DescribeReduce(o.redop, o.dst)
	case opDivide:
		return hw.DescribeDivide(o.dst, o.n)
	case opSend:
		return hw.DescribeSend(o.src, o.peer.rank, o.peer, o.tag)
	case opRecv:
		return hw.DescribeRecv(o.dst, o.peer.rank, o.peer, o.tag)
	case opRecord:
		return fmt.Sprintf("record %v (#%d)", o.ev, o.gen.n)
	case opWait:
		if o.gen == nil {
			return fmt.Sprintf("wait for %v (never recorded: no wait)", o.ev)
		}
		return fmt.Sprintf("wait for %v (record #%d)", o.ev, o.gen.n)
	case opHost, opNative:
		return o.label
	}
	return "op?"
}

// enqueue appends o; the caller holds the hub lock and has checked o.
func (s *Stream) enqueue(what string, o *op) error {
	if err := s.dev.closedErr(what); err != nil {
		return err
	}
	o.index = s.enqueued
	s.enqueued++
	s.queue = append(s.queue, o)
	s.wake.Signal()
	return nil
}

func (s *Stream) lock() func() {
	s.dev.h.mu.Lock()
	return s.dev.h.mu.Unlock
}

// Copy enqueues dst = src (a device-to-device copy).
func (s *Stream) Copy(dst, src hw.Slice) error {
	if err := s.opened(); err != nil {
		return err
	}
	defer s.lock()()
	if err := checkPair(s.dev, "copy", dst, src); err != nil {
		return err
	}
	return s.enqueue("copy", &op{kind: opCopy, dst: dst, src: src})
}

// Reduce enqueues dst = op(dst, src) with the reduce kernel of the dtype.
func (s *Stream) Reduce(rop hw.ReduceOp, dst, src hw.Slice) error {
	if err := s.opened(); err != nil {
		return err
	}
	defer s.lock()()
	if err := checkReduceOp(s.dev.name, rop); err != nil {
		return err
	}
	if err := checkPair(s.dev, "reduce", dst, src); err != nil {
		return err
	}
	return s.enqueue("reduce", &op{kind: opReduce, redop: rop, dst: dst, src: src})
}

// Divide enqueues dst = dst / n with the divide kernel of the dtype.
func (s *Stream) Divide(dst hw.Slice, n int) error {
	if err := s.opened(); err != nil {
		return err
	}
	defer s.lock()()
	if n < 1 {
		return fmt.Errorf("cuda: %s: divide: %w: divisor %d < 1", s.dev.name, hw.ErrBadArgument, n)
	}
	if err := checkSlice(s.dev, "divide", "", dst); err != nil {
		return err
	}
	return s.enqueue("divide", &op{kind: opDivide, dst: dst, n: n})
}

// Send enqueues an eager send of src to peer: the bytes are copied to a
// staging block and posted to peer's mailbox, whether or not peer has
// enqueued its Recv.
func (s *Stream) Send(src hw.Slice, peer hw.Device, tag uint64) error {
	if err := s.opened(); err != nil {
		return err
	}
	defer s.lock()()
	p, err := checkPeer(s.dev, "send", peer)
	if err != nil {
		return err
	}
	if err := checkSlice(s.dev, "send", "", src); err != nil {
		return err
	}
	return s.enqueue("send", &op{kind: opSend, src: src, peer: p, tag: tag})
}

// Recv enqueues a receive into dst of the next message from peer with tag.
func (s *Stream) Recv(dst hw.Slice, peer hw.Device, tag uint64) error {
	if err := s.opened(); err != nil {
		return err
	}
	defer s.lock()()
	p, err := checkPeer(s.dev, "recv", peer)
	if err != nil {
		return err
	}
	if err := checkSlice(s.dev, "recv", "", dst); err != nil {
		return err
	}
	return s.enqueue("recv", &op{kind: opRecv, dst: dst, peer: p, tag: tag})
}

// Record enqueues a Record of ev: a new generation of it (see Event).
func (s *Stream) Record(ev hw.Event) error {
	if err := s.opened(); err != nil {
		return err
	}
	defer s.lock()()
	e, err := checkEvent(s.dev, "record", ev)
	if err != nil {
		return err
	}
	if err := s.dev.closedErr("record"); err != nil {
		return err
	}
	return s.enqueue("record", &op{kind: opRecord, ev: e, gen: e.newGen()})
}

// Wait enqueues a wait for the latest Record of ev enqueued so far; if ev
// was never recorded, it does not wait.
func (s *Stream) Wait(ev hw.Event) error {
	if err := s.opened(); err != nil {
		return err
	}
	defer s.lock()()
	e, err := checkEvent(s.dev, "wait", ev)
	if err != nil {
		return err
	}
	o := &op{kind: opWait, ev: e, gen: e.last}
	if err := s.enqueue("wait", o); err != nil {
		return err
	}
	if o.gen != nil {
		o.gen.refs++
	}
	return nil
}

// enqueueHost enqueues fn to run on the stream's worker, in order with the
// stream's other work, with the GPU's context current; stream is the CUDA
// stream to issue on. It is how native collectives (NCCL) join a stream. fn
// must only issue asynchronous work; an error fails the stream like any
// other op, and label names the op in errors.
func (s *Stream) enqueueHost(label string, fn func(stream uintptr) error) error {
	defer s.lock()()
	if fn == nil {
		return fmt.Errorf("cuda: %s: %s: %w: nil function", s.dev.name, label, hw.ErrBadArgument)
	}
	return s.enqueue(label, &op{kind: opHost, host: fn, label: label})
}

// Synchronize waits until every operation enqueued so far has been issued
// and has finished on the GPU, and returns the stream's first failure.
//
// It never waits forever on a plan mistake: if the stream is blocked on a
// message or an event that no stream of the world can ever provide (every
// stream with work left is blocked the same way), it returns a
// *DeadlockError, which wraps hw.ErrDeadlock, naming every blocked stream
// and what it waits for. As in the simulator, the check looks at the world
// as it is when nothing can move: enqueue every rank's part of a plan
// before synchronizing any of them, as ops.Executor does.
//
// After a native collective (NCCL) it also waits for the collective's
// watchdog, so a collective that fails or times out on the GPU fails the
// stream rather than leaving garbage behind a success.
func (s *Stream) Synchronize() error {
	if err := s.opened(); err != nil {
		return err
	}
	h := s.dev.h
	h.mu.Lock()
	target := s.enqueued
	for {
		if err := s.dev.closedErr("synchronize"); err != nil {
			h.mu.Unlock()
			return err
		}
		if s.dev.abortErr != nil {
			h.mu.Unlock()
			return s.dev.abortErr
		}
		if s.done >= target {
			if !s.watching(target) {
				break
			}
			// A native collective's watchdog is still running: it ends
			// when the collective does, or fails the stream at its timeout.
		} else if dl := h.deadlock(); dl != nil {
			h.mu.Unlock()
			return dl
		}
		h.idle.Wait()
	}
	err := s.err
	h.mu.Unlock()
	if err != nil {
		return err
	}
	err = withContext(h.d, s.dev.g.ctx, func() error {
		return h.d.check("cuStreamSynchronize", h.d.cuStreamSynchronize(s.cu))
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil && s.err == nil {
		s.err = fmt.Errorf("cuda: rank %d (%s) stream %d: synchronize: %w", s.dev.rank, s.dev.name, s.id, err)
	}
	if s.dev.abortErr != nil {
		return s.dev.abortErr
	}
	return s.err
}

// Argument checks. They are pure: they read the arguments and the device's
// identity, never the driver, so they are tested without a GPU.

// checkSlice checks that sl is a live buffer of this backend on dev and
// lies inside it; what names the operation and which the argument.
func checkSlice(dev *Device, what, which string, sl hw.Slice) error {
	err := sl.CheckOn(dev)
	if err == nil {
		if b, ok := sl.Buf.(*Buffer); !ok {
			err = fmt.Errorf("%w: buffer is not a cuda buffer", hw.ErrBadArgument)
		} else if b.freed {
			err = hw.ErrFreed
		}
	}
	if err == nil {
		return nil
	}
	if which != "" {
		return fmt.Errorf("cuda: %s: %s: %s: %w", dev.name, what, which, err)
	}
	return fmt.Errorf("cuda: %s: %s: %w", dev.name, what, err)
}

// checkPair checks Copy's and Reduce's dst and src.
func checkPair(dev *Device, what string, dst, src hw.Slice) error {
	if err := checkSlice(dev, what, "dst", dst); err != nil {
		return err
	}
	if err := checkSlice(dev, what, "src", src); err != nil {
		return err
	}
	if err := hw.CheckPair(dev, dst, src); err != nil {
		return fmt.Errorf("cuda: %s: %s: %w", dev.name, what, err)
	}
	return nil
}

// checkReduceOp accepts the elementwise ops: Sum, Prod, Min and Max.
func checkReduceOp(dev string, rop hw.ReduceOp) error {
	if rop == hw.Avg || !rop.Valid() {
		return fmt.Errorf("cuda: %s: reduce: %w: op %s is not elementwise (use Sum, Prod, Min or Max; Avg is Sum then Divide)", dev, hw.ErrBadArgument, rop)
	}
	return nil
}

// checkPeer accepts a device of the same world.
func checkPeer(dev *Device, what string, peer hw.Device) (*Device, error) {
	p, ok := peer.(*Device)
	if !ok || p == nil || p.h != dev.h {
		name := "<nil>"
		if peer != nil {
			name = peer.Name()
		}
		return nil, fmt.Errorf("cuda: %s: %s: %w: %s is not a device of this world", dev.name, what, hw.ErrUnknownPeer, name)
	}
	return p, nil
}

// checkEvent accepts an event of the same world.
func checkEvent(dev *Device, what string, ev hw.Event) (*Event, error) {
	e, ok := ev.(*Event)
	if !ok || e.opened() != nil || e.dev.h != dev.h {
		return nil, fmt.Errorf("cuda: %s: %s: %w: event is not from this world", dev.name, what, hw.ErrBadArgument)
	}
	return e, nil
}

// checkMessage checks that a message of n elements of dt from rank from
// fits the receive buffer dst.
func checkMessage(from *Device, dt hw.DType, n int, dst hw.Slice) error {
	if dt != dst.DType() {
		return fmt.Errorf("%w: message from rank %d (%s) is %d x %s, receive buffer %d x %s",
			hw.ErrDTypeMismatch, from.rank, from.name, n, dt, dst.Len, dst.DType())
	}
	if n != dst.Len {
		return fmt.Errorf("%w: message from rank %d (%s) is %d x %s, receive buffer %d x %s",
			hw.ErrSizeMismatch, from.rank, from.name, n, dt, dst.Len, dst.DType())
	}
	return nil
}
