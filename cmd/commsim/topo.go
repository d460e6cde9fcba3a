package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"

	"github.com/commsim/commsim/topology"
)

func newTopoCmd() *cobra.Command {
	topo := &cobra.Command{
		Use:   "topo",
		Short: "List presets; show, validate, export and draw topologies",
		Example: `  commsim topo show dgx-h100
  commsim topo validate fabric.yaml
  commsim topo export torus:4x4,bw=50GB/s > torus.yaml
  commsim topo draw cluster:2x4 --out cluster.svg
  commsim topo draw ring:8 --op allreduce --algo ring -e 64MiB --out ring.png
  commsim topo presets`,
	}
	topo.AddCommand(newTopoDrawCmd(), newTopoPresetsCmd())
	var showFormat string
	var showLinks bool
	show := &cobra.Command{
		Use:   "show SPEC|FILE",
		Short: "Summarise a topology: devices, link classes, bisection bandwidth, sample routes and sources",
		Long: `show prints the number of nodes of each kind, the GPUs' reduction bandwidth,
the links grouped by class and by name (the names what-if's --fault takes:
all of them with --links, or up to 32), the bisection bandwidth, the routes
from rank 0 to a few peers, and for a preset where each number comes from.

Bisection bandwidth is the least bandwidth, one direction, of the links cut
to split the GPUs in two halves. The exact minimum is NP-hard, so show gives
the smallest exact max-flow over a few fixed cuts: ranks r mod b < b/2
against the rest for b = ranks, 2, then other even divisors of the ranks
(first vs second half, even vs odd, torus dimensions, a cluster's
node-aligned halves and the halves of each node), and the first half of
the GPUs met breadth-first and depth-first from rank 0's GPU (arcs of a
ring numbered out of order); an upper bound.

The simulator routes each pair of GPUs down one shortest route. Where
pairs have several (parallel spines, a torus), show counts them: their
traffic leaves the other routes idle unless a fault moves it there.`,
		Example: `  commsim topo show dgx-h100
  commsim topo show torus:4x4,bw=50GB/s
  commsim topo show fabric.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := resolveTopology(args[0])
			if err != nil {
				return err
			}
			if showFormat, err = reportFormat(showFormat, "table", "csv", "json"); err != nil {
				return err
			}
			return showTopology(cmd.OutOrStdout(), t, showFormat, showLinks)
		},
	}
	show.Flags().StringVar(&showFormat, "format", "table", "output: table|csv|json")
	show.Flags().BoolVar(&showLinks, "links", false, fmt.Sprintf("list every link by name (as --fault names them), not only up to %d", maxListedLinks))
	topo.AddCommand(show)
	topo.AddCommand(&cobra.Command{
		Use:   "validate FILE|SPEC",
		Short: "Check a topology file or spec and report the first problem",
		Example: `  commsim topo validate fabric.yaml
  commsim topo validate cluster:4x8,nicbw=400Gb/s`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := resolveTopology(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok (%d gpus, %d nodes, %d links)\n", args[0], t.NumGPUs(), len(t.Nodes), len(t.Links))
			return nil
		},
	})
	topo.AddCommand(&cobra.Command{
		Use:   "export SPEC|FILE",
		Short: "Write a topology as YAML (the file format commsim reads back)",
		Example: `  commsim topo export dgx-h100x2 > two-nodes.yaml
  commsim bench --topo two-nodes.yaml --op allreduce`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := resolveTopology(args[0])
			if err != nil {
				return err
			}
			return t.WriteYAML(cmd.OutOrStdout())
		},
	})
	return topo
}

// resolveTopology loads a spec or file; a topology that cannot be built is
// bad input.
func resolveTopology(arg string) (*topology.Topology, error) {
	t, err := topology.Resolve(arg)
	if err != nil {
		return nil, usageError{err}
	}
	return t, nil
}

// showTopology prints node counts, links grouped by class, and the routes
// from rank 0 to its nearest and farthest peers.
// topoSummary is what show reports, as plain data for every format.
type topoSummary struct {
	Name      string         `json:"name"`
	Nodes     map[string]int `json:"nodes"` // count per kind
	GPUReduce []reduceClass  `json:"gpu_reduce"`
	Links     []linkClass    `json:"links"`
	// LinkNames are the links as what-if's --fault names them, in the
	// topology's order: all of them with --links, else up to
	// maxListedLinks (LinkCount says how many there are).
	LinkNames []string      `json:"link_names"`
	LinkCount int           `json:"link_count"`
	Bisection *bisectionSum `json:"bisection,omitempty"`
	Multipath *multipathSum `json:"multipath,omitempty"`
	Routes    []routeSum    `json:"routes"`
	Preset    string        `json:"preset,omitempty"`
	Sources   []string      `json:"sources,omitempty"` // where a preset's numbers come from
}

// reduceClass is how many GPUs reduce at one bandwidth.
type reduceClass struct {
	Count     int     `json:"count"`
	BW        float64 `json:"bw_bytes_per_s"` // 0 when unlimited
	Unlimited bool    `json:"unlimited"`      // reduce=inf: reductions take no time
}

// maxListedLinks is how many link names show lists without --links.
const maxListedLinks = 32

type linkClass struct {
	Ends    string  `json:"ends"` // e.g. "gpu-switch"
	Count   int     `json:"count"`
	BW      float64 `json:"bw_bytes_per_s"`
	Latency float64 `json:"latency_s"`
}

type bisectionSum struct {
	BW   float64 `json:"bw_bytes_per_s"` // one direction
	Cut  string  `json:"cut"`
	Cuts int     `json:"candidate_cuts"`
}

// multipathSum counts the GPU pairs that have more than one shortest
// route. The simulator sends each pair's traffic down one of them
// (Route's), so a second spine carries nothing until a fault moves a
// route onto it, whatever the bisection's max-flow says.
type multipathSum struct {
	Pairs   int `json:"pairs"`   // with two or more equally short routes
	Checked int `json:"checked"` // GPU pairs counted
	Sources int `json:"sources"` // the GPUs they start from: all, or an even sample
}

// maxMultipathSources bounds the route searches multipath makes: one from
// each of at most this many GPUs, spread evenly over the ranks.
const maxMultipathSources = 64

// multipath counts the GPU pairs, from every GPU or an even sample of
// them, that have several shortest routes.
func multipath(t *topology.Topology) *multipathSum {
	gpus := t.GPUs()
	step := max(1, (len(gpus)+maxMultipathSources-1)/maxMultipathSources)
	m := &multipathSum{}
	for r := 0; r < len(gpus); r += step {
		counts := t.ShortestRoutes(gpus[r])
		m.Sources++
		for _, v := range gpus {
			if v == gpus[r] {
				continue
			}
			m.Checked++
			if counts[v] > 1 {
				m.Pairs++
			}
		}
	}
	return m
}

type routeSum struct {
	From       int      `json:"from"`
	To         int      `json:"to"`
	Hops       int      `json:"hops"`
	Latency    float64  `json:"latency_s"`
	Bottleneck float64  `json:"bottleneck_bytes_per_s"`
	Path       []string `json:"path"`
}

// summarise gathers show's figures: node counts, links grouped by class,
// the bisection bandwidth and the routes from rank 0 to a few peers.
func summarise(t *topology.Topology, allLinks bool) (topoSummary, error) {
	sum := topoSummary{Name: t.Name, Nodes: map[string]int{}, LinkCount: len(t.Links)}
	reduce := map[float64]int{}
	for _, n := range t.Nodes {
		sum.Nodes[n.Kind.String()]++
		if n.Kind == topology.GPU {
			reduce[n.ReduceBW]++
		}
	}
	for _, bw := range slices.Sorted(maps.Keys(reduce)) {
		c := reduceClass{Count: reduce[bw], BW: bw}
		if math.IsInf(bw, 1) {
			c.BW, c.Unlimited = 0, true
		}
		sum.GPUReduce = append(sum.GPUReduce, c)
	}
	for i, l := range t.Links {
		if !allLinks && i == maxListedLinks {
			break
		}
		sum.LinkNames = append(sum.LinkNames, t.Nodes[l.A].Name+"-"+t.Nodes[l.B].Name)
	}
	if p, ok := topology.PresetOf(t.Name); ok {
		sum.Preset, sum.Sources = p.Name, p.Sources
	}
	index := map[linkClass]int{}
	for _, l := range t.Links {
		a, b := t.Nodes[l.A].Kind, t.Nodes[l.B].Kind
		if a > b {
			a, b = b, a
		}
		c := linkClass{Ends: a.String() + "-" + b.String(), BW: l.BW, Latency: l.Latency}
		i, ok := index[c]
		if !ok {
			i = len(sum.Links)
			index[c] = i
			sum.Links = append(sum.Links, c)
		}
		sum.Links[i].Count++
	}
	if t.NumGPUs() >= 2 && len(t.Nodes)+len(t.Links) <= maxBisectionSize {
		b := bisectionBW(t)
		sum.Bisection = &bisectionSum{BW: b.bw, Cut: b.best, Cuts: b.cuts}
		sum.Multipath = multipath(t)
	}
	gpus := t.GPUs()
	if len(gpus) > 1 {
		for _, dst := range routeSamples(len(gpus)) {
			p, err := t.RouteRanks(0, dst)
			if err != nil {
				return sum, err
			}
			r := routeSum{From: 0, To: dst, Hops: len(p.Edges), Latency: p.Latency, Path: []string{t.Nodes[gpus[0]].Name}}
			for i, e := range p.Edges {
				if bw := t.EdgeBW(e); i == 0 || bw < r.Bottleneck {
					r.Bottleneck = bw
				}
				l := t.Links[e/2]
				next := l.B
				if e%2 == 1 {
					next = l.A
				}
				r.Path = append(r.Path, t.Nodes[next].Name)
			}
			sum.Routes = append(sum.Routes, r)
		}
	}
	return sum, nil
}

// showTopology prints the summary as a table, JSON or CSV.
func showTopology(w io.Writer, t *topology.Topology, format string, allLinks bool) error {
	sum, err := summarise(t, allLinks)
	if err != nil {
		return err
	}
	switch format {
	case "json":
		return json.NewEncoder(w).Encode(sum)
	case "csv":
		rows := [][]string{{"record", "name", "count", "bw_bytes_per_s", "latency_s", "hops", "path"}}
		for _, c := range sum.GPUReduce {
			bw := fmtFloat(c.BW)
			if c.Unlimited {
				bw = "inf"
			}
			rows = append(rows, []string{"gpu_reduce", "gpu", strconv.Itoa(c.Count), bw, "", "", ""})
		}
		for _, c := range sum.Links {
			rows = append(rows, []string{"links", c.Ends, strconv.Itoa(c.Count), fmtFloat(c.BW), fmtFloat(c.Latency), "", ""})
		}
		for _, n := range sum.LinkNames {
			rows = append(rows, []string{"link", n, "", "", "", "", ""})
		}
		if b := sum.Bisection; b != nil {
			rows = append(rows, []string{"bisection", b.Cut, strconv.Itoa(b.Cuts), fmtFloat(b.BW), "", "", ""})
		}
		if m := sum.Multipath; m != nil {
			rows = append(rows, []string{"multipath", fmt.Sprintf("%d of %d gpu pairs from %d gpus", m.Pairs, m.Checked, m.Sources), strconv.Itoa(m.Pairs), "", "", "", ""})
		}
		for _, r := range sum.Routes {
			rows = append(rows, []string{"route", fmt.Sprintf("rank %d -> %d", r.From, r.To), "", fmtFloat(r.Bottleneck),
				fmtFloat(r.Latency), strconv.Itoa(r.Hops), strings.Join(r.Path, " > ")})
		}
		for _, src := range sum.Sources {
			rows = append(rows, []string{"source", sum.Preset, "", "", "", "", src})
		}
		return writeCSVRows(w, rows)
	}
	var parts []string
	for _, k := range []topology.Kind{topology.GPU, topology.Switch, topology.NIC, topology.CPU} {
		if n := sum.Nodes[k.String()]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	fmt.Fprintf(w, "topology %s: %s; %d links (full duplex)\n", t.Name, strings.Join(parts, ", "), len(t.Links))
	if hw := hardwareLine(t); hw != "" {
		fmt.Fprintln(w, "hardware:", hw)
	}
	var reduce []string
	for _, c := range sum.GPUReduce {
		bw := topology.FormatBandwidth(c.BW)
		if c.Unlimited {
			bw = "unlimited (reduce=inf: reductions take no time)"
		}
		reduce = append(reduce, fmt.Sprintf("%d at %s", c.Count, bw))
	}
	fmt.Fprintf(w, "gpu reduction bandwidth: %s\n", strings.Join(reduce, ", "))
	fmt.Fprintln(w)
	tbl := tablewriter.NewWriter(w)
	tbl.Header("links", "count", "bw per direction", "latency")
	for _, c := range sum.Links {
		if err := tbl.Append(c.Ends, fmt.Sprint(c.Count), topology.FormatBandwidth(c.BW), topology.FormatLatency(c.Latency)); err != nil {
			return err
		}
	}
	if err := tbl.Render(); err != nil {
		return err
	}
	names := strings.Join(sum.LinkNames, " ")
	if len(sum.LinkNames) < sum.LinkCount {
		names += fmt.Sprintf(" … (%d more: --links lists all %d)", sum.LinkCount-len(sum.LinkNames), sum.LinkCount)
	}
	fmt.Fprintf(w, "link names (what-if --fault 'link NAME down at T'): %s\n", names)
	fmt.Fprintln(w)
	fmt.Fprintln(w, formatBisection(t, sum.Bisection))
	if line := formatMultipath(sum.Multipath); line != "" {
		fmt.Fprintln(w, line)
	}
	if len(sum.Routes) > 0 {
		fmt.Fprintln(w)
		rt := tablewriter.NewWriter(w)
		rt.Header("route", "hops", "latency", "bottleneck bw", "path")
		for _, r := range sum.Routes {
			if err := rt.Append(fmt.Sprintf("rank %d -> %d", r.From, r.To), fmt.Sprint(r.Hops),
				topology.FormatLatency(r.Latency), topology.FormatBandwidth(r.Bottleneck), strings.Join(r.Path, " > ")); err != nil {
				return err
			}
		}
		if err := rt.Render(); err != nil {
			return err
		}
	}
	if len(sum.Sources) > 0 {
		fmt.Fprintf(w, "\nsources of preset %s's numbers:\n", sum.Preset)
		for _, src := range sum.Sources {
			fmt.Fprintf(w, "  - %s\n", src)
		}
	}
	return nil
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// hardwareLine says what a fabric tells NCCL's model beyond its links: the
// GPUs' arch, the host CPUs and the switches that reduce in the network
// ("8 hopper gpus, intel host cpus, 1 switch reducing at 276GB/s"); "" when
// it says none of these.
func hardwareLine(t *topology.Topology) string {
	var parts []string
	archs := map[topology.Arch]int{}
	reducing := map[float64]int{}
	for _, n := range t.Nodes {
		if n.Kind == topology.GPU && n.Arch != topology.UnknownArch {
			archs[n.Arch]++
		} else if n.Kind == topology.Switch && n.ReduceBW > 0 {
			reducing[n.ReduceBW]++
		}
	}
	for _, a := range slices.Sorted(maps.Keys(archs)) {
		parts = append(parts, fmt.Sprintf("%d %s gpus", archs[a], a))
	}
	if t.HostCPU != topology.UnknownCPU {
		parts = append(parts, t.HostCPU.String()+" host cpus")
	}
	if t.NICPorts > 1 {
		parts = append(parts, fmt.Sprintf("%d ports a nic", t.NICPorts))
	}
	for _, bw := range slices.Sorted(maps.Keys(reducing)) {
		noun := "switches"
		if reducing[bw] == 1 {
			noun = "switch"
		}
		parts = append(parts, fmt.Sprintf("%d %s reducing at %s", reducing[bw], noun, topology.FormatBandwidth(bw)))
	}
	return strings.Join(parts, ", ")
}

// routeSamples picks a few destination ranks: the neighbour, the middle and
// the last.
func routeSamples(n int) []int {
	var out []int
	for _, r := range []int{1, n / 2, n - 1} {
		if r > 0 && (len(out) == 0 || out[len(out)-1] != r) {
			out = append(out, r)
		}
	}
	return out
}

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
