package main

import (
	"fmt"
	"io"
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
	iters, warmup int // -n, -w: timed and warm-up runs on real backends
	// launch tuning nccl-tests has and commsim does not need
	threads, graphs, aggIters, average, blocking, parallelInit int
	stderr                                                     io.Writer // where notes go; nil drops them
	changed                                                    func(name string) bool
}

// ignoredNCCLFlag is a flag of nccl-tests' launch tuning: accepted, and
// noted when set, since commsim has nothing to tune.
type ignoredNCCLFlag struct {
	long, short string
	def         int
	note        string
}

var ignoredNCCLFlags = []ignoredNCCLFlag{
	{"cudagraph", "G", 0, "commsim does not capture CUDA graphs: each run is launched directly"},
	{"agg_iters", "m", 1, "commsim launches one collective per timed run"},
	{"average", "a", 1, "commsim reports the slowest rank's time (nccl-tests' -a 3), the only one a simulated or multi-process run has"},
	{"blocking", "z", 0, "commsim's runs always wait for the collective to finish"},
	{"parallel_init", "p", 0, "commsim sets its ranks up in one process (or one per rank with --nranks)"},
}

func (f *ncclTestFlags) register(fl *pflag.FlagSet) {
	fl.IntVarP(&f.ngpus, "ngpus", "g", 0, "GPUs, as nccl-tests' -g: on sim the first N GPUs of --topo (default all); on cuda and metal the ranks of this process (as --ranks)")
	fl.IntVarP(&f.iters, "iters", "n", 1, "timed runs per size on real backends, averaged (nccl-tests' -n); on sim one run is exact, since every run of a plan takes the same simulated time")
	fl.IntVarP(&f.warmup, "warmup_iters", "w", 0, "untimed runs before the timed ones on real backends (nccl-tests' -w); on sim there is nothing to warm up")
	fl.IntVarP(&f.threads, "nthreads", "t", 1, "nccl-tests' threads per process: commsim runs 1 (ask for GPUs with -g, processes with --nranks)")
	for i := range ignoredNCCLFlags {
		g := &ignoredNCCLFlags[i]
		target := map[string]*int{"cudagraph": &f.graphs, "agg_iters": &f.aggIters, "average": &f.average, "blocking": &f.blocking, "parallel_init": &f.parallelInit}[g.long]
		fl.IntVarP(target, g.long, g.short, g.def, "nccl-tests' -"+g.short+", accepted and ignored: "+g.note)
	}
}

// note prints a one-line note on stderr.
func (f *ncclTestFlags) note(format string, args ...any) {
	if f.stderr != nil {
		fmt.Fprintf(f.stderr, "commsim: note: "+format+"\n", args...)
	}
}

// validate checks nccl-tests' flags for a backend and notes those that do
// not apply to it.
func (f *ncclTestFlags) validate(backend string) error {
	changed := func(name string) bool { return f.changed != nil && f.changed(name) }
	switch {
	case changed("ngpus") && f.ngpus < 1:
		return usagef("-g %d: want 1 or more GPUs", f.ngpus)
	case changed("iters") && f.iters < 1:
		return usagef("-n %d: want 1 or more timed runs", f.iters)
	case f.warmup < 0:
		return usagef("-w %d: want 0 or more warm-up runs", f.warmup)
	case changed("nthreads") && f.threads != 1:
		return usagef("-t %d: commsim runs one thread per process; ask for GPUs with -g (or processes with --nranks)", f.threads)
	}
	if backend == "sim" && (changed("iters") || changed("warmup_iters")) {
		f.note("-n and -w: on sim every run of a plan takes the same simulated time, so one run is timed and it is exact")
	}
	for _, g := range ignoredNCCLFlags {
		if changed(g.long) {
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

// noArgs refuses positional arguments, with a hint for nccl-tests' "--check
// 1", which leaves the 1 behind (a bare --check means 1).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if args[0] == "0" || args[0] == "1" {
		return usagef("stray argument %q: write --check=%s or -c %s (a bare --check means 1)", args[0], args[0], args[0])
	}
	return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
}
