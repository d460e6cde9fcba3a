package main

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotutil"

	"github.com/commsim/commsim/ops"
)

// fabricFile writes a topology file of the nodes ("name kind") and links
// ("a b bw") given one a line, and returns its path.
func fabricFile(t *testing.T, nodes, links []string) string {
	t.Helper()
	var y strings.Builder
	y.WriteString("name: fabric\nnodes:\n")
	for _, n := range nodes {
		f := strings.Fields(n)
		fmt.Fprintf(&y, "  - {name: %s, kind: %s}\n", f[0], f[1])
	}
	y.WriteString("links:\n")
	for _, l := range links {
		f := strings.Fields(l)
		fmt.Fprintf(&y, "  - {a: %s, b: %s, bw: %s, lat: 1us}\n", f[0], f[1], f[2])
	}
	return writeTopoYAML(t, y.String())
}

// groupedFabric draws the fabric of fabricFile grouped.
func groupedFabric(t *testing.T, nodes, links []string) *groupedDrawing {
	t.Helper()
	topo, err := resolveTopology(fabricFile(t, nodes, links))
	if err != nil {
		t.Fatal(err)
	}
	g := groupTopology(&drawing{t: topo})
	if g == nil {
		t.Fatalf("%d GPUs: want a grouped drawing", topo.NumGPUs())
	}
	return g
}

// switchesOfGPUs returns the nodes and links of switches sw0, sw1, … with
// the given numbers of GPUs (n<switch>g<k>) at 450GB/s.
func switchesOfGPUs(gpus ...int) (nodes, links []string) {
	for s, k := range gpus {
		nodes = append(nodes, fmt.Sprintf("sw%d switch", s))
		for g := range k {
			nodes = append(nodes, fmt.Sprintf("n%dg%d gpu", s, g))
			links = append(links, fmt.Sprintf("n%dg%d sw%d 450GB/s", s, g, s))
		}
	}
	return nodes, links
}

// rowTexts returns what the items of a row say, left to right.
func rowTexts(g *groupedDrawing, row int) []string {
	var out []string
	for _, it := range g.items {
		if it.row == row {
			out = append(out, it.text)
		}
	}
	return out
}

// drawGroupedSVG draws spec (with extra flags) as SVG and returns the file
// and what commsim said.
func drawGroupedSVG(t *testing.T, spec string, flags ...string) (svg []byte, said string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fabric.svg")
	status, _, errOut := commsim(append([]string{"topo", "draw", spec, "--out", path}, flags...)...)
	if status != 0 {
		t.Fatalf("%s: status %d: %s", spec, status, errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return svg, errOut
}

// textCount is how often an SVG writes exactly s as a text.
func textCount(svg []byte, s string) int {
	s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "'", "&#39;").Replace(s)
	return bytes.Count(svg, []byte(">"+s+"</text>"))
}

func TestDrawGroupsFromFortyNineGPUs(t *testing.T) {
	for spec, want := range map[string]string{"switch:48": "49 nodes drawn one by one", "switch:49": "50 nodes drawn as 1 box"} {
		_, said := drawGroupedSVG(t, spec)
		if !strings.HasSuffix(said, ", "+want+")\n") {
			t.Errorf("%s: said %q, want %q", spec, said, want)
		}
	}
}

// A GPU on two switches goes in the box of the first one it links to; the
// other is a switch of the fabric above the boxes.
func TestDrawGroupedBoxesAGPUUnderItsFirstSwitch(t *testing.T) {
	nodes, links := switchesOfGPUs(25, 25)
	nodes = append(nodes, "rail switch")
	for s := range 2 {
		for g := range 25 {
			links = append(links, fmt.Sprintf("n%dg%d rail 100GB/s", s, g))
		}
	}
	g := groupedFabric(t, nodes, links)
	if got, want := rowTexts(g, 0), []string{"switch sw0: 25 gpu", "switch sw1: 25 gpu"}; !slices.Equal(got, want) {
		t.Errorf("boxes %q, want %q", got, want)
	}
	if got := rowTexts(g, 1); !slices.Equal(got, []string{"rail"}) {
		t.Errorf("row above the boxes %q, want the rail switch", got)
	}
}

// A GPU's NICs and CPUs are drawn in its box, and the box says so.
func TestDrawGroupedPutsNICsAndCPUsInTheirGPUsBox(t *testing.T) {
	nodes, links := switchesOfGPUs(25, 25)
	nodes = append(nodes, "net switch")
	links = append(links, "sw0 net 50GB/s", "sw1 net 50GB/s")
	for s := range 2 {
		nodes = append(nodes, fmt.Sprintf("nic%d nic", s), fmt.Sprintf("cpu%d cpu", s))
		links = append(links, fmt.Sprintf("n%dg0 nic%d 50GB/s", s, s), fmt.Sprintf("n%dg1 cpu%d 64GB/s", s, s))
	}
	g := groupedFabric(t, nodes, links)
	want := []string{"switch sw0: 25 gpu, 1 nic, 1 cpu", "switch sw1: 25 gpu, 1 nic, 1 cpu"}
	if got := rowTexts(g, 0); !slices.Equal(got, want) || len(g.items) != 3 {
		t.Errorf("boxes %q and %d items, want %q and the net switch", got, len(g.items), want)
	}
}

// Boxes that differ by a NIC, or by the bandwidth of their uplink, in
// whichever order the uplink's ends are written, are not alike: the odd
// one is drawn, not collapsed into a run.
func TestDrawGroupedTellsBoxesApartByNICsAndUplinks(t *testing.T) {
	for _, odd := range []string{"nic", "uplink written up", "uplink written down"} {
		nodes, links := switchesOfGPUs(8, 8, 8, 8, 8, 8, 8, 8, 8, 8)
		nodes = append(nodes, "net switch")
		for s := range 10 {
			bw := "50GB/s"
			if s == 5 && odd != "nic" {
				bw = "100GB/s"
			}
			if odd == "uplink written down" {
				links = append(links, fmt.Sprintf("net sw%d %s", s, bw))
			} else {
				links = append(links, fmt.Sprintf("sw%d net %s", s, bw))
			}
		}
		if odd == "nic" {
			nodes = append(nodes, "nic5 nic")
			links = append(links, "n5g0 nic5 50GB/s")
		}
		row := rowTexts(groupedFabric(t, nodes, links), 0)
		if !slices.ContainsFunc(row, func(s string) bool { return strings.HasPrefix(s, "switch sw5: 8 gpu") }) || len(row) != 7 {
			t.Errorf("%s: boxes %q: want sw5 drawn apart from the alike ones", odd, row)
		}
	}
}

// Each switch of the rest of the fabric is drawn in the row of its
// distance from the boxes: one row each, none left empty.
func TestDrawGroupedRowsFollowDistanceFromTheBoxes(t *testing.T) {
	nodes, links := switchesOfGPUs(25, 25)
	nodes = append(nodes, "leaf switch", "spine switch")
	links = append(links, "sw0 leaf 50GB/s", "sw1 leaf 50GB/s", "leaf spine 100GB/s")
	g := groupedFabric(t, nodes, links)
	if g.rows != 3 || !slices.Equal(rowTexts(g, 1), []string{"leaf"}) || !slices.Equal(rowTexts(g, 2), []string{"spine"}) {
		t.Errorf("%d rows: row 1 %q, row 2 %q; want leaf above the boxes and spine above it", g.rows, rowTexts(g, 1), rowTexts(g, 2))
	}
}

// A run of the rest of the fabric says what its nodes are: switches by
// name, other kinds as nodes.
func TestDrawGroupedRunsAboveTheBoxesNameWhatTheyHold(t *testing.T) {
	nodes, links := switchesOfGPUs(25, 25)
	nodes = append(nodes, "net switch")
	links = append(links, "sw0 net 50GB/s", "sw1 net 50GB/s")
	for i := range 14 {
		nodes = append(nodes, fmt.Sprintf("ext%d nic", i))
		links = append(links, fmt.Sprintf("net ext%d 25GB/s", i))
	}
	g := groupedFabric(t, nodes, links)
	if got, want := rowTexts(g, 2), []string{"ext0", "ext1", "… 11 more nodes alike\next2 … ext12", "ext13"}; !slices.Equal(got, want) {
		t.Errorf("row of NICs %q, want %q", got, want)
	}
	g = groupTopology(&drawing{t: mustParse(t, "gb200-nvl72x16")})
	if got := rowTexts(g, 1); !slices.Contains(got, "… 69 more switches alike\nrail1 … rail69") && !slices.Contains(got, "… 69 more switches alike\nrail2 … rail70") {
		t.Errorf("gb200-nvl72x16: rails %q: want a run of 69 switches", got)
	}
}

// A row of six boxes, the most it holds, is drawn whole.
func TestDrawGroupedRowOfSixBoxesIsDrawnWhole(t *testing.T) {
	row := boxRow(t, 9, 9, 9, 9, 9, 9)
	want := []string{"switch sw0: 9 gpu", "switch sw1: 9 gpu", "switch sw2: 9 gpu", "switch sw3: 9 gpu", "switch sw4: 9 gpu", "switch sw5: 9 gpu"}
	if !slices.Equal(row, want) {
		t.Errorf("row %q, want %q", row, want)
	}
}

// Collapsing alike boxes to their first two, a run and their last is
// enough when it leaves seven items: no further collapsing.
func TestDrawGroupedKeepsTwoBoxesBeforeARunWhenTheRowFits(t *testing.T) {
	row := boxRow(t, 8, 8, 8, 8, 8, 4, 5, 6)
	want := []string{"switch sw0: 8 gpu", "switch sw1: 8 gpu", "… 2 more boxes alike\nsw2 … sw3\n16 gpu (ranks 16–31)", "switch sw4: 8 gpu",
		"switch sw5: 4 gpu", "switch sw6: 5 gpu", "switch sw7: 6 gpu"}
	if !slices.Equal(row, want) {
		t.Errorf("row %q\nwant %q", row, want)
	}
}

// Eight boxes all different are one too many: they collapse to the first
// two, a run that says they differ, and the last.
func TestDrawGroupedCollapsesEightUnlikeBoxes(t *testing.T) {
	row := boxRow(t, 5, 6, 7, 8, 9, 10, 11, 12)
	want := []string{"switch sw0: 5 gpu", "switch sw1: 6 gpu", "… 5 more boxes (not all alike)\nsw2 … sw6\n45 gpu (ranks 11–55)", "switch sw7: 12 gpu"}
	if !slices.Equal(row, want) {
		t.Errorf("row %q\nwant %q", row, want)
	}
}

// A box's GPU cells are about twice as wide as high: 4 a row at least,
// 12 at most, and never more than the GPUs.
func TestGroupedBoxCellsRowsAreAboutTwiceAsWideAsHigh(t *testing.T) {
	for n, want := range map[int]int{1: 1, 3: 3, 4: 4, 5: 4, 8: 4, 18: 6, 49: 10, 72: 12, 144: 12} {
		if got := boxCols(n); got != want {
			t.Errorf("%d GPUs: %d a row, want %d", n, got, want)
		}
	}
}

// 48 GPUs are drawn one by one, so a fabric of 48 GPUs with thousands of
// other nodes is refused at maxDrawNodes, not drawn as if grouped.
func TestDrawRefusesAHugeFabricOfFortyEightGPUs(t *testing.T) {
	nodes, links := switchesOfGPUs(48)
	for i := range maxDrawNodes {
		nodes = append(nodes, fmt.Sprintf("x%d nic", i))
		links = append(links, fmt.Sprintf("sw0 x%d 25GB/s", i))
	}
	file := fabricFile(t, nodes, links)
	status, _, errOut := commsim("topo", "draw", file, "--out", filepath.Join(t.TempDir(), "huge.svg"))
	if want := fmt.Sprintf("has %d nodes, too many to draw as SVG (the limit is %d)", len(nodes), maxDrawNodes); status != 2 || !strings.Contains(errOut, want) {
		t.Errorf("status %d, stderr %q: want 2 and %q", status, errOut, want)
	}
}

// svgLine is a straight line of an SVG: its ends, colour and dashes.
type svgLine struct {
	x0, y0, x1, y1 float64
	stroke, dashes string
}

var svgLinePath = regexp.MustCompile(`<path d="M([-0-9.]+),([-0-9.]+)L([-0-9.]+),([-0-9.]+)" style="fill:none;stroke:(#[0-9A-F]{6})[^"]*?(?:;stroke-dasharray:([0-9,.]+))?" />`)

// bundleLines returns the lines of a grouped SVG drawn before its first
// box, which are its bundles of links, in the order drawn.
func bundleLines(svg []byte) []svgLine {
	if i := bytes.Index(svg, []byte("fill:#F0F6F0")); i >= 0 {
		svg = svg[:i]
	}
	var out []svgLine
	for _, m := range svgLinePath.FindAllSubmatch(svg, -1) {
		var v [4]float64
		for k := range v {
			v[k], _ = strconv.ParseFloat(string(m[k+1]), 64)
		}
		out = append(out, svgLine{v[0], v[1], v[2], v[3], string(m[5]), string(m[6])})
	}
	return out
}

// The grouped picture's title names the fabric and what it holds, each
// bundle of several links says how many, the lines and the box of a run
// are dashed, and the legend names each kind and link class once.
func TestDrawGroupedSVGLabelsTitleBundlesAndLegend(t *testing.T) {
	svg, _ := drawGroupedSVG(t, "dgx-h100x16")
	for s, n := range map[string]int{
		"topology dgx-h100x16": 1, "128 gpu, 17 switch, 128 nic (grouped: a box is a switch with its GPUs)": 1,
		"×104": 1, "×8": 3, "×1": 0, "… 13 more boxes alike": 1, "netsw": 1,
		"switch": 1, "switch + its gpus (rank)": 1, "… alike, not drawn": 1, "50GB/s per link": 1,
		"inside boxes:": 1, "gpu-switch 450GB/s": 1, "gpu-nic 64GB/s": 1,
	} {
		if got := textCount(svg, s); got != n {
			t.Errorf("the SVG writes %q %d times, want %d", s, got, n)
		}
	}
	lines := bundleLines(svg)
	dashed := 0
	for _, l := range lines {
		if l.dashes != "" {
			dashed++
		}
	}
	if len(lines) != 4 || dashed != 1 {
		t.Errorf("%d bundle lines, %d dashed: want 4, the one to the run of 13 dashed", len(lines), dashed)
	}
	if !bytes.Contains(svg, []byte("stroke:#3C3C3C;stroke-dasharray:4,3")) {
		t.Error("the run's box is not dashed")
	}
	svg, _ = drawGroupedSVG(t, "dgx-h100x128,rail=true")
	if n := textCount(svg, "switch"); n != 1 {
		t.Errorf("dgx-h100x128: the legend names the switch %d times, want once", n)
	}
}

// A fabric of 49 GPUs on one switch is one box on a picture 7 inches wide
// at least, with no legend entry for runs it does not have.
func TestDrawGroupedSmallPictureIsSevenInchesWide(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s49.png")
	status, _, errOut := commsim("topo", "draw", "switch:49", "--out", path)
	if status != 0 || !strings.Contains(errOut, "(672×432 px, 50 nodes drawn as 1 box)") {
		t.Errorf("status %d, stderr %q: want a 672×432 px picture", status, errOut)
	}
	svg, _ := drawGroupedSVG(t, "switch:49")
	if bytes.Contains(svg, []byte("alike")) {
		t.Error("switch:49: the legend explains runs of alike boxes, and there are none")
	}
	// The box's line of text is above its cells' outlines (SVG text y is
	// negated).
	head := regexp.MustCompile(`y="-([0-9.]+)" transform="scale\(1, -1\)"\s+style="[^"]*">switch sw0: 49 gpu</text>`).FindSubmatch(svg)
	cellTop := 0.0
	for _, m := range regexp.MustCompile(`<path d="M[0-9.]+,[0-9.]+L[0-9.]+,[0-9.]+L[0-9.]+,([0-9.]+)L[0-9.]+,[0-9.]+L[0-9.]+,[0-9.]+" style="fill:none;stroke:#282828;stroke-width:0.5"`).FindAllSubmatch(svg, -1) {
		y, _ := strconv.ParseFloat(string(m[1]), 64)
		cellTop = max(cellTop, y)
	}
	if head == nil || cellTop == 0 {
		t.Fatal("switch:49: no box text or no cells in the SVG")
	}
	if y, _ := strconv.ParseFloat(string(head[1]), 64); y <= cellTop {
		t.Errorf("switch:49: the box's text at y %.2f, its cells up to %.2f: want the text above", y, cellTop)
	}
}

// The bundles of gb200-nvl72x16: those of several links labelled with
// their count, those to a run dashed whichever end the run is.
func TestDrawGroupedDashesEveryLineToARun(t *testing.T) {
	svg, _ := drawGroupedSVG(t, "gb200-nvl72x16")
	for s, n := range map[string]int{"×1": 0, "×69": 4, "×13": 3, "×897": 1} {
		if got := textCount(svg, s); got != n {
			t.Errorf("the SVG writes %q %d times, want %d", s, got, n)
		}
	}
	lines := bundleLines(svg)
	dashed := 0
	for _, l := range lines {
		if l.dashes != "" {
			dashed++
		}
	}
	if len(lines) != 20 || dashed != 8 {
		t.Errorf("%d bundle lines, %d dashed: want 20, 8 of them to or from a run", len(lines), dashed)
	}
}

// checkGroupedLayout checks that the items of g lie in its area, each as
// wide as its text (a node 0.8in at least), row by row centred and a gap
// apart, filling the area; that a box's cells lie in it below its text;
// and that a run of boxes is as high as the box it stands for.
func checkGroupedLayout(t *testing.T, name string, g *groupedDrawing) {
	t.Helper()
	const eps = 1e-9
	style := itemTextStyle(1)
	bottom, top, right := math.Inf(1), math.Inf(-1), math.Inf(-1)
	rows := map[int][]drawItem{}
	for _, it := range g.items {
		rows[it.row] = append(rows[it.row], it)
		if tw := float64(style.Width(it.text)) / 72; it.w < tw-eps || it.kind == itemNode && it.w < nodeWidthIn-eps {
			t.Errorf("%s: %q is %.3fin wide, its text %.3fin", name, it.text, it.w, tw)
		}
		if it.x-it.w/2 < -eps || it.x+it.w/2 > g.w+eps || it.y-it.h/2 < -eps || it.y+it.h/2 > g.h+eps {
			t.Errorf("%s: %q at (%.3f, %.3f) size %.3f×%.3f lies outside the %.3f×%.3f area", name, it.text, it.x, it.y, it.w, it.h, g.w, g.h)
		}
		bottom, top, right = min(bottom, it.y-it.h/2), max(top, it.y+it.h/2), max(right, it.x+it.w/2)
		if cells := it.cells(); len(cells) > 0 {
			cols := boxCols(len(cells))
			y0 := it.y + it.h/2 - boxHeadIn*float64(1+strings.Count(it.text, "\n"))
			if low := y0 - float64((len(cells)-1)/cols+1)*cellIn; low < it.y-it.h/2-eps || it.x-float64(cols)*cellIn/2 < it.x-it.w/2-eps {
				t.Errorf("%s: the cells of %q run out of the box", name, it.text)
			}
		}
		if it.kind == itemRun && it.row == 0 {
			for _, o := range g.items {
				if o.kind == itemBox && o.sig == it.sig && o.h != it.h {
					t.Errorf("%s: the run %q is %.3fin high, its alike box %.3fin", name, it.text, it.h, o.h)
				}
			}
		}
	}
	if math.Abs(bottom) > eps || math.Abs(top-g.h) > eps || math.Abs(right-g.w) > eps {
		t.Errorf("%s: items span up to %.3f×[%.3f, %.3f], the area is %.3f×%.3f", name, right, bottom, top, g.w, g.h)
	}
	for r, items := range rows {
		for i := 1; i < len(items); i++ {
			if gap := (items[i].x - items[i].w/2) - (items[i-1].x + items[i-1].w/2); gap < itemGapIn-eps {
				t.Errorf("%s: row %d: %q and %q %.3fin apart", name, r, items[i-1].text, items[i].text, gap)
			}
		}
		first, last := items[0], items[len(items)-1]
		if mid := (first.x - first.w/2 + last.x + last.w/2) / 2; math.Abs(mid-g.w/2) > eps {
			t.Errorf("%s: row %d centred at %.3f, the area at %.3f", name, r, mid, g.w/2)
		}
	}
}

// checkGroupedAnchors checks the ends of the lines: each from the top of
// its lower item to the bottom of its upper one, dashed when an end is a
// run; at a node or a run above the boxes all meet at its centre, along a
// box they spread over its middle 80%, in the order of their other ends.
func checkGroupedAnchors(t *testing.T, name string, g *groupedDrawing) {
	t.Helper()
	const eps = 1e-9
	type end struct{ at, other float64 }
	ends := make([][]end, len(g.items))
	for _, bd := range g.bundles {
		a, b := g.items[bd.a], g.items[bd.b]
		if (a.kind == itemRun || b.kind == itemRun) != bd.dashed {
			t.Errorf("%s: the line %q–%q dashed %v", name, a.text, b.text, bd.dashed)
		}
		if bd.sameRow {
			continue
		}
		if a.row >= b.row {
			t.Errorf("%s: the line %q–%q goes from row %d down to row %d", name, a.text, b.text, a.row, b.row)
		}
		ends[bd.a] = append(ends[bd.a], end{bd.ax, b.x})
		ends[bd.b] = append(ends[bd.b], end{bd.bx, a.x})
	}
	for i, e := range ends {
		it := g.items[i]
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range e {
			lo, hi = min(lo, p.at), max(hi, p.at)
			for _, q := range e {
				if p.other < q.other && p.at > q.at+eps {
					t.Errorf("%s: lines cross at %q: the end towards %.3f at %.3f, towards %.3f at %.3f", name, it.text, p.other, p.at, q.other, q.at)
				}
			}
		}
		switch {
		case len(e) == 0:
		case it.kind == itemNode || it.kind == itemRun && it.row > 0:
			if math.Abs(lo-it.x) > eps || math.Abs(hi-it.x) > eps {
				t.Errorf("%s: lines meet %q between %.3f and %.3f, not at its centre %.3f", name, it.text, lo, hi, it.x)
			}
		case len(e) > 1:
			if math.Abs(lo-(it.x-0.4*it.w)) > eps || math.Abs(hi-(it.x+0.4*it.w)) > eps {
				t.Errorf("%s: lines leave %q (%.3f wide at %.3f) from %.3f to %.3f, want its middle 80%%", name, it.text, it.w, it.x, lo, hi)
			}
		}
	}
}

// railsFabric is four switches of 13 GPUs, each linked to four rails,
// the links written from the last rail to the first.
func railsFabric() (nodes, links []string) {
	nodes, links = switchesOfGPUs(13, 13, 13, 13)
	for r := range 4 {
		nodes = append(nodes, fmt.Sprintf("rail%d switch", r))
	}
	for s := range 4 {
		for r := 3; r >= 0; r-- {
			links = append(links, fmt.Sprintf("sw%d rail%d 50GB/s", s, r))
		}
	}
	return nodes, links
}

func TestDrawGroupedLayoutKeepsItemsApartAndLinesUncrossed(t *testing.T) {
	x16 := mustParse(t, "dgx-h100x16")
	railNodes, railLinks := railsFabric()
	drawings := map[string]*groupedDrawing{
		"dgx-h100x16 with an overlay": groupTopology(&drawing{t: x16, ov: &overlay{bytes: make([]float64, 2*len(x16.Links)), busy: make([]float64, 2*len(x16.Links))}}),
		"rails":                       groupedFabric(t, railNodes, railLinks),
	}
	for _, spec := range []string{"switch:49", "gb200-nvl72x16", "dgx-h100x128,rail=true"} {
		drawings[spec] = groupTopology(&drawing{t: mustParse(t, spec)})
	}
	for name, g := range drawings {
		checkGroupedLayout(t, name, g)
		checkGroupedAnchors(t, name, g)
	}
}

// An overlay colours a bundle, and names a box's busiest link inside, by
// the longer busy direction of each link, B to A included; hot lines are drawn
// over the others.
func TestDrawGroupedOverlayCountsBothDirectionsOfALink(t *testing.T) {
	nodes, links := switchesOfGPUs(25, 25)
	nodes = append(nodes, "net switch")
	links = append(links, "sw0 net 50GB/s", "sw1 net 50GB/s")
	topo, err := resolveTopology(fabricFile(t, nodes, links))
	if err != nil {
		t.Fatal(err)
	}
	ov := &overlay{bytes: make([]float64, 2*len(topo.Links)), busy: make([]float64, 2*len(topo.Links)), most: 4096, seconds: 10240}
	for i, lk := range topo.Links {
		switch {
		case topo.Nodes[lk.A].Name == "sw0": // the hot uplink
			ov.busy[2*i+1] = 4096
		case topo.Nodes[lk.A].Name == "sw1":
			ov.busy[2*i+1] = 1024
		default:
			ov.busy[2*i+1] = 1024
		}
	}
	g := groupTopology(&drawing{t: topo, ov: ov})
	path := filepath.Join(t.TempDir(), "ov.svg")
	if err := g.writePicture(path, "svg", "overlay", io.Discard); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := textCount(svg, "busiest link inside: busy 10% of the run"); n != 2 || textCount(svg, "idle") != 1 || textCount(svg, "hot: ≥90% of the busiest's time (busy 40% of the run)") != 1 {
		t.Errorf("%d boxes say their busiest link inside was busy 10%% of the run, want 2; the legend wants hot and idle", n)
	}
	lines := bundleLines(svg)
	if len(lines) != 2 || lines[0].stroke == "#D7191C" || lines[1].stroke != "#D7191C" {
		t.Errorf("bundle lines %+v: want two, the hot one (sw0's) red and drawn last", lines)
	}
}

// A fabric many rows high is scaled down to 20 inches.
func TestDrawGroupedTallFabricFitsTwentyInches(t *testing.T) {
	nodes, links := switchesOfGPUs(25, 25)
	links = append(links, "sw0 up0 50GB/s", "sw1 up0 50GB/s")
	for i := range 14 {
		nodes = append(nodes, fmt.Sprintf("up%d switch", i))
		if i > 0 {
			links = append(links, fmt.Sprintf("up%d up%d 50GB/s", i-1, i))
		}
	}
	path := filepath.Join(t.TempDir(), "tall.png")
	status, _, errOut := commsim("topo", "draw", fabricFile(t, nodes, links), "--out", path)
	m := regexp.MustCompile(`\((\d+)×(\d+) px, 66 nodes drawn as 2 boxes and 14 others\)`).FindStringSubmatch(errOut)
	if status != 0 || m == nil {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
	if w, _ := strconv.Atoi(m[1]); w > 20*96 {
		t.Errorf("%s px wide, want 20 inches at most", m[1])
	}
	if h, _ := strconv.Atoi(m[2]); h > 20*96 || h < 19*96 {
		t.Errorf("%s px high, want it scaled to 20 inches", m[2])
	}
}

// The legend lists the four fastest bundles' bandwidths, fastest first, a
// bundle counting its fastest link; and at most four link classes inside
// boxes.
func TestDrawGroupedLegendListsTheFastestFourOfEach(t *testing.T) {
	var nodes, links []string
	nodes = append(nodes, "net switch")
	for s := range 5 {
		nodes = append(nodes, fmt.Sprintf("sw%d switch", s))
		for g := range 10 {
			nodes = append(nodes, fmt.Sprintf("n%dg%d gpu", s, g))
			links = append(links, fmt.Sprintf("n%dg%d sw%d %dGB/s", s, g, s, 100*(s+1)))
		}
	}
	links = append(links, "n0g0 net 100GB/s", "sw0 net 10GB/s", "sw1 net 20GB/s", "sw2 net 30GB/s", "sw3 net 40GB/s", "sw4 net 50GB/s")
	path := filepath.Join(t.TempDir(), "legend.svg")
	if status, _, errOut := commsim("topo", "draw", fabricFile(t, nodes, links), "--out", path); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile(`>([^<]*(?: per link|GB/s))</text>`).FindAllSubmatch(svg, -1) {
		got = append(got, string(m[1]))
	}
	want := []string{"100GB/s per link", "50GB/s per link", "40GB/s per link", "30GB/s per link",
		"gpu-switch 100GB/s", "gpu-switch 200GB/s", "gpu-switch 300GB/s", "gpu-switch 400GB/s"}
	if !slices.Equal(got, want) {
		t.Errorf("legend %q\nwant %q", got, want)
	}
}

// The chart's axes say what bench's sizes and busbw are, as nccl-tests
// has them for each collective.
func TestPlotAxisLabelsFollowNCCLTestsForEveryCollective(t *testing.T) {
	for op, want := range map[ops.Op][2]string{
		ops.AllReduce:     {"per rank", "algbw × 2(n-1)/n"},
		ops.AllGather:     {"total over all ranks", "algbw × (n-1)/n"},
		ops.ReduceScatter: {"total over all ranks", "algbw × (n-1)/n"},
		ops.Gather:        {"total over all ranks", "algbw × (n-1)/n"},
		ops.AllToAll:      {"total over all ranks", "algbw × (n-1)/n"},
		ops.Broadcast:     {"per rank", "algbw"},
		ops.Reduce:        {"per rank", "algbw"},
	} {
		if got := sizeMeaning(op); !strings.Contains(got, want[0]) {
			t.Errorf("%s: size axis %q, want bytes %s", op, got, want[0])
		}
		if got := busbwFormula(op); got != want[1] {
			t.Errorf("%s: busbw = %q, want %q", op, got, want[1])
		}
	}
	if got := choiceKey("a/128"); got != "a/128" {
		t.Errorf("choiceKey(a/128) = %q: only a count of channels (…ch) is left out", got)
	}
}

// seriesLines returns the d attribute of each line drawn in series i's
// style, in the order drawn: the busbw panel's, the time panel's, the
// legend's.
func seriesLines(svg []byte, i int) []string {
	c := color.RGBAModel.Convert(plotutil.Color(i)).(color.RGBA)
	re := regexp.MustCompile(`<path d="([^"]+)" style="fill:none;stroke:` + strings.ToUpper(hexColor(c)) + `;stroke-width:1\.6[;"]`)
	var out []string
	for _, m := range re.FindAllSubmatch(svg, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// compare --plot draws each algorithm's own numbers in its own style, in
// both panels and the legend, and marks the crossover from the one that
// was fastest to the one that overtakes it.
func TestComparePlotDrawsEachAlgorithmAndMarksTheCrossover(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cmp.svg")
	status, out, errOut := commsim("compare", "--topo", "switch:8", "--algos", "ring,rd", "-b", "8", "-e", "16MiB", "-f", "4", "--timing-only", "--plot", path)
	if status != 0 || !strings.Contains(out, "# crossover: ring overtakes rd between 512KiB and 2MiB") {
		t.Fatalf("status %d, stderr %q:\n%s", status, errOut, out)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if textCount(svg, "rd → ring") != 1 || textCount(svg, "fastest changes") != 1 || bytes.Contains(svg, []byte("ring → rd")) {
		t.Error("want the crossover marked rd → ring, and the legend to call the marks fastest changes")
	}
	ring, rd := seriesLines(svg, 0), seriesLines(svg, 1)
	if len(ring) != 3 || len(rd) != 3 {
		t.Fatalf("lines in ring's style %d, in rd's %d: want 3 each (two panels and the legend)", len(ring), len(rd))
	}
	if ring[0] == rd[0] || ring[1] == rd[1] {
		t.Error("ring and rd draw the same curve")
	}
	// The mark is a line in each panel (and a legend entry); in the right
	// third of the busbw panel its label ends left of it.
	marks := regexp.MustCompile(`<path d="M([0-9.]+),[0-9.]+L[0-9.]+,[0-9.]+" style="fill:none;stroke:#6E6E6E;stroke-dasharray:2,3" />`).FindAllSubmatch(svg, -1)
	label := regexp.MustCompile(`<text x="([0-9.]+)"[^>]*>rd → ring</text>`).FindSubmatch(svg)
	if len(marks) != 3 || label == nil {
		t.Fatalf("%d dashed grey lines, want 3 (a mark in each panel and the legend's)", len(marks))
	}
	lineX, _ := strconv.ParseFloat(string(marks[0][1]), 64)
	if x, _ := strconv.ParseFloat(string(label[1]), 64); x > lineX-20 {
		t.Errorf("the label rd → ring starts at x %g, its mark at %g: want it left of the mark", x, lineX)
	}
}

// bench --plot with --algo nccl names the tuner's choice, and marks only
// changes of algorithm or protocol, not of channels; a sweep with one
// choice says which in the series' name.
func TestBenchPlotOfNCCLMarksOnlyChangesOfAlgorithmOrProtocol(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nccl.svg")
	args := []string{"bench", "--topo", "dgx-h100x2", "--algo", "nccl", "-b", "8", "-e", "64MiB", "-f", "4", "--timing-only", "--plot", path}
	if status, _, errOut := commsim(args...); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"allreduce on dgx-h100x2: 16 ranks, f32, out of place, sim (timing-only)", "nccl (tuner's choice)",
		"tree/LL → tree/LL128", "tree/LL128 → nvlstree/Simple", "choice changes"} {
		if textCount(svg, s) != 1 {
			t.Errorf("SVG lacks %q", s)
		}
	}
	if n := bytes.Count(svg, []byte(" → ")); n != 2 {
		t.Errorf("%d marks, want the 2 changes of algorithm or protocol", n)
	}
	args[8] = "512"
	if status, _, errOut := commsim(args...); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	if svg, _ = os.ReadFile(path); textCount(svg, "nccl (tuner's choice: tree/LL)") != 1 {
		t.Error("one choice over the sweep: want the series named nccl (tuner's choice: tree/LL)")
	}
}

// A sweep of one size still spans a few powers of two on the size axis;
// an upper-case extension is read as SVG; sizes of 0 bytes are left out.
func TestBenchPlotOfOneSizeWidensTheSizeAxis(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ b, file string }{{"1K", "ONE.SVG"}, {"0", "zero.svg"}} {
		path := filepath.Join(dir, c.file)
		if status, _, errOut := commsim("bench", "--topo", "switch:8", "-b", c.b, "-e", "1K", "--timing-only", "--plot", path); status != 0 || errOut != "commsim: wrote "+path+"\n" {
			t.Fatalf("-b %s: status %d, stderr %q", c.b, status, errOut)
		}
		svg, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(svg, []byte("<?xml")) {
			t.Fatalf("%s: not an SVG (%v)", c.file, err)
		}
		if c.b == "1K" && (textCount(svg, "512B") == 0 || textCount(svg, "2KiB") == 0) {
			t.Errorf("one size of 1KiB: want the axis to span 512B to 2KiB")
		}
		if c.b == "0" && textCount(svg, "0B") != 0 {
			t.Error("a size of 0 bytes drawn on the log axis")
		}
	}
}

// The panels: sizes padded on a log axis, busbw from 0 with headroom over
// the top, time on a padded log axis leaving out (and counting) the
// times of 0.
func TestPlotPanelsPadTheirAxes(t *testing.T) {
	var fast, idle chartSeries
	fast.add(1024, result{busbw: 10, timeUS: 5})
	fast.add(4096, result{busbw: 20, timeUS: 50})
	idle.add(1024, result{})
	idle.add(4096, result{})
	ch := &sweepChart{series: []chartSeries{fast, idle}}
	bw, err := ch.panel(1024, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9*max(1, math.Abs(b)) }
	if !near(bw.X.Min, 1024/1.25) || !near(bw.X.Max, 4096*1.25) || bw.Y.Min != 0 || !near(bw.Y.Max, 20*1.08) {
		t.Errorf("busbw panel x %g..%g, y %g..%g: want 819.2..5120 and 0..21.6", bw.X.Min, bw.X.Max, bw.Y.Min, bw.Y.Max)
	}
	tm, err := ch.panel(1024, 4096, true)
	if err != nil {
		t.Fatalf("a series of 0 µs only: %v", err)
	}
	if _, log := tm.Y.Scale.(plot.LogScale); !log || !near(tm.Y.Min, 5/1.5) || !near(tm.Y.Max, 75) || !strings.Contains(tm.Title.Text, "2 point(s) of 0 µs not drawn") {
		t.Errorf("time panel y %g..%g (log %v), title %q: want log 3.33..75, 2 points not drawn", tm.Y.Min, tm.Y.Max, log, tm.Title.Text)
	}
}

// The legend's column is 1.6in at least, and room for the thumbnail and
// the longest name, the marks' included.
func TestPlotLegendColumnFitsItsLongestName(t *testing.T) {
	short := &sweepChart{series: []chartSeries{{name: "a"}}}
	if got := short.legendWidth(short.legend()); got != 1.6 {
		t.Errorf("short names: %gin, want 1.6", got)
	}
	long := &sweepChart{series: []chartSeries{{name: "a"}}, marksName: "simulated choice changes, and a long name besides"}
	long.marks = []chartMark{{lo: 1, hi: 2, from: "x", to: "y"}}
	leg := long.legend()
	if got, need := long.legendWidth(leg)*72, float64(leg.TextStyle.Width(long.marksName)+leg.ThumbnailWidth); got < need {
		t.Errorf("legend column %.1fpt, the marks' entry needs %.1fpt", got, need)
	}
	path := filepath.Join(t.TempDir(), "auto.svg")
	if status, _, errOut := commsim("bench", "--topo", "switch:8", "-b", "8", "-e", "4MiB", "-f", "4", "--timing-only", "--plot", path); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	auto := &sweepChart{series: []chartSeries{{name: "auto (cost model's choice)"}}, marksName: "choice changes"}
	want := (chartPanels + auto.legendWidth(auto.legend())) * 72
	m := regexp.MustCompile(`<svg width="([0-9.]+)pt"`).FindSubmatch(svg)
	if w, _ := strconv.ParseFloat(string(m[1]), 64); m == nil || math.Abs(w-want) > 0.01 {
		t.Errorf("the chart is %spt wide, want %.2fpt: the panels and a legend column as wide as its names", m[1], want)
	}
}

// The busbw panel keeps headroom for the marks' labels, on up to three
// staggered levels, and still has a height when every busbw is 0.
func TestPlotBusbwPanelKeepsRoomForMarkLabels(t *testing.T) {
	var sr chartSeries
	sr.add(1024, result{busbw: 10, timeUS: 5})
	sr.add(4096, result{busbw: 20, timeUS: 50})
	for marks, want := range map[int]float64{0: 1.08, 2: 1.26, 5: 1.35} {
		ch := &sweepChart{series: []chartSeries{sr}, marks: make([]chartMark, marks)}
		for i := range ch.marks {
			ch.marks[i] = chartMark{lo: 1024, hi: 4096, from: "a", to: "b"}
		}
		p, err := ch.panel(1024, 4096, false)
		if err != nil || math.Abs(p.Y.Max-20*want) > 1e-9 {
			t.Errorf("%d marks: busbw axis up to %g (%v), want %g", marks, p.Y.Max, err, 20*want)
		}
	}
	var idle chartSeries
	idle.add(1024, result{})
	p, err := (&sweepChart{series: []chartSeries{idle}}).panel(1024, 1024, false)
	if err != nil || p.Y.Max != 1.08 {
		t.Errorf("busbw of 0 only: axis up to %g (%v), want 1.08", p.Y.Max, err)
	}
}

// Size ticks over 50 doublings and more are labelled every 20th; busbw
// ticks label only gonum's major ones; markers grow with the series.
func TestPlotTicksOfWideRangesAndMarkerSizes(t *testing.T) {
	want := []string{formatBytes(1), formatBytes(1 << 20), formatBytes(1 << 40), formatBytes(1 << 60)}
	if got := tickLabels(byteTicks{}, 1, 1<<60); !slices.Equal(got, want) {
		t.Errorf("1B..2^60B: %q, want %q", got, want)
	}
	if got, want := len(tickLabels(plainTicks{}, 0, 500)), len(tickLabels(plot.DefaultTicks{}, 0, 500)); got != want || want == 0 {
		t.Errorf("busbw 0..500: %d labels, gonum's default %d", got, want)
	}
	_, g0 := seriesStyle(0)
	_, g1 := seriesStyle(1)
	_, g2 := seriesStyle(2)
	if !(g0.Radius < g1.Radius && g1.Radius < g2.Radius) {
		t.Errorf("marker radii %v %v %v: want them growing", g0.Radius, g1.Radius, g2.Radius)
	}
}

// The busbw panel is on the left, the time panel on the right.
func TestPlotBusbwPanelIsLeftOfTheTimePanel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.svg")
	if status, _, errOut := commsim("bench", "--topo", "switch:8", "--algo", "ring", "-b", "8", "-e", "1MiB", "-f", "4", "--timing-only", "--plot", path); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	x := func(title string) float64 {
		m := regexp.MustCompile(`<text x="([0-9.]+)"[^>]*>` + regexp.QuoteMeta(title) + `</text>`).FindSubmatch(svg)
		if m == nil {
			t.Fatalf("no panel titled %q", title)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	if bw, tm := x("bus bandwidth"), x("time per collective (log-log)"); bw >= tm {
		t.Errorf("busbw panel's title at x %g, time panel's at %g: want busbw left", bw, tm)
	}
}

// A bundle of several links is as hot as its hottest link, wherever that
// link is listed among them.
func TestDrawGroupedBundleIsAsHotAsItsHottestLink(t *testing.T) {
	nodes, links := switchesOfGPUs(25, 25)
	nodes = append(nodes, "net switch")
	links = append(links, "sw0 net 50GB/s", "n0g0 net 50GB/s", "sw1 net 50GB/s")
	topo, err := resolveTopology(fabricFile(t, nodes, links))
	if err != nil {
		t.Fatal(err)
	}
	ov := &overlay{bytes: make([]float64, 2*len(topo.Links)), busy: make([]float64, 2*len(topo.Links)), most: 4096, seconds: 10240}
	var uplinks []int
	for i, lk := range topo.Links {
		if a := topo.Nodes[lk.A].Name; (a == "sw0" || a == "n0g0") && topo.Nodes[lk.B].Name == "net" {
			uplinks = append(uplinks, i)
		}
	}
	if len(uplinks) != 2 {
		t.Fatalf("sw0's box has %d links to net, want 2", len(uplinks))
	}
	ov.busy[2*uplinks[0]] = 4096 // the first of the two is the hot one
	ov.busy[2*uplinks[1]+1] = 1024
	g := groupTopology(&drawing{t: topo, ov: ov})
	for _, bd := range g.bundles {
		if slices.Contains(bd.links, uplinks[0]) {
			if len(bd.links) != 2 || bd.heat != 4096 {
				t.Errorf("sw0's box's bundle to net: links %v, heat %g; want both and the hot one's 4096", bd.links, bd.heat)
			}
			return
		}
	}
	t.Fatal("no bundle holds sw0's box's links to net")
}
