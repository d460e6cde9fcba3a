package simexec

import (
	"errors"
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
)

// TimeRun implements ops.Shortcut: it times plan by running the ranks
// that stand for all on the cluster's mirror, or the channels that stand
// for all on a folded cluster, when the package doc's conditions hold. A
// run that fails there reports false, and the executor runs every rank.
func (d *Driver) TimeRun(w *hw.World, plan *ops.Plan, runs int) (seconds float64, ok bool) {
	mc, block, ok := d.mirrorFor(w, plan)
	if !ok {
		// A plan that neither mirrors nor folds runs every rank, made
		// again as fine as memory allows (ops.Executor.RunBackToBack).
		return d.timeFolded(w, plan, runs)
	}
	if seconds, ok = d.mirror.time(mc, plan, block, runs, nil); ok {
		d.mirroredRuns++
	}
	return seconds, ok
}

// mayShortcut reports whether a run of plan on w may be timed on a
// mirror or a folded cluster: w is the whole cluster's world (not a
// workload's mirror), and the plan is not native and has peers.
func (d *Driver) mayShortcut(w *hw.World, plan *ops.Plan) bool {
	return d != nil && d.c != nil && plan != nil && d.workload == nil && w == d.c.World() && !plan.Native() && plan.Ranks >= 2
}

// timeFolded times a plan whose channels come in identical copies by
// running one copy, every rank, on the cluster thinned by their number
// (see ops.Plan.FoldChannels and sim.Cluster.Thinned), and, where its
// channels are images of each other under a rotation of every node's
// GPUs, a mirror of the nodes or both, a part of those on the cluster
// folded by that group too (ops.Plan.FoldRotationAndMirror, FoldRotation,
// FoldMirror; sim.Cluster.Rotated), each rank waiting for its orbit
// between back-to-back runs, or, where a rotation of every node's GPUs
// maps each rank's work onto another's, the ranks that stand for all
// (ops.Plan.FoldRanks), under the conditions a mirror has. Kept channels
// are made at NCCL's pieces where the whole plan's were coarsened
// (ops.Plan.Refine).
func (d *Driver) timeFolded(w *hw.World, plan *ops.Plan, runs int) (seconds float64, ok bool) {
	if !d.mayShortcut(w, plan) {
		return 0, false
	}
	folded, k, dup := plan.FoldChannels()
	if !dup {
		folded, k = plan, 1
	}
	// timeOn times kept on c, made at NCCL's pieces where the whole
	// plan's were coarsened to fit in memory (ops.Plan.Refine), and
	// counts the run in count.
	timeOn := func(c *sim.Cluster, kept *ops.Plan, waits [][]int, count *int) bool {
		fine, refined := plan.Refine(kept)
		if refined {
			kept = fine
			// Every lane made again, as a run of every rank is, may
			// come as fine.
			whole, ok := plan.RefinedChunk(plan.NumSteps())
			refined = fine.Chunk < whole || !ok
		}
		if seconds, ok = d.folded.time(c, kept, plan.Ranks, runs, waits); ok {
			*count++
			if refined {
				d.refinedRuns++
			}
		}
		return ok
	}
	// A rotated fold keeps some of each rank's channels, and the ranks of
	// its orbit run the images of the others: back to back, a rank starts
	// its next run when they all have ended their last, as its whole run
	// would have.
	rotated := func(kept *ops.Plan, perms [][]int, order int) bool {
		rc, ok, err := d.c.Rotated(perms, order, k)
		return err == nil && ok && timeOn(rc, kept, orbits(perms), &d.rotatedRuns)
	}
	if kept, perms, order, ok := folded.FoldRotationAndMirror(); ok && rotated(kept, perms, order) {
		return seconds, true
	}
	// The smallest rotation that maps the plan onto itself may not map
	// the fabric (GPUs paired on a PCIe switch, nodes that a mirror does
	// not map alike): its multiples may.
	for s := 1; s < plan.NodeRanks; s++ {
		for _, mirrored := range [2]bool{false, true} {
			if kept, perm, order, ok := folded.FoldRotation(s, mirrored); ok && rotated(kept, [][]int{perm}, order) {
				return seconds, true
			}
		}
	}
	if kept, perm, order, ok := folded.FoldMirror(); ok && rotated(kept, [][]int{perm}, order) {
		return seconds, true
	}
	for s := 1; s < plan.Ranks; s++ {
		if kept, perm, order, ok := folded.FoldRanks(s); ok && rotated(kept, [][]int{perm}, order) {
			return seconds, true
		}
	}
	if !dup {
		return 0, false
	}
	tc, ok, err := d.c.Thinned(k)
	if err != nil || !ok {
		return 0, false
	}
	ok = timeOn(tc, folded, nil, &d.thinnedRuns)
	return seconds, ok
}

// standIns is the executor over the cluster (a mirror, a folded cluster)
// where the last plan was timed, kept while plans are timed there.
type standIns struct {
	exec *ops.Executor
	of   *sim.Cluster
}

// time times runs of ranks 0..ranks-1 of plan on c, each rank's next
// waiting for the ranks waits names (see timeRanks); false if a run
// fails, which drops the executor.
func (s *standIns) time(c *sim.Cluster, plan *ops.Plan, ranks, runs int, waits [][]int) (float64, bool) {
	if s.of != c {
		s.exec, s.of = NewExecutor(c), c
	}
	seconds, err := timeRanks(s.exec, plan, ranks, runs, waits)
	if err != nil {
		*s = standIns{}
		return 0, false
	}
	return seconds, true
}

// timeRanks runs ranks 0..ranks-1 of plan on exec's world, on phantom
// buffers, all starting at once, runs times back to back as
// ops.Executor.RunBackToBack does, rank r's next also waiting for the
// last runs of the ranks waits[r] names (nil: none), and returns the mean
// time of a run.
func timeRanks(exec *ops.Executor, plan *ops.Plan, ranks, runs int, waits [][]int) (seconds float64, err error) {
	var bufs []hw.Buffer
	defer func() {
		for _, b := range bufs {
			err = errors.Join(err, b.Free())
		}
	}()
	w := exec.World()
	alloc := func(dev hw.Device, n int) (hw.Slice, error) {
		b, err := dev.Alloc(plan.DType, n)
		if err != nil {
			return hw.Slice{}, err
		}
		bufs = append(bufs, b)
		return hw.Whole(b), nil
	}
	in, out := make([]hw.Slice, ranks), make([]hw.Slice, ranks)
	for r := range ranks {
		dev, err := w.Device(r)
		if err != nil {
			return 0, err
		}
		if in[r], err = alloc(dev, plan.InLen); err != nil {
			return 0, err
		}
		if out[r], err = alloc(dev, plan.OutLen); err != nil {
			return 0, err
		}
	}
	starts, ends, err := exec.EnqueueBackToBackWaiting(plan, in, out, runs, waits)
	if err != nil {
		return 0, err
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
	return seconds / float64(runs), nil
}

// mirrorFor finds the cluster's mirror for plan and the block of ranks
// that stand for all there, when w is the cluster's whole world, the plan
// is symmetric and its messages pair up there.
func (d *Driver) mirrorFor(w *hw.World, plan *ops.Plan) (mirror *sim.Cluster, block int, ok bool) {
	if !d.mayShortcut(w, plan) {
		return nil, 0, false
	}
	g := plan.Symmetry()
	if g == ops.NotSymmetric {
		return d.mirrorInBlocks(plan)
	}
	mirror, block, ok, err := d.c.Mirror(renaming(g))
	if err != nil || !ok || !plan.PairsUpInBlocks(g, block) {
		return nil, 0, false
	}
	return mirror, block, true
}

// mirrorInBlocks finds a mirror for a plan that no group taking rank 0 to
// every rank maps onto itself, but a shift by a block does: the fabric's
// smallest block (sim.Cluster.Mirror), or twice it, four times…, as long
// as the ranks divide into at least 4 blocks (NCCL's rings alternate
// their way through a node from node to node: a shift by two nodes maps
// them).
func (d *Driver) mirrorInBlocks(plan *ops.Plan) (mirror *sim.Cluster, block int, ok bool) {
	_, b, ok, err := d.c.Mirror(sim.Rotation)
	if err != nil || !ok {
		return nil, 0, false
	}
	for ; 2*b <= plan.Ranks && plan.Ranks%b == 0; b *= 2 {
		if !plan.MirrorsInBlocks(b) {
			continue
		}
		if mirror, ok, err = d.c.MirrorBy(b); err == nil && ok {
			return mirror, b, true
		}
	}
	return nil, 0, false
}

// renaming is sim's name for the group g.
func renaming(g ops.Symmetry) sim.Renaming {
	if g == ops.Xor {
		return sim.Xor
	}
	return sim.Rotation
}

// ErrNotMirrorable is wrapped by a workload mirror's refusal of a plan
// that is not symmetric under the workload's renamings, or whose messages
// would not pair up on the mirror (see Driver.Mirror).
var ErrNotMirrorable = errors.New("plan cannot be timed on a mirror")

// workload is what a driver made by Mirror promises its plans are.
type workload struct {
	g       ops.Symmetry
	block   int
	checked map[*ops.Plan]bool
}

// Mirror returns a driver over the cluster's mirror for a whole workload
// in which every rank does what rank 0 does with its peers renamed by g
// (a training step with no faults: the same compute on every rank, the
// same collectives). Run ranks 0..block-1 of the workload on the mirror's
// world (mirror.Cluster().World()) through it, all starting at the same
// instant, and their times are every rank's, for the reasons the package
// doc gives. The caller answers for the compute; the driver checks every
// plan it is given, and refuses one that is not symmetric under g or
// whose messages do not pair up, with an error wrapping ErrNotMirrorable:
// time the workload in full then. ok is false when the cluster has no
// mirror (see sim.Cluster.Mirror).
func (d *Driver) Mirror(g ops.Symmetry) (mirror *Driver, block int, ok bool, err error) {
	if g != ops.Rotation && g != ops.Xor {
		return nil, 0, false, fmt.Errorf("simexec: mirror: %w: symmetry %v", hw.ErrBadArgument, g)
	}
	mc, block, ok, err := d.c.Mirror(renaming(g))
	if err != nil || !ok {
		return nil, 0, false, err
	}
	return &Driver{c: mc, workload: &workload{g: g, block: block, checked: map[*ops.Plan]bool{}}}, block, true, nil
}

// check refuses a plan the workload's promise does not cover. A plan is
// checked once: held plans are plain data, and one edited between two
// runs of a workload is the caller's to recheck with a fresh mirror.
func (w *workload) check(plan *ops.Plan) error {
	ok, seen := w.checked[plan]
	if !seen {
		ok = !plan.Native() && plan.PairsUpInBlocks(w.g, w.block)
		w.checked[plan] = ok
	}
	if !ok {
		return fmt.Errorf("simexec: %v: %w: it is not %v-symmetric with messages that pair up in blocks of %d ranks", plan.Spec, ErrNotMirrorable, w.g, w.block)
	}
	return nil
}

// MirrorBlock is how many ranks Run on w would simulate for plan, standing
// for all on the cluster's mirror, or 0 when it would run every rank.
func (d *Driver) MirrorBlock(w *hw.World, plan *ops.Plan) int {
	_, block, _ := d.mirrorFor(w, plan)
	return block
}

// MirroredRuns counts the runs the driver timed on a mirror.
func (d *Driver) MirroredRuns() int { return d.mirroredRuns }

// ThinnedRuns counts the runs the driver timed with the plan's duplicate
// channels folded, on a thinned cluster, and RotatedRuns those it timed
// with channels that are rotations of each other folded too.
func (d *Driver) ThinnedRuns() int { return d.thinnedRuns }

// RefinedRuns counts the thinned and rotated runs whose kept lanes were
// made again at finer pieces (ops.Plan.Refine) than the whole plan can be
// made again at: where a run of every rank (Symmetry off) takes another
// time.
func (d *Driver) RefinedRuns() int { return d.refinedRuns }

// RotatedRuns: see ThinnedRuns.
func (d *Driver) RotatedRuns() int { return d.rotatedRuns }

// orbits is each rank's orbit under the group the renamings perms
// generate: the ranks it is renamed to, itself among them.
func orbits(perms [][]int) [][]int {
	of := make([][]int, len(perms[0]))
	for r := range of {
		if of[r] != nil {
			continue
		}
		orbit := []int{r}
		of[r] = orbit
		for i := 0; i < len(orbit); i++ {
			for _, perm := range perms {
				if q := perm[orbit[i]]; of[q] == nil {
					orbit = append(orbit, q)
					of[q] = orbit
				}
			}
		}
		for _, q := range orbit {
			of[q] = orbit
		}
	}
	return of
}
