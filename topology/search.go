package topology

import (
	"container/heap"
	"math"
)

// hopWeight is the part of an edge's routing weight that counts hops. It is a
// power of two, so weight sums stay exact (see the package doc's Routing).
const hopWeight = 1.0 / 1024

// edgeWeight is the routing weight of a link with latency lat seconds:
// latency in whole picoseconds plus 1/1024 per hop.
func edgeWeight(lat float64) float64 {
	return math.Round(lat*1e12) + hopWeight
}

// A search state is a node and whether the route to it has crossed the
// network (a link to a NIC): 2·node, or 2·node+1 once crossed.
func state(node int, crossed bool) int {
	if crossed {
		return 2*node + 1
	}
	return 2 * node
}

// routeSearch is Dijkstra's search over the states, the one search every
// route comes from: Route's to one destination, and a source's routes to
// every node at once (PathCost's, ShortestRoutes'), which settle every
// state in the same order up to the destination, so they give the same
// routes.
//
// The frontier is ordered by distance (edgeWeight summed: latency, then
// hops), then by NVLink hops into or out of a GPU after the network, then
// by state, and a state takes only a strictly nearer way, so no tie is
// broken by map order. The NVLink rule sends cross-rail traffic over
// NVLink first, as NCCL's PXN does (to the GPU on the destination's rail,
// then through its NIC). It reads the fabric's shape, never its
// numbering, so a renaming that maps the fabric onto itself maps every
// route onto the renamed ends' route, which mirrors need; a
// rail-optimised fabric's cross-rail routes (NVLink at the source, or at
// the destination) would otherwise tie, and could not fold.
//
// A node with a single link (a GPU on a switch) is never a way through: a
// search for one destination reaches no other, and a search for every
// node reaches them last.
type routeSearch struct {
	t    *Topology
	src  int
	dst  int                 // the destination node, or -1 for every node
	down func(link int) bool // links out of service, or nil
	dist []float64           // by state: edgeWeight summed
	late []uint16            // by state: NVLink hops after the network
	pred []int32             // the state before, by state; -1 for none
	edge []int32             // the directed edge into each state from pred
	// count is the number of shortest routes to each state, up to 2,
	// when counted.
	count []uint8
	// narrowLo and narrowHi are, by state, the least and the most
	// bandwidth of a shortest route's narrowest link, over every shortest
	// route to it, when searching to every node: equal, every shortest
	// route costs the same.
	narrowLo, narrowHi []float64
	settled            []bool // by state
	front              stateHeap
	// scratch, when not nil, lent dist, late, pred, edge, settled and
	// front, and takes them back on release (searchScratch).
	scratch *searchScratch
}

// searchScratch is a search's arrays, kept between the searches to one
// destination (Route's, on a cache miss) with the states they touched:
// such a search settles only the states nearer than its destination,
// but made and filled arrays as long as the fabric's every time, which
// on a ring of 8,000 GPUs took most of a minute over a recursive-doubling
// all-reduce's hundred thousand routes. Given back, only the touched
// states are set back (dist +Inf, pred -1, the rest 0), so every search
// starts from the arrays a fresh one makes.
type searchScratch struct {
	dist    []float64
	late    []uint16
	pred    []int32
	edge    []int32
	settled []bool
	front   stateHeap
	touched []int32 // the states whose dist is not +Inf
}

// scratchFor lends arrays for a search of n states, from the pool where it
// holds some of that length.
func (c *routeCache) scratchFor(n int) *searchScratch {
	if sc, ok := c.scratch.Get().(*searchScratch); ok && len(sc.dist) == n {
		return sc
	}
	sc := &searchScratch{dist: make([]float64, n), late: make([]uint16, n), pred: make([]int32, n), edge: make([]int32, n), settled: make([]bool, n)}
	for i := range sc.dist {
		sc.dist[i], sc.pred[i] = math.Inf(1), -1
	}
	return sc
}

// release gives a lent scratch back, its touched states set back; s's
// arrays are not to be read after.
func (s *routeSearch) release() {
	sc := s.scratch
	if sc == nil {
		return
	}
	for _, v := range sc.touched {
		sc.dist[v], sc.late[v], sc.pred[v], sc.edge[v], sc.settled[v] = math.Inf(1), 0, -1, 0, false
	}
	sc.touched, sc.front = sc.touched[:0], s.front[:0]
	s.scratch, s.dist, s.late, s.pred, s.edge, s.settled, s.front = nil, nil, nil, nil, nil, nil, nil
	s.t.routing.scratch.Put(sc)
}

// searchRoutes searches from node src to node dst (-1: to every node),
// around the links down reports (nil: none), counting routes when count
// is set. A search to one destination without counts borrows its arrays
// (searchScratch): call release when done with it.
func (t *Topology) searchRoutes(src, dst int, down func(int) bool, count bool) *routeSearch {
	n := 2 * len(t.Nodes)
	s := &routeSearch{t: t, src: src, dst: dst, down: down}
	if dst >= 0 && !count {
		sc := t.routing.scratchFor(n)
		s.scratch, s.dist, s.late, s.pred, s.edge, s.settled, s.front = sc, sc.dist, sc.late, sc.pred, sc.edge, sc.settled, sc.front
	} else {
		s.dist, s.late, s.pred, s.edge, s.settled = make([]float64, n), make([]uint16, n), make([]int32, n), make([]int32, n), make([]bool, n)
		for i := range s.dist {
			s.dist[i], s.pred[i] = math.Inf(1), -1
		}
	}
	first := state(src, false)
	if count {
		s.count = make([]uint8, len(s.dist))
		s.count[first] = 1
	}
	if dst < 0 {
		s.narrowLo, s.narrowHi = make([]float64, n), make([]float64, n)
		s.narrowLo[first], s.narrowHi[first] = math.Inf(1), math.Inf(1)
	}
	s.touch(first)
	s.dist[first] = 0
	s.front = append(s.front[:0], stateItem{0, 0, int32(first)})
	s.run()
	return s
}

// touch notes that state v is about to leave its fresh values, on a lent
// scratch.
func (s *routeSearch) touch(v int) {
	if s.scratch != nil && math.IsInf(s.dist[v], 1) {
		s.scratch.touched = append(s.scratch.touched, int32(v))
	}
}

// run settles states nearest first, until the destination's first state
// is settled or every reachable state is.
func (s *routeSearch) run() {
	t := s.t
	dstLeaf, leafDst := Leaf{}, false
	if s.dst >= 0 {
		dstLeaf, leafDst = t.Leaf(s.dst)
	}
	settled := s.settled
	for s.front.Len() > 0 {
		it := heap.Pop(&s.front).(stateItem)
		u := int(it.state)
		if settled[u] || it.dist != s.dist[u] || it.late != s.late[u] {
			continue
		}
		settled[u] = true
		node, crossed := u/2, u%2 == 1
		if node == s.dst {
			return
		}
		if node != s.src && t.degree(int64(node)) == 1 {
			continue // a leaf is no way through
		}
		lo, hi := t.adjStart[node], t.adjStart[node+1]
		if s.dst >= 0 {
			hi = t.adjLeaf[node] // no leaf but the destination
		}
		for _, a := range t.adj[lo:hi] {
			s.relax(u, crossed, a)
		}
		if leafDst && dstLeaf.Neighbour == node {
			s.relax(u, crossed, adjItem{nbr: int32(s.dst), edge: int32(dstLeaf.In)})
		}
	}
}

// relax offers the state after taking edge a from state u.
func (s *routeSearch) relax(u int, crossed bool, a adjItem) {
	t := s.t
	e := int(a.edge)
	if s.down != nil && s.down(e/2) {
		return
	}
	class := t.EdgeClass(e)
	d, late := s.dist[u]+edgeWeight(t.Links[e/2].Latency), s.late[u]
	if crossed && class == ClassNVLink && t.touchesGPU(e/2) {
		late = min(late+1, math.MaxUint16)
	}
	v := state(int(a.nbr), crossed || class == ClassNet)
	switch {
	case d < s.dist[v] || d == s.dist[v] && late < s.late[v]:
		s.touch(v)
		s.dist[v], s.late[v], s.pred[v], s.edge[v] = d, late, int32(u), int32(e)
		if s.count != nil {
			s.count[v] = s.count[u]
		}
		if s.narrowLo != nil {
			bw := t.EdgeBW(e)
			s.narrowLo[v], s.narrowHi[v] = min(s.narrowLo[u], bw), min(s.narrowHi[u], bw)
		}
		heap.Push(&s.front, stateItem{d, late, int32(v)})
	case d == s.dist[v] && late == s.late[v]:
		if s.count != nil {
			s.count[v] = min(2, s.count[v]+s.count[u])
		}
		if s.narrowLo != nil {
			bw := t.EdgeBW(e)
			s.narrowLo[v], s.narrowHi[v] = min(s.narrowLo[v], s.narrowLo[u], bw), max(s.narrowHi[v], min(s.narrowHi[u], bw))
		}
	}
}

// touchesGPU reports whether link l has a GPU at an end.
func (t *Topology) touchesGPU(l int) bool {
	return t.Nodes[t.Links[l].A].Kind == GPU || t.Nodes[t.Links[l].B].Kind == GPU
}

// best is node v's state that a route to it ends in: the nearer, or the
// one not crossed when both are as near (the first settled); -1 when v is
// out of reach.
func (s *routeSearch) best(v int) int {
	a, b := state(v, false), state(v, true)
	switch {
	case math.IsInf(s.dist[a], 1) && math.IsInf(s.dist[b], 1):
		return -1
	case s.nearer(b, a):
		return b
	}
	return a
}

// nearer reports whether state a is nearer than state b: less weight, or
// as much and fewer NVLink hops after the network.
func (s *routeSearch) nearer(a, b int) bool {
	return s.dist[a] < s.dist[b] || s.dist[a] == s.dist[b] && s.late[a] < s.late[b]
}

// path is the route to node v, or false when v is out of reach.
func (s *routeSearch) path(v int) (Path, bool) {
	return walkBack(s.t, s.best(v), s.pred, s.edge)
}

// walkBack is the route that ends in state end, read back through each
// state's predecessor and the edge into it; false when end is -1 (out of
// reach).
func walkBack(t *Topology, end int, pred, edge []int32) (Path, bool) {
	if end < 0 {
		return Path{}, false
	}
	n := 0
	for u := end; pred[u] >= 0; u = int(pred[u]) {
		n++
	}
	p := Path{Edges: make([]int, n)}
	for u := end; pred[u] >= 0; u = int(pred[u]) {
		n--
		p.Edges[n] = int(edge[u])
	}
	// Sum in whole picoseconds, as routing weighs them, so 2us + 2us + 2us
	// is exactly 6us rather than 5.999999999999999us.
	var ps float64
	for _, e := range p.Edges {
		ps += math.Round(t.Links[e/2].Latency * 1e12)
	}
	p.Latency = ps / 1e12
	return p, true
}

// routeTree is what a search to every node from one source leaves for
// its routes, without the search's other state: each node's end state
// and each state's predecessor and edge in. A route from it is a walk
// back from its end, as long as the route and with no search; it costs
// 20 bytes a node, where the routes themselves cost 8 bytes an edge of
// each (on a ring of n GPUs, n²/4 edges a source).
type routeTree struct {
	end        []int32 // by node: the state its route ends in; -1 out of reach
	pred, edge []int32 // by state, as routeSearch's
}

// tree keeps the search's routes as a routeTree.
func (s *routeSearch) tree() *routeTree {
	end := make([]int32, len(s.t.Nodes))
	for v := range end {
		end[v] = int32(s.best(v))
	}
	return &routeTree{end: end, pred: s.pred, edge: s.edge}
}

// bytes is the tree's size.
func (r *routeTree) bytes() int { return 4 * (len(r.end) + len(r.pred) + len(r.edge)) }

// treeBytes is the bytes of a routeTree on a fabric of nodes nodes: an
// end a node, a predecessor and an edge a state (two a node).
func treeBytes(nodes int) int { return 4 * (nodes + 2*nodes + 2*nodes) }

// path is the route to node v, or false when v is out of reach.
func (r *routeTree) path(t *Topology, v int) (Path, bool) {
	return walkBack(t, int(r.end[v]), r.pred, r.edge)
}

// routes counts the shortest routes to node v, up to 2: those of its
// states as near as its nearest.
func (s *routeSearch) routes(v int) uint8 {
	a, b := state(v, false), state(v, true)
	switch {
	case s.nearer(a, b):
		return s.count[a]
	case s.nearer(b, a):
		return s.count[b]
	}
	return min(2, s.count[a]+s.count[b])
}

// sameNarrowest reports whether every shortest route to node v has a
// narrowest link of one bandwidth (so costs what Route's costs), in a
// search to every node.
func (s *routeSearch) sameNarrowest(v int) bool {
	a, b := state(v, false), state(v, true)
	switch {
	case s.nearer(a, b):
		return s.narrowLo[a] == s.narrowHi[a]
	case s.nearer(b, a):
		return s.narrowLo[b] == s.narrowHi[b]
	}
	return min(s.narrowLo[a], s.narrowLo[b]) == max(s.narrowHi[a], s.narrowHi[b])
}

// stateItem is a state on the frontier at a distance.
type stateItem struct {
	dist  float64
	late  uint16
	state int32
}

// stateHeap is the frontier, nearest first, then by state
// (container/heap).
type stateHeap []stateItem

func (h stateHeap) Len() int { return len(h) }
func (h stateHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	return a.dist < b.dist || a.dist == b.dist && (a.late < b.late || a.late == b.late && a.state < b.state)
}
func (h stateHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *stateHeap) Push(x any)   { *h = append(*h, x.(stateItem)) }
func (h *stateHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
