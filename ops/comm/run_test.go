package comm_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/comm"
	"github.com/commsim/commsim/sim"
)

// doAll makes call on every rank of cm, each from its own goroutine, rank
// r on bufs[r] in place, and returns each rank's time and error.
func doAll(cm *comm.Comm, call comm.Call, bufs []hw.Slice) ([]float64, []error) {
	secs, errs := make([]float64, len(bufs)), make([]error, len(bufs))
	var wg sync.WaitGroup
	for r := range bufs {
		wg.Go(func() { secs[r], errs[r] = cm.Do(r, call, bufs[r], bufs[r]) })
	}
	wg.Wait()
	return secs, errs
}

// i32s is a buffer of vals on each device, whole.
func i32s(t *testing.T, devs []hw.Device, vals func(r int) []int32) []hw.Slice {
	t.Helper()
	out := make([]hw.Slice, len(devs))
	for r, d := range devs {
		v := vals(r)
		b, err := d.Alloc(hw.I32, len(v))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Write(hw.Encode(v)); err != nil {
			t.Fatal(err)
		}
		out[r] = hw.Whole(b)
	}
	return out
}

func readI32s(t *testing.T, s hw.Slice) []int32 {
	t.Helper()
	raw := make([]byte, s.Buf.Len()*4)
	if err := s.Buf.Read(raw); err != nil {
		t.Fatal(err)
	}
	vals, err := hw.Decode[int32](raw)
	if err != nil {
		t.Fatal(err)
	}
	return vals[s.Off : s.Off+s.Len]
}

// TestABadBufferOnOneRankEnqueuesNothing: a call whose buffer is wrong on
// one rank fails on every rank before any rank's part is enqueued, so the
// next call, right on all, runs and computes what it should. The other
// ranks' parts had been enqueued, and waited for messages that never
// came: the next call deadlocked, leaving partial sums behind.
func TestABadBufferOnOneRankEnqueuesNothing(t *testing.T) {
	cm, devs := newComm(t, "switch:4", comm.Config{})
	defer cm.Close()
	ones := func(int) []int32 { return []int32{1, 1, 1, 1, 1, 1, 1, 1} }
	bufs := i32s(t, asDevices(devs), ones)
	bufs[3] = bufs[3].Sub(0, 4)
	call := comm.Call{Op: ops.AllReduce, Count: 8, DType: hw.I32, Redop: hw.Sum}
	_, errs := doAll(cm, call, bufs)
	for r, err := range errs {
		if !errors.Is(err, hw.ErrSizeMismatch) || !strings.Contains(err.Error(), "rank 3 input") {
			t.Fatalf("rank %d: %v, want the size mismatch of rank 3's input", r, err)
		}
	}
	bufs[3] = hw.Whole(bufs[3].Buf)
	if _, errs = doAll(cm, call, bufs); errors.Join(errs...) != nil {
		t.Fatalf("the next call: %v", errors.Join(errs...))
	}
	for r := range bufs {
		if got := readI32s(t, bufs[r]); fmt.Sprint(got) != "[4 4 4 4 4 4 4 4]" {
			t.Errorf("rank %d holds %v, want 4s", r, got)
		}
	}
}

func asDevices(devs []*sim.Device) []hw.Device {
	out := make([]hw.Device, len(devs))
	for r, d := range devs {
		out[r] = d
	}
	return out
}

// libWorld is a world of switch:3's simulated devices behind the fake
// collective library, their buffers of {r+1, 10}, the calls that reach the
// library and how many times its communicators were closed.
func libWorld(t *testing.T) (w *hw.World, bufs []hw.Slice, launched *[]hw.NativeCall, closed *int) {
	t.Helper()
	c, _ := simtest.World(t, "switch:3", sim.Config{})
	launched, closed = new([]hw.NativeCall), new(int)
	devs := make([]hw.Device, 3)
	for r, d := range c.Devices() {
		devs[r] = &simtest.LibDevice{Device: d, Launched: launched, Closed: closed}
	}
	w, err := hw.NewWorld(devs)
	if err != nil {
		t.Fatal(err)
	}
	return w, i32s(t, devs, func(r int) []int32 { return []int32{int32(r + 1), 10} }), launched, closed
}

// TestNativeRunsThroughTheLibrary: algorithm native, NCCL's own
// collectives, is launched by the backend's library for every rank at
// once. The communicator enqueued it rank by rank, which the executor
// refuses for every native plan, so that native never ran through it.
func TestNativeRunsThroughTheLibrary(t *testing.T) {
	w, bufs, launched, closed := libWorld(t)
	cm, err := comm.New(w, comm.Config{Algo: ops.Native})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	_, errs := doAll(cm, comm.Call{Op: ops.AllReduce, Count: 2, DType: hw.I32, Redop: hw.Sum}, bufs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if len(*launched) != 3 {
		t.Errorf("%d calls reached the library, want one a rank", len(*launched))
	}
	for r := range bufs {
		if got := readI32s(t, bufs[r]); fmt.Sprint(got) != "[6 30]" {
			t.Errorf("rank %d holds %v, want [6 30]", r, got)
		}
	}
	// Closing the communicator lets go of the library's, which an NCCL
	// communicator on CUDA would have held for ever.
	if err := cm.Close(); err != nil || *closed != 1 {
		t.Errorf("Close: %v, and the library's communicator closed %d times, want once", err, *closed)
	}
}

// TestARunsFailureReadsAsTheExecutorsDoes: a rank that crashes mid-run
// fails every rank's call with one error, the same whatever order the
// ranks' goroutines finish in: the crash first, then the ranks that
// failed for it, once. It had joined one error a rank, in the order they
// finished.
func TestARunsFailureReadsAsTheExecutorsDoes(t *testing.T) {
	var first string
	for try := range 5 {
		c, _ := simtest.World(t, "switch:8,bw=100GB/s,lat=1us", sim.Config{TimingOnly: true})
		cm, err := comm.New(c.World(), comm.Config{Algo: "ring"})
		if err != nil {
			t.Fatal(err)
		}
		bufs := make([]hw.Slice, 8)
		for r, d := range c.Devices() {
			b, err := d.Alloc(hw.F32, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			bufs[r] = hw.Whole(b)
		}
		crash, err := sim.ParseFault("rank 3 crash at 20us")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Inject(crash); err != nil {
			t.Fatal(err)
		}
		_, errs := doAll(cm, comm.Call{Op: ops.AllReduce, Count: 1 << 20, DType: hw.F32, Redop: hw.Sum}, bufs)
		msg := errs[0].Error()
		for r, err := range errs {
			if err == nil || err.Error() != msg {
				t.Fatalf("rank %d: %v; rank 0: %s; want the same error on every rank", r, err, msg)
			}
		}
		if !errors.Is(errs[0], sim.ErrCrashed) || strings.Contains(msg, "\n") ||
			strings.Count(msg, "rank 3 (sim:gpu3) crashed") != 1 || !strings.HasSuffix(msg, "rank(s) 0, 1, 4, 5, 6, 7, whose peers failed before sending to them") {
			t.Fatalf("%s: want one line, rank 3's crash once, and then the ranks that failed for it", msg)
		}
		if try == 0 {
			first = msg
		} else if msg != first {
			t.Fatalf("run %d's error differs from the first:\n%s\n%s", try, msg, first)
		}
		cm.Close()
	}
}

// TestFieldsTheOpDoesNotReadAreNoMismatch: ranks that give an all-reduce
// different roots, or an all-gather different reductions, agree on all
// the op reads, as NCCL takes them. They were called a mismatch, printed
// as the same request on every rank.
func TestFieldsTheOpDoesNotReadAreNoMismatch(t *testing.T) {
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather} {
		cm, devs := newComm(t, "switch:4", comm.Config{})
		in := i32s(t, asDevices(devs), func(r int) []int32 { return []int32{int32(r + 1)} })
		out := i32s(t, asDevices(devs), func(int) []int32 { return make([]int32, 4) })
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for r := range 4 {
			call := comm.Call{Op: op, Count: 1, DType: hw.I32, Redop: hw.Sum, Root: r}
			if op == ops.AllGather {
				call.Redop = []hw.ReduceOp{hw.Sum, hw.Prod, hw.Max, hw.Min}[r]
			} else {
				out[r] = out[r].Sub(0, 1)
			}
			wg.Go(func() { _, errs[r] = cm.Do(r, call, in[r], out[r]) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("%v: %v", op, err)
		}
		want := map[ops.Op]string{ops.AllReduce: "[10]", ops.AllGather: "[1 2 3 4]"}[op]
		if got := fmt.Sprint(readI32s(t, out[2])); got != want {
			t.Errorf("%v: rank 2 holds %s, want %s", op, got, want)
		}
		cm.Close()
	}
}

// TestAPlannerMakesEveryCallsPlan: Config.Planner makes each call's plan
// (NCCL's tuner would, choosing by size), and a plan of another
// collective than the call's is refused, not run on buffers it does not
// fit.
func TestAPlannerMakesEveryCallsPlan(t *testing.T) {
	var asked []ops.Spec
	rd := func(s ops.Spec) (*ops.Plan, error) {
		asked = append(asked, s)
		s.Algo = "rd"
		return ops.Compile(s)
	}
	cm, devs := newComm(t, "switch:4,lat=1us,bw=1TB/s", comm.Config{Planner: rd})
	bufs := i32s(t, asDevices(devs), func(r int) []int32 { return []int32{int32(r), 1} })
	call := comm.Call{Op: ops.AllReduce, Count: 2, DType: hw.I32, Redop: hw.Sum}
	secs, errs := doAll(cm, call, bufs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// rd: 2 rounds of a 2 µs way through the switch; ring would take 6.
	if len(asked) != 1 || secs[0] < 4e-6 || secs[0] > 4.1e-6 || fmt.Sprint(readI32s(t, bufs[1])) != "[6 4]" {
		t.Errorf("planner asked %d times, the call took %g s and left %v; want once, rd's 4 µs and [6 4]", len(asked), secs[0], readI32s(t, bufs[1]))
	}
	cm.Close()

	wrong := func(s ops.Spec) (*ops.Plan, error) {
		s.Count *= 2
		return ops.Compile(s)
	}
	cm, devs = newComm(t, "switch:4", comm.Config{Planner: wrong})
	defer cm.Close()
	bufs = i32s(t, asDevices(devs), func(r int) []int32 { return []int32{int32(r), 1} })
	if _, errs = doAll(cm, call, bufs); !strings.Contains(fmt.Sprint(errs[2]), "the planner gave a plan for 4 x i32 allreduce on 4 ranks by sum, asked for 2 x i32 allreduce on 4 ranks by sum") {
		t.Errorf("a plan of twice the count: %v", errs[2])
	}
}

// TestACallFollowsTheComputeItWaitsFor: each rank computes for 100 µs on
// a stream of its own, then all-reduces what it made, behind the
// compute's event and without waiting for it on the host. The step takes
// the compute and the all-reduce one after the other, the ranks side by
// side, and the call's time is the all-reduce's. Do took no events: the
// all-reduce ran during the compute, or, with the host waiting for each
// rank's compute first, the ranks' compute ran one after another.
func TestACallFollowsTheComputeItWaitsFor(t *testing.T) {
	c, _ := simtest.World(t, "switch:4,bw=100GB/s,lat=1us", sim.Config{TimingOnly: true})
	cm, err := comm.New(c.World(), comm.Config{Algo: "ring"})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	const n = 1 << 20 // f32: 4 MiB
	// Ring: 6 steps of 2 µs through the switch and a quarter of 4 MiB at
	// 100 GB/s.
	allReduce := 6 * (2e-6 + float64(n*4/4)/100e9)
	secs := make([]float64, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for r, d := range c.Devices() {
		wg.Go(func() {
			errs[r] = func() error {
				buf, err := d.Alloc(hw.F32, n)
				if err != nil {
					return err
				}
				st, err := d.NewStream()
				if err != nil {
					return err
				}
				if err := st.(*sim.Stream).Compute(100e-6, "backward"); err != nil {
					return err
				}
				made, err := d.NewEvent()
				if err != nil {
					return err
				}
				if err := st.Record(made); err != nil {
					return err
				}
				call := comm.Call{Op: ops.AllReduce, Count: n, DType: hw.F32, Redop: hw.Sum}
				secs[r], err = cm.Do(r, call, hw.Whole(buf), hw.Whole(buf), made, nil)
				return err
			}()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if now := c.Now().Seconds(); math.Abs(now-(100e-6+allReduce)) > 1e-9 || math.Abs(secs[0]-allReduce) > 1e-9 {
		t.Errorf("the step ended at %.3f µs and the call took %.3f µs; want %.3f µs of compute and then %.3f", now*1e6, secs[0]*1e6, 100.0, allReduce*1e6)
	}
}

// TestAPlanOfAnotherRootOrReductionIsRefused: a planner's broadcast from
// root 0 for a call from root 2, or its sum for an average, fits the
// buffers but computes another thing: refused, where every rank had
// taken rank 0's value.
func TestAPlanOfAnotherRootOrReductionIsRefused(t *testing.T) {
	for _, tc := range []struct {
		call  comm.Call
		wrong func(*ops.Spec)
		want  string
	}{
		{comm.Call{Op: ops.Broadcast, Count: 1, DType: hw.I32, Root: 2}, func(s *ops.Spec) { s.Root = 0 },
			"the planner gave a plan for 1 x i32 broadcast on 4 ranks to or from root 0, asked for 1 x i32 broadcast on 4 ranks to or from root 2"},
		{comm.Call{Op: ops.AllReduce, Count: 1, DType: hw.I32, Redop: hw.Avg}, func(s *ops.Spec) { s.Redop = hw.Sum },
			"the planner gave a plan for 1 x i32 allreduce on 4 ranks by sum, asked for 1 x i32 allreduce on 4 ranks by avg"},
	} {
		planner := func(s ops.Spec) (*ops.Plan, error) {
			tc.wrong(&s)
			s.Algo = "tree"
			if s.Op == ops.AllReduce {
				s.Algo = "ring"
			}
			return ops.Compile(s)
		}
		cm, devs := newComm(t, "switch:4", comm.Config{Planner: planner})
		bufs := i32s(t, asDevices(devs), func(r int) []int32 { return []int32{int32(r + 10)} })
		_, errs := doAll(cm, tc.call, bufs)
		if !strings.Contains(fmt.Sprint(errs[1]), tc.want) {
			t.Errorf("%v: %v, want %q", tc.call.Op, errs[1], tc.want)
		}
		cm.Close()
	}
}
