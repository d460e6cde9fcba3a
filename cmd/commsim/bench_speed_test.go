package main

import "testing"

// BenchmarkNCCLSweepDGXH100x2 is issue #16's first speed target: a full
// 8 B–16 GiB all-reduce sweep with NCCL's choices on two DGX H100 nodes,
// timing only, in 2 s (its sizes shared among the cores).
//
//	go test -run X -bench NCCLSweepDGXH100x2 -benchtime 3x ./cmd/commsim/
func BenchmarkNCCLSweepDGXH100x2(b *testing.B) {
	for b.Loop() {
		if status, _, errOut := commsim("bench", "--topo", "dgx-h100x2", "--algo", "nccl", "-b", "8", "-e", "16G", "--timing-only"); status != 0 {
			b.Fatalf("status %d: %s", status, errOut)
		}
	}
}

// BenchmarkAutoSweepDGXH100x128 is bench's default (auto, 8 B–64 MiB) on
// 128 DGX nodes, 1024 ranks: auto bounds and costs every algorithm at
// every size, and the runs are mirrored.
//
//	go test -run X -bench AutoSweepDGXH100x128 -benchtime 1x ./cmd/commsim/
func BenchmarkAutoSweepDGXH100x128(b *testing.B) {
	for b.Loop() {
		if status, _, errOut := commsim("bench", "--topo", "dgx-h100x128"); status != 0 {
			b.Fatalf("status %d: %s", status, errOut)
		}
	}
}

// BenchmarkNCCLSweepDGXH100x128Rail is issue #16's second speed target:
// the same sweep on 128 rail-optimised DGX H100 nodes, 1024 ranks, in
// 30 s. NCCL's trees and NVLSTree do not mirror; their channels and
// ranks fold (see simexec's package doc). The sizes share 2 cores.
//
//	go test -run X -bench NCCLSweepDGXH100x128Rail -benchtime 1x ./cmd/commsim/
func BenchmarkNCCLSweepDGXH100x128Rail(b *testing.B) {
	for b.Loop() {
		if status, _, errOut := commsim("bench", "--topo", "dgx-h100x128,rail=true", "--algo", "nccl", "-b", "8", "-e", "16G", "--timing-only"); status != 0 {
			b.Fatalf("status %d: %s", status, errOut)
		}
	}
}

// BenchmarkNCCLAllToAllDGXH100x128Rail is the all-to-all of the same
// sweep: a million messages a size, mirrored by a node (its cross-rail
// routes take NVLink first, the same from every node).
//
//	go test -run X -bench NCCLAllToAllDGXH100x128Rail -benchtime 1x ./cmd/commsim/
func BenchmarkNCCLAllToAllDGXH100x128Rail(b *testing.B) {
	for b.Loop() {
		if status, _, errOut := commsim("bench", "--topo", "dgx-h100x128,rail=true", "--op", "alltoall", "--algo", "nccl", "-b", "8", "-e", "16G", "--timing-only"); status != 0 {
			b.Fatalf("status %d: %s", status, errOut)
		}
	}
}
