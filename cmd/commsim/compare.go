package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
)

// compareFlags are bench's flags with --algo replaced by --algos, plus
// --plot and --vs.
type compareFlags struct {
	benchFlags
	algos, plot string
	vs          []string // more fabrics, each run as --topo is
}

// comparison is a validated compare request: one sweep, several algorithms
// on its fabric, or with --vs one algorithm on several fabrics.
type comparison struct {
	s *sweep
	// names are the series compared, one column each: the algorithms, or
	// with --vs the fabrics.
	names []string
	// nodeRanks is, for each algorithm, the GPUs of a node its plans are made for (fabricRuns).
	nodeRanks []int
	// fabrics, with --vs, is each fabric's sweep, in the order of names
	// (the first is s); nil otherwise.
	fabrics []*sweep
	plot    string
	begun   bool // the header is written
}

// sweepOf is the sweep of series i: the comparison's with the series'
// algorithm, or with --vs the series' fabric's.
func (c *comparison) sweepOf(i int) sweep {
	if c.fabrics != nil {
		return *c.fabrics[i]
	}
	s := *c.s
	s.algo, s.nodeRanks = c.names[i], c.nodeRanks[i]
	return s
}

// what says what the series are, for headers and notes.
func (c *comparison) what() string {
	if c.fabrics != nil {
		return "fabric"
	}
	return "algorithm"
}

// cmpRow is one size of a comparison: the out-of-place result of every
// series, in the order of comparison.names, and the index of the fastest.
type cmpRow struct {
	bytes int64
	count int
	res   []result
	best  int
	// refined says, for each algorithm, whether its run was made at finer
	// pieces than every channel can be (simexec's RefinedRuns).
	refined []bool
}

// cmpRowRefined is a compared size and whether a run of it was refined.
func cmpRowRefined(r cmpRow) (int64, bool) { return r.bytes, slices.Contains(r.refined, true) }

// crossover is a change of the fastest algorithm between two adjacent sizes.
type crossover struct {
	from, to string
	lo, hi   int64
}

func newCompareCmd() *cobra.Command {
	var f compareFlags
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Run several algorithms side by side over one size sweep",
		Long: `compare times several algorithms of one collective over the same sweep of sizes
(bench's flags and size conventions) and prints, per size, each algorithm's
busbw and time, the fastest algorithm, and the crossover points where the
fastest changes. Only out-of-place runs are timed (bench also times in place).
--plot draws busbw and time against size as a PNG or SVG chart.

--vs SPEC|FILE (repeatable) compares fabrics instead: one algorithm (--algos
names at most one; auto by default, each fabric's own choice) on --topo and
on each --vs fabric, all with the same number of GPUs, on the simulator. The
columns, the fastest and the crossovers are then the fabrics'.`,
		Example: `  commsim compare --topo switch:8 --op allreduce --algos ring,rd,rhd -b 8 -e 4MiB
  commsim compare --topo docs/examples/tree-1to1.yaml --vs docs/examples/tree-4to1.yaml --op alltoall --algos pairwise
  commsim compare --topo dgx-h100 --op allgather --timing-only --plot allgather.svg
  commsim compare --topo ring:8 --op broadcast --check --format json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.topoSet = cmd.Flags().Changed("topo")
			f.stderr = cmd.ErrOrStderr()
			c, err := f.parse()
			if err != nil {
				return err
			}
			return c.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	// Take bench's flags, all but --algo, from a scratch command.
	scratch := &cobra.Command{}
	f.register(scratch, "auto")
	scratch.Flags().VisitAll(func(fl *pflag.Flag) {
		if fl.Name != "algo" {
			cmd.Flags().AddFlag(fl)
		}
	})
	cmd.Flags().StringVar(&f.algos, "algos", "", "comma-separated algorithms to compare (default: every one that implements --op): "+
		strings.Join(ops.Algorithms(), ","))
	cmd.Flags().StringVar(&f.plot, "plot", "", "also draw busbw and time against size into FILE.png or FILE.svg")
	cmd.Flags().StringArrayVar(&f.vs, "vs", nil, "another fabric (spec or YAML file) to run as --topo is, one algorithm on each; repeat for more")
	return cmd
}

// parse validates the flags; each failure is a usage error.
func (f *compareFlags) parse() (*comparison, error) {
	switch {
	case len(f.vs) > 0 && !f.topoSet:
		return nil, usagef("--vs compares fabrics against --topo's: give --topo too")
	case len(f.vs) > 0 && f.backend != "sim":
		return nil, usagef("--vs compares fabrics on the simulator, not on --backend %s", f.backend)
	}
	f.algo = "auto" // validated per algorithm below
	nf := f.ncclFlags
	f.ncclFlags = ncclFlags{} // they go with nccl among --algos
	s, err := f.benchFlags.parse()
	if err != nil {
		return nil, err
	}
	c := &comparison{s: s, plot: f.plot}
	if len(f.vs) > 0 {
		if err := f.parseFabrics(c, nf); err != nil {
			return nil, err
		}
		return c, checkPlotFile(c.plot, s)
	}
	supported := ops.AlgorithmsFor(s.op)
	if strings.TrimSpace(f.algos) == "" {
		// commsim's own: the nccl-* plans are NCCL's shapes, which --algos
		// nccl runs with NCCL's channels, chunks and protocols.
		for _, a := range supported {
			if !ops.IsNCCL(a) {
				c.names, c.nodeRanks = append(c.names, a), append(c.nodeRanks, 0)
			}
		}
	} else {
		for _, a := range strings.Split(f.algos, ",") {
			a = strings.TrimSpace(a)
			switch {
			case a == "":
				return nil, usagef("--algos %q has an empty name", f.algos)
			case slices.Contains(c.names, a):
				return nil, usagef("--algos: algorithm %s is listed twice", a)
			case a == algoNCCL:
				if err := s.useNCCL(nf); err != nil {
					return nil, err
				}
			case !slices.Contains(ops.Algorithms(), a):
				return nil, usagef("--algos: unknown algorithm %q (want some of %s, nccl)", a, strings.Join(ops.Algorithms(), ", "))
			case !slices.Contains(supported, a) && !ops.NeedsSwitch(a):
				return nil, usagef("--algos: algorithm %s has no %s (for %s use some of %s)", a, s.op, s.op, algorithmsFor(s.op, algoNCCL))
			}
			nodeRanks, err := fabricRuns(a, s.topo, f.topo)
			if err != nil {
				return nil, err
			}
			c.names, c.nodeRanks = append(c.names, a), append(c.nodeRanks, nodeRanks)
		}
	}
	if len(c.names) == 0 {
		return nil, usagef("no algorithm implements %s", s.op)
	}
	if nf.set() && s.tuner == nil {
		return nil, nf.aloneError("nccl among --algos")
	}
	if err := checkPlotFile(c.plot, s); err != nil {
		return nil, err
	}
	return c, nil
}

// parseFabrics makes c a comparison of fabrics (--vs): one algorithm,
// auto unless --algos names another, on --topo and on each --vs fabric,
// each parsed as --topo is, with the same ranks and sizes.
func (f *compareFlags) parseFabrics(c *comparison, nf ncclFlags) error {
	first := c.s
	algo := strings.TrimSpace(f.algos)
	switch {
	case algo == "":
		algo = "auto"
	case strings.Contains(algo, ","):
		return usagef("--vs compares fabrics under one algorithm; --algos %q names several", f.algos)
	case algo != "auto" && algo != algoNCCL && !slices.Contains(ops.Algorithms(), algo):
		return usagef("--algos: unknown algorithm %q (want one of auto, %s, nccl)", algo, strings.Join(ops.Algorithms(), ", "))
	case algo != "auto" && algo != algoNCCL && !slices.Contains(ops.AlgorithmsFor(first.op), algo) && !ops.NeedsSwitch(algo):
		return usagef("--algos: algorithm %s has no %s (for %s use one of %s)", algo, first.op, first.op, algorithmsFor(first.op, "auto", algoNCCL))
	}
	specs := append([]string{f.topo}, f.vs...)
	ranks := func(s *sweep) int { spec, _ := s.spec(s.sizes[0]); return spec.Ranks }
	for i, spec := range specs {
		if slices.Contains(specs[:i], spec) {
			return usagef("--vs %s: that fabric is compared already", spec)
		}
		s := first
		if i > 0 {
			g := f.benchFlags
			g.topo, g.topoSet = spec, true
			var err error
			if s, err = g.parse(); err != nil {
				return err
			}
			if r, want := ranks(s), ranks(first); r != want || !slices.Equal(s.sizes, first.sizes) {
				return usagef("--vs %s: %s of %s where %s has %s: fabrics compare at the same ranks and sizes (-g N runs the first N GPUs of each)",
					spec, rankCount(r), first.op, f.topo, rankCount(want))
			}
		}
		s.algo = algo
		if algo == algoNCCL {
			if err := s.useNCCL(nf); err != nil {
				return err
			}
		}
		var err error
		if s.nodeRanks, err = fabricRuns(algo, s.topo, spec); err != nil {
			return err
		}
		c.names, c.fabrics = append(c.names, s.topoName), append(c.fabrics, s)
	}
	if nf.set() && algo != algoNCCL {
		return nf.aloneError("--algos nccl")
	}
	// Each fabric holds its own buffers, all at once: bench's limit on
	// simulated device memory bounds their sum.
	if need := float64(slices.Max(first.sizes)) * 3 * float64(ranks(first)) * float64(len(specs)); !first.timingOnly && need > sim.DefaultMaxDataBytes {
		return usagef("--vs: %d fabrics with data (--check, --data) hold about %s of simulated device memory at once, over the %s limit; compare fewer fabrics or sizes, or time them only",
			len(specs), formatBytes(int64(need)), formatBytes(sim.DefaultMaxDataBytes))
	}
	return nil
}

// checkPlotFile validates a --plot file name for a sweep ("" is no plot).
func checkPlotFile(plot string, s *sweep) error {
	if plot == "" {
		return nil
	}
	if err := checkPlotName(plot); err != nil {
		return err
	}
	if !slices.ContainsFunc(s.sizes, func(b int64) bool { return b > 0 }) {
		return usagef("--plot needs sizes above 0 bytes (%s has none)", s.op)
	}
	return nil
}

// checkPlotName refuses a --plot file that is neither PNG nor SVG ("" is
// no plot).
func checkPlotName(plot string) error {
	if ext := strings.ToLower(filepath.Ext(plot)); plot == "" || ext == ".png" || ext == ".svg" {
		return checkOutputPath("--plot", plot)
	}
	return usagef("--plot %s: want a .png or .svg file name", plot)
}

// run measures, reports and plots. The text, CSV and JSON formats print
// each size as it is measured, so a comparison that fails half-way keeps
// the sizes it has; the table prints what it has then.
func (c *comparison) run(stdout, stderr io.Writer) error {
	rows, err := c.measure(stderr, func(r cmpRow) error { return c.add(stdout, r) })
	if err == nil {
		err = c.begin(stdout)
	}
	if err != nil {
		if c.s.format == "table" && len(rows) > 0 {
			err = errors.Join(err, c.writeTable(stdout, rows))
		}
		return err
	}
	cross := crossovers(c.names, rows)
	notes := stdout
	switch c.s.format {
	case "table":
		if err := c.writeTable(stdout, rows); err != nil {
			return err
		}
	case "text":
		writeMirrored(stdout, c.s.mirrored, len(rows)*len(c.names))
		writeRefined(stdout, refinedSizes(rows, cmpRowRefined))
		c.writeVerdict(stdout, rows)
	default:
		notes = stderr
	}
	writeCrossovers(notes, c.names, rows, cross)
	if c.plot != "" {
		if err := c.drawPlot(c.plot, rows, cross); err != nil {
			return fmt.Errorf("--plot %s: %w", c.plot, err)
		}
		fmt.Fprintf(stderr, "commsim: wrote %s\n", c.plot)
	}
	return nil
}

// begin writes the header of the formats that print rows as they come,
// once, with the first row (or at the end): a comparison refused before
// it measures anything writes nothing but its one-line error.
func (c *comparison) begin(w io.Writer) error {
	if c.begun {
		return nil
	}
	c.begun = true
	switch c.s.format {
	case "csv":
		return writeCSVRows(w, [][]string{cmpCSVColumns})
	case "text":
		return c.writeTextHeader(w)
	}
	return nil
}

// add writes one measured size, but for the table, which waits.
func (c *comparison) add(w io.Writer, r cmpRow) error {
	if err := c.begin(w); err != nil {
		return err
	}
	switch c.s.format {
	case "csv":
		return c.writeCSV(w, []cmpRow{r})
	case "json":
		return c.writeJSON(w, []cmpRow{r})
	case "text":
		var b strings.Builder
		fmt.Fprintf(&b, "%12d  %12d", r.bytes, r.count)
		for _, res := range r.res {
			fmt.Fprintf(&b, "  %7.2f  %7s", res.busbw, ncclTime(res.timeUS))
		}
		_, err := fmt.Fprintf(w, "%s  %s\n", b.String(), c.names[r.best])
		return err
	}
	return nil
}

// writeTitle is the comment lines that open both layouts: what ran, and
// how it was timed.
func (c *comparison) writeTitle(w io.Writer) {
	s := c.s
	backend, times := s.backend.describe(s.timingOnly)
	if c.fabrics != nil {
		spec, _ := s.spec(s.sizes[0])
		fmt.Fprintf(w, "# commsim compare: %s (%s), %s, backend %s, algorithm %s, on fabrics %s\n",
			s.op, rankCount(spec.Ranks), s.dtype, backend, s.algo, strings.Join(c.names, ", "))
	} else {
		fmt.Fprintf(w, "# commsim compare: %s on %s (%s), %s, backend %s, algorithms %s\n",
			s.op, s.topoName, rankCount(s.topo.NumGPUs()), s.dtype, backend, strings.Join(c.names, ", "))
	}
	fmt.Fprintf(w, "# %s%s; out of place only; best is the fastest %s at each size\n", times, dataNote(s), c.what())
	writeThreadNote(w, s)
}

// writeTextHeader is the text layout's header, columns as nccl-tests
// aligns them: size and count, then each algorithm's busbw and time.
func (c *comparison) writeTextHeader(w io.Writer) error {
	c.writeTitle(w)
	fmt.Fprintln(w, "#")
	groups := fmt.Sprintf("# %10s  %12s", "", "")
	head := fmt.Sprintf("# %10s  %12s", "size", "count")
	units := fmt.Sprintf("# %10s  %12s", "(B)", "(elements)")
	for _, a := range c.names {
		groups += fmt.Sprintf("  %16s", a)
		head += fmt.Sprintf("  %7s  %7s", "busbw", "time")
		units += fmt.Sprintf("  %7s  %7s", "(GB/s)", "(us)")
	}
	_, err := fmt.Fprintf(w, "%s\n%s  best\n%s\n", groups, head, units)
	return err
}

// measure runs every size with every series, out of place, on one
// cluster (with --vs, one a fabric), through bench's plan and runOnce,
// handing each size to emit as it is measured. On an error it returns the
// sizes measured before.
func (c *comparison) measure(stderr io.Writer, emit func(cmpRow) error) (rows []cmpRow, err error) {
	// One world for the algorithms on one fabric; with --vs, one a fabric.
	worlds := make([]*openedWorld, len(c.names))
	execs := make([]*ops.Executor, len(c.names))
	defer func() {
		c.s.mirrored = 0
		for i, w := range worlds {
			if w != nil && (i == 0 || c.fabrics != nil) {
				c.s.mirrored += w.mirroredRuns()
				err = errors.Join(err, execs[i].Close(), w.close())
			}
		}
	}()
	for i := range worlds {
		if i > 0 && c.fabrics == nil {
			worlds[i], execs[i] = worlds[0], execs[0]
			continue
		}
		s := c.sweepOf(i)
		if worlds[i], err = s.backend.open(s.topo, s.simConfig()); err != nil {
			return nil, err
		}
		execs[i] = worlds[i].newExecutor()
	}
	if worlds[0].cluster != nil {
		if err := c.checkDuration(worlds, stderr); err != nil {
			return nil, err
		}
	}
	bar := newProgress(stderr, len(c.s.sizes)*len(c.names))
	defer bar.stop()
	rows = make([]cmpRow, 0, len(c.s.sizes))
	for _, bytes := range c.s.sizes {
		var r cmpRow
		for i, name := range c.names {
			s, w, exec := c.sweepOf(i), worlds[i], execs[i]
			spec, moved := s.spec(bytes)
			plan, err := s.plan(spec)
			if err != nil {
				return rows, err
			}
			if err := s.rewind(w); err != nil {
				return rows, err
			}
			refined := w.refinedRuns()
			res, err := s.runOnce(w.World, exec, plan, false, moved)
			if err != nil {
				return rows, fmt.Errorf("%s at %s: %w", name, formatBytes(bytes), err)
			}
			r.bytes, r.count = moved, int(moved)/s.dtype.Size()
			r.res = append(r.res, res)
			r.refined = append(r.refined, w.refinedRuns() > refined)
			if res.timeUS < r.res[r.best].timeUS {
				r.best = i
			}
			bar.step()
		}
		rows = append(rows, r)
		if err := emit(r); err != nil {
			return rows, err
		}
	}
	bar.done()
	return rows, nil
}

// checkDuration is bench's for every series' sweep together, each size
// run once (out of place); the figures are those of the plan with the
// most steps.
func (c *comparison) checkDuration(worlds []*openedWorld, stderr io.Writer) error {
	c.s.noteLoneRuns(stderr)
	var total hostEstimate
	for i := range c.names {
		s := c.sweepOf(i)
		est, err := s.estimate(worlds[i], float64(s.runner.Runs()))
		if err != nil {
			return err
		}
		seconds := total.seconds + est.seconds
		if i == 0 || est.steps > total.steps {
			total = est // the first's figures even where no plan has a step (size 0)
		}
		total.seconds = seconds
	}
	switch {
	case c.fabrics != nil:
		total.work += fmt.Sprintf(" on %d fabrics", len(c.names))
		total.cut = slices.Insert(total.cut, slices.Index(total.cut, "ranks (-g)"), "fabrics (--vs)")
	case len(c.names) > 1:
		total.work += fmt.Sprintf(" of %d algorithms", len(c.names))
		total.cut = slices.Insert(total.cut, slices.Index(total.cut, "ranks (-g)"), "algorithms (--algos)")
	}
	return total.judge(stderr, "comparison")
}

// crossovers lists the adjacent sizes between which the fastest changes.
func crossovers(algos []string, rows []cmpRow) []crossover {
	var out []crossover
	for i := 1; i < len(rows); i++ {
		if a, b := rows[i-1].best, rows[i].best; a != b {
			out = append(out, crossover{from: algos[a], to: algos[b], lo: rows[i-1].bytes, hi: rows[i].bytes})
		}
	}
	return out
}

func (x crossover) String() string {
	return fmt.Sprintf("%s overtakes %s between %s and %s", x.to, x.from, formatBytes(x.lo), formatBytes(x.hi))
}

// writeCrossovers prints the crossover points, or the single winner.
func writeCrossovers(w io.Writer, algos []string, rows []cmpRow, cross []crossover) {
	if len(rows) == 0 {
		return
	}
	if len(cross) == 0 {
		fmt.Fprintf(w, "# no crossover: %s is fastest at every size\n", algos[rows[0].best])
		return
	}
	for _, x := range cross {
		fmt.Fprintf(w, "# crossover: %s\n", x)
	}
}

func (c *comparison) writeTable(w io.Writer, rows []cmpRow) error {
	s := c.s
	c.writeTitle(w)
	writeMirrored(w, s.mirrored, len(rows)*len(c.names))
	writeRefined(w, refinedSizes(rows, cmpRowRefined))
	header := []string{"size(B)", "count"}
	for _, a := range c.names {
		header = append(header, a+" busbw(GB/s)", a+" time(us)")
	}
	header = append(header, "best")
	t := newTableWriter(w)
	t.Header(header)
	for _, r := range rows {
		cells := []string{strconv.FormatInt(r.bytes, 10), strconv.Itoa(r.count)}
		for _, res := range r.res {
			cells = append(cells, f2(res.busbw), f2(res.timeUS))
		}
		if err := t.Append(append(cells, c.names[r.best])); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	c.writeVerdict(w, rows)
	return nil
}

// writeVerdict is --check's verdict, with the algorithms that failed.
func (c *comparison) writeVerdict(w io.Writer, rows []cmpRow) {
	if !c.s.check {
		return
	}
	wrong, bad := 0, []string{}
	for i, a := range c.names {
		n := 0
		for _, r := range rows {
			n += max(r.res[i].wrong, 0)
		}
		if n > 0 {
			bad = append(bad, fmt.Sprintf("%s %d", a, n))
		}
		wrong += n
	}
	verdict := "OK"
	if wrong > 0 {
		verdict = "FAILED (" + strings.Join(bad, ", ") + ")"
	}
	fmt.Fprintf(w, "# Out of bounds values : %d %s\n", wrong, verdict)
}

// cmpRecord is the JSON Lines (and CSV) record of one size and algorithm.
type cmpRecord struct {
	jsonRecord
	Best bool `json:"best"`
	// Refined: the run was made at finer pieces than --symmetry=false can
	// make every channel at (see writeRefined).
	Refined bool `json:"refined,omitempty"`
	// GPUsPerThread and Iters are -g N's N and -n × -m where more than 1
	// (see jsonRow).
	GPUsPerThread int `json:"gpus_per_thread,omitempty"`
	Iters         int `json:"iters,omitempty"`
}

// records flattens the rows into one record per size and algorithm.
func (c *comparison) records(rows []cmpRow) []cmpRecord {
	s := c.s
	redop := s.redop.String()
	if !s.op.Reduces() {
		redop = "none"
	}
	var out []cmpRecord
	for _, r := range rows {
		for i, res := range r.res {
			si := c.sweepOf(i)
			out = append(out, cmpRecord{jsonRecord{s.op.String(), si.algo, si.topoName, si.topo.NumGPUs(), s.dtype.String(), redop,
				s.root, r.bytes, r.count, tidy(res.timeUS), tidy(res.algbw), tidy(res.busbw), wrongPtr(res.wrong)}, i == r.best, r.refined[i], overOne(s.gpusPerThread()), overOne(s.runner.Iters)})
		}
	}
	return out
}

func (c *comparison) writeJSON(w io.Writer, rows []cmpRow) error {
	enc := json.NewEncoder(w)
	for _, rec := range c.records(rows) {
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	return nil
}

// cmpCSVColumns are compare's CSV columns: bench's, out of place, best,
// refined, gpus_per_thread and iters.
var cmpCSVColumns = append(append([]string{}, csvColumns[:13]...), "best", "refined", "gpus_per_thread", "iters")

// writeCSV writes rows of the CSV, without its header.
func (c *comparison) writeCSV(w io.Writer, rows []cmpRow) error {
	var out [][]string
	for _, r := range c.records(rows) {
		wrong := "N/A"
		if r.Wrong != nil {
			wrong = strconv.Itoa(*r.Wrong)
		}
		out = append(out, []string{r.Op, r.Algo, r.Topology, strconv.Itoa(r.Ranks), r.DType, r.Redop,
			strconv.Itoa(r.Root), strconv.FormatInt(r.Bytes, 10), strconv.Itoa(r.Count),
			exact(r.TimeUS), exact(r.AlgBW), exact(r.BusBW), wrong, strconv.FormatBool(r.Best), strconv.FormatBool(r.Refined), strconv.Itoa(c.s.gpusPerThread()), strconv.Itoa(c.s.runner.Runs())})
	}
	return writeCSVRows(w, out)
}
