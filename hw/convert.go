package hw

import (
	"encoding/binary"
	"fmt"
	"math"
)

var le = binary.LittleEndian

// Element is the set of Go types that carry a DType: float32 (F32), float64
// (F64), Float16 (F16), BFloat16 (BF16), int32 (I32), int64 (I64) and uint8
// (U8).
type Element interface {
	float32 | float64 | Float16 | BFloat16 | int32 | int64 | uint8
}

// DTypeOf returns the dtype of the element type T.
func DTypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return F32
	case float64:
		return F64
	case Float16:
		return F16
	case BFloat16:
		return BF16
	case int32:
		return I32
	case int64:
		return I64
	case uint8:
		return U8
	}
	return 0 // unreachable: Element lists exactly the cases above
}

// Encode returns vals as little-endian bytes, len(vals) × DTypeOf[T]().Size()
// long. Float bits, NaN payloads included, are copied unchanged.
func Encode[T Element](vals []T) []byte {
	switch v := any(vals).(type) {
	case []float32:
		b := make([]byte, 4*len(v))
		for i, x := range v {
			le.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b
	case []float64:
		b := make([]byte, 8*len(v))
		for i, x := range v {
			le.PutUint64(b[8*i:], math.Float64bits(x))
		}
		return b
	case []Float16:
		b := make([]byte, 2*len(v))
		for i, x := range v {
			le.PutUint16(b[2*i:], uint16(x))
		}
		return b
	case []BFloat16:
		b := make([]byte, 2*len(v))
		for i, x := range v {
			le.PutUint16(b[2*i:], uint16(x))
		}
		return b
	case []int32:
		b := make([]byte, 4*len(v))
		for i, x := range v {
			le.PutUint32(b[4*i:], uint32(x))
		}
		return b
	case []int64:
		b := make([]byte, 8*len(v))
		for i, x := range v {
			le.PutUint64(b[8*i:], uint64(x))
		}
		return b
	case []uint8:
		return append([]byte(nil), v...)
	}
	return nil // unreachable
}

// Decode reads little-endian bytes as elements of T into a new slice. It
// returns an error wrapping ErrSizeMismatch if len(b) is not a multiple of
// the element size. Float bits, NaN payloads included, are kept unchanged.
func Decode[T Element](b []byte) ([]T, error) {
	dt := DTypeOf[T]()
	sz := dt.Size()
	if len(b)%sz != 0 {
		return nil, fmt.Errorf("hw: decode %s: %w: %d bytes is not a multiple of %d", dt, ErrSizeMismatch, len(b), sz)
	}
	n := len(b) / sz
	var out any
	switch dt {
	case F32:
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		out = v
	case F64:
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		out = v
	case F16:
		v := make([]Float16, n)
		for i := range v {
			v[i] = Float16(le.Uint16(b[2*i:]))
		}
		out = v
	case BF16:
		v := make([]BFloat16, n)
		for i := range v {
			v[i] = BFloat16(le.Uint16(b[2*i:]))
		}
		out = v
	case I32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(le.Uint32(b[4*i:]))
		}
		out = v
	case I64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(le.Uint64(b[8*i:]))
		}
		out = v
	case U8:
		out = append([]uint8(nil), b...)
	}
	return out.([]T), nil
}

// checkBytes checks that dt is valid and that b holds whole elements.
func checkBytes(what string, dt DType, b []byte) error {
	if !dt.Valid() {
		return fmt.Errorf("hw: %s: %w: invalid dtype %s", what, ErrBadArgument, dt)
	}
	if len(b)%dt.Size() != 0 {
		return fmt.Errorf("hw: %s %s: %w: %d bytes is not a multiple of %d", what, dt, ErrSizeMismatch, len(b), dt.Size())
	}
	return nil
}

// ToFloat64s widens the little-endian elements of dtype dt in b to float64.
// Every float dtype and i32 and u8 widen exactly (NaN payloads are kept bit
// for bit). i64 values of magnitude above 2^53 that are not representable
// in float64 are rounded to nearest even, as Go's float64(int64) does. It
// returns an error wrapping ErrBadArgument for an invalid dtype and one
// wrapping ErrSizeMismatch if len(b) is not a multiple of dt.Size().
func ToFloat64s(dt DType, b []byte) ([]float64, error) {
	if err := checkBytes("to float64", dt, b); err != nil {
		return nil, err
	}
	out := make([]float64, len(b)/dt.Size())
	for i := range out {
		var bits uint64
		switch dt {
		case F32:
			bits = f64FromF32Bits(le.Uint32(b[4*i:]))
		case F64:
			bits = le.Uint64(b[8*i:])
		case F16:
			bits = f64FromF32Bits(f32FromF16Bits(le.Uint16(b[2*i:])))
		case BF16:
			bits = f64FromF32Bits(uint32(le.Uint16(b[2*i:])) << 16)
		case I32:
			bits = math.Float64bits(float64(int32(le.Uint32(b[4*i:]))))
		case I64:
			bits = math.Float64bits(float64(int64(le.Uint64(b[8*i:]))))
		case U8:
			bits = math.Float64bits(float64(b[i]))
		}
		out[i] = math.Float64frombits(bits)
	}
	return out, nil
}

// FromFloat64s narrows vals to little-endian elements of dtype dt.
//
// Float dtypes round each value to nearest, ties to even, in a single
// rounding from the float64 (f16 and bf16 never pass through float32). ±0
// and ±Inf are kept, values beyond the largest finite number round to ±Inf
// as IEEE 754 overflow does, and NaN keeps its sign and the top payload bits
// and gets the quiet bit (see Float16). F64 copies the bits.
//
// Integer dtypes take NaN and ±Inf to 0, round every finite value toward
// zero (math.Trunc), then wrap the integer modulo 2^n (n = 32, 64 or 8) into
// two's complement, as integer arithmetic wraps: 2^31 gives i32 -2^31, -1
// gives u8 255, 300.7 gives u8 44. The wrap is exact for every finite
// float64; any finite value of magnitude 2^(n+52) or more is a multiple of
// 2^n and wraps to 0, and ±Inf, having no residue, is given that limit.
//
// It returns an error wrapping ErrBadArgument for an invalid dtype.
func FromFloat64s(dt DType, vals []float64) ([]byte, error) {
	if !dt.Valid() {
		return nil, fmt.Errorf("hw: from float64: %w: invalid dtype %s", ErrBadArgument, dt)
	}
	b := make([]byte, len(vals)*dt.Size())
	for i, v := range vals {
		x := math.Float64bits(v)
		switch dt {
		case F32:
			le.PutUint32(b[4*i:], uint32(narrowF64Bits(x, 8, 23)))
		case F64:
			le.PutUint64(b[8*i:], x)
		case F16:
			le.PutUint16(b[2*i:], uint16(narrowF64Bits(x, 5, 10)))
		case BF16:
			le.PutUint16(b[2*i:], uint16(narrowF64Bits(x, 8, 7)))
		case I32:
			le.PutUint32(b[4*i:], uint32(wrapUint64(v)))
		case I64:
			le.PutUint64(b[8*i:], wrapUint64(v))
		case U8:
			b[i] = uint8(wrapUint64(v))
		}
	}
	return b, nil
}

// wrapUint64 returns trunc(v) modulo 2^64, or 0 for NaN and ±Inf. Since
// 2^n divides 2^64, its low n bits are trunc(v) modulo 2^n.
func wrapUint64(v float64) uint64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	t := math.Trunc(v)
	if math.Abs(t) < 1<<63 {
		return uint64(int64(t)) // exact: t is an integer in int64's range
	}
	// |t| >= 2^63 is sig × 2^s with a 53-bit sig and s >= 11.
	x := math.Float64bits(t)
	s := int(x>>52&0x7FF) - 1075
	if s >= 64 {
		return 0
	}
	u := (x&(1<<52-1) | 1<<52) << s
	if t < 0 {
		u = -u
	}
	return u
}
