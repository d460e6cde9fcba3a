package comm_test

// Tests from a mutation run over the communicator's recent changes: each
// kills a mutant the other tests let live.

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/comm"
	"github.com/commsim/commsim/sim"
)

// mutWorld is a world of n devices whose streams finish their work at
// once (hangDevices that do not hang).
func mutWorld(t *testing.T, n int) (*hw.World, []*hangDevice) {
	t.Helper()
	devs := make([]*hangDevice, n)
	hws := make([]hw.Device, n)
	for r := range devs {
		devs[r] = newHangDevice(fmt.Sprintf("mut:%d", r), false)
		hws[r] = devs[r]
	}
	w, err := hw.NewWorld(hws)
	if err != nil {
		t.Fatal(err)
	}
	return w, devs
}

// TestARankThatCannotEnqueueAfterOthersEndsTheCommunicator: rank 1's part
// cannot be enqueued (its device has no streams left) after rank 0's
// was, and rank 0's waits for rank 1's messages: the devices are aborted
// and the communicator is closed, as after its watchdog.
func TestARankThatCannotEnqueueAfterOthersEndsTheCommunicator(t *testing.T) {
	w, devs := mutWorld(t, 3)
	devs[1].noStreams = true
	// A short Timeout: a communicator left open fails the next call soon.
	cm, err := comm.New(w, comm.Config{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	bufs := make([]hw.Slice, 3)
	for r, d := range devs {
		b, _ := d.Alloc(hw.F32, 6)
		bufs[r] = hw.Whole(b)
	}
	call := comm.Call{Op: ops.AllReduce, Count: 6, DType: hw.F32, Redop: hw.Sum}
	_, errs := doAll(cm, call, bufs)
	for r, err := range errs {
		if !errors.Is(err, errNoStreams) || !strings.Contains(err.Error(), "rank 1") {
			t.Errorf("rank %d: %v, want rank 1's lack of streams", r, err)
		}
	}
	for r, d := range devs {
		if n := d.aborts.Load(); n != 1 {
			t.Errorf("device of rank %d aborted %d times, want once", r, n)
		}
	}
	if _, err := cm.Do(0, call, bufs[0], bufs[0]); !errors.Is(err, comm.ErrClosed) {
		t.Errorf("the next call: %v, want %v", err, comm.ErrClosed)
	}
}

// TestABarrierMakesItsEmptyBufferOnce: barriers without buffers share
// one buffer of no bytes a rank, made at the first.
func TestABarrierMakesItsEmptyBufferOnce(t *testing.T) {
	w, devs := mutWorld(t, 2)
	cm, err := comm.New(w, comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	var first []int32
	for range 3 {
		if _, errs := doAll(cm, comm.Call{Op: ops.Barrier}, make([]hw.Slice, 2)); errors.Join(errs...) != nil {
			t.Fatal(errors.Join(errs...))
		}
		if first == nil {
			for _, d := range devs {
				first = append(first, d.allocs.Load())
			}
		}
	}
	for r, d := range devs {
		if n := d.allocs.Load(); n != first[r] {
			t.Errorf("rank %d: %d buffers after the first barrier, %d after three: the empty one is made once", r, first[r], n)
		}
	}
}

// TestABarrierOfARankOutsideTheWorldIsRefused: a barrier without buffers
// of a rank the communicator does not have is an error, not a panic
// (its empty buffer is looked up before the rank is checked).
func TestABarrierOfARankOutsideTheWorldIsRefused(t *testing.T) {
	w, _ := mutWorld(t, 2)
	cm, err := comm.New(w, comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	for _, rank := range []int{-1, 2} {
		if _, err := cm.Do(rank, comm.Call{Op: ops.Barrier}, hw.Slice{}, hw.Slice{}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rank %d not in 0..1", rank)) {
			t.Errorf("rank %d: %v, want it refused", rank, err)
		}
	}
}

// TestABarrierWithAndWithoutBuffersAgrees: a rank that calls a barrier
// with no buffers and no dtype and one that names its own u8 buffer of
// no bytes ask for the same barrier.
func TestABarrierWithAndWithoutBuffersAgrees(t *testing.T) {
	w, devs := mutWorld(t, 2)
	cm, err := comm.New(w, comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	own, _ := devs[1].Alloc(hw.U8, 0)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { _, errs[0] = cm.Do(0, comm.Call{Op: ops.Barrier}, hw.Slice{}, hw.Slice{}) })
	wg.Go(func() { _, errs[1] = cm.Do(1, comm.Call{Op: ops.Barrier, DType: hw.U8}, hw.Whole(own), hw.Whole(own)) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestAPlannerMayNameItsOwnAlgorithm: with Config.Planner, Algo only
// names the plans (a tuner's name, or auto without a cost model): New
// takes it, and the planner makes the plan.
func TestAPlannerMayNameItsOwnAlgorithm(t *testing.T) {
	for _, algo := range []string{"my-tuner", "auto"} {
		asked := 0
		ring := func(s ops.Spec) (*ops.Plan, error) {
			asked++
			s.Algo = "ring"
			return ops.Compile(s)
		}
		w, devs := mutWorld(t, 2)
		cm, err := comm.New(w, comm.Config{Algo: algo, Planner: ring})
		if err != nil {
			t.Fatalf("algo %q: %v", algo, err)
		}
		bufs := make([]hw.Slice, 2)
		for r, d := range devs {
			b, _ := d.Alloc(hw.F32, 4)
			bufs[r] = hw.Whole(b)
		}
		if _, errs := doAll(cm, comm.Call{Op: ops.AllReduce, Count: 4, DType: hw.F32, Redop: hw.Sum}, bufs); errors.Join(errs...) != nil || asked != 1 {
			t.Errorf("algo %q: %v; the planner was asked %d times, want once", algo, errors.Join(errs...), asked)
		}
		cm.Close()
	}
}

// TestAPlannersNativePlanRunsThroughTheLibrary: a planner that answers a
// call (of the default algorithm) with a native plan has it run by the
// library, as a native call is: the plan decides, not the call's name.
func TestAPlannersNativePlanRunsThroughTheLibrary(t *testing.T) {
	w, bufs, _, _ := libWorld(t)
	native := func(s ops.Spec) (*ops.Plan, error) {
		s.Algo = ops.Native
		return ops.Compile(s)
	}
	cm, err := comm.New(w, comm.Config{Planner: native})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	if _, errs := doAll(cm, comm.Call{Op: ops.AllReduce, Count: 2, DType: hw.I32, Redop: hw.Sum}, bufs); errors.Join(errs...) != nil {
		t.Fatal(errors.Join(errs...))
	}
	if got := readI32s(t, bufs[1]); fmt.Sprint(got) != "[6 30]" {
		t.Errorf("rank 1 holds %v, want [6 30]", got)
	}
}

// TestANativeCallTakesNoEvent: the library launches every rank at once
// and waits for nothing of the caller's: a native call given an event to
// start after, even one, is refused on every rank.
func TestANativeCallTakesNoEvent(t *testing.T) {
	w, bufs, _, _ := libWorld(t)
	cm, err := comm.New(w, comm.Config{Algo: ops.Native})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	call := comm.Call{Op: ops.AllReduce, Count: 2, DType: hw.I32, Redop: hw.Sum}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			dev, _ := w.Device(r)
			ev, err := dev.NewEvent()
			if err != nil {
				errs[r] = err
				return
			}
			var after []hw.Event
			if r == 2 {
				after = append(after, ev)
			}
			_, errs[r] = cm.Do(r, call, bufs[r], bufs[r], after...)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, ops.ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "rank 2") {
			t.Errorf("rank %d: %v, want rank 2's event refused", r, err)
		}
	}
	if got := readI32s(t, bufs[0]); fmt.Sprint(got) != "[1 10]" {
		t.Errorf("rank 0 holds %v: the refused call ran", got)
	}
}

// TestACommunicatorKeepsItsMessagesFromItsWorlds: an all-reduce enqueued
// on the world itself, rank 0's part behind 100 µs of compute, is in
// flight while a communicator over that world all-reduces other
// buffers. The communicator runs on a duplicate: on the world itself its
// receives would take the other all-reduce's messages.
func TestACommunicatorKeepsItsMessagesFromItsWorlds(t *testing.T) {
	c, _ := simtest.World(t, "switch:4,bw=100GB/s,lat=1us", sim.Config{})
	cm, err := comm.New(c.World(), comm.Config{Algo: "ring"})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	devs := asDevices(c.Devices())
	other := i32s(t, devs, func(r int) []int32 { return []int32{100 * int32(r+1), 100, 100, 100} })
	mine := i32s(t, devs, func(r int) []int32 { return []int32{int32(r + 1), 1, 1, 1} })
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 4, DType: hw.I32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	ex := ops.NewExecutor(c.World())
	for r, d := range c.Devices() {
		var after []hw.Event
		if r == 0 {
			after = append(after, simtest.BehindCompute(t, d, 100))
		}
		if _, err := ex.Enqueue(plan, r, other[r], other[r], after...); err != nil {
			t.Fatal(err)
		}
	}
	_, errs := doAll(cm, comm.Call{Op: ops.AllReduce, Count: 4, DType: hw.I32, Redop: hw.Sum}, mine)
	for r := range 4 {
		errs = append(errs, ex.Synchronize(r))
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		if got, want := fmt.Sprint(readI32s(t, mine[r]), readI32s(t, other[r])), "[10 4 4 4] [1000 400 400 400]"; got != want {
			t.Errorf("rank %d holds %s, want %s", r, got, want)
		}
	}
}

// TestAPlanTheExecutorRefusesReadsAsRunsRefusal: a plan the executor
// cannot run (NVLS's switch steps, which ops' generic driver does not
// move) is refused before any rank's part is enqueued, in the words of
// the executor's Run.
func TestAPlanTheExecutorRefusesReadsAsRunsRefusal(t *testing.T) {
	cm, devs := newComm(t, "switch:4,reduce=500GB/s", comm.Config{Algo: "nccl-nvls"})
	defer cm.Close()
	bufs := i32s(t, asDevices(devs), func(r int) []int32 { return []int32{int32(r), 1, 2, 3} })
	_, errs := doAll(cm, comm.Call{Op: ops.AllReduce, Count: 4, DType: hw.I32, Redop: hw.Sum}, bufs)
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-nvls", Ranks: 4, Count: 4, DType: hw.I32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	w, err := hw.NewWorld(asDevices(devs))
	if err != nil {
		t.Fatal(err)
	}
	_, runErr := ops.NewExecutor(w).Run(plan, bufs, bufs)
	if !errors.Is(runErr, ops.ErrUnsupported) {
		t.Fatalf("Run: %v, want it refused", runErr)
	}
	for r, err := range errs {
		if want := "comm: slot 0: " + runErr.Error(); fmt.Sprint(err) != want {
			t.Errorf("rank %d: %v, want %s", r, err, want)
		}
	}
}

// TestABarrierGivenOneBufferIsRefused: only a barrier given no buffers
// runs on the communicator's buffer of no bytes; one given its input and
// no output is refused for the missing one, as any collective is.
func TestABarrierGivenOneBufferIsRefused(t *testing.T) {
	w, devs := mutWorld(t, 2)
	cm, err := comm.New(w, comm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		in, _ := devs[r].Alloc(hw.U8, 0)
		wg.Go(func() { _, errs[r] = cm.Do(r, comm.Call{Op: ops.Barrier, DType: hw.U8}, hw.Whole(in), hw.Slice{}) })
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "output: bad argument: nil buffer") {
			t.Errorf("rank %d: %v, want its nil output refused", r, err)
		}
	}
}
