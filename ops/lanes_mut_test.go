package ops_test

// Tests from a mutation run over how a rank's lanes are waited for: every
// lane, its own failure before one it had for a peer, the first of each.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// laneDevice is a backend whose streams do nothing; its i-th stream's
// Synchronize returns fails[i] (nil past the list), and counts the call.
type laneDevice struct {
	name   string
	fails  []error
	synced []int
}

func (d *laneDevice) Kind() string { return "lanes" }
func (d *laneDevice) Name() string { return d.name }
func (d *laneDevice) Alloc(dt hw.DType, n int) (hw.Buffer, error) {
	return &laneBuffer{dev: d, dt: dt, n: n}, nil
}
func (d *laneDevice) NewStream() (hw.Stream, error) {
	d.synced = append(d.synced, 0)
	return &laneStream{dev: d, i: len(d.synced) - 1}, nil
}
func (d *laneDevice) NewEvent() (hw.Event, error) { return &laneEvent{dev: d}, nil }

type laneBuffer struct {
	dev *laneDevice
	dt  hw.DType
	n   int
}

func (b *laneBuffer) Device() hw.Device  { return b.dev }
func (b *laneBuffer) DType() hw.DType    { return b.dt }
func (b *laneBuffer) Len() int           { return b.n }
func (b *laneBuffer) Phantom() bool      { return true }
func (b *laneBuffer) Write([]byte) error { return hw.ErrPhantom }
func (b *laneBuffer) Read([]byte) error  { return hw.ErrPhantom }
func (b *laneBuffer) Free() error        { return nil }

type laneStream struct {
	dev *laneDevice
	i   int
}

func (s *laneStream) Device() hw.Device                            { return s.dev }
func (s *laneStream) Copy(_, _ hw.Slice) error                     { return nil }
func (s *laneStream) Reduce(hw.ReduceOp, hw.Slice, hw.Slice) error { return nil }
func (s *laneStream) Divide(hw.Slice, int) error                   { return nil }
func (s *laneStream) Send(hw.Slice, hw.Device, uint64) error       { return nil }
func (s *laneStream) Recv(hw.Slice, hw.Device, uint64) error       { return nil }
func (s *laneStream) Record(hw.Event) error                        { return nil }
func (s *laneStream) Wait(hw.Event) error                          { return nil }
func (s *laneStream) Synchronize() error {
	s.dev.synced[s.i]++
	if s.i < len(s.dev.fails) {
		return s.dev.fails[s.i]
	}
	return nil
}

type laneEvent struct{ dev *laneDevice }

func (e *laneEvent) Device() hw.Device                      { return e.dev }
func (e *laneEvent) ElapsedSince(hw.Event) (float64, error) { return 0, nil }

// laneRun is a world of four laneDevices, rank r's lanes failing as
// fails[r] says, a two-lane all-reduce, and each rank's buffer for it.
func laneRun(t *testing.T, fails [][]error) (*hw.World, []*laneDevice, *ops.Plan, []hw.Slice) {
	t.Helper()
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-ring", Ranks: 4, Count: 64, DType: hw.F32, Redop: hw.Sum, Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Lanes != 2 {
		t.Fatalf("the plan has %d lanes, want 2", plan.Lanes)
	}
	devs := make([]*laneDevice, 4)
	hws := make([]hw.Device, 4)
	bufs := make([]hw.Slice, 4)
	for r := range devs {
		devs[r] = &laneDevice{name: fmt.Sprintf("lanes:%d", r), fails: fails[r]}
		hws[r] = devs[r]
		b, _ := devs[r].Alloc(hw.F32, 64)
		bufs[r] = hw.Whole(b)
	}
	w, err := hw.NewWorld(hws)
	if err != nil {
		t.Fatal(err)
	}
	return w, devs, plan, bufs
}

var (
	peerA = fmt.Errorf("peer A: %w", hw.ErrPeerFailed)
	peerB = fmt.Errorf("peer B: %w", hw.ErrPeerFailed)
	ownA  = errors.New("own A")
	ownB  = errors.New("own B")
)

// TestARanksLanesAreAllWaitedFor: Synchronize waits for each of a rank's
// lanes and returns the first of their own failures, else the first of
// those they had for a peer: rank 0's own failure on lane 1 outranks its
// lane 0's for a peer; rank 1's first own failure and rank 2's first for
// a peer are theirs; rank 3's lane 1 fails alone.
func TestARanksLanesAreAllWaitedFor(t *testing.T) {
	w, devs, plan, bufs := laneRun(t, [][]error{{peerA, ownA}, {ownA, ownB}, {peerA, peerB}, {nil, ownB}})
	ex := ops.NewExecutor(w)
	for r := range 4 {
		if _, err := ex.Enqueue(plan, r, bufs[r], bufs[r]); err != nil {
			t.Fatal(err)
		}
	}
	for r, want := range []error{ownA, ownA, peerA, ownB} {
		if err := ex.Synchronize(r); err != want {
			t.Errorf("rank %d: %v, want %v", r, err, want)
		}
		if got := devs[r].synced; len(got) != 2 || got[0] != 1 || got[1] != 1 {
			t.Errorf("rank %d's lanes synchronized %v times, want once each", r, got)
		}
	}
}

// TestARunWaitsForEveryLaneOfEveryRank: Run waits for both lanes of every
// rank and reports each rank's failure, rank 1's on its second lane
// alone, rank 3's for a peer after the others.
func TestARunWaitsForEveryLaneOfEveryRank(t *testing.T) {
	w, devs, plan, bufs := laneRun(t, [][]error{{peerA, ownA}, {nil, ownB}, nil, {peerB}})
	_, err := ops.NewExecutor(w).Run(plan, bufs, bufs)
	const want = "ops: run allreduce/nccl-ring p=4 count=64 f32 sum channels=2 chunk=0 node=0: own A; own B; " +
		"the sender failed before sending: rank(s) 3, whose peers failed before sending to them"
	if fmt.Sprint(err) != want {
		t.Errorf("Run: %v, want %s", err, want)
	}
	for r, d := range devs {
		if got := d.synced; len(got) < 2 || got[0] == 0 || got[1] == 0 {
			t.Errorf("rank %d's lanes synchronized %v times, want each", r, got)
		}
	}
}
