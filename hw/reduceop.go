package hw

import (
	"fmt"
	"strings"
)

// ReduceOp is an elementwise reduction. The zero value is not valid.
//
// The arithmetic of each op, for every dtype, is the contract that the
// simulator and the GPU kernels share bit for bit; ReduceBytes states it in
// full. In short:
//
//   - f32 and f64: one IEEE 754 operation in the dtype, rounded to nearest
//     even; no fused multiply-add, no flush of subnormals to zero.
//   - f16 and bf16: both operands widened exactly to float32, one float32
//     operation, the result rounded to f16/bf16 to nearest even; rounding
//     happens after every single op ("round after every add").
//   - Any float result that is NaN is stored as the dtype's canonical quiet
//     NaN with a positive sign (f32 0x7FC00000, f64 0x7FF8000000000000, f16
//     0x7E00, bf16 0x7FC0).
//   - Min and Max propagate NaN and order −0 below +0 (IEEE 754-2019
//     minimum and maximum, not C's fmin and fmax).
//   - i32, i64 and u8: Sum and Prod wrap modulo 2^n; Min and Max are the
//     ordinary signed (i32, i64) or unsigned (u8) order.
//   - Avg is not elementwise: it is Sum, in the plan's order, followed by
//     DivideBytes by the number of ranks.
type ReduceOp uint8

// The reduce ops, in the order ReduceOps returns them.
const (
	// Sum is a + b. Floats round once per add; integers wrap modulo 2^n.
	Sum ReduceOp = iota + 1
	// Prod is a × b. Floats round once per multiply; integers wrap modulo 2^n.
	Prod
	// Min is the smaller of a and b. A NaN operand gives the canonical NaN;
	// min(−0, +0) = −0. Exact: no rounding is involved.
	Min
	// Max is the larger of a and b. A NaN operand gives the canonical NaN;
	// max(−0, +0) = +0. Exact: no rounding is involved.
	Max
	// Avg is the mean over ranks: Sum in the plan's order, then one
	// DivideBytes by the number of ranks. ReduceBytes rejects it.
	Avg
)

var reduceOpNames = [...]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max", Avg: "avg"}

// reduceOpAliases maps the accepted spellings (lower case) to ops. It is
// the list documented on ParseReduceOp.
var reduceOpAliases = map[string]ReduceOp{
	"sum": Sum, "add": Sum,
	"prod": Prod, "product": Prod, "mul": Prod,
	"min": Min, "minimum": Min,
	"max": Max, "maximum": Max,
	"avg": Avg, "mean": Avg, "average": Avg,
}

// Valid reports whether o is one of the declared ops.
func (o ReduceOp) Valid() bool { return o >= Sum && o <= Avg }

// String returns "sum", "prod", "min", "max" or "avg", or "reduceop(N)" for
// an invalid value N.
func (o ReduceOp) String() string {
	if !o.Valid() {
		return fmt.Sprintf("reduceop(%d)", uint8(o))
	}
	return reduceOpNames[o]
}

// ParseReduceOp returns the op named by s. Matching ignores case and
// surrounding white space. Besides the names String returns it accepts
// add (sum), product and mul (prod), minimum (min), maximum (max), and mean
// and average (avg). An unknown name gives an error wrapping ErrBadArgument
// that quotes s and lists the canonical names.
func ParseReduceOp(s string) (ReduceOp, error) {
	if o, ok := reduceOpAliases[strings.ToLower(strings.TrimSpace(s))]; ok {
		return o, nil
	}
	return 0, fmt.Errorf("hw: %w: unknown reduce op %q (valid: sum, prod, min, max, avg)", ErrBadArgument, s)
}

// ReduceOps returns every valid op in declaration order. The slice is new
// on every call.
func ReduceOps() []ReduceOp { return []ReduceOp{Sum, Prod, Min, Max, Avg} }
