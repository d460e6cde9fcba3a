package main

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/verify"
)

// Each core of a parallel sweep holds a cluster of its own and the plan
// it runs, and at a thousand ranks one NCCL tree plan takes gigabytes
// (about 3 GB at 1024 ranks). Fabrics of up to freeParallelRanks ranks
// take a core each; larger ones share at most parallelRankBudget ranks
// among their cores, so 2 cores at 1024 ranks and none past 2048.
const (
	freeParallelRanks  = 256
	parallelRankBudget = 2048
)

// parallelWorkers is how many cores the sweep's sizes may share: on the
// simulator, timing only (so the in-place run is the out-of-place one),
// with no trace (which shows one cluster's timeline), as many as the
// fabric's size allows, at most one per size. Below 2 the sweep runs its
// sizes in turn.
func (s *sweep) parallelWorkers(w *openedWorld) int {
	if !s.runsOnce(w) || s.check {
		return 1
	}
	workers := min(runtime.GOMAXPROCS(0), len(s.sizes))
	if ranks := s.topo.NumGPUs(); ranks > freeParallelRanks {
		workers = min(workers, max(1, parallelRankBudget/ranks))
	}
	return workers
}

// measured is one size of a parallel sweep once run: its row, how many of
// its runs were timed on a mirror, or why it failed.
type measured struct {
	row      row
	mirrored int
	err      error
	done     chan struct{}
}

// measureParallel is measure for a sweep that parallelWorkers gives
// workers cores: the sizes are shared among one cluster per core, made
// as measure's is, each run starting on an idle cluster at time zero
// (rewound), so every row is the one the sizes run in turn on one
// cluster give, to the picosecond. A free core takes the largest size
// left, the costliest to simulate, so that the last to finish is a small
// one; rows reach emit in order of size, as soon as each and those
// before are done. On an error it returns the rows before the smallest
// failing size, and that size's error, whichever core met it first.
func (s *sweep) measureParallel(workers int, emit func(row) error, bar *progress) (rows []row, err error) {
	n := len(s.sizes)
	results := make([]measured, n)
	for i := range results {
		results[i].done = make(chan struct{})
	}
	var (
		mu     sync.Mutex
		failed = n     // the smallest failing size so far: later sizes are not run
		next   = n - 1 // the largest size not yet taken
	)
	stopAt := func() int {
		mu.Lock()
		defer mu.Unlock()
		return failed
	}
	take := func() int {
		mu.Lock()
		defer mu.Unlock()
		i := next
		next--
		return i
	}
	stop := func(i int) { // sizes from i on need not run
		mu.Lock()
		failed = min(failed, i)
		mu.Unlock()
	}
	// Each core runs on a world of its own; one whose run failed is
	// replaced, since its streams have failed, and the sizes below the
	// failure still run.
	worlds := make([]*openedWorld, workers)
	execs := make([]*ops.Executor, workers)
	open := func(k int) error {
		var err error
		if worlds[k], err = s.backend.open(s.topo, s.simConfig()); err != nil {
			return err
		}
		execs[k] = worlds[k].newExecutor()
		return nil
	}
	closeWorld := func(k int) error {
		if worlds[k] == nil {
			return nil
		}
		err := errors.Join(execs[k].Close(), worlds[k].close())
		worlds[k], execs[k] = nil, nil
		return err
	}
	closeErrs := make([]error, workers)
	defer func() {
		for k := range workers {
			err = errors.Join(err, closeErrs[k], closeWorld(k))
		}
	}()
	var wg sync.WaitGroup
	for k := range workers {
		if err := open(k); err != nil {
			stop(0)
			wg.Wait()
			return nil, err
		}
		wg.Go(func() {
			runner := verify.Runner{Iters: s.runner.Iters} // -n × -m runs back to back; nothing to warm up
			defer runner.Free()
			for i := take(); i >= 0; i = take() {
				if i > stopAt() {
					close(results[i].done)
					continue
				}
				if worlds[k] == nil {
					if err := open(k); err != nil {
						results[i].err = err
						stop(i)
						close(results[i].done)
						continue
					}
				}
				results[i].row, results[i].mirrored, results[i].err = s.measureSize(worlds[k], execs[k], &runner, s.sizes[i])
				if results[i].err != nil {
					stop(i)
					runner.Free()
					closeErrs[k] = errors.Join(closeErrs[k], closeWorld(k))
				}
				close(results[i].done)
			}
		})
	}
	defer wg.Wait()
	mirrored := 0
	for i := range results {
		<-results[i].done
		r := &results[i]
		if r.err != nil {
			return rows, r.err
		}
		if i > stopAt() {
			break // a smaller size failed: its error comes first
		}
		rows = append(rows, r.row)
		mirrored += r.mirrored
		if emit != nil {
			s.mirrored = mirrored
			if err := emit(r.row); err != nil {
				stop(i + 1)
				return rows, err
			}
		}
		bar.step()
	}
	s.mirrored = mirrored
	return rows, nil
}

// measureSize runs one size of a timing-only sweep out of place on world,
// which stands for the in-place run too, and counts the runs timed on the
// mirror (both, when the out-of-place one was).
func (s *sweep) measureSize(world *openedWorld, exec *ops.Executor, runner *verify.Runner, bytes int64) (row, int, error) {
	spec, moved := s.spec(bytes)
	plan, err := s.plan(spec)
	if err != nil {
		return row{}, 0, err
	}
	if err := s.rewind(world); err != nil {
		return row{}, 0, err
	}
	r := s.newRow(plan, moved)
	before, refined := world.mirroredRuns(), world.refinedRuns()
	run, err := runner.Run(exec, world.World, plan, nil, false)
	if err != nil {
		return row{}, 0, fmt.Errorf("%s: %w", formatBytes(bytes), err)
	}
	r.outOfPlace = timed(s.floored(run.Seconds), moved, plan.Op, plan.Ranks)
	r.inPlace = r.outOfPlace
	r.refined = world.refinedRuns() > refined
	return r, 2 * (world.mirroredRuns() - before), nil
}
