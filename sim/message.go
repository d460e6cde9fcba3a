package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/commsim/commsim/hw"
)

// This file holds what happens to a send once it has drained: the
// message, the mailboxes that hold it until a receive takes it, the
// failures that reach receivers instead, and the deadlock report when
// nothing can move.

// message is a send that has arrived at its destination device.
type message struct {
	dt   hw.DType
	n    int
	data []byte // nil in timing-only mode
	// held is the room in its sender's buffer the message holds until a
	// receive takes it (none without a Wire with Slots).
	held held
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
	// senderErr is the failure of a sender stream that dropped a send
	// to this mailbox: a receive that finds no message fails with it
	// instead of waiting for what will never come.
	senderErr error
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
func (c *Cluster) deliver(from *Device, o *op, m message, now Time) {
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

// message is what send o carries, taken from its source now.
func (c *Cluster) message(o *op) message {
	m := message{dt: o.src.DType(), n: o.src.Len}
	if !c.cfg.TimingOnly {
		m.data = append([]byte(nil), sliceBytes(o.src)...)
	}
	return m
}

// landing is a message on its way, delivered when it fires.
type landing struct {
	from *Device
	o    op
	m    message
}

// newLanding is a landing of o's message m from device from, reusing one
// delivered before where there is one: every send with a Wire's latency
// makes one.
func (c *Cluster) newLanding(from *Device, o *op, m message) *landing {
	var l *landing
	if n := len(c.landings); n > 0 {
		l, c.landings = c.landings[n-1], c.landings[:n-1]
	} else {
		l = new(landing)
	}
	l.from, l.o, l.m = from, *o, m
	return l
}

func (l *landing) fire(now Time, _ uint64) {
	c := l.from.c
	c.deliver(l.from, &l.o, l.m, now)
	*l = landing{}
	c.landings = append(c.landings, l)
}

// poison marks the mailbox of a send from d to peer with tag, skipped by
// a failure, so that its receivers fail with err, and wakes those waiting.
func (c *Cluster) poison(d, peer *Device, tag uint64, err error) {
	if peer == nil || peer.c != c {
		return
	}
	mb := d.mailboxTo(c.standIn(peer), tag)
	if mb.senderErr == nil {
		mb.senderErr = err
	}
	for _, w := range mb.waiters {
		c.kick(w)
	}
	mb.waiters = mb.waiters[:0]
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
	if e == nil {
		return "<nil>"
	}
	msg := fmt.Sprintf("sim: deadlock at %v: %d stream(s) can never finish:", e.At, len(e.Blocked))
	for _, b := range e.Blocked {
		msg += fmt.Sprintf("\n  rank %d (%s) stream %d blocked at op #%d: %s (%d more queued)", b.Rank, b.Device, b.Stream, b.Op, b.Waiting, b.Pending)
	}
	return msg
}

func (e *DeadlockError) Unwrap() error { return hw.ErrDeadlock }

// deadlock describes every stream with unfinished work, rank by rank and
// each rank's streams in the order it made them, or returns nil; stuck
// are those streams, in that order.
func (c *Cluster) deadlock() (dl *DeadlockError, stuck []*Stream) {
	var blocked []BlockedStream
	for _, s := range c.streamsByRank() {
		if s.err != nil || s.idleQueue() {
			continue
		}
		o := s.peek()
		waiting := o.String()
		if o.kind == opRecv && o.peer.crashed {
			waiting += fmt.Sprintf(", but rank %d crashed at %v", o.peer.rank, o.peer.crashedAt)
		}
		waiting += s.bufferWait(o)
		blocked = append(blocked, BlockedStream{
			Rank: s.dev.rank, Device: s.dev.name, Stream: s.onDevice, Op: o.index,
			Waiting: waiting, Pending: s.pending(),
		})
		stuck = append(stuck, s)
	}
	if len(blocked) == 0 {
		return nil, nil
	}
	return &DeadlockError{At: c.eng.now, Blocked: blocked}, stuck
}

// streamsByRank is every stream, rank by rank, each rank's in the order
// it made them: the order of reports that goroutines, one a rank, making
// streams in turns of their own must not change.
func (c *Cluster) streamsByRank() []*Stream {
	streams := slices.Clone(c.streams)
	slices.SortStableFunc(streams, func(a, b *Stream) int {
		return cmp.Or(cmp.Compare(a.dev.rank, b.dev.rank), cmp.Compare(a.onDevice, b.onDevice))
	})
	return streams
}

// failStuck fails the work left when no event is pending before the
// horizon: past the horizon when an event beyond it is still wanted (work
// that is merely slow is never a deadlock), else deadlocked. It returns
// nil when no work is left.
func (c *Cluster) failStuck() error {
	if c.eng.pastHorizon() {
		return c.failPastHorizon()
	}
	return c.failDeadlocked()
}

// failPastHorizon fails the work that would end past the horizon with
// ErrHorizon and returns the first such failure. The streams whose own
// operation ends there fail first, and messages landing there fail their
// receivers, so those waiting on them name them as the cause, as they
// would a crash; whatever is still stuck then waited on them too.
func (c *Cluster) failPastHorizon() error {
	handlers, gens := c.eng.dropBeyond()
	var roots []*Stream
	for i, h := range handlers {
		switch h := h.(type) {
		case *Stream:
			if !h.lapsed(gens[i]) {
				roots = append(roots, h)
			}
		case *flowBatch:
			for j, f := range h.flows {
				if s, ok := f.owner.(*Stream); ok && f.gen == h.gens[j] {
					roots = append(roots, s)
				}
			}
		case *landing:
			c.poison(h.from, h.o.peer, h.o.tag, peerFailed(h.from, ErrHorizon))
		}
	}
	var first error
	stop := func(s *Stream) {
		if s.err == nil && !s.empty() {
			s.crash(ErrHorizon)
			if first == nil {
				first = s.err
			}
		}
	}
	for _, s := range roots {
		stop(s)
	}
	spread := func() {
		for c.eng.step() {
			// Only failures spread: nothing else was left to run.
		}
	}
	spread()
	for _, s := range c.streams {
		stop(s)
	}
	spread()
	if first == nil {
		first = fmt.Errorf("sim: at %v: %w", c.eng.now, ErrHorizon)
	}
	return first
}

// failDeadlocked fails every stream that can never finish with the report
// that lists them all, so each returns it from Synchronize and lets go of
// its work (feeds included), or returns nil when none is stuck.
func (c *Cluster) failDeadlocked() error {
	dl, stuck := c.deadlock()
	if dl == nil {
		return nil
	}
	for _, s := range stuck {
		s.abort(dl, dl)
	}
	return dl
}

// IsDeadlock reports whether err reports a deadlock.
func IsDeadlock(err error) bool { return errors.Is(err, hw.ErrDeadlock) }
