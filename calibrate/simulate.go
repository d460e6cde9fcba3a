package calibrate

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// SizeError is a size that cannot be simulated: its plan cannot be made
// (Planning: for FitNCCL, a collective NCCL's tuner does not tune, a spec
// that does not fit the fabric), or the simulator fails on it. Index is
// into the sizes of the call that failed.
type SizeError struct {
	Index    int
	Planning bool
	Err      error
}

func (e *SizeError) Error() string { return fmt.Sprintf("calibrate: size %d: %v", e.Index, e.Err) }
func (e *SizeError) Unwrap() error { return e.Err }

// Simulate times the plans of sizes 0..n-1 in seconds, each out of place on an idle
// cluster of topo made with cfg, sharing them among one cluster per core;
// plan(i) makes the i-th (it runs on any worker, and may record what it
// needs of the plan at index i). Each run starts on an idle cluster at
// time zero (sim.Cluster.Rewind), so the times do not depend on which
// worker ran which plan, nor on what it ran before. On failure it
// returns a *SizeError: the smallest failing size's, whichever worker
// met it, so the report is the same on every run.
func Simulate(topo *topology.Topology, cfg sim.Config, n int, plan func(i int) (*ops.Plan, error)) ([]float64, error) {
	secs := make([]float64, n)
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			c, err := sim.NewCluster(topo, cfg)
			if err != nil {
				errs[w] = err
				return
			}
			defer c.Close()
			exec := simexec.NewExecutor(c)
			var runner verify.Runner
			defer runner.Free()
			for i := w; i < n; i += workers {
				pl, err := plan(i)
				if err != nil {
					errs[w] = &SizeError{i, true, err}
					return
				}
				// Each size gets the whole horizon, whatever ran before it.
				if err := c.Rewind(); err != nil {
					errs[w] = &SizeError{i, false, err}
					return
				}
				res, err := runner.Run(exec, c.World(), pl, nil, false)
				if err != nil {
					errs[w] = &SizeError{i, false, err}
					return
				}
				secs[i] = res.Seconds
			}
		})
	}
	wg.Wait()
	var first *SizeError
	for _, err := range errs {
		var pe *SizeError
		switch {
		case err == nil:
		case !errors.As(err, &pe):
			return nil, err
		case first == nil || pe.Index < first.Index:
			first = pe
		}
	}
	if first != nil {
		return nil, first
	}
	return secs, nil
}
