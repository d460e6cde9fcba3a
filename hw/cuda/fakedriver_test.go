//go:build linux || darwin

package cuda

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda/internal/ptxgen"
)

// fakeCUDA is a CPU stand-in for the driver API, for tests on machines
// without a GPU. It runs every asynchronous call to completion when it is
// issued: since the backend only ever makes a stream wait for work that was
// issued before the wait, executing in issue order is one of the orders a
// GPU could take, so the host side (workers, mailboxes, event generations,
// staging pools, deadlocks, aborts) is exercised for real. Kernels run as
// the kernel runner says: hw.ReduceBytes by default, or the PTX itself
// through ptxgen's interpreter.
type fakeCUDA struct {
	gpus int
	mu   sync.Mutex
	mem  map[uint64][]byte // by allocation id (address >> fakeShift)
	next uint64            // last allocation id
	hnd  uintptr           // last handle
	evs  map[uintptr]*fakeEvent
	fns  map[uintptr]string

	launches atomic.Int64
	// failKernel, when set, makes launches of that kernel fail.
	failKernel string
	run        func(name string, args [ptxgen.Params]uint64, mem func(addr uint64, n int) []byte) error
}

type fakeEvent struct {
	recorded bool
	at       time.Time
}

// Allocations sit 2^36 bytes apart, so an address names its allocation.
const fakeShift = 36

func newFakeCUDA(gpus int) *fakeCUDA {
	return &fakeCUDA{gpus: gpus, mem: map[uint64][]byte{}, evs: map[uintptr]*fakeEvent{}, fns: map[uintptr]string{}, run: runKernelGo}
}

const (
	fakeInvalidValue  cuResult = 1
	fakeInvalidHandle cuResult = 400
	fakeLaunchFailed  cuResult = 719
)

// bytes returns the n bytes at addr, or nil outside every allocation.
func (f *fakeCUDA) bytes(addr uint64, n int) []byte {
	f.mu.Lock()
	m := f.mem[addr>>fakeShift]
	f.mu.Unlock()
	off := addr & (1<<fakeShift - 1)
	if m == nil || off+uint64(n) > uint64(len(m)) {
		return nil
	}
	return m[off : off+uint64(n)]
}

func (f *fakeCUDA) handle() uintptr {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hnd++
	return f.hnd
}

func (f *fakeCUDA) copyMem(dst, src uint64, n uintptr) cuResult {
	d, s := f.bytes(dst, int(n)), f.bytes(src, int(n))
	if d == nil || s == nil {
		return fakeInvalidValue
	}
	copy(d, s)
	return 0
}

// driver returns the fake as a *driver.
func (f *fakeCUDA) driver() *driver {
	return &driver{
		cuInit:             func(uint32) cuResult { return 0 },
		cuDriverGetVersion: func(v *int32) cuResult { *v = 12040; return 0 },
		cuDeviceGetCount:   func(c *int32) cuResult { *c = int32(f.gpus); return 0 },
		cuDeviceGet: func(dev *int32, ord int32) cuResult {
			if int(ord) >= f.gpus {
				return fakeInvalidValue
			}
			*dev = ord
			return 0
		},
		cuDeviceGetName: func(name *byte, n int32, dev int32) cuResult {
			copy(unsafe.Slice(name, n), fmt.Sprintf("Fake GPU %d\x00", dev))
			return 0
		},
		cuDeviceTotalMem: func(b *uint64, dev int32) cuResult { *b = 1 << 30; return 0 },
		cuGetErrorString: func(cuResult, **byte) cuResult { return fakeInvalidValue },
		cuDeviceGetAttribute: func(v *int32, attr int32, dev int32) cuResult {
			switch attr {
			case attrMultiprocessorCount:
				*v = 4
			case attrComputeCapMajor:
				*v = 9
			case attrComputeCapMinor:
				*v = 0
			default:
				return fakeInvalidValue
			}
			return 0
		},
		cuDeviceCanAccessPeer:     func(can *int32, a, b int32) cuResult { *can = 1; return 0 },
		cuDevicePrimaryCtxRetain:  func(ctx *uintptr, dev int32) cuResult { *ctx = uintptr(1000 + dev); return 0 },
		cuDevicePrimaryCtxRelease: func(int32) cuResult { return 0 },
		cuCtxSetCurrent:           func(uintptr) cuResult { return 0 },
		cuCtxEnablePeerAccess:     func(uintptr, uint32) cuResult { return 0 },
		cuMemAlloc: func(p *uint64, size uintptr) cuResult {
			if size == 0 {
				return fakeInvalidValue
			}
			f.mu.Lock()
			f.next++
			f.mem[f.next] = make([]byte, size)
			*p = f.next << fakeShift
			f.mu.Unlock()
			return 0
		},
		cuMemFree: func(p uint64) cuResult {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.mem[p>>fakeShift] == nil || p&(1<<fakeShift-1) != 0 {
				return fakeInvalidValue
			}
			delete(f.mem, p>>fakeShift)
			return 0
		},
		cuMemsetD8Async: func(dst uint64, v uint8, n uintptr, _ uintptr) cuResult {
			b := f.bytes(dst, int(n))
			if b == nil {
				return fakeInvalidValue
			}
			for i := range b {
				b[i] = v
			}
			return 0
		},
		cuMemcpyHtoDAsync: func(dst uint64, src unsafe.Pointer, n uintptr, _ uintptr) cuResult {
			d := f.bytes(dst, int(n))
			if d == nil {
				return fakeInvalidValue
			}
			copy(d, unsafe.Slice((*byte)(src), n))
			return 0
		},
		cuMemcpyDtoHAsync: func(dst unsafe.Pointer, src uint64, n uintptr, _ uintptr) cuResult {
			s := f.bytes(src, int(n))
			if s == nil {
				return fakeInvalidValue
			}
			copy(unsafe.Slice((*byte)(dst), n), s)
			return 0
		},
		cuMemcpyDtoDAsync: func(dst, src uint64, n uintptr, _ uintptr) cuResult { return f.copyMem(dst, src, n) },
		cuMemcpyPeerAsync: func(dst uint64, _ uintptr, src uint64, _ uintptr, n uintptr, _ uintptr) cuResult {
			return f.copyMem(dst, src, n)
		},
		cuStreamCreate:      func(s *uintptr, flags uint32) cuResult { *s = f.handle(); return 0 },
		cuStreamDestroy:     func(uintptr) cuResult { return 0 },
		cuStreamSynchronize: func(uintptr) cuResult { return 0 },
		cuStreamWaitEvent: func(s, ev uintptr, flags uint32) cuResult {
			f.mu.Lock()
			defer f.mu.Unlock()
			if e := f.evs[ev]; e == nil || !e.recorded {
				// The backend waits only on recorded events.
				return fakeInvalidHandle
			}
			return 0
		},
		cuEventCreate: func(ev *uintptr, flags uint32) cuResult {
			h := f.handle()
			f.mu.Lock()
			f.evs[h] = &fakeEvent{}
			f.mu.Unlock()
			*ev = h
			return 0
		},
		cuEventDestroy: func(ev uintptr) cuResult {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.evs[ev] == nil {
				return fakeInvalidHandle
			}
			delete(f.evs, ev)
			return 0
		},
		cuEventRecord: func(ev, s uintptr) cuResult {
			f.mu.Lock()
			defer f.mu.Unlock()
			e := f.evs[ev]
			if e == nil {
				return fakeInvalidHandle
			}
			e.recorded, e.at = true, time.Now()
			return 0
		},
		cuEventQuery: func(ev uintptr) cuResult { return 0 },
		cuEventElapsedTime: func(ms *float32, a, b uintptr) cuResult {
			f.mu.Lock()
			defer f.mu.Unlock()
			s, e := f.evs[a], f.evs[b]
			if s == nil || e == nil || !s.recorded || !e.recorded {
				return fakeInvalidHandle
			}
			*ms = float32(e.at.Sub(s.at).Seconds() * 1e3)
			return 0
		},
		cuModuleLoadDataEx: func(mod *uintptr, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) cuResult {
			if !strings.HasPrefix(goString((*byte)(image)), "//\n// Code generated") {
				return fakeInvalidValue
			}
			*mod = f.handle()
			return 0
		},
		cuModuleGetFunction: func(fn *uintptr, mod uintptr, name *byte) cuResult {
			h := f.handle()
			f.mu.Lock()
			f.fns[h] = goString(name)
			f.mu.Unlock()
			*fn = h
			return 0
		},
		cuLaunchKernel: func(fn uintptr, gx, gy, gz, bx, by, bz, shmem uint32, s uintptr, params *unsafe.Pointer, extra *unsafe.Pointer) cuResult {
			f.launches.Add(1)
			f.mu.Lock()
			name := f.fns[fn]
			fail := name == f.failKernel
			f.mu.Unlock()
			if name == "" || fail || gx == 0 || bx != threadsPerBlock {
				return fakeLaunchFailed
			}
			var args [ptxgen.Params]uint64
			for i, p := range unsafe.Slice(params, ptxgen.Params) {
				args[i] = *(*uint64)(p)
			}
			if err := f.run(name, args, f.bytes); err != nil {
				panic(fmt.Sprintf("fake launch %s %v: %v", name, args, err))
			}
			return 0
		},
	}
}

// runKernelGo runs a kernel with the simulator's arithmetic, after
// checking the launch geometry the kernel relies on.
func runKernelGo(name string, a [ptxgen.Params]uint64, mem func(uint64, int) []byte) error {
	var k ptxgen.Kernel
	for _, kk := range ptxgen.Kernels() {
		if kk.Name == name {
			k = kk
		}
	}
	size := k.DType.Size()
	dst, src, q, head, nvec, n := a[0], a[1], a[2], int(a[3]), int(a[4]), int(a[5])
	if nvec > 0 && ((dst+uint64(head*size))%16 != 0 || k.Kind != ptxgen.Divide && (src+uint64(head*size))%16 != 0) {
		return fmt.Errorf("vectors misaligned")
	}
	if head+nvec*16/size > n {
		return fmt.Errorf("vectors past the end")
	}
	d := mem(dst, n*size)
	if d == nil {
		return fmt.Errorf("dst outside memory")
	}
	switch k.Kind {
	case ptxgen.Reduce:
		s := mem(src, n*size)
		if s == nil {
			return fmt.Errorf("src outside memory")
		}
		return hw.ReduceBytes(k.Op, k.DType, d, s)
	case ptxgen.Copy:
		s := mem(src, n*size)
		if s == nil {
			return fmt.Errorf("src outside memory")
		}
		copy(d, s)
		return nil
	}
	// The divisor back from its encoding (ptxgen.Divisor): any n' with
	// the same encoding divides alike.
	var div int
	switch k.DType {
	case hw.F32, hw.F16, hw.BF16:
		div = floatToInt(float64(math.Float32frombits(uint32(q))))
	case hw.F64:
		div = floatToInt(math.Float64frombits(q))
	default:
		div = int(int64(q))
	}
	return hw.DivideBytes(k.DType, d, div)
}

func floatToInt(f float64) int {
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int(f)
}

var (
	fakeOnce sync.Once
	fakeDrv  *driver
	fakeImpl *fakeCUDA
)

// fake returns the process's fake driver: two GPUs, so placements that
// spread ranks have peers.
func fake() (*fakeCUDA, *driver) {
	fakeOnce.Do(func() {
		fakeImpl = newFakeCUDA(2)
		fakeDrv = fakeImpl.driver()
	})
	return fakeImpl, fakeDrv
}

// openFakeWorld is openWorld on the fake driver.
func openFakeWorld(t testing.TB, p int, pl Placement) (*hw.World, []*Device) {
	t.Helper()
	f, d := fake()
	gpus, err := Layout(p, pl, f.gpus)
	if err != nil {
		t.Fatal(err)
	}
	w, closeWorld, err := newWorld(d, gpus)
	return w, keepWorld(t, w, closeWorld, err)
}

// env is where a backend test runs: a real GPU or the fake driver.
type env struct {
	open func(t testing.TB, p int, pl Placement) (*hw.World, []*Device)
	gpus int
	real bool
}

// onDrivers runs body on the GPU (skipped, with the reason, when there is
// none) and on the fake driver.
func onDrivers(t *testing.T, body func(t *testing.T, e env)) {
	t.Run("gpu", func(t *testing.T) {
		n := needGPU(t)
		body(t, env{open: openWorld, gpus: n, real: true})
	})
	t.Run("emulated", func(t *testing.T) {
		f, _ := fake()
		body(t, env{open: openFakeWorld, gpus: f.gpus})
	})
}

// A GPU whose set-up fails after its host stream is made (here, loading
// the kernels) leaves the driver as it found it: the stream destroyed and
// the primary context released, so that a retry starts clean.
func TestGPUSetUpThatFailsLetsGoOfWhatItMade(t *testing.T) {
	f := newFakeCUDA(1)
	d := f.driver()
	var made, destroyed uintptr
	released := 0
	create := d.cuStreamCreate
	d.cuStreamCreate = func(s *uintptr, flags uint32) cuResult { r := create(s, flags); made = *s; return r }
	d.cuStreamDestroy = func(s uintptr) cuResult { destroyed = s; return 0 }
	d.cuDevicePrimaryCtxRelease = func(int32) cuResult { released++; return 0 }
	d.cuModuleLoadDataEx = func(*uintptr, unsafe.Pointer, uint32, *int32, *uintptr) cuResult { return fakeInvalidValue }
	if _, err := openGPU(d, 0); err == nil {
		t.Fatal("set-up with kernels that do not load succeeded")
	}
	if made == 0 || destroyed != made || released != 1 {
		t.Errorf("stream %d made, %d destroyed; context released %d times; want the stream destroyed and the context released once", made, destroyed, released)
	}
}

// A driver that reports a device count no driver gives (below 0, or
// billions, which sized a list until memory ran out) or a negative
// compute capability is an error naming the call, not a crash.
func TestDevicesRefusesABrokenDriversCounts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		count int32
		major int32
		want  string
	}{
		{"negative count", -1, 9, "cuDeviceGetCount: -1 devices"},
		{"huge count", 1<<31 - 1, 9, "cuDeviceGetCount: 2147483647 devices"},
		{"negative capability", 1, -1, "cuDeviceGetAttribute: GPU 0's compute capability -1.0"},
	} {
		d := newFakeCUDA(1).driver()
		d.cuDeviceGetCount = func(c *int32) cuResult { *c = tc.count; return 0 }
		attr := d.cuDeviceGetAttribute
		d.cuDeviceGetAttribute = func(v *int32, a int32, dev int32) cuResult {
			if a == attrComputeCapMajor {
				*v = tc.major
				return 0
			}
			return attr(v, a, dev)
		}
		if devs, err := d.devices(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, %v; want an error saying %q", tc.name, devs, err, tc.want)
		}
	}
}
