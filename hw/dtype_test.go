package hw_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

func TestDTypeProperties(t *testing.T) {
	cases := []struct {
		dt    hw.DType
		name  string
		size  int
		float bool
	}{
		{hw.F32, "f32", 4, true},
		{hw.F64, "f64", 8, true},
		{hw.F16, "f16", 2, true},
		{hw.BF16, "bf16", 2, true},
		{hw.I32, "i32", 4, false},
		{hw.I64, "i64", 8, false},
		{hw.U8, "u8", 1, false},
	}
	var all []hw.DType
	for _, c := range cases {
		all = append(all, c.dt)
		if got := c.dt.String(); got != c.name {
			t.Errorf("%d.String() = %q, want %q", c.dt, got, c.name)
		}
		if got := c.dt.Size(); got != c.size {
			t.Errorf("%s.Size() = %d, want %d", c.dt, got, c.size)
		}
		if got := c.dt.IsFloat(); got != c.float {
			t.Errorf("%s.IsFloat() = %v, want %v", c.dt, got, c.float)
		}
		if !c.dt.Valid() {
			t.Errorf("%s.Valid() = false", c.dt)
		}
		if got, err := hw.ParseDType(c.name); got != c.dt || err != nil {
			t.Errorf("ParseDType(%q) = %v, %v", c.name, got, err)
		}
	}
	if got := hw.DTypes(); !slices.Equal(got, all) {
		t.Errorf("DTypes() = %v, want %v", got, all)
	}
	for _, bad := range []hw.DType{0, 8, 255} {
		if bad.Valid() || bad.Size() != 0 || bad.IsFloat() {
			t.Errorf("invalid dtype %d: Valid %v, Size %d, IsFloat %v", uint8(bad), bad.Valid(), bad.Size(), bad.IsFloat())
		}
	}
	if got := hw.DType(0).String(); got != "dtype(0)" {
		t.Errorf("DType(0).String() = %q", got)
	}
	if got := hw.DType(200).String(); got != "dtype(200)" {
		t.Errorf("DType(200).String() = %q", got)
	}
	checkDTypeOf[float32](t, hw.F32)
	checkDTypeOf[float64](t, hw.F64)
	checkDTypeOf[hw.Float16](t, hw.F16)
	checkDTypeOf[hw.BFloat16](t, hw.BF16)
	checkDTypeOf[int32](t, hw.I32)
	checkDTypeOf[int64](t, hw.I64)
	checkDTypeOf[uint8](t, hw.U8)
}

func checkDTypeOf[T hw.Element](t *testing.T, want hw.DType) {
	t.Helper()
	if got := hw.DTypeOf[T](); got != want {
		t.Errorf("DTypeOf = %s, want %s", got, want)
	}
}

func TestParseDTypeAliases(t *testing.T) {
	for s, want := range map[string]hw.DType{
		"float32": hw.F32, "float": hw.F32, "fp32": hw.F32, "F32": hw.F32, " Float32 ": hw.F32,
		"float64": hw.F64, "double": hw.F64, "fp64": hw.F64,
		"float16": hw.F16, "half": hw.F16, "fp16": hw.F16, "HALF": hw.F16,
		"bfloat16": hw.BF16, "BF16": hw.BF16,
		"int32": hw.I32, "int": hw.I32,
		"int64": hw.I64,
		"uint8": hw.U8,
	} {
		if got, err := hw.ParseDType(s); got != want || err != nil {
			t.Errorf("ParseDType(%q) = %v, %v; want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"", "float8", "i16", "dtype(1)", "f 32"} {
		got, err := hw.ParseDType(s)
		if err == nil || got != 0 {
			t.Errorf("ParseDType(%q) = %v, %v; want an error", s, got, err)
			continue
		}
		if !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("ParseDType(%q) error %v does not wrap ErrBadArgument", s, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, `"`+s+`"`) || !strings.Contains(msg, "f32, f64, f16, bf16, i32, i64, u8") {
			t.Errorf("ParseDType(%q) error %q should quote the value and list the valid names", s, msg)
		}
	}
}

func TestReduceOps(t *testing.T) {
	names := []string{"sum", "prod", "min", "max", "avg"}
	ops := hw.ReduceOps()
	if !slices.Equal(ops, []hw.ReduceOp{hw.Sum, hw.Prod, hw.Min, hw.Max, hw.Avg}) {
		t.Fatalf("ReduceOps() = %v", ops)
	}
	for i, op := range ops {
		if op.String() != names[i] || !op.Valid() {
			t.Errorf("op %d: String %q, Valid %v", uint8(op), op.String(), op.Valid())
		}
		if got, err := hw.ParseReduceOp(names[i]); got != op || err != nil {
			t.Errorf("ParseReduceOp(%q) = %v, %v", names[i], got, err)
		}
	}
	for s, want := range map[string]hw.ReduceOp{
		"SUM": hw.Sum, "add": hw.Sum, "product": hw.Prod, "mul": hw.Prod,
		"minimum": hw.Min, "Maximum": hw.Max, "mean": hw.Avg, " average ": hw.Avg,
	} {
		if got, err := hw.ParseReduceOp(s); got != want || err != nil {
			t.Errorf("ParseReduceOp(%q) = %v, %v; want %s", s, got, err, want)
		}
	}
	for _, s := range []string{"", "xor", "fmin"} {
		_, err := hw.ParseReduceOp(s)
		if !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), `"`+s+`"`) ||
			!strings.Contains(err.Error(), "sum, prod, min, max, avg") {
			t.Errorf("ParseReduceOp(%q) error = %v", s, err)
		}
	}
	for _, bad := range []hw.ReduceOp{0, 6, 255} {
		if bad.Valid() {
			t.Errorf("ReduceOp(%d).Valid() = true", uint8(bad))
		}
	}
	if got := hw.ReduceOp(0).String(); got != "reduceop(0)" {
		t.Errorf("ReduceOp(0).String() = %q", got)
	}
}
