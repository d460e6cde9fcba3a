package metal

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

type opKind uint8

const (
	opCopy opKind = iota
	opReduce
	opDivide
	opSend
	opRecv
	opRecord
	opWait
)

var opNames = [...]string{
	opCopy:   "copy",
	opReduce: "reduce",
	opDivide: "divide",
	opSend:   "send",
	opRecv:   "recv",
	opRecord: "record",
	opWait:   "wait",
}

// op is one enqueued stream operation: plain data, described by String.
type op struct {
	kind     opKind
	index    int // position in the stream, from 0
	dst, src hw.Slice
	redop    hw.ReduceOp
	n        int
	peer     *Device
	tag      uint64
	// sig is the point a Record signals, or the point a Wait waits for
	// (nil when the event had never been recorded: no wait).
	sig *signalPoint
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
		return fmt.Sprintf("record event %d (record #%d)", o.sig.ev.id, o.sig.gen)
	case opWait:
		if o.sig == nil {
			return "wait for an event never recorded"
		}
		state := "not yet committed"
		switch {
		case o.sig.done:
			state = "done"
		case o.sig.committed:
			state = "committed"
		}
		return fmt.Sprintf("wait for %s (%s)", o.sig, state)
	}
	return "op?"
}

// Stream is a FIFO of work on one Metal command queue.
//
// Enqueueing checks the arguments and appends the op to a host queue. The
// stream's worker goroutine takes ops in order and encodes them into
// command buffers ("batches"), committing a batch at every Record and
// Send, before it blocks, when it runs out of work, and every maxBatchOps
// ops. A Recv blocks the worker until its message has been sent; a Wait
// blocks it until the awaited Record has been committed, then encodes a
// GPU-side wait on that Record's shared-event value. The completer
// goroutine waits for committed batches in order, records their GPU times
// and errors, and counts their ops finished.
type Stream struct {
	dev *Device
	id  int
	q   gpuQueue
	tl  gpuTimeline // this stream's shared event: one value per Record and Send
	// tlValue is the last value committed on tl.
	tlValue uint64

	ops      []*op // ops[head:] are waiting for the worker
	head     int
	issued   int // ops ever enqueued
	finished int // ops completed or skipped

	open      *batch   // being encoded by the worker
	committed []*batch // committed, not yet taken by the completer
	inflight  int      // committed, not yet completed

	blockedOn  *op // the op the worker waits for on the host, if any
	err        error
	workerDone bool
}

var _ hw.Stream = (*Stream)(nil)

// opened refuses a Stream that Device.NewStream did not make.
func (s *Stream) opened() error {
	if s == nil || s.dev == nil {
		return notOpened("Stream", "Device.NewStream")
	}
	return nil
}

// Device is the stream's device; nil for a Stream not opened.
func (s *Stream) Device() hw.Device {
	if s.opened() != nil {
		return nil // not a typed nil, which would compare != nil
	}
	return s.dev
}

// ID numbers the stream within its world; 0 for a Stream not opened.
func (s *Stream) ID() int {
	if s == nil {
		return 0
	}
	return s.id
}

// enqueue appends o. Callers hold c.mu and have checked the arguments.
func (s *Stream) enqueue(o *op) error {
	o.index = s.issued
	s.issued++
	s.ops = append(s.ops, o)
	s.dev.c.progress()
	return nil
}

// checkArg checks one slice argument; which names it in errors.
func (s *Stream) checkArg(what, which string, sl hw.Slice) error {
	name := func(err error) error {
		if which != "" {
			return fmt.Errorf("metal: %s: %s: %s: %w", s.dev.name, what, which, err)
		}
		return fmt.Errorf("metal: %s: %s: %w", s.dev.name, what, err)
	}
	if err := sl.CheckOn(s.dev); err != nil {
		return name(err)
	}
	b, ok := sl.Buf.(*Buffer)
	switch {
	case !ok:
		return name(fmt.Errorf("%w: buffer is not a metal buffer", hw.ErrBadArgument))
	case b.freed:
		return name(hw.ErrFreed)
	}
	return nil
}

func (s *Stream) checkPair(what string, dst, src hw.Slice) error {
	if err := s.checkArg(what, "dst", dst); err != nil {
		return err
	}
	if err := s.checkArg(what, "src", src); err != nil {
		return err
	}
	if err := hw.CheckPair(s.dev, dst, src); err != nil {
		return fmt.Errorf("metal: %s: %s: %w", s.dev.name, what, err)
	}
	return nil
}

func (s *Stream) checkPeer(what string, peer hw.Device) (*Device, error) {
	p, ok := peer.(*Device)
	if !ok || p == nil || p.c != s.dev.c {
		name := "<nil>"
		if peer != nil {
			name = peer.Name()
		}
		return nil, fmt.Errorf("metal: %s: %s: %w: %s is not a device of this world", s.dev.name, what, hw.ErrUnknownPeer, name)
	}
	return p, nil
}

func (s *Stream) checkEvent(what string, ev hw.Event) (*Event, error) {
	e, ok := ev.(*Event)
	if !ok || e.opened() != nil || e.dev.c != s.dev.c {
		return nil, fmt.Errorf("metal: %s: %s: %w: event is not from this world", s.dev.name, what, hw.ErrBadArgument)
	}
	return e, nil
}

// lock takes the world's lock and checks that the device takes work.
func (s *Stream) lock(what string) error {
	if err := s.opened(); err != nil {
		return err
	}
	s.dev.c.mu.Lock()
	if err := s.dev.usable(what); err != nil {
		s.dev.c.mu.Unlock()
		return err
	}
	return nil
}

func (s *Stream) unlock() { s.dev.c.mu.Unlock() }

// Copy enqueues dst = src (bit for bit; overlapping slices copy as if
// through a temporary).
func (s *Stream) Copy(dst, src hw.Slice) error {
	if err := s.lock("copy"); err != nil {
		return err
	}
	defer s.unlock()
	if err := s.checkPair("copy", dst, src); err != nil {
		return err
	}
	return s.enqueue(&op{kind: opCopy, dst: dst, src: src})
}

// Reduce enqueues dst = op(dst, src) with the arithmetic of hw.ReduceBytes.
func (s *Stream) Reduce(rop hw.ReduceOp, dst, src hw.Slice) error {
	if err := s.lock("reduce"); err != nil {
		return err
	}
	defer s.unlock()
	if rop == hw.Avg || !rop.Valid() {
		return fmt.Errorf("metal: %s: reduce: %w: op %s is not elementwise (use Sum, Prod, Min or Max; Avg is Sum then Divide)", s.dev.name, hw.ErrBadArgument, rop)
	}
	if err := s.checkPair("reduce", dst, src); err != nil {
		return err
	}
	return s.enqueue(&op{kind: opReduce, redop: rop, dst: dst, src: src})
}

// Divide enqueues dst = dst / n with the arithmetic of hw.DivideBytes.
func (s *Stream) Divide(dst hw.Slice, n int) error {
	if err := s.lock("divide"); err != nil {
		return err
	}
	defer s.unlock()
	if n < 1 {
		return fmt.Errorf("metal: %s: divide: %w: divisor %d < 1", s.dev.name, hw.ErrBadArgument, n)
	}
	if err := s.checkArg("divide", "", dst); err != nil {
		return err
	}
	return s.enqueue(&op{kind: opDivide, dst: dst, n: n})
}

// Send enqueues an eager send of src to peer: the worker copies src into a
// staging buffer on the GPU, signals the stream's shared event, and posts
// the message to the peer's mailbox without waiting for a Recv.
func (s *Stream) Send(src hw.Slice, peer hw.Device, tag uint64) error {
	if err := s.lock("send"); err != nil {
		return err
	}
	defer s.unlock()
	p, err := s.checkPeer("send", peer)
	if err != nil {
		return err
	}
	if err := s.checkArg("send", "", src); err != nil {
		return err
	}
	return s.enqueue(&op{kind: opSend, src: src, peer: p, tag: tag})
}

// Recv enqueues a receive into dst of the next message from peer with tag.
// It may be enqueued before the matching Send: the worker waits for it.
func (s *Stream) Recv(dst hw.Slice, peer hw.Device, tag uint64) error {
	if err := s.lock("recv"); err != nil {
		return err
	}
	defer s.unlock()
	p, err := s.checkPeer("recv", peer)
	if err != nil {
		return err
	}
	if err := s.checkArg("recv", "", dst); err != nil {
		return err
	}
	return s.enqueue(&op{kind: opRecv, dst: dst, peer: p, tag: tag})
}

// Record enqueues a record of ev: a signal of the stream's shared event
// that completes when all earlier work of the stream has.
func (s *Stream) Record(ev hw.Event) error {
	if err := s.lock("record"); err != nil {
		return err
	}
	defer s.unlock()
	e, err := s.checkEvent("record", ev)
	if err != nil {
		return err
	}
	e.enqueued++
	sig := &signalPoint{ev: e, gen: e.enqueued, s: s}
	e.last = sig
	return s.enqueue(&op{kind: opRecord, sig: sig})
}

// Wait enqueues a wait for the most recent Record of ev enqueued so far
// (captured now, not when the wait runs). If ev was never recorded, the
// wait does nothing.
func (s *Stream) Wait(ev hw.Event) error {
	if err := s.lock("wait"); err != nil {
		return err
	}
	defer s.unlock()
	e, err := s.checkEvent("wait", ev)
	if err != nil {
		return err
	}
	return s.enqueue(&op{kind: opWait, sig: e.last})
}

// Synchronize blocks until every op enqueued so far has finished on the
// GPU and returns the stream's first failure. After Abort it returns the
// abort error at once; if the world deadlocks it returns a *DeadlockError.
func (s *Stream) Synchronize() error {
	if err := s.opened(); err != nil {
		return err
	}
	c := s.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case c.closed:
			return fmt.Errorf("metal: %s: synchronize: %w", s.dev.name, hw.ErrClosed)
		case s.dev.aborted != nil:
			return fmt.Errorf("metal: %s: synchronize: %w", s.dev.name, s.dev.aborted)
		case s.err != nil && s.inflight == 0:
			return s.err
		case s.err == nil && s.finished == s.issued:
			return nil
		}
		c.syncing++
		c.watchForDeadlock()
		c.cond.Wait()
		c.syncing--
	}
}
