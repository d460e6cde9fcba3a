package verify

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// Defined reports whether the op of s defines rank r's output: gather and
// reduce only on the root, barrier on none, every other op on every rank.
func Defined(s ops.Spec, r int) bool {
	if r < 0 || r >= s.Ranks {
		return false // no rank of s
	}
	switch s.Op {
	case ops.Gather, ops.Reduce:
		return r == s.Root
	case ops.Barrier:
		return false
	}
	return true
}

// FormatElems prints little-endian elements of dt as values, with the bits
// of NaNs and float zeros, whose decimal hides them: "[1.5 NaN(0x7fc00000)]".
func FormatElems(dt hw.DType, b []byte) string {
	if !dt.Valid() {
		return fmt.Sprintf("[%d bytes of %v]", len(b), dt)
	}
	var parts []string
	for i := 0; i+dt.Size() <= len(b); i += dt.Size() {
		parts = append(parts, fmtElem(dt, leBits(b[i:i+dt.Size()])))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// ElemText prints one element's value, given its bits: integers in
// decimal, floats as the shortest decimal (f16 and bf16 widen exactly to
// float32).
func ElemText(dt hw.DType, bits uint64) string {
	switch dt {
	case hw.I32:
		return strconv.FormatInt(int64(int32(bits)), 10)
	case hw.I64:
		return strconv.FormatInt(int64(bits), 10)
	case hw.U8:
		return strconv.FormatUint(bits&0xFF, 10)
	}
	return strconv.FormatFloat(floatValue(dt, bits), 'g', -1, cond(dt == hw.F64, 64, 32))
}

// fmtElem is elemText with the bits of NaNs and zeros.
func fmtElem(dt hw.DType, bits uint64) string {
	s := ElemText(dt, bits)
	if !dt.IsFloat() {
		return s
	}
	if v := floatValue(dt, bits); math.IsNaN(v) || v == 0 {
		s += fmt.Sprintf("(0x%0*x)", 2*dt.Size(), bits)
	}
	return s
}

// floatValue is a float element's exact value.
func floatValue(dt hw.DType, bits uint64) float64 {
	switch dt {
	case hw.F32:
		return float64(math.Float32frombits(uint32(bits)))
	case hw.F16:
		return hw.Float16(bits).Float64()
	case hw.BF16:
		return hw.BFloat16(bits).Float64()
	}
	return math.Float64frombits(bits)
}

// floatFmt describes an IEEE-style binary format.
type floatFmt struct{ ebits, mbits uint }

func floatFormat(dt hw.DType) floatFmt {
	switch dt {
	case hw.F16:
		return floatFmt{5, 10}
	case hw.BF16:
		return floatFmt{8, 7}
	case hw.F32:
		return floatFmt{8, 23}
	case hw.F64:
		return floatFmt{11, 52}
	}
	return floatFmt{}
}

func (f floatFmt) sign() uint64 { return 1 << (f.ebits + f.mbits) }
func (f floatFmt) inf() uint64  { return (1<<f.ebits - 1) << f.mbits }

// canonicalNaN is the quiet NaN that arithmetic stores (hw rule 3).
func (f floatFmt) canonicalNaN() uint64 { return f.inf() | 1<<(f.mbits-1) }

// appendElem appends the low dt.Size() bytes of bits, little-endian.
func appendElem(dst []byte, dt hw.DType, bits uint64) []byte {
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], bits)
	return append(dst, buf[:dt.Size()]...)
}

// elemAt is element i of a little-endian buffer of size-byte elements,
// zero-extended.
func elemAt(b []byte, i, size int) uint64 {
	switch size {
	case 1:
		return uint64(b[i])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	case 8:
		return binary.LittleEndian.Uint64(b[8*i:])
	}
	return leBits(b[i*size : (i+1)*size])
}

// leBits reads one little-endian element of up to 8 bytes, zero-extended.
func leBits(b []byte) uint64 {
	var buf [8]byte
	copy(buf[:], b)
	return binary.LittleEndian.Uint64(buf[:])
}

func cond[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}
