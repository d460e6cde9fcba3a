package model

import (
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// The architectures, counted again here from their weight matrices (not
// from builtin.go's closed forms), and the figures the papers publish.
func gpt2SmallExpected() (total, block int64) {
	const d, vocab, ctx, ff = 768, 50257, 1024, 4 * 768
	attn := int64(d*3*d+3*d) + int64(d*d+d) // c_attn (q, k, v) and c_proj, with biases
	mlp := int64(d*ff+ff) + int64(ff*d+d)   // c_fc and c_proj, with biases
	lns := int64(2 * (d + d))               // ln_1, ln_2: weight and bias
	block = attn + mlp + lns
	return int64(vocab*d) + int64(ctx*d) + 12*block + 2*d, block // wte, wpe, blocks, ln_f; head tied
}

func llamaExpected(d, heads, kvHeads, ffn, vocab, layers int64) (total, block int64) {
	hd := d / heads
	attn := d*heads*hd + 2*d*kvHeads*hd + heads*hd*d // wq; wk, wv; wo
	mlp := 3 * d * ffn                               // w1, w2, w3 (SwiGLU)
	block = attn + mlp + 2*d                         // two RMSNorm weights
	return vocab*d + layers*block + d + vocab*d, block
}

func TestBuiltins(t *testing.T) {
	g2, g2b := gpt2SmallExpected()
	l7, l7b := llamaExpected(4096, 32, 32, 11008, 32000, 32)
	l70, l70b := llamaExpected(8192, 64, 8, 28672, 32000, 80)
	cases := []struct {
		name         string
		layers       int
		total, block int64
		published    float64
		dtype        hw.DType
		peak         float64
		tokens       int64
		sharded      bool
	}{
		{"gpt2-small", 14, g2, g2b, 124e6, hw.F32, H100TF32, 8192, false},
		{"llama-7b", 34, l7, l7b, 6.74e9, hw.BF16, H100BF16, 4096, false},
		{"llama-70b", 82, l70, l70b, 68.98e9, hw.BF16, H100BF16, 4096, true},
	}
	if got := Builtins(); len(got) != len(cases) {
		t.Fatalf("Builtins() = %v, want %d names", got, len(cases))
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if Builtins()[i] != c.name {
				t.Errorf("Builtins()[%d] = %q, want %q", i, Builtins()[i], c.name)
			}
			p, err := Builtin(c.name)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			if p.Name != c.name {
				t.Errorf("Name = %q", p.Name)
			}
			if len(p.Sources) < 5 {
				t.Errorf("only %d sources", len(p.Sources))
			}
			if len(p.Layers) != c.layers {
				t.Errorf("%d layers, want %d", len(p.Layers), c.layers)
			}
			if got := p.TotalParams(); got != c.total {
				t.Errorf("TotalParams = %d, want %d from the architecture", got, c.total)
			}
			if rel := math.Abs(float64(p.TotalParams())-c.published) / c.published; rel > 0.005 {
				t.Errorf("TotalParams = %d is %.2f%% off the published %g", p.TotalParams(), 100*rel, c.published)
			}
			if p.Layers[0].Forward != 0 || p.Layers[0].Backward != 0 {
				t.Errorf("embedding %q has compute %g/%g, want 0", p.Layers[0].Name, p.Layers[0].Forward, p.Layers[0].Backward)
			}
			wantFwd := 2 * float64(c.block) * float64(c.tokens) / (c.peak * 0.4)
			for j, l := range p.Layers {
				if l.DType != c.dtype {
					t.Errorf("layer %q dtype %v, want %v", l.Name, l.DType, c.dtype)
				}
				if l.Sharded != c.sharded {
					t.Errorf("layer %q sharded %v, want %v", l.Name, l.Sharded, c.sharded)
				}
				if j == 0 {
					continue
				}
				if l.Forward <= 0 || l.Backward != 2*l.Forward {
					t.Errorf("layer %q: forward %g, backward %g: want backward = 2×forward > 0", l.Name, l.Forward, l.Backward)
				}
				if j == len(p.Layers)-1 {
					continue
				}
				if l.Params != c.block {
					t.Errorf("block %q has %d params, want %d", l.Name, l.Params, c.block)
				}
				if math.Abs(l.Forward-wantFwd) > 1e-12*wantFwd {
					t.Errorf("block %q forward %g s, want 2·%d·%d/(%g·0.4) = %g s", l.Name, l.Forward, c.block, c.tokens, c.peak, wantFwd)
				}
			}
		})
	}
}

func TestBuiltinFigures(t *testing.T) {
	// The figures the package doc quotes, to 4 significant digits.
	for _, c := range []struct {
		name     string
		fwd, bwd float64
	}{
		{"gpt2-small", 0.5877e-3, 1.175e-3},
		{"llama-7b", 4.191e-3, 8.382e-3},
		{"llama-70b", 17.72e-3, 35.44e-3},
	} {
		p, err := Builtin(c.name)
		if err != nil {
			t.Fatal(err)
		}
		b := p.Layers[1]
		if math.Abs(b.Forward-c.fwd) > 5e-4*c.fwd || math.Abs(b.Backward-c.bwd) > 5e-4*c.bwd {
			t.Errorf("%s block: %g / %g s, doc says %g / %g", c.name, b.Forward, b.Backward, c.fwd, c.bwd)
		}
	}
}

func TestBuiltinIsACopy(t *testing.T) {
	p, _ := Builtin("llama-7b")
	p.Layers[1].Params = 1
	p.Sources[0] = "changed"
	q, _ := Builtin("llama-7b")
	if q.Layers[1].Params == 1 || q.Sources[0] == "changed" {
		t.Fatal("Builtin shares state between calls")
	}
	names := Builtins()
	names[0] = "x"
	if Builtins()[0] != "gpt2-small" {
		t.Fatal("Builtins shares its slice")
	}
}

func TestBuiltinUnknown(t *testing.T) {
	_, err := Builtin("gpt3")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"gpt3"`, "gpt2-small", "llama-7b", "llama-70b"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestFLOPsTimes(t *testing.T) {
	fwd, bwd := FLOPsTimes(1e9, 1000, 1e15, 0.5)
	if fwd != 4e-3 || bwd != 8e-3 {
		t.Errorf("FLOPsTimes(1e9, 1000, 1e15, 0.5) = %g, %g; want 4ms, 8ms", fwd, bwd)
	}
	if f, b := FLOPsTimes(0, 1000, 1e15, 0.5); f != 0 || b != 0 {
		t.Errorf("zero params: %g, %g", f, b)
	}
	for _, c := range []struct {
		params, tokens int64
		peak, mfu      float64
	}{
		{-1, 1, 1, 1}, {1, -1, 1, 1}, {1, 1, 0, 1}, {1, 1, -1, 1}, {1, 1, math.NaN(), 1},
		{1, 1, 1, 0}, {1, 1, 1, 1.5}, {1, 1, 1, math.NaN()},
	} {
		if f, b := FLOPsTimes(c.params, c.tokens, c.peak, c.mfu); !math.IsNaN(f) || !math.IsNaN(b) {
			t.Errorf("FLOPsTimes%v = %g, %g; want NaN", c, f, b)
		}
	}
}
