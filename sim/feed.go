package sim

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

// Op is one operation of a stream as plain data: what a Stream method
// enqueues, in the form a Source hands it over.
type Op struct {
	Kind     OpKind
	Dst, Src hw.Slice
	Redop    hw.ReduceOp // OpReduce: Sum, Prod, Min or Max
	Divisor  int         // OpDivide
	Peer     *Device     // OpSend, OpRecv
	Tag      uint64      // OpSend, OpRecv, the switch collectives (OpSwitchAllReduce, …)
	Event    *Event      // OpRecord, OpWait
	Wire     *Wire       // OpSend and the switch operations: the protocol (see Wire); nil for plain
	Duration Time        // OpDelay
	// Members is, for OpSwitchReduce, the source on every member of the
	// group, in the order the switch combines them, and for OpMulticast
	// the destination on every member: one slice per member's device, the
	// stream's among them. The group is the devices of these slices.
	Members []hw.Slice
	// Group is, for the switch collectives, every member's device, in the
	// order the switch combines them, the stream's among them.
	Group []*Device
	// Fused marks an OpReduce or OpDivide done as its data arrives, as
	// NCCL's kernels reduce while they copy: it takes no time of its own
	// (the Wire of the transfers that feed it prices the work).
	Fused bool
	// Count is, for OpWait, the Record of Event to wait for, counting
	// from 1; 0 waits for the latest Record enqueued before this op, as
	// Stream.Wait does. A fed lane may reach a Wait before the lane that
	// records the event has been fed that far: a count says which Record
	// it means whatever the order.
	Count int
}

// Source feeds a stream its work a few operations at a time (see
// Stream.Feed). It is the simulator's own power, for plans too long to
// hold: a stream holds what its sources have handed over and not yet
// run, so memory grows with the streams, not the work.
type Source interface {
	// Next fills ops with the next operations and returns how many it
	// filled; 0 means the source has nothing more. It is called with the
	// cluster's lock held and must not call into the cluster. An error
	// fails the stream.
	Next(ops []Op) (int, error)
	// Close is called once, when the stream will not call Next again:
	// the source ran dry, the stream failed or the cluster was closed.
	Close()
}

// feedBatch is how many ops a stream asks its source for at a time. Few
// is better: with a thousand ranks, every rank's queued ops must stay in
// cache between its turns (64 measured about 20% slower than 4 on a
// 1024-rank ring).
const feedBatch = 4

// feed is a Source at its place in a stream's queue.
type feed struct {
	src    Source
	buf    []Op
	closed bool
}

// drain gives every send and switch collective the source has yet to
// give to see, as a stream that failed skips them.
func (f *feed) drain(see func(Op)) {
	if f.closed {
		return
	}
	if f.buf == nil {
		f.buf = make([]Op, feedBatch)
	}
	for {
		n, err := f.src.Next(f.buf)
		if err != nil || n <= 0 || n > len(f.buf) {
			return
		}
		for i := range f.buf[:n] {
			if k := f.buf[i].Kind; k == OpSend || k.meets() {
				see(f.buf[i])
			}
		}
	}
}

func (f *feed) close() {
	if !f.closed {
		f.closed = true
		f.src.Close()
	}
}

// Feed enqueues src. When the stream reaches it, it asks src for
// operations, a few at a time, at the simulated instant it has finished
// the ones before, and runs them as if each had been enqueued then by its
// Stream method (and checked as that method checks it): the same times,
// to the picosecond, as enqueueing them all up front. Work enqueued after
// Feed runs after everything src gives.
func (s *Stream) Feed(src Source) error {
	return s.locked(func() error {
		c := s.dev.c
		switch {
		case c.closed:
			return fmt.Errorf("sim: %s: feed: %w", s.dev.name, hw.ErrClosed)
		case src == nil:
			return fmt.Errorf("sim: %s stream %d: feed: %w: nil source", s.dev.name, s.onDevice, hw.ErrBadArgument)
		}
		s.queue = append(s.queue, c.newOp(op{kind: opFeed, ext: &opExt{feed: &feed{src: src}}}))
		c.kick(s)
		return nil
	})
}

// front is the op the stream is at, pulling from the feed at the head of
// the queue when the ops it gave have run: nil when nothing is left, or
// when the stream failed pulling.
func (s *Stream) front() *op {
	for {
		if o := s.peek(); o == nil || o.kind != opFeed || s.fedHead < len(s.fed) {
			return o
		}
		f := s.queue[s.head]
		if !s.pull(f) {
			return nil
		}
	}
}

// pull asks the feed fo for more ops and puts them in front of it, or,
// when its source is done, drops it. It reports false when the stream
// failed.
func (s *Stream) pull(fo *op) bool {
	c, f := s.dev.c, fo.ext.feed
	if f.buf == nil {
		f.buf = make([]Op, feedBatch)
	}
	n, err := f.src.Next(f.buf)
	if err == nil && (n < 0 || n > len(f.buf)) {
		err = fmt.Errorf("source gave %d operations for room for %d", n, len(f.buf))
	}
	if err != nil {
		f.close() // a broken source is asked nothing more
		fo.index = s.started
		s.fail(fo, err)
		return false
	}
	if n == 0 {
		f.close()
		s.queue[s.head] = nil
		if s.head++; s.head == len(s.queue) {
			s.queue, s.head = s.queue[:0], 0
		}
		c.freeOp(fo)
		return true
	}
	for i := range f.buf[:n] {
		q := c.allocOp()
		if err := s.prepare(q, &f.buf[i]); err != nil {
			c.freeOp(q)
			fo.index = s.started
			s.fail(fo, err)
			return false
		}
		s.fed = append(s.fed, q)
	}
	return true
}
