package ops

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"sync/atomic"
)

// builder accumulates a plan's steps. Algorithms call its methods rank by
// rank, looping over b.ranks(); each returns the index of the step it added
// within its rank, for After lists.
//
// A builder runs in one of three modes. It keeps every step (a plan in
// memory), counts them (sizing a plan too big to keep), or streams one
// rank's steps to yield as they are made, dropping other ranks' (a
// streamed plan's rank, pulled by the executor step by step).
type builder struct {
	p     *Plan
	mode  buildMode
	steps int // steps added so far, all ranks kept or counted
	limit int // modeKeep and modeCount: the most steps allowed
	only  int // modeStream: the rank streamed
	lane  int // modeStream: the lane streamed, or -1 for all of them
	n     int // modeStream: steps of that rank (and lane) so far
	// modeCount: ranks lo..hi-1 are counted, count[r-lo] steps so far.
	// Counters of other ranges run in parallel and add their steps to
	// total now and then, so all of them stop soon after the sum passes
	// the limit.
	count  []int
	lo, hi int
	total  *atomic.Int64
	sym    symmetryCheck // modeCount: whether the ranks follow rank 0
	// modeStream: steps are collected in buf and handed to emit a batch
	// at a time, which costs one switch to the consumer per batch.
	buf  []Step
	emit func([]Step) bool
	// laneCount is the most lanes a generator said it makes (madeLanes).
	laneCount int
	// keepLanes, when above 0, keeps lanes below it only (Refine): the
	// others are not made, or dropped as they are added.
	keepLanes int
	// dropped, when not nil, marks the ranks not kept (Refine of a plan
	// FoldRanks kept some ranks of): they are not made, or their steps
	// are dropped as they are added.
	dropped []bool
}

type buildMode uint8

const (
	modeKeep buildMode = iota
	modeCount
	modeStream
)

// countShare is how many steps a counter makes between reports to the
// shared total: often enough to stop a plan far over the limit early,
// rarely enough that counters on different cores seldom touch it.
const countShare = 1 << 12

// planTooLarge unwinds a generator that passed the builder's limit; Compile
// recovers it (and only it) and returns ErrTooLarge. Generators are plain
// loops with no error path per step, and this stops them at once instead
// of emitting millions of steps that would be thrown away. steps less one
// is what the error says the plan has at least: the count that passed the
// limit, what every rank's expected steps come to, or the limit itself
// where counters sharing a total passed it together.
type planTooLarge struct{ steps int }

// streamStopped unwinds a streaming generator whose consumer stopped
// pulling.
type streamStopped struct{}

// errStopped is what generate returns for a generator its consumer
// stopped.
var errStopped = errors.New("ops: plan generator stopped by its consumer")

// scratchTooLarge unwinds a generator whose scratch would pass the bytes
// a buffer may hold (or an int): Compile reports it, where its size would
// have wrapped to a small one. elements says how many were asked for.
type scratchTooLarge struct{ elements string }

// badStep unwinds a generator that made a step a streamed plan cannot
// hold (see builder.add); Compile reports it. Only a bug in an algorithm
// can cause it.
type badStep struct{ err error }

func newBuilder(spec Spec, inLen, outLen int) *builder {
	return &builder{p: &Plan{Spec: spec, InLen: inLen, OutLen: outLen, Lanes: 1, Steps: make([][]Step, spec.Ranks), switched: switchNone}, limit: MaxPlanSteps}
}

// lanes is the lanes of n a generator builds: all of them, or the one
// streamed. A generator of many lanes loops over them, so that streaming
// one lane does not make the others' steps only to drop them.
func (b *builder) lanes(n int) iter.Seq[int] {
	b.madeLanes(n)
	return func(yield func(int) bool) {
		for l := range n {
			if b.mode == modeStream && b.lane >= 0 && l != b.lane || b.keepLanes > 0 && l >= b.keepLanes {
				continue
			}
			if !yield(l) {
				return
			}
		}
	}
}

// madeLanes tells the builder that the generator makes n lanes, one
// channel's after another's (lanes does): a hint for the room a rank's
// steps will take (see add).
func (b *builder) madeLanes(n int) {
	if b.keepLanes > 0 {
		n = min(n, b.keepLanes)
	}
	b.laneCount = max(b.laneCount, n)
}

// ranks is the ranks a generator builds: all of them (but those dropped),
// or the one streamed.
func (b *builder) ranks() iter.Seq[int] {
	if b.mode == modeStream {
		return func(yield func(int) bool) { yield(b.only) }
	}
	lo, hi := 0, b.p.Ranks
	if b.mode == modeCount {
		lo, hi = b.lo, b.hi
	}
	return func(yield func(int) bool) {
		for r := lo; r < hi; r++ {
			if b.dropped != nil && b.dropped[r] {
				continue
			}
			if !yield(r) {
				return
			}
		}
	}
}

func (b *builder) add(r int, s Step) int {
	if b.dropped != nil && b.dropped[r] {
		return -1
	}
	if b.keepLanes > 0 {
		if s.Lane >= b.keepLanes {
			return -1
		}
		for _, x := range s.After {
			if x < 0 {
				panic(badStep{fmt.Errorf("rank %d: step %v waits on a step of a lane not kept", r, s)})
			}
		}
	}
	if s.Lane+1 > b.p.Lanes {
		b.p.Lanes = s.Lane + 1
	}
	if s.Kind.IsSwitch() {
		b.p.switched = switchSome
	}
	if b.mode == modeStream && b.lane >= 0 && len(s.After) > 0 {
		// A lane streamed alone cannot know the other lanes' step numbers.
		panic(badStep{fmt.Errorf("rank %d: step %v orders lanes with After, which only a plan held in memory can", r, s)})
	}
	switch b.mode {
	case modeCount:
		if r < b.lo || r >= b.hi {
			return -1
		}
		if b.steps++; b.steps%countShare == 0 {
			if sum := b.total.Add(countShare); sum > int64(b.limit) {
				// The limit, not the sum: the counters share the total, so
				// the sum one of them sees depends on their scheduling.
				panic(planTooLarge{b.limit + 1})
			}
		}
		i := b.count[r-b.lo]
		b.count[r-b.lo]++
		if b.sym.alive != 0 {
			b.sym.step(r, i, &s)
		}
		return i
	case modeStream:
		if r != b.only || (b.lane >= 0 && s.Lane != b.lane) {
			return -1
		}
		b.n++
		if b.buf = append(b.buf, s); len(b.buf) == cap(b.buf) {
			b.flush()
		}
		return b.n - 1
	}
	if b.steps++; b.steps > b.limit {
		panic(planTooLarge{b.steps})
	}
	if steps := b.p.Steps[r]; len(steps) == cap(steps) {
		// append grows a long slice by a quarter, copying each step about
		// four times on the way: double it instead. A generator of many
		// lanes makes them one after another (see madeLanes), its
		// channels alike: once a channel's lanes are made, make room for
		// the rest and an eighth more, not double (which near the end
		// would allocate, and clear, twice the plan).
		more := max(len(steps), 8)
		if s.Lane > 0 && b.laneCount > s.Lane && s.Lane >= b.laneCount/max(1, b.p.Channels) {
			more = len(steps) / s.Lane * (b.laneCount - s.Lane)
			more += more/8 + 8
		}
		b.p.Steps[r] = slices.Grow(steps, more)
	}
	b.p.Steps[r] = append(b.p.Steps[r], s)
	return len(b.p.Steps[r]) - 1
}

// flush hands the streamed steps collected so far to the consumer, which
// is done with them when emit returns: buf is then reused.
func (b *builder) flush() {
	if len(b.buf) > 0 && !b.emit(b.buf) {
		panic(streamStopped{})
	}
	b.buf = b.buf[:0]
}

// last is the index of rank r's latest step.
func (b *builder) last(r int) int {
	switch b.mode {
	case modeCount:
		if r < b.lo || r >= b.hi {
			return -1
		}
		return b.count[r-b.lo] - 1
	case modeStream:
		return b.n - 1
	}
	return len(b.p.Steps[r]) - 1
}

// expect refuses the plan at once if perRank steps on every rank would pass
// the limit: O(p²) algorithms call it so they fail fast at scale.
func (b *builder) expect(perRank int) {
	total := perRank * b.p.Ranks
	if b.mode != modeStream && total > b.limit {
		panic(planTooLarge{total + 1})
	}
}

// reserve sizes every rank's step list for n steps, so large plans are not
// copied again and again as they grow, and refuses a plan whose n steps a
// rank would pass the limit (expect).
func (b *builder) reserve(n int) {
	b.expect(n) // refuse before allocating it, or before counting them
	if b.mode != modeKeep {
		return
	}
	for r := range b.p.Steps {
		if cap(b.p.Steps[r]) < n {
			b.p.Steps[r] = make([]Step, 0, n)
		}
	}
}

// tmp makes sure Tmp holds at least k × n elements.
func (b *builder) tmp(k, n int) {
	if k < 0 || n < 0 {
		panic(badStep{fmt.Errorf("a scratch of %d × %d elements", k, n)})
	}
	if k > 0 && n > b.maxTmp()/k {
		panic(scratchTooLarge{fmt.Sprintf("%d × %d", k, n)})
	}
	b.p.TmpLen = max(b.p.TmpLen, k*n)
}

// tmpTo makes sure Tmp holds elements off to off+n.
func (b *builder) tmpTo(off, n int) {
	if off < 0 || n < 0 {
		panic(badStep{fmt.Errorf("a scratch of %d + %d elements", off, n)})
	}
	if off > b.maxTmp()-n {
		panic(scratchTooLarge{fmt.Sprintf("%d + %d", off, n)})
	}
	b.p.TmpLen = max(b.p.TmpLen, off+n)
}

// maxTmp is the most elements a buffer of the plan's type may hold.
func (b *builder) maxTmp() int { return math.MaxInt64 / max(1, b.p.DType.Size()) }

func (b *builder) send(r, peer int, src Ref, tag uint32) int {
	return b.add(r, Step{Kind: StepSend, Peer: peer, Src: src, Tag: tag})
}

func (b *builder) recv(r, peer int, dst Ref, tag uint32) int {
	return b.add(r, Step{Kind: StepRecv, Peer: peer, Dst: dst, Tag: tag})
}

// reduce adds dst = dst op src.
func (b *builder) reduce(r int, dst, src Ref) int {
	return b.add(r, Step{Kind: StepReduce, Dst: dst, Src: src})
}

// copy adds dst = src; a copy of a range onto itself is dropped.
func (b *builder) copy(r int, dst, src Ref) int {
	if dst == src || dst.Len == 0 {
		return b.last(r)
	}
	return b.add(r, Step{Kind: StepCopy, Dst: dst, Src: src})
}

// divide adds dst = dst / Ranks, the end of an average.
func (b *builder) divide(r int, dst Ref) int {
	return b.add(r, Step{Kind: StepDivide, Dst: dst})
}

// finishAvg divides dst when the plan averages.
func (b *builder) finishAvg(r int, dst Ref) {
	if isAvg(b.p.Spec) {
		b.divide(r, dst)
	}
}

// chunk splits n elements into parts nearly equal parts and returns part
// i's offset and length: the first n%parts parts get one extra element.
func chunk(n, parts, i int) (off, length int) {
	base, rem := n/parts, n%parts
	off = i*base + min(i, rem)
	length = base
	if i < rem {
		length++
	}
	return off, length
}

// ref is shorthand for a Ref.
func ref(b Buf, off, n int) Ref { return Ref{Buf: b, Off: off, Len: n} }

// mod is the non-negative remainder.
func mod(a, n int) int { return ((a % n) + n) % n }

// pof2 is the largest power of two <= n (n >= 1).
func pof2(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}
