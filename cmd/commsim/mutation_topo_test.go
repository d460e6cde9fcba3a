package main

// Tests written from a mutation-testing review of topo.go, fidelity.go,
// draw.go, draw_group.go and plot.go: each pins down behaviour a user
// relies on that no other test held.

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// writeTopoYAML writes a fabric file and returns its path.
func writeTopoYAML(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fabric.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// showCSV runs topo show --format csv and returns its records.
func showCSV(t *testing.T, spec string) [][]string {
	t.Helper()
	status, out, errOut := commsim("topo", "show", spec, "--format", "csv")
	if status != 0 {
		t.Fatalf("%s: status %d: %s", spec, status, errOut)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// Kills T01: validate counts the nodes of every kind, not the links.
func TestTopoValidateCountsNodesAndLinks(t *testing.T) {
	status, out, errOut := commsim("topo", "validate", "cluster:2x2")
	if status != 0 || out != "cluster:2x2: ok (4 gpus, 11 nodes, 12 links)\n" {
		t.Errorf("status %d, stdout %q, stderr %q", status, out, errOut)
	}
}

// Kills T08, T09, T10: links are classed by their kinds in either order,
// bandwidth and latency, and each class counts its links.
func TestTopoShowClassesLinksByKindsBandwidthAndLatency(t *testing.T) {
	file := writeTopoYAML(t, `name: classes
nodes:
  - {name: sw0, kind: switch}
  - {name: gpu0, kind: gpu}
  - {name: gpu1, kind: gpu}
  - {name: gpu2, kind: gpu}
links:
  - {a: gpu0, b: sw0, bw: 100GB/s, lat: 1us}
  - {a: sw0, b: gpu1, bw: 100GB/s, lat: 1us}
  - {a: gpu2, b: sw0, bw: 100GB/s, lat: 2us}
`)
	sum := showJSON(t, file)
	want := []linkClass{{"gpu-switch", 2, 100e9, 1e-6}, {"gpu-switch", 1, 100e9, 2e-6}}
	if !slices.Equal(sum.Links, want) {
		t.Errorf("link classes %+v, want %+v", sum.Links, want)
	}
	if sum := showJSON(t, "dgx-h100"); len(sum.Links) != 1 || sum.Links[0].Count != 8 {
		t.Errorf("dgx-h100: link classes %+v, want one of 8 links", sum.Links)
	}
}

// Kills T11, T13, T30: two GPUs have a bisection and one route; three GPUs
// have routes to ranks 1 and 2, each once.
func TestTopoShowOfTwoGPUsHasABisectionAndOneRoute(t *testing.T) {
	status, out, errOut := commsim("topo", "show", "ring:2")
	if status != 0 || !strings.Contains(out, "bisection bandwidth (min over 1 candidate cuts): 100GB/s per direction, across ranks 0-0 | 1-1") {
		t.Errorf("ring:2: status %d, stderr %q:\n%s", status, errOut, out)
	}
	for spec, want := range map[string][]int{"ring:2": {1}, "ring:3": {1, 2}, "ring:4": {1, 2, 3}} {
		var to []int
		for _, r := range showJSON(t, spec).Routes {
			to = append(to, r.To)
		}
		if !slices.Equal(to, want) {
			t.Errorf("%s: routes to %v, want %v", spec, to, want)
		}
	}
}

// Kills T12: a fabric of exactly maxBisectionSize nodes and links still
// gets its bisection.
func TestTopoShowComputesTheBisectionAtItsSizeLimit(t *testing.T) {
	skipInRaceRun(t, "max-flow cuts of a ring of 2^18 nodes; TestTopoShowOfTwoGPUsHasABisectionAndOneRoute computes a bisection under it")
	_, out, _ := commsim("topo", "show", "ring:131072")
	if !strings.Contains(out, "bisection bandwidth (min over 13 candidate cuts): 200GB/s per direction") {
		t.Errorf("ring:131072 (2^18 nodes and links): no bisection computed:\n%s", out)
	}
}

// Kills T14, T15: a route's bottleneck is its slowest link (the NIC's
// 50GB/s between nodes of a cluster), not its fastest or none.
func TestTopoShowRouteBottleneckIsItsSlowestLink(t *testing.T) {
	var got []float64
	for _, r := range showJSON(t, "cluster:2x2").Routes {
		got = append(got, r.Bottleneck)
	}
	if want := []float64{100e9, 50e9, 50e9}; !slices.Equal(got, want) {
		t.Errorf("bottlenecks %v, want %v", got, want)
	}
}

// Kills T18, T19, T20, T21, T22: every CSV record carries its own figures
// in its own columns, as the JSON gives them.
func TestTopoShowCSVColumnsHoldTheirOwnFigures(t *testing.T) {
	rows := showCSV(t, "switch:4")
	want := [][]string{
		{"gpu_reduce", "gpu", "4", "inf", "", "", ""},
		{"links", "gpu-switch", "4", "1e+11", "1e-06", "", ""},
		{"bisection", "ranks 0-1 | 2-3", "2", "2e+11", "", "", ""},
		{"route", "rank 0 -> 1", "", "1e+11", "2e-06", "2", "gpu0 > sw0 > gpu1"},
	}
	for _, w := range want {
		if !slices.ContainsFunc(rows, func(r []string) bool { return slices.Equal(r, w) }) {
			t.Errorf("switch:4: no record %q in %q", w, rows)
		}
	}
	sources := 0
	for _, r := range showCSV(t, "dgx-h100") {
		if r[0] == "source" && r[1] == "dgx-h100" && r[6] != "" {
			sources++
		}
	}
	if n := len(showJSON(t, "dgx-h100").Sources); sources != n || n == 0 {
		t.Errorf("dgx-h100: %d source records, %d sources", sources, n)
	}
}

// Kills T23, T24, T25: the table names only the kinds present, says
// nothing of more links when all are listed, and spells out unlimited
// reduction.
func TestTopoShowTableHeadLines(t *testing.T) {
	_, out, _ := commsim("topo", "show", "switch:4")
	for _, want := range []string{"topology switch:4: 4 gpu, 1 switch; 4 links (full duplex)\n",
		"gpu reduction bandwidth: 4 at unlimited (reduce=inf: reductions take no time)\n",
		"link names (what-if --fault 'link NAME down at T'): gpu0-sw0 gpu1-sw0 gpu2-sw0 gpu3-sw0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}

// Kills T26, T27, T28, T29: the hardware line names GPU arches, host CPUs,
// NIC ports over one and reducing switches (one switch, several switches),
// and is left out where a fabric says none of these.
func TestTopoShowHardwareLine(t *testing.T) {
	for spec, want := range map[string]string{
		"dgx-h100":               "\nhardware: 8 hopper gpus, intel host cpus, 1 switch reducing at 276GB/s\n",
		"dgx-h100x2":             "\nhardware: 16 hopper gpus, intel host cpus, 2 switches reducing at 276GB/s\n",
		"cluster:2x2,nicports=2": "\nhardware: 2 ports a nic\n",
		"cluster:2x2,nicports=1": "",
		"switch:4":               "",
	} {
		_, out, _ := commsim("topo", "show", spec)
		if got := hardwareLine(mustParse(t, spec)); want == "" && (got != "" || strings.Contains(out, "hardware:")) || want != "" && !strings.Contains(out, want) {
			t.Errorf("%s: hardware line %q, want %q in:\n%s", spec, got, want, out)
		}
	}
}

// Kills T39, T40: a big ring's GPUs stay 1.1 apart, and torus:AxB lays
// its GPUs out in A rows of B, 1.5 apart.
func TestLayoutSpacesRingsAndGridsTori(t *testing.T) {
	topo := mustParse(t, "ring:32")
	l := layoutTopology(topo)
	for v := range topo.Nodes {
		u := (v + 1) % len(topo.Nodes)
		if d := math.Hypot(l.x[v]-l.x[u], l.y[v]-l.y[u]); d < 1.1-1e-9 {
			t.Fatalf("ring:32: gpu%d and gpu%d %.2f apart", v, u, d)
		}
	}
	l = layoutTopology(mustParse(t, "torus:3x4"))
	for v := range 12 {
		if x, y := 1.5*float64(v%4), -1.5*float64(v/4); math.Abs(l.x[v]-x) > 1e-9 || math.Abs(l.y[v]-y) > 1e-9 {
			t.Errorf("torus:3x4: gpu%d at (%v, %v), want (%v, %v)", v, l.x[v], l.y[v], x, y)
		}
	}
}

// Kills T41, T42: only a torus's wrap-around links are bowed: above their
// row, left of their column, and between the planes of a 3-D torus.
func TestLayoutBowsOnlyWrapAroundLinks(t *testing.T) {
	for _, spec := range []string{"torus:3x4", "torus:3x3x4"} {
		topo := mustParse(t, spec)
		l := layoutTopology(topo)
		cols, rows := 4, 3*4
		for i, lk := range topo.Links {
			d := lk.B - lk.A
			if d < 0 {
				d = -d
			}
			var want [2]float64
			switch {
			case d == cols-1 && lk.A/cols == lk.B/cols: // wraps a row
				want = [2]float64{0, 0.45}
			case spec == "torus:3x4" && d == rows-cols, spec == "torus:3x3x4" && d == rows-cols && lk.A/rows == lk.B/rows: // wraps a column
				want = [2]float64{-0.45, 0}
			case spec == "torus:3x3x4" && d == 2*rows: // wraps the planes
				want = [2]float64{0.45, -0.3}
			}
			if l.bow[i] != want {
				t.Errorf("%s: link %s-%s bowed %v, want %v", spec, topo.Nodes[lk.A].Name, topo.Nodes[lk.B].Name, l.bow[i], want)
			}
		}
	}
}

// Kills T43, T44, T46: one switch sits in the middle of its GPUs; a
// cluster's network switch sits in the middle, and each NIC 0.8 from the
// GPU it hangs off.
func TestLayoutPutsTheHubInTheMiddleAndNICsByTheirGPU(t *testing.T) {
	topo := mustParse(t, "dgx-h100")
	l := layoutTopology(topo)
	for v, n := range topo.Nodes {
		if d := math.Hypot(l.x[v], l.y[v]); n.Name == "sw0" && d > 1e-9 || n.Name != "sw0" && math.Abs(d-1.5) > 1e-9 {
			t.Errorf("dgx-h100: %s %.2f from the middle", n.Name, d)
		}
	}
	topo = mustParse(t, "cluster:2x2")
	l = layoutTopology(topo)
	at := map[string]int{}
	for v, n := range topo.Nodes {
		at[n.Name] = v
	}
	if v := at["netsw"]; math.Hypot(l.x[v], l.y[v]) > 1e-9 {
		t.Errorf("cluster:2x2: netsw at (%v, %v), want the middle", l.x[v], l.y[v])
	}
	for g := range 4 {
		nic, gpu := at["nic"+string(rune('0'+g))], at["gpu"+string(rune('0'+g))]
		if d := math.Hypot(l.x[nic]-l.x[gpu], l.y[nic]-l.y[gpu]); math.Abs(d-0.8) > 1e-9 {
			t.Errorf("cluster:2x2: nic%d %.2f from gpu%d, want 0.8", g, d, g)
		}
	}
}

// Kills D01, D09: --out's extension is read in any case, and a DOT file
// written says how many nodes and links it holds.
func TestDrawReadsTheExtensionInAnyCaseAndCountsWhatItWrote(t *testing.T) {
	dir := t.TempDir()
	status, _, errOut := commsim("topo", "draw", "ring:4", "--out", filepath.Join(dir, "ring.SVG"))
	if status != 0 || !strings.Contains(errOut, "ring.SVG (") {
		t.Errorf(".SVG: status %d, stderr %q", status, errOut)
	}
	status, _, errOut = commsim("topo", "draw", "cluster:2x2", "--out", filepath.Join(dir, "c.dot"))
	if status != 0 || !strings.Contains(errOut, "c.dot (Graphviz DOT, 11 nodes and 12 links)") {
		t.Errorf("dot: status %d, stderr %q", status, errOut)
	}
}

// Kills D04: --root, like the other flags of --op, is refused without it.
func TestDrawRootNeedsOp(t *testing.T) {
	status, out, errOut := commsim("topo", "draw", "ring:4", "--root", "1")
	if status != 2 || out != "" || !strings.Contains(errOut, "--root needs --op") {
		t.Errorf("status %d, stdout %q, stderr %q", status, out, errOut)
	}
}

// Kills D06: a fabric of exactly maxDrawNodes nodes is drawn as DOT.
func TestDrawTakesExactlyMaxDrawNodes(t *testing.T) {
	status, out, errOut := commsim("topo", "draw", "switch:8191")
	if status != 0 || !strings.Contains(out, `"gpu8190" [kind=gpu`) {
		t.Errorf("switch:8191 (%d nodes): status %d, stderr %q", maxDrawNodes, status, errOut)
	}
}

// Kills D11, D16: the busiest link named is the first of the busiest, and
// a link is coloured by its busier direction, B to A included.
func TestDrawOverlayNamesTheFirstBusiestAndColoursEitherDirection(t *testing.T) {
	status, out, errOut := commsim("topo", "draw", "ring:4", "--op", "allreduce", "--algo", "ring", "-e", "64MiB")
	if status != 0 || !strings.Contains(out, "; busiest gpu0->gpu1: busy 99% of the run, 96MiB\"") {
		t.Errorf("status %d, stderr %q:\n%s", status, errOut, out)
	}
	_, edges := hotEdges(t, "switch:4", "--op", "broadcast", "--algo", "tree", "-e", "1MiB")
	for _, e := range edges {
		if strings.Contains(e.attrs, "sw0->"+e.a) && (strings.Contains(e.attrs, "#cccccc") || strings.Contains(e.attrs, "penwidth=0.75")) {
			t.Errorf("%s--%s carried bytes from the switch, yet is drawn idle: %s", e.a, e.b, e.attrs)
		}
	}
}

// Kills D14, D15: byte counts are in binary units from 1024 up, with four
// significant digits.
func TestHumanBytesUnits(t *testing.T) {
	for b, want := range map[float64]string{100: "100B", 1023: "1023B", 1024: "1KiB", 12.34 * 1024: "12.34KiB", 96 << 20: "96MiB", 1.5 * (1 << 30): "1.5GiB"} {
		if got := humanBytes(b); got != want {
			t.Errorf("humanBytes(%v) = %q, want %q", b, got, want)
		}
	}
}

// Kills D17, D19, D21, D22: without an overlay a link's width grows with
// the square root of its bandwidth; with one, a link of 90% of the busiest
// is hot, a cooler one shades from blue (idle-ish) to orange (near hot).
func TestDrawLinkStyles(t *testing.T) {
	d := &drawing{t: mustParse(t, "dgx-h100x2")}
	if w, _, _ := d.styleOf(450e9, 0); math.Abs(w-3.5) > 1e-9 {
		t.Errorf("the fastest link %.3f wide, want 3.5", w)
	}
	if w, _, _ := d.styleOf(50e9, 0); math.Abs(w-(0.75+2.75/3)) > 1e-9 {
		t.Errorf("a ninth of the fastest %.3f wide, want %.3f", w, 0.75+2.75/3)
	}
	d.ov = &overlay{most: 10}
	if _, _, hot := d.styleOf(1, 9); !hot {
		t.Errorf("a link of 90%% of the busiest is not hot")
	}
	if _, col, hot := d.styleOf(1, 4.5); hot || col != coolToWarm(0.5) {
		t.Errorf("half the busiest: %v (hot %v), want %v, halfway to hot", col, hot, coolToWarm(0.5))
	}
	if blue, orange := coolToWarm(0), coolToWarm(1); blue.B <= blue.R || orange.R <= orange.B {
		t.Errorf("coolToWarm(0) = %v, want blue; coolToWarm(1) = %v, want orange", blue, orange)
	}
}

// Kills D23, D24, D25: DOT gives each kind its shape and colour and pins
// positions at 1.2 inches a layout unit.
func TestDrawDOTShapesColoursAndPositions(t *testing.T) {
	_, out, _ := commsim("topo", "draw", "cluster:2x2")
	for _, want := range []string{`"gpu0" [kind=gpu, shape=box, fillcolor="#66bd63"`, `"sw0" [kind=switch, shape=ellipse, fillcolor="#4393c3"`,
		`"nic0" [kind=nic, shape=triangle, fillcolor="#f4a582"`} {
		if !strings.Contains(out, want) {
			t.Errorf("cluster:2x2 DOT lacks %q", want)
		}
	}
	if _, out, _ := commsim("topo", "draw", "torus:3x4"); !strings.Contains(out, `"gpu1" [kind=gpu, shape=box, fillcolor="#66bd63", pos="1.800,0.000!"]`) {
		t.Errorf("torus:3x4: gpu1 not 1.5 units (1.8in) right of gpu0:\n%s", out)
	}
}

// Kills D30, D31, D32: a small picture is at least 6×4.5 inches; its
// legend names each node kind once and every bandwidth (up to four).
func TestDrawPictureSizeAndLegend(t *testing.T) {
	dir := t.TempDir()
	if _, _, errOut := commsim("topo", "draw", "ring:4", "--out", filepath.Join(dir, "r.png")); !strings.Contains(errOut, "(576×432 px, ") {
		t.Errorf("ring:4: %q, want 6×4.5in at 96 dpi", errOut)
	}
	file := filepath.Join(dir, "d.svg")
	if status, _, errOut := commsim("topo", "draw", "dgx-h100x2", "--out", file); status != 0 {
		t.Fatal(errOut)
	}
	svg, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for label, n := range map[string]int{">gpu</text>": 1, ">switch</text>": 1, ">nic</text>": 1, ">450GB/s</text>": 1, ">64GB/s</text>": 1, ">50GB/s</text>": 1} {
		if got := strings.Count(string(svg), label); got != n {
			t.Errorf("dgx-h100x2 SVG: %q %d times, want %d", label, got, n)
		}
	}
}

// Kills D33, D34: the legend's bandwidths are the distinct ones, fastest
// first, at most n.
func TestBandwidthClassesAreDistinctFastestFirst(t *testing.T) {
	topo, err := resolveTopology(writeTopoYAML(t, `name: bws
nodes:
  - {name: g0, kind: gpu}
  - {name: g1, kind: gpu}
  - {name: g2, kind: gpu}
  - {name: g3, kind: gpu}
links:
  - {a: g0, b: g1, bw: 10GB/s, lat: 1us}
  - {a: g1, b: g2, bw: 50GB/s, lat: 1us}
  - {a: g2, b: g3, bw: 50GB/s, lat: 1us}
  - {a: g3, b: g0, bw: 20GB/s, lat: 1us}
  - {a: g0, b: g2, bw: 40GB/s, lat: 1us}
  - {a: g1, b: g3, bw: 30GB/s, lat: 1us}
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := bandwidthClasses(topo, 4); !slices.Equal(got, []int{1, 4, 5, 3}) {
		t.Errorf("classes %v, want links 1, 4, 5, 3 (50, 40, 30, 20GB/s)", got)
	}
}

// Kills D39, D40, D41: a bowed link is a curve from end to end whose
// middle is offset by its bow.
func TestBowedLinkCurveRunsEndToEndThroughItsBow(t *testing.T) {
	topo := mustParse(t, "torus:3x4")
	l := layoutTopology(topo)
	for i, lk := range topo.Links {
		if l.bow[i] == [2]float64{} {
			continue
		}
		pts := l.curve(topo, i)
		if len(pts) != 17 || pts[0] != [2]float64{l.x[lk.A], l.y[lk.A]} || math.Hypot(pts[16][0]-l.x[lk.B], pts[16][1]-l.y[lk.B]) > 1e-9 {
			t.Fatalf("link %d: %d points from %v to %v", i, len(pts), pts[0], pts[len(pts)-1])
		}
		mx, my := (l.x[lk.A]+l.x[lk.B])/2+l.bow[i][0], (l.y[lk.A]+l.y[lk.B])/2+l.bow[i][1]
		if math.Hypot(pts[8][0]-mx, pts[8][1]-my) > 1e-9 {
			t.Errorf("link %d: middle at %v, want (%v, %v)", i, pts[8], mx, my)
		}
	}
}

// Kills F17, F19: the CSV's time and error columns hold the JSON's
// figures, size by size, NCCL's model's included.
func TestFidelityCSVColumnsHoldTheJSONsFigures(t *testing.T) {
	log := filepath.Join(shippedLogs, "aws-batch-p5-allreduce-8xH100.txt")
	status, out, errOut := commsim("fidelity", "--log", log, "--format", "json")
	var rep fidReport
	if status != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("json: status %d, stderr %q", status, errOut)
	}
	_, out, _ = commsim("fidelity", "--log", log, "--format", "csv")
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) != len(rep.Sizes)+1 {
		t.Fatalf("csv: %d rows (%v), want %d", len(rows), err, len(rep.Sizes)+1)
	}
	for i, z := range rep.Sizes {
		if z.ModelUS == nil {
			t.Fatalf("size %d: not priced by NCCL's model", z.Bytes)
		}
		want := []string{strconv.FormatInt(z.Bytes, 10), strconv.Itoa(z.Line), fmtFloat(z.MeasuredUS), fmtFloat(z.PredictedUS),
			fmtFloat(z.RelError), z.Algo, fmtFloat(*z.ModelUS), fmtFloat(*z.ModelError)}
		if !slices.Equal(rows[i+1], want) {
			t.Errorf("csv row %q, want %q", rows[i+1], want)
		}
	}
}

// Kills F21, F26, F32: the table notes left-out 0-byte sizes and
// back-to-back runs only where there are some, and the JSON's bands carry
// their key and range apart.
func TestFidelityNotesOnlyWhatApplies(t *testing.T) {
	_, out, _ := commsim("fidelity", "--log", filepath.Join(shippedLogs, "aws-batch-p5-allreduce-8xH100.txt"))
	if strings.Contains(out, "size 0 left out") || strings.Contains(out, "runs back to back") {
		t.Errorf("an allreduce log with no 0-byte size:\n%s", out)
	}
	_, out, _ = commsim("fidelity", "--log", filepath.Join(shippedLogs, "vultr-b200-allgather-8xB200.txt"))
	if !strings.Contains(out, "28 sizes, out-of-place times; size 0 left out\n") {
		t.Errorf("a log with a 0-byte size:\n%s", out)
	}
	_, out, _ = commsim("fidelity", "--log", filepath.Join(shippedLogs, "vultr-b200-allgather-8xB200.txt"), "--format", "json")
	var rep fidReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Bands) != 3 || rep.Bands[0].Band != "small" || rep.Bands[0].Range != "< 64 KiB" {
		t.Errorf("bands %+v (%v)", rep.Bands, err)
	}
}

// Kills F24: the JSON counts NCCL's logged choices without --as-logged too.
func TestFidelityJSONCountsLoggedChoices(t *testing.T) {
	line := func(bytes int, proto string, hi int) string {
		return fmt.Sprintf("gpu1:9:9 [0] NCCL INFO AllReduce: %d Bytes -> Algo RING proto %s channel{Lo..Hi}={0..%d}\n", bytes, proto, hi)
	}
	text := "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
		"  8  2  float  sum  -1" + line(8, "LL", 0) + "  13.67  0  0  0" + line(8, "LL", 0) + "  13.50  0  0  0\n" +
		"  4194304  1048576  float  sum  -1" + line(4194304, "LL128", 23) + "  54.19  0  0  0" + line(4194304, "LL128", 23) + "  54.00  0  0  0\n"
	path := filepath.Join(t.TempDir(), "tuning.log")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := commsim("fidelity", "--log", path, "--topo", "dgx-h100", "--op", "allreduce", "--format", "json")
	var rep fidReport
	if err := json.Unmarshal([]byte(out), &rep); status != 0 || err != nil || rep.Choices == nil || !reflect.DeepEqual(*rep.Choices, fidChoices{Logged: 2, Agree: 1}) {
		t.Errorf("status %d, stderr %q, choices %+v", status, errOut, rep.Choices)
	}
}

// Kills F33, F35: a shipped log's header says it is excluded from the
// targets, and says a presumed release is "not applied" only where NCCL's
// tuner runs (--algo nccl), not for commsim's own algorithms.
func TestFidelityShippedHeaderSaysExclusionAndPresumedRelease(t *testing.T) {
	_, out, _ := commsim("fidelity", "--log", filepath.Join(shippedLogs, "aws-batch-p5-allreduce-8xH100.txt"))
	if !strings.Contains(out, "\n# excluded from the fidelity targets: ") {
		t.Errorf("an excluded log does not say so:\n%s", out)
	}
	status, out, errOut := commsim("fidelity", "--log", filepath.Join(shippedLogs, "aws-p4de-allreduce-16xA100.txt"), "--algo", "ring")
	if status != 0 || !strings.Contains(out, ", presumably 2.20.3 (the mapping file's notes say why)\n") || strings.Contains(out, "not applied") {
		t.Errorf("--algo ring: status %d, stderr %q:\n%s", status, errOut, out)
	}
}

// Kills F28: the plot marks only the sizes where the simulated choice
// changes, never a choice "changing" to itself.
func TestFidelityPlotMarksOnlyChangesOfChoice(t *testing.T) {
	skipInRaceRun(t, "a 16-rank log checked and drawn; TestBenchPlotOfNCCLMarksOnlyChangesOfAlgorithmOrProtocol draws under it")
	path := filepath.Join(t.TempDir(), "fid.svg")
	if status, _, errOut := commsim("fidelity", "--log", filepath.Join(shippedLogs, "vultr-b200-allreduce-16xB200.txt"), "--plot", path); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	marks := regexp.MustCompile(`>([^<>]+) → ([^<>]+)</text>`).FindAllStringSubmatch(string(svg), -1)
	if len(marks) == 0 {
		t.Fatal("no choice change marked")
	}
	for _, m := range marks {
		if m[1] == m[2] {
			t.Errorf("a mark from %s to itself", m[1])
		}
	}
}

// A topology file that names its fabric nothing is shown by the path it
// was given.
func TestTopoShowNamesANamelessFileByItsPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mine.yaml")
	if err := os.WriteFile(path, []byte("nodes:\n  - {name: g0, kind: gpu}\n  - {name: g1, kind: gpu}\nlinks:\n  - {a: g0, b: g1, bw: 10GB/s, lat: 1us}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := commsim("topo", "show", path)
	if want := "topology " + path + ": 2 gpu; 1 links (full duplex)\n"; status != 0 || !strings.HasPrefix(out, want) {
		t.Errorf("status %d, stderr %q:\n%s\nwant it to start %q", status, errOut, out, want)
	}
}
