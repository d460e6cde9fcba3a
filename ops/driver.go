package ops

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

// Driver puts a rank's operations on its streams for an Executor: the one
// place where a plan meets a backend. Run, Enqueue, and so paramsync and
// ops/comm, reach the backend only through it.
//
// The generic driver (NewExecutor's) drains every cursor at once through
// the hw API, which suits real devices: their queues hold the work anyway.
// Package simexec's driver hands the simulator lanes that it pulls as
// they drain, so plans of millions of steps run in memory that grows with
// the ranks, and it times symmetric plans from a few ranks (Shortcut).
type Driver interface {
	// Enqueue puts job's operations on job's streams, lane l's on
	// Streams[l], after the work already there and before any enqueued
	// later; it may defer the work, as long as the streams run it in that
	// place. It owns job's cursors and closes each, drained or not.
	Enqueue(job *RankJob) error
}

// Shortcut is an optional interface of a Driver that can time a whole run
// without running every rank. Without it, Run runs every rank.
type Shortcut interface {
	// TimeRun returns the seconds that RunBackToBack of plan on w, runs
	// times, would return, and true, when the driver can promise them
	// without running every rank; false otherwise, or when its own
	// attempt failed (RunBackToBack then runs every rank and reports what
	// happens). It is only asked after the plan and its buffers were
	// checked.
	TimeRun(w *hw.World, plan *Plan, runs int) (seconds float64, ok bool)
}

// Pacer is an optional interface of a Driver that can carry out the work
// enqueued so far until the first of some events completes, and stop
// there: RunBackToBack then enqueues long series of runs a window at a
// time, standing, before each run, where the first rank ended the run a
// window before, so that what it holds stays bounded whatever the runs.
// Each rank's next run waits for its last, which no rank had ended by
// then, so nothing starts or ends at another time than had every run been
// enqueued at the outset.
type Pacer interface {
	RunUntilAny(events ...hw.Event) error
}

// RankJob is one rank's part of a run, as an Executor hands it to a
// Driver: the rank's lanes of operations and the streams they go on, and
// how the operations' references resolve on the rank.
type RankJob struct {
	Plan    *Plan
	Rank    int
	Streams []hw.Stream // one per lane, on the rank's device
	Cursors []*Cursor   // the operations of each lane

	exec    *Executor
	w       *hw.World // whose tags the job's messages carry, as when it was made
	in, out hw.Slice
	// tmp is the scratch the rank had when the job was enqueued: a later
	// plan may replace the executor's (another element type, more room)
	// before a driver that feeds operations lazily, as the simulator's,
	// resolves this job's.
	tmp hw.Buffer
	run *runBuffers // every rank's buffers in this run, for switch steps
}

// made refuses a RankJob that no Executor handed to its Driver: it has no
// world to resolve peers, tags or buffers in.
func (j *RankJob) made() error {
	if j == nil || j.exec == nil {
		return notMade("RankJob", "an Executor, which hands them to its Driver")
	}
	return nil
}

// Marks lists the marks of the rank's operations that other lanes await
// (see Operation), in order: those a driver must record.
func (j *RankJob) Marks() []int {
	if j == nil || len(j.Cursors) == 0 || j.Cursors[0] == nil {
		return nil
	}
	var marks []int
	for i, m := range j.Cursors[0].marked {
		if m {
			marks = append(marks, i)
		}
	}
	return marks
}

// Device is the rank's device; nil for a RankJob no Executor made.
func (j *RankJob) Device() hw.Device {
	if j == nil {
		return nil
	}
	d, _ := j.Peer(j.Rank)
	return d
}

// Slice resolves a reference to the rank's memory: its input, its output
// or the executor's scratch; the empty slice, which no stream accepts,
// for a RankJob no Executor made.
func (j *RankJob) Slice(ref Ref) hw.Slice {
	if j == nil {
		return hw.Slice{}
	}
	switch ref.Buf {
	case In:
		return j.in.Sub(ref.Off, ref.Len)
	case Out:
		return j.out.Sub(ref.Off, ref.Len)
	}
	return hw.Slice{Buf: j.tmp, Off: ref.Off, Len: ref.Len}
}

// Peer is the device of rank q.
func (j *RankJob) Peer(q int) (hw.Device, error) {
	if err := j.made(); err != nil {
		return nil, err
	}
	if q < 0 || q >= len(j.exec.devs) {
		return nil, fmt.Errorf("%w: peer rank %d not in world of %d ranks", hw.ErrUnknownPeer, q, len(j.exec.devs))
	}
	return j.exec.devs[q], nil
}

// Tag is what streams see for a plan's tag: the world's namespace of it;
// 0 for a RankJob no Executor made, which has no world.
func (j *RankJob) Tag(tag uint32) uint64 {
	if j.made() != nil {
		return 0
	}
	return j.w.Tag(tag)
}

// ReduceOp is the elementwise op of the plan's reduce steps: its reduce
// op, or Sum for Avg (whose division is a step of its own) and for a job
// without a plan.
func (j *RankJob) ReduceOp() hw.ReduceOp {
	if j == nil || j.Plan == nil || j.Plan.Redop == hw.Avg || !j.Plan.Op.Reduces() {
		return hw.Sum
	}
	return j.Plan.Redop
}

// Enqueue puts op (not its marks: see Operation) on s through the hw API,
// as the generic driver does.
func (j *RankJob) Enqueue(s hw.Stream, op *Operation) error {
	if err := j.made(); err != nil {
		return err
	}
	switch {
	case s == nil:
		return fmt.Errorf("ops: enqueue: %w: nil stream", hw.ErrBadArgument)
	case op == nil:
		return fmt.Errorf("ops: enqueue: %w: nil operation", hw.ErrBadArgument)
	case j.Plan == nil:
		return fmt.Errorf("ops: enqueue: %w: nil plan", ErrBadPlan)
	}
	var err error
	switch op.Kind {
	case StepSend, StepRecv:
		var peer hw.Device
		if peer, err = j.Peer(op.Peer); err != nil {
			break
		}
		if op.Kind == StepSend {
			err = s.Send(j.Slice(op.Src), peer, j.Tag(op.Tag))
		} else {
			err = s.Recv(j.Slice(op.Dst), peer, j.Tag(op.Tag))
		}
	case StepReduce:
		err = s.Reduce(j.ReduceOp(), j.Slice(op.Dst), j.Slice(op.Src))
	case StepCopy:
		err = s.Copy(j.Slice(op.Dst), j.Slice(op.Src))
	case StepDivide:
		err = s.Divide(j.Slice(op.Dst), j.Plan.Ranks)
	case StepSwitchReduce, StepMulticast, StepNetAllReduce, StepNetAllGather, StepNetReduceScatter:
		err = fmt.Errorf("%w: %w", ErrUnsupported, errSwitchOnly)
	default:
		err = fmt.Errorf("%w: unknown step kind %v", ErrBadPlan, op.Kind)
	}
	if err != nil {
		return j.Errorf(op, err)
	}
	return nil
}

// Errorf wraps err with where op is: its step, and its lane when the plan
// has several.
func (j *RankJob) Errorf(op *Operation, err error) error {
	if op == nil {
		return err
	}
	if j == nil || j.Plan == nil || j.Plan.Lanes == 1 {
		return fmt.Errorf("step %d (%v): %w", op.Index, op, err)
	}
	return fmt.Errorf("lane %d step %d (%v): %w", op.Lane, op.Index, op, err)
}

// CloseCursors closes every cursor of the job: what a driver that gives
// up on a job does.
func (j *RankJob) CloseCursors() {
	if j == nil {
		return
	}
	for _, c := range j.Cursors {
		c.Close()
	}
}

// genericDriver enqueues every operation at once through hw. It drains
// the lanes in turn, leaving a lane when its next operation awaits a mark
// not yet enqueued and coming back to it later: hw's Wait waits for the
// latest Record enqueued before it, so every mark's Record must be
// enqueued before the Waits for it. After lists point backwards, so some
// lane can always go on.
type genericDriver struct{}

func (genericDriver) Enqueue(j *RankJob) error {
	defer j.CloseCursors()
	lanes := newLaneReaders(j.Cursors)
	var marks map[int]hw.Event
	for left := len(lanes); left > 0; {
		progress := false
		left = 0
		for l := range lanes {
			lane, s := &lanes[l], j.Streams[l]
			op := lane.peek()
			for ; op != nil && marked(marks, op.Awaits); op = lane.peek() {
				for _, m := range op.Awaits {
					if err := s.Wait(marks[m]); err != nil {
						return j.Errorf(op, err)
					}
				}
				if err := j.Enqueue(s, op); err != nil {
					return err
				}
				if op.Signals {
					ev, err := j.Device().NewEvent()
					if err == nil {
						err = s.Record(ev)
					}
					if err != nil {
						return j.Errorf(op, err)
					}
					if marks == nil {
						marks = map[int]hw.Event{}
					}
					marks[op.Mark] = ev
				}
				lane.advance()
				progress = true
			}
			if op != nil {
				left++
			}
		}
		if left > 0 && !progress {
			return fmt.Errorf("%w: rank %d's lanes await each other", ErrBadPlan, j.Rank)
		}
	}
	return nil
}

// marked reports whether every mark in awaits has been recorded.
func marked(marks map[int]hw.Event, awaits []int) bool {
	for _, m := range awaits {
		if _, ok := marks[m]; !ok {
			return false
		}
	}
	return true
}
