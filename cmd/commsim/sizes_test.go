package main

import "testing"

func TestParseBytes(t *testing.T) {
	good := map[string]int64{
		"8": 8, "0": 0, "1KiB": 1024, "1MiB": 1 << 20, "1GiB": 1 << 30, "1GB": 1e9, "32M": 32 << 20,
		"4K": 4096, "2KB": 2000, "100B": 100, "1.5KiB": 1536, " 16 MiB ": 16 << 20,
	}
	for in, want := range good {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "KiB", "-1", "1.3B", "abc", "1XB", "9999999TiB", "NaN", "1e400"} {
		if got, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", bad, got)
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
