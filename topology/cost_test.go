package topology

import (
	"fmt"
	"slices"
	"sync"
	"testing"
)

// TestPathCostsFromOneSearchMatchRoutes: the routes of a source's
// whole-fabric search, which PathCost costs, are those Route finds one by
// one, link for link, on fabrics with ties (rings, tori, meshes), leaves
// and unequal links, for every pair of GPUs; and PathCost agrees with
// Route's costs whether or not it has made its tables.
func TestPathCostsFromOneSearchMatchRoutes(t *testing.T) {
	for _, spec := range []string{"ring:9", "torus:3x4", "torus:4x4", "torus:3x3x3", "torus:2x2x3", "mesh:5", "switch:6", "cluster:3x4", "cluster:2x4,rail=true",
		"dgx-h100x2", "dgx-h100x4", "cluster:3x2,bw=80GB/s,nicbw=30GB/s,niclat=3us"} {
		topo, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		p := topo.NumGPUs()
		for src := range p {
			all := topo.costsFrom(src)
			for dst := range p {
				if dst == src {
					continue
				}
				r, err := topo.RouteRanks(src, dst)
				if err != nil {
					t.Fatal(err)
				}
				alpha, beta, _ := topo.pathCostOf(r.Edges, r.Latency)
				if got := all[dst]; got.err != nil || got.alpha != alpha || got.beta != beta {
					t.Errorf("%s: %d -> %d: one search gives %+v, Route α %v β %v", spec, src, dst, got, alpha, beta)
				}
			}
			// The search for every node makes Route's routes, link for link.
			all2 := topo.searchRoutes(topo.gpus[src], -1, nil, false)
			for dst, node := range topo.gpus {
				if dst == src {
					continue
				}
				r, _ := topo.RouteRanks(src, dst)
				if got, ok := all2.path(node); !ok || fmt.Sprint(got) != fmt.Sprint(r) {
					t.Errorf("%s: %d -> %d: one search's route %v, Route's %v", spec, src, dst, got, r)
				}
			}
		}
		// And through PathCost, whose tables start after a few asks.
		for src := range p {
			for dst := range p {
				r, _ := topo.RouteRanks(src, dst)
				wantA, wantB, _ := topo.pathCostOf(r.Edges, r.Latency)
				if a, b, err := topo.PathCost(src, dst); err != nil || a != wantA || b != wantB {
					t.Errorf("%s: PathCost(%d, %d) = %v, %v, %v; want %v, %v", spec, src, dst, a, b, err, wantA, wantB)
				}
			}
		}
	}
}

// TestPathCostOnRotatedRanks: where rotating the ranks maps the fabric
// onto itself, PathCost reads a rank's costs from its stand-in's table,
// but only for destinations whose shortest routes all cost the same. On
// 8 GPUs joined i to i+1 (fast) and i to i+3 (slow), rank 0 reaches rank
// 2 by the fast links (i+1 twice; Route's tie-break takes the
// lowest-numbered GPU between), and rank 1 reaches rank 3 through GPU 0,
// half slow: rotated, the two costs differ, and each must be Route's.
func TestPathCostOnRotatedRanks(t *testing.T) {
	const p = 8
	var nodes []Node
	var links []Link
	for i := range p {
		nodes = append(nodes, gpu(fmt.Sprintf("gpu%d", i)))
	}
	for i := range p {
		links = append(links, Link{i, (i + 1) % p, 100e9, 1e-6}, Link{i, (i + 3) % p, 10e9, 1e-6})
	}
	topo, err := New("circulant", nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	if b := topo.rankShift(); b != 1 {
		t.Fatalf("rankShift = %d, want 1", b)
	}
	for src := range p {
		for dst := range p {
			r, err := topo.RouteRanks(src, dst)
			if err != nil {
				t.Fatal(err)
			}
			wantA, wantB, _ := topo.pathCostOf(r.Edges, r.Latency)
			if a, b, err := topo.PathCost(src, dst); err != nil || a != wantA || b != wantB {
				t.Errorf("PathCost(%d, %d) = %v, %v, %v; want Route's %v, %v", src, dst, a, b, err, wantA, wantB)
			}
		}
	}
	_, b02, _ := topo.PathCost(0, 2)
	_, b13, _ := topo.PathCost(1, 3)
	if b02 == b13 {
		t.Errorf("0 -> 2 and 1 -> 3 both cost β %v: the fabric no longer has the tie this test needs", b02)
	}
}

// TestPathCostConcurrent: goroutines asking one fabric for its path costs
// in different orders, while its tables and its stand-ins' are made, get
// the costs one goroutine gets alone.
func TestPathCostConcurrent(t *testing.T) {
	const spec = "dgx-h100x4"
	ref, err := Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	p := ref.NumGPUs()
	type cost struct{ alpha, beta float64 }
	want := make([]cost, p*p)
	for i := range want {
		want[i].alpha, want[i].beta, _ = ref.PathCost(i/p, i%p)
	}
	topo, _ := Parse(spec)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for k := range p * p {
				i := (k*7 + w*13) % (p * p)
				if a, b, err := topo.PathCost(i/p, i%p); err != nil || (cost{a, b}) != want[i] {
					t.Errorf("PathCost(%d, %d) = %v, %v, %v; want %v", i/p, i%p, a, b, err, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestRouteEdgesAreRouteRanksEdges: RouteEdges, which renames a stand-in's
// route by the fabric's rotation where the route is the only shortest
// one, gives RouteRanks' edges for every pair of GPUs, on fabrics that
// rotate (rings and tori with ties, clusters, rail-optimised ones with a
// spine, DGX nodes) and one that does not; and every rank past the first
// block took the renamed route on at least one of them.
func TestRouteEdgesAreRouteRanksEdges(t *testing.T) {
	renamed := 0
	for _, spec := range []string{"ring:9", "ring:12", "torus:4x4", "cluster:3x4", "cluster:4x2,rail=true", "dgx-h100x4", "dgx-h100x4,rail=true", "mesh:5"} {
		topo, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		p, block := topo.NumGPUs(), topo.rankShift()
		for src := range p {
			for dst := range p {
				want, err := topo.RouteRanks(src, dst)
				if err != nil {
					t.Fatal(err)
				}
				got, err := topo.RouteEdges(src, dst)
				if err != nil || !slices.Equal(got, want.Edges) {
					t.Errorf("%s: %d -> %d: RouteEdges %v (%v), RouteRanks %v", spec, src, dst, got, err, want.Edges)
				}
				if block > 0 && src >= block && src != dst && topo.ShortestRoutes(topo.gpus[src%block])[topo.gpus[(dst-src/block*block+p)%p]] == 1 {
					renamed++
				}
			}
		}
	}
	if renamed == 0 {
		t.Error("no route was renamed from a stand-in's")
	}
	topo, _ := Parse("dgx-h100x2")
	for _, bad := range [][2]int{{-1, 0}, {0, 16}, {9, 99}} {
		if _, err := topo.RouteEdges(bad[0], bad[1]); err == nil {
			t.Errorf("RouteEdges(%d, %d) on 16 ranks: no error", bad[0], bad[1])
		}
	}
}
