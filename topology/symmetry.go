package topology

import (
	"encoding/binary"
	"slices"
)

// Automorphism extends a renaming of the ranks (rank r becomes rank
// perm[r]) to the whole fabric, if it can: a renaming of every node and
// directed edge under which the fabric is the same, node kinds, reduction
// bandwidths (of switches too), GPU architectures, link bandwidths and
// latencies included. It returns, for every directed edge, the edge it
// becomes.
//
// Every node that is not a GPU is placed by the GPUs nearest to it (and
// their hop distance): a NIC by its GPU, a node's switch by the node's
// GPUs, a switch every GPU reaches alike by all of them. ok is false when
// perm is not a permutation, when two nodes are placed alike (the
// extension would be a guess), or when the renamed fabric differs.
func (t *Topology) Automorphism(perm []int) (edges []int, ok bool) {
	p := len(t.gpus)
	if !t.built() || len(perm) != p {
		return nil, false
	}
	seen := make([]bool, p)
	for _, q := range perm {
		if q < 0 || q >= p || seen[q] {
			return nil, false
		}
		seen[q] = true
	}
	t.placeOnce.Do(t.placeNodes)
	place, byKey := t.place, t.placed
	if place == nil {
		return nil, false
	}
	node := make([]int, len(t.Nodes))
	for v, k := range place {
		if k.dist == 0 { // a GPU: rank k.ranks[0]
			node[v] = t.gpus[perm[k.ranks[0]]]
			if g := t.Nodes[node[v]]; g.ReduceBW != t.Nodes[v].ReduceBW || g.Arch != t.Nodes[v].Arch {
				return nil, false
			}
			continue
		}
		w, found := byKey[k.renamed(perm)]
		if !found || t.Nodes[w].Kind != t.Nodes[v].Kind || t.Nodes[w].ReduceBW != t.Nodes[v].ReduceBW {
			return nil, false
		}
		node[v] = w
	}
	link := t.linkAt
	edges = make([]int, 2*len(t.Links))
	for i, l := range t.Links {
		a, b := node[l.A], node[l.B]
		j, forward := link[[2]int{a, b}]
		if !forward {
			var found bool
			if j, found = link[[2]int{b, a}]; !found {
				return nil, false
			}
		}
		if m := t.Links[j]; m.BW != l.BW || m.Latency != l.Latency {
			return nil, false
		}
		if forward {
			edges[2*i], edges[2*i+1] = 2*j, 2*j+1
		} else {
			edges[2*i], edges[2*i+1] = 2*j+1, 2*j
		}
	}
	return edges, true
}

// placeNodes places every node by its nearest GPUs, once (Automorphism
// is asked for several renamings), and indexes the places and the links
// by their ends; it leaves
// t.place nil when two nodes are placed alike or there are too many ranks
// to list.
func (t *Topology) placeNodes() {
	place, ok := t.placeByGPUs()
	if !ok {
		return
	}
	byKey := make(map[string]int, len(t.Nodes))
	for v, k := range place {
		if _, dup := byKey[k.key]; dup {
			return
		}
		byKey[k.key] = v
	}
	t.place, t.placed = place, byKey
	t.linkAt = make(map[[2]int]int, len(t.Links))
	for i, l := range t.Links {
		t.linkAt[[2]int{l.A, l.B}] = i
	}
}

// placement is a node's place in the fabric as its nearest GPUs see it.
type placement struct {
	dist  int
	ranks []int // the nearest GPUs' ranks, sorted
	key   string
}

func (k placement) renamed(perm []int) string {
	ranks := make([]int, len(k.ranks))
	for i, r := range k.ranks {
		ranks[i] = perm[r]
	}
	slices.Sort(ranks)
	return placementKey(k.dist, ranks)
}

func placementKey(dist int, ranks []int) string {
	b := binary.AppendUvarint(nil, uint64(dist))
	for _, r := range ranks {
		b = binary.AppendUvarint(b, uint64(r))
	}
	return string(b)
}

// maxPlacementRanks bounds the ranks placeByGPUs lists, all nodes
// together: a deep fabric of many switches that every GPU reaches alike
// would otherwise list every rank for each of them.
const maxPlacementRanks = 1 << 22

// placeByGPUs finds every node's nearest GPUs by a breadth-first search
// from all GPUs at once; ok is false past maxPlacementRanks.
func (t *Topology) placeByGPUs() (place []placement, ok bool) {
	place = make([]placement, len(t.Nodes))
	for i := range place {
		place[i].dist = -1
	}
	listed := 0
	var frontier []int
	for r, g := range t.gpus {
		place[g] = placement{dist: 0, ranks: []int{r}}
		frontier = append(frontier, g)
	}
	for d := 1; len(frontier) > 0; d++ {
		var next []int
		for _, u := range frontier {
			for _, a := range t.adj[t.adjStart[u]:t.adjStart[u+1]] {
				v := int(a.nbr)
				switch place[v].dist {
				case -1:
					place[v].dist = d
					next = append(next, v)
					fallthrough
				case d:
					place[v].ranks = append(place[v].ranks, place[u].ranks...)
				}
			}
		}
		for _, v := range next {
			place[v].ranks = slices.Compact(slices.Sorted(slices.Values(place[v].ranks)))
			if listed += len(place[v].ranks); listed > maxPlacementRanks {
				return nil, false
			}
		}
		frontier = next
	}
	for i := range place {
		place[i].key = placementKey(place[i].dist, place[i].ranks)
	}
	return place, true
}

// ShortestRoutes counts, for every node, the shortest routes from node src
// to it as Route weighs them (latency to the picosecond, then hops, then
// NVLink hops after the network), up to 2: where it is 1, Route's path is
// the only one, so a renaming that maps the fabric onto itself maps the
// route onto the route between the renamed ends. It returns nil for a
// node out of range. The counts are cached, like routes, and shared:
// do not modify them.
func (t *Topology) ShortestRoutes(src int) []uint8 {
	if !t.built() || src < 0 || src >= len(t.Nodes) {
		return nil
	}
	c := t.routing
	c.mu.Lock()
	count, ok := c.shortest[src]
	c.mu.Unlock()
	if ok {
		return count
	}
	s := t.searchRoutes(src, -1, nil, true)
	count = make([]uint8, len(t.Nodes))
	for v := range count {
		count[v] = s.routes(v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shortest == nil || len(c.shortest)*len(t.Nodes) >= maxShortestBytes {
		c.shortest = map[int][]uint8{}
	}
	if kept, ok := c.shortest[src]; ok {
		return kept
	}
	c.shortest[src] = count
	return count
}
