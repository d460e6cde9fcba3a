package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// nccl-tests' command line, as bench, compare and what-if take it: the
// flags that mean the same in commsim are shorthands or aliases of
// commsim's (-d/--datatype of --dtype, -o of --redop, --minbytes of
// --min-bytes, …); -g, -n, -w and -c are their own (ncclTestFlags); the
// flags that only tune how nccl-tests launches (threads, CUDA graphs,
// aggregation, averaging, blocking, parallel init) are accepted with a
// note on stderr, except a thread count commsim cannot run.

// checkFlag is --check (and nccl-tests' -c): 0 or 1, a bare --check
// meaning 1.
type checkFlag bool

func (c *checkFlag) String() string {
	if *c {
		return "1"
	}
	return "0"
}

func (c *checkFlag) Set(s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true":
		*c = true
	case "0", "false":
		*c = false
	default:
		return fmt.Errorf("want 0 or 1, not %q", s)
	}
	return nil
}

func (c *checkFlag) Type() string { return "0|1" }

// ncclTestFlags are nccl-tests' flags that commsim honours.
type ncclTestFlags struct {
	ngpus         int // -g: GPUs (on sim, the first of the topology's)
	threadGPUs    int // --thread-gpus: on sim, each thread's GPUs in a job of several processes
	iters, warmup int // -n, -w: timed runs (back to back) and warm-up runs
	aggIters      int // -m: collectives a timed run launches, back to back too
	threads       int // -t: commsim runs 1
	// ignored are the values of ignoredNCCLFlags, by long name.
	ignored map[string]*int
	stderr  io.Writer // where notes go; nil drops them
	changed func(name string) bool
}

// ignoredNCCLFlag is a flag of nccl-tests that commsim has nothing to do
// with (how nccl-tests launches and reports, NCCL features commsim does
// not model): accepted, and noted when set to anything but what commsim
// does anyway (same; never for some).
type ignoredNCCLFlag struct {
	long, short string
	def         int
	same        int // the value that asks for what commsim does, noted for nothing
	note        string
}

// never is a same that no value is: every setting is noted.
const never = math.MinInt

// maxSimRuns bounds -n × -m on sim, which simulates every run: a
// million 64-byte runs on 4 GPUs took over a minute and 15 GB.
const maxSimRuns = 100000

var ignoredNCCLFlags = []ignoredNCCLFlag{
	{"cudagraph", "G", 0, 0, "commsim does not capture CUDA graphs: each run is launched directly, -n × -m of them back to back (nccl-tests' -G N launches its graph of them N times: give -n N times as many for as many runs)"},
	{"average", "a", 1, 3, "commsim reports the slowest rank's time (nccl-tests' -a 3), the only one a simulated or multi-process run has"},
	{"blocking", "z", 0, never, "commsim's runs always wait for the collective to finish"},
	{"parallel_init", "p", 0, 0, "commsim sets its ranks up in one process (or one per rank with --nranks)"},
	{"run_cycles", "N", 1, 1, "commsim runs the sweep once"},
	{"stream_null", "y", 0, 0, "commsim's collectives run on streams of their own"},
	{"timeout", "T", 0, 0, "on sim a hang is found at once, as a deadlock that names the ranks waiting; real runs abort a collective after COMMSIM_NCCL_TIMEOUT (default 5m)"},
	{"report_cputime", "C", 0, 0, "commsim reports the collective's time (simulated, or by GPU events), not the host's"},
	{"report_timestamps", "S", 0, 0, "commsim's rows carry no timestamps (a simulated run has no clock)"},
	{"local_register", "R", 0, 0, "commsim does not register buffers with NCCL: its times are those of unregistered ones, and --algo nccl does not model NCCL's registered paths (NVLS and CollNet without copies, symmetric kernels)"},
	{"cta_policy", "x", 0, 0, "commsim does not set NCCL's CTA policy"},
	{"device_implementation", "D", 0, 0, "commsim runs NCCL's host API, not a device implementation"},
	{"device_cta_count", "V", 16, 16, "commsim runs NCCL's host API, not a device implementation"},
	{"memory", "M", 0, 0, "commsim prints no memory report"},
	{"unalign", "u", 0, 0, "commsim's buffers start aligned"},
	{"per_iter_timing", "I", 0, 0, "commsim reports the mean of the timed runs, not per-run statistics"},
	{"per_iter_skip", "K", 0, 0, "commsim reports the mean of the timed runs, not per-run statistics"},
}

func (f *ncclTestFlags) register(fl *pflag.FlagSet) {
	fl.IntVarP(&f.ngpus, "ngpus", "g", 0, "GPUs, as nccl-tests' -g: on sim the first N GPUs of --topo (default all), driven by one thread, whose launches set a floor under every size from 2 GPUs on (nccl.ThreadFloorUS); on cuda and metal the ranks of this process (as --ranks)")
	fl.IntVar(&f.threadGPUs, "thread-gpus", 0, "on sim, the GPUs each thread drives in a job of several processes, as nccl-tests' -g under mpirun -np 2 on dgx-h100x2 (8): every rank of --topo runs, and each size takes at least N launches of host time (nccl.ThreadFloorUS)")
	fl.IntVarP(&f.iters, "iters", "n", 1, "timed runs per size, launched back to back and averaged, as nccl-tests' -n (its default is 20): a rooted collective's runs (broadcast, reduce, gather) overlap, so their mean is less than one run's time; on sim every run is simulated (at most 100000 a size, with -m's)")
	fl.IntVarP(&f.aggIters, "agg_iters", "m", 1, "collectives each timed run launches in a group, as nccl-tests' -m: each size is timed as -n × -m collectives back to back, their mean the time")
	fl.IntVarP(&f.warmup, "warmup_iters", "w", 0, "untimed runs before the timed ones on real backends (nccl-tests' -w); on sim there is nothing to warm up")
	fl.IntVarP(&f.threads, "nthreads", "t", 1, "nccl-tests' threads per process: commsim runs 1 (ask for GPUs with -g, processes with --nranks)")
	f.ignored = map[string]*int{}
	for _, g := range ignoredNCCLFlags {
		f.ignored[g.long] = new(int)
		fl.IntVarP(f.ignored[g.long], g.long, g.short, g.def, "nccl-tests' -"+g.short+", accepted and ignored: "+g.note)
	}
}

// given reports whether flag name was set on the command line (false
// where the command does not say).
func (f *ncclTestFlags) given(name string) bool { return f.changed != nil && f.changed(name) }

// note prints a one-line note on stderr.
func (f *ncclTestFlags) note(format string, args ...any) {
	if f.stderr != nil {
		fmt.Fprintf(f.stderr, "commsim: note: "+format+"\n", args...)
	}
}

// validate checks nccl-tests' flags for a backend and notes those that do
// not apply to it.
func (f *ncclTestFlags) validate(backend string) error {
	switch {
	case f.given("ngpus") && f.ngpus < 1:
		return usagef("-g %d: want 1 or more GPUs", f.ngpus)
	case f.given("thread-gpus") && f.threadGPUs < 1:
		return usagef("--thread-gpus %d: want 1 or more GPUs", f.threadGPUs)
	case f.given("thread-gpus") && backend != "sim":
		return usagef("--thread-gpus is for the simulator; on %s the run's threads are its own (-g, --ranks)", backend)
	case f.given("iters") && f.iters < 1:
		return usagef("-n %d: want 1 or more timed runs", f.iters)
	case f.given("agg_iters") && f.aggIters < 1:
		return usagef("-m %d: want 1 or more collectives a run", f.aggIters)
	case f.iters > math.MaxInt32/max(f.aggIters, 1):
		return usagef("-n %d × -m %d: over %d collectives a size", f.iters, f.aggIters, math.MaxInt32)
	case backend == "sim" && f.iters*f.aggIters > maxSimRuns:
		return usagef("-n %d × -m %d: over %d collectives a size, which on sim are each simulated (minutes and gigabytes even on 4 GPUs); nccl-tests' default is -n 20", f.iters, f.aggIters, maxSimRuns)
	case f.warmup < 0:
		return usagef("-w %d: want 0 or more warm-up runs", f.warmup)
	case f.given("nthreads") && f.threads != 1:
		return usagef("-t %d: commsim runs one thread per process; ask for GPUs with -g (or processes with --nranks)", f.threads)
	}
	if backend == "sim" && f.given("warmup_iters") {
		f.note("-w: on sim there is nothing to warm up, so no run is")
	}
	for _, g := range ignoredNCCLFlags {
		if f.given(g.long) && *f.ignored[g.long] != g.same {
			f.note("-%s: %s", g.short, g.note)
		}
	}
	return nil
}

// addAliases registers nccl-tests' spellings of commsim flags as hidden
// flags on the same variables: --datatype, --minbytes, --maxbytes,
// --stepfactor.
func (f *benchFlags) addAliases(fl *pflag.FlagSet) {
	for _, a := range []struct{ alias, of string }{{"datatype", "dtype"}, {"minbytes", "min-bytes"}, {"maxbytes", "max-bytes"}, {"stepfactor", "factor"}} {
		orig := fl.Lookup(a.of)
		if orig == nil {
			continue
		}
		fl.AddFlag(&pflag.Flag{Name: a.alias, Usage: "nccl-tests' name of --" + a.of, Value: orig.Value, DefValue: orig.DefValue, Hidden: true})
	}
}

// parseOp reads --op: commsim's names and nccl-tests' (all_reduce,
// reduce_scatter, all_reduce_perf, …). A reduction there is a habit from
// nccl-tests, whose --op is the reduction: the error says where it goes.
func parseOp(s string) (ops.Op, error) {
	name := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "_perf")
	if o, err := ops.ParseOp(strings.ReplaceAll(name, "_", "")); err == nil {
		return o, nil
	}
	if _, err := hw.ParseReduceOp(name); err == nil {
		return 0, usagef("--op %s: commsim's --op is the collective (%s); the reduction is -o/--redop (nccl-tests' -o/--op)", s, strings.Join(opNames(), ", "))
	}
	return 0, usagef("--op %q: unknown collective (want one of %s, or nccl-tests' all_reduce, all_gather, reduce_scatter, …)%s", s, strings.Join(opNames(), ", "),
		didYouMean(strings.ReplaceAll(name, "_", ""), opNames()))
}

// parseDType reads -d/--dtype: commsim's names and nccl-tests'. nccl-tests'
// -d all, which runs every type in turn, and its types commsim has none
// of are named as such.
func parseDType(s string) (hw.DType, error) {
	d, err := hw.ParseDType(s)
	if err == nil {
		return d, nil
	}
	names := make([]string, 0, len(hw.DTypes()))
	for _, d := range hw.DTypes() {
		names = append(names, d.String())
	}
	why := "unknown element type"
	if strings.EqualFold(strings.TrimSpace(s), "all") {
		why = "one type a sweep (nccl-tests' -d all runs each in turn: run one sweep a type)"
	}
	return 0, usagef("-d/--dtype %q: %s; want %s, or nccl-tests' float, double, half, bfloat16, int32, int64, uint8", s, why, strings.Join(names, ", "))
}

// parseRedop reads -o/--redop; nccl-tests' -o all is named as such.
func parseRedop(s string) (hw.ReduceOp, error) {
	o, err := hw.ParseReduceOp(s)
	if err == nil {
		return o, nil
	}
	why := "unknown reduction"
	if strings.EqualFold(strings.TrimSpace(s), "all") {
		why = "one reduction a sweep (nccl-tests' -o all runs each in turn: run one sweep a reduction)"
	}
	return 0, usagef("-o/--redop %q: %s; want sum, prod, min, max or avg", s, why)
}

// noArgs refuses positional arguments, with a hint for nccl-tests' "--check
// 1", which leaves the 1 behind (a bare --check means 1).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if args[0] == "0" || args[0] == "1" {
		return usagef("stray argument %q: write --check=%s or -c %s (a bare --check means 1)", args[0], args[0], args[0])
	}
	if _, err := strconv.Atoi(args[0]); err == nil && cmd.Flags().Lookup("check") != nil {
		return usagef("stray argument %q: --check takes 0 or 1, written --check=1 or -c 1 (a bare --check means 1)", args[0])
	}
	return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
}

// algorithmsFor lists, for a hint, the algorithms that run op (then
// more, the command's own: auto, nccl), and those that run it on a fabric
// whose switches reduce.
func algorithmsFor(op ops.Op, more ...string) string {
	list := strings.Join(append(ops.AlgorithmsFor(op), more...), ", ")
	var onSwitch []string
	for _, a := range ops.Algorithms() {
		if ops.NeedsSwitch(a) && ops.Runs(a, op) {
			onSwitch = append(onSwitch, a)
		}
	}
	if len(onSwitch) > 0 {
		list += "; where switches reduce, " + strings.Join(onSwitch, ", ")
	}
	return list
}
