package metal

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/proptest"
)

// The backend's behaviour tests on the CPU fake of the GPU (fakegpu_test.go):
// everything above the gpu seam, on every OS. The same tests run on a
// Mac's GPU as TestMetal… (metal_darwin_test.go).

func cpuWorld(t testing.TB, p int, opts ...Option) *hw.World {
	w, _ := fakeWorld(t, p, opts...)
	return w
}

func TestCPUBufferRoundTrip(t *testing.T) { testBufferRoundTrip(t, cpuWorld) }
func TestCPUReduceDivide(t *testing.T)    { testReduceDivide(t, cpuWorld) }
func TestCPUCopy(t *testing.T)            { testCopy(t, cpuWorld) }
func TestCPUSendRecv(t *testing.T)        { testSendRecv(t, cpuWorld) }
func TestCPUEvents(t *testing.T)          { testEvents(t, cpuWorld) }
func TestCPUBadArguments(t *testing.T)    { testBadArguments(t, cpuWorld) }
func TestCPUAbort(t *testing.T)           { testAbort(t, cpuWorld) }
func TestCPUDeadlock(t *testing.T)        { testDeadlock(t, cpuWorld) }

func TestCPUClosed(t *testing.T) {
	w, closeFn, err := newCluster(newFakeGPU(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	testClosed(t, w, closeFn)
}

// TestCPUGPUFailure: a command buffer that fails on the GPU fails its
// stream, the records after it fail their waiters, and a message whose
// staging copy failed fails its receiver, even though the failed command
// buffers never signal (the fake stops at the failing command).
func TestCPUGPUFailure(t *testing.T) {
	w, g := fakeWorld(t, 2)
	d0, d1 := device(t, w, 0), device(t, w, 1)
	a, b := newStream(t, d0), newStream(t, d1)
	x := alloc(t, d0, hw.F32, 16)
	ev := newEvent(t, d0)
	g.mu.Lock()
	g.failKernel = "reduce_sum_f32"
	g.mu.Unlock()
	must(t, a.Reduce(hw.Sum, hw.Whole(x), hw.Whole(x)))
	must(t, a.Record(ev))
	must(t, w.Send(a, 1, hw.Whole(x), 4))
	must(t, b.Wait(ev))
	must(t, b.Copy(hw.Whole(alloc(t, d1, hw.F32, 16)), hw.Whole(alloc(t, d1, hw.F32, 16))))
	errA := within(t, "synchronize a", a.Synchronize)
	errB := within(t, "synchronize b", b.Synchronize)
	for _, err := range []error{errA, errB} {
		if err == nil || !strings.Contains(err.Error(), "injected failure of reduce_sum_f32") {
			t.Errorf("want the injected failure, got %v", err)
		}
	}

	// The staging copy of a send fails: the receiver fails.
	g.mu.Lock()
	g.failKernel = "copy_b16"
	g.mu.Unlock()
	c, e := newStream(t, d0), newStream(t, d1)
	must(t, w.Send(c, 1, hw.Whole(alloc(t, d0, hw.F16, 8)), 5))
	must(t, w.Recv(e, 0, hw.Whole(alloc(t, d1, hw.F16, 8)), 5))
	if err := within(t, "synchronize e", e.Synchronize); err == nil || !strings.Contains(err.Error(), "injected failure of copy_b16") {
		t.Errorf("receiver of a failed send: %v", err)
	}
	if err := within(t, "synchronize c", c.Synchronize); err == nil {
		t.Error("the failed send's stream reports no error")
	}
}

// TestCPUFailedRecvLeavesTheStagingToTheSendsCopy: a receive that fails
// (here, the wrong size) while the sender's GPU still copies into the
// staging does not hand it back to the pool, where the next send could
// fill it at the same time; it goes back once the sender's command
// buffer completes.
func TestCPUFailedRecvLeavesTheStagingToTheSendsCopy(t *testing.T) {
	w, g := fakeWorld(t, 2)
	d0, d1 := device(t, w, 0), device(t, w, 1)
	a, b := newStream(t, d0), newStream(t, d1)
	hold := make(chan struct{})
	g.mu.Lock()
	g.hold = hold
	g.mu.Unlock()
	must(t, w.Send(a, 1, hw.Whole(alloc(t, d0, hw.F32, 16)), 7))
	must(t, w.Recv(b, 0, hw.Whole(alloc(t, d1, hw.F32, 8)), 7))
	if err := within(t, "synchronize b", b.Synchronize); !errors.Is(err, hw.ErrSizeMismatch) {
		t.Fatalf("receive of the wrong size: %v", err)
	}
	c := d0.(*Device).c
	idle := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.pool.idle
	}
	if n := idle(); n != 0 {
		t.Errorf("%d bytes of staging back in the pool while the send's copy has not run", n)
	}
	g.mu.Lock()
	g.hold = nil
	g.mu.Unlock()
	close(hold)
	must(t, within(t, "synchronize a", a.Synchronize))
	if n := idle(); n != 256 {
		t.Errorf("%d bytes of staging in the pool after the send's copy, want its 256", n)
	}
}

// TestCPURecvBeforeSendAcrossManyStreams: a ring of 8 ranks, 50 rounds,
// in which every rank enqueues each round's receive before its send (on a
// second stream, ordered by events), all ranks at once.
func TestCPURecvBeforeSendAcrossManyStreams(t *testing.T) {
	const p, rounds = 8, 50
	w := cpuWorld(t, p)
	sendS, recvS := make([]hw.Stream, p), make([]hw.Stream, p)
	bufs := make([]hw.Buffer, p)
	copied := make([]hw.Event, p)
	for r := range p {
		d := device(t, w, r)
		sendS[r], recvS[r] = newStream(t, d), newStream(t, d)
		bufs[r] = alloc(t, d, hw.I64, 3)
		copied[r] = newEvent(t, d)
		v := make([]byte, 24)
		le.PutUint64(v, uint64(r))
		write(t, bufs[r], v)
	}
	for round := range rounds {
		for r := range p {
			d := device(t, w, r)
			tmp := alloc(t, d, hw.I64, 3)
			sent := newEvent(t, d)
			must(t, w.Recv(recvS[r], (r+p-1)%p, hw.Whole(tmp), uint32(round)))
			must(t, sendS[r].Wait(copied[r])) // last round's value is in place
			must(t, w.Send(sendS[r], (r+1)%p, hw.Whole(bufs[r]), uint32(round)))
			must(t, sendS[r].Record(sent))
			must(t, recvS[r].Wait(sent)) // do not overwrite what is being sent
			must(t, recvS[r].Copy(hw.Whole(bufs[r]), hw.Whole(tmp)))
			must(t, recvS[r].Record(copied[r]))
		}
	}
	for r := range p {
		must(t, within(t, "synchronize", recvS[r].Synchronize))
		must(t, within(t, "synchronize", sendS[r].Synchronize))
		if got, want := le.Uint64(read(t, bufs[r])), uint64((r-rounds%p+p)%p); got != want {
			t.Errorf("rank %d holds %d after %d rounds, want %d", r, got, rounds, want)
		}
	}
}

// TestCPUEquivalence: sim and the backend (on the CPU fake, whose kernels
// are the Go mirror of the MSL) agree bit for bit on every algorithm x
// dtype x op, three cases of up to 1024 elements per combination.
func TestCPUEquivalence(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the equivalence matrix takes a few seconds")
	}
	var mu sync.Mutex
	var current *hw.World // the world of the case being run, for the watchdog
	cpu := proptest.Backend{Name: "metal(cpu fake)", NewWorld: func(c proptest.Case) (*hw.World, func(), error) {
		w, closeFn, err := newCluster(newFakeGPU(), c.Spec.Ranks, nil)
		if err != nil {
			return nil, nil, err
		}
		mu.Lock()
		current = w
		mu.Unlock()
		return w, func() {
			if err := closeFn(); err != nil {
				t.Errorf("close: %v", err)
			}
		}, nil
	}}
	// A hang would otherwise last until go test's timeout and say little:
	// dump the scheduler and every goroutine instead.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			mu.Lock()
			w := current
			mu.Unlock()
			state := "none yet"
			if w != nil {
				d, _ := w.Device(0)
				state = d.(*Device).c.String()
			}
			buf := make([]byte, 1<<22)
			buf = buf[:runtime.Stack(buf, true)]
			panic(fmt.Sprintf("TestCPUEquivalence hangs; the last world:\n%s\n\n%s", state, buf))
		}
	}()
	checkEquivalenceMatrix(t, cpu, 3, 1024)
}

// TestCPUNewWorldArguments: p < 1 is an error, never a panic.
func TestCPUNewWorldArguments(t *testing.T) {
	if _, _, err := newCluster(newFakeGPU(), 0, nil); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("0 ranks: %v", err)
	}
	w := cpuWorld(t, 3)
	if got := device(t, w, 2).Name(); got != "metal:cpu0/r2" || w.Kind() != "metal" {
		t.Errorf("name %q kind %q", got, w.Kind())
	}
}
