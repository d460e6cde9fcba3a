package simexec

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
)

// Driver is the simulator's ops.Driver for one cluster: it feeds every
// lane to its stream as the stream drains, and times symmetric plans on
// the cluster's mirror (see the package doc).
type Driver struct {
	c *sim.Cluster
	// mirror runs plans on the cluster's mirror, and folded on the
	// clusters thinned or rotated for a plan's folded channels
	// (timeFolded).
	mirror, folded                                      standIns
	mirroredRuns, thinnedRuns, rotatedRuns, refinedRuns int
	// workload is set on a driver made by Mirror: its cluster is a
	// mirror, and every plan must keep the workload's promise.
	workload *workload
}

var (
	_ ops.Shortcut = (*Driver)(nil)
	_ ops.Pacer    = (*Driver)(nil)
)

// NewDriver returns the driver for c's worlds.
func NewDriver(c *sim.Cluster) *Driver { return &Driver{c: c} }

// NewExecutor returns an executor over c's world, driven by NewDriver(c).
func NewExecutor(c *sim.Cluster) *ops.Executor {
	return ops.NewExecutorWith(c.World(), NewDriver(c))
}

// Cluster is the cluster the driver drives.
func (d *Driver) Cluster() *sim.Cluster { return d.c }

// RunUntilAny implements ops.Pacer: the cluster runs until the first of
// events, each the cluster's, completes (sim.Cluster.RunUntilAny).
func (d *Driver) RunUntilAny(events ...hw.Event) error {
	if d == nil || d.c == nil {
		return fmt.Errorf("simexec: run: %w: a Driver is made by NewDriver of a cluster", hw.ErrBadArgument)
	}
	evs := make([]*sim.Event, len(events))
	for i, ev := range events {
		se, ok := ev.(*sim.Event)
		if !ok {
			return fmt.Errorf("simexec: run: %w: event %d is not the simulator's", hw.ErrBadArgument, i)
		}
		evs[i] = se
	}
	return d.c.RunUntilAny(evs...)
}

// Enqueue implements ops.Driver: each lane becomes a sim.Source fed to its
// stream.
func (d *Driver) Enqueue(job *ops.RankJob) error {
	switch {
	case d == nil || d.c == nil:
		return fmt.Errorf("simexec: enqueue: %w: a Driver is made by NewDriver of a cluster", hw.ErrBadArgument)
	case job == nil || job.Plan == nil || len(job.Cursors) != len(job.Streams):
		return fmt.Errorf("simexec: enqueue: %w: a job is made by ops.Executor (a plan, and a cursor a stream)", hw.ErrBadArgument)
	}
	streams, marks, err := d.prepare(job)
	if err != nil {
		job.CloseCursors()
		return err
	}
	wire := simWire(job.Plan.Wire)
	for l, ss := range streams {
		if err := ss.Feed(newLaneSource(job, job.Cursors[l], marks, wire)); err != nil {
			for _, c := range job.Cursors[l:] {
				c.Close() // the lanes fed before own theirs now
			}
			return err
		}
	}
	return nil
}

// prepare checks job and finds what feeding it needs: its streams as the
// simulator's, and its marks' events.
func (d *Driver) prepare(job *ops.RankJob) ([]*sim.Stream, rankMarks, error) {
	if d.workload != nil {
		if err := d.workload.check(job.Plan); err != nil {
			return nil, nil, err
		}
	}
	streams := make([]*sim.Stream, len(job.Streams))
	for l, s := range job.Streams {
		ss, ok := s.(*sim.Stream)
		if !ok {
			return nil, nil, fmt.Errorf("simexec: rank %d lane %d: %w: the stream is not simulated", job.Rank, l, hw.ErrBadArgument)
		}
		streams[l] = ss
	}
	marks, err := newRankMarks(job)
	return streams, marks, err
}

// simWire is the simulator's form of a plan's wire, or nil.
func simWire(w *ops.Wire) *sim.Wire {
	if w == nil {
		return nil
	}
	sw := sim.Wire{Rate: w.Rate, Slots: w.Slots, SlotBytes: w.SlotBytes}
	for k := range ops.NumPathClasses {
		sw.Latency[k] = sim.FromSeconds(w.Latency[k])
		sw.Reference[k] = sim.FromSeconds(w.Reference[k])
		sw.Efficiency[k] = w.Efficiency[k]
	}
	return &sw
}

// rankMarks are the events of one rank's marks in one run (see
// ops.Operation), made up front: sources run inside the simulation, which
// cannot make events. A lane may reach a Wait before the lane that records
// its event is fed that far, so waits count records (sim.Op.Count) rather
// than take the latest. Indexed by mark (a step's index in its rank's
// program), up to the last: looked up for every wait and record.
type rankMarks []*sim.Event

func newRankMarks(job *ops.RankJob) (rankMarks, error) {
	marks := job.Marks()
	if len(marks) == 0 {
		return nil, nil
	}
	m := make(rankMarks, marks[len(marks)-1]+1)
	for _, mark := range marks {
		ev, err := job.Device().NewEvent()
		if err != nil {
			return nil, err
		}
		m[mark] = ev.(*sim.Event)
	}
	return m, nil
}
