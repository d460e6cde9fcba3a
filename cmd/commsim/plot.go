package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/commsim/commsim/ops"
)

// sweepChart is what --plot draws: one series per algorithm over the
// sizes of a sweep, in two panels that share the size axis (busbw, and
// time on log-log axes, where the small sizes that busbw flattens to zero
// stay visible), with vertical marks where the algorithm changes.
type sweepChart struct {
	title     string // the first line: what ran where
	sizeLabel string
	bwLabel   string
	series    []chartSeries
	marks     []chartMark
	marksName string // the legend entry of the marks
}

type chartSeries struct {
	name  string
	bytes []int64
	busbw []float64 // GB/s
	time  []float64 // µs
}

// chartMark is a change of algorithm between two adjacent sizes, drawn
// halfway between them on the log axis.
type chartMark struct {
	lo, hi   int64
	from, to string
}

// Geometry of a chart, in inches.
const (
	chartPanels  = 9.9 // both panels; the legend's column adds to it
	chartHeight  = 6
	chartTitle   = 0.75 // the band above the panels
	chartPadding = 0.15
)

// newSweepChart starts a chart of the sweep: title and axis labels say what
// the numbers are, in nccl-tests' terms.
func newSweepChart(s *sweep) *sweepChart {
	mode, _ := s.backend.describe(s.timingOnly)
	return &sweepChart{
		title:     fmt.Sprintf("%s on %s: %d ranks, %s, out of place, %s", s.op, s.topoName, s.topo.NumGPUs(), s.dtype, mode),
		sizeLabel: sizeMeaning(s.op),
		bwLabel:   "bus bandwidth per rank (GB/s)\nbusbw = " + busbwFormula(s.op) + ", as nccl-tests defines it",
	}
}

// sizeMeaning is the size axis's label: bench's sizes follow nccl-tests,
// per rank for some collectives and in total for the others.
func sizeMeaning(op ops.Op) string {
	switch op {
	case ops.AllGather, ops.ReduceScatter, ops.Gather, ops.AllToAll:
		return "size (bytes, total over all ranks, as nccl-tests counts it)"
	}
	return "size (bytes per rank, as nccl-tests counts it)"
}

// busbwFormula is busFactor in words, n the number of ranks.
func busbwFormula(op ops.Op) string {
	switch op {
	case ops.AllReduce:
		return "algbw × 2(n-1)/n"
	case ops.ReduceScatter, ops.AllGather, ops.AllToAll, ops.Gather:
		return "algbw × (n-1)/n"
	}
	return "algbw"
}

// drawPlot charts every algorithm of a comparison, with the sizes where
// the fastest changes marked, into file (PNG or SVG by extension).
func (c *comparison) drawPlot(file string, rows []cmpRow, cross []crossover) error {
	ch := newSweepChart(c.s)
	if c.fabrics != nil {
		spec, _ := c.s.spec(c.s.sizes[0])
		mode, _ := c.s.backend.describe(c.s.timingOnly)
		ch.title = fmt.Sprintf("%s %s on %d fabrics: %d ranks, %s, out of place, %s", c.s.op, c.s.algo, len(c.names), spec.Ranks, c.s.dtype, mode)
	}
	for i, algo := range c.names {
		sr := chartSeries{name: algo}
		for _, r := range rows {
			sr.add(r.bytes, r.res[i])
		}
		ch.series = append(ch.series, sr)
	}
	for _, x := range cross {
		ch.marks = append(ch.marks, chartMark{lo: x.lo, hi: x.hi, from: x.from, to: x.to})
	}
	ch.marksName = "fastest changes"
	return ch.write(file)
}

// drawPlot charts bench's out-of-place sweep. With --algo auto or nccl the
// algorithm is chosen per size; the sizes where the choice changes are
// marked.
func (s *sweep) drawPlot(rows []row) error {
	ch := newSweepChart(s)
	sr := chartSeries{name: s.algo}
	switch s.algo {
	case "auto":
		sr.name = "auto (cost model's choice)"
	case algoNCCL:
		sr.name = "nccl (tuner's choice)"
	}
	for i, r := range rows {
		sr.add(r.bytes, r.outOfPlace)
		if i > 0 && choiceKey(rows[i-1].algo) != choiceKey(r.algo) {
			ch.marks = append(ch.marks, chartMark{lo: rows[i-1].bytes, hi: r.bytes, from: choiceKey(rows[i-1].algo), to: choiceKey(r.algo)})
		}
	}
	if len(ch.marks) == 0 && sr.name != s.algo && len(rows) > 0 { // one choice: say which
		sr.name = strings.TrimSuffix(sr.name, ")") + ": " + choiceKey(rows[0].algo) + ")"
	}
	ch.series = []chartSeries{sr}
	ch.marksName = "choice changes"
	return ch.write(s.plot)
}

// choiceKey is the part of a per-size choice that a mark is for: NCCL's
// algorithm and protocol ("ring/LL" of "ring/LL/8ch"), leaving out the
// channel count, which changes at most sizes.
func choiceKey(algo string) string {
	if i := strings.LastIndex(algo, "/"); i >= 0 && strings.HasSuffix(algo, "ch") {
		if _, err := strconv.Atoi(algo[i+1 : len(algo)-2]); err == nil {
			return algo[:i]
		}
	}
	return algo
}

// add appends a size; sizes of 0 bytes have no place on a log axis.
func (sr *chartSeries) add(bytes int64, res result) {
	if bytes <= 0 {
		return
	}
	sr.bytes = append(sr.bytes, bytes)
	sr.busbw = append(sr.busbw, res.busbw)
	sr.time = append(sr.time, res.timeUS)
}

// write draws the chart and writes it to file, PNG or SVG by extension.
func (ch *sweepChart) write(file string) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(file)), ".")
	leg := ch.legend()
	legendIn := ch.legendWidth(leg)
	cw, err := draw.NewFormattedCanvas(vg.Length(chartPanels+legendIn)*vg.Inch, chartHeight*vg.Inch, format)
	if err != nil {
		return err
	}
	if err := ch.draw(draw.New(cw), leg, legendIn); err != nil {
		return err
	}
	return writeFileAtomic(file, func(w io.Writer) error {
		_, err := cw.WriteTo(w)
		return err
	})
}

// draw lays the chart out on c: the title on top with room above it, the
// two panels side by side, the legend in a column of its own right of
// them, where it covers nothing.
func (ch *sweepChart) draw(c draw.Canvas, leg plot.Legend, legendIn float64) error {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, sr := range ch.series {
		for _, b := range sr.bytes {
			lo, hi = min(lo, float64(b)), max(hi, float64(b))
		}
	}
	if math.IsInf(lo, 1) {
		return fmt.Errorf("no sizes above 0 bytes to plot")
	}
	if lo == hi { // a single size: give the log axis some width
		lo, hi = lo/2, hi*2
	}

	title := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(14)), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YTop}
	c.FillText(title, vg.Point{X: (c.Min.X + c.Max.X) / 2, Y: c.Max.Y - chartPadding*vg.Inch}, ch.title)

	body := draw.Crop(c, chartPadding*vg.Inch, -vg.Length(legendIn)*vg.Inch, chartPadding*vg.Inch, -chartTitle*vg.Inch)
	panels := draw.Tiles{Rows: 1, Cols: 2, PadX: 0.35 * vg.Inch}
	bw, err := ch.panel(lo, hi, false)
	if err != nil {
		return err
	}
	tm, err := ch.panel(lo, hi, true)
	if err != nil {
		return err
	}
	bw.Draw(panels.At(body, 0, 0))
	tm.Draw(panels.At(body, 1, 0))

	leg.Draw(draw.Crop(c, c.Size().X-vg.Length(legendIn-0.1)*vg.Inch, -chartPadding*vg.Inch, chartPadding*vg.Inch, -(chartTitle+0.3)*vg.Inch))
	return nil
}

// legend names the series, and the marks if there are any.
func (ch *sweepChart) legend() plot.Legend {
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = vg.Points(11)
	leg.ThumbnailWidth = vg.Points(36)
	for i, sr := range ch.series {
		line, points := seriesStyle(i)
		leg.Add(sr.name, lineThumb(line), glyphThumb(points))
	}
	if len(ch.marks) > 0 {
		leg.Add(ch.marksName, lineThumb(markStyle()))
	}
	return leg
}

// legendWidth is the width of the legend's column in inches: room for the
// longest name, so that none runs off the picture.
func (ch *sweepChart) legendWidth(leg plot.Legend) float64 {
	names := []string{ch.marksName}
	for _, sr := range ch.series {
		names = append(names, sr.name)
	}
	widest := vg.Length(0)
	for _, n := range names {
		widest = max(widest, leg.TextStyle.Width(n))
	}
	return max(1.6, float64(widest+leg.ThumbnailWidth)/72+0.45)
}

// seriesStyle tells series apart by colour, dash pattern and marker, so
// that curves that coincide still show as several.
func seriesStyle(i int) (draw.LineStyle, draw.GlyphStyle) {
	line := draw.LineStyle{Color: plotutil.Color(i), Width: vg.Points(1.6), Dashes: plotutil.Dashes(i)}
	points := draw.GlyphStyle{Color: plotutil.Color(i), Radius: vg.Points(3.2 + 0.6*float64(i%3)), Shape: plotutil.Shape(i)}
	return line, points
}

func markStyle() draw.LineStyle {
	return draw.LineStyle{Color: color.Gray{Y: 110}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(2), vg.Points(3)}}
}

// panel is one of the two plots over [lo, hi] bytes: busbw on a linear
// axis from 0, with the marks labelled in the headroom kept above the
// curves, or time on a log axis.
func (ch *sweepChart) panel(lo, hi float64, timeAxis bool) (p *plot.Plot, err error) {
	p = plot.New()
	p.X.Label.Text = ch.sizeLabel
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = byteTicks{}
	p.X.Min, p.X.Max = lo/1.25, hi*1.25
	p.Title.Padding = vg.Points(6)
	p.Add(plotter.NewGrid())
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(11)
		a.Tick.Label.Font.Size = vg.Points(10)
	}

	yMin, yMax := math.Inf(1), 0.0
	zeros := 0 // times of 0, which have no place on a log axis
	for i, sr := range ch.series {
		var xys plotter.XYs
		for k, b := range sr.bytes {
			y := sr.busbw[k]
			if timeAxis {
				if y = sr.time[k]; y <= 0 {
					zeros++
					continue
				}
			}
			xys = append(xys, plotter.XY{X: float64(b), Y: y})
			yMin, yMax = min(yMin, y), max(yMax, y)
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		line.LineStyle, points.GlyphStyle = seriesStyle(i)
		p.Add(line, points)
	}
	levels := min(len(ch.marks), 3)
	if timeAxis {
		p.Title.Text = "time per collective (log-log)"
		if zeros > 0 {
			// One rank moves nothing: say why its points are missing
			// rather than leave an empty panel.
			p.Title.Text += fmt.Sprintf("\n%d point(s) of 0 µs not drawn", zeros)
		}
		p.Y.Label.Text = "time per collective (µs)"
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = decadeTicks{}
		if math.IsInf(yMin, 1) {
			yMin, yMax = 1, 10
		}
		p.Y.Min, p.Y.Max = yMin/1.5, yMax*1.5
	} else {
		p.Title.Text = "bus bandwidth"
		p.Y.Label.Text = ch.bwLabel
		p.Y.Min = 0
		p.Y.Tick.Marker = plainTicks{}
		if yMax <= 0 {
			yMax = 1
		}
		p.Y.Max = yMax * (1.08 + 0.09*float64(levels))
	}

	// Labels sit right of their line, or left of it in the right third
	// of the panel, so that none runs off it.
	var marks [2]plotter.XYLabels
	for i, m := range ch.marks {
		at := float64(m.hi)
		if m.lo > 0 {
			at = math.Sqrt(float64(m.lo) * float64(m.hi))
		}
		if at < p.X.Min || at > p.X.Max {
			continue
		}
		vline, err := plotter.NewLine(plotter.XYs{{X: at, Y: p.Y.Min}, {X: at, Y: p.Y.Max}})
		if err != nil {
			return nil, err
		}
		vline.LineStyle = markStyle()
		p.Add(vline)
		if !timeAxis { // staggered so that close marks stay readable
			side := 0
			if math.Log(at/p.X.Min) > 2*math.Log(p.X.Max/at) {
				side = 1
			}
			marks[side].XYs = append(marks[side].XYs, plotter.XY{X: at, Y: yMax * (1.04 + 0.09*float64(levels-1-i%3))})
			marks[side].Labels = append(marks[side].Labels, m.from+" → "+m.to)
		}
	}
	for side, mk := range marks {
		if len(mk.Labels) == 0 {
			continue
		}
		labels, err := plotter.NewLabels(mk)
		if err != nil {
			return nil, err
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Font.Size = vg.Points(9)
			if side == 1 {
				labels.TextStyle[i].XAlign = draw.XRight
			}
		}
		labels.Offset = vg.Point{X: vg.Points(float64(3 - 6*side))}
		p.Add(labels)
	}
	return p, nil
}

// byteTicks marks every power of two on a log axis and labels a few of them
// with byte sizes (8B, 1KiB, 1MiB): every power of 1024 when the range is
// wide, so that every chart labels the same sizes.
type byteTicks struct{}

func (byteTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 || max < min {
		return nil
	}
	k0, k1 := int(math.Ceil(math.Log2(min))), int(math.Floor(math.Log2(max)))
	step := 20 // labels 5 at most: a panel is some 4 inches wide
	for _, s := range []int{1, 2, 5, 10} {
		if (k1-k0)/s < 5 {
			step = s
			break
		}
	}
	var ticks []plot.Tick
	for k := k0; k <= k1 && k < 63; k++ {
		t := plot.Tick{Value: math.Ldexp(1, k)}
		if k%step == 0 || k0 == k1 {
			t.Label = formatBytes(int64(1) << k)
		}
		ticks = append(ticks, t)
	}
	if len(ticks) == 0 { // no power of two in range
		for _, v := range []float64{min, max} {
			ticks = append(ticks, plot.Tick{Value: v, Label: formatBytes(int64(v))})
		}
	}
	return ticks
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("250", not "250.00"), as the tables print them.
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = strconv.FormatFloat(t.Value, 'g', 6, 64)
		}
	}
	return ticks
}

// decadeTicks labels the powers of ten of a log axis (0.1, 1, 10, 100,
// 1000) and marks 2…9 times them; over three decades or fewer it labels
// 2 and 5 times the powers too, and within one decade every tick.
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 || max < min {
		return nil
	}
	k0, k1 := int(math.Floor(math.Log10(min))), int(math.Ceil(math.Log10(max)))
	narrow := k1-k0 <= 3
	var ticks []plot.Tick
	for k := k0; k <= k1; k++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, float64(k))
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || narrow && (m == 2 || m == 5) {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Label != "" }) { // within a decade
		for i := range ticks {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'f', -1, 64)
		}
	}
	return ticks
}
