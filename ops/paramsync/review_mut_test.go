package paramsync_test

// Tests from a mutation run over the server's recent changes: each kills
// a mutant the other tests let live.

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/paramsync"
	"github.com/commsim/commsim/sim"
)

// TestAServerKeepsItsMessagesFromItsWorld: an all-reduce enqueued on the
// world itself, rank 0's part behind 100 µs of compute, is in flight
// while the server all-reduces a bucket on the same devices. The server
// runs on a duplicate of the world: on the world itself the bucket's
// receives would take the other all-reduce's messages.
func TestAServerKeepsItsMessagesFromItsWorld(t *testing.T) {
	c := cluster(t, 4, sim.Config{})
	s, err := paramsync.Start(c.World(), paramsync.Config{Algo: "ring", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	grads, other := filled(t, c, 16), filled(t, c, 16)
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 16, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	ex := ops.NewExecutor(c.World())
	for r, d := range c.Devices() {
		var after []hw.Event
		if r == 0 {
			after = append(after, simtest.BehindCompute(t, d, 100))
		}
		if _, err := ex.Enqueue(plan, r, hw.Whole(other[r]), hw.Whole(other[r]), after...); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 4 {
		if err := s.Register(r, []paramsync.Param{{ID: "w", Len: 16, DType: hw.F32}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SubmitGradient(r, "w", grads[r], nil); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 4 {
		if err := s.Sync(r); err != nil {
			t.Fatal(err)
		}
		if err := ex.Synchronize(r); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 4 {
		if g, o := firstF32(t, grads[r]), firstF32(t, other[r]); g != 2.5 || o != 10 {
			t.Errorf("rank %d: gradient %g, the other all-reduce %g; want the mean 2.5 and the sum 10", r, g, o)
		}
	}
}

// TestAGatherKeepsItsMessagesFromTheReductions: a sharded gradient's
// reduce-scatter, rank 0's ready at once and the others' after 100 µs of
// compute, is in flight while the ranks gather a sharded parameter, rank
// 0's part after 50 µs of compute. The gathers run on a world of their
// own: on the reductions' world rank 1's gather would take the
// reduce-scatter's message from rank 0.
func TestAGatherKeepsItsMessagesFromTheReductions(t *testing.T) {
	c := cluster(t, 4, sim.Config{})
	s, err := paramsync.Start(c.World(), paramsync.Config{Algo: "ring", BucketBytes: 1, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	params := []paramsync.Param{{ID: "g", Len: 16, DType: hw.F32, Sharded: true}, {ID: "p", Len: 16, DType: hw.F32, Sharded: true}}
	grads, pGrads, ps := filled(t, c, 16), filled(t, c, 16), filled(t, c, 16)
	for r, b := range ps { // p: 100(r+1), told apart from g's r+1
		vals := make([]float32, 16)
		for i := range vals {
			vals[i] = 100 * float32(r+1)
		}
		if err := b.Write(hw.Encode(vals)); err != nil {
			t.Fatal(err)
		}
	}
	for r, d := range c.Devices() {
		if err := s.Register(r, params); err != nil {
			t.Fatal(err)
		}
		var ready hw.Event
		if r > 0 {
			ready = simtest.BehindCompute(t, d, 100)
		}
		if err := s.SubmitGradient(r, "g", grads[r], ready); err != nil {
			t.Fatal(err)
		}
		if err := s.SubmitGradient(r, "p", pGrads[r], nil); err != nil {
			t.Fatal(err)
		}
		var after hw.Event
		if r == 0 {
			after = simtest.BehindCompute(t, d, 50)
		}
		if _, _, err := s.GatherParamsAfter(r, "p", ps[r], after); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 4 {
		if err := s.Sync(r); err != nil {
			t.Fatal(err)
		}
		if err := s.Wait(r); err != nil {
			t.Fatal(err)
		}
	}
	// Rank r's shard of p is its own, 100(r+1)s; its shard of g the mean.
	for r := range 4 {
		p, g := f32s(t, ps[r]), f32s(t, grads[r])
		if p[0] != 100 || p[15] != 400 || g[4*r] != 2.5 {
			t.Errorf("rank %d: p %v, g %v; want p's shards 100 to 400 and g's mean 2.5 in shard %d", r, p, g, r)
		}
	}
}

func f32s(t *testing.T, b hw.Buffer) []float64 {
	t.Helper()
	raw := make([]byte, b.Len()*4)
	if err := b.Read(raw); err != nil {
		t.Fatal(err)
	}
	vals, err := hw.ToFloat64s(hw.F32, raw)
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// TestARefusedGatherTakesNoTurn: a gather refused when it is enqueued
// (its buffer is on another rank's device) is not one of the rank's
// gathers: the ranks' next gathers, of one parameter, run together.
func TestARefusedGatherTakesNoTurn(t *testing.T) {
	s, bufs := twoShardedParams(t)
	if err := s.GatherParams(0, "a", bufs["a"][1]); err == nil {
		t.Fatal("rank 0 gathered into rank 1's buffer")
	}
	for r := range 2 {
		if err := s.GatherParams(r, "b", bufs["b"][r]); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range 2 {
		if err := s.Wait(r); err != nil {
			t.Fatal(err)
		}
	}
	if got := f32s(t, bufs["b"][1]); got[0] != 1 || got[3] != 2 {
		t.Errorf("rank 1's b holds %v, want rank 0's shard of 1s and its own of 2s", got)
	}
}

// launchFails is a server of two ranks whose buckets cannot launch:
// nccl-nvls's switch steps, which ops' generic driver does not move.
func launchFails(t *testing.T, timeout time.Duration) (*paramsync.Server, map[string][]hw.Buffer) {
	t.Helper()
	c := cluster(t, 2, sim.Config{})
	s, err := paramsync.Start(c.World(), paramsync.Config{Algo: "nccl-nvls", BucketBytes: 1, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	params := []paramsync.Param{{ID: "a", Len: 8, DType: hw.F32}, {ID: "b", Len: 8, DType: hw.F32}}
	for r := range 2 {
		if err := s.Register(r, params); err != nil {
			t.Fatal(err)
		}
	}
	return s, map[string][]hw.Buffer{"a": filled(t, c, 8), "b": filled(t, c, 8)}
}

// TestAFailedLaunchAnswersEveryLaterSubmission: after its bucket failed
// to launch, a rank's every submission is that failure, a gradient
// submitted again too (not ErrDuplicate): the step cannot finish.
func TestAFailedLaunchAnswersEveryLaterSubmission(t *testing.T) {
	s, grads := launchFails(t, time.Minute)
	const why = "paramsync: rank 0: bucket 0 failed to launch, so this step cannot finish: "
	if err := s.SubmitGradient(0, "b", grads["b"][0], nil); err == nil || !strings.HasPrefix(err.Error(), why) {
		t.Fatalf("submitting b, whose bucket is first: %v", err)
	}
	if err := s.SubmitGradient(0, "b", grads["b"][0], nil); errors.Is(err, paramsync.ErrDuplicate) || err == nil || !strings.HasPrefix(err.Error(), why) {
		t.Errorf("submitting b again: %v, want the failed launch", err)
	}
}

// TestAFailedLaunchWakesASyncWaiting: rank 1 waits in Sync for rank 0's
// gradients when rank 0's bucket fails to launch; its Sync returns that
// failure at once, not when Config.Timeout (an hour) runs out.
func TestAFailedLaunchWakesASyncWaiting(t *testing.T) {
	s, grads := launchFails(t, time.Hour)
	done := make(chan error, 1)
	go func() { done <- s.Sync(1) }()
	time.Sleep(20 * time.Millisecond) // let Sync start waiting; it passes either way
	if err := s.SubmitGradient(0, "b", grads["b"][0], nil); err == nil {
		t.Fatal("the launch did not fail")
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "bucket 0 failed to launch") {
			t.Errorf("Sync: %v, want the failed launch", err)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a timing
		t.Fatal("Sync still waits after the launch failed")
	}
}

// TestSyncReportsAGathersFailure: a rank's Sync waits for its gathers as
// well as its reductions, and reports their failure: rank 0's gather
// waits for an event behind a receive that nothing sends, and the
// simulator finds them deadlocked.
func TestSyncReportsAGathersFailure(t *testing.T) {
	c := cluster(t, 4, sim.Config{})
	s, err := paramsync.Start(c.World(), paramsync.Config{Algo: "ring", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	params := []paramsync.Param{{ID: "g", Len: 16, DType: hw.F32}, {ID: "p", Len: 16, DType: hw.F32, Sharded: true}}
	grads, pGrads, ps := filled(t, c, 16), filled(t, c, 16), filled(t, c, 16)
	d0 := c.Devices()[0]
	st, err := d0.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Recv(hw.Whole(ps[0]), c.Devices()[1], 0xdead); err != nil {
		t.Fatal(err)
	}
	never, err := d0.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Record(never); err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		if err := s.Register(r, params); err != nil {
			t.Fatal(err)
		}
		var after hw.Event
		if r == 0 {
			after = never
		}
		if _, _, err := s.GatherParamsAfter(r, "p", ps[r], after); err != nil {
			t.Fatal(err)
		}
		for id, g := range map[string]hw.Buffer{"g": grads[r], "p": pGrads[r]} {
			if err := s.SubmitGradient(r, id, g, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Sync(0); err == nil {
		t.Error("rank 0's Sync: nil, want its gather's failure")
	} else if !errors.Is(err, hw.ErrDeadlock) {
		t.Errorf("rank 0's Sync: %v, want the deadlock", err)
	}
}

// TestWaitReportsTheReductionsFailureFirst: rank 1 crashes while rank 0's
// all-reduce (of 4-element messages) and gather (of 8-element ones) are
// both in flight, and both fail: Wait reports the all-reduce's.
func TestWaitReportsTheReductionsFailureFirst(t *testing.T) {
	c := cluster(t, 4, sim.Config{})
	s, err := paramsync.Start(c.World(), paramsync.Config{Algo: "ring", BucketBytes: 1, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	crash, err := sim.ParseFault("rank 1 crash at 3us")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Inject(crash); err != nil {
		t.Fatal(err)
	}
	// Buckets fill from the last parameter: g's is bucket 0, and launches
	// without p's gradient.
	params := []paramsync.Param{{ID: "p", Len: 32, DType: hw.F32, Sharded: true}, {ID: "g", Len: 16, DType: hw.F32}}
	grads, ps := filled(t, c, 16), filled(t, c, 32)
	for r := range 4 {
		if err := s.Register(r, params); err != nil {
			t.Fatal(err)
		}
		if err := s.GatherParams(r, "p", ps[r]); err != nil {
			t.Fatal(err)
		}
		if err := s.SubmitGradient(r, "g", grads[r], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Wait(0); err == nil || !strings.Contains(err.Error(), "send 4 x f32") {
		t.Errorf("rank 0's Wait: %v, want its all-reduce's failure, a send of 4 elements", err)
	}
}

// TestOneBufferForTwoParametersIsRefused: gradients are averaged in
// place, so one buffer submitted for two parameters would be averaged
// twice; it is refused, and the parameter can still be submitted.
func TestOneBufferForTwoParametersIsRefused(t *testing.T) {
	c := cluster(t, 2, sim.Config{})
	srv, err := paramsync.Start(c.World(), paramsync.Config{Timeout: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Register(0, []paramsync.Param{{ID: "x", Len: 4, DType: hw.F32}, {ID: "y", Len: 4, DType: hw.F32}}); err != nil {
		t.Fatal(err)
	}
	one, _ := c.Devices()[0].Alloc(hw.F32, 4)
	other, _ := c.Devices()[0].Alloc(hw.F32, 4)
	if err := srv.SubmitGradient(0, "x", one, nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.SubmitGradient(0, "y", one, nil); !errors.Is(err, paramsync.ErrMismatch) || !strings.Contains(err.Error(), `already submitted for "x"`) {
		t.Errorf("x's buffer for y: %v", err)
	}
	if err := srv.SubmitGradient(0, "y", other, nil); err != nil {
		t.Errorf("y's own buffer after the refusal: %v", err)
	}
}
