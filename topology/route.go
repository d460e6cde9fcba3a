package topology

import (
	"math"
	"sort"
	"sync"

	"gonum.org/v1/gonum/graph"
)

// Path is a route through the fabric.
type Path struct {
	Edges   []int   // directed edge ids in travel order; shared, do not modify
	Latency float64 // seconds: the sum of the link latencies, each rounded to the picosecond
}

// maxCachedRoutes and maxCachedEdges bound the route cache, in routes
// and in the edges they hold (8 bytes each: 128 MiB); when it is full it
// is emptied and refilled (routes are deterministic, so this changes only
// speed). The edges bound matters on fabrics of long routes: the routes
// of a ring of 16,384 GPUs average 4,096 edges, and 2^18 of them would
// hold 8.6 GB.
const (
	maxCachedRoutes = 1 << 18
	maxCachedEdges  = 1 << 24
)

// KeepsRoutes reports whether t's route cache keeps the routes a run
// asks for from sources sources, routes routes of edges edges in all, at
// once: as routes, or as the sources' trees. A run whose routes it does
// not keep finds them again as it goes (a host-time estimate counts them
// so).
func (t *Topology) KeepsRoutes(sources, routes, edges int) bool {
	return routes < maxCachedRoutes && edges <= maxCachedEdges || sources*treeBytes(len(t.Nodes)) <= maxTreeBytes
}

// maxTreeBytes bounds the sources' route trees (routeTree) kept at once;
// when the next would pass it they are all dropped and found again as
// asked for. 64 MiB holds every source's tree on fabrics of up to about
// 1,800 nodes, and 400 of a ring of 8,192.
const maxTreeBytes = 64 << 20

// maxShortestBytes bounds ShortestRoutes' cache, a byte a node for each
// source kept; when it is full it is emptied and refilled.
const maxShortestBytes = 64 << 20

// routeCache is what a fabric's route searches found: routes by their
// ends, the cache misses by source, and ShortestRoutes' counts by source.
type routeCache struct {
	mu       sync.Mutex
	routes   map[uint64]Path
	edges    int // the edges of routes
	misses   map[int]int
	shortest map[int][]uint8
	// trees are the sources searched to every node, by source, and
	// treeBytes their size (maxTreeBytes).
	trees     map[int]*routeTree
	treeBytes int
	// scratch lends single-destination searches their arrays
	// (*searchScratch).
	scratch sync.Pool
	// fastest is each node's fastest link, in whole picoseconds, for
	// directRoute; made once, on first use.
	fastestOnce sync.Once
	fastest     []float64
}

// Route returns the route from node src to node dst (indices into Nodes).
// src == dst gives an empty path.
//
// The route is a shortest path by latency, then hops, then NVLink hops
// after the network (see the package doc's Routing and routeSearch); a
// node with a single link is never a way through, which changes no route
// and keeps routes through a big switch cheap.
//
// Routes are computed lazily and cached, except between two leaves of one
// node and over a direct link that no other way can beat from a node of
// many links (directRoute), which cost less than the cache and are read
// on every call;
// Route is safe for concurrent use. The route from dst to src is computed
// on its own and may differ from the reverse of this one when there are
// ties. A route costs O(E log V) the first time and a map lookup after;
// once a source has been asked for more than searchAllAfter routes not
// cached, one search to every node keeps its tree of routes (routeTree),
// from which every later route of the source is read back without a
// search (an all-to-all asks a source for all of them): the routes of a
// fabric of long routes (a ring or torus of a thousand GPUs) outgrow the
// cache, where their trees do not. The returned Edges slice may be shared
// with the cache: do not modify it.
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
	if p, ok := t.directRoute(src, dst); ok {
		return p, nil // a mesh's: as cheap, and n² of them would fill the cache
	}
	key := routeKey(src, dst)
	c := t.routing
	c.mu.Lock()
	p, ok := c.routes[key]
	tree := c.trees[src]
	if !ok && tree == nil {
		if c.misses == nil {
			c.misses = map[int]int{}
		}
		c.misses[src]++
	}
	searchAll := !ok && tree == nil && c.misses[src] > searchAllAfter && len(t.gpus) < maxCachedRoutes
	c.mu.Unlock()
	switch {
	case ok:
		return p, nil
	case searchAll:
		tree = t.searchRoutes(src, -1, nil, false).tree()
		c.mu.Lock()
		c.keepTree(src, tree)
		c.mu.Unlock()
	}
	if tree != nil {
		p, ok := tree.path(t, dst)
		if !ok {
			return Path{}, t.noRoute(src, dst)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.keepIfRoom(key, p), nil
	}
	p, err := t.shortestRoute(src, dst, nil)
	if err != nil {
		return Path{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.keep(key, p), nil
}

func routeKey(src, dst int) uint64 { return uint64(src)<<32 | uint64(dst) }

// keep keeps p as the route of key, or hands out the one another
// goroutine kept first; c.mu must be held.
func (c *routeCache) keep(key uint64, p Path) Path {
	if q, ok := c.routes[key]; ok {
		return q
	}
	switch {
	case c.routes == nil:
		c.routes = make(map[uint64]Path)
	case len(c.routes) >= maxCachedRoutes || c.edges+len(p.Edges) > maxCachedEdges:
		c.routes, c.misses, c.edges = make(map[uint64]Path), nil, 0
	}
	c.routes[key] = p
	c.edges += len(p.Edges)
	return p
}

// keepTree keeps tree as src's, unless another goroutine kept one first,
// dropping every tree first if it would pass maxTreeBytes; c.mu must be
// held.
func (c *routeCache) keepTree(src int, tree *routeTree) {
	if c.trees[src] != nil {
		return
	}
	if c.trees == nil || c.treeBytes+tree.bytes() > maxTreeBytes {
		c.trees, c.treeBytes = map[int]*routeTree{}, 0
	}
	c.trees[src], c.treeBytes = tree, c.treeBytes+tree.bytes()
}

// keepIfRoom keeps p, a route read from a tree, as keep does while the
// cache has room for it, and leaves the cache as it is when it has none:
// the tree gives the route again for a walk along it, where emptying the
// cache would cost other sources' routes a search each.
func (c *routeCache) keepIfRoom(key uint64, p Path) Path {
	if c.routes != nil && (len(c.routes) >= maxCachedRoutes || c.edges+len(p.Edges) > maxCachedEdges) {
		return p
	}
	return c.keep(key, p)
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

// RouteEdges is RouteRanks' directed edges, in travel order (shared: do
// not modify), for callers that know ranks and edges but no Path (package
// ops bounds a plan by its busiest link with them). Where rotating the
// ranks by a block maps the fabric onto itself (rankShift), a route that
// is the only shortest one is its stand-in's, from src mod block, renamed
// by the rotation: a search for each rank of a block, not for every rank.
func (t *Topology) RouteEdges(srcRank, dstRank int) ([]int, error) {
	n := len(t.gpus)
	if block := t.rankShift(); block > 0 && srcRank >= block && srcRank < n && dstRank >= 0 && dstRank < n && srcRank != dstRank {
		turns := srcRank / block
		from, to := srcRank%block, (dstRank-turns*block+n)%n
		if counts := t.ShortestRoutes(t.gpus[from]); counts[t.gpus[to]] == 1 {
			if stand, err := t.RouteRanks(from, to); err == nil {
				edges := make([]int, len(stand.Edges))
				for i, e := range stand.Edges {
					for j, pow := range t.shiftPow {
						if turns>>j&1 == 1 {
							e = pow[e]
						}
					}
					edges[i] = e
				}
				return edges, nil
			}
		}
	}
	p, err := t.RouteRanks(srcRank, dstRank)
	return p.Edges, err
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

// directRoute is the route over the link that joins src and dst, where
// src has many links (a mesh's GPU) and no way through other nodes can be
// as near: such a way takes a link out of src and one into dst, each no
// faster than the fastest of its node's, and a hop more. A search would
// settle every neighbour of src and relax each of theirs (a one-size
// sweep on mesh:2000 took minutes); from a node of few links it is cheap.
func (t *Topology) directRoute(src, dst int) (Path, bool) {
	if t.degree(int64(src)) < directRouteDegree {
		return Path{}, false
	}
	c := t.routing
	c.fastestOnce.Do(func() {
		c.fastest = make([]float64, len(t.Nodes))
		for v := range t.Nodes {
			least := math.Inf(1)
			for _, a := range t.adj[t.adjStart[v]:t.adjStart[v+1]] {
				least = min(least, math.Round(t.Links[a.edge/2].Latency*1e12))
			}
			c.fastest[v] = least
		}
	})
	edge, ok := t.edgeBetween(int64(src), int64(dst))
	if !ok {
		return Path{}, false
	}
	lat := math.Round(t.Links[edge/2].Latency * 1e12)
	if lat > c.fastest[src]+c.fastest[dst] {
		return Path{}, false
	}
	return Path{Edges: []int{edge}, Latency: lat / 1e12}, true
}

// directRouteDegree is the fewest links of a source whose routes to its
// neighbours directRoute reads without a search.
const directRouteDegree = 16

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
	return t.shortestRoute(src, dst, down)
}

// shortestRoute is the route from src to dst around the links down
// reports (nil: none).
func (t *Topology) shortestRoute(src, dst int, down func(link int) bool) (Path, error) {
	s := t.searchRoutes(src, dst, down, false)
	p, ok := s.path(dst)
	s.release()
	if !ok {
		return Path{}, t.noRoute(src, dst)
	}
	return p, nil
}

// noRoute is the error for nodes src and dst that no route joins.
func (t *Topology) noRoute(src, dst int) error {
	return newErr(ErrRoute, "route: no path from %s (node %d) to %s (node %d)", t.Nodes[src].Name, src, t.Nodes[dst].Name, dst)
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

// gedge is a gonum edge between two nodes.
type gedge struct{ from, to int64 }

func (e gedge) From() graph.Node         { return gnode(e.from) }
func (e gedge) To() graph.Node           { return gnode(e.to) }
func (e gedge) ReversedEdge() graph.Edge { return gedge{e.to, e.from} }

// fullGraph is the topology as an undirected gonum graph, for gonum's
// traversals (routes come from routeSearch). Adjacency lives in sorted
// slices, so every iteration order is fixed.
type fullGraph struct{ t *Topology }

var _ graph.Graph = fullGraph{}

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

func (g fullGraph) Edge(u, v int64) graph.Edge {
	if !g.HasEdgeBetween(u, v) {
		return nil
	}
	return gedge{u, v}
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
