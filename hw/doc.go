// Package hw is the seam between commsim's algorithms and its devices.
//
// A backend (the simulator in package sim, CUDA in hw/cuda, Metal in
// hw/metal) implements four small interfaces: Device, Buffer, Stream and
// Event. Everything else here is shared by all backends: the dtypes and
// their codecs (f16, bf16), the reduce operations and the arithmetic
// contract every backend reproduces bit for bit (ReduceBytes, DivideBytes),
// and World, which numbers ranks, splits sub-worlds and namespaces tags.
//
// The model follows MLX's distributed primitives: work is queued on streams,
// streams order against each other only through events, and errors come back
// from Synchronize as values that name the device, the operation and the
// cause. Bad calls return errors; nothing here panics on input.
//
// Optional capabilities (a native NCCL all-reduce, say) are small interfaces
// that a Device may also implement, found with As, which looks through
// decorators that implement Unwrapper.
//
// Package hwtest checks a backend against this contract.
//
// hw imports nothing else from commsim.
package hw
