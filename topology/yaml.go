package topology

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/commsim/commsim/internal/yamlerr"
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
// (any case), starts as a path does (/, ./, ../: no spec does) or names
// an existing file, a pipe or a device as well as a regular one
// (/dev/stdin, a shell's <(…)), and parses it as a spec string
// otherwise. A directory is an error.
func Resolve(specOrFile string) (*Topology, error) {
	low := strings.ToLower(specOrFile)
	if strings.HasSuffix(low, ".yaml") || strings.HasSuffix(low, ".yml") ||
		strings.HasPrefix(specOrFile, "/") || strings.HasPrefix(specOrFile, "./") || strings.HasPrefix(specOrFile, "../") {
		return Load(specOrFile)
	}
	if fi, err := os.Stat(specOrFile); err == nil {
		if fi.IsDir() {
			return nil, newErr(ErrYAML, "load %s: a directory, not a topology file", specOrFile)
		}
		return Load(specOrFile)
	}
	return Parse(specOrFile)
}

// ReadYAML parses a topology document (format in the package doc). Unknown
// or repeated fields, missing required fields, unknown node references and
// anything New refuses are errors that name the element and its line.
// A document laid out as WriteYAML lays it out is read line by line, in
// memory that grows with the topology alone; any other goes through the
// yaml library's node tree, which takes about 2 KB per node and link.
func ReadYAML(data []byte) (t *Topology, err error) {
	defer func() {
		if r := recover(); r != nil { // the yaml library must not take the caller down
			t, err = nil, newErr(ErrYAML, "yaml: internal error in the yaml decoder: %v", r)
		}
	}()
	if len(data) > MaxYAMLBytes {
		return nil, newErr(ErrYAML, "yaml: document is %d bytes, more than the limit of %d", len(data), MaxYAMLBytes)
	}
	if t, ok := readYAMLLines(data); ok {
		return t, nil
	}
	return readYAMLTree(data)
}

// yamlLibraryErr is a yaml library error as an ErrYAML: its message
// starts "yaml: line N:" already, and a second "yaml:" would hide the
// line. yamlerr.Fix counts the library's parser errors' lines from 1.
func yamlLibraryErr(err error, data []byte) error {
	err = yamlerr.Fix(err, data)
	if strings.HasPrefix(err.Error(), "yaml: ") {
		return &topoError{msg: "topology", kind: ErrYAML, cause: err}
	}
	return wrapErr(ErrYAML, err, "yaml")
}

// readYAMLTree reads the document through the yaml library's node tree:
// any YAML, every message, about 2 KB per node or link.
func readYAMLTree(data []byte) (*Topology, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, newErr(ErrYAML, "yaml: empty document: want name, nodes and links")
		}
		return nil, yamlLibraryErr(err, data)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlLibraryErr(err, data)
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
	var name, cpu, ports field
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
		case "nic_ports":
			if vn == nil || vn.Kind != yaml.ScalarNode {
				return nil, newErr(ErrYAML, "yaml: line %d: nic_ports must be a single value", kn.Line)
			}
			if vn.ShortTag() != "!!null" {
				ports = field{val: vn.Value, set: true, line: vn.Line}
			}
		case "nodes":
			nodesN = vn
		case "links":
			linksN = vn
		default:
			return nil, newErr(ErrYAML, "yaml: line %d: unknown top-level field %q (want name, cpu, nic_ports, nodes, links)", kn.Line, kn.Value)
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
	nicPorts := 0
	if ports.set {
		v, ok := parseNICPorts(ports.val)
		if !ok {
			return nil, newErr(ErrYAML, "yaml: line %d: nic_ports %q: want a whole number from 1 to %d", ports.line, ports.val, MaxNICPorts)
		}
		nicPorts = v
	}
	nodes, err := readNodes(nodesN)
	if err != nil {
		return nil, err
	}
	if err := checkUniqueNames(nodes); err != nil {
		return nil, wrapErr(nil, err, "yaml%s", elementLine(err, nodesN, linksN))
	}
	links, err := readLinks(linksN, nodes)
	if err != nil {
		return nil, err
	}
	t, err := New(name.val, nodes, links)
	if err != nil {
		return nil, wrapErr(nil, err, "yaml%s", elementLine(err, nodesN, linksN))
	}
	t.HostCPU, t.NICPorts = vendor, nicPorts
	return t, nil
}

// elementLine is ": line N", the line of the node or link New's error
// names (an item of the nodes or links list), or "".
func elementLine(err error, nodesN, linksN *yaml.Node) string {
	var te *topoError
	if !errors.As(err, &te) || te.at == nil {
		return ""
	}
	list := deref(nodesN)
	if te.at.link {
		list = deref(linksN)
	}
	if list == nil || te.at.index >= len(list.Content) {
		return ""
	}
	return fmt.Sprintf(": line %d", list.Content[te.at.index].Line) // an alias item: where it stands
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
		if err := readFields(item, func() string { return nodeWhat(i, &f) }, nodeKeys, f[:]); err != nil {
			return nil, err
		}
		if nodes[i], err = nodeFromFields(i, &f, line(deref(item))); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// nodeWhat names node i in messages.
func nodeWhat(i int, f *[4]field) string {
	if f[0].set && f[0].val != "" {
		return fmt.Sprintf("node %d (%s)", i, clipName(f[0].val))
	}
	return fmt.Sprintf("node %d", i)
}

// nodeFromFields makes node i from its fields (name, kind, arch, reduce),
// read from the item at itemLine.
func nodeFromFields(i int, f *[4]field, itemLine int) (Node, error) {
	what := func() string { return nodeWhat(i, f) }
	at := func(k int) int {
		if f[k].line != 0 {
			return f[k].line
		}
		return itemLine
	}
	if !f[0].set || f[0].val == "" {
		return Node{}, newErr(ErrYAML, "yaml: line %d: %s: missing name", at(0), what())
	}
	if !f[1].set {
		return Node{}, newErr(ErrYAML, "yaml: line %d: %s: missing kind (gpu, switch, nic or cpu)", at(1), what())
	}
	k, err := ParseKind(f[1].val)
	if err != nil {
		return Node{}, wrapErr(ErrYAML, err, "yaml: line %d: %s", at(1), what())
	}
	node := Node{Name: f[0].val, Kind: k}
	if f[2].set {
		if k != GPU {
			return Node{}, newErr(ErrYAML, "yaml: line %d: %s: arch applies only to gpus, not to a %s", at(2), what(), k)
		}
		a, err := ParseArch(f[2].val)
		if err != nil {
			return Node{}, wrapErr(ErrYAML, err, "yaml: line %d: %s: arch", at(2), what())
		}
		node.Arch = a
	}
	switch {
	case k == GPU && !f[3].set:
		node.ReduceBW = math.Inf(1) // free
	case (k == GPU || k == Switch) && f[3].set:
		v, err := ParseBandwidth(f[3].val)
		if err != nil {
			return Node{}, wrapErr(ErrYAML, err, "yaml: line %d: %s: reduce", at(3), what())
		}
		node.ReduceBW = v
	case f[3].set:
		return Node{}, newErr(ErrYAML, "yaml: line %d: %s: reduce applies only to gpus and switches, not to a %s", at(3), what(), k)
	}
	return node, nil
}

var linkKeys = []string{"a", "b", "bw", "lat"}

func readLinks(n *yaml.Node, nodes []Node) ([]Link, error) {
	items, err := sequence(n, "links", MaxLinks, true)
	if err != nil {
		return nil, err
	}
	index := nodeIndex(nodes)
	links := make([]Link, len(items))
	for i, item := range items {
		var f [4]field
		if err := readFields(item, func() string { return linkWhat(i, &f) }, linkKeys, f[:]); err != nil {
			return nil, err
		}
		if links[i], err = linkFromFields(i, &f, line(deref(item)), index); err != nil {
			return nil, err
		}
	}
	return links, nil
}

func nodeIndex(nodes []Node) map[string]int {
	index := make(map[string]int, len(nodes))
	for i, nd := range nodes {
		index[nd.Name] = i
	}
	return index
}

// linkWhat names link i in messages.
func linkWhat(i int, f *[4]field) string {
	a, b := "?", "?"
	if f[0].set {
		a = f[0].val
	}
	if f[1].set {
		b = f[1].val
	}
	return fmt.Sprintf("link %d (%s-%s)", i, clipName(a), clipName(b))
}

// linkFromFields makes link i from its fields (a, b, bw, lat), read from
// the item at itemLine; index maps node names to indices.
func linkFromFields(i int, f *[4]field, itemLine int, index map[string]int) (Link, error) {
	what := func() string { return linkWhat(i, f) }
	for k, key := range linkKeys {
		if !f[k].set {
			l := f[k].line
			if l == 0 {
				l = itemLine
			}
			return Link{}, newErr(ErrYAML, "yaml: line %d: %s: missing %s", l, what(), key)
		}
	}
	var ends [2]int
	for k := 0; k < 2; k++ {
		v, ok := index[f[k].val]
		if !ok {
			return Link{}, newErr(ErrYAML, "yaml: line %d: %s: %s names the unknown node %q", f[k].line, what(), linkKeys[k], clipName(f[k].val))
		}
		ends[k] = v
	}
	bw, err := ParseBandwidth(f[2].val)
	if err != nil {
		return Link{}, wrapErr(ErrYAML, err, "yaml: line %d: %s: bw", f[2].line, what())
	}
	lat, err := ParseLatency(f[3].val)
	if err != nil {
		return Link{}, wrapErr(ErrYAML, err, "yaml: line %d: %s: lat", f[3].line, what())
	}
	return Link{A: ends[0], B: ends[1], BW: bw, Latency: lat}, nil
}

// WriteYAML writes the topology in the YAML format of the package doc, one
// flow mapping per node and per link; cpu, a GPU's arch and a switch's
// reduce only when known or set. Bandwidths and latencies are written with
// FormatBandwidth and FormatLatency, so ReadYAML gives back the same Name,
// HostCPU, NICPorts, Nodes and Links, bit for bit.
//
// It streams: each node and link is written as it is formatted, through a
// buffer of fixed size, so exporting a million-node fabric needs no more
// memory than the topology itself. The bytes are those go.yaml.in/yaml/v3
// writes for the whole document; an element whose names or values the
// encoder might quote is written by the encoder itself.
func (t *Topology) WriteYAML(w io.Writer) error {
	if !t.built() {
		return newErr(ErrInvalid, "write yaml: topology was not built with New")
	}
	if t.HostCPU > ARMCPU {
		return newErr(ErrInvalid, "write yaml: unknown host cpu vendor %d", uint8(t.HostCPU))
	}
	if t.NICPorts < 0 || t.NICPorts > MaxNICPorts {
		return newErr(ErrInvalid, "write yaml: %d NIC ports, want 0 to %d", t.NICPorts, MaxNICPorts)
	}
	out := bufio.NewWriterSize(w, 64<<10)
	header := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{plainScalar("name"), taggedString(t.Name)}}
	if t.HostCPU != UnknownCPU {
		header.Content = append(header.Content, plainScalar("cpu"), plainScalar(t.HostCPU.String()))
	}
	if t.NICPorts > 1 {
		header.Content = append(header.Content, plainScalar("nic_ports"), plainScalar(strconv.Itoa(t.NICPorts)))
	}
	if err := encodeYAML(out, header); err != nil {
		return wrapErr(nil, err, "write yaml")
	}
	ew := elementWriter{out: out}
	ew.list("nodes")
	for _, n := range t.Nodes {
		ew.start()
		ew.field("name", n.Name, true)
		ew.field("kind", n.Kind.String(), false)
		if n.Arch != UnknownArch {
			ew.field("arch", n.Arch.String(), false)
		}
		if n.Kind == GPU || n.ReduceBW != 0 { // a gpu's is never 0; a switch's is 0 when it cannot reduce
			ew.field("reduce", ew.reduce.format(n.ReduceBW, FormatBandwidth), false)
		}
		ew.end()
	}
	if len(t.Links) == 0 {
		ew.write("links: []\n")
	} else {
		ew.list("links")
	}
	for _, l := range t.Links {
		ew.start()
		ew.field("a", t.Nodes[l.A].Name, true)
		ew.field("b", t.Nodes[l.B].Name, true)
		ew.field("bw", ew.bw.format(l.BW, FormatBandwidth), false)
		ew.field("lat", ew.lat.format(l.Latency, FormatLatency), false)
		ew.end()
	}
	if ew.err == nil {
		ew.err = out.Flush()
	}
	if ew.err != nil {
		return wrapErr(nil, ew.err, "write yaml")
	}
	return nil
}

// Names are tagged strings, so the encoder quotes those that would read back
// as something else ("null", "~", "1e3"). Keys, kinds and quantities are
// plain: ReadYAML reads every value as text anyway.
func taggedString(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

func plainScalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

func encodeYAML(w io.Writer, n *yaml.Node) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return err
	}
	return enc.Close()
}

// elementWriter writes the items of a block sequence of flow mappings, one
// line each. The first error sticks and stops further writes.
type elementWriter struct {
	out          *bufio.Writer
	err          error
	keys, values [4]string
	tagged       [4]bool
	n            int
	// Links and nodes mostly repeat the previous one's figures.
	bw, lat, reduce formatCache
}

func (ew *elementWriter) write(s string) {
	if ew.err == nil {
		_, ew.err = ew.out.WriteString(s)
	}
}

// list starts the block sequence under a top-level key.
func (ew *elementWriter) list(key string) { ew.write(key + ":\n") }

func (ew *elementWriter) start() { ew.n = 0 }

func (ew *elementWriter) field(key, value string, tagged bool) {
	ew.keys[ew.n], ew.values[ew.n], ew.tagged[ew.n] = key, value, tagged
	ew.n++
}

// end writes the element: directly when every value is one the encoder
// writes plain, and through the encoder otherwise, so the bytes are the
// encoder's either way.
func (ew *elementWriter) end() {
	if ew.err != nil {
		return
	}
	plain := true
	for i := 0; i < ew.n && plain; i++ {
		plain = writesPlain(ew.values[i], ew.tagged[i])
	}
	if !plain {
		ew.err = ew.encodeElement()
		return
	}
	ew.write("  - {")
	for i := 0; i < ew.n; i++ {
		if i > 0 {
			ew.write(", ")
		}
		ew.write(ew.keys[i])
		ew.write(": ")
		ew.write(ew.values[i])
	}
	ew.write("}\n")
}

// encodeElement encodes the element as the only item of a block sequence
// under a top-level key, the context it has in the whole document, and
// writes the item without the key's line.
func (ew *elementWriter) encodeElement() error {
	m := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for i := 0; i < ew.n; i++ {
		v := plainScalar(ew.values[i])
		if ew.tagged[i] {
			v = taggedString(ew.values[i])
		}
		m.Content = append(m.Content, plainScalar(ew.keys[i]), v)
	}
	const key = "item"
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{plainScalar(key),
		{Kind: yaml.SequenceNode, Content: []*yaml.Node{m}}}}
	var buf bytes.Buffer
	if err := encodeYAML(&buf, doc); err != nil {
		return err
	}
	item, ok := bytes.CutPrefix(buf.Bytes(), []byte(key+":\n"))
	if !ok {
		return fmt.Errorf("the yaml encoder wrote %q for one element", buf.Bytes())
	}
	_, err := ew.out.Write(item)
	return err
}

// writesPlain reports whether the yaml encoder writes s as a plain scalar
// inside a flow mapping, byte for byte as given. It answers conservatively:
// a false only costs a call to the encoder. Tagged strings must also not
// resolve to another type (a number, a bool or null), which a leading letter
// and none of the reserved words ensure.
func writesPlain(s string, tagged bool) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	first := s[0]
	isLetter := first >= 'a' && first <= 'z' || first >= 'A' && first <= 'Z'
	isDigit := first >= '0' && first <= '9'
	if !isLetter && !(isDigit && !tagged) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == '/') {
			return false
		}
	}
	if tagged && len(s) <= 5 {
		switch strings.ToLower(s) {
		case "true", "false", "null", "yes", "no", "on", "off", "y", "n":
			return false
		}
	}
	return true
}

// formatCache remembers the last figure formatted and its text.
type formatCache struct {
	bits uint64
	text string
	set  bool
}

func (c *formatCache) format(v float64, f func(float64) string) string {
	if b := math.Float64bits(v); !c.set || b != c.bits {
		c.bits, c.text, c.set = b, f(v), true
	}
	return c.text
}
