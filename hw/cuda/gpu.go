//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/commsim/commsim/hw/cuda/internal/ptxgen"
)

// gpu is one physical GPU as the process uses it: its primary context, the
// kernel module loaded into it, and a stream for host copies. It lives
// until the process exits: worlds come and go (the equivalence tests open
// one per case), and retaining a primary context and JIT-loading the module
// again for each would cost far more than the world's own work.
type gpu struct {
	ordinal int
	dev     int32   // CUdevice
	ctx     uintptr // primary context
	sms     int     // multiprocessors, for grid sizes
	name    string
	funcs   map[string]uintptr // kernel entry points by ptxgen name

	// hostStream carries Buffer.Read/Write and Alloc's zeroing. It is a
	// non-blocking stream synchronised after each use: synchronous copies
	// on the legacy null stream are not ordered against the non-blocking
	// streams that run the work, and a pageable host-to-device copy may
	// return before its DMA is done.
	hostStream uintptr
}

// gpuKey names a GPU of a driver: the real one, or a test's fake.
type gpuKey struct {
	d       *driver
	ordinal int
}

var (
	gpusMu sync.Mutex
	gpus   = map[gpuKey]*gpu{}
)

// openGPU returns the process's state for GPU ordinal, setting it up on
// first use.
func openGPU(d *driver, ordinal int) (*gpu, error) {
	gpusMu.Lock()
	defer gpusMu.Unlock()
	k := gpuKey{d, ordinal}
	if g := gpus[k]; g != nil {
		return g, nil
	}
	g := &gpu{ordinal: ordinal}
	if err := g.init(d); err != nil {
		return nil, fmt.Errorf("cuda: gpu %d: %w", ordinal, err)
	}
	gpus[k] = g
	return g, nil
}

func (g *gpu) init(d *driver) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	var count int32
	pin.Pin(&count)
	if err := d.check("cuDeviceGetCount", d.cuDeviceGetCount(&count)); err != nil {
		return err
	}
	if g.ordinal < 0 || g.ordinal >= int(count) {
		return fmt.Errorf("no such GPU: the driver sees %d", count)
	}
	pin.Pin(&g.dev)
	if err := d.check("cuDeviceGet", d.cuDeviceGet(&g.dev, int32(g.ordinal))); err != nil {
		return err
	}
	var sms int32
	pin.Pin(&sms)
	if err := d.check("cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)", d.cuDeviceGetAttribute(&sms, attrMultiprocessorCount, g.dev)); err != nil {
		return err
	}
	g.sms = max(int(sms), 1)
	name := make([]byte, 256)
	pin.Pin(&name[0])
	if err := d.check("cuDeviceGetName", d.cuDeviceGetName(&name[0], int32(len(name)), g.dev)); err != nil {
		return err
	}
	g.name = cString(name)
	pin.Pin(&g.ctx)
	if err := d.check("cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain(&g.ctx, g.dev)); err != nil {
		return err
	}
	err := withContext(d, g.ctx, func() error {
		pin.Pin(&g.hostStream)
		if err := d.check("cuStreamCreate(host copies)", d.cuStreamCreate(&g.hostStream, streamNonBlocking)); err != nil {
			return err
		}
		return g.loadModule(d)
	})
	if err != nil {
		// Leave the driver as we found it; the GPU may be retried later.
		if g.hostStream != 0 {
			err = errors.Join(err, withContext(d, g.ctx, func() error {
				return d.check("cuStreamDestroy(host copies)", d.cuStreamDestroy(g.hostStream))
			}))
			g.hostStream = 0
		}
		return errors.Join(err, d.check("cuDevicePrimaryCtxRelease", d.cuDevicePrimaryCtxRelease(g.dev)))
	}
	return nil
}

// CUDA flags used here.
const (
	streamNonBlocking = 1 // CU_STREAM_NON_BLOCKING
	eventDefault      = 0 // timing enabled, for ElapsedSince
	eventNoTiming     = 2 // CU_EVENT_DISABLE_TIMING
	threadsPerBlock   = 256
	blocksPerSM       = 8 // 2048 resident threads per SM at 256 per block
)

// JIT options of cuModuleLoadDataEx (CUjit_option).
const (
	jitInfoLogBuffer       = 3
	jitInfoLogBufferBytes  = 4
	jitErrorLogBuffer      = 5
	jitErrorLogBufferBytes = 6
)

// loadModule JIT-compiles kernelsPTX into the current context and resolves
// every kernel. A PTX error comes back with the JIT's own log, which names
// the line.
func (g *gpu) loadModule(d *driver) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	image := append([]byte(kernelsPTX), 0)
	pin.Pin(&image[0])
	errLog := make([]byte, 16<<10)
	infoLog := make([]byte, 4<<10)
	pin.Pin(&errLog[0])
	pin.Pin(&infoLog[0])
	opts := []int32{jitErrorLogBuffer, jitErrorLogBufferBytes, jitInfoLogBuffer, jitInfoLogBufferBytes}
	// The driver reads the sizes from, and writes the used sizes back into,
	// the value slots; the buffers are pinned above.
	vals := []uintptr{uintptr(unsafe.Pointer(&errLog[0])), uintptr(len(errLog)), uintptr(unsafe.Pointer(&infoLog[0])), uintptr(len(infoLog))}
	pin.Pin(&opts[0])
	pin.Pin(&vals[0])
	var mod uintptr
	pin.Pin(&mod)
	if err := d.check("cuModuleLoadDataEx(kernels.ptx)", d.cuModuleLoadDataEx(&mod, unsafe.Pointer(&image[0]), uint32(len(opts)), &opts[0], &vals[0])); err != nil {
		return fmt.Errorf("%w\nJIT log: %s", err, cString(errLog))
	}
	g.funcs = make(map[string]uintptr)
	for _, k := range ptxgen.Kernels() {
		cname := append([]byte(k.Name), 0)
		pin.Pin(&cname[0])
		var fn uintptr
		pin.Pin(&fn)
		if err := d.check("cuModuleGetFunction("+k.Name+")", d.cuModuleGetFunction(&fn, mod, &cname[0])); err != nil {
			return err
		}
		g.funcs[k.Name] = fn
	}
	return nil
}

// withContext runs fn on this goroutine's OS thread with ctx current.
// Driver calls made outside a stream's worker (allocation, host copies,
// event creation and queries) come here: setting the context is a
// thread-local store in the driver, far cheaper than handing the call to a
// per-GPU goroutine and back, and LockOSThread keeps the goroutine from
// moving to another thread between setting the context and using it.
func withContext(d *driver, ctx uintptr, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.check("cuCtxSetCurrent", d.cuCtxSetCurrent(ctx)); err != nil {
		return err
	}
	return fn()
}

// enablePeers lets each GPU of the set read and write the others' memory
// directly where the hardware allows, so cuMemcpyPeerAsync takes NVLink or
// PCIe peer-to-peer instead of staging through the host. Copies work
// either way.
func enablePeers(d *driver, gs []*gpu) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	for _, a := range gs {
		for _, b := range gs {
			if a == b {
				continue
			}
			var can int32
			pin.Pin(&can)
			if err := d.check("cuDeviceCanAccessPeer", d.cuDeviceCanAccessPeer(&can, a.dev, b.dev)); err != nil {
				return err
			}
			if can == 0 {
				continue
			}
			err := withContext(d, a.ctx, func() error {
				r := d.cuCtxEnablePeerAccess(b.ctx, 0)
				if r == cudaErrorPeerAccessAlreadyEnabled {
					return nil
				}
				return d.check(fmt.Sprintf("cuCtxEnablePeerAccess(gpu %d -> gpu %d)", a.ordinal, b.ordinal), r)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}
