package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/fidelity"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

// fidelity's flags, I/O and report; package fidelity runs the check.

type fidFlags struct {
	log, topo, op, algo, format, plot string
	only                              string // with --shipped: the logs whose names contain it
	asLogged, shipped                 bool
	ncclFlags
}

func newFidelityCmd() *cobra.Command {
	var f fidFlags
	cmd := &cobra.Command{
		Use:   "fidelity",
		Short: "Compare simulated times with an nccl-tests log, size by size, with no fitting",
		Long: `fidelity reads nccl-tests output (as calibrate does: the text table, old or
new, its JSON report (-J), a CSV or bench's JSON records; rank tags, time
stamps, dates and banners allowed), simulates
every size of it on the topology as it stands (timing-only, nccl-tests'
meaning of size; by default as NCCL's tuner would run each size, --algo
nccl) and prints the measured and predicted out-of-place times and
the error of each size, (predicted − measured)/measured, then the median and
largest |error| and the median of each size band (< 64 KiB, 64 KiB–16 MiB,
≥ 16 MiB); --plot draws both sweeps. With --algo nccl it also prints NCCL's
own cost model beside the simulation (its tuner's time for what it would
run, nothing simulated) and that model's error, the baseline to beat.
Where the log carries NCCL's tuning lines (NCCL_DEBUG=INFO with
NCCL_DEBUG_SUBSYS=TUNING, NCCL 2.20 on), a column gives what NCCL ran at
each size and a line counts the sizes where its tuner, as commsim models
it, chose the same; --as-logged simulates what NCCL ran instead. Where
it carries the cost table NCCL prints at init (the same setting), a line
counts its latencies and bandwidths that commsim's model of NCCL gives
alike (commsim tuning --log shows each cell).
Nothing is fitted: calibrate fits, fidelity measures. On a terminal, a bar
on stderr counts the sizes simulated (a large fabric's log can take
minutes).

commsim ships published runs (package fidelity, nccl-logs/): given one of them
(known by its content, whatever its name; a bare file name of one that is not
in the current directory reads the copy commsim ships), --topo and --op default to the
fabric and collective its mapping file names, and NCCL's tuner runs in the
NCCL environment its run had (the mapping file's nccl_env: NCCL_PROTO=Simple
for p4de, set by AWS's network plugin) and with its release's constants (the
one its header states, or the one the mapping file presumes where it states
none, saying why: 2.20.3 for p4de) unless a --nccl-* flag but --nccl-machine
is given. Sizes of 0 bytes (nccl-tests'
rows for less than one element per rank) are left out. A log of your own
needs no --topo where its "Using devices" lines name every rank on SXM
boards a preset builds (A100, H100, H200, B200, B300), hosts of as many
ranks each: the preset (dgx-h100x4, dgx-h100x10,gpus=2, ...) is taken
and named on stderr with what it assumes (its NICs, its hosts' CPUs).
--shipped checks
every one of them so and prints each log's median errors, and the pooled
ones of the targets and of the runs held out of them: how far commsim is
from the published runs, from the binary alone.`,
		Example: `  commsim fidelity --log all_reduce.txt --topo dgx-h100
  commsim fidelity --log vultr-b200-allreduce-8xB200.txt            # a shipped log: its fabric is known
  commsim fidelity --log ag.txt --topo dgx-b200x2 --op allgather --algo ring --format json
  commsim fidelity --log ar.json --topo dgx-h100x2 --plot ar.png         # nccl-tests -J's report, drawn
  commsim fidelity --shipped --nccl-machine channel=none                 # every shipped run, with no channel rate`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.OutOrStdout(), cmd.ErrOrStderr(), cmd.Flags().Changed("op"))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.log, "log", "", "nccl-tests output: its text table, its JSON report (-J), a CSV or bench's JSON records, at most 64 MiB (required)")
	fl.StringVar(&f.topo, "topo", "", "topology the log was measured on: a spec, a preset or a YAML file (default: a shipped log's, or the preset the log's device lines name)")
	fl.StringVar(&f.op, "op", "", "collective the log measured (default: the log's, or a shipped log's)")
	fl.StringVar(&f.algo, "algo", algoNCCL, "algorithm to simulate: "+strings.Join(append(ops.Algorithms(), "auto", algoNCCL), "|")+
		" (nccl: what NCCL's tuner would run, per size; auto: the cheapest of commsim's own)")
	fl.StringVar(&f.format, "format", "table", "report: table|csv|json")
	fl.BoolVar(&f.asLogged, "as-logged", false, "with --algo nccl: at each size whose NCCL tuning lines (NCCL_DEBUG_SUBSYS=TUNING) say what NCCL ran, simulate that (algorithm, protocol, channels) instead of NCCL's tuner's choice")
	fl.BoolVar(&f.shipped, "shipped", false, "check every published run commsim ships (fidelity/nccl-logs), each on its own fabric, collective and NCCL environment, and print each log's errors and the pooled ones of the targets and of the held-out runs, as its fidelity test does (a few minutes; --nccl-machine applies to all)")
	fl.StringVar(&f.only, "only", "", "with --shipped: only the shipped logs whose file names contain this (b200, sendrecv, xxrjun-h100-allgather-8xH100)")
	fl.StringVar(&f.plot, "plot", "", "also draw the measured and the simulated busbw and time against size (where the simulated choice changes marked) into FILE.png or FILE.svg")
	f.ncclFlags.register(fl)
	return cmd
}

// fidReport is the check, as JSON.
type fidReport struct {
	Op        string `json:"op"`
	Algo      string `json:"algo"`
	Topology  string `json:"topology"`
	Ranks     int    `json:"ranks"`
	Log       string `json:"log"`
	LogFormat string `json:"log_format"`
	Shipped   string `json:"shipped,omitempty"`  // the shipped log it is
	Excluded  string `json:"excluded,omitempty"` // why that log is out of the targets
	// NCCLEnv is the NCCL environment of the log's run when it was taken
	// (no --nccl-* flag given): a shipped log's, or the one NCCL's own
	// lines in the log state, with the NCCL version they name.
	NCCLEnv     map[string]string `json:"nccl_env,omitempty"`
	NCCLVersion string            `json:"nccl_version,omitempty"`
	// NCCLPresumed is the release a shipped log's run presumably had,
	// whose constants it runs with, where its header states none.
	NCCLPresumed string `json:"nccl_presumed,omitempty"`
	// Machine is --nccl-machine as given: how the machine departs from
	// NCCL's model, which the simulation then follows.
	Machine string `json:"nccl_machine,omitempty"`
	// ChannelGBps is what one channel moves at most, in GB/s: the rate
	// --nccl-machine gives, or the one measured on the fabric's GPUs.
	ChannelGBps float64 `json:"channel_gbps,omitempty"`
	Skipped     int     `json:"skipped"` // sizes left out: 0 bytes
	// GPUsPerThread is how many GPUs each thread of the run drove, where
	// the log says and it is more than one (see calibrate.Log).
	GPUsPerThread int `json:"gpus_per_thread,omitempty"`
	// ThreadFloorUS is the least time a size of such a run takes: the
	// thread's launches on its GPUs, one after another (nccl.ThreadFloorUS).
	ThreadFloorUS float64 `json:"thread_floor_us,omitempty"`
	// Runs is how many runs of each size were simulated back to back, as
	// the log timed them, where more than one: a rooted collective's
	// overlap (calibrate.Log.TimedRuns).
	Runs   int       `json:"runs,omitempty"`
	Sizes  []fidSize `json:"sizes"`
	Median float64   `json:"median_abs_error"`
	Max    float64   `json:"max_abs_error"`
	Bands  []fidBand `json:"bands"`
	// Model is NCCL's own cost model's errors, with --algo nccl: the
	// baseline (sizes it prices carry nccl_model_us).
	Model *fidModel `json:"nccl_model,omitempty"`
	// Choices compares NCCL's tuner's choices with what the log says
	// NCCL ran, where it says (sizes it states carry nccl_ran).
	Choices *fidChoices `json:"nccl_choices,omitempty"`
	// KnownMisses are the shipped log's sizes off by more than 30% and
	// their causes, as the mapping file names them: given where the check
	// ran as the fidelity test does (the log's fabric and NCCL
	// environment, --algo nccl).
	KnownMisses []fidelity.Miss `json:"known_misses,omitempty"`
	// CostTable compares NCCL's cost table, where the log prints one
	// (NCCL_DEBUG_SUBSYS=TUNING), with commsim's model of it, with
	// --algo nccl (commsim tuning --log shows each cell).
	CostTable   *tuningLog `json:"nccl_cost_table,omitempty"`
	report      *fidelity.Report
	parsed      *calibrate.Log
	published   *fidelity.PublishedLog
	envNote     string // the environment the log states, as taken
	channelNote string // the channel rate measured on the GPUs, where it applies
}

type fidSize struct {
	Bytes       int64   `json:"bytes"`
	Line        int     `json:"line"`
	MeasuredUS  float64 `json:"measured_us"`
	PredictedUS float64 `json:"predicted_us"`
	RelError    float64 `json:"rel_error"`
	Algo        string  `json:"algo"`
	// ModelUS and ModelError are NCCL's cost model's time and error, where
	// it prices the size.
	ModelUS    *float64 `json:"nccl_model_us,omitempty"`
	ModelError *float64 `json:"nccl_model_rel_error,omitempty"`
	// Ran is what the log says NCCL ran at the size.
	Ran string `json:"nccl_ran,omitempty"`
	// HostBound says PredictedUS is the run's thread floor, more than the
	// simulated collective takes.
	HostBound bool `json:"host_bound,omitempty"`
}

type fidChoices struct {
	Logged   int  `json:"logged"`
	Agree    int  `json:"tuner_agrees"`
	Varied   int  `json:"lines_disagree"`
	AsLogged bool `json:"simulated_as_logged"`
	// Unread are the tuning lines that could not be read, and why.
	Unread []tuningUnread `json:"unread_tuning_lines,omitempty"`
}

type fidModel struct {
	Sizes  int       `json:"sizes"`
	Median float64   `json:"median_abs_error"`
	Max    float64   `json:"max_abs_error"`
	Bands  []fidBand `json:"bands"`
}

type fidBand struct {
	Band   string  `json:"band"`
	Range  string  `json:"range"`
	Sizes  int     `json:"sizes"`
	Median float64 `json:"median_abs_error"`
}

func (f *fidFlags) run(stdout, stderr io.Writer, opSet bool) error {
	var err error
	if f.format, err = reportFormat(f.format, "table", "csv", "json"); err != nil {
		return err
	}
	switch {
	case f.shipped:
		return f.runShipped(stdout, stderr)
	case f.only != "":
		return usagef("--only picks shipped logs, with --shipped")
	case f.log == "":
		return usagef("fidelity needs --log FILE (nccl-tests output), or --shipped")
	case f.asLogged && f.algo != algoNCCL:
		return usagef("--as-logged simulates what NCCL ran, with --algo nccl, not --algo %s", f.algo)
	}
	if err := checkPlotName(f.plot); err != nil {
		return err
	}
	var held heldWarnings
	data, lg, err := readLog(f.log, &held)
	if err != nil {
		return err
	}
	cat, err := fidelity.Published()
	if err != nil {
		return err
	}
	out, s, err := f.check(lg, cat.Find(data), stderr, &held, opSet, nil)
	if err != nil {
		return err
	}
	if s.tuner != nil {
		if err := out.checkCostTable(data, s.tuner); err != nil {
			fmt.Fprintf(stderr, "commsim: warning: %v; the cost table is not compared\n", err)
		}
	}
	if err := out.write(stdout, f.format); err != nil {
		return err
	}
	if f.plot == "" {
		return nil
	}
	if err := out.drawPlot(s, f.plot); err != nil {
		return fmt.Errorf("--plot %s: %w", f.plot, err)
	}
	fmt.Fprintf(stderr, "commsim: wrote %s\n", f.plot)
	return nil
}

// unnamedOpError is the usage error for a log (named name) that does not
// say which collective it measured, where --op was not given.
func unnamedOpError(name string) error {
	return usagef("%s does not name its collective (no \"# Collective test starting\" line, no op column); give --op", name)
}

// saysWhatRan refuses, for --as-logged, a log (named name) with no line
// saying what NCCL ran.
func saysWhatRan(lg *calibrate.Log, name string) error {
	if len(lg.NCCLRan) == 0 {
		why := "no NCCL_DEBUG=INFO lines of NCCL_DEBUG_SUBSYS=TUNING"
		if u := lg.UnreadRan; len(u) > 0 {
			why = fmt.Sprintf("none of its %d tuning lines could be read; the first, at line %d: %s", len(u), u[0].Line, u[0].Reason)
		}
		return usagef("--as-logged: %s does not say what NCCL ran (%s); without --as-logged each size runs as NCCL's tuner chooses", name, why)
	}
	return nil
}

// check simulates every size of lg (pub, where it is a shipped log) and
// reports it, its held warnings written to stderr once the flags fit the
// log; progress, when not nil, counts the sizes in place of a bar of its
// own.
func (f *fidFlags) check(lg *calibrate.Log, pub *fidelity.PublishedLog, stderr io.Writer, held *heldWarnings, opSet bool, progress func()) (*fidReport, *sweep, error) {
	if err := shippedOp(pub, f.op, opSet); err != nil {
		return nil, nil, err
	}
	topo, op := f.topo, f.op
	var topoNote string
	if topo == "" {
		if pub != nil {
			topo = pub.Topo
		} else {
			var err error
			if topo, topoNote, err = fabricOfLog("fidelity", f.log, lg); err != nil {
				return nil, nil, err
			}
		}
	}
	if !opSet {
		switch {
		case lg.Op != "":
			op = lg.Op
		case pub != nil:
			op = pub.Op
		default:
			return nil, nil, unnamedOpError(f.log)
		}
	}
	if pub != nil && !f.ncclFlags.envSet() {
		o, err := pub.Options()
		if err != nil {
			return nil, nil, err
		}
		f.ncclFlags.runEnv = &o
	}
	if f.asLogged {
		if err := saysWhatRan(lg, f.log); err != nil {
			return nil, nil, err
		}
	}
	var envNote string
	var logEnv map[string]string
	var err error
	if f.algo == algoNCCL {
		if envNote, logEnv, err = f.ncclFlags.useLogEnv(lg); err != nil {
			return nil, nil, err
		}
	}
	s, err := logSweep(f.log, lg, topo, op, f.op, f.algo, f.ncclFlags)
	if err != nil {
		return nil, nil, err
	}
	if pub != nil && s.topo.NumGPUs() != pub.Ranks {
		return nil, nil, usagef("%s ran on %d ranks, but topology %s has %d GPUs", pub.File, pub.Ranks, topo, s.topo.NumGPUs())
	}
	if err := countsFit(f.log, lg, s); err != nil {
		return nil, nil, err
	}

	held.release(stderr)
	if topoNote != "" {
		fmt.Fprintln(stderr, topoNote)
	}
	// bench's planner: every algorithm bench knows, auto's choice included.
	step, done := progress, func() {}
	if step == nil {
		bar := newProgress(stderr, fidelity.SimulatedSizes(lg, s.op))
		step, done = bar.step, bar.done
	}
	cfg := fidelity.Config{Op: s.op, Algo: s.algo, Plan: s.plan, AsLogged: f.asLogged, Progress: step}
	if s.tuner != nil {
		cfg.NCCL = s.tuner.Options // NCCL's cost model is priced in the same environment
	}
	rep, err := fidelity.Check(lg, s.topo, cfg)
	done()
	switch {
	case errors.Is(err, fidelity.ErrMismatch):
		return nil, nil, usageError{err}
	case err != nil:
		return nil, nil, err
	case len(rep.Rows) == 0:
		return nil, nil, usagef("%s: no size above 0 bytes to compare", f.log)
	}
	if c := rep.Choices; f.asLogged && c.Logged < len(rep.Rows) {
		fmt.Fprintf(stderr, "commsim: warning: --as-logged: the log says what NCCL ran at %d of its %d sizes (NCCL_DEBUG_SUBSYS=TUNING lines, in agreement); the others run as NCCL's tuner chooses\n", c.Logged, len(rep.Rows))
	}
	out := newFidReport(rep, topo, f.log, lg, pub)
	if rep.Algo == algoNCCL {
		out.Machine, out.ChannelGBps, out.channelNote = strings.TrimSpace(f.machine), s.tuner.ChannelGBps(), channelNote(s.tuner)
	}
	switch {
	case f.runEnv != nil && pub != nil && rep.Algo == algoNCCL:
		out.NCCLEnv, out.NCCLPresumed = pub.NCCLEnv, pub.NCCLPresumed
		if topo == pub.Topo && s.op.String() == pub.Op && f.defaultMachine() {
			out.KnownMisses = pub.Misses
		}
	case envNote != "":
		out.envNote, out.NCCLVersion, out.NCCLEnv = envNote, lg.NCCLVersion, logEnv
	}
	return out, s, nil
}

// checkCostTable compares the cost table the log's NCCL printed, where
// it printed one, with the one t's model gives; a table that cannot be
// read is an error.
func (r *fidReport) checkCostTable(data []byte, t *nccl.Tuner) error {
	logged, err := calibrate.ParseCostTable(r.Log, data)
	switch {
	case errors.Is(err, calibrate.ErrNoCostTable):
		return nil
	case err != nil:
		return err
	}
	c, err := fidelity.CheckCostTable(logged, t)
	if err != nil {
		return err
	}
	r.CostTable = newTuningLog(r.Log, logged, c)
	return nil
}

// write prints the check in format.
func (out *fidReport) write(stdout io.Writer, format string) error {
	switch format {
	case "json":
		return writeJSON(stdout, out)
	case "csv":
		head := []string{"bytes", "line", "measured_us", "predicted_us", "rel_error", "algo"}
		if out.Model != nil {
			head = append(head, "nccl_model_us", "nccl_model_rel_error")
		}
		ran := slices.ContainsFunc(out.Sizes, func(z fidSize) bool { return z.Ran != "" })
		if ran {
			head = append(head, "nccl_ran")
		}
		rows := [][]string{head}
		for _, z := range out.Sizes {
			row := []string{strconv.FormatInt(z.Bytes, 10), strconv.Itoa(z.Line), fmtFloat(z.MeasuredUS),
				fmtFloat(z.PredictedUS), fmtFloat(z.RelError), z.Algo}
			switch {
			case z.ModelUS != nil:
				row = append(row, fmtFloat(*z.ModelUS), fmtFloat(*z.ModelError))
			case out.Model != nil:
				row = append(row, "", "")
			}
			if ran {
				row = append(row, z.Ran)
			}
			rows = append(rows, row)
		}
		return writeCSVRows(stdout, rows)
	}
	return out.writeTable(stdout)
}

func newFidReport(rep *fidelity.Report, topo, log string, lg *calibrate.Log, pub *fidelity.PublishedLog) *fidReport {
	out := &fidReport{Op: rep.Op.String(), Algo: rep.Algo, Topology: topo, Ranks: rep.Ranks, Log: log, LogFormat: lg.Format,
		Skipped: rep.Skipped, Sizes: []fidSize{}, Median: rep.Median, Max: rep.Max, report: rep, parsed: lg, published: pub}
	if lg.GPUsPerThread > 1 {
		out.GPUsPerThread, out.ThreadFloorUS = lg.GPUsPerThread, rep.ThreadFloorUS
	}
	if rep.Runs > 1 {
		out.Runs = rep.Runs
	}
	if pub != nil {
		out.Shipped, out.Excluded = pub.File, pub.Exclude
	}
	for _, r := range rep.Rows {
		z := fidSize{Bytes: r.Bytes, Line: r.Line, MeasuredUS: r.MeasuredUS, PredictedUS: r.PredictedUS, RelError: r.Error, Algo: r.Algo, Ran: r.Ran, HostBound: r.HostBound}
		if r.Priced() {
			z.ModelUS, z.ModelError = &r.ModelUS, &r.ModelError
		}
		out.Sizes = append(out.Sizes, z)
	}
	out.Bands = fidBands(rep.Bands)
	out.Model = fidModelOf(rep.Model)
	if c := rep.Choices; c.Logged+c.Varied > 0 || c.AsLogged || len(c.Unread) > 0 {
		out.Choices = &fidChoices{Logged: c.Logged, Agree: c.Agree, Varied: c.Varied, AsLogged: c.AsLogged}
		for _, u := range c.Unread {
			out.Choices.Unread = append(out.Choices.Unread, tuningUnread{u.Line, u.Reason})
		}
	}
	return out
}

// fidModelOf is summary as JSON, nil where it has no sizes.
func fidModelOf(s fidelity.Summary) *fidModel {
	if s.Sizes == 0 {
		return nil
	}
	return &fidModel{Sizes: s.Sizes, Median: s.Median, Max: s.Max, Bands: fidBands(s.Bands)}
}

func fidBands(bands []fidelity.BandSummary) []fidBand {
	out := make([]fidBand, 0, len(bands))
	for _, b := range bands {
		out = append(out, fidBand{b.Band.Key, b.Band.Name, b.Sizes, b.Median})
	}
	return out
}

// drawPlot charts the measured and the simulated out-of-place sweep of
// the check, s's, into file, with the sizes where the simulated choice
// changes marked.
func (out *fidReport) drawPlot(s *sweep, file string) error {
	beside := ""
	if out.Model != nil {
		beside = " beside NCCL's cost model"
	}
	ch := &sweepChart{
		title:     fmt.Sprintf("%s on %s: %d ranks, out of place; measured (%s) and simulated (--algo %s)%s, %s", out.Op, out.Topology, out.Ranks, filepath.Base(out.Log), out.Algo, beside, out.fitted()),
		sizeLabel: sizeMeaning(s.op),
		bwLabel:   "bus bandwidth per rank (GB/s)\nbusbw = " + busbwFormula(s.op) + ", as nccl-tests defines it",
		marksName: "simulated choice changes",
	}
	measured, simulated := chartSeries{name: "measured"}, chartSeries{name: "simulated"}
	model := chartSeries{name: "NCCL's cost model"}
	p := s.topo.NumGPUs()
	for i, z := range out.Sizes {
		_, moved := s.spec(z.Bytes)
		measured.add(z.Bytes, timed(z.MeasuredUS*1e-6, moved, s.op, p))
		simulated.add(z.Bytes, timed(z.PredictedUS*1e-6, moved, s.op, p))
		if z.ModelUS != nil {
			model.add(z.Bytes, timed(*z.ModelUS*1e-6, moved, s.op, p))
		}
		if prev := out.Sizes[max(i-1, 0)]; i > 0 && choiceKey(prev.Algo) != choiceKey(z.Algo) {
			ch.marks = append(ch.marks, chartMark{lo: prev.Bytes, hi: z.Bytes, from: choiceKey(prev.Algo), to: choiceKey(z.Algo)})
		}
	}
	ch.series = []chartSeries{measured, simulated}
	if out.Model != nil {
		ch.series = append(ch.series, model)
	}
	return ch.write(file)
}

// envString writes env as NAME=value pairs, sorted by name.
func envString(env map[string]string) string {
	pairs := make([]string, 0, len(env))
	for k, v := range env {
		pairs = append(pairs, k+"="+v)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, " ")
}

// fitted says what of the machine the simulation takes from outside NCCL's
// model: nothing, or what --nccl-machine gave (calibrate's fit, say).
func (r *fidReport) fitted() string {
	if r.Machine == "" {
		return "nothing fitted"
	}
	return "the machine as --nccl-machine " + r.Machine + " says"
}

func (r *fidReport) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "# commsim fidelity: %s, algorithm %s, on %s (%d ranks); %s\n", r.Op, r.Algo, r.Topology, r.Ranks, r.fitted())
	if r.channelNote != "" {
		fmt.Fprintf(w, "# %s\n", r.channelNote)
	}
	fmt.Fprintf(w, "# log: %s (%s), %d sizes, out-of-place times", r.Log, r.LogFormat, len(r.Sizes))
	if r.Skipped > 0 {
		fmt.Fprintf(w, "; size 0 left out")
	}
	fmt.Fprintln(w)
	if p := r.published; p != nil {
		fmt.Fprintf(w, "# shipped log %s: %s; NCCL %s", p.File, p.Hardware, p.NCCLVersion)
		if p.NCCLPresumed != "" {
			fmt.Fprintf(w, ", presumably %s (the mapping file's notes say why)", p.NCCLPresumed)
			if r.NCCLPresumed == "" && r.Algo == algoNCCL {
				fmt.Fprintf(w, ", not applied: the flags given set NCCL's environment")
			}
		}
		fmt.Fprintln(w)
		var took []string
		if r.NCCLPresumed != "" {
			took = append(took, "NCCL "+r.NCCLPresumed+"'s constants (presumed)")
		}
		if len(r.NCCLEnv) > 0 {
			took = append(took, envString(r.NCCLEnv))
		}
		if len(took) > 0 {
			fmt.Fprintf(w, "# NCCL's tuner runs in that run's environment (the mapping file's): %s\n", strings.Join(took, ", "))
		}
		if p.Exclude != "" {
			fmt.Fprintf(w, "# excluded from the fidelity targets: %s\n", p.Exclude)
		}
	}
	if r.envNote != "" {
		fmt.Fprintf(w, "# %s\n", r.envNote)
	}
	if r.GPUsPerThread > 1 {
		fmt.Fprintf(w, "# %s; a size held there is host-bound\n", threadFloorNote(r.GPUsPerThread, r.ThreadFloorUS))
	}
	if r.Runs > 1 {
		said := "the log's -n × -m"
		if r.parsed.Iters == 0 {
			said = "nccl-tests' default -n, the log stating none"
		}
		fmt.Fprintf(w, "# each size simulated as %d runs back to back (%s), whose mean nccl-tests reports: a %s's runs overlap\n", r.Runs, said, r.Op)
	}
	if c := r.CostTable; c != nil && c.Cells > 0 {
		fmt.Fprintf(w, "# NCCL's cost table in the log: %d of the %d latencies both sides price agree with commsim's model of it, %d of the %d bandwidths either side's tuner may pick (commsim tuning --log shows each cell)\n",
			c.LatenciesAgree, c.Latencies, c.BandwidthsAgree, c.Bandwidths)
	}
	if c := r.CostTable; c != nil && len(c.Channels) > 0 {
		fmt.Fprintf(w, "# NCCL's channels in the log (line %d), and commsim's model's: %s\n", c.ChannelsLine, describeChannels(c.Channels))
	}
	if err := r.report.WriteTable(w); err != nil || len(r.KnownMisses) == 0 {
		return err
	}
	fmt.Fprintf(w, "# sizes off by more than %.0f%% (issue #16's bound on any size), and why, as the mapping file names it:\n", 100*fidelity.MissBound)
	for _, m := range r.KnownMisses {
		fmt.Fprintf(w, "#   %s: %s\n", m.Range(), m.Cause)
	}
	return nil
}

// shippedOp refuses an --op that a shipped log's mapping file (pub; nil
// for any other log) contradicts.
func shippedOp(pub *fidelity.PublishedLog, op string, opSet bool) error {
	if pub == nil || !opSet {
		return nil
	}
	o, err := parseOp(op)
	if err != nil {
		return err
	}
	if o.String() != pub.Op {
		return usagef("--op %s, but %s measured %s (its mapping file, fidelity/nccl-logs/logs.yaml)", op, pub.File, pub.Op)
	}
	return nil
}
