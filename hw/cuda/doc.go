// Package cuda will implement hw on NVIDIA GPUs through the CUDA driver API
// (libcuda.so.1) and NCCL (libnccl.so.2), both loaded with purego: there
// is no cgo.
//
// This version has the first slice only: loading the driver with every
// symbol resolved once into a typed function variable and checked (a
// missing library or symbol is an error naming it, never a crash), every
// CUresult turned into a Go error naming the call and the driver's message,
// and device discovery (Devices) for `commsim devices`. Buffers, streams,
// events, PTX kernels, virtual ranks and NCCL are not implemented yet, and
// nothing in this package has run on a GPU.
package cuda
