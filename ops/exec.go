package ops

import (
	"errors"
	"fmt"
	"sync"

	"github.com/commsim/commsim/hw"
)

// Executor runs plans on a world: the one executor for every algorithm and
// every backend. It keeps each rank's streams and scratch buffer between
// runs, so a sweep reuses them. An Executor is not safe for concurrent use.
type Executor struct {
	w          *hw.World
	devs       []hw.Device // by rank
	lanes      [][]hw.Stream
	tmp        []hw.Buffer
	starts     []hw.Event // per rank, recorded before its steps
	ends       []hw.Event // per rank, recorded after them
	laneEvents [][]hw.Event
	retired    [][]hw.Buffer // per rank: outgrown scratch, freed after a wait
	// producers make a streamed plan's steps ahead of the simulation;
	// closing stopProducers ends them.
	producers     sync.WaitGroup
	stopProducers chan struct{}
	native        hw.NativeComm // made by the first native plan
	// mirror runs symmetric plans on the world's mirror (see runMirrored).
	mirror       *Executor
	mirroredRuns int
}

// NewExecutor prepares to run plans on w.
func NewExecutor(w *hw.World) *Executor {
	n := w.Size()
	return &Executor{w: w, devs: w.Devices(), lanes: make([][]hw.Stream, n), tmp: make([]hw.Buffer, n),
		starts: make([]hw.Event, n), ends: make([]hw.Event, n), laneEvents: make([][]hw.Event, n), retired: make([][]hw.Buffer, n)}
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
func (e *Executor) Run(plan *Plan, in, out []hw.Slice) (float64, error) {
	if err := e.checkArgs(plan, in, out); err != nil {
		return 0, err
	}
	if t, ok := e.runMirrored(plan); ok {
		return t, nil
	}
	return e.run(plan, in, out)
}

// run is Run after the checks, for ranks 0..len(in)-1: every rank, or
// on a mirror the ranks that stand for all.
func (e *Executor) run(plan *Plan, in, out []hw.Slice) (float64, error) {
	p := len(in)
	starts, ends := e.starts, e.ends
	defer e.stopGenerators()
	for r := range p {
		if err := e.prepare(plan, r); err != nil {
			return 0, err
		}
	}
	if plan.native {
		if err := e.runNative(plan, in, out); err != nil {
			return 0, fmt.Errorf("ops: run %v: %w", plan.Spec, err)
		}
	} else {
		for r := range p {
			if err := e.enqueue(plan, r, in[r], out[r], starts[r], ends[r], nil, true); err != nil {
				return 0, fmt.Errorf("ops: run %v: rank %d: %w", plan.Spec, r, err)
			}
		}
	}
	var errs []error
	deadlock := false
	for r := range p {
		for _, s := range e.lanes[r][:plan.Lanes] {
			err := s.Synchronize()
			if err == nil {
				continue
			}
			// A deadlock report already lists every blocked stream: keep one.
			if errors.Is(err, hw.ErrDeadlock) {
				if deadlock {
					break
				}
				deadlock = true
			}
			errs = append(errs, err)
			break
		}
	}
	for r := range p {
		if err := e.releaseRetired(r); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return 0, fmt.Errorf("ops: run %v: %w", plan.Spec, errors.Join(errs...))
	}
	longest := 0.0
	for r := range p {
		t, err := ends[r].ElapsedSince(starts[r])
		if err != nil {
			return 0, fmt.Errorf("ops: run %v: rank %d timing: %w", plan.Spec, r, err)
		}
		longest = max(longest, t)
	}
	return longest, nil
}

func (e *Executor) checkArgs(plan *Plan, in, out []hw.Slice) error {
	if plan == nil {
		return fmt.Errorf("ops: run: nil plan")
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
// in after have been reached, and returns without waiting. The returned
// event is recorded when the rank's part has finished; the other ranks
// must enqueue their parts too (in the same order of plans) before anyone
// waits. Use it when ranks start a collective at different times, as
// gradient buckets do; Run is Enqueue on every rank plus the wait.
func (e *Executor) Enqueue(plan *Plan, rank int, in, out hw.Slice, after ...hw.Event) (hw.Event, error) {
	_, end, err := e.EnqueueTimed(plan, rank, in, out, after...)
	return end, err
}

// EnqueueTimed is Enqueue that also returns the event recorded when the
// rank's part starts (after the events in after), for timing it.
func (e *Executor) EnqueueTimed(plan *Plan, rank int, in, out hw.Slice, after ...hw.Event) (start, end hw.Event, err error) {
	if plan == nil || plan.Ranks != e.w.Size() {
		return nil, nil, fmt.Errorf("ops: enqueue: plan is nil or not for %d ranks", e.w.Size())
	}
	if plan.native {
		return nil, nil, fmt.Errorf("ops: enqueue %v: %w: the library launches every rank at once; use Run", plan.Spec, ErrUnsupported)
	}
	if err := e.checkRank(plan, rank, in, out); err != nil {
		return nil, nil, err
	}
	if err := e.prepare(plan, rank); err != nil {
		return nil, nil, err
	}
	dev, _ := e.w.Device(rank)
	if start, err = dev.NewEvent(); err != nil {
		return nil, nil, err
	}
	if end, err = dev.NewEvent(); err != nil {
		return nil, nil, err
	}
	if err := e.enqueue(plan, rank, in, out, start, end, after, false); err != nil {
		return nil, nil, fmt.Errorf("ops: enqueue %v: rank %d: %w", plan.Spec, rank, err)
	}
	return start, end, nil
}

// Synchronize waits for everything enqueued on rank's streams.
func (e *Executor) Synchronize(rank int) error {
	if rank < 0 || rank >= len(e.lanes) {
		return fmt.Errorf("ops: synchronize: rank %d not in 0..%d", rank, len(e.lanes)-1)
	}
	for _, s := range e.lanes[rank] {
		if err := s.Synchronize(); err != nil {
			return err
		}
	}
	return e.releaseRetired(rank)
}

// InPlace lays out rank's input and output inside one buffer slice of
// max(InLen, OutLen) elements the way NCCL's in-place calls do (see Run).
func (p *Plan) InPlace(rank int, whole hw.Slice) (in, out hw.Slice) {
	switch {
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

// feedBatch is how many steps a fed stream takes per refill. Few is
// better: with a thousand ranks, every rank's queued ops must stay in cache
// between its turns (64 measured about 20% slower than 4 on a 1024-rank
// ring).
const feedBatch = 4

// genBatch is how many steps a streamed rank's producer hands over at a
// time, and prefetchDepth how many such batches it may make ahead.
const (
	genBatch      = 32
	prefetchDepth = 2
)

// enqueue puts rank r's steps on its lanes, after the events in after,
// between events start and end. With feed, a single-lane plan on a stream
// that is a hw.Feeder is handed over lazily, so the backend holds a few
// steps per rank instead of all of them; only Run may feed, since it owns
// the streams until they drain.
func (e *Executor) enqueue(plan *Plan, r int, in, out hw.Slice, start, end hw.Event, after []hw.Event, feed bool) error {
	lanes := e.lanes[r][:plan.Lanes]
	rs := rankSteps{e: e, plan: plan, r: r, in: in, out: out, redop: plan.Redop}
	if rs.redop == hw.Avg || !plan.Op.Reduces() {
		rs.redop = hw.Sum
	}
	for _, ev := range after {
		if err := lanes[0].Wait(ev); err != nil {
			return err
		}
	}
	if err := lanes[0].Record(start); err != nil {
		return err
	}
	dev, _ := e.w.Device(r)
	for _, s := range lanes[1:] {
		if err := s.Wait(start); err != nil {
			return err
		}
	}
	if f, ok := lanes[0].(hw.Feeder); ok && feed && plan.Lanes == 1 {
		pull := e.puller(plan, r)
		i := 0
		return f.Feed(func() (bool, error) {
			batch, ok, err := pull()
			if err != nil {
				return false, err
			}
			if !ok {
				return false, lanes[0].Record(end)
			}
			for _, st := range batch {
				if err := rs.enqueue(lanes[0], i, st); err != nil {
					return false, err
				}
				i++
			}
			return true, nil
		})
	}
	steps := plan.Rank(r)
	// Record an event after every step that another lane waits for.
	marks := map[int]hw.Event{}
	for _, st := range steps {
		for _, a := range st.After {
			if _, ok := marks[a]; !ok && steps[a].Lane != st.Lane {
				ev, err := dev.NewEvent()
				if err != nil {
					return err
				}
				marks[a] = ev
			}
		}
	}
	for i, st := range steps {
		s := lanes[st.Lane]
		for _, a := range st.After {
			if ev, ok := marks[a]; ok && steps[a].Lane != st.Lane {
				if err := s.Wait(ev); err != nil {
					return err
				}
			}
		}
		fs, err := feedable(st)
		if err == nil {
			err = rs.enqueue(s, i, fs)
		}
		if err != nil {
			return err
		}
		if ev, ok := marks[i]; ok {
			if err := s.Record(ev); err != nil {
				return err
			}
		}
	}
	// Join the lanes on lane 0 before the end event.
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

// puller returns rank r's steps feedBatch at a time: from memory, or, for
// a streamed plan, from a generator that makes them ahead (see prefetch).
func (e *Executor) puller(plan *Plan, r int) func() ([]fedStep, bool, error) {
	var fed []fedStep
	if plan.Streamed() {
		next := e.prefetch(plan, r)
		return func() ([]fedStep, bool, error) {
			if len(fed) == 0 {
				var ok bool
				var err error
				if fed, ok, err = next(); !ok || err != nil {
					return nil, false, err
				}
			}
			batch := fed[:min(feedBatch, len(fed))]
			fed = fed[len(batch):]
			return batch, true, nil
		}
	}
	steps := plan.Steps[r]
	var buf [feedBatch]fedStep
	return func() ([]fedStep, bool, error) {
		if len(steps) == 0 {
			return nil, false, nil
		}
		n := min(feedBatch, len(steps))
		for i, st := range steps[:n] {
			var err error
			if buf[i], err = feedable(st); err != nil {
				return nil, false, err
			}
		}
		steps = steps[n:]
		return buf[:n], true, nil
	}
}

// prefetch runs rank r's generator on a goroutine of its own, which makes
// the next genBatch steps while the previous ones are simulated: with a
// spare core, making steps then costs the simulation nothing. Only the
// order of steps matters to results, and each rank's is fixed, so which
// goroutine runs when cannot change them. The returned function gives the
// batches in order; each is valid until the next call.
func (e *Executor) prefetch(plan *Plan, r int) func() ([]fedStep, bool, error) {
	if e.stopProducers == nil {
		e.stopProducers = make(chan struct{})
	}
	stop := e.stopProducers
	// The consumer reads one buffer, the channel holds prefetchDepth more
	// and the producer fills one: a buffer is refilled only after the
	// consumer has asked for the next, which is when it is done with it.
	ch := make(chan fedBatch, prefetchDepth)
	e.producers.Add(1)
	go func() {
		defer e.producers.Done()
		defer close(ch)
		var bufs [prefetchDepth + 2][]fedStep
		i := 0
		for batch := range plan.rankBatches(r, genBatch) {
			if bufs[i] == nil {
				bufs[i] = make([]fedStep, 0, genBatch)
			}
			fb := fedBatch{steps: bufs[i][:0]}
			for _, st := range batch {
				var fs fedStep
				if fs, fb.err = feedable(st); fb.err != nil {
					break
				}
				fb.steps = append(fb.steps, fs)
			}
			bufs[i], i = fb.steps, (i+1)%len(bufs)
			select {
			case ch <- fb:
				if fb.err != nil {
					return
				}
			case <-stop:
				return
			}
		}
	}()
	return func() ([]fedStep, bool, error) {
		b, ok := <-ch
		return b.steps, ok, b.err
	}
}

// rankSteps enqueues the steps of rank r of plan, resolving their buffer
// references against the rank's in, out and scratch.
type rankSteps struct {
	e       *Executor
	plan    *Plan
	r       int
	in, out hw.Slice
	redop   hw.ReduceOp // the elementwise op: Sum for Avg and for copies
}

func (rs *rankSteps) resolve(ref Ref) hw.Slice {
	switch ref.Buf {
	case In:
		return rs.in.Sub(ref.Off, ref.Len)
	case Out:
		return rs.out.Sub(ref.Off, ref.Len)
	}
	return hw.Slice{Buf: rs.e.tmp[rs.r], Off: ref.Off, Len: ref.Len}
}

// enqueue puts step i, st, on stream s.
func (rs *rankSteps) enqueue(s hw.Stream, i int, st fedStep) error {
	var err error
	switch st.kind {
	case StepSend, StepRecv:
		// The world's Send and Recv would look up s's device for every
		// step; the executor made s on rank r's device.
		if st.peer < 0 || int(st.peer) >= len(rs.e.devs) {
			err = fmt.Errorf("%w: peer rank %d not in world of %d ranks", hw.ErrUnknownPeer, st.peer, len(rs.e.devs))
		} else if st.kind == StepSend {
			err = s.Send(rs.resolve(st.src()), rs.e.devs[st.peer], rs.e.w.Tag(st.tag))
		} else {
			err = s.Recv(rs.resolve(st.dst()), rs.e.devs[st.peer], rs.e.w.Tag(st.tag))
		}
	case StepReduce:
		err = s.Reduce(rs.redop, rs.resolve(st.dst()), rs.resolve(st.src()))
	case StepCopy:
		err = s.Copy(rs.resolve(st.dst()), rs.resolve(st.src()))
	case StepDivide:
		err = s.Divide(rs.resolve(st.dst()), rs.plan.Ranks)
	default:
		err = fmt.Errorf("unknown step kind %v", st.kind)
	}
	if err != nil {
		return fmt.Errorf("step %d (%v): %w", i, st.step(), err)
	}
	return nil
}

// fedBatch is a batch of steps from a producer, or the error that ended it.
type fedBatch struct {
	steps []fedStep
	err   error
}

// stopGenerators ends the producers of a streamed plan's steps, including
// those of ranks whose run failed, and waits until they have returned.
func (e *Executor) stopGenerators() {
	if e.stopProducers != nil {
		close(e.stopProducers)
		e.producers.Wait()
		e.stopProducers = nil
	}
}
