package ops

import (
	"fmt"
	"iter"
)

// Operation is one thing a lane of a rank does, as plain data: what a
// driver turns into calls on that lane's stream. It is a plan's step
// seen from its lane, with the ordering between lanes made explicit.
type Operation struct {
	Kind     StepKind
	Peer     int    // Send, Recv
	Tag      uint32 // Send, Recv
	Src, Dst Ref
	Lane     int
	// Index is the operation's position in its lane, from 0.
	Index int
	// Signals is set when operations of other lanes await this one: the
	// driver records, after it, something they can wait on, named Mark
	// (the step's index in its rank's program).
	Signals bool
	Mark    int
	// Awaits lists the marks of other lanes' operations that must finish
	// before this one starts (a held plan's After lists; order within a
	// lane needs no mark).
	Awaits []int
	// Protocol names how the message moves (the plan's; see Plan.Wire
	// for what it costs on a simulator). ChunkLen leaves room for a
	// protocol that pipelines one operation in chunks; every plan today
	// cuts its chunks into steps of their own, and leaves it 0.
	Protocol Protocol
	ChunkLen int
}

func (o *Operation) String() string {
	if o == nil {
		return "<nil>"
	}
	s := Step{Kind: o.Kind, Peer: o.Peer, Tag: o.Tag, Src: o.Src, Dst: o.Dst, Lane: o.Lane}.String()
	if len(o.Awaits) > 0 {
		s += fmt.Sprintf(" after marks %v", o.Awaits)
	}
	return s
}

// Cursor yields the operations of one lane of one rank of a plan, a few
// at a time: from memory for a held plan, made as they are asked for in a
// streamed one, so a driver holds a few operations per lane however long
// the plan. A Cursor is not safe for concurrent use. Close it when
// stopping before the end; one that has reached the end is closed.
type Cursor struct {
	plan       *Plan
	rank, lane int
	index      int // operations yielded
	// A held plan's lane: the rank's steps, the next to look at, and
	// which of them other lanes await (nil when none is). With several
	// lanes, order lists the lane's steps by index, so that a lane does
	// not read past every other lane's.
	steps  []Step
	order  []int32
	next   int
	marked []bool
	// A streamed plan's lane: batches from its generator, the current
	// one, and how far into it the cursor is.
	pull  func() ([]Step, bool)
	stop  func()
	batch []Step
	at    int
	done  bool
}

// Cursors returns a cursor for every lane of rank's program, after
// checking the rank's steps (a held plan may have been made or edited by
// hand: see ErrBadPlan).
func (p *Plan) Cursors(rank int) ([]*Cursor, error) {
	if err := checkPlanShape(p); err != nil {
		return nil, fmt.Errorf("ops: cursors: %w", err)
	}
	if p.native {
		return nil, fmt.Errorf("ops: cursors %v: %w", p.Spec, errNativePlan)
	}
	if rank < 0 || rank >= p.Ranks {
		return nil, fmt.Errorf("ops: cursors %v: rank %d out of range [0, %d)", p.Spec, rank, p.Ranks)
	}
	if err := checkRankShape(p, rank); err != nil {
		return nil, fmt.Errorf("ops: cursors %v: %w", p.Spec, err)
	}
	var marked []bool
	var orders [][]int32
	if !p.Streamed() {
		marked = awaited(p.Steps[rank])
		if p.Lanes > 1 {
			orders = laneOrders(p.Steps[rank], p.Lanes)
		}
	}
	out := make([]*Cursor, p.Lanes)
	for l := range out {
		c := &Cursor{plan: p, rank: rank, lane: l, marked: marked}
		if !p.Streamed() {
			c.steps = p.Steps[rank]
		}
		if orders != nil {
			c.order = orders[l]
		}
		out[l] = c
	}
	return out, nil
}

// laneOrders lists each lane's steps by index, in one backing array.
func laneOrders(steps []Step, lanes int) [][]int32 {
	counts := make([]int, lanes)
	for i := range steps {
		counts[steps[i].Lane]++
	}
	all := make([]int32, len(steps))
	out := make([][]int32, lanes)
	at := 0
	for l, n := range counts {
		out[l] = all[at : at : at+n]
		at += n
	}
	for i := range steps {
		l := steps[i].Lane
		out[l] = append(out[l], int32(i))
	}
	return out
}

// genBatch is how many steps a streamed lane's generator makes before
// handing them over: a switch to the generator per batch.
const genBatch = 64

// awaited marks the steps that a step of another lane lists in After, or
// returns nil when no step does.
func awaited(steps []Step) []bool {
	var marked []bool
	for _, s := range steps {
		for _, a := range s.After {
			if steps[a].Lane != s.Lane {
				if marked == nil {
					marked = make([]bool, len(steps))
				}
				marked[a] = true
			}
		}
	}
	return marked
}

// Rank and Lane say which lane of which rank the cursor walks; 0 for a
// nil Cursor.
func (c *Cursor) Rank() int {
	if c == nil {
		return 0
	}
	return c.rank
}

func (c *Cursor) Lane() int {
	if c == nil {
		return 0
	}
	return c.lane
}

// Next fills ops with the lane's next operations and returns how many it
// wrote: 0 at the end. A streamed plan's generator runs as a coroutine
// that Next switches to once per batch of steps. A Cursor that Plan.Cursors
// did not make walks no lane: it is at its end.
func (c *Cursor) Next(ops []Operation) int {
	if c == nil {
		return 0
	}
	if c.plan.Streamed() && c.pull == nil && !c.done {
		c.pull, c.stop = iter.Pull(c.plan.rankBatches(c.rank, c.lane, genBatch))
	}
	n := 0
	for n < len(ops) && !c.done {
		s, mark, ok := c.step()
		if !ok {
			c.Close()
			break
		}
		c.operation(&ops[n], s, mark)
		n++
	}
	return n
}

// Batches yields the rest of the lane in batches of up to n operations,
// each valid until the next is asked for, and closes the cursor. For a
// streamed plan not yet read with Next, the plan's generator runs inside
// the loop itself, without the coroutine Next switches to: the way for a
// driver that reads a lane on a goroutine of its own.
func (c *Cursor) Batches(n int) iter.Seq[[]Operation] {
	if c == nil {
		return func(func([]Operation) bool) {}
	}
	return func(yield func([]Operation) bool) {
		defer c.Close()
		buf := make([]Operation, max(n, 1))
		if c.plan.Streamed() && c.pull == nil && !c.done {
			for steps := range c.plan.rankBatches(c.rank, c.lane, len(buf)) {
				for i := range steps {
					c.operation(&buf[i], &steps[i], 0)
				}
				if !yield(buf[:len(steps)]) {
					return
				}
			}
			return
		}
		for k := c.Next(buf); k > 0; k = c.Next(buf) {
			if !yield(buf[:k]) {
				return
			}
		}
	}
}

// operation makes o the lane's next operation, step s (mark is its index
// in a held plan's rank).
func (c *Cursor) operation(o *Operation, s *Step, mark int) {
	*o = Operation{Kind: s.Kind, Peer: s.Peer, Tag: s.Tag, Src: s.Src, Dst: s.Dst, Lane: s.Lane, Index: c.index, Protocol: c.plan.Protocol}
	if c.marked != nil {
		if c.marked[mark] {
			o.Signals, o.Mark = true, mark
		}
		o.Awaits = c.crossLane(s)
	}
	c.index++
}

// step returns the lane's next step and, in a held plan, its index in the
// rank's program.
func (c *Cursor) step() (*Step, int, bool) {
	if c.order != nil {
		if c.next == len(c.order) {
			return nil, 0, false
		}
		i := int(c.order[c.next])
		c.next++
		return &c.steps[i], i, true
	}
	if c.pull == nil {
		for c.next < len(c.steps) {
			i := c.next
			c.next++
			if c.steps[i].Lane == c.lane {
				return &c.steps[i], i, true
			}
		}
		return nil, 0, false
	}
	if c.at == len(c.batch) {
		batch, ok := c.pull()
		if !ok {
			return nil, 0, false
		}
		c.batch, c.at = batch, 0
	}
	c.at++
	return &c.batch[c.at-1], c.index, true
}

// crossLane is s's After list without the steps of its own lane.
func (c *Cursor) crossLane(s *Step) []int {
	for i, a := range s.After {
		if c.steps[a].Lane == s.Lane {
			out := append([]int(nil), s.After[:i]...)
			for _, b := range s.After[i+1:] {
				if c.steps[b].Lane != s.Lane {
					out = append(out, b)
				}
			}
			return out
		}
	}
	return s.After
}

// Close releases a streamed lane's generator. Next then reports the end.
func (c *Cursor) Close() {
	if c == nil {
		return
	}
	c.done = true
	if c.stop != nil {
		c.stop()
		c.stop, c.pull, c.batch = nil, nil, nil
	}
}

// laneReader reads a cursor a few operations ahead, for the passes that
// walk every lane of every rank at once (Cost, Check).
type laneReader struct {
	cur  *Cursor
	buf  []Operation
	head int
}

// readAhead is how many operations a laneReader reads at a time.
const readAhead = 8

func newLaneReaders(cursors []*Cursor) []laneReader {
	out := make([]laneReader, len(cursors))
	for i, c := range cursors {
		out[i] = laneReader{cur: c, buf: make([]Operation, 0, readAhead)}
	}
	return out
}

// peek is the lane's next operation, or nil at its end.
func (l *laneReader) peek() *Operation {
	if l.head == len(l.buf) {
		l.buf = l.buf[:cap(l.buf)]
		l.buf, l.head = l.buf[:l.cur.Next(l.buf)], 0
		if len(l.buf) == 0 {
			return nil
		}
	}
	return &l.buf[l.head]
}

// advance moves past the operation peek returned.
func (l *laneReader) advance() { l.head++ }

func (l *laneReader) close() {
	if l.cur != nil {
		l.cur.Close()
	}
}
