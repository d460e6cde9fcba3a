package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// clearRendezvousEnv unsets the variables of a multi-process run, ours
// and the launchers', for the test (restoring them after).
func clearRendezvousEnv(t *testing.T) {
	t.Helper()
	keys := []string{cuda.EnvRank, cuda.EnvWorldSize, cuda.EnvAddr, cuda.EnvTimeout, EnvLocalRank, envMasterAddr, envMasterPort}
	for _, l := range launchers {
		keys = append(keys, l.rank, l.size, l.localRank)
	}
	for _, k := range keys {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// stubJoin replaces the join with fn and the local GPU count with gpus for
// the test.
func stubJoin(t *testing.T, gpus int, fn func(ctx context.Context, rdv cuda.Rendezvous, gpu int) (*hw.World, hw.NativeComm, func() error, error)) {
	t.Helper()
	oldJoin, oldGPUs := joinNative, localGPUs
	t.Cleanup(func() { joinNative, localGPUs = oldJoin, oldGPUs })
	joinNative = fn
	localGPUs = func() (int, error) { return gpus, nil }
}

func oneLine(errOut string) bool { return strings.Count(strings.TrimRight(errOut, "\n"), "\n") == 0 }

func TestMultiProcessFlagMisuseIsUsageError(t *testing.T) {
	clearRendezvousEnv(t)
	stubJoin(t, 2, func(context.Context, cuda.Rendezvous, int) (*hw.World, hw.NativeComm, func() error, error) {
		return nil, nil, nil, errors.New("joined a misused run")
	})
	mp := []string{"--backend", "cuda", "--algo", "native", "--nranks", "2", "--rank", "1", "--addr", "node0:29500"}
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		text string
	}{
		"on sim":           {args: []string{"--nranks", "2", "--rank", "0", "--addr", "h:1"}, text: "needs --backend cuda --algo native"},
		"algo auto":        {args: []string{"--backend", "cuda", "--nranks", "2", "--rank", "0", "--addr", "h:1"}, text: "got --backend cuda --algo auto"},
		"algo ring":        {args: []string{"--backend", "cuda", "--algo", "ring", "--nranks", "2", "--rank", "0", "--addr", "h:1"}, text: "needs --backend cuda --algo native"},
		"ranks":            {args: append([]string{"--ranks", "2"}, mp...), text: "do not apply to a multi-process run"},
		"placement":        {args: append([]string{"--placement", "gpu"}, mp...), text: "do not apply"},
		"trace":            {args: append([]string{"--trace", "t.json"}, mp...), text: "do not apply"},
		"timing-only":      {args: append([]string{"--timing-only"}, mp...), text: "do not apply"},
		"nranks 0":         {args: []string{"--nranks", "0"}, text: "--nranks 0 must be at least 1"},
		"negative rank":    {args: []string{"--nranks", "2", "--rank", "-1"}, text: "--rank -1 must not be negative"},
		"rank too big":     {args: []string{"--nranks", "2", "--rank", "2"}, text: "--rank 2 is out of range 0..1 for --nranks 2"},
		"negative gpu":     {args: append([]string{"--gpu", "-1"}, mp...), text: "--gpu -1 must not be negative"},
		"no such gpu":      {args: append([]string{"--gpu", "2"}, mp...), text: "--gpu 2: this host has 2 GPU(s), 0..1"},
		"rank alone":       {args: []string{"--rank", "1"}, text: "--rank, --addr and --gpu are for multi-process runs"},
		"gpu alone":        {args: []string{"--backend", "cuda", "--gpu", "1"}, text: "add --nranks N"},
		"no address":       {args: []string{"--backend", "cuda", "--algo", "native", "--nranks", "2", "--rank", "1"}, text: "--nranks 2 needs --addr, host:port of rank 0 (or COMMSIM_ADDR, or MASTER_ADDR and MASTER_PORT)"},
		"no rank":          {args: []string{"--backend", "cuda", "--algo", "native", "--nranks", "2", "--addr", "h:1"}, text: "--nranks 2 needs this process's --rank (or COMMSIM_RANK)"},
		"env no address":   {args: []string{"--backend", "cuda", "--algo", "native", "--rank", "1"}, env: map[string]string{cuda.EnvWorldSize: "2"}, text: "COMMSIM_ADDR is not set"},
		"bad address":      {args: append(append([]string{}, mp...), "--addr", "node0"), text: `COMMSIM_ADDR="node0": want host:port`},
		"port 0 on rank 1": {args: append(append([]string{}, mp...), "--addr", "node0:0"), text: "port 0 can only be used by rank 0"},
		"port 0 on rank 0": {args: []string{"--backend", "cuda", "--algo", "native", "--nranks", "2", "--rank", "0", "--addr", "node0:0"}, text: "rank 0's address node0:0 (from --addr): port 0 is no port the other processes can dial"},
		"topo of 8":        {args: append([]string{"--topo", "switch:8"}, mp...), text: "--topo switch:8 has 8 GPUs but the cuda backend runs 2 ranks"},
		"env without rank": {env: map[string]string{cuda.EnvWorldSize: "2", cuda.EnvAddr: "h:1"}, text: "COMMSIM_RANK is not set, but COMMSIM_WORLD_SIZE=2 needs it"},
		"env bad size":     {env: map[string]string{cuda.EnvWorldSize: "two"}, text: `COMMSIM_WORLD_SIZE="two" is not an integer`},
		"env bad timeout":  {args: mp, env: map[string]string{cuda.EnvTimeout: "soon"}, text: `COMMSIM_TIMEOUT="soon" is not a duration`},
		"env on sim":       {env: map[string]string{cuda.EnvWorldSize: "4", cuda.EnvRank: "3", cuda.EnvAddr: "h:1"}, text: "a multi-process run (4 ranks, from --nranks or COMMSIM_WORLD_SIZE) needs --backend cuda --algo native"},
	} {
		t.Run(name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			status, out, errOut := commsim(append([]string{"bench", "-e", "8"}, tc.args...)...)
			if status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, tc.text) {
				t.Errorf("status %d, stdout %q, stderr %q; want 2 and one line saying %q", status, out, errOut, tc.text)
			}
		})
	}
}

// Without a driver the multi-process mode is a runtime error, like the
// one-process cuda backend.
func TestMultiProcessWithoutDriverIsRuntimeError(t *testing.T) {
	if cuda.Available() == nil {
		t.Skip("a CUDA GPU is present")
	}
	clearRendezvousEnv(t)
	status, out, errOut := commsim("bench", "--backend", "cuda", "--algo", "native", "--nranks", "2", "--rank", "1", "--addr", "127.0.0.1:1", "-e", "8")
	if status != 1 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, "libcuda.so.1") {
		t.Errorf("status %d, stdout %q, stderr %q", status, out, errOut)
	}
}

// The rendezvous settings come from COMMSIM_* and each flag overrides its
// variable; the GPU defaults to the rank mod the local GPUs.
func TestMultiProcessSettings(t *testing.T) {
	clearRendezvousEnv(t)
	var got cuda.Rendezvous
	var gotGPU int
	stop := errors.New("stopped after the join")
	stubJoin(t, 3, func(_ context.Context, rdv cuda.Rendezvous, gpu int) (*hw.World, hw.NativeComm, func() error, error) {
		got, gotGPU = rdv, gpu
		return nil, nil, nil, stop
	})
	bench := []string{"bench", "--backend", "cuda", "--algo", "native", "-e", "8"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want cuda.Rendezvous
		gpu  int
	}{
		{"environment", map[string]string{cuda.EnvRank: "4", cuda.EnvWorldSize: "6", cuda.EnvAddr: "node0:29500", cuda.EnvTimeout: "7s"}, nil,
			cuda.Rendezvous{Addr: "node0:29500", Rank: 4, Size: 6, Timeout: 7 * time.Second}, 1},
		{"flags", nil, []string{"--nranks", "4", "--rank", "2", "--addr", "10.0.0.1:1234"},
			cuda.Rendezvous{Addr: "10.0.0.1:1234", Rank: 2, Size: 4}, 2},
		{"flags over the environment", map[string]string{cuda.EnvRank: "4", cuda.EnvWorldSize: "6", cuda.EnvAddr: "node0:29500"}, []string{"--rank", "5", "--gpu", "0"},
			cuda.Rendezvous{Addr: "node0:29500", Rank: 5, Size: 6}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearRendezvousEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			status, out, errOut := commsim(append(append([]string{}, bench...), tc.args...)...)
			want := fmt.Sprintf("commsim: rank %d of %d: stopped after the join\n", tc.want.Rank, tc.want.Size)
			if status != 1 || out != "" || errOut != want {
				t.Errorf("status %d, stdout %q, stderr %q; want 1 and %q", status, out, errOut, want)
			}
			if got != tc.want || gotGPU != tc.gpu {
				t.Errorf("joined %+v on GPU %d, want %+v on GPU %d", got, gotGPU, tc.want, tc.gpu)
			}
		})
	}
}

// fakeJob stands for NCCL across the processes of a job: every process
// (a goroutine running the CLI) gets a one-device simulated world and
// this one communicator, whose collectives complete once every rank has
// launched its part; the last one computes the round with hw's arithmetic.
// Before arriving, rank r spends (r+1) µs of modelled compute on its
// stream, so a size's slowest rank takes p µs.
type fakeJob struct {
	ranks int
	// corrupt, when ≥ 0, adds one to the first output element of that
	// rank in every f32 collective.
	corrupt int
	// failFrom, when > 0, fails every collective of that many bytes a
	// rank or more, as NCCL failing mid-sweep.
	failFrom int

	mu      sync.Mutex
	cond    *sync.Cond
	round   int
	arrived int
	calls   []hw.NativeCall
	err     error
	joined  []int // GPUs, by rank
}

func newFakeJob(ranks int) *fakeJob {
	j := &fakeJob{ranks: ranks, corrupt: -1, joined: make([]int, ranks)}
	j.cond = sync.NewCond(&j.mu)
	return j
}

func (j *fakeJob) join(_ context.Context, rdv cuda.Rendezvous, gpu int) (*hw.World, hw.NativeComm, func() error, error) {
	if rdv.Size != j.ranks {
		return nil, nil, nil, fmt.Errorf("joined a job of %d ranks as one of %d", j.ranks, rdv.Size)
	}
	topo, err := topology.Parse("switch:1")
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		return nil, nil, nil, err
	}
	j.mu.Lock()
	j.joined[rdv.Rank] = gpu
	j.mu.Unlock()
	return c.World(), j, c.Close, nil
}

func (j *fakeJob) Ranks() int               { return j.ranks }
func (j *fakeJob) Close() error             { return nil }
func (j *fakeJob) Abort(reason error) error { return reason }

func (j *fakeJob) Launch(calls []hw.NativeCall) error {
	s := calls[0].Stream
	if err := s.(*sim.Stream).Compute(float64(calls[0].Rank+1)*1e-6, "peers"); err != nil {
		return err
	}
	if err := s.Synchronize(); err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	round := j.round
	j.calls = append(j.calls, calls...)
	if j.arrived++; j.arrived < j.ranks {
		for j.round == round {
			j.cond.Wait()
		}
		return j.err
	}
	j.err = j.compute(j.calls)
	if b := calls[0].Send.Bytes(); j.failFrom > 0 && b >= j.failFrom {
		j.err = fmt.Errorf("ncclAllReduce: unhandled system error on %d bytes", b)
	}
	j.calls, j.arrived = nil, 0
	j.round++
	j.cond.Broadcast()
	return j.err
}

// compute runs one round: every input is read before any output is
// written.
func (j *fakeJob) compute(calls []hw.NativeCall) error {
	inputs := map[int][]byte{}
	sent := map[[2]int][]byte{}
	for _, c := range calls {
		if c.Op == hw.NativeRecv {
			continue
		}
		b, err := readBytes(c.Send)
		if err != nil {
			return err
		}
		if c.Op == hw.NativeSend {
			sent[[2]int{c.Rank, c.Peer}] = b
		} else {
			inputs[c.Rank] = b
		}
	}
	type write struct {
		to hw.Slice
		b  []byte
	}
	var writes []write
	for _, c := range calls {
		dt := c.Recv.DType()
		var out []byte
		switch c.Op {
		case hw.NativeAllReduce, hw.NativeReduceScatter:
			n := c.Recv.Len * dt.Size()
			off := 0
			if c.Op == hw.NativeReduceScatter {
				off = c.Rank * n
			}
			out = append([]byte(nil), inputs[0][off:off+n]...)
			op := c.Reduce
			if op == hw.Avg {
				op = hw.Sum
			}
			for q := 1; q < j.ranks; q++ {
				if err := hw.ReduceBytes(op, dt, out, inputs[q][off:off+n]); err != nil {
					return err
				}
			}
			if c.Reduce == hw.Avg {
				if err := hw.DivideBytes(dt, out, j.ranks); err != nil {
					return err
				}
			}
		case hw.NativeAllGather:
			for q := range j.ranks {
				out = append(out, inputs[q]...)
			}
		case hw.NativeBroadcast:
			out = inputs[c.Peer]
		case hw.NativeRecv:
			out = sent[[2]int{c.Peer, c.Rank}]
		default:
			continue
		}
		if c.Rank == j.corrupt && dt == hw.F32 {
			out = append([]byte(nil), out...)
			out[3] ^= 0x40
		}
		writes = append(writes, write{c.Recv, out})
	}
	for _, w := range writes {
		if err := writeBytes(w.to, w.b); err != nil {
			return err
		}
	}
	return nil
}

// benchRanks runs the CLI once per rank, concurrently, as the processes of
// a job, and returns each one's status and outputs.
func benchRanks(t *testing.T, job *fakeJob, args func(rank int) []string) (status []int, stdout, stderr []string) {
	t.Helper()
	stubJoin(t, 2, job.join)
	p := job.ranks
	status, stdout, stderr = make([]int, p), make([]string, p), make([]string, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Go(func() {
			a := []string{"bench", "--backend", "cuda", "--algo", "native", "--nranks", fmt.Sprint(p), "--rank", fmt.Sprint(r), "--addr", "127.0.0.1:29500"}
			status[r], stdout[r], stderr[r] = commsim(append(a, args(r)...)...)
		})
	}
	wg.Wait()
	return status, stdout, stderr
}

// TestMultiProcessSweep runs a whole multi-process sweep with goroutines as
// the processes: only rank 0 reports; each size's time is the slowest
// rank's; --check judges every rank's output against every rank's input
// and adds up the ranks' verdicts.
func TestMultiProcessSweep(t *testing.T) {
	clearRendezvousEnv(t)
	const p = 3
	for _, op := range []string{"allreduce", "allgather", "reducescatter", "broadcast", "sendrecv"} {
		t.Run(op, func(t *testing.T) {
			job := newFakeJob(p)
			args := []string{"--op", op, "-b", "96", "-e", "384", "--check", "--format", "json"}
			switch op { // each flag only where the op uses it: elsewhere it is noted as ignored
			case "broadcast":
				args = append(args, "--root", "2")
			case "allreduce", "reducescatter":
				args = append(args, "--redop", "avg")
			}
			status, stdout, stderr := benchRanks(t, job, func(int) []string { return args })
			for r := range p {
				if status[r] != 0 || stderr[r] != "" || r > 0 && stdout[r] != "" {
					t.Fatalf("rank %d: status %d, stdout %q, stderr %q", r, status[r], stdout[r], stderr[r])
				}
			}
			if fmt.Sprint(job.joined) != "[0 1 0]" {
				t.Errorf("GPUs by rank %v, want rank mod 2", job.joined)
			}
			lines := strings.Split(strings.TrimSpace(stdout[0]), "\n")
			if len(lines) != 3 {
				t.Fatalf("rank 0 wrote %q", stdout[0])
			}
			for _, line := range lines {
				var rec jsonRow
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatal(err)
				}
				if rec.Ranks != p || rec.Algo != "native" || rec.Topology != "cuda" || rec.Op != op {
					t.Errorf("record %s", line)
				}
				// The slowest rank, rank 2, spends 3 µs on every run.
				if math.Abs(rec.TimeUS-p) > 1e-6 || math.Abs(rec.InTimeUS-p) > 1e-6 || rec.AlgBW <= 0 {
					t.Errorf("times %g and %g µs, want the slowest rank's %d µs: %s", rec.TimeUS, rec.InTimeUS, p, line)
				}
				if rec.Wrong == nil || *rec.Wrong != 0 || rec.InWrong == nil || *rec.InWrong != 0 {
					t.Errorf("wrong elements: %s", line)
				}
			}
		})
	}
}

// A wrong element on one rank is counted by that rank and reported by rank
// 0 as the sum; every rank fails.
func TestMultiProcessCheckAddsUpRanks(t *testing.T) {
	clearRendezvousEnv(t)
	job := newFakeJob(2)
	job.corrupt = 1
	status, stdout, stderr := benchRanks(t, job, func(int) []string { return []string{"-b", "8", "-e", "16", "--check"} })
	// Two sizes, out of place and in place: four wrong elements, all rank 1's.
	if status[0] != 1 || !strings.Contains(stdout[0], "# Out of bounds values : 4 FAILED") || stderr[0] != "commsim: --check found 4 wrong elements (see the #wrong columns)\n" {
		t.Errorf("rank 0: status %d, stdout %q, stderr %q", status[0], stdout[0], stderr[0])
	}
	if !strings.Contains(stdout[0], "backend cuda (multi-process, 2 ranks, one GPU per process), algorithm native") {
		t.Errorf("rank 0's header: %q", stdout[0])
	}
	if status[1] != 1 || stdout[1] != "" || stderr[1] != "commsim: rank 1 of 2: --check found 4 wrong elements over all ranks (rank 0 reports them)\n" {
		t.Errorf("rank 1: status %d, stdout %q, stderr %q", status[1], stdout[1], stderr[1])
	}
}

// Ranks started with different sweeps find out at once, before any
// mismatched collective, and every one says so.
func TestMultiProcessRanksMustAgree(t *testing.T) {
	clearRendezvousEnv(t)
	job := newFakeJob(2)
	status, stdout, stderr := benchRanks(t, job, func(r int) []string { return []string{"-e", fmt.Sprint(8 << r)} })
	for r := range 2 {
		if status[r] != 1 || stdout[r] != "" || !oneLine(stderr[r]) || !strings.Contains(stderr[r], fmt.Sprintf("rank %d of 2: ", r)) ||
			!strings.Contains(stderr[r], "the ranks run different sweeps") {
			t.Errorf("rank %d: status %d, stdout %q, stderr %q", r, status[r], stdout[r], stderr[r])
		}
	}
}

// readBytes reads a slice of a buffer.
func readBytes(s hw.Slice) ([]byte, error) {
	size := s.DType().Size()
	all := make([]byte, s.Buf.Len()*size)
	if err := s.Buf.Read(all); err != nil {
		return nil, err
	}
	return all[s.Off*size : (s.Off+s.Len)*size], nil
}

// writeBytes stores little-endian elements into a slice of a buffer,
// leaving the rest of the buffer as it is, as a collective writes its
// output.
func writeBytes(s hw.Slice, raw []byte) error {
	size := s.DType().Size()
	all := make([]byte, s.Buf.Len()*size)
	if err := s.Buf.Read(all); err != nil {
		return err
	}
	copy(all[s.Off*size:], raw)
	return s.Buf.Write(all)
}

// In a multi-process run, rank 0 writes -J's report: a device line per
// process of one GPU each, which calibrate reads back as the job's ranks;
// the other ranks write none.
func TestMultiProcessJSONReport(t *testing.T) {
	clearRendezvousEnv(t)
	const p = 3
	dir := t.TempDir()
	path := func(rank int) string { return filepath.Join(dir, fmt.Sprintf("rank%d.json", rank)) }
	status, _, stderr := benchRanks(t, newFakeJob(p), func(r int) []string { return []string{"-b", "64", "-e", "128", "-J", path(r)} })
	for r := range p {
		_, err := os.Stat(path(r))
		if status[r] != 0 || (r == 0) != (err == nil) {
			t.Fatalf("rank %d: status %d, report %v, stderr %q", r, status[r], err, stderr[r])
		}
	}
	data, err := os.ReadFile(path(0))
	if err != nil {
		t.Fatal(err)
	}
	var rep ncclReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if rep.Config.GPUs != 1 || len(rep.Config.Devices) != p || rep.Config.Devices[0].PID != os.Getpid() || rep.Config.Devices[0].Hostname != host ||
		rep.Config.Devices[2].Rank != 2 || len(rep.Results) != 2 || rep.Commsim.Backend == "" {
		t.Errorf("report: %s", data)
	}
	lg, err := calibrate.ParseLog("rank0.json", data)
	if err != nil || lg.Ranks != p || lg.Op != "allreduce" || len(lg.Samples) != 2 {
		t.Errorf("read back: %+v, %v", lg, err)
	}

	// A run that fails mid-sweep: every rank fails, and rank 0 writes
	// the sizes measured before, in a report left unfinished.
	job := newFakeJob(p)
	job.failFrom = 512
	status, _, stderr = benchRanks(t, job, func(r int) []string { return []string{"-b", "64", "-e", "1K", "-f", "4", "-J", path(r)} })
	data, err = os.ReadFile(path(0))
	if err != nil {
		t.Fatal(err)
	}
	if lg, err := calibrate.ParseLog("rank0.json", data); err != nil || !lg.Partial || lg.Op != "allreduce" || len(lg.Samples) != 2 || lg.Samples[1].Bytes != 256 {
		t.Errorf("partial report: %+v, %v, %s", lg, err, data)
	}
	for r := range p {
		if status[r] != 1 || !strings.Contains(stderr[r], "unhandled system error") {
			t.Errorf("rank %d: status %d, stderr %q", r, status[r], stderr[r])
		}
	}
}
