package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
)

// whatIfFlags are bench's flags (one size) plus the faults.
type whatIfFlags struct {
	benchFlags
	bytes  string
	faults []string
	// A training step instead of a collective:
	model, bucket string
	sharded       bool
}

func newWhatIfCmd() *cobra.Command {
	var f whatIfFlags
	cmd := &cobra.Command{
		Use:   "what-if",
		Short: "Run a collective with and without faults and compare",
		Long: `what-if runs one collective twice on the same topology: once as it is, once
with the faults given by --fault, and reports both times and the difference,
what the faults caused (reroutes, transfers cut off) or the error the faulted
run ended with; then the exit status is 1. Fault times count from the start
of the collective; a fault without "at T" starts with it (T = 0).

Fault syntax (repeat --fault for several):
  link A-B down [at T]        both directions stop; transfers reroute if they can
  link A-B degrade P% [at T]  the link keeps P% of its bandwidth
  rank R stall D [at T]       rank R starts nothing new for D
  rank R crash [at T]         rank R fails; its peers get errors, not hangs
  rank R slow P% [at T]       rank R reduces at P% of its bandwidth
  rank R compute-slow P% [at T]  rank R computes at P% of its speed (with --model)`,
		Example: `  commsim what-if --topo ring:8 --op allreduce --algo ring -e 64MiB --fault 'link gpu3-gpu4 down at 20us'
  commsim what-if --model gpt2-small --topo dgx-h100 --fault 'rank 3 slow 50%' --fault 'link gpu0-sw0 degrade 50% at 0'
  commsim what-if --topo dgx-h100 --op allgather --fault 'link gpu0-sw0 degrade 25% at 0' --check
  commsim what-if --topo switch:16 --op reduce --algo tree --fault 'rank 5 crash at 3us' --timing-only`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.stderr = cmd.ErrOrStderr()
			f.changed = cmd.Flags().Changed // its own flags (--bytes) with bench's
			return f.run(cmd.OutOrStdout())
		},
	}
	scratch := &cobra.Command{}
	f.register(scratch, "auto")
	scratch.Flags().VisitAll(func(fl *pflag.Flag) {
		switch fl.Name {
		// One size; faults are simulated; and no host floor, which would
		// hide what a fault does (run).
		case "min-bytes", "factor", "max-bytes", "minbytes", "maxbytes", "stepfactor", "stepbytes", "backend", "ranks", "placement", "thread-gpus":
		default:
			cmd.Flags().AddFlag(fl)
		}
	})
	cmd.Flags().Lookup("algo").Usage = algoUsage(false)
	cmd.Flags().Lookup("ngpus").Usage = "GPUs, as nccl-tests' -g: the first N GPUs of --topo (default all); no host floor, which would hide what a fault does"
	cmd.Flags().Lookup("format").Usage = "output: text (the two runs and what the faults did)|table (a box table)|csv|json"
	cmd.Flags().StringVarP(&f.bytes, "bytes", "e", "64MiB", "size of the collective (bench's meaning of size)")
	cmd.Flags().StringArrayVar(&f.faults, "fault", nil, "a fault, e.g. 'link gpu3-sw0 down at 100us' (repeatable)")
	cmd.Flags().StringVar(&f.model, "model", "", "run a training step of this model profile instead of one collective (see commsim train)")
	cmd.Flags().StringVar(&f.bucket, "bucket-bytes", "25MiB", "gradient bucket size, with --model")
	cmd.Flags().BoolVar(&f.sharded, "sharded", false, "shard every parameter, with --model")
	cmd.Flags().StringVar(&f.trace, "trace", "", "write a Perfetto trace of the run with faults to FILE")
	addTraceMaxFlag(cmd.Flags(), &f.traceMax)
	return cmd
}

// scenario is one run of a what-if.
type scenario struct {
	Name   string   `json:"scenario"`
	TimeUS *float64 `json:"time_us,omitempty"` // nil when the run failed
	BusBW  *float64 `json:"busbw_gbps,omitempty"`
	Wrong  *int     `json:"wrong,omitempty"`
	Error  string   `json:"error,omitempty"`
	Log    []string `json:"log,omitempty"`
}

func (f *whatIfFlags) run(w io.Writer) error {
	if len(f.faults) == 0 {
		return usagef("what-if needs at least one --fault")
	}
	if err := f.traceMax.checkTrace(f.trace); err != nil {
		return err
	}
	var faults []sim.Fault
	for _, s := range f.faults {
		ft, err := sim.ParseFault(s)
		if err != nil {
			return usageError{err}
		}
		if ft.Kind == sim.SlowCompute && f.model == "" {
			return usagef("--fault %q slows compute, which only a training step has: add --model", s)
		}
		faults = append(faults, ft)
	}
	if f.model != "" {
		return f.runStep(w, faults)
	}
	for _, name := range []string{"bucket-bytes", "sharded"} {
		if f.changed(name) {
			return usagef("--%s goes with a training step (--model); a collective has no gradients to bucket or shard", name)
		}
	}
	if _, err := parseBytes(f.bytes); err != nil {
		return usagef("--bytes: %v", err) // bench's flags below would name -b
	}
	f.minBytes, f.maxBytes, f.factor = f.bytes, f.bytes, 2
	s, err := f.parse()
	if err != nil {
		return err
	}
	// A fault acts on the fabric's time: -g's host floor would hide what it
	// does (a stall under it reads as nothing) and time what never fired.
	s.threadGPUs, s.threadFloor = 0, 0
	// Two runs of -n each, every rank simulated (faults keep a cluster
	// off the mirror, and the baseline is not given one).
	est, err := s.estimate(nil, 2*float64(s.runner.Runs()))
	if err != nil {
		return err
	}
	if err := est.judge(f.stderr, "what-if"); err != nil {
		return err
	}
	spec, moved := s.spec(s.sizes[0])
	plan, err := s.plan(spec)
	if err != nil {
		return err
	}
	// Build both clusters first, so a fault that does not fit the
	// topology is refused before anything runs.
	var clusters []*sim.Cluster
	for i := range 2 {
		c, err := sim.NewCluster(s.topo, sim.Config{TimingOnly: s.timingOnly, Trace: i == 1 && f.trace != "", TraceMaxBytes: f.traceMax.bytes})
		if err != nil {
			return err
		}
		defer c.Close()
		clusters = append(clusters, c)
	}
	for _, ft := range faults {
		if err := clusters[1].Inject(ft); err != nil {
			if f.ngpus > 0 && s.topoName != f.topo {
				// A link of --topo that -g left out reads as none at all.
				return usagef("%v (-g %d keeps the first %d GPUs of %s and only the links and switches that serve them)", err, f.ngpus, f.ngpus, f.topo)
			}
			return usageError{err}
		}
	}
	var runs []scenario
	for i, c := range clusters {
		withFaults := i == 1
		sc := scenario{Name: "baseline"}
		if withFaults {
			sc.Name = "with faults"
		}
		res, err := s.runOnce(c.World(), simexec.NewExecutor(c), plan, false, moved)
		if err != nil {
			sc.Error = err.Error()
		} else {
			sc.TimeUS, sc.BusBW, sc.Wrong = &res.timeUS, &res.busbw, wrongPtr(res.wrong)
		}
		sc.Log = faultLog(c)
		runs = append(runs, sc)
		if !withFaults && err != nil {
			return err // the collective fails even without faults
		}
	}
	runs[1].Log = append(runs[1].Log, idleFaults(s, faults)...)
	if f.trace != "" {
		if err := writeTraceFile(clusters[1], f.trace); err != nil {
			return err
		}
	}
	if err := writeScenarios(w, s, plan, moved, runs); err != nil {
		return err
	}
	return faultedRunError(runs[1].Error)
}

// idleFaults says, of each slowed reduction that cannot slow this
// collective, why: it does not reduce, or the rank's GPU reduces for
// free, and a fraction of free is free; and of a link degraded to 100%
// that it keeps its bandwidth. The fault log says each fired.
func idleFaults(s *sweep, faults []sim.Fault) []string {
	var notes []string
	for _, ft := range faults {
		if ft.Kind == sim.LinkDegrade && ft.Factor == 1 {
			notes = append(notes, fmt.Sprintf("changes nothing: %v: the link keeps all of its bandwidth", ft))
		}
		if ft.Kind != sim.SlowReduce {
			continue
		}
		switch gpu := s.topo.Nodes[s.topo.GPUs()[ft.Rank]]; {
		case !s.op.Reduces():
			notes = append(notes, fmt.Sprintf("changes nothing: %v: %s does not reduce", ft, s.op))
		case math.IsInf(gpu.ReduceBW, 1):
			notes = append(notes, fmt.Sprintf("changes nothing: %v: %s reduces for free on %s (reduce: inf); give the GPUs a reduction bandwidth (a spec's reduce=, a YAML node's reduce:)",
				ft, gpu.Name, s.topoName))
		}
	}
	return notes
}

// faultedRunError makes the faulted run's failure the command's, once the
// comparison is printed: a script learns of it from the exit status.
func faultedRunError(failure string) error {
	if failure == "" {
		return nil
	}
	return fmt.Errorf("the run with faults failed: %s", strings.ReplaceAll(failure, "\n", "; "))
}

// writeScenarios prints a collective's runs with and without faults.
func writeScenarios(w io.Writer, s *sweep, plan *ops.Plan, moved int64, runs []scenario) error {
	switch s.format {
	case "json":
		enc := json.NewEncoder(w)
		for _, r := range runs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case "csv":
		rows := [][]string{{"scenario", "time_us", "busbw_gbps", "wrong", "error"}}
		for _, r := range runs {
			var timeUS, busbw, wrong string
			if r.Error == "" {
				timeUS, busbw = f2(*r.TimeUS), f2(*r.BusBW)
			}
			if r.Wrong != nil {
				wrong = strconv.Itoa(*r.Wrong)
			}
			rows = append(rows, []string{r.Name, timeUS, busbw, wrong, r.Error})
		}
		return writeCSVRows(w, rows)
	}
	fmt.Fprintf(w, "# commsim what-if: %s/%s of %s on %s (%d ranks), %s\n", s.op, plan.Algo, formatBytes(moved), s.topoName, plan.Ranks,
		map[bool]string{true: "timing-only", false: "with data"}[s.timingOnly])
	for _, r := range runs {
		if r.Error != "" {
			fmt.Fprintf(w, "%-12s failed: %s\n", r.Name, strings.ReplaceAll(r.Error, "\n", "\n             "))
			continue
		}
		fmt.Fprintf(w, "%-12s %12.3f us  %9.2f GB/s busbw", r.Name, *r.TimeUS, *r.BusBW)
		if r.Wrong != nil {
			fmt.Fprintf(w, "  #wrong %d", *r.Wrong)
		}
		fmt.Fprintln(w)
	}
	if base, hit := runs[0], runs[1]; hit.Error == "" && *base.TimeUS > 0 {
		fmt.Fprintf(w, "difference   %+12.3f us  (%+.1f%%)\n", *hit.TimeUS-*base.TimeUS, 100*(*hit.TimeUS-*base.TimeUS) / *base.TimeUS)
	}
	fmt.Fprintln(w, "# what the faults did:")
	for _, line := range runs[1].Log {
		fmt.Fprintf(w, "#   %s\n", line)
	}
	return nil
}

// faultLog is what the faults did on c (sim's fault log), then a line for
// each fault whose time the run never reached, so a fault that changed
// nothing is told from one that did not happen.
func faultLog(c *sim.Cluster) []string {
	log := c.FaultLog()
	for _, f := range c.Unfired() {
		log = append(log, fmt.Sprintf("never fired: %v (the run ended before its time)", f))
	}
	return log
}

// runStep is what-if for a training step (--model): the step with and
// without the faults.
func (f *whatIfFlags) runStep(w io.Writer, faults []sim.Fault) error {
	if f.format != "text" && f.format != "table" && f.format != "json" && f.format != "csv" {
		return usagef("unknown format %q (want text, table, csv or json)", f.format)
	}
	if f.ngpus > 0 {
		return usagef("-g %d goes with a collective: a training step (--model) runs on every GPU of --topo", f.ngpus)
	}
	for _, name := range []string{"op", "bytes", "root", "redop", "dtype"} {
		if f.given(name) {
			return usagef("--%s goes with a collective: a training step (--model) runs the all-reduces of its gradients", name)
		}
	}
	algo := f.algo
	st, err := parseStep(f.model, f.topo, f.bucket, algo, f.sharded)
	if err != nil {
		return err
	}
	if err := st.useNCCL(f.ncclFlags); err != nil {
		return err
	}
	st.symmetry, st.stderr = f.symmetry, f.stderr
	st.traceMax = f.traceMax.bytes
	base, c0, err := st.simulate(nil, false)
	if c0 != nil {
		defer c0.Close()
	}
	if err != nil {
		return err
	}
	hit, c1, hitErr := st.simulate(faults, f.trace != "")
	if c1 != nil {
		defer c1.Close()
	}
	var ue usageError
	if errors.As(hitErr, &ue) {
		return hitErr
	}
	var log []string
	if c1 != nil {
		log = faultLog(c1)
		if f.trace != "" {
			if err := writeTraceFile(c1, f.trace); err != nil {
				return err
			}
		}
	}
	errText := ""
	if hitErr != nil {
		errText = hitErr.Error()
	}
	if err := f.writeSteps(w, st, base, hit, errText, log); err != nil {
		return err
	}
	return faultedRunError(errText)
}

// writeSteps prints a training step with and without faults.
func (f *whatIfFlags) writeSteps(w io.Writer, st *step, base, hit stepReport, errText string, log []string) error {
	// A failed step has no times: its fields are empty (CSV) or its step
	// null (JSON), as a failed collective's are, never zeros.
	if f.format == "csv" {
		faulted := []string{"with faults", "", "", "", errText}
		if errText == "" {
			faulted = []string{"with faults", f2(hit.StepUS), f2(hit.ComputeUS), f2(hit.ExposedCommUS), ""}
		}
		return writeCSVRows(w, [][]string{
			{"scenario", "step_us", "compute_us", "exposed_comm_us", "error"},
			{"baseline", f2(base.StepUS), f2(base.ComputeUS), f2(base.ExposedCommUS), ""},
			faulted,
		})
	}
	if f.format == "json" {
		enc := json.NewEncoder(w)
		if err := enc.Encode(map[string]any{"scenario": "baseline", "step": base}); err != nil {
			return err
		}
		var faulted *stepReport
		if errText == "" {
			faulted = &hit
		}
		return enc.Encode(map[string]any{"scenario": "with faults", "step": faulted, "error": errText, "log": log})
	}
	fmt.Fprintf(w, "# commsim what-if: one training step of %s on %s (%d ranks), %s\n", st.prof.Name, st.topoName, st.topo.NumGPUs(), syncWords(st.anySharded(), st.algo))
	fmt.Fprintf(w, "%-12s %14s %14s %14s\n", "scenario", "step(us)", "compute(us)", "exposed(us)")
	fmt.Fprintf(w, "%-12s %14.1f %14.1f %14.1f\n", "baseline", base.StepUS, base.ComputeUS, base.ExposedCommUS)
	if errText != "" {
		fmt.Fprintf(w, "%-12s failed: %s\n", "with faults", strings.ReplaceAll(errText, "\n", "\n             "))
	} else {
		fmt.Fprintf(w, "%-12s %14.1f %14.1f %14.1f\n", "with faults", hit.StepUS, hit.ComputeUS, hit.ExposedCommUS)
		fmt.Fprintf(w, "difference   %+14.1f us (%+.1f%%)\n", hit.StepUS-base.StepUS, 100*(hit.StepUS-base.StepUS)/base.StepUS)
	}
	fmt.Fprintln(w, "# what the faults did:")
	for _, line := range log {
		fmt.Fprintf(w, "#   %s\n", line)
	}
	return nil
}
