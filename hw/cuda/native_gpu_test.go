//go:build linux || darwin

package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// TestNCCLNativeOps runs algorithm native through ops.Executor on real
// NCCL, one rank per GPU (all the GPUs there are, up to 8; one GPU makes a
// one-rank communicator, which still runs every NCCL call, sends to self
// included), and checks i32 sums exactly. It skips without libnccl.so.2
// (COMMSIM_NCCL_LIBRARY names another path) or without a GPU.
// scripts/gpu-check.sh runs it in its nccl part.
func TestNCCLNativeOps(t *testing.T) {
	if err := NCCLAvailable(); err != nil {
		t.Skipf("libnccl.so.2 not found: %v", err)
	}
	gpus := min(needGPU(t), 8)
	v, _ := NCCLVersion()
	t.Logf("NCCL %d, %d ranks one per GPU", v, gpus)
	w, devs := openWorld(t, gpus, OnePerGPU)
	for _, n := range []int{5, 1 << 20} {
		checkNativeOps(t, w, n)
	}

	// The watchdog's timeout reaches the communicator; a healthy
	// collective finishes well within it.
	t.Setenv(EnvNCCLTimeout, "30s")
	hdevs := make([]hw.Device, gpus)
	for r, d := range devs {
		hdevs[r] = d
	}
	c, err := devs[0].NewNativeComm(hdevs)
	if err != nil {
		t.Fatal(err)
	}
	streams := make([]hw.Stream, gpus)
	bufs := make([]hw.Buffer, gpus)
	for r, d := range devs {
		streams[r] = stream(t, d)
		bufs[r] = newBuf(t, d, hw.F32, encode(t, hw.F32, []float64{float64(r), 1, -2, 0.5}))
	}
	if err := c.Launch(allReduceCalls(streams, bufs)); err != nil {
		t.Fatal(err)
	}
	for r, s := range streams {
		if err := s.Synchronize(); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	want := encode(t, hw.F32, []float64{float64(gpus * (gpus - 1) / 2), float64(gpus), float64(-2 * gpus), 0.5 * float64(gpus)})
	for r, b := range bufs {
		if got := readAll(t, b); string(got) != string(want) {
			t.Errorf("rank %d: allreduce f32 gave % x, want % x", r, got, want)
		}
	}
	// Device.Abort reaches the communicator: launches are refused after it.
	reason := errors.New("test abort")
	if err := devs[0].Abort(reason); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(allReduceCalls(streams, bufs)); !errors.Is(err, reason) {
		t.Errorf("launch after Device.Abort: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close after abort: %v", err)
	}
}

// TestNCCLNativeRefusesVirtualRanks: on a real GPU, virtual ranks get the
// clear refusal, not NCCL's "Duplicate GPU detected".
func TestNCCLNativeRefusesVirtualRanks(t *testing.T) {
	needGPU(t)
	_, devs := openWorld(t, 2, Virtual)
	_, err := devs[0].NewNativeComm([]hw.Device{devs[0], devs[1]})
	if !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "use one GPU per rank (placement gpu)") {
		t.Fatalf("virtual ranks: %v", err)
	}
}

// TestNCCLJoinNative runs a multi-process communicator with goroutines as
// the processes, one per GPU (up to 4): each opens its own one-rank world
// with JoinNative over a loopback rendezvous (its own ncclCommInitRank on
// its own thread, as separate processes would) and runs every native op
// through ops.RunNativeRank, launching only its rank; i32 sums are checked
// exactly. It skips without libnccl.so.2 or a GPU. scripts/gpu-check.sh
// runs it in its nccl part.
func TestNCCLJoinNative(t *testing.T) {
	if err := NCCLAvailable(); err != nil {
		t.Skipf("libnccl.so.2 not found: %v", err)
	}
	p := min(needGPU(t), 4)
	t.Logf("%d goroutine-processes, one GPU each", p)
	addr := loopbackAddr(t)
	procs := make([]joined, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Go(func() {
			rdv := Rendezvous{Addr: addr, Rank: r, Size: p, Timeout: time.Minute}
			w, comm, closeFn, err := JoinNative(context.Background(), rdv, r)
			if err != nil {
				errs[r] = err
				return
			}
			t.Cleanup(func() {
				if err := closeFn(); err != nil {
					t.Errorf("rank %d: close: %v", r, err)
				}
			})
			procs[r] = joined{w: w, dev: w.Devices()[0].(*Device), comm: comm.(*NativeComm)}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for _, n := range []int{5, 1 << 20} {
		for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.SendRecv} {
			for _, inPlace := range []bool{false, true} {
				spec := ops.Spec{Op: op, Algo: ops.Native, Ranks: p, Count: n, Root: p - 1, DType: hw.I32, Redop: hw.Sum}
				t.Run(fmt.Sprintf("%v/n=%d/inplace=%v", op, n, inPlace), func(t *testing.T) {
					runJoined(t, procs, spec, inPlace)
				})
			}
		}
	}
}
