package ops

import (
	"fmt"
	"math"
	"slices"
)

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
	load := newLinkLoad(r, plan.Ranks)
	for rank := range plan.Ranks {
		for st := range plan.RankSteps(rank) {
			if st.Kind == StepSend {
				if err := load.add(rank, st.Peer, float64(st.Src.Len)*size); err != nil {
					return 0, fmt.Errorf("ops: link bound %v: %w", plan.Spec, err)
				}
			}
		}
	}
	return load.bound(plan.Spec)
}

// linkLoad sums the bytes a plan's sends put on each directed link, for
// LinkBound, or for Select as Cost runs the plan (costPlan): one pass
// over its steps for both.
type linkLoad struct {
	r      EdgeRouter
	bytes  []float64 // by edge
	recent [][]route // per sender: its last few peers' routes; most plans send to few, many times
}

type route struct {
	peer  int
	edges []int
}

func newLinkLoad(r EdgeRouter, ranks int) *linkLoad {
	return &linkLoad{r: r, recent: make([][]route, ranks)}
}

// add puts bytes sent from rank to peer on their route's links.
func (l *linkLoad) add(rank, peer int, bytes float64) error {
	if bytes == 0 {
		return nil
	}
	recent := l.recent[rank]
	i := slices.IndexFunc(recent, func(rt route) bool { return rt.peer == peer })
	if i < 0 {
		edges, err := l.r.RouteEdges(rank, peer)
		if err != nil {
			return fmt.Errorf("rank %d to %d: %w", rank, peer, err)
		}
		if len(recent) == pathSlots {
			recent = recent[1:]
		}
		recent, i = append(recent, route{peer, edges}), len(recent)
		l.recent[rank] = recent
	}
	for _, e := range recent[i].edges {
		if e >= len(l.bytes) {
			l.bytes = append(l.bytes, make([]float64, e+1-len(l.bytes))...)
		}
		l.bytes[e] += bytes
	}
	return nil
}

// bound is the busiest link's bytes over its bandwidth.
func (l *linkLoad) bound(s Spec) (float64, error) {
	most := 0.0
	for e, b := range l.bytes {
		if b > 0 {
			most = max(most, b/l.r.EdgeBW(e))
		}
	}
	if math.IsInf(most, 0) || math.IsNaN(most) {
		return 0, fmt.Errorf("ops: link bound %v: %w: a link too slow for its bytes", s, ErrCostNotFinite)
	}
	return most, nil
}

// linkBound is a plan's LinkBound, or why it has none.
type linkBound struct {
	seconds float64
	err     error
}

// costWithLinks is Cost, and where er is not nil the plan's LinkBound,
// from one pass over the plan's steps: Select wants both of the plans it
// costs in full, which at thousands of ranks are streamed, and made again
// at every pass.
func costWithLinks(plan *Plan, m CostModel, er EdgeRouter) (float64, linkBound, error) {
	if er == nil {
		cost, err := Cost(plan, m)
		return cost, linkBound{}, err
	}
	if err := costable(plan, m); err != nil {
		return 0, linkBound{}, err
	}
	load := newLinkLoad(er, plan.Ranks)
	cost, err := costPlan(plan, m, load)
	if err != nil {
		return 0, linkBound{}, err
	}
	seconds, err := load.bound(plan.Spec)
	return cost, linkBound{seconds, err}, nil
}
