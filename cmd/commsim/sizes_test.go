package main

import (
	"fmt"
	"testing"
)

func TestParseBytes(t *testing.T) {
	good := map[string]int64{
		"8": 8, "0": 0, "1KiB": 1024, "1MiB": 1 << 20, "1GiB": 1 << 30, "1GB": 1e9, "32M": 32 << 20,
		"4K": 4096, "2KB": 2000, "100B": 100, "1.5KiB": 1536, " 16 MiB ": 16 << 20,
		"16G": 16 << 30, "32G": 32 << 30, "8388607TiB": 8388607 << 40, "9223372036854775807": 1<<63 - 1,
		"2e9": 2e9, "8k": 8192, "64m": 64 << 20, "1g": 1 << 30, // nccl-tests' lowercase units
		"9007199254740993.0": 9007199254740993,                                                                 // exact, where float64 would round to …992
		"1PiB":               1 << 50, "7EiB": 7 << 60, "2PB": 2e15, "9EB": 9e18, "4P": 4 << 50, "7E": 7 << 60, // up to what an int64 holds
	}
	for in, want := range good {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "KiB", "-1", "1.3B", "abc", "1XB", "8E", "8EiB", "10EB", "1kb", "1t", "8388608TiB", "9223372036854775808", "9.3e18", "NaN", "1e400",
		"4611686018427387903.5", "1.0000000000000001K", "3/4", "inf"} { // not whole bytes, though float64 would make them so
		if got, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", bad, got)
		}
	}
}

// TestSweepSizes: the sweep multiplies by the factor, rounds to whole
// elements, steps at least one element, and stops at the top without
// overflowing, however large the factor or the sizes.
func TestSweepSizes(t *testing.T) {
	for _, tc := range []struct {
		lo, hi, elem int64
		factor       float64
		want         []int64
	}{
		{8, 64, 4, 2, []int64{8, 16, 32, 64}},
		{8, 64, 4, 1.5, []int64{8, 12, 16, 24, 36, 52}},
		{8, 64, 4, 1e19, []int64{8}},
		{8, 64 << 20, 4, 2e18, []int64{8}},
		{4, 12, 4, 1.01, []int64{4, 8, 12}},
		{1 << 62, 1<<63 - 1, 1, 2, []int64{1 << 62}},
		{1<<63 - 9, 1<<63 - 1, 4, 1.0000001, []int64{1<<63 - 9}},
		{1<<63 - 8, 1<<63 - 1, 4, 1.0000000000000001, []int64{1<<63 - 8, 1<<63 - 4}},
		{12, 14, 4, 1.01, []int64{12}},
	} {
		got := []int64{tc.lo}
		for b := tc.lo; ; {
			next, ok := nextSize(b, tc.hi, tc.elem, tc.factor)
			if !ok {
				break
			}
			got, b = append(got, next), next
			if len(got) > 100 {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%d..%d by %v: %v, want %v", tc.lo, tc.hi, tc.factor, got, tc.want)
		}
	}
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"8", "1KiB", "1.5GB", "-3", "1e9", "0.1B"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseBytes(s)
		if err == nil && (n < 0 || n > maxBytes) {
			t.Fatalf("parseBytes(%q) = %d outside [0, %d]", s, n, int64(maxBytes))
		}
	})
}
