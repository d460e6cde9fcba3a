package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
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

func TestTrainBadInputExits2(t *testing.T) {
	for name, args := range map[string][]string{
		"unknown model": {"train", "--model", "gpt5"},
		"bad bucket":    {"train", "--bucket-bytes", "0"},
		"bad format":    {"train", "--format", "xml"},
		"bad topology":  {"train", "--topo", "ring:0"},
		"bad algorithm": {"train", "--algo", "pairwise"},
		"missing file":  {"train", "--model", "/no/such/model.yaml"},
	} {
		status, _, errOut := commsim(args...)
		if status != 2 || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("%s: status %d, stderr %q", name, status, errOut)
		}
	}
}
