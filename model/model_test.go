package model

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

func small() *Profile {
	return &Profile{Name: "tiny", Sources: []string{"made up"}, Layers: []Layer{
		{Name: "a", Params: 10, DType: hw.F32, Forward: 1e-3, Backward: 2e-3},
		{Name: "b", Params: 20, DType: hw.BF16, Forward: 0, Backward: 0, Sharded: true},
	}}
}

func TestValidateErrors(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(p *Profile)
		wants []string
	}{
		{"empty profile name", func(p *Profile) { p.Name = "" }, []string{"profile name", "empty"}},
		{"no layers", func(p *Profile) { p.Layers = nil }, []string{`"tiny"`, "no layers"}},
		{"empty layer name", func(p *Profile) { p.Layers[1].Name = "" }, []string{"layers[1]", "empty"}},
		{"control char", func(p *Profile) { p.Layers[1].Name = "b\n" }, []string{"layers[1]", "unprintable"}},
		{"bad utf8", func(p *Profile) { p.Layers[0].Name = "\xff" }, []string{"layers[0]", "UTF-8"}},
		{"long name", func(p *Profile) { p.Layers[0].Name = strings.Repeat("x", MaxNameBytes+1) }, []string{"layers[0]", "limit of 256"}},
		{"duplicate", func(p *Profile) { p.Layers[1].Name = "a" }, []string{`layers[1] "a"`, "duplicate", "layers[0]"}},
		{"params 0", func(p *Profile) { p.Layers[1].Params = 0 }, []string{`layers[1] "b"`, "params 0", "> 0"}},
		{"params negative", func(p *Profile) { p.Layers[0].Params = -5 }, []string{`layers[0] "a"`, "params -5"}},
		{"negative time", func(p *Profile) { p.Layers[0].Forward = -1e-3 }, []string{`layers[0] "a"`, "forward", "-1ms", ">= 0"}},
		{"NaN time", func(p *Profile) { p.Layers[1].Backward = math.NaN() }, []string{`layers[1] "b"`, "backward", "NaN"}},
		{"Inf time", func(p *Profile) { p.Layers[1].Forward = math.Inf(1) }, []string{`layers[1] "b"`, "forward", "+Inf"}},
		{"huge time", func(p *Profile) { p.Layers[1].Forward = 1e4 }, []string{`layers[1] "b"`, "forward", "10000s", "limit"}},
		{"invalid dtype", func(p *Profile) { p.Layers[0].DType = 0 }, []string{`layers[0] "a"`, "dtype(0)"}},
		{"int dtype", func(p *Profile) { p.Layers[0].DType = hw.I32 }, []string{`layers[0] "a"`, "i32", "floating-point"}},
		{"huge layer", func(p *Profile) { p.Layers[0].Params = 2e13 }, []string{`layers[0] "a"`, "20000000000000", "20T", "10000000000000"}},
		{"huge total", func(p *Profile) { p.Layers[0].Params, p.Layers[1].Params = 6e12, 6e12 }, []string{`"tiny"`, "12000000000000", "12T", "10000000000000"}},
		{"empty source", func(p *Profile) { p.Sources = []string{"x", ""} }, []string{"sources[1]", "empty"}},
		{"too many layers", func(p *Profile) {
			p.Layers = make([]Layer, MaxLayers+1)
		}, []string{"100001 layers", "100000"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := small()
			if err := p.Validate(); err != nil {
				t.Fatalf("the base profile: %v", err)
			}
			c.edit(p)
			err := p.Validate()
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%v does not wrap ErrInvalid", err)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	var nilP *Profile
	if err := nilP.Validate(); err == nil {
		t.Error("nil profile validated")
	}
}

func TestTotals(t *testing.T) {
	p := small()
	if got := p.TotalParams(); got != 30 {
		t.Errorf("TotalParams = %d", got)
	}
	if got := p.GradientBytes(); got != 10*4+20*2 {
		t.Errorf("GradientBytes = %d", got)
	}
	if f, b := p.Compute(); f != 1e-3 || b != 2e-3 {
		t.Errorf("Compute = %g, %g", f, b)
	}
	p.Layers[0].Params, p.Layers[1].Params = math.MaxInt64, math.MaxInt64
	if got := p.TotalParams(); got != math.MaxInt64 {
		t.Errorf("TotalParams did not saturate: %d", got)
	}
	if got := p.GradientBytes(); got != math.MaxInt64 {
		t.Errorf("GradientBytes did not saturate: %d", got)
	}
	var nilP *Profile
	if nilP.TotalParams() != 0 || nilP.GradientBytes() != 0 {
		t.Error("nil profile")
	}
}
