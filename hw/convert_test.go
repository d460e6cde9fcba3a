package hw_test

import (
	"bytes"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/commsim/commsim/hw"
)

func roundTrip[T hw.Element](t *testing.T, vals []T, wantBytes []byte) {
	t.Helper()
	b := hw.Encode(vals)
	if wantBytes != nil && !bytes.Equal(b, wantBytes) {
		t.Errorf("Encode(%v) = % x, want % x", vals, b, wantBytes)
	}
	if len(b) != len(vals)*hw.DTypeOf[T]().Size() {
		t.Errorf("Encode(%v): %d bytes", vals, len(b))
	}
	got, err := hw.Decode[T](b)
	if err != nil {
		t.Fatal(err)
	}
	// Compare bytes, not values, so NaN payloads count.
	if !bytes.Equal(hw.Encode(got), b) || len(got) != len(vals) {
		t.Errorf("Decode(Encode(%v)) = %v", vals, got)
	}
}

func TestEncodeDecode(t *testing.T) {
	snan32 := math.Float32frombits(0xFF800001)
	roundTrip(t, []float32{1, -0.5, snan32}, []byte{0, 0, 0x80, 0x3F, 0, 0, 0, 0xBF, 1, 0, 0x80, 0xFF})
	roundTrip(t, []float64{1, math.Float64frombits(0x7FF0000000000001)}, []byte{0, 0, 0, 0, 0, 0, 0xF0, 0x3F, 1, 0, 0, 0, 0, 0, 0xF0, 0x7F})
	roundTrip(t, []hw.Float16{0x3C00, 0x7C01}, []byte{0x00, 0x3C, 0x01, 0x7C})
	roundTrip(t, []hw.BFloat16{0x3F80, 0xFF81}, []byte{0x80, 0x3F, 0x81, 0xFF})
	roundTrip(t, []int32{1, -2}, []byte{1, 0, 0, 0, 0xFE, 0xFF, 0xFF, 0xFF})
	roundTrip(t, []int64{math.MinInt64}, []byte{0, 0, 0, 0, 0, 0, 0, 0x80})
	roundTrip(t, []uint8{0, 255}, []byte{0, 255})
	roundTrip(t, []float32{}, []byte{})

	// Decode copies: changing the input afterwards does not change the output.
	in := []byte{7, 8}
	out, _ := hw.Decode[uint8](in)
	in[0] = 0
	if out[0] != 7 {
		t.Errorf("Decode[uint8] aliases its input")
	}

	for _, n := range []int{1, 3, 5, 7} {
		if _, err := hw.Decode[float64](make([]byte, n)); !errors.Is(err, hw.ErrSizeMismatch) {
			t.Errorf("Decode[float64] of %d bytes: err = %v", n, err)
		}
	}
	if _, err := hw.Decode[hw.Float16](make([]byte, 3)); !errors.Is(err, hw.ErrSizeMismatch) {
		t.Errorf("Decode[Float16] of 3 bytes: err = %v", err)
	}
}

func TestToFloat64s(t *testing.T) {
	check := func(dt hw.DType, b []byte, want ...float64) {
		t.Helper()
		got, err := hw.ToFloat64s(dt, b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("ToFloat64s(%s) = %v, want %v", dt, got, want)
		}
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Errorf("ToFloat64s(%s)[%d] = %v (%#x), want %v (%#x)", dt, i, got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
			}
		}
	}
	check(hw.F32, hw.Encode([]float32{1.5, math.Float32frombits(1), float32(math.Inf(-1))}), 1.5, math.Ldexp(1, -149), math.Inf(-1))
	check(hw.F64, hw.Encode([]float64{math.Pi, math.Copysign(0, -1)}), math.Pi, math.Copysign(0, -1))
	check(hw.F16, hw.Encode([]hw.Float16{0x0001, 0x7BFF, 0x8000}), math.Ldexp(1, -24), 65504, math.Copysign(0, -1))
	check(hw.BF16, hw.Encode([]hw.BFloat16{0x0001, 0x7F7F}), math.Ldexp(1, -133), math.Ldexp(255, 120))
	check(hw.I32, hw.Encode([]int32{math.MinInt32, 7}), math.MinInt32, 7)
	check(hw.I64, hw.Encode([]int64{1<<53 + 1, -(1<<53 + 3), math.MaxInt64}), 1<<53, -(1<<53 + 4), 1<<63) // rounded, ties to even
	check(hw.U8, []byte{0, 255}, 0, 255)
	// NaN payloads widen bit for bit, signalling ones included.
	check(hw.F32, []byte{1, 0, 0x80, 0xFF}, math.Float64frombits(0xFFF0000020000000))
	check(hw.F16, []byte{0x01, 0x7C}, math.Float64frombits(0x7FF0040000000000))

	if _, err := hw.ToFloat64s(0, nil); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("ToFloat64s(invalid) err = %v", err)
	}
	if _, err := hw.ToFloat64s(hw.I32, make([]byte, 5)); !errors.Is(err, hw.ErrSizeMismatch) {
		t.Errorf("ToFloat64s(i32, 5 bytes) err = %v", err)
	}
}

func TestFromFloat64s(t *testing.T) {
	negZero := math.Copysign(0, -1)
	in := []float64{1, -2.5, 65520, 65519.99, math.Ldexp(1, -25), negZero, math.Inf(1), math.NaN()}
	check := func(dt hw.DType, want []byte) {
		t.Helper()
		got, err := hw.FromFloat64s(dt, in)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("FromFloat64s(%s) = % x, want % x", dt, got, want)
		}
	}
	check(hw.F16, hw.Encode([]hw.Float16{0x3C00, 0xC100, 0x7C00, 0x7BFF, 0, 0x8000, 0x7C00, 0x7E00}))
	check(hw.BF16, hw.Encode([]hw.BFloat16{0x3F80, 0xC020, 0x4780, 0x4780, 0x3300, 0x8000, 0x7F80, 0x7FC0}))
	check(hw.F32, hw.Encode([]float32{1, -2.5, 65520, 65519.99, float32(math.Ldexp(1, -25)), float32(negZero),
		float32(math.Inf(1)), math.Float32frombits(0x7FC00000)}))
	check(hw.F64, hw.Encode(in))
	check(hw.I32, hw.Encode([]int32{1, -2, 65520, 65519, 0, 0, 0, 0}))
	check(hw.U8, []byte{1, 254, 240, 239, 0, 0, 0, 0})

	// f32 rounds once from float64, as Go's conversion does; f16 never
	// passes through float32.
	x := 1 + math.Ldexp(1, -11) + math.Ldexp(1, -30) // just above an f16 tie, and a float32 tie
	if b, _ := hw.FromFloat64s(hw.F16, []float64{x}); !bytes.Equal(b, []byte{0x01, 0x3C}) {
		t.Errorf("FromFloat64s(f16, 1+2^-11+2^-30) = % x, want 01 3c (single rounding)", b)
	}
	if _, err := hw.FromFloat64s(0, in); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("FromFloat64s(invalid) err = %v", err)
	}
	if b, err := hw.FromFloat64s(hw.F32, nil); err != nil || len(b) != 0 {
		t.Errorf("FromFloat64s(f32, nil) = %v, %v", b, err)
	}
}

func TestFromFloat64sIntegerWrap(t *testing.T) {
	two := func(e int) float64 { return math.Ldexp(1, e) }
	cases := []struct {
		v   float64
		i32 int32
		i64 int64
		u8  uint8
	}{
		{math.NaN(), 0, 0, 0},
		{math.Inf(1), 0, 0, 0},
		{math.Inf(-1), 0, 0, 0},
		{2.9, 2, 2, 2},
		{-2.9, -2, -2, 254},
		{-0.5, 0, 0, 0},
		{-1, -1, -1, 255},
		{300.7, 300, 300, 44},
		{two(31), math.MinInt32, 1 << 31, 0},
		{two(32) + 5, 5, 1<<32 + 5, 5},
		{two(63), 0, math.MinInt64, 0},
		{-two(63), 0, math.MinInt64, 0},
		{two(64) + two(12), 4096, 4096, 0},
		{-(two(63) + two(11)), -2048, math.MaxInt64 - 2047, 0},
		{two(116), 0, 0, 0},
		{1e300, 0, 0, 0},
		{-math.MaxFloat64, 0, 0, 0},
	}
	for _, c := range cases {
		b32, _ := hw.FromFloat64s(hw.I32, []float64{c.v})
		b64, _ := hw.FromFloat64s(hw.I64, []float64{c.v})
		b8, _ := hw.FromFloat64s(hw.U8, []float64{c.v})
		g32, _ := hw.Decode[int32](b32)
		g64, _ := hw.Decode[int64](b64)
		if g32[0] != c.i32 || g64[0] != c.i64 || b8[0] != c.u8 {
			t.Errorf("%g: i32 %d, i64 %d, u8 %d; want %d, %d, %d", c.v, g32[0], g64[0], b8[0], c.i32, c.i64, c.u8)
		}
	}

	// Against math/big: trunc(v) mod 2^64, for values of every magnitude.
	rng := rand.New(rand.NewPCG(11, 12))
	mod := new(big.Int).Lsh(big.NewInt(1), 64)
	vals := make([]float64, 100_000)
	for i := range vals {
		// A full 53-bit significand (odd ones included) times 2^-10..2^129.
		m := math.Float64frombits(0x3FF<<52 | rng.Uint64()>>12)
		if rng.IntN(2) == 0 {
			m = -m
		}
		vals[i] = math.Ldexp(m, rng.IntN(140)-10)
	}
	b, _ := hw.FromFloat64s(hw.I64, vals)
	got, _ := hw.Decode[int64](b)
	for i, v := range vals {
		n, _ := big.NewFloat(v).Int(nil) // truncates toward zero
		n.Mod(n, mod)                    // Euclidean: in [0, 2^64)
		if want := int64(n.Uint64()); got[i] != want {
			t.Fatalf("FromFloat64s(i64, %g) = %d, want %d", v, got[i], want)
		}
	}
}

// TestFloat64sRoundTrip: every value of every dtype survives
// ToFloat64s then FromFloat64s, bit for bit (NaNs become quiet).
func TestFloat64sRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, dt := range hw.DTypes() {
		b := make([]byte, 4096*dt.Size())
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		vals, err := hw.ToFloat64s(dt, b)
		if err != nil {
			t.Fatal(err)
		}
		back, err := hw.FromFloat64s(dt, vals)
		if err != nil {
			t.Fatal(err)
		}
		if dt == hw.I64 { // values above 2^53 round; compare those that do not
			in, _ := hw.Decode[int64](b)
			out, _ := hw.Decode[int64](back)
			for i := range in {
				if math.Abs(float64(in[i])) < 1<<53 && in[i] != out[i] {
					t.Errorf("i64 %d came back as %d", in[i], out[i])
				}
			}
			continue
		}
		if dt.IsFloat() {
			// Non-NaN elements come back bit for bit; NaNs come back as
			// NaNs (made quiet, which the codec tests check).
			again, _ := hw.ToFloat64s(dt, back)
			for i, v := range vals {
				sz := dt.Size()
				if math.IsNaN(v) {
					if !math.IsNaN(again[i]) {
						t.Errorf("%s element %d: NaN came back as %v", dt, i, again[i])
					}
					continue
				}
				if !bytes.Equal(b[i*sz:(i+1)*sz], back[i*sz:(i+1)*sz]) {
					t.Errorf("%s element %d: % x came back as % x", dt, i, b[i*sz:(i+1)*sz], back[i*sz:(i+1)*sz])
				}
			}
			continue
		}
		if !bytes.Equal(b, back) {
			t.Errorf("%s: round trip changed the bytes", dt)
		}
	}
}
