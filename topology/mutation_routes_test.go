package topology

import "testing"

// TestMutRouteEdgesRefusesASourcePastTheLastRank: on a fabric that
// rotates, a source rank past the last is refused as RouteRanks refuses
// it, not renamed from a stand-in in the first block.
func TestMutRouteEdgesRefusesASourcePastTheLastRank(t *testing.T) {
	for _, spec := range []string{"dgx-h100x2", "ring:12", "cluster:3x4"} {
		topo, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		n, block := topo.NumGPUs(), topo.rankShift()
		if block <= 0 {
			t.Fatalf("%s does not rotate", spec)
		}
		for _, bad := range [][2]int{{n, 0}, {n, 1}, {n + block, 1}, {2*n - 1, 0}} {
			if edges, err := topo.RouteEdges(bad[0], bad[1]); err == nil {
				t.Errorf("%s: RouteEdges(%d, %d) on %d ranks: %v, no error", spec, bad[0], bad[1], n, edges)
			}
		}
	}
}
