package model

import (
	"fmt"
	"strings"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/topology"
	"go.yaml.in/yaml/v3"
)

// derive holds the optional top-level figures that turn params or flops
// into times.
type derive struct {
	tokens          int64
	peak, mfu       float64 // peak in FLOP/s
	hasTok, hasPeak bool
	hasMFU          bool
}

func (dv *derive) read(m map[string]entry) error {
	const what = "top level"
	if s, ln, ok, err := scalar(m, "tokens", what); err != nil {
		return err
	} else if ok {
		v, err := parseCount(s)
		if err == nil && (v <= 0 || v > 1e12) {
			err = fmt.Errorf("%d: want 1 to 1e12", v)
		}
		if err != nil {
			return invalid("yaml: line %d: tokens %v", ln, err)
		}
		dv.tokens, dv.hasTok = v, true
	}
	if s, ln, ok, err := scalar(m, "peak_tflops", what); err != nil {
		return err
	} else if ok {
		v, err := parseNumber(s)
		if err == nil && !(v > 0 && v <= 1e9) {
			err = fmt.Errorf("%v: want TFLOP/s above 0 and at most 1e9", v)
		}
		if err != nil {
			return invalid("yaml: line %d: peak_tflops %v", ln, err)
		}
		dv.peak, dv.hasPeak = v*1e12, true
	}
	if s, ln, ok, err := scalar(m, "mfu", what); err != nil {
		return err
	} else if ok {
		v, err := parseNumber(s)
		if err == nil && !(v > 0 && v <= 1) {
			err = fmt.Errorf("%v: want a fraction above 0 and at most 1", v)
		}
		if err != nil {
			return invalid("yaml: line %d: mfu %v", ln, err)
		}
		dv.mfu, dv.hasMFU = v, true
	}
	return nil
}

// missing lists the top-level figures a layer needs and the file lacks.
func (dv *derive) missing(needTokens bool) []string {
	var out []string
	if needTokens && !dv.hasTok {
		out = append(out, "tokens")
	}
	if !dv.hasPeak {
		out = append(out, "peak_tflops")
	}
	if !dv.hasMFU {
		out = append(out, "mfu")
	}
	return out
}

func (dv *derive) readLayer(n *yaml.Node, i int) (Layer, error) {
	var l Layer
	what := fmt.Sprintf("layers[%d]", i)
	// Find the name first so that every message can use it.
	if n != nil && n.Kind == yaml.MappingNode {
		for k := 0; k+1 < len(n.Content); k += 2 {
			kn, vn := deref(n.Content[k]), deref(n.Content[k+1])
			if kn != nil && kn.Value == "name" && vn != nil && vn.Kind == yaml.ScalarNode && !isNull(vn) {
				what = fmt.Sprintf("layers[%d] %q", i, vn.Value)
				break
			}
		}
	}
	m, err := fields(n, what, layerKeys)
	if err != nil {
		return l, err
	}
	bad := func(ln int, format string, args ...any) error {
		return invalid("yaml: line %d: %s: %s", ln, what, fmt.Sprintf(format, args...))
	}
	get := func(key string) (string, int, bool, error) { return scalar(m, key, what) }

	s, _, ok, err := get("name")
	if err != nil {
		return l, err
	}
	if !ok {
		return l, bad(line(n), "missing name")
	}
	l.Name = s

	if s, ln, ok, err := get("params"); err != nil {
		return l, err
	} else if !ok {
		return l, bad(line(n), "missing params")
	} else if l.Params, err = parseCount(s); err != nil {
		return l, bad(ln, "params %v", err)
	} else if l.Params <= 0 {
		return l, bad(ln, "params %d: must be > 0", l.Params)
	}

	if s, ln, ok, err := get("dtype"); err != nil {
		return l, err
	} else if !ok {
		return l, bad(line(n), "missing dtype (f32, f64, f16 or bf16)")
	} else if l.DType, err = hw.ParseDType(s); err != nil {
		return l, bad(ln, "unknown dtype %q (want f32, f64, f16 or bf16)", s)
	} else if !l.DType.IsFloat() {
		return l, bad(ln, "dtype %q: gradients need a floating-point dtype (f32, f64, f16 or bf16)", s)
	}

	if s, ln, ok, err := get("sharded"); err != nil {
		return l, err
	} else if ok {
		switch strings.ToLower(s) {
		case "true":
			l.Sharded = true
		case "false":
		default:
			return l, bad(ln, "sharded %q: want true or false", s)
		}
	}

	var times [2]float64
	var given [2]bool
	for j, key := range []string{"forward", "backward"} {
		s, ln, ok, err := get(key)
		if err != nil {
			return l, err
		}
		if !ok {
			continue
		}
		t, err := topology.ParseLatency(s)
		if err != nil {
			return l, bad(ln, "%s: %s", key, strings.TrimPrefix(err.Error(), "topology: "))
		}
		times[j], given[j] = t, true
	}
	flopsText, flopsLine, hasFlops, err := get("flops")
	if err != nil {
		return l, err
	}
	switch {
	case given[0] != given[1]:
		return l, bad(line(n), "give both forward and backward, or neither (to derive them)")
	case given[0] && hasFlops:
		return l, bad(flopsLine, "give either flops or forward and backward, not both")
	case given[0]:
		l.Forward, l.Backward = times[0], times[1]
	case hasFlops:
		f, err := parseNumber(flopsText)
		if err == nil && f < 0 {
			err = fmt.Errorf("%v: must be >= 0", f)
		}
		if err != nil {
			return l, bad(flopsLine, "flops %v", err)
		}
		if miss := dv.missing(false); len(miss) > 0 {
			return l, bad(flopsLine, "flops without top-level %s to turn them into times", strings.Join(miss, " and "))
		}
		l.Forward = f / (dv.peak * dv.mfu)
		l.Backward = 2 * l.Forward
	default:
		if miss := dv.missing(true); len(miss) > 0 {
			return l, bad(line(n), "no forward and backward times, and no top-level %s to derive them from params",
				strings.Join(miss, ", "))
		}
		l.Forward, l.Backward = FLOPsTimes(l.Params, dv.tokens, dv.peak, dv.mfu)
	}
	for j, t := range []float64{l.Forward, l.Backward} {
		if err := checkTime(t); err != nil {
			return l, bad(line(n), "%s %s", []string{"forward", "backward"}[j], err)
		}
	}
	return l, nil
}
