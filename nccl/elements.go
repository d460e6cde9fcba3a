package nccl

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// elements are what a collective reduces, where they sway NCCL's choice
// (enqueue.cc): NVLS's switch reduces some element types and operations
// only (device.h, ncclNvlsSupported), the network's SHARP switches others
// (enqueue.cc, ncclGetCollNetSupport: the CollNet plugin's support
// matrix), and PAT's reduce-scatter does not average. The zero value, a
// type not known, allows every algorithm.
type elements struct {
	dtype hw.DType
	redop hw.ReduceOp
}

// off says why algorithm a cannot reduce e for op on s, "" where it can.
func (e elements) off(s System, op ops.Op, a Algo) string {
	if e.dtype == 0 || (op != ops.AllReduce && op != ops.ReduceScatter && op != ops.Reduce) {
		return ""
	}
	if a == CollNetDirect || a == CollNetChain || a == NVLS && s.Nodes > 1 {
		// NVLS across nodes reduces through SHARP as CollNet does.
		if why := e.offSHARP(s); why != "" {
			return why
		}
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

// offSHARP says why the network's SHARP switches cannot reduce e, ""
// where they can, as NCCL's SHARP plugin (nccl-rdma-sharp-plugins,
// ncclSharpReduceSupport) answers NCCL: sum, min and max, never a
// product (an average is a sum to it: NCCL divides apart); f16, f32, f64
// and 32- and 64-bit integers, and bf16 and 8-bit integers only with
// SHARP's third generation (the plugin's NCCL_SHARP_V3_DATATYPES, on the
// switch's word). A fabric says nothing of its switches' generation:
// commsim takes Quantum-2 and later, SHARPv3, wherever the NIC ports run
// at 400 Gb/s (NDR) or faster, and HDR's Quantum, SHARPv2, below.
func (e elements) offSHARP(s System) string {
	if e.redop == hw.Prod {
		return "SHARP does not reduce with prod"
	}
	if (e.dtype == hw.BF16 || e.dtype == hw.U8) && !s.sharpV3() {
		return fmt.Sprintf("SHARP below its third generation (NICs under 400 Gb/s) does not reduce %v", e.dtype)
	}
	return ""
}

// sharpV3 reports whether the network's switches reduce as SHARP's third
// generation does: NDR (400 Gb/s ports, 50 GB/s) or faster.
func (s System) sharpV3() bool { return s.NICBW >= 50 }
