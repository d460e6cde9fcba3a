package model

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

func roundTrip(t testing.TB, p *Profile) *Profile {
	t.Helper()
	var buf bytes.Buffer
	if err := p.WriteYAML(&buf); err != nil {
		t.Fatalf("WriteYAML: %v", err)
	}
	q, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatalf("Parse of WriteYAML's output: %v\n%s", err, buf.String())
	}
	if !reflect.DeepEqual(p, q) {
		t.Fatalf("round trip changed the profile:\nwrote %+v\nread  %+v\n%s", p, q, buf.String())
	}
	return q
}

func TestRoundTripBuiltins(t *testing.T) {
	for _, name := range Builtins() {
		t.Run(name, func(t *testing.T) {
			p, err := Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, p)
		})
	}
}

func TestRoundTripOddValues(t *testing.T) {
	p := small()
	p.Name = "true" // a string that YAML would read as a bool unless quoted
	p.Sources = []string{"# not a comment", "key: value", "'quoted'", "- dash", "ünïcødé ✓"}
	p.Layers[0].Name = "123"
	p.Layers[0].Forward = 5e-324 // the smallest subnormal
	p.Layers[0].Backward = MaxLayerSeconds
	p.Layers[1].Name = "null"
	p.Layers[1].Forward = 1.0000000000000002e-9
	p.Layers[1].Backward = 0.1 + 0.2
	p.Layers = append(p.Layers, Layer{Name: "[x] {y}: z", Params: MaxTotalParams - 30, DType: hw.F64, Forward: 1e-13})
	roundTrip(t, p)
}

func TestWriteYAMLRefusesInvalid(t *testing.T) {
	p := small()
	p.Layers[0].Params = 0
	if err := p.WriteYAML(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "params 0") {
		t.Errorf("WriteYAML of an invalid profile: %v", err)
	}
}

const example = `
name: my-model
sources: ["where the numbers come from"]
tokens: 8192
peak_tflops: 989
mfu: 0.4
layers:
  - {name: embed, params: 38597376, dtype: f32, forward: 0, backward: 0}
  - {name: block0, params: 7087872, dtype: bf16, forward: 1.2ms, backward: 2.4ms, sharded: true}
  - {name: block1, params: 7_087_872, dtype: bfloat16}
  - {name: head, params: 1536, dtype: fp16, flops: 9.89e11}
`

func TestParseExample(t *testing.T) {
	p, err := Parse([]byte(example))
	if err != nil {
		t.Fatal(err)
	}
	fwd, bwd := FLOPsTimes(7087872, 8192, 989e12, 0.4)
	want := &Profile{Name: "my-model", Sources: []string{"where the numbers come from"}, Layers: []Layer{
		{Name: "embed", Params: 38597376, DType: hw.F32},
		{Name: "block0", Params: 7087872, DType: hw.BF16, Forward: 1.2e-3, Backward: 2.4e-3, Sharded: true},
		{Name: "block1", Params: 7087872, DType: hw.BF16, Forward: fwd, Backward: bwd},
		{Name: "head", Params: 1536, DType: hw.F16, Forward: 9.89e11 / (989e12 * 0.4), Backward: 2 * 9.89e11 / (989e12 * 0.4)},
	}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got  %+v\nwant %+v", p, want)
	}
	if math.Abs(p.Layers[3].Forward-2.5e-3) > 1e-15 {
		t.Errorf("flops layer forward %g, want 2.5ms", p.Layers[3].Forward)
	}
	roundTrip(t, p)
}

// A file with a built-in's figures and no times derives the same times.
func TestParseDerivesBuiltinTimes(t *testing.T) {
	src := `name: l
tokens: 4096
peak_tflops: 989
mfu: 0.4
layers: [{name: b, params: 202383360, dtype: bf16}]`
	p, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Builtin("llama-7b")
	if p.Layers[0].Forward != b.Layers[1].Forward || p.Layers[0].Backward != b.Layers[1].Backward {
		t.Errorf("derived %g/%g, built-in %g/%g", p.Layers[0].Forward, p.Layers[0].Backward, b.Layers[1].Forward, b.Layers[1].Backward)
	}
}

func TestParseErrors(t *testing.T) {
	const head = "name: m\nlayers:\n"
	cases := []struct {
		name, doc string
		wants     []string
	}{
		{"duplicate layer", head + "  - {name: a, params: 1, dtype: f32, forward: 0, backward: 0}\n  - {name: a, params: 2, dtype: f32, forward: 0, backward: 0}\n",
			[]string{"line 4", `layers[1] "a"`, "duplicate", "layers[0]"}},
		{"params 0", head + "  - {name: a, params: 0, dtype: f32, forward: 0, backward: 0}\n",
			[]string{"line 3", `layers[0] "a"`, "params 0"}},
		{"params negative", head + "  - {name: a, params: -3, dtype: f32, forward: 0, backward: 0}\n",
			[]string{`layers[0] "a"`, "params", "-3", "> 0"}},
		{"params not a number", head + "  - {name: a, params: 1.5, dtype: f32, forward: 0, backward: 0}\n",
			[]string{`layers[0] "a"`, "params", "whole number"}},
		{"params too large", head + "  - {name: a, params: 99999999999999999999, dtype: f32, forward: 0, backward: 0}\n",
			[]string{`layers[0] "a"`, "too large"}},
		{"params absurd", head + "  - {name: a, params: 20000000000000, dtype: f32, forward: 0, backward: 0}\n",
			[]string{`layers[0] "a"`, "20000000000000", "limit"}},
		{"negative time", head + "  - {name: a, params: 1, dtype: f32, forward: -1ms, backward: 0}\n",
			[]string{"line 3", `layers[0] "a"`, "forward", ">= 0"}},
		{"time without unit", head + "  - {name: a, params: 1, dtype: f32, forward: 0, backward: 2}\n",
			[]string{`layers[0] "a"`, "backward", "missing unit"}},
		{"NaN time", head + "  - {name: a, params: 1, dtype: f32, forward: .nan, backward: 0}\n",
			[]string{`layers[0] "a"`, "forward"}},
		{"unknown layer field", head + "  - {params: 1, dtype: f32, forward: 0, backward: 0, name: a, bias: 3}\n",
			[]string{"line 3", `layers[0] "a"`, `unknown field "bias"`}},
		{"unknown top field", "name: m\nlayer: []\n", []string{"line 2", `unknown field "layer"`, "layers"}},
		{"repeated field", head + "  - {name: a, params: 1, params: 2, dtype: f32}\n", []string{`layers[0] "a"`, `"params" given twice`}},
		{"bad dtype", head + "  - {name: a, params: 1, dtype: f33, forward: 0, backward: 0}\n",
			[]string{`layers[0] "a"`, `unknown dtype "f33"`, "bf16"}},
		{"int dtype", head + "  - {name: a, params: 1, dtype: i32, forward: 0, backward: 0}\n",
			[]string{`layers[0] "a"`, `dtype "i32"`, "floating-point"}},
		{"missing dtype", head + "  - {name: a, params: 1, forward: 0, backward: 0}\n", []string{`layers[0] "a"`, "missing dtype"}},
		{"missing times", head + "  - {name: a, params: 1, dtype: f32}\n",
			[]string{"line 3", `layers[0] "a"`, "no forward and backward", "tokens, peak_tflops, mfu"}},
		{"missing mfu", "name: m\ntokens: 1\npeak_tflops: 1\nlayers:\n  - {name: a, params: 1, dtype: f32}\n",
			[]string{`layers[0] "a"`, "mfu"}},
		{"flops without peak", head + "  - {name: a, params: 1, dtype: f32, flops: 1e9}\n",
			[]string{`layers[0] "a"`, "flops", "peak_tflops and mfu"}},
		{"only forward", head + "  - {name: a, params: 1, dtype: f32, forward: 1ms}\n", []string{`layers[0] "a"`, "both forward and backward"}},
		{"times and flops", "name: m\npeak_tflops: 1\nmfu: 1\nlayers:\n  - {name: a, params: 1, dtype: f32, forward: 0, backward: 0, flops: 3}\n",
			[]string{`layers[0] "a"`, "either flops or forward"}},
		{"derived time too long", "name: m\ntokens: 1000000\npeak_tflops: 0.001\nmfu: 0.01\nlayers:\n  - {name: a, params: 1000000000, dtype: f32}\n",
			[]string{`layers[0] "a"`, "forward", "limit"}},
		{"bad mfu", "name: m\nmfu: 1.5\nlayers: []\n", []string{"line 2", "mfu", "at most 1"}},
		{"bad tokens", "name: m\ntokens: 0\nlayers: []\n", []string{"line 2", "tokens"}},
		{"bad peak", "name: m\npeak_tflops: -3\nlayers: []\n", []string{"line 2", "peak_tflops"}},
		{"bad sharded", head + "  - {name: a, params: 1, dtype: f32, forward: 0, backward: 0, sharded: maybe}\n",
			[]string{`layers[0] "a"`, "sharded", "true or false"}},
		{"no name", "layers: []\n", []string{"missing name"}},
		{"no layers", "name: m\n", []string{`"m"`, "missing layers"}},
		{"empty layers", "name: m\nlayers: []\n", []string{`"m"`, "no layers"}},
		{"layer without name", head + "  - {params: 1, dtype: f32, forward: 0, backward: 0}\n", []string{"layers[0]", "missing name"}},
		{"layer not a mapping", head + "  - 3\n", []string{"line 3", "layers[0]", "mapping"}},
		{"layers not a list", "name: m\nlayers: 3\n", []string{"layers must be a list"}},
		{"sources not a list", "name: m\nsources: x\nlayers: []\n", []string{"sources must be a list"}},
		{"nested value", head + "  - {name: a, params: [1], dtype: f32, forward: 0, backward: 0}\n", []string{`layers[0] "a"`, "params must be a single value"}},
		{"second document", "name: m\nlayers: [{name: a, params: 1, dtype: f32, forward: 0, backward: 0}]\n---\nname: n\n", []string{"second document"}},
		{"empty document", "", []string{"empty document"}},
		{"not a mapping", "- 1\n", []string{"must be a mapping"}},
		{"syntax", "name: [\n", []string{"yaml"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.doc))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", p)
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
}

func TestLoadAndResolve(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.yaml")
	if err := os.WriteFile(path, []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	q, err := Resolve(path)
	if err != nil || !reflect.DeepEqual(p, q) {
		t.Fatalf("Resolve(file) = %+v, %v", q, err)
	}
	b, err := Resolve("llama-70b")
	if err != nil || b.Name != "llama-70b" {
		t.Fatalf("Resolve(built-in) = %v, %v", b, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("name: m\nlayers: [{name: a, params: 0, dtype: f32}]\n"), 0o644)
	if _, err := Resolve(bad); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad) {
		t.Errorf("Resolve(bad file): %v", err)
	}
	_, err = Resolve(filepath.Join(dir, "nope.yaml"))
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "gpt2-small") {
		t.Errorf("Resolve(missing): %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope.yaml")); err == nil || errors.Is(err, ErrInvalid) {
		t.Errorf("Load(missing): %v", err)
	}
}
