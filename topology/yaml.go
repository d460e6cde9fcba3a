package topology

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxYAMLBytes is the largest YAML document ReadYAML and Load accept.
const MaxYAMLBytes = 256 << 20

// Load reads a topology from a YAML file (format in the package doc).
func Load(path string) (*Topology, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, wrapErr(nil, err, "load %s", path)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxYAMLBytes+1))
	if err != nil {
		return nil, wrapErr(nil, err, "load %s", path)
	}
	t, err := ReadYAML(data)
	if err != nil {
		return nil, wrapErr(nil, err, "load %s", path)
	}
	return t, nil
}

// Resolve loads specOrFile as a YAML file when it ends in .yaml or .yml
// (any case) or names an existing regular file, and parses it as a spec
// string otherwise.
func Resolve(specOrFile string) (*Topology, error) {
	low := strings.ToLower(specOrFile)
	if strings.HasSuffix(low, ".yaml") || strings.HasSuffix(low, ".yml") {
		return Load(specOrFile)
	}
	if fi, err := os.Stat(specOrFile); err == nil && fi.Mode().IsRegular() {
		return Load(specOrFile)
	}
	return Parse(specOrFile)
}

// ReadYAML parses a topology document (format in the package doc). Unknown
// or repeated fields, missing required fields, unknown node references and
// anything New refuses are errors that name the element and its line.
func ReadYAML(data []byte) (t *Topology, err error) {
	defer func() {
		if r := recover(); r != nil { // the yaml library must not take the caller down
			t, err = nil, newErr(ErrYAML, "yaml: internal error in the yaml decoder: %v", r)
		}
	}()
	if len(data) > MaxYAMLBytes {
		return nil, newErr(ErrYAML, "yaml: document is %d bytes, more than the limit of %d", len(data), MaxYAMLBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, newErr(ErrYAML, "yaml: empty document: want name, nodes and links")
		}
		return nil, wrapErr(ErrYAML, err, "yaml")
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, wrapErr(ErrYAML, err, "yaml")
		}
		return nil, newErr(ErrYAML, "yaml: line %d: a second document; a file holds one topology", extra.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) != 1 {
			return nil, newErr(ErrYAML, "yaml: empty document: want name, nodes and links")
		}
		root = root.Content[0]
	}
	return readRoot(deref(root))
}

// deref follows aliases (bounded, in case of a cycle).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// field is a scalar value read from a mapping.
type field struct {
	val  string
	set  bool
	line int
}

// readFields reads a mapping of scalar values with the given keys into out,
// in the order of keys. what names the element in messages.
func readFields(n *yaml.Node, what func() string, keys []string, out []field) error {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return newErr(ErrYAML, "yaml: line %d: %s: want a mapping of %s", line(n), what(), strings.Join(keys, ", "))
	}
	for k := 0; k+1 < len(n.Content); k += 2 {
		kn, vn := deref(n.Content[k]), deref(n.Content[k+1])
		if kn == nil || kn.Kind != yaml.ScalarNode {
			return newErr(ErrYAML, "yaml: line %d: %s: field names must be plain strings", line(kn), what())
		}
		idx := -1
		for i, key := range keys {
			if kn.Value == key {
				idx = i
			}
		}
		if idx < 0 {
			return newErr(ErrYAML, "yaml: line %d: %s: unknown field %q (want %s)", kn.Line, what(), kn.Value, strings.Join(keys, ", "))
		}
		if out[idx].set || out[idx].line != 0 {
			return newErr(ErrYAML, "yaml: line %d: %s: field %q given twice", kn.Line, what(), kn.Value)
		}
		out[idx].line = kn.Line
		if vn == nil || vn.Kind != yaml.ScalarNode {
			return newErr(ErrYAML, "yaml: line %d: %s: field %q must be a single value", kn.Line, what(), kn.Value)
		}
		if vn.ShortTag() == "!!null" {
			continue // "key:" with no value counts as missing
		}
		out[idx] = field{val: vn.Value, set: true, line: vn.Line}
	}
	return nil
}

func line(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	return n.Line
}

func readRoot(root *yaml.Node) (*Topology, error) {
	if root == nil || root.Kind != yaml.MappingNode {
		return nil, newErr(ErrYAML, "yaml: line %d: the document must be a mapping with name, nodes and links", line(root))
	}
	var name, cpu field
	var nodesN, linksN *yaml.Node
	seen := map[string]bool{}
	for k := 0; k+1 < len(root.Content); k += 2 {
		kn, vn := deref(root.Content[k]), deref(root.Content[k+1])
		if kn == nil || kn.Kind != yaml.ScalarNode {
			return nil, newErr(ErrYAML, "yaml: line %d: top-level field names must be plain strings", line(kn))
		}
		if seen[kn.Value] {
			return nil, newErr(ErrYAML, "yaml: line %d: top-level field %q given twice", kn.Line, kn.Value)
		}
		seen[kn.Value] = true
		switch kn.Value {
		case "name":
			if vn == nil || vn.Kind != yaml.ScalarNode {
				return nil, newErr(ErrYAML, "yaml: line %d: name must be a single value", kn.Line)
			}
			if vn.ShortTag() != "!!null" {
				name = field{val: vn.Value, set: true, line: vn.Line}
			}
		case "cpu":
			if vn == nil || vn.Kind != yaml.ScalarNode {
				return nil, newErr(ErrYAML, "yaml: line %d: cpu must be a single value", kn.Line)
			}
			if vn.ShortTag() != "!!null" {
				cpu = field{val: vn.Value, set: true, line: vn.Line}
			}
		case "nodes":
			nodesN = vn
		case "links":
			linksN = vn
		default:
			return nil, newErr(ErrYAML, "yaml: line %d: unknown top-level field %q (want name, cpu, nodes, links)", kn.Line, kn.Value)
		}
	}
	var vendor CPUVendor
	if cpu.set {
		v, err := ParseCPUVendor(cpu.val)
		if err != nil {
			return nil, wrapErr(ErrYAML, err, "yaml: line %d: cpu", cpu.line)
		}
		vendor = v
	}
	nodes, err := readNodes(nodesN)
	if err != nil {
		return nil, err
	}
	if err := checkUniqueNames(nodes); err != nil {
		return nil, wrapErr(nil, err, "yaml")
	}
	links, err := readLinks(linksN, nodes)
	if err != nil {
		return nil, err
	}
	t, err := New(name.val, nodes, links)
	if err != nil {
		return nil, wrapErr(nil, err, "yaml")
	}
	t.HostCPU = vendor
	return t, nil
}

// sequence checks that n is a sequence (or absent/null, when optional) of
// at most limit items.
func sequence(n *yaml.Node, what string, limit int, optional bool) ([]*yaml.Node, error) {
	if n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null") {
		if optional {
			return nil, nil
		}
		return nil, newErr(ErrYAML, "yaml: missing %s: want a list", what)
	}
	if n.Kind != yaml.SequenceNode {
		return nil, newErr(ErrYAML, "yaml: line %d: %s must be a list", n.Line, what)
	}
	if len(n.Content) > limit {
		return nil, newErr(ErrYAML, "yaml: line %d: %d %s is more than the limit of %d", n.Line, len(n.Content), what, limit)
	}
	return n.Content, nil
}

var nodeKeys = []string{"name", "kind", "arch", "reduce"}

func readNodes(n *yaml.Node) ([]Node, error) {
	items, err := sequence(n, "nodes", MaxNodes, false)
	if err != nil {
		return nil, err
	}
	nodes := make([]Node, len(items))
	for i, item := range items {
		var f [4]field // name, kind, arch, reduce
		what := func() string {
			if f[0].set && f[0].val != "" {
				return fmt.Sprintf("node %d (%s)", i, f[0].val)
			}
			return fmt.Sprintf("node %d", i)
		}
		if err := readFields(item, what, nodeKeys, f[:]); err != nil {
			return nil, err
		}
		at := func(k int) int {
			if f[k].line != 0 {
				return f[k].line
			}
			return line(deref(item))
		}
		if !f[0].set || f[0].val == "" {
			return nil, newErr(ErrYAML, "yaml: line %d: %s: missing name", at(0), what())
		}
		if !f[1].set {
			return nil, newErr(ErrYAML, "yaml: line %d: %s: missing kind (gpu, switch, nic or cpu)", at(1), what())
		}
		k, err := ParseKind(f[1].val)
		if err != nil {
			return nil, wrapErr(ErrYAML, err, "yaml: line %d: %s", at(1), what())
		}
		nodes[i] = Node{Name: f[0].val, Kind: k}
		if f[2].set {
			if k != GPU {
				return nil, newErr(ErrYAML, "yaml: line %d: %s: arch applies only to gpus, not to a %s", at(2), what(), k)
			}
			a, err := ParseArch(f[2].val)
			if err != nil {
				return nil, wrapErr(ErrYAML, err, "yaml: line %d: %s: arch", at(2), what())
			}
			nodes[i].Arch = a
		}
		switch {
		case k == GPU && !f[3].set:
			nodes[i].ReduceBW = math.Inf(1) // free
		case (k == GPU || k == Switch) && f[3].set:
			v, err := ParseBandwidth(f[3].val)
			if err != nil {
				return nil, wrapErr(ErrYAML, err, "yaml: line %d: %s: reduce", at(3), what())
			}
			nodes[i].ReduceBW = v
		case f[3].set:
			return nil, newErr(ErrYAML, "yaml: line %d: %s: reduce applies only to gpus and switches, not to a %s", at(3), what(), k)
		}
	}
	return nodes, nil
}

var linkKeys = []string{"a", "b", "bw", "lat"}

func readLinks(n *yaml.Node, nodes []Node) ([]Link, error) {
	items, err := sequence(n, "links", MaxLinks, true)
	if err != nil {
		return nil, err
	}
	index := make(map[string]int, len(nodes))
	for i, nd := range nodes {
		index[nd.Name] = i
	}
	links := make([]Link, len(items))
	for i, item := range items {
		var f [4]field
		what := func() string {
			a, b := "?", "?"
			if f[0].set {
				a = f[0].val
			}
			if f[1].set {
				b = f[1].val
			}
			return fmt.Sprintf("link %d (%s-%s)", i, a, b)
		}
		if err := readFields(item, what, linkKeys, f[:]); err != nil {
			return nil, err
		}
		for k, key := range linkKeys {
			if !f[k].set {
				l := f[k].line
				if l == 0 {
					l = line(deref(item))
				}
				return nil, newErr(ErrYAML, "yaml: line %d: %s: missing %s", l, what(), key)
			}
		}
		var ends [2]int
		for k := 0; k < 2; k++ {
			v, ok := index[f[k].val]
			if !ok {
				return nil, newErr(ErrYAML, "yaml: line %d: %s: %s names the unknown node %q", f[k].line, what(), linkKeys[k], f[k].val)
			}
			ends[k] = v
		}
		bw, err := ParseBandwidth(f[2].val)
		if err != nil {
			return nil, wrapErr(ErrYAML, err, "yaml: line %d: %s: bw", f[2].line, what())
		}
		lat, err := ParseLatency(f[3].val)
		if err != nil {
			return nil, wrapErr(ErrYAML, err, "yaml: line %d: %s: lat", f[3].line, what())
		}
		links[i] = Link{A: ends[0], B: ends[1], BW: bw, Latency: lat}
	}
	return links, nil
}

// WriteYAML writes the topology in the YAML format of the package doc, one
// flow mapping per node and per link; cpu, a GPU's arch and a switch's
// reduce only when known or set. Bandwidths and latencies are written with
// FormatBandwidth and FormatLatency, so ReadYAML gives back the same Name,
// HostCPU, Nodes and Links, bit for bit.
func (t *Topology) WriteYAML(w io.Writer) error {
	if !t.built() {
		return newErr(ErrInvalid, "write yaml: topology was not built with New")
	}
	if t.HostCPU > ARMCPU {
		return newErr(ErrInvalid, "write yaml: unknown host cpu vendor %d", uint8(t.HostCPU))
	}
	// Names are tagged strings, so the encoder quotes those that would read
	// back as something else ("null", "~", "1e3"). Keys, kinds and
	// quantities are plain: ReadYAML reads every value as text anyway.
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	plain := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }
	flow := func(kv ...string) *yaml.Node {
		m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
		for i := 0; i+1 < len(kv); i += 2 {
			v := plain(kv[i+1])
			if kv[i] == "name" || kv[i] == "a" || kv[i] == "b" {
				v = str(kv[i+1])
			}
			m.Content = append(m.Content, plain(kv[i]), v)
		}
		return m
	}
	nodes := &yaml.Node{Kind: yaml.SequenceNode, Content: make([]*yaml.Node, 0, len(t.Nodes))}
	for _, n := range t.Nodes {
		kv := []string{"name", n.Name, "kind", n.Kind.String()}
		if n.Arch != UnknownArch {
			kv = append(kv, "arch", n.Arch.String())
		}
		if n.Kind == GPU || n.ReduceBW != 0 { // a gpu's is never 0; a switch's is 0 when it cannot reduce
			kv = append(kv, "reduce", FormatBandwidth(n.ReduceBW))
		}
		nodes.Content = append(nodes.Content, flow(kv...))
	}
	links := &yaml.Node{Kind: yaml.SequenceNode, Content: make([]*yaml.Node, 0, len(t.Links))}
	if len(t.Links) == 0 {
		links.Style = yaml.FlowStyle
	}
	for _, l := range t.Links {
		links.Content = append(links.Content, flow("a", t.Nodes[l.A].Name, "b", t.Nodes[l.B].Name,
			"bw", FormatBandwidth(l.BW), "lat", FormatLatency(l.Latency)))
	}
	root := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{plain("name"), str(t.Name)}}
	if t.HostCPU != UnknownCPU {
		root.Content = append(root.Content, plain("cpu"), plain(t.HostCPU.String()))
	}
	root.Content = append(root.Content, plain("nodes"), nodes, plain("links"), links)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return wrapErr(nil, err, "write yaml")
	}
	if err := enc.Close(); err != nil {
		return wrapErr(nil, err, "write yaml")
	}
	return nil
}
