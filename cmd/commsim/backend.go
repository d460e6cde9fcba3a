package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda"
	"github.com/commsim/commsim/hw/metal"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// backendFlags choose the devices a sweep runs on. The simulator takes its
// ranks from the topology; the real backends take --ranks and, for CUDA,
// a placement of the ranks on the GPUs.
type backendFlags struct {
	backend   string
	ranks     int
	placement string
	multi     *multiProc // bench in a multi-process run (multiproc.go)
	// ranksSet says --ranks was given: 0 given is out of range, where 0
	// left out is the backend's default.
	ranksSet func() bool
}

func (f *backendFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	f.ranksSet = func() bool { return fl.Changed("ranks") }
	fl.StringVar(&f.backend, "backend", "sim", "device backend: sim|cuda|metal")
	fl.IntVar(&f.ranks, "ranks", 0, "ranks on a real backend (default: one per CUDA GPU; 2 virtual ranks on Metal)")
	fl.StringVar(&f.placement, "placement", "", "cuda: gpu (a GPU per rank), virtual (all on GPU 0) or spread (round robin); default gpu when there are enough GPUs, else spread")
}

// ranksGiven reports whether --ranks was given.
func (f *backendFlags) ranksGiven() bool { return f.ranksSet != nil && f.ranksSet() }

// backendPlan is where a sweep's ranks live once the flags are checked.
type backendPlan struct {
	name  string
	ranks int
	gpus  []int      // cuda: GPU of each rank (of this process's one rank in a multi-process run)
	multi *multiProc // set in a multi-process run
}

// resolve checks the backend flags against the topology flag. A real
// backend's ranks need its devices, so an absent driver is a runtime
// error, not a usage error. topoSet says whether --topo was given: a real
// backend uses it only as the cost model of --algo auto, defaulting to
// switch:ranks.
func (f *backendFlags) resolve(topoSet bool, topoSpec string) (*backendPlan, *topology.Topology, error) {
	switch f.backend {
	case "sim":
		if f.ranks != 0 || f.ranksGiven() || f.placement != "" {
			return nil, nil, usagef("--ranks and --placement are for real backends; the simulator takes its ranks from --topo")
		}
		topo, err := topology.Resolve(topoSpec)
		if err != nil {
			return nil, nil, usageError{err}
		}
		return &backendPlan{name: "sim", ranks: topo.NumGPUs()}, topo, nil
	case "cuda", "metal":
	default:
		return nil, nil, usagef("unknown backend %q (want sim, cuda or metal)", f.backend)
	}
	if f.multi != nil {
		return f.resolveMulti(topoSet, topoSpec)
	}
	if f.ranks < 0 || f.ranks > 4096 || f.ranks == 0 && f.ranksGiven() {
		return nil, nil, usagef("--ranks %d out of range 1..4096", f.ranks)
	}
	if f.placement != "" && f.backend != "cuda" {
		return nil, nil, usagef("--placement is for the cuda backend")
	}
	var placement cuda.Placement
	if f.placement != "" {
		var err error
		if placement, err = cuda.ParsePlacement(f.placement); err != nil {
			return nil, nil, usageError{err}
		}
	}
	bp := &backendPlan{name: f.backend, ranks: f.ranks}
	if f.backend == "metal" {
		if err := metal.Available(); err != nil {
			return nil, nil, err
		}
		if bp.ranks == 0 {
			bp.ranks = 2
		}
	} else {
		devs, err := cuda.Devices()
		if err != nil {
			return nil, nil, err
		}
		if len(devs) == 0 {
			return nil, nil, fmt.Errorf("cuda: the driver finds no GPU (commsim devices lists what each backend sees)")
		}
		if bp.ranks == 0 {
			bp.ranks = len(devs)
		}
		if f.placement == "" {
			placement = cuda.OnePerGPU
			if bp.ranks > len(devs) {
				placement = cuda.VirtualSpread
			}
		}
		if bp.gpus, err = cuda.Layout(bp.ranks, placement, len(devs)); err != nil {
			return nil, nil, usageError{err}
		}
	}
	topo, err := f.costModel(bp, topoSet, topoSpec)
	if err != nil {
		return nil, nil, err
	}
	return bp, topo, nil
}

// costModel is a real backend's topology: --topo, which must have bp's
// ranks, or switch:ranks. It is only auto's cost model.
func (f *backendFlags) costModel(bp *backendPlan, topoSet bool, topoSpec string) (*topology.Topology, error) {
	spec := topoSpec
	if !topoSet {
		spec = fmt.Sprintf("switch:%d", bp.ranks)
	}
	topo, err := topology.Resolve(spec)
	if err != nil {
		return nil, usageError{err}
	}
	if topo.NumGPUs() != bp.ranks {
		return nil, usagef("--topo %s has %d GPUs but the %s backend runs %d ranks; with a real backend --topo is only auto's cost model", spec, topo.NumGPUs(), f.backend, bp.ranks)
	}
	return topo, nil
}

// openedWorld is a sweep's world: a simulated cluster, or real devices.
type openedWorld struct {
	*hw.World
	cluster *sim.Cluster    // nil on real backends
	driver  *simexec.Driver // the cluster's, made by newExecutor
	close   func() error
}

// newExecutor returns an executor over the world: on the simulator, with
// its driver, which feeds plans as the streams drain and mirrors
// symmetric ones.
func (w *openedWorld) newExecutor() *ops.Executor {
	if w.cluster == nil {
		return ops.NewExecutor(w.World)
	}
	w.driver = simexec.NewDriver(w.cluster)
	return ops.NewExecutorWith(w.World, w.driver)
}

// mirroredRuns counts the runs the simulator timed on its mirror.
func (w *openedWorld) mirroredRuns() int {
	if w.driver == nil {
		return 0
	}
	return w.driver.MirroredRuns()
}

// refinedRuns counts the runs the simulator made at finer pieces than
// every channel can be made at (simexec's RefinedRuns).
func (w *openedWorld) refinedRuns() int {
	if w.driver == nil {
		return 0
	}
	return w.driver.RefinedRuns()
}

// mirrorBlock is how many ranks the simulator would run for plan, standing
// for all on its mirror, or 0 when it would run every rank.
func (w *openedWorld) mirrorBlock(plan *ops.Plan) int {
	if w.driver == nil {
		return 0
	}
	return w.driver.MirrorBlock(w.World, plan)
}

func (b *backendPlan) open(topo *topology.Topology, cfg sim.Config) (*openedWorld, error) {
	switch b.name {
	case "cuda":
		w, closeFn, err := cuda.NewWorldOn(b.gpus)
		if err != nil {
			return nil, err
		}
		return &openedWorld{World: w, close: closeFn}, nil
	case "metal":
		w, closeFn, err := metal.NewWorld(b.ranks)
		if err != nil {
			return nil, err
		}
		return &openedWorld{World: w, close: closeFn}, nil
	}
	c, err := sim.NewCluster(topo, cfg)
	if err != nil {
		return nil, err
	}
	return &openedWorld{World: c.World(), cluster: c, close: c.Close}, nil
}

// describe says what the times are, for report headers.
func (b *backendPlan) describe(timingOnly bool) (backend, times string) {
	switch {
	case b.multi != nil:
		return fmt.Sprintf("cuda (multi-process, %d ranks, one GPU per process)", b.ranks),
			"times are measured with CUDA events on every rank: each is the slowest rank's, and #wrong adds up every rank's"
	case b.name == "cuda":
		return fmt.Sprintf("cuda (GPUs %s)", joinInts(b.gpus)), "times are measured with CUDA events"
	case b.name == "metal":
		return fmt.Sprintf("metal (%d virtual ranks on one GPU)", b.ranks), "times are measured with Metal GPU timestamps"
	}
	mode := "data"
	if timingOnly {
		mode = "timing-only"
	}
	return "sim (" + mode + ")", "times are simulated"
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
