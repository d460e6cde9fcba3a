package main

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/commsim/commsim/hw"
)

// byteUnits are the suffixes parseBytes accepts, up to the exbibyte that
// the int64 sizes reach. KiB/MiB/GiB are powers of two and KB/MB/GB powers
// of ten; bare K, M and G are powers of two, as in
// nccl-tests' -b/-e flags, which take them in either case (8k, 64m, 1g).
var byteUnits = []struct {
	suffix string
	mult   uint64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"PiB", 1 << 50}, {"EiB", 1 << 60},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"PB", 1e15}, {"EB", 1e18},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"P", 1 << 50}, {"E", 1 << 60},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"B", 1},
}

// maxBytes bounds a size flag: the largest byte count an int64 holds.
const maxBytes = math.MaxInt64

// nextSize is the sweep's size after b, b×factor rounded up and then
// down to a multiple of the element size (at least one element more), and
// whether it is still at most hi. The product is exact (a float64 factor
// is a binary fraction, and 128 bits hold it times any int64), so sizes
// near 2^63 and factors near 1 or beyond 1e18 step as they should.
func nextSize(b, hi, elem int64, factor float64) (int64, bool) {
	prod := new(big.Float).SetPrec(256).SetInt64(b)
	prod.Mul(prod, new(big.Float).SetFloat64(factor))
	whole, acc := prod.Int(nil)
	if acc == big.Below {
		whole.Add(whole, big.NewInt(1)) // the ceiling
	}
	if !whole.IsInt64() || whole.Int64() > hi {
		return 0, false
	}
	next := whole.Int64()
	next -= next % elem
	if next <= b {
		if b > hi-elem {
			return 0, false
		}
		next = b + elem
	}
	return next, next <= hi
}

// sweepSizes sets s's sizes from lo to hi, elements of size bytes:
// multiplied by --factor, or, as nccl-tests does where its factor is 1
// (its default), --stepbytes apart.
func (f *benchFlags) sweepSizes(s *sweep, lo, hi, size int64) error {
	factorGiven := f.given("factor") || f.given("stepfactor")
	linear := f.factor == 1 || f.given("stepbytes") && !factorGiven
	if linear || f.given("stepbytes") {
		// nccl-tests refuses a step it cannot read, even one it ignores.
		step, err := parseBytes(f.stepBytes)
		switch {
		case err != nil:
			return usagef("--stepbytes: %v", err)
		case !linear:
			f.note("-i: ignored, as nccl-tests does, where -f %v multiplies the sizes", f.factor)
		case step <= 0 || step%size != 0:
			return usagef("--stepbytes %s: want a positive multiple of %s's %d bytes", f.stepBytes, s.dtype, size)
		default:
			s.stepBytes = step
		}
	}
	for b := lo; ; {
		s.sizes = append(s.sizes, b)
		if len(s.sizes) > 10000 {
			by := fmt.Sprintf("by %v", f.factor)
			if linear {
				by = "in steps of " + f.stepBytes
			}
			return usagef("the sweep from %s to %s %s has over 10000 sizes", f.minBytes, f.maxBytes, by)
		}
		next, ok := b+s.stepBytes, b <= hi-s.stepBytes
		if !linear {
			next, ok = nextSize(b, hi, size, f.factor)
		}
		if !ok {
			return nil
		}
		b = next
	}
}

// sweepBounds reads a sweep's -b and -e (maxGiven: whether -e was given)
// as bench takes them: -b alone past the default -e sweeps -b alone, and
// both must be whole elements of dtype; each failure is a usage error.
func sweepBounds(minBytes, maxBytes string, maxGiven bool, dtype hw.DType) (lo, hi int64, err error) {
	if lo, err = parseBytes(minBytes); err != nil {
		return 0, 0, usagef("--min-bytes: %v", err)
	}
	if hi, err = parseBytes(maxBytes); err != nil {
		return 0, 0, usagef("--max-bytes: %v", err)
	}
	if lo > hi && !maxGiven {
		hi = lo // -b alone past the default -e: the sweep starts and ends at -b
	}
	if lo > hi {
		return 0, 0, usagef("--min-bytes %s is larger than --max-bytes %s", minBytes, maxBytes)
	}
	size := int64(dtype.Size())
	for _, b := range []int64{lo, hi} {
		if b%size != 0 {
			return 0, 0, usagef("size %d bytes is not a multiple of %s's %d bytes", b, dtype, size)
		}
	}
	return lo, hi, nil
}

// parseBytes reads a byte size such as "8", "1KiB", "1MiB", "1GB" or "32M".
func parseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := uint64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	if t == "" {
		return 0, fmt.Errorf("byte size %q has no number", s)
	}
	v, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		// A decimal (1.5GiB, 2e9): read exactly, so that a size no whole
		// number of bytes, or one float64 would round, is refused rather
		// than rounded.
		r, ok := new(big.Rat).SetString(t)
		if !ok || r.Sign() < 0 || strings.ContainsAny(t, "/") {
			return 0, fmt.Errorf("byte size %q is not a non-negative number with an optional unit (8, 1KiB, 1MiB, 1GB, 32M, 8k; B to EiB or EB)", s)
		}
		r.Mul(r, new(big.Rat).SetUint64(mult))
		if !r.IsInt() {
			return 0, fmt.Errorf("byte size %q is not a whole number of bytes", s)
		}
		if n := r.Num(); !n.IsInt64() || n.Int64() > maxBytes {
			return 0, fmt.Errorf("byte size %q is over the limit of %d bytes", s, int64(maxBytes))
		}
		return r.Num().Int64(), nil
	}
	if v > maxBytes/mult {
		return 0, fmt.Errorf("byte size %q is over the limit of %d bytes", s, int64(maxBytes))
	}
	return int64(v * mult), nil
}

// formatBytes prints a size compactly for progress and errors.
func formatBytes(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"EiB", 1 << 60}, {"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.s)
		}
	}
	return fmt.Sprintf("%dB", n)
}
