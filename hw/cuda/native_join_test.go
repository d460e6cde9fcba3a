//go:build linux || darwin

package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// fakeNet is the wire between the fake NCCLs of a multi-process job run as
// goroutines: each "process" has its own fakeNCCL (its own handles, group
// depth and transcript) on the shared fake driver, whose memory every
// process can address. ncclGetUniqueId names a job; ncclCommInitRank
// blocks until every rank of the job joined, as NCCL's does; and a
// process's group on the job's communicator blocks until every process
// has launched its part of the round, when the last one computes the whole
// round. Blocking in ncclGroupEnd is stricter than NCCL, which returns once
// the kernels are queued; with the fake driver running work at issue, it
// is what keeps later copies after the collective. wait bounds every wait,
// so a test whose ranks never meet fails instead of hanging.
type fakeNet struct {
	f    *fakeCUDA
	wait time.Duration

	mu   sync.Mutex
	cond *sync.Cond
	ids  uint64
	jobs map[NCCLUniqueID]*fakeJob
}

// fakeJob is one multi-process communicator.
type fakeJob struct {
	nranks  int
	joined  map[int]bool
	round   int
	arrived int
	calls   []fakeNCCLCall
	result  ncclResult
	dead    bool // a process aborted: waits end with ncclRemoteError
}

func newFakeNet(f *fakeCUDA) *fakeNet {
	n := &fakeNet{f: f, wait: 10 * time.Second, jobs: map[NCCLUniqueID]*fakeJob{}}
	n.cond = sync.NewCond(&n.mu)
	return n
}

// process returns one process's NCCL on the net.
func (n *fakeNet) process() *fakeNCCL {
	x := newFakeNCCL(n.f)
	x.net = n
	return x
}

func (n *fakeNet) newID() NCCLUniqueID {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ids++
	var id NCCLUniqueID
	binary.LittleEndian.PutUint64(id[:], n.ids)
	id[127] = 0x5a
	n.jobs[id] = &fakeJob{joined: map[int]bool{}}
	return id
}

// waitFor waits, with the lock held, until ok or the net's wait passes.
func (n *fakeNet) waitFor(ok func() bool) bool {
	timedOut := false
	t := time.AfterFunc(n.wait, func() {
		n.mu.Lock()
		timedOut = true
		n.cond.Broadcast()
		n.mu.Unlock()
	})
	defer t.Stop()
	for !ok() {
		if timedOut {
			return false
		}
		n.cond.Wait()
	}
	return true
}

func (n *fakeNet) join(id NCCLUniqueID, nranks, rank int) (*fakeJob, ncclResult) {
	n.mu.Lock()
	defer n.mu.Unlock()
	job := n.jobs[id]
	switch {
	case job == nil:
		return nil, 4 // no process made this id
	case job.nranks == 0:
		job.nranks = nranks
	case job.nranks != nranks:
		return nil, 4
	}
	if rank < 0 || rank >= nranks || job.joined[rank] {
		return nil, 4
	}
	job.joined[rank] = true
	n.cond.Broadcast()
	if !n.waitFor(func() bool { return len(job.joined) == job.nranks || job.dead }) || job.dead {
		return nil, 6 // ncclRemoteError: the peers never came
	}
	return job, 0
}

// kill ends the waits of the job named by id, as a process's abort does.
func (n *fakeNet) kill(id NCCLUniqueID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if job := n.jobs[id]; job != nil {
		job.dead = true
		n.cond.Broadcast()
	}
}

func (n *fakeNet) submit(job *fakeJob, calls []fakeNCCLCall) ncclResult {
	n.mu.Lock()
	defer n.mu.Unlock()
	round := job.round
	job.calls = append(job.calls, calls...)
	if job.arrived++; job.arrived == job.nranks {
		job.result = runFakeCalls(n.f, job.calls)
		job.calls, job.arrived = nil, 0
		job.round++
		n.cond.Broadcast()
		return job.result
	}
	if !n.waitFor(func() bool { return job.round != round || job.dead }) || job.round == round {
		return 6
	}
	return job.result
}

// loopbackAddr is a free TCP port on the loopback interface.
func loopbackAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// joined is one goroutine-process of a job.
type joined struct {
	w    *hw.World
	dev  *Device
	comm *NativeComm
	x    *fakeNCCL
}

// joinFakes runs p processes as goroutines, each joining with joinNative
// over a loopback rendezvous, rank r on fake GPU r mod 2, with driver d
// (nil: the shared fake).
func joinFakes(t *testing.T, p int, d *driver) []joined {
	t.Helper()
	f, shared := fake()
	if d == nil {
		d = shared
	}
	fn := newFakeNet(f)
	addr := loopbackAddr(t)
	procs := make([]joined, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		x := fn.process()
		procs[r].x = x
		wg.Go(func() {
			rdv := Rendezvous{Addr: addr, Rank: r, Size: p, Timeout: 10 * time.Second}
			w, comm, closeFn, err := joinNative(context.Background(), d, func() (*ncclLib, error) { return x.lib, nil }, rdv, r%2)
			if err != nil {
				errs[r] = err
				return
			}
			t.Cleanup(func() {
				if err := closeFn(); err != nil {
					t.Errorf("rank %d: close: %v", r, err)
				}
			})
			procs[r].w, procs[r].comm = w, comm
			procs[r].dev = w.Devices()[0].(*Device)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return procs
}

// TestJoinNativeEmulated: p processes (goroutines with their own worlds
// and NCCLs) join one communicator over a loopback rendezvous, and every
// native op runs through ops.RunNativeRank, each process launching only
// its rank, out of place and in place.
func TestJoinNativeEmulated(t *testing.T) {
	for _, p := range []int{2, 3, 4} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			procs := joinFakes(t, p, nil)
			for r, pr := range procs {
				if pr.w.Size() != 1 || pr.comm.Ranks() != p || !slices.Equal(pr.comm.LocalRanks(), []int{r}) || pr.dev.GPU() != r%2 {
					t.Fatalf("rank %d: world of %d, communicator of %d ranks holding %v, GPU %d", r, pr.w.Size(), pr.comm.Ranks(), pr.comm.LocalRanks(), pr.dev.GPU())
				}
				if log := pr.x.take(); !slices.Equal(log, []string{fmt.Sprintf("initRankConfig nranks=%d rank=%d blocking=0", p, r)}) {
					t.Errorf("rank %d: transcript %q", r, log)
				}
			}
			const n = 5
			for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.SendRecv} {
				for _, inPlace := range []bool{false, true} {
					spec := ops.Spec{Op: op, Algo: ops.Native, Ranks: p, Count: n, Root: p - 1, DType: hw.I32, Redop: hw.Sum}
					t.Run(fmt.Sprintf("%v/inplace=%v", op, inPlace), func(t *testing.T) {
						runJoined(t, procs, spec, inPlace)
					})
				}
			}
			for r, pr := range procs {
				// One group per run, each holding this rank's calls only.
				for _, line := range pr.x.take() {
					if strings.Contains(line, "rank=") && !strings.Contains(line, fmt.Sprintf("rank=%d ", r)) {
						t.Errorf("process %d issued %q", r, line)
					}
				}
				if got := pr.x.groups.Load(); got != 10 {
					t.Errorf("process %d: %d groups, want 10", r, got)
				}
			}
		})
	}
}

// runJoined runs spec on every process at once and checks the outputs.
func runJoined(t *testing.T, procs []joined, spec ops.Spec, inPlace bool) {
	t.Helper()
	p, n := len(procs), spec.Count
	plan, err := ops.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	inputs := make([][]int32, p)
	in, out := make([]hw.Slice, p), make([]hw.Slice, p)
	for r, pr := range procs {
		inputs[r] = make([]int32, plan.InLen)
		for i := range inputs[r] {
			inputs[r][i] = nativeValue(r, i)
		}
		if inPlace {
			in[r], out[r] = plan.InPlace(r, hw.Whole(alloc(t, pr.dev, hw.I32, max(plan.InLen, plan.OutLen))))
		} else {
			in[r], out[r] = hw.Whole(alloc(t, pr.dev, hw.I32, plan.InLen)), hw.Whole(alloc(t, pr.dev, hw.I32, plan.OutLen))
		}
		writeSliceI32(t, in[r], inputs[r])
	}
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r, pr := range procs {
		wg.Go(func() {
			s, err := pr.dev.NewStream()
			if err == nil {
				_, err = ops.RunNativeRank(pr.comm, s, plan, r, in[r], out[r])
			}
			errs[r] = err
		})
	}
	wg.Wait()
	for r := range p {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		got := readSliceI32(t, out[r])
		want := make([]int32, plan.OutLen)
		for i := range want {
			switch spec.Op {
			case ops.AllReduce:
				for q := range p {
					want[i] += inputs[q][i]
				}
			case ops.ReduceScatter:
				for q := range p {
					want[i] += inputs[q][r*n+i]
				}
			case ops.AllGather:
				want[i] = inputs[i/n][i%n]
			case ops.Broadcast:
				want[i] = inputs[spec.Root][i]
			case ops.SendRecv:
				want[i] = inputs[(r+p-1)%p][i]
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("rank %d: got %v, want %v", r, got, want)
		}
	}
}

// A process launches its own rank only: another rank's call is refused
// before anything is enqueued or reaches NCCL.
func TestJoinNativeLaunchChecks(t *testing.T) {
	procs := joinFakes(t, 2, nil)
	pr := procs[0]
	pr.x.take()
	s := stream(t, pr.dev)
	b := hw.Whole(alloc(t, pr.dev, hw.F32, 4))
	for _, tc := range []struct {
		calls []hw.NativeCall
		text  string
	}{
		{[]hw.NativeCall{{Op: hw.NativeAllReduce, Rank: 1, Stream: s, Send: b, Recv: b, Reduce: hw.Sum}}, "rank 1 is held by another process (this process holds rank 0 of 2)"},
		{[]hw.NativeCall{{Op: hw.NativeAllReduce, Rank: 0, Stream: s, Send: b, Recv: b, Reduce: hw.Sum}, {Op: hw.NativeAllReduce, Rank: 1, Stream: s, Send: b, Recv: b, Reduce: hw.Sum}}, "held by another process"},
		{[]hw.NativeCall{{Op: hw.NativeAllReduce, Rank: 2, Stream: s, Send: b, Recv: b, Reduce: hw.Sum}}, "rank 2 is out of range [0, 2)"},
	} {
		if err := pr.comm.Launch(tc.calls); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%v: %v; want %q", tc.calls, err, tc.text)
		}
	}
	if n := s.(*Stream).enqueued; n != 0 {
		t.Errorf("%d ops enqueued by refused launches", n)
	}
	pr.x.expect(t)
}

// What stops a process from joining is an error naming its rank, before
// the rendezvous where it can be (the others then report it missing).
func TestJoinNativeFailures(t *testing.T) {
	f, d := fake()
	fn := newFakeNet(f)
	lib := func() (*ncclLib, error) { return fn.process().lib, nil }
	ctx := context.Background()
	addr := loopbackAddr(t)
	for _, tc := range []struct {
		name string
		rdv  Rendezvous
		gpu  int
		lib  func() (*ncclLib, error)
		want error
		text string
	}{
		{"bad rendezvous", Rendezvous{Rank: 2, Size: 2, Addr: addr}, 0, lib, hw.ErrBadArgument, "rank 2 of 2: rendezvous: bad argument: rank 2 is out of range"},
		{"negative GPU", Rendezvous{Rank: 0, Size: 1}, -1, lib, hw.ErrBadArgument, "GPU -1"},
		{"no such GPU", Rendezvous{Rank: 1, Size: 2, Addr: addr}, 7, lib, nil, "join native communicator as rank 1 of 2: cuda: new world: rank 0"},
		{"no NCCL", Rendezvous{Rank: 0, Size: 1}, 0, func() (*ncclLib, error) { return nil, ErrNoNCCL }, ErrNoNCCL, "rank 0 of 1"},
		{"rank 0 never comes", Rendezvous{Rank: 1, Size: 2, Addr: addr, Timeout: 100 * time.Millisecond}, 0, lib, context.DeadlineExceeded, "rank 1 could not fetch the id from rank 0"},
	} {
		w, c, closeFn, err := joinNative(ctx, d, tc.lib, tc.rdv, tc.gpu)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) || w != nil || c != nil || closeFn != nil {
			t.Errorf("%s: %v; want %v and %q", tc.name, err, tc.want, tc.text)
		}
	}
	t.Setenv(EnvNCCLTimeout, "soon")
	if _, _, _, err := joinNative(ctx, d, lib, Rendezvous{Rank: 0, Size: 1}, 0); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), EnvNCCLTimeout) {
		t.Errorf("bad %s: %v", EnvNCCLTimeout, err)
	}
}

// A rank that takes the id but never joins leaves the others waiting in
// the join: they give up after the rendezvous timeout instead of hanging,
// aborting the nonblocking join (ncclCommAbort). An NCCL without
// ncclCommInitRankConfig joins with the blocking call, which is left
// running.
func TestJoinNativeInitTimeout(t *testing.T) {
	for _, nonblocking := range []bool{true, false} {
		t.Run(fmt.Sprint("nonblocking=", nonblocking), func(t *testing.T) {
			f, d := fake()
			fn := newFakeNet(f)
			fn.wait = 300 * time.Millisecond
			addr := loopbackAddr(t)
			const timeout = 100 * time.Millisecond
			fetched := make(chan error, 1)
			go func() {
				_, err := Rendezvous{Addr: addr, Rank: 1, Size: 2, Timeout: 5 * time.Second}.Fetch(context.Background(), NCCLUniqueIDBytes)
				fetched <- err
			}()
			x := fn.process()
			want := "ncclCommInitRankConfig(rank 0 of 2) did not finish"
			if !nonblocking {
				x.lib.commInitRankConfig = nil
				want = "ncclCommInitRank(rank 0 of 2) did not return"
			}
			_, _, _, err := joinNative(context.Background(), d, func() (*ncclLib, error) { return x.lib, nil }, Rendezvous{Addr: addr, Rank: 0, Size: 2, Timeout: timeout}, 0)
			if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), want) {
				t.Errorf("init without the peer: %v", err)
			}
			if err := <-fetched; err != nil {
				t.Errorf("rank 1's fetch: %v", err)
			}
			if log := x.take(); nonblocking && (len(log) != 2 || log[1] != "abort rank=0") {
				t.Errorf("transcript %q, want the join and its abort", log)
			}
		})
	}
}

// The watchdog's timeout and Device.Abort both reach a joined
// communicator: with the collective stuck on the "GPU", the process whose
// device is aborted fails with the reason, and the other one at its
// timeout, each aborting its own rank.
func TestJoinNativeAbortAndTimeout(t *testing.T) {
	d, stuck := stuckDriver()
	procs := joinFakes(t, 2, d)
	procs[0].comm.SetTimeout(50 * time.Millisecond)
	procs[1].comm.SetTimeout(0)
	s := []hw.Stream{stream(t, procs[0].dev), stream(t, procs[1].dev)}
	for _, pr := range procs {
		pr.x.take()
	}
	stuck.Store(true)
	defer stuck.Store(false)
	for r, pr := range procs {
		b := hw.Whole(alloc(t, pr.dev, hw.F32, 4))
		if err := pr.comm.Launch([]hw.NativeCall{{Op: hw.NativeAllReduce, Rank: r, Stream: s[r], Send: b, Recv: b, Reduce: hw.Sum}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s[0].Synchronize(); !errors.Is(err, ErrNCCLTimeout) || !strings.Contains(err.Error(), "rank 0 of 2: collective timed out after 50ms") ||
		!strings.Contains(err.Error(), "nccl allreduce sum 4 x f32 (rank 0 of 2)") {
		t.Errorf("rank 0: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s[1].Synchronize() }()
	select {
	case err := <-done:
		t.Fatalf("rank 1 returned %v before its abort", err)
	case <-time.After(30 * time.Millisecond):
	}
	reason := errors.New("operator gave up")
	if err := procs[1].dev.Abort(reason); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, reason) {
			t.Errorf("rank 1 after Device.Abort: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Device.Abort did not end the stuck collective")
	}
	for r, pr := range procs {
		log := pr.x.take()
		if len(log) == 0 || log[len(log)-1] != fmt.Sprintf("abort rank=%d", r) {
			t.Errorf("process %d: transcript %q, want it to end with its abort", r, log)
		}
		if err := pr.comm.Launch(nil); err != nil {
			t.Errorf("process %d: empty launch after the abort: %v", r, err)
		}
	}
}

// One process of a multi-process job: it joins its rank on its GPU and
// runs its part of an allreduce. Every process runs the same code with its
// own COMMSIM_RANK (and the same COMMSIM_WORLD_SIZE and COMMSIM_ADDR).
func ExampleJoinNative() {
	rdv, err := RendezvousFromEnv() // COMMSIM_RANK, COMMSIM_WORLD_SIZE, COMMSIM_ADDR
	if err != nil {
		fmt.Println(err)
		return
	}
	w, comm, closeAll, err := JoinNative(context.Background(), rdv, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer closeAll()
	dev, _ := w.Device(0)
	s, _ := dev.NewStream()
	plan, _ := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: ops.Native, Ranks: comm.Ranks(), Count: 1 << 20, DType: hw.F32, Redop: hw.Sum})
	buf, _ := dev.Alloc(hw.F32, plan.InLen)
	secs, err := ops.RunNativeRank(comm, s, plan, rdv.Rank, hw.Whole(buf), hw.Whole(buf))
	fmt.Println(secs, err)
}
