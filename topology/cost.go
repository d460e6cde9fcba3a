package topology

import "math"

// PathCost returns the α-β parameters of the route from GPU rank src to
// rank dst: α is the route's latency in seconds, β the seconds per byte of
// its slowest link. With ReduceCost it makes a Topology an ops.CostModel.
//
// A plan's cost asks for many pairs (a direct all-to-all, all of them).
// The first routes from a source are found one by one, as Route finds
// them; from a source asked for more, one search over the whole fabric
// gives every GPU's route at once (costsFrom), the same routes Route
// gives, for a cost that grows with the GPUs rather than with the pairs.
// Where rotating the ranks maps the fabric onto itself, a rank's costs
// come from its stand-in's search (cachedCost).
func (t *Topology) PathCost(src, dst int) (alpha, beta float64, err error) {
	if !t.built() {
		return 0, 0, newErr(ErrInvalid, "path cost: topology was not built with New")
	}
	if src >= 0 && src < len(t.gpus) && dst >= 0 && dst < len(t.gpus) && src != dst {
		if c, ok := t.cachedCost(src, dst); ok {
			return c.alpha, c.beta, c.err
		}
	}
	p, err := t.RouteRanks(src, dst)
	if err != nil {
		return 0, 0, err
	}
	return t.pathCostOf(p.Edges, p.Latency)
}

// pathCostOf is the α and β of a route with those edges and latency.
func (t *Topology) pathCostOf(edges []int, latency float64) (alpha, beta float64, err error) {
	if len(edges) == 0 {
		return latency, 0, nil
	}
	bw := math.Inf(1)
	for _, e := range edges {
		bw = min(bw, t.EdgeBW(e))
	}
	return latency, 1 / bw, nil
}

// pathCost is one route's α and β, or why there is none. shared says
// that every shortest route between the two GPUs costs the same, so that
// a renaming that maps the fabric onto itself keeps the cost (Route's
// tie-break, by numbering, may pick another of them for the renamed
// pair).
type pathCost struct {
	alpha, beta float64
	err         error
	shared      bool
}

// sourceCosts is what PathCost knows from one source: how many
// destinations it was asked for, and, past a few, every GPU's cost.
type sourceCosts struct {
	asked int
	all   []pathCost // by destination rank
}

// Costs from a source are searched for all at once when it is asked for
// more than searchAllAfter destinations, while fewer than maxCachedCosts
// costs are held.
const (
	searchAllAfter = 2
	maxCachedCosts = 1 << 22
)

// cachedCost returns the cost of src → dst from a table, making it when
// needed; ok is false when the caller must find the route itself.
//
// Where rotating the ranks by a block maps the fabric onto itself
// (rankShift), src's costs are those of its stand-in src mod block to the
// destination rotated alike, for every destination whose shortest routes
// all cost the same: a cluster of thousands of GPUs needs one search per
// GPU of a block, not one per GPU.
func (t *Topology) cachedCost(src, dst int) (pathCost, bool) {
	if _, ok := t.leafRoute(t.gpus[src], t.gpus[dst]); ok {
		return pathCost{}, false // cheaper than any table
	}
	if block := t.rankShift(); block > 0 {
		p, by := len(t.gpus), src-src%block
		if all := t.costTable(src-by, true); all != nil {
			if c := all[(dst-by+p)%p]; c.err == nil && (by == 0 || c.shared) {
				return c, true
			}
		}
	}
	if all := t.costTable(src, false); all != nil {
		return all[dst], true
	}
	return pathCost{}, false
}

// costTable is the cost from GPU rank src to every GPU, made on the call
// that asks it more than searchAllAfter times, or the first when now is
// set; nil before then, or when the tables are full.
func (t *Topology) costTable(src int, now bool) []pathCost {
	t.mu.Lock()
	if t.costs == nil {
		t.costs = map[int]*sourceCosts{}
	}
	sc := t.costs[src]
	if sc == nil {
		sc = &sourceCosts{}
		t.costs[src] = sc
	}
	if sc.all != nil {
		t.mu.Unlock()
		return sc.all
	}
	sc.asked++
	build := (now || sc.asked > searchAllAfter) && t.cachedCosts+len(t.gpus) <= maxCachedCosts
	t.mu.Unlock()
	if !build {
		return nil
	}
	all := t.costsFrom(src)
	t.mu.Lock()
	defer t.mu.Unlock()
	if sc.all == nil {
		sc.all = all
		t.cachedCosts += len(all)
	}
	return sc.all
}

// rankShift is the least block of ranks by whose rotation (rank r becomes
// r+block, mod the ranks) the fabric maps onto itself (Automorphism): a
// server of a cluster, whose leaves and spines rotate with it; 0 when
// none does. Found once.
func (t *Topology) rankShift() int {
	t.shiftOnce.Do(func() {
		p := len(t.gpus)
		perm := make([]int, p)
		for block := 1; block < p; block++ {
			if p%block != 0 {
				continue
			}
			for r := range perm {
				perm[r] = (r + block) % p
			}
			if edges, ok := t.Automorphism(perm); ok {
				t.shift, t.shiftPow = block, [][]int{edges}
				for turns := 2; turns < p/block; turns *= 2 {
					last := t.shiftPow[len(t.shiftPow)-1]
					twice := make([]int, len(last))
					for e, f := range last {
						twice[e] = last[f]
					}
					t.shiftPow = append(t.shiftPow, twice)
				}
				return
			}
		}
	})
	return t.shift
}

// costsFrom is the cost of the route from GPU rank src to every GPU, by
// rank, from one search (searchRoutes to every node): a route's latency
// and narrowest link follow from its last step's predecessor's, summed in
// route order as Route sums them.
func (t *Topology) costsFrom(src int) []pathCost {
	s := t.searchRoutes(t.gpus[src], -1, nil, false)
	type acc struct {
		ps, bw float64
		done   bool
	}
	memo := make([]acc, len(s.dist)) // by state
	memo[state(t.gpus[src], false)] = acc{bw: math.Inf(1), done: true}
	var walk func(u int) acc
	walk = func(u int) acc {
		if !memo[u].done {
			before := int(s.pred[u])
			e, _ := t.edgeBetween(int64(before/2), int64(u/2))
			a := walk(before)
			memo[u] = acc{ps: a.ps + math.Round(t.Links[e/2].Latency*1e12), bw: min(a.bw, t.EdgeBW(e)), done: true}
		}
		return memo[u]
	}
	out := make([]pathCost, len(t.gpus))
	for q, node := range t.gpus {
		switch end := s.best(node); {
		case q == src:
		case end < 0:
			_, out[q].err = t.RouteRanks(src, q)
		default:
			a := walk(end)
			out[q] = pathCost{alpha: a.ps / 1e12, beta: 1 / a.bw, shared: s.sameNarrowest(node)}
		}
	}
	return out
}

// The classes of path a communication library tells apart (the order of
// ops.PathNVLink, ops.PathPCI and ops.PathNet): GPUs joined by NVLink,
// directly or through an NVSwitch; through a host's PCIe (a CPU node);
// over the network (a NIC node).
const (
	ClassNVLink = iota
	ClassPCI
	ClassNet
)

// EdgeClass is the class of a path through directed edge e: the network
// when either end is a NIC, PCIe when either is a CPU, else NVLink; -1
// for an edge id out of range.
func (t *Topology) EdgeClass(e int) int {
	if t == nil || e < 0 || e/2 >= len(t.Links) {
		return -1
	}
	l := t.Links[e/2]
	class := ClassNVLink
	for _, n := range [2]int{l.A, l.B} {
		switch t.Nodes[n].Kind {
		case NIC:
			class = max(class, ClassNet)
		case CPU:
			class = max(class, ClassPCI)
		}
	}
	return class
}

// PathClass is the class of the route from GPU rank src to rank dst: the
// highest of its links' (EdgeClass). With PathCost it prices a plan's
// wire (ops.PathClasser).
func (t *Topology) PathClass(src, dst int) (int, error) {
	p, err := t.RouteRanks(src, dst)
	if err != nil {
		return 0, err
	}
	class := ClassNVLink
	for _, e := range p.Edges {
		class = max(class, t.EdgeClass(e))
	}
	return class, nil
}

// ReduceCost returns γ, the seconds per byte of a reduction on GPU rank r
// (0 when reduction is free or r is out of range).
func (t *Topology) ReduceCost(rank int) float64 {
	if rank < 0 || rank >= len(t.gpus) {
		return 0
	}
	bw := t.Nodes[t.gpus[rank]].ReduceBW
	if math.IsInf(bw, 1) || bw <= 0 {
		return 0
	}
	return 1 / bw
}
