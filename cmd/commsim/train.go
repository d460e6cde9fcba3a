package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/model"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/paramsync"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

type trainFlags struct {
	model, topo, bucket, algo, format, trace string
	sharded, symmetry                        bool
}

func newTrainCmd() *cobra.Command {
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Simulate one data-parallel training step: compute, gradient buckets, overlap",
		Long: `train simulates one step of data-parallel training of a model profile on
every GPU of a topology: the forward pass, then the backward pass layer by
layer in reverse, each layer's gradient handed to param sync as soon as it is
computed. Buckets of gradients are all-reduced (sharded parameters:
reduce-scattered) on a communication stream while later layers compute.
It reports the step time, compute, communication, the exposed part of the
communication, overlap, and a per-bucket timeline. Timing-only: no data.`,
		Example: `  commsim train --model gpt2-small --topo dgx-h100
  commsim train --model llama-7b --topo dgx-h100x4 --bucket-bytes 100MiB --format json
  commsim train --model llama-70b --topo dgx-h100x8 --sharded --trace step.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd.OutOrStdout()) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "gpt2-small", "model profile: gpt2-small|llama-7b|llama-70b or a YAML file")
	fl.StringVar(&f.topo, "topo", "dgx-h100", "topology spec, preset or YAML file")
	fl.StringVar(&f.bucket, "bucket-bytes", "25MiB", "gradient bucket size (PyTorch DDP's default is 25MiB)")
	fl.BoolVar(&f.sharded, "sharded", false, "shard every parameter (ZeRO-3/FSDP): reduce-scatter gradients")
	fl.StringVar(&f.algo, "algo", "ring", "collective algorithm: "+fmt.Sprint(append(ops.Algorithms(), "auto")))
	fl.StringVar(&f.format, "format", "table", "output: table|csv|json")
	fl.StringVar(&f.trace, "trace", "", "write a Perfetto trace of the step (compute and communication tracks) to FILE")
	fl.BoolVar(&f.symmetry, "symmetry", true, "time the step on the fabric's mirror by the ranks that stand for all, where it folds (same figures)")
	return cmd
}

// bucketTimes is one bucket's timeline on rank 0, in microseconds from the
// start of the step.
type bucketTimes struct {
	Index   int     `json:"index"`
	Params  int     `json:"params"`
	Bytes   int64   `json:"bytes"`
	Sharded bool    `json:"sharded"`
	ReadyUS float64 `json:"ready_us"`
	StartUS float64 `json:"start_us"`
	EndUS   float64 `json:"end_us"`
}

// stepReport is commsim train's result.
type stepReport struct {
	Model         string        `json:"model"`
	Topology      string        `json:"topology"`
	Ranks         int           `json:"ranks"`
	Algo          string        `json:"algo"`
	BucketBytes   int64         `json:"bucket_bytes"`
	Params        int64         `json:"params"`
	StepUS        float64       `json:"step_us"`
	ComputeUS     float64       `json:"compute_us"`
	CommUS        float64       `json:"comm_us"`
	ExposedCommUS float64       `json:"exposed_comm_us"`
	OverlapPct    float64       `json:"overlap_pct"`
	Buckets       []bucketTimes `json:"buckets"`
	// standingRanks is how many ranks were simulated when the step was
	// timed on a mirror, 0 when every rank was.
	standingRanks int
}

// step is a validated training-step experiment.
type step struct {
	prof     *model.Profile
	topo     *topology.Topology
	topoName string
	bucket   int64
	algo     string
	sharded  bool
	symmetry bool // time the step on the fabric's mirror where it can
}

// parseStep validates the flags that describe a step; failures are usage
// errors.
func parseStep(modelName, topoSpec, bucketSize, algo string, sharded bool) (*step, error) {
	prof, err := model.Resolve(modelName)
	if err != nil {
		return nil, usageError{err}
	}
	topo, err := topology.Resolve(topoSpec)
	if err != nil {
		return nil, usageError{err}
	}
	bucket, err := parseBytes(bucketSize)
	if err != nil || bucket <= 0 {
		return nil, usagef("--bucket-bytes %q: want a positive size", bucketSize)
	}
	if algo != "auto" && !contains(ops.AlgorithmsFor(ops.AllReduce), algo) {
		return nil, usagef("unknown all-reduce algorithm %q", algo)
	}
	return &step{prof: prof, topo: topo, topoName: topoSpec, bucket: bucket, algo: algo, sharded: sharded}, nil
}

func (f *trainFlags) run(w io.Writer) error {
	if f.format != "table" && f.format != "json" && f.format != "csv" {
		return usagef("unknown format %q (want table, csv or json)", f.format)
	}
	st, err := parseStep(f.model, f.topo, f.bucket, f.algo, f.sharded)
	if err != nil {
		return err
	}
	st.symmetry = f.symmetry
	rep, c, err := st.simulate(nil, f.trace != "")
	if err != nil {
		return err
	}
	defer c.Close()
	if f.trace != "" {
		if err := writeTraceFile(c, f.trace); err != nil {
			return err
		}
	}
	switch f.format {
	case "json":
		return json.NewEncoder(w).Encode(rep)
	case "csv":
		// One row per bucket; the step's totals repeat on every row so the
		// file stands alone.
		rows := [][]string{{"model", "topology", "ranks", "step_us", "compute_us", "comm_us", "exposed_comm_us", "overlap_pct",
			"bucket", "params", "bytes", "sharded", "ready_us", "start_us", "end_us"}}
		for _, b := range rep.Buckets {
			rows = append(rows, []string{rep.Model, rep.Topology, strconv.Itoa(rep.Ranks), f2(rep.StepUS), f2(rep.ComputeUS), f2(rep.CommUS),
				f2(rep.ExposedCommUS), f2(rep.OverlapPct), strconv.Itoa(b.Index), strconv.Itoa(b.Params), strconv.FormatInt(b.Bytes, 10),
				strconv.FormatBool(b.Sharded), f2(b.ReadyUS), f2(b.StartUS), f2(b.EndUS)})
		}
		return writeCSVRows(w, rows)
	}
	return writeTrainTable(w, rep)
}

// simulate runs one step on a fresh cluster with the given faults (their
// times count from the start of the step). With symmetry, no fault and
// no trace, every rank runs the same step, so it is timed on the
// cluster's mirror by the ranks that stand for all (simexec.Driver.Mirror)
// when the fabric folds and every collective keeps the promise; the
// figures are the full simulation's, to the picosecond (tested). Any
// failure there sends the step to the full simulation.
func (st *step) simulate(faults []sim.Fault, trace bool) (stepReport, *sim.Cluster, error) {
	var rep stepReport
	mirror := st.symmetry && len(faults) == 0 && !trace
	c, err := sim.NewCluster(st.topo, sim.Config{TimingOnly: true, Trace: trace, Symmetry: mirror})
	if err != nil {
		return rep, nil, err
	}
	for _, ft := range faults {
		if err := c.Inject(ft); err != nil {
			return rep, c, usageError{err}
		}
	}
	driver := simexec.NewDriver(c)
	for _, g := range []ops.Symmetry{ops.Rotation, ops.Xor} {
		if !mirror {
			break
		}
		md, block, ok, err := driver.Mirror(g)
		if err != nil {
			return rep, c, err
		}
		if !ok {
			continue
		}
		// A step that cannot be timed on the mirror (a plan that breaks
		// the symmetry, a route the mirror cannot fold) is timed in full,
		// which also reports a real failure as it really happens.
		if rep, err := st.run(md, block); err == nil {
			rep.standingRanks = block
			return rep, c, nil
		}
	}
	rep, err = st.run(driver, c.World().Size())
	return rep, c, err
}

// run simulates ranks 0..ranks-1 of the step on the driver's cluster and
// reports rank 0's timeline.
func (st *step) run(d *simexec.Driver, ranks int) (stepReport, error) {
	prof, f := st.prof, st
	c := d.Cluster()
	p := c.World().Size()
	var rep stepReport
	srv, err := paramsync.Start(c.World(), paramsync.Config{BucketBytes: st.bucket, Algo: st.algo, Cost: st.topo, Driver: d, Callers: ranks})
	if err != nil {
		return rep, usageError{err}
	}
	defer srv.Close()
	// Sharded parameters are padded to a multiple of the ranks, as FSDP pads
	// its flat parameters.
	params := make([]paramsync.Param, len(prof.Layers))
	for i, l := range prof.Layers {
		n := l.Params
		sharded := l.Sharded || f.sharded
		if sharded {
			n = (n + int64(p) - 1) / int64(p) * int64(p)
		}
		if n > math.MaxInt32*int64(max(1, p)) {
			return rep, usagef("layer %q has %d parameters, too many for one tensor here", l.Name, n)
		}
		params[i] = paramsync.Param{ID: l.Name, Len: int(n), DType: l.DType, Sharded: sharded}
	}
	devs := c.Devices()[:ranks]
	t0 := c.Now()
	start := make([]hw.Event, ranks)
	computeDone := make([]hw.Event, ranks)
	ready := make([][]hw.Event, ranks) // per rank, per layer
	var computeStreams []hw.Stream
	for r, d := range devs {
		if err := srv.Register(r, params); err != nil {
			return rep, usageError{err}
		}
		stream, err := d.NewStream()
		if err != nil {
			return rep, err
		}
		compute, ok := stream.(*sim.Stream)
		if !ok {
			return rep, fmt.Errorf("train: %s made a stream that is not simulated", d.Name())
		}
		if start[r], err = d.NewEvent(); err != nil {
			return rep, err
		}
		stream.Record(start[r])
		for _, l := range prof.Layers {
			if err := compute.Compute(l.Forward, l.Name+" forward"); err != nil {
				return rep, err
			}
		}
		ready[r] = make([]hw.Event, len(params))
		for i := len(prof.Layers) - 1; i >= 0; i-- {
			l := prof.Layers[i]
			if err := compute.Compute(l.Backward, l.Name+" backward"); err != nil {
				return rep, err
			}
			ev, _ := d.NewEvent()
			stream.Record(ev)
			ready[r][i] = ev
			grad, err := d.Alloc(params[i].DType, params[i].Len)
			if err != nil {
				return rep, err
			}
			if err := srv.SubmitGradient(r, params[i].ID, grad, ev); err != nil {
				return rep, err
			}
		}
		computeDone[r], _ = d.NewEvent()
		stream.Record(computeDone[r])
		computeStreams = append(computeStreams, stream)
	}
	// Every rank's step is enqueued: now let simulated time run.
	for r := range devs {
		if err := srv.Sync(r); err != nil {
			return rep, err
		}
		if err := computeStreams[r].Synchronize(); err != nil {
			return rep, err
		}
	}
	rep = stepReport{Model: prof.Name, Topology: f.topoName, Ranks: p, Algo: f.algo, BucketBytes: f.bucket, Params: prof.TotalParams()}
	since := func(ev hw.Event) float64 {
		s, err := ev.ElapsedSince(start[0])
		if err != nil {
			return math.NaN()
		}
		return s * 1e6
	}
	rep.ComputeUS = since(computeDone[0])
	rep.StepUS = (c.Now() - t0).Micros() // everything, every rank, has finished
	prevEnd := 0.0
	for b, bk := range srv.Buckets() {
		bt := bucketTimes{Index: b, Params: len(bk.Params), Bytes: bk.Bytes, Sharded: bk.Sharded}
		for _, i := range bk.Params {
			bt.ReadyUS = math.Max(bt.ReadyUS, since(ready[0][i]))
		}
		bt.StartUS = math.Max(bt.ReadyUS, prevEnd)
		if done := srv.BucketDone(0, b); done != nil {
			bt.EndUS = since(done)
		}
		prevEnd = bt.EndUS
		rep.CommUS += bt.EndUS - bt.StartUS
		rep.Buckets = append(rep.Buckets, bt)
	}
	rep.ExposedCommUS = rep.StepUS - rep.ComputeUS
	if rep.CommUS > 0 {
		rep.OverlapPct = 100 * (rep.CommUS - rep.ExposedCommUS) / rep.CommUS
	}
	return rep, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func writeTrainTable(w io.Writer, r stepReport) error {
	fmt.Fprintf(w, "# commsim train: %s (%.3gB parameters) on %s (%d ranks), %s all-reduce, %s buckets\n",
		r.Model, float64(r.Params)/1e9, r.Topology, r.Ranks, r.Algo, formatBytes(r.BucketBytes))
	fmt.Fprintf(w, "step           %12.1f us\ncompute        %12.1f us\ncommunication  %12.1f us\nexposed comm   %12.1f us\noverlap        %12.1f %%\nbuckets        %12d\n\n",
		r.StepUS, r.ComputeUS, r.CommUS, r.ExposedCommUS, r.OverlapPct, len(r.Buckets))
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAlignment(tw.AlignRight))
	t.Header([]string{"bucket", "params", "bytes", "ready(us)", "start(us)", "end(us)", "comm(us)"})
	for _, b := range r.Buckets {
		kind := ""
		if b.Sharded {
			kind = " (sharded)"
		}
		if err := t.Append([]string{fmt.Sprint(b.Index), fmt.Sprint(b.Params) + kind, formatBytes(b.Bytes),
			f2(b.ReadyUS), f2(b.StartUS), f2(b.EndUS), f2(b.EndUS - b.StartUS)}); err != nil {
			return err
		}
	}
	return t.Render()
}
