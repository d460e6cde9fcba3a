package ops

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

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
	er, _ := m.(EdgeRouter)
	plans := make([]*Plan, len(cands))
	links := make([]linkBound, len(cands))
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
		cands[i].Cost, links[i], cands[i].Err = costWithLinks(plan, m, er)
		cands[i].Bound = false
		if cands[i].Err == nil {
			least = min(least, cands[i].Cost)
		}
	}
	if er != nil {
		least = boundLinks(s, m, er, cands, plans, links)
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
// marked as a Bound. links holds the bounds of the plans costed in full
// already.
func boundLinks(s Spec, m CostModel, er EdgeRouter, cands []Candidate, plans []*Plan, links []linkBound) float64 {
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
			if c.Cost, links[next], c.Err = costWithLinks(plans[next], m, er); c.Err != nil || c.Cost > least*(1+tieTolerance) {
				continue
			}
		}
		if links[next].err != nil {
			c.Err = links[next].err
			continue
		}
		c.Cost, c.Bound = max(c.Cost, links[next].seconds), false
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
