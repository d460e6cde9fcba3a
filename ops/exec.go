package ops

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/commsim/commsim/hw"
)

// Executor runs plans on a world: the one executor for every algorithm and
// every backend. It keeps each rank's streams and scratch buffer between
// runs, so a sweep reuses them. An Executor is not safe for concurrent use.
type Executor struct {
	// root is the world the executor was made on, which the driver's
	// shortcuts recognise; w is the one whose tags its runs use, a
	// duplicate of root, and a fresh one after a run failed
	// (retireFailedRun).
	root, w    *hw.World
	driver     Driver
	devs       []hw.Device // by rank
	lanes      [][]hw.Stream
	tmp        []hw.Buffer
	starts     []hw.Event // per rank, recorded before its steps
	ends       []hw.Event // per rank, recorded after them
	laneEvents [][]hw.Event
	retired    [][]hw.Buffer // per rank: outgrown scratch, freed after a wait
	native     hw.NativeComm // made by the first native plan
	// Plans with switch steps enqueued rank by rank: each rank's count of
	// them, and the buffers of runs some rank has yet to enqueue.
	switchSeq  []int
	switchRuns map[int]*runBuffers
}

// NewExecutor prepares to run plans on w with the generic driver, which
// enqueues every operation of a rank at once through hw. On the simulator,
// use package simexec's executor instead: it runs plans of millions of
// steps in bounded memory, times symmetric ones from a few ranks, and
// applies how NCCL's plans move (their Wire and Launch), which this one
// refuses there.
func NewExecutor(w *hw.World) *Executor { return NewExecutorWith(w, nil) }

// NewExecutorWith prepares to run plans on w through d (nil: the generic
// driver). A backend's driver may do better than enqueueing everything up
// front: package simexec feeds the simulator lazily and mirrors
// symmetric plans.
//
// The executor's messages carry the tags of a duplicate of w (hw.World.Dup),
// as a library's should: another executor's on w, or what a run of another
// that failed left on its way, never match its receives (a new executor
// on a world where one had failed took the failed run's messages, and
// returned wrong outputs with no error).
func NewExecutorWith(w *hw.World, d Driver) *Executor {
	if d == nil {
		d = genericDriver{}
	}
	if w == nil {
		return &Executor{driver: d} // Run says it has no world
	}
	own := w
	if dup, err := w.Dup(); err == nil {
		own = dup
	}
	n := w.Size()
	return &Executor{root: w, w: own, driver: d, devs: w.Devices(), lanes: make([][]hw.Stream, n), tmp: make([]hw.Buffer, n),
		starts: make([]hw.Event, n), ends: make([]hw.Event, n), laneEvents: make([][]hw.Event, n), retired: make([][]hw.Buffer, n)}
}

// World is the world the executor runs on, as it was made.
func (e *Executor) World() *hw.World {
	if e == nil {
		return nil
	}
	return e.root
}

// Driver is the executor's driver.
func (e *Executor) Driver() Driver {
	if e == nil {
		return nil
	}
	return e.driver
}

// notMade is the error for a value of type typ that ctor did not make (an
// Executor or a RankJob with no world behind it).
func notMade(typ, ctor string) error {
	return fmt.Errorf("ops: %s %w (use %s)", typ, hw.ErrNotMade, ctor)
}

// made refuses an Executor that NewExecutor or NewExecutorWith did not
// make; they always set a driver.
func (e *Executor) made() error {
	if e == nil || e.driver == nil {
		return notMade("Executor", "ops.NewExecutor")
	}
	return nil
}

// hasWorld refuses an executor that cannot run anything: one not made, or
// made over a nil world.
func (e *Executor) hasWorld() error {
	if err := e.made(); err != nil {
		return err
	}
	if e.w == nil {
		return errors.New("ops: the executor has no world (it was made with a nil one)")
	}
	return nil
}

// Run executes plan with rank r reading in[r] and writing out[r], and
// returns the collective's time in seconds: the longest any rank took, from
// events recorded around its steps.
//
// in[r] and out[r] must be on rank r's device, of the plan's dtype, with the
// plan's InLen and OutLen elements. To run in place, pass overlapping
// slices as NCCL does: the same slice for allreduce, broadcast, reduce,
// sendrecv and alltoall; in[r] = out[r].Sub(r·Count, Count) for allgather
// and gather; out[r] = in[r].Sub(r·Count, Count) for reducescatter. Other
// overlaps are refused.
//
// A plan made or edited by hand is checked first (see ErrBadPlan): a
// malformed one is refused before anything runs.
func (e *Executor) Run(plan *Plan, in, out []hw.Slice) (float64, error) {
	return e.RunBackToBack(plan, in, out, 1)
}

// RunBackToBack is Run repeated runs times in a row, as nccl-tests times
// its -n iterations: each rank starts its next run when its own last one
// ends, without waiting for the other ranks', and the mean time of a run
// comes back: the longest any rank took from its first run's start to its
// last run's end, over runs. Where every rank works until the collective
// ends (a ring, a tree of all-reduce), runs follow one another and the
// mean is Run's time. A rooted chain (broadcast, reduce) overlaps them:
// its root starts the next run while the last one still flows down the
// chain; so, across nodes, do sendrecv's, whose ranks fed over NVLink run
// ahead of those fed over the network. A plan with switch steps waits for every rank's last run, as
// NCCL's NVLS kernels do at the switch barrier (see UsesSwitch).
//
// A plan whose pieces were coarsened to hold every lane (FineChunk) runs
// made again as fine as memory allows (Refined), where a driver's
// Shortcut does not time it.
//
// Every run uses the same buffers, so an in-place run reduces what the run
// before left. runs must be 1 or more, and at most MaxBackToBackRuns and
// MaxBackToBackLaneRuns over the ranks' lanes enqueued at once: the
// plan's, or a fold's where the driver's Shortcut times it so, and where
// the driver is a Pacer, a window's runs of them (EnqueueBackToBackWaiting).
func (e *Executor) RunBackToBack(plan *Plan, in, out []hw.Slice, runs int) (float64, error) {
	if err := e.CheckRun(plan, in, out); err != nil {
		return 0, err
	}
	// The lanes are counted where they are enqueued: a Shortcut may
	// enqueue fewer ranks than the plan has.
	if err := backToBackRuns(0, 0, runs); err != nil {
		return 0, fmt.Errorf("ops: run %v: %w", plan.Spec, err)
	}
	if sc, ok := e.driver.(Shortcut); ok && !plan.native {
		if t, ok := sc.TimeRun(e.root, plan, runs); ok {
			return t, nil
		}
	}
	return e.run(plan.Refined(), in, out, runs)
}

// retireFailedRun gives the executor's messages a duplicate world's tags
// (hw.World.Dup) after a run that failed: the messages that run left on
// their way (sends no receive took, a failed sender's word to its
// receivers) carry the old ones, which the next run's receives would
// otherwise take (a run after a failed one returned wrong outputs and no
// error).
//
// Its ranks' streams are dropped too (a rank enqueued before another was
// refused still waits for that one's messages), and the count of switch
// plans each rank enqueued is forgotten, as a run some ranks never
// enqueued will never complete.
func (e *Executor) retireFailedRun() {
	if w, err := e.w.Dup(); err == nil {
		e.w = w
	}
	for r := range e.lanes {
		e.dropStreams(r)
	}
	e.switchRuns, e.switchSeq = nil, nil
}

// run is RunBackToBack after the checks.
func (e *Executor) run(plan *Plan, in, out []hw.Slice, runs int) (float64, error) {
	p := plan.Ranks
	starts, ends := e.starts, e.ends
	if plan.native {
		for r := range p {
			if err := e.prepare(plan, r); err != nil {
				return 0, err
			}
		}
		if err := e.runNative(plan, in, out, runs); err != nil {
			return 0, fmt.Errorf("ops: run %v: %w", plan.Spec, err)
		}
	} else { // EnqueueBackToBack prepares each rank
		var err error
		if starts, ends, err = e.EnqueueBackToBack(plan, in, out, runs); err != nil {
			e.retireFailedRun() // the ranks enqueued before the failure still send
			return 0, err
		}
	}
	rankErrs := make([]error, p)
	for r := range p {
		rankErrs[r] = synchronizeLanes(e.lanes[r][:plan.Lanes])
	}
	var errs []error
	if err := JoinRankErrors(rankErrs); err != nil {
		errs = append(errs, err)
	}
	for r := range p {
		if err := e.releaseRetired(r); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		e.retireFailedRun()
		return 0, fmt.Errorf("ops: run %v: %w", plan.Spec, joinErrors(errs))
	}
	longest := 0.0
	for r := range p {
		t, err := ends[r].ElapsedSince(starts[r])
		if err != nil {
			return 0, fmt.Errorf("ops: run %v: rank %d timing: %w", plan.Spec, r, err)
		}
		longest = max(longest, t)
	}
	return longest / float64(runs), nil
}

// EnqueueBackToBack puts runs of plan on ranks 0..len(in)-1 (all of the
// plan's, or the first few where a driver times a plan on the ranks that
// stand for all), rank r reading in[r] and writing out[r], one run after
// another on each rank's streams as RunBackToBack times them, and returns
// each rank's events recorded at its first run's start and its last run's
// end. A plan with switch steps starts each run after every one of those
// ranks' last. Wait (Synchronize) before reading the events.
func (e *Executor) EnqueueBackToBack(plan *Plan, in, out []hw.Slice, runs int) (starts, ends []hw.Event, err error) {
	return e.EnqueueBackToBackWaiting(plan, in, out, runs, nil)
}

// The most runs back to back that one call enqueues, and of those runs
// times the ranks' lanes it enqueues at once: every lane of every run
// enqueued holds its cursor, its source and its events until the run ends
// (a driver feeds the steps themselves as they run), about 1.4 KB a
// lane-run live and twice that at the process's peak (1000 runs of NCCL's
// 24-channel ring on 8 GPUs held 265 MB and peaked at 540 MB), so the
// lanes' bound is the host's memory: 2^21 lane-runs peak at about 6 GB
// (2^28 allowed 100,000 of those runs, over 45 GB, before a simulation
// started; 2^63 runs of a small ring took the memory at 0.6 GB/s until
// the process died). A Pacer's runs are enqueued a window of about 2^16
// lane-runs at a time (pacedWindow), whatever the runs.
const (
	MaxBackToBackRuns     = 1 << 20
	MaxBackToBackLaneRuns = 1 << 21
)

// backToBackRuns refuses runs back to back that are fewer than one or
// more than the limits allow, of ranks' lanes each (0 ranks: the runs
// alone).
func backToBackRuns(ranks, lanes, runs int) error {
	switch {
	case runs < 1:
		return fmt.Errorf("%w: %d runs, want 1 or more", hw.ErrBadArgument, runs)
	case runs > MaxBackToBackRuns:
		return fmt.Errorf("%w: %d runs back to back: over %d enqueued at once; run fewer", hw.ErrBadArgument, runs, MaxBackToBackRuns)
	case ranks < 1:
		return nil
	}
	lanes = max(1, lanes)
	all := laneCount(ranks, lanes, MaxBackToBackLaneRuns)
	if most := MaxBackToBackLaneRuns / all; runs > most {
		return fmt.Errorf("%w: %d runs back to back of %d ranks × %d lanes: over %d runs of lanes enqueued at once, which would hold %.1f GB of host memory; run %d or fewer",
			hw.ErrBadArgument, runs, ranks, lanes, MaxBackToBackLaneRuns, float64(runs)*float64(all)*laneRunBytes/1e9, most)
	}
	return nil
}

// laneCount is ranks × lanes (each at least 1), or bound+1 where that
// passes bound: saturating, where 4 × 2^62 wrapped to 0 and was divided
// by.
func laneCount(ranks, lanes, bound int) int {
	ranks, lanes = max(1, ranks), max(1, lanes)
	if lanes > bound/ranks {
		return bound + 1
	}
	return ranks * lanes
}

// laneRunBytes is about what a lane of one run takes of the process's
// peak memory while runs back to back are enqueued (MaxBackToBackLaneRuns).
const laneRunBytes = 3000

// EnqueueBackToBackWaiting is EnqueueBackToBack with rank r's next run
// also waiting for the last run of every rank in waits[r] (nil: none) to
// end; a plan with switch steps waits for every rank anyway. A simulator
// that runs only some of each rank's channels, on a fabric folded so that
// other ranks run the images of the rest (package simexec's rotated
// folds), holds a rank so until the whole run it stands for would have
// ended.
//
// Where the driver is a Pacer and the runs' lanes pass about 2^16, the
// driver carries out the runs enqueued so far as it goes (see Pacer): the
// events returned have then partly happened.
func (e *Executor) EnqueueBackToBackWaiting(plan *Plan, in, out []hw.Slice, runs int, waits [][]int) (starts, ends []hw.Event, err error) {
	if err := e.hasWorld(); err != nil {
		return nil, nil, err
	}
	if plan == nil || plan.Ranks != e.w.Size() {
		return nil, nil, fmt.Errorf("ops: enqueue: plan is nil or not for %d ranks", e.w.Size())
	}
	if len(in) != len(out) || waits != nil && len(waits) != len(in) {
		return nil, nil, fmt.Errorf("ops: enqueue: %w: %d inputs, %d outputs, %d ranks' waits", hw.ErrBadArgument, len(in), len(out), len(waits))
	}
	if err := checkPlanShape(plan); err != nil {
		return nil, nil, fmt.Errorf("ops: enqueue: %w", err)
	}
	if err := backToBackRuns(0, 0, runs); err != nil {
		return nil, nil, fmt.Errorf("ops: enqueue: %w", err)
	}
	pacer, _ := e.driver.(Pacer)
	window := pacedWindow(pacer != nil, len(in), plan.Lanes, runs)
	if err := backToBackRuns(len(in), plan.Lanes, window); err != nil {
		return nil, nil, fmt.Errorf("ops: enqueue: %w", err)
	}
	for _, w := range waits {
		for _, q := range w {
			if q < 0 || q >= len(in) {
				return nil, nil, fmt.Errorf("ops: enqueue: %w: a run waits for rank %d of %d", hw.ErrBadArgument, q, len(in))
			}
		}
	}
	// Every rank's streams and scratch first: a rank refused after others
	// were enqueued would leave them waiting for its messages.
	if err := e.refuseUnsupported(plan); err != nil {
		return nil, nil, err
	}
	for r := range in {
		if err := e.prepare(plan, r); err != nil {
			return nil, nil, fmt.Errorf("ops: enqueue %v: rank %d: %w", plan.Spec, r, err)
		}
	}
	starts, ends = make([]hw.Event, len(in)), make([]hw.Event, len(in))
	var held [][]hw.Event // the ends of the runs the window holds, oldest first
	for k := range runs {
		if k >= window {
			if err := pacer.RunUntilAny(held[0]...); err != nil {
				return nil, nil, err
			}
			held = held[1:]
		}
		last := slices.Clone(ends)
		for r := range in {
			var after []hw.Event
			switch {
			case k == 0:
			case plan.UsesSwitch():
				after = last
			case waits != nil:
				for _, q := range waits[r] {
					after = append(after, last[q])
				}
			}
			start, end, err := e.EnqueueTimed(plan, r, in[r], out[r], after...)
			if err != nil {
				return nil, nil, err
			}
			if k == 0 {
				starts[r] = start
			}
			ends[r] = end
		}
		if window < runs {
			held = append(held, slices.Clone(ends))
		}
	}
	return starts, ends, nil
}

// pacedLaneRuns is about how many lane-runs a paced series of runs back to
// back holds enqueued (laneRunBytes each: some 200 MB).
const pacedLaneRuns = 1 << 16

// pacedWindow is how many runs of ranks' lanes a series of runs back to
// back enqueues ahead: runs where the driver cannot pace them or they
// fit, else at least 2, so that each rank's next run waits for its last,
// which no rank has ended where the Pacer stands (see Pacer). runs is at
// most MaxBackToBackRuns.
func pacedWindow(paced bool, ranks, lanes, runs int) int {
	lanes = laneCount(ranks, lanes, pacedLaneRuns)
	if !paced || runs <= pacedLaneRuns/lanes {
		return runs
	}
	return min(runs, max(2, pacedLaneRuns/lanes))
}

// CheckRun returns the error Run would give plan, in and out before it
// enqueued anything: a malformed plan, one the world's devices cannot run,
// or a rank's buffers that do not fit it. A caller that enqueues the ranks
// one by one (package comm) checks them all first, since a rank refused
// after others were enqueued would leave those waiting for its messages.
func (e *Executor) CheckRun(plan *Plan, in, out []hw.Slice) error {
	if err := e.checkArgs(plan, in, out); err != nil {
		return err
	}
	if err := plan.validate(); err != nil {
		return fmt.Errorf("ops: run %v: %w", plan.Spec, err)
	}
	return e.refuseUnsupported(plan)
}

func (e *Executor) checkArgs(plan *Plan, in, out []hw.Slice) error {
	if err := e.hasWorld(); err != nil {
		return err
	}
	if plan == nil {
		return fmt.Errorf("ops: run: %w: nil plan", ErrBadPlan)
	}
	if plan.Ranks != e.w.Size() {
		return fmt.Errorf("ops: run %v: plan is for %d ranks, world has %d", plan.Spec, plan.Ranks, e.w.Size())
	}
	if len(in) != plan.Ranks || len(out) != plan.Ranks {
		return fmt.Errorf("ops: run %v: got %d input and %d output slices for %d ranks", plan.Spec, len(in), len(out), plan.Ranks)
	}
	for r := range plan.Ranks {
		if err := e.checkRank(plan, r, in[r], out[r]); err != nil {
			return err
		}
	}
	return nil
}

// checkRank checks one rank's buffers against the plan.
func (e *Executor) checkRank(plan *Plan, r int, in, out hw.Slice) error {
	dev, err := e.w.Device(r)
	if err != nil {
		return fmt.Errorf("ops: run %v: %w", plan.Spec, err)
	}
	return checkSlices(plan, r, dev, in, out)
}

// checkSlices checks rank r's input and output against the plan: on dev,
// of the plan's dtype and lengths, disjoint or in place.
func checkSlices(plan *Plan, r int, dev hw.Device, in, out hw.Slice) error {
	for _, c := range []struct {
		name string
		s    hw.Slice
		want int
	}{{"input", in, plan.InLen}, {"output", out, plan.OutLen}} {
		if err := c.s.CheckOn(dev); err != nil {
			return fmt.Errorf("ops: run %v: rank %d %s: %w", plan.Spec, r, c.name, err)
		}
		if f, ok := c.s.Buf.(hw.FreedReporter); ok && f.Freed() {
			return fmt.Errorf("ops: run %v: rank %d %s: %w", plan.Spec, r, c.name, hw.ErrFreed)
		}
		if c.s.DType() != plan.DType {
			return fmt.Errorf("ops: run %v: rank %d %s: %w: buffer is %s, plan is %s", plan.Spec, r, c.name, hw.ErrDTypeMismatch, c.s.DType(), plan.DType)
		}
		if c.s.Len != c.want {
			return fmt.Errorf("ops: run %v: rank %d %s: %w: %d elements, plan needs %d", plan.Spec, r, c.name, hw.ErrSizeMismatch, c.s.Len, c.want)
		}
	}
	if err := checkAlias(plan, r, in, out); err != nil {
		return fmt.Errorf("ops: run %v: rank %d: %w", plan.Spec, r, err)
	}
	return nil
}

// Enqueue puts rank's part of plan on the rank's streams, after the events
// in after have been reached (nil ones are none), and returns without
// waiting. The returned event is recorded when the rank's part has
// finished; the other ranks must enqueue their parts too (in the same
// order of plans) before anyone waits. Use it when ranks start a collective at different times, as
// gradient buckets do; Run is Enqueue on every rank plus the wait.
//
// A plan with switch steps (UsesSwitch) reads and writes the other
// members' buffers without their ranks' steps knowing: its inputs must be
// ready on every rank before any rank's part starts, and a rank's output
// is complete only when every member's end event has been reached.
func (e *Executor) Enqueue(plan *Plan, rank int, in, out hw.Slice, after ...hw.Event) (hw.Event, error) {
	_, end, err := e.EnqueueTimed(plan, rank, in, out, after...)
	return end, err
}

// EnqueueTimed is Enqueue that also returns the event recorded when the
// rank's part starts (after the events in after), for timing it.
func (e *Executor) EnqueueTimed(plan *Plan, rank int, in, out hw.Slice, after ...hw.Event) (start, end hw.Event, err error) {
	if err := e.hasWorld(); err != nil {
		return nil, nil, err
	}
	if plan == nil || plan.Ranks != e.w.Size() {
		return nil, nil, fmt.Errorf("ops: enqueue: plan is nil or not for %d ranks", e.w.Size())
	}
	if plan.native {
		return nil, nil, fmt.Errorf("ops: enqueue %v: %w: the library launches every rank at once; use Run", plan.Spec, ErrUnsupported)
	}
	// The shape first: prepare makes a stream for each of the plan's
	// lanes, and a million lanes of no steps took 590 MB before.
	if err := checkPlanShape(plan); err != nil {
		return nil, nil, fmt.Errorf("ops: enqueue: %w", err)
	}
	if err := e.checkRank(plan, rank, in, out); err != nil {
		return nil, nil, err
	}
	if err := e.refuseUnsupported(plan); err != nil {
		return nil, nil, err
	}
	if err := e.prepare(plan, rank); err != nil {
		return nil, nil, err
	}
	var run *runBuffers
	if plan.UsesSwitch() {
		if run, err = e.register(plan, rank, in, out); err != nil {
			return nil, nil, err
		}
	}
	dev, _ := e.w.Device(rank)
	if start, err = dev.NewEvent(); err != nil {
		return nil, nil, err
	}
	if end, err = dev.NewEvent(); err != nil {
		return nil, nil, err
	}
	if err := e.enqueue(plan, rank, in, out, run, start, end, after); err != nil {
		return nil, nil, fmt.Errorf("ops: enqueue %v: rank %d: %w", plan.Spec, rank, err)
	}
	return start, end, nil
}

// Synchronize waits for everything enqueued on rank's streams.
func (e *Executor) Synchronize(rank int) error {
	if err := e.hasWorld(); err != nil {
		return err
	}
	if rank < 0 || rank >= len(e.lanes) {
		return fmt.Errorf("ops: synchronize: rank %d not in 0..%d", rank, len(e.lanes)-1)
	}
	if err := synchronizeLanes(e.lanes[rank]); err != nil {
		e.dropStreams(rank)
		return err
	}
	return e.releaseRetired(rank)
}

// synchronizeLanes waits for every lane and returns the first of their
// errors, a rank's own failure before a lane's that failed for a peer's
// (hw.ErrPeerFailed): the own one names the cause.
func synchronizeLanes(lanes []hw.Stream) error {
	var own, peer error
	for _, s := range lanes {
		err := s.Synchronize()
		switch {
		case err == nil:
		case errors.Is(err, hw.ErrPeerFailed):
			peer = cmp.Or(peer, err)
		default:
			own = cmp.Or(own, err)
		}
	}
	return cmp.Or(own, peer)
}

// dropStreams forgets rank's streams and the events recorded on them, so
// that its next plan runs on new ones: a stream that failed skips all its
// later work (hw.Stream), and would fail every later run with the first
// one's error.
func (e *Executor) dropStreams(rank int) {
	e.lanes[rank], e.laneEvents[rank], e.starts[rank], e.ends[rank] = nil, nil, nil, nil
}

// InPlace lays out rank's input and output inside one buffer slice of
// max(InLen, OutLen) elements the way NCCL's in-place calls do (see Run).
func (p *Plan) InPlace(rank int, whole hw.Slice) (in, out hw.Slice) {
	switch {
	case p == nil:
		return hw.Slice{}, hw.Slice{}
	case p.OutInIn():
		return whole, whole.Sub(rank*p.Count, p.Count)
	case p.InLen < p.OutLen:
		return whole.Sub(p.InPlaceOffset(rank), p.InLen), whole
	}
	return whole, whole
}

// checkAlias accepts disjoint slices and NCCL's in-place layouts only.
func checkAlias(plan *Plan, r int, in, out hw.Slice) error {
	if in.Buf != out.Buf || in.Len == 0 || out.Len == 0 ||
		in.Off+in.Len <= out.Off || out.Off+out.Len <= in.Off {
		return nil
	}
	rel, want := in.Off-out.Off, plan.InPlaceOffset(r)
	if plan.OutInIn() {
		rel, want = out.Off-in.Off, r*plan.Count
	}
	if rel == want {
		return nil
	}
	return fmt.Errorf("%w: input %v and output %v overlap in a way that is not in place for %s", hw.ErrBadArgument, in, out, plan.Op)
}

// prepare makes sure rank r has enough lanes and scratch for plan.
func (e *Executor) prepare(plan *Plan, r int) error {
	dev, err := e.w.Device(r)
	if err != nil {
		return err
	}
	for len(e.lanes[r]) < plan.Lanes {
		s, err := dev.NewStream()
		if err != nil {
			return err
		}
		ev, err := dev.NewEvent()
		if err != nil {
			return err
		}
		e.lanes[r] = append(e.lanes[r], s)
		e.laneEvents[r] = append(e.laneEvents[r], ev)
	}
	if e.starts[r] == nil {
		if e.starts[r], err = dev.NewEvent(); err != nil {
			return err
		}
		if e.ends[r], err = dev.NewEvent(); err != nil {
			return err
		}
	}
	// Scratch always exists (at least one element), so zero-length steps on
	// Tmp have a buffer to name.
	if t := e.tmp[r]; t == nil || t.DType() != plan.DType || t.Len() < plan.TmpLen {
		if t != nil {
			// Work already enqueued may still use it: free it after the
			// next wait.
			e.retired[r] = append(e.retired[r], t)
		}
		e.tmp[r] = nil
		if e.tmp[r], err = dev.Alloc(plan.DType, max(plan.TmpLen, 1)); err != nil {
			return err
		}
	}
	return nil
}

// releaseRetired frees scratch buffers that were replaced by bigger ones;
// call it only when rank r's streams are idle.
func (e *Executor) releaseRetired(r int) error {
	var errs []error
	for _, b := range e.retired[r] {
		errs = append(errs, b.Free())
	}
	e.retired[r] = nil
	return errors.Join(errs...)
}

// enqueue puts rank r's part of plan on its lanes through the driver,
// after the events in after, between events start and end: lane 0 waits
// for after and records start, the other lanes wait for start, and at the
// end every lane joins lane 0 before end. run is every rank's buffers in
// this run, for switch steps (nil when the plan has none).
func (e *Executor) enqueue(plan *Plan, r int, in, out hw.Slice, run *runBuffers, start, end hw.Event, after []hw.Event) error {
	lanes := e.lanes[r][:plan.Lanes]
	cursors, err := plan.Cursors(r)
	if err != nil {
		return err
	}
	job := &RankJob{Plan: plan, Rank: r, Streams: lanes, Cursors: cursors, exec: e, w: e.w, in: in, out: out, tmp: e.tmp[r], run: run}
	if err := e.begin(lanes, start, after); err != nil {
		job.CloseCursors()
		return err
	}
	if err := e.driver.Enqueue(job); err != nil {
		return err
	}
	for l, s := range lanes[1:] {
		ev := e.laneEvents[r][l+1]
		if err := s.Record(ev); err != nil {
			return err
		}
		if err := lanes[0].Wait(ev); err != nil {
			return err
		}
	}
	return lanes[0].Record(end)
}

// begin orders a rank's lanes after the events in after and records start.
func (e *Executor) begin(lanes []hw.Stream, start hw.Event, after []hw.Event) error {
	for _, ev := range after {
		if ev == nil {
			continue // nothing to wait for, as a ready event the caller has none of
		}
		if err := lanes[0].Wait(ev); err != nil {
			return err
		}
	}
	if err := lanes[0].Record(start); err != nil {
		return err
	}
	for _, s := range lanes[1:] {
		if err := s.Wait(start); err != nil {
			return err
		}
	}
	return nil
}
