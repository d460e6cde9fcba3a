package main

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/commsim/commsim/topology"
)

// layout places every node of a topology in the plane (one unit is about
// the distance between neighbouring GPUs) and bows some links.
type layout struct {
	x, y []float64
	bow  [][2]float64 // per link: offset of its middle from the straight line
}

func newLayout(t *topology.Topology) layout {
	n := len(t.Nodes)
	return layout{x: make([]float64, n), y: make([]float64, n), bow: make([][2]float64, len(t.Links))}
}

// layoutTopology picks a layout by the topology's shape: a torus named
// torus:AxB[xC] on its grid; GPUs only (ring, mesh) on a circle; GPUs that
// all hang off switches grouped around them; anything else on a circle.
func layoutTopology(t *topology.Topology) layout {
	if l, ok := torusLayout(t); ok {
		return l
	}
	if t.NumGPUs() == len(t.Nodes) {
		return circleLayout(t)
	}
	if l, ok := groupLayout(t); ok {
		return l
	}
	return circleLayout(t)
}

// place puts nodes on a circle of the given centre and radius (at least
// wide enough to keep them 1.1 apart), the first at angle start, then
// clockwise over span radians.
func (l *layout) place(nodes []int, cx, cy, radius, start, span float64) {
	k := float64(len(nodes))
	step := span / k
	if span < 2*math.Pi && k > 1 {
		step = span / (k - 1)
	}
	if k > 1 {
		radius = max(radius, 1.1/(2*math.Sin(min(step, math.Pi)/2)))
	}
	for j, v := range nodes {
		a := start - step*float64(j)
		l.x[v], l.y[v] = cx+radius*math.Cos(a), cy+radius*math.Sin(a)
	}
}

// circleLayout puts every node on one circle in index order, the first at
// the top.
func circleLayout(t *topology.Topology) layout {
	l := newLayout(t)
	l.place(seq(len(t.Nodes)), 0, 0, 1, math.Pi/2, 2*math.Pi)
	return l
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// torusLayout draws torus:AxB as A rows of B GPUs, and torus:AxBxC as A
// grids of BxC stacked in perspective; links that wrap around are bowed so
// that they do not run over the GPUs in between.
func torusLayout(t *topology.Topology) (layout, bool) {
	head, _, _ := strings.Cut(strings.ToLower(t.Name), ",")
	shape, ok := strings.CutPrefix(head, "torus:")
	if !ok || t.NumGPUs() != len(t.Nodes) {
		return layout{}, false
	}
	var dims []int
	p := 1
	for _, s := range strings.Split(shape, "x") {
		d, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || d < 1 {
			return layout{}, false
		}
		dims, p = append(dims, d), p*d
	}
	if len(dims) == 2 {
		dims = append([]int{1}, dims...)
	}
	if len(dims) != 3 || p != len(t.Nodes) {
		return layout{}, false
	}
	const gap = 1.5
	l := newLayout(t)
	coord := func(v int) (a, b, c int) { return v / (dims[1] * dims[2]), v / dims[2] % dims[1], v % dims[2] }
	for v := range t.Nodes {
		a, b, c := coord(v)
		l.x[v], l.y[v] = gap*(float64(c)+0.35*float64(a)), gap*(0.55*float64(a)-float64(b))
	}
	for i, lk := range t.Links {
		a0, b0, c0 := coord(lk.A)
		a1, b1, c1 := coord(lk.B)
		switch { // wraps just above their row or left of their column
		case iabs(a0-a1) > 1:
			l.bow[i] = [2]float64{0.45, -0.3}
		case iabs(c0-c1) > 1:
			l.bow[i] = [2]float64{0, 0.45}
		case iabs(b0-b1) > 1:
			l.bow[i] = [2]float64{-0.45, 0}
		}
	}
	return l, true
}

func iabs(x int) int { return max(x, -x) }

// groupLayout handles GPUs that each link to a switch (their home: the
// first switch among their links). One switch: it sits in the middle with
// its GPUs around it. Several (a cluster's nodes): the GPUs on one circle,
// node by node, each node's switch just outside its GPUs. NICs (and CPUs)
// sit by the GPU they hang off; the remaining nodes (network, rail and
// spine switches) ring by ring by their distance from those: in the middle
// for a cluster, outside for one switch.
func groupLayout(t *topology.Topology) (layout, bool) {
	n := len(t.Nodes)
	adj := make([][]int, n)
	for _, lk := range t.Links {
		adj[lk.A] = append(adj[lk.A], lk.B)
		adj[lk.B] = append(adj[lk.B], lk.A)
	}
	firstOf := func(v int, k topology.Kind) int {
		i := slices.IndexFunc(adj[v], func(u int) bool { return t.Nodes[u].Kind == k })
		if i < 0 {
			return -1
		}
		return adj[v][i]
	}
	var groups []int // home switches in order of their first GPU
	members := map[int][]int{}
	placed := make([]bool, n)
	for _, g := range t.GPUs() {
		sw := firstOf(g, topology.Switch)
		if sw < 0 {
			return layout{}, false
		}
		if members[sw] == nil {
			groups = append(groups, sw)
		}
		members[sw] = append(members[sw], g)
		placed[g], placed[sw] = true, true
	}
	owner := make([]int, n) // the GPU a NIC or CPU hangs off, or -1
	for v, node := range t.Nodes {
		owner[v] = -1
		if !placed[v] && (node.Kind == topology.NIC || node.Kind == topology.CPU) {
			owner[v] = firstOf(v, topology.GPU)
		}
	}
	// The rest by breadth-first distance from what is placed so far.
	depth := make([]int, n)
	var queue []int
	var tiers [][]int
	for v := range n {
		if depth[v] = -1; placed[v] || owner[v] >= 0 {
			depth[v], queue = 0, append(queue, v)
		}
	}
	for ; len(queue) > 0; queue = queue[1:] {
		for _, v := range adj[queue[0]] {
			if depth[v] < 0 {
				depth[v], queue = depth[queue[0]]+1, append(queue, v)
				if depth[v] > len(tiers) {
					tiers = append(tiers, nil)
				}
				tiers[depth[v]-1] = append(tiers[depth[v]-1], v)
			}
		}
	}
	radii := make([]float64, len(tiers))
	rad := -1.2
	for i := len(tiers) - 1; i >= 0; i-- {
		if rad < 0 && len(tiers[i]) == 1 {
			rad = 0
		} else {
			rad = max(rad+1.2, 1.1*float64(len(tiers[i]))/(2*math.Pi))
		}
		radii[i] = rad
	}

	l := newLayout(t)
	const nicGap = 0.8 // from a GPU to its NIC
	out := 1.0         // NICs beyond their GPU (one switch) or before it (a cluster)
	if len(groups) == 1 {
		r := max(1.5, 1.1*float64(len(members[groups[0]]))/(2*math.Pi))
		l.place(members[groups[0]], 0, 0, r, math.Pi/2, 2*math.Pi)
		for i, tier := range tiers {
			l.place(tier, 0, 0, r+2+1.5*float64(i), math.Pi/2, 2*math.Pi)
		}
	} else {
		// One circle of GPUs, node by node with a gap between nodes, each
		// node's switch outside its arc; NICs inside, the network in the middle.
		out = -1
		slots := len(t.GPUs()) + len(groups)
		step := 2 * math.Pi / float64(slots)
		inner := 0.0
		if len(radii) > 0 {
			inner = radii[0]
		}
		r := max(2.2, 1.1*float64(slots)/(2*math.Pi), inner+nicGap+1.4)
		angle := math.Pi + step*float64(len(members[groups[0]])-1)/2 // node 0 centred on the left
		for _, sw := range groups {
			mid := angle - step*float64(len(members[sw])-1)/2
			l.x[sw], l.y[sw] = (r+1.3)*math.Cos(mid), (r+1.3)*math.Sin(mid)
			for _, g := range members[sw] {
				l.x[g], l.y[g] = r*math.Cos(angle), r*math.Sin(angle)
				angle -= step
			}
			angle -= step
		}
		for i, tier := range tiers {
			if radii[i] == 0 {
				l.x[tier[0]], l.y[tier[0]] = 0, 0
				continue
			}
			l.place(tier, 0, 0, radii[i], math.Pi, 2*math.Pi)
		}
	}
	fan := map[int]int{} // NICs and CPUs by their GPU, fanned out if several
	for v, g := range owner {
		if g < 0 {
			continue
		}
		a := math.Atan2(l.y[g], l.x[g]) + 0.5*float64((fan[g]+1)/2)*float64(1-2*(fan[g]%2))
		fan[g]++
		l.x[v], l.y[v] = l.x[g]+out*nicGap*math.Cos(a), l.y[g]+out*nicGap*math.Sin(a)
	}
	return l, true
}
