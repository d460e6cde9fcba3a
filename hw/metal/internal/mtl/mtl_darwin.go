//go:build darwin

package mtl

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/commsim/commsim/internal/dlfcn"
	"github.com/ebitengine/purego/objc"
)

// FrameworkPath is where Metal lives on every macOS that has it.
const FrameworkPath = "/System/Library/Frameworks/Metal.framework/Metal"

// coreGraphicsPath is loaded before Metal: MTLCreateSystemDefaultDevice
// returns nil in a process that has not loaded CoreGraphics (Apple's
// documentation says to link it in command-line tools, which a test binary
// is).
const coreGraphicsPath = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"

// ErrNoMetal is wrapped by every error about Metal itself being absent.
var ErrNoMetal = errors.New("Metal.framework is not usable")

// Selectors of the Metal protocols used here.
var (
	sel_name                                     = objc.RegisterName("name")
	sel_newBufferWithLength_options              = objc.RegisterName("newBufferWithLength:options:")
	sel_newCommandQueue                          = objc.RegisterName("newCommandQueue")
	sel_newSharedEvent                           = objc.RegisterName("newSharedEvent")
	sel_newLibraryWithSource_options_error       = objc.RegisterName("newLibraryWithSource:options:error:")
	sel_newComputePipelineStateWithFunction_err  = objc.RegisterName("newComputePipelineStateWithFunction:error:")
	sel_newFunctionWithName                      = objc.RegisterName("newFunctionWithName:")
	sel_contents                                 = objc.RegisterName("contents")
	sel_commandBuffer                            = objc.RegisterName("commandBuffer")
	sel_computeCommandEncoder                    = objc.RegisterName("computeCommandEncoder")
	sel_blitCommandEncoder                       = objc.RegisterName("blitCommandEncoder")
	sel_encodeWaitForEvent_value                 = objc.RegisterName("encodeWaitForEvent:value:")
	sel_encodeSignalEvent_value                  = objc.RegisterName("encodeSignalEvent:value:")
	sel_commit                                   = objc.RegisterName("commit")
	sel_waitUntilCompleted                       = objc.RegisterName("waitUntilCompleted")
	sel_status                                   = objc.RegisterName("status")
	sel_error                                    = objc.RegisterName("error")
	sel_GPUStartTime                             = objc.RegisterName("GPUStartTime")
	sel_GPUEndTime                               = objc.RegisterName("GPUEndTime")
	sel_setComputePipelineState                  = objc.RegisterName("setComputePipelineState:")
	sel_setBuffer_offset_atIndex                 = objc.RegisterName("setBuffer:offset:atIndex:")
	sel_setBytes_length_atIndex                  = objc.RegisterName("setBytes:length:atIndex:")
	sel_dispatchThreadgroups_threadsPerThreadgrp = objc.RegisterName("dispatchThreadgroups:threadsPerThreadgroup:")
	sel_endEncoding                              = objc.RegisterName("endEncoding")
	sel_fillBuffer_range_value                   = objc.RegisterName("fillBuffer:range:value:")
	sel_maxTotalThreadsPerThreadgroup            = objc.RegisterName("maxTotalThreadsPerThreadgroup")
	sel_signaledValue                            = objc.RegisterName("signaledValue")
	sel_setSignaledValue                         = objc.RegisterName("setSignaledValue:")
	sel_setLanguageVersion                       = objc.RegisterName("setLanguageVersion:")
	sel_setFastMathEnabled                       = objc.RegisterName("setFastMathEnabled:")
	sel_setMathMode                              = objc.RegisterName("setMathMode:")
	sel_count                                    = objc.RegisterName("count")
	sel_objectAtIndex                            = objc.RegisterName("objectAtIndex:")
)

var class_MTLCompileOptions objc.Class

var (
	loadOnce                     sync.Once
	loadErr                      error
	mtlCreateSystemDefaultDevice uintptr
	mtlCopyAllDevices            uintptr // 0 if absent
)

// Load opens CoreGraphics and Metal.framework, resolves
// MTLCreateSystemDefaultDevice (and MTLCopyAllDevices, if present) and
// looks up the classes used here, once. A missing framework, symbol or
// class is an error wrapping ErrNoMetal, never a panic.
func Load() error {
	loadOnce.Do(func() {
		if _, err := dlfcn.Open(coreGraphicsPath); err != nil {
			loadErr = fmt.Errorf("%w: dlopen %s: %v", ErrNoMetal, coreGraphicsPath, err)
			return
		}
		h, err := dlfcn.Open(FrameworkPath)
		if err != nil {
			loadErr = fmt.Errorf("%w: dlopen %s: %v", ErrNoMetal, FrameworkPath, err)
			return
		}
		if mtlCreateSystemDefaultDevice, err = dlfcn.Sym(h, "MTLCreateSystemDefaultDevice"); err != nil {
			loadErr = fmt.Errorf("%w: %s has no symbol MTLCreateSystemDefaultDevice: %v", ErrNoMetal, FrameworkPath, err)
			return
		}
		mtlCopyAllDevices, _ = dlfcn.Sym(h, "MTLCopyAllDevices") // a fallback only
		// Metal links Foundation, so its classes exist once Metal is loaded.
		for _, c := range []struct {
			name string
			dst  *objc.Class
		}{
			{"NSString", &class_NSString},
			{"NSAutoreleasePool", &class_NSAutoreleasePool},
			{"MTLCompileOptions", &class_MTLCompileOptions},
		} {
			if *c.dst = objc.GetClass(c.name); *c.dst == 0 {
				loadErr = fmt.Errorf("%w: Objective-C class %s not found after loading %s", ErrNoMetal, c.name, FrameworkPath)
				return
			}
		}
	})
	return loadErr
}

// ResourceOptions are MTLResourceOptions.
//
// Reference: https://developer.apple.com/documentation/metal/mtlresourceoptions
type ResourceOptions uint

// ResourceStorageModeShared places a buffer in memory that the CPU and the
// GPU both address (MTLStorageModeShared << MTLResourceStorageModeShift),
// with the default CPU cache mode and hazard tracking.
const ResourceStorageModeShared ResourceOptions = 0 << 4

// LanguageVersion is MTLLanguageVersion: major<<16 | minor.
//
// Reference: https://developer.apple.com/documentation/metal/mtllanguageversion
type LanguageVersion uint

// LanguageVersion2_4 is MSL 2.4 (macOS 12).
const LanguageVersion2_4 LanguageVersion = 2<<16 | 4

// MathMode is MTLMathMode (macOS 15 and later).
//
// Reference: https://developer.apple.com/documentation/metal/mtlmathmode
type MathMode int

// MathModeSafe forbids every floating-point transformation that could
// change a result.
const MathModeSafe MathMode = 0

// CommandBufferStatus is MTLCommandBufferStatus.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandbufferstatus
type CommandBufferStatus uint

// The statuses a finished command buffer can have.
const (
	CommandBufferStatusCompleted CommandBufferStatus = 4
	CommandBufferStatusError     CommandBufferStatus = 5
)

// Size is MTLSize.
//
// Reference: https://developer.apple.com/documentation/metal/mtlsize
type Size struct{ Width, Height, Depth uint64 }

// Range is NSRange.
type Range struct{ Location, Length uint64 }

// Device is id<MTLDevice>.
//
// Reference: https://developer.apple.com/documentation/metal/mtldevice
type Device struct{ id objc.ID }

// CreateSystemDefaultDevice returns the preferred GPU (owned: Release it),
// or else the first GPU MTLCopyAllDevices lists. It calls Load.
//
// Reference: https://developer.apple.com/documentation/metal/1433401-mtlcreatesystemdefaultdevice
func CreateSystemDefaultDevice() (Device, error) {
	if err := Load(); err != nil {
		return Device{}, err
	}
	if d, _, _ := purego.SyscallN(mtlCreateSystemDefaultDevice); d != 0 {
		return Device{objc.ID(d)}, nil
	}
	// Some headless sessions have no "default" device but still list the
	// GPUs (MTLCopyAllDevices returns an owned NSArray).
	if mtlCopyAllDevices != 0 {
		if a, _, _ := purego.SyscallN(mtlCopyAllDevices); a != 0 {
			arr := objc.ID(a)
			defer release(arr)
			if arr.Send(sel_count) > 0 {
				return Device{retain(arr.Send(sel_objectAtIndex, uint64(0)))}, nil
			}
		}
	}
	return Device{}, fmt.Errorf("%w: MTLCreateSystemDefaultDevice returned nil and MTLCopyAllDevices lists no GPU", ErrNoMetal)
}

// Name is the GPU's name, e.g. "Apple M2 Max".
func (d Device) Name() string { return NSString{d.id.Send(sel_name)}.String() }

// NewBufferWithLength allocates n bytes (owned).
//
// Reference: https://developer.apple.com/documentation/metal/mtldevice/1433375-newbufferwithlength
func (d Device) NewBufferWithLength(n int, opts ResourceOptions) (Buffer, error) {
	b := d.id.Send(sel_newBufferWithLength_options, uint64(n), uint64(opts))
	if b == 0 {
		return Buffer{}, &Error{Call: fmt.Sprintf("newBufferWithLength:%d options:%#x", n, uint(opts)), Description: "returned nil (out of memory or over maxBufferLength)"}
	}
	return Buffer{b}, nil
}

// NewCommandQueue makes a queue (owned).
//
// Reference: https://developer.apple.com/documentation/metal/mtldevice/1433388-newcommandqueue
func (d Device) NewCommandQueue() (CommandQueue, error) {
	q := d.id.Send(sel_newCommandQueue)
	if q == 0 {
		return CommandQueue{}, &Error{Call: "newCommandQueue", Description: "returned nil"}
	}
	return CommandQueue{q}, nil
}

// NewSharedEvent makes an event that the CPU and every queue can signal
// and wait on (owned).
//
// Reference: https://developer.apple.com/documentation/metal/mtldevice/2966686-newsharedevent
func (d Device) NewSharedEvent() (SharedEvent, error) {
	e := d.id.Send(sel_newSharedEvent)
	if e == 0 {
		return SharedEvent{}, &Error{Call: "newSharedEvent", Description: "returned nil"}
	}
	return SharedEvent{e}, nil
}

// NewLibraryWithSource compiles MSL source synchronously (owned).
//
// Reference: https://developer.apple.com/documentation/metal/mtldevice/1433431-newlibrarywithsource
func (d Device) NewLibraryWithSource(src string, opts CompileOptions) (Library, error) {
	s := NewNSString(src)
	defer s.Release()
	var nsErr objc.ID
	l := d.id.Send(sel_newLibraryWithSource_options_error, s.id, opts.id, unsafe.Pointer(&nsErr))
	if l == 0 {
		return Library{}, errorFrom("newLibraryWithSource:options:error:", nsErr)
	}
	return Library{l}, nil
}

// NewComputePipelineStateWithFunction builds a compute pipeline (owned).
//
// Reference: https://developer.apple.com/documentation/metal/mtldevice/1433395-newcomputepipelinestatewithfunct
func (d Device) NewComputePipelineStateWithFunction(f Function) (ComputePipelineState, error) {
	var nsErr objc.ID
	p := d.id.Send(sel_newComputePipelineStateWithFunction_err, f.id, unsafe.Pointer(&nsErr))
	if p == 0 {
		return ComputePipelineState{}, errorFrom("newComputePipelineStateWithFunction:error:", nsErr)
	}
	return ComputePipelineState{p}, nil
}

// Release releases the device.
func (d Device) Release() { release(d.id) }

// Buffer is id<MTLBuffer>.
//
// Reference: https://developer.apple.com/documentation/metal/mtlbuffer
type Buffer struct{ id objc.ID }

// Contents is the CPU address of a shared buffer.
//
// Reference: https://developer.apple.com/documentation/metal/mtlbuffer/1515716-contents
func (b Buffer) Contents() unsafe.Pointer { return objc.Send[unsafe.Pointer](b.id, sel_contents) }

// Length is the buffer's size in bytes.
func (b Buffer) Length() int { return int(b.id.Send(sel_length)) }

// Release releases the buffer; command buffers that use it keep it alive
// until they complete.
func (b Buffer) Release() { release(b.id) }

// CommandQueue is id<MTLCommandQueue>: command buffers committed to one
// queue start in commit order.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandqueue
type CommandQueue struct{ id objc.ID }

// CommandBuffer returns a new command buffer that retains the resources
// it uses. It is retained here: Release it.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandqueue/1508686-commandbuffer
func (q CommandQueue) CommandBuffer() (CommandBuffer, error) {
	cb := q.id.Send(sel_commandBuffer)
	if cb == 0 {
		return CommandBuffer{}, &Error{Call: "commandBuffer", Description: "returned nil"}
	}
	return CommandBuffer{retain(cb)}, nil
}

// Release releases the queue.
func (q CommandQueue) Release() { release(q.id) }

// CommandBuffer is id<MTLCommandBuffer>.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandbuffer
type CommandBuffer struct{ id objc.ID }

// ComputeCommandEncoder starts a compute pass whose dispatches run one
// after another (MTLDispatchTypeSerial). It is retained here: Release it
// after EndEncoding.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandbuffer/1443044-computecommandencoder
func (c CommandBuffer) ComputeCommandEncoder() (ComputeCommandEncoder, error) {
	e := c.id.Send(sel_computeCommandEncoder)
	if e == 0 {
		return ComputeCommandEncoder{}, &Error{Call: "computeCommandEncoder", Description: "returned nil"}
	}
	return ComputeCommandEncoder{retain(e)}, nil
}

// BlitCommandEncoder starts a blit pass, retained here: Release it after
// EndEncoding.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandbuffer/1443001-blitcommandencoder
func (c CommandBuffer) BlitCommandEncoder() (BlitCommandEncoder, error) {
	e := c.id.Send(sel_blitCommandEncoder)
	if e == 0 {
		return BlitCommandEncoder{}, &Error{Call: "blitCommandEncoder", Description: "returned nil"}
	}
	return BlitCommandEncoder{retain(e)}, nil
}

// EncodeWaitForEvent holds the commands encoded after it until ev's
// signaled value is at least v. No encoder may be open.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandbuffer/2966549-encodewaitforevent
func (c CommandBuffer) EncodeWaitForEvent(ev SharedEvent, v uint64) {
	c.id.Send(sel_encodeWaitForEvent_value, ev.id, v)
}

// EncodeSignalEvent sets ev's signaled value to v once the commands
// encoded before it have completed. No encoder may be open.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandbuffer/2966547-encodesignalevent
func (c CommandBuffer) EncodeSignalEvent(ev SharedEvent, v uint64) {
	c.id.Send(sel_encodeSignalEvent_value, ev.id, v)
}

// Commit submits the command buffer.
func (c CommandBuffer) Commit() { c.id.Send(sel_commit) }

// WaitUntilCompleted blocks the calling thread until the GPU is done with
// the command buffer.
func (c CommandBuffer) WaitUntilCompleted() { c.id.Send(sel_waitUntilCompleted) }

// Status is the command buffer's stage.
func (c CommandBuffer) Status() CommandBufferStatus {
	return CommandBufferStatus(c.id.Send(sel_status))
}

// Err is the command buffer's error after it failed (status Error), as an
// *Error naming "command buffer", or nil.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandbuffer/1443040-error
func (c CommandBuffer) Err() error {
	if c.Status() != CommandBufferStatusError {
		return nil
	}
	return errorFrom("command buffer execution", c.id.Send(sel_error))
}

// GPUStartTime and GPUEndTime are when the GPU started and finished the
// command buffer, in seconds of the host's mach_absolute_time clock (the
// clock of CACurrentMediaTime); they are 0 until it completes.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandbuffer/1639925-gpustarttime
func (c CommandBuffer) GPUStartTime() float64 { return objc.Send[float64](c.id, sel_GPUStartTime) }

// GPUEndTime: see GPUStartTime.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcommandbuffer/1639926-gpuendtime
func (c CommandBuffer) GPUEndTime() float64 { return objc.Send[float64](c.id, sel_GPUEndTime) }

// Release releases the command buffer.
func (c CommandBuffer) Release() { release(c.id) }

// ComputeCommandEncoder is id<MTLComputeCommandEncoder>.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcomputecommandencoder
type ComputeCommandEncoder struct{ id objc.ID }

// SetComputePipelineState selects the kernel for later dispatches.
func (e ComputeCommandEncoder) SetComputePipelineState(p ComputePipelineState) {
	e.id.Send(sel_setComputePipelineState, p.id)
}

// SetBuffer binds b at byte offset off to [[buffer(index)]].
func (e ComputeCommandEncoder) SetBuffer(b Buffer, off, index int) {
	e.id.Send(sel_setBuffer_offset_atIndex, b.id, uint64(off), uint64(index))
}

// SetBytes copies n bytes at p into the command stream as
// [[buffer(index)]] (at most 4 KiB).
func (e ComputeCommandEncoder) SetBytes(p unsafe.Pointer, n, index int) {
	e.id.Send(sel_setBytes_length_atIndex, p, uint64(n), uint64(index))
	runtime.KeepAlive(p)
}

// DispatchThreadgroups launches groups × threads threads.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcomputecommandencoder/1443138-dispatchthreadgroups
func (e ComputeCommandEncoder) DispatchThreadgroups(groups, threads Size) {
	e.id.Send(sel_dispatchThreadgroups_threadsPerThreadgrp, groups, threads)
}

// EndEncoding closes the pass.
func (e ComputeCommandEncoder) EndEncoding() { e.id.Send(sel_endEncoding) }

// Release releases the encoder.
func (e ComputeCommandEncoder) Release() { release(e.id) }

// BlitCommandEncoder is id<MTLBlitCommandEncoder>.
//
// Reference: https://developer.apple.com/documentation/metal/mtlblitcommandencoder
type BlitCommandEncoder struct{ id objc.ID }

// FillBuffer sets r's bytes of b to value (on macOS r's location and
// length must be multiples of 4).
//
// Reference: https://developer.apple.com/documentation/metal/mtlblitcommandencoder/1400761-fillbuffer
func (e BlitCommandEncoder) FillBuffer(b Buffer, r Range, value uint8) {
	e.id.Send(sel_fillBuffer_range_value, b.id, r, value)
}

// EndEncoding closes the pass.
func (e BlitCommandEncoder) EndEncoding() { e.id.Send(sel_endEncoding) }

// Release releases the encoder.
func (e BlitCommandEncoder) Release() { release(e.id) }

// Library is id<MTLLibrary>.
//
// Reference: https://developer.apple.com/documentation/metal/mtllibrary
type Library struct{ id objc.ID }

// NewFunctionWithName looks up a kernel (owned).
//
// Reference: https://developer.apple.com/documentation/metal/mtllibrary/1515524-newfunctionwithname
func (l Library) NewFunctionWithName(name string) (Function, error) {
	s := NewNSString(name)
	defer s.Release()
	f := l.id.Send(sel_newFunctionWithName, s.id)
	if f == 0 {
		return Function{}, &Error{Call: fmt.Sprintf("newFunctionWithName:%q", name), Description: "no such function in the library"}
	}
	return Function{f}, nil
}

// Release releases the library.
func (l Library) Release() { release(l.id) }

// Function is id<MTLFunction>.
//
// Reference: https://developer.apple.com/documentation/metal/mtlfunction
type Function struct{ id objc.ID }

// Release releases the function.
func (f Function) Release() { release(f.id) }

// ComputePipelineState is id<MTLComputePipelineState>.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcomputepipelinestate
type ComputePipelineState struct{ id objc.ID }

// MaxTotalThreadsPerThreadgroup is the largest threadgroup this pipeline
// can run.
func (p ComputePipelineState) MaxTotalThreadsPerThreadgroup() int {
	return int(p.id.Send(sel_maxTotalThreadsPerThreadgroup))
}

// Release releases the pipeline.
func (p ComputePipelineState) Release() { release(p.id) }

// SharedEvent is id<MTLSharedEvent>.
//
// Reference: https://developer.apple.com/documentation/metal/mtlsharedevent
type SharedEvent struct{ id objc.ID }

// SignaledValue is the event's current value.
func (e SharedEvent) SignaledValue() uint64 { return uint64(e.id.Send(sel_signaledValue)) }

// SetSignaledValue signals the event from the CPU.
func (e SharedEvent) SetSignaledValue(v uint64) { e.id.Send(sel_setSignaledValue, v) }

// Release releases the event.
func (e SharedEvent) Release() { release(e.id) }

// CompileOptions is MTLCompileOptions.
//
// Reference: https://developer.apple.com/documentation/metal/mtlcompileoptions
type CompileOptions struct{ id objc.ID }

// NewCompileOptions makes default options (owned). Messages to nil do
// nothing in Objective-C, so options that failed to be made would compile
// with the SDK's defaults, fast math among them: that is an error.
func NewCompileOptions() (CompileOptions, error) {
	id := objc.ID(class_MTLCompileOptions).Send(sel_new)
	if id == 0 {
		return CompileOptions{}, errors.New("mtl: [MTLCompileOptions new] returned nil")
	}
	return CompileOptions{id}, nil
}

// SetLanguageVersion pins the MSL version.
func (o CompileOptions) SetLanguageVersion(v LanguageVersion) {
	o.id.Send(sel_setLanguageVersion, uint64(v))
}

// SetFastMathEnabled turns fast math on or off (deprecated in macOS 15 in
// favour of mathMode, still honoured).
func (o CompileOptions) SetFastMathEnabled(on bool) { o.id.Send(sel_setFastMathEnabled, on) }

// SetMathMode sets mathMode where the OS has it (macOS 15+) and reports
// whether it did.
func (o CompileOptions) SetMathMode(m MathMode) bool {
	if !respondsTo(o.id, sel_setMathMode) {
		return false
	}
	o.id.Send(sel_setMathMode, int64(m))
	return true
}

// Release releases the options.
func (o CompileOptions) Release() { release(o.id) }
