package simexec

import (
	"errors"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
)

// TimeRun implements ops.Shortcut: it times plan by running the ranks
// that stand for all on the cluster's mirror, when the package doc's
// conditions hold. A run that fails there reports false, and the executor
// runs every rank.
func (d *Driver) TimeRun(w *hw.World, plan *ops.Plan) (seconds float64, ok bool) {
	mc, block, ok := d.mirrorFor(w, plan)
	if !ok {
		return 0, false
	}
	if d.mirrorOf != mc {
		d.mirror, d.mirrorOf = NewExecutor(mc), mc
	}
	seconds, err := timeRanks(d.mirror, plan, block)
	if err != nil {
		d.mirror, d.mirrorOf = nil, nil
		return 0, false
	}
	d.mirroredRuns++
	return seconds, true
}

// timeRanks runs ranks 0..ranks-1 of plan on exec's world, on phantom
// buffers, all starting at once, and returns the longest any took.
func timeRanks(exec *ops.Executor, plan *ops.Plan, ranks int) (seconds float64, err error) {
	var bufs []hw.Buffer
	defer func() {
		for _, b := range bufs {
			err = errors.Join(err, b.Free())
		}
	}()
	w := exec.World()
	starts, ends := make([]hw.Event, ranks), make([]hw.Event, ranks)
	for r := range ranks {
		dev, err := w.Device(r)
		if err != nil {
			return 0, err
		}
		var slices [2]hw.Slice
		for i, n := range [2]int{plan.InLen, plan.OutLen} {
			b, err := dev.Alloc(plan.DType, n)
			if err != nil {
				return 0, err
			}
			bufs = append(bufs, b)
			slices[i] = hw.Whole(b)
		}
		if starts[r], ends[r], err = exec.EnqueueTimed(plan, r, slices[0], slices[1]); err != nil {
			return 0, err
		}
	}
	for r := range ranks {
		if err := exec.Synchronize(r); err != nil {
			return 0, err
		}
	}
	for r := range ranks {
		t, err := ends[r].ElapsedSince(starts[r])
		if err != nil {
			return 0, err
		}
		seconds = max(seconds, t)
	}
	return seconds, nil
}

// mirrorFor finds the cluster's mirror for plan and the block of ranks
// that stand for all there, when w is the cluster's whole world, the plan
// is symmetric and its messages pair up there.
func (d *Driver) mirrorFor(w *hw.World, plan *ops.Plan) (mirror *sim.Cluster, block int, ok bool) {
	if w != d.c.World() || plan.Native() || plan.Ranks < 2 {
		return nil, 0, false
	}
	var g sim.Renaming
	switch plan.Symmetry() {
	case ops.Rotation:
		g = sim.Rotation
	case ops.Xor:
		g = sim.Xor
	default:
		return nil, 0, false
	}
	mirror, block, ok, err := d.c.Mirror(g)
	if err != nil || !ok || !plan.PairsUpInBlocks(block) {
		return nil, 0, false
	}
	return mirror, block, true
}

// MirrorBlock is how many ranks Run on w would simulate for plan, standing
// for all on the cluster's mirror, or 0 when it would run every rank.
func (d *Driver) MirrorBlock(w *hw.World, plan *ops.Plan) int {
	_, block, _ := d.mirrorFor(w, plan)
	return block
}

// MirroredRuns counts the runs the driver timed on a mirror.
func (d *Driver) MirroredRuns() int { return d.mirroredRuns }
