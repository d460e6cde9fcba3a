package ops

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
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

// EdgeRouter is an optional interface of a CostModel: the directed links
// (edges) a message from rank src to rank dst crosses, and each one's
// bandwidth in bytes per second. A *topology.Topology satisfies it. With
// it Select also prices each plan by its busiest link (LinkBound), which
// Cost, blind to contention, does not see.
type EdgeRouter interface {
	RouteEdges(src, dst int) ([]int, error)
	EdgeBW(edge int) float64
}

// LinkBound is a lower bound of the time plan takes on a fabric whose
// routes r gives, whatever the order its messages go in: the bytes its
// sends put on its busiest link over that link's bandwidth. Where flows
// share links (the uplinks of an oversubscribed fat-tree, a ring of GPUs
// under rhd) it exceeds Cost, which prices each message as if its path
// were its own. Only sends count, each with the bytes it carries (a
// Wire's efficiency, which would add to them, is left out): switch and
// network steps add nothing, so the bound stays a bound.
func LinkBound(plan *Plan, r EdgeRouter) (float64, error) {
	switch {
	case plan == nil:
		return 0, fmt.Errorf("ops: link bound: %w: nil plan", ErrBadPlan)
	case r == nil:
		return 0, fmt.Errorf("ops: link bound %v: no routes", plan.Spec)
	}
	if err := plan.validate(); err != nil {
		return 0, fmt.Errorf("ops: link bound %v: %w", plan.Spec, err)
	}
	size := float64(plan.DType.Size())
	var bytes []float64 // by edge
	type route struct {
		peer  int
		edges []int
	}
	var recent []route // a sender's last few peers: most plans send to few, many times
	for rank := range plan.Ranks {
		recent = recent[:0]
		for st := range plan.RankSteps(rank) {
			if st.Kind != StepSend || st.Src.Len == 0 {
				continue
			}
			i := slices.IndexFunc(recent, func(rt route) bool { return rt.peer == st.Peer })
			if i < 0 {
				edges, err := r.RouteEdges(rank, st.Peer)
				if err != nil {
					return 0, fmt.Errorf("ops: link bound %v: rank %d to %d: %w", plan.Spec, rank, st.Peer, err)
				}
				if len(recent) == pathSlots {
					recent = recent[1:]
				}
				recent, i = append(recent, route{st.Peer, edges}), len(recent)
			}
			for _, e := range recent[i].edges {
				if e < 0 {
					return 0, fmt.Errorf("ops: link bound %v: rank %d to %d: the router gave edge %d", plan.Spec, rank, st.Peer, e)
				}
				if e >= len(bytes) {
					bytes = append(bytes, make([]float64, e+1-len(bytes))...)
				}
				bytes[e] += float64(st.Src.Len) * size
			}
		}
	}
	most := 0.0
	for e, b := range bytes {
		if b > 0 {
			most = max(most, b/r.EdgeBW(e))
		}
	}
	if math.IsInf(most, 0) || math.IsNaN(most) {
		return 0, fmt.Errorf("ops: link bound %v: %w: a link too slow for its bytes", plan.Spec, ErrCostNotFinite)
	}
	return most, nil
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
	switch {
	case plan == nil:
		return 0, fmt.Errorf("ops: cost: %w: nil plan", ErrBadPlan)
	case m == nil:
		return 0, fmt.Errorf("ops: cost %v: no cost model", plan.Spec)
	}
	if plan.native {
		return 0, fmt.Errorf("ops: cost %v: %w: %w", plan.Spec, ErrUnsupported, errNativePlan)
	}
	if err := plan.validate(); err != nil {
		return 0, fmt.Errorf("ops: cost %v: %w", plan.Spec, err)
	}
	c := &costRun{plan: plan, m: m, size: float64(plan.DType.Size()),
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
	if !(alpha >= 0) || !(beta >= 0) {
		// A time below zero or no number made every cost 0 or NaN, and
		// auto chose by it.
		return 0, 0, fmt.Errorf("ops: cost model: the path from rank %d to %d costs α %v s and β %v s/byte: want 0 or more", a, b, alpha, beta)
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

// tieTolerance is the relative margin within which Select takes two
// costs as equal.
const tieTolerance = 1e-9

// Candidate is one algorithm considered by Select, with its cost or the
// reason it was not possible.
type Candidate struct {
	Algo string
	// Cost is in seconds, meaningful when Err is nil: Cost's, or where
	// the model names its routes (EdgeRouter) the larger of that and the
	// plan's LinkBound.
	Cost float64
	// Bound says that Cost is only a lower bound of the plan's cost: it
	// already exceeded the cheapest plan's cost, so the plan was not
	// costed in full (its α-β cost, or that and its LinkBound).
	Bound bool
	Err   error
}

// Select compiles every algorithm of commsim's own that implements s.Op
// (not those that run like NCCL's: see IsNCCL), costs each on m, and
// returns the cheapest plan with every candidate considered. Where m
// names its routes (EdgeRouter), a plan costs the larger of Cost, which
// sees no contention, and its busiest link's LinkBound: on an
// oversubscribed fat-tree or a ring of GPUs, rhd's exchanges share links
// that ring's messages have each to themselves, and α-β alone prices
// them alike. Costs within a relative tieTolerance of the cheapest are
// ties, and ties go to the earliest algorithm in Algorithms order: the
// same α-β terms summed in another order differ in the last bits.
//
// Each candidate is bounded from below in one pass over its steps
// (costBound), and costed in full only while its bound could still be
// within the ties. The candidates are taken fewest steps first (as many
// as rank 0's times the ranks), and are first bounded by rank 0's steps,
// made alone, then made whole only if that bound is within the ties; a
// bound stops reading as soon as it passes the cheapest full cost so far:
// at thousands of ranks, ring and direct take millions of steps to make
// (and direct a route for every pair) and seldom win. The choice is the
// one every bound read whole would give: a plan within the ties of the
// cheapest has its bounds within them when they are read.
func Select(s Spec, m CostModel) (*Plan, []Candidate, error) {
	if m == nil {
		return nil, nil, fmt.Errorf("ops: select for %v: no cost model", s)
	}
	var cands []Candidate
	var order, estimate []int
	for _, name := range AlgorithmsFor(s.Op) {
		if IsNCCL(name) {
			continue
		}
		s.Algo = name
		n, _ := rankZero(s)
		order, estimate = append(order, len(cands)), append(estimate, n)
		cands = append(cands, Candidate{Algo: name, Bound: true})
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(estimate[a], estimate[b]) })
	plans := make([]*Plan, len(cands))
	least := math.Inf(1)
	for _, i := range order {
		s.Algo = cands[i].Algo
		enough := least * (1 + tieTolerance)
		if !math.IsInf(least, 1) {
			// Rank 0's steps alone bound the plan: one past the ties is
			// never made whole (ring and direct take millions of steps to
			// count at thousands of ranks). They are made again here, so
			// that one candidate's are held at a time.
			if _, first := rankZero(s); first != nil {
				if bound, err := rankBound(s, first, m); err == nil && bound > enough {
					cands[i].Cost = bound
					continue
				}
			}
		}
		plan, err := Compile(s)
		if err != nil {
			cands[i].Err = err
			continue
		}
		plans[i] = plan
		bound, err := costBound(plan, m, enough)
		cands[i].Cost, cands[i].Err = bound, err
		if err != nil || bound > enough {
			continue
		}
		cands[i].Cost, cands[i].Err = Cost(plan, m)
		cands[i].Bound = false
		if cands[i].Err == nil {
			least = min(least, cands[i].Cost)
		}
	}
	if er, ok := m.(EdgeRouter); ok {
		least = boundLinks(s, m, er, cands, plans)
	}
	for i, c := range cands {
		if c.Err == nil && !c.Bound && c.Cost <= least*(1+tieTolerance) {
			return plans[i], cands, nil
		}
	}
	return nil, cands, noneRuns(s, cands)
}

// boundLinks raises the candidates' costs to their busiest link's
// LinkBound, cheapest first, until the next one's cost without it is past
// the least cost with it, and returns that least. Every cost so far is a
// lower bound of the cost with links, so the plans it leaves are beaten
// whatever their links: on a fabric where no flows share a link it bounds
// the α-β winner alone. A candidate pruned before that could now win is
// made whole and costed. Those it does not reach keep the cost they had,
// marked as a Bound.
func boundLinks(s Spec, m CostModel, er EdgeRouter, cands []Candidate, plans []*Plan) float64 {
	least := math.Inf(1)
	done := make([]bool, len(cands))
	for {
		next := -1
		for i, c := range cands {
			if c.Err == nil && !done[i] && (next < 0 || c.Cost < cands[next].Cost) {
				next = i
			}
		}
		if next < 0 || cands[next].Cost > least*(1+tieTolerance) {
			break
		}
		c := &cands[next]
		done[next] = true
		if c.Bound {
			if plans[next] == nil {
				s.Algo = c.Algo
				if plans[next], c.Err = Compile(s); c.Err != nil {
					continue
				}
			}
			if c.Cost, c.Err = Cost(plans[next], m); c.Err != nil || c.Cost > least*(1+tieTolerance) {
				continue
			}
		}
		links, err := LinkBound(plans[next], er)
		if err != nil {
			c.Err = err
			continue
		}
		c.Cost, c.Bound = max(c.Cost, links), false
		least = min(least, c.Cost)
	}
	for i := range cands {
		if !done[i] {
			cands[i].Bound = true
		}
	}
	return least
}

// ErrCostNotFinite is wrapped by the error of a plan whose cost on the
// model is not a finite time: a rate so small, or a latency so large,
// that the sum overflows. The plan may well run, and fail on the
// simulator's horizon instead.
var ErrCostNotFinite = errors.New("cost not finite")

// noneRuns says why Select found no plan: that the costs of the plans
// made are not finite (wrapping ErrCostNotFinite), and why the others
// could not be made or costed.
func noneRuns(s Spec, cands []Candidate) error {
	s.Algo = "auto"
	var infinite, why []string
	for _, c := range cands {
		switch {
		case errors.Is(c.Err, ErrCostNotFinite):
			infinite = append(infinite, c.Algo)
		case c.Err != nil:
			why = append(why, c.Algo+": "+c.Err.Error())
		}
	}
	if len(infinite) == 0 {
		return fmt.Errorf("ops: %v: no algorithm can run it: %s", s, strings.Join(why, "; "))
	}
	others := ""
	if len(why) > 0 {
		others = "; and " + strings.Join(why, "; ")
	}
	return fmt.Errorf("ops: %v: no plan's cost (%s) is a finite time on this fabric: a rate too small, or a latency too large, for the size%s: %w",
		s, strings.Join(infinite, ", "), others, ErrCostNotFinite)
}

// rankZero is rank 0's steps in s's plan, made alone, and how many there
// are times the ranks: what the plan's size would be if every rank were
// rank 0. steps is nil when rank 0 has too many to keep or s cannot be
// made (Compile then says why).
func rankZero(s Spec) (estimate int, steps []Step) {
	alg, _ := algorithmNamed(s.Algo)
	gen := alg.gens[s.Op]
	if s.Validate() != nil || gen == nil {
		return math.MaxInt, nil
	}
	in, out := s.BufferLens()
	n0, steps, ok := rankAlone(s, gen, in, out, 0, maxMirroredSteps)
	if !ok {
		return math.MaxInt, nil
	}
	return n0 * s.Ranks, steps
}

// rankBound is costBound's bound read from rank 0's steps alone (the
// time its busiest lane takes by itself), which bounds the plan's cost
// from below as costBound's does, before the plan is made. commsim's own
// plans, the only ones Select makes, have no launch latency.
func rankBound(s Spec, steps []Step, m CostModel) (float64, error) {
	c := &costRun{plan: &Plan{Spec: s, Lanes: 1}, m: m, size: float64(s.DType.Size()), paths: make([]*[pathSlots]pathSlot, s.Ranks)}
	var lanes []float64
	for _, st := range steps {
		took, err := c.own(0, &Operation{Kind: st.Kind, Peer: st.Peer, Src: st.Src, Dst: st.Dst, Lane: st.Lane})
		if err != nil {
			return 0, err
		}
		if st.Lane >= len(lanes) {
			lanes = append(lanes, make([]float64, st.Lane+1-len(lanes))...)
		}
		lanes[st.Lane] += took
	}
	return slices.Max(append(lanes, 0)), nil
}

// costBound is a lower bound of Cost(plan, m), read in one pass and in
// memory of a lane's read-ahead: a lane's steps run one after the other
// from the plan's Launch, each taking at least its own part of Cost's
// price (a send its α and bytes·β, or only its bytes under a Wire; a
// reduction its bytes·γ; a switch step its way), whatever it waits for.
// It stops reading once the bound passes enough, and returns what it has.
func costBound(plan *Plan, m CostModel, enough float64) (float64, error) {
	if plan != nil && plan.native {
		return 0, fmt.Errorf("ops: cost %v: %w: %w", plan.Spec, ErrUnsupported, errNativePlan)
	}
	if err := plan.validate(); err != nil {
		return 0, fmt.Errorf("ops: cost %v: %w", plan.Spec, err)
	}
	c := &costRun{plan: plan, m: m, size: float64(plan.DType.Size()), paths: make([]*[pathSlots]pathSlot, plan.Ranks)}
	most := plan.Launch
	for r := range plan.Ranks {
		cursors, err := plan.Cursors(r)
		if err != nil {
			return 0, err
		}
		lanes := newLaneReaders(cursors)
		for i, lane := range lanes {
			at := plan.Launch
			for op := lane.peek(); op != nil && max(most, at) <= enough; op = lane.peek() {
				took, err := c.own(r, op)
				if err != nil {
					for _, l := range lanes[i:] {
						l.close()
					}
					return 0, fmt.Errorf("ops: cost %v: rank %d step %d: %w", plan.Spec, r, op.Index, err)
				}
				at += took
				lane.advance()
			}
			lane.close()
			most = max(most, at)
		}
		if most > enough {
			return most, nil
		}
		c.paths[r] = nil // a sender's paths are not asked again
	}
	return most, nil
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
