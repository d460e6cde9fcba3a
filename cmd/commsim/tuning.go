package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/fidelity"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// tuning: NCCL's cost table on a fabric, as NCCL prints it at init, and
// set beside the one a user's NCCL printed.

type tuningFlags struct {
	topo, log, format string
	ngpus             int
	// --op: per size, NCCL's choice and the next cheapest pair.
	op, minBytes, maxBytes, dtype string
	factor                        float64
	changed                       func(flag string) bool // whether the command line gave flag
	ncclFlags
}

func newTuningCmd() *cobra.Command {
	var f tuningFlags
	cmd := &cobra.Command{
		Use:   "tuning",
		Short: "Print NCCL's cost table for a fabric, as NCCL_DEBUG_SUBSYS=TUNING does, or check one a log printed",
		Long: `tuning prints the cost table that commsim's model of NCCL (package nccl,
what --algo nccl chooses with) gives the fabric: for each collective NCCL
tunes, algorithm and protocol, the latency in µs and the algorithm
bandwidth in GB/s its tuner prices a call with, laid out as NCCL's rank 0
prints it at init with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING, so that
the two can be set side by side; before it, the graphs (channels and their
speed) each algorithm is priced with and the channels NCCL's init reports
("24 coll channels, …"), and after it why the cells at 0.0/0.0 are off.
Nothing is simulated.

With --log, it reads the table NCCL printed into a log (nccl-tests' output
or any job's, rank tags and time stamps allowed; the first table, where a
job sets up several communicators) and prints each cell as the log has it
and as commsim's model gives it, and how many read the same to NCCL's
tenth, the channel counts the log's init reports beside the model's, and
what NCCL says it ran for each call (its tuning lines, 2.20 on) beside the
model's choice and, where the line gives NCCL's model time (2.20-2.23),
the model's time of the same pair: whether commsim sees the machine as
NCCL saw it. Lines of 2.20-2.22 name no collective: --op names it. A
tuning line that cannot be read (an algorithm commsim does not model,
say) is left out, and a last line names the first and counts them. The
NCCL version
and environment the log's lines state are taken unless a --nccl-* flag is
given; --topo must have the ranks of the log's communicator (-g takes the
first GPUs of it), and left out it is the preset the log's nccl-tests
device lines name, where they name one (as fidelity takes it), else
dgx-h100.

With --op, it prints instead, for each size of a sweep (-b, -e, -f and -d
as bench takes them, nccl-tests' meaning of size), what NCCL's tuner picks
for that collective, the model's time, the next cheapest pair and how much
slower the model makes it: how near the model is to choosing otherwise.`,
		Example: `  commsim tuning --topo dgx-h100x2
  commsim tuning --topo hgx-b200 --nccl-version 2.27 --nccl-env NCCL_NVLS_ENABLE=0
  commsim tuning --topo dgx-h100x2 --log nccl_debug.txt
  commsim tuning --topo dgx-h100x2 --op allreduce -b 1KiB -e 1GiB -f 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	f.changed = func(flag string) bool { return fl.Changed(flag) }
	fl.StringVar(&f.topo, "topo", "dgx-h100", "topology: a spec, a preset or a YAML file")
	fl.IntVarP(&f.ngpus, "ngpus", "g", 0, "the first N GPUs of --topo as the communicator (default all)")
	fl.StringVar(&f.log, "log", "", "a log with NCCL's own cost table or tuning lines (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING) or channel counts (NCCL_DEBUG=INFO) in it, at most 64 MiB, to check commsim's against")
	fl.StringVar(&f.format, "format", "text", "output: text (NCCL's layout; with --log a table of the cells)|csv|json")
	fl.StringVar(&f.op, "op", "", "per size of a sweep, what NCCL's tuner picks for this collective and the next cheapest pair (allreduce, allgather, …, or nccl-tests' all_reduce, …); with --log, the collective of the log's tuning lines that name none")
	fl.StringVarP(&f.minBytes, "min-bytes", "b", "8", "with --op: the smallest size")
	fl.StringVarP(&f.maxBytes, "max-bytes", "e", "64MiB", "with --op: the largest size")
	fl.Float64VarP(&f.factor, "factor", "f", 2, "with --op: the size multiplier between steps (> 1)")
	fl.StringVarP(&f.dtype, "dtype", "d", "f32", "with --op: the element type (f32, bf16, …, or nccl-tests' float, …)")
	f.ncclFlags.register(fl)
	fl.VisitAll(func(x *pflag.Flag) { // tuning is NCCL's model alone: it has no --algo
		x.Usage = strings.TrimPrefix(x.Usage, "with --algo nccl: ")
	})
	return cmd
}

// tuningReport is what tuning prints, as JSON.
type tuningReport struct {
	Topology     string        `json:"topology"`
	System       string        `json:"system"` // what NCCL's model reads of the fabric
	NCCLVersion  string        `json:"nccl_version"`
	NCCLEnv      string        `json:"nccl_env,omitempty"` // the flags that set it, where any do
	Graphs       []tuningGraph `json:"graphs"`             // of the algorithms NCCL's tuner may pick
	Channels     string        `json:"channels"`           // as NCCL's init reports them
	Cells        []tuningCell  `json:"cells"`
	Log          *tuningLog    `json:"log,omitempty"`
	costs        []nccl.Cost
	check        *fidelity.CostReport
	envNote      string
	unnamedCalls int // the log's calls that name no collective
}

type tuningGraph struct {
	Algo      string  `json:"algo"`
	Channels  int     `json:"channels"`
	IntraGBps float64 `json:"intra_gbps"`
	InterGBps float64 `json:"inter_gbps"`
}

type tuningCell struct {
	Op        string  `json:"op"`
	Algo      string  `json:"algo"`
	Protocol  string  `json:"protocol"`
	LatencyUS float64 `json:"latency_us"`
	AlgBW     float64 `json:"algbw_gbps"`
	Off       string  `json:"off,omitempty"`
	// With --log: the cell as the log prints it, its line, and whether
	// its latency and its bandwidth read the same in both to NCCL's
	// tenth (null where there is nothing to compare: see
	// fidelity.CostRow).
	LoggedLatencyUS *float64 `json:"logged_latency_us,omitempty"`
	LoggedAlgBW     *float64 `json:"logged_algbw_gbps,omitempty"`
	Line            int      `json:"line,omitempty"`
	LatencyAgree    *bool    `json:"latency_agree,omitempty"`
	BandwidthAgree  *bool    `json:"bandwidth_agree,omitempty"`
}

// agreement is a comparison as JSON: nil where nothing was compared.
func agreement(compared, agree bool) *bool {
	if !compared {
		return nil
	}
	return &agree
}

type tuningLog struct {
	File string `json:"file"`
	// Tables is how many the log prints; the first is read.
	Tables int `json:"tables"`
	Cells  int `json:"cells"`
	// Latencies counts the cells both sides give a latency, and
	// LatenciesAgree those that print alike; Bandwidths the cells either
	// side's tuner may pick, BandwidthsAgree those both may, alike.
	Latencies       int `json:"latencies"`
	LatenciesAgree  int `json:"latencies_agree"`
	Bandwidths      int `json:"bandwidths"`
	BandwidthsAgree int `json:"bandwidths_agree"`
	// Channels are the channel counts the log's init reports, at
	// ChannelsLine, beside commsim's model's.
	Channels     []tuningChannels `json:"channels,omitempty"`
	ChannelsLine int              `json:"channels_line,omitempty"`
	// Calls are the log's tuning lines for calls beside the model's
	// choice and its price of what NCCL ran (fidelity.CostReport).
	Calls        []tuningCall `json:"calls,omitempty"`
	Choices      int          `json:"choices"`
	ChoicesAgree int          `json:"choices_agree"`
	Times        int          `json:"times"`
	TimesAgree   int          `json:"times_agree"`
	// Unread are the tuning lines that could not be read, and why.
	Unread []tuningUnread `json:"unread,omitempty"`
	unread []calibrate.UnreadLine
}

type tuningUnread struct {
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

type tuningCall struct {
	Line      int     `json:"line"`
	Op        string  `json:"op"`
	Bytes     int64   `json:"bytes"`
	NCCLRan   string  `json:"nccl_ran"`
	NCCLUS    float64 `json:"nccl_model_us,omitempty"`
	Choice    string  `json:"commsim_choice"`
	ChoiceUS  float64 `json:"commsim_choice_us"`
	RanUS     float64 `json:"commsim_ran_us,omitempty"` // the model's time of what NCCL ran
	Agree     bool    `json:"choice_agrees"`
	TimeAgree *bool   `json:"time_agrees,omitempty"`
}

type tuningChannels struct {
	Name   string `json:"name"`
	Logged int    `json:"logged"`
	Model  int    `json:"commsim"`
}

func newTuningLog(file string, logged *calibrate.CostTableLog, c *fidelity.CostReport) *tuningLog {
	l := &tuningLog{File: file, Tables: logged.Tables, Cells: len(c.Rows), ChannelsLine: logged.ChannelsLine,
		Latencies: c.Latencies, LatenciesAgree: c.LatenciesAgree, Bandwidths: c.Bandwidths, BandwidthsAgree: c.BandwidthsAgree}
	for _, ch := range c.Channels {
		l.Channels = append(l.Channels, tuningChannels{ch.Name, ch.Logged, ch.Model})
	}
	l.Choices, l.ChoicesAgree, l.Times, l.TimesAgree = c.Choices, c.ChoicesAgree, c.Times, c.TimesAgree
	l.unread = logged.Stated.UnreadRan
	for _, u := range l.unread {
		l.Unread = append(l.Unread, tuningUnread{u.Line, u.Reason})
	}
	for _, call := range c.Calls {
		row := tuningCall{Line: call.Logged.Line, Op: call.Logged.Op, Bytes: call.Logged.Bytes, NCCLRan: call.Logged.Ran.String(), NCCLUS: call.Logged.TimeUS,
			Choice: call.Choice.String(), ChoiceUS: call.Choice.TimeUS, Agree: call.ChoiceAgrees(), TimeAgree: agreement(call.TimeAgree())}
		if call.Ran.Off == "" {
			row.RanUS = call.Ran.TimeUS
		}
		l.Calls = append(l.Calls, row)
	}
	return l
}

func cellOf(c nccl.Cost) tuningCell {
	return tuningCell{Op: c.Op.String(), Algo: c.Algo.String(), Protocol: c.Protocol.String(), LatencyUS: c.LatencyUS, AlgBW: c.AlgBW, Off: c.Off}
}

func (f *tuningFlags) run(stdout, stderr io.Writer) error {
	var err error
	if f.format, err = reportFormat(f.format, "text", "csv", "json"); err != nil {
		return err
	}
	if f.machine != "" {
		return usagef("--nccl-machine says how a machine departs from NCCL's model, which only a simulation follows; the cost table is the model itself")
	}
	var logData []byte // read once where --topo is left out: for its preset, then its cost table
	if f.log != "" && !f.changed("topo") {
		if data, err := readFileAtMost(f.log, maxLogBytes, f.log); err == nil {
			logData = data
			if spec, note, ok := logPreset(f.log, data); ok {
				f.topo = spec
				fmt.Fprintln(stderr, note)
			}
		}
	}
	topo, err := resolveTopology(f.topo)
	if err != nil {
		return err
	}
	name := f.topo
	if f.changed("ngpus") && f.ngpus == 0 {
		return usagef("-g 0: want 2 to %d, the GPUs of %s (leave -g out for all)", topo.NumGPUs(), f.topo)
	}
	if f.ngpus != 0 && f.ngpus != topo.NumGPUs() {
		if f.ngpus < 2 || f.ngpus > topo.NumGPUs() {
			return usagef("-g %d: want 2 to %d, the GPUs of %s", f.ngpus, topo.NumGPUs(), f.topo)
		}
		if topo, err = topology.FirstGPUs(topo, f.ngpus); err != nil {
			return usagef("-g %d: %v", f.ngpus, err)
		}
		name = fmt.Sprintf("%s (first %d GPUs)", f.topo, f.ngpus)
	}
	var logged *calibrate.CostTableLog
	var envNote string // the environment the log states, where taken
	for _, flag := range []string{"min-bytes", "max-bytes", "factor", "dtype"} {
		switch {
		case !f.changed(flag):
		case f.log != "":
			return usagef("--%s sets --op's sweep, which --log does not run (with --log, --op only names the collective of the log's unnamed tuning lines)", flag)
		case f.op == "":
			return usagef("--%s sets --op's sweep of NCCL's choices: give --op (without it, tuning prints the cost table, which has no sizes)", flag)
		}
	}
	if f.log != "" {
		data := logData
		if data == nil {
			if data, err = readFileAtMost(f.log, maxLogBytes, f.log); err != nil {
				return usagef("--log: %v", err)
			}
		}
		if logged, err = calibrate.ParseCostTable(f.log, data); err != nil {
			return usageError{err}
		}
		if u := logged.Unmodelled; len(u) > 0 {
			fmt.Fprintf(stderr, "commsim: note: %s: NCCL's cost table has %d %s of algorithms or protocols commsim does not model (%s; first on line %d): their cells are not compared\n",
				f.log, len(u), plural(len(u), "column", "columns"), strings.Join(u, ", "), logged.UnmodelledLine)
		}
		if cut := logged.CutRows; len(cut) > 0 {
			fmt.Fprintf(stderr, "commsim: warning: %s: %d %s of NCCL's cost table cut off before the columns the headers give (first on line %d): the cells past the cut are not compared\n",
				f.log, len(cut), plural(len(cut), "row", "rows"), cut[0])
		}
		if f.op != "" {
			// With --log, --op names the collective of the log's calls
			// whose tuning lines do not (NCCL 2.20-2.22).
			op, err := parseOp(f.op)
			if err != nil {
				return err
			}
			if !slices.Contains(nccl.TableOps, op) {
				return usagef("--op %s: NCCL's tuning lines are of the collectives its tuner chooses for, %s", f.op, joinOps(nccl.TableOps))
			}
			logged.NameCalls(op.String())
		}
		if logged.Ranks > 0 && logged.Ranks != topo.NumGPUs() {
			return usagef("--log %s: its communicator has %d ranks, %s %d GPUs (-g takes fewer)", f.log, logged.Ranks, name, topo.NumGPUs())
		}
		if envNote, _, err = f.useLogEnv(logged.Stated); err != nil {
			return err
		}
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	t, err := nccl.NewTuner(topo, o)
	if err != nil {
		return usageError{err}
	}
	if logged != nil && logged.Nodes > 0 && logged.Nodes != t.System.Nodes {
		return usagef("--log %s: its communicator spans %d nodes, %s %d", f.log, logged.Nodes, name, t.System.Nodes)
	}
	if f.op != "" && logged == nil {
		return f.runChoices(stdout, t, name)
	}
	costs, err := nccl.CostTable(t.System, t.Options)
	if err != nil {
		return usageError{err}
	}
	v := t.Options.Release()
	rep := tuningReport{Topology: name, System: t.System.String(), NCCLVersion: v.String(), NCCLEnv: optionFlags(t.Options), costs: costs, envNote: envNote,
		Channels: nccl.Channels(t.System, t.Options).String()}
	for _, g := range nccl.Graphs(t.System, v) {
		// The graphs of the algorithms NCCL's tuner may pick somewhere.
		if !slices.ContainsFunc(costs, func(c nccl.Cost) bool { return c.Algo == g.Algo && c.Off == "" }) {
			continue
		}
		rep.Graphs = append(rep.Graphs, tuningGraph{Algo: g.Algo.String(), Channels: g.Channels, IntraGBps: g.IntraGBps, InterGBps: g.InterGBps})
	}
	if logged == nil {
		for _, c := range costs {
			rep.Cells = append(rep.Cells, cellOf(c))
		}
	} else {
		if rep.check, err = fidelity.CheckCostTable(logged, t); err != nil {
			return usageError{err}
		}
		rep.Log = newTuningLog(f.log, logged, rep.check)
		for _, c := range logged.Calls {
			if c.Op == "" {
				rep.unnamedCalls++
			}
		}
		for _, r := range rep.check.Rows {
			cell := cellOf(r.Model)
			lat, bw := r.Logged.LatencyUS, r.Logged.AlgBW
			cell.LoggedLatencyUS, cell.LoggedAlgBW, cell.Line = &lat, &bw, r.Logged.Line
			cell.LatencyAgree, cell.BandwidthAgree = agreement(r.LatencyAgree()), agreement(r.BandwidthAgree())
			rep.Cells = append(rep.Cells, cell)
		}
		if logged.Tables > 1 && len(logged.Cells) > 0 {
			fmt.Fprintf(stderr, "commsim: warning: %s prints %d cost tables (one for each communicator its rank 0 set up); the first is read\n", f.log, logged.Tables)
		}
	}
	switch f.format {
	case "json":
		return writeJSON(stdout, rep)
	case "csv":
		return rep.writeCSV(stdout, stderr)
	}
	return rep.writeText(stdout)
}

func (r *tuningReport) writeText(w io.Writer) error {
	fmt.Fprintf(w, "# commsim tuning: NCCL %s's cost table on %s (%s), from commsim's model of NCCL; nothing simulated\n", r.NCCLVersion, r.Topology, withFlags(r.System, r.NCCLEnv))
	var graphs []string
	for _, g := range r.Graphs {
		graphs = append(graphs, fmt.Sprintf("%s %d × %.1f/%.1f", g.Algo, g.Channels, g.IntraGBps, g.InterGBps))
	}
	if r.envNote != "" {
		fmt.Fprintf(w, "# %s\n", r.envNote)
	}
	fmt.Fprintf(w, "# graphs, channels × GB/s within a node/across nodes (NCCL's bwIntra/bwInter): %s\n", strings.Join(graphs, ", "))
	if r.check != nil {
		return r.writeCheck(w)
	}
	fmt.Fprintf(w, "# channels, as NCCL's init reports them: %s\n", r.Channels)
	fmt.Fprintf(w, "# latency (us)/algorithm bandwidth (GB/s), as NCCL_DEBUG_SUBSYS=TUNING prints them; 0.0/0.0 where NCCL's tuner never picks the pair\n")
	writeCostTable(w, r.costs)
	writeOffReasons(w, r.costs)
	return nil
}

// writeCSV writes a line for each cell: commsim's, then with --log the
// log's and whether they agree ("" where nothing was compared). A log's
// calls and channel counts are no cells: a log with nothing else is
// refused, and one with cells too is written with a note on stderr of
// what only --format json and text show.
func (r *tuningReport) writeCSV(w, stderr io.Writer) error {
	if l := r.Log; l != nil && (len(l.Calls) > 0 || len(l.Channels) > 0 || r.unnamedCalls > 0) {
		what := fmt.Sprintf("%d tuning lines of calls and %d channel counts", len(l.Calls)+r.unnamedCalls, len(l.Channels))
		if len(r.Cells) == 0 {
			return usagef("--format csv writes a cost table's cells, and %s has none, only %s: use --format json or text", l.File, what)
		}
		fmt.Fprintf(stderr, "commsim: note: --format csv writes the cost table's cells; %s's %s are in --format json and text\n", l.File, what)
	}
	head := []string{"op", "algo", "protocol", "latency_us", "algbw_gbps", "off"}
	if r.Log != nil {
		head = append(head, "line", "logged_latency_us", "logged_algbw_gbps", "latency_agree", "bandwidth_agree")
	}
	rows := [][]string{head}
	flag := func(b *bool) string {
		if b == nil {
			return ""
		}
		return strconv.FormatBool(*b)
	}
	for _, c := range r.Cells {
		row := []string{c.Op, c.Algo, c.Protocol, fmtFloat(c.LatencyUS), fmtFloat(c.AlgBW), c.Off}
		if r.Log != nil {
			row = append(row, strconv.Itoa(c.Line), fmtFloat(*c.LoggedLatencyUS), fmtFloat(*c.LoggedAlgBW), flag(c.LatencyAgree), flag(c.BandwidthAgree))
		}
		rows = append(rows, row)
	}
	return writeCSVRows(w, rows)
}

// writeCostTable lays costs out as NCCL's rank 0 does (tuning.cc): in
// blocks of three algorithms, a row for each collective.
func writeCostTable(w io.Writer, costs []nccl.Cost) {
	var algos []nccl.Algo
	for _, c := range costs {
		if !slices.Contains(algos, c.Algo) {
			algos = append(algos, c.Algo)
		}
	}
	protos := nccl.Protocols()
	at := func(op ops.Op, a nccl.Algo, p ops.Protocol) nccl.Cost {
		i := slices.IndexFunc(costs, func(c nccl.Cost) bool { return c.Op == op && c.Algo == a && c.Protocol == p })
		return costs[i]
	}
	for block := 0; block < len(algos); block += 3 {
		in := algos[block:min(block+3, len(algos))]
		var b strings.Builder
		b.WriteString("  Algorithm   |")
		for _, a := range in {
			fmt.Fprintf(&b, " %14s   %14s   %14s |", "", a.NCCLName(), "")
		}
		b.WriteString("\n  Protocol    |")
		for range in {
			for _, p := range protos {
				fmt.Fprintf(&b, " %14s |", p)
			}
		}
		b.WriteString("\n")
		for _, op := range nccl.TableOps {
			fmt.Fprintf(&b, "%13s |", nccl.FuncName(op))
			for _, a := range in {
				for _, p := range protos {
					c := at(op, a, p)
					fmt.Fprintf(&b, "%8.1f/%6.1f |", c.LatencyUS, c.AlgBW)
				}
			}
			b.WriteString("\n")
		}
		io.WriteString(w, b.String())
	}
}

// writeOffReasons says why cells are off: each reason once, with the
// algorithms and collectives it holds for.
func writeOffReasons(w io.Writer, costs []nccl.Cost) {
	var reasons []string
	what := map[string][]string{}
	for _, c := range costs {
		if c.Off == "" {
			continue
		}
		if what[c.Off] == nil {
			reasons = append(reasons, c.Off)
		}
		pair := c.Algo.String() + "/" + c.Protocol.String()
		if !slices.Contains(what[c.Off], pair) {
			what[c.Off] = append(what[c.Off], pair)
		}
	}
	if len(reasons) > 0 {
		fmt.Fprintf(w, "# off:\n")
	}
	for _, r := range reasons {
		fmt.Fprintf(w, "#   %s: %s\n", strings.Join(what[r], ", "), r)
	}
}

func (r *tuningReport) writeCheck(w io.Writer) error {
	c := r.check
	if len(c.Rows) > 0 {
		fmt.Fprintf(w, "# the first cost table %s prints, cell by cell, beside commsim's: latency (us)/algorithm bandwidth (GB/s); off where commsim's tuner never picks the pair\n", r.Log.File)
		tw := newTableWriter(w)
		tw.Header([]string{"line", "collective", "algorithm", "protocol", "log", "commsim", "latency", "bandwidth"})
		mark := func(compared, agree bool) string {
			if !compared {
				return "-"
			}
			return agreeWord(agree)
		}
		for _, row := range c.Rows {
			model := row.Model.String()
			if row.Model.Off != "" {
				model = "off"
			}
			if err := tw.Append([]string{fmt.Sprint(row.Logged.Line), nccl.FuncName(row.Logged.Op), row.Logged.Algo.NCCLName(), row.Logged.Protocol.String(),
				row.Logged.Cost.String(), model, mark(row.LatencyAgree()), mark(row.BandwidthAgree())}); err != nil {
				return err
			}
		}
		if err := tw.Render(); err != nil {
			return err
		}
		fmt.Fprintf(w, "# latencies: %d of the %d cells both sides price read the same; bandwidths: %d of the %d cells either side's tuner may pick\n", c.LatenciesAgree, c.Latencies, c.BandwidthsAgree, c.Bandwidths)
	}
	if len(c.Channels) > 0 {
		fmt.Fprintf(w, "# channels, as the log's init reports them (line %d) and commsim's model: %s\n", r.Log.ChannelsLine, describeChannels(r.Log.Channels))
	}
	if len(r.Log.Calls) > 0 {
		if err := writeCalls(w, r.Log); err != nil {
			return err
		}
	}
	if n := r.unnamedCalls; n > 0 {
		fmt.Fprintf(w, "# %d of the log's tuning lines do not name their collective (NCCL 2.20-2.22): --op names it\n", n)
	}
	if r.Log != nil {
		io.WriteString(w, calibrate.DescribeUnread(r.Log.unread))
	}
	return nil
}

// writeCalls writes the log's tuning lines beside the model's choice.
func writeCalls(w io.Writer, l *tuningLog) error {
	fmt.Fprintf(w, "# what NCCL says it ran for each call, the first line of each size, beside commsim's model: its choice, and its time of what NCCL ran\n")
	tw := newTableWriter(w)
	tw.Header([]string{"line", "collective", "size(B)", "nccl ran", "nccl model(us)", "commsim chooses", "commsim(us) of what ran", "choice", "time"})
	for _, c := range l.Calls {
		nccl, ran, timeMark := "-", "-", "-"
		if c.NCCLUS > 0 {
			nccl = fmt.Sprintf("%.6f", c.NCCLUS)
		}
		if c.RanUS > 0 {
			ran = fmt.Sprintf("%.6f", c.RanUS)
		}
		if c.TimeAgree != nil {
			timeMark = agreeWord(*c.TimeAgree)
		}
		if err := tw.Append([]string{strconv.Itoa(c.Line), c.Op, strconv.FormatInt(c.Bytes, 10), c.NCCLRan, nccl, c.Choice, ran,
			agreeWord(c.Agree), timeMark}); err != nil {
			return err
		}
	}
	if err := tw.Render(); err != nil {
		return err
	}
	fmt.Fprintf(w, "# choices: %d of %d calls chose alike; model times: %d of the %d NCCL printed agree to a millionth\n", l.ChoicesAgree, l.Choices, l.TimesAgree, l.Times)
	return nil
}

// agreeWord marks a cell where commsim's model and NCCL's log agree, or
// one where they do not, so that it stands out.
func agreeWord(agree bool) string {
	if agree {
		return "same"
	}
	return "DIFFERS"
}

// withFlags is a header's description of NCCL's system, then the NCCL
// flags it runs under, if any.
func withFlags(system, flags string) string {
	if flags == "" {
		return system
	}
	return system + ", " + flags
}

// describeChannels is rows as a line: "coll 24 (commsim 24), …", each
// that differs marked.
func describeChannels(rows []tuningChannels) string {
	parts := make([]string, len(rows))
	for i, c := range rows {
		parts[i] = fmt.Sprintf("%s %d (commsim %d)", c.Name, c.Logged, c.Model)
		if c.Logged != c.Model {
			parts[i] += " DIFFERS"
		}
	}
	return strings.Join(parts, ", ")
}

// tuningChoice is, for one size, NCCL's choice and the next cheapest pair
// in its model.
type tuningChoice struct {
	Bytes  int64   `json:"bytes"`
	Choice string  `json:"nccl_choice"`
	TimeUS float64 `json:"model_us,omitempty"` // 0: point to point, which the model does not price
	Next   string  `json:"next,omitempty"`
	NextUS float64 `json:"next_model_us,omitempty"`
	// Margin is how much slower the model makes the next pair: (next −
	// chosen) / chosen.
	Margin float64 `json:"margin,omitempty"`
}

// runChoices prints, per size of the sweep, what NCCL's tuner picks for
// --op on t's fabric and the next cheapest pair.
func (f *tuningFlags) runChoices(w io.Writer, t *nccl.Tuner, name string) error {
	op, err := parseOp(f.op)
	if err != nil {
		return err
	}
	if !slices.Contains(nccl.Ops(), op) {
		return usagef("--op %s: NCCL's tuner chooses for %s", f.op, joinOps(nccl.Ops()))
	}
	dtype, err := parseDType(f.dtype)
	if err != nil {
		return err
	}
	lo, hi, err := sweepBounds(f.minBytes, f.maxBytes, f.changed("max-bytes"), dtype)
	if err != nil {
		return err
	}
	if !(f.factor > 1) || math.IsInf(f.factor, 0) {
		return usagef("--factor %v: want a number above 1", f.factor)
	}
	size := int64(dtype.Size())
	base := ops.Spec{Op: op, Algo: algoNCCL, Ranks: t.System.Ranks, DType: dtype, Redop: hw.Sum}
	var rows []tuningChoice
	for b, ok := lo, true; ok; b, ok = nextSize(b, hi, size, f.factor) {
		if len(rows) == 10000 {
			return usagef("the sweep from %s to %s by %v has over 10000 sizes", f.minBytes, f.maxBytes, f.factor)
		}
		spec, bytes := verify.SpecForSize(base, b)
		if spec.Count == 0 {
			continue // under one element a rank: nccl-tests' size 0
		}
		ranked, err := t.Ranked(spec)
		if err != nil {
			return usageError{err}
		}
		row := tuningChoice{Bytes: bytes, Choice: ranked[0].String(), TimeUS: ranked[0].TimeUS}
		if len(ranked) > 1 {
			next := ranked[1]
			row.Next, row.NextUS, row.Margin = next.String(), next.TimeUS, (next.TimeUS-row.TimeUS)/row.TimeUS
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		return usagef("no size from %s to %s has an element of %s for each of the %d ranks", f.minBytes, f.maxBytes, dtype, t.System.Ranks)
	}
	switch f.format {
	case "json":
		return writeJSON(w, struct {
			Topology    string         `json:"topology"`
			Op          string         `json:"op"`
			NCCLVersion string         `json:"nccl_version"`
			NCCLEnv     string         `json:"nccl_env,omitempty"`
			Sizes       []tuningChoice `json:"sizes"`
		}{name, op.String(), t.Options.Release().String(), optionFlags(t.Options), rows})
	case "csv":
		out := [][]string{{"bytes", "nccl_choice", "model_us", "next", "next_model_us", "margin"}}
		for _, r := range rows {
			out = append(out, []string{strconv.FormatInt(r.Bytes, 10), r.Choice, fmtFloat(r.TimeUS), r.Next, fmtFloat(r.NextUS), fmtFloat(r.Margin)})
		}
		return writeCSVRows(w, out)
	}
	fmt.Fprintf(w, "# commsim tuning: what NCCL %s's tuner picks for %s on %s (%s), by its model alone; nothing simulated\n",
		t.Options.Release(), op, name, withFlags(t.System.String(), optionFlags(t.Options)))
	fmt.Fprintf(w, "# margin: how much slower the model makes the next cheapest pair\n")
	tw := newTableWriter(w)
	tw.Header([]string{"size(B)", "nccl choice", "model(us)", "next", "next(us)", "margin"})
	for _, r := range rows {
		cells := []string{strconv.FormatInt(r.Bytes, 10), r.Choice, "-", r.Next, "-", "-"}
		if r.TimeUS > 0 {
			cells[2] = fmt.Sprintf("%.2f", r.TimeUS)
		}
		if r.Next != "" {
			cells[4], cells[5] = fmt.Sprintf("%.2f", r.NextUS), fmt.Sprintf("%+.1f%%", 100*r.Margin)
		}
		if err := tw.Append(cells); err != nil {
			return err
		}
	}
	return tw.Render()
}
