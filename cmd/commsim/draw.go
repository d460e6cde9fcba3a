package main

import (
	"cmp"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

const (
	// maxDrawNodes bounds a drawing node by node (and DOT): beyond, it is
	// only ink and slow to write. A grouped picture costs little more than
	// reading the fabric, up to maxGroupedNodes.
	maxDrawNodes    = 8192
	maxGroupedNodes = 1 << 17
	// hotFraction: a link that carried at least this fraction of the
	// busiest link's bytes is hot (drawn red).
	hotFraction = 0.9
)

type drawFlags struct {
	out, op, algo, dtype, redop, bytes string
	root                               int
}

func newTopoDrawCmd() *cobra.Command {
	var f drawFlags
	cmd := &cobra.Command{
		Use:   "draw SPEC|FILE",
		Short: "Draw a topology as SVG, PNG or Graphviz DOT, optionally with a collective's link utilisation",
		Long: `draw pictures a topology: GPUs as green squares, switches as blue circles,
NICs as orange triangles and CPUs as grey crosses, links as lines whose width
grows with their bandwidth. The layout is fixed by the topology's shape: a
ring or mesh on a circle, a torus on its grid (wrap-around links bowed), GPUs
on a circle around their switch, a cluster's nodes around the network
switches with each NIC just beyond its GPU; anything else on a circle.

A fabric of more than 48 GPUs, all on switches (gb200-nvl72, dgx-h100x16,
dgx-h100x128,rail=true), is drawn grouped, as SVG or PNG: each switch with
its GPUs (and their NICs) is one box of numbered GPU cells, the rest of the
network sits in rows above, the links between two of these are one line
(×N when there are N), and runs of alike boxes or switches collapse into
one "… N more alike" so that the picture stays legible. The command says
on stderr what it wrote and how many shapes stand for the nodes.

--out FILE.svg or FILE.png draws the picture; --out FILE.dot, or no --out
(to stdout), writes Graphviz DOT text with the same positions pinned (render
it with: neato -n2 -Tsvg, or plain dot for Graphviz's own layout).

--op runs that collective once on the simulator in timing-only mode (with
bench's --algo, --dtype, --redop, --root and -e for the size, which follows
bench's conventions) and colours every link by how long the bytes it
carried in its busier direction kept it busy (bytes over its bandwidth,
so a slow link that carried what a fast one did is the hotter): width
grows with that time, links busy within 90% as long as the busiest are
red, the rest shade from blue to orange, idle links are light grey; the
title names the busiest and its share of the run. DOT edges then carry
penwidth, color and a label with the bytes each way.`,
		Example: `  commsim topo draw dgx-h100 --out dgx.svg
  commsim topo draw torus:4x4 | neato -n2 -Tpng > torus.png
  commsim topo draw cluster:2x4,rail=true --op allreduce --algo ring -e 64MiB --out hot.png`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDraw(cmd, &f, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "output file: .svg, .png or .dot (default: DOT on stdout)")
	fl.StringVar(&f.op, "op", "", "overlay the link utilisation of one run of this collective: "+strings.Join(opNames(), "|"))
	fl.StringVar(&f.algo, "algo", "auto", "algorithm of --op: "+strings.Join(append(ops.Algorithms(), "auto"), "|"))
	fl.StringVar(&f.dtype, "dtype", "f32", "element type of --op")
	fl.StringVar(&f.redop, "redop", "sum", "reduce op of --op")
	fl.StringVarP(&f.bytes, "bytes", "e", "64MiB", "size of --op, with bench's meaning (per rank for allreduce, total for allgather …)")
	fl.IntVar(&f.root, "root", 0, "root rank of --op (gather, broadcast, reduce)")
	return cmd
}

func runDraw(cmd *cobra.Command, f *drawFlags, arg string) error {
	format := "dot"
	if f.out != "" {
		format = strings.TrimPrefix(strings.ToLower(filepath.Ext(f.out)), ".")
		switch format {
		case "svg", "png", "dot":
		default:
			return usagef("--out %s: unknown extension %q (want .svg, .png or .dot)", f.out, filepath.Ext(f.out))
		}
		if err := checkOutputPath("--out", f.out); err != nil {
			return err
		}
	}
	if f.op == "" {
		for _, name := range []string{"algo", "dtype", "redop", "bytes", "root"} {
			if cmd.Flags().Changed(name) {
				return usagef("--%s needs --op (the collective whose link utilisation to draw)", name)
			}
		}
	}
	t, err := resolveTopology(arg)
	if err != nil {
		return err
	}
	limit := maxDrawNodes
	if format != "dot" && groupable(t) {
		limit = maxGroupedNodes
	}
	if len(t.Nodes) > limit {
		return usagef("topology %s has %d nodes, too many to draw as %s (the limit is %d)", t.Name, len(t.Nodes), strings.ToUpper(format), limit)
	}
	d := &drawing{t: t}
	if f.op != "" {
		if d.ov, err = runOverlay(t, arg, f); err != nil {
			return err
		}
	}
	named := func(err error) error {
		if err != nil {
			return fmt.Errorf("--out %s: %w", f.out, err)
		}
		return nil
	}
	if format != "dot" && groupable(t) {
		if g := groupTopology(d); g != nil {
			return named(g.writePicture(f.out, format, d.title()+"\n"+g.summary(), cmd.ErrOrStderr()))
		}
	}
	d.lay = layoutTopology(t)
	switch {
	case format != "dot":
		return named(d.writePicture(f.out, format, cmd.ErrOrStderr()))
	case f.out == "":
		_, err = io.WriteString(cmd.OutOrStdout(), d.dot())
		return err
	}
	err = writeFileAtomic(f.out, func(w io.Writer) error {
		_, err := io.WriteString(w, d.dot())
		return err
	})
	if err != nil {
		return named(err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "commsim: wrote %s (Graphviz DOT, %d nodes and %d links)\n", f.out, len(t.Nodes), len(t.Links))
	return nil
}

// drawing is a topology with its layout and an optional utilisation overlay.
type drawing struct {
	t     *topology.Topology
	lay   layout
	ov    *overlay
	topBW float64 // the fastest link's bandwidth, once styleOf needs it
}

// overlay is what one run of a collective put on every directed edge:
// its bytes, and how long they kept the edge busy. Busy time, not bytes,
// finds the bottleneck where links differ in speed: a 50GB/s rail that
// carried what a 450GB/s NVLink did was busy nine times as long.
type overlay struct {
	caption string
	bytes   []float64 // per directed edge: 2*link is A->B, 2*link+1 is B->A
	busy    []float64 // per directed edge: seconds its bytes take at its bandwidth
	most    float64   // the largest of busy
	seconds float64   // the run's simulated time
}

// share says busy seconds as a share of the run ("busy 97% of the run").
func (ov *overlay) share(busy float64) string {
	if ov.seconds <= 0 {
		return "busy " + topology.FormatLatency(busy)
	}
	return fmt.Sprintf("busy %.0f%% of the run", 100*busy/ov.seconds)
}

// hotLegend is the legend's line for the links drawn red.
func (ov *overlay) hotLegend() string {
	return fmt.Sprintf("hot: ≥%.0f%% of the busiest's time (%s)", 100*hotFraction, ov.share(ov.most))
}

// runOverlay runs the collective of the flags once, timing-only, and
// collects the bytes each directed edge carried.
func runOverlay(t *topology.Topology, arg string, f *drawFlags) (*overlay, error) {
	if _, err := parseBytes(f.bytes); err != nil {
		return nil, usagef("--bytes: %v", err) // bench's flags below would name -b
	}
	// bench's defaults for whatever draw has no flag of its own
	var bf benchFlags
	bf.register(&cobra.Command{}, "auto")
	bf.topo, bf.op, bf.algo, bf.dtype, bf.redop, bf.root = arg, f.op, f.algo, f.dtype, f.redop, f.root
	bf.minBytes, bf.maxBytes, bf.timingOnly, bf.format, bf.backend = f.bytes, f.bytes, true, "table", "sim"
	s, err := bf.parse()
	if err != nil {
		return nil, err
	}
	if err := s.checkDuration(nil, nil); err != nil { // link usage needs every rank simulated
		return nil, err
	}
	c, err := sim.NewCluster(t, sim.Config{TimingOnly: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	spec, moved := s.spec(s.sizes[0])
	plan, err := s.plan(spec)
	if err != nil {
		return nil, err
	}
	res, err := s.runOnce(c.World(), simexec.NewExecutor(c), plan, false, moved)
	if err != nil {
		return nil, err
	}
	edge := make(map[string]int, t.NumEdges())
	for e := t.NumEdges() - 1; e >= 0; e-- { // the first edge wins a name clash
		edge[t.EdgeName(e)] = e
	}
	ov := &overlay{bytes: make([]float64, t.NumEdges()), busy: make([]float64, t.NumEdges()), seconds: res.timeUS * 1e-6}
	for _, u := range c.LinkUsage() {
		if e, ok := edge[u.Name]; ok {
			ov.bytes[e] += u.Bytes
		}
	}
	busiest := -1
	for e, b := range ov.bytes {
		if b > 0 {
			ov.busy[e] = b / t.EdgeBW(e)
		}
		if ov.busy[e] > ov.most {
			ov.most, busiest = ov.busy[e], e
		}
	}
	ov.caption = fmt.Sprintf("%s %s, %s (%s): %.2fus", s.op, plan.Algo, formatBytes(moved), s.dtype, res.timeUS)
	if busiest >= 0 {
		ov.caption += fmt.Sprintf("; busiest %s: %s, %s", t.EdgeName(busiest), ov.share(ov.most), humanBytes(ov.bytes[busiest]))
	}
	return ov, nil
}

// humanBytes writes a byte count with a binary unit and up to four
// significant digits: 96MiB, 1.5GiB, 12.34KiB, 100B.
func humanBytes(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for ; i < len(units)-1 && math.Abs(b) >= 1024; i++ {
		b /= 1024
	}
	return strconv.FormatFloat(b, 'g', 4, 64) + units[i]
}

// linkStyle is how link i is drawn: width in points, colour, and whether it
// is hot (busy at least hotFraction as long as the busiest link).
func (d *drawing) linkStyle(i int) (width float64, col color.RGBA, hot bool) {
	b := 0.0
	if d.ov != nil {
		b = max(d.ov.busy[2*i], d.ov.busy[2*i+1])
	}
	return d.styleOf(d.t.Links[i].BW, b)
}

// styleOf is how a link of bandwidth bw busy for b seconds in its busier
// direction is drawn: without an overlay, wider the faster; with one,
// wider and warmer the busier.
func (d *drawing) styleOf(bw, b float64) (width float64, col color.RGBA, hot bool) {
	if d.ov == nil {
		if d.topBW == 0 {
			for _, l := range d.t.Links {
				d.topBW = max(d.topBW, l.BW)
			}
		}
		return 0.75 + 2.75*math.Sqrt(bw/d.topBW), color.RGBA{85, 85, 85, 255}, false
	}
	if b <= 0 || d.ov.most <= 0 {
		return 0.75, color.RGBA{204, 204, 204, 255}, false
	}
	heat := b / d.ov.most
	if heat >= hotFraction {
		return 1 + 4*heat, color.RGBA{215, 25, 28, 255}, true
	}
	return 1 + 4*heat, coolToWarm(heat / hotFraction), false
}

// coolToWarm maps 0..1 to a hue from blue (220°) through cyan, green and
// yellow to orange (30°).
func coolToWarm(k float64) color.RGBA {
	h := (220 - 190*min(max(k, 0), 1)) / 60
	const s, l = 0.85, 0.45
	c := (1 - math.Abs(2*l-1)) * s
	x := c * (1 - math.Abs(math.Mod(h, 2)-1))
	rgb := [6][3]float64{{c, x, 0}, {x, c, 0}, {0, c, x}, {0, x, c}, {x, 0, c}, {c, 0, x}}[min(int(h), 5)]
	to := func(v float64) uint8 { return uint8(math.Round(255 * (v + l - c/2))) }
	return color.RGBA{to(rgb[0]), to(rgb[1]), to(rgb[2]), 255}
}

// kindStyle is the fill colour and Graphviz shape of a node kind.
func kindStyle(k topology.Kind) (color.RGBA, string) {
	switch k {
	case topology.GPU:
		return color.RGBA{0x66, 0xbd, 0x63, 255}, "box"
	case topology.Switch:
		return color.RGBA{0x43, 0x93, 0xc3, 255}, "ellipse"
	case topology.NIC:
		return color.RGBA{0xf4, 0xa5, 0x82, 255}, "triangle"
	}
	return color.RGBA{0xbd, 0xbd, 0xbd, 255}, "diamond"
}

func hexColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// dotQuote writes s as a DOT double-quoted string.
func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// dot is an undirected Graphviz graph: one node per topology node with
// its kind's shape and its layout position pinned (inches), one edge per
// link labelled with its bandwidth and, with an overlay, the bytes each way
// that carried any.
func (d *drawing) dot() string {
	t := d.t
	var b strings.Builder
	title := "topology " + t.Name
	if d.ov != nil {
		title += ": " + d.ov.caption
	}
	fmt.Fprintf(&b, "// commsim topo draw: render with neato (or dot: the positions are pinned)\ngraph %s {\n", dotQuote(t.Name))
	fmt.Fprintf(&b, "\tgraph [layout=neato, overlap=false, splines=true, outputorder=edgesfirst, fontname=\"Helvetica\", labelloc=t, label=%s];\n", dotQuote(title))
	fmt.Fprintf(&b, "\tnode [style=filled, fontname=\"Helvetica\", fontsize=10, width=0.5, height=0.3];\n\tedge [fontname=\"Helvetica\", fontsize=8];\n")
	pin := func(v float64) float64 { return math.Round(v*1200)/1000 + 0 } // 1.2in a unit, no -0.000
	for v, n := range t.Nodes {
		fill, shape := kindStyle(n.Kind)
		fmt.Fprintf(&b, "\t%s [kind=%s, shape=%s, fillcolor=%q, pos=\"%.3f,%.3f!\"];\n",
			dotQuote(n.Name), n.Kind, shape, hexColor(fill), pin(d.lay.x[v]), pin(d.lay.y[v]))
	}
	for i, l := range t.Links {
		width, col, hot := d.linkStyle(i)
		label := topology.FormatBandwidth(l.BW)
		for k, dir := range [2][2]int{{l.A, l.B}, {l.B, l.A}} {
			if d.ov != nil && d.ov.bytes[2*i+k] > 0 {
				label += fmt.Sprintf("\n%s->%s %s", t.Nodes[dir[0]].Name, t.Nodes[dir[1]].Name, humanBytes(d.ov.bytes[2*i+k]))
			}
		}
		if d.ov != nil && label == topology.FormatBandwidth(l.BW) {
			label += "\nidle"
		}
		fmt.Fprintf(&b, "\t%s -- %s [label=%s, penwidth=%.2f, color=%q%s];\n", dotQuote(t.Nodes[l.A].Name),
			dotQuote(t.Nodes[l.B].Name), dotQuote(label), width, hexColor(col), map[bool]string{true: ", hot=true"}[hot])
	}
	b.WriteString("}\n")
	return b.String()
}

// legendInches is the room kept right of a picture for its legend.
const legendInches = 1.9

// title is a picture's title: the topology, and the run of an overlay.
func (d *drawing) title() string {
	s := "topology " + d.t.Name
	if d.ov != nil {
		s += "\n" + d.ov.caption
	}
	return s
}

// writePicture draws the topology node by node with gonum/plot, as SVG or
// PNG, and says on stderr what it wrote.
func (d *drawing) writePicture(file, format string, stderr io.Writer) error {
	p := plot.New()
	p.HideAxes()
	p.Title.Text = d.title()
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Add(topoPlotter{d})

	// One layout unit is 0.8in unless that makes the picture over 24in.
	xmin, xmax, ymin, ymax := d.lay.bounds(0.9)
	titleIn := 0.35 * float64(1+strings.Count(p.Title.Text, "\n"))
	unit := min(0.8, (24-legendInches)/(xmax-xmin), (24-titleIn)/(ymax-ymin))
	w := max(6, (xmax-xmin)*unit+legendInches)
	h := max(4.5, (ymax-ymin)*unit+titleIn)
	padX := (w-legendInches)/unit - (xmax - xmin)
	padY := (h-titleIn)/unit - (ymax - ymin)
	p.X.Min, p.X.Max = xmin-padX/2, xmax+padX/2+legendInches/unit
	p.Y.Min, p.Y.Max = ymin-padY/2, ymax+padY/2

	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.Padding = vg.Points(2)
	p.Legend.XOffs, p.Legend.YOffs = -vg.Points(8), -vg.Points(8) // off the picture's edge
	seen := map[topology.Kind]bool{}
	for _, n := range d.t.Nodes {
		if !seen[n.Kind] {
			seen[n.Kind] = true
			p.Legend.Add(n.Kind.String(), glyphThumb(nodeGlyph(n.Kind, 4.5)))
		}
	}
	if d.ov != nil {
		p.Legend.Add(d.ov.hotLegend(), lineThumb{Color: color.RGBA{215, 25, 28, 255}, Width: vg.Points(4.6)})
		p.Legend.Add("less: blue to orange", rampThumb{})
		p.Legend.Add("idle", lineThumb{Color: color.RGBA{204, 204, 204, 255}, Width: vg.Points(0.75)})
	} else {
		for _, i := range bandwidthClasses(d.t, 4) {
			width, col, _ := d.linkStyle(i)
			p.Legend.Add(topology.FormatBandwidth(d.t.Links[i].BW), lineThumb{Color: col, Width: vg.Points(width)})
		}
	}
	wt, err := draw.NewFormattedCanvas(vg.Length(w)*vg.Inch, vg.Length(h)*vg.Inch, format)
	if err != nil {
		return err
	}
	c := draw.New(wt)
	c.FillPolygon(color.White, rectPoints(c.Rectangle))
	p.Draw(draw.Crop(c, 0, 0, 0, -0.12*vg.Inch)) // room above the title
	err = writeFileAtomic(file, func(w io.Writer) error {
		_, err := wt.WriteTo(w)
		return err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "commsim: wrote %s (%s, %d nodes drawn one by one)\n", file, pictureSize(w, h, format), len(d.t.Nodes))
	return nil
}

// bandwidthClasses returns one link of each distinct bandwidth, fastest
// first, at most n.
func bandwidthClasses(t *topology.Topology, n int) []int {
	var out []int
	for i, l := range t.Links {
		if !slices.ContainsFunc(out, func(j int) bool { return t.Links[j].BW == l.BW }) {
			out = append(out, i)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(t.Links[b].BW, t.Links[a].BW) })
	return out[:min(n, len(out))]
}

// nodeGlyph is the marker of a node kind, radius in points.
func nodeGlyph(k topology.Kind, radius float64) draw.GlyphStyle {
	fill, _ := kindStyle(k)
	g := draw.GlyphStyle{Color: fill, Radius: vg.Points(radius)}
	switch k {
	case topology.GPU:
		g.Shape = draw.BoxGlyph{}
	case topology.Switch:
		g.Shape, g.Radius = draw.CircleGlyph{}, vg.Points(radius*1.25)
	case topology.NIC:
		g.Shape = draw.PyramidGlyph{}
	default:
		g.Shape = draw.CrossGlyph{}
	}
	return g
}

type glyphThumb draw.GlyphStyle

func (g glyphThumb) Thumbnail(c *draw.Canvas) { c.DrawGlyphNoClip(draw.GlyphStyle(g), c.Center()) }

type lineThumb draw.LineStyle

func (l lineThumb) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(draw.LineStyle(l), c.Min.X, y, c.Max.X, y)
}

// rampThumb shows the colours of links below hot, from idle-ish to warm.
type rampThumb struct{}

func (rampThumb) Thumbnail(c *draw.Canvas) {
	y, w := c.Center().Y, c.Max.X-c.Min.X
	for i := range 8 {
		x := c.Min.X + w*vg.Length(i)/8
		c.StrokeLine2(draw.LineStyle{Color: coolToWarm(float64(i) / 7), Width: vg.Points(2.5)}, x, y, x+w/8, y)
	}
}

// topoPlotter draws links, then nodes, then labels, in layout units.
type topoPlotter struct{ d *drawing }

func (tp topoPlotter) Plot(c draw.Canvas, plt *plot.Plot) {
	d := tp.d
	trX, trY := plt.Transforms(&c)
	at := func(x, y float64) vg.Point { return vg.Point{X: trX(x), Y: trY(y)} }
	for pass := 0; pass < 2; pass++ { // hot links on top
		for i := range d.t.Links {
			width, col, hot := d.linkStyle(i)
			if hot != (pass == 1) {
				continue
			}
			var pts []vg.Point
			for _, q := range d.lay.curve(d.t, i) {
				pts = append(pts, at(q[0], q[1]))
			}
			c.StrokeLines(draw.LineStyle{Color: col, Width: vg.Points(width)}, pts)
		}
	}
	n := len(d.t.Nodes)
	radius := 4.5
	if n > 64 {
		radius = 3
	}
	outline := draw.GlyphStyle{Color: color.RGBA{40, 40, 40, 255}, Radius: vg.Points(radius)}
	for v, node := range d.t.Nodes {
		g := nodeGlyph(node.Kind, radius)
		pt := at(d.lay.x[v], d.lay.y[v])
		c.DrawGlyph(g, pt)
		switch node.Kind {
		case topology.GPU:
			outline.Shape, outline.Radius = draw.SquareGlyph{}, g.Radius
			c.DrawGlyph(outline, pt)
		case topology.Switch:
			outline.Shape, outline.Radius = draw.RingGlyph{}, g.Radius
			c.DrawGlyph(outline, pt)
		case topology.NIC:
			outline.Shape, outline.Radius = draw.TriangleGlyph{}, g.Radius
			c.DrawGlyph(outline, pt)
		}
	}
	if n > 400 { // labels would only be ink
		return
	}
	size := 8.0
	if n > 64 {
		size = 6
	}
	// Each label sits on the side away from the node's neighbours. If they
	// pull evenly: beside the link of a node in line between two (away from
	// the middle of the picture), else below right.
	sum := make([][3]float64, n) // x, y, links
	first := make([][2]float64, n)
	for _, lk := range d.t.Links {
		for _, e := range [2][2]int{{lk.A, lk.B}, {lk.B, lk.A}} {
			ux, uy := d.lay.x[e[0]]-d.lay.x[e[1]], d.lay.y[e[0]]-d.lay.y[e[1]]
			if norm := math.Hypot(ux, uy); norm > 0 {
				if sum[e[0]][2] == 0 {
					first[e[0]] = [2]float64{ux / norm, uy / norm}
				}
				sum[e[0]] = [3]float64{sum[e[0]][0] + ux/norm, sum[e[0]][1] + uy/norm, sum[e[0]][2] + 1}
			}
		}
	}
	mx, my := meanOf(d.lay.x), meanOf(d.lay.y)
	sty := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(size)), Handler: plot.DefaultTextHandler}
	for v, node := range d.t.Nodes {
		ux, uy := sum[v][0], sum[v][1]
		if norm := math.Hypot(ux, uy); norm > 0.5 {
			ux, uy = ux/norm, uy/norm
		} else if sum[v][2] != 2 {
			ux, uy = math.Sqrt2/2, -math.Sqrt2/2
		} else if ux, uy = -first[v][1], first[v][0]; ux*(d.lay.x[v]-mx)+uy*(d.lay.y[v]-my) < -1e-9 {
			ux, uy = -ux, -uy
		}
		sty.XAlign, sty.YAlign = draw.XCenter, draw.YCenter
		switch {
		case ux > 0.4:
			sty.XAlign = draw.XLeft
		case ux < -0.4:
			sty.XAlign = draw.XRight
		}
		switch {
		case uy > 0.4:
			sty.YAlign = draw.YBottom
		case uy < -0.4:
			sty.YAlign = draw.YTop
		}
		off := vg.Points(radius*1.25 + 1.5)
		pt := at(d.lay.x[v], d.lay.y[v])
		c.FillText(sty, vg.Point{X: pt.X + off*vg.Length(ux), Y: pt.Y + off*vg.Length(uy)}, node.Name)
	}
}

func meanOf(v []float64) float64 {
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return sum / float64(max(len(v), 1))
}

// bounds is the box around every node, with a margin.
func (l layout) bounds(margin float64) (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = slices.Min(l.x), slices.Max(l.x), slices.Min(l.y), slices.Max(l.y)
	return xmin - margin, xmax + margin, ymin - margin, ymax + margin
}

// curve is link i as a polyline: straight, or a quadratic Bézier whose
// middle is offset by its bow.
func (l layout) curve(t *topology.Topology, i int) [][2]float64 {
	a, b := t.Links[i].A, t.Links[i].B
	x0, y0, x1, y1 := l.x[a], l.y[a], l.x[b], l.y[b]
	if l.bow[i] == [2]float64{} {
		return [][2]float64{{x0, y0}, {x1, y1}}
	}
	// control point: twice the wanted offset of the middle
	cx, cy := (x0+x1)/2+2*l.bow[i][0], (y0+y1)/2+2*l.bow[i][1]
	var pts [][2]float64
	for s := 0.0; s <= 1.0001; s += 1.0 / 16 {
		u := 1 - s
		pts = append(pts, [2]float64{u*u*x0 + 2*u*s*cx + s*s*x1, u*u*y0 + 2*u*s*cy + s*s*y1})
	}
	return pts
}
