//go:build linux && (amd64 || arm64)

package cuda_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda"
)

// These tests run NCCL on real GPUs. They bind the few CUDA driver calls
// they need themselves, so they depend on nothing of the package but the
// NCCL capability: device pointers and streams are plain handles here, as
// the capability takes them.

type ncclTestCUDA struct {
	init              func(flags uint32) int32
	deviceGetCount    func(count *int32) int32
	primaryCtxRetain  func(ctx *uintptr, dev int32) int32
	primaryCtxRelease func(dev int32) int32
	ctxSetCurrent     func(ctx uintptr) int32
	ctxSynchronize    func() int32
	memAlloc          func(ptr *uint64, size uintptr) int32
	memFree           func(ptr uint64) int32
	memcpyHtoD        func(dst uint64, src unsafe.Pointer, size uintptr) int32
	memcpyDtoH        func(dst unsafe.Pointer, src uint64, size uintptr) int32
	streamCreate      func(stream *uintptr, flags uint32) int32
	streamQuery       func(stream uintptr) int32
	streamDestroy     func(stream uintptr) int32
}

var (
	ncclTestCUDAOnce sync.Once
	ncclTestCU       *ncclTestCUDA
	ncclTestCUErr    error
)

// ncclTestNeed skips unless NCCL loads and the driver shows at least min
// GPUs, and returns the driver bindings and the GPU count.
func ncclTestNeed(t *testing.T, min int) (*ncclTestCUDA, int) {
	t.Helper()
	if err := cuda.NCCLAvailable(); err != nil {
		t.Skipf("libnccl.so.2 not found: %v", err)
	}
	ncclTestCUDAOnce.Do(func() {
		h, err := purego.Dlopen("libcuda.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			ncclTestCUErr = err
			return
		}
		cu := &ncclTestCUDA{}
		for _, s := range []struct {
			name string
			fn   any
		}{
			{"cuInit", &cu.init}, {"cuDeviceGetCount", &cu.deviceGetCount},
			{"cuDevicePrimaryCtxRetain", &cu.primaryCtxRetain}, {"cuDevicePrimaryCtxRelease_v2", &cu.primaryCtxRelease},
			{"cuCtxSetCurrent", &cu.ctxSetCurrent}, {"cuCtxSynchronize", &cu.ctxSynchronize},
			{"cuMemAlloc_v2", &cu.memAlloc}, {"cuMemFree_v2", &cu.memFree},
			{"cuMemcpyHtoD_v2", &cu.memcpyHtoD}, {"cuMemcpyDtoH_v2", &cu.memcpyDtoH},
			{"cuStreamCreate", &cu.streamCreate}, {"cuStreamQuery", &cu.streamQuery}, {"cuStreamDestroy_v2", &cu.streamDestroy},
		} {
			addr, err := purego.Dlsym(h, s.name)
			if err != nil {
				ncclTestCUErr = err
				return
			}
			purego.RegisterFunc(s.fn, addr)
		}
		if r := cu.init(0); r != 0 {
			ncclTestCUErr = fmt.Errorf("cuInit: CUresult %d", r)
			return
		}
		ncclTestCU = cu
	})
	if ncclTestCUErr != nil {
		t.Skipf("no CUDA driver: %v", ncclTestCUErr)
	}
	n := new(int32)
	var pin runtime.Pinner
	pin.Pin(n)
	defer pin.Unpin()
	if r := ncclTestCU.deviceGetCount(n); r != 0 || int(*n) < min {
		t.Skipf("fewer than %d GPUs (cuDeviceGetCount: %d GPUs, CUresult %d)", min, *n, r)
	}
	return ncclTestCU, int(*n)
}

// ncclTestGPU is one rank's device state: its context, a stream, and three
// f32 buffers of count elements (send, recv) and count×ranks (gathered).
type ncclTestGPU struct {
	dev                    int
	ctx, stream            uintptr
	send, recv, gathered   uint64
	count, ranks, rankOfMe int
}

// ncclTestValue is what rank r puts at element i; small integers, so every
// sum is exact in f32 whatever order NCCL adds in.
func ncclTestValue(r, i int) float32 { return float32((r + 1) * (i%13 + 1)) }

// ncclTestCalls collects the first failing driver call, so helpers can run
// on goroutines that must not call t.Fatal.
type ncclTestCalls struct{ err error }

func (e *ncclTestCalls) do(call string, r int32) {
	if e.err == nil && r != 0 {
		e.err = fmt.Errorf("%s: CUresult %d", call, r)
	}
}

// setup makes rank's buffers on dev and fills send; the calling goroutine
// must be locked to its thread.
func (cu *ncclTestCUDA) setup(t *testing.T, dev, rank, ranks, count int) (*ncclTestGPU, error) {
	g := &ncclTestGPU{dev: dev, count: count, ranks: ranks, rankOfMe: rank}
	var e ncclTestCalls
	var pin runtime.Pinner
	defer pin.Unpin()
	ctx, stream, p := new(uintptr), new(uintptr), new(uint64)
	pin.Pin(ctx)
	pin.Pin(stream)
	pin.Pin(p)
	if e.do("cuDevicePrimaryCtxRetain", cu.primaryCtxRetain(ctx, int32(dev))); e.err != nil {
		return nil, e.err
	}
	g.ctx = *ctx
	t.Cleanup(func() {
		cu.ctxSetCurrent(g.ctx)
		for _, b := range []uint64{g.send, g.recv, g.gathered} {
			if b != 0 {
				cu.memFree(b)
			}
		}
		if g.stream != 0 {
			cu.streamDestroy(g.stream)
		}
		cu.primaryCtxRelease(int32(g.dev))
	})
	e.do("cuCtxSetCurrent", cu.ctxSetCurrent(g.ctx))
	e.do("cuStreamCreate", cu.streamCreate(stream, 0))
	g.stream = *stream
	for _, b := range []struct {
		dst *uint64
		n   int
	}{{&g.send, count}, {&g.recv, count}, {&g.gathered, count * ranks}} {
		*p = 0
		e.do("cuMemAlloc_v2", cu.memAlloc(p, uintptr(4*b.n)))
		*b.dst = *p
	}
	if e.err != nil {
		return nil, e.err
	}
	host := make([]float32, count)
	for i := range host {
		host[i] = ncclTestValue(rank, i)
	}
	pin.Pin(&host[0])
	e.do("cuMemcpyHtoD_v2", cu.memcpyHtoD(g.send, unsafe.Pointer(&host[0]), uintptr(4*count)))
	// A pageable copy may return before its DMA lands, and NCCL's stream is
	// not ordered after the copy: wait for it.
	e.do("cuCtxSynchronize", cu.ctxSynchronize())
	return g, e.err
}

func (cu *ncclTestCUDA) read(g *ncclTestGPU, src uint64, n int) ([]float32, error) {
	var e ncclTestCalls
	e.do("cuCtxSetCurrent", cu.ctxSetCurrent(g.ctx))
	host := make([]float32, n)
	var pin runtime.Pinner
	pin.Pin(&host[0])
	defer pin.Unpin()
	e.do("cuMemcpyDtoH_v2", cu.memcpyDtoH(unsafe.Pointer(&host[0]), src, uintptr(4*n)))
	return host, e.err
}

// done is the watchdog's view of the streams: all idle, or an error.
func (cu *ncclTestCUDA) done(gpus []*ncclTestGPU) func() (bool, error) {
	return func() (bool, error) {
		for _, g := range gpus {
			switch r := cu.streamQuery(g.stream); r {
			case 0:
			case 600: // CUDA_ERROR_NOT_READY
				return false, nil
			default:
				return false, fmt.Errorf("cuStreamQuery(GPU %d): CUresult %d", g.dev, r)
			}
		}
		return true, nil
	}
}

// check compares rank g's allreduce and allgather results with the exact
// answers.
func (cu *ncclTestCUDA) check(g *ncclTestGPU, withGather bool) error {
	got, err := cu.read(g, g.recv, g.count)
	if err != nil {
		return err
	}
	sum := float32(g.ranks * (g.ranks + 1) / 2)
	for i, v := range got {
		if want := sum * float32(i%13+1); v != want {
			return fmt.Errorf("rank %d allreduce[%d] = %v, want %v", g.rankOfMe, i, v, want)
		}
	}
	if !withGather {
		return nil
	}
	if got, err = cu.read(g, g.gathered, g.count*g.ranks); err != nil {
		return err
	}
	for i, v := range got {
		if want := ncclTestValue(i/g.count, i%g.count); v != want {
			return fmt.Errorf("rank %d allgather[%d] = %v, want %v", g.rankOfMe, i, v, want)
		}
	}
	return nil
}

// TestNCCLSanity makes one rank per GPU in this process (ncclCommInitAll)
// and runs an f32 allreduce and an allgather through Launch and Watch.
func TestNCCLSanity(t *testing.T) {
	cu, n := ncclTestNeed(t, 1)
	n = min(n, 8)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const count = 1000
	devices := make([]int, n)
	gpus := make([]*ncclTestGPU, n)
	var err error
	for r := range n {
		devices[r] = r
		if gpus[r], err = cu.setup(t, r, r, n, count); err != nil {
			t.Fatalf("GPU %d: %v", r, err)
		}
	}
	comm, err := cuda.NCCLInitAll(devices)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := comm.Destroy(); err != nil {
			t.Error(err)
		}
	}()
	v, _ := cuda.NCCLVersion()
	t.Logf("NCCL %d, %d ranks", v, comm.Ranks())

	var calls []cuda.NCCLCall
	for r, g := range gpus {
		calls = append(calls, cuda.NCCLCall{Op: hw.NativeAllReduce, Rank: r, Send: uintptr(g.send), Recv: uintptr(g.recv),
			Count: count, DType: hw.F32, Reduce: hw.Sum, Stream: g.stream})
	}
	for r, g := range gpus {
		calls = append(calls, cuda.NCCLCall{Op: hw.NativeAllGather, Rank: r, Send: uintptr(g.send), Recv: uintptr(g.gathered),
			Count: count, DType: hw.F32, Stream: g.stream})
	}
	if err := comm.Launch(calls); err != nil {
		t.Fatal(err)
	}
	if err := comm.Watch(context.Background(), time.Minute, cu.done(gpus)); err != nil {
		t.Fatal(err)
	}
	for _, g := range gpus {
		if err := cu.check(g, true); err != nil {
			t.Error(err)
		}
	}
}

// TestNCCLInitRankRendezvous runs the multi-process path inside one
// process: one goroutine per GPU plays a process, meets the others over a
// loopback rendezvous (none for one GPU), joins with ncclCommInitRank (the
// 128-byte id passed by value) and runs an allreduce on its own thread.
func TestNCCLInitRankRendezvous(t *testing.T) {
	cu, n := ncclTestNeed(t, 1)
	n = min(n, 4)
	addr := "127.0.0.1:0"
	if n > 1 {
		addr = rdvFreeAddr(t)
	}
	const count = 4096
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if err := ncclTestOneRank(t, cu, addr, r, n, count); err != nil {
				t.Errorf("rank %d: %v", r, err)
			}
		})
	}
	wg.Wait()
}

func ncclTestOneRank(t *testing.T, cu *ncclTestCUDA, addr string, rank, n, count int) error {
	g, err := cu.setup(t, rank, rank, n, count)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := cuda.NCCLRendezvous(ctx, cuda.Rendezvous{Addr: addr, Rank: rank, Size: n, Timeout: time.Minute})
	if err != nil {
		return err
	}
	if r := cu.ctxSetCurrent(g.ctx); r != 0 {
		return fmt.Errorf("cuCtxSetCurrent: CUresult %d", r)
	}
	comm, err := cuda.NCCLInitRank(id, n, rank)
	if err != nil {
		return err
	}
	defer comm.Destroy()
	if err := comm.AllReduce(rank, uintptr(g.send), uintptr(g.recv), count, hw.F32, hw.Sum, g.stream); err != nil {
		return err
	}
	if err := comm.Watch(ctx, time.Minute, cu.done([]*ncclTestGPU{g})); err != nil {
		return err
	}
	return cu.check(g, false)
}

func TestNCCLUniqueID(t *testing.T) {
	if err := cuda.NCCLAvailable(); err != nil {
		t.Skipf("libnccl.so.2 not found: %v", err)
	}
	a, err := cuda.NCCLGetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	b, err := cuda.NCCLGetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a == (cuda.NCCLUniqueID{}) {
		t.Fatalf("two ids are equal or zero: % x", a[:16])
	}
}
