package metal

import (
	_ "embed"
	"fmt"

	"github.com/commsim/commsim/hw"
)

// kernelSource is the MSL of every kernel, compiled at run time with
// newLibraryWithSource:options:error: (see kernels.metal for how each rule
// of hw's arithmetic contract is met).
//
//go:embed kernels.metal
var kernelSource string

// kernelDTypes are the dtypes with kernels: every hw dtype but f64, since
// Metal has no 64-bit floating-point type.
var kernelDTypes = []hw.DType{hw.F32, hw.F16, hw.BF16, hw.I32, hw.I64, hw.U8}

// kernelOps are the elementwise reduce ops; Avg is Sum then divide.
var kernelOps = []hw.ReduceOp{hw.Sum, hw.Prod, hw.Min, hw.Max}

// copyWidths are the element widths, in bytes, of the copy kernels.
var copyWidths = []int{1, 2, 4, 8}

// kernelID indexes kernelNames.
type kernelID int

// kernelNames is every kernel the Go side launches, in a fixed order: the
// reduces (dtype-major), the divides, the copies. The MSL defines exactly
// these (kernels_test.go checks it), and the darwin backend builds one
// pipeline per entry.
var kernelNames = func() []string {
	var names []string
	for _, dt := range kernelDTypes {
		for _, op := range kernelOps {
			names = append(names, reduceKernelName(op, dt))
		}
	}
	for _, dt := range kernelDTypes {
		names = append(names, divideKernelName(dt))
	}
	for _, w := range copyWidths {
		names = append(names, copyKernelName(w))
	}
	return names
}()

var kernelIndex = func() map[string]kernelID {
	m := make(map[string]kernelID, len(kernelNames))
	for i, n := range kernelNames {
		m[n] = kernelID(i)
	}
	return m
}()

func reduceKernelName(op hw.ReduceOp, dt hw.DType) string {
	return "reduce_" + op.String() + "_" + dt.String()
}

func divideKernelName(dt hw.DType) string { return "divide_" + dt.String() }

func copyKernelName(width int) string { return fmt.Sprintf("copy_b%d", 8*width) }

// lookupKernel finds name in the table; a miss is a bug in this package,
// reported as an error rather than a panic.
func lookupKernel(name string) (kernelID, error) {
	k, ok := kernelIndex[name]
	if !ok {
		return 0, fmt.Errorf("metal backend: no kernel %q (this is a bug)", name)
	}
	return k, nil
}

// reduceKernel is the kernel of dst = op(dst, src) for dt.
func reduceKernel(op hw.ReduceOp, dt hw.DType) (kernelID, error) {
	if err := checkDType(dt); err != nil {
		return 0, err
	}
	return lookupKernel(reduceKernelName(op, dt))
}

// divideKernel is the kernel of dst = dst / n for dt.
func divideKernel(dt hw.DType) (kernelID, error) {
	if err := checkDType(dt); err != nil {
		return 0, err
	}
	return lookupKernel(divideKernelName(dt))
}

// copyKernel copies elements of dt bit for bit.
func copyKernel(dt hw.DType) (kernelID, error) {
	return lookupKernel(copyKernelName(dt.Size()))
}

// kernelParams is the MSL struct Params: 24 bytes, bound with setBytes.
// Buffers are bound whole and the slices' first elements travel here.
type kernelParams struct {
	N    uint32 // elements
	QF   uint32 // the bits of float32(divisor), rounded in Go as hw.DivideBytes does
	QI   uint64 // the divisor
	DOff uint32 // first element of dst
	SOff uint32 // first element of src
}

// maxKernelElems is the most elements one launch handles: kernels index
// with a 32-bit thread position.
const maxKernelElems = 1<<32 - 1

// threadgroupSize is the threads per threadgroup, lowered to a pipeline's
// maximum where that is smaller.
const threadgroupSize = 256
