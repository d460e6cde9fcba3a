package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda"
)

// commsimEnv runs the CLI in-process, as run does, with env as its whole
// environment: goroutines can then be processes with variables of their
// own.
func commsimEnv(env map[string]string, args ...string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	root := newRoot(&out, &errOut)
	root.SetArgs(args)
	lookup := envLookup(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err := root.ExecuteContext(withEnv(context.Background(), lookup)); err != nil {
		fmt.Fprintf(&errOut, "commsim: %v\n", err)
		status = 1
		var ue usageError
		if errors.As(err, &ue) {
			status = 2
		}
	}
	return status, out.String(), errOut.String()
}

var nativeBench = []string{"bench", "--backend", "cuda", "--algo", "native", "-e", "8"}

// Each setting comes from its flag, then COMMSIM_*, then torchrun's, Open
// MPI's or Slurm's variables, in that order; a launcher's local rank picks
// the GPU modulo the host's.
func TestLauncherSettings(t *testing.T) {
	clearRendezvousEnv(t)
	var got cuda.Rendezvous
	var gotGPU int
	stop := errors.New("stopped after the join")
	stubJoin(t, 3, func(_ context.Context, rdv cuda.Rendezvous, gpu int) (*hw.World, hw.NativeComm, func() error, error) {
		got, gotGPU = rdv, gpu
		return nil, nil, nil, stop
	})
	torchrun := map[string]string{"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
	ompi := map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "5", cuda.EnvAddr: "10.0.0.1:7000"}
	slurm := map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "MASTER_ADDR": "node9", "MASTER_PORT": "1234"}
	merge := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want cuda.Rendezvous
		gpu  int
	}{
		{"torchrun", torchrun, nil, cuda.Rendezvous{Addr: "node0:29500", Rank: 2, Size: 4}, 1},
		{"Open MPI, local rank modulo 3 GPUs", ompi, nil, cuda.Rendezvous{Addr: "10.0.0.1:7000", Rank: 3, Size: 8}, 2},
		{"Slurm", slurm, nil, cuda.Rendezvous{Addr: "node9:1234", Rank: 1, Size: 2}, 0},
		{"torchrun before Open MPI before Slurm", merge(slurm, ompi, torchrun), nil, cuda.Rendezvous{Addr: "10.0.0.1:7000", Rank: 2, Size: 4}, 1},
		{"Open MPI before Slurm", merge(slurm, ompi), nil, cuda.Rendezvous{Addr: "10.0.0.1:7000", Rank: 3, Size: 8}, 2},
		{"COMMSIM_* before the launcher", merge(torchrun, map[string]string{cuda.EnvRank: "0", cuda.EnvAddr: "h:1", EnvLocalRank: "2"}), nil,
			cuda.Rendezvous{Addr: "h:1", Rank: 0, Size: 4}, 2},
		{"flags before COMMSIM_*", merge(torchrun, map[string]string{cuda.EnvRank: "0"}), []string{"--rank", "3", "--gpu", "0", "--addr", "h:2", "--nranks", "5"},
			cuda.Rendezvous{Addr: "h:2", Rank: 3, Size: 5}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, gotGPU = cuda.Rendezvous{}, -1
			status, out, errOut := commsimEnv(tc.env, append(append([]string{}, nativeBench...), tc.args...)...)
			want := fmt.Sprintf("commsim: rank %d of %d: stopped after the join\n", tc.want.Rank, tc.want.Size)
			if status != 1 || out != "" || errOut != want {
				t.Errorf("status %d, stdout %q, stderr %q; want 1 and %q", status, out, errOut, want)
			}
			if got != tc.want || gotGPU != tc.gpu {
				t.Errorf("joined %+v on GPU %d, want %+v on GPU %d", got, gotGPU, tc.want, tc.gpu)
			}
		})
	}

	// A launcher's variables are for the native bench only: a sweep on
	// the simulator inside a Slurm job stays a sweep.
	if status, out, errOut := commsimEnv(slurm, "bench", "--topo", "switch:2", "-e", "8"); status != 0 || !strings.Contains(out, "backend sim") {
		t.Errorf("sim bench under Slurm: status %d, stderr %q", status, errOut)
	}
}

// Wrong or missing launcher settings are usage errors that name the
// variable and the launcher.
func TestLauncherSettingErrors(t *testing.T) {
	clearRendezvousEnv(t)
	stubJoin(t, 2, func(context.Context, cuda.Rendezvous, int) (*hw.World, hw.NativeComm, func() error, error) {
		return nil, nil, nil, errors.New("joined a misconfigured run")
	})
	for _, tc := range []struct {
		env  map[string]string
		text string
	}{
		{map[string]string{"RANK": "1", "WORLD_SIZE": "4"},
			"a world of 4 ranks (from WORLD_SIZE (torchrun)) needs rank 0's address: give --addr host:port, COMMSIM_ADDR, or MASTER_ADDR and MASTER_PORT"},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}, "(from OMPI_COMM_WORLD_SIZE (Open MPI)) needs rank 0's address"},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "node0"}, "MASTER_ADDR=node0 is set but MASTER_PORT is not"},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "4", "MASTER_PORT": "29500"}, "MASTER_PORT=29500 is set but MASTER_ADDR is not"},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "node0", "MASTER_PORT": "http"}, `MASTER_PORT="http" is not a port number`},
		{map[string]string{"RANK": "one", "WORLD_SIZE": "4"}, `RANK="one" (torchrun) is not a non-negative integer`},
		{map[string]string{"SLURM_PROCID": "4", "SLURM_NTASKS": "4", cuda.EnvAddr: "h:1"}, "rank 4 (from SLURM_PROCID (Slurm)) is out of range 0..3 for a world of 4 ranks (from SLURM_NTASKS (Slurm))"},
		{map[string]string{"WORLD_SIZE": "4", cuda.EnvAddr: "h:1"}, "a world of 4 ranks (from WORLD_SIZE (torchrun)) needs this process's rank"},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "4", cuda.EnvAddr: "h:1", EnvLocalRank: "7"}, "COMMSIM_LOCAL_RANK=7: this host has 2 GPU(s), 0..1"},
		{map[string]string{"RANK": "1", "WORLD_SIZE": "4", cuda.EnvAddr: "h:1", EnvLocalRank: "x"}, `COMMSIM_LOCAL_RANK="x" is not a non-negative integer`},
	} {
		status, out, errOut := commsimEnv(tc.env, nativeBench...)
		if status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, tc.text) {
			t.Errorf("%v: status %d, stderr %q; want 2 and %q", tc.env, status, errOut, tc.text)
		}
	}
}

// joinOverLoopback is job's join behind a real rendezvous over loopback:
// every process meets rank 0 at its address with its world size, as
// cuda.JoinNative does before NCCL.
func (j *fakeJob) joinOverLoopback(ctx context.Context, rdv cuda.Rendezvous, gpu int) (*hw.World, hw.NativeComm, func() error, error) {
	id := bytes.Repeat([]byte{0x5a}, cuda.NCCLUniqueIDBytes)
	if _, err := rdv.Exchange(ctx, cuda.NCCLUniqueIDBytes, func() ([]byte, error) { return id, nil }); err != nil {
		return nil, nil, nil, err
	}
	return j.join(ctx, rdv, gpu)
}

// launchProcs runs the CLI once per rank, concurrently, each with the
// environment env(rank) gives it, as a launcher starts a job's processes.
func launchProcs(t *testing.T, n int, join func(context.Context, cuda.Rendezvous, int) (*hw.World, hw.NativeComm, func() error, error),
	env func(rank int) map[string]string, args ...string) (status []int, stdout, stderr []string) {
	t.Helper()
	stubJoin(t, 2, join)
	status, stdout, stderr = make([]int, n), make([]string, n), make([]string, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			status[r], stdout[r], stderr[r] = commsimEnv(env(r), append([]string{"bench", "--backend", "cuda", "--algo", "native"}, args...)...)
		})
	}
	wg.Wait()
	return status, stdout, stderr
}

// Each launcher's variables in turn start a whole job: goroutines as the
// processes, meeting over a loopback rendezvous, one GPU each by local
// rank.
func TestLauncherJobsOverLoopback(t *testing.T) {
	clearRendezvousEnv(t)
	const p = 3
	for _, l := range launchers {
		t.Run(l.name, func(t *testing.T) {
			host, port, _ := strings.Cut(loopbackAddr(t), ":")
			env := func(r int) map[string]string {
				e := map[string]string{l.rank: fmt.Sprint(r), l.size: fmt.Sprint(p), l.localRank: fmt.Sprint(p - 1 - r), cuda.EnvTimeout: "20s"}
				if l.name == "Open MPI" {
					e[cuda.EnvAddr] = host + ":" + port // mpirun has no address of its own
				} else {
					e[envMasterAddr], e[envMasterPort] = host, port
				}
				return e
			}
			job := newFakeJob(p)
			status, stdout, stderr := launchProcs(t, p, job.joinOverLoopback, env, "-b", "8", "-e", "64", "--check", "--format", "json")
			for r := range p {
				if status[r] != 0 || stderr[r] != "" || r > 0 && stdout[r] != "" {
					t.Fatalf("rank %d: status %d, stdout %q, stderr %q", r, status[r], stdout[r], stderr[r])
				}
			}
			if lines := strings.Count(stdout[0], "\n"); lines != 4 || !strings.Contains(stdout[0], `"wrong":0`) {
				t.Errorf("rank 0's report: %q", stdout[0])
			}
			// Local ranks 2, 1, 0 on a host of 2 GPUs.
			if fmt.Sprint(job.joined) != "[0 1 0]" {
				t.Errorf("GPUs by rank %v, want the local rank mod 2", job.joined)
			}
		})
	}
}

// Processes that disagree on the world size fail at the rendezvous: the
// one rank 0 refuses at once, with both sizes, and rank 0 when its
// timeout ends, naming the refusal.
func TestLauncherMismatchedWorldFails(t *testing.T) {
	clearRendezvousEnv(t)
	addr := loopbackAddr(t)
	host, port, _ := strings.Cut(addr, ":")
	env := func(r int) map[string]string {
		return map[string]string{"RANK": fmt.Sprint(r), "WORLD_SIZE": fmt.Sprint(2 + r), "LOCAL_RANK": "0",
			"MASTER_ADDR": host, "MASTER_PORT": port, cuda.EnvTimeout: map[int]string{0: "1s", 1: "20s"}[r]}
	}
	job := newFakeJob(2)
	status, stdout, stderr := launchProcs(t, 2, job.joinOverLoopback, env, "-e", "8")
	if status[1] != 1 || stdout[1] != "" || !oneLine(stderr[1]) || !strings.Contains(stderr[1], "rank 1 of 3: ") ||
		!strings.Contains(stderr[1], "rank 1 has world size 3, rank 0 has 2") || strings.Contains(stderr[1], context.DeadlineExceeded.Error()) {
		t.Errorf("rank 1: status %d, stdout %q, stderr %q; want a refusal at once", status[1], stdout[1], stderr[1])
	}
	if status[0] != 1 || stdout[0] != "" || !oneLine(stderr[0]) || !strings.Contains(stderr[0], "rank 0 of 2: ") ||
		!strings.Contains(stderr[0], "missing ranks 1") || !strings.Contains(stderr[0], "refused: ") {
		t.Errorf("rank 0: status %d, stdout %q, stderr %q", status[0], stdout[0], stderr[0])
	}
}

// loopbackAddr is a free TCP port on the loopback interface.
func loopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
