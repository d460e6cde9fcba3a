package main

import (
	"math"
	"strings"
	"testing"

	"gonum.org/v1/gonum/graph/network"
	"gonum.org/v1/gonum/graph/simple"

	"github.com/commsim/commsim/topology"
)

func mustParse(t *testing.T, spec string) *topology.Topology {
	t.Helper()
	topo, err := topology.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// The values are per direction, with the default 100GB/s links.
func TestBisectionBandwidth(t *testing.T) {
	cases := []struct {
		spec string
		want float64
		cuts int
		best string
	}{
		{"ring:8", 2 * 100e9, 3, "ranks 0-3 | 4-7"},                      // a half of a ring is cut at two links
		{"switch:8", 4 * 100e9, 3, "ranks 0-3 | 4-7"},                    // the four GPU links of the smaller side
		{"mesh:4", 4 * 100e9, 2, "ranks 0-1 | 2-3"},                      // 2×2 pairs
		{"torus:4x4", 8 * 100e9, 4, "ranks 0-7 | 8-15"},                  // two rings of four columns
		{"torus:2x8", 4 * 100e9, 4, "ranks with r mod 8 < 4 | the rest"}, // only the r mod 8 cut finds it
		{"ring:7", 2 * 100e9, 2, "ranks 0-2 | 3-6"},                      // odd: halves of 3 and 4
		{"ring:2", 100e9, 1, "ranks 0-0 | 1-1"},
		{"cluster:2x4", 4 * 50e9, 3, "ranks 0-3 | 4-7"}, // node-aligned: four NIC links
		{"cluster:4x4,rail=true", 8 * 50e9, 4, "ranks 0-7 | 8-15"},
		{"mac-tb5:4", 2 * 10e9, 2, "ranks 0-1 | 2-3"},
	}
	for _, c := range cases {
		b := bisectionBW(mustParse(t, c.spec))
		if math.Abs(b.bw-c.want) > 1e-9*c.want || b.cuts != c.cuts || b.best != c.best {
			t.Errorf("%s: %v over %d cuts across %q, want %v over %d across %q", c.spec, b.bw, b.cuts, b.best, c.want, c.cuts, c.best)
		}
	}
}

func TestTopoShowPrintsBisection(t *testing.T) {
	for spec, want := range map[string]string{
		"ring:8":    "bisection bandwidth (min over 3 candidate cuts): 200GB/s per direction, across ranks 0-3 | 4-7",
		"torus:4x4": "bisection bandwidth (min over 4 candidate cuts): 800GB/s per direction",
		"ring:1":    "bisection bandwidth: none (a single gpu)",
	} {
		status, out, errOut := commsim("topo", "show", spec)
		if status != 0 || !strings.Contains(out, want) {
			t.Errorf("%s: status %d, want %q in:\n%s%s", spec, status, want, out, errOut)
		}
	}
}

func TestCandidateCutsAreBalancedAndDistinct(t *testing.T) {
	for _, p := range []int{2, 3, 7, 8, 12, 72, 1024, 720720} {
		cuts := candidateCuts(p)
		if len(cuts) == 0 || len(cuts) > maxCuts {
			t.Fatalf("p=%d: %d cuts", p, len(cuts))
		}
		seen := map[string]bool{}
		for _, c := range cuts {
			a := 0
			var key strings.Builder
			for _, in := range c.inA {
				if in {
					a++
					key.WriteByte('1')
				} else {
					key.WriteByte('0')
				}
			}
			if a != p/2 && a != (p+1)/2 {
				t.Errorf("p=%d, %s: %d ranks in half A, want %d or %d", p, c.name, a, p/2, (p+1)/2)
			}
			if seen[key.String()] {
				t.Errorf("p=%d: cut %s repeats another", p, c.name)
			}
			seen[key.String()] = true
		}
	}
}

// gonum's MaxFlowDinic is the reference for the max-flow of every cut.
func TestCutFlowAgreesWithGonum(t *testing.T) {
	for _, spec := range []string{"ring:6", "mesh:5", "switch:6", "torus:3x4", "torus:2x2x3", "cluster:3x2",
		"cluster:2x4,rail=true,bw=300GB/s", "dgx-h100x2", "mac-tb5:5"} {
		topo := mustParse(t, spec)
		for _, c := range candidateCuts(topo.NumGPUs()) {
			got, want := cutFlow(topo, c.inA), gonumCutFlow(topo, c.inA)
			if math.Abs(got-want) > 1e-9*want {
				t.Errorf("%s, %s: %v, gonum says %v", spec, c.name, got, want)
			}
		}
	}
}

func gonumCutFlow(topo *topology.Topology, inA []bool) float64 {
	g := simple.NewWeightedDirectedGraph(0, 0)
	n := int64(len(topo.Nodes))
	for i := int64(0); i < n+2; i++ {
		g.AddNode(simple.Node(i))
	}
	edge := func(u, v int64, c float64) {
		g.SetWeightedEdge(g.NewWeightedEdge(simple.Node(u), simple.Node(v), c))
	}
	for _, l := range topo.Links {
		edge(int64(l.A), int64(l.B), l.BW)
		edge(int64(l.B), int64(l.A), l.BW)
	}
	for r, v := range topo.GPUs() {
		if inA[r] {
			edge(n, int64(v), math.Inf(1))
		} else {
			edge(int64(v), n+1, math.Inf(1))
		}
	}
	return network.MaxFlowDinic(g, simple.Node(n), simple.Node(n+1), -1)
}

func TestBisectionSkipsHugeFabrics(t *testing.T) {
	topo := mustParse(t, "ring:140000")
	sum, err := summarise(topo, false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Bisection != nil {
		t.Fatal("bisection computed for a huge fabric")
	}
	if line := formatBisection(topo, sum.Bisection); !strings.Contains(line, "not computed") {
		t.Fatalf("got %q", line)
	}
}
