//go:build darwin

package metal

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/metal/internal/mtl"
)

// The Metal implementation of the gpu seam. Every method runs its Objective-C
// calls inside mtl.WithPool: an autorelease pool on a locked OS thread, so
// that autoreleased temporaries (encoders before they are retained,
// NSErrors, NSStrings) are freed at the end of each call. Objects kept
// longer are owned or retained and released explicitly: there is no ARC.

// metalDevice is the process's Metal GPU with its compiled kernels. It is
// made once (compiling the MSL takes a noticeable fraction of a second) and
// shared by every world; worlds own only queues, events and buffers.
type metalDevice struct {
	dev   mtl.Device
	name  string // Metal's name for the GPU, e.g. "Apple M2"
	psos  []mtl.ComputePipelineState
	group []int // threads per threadgroup of each pipeline
}

var shared struct {
	once sync.Once
	dev  *metalDevice
	err  error
}

// openDevice returns the shared device, building it on first use.
func openDevice() (*metalDevice, error) {
	shared.once.Do(func() {
		mtl.WithPool(func() { shared.dev, shared.err = newMetalDevice() })
		if shared.err != nil {
			shared.err = fmt.Errorf("%w: %w", ErrUnavailable, shared.err)
		}
	})
	return shared.dev, shared.err
}

func newMetalDevice() (*metalDevice, error) {
	dev, err := mtl.CreateSystemDefaultDevice()
	if err != nil {
		return nil, err
	}
	d := &metalDevice{dev: dev, name: dev.Name()}
	opts, err := mtl.NewCompileOptions()
	if err != nil {
		dev.Release()
		return nil, err
	}
	defer opts.Release()
	// MSL 2.4 (macOS 12) is pinned rather than left to the SDK's default,
	// so the language cannot change under the kernels; it has everything
	// they use (64-bit integers, as_type, precise::divide) and runs on
	// every Apple-silicon Mac.
	opts.SetLanguageVersion(mtl.LanguageVersion2_4)
	// Fast math would allow reassociation, reciprocal division, flushed
	// subnormals and "no NaN" assumptions; the contract allows none.
	opts.SetFastMathEnabled(false)
	opts.SetMathMode(mtl.MathModeSafe) // macOS 15+: the successor setting
	lib, err := dev.NewLibraryWithSource(kernelSource, opts)
	if err != nil {
		dev.Release()
		return nil, fmt.Errorf("compiling the MSL kernels: %w", err)
	}
	defer lib.Release()
	for _, name := range kernelNames {
		fn, err := lib.NewFunctionWithName(name)
		if err != nil {
			d.release()
			return nil, err
		}
		pso, err := dev.NewComputePipelineStateWithFunction(fn)
		fn.Release()
		if err != nil {
			d.release()
			return nil, fmt.Errorf("kernel %s: %w", name, err)
		}
		d.psos = append(d.psos, pso)
		d.group = append(d.group, max(1, min(threadgroupSize, pso.MaxTotalThreadsPerThreadgroup())))
	}
	return d, nil
}

func (d *metalDevice) release() {
	for _, p := range d.psos {
		p.Release()
	}
	d.psos = nil
	d.dev.Release()
}

// metalGPU is one world's view of the shared device.
type metalGPU struct{ d *metalDevice }

func (g metalGPU) name() string { return "gpu0" }

func (g metalGPU) newBuffer(size int) (gpuBuffer, error) {
	var b *metalBuffer
	var err error
	mtl.WithPool(func() {
		var mb mtl.Buffer
		if mb, err = g.d.dev.NewBufferWithLength(size, mtl.ResourceStorageModeShared); err != nil {
			return
		}
		p := mb.Contents()
		if p == nil {
			mb.Release()
			err = fmt.Errorf("metal backend: a shared buffer of %d bytes has no contents pointer", size)
			return
		}
		b = &metalBuffer{b: mb, data: unsafe.Slice((*byte)(p), size)}
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (g metalGPU) newQueue() (gpuQueue, error) {
	var q *metalQueue
	var err error
	mtl.WithPool(func() {
		var cq mtl.CommandQueue
		if cq, err = g.d.dev.NewCommandQueue(); err != nil {
			return
		}
		// Each queue fills its own 4-byte buffer in touch, so queues
		// never share a resource that Metal might order them on.
		var tb mtl.Buffer
		if tb, err = g.d.dev.NewBufferWithLength(4, mtl.ResourceStorageModeShared); err != nil {
			cq.Release()
			return
		}
		q = &metalQueue{d: g.d, q: cq, touch: tb}
	})
	if err != nil {
		return nil, err
	}
	return q, nil
}

func (g metalGPU) newTimeline() (gpuTimeline, error) {
	var t metalTimeline
	var err error
	mtl.WithPool(func() { t.e, err = g.d.dev.NewSharedEvent() })
	if err != nil {
		return nil, err
	}
	return t, nil
}

// metalBuffer is a shared-storage MTLBuffer; data aliases its contents.
type metalBuffer struct {
	b    mtl.Buffer
	data []byte
}

func (b *metalBuffer) bytes() []byte { return b.data }
func (b *metalBuffer) release()      { mtl.WithPool(b.b.Release) }

type metalTimeline struct{ e mtl.SharedEvent }

func (t metalTimeline) signalFromHost(v uint64) {
	mtl.WithPool(func() {
		if t.e.SignaledValue() < v {
			t.e.SetSignaledValue(v)
		}
	})
}
func (t metalTimeline) release() { mtl.WithPool(t.e.Release) }

type metalQueue struct {
	d     *metalDevice
	q     mtl.CommandQueue
	touch mtl.Buffer
}

func (q *metalQueue) newBatch() (gpuBatch, error) {
	var cb mtl.CommandBuffer
	var err error
	mtl.WithPool(func() { cb, err = q.q.CommandBuffer() })
	if err != nil {
		return nil, err
	}
	return &metalBatch{q: q, cb: cb}, nil
}

func (q *metalQueue) release() {
	mtl.WithPool(func() {
		q.touch.Release()
		q.q.Release()
	})
}

// metalBatch is a retained MTLCommandBuffer with at most one open compute
// encoder, ended before any command-buffer-level command (event wait or
// signal, blit, commit).
type metalBatch struct {
	q       *metalQueue
	cb      mtl.CommandBuffer
	enc     mtl.ComputeCommandEncoder
	encOpen bool
}

func (b *metalBatch) endEncoder() {
	if b.encOpen {
		b.enc.EndEncoding()
		b.enc.Release()
		b.encOpen = false
	}
}

func (b *metalBatch) dispatch(k kernelID, dst, src gpuBuffer, p kernelParams) error {
	if int(k) < 0 || int(k) >= len(b.q.d.psos) {
		return fmt.Errorf("metal backend: kernel %d out of range (this is a bug)", k)
	}
	var err error
	mtl.WithPool(func() {
		if !b.encOpen {
			if b.enc, err = b.cb.ComputeCommandEncoder(); err != nil {
				return
			}
			b.encOpen = true
		}
		b.enc.SetComputePipelineState(b.q.d.psos[k])
		b.enc.SetBuffer(dst.(*metalBuffer).b, 0, 0)
		if src != nil {
			b.enc.SetBuffer(src.(*metalBuffer).b, 0, 1)
		}
		b.enc.SetBytes(unsafe.Pointer(&p), int(unsafe.Sizeof(p)), 2)
		g := uint64(b.q.d.group[k])
		b.enc.DispatchThreadgroups(mtl.Size{Width: (uint64(p.N) + g - 1) / g, Height: 1, Depth: 1}, mtl.Size{Width: g, Height: 1, Depth: 1})
	})
	return err
}

func (b *metalBatch) touch() error {
	var err error
	mtl.WithPool(func() {
		b.endEncoder()
		var blit mtl.BlitCommandEncoder
		if blit, err = b.cb.BlitCommandEncoder(); err != nil {
			return
		}
		blit.FillBuffer(b.q.touch, mtl.Range{Location: 0, Length: 4}, 0)
		blit.EndEncoding()
		blit.Release()
	})
	return err
}

func (b *metalBatch) waitFor(t gpuTimeline, v uint64) {
	mtl.WithPool(func() {
		b.endEncoder()
		b.cb.EncodeWaitForEvent(t.(metalTimeline).e, v)
	})
}

func (b *metalBatch) signal(t gpuTimeline, v uint64) {
	mtl.WithPool(func() {
		b.endEncoder()
		b.cb.EncodeSignalEvent(t.(metalTimeline).e, v)
	})
}

func (b *metalBatch) commit() {
	mtl.WithPool(func() {
		b.endEncoder()
		b.cb.Commit()
	})
}

func (b *metalBatch) wait() (start, end float64, err error) {
	mtl.WithPool(func() {
		b.cb.WaitUntilCompleted()
		err = b.cb.Err()
		start, end = b.cb.GPUStartTime(), b.cb.GPUEndTime()
	})
	return start, end, err
}

func (b *metalBatch) release() {
	mtl.WithPool(func() {
		b.endEncoder()
		b.cb.Release()
	})
}

// NewWorld returns a world of p virtual ranks on the Mac's GPU, named
// "metal:gpu0/r0" to "metal:gpu0/r<p-1>": each rank has its own buffers,
// streams (command queues) and events, and ranks exchange data through
// shared-storage staging buffers ordered by shared events. close stops the
// streams, waits for the GPU and releases the world's Metal objects; the
// device and its compiled kernels stay for later worlds.
//
// Without a usable Metal GPU the error wraps ErrUnavailable.
func NewWorld(p int, opts ...Option) (w *hw.World, close func() error, err error) {
	d, err := openDevice()
	if err != nil {
		return nil, nil, err
	}
	return newCluster(metalGPU{d}, p, opts)
}

// Available reports whether this Mac can run the backend: Metal.framework
// loads, there is a GPU, and the kernels compile. It returns nil on a Mac
// with a working Metal GPU, else an error wrapping ErrUnavailable.
func Available() error {
	_, err := openDevice()
	return err
}

// DeviceName is Metal's name for the GPU (e.g. "Apple M2 Max"), for
// listings such as `commsim devices`.
func DeviceName() (string, error) {
	d, err := openDevice()
	if err != nil {
		return "", err
	}
	return d.name, nil
}
