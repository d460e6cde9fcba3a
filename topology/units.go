package topology

import (
	"math"
	"strconv"
	"strings"
)

// maxValueLen bounds the length of a bandwidth or latency string.
const maxValueLen = 256

// decimal is a number as written: mant (digits with at most one '.') times
// 10^exp, so that units can be applied by moving the exponent, never by a
// floating-point multiply.
type decimal struct {
	neg  bool
	mant string
	exp  int
}

// scanDecimal reads [+-]digits[.digits][(e|E)[+-]digits] from the front of s.
func scanDecimal(s string) (d decimal, rest string, ok bool) {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		d.neg = s[i] == '-'
		i++
	}
	start, digits := i, 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return decimal{}, s, false
	}
	d.mant = s[start:i]
	if d.mant[0] == '.' {
		d.mant = "0" + d.mant
	}
	if d.mant[len(d.mant)-1] == '.' {
		d.mant += "0"
	}
	// An exponent only counts when digits follow; "5e" leaves "e" as unit.
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		neg := false
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			neg = s[j] == '-'
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			e := 0
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				if e < 1_000_000 { // far beyond any float64 with a short mantissa
					e = e*10 + int(s[j]-'0')
				}
				j++
			}
			if neg {
				e = -e
			}
			d.exp = e
			i = j
		}
	}
	return d, s[i:], true
}

// float returns the decimal times 10^shift, correctly rounded, by building
// "<mant>e<exp+shift>" for strconv.ParseFloat. Overflow gives ±Inf.
func (d decimal) float(shift int) float64 {
	s := d.mant + "e" + strconv.Itoa(d.exp+shift)
	if d.neg {
		s = "-" + s
	}
	v, _ := strconv.ParseFloat(s, 64) // syntax is guaranteed; ErrRange gives ±Inf or 0
	return v
}

type bwUnit struct {
	name   string
	dec    int  // decimal exponent
	bin    int  // binary exponent (KiB…)
	perBit bool // the unit counts bits: divide by 8
}

var bwUnits = []bwUnit{
	{"B/s", 0, 0, false},
	{"kB/s", 3, 0, false}, {"KB/s", 3, 0, false},
	{"MB/s", 6, 0, false}, {"GB/s", 9, 0, false},
	{"TB/s", 12, 0, false}, {"PB/s", 15, 0, false},
	{"KiB/s", 0, 10, false}, {"MiB/s", 0, 20, false},
	{"GiB/s", 0, 30, false}, {"TiB/s", 0, 40, false},
	{"b/s", 0, 0, true},
	{"kb/s", 3, 0, true}, {"Kb/s", 3, 0, true},
	{"Mb/s", 6, 0, true}, {"Gb/s", 9, 0, true},
	{"Tb/s", 12, 0, true},
}

// bwUnitAlias spells a unit as people also write it the way bwUnits
// does: 400Gbps, 400Gbit/s and 400Gbits/s are 400Gb/s; 25GBps and
// 25Gbyte/s are 25GB/s. The case of b and B still tells bits from bytes.
func bwUnitAlias(unit string) string {
	for _, a := range []struct{ suffix, as string }{
		{"bps", "b/s"}, {"Bps", "B/s"}, {"bits/s", "b/s"}, {"bit/s", "b/s"}, {"bytes/s", "B/s"}, {"byte/s", "B/s"},
	} {
		if prefix, ok := strings.CutSuffix(unit, a.suffix); ok {
			return prefix + a.as
		}
	}
	return unit
}

// ParseBandwidth parses a bandwidth such as "100GB/s", "400Gb/s",
// "1.5TB/s", "25e9B/s", "64GiB/s" or "inf", and returns bytes per second.
// Units may also be written Gbps, Gbit/s, GBps or Gbyte/s (bwUnitAlias).
//
// Units: B/s, kB/s (or KB/s), MB/s, GB/s, TB/s, PB/s are powers of 10 of
// bytes (GB/s = 1e9 bytes/s, as in nccl-tests); b/s, kb/s, Mb/s, Gb/s, Tb/s
// are bits (400Gb/s = 50e9 bytes/s); KiB/s, MiB/s, GiB/s, TiB/s are powers of
// 2 of bytes. The result is correctly rounded: the decimal mantissa is
// shifted by the unit's exponent as text and parsed once by
// strconv.ParseFloat; bits and binary units then scale by a power of two,
// which is exact. A unit is required. The value must be > 0; "inf" (any
// case, optional '+') gives +Inf, which only reduce= accepts.
func ParseBandwidth(s string) (float64, error) {
	orig := s
	if len(s) > maxValueLen {
		return 0, newErr(ErrSpec, "bandwidth is %d bytes long, more than the limit of %d", len(s), maxValueLen)
	}
	s = strings.TrimSpace(s)
	if t := strings.TrimPrefix(s, "+"); strings.EqualFold(t, "inf") {
		return math.Inf(1), nil
	}
	d, unit, ok := scanDecimal(s)
	if !ok {
		return 0, newErr(ErrSpec, "bandwidth %q: want a number and a unit, e.g. 100GB/s, 400Gb/s or inf", orig)
	}
	unit = bwUnitAlias(strings.TrimSpace(unit))
	switch {
	case unit == "" && !(d.float(0) > 0):
		return 0, newErr(ErrSpec, "bandwidth %q: must be > 0", orig) // whatever its unit
	case unit == "":
		return 0, newErr(ErrSpec, "bandwidth %q: missing unit (B/s, GB/s, Gb/s, GiB/s, …)", orig)
	}
	for _, u := range bwUnits {
		if unit != u.name {
			continue
		}
		v := d.float(u.dec)
		if u.perBit {
			v /= 8
		}
		if u.bin != 0 {
			v = math.Ldexp(v, u.bin)
		}
		switch {
		case math.IsNaN(v) || !(v > 0):
			return 0, newErr(ErrSpec, "bandwidth %q: must be > 0", orig)
		case math.IsInf(v, 1):
			return 0, newErr(ErrSpec, "bandwidth %q: too large for a float64 (write inf for unlimited)", orig)
		}
		return v, nil
	}
	return 0, newErr(ErrSpec, "bandwidth %q: unknown unit %q (want B/s, kB/s, MB/s, GB/s, TB/s, PB/s, b/s, Kb/s, Mb/s, Gb/s, Tb/s, KiB/s, MiB/s, GiB/s or TiB/s)", orig, unit)
}

// FormatBandwidth writes a bandwidth in bytes per second so that
// ParseBandwidth gives back exactly the same float64. It uses the largest
// decimal byte unit (PB/s, TB/s, GB/s, MB/s, kB/s, B/s) not above the value,
// with the shortest decimal mantissa that round-trips (450e9 is "450GB/s",
// 46.5e9 is "46.5GB/s"); values below 1 B/s or from 1e18 B/s up are plain
// B/s in strconv's 'g' format. +Inf is "inf". Non-positive values and NaN are
// written the same way but do not parse back.
func FormatBandwidth(bw float64) string {
	switch {
	case math.IsInf(bw, 1):
		return "inf"
	case math.IsNaN(bw) || !(bw > 0) || math.IsInf(bw, 0):
		return strconv.FormatFloat(bw, 'g', -1, 64) + "B/s"
	}
	units := []struct {
		name string
		exp  int
	}{{"PB/s", 15}, {"TB/s", 12}, {"GB/s", 9}, {"MB/s", 6}, {"kB/s", 3}, {"B/s", 0}}
	exp := decimalExponent(bw)
	if exp >= 18 || exp < 0 {
		return strconv.FormatFloat(bw, 'g', -1, 64) + "B/s"
	}
	for _, u := range units {
		if exp >= u.exp {
			return scaledDecimal(bw, u.exp) + u.name
		}
	}
	return strconv.FormatFloat(bw, 'g', -1, 64) + "B/s" // not reached
}

// decimalExponent returns e such that v's shortest decimal is d.ddd × 10^e.
func decimalExponent(v float64) int {
	s := strconv.FormatFloat(v, 'e', -1, 64)
	i := strings.IndexByte(s, 'e')
	e, _ := strconv.Atoi(s[i+1:])
	return e
}

// scaledDecimal writes v / 10^shift as a plain decimal by moving the point
// in v's shortest decimal representation: exact, no float arithmetic.
func scaledDecimal(v float64, shift int) string {
	s := strconv.FormatFloat(v, 'e', -1, 64) // "4.5e+11"
	i := strings.IndexByte(s, 'e')
	e, _ := strconv.Atoi(s[i+1:])
	digits := strings.Replace(s[:i], ".", "", 1)
	pos := e - shift + 1 // digits before the point
	switch {
	case pos <= 0:
		return "0." + strings.Repeat("0", -pos) + digits
	case pos >= len(digits):
		return digits + strings.Repeat("0", pos-len(digits))
	default:
		return digits[:pos] + "." + digits[pos:]
	}
}

var latUnits = []struct {
	name string
	exp  int
}{
	{"s", 0}, {"ms", -3}, {"us", -6}, {"µs", -6}, {"μs", -6}, {"ns", -9}, {"ps", -12},
}

// ParseLatency parses a latency such as "1us", "500ns", "936.25ns", "2ms",
// "1.5µs" or "0" and returns seconds. Units: s, ms, us (or µs, μs), ns, ps;
// "0" needs none. The result is correctly rounded (the unit shifts the
// decimal exponent as text) and must be >= 0 and finite; -0 is returned as 0.
func ParseLatency(s string) (float64, error) {
	orig := s
	if len(s) > maxValueLen {
		return 0, newErr(ErrSpec, "latency is %d bytes long, more than the limit of %d", len(s), maxValueLen)
	}
	s = strings.TrimSpace(s)
	d, unit, ok := scanDecimal(s)
	if !ok {
		return 0, newErr(ErrSpec, "latency %q: want a number and a unit, e.g. 1us, 500ns or 0", orig)
	}
	unit = strings.TrimSpace(unit)
	shift, found := 0, false
	for _, u := range latUnits {
		if unit == u.name {
			shift, found = u.exp, true
			break
		}
	}
	if !found {
		if unit != "" {
			return 0, newErr(ErrSpec, "latency %q: unknown unit %q (want s, ms, us, µs, ns or ps)", orig, unit)
		}
		if d.float(0) != 0 {
			return 0, newErr(ErrSpec, "latency %q: missing unit (s, ms, us, ns or ps); only 0 may omit it", orig)
		}
	}
	v := d.float(shift)
	switch {
	case math.IsInf(v, 0):
		return 0, newErr(ErrSpec, "latency %q: too large for a float64", orig)
	case v < 0:
		return 0, newErr(ErrSpec, "latency %q: must be >= 0", orig)
	case v == 0:
		return 0, nil // also turns -0 into 0
	}
	return v, nil
}

// FormatLatency writes a latency in seconds so that ParseLatency gives back
// exactly the same float64: 0 is "0"; otherwise the largest unit (s, ms, us,
// ns, ps) not above the value with the shortest decimal mantissa that
// round-trips (936.25e-9 is "936.25ns"); values below 1 ps or from 1000 s up
// are plain seconds in strconv's 'g' format. Negative values, NaN and Inf are
// written but do not parse back.
func FormatLatency(sec float64) string {
	switch {
	case sec == 0:
		return "0"
	case math.IsNaN(sec) || math.IsInf(sec, 0) || sec < 0:
		return strconv.FormatFloat(sec, 'g', -1, 64) + "s"
	}
	exp := decimalExponent(sec)
	if exp >= 3 || exp < -12 {
		return strconv.FormatFloat(sec, 'g', -1, 64) + "s"
	}
	for _, u := range []struct {
		name string
		exp  int
	}{{"s", 0}, {"ms", -3}, {"us", -6}, {"ns", -9}, {"ps", -12}} {
		if exp >= u.exp {
			return scaledDecimal(sec, u.exp) + u.name
		}
	}
	return strconv.FormatFloat(sec, 'g', -1, 64) + "s" // not reached
}
