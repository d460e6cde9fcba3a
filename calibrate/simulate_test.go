package calibrate

import (
	"errors"
	"math"
	"runtime"
	"slices"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// TestSimulateGivesEverySizeTheWholeHorizon: on one core every size runs
// on the same cluster, and each starts with the simulator's whole
// 106-day horizon: 2 MiB and 4 MiB ring all-reduces on 8 ranks at 1 B/s
// take 42 and 85 days, and the second failed past the horizon when it
// started where the first ended.
func TestSimulateGivesEverySizeTheWholeHorizon(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	topo, err := topology.Parse("switch:8,bw=1B/s")
	if err != nil {
		t.Fatal(err)
	}
	counts := []int{512 << 10, 1 << 20}
	secs, err := Simulate(topo, sim.Config{TimingOnly: true}, 1, len(counts), func(i int) (*ops.Plan, error) {
		return ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 8, Count: counts[i], DType: hw.F32, Redop: hw.Sum})
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if days := secs[1] / 86400; days < 80 || days > 90 {
		t.Errorf("4 MiB took %.1f days, want about 85", days)
	}
}

// TestSimulateReportsTheSmallestFailingSize: the sizes run largest first,
// and a failure does not stop the others, so the error is the smallest
// failing size's (1: past the horizon) however the sizes were shared,
// not the first met (3: no plan); and the cluster a run failed on is
// replaced, so the size after it (0) still runs. Each size, failed or
// not, counts once as done.
func TestSimulateReportsTheSmallestFailingSize(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	topo, err := topology.Parse("switch:8,bw=1B/s")
	if err != nil {
		t.Fatal(err)
	}
	counts := []int{1024, 4 << 20, 1024, -1}
	var ran []int
	done := 0
	_, err = Simulate(topo, sim.Config{TimingOnly: true}, 1, len(counts), func(i int) (*ops.Plan, error) {
		ran = append(ran, i)
		return ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 8, Count: counts[i], DType: hw.F32, Redop: hw.Sum})
	}, func() { done++ })
	var se *SizeError
	if !errors.As(err, &se) || se.Index != 1 || se.Planning {
		t.Fatalf("error %v, want size 1's run past the horizon", err)
	}
	if want := []int{3, 2, 1, 0}; !slices.Equal(ran, want) {
		t.Errorf("planned %v, want %v: every size, the largest first", ran, want)
	}
	if done != len(counts) {
		t.Errorf("%d sizes reported done, want %d", done, len(counts))
	}
}

// A negative number of sizes, no plan function, or one that gives
// neither a plan nor an error are errors, not a worker's panic that no
// caller could recover.
func TestSimulateRefusesWhatItCannotRun(t *testing.T) {
	topo, err := topology.Parse("switch:2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Simulate(topo, sim.Config{TimingOnly: true}, 1, -1, func(int) (*ops.Plan, error) { return nil, nil }, nil); err == nil {
		t.Error("-1 sizes: no error")
	}
	if _, err := Simulate(topo, sim.Config{TimingOnly: true}, 1, 2, nil, nil); err == nil {
		t.Error("no plan function: no error")
	}
	// Sizes past what a log holds, and runs below one, are refused (2^63
	// sizes panicked making their slice).
	for _, c := range []struct{ runs, n int }{{1, math.MaxInt}, {-1, 2}} {
		if _, err := Simulate(topo, sim.Config{TimingOnly: true}, c.runs, c.n, func(int) (*ops.Plan, error) { return nil, nil }, nil); err == nil {
			t.Errorf("%d runs of %d sizes: no error", c.runs, c.n)
		}
	}
	_, err = Simulate(topo, sim.Config{TimingOnly: true}, 1, 2, func(int) (*ops.Plan, error) { return nil, nil }, nil)
	var se *SizeError
	if !errors.As(err, &se) || se.Index != 0 || !se.Planning {
		t.Errorf("a nil plan: %v, want size 0's planning error", err)
	}
}
