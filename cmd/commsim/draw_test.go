package main

import (
	"bytes"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
	if !bytes.Contains(svg, []byte("busiest gpu0-&gt;sw0: busy 84% of the run, 2MiB")) && !bytes.Contains(svg, []byte("busiest gpu0->sw0: busy 84% of the run, 2MiB")) {
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

// A folder where draw's file would go is a usage error before drawing
// (TestOutputFilesInNoFolderExit2).
func TestDrawOverAFolderIsAUsageError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.png")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	status, _, errOut := commsim("topo", "draw", "ring:4", "--out", path)
	if status != 2 || !strings.Contains(errOut, "is a folder") || strings.Contains(errOut, "goroutine") {
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

func TestDrawGroupsOnlyLargeFabricsOnSwitches(t *testing.T) {
	cases := []struct {
		spec          string
		grouped       bool
		boxes, others int // items drawn: boxes of GPUs, and the rest
	}{
		{"dgx-h100", false, 0, 0},
		{"cluster:2x4,rail=true", false, 0, 0},
		{"switch:48", false, 0, 0},
		{"switch:49", true, 1, 0}, // just past the limit
		{"ring:64", false, 0, 0},  // no switch to group by
		{"torus:8x8", false, 0, 0},
		{"gb200-nvl72", true, 1, 0},
		{"dgx-h100x16", true, 4, 1},            // sw0, sw1, 13 alike, sw15; the network switch
		{"dgx-h100x128,rail=true", true, 4, 9}, // 8 rails and the spine
		{"gb200-nvl72x16", true, 4, 5},         // 72 rails collapse to rail0, rail1, 69 alike, rail71; the spine
	}
	for _, c := range cases {
		g := groupTopology(&drawing{t: mustParse(t, c.spec)})
		if (g != nil) != c.grouped {
			t.Errorf("%s: grouped %v, want %v", c.spec, g != nil, c.grouped)
			continue
		}
		if g == nil {
			continue
		}
		boxes := 0
		for _, it := range g.items {
			if len(it.gpus) > 0 {
				boxes++
			}
		}
		if boxes != c.boxes || len(g.items)-boxes != c.others {
			t.Errorf("%s: %d boxes and %d others, want %d and %d", c.spec, boxes, len(g.items)-boxes, c.boxes, c.others)
		}
		// Every node is shown by exactly one item, every GPU by a box.
		seen := make([]int, len(g.d.t.Nodes))
		gpus := 0
		for _, it := range g.items {
			for _, v := range it.nodes {
				seen[v]++
			}
			gpus += len(it.gpus)
		}
		if slices.ContainsFunc(seen, func(n int) bool { return n != 1 }) || gpus != g.d.t.NumGPUs() {
			t.Errorf("%s: items do not cover every node once (%d gpus in boxes)", c.spec, gpus)
		}
	}
}

// boxRow draws, grouped, one network switch over switches with the given
// numbers of GPUs, and returns the texts of the bottom row.
func boxRow(t *testing.T, gpus ...int) []string {
	t.Helper()
	var nodes, links strings.Builder
	nodes.WriteString("name: boxes\nnodes:\n  - {name: net, kind: switch}\n")
	for n, k := range gpus {
		fmt.Fprintf(&nodes, "  - {name: sw%d, kind: switch}\n", n)
		fmt.Fprintf(&links, "  - {a: sw%d, b: net, bw: 50GB/s, lat: 1us}\n", n)
		for g := range k {
			fmt.Fprintf(&nodes, "  - {name: n%dg%d, kind: gpu}\n", n, g)
			fmt.Fprintf(&links, "  - {a: n%dg%d, b: sw%d, bw: 450GB/s, lat: 500ns}\n", n, g, n)
		}
	}
	file := filepath.Join(t.TempDir(), "boxes.yaml")
	if err := os.WriteFile(file, []byte(nodes.String()+"links:\n"+links.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	topo, err := resolveTopology(file)
	if err != nil {
		t.Fatal(err)
	}
	g := groupTopology(&drawing{t: topo})
	if g == nil {
		t.Fatalf("%d GPUs on switches: want a grouped drawing", topo.NumGPUs())
	}
	var row []string
	for _, it := range g.items {
		if it.row == 0 {
			row = append(row, it.text)
		}
	}
	return row
}

// A run collapses only alike boxes: one that differs stays drawn.
func TestDrawGroupedCollapsesOnlyAlikeBoxes(t *testing.T) {
	row := boxRow(t, 8, 8, 8, 8, 8, 4, 8, 8, 8, 8)
	want := []string{"switch sw0: 8 gpu", "… 3 more boxes alike\nsw1 … sw3\n24 gpu (ranks 8–31)", "switch sw4: 8 gpu",
		"switch sw5: 4 gpu", "switch sw6: 8 gpu", "… 2 more boxes alike\nsw7 … sw8\n16 gpu (ranks 52–67)", "switch sw9: 8 gpu"}
	if !slices.Equal(row, want) {
		t.Errorf("row %q\nwant %q: the odd box sw5 drawn, the alike ones around it collapsed", row, want)
	}
}

// Boxes all different still collapse, to keep the picture bounded, and
// the run says that they differ.
func TestDrawGroupedBoundsARowOfUnlikeBoxes(t *testing.T) {
	row := boxRow(t, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14)
	want := []string{"switch sw0: 5 gpu", "switch sw1: 6 gpu", "… 7 more boxes (not all alike)\nsw2 … sw8\n70 gpu (ranks 11–80)", "switch sw9: 14 gpu"}
	if !slices.Equal(row, want) {
		t.Errorf("row %q\nwant %q", row, want)
	}
}

func TestDrawSaysWhatItWrote(t *testing.T) {
	dir := t.TempDir()
	msg := regexp.MustCompile(`^commsim: wrote (\S+) \((\d+)×(\d+) (px|pt), (.*)\)\n$`)
	cases := []struct{ spec, file, drawn string }{
		{"gb200-nvl72", "nvl72.png", "73 nodes drawn as 1 box"},
		{"dgx-h100x128,rail=true", "x128.png", "2185 nodes drawn as 4 boxes and 9 others"},
		{"dgx-h100x128,rail=true", "x128.svg", "2185 nodes drawn as 4 boxes and 9 others"},
		{"cluster:2x4", "small.png", "19 nodes drawn one by one"},
		{"switch:9000", "huge.png", "9001 nodes drawn as 1 box"}, // past maxDrawNodes: grouped, it draws
	}
	for _, c := range cases {
		path := filepath.Join(dir, c.file)
		status, out, errOut := commsim("topo", "draw", c.spec, "--out", path)
		m := msg.FindStringSubmatch(errOut)
		if status != 0 || out != "" || m == nil || m[1] != path || m[5] != c.drawn {
			t.Errorf("%s: status %d, stdout %q, stderr %q: want %q", c.spec, status, out, errOut, c.drawn)
			continue
		}
		w, _ := strconv.Atoi(m[2])
		h, _ := strconv.Atoi(m[3])
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if m[4] == "px" {
			img, err := png.Decode(bytes.NewReader(data))
			if err != nil || img.Bounds().Dx() != w || img.Bounds().Dy() != h {
				t.Errorf("%s: says %d×%d px, the PNG is %v (%v)", c.file, w, h, img.Bounds(), err)
			}
			if w > 20*96 || h > 20*96 {
				t.Errorf("%s: %d×%d px, want 20 inches at most", c.file, w, h)
			}
			continue
		}
		size := regexp.MustCompile(`<svg width="([0-9.]+)pt" height="([0-9.]+)pt"`).FindSubmatch(data)
		if size == nil {
			t.Errorf("%s: not an SVG", c.file)
		} else if sw, _ := strconv.ParseFloat(string(size[1]), 64); math.Round(sw) != float64(w) {
			t.Errorf("%s: says %d pt wide, the SVG %s", c.file, w, size[1])
		} else if sh, _ := strconv.ParseFloat(string(size[2]), 64); math.Round(sh) != float64(h) {
			t.Errorf("%s: says %d pt high, the SVG %s", c.file, h, size[2])
		}
		for _, label := range []string{">spine</text>", ">rail7</text>", ">switch sw127: 8 gpu, 8 nic</text>", ">1023</text>", "125 more boxes alike"} {
			if !bytes.Contains(data, []byte(label)) {
				t.Errorf("%s lacks %q", c.file, label)
			}
		}
	}
	status, _, errOut := commsim("topo", "draw", "ring:4", "--out", filepath.Join(dir, "ring.dot"))
	if status != 0 || !strings.Contains(errOut, "ring.dot (Graphviz DOT, 4 nodes and 4 links)") {
		t.Errorf("dot: status %d, stderr %q", status, errOut)
	}
}

// A box numbers its GPUs cell by cell up to maxBoxCells, and beyond gives
// their ranks in a line.
func TestDrawGroupedBoxOfManyGPUsGivesRanks(t *testing.T) {
	for spec, want := range map[string]string{
		"switch:144": "switch sw0: 144 gpu",
		"switch:145": "switch sw0: 145 gpu\nranks 0–144",
	} {
		g := groupTopology(&drawing{t: mustParse(t, spec)})
		if g == nil || len(g.items) != 1 || g.items[0].text != want {
			t.Fatalf("%s: want one box saying %q", spec, want)
		}
		if cells := len(g.items[0].cells()); (cells > 0) != (spec == "switch:144") {
			t.Errorf("%s: %d cells", spec, cells)
		}
	}
}

// TestDrawHeatIsBusyTimeNotBytes: on two nodes of two GPUs, a ring
// all-reduce puts the same 96MiB on every link it crosses, NVLink (100GB/s),
// PCIe to the NIC (64GB/s) and the NIC's own link (50GB/s). The NIC links,
// busy longest, are the bottleneck and the only ones hot; by bytes every
// link would be red. The title names one of them and its share of the run.
func TestDrawHeatIsBusyTimeNotBytes(t *testing.T) {
	args := []string{"cluster:2x2", "--op", "allreduce", "--algo", "ring", "-e", "64MiB"}
	hot, edges := hotEdges(t, args...)
	for _, e := range edges {
		if !strings.Contains(e.attrs, "96MiB") {
			t.Errorf("%s--%s did not carry 96MiB: %s", e.a, e.b, e.attrs)
		}
	}
	if want := []string{"nic0--netsw", "nic1--netsw", "nic2--netsw", "nic3--netsw"}; !slices.Equal(hot, want) {
		t.Errorf("hot links %v, want the NICs' %v", hot, want)
	}
	if _, out, _ := commsim(append([]string{"topo", "draw"}, args...)...); !strings.Contains(out, "; busiest netsw->nic0: busy 99% of the run, 96MiB") {
		t.Errorf("the title does not name the NIC link:\n%s", out)
	}
}
