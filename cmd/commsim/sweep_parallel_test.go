package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/commsim/commsim/sim"
)

// TestParallelSweepsAreSequentialOnes: a timing-only sweep shared among
// cores prints what it prints on one core, byte for byte, in every
// format and for auto, a fixed algorithm and NCCL's tuner; and a sweep
// whose later size fails (past the simulator's horizon) reports the same
// rows, the same error and the same status.
func TestParallelSweepsAreSequentialOnes(t *testing.T) {
	cases := [][]string{
		{"bench", "--topo", "dgx-h100x2", "-b", "8", "-e", "64MiB"},
		{"bench", "--topo", "hgx-b200", "--algo", "nccl", "-b", "1KiB", "-e", "1GiB", "-f", "4", "--format", "json"},
		{"bench", "--topo", "switch:8", "--algo", "ring", "--op", "allgather", "-e", "16MiB", "--format", "csv"},
		{"bench", "--topo", "cluster:2x4", "--op", "alltoall", "--format", "table"},
		{"bench", "--topo", "ring:8,bw=1B/s", "-b", "64KiB", "-e", "16MiB", "-f", "4", "--timing-only", "--algo", "ring"},
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, args := range cases {
		runtime.GOMAXPROCS(1)
		seqStatus, seqOut, seqErr := commsim(args...)
		runtime.GOMAXPROCS(4)
		parStatus, parOut, parErr := commsim(args...)
		if parStatus != seqStatus || parOut != seqOut || parErr != seqErr {
			t.Errorf("%v: on 4 cores status %d, on 1 status %d\n--- 4 cores:\n%s%s\n--- 1 core:\n%s%s", args, parStatus, seqStatus, parOut, parErr, seqOut, seqErr)
		}
	}
	runtime.GOMAXPROCS(1)
	status, out, errOut := commsim(cases[4]...)
	if status != 1 || out == "" {
		t.Errorf("the failing sweep: status %d, stdout %q, stderr %q: want its first rows and exit 1", status, out, errOut)
	}
	// Every rank passes the horizon: one line says so, not one per rank.
	if strings.Count(strings.TrimSuffix(errOut, "\n"), "\n") != 0 || !strings.Contains(errOut, "horizon") || !strings.Contains(errOut, "failed with the same error") {
		t.Errorf("the failing sweep's error: %q, want one line naming the horizon and the ranks that failed alike", errOut)
	}
}

// TestSweepSizesDoNotSpendEachOthersHorizon: on one core, every run of a
// sweep starts with the simulator's whole horizon (106 days): 2 MiB and
// 4 MiB ring all-reduces on 8 ranks at 1 B/s take 42 and 85 days, and
// the second failed past the horizon when it started where the first
// ended.
func TestSweepSizesDoNotSpendEachOthersHorizon(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for _, cmd := range []string{"bench", "compare"} {
		args := []string{cmd, "--topo", "switch:8,bw=1B/s", "-b", "2MiB", "-e", "4MiB", "--symmetry=false"}
		if cmd == "bench" {
			args = append(args, "--algo", "ring")
		} else {
			args = append(args, "--algos", "ring,rhd") // four runs, in turn, on one cluster
		}
		if status, _, errOut := commsim(args...); status != 0 {
			t.Errorf("%s: status %d: %s", cmd, status, errOut)
		}
	}
}

// TestLargeFabricsShareFewerCores: fabrics past 256 ranks share the
// cores by their size (each core holds a cluster and a plan of its own),
// and a sweep that cannot be shared gets one.
func TestLargeFabricsShareFewerCores(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(16))
	sizes := make([]int64, 32)
	cases := []struct {
		topo   string
		mutate func(*sweep)
		want   int
	}{
		{"cluster:32x8", nil, 16},
		{"dgx-h100x64", nil, 4},
		{"dgx-h100x128,rail=true", nil, 2},
		{"dgx-h100x512", nil, 1},
		{"dgx-h100x2", func(s *sweep) { s.sizes = s.sizes[:3] }, 3},
		{"dgx-h100x2", func(s *sweep) { s.timingOnly = false }, 1},
		{"dgx-h100x2", func(s *sweep) { s.trace = "t.json" }, 1},
	}
	for _, c := range cases {
		topo, err := resolveTopology(c.topo)
		if err != nil {
			t.Fatal(err)
		}
		s := &sweep{topo: topo, sizes: sizes, timingOnly: true}
		if c.mutate != nil {
			c.mutate(s)
		}
		if got := s.parallelWorkers(&openedWorld{cluster: new(sim.Cluster)}); got != c.want {
			t.Errorf("%s: %d cores, want %d", c.topo, got, c.want)
		}
	}
	if got := (&sweep{sizes: sizes, timingOnly: true}).parallelWorkers(&openedWorld{}); got != 1 {
		t.Errorf("a real backend: %d cores, want 1", got)
	}
}
