package main

import (
	"fmt"
	"math"
	"slices"
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
		{"ring:8", 2 * 100e9, 4, "ranks 0-3 | 4-7"},                      // a half of a ring is cut at two links
		{"switch:8", 4 * 100e9, 3, "ranks 0-3 | 4-7"},                    // the four GPU links of the smaller side
		{"mesh:4", 4 * 100e9, 2, "ranks 0-1 | 2-3"},                      // 2×2 pairs
		{"torus:4x4", 8 * 100e9, 5, "ranks 0-7 | 8-15"},                  // two rings of four columns
		{"torus:2x8", 4 * 100e9, 5, "ranks with r mod 8 < 4 | the rest"}, // only the r mod 8 cut finds it
		{"ring:7", 2 * 100e9, 3, "ranks 0-2 | 3-6"},                      // odd: halves of 3 and 4
		{"ring:2", 100e9, 1, "ranks 0-0 | 1-1"},
		{"cluster:2x4", 4 * 50e9, 3, "ranks 0-3 | 4-7"}, // node-aligned: four NIC links
		{"cluster:4x4,rail=true", 8 * 50e9, 6, "ranks 0-7 | 8-15"},
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
		"ring:8":    "bisection bandwidth (min over 4 candidate cuts): 200GB/s per direction, across ranks 0-3 | 4-7",
		"torus:4x4": "bisection bandwidth (min over 5 candidate cuts): 800GB/s per direction",
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

// ringYAML is a ring of GPUs g0…g(n-1) joined in ring order, listed in
// the order given: a ring whose ranks are not numbered along it.
func ringYAML(listed []int) string {
	var b strings.Builder
	b.WriteString("name: ring\nnodes:\n")
	for _, g := range listed {
		fmt.Fprintf(&b, "  - {name: g%d, kind: gpu}\n", g)
	}
	b.WriteString("links:\n")
	for g := range listed {
		fmt.Fprintf(&b, "  - {a: g%d, b: g%d, bw: 50GB/s, lat: 1us}\n", g, (g+1)%len(listed))
	}
	return b.String()
}

// TestBisectionDoesNotDependOnHowGPUsAreListed: the same ring of 8, its
// GPUs listed along it or out of order (g0 g3 g6 g1 g4 g7 g2 g5), is cut
// at two links. No cut by rank number is an arc of the second, which
// showed 200GB/s before the cuts that follow the fabric.
func TestBisectionDoesNotDependOnHowGPUsAreListed(t *testing.T) {
	for _, listed := range [][]int{{0, 1, 2, 3, 4, 5, 6, 7}, {0, 3, 6, 1, 4, 7, 2, 5}} {
		topo, err := topology.ReadYAML([]byte(ringYAML(listed)))
		if err != nil {
			t.Fatal(err)
		}
		if b := bisectionBW(topo); b.bw != 100e9 {
			t.Errorf("ring listed %v: bisection %v across %q, want 100GB/s (two 50GB/s links)", listed, b.bw, b.best)
		}
	}
}

// TestGraphCutsHalveTheGPUsAlongTheFabric: on the out-of-order ring, the
// breadth-first half from g0 is the arc g6 g7 g0 g1 and the depth-first
// one g0 g1 g2 g3, each named, and neither repeats a cut by rank.
func TestGraphCutsHalveTheGPUsAlongTheFabric(t *testing.T) {
	listed := []int{0, 3, 6, 1, 4, 7, 2, 5} // rank r is GPU listed[r]
	topo, err := topology.ReadYAML([]byte(ringYAML(listed)))
	if err != nil {
		t.Fatal(err)
	}
	cuts := graphCuts(topo)
	wantHalves := [][]int{{7, 0, 1, 2}, {0, 1, 2, 3}}
	if len(cuts) != 2 {
		t.Fatalf("%d graph cuts, want 2", len(cuts))
	}
	for i, c := range cuts {
		var in []int
		for r, a := range c.inA {
			if a {
				in = append(in, listed[r])
			}
		}
		slices.Sort(in)
		want := slices.Sorted(slices.Values(wantHalves[i]))
		if !slices.Equal(in, want) {
			t.Errorf("cut %q holds gpus %v, want %v", c.name, in, want)
		}
		for _, r := range candidateCuts(8) {
			if sameCut(r.inA, c.inA) {
				t.Errorf("cut %q repeats %q", c.name, r.name)
			}
		}
	}
	if !strings.Contains(cuts[0].name, "breadth-first from g0") || !strings.Contains(cuts[1].name, "depth-first from g0") {
		t.Errorf("cuts named %q and %q", cuts[0].name, cuts[1].name)
	}
}

// TestTopoShowCountsPairsWithSeveralRoutes: with two spines, every pair
// across leaves has two equally short routes, and show says that only
// one carries its traffic; with one spine it says nothing.
func TestTopoShowCountsPairsWithSeveralRoutes(t *testing.T) {
	for spines, want := range map[int]string{
		1: "",
		2: "one route a pair: 8 of 12 gpu pairs (from every gpu) have several equally short routes",
	} {
		path := twoLeafTree(t, 4, spines, "100GB/s")
		_, out, _ := commsim("topo", "show", path)
		if got := strings.Contains(out, "one route a pair"); want == "" && got || want != "" && !strings.Contains(out, want) {
			t.Errorf("%d spines: want %q in:\n%s", spines, want, out)
		}
		if m := showJSON(t, path).Multipath; m == nil || m.Checked != 12 || m.Sources != 4 || m.Pairs != map[int]int{1: 0, 2: 8}[spines] {
			t.Errorf("%d spines: JSON multipath %+v", spines, m)
		}
	}
}

// twoLeafTree writes a fat-tree fabric file: gpus GPUs on two leaf
// switches (100GB/s, 1us links), each leaf joined to every one of spines
// spines by an uplink of uplink.
func twoLeafTree(t *testing.T, gpus, spines int, uplink string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: fat-tree\nnodes:\n")
	for g := range gpus {
		fmt.Fprintf(&b, "  - {name: gpu%d, kind: gpu}\n", g)
	}
	b.WriteString("  - {name: leaf0, kind: switch}\n  - {name: leaf1, kind: switch}\n")
	for s := range spines {
		fmt.Fprintf(&b, "  - {name: spine%d, kind: switch}\n", s)
	}
	b.WriteString("links:\n")
	for g := range gpus {
		fmt.Fprintf(&b, "  - {a: gpu%d, b: leaf%d, bw: 100GB/s, lat: 1us}\n", g, g/(gpus/2))
	}
	for s := range spines {
		fmt.Fprintf(&b, "  - {a: leaf0, b: spine%d, bw: %s, lat: 1us}\n  - {a: leaf1, b: spine%d, bw: %s, lat: 1us}\n", s, uplink, s, uplink)
	}
	return writeTopoYAML(t, b.String())
}
