package topology

import (
	"runtime"
	"testing"
)

// BenchmarkBuildSwitch16384 builds switch:16384 and reports the bytes
// allocated per GPU while building (alloc-B/gpu) and the bytes the built
// topology keeps on the heap per GPU (retained-B/gpu).
//
//	go test -run XXX -bench BuildSwitch16384 -benchmem ./topology/
func BenchmarkBuildSwitch16384(b *testing.B) {
	const n = 16384
	b.ReportAllocs()
	var keep *Topology
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := 0; i < b.N; i++ {
		tp, err := Parse("switch:16384")
		if err != nil {
			b.Fatal(err)
		}
		keep = tp
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/n, "alloc-B/gpu")

	b.StopTimer()
	keep = nil
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep, _ = Parse("switch:16384")
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "retained-B/gpu")
	runtime.KeepAlive(keep)
}

// BenchmarkRouteSwitch16384 measures first-time (uncached) routes between
// rank pairs of switch:16384.
func BenchmarkRouteSwitch16384(b *testing.B) {
	tp, err := Parse("switch:16384")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%maxCachedRoutes == 0 {
			tp.routing.mu.Lock()
			tp.routing.routes = nil
			tp.routing.mu.Unlock()
		}
		if _, err := tp.RouteRanks(i%16384, (i/16384+i+1)%16384); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteCluster measures first-time routes on cluster:128x8 (1024
// GPUs), where a cross-node route explores every NIC.
func BenchmarkRouteCluster(b *testing.B) {
	tp, err := Parse("cluster:128x8")
	if err != nil {
		b.Fatal(err)
	}
	n := tp.NumGPUs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tp.routing.mu.Lock()
		tp.routing.routes = nil
		tp.routing.mu.Unlock()
		if _, err := tp.RouteRanks(i%n, (i+8)%n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRouteCached measures a cached route lookup.
func BenchmarkRouteCached(b *testing.B) {
	tp, err := Parse("ring:64")
	if err != nil {
		b.Fatal(err)
	}
	tp.RouteRanks(0, 32)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tp.RouteRanks(0, 32)
	}
}

// BenchmarkPathCostHypercubePartners costs every route a recursive
// doubling asks for (rank r to r xor 2^k) on a fresh 1024-GPU cluster:
// mostly across the network, where each source's routes need a search of
// the whole fabric unless a renaming of the ranks gives them.
//
//	go test -run XXX -bench PathCostHypercube ./topology/
func BenchmarkPathCostHypercubePartners(b *testing.B) {
	for range b.N {
		topo := parseUntimed(b, "dgx-h100x128")
		p := topo.NumGPUs()
		for r := range p {
			for k := 1; k < p; k *= 2 {
				if _, _, err := topo.PathCost(r, r^k); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkRouteAllToAllRing512 asks every route of ring:512 once, in an
// all-to-all's order (each distance in turn, every source at it): 261,632
// routes of 128 links on average, twice what the route cache holds. Each
// source's routes come from its tree after a few misses; before the trees
// the cache was emptied over and over and most routes took a search.
//
//	go test -run XXX -bench RouteAllToAllRing512 -benchtime 3x ./topology/
func BenchmarkRouteAllToAllRing512(b *testing.B) {
	for range b.N {
		tp := parseUntimed(b, "ring:512")
		n := tp.NumGPUs()
		for d := 1; d < n; d++ {
			for r := range n {
				if _, err := tp.RouteRanks(r, (r+d)%n); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// parseUntimed is the fabric spec names, made with b's timer stopped:
// the benchmarks that call it time a fresh fabric's routes, not its
// making.
func parseUntimed(b *testing.B, spec string) *Topology {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	tp, err := Parse(spec)
	if err != nil {
		b.Fatal(err)
	}
	return tp
}
