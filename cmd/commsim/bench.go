package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// benchFlags are the flags of bench (and compare, which shares the sweep).
type benchFlags struct {
	topo, op, algo, dtype, redop, format string
	minBytes, maxBytes, stepBytes        string
	factor                               float64
	root                                 int
	check                                checkFlag
	timingOnly, data, symmetry           bool
	trace                                string // bench and what-if only
	topoSet                              bool   // --topo was given
	traceMax                             traceMaxFlag
	backendFlags
	ncclFlags
	ncclTestFlags
}

func (f *benchFlags) register(cmd *cobra.Command, algoDefault string) {
	fl := cmd.Flags()
	fl.StringVar(&f.topo, "topo", "dgx-h100", "topology: a spec (ring:8, switch:16, cluster:2x8, …), a preset or a YAML file")
	fl.StringVar(&f.op, "op", "allreduce", "collective: "+strings.Join(opNames(), "|")+" (or nccl-tests' all_reduce, reduce_scatter, …; nccl-tests' -o/--op, the reduction, is -o/--redop here)")
	fl.StringVar(&f.algo, "algo", algoDefault, algoUsage(true))
	fl.StringVarP(&f.dtype, "dtype", "d", "f32", "element type: f32|f64|f16|bf16|i32|i64|u8 (or nccl-tests' float, double, half, bfloat16, int32, int64, uint8)")
	fl.StringVarP(&f.redop, "redop", "o", "sum", "reduce op: sum|prod|min|max|avg (-o as in nccl-tests)")
	fl.StringVarP(&f.minBytes, "min-bytes", "b", "8", "smallest size (8, 1KiB, 1MiB, 1GB; units to EiB and EB; K/M/G/T/P/E, or k/m/g, mean KiB/MiB/GiB/…)")
	fl.StringVarP(&f.maxBytes, "max-bytes", "e", "64MiB", "largest size")
	fl.Float64VarP(&f.factor, "factor", "f", 2, "size multiplier between steps (> 1; fractions too, each size rounded to whole elements, where nccl-tests reads -f as an integer), or 1 for steps of --stepbytes")
	fl.StringVarP(&f.stepBytes, "stepbytes", "i", "1MiB", "bytes added between steps where --factor is 1 (nccl-tests' -i; given alone, it makes the steps linear, as in nccl-tests)")
	fl.IntVarP(&f.root, "root", "r", 0, "root rank of gather, broadcast and reduce")
	fl.Var(&f.check, "check", "verify every rank's result against an exact reference: --check (or =1), --check=0 not; nccl-tests' -c 0|1 too. On sim it moves real data")
	fl.Lookup("check").NoOptDefVal = "1"
	fl.AddFlag(&pflag.Flag{Name: "validation", Shorthand: "c", Usage: "nccl-tests' -c 0|1: --check", Value: &f.check, DefValue: "0", Hidden: true})
	fl.BoolVar(&f.data, "data", false, "on sim, move and reduce real data without checking it (the times are the same as without)")
	fl.BoolVar(&f.timingOnly, "timing-only", false, "on sim, times without data (phantom buffers): the default unless --check or --data")
	fl.BoolVar(&f.symmetry, "symmetry", true, "with --timing-only on a fabric that looks alike from every GPU or node (switch:N, cluster:MxG, dgx-h100xN), time a plan that every rank runs alike (ring, rd, rhd, pairwise on even shapes) by simulating only the ranks that stand for all, and a plan whose channels repeat (NCCL's: 16 channels on nodes of 8 GPUs) by simulating one copy on the fabric with its bandwidths divided by their number: the same times, far faster (and where NCCL's pieces are too fine to hold every channel in memory, as for trees at 1024 GPUs, the copy runs at NCCL's pieces); =false simulates every rank and channel, made again as fine as memory allows")
	fl.StringVar(&f.format, "format", "text", "output: text (nccl-tests' layout)|table (a box table)|csv|json (JSON Lines)")
	f.backendFlags.register(cmd)
	f.ncclFlags.register(fl)
	f.ncclTestFlags.register(fl)
	f.addAliases(fl)
	f.ncclTestFlags.changed = func(name string) bool { return fl.Changed(name) }
}

func opNames() []string {
	var out []string
	for _, o := range ops.Ops() {
		out = append(out, o.String())
	}
	return out
}

// sweep is a validated bench request.
type sweep struct {
	topo        *topology.Topology
	topoName    string
	op          ops.Op
	algo        string
	nodeRanks   int         // the GPUs of a node, for an algorithm of NCCL's whose plans need them (fabricRuns)
	tuner       *nccl.Tuner // --algo nccl's
	machine     string      // --nccl-machine, as given: how the tuner's choices run
	channelNote string      // the channel rate measured on the GPUs, where it applies
	dtype       hw.DType
	redop       hw.ReduceOp
	sizes       []int64
	root        int
	check       bool
	timingOnly  bool
	symmetry    bool // let the simulator mirror symmetric plans
	mirrored    int  // runs timed on a mirror
	format      string
	factor      float64 // -f
	stepBytes   int64   // -i: the step of a linear sweep, 0 for a geometric one
	maxBytes    int64   // -e, which the last size may fall short of
	trace       string
	traceMax    int64 // --trace-max
	// threadGPUs and threadFloor: on sim, -g N > 1 has one thread launch
	// every collective on N GPUs, as nccl-tests' NCCL runs do, so no size
	// takes less than threadFloor seconds of host time
	// (nccl.ThreadFloorUS); 0 otherwise. A real backend's times have their
	// own host's part, and --sim-topo predicts commsim's plans, whose host
	// part is not NCCL's.
	threadGPUs  int
	threadFloor float64
	itersGiven  bool           // -n or -m was given: see noteLoneRuns
	aggIters    int            // -m: runner.Iters is -n times it
	plot        string         // bench --plot
	jsonOut     string         // bench -J: nccl-tests' JSON report (nccljson.go)
	backend     *backendPlan   // where the ranks live
	runner      *verify.Runner // its buffers serve every size (and every algorithm of compare's)
	pattern     *patternCache  // --check's inputs of the last size

	simTopo *topology.Topology // --sim-topo (simtopo.go), or nil

	// kept are the plans of the largest and the smallest size, made by
	// checkDuration and kept for the sweep: a plan of millions of steps
	// takes a second or two to count.
	kept [2]keptPlan
}

type keptPlan struct {
	spec ops.Spec
	plan *ops.Plan
}

// parse validates every flag; each failure is a usage error.
func (f *benchFlags) parse() (*sweep, error) {
	s := &sweep{check: bool(f.check), timingOnly: f.timingOnly, symmetry: f.symmetry, format: f.format, topoName: f.topo, trace: f.trace, traceMax: f.traceMax.bytes,
		factor: f.factor, pattern: &patternCache{}, runner: &verify.Runner{}}
	var err error
	if s.op, err = parseOp(f.op); err != nil {
		return nil, err
	}
	if f.algo == ops.Native && f.backend != "cuda" {
		return nil, usagef("algorithm native needs a backend with native collectives (cuda, through NCCL); the %s backend has none", f.backend)
	}
	if f.algo != "auto" && f.algo != ops.Native && f.algo != algoNCCL && !slices.Contains(ops.Algorithms(), f.algo) {
		return nil, usagef("unknown algorithm %q (want one of %s, auto, nccl, native)%s", f.algo, strings.Join(ops.Algorithms(), ", "),
			didYouMean(f.algo, append(ops.Algorithms(), "auto", algoNCCL, ops.Native)))
	}
	s.algo = f.algo
	switch {
	case s.algo != "auto" && s.algo != ops.Native && s.algo != algoNCCL && !ops.Runs(s.algo, s.op):
		return nil, usagef("algorithm %s has no %s (for %s use one of %s)", s.algo, s.op, s.op, algorithmsFor(s.op, "auto", algoNCCL))
	}

	if s.dtype, err = parseDType(f.dtype); err != nil {
		return nil, err
	}
	if s.redop, err = parseRedop(f.redop); err != nil {
		return nil, err
	}
	switch f.format {
	case "text", "table", "csv", "json":
	default:
		return nil, usagef("unknown format %q (want text, table, csv or json)", f.format)
	}
	if err := f.traceMax.checkTrace(f.trace); err != nil {
		return nil, err
	}
	if f.backend != "sim" && (s.timingOnly || s.trace != "") {
		return nil, usagef("--timing-only and --trace are for the simulator; the %s backend runs real data", f.backend)
	}
	if s.check && s.timingOnly {
		return nil, usagef("--check needs data; it cannot be combined with --timing-only")
	}
	if f.data && s.timingOnly {
		return nil, usagef("--data and --timing-only contradict each other")
	}
	if err := f.ncclTestFlags.validate(f.backend); err != nil {
		return nil, err
	}
	s.itersGiven = f.given("iters") || f.given("agg_iters")
	// On sim a time does not depend on the data: data moves only when
	// --check judges it or --data asks for it.
	s.timingOnly = f.backend == "sim" && !s.check && !f.data
	lo, hi, err := sweepBounds(f.minBytes, f.maxBytes, f.given("max-bytes") || f.given("maxbytes"), s.dtype)
	if err != nil {
		return nil, err
	}
	s.maxBytes = hi
	if !(f.factor >= 1) || math.IsInf(f.factor, 0) {
		return nil, usagef("--factor must be a number > 1, or 1 for steps of --stepbytes, got %v", f.factor)
	}
	size := int64(s.dtype.Size())
	if err := f.sweepSizes(s, lo, hi, size); err != nil {
		return nil, err
	}
	if s.op == ops.Barrier {
		s.sizes, s.maxBytes = []int64{0}, 0
	}
	if f.backend != "sim" && f.ngpus > 0 {
		// nccl-tests' -g is the GPUs of one process.
		switch {
		case f.multi != nil && f.ngpus > 1:
			return nil, usagef("-g %d: a multi-process run has one GPU per process", f.ngpus)
		case f.multi == nil && f.ranks != 0 && f.ranks != f.ngpus:
			return nil, usagef("-g %d and --ranks %d disagree: on %s both are the ranks of this process", f.ngpus, f.ranks, f.backend)
		case f.multi == nil:
			f.ranks = f.ngpus
		}
	}
	if s.backend, s.topo, err = f.backendFlags.resolve(f.topoSet, f.topo); err != nil {
		return nil, err
	}
	if s.backend.name != "sim" {
		s.topoName = s.backend.name // the topology is only auto's cost model
	} else if f.ngpus > 0 && f.ngpus != s.topo.NumGPUs() {
		if f.ngpus > s.topo.NumGPUs() {
			return nil, usagef("-g %d: %s has %d GPUs", f.ngpus, f.topo, s.topo.NumGPUs())
		}
		if f.ngpus == 1 {
			// A recipe's -g 1 is one GPU in each of its processes.
			f.note("-g 1: one rank of %s's %d GPUs. nccl-tests' -g counts one process's GPUs (a job of 8 processes with -g 1 has 8 ranks); on sim --topo's GPUs are the ranks: leave -g out for all of them", f.topo, s.topo.NumGPUs())
		}
		if s.topo, err = topology.FirstGPUs(s.topo, f.ngpus); err != nil {
			return nil, usagef("-g %d: %v", f.ngpus, err)
		}
		s.topoName = fmt.Sprintf("%s (first %s)", f.topo, plural(f.ngpus, "GPU", fmt.Sprintf("%d GPUs", f.ngpus)))
	}
	if f.given("thread-gpus") {
		switch p := s.topo.NumGPUs(); {
		case f.ngpus > 0 && f.threadGPUs != f.ngpus:
			return nil, usagef("-g %d and --thread-gpus %d disagree: -g's GPUs are one thread's", f.ngpus, f.threadGPUs)
		case p%f.threadGPUs != 0:
			return nil, usagef("--thread-gpus %d: %s's %d GPUs are no whole number of threads of %d", f.threadGPUs, cmp.Or(s.topoName, f.topo), p, f.threadGPUs)
		}
	}
	if g := max(f.ngpus, f.threadGPUs); s.backend.name == "sim" && g > 1 {
		s.threadGPUs, s.threadFloor = g, nccl.ThreadFloorUS(g)*1e-6
	}
	s.runner.Iters, s.aggIters = f.iters*f.aggIters, f.aggIters
	if s.backend.name != "sim" {
		s.runner.Warmup = f.warmup // a simulation has nothing to warm
	}
	p := s.topo.NumGPUs()
	if p > ops.MaxRanks {
		return nil, usagef("topology %s has %d GPUs, over the limit of %d ranks", f.topo, p, ops.MaxRanks)
	}
	if s.nodeRanks, err = fabricRuns(s.algo, s.topo, cmp.Or(s.topoName, f.topo)); err != nil {
		return nil, err
	}
	if s.algo == algoNCCL {
		if err := s.useNCCL(f.ncclFlags); err != nil {
			return nil, err
		}
	} else if f.ncclFlags.set() {
		return nil, f.ncclFlags.aloneError("--algo nccl")
	}
	if s.op.Rooted() && (f.root < 0 || f.root >= p) {
		return nil, usagef("--root %d out of range 0..%d for %d ranks", f.root, p-1, p)
	}
	s.root = f.root
	if !s.op.Rooted() {
		s.root = -1
		if f.given("root") {
			f.note("--root %d: %s has no root; ignored, as nccl-tests ignores -r", f.root, s.op)
		}
	}
	if !s.op.Reduces() && f.given("redop") {
		f.note("--redop %s: %s reduces nothing; ignored, as nccl-tests ignores -o", f.redop, s.op)
	}
	if !s.timingOnly && s.backend.name == "sim" {
		// Data mode holds input, output and scratch (each up to the top
		// size) on every rank.
		need := float64(hi) * 3 * float64(p)
		if need > sim.DefaultMaxDataBytes {
			about := "more than 8 EiB"
			if need < math.MaxInt64 {
				about = "about " + formatBytes(int64(need))
			}
			return nil, usagef("%s per rank on %d ranks needs %s of simulated device memory, over the %s limit; without --check and --data the sweep runs timing only",
				formatBytes(hi), p, about, formatBytes(sim.DefaultMaxDataBytes))
		}
	}
	if s.op == ops.Barrier && (f.given("min-bytes") || f.given("max-bytes") || f.given("minbytes") || f.given("maxbytes")) {
		f.note("a barrier moves no data: -b and -e are left out, and its one row is size 0") // once the flags are known good
	}
	return s, nil
}

// fabricRuns refuses, as a usage error naming why, an algorithm of NCCL's
// that the fabric (named name) cannot run: NVLS without an NVSwitch that
// reduces, or across nodes without SHARP; NVLS tree on one node; CollNet
// without SHARP; PAT on
// nodes of several GPUs; NVLS or CollNet across nodes whose GPUs are not
// numbered node by node. It returns the ranks of a node the algorithm's
// plans are made for (0: one node).
func fabricRuns(algo string, topo *topology.Topology, name string) (nodeRanks int, err error) {
	if !ops.NeedsSwitch(algo) && algo != "nccl-pat" {
		return 0, nil
	}
	sys, err := nccl.Describe(topo)
	if err != nil {
		return 0, usagef("algorithm %s on %s: %v", algo, name, err)
	}
	across := sys.Nodes > 1
	switch {
	case algo == "nccl-pat" && sys.PerNode > 1:
		return 0, usagef("algorithm nccl-pat needs one GPU per node (NCCL runs PAT only then, unless NCCL_PAT_ENABLE=1: --algo nccl --nccl-env NCCL_PAT_ENABLE=1 runs it on more), which %s does not have", name)
	case ops.NetworkSwitch(algo) && !sys.SHARP:
		return 0, usagef("algorithm %s needs nodes joined by network switches that reduce (SHARP), which %s does not have", algo, name)
	case ops.NeedsSwitch(algo) && !ops.NetworkSwitch(algo) && !sys.NVLSCapable:
		return 0, usagef("algorithm %s needs GPUs on a switch that reduces (NVLS), which %s does not have", algo, name)
	case algo == "nccl-nvlstree" && !across:
		return 0, usagef("algorithm nccl-nvlstree needs several nodes (NCCL runs NVLS tree only across them; on one node, nccl-nvls), which %s does not have", name)
	case algo == "nccl-nvls" && across && !sys.SHARP:
		return 0, usagef("algorithm nccl-nvls runs across nodes only over network switches that reduce (SHARP, NCCL's CollNet); %s has %d nodes", name, sys.Nodes)
	case ops.NeedsSwitch(algo) && across && !sys.NodeMajor:
		return 0, usagef("algorithm %s needs each node's GPUs numbered together, which %s does not have", algo, name)
	}
	if across && algo != "nccl-pat" {
		return sys.PerNode, nil
	}
	return 0, nil
}

// algoUsage is --algo's help, with native (NCCL itself, on a real
// backend) where the command has a backend.
func algoUsage(native bool) string {
	names, nativeNote := append(ops.Algorithms(), "auto", algoNCCL), ""
	if native {
		names, nativeNote = append(names, ops.Native), "; native: NCCL itself, on --backend cuda"
	}
	return "algorithm: " + strings.Join(names, "|") +
		" (auto: the cheapest of commsim's own by its cost model; nccl: what NCCL's tuner would run, per size" + nativeNote + ")"
}

// spec returns the collective for a size in bytes, with nccl-tests'
// meaning of size, and the size actually moved.
func (s *sweep) spec(bytes int64) (ops.Spec, int64) {
	spec := ops.Spec{Op: s.op, Algo: s.algo, Ranks: s.topo.NumGPUs(), DType: s.dtype, Redop: s.redop, Root: max(s.root, 0)}
	spec.NodeRanks = s.nodeRanks
	return verify.SpecForSize(spec, bytes)
}

// busFactor is nccl-tests' ratio of bus bandwidth to algorithm bandwidth.
func busFactor(op ops.Op, p int) float64 {
	P := float64(p)
	switch op {
	case ops.AllReduce:
		return 2 * (P - 1) / P
	case ops.ReduceScatter, ops.AllGather, ops.AllToAll, ops.Gather:
		return (P - 1) / P
	case ops.Barrier:
		return 0
	}
	return 1
}

// result is one measured run (out of place or in place).
type result struct {
	timeUS, algbw, busbw float64
	wrong                int // -1 when not checked
}

// row is one size of the sweep.
type row struct {
	op, algo, topology, dtype, redop string
	ranks, root                      int
	bytes                            int64
	count                            int
	outOfPlace, inPlace              result
	sim                              *prediction // --sim-topo's, or nil
	// ncclChoice is, with --algo nccl, what NCCL itself would run where
	// commsim cannot simulate it yet, or its plan is too large to hold
	// (algo says what ran instead).
	ncclChoice string
	// refined: the run's channels that stand for all were made at finer
	// pieces than every channel can be (simexec's RefinedRuns).
	refined bool
	// gpusPerThread is the run's GPUs a thread (sweep.gpusPerThread), so
	// that a reader of the CSV holds the times to the same floor; iters
	// the runs timed back to back (-n × -m), so that it times as many.
	gpusPerThread, iters int
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	var pf procFlags
	var plot, simTopo, jsonOut string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run an nccl-tests-style size sweep of one collective",
		Long: `bench times a collective over a sweep of sizes, out of place and in place, and
prints nccl-tests' output: its header lines and columns (size, count, type,
redop, root, time, algbw, busbw and #wrong), commsim's algorithm last, and the
average bus bandwidth; --format table, csv or json for others. It takes
nccl-tests' flags too (-g, -n, -w, -c, -d, -o; --op all_reduce). On sim, data
moves only with --check (or --data): a simulated time does not depend on it. Sizes follow nccl-tests: bytes per rank for allreduce, broadcast,
reduce and sendrecv; the total size for allgather, reducescatter, gather and
alltoall. Times are simulated on the topology (no GPU needed), or measured
with --backend cuda or metal.

With --nranks N > 1 (or COMMSIM_WORLD_SIZE) the sweep runs across N processes,
one GPU each, on one host or many, through NCCL (--backend cuda --algo native):
start the command once per rank with its --rank (or COMMSIM_RANK) and the same
--addr (or COMMSIM_ADDR), host:port where rank 0 serves the rendezvous. Each
size's time is the slowest rank's and #wrong the sum over ranks; rank 0 writes
the report. COMMSIM_TIMEOUT bounds the rendezvous (default 5m) and
COMMSIM_NCCL_TIMEOUT each collective (default 5m).`,
		Example: `  commsim bench --topo dgx-h100 --op allreduce
  commsim bench --topo dgx-h100 -g 4 --op all_reduce -b 8 -e 128M -f 2 -c 1 -d half   # nccl-tests' flags
  commsim bench --topo switch:64 --op allgather --algo rd -b 1KiB -e 1GiB --timing-only
  commsim bench --topo ring:8 --op reduce --root 3 --dtype bf16 --redop max --check --format json
  commsim bench --backend cuda --algo native --nranks 2 --rank 0 --addr node0:29500 -e 1GiB   # and --rank 1 elsewhere`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.topoSet = cmd.Flags().Changed("topo")
			f.stderr = cmd.ErrOrStderr()
			multi, err := pf.resolve(cmd.Flags())
			if err != nil {
				return err
			}
			if multi != nil {
				if err := multi.check(&f); err != nil {
					return err
				}
				f.multi = multi
			}
			s, err := f.parse()
			if err != nil {
				return err
			}
			if err := checkPlotFile(plot, s); err != nil {
				return err
			}
			if err := checkOutputPath("-J", jsonOut); err != nil {
				return err
			}
			if err := s.setSimTopo(simTopo); err != nil {
				return err
			}
			s.plot, s.jsonOut = plot, jsonOut
			return s.run(cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f.register(cmd, "auto")
	cmd.Flags().StringVar(&f.trace, "trace", "", "write a Perfetto trace of the whole sweep (every run, every rank, transfers, link rates) to FILE")
	addTraceMaxFlag(cmd.Flags(), &f.traceMax)
	cmd.Flags().StringVar(&plot, "plot", "", "also draw busbw and time against size (out of place; where auto or nccl changes its choice marked) into FILE.png or FILE.svg")
	cmd.Flags().StringVarP(&jsonOut, "output_file", "J", "", "also write the sweep as nccl-tests' JSON report (its -J), which calibrate and fidelity read back, to FILE")
	registerSimTopo(cmd, &simTopo)
	pf.register(cmd)
	return cmd
}

// run performs the sweep and writes the report.
func (s *sweep) run(stdout, stderr io.Writer) error {
	if s.backend.multi != nil {
		return s.runMulti(stdout, stderr)
	}
	if s.simTopo != nil {
		// The prediction runs after the measurement, and adds columns.
		rows, err := s.measure(stderr, nil)
		if err != nil {
			return s.keepPartial(stderr, rows, err)
		}
		if err := s.predict(rows); err != nil {
			return err
		}
		return s.report(stdout, stderr, rows)
	}
	rep := &benchReport{w: stdout, s: s}
	rows, err := s.measure(stderr, rep.add)
	if err != nil {
		if s.format == "table" && len(rows) > 0 {
			err = errors.Join(err, writeTable(stdout, s, rows))
		}
		return s.keepPartial(stderr, rows, err)
	}
	if err := rep.end(); err != nil {
		return err
	}
	return s.finish(stderr, rows)
}

// report writes the measured sweep, draws its plot and fails if --check
// found wrong elements.
func (s *sweep) report(stdout, stderr io.Writer, rows []row) error {
	if err := writeReport(stdout, s, rows); err != nil {
		return err
	}
	return s.finish(stderr, rows)
}

// finish draws the plot of a reported sweep, saying so on stderr, and
// fails if --check found wrong elements.
func (s *sweep) finish(stderr io.Writer, rows []row) error {
	if s.jsonOut != "" {
		if err := s.writeNCCLReport(stderr, rows, false); err != nil {
			return err
		}
	}
	if s.plot != "" {
		if err := s.drawPlot(rows); err != nil {
			return fmt.Errorf("--plot %s: %w", s.plot, err)
		}
		fmt.Fprintf(stderr, "commsim: wrote %s\n", s.plot)
	}
	if wrong, _ := totalWrong(rows); wrong > 0 {
		return fmt.Errorf("--check found %d wrong elements (see the #wrong columns)", wrong)
	}
	return nil
}

// totalWrong adds up the wrong elements of every checked run.
func totalWrong(rows []row) (wrong int, checked bool) {
	for _, r := range rows {
		for _, res := range []result{r.outOfPlace, r.inPlace} {
			if res.wrong >= 0 {
				checked = true
				wrong += res.wrong
			}
		}
	}
	return wrong, checked
}

// measure runs every size out of place and in place, handing each row to
// emit (when not nil) as it is measured. On an error it returns the rows
// measured before.
func (s *sweep) measure(stderr io.Writer, emit func(row) error) (rows []row, err error) {
	w, err := s.backend.open(s.topo, s.simConfig())
	if err != nil {
		return nil, err
	}
	exec := w.newExecutor()
	reusedMirrored := 0 // in-place runs taken from a mirrored out-of-place one
	parallel := false   // measureParallel counts the mirrored runs itself
	defer func() {
		if !parallel {
			s.mirrored = w.mirroredRuns() + reusedMirrored
		}
		err = errors.Join(err, exec.Close(), w.close())
	}()
	if w.cluster != nil {
		if err := s.checkDuration(w, stderr); err != nil {
			return nil, err
		}
	}
	sameInPlace := s.runsOnce(w)
	bar := newProgress(stderr, len(s.sizes))
	defer bar.stop()
	if workers := s.parallelWorkers(w); workers > 1 {
		parallel = true
		rows, err := s.measureParallel(workers, emit, bar)
		if err == nil {
			bar.done()
		}
		return rows, err
	}
	for i, bytes := range s.sizes {
		var r row
		if sameInPlace {
			var mirrored int
			if r, mirrored, err = s.measureSize(w, exec, s.runner, bytes); err != nil {
				return rows, err
			}
			reusedMirrored += mirrored / 2 // the in-place run, not run again
		} else if r, err = s.measureBoth(w, exec, bytes); err != nil {
			return rows, err
		}
		if s.trace != "" {
			// A trace only grows: refuse it at the first size that takes
			// it past --trace-max, not after the whole sweep.
			sofar := ""
			if i+1 < len(s.sizes) {
				sofar = fmt.Sprintf("after %d of %d sizes", i+1, len(s.sizes))
			}
			if err := checkTraceSize(w.cluster, sofar); err != nil {
				return rows, err
			}
		}
		rows = append(rows, r)
		if emit != nil {
			// The mirrored count so far, for a footer written as rows come.
			s.mirrored = w.mirroredRuns() + reusedMirrored
			if err := emit(r); err != nil {
				return rows, err
			}
		}
		bar.step()
	}
	bar.done()
	if s.trace != "" {
		if err := writeTraceFile(w.cluster, s.trace); err != nil {
			return nil, err
		}
	}
	return rows, nil
}

// measureBoth runs one size out of place and then in place on w, marking
// each run for --trace.
func (s *sweep) measureBoth(w *openedWorld, exec *ops.Executor, bytes int64) (row, error) {
	spec, moved := s.spec(bytes)
	plan, err := s.plan(spec)
	if err != nil {
		return row{}, err
	}
	if err := s.rewind(w); err != nil {
		return row{}, err
	}
	r := s.newRow(plan, moved)
	w.cluster.Mark(fmt.Sprintf("%s %s out-of-place", s.op, formatBytes(bytes)))
	if r.outOfPlace, err = s.runOnce(w.World, exec, plan, false, moved); err != nil {
		return row{}, fmt.Errorf("%s: %w", formatBytes(bytes), err)
	}
	w.cluster.Mark(fmt.Sprintf("%s %s in-place", s.op, formatBytes(bytes)))
	if r.inPlace, err = s.runOnce(w.World, exec, plan, true, moved); err != nil {
		return row{}, fmt.Errorf("%s in place: %w", formatBytes(bytes), err)
	}
	return r, nil
}

// newRow starts the report row of one size, run with plan.
func (s *sweep) newRow(plan *ops.Plan, moved int64) row {
	r := row{op: s.op.String(), algo: nccl.Label(plan), topology: s.topoName, dtype: s.dtype.String(), redop: s.redop.String(),
		ranks: plan.Ranks, root: s.root, bytes: moved, count: plan.Count, // a rank's elements, as nccl-tests counts them
		gpusPerThread: s.gpusPerThread(), iters: s.runner.Runs()}
	if s.algo == algoNCCL {
		if c, err := s.tuner.Choose(plan.Spec); err == nil && !c.NCCL.Runs(plan) {
			r.ncclChoice = c.NCCL.String()
		}
	}
	if !s.op.Reduces() {
		r.redop = "none"
	}
	return r
}

// timed is a run's result from its time, with nccl-tests' bandwidths, each
// tidied to the resolution the reports print.
func timed(secs float64, moved int64, op ops.Op, p int) result {
	res := result{timeUS: tidy(secs * 1e6), wrong: -1}
	if secs > 0 {
		algbw := float64(moved) / secs / 1e9
		res.algbw, res.busbw = tidy(algbw), tidy(algbw*busFactor(op, p))
	}
	return res
}

// simConfig is the simulator's configuration for the sweep.
func (s *sweep) simConfig() sim.Config {
	return sim.Config{TimingOnly: s.timingOnly, Trace: s.trace != "", TraceMaxBytes: s.traceMax, Symmetry: s.symmetry}
}

// plan compiles the spec, or picks the cheapest plan for auto.
func (s *sweep) plan(spec ops.Spec) (*ops.Plan, error) {
	for _, k := range s.kept {
		if k.plan != nil && k.spec == spec {
			return k.plan, nil
		}
	}
	if s.algo == algoNCCL {
		p, _, err := s.tuner.Plan(spec)
		if err != nil {
			return nil, usageError{err}
		}
		return p, nil
	}
	if s.algo != "auto" {
		p, err := ops.Compile(spec)
		if err != nil {
			return nil, usageError{err}
		}
		return p, nil
	}
	p, _, err := ops.Select(spec, s.topo)
	switch {
	case errors.Is(err, ops.ErrCostNotFinite):
		return nil, err // the fabric's, as the simulator's horizon is with a named algorithm
	case err != nil:
		return nil, usageError{err}
	}
	return p, nil
}

// rewind gives the next size of a sweep the simulator's whole horizon, as
// on a new cluster (sim.Cluster.Rewind): without it, sizes before would
// spend it, and a size could fail only for coming late. A trace keeps one
// timeline for the sweep, and so its clock.
func (s *sweep) rewind(w *openedWorld) error {
	if w.cluster == nil || s.trace != "" {
		return nil
	}
	return w.cluster.Rewind()
}

// runOnce runs the plan once on every rank and, with --check, judges the
// outputs against verify's reference (double-double, with the error bounds
// documented on verify.CheckReference).
func (s *sweep) runOnce(w *hw.World, exec *ops.Executor, plan *ops.Plan, inPlace bool, moved int64) (result, error) {
	// Without --check the values do not matter: the run is timed on what
	// the buffers hold (zeros at first), and reductions still run on real
	// data.
	c := verify.Case{Spec: plan.Spec}
	if s.check {
		var err error
		if c.Inputs, err = s.pattern.inputs(plan.Spec); err != nil {
			return result{}, err
		}
	}
	run, err := s.runner.Run(exec, w, plan, c.Inputs, inPlace)
	if err != nil {
		return result{}, err
	}
	res := timed(s.floored(run.Seconds), moved, plan.Op, plan.Ranks)
	if s.check {
		if res.wrong, _, err = verify.CountWrong(c, run.Outputs); err != nil {
			return result{}, err
		}
	}
	return res, nil
}

// patternCache keeps --check's inputs of one size: the out-of-place and
// in-place runs, compare's algorithms and what-if's two runs check the
// same ones, and making them costs as much as judging the outputs. A nil
// cache makes them every time.
type patternCache struct {
	key  ops.Spec // the spec without what the inputs do not depend on
	held [][]byte
}

func (p *patternCache) inputs(spec ops.Spec) ([][]byte, error) {
	key := ops.Spec{Op: spec.Op, Ranks: spec.Ranks, Count: spec.Count, DType: spec.DType, Redop: spec.Redop}
	if p != nil && p.held != nil && p.key == key {
		return p.held, nil
	}
	in, err := verify.PatternInputs(spec)
	if err == nil && p != nil {
		p.key, p.held = key, in
	}
	return in, err
}
