package calibrate

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

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

// maxSimulatedSizes bounds Simulate's sizes: a log holds at most 64 MiB,
// some million rows.
const maxSimulatedSizes = 1 << 24

// Simulate times the plans of sizes 0..n-1 in seconds, each out of place on an idle
// cluster of topo made with cfg, runs times back to back as nccl-tests
// times its -n (verify.Runner.Iters; 0 or 1 for one run), the mean of a
// run, sharing them among one cluster per core,
// the last size first (a log's sizes grow, and so, mostly, does the time
// a size takes to simulate: the largest first keep the cores busy to the
// end); plan(i) makes the i-th (it runs on any worker, and may record what it
// needs of the plan at index i). Each run starts on an idle cluster at
// time zero (sim.Cluster.Rewind), so the times do not depend on which
// worker ran which plan, nor on what it ran before. On failure it
// returns a *SizeError: the smallest failing size's, whichever worker
// met it (every size is tried), so the report is the same on every run.
// done, when not nil, is called after each size, failed or not, on the
// worker that ran it: a progress bar's step.
func Simulate(topo *topology.Topology, cfg sim.Config, runs, n int, plan func(i int) (*ops.Plan, error), done func()) ([]float64, error) {
	switch {
	case n < 0 || n > maxSimulatedSizes:
		return nil, fmt.Errorf("calibrate: simulate %d sizes: want 0 to %d", n, maxSimulatedSizes)
	case runs < 0:
		return nil, fmt.Errorf("calibrate: simulate %d runs a size: want 0 or 1 for one, or more", runs)
	case plan == nil:
		return nil, errors.New("calibrate: simulate: no plan function")
	}
	secs := make([]float64, n)
	workers := max(1, min(runtime.GOMAXPROCS(0), n))
	errs := make([]error, workers)
	sizeErrs := make([]*SizeError, n)
	var taken atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var c *sim.Cluster
			var exec *ops.Executor
			runner := verify.Runner{Iters: runs}
			defer runner.Free()
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			// run times size i, or records why it failed; false: no
			// cluster could be made.
			run := func(i int) bool {
				if c == nil {
					var err error
					if c, err = sim.NewCluster(topo, cfg); err != nil {
						errs[w], c = err, nil
						return false
					}
					exec = simexec.NewExecutor(c)
				}
				pl, err := plan(i)
				if err == nil && pl == nil {
					err = errors.New("the plan function gave no plan and no error")
				}
				if err != nil {
					sizeErrs[i] = &SizeError{i, true, err}
					return true
				}
				// Each size gets the whole horizon, whatever ran before it.
				if err = c.Rewind(); err == nil {
					var res verify.Result
					if res, err = runner.Run(exec, c.World(), pl, nil, false); err == nil {
						secs[i] = res.Seconds
						return true
					}
				}
				// A cluster a run failed on is not trusted with the next.
				sizeErrs[i] = &SizeError{i, false, err}
				c.Close()
				c = nil
				return true
			}
			for k := int(taken.Add(1)) - 1; k < n; k = int(taken.Add(1)) - 1 {
				if !run(n - 1 - k) {
					return
				}
				if done != nil {
					done()
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	var first *SizeError
	for _, e := range sizeErrs {
		if e != nil {
			first = e
			break
		}
	}
	if first != nil {
		return nil, first
	}
	return secs, nil
}
