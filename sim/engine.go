package sim

import (
	"errors"
	"fmt"
	"math"
)

// Time is simulated time in integer picoseconds. Integer time keeps event
// order exact: two events at "the same" time really are at the same time.
type Time int64

// Units of simulated time.
const (
	Picosecond  Time = 1
	Nanosecond  Time = 1000
	Microsecond Time = 1000 * Nanosecond
	Millisecond Time = 1000 * Microsecond
	Second      Time = 1000 * Millisecond
)

// Never is later than any event. It is also the clock's horizon: Time
// holds no later instant, so work that would end at or past it can never
// be simulated (ErrHorizon).
const Never Time = math.MaxInt64

// ErrHorizon is wrapped by the errors of work that would end past the last
// instant simulated time can hold. Durations are added with after, which
// saturates at Never rather than wrapping, so such work is reported, never
// given a wrapped (early) time and never taken for a deadlock.
var ErrHorizon = errors.New("simulated time passes the clock's horizon of 106.75 days (2^63−1 ps)")

// after is the instant d after t, or Never when that is past the horizon.
// Every duration the simulator adds to its clock goes through it.
func after(t, d Time) Time {
	if d >= Never-t {
		return Never
	}
	return t + max(d, 0)
}

// Seconds converts t to seconds.
func (t Time) Seconds() float64 { return float64(t) / float64(Second) }

// Micros converts t to microseconds.
func (t Time) Micros() float64 { return float64(t) / float64(Microsecond) }

// String prints t in microseconds with picosecond precision.
func (t Time) String() string {
	sign := ""
	if t < 0 {
		sign, t = "-", -t
	}
	return fmt.Sprintf("%s%d.%06dus", sign, t/Microsecond, t%Microsecond)
}

// FromSeconds rounds s seconds to the nearest picosecond. Values beyond the
// range of Time (about 106 days), and NaN, saturate to Never, which a run
// reports as past the horizon (ErrHorizon); values below 0 give 0.
func FromSeconds(s float64) Time {
	ps := math.Round(s * float64(Second))
	if ps >= float64(Never) || math.IsNaN(ps) {
		return Never
	}
	if ps < 0 {
		return 0
	}
	return Time(ps)
}

// handler receives an event. gen lets a handler ignore events it has
// superseded (a flow whose finish time moved), which is cheaper than
// deleting them from the heap.
type handler interface {
	fire(now Time, gen uint64)
}

// lapser is a handler that can tell an event it no longer wants (a flow
// whose finish moved, a compute that a crash ended). The engine asks it
// of events beyond the horizon, which never fire: only a wanted one makes
// the run fail with ErrHorizon. A handler without it wants every event.
type lapser interface {
	lapsed(gen uint64) bool
}

// event is a heap entry. It holds no pointers (the handler sits in a slot
// table), so reordering the heap costs no GC write barriers.
type event struct {
	at   Time
	seq  uint64 // scheduling order, or a seeded shuffle of it (see engine.seed)
	gen  uint64
	slot int32
}

// engine is a single-threaded discrete-event loop. Events fire in (time,
// sequence) order; the sequence number is the order of scheduling, so ties
// never depend on anything but the program's own order of calls.
//
// Events for the current instant skip the heap: anything scheduled at "now"
// while an instant is being processed has a higher sequence number than
// every event already queued for now, so a FIFO keeps the same order.
type engine struct {
	now   Time
	seq   uint64
	queue []event // binary min-heap on (at, seq), for future instants
	soon  []event // FIFO of events at now, scheduled during this instant
	// beyond holds events at Never, past the horizon: they never fire, but
	// one still wanted when nothing else is left fails the run.
	beyond []event
	slots  []handler
	free   []int32
	fired  uint64
	busy   bool // inside step
	// seed, when not 0, orders events of one instant by a seeded hash of
	// their scheduling order instead: another valid interleaving of work
	// that is simultaneous, for testing that results do not depend on it.
	seed uint64
	// settle runs once at the end of each instant, after every event at
	// that time has fired; it may schedule more events at the same time.
	settle func(now Time)
}

// schedule arranges for h.fire(at, gen) to run. Times in the past run now;
// at Never (past the horizon), never.
func (e *engine) schedule(at Time, h handler, gen uint64) {
	if at < e.now {
		at = e.now
	}
	e.seq++
	var slot int32
	if n := len(e.free); n > 0 {
		slot = e.free[n-1]
		e.free = e.free[:n-1]
		e.slots[slot] = h
	} else {
		slot = int32(len(e.slots))
		e.slots = append(e.slots, h)
	}
	ev := event{at: at, seq: e.seq, gen: gen, slot: slot}
	if at == Never {
		e.beyond = append(e.beyond, ev)
		return
	}
	if e.seed != 0 {
		ev.seq = mix64(e.seed ^ e.seq)
	}
	if e.busy && at == e.now && e.seed == 0 {
		e.soon = append(e.soon, ev)
		return
	}
	e.queue = append(e.queue, ev)
	e.up(len(e.queue) - 1)
}

// step runs every event of the next instant, then the settle hook, repeating
// while the hook schedules more work at that instant. It returns false when
// no event is pending.
func (e *engine) step() bool {
	if len(e.queue) == 0 {
		return false
	}
	e.now = e.queue[0].at
	e.busy = true
	defer func() { e.busy = false }()
	for {
		for len(e.queue) > 0 && e.queue[0].at == e.now {
			e.fire(e.pop())
		}
		for i := 0; i < len(e.soon); i++ {
			e.fire(e.soon[i])
		}
		e.soon = e.soon[:0]
		if e.settle != nil {
			e.settle(e.now)
		}
		if len(e.soon) == 0 {
			return true
		}
	}
}

// pastHorizon reports whether an event beyond the horizon is still
// wanted. Those no longer wanted are dropped.
func (e *engine) pastHorizon() bool {
	kept := e.beyond[:0]
	for _, ev := range e.beyond {
		if l, ok := e.slots[ev.slot].(lapser); ok && l.lapsed(ev.gen) {
			e.release(ev.slot)
			continue
		}
		kept = append(kept, ev)
	}
	clear(e.beyond[len(kept):])
	e.beyond = kept
	return len(kept) > 0
}

// dropBeyond forgets the events beyond the horizon, whose run has failed,
// and returns them as handler and generation.
func (e *engine) dropBeyond() (hs []handler, gens []uint64) {
	for _, ev := range e.beyond {
		hs, gens = append(hs, e.slots[ev.slot]), append(gens, ev.gen)
		e.release(ev.slot)
	}
	e.beyond = e.beyond[:0]
	return hs, gens
}

func (e *engine) release(slot int32) {
	e.slots[slot] = nil
	e.free = append(e.free, slot)
}

func (e *engine) fire(ev event) {
	h := e.slots[ev.slot]
	e.release(ev.slot)
	e.fired++
	h.fire(e.now, ev.gen)
}

func (e *engine) less(i, j int) bool {
	a, b := &e.queue[i], &e.queue[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (e *engine) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(i, p) {
			return
		}
		e.queue[i], e.queue[p] = e.queue[p], e.queue[i]
		i = p
	}
}

func (e *engine) pop() event {
	q := e.queue
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	e.queue = q[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && e.less(r, l) {
			m = r
		}
		if !e.less(m, i) {
			break
		}
		e.queue[i], e.queue[m] = e.queue[m], e.queue[i]
		i = m
	}
	return top
}

// mix64 is splitmix64's finaliser: a bijection, so shuffled sequence
// numbers stay distinct.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
