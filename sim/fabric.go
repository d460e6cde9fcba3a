package sim

import (
	"math"
)

// link is one direction of a physical link, or a device's reduction unit:
// anything with a capacity that flows share.
type link struct {
	id       int
	name     string
	capacity float64 // bytes per picosecond; +Inf never limits
	flows    []*flow

	// Scratch for settle, valid only during one call.
	mark    uint64
	remCap  float64
	unfixed int

	// load sums the own rates (see flow.own) of the crossings that have
	// one, counted in crossings: what the link would carry if every flow
	// ran at its slowest link's speed, for fabric.settleLocally.
	load      float64
	crossings int

	// carried counts bytes that crossed the link, for utilisation reports.
	carried float64
	// down marks a link taken out of service by a fault; its capacity is 0.
	down bool
	// class is the kind of path a route through the link is (see Wire).
	class PathClass
}

type flowState uint8

const (
	flowLatency flowState = iota // head still travelling: no bandwidth used yet
	flowActive                   // sharing bandwidth on its links
	flowDone
)

// flow is a transfer of bytes over a path. It first spends the path's
// latency, then drains at its max-min fair rate; so an uncontended flow of
// s bytes takes latency + s/bandwidth, the cut-through α-β cost.
type flow struct {
	links       []*link
	linksInline [4]*link // links of a short path, copied: routes may be scratch
	pos         []int32  // index of this flow in links[i].flows
	posInline   [4]int32
	bytes       float64
	remaining   float64
	rate        float64 // bytes per picosecond
	prevRate    float64
	own         float64 // the capacity of its slowest link, while active
	scheduled   bool    // a finish event for the current rate is queued
	updated     Time    // when remaining was last brought up to date
	start       Time
	gen         uint64
	mark        uint64
	fixed       bool
	// repeats: the flow may cross a link more than once, taking its rate
	// there once per crossing (a switch operation on a folded cluster,
	// whose members' links fold onto one: see Cluster.Rotated).
	repeats bool
	state   flowState
	fab     *fabric
	owner   flowOwner // told when the last byte arrives
	op      *op       // the owner's operation, if any
}

// fabric keeps the set of active flows and their max-min fair rates. Rates
// change only when a flow starts or ends; those changes are batched per
// instant and re-solved only over the links and flows connected to a
// change, so disjoint flows cost O(1) each.
type fabric struct {
	eng    *engine
	dirty  []*link
	epoch  uint64
	active int
	// resolved counts flows whose rate was re-solved, to check that
	// changes stay local to their component.
	resolved uint64

	// last is the most recently scheduled batch that has not fired yet.
	// Flows scheduled one after another for the same instant (a step of
	// a collective: same size, same latency) join it and cost one engine
	// event together rather than one each.
	last  *flowBatch
	spare []*flowBatch
	free  []*flow // finished flows, reused by start
	trace *tracer // records link rates when tracing
	// onDown handles a flow about to use a link that is down.
	onDown func(f *flow, now Time)

	// scratch reused across settles
	compLinks []*link
	compFlows []*flow
	heap      shareHeap

	// For settleLocally: whether a flow joined or left a link that was
	// tight before or after since the last settle, the flows that joined
	// since, and whether a fault changed a capacity under flows (which
	// the links' loads do not see).
	touchedTight bool
	joined       []*flow
	faulted      bool
}

// flowOwner is told when one of its flows finishes. An interface (rather
// than a closure) keeps starting a flow free of allocations.
type flowOwner interface {
	flowDone(now Time, o *op)
}

// start begins a flow of n bytes over links after latency. owner.flowDone
// runs when the last byte arrives.
func (fb *fabric) start(links []*link, latency Time, n float64, owner flowOwner, o *op) *flow {
	var f *flow
	if k := len(fb.free); k > 0 {
		f = fb.free[k-1]
		fb.free = fb.free[:k-1]
	} else {
		f = &flow{fab: fb}
	}
	// gen and mark carry over: stale batch entries hold older generations
	// and marks are compared with an epoch that only grows.
	f.links, f.bytes, f.remaining, f.owner, f.op, f.start = f.keep(links), n, n, owner, o, fb.eng.now
	f.rate, f.prevRate, f.updated, f.scheduled, f.fixed, f.repeats, f.state = 0, 0, 0, false, false, false, flowLatency
	fb.at(after(fb.eng.now, latency), f)
	return f
}

// keep returns links for f to hold: a copy in f's own storage when the
// path is short, as paths between leaves of a switch are made in scratch
// space (see Cluster.routeBetween).
func (f *flow) keep(links []*link) []*link {
	if len(links) <= len(f.linksInline) {
		return append(f.linksInline[:0], links...)
	}
	return links
}

// flowBatch is every flow due at one instant, in the order they were
// scheduled; it fires as one engine event.
type flowBatch struct {
	fb    *fabric
	at    Time
	flows []*flow
	gens  []uint64
}

// at schedules f to fire at t under its current generation. A batch past
// the horizon holds one flow and is never joined: it never fires, and the
// engine may drop it once that flow has moved on.
func (fb *fabric) at(t Time, f *flow) {
	if t < fb.eng.now {
		t = fb.eng.now
	}
	b := fb.last
	if b == nil || b.at != t || t == Never {
		if n := len(fb.spare); n > 0 {
			b = fb.spare[n-1]
			fb.spare = fb.spare[:n-1]
		} else {
			b = &flowBatch{fb: fb}
		}
		b.at = t
		if t != Never {
			fb.last = b
		}
		fb.eng.schedule(t, b, 0)
	}
	b.flows = append(b.flows, f)
	b.gens = append(b.gens, f.gen)
}

// lapsed reports whether every flow of the batch has moved on.
func (b *flowBatch) lapsed(uint64) bool {
	for i, f := range b.flows {
		if f.gen == b.gens[i] {
			return false
		}
	}
	return true
}

func (b *flowBatch) fire(now Time, _ uint64) {
	fb := b.fb
	if fb.last == b {
		fb.last = nil
	}
	for i, f := range b.flows {
		f.fire(now, b.gens[i])
		b.flows[i] = nil
	}
	b.flows, b.gens = b.flows[:0], b.gens[:0]
	fb.spare = append(fb.spare, b)
}

func (f *flow) fire(now Time, gen uint64) {
	if gen != f.gen {
		return // superseded by a later rate change
	}
	fb := f.fab
	switch f.state {
	case flowLatency:
		if f.remaining <= 0 || len(f.links) == 0 {
			f.finish(now)
			return
		}
		for _, l := range f.links {
			if l.down && fb.onDown != nil {
				fb.onDown(f, now) // reroutes or fails the flow
				return
			}
		}
		f.state = flowActive
		f.updated = now
		if len(f.links) <= len(f.posInline) {
			f.pos = f.posInline[:len(f.links)]
		} else {
			f.pos = make([]int32, len(f.links))
		}
		for i, l := range f.links {
			f.pos[i] = int32(len(l.flows))
			l.flows = append(l.flows, f)
			fb.touch(l)
		}
		f.own = slowest(f.links)
		fb.charge(f, 1)
		fb.joined = append(fb.joined, f)
		fb.active++
	case flowActive:
		for _, l := range f.links {
			l.carried += f.bytes
		}
		fb.detach(f)
		f.finish(now)
	}
}

// detach takes an active flow off its links, bringing its remaining bytes
// up to date; the links are re-solved at the end of the instant.
func (fb *fabric) detach(f *flow) {
	if f.state != flowActive {
		return
	}
	if f.rate > 0 && !math.IsInf(f.rate, 1) {
		f.remaining = max(0, f.remaining-f.rate*float64(fb.eng.now-f.updated))
	}
	f.updated = fb.eng.now
	for i, l := range f.links {
		last := len(l.flows) - 1
		moved := l.flows[last]
		l.flows[f.pos[i]] = moved
		for j, ml := range moved.links {
			// A flow may cross a link more than once (see flow.repeats):
			// the crossing that sat last moves.
			if ml == l && moved.pos[j] == int32(last) {
				moved.pos[j] = f.pos[i]
				break
			}
		}
		l.flows[last] = nil
		l.flows = l.flows[:last]
		f.pos[i] = -1 // gone: no later crossing's search may match it
		fb.touch(l)
	}
	fb.charge(f, -1)
	fb.active--
	f.state = flowLatency
}

// restart sends what is left of f again over links, after latency: the
// detour of a flow whose path lost a link.
func (fb *fabric) restart(f *flow, links []*link, latency Time) {
	fb.detach(f)
	f.gen++
	f.links, f.pos = f.keep(links), nil
	f.rate, f.prevRate, f.scheduled = 0, 0, false
	f.state = flowLatency
	fb.at(after(fb.eng.now, latency), f)
}

// cancel drops f without telling its owner.
func (fb *fabric) cancel(f *flow) {
	fb.detach(f)
	f.gen++
	f.state = flowDone
	f.links, f.pos, f.owner, f.op = nil, nil, nil, nil
	fb.free = append(fb.free, f)
}

func (f *flow) finish(now Time) {
	f.state = flowDone
	f.remaining = 0
	f.gen++
	owner, o := f.owner, f.op
	f.links, f.pos, f.owner, f.op = nil, nil, nil, nil
	f.fab.free = append(f.fab.free, f)
	if owner != nil {
		owner.flowDone(now, o)
	}
}

func (fb *fabric) touch(l *link) {
	fb.dirty = append(fb.dirty, l)
}

// charge adds (sign 1) or takes away (-1) active flow f's own rate on its
// links' loads, noting whether one of them was tight before or after.
func (fb *fabric) charge(f *flow, sign int) {
	if !charges(f.own) {
		return
	}
	for _, l := range f.links {
		if l.tight() {
			fb.touchedTight = true
		}
		l.load += float64(sign) * f.own
		l.crossings += sign
		if l.crossings == 0 {
			l.load = 0 // no rounding left over from the flows gone
		}
		if l.tight() {
			fb.touchedTight = true
		}
	}
}

// tight reports whether flows share l with too little room for each to
// run at its own rate (see atOwnBottlenecks).
func (l *link) tight() bool { return l.tooFull(l.capacity-l.load, l.crossings) }

// tooFull reports whether l, with room left over once crossings flows
// with a rate take their own, is shared without the margin
// atOwnBottlenecks wants.
func (l *link) tooFull(room float64, crossings int) bool {
	return crossings > 1 && room < l.capacity*roomMargin
}

// capacityChanged is told that a fault changed l's capacity; the loads
// then no longer say what they did, and settle re-solves from then on.
func (fb *fabric) capacityChanged(l *link) {
	fb.faulted = true
	fb.touch(l)
}

// settle re-solves rates for everything connected to links touched in this
// instant and reschedules the flows whose rate changed.
func (fb *fabric) settle(now Time) {
	if len(fb.dirty) == 0 {
		return
	}
	if fb.settleLocally(now) {
		return
	}
	defer fb.settled()
	fb.epoch++
	ep := fb.epoch
	for _, d := range fb.dirty {
		if d.mark == ep {
			continue
		}
		if len(d.flows) == 0 && fb.trace == nil {
			// No rate on d to re-solve. The flows that shared another
			// link with the one that left d are reached through that
			// link, which is dirty too.
			continue
		}
		// Collect the component of d: links and flows joined by sharing,
		// breadth first, and solve it on its own.
		d.mark = ep
		links, flows := append(fb.compLinks[:0], d), fb.compFlows[:0]
		for i := 0; i < len(links); i++ {
			for _, f := range links[i].flows {
				if f.mark == ep {
					continue
				}
				f.mark = ep
				flows = append(flows, f)
				for _, l := range f.links {
					if l.mark != ep {
						l.mark = ep
						links = append(links, l)
					}
				}
			}
		}
		fb.resolve(now, links, flows)
		fb.compLinks, fb.compFlows = links[:0], flows[:0]
	}
	fb.dirty = fb.dirty[:0]
}

// settleLocally settles the instant without solving, where every flow
// that joined or left since the last settle crossed only links that were
// not tight, before or after. Such a link carries less than its capacity
// even were every flow on it at its own rate (its slowest link's), so no
// flow's rate is limited there: a flow leaving it takes nothing from
// anyone, and a flow joining it runs at its own rate and takes nothing
// from anyone either. Progressive filling would find the same, bit for
// bit (a link that is not tight never sets a rate), but it visits the
// whole component, which a pipelined collective joins across its fabric.
func (fb *fabric) settleLocally(now Time) bool {
	if fb.touchedTight || fb.faulted || fb.trace != nil {
		return false
	}
	for _, f := range fb.joined {
		// An active flow without a finish joined in this instant (every
		// settle gives every other one a finish); the same test skips a
		// flow that left again, or is listed twice (dropped by a crash
		// and reused in one instant).
		if f.state != flowActive || f.scheduled {
			continue
		}
		fb.resolved++
		f.prevRate, f.rate, f.fixed = f.rate, f.own, true
		f.updated = now
		fb.scheduleFinish(f, now)
	}
	fb.dirty = fb.dirty[:0]
	fb.settled()
	return true
}

// settled starts the next instant's record of what joined and whether a
// tight link was touched.
func (fb *fabric) settled() {
	clear(fb.joined)
	fb.joined = fb.joined[:0]
	fb.touchedTight = false
}

// resolve re-solves one component's rates and, for the flows whose rate
// changed, brings their remaining bytes up to date and reschedules their
// finish. A flow whose rate stays keeps its last update: touching it
// would round its remaining bytes at instants set by unrelated flows, and
// a mirrored run, which has fewer of those, would then end a picosecond
// apart from the full one.
func (fb *fabric) resolve(now Time, links []*link, flows []*flow) {
	for _, f := range flows {
		f.fixed = false
		f.prevRate = f.rate
	}
	fb.resolved += uint64(len(flows))
	fb.solve(links, flows)
	if fb.trace != nil {
		fb.trace.rates(now, links)
	}
	for _, f := range flows {
		if f.rate == f.prevRate && (f.scheduled || f.state != flowActive) {
			continue
		}
		if r := f.prevRate; r > 0 && !math.IsInf(r, 1) {
			f.remaining = max(0, f.remaining-r*float64(now-f.updated))
		}
		f.updated = now
		if f.state != flowActive {
			continue
		}
		fb.scheduleFinish(f, now)
	}
}

// scheduleFinish queues active flow f's finish at its current rate, from
// now, superseding the one queued before.
func (fb *fabric) scheduleFinish(f *flow, now Time) {
	f.gen++
	f.scheduled = true
	fb.at(after(now, drainTime(f.remaining, f.rate)), f)
}

// drainTime is how long n bytes take at rate in whole picoseconds:
// rounded to the nearest (halves down) below half a second, and down
// from there, where the margin for float noise (halfNoise, relative)
// passes half a picosecond. A zero rate never finishes, and a finish
// past the horizon is Never: such a flow waits there, in case its rate
// rises.
func drainTime(n, rate float64) Time {
	if n <= 0 || math.IsInf(rate, 1) {
		return 0
	}
	if rate <= 0 {
		return Never
	}
	q := n / rate
	if q >= float64(Never) {
		return Never
	}
	// Half a picosecond rounds down, and so does anything within float
	// noise of it: nice bandwidths and sizes make exact halves common, and
	// the last bits of a rate depend on the order its link's flows were
	// summed in, which must not decide the picosecond (a mirrored run sums
	// them in another order than the full one).
	d := math.Floor(q)
	if q-d > 0.5+halfNoise*q {
		d++
	}
	return Time(d)
}

// halfNoise is the relative margin around half a picosecond within which
// drainTime rounds down: thousands of times a float64's rounding error.
const halfNoise = 1e-12

// solve computes max-min fair rates by progressive filling: repeatedly take
// the link whose remaining capacity per unfixed flow is smallest, fix its
// flows at that share and charge them to their other links. Ties go to the
// lower link id, so the result never depends on map or heap order.
func (fb *fabric) solve(links []*link, flows []*flow) {
	if atOwnBottlenecks(links, flows) {
		return
	}
	fb.fill(links, flows)
}

// fill is solve's progressive filling, the general case.
func (fb *fabric) fill(links []*link, flows []*flow) {
	h := &fb.heap
	h.items = h.items[:0]
	for _, l := range links {
		l.remCap = l.capacity
		l.unfixed = len(l.flows)
		if l.unfixed > 0 && !math.IsInf(l.capacity, 1) {
			h.items = append(h.items, shareItem{share: l.remCap / float64(l.unfixed), id: l.id, l: l})
		}
	}
	h.init()
	for len(h.items) > 0 {
		it := h.pop()
		l := it.l
		if l.unfixed == 0 {
			continue
		}
		share := l.remCap / float64(l.unfixed)
		if share < 0 {
			share = 0
		}
		if share != it.share {
			// Charged since it was pushed; shares only grow, so re-queue.
			h.push(shareItem{share: share, id: l.id, l: l})
			continue
		}
		for _, f := range l.flows {
			if f.fixed {
				continue
			}
			f.fixed = true
			f.rate = share
			for _, other := range f.links {
				other.remCap -= share
				other.unfixed--
			}
		}
	}
	for _, f := range flows {
		if !f.fixed {
			f.fixed = true
			f.rate = math.Inf(1) // crosses only unlimited links
		}
	}
}

// atOwnBottlenecks gives every flow the capacity of its slowest link and
// reports whether that is already the max-min fair answer: whether every
// link carries at most one flow with a rate, or has room for all its flows
// with a margin far above float rounding. Progressive filling would then
// fix each flow on its slowest link, which it has alone, at exactly that
// link's capacity: the same rates, bit for bit, without the heap. Most
// components of a pipelined collective are so (97% of the solves of the
// 128-GB200 log, where the heap took 40% of the run).
func atOwnBottlenecks(links []*link, flows []*flow) bool {
	for _, l := range links {
		l.remCap = l.capacity
		l.unfixed = 0 // here: the crossings with a rate
	}
	for _, f := range flows {
		f.rate = slowest(f.links)
		if !charges(f.rate) {
			continue
		}
		for _, l := range f.links {
			l.remCap -= f.rate
			l.unfixed++
		}
	}
	for _, l := range links {
		if l.tooFull(l.remCap, l.unfixed) {
			return false
		}
	}
	for _, f := range flows {
		f.fixed = true
	}
	return true
}

// charges reports whether a flow at rate, its slowest link's capacity,
// counts on its links' loads and crossings: not at 0, and not where no
// link limits it. charge and atOwnBottlenecks count by this one rule, so
// that a link settleLocally finds not tight is one that solve's shortcut
// passes.
func charges(rate float64) bool { return rate != 0 && !math.IsInf(rate, 1) }

// slowest is the capacity of the slowest of links: +Inf where none limits.
func slowest(links []*link) float64 {
	c := math.Inf(1)
	for _, l := range links {
		c = min(c, l.capacity)
	}
	return c
}

// roomMargin is the share of a link's capacity that atOwnBottlenecks
// wants left over where flows share it: a million times the rounding of a
// sum of a thousand rates.
const roomMargin = 1e-7

// shareItem is a link queued at its share; it carries the link's id so
// that ordering the heap reads no link.
type shareItem struct {
	share float64
	id    int
	l     *link
}

// shareHeap is a min-heap on (share, link id).
type shareHeap struct{ items []shareItem }

func (h *shareHeap) less(i, j int) bool {
	a, b := &h.items[i], &h.items[j]
	return a.share < b.share || (a.share == b.share && a.id < b.id)
}

// init orders items into a heap in linear time, where a push each would
// take n log n.
func (h *shareHeap) init() {
	for i := len(h.items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *shareHeap) push(it shareItem) {
	h.items = append(h.items, it)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *shareHeap) pop() shareItem {
	top := h.items[0]
	n := len(h.items) - 1
	h.items[0] = h.items[n]
	h.items = h.items[:n]
	h.down(0)
	return top
}

// down sifts item i down until no child orders before it.
func (h *shareHeap) down(i int) {
	n := len(h.items)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
}
