//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/commsim/commsim/internal/dlfcn"
)

// ErrNoDriver is wrapped by every error that comes from the driver library
// being absent or unusable.
var ErrNoDriver = errors.New("cuda backend: no usable NVIDIA driver")

// cuResult is CUDA's CUresult; 0 is CUDA_SUCCESS.
type cuResult int32

// driver holds the resolved driver entry points. Each is bound once, after
// Dlsym found it, so a missing symbol is an error rather than a panic.
type driver struct {
	cuInit             func(flags uint32) cuResult
	cuDriverGetVersion func(version *int32) cuResult
	cuDeviceGetCount   func(count *int32) cuResult
	cuDeviceGet        func(dev *int32, ordinal int32) cuResult
	cuDeviceGetName    func(name *byte, length int32, dev int32) cuResult
	cuDeviceTotalMem   func(bytes *uint64, dev int32) cuResult
	cuGetErrorString   func(result cuResult, str **byte) cuResult

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

// CUdevice_attribute values (cuda.h).
const (
	attrMultiprocessorCount = 16
	attrComputeCapMajor     = 75
	attrComputeCapMinor     = 76
)

var (
	loadOnce  sync.Once
	loaded    *driver
	loadedLib Library
	loadErr   error
)

// driverSymbol is one entry point and the names it may have, newest first.
// A later name is listed only where its C signature is the same: the _v2
// of cuMemAlloc, cuMemFree, the async copies and cuDeviceTotalMem take
// 64-bit sizes and pointers where the old names took 32-bit ones, so those
// have no fallback. cuEventElapsedTime_v2 (CUDA 12.8) has the old one's
// signature, and newer drivers may keep only the _v2.
type driverSymbol struct {
	names []string
	fn    any
}

func (d *driver) symbols() []driverSymbol {
	one := func(name string, fn any) driverSymbol { return driverSymbol{[]string{name}, fn} }
	v2 := func(name string, fn any) driverSymbol { return driverSymbol{[]string{name + "_v2", name}, fn} }
	return []driverSymbol{
		one("cuInit", &d.cuInit),
		one("cuDriverGetVersion", &d.cuDriverGetVersion),
		one("cuDeviceGetCount", &d.cuDeviceGetCount),
		one("cuDeviceGet", &d.cuDeviceGet),
		one("cuDeviceGetName", &d.cuDeviceGetName),
		one("cuDeviceTotalMem_v2", &d.cuDeviceTotalMem),
		one("cuGetErrorString", &d.cuGetErrorString),
		one("cuDeviceGetAttribute", &d.cuDeviceGetAttribute),
		one("cuDeviceCanAccessPeer", &d.cuDeviceCanAccessPeer),
		one("cuDevicePrimaryCtxRetain", &d.cuDevicePrimaryCtxRetain),
		v2("cuDevicePrimaryCtxRelease", &d.cuDevicePrimaryCtxRelease),
		one("cuCtxSetCurrent", &d.cuCtxSetCurrent),
		one("cuCtxEnablePeerAccess", &d.cuCtxEnablePeerAccess),
		one("cuMemAlloc_v2", &d.cuMemAlloc),
		one("cuMemFree_v2", &d.cuMemFree),
		one("cuMemsetD8Async", &d.cuMemsetD8Async),
		one("cuMemcpyHtoDAsync_v2", &d.cuMemcpyHtoDAsync),
		one("cuMemcpyDtoHAsync_v2", &d.cuMemcpyDtoHAsync),
		one("cuMemcpyDtoDAsync_v2", &d.cuMemcpyDtoDAsync),
		one("cuMemcpyPeerAsync", &d.cuMemcpyPeerAsync),
		one("cuStreamCreate", &d.cuStreamCreate),
		v2("cuStreamDestroy", &d.cuStreamDestroy),
		one("cuStreamSynchronize", &d.cuStreamSynchronize),
		one("cuStreamWaitEvent", &d.cuStreamWaitEvent),
		one("cuEventCreate", &d.cuEventCreate),
		v2("cuEventDestroy", &d.cuEventDestroy),
		one("cuEventRecord", &d.cuEventRecord),
		one("cuEventQuery", &d.cuEventQuery),
		v2("cuEventElapsedTime", &d.cuEventElapsedTime),
		one("cuModuleLoadDataEx", &d.cuModuleLoadDataEx),
		one("cuModuleGetFunction", &d.cuModuleGetFunction),
		one("cuLaunchKernel", &d.cuLaunchKernel),
	}
}

// bindDriver resolves every entry point through lookup (Dlsym on the
// library) and binds it with register (purego.RegisterFunc), trying each
// symbol's names in order. It returns the names bound, by the first name
// of their symbol, or an error naming the symbol that has none.
func bindDriver(lookup func(name string) (uintptr, error), register func(fn any, addr uintptr)) (*driver, map[string]string, error) {
	d := &driver{}
	bound := map[string]string{}
	for _, sym := range d.symbols() {
		var addr uintptr
		var err error
		for _, name := range sym.names {
			if addr, err = lookup(name); err == nil {
				bound[sym.names[0]] = name
				break
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("no symbol %s: %v", strings.Join(sym.names, " or "), err)
		}
		register(sym.fn, addr)
	}
	return d, bound, nil
}

// openDriver opens one candidate library file and initialises the driver.
// A driver that loads but fails cuInit (no GPU, a driver/kernel mismatch)
// stops the search: another copy of libcuda would not do better.
func openDriver(file string) (*driver, error) {
	h, err := dlfcn.Open(file)
	if err != nil {
		return nil, err
	}
	d, _, err := bindDriver(func(name string) (uintptr, error) { return dlfcn.Sym(h, name) }, purego.RegisterFunc)
	if err != nil {
		purego.Dlclose(h)
		return nil, err
	}
	if err := d.check("cuInit", d.cuInit(0)); err != nil {
		return nil, stopSearch{err}
	}
	return d, nil
}

// load finds the driver library, resolves its symbols and initialises it,
// once (see driverPlaces for where it looks).
func load() (*driver, error) {
	loadOnce.Do(func() {
		var d *driver
		lib, err := findLibrary(osLibEnv.driverPlaces(), func(file string) error {
			var err error
			d, err = openDriver(file)
			return err
		})
		if err != nil {
			var se *searchError
			if errors.As(err, &se) && se.cause != nil {
				loadErr = fmt.Errorf("%w: %s loads but does not work: %v", ErrNoDriver, LibCUDA, err)
			} else {
				loadErr = fmt.Errorf("%w: %s not found (it comes with the NVIDIA driver; %s names the file): %v", ErrNoDriver, LibCUDA, EnvCUDALibrary, err)
			}
			return
		}
		loaded, loadedLib = d, lib
	})
	return loaded, loadErr
}

// DriverLibrary says which driver library was loaded and from where, or
// why none could be.
func DriverLibrary() (Library, error) {
	_, err := load()
	return loadedLib, err
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

// maxDevices bounds the GPUs a driver may report: a count past it (or
// below 0) is a broken library's, which would size a list of billions.
const maxDevices = 1 << 16

// Devices lists the GPUs the driver sees.
func Devices() ([]DeviceInfo, error) {
	d, err := load()
	if err != nil {
		return nil, err
	}
	return d.devices()
}

func (d *driver) devices() ([]DeviceInfo, error) {
	var count int32
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&count)
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&count)); err != nil {
		return nil, err
	}
	if count < 0 || count > maxDevices {
		return nil, fmt.Errorf("cuda: cuDeviceGetCount: %d devices, which no driver reports (want 0 to %d)", count, maxDevices)
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
		// The attributes, not the deprecated cuDeviceComputeCapability,
		// which newer drivers need not export.
		var major, minor int32
		pin.Pin(&major)
		pin.Pin(&minor)
		if err := d.check("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)", d.cuDeviceGetAttribute(&major, attrComputeCapMajor, dev)); err != nil {
			return nil, err
		}
		if err := d.check("cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)", d.cuDeviceGetAttribute(&minor, attrComputeCapMinor, dev)); err != nil {
			return nil, err
		}
		if major < 0 || minor < 0 {
			return nil, fmt.Errorf("cuda: cuDeviceGetAttribute: GPU %d's compute capability %d.%d, which no driver reports", i, major, minor)
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
