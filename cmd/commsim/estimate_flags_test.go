package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/paramsync"
	"github.com/commsim/commsim/sim"
)

// parsedSweep is bench's sweep of op by algo on topo as its flags make it,
// set further by set (nil for none), without running it.
func parsedSweep(t *testing.T, topo, op, algo string, set func(*benchFlags)) *sweep {
	t.Helper()
	var bf benchFlags
	bf.register(&cobra.Command{}, "auto")
	bf.topo, bf.op, bf.algo = topo, op, algo
	if set != nil {
		set(&bf)
	}
	s, err := bf.parse()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// judged is what judge says of est on stderr.
func judged(t *testing.T, est hostEstimate) string {
	t.Helper()
	var said strings.Builder
	if err := est.judge(&said, "sweep"); err != nil {
		t.Fatal(err)
	}
	return said.String()
}

// TestCheckDurationCountsEveryRun: a sweep's estimate counts every run of
// every size: -n × -m timed runs back to back, with data one more on fresh
// inputs, each twice (out of place and in place) except on the simulator
// timing only, where the in-place run is the out-of-place one. What
// checkDuration says is what the estimate of that many runs says.
func TestCheckDurationCountsEveryRun(t *testing.T) {
	for _, c := range []struct {
		name        string
		data        bool
		iters, agg  int
		onSimulator bool
		runs        float64
	}{
		{"timing only, one run", false, 1, 1, false, 2},
		{"timing only, -n 3", false, 3, 1, false, 6},
		{"timing only, -n 2 -m 2", false, 2, 2, false, 8},
		{"timing only on the simulator, -n 2", false, 2, 1, true, 2},
		{"data, one run", true, 1, 1, false, 2},
		{"data, -n 3", true, 3, 1, false, 8},
		{"data on the simulator, -n 3", true, 3, 1, true, 8},
	} {
		s := parsedSweep(t, "ring:512", "allreduce", "direct", func(bf *benchFlags) {
			bf.data, bf.maxBytes, bf.iters, bf.aggIters = c.data, "2MiB", c.iters, c.agg
		})
		var w *openedWorld
		if c.onSimulator {
			w = &openedWorld{cluster: new(sim.Cluster)} // no driver: no mirror
		}
		var got strings.Builder
		if err := s.checkDuration(w, &got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		est, err := s.estimate(nil, c.runs)
		if err != nil {
			t.Fatal(err)
		}
		if want := judged(t, est); want == "" || got.String() != want {
			t.Errorf("%s: stderr %q, want %q (%v runs a size)", c.name, got.String(), want, c.runs)
		}
	}
}

// TestDataSweepsAreEstimatedLonger: moving data costs a sweep host time
// that a timing-only one does not spend (a reduction throughput of
// dataBytesPerSec per byte of input on every rank): the same sweep that
// passes unsaid timing only is said to take minutes with data.
func TestDataSweepsAreEstimatedLonger(t *testing.T) {
	for _, data := range []bool{false, true} {
		s := parsedSweep(t, "switch:64", "allreduce", "ring", func(bf *benchFlags) { bf.data, bf.maxBytes = data, "16MiB" })
		var said strings.Builder
		if err := s.checkDuration(nil, &said); err != nil {
			t.Fatal(err)
		}
		if warned := strings.Contains(said.String(), "may take about"); warned != data {
			t.Errorf("data %v: stderr %q", data, said.String())
		}
	}
}

// TestRefusalOffersFewerRunsOnlyWhereThereAreSome: a refused sweep's hint
// names what the user can have fewer of: sizes and ranks always, runs
// (-n, -m) only where more than one is timed.
func TestRefusalOffersFewerRunsOnlyWhereThereAreSome(t *testing.T) {
	for _, iters := range []int{1, 2} {
		s := parsedSweep(t, "ring:8", "allreduce", "ring", func(bf *benchFlags) { bf.iters = iters })
		est, err := s.estimate(nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		est.seconds = 2 * maxHostSeconds
		err = est.judge(nil, "sweep")
		if err == nil || !strings.Contains(err.Error(), "use fewer sizes (-b, -e, -f), fewer ranks (-g)") ||
			strings.Contains(err.Error(), "runs (-n, -m)") != (iters > 1) {
			t.Errorf("-n %d: %v", iters, err)
		}
	}
}

// TestStepSecondsChargesTheCheckOnlyOnAMirror: a step simulated on every
// rank costs a step and its hops; on a mirror it costs its check on every
// rank and the simulated ranks' share of the step.
func TestStepSecondsChargesTheCheckOnlyOnAMirror(t *testing.T) {
	full := secondsPerStep + 4*secondsPerHop
	if got := stepSeconds(4, 8, 8); got != full {
		t.Errorf("every rank: %g s a step, want %g", got, full)
	}
	if got, want := stepSeconds(4, 2, 8), secondsPerCheckedStep+full*2/8; got != want {
		t.Errorf("on a mirror of 2 of 8: %g s a step, want %g", got, want)
	}
}

// TestRunStepsCountsThePiecesARunIsMadeAgainAt: a plan made coarse to be
// checked and folded is estimated at the steps of its lanes made again at
// its FineChunk, within half of ops.MaxPlanSteps; a plan with none at its
// own.
func TestRunStepsCountsThePiecesARunIsMadeAgainAt(t *testing.T) {
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-tree", Ranks: 16, NodeRanks: 8, Channels: 2, Count: 1 << 12, Chunk: 64, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := runSteps(plan), float64(plan.NumSteps()); got != want {
		t.Errorf("no FineChunk: %g steps, want %g", got, want)
	}
	plan.FineChunk = 16
	if got, want := runSteps(plan), 4*float64(plan.NumSteps()); got != want {
		t.Errorf("FineChunk a quarter of the chunk: %g steps, want %g", got, want)
	}
	plan.FineChunk = 1
	plan.Chunk = 1 << 30 // as if made at pieces far coarser
	if got := runSteps(plan); got != ops.MaxPlanSteps/2 {
		t.Errorf("FineChunk far finer: %g steps, want half of ops.MaxPlanSteps", got)
	}
}

// TestEstimateMirrorsOnlySizesThatSplitEvenly: on a simulator that would
// mirror the plan, a size whose count splits evenly over the ranks is
// estimated at the mirror's cost, one that does not (an unsymmetric
// chunked plan) at every rank's, as without a mirror.
func TestEstimateMirrorsOnlySizesThatSplitEvenly(t *testing.T) {
	s := parsedSweep(t, "switch:8", "allreduce", "ring", nil)
	w := openSimWorld(t, s)
	for _, c := range []struct {
		bytes    int64
		mirrored bool
	}{{4 * 8 * 1024, true}, {4 * (8*1024 + 1), false}} {
		s.sizes = []int64{c.bytes}
		mirror, err := s.estimate(w, 1)
		if err != nil {
			t.Fatal(err)
		}
		full, err := s.estimate(nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := mirror.seconds < full.seconds; got != c.mirrored || mirror.seconds > full.seconds {
			t.Errorf("%d B: %g s on the simulator, %g s without a mirror; want mirrored %v", c.bytes, mirror.seconds, full.seconds, c.mirrored)
		}
	}
}

// TestStepEstimateCountsAShardedParameterThrice: a training step runs a
// parameter's collective once, a sharded one's three times (its
// reduce-scatter and two gathers).
func TestStepEstimateCountsAShardedParameterThrice(t *testing.T) {
	s := parsedSweep(t, "ring:8", "allreduce", "ring", nil)
	spec, _ := s.spec(1 << 20)
	plan, err := s.plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	params := []paramsync.Param{{ID: "w"}, {ID: "s", Sharded: true}}
	e, err := stepEstimate(s.topo, params, func(string) (*ops.Plan, error) { return plan, nil }, 8, 8)
	if err != nil {
		t.Fatal(err)
	}
	if want := 4 * float64(plan.NumSteps()) * stepSeconds(mostHops(sampledRoutes(s.topo, plan)), 8, 8); e.work != "4 collectives" || e.seconds != want {
		t.Errorf("%q, %g s; want 4 collectives, %g s", e.work, e.seconds, want)
	}
}

// TestNcclTestsThreadCountMustBeOne: -t asks for nccl-tests' threads a
// process; commsim runs one, and refuses any other count, none included.
func TestNcclTestsThreadCountMustBeOne(t *testing.T) {
	for _, n := range []string{"0", "2"} {
		status, _, errOut := commsim("bench", "--topo", "ring:4", "-b", "8", "-e", "8", "-t", n)
		if status != 2 || !strings.Contains(errOut, "-t "+n+": commsim runs one thread per process") {
			t.Errorf("-t %s: status %d, %q", n, status, errOut)
		}
	}
}

// TestNcclTestsBlockingIsAlwaysNoted: commsim's runs always wait for the
// collective, so -z is noted whatever its value, -z 0 too.
func TestNcclTestsBlockingIsAlwaysNoted(t *testing.T) {
	for _, z := range []string{"0", "1"} {
		status, _, errOut := commsim("bench", "--topo", "ring:4", "-b", "8", "-e", "8", "-z", z)
		if status != 0 || !strings.Contains(errOut, "commsim: note: -z: commsim's runs always wait") {
			t.Errorf("-z %s: status %d, %q", z, status, errOut)
		}
	}
}

// TestStrayCheckValueGetsTheCheckHint: "--check 0" leaves its 0 behind as
// an argument; the error says how to write it, as it does for 1.
func TestStrayCheckValueGetsTheCheckHint(t *testing.T) {
	for _, v := range []string{"0", "1"} {
		status, _, errOut := commsim("bench", "--topo", "ring:4", "-b", "8", "-e", "8", "--check", v)
		if status != 2 || !strings.Contains(errOut, `stray argument "`+v+`": write --check=`+v+` or -c `+v) {
			t.Errorf("--check %s: status %d, %q", v, status, errOut)
		}
	}
}

// TestItersTimesAggItersIsBounded: -n × -m collectives a size are bounded
// by a 32-bit count, the product checked, not -n alone.
func TestItersTimesAggItersIsBounded(t *testing.T) {
	status, _, errOut := commsim("bench", "--topo", "ring:4", "-b", "8", "-e", "8", "-n", "100000", "-m", "100000")
	if status != 2 || !strings.Contains(errOut, "-n 100000 × -m 100000: over 2147483647 collectives a size") {
		t.Errorf("status %d, %q", status, errOut)
	}
}

// TestBenchJSONLeavesOutSingleRunsAndThreads: a JSON record carries iters
// and gpus_per_thread only where more than one (as overOne says), so a
// sweep of one run a size on a GPU a process names neither.
func TestBenchJSONLeavesOutSingleRunsAndThreads(t *testing.T) {
	for _, c := range []struct {
		args           []string
		iters, threads any
	}{
		{nil, nil, nil},
		{[]string{"-n", "3", "-g", "2"}, 3.0, 2.0},
	} {
		status, out, errOut := commsim(append([]string{"bench", "--topo", "switch:4", "-b", "1K", "-e", "1K", "--format", "json"}, c.args...)...)
		var rec map[string]any
		if status != 0 || json.Unmarshal([]byte(out), &rec) != nil {
			t.Fatalf("%q: status %d, %s%s", c.args, status, out, errOut)
		}
		if rec["iters"] != c.iters || rec["gpus_per_thread"] != c.threads {
			t.Errorf("%q: iters %v, gpus_per_thread %v; want %v, %v", c.args, rec["iters"], rec["gpus_per_thread"], c.iters, c.threads)
		}
	}
}

// TestNcclTimeDecimalsFollowNcclTests: nccl-tests prints a time with two
// decimals under 100 us, one from 100, none from 10000.
func TestNcclTimeDecimalsFollowNcclTests(t *testing.T) {
	for us, want := range map[float64]string{99.994: "  99.99", 100: "  100.0", 999.96: " 1000.0", 9999.94: " 9999.9", 10000: "  10000", 123456.7: " 123457"} {
		if got := ncclTime(us); got != want {
			t.Errorf("ncclTime(%v) = %q, want %q", us, got, want)
		}
	}
}

// TestFooterSaysFailedOnWrongValues: the verdict is OK only where no
// checked value is wrong.
func TestFooterSaysFailedOnWrongValues(t *testing.T) {
	for wrong, want := range map[int]string{0: "# Out of bounds values : 0 OK\n", 3: "# Out of bounds values : 3 FAILED\n"} {
		var b strings.Builder
		writeFooter(&b, []row{{outOfPlace: result{wrong: wrong}, inPlace: result{wrong: 0}}})
		if !strings.HasPrefix(b.String(), want) {
			t.Errorf("%d wrong: %q, want %q", wrong, b.String(), want)
		}
	}
}

// TestAvgBusBandwidthIsOverEveryRun: nccl-tests' average bus bandwidth is
// the mean of every run, out of place and in place: two rows of 1 and 3,
// and 5 and 7, GB/s average 4.
func TestAvgBusBandwidthIsOverEveryRun(t *testing.T) {
	rows := []row{{outOfPlace: result{busbw: 1}, inPlace: result{busbw: 3}}, {outOfPlace: result{busbw: 5}, inPlace: result{busbw: 7}}}
	if got := avgBusBW(rows); got != 4 {
		t.Errorf("avgBusBW = %v, want 4", got)
	}
}

// TestBenchTextNamesEveryCollectiveAsNcclTests: the text header's first
// line names the test as nccl-tests does (all_gather_perf, …), which its
// readers (calibrate, fidelity) learn the op from.
func TestBenchTextNamesEveryCollectiveAsNcclTests(t *testing.T) {
	for op, test := range map[string]string{"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
		"broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall", "gather": "gather", "sendrecv": "sendrecv"} {
		status, out, errOut := commsim("bench", "--topo", "ring:4", "--op", op, "-b", "64", "-e", "64")
		if status != 0 || !strings.HasPrefix(out, "# Collective test starting: "+test+"_perf\n") {
			t.Errorf("%s: status %d, %s:\n%s", op, status, errOut, out)
		}
	}
}

// TestEstimateCountsTheSmallestPlansSteps: a plan whose steps grow with
// its size (NCCL's chunked broadcast: 15 steps at 8 B on switch:8, 1796 at
// 64 MiB) costs a small size no more than its own plan's steps, also in a
// sweep of two sizes: 8 B and 64 MiB cost 15 + 1796 steps, not twice 1796.
func TestEstimateCountsTheSmallestPlansSteps(t *testing.T) {
	s := parsedSweep(t, "switch:8", "broadcast", "nccl", nil)
	steps := func(bytes int64) float64 {
		spec, _ := s.spec(bytes)
		plan, err := s.plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		return float64(plan.NumSteps())
	}
	small, top := steps(8), steps(64<<20)
	if !(small < top/10) {
		t.Fatalf("%v steps at 8 B, %v at 64 MiB: want a plan that grows", small, top)
	}
	s.sizes = []int64{64 << 20}
	one, err := s.estimate(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.sizes = []int64{8, 64 << 20}
	two, err := s.estimate(nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := one.seconds * (small + top) / top; math.Abs(two.seconds-want) > 1e-9*want {
		t.Errorf("8 B and 64 MiB: %g s, want %g (64 MiB alone %g)", two.seconds, want, one.seconds)
	}
}

// openSimWorld opens s's simulator world with an executor on it, both
// closed when the test ends, as a sweep runs on them.
func openSimWorld(t *testing.T, s *sweep) *openedWorld {
	t.Helper()
	w, err := s.backend.open(s.topo, s.simConfig())
	if err != nil {
		t.Fatal(err)
	}
	exec := w.newExecutor()
	t.Cleanup(func() {
		exec.Close()
		w.close()
	})
	return w
}

// The links a step crosses, and the route searches, are those of the
// sampled rank that crosses the most: recursive doubling on 1,000 ranks
// (no power of two) folds rank 0 into rank 1, one link away, where the
// others' partners are up to 500 links away on ring:1000. Rank 0 alone
// put the 154 s that ring:8000's took at a fifth of a second.
func TestEstimateSamplesMoreRanksThanTheFirst(t *testing.T) {
	s := parsedSweep(t, "ring:1000", "allreduce", "rd", nil)
	spec, _ := s.spec(1 << 20)
	plan, err := s.plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	first := rankRoutes(s.topo, plan, 0)
	if first.peers != 1 || first.searchedLinks != 0 {
		t.Fatalf("rank 0's routes: %+v; the test wants rank 0 folded into its neighbour", first)
	}
	if got := mostHops(sampledRoutes(s.topo, plan)); got < 10 {
		t.Errorf("%v links a step, want the partners' tens", got)
	}
	last := rankRoutes(s.topo, plan, 999)
	got, again := routeSeconds(s.topo, sampledRoutes(s.topo, plan), 1000)
	if want := 1000 * float64(last.searchedLinks) * secondsPerRouteLink; last.searchedLinks < 500 || got < want || again {
		t.Errorf("route searches %v s (again: %v), want at least rank 999's %d links a rank, %v s, once", got, again, last.searchedLinks, want)
	}
	// ring:8000's are too many and too long to keep: found again each run.
	s = parsedSweep(t, "ring:8000", "allreduce", "rd", nil)
	spec, _ = s.spec(1 << 20)
	if plan, err = s.plan(spec); err != nil {
		t.Fatal(err)
	}
	if _, again := routeSeconds(s.topo, sampledRoutes(s.topo, plan), 8000); !again {
		t.Errorf("ring:8000: its rd routes found once, want again each run")
	}
	// Between two GPUs of a switch a route is found without a search.
	s = parsedSweep(t, "switch:64", "allreduce", "direct", nil)
	spec, _ = s.spec(1 << 20)
	if plan, err = s.plan(spec); err != nil {
		t.Fatal(err)
	}
	if got, _ := routeSeconds(s.topo, sampledRoutes(s.topo, plan), 64); got != 0 {
		t.Errorf("switch:64: route searches %v s, want none", got)
	}
}
