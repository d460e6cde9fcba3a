package main

import (
	"cmp"
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
			return showTopology(cmd.OutOrStdout(), t, args[0], showFormat, showLinks)
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

// showTopology prints the summary as a table, JSON or CSV; a topology
// that names itself nothing goes by given, the spec or file it came from.
func showTopology(w io.Writer, t *topology.Topology, given, format string, allLinks bool) error {
	sum, err := summarise(t, allLinks)
	if err != nil {
		return err
	}
	sum.Name = cmp.Or(sum.Name, given)
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
	fmt.Fprintf(w, "topology %s: %s; %d links (full duplex)\n", sum.Name, strings.Join(parts, ", "), len(t.Links))
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
