package topology

import (
	"bytes"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// sameReading checks that ReadYAML (the line reader where it applies) and
// the yaml library's tree give the same topology or the same error.
func sameReading(t *testing.T, what string, doc []byte) {
	t.Helper()
	got, gotErr := ReadYAML(doc)
	want, wantErr := func() (tp *Topology, err error) {
		defer func() { // as ReadYAML does
			if r := recover(); r != nil {
				tp, err = nil, newErr(ErrYAML, "yaml: internal error in the yaml decoder: %v", r)
			}
		}()
		return readYAMLTree(doc)
	}()
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%s: ReadYAML error %v, the tree reader's %v\n%s", what, gotErr, wantErr, doc)
	}
	if (got == nil) != (want == nil) || got != nil && (!sameTopology(got, want) || !reflect.DeepEqual(got.Links, want.Links) || !reflect.DeepEqual(got.Nodes, want.Nodes)) {
		t.Fatalf("%s: ReadYAML and the tree reader read different topologies\n%s", what, doc)
	}
}

func TestReadYAMLLinesReadsEveryExport(t *testing.T) {
	specs := []string{"ring:1", "ring:8", "mesh:5,lat=0", "switch:3,bw=400Gb/s,reduce=4.3TB/s", "torus:2x3x4",
		"cluster:3x2,rail=true,nicbw=12.5GB/s,niclat=1.3us,pciebw=32GB/s,pcielat=0.1us",
		"cluster:2x2,rail=true,sharp=400Gb/s,nvls=1.23456789TB/s,arch=ampere,cpu=amd",
		"switch:4,arch=volta,cpu=intel,nvls=5e-324B/s", "switch:2,bw=1e300B/s,lat=1e-300s"}
	for _, p := range Presets() {
		specs = append(specs, strings.Replace(p.Name, "N", "2", 1))
	}
	for _, s := range specs {
		var buf bytes.Buffer
		if err := mustParse(t, s).WriteYAML(&buf); err != nil {
			t.Fatal(err)
		}
		if _, ok := readYAMLLines(buf.Bytes()); !ok {
			t.Errorf("%s: the line reader does not read its export:\n%s", s, buf.String())
		}
		sameReading(t, s, buf.Bytes())
	}
}

// TestReadYAMLLinesAgreesWithTheLibrary edits an export in the ways a person
// or a tool might, and checks each reads as the yaml library reads it, error
// for error.
func TestReadYAMLLinesAgreesWithTheLibrary(t *testing.T) {
	var buf bytes.Buffer
	if err := mustParse(t, "cluster:1x2,rail=true,arch=hopper,cpu=intel,nvls=276GB/s,sharp=inf").WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	export := buf.String()
	edits := map[string]func(string) string{
		"as written":       func(s string) string { return s },
		"crlf":             func(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") },
		"no final newline": func(s string) string { return strings.TrimSuffix(s, "\n") },
		"trailing space":   func(s string) string { return strings.Replace(s, "}\n", "} \n", 1) },
		"comment":          func(s string) string { return strings.Replace(s, "}\n", "} # c\n", 1) },
		"comment line":     func(s string) string { return strings.Replace(s, "links:\n", "links:\n# c\n", 1) },
		"quoted name":      func(s string) string { return strings.Replace(s, "name: gpu0,", `name: "gpu0",`, 1) },
		"null name":        func(s string) string { return strings.Replace(s, "name: gpu0,", "name: null,", 1) },
		"null node":        func(s string) string { return strings.ReplaceAll(s, "gpu0", "null") },
		"Null node":        func(s string) string { return strings.ReplaceAll(s, "gpu0", "Null") },
		"~ node":           func(s string) string { return strings.ReplaceAll(s, "gpu0", "~") },
		"empty value":      func(s string) string { return strings.Replace(s, "name: gpu0,", "name: ,", 1) },
		"repeated key":     func(s string) string { return strings.Replace(s, "kind: gpu,", "kind: gpu, kind: gpu,", 1) },
		"unknown key":      func(s string) string { return strings.Replace(s, "kind: gpu,", "kind: gpu, color: red,", 1) },
		"unknown kind":     func(s string) string { return strings.Replace(s, "kind: nic", "kind: nope", 1) },
		"unknown node":     func(s string) string { return strings.Replace(s, "b: sw0", "b: sw9", 1) },
		"bad bandwidth":    func(s string) string { return strings.Replace(s, "bw: 100GB/s", "bw: -1GB/s", 1) },
		"bad latency":      func(s string) string { return strings.Replace(s, "lat: 1us", "lat: 2s", 1) },
		"bad cpu":          func(s string) string { return strings.Replace(s, "cpu: intel", "cpu: via", 1) },
		"bad cpu, bad node": func(s string) string {
			return strings.Replace(strings.Replace(s, "cpu: intel", "cpu: via", 1), "kind: nic", "kind: x", 1)
		},
		"bad node, bad yaml": func(s string) string { return strings.Replace(s, "kind: nic", "kind: x", 1) + "links: [\n" },
		"no header":          func(s string) string { return s[strings.Index(s, "nodes:"):] },
		"extra header":       func(s string) string { return "color: red\n" + s },
		"anchor and alias": func(s string) string {
			return strings.Replace(strings.Replace(s, "name: gpu1,", "name: &g gpu1,", 1), "a: gpu1,", "a: *g,", 1)
		},
		"repeated name":   func(s string) string { return strings.Replace(s, "name: gpu1,", "name: gpu0,", 1) },
		"no links":        func(s string) string { return s[:strings.Index(s, "links:")] },
		"links, no items": func(s string) string { return s[:strings.Index(s, "links:")] + "links:\n" },
		"flow links":      func(s string) string { return s[:strings.Index(s, "links:")] + "links: []\n" },
		"indented more":   func(s string) string { return strings.ReplaceAll(s, "  - {", "    - {") },
		"second document": func(s string) string { return s + "---\nname: x\n" },
		"document start":  func(s string) string { return "---\n" + s },
		"tab":             func(s string) string { return strings.Replace(s, "kind: gpu", "kind:\tgpu", 1) },
		"no space":        func(s string) string { return strings.Replace(s, "kind: gpu", "kind:gpu", 1) },
		"folded name":     func(s string) string { return strings.Replace(s, "name: cluster", "name: >\n  cluster", 1) },
		"self loop":       func(s string) string { return strings.Replace(s, "a: gpu0, b: sw0", "a: sw0, b: sw0", 1) },
		"nodes twice":     func(s string) string { return s + "nodes:\n  - {name: x, kind: gpu}\n" },
	}
	for name, edit := range edits {
		sameReading(t, name, []byte(edit(export)))
	}
}

// TestReadYAMLHoldsLittlePerElement: reading an export allocates a few
// hundred bytes per node and link, where the yaml library's node tree took
// over 2 KB (8 GB for a file at MaxLinks).
func TestReadYAMLHoldsLittlePerElement(t *testing.T) {
	var buf bytes.Buffer
	tp := mustParse(t, "cluster:64x32,rail=true")
	if err := tp.WriteYAML(&buf); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := ReadYAML(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	elements := uint64(len(tp.Nodes) + len(tp.Links))
	perElement := (after.TotalAlloc - before.TotalAlloc) / elements
	t.Logf("%d bytes allocated per node and link", perElement)
	if perElement > 400 {
		t.Errorf("reading %d nodes and links allocated %d bytes each, more than 400", elements, perElement)
	}
}
