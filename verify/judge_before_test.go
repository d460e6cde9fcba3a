package verify

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestExpectationsJudgeAsBefore feeds random and special elements (NaN,
// ±Inf, ±0, subnormals, values near overflow) of every float dtype and
// reduce op to the judge and to judgeReduceBefore, the judge as it was
// before it computed one expectation per element: the verdict and the
// description must agree for the exact result, its neighbours and the
// special values.
func TestExpectationsJudgeAsBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range hw.DTypes() {
		f := floatFormat(dt)
		bits := uint(8 * dt.Size())
		mask := uint64(math.MaxUint64) >> (64 - bits)
		special := []uint64{0, f.sign(), f.inf(), f.inf() | f.sign(), f.canonicalNaN(), f.canonicalNaN() | 1, 1, f.inf() - 1, f.inf() - 1 | f.sign()}
		if !dt.IsFloat() {
			special = []uint64{0, 1, mask, mask >> 1, (mask >> 1) + 1}
		}
		for _, op := range hw.ReduceOps() {
			for trial := range 3000 {
				p := 1 + rng.IntN(6)
				vals := make([]uint64, p)
				for i := range vals {
					switch {
					case rng.IntN(8) == 0:
						vals[i] = special[rng.IntN(len(special))]
					case dt.IsFloat() && trial%2 == 0:
						raw, _ := hw.FromFloat64s(dt, []float64{rng.NormFloat64() * math.Pow(2, float64(rng.IntN(20)-10))})
						vals[i] = leBits(raw)
					default:
						vals[i] = rng.Uint64() & mask
					}
				}
				e := expectReduce(dt, op, vals)
				cands := append([]uint64{}, special...)
				if !e.near {
					cands = append(cands, e.bits, (e.bits+1)&mask, (e.bits-1)&mask)
				} else if raw, err := hw.FromFloat64s(dt, []float64{e.center.hi}); err == nil {
					c := leBits(raw)
					cands = append(cands, c, (c+1)&mask, (c-1)&mask, (c+2)&mask)
				}
				for _, got := range cands {
					ok, want := judgeReduce(dt, op, vals, got)
					okBefore, wantBefore := judgeReduceBefore(dt, op, vals, got)
					if ok != okBefore || want != wantBefore {
						t.Fatalf("%s %s %s, got %s: %v %q, before %v %q", dt, op, FormatElems(dt, elemsOf(dt, vals)), fmtElem(dt, got), ok, want, okBefore, wantBefore)
					}
				}
			}
		}
	}
}

func elemsOf(dt hw.DType, vals []uint64) []byte {
	var b []byte
	for _, v := range vals {
		b = appendElem(b, dt, v)
	}
	return b
}

// judgeReduceBefore is judgeReduce as it was before expectations: it decides whether got is an acceptable reduction of vals (one
// element of every rank) and describes what was expected.
func judgeReduceBefore(dt hw.DType, op hw.ReduceOp, vals []uint64, got uint64) (bool, string) {
	p := len(vals)
	if !dt.IsFloat() {
		w := intReduce(dt, op, vals)
		return got == w, fmtElem(dt, w)
	}
	f := floatFormat(dt)
	nan := f.canonicalNaN()
	g := floatValue(dt, got)
	if p == 1 { // a copy, or a division by 1 (which canonicalises NaN)
		w := vals[0]
		if op == hw.Avg && math.IsNaN(floatValue(dt, w)) {
			w = nan
		}
		return got == w, fmtElem(dt, w)
	}
	xs := make([]float64, p)
	hasNaN, pos, neg, zero, signNeg := false, false, false, false, false
	for i, v := range vals {
		xs[i] = floatValue(dt, v)
		hasNaN = hasNaN || math.IsNaN(xs[i])
		pos, neg = pos || math.IsInf(xs[i], 1), neg || math.IsInf(xs[i], -1)
		zero = zero || xs[i] == 0
		signNeg = signNeg != (v&f.sign() != 0)
	}
	if op == hw.Min || op == hw.Max {
		w := vals[0]
		for _, v := range vals[1:] {
			if key(f, v) < key(f, w) == (op == hw.Min) && key(f, v) != key(f, w) {
				w = v
			}
		}
		if hasNaN {
			w = nan
		}
		return got == w, fmtElem(dt, w)
	}
	u, tiny := unitRoundoff(dt)
	gamma := float64(p-1) * u / (1 - float64(p-1)*u) * (1 + 0x1p-50)
	maxFinite := floatValue(dt, f.inf()-1)
	finite := !math.IsNaN(g) && !math.IsInf(g, 0)
	inf := func(negative bool) uint64 { return f.inf() | cond(negative, f.sign(), 0) }
	if op == hw.Prod {
		acc, m, lo, hi := dd{hi: 1}, 1.0, 1.0, 1.0
		for _, x := range xs {
			if finite := !math.IsNaN(x) && !math.IsInf(x, 0); finite && x != 0 {
				acc = acc.mul(x)
				m, lo, hi = max(m, math.Abs(x)), lo*min(1, math.Abs(x)), hi*max(1, math.Abs(x))
			}
		}
		abs := 4 * float64(p) * tiny * math.Pow(m, float64(p-1))
		over := hi*(1+gamma) >= maxFinite
		under := lo*(1-gamma) <= abs
		switch {
		case hasNaN || (pos || neg) && zero:
			return got == nan, fmtElem(dt, nan)
		case pos || neg:
			return got == inf(signNeg) || under && got == nan, fmtElem(dt, inf(signNeg)) + cond(under, " or NaN", "")
		case zero:
			w := cond(signNeg, f.sign(), 0)
			return got == w || over && !finite, fmtElem(dt, w)
		}
		if over {
			return true, "anything (partial products may overflow)"
		}
		tol := gamma*math.Abs(acc.hi) + abs
		return finite && acc.minus(g) <= tol, fmt.Sprintf("%g ± %g", acc.hi, tol)
	}
	acc, abs := dd{}, 0.0 // Sum and Avg
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			acc, abs = acc.add(x), abs+math.Abs(x)
		}
	}
	abs *= 1 + 0x1p-48
	over := abs*(1+gamma) >= maxFinite
	switch {
	case hasNaN || pos && neg:
		return got == nan, fmtElem(dt, nan)
	case pos || neg:
		return got == inf(neg) || over && !finite, fmtElem(dt, inf(neg))
	}
	if over {
		return true, "anything (partial sums may overflow)"
	}
	tol := gamma*abs + 0x1p-100*abs
	diff := acc.minus(g)
	if op == hw.Avg {
		q := float64(p)
		qh := acc.hi / q // the exact average as a double-double
		diff = dd{qh, (math.FMA(-qh, q, acc.hi) + acc.lo) / q}.minus(g)
		tol = tol/q*(1+u) + u*math.Abs(acc.hi/q) + tiny
		return finite && diff <= tol, fmt.Sprintf("%g ± %g", acc.hi/q, tol)
	}
	return finite && diff <= tol, fmt.Sprintf("%g ± %g", acc.hi, tol)
}
