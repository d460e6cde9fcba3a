package metal

import (
	"fmt"
	"strings"
	"time"

	"github.com/commsim/commsim/hw"
)

// DeadlockError reports work that can never finish: every stream that
// still holds work waits on the host for a Send or a Record that no
// stream will ever reach, no GPU work is in flight, a Synchronize is
// waiting, and nothing changed for the world's deadlock delay (see
// WithDeadlockAfter). The blocked streams fail with it.
type DeadlockError struct {
	After   time.Duration // how long the state was observed unchanged
	Blocked []BlockedStream
}

// BlockedStream is one stream in a DeadlockError.
type BlockedStream = hw.BlockedStream

func (e *DeadlockError) Error() string {
	if e == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "metal: deadlock: %d stream(s) wait for work no stream will do (unchanged for %v):", len(e.Blocked), e.After)
	for _, s := range e.Blocked {
		fmt.Fprintf(&b, "\n  rank %d (%s) stream %d blocked at op #%d: %s (%d more queued)", s.Rank, s.Device, s.Stream, s.Op, s.Waiting, s.Pending)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, hw.ErrDeadlock) true.
func (e *DeadlockError) Unwrap() error { return hw.ErrDeadlock }

// watchForDeadlock starts the detector if a Synchronize waits and none
// runs. Callers hold c.mu.
func (c *cluster) watchForDeadlock() {
	if c.detecting || c.deadlockAfter <= 0 || c.closed {
		return
	}
	c.detecting = true
	go c.detect()
}

// detect polls while some Synchronize waits. A deadlock is declared only
// when the stuck state has lasted deadlockAfter with no progress at all
// (the epoch is unchanged): the backend cannot see a goroutine that is
// about to enqueue the missing Send, so it gives it that long.
func (c *cluster) detect() {
	tick := max(c.deadlockAfter/8, time.Millisecond)
	var since time.Time
	var seen uint64
	watching := false
	for {
		time.Sleep(tick)
		c.mu.Lock()
		if c.closed || c.syncing == 0 {
			c.detecting = false
			c.mu.Unlock()
			return
		}
		blocked := c.stuck()
		switch {
		case blocked == nil:
			watching = false
		case !watching || seen != c.epoch:
			watching, seen, since = true, c.epoch, time.Now()
		case time.Since(since) >= c.deadlockAfter:
			c.declare(blocked, time.Since(since))
			watching = false
		}
		c.mu.Unlock()
	}
}

// stuck returns the streams blocked on the host if every stream that has
// work is one of them and no GPU work is in flight, else nil.
func (c *cluster) stuck() []*Stream {
	var blocked []*Stream
	for _, s := range c.streams {
		switch {
		case s.err != nil && s.head < len(s.ops):
			return nil // still skipping: its Sends will fail their receivers
		case s.err != nil:
		case s.inflight > 0 || s.open != nil:
			return nil // the GPU is still working
		case s.blockedOn != nil:
			blocked = append(blocked, s)
		case s.head < len(s.ops):
			return nil // the worker has work it can do
		}
	}
	return blocked
}

// declare fails every blocked stream with one DeadlockError.
func (c *cluster) declare(blocked []*Stream, after time.Duration) {
	e := &DeadlockError{After: after}
	for _, s := range blocked {
		o := s.blockedOn
		waiting := o.String()
		if o.kind == opRecv {
			waiting += ": no such message has been sent"
			if o.peer.aborted != nil {
				waiting += fmt.Sprintf(", and rank %d was %v", o.peer.rank, o.peer.aborted)
			}
		}
		e.Blocked = append(e.Blocked, BlockedStream{
			Rank: s.dev.rank, Device: s.dev.name, Stream: s.id, Op: o.index,
			Waiting: waiting, Pending: len(s.ops) - s.head,
		})
	}
	for _, s := range blocked {
		s.stop(e)
	}
	c.progress()
}

// String describes the world's scheduler state, one line per stream, for
// diagnosing a run that hangs.
func (c *cluster) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "metal world on %s: %d streams, epoch %d, %d Synchronize waiting, closed %v", c.g.name(), len(c.streams), c.epoch, c.syncing, c.closed)
	for _, s := range c.streams {
		fmt.Fprintf(&b, "\n  rank %d stream %d: %d/%d ops finished, %d queued, %d in flight, open batch %v, tl %d",
			s.dev.rank, s.id, s.finished, s.issued, len(s.ops)-s.head, s.inflight, s.open != nil, s.tlValue)
		if s.blockedOn != nil {
			fmt.Fprintf(&b, ", blocked at op #%d %s", s.blockedOn.index, s.blockedOn)
		}
		if s.err != nil {
			fmt.Fprintf(&b, ", failed: %v", s.err)
		}
	}
	return b.String()
}
