package hw_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// reduce applies op to one pair of elements of type T and returns the result.
func reduce[T hw.Element](t *testing.T, op hw.ReduceOp, a, b T) T {
	t.Helper()
	dst, src := hw.Encode([]T{a}), hw.Encode([]T{b})
	if err := hw.ReduceBytes(op, hw.DTypeOf[T](), dst, src); err != nil {
		t.Fatalf("ReduceBytes(%s, %s): %v", op, hw.DTypeOf[T](), err)
	}
	out, err := hw.Decode[T](dst)
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func divide[T hw.Element](t *testing.T, a T, n int) T {
	t.Helper()
	dst := hw.Encode([]T{a})
	if err := hw.DivideBytes(hw.DTypeOf[T](), dst, n); err != nil {
		t.Fatalf("DivideBytes(%s, %d): %v", hw.DTypeOf[T](), n, err)
	}
	out, _ := hw.Decode[T](dst)
	return out[0]
}

func f16(x float64) hw.Float16   { return hw.Float16FromFloat64(x) }
func bf16(x float64) hw.BFloat16 { return hw.BFloat16FromFloat64(x) }

func TestReduceIntegers(t *testing.T) {
	check := func(name string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("i32 max+1", reduce(t, hw.Sum, int32(math.MaxInt32), 1), int32(math.MinInt32))
	check("i32 min+(-1)", reduce(t, hw.Sum, int32(math.MinInt32), -1), int32(math.MaxInt32))
	check("i32 46341*46341", reduce(t, hw.Prod, int32(46341), 46341), int32(-2147479015))
	check("i32 -3*7", reduce(t, hw.Prod, int32(-3), 7), int32(-21))
	check("i32 min(-1,1)", reduce(t, hw.Min, int32(-1), 1), int32(-1))
	check("i32 max(-1,1)", reduce(t, hw.Max, int32(-1), 1), int32(1))
	check("i64 max+1", reduce(t, hw.Sum, int64(math.MaxInt64), 1), int64(math.MinInt64))
	check("i64 2^62*4", reduce(t, hw.Prod, int64(1)<<62, 4), int64(0))
	check("i64 (2^32+1)^2", reduce(t, hw.Prod, int64(1)<<32+1, int64(1)<<32+1), int64(1)<<33+1)
	check("i64 3^39*3^39", reduce(t, hw.Prod, int64(4052555153018976267), 4052555153018976267), int64(-7710839681495117703))
	check("i64 min(-5,3)", reduce(t, hw.Min, int64(-5), 3), int64(-5))
	check("i64 max(-5,3)", reduce(t, hw.Max, int64(-5), 3), int64(3))
	check("u8 200+100", reduce(t, hw.Sum, uint8(200), 100), uint8(44))
	check("u8 16*17", reduce(t, hw.Prod, uint8(16), 17), uint8(16))
	check("u8 min(200,100)", reduce(t, hw.Min, uint8(200), 100), uint8(100))
	check("u8 max(200,100)", reduce(t, hw.Max, uint8(200), 100), uint8(200))

	check("i32 -7/2", divide(t, int32(-7), 2), int32(-3))
	check("i32 7/2", divide(t, int32(7), 2), int32(3))
	check("i32 min/1", divide(t, int32(math.MinInt32), 1), int32(math.MinInt32))
	check("i32 min/2^31", divide(t, int32(math.MinInt32), 1<<31), int32(-1))
	check("i32 max/2^40", divide(t, int32(math.MaxInt32), 1<<40), int32(0))
	check("i64 -7/2", divide(t, int64(-7), 2), int64(-3))
	check("i64 min/3", divide(t, int64(math.MinInt64), 3), int64(math.MinInt64/3))
	check("u8 255/2", divide(t, uint8(255), 2), uint8(127))
	check("u8 9/1000", divide(t, uint8(9), 1000), uint8(0))
}

func TestReduceF16RoundsAfterEveryOp(t *testing.T) {
	check := func(name string, got, want hw.Float16) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %#04x (%v), want %#04x (%v)", name, got, got.Float64(), want, want.Float64())
		}
	}
	check("2048+1", reduce(t, hw.Sum, f16(2048), f16(1)), f16(2048))
	check("2048+3", reduce(t, hw.Sum, f16(2048), f16(3)), f16(2052))
	check("2048+5", reduce(t, hw.Sum, f16(2048), f16(5)), f16(2052))
	check("65504+15", reduce(t, hw.Sum, f16(65504), f16(15)), 0x7BFF)
	check("65504+16", reduce(t, hw.Sum, f16(65504), f16(16)), 0x7C00)
	check("-60000-60000", reduce(t, hw.Sum, f16(-60000), f16(-60000)), 0xFC00)
	check("1.5*1.5", reduce(t, hw.Prod, f16(1.5), f16(1.5)), f16(2.25))
	check("2^-24*0.5", reduce(t, hw.Prod, hw.Float16(0x0001), f16(0.5)), 0x0000)   // tie to even 0
	check("3*2^-24*0.5", reduce(t, hw.Prod, hw.Float16(0x0003), f16(0.5)), 0x0002) // tie to even
	check("2^-14-2^-24", reduce(t, hw.Sum, hw.Float16(0x0400), 0x8001), 0x03FF)    // subnormal result kept
	check("x-x", reduce(t, hw.Sum, f16(3), f16(-3)), 0x0000)                       // +0
	check("-0+-0", reduce(t, hw.Sum, hw.Float16(0x8000), 0x8000), 0x8000)          // -0
	check("1/3", divide(t, f16(1), 3), f16(1.0/3))                                 // 0x3555
	check("-0/4", divide(t, hw.Float16(0x8000), 4), 0x8000)                        // sign kept
	check("2^-24/2", divide(t, hw.Float16(0x0001), 2), 0x0000)                     // tie to even
	check("65504/1", divide(t, hw.Float16(0x7BFF), 1), 0x7BFF)

	// Adding 1 to 2048 three times, rounding after every add, never moves;
	// a float32 accumulator would reach 2051 and round to 2052.
	acc := hw.Encode([]hw.Float16{f16(2048)})
	one := hw.Encode([]hw.Float16{f16(1)})
	for range 3 {
		if err := hw.ReduceBytes(hw.Sum, hw.F16, acc, one); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := hw.Decode[hw.Float16](acc); got[0] != f16(2048) {
		t.Errorf("2048+1+1+1 = %v, want 2048 (round after every add)", got[0].Float64())
	}

	checkB := func(name string, got, want hw.BFloat16) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %#04x (%v), want %#04x (%v)", name, got, got.Float64(), want, want.Float64())
		}
	}
	checkB("bf16 256+1", reduce(t, hw.Sum, bf16(256), bf16(1)), bf16(256))
	checkB("bf16 256+3", reduce(t, hw.Sum, bf16(256), bf16(3)), bf16(260))
	checkB("bf16 max+max", reduce(t, hw.Sum, hw.BFloat16(0x7F7F), 0x7F7F), 0x7F80)
	checkB("bf16 2^-133*0.5", reduce(t, hw.Prod, hw.BFloat16(0x0001), bf16(0.5)), 0x0000)
	checkB("bf16 1/3", divide(t, bf16(1), 3), bf16(1.0/3))
}

func TestReduceFloatsIEEE(t *testing.T) {
	// f32 and f64 are one Go operation each, subnormals included.
	rng := rand.New(rand.NewPCG(9, 10))
	for range 10000 {
		a, b := math.Float32frombits(rng.Uint32()), math.Float32frombits(rng.Uint32())
		if math.IsNaN(float64(a)) || math.IsNaN(float64(b)) {
			continue
		}
		for _, c := range []struct {
			op   hw.ReduceOp
			want float32
		}{{hw.Sum, a + b}, {hw.Prod, a * b}} {
			if got := reduce(t, c.op, a, b); math.Float32bits(got) != math.Float32bits(c.want) && !math.IsNaN(float64(c.want)) {
				t.Fatalf("f32 %s(%g, %g) = %g, want %g", c.op, a, b, got, c.want)
			}
		}
		x, y := math.Float64frombits(rng.Uint64()), math.Float64frombits(rng.Uint64())
		if got := reduce(t, hw.Sum, x, y); got != x+y && !math.IsNaN(x+y) {
			t.Fatalf("f64 sum(%g, %g) = %g, want %g", x, y, got, x+y)
		}
	}
	tiny := math.Float32frombits(1)
	if got := reduce(t, hw.Sum, tiny, tiny); math.Float32bits(got) != 2 {
		t.Errorf("f32 subnormal sum = %#08x, want 0x00000002 (no flush to zero)", math.Float32bits(got))
	}
	if got := reduce(t, hw.Sum, float32(math.MaxFloat32), math.MaxFloat32); !math.IsInf(float64(got), 1) {
		t.Errorf("f32 max+max = %v, want +Inf", got)
	}
	if got := reduce(t, hw.Prod, -math.MaxFloat64, 2); !math.IsInf(got, -1) {
		t.Errorf("f64 -max*2 = %v, want -Inf", got)
	}
	if got := divide(t, float32(1), 3); got != float32(1)/3 {
		t.Errorf("f32 1/3 = %v", got)
	}
	if got := divide(t, 1.0, 3); got != 1.0/3 {
		t.Errorf("f64 1/3 = %v", got)
	}
}

// half describes f16 or bf16 for TestHalfArithCorrectlyRounded through
// the public API: inf is the +Inf pattern, value widens a pattern and round
// is the single-rounding conversion from float64 (both checked against an
// independent reference in float16_test.go).
type half struct {
	dt    hw.DType
	inf   uint16
	mbits uint
	value func(uint16) float64
	round func(float64) uint16
}

var halves = []half{
	{hw.F16, 0x7C00, 10, func(h uint16) float64 { return hw.Float16(h).Float64() },
		func(x float64) uint16 { return uint16(hw.Float16FromFloat64(x)) }},
	{hw.BF16, 0x7F80, 7, func(h uint16) float64 { return hw.BFloat16(h).Float64() },
		func(x float64) uint16 { return uint16(hw.BFloat16FromFloat64(x)) }},
}

// quotient rounds value(b) / n exactly, ties to even: it compares value(b)
// with v × n for neighbouring patterns v and their midpoints, products that
// are exact in float64 while mbits+2 plus the bits of n stay within 53.
func (f half) quotient(b uint16, n int) uint16 {
	a, fn := f.value(b), float64(n)
	lo := uint16(sort.Search(int(f.inf), func(i int) bool { return f.value(uint16(i))*fn > a }) - 1)
	m := (f.value(lo) + f.value(lo+1)) / 2 * fn
	switch {
	case a < m || a == m && lo&1 == 0:
		return lo
	default:
		return lo + 1
	}
}

// TestHalfArithCorrectlyRounded checks the claim on ReduceBytes and
// DivideBytes that the float32 path equals the correctly rounded f16/bf16
// operation. Products of two half values, and sums of two f16 values or of
// two bf16 values less than 2^45 apart, are exact in float64, so the
// reference rounds them once (other bf16 sums round in float64 first, which
// is harmless as 53 >= 2·8+2, and are trivial anyway). Quotients by n below
// the documented bound are compared exactly.
func TestHalfArithCorrectlyRounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, f := range halves {
		n := 400_000
		d, s := make([]uint16, n), make([]uint16, n)
		for i := range n {
			a, b := uint16(rng.IntN(int(f.inf))), uint16(rng.IntN(int(f.inf)))
			if rng.IntN(4) != 0 { // b within a few binades of a, so sums round
				if c := int(a) + rng.IntN(0x1000) - 0x800; c >= 0 && c < int(f.inf) {
					b = uint16(c)
				}
			}
			d[i], s[i] = a|uint16(rng.IntN(2))<<15, b|uint16(rng.IntN(2))<<15
		}
		for _, op := range []hw.ReduceOp{hw.Sum, hw.Prod} {
			dst := hw.Encode(asHalves(d))
			if err := hw.ReduceBytes(op, f.dt, dst, hw.Encode(asHalves(s))); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				x, y := f.value(d[i]), f.value(s[i])
				exact := x + y
				if op == hw.Prod {
					exact = x * y
				}
				if got, want := uint16(dst[2*i])|uint16(dst[2*i+1])<<8, f.round(exact); got != want {
					t.Fatalf("%s %s(%g, %g) = %#04x, want %#04x", f.dt, op, x, y, got, want)
				}
			}
		}
		// Every positive finite value divided by small n, n just below
		// the bound 2^(24-p) and random n in between.
		bound := 1 << (24 - f.mbits - 1)
		var ns []int
		for k := 1; k <= 30; k++ {
			ns = append(ns, k, bound-k, 1+rng.IntN(bound-1))
		}
		all := make([]uint16, f.inf)
		for b := range all {
			all[b] = uint16(b)
		}
		for _, k := range ns {
			q := hw.Encode(asHalves(all))
			if err := hw.DivideBytes(f.dt, q, k); err != nil {
				t.Fatal(err)
			}
			for b := range all {
				if got, want := uint16(q[2*b])|uint16(q[2*b+1])<<8, f.quotient(uint16(b), k); got != want {
					t.Fatalf("%s %g / %d = %#04x, want %#04x", f.dt, f.value(uint16(b)), k, got, want)
				}
			}
		}
	}
}

// asHalves packs patterns as Float16 for Encode; the bytes are the same for
// both 16-bit dtypes.
func asHalves(v []uint16) []hw.Float16 {
	out := make([]hw.Float16, len(v))
	for i, x := range v {
		out[i] = hw.Float16(x)
	}
	return out
}

// floatBits describes one float dtype by its patterns.
type floatBits struct {
	dt                        hw.DType
	nan, negZero, inf, negInf uint64 // canonical NaN, -0, +Inf, -Inf
	odd                       uint64 // a NaN with the sign set and an odd payload
	one, two                  uint64
}

var floatDTypes = []floatBits{
	{hw.F32, 0x7FC00000, 0x80000000, 0x7F800000, 0xFF800000, 0xFF800001, 0x3F800000, 0x40000000},
	{hw.F64, 0x7FF8000000000000, 1 << 63, 0x7FF0000000000000, 0xFFF0000000000000, 0xFFF0000000000001, 0x3FF0000000000000, 0x4000000000000000},
	{hw.F16, 0x7E00, 0x8000, 0x7C00, 0xFC00, 0xFC01, 0x3C00, 0x4000},
	{hw.BF16, 0x7FC0, 0x8000, 0x7F80, 0xFF80, 0xFF81, 0x3F80, 0x4000},
}

func (f floatBits) enc(vals ...uint64) []byte {
	sz := f.dt.Size()
	b := make([]byte, sz*len(vals))
	for i, v := range vals {
		for j := range sz {
			b[i*sz+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func (f floatBits) dec(b []byte) []uint64 {
	sz := f.dt.Size()
	out := make([]uint64, len(b)/sz)
	for i := range out {
		for j := range sz {
			out[i] |= uint64(b[i*sz+j]) << (8 * j)
		}
	}
	return out
}

func TestReduceNaNAndSignedZero(t *testing.T) {
	for _, f := range floatDTypes {
		type tc struct {
			op         hw.ReduceOp
			a, b, want uint64
		}
		cases := []tc{
			{hw.Sum, f.inf, f.negInf, f.nan}, // Inf - Inf
			{hw.Sum, f.negInf, f.inf, f.nan},
			{hw.Prod, 0, f.inf, f.nan}, // 0 * Inf
			{hw.Sum, f.odd, f.one, f.nan},
			{hw.Prod, f.one, f.odd, f.nan},
			{hw.Sum, f.inf, f.inf, f.inf},
			{hw.Sum, 0, f.negZero, 0},
			{hw.Sum, f.negZero, f.negZero, f.negZero},
			{hw.Min, f.odd, f.one, f.nan}, // NaN propagates, not fmin
			{hw.Min, f.one, f.odd, f.nan},
			{hw.Max, f.odd, f.one, f.nan},
			{hw.Max, f.one, f.odd, f.nan},
			{hw.Max, f.nan, f.negInf, f.nan},
			{hw.Min, 0, f.negZero, f.negZero},
			{hw.Min, f.negZero, 0, f.negZero},
			{hw.Max, 0, f.negZero, 0},
			{hw.Max, f.negZero, 0, 0},
			{hw.Min, f.one, f.two, f.one},
			{hw.Min, f.two, f.one, f.one},
			{hw.Max, f.one, f.two, f.two},
			{hw.Max, f.two, f.one, f.two},
			{hw.Min, f.negInf, f.one, f.negInf},
			{hw.Max, f.negInf, f.inf, f.inf},
			{hw.Min, f.negZero, f.negInf, f.negInf},
			{hw.Max, f.two | f.negZero, f.one | f.negZero, f.one | f.negZero}, // max(-2, -1) = -1
			{hw.Min, f.two | f.negZero, f.one | f.negZero, f.two | f.negZero},
		}
		var a, b, want []uint64
		for _, c := range cases {
			dst, src := f.enc(c.a), f.enc(c.b)
			if err := hw.ReduceBytes(c.op, f.dt, dst, src); err != nil {
				t.Fatal(err)
			}
			if got := f.dec(dst)[0]; got != c.want {
				t.Errorf("%s %s(%#x, %#x) = %#x, want %#x", f.dt, c.op, c.a, c.b, got, c.want)
			}
			if c.op == hw.Sum {
				a, b, want = append(a, c.a), append(b, c.b), append(want, c.want)
			}
		}
		// DivideBytes canonicalises too, even by 1.
		for _, n := range []int{1, 3} {
			dst := f.enc(f.odd, f.inf, f.negZero)
			if err := hw.DivideBytes(f.dt, dst, n); err != nil {
				t.Fatal(err)
			}
			if got := f.dec(dst); got[0] != f.nan || got[1] != f.inf || got[2] != f.negZero {
				t.Errorf("%s DivideBytes([NaN, Inf, -0], %d) = %#x, want [%#x %#x %#x]", f.dt, n, got, f.nan, f.inf, f.negZero)
			}
		}
		// A multi-element call gives the same as one element at a time.
		dst := f.enc(a...)
		if err := hw.ReduceBytes(hw.Sum, f.dt, dst, f.enc(b...)); err != nil {
			t.Fatal(err)
		}
		if got := f.dec(dst); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s vector sum = %#x, want %#x", f.dt, got, want)
		}
	}
}

func TestReduceBytesInPlace(t *testing.T) {
	x := hw.Encode([]float32{1, 2, 3})
	if err := hw.ReduceBytes(hw.Sum, hw.F32, x, x); err != nil {
		t.Fatal(err)
	}
	if got, _ := hw.Decode[float32](x); fmt.Sprint(got) != "[2 4 6]" {
		t.Errorf("x+x = %v, want [2 4 6]", got)
	}
}

func TestReduceBytesErrors(t *testing.T) {
	good := make([]byte, 8)
	cases := []struct {
		name     string
		op       hw.ReduceOp
		dt       hw.DType
		dst, src []byte
		is       error
		mention  []string
	}{
		{"length mismatch", hw.Sum, hw.F32, make([]byte, 12), make([]byte, 8), hw.ErrSizeMismatch, []string{"12", "8"}},
		{"ragged", hw.Sum, hw.F32, make([]byte, 6), make([]byte, 6), hw.ErrSizeMismatch, []string{"6", "4"}},
		{"avg", hw.Avg, hw.F32, good, good, hw.ErrBadArgument, []string{"avg", "DivideBytes"}},
		{"op 0", 0, hw.F32, good, good, hw.ErrBadArgument, []string{"reduceop(0)"}},
		{"op 42", 42, hw.F32, good, good, hw.ErrBadArgument, []string{"reduceop(42)"}},
		{"dtype 0", hw.Sum, 0, good, good, hw.ErrBadArgument, []string{"dtype(0)"}},
		{"dtype 99", hw.Sum, 99, good, good, hw.ErrBadArgument, []string{"dtype(99)"}},
	}
	for _, c := range cases {
		before := string(c.dst)
		err := hw.ReduceBytes(c.op, c.dt, c.dst, c.src)
		if !errors.Is(err, c.is) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.is)
			continue
		}
		for _, m := range c.mention {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("%s: error %q does not mention %q", c.name, err, m)
			}
		}
		if string(c.dst) != before {
			t.Errorf("%s: dst changed on error", c.name)
		}
	}
	if err := hw.ReduceBytes(hw.Sum, hw.F32, nil, nil); err != nil {
		t.Errorf("empty reduce: %v", err)
	}
	for _, c := range []struct {
		dt hw.DType
		b  []byte
		n  int
		is error
	}{
		{hw.F32, good, 0, hw.ErrBadArgument},
		{hw.I32, good, -1, hw.ErrBadArgument},
		{0, good, 2, hw.ErrBadArgument},
		{hw.F64, make([]byte, 12), 2, hw.ErrSizeMismatch},
	} {
		if err := hw.DivideBytes(c.dt, c.b, c.n); !errors.Is(err, c.is) {
			t.Errorf("DivideBytes(%s, %d bytes, %d) = %v, want %v", c.dt, len(c.b), c.n, err, c.is)
		}
	}
}

// TestAvgIsSumThenDivide spells out Avg over three ranks.
func TestAvgIsSumThenDivide(t *testing.T) {
	ranks := [][]int32{{-7, 10, 1}, {0, 5, 1}, {0, 0, 0}}
	acc := hw.Encode(ranks[0])
	for _, r := range ranks[1:] {
		if err := hw.ReduceBytes(hw.Sum, hw.I32, acc, hw.Encode(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := hw.DivideBytes(hw.I32, acc, len(ranks)); err != nil {
		t.Fatal(err)
	}
	if got, _ := hw.Decode[int32](acc); fmt.Sprint(got) != "[-2 5 0]" {
		t.Errorf("avg = %v, want [-2 5 0] (truncation toward zero)", got)
	}
}

func ExampleReduceBytes() {
	// Two ranks' f16 data, summed elementwise with the arithmetic contract:
	// each sum is done in float32 and rounded to f16, ties to even.
	dst := hw.Encode([]hw.Float16{hw.Float16FromFloat32(2048), hw.Float16FromFloat32(2048), hw.Float16FromFloat32(1.5)})
	src := hw.Encode([]hw.Float16{hw.Float16FromFloat32(1), hw.Float16FromFloat32(3), hw.Float16FromFloat32(-1.5)})
	if err := hw.ReduceBytes(hw.Sum, hw.F16, dst, src); err != nil {
		fmt.Println(err)
		return
	}
	sums, _ := hw.ToFloat64s(hw.F16, dst)
	fmt.Println(sums)

	// Avg is Sum followed by DivideBytes by the number of ranks.
	if err := hw.DivideBytes(hw.F16, dst, 2); err != nil {
		fmt.Println(err)
		return
	}
	avgs, _ := hw.ToFloat64s(hw.F16, dst)
	fmt.Println(avgs)

	fmt.Println(hw.ReduceBytes(hw.Avg, hw.F16, dst, src))
	// Output:
	// [2048 2052 0]
	// [1024 1026 0]
	// hw: reduce f16: bad argument: avg is not elementwise; it is Sum followed by DivideBytes
}

func BenchmarkReduceBytes(b *testing.B) {
	const size = 1 << 20
	for _, c := range []struct {
		op hw.ReduceOp
		dt hw.DType
	}{
		{hw.Sum, hw.F32}, {hw.Sum, hw.F16}, {hw.Sum, hw.BF16}, {hw.Sum, hw.F64},
		{hw.Max, hw.F32}, {hw.Sum, hw.I32},
	} {
		b.Run(c.dt.String()+"-"+c.op.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			vals := make([]float64, size/c.dt.Size())
			for i := range vals {
				vals[i] = rng.Float64()*2 - 1
			}
			dst, _ := hw.FromFloat64s(c.dt, vals)
			src, _ := hw.FromFloat64s(c.dt, vals)
			b.SetBytes(size)
			for b.Loop() {
				if err := hw.ReduceBytes(c.op, c.dt, dst, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
