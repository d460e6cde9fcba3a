package ops

import (
	"fmt"
	"math"
	"slices"
)

// CostModel gives the α-β-γ parameters of a fabric, by rank. A
// *topology.Topology satisfies it (from its routes), so ops need not import
// it.
type CostModel interface {
	// PathCost returns the latency α (seconds) and the inverse bandwidth β
	// (seconds per byte) of the route from rank src to rank dst.
	PathCost(src, dst int) (alpha, beta float64, err error)
	// ReduceCost returns γ, the seconds per byte of a reduction on rank.
	ReduceCost(rank int) float64
}

// PathClasser is an optional interface of a CostModel that says the class
// of the path between two ranks (PathNVLink, PathPCI or PathNet), which a
// plan's Wire prices. Without it such a plan's messages are priced as
// NVLink ones.
type PathClasser interface {
	PathClass(src, dst int) (int, error)
}

// Cost returns the time of plan on a fabric with no contention: a send
// costs α + bytes·β of its path, a reduce or divide bytes·γ, a copy
// nothing, and a receive waits for its message. A switch step costs
// α + bytes·β of its way through the switch (SwitchCoster; a model
// without it cannot price such a plan): β is the narrowest of every link
// it crosses, and of the switch's reduction unit for a switch-reduce. Lanes run in parallel,
// ordered by After, each from the plan's Launch. A plan with a Wire runs
// as Wire says: its efficiency divides the bytes, its rate caps the
// bandwidth, its latency, by the path's class, replaces α and delays
// only the message, not its sender, and its reductions are free. A switch
// step under a Wire is priced as an NVLink message, but its rank waits
// for it to land (it reads or writes its own memory) unless the lane's
// next step is another switch reduction or multicast, which goes on
// without waiting, as the simulator runs them. A network collective
// (StepNetAllReduce, …) starts when the last member of its group reaches
// it. On an uncontended fabric this is what the simulator measures, and
// for the textbook algorithms it equals the formulas of REFERENCE.md. It
// reads each lane through a Cursor, so a streamed plan is costed in
// memory that grows with its ranks, as it runs.
func Cost(plan *Plan, m CostModel) (float64, error) {
	if err := costable(plan, m); err != nil {
		return 0, err
	}
	return costPlan(plan, m, nil)
}

// costable says why Cost cannot cost plan on m, if it cannot.
func costable(plan *Plan, m CostModel) error {
	switch {
	case plan == nil:
		return fmt.Errorf("ops: cost: %w: nil plan", ErrBadPlan)
	case m == nil:
		return fmt.Errorf("ops: cost %v: no cost model", plan.Spec)
	case plan.native:
		return fmt.Errorf("ops: cost %v: %w: %w", plan.Spec, ErrUnsupported, errNativePlan)
	}
	if err := plan.validate(); err != nil {
		return fmt.Errorf("ops: cost %v: %w", plan.Spec, err)
	}
	return nil
}

// costPlan is Cost after its checks, adding each send's bytes to load
// as it goes when load is not nil.
func costPlan(plan *Plan, m CostModel, load *linkLoad) (float64, error) {
	c := &costRun{plan: plan, m: m, size: float64(plan.DType.Size()), load: load,
		paths: make([]*[pathSlots]pathSlot, plan.Ranks), mail: make([]map[uint64][]float64, plan.Ranks)}
	defer c.close()
	return c.run()
}

// costLane is one lane of one rank while Cost runs, and when it is next
// free.
type costLane struct {
	laneReader
	at float64
	// landing is when the switch steps the lane went on from without
	// waiting for them to land have all landed (pipelinable).
	landing float64
}

type costRun struct {
	plan  *Plan
	m     CostModel
	sw    map[switchKey]pathSlot // switch steps' α and β, by rank and kind
	size  float64
	paths []*[pathSlots]pathSlot // per sender: its recent paths, by a hash of the receiver
	mail  []map[uint64][]float64 // per receiver: arrival times, by sender and tag
	lanes [][]costLane           // per rank, per lane
	marks []map[int]float64      // per rank: when each awaited step finished
	// nets are the network collectives' α and β, by group; meetings
	// pair their steps.
	nets     map[int]pathSlot
	meetings netMeetings[netMeeting]
	// load, when not nil, sums the bytes each link carries (LinkBound),
	// so that Select reads a plan once for both.
	load *linkLoad
}

func (c *costRun) close() {
	for _, ls := range c.lanes {
		for _, l := range ls {
			l.close()
		}
	}
}

// pathSlot is a path's α and β, in a sender's small cache: most plans send
// to a few peers many times, and a direct one to every peer once, which a
// table of every pair would hold for nothing.
type pathSlot struct {
	peer        int
	alpha, beta float64
}

const pathSlots = 8

func (c *costRun) path(a, b int) (float64, float64, error) {
	alpha, beta, err := c.rawPath(a, b)
	if err != nil || c.plan.Wire == nil {
		return alpha, beta, err
	}
	class := PathNVLink
	if pc, ok := c.m.(PathClasser); ok {
		if class, err = pc.PathClass(a, b); err != nil {
			return 0, 0, err
		}
	}
	if class < 0 || class >= NumPathClasses {
		return 0, 0, fmt.Errorf("path class %d of %d -> %d is not one of the %d classes", class, a, b, NumPathClasses)
	}
	alpha, beta = c.plan.Wire.moves(class, alpha, beta)
	return alpha, beta, nil
}

// rawPath is a's path to b as the model prices it, remembered.
func (c *costRun) rawPath(a, b int) (float64, float64, error) {
	if c.paths[a] == nil {
		c.paths[a] = new([pathSlots]pathSlot)
		for i := range c.paths[a] {
			c.paths[a][i].peer = -1
		}
	}
	slot := &c.paths[a][uint(b)%pathSlots]
	if slot.peer == b {
		return slot.alpha, slot.beta, nil
	}
	alpha, beta, err := c.m.PathCost(a, b)
	if err != nil {
		return 0, 0, err
	}
	*slot = pathSlot{b, alpha, beta}
	return alpha, beta, nil
}

// mailKey names a receiver's messages from one sender with one tag.
func mailKey(from int, tag uint32) uint64 { return uint64(from)<<32 | uint64(tag) }

func (c *costRun) run() (float64, error) {
	p := c.plan
	c.lanes = make([][]costLane, p.Ranks)
	c.marks = make([]map[int]float64, p.Ranks)
	for r := range p.Ranks {
		cursors, err := p.Cursors(r)
		if err != nil {
			return 0, err
		}
		c.lanes[r] = make([]costLane, len(cursors))
		for l, lr := range newLaneReaders(cursors) {
			c.lanes[r][l].laneReader, c.lanes[r][l].at = lr, p.Launch
		}
	}
	// Work list of ranks that may be able to progress, in FIFO order.
	queue := make([]int, 0, p.Ranks)
	queued := make([]bool, p.Ranks)
	for r := range p.Ranks {
		queue = append(queue, r)
		queued[r] = true
	}
	wake := func(r int) {
		if !queued[r] {
			queue = append(queue, r)
			queued[r] = true
		}
	}
	end := p.Launch
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		queued[r] = false
		for progress := true; progress; {
			progress = false
			for l := range c.lanes[r] {
				lane := &c.lanes[r][l]
				for {
					op := lane.peek()
					if op == nil {
						break
					}
					at := lane.at
					if !pipelinable(op.Kind) {
						at = max(at, lane.landing)
					}
					done, ready, err := c.try(r, at, op, wake)
					if err != nil {
						return 0, fmt.Errorf("ops: cost %v: rank %d lane %d step %d: %w", p.Spec, r, l, op.Index, err)
					}
					if !ready {
						break
					}
					if op.Signals {
						if c.marks[r] == nil {
							c.marks[r] = map[int]float64{}
						}
						c.marks[r][op.Mark] = done
						wake(r)
					}
					lane.at = done
					end = max(end, done)
					lane.advance()
					if p.Wire != nil && pipelinable(op.Kind) && !op.Signals {
						if next := lane.peek(); next != nil && pipelinable(next.Kind) && len(next.Awaits) == 0 {
							// The next switch step goes on without waiting
							// for this one to land.
							alpha, _, _ := c.switchPath(r, op.Kind == StepSwitchReduce)
							lane.at, lane.landing = done-alpha, max(lane.landing, done)
						}
					}
					progress = true
				}
			}
		}
	}
	for r, ls := range c.lanes {
		for l := range ls {
			if op := ls[l].peek(); op != nil {
				return 0, fmt.Errorf("ops: cost %v: deadlock at rank %d lane %d step %d (%v); run Check for details", p.Spec, r, l, op.Index, op)
			}
		}
	}
	if math.IsNaN(end) || math.IsInf(end, 0) {
		return 0, fmt.Errorf("ops: cost %v: %w (%v)", p.Spec, ErrCostNotFinite, end)
	}
	return end, nil
}

// try runs op of rank r, on a lane free from at, if it can run now, and
// returns when it finishes.
func (c *costRun) try(r int, at float64, op *Operation, wake func(int)) (done float64, ready bool, err error) {
	start := at
	for _, a := range op.Awaits {
		t, ok := c.marks[r][a]
		if !ok {
			return 0, false, nil
		}
		start = max(start, t)
	}
	took, err := c.own(r, op)
	if err != nil {
		return 0, false, err
	}
	done = start + took
	switch op.Kind {
	case StepNetAllReduce, StepNetAllGather, StepNetReduceScatter:
		var met bool
		if done, met = c.meetNet(r, start, took, op, wake); !met {
			return 0, false, nil
		}
	case StepSend:
		if c.load != nil {
			if err := c.load.add(r, op.Peer, float64(op.Src.Len)*c.size); err != nil {
				return 0, false, err
			}
		}
		lands := done
		if c.plan.Wire != nil {
			// It lands its latency after its bytes leave; the path is
			// cached by own.
			alpha, _, _ := c.path(r, op.Peer)
			lands += alpha
		}
		if c.mail[op.Peer] == nil {
			c.mail[op.Peer] = map[uint64][]float64{}
		}
		k := mailKey(r, op.Tag)
		c.mail[op.Peer][k] = append(c.mail[op.Peer][k], lands)
		wake(op.Peer)
	case StepRecv:
		k := mailKey(op.Peer, op.Tag)
		q := c.mail[r][k]
		if len(q) == 0 {
			return 0, false, nil
		}
		done = max(start, q[0])
		if len(q) == 1 {
			delete(c.mail[r], k)
		} else {
			c.mail[r][k] = q[1:]
		}
	}
	return done, true, nil
}

// pipelinable reports whether steps of kind k, under a Wire, go on from
// one to the next without waiting to land, as the simulator runs a run of
// them (sim's switch reductions and multicasts): NCCL's kernels keep
// several steps in flight.
func pipelinable(k StepKind) bool { return k == StepSwitchReduce || k == StepMulticast }

// switchCoster is the cost model as a SwitchCoster, which prices switch
// steps, or why it is not one.
func (c *costRun) switchCoster() (SwitchCoster, error) {
	sc, ok := c.m.(SwitchCoster)
	if !ok {
		return nil, fmt.Errorf("%w: the cost model (%T) cannot price switch steps: it does not implement ops.SwitchCoster", ErrUnsupported, c.m)
	}
	return sc, nil
}

// switchKey names a rank's switch steps of one kind: their way through
// the switch is the same every time.
type switchKey struct {
	rank   int
	reduce bool
}

// switchPath is rank r's way through its group's switch, as the model
// prices it and the plan's Wire moves it.
func (c *costRun) switchPath(r int, reduce bool) (float64, float64, error) {
	k := switchKey{r, reduce}
	if ps, ok := c.sw[k]; ok {
		return ps.alpha, ps.beta, nil
	}
	sc, err := c.switchCoster()
	if err != nil {
		return 0, 0, err
	}
	first, n := c.plan.Group(r)
	alpha, beta, err := sc.SwitchCost(r, first, n, reduce)
	if err != nil {
		return 0, 0, err
	}
	if w := c.plan.Wire; w != nil {
		alpha, beta = w.moves(PathNVLink, alpha, beta)
	}
	if c.sw == nil {
		c.sw = map[switchKey]pathSlot{}
	}
	c.sw[k] = pathSlot{alpha: alpha, beta: beta}
	return alpha, beta, nil
}

// own is the time op of rank r takes by itself, waiting for nothing: what
// try adds to its start, and what costBound sums.
func (c *costRun) own(r int, op *Operation) (float64, error) {
	switch op.Kind {
	case StepSend:
		alpha, beta, err := c.path(r, op.Peer)
		if err != nil {
			return 0, err
		}
		took := float64(op.Src.Len) * c.size * beta
		if c.plan.Wire == nil {
			took += alpha
		}
		return took, nil
	case StepReduce, StepDivide:
		if g := c.m.ReduceCost(r); g > 0 && op.Dst.Len > 0 && c.plan.Wire == nil {
			return float64(op.Dst.Len) * c.size * g, nil
		}
	case StepSwitchReduce, StepMulticast:
		alpha, beta, err := c.switchPath(r, op.Kind == StepSwitchReduce)
		if err != nil {
			return 0, err
		}
		return alpha + float64(op.Dst.Len)*c.size*beta, nil
	case StepNetAllReduce, StepNetAllGather, StepNetReduceScatter:
		alpha, beta, err := c.netPath(r)
		if err != nil {
			return 0, err
		}
		// The larger side crosses the narrowest link: an all-gather's
		// result, a reduce-scatter's input.
		return alpha + float64(max(op.Src.Len, op.Dst.Len))*c.size*beta, nil
	}
	return 0, nil
}

// netPath is the way through the network's switch of rank r's group's
// collectives, as the model prices it and the plan's Wire moves it (as
// a network message).
func (c *costRun) netPath(r int) (float64, float64, error) {
	first, stride, n := c.plan.NetGroup(r)
	if ps, ok := c.nets[first]; ok {
		return ps.alpha, ps.beta, nil
	}
	sc, err := c.switchCoster()
	if err != nil {
		return 0, 0, err
	}
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = first + i*stride
	}
	alpha, beta, err := sc.NetAllReduceCost(ranks)
	if err != nil {
		return 0, 0, err
	}
	if w := c.plan.Wire; w != nil {
		alpha, beta = w.moves(PathNet, alpha, beta)
	}
	if c.nets == nil {
		c.nets = map[int]pathSlot{}
	}
	c.nets[first] = pathSlot{alpha: alpha, beta: beta}
	return alpha, beta, nil
}

// netMeeting is one network collective while Cost runs: when each member
// reached it (NaN until it does), and when it finishes once all have.
type netMeeting struct {
	start   []float64
	arrived int
	done    float64
}

// meetNet records that rank r reached its network collective op at
// start, and returns when it finishes, once every member has reached it.
func (c *costRun) meetNet(r int, start, took float64, op *Operation, wake func(int)) (float64, bool) {
	first, stride, n := c.plan.NetGroup(r)
	m := c.meetings.at(first, r, op.Tag, func() *netMeeting {
		return &netMeeting{start: slices.Repeat([]float64{math.NaN()}, n), done: math.NaN()}
	})
	if math.IsNaN(m.done) {
		if me := (r - first) / stride; math.IsNaN(m.start[me]) {
			m.start[me] = start
			m.arrived++
		}
		if m.arrived < n {
			return 0, false
		}
		m.done = slices.Max(m.start) + took
		for i := range n {
			wake(first + i*stride)
		}
	}
	c.meetings.leave(r, op.Tag)
	return m.done, true
}
