package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/spf13/cobra"

	"github.com/commsim/commsim/topology"
)

func newTopoCmd() *cobra.Command {
	topo := &cobra.Command{
		Use:   "topo",
		Short: "Show, validate and export topologies",
		Example: `  commsim topo show dgx-h100
  commsim topo validate fabric.yaml
  commsim topo export torus:4x4,bw=50GB/s > torus.yaml`,
	}
	topo.AddCommand(&cobra.Command{
		Use:   "show SPEC|FILE",
		Short: "Summarise a topology: devices, link classes and sample routes",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := resolveTopology(args[0])
			if err != nil {
				return err
			}
			return showTopology(cmd.OutOrStdout(), t)
		},
	})
	topo.AddCommand(&cobra.Command{
		Use:   "validate FILE|SPEC",
		Short: "Check a topology file or spec and report the first problem",
		Args:  cobra.ExactArgs(1),
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
		Args:  cobra.ExactArgs(1),
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
func showTopology(w io.Writer, t *topology.Topology) error {
	kinds := map[topology.Kind]int{}
	for _, n := range t.Nodes {
		kinds[n.Kind]++
	}
	var parts []string
	for _, k := range []topology.Kind{topology.GPU, topology.Switch, topology.NIC, topology.CPU} {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
		}
	}
	fmt.Fprintf(w, "topology %s: %s; %d links (full duplex)\n\n", t.Name, strings.Join(parts, ", "), len(t.Links))

	type class struct {
		ends    string
		bw, lat float64
	}
	counts := map[class]int{}
	var order []class
	for _, l := range t.Links {
		a, b := t.Nodes[l.A].Kind, t.Nodes[l.B].Kind
		if a > b {
			a, b = b, a
		}
		c := class{a.String() + "-" + b.String(), l.BW, l.Latency}
		if counts[c] == 0 {
			order = append(order, c)
		}
		counts[c]++
	}
	tbl := tablewriter.NewWriter(w)
	tbl.Header("links", "count", "bw per direction", "latency")
	for _, c := range order {
		if err := tbl.Append(c.ends, fmt.Sprint(counts[c]), topology.FormatBandwidth(c.bw), topology.FormatLatency(c.lat)); err != nil {
			return err
		}
	}
	if err := tbl.Render(); err != nil {
		return err
	}

	gpus := t.GPUs()
	if len(gpus) > 1 {
		fmt.Fprintln(w)
		rt := tablewriter.NewWriter(w)
		rt.Header("route", "hops", "latency", "bottleneck bw", "path")
		for _, dst := range routeSamples(len(gpus)) {
			p, err := t.RouteRanks(0, dst)
			if err != nil {
				return err
			}
			bottleneck := 0.0
			names := []string{t.Nodes[gpus[0]].Name}
			for i, e := range p.Edges {
				if bw := t.EdgeBW(e); i == 0 || bw < bottleneck {
					bottleneck = bw
				}
				l := t.Links[e/2]
				next := l.B
				if e%2 == 1 {
					next = l.A
				}
				names = append(names, t.Nodes[next].Name)
			}
			if err := rt.Append(fmt.Sprintf("rank 0 -> %d", dst), fmt.Sprint(len(p.Edges)),
				topology.FormatLatency(p.Latency), topology.FormatBandwidth(bottleneck), strings.Join(names, " > ")); err != nil {
				return err
			}
		}
		if err := rt.Render(); err != nil {
			return err
		}
	}
	return nil
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
