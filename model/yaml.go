package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/commsim/commsim/internal/suggest"
	"github.com/commsim/commsim/internal/yamlerr"
)

// MaxYAMLBytes is the largest document Parse and Load accept.
const MaxYAMLBytes = 64 << 20

// Load reads a profile from a YAML file (format in the package doc).
func Load(path string) (*Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: load %s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxYAMLBytes+1))
	if err != nil {
		return nil, fmt.Errorf("model: load %s: %w", path, err)
	}
	p, err := Parse(data)
	if err != nil {
		var ie *invalidError
		if errors.As(err, &ie) {
			return nil, &invalidError{msg: path + ": " + ie.msg}
		}
		return nil, fmt.Errorf("model: load %s: %w", path, err)
	}
	return p, nil
}

// Resolve returns the built-in profile nameOrFile if there is one, and
// otherwise loads nameOrFile as a YAML file. When it is neither, the error
// lists the built-ins.
func Resolve(nameOrFile string) (*Profile, error) {
	if p, err := Builtin(nameOrFile); err == nil {
		return p, nil
	}
	if _, err := os.Stat(nameOrFile); err != nil {
		return nil, fmt.Errorf("model: %q is neither a built-in profile (%s) nor a readable file: %w%s",
			nameOrFile, strings.Join(builtinNames, ", "), err, suggest.DidYouMean(nameOrFile, builtinNames))
	}
	return Load(nameOrFile)
}

// Parse reads a profile from a YAML document (format in the package doc)
// and validates it. Unknown or repeated fields, values of the wrong kind and
// layers without times and without the figures to derive them are errors
// that name the element and its line; they wrap ErrInvalid. Parse never
// panics.
func Parse(data []byte) (p *Profile, err error) {
	defer func() {
		if r := recover(); r != nil { // the yaml library must not take the caller down
			p, err = nil, invalid("yaml: internal error in the yaml decoder: %v", r)
		}
	}()
	if len(data) > MaxYAMLBytes {
		return nil, invalid("yaml: document is %d bytes, more than the limit of %d", len(data), MaxYAMLBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true) // no effect on a yaml.Node; readProfile checks every field itself
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, invalid("yaml: empty document: want name and layers")
		}
		return nil, invalid("%v", yamlerr.Fix(err, data)) // the yaml package's messages start "yaml: line N:"
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, invalid("%v", yamlerr.Fix(err, data))
		}
		return nil, invalid("yaml: line %d: a second document; a file holds one profile", extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) != 1 {
			return nil, invalid("yaml: empty document: want name and layers")
		}
		root = root.Content[0]
	}
	p, err = readProfile(deref(root))
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// deref follows aliases (bounded, in case of a cycle).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func line(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

// isNull reports whether n is absent or an explicit null ("key:" or "~").
func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// entry is one field of a mapping: its value node and the key's line.
type entry struct {
	val  *yaml.Node
	line int
}

// fields reads a mapping whose keys must be among keys, each at most once,
// into a map from key to entry. what names the element in messages.
func fields(n *yaml.Node, what string, keys []string) (map[string]entry, error) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, invalid("yaml: line %d: %s: want a mapping of %s", line(n), what, strings.Join(keys, ", "))
	}
	out := make(map[string]entry, len(keys))
	for k := 0; k+1 < len(n.Content); k += 2 {
		kn, vn := deref(n.Content[k]), deref(n.Content[k+1])
		if kn == nil || kn.Kind != yaml.ScalarNode {
			return nil, invalid("yaml: line %d: %s: field names must be plain strings", line(kn), what)
		}
		known := false
		for _, key := range keys {
			known = known || kn.Value == key
		}
		if !known {
			return nil, invalid("yaml: line %d: %s: unknown field %q (want %s)", kn.Line, what, kn.Value, strings.Join(keys, ", "))
		}
		if e, dup := out[kn.Value]; dup {
			return nil, invalid("yaml: line %d: %s: field %q given twice (first on line %d)", kn.Line, what, kn.Value, e.line)
		}
		out[kn.Value] = entry{val: vn, line: kn.Line}
	}
	return out, nil
}

// scalar returns the text of a single-valued field, or ok=false when the
// field is absent or null.
func scalar(m map[string]entry, key, what string) (val string, ln int, ok bool, err error) {
	e, found := m[key]
	if !found || isNull(e.val) {
		return "", e.line, false, nil
	}
	if e.val.Kind != yaml.ScalarNode {
		return "", e.line, false, invalid("yaml: line %d: %s: %s must be a single value", e.line, what, key)
	}
	return e.val.Value, e.val.Line, true, nil
}

// parseCount reads a non-negative integer: decimal digits, optionally with
// a leading + and _ separators between digits.
func parseCount(s string) (int64, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "+")
	if t == "" || t[0] == '_' || t[len(t)-1] == '_' || strings.Contains(t, "__") {
		return 0, fmt.Errorf("%q: want a whole number", s)
	}
	for _, c := range t {
		if (c < '0' || c > '9') && c != '_' {
			if c == '-' && len(t) > 1 && t[0] == '-' {
				return 0, fmt.Errorf("%q: must be > 0", s)
			}
			return 0, fmt.Errorf("%q: want a whole number", s)
		}
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(t, "_", ""), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return v, nil
}

// parseNumber reads a finite float.
func parseNumber(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q: want a finite number", s)
	}
	return v, nil
}

var (
	topKeys   = []string{"name", "sources", "tokens", "peak_tflops", "mfu", "layers"}
	layerKeys = []string{"name", "params", "dtype", "forward", "backward", "flops", "sharded"}
)

func readProfile(root *yaml.Node) (*Profile, error) {
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, invalid("yaml: line %d: the document must be a mapping with name, layers and optionally sources, tokens, peak_tflops, mfu", line(root))
	}
	m, err := fields(root, "top level", topKeys)
	if err != nil {
		return nil, err
	}
	p := &Profile{}
	name, _, ok, err := scalar(m, "name", "top level")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, invalid("yaml: line %d: missing name", root.Line)
	}
	p.Name = name
	if p.Sources, err = readSources(m["sources"]); err != nil {
		return nil, err
	}
	var dv derive
	if err := dv.read(m); err != nil {
		return nil, err
	}
	le, found := m["layers"]
	if !found || isNull(le.val) {
		return nil, invalid("yaml: line %d: profile %q: missing layers; a profile needs at least one", root.Line, p.Name)
	}
	if le.val.Kind != yaml.SequenceNode {
		return nil, invalid("yaml: line %d: profile %q: layers must be a list", le.line, p.Name)
	}
	if n := len(le.val.Content); n > MaxLayers {
		return nil, invalid("yaml: line %d: profile %q: %d layers, more than the limit of %d", le.line, p.Name, n, MaxLayers)
	}
	seen := map[string]int{}
	for i, ln := range le.val.Content {
		l, err := dv.readLayer(deref(ln), i)
		if err != nil {
			return nil, err
		}
		if first, dup := seen[l.Name]; dup {
			return nil, invalid("yaml: line %d: layers[%d] %q: duplicate name (also layers[%d])", line(ln), i, l.Name, first)
		}
		seen[l.Name] = i
		p.Layers = append(p.Layers, l)
	}
	return p, nil
}

func readSources(e entry) ([]string, error) {
	if isNull(e.val) {
		return nil, nil
	}
	if e.val.Kind != yaml.SequenceNode {
		return nil, invalid("yaml: line %d: sources must be a list of strings", e.line)
	}
	if n := len(e.val.Content); n > MaxSources {
		return nil, invalid("yaml: line %d: %d sources, more than the limit of %d", e.line, n, MaxSources)
	}
	var out []string
	for i, sn := range e.val.Content {
		sn = deref(sn)
		if sn == nil || sn.Kind != yaml.ScalarNode || isNull(sn) {
			return nil, invalid("yaml: line %d: sources[%d] must be a string", line(sn), i)
		}
		out = append(out, sn.Value)
	}
	return out, nil
}
