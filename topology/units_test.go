package topology

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestParseBandwidth(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"100GB/s", 100e9},
		{"400Gb/s", 50e9},
		{"1.5TB/s", 1.5e12},
		{"25e9B/s", 25e9},
		{"46.5GB/s", 46.5e9},
		{"450GB/s", 450e9},
		{"4.35TB/s", 4.35e12}, // 4.35*1e12 != 4.35e12 in float64: parsed as text
		{"1.43TB/s", 1.43e12},
		{"80Gb/s", 10e9},
		{"1GiB/s", 1 << 30},
		{"1.5GiB/s", 1.5 * (1 << 30)},
		{"64KiB/s", 64 << 10},
		{"2MiB/s", 2 << 20},
		{"1TiB/s", 1 << 40},
		{"1kB/s", 1e3},
		{"1KB/s", 1e3},
		{"8Kb/s", 1e3},
		{"3MB/s", 3e6},
		{"1PB/s", 1e15},
		{"8b/s", 1},
		{"1Tb/s", 125e9},
		{"0.5B/s", 0.5},
		{".5GB/s", 0.5e9},
		{"5.GB/s", 5e9},
		{"+2GB/s", 2e9},
		{" 100 GB/s ", 100e9},
		{"1e-3GB/s", 1e6},
		{"1E3MB/s", 1e9},
		{"inf", math.Inf(1)},
		{"Inf", math.Inf(1)},
		{"+INF", math.Inf(1)},
	}
	for _, tc := range tests {
		got, err := ParseBandwidth(tc.in)
		if err != nil {
			t.Errorf("ParseBandwidth(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseBandwidth(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestParseBandwidthErrors(t *testing.T) {
	tests := []struct{ in, frag string }{
		{"", "want a number and a unit"},
		{"GB/s", "want a number and a unit"},
		{"100", "missing unit"},
		{"100XB/s", `unknown unit "XB/s"`},
		{"100gb/s", `unknown unit "gb/s"`},
		{"-5GB/s", "must be > 0"},
		{"0GB/s", "must be > 0"},
		{"0", "must be > 0"}, // no unit, yet no unit makes it a bandwidth
		{"-2", "must be > 0"},
		{"1e-400GB/s", "must be > 0"},
		{"1e400GB/s", "too large"},
		{"1e99999999999999999999GB/s", "too large"},
		{"nan", "want a number"},
		{"-inf", "want a number"},
		{"1.2.3GB/s", "unknown unit"},
		{"0x10GB/s", "unknown unit"},
		{"1_000GB/s", "unknown unit"},
		{strings.Repeat("1", 300) + "GB/s", "more than the limit"},
	}
	for _, tc := range tests {
		_, err := ParseBandwidth(tc.in)
		if err == nil {
			t.Errorf("ParseBandwidth(%q): no error, want %q", tc.in, tc.frag)
			continue
		}
		if !strings.Contains(err.Error(), tc.frag) || !errors.Is(err, ErrSpec) {
			t.Errorf("ParseBandwidth(%q) error %q: want %q and ErrSpec", tc.in, err, tc.frag)
		}
	}
}

func TestFormatBandwidth(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{50e9, "50GB/s"},
		{46.5e9, "46.5GB/s"},
		{450e9, "450GB/s"},
		{1.8e12, "1.8TB/s"},
		{1.43e12, "1.43TB/s"},
		{609e9, "609GB/s"},
		{10e9, "10GB/s"},
		{64e9, "64GB/s"},
		{1e15, "1PB/s"},
		{999, "999B/s"},
		{1500, "1.5kB/s"},
		{2.5e6, "2.5MB/s"},
		{1, "1B/s"},
		{0.5, "0.5B/s"},
		{1e18, "1e+18B/s"},
		{math.Inf(1), "inf"},
		{1 << 30, "1.073741824GB/s"},
	}
	for _, tc := range tests {
		if got := FormatBandwidth(tc.in); got != tc.want {
			t.Errorf("FormatBandwidth(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// randomPositive returns positive finite float64s spread over every
// exponent, from a fixed seed.
func randomPositive(n int) []float64 {
	r := rand.New(rand.NewPCG(1, 2))
	out := []float64{math.SmallestNonzeroFloat64, math.MaxFloat64, 1, 4.3e12 / 3, 936.25e-9, 1e-12, 1e-13, 999.9999999999999e-3}
	for len(out) < n {
		v := math.Abs(math.Float64frombits(r.Uint64()))
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			out = append(out, v)
		}
		// and some in the everyday range, with long mantissas
		out = append(out, r.Float64()*math.Pow(10, float64(r.IntN(30)-15)))
	}
	return out
}

func TestBandwidthRoundTrip(t *testing.T) {
	for _, v := range randomPositive(20000) {
		if v == 0 {
			continue
		}
		s := FormatBandwidth(v)
		got, err := ParseBandwidth(s)
		if err != nil {
			t.Fatalf("ParseBandwidth(FormatBandwidth(%v) = %q): %v", v, s, err)
		}
		if math.Float64bits(got) != math.Float64bits(v) {
			t.Fatalf("round trip of %v via %q gave %v", v, s, got)
		}
	}
	if got, _ := ParseBandwidth(FormatBandwidth(math.Inf(1))); !math.IsInf(got, 1) {
		t.Fatalf("inf does not round-trip: %v", got)
	}
}

func TestParseLatency(t *testing.T) {
	tests := []struct {
		in   string
		want float64
	}{
		{"1us", 1e-6},
		{"500ns", 500e-9},
		{"936.25ns", 936.25e-9},
		{"468.125ns", 468.125e-9},
		{"1.1ns", 1.1e-9}, // 1.1*1e-9 != 1.1e-9 in float64: parsed as text
		{"46.5ns", 46.5e-9},
		{"2ms", 2e-3},
		{"0", 0},
		{"0.0", 0},
		{"-0", 0},
		{"0ns", 0},
		{"1.5µs", 1.5e-6},
		{"1.5μs", 1.5e-6},
		{"3ps", 3e-12},
		{"1s", 1},
		{"14us", 14e-6},
		{" 2 us ", 2e-6},
		{"1e-15s", 1e-15},
	}
	for _, tc := range tests {
		got, err := ParseLatency(tc.in)
		if err != nil {
			t.Errorf("ParseLatency(%q): %v", tc.in, err)
			continue
		}
		if math.Float64bits(got) != math.Float64bits(tc.want) {
			t.Errorf("ParseLatency(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	errs := []struct{ in, frag string }{
		{"5", "missing unit"},
		{"-1us", "must be >= 0"},
		{"1xs", `unknown unit "xs"`},
		{"", "want a number"},
		{"us", "want a number"},
		{"1e400s", "too large"},
		{"inf", "want a number"},
		{"NaN", "want a number"},
	}
	for _, tc := range errs {
		_, err := ParseLatency(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.frag) || !errors.Is(err, ErrSpec) {
			t.Errorf("ParseLatency(%q) error %v: want %q and ErrSpec", tc.in, err, tc.frag)
		}
	}
}

func TestFormatLatency(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{936.25e-9, "936.25ns"},
		{468.125e-9, "468.125ns"},
		{1e-6, "1us"},
		{2e-3, "2ms"},
		{1.5, "1.5s"},
		{7e-6, "7us"},
		{1e-12, "1ps"},
		{1e-13, "1e-13s"},
		{1500, "1500s"},
		{1e3, "1000s"},
	}
	for _, tc := range tests {
		if got := FormatLatency(tc.in); got != tc.want {
			t.Errorf("FormatLatency(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, v := range randomPositive(20000) {
		s := FormatLatency(v)
		got, err := ParseLatency(s)
		if err != nil {
			t.Fatalf("ParseLatency(FormatLatency(%v) = %q): %v", v, s, err)
		}
		if math.Float64bits(got) != math.Float64bits(v) {
			t.Fatalf("round trip of %v via %q gave %v", v, s, got)
		}
	}
}

func TestKind(t *testing.T) {
	for k, s := range map[Kind]string{GPU: "gpu", Switch: "switch", NIC: "nic", CPU: "cpu"} {
		if k.String() != s {
			t.Errorf("%d.String() = %q, want %q", k, k.String(), s)
		}
		got, err := ParseKind(strings.ToUpper(s))
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v", s, got, err)
		}
	}
	if Kind(0).String() != "kind(0)" || Kind(9).String() != "kind(9)" {
		t.Errorf("bad kinds: %q %q", Kind(0), Kind(9))
	}
	if _, err := ParseKind("tpu"); err == nil || !strings.Contains(err.Error(), `"tpu"`) {
		t.Errorf("ParseKind(tpu): %v", err)
	}
}

// TestParseBandwidthAsPeopleWriteIt: Gbps, Gbit/s, GBps and Gbyte/s mean
// what Gb/s and GB/s do, and b and B keep bits apart from bytes.
func TestParseBandwidthAsPeopleWriteIt(t *testing.T) {
	for s, want := range map[string]float64{
		"400Gbps": 50e9, "400Gbit/s": 50e9, "400Gbits/s": 50e9, "400 Gbps": 50e9, "800Mbps": 100e6, "8bps": 1,
		"50GBps": 50e9, "50Gbyte/s": 50e9, "50Gbytes/s": 50e9, "100MB/s": 100e6, "1KiBps": 1024,
	} {
		got, err := ParseBandwidth(s)
		if err != nil || got != want {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"400Gbpss", "400G", "400bp", "400Gbyte"} {
		if _, err := ParseBandwidth(s); err == nil {
			t.Errorf("ParseBandwidth(%q) succeeded", s)
		}
	}
}
