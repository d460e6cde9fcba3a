// commsim's Metal kernels: reduce (every dtype x Sum, Prod, Min, Max),
// divide (the second half of Avg) and copy, compiled at run time by
// hw/metal with MSL 2.4 and mathMode safe / fastMathEnabled NO.
//
// Every kernel reproduces hw.ReduceBytes and hw.DivideBytes bit for bit
// (the arithmetic contract in hw/arith.go). mirror_test.go is a Go port of
// this file, function for function and in the same order of conversions
// and selects; the tests there check the port against hw on every f16 and
// bf16 pattern. Change the two together.
//
// How the rules of the contract are met:
//   - Elements travel as integer bit patterns (uint, ushort, ulong, uchar),
//     never as float loads and stores, so nothing on the way quiets or
//     canonicalises a NaN behind our back.
//   - Each float result is one IEEE operation on float operands: a + b,
//     a * b or precise::divide(a, q). No expression multiplies into an add,
//     so there is nothing to contract into an FMA even if the compiler
//     wanted to; safe math forbids it anyway.
//   - NaN is detected on the bits ((u & 0x7FFFFFFF) > 0x7F800000), not
//     with isnan, so no "no NaNs" assumption of any math mode can remove
//     the test, and the canonical pattern is selected in its place.
//   - f16 widens with half -> float (exact) and narrows with float -> half
//     (round to nearest even). bf16 widens by shifting the bits and
//     narrows with integer round-to-nearest-even on the bits; the bfloat
//     type of MSL 3.1 is not used.
//   - Min and Max compare order keys built from the bits (-0 below +0)
//     and return one of the operands' patterns; a NaN operand gives the
//     canonical NaN.
//   - Integer Sum and Prod wrap in unsigned arithmetic of the element's
//     width; Min and Max compare signed (i32, i64) or unsigned (u8) values.
//   - The float divisor is float32(n) computed on the host exactly as
//     hw.DivideBytes does and passed as bits; integers divide by n with
//     truncation toward zero, in 64-bit arithmetic.
// f64 has no kernel: Metal has no 64-bit floating-point type.

#include <metal_stdlib>
using namespace metal;

// Params is kernelParams in kernels.go: 24 bytes, passed with setBytes at
// [[buffer(2)]]. Buffers are bound whole, at offset 0, and the slices'
// first elements travel here, so no binding offset has to meet Metal's
// alignment rules (a u8 slice may start at any byte).
struct Params {
    uint n;    // elements
    uint qf;   // divisor: the bits of float32(n)
    ulong qi;  // divisor: n
    uint doff; // first element of d
    uint soff; // first element of s
};

// ---- NaN (rule 3) ----

static inline bool nan32(uint u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// ---- f32 (rule 1) ----

static inline uint f32_canon(float r) {
    uint u = as_type<uint>(r);
    return nan32(u) ? 0x7FC00000u : u;
}
static inline uint f32_sum(uint a, uint b) {
    float r = as_type<float>(a) + as_type<float>(b);
    return f32_canon(r);
}
static inline uint f32_prod(uint a, uint b) {
    float r = as_type<float>(a) * as_type<float>(b);
    return f32_canon(r);
}
static inline uint f32_div(uint a, float q) {
    float r = precise::divide(as_type<float>(a), q);
    return f32_canon(r);
}

// ---- min and max on bit patterns (rule 5) ----

static inline uint key32(uint u) { return (u & 0x80000000u) != 0u ? ~u : (u | 0x80000000u); }
static inline uint f32_min(uint a, uint b) {
    uint r = key32(b) < key32(a) ? b : a;
    return (nan32(a) || nan32(b)) ? 0x7FC00000u : r;
}
static inline uint f32_max(uint a, uint b) {
    uint r = key32(b) > key32(a) ? b : a;
    return (nan32(a) || nan32(b)) ? 0x7FC00000u : r;
}

static inline ushort key16(ushort u) { return (u & 0x8000u) != 0u ? ushort(~u) : ushort(u | 0x8000u); }
static inline ushort min16(ushort a, ushort b, ushort inf, ushort qnan) {
    ushort r = key16(b) < key16(a) ? b : a;
    return ((a & 0x7FFFu) > inf || (b & 0x7FFFu) > inf) ? qnan : r;
}
static inline ushort max16(ushort a, ushort b, ushort inf, ushort qnan) {
    ushort r = key16(b) > key16(a) ? b : a;
    return ((a & 0x7FFFu) > inf || (b & 0x7FFFu) > inf) ? qnan : r;
}

// ---- f16 (rule 2): via float, rounded after every op ----

static inline float f16_widen(ushort h) { return float(as_type<half>(h)); }
static inline ushort f16_round(float r) {
    uint u = as_type<uint>(r);
    return nan32(u) ? ushort(0x7E00) : as_type<ushort>(half(r));
}
static inline ushort f16_sum(ushort a, ushort b) {
    float r = f16_widen(a) + f16_widen(b);
    return f16_round(r);
}
static inline ushort f16_prod(ushort a, ushort b) {
    float r = f16_widen(a) * f16_widen(b);
    return f16_round(r);
}
static inline ushort f16_div(ushort a, float q) {
    float r = precise::divide(f16_widen(a), q);
    return f16_round(r);
}
static inline ushort f16_min(ushort a, ushort b) { return min16(a, b, ushort(0x7C00), ushort(0x7E00)); }
static inline ushort f16_max(ushort a, ushort b) { return max16(a, b, ushort(0x7C00), ushort(0x7E00)); }

// ---- bf16 (rule 2): via float, rounded on the bits ----

static inline float bf16_widen(ushort h) { return as_type<float>(uint(h) << 16); }
static inline ushort bf16_round(float r) {
    uint u = as_type<uint>(r);
    uint rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    return nan32(u) ? ushort(0x7FC0) : ushort(rounded);
}
static inline ushort bf16_sum(ushort a, ushort b) {
    float r = bf16_widen(a) + bf16_widen(b);
    return bf16_round(r);
}
static inline ushort bf16_prod(ushort a, ushort b) {
    float r = bf16_widen(a) * bf16_widen(b);
    return bf16_round(r);
}
static inline ushort bf16_div(ushort a, float q) {
    float r = precise::divide(bf16_widen(a), q);
    return bf16_round(r);
}
static inline ushort bf16_min(ushort a, ushort b) { return min16(a, b, ushort(0x7F80), ushort(0x7FC0)); }
static inline ushort bf16_max(ushort a, ushort b) { return max16(a, b, ushort(0x7F80), ushort(0x7FC0)); }

// ---- integers (rule 6) ----

static inline uint i32_sum(uint a, uint b) { return a + b; }
static inline uint i32_prod(uint a, uint b) { return a * b; }
static inline uint i32_min(uint a, uint b) {
    int x = as_type<int>(a), y = as_type<int>(b);
    return as_type<uint>(y < x ? y : x);
}
static inline uint i32_max(uint a, uint b) {
    int x = as_type<int>(a), y = as_type<int>(b);
    return as_type<uint>(y > x ? y : x);
}
static inline uint i32_div(uint a, long q) { return as_type<uint>(int(long(as_type<int>(a)) / q)); }

static inline ulong i64_sum(ulong a, ulong b) { return a + b; }
static inline ulong i64_prod(ulong a, ulong b) { return a * b; }
static inline ulong i64_min(ulong a, ulong b) {
    long x = as_type<long>(a), y = as_type<long>(b);
    return as_type<ulong>(y < x ? y : x);
}
static inline ulong i64_max(ulong a, ulong b) {
    long x = as_type<long>(a), y = as_type<long>(b);
    return as_type<ulong>(y > x ? y : x);
}
static inline ulong i64_div(ulong a, long q) { return as_type<ulong>(as_type<long>(a) / q); }

static inline uchar u8_sum(uchar a, uchar b) { return uchar(uint(a) + uint(b)); }
static inline uchar u8_prod(uchar a, uchar b) { return uchar(uint(a) * uint(b)); }
static inline uchar u8_min(uchar a, uchar b) { return b < a ? b : a; }
static inline uchar u8_max(uchar a, uchar b) { return b > a ? b : a; }
static inline uchar u8_div(uchar a, ulong q) { return uchar(ulong(a) / q); }

// ---- kernels ----
//
// One line per kernel; kernels_test.go reads the names from these lines
// and requires them to be exactly the table in kernels.go. Every kernel
// handles element i of n; the host launches whole threadgroups, so the
// guard drops the tail.

#define REDUCE(NAME, T, FN)                                                     \
    kernel void NAME(device T* d [[buffer(0)]], device const T* s [[buffer(1)]], \
                     constant Params& p [[buffer(2)]],                            \
                     uint i [[thread_position_in_grid]]) {                        \
        if (i < p.n) { d[p.doff + i] = FN(d[p.doff + i], s[p.soff + i]); }       \
    }
#define DIVIDE(NAME, T, FN, Q)                                                  \
    kernel void NAME(device T* d [[buffer(0)]], constant Params& p [[buffer(2)]], \
                     uint i [[thread_position_in_grid]]) {                        \
        if (i < p.n) { d[p.doff + i] = FN(d[p.doff + i], Q); }                    \
    }
#define COPY(NAME, T)                                                           \
    kernel void NAME(device T* d [[buffer(0)]], device const T* s [[buffer(1)]], \
                     constant Params& p [[buffer(2)]],                            \
                     uint i [[thread_position_in_grid]]) {                        \
        if (i < p.n) { d[p.doff + i] = s[p.soff + i]; }                           \
    }

REDUCE(reduce_sum_f32, uint, f32_sum)
REDUCE(reduce_prod_f32, uint, f32_prod)
REDUCE(reduce_min_f32, uint, f32_min)
REDUCE(reduce_max_f32, uint, f32_max)
REDUCE(reduce_sum_f16, ushort, f16_sum)
REDUCE(reduce_prod_f16, ushort, f16_prod)
REDUCE(reduce_min_f16, ushort, f16_min)
REDUCE(reduce_max_f16, ushort, f16_max)
REDUCE(reduce_sum_bf16, ushort, bf16_sum)
REDUCE(reduce_prod_bf16, ushort, bf16_prod)
REDUCE(reduce_min_bf16, ushort, bf16_min)
REDUCE(reduce_max_bf16, ushort, bf16_max)
REDUCE(reduce_sum_i32, uint, i32_sum)
REDUCE(reduce_prod_i32, uint, i32_prod)
REDUCE(reduce_min_i32, uint, i32_min)
REDUCE(reduce_max_i32, uint, i32_max)
REDUCE(reduce_sum_i64, ulong, i64_sum)
REDUCE(reduce_prod_i64, ulong, i64_prod)
REDUCE(reduce_min_i64, ulong, i64_min)
REDUCE(reduce_max_i64, ulong, i64_max)
REDUCE(reduce_sum_u8, uchar, u8_sum)
REDUCE(reduce_prod_u8, uchar, u8_prod)
REDUCE(reduce_min_u8, uchar, u8_min)
REDUCE(reduce_max_u8, uchar, u8_max)

DIVIDE(divide_f32, uint, f32_div, as_type<float>(p.qf))
DIVIDE(divide_f16, ushort, f16_div, as_type<float>(p.qf))
DIVIDE(divide_bf16, ushort, bf16_div, as_type<float>(p.qf))
DIVIDE(divide_i32, uint, i32_div, as_type<long>(p.qi))
DIVIDE(divide_i64, ulong, i64_div, as_type<long>(p.qi))
DIVIDE(divide_u8, uchar, u8_div, p.qi)

COPY(copy_b8, uchar)
COPY(copy_b16, ushort)
COPY(copy_b32, uint)
COPY(copy_b64, ulong)
