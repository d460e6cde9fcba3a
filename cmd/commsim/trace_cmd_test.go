package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func traceEvents(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.TraceEvents
}

// TestBenchTraceMarksEachRun: a marker across the trace where each size's
// out-of-place and in-place runs begin.
func TestBenchTraceMarksEachRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.json")
	if status, _, errOut := commsim("bench", "--topo", "ring:4", "-b", "1KiB", "-e", "2KiB", "--trace", path); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var marks []string
	for _, ev := range traceEvents(t, path) {
		if ev["ph"] == "i" && ev["s"] == "g" {
			marks = append(marks, ev["name"].(string))
		}
	}
	want := []string{"allreduce 1KiB out-of-place", "allreduce 1KiB in-place", "allreduce 2KiB out-of-place", "allreduce 2KiB in-place"}
	if !slices.Equal(marks, want) {
		t.Errorf("markers %q, want %q", marks, want)
	}
}

// TestTrainTraceNamesLayers: compute slices carry the layer and pass
// ("h0 forward"), and the what-if trace shows the fault.
func TestTrainTraceNamesLayers(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "step.json")
	if status, _, errOut := commsim("train", "--model", "gpt2-small", "--topo", "switch:2", "--trace", path); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	forward, backward := 0, 0
	for _, ev := range traceEvents(t, path) {
		name, _ := ev["name"].(string)
		if ev["ph"] == "X" && name == "compute" {
			t.Fatalf("a compute slice without its layer's name: %v", ev)
		}
		// A layer that takes no time (gpt2-small's embedding lookup) is an
		// instant.
		if ev["ph"] == "X" || ev["ph"] == "i" {
			forward += map[bool]int{true: 1}[strings.HasSuffix(name, " forward")]
			backward += map[bool]int{true: 1}[strings.HasSuffix(name, " backward")]
		}
	}
	if forward != 2*14 || backward != 2*14 {
		t.Errorf("%d forward and %d backward slices, want 28 each (14 layers, 2 ranks)", forward, backward)
	}
	path = filepath.Join(dir, "whatif.json")
	if status, _, errOut := commsim("what-if", "--model", "gpt2-small", "--topo", "switch:2", "--fault", "rank 1 compute-slow 50% at 10us", "--trace", path); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	found := false
	for _, ev := range traceEvents(t, path) {
		found = found || ev["ph"] == "i" && ev["name"] == "rank 1 compute-slow 50% at 10us"
	}
	if !found {
		t.Error("the fault is not in the trace")
	}
}
