package cuda

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/gpu-check.sh is the one chance a GPU session has, so its verdicts
// are tested here with stand-ins for the built binaries: a cuda.test that
// answers -test.run with the tests its pattern names (passing, skipping or
// failing as told), and a commsim that lists a GPU or none and prints
// bench records.

const stubCudaTest = `#!/usr/bin/env bash
echo "cuda.test $*" >>"$STUB_CALLS"
pat=
while [ $# -gt 0 ]; do
  [ "$1" = -test.run ] && pat=$2
  shift
done
rc=0
for n in $(echo "$pat" | sed -E 's/^\^\(//; s/\)\$.*//' | tr '|' ' '); do
  case " ${STUB_GONE:-} " in *" $n "*) continue ;; esac
  echo "=== RUN   $n"
  case " ${STUB_HANG:-} " in *" $n "*)
    printf 'panic: test timed out after 35s\n\trunning tests:\n\t\t%s (35s)\n\ngoroutine 8 [running]:\n' "$n"
    exit 2 ;;
  esac
  case " ${STUB_FAIL:-} " in *" $n "*)
    echo "    gpu_test.go:1: cuda: cuLaunchKernel: CUresult 700: an illegal memory access was encountered (after: no usable NVIDIA driver)"
    echo "--- FAIL: $n (0.00s)"
    rc=1
    continue ;;
  esac
  case " ${STUB_SKIP:-} " in *" $n "*|*" all "*)
    echo "=== RUN   $n/gpu"
    echo "    fakedriver_test.go:357: cuda backend: the driver sees no GPU"
    echo "--- PASS: $n (0.00s)"
    echo "    --- SKIP: $n/gpu (0.00s)"
    continue ;;
  esac
  echo "--- PASS: $n (0.01s)"
  if [ "$n" = TestReduceBandwidth ] && [ -n "${COMMSIM_FIGURES:-}" ]; then
    echo '{"kind":"reduce_vs_copy","test":"TestReduceBandwidth","reduce_gbps":3900,"copy_gbps":4300,"ratio":0.907,"target":0.9}' >>"$COMMSIM_FIGURES"
  fi
done
[ $rc -eq 0 ] && echo PASS || echo FAIL
exit $rc
`

const stubCommsim = `#!/usr/bin/env bash
echo "commsim $* RANK=${RANK:-} WORLD_SIZE=${WORLD_SIZE:-} LOCAL_RANK=${LOCAL_RANK:-} MASTER=${MASTER_ADDR:-}:${MASTER_PORT:-}" >>"$STUB_CALLS"
case $1 in
devices)
  if [ -n "${STUB_NOGPU:-}" ]; then
    echo "cuda:  none: cuda backend: no usable NVIDIA driver: libcuda.so.1 (the loader's search path): cuInit: CUresult 100: no CUDA-capable device is detected"
  else
    echo "cuda:  1 GPU(s), driver supports CUDA 12.8, /usr/lib/x86_64-linux-gnu/libcuda.so.1 (the loader's search path)"
    echo "  0: NVIDIA H200, 143771 MiB, sm_90"
  fi ;;
bench)
  case " $* " in
  *" --op broadcast "*" -n 20 "*)
    echo '{"op":"broadcast","ranks":4,"bytes":65536,"time_us":12,"busbw_gbps":5.5,"wrong":null,"sim_time_us":11,"sim_busbw_gbps":6,"sim_topology":"h200-virtual:4","iters":20}' ;;
  *" --op broadcast "*)
    echo '{"op":"broadcast","ranks":4,"bytes":65536,"time_us":40,"busbw_gbps":1.6,"wrong":null,"sim_time_us":38,"sim_busbw_gbps":1.7,"sim_topology":"h200-virtual:4"}' ;;
  *)
    echo '{"op":"allreduce","ranks":4,"bytes":1024,"time_us":10,"busbw_gbps":0.15,"wrong":0,"sim_time_us":8,"sim_busbw_gbps":0.19,"sim_topology":"h200-virtual:4"}' ;;
  esac ;;
esac
`

type checkRun struct {
	status  int
	out     string
	calls   []string
	summary struct {
		Status string
		Parts  []struct{ Name, Result, Reason string }
		Figure struct {
			ReduceVsCopy []map[string]any `json:"reduce_vs_copy"`
			CLI          []map[string]any `json:"cli"`
			BackToBack   []map[string]any `json:"backtoback"`
		} `json:"figures"`
		NotPassed map[string][]string `json:"logs_of_parts_not_passed"`
	}
}

func (r checkRun) result(part string) string {
	for _, p := range r.summary.Parts {
		if p.Name == part {
			return p.Result + " " + p.Reason
		}
	}
	return "missing"
}

// runCheck runs scripts/gpu-check.sh run with the stand-ins and env.
func runCheck(t *testing.T, env []string, args ...string) checkRun {
	t.Helper()
	for _, tool := range []string{"bash", "python3", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the script needs bash, coreutils and python3", tool)
		}
	}
	dir := t.TempDir()
	bin, out := filepath.Join(dir, "bin"), filepath.Join(dir, "out")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"cuda.test": stubCudaTest, "commsim": stubCommsim} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	calls := filepath.Join(dir, "calls")
	cmd := exec.Command("bash", append([]string{"scripts/gpu-check.sh", "run"}, args...)...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(append(os.Environ(), "GPU_CHECK_DIR="+bin, "OUT="+out, "STUB_CALLS="+calls), env...)
	b, err := cmd.CombinedOutput()
	r := checkRun{out: string(b)}
	if ee, ok := err.(*exec.ExitError); ok {
		r.status = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	c, _ := os.ReadFile(calls)
	r.calls = strings.Split(strings.TrimSpace(string(c)), "\n")
	js, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatalf("no summary.json in $OUT: %v\n%s", err, b)
	}
	if err := json.Unmarshal(js, &r.summary); err != nil {
		t.Fatalf("summary.json: %v\n%s", err, js)
	}
	if _, err := os.Stat(filepath.Join(out, "logs", "equivalence.log")); err != nil {
		t.Errorf("no part logs in $OUT: %v", err)
	}
	return r
}

var checkParts = []string{"devices", "driver", "streams", "equivalence", "bandwidth", "cli", "backtoback", "nccl", "launcher"}

func TestGPUCheckPassesOnlyByPassing(t *testing.T) {
	r := runCheck(t, nil)
	if r.status != 0 || r.summary.Status != "pass" {
		t.Fatalf("exit %d, status %s:\n%s", r.status, r.summary.Status, r.out)
	}
	for _, p := range checkParts {
		if got := r.result(p); got != "PASS " {
			t.Errorf("%s: %s", p, got)
		}
	}
	if len(r.summary.Figure.ReduceVsCopy) != 1 || r.summary.Figure.ReduceVsCopy[0]["ratio"] != 0.907 {
		t.Errorf("reduce vs copy figure: %v", r.summary.Figure.ReduceVsCopy)
	}
	if len(r.summary.Figure.CLI) != 1 || r.summary.Figure.CLI[0]["sim_time_us"] != 8.0 {
		t.Errorf("cli figures: %v", r.summary.Figure.CLI)
	}
	// The broadcast is timed as one run and as twenty back to back, each
	// beside its prediction, and the summary sets them side by side.
	if b := r.summary.Figure.BackToBack; len(b) != 2 || b[0]["iters"] != nil || b[1]["iters"] != 20.0 ||
		!strings.Contains(r.out, "backtoback broadcast 65536 bytes: one run 40.0 us (sim 38.0), twenty 12.0 us a run (sim 11.0)") {
		t.Errorf("back-to-back figures: %v\n%s", b, r.out)
	}
	// Every part is its own process; the launcher starts commsim as
	// torchrun would.
	tests, launched := 0, false
	for _, c := range r.calls {
		tests += strings.Count(c, "cuda.test ")
		launched = launched || strings.Contains(c, "--algo native") && strings.Contains(c, "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER=127.0.0.1:")
	}
	if tests != 5 || !launched {
		t.Errorf("%d cuda.test processes (want 5), launcher started as torchrun would: %v\n%s", tests, launched, strings.Join(r.calls, "\n"))
	}
}

// Without a GPU every part skips: the run fails, unless skips are allowed
// for a dry run.
func TestGPUCheckSkipsFailUnlessAllowed(t *testing.T) {
	env := []string{"STUB_NOGPU=1", "STUB_SKIP=all"}
	r := runCheck(t, env)
	if r.status == 0 || r.summary.Status != "fail" {
		t.Errorf("a run that skipped everything: exit %d, status %s", r.status, r.summary.Status)
	}
	for _, p := range checkParts {
		if got := r.result(p); !strings.HasPrefix(got, "SKIP ") {
			t.Errorf("%s: %s", p, got)
		}
		if len(r.summary.NotPassed[p]) == 0 {
			t.Errorf("%s: no log tail in the summary", p)
		}
	}
	if got := r.result("driver"); got != "SKIP 5 skipped: cuda backend: the driver sees no GPU" {
		t.Errorf("driver: %s", got)
	}
	r = runCheck(t, env, "--allow-skip")
	if r.status != 0 || r.summary.Status != "pass" {
		t.Errorf("--allow-skip: exit %d, status %s", r.status, r.summary.Status)
	}
}

// A failing test is FAIL, whatever its log says, even with --allow-skip;
// and a sticky fault in one part does not fail the parts after it, which
// run in their own processes.
func TestGPUCheckFailureIsNeverRelabelled(t *testing.T) {
	r := runCheck(t, []string{"STUB_FAIL=TestSendRecv"}, "--allow-skip")
	if r.status == 0 || r.summary.Status != "fail" {
		t.Errorf("exit %d, status %s", r.status, r.summary.Status)
	}
	if got := r.result("streams"); got != "FAIL exit 1: TestSendRecv " {
		t.Errorf("streams: %s", got)
	}
	for _, p := range []string{"equivalence", "bandwidth", "nccl", "launcher"} {
		if got := r.result(p); got != "PASS " {
			t.Errorf("%s after the fault: %s", p, got)
		}
	}
}

// A part whose test hangs until the test binary's own timeout fails,
// naming the test, and the parts after it still run.
func TestGPUCheckHangNamesTheTest(t *testing.T) {
	r := runCheck(t, []string{"STUB_HANG=TestSendRecv"})
	if got := r.result("streams"); got != "FAIL test timed out after 35s, in TestSendRecv (35s)" || r.status == 0 {
		t.Errorf("streams: %s, exit %d", got, r.status)
	}
	if got := r.result("equivalence"); got != "PASS " {
		t.Errorf("equivalence after the hang: %s", got)
	}
}

// A test that no longer exists (renamed, or left out of the binary) fails
// its part instead of passing it by running nothing.
func TestGPUCheckMissingTestFails(t *testing.T) {
	r := runCheck(t, []string{"STUB_GONE=TestCopy"})
	if got := r.result("driver"); got != "FAIL TestCopy did not run" || r.status == 0 {
		t.Errorf("driver: %s, exit %d", got, r.status)
	}
}
