package main

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/topology"
)

var (
	dotNode = regexp.MustCompile(`(?m)^\t"([^"]+)" \[kind=(\w+), .*pos="(-?[0-9.]+),(-?[0-9.]+)!"\];$`)
	dotEdge = regexp.MustCompile(`(?m)^\t"([^"]+)" -- "([^"]+)" \[(.*)\];$`)
)

type dotEdgeLine struct{ a, b, attrs string }

// parseDOT checks loosely that out is an undirected graph and returns its
// node names and edges.
func parseDOT(t *testing.T, out string) (map[string]bool, []dotEdgeLine) {
	t.Helper()
	if !strings.Contains(out, "graph ") || !strings.HasSuffix(out, "}\n") || strings.Contains(out, "->\"") {
		t.Fatalf("not an undirected DOT graph:\n%s", out)
	}
	nodes := map[string]bool{}
	for _, m := range dotNode.FindAllStringSubmatch(out, -1) {
		nodes[m[1]] = true
	}
	var edges []dotEdgeLine
	for _, m := range dotEdge.FindAllStringSubmatch(out, -1) {
		edges = append(edges, dotEdgeLine{m[1], m[2], m[3]})
	}
	return nodes, edges
}

func TestDrawDOTHasEveryNodeAndLink(t *testing.T) {
	for _, spec := range []string{"ring:4", "mesh:4", "switch:4", "torus:3x3", "torus:2x2x3", "cluster:2x2,rail=true", "dgx-h100", "ring:1"} {
		status, out, errOut := commsim("topo", "draw", spec)
		if status != 0 {
			t.Fatalf("%s: status %d: %s", spec, status, errOut)
		}
		topo := mustParse(t, spec)
		nodes, edges := parseDOT(t, out)
		for _, n := range topo.Nodes {
			if !nodes[n.Name] {
				t.Errorf("%s: node %s missing:\n%s", spec, n.Name, out)
			}
		}
		if len(nodes) != len(topo.Nodes) || len(edges) != len(topo.Links) {
			t.Errorf("%s: %d nodes and %d edges, want %d and %d", spec, len(nodes), len(edges), len(topo.Nodes), len(topo.Links))
			continue
		}
		for i, l := range topo.Links {
			e := edges[i]
			bw := topology.FormatBandwidth(l.BW)
			if e.a != topo.Nodes[l.A].Name || e.b != topo.Nodes[l.B].Name || !strings.HasPrefix(e.attrs, `label="`+bw+`"`) {
				t.Errorf("%s: edge %d is %+v, want %s -- %s labelled %s", spec, i, e, topo.Nodes[l.A].Name, topo.Nodes[l.B].Name, bw)
			}
		}
	}
}

func TestDrawDOTToFileMatchesStdout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fabric.dot")
	if status, out, errOut := commsim("topo", "draw", "cluster:2x2", "--out", path); status != 0 || out != "" {
		t.Fatalf("status %d, stdout %q, stderr %q", status, out, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, stdout, _ := commsim("topo", "draw", "cluster:2x2")
	if string(data) != stdout {
		t.Fatalf("file and stdout differ")
	}
}

func TestDrawWritesPNGAndSVG(t *testing.T) {
	dir := t.TempDir()
	for _, spec := range []string{"cluster:2x4", "torus:4x4", "ring:8", "switch:8"} {
		base := filepath.Join(dir, strings.NewReplacer(":", "_", ",", "_").Replace(spec))
		if status, out, errOut := commsim("topo", "draw", spec, "--out", base+".png"); status != 0 || out != "" {
			t.Fatalf("%s png: status %d, %q %q", spec, status, out, errOut)
		}
		data, err := os.ReadFile(base + ".png")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) || len(data) < 2000 {
			t.Fatalf("%s: not a PNG (%d bytes)", spec, len(data))
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil || img.Bounds().Dx() < 500 || img.Bounds().Dy() < 400 {
			t.Fatalf("%s: PNG %v, err %v", spec, img.Bounds(), err)
		}

		if status, _, errOut := commsim("topo", "draw", spec, "--out", base+".svg"); status != 0 {
			t.Fatalf("%s svg: status %d, %s", spec, status, errOut)
		}
		svg, err := os.ReadFile(base + ".svg")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(svg, []byte("<svg")) {
			t.Fatalf("%s: not an SVG", spec)
		}
		for _, n := range mustParse(t, spec).Nodes {
			if !bytes.Contains(svg, []byte(">"+n.Name+"</text>")) {
				t.Errorf("%s: SVG lacks the label %s", spec, n.Name)
			}
		}
	}
}

// hotEdges returns the links the DOT marks hot, as "a--b".
func hotEdges(t *testing.T, args ...string) ([]string, []dotEdgeLine) {
	t.Helper()
	status, out, errOut := commsim(append([]string{"topo", "draw"}, args...)...)
	if status != 0 {
		t.Fatalf("%q: status %d: %s", args, status, errOut)
	}
	_, edges := parseDOT(t, out)
	var hot []string
	for _, e := range edges {
		red := strings.Contains(e.attrs, `color="#d7191c"`)
		if strings.Contains(e.attrs, "hot=true") != red {
			t.Errorf("%s--%s: hot and red disagree: %s", e.a, e.b, e.attrs)
		}
		if red {
			hot = append(hot, e.a+"--"+e.b)
		}
	}
	return hot, edges
}

func TestDrawOverlayRingAllReduceLoadsEveryLinkAlike(t *testing.T) {
	hot, edges := hotEdges(t, "ring:4", "--op", "allreduce", "--algo", "ring", "-e", "64MiB")
	if len(hot) != 4 {
		t.Fatalf("hot links %v, want all 4", hot)
	}
	// Each link carries 2(p-1)/p × 64MiB = 96MiB one way, nothing back.
	for _, e := range edges {
		if !strings.Contains(e.attrs, e.a+"->"+e.b+" 96MiB") || strings.Contains(e.attrs, e.b+"->"+e.a) {
			t.Errorf("%s--%s: %s", e.a, e.b, e.attrs)
		}
	}
}

func TestDrawOverlayBroadcastTreeHeatsTheRootUplink(t *testing.T) {
	hot, edges := hotEdges(t, "switch:4", "--op", "broadcast", "--algo", "tree", "--root", "0", "-e", "1MiB")
	if len(hot) != 1 || hot[0] != "gpu0--sw0" {
		t.Fatalf("hot links %v, want only gpu0--sw0", hot)
	}
	width := regexp.MustCompile(`penwidth=([0-9.]+)`)
	top := ""
	best := 0.0
	for _, e := range edges {
		var w float64
		if m := width.FindStringSubmatch(e.attrs); m != nil {
			w, _ = strconv.ParseFloat(m[1], 64)
		}
		if w > best {
			best, top = w, e.a+"--"+e.b
		}
	}
	if top != "gpu0--sw0" || !strings.Contains(edges[0].attrs, "gpu0->sw0 2MiB") {
		t.Fatalf("widest %s; root uplink %s", top, edges[0].attrs)
	}
	// The same run as a picture: the title names the busiest link.
	path := filepath.Join(t.TempDir(), "bcast.svg")
	if status, _, errOut := commsim("topo", "draw", "switch:4", "--op", "broadcast", "--algo", "tree", "-e", "1MiB", "--out", path); status != 0 {
		t.Fatal(errOut)
	}
	svg, _ := os.ReadFile(path)
	if !bytes.Contains(svg, []byte("busiest gpu0-&gt;sw0 carried 2MiB")) && !bytes.Contains(svg, []byte("busiest gpu0->sw0 carried 2MiB")) {
		t.Errorf("SVG title lacks the busiest link")
	}
}

func TestDrawIdleLinksAreGrey(t *testing.T) {
	// A broadcast from rank 0 on a cluster never uses the other node's switch links back.
	_, edges := hotEdges(t, "cluster:2x2", "--op", "broadcast", "--algo", "tree", "-e", "4KiB")
	idle := 0
	for _, e := range edges {
		if strings.Contains(e.attrs, "idle") {
			idle++
			if !strings.Contains(e.attrs, `color="#cccccc"`) {
				t.Errorf("idle %s--%s not grey: %s", e.a, e.b, e.attrs)
			}
		}
	}
	if idle == 0 {
		t.Errorf("no idle link in a broadcast on cluster:2x2")
	}
}

func TestDrawBadInputExits2(t *testing.T) {
	dir := t.TempDir()
	cases := map[string][]string{
		"unknown extension": {"ring:4", "--out", filepath.Join(dir, "x.jpg")},
		"no extension":      {"ring:4", "--out", filepath.Join(dir, "x")},
		"algo without op":   {"ring:4", "--algo", "ring"},
		"size without op":   {"ring:4", "-e", "1MiB"},
		"unknown op":        {"ring:4", "--op", "allfoo"},
		"unknown algo":      {"ring:4", "--op", "allreduce", "--algo", "bogus"},
		"bad size":          {"ring:4", "--op", "allreduce", "-e", "12x"},
		"root out of range": {"ring:4", "--op", "broadcast", "--root", "4"},
		"bad topology":      {"ring:0"},
		"missing file":      {"/no/such/fabric.yaml"},
		"too many nodes":    {"switch:9000"},
		"no argument":       {},
		"two arguments":     {"ring:4", "ring:8"},
	}
	for name, args := range cases {
		status, out, errOut := commsim(append([]string{"topo", "draw"}, args...)...)
		if status != 2 || out != "" || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("%s: status %d, stdout %q, stderr %q", name, status, out, errOut)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bad input left files: %v", entries)
	}
}

func TestDrawUnwritableOutputIsRuntimeError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "x.png")
	status, _, errOut := commsim("topo", "draw", "ring:4", "--out", path)
	if status != 1 || strings.Contains(errOut, "goroutine") {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
}

// Every layout is deterministic and keeps nodes apart.
func TestLayoutsSeparateNodes(t *testing.T) {
	for _, spec := range []string{"ring:8", "mesh:5", "switch:8", "torus:4x4", "torus:4x4x4", "torus:2x8", "cluster:2x4",
		"cluster:3x2,rail=true", "dgx-h100x2", "gb200-nvl72", "mac-tb5:4", "ring:2", "cluster:1x1"} {
		topo := mustParse(t, spec)
		l := layoutTopology(topo)
		if again := layoutTopology(topo); !equalFloats(l.x, again.x) || !equalFloats(l.y, again.y) {
			t.Errorf("%s: layout is not deterministic", spec)
		}
		for a := range topo.Nodes {
			if math.IsNaN(l.x[a]) || math.IsNaN(l.y[a]) || math.IsInf(l.x[a], 0) || math.IsInf(l.y[a], 0) {
				t.Fatalf("%s: node %s at (%v, %v)", spec, topo.Nodes[a].Name, l.x[a], l.y[a])
			}
			for b := a + 1; b < len(topo.Nodes); b++ {
				if d := math.Hypot(l.x[a]-l.x[b], l.y[a]-l.y[b]); d < 0.4 {
					t.Errorf("%s: %s and %s are %.2f apart", spec, topo.Nodes[a].Name, topo.Nodes[b].Name, d)
				}
			}
		}
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A topology of no known shape (here a YAML fabric with a CPU between two
// switches) still draws, on a circle.
func TestDrawFallbackLayout(t *testing.T) {
	yaml := `name: odd
nodes:
  - {name: gpu0, kind: gpu}
  - {name: gpu1, kind: gpu}
  - {name: cpu0, kind: cpu}
links:
  - {a: gpu0, b: cpu0, bw: 32GB/s, lat: 1us}
  - {a: cpu0, b: gpu1, bw: 32GB/s, lat: 1us}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "odd.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := commsim("topo", "draw", file, "--op", "sendrecv", "-e", "1KiB")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	if nodes, edges := parseDOT(t, out); len(nodes) != 3 || len(edges) != 2 {
		t.Fatalf("%d nodes, %d edges:\n%s", len(nodes), len(edges), out)
	}
	if status, _, errOut := commsim("topo", "draw", file, "--out", filepath.Join(dir, "odd.png")); status != 0 {
		t.Fatal(errOut)
	}
}
