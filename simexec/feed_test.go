package simexec_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
)

// result is what a run gave: every rank's output, and the time.
type result struct {
	outs    [][]byte
	seconds float64
}

// runWith runs plan on a fresh switch:p with random inputs from seed, on
// an executor made by newExec, and reads every output back.
func runWith(t *testing.T, plan *ops.Plan, seed uint64, newExec func(*sim.Cluster) *ops.Executor) result {
	t.Helper()
	c, _ := world(t, fmt.Sprintf("switch:%d", plan.Ranks), sim.Config{})
	in, out := buffers(t, c, plan, false)
	rng := rand.New(rand.NewPCG(seed, 1))
	size := plan.DType.Size()
	for r := range plan.Ranks {
		b := make([]byte, in[r].Buf.Len()*size)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if err := in[r].Buf.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	secs, err := newExec(c).Run(plan, in, out)
	if err != nil {
		t.Fatalf("%v: %v", plan.Spec, err)
	}
	res := result{seconds: secs}
	for r := range plan.Ranks {
		b := make([]byte, out[r].Buf.Len()*size)
		if err := out[r].Buf.Read(b); err != nil {
			t.Fatal(err)
		}
		res.outs = append(res.outs, b)
	}
	return res
}

func generic(c *sim.Cluster) *ops.Executor { return ops.NewExecutor(c.World()) }

// TestFedRunsEqualEnqueuedRuns: every plan, held or streamed, fed lane by
// lane to the simulator as its streams drain gives bit for bit the
// results, and to the picosecond the time, of the generic driver, which
// enqueues everything up front.
func TestFedRunsEqualEnqueuedRuns(t *testing.T) {
	for _, op := range ops.Ops() {
		for _, alg := range ops.AlgorithmsFor(op) {
			for _, p := range []int{3, 8} {
				spec := ops.Spec{Op: op, Algo: alg, Ranks: p, Count: 7, Root: 1, DType: hw.F32, Redop: hw.Sum}
				if op == ops.Barrier {
					spec.Count = 0
				}
				for _, stream := range []bool{false, true} {
					compile := ops.Compile
					if stream {
						compile = ops.CompileStreamed
					}
					plan, err := compile(spec)
					if stream && errors.Is(err, ops.ErrUnsupported) {
						continue // held whatever its size: its lanes wait for each other
					}
					if err != nil {
						t.Fatal(err)
					}
					want := runWith(t, plan, 7, generic)
					got := runWith(t, plan, 7, simexec.NewExecutor)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("%v streamed %v: fed %v s, enqueued %v s, outputs equal %v", spec, stream,
							got.seconds, want.seconds, reflect.DeepEqual(got.outs, want.outs))
					}
				}
			}
		}
	}
}

// crossLanes is an all-reduce of 8 elements on 2 ranks over two lanes
// that order each other with After. Lane 0 exchanges a warm-up message,
// copies the input to the output, then exchanges and sums the first half;
// lane 1 may send the second half only once that copy is done (else it
// would send the output's zeros), and lane 0 ends by reading lane 1's sum.
func crossLanes() *ops.Plan {
	plan := &ops.Plan{Spec: ops.Spec{Op: ops.AllReduce, Algo: "lanes", Ranks: 2, Count: 8, DType: hw.I32, Redop: hw.Sum},
		InLen: 8, OutLen: 8, TmpLen: 8, Lanes: 2, Steps: make([][]ops.Step, 2)}
	ref := func(b ops.Buf, off int) ops.Ref { return ops.Ref{Buf: b, Off: off, Len: 4} }
	for r := range 2 {
		q := 1 - r
		plan.Steps[r] = []ops.Step{
			{Kind: ops.StepSend, Peer: q, Tag: 2, Src: ref(ops.In, 0)},
			{Kind: ops.StepRecv, Peer: q, Tag: 2, Dst: ref(ops.Tmp, 0)},
			{Kind: ops.StepCopy, Dst: ops.Ref{Buf: ops.Out, Len: 8}, Src: ops.Ref{Buf: ops.In, Len: 8}},
			{Kind: ops.StepSend, Peer: q, Tag: 1, Src: ref(ops.Out, 4), Lane: 1, After: []int{2}},
			{Kind: ops.StepSend, Peer: q, Tag: 0, Src: ref(ops.Out, 0)},
			{Kind: ops.StepRecv, Peer: q, Tag: 0, Dst: ref(ops.Tmp, 0)},
			{Kind: ops.StepReduce, Dst: ref(ops.Out, 0), Src: ref(ops.Tmp, 0)},
			{Kind: ops.StepRecv, Peer: q, Tag: 1, Dst: ref(ops.Tmp, 4), Lane: 1},
			{Kind: ops.StepReduce, Dst: ref(ops.Out, 4), Src: ref(ops.Tmp, 4), Lane: 1},
			{Kind: ops.StepCopy, Dst: ref(ops.Tmp, 0), Src: ref(ops.Out, 4), After: []int{8}},
		}
	}
	return plan
}

// TestLanesOrderedByAfter: a held plan whose lanes order each other runs
// on both drivers alike and right, and Check and Cost accept it; without
// its After lists, Check finds the lanes racing.
func TestLanesOrderedByAfter(t *testing.T) {
	plan := crossLanes()
	if err := ops.Check(plan); err != nil {
		t.Fatal(err)
	}
	want := runWith(t, plan, 3, generic)
	got := runWith(t, plan, 3, simexec.NewExecutor)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fed: %v s; enqueued: %v s", got.seconds, want.seconds)
	}
	ins := [2][]int32{}
	rng := rand.New(rand.NewPCG(3, 1))
	for r := range 2 {
		b := make([]byte, 32)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		vals, _ := hw.ToFloat64s(hw.I32, b)
		for _, v := range vals {
			ins[r] = append(ins[r], int32(v))
		}
	}
	for r := range 2 {
		vals, _ := hw.ToFloat64s(hw.I32, got.outs[r])
		for i, v := range vals {
			if int32(v) != ins[0][i]+ins[1][i] {
				t.Fatalf("rank %d out[%d] = %d, want %d", r, i, int32(v), ins[0][i]+ins[1][i])
			}
		}
	}
	topo, _ := world(t, "switch:2", sim.Config{})
	if _, err := ops.Cost(plan, topo.Topology()); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		for i := range plan.Steps[r] {
			plan.Steps[r][i].After = nil
		}
	}
	if err := ops.Check(plan); err == nil {
		t.Fatal("Check accepts lanes that race")
	}
}

// TestStreamedRunStopsItsProducers: a streamed run that fails half way
// (a rank crashes) returns the error and leaves none of the goroutines
// that make its lanes' steps behind, and the plan runs again.
func TestStreamedRunStopsItsProducers(t *testing.T) {
	plan, err := ops.CompileStreamed(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 64, Count: 64 << 10, DType: hw.F32, Redop: hw.Sum})
	if err != nil || !plan.Streamed() {
		t.Fatalf("streamed %v, %v", plan != nil && plan.Streamed(), err)
	}
	before := runtime.NumGoroutine()
	c, _ := world(t, "switch:64", sim.Config{TimingOnly: true})
	if err := c.Inject(sim.Fault{Kind: sim.RankCrash, Rank: 5, At: 20 * sim.Microsecond}); err != nil {
		t.Fatal(err)
	}
	in, out := buffers(t, c, plan, false)
	if _, err := simexec.NewExecutor(c).Run(plan, in, out); !errors.Is(err, sim.ErrCrashed) {
		t.Fatalf("run with a crashed rank: %v, want an error wrapping sim.ErrCrashed", err)
	}
	// Failed streams close their sources, which wait for their producers
	// to return; but a goroutine that has returned is counted until the
	// runtime has torn it down: give that a moment, as goleak does,
	// before calling any goroutine leaked.
	n := runtime.NumGoroutine()
	for try := 0; n > before && try < 200; try++ {
		time.Sleep(time.Millisecond)
		n = runtime.NumGoroutine()
	}
	if n > before {
		t.Fatalf("%d goroutines after the failed run, %d before: its step producers were not stopped", n, before)
	}
	c2, _ := world(t, "switch:64", sim.Config{TimingOnly: true})
	in, out = buffers(t, c2, plan, false)
	if _, err := simexec.NewExecutor(c2).Run(plan, in, out); err != nil {
		t.Fatal(err)
	}
}

// TestCountsPastInt32: a streamed plan whose offsets pass 2^31 elements
// (nccl-tests' 16 GiB and more) is fed whole to the simulator, in the time
// the α-β cost model gives.
func TestCountsPastInt32(t *testing.T) {
	plan, err := ops.CompileStreamed(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 3 << 31, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	c, topo := world(t, "switch:4", sim.Config{TimingOnly: true})
	in, out := buffers(t, c, plan, false)
	got, err := simexec.NewExecutor(c).Run(plan, in, out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ops.Cost(plan, topo)
	if err != nil || math.Abs(got-want) > 1e-9*want {
		t.Fatalf("simulated %v s, cost model %v s (%v)", got, want, err)
	}
}

// TestWireAndLaunchTimeAsCosted: a plan that runs like NCCL's, with a
// launch time and a wire (per-class message latency and efficiency, and a
// network crossing its latency stands for), is simulated in the time the
// cost model gives on an uncontended fabric, across NVLink and network
// paths, every rank or mirrored, a network slower than the wire's
// reference included; and its messages' protocol shows in the operations.
func TestWireAndLaunchTimeAsCosted(t *testing.T) {
	wire := &ops.Wire{Latency: [3]float64{3.4e-6, 5.7e-6, 14e-6}, Efficiency: [3]float64{0.82, 0.9, 0.94}, Reference: [3]float64{0, 0, 14e-6}}
	for _, tc := range []struct {
		topo string
		spec ops.Spec
		// slowNet: the fabric's network crossing (40 µs) is slower than
		// the wire's, whose messages then overlap what the plain plan's
		// wait for.
		slowNet bool
	}{
		{"switch:8,bw=450GB/s", ops.Spec{Op: ops.AllGather, Count: 1 << 10}, false},
		{"cluster:2x4", ops.Spec{Op: ops.AllGather, Count: 1 << 10}, false},
		{"cluster:2x4,niclat=20us", ops.Spec{Op: ops.AllGather, Count: 1 << 10}, true},
		{"switch:4", ops.Spec{Op: ops.Broadcast, Count: 1000, Root: 2}, false},
	} {
		for _, symmetry := range []bool{false, true} {
			c, topo := world(t, tc.topo, sim.Config{TimingOnly: true, Symmetry: symmetry})
			spec := tc.spec
			spec.Algo, spec.Ranks, spec.DType, spec.Channels = "nccl-ring", len(c.Devices()), hw.F32, 1 // channels would share links
			plan, err := ops.Compile(spec)
			if err != nil {
				t.Fatal(err)
			}
			plan.Protocol, plan.Wire, plan.Launch = ops.ProtoSimple, wire, 8.4e-6
			in, out := buffers(t, c, plan, false)
			got, err := simexec.NewExecutor(c).Run(plan, in, out)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ops.Cost(plan, topo)
			if err != nil || math.Abs(got-want) > 1e-12*float64(plan.NumSteps()) {
				t.Errorf("%v on %s, symmetry %v: simulated %v s, costed %v s (%v)", spec, tc.topo, symmetry, got, want, err)
			}
			plain, _ := ops.Compile(spec)
			if base, _ := ops.Cost(plain, topo); !tc.slowNet && !(want > base+8.4e-6) {
				t.Errorf("%v on %s: with wire and launch %v s, without %v s: want slower by more than the launch", spec, tc.topo, want, base)
			}
		}
	}
}

// A plan that moves as NCCL's protocols (a Wire, a Launch) is timed by the
// simulator's driver, which applies them; the generic driver cannot, so on
// a simulated device it refuses the plan, naming the driver to use, rather
// than return a time without them.
func TestGenericDriverRefusesNCCLTimingOnTheSimulator(t *testing.T) {
	base, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 64, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	plain := runWith(t, base, 1, simexec.NewExecutor)
	launched, wired := *base, *base
	launched.Launch = 5e-6
	wired.Wire = &ops.Wire{Latency: [ops.NumPathClasses]float64{2e-6, 2e-6, 2e-6}, Efficiency: [ops.NumPathClasses]float64{0.5, 0.5, 0.5}}
	for name, plan := range map[string]*ops.Plan{"launch": &launched, "wire": &wired} {
		got := runWith(t, plan, 1, simexec.NewExecutor)
		if got.seconds <= plain.seconds || !reflect.DeepEqual(got.outs, plain.outs) {
			t.Errorf("%s: simexec took %v s (the plain plan %v) or changed the results; want longer, the same results", name, got.seconds, plain.seconds)
		}
		c, _ := world(t, "switch:4", sim.Config{})
		in, out := buffers(t, c, plan, false)
		_, err := generic(c).Run(plan, in, out)
		if !errors.Is(err, ops.ErrUnsupported) || !strings.Contains(err.Error(), "simexec.NewExecutor") {
			t.Errorf("%s: the generic driver on the simulator: %v, want ErrUnsupported naming simexec", name, err)
		}
		if _, _, err := generic(c).EnqueueTimed(plan, 0, in[0], out[0]); !errors.Is(err, ops.ErrUnsupported) {
			t.Errorf("%s: EnqueueTimed through the generic driver on the simulator: %v, want ErrUnsupported", name, err)
		}
	}
}

// A run that fails (a switch step on a switch that does not reduce) leaves
// its streams failed for good (hw.Stream): the executor runs its next plan
// on new ones, so a correct plan after it succeeds, on either driver, and
// no later error names the failed run's operation.
func TestAFailedRunDoesNotFailTheNext(t *testing.T) {
	good, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 2, Count: 4, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-nvls", Ranks: 2, Count: 4, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	deadlock, err := ops.Compile(ops.Spec{Op: ops.SendRecv, Algo: "direct", Ranks: 2, Count: 4, DType: hw.F32})
	if err != nil {
		t.Fatal(err)
	}
	deadlock.Steps[0] = slices.DeleteFunc(slices.Clone(deadlock.Steps[0]), func(s ops.Step) bool { return s.Kind == ops.StepSend }) // rank 1 waits for what rank 0 never sends
	c, _ := world(t, "switch:2", sim.Config{})
	in, out := buffers(t, c, good, false)
	exec := simexec.NewExecutor(c)
	want, err := exec.Run(good, in, out)
	if err != nil {
		t.Fatal(err)
	}
	for _, failing := range []*ops.Plan{bad, deadlock} {
		if _, err := exec.Run(failing, in, out); err == nil {
			t.Fatalf("%v ran, want a failure", failing.Spec)
		}
		if got, err := exec.Run(good, in, out); err != nil || got != want {
			t.Errorf("after %v failed: %v, %v s; want the first run's %v s", failing.Spec, err, got, want)
		}
	}
	// Enqueued rank by rank, as ops/comm and paramsync do: Synchronize
	// reports the failure, then the rank's next work runs.
	for r := range 2 {
		if _, _, err := exec.EnqueueTimed(bad, r, in[r], out[r]); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 2 {
		if err := exec.Synchronize(r); err == nil {
			t.Errorf("rank %d: the failed run synchronized", r)
		}
	}
	for r := range 2 {
		if _, _, err := exec.EnqueueTimed(good, r, in[r], out[r]); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 2 {
		if err := exec.Synchronize(r); err != nil {
			t.Errorf("rank %d, after a failed run: %v", r, err)
		}
	}
}

// TestDriverRefusesWhatNoExecutorMade: a job or a driver made by hand,
// or none, is an argument error, not a nil dereference.
func TestDriverRefusesWhatNoExecutorMade(t *testing.T) {
	c, _ := world(t, "switch:2", sim.Config{TimingOnly: true})
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 2, Count: 8, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	for name, enqueue := range map[string]func() error{
		"no job":       func() error { return simexec.NewDriver(c).Enqueue(nil) },
		"an empty job": func() error { return simexec.NewDriver(c).Enqueue(&ops.RankJob{}) },
		"no cluster":   func() error { return simexec.NewDriver(nil).Enqueue(&ops.RankJob{Plan: plan}) },
	} {
		if err := enqueue(); !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, ok := simexec.NewDriver(c).TimeRun(c.World(), nil, 1); ok {
		t.Error("TimeRun of no plan: timed")
	}
}

// TestRunAfterAFailedRunIsRight: a run on a freed buffer is refused before
// anything is enqueued (it failed once the work reached the buffer, other
// ranks' work enqueued, and the generic driver's next run deadlocked on
// them), and the runs after it are right. A run that fails as it runs (past
// the clock's horizon) leaves messages on their way, a failed sender's
// word to its receivers and sends no receive took; the runs after it on
// the same executor take none of them (they failed on them, and after a
// freed buffer's failure the third returned wrong sums with no error).
func TestRunAfterAFailedRunIsRight(t *testing.T) {
	for _, generic := range []bool{false, true} {
		runAfterAFailedRun(t, generic)
	}
	// Past the horizon, then runs that are right; the executor's world is
	// still the one it was made on, which the driver's shortcuts know it
	// by (its messages carry a duplicate's tags).
	c, _ := world(t, "ring:4,bw=1B/s", sim.Config{TimingOnly: true})
	exec := simexec.NewExecutor(c)
	for _, tc := range []struct {
		count int
		fails bool
	}{{1 << 40, true}, {4, false}, {4, false}} {
		plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: tc.count, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		in, out := buffers(t, c, plan, false)
		if _, err := exec.Run(plan, in, out); (err != nil) != tc.fails {
			t.Errorf("count %d after a run past the horizon: %v", tc.count, err)
		}
		if exec.World() != c.World() {
			t.Errorf("count %d: the executor's world is no longer the cluster's", tc.count)
		}
	}
}

// TestANewExecutorTakesNoneOfAFailedRunsMessages: a run that fails as it
// runs (a CollNet plan on a switch that does not reduce) leaves messages
// on their way on the cluster; an executor made after it on the same
// world, the simulator's or the generic one, takes none of them (each
// executor holds a duplicate of its world: it took them, and returned
// wrong outputs with no error, or failed on their sizes).
func TestANewExecutorTakesNoneOfAFailedRunsMessages(t *testing.T) {
	for _, generic := range []bool{false, true} {
		c, _ := world(t, "switch:8", sim.Config{})
		bad, err := ops.Compile(ops.Spec{Op: ops.ReduceScatter, Algo: "nccl-collnet-direct", Ranks: 8, Count: 64, DType: hw.F64, Redop: hw.Sum, Channels: 2, Chunk: 4, NodeRanks: 4})
		if err != nil {
			t.Fatal(err)
		}
		in, out := buffers(t, c, bad, false)
		if _, err := simexec.NewExecutor(c).Run(bad, in, out); err == nil {
			t.Fatal("CollNet on a switch that does not reduce ran")
		}
		plan, err := ops.Compile(ops.Spec{Op: ops.AllGather, Algo: "direct", Ranks: 8, Count: 8, DType: hw.F64})
		if err != nil {
			t.Fatal(err)
		}
		exec := simexec.NewExecutor(c)
		if generic {
			exec = ops.NewExecutor(c.World())
		}
		in, out = buffers(t, c, plan, false)
		for r := range in {
			if err := in[r].Buf.Write(hw.Encode(slices.Repeat([]float64{float64(r + 1)}, 8))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := exec.Run(plan, in, out); err != nil {
			t.Fatalf("generic driver %v: a new executor's run after the failed one: %v", generic, err)
		}
		var want []float64
		for r := range 8 {
			want = append(want, slices.Repeat([]float64{float64(r + 1)}, 8)...)
		}
		for r := range out {
			got := make([]byte, 8*64)
			if err := out[r].Buf.Read(got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, hw.Encode(want)) {
				t.Fatalf("generic driver %v: rank %d gathered wrong elements after a failed run on another executor", generic, r)
			}
		}
	}
}

func runAfterAFailedRun(t *testing.T, generic bool) {
	c, _ := world(t, "switch:4", sim.Config{})
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 16, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	exec := simexec.NewExecutor(c)
	if generic {
		exec = ops.NewExecutor(c.World())
	}
	in, out := buffers(t, c, plan, false)
	freed, err := c.Devices()[3].Alloc(hw.F32, 16)
	if err != nil {
		t.Fatal(err)
	}
	freed.Free()
	bad := slices.Clone(in)
	bad[3] = hw.Whole(freed)
	if _, err := exec.Run(plan, bad, out); !errors.Is(err, hw.ErrFreed) {
		t.Fatalf("a run on a freed buffer: %v, want it refused before it starts", err)
	}
	for i := 1; i <= 3; i++ {
		for r := range in {
			if err := in[r].Buf.Write(hw.Encode(slices.Repeat([]float32{float32(i)}, 16))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := exec.Run(plan, in, out); err != nil {
			t.Fatalf("generic driver %v: run %d after the failed one: %v", generic, i, err)
		}
		for r := range out {
			got := make([]byte, 64)
			if err := out[r].Buf.Read(got); err != nil {
				t.Fatal(err)
			}
			if want := hw.Encode(slices.Repeat([]float32{float32(4 * i)}, 16)); !slices.Equal(got, want) {
				t.Fatalf("generic driver %v: run %d after the failed one: rank %d summed %v, want %v", generic, i, r, got[:4], want[:4])
			}
		}
	}
}

// TestRunWhoseScratchRunsOutOnALaterRankLeavesNoWork: a run that cannot
// make a later rank's scratch (the cluster's memory ends there) left ranks
// 0-2 enqueued, whose lanes then took the next run's messages (the
// simulator's driver) or deadlocked it (the generic one). Now every rank
// is prepared before any is enqueued, and an enqueue that fails still
// retires the executor's streams and tags: the runs after it are right
// (either alone would do).
func TestRunWhoseScratchRunsOutOnALaterRankLeavesNoWork(t *testing.T) {
	for _, generic := range []bool{false, true} {
		big, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 1 << 12, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		// Room for every rank's buffers and three ranks' scratch.
		room := int64(4*(big.InLen+big.OutLen)*4 + 3*big.TmpLen*4 + big.TmpLen*4/2)
		c, _ := world(t, "switch:4", sim.Config{MaxDataBytes: room})
		exec := simexec.NewExecutor(c)
		if generic {
			exec = ops.NewExecutor(c.World())
		}
		in, out := buffers(t, c, big, false)
		if _, err := exec.Run(big, in, out); err == nil {
			t.Fatalf("generic %v: no room for rank 3's scratch, and no error", generic)
		}
		small, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 16, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		sin, sout := buffers(t, c, small, false)
		for r := range sin {
			if err := sin[r].Buf.Write(hw.Encode(slices.Repeat([]float32{float32(r + 1)}, 16))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := exec.Run(small, sin, sout); err != nil {
			t.Fatalf("generic %v: the run after: %v", generic, err)
		}
		got := make([]byte, 64)
		if err := sout[2].Buf.Read(got); err != nil || !slices.Equal(got, hw.Encode(slices.Repeat([]float32{10}, 16))) {
			t.Errorf("generic %v: the run after summed %v, %v; want 10s", generic, got[:4], err)
		}
	}
}
