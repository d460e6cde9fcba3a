package cuda

import _ "embed"

//go:generate go run ./internal/ptxgen/genptx -o kernels.ptx

// kernelsPTX is the module of every kernel, written by internal/ptxgen (see
// its package doc for how the arithmetic rules map to PTX). It is plain
// text; the driver JIT-compiles it for the GPU at hand when a world is
// first opened on it.
//
//go:embed kernels.ptx
var kernelsPTX string
