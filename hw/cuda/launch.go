//go:build linux || darwin

package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda/internal/ptxgen"
)

// launchArgs is a worker's kernel parameter block, pinned for the worker's
// life: cuLaunchKernel reads void** params, an array of pointers to the
// values, and copies them before it returns, so one block per worker
// serves every launch with no allocation.
type launchArgs struct {
	vals [ptxgen.Params]uint64
	ptrs [ptxgen.Params]unsafe.Pointer
	pin  runtime.Pinner
}

func newLaunchArgs() *launchArgs {
	a := &launchArgs{}
	for i := range a.vals {
		a.ptrs[i] = unsafe.Pointer(&a.vals[i])
	}
	// One object: ptrs point into the same pinned allocation, so the
	// memory handed to C holds no unpinned Go pointer.
	a.pin.Pin(a)
	return a
}

func reduceKernel(op hw.ReduceOp, dt hw.DType) string { return ptxgen.ReduceName(op, dt) }
func divideKernel(dt hw.DType) string                 { return ptxgen.DivideName(dt) }
func divisor(dt hw.DType, n int) uint64               { return ptxgen.Divisor(dt, n) }

// kernelShape is a launch's geometry: the parameters after dst and src,
// and the grid.
type kernelShape struct {
	head, nvec, n int
	blocks        int
}

// shapeFor lays out n elements of size bytes at device addresses dst and
// src over a GPU with sms multiprocessors: vectors where both are aligned
// alike (ptxgen.Split), and a grid-stride loop of at most blocksPerSM
// blocks of threadsPerBlock per SM, which keeps every SM full without
// launching more threads than there is work.
func shapeFor(dst, src uint64, hasSrc bool, n, size, sms int) kernelShape {
	head, nvec := ptxgen.Split(dst, src, n, size, hasSrc)
	work := ptxgen.Work(n, size, nvec)
	blocks := (work + threadsPerBlock - 1) / threadsPerBlock
	blocks = max(1, min(blocks, sms*blocksPerSM))
	return kernelShape{head: head, nvec: nvec, n: n, blocks: blocks}
}

// launch issues kernel name over dst (and src, unless it has no buffer)
// with divisor q on the stream.
func (s *Stream) launch(name string, dst, src hw.Slice, q uint64) error {
	if dst.Len == 0 {
		return nil
	}
	g := s.dev.g
	fn, ok := g.funcs[name]
	if !ok {
		return fmt.Errorf("no kernel %s in the module", name)
	}
	da := dst.Buf.(*Buffer).addr(dst.Off)
	var sa uint64
	hasSrc := src.Buf != nil
	if hasSrc {
		sa = src.Buf.(*Buffer).addr(src.Off)
	}
	sh := shapeFor(da, sa, hasSrc, dst.Len, dst.DType().Size(), g.sms)
	a := s.args
	a.vals = [ptxgen.Params]uint64{da, sa, q, uint64(sh.head), uint64(sh.nvec), uint64(sh.n)}
	d := s.dev.h.d
	return d.check("cuLaunchKernel("+name+")",
		d.cuLaunchKernel(fn, uint32(sh.blocks), 1, 1, threadsPerBlock, 1, 1, 0, s.cu, &a.ptrs[0], nil))
}
