package topology

import (
	"fmt"
	"math"
)

// SwitchGroup is how a group of GPUs reaches the switch that reduces and
// multicasts for them (NVLS on an NVSwitch): the switch, and for each
// member, in the order the group was given, the directed edge from its
// GPU up to the switch and the one back down. A switch reduction of rank
// i's crosses every member's Up edge, the switch's reduction unit and
// member i's Down edge; a multicast of member i's crosses its Up edge and
// every member's Down edge.
type SwitchGroup struct {
	Switch   int   // node index
	Up, Down []int // per member: directed edge GPU→switch, switch→GPU
	t        *Topology
}

// ReducingSwitch finds the switch that reduces for the GPUs of ranks:
// the lowest-numbered switch with ReduceBW > 0 (in-network reduction)
// linked directly to every one of them. It returns an error wrapping
// ErrRoute when a rank is out of range or listed twice, or when no such
// switch exists (a switch:N fabric without nvls=, an A100 node).
func (t *Topology) ReducingSwitch(ranks []int) (SwitchGroup, error) {
	if !t.built() {
		return SwitchGroup{}, newErr(ErrRoute, "reducing switch: topology was not built with New")
	}
	if len(ranks) == 0 {
		return SwitchGroup{}, newErr(ErrRoute, "reducing switch: no ranks")
	}
	seen := make(map[int]bool, len(ranks))
	for _, r := range ranks {
		if r < 0 || r >= len(t.gpus) {
			return SwitchGroup{}, newErr(ErrRoute, "reducing switch: rank %d out of range 0..%d", r, len(t.gpus)-1)
		}
		if seen[r] {
			return SwitchGroup{}, newErr(ErrRoute, "reducing switch: rank %d listed twice", r)
		}
		seen[r] = true
	}
	// Candidates are the first member's neighbours, in ascending node
	// order within each part of its adjacency; the lowest that fits wins.
	inner, leaves := t.neighbours(int64(t.gpus[ranks[0]]))
	best := -1
	for _, part := range [2][]adjItem{inner, leaves} {
		for _, a := range part {
			sw := int(a.nbr)
			if (best >= 0 && sw > best) || t.Nodes[sw].Kind != Switch || !(t.Nodes[sw].ReduceBW > 0) {
				continue
			}
			if t.linksAll(ranks, sw) {
				best = sw
			}
		}
	}
	if best < 0 {
		return SwitchGroup{}, newErr(ErrRoute, "no switch with in-network reduction (ReduceBW > 0, NVLS) links %s directly", t.describeRanks(ranks))
	}
	g := SwitchGroup{Switch: best, Up: make([]int, len(ranks)), Down: make([]int, len(ranks)), t: t}
	for i, r := range ranks {
		e, _ := t.edgeBetween(int64(t.gpus[r]), int64(best))
		g.Up[i], g.Down[i] = e, e^1
	}
	return g, nil
}

// linksAll reports whether every rank's GPU has a link to node sw.
func (t *Topology) linksAll(ranks []int, sw int) bool {
	for _, r := range ranks {
		if _, ok := t.edgeBetween(int64(t.gpus[r]), int64(sw)); !ok {
			return false
		}
	}
	return true
}

// describeRanks names a group of ranks for errors: all of them, or the
// first few.
func (t *Topology) describeRanks(ranks []int) string {
	const most = 8
	s := "ranks"
	for i, r := range ranks {
		if i == most {
			return s + fmt.Sprintf(" and %d more", len(ranks)-most)
		}
		s += fmt.Sprintf(" %d (%s)", r, t.Nodes[t.gpus[r]].Name)
	}
	return s
}

// Cost is the α and β of member i's operation through the switch on an
// idle fabric: a switch reduction (reduce) or a multicast. α is the
// longest way through the switch, each link's latency rounded to the
// picosecond as Route rounds it: for a reduction the slowest member's Up
// edge plus member i's Down edge, for a multicast member i's Up edge
// plus the slowest Down edge. β is the seconds per byte of the narrowest
// resource the one flow crosses: every link above and, for a reduction,
// the switch's reduction unit (whose ReduceBW counts bytes of result).
func (g SwitchGroup) Cost(i int, reduce bool) (alpha, beta float64) {
	t := g.t
	ps := func(e int) float64 { return math.Round(t.EdgeLatency(e) * 1e12) }
	var in, out []int // the edges into the switch and out of it
	if reduce {
		in, out = g.Up, g.Down[i:i+1]
	} else {
		in, out = g.Up[i:i+1], g.Down
	}
	var inPS, outPS float64
	bw := math.Inf(1)
	for _, e := range in {
		inPS, bw = max(inPS, ps(e)), min(bw, t.EdgeBW(e))
	}
	for _, e := range out {
		outPS, bw = max(outPS, ps(e)), min(bw, t.EdgeBW(e))
	}
	if reduce {
		bw = min(bw, t.Nodes[g.Switch].ReduceBW)
	}
	return (inPS + outPS) / 1e12, 1 / bw
}

// SwitchCost returns the α and β (Cost) of GPU rank's switch reduction
// (reduce) or multicast over the group of ranks first..first+n-1, which
// must include it. With PathCost and ReduceCost it makes a Topology an
// ops.SwitchCoster, which prices NVLS plans.
func (t *Topology) SwitchCost(rank, first, n int, reduce bool) (alpha, beta float64, err error) {
	if n < 1 || rank < first || rank >= first+n {
		return 0, 0, newErr(ErrRoute, "switch cost: rank %d is not in the group of %d ranks from %d", rank, n, first)
	}
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = first + i
	}
	g, err := t.ReducingSwitch(ranks)
	if err != nil {
		return 0, 0, err
	}
	alpha, beta = g.Cost(rank-first, reduce)
	return alpha, beta, nil
}
