package verify

import (
	"errors"
	"fmt"
	"math"

	"github.com/commsim/commsim/hw"
)

// CheckReference returns nil when outputs (every rank's output buffer, as
// Run returns them) are what c's collective must compute from c.Inputs,
// and otherwise an error naming the first wrong element and how many are
// wrong. Outputs the op leaves undefined (gather and reduce off the root)
// are not looked at. The expectations:
//
//   - copies (allgather, gather, broadcast, alltoall, sendrecv) and every
//     result of one rank (p = 1, a plain copy, or a division by 1 for avg)
//     are bit-exact;
//   - integers: exact, with the dtype's wrap-around; avg truncates the
//     wrapped sum toward zero;
//   - float min and max: exact bits (IEEE 754-2019: NaN anywhere gives the
//     canonical NaN, −0 < +0), since they are associative bit for bit;
//   - float sum: NaN anywhere, or +Inf and −Inf, give the canonical NaN;
//     one sign of Inf gives that Inf; a finite result lies within
//     γ(p−1)·Σ|x| of the exact sum, γ(k) = k·u/(1−k·u) and u the unit
//     roundoff (2^-24 f32, 2^-53 f64, 2^-11 f16, 2^-8 bf16): the bound of
//     any order of the p−1 additions each plan makes, each rounded once
//     (hw's f16 and bf16 double rounding equals single rounding);
//   - float avg: the sum's rules, the bound divided by p, plus u·|avg|
//     and one subnormal step η for the division;
//   - float prod: NaN for NaN or 0 × Inf; the sign is always the product
//     of the signs; a finite result within γ(p−1)·|Πx| + 4p·η·M^(p−1)
//     (M the largest |x|, at least 1: the underflow term);
//   - where partial results could overflow (Σ|x| or Π max(1,|x|) reaching
//     the dtype's largest finite) any non-finite result is accepted, and
//     where a partial product could underflow to 0 before meeting an Inf,
//     NaN is accepted for ±Inf.
//
// The exact values come from double-double arithmetic (TwoSum, and FMA
// for products): about 106 bits, so even f64 is checked against something
// far more precise; its own error (2^-100·Σ|x| and the underflow term) is
// added to the bound.
func CheckReference(c Case, outputs [][]byte) error {
	wrong, first, err := CountWrong(c, outputs)
	if err != nil {
		return err
	}
	if wrong > 0 {
		return fmt.Errorf("%w: %s; %d element(s) wrong", ErrWrong, first, wrong)
	}
	return nil
}

// CountWrong is CheckReference's verdict as numbers: how many output
// elements (on the ranks the op defines) break the bounds, and the first of
// them described. err reports outputs of the wrong shape.
func CountWrong(c Case, outputs [][]byte) (wrong int, first string, err error) {
	if err := c.Spec.Validate(); err != nil {
		return 0, "", fmt.Errorf("%w: %w", ErrWrong, err) // the zero Case judged nothing and passed
	}
	p := c.Spec.Ranks
	if len(outputs) != p || len(c.Inputs) != p {
		return 0, "", fmt.Errorf("%w: %d outputs and %d inputs for %d ranks", ErrWrong, len(outputs), len(c.Inputs), p)
	}
	if err := checkInputLens(c); err != nil {
		return 0, "", err
	}
	ranks := make([]int, p)
	for r := range ranks {
		ranks[r] = r
	}
	return countWrongRanks(c, ranks, outputs)
}

// CountWrongRank is CountWrong for the output of one rank only, judged
// against every rank's input in c.Inputs: what a process that holds one
// rank of a multi-process collective can check. A rank whose output the op
// leaves undefined (gather and reduce off the root) has none wrong.
func CountWrongRank(c Case, rank int, output []byte) (wrong int, first string, err error) {
	if p := c.Spec.Ranks; len(c.Inputs) != p || rank < 0 || rank >= p {
		return 0, "", fmt.Errorf("%w: rank %d with %d inputs for %d ranks", ErrWrong, rank, len(c.Inputs), p)
	}
	if err := checkInputLens(c); err != nil {
		return 0, "", err
	}
	outputs := make([][]byte, c.Spec.Ranks)
	outputs[rank] = output
	return countWrongRanks(c, []int{rank}, outputs)
}

// checkInputLens refuses inputs that are not the spec's InLen elements,
// which the judge would index out of range.
func checkInputLens(c Case) error {
	in, _ := c.Spec.BufferLens()
	for q, b := range c.Inputs {
		if len(b) != in*c.Spec.DType.Size() {
			return fmt.Errorf("%w: rank %d input has %d bytes, want %d", ErrWrong, q, len(b), in*c.Spec.DType.Size())
		}
	}
	return nil
}

// ErrWrong is wrapped by the errors of CheckReference, and by those of
// CountWrong and CountWrongRank for outputs or inputs of the wrong shape.
var ErrWrong = errors.New("verify: wrong output")

// dd is a double-double: the unevaluated sum hi + lo.
type dd struct{ hi, lo float64 }

func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	return s, (a - (s - bb)) + (b - bb)
}

func (d dd) add(x float64) dd {
	s, e := twoSum(d.hi, x)
	e += d.lo
	hi := s + e
	return dd{hi, e - (hi - s)}
}

func (d dd) mul(x float64) dd {
	p := d.hi * x
	e := math.FMA(d.hi, x, -p) + d.lo*x
	hi := p + e
	return dd{hi, e - (hi - p)}
}

// minus is |x − d|, nearly exactly.
func (d dd) minus(x float64) float64 {
	s, e := twoSum(x, -d.hi)
	return math.Abs(s + (e - d.lo))
}

// unitRoundoff is half the gap from 1 to the next float of dt; tiny is
// its smallest subnormal.
func unitRoundoff(dt hw.DType) (u, tiny float64) {
	f := floatFormat(dt)
	return math.Ldexp(1, -int(f.mbits)-1), floatValue(dt, 1)
}

// judgeReduce decides whether got is an acceptable reduction of vals (one
// element of every rank) and describes what was expected.
func judgeReduce(dt hw.DType, op hw.ReduceOp, vals []uint64, got uint64) (bool, string) {
	e := expectReduce(dt, op, vals)
	return e.accepts(got), e.String()
}

// expectation is what the reference accepts for one reduced element. It is
// computed once per element and judges every rank that holds the element
// (all of them in an all-reduce); describing it (String) is left for the
// first wrong element, since formatting costs more than judging.
type expectation struct {
	dt        hw.DType
	bits      uint64 // the exact result, unless anything or near
	orBits    uint64 // another exact result accepted when hasOr
	hasOr     bool
	nonFinite bool   // any NaN or Inf is accepted too
	anything  string // when set, every result is accepted, for this reason
	near      bool   // a finite result within tol of center is wanted
	center    dd
	shown     float64 // center as printed
	tol       float64
}

// accepts reports whether got is an acceptable result.
func (e *expectation) accepts(got uint64) bool {
	switch {
	case e.anything != "":
		return true
	case e.near:
		g := floatValue(e.dt, got)
		return !math.IsNaN(g) && !math.IsInf(g, 0) && e.center.minus(g) <= e.tol
	case got == e.bits || e.hasOr && got == e.orBits:
		return true
	case e.nonFinite:
		g := floatValue(e.dt, got)
		return math.IsNaN(g) || math.IsInf(g, 0)
	}
	return false
}

// String describes the expected result.
func (e *expectation) String() string {
	switch {
	case e.anything != "":
		return "anything (" + e.anything + ")"
	case e.near:
		return fmt.Sprintf("%g ± %g", e.shown, e.tol)
	case e.hasOr:
		return fmtElem(e.dt, e.bits) + " or NaN"
	}
	return fmtElem(e.dt, e.bits)
}

// expectReduce is the reference's verdict rules for the reduction of vals
// (one element of every rank).
func expectReduce(dt hw.DType, op hw.ReduceOp, vals []uint64) expectation {
	p := len(vals)
	if !dt.IsFloat() {
		return expectation{dt: dt, bits: intReduce(dt, op, vals)}
	}
	f := floatFormat(dt)
	nan := f.canonicalNaN()
	if p == 1 { // a copy, or a division by 1 (which canonicalises NaN)
		w := vals[0]
		if op == hw.Avg && math.IsNaN(floatValue(dt, w)) {
			w = nan
		}
		return expectation{dt: dt, bits: w}
	}
	if op == hw.Sum || op == hw.Avg {
		return expectSum(dt, op, vals)
	}
	hasNaN, pos, neg, zero, signNeg := false, false, false, false, false
	for _, v := range vals {
		x := floatValue(dt, v)
		hasNaN = hasNaN || math.IsNaN(x)
		pos, neg = pos || math.IsInf(x, 1), neg || math.IsInf(x, -1)
		zero = zero || x == 0
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
		return expectation{dt: dt, bits: w}
	}
	u, tiny := unitRoundoff(dt)
	gamma := float64(p-1) * u / (1 - float64(p-1)*u) * (1 + 0x1p-50)
	maxFinite := floatValue(dt, f.inf()-1)
	inf := func(negative bool) uint64 { return f.inf() | cond(negative, f.sign(), 0) }
	// Prod: the rest are expectSum's and handled above.
	acc, m, lo, hi := dd{hi: 1}, 1.0, 1.0, 1.0
	for _, v := range vals {
		if x := floatValue(dt, v); !math.IsNaN(x) && !math.IsInf(x, 0) && x != 0 {
			acc = acc.mul(x)
			m, lo, hi = max(m, math.Abs(x)), lo*min(1, math.Abs(x)), hi*max(1, math.Abs(x))
		}
	}
	abs := 4 * float64(p) * tiny * math.Pow(m, float64(p-1))
	over := hi*(1+gamma) >= maxFinite
	under := lo*(1-gamma) <= abs
	switch {
	case hasNaN || (pos || neg) && zero:
		return expectation{dt: dt, bits: nan}
	case pos || neg:
		return expectation{dt: dt, bits: inf(signNeg), orBits: nan, hasOr: under}
	case zero:
		return expectation{dt: dt, bits: cond(signNeg, f.sign(), 0), nonFinite: over}
	case over:
		return expectation{dt: dt, anything: "partial products may overflow"}
	}
	tol := gamma*math.Abs(acc.hi) + abs
	return expectation{dt: dt, near: true, center: acc, shown: acc.hi, tol: tol}
}

// expectSum is expectReduce for Sum and Avg of floats over p > 1 ranks,
// in one pass over the values: the case --check judges most, once per
// element.
func expectSum(dt hw.DType, op hw.ReduceOp, vals []uint64) expectation {
	p := len(vals)
	f := floatFormat(dt)
	nan := f.canonicalNaN()
	acc, abs := dd{}, 0.0
	hasNaN, pos, neg := false, false, false
	for _, v := range vals {
		switch x := floatValue(dt, v); {
		case x != x:
			hasNaN = true
		case math.IsInf(x, 1):
			pos = true
		case math.IsInf(x, -1):
			neg = true
		default:
			acc, abs = acc.add(x), abs+math.Abs(x)
		}
	}
	u, tiny := unitRoundoff(dt)
	gamma := float64(p-1) * u / (1 - float64(p-1)*u) * (1 + 0x1p-50)
	maxFinite := floatValue(dt, f.inf()-1)
	abs *= 1 + 0x1p-48
	over := abs*(1+gamma) >= maxFinite
	switch {
	case hasNaN || pos && neg:
		return expectation{dt: dt, bits: nan}
	case pos || neg:
		return expectation{dt: dt, bits: f.inf() | cond(neg, f.sign(), 0), nonFinite: over}
	case over:
		return expectation{dt: dt, anything: "partial sums may overflow"}
	}
	tol := gamma*abs + 0x1p-100*abs
	if op == hw.Avg {
		q := float64(p)
		qh := acc.hi / q // the exact average as a double-double
		avg := dd{qh, (math.FMA(-qh, q, acc.hi) + acc.lo) / q}
		return expectation{dt: dt, near: true, center: avg, shown: acc.hi / q, tol: tol/q*(1+u) + u*math.Abs(acc.hi/q) + tiny}
	}
	return expectation{dt: dt, near: true, center: acc, shown: acc.hi, tol: tol}
}

// key orders a float's bits as IEEE 754-2019 minimum and maximum do: −0
// just below +0 (NaNs are handled apart).
func key(f floatFmt, v uint64) uint64 {
	if v&f.sign() != 0 {
		return f.sign() - 1 - (v &^ f.sign())
	}
	return f.sign() + v
}

// intReduce is the exact wrapped reduction of integer elements.
func intReduce(dt hw.DType, op hw.ReduceOp, vals []uint64) uint64 {
	bits := 8 * dt.Size()
	mask := uint64(math.MaxUint64) >> (64 - bits)
	signed := func(v uint64) int64 { return int64(v<<(64-bits)) >> (64 - bits) }
	less := func(a, b uint64) bool {
		if dt == hw.U8 {
			return a < b
		}
		return signed(a) < signed(b)
	}
	acc := vals[0]
	for _, v := range vals[1:] {
		switch op {
		case hw.Sum, hw.Avg:
			acc += v
		case hw.Prod:
			acc *= v
		case hw.Min:
			acc = cond(less(v, acc), v, acc)
		case hw.Max:
			acc = cond(less(acc, v), v, acc)
		}
	}
	acc &= mask
	if op == hw.Avg {
		if dt == hw.U8 {
			return acc / uint64(len(vals))
		}
		return uint64(signed(acc)/int64(len(vals))) & mask
	}
	return acc
}
