package topology

import (
	"math"

	"gonum.org/v1/gonum/graph/path"
)

// PathCost returns the α-β parameters of the route from GPU rank src to
// rank dst: α is the route's latency in seconds, β the seconds per byte of
// its slowest link. With ReduceCost it makes a Topology an ops.CostModel.
//
// A plan's cost asks for many pairs (a direct all-to-all, all of them).
// The first routes from a source are found one by one, as Route finds
// them; from a source asked for more, one search over the whole fabric
// gives every GPU's route at once (costsFrom), the same routes Route
// gives, for a cost that grows with the GPUs rather than with the pairs.
func (t *Topology) PathCost(src, dst int) (alpha, beta float64, err error) {
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

// pathCost is one route's α and β, or why there is none.
type pathCost struct {
	alpha, beta float64
	err         error
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

// cachedCost returns the cost of src → dst from src's table, making the
// table when src has been asked enough; ok is false when the caller must
// find the route itself.
func (t *Topology) cachedCost(src, dst int) (pathCost, bool) {
	if _, ok := t.leafRoute(t.gpus[src], t.gpus[dst]); ok {
		return pathCost{}, false // cheaper than any table
	}
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
		c := sc.all[dst]
		t.mu.Unlock()
		return c, true
	}
	sc.asked++
	build := sc.asked > searchAllAfter && t.cachedCosts+len(t.gpus) <= maxCachedCosts
	t.mu.Unlock()
	if !build {
		return pathCost{}, false
	}
	all := t.costsFrom(src)
	t.mu.Lock()
	if sc.all == nil {
		sc.all = all
		t.cachedCosts += len(all)
	}
	c := sc.all[dst]
	t.mu.Unlock()
	return c, true
}

// costsFrom is the cost of the route from GPU rank src to every GPU, by
// rank, from one search (searchFrom): a route's latency and narrowest
// link follow from its last hop's predecessor's, summed in route order as
// Route sums them.
func (t *Topology) costsFrom(src int) []pathCost {
	pred := t.searchFrom(src)
	type acc struct {
		ps, bw float64
		done   bool
	}
	memo := make([]acc, len(t.Nodes))
	from := t.gpus[src]
	memo[from] = acc{bw: math.Inf(1), done: true}
	var walk func(v int) acc
	walk = func(v int) acc {
		if !memo[v].done {
			u := int(pred[v])
			e, _ := t.edgeBetween(int64(u), int64(v))
			a := walk(u)
			memo[v] = acc{ps: a.ps + math.Round(t.Links[e/2].Latency*1e12), bw: min(a.bw, t.EdgeBW(e)), done: true}
		}
		return memo[v]
	}
	out := make([]pathCost, len(t.gpus))
	for q, node := range t.gpus {
		via, last := t.lastHop(node)
		switch {
		case q == src:
		case pred[via] < 0 && via != from:
			_, out[q].err = t.RouteRanks(src, q)
		default:
			a := walk(via)
			if last >= 0 {
				a.ps += math.Round(t.Links[last/2].Latency * 1e12)
				a.bw = min(a.bw, t.EdgeBW(last))
			}
			out[q] = pathCost{alpha: a.ps / 1e12, beta: 1 / a.bw}
		}
	}
	return out
}

// lastHop is how a route reaches node: through its only neighbour and
// then edge last when it is a leaf (Route's search offers a leaf only as
// its destination), else as node itself (last -1).
func (t *Topology) lastHop(node int) (via, last int) {
	if leaf, ok := t.Leaf(node); ok {
		return leaf.Neighbour, leaf.In
	}
	return node, -1
}

// searchFrom runs Route's search from GPU rank src to every node at once
// and returns each node's predecessor on its route (−1 for none): gonum's
// Dijkstra over the graph Route searches, without any leaf. Up to each
// destination it settles the nodes in the order Route's search for that
// destination does (which offers no leaf but the destination, and a leaf
// changes nothing before its one neighbour is settled), so the routes are
// the same. gonum keeps its predecessors to itself, so the search is
// watched: it weighs each edge from a settled node once, in order, and a
// copy of its distances tells which weighings it took.
func (t *Topology) searchFrom(src int) []int32 {
	pred := make([]int32, len(t.Nodes))
	dist := make([]float64, len(t.Nodes))
	for i := range pred {
		pred[i], dist[i] = -1, math.Inf(1)
	}
	from := t.gpus[src]
	dist[from] = 0
	watched := watchedGraph{routeGraph{fullGraph{t}, -1}, func(u, v int64, w float64) {
		if joint := dist[u] + w; joint < dist[v] {
			dist[v], pred[v] = joint, int32(u)
		}
	}}
	path.DijkstraFrom(gnode(from), watched)
	return pred
}

// watchedGraph is routeGraph that shows every weighing to see.
type watchedGraph struct {
	routeGraph
	see func(u, v int64, w float64)
}

func (g watchedGraph) Weight(x, y int64) (float64, bool) {
	w, ok := g.routeGraph.Weight(x, y)
	if ok && x != y {
		g.see(x, y, w)
	}
	return w, ok
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
// when either end is a NIC, PCIe when either is a CPU, else NVLink.
func (t *Topology) EdgeClass(e int) int {
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
