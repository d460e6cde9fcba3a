package main

import (
	"errors"
	"fmt"
	"image/color"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// drawPlot charts busbw against size, one line per algorithm, with the
// crossovers marked, and writes it to file (PNG or SVG by extension).
func (c *comparison) drawPlot(file string, rows []cmpRow, cross []crossover) error {
	s := c.s
	p := plot.New()
	mode, _ := s.backend.describe(s.timingOnly)
	p.Title.Text = fmt.Sprintf("%s busbw on %s (%d ranks, %s, out of place, %s)", s.op, s.topoName, s.topo.NumGPUs(), s.dtype, mode)
	p.X.Label.Text = "size"
	p.Y.Label.Text = "busbw (GB/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = byteTicks{}
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())

	lo, hi, top := math.Inf(1), math.Inf(-1), 0.0
	for i, algo := range c.algos {
		var xys plotter.XYs
		for _, r := range rows {
			if r.bytes <= 0 { // no place on a log axis
				continue
			}
			b := float64(r.bytes)
			xys = append(xys, plotter.XY{X: b, Y: r.res[i].busbw})
			lo, hi, top = math.Min(lo, b), math.Max(hi, b), math.Max(top, r.res[i].busbw)
		}
		if len(xys) == 0 {
			return fmt.Errorf("no sizes above 0 bytes to plot")
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		p.Add(line, points)
		p.Legend.Add(algo, line, points)
	}
	if lo == hi { // a single size: give the log axis some width
		lo, hi = lo/2, hi*2
	}
	p.X.Min, p.X.Max = lo, hi
	if top <= 0 {
		top = 1
	}
	p.Y.Max = top * 1.15

	// Crossovers: a dashed vertical line between the two sizes, labelled
	// "old → new" to its right; labels are staggered so that close ones stay readable.
	var marks plotter.XYLabels
	for i, x := range cross {
		at := float64(x.hi)
		if x.lo > 0 {
			at = math.Sqrt(float64(x.lo) * float64(x.hi))
		}
		if at < lo || at > hi {
			continue
		}
		vline, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: top * 1.15}})
		if err != nil {
			return err
		}
		vline.Color = color.Gray{Y: 96}
		vline.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(vline)
		if i == 0 {
			p.Legend.Add("crossover", vline)
		}
		marks.XYs = append(marks.XYs, plotter.XY{X: at, Y: top * (1.10 - 0.06*float64(i%3))})
		marks.Labels = append(marks.Labels, x.from+" → "+x.to)
	}
	if len(marks.Labels) > 0 {
		labels, err := plotter.NewLabels(marks)
		if err != nil {
			return err
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Font.Size = vg.Points(9)
		}
		labels.Offset = vg.Point{X: vg.Points(3)} // just right of the line
		p.Add(labels)
	}

	wt, err := p.WriterTo(9*vg.Inch, 5.5*vg.Inch, strings.TrimPrefix(strings.ToLower(filepath.Ext(file)), "."))
	if err != nil {
		return err
	}
	return writeFileAtomic(file, func(f *os.File) error {
		_, err := wt.WriteTo(f)
		return err
	})
}

// writeFileAtomic writes a temporary file next to path and renames it into
// place, so that a failed write never leaves a truncated file behind.
func writeFileAtomic(path string, write func(*os.File) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot create a file in %s: %w", filepath.Dir(path), err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// byteTicks marks every power of two on a log axis and labels a few of them
// with byte sizes (8B, 1KiB, 1MiB).
type byteTicks struct{}

func (byteTicks) Ticks(min, max float64) []plot.Tick {
	if min <= 0 || max < min {
		return nil
	}
	k0, k1 := int(math.Ceil(math.Log2(min))), int(math.Floor(math.Log2(max)))
	step := 20
	for _, s := range []int{1, 2, 5, 10} {
		if (k1-k0)/s < 10 {
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
