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

// Cost returns the time of plan on a fabric with no contention: a send
// costs α + bytes·β of its path, a reduce or divide bytes·γ, a copy
// nothing, and a receive waits for its message. Lanes run in parallel,
// ordered by After. On an uncontended fabric this is what the simulator
// measures, and for the textbook algorithms it equals the formulas of
// REFERENCE.md.
func Cost(plan *Plan, m CostModel) (float64, error) {
	if err := checkShape(plan); err != nil {
		return 0, fmt.Errorf("ops: cost %v: %w", plan.Spec, err)
	}
	if plan.native {
		return 0, fmt.Errorf("ops: cost %v: %w: %w", plan.Spec, ErrUnsupported, errNativePlan)
	}
	plan, err := plan.Materialized()
	if err != nil {
		return 0, err
	}
	c := &costRun{plan: plan, m: m, size: float64(plan.DType.Size()), paths: map[[2]int][2]float64{}}
	return c.run()
}

type costRun struct {
	plan  *Plan
	m     CostModel
	size  float64
	paths map[[2]int][2]float64
	mail  map[msgKey][]float64
}

func (c *costRun) path(a, b int) (float64, float64, error) {
	k := [2]int{a, b}
	if v, ok := c.paths[k]; ok {
		return v[0], v[1], nil
	}
	alpha, beta, err := c.m.PathCost(a, b)
	if err != nil {
		return 0, 0, err
	}
	c.paths[k] = [2]float64{alpha, beta}
	return alpha, beta, nil
}

func (c *costRun) run() (float64, error) {
	p := c.plan
	c.mail = map[msgKey][]float64{}
	finish := make([][]float64, p.Ranks)
	next := make([][]int, p.Ranks)       // per rank, per lane: next step index
	laneAt := make([][]float64, p.Ranks) // per rank, per lane: when it is free
	for r := range p.Ranks {
		finish[r] = slices.Repeat([]float64{-1}, len(p.Steps[r]))
		next[r] = make([]int, p.Lanes)
		laneAt[r] = make([]float64, p.Lanes)
	}
	// Work list of ranks that may be able to progress, in FIFO order.
	queue := make([]int, 0, p.Ranks)
	queued := make([]bool, p.Ranks)
	for r := range p.Ranks {
		queue = append(queue, r)
		queued[r] = true
	}
	end := 0.0
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		queued[r] = false
		steps := p.Steps[r]
		for progress := true; progress; {
			progress = false
			for l := range p.Lanes {
				for {
					i := next[r][l]
					for i < len(steps) && steps[i].Lane != l {
						i++
					}
					next[r][l] = i
					if i == len(steps) {
						break
					}
					st := steps[i]
					start := laneAt[r][l]
					ready := true
					for _, a := range st.After {
						if finish[r][a] < 0 {
							ready = false
							break
						}
						start = max(start, finish[r][a])
					}
					if !ready {
						break
					}
					var done float64
					switch st.Kind {
					case StepSend:
						alpha, beta, err := c.path(r, st.Peer)
						if err != nil {
							return 0, fmt.Errorf("ops: cost %v: rank %d step %d: %w", p.Spec, r, i, err)
						}
						done = start + alpha + float64(st.Src.Len)*c.size*beta
						k := msgKey{r, st.Peer, st.Tag}
						c.mail[k] = append(c.mail[k], done)
						if !queued[st.Peer] {
							queue = append(queue, st.Peer)
							queued[st.Peer] = true
						}
					case StepRecv:
						k := msgKey{st.Peer, r, st.Tag}
						q := c.mail[k]
						if len(q) == 0 {
							ready = false
							break
						}
						done = max(start, q[0])
						c.mail[k] = q[1:]
					case StepReduce, StepDivide:
						g := c.m.ReduceCost(r)
						done = start
						if g > 0 && st.Dst.Len > 0 {
							done += float64(st.Dst.Len) * c.size * g
						}
					case StepCopy:
						done = start
					}
					if !ready {
						break
					}
					finish[r][i] = done
					laneAt[r][l] = done
					end = max(end, done)
					next[r][l] = i + 1
					progress = true
				}
			}
		}
	}
	for r := range p.Ranks {
		for l := range p.Lanes {
			if i := next[r][l]; i < len(p.Steps[r]) {
				return 0, fmt.Errorf("ops: cost %v: deadlock at rank %d step %d (%v); run Check for details", p.Spec, r, i, p.Steps[r][i])
			}
		}
	}
	if math.IsNaN(end) || math.IsInf(end, 0) {
		return 0, fmt.Errorf("ops: cost %v: not finite (%v)", p.Spec, end)
	}
	return end, nil
}

// Candidate is one algorithm considered by Select, with its cost or the
// reason it was not possible.
type Candidate struct {
	Algo string
	Cost float64 // seconds; meaningful when Err is nil
	Err  error
}

// Select compiles every algorithm that implements s.Op, costs each on m, and
// returns the cheapest plan (ties go to the earlier algorithm in
// Algorithms order) with every candidate considered.
func Select(s Spec, m CostModel) (*Plan, []Candidate, error) {
	var best *Plan
	bestCost := math.Inf(1)
	var cands []Candidate
	for _, name := range AlgorithmsFor(s.Op) {
		s.Algo = name
		plan, err := Compile(s)
		cand := Candidate{Algo: name, Err: err}
		if err == nil {
			cand.Cost, cand.Err = Cost(plan, m)
			if cand.Err == nil && cand.Cost < bestCost {
				best, bestCost = plan, cand.Cost
			}
		}
		cands = append(cands, cand)
	}
	if best == nil {
		return nil, cands, fmt.Errorf("ops: auto: no algorithm can run %v", s)
	}
	return best, cands, nil
}
