// Package fidelity compares the simulator's predictions with published
// nccl-tests runs, size by size, with no fitting: how far is commsim from
// the hardware, as it stands?
//
// Check takes a parsed log (calibrate.ParseLog) and the fabric it was
// measured on, runs every size of it on the simulator (timing-only, ranks
// mirrored where the fabric allows) with nccl-tests' meaning of size
// (verify.SpecForSize, which bench uses too), and reports the measured
// and predicted out-of-place times, the error of each size, and the
// median errors per size band; with NCCL's tuner as the planner, NCCL's
// own cost model's time and error beside them, the baseline a simulation
// of NCCL has to beat. Summarize pools the rows of several logs.
//
// The package carries the published runs it is checked against
// (Published): the logs as their sources printed them, headers included,
// and a mapping file (nccl-logs/logs.yaml) that names each log's fabric,
// NCCL version and settings, why a log is left out of the targets, and
// what is known of why the model misses a size by more than 30% (Miss).
// Its test runs the check on every one and holds the errors to bounds
// recorded there, and every such miss to a named cause, so a change that
// makes commsim less faithful fails.
//
// calibrate fits a fabric to a log; fidelity only measures the distance.
package fidelity

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// Config says which collective a log measured and how to plan it.
type Config struct {
	// Op is the collective, needed when the log does not name it
	// (nccl-tests prints it in "# Collective test starting"); when both
	// name one they must agree.
	Op ops.Op
	// Algo is an ops algorithm name, "auto" (the cost model's choice per
	// size) or "nccl" (what NCCL's tuner would run per size, package
	// nccl, in the environment NCCL says); "" means nccl.
	Algo string
	// NCCL is the environment NCCL's tuner runs in: the default planner's
	// for nccl, and, whatever the planner, the one NCCL's own cost model
	// is priced in (Row.ModelUS).
	NCCL nccl.Options
	// Plan, when not nil, makes the plan of each size's spec (whose Algo
	// is Algo) instead of the default (ops.Compile, or ops.Select on the
	// topology for auto). A caller with selectors of its own (bench's, a
	// tuner's) passes them here, and every name they know works. Sizes
	// are planned on several goroutines at once.
	Plan func(spec ops.Spec) (*ops.Plan, error)
	// AsLogged, with Algo nccl, simulates at each size what the log says
	// NCCL ran there (calibrate.Log.NCCLRan: its algorithm, protocol and,
	// where stated, channels for rings, trees, NVLS and NVLSTree; NCCL's
	// own choice of channels for the others) instead of NCCL's tuner's
	// choice, which the sizes it does not state keep: what the simulation
	// misses, with NCCL's choice taken out of it. A size whose lines
	// disagree keeps the tuner's choice.
	AsLogged bool
	// Progress, when not nil, is called once for each size simulated,
	// from whichever goroutine simulated it: a large fabric's check can
	// take minutes.
	Progress func()
}

// Row is one size of a log, measured and predicted.
type Row struct {
	Bytes int64 // the log's size, in nccl-tests' meaning
	Line  int   // the log's line of it
	// Algo is the algorithm the prediction ran (auto's choice).
	Algo        string
	MeasuredUS  float64 // out of place
	PredictedUS float64
	// Error is (predicted − measured) / measured: below 0 where commsim
	// is too fast.
	Error float64
	// ModelUS is NCCL's own cost model's time for what it would run (its
	// tuner's estimate, nothing simulated), with Algo nccl; 0 where the
	// model has none (point-to-point, which NCCL does not price) or the
	// algorithm is another. ModelError is its error, as Error.
	ModelUS, ModelError float64
	// Ran is what the log says NCCL ran at this size (calibrate.Ran's
	// label, ring/LL128/16ch; the first, and "(lines disagree)", where its
	// lines do), "" where it does not say.
	Ran string
	// HostBound says PredictedUS is the run's thread floor
	// (Report.ThreadFloorUS), longer than the simulated collective.
	HostBound bool
}

// Priced reports whether NCCL's own cost model gives the row a time.
func (r Row) Priced() bool { return r.ModelUS > 0 }

// Report is a log checked against a fabric.
type Report struct {
	Op       ops.Op
	Algo     string // as asked; Row.Algo says what ran
	Topology string
	Ranks    int
	DType    hw.DType
	// Rows are the log's sizes above 0 bytes, smallest first. nccl-tests
	// prints size 0 for sizes under one element per rank; those rows time
	// an empty call and are left out (Skipped counts them).
	Rows    []Row
	Skipped int
	// ThreadFloorUS is the least time a size of the run takes where each
	// of its threads drove several GPUs (nccl.ThreadFloorUS of the log's
	// GPUsPerThread: nccl-tests -g N launches every collective on them in
	// turn); 0 for one GPU a thread. No prediction is below it.
	ThreadFloorUS float64
	// Runs is how many runs of each size were simulated back to back, as
	// nccl-tests timed them (calibrate.Log.TimedRuns): the log's -n × -m
	// for a collective whose runs overlap (calibrate.RunsOverlap), 1 for
	// the others.
	Runs int
	Summary
	// Model sums up the rows' ModelError over those with a ModelUS: the
	// baseline the simulation is to beat. Its Sizes is 0 when none has.
	Model Summary
	// Choices, with Algo nccl, compares NCCL's tuner's choice with what
	// the log says NCCL ran.
	Choices Choices
}

// Choices counts the sizes where the log says what NCCL ran (NCCL's
// tuning lines, calibrate.Log.NCCLRan) and, of those, the ones where
// NCCL's tuner, as commsim models it, picks the same algorithm and
// protocol; Varied counts those whose lines disagree, left out of both.
type Choices struct {
	Logged, Agree, Varied int
	// AsLogged says the rows with a logged choice simulated it.
	AsLogged bool
	// Unread are the log's tuning lines that could not be read.
	Unread []calibrate.UnreadLine
}

// Band is a range of sizes, Lo <= bytes < Hi.
type Band struct {
	Key    string // as in the mapping file: small, medium, large
	Name   string // as printed
	Lo, Hi int64
}

// Bands are the size bands fidelity is judged in: latency-bound sizes,
// the middle where latency and bandwidth share the time, and
// bandwidth-bound sizes.
var Bands = []Band{
	{"small", "< 64 KiB", 0, 64 << 10},
	{"medium", "64 KiB–16 MiB", 64 << 10, 16 << 20},
	{"large", "≥ 16 MiB", 16 << 20, math.MaxInt64},
}

// BandSummary is the median absolute error of one band's sizes.
type BandSummary struct {
	Band   Band
	Sizes  int
	Median float64 // 0 when Sizes is 0
}

// Summary is the absolute errors of a set of rows: their median, their
// largest, and the median of each band.
type Summary struct {
	Sizes       int
	Median, Max float64
	MaxBytes    int64 // the size of the largest error
	Bands       []BandSummary
}

// Summarize sums up rows, of one log or pooled over many.
func Summarize(rows []Row) Summary {
	s := Summary{Sizes: len(rows)}
	all := make([]float64, len(rows))
	for i, r := range rows {
		all[i] = math.Abs(r.Error)
		if all[i] > s.Max || i == 0 {
			s.Max, s.MaxBytes = all[i], r.Bytes
		}
	}
	s.Median = median(all)
	for _, b := range Bands {
		var errs []float64
		for _, r := range rows {
			if r.Bytes >= b.Lo && r.Bytes < b.Hi {
				errs = append(errs, math.Abs(r.Error))
			}
		}
		s.Bands = append(s.Bands, BandSummary{Band: b, Sizes: len(errs), Median: median(errs)})
	}
	return s
}

// median is the middle value (the mean of the two middle ones for an even
// count), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// ErrMismatch is wrapped by Check's errors for a log that does not fit
// what it is checked as: another collective or rank count, an element
// type or a size the fabric cannot hold. Bad input, as against a size the
// simulator fails to run.
var ErrMismatch = errors.New("the log does not fit")

// Check predicts every size of lg on topo and compares. The topology must
// have one GPU per rank of the log; the element type is the log's (f32
// where it names none). A size the simulator cannot run is an error
// naming the log's line. Where each thread of the run drove several GPUs
// (lg.GPUsPerThread), no prediction is below their launches
// (nccl.ThreadFloorUS; Row.HostBound).
func Check(lg *calibrate.Log, topo *topology.Topology, cfg Config) (*Report, error) {
	if lg == nil || topo == nil {
		return nil, errors.New("fidelity: check: no log or no topology")
	}
	op := cfg.Op
	if lg.Op != "" {
		logOp, err := ops.ParseOp(lg.Op)
		switch {
		case err != nil:
			return nil, fmt.Errorf("fidelity: %w: %w", ErrMismatch, err)
		case op != 0 && op != logOp:
			return nil, fmt.Errorf("fidelity: %w: asked for %s, but the log measured %s", ErrMismatch, op, logOp)
		}
		op = logOp
	}
	if op == 0 {
		return nil, fmt.Errorf("fidelity: %w: the log does not name its collective; set Config.Op", ErrMismatch)
	}
	p := topo.NumGPUs()
	if lg.Ranks < 0 {
		return nil, fmt.Errorf("fidelity: %w: the log has %d ranks", ErrMismatch, lg.Ranks)
	}
	for _, s := range lg.Samples {
		if !s.Valid() { // a Log made by hand, not by ParseLog
			return nil, fmt.Errorf("fidelity: %w: line %d: %d bytes in %v µs is no measurement", ErrMismatch, s.Line, s.Bytes, s.TimeUS)
		}
	}
	if lg.Ranks > 0 && lg.Ranks != p {
		return nil, fmt.Errorf("fidelity: %w: the log has %d ranks, but topology %s has %d GPUs", ErrMismatch, lg.Ranks, topo.Name, p)
	}
	dt, ok := lg.DType()
	if !ok {
		if lg.Type != "" {
			return nil, fmt.Errorf("fidelity: %w: the log's element type %q has no commsim dtype of its size", ErrMismatch, lg.Type)
		}
		dt = hw.F32
	}
	rep := &Report{Op: op, Algo: cmp.Or(cfg.Algo, "nccl"), Topology: topo.Name, Ranks: p, DType: dt}
	if cfg.AsLogged && rep.Algo != "nccl" {
		return nil, fmt.Errorf("fidelity: AsLogged simulates NCCL's logged choices, with Algo nccl, not %s", rep.Algo)
	}
	// NCCL's tuner in the configured environment: the default planner of
	// nccl, and what prices NCCL's own model and runs the sizes as logged.
	var ncclTuner *nccl.Tuner
	if rep.Algo == "nccl" {
		var err error
		if ncclTuner, err = nccl.NewTuner(topo, cfg.NCCL); err != nil {
			return nil, fmt.Errorf("fidelity: %w", err)
		}
	}
	plan := cfg.Plan
	if plan == nil {
		plan = defaultPlanner(topo, rep.Algo, ncclTuner)
	}
	redop, err := lg.ReduceOp()
	if err != nil {
		return nil, fmt.Errorf("fidelity: %w: %w", ErrMismatch, err)
	}
	base := ops.Spec{Op: op, Algo: rep.Algo, Ranks: p, DType: dt, Redop: redop}
	var specs []ops.Spec
	for _, s := range lg.Samples {
		spec, _ := verify.SpecForSize(base, s.Bytes)
		if !simulated(s.Bytes, op) {
			rep.Skipped++
			continue
		}
		if spec.Count == 0 {
			return nil, fmt.Errorf("fidelity: %w: line %d: %d bytes of %s hold no element per rank on %d ranks (nccl-tests would print size 0)",
				ErrMismatch, s.Line, s.Bytes, dt, p)
		}
		specs = append(specs, spec)
		row := Row{Bytes: s.Bytes, Line: s.Line, MeasuredUS: s.TimeUS}
		if ran, ok := lg.NCCLRan[s.Bytes]; ok {
			row.Ran = ran.String()
			if ran.Varies {
				row.Ran += " (lines disagree)"
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Choices.AsLogged, rep.Choices.Unread = cfg.AsLogged, lg.UnreadRan
	rep.Runs = lg.TimedRuns(op)
	secs, algos, err := predict(topo, rep.Runs, len(specs), func(i int) (*ops.Plan, error) {
		ran, ok := lg.NCCLRan[rep.Rows[i].Bytes]
		if !cfg.AsLogged || !ok || ran.Varies {
			p, err := plan(specs[i])
			if err == nil {
				err = specs[i].Made(p) // the caller's planner's plan is the size's
			}
			return p, err
		}
		t, err := ran.Tuner(ncclTuner, specs[i])
		var p *ops.Plan
		if err == nil {
			p, _, err = t.Plan(specs[i])
		}
		if err != nil {
			return nil, fmt.Errorf("%w: NCCL ran %s here, which this fabric cannot: %w", ErrMismatch, ran, err)
		}
		return p, nil
	}, cfg.Progress)
	if err != nil {
		var se *calibrate.SizeError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("fidelity: line %d (%d bytes): %w", rep.Rows[se.Index].Line, rep.Rows[se.Index].Bytes, se.Err)
		}
		return nil, fmt.Errorf("fidelity: %w", err)
	}
	rep.ThreadFloorUS = nccl.ThreadFloorUS(lg.GPUsPerThread)
	for i := range rep.Rows {
		r := &rep.Rows[i]
		r.PredictedUS, r.Algo = secs[i]*1e6, algos[i]
		if r.PredictedUS < rep.ThreadFloorUS {
			r.PredictedUS, r.HostBound = rep.ThreadFloorUS, true
		}
		r.Error = r.PredictedUS/r.MeasuredUS - 1
	}
	rep.Summary = Summarize(rep.Rows)
	if rep.Algo == "nccl" {
		if err := priceModel(rep, ncclTuner, specs, lg.NCCLRan); err != nil {
			return nil, fmt.Errorf("fidelity: %w", err)
		}
	}
	return rep, nil
}

// priceModel sets each row's ModelUS, NCCL's cost model's time for its
// choice on the row's spec, and sums them up in rep.Model.
func priceModel(rep *Report, tuner *nccl.Tuner, specs []ops.Spec, ran map[int64]calibrate.Ran) error {
	for i := range rep.Rows {
		r := &rep.Rows[i]
		c, err := tuner.Choose(specs[i])
		if err != nil {
			return fmt.Errorf("line %d (%d bytes): %w", r.Line, r.Bytes, err)
		}
		if us := c.NCCL.TimeUS; us > 0 && !math.IsInf(us, 0) {
			r.ModelUS, r.ModelError = us, us/r.MeasuredUS-1
		}
		if logged, ok := ran[r.Bytes]; ok {
			switch {
			case logged.Varies:
				rep.Choices.Varied++
			case logged.Algo == c.NCCL.Algo && logged.Proto == c.NCCL.Protocol:
				rep.Choices.Agree++
				fallthrough
			default:
				rep.Choices.Logged++
			}
		}
	}
	rep.Model = Summarize(ModelRows(rep.Rows))
	return nil
}

// ModelRows are the rows NCCL's cost model priced, each with its error as
// Error: what Summarize sums up as the model's.
func ModelRows(rows []Row) []Row {
	var priced []Row
	for _, r := range rows {
		if r.Priced() {
			priced = append(priced, Row{Bytes: r.Bytes, Line: r.Line, Algo: r.Algo, MeasuredUS: r.MeasuredUS, PredictedUS: r.ModelUS, Error: r.ModelError})
		}
	}
	return priced
}

// simulated says whether Check simulates a log's size of bytes of op: a
// size above 0, of a collective that moves data.
func simulated(bytes int64, op ops.Op) bool { return bytes > 0 && op != ops.Barrier }

// SimulatedSizes is how many of lg's sizes Check simulates for op, and so
// calls Config.Progress for.
func SimulatedSizes(lg *calibrate.Log, op ops.Op) int {
	if lg == nil {
		return 0
	}
	n := 0
	for _, s := range lg.Samples {
		if simulated(s.Bytes, op) {
			n++
		}
	}
	return n
}

// defaultPlanner compiles a spec, picks the plan the cost model finds
// cheapest on topo for auto, as bench does, or NCCL's tuner's for nccl.
func defaultPlanner(topo *topology.Topology, algo string, tuner *nccl.Tuner) func(ops.Spec) (*ops.Plan, error) {
	switch algo {
	case "nccl":
		return func(spec ops.Spec) (*ops.Plan, error) {
			p, _, err := tuner.Plan(spec)
			return p, err
		}
	case "auto":
		return func(spec ops.Spec) (*ops.Plan, error) {
			p, _, err := ops.Select(spec, topo)
			return p, err
		}
	}
	return ops.Compile
}

// predict times the n sizes' plans, out of place, runs times back to
// back, on a timing-only cluster of topo that mirrors symmetric plans,
// sharing the sizes among one cluster per core (calibrate.Simulate), and
// names each plan.
func predict(topo *topology.Topology, runs, n int, plan func(i int) (*ops.Plan, error), progress func()) ([]float64, []string, error) {
	algos := make([]string, n)
	secs, err := calibrate.Simulate(topo, sim.Config{TimingOnly: true, Symmetry: true}, runs, n, func(i int) (*ops.Plan, error) {
		pl, err := plan(i)
		if err == nil {
			algos[i] = nccl.Label(pl)
		}
		return pl, err
	}, progress)
	return secs, algos, err
}
