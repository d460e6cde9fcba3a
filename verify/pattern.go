package verify

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// MaxPatternBytes bounds the inputs PatternInputs makes, every rank's
// together, in host memory.
const MaxPatternBytes = 16 << 30

// PatternInputs returns every rank's input of s (InLen elements each,
// little-endian): the deterministic pattern that `commsim bench --check`
// runs, so that Case.Reproducer's command checks the same values every
// time. The values are pseudo-random and exactly representable in the
// dtype: in [-1, 1) for floats (near 1 for prod, so that products neither
// overflow nor underflow), small integers for i32 and i64, and all of
// 0..255 for u8. A spec that Validate refuses, or whose inputs would
// take more than MaxPatternBytes, is an error before anything is made.
func PatternInputs(s ops.Spec) ([][]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	n, _ := s.BufferLens()
	if total := float64(s.Ranks) * float64(n) * float64(s.DType.Size()); total > MaxPatternBytes {
		return nil, fmt.Errorf("verify: inputs of %v: %w: %d ranks x %d elements of %s is %.0f bytes, over the limit of %d",
			s, ops.ErrTooLarge, s.Ranks, n, s.DType, total, int64(MaxPatternBytes))
	}
	out := make([][]byte, s.Ranks)
	errs := make([]error, s.Ranks)
	// Ranks are independent: fill them on every core.
	next := make(chan int, s.Ranks)
	for r := range s.Ranks {
		next <- r
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), s.Ranks) {
		wg.Go(func() {
			for r := range next {
				out[r], errs[r] = patternBytes(s, r, n)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// patternBytes is rank r's n input elements, encoded a block of
// patternBlock values at a time: the values as float64 for a whole rank
// took 8 bytes an element beside its input (8 times a u8 input).
func patternBytes(s ops.Spec, r, n int) ([]byte, error) {
	size := s.DType.Size()
	out := make([]byte, n*size)
	for lo := 0; lo < n; lo += patternBlock {
		b, err := hw.FromFloat64s(s.DType, patternValues(s, r, lo, min(n, lo+patternBlock)))
		if err != nil {
			return nil, err
		}
		copy(out[lo*size:], b)
	}
	return out, nil
}

// patternBlock is the values patternBytes encodes at a time.
const patternBlock = 1 << 16

// patternValues is rank r's input elements lo to hi as float64 values;
// encoding them in the dtype rounds them to what the device sees (the
// reference reads the encoded bytes).
func patternValues(s ops.Spec, r, lo, hi int) []float64 {
	vals := make([]float64, hi-lo)
	for k := range vals {
		i := lo + k
		h := splitmix64(uint64(r)<<40 ^ uint64(i) ^ uint64(s.Op)<<56)
		u := float64(h>>11) / (1 << 53) // [0, 1)
		switch {
		case s.DType == hw.U8:
			vals[k] = float64(h & 0xff)
		case !s.DType.IsFloat():
			vals[k] = float64(int64(h%17) - 8)
		case s.Redop == hw.Prod && s.Op.Reduces():
			vals[k] = 1 + (2*u-1)/16
		default:
			vals[k] = 2*u - 1
		}
	}
	return vals
}

// splitmix64 is a small, well-mixed hash for input patterns.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
