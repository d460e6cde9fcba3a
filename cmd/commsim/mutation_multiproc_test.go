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

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda"
	"github.com/commsim/commsim/hw/metal"
	"github.com/commsim/commsim/sim"
)

// skewedJob is a fakeJob whose communicator can be told apart from a
// fair one: in-place f32 collectives take longer and may come out wrong
// on chosen ranks, collectives of one dtype may fail, and closing it may
// fail.
type skewedJob struct {
	*fakeJob
	// inPlaceExtra is the seconds every in-place f32 collective spends
	// on each rank's stream on top of the fakeJob's.
	inPlaceExtra float64
	// wrongInPlace are the ranks whose in-place f32 outputs get one wrong
	// element.
	wrongInPlace map[int]bool
	// failDType, when set, fails every collective of that dtype on every
	// rank (f64: combining the times; i64: the ranks' agreement).
	failDType *hw.DType
	// closeErr is what closing the communicator returns.
	closeErr error
}

func (j *skewedJob) join(ctx context.Context, rdv cuda.Rendezvous, gpu int) (*hw.World, hw.NativeComm, func() error, error) {
	w, _, closeFn, err := j.fakeJob.join(ctx, rdv, gpu)
	if err != nil {
		return nil, nil, nil, err
	}
	return w, j, func() error { return errors.Join(closeFn(), j.closeErr) }, nil
}

func (j *skewedJob) Launch(calls []hw.NativeCall) error {
	c := calls[0]
	dt := c.Recv.DType()
	if j.failDType != nil && dt == *j.failDType {
		return fmt.Errorf("ncclAllReduce: injected failure on %s", dt)
	}
	inPlace := c.Send == c.Recv && dt == hw.F32
	if inPlace && j.inPlaceExtra > 0 {
		if err := c.Stream.(*sim.Stream).Compute(j.inPlaceExtra, "in place"); err != nil {
			return err
		}
	}
	if err := j.fakeJob.Launch(calls); err != nil {
		return err
	}
	if inPlace && j.wrongInPlace[c.Rank] {
		b, err := readBytes(c.Recv)
		if err != nil {
			return err
		}
		b[3] ^= 0x40
		return writeBytes(c.Recv, b)
	}
	return nil
}

// ranksWithin runs the CLI once per rank of a job of p, concurrently, with
// join as the communicator, and fails the test if the ranks have not all
// finished within 2 minutes (ranks that disagree on the sweep hang on
// mismatched collectives).
func ranksWithin(t *testing.T, p int, join func(context.Context, cuda.Rendezvous, int) (*hw.World, hw.NativeComm, func() error, error),
	args func(rank int) []string) (status []int, stdout, stderr []string) {
	t.Helper()
	stubJoin(t, 2, join)
	status, stdout, stderr = make([]int, p), make([]string, p), make([]string, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Go(func() {
			a := []string{"bench", "--backend", "cuda", "--algo", "native", "--nranks", fmt.Sprint(p), "--rank", fmt.Sprint(r), "--addr", "127.0.0.1:29500"}
			status[r], stdout[r], stderr[r] = commsim(append(a, args(r)...)...)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute): // a guard against a hang, far above a run's time even under -race
		t.Fatalf("the ranks of %v did not all finish", args(0))
	}
	return status, stdout, stderr
}

// A launcher's variables make a job only of the native bench: a cuda sweep
// of another algorithm under torchrun is this process's own.
func TestLauncherVariablesMakeAJobOnlyOfTheNativeAlgorithm(t *testing.T) {
	clearRendezvousEnv(t)
	torchrun := map[string]string{"RANK": "1", "WORLD_SIZE": "4", "MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
	// --ranks 5000 stops the one-process run before it looks for a GPU.
	status, out, errOut := commsimEnv(torchrun, "bench", "--backend", "cuda", "--algo", "ring", "--ranks", "5000", "-e", "8")
	if status != 2 || out != "" || !strings.Contains(errOut, "--ranks 5000 out of range 1..4096") || strings.Contains(errOut, "multi-process") {
		t.Errorf("status %d, stdout %q, stderr %q; want the one-process run's --ranks error", status, out, errOut)
	}
}

// A world of one from the launcher is a one-process run: it needs no rank.
func TestLauncherWorldOfOneIsAOneProcessRun(t *testing.T) {
	clearRendezvousEnv(t)
	status, out, errOut := commsimEnv(map[string]string{"WORLD_SIZE": "1"}, "bench", "--backend", "cuda", "--algo", "native", "--ranks", "5000", "-e", "8")
	if status != 2 || out != "" || !strings.Contains(errOut, "--ranks 5000 out of range 1..4096") {
		t.Errorf("status %d, stdout %q, stderr %q; want the one-process run's --ranks error", status, out, errOut)
	}
}

// --gpu without a world size is refused as a multi-process flag, even where
// COMMSIM_RANK is set too.
func TestGPUFlagWithoutAWorldSizeAsksForNranks(t *testing.T) {
	clearRendezvousEnv(t)
	status, out, errOut := commsimEnv(map[string]string{cuda.EnvRank: "3"}, "bench", "--backend", "cuda", "--algo", "native", "--gpu", "1", "-e", "8")
	want := "--rank, --addr and --gpu are for multi-process runs: add --nranks N (or set COMMSIM_WORLD_SIZE)"
	if status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, want) {
		t.Errorf("status %d, stdout %q, stderr %q; want 2 and %q", status, out, errOut, want)
	}
}

// A rank out of range of a launcher's world names where the rank and the
// world size each came from: a flag, a COMMSIM_* variable or the launcher.
func TestLauncherRangeErrorsNameWhereEachSettingCameFrom(t *testing.T) {
	clearRendezvousEnv(t)
	addr := map[string]string{"MASTER_ADDR": "node0", "MASTER_PORT": "29500"}
	with := func(m map[string]string) map[string]string {
		for k, v := range addr {
			m[k] = v
		}
		return m
	}
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{with(map[string]string{"WORLD_SIZE": "4"}), []string{"--rank", "5"},
			"rank 5 (from --rank) is out of range 0..3 for a world of 4 ranks (from WORLD_SIZE (torchrun))"},
		{with(map[string]string{"WORLD_SIZE": "4", cuda.EnvRank: "5"}), nil,
			"rank 5 (from COMMSIM_RANK) is out of range 0..3 for a world of 4 ranks (from WORLD_SIZE (torchrun))"},
		{with(map[string]string{"WORLD_SIZE": "8", "RANK": "5"}), []string{"--nranks", "4"},
			"rank 5 (from RANK (torchrun)) is out of range 0..3 for a world of 4 ranks (from --nranks)"},
	} {
		status, out, errOut := commsimEnv(tc.env, append(append([]string{}, nativeBench...), tc.args...)...)
		if status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v %v: status %d, stderr %q; want 2 and %q", tc.env, tc.args, status, errOut, tc.want)
		}
	}
}

// --nranks 1 is a plain sweep, which takes no --rank, --addr or --gpu.
func TestOneRankWorldIsAPlainSweepWithoutMultiProcessFlags(t *testing.T) {
	clearRendezvousEnv(t)
	if status, out, errOut := commsim("bench", "--topo", "switch:2", "--nranks", "1", "-e", "8"); status != 0 || !strings.Contains(out, "backend sim") {
		t.Errorf("--nranks 1: status %d, stderr %q; want a sweep on the simulator", status, errOut)
	}
	for _, extra := range [][]string{{"--rank", "0"}, {"--addr", "h:1"}, {"--gpu", "0"}} {
		status, out, errOut := commsim(append([]string{"bench", "--backend", "cuda", "--algo", "native", "--nranks", "1", "-e", "8"}, extra...)...)
		if status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, "--rank, --addr and --gpu are for multi-process runs") {
			t.Errorf("--nranks 1 %v: status %d, stdout %q, stderr %q; want 2", extra, status, out, errOut)
		}
	}
}

// COMMSIM_LOCAL_RANK picks the GPU: spaces around it are allowed, a
// negative one is refused.
func TestLocalRankVariablePicksTheGPUAndMustNotBeNegative(t *testing.T) {
	clearRendezvousEnv(t)
	gotGPU := -1
	stubJoin(t, 3, func(_ context.Context, _ cuda.Rendezvous, gpu int) (*hw.World, hw.NativeComm, func() error, error) {
		gotGPU = gpu
		return nil, nil, nil, errors.New("stopped after the join")
	})
	job := map[string]string{cuda.EnvWorldSize: "4", cuda.EnvRank: "0", cuda.EnvAddr: "h:1"}
	env := func(local string) map[string]string {
		m := map[string]string{EnvLocalRank: local}
		for k, v := range job {
			m[k] = v
		}
		return m
	}
	if status, _, errOut := commsimEnv(env(" 2 "), nativeBench...); status != 1 || gotGPU != 2 {
		t.Errorf("COMMSIM_LOCAL_RANK=' 2 ': status %d, stderr %q, joined on GPU %d; want GPU 2", status, errOut, gotGPU)
	}
	gotGPU = -1
	status, out, errOut := commsimEnv(env("-1"), nativeBench...)
	if status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, `COMMSIM_LOCAL_RANK="-1" is not a non-negative integer`) || gotGPU != -1 {
		t.Errorf("COMMSIM_LOCAL_RANK=-1: status %d, stderr %q, joined on GPU %d; want 2 and no join", status, errOut, gotGPU)
	}
}

// A host where the driver finds no GPU fails the run, as a runtime error.
func TestMultiProcessRunOnAHostWithoutGPUsIsARuntimeError(t *testing.T) {
	clearRendezvousEnv(t)
	joined := false
	stubJoin(t, 0, func(context.Context, cuda.Rendezvous, int) (*hw.World, hw.NativeComm, func() error, error) {
		joined = true
		return nil, nil, nil, errors.New("joined without a GPU")
	})
	status, out, errOut := commsim("bench", "--backend", "cuda", "--algo", "native", "--nranks", "2", "--rank", "1", "--addr", "h:1", "-e", "8")
	if status != 1 || out != "" || errOut != "commsim: cuda: no GPU on this host\n" || joined {
		t.Errorf("status %d, stdout %q, stderr %q, joined %v; want 1 and no GPU on this host", status, out, errOut, joined)
	}
}

// Rank 0's -J report names the GPU it ran on.
func TestMultiProcessReportNamesRankZerosGPU(t *testing.T) {
	clearRendezvousEnv(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "rank0.json")
	status, _, stderr := benchRanks(t, newFakeJob(2), func(r int) []string {
		if r == 0 {
			return []string{"-e", "64", "--gpu", "1", "-J", path}
		}
		return []string{"-e", "64", "--gpu", "0"}
	})
	if status[0] != 0 || status[1] != 0 {
		t.Fatalf("status %v, stderr %q", status, stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep ncclReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Config.Devices) != 2 || rep.Config.Devices[0].Device != 1 {
		t.Errorf("devices %+v, want rank 0 on GPU 1", rep.Config.Devices)
	}
}

// A run that fails mid-sweep leaves a partial -J report on rank 0 only,
// and every rank says which size and which run failed.
func TestFailedMultiProcessRunNamesTheRunAndLeavesAReportOnRankZeroOnly(t *testing.T) {
	clearRendezvousEnv(t)
	const p = 3
	dir := t.TempDir()
	path := func(rank int) string { return filepath.Join(dir, fmt.Sprintf("rank%d.json", rank)) }
	job := newFakeJob(p)
	job.failFrom = 1024
	status, stdout, stderr := ranksWithin(t, p, job.join, func(r int) []string {
		return []string{"-b", "64", "-e", "1K", "-f", "4", "--check", "-J", path(r)}
	})
	for r := range p {
		// Rank 0 says first where it wrote the partial report.
		lines := strings.Split(strings.TrimSuffix(stderr[r], "\n"), "\n")
		last := lines[len(lines)-1]
		if status[r] != 1 || stdout[r] != "" || len(lines) != map[bool]int{true: 2, false: 1}[r == 0] ||
			!strings.HasPrefix(last, fmt.Sprintf("commsim: rank %d of %d: allreduce (1024 bytes, out of place): ", r, p)) ||
			!strings.HasSuffix(last, "ncclAllReduce: unhandled system error on 1024 bytes") {
			t.Errorf("rank %d: status %d, stdout %q, stderr %q; want 1 naming the out-of-place run of 1024 bytes", r, status[r], stdout[r], stderr[r])
		}
		if _, err := os.Stat(path(r)); (r == 0) != (err == nil) {
			t.Errorf("rank %d's -J report: %v; want one on rank 0 only", r, err)
		}
	}
}

// Each size's in-place and out-of-place runs are reported apart: their own
// times (the slowest rank's) and bus bandwidth, and their own wrong
// elements summed over the ranks.
func TestMultiProcessReportsInPlaceRunsApart(t *testing.T) {
	clearRendezvousEnv(t)
	const p = 3
	job := &skewedJob{fakeJob: newFakeJob(p), inPlaceExtra: 10e-6, wrongInPlace: map[int]bool{1: true, 2: true}}
	status, stdout, stderr := ranksWithin(t, p, job.join, func(int) []string {
		return []string{"-b", "96", "-e", "192", "--check", "--format", "json"}
	})
	if status[0] != 1 || stderr[0] != "commsim: --check found 4 wrong elements (see the #wrong columns)\n" {
		t.Errorf("rank 0: status %d, stderr %q", status[0], stderr[0])
	}
	recs := jsonLines[jsonRow](t, stdout[0])
	if len(recs) != 2 {
		t.Fatalf("rank 0 wrote %q", stdout[0])
	}
	for _, rec := range recs {
		// The slowest rank, rank 2, spends 3 µs out of place and 13 in place.
		if math.Abs(rec.TimeUS-3) > 1e-6 || math.Abs(rec.InTimeUS-13) > 1e-6 {
			t.Errorf("%d bytes: times %g and %g µs, want 3 and 13", rec.Bytes, rec.TimeUS, rec.InTimeUS)
		}
		if want := rec.AlgBW * 2 * (p - 1) / p; math.Abs(rec.BusBW-want) > 1e-3*want {
			t.Errorf("%d bytes: busbw %g, want algbw × 2(p-1)/p = %g", rec.Bytes, rec.BusBW, want)
		}
		if rec.Wrong == nil || *rec.Wrong != 0 || rec.InWrong == nil || *rec.InWrong != 2 {
			t.Errorf("%d bytes: wrong %v and in place %v, want 0 and 2 (ranks 1 and 2)", rec.Bytes, rec.Wrong, rec.InWrong)
		}
	}
	for r := 1; r < p; r++ {
		if status[r] != 1 || stdout[r] != "" || !strings.Contains(stderr[r], "--check found 4 wrong elements over all ranks") {
			t.Errorf("rank %d: status %d, stdout %q, stderr %q", r, status[r], stdout[r], stderr[r])
		}
	}
}

// A failure of the collectives that combine the ranks' results fails every
// rank, saying which step failed.
func TestMultiProcessFailuresToCombineRanksAreNamed(t *testing.T) {
	clearRendezvousEnv(t)
	for _, tc := range []struct {
		dt            hw.DType
		want, failure string
	}{
		{hw.F64, "combining the ranks' times: ", "injected failure on f64"},
		{hw.I64, "checking that the ranks agree on the sweep: ", "injected failure on i64"},
	} {
		job := &skewedJob{fakeJob: newFakeJob(2), failDType: &tc.dt}
		status, stdout, stderr := ranksWithin(t, 2, job.join, func(int) []string { return []string{"-e", "64"} })
		for r := range 2 {
			want := fmt.Sprintf("commsim: rank %d of 2: %s", r, tc.want)
			if status[r] != 1 || stdout[r] != "" || !oneLine(stderr[r]) || !strings.HasPrefix(stderr[r], want) || !strings.Contains(stderr[r], tc.failure) {
				t.Errorf("rank %d: status %d, stdout %q, stderr %q; want 1 and %q", r, status[r], stdout[r], stderr[r], want)
			}
		}
	}
}

// A communicator that fails to close fails the rank, and with another
// error both are said on one line.
func TestMultiProcessCloseFailureIsReportedOnOneLine(t *testing.T) {
	clearRendezvousEnv(t)
	closeErr := errors.New("ncclCommDestroy: unhandled cuda error")
	job := &skewedJob{fakeJob: newFakeJob(2), closeErr: closeErr}
	status, stdout, stderr := ranksWithin(t, 2, job.join, func(int) []string { return []string{"-e", "64"} })
	for r := range 2 {
		if status[r] != 1 || stderr[r] != fmt.Sprintf("commsim: rank %d of 2: every size was measured, but closing the communicator failed: %v\n", r, closeErr) {
			t.Errorf("a sweep that closes badly, rank %d: status %d, stderr %q", r, status[r], stderr[r])
		}
	}
	// The sizes were measured: rank 0 reports them all, the others nothing.
	if rows := strings.Count(stdout[0], "float     sum"); rows != 4 || stdout[1] != "" {
		t.Errorf("a sweep of 4 sizes that closes badly reports %d rows on rank 0 (want 4), and rank 1 wrote %q:\n%s", rows, stdout[1], stdout[0])
	}
	job = &skewedJob{fakeJob: newFakeJob(2), closeErr: closeErr}
	status, _, stderr = ranksWithin(t, 2, job.join, func(r int) []string { return []string{"-e", fmt.Sprint(8 << r)} })
	for r := range 2 {
		if status[r] != 1 || !oneLine(stderr[r]) || !strings.Contains(stderr[r], "the ranks run different sweeps") || !strings.Contains(stderr[r], "; "+closeErr.Error()) {
			t.Errorf("mismatched sweeps that close badly, rank %d: status %d, stderr %q", r, status[r], stderr[r])
		}
	}
}

// Ranks that differ in any one setting of the sweep find out at once.
func TestMultiProcessRanksDifferingInOneSettingAreStopped(t *testing.T) {
	clearRendezvousEnv(t)
	for _, tc := range []struct {
		name   string
		common []string
		rank1  []string
	}{
		{"--check", []string{"-e", "64"}, []string{"--check"}},
		{"--root", []string{"--op", "broadcast", "-e", "64"}, []string{"--root", "1"}},
		{"--redop", []string{"-e", "64"}, []string{"--redop", "max"}},
		{"--dtype", []string{"-e", "64"}, []string{"--dtype", "f64"}},
		{"--op", []string{"-e", "64"}, []string{"--op", "allgather"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, stdout, stderr := ranksWithin(t, 2, newFakeJob(2).join, func(r int) []string {
				if r == 1 {
					return append(append([]string{}, tc.common...), tc.rank1...)
				}
				return tc.common
			})
			for r := range 2 {
				if status[r] != 1 || stdout[r] != "" || !oneLine(stderr[r]) || !strings.Contains(stderr[r], fmt.Sprintf("rank %d of 2: the ranks run different sweeps", r)) {
					t.Errorf("rank %d: status %d, stdout %q, stderr %q", r, status[r], stdout[r], stderr[r])
				}
			}
		})
	}
}

// A real backend's --ranks is 1 to 4096 (0 for the default); outside that
// it is a usage error before any device is looked for.
func TestRealBackendRankCountsOutsideOneTo4096AreUsageErrors(t *testing.T) {
	for _, ranks := range []string{"-1", "4097"} {
		status, out, errOut := commsim("bench", "--backend", "cuda", "--ranks", ranks, "-e", "8")
		if want := "--ranks " + ranks + " out of range 1..4096"; status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, want) {
			t.Errorf("--ranks %s: status %d, stdout %q, stderr %q; want 2 and %q", ranks, status, out, errOut, want)
		}
	}
	if metal.Available() == nil {
		return // 4096 virtual ranks would run
	}
	// 4096 ranks pass the check: the missing Metal is what fails.
	if status, _, errOut := commsim("bench", "--backend", "metal", "--ranks", "4096", "-e", "8"); status != 1 || !strings.Contains(errOut, "needs macOS") {
		t.Errorf("--ranks 4096 on metal: status %d, stderr %q; want 1 for the missing Metal", status, errOut)
	}
}

// --placement is for cuda only, and must name one of its layouts.
func TestPlacementIsACudaLayoutByName(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "metal", "--placement", "gpu"}, "--placement is for the cuda backend"},
		{[]string{"--backend", "cuda", "--placement", "diagonal"}, `unknown placement "diagonal" (valid: gpu, virtual, spread)`},
	} {
		status, out, errOut := commsim(append([]string{"bench", "-e", "8"}, tc.args...)...)
		if status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want 2 and %q", tc.args, status, out, errOut, tc.want)
		}
	}
}

// Without Metal, the metal backend fails for that, at runtime, before
// --topo is held against its ranks.
func TestMissingMetalIsSaidBeforeTheCostModelIsChecked(t *testing.T) {
	if metal.Available() == nil {
		t.Skip("Metal is present") // the mismatch is then the error, tested below
	}
	status, out, errOut := commsim("bench", "--backend", "metal", "--topo", "switch:4", "-e", "8")
	if status != 1 || out != "" || !strings.Contains(errOut, "needs macOS") {
		t.Errorf("status %d, stdout %q, stderr %q; want 1 for the missing Metal", status, out, errOut)
	}
}

// A multi-process run's --topo is the cost model; one that does not parse
// is a usage error, as on the simulator.
func TestMultiProcessCostModelThatDoesNotParseIsAUsageError(t *testing.T) {
	clearRendezvousEnv(t)
	stubJoin(t, 2, func(context.Context, cuda.Rendezvous, int) (*hw.World, hw.NativeComm, func() error, error) {
		return nil, nil, nil, errors.New("joined with a bad cost model")
	})
	status, out, errOut := commsim("bench", "--backend", "cuda", "--algo", "native", "--nranks", "2", "--rank", "1", "--addr", "h:1", "--topo", "moebius:2", "-e", "8")
	if status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, "moebius") {
		t.Errorf("status %d, stdout %q, stderr %q; want 2 naming the topology", status, out, errOut)
	}
}

// The report's header says where a real backend's ranks ran: every rank's
// GPU on cuda, the virtual ranks on Metal. (Both need their device to run
// end to end, so the header is asked for directly.)
func TestReportHeadersNameWhereTheRanksRan(t *testing.T) {
	for _, tc := range []struct {
		plan           backendPlan
		backend, times string
	}{
		{backendPlan{name: "cuda", ranks: 3, gpus: []int{0, 1, 1}}, "cuda (GPUs 0,1,1)", "times are measured with CUDA events"},
		{backendPlan{name: "metal", ranks: 2}, "metal (2 virtual ranks on one GPU)", "times are measured with Metal GPU timestamps"},
	} {
		if backend, times := tc.plan.describe(false); backend != tc.backend || times != tc.times {
			t.Errorf("%+v: %q, %q; want %q, %q", tc.plan, backend, times, tc.backend, tc.times)
		}
	}
}

// Rank 0's table says that each time is the slowest rank's and that
// #wrong adds up the ranks'.
func TestMultiProcessTableSaysWhoseTimesItShows(t *testing.T) {
	clearRendezvousEnv(t)
	status, stdout, stderr := benchRanks(t, newFakeJob(2), func(int) []string { return []string{"-e", "8"} })
	want := "times are measured with CUDA events on every rank: each is the slowest rank's, and #wrong adds up every rank's"
	if status[0] != 0 || !strings.Contains(stdout[0], want) {
		t.Errorf("rank 0: status %d, stderr %q, table %q; want it to say %q", status[0], stderr[0], stdout[0], want)
	}
}
