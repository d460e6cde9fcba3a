package topology

import (
	"errors"
	"strings"
	"testing"
)

func TestArch(t *testing.T) {
	tests := []struct {
		arch Arch
		name string
		sm   int
		rate float64
	}{
		{UnknownArch, "unknown", 0, 0},
		{Volta, "volta", 70, 25e9},
		{Ampere, "ampere", 80, 25e9},
		{Hopper, "hopper", 90, 25e9},
		{Blackwell, "blackwell", 100, 50e9},
	}
	for _, tc := range tests {
		if got := tc.arch.String(); got != tc.name {
			t.Errorf("Arch(%d).String() = %q, want %q", uint8(tc.arch), got, tc.name)
		}
		for _, s := range []string{tc.name, strings.ToUpper(tc.name)} {
			if a, err := ParseArch(s); err != nil || a != tc.arch {
				t.Errorf("ParseArch(%q) = %v, %v; want %v", s, a, err, tc.arch)
			}
		}
		if tc.arch.SM() != tc.sm || tc.arch.NVLinkRate() != tc.rate {
			t.Errorf("%s: SM %d, NVLinkRate %v; want %d, %v", tc.name, tc.arch.SM(), tc.arch.NVLinkRate(), tc.sm, tc.rate)
		}
	}
	if s := Arch(9).String(); s != "arch(9)" {
		t.Errorf("Arch(9).String() = %q", s)
	}
	if Arch(9).SM() != 0 || Arch(9).NVLinkRate() != 0 {
		t.Error("Arch(9) has an SM or an NVLink rate")
	}
	for _, s := range []string{"", "pascal", "sm90", "hopper ", "arch(9)"} {
		if _, err := ParseArch(s); err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "want volta, ampere, hopper, blackwell or unknown") {
			t.Errorf("ParseArch(%q): %v", s, err)
		}
	}
}

func TestCPUVendor(t *testing.T) {
	for c, name := range map[CPUVendor]string{UnknownCPU: "unknown", IntelCPU: "intel", AMDCPU: "amd", ARMCPU: "arm"} {
		if c.String() != name {
			t.Errorf("CPUVendor(%d).String() = %q, want %q", uint8(c), c.String(), name)
		}
		for _, s := range []string{name, strings.ToUpper(name)} {
			if got, err := ParseCPUVendor(s); err != nil || got != c {
				t.Errorf("ParseCPUVendor(%q) = %v, %v; want %v", s, got, err, c)
			}
		}
	}
	if s := CPUVendor(7).String(); s != "cpu(7)" {
		t.Errorf("CPUVendor(7).String() = %q", s)
	}
	for _, s := range []string{"", "grace", "power", "x86"} {
		if _, err := ParseCPUVendor(s); err == nil || !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "want intel, amd, arm or unknown") {
			t.Errorf("ParseCPUVendor(%q): %v", s, err)
		}
	}
}

// TestAutomorphismArch: GPUs of different architectures are not alike, so
// no renaming swaps them.
func TestAutomorphismArch(t *testing.T) {
	nodes := []Node{
		{Name: "gpu0", Kind: GPU, ReduceBW: 1, Arch: Hopper},
		{Name: "gpu1", Kind: GPU, ReduceBW: 1, Arch: Hopper},
		{Name: "sw0", Kind: Switch, ReduceBW: 5},
	}
	links := []Link{{0, 2, 1, 0}, {1, 2, 1, 0}}
	tp, err := New("same", nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.Automorphism([]int{1, 0}); !ok {
		t.Error("two hopper gpus on a switch: no automorphism swapping them")
	}
	nodes = append([]Node(nil), nodes...)
	nodes[1].Arch = Ampere
	tp, err = New("mixed", nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.Automorphism([]int{1, 0}); ok {
		t.Error("a hopper and an ampere gpu swapped by an automorphism")
	}
}
