package ops_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// procComm is one native communicator shared by goroutines that stand for
// processes, each holding one rank in a one-device world of its own. As
// with NCCL across processes, a collective completes once every rank has
// launched its part: each Launch waits for the other ranks' launches of
// the same round, and the last to arrive computes the round on the host.
// Before arriving, rank r occupies its stream for delay(r) seconds of
// modelled compute, so the time RunNativeRank measures is known.
type procComm struct {
	ranks int
	fail  error // returned by every Launch when set

	mu      sync.Mutex
	cond    *sync.Cond
	round   int
	arrived int
	calls   []hw.NativeCall
	err     error // of the last round
	rounds  [][]hw.NativeCall
}

func newProcComm(ranks int) *procComm {
	c := &procComm{ranks: ranks}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func delay(r int) float64 { return float64(r+1) * 1e-6 }

func (c *procComm) Ranks() int               { return c.ranks }
func (c *procComm) Close() error             { return nil }
func (c *procComm) Abort(reason error) error { return reason }
func (c *procComm) Launch(calls []hw.NativeCall) error {
	if c.fail != nil {
		return c.fail
	}
	if len(calls) == 0 {
		return nil
	}
	s := calls[0].Stream
	if err := s.(*sim.Stream).Compute(delay(calls[0].Rank), "waiting for the peers"); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	round := c.round
	c.calls = append(c.calls, calls...)
	if c.arrived++; c.arrived < c.ranks {
		for c.round == round {
			c.cond.Wait()
		}
		return c.err
	}
	c.err = simtest.ComputeOnHost(c.ranks, c.calls)
	c.rounds = append(c.rounds, c.calls)
	c.calls, c.arrived = nil, 0
	c.round++
	c.cond.Broadcast()
	return c.err
}

// oneDevice opens a simulated world of one device: one process's share.
func oneDevice() (*sim.Cluster, hw.Device, error) {
	topo, err := topology.Parse("switch:1")
	if err != nil {
		return nil, nil, err
	}
	c, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		return nil, nil, err
	}
	return c, c.Devices()[0], nil
}

// TestRunNativeRankAcrossProcesses runs every native op with p goroutines
// as processes, each calling RunNativeRank for its rank on its own world,
// out of place and in place: the results are the collective's, each rank
// measures its own time, and each launch carries that rank's calls only
// (sendrecv: a send to rank+1 and a receive from rank−1).
func TestRunNativeRankAcrossProcesses(t *testing.T) {
	const p, n = 3, 4
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.SendRecv} {
		for _, inPlace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/inplace=%v", op, inPlace), func(t *testing.T) {
				plan, err := ops.Compile(ops.Spec{Op: op, Algo: ops.Native, Ranks: p, Count: n, Root: 1, DType: hw.I32, Redop: hw.Sum})
				if err != nil {
					t.Fatal(err)
				}
				comm := newProcComm(p)
				inputs := make([][]int32, p)
				for r := range p {
					for i := range plan.InLen {
						inputs[r] = append(inputs[r], int32(100*r+i))
					}
				}
				outs, secs, errs := make([][]int32, p), make([]float64, p), make([]error, p)
				var wg sync.WaitGroup
				for r := range p {
					wg.Go(func() {
						outs[r], secs[r], errs[r] = runRank(comm, plan, r, inputs[r], inPlace, 1)
					})
				}
				wg.Wait()
				for r := range p {
					if errs[r] != nil {
						t.Fatalf("rank %d: %v", r, errs[r])
					}
					if want := expected(plan, inputs, r); fmt.Sprint(outs[r]) != fmt.Sprint(want) {
						t.Errorf("rank %d: got %v, want %v", r, outs[r], want)
					}
					if math.Abs(secs[r]-delay(r)) > 1e-12 {
						t.Errorf("rank %d: %g s, want its own %g s", r, secs[r], delay(r))
					}
				}
				if len(comm.rounds) != 1 {
					t.Fatalf("%d rounds, want 1", len(comm.rounds))
				}
				perRank := map[int][]string{}
				for _, c := range comm.rounds[0] {
					perRank[c.Rank] = append(perRank[c.Rank], fmt.Sprintf("%v peer %d", c.Op, c.Peer))
				}
				for r := range p {
					want := fmt.Sprintf("[%v peer 1]", op)
					if op == ops.SendRecv {
						want = fmt.Sprintf("[send peer %d recv peer %d]", (r+1)%p, (r+p-1)%p)
					}
					if got := fmt.Sprint(perRank[r]); got != want {
						t.Errorf("rank %d launched %s, want %s", r, got, want)
					}
				}
			})
		}
	}
}

// runRank is one process: its own world, buffers and stream, and one
// RunNativeRankBackToBack of runs.
func runRank(comm hw.NativeComm, plan *ops.Plan, r int, input []int32, inPlace bool, runs int) ([]int32, float64, error) {
	c, dev, err := oneDevice()
	if err != nil {
		return nil, 0, err
	}
	defer c.Close()
	s, err := dev.NewStream()
	if err != nil {
		return nil, 0, err
	}
	var in, out hw.Slice
	if inPlace {
		b, err := dev.Alloc(plan.DType, max(plan.InLen, plan.OutLen))
		if err != nil {
			return nil, 0, err
		}
		in, out = plan.InPlace(r, hw.Whole(b))
	} else {
		ib, err := dev.Alloc(plan.DType, plan.InLen)
		if err != nil {
			return nil, 0, err
		}
		ob, err := dev.Alloc(plan.DType, plan.OutLen)
		if err != nil {
			return nil, 0, err
		}
		in, out = hw.Whole(ib), hw.Whole(ob)
	}
	if err := writeSlice(in, input); err != nil {
		return nil, 0, err
	}
	secs, err := ops.RunNativeRankBackToBack(comm, s, plan, r, in, out, runs)
	if err != nil {
		return nil, 0, err
	}
	got, err := readSlice(out)
	return got, secs, err
}

// RunNativeRankBackToBack launches the rank's call runs times before it
// waits, each a round of the communicator, and returns the mean time of a
// run: here each rank's own delay, which every run takes again.
func TestRunNativeRankBackToBack(t *testing.T) {
	const p, runs = 3, 4
	plan, err := ops.Compile(ops.Spec{Op: ops.Broadcast, Algo: ops.Native, Ranks: p, Count: 4, Root: 2, DType: hw.I32})
	if err != nil {
		t.Fatal(err)
	}
	comm := newProcComm(p)
	inputs := [][]int32{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}
	outs, secs, errs := make([][]int32, p), make([]float64, p), make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Go(func() { outs[r], secs[r], errs[r] = runRank(comm, plan, r, inputs[r], false, runs) })
	}
	wg.Wait()
	for r := range p {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if fmt.Sprint(outs[r]) != fmt.Sprint(inputs[2]) || math.Abs(secs[r]-delay(r)) > 1e-12 {
			t.Errorf("rank %d: %v in %g s a run, want %v in %g s", r, outs[r], secs[r], inputs[2], delay(r))
		}
	}
	if len(comm.rounds) != runs {
		t.Errorf("%d rounds, want %d", len(comm.rounds), runs)
	}
}

// Everything RunNativeRank refuses is refused before the launch.
func TestRunNativeRankRefusals(t *testing.T) {
	native, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: ops.Native, Ranks: 2, Count: 4, DType: hw.I32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	ring, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 2, Count: 4, DType: hw.I32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	c, dev, err := oneDevice()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	other, otherDev, err := oneDevice()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s, _ := dev.NewStream()
	buf := func(d hw.Device, dt hw.DType, n int) hw.Slice {
		b, err := d.Alloc(dt, n)
		if err != nil {
			t.Fatal(err)
		}
		return hw.Whole(b)
	}
	in, out := buf(dev, hw.I32, 4), buf(dev, hw.I32, 4)
	wide := buf(dev, hw.I32, 8)
	comm := newProcComm(2)
	for _, tc := range []struct {
		name    string
		comm    hw.NativeComm
		plan    *ops.Plan
		rank    int
		in, out hw.Slice
		want    error
		text    string
	}{
		{"not native", comm, ring, 0, in, out, ops.ErrUnsupported, "RunNativeRank takes algorithm native plans"},
		{"nil plan", comm, nil, 0, in, out, nil, "nil plan"},
		{"nil comm", nil, native, 0, in, out, hw.ErrBadArgument, "nil communicator"},
		{"ranks differ", newProcComm(3), native, 0, in, out, hw.ErrBadArgument, "plan is for 2 ranks, the communicator has 3"},
		{"rank out of range", comm, native, 2, in, out, hw.ErrBadArgument, "rank 2 is out of range [0, 2)"},
		{"dtype", comm, native, 0, buf(dev, hw.F32, 4), out, hw.ErrDTypeMismatch, "rank 0 input"},
		{"length", comm, native, 1, in, buf(dev, hw.I32, 5), hw.ErrSizeMismatch, "rank 1 output: size mismatch: 5 elements, plan needs 4"},
		{"another device", comm, native, 0, buf(otherDev, hw.I32, 4), out, nil, "rank 0 input"},
		{"overlap", comm, native, 0, wide.Sub(0, 4), wide.Sub(2, 4), hw.ErrBadArgument, "not in place"},
	} {
		_, err := ops.RunNativeRank(tc.comm, s, tc.plan, tc.rank, tc.in, tc.out)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v; want %v and %q", tc.name, err, tc.want, tc.text)
		}
	}
	if comm.arrived != 0 || len(comm.rounds) != 0 {
		t.Errorf("a refused run reached the communicator")
	}
	if _, err := ops.RunNativeRank(comm, nil, native, 0, in, out); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("nil stream: %v", err)
	}
	if _, err := ops.RunNativeRankBackToBack(comm, s, native, 0, in, out, 0); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "0 runs") || comm.arrived != 0 {
		t.Errorf("0 runs: %v", err)
	}
	boom := errors.New("library says no")
	if _, err := ops.RunNativeRank(&procComm{ranks: 2, fail: boom}, s, native, 1, in, out); !errors.Is(err, boom) || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("failing launch: %v", err)
	}
}
