package sim

import (
	"errors"
	"fmt"
	"math"

	"github.com/commsim/commsim/hw"
)

// Stream is a simulated FIFO of work on one device.
type Stream struct {
	dev *Device
	id  int
	// onDevice numbers the stream among its device's, from 0: its trace
	// track, which must not depend on how goroutines, one a rank, took
	// turns making streams on different devices (id does).
	onDevice    int
	queue       []*op
	head        int // first op of queue not yet finished
	fed         []*op
	fedHead     int  // fed[fedHead:] came from the feed at queue[head] and run before it
	busy        bool // the front op is in flight
	kickPending bool
	started     int   // ops ever started, numbering them
	flow        *flow // the front op's transfer or reduction while busy
	computing   *op   // the front op while a Compute runs
	computes    bool  // ever enqueued a Compute: named so in traces
	err         error
	// channel is what the stream's messages with a Wire Rate share
	// besides their route, and path a send's route with it.
	channel link
	path    []*link
	// landing counts its switch operations that went on without waiting
	// to land and have not yet (see switchDrained).
	landing int
	// conns are the stream's buffers on each device it sends to under a
	// Wire with Slots, and sending the room its send in flight holds
	// (see buffer.go).
	conns   map[*Device]*connection
	sending held
}

var _ hw.Stream = (*Stream)(nil)

// computeDone is the event generation that ends a Compute (kicks use 0).
const computeDone = 1

// made refuses a Stream that Device.NewStream did not make.
func (s *Stream) made() error {
	if s == nil || s.dev == nil {
		return notMade("Stream", "Device.NewStream")
	}
	return nil
}

// Device is the stream's device; nil for a Stream not made.
func (s *Stream) Device() hw.Device {
	if s.made() != nil {
		return nil // not a typed nil, which would compare != nil
	}
	return s.dev
}

// ID numbers the stream within its cluster; 0 for a Stream not made.
func (s *Stream) ID() int {
	if s == nil {
		return 0
	}
	return s.id
}

// enqueue checks o as the Stream method of its kind does, and queues it.
// The caller holds the cluster's lock.
func (s *Stream) enqueue(o Op) error {
	c := s.dev.c
	if c.closed {
		return fmt.Errorf("sim: %s: %s: %w", s.dev.name, o.Kind, hw.ErrClosed)
	}
	q := c.allocOp()
	if err := s.prepare(q, &o); err != nil {
		c.freeOp(q)
		return err
	}
	s.queue = append(s.queue, q)
	c.kick(s)
	return nil
}

// prepare checks o and makes q the op to queue. A Record counts as enqueued
// here, so a Wait prepared after it waits for it.
func (s *Stream) prepare(q *op, o *Op) error {
	switch o.Kind {
	case OpCopy:
		if err := s.checkPair("copy", o.Dst, o.Src); err != nil {
			return err
		}
		*q = op{index: -1, kind: opCopy, dst: o.Dst, src: o.Src}
		return nil
	case OpReduce:
		if o.Redop == hw.Avg || !o.Redop.Valid() {
			return fmt.Errorf("sim: %s: reduce: %w: op %s is not elementwise (use Sum, Prod, Min or Max; Avg is Sum then Divide)", s.dev.name, hw.ErrBadArgument, o.Redop)
		}
		if err := s.checkPair("reduce", o.Dst, o.Src); err != nil {
			return err
		}
		*q = op{index: -1, kind: opReduce, redop: o.Redop, dst: o.Dst, src: o.Src, fused: o.Fused}
		return nil
	case OpDivide:
		if o.Divisor < 1 {
			return fmt.Errorf("sim: %s: divide: %w: divisor %d < 1", s.dev.name, hw.ErrBadArgument, o.Divisor)
		}
		if err := s.checkSlice("divide", o.Dst); err != nil {
			return err
		}
		*q = op{index: -1, kind: opDivide, dst: o.Dst, n: o.Divisor, fused: o.Fused}
		return nil
	case OpSend, OpRecv:
		what, sl := "send", o.Src
		if o.Kind == OpRecv {
			what, sl = "recv", o.Dst
		}
		if o.Peer == nil || o.Peer.c != s.dev.c {
			name := "<nil>"
			if o.Peer != nil {
				name = o.Peer.name
			}
			return fmt.Errorf("sim: %s: %s: %w: %s is not a device of this cluster", s.dev.name, what, hw.ErrUnknownPeer, name)
		}
		if err := s.checkSlice(what, sl); err != nil {
			return err
		}
		if o.Wire != nil {
			if err := o.Wire.check(); err != nil {
				return fmt.Errorf("sim: %s: %s: %w: %v", s.dev.name, what, hw.ErrBadArgument, err)
			}
		}
		*q = op{index: -1, kind: o.Kind, src: o.Src, dst: o.Dst, peer: o.Peer, tag: o.Tag, wire: o.Wire}
		return nil
	case OpSwitchReduce, OpMulticast:
		return s.prepareSwitch(q, o)
	case OpSwitchAllReduce, OpSwitchAllGather, OpSwitchReduceScatter:
		return s.prepareMeeting(q, o)
	case OpDelay:
		if o.Duration < 0 {
			return fmt.Errorf("sim: %s: delay: %w: duration %v < 0", s.dev.name, hw.ErrBadArgument, o.Duration)
		}
		*q = op{index: -1, kind: OpDelay, dur: o.Duration}
		return nil
	case OpRecord, OpWait:
		what := "record"
		if o.Kind == OpWait {
			what = "wait"
		}
		e := o.Event
		if e == nil {
			return fmt.Errorf("sim: %s: %s: %w: nil event (or not the simulator's)", s.dev.name, what, hw.ErrBadArgument)
		}
		if e.made() != nil || e.dev.c != s.dev.c {
			return fmt.Errorf("sim: %s: %s: %w: event is not from this cluster", s.dev.name, what, hw.ErrBadArgument)
		}
		if o.Kind == OpRecord {
			e.enqueued++
			*q = op{index: -1, kind: opRecord, ev: e}
			return nil
		}
		if o.Count < 0 {
			return fmt.Errorf("sim: %s: wait: %w: record count %d < 0", s.dev.name, hw.ErrBadArgument, o.Count)
		}
		target := o.Count
		if target == 0 {
			target = e.enqueued
		}
		*q = op{index: -1, kind: opWait, ev: e, target: target}
		return nil
	}
	return fmt.Errorf("sim: %s: %w: unknown op kind %d", s.dev.name, hw.ErrBadArgument, o.Kind)
}

// newOp takes an op from the cluster's free list and makes it o.
func (c *Cluster) newOp(o op) *op {
	p := c.allocOp()
	*p = o
	p.index = -1
	return p
}

// allocOp takes a zeroed op from the cluster's free list: a long
// simulation enqueues millions and keeps few alive.
func (c *Cluster) allocOp() *op {
	if n := len(c.freeOps); n > 0 {
		p := c.freeOps[n-1]
		c.freeOps = c.freeOps[:n-1]
		return p
	}
	if len(c.opSlab) == 0 {
		c.opSlab = make([]op, 256)
	}
	p := &c.opSlab[0]
	c.opSlab = c.opSlab[1:]
	return p
}

func (c *Cluster) freeOp(o *op) {
	*o = op{}
	c.freeOps = append(c.freeOps, o)
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

// locked runs f with the cluster's lock held; it is where the Stream
// methods refuse a Stream not made.
func (s *Stream) locked(f func() error) error {
	if err := s.made(); err != nil {
		return err
	}
	c := s.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return f()
}

// Copy enqueues dst = src. Local copies take no simulated time.
func (s *Stream) Copy(dst, src hw.Slice) error {
	return s.locked(func() error { return s.enqueue(Op{Kind: OpCopy, Dst: dst, Src: src}) })
}

// Reduce enqueues dst = op(dst, src), taking bytes/reduce_bw.
func (s *Stream) Reduce(rop hw.ReduceOp, dst, src hw.Slice) error {
	return s.locked(func() error { return s.enqueue(Op{Kind: OpReduce, Redop: rop, Dst: dst, Src: src}) })
}

// Divide enqueues dst = dst / n, costed like a reduce.
func (s *Stream) Divide(dst hw.Slice, n int) error {
	return s.locked(func() error { return s.enqueue(Op{Kind: OpDivide, Dst: dst, Divisor: n}) })
}

// device is peer as a device of this cluster, or nil.
func (s *Stream) device(peer hw.Device) *Device {
	p, _ := peer.(*Device)
	return p
}

// Send enqueues an eager send of src to peer.
func (s *Stream) Send(src hw.Slice, peer hw.Device, tag uint64) error {
	return s.locked(func() error {
		return s.checkedPeer("send", peer, Op{Kind: OpSend, Src: src, Peer: s.device(peer), Tag: tag})
	})
}

// Recv enqueues a receive into dst of the next message from peer with tag.
func (s *Stream) Recv(dst hw.Slice, peer hw.Device, tag uint64) error {
	return s.locked(func() error {
		return s.checkedPeer("recv", peer, Op{Kind: OpRecv, Dst: dst, Peer: s.device(peer), Tag: tag})
	})
}

// checkedPeer enqueues o, naming peer (which may be another backend's
// device, or nil) when it is not of this cluster.
func (s *Stream) checkedPeer(what string, peer hw.Device, o Op) error {
	if o.Peer == nil && peer != nil {
		return fmt.Errorf("sim: %s: %s: %w: %s is not a device of this cluster", s.dev.name, what, hw.ErrUnknownPeer, peer.Name())
	}
	return s.enqueue(o)
}

// event is ev as an event of this cluster, or nil.
func (s *Stream) event(ev hw.Event) *Event {
	e, _ := ev.(*Event)
	return e
}

// Record enqueues a record of ev.
func (s *Stream) Record(ev hw.Event) error {
	return s.locked(func() error { return s.enqueue(Op{Kind: OpRecord, Event: s.event(ev)}) })
}

// Wait enqueues a wait for the latest Record of ev enqueued so far.
func (s *Stream) Wait(ev hw.Event) error {
	return s.locked(func() error { return s.enqueue(Op{Kind: OpWait, Event: s.event(ev)}) })
}

// Compute occupies the stream for the given simulated seconds, as a
// kernel of that length would, so communication can be timed against
// compute (training steps). It is the simulator's own: real devices
// compute for real.
func (s *Stream) Compute(seconds float64, label string) error {
	return s.locked(func() error {
		if s.dev.c.closed {
			return fmt.Errorf("sim: %s: compute: %w", s.dev.name, hw.ErrClosed)
		}
		if !(seconds >= 0) || math.IsInf(seconds, 0) {
			return fmt.Errorf("sim: %s: compute %q: %w: duration %v s", s.dev.name, label, hw.ErrBadArgument, seconds)
		}
		s.computes = true
		s.queue = append(s.queue, s.dev.c.newOp(op{kind: opCompute, dur: FromSeconds(seconds), label: label}))
		s.dev.c.kick(s)
		return nil
	})
}

// Synchronize runs the simulation until the stream's queue is empty, and
// returns its first failure, or a deadlock error if it can never empty, or
// an error wrapping ErrHorizon if it would empty only past the horizon.
func (s *Stream) Synchronize() error {
	if err := s.made(); err != nil {
		return err
	}
	c := s.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("sim: %s: synchronize: %w", s.dev.name, hw.ErrClosed)
	}
	for s.err == nil && !s.empty() {
		if !c.eng.step() {
			// The stuck work failed, s's with its own cause.
			if err := c.failStuck(); err != nil && s.err == nil {
				return err
			}
		}
	}
	return s.err
}

// empty reports whether the stream has nothing left to do: no operation
// queued, and none landing.
func (s *Stream) empty() bool { return s.idleQueue() && s.landing == 0 }

// idleQueue reports whether the stream has no operation queued.
func (s *Stream) idleQueue() bool { return s.fedHead == len(s.fed) && s.head == len(s.queue) }

// peek is the op the stream is at: one pulled from a feed, or the next
// queued (perhaps a feed not yet pulled), or nil.
func (s *Stream) peek() *op {
	if s.fedHead < len(s.fed) {
		return s.fed[s.fedHead]
	}
	if s.head < len(s.queue) {
		return s.queue[s.head]
	}
	return nil
}

// pending counts the ops queued after the one the stream is at (a feed
// counts as one).
func (s *Stream) pending() int { return len(s.fed) - s.fedHead + len(s.queue) - s.head - 1 }

// kick makes the stream look at its queue again at the current instant.
func (c *Cluster) kick(s *Stream) {
	if s.kickPending || s.busy || s.err != nil {
		return
	}
	s.kickPending = true
	c.eng.schedule(c.eng.now, s, 0)
}

// lapsed reports whether the stream no longer wants an event: the end of
// a compute or landing that a failure cut short, or a kick to a failed
// stream.
func (s *Stream) lapsed(gen uint64) bool {
	if gen == computeDone {
		return s.computing == nil
	}
	return s.err != nil
}

func (s *Stream) fire(now Time, gen uint64) {
	if gen == computeDone {
		o := s.computing
		if o == nil {
			return // the stream failed while computing
		}
		s.computing, s.busy = nil, false
		if o.kind.meets() {
			o.ext.meeting.finish(now)
			return
		}
		if o.kind.isSwitch() {
			// A switch operation's result has landed.
			if err := s.applySwitch(o); err != nil {
				s.fail(o, err)
				return
			}
		}
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
		o := s.front()
		if o == nil {
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
		if s.landing > 0 && !o.kind.pipelines() {
			return // the last switch operation to land kicks the stream
		}
		if o.start = now; o.index < 0 {
			o.index = s.started
			s.started++
		}
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
		if freed(o.dst, o.src) {
			s.fail(o, hw.ErrFreed)
			return false
		}
		if !c.cfg.TimingOnly {
			copy(sliceBytes(o.dst), sliceBytes(o.src))
		}
		return true
	case opReduce, opDivide:
		if o.fused || math.IsInf(s.dev.reducer.capacity, 1) && c.trace == nil {
			// An unlimited reduction unit takes no time however it is
			// shared, so the fabric has nothing to decide; nor does a
			// reduction fused into the transfer that fed it.
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
		if freed(o.src) {
			s.fail(o, hw.ErrFreed)
			return false
		}
		if o.peer.crashed {
			s.fail(o, fmt.Errorf("%w: peer rank %d (%s) crashed at %v", ErrCrashed, o.peer.rank, o.peer.name, o.peer.crashedAt))
			return false
		}
		if o.wire != nil && o.wire.Slots > 0 && !s.reserve(o, now) {
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
		var wait Time
		var n float64
		wait, n, o.land = c.sendCost(r, o)
		s.busy = true
		s.flow = c.fab.start(s.sendPath(r, o), wait, n, s, o)
		return false
	case opRecv:
		mb := c.standIn(o.peer).mailboxTo(s.dev, o.tag)
		m, ok := mb.take()
		m.held.release(now)
		if !ok && mb.senderErr != nil {
			s.fail(o, mb.senderErr)
			return false
		}
		if ok && mb.head == len(mb.msgs) && len(mb.waiters) == 0 && mb.senderErr == nil {
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
	case OpSwitchReduce, OpMulticast:
		return s.beginSwitch(o, now)
	case OpSwitchAllReduce, OpSwitchAllGather, OpSwitchReduceScatter:
		return s.joinMeeting(o, now)
	case opCompute, OpDelay:
		if o.dur == 0 {
			return true
		}
		if speed := s.dev.computeSpeed; o.kind == opCompute && speed > 0 {
			// A compute that starts while the rank is slow is slow to its
			// end: kernels do not change speed midway here.
			o.dur = FromSeconds(o.dur.Seconds() / speed)
		}
		s.busy, s.computing = true, o
		c.eng.schedule(after(now, o.dur), s, computeDone)
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

// flowDone finishes the stream's in-flight send, reduce, divide or switch
// operation.
func (s *Stream) flowDone(now Time, o *op) {
	s.busy, s.flow = false, nil
	if o.kind.isSwitch() {
		s.switchDrained(now, o)
		return
	}
	if o.kind == opSend {
		room := s.sending
		s.sending = held{}
		if freed(o.src) {
			room.release(now)
			s.fail(o, hw.ErrFreed)
			return
		}
		c := s.dev.c
		m := c.message(o)
		room.back = o.land
		m.held = room
		if o.land > 0 {
			c.eng.schedule(after(now, o.land), c.newLanding(s.dev, o, m), 0)
		} else {
			c.deliver(s.dev, o, m, now)
		}
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
	if freed(o.dst, o.src) {
		return hw.ErrFreed
	}
	if s.dev.c.cfg.TimingOnly {
		return nil
	}
	switch o.kind {
	case opReduce:
		return hw.ReduceBytes(o.redop, o.dst.DType(), sliceBytes(o.dst), sliceBytes(o.src))
	case opDivide:
		return hw.DivideBytes(o.dst.DType(), sliceBytes(o.dst), o.n)
	}
	return nil
}

// complete retires o, the op the stream is at.
func (s *Stream) complete(o *op, now Time) {
	c := s.dev.c
	if s.fedHead < len(s.fed) {
		s.fed[s.fedHead] = nil
		if s.fedHead++; s.fedHead == len(s.fed) {
			s.fed, s.fedHead = s.fed[:0], 0
		}
	} else {
		s.queue[s.head] = nil
		switch s.head++; {
		case s.head == len(s.queue):
			// Reuse the queue's storage once it drains.
			s.queue, s.head = s.queue[:0], 0
		case s.head >= 1024 && 2*s.head >= len(s.queue):
			// A stream fed a window at a time may never drain: move what
			// is left down, or the retired half grows with the run.
			n := copy(s.queue, s.queue[s.head:])
			clear(s.queue[n:])
			s.queue, s.head = s.queue[:n], 0
		}
	}
	if c.trace != nil {
		c.trace.op(s, o, now)
	}
	c.freeOp(o)
}

// fail stops the stream at o: o and everything after it are skipped,
// events it would have recorded fail their waiters, and messages it
// would have sent fail their receivers.
func (s *Stream) fail(o *op, cause error) {
	s.abort(fmt.Errorf("sim: rank %d (%s) stream %d, op #%d %s: %w", s.dev.rank, s.dev.name, s.onDevice, o.index, o, cause), cause)
}

// abort stops the stream with err, as fail does; cause is what went
// wrong, which the receivers of its skipped sends are told.
func (s *Stream) abort(err, cause error) {
	c := s.dev.c
	s.busy, s.flow, s.computing = false, nil, nil
	s.err = err
	// What it holds is never sent now; its messages on their way still
	// free their room in connections nothing reads again.
	s.conns, s.sending = nil, held{}
	if c.trace != nil {
		c.trace.failed(s, c.eng.now, err)
	}
	failed := peerFailed(s.dev, cause)
	for _, rest := range [2][]*op{s.fed[s.fedHead:], s.queue[s.head:]} {
		for _, o := range rest {
			switch o.kind {
			case opSend:
				c.poison(s.dev, o.peer, o.tag, failed)
			case OpSwitchAllReduce, OpSwitchAllGather, OpSwitchReduceScatter:
				c.skipMeeting(s.dev, o, failed)
			case opRecord:
				o.ev.err = s.err
				for _, w := range o.ev.wake() {
					c.kick(w)
				}
			case opFeed:
				// The sends it has yet to give fail their receivers too.
				o.ext.feed.drain(func(left Op) {
					if left.Kind.meets() {
						c.skipMeeting(s.dev, &op{kind: left.Kind, tag: left.Tag, ext: &opExt{group: left.Group}}, failed)
						return
					}
					c.poison(s.dev, left.Peer, left.Tag, failed)
				})
				o.ext.feed.close()
			}
		}
	}
	s.fed, s.fedHead = s.fed[:0], 0
	s.queue, s.head = s.queue[:0], 0
}

// senderFailed is why a receive failed: its sender's stream failed first,
// for cause.
type senderFailed struct {
	rank  int
	name  string
	cause error
}

// peerFailed is what the receivers of d's skipped sends are told: d's
// failure, named by the first cause of a chain of such failures.
func peerFailed(d *Device, cause error) *senderFailed {
	var first *senderFailed
	if errors.As(cause, &first) {
		cause = first.cause
	}
	return &senderFailed{rank: d.rank, name: d.name, cause: cause}
}

func (e *senderFailed) Error() string {
	return fmt.Sprintf("%v: rank %d (%s): %v", hw.ErrPeerFailed, e.rank, e.name, e.cause)
}

func (e *senderFailed) Unwrap() []error { return []error{hw.ErrPeerFailed, e.cause} }

// freed reports whether a slice's buffer has been freed since its op was
// enqueued.
func freed(slices ...hw.Slice) bool {
	for _, sl := range slices {
		if sl.Buf != nil && sl.Buf.(*Buffer).freed {
			return true
		}
	}
	return false
}

func sliceBytes(sl hw.Slice) []byte {
	b := sl.Buf.(*Buffer)
	size := b.dt.Size()
	return b.data[sl.Off*size : (sl.Off+sl.Len)*size]
}
