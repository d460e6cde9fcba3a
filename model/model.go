package model

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/topology"
)

// ErrInvalid is wrapped by every error from Validate, Parse, Load and
// Resolve that is about the profile itself (as opposed to, say, a missing
// file or an unknown built-in name).
var ErrInvalid = errors.New("invalid model profile")

// Limits that Validate and Parse enforce. They are far above any real model
// and exist so that a mistyped figure (or a hostile file) gives an error
// naming the figure instead of nonsense or an overflow further on.
const (
	// MaxTotalParams bounds the sum of Params over all layers: 1e13, about
	// 145× Llama 2 70B and 18× PaLM 540B.
	MaxTotalParams int64 = 1e13
	// MaxLayers bounds the number of layers in a profile.
	MaxLayers = 100_000
	// MaxLayerSeconds bounds Forward and Backward of one layer: an hour of
	// compute for one layer in one step.
	MaxLayerSeconds = 3600.0
	// MaxNameBytes bounds the length of a profile or layer name.
	MaxNameBytes = 256
	// MaxSources bounds the number of Sources; MaxSourceBytes the length
	// of each.
	MaxSources     = 1000
	MaxSourceBytes = 4096
)

// Layer is one block of a model with its parameters and compute times.
type Layer struct {
	Name     string
	Params   int64    // parameter count (elements)
	DType    hw.DType // gradient dtype: a floating-point dtype (f32, f64, f16, bf16)
	Forward  float64  // seconds of forward compute for one step on one GPU
	Backward float64  // seconds of backward compute for one step on one GPU
	Sharded  bool     // ZeRO-3/FSDP-style sharded parameter: reduce-scatter of grads, all-gather of params
}

// Profile is a model as param sync and commsim train see it: its layers in
// forward order (backward runs them in reverse) and where every figure comes
// from.
type Profile struct {
	Name    string
	Layers  []Layer  // in forward order; backward runs them in reverse
	Sources []string // where every figure comes from
}

// TotalParams returns the sum of Params over all layers. It saturates at
// math.MaxInt64 instead of wrapping (only possible for a profile that
// Validate refuses) and counts negative Params as they are.
func (p *Profile) TotalParams() int64 {
	if p == nil {
		return 0
	}
	var total int64
	for _, l := range p.Layers {
		switch {
		case l.Params > 0 && total > math.MaxInt64-l.Params:
			return math.MaxInt64
		case l.Params < 0 && total < math.MinInt64-l.Params:
			return math.MinInt64
		}
		total += l.Params
	}
	return total
}

// GradientBytes returns the bytes of gradient of all layers:
// Σ Params × DType.Size(). Layers with an invalid dtype count 0 bytes. It
// saturates at math.MaxInt64.
func (p *Profile) GradientBytes() int64 {
	if p == nil {
		return 0
	}
	var total int64
	for _, l := range p.Layers {
		sz := int64(l.DType.Size())
		if l.Params <= 0 || sz == 0 {
			continue
		}
		if l.Params > (math.MaxInt64-total)/sz {
			return math.MaxInt64
		}
		total += l.Params * sz
	}
	return total
}

// Compute returns the forward and the backward compute time of one step on
// one GPU: the sums of Forward and Backward over all layers.
func (p *Profile) Compute() (fwd, bwd float64) {
	if p == nil {
		return 0, 0
	}
	for _, l := range p.Layers {
		fwd += l.Forward
		bwd += l.Backward
	}
	return fwd, bwd
}

// Validate checks the profile and returns the first problem, naming the
// profile and the offending layer by index and name. A valid profile has a
// printable name; at least one and at most MaxLayers layers, each with a
// unique printable non-empty name of at most MaxNameBytes bytes, Params > 0,
// a floating-point dtype, and Forward and Backward finite, >= 0 and at most
// MaxLayerSeconds; a total of at most MaxTotalParams parameters; and at most
// MaxSources non-empty printable sources of at most MaxSourceBytes bytes.
// Every error wraps ErrInvalid.
func (p *Profile) Validate() error {
	if p == nil {
		return invalid("nil profile")
	}
	if err := checkText(p.Name, MaxNameBytes); err != nil {
		return invalid("profile name %s", err)
	}
	what := fmt.Sprintf("profile %q", p.Name)
	if len(p.Layers) == 0 {
		return invalid("%s: no layers; a profile needs at least one", what)
	}
	if len(p.Layers) > MaxLayers {
		return invalid("%s: %d layers, more than the limit of %d", what, len(p.Layers), MaxLayers)
	}
	if len(p.Sources) > MaxSources {
		return invalid("%s: %d sources, more than the limit of %d", what, len(p.Sources), MaxSources)
	}
	for i, s := range p.Sources {
		if err := checkText(s, MaxSourceBytes); err != nil {
			return invalid("%s: sources[%d] %s", what, i, err)
		}
	}
	seen := make(map[string]int, len(p.Layers))
	var total int64
	for i, l := range p.Layers {
		if err := checkText(l.Name, MaxNameBytes); err != nil {
			return invalid("%s: layers[%d] name %s", what, i, err)
		}
		lw := fmt.Sprintf("%s: layers[%d] %q", what, i, l.Name)
		if j, dup := seen[l.Name]; dup {
			return invalid("%s: duplicate name (also layers[%d])", lw, j)
		}
		seen[l.Name] = i
		if l.Params <= 0 {
			return invalid("%s: params %d: must be > 0", lw, l.Params)
		}
		if l.Params > MaxTotalParams {
			return invalid("%s: params %d (%s): more than the limit of %d (%s) for a whole model",
				lw, l.Params, humanCount(float64(l.Params)), MaxTotalParams, humanCount(float64(MaxTotalParams)))
		}
		total += l.Params // no overflow: MaxLayers × MaxTotalParams < 2^63
		if !l.DType.IsFloat() {
			return invalid("%s: dtype %v: gradients need a floating-point dtype (f32, f64, f16, bf16)", lw, l.DType)
		}
		if err := checkTime(l.Forward); err != nil {
			return invalid("%s: forward %s", lw, err)
		}
		if err := checkTime(l.Backward); err != nil {
			return invalid("%s: backward %s", lw, err)
		}
	}
	if total > MaxTotalParams {
		return invalid("%s: %d parameters in all (%s), more than the limit of %d (%s)",
			what, total, humanCount(float64(total)), MaxTotalParams, humanCount(float64(MaxTotalParams)))
	}
	return nil
}

// FLOPsTimes returns the forward and backward compute time, in seconds, of
// a layer with params parameters over tokens tokens on a device with a peak
// of peakFLOPS floating-point operations per second running at model FLOPs
// utilisation mfu (0 < mfu <= 1):
//
//	fwd = 2·params·tokens / (peakFLOPS·mfu)
//	bwd = 2·fwd
//
// The forward rule is the matmul rule of thumb of Kaplan et al. 2020
// (arXiv:2001.08361, §2.1: C_forward ≈ 2N per token: one multiply and one
// add per parameter), and the backward pass costs twice the forward (the
// gradients with respect to both the activations and the weights), so a
// training step is ≈ 6N FLOPs per token. The attention-score FLOPs that
// grow with the context length (Kaplan's 2·n_layer·n_ctx·d_attn per token)
// are left out; FLOPsTimes knows nothing of them.
//
// For negative params or tokens, peakFLOPS not > 0, or mfu outside (0, 1]
// (NaN included) it returns NaN, NaN, which Validate refuses.
func FLOPsTimes(params int64, tokens int64, peakFLOPS, mfu float64) (fwd, bwd float64) {
	if params < 0 || tokens < 0 || !(peakFLOPS > 0) || !(mfu > 0 && mfu <= 1) {
		return math.NaN(), math.NaN()
	}
	fwd = 2 * float64(params) * float64(tokens) / (peakFLOPS * mfu)
	return fwd, 2 * fwd
}

// checkTime checks a compute time; the message follows the field name.
func checkTime(t float64) error {
	switch {
	case math.IsNaN(t) || math.IsInf(t, 0):
		return fmt.Errorf("%v: must be a finite number of seconds", t)
	case t < 0:
		return fmt.Errorf("-%s: must be >= 0", topology.FormatLatency(-t))
	case t > MaxLayerSeconds:
		return fmt.Errorf("%s: more than the limit of %s for one layer in one step",
			topology.FormatLatency(t), topology.FormatLatency(MaxLayerSeconds))
	}
	return nil
}

// checkText checks a name or source: non-empty, valid UTF-8, printable (no
// control characters or line breaks), at most limit bytes. The message
// follows the field name.
func checkText(s string, limit int) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case len(s) > limit:
		return fmt.Errorf("is %d bytes long, more than the limit of %d", len(s), limit)
	case !utf8.ValidString(s):
		return fmt.Errorf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if r != ' ' && !unicode.IsPrint(r) {
			return fmt.Errorf("%q holds the unprintable character %U", s, r)
		}
	}
	if strings.TrimSpace(s) != s {
		return fmt.Errorf("%q has leading or trailing white space", s)
	}
	return nil
}

// humanCount writes a count as 124.4M, 6.74B, 1e+13 style.
func humanCount(n float64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.3gT", n/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.3gB", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.4gM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.4gk", n/1e3)
	}
	return fmt.Sprintf("%g", n)
}

// invalidError is an error about the profile itself; it wraps ErrInvalid.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return "model: " + e.msg }
func (e *invalidError) Unwrap() error { return ErrInvalid }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}
