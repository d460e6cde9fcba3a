//go:build linux || darwin

package cuda

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

// Event is an hw.Event over CUDA events.
//
// hw's Wait waits for the most recent Record enqueued before the Wait call,
// while cuStreamWaitEvent waits for the most recent cuEventRecord issued
// before it. Streams issue their queues independently (and a Wait is often
// enqueued before the Record it needs is issued), so each Record makes a
// new generation with a CUDA event of its own: Wait captures the
// generation when it is called, its stream's worker holds until that
// generation's cuEventRecord has been issued, and then waits on exactly
// that CUDA event, which no later Record can move.
type Event struct {
	dev    *Device
	id     int
	last   *gen // the latest Record enqueued; nil if never recorded
	latest *gen // the highest-numbered generation issued, for timing
}

var _ hw.Event = (*Event)(nil)

// gen is one Record of an Event.
type gen struct {
	ev    *Event
	n     int // 1 for the first Record
	state genState
	cu    uintptr // the CUDA event, once issued
	pool  *pool   // where cu came from (the recording stream's GPU)
	err   error   // why the Record was skipped, when state is genFailed
	refs  int     // Waits that still need cu
	// waiters are the streams whose worker is blocked until the record is
	// issued.
	waiters []*Stream
}

type genState uint8

const (
	genPending genState = iota // enqueued, not yet issued to the driver
	genIssued                  // cuEventRecord issued
	genFailed                  // skipped because its stream failed
)

// Device is the device that created the event; nil for an Event not
// opened.
func (e *Event) Device() hw.Device {
	if e.opened() != nil {
		return nil // not a typed nil, which would compare != nil
	}
	return e.dev
}

// opened refuses an Event that Device.NewEvent did not make.
func (e *Event) opened() error {
	if e == nil || e.dev == nil {
		return notOpened("Event", "Device.NewEvent")
	}
	return nil
}

func (e *Event) String() string {
	if e.opened() != nil {
		return "event (not opened)"
	}
	return fmt.Sprintf("event %d of %s", e.id, e.dev.name)
}

// newGen starts a Record's generation; the caller holds the hub lock.
func (e *Event) newGen() *gen {
	n := 1
	if e.last != nil {
		n = e.last.n + 1
	}
	g := &gen{ev: e, n: n}
	e.last = g
	return g
}

// issued marks g recorded with the CUDA event cu from p, and recycles
// generations that nothing can wait on any more. The caller holds the hub
// lock.
func (g *gen) issued(cu uintptr, p *pool) {
	g.state, g.cu, g.pool = genIssued, cu, p
	e := g.ev
	if e.latest == nil || g.n > e.latest.n {
		old := e.latest
		e.latest = g
		if old != nil {
			old.recycle()
		}
	} else {
		g.recycle()
	}
	g.wakeWaiters()
}

// failed marks g skipped: its waiters fail with err.
func (g *gen) failed(err error) {
	g.state, g.err = genFailed, err
	g.wakeWaiters()
}

func (g *gen) wakeWaiters() {
	for _, s := range g.waiters {
		s.wake.Signal()
	}
	g.waiters = nil
}

// release drops a Wait's hold on g once its cuStreamWaitEvent is issued
// (or the Wait was skipped).
func (g *gen) release() {
	g.refs--
	g.recycle()
}

// recycle returns g's CUDA event to its pool when no Wait needs it and a
// later generation has replaced it for timing. A cuStreamWaitEvent already
// issued on it is unaffected by the event being recorded again.
func (g *gen) recycle() {
	if g.cu == 0 || g.refs > 0 || g == g.ev.latest {
		return
	}
	g.pool.putEvent(g.cu, true)
	g.cu = 0
}

// ElapsedSince returns the seconds between the latest completed Records of
// start and e, from cuEventElapsedTime (about half a microsecond of
// resolution). Either event not recorded, or its latest Record not yet
// complete on the GPU, gives an error wrapping hw.ErrNotReady.
func (e *Event) ElapsedSince(start hw.Event) (float64, error) {
	if err := e.opened(); err != nil {
		return 0, err
	}
	h := e.dev.h
	s, ok := start.(*Event)
	if !ok || s.opened() != nil || s.dev.h != h {
		return 0, fmt.Errorf("cuda: elapsed: %w: start event is not from this world", hw.ErrBadArgument)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := e.dev.closedErr("elapsed"); err != nil {
		return 0, err
	}
	for _, ev := range []*Event{s, e} {
		if ev.latest == nil {
			return 0, fmt.Errorf("cuda: elapsed: %v: %w: never recorded", ev, hw.ErrNotReady)
		}
	}
	var ms float32
	var r cuResult
	err := withContext(h.d, e.latest.pool.g.ctx, func() error {
		r = callPinned(&ms, func(p *float32) cuResult { return h.d.cuEventElapsedTime(p, s.latest.cu, e.latest.cu) })
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cuda: elapsed: %w", err)
	}
	if r == cudaErrorNotReady {
		return 0, fmt.Errorf("cuda: elapsed from %v to %v: %w: still running on the GPU", s, e, hw.ErrNotReady)
	}
	if err := h.d.check("cuEventElapsedTime", r); err != nil {
		return 0, fmt.Errorf("cuda: elapsed from %v to %v: %w", s, e, err)
	}
	return float64(ms) / 1e3, nil
}
