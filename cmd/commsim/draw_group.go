package main

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/commsim/commsim/topology"
)

// A fabric of many GPUs drawn GPU by GPU is only ink: gb200-nvl72's 72
// spokes or dgx-h100x128's 3,000 links leave no room for a label. Such a
// fabric is drawn grouped instead: each switch with the GPUs that hang
// off it (and their NICs and CPUs) is one box, its GPUs a grid of
// numbered cells; the rest of the fabric (rail, leaf, spine switches) sits
// in rows above, by distance from the boxes; the links between two of
// these are one line. Runs of alike boxes (or switches) collapse into one
// "… N more alike" so that the picture stays a few inches wide.
const (
	// groupAboveGPUs: fabrics with more GPUs, all on switches, are grouped.
	groupAboveGPUs = 48
	maxRowBoxes    = 6   // boxes in a row before alike ones collapse
	maxRowNodes    = 12  // switches (or other nodes) in a row, likewise
	maxBoxCells    = 144 // a box with more GPUs gives their ranks, not cells
)

// Geometry of a grouped drawing, in inches.
const (
	cellIn      = 0.3  // a GPU cell
	boxPadIn    = 0.12 // inside a box, around its cells
	boxHeadIn   = 0.34 // a box's line of text
	itemGapIn   = 0.4  // between items of a row
	rowGapIn    = 1.5  // between rows, for the links
	nodeWidthIn = 0.8  // a single node and its label
	nodeHighIn  = 0.45
)

type itemKind int

const (
	itemBox  itemKind = iota // a switch with its GPUs
	itemNode                 // one node of the rest of the fabric
	itemRun                  // alike items, collapsed
)

// drawItem is one thing drawn: a box, a node, or a run of alike ones.
type drawItem struct {
	kind  itemKind
	nodes []int // the topology nodes it shows
	gpus  []int // a box's GPUs, in rank order
	home  int   // a box's switch; a node's node
	sig   string
	count int // items a run stands for
	names string
	mixed bool   // a run of items that are not all alike
	text  string // what is written on it
	// inside is, with an overlay, the longest a link inside the item was
	// busy one way (seconds).
	inside float64
	row    int
	x, y   float64 // centre
	w, h   float64
}

// bundle is every link between two items, drawn as one line.
type bundle struct {
	a, b    int // items, a in the lower row (or left)
	links   []int
	bw      float64 // the fastest of its links, per direction
	heat    float64 // the longest one of its links was busy one way (seconds)
	ax, bx  float64 // anchors, set by place
	dashed  bool    // an end is a run
	aTop    bool
	sameRow bool
}

// groupedDrawing is a drawing's grouped picture, laid out in inches.
type groupedDrawing struct {
	d       *drawing
	items   []drawItem
	itemOf  []int // per topology node
	bundles []bundle
	rows    int
	w, h    float64 // the drawing area: rows, without title and legend
	gpuRank map[int]int
}

// homeSwitches returns each GPU's home, the first switch among its links,
// or false when some GPU hangs off no switch (a ring, a mesh, a torus:
// those keep their detailed drawing).
func homeSwitches(t *topology.Topology, adj [][]int) (map[int]int, bool) {
	home := map[int]int{}
	for _, g := range t.GPUs() {
		i := slices.IndexFunc(adj[g], func(u int) bool { return t.Nodes[u].Kind == topology.Switch })
		if i < 0 {
			return nil, false
		}
		home[g] = adj[g][i]
	}
	return home, true
}

func adjacency(t *topology.Topology) [][]int {
	adj := make([][]int, len(t.Nodes))
	for _, lk := range t.Links {
		adj[lk.A] = append(adj[lk.A], lk.B)
		adj[lk.B] = append(adj[lk.B], lk.A)
	}
	return adj
}

// groupable says whether t is drawn grouped: it has more GPUs than can be
// drawn one by one, all on switches.
func groupable(t *topology.Topology) bool {
	if t.NumGPUs() <= groupAboveGPUs {
		return false
	}
	_, ok := homeSwitches(t, adjacency(t))
	return ok
}

// groupTopology returns the grouped picture of t, or nil when t is not
// groupable.
func groupTopology(d *drawing) *groupedDrawing {
	t := d.t
	if t.NumGPUs() <= groupAboveGPUs {
		return nil
	}
	adj := adjacency(t)
	home, ok := homeSwitches(t, adj)
	if !ok {
		return nil
	}
	g := &groupedDrawing{d: d, itemOf: make([]int, len(t.Nodes)), gpuRank: map[int]int{}}
	for v := range g.itemOf {
		g.itemOf[v] = -1
	}
	boxOf := map[int]int{} // home switch -> item
	for rank, gpu := range t.GPUs() {
		g.gpuRank[gpu] = rank
		sw := home[gpu]
		b, ok := boxOf[sw]
		if !ok {
			b = len(g.items)
			boxOf[sw] = b
			g.items = append(g.items, drawItem{kind: itemBox, home: sw, nodes: []int{sw}})
			g.itemOf[sw] = b
		}
		g.items[b].gpus = append(g.items[b].gpus, gpu)
		g.items[b].nodes = append(g.items[b].nodes, gpu)
		g.itemOf[gpu] = b
	}
	for v, n := range t.Nodes { // NICs and CPUs go in the box of their GPU
		if g.itemOf[v] >= 0 || (n.Kind != topology.NIC && n.Kind != topology.CPU) {
			continue
		}
		if i := slices.IndexFunc(adj[v], func(u int) bool { return t.Nodes[u].Kind == topology.GPU }); i >= 0 {
			b := g.itemOf[adj[v][i]]
			g.items[b].nodes = append(g.items[b].nodes, v)
			g.itemOf[v] = b
		}
	}
	// The rest, row by row by breadth-first distance from the boxes;
	// whatever is not connected to them goes in a row of its own on top.
	depth := make([]int, len(t.Nodes))
	var queue []int
	for v := range depth {
		if depth[v] = -1; g.itemOf[v] >= 0 {
			depth[v], queue = 0, append(queue, v)
		}
	}
	for ; len(queue) > 0; queue = queue[1:] {
		for _, u := range adj[queue[0]] {
			if depth[u] < 0 {
				depth[u], queue = depth[queue[0]]+1, append(queue, u)
			}
		}
	}
	top := slices.Max(depth)
	for v, dv := range depth {
		if g.itemOf[v] < 0 {
			if dv < 0 {
				dv = top + 1
			}
			g.items = append(g.items, drawItem{kind: itemNode, home: v, nodes: []int{v}, row: dv})
			g.itemOf[v] = len(g.items) - 1
		}
	}
	for _, it := range g.items {
		g.rows = max(g.rows, it.row+1)
	}
	g.signatures()
	g.collapse()
	g.bundle()
	g.place()
	return g
}

// signatures set what must agree for items to collapse into one run: a
// box's GPUs, NICs and CPUs and its links out by bandwidth; a node's kind
// and its links by bandwidth.
func (g *groupedDrawing) signatures() {
	t := g.d.t
	out := make([][]string, len(g.items))
	for _, lk := range t.Links {
		if a, b := g.itemOf[lk.A], g.itemOf[lk.B]; a != b {
			bw := topology.FormatBandwidth(lk.BW)
			out[a], out[b] = append(out[a], bw), append(out[b], bw)
		}
	}
	for i := range g.items {
		it := &g.items[i]
		kinds := map[topology.Kind]int{}
		for _, v := range it.nodes {
			kinds[t.Nodes[v].Kind]++
		}
		slices.Sort(out[i])
		it.sig = fmt.Sprintf("%v %d %d %d %d|%s", it.kind, kinds[topology.GPU], kinds[topology.NIC], kinds[topology.CPU], kinds[topology.Switch],
			strings.Join(out[i], ","))
	}
}

// collapse replaces, in each row with too many items, every run of more
// than three alike items by its first two, a run item, and its last (two
// show how ranks follow on); if the row is still too long, by its first,
// a run and its last; a row still too long keeps its first two and last
// items and collapses the rest whatever they are.
func (g *groupedDrawing) collapse() {
	var kept []drawItem
	remap := make([]int, len(g.items))
	for row := range g.rows {
		var idx []int
		for i, it := range g.items {
			if it.row == row {
				idx = append(idx, i)
			}
		}
		limit := maxRowNodes
		if row == 0 {
			limit = maxRowBoxes
		}
		var runs [][]int // consecutive alike items
		for _, i := range idx {
			if n := len(runs); n > 0 && g.items[runs[n-1][0]].sig == g.items[i].sig {
				runs[n-1] = append(runs[n-1], i)
			} else {
				runs = append(runs, []int{i})
			}
		}
		if len(idx) <= limit {
			runs = [][]int{idx}
		}
		var groups [][]int // each becomes one item: a single one, or a run
		for keep := 2; keep >= 1 && (groups == nil || len(groups) > limit+1); keep-- {
			groups = groups[:0]
			for _, r := range runs {
				if len(idx) > limit && len(r) > keep+2 {
					groups = append(groups, r[:1], r[1:keep], r[keep:len(r)-1], r[len(r)-1:])
					continue
				}
				for _, i := range r {
					groups = append(groups, []int{i})
				}
			}
		}
		groups = slices.DeleteFunc(groups, func(grp []int) bool { return len(grp) == 0 })
		if len(groups) > limit+1 { // still too long: alike or not
			mid := slices.Concat(groups[2 : len(groups)-1]...)
			groups = [][]int{groups[0], groups[1], mid, groups[len(groups)-1]}
		}
		for _, grp := range groups {
			if len(grp) == 1 {
				remap[grp[0]] = len(kept)
				kept = append(kept, g.items[grp[0]])
				continue
			}
			run := drawItem{kind: itemRun, row: row, count: len(grp), sig: g.items[grp[0]].sig, home: -1}
			if slices.ContainsFunc(grp, func(i int) bool { return g.items[i].sig != run.sig }) {
				run.sig, run.mixed = "", true
			}
			for _, i := range grp {
				run.nodes = append(run.nodes, g.items[i].nodes...)
				run.gpus = append(run.gpus, g.items[i].gpus...)
				remap[i] = len(kept)
			}
			first, last := g.items[grp[0]], g.items[grp[len(grp)-1]]
			run.names = g.itemName(first) + " … " + g.itemName(last)
			kept = append(kept, run)
		}
	}
	for v, i := range g.itemOf {
		g.itemOf[v] = remap[i]
	}
	g.items = kept
}

// itemName names a box by its switch and a node by itself.
func (g *groupedDrawing) itemName(it drawItem) string {
	return g.d.t.Nodes[it.home].Name
}

// bundle gathers the links between items.
func (g *groupedDrawing) bundle() {
	at := map[[2]int]int{}
	for i, lk := range g.d.t.Links {
		a, b := g.itemOf[lk.A], g.itemOf[lk.B]
		if a == b {
			if g.d.ov != nil {
				g.items[a].inside = max(g.items[a].inside, g.d.ov.busy[2*i], g.d.ov.busy[2*i+1])
			}
			continue
		}
		if g.items[a].row > g.items[b].row || (g.items[a].row == g.items[b].row && a > b) {
			a, b = b, a
		}
		k, ok := at[[2]int{a, b}]
		if !ok {
			k = len(g.bundles)
			at[[2]int{a, b}] = k
			g.bundles = append(g.bundles, bundle{a: a, b: b, sameRow: g.items[a].row == g.items[b].row,
				dashed: g.items[a].kind == itemRun || g.items[b].kind == itemRun})
		}
		bd := &g.bundles[k]
		bd.links = append(bd.links, i)
		bd.bw = max(bd.bw, lk.BW)
		if g.d.ov != nil {
			bd.heat = max(bd.heat, g.d.ov.busy[2*i], g.d.ov.busy[2*i+1])
		}
	}
}

// cells are the GPUs a box draws one by one: all of them, or none when
// they are too many to number legibly.
func (it drawItem) cells() []int {
	if it.kind != itemBox || len(it.gpus) > maxBoxCells {
		return nil
	}
	return it.gpus
}

// boxCols is how many GPU cells a box's row holds: about twice as wide as
// high, 4 at least, 12 at most.
func boxCols(n int) int {
	return min(n, max(4, min(12, int(math.Ceil(math.Sqrt(2*float64(n)))))))
}

// place sizes the items, sets them in rows (boxes at the bottom, each row
// centred), and spreads each item's link ends along its edge in the order
// of the items at their other ends, so that lines cross as little as
// they can.
func (g *groupedDrawing) place() {
	for i := range g.items {
		it := &g.items[i]
		it.text = g.itemText(*it)
		textW := float64(itemTextStyle(1).Width(it.text))/72 + 0.3
		switch it.kind {
		case itemBox:
			cols, rows := boxCols(len(it.cells())), 0
			if cols > 0 {
				rows = (len(it.cells()) + cols - 1) / cols
			}
			it.w = max(textW, float64(cols)*cellIn+2*boxPadIn)
			it.h = boxHeadIn*float64(1+strings.Count(it.text, "\n")) + float64(rows)*cellIn + boxPadIn
		case itemRun:
			it.w, it.h = textW, nodeHighIn+0.2
			if it.row == 0 {
				for _, o := range g.items {
					if o.kind == itemBox && o.sig == it.sig {
						it.w, it.h = max(textW, o.w), o.h
						break
					}
				}
			}
		default:
			it.w, it.h = max(nodeWidthIn, textW), nodeHighIn
		}
	}
	rowW := make([]float64, g.rows)
	rowH := make([]float64, g.rows)
	for _, it := range g.items {
		if rowW[it.row] > 0 {
			rowW[it.row] += itemGapIn
		}
		rowW[it.row] += it.w
		rowH[it.row] = max(rowH[it.row], it.h)
	}
	g.w = slices.Max(rowW)
	y := 0.0
	rowY := make([]float64, g.rows)
	for r := range g.rows {
		rowY[r] = y + rowH[r]/2
		y += rowH[r] + rowGapIn
	}
	g.h = y - rowGapIn
	x := make([]float64, g.rows)
	for r := range x {
		x[r] = (g.w - rowW[r]) / 2
	}
	for i := range g.items {
		it := &g.items[i]
		it.x, it.y = x[it.row]+it.w/2, rowY[it.row]
		x[it.row] += it.w + itemGapIn
	}
	// Link ends: along the top of the lower item and the bottom of the
	// upper one, ordered by where the other end is.
	ends := make([][]int, len(g.items)) // bundle*2 (+1 for b)
	for k, bd := range g.bundles {
		if bd.sameRow {
			continue
		}
		ends[bd.a] = append(ends[bd.a], 2*k)
		ends[bd.b] = append(ends[bd.b], 2*k+1)
	}
	for i, e := range ends {
		other := func(end int) float64 {
			bd := g.bundles[end/2]
			if end%2 == 0 {
				return g.items[bd.b].x
			}
			return g.items[bd.a].x
		}
		slices.SortStableFunc(e, func(p, q int) int { return cmp.Compare(other(p), other(q)) })
		it := g.items[i]
		span := it.w * 0.8
		if it.kind == itemNode || (it.kind == itemRun && it.row > 0) {
			span = 0 // a node's links meet at it
		}
		for j, end := range e {
			ax := it.x
			if len(e) > 1 {
				ax += span * (float64(j)/float64(len(e)-1) - 0.5)
			}
			if end%2 == 0 {
				g.bundles[end/2].ax = ax
			} else {
				g.bundles[end/2].bx = ax
			}
		}
	}
}

// itemText is what an item says: a box its switch and what hangs off it,
// a run how many it stands for, a node its name.
func (g *groupedDrawing) itemText(it drawItem) string {
	t := g.d.t
	switch it.kind {
	case itemNode:
		return t.Nodes[it.home].Name
	case itemRun:
		what := plural(it.count, "box", "boxes")
		if it.row > 0 {
			what = plural(it.count, t.Nodes[it.nodes[0]].Kind.String(), t.Nodes[it.nodes[0]].Kind.String()+"es")
			if t.Nodes[it.nodes[0]].Kind != topology.Switch {
				what = plural(it.count, "node", "nodes")
			}
		}
		alike := "alike"
		if it.mixed {
			alike = "(not all alike)"
		}
		lines := fmt.Sprintf("… %d more %s %s\n%s", it.count, what, alike, it.names)
		if len(it.gpus) > 0 {
			lines += fmt.Sprintf("\n%d gpu (ranks %d–%d)", len(it.gpus), g.gpuRank[it.gpus[0]], g.gpuRank[it.gpus[len(it.gpus)-1]])
		}
		return lines
	}
	kinds := map[topology.Kind]int{}
	for _, v := range it.nodes {
		kinds[t.Nodes[v].Kind]++
	}
	head := fmt.Sprintf("switch %s: %d gpu", t.Nodes[it.home].Name, len(it.gpus))
	for _, k := range []topology.Kind{topology.NIC, topology.CPU} {
		if kinds[k] > 0 {
			head += fmt.Sprintf(", %d %s", kinds[k], k)
		}
	}
	if it.cells() == nil {
		head += fmt.Sprintf("\nranks %d–%d", g.gpuRank[it.gpus[0]], g.gpuRank[it.gpus[len(it.gpus)-1]])
	}
	if g.d.ov != nil {
		head += "\nbusiest link inside: " + g.d.ov.share(it.inside)
	}
	return head
}

// itemTextStyle is the text of items, 10pt at scale 1.
func itemTextStyle(scale float64) draw.TextStyle {
	return draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(10*scale)), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YTop}
}

// Canvas of a grouped picture, in inches: title above, legend right.
const (
	groupMarginIn = 0.4
	groupLegendIn = 2.4
	groupMaxIn    = 20 // the longest side; a wider layout is scaled down
)

// size is the picture's width and height in inches, and the scale of the
// layout in it (1 unless the layout is too wide).
func (g *groupedDrawing) size(titleLines int) (w, h, scale float64) {
	titleIn := 0.3 * float64(titleLines+1)
	scale = min(1, (groupMaxIn-groupLegendIn-2*groupMarginIn)/g.w, (groupMaxIn-titleIn-2*groupMarginIn)/max(g.h, 1e-9))
	w = max(7, g.w*scale+2*groupMarginIn+groupLegendIn)
	h = max(4.5, g.h*scale+2*groupMarginIn+titleIn, 0.22*float64(g.legendEntries())+titleIn+groupMarginIn)
	return w, h, scale
}

func (g *groupedDrawing) legendEntries() int { return g.legend().n }

// legend explains the glyphs, boxes and line widths (or colours).
func (g *groupedDrawing) legend() *groupedLegend {
	l := &groupedLegend{}
	seen := map[topology.Kind]bool{}
	for _, it := range g.items {
		if it.kind == itemNode && !seen[g.d.t.Nodes[it.home].Kind] {
			k := g.d.t.Nodes[it.home].Kind
			seen[k] = true
			l.add(k.String(), glyphThumb(nodeGlyph(k, 4.5)))
		}
	}
	l.add("switch + its gpus (rank)", boxThumb{})
	if slices.ContainsFunc(g.items, func(it drawItem) bool { return it.kind == itemRun }) {
		l.add("… alike, not drawn", boxThumb{dashed: true})
	}
	if g.d.ov != nil {
		l.add(g.d.ov.hotLegend(), lineThumb{Color: color.RGBA{215, 25, 28, 255}, Width: vg.Points(4.6)})
		l.add("less: blue to orange", rampThumb{})
		l.add("idle", lineThumb{Color: color.RGBA{204, 204, 204, 255}, Width: vg.Points(0.75)})
	} else {
		var bws []float64
		for _, bd := range g.bundles {
			if !slices.Contains(bws, bd.bw) {
				bws = append(bws, bd.bw)
			}
		}
		slices.SortFunc(bws, func(a, b float64) int { return cmp.Compare(b, a) })
		for _, bw := range bws[:min(4, len(bws))] {
			width, col, _ := g.d.styleOf(bw, 0)
			l.add(topology.FormatBandwidth(bw)+" per link", lineThumb{Color: col, Width: vg.Points(width)})
		}
	}
	for _, s := range g.insideClasses() {
		l.add(s, nil)
	}
	return l
}

// insideClasses names the link classes drawn inside boxes, which the box
// does not show one by one: "in a box: gpu-switch 450GB/s".
func (g *groupedDrawing) insideClasses() []string {
	t := g.d.t
	var out []string
	for _, lk := range t.Links {
		if g.itemOf[lk.A] != g.itemOf[lk.B] {
			continue
		}
		a, b := t.Nodes[lk.A].Kind.String(), t.Nodes[lk.B].Kind.String()
		if a > b {
			a, b = b, a
		}
		s := fmt.Sprintf("%s-%s %s", a, b, topology.FormatBandwidth(lk.BW))
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) > 0 {
		out = append([]string{"inside boxes:"}, out[:min(4, len(out))]...)
	}
	return out
}

type groupedLegend struct {
	l plot.Legend
	n int
}

func (l *groupedLegend) add(name string, thumb plot.Thumbnailer) {
	if l.n == 0 {
		l.l = plot.NewLegend()
		l.l.Top, l.l.Left = true, true
		l.l.TextStyle.Font.Size = vg.Points(10)
		l.l.ThumbnailWidth = vg.Points(26)
		l.l.Padding = vg.Points(4)
	}
	l.n++
	if thumb == nil {
		l.l.Add(name)
		return
	}
	l.l.Add(name, thumb)
}

type boxThumb struct{ dashed bool }

func (b boxThumb) Thumbnail(c *draw.Canvas) {
	sty := draw.LineStyle{Color: color.RGBA{60, 60, 60, 255}, Width: vg.Points(1)}
	if b.dashed {
		sty.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
	}
	r := vg.Rectangle{Min: vg.Point{X: c.Min.X + 2, Y: c.Min.Y + 1}, Max: vg.Point{X: c.Max.X - 2, Y: c.Max.Y - 1}}
	if !b.dashed {
		c.FillPolygon(color.RGBA{240, 246, 240, 255}, rectPoints(r))
		cell := nodeGlyph(topology.GPU, 3)
		c.DrawGlyphNoClip(cell, c.Center())
	}
	c.StrokeLines(sty, append(rectPoints(r), r.Min))
}

func rectPoints(r vg.Rectangle) []vg.Point {
	return []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}}
}

// writePicture draws the grouped picture and says on stderr what it wrote.
func (g *groupedDrawing) writePicture(file, format, title string, stderr io.Writer) error {
	titleLines := 1 + strings.Count(title, "\n")
	w, h, scale := g.size(titleLines)
	cw, err := draw.NewFormattedCanvas(vg.Length(w)*vg.Inch, vg.Length(h)*vg.Inch, format)
	if err != nil {
		return err
	}
	c := draw.New(cw)
	c.FillPolygon(color.White, rectPoints(c.Rectangle))
	ts := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(12)), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YTop}
	c.FillText(ts, vg.Point{X: c.Max.X / 2, Y: c.Max.Y - 0.2*vg.Inch}, title)

	// Layout inches to canvas points: the rows' area sits below the
	// title, left of the legend; row 0 at the bottom.
	areaW := w - groupLegendIn - 2*groupMarginIn
	ox := groupMarginIn + (areaW-g.w*scale)/2
	titleIn := 0.3 * float64(titleLines+1)
	oy := groupMarginIn + (h-titleIn-2*groupMarginIn-g.h*scale)/2
	at := func(x, y float64) vg.Point {
		return vg.Point{X: vg.Length(ox+x*scale) * vg.Inch, Y: vg.Length(oy+y*scale) * vg.Inch}
	}
	g.drawBundles(&c, at)
	for _, it := range g.items {
		g.drawItem(&c, it, at, scale)
	}
	leg := g.legend()
	leg.l.Draw(draw.Crop(c, vg.Length(w-groupLegendIn)*vg.Inch, -0.1*vg.Inch, groupMarginIn*vg.Inch, -vg.Length(0.3*float64(titleLines+1))*vg.Inch))
	err = writeFileAtomic(file, func(wr io.Writer) error {
		_, err := cw.WriteTo(wr)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "commsim: wrote %s (%s, %s)\n", file, pictureSize(w, h, format), g.drawnAs())
	return nil
}

// drawnAs says how many shapes stand for the fabric's nodes: "2185 nodes
// drawn as 4 boxes and 9 others" (a box being GPUs with their switch or a
// run of alike ones, the others single nodes or runs of them).
func (g *groupedDrawing) drawnAs() string {
	boxes := 0
	for _, it := range g.items {
		if len(it.gpus) > 0 {
			boxes++
		}
	}
	s := fmt.Sprintf("%d nodes drawn as %d %s", len(g.d.t.Nodes), boxes, plural(boxes, "box", "boxes"))
	if others := len(g.items) - boxes; others > 0 {
		s += fmt.Sprintf(" and %d %s", others, plural(others, "other", "others"))
	}
	return s
}

// pictureSize is a picture's size as its format counts it: pixels for
// PNG (gonum's 96 dpi), points for SVG.
func pictureSize(w, h float64, format string) string {
	if format == "png" {
		return fmt.Sprintf("%d×%d px", int(math.Round(w*96)), int(math.Round(h*96)))
	}
	return fmt.Sprintf("%d×%d pt", int(math.Round(w*72)), int(math.Round(h*72)))
}

func (g *groupedDrawing) drawBundles(c *draw.Canvas, at func(x, y float64) vg.Point) {
	label := draw.TextStyle{Color: color.RGBA{40, 40, 40, 255}, Font: font.From(plot.DefaultFont, vg.Points(8)), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YCenter}
	for pass := range 2 { // hot on top
		for _, bd := range g.bundles {
			width, col, hot := g.d.styleOf(bd.bw, bd.heat)
			if hot != (pass == 1) {
				continue
			}
			a, b := g.items[bd.a], g.items[bd.b]
			var p, q vg.Point
			if bd.sameRow {
				left, right := a, b
				if left.x > right.x {
					left, right = right, left
				}
				p, q = at(left.x+left.w/2, left.y), at(right.x-right.w/2, right.y)
			} else {
				p, q = at(bd.ax, a.y+a.h/2), at(bd.bx, b.y-b.h/2)
				if b.kind == itemNode {
					q = at(bd.bx, b.y-0.12)
				}
			}
			sty := draw.LineStyle{Color: col, Width: vg.Points(width)}
			if bd.dashed {
				sty.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			c.StrokeLine2(sty, p.X, p.Y, q.X, q.Y)
			if n := len(bd.links); n > 1 {
				mid := vg.Point{X: p.X + (q.X-p.X)*0.3, Y: p.Y + (q.Y-p.Y)*0.3}
				txt := "×" + strconv.Itoa(n)
				tw := label.Width(txt)
				c.FillPolygon(color.White, rectPoints(vg.Rectangle{Min: vg.Point{X: mid.X - tw/2 - 1, Y: mid.Y - 5}, Max: vg.Point{X: mid.X + tw/2 + 1, Y: mid.Y + 5}}))
				c.FillText(label, mid, txt)
			}
		}
	}
}

func (g *groupedDrawing) drawItem(c *draw.Canvas, it drawItem, at func(x, y float64) vg.Point, scale float64) {
	t := g.d.t
	text := itemTextStyle(scale)
	if it.kind == itemNode {
		p := at(it.x, it.y)
		glyph := nodeGlyph(t.Nodes[it.home].Kind, 6)
		c.DrawGlyph(glyph, p)
		// on white, over the lines that meet here
		lp := vg.Point{X: p.X, Y: p.Y - glyph.Radius - 2}
		tw, th := text.Width(it.text), text.Height(it.text)
		c.FillPolygon(color.White, rectPoints(vg.Rectangle{Min: vg.Point{X: lp.X - tw/2 - 2, Y: lp.Y - th}, Max: vg.Point{X: lp.X + tw/2 + 2, Y: lp.Y}}))
		c.FillText(text, lp, it.text)
		return
	}
	lo, hi := at(it.x-it.w/2, it.y-it.h/2), at(it.x+it.w/2, it.y+it.h/2)
	r := vg.Rectangle{Min: lo, Max: hi}
	outline := draw.LineStyle{Color: color.RGBA{60, 60, 60, 255}, Width: vg.Points(1)}
	fill := color.RGBA{240, 246, 240, 255}
	if it.kind == itemRun {
		outline.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		fill = color.RGBA{250, 250, 250, 255}
	}
	c.FillPolygon(fill, rectPoints(r))
	c.StrokeLines(outline, append(rectPoints(r), r.Min))
	if it.kind == itemRun {
		text.YAlign = draw.YCenter
		c.FillText(text, at(it.x, it.y), it.text)
		return
	}
	// A box: its switch and what hangs off it, then the GPU cells by rank.
	c.FillText(text, at(it.x, it.y+it.h/2-0.06), it.text)
	cols := boxCols(len(it.cells()))
	fillGPU, _ := kindStyle(topology.GPU)
	cellText := text
	cellText.Font.Size = vg.Points(8 * scale)
	cellText.YAlign = draw.YCenter
	x0 := it.x - float64(cols)*cellIn/2
	y0 := it.y + it.h/2 - boxHeadIn*float64(1+strings.Count(it.text, "\n"))
	for j, gpu := range it.cells() {
		cx, cy := x0+(float64(j%cols)+0.5)*cellIn, y0-(float64(j/cols)+0.5)*cellIn
		cr := vg.Rectangle{Min: at(cx-cellIn*0.42, cy-cellIn*0.42), Max: at(cx+cellIn*0.42, cy+cellIn*0.42)}
		c.FillPolygon(fillGPU, rectPoints(cr))
		c.StrokeLines(draw.LineStyle{Color: color.RGBA{40, 40, 40, 255}, Width: vg.Points(0.5)}, append(rectPoints(cr), cr.Min))
		c.FillText(cellText, at(cx, cy), strconv.Itoa(g.gpuRank[gpu]))
	}
}

// summary is the title's line about the grouping: what the fabric holds,
// and what a box is.
func (g *groupedDrawing) summary() string {
	t := g.d.t
	count := map[topology.Kind]int{}
	for _, n := range t.Nodes {
		count[n.Kind]++
	}
	var parts []string
	for _, k := range []topology.Kind{topology.GPU, topology.Switch, topology.NIC, topology.CPU} {
		if count[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[k], k))
		}
	}
	return strings.Join(parts, ", ") + " (grouped: a box is a switch with its GPUs)"
}
