package model

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// FuzzParse: Parse never panics; what it accepts validates, and writes and
// parses back to the same profile.
func FuzzParse(f *testing.F) {
	// Seeds stay small (a built-in cut to three layers and one source):
	// the fuzzer minimises every new input, and large ones make that slow.
	for _, name := range Builtins() {
		p, _ := Builtin(name)
		p.Layers = append(p.Layers[:2], p.Layers[len(p.Layers)-1])
		p.Sources = p.Sources[:1]
		var buf bytes.Buffer
		if err := p.WriteYAML(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Add([]byte(example))
	for _, s := range []string{
		"",
		"name: m\nlayers: [{name: a, params: 1, dtype: f32, forward: 1us, backward: 2us}]\n",
		"name: m\ntokens: 1\npeak_tflops: 1\nmfu: 1\nlayers: [{name: a, params: 1_000, dtype: half}, {name: b, params: 2, dtype: f64, flops: 0}]\n",
		"name: &n m\nsources: [*n, x]\nlayers: [&l {name: a, params: 1, dtype: f32, forward: 0, backward: 0}, *l]\n",
		"name: m\nlayers:\n  - name: a\n    params: +7\n    dtype: BF16\n    forward: 1.5µs\n    backward: 3e-6s\n    sharded: True\n",
		"name: \"\\u00e9\\t\"\nlayers: [{name: \"x y\", params: 9223372036854775807, dtype: f16, forward: 0, backward: 0}]\n",
		"name: m\nlayers: [{<<: {name: a}, params: 1}]\n",
		"--- \nname: m\n...\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			if p != nil {
				t.Fatalf("Parse returned a profile and an error: %v", err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("Parse accepted a profile Validate refuses: %v", err)
		}
		var buf bytes.Buffer
		if err := p.WriteYAML(&buf); err != nil {
			t.Fatalf("WriteYAML: %v", err)
		}
		q, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("Parse of WriteYAML's output: %v\n%s", err, buf.String())
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("round trip changed the profile:\n%+v\n%+v\n%s", p, q, buf.String())
		}
	})
}
