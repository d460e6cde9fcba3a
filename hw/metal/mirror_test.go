package metal

// A Go port of kernels.metal, function for function, in the same order of
// conversions, operations and selects, with the same names in Go's case
// (f32_sum is f32Sum). Nothing on this machine can run MSL, so this port is
// what the tests check against hw.ReduceBytes and hw.DivideBytes on every
// f16 and bf16 bit pattern; the CPU fake of the GPU runs it as its
// kernels, so the scheduler's tests exercise it too. Keep it parallel to
// the MSL: a change to one is a change to both.
//
// The hardware operations the MSL relies on are modelled here
// independently of hw's codecs:
//   - float + float, float * float and precise::divide: Go's float32
//     arithmetic, one IEEE operation rounded to nearest even, subnormals
//     kept (what MSL promises with fast math off; see the package doc);
//   - half -> float: decoded from the bits with math.Ldexp (halfToFloat);
//   - float -> half: IEEE round to nearest even, computed on float64 by
//     rounding the value on its binade's grid (floatToHalf), not with
//     hw.Float16FromFloat32.

import (
	"encoding/binary"
	"math"
)

var le = binary.LittleEndian

func asFloat(u uint32) float32 { return math.Float32frombits(u) }
func asUint(f float32) uint32  { return math.Float32bits(f) }

// ---- NaN (rule 3) ----

func nan32(u uint32) bool { return u&0x7FFFFFFF > 0x7F800000 }

// ---- f32 (rule 1) ----

func f32Canon(r float32) uint32 {
	u := asUint(r)
	if nan32(u) {
		return 0x7FC00000
	}
	return u
}

func f32Sum(a, b uint32) uint32 {
	r := float32(asFloat(a) + asFloat(b))
	return f32Canon(r)
}

func f32Prod(a, b uint32) uint32 {
	r := float32(asFloat(a) * asFloat(b))
	return f32Canon(r)
}

func f32Div(a uint32, q float32) uint32 {
	r := float32(asFloat(a) / q) // precise::divide
	return f32Canon(r)
}

// ---- min and max on bit patterns (rule 5) ----

func key32(u uint32) uint32 {
	if u&0x80000000 != 0 {
		return ^u
	}
	return u | 0x80000000
}

func f32Min(a, b uint32) uint32 {
	r := a
	if key32(b) < key32(a) {
		r = b
	}
	if nan32(a) || nan32(b) {
		return 0x7FC00000
	}
	return r
}

func f32Max(a, b uint32) uint32 {
	r := a
	if key32(b) > key32(a) {
		r = b
	}
	if nan32(a) || nan32(b) {
		return 0x7FC00000
	}
	return r
}

func key16(u uint16) uint16 {
	if u&0x8000 != 0 {
		return ^u
	}
	return u | 0x8000
}

func min16(a, b, inf, qnan uint16) uint16 {
	r := a
	if key16(b) < key16(a) {
		r = b
	}
	if a&0x7FFF > inf || b&0x7FFF > inf {
		return qnan
	}
	return r
}

func max16(a, b, inf, qnan uint16) uint16 {
	r := a
	if key16(b) > key16(a) {
		r = b
	}
	if a&0x7FFF > inf || b&0x7FFF > inf {
		return qnan
	}
	return r
}

// ---- f16 (rule 2) ----

func f16Widen(h uint16) float32 { return halfToFloat(h) }

func f16Round(r float32) uint16 {
	u := asUint(r)
	if nan32(u) {
		return 0x7E00
	}
	return floatToHalf(r)
}

func f16Sum(a, b uint16) uint16 {
	r := float32(f16Widen(a) + f16Widen(b))
	return f16Round(r)
}

func f16Prod(a, b uint16) uint16 {
	r := float32(f16Widen(a) * f16Widen(b))
	return f16Round(r)
}

func f16Div(a uint16, q float32) uint16 {
	r := float32(f16Widen(a) / q)
	return f16Round(r)
}

func f16Min(a, b uint16) uint16 { return min16(a, b, 0x7C00, 0x7E00) }
func f16Max(a, b uint16) uint16 { return max16(a, b, 0x7C00, 0x7E00) }

// ---- bf16 (rule 2) ----

func bf16Widen(h uint16) float32 { return asFloat(uint32(h) << 16) }

func bf16Round(r float32) uint16 {
	u := asUint(r)
	rounded := (u + 0x7FFF + ((u >> 16) & 1)) >> 16
	if nan32(u) {
		return 0x7FC0
	}
	return uint16(rounded)
}

func bf16Sum(a, b uint16) uint16 {
	r := float32(bf16Widen(a) + bf16Widen(b))
	return bf16Round(r)
}

func bf16Prod(a, b uint16) uint16 {
	r := float32(bf16Widen(a) * bf16Widen(b))
	return bf16Round(r)
}

func bf16Div(a uint16, q float32) uint16 {
	r := float32(bf16Widen(a) / q)
	return bf16Round(r)
}

func bf16Min(a, b uint16) uint16 { return min16(a, b, 0x7F80, 0x7FC0) }
func bf16Max(a, b uint16) uint16 { return max16(a, b, 0x7F80, 0x7FC0) }

// ---- integers (rule 6) ----

func i32Sum(a, b uint32) uint32  { return a + b }
func i32Prod(a, b uint32) uint32 { return a * b }

func i32Min(a, b uint32) uint32 {
	x, y := int32(a), int32(b)
	if y < x {
		return uint32(y)
	}
	return uint32(x)
}

func i32Max(a, b uint32) uint32 {
	x, y := int32(a), int32(b)
	if y > x {
		return uint32(y)
	}
	return uint32(x)
}

func i32Div(a uint32, q int64) uint32 { return uint32(int32(int64(int32(a)) / q)) }

func i64Sum(a, b uint64) uint64  { return a + b }
func i64Prod(a, b uint64) uint64 { return a * b }

func i64Min(a, b uint64) uint64 {
	x, y := int64(a), int64(b)
	if y < x {
		return uint64(y)
	}
	return uint64(x)
}

func i64Max(a, b uint64) uint64 {
	x, y := int64(a), int64(b)
	if y > x {
		return uint64(y)
	}
	return uint64(x)
}

func i64Div(a uint64, q int64) uint64 { return uint64(int64(a) / q) }

func u8Sum(a, b uint8) uint8  { return uint8(uint32(a) + uint32(b)) }
func u8Prod(a, b uint8) uint8 { return uint8(uint32(a) * uint32(b)) }

func u8Min(a, b uint8) uint8 {
	if b < a {
		return b
	}
	return a
}

func u8Max(a, b uint8) uint8 {
	if b > a {
		return b
	}
	return a
}

func u8Div(a uint8, q uint64) uint8 { return uint8(uint64(a) / q) }

// ---- the hardware conversions, modelled independently ----

// halfToFloat is MSL's float(half): exact.
func halfToFloat(h uint16) float32 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10)&0x1F, float64(h&0x3FF)
	switch e {
	case 0x1F:
		if m != 0 {
			return float32(math.NaN())
		}
		return float32(math.Inf(int(sign)))
	case 0:
		return float32(sign * math.Ldexp(m, -24))
	}
	return float32(sign * math.Ldexp(1024+m, e-25))
}

// floatToHalf is MSL's half(float) for a non-NaN value: IEEE round to
// nearest even onto the binary16 grid, overflowing to Inf at 65520.
func floatToHalf(r float32) uint16 {
	x := float64(r)
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	switch {
	case math.IsInf(x, 0):
		return sign | 0x7C00
	case x == 0:
		return sign
	}
	_, e := math.Frexp(x) // x = f·2^e, f in [0.5, 1)
	exp := max(e-1, -14)  // subnormals share the grid of 2^-14's binade
	q := math.Ldexp(1, exp-10)
	v := math.RoundToEven(x/q) * q // exact: q is a power of two
	// Rounded up to 65536: past the largest finite half.
	if v > 65504 {
		return sign | 0x7C00
	}
	if v < 0x1p-14 {
		return sign | uint16(v/0x1p-24)
	}
	_, e = math.Frexp(v)
	return sign | uint16(e-1+15)<<10 | uint16(math.Ldexp(v, 10-(e-1))-1024)
}

// ---- kernels ----

// mirrorKernel is one kernel of kernels.metal: width is the element size,
// run does what the kernel's threads do together, for whole buffers d
// and s and the parameters p.
type mirrorKernel struct {
	width int
	run   func(d, s []byte, p kernelParams)
}

func reduce32(fn func(a, b uint32) uint32) mirrorKernel {
	return mirrorKernel{4, func(d, s []byte, p kernelParams) {
		for i := range p.N {
			x, y := d[4*(p.DOff+i):], s[4*(p.SOff+i):]
			le.PutUint32(x, fn(le.Uint32(x), le.Uint32(y)))
		}
	}}
}

func reduce16(fn func(a, b uint16) uint16) mirrorKernel {
	return mirrorKernel{2, func(d, s []byte, p kernelParams) {
		for i := range p.N {
			x, y := d[2*(p.DOff+i):], s[2*(p.SOff+i):]
			le.PutUint16(x, fn(le.Uint16(x), le.Uint16(y)))
		}
	}}
}

func reduce64(fn func(a, b uint64) uint64) mirrorKernel {
	return mirrorKernel{8, func(d, s []byte, p kernelParams) {
		for i := range p.N {
			x, y := d[8*(p.DOff+i):], s[8*(p.SOff+i):]
			le.PutUint64(x, fn(le.Uint64(x), le.Uint64(y)))
		}
	}}
}

func reduce8(fn func(a, b uint8) uint8) mirrorKernel {
	return mirrorKernel{1, func(d, s []byte, p kernelParams) {
		for i := range p.N {
			d[p.DOff+i] = fn(d[p.DOff+i], s[p.SOff+i])
		}
	}}
}

func divide32(fn func(a uint32, p kernelParams) uint32) mirrorKernel {
	return mirrorKernel{4, func(d, _ []byte, p kernelParams) {
		for i := range p.N {
			x := d[4*(p.DOff+i):]
			le.PutUint32(x, fn(le.Uint32(x), p))
		}
	}}
}

func divide16(fn func(a uint16, p kernelParams) uint16) mirrorKernel {
	return mirrorKernel{2, func(d, _ []byte, p kernelParams) {
		for i := range p.N {
			x := d[2*(p.DOff+i):]
			le.PutUint16(x, fn(le.Uint16(x), p))
		}
	}}
}

func copyN(width int) mirrorKernel {
	return mirrorKernel{width, func(d, s []byte, p kernelParams) {
		w := uint32(width)
		copy(d[w*p.DOff:w*(p.DOff+p.N)], s[w*p.SOff:w*(p.SOff+p.N)])
	}}
}

// mirrorKernels is kernels.metal's list of kernels, in its order.
var mirrorKernels = map[string]mirrorKernel{
	"reduce_sum_f32":   reduce32(f32Sum),
	"reduce_prod_f32":  reduce32(f32Prod),
	"reduce_min_f32":   reduce32(f32Min),
	"reduce_max_f32":   reduce32(f32Max),
	"reduce_sum_f16":   reduce16(f16Sum),
	"reduce_prod_f16":  reduce16(f16Prod),
	"reduce_min_f16":   reduce16(f16Min),
	"reduce_max_f16":   reduce16(f16Max),
	"reduce_sum_bf16":  reduce16(bf16Sum),
	"reduce_prod_bf16": reduce16(bf16Prod),
	"reduce_min_bf16":  reduce16(bf16Min),
	"reduce_max_bf16":  reduce16(bf16Max),
	"reduce_sum_i32":   reduce32(i32Sum),
	"reduce_prod_i32":  reduce32(i32Prod),
	"reduce_min_i32":   reduce32(i32Min),
	"reduce_max_i32":   reduce32(i32Max),
	"reduce_sum_i64":   reduce64(i64Sum),
	"reduce_prod_i64":  reduce64(i64Prod),
	"reduce_min_i64":   reduce64(i64Min),
	"reduce_max_i64":   reduce64(i64Max),
	"reduce_sum_u8":    reduce8(u8Sum),
	"reduce_prod_u8":   reduce8(u8Prod),
	"reduce_min_u8":    reduce8(u8Min),
	"reduce_max_u8":    reduce8(u8Max),

	"divide_f32":  divide32(func(a uint32, p kernelParams) uint32 { return f32Div(a, asFloat(p.QF)) }),
	"divide_f16":  divide16(func(a uint16, p kernelParams) uint16 { return f16Div(a, asFloat(p.QF)) }),
	"divide_bf16": divide16(func(a uint16, p kernelParams) uint16 { return bf16Div(a, asFloat(p.QF)) }),
	"divide_i32":  divide32(func(a uint32, p kernelParams) uint32 { return i32Div(a, int64(p.QI)) }),
	"divide_i64": {8, func(d, _ []byte, p kernelParams) {
		for i := range p.N {
			x := d[8*(p.DOff+i):]
			le.PutUint64(x, i64Div(le.Uint64(x), int64(p.QI)))
		}
	}},
	"divide_u8": {1, func(d, _ []byte, p kernelParams) {
		for i := range p.N {
			d[p.DOff+i] = u8Div(d[p.DOff+i], p.QI)
		}
	}},

	"copy_b8":  copyN(1),
	"copy_b16": copyN(2),
	"copy_b32": copyN(4),
	"copy_b64": copyN(8),
}
