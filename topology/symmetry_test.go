package topology

import "testing"

// TestAutomorphism: renamings of the ranks extend to the fabric when its
// parts are placed alike: any rotation on a switch, node shifts on a
// cluster; not a rotation by one on a cluster, nor anything that is not a
// permutation or that moves a slower link onto a faster one.
func TestAutomorphism(t *testing.T) {
	shift := func(p, by int) []int {
		perm := make([]int, p)
		for r := range perm {
			perm[r] = (r + by) % p
		}
		return perm
	}
	uneven, err := ReadYAML([]byte(`
nodes:
  - {name: g0, kind: gpu}
  - {name: g1, kind: gpu}
  - {name: sw, kind: switch}
links:
  - {a: g0, b: sw, bw: 100GB/s, lat: 1us}
  - {a: g1, b: sw, bw: 50GB/s, lat: 1us}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec string
		topo *Topology
		perm []int
		want bool
	}{
		{spec: "switch:4", perm: shift(4, 1), want: true},
		{spec: "switch:4", perm: []int{3, 0, 2, 1}, want: true},
		{spec: "cluster:2x4", perm: shift(8, 4), want: true},
		{spec: "cluster:2x4", perm: shift(8, 1)},
		{spec: "ring:6", perm: shift(6, 1), want: true},
		{spec: "ring:6", perm: []int{1, 0, 2, 3, 4, 5}},
		{spec: "switch:4", perm: []int{0, 0, 1, 2}},
		{spec: "switch:4", perm: []int{0, 1, 2}},
		{spec: "uneven", topo: uneven, perm: shift(2, 1)},
	} {
		topo := tc.topo
		if topo == nil {
			if topo, err = Parse(tc.spec); err != nil {
				t.Fatal(err)
			}
		}
		edges, ok := topo.Automorphism(tc.perm)
		if ok != tc.want {
			t.Errorf("%s %v: ok %v, want %v", tc.spec, tc.perm, ok, tc.want)
			continue
		}
		if !ok {
			continue
		}
		// Each directed edge goes to one whose ends are its ends renamed.
		seen := make([]bool, len(edges))
		gpu := map[int]int{}
		for r, n := range topo.GPUs() {
			gpu[n] = r
		}
		for e, f := range edges {
			if seen[f] || topo.EdgeBW(e) != topo.EdgeBW(f) || topo.EdgeLatency(e) != topo.EdgeLatency(f) {
				t.Fatalf("%s %v: edge %d goes to %d, twice or unlike", tc.spec, tc.perm, e, f)
			}
			seen[f] = true
			a, b := topo.EdgeEnds(e)
			fa, fb := topo.EdgeEnds(f)
			for _, end := range [][2]int{{a, fa}, {b, fb}} {
				if r, isGPU := gpu[end[0]]; isGPU && topo.GPUs()[tc.perm[r]] != end[1] {
					t.Fatalf("%s %v: edge %d (%d->%d) goes to %d (%d->%d)", tc.spec, tc.perm, e, a, b, f, fa, fb)
				}
			}
		}
	}
}

// TestShortestRoutes: routes on a switch or a cluster are the only
// shortest paths; on a 3×3 torus a diagonal neighbour is reached by two.
func TestShortestRoutes(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		from, to int // ranks
		want     uint8
	}{
		{"switch:4", 0, 3, 1},
		{"cluster:2x4", 0, 4, 1},
		{"cluster:2x4", 1, 2, 1},
		{"torus:3x3", 0, 1, 1},
		{"torus:3x3", 0, 4, 2},
	} {
		topo, err := Parse(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		counts := topo.ShortestRoutes(topo.GPUs()[tc.from])
		if got := counts[topo.GPUs()[tc.to]]; got != tc.want {
			t.Errorf("%s: %d shortest routes from rank %d to %d, want %d", tc.spec, got, tc.from, tc.to, tc.want)
		}
	}
	if topo, _ := Parse("switch:2"); topo.ShortestRoutes(99) != nil {
		t.Error("a node out of range has counts")
	}
}
