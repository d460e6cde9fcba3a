package paramsync_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/comm"
	"github.com/commsim/commsim/ops/paramsync"
	"github.com/commsim/commsim/sim"
)

// filled is a buffer of n f32 on each device, rank r's all r+1.
func filled(t *testing.T, c *sim.Cluster, n int) []hw.Buffer {
	t.Helper()
	var out []hw.Buffer
	for r, d := range c.Devices() {
		b, err := d.Alloc(hw.F32, n)
		if err != nil {
			t.Fatal(err)
		}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32(r + 1)
		}
		if err := b.Write(hw.Encode(vals)); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func firstF32(t *testing.T, b hw.Buffer) float32 {
	t.Helper()
	return float32(f32s(t, b)[0])
}

// TestAServerAndACommunicatorOnOneWorldKeepTheirMessagesApart: a DDP
// bucket in flight while a loss all-reduce goes through a communicator on
// the same world, as a training step does. Rank 0's bucket is launched
// first, so its messages reach ranks 1-3 before the loss's; sharing the
// world's tags, the loss's receives took them (a deadlock, or each
// result holding the other's data).
func TestAServerAndACommunicatorOnOneWorldKeepTheirMessagesApart(t *testing.T) {
	c := cluster(t, 4, sim.Config{})
	s, err := paramsync.Start(c.World(), paramsync.Config{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cm, err := comm.New(c.World(), comm.Config{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	grads, losses := filled(t, c, 64), filled(t, c, 64)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			errs[r] = func() error {
				if err := s.Register(r, []paramsync.Param{{ID: "w", Len: 64, DType: hw.F32}}); err != nil {
					return err
				}
				if r == 0 {
					if err := s.SubmitGradient(r, "w", grads[r], nil); err != nil {
						return err
					}
				}
				call := comm.Call{Op: ops.AllReduce, Count: 64, DType: hw.F32, Redop: hw.Sum}
				if _, err := cm.Do(r, call, hw.Whole(losses[r]), hw.Whole(losses[r])); err != nil {
					return err
				}
				if r != 0 {
					if err := s.SubmitGradient(r, "w", grads[r], nil); err != nil {
						return err
					}
				}
				return s.Sync(r)
			}()
		})
	}
	wg.Wait()
	for r := range 4 {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if g, l := firstF32(t, grads[r]), firstF32(t, losses[r]); g != 2.5 || l != 10 {
			t.Errorf("rank %d: averaged gradient %g, want 2.5; summed loss %g, want 10", r, g, l)
		}
	}
}

// TestATraceOfOneGoroutineARankIsTheSameEveryRun: a DDP step whose ranks
// each run on a goroutine of their own, making their compute streams as
// they go, writes the same trace bytes every run. Streams had been
// numbered in the order the goroutines made them, across devices, and so
// were the trace's tracks.
func TestATraceOfOneGoroutineARankIsTheSameEveryRun(t *testing.T) {
	const layers, n = 4, 1 << 12
	var first []byte
	for run := range 6 {
		c := cluster(t, 4, sim.Config{Trace: true})
		s, err := paramsync.Start(c.World(), paramsync.Config{BucketBytes: 1 << 14, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		var params []paramsync.Param
		for l := range layers {
			params = append(params, paramsync.Param{ID: fmt.Sprint("layer", l), Len: n, DType: hw.F32})
		}
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for r, d := range c.Devices() {
			wg.Go(func() {
				errs[r] = func() error {
					if err := s.Register(r, params); err != nil {
						return err
					}
					st, err := d.NewStream()
					if err != nil {
						return err
					}
					for l := layers - 1; l >= 0; l-- {
						if err := st.(*sim.Stream).Compute(float64(l+1)*10e-6, "backward"); err != nil {
							return err
						}
						ready, err := d.NewEvent()
						if err != nil {
							return err
						}
						if err := st.Record(ready); err != nil {
							return err
						}
						g, err := d.Alloc(hw.F32, n)
						if err != nil {
							return err
						}
						if err := s.SubmitGradient(r, params[l].ID, g, ready); err != nil {
							return err
						}
					}
					return s.Sync(r)
				}()
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		var trace bytes.Buffer
		if err := c.WriteTrace(&trace); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if run == 0 {
			first = trace.Bytes()
		} else if !bytes.Equal(trace.Bytes(), first) {
			t.Fatalf("run %d wrote another trace (%d bytes, the first %d)", run, trace.Len(), len(first))
		}
	}
}

// TestABucketThatCannotLaunchFailsTheStepAtOnce: NVLS on a fabric with no
// reducing switch cannot launch. Every later submission and every rank's
// Sync say so at once, naming the bucket. Sync had timed out listing no
// gradient as missing, and the next submission named another parameter
// than the one submitted.
func TestABucketThatCannotLaunchFailsTheStepAtOnce(t *testing.T) {
	c, _ := simtest.World(t, "switch:2", sim.Config{})
	s, err := paramsync.Start(c.World(), paramsync.Config{Algo: "nccl-nvls", BucketBytes: 1, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	params := []paramsync.Param{{ID: "a", Len: 8, DType: hw.F32}, {ID: "b", Len: 8, DType: hw.F32}}
	grads := map[string][]hw.Buffer{"a": filled(t, c, 8), "b": filled(t, c, 8)}
	for r := range 2 {
		if err := s.Register(r, params); err != nil {
			t.Fatal(err)
		}
	}
	const why = "paramsync: rank 0: bucket 0 failed to launch, so this step cannot finish: "
	if err := s.SubmitGradient(0, "b", grads["b"][0], nil); err == nil || !strings.HasPrefix(err.Error(), why) {
		t.Fatalf("submitting b, whose bucket is first: %v", err)
	}
	if err := s.SubmitGradient(0, "a", grads["a"][0], nil); err == nil || !strings.HasPrefix(err.Error(), why) {
		t.Errorf("submitting a after: %v", err)
	}
	done := make(chan error, 2)
	for r := range 2 {
		go func() { done <- s.Sync(r) }()
	}
	for range 2 {
		if err := <-done; err == nil || !strings.HasPrefix(err.Error(), why) {
			t.Errorf("Sync: %v", err)
		}
	}
}

// twoShardedParams is a server of two ranks that registered sharded
// parameters a and b, of 4 f32 each, and a buffer of each on each rank,
// rank r's all r+1. The server closes when the test ends.
func twoShardedParams(t *testing.T) (*paramsync.Server, map[string][]hw.Buffer) {
	t.Helper()
	c := cluster(t, 2, sim.Config{})
	s, err := paramsync.Start(c.World(), paramsync.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	params := []paramsync.Param{{ID: "a", Len: 4, DType: hw.F32, Sharded: true}, {ID: "b", Len: 4, DType: hw.F32, Sharded: true}}
	bufs := map[string][]hw.Buffer{"a": filled(t, c, 4), "b": filled(t, c, 4)}
	for r := range 2 {
		if err := s.Register(r, params); err != nil {
			t.Fatal(err)
		}
	}
	return s, bufs
}

// TestRanksGatherParametersInOneOrder: a rank that gathers another
// sharded parameter than the ranks before it did at that point is refused,
// naming both: the gathers would run as one collective and swap the
// parameters' shards, with no error. Ranks that keep to one order gather
// right, step after step (the order is held while some rank still has to
// make a gather, then forgotten).
func TestRanksGatherParametersInOneOrder(t *testing.T) {
	s, bufs := twoShardedParams(t)
	for step := range 3 {
		for r := range 2 {
			for _, id := range []string{"a", "b"} {
				if err := s.GatherParams(r, id, bufs[id][r]); err != nil {
					t.Fatalf("step %d, rank %d, %s: %v", step, r, id, err)
				}
			}
		}
		for r := range 2 {
			if err := s.Wait(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := firstF32(t, bufs["b"][1]); got != 1 {
		t.Errorf("rank 1's b starts with %g, want rank 0's shard, 1", got)
	}
	if err := s.GatherParams(0, "a", bufs["a"][0]); err != nil {
		t.Fatal(err)
	}
	err := s.GatherParams(1, "b", bufs["b"][1])
	const want = `rank 1's all-gather 6 is of "b", rank 0's was of "a": ranks must gather parameters in the same order`
	if !errors.Is(err, paramsync.ErrMismatch) || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("rank 1 gathers b where rank 0 gathered a: %v", err)
	}
}

// TestAGatherDoesNotQueueBehindAReduceScatter: FSDP's backward asks for
// the gather of layer 0's parameters at once, while layer 1's backward
// still runs for 100 µs; layer 1's reduce-scatter waits for it. The
// gather runs at once, on streams of its own, as FSDP's all-gather
// stream: it had queued behind the reduce-scatter, starting at 137.5 µs.
func TestAGatherDoesNotQueueBehindAReduceScatter(t *testing.T) {
	const n = 1 << 20
	c, _ := simtest.World(t, "switch:4,bw=100GB/s,lat=1us", sim.Config{TimingOnly: true})
	s, err := paramsync.Start(c.World(), paramsync.Config{BucketBytes: 1, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	params := []paramsync.Param{{ID: "l0", Len: n, DType: hw.F32, Sharded: true}, {ID: "l1", Len: n, DType: hw.F32, Sharded: true}}
	var gatherStart, gatherEnd hw.Event
	for r, d := range c.Devices() {
		if err := s.Register(r, params); err != nil {
			t.Fatal(err)
		}
		st, err := d.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		if err := st.(*sim.Stream).Compute(100e-6, "layer 1 backward"); err != nil {
			t.Fatal(err)
		}
		ready, _ := d.NewEvent()
		if err := st.Record(ready); err != nil {
			t.Fatal(err)
		}
		grad, _ := d.Alloc(hw.F32, n)
		if err := s.SubmitGradient(r, "l1", grad, ready); err != nil {
			t.Fatal(err)
		}
		param, _ := d.Alloc(hw.F32, n)
		start, end, err := s.GatherParamsAfter(r, "l0", param)
		if err != nil {
			t.Fatal(err)
		}
		if r == 0 {
			gatherStart, gatherEnd = start, end
		}
	}
	for r := range 4 {
		if err := s.Wait(r); err != nil {
			t.Fatal(err)
		}
	}
	from, err := gatherStart.(*sim.Event).Time()
	if err != nil {
		t.Fatal(err)
	}
	to, _ := gatherEnd.(*sim.Event).Time()
	// Ring all-gather: 3 steps of 2 µs through the switch and a quarter
	// of 4 MiB at 100 GB/s.
	want := 3 * (2e-6 + float64(n)/100e9)
	if from != 0 || math.Abs(to.Seconds()-want) > 1e-9 {
		t.Errorf("the gather ran from %v to %v; want from 0 to %.3f µs", from, to, want*1e6)
	}
}
