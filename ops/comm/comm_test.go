package comm_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/comm"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

func newComm(t *testing.T, spec string, cfg comm.Config) (*comm.Comm, []*sim.Device) {
	t.Helper()
	topo, err := topology.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := comm.New(c.World(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cm, c.Devices()
}

// TestRanksCallFromTheirOwnGoroutines is the NCCL usage pattern: one
// goroutine per rank, each calling the collective on its own buffers.
func TestRanksCallFromTheirOwnGoroutines(t *testing.T) {
	cm, devs := newComm(t, "switch:4", comm.Config{})
	var wg sync.WaitGroup
	results := make([][]int32, len(devs))
	for r, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf, _ := d.Alloc(hw.I32, 3)
			buf.Write(hw.Encode([]int32{int32(r), 10 * int32(r), 1}))
			for range 2 { // two slots in a row
				if _, err := cm.Do(r, comm.Call{Op: ops.AllReduce, Count: 3, DType: hw.I32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf)); err != nil {
					t.Error(err)
					return
				}
			}
			raw := make([]byte, 12)
			buf.Read(raw)
			results[r], _ = hw.Decode[int32](raw)
		}()
	}
	wg.Wait()
	// Twice in place: sums of sums. 0+1+2+3 = 6, then 4 × 6 = 24.
	for r, got := range results {
		if want := []int32{24, 240, 16}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("rank %d = %v, want %v", r, got, want)
		}
	}
}

func TestMismatchNamesRanksAndRequests(t *testing.T) {
	cm, devs := newComm(t, "switch:4", comm.Config{})
	var wg sync.WaitGroup
	errs := make([]error, len(devs))
	for r, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			count := 8
			if r == 2 {
				count = 7 // the bug being caught
			}
			buf, _ := d.Alloc(hw.F32, count)
			_, errs[r] = cm.Do(r, comm.Call{Op: ops.AllReduce, Count: count, DType: hw.F32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf))
		}()
	}
	wg.Wait()
	for r, err := range errs {
		var m *comm.MismatchError
		if !errors.As(err, &m) {
			t.Fatalf("rank %d: %v, want a MismatchError", r, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, "ranks 0, 1, 3 asked for allreduce count=8 f32 sum") || !strings.Contains(msg, "rank 2 asked for allreduce count=7") {
			t.Fatalf("rank %d: %q", r, msg)
		}
	}
}

func TestMissingRankTimesOutInsteadOfHanging(t *testing.T) {
	cm, devs := newComm(t, "switch:3", comm.Config{Timeout: 50 * time.Millisecond})
	var wg sync.WaitGroup
	errs := make([]error, len(devs))
	for r, d := range devs[:2] { // rank 2 never calls
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf, _ := d.Alloc(hw.F32, 4)
			_, errs[r] = cm.Do(r, comm.Call{Op: ops.Broadcast, Count: 4, DType: hw.F32, Root: 1}, hw.Whole(buf), hw.Whole(buf))
		}()
	}
	wg.Wait()
	for r, err := range errs[:2] {
		var to *comm.TimeoutError
		if !errors.As(err, &to) || !strings.Contains(err.Error(), "rank 2 never called") || !strings.Contains(err.Error(), "ranks 0, 1 asked for broadcast count=4 f32 root=1") {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	// The late rank gets the same verdict, not a fresh slot.
	buf, _ := devs[2].Alloc(hw.F32, 4)
	if _, err := cm.Do(2, comm.Call{Op: ops.Broadcast, Count: 4, DType: hw.F32, Root: 1}, hw.Whole(buf), hw.Whole(buf)); err == nil {
		t.Fatal("late rank ran a collective the others gave up on")
	}
}

func TestClosedCommRefusesCalls(t *testing.T) {
	cm, devs := newComm(t, "switch:2", comm.Config{})
	if err := cm.Close(); err != nil {
		t.Fatal(err)
	}
	buf, _ := devs[0].Alloc(hw.F32, 1)
	if _, err := cm.Do(0, comm.Call{Op: ops.AllReduce, Count: 1, DType: hw.F32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf)); !errors.Is(err, comm.ErrClosed) {
		t.Fatalf("Do after Close: %v", err)
	}
	if _, err := cm.Do(7, comm.Call{}, hw.Slice{}, hw.Slice{}); err == nil {
		t.Fatal("Do with a bad rank succeeded")
	}
}

// TestNewRefusesUnknownAlgorithms: a communicator whose default algorithm
// does not exist is refused when made, naming the ones that do, not at
// its first collective.
func TestNewRefusesUnknownAlgorithms(t *testing.T) {
	topo, err := topology.Parse("switch:4")
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for algo, want := range map[string]string{
		"rign": `comm: unknown algorithm "rign" (want auto, native or one of ring, rd, rhd, tree, dbtree, direct, pairwise`,
		"auto": "comm: algorithm auto needs Config.Cost",
	} {
		cm, err := comm.New(c.World(), comm.Config{Algo: algo})
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("New with %q = %v, %v; want an error starting %s", algo, cm, err, want)
		}
	}
	for _, algo := range append(ops.Algorithms(), "", ops.Native) {
		if _, err := comm.New(c.World(), comm.Config{Algo: algo}); err != nil {
			t.Errorf("New with %q: %v", algo, err)
		}
	}
}
