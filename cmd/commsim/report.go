package main

import (
	"cmp"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
)

// benchReport writes a sweep's rows: in the text, CSV and JSON formats as
// they are measured (so a sweep that fails half-way keeps the rows it
// has), in the box table at the end.
type benchReport struct {
	w    io.Writer
	s    *sweep
	rows []row // every row added, for the table and the footer
	// withSim is whether the rows carry --sim-topo's prediction, which
	// adds columns to the header: such a report is written at the end.
	withSim bool
	begun   bool // the header is written
}

// writeReport prints a measured sweep whole.
func writeReport(w io.Writer, s *sweep, rows []row) error {
	rep := &benchReport{w: w, s: s, withSim: len(rows) > 0 && rows[0].sim != nil}
	if err := rep.begin(); err != nil {
		return err
	}
	for _, r := range rows {
		if err := rep.add(r); err != nil {
			return err
		}
	}
	return rep.end()
}

// begin writes the header, once. A sweep's report begins with its first
// row (or its end), so a sweep refused before it measures anything (a
// plan NCCL cannot run, an estimate of hours) writes nothing but its
// one-line error.
func (rep *benchReport) begin() error {
	if rep.begun {
		return nil
	}
	rep.begun = true
	switch rep.s.format {
	case "csv":
		return writeCSVRows(rep.w, [][]string{append(append([]string{}, csvColumns...), simCSVColumns(rep.simRows())...)})
	case "text":
		return writeTextHeader(rep.w, rep.s, rep.simRows())
	}
	return nil
}

// simRows stands for the rows' shape before any is measured: one row with
// a prediction when the report has them.
func (rep *benchReport) simRows() []row {
	if rep.withSim {
		return []row{{sim: &prediction{topology: rep.s.simTopo.Name}}}
	}
	return nil
}

// add writes one row (the table waits for end).
func (rep *benchReport) add(r row) error {
	if err := rep.begin(); err != nil {
		return err
	}
	rep.rows = append(rep.rows, r)
	switch rep.s.format {
	case "csv":
		return writeCSVRows(rep.w, [][]string{append(csvCells(r), simCells(r)...)})
	case "json":
		return json.NewEncoder(rep.w).Encode(jsonOf(r))
	case "text":
		_, err := fmt.Fprintln(rep.w, textRow(rep.s, r))
		return err
	}
	return nil
}

// end writes the footer, or the whole table.
func (rep *benchReport) end() error {
	if err := rep.begin(); err != nil {
		return err
	}
	switch rep.s.format {
	case "table":
		return writeTable(rep.w, rep.s, rep.rows)
	case "text":
		writeMirrored(rep.w, rep.s.mirrored, 2*len(rep.rows))
		writeRefined(rep.w, refinedSizes(rep.rows, rowRefined))
		writeFooter(rep.w, rep.rows)
		fmt.Fprintln(rep.w, "#")
	}
	return nil
}

// writeFooter writes nccl-tests' closing lines: the verdict of --check and
// the average bus bandwidth.
func writeFooter(w io.Writer, rows []row) {
	if len(rows) == 0 {
		return
	}
	if wrong, checked := totalWrong(rows); checked {
		fmt.Fprintf(w, "# Out of bounds values : %d %s\n", wrong, map[bool]string{true: "OK", false: "FAILED"}[wrong == 0])
	}
	fmt.Fprintf(w, "# Avg bus bandwidth    : %g \n", avgBusBW(rows))
}

// avgBusBW is nccl-tests' average bus bandwidth: the mean over every run,
// out of place and in place, to 3 decimals (0 without runs).
func avgBusBW(rows []row) float64 {
	if len(rows) == 0 {
		return 0
	}
	sum := 0.0
	for _, r := range rows {
		sum += r.outOfPlace.busbw + r.inPlace.busbw
	}
	return roundTo(sum/float64(2*len(rows)), 3)
}

func fmtWrong(n int) string {
	if n < 0 {
		return "N/A"
	}
	return strconv.Itoa(n)
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// roundTo rounds v to d decimals.
func roundTo(v float64, d int) float64 {
	scale := math.Pow10(d)
	if r := math.Round(v*scale) / scale; !math.IsInf(r, 0) && !math.IsNaN(r) {
		return r
	}
	return v
}

// reportFormat checks --format against a command's layouts, its default
// first, and returns the one it names. bench's two layouts for reading,
// text and table, are one for a command that has one of them: either
// word names it.
func reportFormat(format string, layouts ...string) (string, error) {
	if slices.Contains(layouts, format) {
		return format, nil
	}
	reading := map[string]string{"text": "table", "table": "text"}
	if other := reading[format]; other == layouts[0] {
		return other, nil
	}
	last := len(layouts) - 1
	return "", usagef("unknown format %q (want %s or %s)", format, strings.Join(layouts[:last], ", "), layouts[last])
}

// plural is one where n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// rankCount is "1 rank" or "n ranks".
func rankCount(n int) string { return fmt.Sprintf("%d %s", n, plural(n, "rank", "ranks")) }

// tidy rounds a time in µs to the simulator's resolution, a picosecond (6
// decimals), and a bandwidth in GB/s to a kB/s (6 decimals); or, where
// that is finer than a float64 holds, to 15 significant digits. What the
// reports print is then the decimal and not binary noise: 10.612798, not
// 10.612798000000002; 3758096384014, not 3758096384013.9995.
func tidy(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	digits := int(math.Floor(math.Log10(math.Abs(v)))) + 1
	return roundTo(v, min(6, 15-digits))
}

// exact prints a tidy value as short as it goes.
func exact(v float64) string { return strconv.FormatFloat(tidy(v), 'f', -1, 64) }

// ncclTypeNames are nccl-tests' names of commsim's dtypes, for the text
// layout that nccl-tests' readers expect.
var ncclTypeNames = map[string]string{"f32": "float", "f64": "double", "f16": "half", "bf16": "bfloat16", "i32": "int32", "i64": "int64", "u8": "uint8"}

// ncclTestNames are nccl-tests' names of the collectives it tests.
var ncclTestNames = map[string]string{"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
	"broadcast": "broadcast", "reduce": "reduce", "alltoall": "alltoall", "gather": "gather", "sendrecv": "sendrecv"}

// ncclTime is nccl-tests' time column: fewer decimals as the time grows.
func ncclTime(us float64) string {
	switch {
	case us >= 10000:
		return fmt.Sprintf("%7.0f", us)
	case us >= 100:
		return fmt.Sprintf("%7.1f", us)
	}
	return fmt.Sprintf("%7.2f", us)
}

// runsPerSize are the timed runs of each size, the collectives each
// launches and the warm-up runs, as nccl-tests' header and report state
// them (-n, -m, -w; none warm up on sim).
func (s *sweep) runsPerSize() (iters, agg, warmup int) {
	agg = max(s.aggIters, 1)
	return max(s.runner.Iters/agg, 1), agg, s.runner.Warmup
}

// minBytes is the sweep's first size (0 for none).
func (s *sweep) minBytes() int64 {
	if len(s.sizes) == 0 {
		return 0
	}
	return s.sizes[0]
}

// writeTextHeader writes nccl-tests' header: its parameter line, commsim's
// description of the run, and the column heads, with the algorithm last.
func writeTextHeader(w io.Writer, s *sweep, rows []row) error {
	backend, _ := s.backend.describe(s.timingOnly)
	iters, agg, warmup := s.runsPerSize()
	lo, hi := s.minBytes(), s.maxBytes
	if test, ok := ncclTestNames[s.op.String()]; ok {
		// What nccl-tests' readers (calibrate, fidelity) learn the op from.
		fmt.Fprintf(w, "# Collective test starting: %s_perf\n", test)
	}
	step := fmt.Sprintf("%g(factor)", s.factor)
	if s.stepBytes > 0 {
		step = fmt.Sprintf("%d(bytes)", s.stepBytes)
	}
	fmt.Fprintf(w, "# nThread 1 nGpus %d minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: %d validation: %d graph: 0\n",
		s.gpusPerThread(), lo, hi, step, warmup, iters, agg, map[bool]int{true: 1, false: 0}[s.check])
	fmt.Fprintln(w, "#")
	fmt.Fprintf(w, "# commsim bench: %s on %s (%s), backend %s, algorithm %s\n", s.op, s.topoName, rankCount(s.topo.NumGPUs()), backend, s.algo)
	writeAlgoNote(w, s)
	fmt.Fprint(w, benchTimesLine(s))
	simHeader(w, rows)
	fmt.Fprintln(w, "#")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	head := fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", "size", "count", "type", "redop", "root",
		"time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
	units := fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
	for _, c := range simColumns(rows) {
		head += "  " + c
	}
	_, err := fmt.Fprintf(w, "%s  algo\n%s\n", head, units)
	return err
}

// writeAlgoNote says what -g N's thread costs (writeThreadNote), and how
// auto and nccl choose, where the algo column is their choice.
func writeAlgoNote(w io.Writer, s *sweep) {
	writeThreadNote(w, s)
	switch {
	case s.algo == "auto":
		fmt.Fprintf(w, "# auto picks the cheapest plan per size by the α-β-γ cost model of %s and each plan's busiest link; its choice is the algo column\n", cmp.Or(s.topo.Name, s.topoName))
	case s.algo == algoNCCL:
		fmt.Fprintf(w, "# nccl: NCCL %s's tuner on what it sees of %s (%s) picks algorithm/protocol/channels per size, simulated; its choice is the algo column, and where NCCL would run what commsim cannot simulate yet (or a plan too large to hold), the algo column names it after what ran\n",
			s.tuner.Options.Version, cmp.Or(s.topo.Name, s.topoName), s.tuner.System)
		if s.machine != "" {
			fmt.Fprintf(w, "# the machine departs from NCCL's model as --nccl-machine %s says (its tuner does not see it)\n", s.machine)
		}
		if s.channelNote != "" {
			fmt.Fprintf(w, "# %s\n", s.channelNote)
		}
	}
}

// dataNote says, on sim, whether data moves and why.
func dataNote(s *sweep) string {
	switch {
	case s.backend.name != "sim":
		return ""
	case s.timingOnly:
		return " without data (a simulated time does not depend on it; --check or --data moves it)"
	}
	return " with data"
}

// benchTimesLine is bench's line on what the times are.
func benchTimesLine(s *sweep) string {
	_, times := s.backend.describe(s.timingOnly)
	if s.backend.name == "sim" && s.timingOnly && s.trace == "" {
		return "# " + times + dataNote(s) + "; an in-place run takes the out-of-place time\n"
	}
	return "# " + times + dataNote(s) + "; out-of-place then in-place\n"
}

// textRow is one row in nccl-tests' layout, the algorithm last.
func textRow(s *sweep, r row) string {
	typ := ncclTypeNames[r.dtype]
	if typ == "" {
		typ = r.dtype
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d", r.bytes, r.count, typ, r.redop, r.root)
	for _, res := range []result{r.outOfPlace, r.inPlace} {
		fmt.Fprintf(&b, "  %7s  %6.2f  %6.2f  %5s", ncclTime(res.timeUS), res.algbw, res.busbw, fmtWrong(res.wrong))
	}
	for _, c := range simCells(r) {
		fmt.Fprintf(&b, "  %s", c)
	}
	b.WriteString("  " + algoCell(r))
	return b.String()
}

// algoCell is what ran, and what NCCL would have run where commsim ran
// something else.
func algoCell(r row) string {
	if r.ncclChoice != "" {
		return r.algo + " (NCCL: " + r.ncclChoice + ")"
	}
	return r.algo
}

// cells are a row's columns in nccl-tests order for the box table: size,
// count, type, redop, root, then time, algbw, busbw and #wrong out of
// place and in place.
func cells(r row) []string {
	c := []string{strconv.FormatInt(r.bytes, 10), strconv.Itoa(r.count), r.dtype, r.redop, strconv.Itoa(r.root)}
	for _, res := range []result{r.outOfPlace, r.inPlace} {
		c = append(c, f2(res.timeUS), f2(res.algbw), f2(res.busbw), fmtWrong(res.wrong))
	}
	return c
}

var columns = []string{"size(B)", "count", "type", "redop", "root",
	"time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong",
	"in-place time(us)", "in-place algbw(GB/s)", "in-place busbw(GB/s)", "in-place #wrong"}

// writeMirrored says how many of the runs were timed on a mirror.
func writeMirrored(w io.Writer, mirrored, runs int) {
	if mirrored > 0 {
		fmt.Fprintf(w, "# %d of %d runs were timed by simulating only the ranks that stand for all (one on a switch, a node's or two nodes' on a cluster): every such block of ranks runs those plans alike on a fabric that looks alike from each, so the times are exact (--symmetry=false simulates every rank)\n", mirrored, runs)
	}
}

// writeRefined names the sizes whose channels that stand for all were
// simulated at finer pieces than every channel can be made at (simexec's
// refined runs), which --symmetry=false runs: their times differ there.
func writeRefined(w io.Writer, sizes []string) {
	if len(sizes) > 0 {
		fmt.Fprintf(w, "# %s: the channels that stand for all simulated at NCCL's pieces, finer than memory holds every channel at; --symmetry=false runs every channel at coarser pieces there, and its times differ\n", strings.Join(sizes, ", "))
	}
}

// rowRefined is a bench row's size and whether its run was refined.
func rowRefined(r row) (int64, bool) { return r.bytes, r.refined }

// refinedSizes lists the sizes of the rows that say they were refined.
func refinedSizes[R any](rows []R, refined func(R) (int64, bool)) []string {
	var sizes []string
	for _, r := range rows {
		if bytes, ok := refined(r); ok {
			sizes = append(sizes, formatBytes(bytes))
		}
	}
	return sizes
}

// writeTable is --format table: the sweep as a box table.
func writeTable(w io.Writer, s *sweep, rows []row) error {
	backend, _ := s.backend.describe(s.timingOnly)
	fmt.Fprintf(w, "# commsim bench: %s on %s (%s), backend %s, algorithm %s\n", s.op, s.topoName, rankCount(s.topo.NumGPUs()), backend, s.algo)
	writeAlgoNote(w, s)
	fmt.Fprint(w, benchTimesLine(s))
	writeMirrored(w, s.mirrored, 2*len(rows))
	writeRefined(w, refinedSizes(rows, rowRefined))
	simHeader(w, rows)
	header := append(append([]string{}, columns...), simColumns(rows)...)
	header = append(header, "algo")
	t := newTableWriter(w)
	t.Header(header)
	for _, r := range rows {
		if err := t.Append(append(append(cells(r), simCells(r)...), algoCell(r))); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	writeFooter(w, rows)
	return nil
}

// csvColumns are bench's CSV columns: the JSON Lines fields, in the same
// names as compare's CSV.
var csvColumns = []string{"op", "algo", "topology", "ranks", "dtype", "redop", "root", "bytes", "count",
	"time_us", "algbw_gbps", "busbw_gbps", "wrong", "inplace_time_us", "inplace_algbw_gbps", "inplace_busbw_gbps", "inplace_wrong", "nccl_choice", "refined", "gpus_per_thread", "iters"}

func csvCells(r row) []string {
	c := []string{r.op, r.algo, r.topology, strconv.Itoa(r.ranks), r.dtype, r.redop, strconv.Itoa(r.root), strconv.FormatInt(r.bytes, 10), strconv.Itoa(r.count)}
	for _, res := range []result{r.outOfPlace, r.inPlace} {
		c = append(c, exact(res.timeUS), exact(res.algbw), exact(res.busbw), fmtWrong(res.wrong))
	}
	return append(c, r.ncclChoice, strconv.FormatBool(r.refined), strconv.Itoa(r.gpusPerThread), strconv.Itoa(r.iters))
}

// jsonRecord holds the DESIGN contract's JSON fields of one measured run;
// bench and compare embed it in their records.
type jsonRecord struct {
	Op       string  `json:"op"`
	Algo     string  `json:"algo"`
	Topology string  `json:"topology"`
	Ranks    int     `json:"ranks"`
	DType    string  `json:"dtype"`
	Redop    string  `json:"redop"`
	Root     int     `json:"root"`
	Bytes    int64   `json:"bytes"`
	Count    int     `json:"count"`
	TimeUS   float64 `json:"time_us"`
	AlgBW    float64 `json:"algbw_gbps"`
	BusBW    float64 `json:"busbw_gbps"`
	Wrong    *int    `json:"wrong"`
}

// jsonRow is bench's JSON Lines record of one size: the out-of-place run,
// then the in-place one.
type jsonRow struct {
	jsonRecord
	InTimeUS float64 `json:"inplace_time_us"`
	InAlgBW  float64 `json:"inplace_algbw_gbps"`
	InBusBW  float64 `json:"inplace_busbw_gbps"`
	InWrong  *int    `json:"inplace_wrong"`
	// NCCLChoice is, with --algo nccl, what NCCL would run where commsim
	// cannot simulate it yet, or its plan is too large to hold; Algo is
	// what ran.
	NCCLChoice string `json:"nccl_choice,omitempty"`
	// Refined: the run was made at finer pieces than --symmetry=false can
	// make every channel at (see writeRefined).
	Refined bool `json:"refined,omitempty"`
	// GPUsPerThread is -g N's N where more than 1: the times are held to
	// its thread's launches (nccl.ThreadFloorUS).
	GPUsPerThread int `json:"gpus_per_thread,omitempty"`
	// Iters is -n × -m where more than 1: each size's runs, timed back to
	// back.
	Iters int `json:"iters,omitempty"`
	simJSON
}

func wrongPtr(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}

func jsonOf(r row) jsonRow {
	o, i := r.outOfPlace, r.inPlace
	return jsonRow{jsonRecord{r.op, r.algo, r.topology, r.ranks, r.dtype, r.redop, r.root, r.bytes, r.count,
		tidy(o.timeUS), tidy(o.algbw), tidy(o.busbw), wrongPtr(o.wrong)},
		tidy(i.timeUS), tidy(i.algbw), tidy(i.busbw), wrongPtr(i.wrong), r.ncclChoice, r.refined, overOne(r.gpusPerThread), overOne(r.iters), simFields(r)}
}

// overOne is n where more than one (GPUs a thread, runs), else 0 (left
// out).
func overOne(n int) int {
	if n > 1 {
		return n
	}
	return 0
}

// newTableWriter is the box table bench and compare print: headers as
// given, cells aligned right.
func newTableWriter(w io.Writer) *tablewriter.Table {
	return tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAlignment(tw.AlignRight))
}

// writeJSON writes v as indented JSON, the form every command's
// --format json takes.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeCSVRows writes rows (the first one the header) as CSV.
func writeCSVRows(w io.Writer, rows [][]string) error {
	cw := csv.NewWriter(w)
	if err := cw.WriteAll(rows); err != nil {
		return err
	}
	return cw.Error()
}
