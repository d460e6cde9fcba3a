package topology

import (
	"bytes"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// writeYAMLTree is the writer WriteYAML replaced: it builds the whole
// document as a yaml.Node tree and encodes it, which needs many GB for the
// largest topologies. It stays here as the reference the streaming writer's
// bytes are checked against.
func (t *Topology) writeYAMLTree(w io.Writer) error {
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

// sameBytesAsTree checks that WriteYAML writes exactly what the tree writer
// does.
func sameBytesAsTree(t testing.TB, tp *Topology) {
	t.Helper()
	var stream, tree bytes.Buffer
	errS, errT := tp.WriteYAML(&stream), tp.writeYAMLTree(&tree)
	if (errS == nil) != (errT == nil) {
		t.Fatalf("%q: WriteYAML: %v, tree writer: %v", tp.Name, errS, errT)
	}
	if !bytes.Equal(stream.Bytes(), tree.Bytes()) {
		a, b := stream.String(), tree.String()
		i := 0
		for i < len(a) && i < len(b) && a[i] == b[i] {
			i++
		}
		t.Fatalf("%q: WriteYAML and the tree writer differ at byte %d:\nstream: %q\ntree:   %q", tp.Name, i, a[max(0, i-40):min(len(a), i+40)], b[max(0, i-40):min(len(b), i+40)])
	}
}

func TestWriteYAMLSameAsTreeWriter(t *testing.T) {
	specs := []string{"ring:1", "ring:8", "mesh:5,lat=0", "switch:3,bw=400Gb/s,reduce=4.3TB/s", "torus:2x3x4",
		"cluster:3x2,rail=true,nicbw=12.5GB/s,niclat=1.3us,pciebw=32GB/s,pcielat=0.1us",
		"cluster:2x2,rail=true,sharp=400Gb/s,nvls=1.23456789TB/s,arch=ampere,cpu=amd",
		"switch:4,arch=volta,cpu=intel,nvls=5e-324B/s", "switch:2,bw=1e300B/s,lat=1e-300s", "cluster:16x8"}
	for _, p := range Presets() {
		specs = append(specs, strings.Replace(p.Name, "N", "2", 1))
	}
	for _, s := range specs {
		sameBytesAsTree(t, mustParse(t, s))
	}
	// Names the encoder quotes or escapes, and figures it writes oddly.
	odd := []string{"null", "Null", "NULL", "~", "true", "False", "yes", "No", "on", "OFF", "y", "N", "123", "1e3", "0x1F",
		".inf", "-.inf", ".nan", "1:20", "2001-12-14", "a: b", " spaced ", "- x", "#hash", "a #b", "ünï💡", "'\"", "[x]",
		"{x}", "a,b", "x?", "!x", "&x", "*x", "|", ">", "%x", "@x", "`x", "a\\b",
		"gpu0", "sw-0", "n.1", "a/b", "_x", "x_", "<<", "=", "0", "-", "e", strings.Repeat("long", 100),
		strings.Repeat("word  and   spaces ", 50) + "end"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("aZ09_-./:# ,'\"[]{}?!&*|>%@`~\\ü💡")
	for range 300 {
		r := make([]rune, 1+rng.IntN(8))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		odd = append(odd, string(r))
	}
	seen := map[string]bool{}
	var nodes []Node
	var links []Link
	for _, name := range odd {
		if seen[name] || len(name) > MaxNameBytes {
			continue
		}
		seen[name] = true
		kind := []Kind{GPU, Switch, NIC, CPU}[len(nodes)%4]
		n := Node{Name: name, Kind: kind}
		if kind == GPU {
			n.ReduceBW = []float64{math.Inf(1), 1e300, 5e-324, 1.0 / 3}[len(nodes)%3]
		}
		if len(nodes) > 0 {
			links = append(links, Link{A: len(nodes), B: len(nodes) - 1, BW: []float64{1e300, 5e-324, 1.0 / 3, 450e9}[len(nodes)%4],
				Latency: []float64{0, 1e-300, 0.999, 936.25e-9}[len(nodes)%4]})
		}
		nodes = append(nodes, n)
	}
	nodes[0].Kind, nodes[0].ReduceBW = GPU, 1e12
	for _, name := range []string{"", "plain", "null", "a: b # c", "ünï"} {
		tp, err := New(name, nodes, links)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []CPUVendor{UnknownCPU, IntelCPU, ARMCPU} {
			tp.HostCPU = c
			sameBytesAsTree(t, tp)
		}
	}
}

// TestWriteYAMLStreams checks that exporting holds no per-element state:
// the bytes allocated while writing a large fabric stay within a fixed
// budget, where the tree writer allocated 14 KB per element (and
// 13 GB of peak memory for cluster:512x512).
func TestWriteYAMLStreams(t *testing.T) {
	tp := mustParse(t, "cluster:64x32,rail=true") // 4,193 nodes and 6,176 links
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := tp.WriteYAML(io.Discard); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	const budget = 256 << 10
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d nodes, %d links: %d bytes allocated", len(tp.Nodes), len(tp.Links), got)
	if got > budget {
		t.Errorf("WriteYAML of %d nodes and %d links allocated %d bytes, more than the fixed budget of %d", len(tp.Nodes), len(tp.Links), got, budget)
	}
}

// TestDocsExampleTreesDifferOnlyInTheUplinks: docs/bench.md's
// oversubscription example compares docs/examples' two trees, which must
// load and be the same fabric but for the leaves' uplinks, four times
// narrower in the 4:1 one.
func TestDocsExampleTreesDifferOnlyInTheUplinks(t *testing.T) {
	full, err := Load("../docs/examples/tree-1to1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	thin, err := Load("../docs/examples/tree-4to1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Nodes) != len(thin.Nodes) || len(full.Links) != len(thin.Links) || full.NumGPUs() != 8 {
		t.Fatalf("%d/%d nodes, %d/%d links, %d GPUs", len(full.Nodes), len(thin.Nodes), len(full.Links), len(thin.Links), full.NumGPUs())
	}
	uplinks := 0
	for i, l := range full.Links {
		m := thin.Links[i]
		if l.A != m.A || l.B != m.B || l.Latency != m.Latency {
			t.Fatalf("link %d: %+v against %+v", i, l, m)
		}
		if l.BW != m.BW {
			uplinks++
			if l.BW != 4*m.BW {
				t.Errorf("link %d: %g against %g B/s, want 4:1", i, l.BW, m.BW)
			}
		}
	}
	if uplinks != 2 {
		t.Errorf("%d links differ, want the two uplinks", uplinks)
	}
}
