package nccl

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// elements are what a collective reduces, where they sway NCCL's choice
// (enqueue.cc): NVLS's switch reduces some element types and operations
// only (device.h, ncclNvlsSupported), and PAT's reduce-scatter does not
// average. The zero value, a type not known, allows every algorithm.
type elements struct {
	dtype hw.DType
	redop hw.ReduceOp
}

// off says why algorithm a cannot reduce e for op, "" where it can.
func (e elements) off(op ops.Op, a Algo) string {
	if e.dtype == 0 || (op != ops.AllReduce && op != ops.ReduceScatter && op != ops.Reduce) {
		return ""
	}
	switch a {
	case NVLS, NVLSTree:
		// Sum for every type the switch adds, min and max but for f32 and
		// f64; an average (NCCL's pre-multiplied or post-divided sum)
		// never; 8-bit types not at all.
		ok := e.redop == hw.Sum
		switch e.dtype {
		case hw.I32, hw.I64, hw.F16, hw.BF16:
			ok = ok || e.redop == hw.Min || e.redop == hw.Max
		case hw.F32, hw.F64:
		default:
			ok = false
		}
		if !ok {
			return fmt.Sprintf("NVLS does not reduce %v with %v", e.dtype, e.redop)
		}
	case PAT:
		if op == ops.ReduceScatter && e.redop == hw.Avg {
			return "PAT's reduce-scatter does not average"
		}
	}
	return ""
}
