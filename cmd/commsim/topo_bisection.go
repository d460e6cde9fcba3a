package main

import (
	"fmt"
	"math"
	"slices"

	"github.com/commsim/commsim/topology"
)

// Limits of the bisection search: at most maxCuts candidate cuts, and none
// at all on fabrics larger than maxBisectionSize nodes plus links (show
// then says so instead of running for minutes).
const (
	maxCuts          = 12
	maxBisectionSize = 1 << 18
)

// cut is a candidate bisection: inA[r] says which half rank r is in.
type cut struct {
	name string
	inA  []bool
}

// bisection is the smallest max-flow over the candidate cuts.
type bisection struct {
	bw   float64 // bytes per second, one direction
	best string  // the cut that gave bw
	cuts int     // candidates tried
}

// formatBisection is show's bisection line, from the summary's figure.
func formatBisection(t *topology.Topology, b *bisectionSum) string {
	const head = "bisection bandwidth"
	switch size := len(t.Nodes) + len(t.Links); {
	case t.NumGPUs() < 2:
		return head + ": none (a single gpu)"
	case size > maxBisectionSize:
		return fmt.Sprintf("%s: not computed (%d nodes and links, over the limit of %d)", head, size, maxBisectionSize)
	}
	return fmt.Sprintf("%s (min over %d candidate cuts): %s per direction, across %s",
		head, b.Cuts, topology.FormatBandwidth(b.BW), b.Cut)
}

// formatMultipath is show's line on pairs with several shortest routes,
// or "" when there are none to tell of.
func formatMultipath(m *multipathSum) string {
	if m == nil || m.Pairs == 0 {
		return ""
	}
	from := "every gpu"
	if gpus := m.Checked/m.Sources + 1; m.Sources < gpus {
		from = fmt.Sprintf("%d of the %d gpus", m.Sources, gpus)
	}
	return fmt.Sprintf("one route a pair: %d of %d gpu pairs (from %s) have several equally short routes; a pair's traffic takes one, the others only around a fault, so it may not reach the bisection's max-flow",
		m.Pairs, m.Checked, from)
}

// bisectionBW runs a max-flow for every candidate cut and keeps the first
// smallest.
func bisectionBW(t *topology.Topology) bisection {
	cuts := candidateCuts(t.NumGPUs())
	for _, c := range graphCuts(t) {
		if !slices.ContainsFunc(cuts, func(o cut) bool { return sameCut(o.inA, c.inA) }) {
			cuts = append(cuts, c)
		}
	}
	res := bisection{bw: math.Inf(1), cuts: len(cuts)}
	for _, c := range cuts {
		if f := cutFlow(t, c.inA); f < res.bw {
			res.bw, res.best = f, c.name
		}
	}
	return res
}

// candidateCuts returns, for p >= 2 ranks, the cuts r mod b < b/2 for b =
// p (first half against second half), b = 2 (even against odd), then every
// other even b dividing p from the largest down, at most maxCuts in all.
func candidateCuts(p int) []cut {
	blocks := []int{p}
	if p > 2 {
		blocks = append(blocks, 2)
	}
	for b := p / 2; b > 2 && len(blocks) < maxCuts; b-- {
		if p%b == 0 && b%2 == 0 {
			blocks = append(blocks, b)
		}
	}
	out := make([]cut, len(blocks))
	for i, b := range blocks {
		out[i] = cut{fmt.Sprintf("ranks with r mod %d < %d | the rest", b, b/2), make([]bool, p)}
		for r := range p {
			out[i].inA[r] = r%b < b/2
		}
		switch b {
		case p:
			out[i].name = fmt.Sprintf("ranks 0-%d | %d-%d", p/2-1, p/2, p-1)
		case 2:
			out[i].name = "even | odd ranks"
		}
	}
	return out
}

// graphCuts are the cuts that follow the fabric rather than the ranks'
// numbers: the first half of the GPUs met breadth-first, then
// depth-first, from rank 0's GPU, each node's links taken in the
// fabric's order. Where a ring's or torus's GPUs are not numbered along
// it, no cut by rank is an arc of it, and these are.
func graphCuts(t *topology.Topology) []cut {
	gpus := t.GPUs()
	if len(gpus) < 2 {
		return nil
	}
	adj := make([][]int, len(t.Nodes))
	for _, l := range t.Links {
		adj[l.A], adj[l.B] = append(adj[l.A], l.B), append(adj[l.B], l.A)
	}
	rank := make([]int, len(t.Nodes))
	for v := range rank {
		rank[v] = -1
	}
	for r, v := range gpus {
		rank[v] = r
	}
	start, half := gpus[0], len(gpus)/2
	var out []cut
	for _, o := range []struct {
		how   string
		order []int
	}{{"breadth-first", breadthFirst(adj, start)}, {"depth-first", depthFirst(adj, start)}} {
		c := cut{fmt.Sprintf("the first %d gpus %s from %s | the rest", half, o.how, t.Nodes[start].Name), make([]bool, len(gpus))}
		in := 0
		for _, v := range o.order {
			if r := rank[v]; r >= 0 && in < half {
				c.inA[r] = true
				in++
			}
		}
		out = append(out, c)
	}
	return out
}

// breadthFirst is the nodes reachable from start, in breadth-first order.
func breadthFirst(adj [][]int, start int) []int {
	seen := make([]bool, len(adj))
	seen[start] = true
	order := []int{start}
	for i := 0; i < len(order); i++ {
		for _, v := range adj[order[i]] {
			if !seen[v] {
				seen[v] = true
				order = append(order, v)
			}
		}
	}
	return order
}

// depthFirst is the nodes reachable from start, in the order a recursive
// depth-first walk first meets them.
func depthFirst(adj [][]int, start int) []int {
	seen := make([]bool, len(adj))
	var order []int
	for stack := []int{start}; len(stack) > 0; {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[u] {
			continue
		}
		seen[u] = true
		order = append(order, u)
		for i := len(adj[u]) - 1; i >= 0; i-- {
			if !seen[adj[u][i]] {
				stack = append(stack, adj[u][i])
			}
		}
	}
	return order
}

// sameCut reports whether two cuts split the ranks alike, either half
// named first.
func sameCut(a, b []bool) bool {
	same, flipped := true, true
	for r := range a {
		same = same && a[r] == b[r]
		flipped = flipped && a[r] != b[r]
	}
	return same || flipped
}

// cutFlow is the maximum flow, in one direction, from the GPUs of half A to
// those of half B, with every link's bandwidth as its capacity each way.
func cutFlow(t *topology.Topology, inA []bool) float64 {
	n := len(t.Nodes)
	src, dst := n, n+1
	g := newFlowNet(n + 2)
	for _, l := range t.Links {
		g.add(l.A, l.B, l.BW, l.BW)
		g.eps = max(g.eps, 1e-12*l.BW)
	}
	for r, v := range t.GPUs() {
		if inA[r] {
			g.add(src, v, math.Inf(1), 0)
		} else {
			g.add(v, dst, math.Inf(1), 0)
		}
	}
	return g.maxFlow(src, dst)
}

// flowNet is a residual network for Dinic's max-flow: arcs come in pairs,
// arc a and its reverse a^1, each with its residual capacity. (gonum's
// network.MaxFlowDinic gives the same values, as the tests check, but it
// augments one path per level graph over map-based graphs: seconds on a few
// hundred GPUs, where this takes milliseconds.)
type flowNet struct {
	head, next, to, level, iter []int32
	res                         []float64
	eps                         float64 // residuals at or below it count as none
}

func newFlowNet(nodes int) *flowNet {
	g := &flowNet{head: make([]int32, nodes), level: make([]int32, nodes), iter: make([]int32, nodes)}
	for i := range g.head {
		g.head[i] = -1
	}
	return g
}

// add joins u and v with capacity cuv from u to v and cvu back.
func (g *flowNet) add(u, v int, cuv, cvu float64) {
	g.arc(u, v, cuv)
	g.arc(v, u, cvu)
}

func (g *flowNet) arc(u, v int, c float64) {
	g.next, g.head[u] = append(g.next, g.head[u]), int32(len(g.to))
	g.to, g.res = append(g.to, int32(v)), append(g.res, c)
}

func (g *flowNet) maxFlow(s, t int) float64 {
	total := 0.0
	for g.bfs(s, t) {
		copy(g.iter, g.head)
		for f := g.dfs(s, t, math.Inf(1)); f > 0; f = g.dfs(s, t, math.Inf(1)) {
			total += f
		}
	}
	return total
}

// bfs levels the nodes reachable from s over arcs with capacity left and
// reports whether t is among them.
func (g *flowNet) bfs(s, t int) bool {
	for i := range g.level {
		g.level[i] = -1
	}
	g.level[s] = 0
	for queue := []int32{int32(s)}; len(queue) > 0; queue = queue[1:] {
		u := queue[0]
		for a := g.head[u]; a >= 0; a = g.next[a] {
			if v := g.to[a]; g.res[a] > g.eps && g.level[v] < 0 {
				g.level[v] = g.level[u] + 1
				queue = append(queue, v)
			}
		}
	}
	return g.level[t] >= 0
}

// dfs pushes up to limit along one level-increasing path from u to t.
func (g *flowNet) dfs(u, t int, limit float64) float64 {
	if u == t {
		return limit
	}
	for ; g.iter[u] >= 0; g.iter[u] = g.next[g.iter[u]] {
		a := g.iter[u]
		if v := int(g.to[a]); g.res[a] > g.eps && g.level[v] == g.level[u]+1 {
			if f := g.dfs(v, t, math.Min(limit, g.res[a])); f > 0 {
				g.res[a] -= f
				g.res[a^1] += f
				return f
			}
		}
	}
	return 0
}
