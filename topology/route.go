package topology

import (
	"math"
	"sort"

	"gonum.org/v1/gonum/graph"
	"gonum.org/v1/gonum/graph/path"
	"gonum.org/v1/gonum/graph/traverse"
)

// Path is a route through the fabric.
type Path struct {
	Edges   []int   // directed edge ids in travel order; shared, do not modify
	Latency float64 // seconds: the sum of the link latencies, each rounded to the picosecond
}

// maxCachedRoutes bounds the route cache; when it is full it is emptied and
// refilled (routes are deterministic, so this changes only speed).
const maxCachedRoutes = 1 << 18

// hopWeight is the part of an edge's routing weight that counts hops. It is a
// power of two, so weight sums stay exact (see Route).
const hopWeight = 1.0 / 1024

// edgeWeight is the routing weight of a link with latency lat seconds:
// latency in whole picoseconds plus 1/1024 per hop.
func edgeWeight(lat float64) float64 {
	return math.Round(lat*1e12) + hopWeight
}

// Route returns the route from node src to node dst (indices into Nodes).
// src == dst gives an empty path.
//
// The route is a shortest path by latency, found by gonum's
// path.DijkstraFromTo over the topology's own graph type. Each directed edge
// weighs round(latency in picoseconds) + 1/1024; the sum is exact in float64
// while a path has fewer than 1024 hops and under about 8 s (2^43 ps) of
// latency. So among paths of equal latency (to the picosecond) the one with
// the fewest hops wins, and among those the first one Dijkstra settles. That
// last tie-break is deterministic because the graph lists every node's
// neighbours in ascending node index, never in map order. A node with a
// single link is never a way through, so it is offered to Dijkstra only as
// the destination; this changes no route's weight and keeps routes through a
// big switch cheap.
//
// Routes are computed lazily, once per (src, dst), and cached, except
// between two leaves of one node, which costs less than the cache and is
// computed on every call; Route is safe for concurrent use. The route from dst to src is computed on its own and
// may differ from the reverse of this one when there are ties. A route costs
// O(E log V) the first time and a map lookup after. The returned Edges slice
// is shared with the cache: do not modify it.
func (t *Topology) Route(src, dst int) (Path, error) {
	if !t.built() {
		return Path{}, newErr(ErrRoute, "route: topology was not built with New")
	}
	if src < 0 || src >= len(t.Nodes) {
		return Path{}, newErr(ErrRoute, "route: source node %d out of range 0..%d", src, len(t.Nodes)-1)
	}
	if dst < 0 || dst >= len(t.Nodes) {
		return Path{}, newErr(ErrRoute, "route: destination node %d out of range 0..%d", dst, len(t.Nodes)-1)
	}
	if src == dst {
		return Path{}, nil
	}
	if p, ok := t.leafRoute(src, dst); ok {
		return p, nil // cheaper than the cache, and keeps it for harder routes
	}
	key := uint64(src)<<32 | uint64(dst)
	t.mu.Lock()
	p, ok := t.routes[key]
	t.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := t.shortestIn(routeGraph{fullGraph{t}, int32(dst)}, src, dst)
	if err != nil {
		return Path{}, err
	}
	t.mu.Lock()
	if t.routes == nil || len(t.routes) >= maxCachedRoutes {
		t.routes = make(map[uint64]Path)
	}
	if q, ok := t.routes[key]; ok {
		p = q // another goroutine got here first; hand out one shared value
	} else {
		t.routes[key] = p
	}
	t.mu.Unlock()
	return p, nil
}

// RouteRanks returns the route between the GPUs of two ranks.
func (t *Topology) RouteRanks(srcRank, dstRank int) (Path, error) {
	if !t.built() {
		return Path{}, newErr(ErrRoute, "route: topology was not built with New")
	}
	n := len(t.gpus)
	if srcRank < 0 || srcRank >= n {
		return Path{}, newErr(ErrRoute, "route: source rank %d out of range 0..%d", srcRank, n-1)
	}
	if dstRank < 0 || dstRank >= n {
		return Path{}, newErr(ErrRoute, "route: destination rank %d out of range 0..%d", dstRank, n-1)
	}
	return t.Route(t.gpus[srcRank], t.gpus[dstRank])
}

// Leaf is a node's only link, when it has exactly one (a GPU on a
// switch): its neighbour, the directed edges out of the node and into it,
// and the link's latency in whole picoseconds, rounded as Route rounds
// every link's latency before summing.
type Leaf struct {
	Neighbour, Out, In int
	LatencyPS          float64
}

// Leaf returns node's only link; ok is false unless node has exactly one.
func (t *Topology) Leaf(node int) (leaf Leaf, ok bool) {
	if !t.built() || t.degree(int64(node)) != 1 {
		return Leaf{}, false
	}
	// A leaf's one link joins it to its one neighbour: the other
	// direction of that link is the way in.
	a := t.adj[t.adjStart[node]]
	return Leaf{Neighbour: int(a.nbr), Out: int(a.edge), In: int(a.edge ^ 1), LatencyPS: math.Round(t.Links[a.edge/2].Latency * 1e12)}, true
}

// leafRoute is the route between two leaves on one node (GPUs on a
// switch): the only way is through it, so Dijkstra, which would first list
// all the node's leaves, is skipped.
func (t *Topology) leafRoute(src, dst int) (Path, bool) {
	up, ok := t.Leaf(src)
	down, ok2 := t.Leaf(dst)
	if !ok || !ok2 || up.Neighbour != down.Neighbour {
		return Path{}, false
	}
	return Path{Edges: []int{up.Out, down.In}, Latency: (up.LatencyPS + down.LatencyPS) / 1e12}, true
}

// RouteAvoiding is Route over the links for which down returns false: the
// route traffic takes while those links are out of service. It is computed
// afresh on every call (nothing is cached) and returns an error wrapping
// ErrRoute when no path is left.
func (t *Topology) RouteAvoiding(src, dst int, down func(link int) bool) (Path, error) {
	if !t.built() {
		return Path{}, newErr(ErrRoute, "route: topology was not built with New")
	}
	if src < 0 || src >= len(t.Nodes) || dst < 0 || dst >= len(t.Nodes) {
		return Path{}, newErr(ErrRoute, "route: nodes %d and %d not both in 0..%d", src, dst, len(t.Nodes)-1)
	}
	if src == dst {
		return Path{}, nil
	}
	return t.shortestIn(avoidGraph{routeGraph{fullGraph{t}, int32(dst)}, down}, src, dst)
}

// avoidGraph is routeGraph without the links that are down.
type avoidGraph struct {
	routeGraph
	down func(link int) bool
}

func (g avoidGraph) From(id int64) graph.Nodes {
	inner, _ := g.t.neighbours(id)
	up := make([]adjItem, 0, len(inner))
	for _, a := range inner {
		if !g.down(int(a.edge / 2)) {
			up = append(up, a)
		}
	}
	extra := int32(-1)
	if d := int64(g.dst); d != id && g.t.degree(d) == 1 {
		if a := g.t.adj[g.t.adjStart[d]]; int64(a.nbr) == id && !g.down(int(a.edge/2)) {
			extra = g.dst
		}
	}
	if len(up) == 0 && extra < 0 {
		return graph.Empty
	}
	return &listIter{seg: up, extra: extra, cur: -1}
}

// shortestIn finds the path in g (a view of t) and turns it into edges.
func (t *Topology) shortestIn(g traverse.Graph, src, dst int) (Path, error) {
	nodes, _ := path.DijkstraFromTo(gnode(src), gnode(dst), g)
	if len(nodes) < 2 {
		return Path{}, newErr(ErrRoute, "route: no path from %s (node %d) to %s (node %d)", t.Nodes[src].Name, src, t.Nodes[dst].Name, dst)
	}
	p := Path{Edges: make([]int, 0, len(nodes)-1)}
	// Sum in whole picoseconds, as routing weighs them, so 2us + 2us + 2us
	// is exactly 6us rather than 5.999999999999999us.
	var ps float64
	for i := 1; i < len(nodes); i++ {
		e, ok := t.edgeBetween(nodes[i-1].ID(), nodes[i].ID())
		if !ok {
			return Path{}, newErr(ErrRoute, "route: internal error: no edge between nodes %d and %d", nodes[i-1].ID(), nodes[i].ID())
		}
		p.Edges = append(p.Edges, e)
		ps += math.Round(t.Links[e/2].Latency * 1e12)
	}
	p.Latency = ps / 1e12
	return p, nil
}

// neighbours returns node v's adjacency in two parts, each sorted by node
// index: neighbours with more than one link, and leaves (a single link).
func (t *Topology) neighbours(v int64) (inner, leaves []adjItem) {
	if v < 0 || v >= int64(len(t.Nodes)) {
		return nil, nil
	}
	lo, mid, hi := t.adjStart[v], t.adjLeaf[v], t.adjStart[v+1]
	return t.adj[lo:mid], t.adj[mid:hi]
}

// degree returns the number of links of node v.
func (t *Topology) degree(v int64) int {
	if v < 0 || v >= int64(len(t.Nodes)) {
		return 0
	}
	return int(t.adjStart[v+1] - t.adjStart[v])
}

// edgeBetween returns the directed edge from u to v, by binary search.
func (t *Topology) edgeBetween(u, v int64) (int, bool) {
	inner, leaves := t.neighbours(u)
	for _, seg := range [2][]adjItem{inner, leaves} {
		k := sort.Search(len(seg), func(i int) bool { return int64(seg[i].nbr) >= v })
		if k < len(seg) && int64(seg[k].nbr) == v {
			return int(seg[k].edge), true
		}
	}
	return 0, false
}

// gnode is a gonum graph node; its ID is the node index.
type gnode int64

func (n gnode) ID() int64 { return int64(n) }

// gedge is a gonum weighted edge; it is directed edge id of a topology.
type gedge struct {
	from, to int64
	w        float64
}

func (e gedge) From() graph.Node         { return gnode(e.from) }
func (e gedge) To() graph.Node           { return gnode(e.to) }
func (e gedge) ReversedEdge() graph.Edge { return gedge{e.to, e.from, e.w} }
func (e gedge) Weight() float64          { return e.w }

// fullGraph is the topology as an undirected gonum graph (graph.Graph,
// graph.Weighted and path.Weighted). Adjacency lives in sorted slices, so
// every iteration order is fixed.
type fullGraph struct{ t *Topology }

var (
	_ graph.Weighted = fullGraph{}
	_ path.Weighted  = fullGraph{}
	_ graph.Weighted = routeGraph{}
)

func (g fullGraph) Node(id int64) graph.Node {
	if id < 0 || id >= int64(len(g.t.Nodes)) {
		return nil
	}
	return gnode(id)
}

func (g fullGraph) Nodes() graph.Nodes { return &rangeIter{n: int64(len(g.t.Nodes)), cur: -1} }

// From lists id's neighbours in ascending node index.
func (g fullGraph) From(id int64) graph.Nodes {
	inner, leaves := g.t.neighbours(id)
	if len(inner)+len(leaves) == 0 {
		return graph.Empty
	}
	return &mergeIter{a: inner, b: leaves}
}

func (g fullGraph) HasEdgeBetween(x, y int64) bool {
	_, ok := g.t.edgeBetween(x, y)
	return ok
}

func (g fullGraph) Edge(u, v int64) graph.Edge { return g.WeightedEdge(u, v) }

func (g fullGraph) WeightedEdge(u, v int64) graph.WeightedEdge {
	e, ok := g.t.edgeBetween(u, v)
	if !ok {
		return nil
	}
	return gedge{u, v, edgeWeight(g.t.Links[e/2].Latency)}
}

func (g fullGraph) Weight(x, y int64) (float64, bool) {
	if x == y {
		return 0, true
	}
	e, ok := g.t.edgeBetween(x, y)
	if !ok {
		return math.Inf(1), false
	}
	return edgeWeight(g.t.Links[e/2].Latency), true
}

// routeGraph is fullGraph as seen by one route query: From leaves out
// neighbours with a single link (dead ends) unless they are the destination.
type routeGraph struct {
	fullGraph
	dst int32
}

// From lists id's neighbours that have more than one link, in ascending
// node index, then the destination if it is a leaf hanging off id.
func (g routeGraph) From(id int64) graph.Nodes {
	inner, _ := g.t.neighbours(id)
	extra := int32(-1)
	if d := int64(g.dst); d != id && g.t.degree(d) == 1 && int64(g.t.adj[g.t.adjStart[d]].nbr) == id {
		extra = g.dst // a leaf's one entry is its only neighbour
	}
	if len(inner) == 0 && extra < 0 {
		return graph.Empty
	}
	return &listIter{seg: inner, extra: extra, cur: -1}
}

// listIter iterates seg, then extra when it is >= 0.
type listIter struct {
	seg   []adjItem
	extra int32
	cur   int
}

func (it *listIter) n() int {
	if it.extra >= 0 {
		return len(it.seg) + 1
	}
	return len(it.seg)
}

func (it *listIter) Next() bool {
	if it.cur+1 < it.n() {
		it.cur++
		return true
	}
	it.cur = it.n()
	return false
}

func (it *listIter) Len() int { return max(it.n()-it.cur-1, 0) }
func (it *listIter) Reset()   { it.cur = -1 }

func (it *listIter) Node() graph.Node {
	switch {
	case it.cur >= 0 && it.cur < len(it.seg):
		return gnode(it.seg[it.cur].nbr)
	case it.cur == len(it.seg) && it.extra >= 0:
		return gnode(it.extra)
	}
	return nil
}

// mergeIter iterates the union of two index-sorted lists in ascending order.
type mergeIter struct {
	a, b []adjItem
	i, j int // next positions in a and b
	cur  int64
	ok   bool
}

func (it *mergeIter) Next() bool {
	switch {
	case it.i < len(it.a) && (it.j >= len(it.b) || it.a[it.i].nbr < it.b[it.j].nbr):
		it.cur, it.ok = int64(it.a[it.i].nbr), true
		it.i++
	case it.j < len(it.b):
		it.cur, it.ok = int64(it.b[it.j].nbr), true
		it.j++
	default:
		it.ok = false
	}
	return it.ok
}

func (it *mergeIter) Len() int { return len(it.a) - it.i + len(it.b) - it.j }
func (it *mergeIter) Reset()   { it.i, it.j, it.ok = 0, 0, false }

func (it *mergeIter) Node() graph.Node {
	if !it.ok {
		return nil
	}
	return gnode(it.cur)
}

// rangeIter iterates node ids 0..n-1.
type rangeIter struct{ n, cur int64 }

func (it *rangeIter) Next() bool {
	if it.cur+1 < it.n {
		it.cur++
		return true
	}
	it.cur = it.n
	return false
}

func (it *rangeIter) Len() int { return int(max(it.n-it.cur-1, 0)) }
func (it *rangeIter) Reset()   { it.cur = -1 }
func (it *rangeIter) Node() graph.Node {
	if it.cur < 0 || it.cur >= it.n {
		return nil
	}
	return gnode(it.cur)
}
