package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/fidelity"
	"github.com/commsim/commsim/ops"
)

// fidelity --shipped: every published run commsim ships, checked as the
// fidelity test checks it, with each log's and the pooled errors.

// shippedReport is the check of every shipped log, as JSON.
type shippedReport struct {
	Algo    string `json:"algo"`
	Machine string `json:"nccl_machine,omitempty"`
	// Logs are the shipped logs in the mapping file's order.
	Logs []shippedLog `json:"logs"`
	// Pooled are the errors of the targets' and the held-out logs' sizes
	// together (the excluded ones are left out).
	Pooled []shippedPool `json:"pooled"`
}

// shippedLog is one shipped log's errors.
type shippedLog struct {
	File     string `json:"file"`
	Group    string `json:"group"`
	Op       string `json:"op"`
	Topology string `json:"topology"`
	Ranks    int    `json:"ranks"`
	shippedErrors
}

// shippedPool is the errors of one group's sizes, pooled.
type shippedPool struct {
	Group string `json:"group"`
	Logs  int    `json:"logs"`
	shippedErrors
	// Simulated is the simulation's errors over the sizes NCCL's model
	// prices, to set beside Model's (point-to-point it does not price).
	Simulated *fidModel `json:"simulated_where_priced,omitempty"`
}

// shippedErrors sums up rows: the median and largest |error|, each size
// band's median, how many sizes are off by more than fidelity.MissBound,
// and NCCL's own cost model's errors where it prices them.
type shippedErrors struct {
	Sizes  int       `json:"sizes"`
	Median float64   `json:"median_abs_error"`
	Max    float64   `json:"max_abs_error"`
	Bands  []fidBand `json:"bands"`
	Over   int       `json:"sizes_over_bound"`
	Model  *fidModel `json:"nccl_model,omitempty"`
}

func summed(rows []fidelity.Row) shippedErrors {
	s := fidelity.Summarize(rows)
	e := shippedErrors{Sizes: s.Sizes, Median: s.Median, Max: s.Max, Bands: fidBands(s.Bands)}
	for _, r := range rows {
		if math.Abs(r.Error) > fidelity.MissBound {
			e.Over++
		}
	}
	e.Model = fidModelOf(fidelity.Summarize(fidelity.ModelRows(rows)))
	return e
}

// shippedFlagsError refuses what --shipped cannot take: every log brings
// its own file, fabric, collective and NCCL environment.
func (f *fidFlags) shippedFlagsError() error {
	for _, c := range []struct {
		set  bool
		name string
	}{{f.log != "", "--log"}, {f.topo != "", "--topo"}, {f.op != "", "--op"}, {f.plot != "", "--plot"}, {f.asLogged, "--as-logged"}, {f.envSet(), "an NCCL environment flag"}} {
		if c.set {
			return usagef("--shipped checks every shipped log on its own fabric, collective and NCCL environment; %s does not go with it (--nccl-machine does)", c.name)
		}
	}
	if f.algo != algoNCCL && f.algo != "auto" {
		return usagef("--shipped checks with --algo nccl or auto, which run every collective; --algo %s runs some", f.algo)
	}
	return nil
}

// runShipped checks every shipped log and writes each one's errors and
// the pooled ones.
func (f *fidFlags) runShipped(stdout, stderr io.Writer) error {
	if err := f.shippedFlagsError(); err != nil {
		return err
	}
	cat, err := fidelity.Published()
	if err != nil {
		return err
	}
	cat.Logs = slices.DeleteFunc(cat.Logs, func(l fidelity.PublishedLog) bool { return !strings.Contains(l.File, f.only) })
	if len(cat.Logs) == 0 {
		return usagef("--only %s: no shipped log's name contains it", f.only)
	}
	logs := make([]*calibrate.Log, len(cat.Logs))
	total := 0
	for i := range cat.Logs {
		l := &cat.Logs[i]
		if logs[i], err = calibrate.ParseLog(l.File, l.Data); err != nil {
			return fmt.Errorf("shipped log %s: %w", l.File, err)
		}
		op, err := ops.ParseOp(l.Op)
		if err != nil {
			return fmt.Errorf("shipped log %s: %w", l.File, err)
		}
		total += fidelity.SimulatedSizes(logs[i], op)
	}
	bar := newProgress(stderr, total)
	defer bar.stop()
	out := shippedReport{Algo: f.algo, Machine: strings.TrimSpace(f.machine)}
	pools := map[string]*fidelity.Pool{fidelity.GroupTargets: {}, fidelity.GroupHeldOut: {}}
	for i := range cat.Logs {
		l := &cat.Logs[i]
		g := *f // each log sets the environment of its own run
		g.log = l.File
		rep, _, err := g.check(logs[i], l, stderr, nil, false, bar.step)
		if err != nil {
			bar.done()
			return fmt.Errorf("shipped log %s: %w", l.File, err)
		}
		rows := rep.report.Rows
		out.Logs = append(out.Logs, shippedLog{File: l.File, Group: l.Group(), Op: rep.Op, Topology: l.Topo, Ranks: rep.Ranks, shippedErrors: summed(rows)})
		if pool := pools[l.Group()]; pool != nil {
			pool.Add(rows)
		}
	}
	bar.done()
	for _, group := range []string{fidelity.GroupTargets, fidelity.GroupHeldOut} {
		pool := pools[group]
		out.Pooled = append(out.Pooled, shippedPool{Group: group, Logs: pool.Logs, shippedErrors: summed(pool.Rows),
			Simulated: fidModelOf(fidelity.Summarize(pool.Priced()))})
	}
	switch f.format {
	case "json":
		return writeJSON(stdout, out)
	case "csv":
		return out.writeCSV(stdout)
	}
	return out.writeTable(stdout)
}

func percent(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// cells are e's figures as a row's cells, from its size count on: the
// median and largest error, each band's median (empty where the band has
// no size), the sizes off by more than the bound, and NCCL's model's
// median (empty where it prices none).
func (e shippedErrors) cells(format func(float64) string) []string {
	row := []string{strconv.Itoa(e.Sizes), format(e.Median), format(e.Max)}
	for _, b := range e.Bands {
		cell := ""
		if b.Sizes > 0 {
			cell = format(b.Median)
		}
		row = append(row, cell)
	}
	model := ""
	if e.Model != nil {
		model = format(e.Model.Median)
	}
	return append(row, strconv.Itoa(e.Over), model)
}

// writeCSV writes a row per log, then a row per group that pools its
// logs' sizes (scope "pooled", its count of logs where a log's ranks are).
func (r *shippedReport) writeCSV(w io.Writer) error {
	rows := [][]string{{"scope", "file", "group", "op", "topology", "ranks", "logs", "sizes", "median_abs_error", "max_abs_error",
		"small", "medium", "large", "sizes_over_bound", "nccl_model_median_abs_error"}}
	for _, l := range r.Logs {
		rows = append(rows, append([]string{"log", l.File, l.Group, l.Op, l.Topology, strconv.Itoa(l.Ranks), ""}, l.cells(fmtFloat)...))
	}
	for _, p := range r.Pooled {
		if p.Logs > 0 {
			rows = append(rows, append([]string{"pooled", "", p.Group, "", "", "", strconv.Itoa(p.Logs)}, p.cells(fmtFloat)...))
		}
	}
	return writeCSVRows(w, rows)
}

func (r *shippedReport) writeTable(w io.Writer) error {
	machine := "nothing fitted"
	if r.Machine != "" {
		machine = "the machine as --nccl-machine " + r.Machine + " says"
	}
	fmt.Fprintf(w, "# commsim fidelity --shipped: every published run commsim ships, each on the fabric, collective and NCCL environment its mapping file names; algorithm %s; %s\n", r.Algo, machine)
	fmt.Fprintf(w, "# median |error| of the out-of-place time, over all sizes and by size band; sizes off by more than %.0f%%; NCCL's own cost model's median where it prices sizes\n", 100*fidelity.MissBound)
	tw := newTableWriter(w)
	tw.Header([]string{"log", "group", "op", "topology", "ranks", "sizes", "median", "max", "< 64 KiB", "64 KiB–16 MiB", "≥ 16 MiB", "> 30%", "nccl model"})
	for _, l := range r.Logs {
		row := append([]string{l.File, l.Group, l.Op, l.Topology, strconv.Itoa(l.Ranks)}, l.cells(percent)...)
		if err := tw.Append(row); err != nil {
			return err
		}
	}
	if err := tw.Render(); err != nil {
		return err
	}
	for _, p := range r.Pooled {
		if p.Logs == 0 {
			continue
		}
		fmt.Fprintf(w, "# pooled, %s (%d logs): %s", p.Group, p.Logs, describeErrors(p.shippedErrors))
		if m := p.Model; m != nil {
			fmt.Fprintf(w, "#   over the %d sizes NCCL's cost model prices: the simulation %s; NCCL's model %s\n", m.Sizes, describeBands(p.Simulated), describeBands(m))
		}
	}
	return nil
}

func describeErrors(e shippedErrors) string {
	return fmt.Sprintf("median %.1f%% over %d sizes (%s); %d sizes off by more than %.0f%%\n", 100*e.Median, e.Sizes,
		describeBands(&fidModel{Bands: e.Bands}), e.Over, 100*fidelity.MissBound)
}

func describeBands(m *fidModel) string {
	var parts []string
	for _, b := range m.Bands {
		if b.Sizes > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", b.Range, 100*b.Median))
		}
	}
	return strings.Join(parts, ", ")
}
