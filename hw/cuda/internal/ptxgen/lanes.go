package ptxgen

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

// Registers, fixed per role so the kernels read alike (ptxas allocates the
// physical registers; reusing a virtual one across lanes costs nothing):
//
//	%rd1 dst, %rd2 src, %rd3 q, %rd4 head, %rd5 nvec, %rd6 n
//	%rd13, %rd14      the dst and src address of the current vector/element
//	%r10-%r13         dst vector words (32-bit lanes), %r14-%r17 src words
//	%f1-%f4, %f5-%f8  the same as f32, for f32 arithmetic
//	%rd20-21, %rd22-23  dst and src words of 64-bit integer lanes
//	%fd1-2, %fd3-4    the same as f64, for f64 arithmetic
//	%h1,%h2 / %h3,%h4 the halves of one dst / src word (f16, bf16)
//	%r20-%r23, %f10, %f11, %rd24, %p3, %p4   temporaries of one lane
//	%f20, %fd15, %r40 the divisor as f32, f64, u32 (i32/i64 use %rd3)

// gen writes the body of one kernel.
type gen struct{ k Kernel }

// class is how a kernel holds its elements in registers.
type class uint8

const (
	clF32 class = iota // f32 arithmetic in .f32 registers
	clF64              // f64 arithmetic in .f64 registers
	clB32              // 32-bit patterns: i32, f32 min/max
	clB64              // 64-bit patterns: i64, f64 min/max
	clB16              // f16 and bf16: two per 32-bit word
	clU8               // u8 (and copy): four per 32-bit word
)

func (g gen) class() class {
	k := g.k
	minmax := k.Kind == Reduce && (k.Op == hw.Min || k.Op == hw.Max)
	switch k.DType {
	case hw.F32:
		if minmax {
			return clB32
		}
		return clF32
	case hw.F64:
		if minmax {
			return clB64
		}
		return clF64
	case hw.I32:
		return clB32
	case hw.I64:
		return clB64
	case hw.F16, hw.BF16:
		return clB16
	}
	return clU8
}

// hasSrc reports whether the kernel reads src; hasDst whether it reads dst.
func (g gen) hasSrc() bool { return g.k.Kind != Divide }
func (g gen) hasDst() bool { return g.k.Kind != Copy }

func (g gen) prologue() []string {
	if g.k.Kind != Divide {
		return nil
	}
	switch g.k.DType {
	case hw.F32, hw.F16, hw.BF16:
		return []string{"cvt.u32.u64 %r40, %rd3;", "mov.b32 %f20, %r40;"}
	case hw.F64:
		return []string{"mov.b64 %fd15, %rd3;"}
	case hw.U8:
		return []string{"cvt.u32.u64 %r40, %rd3;"}
	}
	return nil // i32, i64 divide by %rd3 as s64
}

// vector loads two 16-byte vectors (dst, src), combines them lane by lane
// and stores dst.
func (g gen) vector() []string {
	var out []string
	var dst, src []string
	var typ string
	switch g.class() {
	case clF32:
		typ, dst, src = "v4.f32", regs("%f", 1, 4), regs("%f", 5, 4)
	case clF64:
		typ, dst, src = "v2.f64", regs("%fd", 1, 2), regs("%fd", 3, 2)
	case clB64:
		typ, dst, src = "v2.u64", regs("%rd", 20, 2), regs("%rd", 22, 2)
	default:
		typ, dst, src = "v4.u32", regs("%r", 10, 4), regs("%r", 14, 4)
	}
	if g.hasDst() {
		out = append(out, fmt.Sprintf("ld.global.%s %s, [%%rd13];", typ, vec(dst)))
	}
	if g.hasSrc() {
		out = append(out, fmt.Sprintf("ld.global.%s %s, [%%rd14];", typ, vec(src)))
	}
	if g.k.Kind == Copy {
		return append(out, fmt.Sprintf("st.global.%s [%%rd13], %s;", typ, vec(src)))
	}
	for i := range dst {
		out = append(out, g.word(dst[i], src[i])...)
	}
	return append(out, fmt.Sprintf("st.global.%s [%%rd13], %s;", typ, vec(dst)))
}

// word combines one vector word of dst with the same word of src.
func (g gen) word(d, s string) []string {
	switch g.class() {
	case clB16:
		out := []string{fmt.Sprintf("mov.b32 {%%h1, %%h2}, %s;", d)}
		if g.hasSrc() {
			out = append(out, fmt.Sprintf("mov.b32 {%%h3, %%h4}, %s;", s))
		}
		out = append(out, g.lane("%h1", "%h3")...)
		out = append(out, g.lane("%h2", "%h4")...)
		return append(out, fmt.Sprintf("mov.b32 %s, {%%h1, %%h2};", d))
	case clU8:
		return g.byteWord(d, s)
	}
	return g.lane(d, s)
}

// scalar loads one element of dst and src, combines them and stores dst.
func (g gen) scalar() []string {
	var typ, d, s string
	switch g.class() {
	case clF32:
		typ, d, s = "f32", "%f1", "%f5"
	case clF64:
		typ, d, s = "f64", "%fd1", "%fd3"
	case clB32:
		typ, d, s = "u32", "%r10", "%r14"
	case clB64:
		typ, d, s = "u64", "%rd20", "%rd22"
	case clB16:
		typ, d, s = "b16", "%h1", "%h3"
	case clU8:
		// Bytes load zero-extended into 32-bit registers; the store keeps
		// the low 8 bits, which is the wrap-around of Sum and Prod.
		typ, d, s = "u8", "%r10", "%r14"
	}
	var out []string
	if g.hasDst() {
		out = append(out, fmt.Sprintf("ld.global.%s %s, [%%rd13];", typ, d))
	}
	if g.hasSrc() {
		out = append(out, fmt.Sprintf("ld.global.%s %s, [%%rd14];", typ, s))
	}
	if g.k.Kind == Copy {
		return append(out, fmt.Sprintf("st.global.%s [%%rd13], %s;", typ, s))
	}
	out = append(out, g.lane(d, s)...)
	return append(out, fmt.Sprintf("st.global.%s [%%rd13], %s;", typ, d))
}

// lane computes d = op(d, s) (or d / q) on one element held in the
// kernel's class of register; u8 elements are zero-extended 32-bit values.
func (g gen) lane(d, s string) []string {
	k := g.k
	switch k.DType {
	case hw.F32:
		if g.class() == clB32 {
			return minMaxBits(d, s, k.Op, 32)
		}
		return canonF(floatOp(k, "f32", d, s, "%f20"), "f32", d, "0f7FC00000")
	case hw.F64:
		if g.class() == clB64 {
			return minMaxBits(d, s, k.Op, 64)
		}
		return canonF(floatOp(k, "f64", d, s, "%fd15"), "f64", d, "0d7FF8000000000000")
	case hw.F16, hw.BF16:
		if k.Kind == Reduce && (k.Op == hw.Min || k.Op == hw.Max) {
			return minMax16(d, s, k.Op, k.DType)
		}
		return half(k, d, s)
	case hw.I32:
		if k.Kind == Divide {
			// Widened to s64 so that every divisor n >= 1 (even n >= 2^31)
			// truncates exactly as Go's int64 division in DivideBytes.
			return []string{
				"cvt.s64.s32 %rd24, " + d + ";",
				"div.s64 %rd24, %rd24, %rd3;",
				"cvt.u32.u64 " + d + ", %rd24;",
			}
		}
		return []string{intOp(k.Op, "s32", "s32", d, s)}
	case hw.I64:
		if k.Kind == Divide {
			return []string{"div.s64 " + d + ", " + d + ", %rd3;"}
		}
		return []string{intOp(k.Op, "s64", "s64", d, s)}
	case hw.U8:
		if k.Kind == Divide {
			return []string{"div.u32 " + d + ", " + d + ", %r40;"}
		}
		return []string{intOp(k.Op, "s32", "u32", d, s)}
	}
	panic(fmt.Sprintf("ptxgen: no lane for %s", k.Name))
}

// floatOp is the one rounded f32/f64 operation of Sum, Prod or divide.
func floatOp(k Kernel, typ, d, s, q string) string {
	switch {
	case k.Kind == Divide:
		return fmt.Sprintf("div.rn.%s %s, %s, %s;", typ, d, d, q)
	case k.Op == hw.Prod:
		return fmt.Sprintf("mul.rn.%s %s, %s, %s;", typ, d, d, s)
	}
	return fmt.Sprintf("add.rn.%s %s, %s, %s;", typ, d, d, s)
}

// canonF follows the operation with the canonical NaN (rule 3).
func canonF(opLine, typ, d, nan string) []string {
	return []string{
		opLine,
		fmt.Sprintf("testp.notanumber.%s %%p3, %s;", typ, d),
		fmt.Sprintf("selp.%s %s, %s, %s, %%p3;", typ, d, nan, d),
	}
}

// intOp is Sum, Prod, Min or Max of two integers; arith is the type of the
// wrapping add and multiply, order that of min and max.
func intOp(op hw.ReduceOp, arith, order, d, s string) string {
	switch op {
	case hw.Prod:
		return fmt.Sprintf("mul.lo.%s %s, %s, %s;", arith, d, d, s)
	case hw.Min:
		return fmt.Sprintf("min.%s %s, %s, %s;", order, d, d, s)
	case hw.Max:
		return fmt.Sprintf("max.%s %s, %s, %s;", order, d, d, s)
	}
	return fmt.Sprintf("add.%s %s, %s, %s;", arith, d, d, s)
}

// minMaxBits is IEEE 754-2019 minimum or maximum of two f32 (w = 32) or f64
// (w = 64) bit patterns held in .b32/.b64 registers (rule 5).
func minMaxBits(d, s string, op hw.ReduceOp, w int) []string {
	t1, t2, b, inf, nan := "%r20", "%r21", "b32", "0x7F800000", "0x7FC00000"
	mag := "0x7FFFFFFF"
	if w == 64 {
		t1, t2, b, inf, nan = "%rd24", "%rd25", "b64", "0x7FF0000000000000", "0x7FF8000000000000"
		mag = "0x7FFFFFFFFFFFFFFF"
	}
	ws := fmt.Sprint(w)
	mm := "min"
	if op == hw.Max {
		mm = "max"
	}
	return []string{
		// A NaN operand: magnitude bits above Inf's.
		fmt.Sprintf("and.%s %s, %s, %s;", b, t1, d, mag),
		fmt.Sprintf("setp.gt.u%s %%p3, %s, %s;", ws, t1, inf),
		fmt.Sprintf("and.%s %s, %s, %s;", b, t2, s, mag),
		fmt.Sprintf("setp.gt.u%s %%p4, %s, %s;", ws, t2, inf),
		"or.pred %p3, %p3, %p4;",
		// Keys in value order, −0 below +0.
		fmt.Sprintf("shr.s%s %s, %s, %d;", ws, t1, d, w-1),
		fmt.Sprintf("and.%s %s, %s, %s;", b, t1, t1, mag),
		fmt.Sprintf("xor.%s %s, %s, %s;", b, t1, t1, d),
		fmt.Sprintf("shr.s%s %s, %s, %d;", ws, t2, s, w-1),
		fmt.Sprintf("and.%s %s, %s, %s;", b, t2, t2, mag),
		fmt.Sprintf("xor.%s %s, %s, %s;", b, t2, t2, s),
		fmt.Sprintf("%s.s%s %s, %s, %s;", mm, ws, t1, t1, t2),
		// The key back to its pattern (the map is its own inverse).
		fmt.Sprintf("shr.s%s %s, %s, %d;", ws, t2, t1, w-1),
		fmt.Sprintf("and.%s %s, %s, %s;", b, t2, t2, mag),
		fmt.Sprintf("xor.%s %s, %s, %s;", b, d, t1, t2),
		fmt.Sprintf("selp.%s %s, %s, %s, %%p3;", b, d, nan, d),
	}
}

// minMax16 is minMax for f16 or bf16 patterns in .b16 registers, done on
// sign-extended 32-bit copies.
func minMax16(d, s string, op hw.ReduceOp, dt hw.DType) []string {
	inf, nan := "0x7C00", "0x7E00"
	if dt == hw.BF16 {
		inf, nan = "0x7F80", "0x7FC0"
	}
	mm := "min"
	if op == hw.Max {
		mm = "max"
	}
	return []string{
		"cvt.s32.s16 %r22, " + d + ";",
		"cvt.s32.s16 %r23, " + s + ";",
		"and.b32 %r20, %r22, 0x7FFF;",
		"setp.gt.u32 %p3, %r20, " + inf + ";",
		"and.b32 %r21, %r23, 0x7FFF;",
		"setp.gt.u32 %p4, %r21, " + inf + ";",
		"or.pred %p3, %p3, %p4;",
		"shr.s32 %r20, %r22, 31;",
		"and.b32 %r20, %r20, 0x7FFF;",
		"xor.b32 %r22, %r22, %r20;",
		"shr.s32 %r21, %r23, 31;",
		"and.b32 %r21, %r21, 0x7FFF;",
		"xor.b32 %r23, %r23, %r21;",
		mm + ".s32 %r22, %r22, %r23;",
		"shr.s32 %r20, %r22, 31;",
		"and.b32 %r20, %r20, 0x7FFF;",
		"xor.b32 %r22, %r22, %r20;",
		"cvt.u16.u32 " + d + ", %r22;",
		"selp.b16 " + d + ", " + nan + ", " + d + ", %p3;",
	}
}

// half is Sum, Prod or divide of f16 or bf16: widen to f32, one f32
// operation, round back to nearest even, canonical NaN (rule 2).
func half(k Kernel, d, s string) []string {
	var out []string
	if k.DType == hw.F16 {
		out = append(out, "cvt.f32.f16 %f10, "+d+";")
		if k.Kind != Divide {
			out = append(out, "cvt.f32.f16 %f11, "+s+";")
		}
	} else {
		// bf16 is the top half of an f32: widening is a shift.
		out = append(out, "cvt.u32.u16 %r20, "+d+";", "shl.b32 %r20, %r20, 16;", "mov.b32 %f10, %r20;")
		if k.Kind != Divide {
			out = append(out, "cvt.u32.u16 %r21, "+s+";", "shl.b32 %r21, %r21, 16;", "mov.b32 %f11, %r21;")
		}
	}
	out = append(out, floatOp(k, "f32", "%f10", "%f11", "%f20"), "testp.notanumber.f32 %p3, %f10;")
	if k.DType == hw.F16 {
		return append(out, "cvt.rn.f16.f32 "+d+", %f10;", "selp.b16 "+d+", 0x7E00, "+d+", %p3;")
	}
	return append(out, "cvt.rn.bf16.f32 "+d+", %f10;", "selp.b16 "+d+", 0x7FC0, "+d+", %p3;")
}

// byteWord combines four u8 lanes packed in a 32-bit word.
func (g gen) byteWord(d, s string) []string {
	if g.k.Kind == Reduce && g.k.Op == hw.Sum {
		// Add the low seven bits of every byte (no carry can leave a byte),
		// then put back the top bits: sum mod 256 in each byte at once.
		return []string{
			"and.b32 %r20, " + d + ", 0x7F7F7F7F;",
			"and.b32 %r21, " + s + ", 0x7F7F7F7F;",
			"add.s32 %r20, %r20, %r21;",
			"xor.b32 %r21, " + d + ", " + s + ";",
			"and.b32 %r21, %r21, 0x80808080;",
			"xor.b32 " + d + ", %r20, %r21;",
		}
	}
	var out []string
	for i := range 4 {
		pos := 8 * i
		out = append(out, fmt.Sprintf("bfe.u32 %%r22, %s, %d, 8;", d, pos))
		if g.hasSrc() {
			out = append(out, fmt.Sprintf("bfe.u32 %%r23, %s, %d, 8;", s, pos))
		}
		out = append(out, g.lane("%r22", "%r23")...)
		out = append(out, fmt.Sprintf("bfi.b32 %s, %%r22, %s, %d, 8;", d, d, pos))
	}
	return out
}

func regs(prefix string, first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, first+i)
	}
	return out
}

func vec(rs []string) string {
	s := "{"
	for i, r := range rs {
		if i > 0 {
			s += ", "
		}
		s += r
	}
	return s + "}"
}
