package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/model"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/paramsync"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

type trainFlags struct {
	model, topo, bucket, algo, format, trace string
	traceMax                                 traceMaxFlag
	sharded, symmetry                        bool
	stderr                                   io.Writer
	ncclFlags
}

func newTrainCmd() *cobra.Command {
	var f trainFlags
	cmd := &cobra.Command{
		Use:   "train",
		Short: "Simulate one data-parallel training step: compute, gradient buckets, overlap",
		Long: `train simulates one step of data-parallel training of a model profile on
every GPU of a topology: the forward pass, then the backward pass layer by
layer in reverse, each layer's gradient handed to param sync as soon as it is
computed. Buckets of gradients are all-reduced on a communication stream
while later layers compute. A sharded layer (--sharded: every layer; or
sharded: true in the profile) is FSDP/ZeRO-3's: its parameters are
all-gathered before its forward and again before its backward (the next
layer's while this one computes), its compute waits for them, and its
gradients are reduce-scattered. --algo defaults to auto, as in what-if
--model; --algo nccl plans each collective as NCCL's tuner would (slow to
simulate at scale: NCCL's pipelined protocols take many steps). It
reports the step time, compute, communication, the exposed part of the
communication, overlap, and a per-bucket timeline with each bucket's
plan. Timing-only: no data.`,
		Example: `  commsim train --model gpt2-small --topo dgx-h100
  commsim train --model llama-7b --topo dgx-h100x4 --bucket-bytes 100MiB --format json
  commsim train --model llama-70b --topo dgx-h100x8 --sharded --trace step.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.stderr = cmd.ErrOrStderr()
			return f.run(cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "gpt2-small", "model profile: gpt2-small|llama-7b|llama-70b or a YAML file")
	fl.StringVar(&f.topo, "topo", "dgx-h100", "topology spec, preset or YAML file")
	fl.StringVar(&f.bucket, "bucket-bytes", "25MiB", "gradient bucket size (PyTorch DDP's default is 25MiB)")
	fl.BoolVar(&f.sharded, "sharded", false, "shard every parameter (ZeRO-3/FSDP): reduce-scatter gradients")
	fl.StringVar(&f.algo, "algo", defaultStepAlgo, "collective algorithm: "+strings.Join(stepAlgos(), "|")+
		" (auto: the cheapest of commsim's own per bucket; nccl: what NCCL's tuner would run per bucket)")
	fl.StringVar(&f.format, "format", "table", "output: table|csv|json")
	fl.StringVar(&f.trace, "trace", "", "write a Perfetto trace of the step (compute and communication tracks) to FILE")
	addTraceMaxFlag(fl, &f.traceMax)
	fl.BoolVar(&f.symmetry, "symmetry", true, "time the step on the fabric's mirror by the ranks that stand for all, where it folds (same figures)")
	f.ncclFlags.register(fl)
	return cmd
}

// defaultStepAlgo is the algorithm of a training step's collectives when
// --algo is not given, in train and what-if --model alike, so their
// baselines agree: auto, bench's default, which prices every algorithm
// per bucket. Not nccl: NCCL's pipelined plans cost far more to simulate
// (gpt2-small on dgx-h100x16: 209 s under nccl, 0.33 s under auto).
const defaultStepAlgo = "auto"

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
	// Algo names its collectives' plans, as bench's algo column does
	// (distinct ones joined by +): what auto or NCCL's tuner chose.
	Algo string `json:"algo"`
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
	// Sharded parameters (FSDP/ZeRO-3) are all-gathered before each
	// layer's forward and backward: how many gathers rank 0 ran, and how
	// long they took (counted in CommUS too).
	Sharded  bool    `json:"sharded"`
	Gathers  int     `json:"gathers"`
	GatherUS float64 `json:"gather_us"`
	// standingRanks is how many ranks were simulated when the step was
	// timed on a mirror, 0 when every rank was.
	standingRanks int
}

// commItem is one collective on rank 0's communication stream: a bucket
// of gradients, or the all-gather of a sharded layer's parameters.
type commItem struct {
	gather     bool
	bucket     int      // !gather
	start, end hw.Event // gather
}

// step is a validated training-step experiment.
type step struct {
	prof     *model.Profile
	topo     *topology.Topology
	topoName string
	bucket   int64
	algo     string
	tuner    *nccl.Tuner // algo nccl: plans each collective
	sharded  bool
	symmetry bool      // time the step on the fabric's mirror where it can
	traceMax int64     // with a trace: sim.Config.TraceMaxBytes
	paced    bool      // enqueue the step a window at a time (see run)
	window   int       // when paced: units per rank per window; 0: trainWindowUnits/(ranks x world)
	enqueued func()    // tests: called when the whole step is enqueued
	stderr   io.Writer // where a long step is said so before it starts, if not nil
	// newBar makes the bar a paced step counts its layer passes on, rank
	// 0's, and then the communication that ends the step (nil: none; a
	// nil bar is none).
	newBar func(passes int) *progress
	// unmirrored: a mirror was tried and could not time the step, which
	// then runs in full.
	unmirrored bool
}

// trainWindowUnits bounds the units of a step (a layer's forward or
// backward, on one rank) enqueued ahead of the simulation when paced,
// times the ranks of the world: a unit's collective (a sharded layer's
// gather, a gradient's reduction) holds a share of its plan's operations
// on every rank, about a hundred bytes per rank of the world while
// queued. A 100,000-layer model on 64 ranks enqueued whole held every op
// of the step at once and passed 10 GB; paced a fixed 4,096 units per
// rank, a sharded step on 32 ranks still held 2 GB at 20,000 layers.
const trainWindowUnits = 1 << 16

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
	if !contains(stepAlgos(), algo) {
		return nil, usagef("unknown all-reduce algorithm %q (want one of %s)%s", algo, strings.Join(stepAlgos(), ", "), didYouMean(algo, stepAlgos()))
	}
	return &step{prof: prof, topo: topo, topoName: topoSpec, bucket: bucket, algo: algo, sharded: sharded}, nil
}

// stepAlgos are the algorithms a step's collectives may take.
func stepAlgos() []string {
	return append(ops.AlgorithmsFor(ops.AllReduce), "auto", algoNCCL)
}

// useNCCL readies the step for --algo nccl (when algo is nccl) with NCCL's
// environment f, which goes with nccl only.
func (st *step) useNCCL(f ncclFlags) error {
	if st.algo != algoNCCL {
		if f.set() {
			return f.aloneError("--algo nccl")
		}
		return nil
	}
	var err error
	st.tuner, st.topo, err = f.tuner(st.topo)
	return err
}

func (f *trainFlags) run(w io.Writer) error {
	var err error
	if f.format, err = reportFormat(f.format, "table", "csv", "json"); err != nil {
		return err
	}
	if err := f.traceMax.checkTrace(f.trace); err != nil {
		return err
	}
	st, err := parseStep(f.model, f.topo, f.bucket, f.algo, f.sharded)
	if err != nil {
		return err
	}
	if err := st.useNCCL(f.ncclFlags); err != nil {
		return err
	}
	st.symmetry, st.stderr = f.symmetry, f.stderr
	st.newBar = func(n int) *progress { return newProgressOf(f.stderr, n, "layer passes") }
	st.traceMax = f.traceMax.bytes
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
			"bucket", "params", "bytes", "sharded", "ready_us", "start_us", "end_us", "algo"}}
		for _, b := range rep.Buckets {
			rows = append(rows, []string{rep.Model, rep.Topology, strconv.Itoa(rep.Ranks), f2(rep.StepUS), f2(rep.ComputeUS), f2(rep.CommUS),
				f2(rep.ExposedCommUS), f2(rep.OverlapPct), strconv.Itoa(b.Index), strconv.Itoa(b.Params), strconv.FormatInt(b.Bytes, 10),
				strconv.FormatBool(b.Sharded), f2(b.ReadyUS), f2(b.StartUS), f2(b.EndUS), b.Algo})
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
	// Paced enqueueing adds events of its own, which a trace would show
	// and a fault's failure report would name: those runs are enqueued
	// whole.
	st.paced = len(faults) == 0 && !trace
	c, err := sim.NewCluster(st.topo, sim.Config{TimingOnly: true, Trace: trace, TraceMaxBytes: st.traceMax, Symmetry: mirror})
	if err != nil {
		return rep, nil, err
	}
	for _, ft := range faults {
		if err := c.Inject(ft); err != nil {
			return rep, c, usageError{err}
		}
	}
	driver := simexec.NewDriver(c)
	tried := false
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
		tried = true
	}
	st.unmirrored = tried
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
	cfg := paramsync.Config{BucketBytes: st.bucket, Algo: st.algo, Cost: st.topo, Driver: d, Callers: ranks}
	if st.tuner != nil {
		cfg.Planner = func(spec ops.Spec) (*ops.Plan, error) {
			plan, _, err := st.tuner.Plan(spec)
			if err != nil {
				// What NCCL cannot run here (--nccl-algo pat for an
				// all-reduce, say) is bad input, as in bench.
				return nil, usageError{err}
			}
			return plan, nil
		}
	}
	srv, err := paramsync.Start(c.World(), cfg)
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
		if most := math.MaxInt32 * int64(max(1, p)); n > most {
			return rep, usagef("layer %q has %d parameters, over the %d a layer may have on %d ranks (2^31−1 times the ranks)", l.Name, n, most, p)
		}
		params[i] = paramsync.Param{ID: l.Name, Len: int(n), DType: l.DType, Sharded: sharded}
	}
	devs := c.Devices()[:ranks]
	t0 := c.Now()
	start := make([]hw.Event, ranks)
	computeDone := make([]hw.Event, ranks)
	ready0 := make([]hw.Event, len(params)) // rank 0's, per layer, for the timeline
	computeStreams := make([]hw.Stream, ranks)
	// The step is a forward unit per layer, then a backward unit per
	// layer in reverse. Paced, each rank's units are enqueued a window at
	// a time, and between windows the simulation runs until the first
	// rank finishes the window before last, so queued work stays bounded
	// whatever the layers. Everything a window holds waits, through its
	// rank's compute stream, for the rank's previous window to end, which
	// no rank has reached yet: nothing starts or ends at another time than
	// had the step been enqueued whole (ranks need not stand at the same
	// point: compute waits for a sharded layer's gather).
	layers := len(prof.Layers)
	units, window := 2*layers, 2*layers
	// Rank 0's communication in the order it was enqueued, for the
	// timeline: buckets and parameter gathers share its streams.
	var timeline0 []commItem
	var waits0 [][2]hw.Event // rank 0's compute waiting from, for a gather ending at
	launched0 := 0
	if st.paced {
		window = cmp.Or(st.window, max(16, trainWindowUnits/(ranks*p)))
	}
	var lastMarks []*sim.Event // every rank's compute at the end of the window before
	// A bar counts rank 0's units as the simulation passes them, and then
	// the communication that ends the step. It needs marks of its own on
	// rank 0's compute stream, which a trace would show: only paced steps
	// have one.
	var bar *progress
	var passes []*sim.Event // rank 0's compute at the end of each unit
	if st.paced && st.newBar != nil {
		bar = st.newBar(units + 1)
		defer bar.stop()
	}
	// countPasses steps the bar over the passes done, and with wait runs
	// the simulation through the rest. A step that cannot pass one stops
	// the count, and fails where it would have without a bar, in the
	// words of what waits for it (param sync, the compute stream).
	countPasses := func(wait bool) {
		for ; bar != nil && len(passes) > 0; passes = passes[1:] {
			if _, err := passes[0].Time(); err != nil && (!wait || c.RunUntilAny(passes[0]) != nil) {
				return
			}
			bar.step()
		}
	}
	layerOf := func(u int) int {
		if u < layers {
			return u
		}
		return units - 1 - u
	}
	// FSDP gathers a sharded layer's parameters before its forward and
	// again before its backward, the next layer's while this one computes
	// (its prefetch), ahead of this layer's gradient on the communication
	// stream; a layer's compute waits for its parameters.
	gathered := make([]hw.Event, ranks) // per rank: the end of the gather the next unit waits for
	gather := func(r, u int, after hw.Event) error {
		i := layerOf(u)
		if !params[i].Sharded {
			return nil
		}
		buf, err := devs[r].Alloc(params[i].DType, params[i].Len)
		if err != nil {
			return err
		}
		start, end, err := srv.GatherParamsAfter(r, params[i].ID, buf, after)
		if err != nil {
			return err
		}
		gathered[r] = end
		if r == 0 {
			timeline0 = append(timeline0, commItem{gather: true, start: start, end: end})
		}
		return nil
	}
	enqueueUnit := func(r, u int) error {
		d, stream := devs[r], computeStreams[r]
		compute := stream.(*sim.Stream)
		if u == 0 {
			if err := gather(r, 0, start[r]); err != nil {
				return err
			}
		}
		if gathered[r] != nil {
			if r == 0 {
				waitFrom, err := d.NewEvent()
				if err != nil {
					return err
				}
				if err := stream.Record(waitFrom); err != nil {
					return err
				}
				waits0 = append(waits0, [2]hw.Event{waitFrom, gathered[r]})
			}
			if err := stream.Wait(gathered[r]); err != nil {
				return err
			}
			gathered[r] = nil
		}
		if u+1 < units && params[layerOf(u+1)].Sharded {
			begins, err := d.NewEvent()
			if err != nil {
				return err
			}
			if err := stream.Record(begins); err != nil {
				return err
			}
			if err := gather(r, u+1, begins); err != nil {
				return err
			}
		}
		i := layerOf(u)
		l := prof.Layers[i]
		if u < layers {
			return compute.Compute(l.Forward, l.Name+" forward")
		}
		if err := compute.Compute(l.Backward, l.Name+" backward"); err != nil {
			return err
		}
		ev, err := d.NewEvent()
		if err != nil {
			return err
		}
		if err := stream.Record(ev); err != nil {
			return err
		}
		if r == 0 {
			ready0[i] = ev
		}
		grad, err := d.Alloc(params[i].DType, params[i].Len)
		if err != nil {
			return err
		}
		if err := srv.SubmitGradient(r, params[i].ID, grad, ev); err != nil {
			return err
		}
		for r == 0 && srv.BucketDone(0, launched0) != nil {
			timeline0 = append(timeline0, commItem{bucket: launched0})
			launched0++
		}
		return nil
	}
	for lo := 0; lo < units; lo += window {
		hi := min(units, lo+window)
		for r, d := range devs {
			if lo == 0 {
				if err := srv.Register(r, params); err != nil {
					return rep, usageError{err}
				}
				if r == 0 {
					if err := st.checkDuration(srv, params, ranks, p); err != nil {
						return rep, err
					}
				}
				stream, err := d.NewStream()
				if err != nil {
					return rep, err
				}
				if _, ok := stream.(*sim.Stream); !ok {
					return rep, fmt.Errorf("train: %s made a stream that is not simulated", d.Name())
				}
				computeStreams[r] = stream
				if start[r], err = d.NewEvent(); err != nil {
					return rep, err
				}
				stream.Record(start[r])
			}
			for u := lo; u < hi; u++ {
				if err := enqueueUnit(r, u); err != nil {
					return rep, err
				}
				if r == 0 && bar != nil {
					mark, err := d.NewEvent()
					if err != nil {
						return rep, err
					}
					if err := computeStreams[0].Record(mark); err != nil {
						return rep, err
					}
					passes = append(passes, mark.(*sim.Event))
				}
			}
			if hi == units {
				computeDone[r], _ = d.NewEvent()
				computeStreams[r].Record(computeDone[r])
			}
		}
		if !st.paced || hi == units {
			continue
		}
		marks := make([]*sim.Event, ranks)
		for r, d := range devs {
			mark, err := d.NewEvent()
			if err != nil {
				return rep, err
			}
			if err := computeStreams[r].Record(mark); err != nil {
				return rep, err
			}
			marks[r] = mark.(*sim.Event)
		}
		prev := lastMarks
		if lastMarks = marks; prev == nil {
			continue
		}
		if err := c.RunUntilAny(prev...); err != nil {
			return rep, err
		}
		countPasses(false)
	}
	if st.enqueued != nil {
		st.enqueued()
	}
	countPasses(true)
	// Every rank's step is enqueued: now let simulated time run.
	for r := range devs {
		if err := srv.Sync(r); err != nil {
			return rep, err
		}
		if err := computeStreams[r].Synchronize(); err != nil {
			return rep, err
		}
	}
	bar.done() // and the communication that ends the step
	rep = stepReport{Model: prof.Name, Topology: f.topoName, Ranks: p, Algo: f.algo, BucketBytes: f.bucket, Params: prof.TotalParams(), Sharded: f.anySharded()}
	since := func(ev hw.Event) float64 {
		s, err := ev.ElapsedSince(start[0])
		if err != nil {
			return math.NaN()
		}
		return s * 1e6
	}
	// Compute is rank 0's busy time: its stream's span less the waits for
	// parameters, which are exposed communication.
	rep.ComputeUS = since(computeDone[0])
	for _, w := range waits0 {
		rep.ComputeUS -= max(0, since(w[1])-since(w[0]))
	}
	rep.StepUS = (c.Now() - t0).Micros() // everything, every rank, has finished
	// Rank 0's communication stream runs one item at a time, in the order
	// enqueued: a bucket starts when its gradients are ready and what was
	// before it has ended.
	buckets := srv.Buckets()
	rep.Buckets = make([]bucketTimes, len(buckets))
	prevEnd := 0.0
	for _, it := range timeline0 {
		if it.gather {
			rep.Gathers++
			startUS, endUS := since(it.start), since(it.end)
			rep.GatherUS += endUS - startUS
			rep.CommUS += endUS - startUS
			prevEnd = endUS
			continue
		}
		b, bk := it.bucket, buckets[it.bucket]
		bt := bucketTimes{Index: b, Params: len(bk.Params), Bytes: bk.Bytes, Sharded: bk.Sharded}
		var labels []string
		for _, i := range bk.Params {
			bt.ReadyUS = math.Max(bt.ReadyUS, since(ready0[i]))
			plan, err := srv.Plan(params[i].ID)
			if err != nil {
				return rep, err
			}
			if l := nccl.Label(plan); !slices.Contains(labels, l) {
				labels = append(labels, l)
			}
		}
		bt.Algo = strings.Join(labels, "+")
		bt.StartUS = math.Max(bt.ReadyUS, prevEnd)
		if done := srv.BucketDone(0, b); done != nil {
			bt.EndUS = since(done)
		}
		prevEnd = bt.EndUS
		rep.CommUS += bt.EndUS - bt.StartUS
		rep.Buckets[b] = bt
	}
	rep.ExposedCommUS = rep.StepUS - rep.ComputeUS
	if rep.CommUS > 0 {
		// No overlap leaves exposed and communication times equal but
		// for rounding, which must not print as -0.0%.
		rep.OverlapPct = max(0, 100*(rep.CommUS-rep.ExposedCommUS)/rep.CommUS)
	}
	return rep, nil
}

// checkDuration refuses a step whose simulation on ranks of all would
// take over an hour, and says one of over two minutes on st.stderr,
// before it starts (stepEstimate, from the plans srv makes for params).
func (st *step) checkDuration(srv *paramsync.Server, params []paramsync.Param, ranks, all int) error {
	est, err := stepEstimate(st.topo, params, srv.Plan, ranks, all)
	if err != nil {
		return usageError{err}
	}
	if st.tuner != nil {
		est.instead = "--algo auto"
	}
	what := "training step"
	if st.unmirrored {
		what += " (in full: its mirror could not time it)"
	}
	return est.judge(st.stderr, what)
}

// anySharded reports whether the step has sharded parameters to gather.
func (st *step) anySharded() bool {
	if st.sharded {
		return true
	}
	for _, l := range st.prof.Layers {
		if l.Sharded {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// syncWords says how a step synchronises its parameters, for headers.
func syncWords(sharded bool, algo string) string {
	if !sharded {
		return algo + " all-reduce of gradients"
	}
	gather, scatter := paramsync.AlgoFor(ops.AllGather, algo), paramsync.AlgoFor(ops.ReduceScatter, algo)
	if algo == algoNCCL {
		gather, scatter = algo, algo
	}
	return fmt.Sprintf("sharded (FSDP/ZeRO-3): parameters all-gathered (%s) before each layer's forward and backward, gradients reduce-scattered (%s)",
		gather, scatter)
}

// humanCount writes a count of parameters as people do: 124.4M, 7.0B.
func humanCount(n int64) string {
	for _, u := range []struct {
		s string
		v float64
	}{{"T", 1e12}, {"B", 1e9}, {"M", 1e6}, {"K", 1e3}} {
		if float64(n) >= u.v {
			return strconv.FormatFloat(float64(n)/u.v, 'f', 1, 64) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// sizeOneDecimal writes a size in the largest binary unit it reaches, with
// one decimal: 27.0 MiB, 1.6 GiB.
func sizeOneDecimal(n int64) string {
	for _, u := range []struct {
		s string
		v float64
	}{{"EiB", 1 << 60}, {"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if float64(n) >= u.v {
			return strconv.FormatFloat(float64(n)/u.v, 'f', 1, 64) + " " + u.s
		}
	}
	return strconv.FormatInt(n, 10) + " B"
}

func writeTrainTable(w io.Writer, r stepReport) error {
	fmt.Fprintf(w, "# commsim train: %s (%s parameters) on %s (%d ranks), %s; %s buckets\n",
		r.Model, humanCount(r.Params), r.Topology, r.Ranks, syncWords(r.Sharded, r.Algo), sizeOneDecimal(r.BucketBytes))
	fmt.Fprintf(w, "step           %12.1f us\ncompute        %12.1f us\ncommunication  %12.1f us\nexposed comm   %12.1f us\noverlap        %12.1f %%\nbuckets        %12d\n",
		r.StepUS, r.ComputeUS, r.CommUS, r.ExposedCommUS, r.OverlapPct, len(r.Buckets))
	if r.Gathers > 0 {
		fmt.Fprintf(w, "gathers        %12d (%.1f us, in communication)\n", r.Gathers, r.GatherUS)
	}
	fmt.Fprintln(w)
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off), tablewriter.WithRowAlignment(tw.AlignRight))
	t.Header([]string{"bucket", "params", "bytes", "ready(us)", "start(us)", "end(us)", "comm(us)", "algo"})
	for _, b := range r.Buckets {
		kind := ""
		if b.Sharded {
			kind = " (sharded)"
		}
		if err := t.Append([]string{fmt.Sprint(b.Index), fmt.Sprint(b.Params) + kind, sizeOneDecimal(b.Bytes),
			f2(b.ReadyUS), f2(b.StartUS), f2(b.EndUS), f2(b.EndUS - b.StartUS), b.Algo}); err != nil {
			return err
		}
	}
	return t.Render()
}
