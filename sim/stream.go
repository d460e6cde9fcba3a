package sim

import (
	"errors"
	"fmt"
	"math"

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
	opCompute
)

var opNames = [...]string{
	opCopy:    "copy",
	opReduce:  "reduce",
	opDivide:  "divide",
	opSend:    "send",
	opRecv:    "recv",
	opRecord:  "record",
	opWait:    "wait",
	opCompute: "compute",
}

// op is one queued stream operation: plain data, described by String.
type op struct {
	kind     opKind
	index    int // position in the stream, from 0
	dst, src hw.Slice
	redop    hw.ReduceOp
	n        int
	peer     *Device
	tag      uint64
	ev       *Event
	target   int    // Wait: the Record count that must have completed
	dur      Time   // Compute
	label    string // Compute
	start    Time
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
		return fmt.Sprintf("record event %d", o.ev.id)
	case opWait:
		return fmt.Sprintf("wait for event %d of %s (record #%d; %d done)", o.ev.id, o.ev.dev.name, o.target, o.ev.completed)
	case opCompute:
		return fmt.Sprintf("compute %q for %v", o.label, o.dur)
	}
	return "op?"
}

// Stream is a simulated FIFO of work on one device.
type Stream struct {
	dev         *Device
	id          int
	queue       []*op
	head        int  // first op not yet finished
	busy        bool // the head op is in flight
	kickPending bool
	issued      int   // ops ever enqueued, numbering them
	flow        *flow // the head op's transfer or reduction while busy
	computing   *op   // the head op while a Compute runs
	computes    bool  // ever enqueued a Compute: named so in traces
	err         error
	// feed refills the queue when it drains (hw.Feeder); refilling is set
	// while it runs, when pushes need no kick because advance goes on.
	feed      func() (bool, error)
	refilling bool
}

var (
	_ hw.Stream   = (*Stream)(nil)
	_ hw.Computer = (*Stream)(nil)
	_ hw.Feeder   = (*Stream)(nil)
)

// computeDone is the event generation that ends a Compute (kicks use 0).
const computeDone = 1

// Device is the stream's device.
func (s *Stream) Device() hw.Device { return s.dev }

// ID numbers the stream within its cluster.
func (s *Stream) ID() int { return s.id }

func (s *Stream) enqueue(o op) error {
	c := s.dev.c
	if c.closed {
		return fmt.Errorf("sim: %s: %s: %w", s.dev.name, opNames[o.kind], hw.ErrClosed)
	}
	return s.push(c.newOp(o))
}

// newOp takes an op from the cluster's free list: a long simulation
// enqueues millions and keeps few alive.
func (c *Cluster) newOp(o op) *op {
	if n := len(c.freeOps); n > 0 {
		p := c.freeOps[n-1]
		c.freeOps = c.freeOps[:n-1]
		*p = o
		return p
	}
	if len(c.opSlab) == 0 {
		c.opSlab = make([]op, 256)
	}
	p := &c.opSlab[0]
	c.opSlab = c.opSlab[1:]
	*p = o
	return p
}

func (s *Stream) push(o *op) error {
	c := s.dev.c
	if s.feed != nil && !s.refilling {
		*o = op{}
		c.freeOps = append(c.freeOps, o)
		return fmt.Errorf("sim: %s stream %d: %w: the stream is being fed; enqueue after its feed has ended", s.dev.name, s.id, hw.ErrBadArgument)
	}
	o.index = s.issued
	s.issued++
	s.queue = append(s.queue, o)
	if !s.refilling {
		c.kick(s)
	}
	return nil
}

// Feed implements hw.Feeder: refill runs inside the simulation, at the
// instant the stream drains, so fed work starts exactly when work enqueued
// up front would have.
func (s *Stream) Feed(refill func() (more bool, err error)) error {
	c := s.dev.c
	switch {
	case c.closed:
		return fmt.Errorf("sim: %s: feed: %w", s.dev.name, hw.ErrClosed)
	case refill == nil:
		return fmt.Errorf("sim: %s stream %d: feed: %w: nil refill", s.dev.name, s.id, hw.ErrBadArgument)
	case s.feed != nil:
		return fmt.Errorf("sim: %s stream %d: feed: %w: the stream already has a feed", s.dev.name, s.id, hw.ErrBadArgument)
	}
	s.feed = refill
	c.kick(s)
	return nil
}

// lockToEnqueue takes the cluster lock for an enqueueing call and reports
// whether it did: a refill runs inside Synchronize, which already holds it.
func (s *Stream) lockToEnqueue() bool {
	if s.refilling {
		return false
	}
	s.dev.c.mu.Lock()
	return true
}

// refill asks the feed for more work and reports whether some arrived.
func (s *Stream) refill() bool {
	if s.feed == nil {
		return false
	}
	before := s.issued
	s.refilling = true
	more, err := s.feed()
	s.refilling = false
	if !more {
		s.feed = nil
	}
	switch {
	case err != nil:
		s.failFeed(err)
		return false
	case more && s.issued == before:
		s.failFeed(errors.New("refill enqueued nothing yet promised more"))
		return false
	}
	return s.head < len(s.queue)
}

// failFeed fails the stream for an error of its feed, after the ops the
// feed had already enqueued.
func (s *Stream) failFeed(err error) {
	s.feed = nil
	err = fmt.Errorf("feed: %w", err)
	if s.head < len(s.queue) {
		s.fail(s.queue[s.head], err)
		return
	}
	s.err = fmt.Errorf("sim: rank %d (%s) stream %d, op #%d: %w", s.dev.rank, s.dev.name, s.id, s.issued, err)
}

func (s *Stream) checkSlice(what string, sl hw.Slice) error {
	return s.checkArg(what, "", sl)
}

// checkArg checks one slice argument; what and which name it in errors
// (built only on failure: this runs for every enqueued op).
func (s *Stream) checkArg(what, which string, sl hw.Slice) error {
	if which != "" {
		if err := s.checkArg(what, "", sl); err != nil {
			return fmt.Errorf("%s (%s): %w", which, what, err)
		}
		return nil
	}
	if err := sl.CheckOn(s.dev); err != nil {
		return fmt.Errorf("sim: %s: %s: %w", s.dev.name, what, err)
	}
	if b, ok := sl.Buf.(*Buffer); !ok {
		return fmt.Errorf("sim: %s: %s: %w: buffer is not a sim buffer", s.dev.name, what, hw.ErrBadArgument)
	} else if b.freed {
		return fmt.Errorf("sim: %s: %s: %w", s.dev.name, what, hw.ErrFreed)
	}
	return nil
}

// Copy enqueues dst = src. Local copies take no simulated time.
func (s *Stream) Copy(dst, src hw.Slice) error {
	if s.lockToEnqueue() {
		defer s.dev.c.mu.Unlock()
	}
	if err := s.checkPair("copy", dst, src); err != nil {
		return err
	}
	return s.enqueue(op{kind: opCopy, dst: dst, src: src})
}

func (s *Stream) checkPair(what string, dst, src hw.Slice) error {
	if err := s.checkArg(what, "dst", dst); err != nil {
		return err
	}
	if err := s.checkArg(what, "src", src); err != nil {
		return err
	}
	if err := hw.CheckPair(s.dev, dst, src); err != nil {
		return fmt.Errorf("sim: %s: %s: %w", s.dev.name, what, err)
	}
	return nil
}

// Reduce enqueues dst = op(dst, src), taking bytes/reduce_bw.
func (s *Stream) Reduce(rop hw.ReduceOp, dst, src hw.Slice) error {
	if s.lockToEnqueue() {
		defer s.dev.c.mu.Unlock()
	}
	if rop == hw.Avg || !rop.Valid() {
		return fmt.Errorf("sim: %s: reduce: %w: op %s is not elementwise (use Sum, Prod, Min or Max; Avg is Sum then Divide)", s.dev.name, hw.ErrBadArgument, rop)
	}
	if err := s.checkPair("reduce", dst, src); err != nil {
		return err
	}
	return s.enqueue(op{kind: opReduce, redop: rop, dst: dst, src: src})
}

// Divide enqueues dst = dst / n, costed like a reduce.
func (s *Stream) Divide(dst hw.Slice, n int) error {
	if s.lockToEnqueue() {
		defer s.dev.c.mu.Unlock()
	}
	if n < 1 {
		return fmt.Errorf("sim: %s: divide: %w: divisor %d < 1", s.dev.name, hw.ErrBadArgument, n)
	}
	if err := s.checkSlice("divide", dst); err != nil {
		return err
	}
	return s.enqueue(op{kind: opDivide, dst: dst, n: n})
}

func (s *Stream) checkPeer(what string, peer hw.Device) (*Device, error) {
	p, ok := peer.(*Device)
	if !ok || p == nil || p.c != s.dev.c {
		name := "<nil>"
		if peer != nil {
			name = peer.Name()
		}
		return nil, fmt.Errorf("sim: %s: %s: %w: %s is not a device of this cluster", s.dev.name, what, hw.ErrUnknownPeer, name)
	}
	return p, nil
}

// Send enqueues an eager send of src to peer.
func (s *Stream) Send(src hw.Slice, peer hw.Device, tag uint64) error {
	if s.lockToEnqueue() {
		defer s.dev.c.mu.Unlock()
	}
	p, err := s.checkPeer("send", peer)
	if err != nil {
		return err
	}
	if err := s.checkSlice("send", src); err != nil {
		return err
	}
	return s.enqueue(op{kind: opSend, src: src, peer: p, tag: tag})
}

// Recv enqueues a receive into dst of the next message from peer with tag.
func (s *Stream) Recv(dst hw.Slice, peer hw.Device, tag uint64) error {
	if s.lockToEnqueue() {
		defer s.dev.c.mu.Unlock()
	}
	p, err := s.checkPeer("recv", peer)
	if err != nil {
		return err
	}
	if err := s.checkSlice("recv", dst); err != nil {
		return err
	}
	return s.enqueue(op{kind: opRecv, dst: dst, peer: p, tag: tag})
}

func (s *Stream) checkEvent(what string, ev hw.Event) (*Event, error) {
	e, ok := ev.(*Event)
	if !ok || e == nil || e.dev.c != s.dev.c {
		return nil, fmt.Errorf("sim: %s: %s: %w: event is not from this cluster", s.dev.name, what, hw.ErrBadArgument)
	}
	return e, nil
}

// Record enqueues a record of ev.
func (s *Stream) Record(ev hw.Event) error {
	if s.lockToEnqueue() {
		defer s.dev.c.mu.Unlock()
	}
	e, err := s.checkEvent("record", ev)
	if err != nil {
		return err
	}
	e.enqueued++
	return s.enqueue(op{kind: opRecord, ev: e})
}

// Wait enqueues a wait for the latest Record of ev enqueued so far.
func (s *Stream) Wait(ev hw.Event) error {
	if s.lockToEnqueue() {
		defer s.dev.c.mu.Unlock()
	}
	e, err := s.checkEvent("wait", ev)
	if err != nil {
		return err
	}
	return s.enqueue(op{kind: opWait, ev: e, target: e.enqueued})
}

// Compute occupies the stream for the given simulated seconds.
func (s *Stream) Compute(seconds float64, label string) error {
	if s.lockToEnqueue() {
		defer s.dev.c.mu.Unlock()
	}
	if !(seconds >= 0) || math.IsInf(seconds, 0) {
		return fmt.Errorf("sim: %s: compute %q: %w: duration %v s", s.dev.name, label, hw.ErrBadArgument, seconds)
	}
	s.computes = true
	return s.enqueue(op{kind: opCompute, dur: FromSeconds(seconds), label: label})
}

// Synchronize runs the simulation until the stream's queue is empty, and
// returns its first failure, or a deadlock error if it can never empty.
func (s *Stream) Synchronize() error {
	c := s.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("sim: %s: synchronize: %w", s.dev.name, hw.ErrClosed)
	}
	for s.err == nil && (s.head < len(s.queue) || s.feed != nil) {
		if !c.eng.step() {
			if err := c.deadlock(); err != nil {
				return err
			}
			if s.head == len(s.queue) {
				c.kick(s) // a feed with nothing queued: refill now
			}
		}
	}
	return s.err
}

// kick makes the stream look at its queue again at the current instant.
func (c *Cluster) kick(s *Stream) {
	if s.kickPending || s.busy || s.err != nil {
		return
	}
	s.kickPending = true
	c.eng.schedule(c.eng.now, s, 0)
}

func (s *Stream) fire(now Time, gen uint64) {
	if gen == computeDone {
		o := s.computing
		if o == nil {
			return // the stream failed while computing
		}
		s.computing, s.busy = nil, false
		s.complete(o, now)
		s.advance(now)
		return
	}
	s.kickPending = false
	s.advance(now)
}

// advance starts queued operations until one is in flight or blocked.
func (s *Stream) advance(now Time) {
	for !s.busy && s.err == nil {
		if s.head == len(s.queue) && !s.refill() {
			return
		}
		if until := s.dev.stalledUntil; until > now {
			// The rank is stalled: look again when the stall ends.
			if !s.kickPending {
				s.kickPending = true
				s.dev.c.eng.schedule(until, s, 0)
			}
			return
		}
		o := s.queue[s.head]
		o.start = now
		if !s.begin(o, now) {
			return
		}
		s.complete(o, now)
	}
}

// begin starts o. It returns true if o finished at once; otherwise o is in
// flight (s.busy) or blocked waiting for a message or an event.
func (s *Stream) begin(o *op, now Time) bool {
	c := s.dev.c
	switch o.kind {
	case opCopy:
		if !c.cfg.TimingOnly {
			copy(sliceBytes(o.dst), sliceBytes(o.src))
		}
		return true
	case opReduce, opDivide:
		if math.IsInf(s.dev.reducer.capacity, 1) && c.trace == nil {
			// An unlimited reduction unit takes no time however it is
			// shared, so the fabric has nothing to decide.
			if err := s.apply(o); err != nil {
				s.fail(o, err)
				return false
			}
			return true
		}
		n := float64(o.dst.Bytes())
		s.busy = true
		s.flow = c.fab.start(s.dev.reducerPath, 0, n, s, o)
		return false
	case opSend:
		if o.peer.crashed {
			s.fail(o, fmt.Errorf("%w: peer rank %d (%s) crashed at %v", ErrCrashed, o.peer.rank, o.peer.name, o.peer.crashedAt))
			return false
		}
		r, err := c.routeBetween(s.dev, o.peer)
		if err != nil {
			if c.linkDown != nil {
				err = fmt.Errorf("no route left with %s down: %w", c.downNames(), err)
			}
			s.fail(o, err)
			return false
		}
		s.busy = true
		s.flow = c.fab.start(r.links, r.latency, float64(o.src.Bytes()), s, o)
		return false
	case opRecv:
		mb := c.standIn(o.peer).mailboxTo(s.dev, o.tag)
		m, ok := mb.take()
		if ok && mb.head == len(mb.msgs) && len(mb.waiters) == 0 {
			// Drop drained mailboxes: plans use a fresh tag per step, and a
			// table of live ones stays small and fast.
			s.dev.inbox.remove(c.standIn(o.peer), o.tag)
			s.dev.c.freeBoxes = append(s.dev.c.freeBoxes, mb)
		}
		if !ok {
			mb.waiters = append(mb.waiters, s)
			return false
		}
		if err := m.writeTo(o.dst); err != nil {
			s.fail(o, err)
			return false
		}
		return true
	case opRecord:
		e := o.ev
		e.completed++
		e.at = now
		for _, w := range e.wake() {
			c.kick(w)
		}
		return true
	case opCompute:
		if o.dur == 0 {
			return true
		}
		s.busy, s.computing = true, o
		c.eng.schedule(now+o.dur, s, computeDone)
		return false
	case opWait:
		e := o.ev
		if e.err != nil {
			s.fail(o, e.err)
			return false
		}
		if e.completed >= o.target {
			return true
		}
		e.waiters = append(e.waiters, s)
		return false
	}
	return false
}

// flowDone finishes the stream's in-flight send, reduce or divide.
func (s *Stream) flowDone(now Time, o *op) {
	s.busy, s.flow = false, nil
	if o.kind == opSend {
		s.dev.c.deliver(s.dev, o, now)
	} else if err := s.apply(o); err != nil {
		s.fail(o, err)
		return
	}
	s.complete(o, now)
	s.advance(now)
}

func (e *Event) wake() []*Stream {
	w := e.waiters
	e.waiters = nil
	return w
}

// apply performs the data effect of a reduce or divide.
func (s *Stream) apply(o *op) error {
	if s.dev.c.cfg.TimingOnly {
		return nil
	}
	for _, b := range []hw.Slice{o.dst, o.src} {
		if b.Buf != nil && b.Buf.(*Buffer).freed {
			return hw.ErrFreed
		}
	}
	switch o.kind {
	case opReduce:
		return hw.ReduceBytes(o.redop, o.dst.DType(), sliceBytes(o.dst), sliceBytes(o.src))
	case opDivide:
		return hw.DivideBytes(o.dst.DType(), sliceBytes(o.dst), o.n)
	}
	return nil
}

func (s *Stream) complete(o *op, now Time) {
	s.queue[s.head] = nil
	s.head++
	c := s.dev.c
	if c.trace != nil {
		c.trace.op(s, o, now)
	}
	*o = op{}
	c.freeOps = append(c.freeOps, o)
	if s.head == len(s.queue) {
		// Reuse the queue's storage once it drains.
		s.queue = s.queue[:0]
		s.head = 0
	}
}

// fail stops the stream: the failing op and everything after it are
// skipped, and events it would have recorded fail their waiters.
func (s *Stream) fail(o *op, cause error) {
	c := s.dev.c
	s.busy, s.flow, s.computing, s.feed = false, nil, nil, nil
	s.err = fmt.Errorf("sim: rank %d (%s) stream %d, op #%d %s: %w", s.dev.rank, s.dev.name, s.id, o.index, o, cause)
	for _, rest := range s.queue[s.head:] {
		if rest.kind == opRecord {
			rest.ev.err = s.err
			for _, w := range rest.ev.wake() {
				c.kick(w)
			}
		}
	}
	s.queue = s.queue[:0]
	s.head = 0
}

func sliceBytes(sl hw.Slice) []byte {
	b := sl.Buf.(*Buffer)
	size := b.dt.Size()
	return b.data[sl.Off*size : (sl.Off+sl.Len)*size]
}

// message is a send that has arrived at its destination device.
type message struct {
	dt   hw.DType
	n    int
	data []byte // nil in timing-only mode
}

func (m message) writeTo(dst hw.Slice) error {
	if m.dt != dst.DType() {
		return fmt.Errorf("%w: message is %d x %s, receive buffer %d x %s", hw.ErrDTypeMismatch, m.n, m.dt, dst.Len, dst.DType())
	}
	if m.n != dst.Len {
		return fmt.Errorf("%w: message is %d x %s, receive buffer %d x %s", hw.ErrSizeMismatch, m.n, m.dt, dst.Len, dst.DType())
	}
	if dst.Buf.(*Buffer).freed {
		return hw.ErrFreed
	}
	if m.data != nil {
		copy(sliceBytes(dst), m.data)
	}
	return nil
}

// mailbox holds messages from one device with one tag, in arrival order.
type mailbox struct {
	msgs    []message
	head    int // msgs[head:] are waiting
	waiters []*Stream
}

// take removes the oldest message, reusing the queue's storage once empty.
func (mb *mailbox) take() (message, bool) {
	if mb.head == len(mb.msgs) {
		return message{}, false
	}
	m := mb.msgs[mb.head]
	mb.msgs[mb.head] = message{}
	mb.head++
	if mb.head == len(mb.msgs) {
		mb.msgs, mb.head = mb.msgs[:0], 0
	}
	return m, true
}

func (d *Device) mailboxTo(dst *Device, tag uint64) *mailbox {
	mb := dst.inbox.get(d, tag)
	if mb == nil {
		c := d.c
		if n := len(c.freeBoxes); n > 0 {
			mb = c.freeBoxes[n-1]
			c.freeBoxes = c.freeBoxes[:n-1]
		} else {
			mb = &mailbox{}
		}
		dst.inbox.put(d, tag, mb)
	}
	return mb
}

// deliver snapshots a finished send into the peer's mailbox and wakes the
// streams waiting on it.
func (c *Cluster) deliver(from *Device, o *op, now Time) {
	m := message{dt: o.src.DType(), n: o.src.Len}
	if !c.cfg.TimingOnly {
		m.data = append([]byte(nil), sliceBytes(o.src)...)
	}
	mb := from.mailboxTo(c.standIn(o.peer), o.tag)
	mb.msgs = append(mb.msgs, m)
	// kick only schedules, so nothing waits again while this loops, and the
	// list's storage is kept for the mailbox's next waiter.
	for _, w := range mb.waiters {
		c.kick(w)
	}
	mb.waiters = mb.waiters[:0]
	if c.trace != nil {
		c.trace.transfer(from, o, now)
	}
}

// DeadlockError reports work that can never finish: every stream still
// holding work, and what its first unfinished operation waits for.
type DeadlockError struct {
	At      Time
	Blocked []BlockedStream
}

// BlockedStream is one stream in a DeadlockError.
type BlockedStream = hw.BlockedStream

func (e *DeadlockError) Error() string {
	msg := fmt.Sprintf("sim: deadlock at %v: %d stream(s) can never finish:", e.At, len(e.Blocked))
	for _, b := range e.Blocked {
		msg += fmt.Sprintf("\n  rank %d (%s) stream %d blocked at op #%d: %s (%d more queued)", b.Rank, b.Device, b.Stream, b.Op, b.Waiting, b.Pending)
	}
	return msg
}

func (e *DeadlockError) Unwrap() error { return hw.ErrDeadlock }

// deadlock describes every stream with unfinished work, or returns nil.
func (c *Cluster) deadlock() error {
	var blocked []BlockedStream
	for _, s := range c.streams {
		if s.err != nil || s.head >= len(s.queue) {
			continue
		}
		o := s.queue[s.head]
		waiting := o.String()
		if o.kind == opRecv && o.peer.crashed {
			waiting += fmt.Sprintf(", but rank %d crashed at %v", o.peer.rank, o.peer.crashedAt)
		}
		blocked = append(blocked, BlockedStream{
			Rank: s.dev.rank, Device: s.dev.name, Stream: s.id, Op: o.index,
			Waiting: waiting, Pending: len(s.queue) - s.head - 1,
		})
	}
	if len(blocked) == 0 {
		return nil
	}
	return &DeadlockError{At: c.eng.now, Blocked: blocked}
}

// IsDeadlock reports whether err reports a deadlock.
func IsDeadlock(err error) bool { return errors.Is(err, hw.ErrDeadlock) }
