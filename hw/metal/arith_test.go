package metal

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/commsim/commsim/hw"
)

// The kernels' arithmetic against the contract (hw.ReduceBytes and
// hw.DivideBytes), on one set of test vectors run through any
// kernelRunner: the Go mirror of the MSL (TestMirrorKernels, every OS), the
// MSL source itself compiled as C++ by the host's compiler
// (TestMSLOnHostCompiler, where one exists), and the GPU
// (TestMetalKernels, on a Mac).

// kernelRunner runs kernel name over whole buffers: d in place, s read.
type kernelRunner func(t *testing.T, name string, d, s []byte, p kernelParams)

func mirrorRunner(t *testing.T, name string, d, s []byte, p kernelParams) {
	t.Helper()
	k, ok := mirrorKernels[name]
	if !ok {
		t.Fatalf("no mirror of kernel %s", name)
	}
	k.run(d, s, p)
}

// TestMirrorKernels checks the Go port of kernels.metal against hw.
func TestMirrorKernels(t *testing.T) { checkKernels(t, mirrorRunner) }

// compareElems reports the first differing elements of got and want.
func compareElems(t *testing.T, what string, dt hw.DType, a, b, got, want []byte) {
	t.Helper()
	size := dt.Size()
	bad := 0
	for i := 0; i+size <= len(got); i += size {
		g, w := bitsOf(got[i:i+size]), bitsOf(want[i:i+size])
		if g == w {
			continue
		}
		if bad++; bad <= 5 {
			t.Errorf("%s %s element %d: op(%#0*x, %#0*x) = %#0*x, hw wants %#0*x",
				what, dt, i/size, 2*size, bitsOf(a[i:i+size]), 2*size, bitsOf(b[i:i+size]), 2*size, g, 2*size, w)
		}
	}
	if bad > 5 {
		t.Errorf("%s %s: %d elements differ in all", what, dt, bad)
	}
}

func bitsOf(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// checkReduce runs op on (d, s) through run and through hw.
func checkReduce(t *testing.T, run kernelRunner, op hw.ReduceOp, dt hw.DType, d, s []byte) {
	t.Helper()
	want := append([]byte(nil), d...)
	if err := hw.ReduceBytes(op, dt, want, s); err != nil {
		t.Fatal(err)
	}
	got := append([]byte(nil), d...)
	run(t, reduceKernelName(op, dt), got, s, kernelParams{N: uint32(len(d) / dt.Size())})
	compareElems(t, "reduce "+op.String(), dt, d, s, got, want)
}

// checkDivide runs a divide by n through run and through hw.
func checkDivide(t *testing.T, run kernelRunner, dt hw.DType, d []byte, n int) {
	t.Helper()
	want := append([]byte(nil), d...)
	if err := hw.DivideBytes(dt, want, n); err != nil {
		t.Fatal(err)
	}
	got := append([]byte(nil), d...)
	// The worker's parameters, as in Stream.do.
	p := kernelParams{N: uint32(len(d) / dt.Size()), QF: math.Float32bits(float32(n)), QI: uint64(n)}
	run(t, divideKernelName(dt), got, nil, p)
	compareElems(t, fmt.Sprintf("divide by %d", n), dt, d, make([]byte, len(d)), got, want)
}

// checkKernels runs every test vector through run.
func checkKernels(t *testing.T, run kernelRunner) {
	t.Run("16bit-all-patterns", func(t *testing.T) { check16AllPatterns(t, run) })
	t.Run("16bit-random-pairs", func(t *testing.T) { check16RandomPairs(t, run) })
	t.Run("16bit-divide-all-patterns", func(t *testing.T) { checkDivide16AllPatterns(t, run) })
	t.Run("f32", func(t *testing.T) { checkF32(t, run) })
	t.Run("integers", func(t *testing.T) { checkIntegers(t, run) })
	t.Run("offsets", func(t *testing.T) { checkOffsets(t, run) })
}

// Special operands: zeros, subnormals, the normal boundary, ones and their
// neighbours, the largest finite values, infinities, quiet and signalling
// NaNs of both signs and several payloads, and ordinary values.
var (
	specialsF16 = []uint16{
		0x0000, 0x8000, 0x0001, 0x8001, 0x0002, 0x0200, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x0401,
		0x3800, 0x3BFF, 0x3C00, 0xBC00, 0x3C01, 0x4000, 0xC000, 0x4200, 0x5640, 0x1400, 0x2E66,
		0x7BFF, 0xFBFF, 0x7BFE, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7FFF, 0x7D55,
	}
	specialsBF16 = []uint16{
		0x0000, 0x8000, 0x0001, 0x8001, 0x0040, 0x007F, 0x807F, 0x0080, 0x8080, 0x0081,
		0x3F00, 0x3F7F, 0x3F80, 0xBF80, 0x3F81, 0x4000, 0xC000, 0x4040, 0x1F80, 0x5F80, 0x2000,
		0x7F7F, 0xFF7F, 0x7F7E, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0xFF81, 0x7FFF, 0x7FA5,
	}
	specialsF32 = []uint32{
		0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x00000002, 0x007FFFFF, 0x807FFFFF,
		0x00800000, 0x80800000, 0x00800001, 0x3F000000, 0x3F7FFFFF, 0x3F800000, 0xBF800000,
		0x3F800001, 0x40000000, 0xC0000000, 0x40400000, 0x33800000, 0x4B800000, 0x1F800000,
		0x5F800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F7FFFFE, 0x7F800000, 0xFF800000, 0x7FC00000,
		0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x7FA5A5A5, 0x3DCCCCCD, 0x3EAAAAAB,
		0x0DA24260, 0x26901D7D, 0x4E6E6B28, 0x7E967699,
	}
)

// all16 is every 16-bit pattern, little-endian.
func all16() []byte {
	b := make([]byte, 2<<16)
	for i := range 1 << 16 {
		le.PutUint16(b[2*i:], uint16(i))
	}
	return b
}

func fill16(v uint16, n int) []byte {
	b := make([]byte, 2*n)
	for i := range n {
		le.PutUint16(b[2*i:], v)
	}
	return b
}

// check16AllPatterns pairs every f16 and bf16 pattern with every special
// operand, on both sides, for every op.
func check16AllPatterns(t *testing.T, run kernelRunner) {
	all := all16()
	for _, c := range []struct {
		dt       hw.DType
		specials []uint16
	}{{hw.F16, specialsF16}, {hw.BF16, specialsBF16}} {
		for _, op := range kernelOps {
			for _, v := range c.specials {
				other := fill16(v, 1<<16)
				checkReduce(t, run, op, c.dt, all, other)
				checkReduce(t, run, op, c.dt, other, all)
			}
		}
	}
}

// check16RandomPairs checks random pairs of 16-bit patterns, which the
// special operands do not reach (sums of nearby values, cancellation).
func check16RandomPairs(t *testing.T, run kernelRunner) {
	rng := rand.New(rand.NewSource(1))
	const n = 1 << 17
	for _, dt := range []hw.DType{hw.F16, hw.BF16} {
		d, s := make([]byte, 2*n), make([]byte, 2*n)
		for i := range n {
			a := uint16(rng.Uint32())
			b := uint16(rng.Uint32())
			if i%2 == 0 { // same exponent, any signs: exact cancellations and carries
				b = a&0x7F80 | b&0x807F
				if dt == hw.F16 {
					b = a&0x7C00 | b&0x83FF
				}
			}
			le.PutUint16(d[2*i:], a)
			le.PutUint16(s[2*i:], b)
		}
		for _, op := range kernelOps {
			checkReduce(t, run, op, dt, d, s)
		}
	}
}

// divisors are Avg's world sizes, around the thresholds named in
// hw.DivideBytes (2^13 for f16, 2^16 for bf16, 2^24 for float32(n)) and
// beyond every integer width.
var divisors = []int{1, 2, 3, 5, 6, 7, 8, 9, 10, 12, 16, 17, 100, 255, 256, 257, 1000, 4095, 4096,
	8191, 8192, 8193, 65535, 65536, 65537, 1<<20 + 1, 1<<24 - 1, 1 << 24, 1<<24 + 1, 123456789,
	1<<31 - 1, 1 << 31, 1<<32 + 3, 1<<53 + 1}

func checkDivide16AllPatterns(t *testing.T, run kernelRunner) {
	all := all16()
	for _, dt := range []hw.DType{hw.F16, hw.BF16} {
		for _, n := range divisors {
			checkDivide(t, run, dt, all, n)
		}
	}
}

// randF32 draws float32 patterns: any bits, near 1, tiny (subnormal
// results), huge (overflow), and exact small integers.
func randF32(rng *rand.Rand) uint32 {
	switch rng.Intn(5) {
	case 0:
		return rng.Uint32()
	case 1:
		return 0x3F800000 + uint32(rng.Intn(1<<10)) - 1<<9 | rng.Uint32()&0x80000000
	case 2:
		return rng.Uint32()&0x80000000 | uint32(rng.Intn(0x01000000))
	case 3:
		return rng.Uint32()&0x80000000 | 0x7E000000 + uint32(rng.Intn(0x01800000))
	}
	return math.Float32bits(float32(rng.Intn(2001) - 1000))
}

func checkF32(t *testing.T, run kernelRunner) {
	rng := rand.New(rand.NewSource(2))
	var pairs [][2]uint32
	for _, a := range specialsF32 {
		for _, b := range specialsF32 {
			pairs = append(pairs, [2]uint32{a, b})
		}
	}
	for range 1 << 17 {
		a := randF32(rng)
		b := randF32(rng)
		if rng.Intn(3) == 0 { // same exponent: cancellation
			b = a&0x7F800000 | b&0x807FFFFF
		}
		pairs = append(pairs, [2]uint32{a, b})
	}
	d, s := make([]byte, 4*len(pairs)), make([]byte, 4*len(pairs))
	for i, p := range pairs {
		le.PutUint32(d[4*i:], p[0])
		le.PutUint32(s[4*i:], p[1])
	}
	for _, op := range kernelOps {
		checkReduce(t, run, op, hw.F32, d, s)
	}
	for _, n := range divisors {
		checkDivide(t, run, hw.F32, d, n)
	}
}

func checkIntegers(t *testing.T, run kernelRunner) {
	rng := rand.New(rand.NewSource(3))
	i32s := []int32{0, 1, -1, 2, -2, 3, -7, 7, 255, 256, 46341, -46341, 65536, -65536, 12345678,
		math.MaxInt32, math.MinInt32, math.MaxInt32 - 1, math.MinInt32 + 1}
	i64s := []int64{0, 1, -1, 2, -2, -7, 7, 1 << 32, -(1 << 32), 3037000500, -3037000500,
		math.MaxInt32, math.MinInt32, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1}
	for range 200 {
		i32s = append(i32s, int32(rng.Uint32()))
		i64s = append(i64s, int64(rng.Uint64()))
	}
	var d32, s32, d64, s64 []byte
	for _, a := range i32s {
		for _, b := range i32s {
			d32 = le.AppendUint32(d32, uint32(a))
			s32 = le.AppendUint32(s32, uint32(b))
		}
	}
	for _, a := range i64s {
		for _, b := range i64s {
			d64 = le.AppendUint64(d64, uint64(a))
			s64 = le.AppendUint64(s64, uint64(b))
		}
	}
	var d8, s8 []byte // every pair of bytes
	for a := range 256 {
		for b := range 256 {
			d8, s8 = append(d8, byte(a)), append(s8, byte(b))
		}
	}
	for _, op := range kernelOps {
		checkReduce(t, run, op, hw.I32, d32, s32)
		checkReduce(t, run, op, hw.I64, d64, s64)
		checkReduce(t, run, op, hw.U8, d8, s8)
	}
	for _, n := range divisors {
		checkDivide(t, run, hw.I32, d32, n)
		checkDivide(t, run, hw.I64, d64, n)
		checkDivide(t, run, hw.U8, d8[:256], n)
	}
}

// checkOffsets runs the kernels on slices that start inside their buffers,
// as Stream does with a slice's Off, including a u8 slice at an odd byte.
func checkOffsets(t *testing.T, run kernelRunner) {
	for _, dt := range kernelDTypes {
		size := dt.Size()
		d := make([]byte, 10*size)
		s := make([]byte, 10*size)
		for i := range d {
			d[i], s[i] = byte(3*i+1), byte(5*i+2)
		}
		for _, op := range kernelOps {
			got := append([]byte(nil), d...)
			run(t, reduceKernelName(op, dt), got, s, kernelParams{N: 4, DOff: 3, SOff: 5})
			want := append([]byte(nil), d...)
			if err := hw.ReduceBytes(op, dt, want[3*size:7*size], s[5*size:9*size]); err != nil {
				t.Fatal(err)
			}
			compareElems(t, "offset reduce "+op.String(), dt, d, s, got, want)
		}
		got := append([]byte(nil), d...)
		run(t, copyKernelName(size), got, s, kernelParams{N: 4, DOff: 1, SOff: 6})
		want := append([]byte(nil), d...)
		copy(want[size:5*size], s[6*size:10*size])
		compareElems(t, "offset copy", dt, d, s, got, want)
	}
}

// TestHalfConversionModel checks the model of MSL's half <-> float against
// hw's codecs: both claim IEEE round to nearest even, computed two
// different ways. Every f16 pattern widens; float32 patterns are sampled
// across the whole range, plus every pattern near the f16 boundaries.
func TestHalfConversionModel(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		got, want := halfToFloat(h), hw.Float16(h).Float32()
		if got != want && !(got != got && want != want) {
			t.Fatalf("halfToFloat(%#04x) = %v, hw says %v", h, got, want)
		}
	}
	check := func(u uint32) {
		if nan32(u) {
			return // the MSL never converts a NaN: it selects the canonical NaN
		}
		if got, want := floatToHalf(asFloat(u)), uint16(hw.Float16FromFloat32(asFloat(u))); got != want {
			t.Fatalf("floatToHalf(%#08x = %v) = %#04x, hw says %#04x", u, asFloat(u), got, want)
		}
	}
	for u := uint64(0); u < 1<<32; u += 4099 {
		check(uint32(u))
	}
	// Around 2^-25 (rounds to zero), the subnormal grid, 2^-14, 65504 and
	// 65520 (overflow), for both signs.
	for _, center := range []uint32{0x33000000, 0x33800000, 0x387FC000, 0x38800000, 0x477FE000, 0x477FF000, 0x47800000} {
		for d := range uint32(1 << 14) {
			check(center + d - 1<<13)
			check(center + d - 1<<13 | 0x80000000)
		}
	}
}
