// Package ptxgen writes the PTX kernels of hw/cuda: an elementwise reduce
// for every dtype × op, a divide (the second half of Avg) for every dtype,
// and a byte copy. The generated text is checked in as hw/cuda/kernels.ptx
// (go generate in hw/cuda) and embedded; a test there regenerates it and
// fails when the checked-in file is stale.
//
// # Arithmetic
//
// The kernels implement hw.ReduceBytes and hw.DivideBytes bit for bit; the
// rules are written out there and restated here as the PTX that meets them:
//
//   - f32 and f64 Sum, Prod and divide are add.rn, mul.rn and div.rn: one
//     IEEE operation rounded to nearest even, never .ftz (subnormals kept)
//     and never contracted into fma (an explicit rounding modifier forbids
//     contraction, and no kernel has a multiply feeding an add anyway).
//   - f16 and bf16 widen both operands exactly to f32 (cvt.f32.f16; bf16 by
//     shifting its bits into the top half of an f32, since cvt.f32.bf16
//     needs sm_90), do the one f32 operation above, and round back with
//     cvt.rn.f16.f32 or cvt.rn.bf16.f32 (round to nearest even, subnormals
//     kept): the result is rounded after every single op.
//   - Every float result that is NaN is replaced by the canonical quiet NaN
//     (f32 0x7FC00000, f64 0x7FF8000000000000, f16 0x7E00, bf16 0x7FC0):
//     testp.notanumber on the f32/f64 result, then selp.
//   - Min and Max on floats do not use PTX min/max (whose NaN and ±0
//     behaviour is not the contract). They work on the bit patterns: a NaN
//     operand (magnitude bits above the dtype's Inf) gives the canonical
//     NaN; otherwise each pattern is mapped to an integer key that orders as
//     the values do with −0 just below +0 (negative patterns have their
//     magnitude bits inverted: key = bits XOR ((bits >> (w−1)) AND (2^(w−1)
//     − 1)), arithmetic shift), the smaller (larger) key is taken with
//     min.s/max.s, and the same involution maps it back to the operand's
//     pattern. Nothing is rounded.
//   - i32, i64 and u8 Sum and Prod wrap (add, mul.lo); Min and Max are
//     min/max.s32, .s64 and, on zero-extended bytes, .u32.
//   - Integer divide truncates toward zero as Go's / does: i32 is widened
//     to s64 and divided with div.s64, so any divisor n >= 1 is exact; i64
//     uses div.s64; u8 uses div.u32 with the divisor clamped to 256 (every
//     byte divided by any n >= 256 is 0). Float divisors are float32(n)
//     (float64(n) for f64), converted on the host by Go exactly as
//     hw.DivideBytes converts them (Divisor).
//
// # Shape
//
// Every kernel takes the same six .u64 parameters (dst, src, q, head, nvec,
// n) and is a memory-bound grid-stride loop. Elements [head, head+nvec·E)
// move as 16-byte vectors (E = 16/size elements each, v4 or v2 loads and
// stores); the others, [0, head) and [head+nvec·E, n), one element at a
// time. Split chooses head and nvec so that every vector is 16-byte aligned
// in dst and src; when dst and src disagree modulo 16 everything is scalar.
package ptxgen

import (
	"fmt"
	"math"
	"strings"
	"text/template"

	"github.com/commsim/commsim/hw"
)

// Kind is what a kernel computes.
type Kind uint8

const (
	Reduce Kind = iota + 1 // dst = op(dst, src)
	Divide                 // dst = dst / q
	Copy                   // dst = src, bytes
)

// Kernel is one generated entry point.
type Kernel struct {
	Name  string
	Kind  Kind
	Op    hw.ReduceOp // Reduce only
	DType hw.DType    // U8 for Copy
}

// Params is the number of .u64 parameters every kernel takes, in order:
// dst, src, q, head, nvec, n.
const Params = 6

// VectorBytes is the width of the vector loads and stores.
const VectorBytes = 16

// ReduceName is the entry name of the reduce kernel, e.g. "reduce_sum_f32".
func ReduceName(op hw.ReduceOp, dt hw.DType) string {
	return fmt.Sprintf("reduce_%s_%s", op, dt)
}

// DivideName is the entry name of the divide kernel, e.g. "divide_f16".
func DivideName(dt hw.DType) string { return "divide_" + dt.String() }

// CopyName is the entry name of the byte copy kernel.
const CopyName = "copy_u8"

// ElementwiseOps are the ops that have reduce kernels (Avg is Sum then
// divide).
func ElementwiseOps() []hw.ReduceOp { return []hw.ReduceOp{hw.Sum, hw.Prod, hw.Min, hw.Max} }

// Kernels lists every entry point in the order Generate writes them.
func Kernels() []Kernel {
	var ks []Kernel
	for _, dt := range hw.DTypes() {
		for _, op := range ElementwiseOps() {
			ks = append(ks, Kernel{Name: ReduceName(op, dt), Kind: Reduce, Op: op, DType: dt})
		}
		ks = append(ks, Kernel{Name: DivideName(dt), Kind: Divide, DType: dt})
	}
	return append(ks, Kernel{Name: CopyName, Kind: Copy, DType: hw.U8})
}

// Divisor is the q parameter of the divide kernel of dt for divisor n >= 1:
// the bits of float32(n) for f32, f16 and bf16, of float64(n) for f64, n
// itself for i32 and i64, and min(n, 256) for u8.
func Divisor(dt hw.DType, n int) uint64 {
	switch dt {
	case hw.F32, hw.F16, hw.BF16:
		return uint64(math.Float32bits(float32(n)))
	case hw.F64:
		return math.Float64bits(float64(n))
	case hw.U8:
		return uint64(min(n, 256))
	}
	return uint64(int64(n))
}

// Split returns the head and nvec parameters for n elements of size bytes
// at device addresses dst and src (src is ignored when hasSrc is false):
// head scalar elements bring dst to a 16-byte boundary, then nvec whole
// vectors follow. If dst and src cannot be aligned together, or an element
// straddles the boundary, everything is scalar (head = nvec = 0).
func Split(dst, src uint64, n, size int, hasSrc bool) (head, nvec int) {
	if n <= 0 || size <= 0 || VectorBytes%size != 0 {
		return 0, 0
	}
	mis := int(dst % VectorBytes)
	if hasSrc && int(src%VectorBytes) != mis || mis%size != 0 {
		return 0, 0
	}
	head = (VectorBytes - mis) % VectorBytes / size
	if head >= n {
		return 0, 0
	}
	return head, (n - head) / (VectorBytes / size)
}

// Work is the number of loop iterations a kernel with these parameters has
// at most per index: the longer of its vector and scalar parts. A launch
// needs no more threads than this.
func Work(n, size, nvec int) int {
	return max(nvec, n-nvec*(VectorBytes/size))
}

// Generate returns the PTX module: every kernel of Kernels.
func Generate() string {
	var b strings.Builder
	if err := moduleTmpl.Execute(&b, moduleData()); err != nil {
		// The template and its data are fixed: failing is a bug here.
		panic(fmt.Sprintf("ptxgen: %v", err))
	}
	return b.String()
}

type kernelData struct {
	Kernel
	Size     int    // element bytes
	EPV      int    // elements per vector
	Prologue string // lines before the loops
	Vector   string // body of the vector loop: %rd13 is the dst address, %rd14 the src address
	Scalar   string // body of the scalar loop, likewise
}

func moduleData() []kernelData {
	var out []kernelData
	for _, k := range Kernels() {
		size := k.DType.Size()
		d := kernelData{Kernel: k, Size: size, EPV: VectorBytes / size}
		g := gen{k: k}
		d.Prologue = indent(g.prologue())
		d.Vector = indent(g.vector())
		d.Scalar = indent(g.scalar())
		out = append(out, d)
	}
	return out
}

func indent(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return "\t" + strings.Join(lines, "\n\t")
}

var moduleTmpl = template.Must(template.New("module").Parse(`//
// Code generated by hw/cuda/internal/ptxgen; DO NOT EDIT.
//
// Elementwise kernels of commsim's CUDA backend. The arithmetic is
// hw.ReduceBytes and hw.DivideBytes bit for bit; ptxgen's package doc
// says how each rule maps to PTX.
//
// Parameters of every kernel (all .u64): dst, src, q (divide: the
// divisor, see ptxgen.Divisor), head, nvec, n. Elements [head,
// head+nvec*E) are processed as 16-byte vectors, the rest one by one.
//

.version 7.0
.target sm_80
.address_size 64
{{range .}}
// {{.Name}}: {{.Size}}-byte elements, {{.EPV}} per vector.
.visible .entry {{.Name}}(
	.param .u64 {{.Name}}_dst,
	.param .u64 {{.Name}}_src,
	.param .u64 {{.Name}}_q,
	.param .u64 {{.Name}}_head,
	.param .u64 {{.Name}}_nvec,
	.param .u64 {{.Name}}_n
)
{
	.reg .pred %p<8>;
	.reg .b16 %h<8>;
	.reg .b32 %r<48>;
	.reg .f32 %f<24>;
	.reg .b64 %rd<32>;
	.reg .f64 %fd<16>;

	ld.param.u64 %rd1, [{{.Name}}_dst];
	ld.param.u64 %rd2, [{{.Name}}_src];
	ld.param.u64 %rd3, [{{.Name}}_q];
	ld.param.u64 %rd4, [{{.Name}}_head];
	ld.param.u64 %rd5, [{{.Name}}_nvec];
	ld.param.u64 %rd6, [{{.Name}}_n];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	mov.u32 %r1, %ctaid.x;
	mov.u32 %r2, %ntid.x;
	mov.u32 %r3, %tid.x;
	mov.u32 %r4, %nctaid.x;
	cvt.u64.u32 %rd7, %r3;
	mad.wide.u32 %rd7, %r1, %r2, %rd7;
	mul.wide.u32 %rd8, %r4, %r2;
{{- if .Prologue}}
{{.Prologue}}
{{- end}}
	// Vectors: 16 bytes at dst+head*{{.Size}}+16*v.
	mad.lo.u64 %rd9, %rd4, {{.Size}}, %rd1;
	mad.lo.u64 %rd10, %rd4, {{.Size}}, %rd2;
	mov.u64 %rd11, %rd7;
	setp.ge.u64 %p1, %rd11, %rd5;
	@%p1 bra $L_{{.Name}}_vdone;
$L_{{.Name}}_vloop:
	shl.b64 %rd12, %rd11, 4;
	add.u64 %rd13, %rd9, %rd12;
	add.u64 %rd14, %rd10, %rd12;
{{.Vector}}
	add.u64 %rd11, %rd11, %rd8;
	setp.lt.u64 %p1, %rd11, %rd5;
	@%p1 bra $L_{{.Name}}_vloop;
$L_{{.Name}}_vdone:
	// Scalars: index j < head is element j, else element j+nvec*{{.EPV}}.
	mul.lo.u64 %rd15, %rd5, {{.EPV}};
	sub.u64 %rd16, %rd6, %rd15;
	mov.u64 %rd11, %rd7;
	setp.ge.u64 %p1, %rd11, %rd16;
	@%p1 bra $L_{{.Name}}_sdone;
$L_{{.Name}}_sloop:
	setp.lt.u64 %p2, %rd11, %rd4;
	add.u64 %rd17, %rd11, %rd15;
	selp.b64 %rd17, %rd11, %rd17, %p2;
	mad.lo.u64 %rd13, %rd17, {{.Size}}, %rd1;
	mad.lo.u64 %rd14, %rd17, {{.Size}}, %rd2;
{{.Scalar}}
	add.u64 %rd11, %rd11, %rd8;
	setp.lt.u64 %p1, %rd11, %rd16;
	@%p1 bra $L_{{.Name}}_sloop;
$L_{{.Name}}_sdone:
	ret;
}
{{end}}`))
