package hw

// The arithmetic contract.
//
// ReduceBytes and DivideBytes are the only arithmetic in commsim. The
// simulator calls them directly; the PTX and MSL kernels of hw/cuda and
// hw/metal implement the same rules, and the equivalence tests compare their
// output with these functions bit for bit. The rules are written out on
// ReduceBytes and DivideBytes; a kernel that needs a rule not stated there
// is a bug in this documentation.

import (
	"fmt"
	"math"
)

// ReduceBytes computes dst[i] = op(dst[i], src[i]) for every element of
// dtype dt, writing into dst. dst and src hold little-endian elements and
// must have the same length, a multiple of dt.Size(). They may be the same
// slice; slices that partly overlap give unspecified results. op must be
// Sum, Prod, Min or Max: Avg is not elementwise, it is Sum followed by
// DivideBytes. Errors wrap ErrBadArgument (invalid op or dtype, Avg) or
// ErrSizeMismatch (lengths); on error dst is left untouched. ReduceBytes
// never panics.
//
// # Arithmetic contract
//
// These rules define every bit of the result. The simulator computes them
// here; the GPU kernels must reproduce them exactly.
//
//  1. f32 and f64: op(a, b) is a single IEEE 754 binary32 (binary64)
//     operation, rounded to nearest, ties to even. There is no fused
//     multiply-add and no wider intermediate (the Go code wraps each
//     operation in an explicit conversion, which the Go spec says prevents
//     fusion). Subnormal operands and results are kept: no flush to zero
//     (kernels must not use .ftz or fast math).
//  2. f16 and bf16: widen a and b exactly to float32, do one float32
//     operation as in rule 1, then round the float32 result to f16 (bf16)
//     to nearest, ties to even, as Float16FromFloat32 (BFloat16FromFloat32)
//     does. The result is rounded to the dtype after every single op; no
//     wider accumulator is carried between ops ("round after every add"),
//     so reducing p ranks' values rounds p-1 times, in the plan's order.
//     For Sum and Prod this equals the correctly rounded native f16 (bf16)
//     operation, bit for bit apart from NaN payloads (rule 3): by
//     Figueroa's theorem (1995), rounding an exact +, −, × or ÷ of p-bit
//     operands to nearest first at p' bits and then at p bits gives the
//     same result as rounding once to p bits whenever p' >= 2p+2, and
//     float32's p' = 24 meets that for f16 (p = 11, 2p+2 = 24) and bf16
//     (p = 8, 2p+2 = 18). The exponent range does not spoil it: nonzero
//     sums and products of f16 values lie well inside float32's normal
//     range; a bf16 sum or product below 2^-126 in magnitude is either
//     exact in float32 (it is a multiple of 2^-149) or below 2^-134, which
//     both roads round to ±0; and float32 overflows only beyond bf16's own
//     overflow threshold. A kernel may therefore use a native f16 (bf16)
//     add or multiply that rounds to nearest even and keeps subnormals,
//     provided it canonicalises NaN.
//  3. NaN: a float result that is NaN, whatever the operands' payloads or
//     signs, is stored as the canonical quiet NaN with a positive sign: f32
//     0x7FC00000, f64 0x7FF8000000000000, f16 0x7E00, bf16 0x7FC0. Hardware
//     differs in which payload it propagates; canonicalising is what makes
//     backends agree bit for bit. (The conversions Float16FromFloat32 and
//     the like keep payloads instead; only arithmetic canonicalises.)
//  4. Overflow gives ±Inf and underflow gives subnormals or ±0, per IEEE
//     754 with round to nearest even. Invalid operations (Inf − Inf,
//     0 × Inf) give the canonical NaN. Zero signs follow IEEE: +0 + −0 =
//     +0, −0 + −0 = −0, x − x = +0.
//  5. Min and Max on floats are IEEE 754-2019 minimum and maximum, not C's
//     fmin and fmax: if either operand is NaN the result is the canonical
//     NaN; otherwise the result is the smaller (larger) operand, with −0
//     ordered below +0, so min(−0, +0) = −0 and max(−0, +0) = +0. The
//     result is one of the operands' bit patterns; nothing is rounded.
//  6. i32, i64 and u8: Sum and Prod are computed modulo 2^n (32, 64, 8) in
//     two's complement, so they wrap: i32 MaxInt32 + 1 = MinInt32, u8 200 +
//     100 = 44. Min and Max use the ordinary signed order (i32, i64) or
//     unsigned order (u8).
func ReduceBytes(op ReduceOp, dt DType, dst, src []byte) error {
	if op == Avg {
		return fmt.Errorf("hw: reduce %s: %w: avg is not elementwise; it is Sum followed by DivideBytes", dt, ErrBadArgument)
	}
	if !op.Valid() {
		return fmt.Errorf("hw: reduce %s: %w: invalid reduce op %s", dt, ErrBadArgument, op)
	}
	if !dt.Valid() {
		return fmt.Errorf("hw: reduce %s: %w: invalid dtype %s", op, ErrBadArgument, dt)
	}
	if len(dst) != len(src) {
		return fmt.Errorf("hw: reduce %s %s: %w: dst has %d bytes, src %d", op, dt, ErrSizeMismatch, len(dst), len(src))
	}
	if len(dst)%dt.Size() != 0 {
		return fmt.Errorf("hw: reduce %s %s: %w: %d bytes (dst and src) is not a multiple of %d",
			op, dt, ErrSizeMismatch, len(dst), dt.Size())
	}
	switch dt {
	case F32:
		reduceF32(op, dst, src)
	case F64:
		reduceF64(op, dst, src)
	case F16:
		reduceF16(op, dst, src)
	case BF16:
		reduceBF16(op, dst, src)
	case I32:
		reduceI32(op, dst, src)
	case I64:
		reduceI64(op, dst, src)
	case U8:
		reduceU8(op, dst, src)
	}
	return nil
}

// DivideBytes computes dst[i] = dst[i] / n for every element of dtype dt,
// in place. It is the second half of Avg: the plan sums in its own order,
// then divides once by the number of ranks. n must be at least 1 and dst a
// multiple of dt.Size() long; otherwise it returns an error wrapping
// ErrBadArgument or ErrSizeMismatch and leaves dst untouched.
//
// The arithmetic, under the rules of ReduceBytes:
//
//   - f32 and f64: one IEEE 754 division, x / float32(n) (x / float64(n)
//     for f64), correctly rounded to nearest even (in PTX div.rn, not
//     div.approx or div.full; in MSL with fast math off). n is converted to
//     the float type with round to nearest even, which is exact for
//     n <= 2^24 (2^53).
//   - f16 and bf16: widen x exactly to float32, divide by float32(n) as
//     for f32, round the quotient to f16 (bf16) to nearest even. This is
//     the correctly rounded f16 (bf16) quotient whenever n < 2^(24-p),
//     that is n < 8192 for f16 and n < 65536 for bf16: the exact quotient
//     of a p-bit value by such an n is either a rounding midpoint of the
//     dtype or further than half a float32 ulp from every midpoint, so the
//     two roundings cannot differ from one. For larger n the float32 path
//     is still the contract.
//   - A NaN result is the canonical NaN (even for n = 1, since the division
//     is arithmetic); ±Inf / n = ±Inf; the sign of zero is kept.
//   - i32, i64 and u8: the exact quotient truncated toward zero (Go's /),
//     so -7 / 2 = -3; for u8 that is the floor. Nothing can overflow, as
//     n >= 1.
func DivideBytes(dt DType, dst []byte, n int) error {
	if err := checkBytes("divide", dt, dst); err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("hw: divide %s: %w: divisor %d < 1", dt, ErrBadArgument, n)
	}
	switch dt {
	case F32:
		q := float32(n)
		for i := 0; i+4 <= len(dst); i += 4 {
			putF32(dst[i:], float32(getF32(dst[i:])/q))
		}
	case F64:
		q := float64(n)
		for i := 0; i+8 <= len(dst); i += 8 {
			putF64(dst[i:], float64(getF64(dst[i:])/q))
		}
	case F16:
		divideF16(dst, float32(n))
	case BF16:
		q := float32(n)
		for i := 0; i+2 <= len(dst); i += 2 {
			le.PutUint16(dst[i:], roundBF16(float32(getBF16(dst[i:])/q)))
		}
	case I32:
		q := int64(n)
		for i := 0; i+4 <= len(dst); i += 4 {
			le.PutUint32(dst[i:], uint32(int32(int64(int32(le.Uint32(dst[i:])))/q)))
		}
	case I64:
		q := int64(n)
		for i := 0; i+8 <= len(dst); i += 8 {
			le.PutUint64(dst[i:], uint64(int64(le.Uint64(dst[i:]))/q))
		}
	case U8:
		q := uint(n)
		for i := range dst {
			dst[i] = uint8(uint(dst[i]) / q)
		}
	}
	return nil
}

// Element access. put* canonicalise NaN (rule 3); round* round float32 to
// the 16-bit formats and canonicalise NaN.

func getF32(b []byte) float32  { return math.Float32frombits(le.Uint32(b)) }
func getF64(b []byte) float64  { return math.Float64frombits(le.Uint64(b)) }
func getBF16(b []byte) float32 { return math.Float32frombits(uint32(le.Uint16(b)) << 16) }

func putF32(b []byte, r float32) {
	u := math.Float32bits(r)
	if r != r {
		u = f32QuietNaN
	}
	le.PutUint32(b, u)
}

func putF64(b []byte, r float64) {
	u := math.Float64bits(r)
	if r != r {
		u = f64QuietNaN
	}
	le.PutUint64(b, u)
}

func roundF16(r float32) uint16 {
	if r != r {
		return f16QuietNaN
	}
	return f16FromF32Bits(math.Float32bits(r))
}

func roundBF16(r float32) uint16 {
	if r != r {
		return bf16QuietNaN
	}
	return bf16FromF32Bits(math.Float32bits(r))
}

// Min and Max on float bit patterns (rule 5). key maps a sign-magnitude
// pattern to an unsigned key in the order of the values, with −0 just below
// +0; it is applied only to non-NaN patterns.

func key16(u uint16) uint16 {
	if u&0x8000 != 0 {
		return ^u
	}
	return u | 0x8000
}

func key32(u uint32) uint32 {
	if u&0x80000000 != 0 {
		return ^u
	}
	return u | 0x80000000
}

func key64(u uint64) uint64 {
	if u&(1<<63) != 0 {
		return ^u
	}
	return u | 1<<63
}

// minMax16 returns min(a, b) (max when isMax) of two f16 or bf16 patterns;
// inf is the dtype's +Inf pattern (a larger magnitude is NaN) and nan its
// canonical NaN.
func minMax16(a, b uint16, isMax bool, inf, nan uint16) uint16 {
	if a&0x7FFF > inf || b&0x7FFF > inf {
		return nan
	}
	if ka, kb := key16(a), key16(b); kb < ka && !isMax || kb > ka && isMax {
		return b
	}
	return a
}

func minMax32(a, b uint32, isMax bool) uint32 {
	if a&0x7FFFFFFF > 0x7F800000 || b&0x7FFFFFFF > 0x7F800000 {
		return f32QuietNaN
	}
	if ka, kb := key32(a), key32(b); kb < ka && !isMax || kb > ka && isMax {
		return b
	}
	return a
}

func minMax64(a, b uint64, isMax bool) uint64 {
	const inf = 0x7FF0000000000000
	if a&(1<<63-1) > inf || b&(1<<63-1) > inf {
		return f64QuietNaN
	}
	if ka, kb := key64(a), key64(b); kb < ka && !isMax || kb > ka && isMax {
		return b
	}
	return a
}

// The loops below are the simulator's data path: one loop per dtype and
// op, with the op chosen outside the loop and no allocation.

func reduceF32(op ReduceOp, d, s []byte) {
	s = s[:len(d)]
	switch op {
	case Sum:
		for i := 0; i+4 <= len(d); i += 4 {
			putF32(d[i:], float32(getF32(d[i:])+getF32(s[i:])))
		}
	case Prod:
		for i := 0; i+4 <= len(d); i += 4 {
			putF32(d[i:], float32(getF32(d[i:])*getF32(s[i:])))
		}
	case Min, Max:
		isMax := op == Max
		for i := 0; i+4 <= len(d); i += 4 {
			le.PutUint32(d[i:], minMax32(le.Uint32(d[i:]), le.Uint32(s[i:]), isMax))
		}
	}
}

func reduceF64(op ReduceOp, d, s []byte) {
	s = s[:len(d)]
	switch op {
	case Sum:
		for i := 0; i+8 <= len(d); i += 8 {
			putF64(d[i:], float64(getF64(d[i:])+getF64(s[i:])))
		}
	case Prod:
		for i := 0; i+8 <= len(d); i += 8 {
			putF64(d[i:], float64(getF64(d[i:])*getF64(s[i:])))
		}
	case Min, Max:
		isMax := op == Max
		for i := 0; i+8 <= len(d); i += 8 {
			le.PutUint64(d[i:], minMax64(le.Uint64(d[i:]), le.Uint64(s[i:]), isMax))
		}
	}
}

func reduceBF16(op ReduceOp, d, s []byte) {
	s = s[:len(d)]
	switch op {
	case Sum:
		for i := 0; i+2 <= len(d); i += 2 {
			le.PutUint16(d[i:], roundBF16(float32(getBF16(d[i:])+getBF16(s[i:]))))
		}
	case Prod:
		for i := 0; i+2 <= len(d); i += 2 {
			le.PutUint16(d[i:], roundBF16(float32(getBF16(d[i:])*getBF16(s[i:]))))
		}
	case Min, Max:
		isMax := op == Max
		for i := 0; i+2 <= len(d); i += 2 {
			le.PutUint16(d[i:], minMax16(le.Uint16(d[i:]), le.Uint16(s[i:]), isMax, 0x7F80, bf16QuietNaN))
		}
	}
}

// f16 Sum, Prod and divide work on blocks: widen a block of each operand to
// float32, run a plain float32 loop, round the block back. The widening and
// rounding loops inline the common (normal) case of f32FromF16Bits and
// f16FromF32Bits and call them for the rest. This measured faster than one
// element at a time, which pays two calls per element; bf16, whose
// conversions inline, goes one element at a time.

const f16Block = 256 // elements per block

func reduceF16(op ReduceOp, d, s []byte) {
	s = s[:len(d)]
	if op == Min || op == Max {
		isMax := op == Max
		for i := 0; i+2 <= len(d); i += 2 {
			le.PutUint16(d[i:], minMax16(le.Uint16(d[i:]), le.Uint16(s[i:]), isMax, f16Inf, f16QuietNaN))
		}
		return
	}
	var xb, yb [f16Block]float32
	for len(d) > 0 {
		n := min(len(d)/2, f16Block)
		x, y := xb[:n], yb[:n]
		widenF16s(x, d)
		widenF16s(y, s)
		if op == Sum {
			for i := range x {
				x[i] = float32(x[i] + y[i])
			}
		} else {
			for i := range x {
				x[i] = float32(x[i] * y[i])
			}
		}
		roundF16s(d, x)
		d, s = d[2*n:], s[2*n:]
	}
}

// divideF16 divides f16 elements by q.
func divideF16(d []byte, q float32) {
	var xb [f16Block]float32
	for len(d) > 0 {
		n := min(len(d)/2, f16Block)
		x := xb[:n]
		widenF16s(x, d)
		for i := range x {
			x[i] = float32(x[i] / q)
		}
		roundF16s(d, x)
		d = d[2*n:]
	}
}

// widenF16s widens the first len(dst) f16 elements of src.
func widenF16s(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		h := le.Uint16(src[2*i:])
		u := uint32(h&0x8000)<<16 | (uint32(h&0x7FFF)+0x1C000)<<13 // normal case
		if e := h & 0x7C00; e == 0 || e == 0x7C00 {
			u = f32FromF16Bits(h)
		}
		dst[i] = math.Float32frombits(u)
	}
}

// roundF16s rounds src to f16 into dst, canonicalising NaN (roundF16).
func roundF16s(dst []byte, src []float32) {
	dst = dst[:2*len(src)]
	for i, r := range src {
		u := math.Float32bits(r)
		var h uint16
		if a := u & 0x7FFFFFFF; a-0x38800000 < 0x477FF000-0x38800000 {
			// Normal case of f16FromF32Bits: 2^-14 <= |r| < 65520.
			a += 0xFFF + (a>>13)&1
			h = uint16(u>>16)&0x8000 | uint16((a-0x38000000)>>13)
		} else {
			h = roundF16(r)
		}
		le.PutUint16(dst[2*i:], h)
	}
}

// Integer Sum and Prod wrap, and the low n bits of a two's complement sum or
// product do not depend on signedness, so they run on unsigned values.

func reduceI32(op ReduceOp, d, s []byte) {
	s = s[:len(d)]
	switch op {
	case Sum:
		for i := 0; i+4 <= len(d); i += 4 {
			le.PutUint32(d[i:], le.Uint32(d[i:])+le.Uint32(s[i:]))
		}
	case Prod:
		for i := 0; i+4 <= len(d); i += 4 {
			le.PutUint32(d[i:], le.Uint32(d[i:])*le.Uint32(s[i:]))
		}
	case Min:
		for i := 0; i+4 <= len(d); i += 4 {
			le.PutUint32(d[i:], uint32(min(int32(le.Uint32(d[i:])), int32(le.Uint32(s[i:])))))
		}
	case Max:
		for i := 0; i+4 <= len(d); i += 4 {
			le.PutUint32(d[i:], uint32(max(int32(le.Uint32(d[i:])), int32(le.Uint32(s[i:])))))
		}
	}
}

func reduceI64(op ReduceOp, d, s []byte) {
	s = s[:len(d)]
	switch op {
	case Sum:
		for i := 0; i+8 <= len(d); i += 8 {
			le.PutUint64(d[i:], le.Uint64(d[i:])+le.Uint64(s[i:]))
		}
	case Prod:
		for i := 0; i+8 <= len(d); i += 8 {
			le.PutUint64(d[i:], le.Uint64(d[i:])*le.Uint64(s[i:]))
		}
	case Min:
		for i := 0; i+8 <= len(d); i += 8 {
			le.PutUint64(d[i:], uint64(min(int64(le.Uint64(d[i:])), int64(le.Uint64(s[i:])))))
		}
	case Max:
		for i := 0; i+8 <= len(d); i += 8 {
			le.PutUint64(d[i:], uint64(max(int64(le.Uint64(d[i:])), int64(le.Uint64(s[i:])))))
		}
	}
}

func reduceU8(op ReduceOp, d, s []byte) {
	s = s[:len(d)]
	switch op {
	case Sum:
		for i := range d {
			d[i] += s[i]
		}
	case Prod:
		for i := range d {
			d[i] *= s[i]
		}
	case Min:
		for i := range d {
			d[i] = min(d[i], s[i])
		}
	case Max:
		for i := range d {
			d[i] = max(d[i], s[i])
		}
	}
}
