package hw

import (
	"fmt"
	"strings"
)

// DType is the element type of a buffer. The zero value is not a valid
// dtype; Valid reports whether a DType is one of the constants below.
//
// Elements are stored little-endian. Floats are IEEE 754 binary32 (F32),
// binary64 (F64) and binary16 (F16), and bfloat16 (BF16: the top 16 bits of
// a binary32). Integers are two's complement.
type DType uint8

// The dtypes, in the order DTypes returns them. Their Go element types are
// float32, float64, Float16, BFloat16, int32, int64 and uint8.
const (
	F32  DType = iota + 1 // IEEE 754 binary32 (float32), 4 bytes
	F64                   // IEEE 754 binary64 (float64), 8 bytes
	F16                   // IEEE 754 binary16 (Float16), 2 bytes
	BF16                  // bfloat16 (BFloat16), 2 bytes
	I32                   // signed 32-bit integer (int32), 4 bytes
	I64                   // signed 64-bit integer (int64), 8 bytes
	U8                    // unsigned 8-bit integer (uint8), 1 byte
)

// dtypeInfo is indexed by DType; entry 0 stands for every invalid value.
var dtypeInfo = [...]struct {
	name  string
	size  int
	float bool
}{
	{"", 0, false},
	F32:  {"f32", 4, true},
	F64:  {"f64", 8, true},
	F16:  {"f16", 2, true},
	BF16: {"bf16", 2, true},
	I32:  {"i32", 4, false},
	I64:  {"i64", 8, false},
	U8:   {"u8", 1, false},
}

// dtypeAliases maps the accepted spellings (lower case) to dtypes. It is the
// list documented on ParseDType.
var dtypeAliases = map[string]DType{
	"f32": F32, "float32": F32, "float": F32, "fp32": F32,
	"f64": F64, "float64": F64, "double": F64, "fp64": F64,
	"f16": F16, "float16": F16, "half": F16, "fp16": F16,
	"bf16": BF16, "bfloat16": BF16,
	"i32": I32, "int32": I32, "int": I32,
	"i64": I64, "int64": I64,
	"u8": U8, "uint8": U8,
}

// Valid reports whether d is one of the declared dtypes.
func (d DType) Valid() bool { return d >= F32 && d <= U8 }

// Size returns the number of bytes per element, or 0 for an invalid dtype.
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeInfo[d].size
}

// IsFloat reports whether d is a floating-point dtype (F32, F64, F16, BF16).
func (d DType) IsFloat() bool { return d.Valid() && dtypeInfo[d].float }

// String returns the canonical short name ("f32", "f64", "f16", "bf16",
// "i32", "i64", "u8"), or "dtype(N)" for an invalid value N.
func (d DType) String() string {
	if !d.Valid() {
		return fmt.Sprintf("dtype(%d)", uint8(d))
	}
	return dtypeInfo[d].name
}

// ParseDType returns the dtype named by s. Matching ignores case and
// surrounding white space. Besides the canonical names that String returns,
// it accepts these aliases (the NCCL and C-style names):
//
//	f32:  float32, float, fp32
//	f64:  float64, double, fp64
//	f16:  float16, half, fp16
//	bf16: bfloat16
//	i32:  int32, int (as NCCL's ncclInt, which is 32 bits)
//	i64:  int64
//	u8:   uint8
//
// An unknown name gives an error wrapping ErrBadArgument that quotes s and
// lists the canonical names.
func ParseDType(s string) (DType, error) {
	if d, ok := dtypeAliases[strings.ToLower(strings.TrimSpace(s))]; ok {
		return d, nil
	}
	names := make([]string, 0, len(dtypeInfo)-1)
	for _, d := range DTypes() {
		names = append(names, d.String())
	}
	return 0, fmt.Errorf("hw: %w: unknown dtype %q (valid: %s)", ErrBadArgument, s, strings.Join(names, ", "))
}

// DTypes returns every valid dtype in declaration order. The slice is new on
// every call.
func DTypes() []DType { return []DType{F32, F64, F16, BF16, I32, I64, U8} }
