package hw

import (
	"flag"
	"math"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
)

// refFormat is a slow, independent reference for rounding to a narrow
// binary format: it lists the value of every positive finite pattern
// (computed with math.Ldexp, not with the codec) and rounds by finding the
// two neighbours of x and comparing x with their midpoint, which is exact in
// float64. The slot of +Inf holds 2^(emax+1), the value the next pattern
// would have, so overflow is just rounding to that slot.
type refFormat struct {
	ebits, mbits uint
	inf          uint64 // +Inf pattern
	vals         []float64
}

func newRefFormat(ebits, mbits uint) *refFormat {
	bias := 1<<(ebits-1) - 1
	r := &refFormat{ebits: ebits, mbits: mbits, inf: (1<<ebits - 1) << mbits}
	r.vals = make([]float64, r.inf+1)
	for b := range r.vals {
		e := b >> mbits
		m := b & (1<<mbits - 1)
		if e == 0 {
			r.vals[b] = math.Ldexp(float64(m), 1-bias-int(mbits))
		} else {
			r.vals[b] = math.Ldexp(float64(1<<mbits+m), e-bias-int(mbits))
		}
	}
	return r
}

// round returns the pattern nearest to x, ties to even.
func (r *refFormat) round(x float64) uint64 {
	var sign uint64
	if math.Signbit(x) {
		sign = 1 << (r.ebits + r.mbits)
	}
	if math.IsNaN(x) {
		payload := math.Float64bits(x) & (1<<52 - 1) >> (52 - r.mbits)
		return sign | r.inf | 1<<(r.mbits-1) | payload
	}
	ax := math.Abs(x)
	if ax >= r.vals[r.inf] {
		return sign | r.inf
	}
	// Largest lo with vals[lo] <= ax.
	lo := uint64(sort.Search(int(r.inf), func(i int) bool { return r.vals[i] > ax }) - 1)
	if r.vals[lo] == ax {
		return sign | lo
	}
	hi := lo + 1
	mid := (r.vals[lo] + r.vals[hi]) / 2
	switch {
	case ax < mid:
		return sign | lo
	case ax > mid:
		return sign | hi
	case lo&1 == 0:
		return sign | lo
	default:
		return sign | hi
	}
}

// midpoint returns the exact midpoint between positive finite pattern b and
// the next one.
func (r *refFormat) midpoint(b uint64) float64 { return (r.vals[b] + r.vals[b+1]) / 2 }

var (
	refF16  = newRefFormat(5, 10)
	refBF16 = newRefFormat(8, 7)
)

func TestFloat16KnownBits(t *testing.T) {
	cases := []struct {
		in   float64
		want Float16
	}{
		{1, 0x3C00},
		{-2, 0xC000},
		{65504, 0x7BFF},
		{65520, 0x7C00},
		{65519.99, 0x7BFF},
		{-65520, 0xFC00},
		{1e10, 0x7C00},
		{math.Ldexp(1, -24), 0x0001},
		{math.Ldexp(1, -25), 0x0000},
		{-math.Ldexp(1, -25), 0x8000},
		{math.Ldexp(1.5, -25), 0x0001},
		{math.Ldexp(3, -25), 0x0002},
		{math.Ldexp(5, -25), 0x0002},
		{math.Ldexp(7, -25), 0x0004},
		{math.Ldexp(1, -14), 0x0400},
		{math.Ldexp(1023, -24), 0x03FF},
		{math.Ldexp(2047, -25), 0x0400}, // rounds up from the largest subnormal to the smallest normal
		{math.Ldexp(1, -30), 0x0000},
		{math.SmallestNonzeroFloat64, 0x0000},
		{math.Copysign(0, -1), 0x8000},
		{0, 0x0000},
		{math.Inf(1), 0x7C00},
		{math.Inf(-1), 0xFC00},
		{math.NaN(), 0x7E00},
		{-math.NaN(), 0xFE00},
		{1 + math.Ldexp(1, -11), 0x3C00},
		{1 + 3*math.Ldexp(1, -11), 0x3C02},
		{2 - math.Ldexp(1, -12), 0x4000}, // rounds up into the next binade
		{0.1, 0x2E66},
		{2048 + 1, 0x6800},
		{2048 + 3, 0x6802},
	}
	for _, c := range cases {
		if got := Float16FromFloat64(c.in); got != c.want {
			t.Errorf("Float16FromFloat64(%v) = %#04x, want %#04x", c.in, got, c.want)
		}
		f := float32(c.in)
		if float64(f) != c.in && !math.IsNaN(c.in) && c.in != 65519.99 && c.in != 0.1 && c.in != 1e10 {
			continue // the float32 path sees a different value
		}
		if got := Float16FromFloat32(f); got != c.want {
			t.Errorf("Float16FromFloat32(%v) = %#04x, want %#04x", f, got, c.want)
		}
	}
}

func TestBFloat16KnownBits(t *testing.T) {
	cases := []struct {
		in   uint32 // float32 bits
		want BFloat16
	}{
		{0x3F800000, 0x3F80}, // 1
		{0x3F808000, 0x3F80}, // tie, to even
		{0x3F818000, 0x3F82}, // tie, to even (up)
		{0x3F808001, 0x3F81}, // above the tie
		{0x3F807FFF, 0x3F80}, // below the tie
		{0x7F7F0000, 0x7F7F}, // largest finite
		{0x7F7F7FFF, 0x7F7F}, // just below the overflow midpoint
		{0x7F7F8000, 0x7F80}, // the overflow midpoint goes to Inf
		{math.Float32bits(math.MaxFloat32), 0x7F80},
		{0x00010000, 0x0001}, // 2^-133, smallest subnormal
		{0x00008000, 0x0000}, // 2^-134, tie to even 0
		{0x00018000, 0x0002}, // 1.5 × 2^-133, tie to even
		{0x00008001, 0x0001},
		{0x007FFFFF, 0x0080}, // largest f32 subnormal rounds to the smallest normal
		{0x80000000, 0x8000},
		{0x7F800000, 0x7F80},
		{0xFF800000, 0xFF80},
		{0x7FC00000, 0x7FC0},
		{0x7F800001, 0x7FC0}, // signalling NaN with a low payload: quiet, never Inf
		{0xFFA00000, 0xFFE0}, // payload top bits and sign kept
	}
	for _, c := range cases {
		f := math.Float32frombits(c.in)
		if got := BFloat16FromFloat32(f); got != c.want {
			t.Errorf("BFloat16FromFloat32(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
		if got := BFloat16FromFloat64(math.Float64frombits(f64FromF32Bits(c.in))); got != c.want {
			t.Errorf("BFloat16FromFloat64(%#08x) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	if got := BFloat16FromFloat64(math.Ldexp(1, -133)); got != 1 {
		t.Errorf("BFloat16FromFloat64(2^-133) = %#04x, want 0x0001", got)
	}
	if got := BFloat16FromFloat64(math.NaN()); got != 0x7FC0 {
		t.Errorf("BFloat16FromFloat64(NaN) = %#04x, want 0x7FC0", got)
	}
	// A float64 just above a bf16 tie must round up: going through float32
	// first would land on the tie and round to even (down).
	x := 1 + math.Ldexp(1, -8) + math.Ldexp(1, -40)
	if got := BFloat16FromFloat64(x); got != 0x3F81 {
		t.Errorf("BFloat16FromFloat64(1+2^-8+2^-40) = %#04x, want 0x3F81 (single rounding)", got)
	}
}

// TestHalfWidenExhaustive checks every pattern of both formats: widening is
// exact (against Ldexp-computed values) and narrowing the widened value
// gives the pattern back, with signalling NaNs made quiet.
func TestHalfWidenExhaustive(t *testing.T) {
	for _, f := range []struct {
		name   string
		ref    *refFormat
		quiet  uint16
		widen  func(uint16) (float32, float64)
		narrow func(float32, float64) (uint16, uint16)
	}{
		{"f16", refF16, f16QuietBit,
			func(h uint16) (float32, float64) { return Float16(h).Float32(), Float16(h).Float64() },
			func(a float32, b float64) (uint16, uint16) {
				return uint16(Float16FromFloat32(a)), uint16(Float16FromFloat64(b))
			}},
		{"bf16", refBF16, bf16QuietBit,
			func(h uint16) (float32, float64) { return BFloat16(h).Float32(), BFloat16(h).Float64() },
			func(a float32, b float64) (uint16, uint16) {
				return uint16(BFloat16FromFloat32(a)), uint16(BFloat16FromFloat64(b))
			}},
	} {
		inf := uint16(f.ref.inf)
		for i := range 1 << 16 {
			h := uint16(i)
			w32, w64 := f.widen(h)
			mag := h & 0x7FFF
			want := h
			if mag > inf {
				want = h | f.quiet
				if !math.IsNaN(float64(w32)) || !math.IsNaN(w64) {
					t.Fatalf("%s %#04x: widened to %v, %v, want NaN", f.name, h, w32, w64)
				}
				// The payload is kept bit for bit.
				if p := math.Float32bits(w32) & 0x7FFFFF >> (23 - f.ref.mbits); p != uint32(h)&(1<<f.ref.mbits-1) {
					t.Fatalf("%s %#04x: float32 payload %#x", f.name, h, p)
				}
			} else {
				v := f.ref.vals[min(mag, inf)]
				if mag == inf {
					v = math.Inf(1)
				}
				if h&0x8000 != 0 {
					v = -v
				}
				if float64(w32) != v || w64 != v || math.Signbit(w64) != (h&0x8000 != 0) {
					t.Fatalf("%s %#04x: widened to %v, %v, want %v", f.name, h, w32, w64, v)
				}
			}
			if a, b := f.narrow(w32, w64); a != want || b != want {
				t.Fatalf("%s %#04x: round trip gave %#04x (float32), %#04x (float64), want %#04x", f.name, h, a, b, want)
			}
		}
	}
}

// randomF32 returns float32 bit patterns biased towards the interesting
// parts of a target format: ties and near-ties between neighbouring
// patterns, the subnormal range and the overflow boundary.
func randomF32(rng *rand.Rand, ref *refFormat) uint32 {
	sign := uint32(rng.IntN(2)) << 31
	switch rng.IntN(4) {
	case 0:
		return rng.Uint32()
	case 1: // exponents around the format's range
		bias := 1<<(ref.ebits-1) - 1
		lo, hi := 127-bias-int(ref.mbits)-3, 127+bias+2
		e := uint32(max(0, min(255, lo+rng.IntN(hi-lo+1))))
		return sign | e<<23 | rng.Uint32()&0x7FFFFF
	default: // a midpoint, nudged by -2..2 float32 ulps
		b := rng.Uint64N(ref.inf)
		m := math.Float32bits(float32(ref.midpoint(b))) // exact: the midpoint has mbits+2 bits
		return sign | uint32(int32(m)+int32(rng.IntN(5)-2))
	}
}

func TestFloat16FromFloat32AgainstReference(t *testing.T) {
	n := 3_000_000
	if testing.Short() {
		n = 200_000
	}
	for _, f := range []struct {
		name string
		ref  *refFormat
		fast func(uint32) uint16
	}{
		{"f16", refF16, func(u uint32) uint16 { return uint16(Float16FromFloat32(math.Float32frombits(u))) }},
		{"bf16", refBF16, func(u uint32) uint16 { return uint16(BFloat16FromFloat32(math.Float32frombits(u))) }},
	} {
		rng := rand.New(rand.NewPCG(1, 2))
		for range n {
			u := randomF32(rng, f.ref)
			x := math.Float64frombits(f64FromF32Bits(u))
			want := uint16(f.ref.round(x))
			if got := f.fast(u); got != want {
				t.Fatalf("%s from float32 %#08x (%g) = %#04x, want %#04x", f.name, u, x, got, want)
			}
		}
	}
}

func TestFloat16FromFloat64AgainstReference(t *testing.T) {
	n := 2_000_000
	if testing.Short() {
		n = 200_000
	}
	for _, f := range []struct {
		name string
		ref  *refFormat
		conv func(float64) uint16
	}{
		{"f16", refF16, func(x float64) uint16 { return uint16(Float16FromFloat64(x)) }},
		{"bf16", refBF16, func(x float64) uint16 { return uint16(BFloat16FromFloat64(x)) }},
	} {
		rng := rand.New(rand.NewPCG(3, 4))
		bias := 1<<(f.ref.ebits-1) - 1
		for range n {
			var x float64
			switch rng.IntN(4) {
			case 0:
				x = math.Float64frombits(rng.Uint64())
			case 1:
				e := -bias - int(f.ref.mbits) - 3 + rng.IntN(2*bias+int(f.ref.mbits)+6)
				x = math.Ldexp(1+rng.Float64(), e)
			default: // midpoints and their float64 neighbours
				x = f.ref.midpoint(rng.Uint64N(f.ref.inf))
				switch rng.IntN(3) {
				case 0:
					x = math.Nextafter(x, 0)
				case 1:
					x = math.Nextafter(x, math.Inf(1))
				}
			}
			if rng.IntN(2) == 0 {
				x = -x
			}
			if got, want := f.conv(x), uint16(f.ref.round(x)); got != want {
				t.Fatalf("%s from float64 %g (%#016x) = %#04x, want %#04x", f.name, x, math.Float64bits(x), got, want)
			}
		}
	}
}

// TestNarrowF64ToF32 checks the float32 case of the generic rounding, used
// by FromFloat64s, against Go's own float64 to float32 conversion.
func TestNarrowF64ToF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 1_000_000 {
		var x float64
		if i%2 == 0 {
			x = math.Float64frombits(rng.Uint64())
		} else { // float32's range, its subnormals and its overflow
			x = math.Ldexp(1+rng.Float64(), -155+rng.IntN(287))
		}
		if math.IsNaN(x) {
			continue
		}
		if got, want := uint32(narrowF64Bits(math.Float64bits(x), 8, 23)), math.Float32bits(float32(x)); got != want {
			t.Fatalf("narrow %g to f32 = %#08x, want %#08x", x, got, want)
		}
	}
	if got := narrowF64Bits(0xFFF0000000000001, 8, 23); got != 0xFFC00000 {
		t.Errorf("signalling NaN with zero top payload narrowed to %#08x, want 0xFFC00000", got)
	}
}

var exhaustive = flag.Bool("hw.exhaustive", false, "check the float32 fast paths on all 2^32 patterns")

// TestFastPathsMatchGeneric checks the float32 fast paths against the
// generic float64 rounding, and the block loops of the f16 arithmetic
// (which inline the fast paths' normal cases) against the fast paths: on
// every float32 within 3 ulps of a midpoint of either format or of a
// boundary of the normal case, and on every 257th float32 pattern (257 is
// odd, so the dropped low bits take every value); or, with -hw.exhaustive,
// on all 2^32 patterns (about 90 s of CPU time, spread over GOMAXPROCS).
func TestFastPathsMatchGeneric(t *testing.T) {
	var failed atomic.Bool
	check := func(u uint32) {
		x := f64FromF32Bits(u)
		h, g := f16FromF32Bits(u), uint16(narrowF64Bits(x, 5, 10))
		b, c := bf16FromF32Bits(u), uint16(narrowF64Bits(x, 8, 7))
		if (h != g || b != c) && !failed.Swap(true) {
			t.Errorf("float32 %#08x: f16 fast %#04x generic %#04x; bf16 fast %#04x generic %#04x", u, h, g, b, c)
		}
	}
	var batch []float32
	flush := func() {
		out := make([]byte, 2*len(batch))
		roundF16s(out, batch)
		for i, r := range batch {
			if got, want := le.Uint16(out[2*i:]), roundF16(r); got != want && !failed.Swap(true) {
				t.Errorf("roundF16s(%#08x) = %#04x, want %#04x", math.Float32bits(r), got, want)
			}
		}
		batch = batch[:0]
	}
	test := func(u uint32) {
		check(u)
		if batch = append(batch, math.Float32frombits(u)); len(batch) == 4096 {
			flush()
		}
	}
	centres := []uint32{0, 0x38800000, 0x477FF000, 0x7F800000, 0x7FC00000}
	for _, ref := range []*refFormat{refF16, refBF16} {
		for b := range ref.inf {
			centres = append(centres, math.Float32bits(float32(ref.midpoint(b))))
		}
	}
	for _, m := range centres {
		for d := range uint32(7) {
			test(m + d - 3)
			test(m + d - 3 ^ 1<<31)
		}
	}
	if !*exhaustive {
		for v := uint64(0); v < 1<<32; v += 257 {
			test(uint32(v))
		}
		flush()
	} else {
		flush()
		var wg sync.WaitGroup
		workers := uint64(runtime.GOMAXPROCS(0))
		for w := range workers {
			wg.Go(func() {
				for v := w; v < 1<<32 && !failed.Load(); v += workers {
					check(uint32(v))
				}
			})
		}
		wg.Wait()
	}

	all := make([]byte, 1<<17)
	for h := range 1 << 16 {
		le.PutUint16(all[2*h:], uint16(h))
	}
	w := make([]float32, 1<<16)
	widenF16s(w, all)
	for h, f := range w {
		if got, want := math.Float32bits(f), f32FromF16Bits(uint16(h)); got != want {
			t.Fatalf("widenF16s(%#04x) = %#08x, want %#08x", h, got, want)
		}
	}
}
