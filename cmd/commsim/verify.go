package main

import (
	"math"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// Inputs and the --check reference.
//
// Every rank's input is a deterministic pseudo-random pattern of values
// exactly representable in the dtype: in [-1, 1) for floats (near 1 for
// prod, so products neither overflow nor underflow), small integers for
// i32 and i64, and all of 0..255 for u8. The reference is computed in
// double-double arithmetic (about 106 bits; integers exactly, with the
// dtype's wrap-around), and an element is wrong
// when it differs from the reference by more than:
//
//	copies (gathers, broadcast, alltoall, sendrecv), min, max and integers: 0
//	float sum:  γ(p−1)·Σ|x|, γ(k) = k·u/(1−k·u), u the dtype's unit roundoff
//	            (2^-24 f32, 2^-53 f64, 2^-11 f16, 2^-8 bf16): the bound for
//	            any order of p−1 additions, each rounded once
//	float avg:  the sum's bound / p, plus u·|avg| for the division
//	float prod: γ(p−1)·|Πx|

// unitRoundoff is half the distance from 1 to the next float.
func unitRoundoff(dt hw.DType) float64 {
	switch dt {
	case hw.F32:
		return 0x1p-24
	case hw.F64:
		return 0x1p-53
	case hw.F16:
		return 0x1p-11
	case hw.BF16:
		return 0x1p-8
	}
	return 0
}

// splitmix64 is a small, well-mixed hash for input patterns.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// inputValues returns rank r's input as float64 values exactly
// representable in the dtype.
func inputValues(spec ops.Spec, r, n int) []float64 {
	vals := make([]float64, n)
	for i := range vals {
		h := splitmix64(uint64(r)<<40 ^ uint64(i) ^ uint64(spec.Op)<<56)
		u := float64(h>>11) / (1 << 53) // [0, 1)
		switch {
		case spec.DType == hw.U8:
			vals[i] = float64(h & 0xff)
		case !spec.DType.IsFloat():
			vals[i] = float64(int64(h%17) - 8)
		case spec.Redop == hw.Prod && spec.Op.Reduces():
			vals[i] = 1 + (2*u-1)/16
		default:
			vals[i] = 2*u - 1
		}
	}
	// Round floats to the dtype so the reference sees what the device sees.
	raw, _ := hw.FromFloat64s(spec.DType, vals)
	exact, _ := hw.ToFloat64s(spec.DType, raw)
	return exact
}

// wrap reduces an integer result to the dtype's range, as the device does.
func wrap(dt hw.DType, v float64) float64 {
	switch dt {
	case hw.U8:
		return float64(uint8(int64(v)))
	case hw.I32:
		return float64(int32(int64(v)))
	}
	return v
}

// doubleDouble is an unevaluated sum hi+lo carrying about 106 bits, so the
// reference for f64 is far more precise than the device it checks.
type doubleDouble struct{ hi, lo float64 }

func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	return s, (a - (s - bb)) + (b - bb)
}

func (d doubleDouble) add(x float64) doubleDouble {
	s, e := twoSum(d.hi, x)
	e += d.lo
	hi := s + e
	return doubleDouble{hi, e - (hi - s)}
}

func (d doubleDouble) mul(x float64) doubleDouble {
	p := d.hi * x
	e := math.FMA(d.hi, x, -p) + d.lo*x
	hi := p + e
	return doubleDouble{hi, e - (hi - p)}
}

// referenceReduce combines element i of every rank's input (in
// double-double for floats, exactly for integers) and returns the result
// and the tolerance for it.
func referenceReduce(spec ops.Spec, inputs [][]float64, idx func(q int) int) (want, tol float64) {
	p := len(inputs)
	dt := spec.DType
	first := inputs[0][idx(0)]
	dd, abs := doubleDouble{hi: first}, math.Abs(first)
	acc, iacc := first, int64(first)
	for q := 1; q < p; q++ {
		x := inputs[q][idx(q)]
		abs += math.Abs(x)
		switch spec.Redop {
		case hw.Sum, hw.Avg:
			dd = dd.add(x)
			iacc += int64(x)
		case hw.Prod:
			dd = dd.mul(x)
			iacc *= int64(x)
		case hw.Min:
			acc = math.Min(acc, x)
		case hw.Max:
			acc = math.Max(acc, x)
		}
	}
	if spec.Redop != hw.Min && spec.Redop != hw.Max {
		acc = dd.hi + dd.lo
	}
	if !dt.IsFloat() {
		if spec.Redop == hw.Sum || spec.Redop == hw.Avg || spec.Redop == hw.Prod {
			acc = float64(iacc)
			if dt != hw.I64 {
				acc = wrap(dt, acc)
			}
		}
		if spec.Redop == hw.Avg {
			acc = math.Trunc(acc / float64(p))
		}
		return acc, 0
	}
	u := unitRoundoff(dt)
	k := float64(p - 1)
	gamma := k * u / (1 - k*u)
	switch spec.Redop {
	case hw.Sum:
		tol = gamma * abs
	case hw.Avg:
		acc /= float64(p)
		tol = gamma*abs/float64(p) + u*math.Abs(acc)
	case hw.Prod:
		tol = gamma * math.Abs(acc)
	}
	return acc, tol
}

// countWrong compares every meaningful output element of every rank with
// the reference and returns how many are out of tolerance.
func countWrong(spec ops.Spec, inputs, outputs [][]float64) int {
	p, n := spec.Ranks, spec.Count
	wrong := 0
	bad := func(got, want, tol float64) bool {
		if spec.DType.IsFloat() && (spec.Redop == hw.Min || spec.Redop == hw.Max || !spec.Op.Reduces()) {
			return got != want
		}
		return math.Abs(got-want) > tol || math.IsNaN(got)
	}
	for r := range p {
		out := outputs[r]
		switch spec.Op {
		case ops.AllReduce, ops.Reduce:
			if spec.Op == ops.Reduce && r != spec.Root {
				continue
			}
			for i := range n {
				want, tol := referenceReduce(spec, inputs, func(int) int { return i })
				if bad(out[i], want, tol) {
					wrong++
				}
			}
		case ops.ReduceScatter:
			for i := range n {
				want, tol := referenceReduce(spec, inputs, func(int) int { return r*n + i })
				if bad(out[i], want, tol) {
					wrong++
				}
			}
		case ops.AllGather, ops.Gather:
			if spec.Op == ops.Gather && r != spec.Root {
				continue
			}
			for i := range p * n {
				if bad(out[i], inputs[i/n][i%n], 0) {
					wrong++
				}
			}
		case ops.Broadcast:
			for i := range n {
				if bad(out[i], inputs[spec.Root][i], 0) {
					wrong++
				}
			}
		case ops.AllToAll:
			for i := range p * n {
				if bad(out[i], inputs[i/n][r*n+i%n], 0) {
					wrong++
				}
			}
		case ops.SendRecv:
			for i := range n {
				if bad(out[i], inputs[(r-1+p)%p][i], 0) {
					wrong++
				}
			}
		}
	}
	return wrong
}
