package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTrainJSONAddsUp(t *testing.T) {
	for _, args := range [][]string{
		{"train", "--model", "gpt2-small", "--topo", "dgx-h100", "--format", "json"},
		{"train", "--model", "llama-7b", "--topo", "switch:16", "--sharded", "--bucket-bytes", "100MiB", "--format", "json"},
	} {
		status, out, errOut := commsim(args...)
		if status != 0 {
			t.Fatalf("%q: status %d: %s", args, status, errOut)
		}
		var rep map[string]any
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		num := func(k string) float64 {
			v, ok := rep[k].(float64)
			if !ok {
				t.Fatalf("%q: field %s missing in %v", args, k, rep)
			}
			return v
		}
		step, compute, exposed, comm := num("step_us"), num("compute_us"), num("exposed_comm_us"), num("comm_us")
		if math.Abs(step-(compute+exposed)) > 1e-6 {
			t.Errorf("%q: step %v != compute %v + exposed %v", args, step, compute, exposed)
		}
		if exposed < 0 || exposed > comm+1e-6 || compute <= 0 {
			t.Errorf("%q: exposed %v, comm %v, compute %v", args, exposed, comm, compute)
		}
		buckets, _ := rep["buckets"].([]any)
		if len(buckets) == 0 {
			t.Fatalf("%q: no buckets", args)
		}
		for _, b := range buckets {
			bm := b.(map[string]any)
			if bm["end_us"].(float64) < bm["start_us"].(float64) || bm["start_us"].(float64) < bm["ready_us"].(float64) {
				t.Errorf("%q: bucket timeline out of order: %v", args, bm)
			}
		}
	}
}

func TestTrainTraceHasComputeAndCommTracks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.json")
	status, _, errOut := commsim("train", "--model", "gpt2-small", "--topo", "switch:4", "--trace", path)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var trace struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &trace); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	var compute, comm bool
	for _, ev := range trace.TraceEvents {
		if ev["name"] == "thread_name" {
			name := ev["args"].(map[string]any)["name"].(string)
			compute = compute || strings.HasPrefix(name, "compute")
			comm = comm || strings.HasPrefix(name, "comm")
		}
	}
	if !compute || !comm {
		t.Fatalf("trace tracks: compute %v, comm %v", compute, comm)
	}
}

func TestTrainCSVHasOneRowPerBucket(t *testing.T) {
	status, out, errOut := commsim("train", "--model", "gpt2-small", "--topo", "switch:4", "--format", "csv")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 2 || recs[0][3] != "step_us" || recs[0][8] != "bucket" {
		t.Fatalf("csv = %q", recs)
	}
}

// A model whose layers mix element types runs: each bucket's collective
// keeps the scratch it was enqueued with, though the next bucket's (of
// another type) replaces the executor's before the simulator feeds it.
func TestTrainMixesElementTypes(t *testing.T) {
	model := writeTemp(t, t.TempDir(), "mixed.yaml", `name: mixed
layers:
  - {name: a, params: 3, dtype: f16, forward: 1us, backward: 1us}
  - {name: b, params: 5, dtype: f32, forward: 1us, backward: 1us}
  - {name: c, params: 1000, dtype: bf16, forward: 1us, backward: 1us}
`)
	for _, topo := range []string{"switch:2", "dgx-h100"} {
		if status, out, errOut := commsim("train", "--model", model, "--topo", topo, "--bucket-bytes", "1", "--format", "csv"); status != 0 || strings.Count(out, "\n") < 4 {
			t.Errorf("%s: status %d, stderr %q:\n%s", topo, status, errOut, out)
		}
	}
}

func TestTrainBadInputExits2(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown model":           {"train", "--model", "gpt5"},
		"bad bucket":              {"train", "--bucket-bytes", "0"},
		"bad format":              {"train", "--format", "xml"},
		"bad topology":            {"train", "--topo", "ring:0"},
		"bad algorithm":           {"train", "--algo", "pairwise"},
		"missing file":            {"train", "--model", "/no/such/model.yaml"},
		"nccl flag alone":         {"train", "--nccl-proto", "LL"},
		"bad nccl proto":          {"train", "--algo", "nccl", "--nccl-proto", "LL64"},
		"nccl cannot run it":      {"train", "--algo", "nccl", "--nccl-algo", "pat"},
		"what-if nccl flag alone": {"what-if", "--model", "gpt2-small", "--fault", "rank 1 slow 50%", "--nccl-algo", "ring"},
	} {
		status, _, errOut := commsim(args...)
		if status != 2 || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("%s: status %d, stderr %q", name, status, errOut)
		}
	}
	// A layer over what one tensor holds says the limit.
	big := writeTemp(t, t.TempDir(), "big.yaml", "name: big\nlayers:\n  - {name: a, params: 10000000000000, dtype: f64, forward: 1ms, backward: 1ms}\n")
	status, _, errOut := commsim("train", "--model", big, "--topo", "dgx-h100")
	if status != 2 || !strings.Contains(errOut, `layer "a" has 10000000000000 parameters, over the 17179869176 a layer may have on 8 ranks`) {
		t.Errorf("a layer too large: status %d, stderr %q", status, errOut)
	}
}

// TestMirroredStepsTakeTheFullTime: a training step timed on the fabric's
// mirror by the ranks that stand for all reports what simulating every
// rank reports, byte for byte, for replicated and sharded models, ring
// (rotation) and rhd (xor) buckets, on switches, clusters and DGX pairs;
// and it was mirrored where the fabric folds.
func TestMirroredStepsTakeTheFullTime(t *testing.T) {
	for _, tc := range []struct {
		model, topo, algo string
		sharded           bool
		block             int // ranks standing for all; 0: every rank simulated
	}{
		{"gpt2-small", "switch:16", "ring", false, 1},
		{"gpt2-small", "switch:16", "rhd", false, 1},
		{"gpt2-small", "cluster:2x4", "ring", true, 4},
		{"llama-7b", "dgx-h100x2", "ring", false, 8},
		{"gpt2-small", "torus:2x4", "ring", false, 0}, // ties between equal paths: not mirrored
		{"gpt2-small", "switch:12", "tree", false, 0}, // a tree is not symmetric
	} {
		var reps [2]stepReport
		for i, symmetry := range []bool{false, true} {
			st, err := parseStep(tc.model, tc.topo, "25MiB", tc.algo, tc.sharded)
			if err != nil {
				t.Fatal(err)
			}
			st.symmetry = symmetry
			rep, c, err := st.simulate(nil, false)
			if err != nil {
				t.Fatalf("%+v, symmetry %v: %v", tc, symmetry, err)
			}
			c.Close()
			reps[i] = rep
		}
		if reps[1].standingRanks != tc.block || reps[0].standingRanks != 0 {
			t.Errorf("%+v: %d ranks stood for all with symmetry, %d without", tc, reps[1].standingRanks, reps[0].standingRanks)
		}
		reps[1].standingRanks = 0
		var outs [2]bytes.Buffer
		for i := range reps {
			if err := writeTrainTable(&outs[i], reps[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(reps[0], reps[1]) || outs[0].String() != outs[1].String() {
			t.Errorf("%+v: mirrored step\n%s\nfull step\n%s", tc, outs[1].String(), outs[0].String())
		}
	}
}

// TestTrainWithNCCLsTuner: --algo nccl plans each bucket's collectives as
// NCCL's tuner would, in the environment the --nccl-* flags set: forcing
// the protocol changes the communication, and sharded steps say NCCL
// gathers and reduce-scatters. what-if --model takes the same.
func TestTrainWithNCCLsTuner(t *testing.T) {
	skipInRaceRun(t, "five steps of NCCL plans; the train tests left run steps under it")
	comm := func(args ...string) (stepReport, string) {
		t.Helper()
		status, out, errOut := commsim(append([]string{"train", "--model", "gpt2-small", "--topo", "dgx-h100x2", "--algo", "nccl", "--format", "json"}, args...)...)
		if status != 0 {
			t.Fatalf("%v: status %d: %s", args, status, errOut)
		}
		var rep stepReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		return rep, out
	}
	tuned, _ := comm()
	ll, _ := comm("--nccl-proto", "LL")
	simple, _ := comm("--nccl-proto", "Simple", "--nccl-algo", "ring")
	if tuned.Algo != "nccl" || !(tuned.CommUS > 0) {
		t.Fatalf("tuned: algo %q, communication %v us", tuned.Algo, tuned.CommUS)
	}
	for _, b := range ll.Buckets {
		if !strings.Contains(b.Algo, "/LL/") || strings.Contains(b.Algo, "Simple") {
			t.Errorf("--nccl-proto LL: bucket %d ran %q", b.Index, b.Algo)
		}
	}
	if len(tuned.Buckets) == 0 || !strings.Contains(tuned.Buckets[0].Algo, "ch") {
		t.Errorf("tuned buckets: %+v, want NCCL's choice named", tuned.Buckets)
	}
	if ll.CommUS == simple.CommUS || ll.CommUS <= tuned.CommUS {
		t.Errorf("communication: tuned %v us, LL only %v us, ring/Simple only %v us: LL alone should cost more than the tuner's choice, and differ from Simple",
			tuned.CommUS, ll.CommUS, simple.CommUS)
	}
	status, out, errOut := commsim("train", "--model", "gpt2-small", "--topo", "dgx-h100", "--algo", "nccl", "--sharded")
	if status != 0 || !strings.Contains(out, "all-gathered (nccl)") || !strings.Contains(out, "reduce-scattered (nccl)") {
		t.Errorf("sharded: status %d, stderr %q, header:\n%s", status, errOut, out)
	}
	status, out, errOut = commsim("what-if", "--model", "gpt2-small", "--topo", "dgx-h100", "--algo", "nccl", "--fault", "rank 3 compute-slow 50%")
	if status != 0 || !strings.Contains(out, "nccl all-reduce") {
		t.Errorf("what-if: status %d, stderr %q:\n%s", status, errOut, out)
	}
}

// TestTrainRefusesStepsThatWouldTakeHours: gpt2-small's 14 direct
// all-reduces on a ring of 2048 GPUs, every rank simulated, are 21M plan
// steps each whose flows cross 205 links, and each collective finds its
// ranks' routes to all others again (more than the route cache holds):
// hours of the flow solver's and the route search's work, refused before
// the step starts, naming the figures. The same step on a ring of 64
// says nothing and runs.
func TestTrainRefusesStepsThatWouldTakeHours(t *testing.T) {
	skipInRaceRun(t, "estimates on ring:2048, then a step on ring:64 with every rank simulated; TestMirroredStepsTakeTheFullTime runs steps under it")
	status, _, errOut := commsim("train", "--model", "gpt2-small", "--topo", "ring:2048", "--algo", "direct", "--symmetry=false")
	want := "commsim: the training step would take about 7.6 hours (14 collectives, up to 20965377 plan steps on 2048 ranks, its flows crossing 204.9 links a step); the limit is 1 hour; use fewer ranks (a smaller --topo)\n"
	if status != 2 || errOut != want {
		t.Fatalf("status %d, stderr %q, want %q", status, errOut, want)
	}
	status, out, errOut := commsim("train", "--model", "gpt2-small", "--topo", "ring:64", "--algo", "direct", "--symmetry=false")
	if status != 0 || errOut != "" || !strings.Contains(out, "direct") {
		t.Fatalf("ring:64: status %d, stderr %q", status, errOut)
	}
}
