package sim

import (
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

// Never is later than any event.
const Never Time = math.MaxInt64

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
// range of Time (about 106 days) saturate to Never.
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

type event struct {
	at  Time
	seq uint64
	h   handler
	gen uint64
}

// engine is a single-threaded discrete-event loop. Events fire in (time,
// sequence) order; the sequence number is the order of scheduling, so ties
// never depend on anything but the program's own order of calls.
type engine struct {
	now   Time
	seq   uint64
	queue []event // binary min-heap on (at, seq)
	fired uint64
	// settle runs once at the end of each instant, after every event at
	// that time has fired; it may schedule more events at the same time.
	settle func(now Time)
}

// schedule arranges for h.fire(at, gen) to run. Times in the past run now.
func (e *engine) schedule(at Time, h handler, gen uint64) {
	if at < e.now {
		at = e.now
	}
	e.seq++
	e.queue = append(e.queue, event{at: at, seq: e.seq, h: h, gen: gen})
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
	for {
		for len(e.queue) > 0 && e.queue[0].at == e.now {
			ev := e.pop()
			e.fired++
			ev.h.fire(e.now, ev.gen)
		}
		if e.settle != nil {
			e.settle(e.now)
		}
		if len(e.queue) == 0 || e.queue[0].at != e.now {
			return true
		}
	}
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
	q[n] = event{}
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
