package topology

import (
	"fmt"
	"math"
)

// SwitchGroup is how a group of GPUs reaches the switch that reduces and
// multicasts for them: the switch, and for each member, in the order the
// group was given, the directed edge up to the switch and the one back
// down. A switch reduction of rank i's crosses every member's Up edge,
// the switch's reduction unit and member i's Down edge; a multicast of
// member i's crosses its Up edge and every member's Down edge.
//
// An NVSwitch that reduces (NVLS) links the GPUs themselves, and Up and
// Down join each GPU to it. A network switch that reduces (SHARP, for
// NCCL's CollNet) links the GPUs' NICs: Network is set, Up and Down join
// each member's NIC to it, and the hop between the GPU and its NIC adds
// its latency (Cost) but is not one of the edges the operation shares:
// the simulator's flow of a switch operation crosses the switch's links
// only.
type SwitchGroup struct {
	Switch   int   // node index
	Up, Down []int // per member: directed edge GPU→switch, switch→GPU (NIC→switch, switch→NIC when Network)
	Network  bool
	via      []int // Network: per member, the directed edge GPU→NIC
	t        *Topology
}

// ReducingSwitch finds the switch that reduces for the GPUs of ranks:
// the lowest-numbered switch with ReduceBW > 0 (in-network reduction)
// linked directly to every one of them (NVLS); failing that, the
// lowest-numbered one linked directly to every one of their NICs (SHARP),
// each GPU's NIC being its lowest-numbered one, and no two members
// sharing one. It returns an error wrapping ErrRoute when a rank is out
// of range or listed twice, or when no such switch exists (a switch:N
// fabric without nvls=, an A100 node, nodes joined by a network without
// sharp=).
func (t *Topology) ReducingSwitch(ranks []int) (SwitchGroup, error) {
	if !t.built() {
		return SwitchGroup{}, newErr(ErrRoute, "reducing switch: topology was not built with New")
	}
	if len(ranks) == 0 {
		return SwitchGroup{}, newErr(ErrRoute, "reducing switch: no ranks")
	}
	seen := make(map[int]bool, len(ranks))
	gpus := make([]int, len(ranks))
	for i, r := range ranks {
		if r < 0 || r >= len(t.gpus) {
			return SwitchGroup{}, newErr(ErrRoute, "reducing switch: rank %d out of range 0..%d", r, len(t.gpus)-1)
		}
		if seen[r] {
			return SwitchGroup{}, newErr(ErrRoute, "reducing switch: rank %d listed twice", r)
		}
		seen[r] = true
		gpus[i] = t.gpus[r]
	}
	if best := t.reducerOf(gpus); best >= 0 {
		return t.switchGroup(best, gpus, nil), nil
	}
	nics, err := t.nicsOf(ranks)
	if err != nil {
		return SwitchGroup{}, err
	}
	if nics != nil {
		if best := t.reducerOf(nics); best >= 0 {
			via := make([]int, len(ranks))
			for i := range ranks {
				via[i], _ = t.edgeBetween(int64(gpus[i]), int64(nics[i]))
			}
			return t.switchGroup(best, nics, via), nil
		}
	}
	return SwitchGroup{}, newErr(ErrRoute, "no switch with in-network reduction (ReduceBW > 0: NVLS on an NVSwitch, SHARP on a network switch) links %s or their NICs directly", t.describeRanks(ranks))
}

// reducerOf is the lowest-numbered switch with ReduceBW > 0 linked to
// every node of members, or −1. Candidates are the first member's
// neighbours, in ascending node order within each part of its adjacency.
func (t *Topology) reducerOf(members []int) int {
	inner, leaves := t.neighbours(int64(members[0]))
	best := -1
	for _, part := range [2][]adjItem{inner, leaves} {
		for _, a := range part {
			sw := int(a.nbr)
			if (best >= 0 && sw > best) || t.Nodes[sw].Kind != Switch || !(t.Nodes[sw].ReduceBW > 0) {
				continue
			}
			if t.linksAll(members, sw) {
				best = sw
			}
		}
	}
	return best
}

// nicsOf is each rank's NIC, its GPU's lowest-numbered NIC neighbour, or
// nil when a GPU has none. Two ranks on one NIC are refused: SHARP takes
// one contribution per port.
func (t *Topology) nicsOf(ranks []int) ([]int, error) {
	nics := make([]int, len(ranks))
	owner := map[int]int{}
	for i, r := range ranks {
		nic := -1
		inner, leaves := t.neighbours(int64(t.gpus[r]))
		for _, part := range [2][]adjItem{inner, leaves} {
			for _, a := range part {
				if n := int(a.nbr); t.Nodes[n].Kind == NIC && (nic < 0 || n < nic) {
					nic = n
				}
			}
		}
		if nic < 0 {
			return nil, nil
		}
		if q, ok := owner[nic]; ok {
			return nil, newErr(ErrRoute, "reducing switch: ranks %d and %d share NIC %s, and a network switch reduces one contribution per NIC", q, r, t.Nodes[nic].Name)
		}
		owner[nic], nics[i] = r, nic
	}
	return nics, nil
}

// switchGroup is the group of members (GPU or NIC nodes) on switch sw,
// reached from the GPUs through via (nil when members are the GPUs).
func (t *Topology) switchGroup(sw int, members, via []int) SwitchGroup {
	g := SwitchGroup{Switch: sw, Up: make([]int, len(members)), Down: make([]int, len(members)), Network: via != nil, via: via, t: t}
	for i, m := range members {
		e, _ := t.edgeBetween(int64(m), int64(sw))
		g.Up[i], g.Down[i] = e, e^1
	}
	return g
}

// linksAll reports whether every one of nodes has a link to node sw.
func (t *Topology) linksAll(nodes []int, sw int) bool {
	for _, n := range nodes {
		if _, ok := t.edgeBetween(int64(n), int64(sw)); !ok {
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
// picosecond as Route rounds it: for a reduction the slowest member's way
// up plus member i's way down, for a multicast member i's way up plus
// the slowest way down, where a member's way is its Up or Down edge and,
// on a network switch, the hop between its GPU and its NIC. β is the
// seconds per byte of the narrowest resource the one flow crosses: every
// Up and Down edge above and, for a reduction, the switch's reduction
// unit (whose ReduceBW counts bytes of result).
func (g SwitchGroup) Cost(i int, reduce bool) (alpha, beta float64) {
	if reduce {
		return g.cost(members(len(g.Up)), []int{i}, true)
	}
	return g.cost([]int{i}, members(len(g.Down)), false)
}

// AllReduceCost is the α and β of an all-reduce through the switch by
// every member at once (ops.StepNetAllReduce), on an idle fabric: α the
// slowest member's way in plus the slowest way out, β the seconds per
// byte of the narrowest of every member's Up and Down edges and the
// switch's reduction unit, which the one flow crosses.
func (g SwitchGroup) AllReduceCost() (alpha, beta float64) {
	return g.cost(members(len(g.Up)), members(len(g.Down)), true)
}

// cost is the α and β of an operation whose data comes in through the
// ways of members in and goes out through those of out, through the
// switch's reduction unit when reduce.
func (g SwitchGroup) cost(in, out []int, reduce bool) (alpha, beta float64) {
	t := g.t
	ps := func(e int) float64 { return math.Round(t.EdgeLatency(e) * 1e12) }
	way := func(j int, up bool) (float64, int) {
		e, hop := g.Down[j], 0.0
		if up {
			e = g.Up[j]
		}
		if g.via != nil {
			hop = ps(g.via[j]) // both directions of a link share its latency
		}
		return ps(e) + hop, e
	}
	var inPS, outPS float64
	bw := math.Inf(1)
	for _, j := range in {
		lat, e := way(j, true)
		inPS, bw = max(inPS, lat), min(bw, t.EdgeBW(e))
	}
	for _, j := range out {
		lat, e := way(j, false)
		outPS, bw = max(outPS, lat), min(bw, t.EdgeBW(e))
	}
	if reduce {
		bw = min(bw, t.Nodes[g.Switch].ReduceBW)
	}
	return (inPS + outPS) / 1e12, 1 / bw
}

// members is 0…n−1.
func members(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// SwitchCost returns the α and β (Cost) of GPU rank's switch reduction
// (reduce) or multicast over the group of ranks first..first+n-1, which
// must include it. With PathCost and ReduceCost it makes a Topology an
// ops.SwitchCoster, which prices NVLS plans.
func (t *Topology) SwitchCost(rank, first, n int, reduce bool) (alpha, beta float64, err error) {
	if n < 1 || rank < first || rank-first >= n {
		return 0, 0, newErr(ErrRoute, "switch cost: rank %d is not in the group of %d ranks from %d", rank, n, first)
	}
	if first < 0 || n > t.NumGPUs()-first {
		return 0, 0, newErr(ErrRoute, "switch cost: the group of %d ranks from %d is not among the %d GPUs", n, first, t.NumGPUs())
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

// NetAllReduceCost returns the α and β (SwitchGroup.AllReduceCost) of an
// all-reduce by the GPUs of ranks through the switch that reduces for
// them: with SwitchCost, what makes a Topology an ops.SwitchCoster.
func (t *Topology) NetAllReduceCost(ranks []int) (alpha, beta float64, err error) {
	g, err := t.ReducingSwitch(ranks)
	if err != nil {
		return 0, 0, err
	}
	alpha, beta = g.AllReduceCost()
	return alpha, beta, nil
}
