package comm_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/comm"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

func newComm(t *testing.T, spec string, cfg comm.Config) (*comm.Comm, []*sim.Device) {
	t.Helper()
	topo, err := topology.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := comm.New(c.World(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cm, c.Devices()
}

// TestRanksCallFromTheirOwnGoroutines is the NCCL usage pattern: one
// goroutine per rank, each calling the collective on its own buffers.
func TestRanksCallFromTheirOwnGoroutines(t *testing.T) {
	cm, devs := newComm(t, "switch:4", comm.Config{})
	var wg sync.WaitGroup
	results := make([][]int32, len(devs))
	for r, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf, _ := d.Alloc(hw.I32, 3)
			buf.Write(hw.Encode([]int32{int32(r), 10 * int32(r), 1}))
			for range 2 { // two slots in a row
				if _, err := cm.Do(r, comm.Call{Op: ops.AllReduce, Count: 3, DType: hw.I32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf)); err != nil {
					t.Error(err)
					return
				}
			}
			raw := make([]byte, 12)
			buf.Read(raw)
			results[r], _ = hw.Decode[int32](raw)
		}()
	}
	wg.Wait()
	// Twice in place: sums of sums. 0+1+2+3 = 6, then 4 × 6 = 24.
	for r, got := range results {
		if want := []int32{24, 240, 16}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("rank %d = %v, want %v", r, got, want)
		}
	}
}

func TestMismatchNamesRanksAndRequests(t *testing.T) {
	cm, devs := newComm(t, "switch:4", comm.Config{})
	var wg sync.WaitGroup
	errs := make([]error, len(devs))
	for r, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			count := 8
			if r == 2 {
				count = 7 // the bug being caught
			}
			buf, _ := d.Alloc(hw.F32, count)
			_, errs[r] = cm.Do(r, comm.Call{Op: ops.AllReduce, Count: count, DType: hw.F32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		var m *comm.MismatchError
		if !errors.As(err, &m) {
			t.Fatalf("rank %d: %v, want a MismatchError", r, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "ranks 0, 1, 3 asked for allreduce count=8 f32 sum") || !strings.Contains(msg, "rank 2 asked for allreduce count=7") {
			t.Fatalf("rank %d: %q", r, msg)
		}
	}
}

func TestMissingRankTimesOutInsteadOfHanging(t *testing.T) {
	cm, devs := newComm(t, "switch:3", comm.Config{Timeout: 50 * time.Millisecond})
	var wg sync.WaitGroup
	errs := make([]error, len(devs))
	for r, d := range devs[:2] { // rank 2 never calls
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf, _ := d.Alloc(hw.F32, 4)
			_, errs[r] = cm.Do(r, comm.Call{Op: ops.Broadcast, Count: 4, DType: hw.F32, Root: 1}, hw.Whole(buf), hw.Whole(buf))
		}()
	}
	wg.Wait()
	for r, err := range errs[:2] {
		var to *comm.TimeoutError
		if !errors.As(err, &to) || !strings.Contains(err.Error(), "rank 2 never called") || !strings.Contains(err.Error(), "ranks 0, 1 asked for broadcast count=4 f32 root=1") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	// The late rank gets the same verdict, not a fresh slot, and is told
	// that it came late, not that it never came.
	buf, _ := devs[2].Alloc(hw.F32, 4)
	_, err := cm.Do(2, comm.Call{Op: ops.Broadcast, Count: 4, DType: hw.F32, Root: 1}, hw.Whole(buf), hw.Whole(buf))
	var to *comm.TimeoutError
	if !errors.As(err, &to) || !strings.HasPrefix(err.Error(), "comm: rank 2 came to slot 0 after it had timed out: ") {
		t.Fatalf("late rank: %v", err)
	}
}

func TestClosedCommRefusesCalls(t *testing.T) {
	cm, devs := newComm(t, "switch:2", comm.Config{})
	if err := cm.Close(); err != nil {
		t.Fatal(err)
	}
	buf, _ := devs[0].Alloc(hw.F32, 1)
	if _, err := cm.Do(0, comm.Call{Op: ops.AllReduce, Count: 1, DType: hw.F32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf)); !errors.Is(err, comm.ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
	if _, err := cm.Do(7, comm.Call{}, hw.Slice{}, hw.Slice{}); err == nil {
		t.Fatal("Do with a bad rank succeeded")
	}
}

// TestNewRefusesUnknownAlgorithms: a communicator whose default algorithm
// does not exist is refused when made, naming the ones that do, not at
// its first collective.
func TestNewRefusesUnknownAlgorithms(t *testing.T) {
	topo, err := topology.Parse("switch:4")
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for algo, want := range map[string]string{
		"rign": `comm: unknown algorithm "rign" (want auto, native or one of ring, rd, rhd, tree, dbtree, direct, pairwise`,
		"auto": "comm: algorithm auto needs Config.Cost",
	} {
		cm, err := comm.New(c.World(), comm.Config{Algo: algo})
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("New with %q = %v, %v; want an error starting %s", algo, cm, err, want)
		}
	}
	for _, algo := range append(ops.Algorithms(), "", ops.Native) {
		if _, err := comm.New(c.World(), comm.Config{Algo: algo}); err != nil {
			t.Errorf("New with %q: %v", algo, err)
		}
	}
}

// TestMismatchInAnyField: ranks that differ in any one field of the call
// (op, count, dtype, reduce op, root, algorithm) all get a MismatchError,
// whichever rank is the odd one out, before any data moves.
func TestMismatchInAnyField(t *testing.T) {
	// A reduce reads every field (a root is no field of an all-reduce's:
	// see TestFieldsTheOpDoesNotReadAreNoMismatch).
	base := comm.Call{Op: ops.Reduce, Count: 8, DType: hw.F32, Redop: hw.Sum, Algo: "ring"}
	for name, change := range map[string]func(*comm.Call){
		"op":    func(c *comm.Call) { c.Op = ops.Broadcast },
		"count": func(c *comm.Call) { c.Count = 4 },
		"dtype": func(c *comm.Call) { c.DType = hw.I32 },
		"redop": func(c *comm.Call) { c.Redop = hw.Max },
		"root":  func(c *comm.Call) { c.Root = 2 },
		"algo":  func(c *comm.Call) { c.Algo = "rhd" },
	} {
		for _, odd := range []int{1, 3} {
			cm, devs := newComm(t, "switch:4", comm.Config{})
			errs := make([]error, len(devs))
			var wg sync.WaitGroup
			for r, d := range devs {
				call := base
				if r == odd {
					change(&call)
				}
				buf, _ := d.Alloc(hw.F32, 8)
				wg.Go(func() { _, errs[r] = cm.Do(r, call, hw.Whole(buf), hw.Whole(buf)) })
			}
			wg.Wait()
			for r, err := range errs {
				var m *comm.MismatchError
				if !errors.As(err, &m) {
					t.Errorf("%s differs on rank %d: rank %d got %v, want a MismatchError", name, odd, r, err)
				}
			}
			cm.Close()
		}
	}
}

// TestACallWrongAloneFailsTheSlotAtOnce: a rank whose call is wrong
// whatever the others ask (a negative count, a root outside the world)
// fails the slot for every rank at once, naming itself and why, where it
// used to leave them all to the timeout; the communicator goes on.
func TestACallWrongAloneFailsTheSlotAtOnce(t *testing.T) {
	base := comm.Call{Op: ops.Broadcast, Count: 8, DType: hw.F32, Algo: "ring"}
	for name, change := range map[string]func(*comm.Call){
		"count -1": func(c *comm.Call) { c.Count = -1 },
		"root 9":   func(c *comm.Call) { c.Root = 9 },
	} {
		cm, devs := newComm(t, "switch:4", comm.Config{Timeout: 10 * time.Second})
		bufs := make([]hw.Slice, len(devs))
		for r, d := range devs {
			buf, _ := d.Alloc(hw.F32, 8)
			bufs[r] = hw.Whole(buf)
		}
		errs := make([]error, len(devs))
		var wg sync.WaitGroup
		for r := range devs {
			call := base
			if r == 2 {
				change(&call)
			}
			wg.Go(func() { _, errs[r] = cm.Do(r, call, bufs[r], bufs[r]) })
		}
		wg.Wait()
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "comm: slot 0: rank 2 asked for broadcast") {
				t.Errorf("%s on rank 2: rank %d got %v, want the slot's failure naming rank 2", name, r, err)
			}
		}
		for r := range devs {
			wg.Go(func() { _, errs[r] = cm.Do(r, base, bufs[r], bufs[r]) })
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Errorf("%s: the next slot on rank %d: %v", name, r, err)
			}
		}
		cm.Close()
	}
}

// TestTimeoutNamesTheRanksThatCame: when the missing rank is not the last
// one, the ranks that did call are still named by their own numbers.
func TestTimeoutNamesTheRanksThatCame(t *testing.T) {
	cm, devs := newComm(t, "switch:3", comm.Config{Timeout: 50 * time.Millisecond})
	errs := make([]error, len(devs))
	var wg sync.WaitGroup
	for r := 1; r < 3; r++ { // rank 0 never calls
		buf, _ := devs[r].Alloc(hw.F32, 4)
		wg.Go(func() {
			_, errs[r] = cm.Do(r, comm.Call{Op: ops.AllReduce, Count: 4, DType: hw.F32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf))
		})
	}
	wg.Wait()
	for r := 1; r < 3; r++ {
		var to *comm.TimeoutError
		if !errors.As(errs[r], &to) || !strings.Contains(errs[r].Error(), "rank 0 never called") || !strings.Contains(errs[r].Error(), "ranks 1, 2 asked for allreduce") {
			t.Errorf("rank %d: %v", r, errs[r])
		}
	}
}

// TestCloseReleasesWaitingRanks: a rank waiting in a slot for ranks that
// never come gets ErrClosed when the communicator is closed, not a hang
// (its timeout here is an hour).
func TestCloseReleasesWaitingRanks(t *testing.T) {
	cm, devs := newComm(t, "switch:2", comm.Config{Timeout: time.Hour})
	buf, _ := devs[0].Alloc(hw.F32, 4)
	done := make(chan error)
	go func() {
		_, err := cm.Do(0, comm.Call{Op: ops.AllReduce, Count: 4, DType: hw.F32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf))
		done <- err
	}()
	// Give rank 0 time to join its slot. Nothing is asserted on time: if
	// it has not joined, it finds the communicator closed, as it should.
	time.Sleep(10 * time.Millisecond)
	if err := cm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, comm.ErrClosed) {
		t.Fatalf("waiting rank after Close: %v, want ErrClosed", err)
	}
}

// TestDoRefusesRanksOutsideTheWorld: rank -1 and rank p (one past the
// last) are errors, not index panics.
func TestDoRefusesRanksOutsideTheWorld(t *testing.T) {
	cm, devs := newComm(t, "switch:2", comm.Config{})
	buf, _ := devs[0].Alloc(hw.F32, 1)
	for _, rank := range []int{-1, 2} {
		if _, err := cm.Do(rank, comm.Call{Op: ops.AllReduce, Count: 1, DType: hw.F32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf)); err == nil || !strings.Contains(err.Error(), "not in 0..1") {
			t.Errorf("Do(rank %d) = %v", rank, err)
		}
	}
}

// TestDoTimeIsTheSlowestRanks: every rank gets the collective's time, the
// longest of its ranks' parts, as ops.Executor.Run gives it, also when the
// ranks' parts take different times (a broadcast from the last rank,
// whose part is only its sends).
func TestDoTimeIsTheSlowestRanks(t *testing.T) {
	const spec = "switch:4,bw=100GB/s,lat=1us"
	call := comm.Call{Op: ops.Broadcast, Count: 1024, DType: hw.F32, Root: 3, Algo: "ring"}
	topo, _ := topology.Parse(spec)
	ref, _ := sim.NewCluster(topo, sim.Config{TimingOnly: true})
	plan, err := ops.Compile(ops.Spec{Op: call.Op, Algo: call.Algo, Ranks: 4, Count: call.Count, DType: call.DType, Root: call.Root})
	if err != nil {
		t.Fatal(err)
	}
	in, out := make([]hw.Slice, 4), make([]hw.Slice, 4)
	for r, d := range ref.Devices() {
		b, _ := d.Alloc(hw.F32, call.Count)
		in[r], out[r] = hw.Whole(b), hw.Whole(b)
	}
	want, err := ops.NewExecutor(ref.World()).Run(plan, in, out)
	if err != nil {
		t.Fatal(err)
	}
	cm, devs := newComm(t, spec, comm.Config{})
	got := make([]float64, 4)
	var wg sync.WaitGroup
	for r, d := range devs {
		buf, _ := d.Alloc(hw.F32, call.Count)
		wg.Go(func() {
			var err error
			if got[r], err = cm.Do(r, call, hw.Whole(buf), hw.Whole(buf)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for r, secs := range got {
		if secs != want {
			t.Errorf("rank %d: Do took %g s, Run %g s", r, secs, want)
		}
	}
}

// TestABarrierNeedsNoDType: a barrier moves no element, so a call that
// names only the op and no buffers is a whole barrier, as ncclBarrier
// would be: under the default algorithm, auto, and each that has one.
func TestABarrierNeedsNoDType(t *testing.T) {
	topo, err := topology.Parse("switch:3,lat=1us")
	if err != nil {
		t.Fatal(err)
	}
	configs := []comm.Config{{}, {Cost: topo}}
	for _, algo := range ops.AlgorithmsFor(ops.Barrier) {
		configs = append(configs, comm.Config{Algo: algo})
	}
	for _, cfg := range configs {
		c, err := sim.NewCluster(topo, sim.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cm, err := comm.New(c.World(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		seconds := make([]float64, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for r := range 3 {
			wg.Go(func() { seconds[r], errs[r] = cm.Do(r, comm.Call{Op: ops.Barrier}, hw.Slice{}, hw.Slice{}) })
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				t.Fatalf("algo %q: rank %d: %v", cfg.Algo, r, err)
			}
			if seconds[r] < 1e-6 {
				t.Errorf("algo %q: rank %d's barrier took %g s: it must wait for a message of 1 µs", cfg.Algo, r, seconds[r])
			}
		}
		if err := cm.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTheDefaultAlgorithmRunsEveryCollective: a communicator made with
// no Config runs each collective, ring where ring can and another where
// it cannot (gather, all-to-all, send/recv, barrier), with right results.
func TestTheDefaultAlgorithmRunsEveryCollective(t *testing.T) {
	for op := ops.AllReduce; op <= ops.Barrier; op++ {
		cm, devs := newComm(t, "switch:4", comm.Config{})
		call := comm.Call{Op: op, Count: 6, DType: hw.I32, Redop: hw.Sum, Root: 2}
		if op == ops.Barrier {
			call.Count = 0
		}
		spec := ops.Spec{Op: op, Ranks: 4, Count: call.Count, Root: call.Root, DType: call.DType, Redop: call.Redop}
		inputs, err := verify.PatternInputs(spec)
		if err != nil {
			t.Fatal(err)
		}
		inLen, outLen := spec.BufferLens()
		outs := make([]hw.Buffer, 4)
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for r, d := range devs {
			in, err := d.Alloc(hw.I32, inLen)
			if err != nil {
				t.Fatal(err)
			}
			if outs[r], err = d.Alloc(hw.I32, outLen); err != nil {
				t.Fatal(err)
			}
			if err := in.Write(inputs[r]); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { _, errs[r] = cm.Do(r, call, hw.Whole(in), hw.Whole(outs[r])) })
		}
		wg.Wait()
		outputs := make([][]byte, 4)
		for r := range 4 {
			if errs[r] != nil {
				t.Fatalf("%s: rank %d: %v", op, r, errs[r])
			}
			outputs[r] = make([]byte, outLen*4)
			if err := outs[r].Read(outputs[r]); err != nil {
				t.Fatal(err)
			}
		}
		if err := verify.CheckReference(verify.Case{Spec: spec, Inputs: inputs}, outputs); err != nil {
			t.Errorf("%s: %v", op, err)
		}
		cm.Close()
	}
}

// TestAPlannersCoarsePlanRunsRefined: a planner's plan made coarse to be
// checked and folded (FineChunk set, as package nccl's trees at scale)
// runs made again at its finer pieces (ops.Plan.Refined): it takes the
// time of the plan made at them, which the coarse plan does not.
func TestAPlannersCoarsePlanRunsRefined(t *testing.T) {
	timeWith := func(chunk, fine int) float64 {
		planner := func(spec ops.Spec) (*ops.Plan, error) {
			spec.Algo, spec.Channels, spec.NodeRanks, spec.Chunk = "nccl-tree", 2, 2, chunk
			plan, err := ops.Compile(spec)
			if err == nil {
				plan.FineChunk = fine
			}
			return plan, err
		}
		cm, devs := newComm(t, "cluster:2x2", comm.Config{Algo: "mine", Planner: planner})
		defer cm.Close()
		bufs := make([]hw.Slice, len(devs))
		for r, d := range devs {
			b, _ := d.Alloc(hw.F32, 4096)
			bufs[r] = hw.Whole(b)
		}
		secs, errs := doAll(cm, comm.Call{Op: ops.AllReduce, Count: 4096, DType: hw.F32, Redop: hw.Sum}, bufs)
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		return secs[0]
	}
	fine, coarse, refined := timeWith(64, 0), timeWith(1024, 0), timeWith(1024, 64)
	if refined != fine || coarse == fine {
		t.Errorf("refined %g s, made at the fine chunk %g s, the coarse plan %g s; want the first two equal, the third not", refined, fine, coarse)
	}
}
