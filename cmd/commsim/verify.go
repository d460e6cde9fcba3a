package main

import (
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// Inputs for --check.
//
// Every rank's input is a deterministic pseudo-random pattern of values
// exactly representable in the dtype: in [-1, 1) for floats (near 1 for
// prod, so products neither overflow nor underflow), small integers for
// i32 and i64, and all of 0..255 for u8. The outputs are judged by
// proptest.CountWrong: copies, integers (with wrap-around), min and max
// exactly; float sums, averages and products within error bounds derived
// from the number of rounded operations, against a double-double
// reference (see proptest.CheckReference).

// splitmix64 is a small, well-mixed hash for input patterns.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// inputValues returns rank r's input as float64 values exactly
// representable in the dtype.
func inputValues(spec ops.Spec, r, n int) []float64 {
	vals := make([]float64, n)
	for i := range vals {
		h := splitmix64(uint64(r)<<40 ^ uint64(i) ^ uint64(spec.Op)<<56)
		u := float64(h>>11) / (1 << 53) // [0, 1)
		switch {
		case spec.DType == hw.U8:
			vals[i] = float64(h & 0xff)
		case !spec.DType.IsFloat():
			vals[i] = float64(int64(h%17) - 8)
		case spec.Redop == hw.Prod && spec.Op.Reduces():
			vals[i] = 1 + (2*u-1)/16
		default:
			vals[i] = 2*u - 1
		}
	}
	// Round floats to the dtype so the reference sees what the device sees.
	raw, _ := hw.FromFloat64s(spec.DType, vals)
	exact, _ := hw.ToFloat64s(spec.DType, raw)
	return exact
}
