// Package cuda will implement hw on NVIDIA GPUs through the CUDA driver API
// and NCCL, loaded with purego (no cgo). Nothing is implemented here yet:
// there is no CUDA backend in this version of commsim.
package cuda
