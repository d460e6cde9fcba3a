package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/fidelity"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// calibrate's flags, I/O and report; package calibrate reads the log and
// makes the fit.

const (
	maxLogBytes  = 64 << 20 // --log, counted as read
	residualWarn = 0.10     // warn where |fitted/measured − 1| exceeds this
	plateauFlat  = 1.10     // a plateau: times within this ratio …
	plateauSpan  = 8        // … over sizes spanning at least this factor
)

type calFlags struct {
	log, topo, op, algo, out, format, minBytes, maxBytes string
	asLogged                                             bool
	ncclFlags
	envNote string // the environment the log states, as taken
}

func newCalibrateCmd() *cobra.Command {
	var f calFlags
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Fit NCCL's machine, or link latency and bandwidth, to an nccl-tests log",
		Long: `calibrate reads nccl-tests output (the text table, old or new; its JSON
report, -J; a CSV naming size(B) and time(us) columns; or commsim bench's
--format json records; rank tags, time stamps, dates and banners allowed) and fits the simulator to the measured out-of-place times (least
relative error: with --algo nccl a robust sum, Cauchy's, that counts each
size's error squared while under 5% and ever less past it, so a few sizes no
factor explains do not set the factors for all; otherwise least squares).

With --algo nccl (the default) every size runs as NCCL's tuner chooses it
(package nccl, in the environment the --nccl-* flags give), and the fit finds
how the machine departs from NCCL's model: the launch latency, the per-hop
latency, each used protocol's channel speed (nccl.Machine) and, on several
nodes, the network links' bandwidth (NCCL's tuner still sees their line
rate), by Gauss-Newton on the factors' logarithms from NCCL's model (all ×1),
each within ×0.05 to ×20. It then fits again on every other size (the first,
the third, …) and predicts the others: the held-out error says how well the
fitted machine predicts sizes it has not seen. A factor the log does not
determine stays at ×1 and is named, and so is one that ends at a bound (the
log pulls it further: read it as at most or at least). Where the log carries
NCCL's tuning lines (NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=TUNING),
--as-logged runs at each size what NCCL says it ran there instead, so that
the fit describes the machine rather than where the tuner's guess and NCCL's
choice part. A channel's rate, which it does not fit, holds throughout: by default
the one measured on the fabric's GPUs, or what --nccl-machine gives alone
(channel=GB/s, or channel=none for NCCL's model's shares); the command it
prints to predict with carries it.

With any other algorithm it scales every link's latency by one factor and its
effective bandwidth by another, keeping the ratios between link classes
(Nelder-Mead from a linear α-β start).

It reports the factors, the links they change and, per size, measured and
fitted times. Warnings (stderr, and "warnings" in JSON) flag sizes off by over
10% and, for the two-scale fit, small-size plateaus. Only --out writes the
calibrated topology (YAML, for --topo FILE). For a log commsim ships
(fidelity's published runs, known by their content) --topo and --op may be
left out, and NCCL's tuner runs in the NCCL environment its run had (the
mapping file's nccl_env, with its release's constants: stated, or presumed
where the mapping file says why) unless a --nccl-* flag but --nccl-machine
is given. Another log needs no --topo where its nccl-tests device lines
name a preset, as fidelity takes it (the preset is named on stderr).`,
		Example: `  commsim calibrate --log all_reduce.txt --topo dgx-h100 --out dgx-h100-fitted.yaml
  commsim calibrate --log vultr-b200-allreduce-16xB200.txt          # a shipped log: its fabric is known
  commsim calibrate --log ag.csv --topo switch:8,bw=200GB/s --op allgather --algo ring --format json
  commsim calibrate --log all_reduce.txt --topo dgx-h100 --algo ring -b 16MiB   # fit above a latency plateau
  commsim bench --topo dgx-h100-fitted.yaml --algo ring --timing-only`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.OutOrStdout(), cmd.ErrOrStderr(), cmd.Flags().Changed("op"))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.log, "log", "", "nccl-tests output: its text table, its JSON report (-J), a CSV or bench's JSON records, at most 64 MiB (required)")
	fl.StringVar(&f.topo, "topo", "", "topology to calibrate: a spec, a preset or a YAML file (default: a shipped log's, or the preset the log's device lines name, as fidelity takes it)")
	fl.StringVar(&f.op, "op", "", "collective the log measured (default: the log's, or a shipped log's; a log that names none needs it)")
	fl.StringVar(&f.algo, "algo", algoNCCL, "algorithm to simulate: "+strings.Join(append(ops.Algorithms(), algoNCCL), "|")+
		" (nccl: what NCCL's tuner would run per size, fitting NCCL's machine; others: two link scales)")
	fl.BoolVar(&f.asLogged, "as-logged", false, "with --algo nccl: at each size whose NCCL tuning lines (NCCL_DEBUG_SUBSYS=TUNING) say what NCCL ran, fit with that (algorithm, protocol, channels) instead of NCCL's tuner's choice")
	fl.StringVar(&f.out, "out", "", "write the calibrated topology (YAML) to this file")
	fl.StringVar(&f.format, "format", "table", "report: table|csv|json")
	fl.StringVarP(&f.minBytes, "min-bytes", "b", "0", "fit only sizes from this one up (e.g. above a latency plateau)")
	fl.StringVarP(&f.maxBytes, "max-bytes", "e", "1TiB", "fit only sizes up to this one")
	f.ncclFlags.register(fl)
	return cmd
}

// heldWarnings holds what readLog says of a log until the command has
// checked its flags against the log, so that a usage error stays the one
// line it is; release writes them out (nothing on a nil one).
type heldWarnings struct{ bytes.Buffer }

func (h *heldWarnings) release(w io.Writer) {
	if h != nil {
		w.Write(h.Bytes())
		h.Reset()
	}
}

// readLog reads and parses the log at path (--log), with a warning on
// stderr where it is a JSON report that ends early, or where a thread
// drove several GPUs. A bare file name that is not here but names a log
// commsim ships reads the shipped copy, so that the help's examples run
// from anywhere.
func readLog(path string, stderr io.Writer) ([]byte, *calibrate.Log, error) {
	data, err := readFileAtMost(path, maxLogBytes, path)
	if errors.Is(err, fs.ErrNotExist) && filepath.Base(path) == path {
		if shipped := shippedLogNamed(path); shipped != nil {
			fmt.Fprintf(stderr, "commsim: %s is not in this directory: reading the copy commsim ships (fidelity/nccl-logs/%s)\n", path, path)
			data, err = shipped, nil
		}
	}
	if err != nil {
		return nil, nil, usagef("--log: %v", err)
	}
	lg, err := calibrate.ParseLog(path, data)
	if err != nil {
		return nil, nil, usageError{err}
	}
	if lg.ShortLastRow > 0 {
		fmt.Fprintf(stderr, "commsim: warning: %s:%d: the log ends on a row with fewer columns than the one before, as a cut copy or a run that died mid-row leaves it; its out-of-place time is read\n", path, lg.ShortLastRow)
	}
	if lg.JSONLayout > calibrate.LatestJSONLayout {
		fmt.Fprintf(stderr, "commsim: warning: %s: the JSON report's layout version %d is newer than the %d commsim knows; the keys it reads are read as version %d has them\n", path, lg.JSONLayout, calibrate.LatestJSONLayout, calibrate.LatestJSONLayout)
	}
	if lg.Partial {
		fmt.Fprintf(stderr, "commsim: warning: %s: the JSON report ends early, as a run that died mid-sweep leaves it; its %d finished sizes are read\n", path, len(lg.Samples))
	}
	if n := lg.InPlaceOnly; n > 0 {
		fmt.Fprintf(stderr, "commsim: warning: %s: %d of its %d sizes have no out-of-place result; their in-place times are taken\n", path, n, len(lg.Samples))
	}
	if n := lg.Repeated; n > 0 {
		fmt.Fprintf(stderr, "commsim: warning: %s: %d of its %d sizes %s several rows (a rerun): each size's times are averaged\n", path, n, len(lg.Samples), plural(n, "has", "have"))
	}
	if n := lg.OtherRedopRows; n > 0 {
		fmt.Fprintf(stderr, "commsim: warning: %s: %d %s of other reductions (%s; nccl-tests' -o all) left out: its %s rows are read\n", path, n, plural(n, "row", "rows"), strings.Join(lg.OtherRedops, ", "), lg.Redop)
	}
	if len(lg.Disagree) > 0 {
		fmt.Fprintf(stderr, "commsim: warning: %s: NCCL's lines disagree (%s): the first of each is taken\n", path, strings.Join(lg.Disagree, "; "))
	}
	if n := lg.WrongRows; n > 0 {
		fmt.Fprintf(stderr, "commsim: warning: %s: %d %s wrong elements (#wrong above 0, first at line %d): the run's results were wrong; its times are read as they stand\n", path, n, plural(n, "row reports", "rows report"), lg.FirstWrong)
	}
	return data, lg, nil
}

// fitSizes are the log's sizes within [lo, hi] that the fit uses, each as
// the sweep's collective, with a warning for the sizes that hold no
// element per rank (all of a barrier's); fewer than two is a usage error.
func (f *calFlags) fitSizes(s *sweep, lg *calibrate.Log, lo, hi int64) ([]ops.Spec, []calibrate.Sample, []string, error) {
	var specs []ops.Spec
	var rows []calibrate.Sample
	var warnings []string
	skipped, outside := 0, 0
	for _, r := range lg.Samples {
		spec, _ := s.spec(r.Bytes)
		if spec.Count == 0 || s.op == ops.Barrier {
			skipped++
			continue
		}
		if r.Bytes >= lo && r.Bytes <= hi {
			specs, rows = append(specs, spec), append(rows, r)
		} else {
			outside++
		}
	}
	if skipped > 0 {
		warnings = append(warnings, fmt.Sprintf("skipped %d %s that hold no element per rank", skipped, plural(skipped, "size", "sizes")))
	}
	if len(rows) < 2 {
		var why []string
		if outside > 0 {
			why = append(why, fmt.Sprintf("%d outside --min-bytes %s to --max-bytes %s", outside, f.minBytes, f.maxBytes))
		}
		if skipped > 0 {
			why = append(why, fmt.Sprintf("%d holding no element per rank", skipped))
		}
		reason := ""
		if len(why) > 0 {
			reason = fmt.Sprintf(" (of its %d: %s)", len(lg.Samples), strings.Join(why, ", "))
		}
		return nil, nil, nil, usagef("%s: %d usable %s%s; the fit needs at least 2", f.log, len(rows), plural(len(rows), "size", "sizes"), reason)
	}
	return specs, rows, warnings, nil
}

// logSweep is the timing-only sweep on sim that a log's sizes run as, on
// topo, with bench's meaning of algo and the NCCL flags; it refuses a
// collective (opFlag: what --op said) or a number of ranks other than the
// log's.
func logSweep(log string, lg *calibrate.Log, topo, op, opFlag, algo string, nf ncclFlags) (*sweep, error) {
	redop, err := lg.ReduceOp()
	if err != nil {
		return nil, usagef("%s: %v", log, err)
	}
	bf := benchFlags{topo: topo, op: op, algo: algo, dtype: "f32", redop: redop.String(), format: "table", backendFlags: backendFlags{backend: "sim"},
		minBytes: "8", maxBytes: "8", factor: 2, timingOnly: true, symmetry: true, ncclFlags: nf}
	s, err := bf.parse()
	if err != nil {
		return nil, err
	}
	if lg.Op != "" && lg.Op != s.op.String() {
		return nil, usagef("--op %s, but %s measured %s", opFlag, log, lg.Op)
	}
	if p := s.topo.NumGPUs(); lg.Ranks > 0 && lg.Ranks != p {
		return nil, usagef("%s has %d ranks, but topology %s has %d GPUs", log, lg.Ranks, topo, p)
	}
	return s, nil
}

// countsFit refuses a log whose rows are not s's collective on s's
// ranks as nccl-tests counts it: a redop of none for a collective that
// reduces, a root column of -1 for a rooted one or a rank for another,
// or a count column other than bench's for its size (a rank's
// elements for all-gather, reduce-scatter, all-to-all and gather, the
// buffer's for the others), in the log's element type. ParseLog has
// checked that every row with a count agrees with the first.
func countsFit(log string, lg *calibrate.Log, s *sweep) error {
	if lg.Redop == "none" && s.op.Reduces() {
		return usagef("%s: its rows' redop is none: it measured a collective that does not reduce, where %s does", log, s.op)
	}
	if lg.HasRoot && (lg.Root >= 0) != s.op.Rooted() {
		if s.op.Rooted() {
			return usagef("%s: its rows' root is %d: it measured a collective without a root, where %s has one", log, lg.Root, s.op)
		}
		return usagef("%s: its rows' root is %d: it measured a collective with a root, where %s has none", log, lg.Root, s.op)
	}
	d, ok := lg.DType()
	if !ok {
		return nil
	}
	for _, r := range lg.Samples {
		if r.Count <= 0 || r.Bytes <= 0 {
			continue
		}
		base := ops.Spec{Op: s.op, Ranks: s.topo.NumGPUs(), DType: d}
		if spec, _ := verify.SpecForSize(base, r.Bytes); int64(spec.Count) != r.Count {
			return usagef("%s:%d: count %d, where %s of %d bytes of %s on %d ranks counts %d (as nccl-tests does): the log measured another collective or rank count",
				log, r.Line, r.Count, s.op, r.Bytes, lg.Type, base.Ranks, spec.Count)
		}
		return nil
	}
	return nil
}

// calReport is the fit, as JSON and for the table.
type calReport struct {
	Op           string    `json:"op"`
	Algo         string    `json:"algo"`
	Topology     string    `json:"topology"`
	Ranks        int       `json:"ranks"`
	Log          string    `json:"log"`
	LogFormat    string    `json:"log_format"`
	LatencyScale float64   `json:"latency_scale,omitempty"`   // the two-scale fit's
	BWScale      float64   `json:"bandwidth_scale,omitempty"` // the two-scale fit's
	NCCL         *calNCCL  `json:"nccl,omitempty"`            // --algo nccl's fit
	Links        []calLink `json:"links"`
	RMSRelError  float64   `json:"rms_rel_error"`
	MaxRelError  float64   `json:"max_rel_error"`
	Simulations  int       `json:"simulations"`
	Sizes        []calSize `json:"sizes"`
	Warnings     []string  `json:"warnings"`
	Out          string    `json:"out,omitempty"`
}

type calSize struct {
	Bytes       int64   `json:"bytes"`
	MeasuredUS  float64 `json:"measured_us"`
	FittedUS    float64 `json:"fitted_us"`
	RelError    float64 `json:"rel_error"`
	MeasuredBus float64 `json:"measured_busbw_gbps"`
	FittedBus   float64 `json:"fitted_busbw_gbps"`
	// With --algo nccl: the plan that ran (ring/LL/4ch), and for a size
	// held out of the fit on every other size, that fit's prediction.
	Algo            string   `json:"algo,omitempty"`
	HeldOutUS       *float64 `json:"held_out_us,omitempty"`
	HeldOutRelError *float64 `json:"held_out_rel_error,omitempty"`
	// HostBound, with --algo nccl, says FittedUS is the run's thread
	// floor (nccl.ThreadFloorUS), more than the simulated collective.
	HostBound bool `json:"host_bound,omitempty"`
}

// calLink is a class of links (same end kinds, bandwidth and latency).
type calLink struct {
	Class       string  `json:"class"`
	Links       int     `json:"links"`
	BW          float64 `json:"bw_gbps"` // nominal, as written
	Eff         float64 `json:"eff"`     // as written
	EffBW       float64 `json:"effective_bw_gbps"`
	LatUS       float64 `json:"lat_us"`
	BeforeEffBW float64 `json:"effective_bw_gbps_before"`
	BeforeLatUS float64 `json:"lat_us_before"`
	text        string
}

func (f *calFlags) run(stdout, stderr io.Writer, opSet bool) error {
	if err := checkOutputPath("--out", f.out); err != nil {
		return err
	}
	if out, err := os.Stat(f.out); err == nil && f.log != "" {
		if in, err := os.Stat(f.log); err == nil && os.SameFile(in, out) {
			return usagef("--out %s is the --log it reads: write the calibrated topology to another file", f.out)
		}
	}
	var err error
	if f.format, err = reportFormat(f.format, "table", "csv", "json"); err != nil {
		return err
	}
	switch {
	case f.log == "":
		return usagef("calibrate needs --log FILE (nccl-tests output)")
	case f.machine != "" && !f.channelOnly():
		return usagef("calibrate fits NCCL's machine; --nccl-machine is what it prints, for bench, compare and fidelity, and gives calibrate only channel= (what one channel moves, which it does not fit)")
	case f.asLogged && f.algo != algoNCCL:
		return usagef("--as-logged fits what NCCL ran, with --algo nccl, not --algo %s", f.algo)
	case f.algo == "auto" || f.algo == "native":
		return usagef("calibrate needs a fixed algorithm or nccl, not %s (the log does not say which one NCCL ran); nccl, NCCL's tuner per size, is the default", f.algo)
	}
	lo, err1 := parseBytes(f.minBytes)
	hi, err2 := parseBytes(f.maxBytes)
	if err := cmp.Or(err1, err2); err != nil {
		return usagef("--min-bytes/--max-bytes: %v", err)
	}
	if lo > hi {
		return usagef("--min-bytes %s is larger than --max-bytes %s", f.minBytes, f.maxBytes)
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
	pub := cat.Find(data)
	if err := shippedOp(pub, f.op, opSet); err != nil {
		return err
	}
	// A shipped log knows its fabric, its collective and the NCCL
	// environment its run had, as in fidelity.
	var topoNote string
	if f.topo == "" {
		if pub != nil {
			f.topo = pub.Topo
		} else if f.topo, topoNote, err = fabricOfLog("calibrate", f.log, lg); err != nil {
			return err
		}
	}
	if pub != nil && !f.ncclFlags.envSet() {
		o, err := pub.Options()
		if err != nil {
			return err
		}
		f.ncclFlags.runEnv = &o
	}
	switch {
	case opSet:
	case lg.Op != "":
		f.op = lg.Op
	case pub != nil:
		f.op = pub.Op
	default:
		return unnamedOpError(f.log)
	}
	if f.algo == algoNCCL {
		if f.envNote, _, err = f.ncclFlags.useLogEnv(lg); err != nil {
			return err
		}
	}
	s, err := logSweep(f.log, lg, f.topo, f.op, f.op, f.algo, f.ncclFlags)
	if err != nil {
		return err
	}
	if err := countsFit(f.log, lg, s); err != nil {
		return err
	}
	p := s.topo.NumGPUs()
	if p < 2 {
		return usagef("calibrate fits how %s's links move a collective's data, and on one rank there is none to move: give a fabric of 2 GPUs or more", f.topo)
	}
	// The sweep's spec gives each size its collective, by nccl-tests'
	// meaning of size.
	if d, ok := lg.DType(); ok {
		s.dtype = d
	} else if lg.Type != "" {
		return usagef("%s: its element type %q has no commsim dtype of its size", f.log, lg.Type)
	}
	if spec, _ := s.spec(lg.Samples[len(lg.Samples)-1].Bytes); spec.Validate() != nil {
		s.dtype = hw.F64 // over the element limit: the same bytes in wider elements
	}
	held.release(stderr)
	if topoNote != "" {
		fmt.Fprintln(stderr, topoNote)
	}
	if s.algo == algoNCCL {
		return f.runNCCL(stdout, stderr, s, lg, lo, hi)
	}
	specs, rows, warnings, err := f.fitSizes(s, lg, lo, hi)
	if err != nil {
		return err
	}
	noteLongFit(stderr, f.log, len(specs))
	if n := lg.GPUsPerThread; n > 1 {
		warnings = append(warnings, fmt.Sprintf("each thread of the run drove %d GPUs (nccl-tests -g %d), launching every collective on them in turn: host time that the fit of link scales does not model (--algo nccl does: nccl.ThreadFloorUS), so its small sizes measure slower than any scaling of the fabric", n, n))
	}
	prob := calibrate.Problem{Topology: s.topo, Runs: lg.TimedRuns(s.op)}
	for i, spec := range specs {
		plan, err := ops.Compile(spec)
		if err != nil {
			return usagef("%s:%d: %v", f.log, rows[i].Line, err)
		}
		prob.Plans, prob.MeasuredUS = append(prob.Plans, plan), append(prob.MeasuredUS, rows[i].TimeUS)
	}
	fit, err := calibrate.Fit(prob)
	if err != nil {
		return fitError(f.log, rows, err)
	}
	sa, sb, ts, fitted := fit.LatencyScale, fit.BandwidthScale, fit.Seconds, fit.Topology
	rep := calReport{Op: s.op.String(), Algo: s.algo, Topology: f.topo, Ranks: p, Log: f.log, LogFormat: lg.Format,
		LatencyScale: sa, BWScale: sb, Links: linkClasses(s.topo, fitted), Simulations: fit.Simulations}
	bus := busFactor(s.op, p)
	for i, r := range rows {
		m := r.TimeUS * 1e-6
		e := ts[i]/m - 1
		rep.Sizes = append(rep.Sizes, calSize{Bytes: r.Bytes, MeasuredUS: r.TimeUS, FittedUS: ts[i] * 1e6, RelError: e,
			MeasuredBus: float64(r.Bytes) / m / 1e9 * bus, FittedBus: float64(r.Bytes) / ts[i] / 1e9 * bus})
		rep.RMSRelError += e * e / float64(len(rows))
		rep.MaxRelError = max(rep.MaxRelError, math.Abs(e))
	}
	rep.RMSRelError = math.Sqrt(rep.RMSRelError)
	rep.Warnings = append(warnings, fitWarnings(rep.Sizes, sb, fit.ReduceTooSlow)...)
	if f.out != "" {
		err := writeFileAtomic(f.out, func(w io.Writer) error {
			fmt.Fprintf(w, "# calibrated by commsim calibrate from %s: %s %s on %s, latency ×%.4g, bandwidth ×%.4g, rms error %.2f%%\n",
				f.log, rep.Op, rep.Algo, f.topo, sa, sb, 100*rep.RMSRelError)
			return fitted.WriteYAML(w)
		})
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		rep.Out = f.out
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "commsim: warning: %s\n", w)
	}
	if f.format == "json" {
		if rep.Warnings == nil {
			rep.Warnings = []string{}
		}
		return writeJSON(stdout, rep)
	}
	if f.format == "csv" {
		// One row per size; the fitted scales repeat on every row.
		rows := [][]string{{"bytes", "measured_us", "fitted_us", "rel_error", "measured_busbw_gbps", "fitted_busbw_gbps", "latency_scale", "bandwidth_scale"}}
		for _, z := range rep.Sizes {
			rows = append(rows, []string{strconv.FormatInt(z.Bytes, 10), fmtFloat(z.MeasuredUS), fmtFloat(z.FittedUS), fmtFloat(z.RelError),
				fmtFloat(z.MeasuredBus), fmtFloat(z.FittedBus), fmtFloat(rep.LatencyScale), fmtFloat(rep.BWScale)})
		}
		return writeCSVRows(stdout, rows)
	}
	return writeCalTable(stdout, &rep)
}

// linkClasses groups links by end kinds, bandwidth and latency, with their
// fitted values.
func linkClasses(base, fitted *topology.Topology) []calLink {
	var out []calLink
	idx := map[string]int{}
	for i, l := range base.Links {
		n := fitted.Links[i]
		kinds := []string{base.Nodes[l.A].Kind.String(), base.Nodes[l.B].Kind.String()}
		slices.Sort(kinds)
		class := strings.Join(kinds, "-")
		key := fmt.Sprint(class, l.BW, l.Latency)
		if j, ok := idx[key]; ok {
			out[j].Links++
			continue
		}
		idx[key] = len(out)
		out = append(out, calLink{Class: class, Links: 1, BW: n.BW / 1e9, Eff: 1, EffBW: n.BW / 1e9, LatUS: n.Latency * 1e6,
			BeforeEffBW: l.BW / 1e9, BeforeLatUS: l.Latency * 1e6,
			text: fmt.Sprintf("bw %s → %s, lat %s → %s", topology.FormatBandwidth(l.BW), topology.FormatBandwidth(n.BW),
				topology.FormatLatency(l.Latency), topology.FormatLatency(n.Latency))})
	}
	return out
}

// fitWarnings flags what the fitted model does not explain.
func fitWarnings(sz []calSize, sb float64, tooSlow bool) []string {
	var w, off []string
	for _, s := range sz {
		if math.Abs(s.RelError) > residualWarn {
			off = append(off, fmt.Sprintf("%s (%+.1f%%)", formatBytes(s.Bytes), 100*s.RelError))
		}
	}
	if n := len(off); n > 0 {
		if n > 6 {
			off = append(off[:6], fmt.Sprintf("and %d more", n-6))
		}
		w = append(w, fmt.Sprintf("the fit is off by more than %.0f%% at %d of %d sizes: %s", 100*residualWarn, n, len(sz), strings.Join(off, ", ")))
	}
	// A plateau: measured times flat over sizes where the fitted model,
	// latency included, already rises.
	for i := 0; i < len(sz); {
		j, lo, hi := i, sz[i].MeasuredUS, sz[i].MeasuredUS
		for j+1 < len(sz) && max(hi, sz[j+1].MeasuredUS) <= plateauFlat*min(lo, sz[j+1].MeasuredUS) {
			j++
			lo, hi = min(lo, sz[j].MeasuredUS), max(hi, sz[j].MeasuredUS)
		}
		rise := sz[j].FittedUS / sz[i].FittedUS
		if j > i+1 && sz[j].Bytes >= plateauSpan*max(sz[i].Bytes, 1) && rise > plateauFlat*sz[j].MeasuredUS/sz[i].MeasuredUS {
			w = append(w, fmt.Sprintf("latency plateau: measured times stay within %.1f–%.1f µs from %s to %s, but the fitted α-β model rises %.2f× over that range: a fixed per-call cost (launch, protocol) that link latency cannot express; -b %s fits the sizes above it",
				lo, hi, formatBytes(sz[i].Bytes), formatBytes(sz[j].Bytes), rise, formatBytes(sz[min(j+1, len(sz)-1)].Bytes)))
		}
		i = j + 1
	}
	if sb > 1.05 {
		w = append(w, fmt.Sprintf("fitted bandwidth is %.3g× the topology's: the log is faster than its links allow (check --topo)", sb))
	}
	if tooSlow {
		w = append(w, "the topology's GPU reduce bandwidth alone takes longer than some measured times (raise reduce= in --topo)")
	}
	return w
}

func writeCalTable(w io.Writer, r *calReport) error {
	fmt.Fprintf(w, "# commsim calibrate: %s, algorithm %s, on %s (%d ranks)\n", r.Op, r.Algo, r.Topology, r.Ranks)
	fmt.Fprintf(w, "# log: %s (%s), %d sizes, out-of-place times\n", r.Log, r.LogFormat, len(r.Sizes))
	fmt.Fprintf(w, "# fit: latency ×%.4g, bandwidth ×%.4g (Nelder-Mead on log scales; %d simulations of every size)\n",
		r.LatencyScale, r.BWScale, r.Simulations)
	for _, l := range r.Links {
		fmt.Fprintf(w, "#   %s (%d links): %s\n", l.Class, l.Links, l.text)
	}
	fmt.Fprintf(w, "# relative error: rms %.2f%%, max %.2f%%\n", 100*r.RMSRelError, 100*r.MaxRelError)
	fmt.Fprintf(w, "%12s %13s %13s %9s %14s %14s\n", "size(B)", "measured(us)", "fitted(us)", "error(%)", "busbw(GB/s)", "fit busbw")
	for _, s := range r.Sizes {
		fmt.Fprintf(w, "%12d %13.2f %13.2f %+9.2f %14.2f %14.2f\n", s.Bytes, s.MeasuredUS, s.FittedUS, 100*s.RelError, s.MeasuredBus, s.FittedBus)
	}
	if r.Out != "" {
		_, err := fmt.Fprintf(w, "# wrote the calibrated topology to %s (use --topo %s)\n", r.Out, r.Out)
		return err
	}
	_, err := fmt.Fprintf(w, "# add --out FILE to write the calibrated topology\n")
	return err
}

// shippedLogNamed is the log commsim ships under the file name name, or
// nil.
func shippedLogNamed(name string) []byte {
	cat, err := fidelity.Published()
	if err != nil {
		return nil
	}
	for _, l := range cat.Logs {
		if l.File == name {
			return l.Data
		}
	}
	return nil
}

// longFitSizes is where a fit's sizes make it slow enough to say so: the
// fit and its held-out half simulate every size some fifty times (2,000
// sizes of dgx-h100 took half a minute, 20,000 over five).
const longFitSizes = 2000

// noteLongFit says on stderr, before a fit of sizes sizes from log that
// will take minutes, that it will and how to shorten it.
func noteLongFit(stderr io.Writer, log string, sizes int) {
	if sizes > longFitSizes {
		fmt.Fprintf(stderr, "commsim: note: %s: fitting %d sizes, each simulated some fifty times, may take minutes (--min-bytes and --max-bytes fit fewer)\n", log, sizes)
	}
}
