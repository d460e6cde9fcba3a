package hw

import (
	"math"
	"math/bits"
)

// Float16 holds the bits of an IEEE 754 binary16 number: 1 sign bit, 5
// exponent bits (bias 15) and 10 fraction bits. It has 11 significant bits,
// a largest finite value of 65504, a smallest normal of 2^-14 and a smallest
// subnormal of 2^-24.
//
// Conversions to Float16 (Float16FromFloat32, Float16FromFloat64) round to
// nearest, ties to even, with a single rounding from the exact input:
//
//   - ±0 stays ±0; inputs of magnitude at most 2^-25, half the smallest
//     subnormal (2^-25 itself is a tie and goes to the even 0), become ±0
//     with the input's sign.
//   - Subnormal results are rounded on the fixed grid of 2^-24; a value that
//     rounds up past the largest subnormal becomes the smallest normal, and
//     one that rounds up past a binade's top moves to the next exponent.
//   - Values of magnitude 65520 or more (the midpoint between 65504 and
//     2^16; the tie goes to the even pattern, which is Inf) become ±Inf;
//     anything just below, such as 65519.99, becomes ±65504. ±Inf stays
//     ±Inf.
//   - NaN keeps its sign and the top 10 bits of its payload (the fraction
//     bits just below the exponent), and the quiet bit (0x0200) is set, so a
//     NaN never turns into Inf. A default quiet NaN (math.NaN(), or float32
//     0x7FC00000) becomes 0x7E00.
//
// Conversions from Float16 (Float32, Float64) are exact, subnormals
// included; a NaN keeps sign and payload bit for bit (a signalling NaN stays
// signalling).
//
// Arithmetic on Float16 is not done here but by ReduceBytes and DivideBytes,
// which canonicalise NaN results.
type Float16 uint16

// BFloat16 holds the bits of a bfloat16 number: the top 16 bits of an IEEE
// 754 binary32, i.e. 1 sign bit, 8 exponent bits (bias 127) and 7 fraction
// bits. It has 8 significant bits, the exponent range of float32, a largest
// finite value of (2 - 2^-7) × 2^127 (0x7F7F) and a smallest subnormal of
// 2^-133 (0x0001).
//
// Conversions to BFloat16 follow the same rules as Float16's: round to
// nearest, ties to even, in a single rounding (so float32 bits 0x3F808000
// give 0x3F80 and 0x3F818000 give 0x3F82); subnormals on the grid of
// 2^-133; overflow to ±Inf once the magnitude reaches the midpoint
// (2 - 2^-8) × 2^127 between the largest finite value and 2^128 (so the
// largest float32 becomes Inf); NaN keeps its sign and the top 7 payload
// bits and gets the quiet bit (0x0040), so float32 0x7FC00000 becomes
// 0x7FC0. This is not truncation: truncating float32 bits is a different
// (and biased) rounding.
//
// Conversions from BFloat16 are exact (bits << 16 as a float32).
type BFloat16 uint16

// Float16FromFloat32 rounds f to the nearest Float16, ties to even (see
// Float16 for the exact rules). It gives the same bits as
// Float16FromFloat64(float64(f)), since widening to float64 is exact.
func Float16FromFloat32(f float32) Float16 { return Float16(f16FromF32Bits(math.Float32bits(f))) }

// Float16FromFloat64 rounds f to the nearest Float16, ties to even, with a
// single rounding from f (never via float32; see Float16 for the rules).
func Float16FromFloat64(f float64) Float16 {
	return Float16(narrowF64Bits(math.Float64bits(f), 5, 10))
}

// Float32 returns h's value exactly.
func (h Float16) Float32() float32 { return math.Float32frombits(f32FromF16Bits(uint16(h))) }

// Float64 returns h's value exactly.
func (h Float16) Float64() float64 {
	return math.Float64frombits(f64FromF32Bits(f32FromF16Bits(uint16(h))))
}

// BFloat16FromFloat32 rounds f to the nearest BFloat16, ties to even (see
// BFloat16 for the exact rules).
func BFloat16FromFloat32(f float32) BFloat16 { return BFloat16(bf16FromF32Bits(math.Float32bits(f))) }

// BFloat16FromFloat64 rounds f to the nearest BFloat16, ties to even, with a
// single rounding from f (never via float32, which could round twice).
func BFloat16FromFloat64(f float64) BFloat16 {
	return BFloat16(narrowF64Bits(math.Float64bits(f), 8, 7))
}

// Float32 returns h's value exactly.
func (h BFloat16) Float32() float32 { return math.Float32frombits(uint32(h) << 16) }

// Float64 returns h's value exactly.
func (h BFloat16) Float64() float64 { return math.Float64frombits(f64FromF32Bits(uint32(h) << 16)) }

// Bit patterns used by the codecs and by the arithmetic.
const (
	f16Inf       = 0x7C00             // +Inf
	f16QuietNaN  = 0x7E00             // canonical quiet NaN
	f16QuietBit  = 0x0200             // the top fraction bit
	bf16QuietNaN = 0x7FC0             // canonical quiet NaN
	bf16QuietBit = 0x0040             // the top fraction bit
	f32QuietNaN  = 0x7FC00000         // canonical quiet NaN
	f64QuietNaN  = 0x7FF8000000000000 // canonical quiet NaN
)

// f16FromF32Bits rounds the float32 with bits u to binary16, nearest even.
// It is the fast path of narrowF64Bits(widened u, 5, 10) and gives the same
// bits for every input (the tests can check all 2^32 of them).
func f16FromF32Bits(u uint32) uint16 {
	sign := uint16(u>>16) & 0x8000
	a := u & 0x7FFFFFFF
	switch {
	case a > 0x7F800000: // NaN: keep the top 10 payload bits, set quiet
		return sign | f16Inf | f16QuietBit | uint16(a>>13)&0x3FF
	case a >= 0x477FF000: // |f| >= 65520, or Inf
		return sign | f16Inf
	case a >= 0x38800000: // |f| >= 2^-14: normal result
		// Round the 13 dropped bits to nearest even; a carry runs into
		// the exponent. Then rebias from 127 to 15 (112 << 23).
		a += 0xFFF + (a>>13)&1
		return sign | uint16((a-0x38000000)>>13)
	case a <= 0x33000000: // |f| <= 2^-25: rounds to zero (2^-25 is a tie)
		return sign
	default: // subnormal result, a multiple of 2^-24
		e := a >> 23 // 102..112
		sig := a&0x7FFFFF | 0x800000
		shift := 126 - e // 14..24
		q := sig >> shift
		rem := sig & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && q&1 == 1 {
			q++
		}
		return sign | uint16(q)
	}
}

// bf16FromF32Bits rounds the float32 with bits u to bfloat16, nearest even.
// Both formats share the exponent layout, so rounding the 16 dropped bits of
// the pattern handles subnormals, the carry into the next binade and the
// overflow of the largest values to Inf.
func bf16FromF32Bits(u uint32) uint16 {
	if u&0x7FFFFFFF > 0x7F800000 { // NaN: keep the top 7 payload bits, set quiet
		return uint16(u>>16) | bf16QuietBit
	}
	return uint16((u + 0x7FFF + (u>>16)&1) >> 16)
}

// f32FromF16Bits widens binary16 bits to float32 bits exactly. NaN payloads
// are kept bit for bit.
func f32FromF16Bits(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1F
	m := uint32(h & 0x3FF)
	switch e {
	case 0x1F: // Inf or NaN
		return sign | 0x7F800000 | m<<13
	case 0:
		if m == 0 {
			return sign
		}
		// Subnormal m × 2^-24: normalise. p is the position of m's
		// leading one (0..9), so the value is 1.f × 2^(p-24).
		p := uint32(31 - bits.LeadingZeros32(m))
		return sign | (p+103)<<23 | (m<<(23-p))&0x7FFFFF
	default:
		return sign | (e+112)<<23 | m<<13
	}
}

// f64FromF32Bits widens float32 bits to float64 bits exactly, keeping NaN
// payloads bit for bit (a hardware conversion may set the quiet bit).
func f64FromF32Bits(u uint32) uint64 {
	if u&0x7FFFFFFF > 0x7F800000 {
		return uint64(u>>31)<<63 | 0x7FF<<52 | uint64(u&0x7FFFFF)<<29
	}
	return math.Float64bits(float64(math.Float32frombits(u)))
}

// narrowF64Bits rounds the float64 with bits x to the binary format with
// ebits exponent bits and mbits fraction bits (5/10 for f16, 8/7 for bf16,
// 8/23 for f32), to nearest, ties to even, in one rounding. It returns the
// result's bits in the low 1+ebits+mbits bits. NaN keeps its sign and top
// mbits payload bits and gets the quiet bit.
func narrowF64Bits(x uint64, ebits, mbits uint) uint64 {
	sign := x >> 63 << (ebits + mbits)
	exp := int(x>>52) & 0x7FF
	frac := x & (1<<52 - 1)
	inf := sign | (1<<ebits-1)<<mbits
	switch exp {
	case 0x7FF:
		if frac == 0 {
			return inf
		}
		return inf | 1<<(mbits-1) | frac>>(52-mbits)
	case 0:
		// Zero or a float64 subnormal (< 2^-1022): below half the
		// smallest subnormal of every narrower format.
		return sign
	}
	bias := 1<<(ebits-1) - 1
	e := exp - 1023
	if e > bias {
		return inf
	}
	emin := 1 - bias
	// The result's quantum is 2^(base-mbits); sig × 2^(e-52) is the value.
	sig := frac | 1<<52
	shift := 52 - mbits
	base := e
	if e < emin {
		shift += uint(emin - e)
		base = emin
	}
	if shift > 53 { // value < 2^(base-mbits-1): less than half a quantum
		return sign
	}
	q := sig >> shift
	rem := sig & (1<<shift - 1)
	half := uint64(1) << (shift - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	// For a normal result q is in [2^mbits, 2^(mbits+1)] and the encoding
	// is (base+bias)<<mbits + q - 2^mbits = (base-emin)<<mbits + q; for a
	// subnormal one base = emin and the encoding is q. A carry out of q
	// moves into the exponent field and, at the top, gives exactly Inf.
	return sign | (uint64(base-emin)<<mbits + q)
}
