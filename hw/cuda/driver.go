//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// LibCUDA is the driver library's name.
const LibCUDA = "libcuda.so.1"

// ErrNoDriver is wrapped by every error that comes from the driver library
// being absent or unusable.
var ErrNoDriver = errors.New("cuda backend: no usable NVIDIA driver")

// cuResult is CUDA's CUresult; 0 is CUDA_SUCCESS.
type cuResult int32

// driver holds the resolved driver entry points. Each is bound once, after
// Dlsym found it, so a missing symbol is an error rather than a panic.
type driver struct {
	cuInit              func(flags uint32) cuResult
	cuDriverGetVersion  func(version *int32) cuResult
	cuDeviceGetCount    func(count *int32) cuResult
	cuDeviceGet         func(dev *int32, ordinal int32) cuResult
	cuDeviceGetName     func(name *byte, length int32, dev int32) cuResult
	cuDeviceTotalMem    func(bytes *uint64, dev int32) cuResult
	cuGetErrorString    func(result cuResult, str **byte) cuResult
	cuDeviceComputeCapa func(major, minor *int32, dev int32) cuResult

	// Contexts, streams, events, memory and modules: the backend proper.
	// Handles (CUcontext, CUstream, CUevent, CUmodule, CUfunction) are
	// uintptr: they point to driver memory Go never touches. CUdeviceptr
	// is uint64.
	cuDeviceGetAttribute      func(v *int32, attr int32, dev int32) cuResult
	cuDeviceCanAccessPeer     func(can *int32, dev, peer int32) cuResult
	cuDevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) cuResult
	cuDevicePrimaryCtxRelease func(dev int32) cuResult
	cuCtxSetCurrent           func(ctx uintptr) cuResult
	cuCtxEnablePeerAccess     func(peer uintptr, flags uint32) cuResult
	cuMemAlloc                func(ptr *uint64, size uintptr) cuResult
	cuMemFree                 func(ptr uint64) cuResult
	cuMemsetD8Async           func(dst uint64, v uint8, n uintptr, stream uintptr) cuResult
	cuMemcpyHtoDAsync         func(dst uint64, src unsafe.Pointer, size uintptr, stream uintptr) cuResult
	cuMemcpyDtoHAsync         func(dst unsafe.Pointer, src uint64, size uintptr, stream uintptr) cuResult
	cuMemcpyDtoDAsync         func(dst, src uint64, size uintptr, stream uintptr) cuResult
	cuMemcpyPeerAsync         func(dst uint64, dstCtx uintptr, src uint64, srcCtx uintptr, size uintptr, stream uintptr) cuResult
	cuStreamCreate            func(s *uintptr, flags uint32) cuResult
	cuStreamDestroy           func(s uintptr) cuResult
	cuStreamSynchronize       func(s uintptr) cuResult
	cuStreamWaitEvent         func(s, ev uintptr, flags uint32) cuResult
	cuEventCreate             func(ev *uintptr, flags uint32) cuResult
	cuEventDestroy            func(ev uintptr) cuResult
	cuEventRecord             func(ev, s uintptr) cuResult
	cuEventQuery              func(ev uintptr) cuResult
	cuEventElapsedTime        func(ms *float32, start, end uintptr) cuResult
	cuModuleLoadDataEx        func(mod *uintptr, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) cuResult
	cuModuleGetFunction       func(fn *uintptr, mod uintptr, name *byte) cuResult
	cuLaunchKernel            func(f uintptr, gx, gy, gz, bx, by, bz, shmem uint32, stream uintptr, params *unsafe.Pointer, extra *unsafe.Pointer) cuResult
}

// CUresult values the backend tells apart.
const (
	cudaErrorNotReady                 cuResult = 600 // CUDA_ERROR_NOT_READY: an event or stream has not finished
	cudaErrorPeerAccessAlreadyEnabled cuResult = 704
)

var (
	loadOnce sync.Once
	loaded   *driver
	loadErr  error
)

// load opens the driver library and resolves its symbols, once.
func load() (*driver, error) {
	loadOnce.Do(func() {
		h, err := purego.Dlopen(LibCUDA, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			loadErr = fmt.Errorf("%w: %s not found (needs an NVIDIA driver): %v", ErrNoDriver, LibCUDA, err)
			return
		}
		d := &driver{}
		for _, sym := range []struct {
			name string
			fn   any
		}{
			{"cuInit", &d.cuInit},
			{"cuDriverGetVersion", &d.cuDriverGetVersion},
			{"cuDeviceGetCount", &d.cuDeviceGetCount},
			{"cuDeviceGet", &d.cuDeviceGet},
			{"cuDeviceGetName", &d.cuDeviceGetName},
			{"cuDeviceTotalMem_v2", &d.cuDeviceTotalMem},
			{"cuGetErrorString", &d.cuGetErrorString},
			{"cuDeviceComputeCapability", &d.cuDeviceComputeCapa},
			{"cuDeviceGetAttribute", &d.cuDeviceGetAttribute},
			{"cuDeviceCanAccessPeer", &d.cuDeviceCanAccessPeer},
			{"cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain},
			{"cuDevicePrimaryCtxRelease_v2", &d.cuDevicePrimaryCtxRelease},
			{"cuCtxSetCurrent", &d.cuCtxSetCurrent},
			{"cuCtxEnablePeerAccess", &d.cuCtxEnablePeerAccess},
			{"cuMemAlloc_v2", &d.cuMemAlloc},
			{"cuMemFree_v2", &d.cuMemFree},
			{"cuMemsetD8Async", &d.cuMemsetD8Async},
			{"cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync},
			{"cuMemcpyDtoHAsync_v2", &d.cuMemcpyDtoHAsync},
			{"cuMemcpyDtoDAsync_v2", &d.cuMemcpyDtoDAsync},
			{"cuMemcpyPeerAsync", &d.cuMemcpyPeerAsync},
			{"cuStreamCreate", &d.cuStreamCreate},
			{"cuStreamDestroy_v2", &d.cuStreamDestroy},
			{"cuStreamSynchronize", &d.cuStreamSynchronize},
			{"cuStreamWaitEvent", &d.cuStreamWaitEvent},
			{"cuEventCreate", &d.cuEventCreate},
			{"cuEventDestroy_v2", &d.cuEventDestroy},
			{"cuEventRecord", &d.cuEventRecord},
			{"cuEventQuery", &d.cuEventQuery},
			{"cuEventElapsedTime", &d.cuEventElapsedTime},
			{"cuModuleLoadDataEx", &d.cuModuleLoadDataEx},
			{"cuModuleGetFunction", &d.cuModuleGetFunction},
			{"cuLaunchKernel", &d.cuLaunchKernel},
		} {
			addr, err := purego.Dlsym(h, sym.name)
			if err != nil {
				loadErr = fmt.Errorf("%w: %s has no symbol %s: %v", ErrNoDriver, LibCUDA, sym.name, err)
				return
			}
			purego.RegisterFunc(sym.fn, addr)
		}
		if err := d.check("cuInit", d.cuInit(0)); err != nil {
			loadErr = fmt.Errorf("%w: %v", ErrNoDriver, err)
			return
		}
		loaded = d
	})
	return loaded, loadErr
}

// check turns a CUresult into an error naming the call and the driver's
// own message.
func (d *driver) check(call string, r cuResult) error {
	if r == 0 {
		return nil
	}
	msg := "unknown error"
	var s *byte
	if d.cuGetErrorString != nil && d.cuGetErrorString(r, &s) == 0 && s != nil {
		msg = goString(s)
	}
	return fmt.Errorf("cuda: %s: CUresult %d: %s", call, r, msg)
}

// goString copies a NUL-terminated C string owned by the driver.
func goString(p *byte) string {
	var b []byte
	for ptr := unsafe.Pointer(p); *(*byte)(ptr) != 0; ptr = unsafe.Add(ptr, 1) {
		b = append(b, *(*byte)(ptr))
		if len(b) > 4096 {
			break
		}
	}
	return string(b)
}

// DeviceInfo describes one GPU the driver reports.
type DeviceInfo struct {
	Index        int
	Name         string
	MemoryBytes  uint64
	Major, Minor int // compute capability
}

// Available reports whether the driver loads and initialises, or why not.
func Available() error {
	_, err := load()
	return err
}

// DriverVersion is the CUDA version the driver supports, e.g. 12040 for 12.4.
func DriverVersion() (int, error) {
	d, err := load()
	if err != nil {
		return 0, err
	}
	var v int32
	var pin runtime.Pinner
	pin.Pin(&v)
	defer pin.Unpin()
	if err := d.check("cuDriverGetVersion", d.cuDriverGetVersion(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Devices lists the GPUs the driver sees.
func Devices() ([]DeviceInfo, error) {
	d, err := load()
	if err != nil {
		return nil, err
	}
	var count int32
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&count)
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&count)); err != nil {
		return nil, err
	}
	out := make([]DeviceInfo, 0, count)
	for i := range count {
		var dev int32
		pin.Pin(&dev)
		if err := d.check(fmt.Sprintf("cuDeviceGet(%d)", i), d.cuDeviceGet(&dev, i)); err != nil {
			return nil, err
		}
		name := make([]byte, 256)
		pin.Pin(&name[0])
		if err := d.check("cuDeviceGetName", d.cuDeviceGetName(&name[0], int32(len(name)), dev)); err != nil {
			return nil, err
		}
		var mem uint64
		pin.Pin(&mem)
		if err := d.check("cuDeviceTotalMem_v2", d.cuDeviceTotalMem(&mem, dev)); err != nil {
			return nil, err
		}
		var major, minor int32
		pin.Pin(&major)
		pin.Pin(&minor)
		if err := d.check("cuDeviceComputeCapability", d.cuDeviceComputeCapa(&major, &minor, dev)); err != nil {
			return nil, err
		}
		out = append(out, DeviceInfo{Index: int(i), Name: cString(name), MemoryBytes: mem, Major: int(major), Minor: int(minor)})
	}
	return out, nil
}

// cString trims a NUL-terminated byte buffer.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
