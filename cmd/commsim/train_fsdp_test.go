package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trainJSON runs commsim with args and decodes its one JSON step report.
func trainJSON(t *testing.T, args ...string) stepReport {
	t.Helper()
	status, out, errOut := commsim(args...)
	if status != 0 {
		t.Fatalf("%q: status %d: %s", args, status, errOut)
	}
	var rep stepReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%q: %v in %s", args, err, out)
	}
	return rep
}

// TestShardedStepsGatherParameters: FSDP/ZeRO-3 all-gathers every layer's
// parameters before its forward and again before its backward, so it
// moves about 1.5 times the bytes of DDP's all-reduce, and the step is
// never cheaper than DDP's (it was, leaving the gathers out).
func TestShardedStepsGatherParameters(t *testing.T) {
	for _, topo := range []string{"switch:16", "dgx-h100", "cluster:2x4"} {
		ddp := trainJSON(t, "train", "--model", "gpt2-small", "--topo", topo, "--algo", "ring", "--format", "json")
		fsdp := trainJSON(t, "train", "--model", "gpt2-small", "--topo", topo, "--algo", "ring", "--sharded", "--format", "json")
		layers := 14 // gpt2-small's profile
		if fsdp.Gathers != 2*layers || ddp.Gathers != 0 || !fsdp.Sharded || ddp.Sharded {
			t.Errorf("%s: %d gathers sharded (want %d), %d replicated", topo, fsdp.Gathers, 2*layers, ddp.Gathers)
		}
		if fsdp.StepUS < ddp.StepUS || fsdp.CommUS < 1.3*ddp.CommUS || fsdp.GatherUS <= 0 {
			t.Errorf("%s: sharded step %.1f us, comm %.1f us (gathers %.1f us); replicated step %.1f us, comm %.1f us",
				topo, fsdp.StepUS, fsdp.CommUS, fsdp.GatherUS, ddp.StepUS, ddp.CommUS)
		}
		if d := fsdp.StepUS - fsdp.ComputeUS - fsdp.ExposedCommUS; d > 1e-6 || d < -1e-6 {
			t.Errorf("%s: step %v != compute %v + exposed %v", topo, fsdp.StepUS, fsdp.ComputeUS, fsdp.ExposedCommUS)
		}
	}
}

// TestShardedComputeWaitsForItsParameters: with layers that compute in a
// microsecond and gather for far longer, the last layer's gradient cannot
// be ready before the gathers ahead of its backward (every forward's, and
// its own) have run, one after the other on the gather stream. A gather
// alone takes what one of a one-layer model's takes: in a longer model,
// the later gathers share the links with reduce-scatters.
func TestShardedComputeWaitsForItsParameters(t *testing.T) {
	profile := func(layers int) string {
		var b strings.Builder
		b.WriteString("name: wide\nlayers:\n")
		for i := range layers {
			fmt.Fprintf(&b, "  - {name: l%d, params: 50000000, dtype: bf16, forward: 1us, backward: 1us}\n", i)
		}
		path := filepath.Join(t.TempDir(), fmt.Sprint("wide", layers, ".yaml"))
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	one := trainJSON(t, "train", "--model", profile(1), "--topo", "switch:8", "--algo", "ring", "--sharded", "--format", "json")
	perGather := one.GatherUS / float64(one.Gathers)
	const layers = 4
	path := profile(layers)
	rep := trainJSON(t, "train", "--model", path, "--topo", "switch:8", "--algo", "ring", "--sharded", "--format", "json")
	if first := rep.Buckets[0]; first.ReadyUS < (layers+1)*perGather*0.99 {
		t.Errorf("last layer's gradient ready at %.1f us, before the %d gathers ahead of it (%.1f us each) ran", first.ReadyUS, layers+1, perGather)
	}
	if rep.ComputeUS > 2*layers+1e-6 {
		t.Errorf("compute %.3f us, want %d us: waits for parameters are exposed communication", rep.ComputeUS, 2*layers)
	}
	status, out, _ := commsim("train", "--model", path, "--topo", "switch:8", "--sharded")
	if status != 0 || !strings.Contains(out, "sharded (FSDP/ZeRO-3): parameters all-gathered (auto) before each layer's forward and backward") {
		t.Errorf("header does not say what a sharded step does:\n%s", out)
	}
}

// TestTrainAndWhatIfShareTheirBaseline: what-if --model's baseline is
// commsim train's step, with the same default algorithm.
func TestTrainAndWhatIfShareTheirBaseline(t *testing.T) {
	train := trainJSON(t, "train", "--model", "gpt2-small", "--topo", "dgx-h100", "--format", "json")
	status, out, errOut := commsim("what-if", "--model", "gpt2-small", "--topo", "dgx-h100", "--fault", "rank 1 stall 1us at 0", "--format", "json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var base struct {
		Step stepReport `json:"step"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &base); err != nil {
		t.Fatal(err)
	}
	if base.Step.StepUS != train.StepUS || base.Step.Algo != train.Algo || train.Algo != defaultStepAlgo {
		t.Errorf("what-if baseline %v us (%s), train %v us (%s)", base.Step.StepUS, base.Step.Algo, train.StepUS, train.Algo)
	}
}

// TestWhatIfSlowCompute: a rank computing at half speed holds every
// rank's step back by about its compute.
func TestWhatIfSlowCompute(t *testing.T) {
	status, out, errOut := commsim("what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", "rank 3 compute-slow 50%", "--format", "json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var runs [2]struct {
		Step stepReport `json:"step"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	for i := range runs {
		if err := dec.Decode(&runs[i]); err != nil {
			t.Fatal(err)
		}
	}
	base, hit := runs[0].Step, runs[1].Step
	if hit.StepUS < base.StepUS+0.99*base.ComputeUS {
		t.Errorf("rank 3 at half speed: step %.1f us, baseline %.1f us with %.1f us of compute", hit.StepUS, base.StepUS, base.ComputeUS)
	}
	if !strings.Contains(out, "rank 3 compute-slow 50%") {
		t.Errorf("fault log does not name the fault: %s", out)
	}
}

func TestTrainUnitsReadAsPeopleWriteThem(t *testing.T) {
	for n, want := range map[int64]string{124439808: "124.4M", 6738415616: "6.7B", 999: "999", 70_553_706_496: "70.6B"} {
		if got := humanCount(n); got != want {
			t.Errorf("humanCount(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{28357632: "27.0 MiB", 1711276032: "1.6 GiB", 25 << 20: "25.0 MiB", 512: "512 B", 1536: "1.5 KiB", 1 << 60: "1.0 EiB", 3 << 49: "1.5 PiB"} {
		if got := sizeOneDecimal(n); got != want {
			t.Errorf("sizeOneDecimal(%d) = %q, want %q", n, got, want)
		}
	}
	status, out, _ := commsim("train", "--model", "gpt2-small", "--topo", "switch:4")
	if status != 0 || !strings.Contains(out, "gpt2-small (124.4M parameters)") || strings.Contains(out, "KiB") || !strings.Contains(out, "27.0 MiB") {
		t.Errorf("train's units:\n%s", out)
	}
}
