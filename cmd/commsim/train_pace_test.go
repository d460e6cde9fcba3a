package main

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// deepModel writes a model of n equal layers to a temporary file.
func deepModel(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: deep\nlayers:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: l%d, params: %d, dtype: bf16, forward: %dus, backward: %dus}\n", i, 100_000+i%7*1000, 10+i%3, 20+i%5)
	}
	path := filepath.Join(t.TempDir(), "deep.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func simulateStep(t *testing.T, model, topo, algo string, sharded, symmetry bool, window int) stepReport {
	t.Helper()
	st, err := parseStep(model, topo, "25MiB", algo, sharded)
	if err != nil {
		t.Fatal(err)
	}
	st.symmetry, st.window = symmetry, window
	rep, c, err := st.simulate(nil, false)
	if err != nil {
		t.Fatalf("%s on %s, window %d: %v", model, topo, window, err)
	}
	c.Close()
	return rep
}

// TestPacedStepsTakeTheTimeOfWholeSteps: a step enqueued a few layers at a
// time reports what the step enqueued whole reports, to the picosecond.
// Sharded steps are among them: their compute waits for the parameters'
// gathers, so ranks stand at different points between windows, most on
// slow or lopsided fabrics.
func TestPacedStepsTakeTheTimeOfWholeSteps(t *testing.T) {
	skipInRaceRun(t, "steps paced and whole, every rank simulated; TestMirroredStepsTakeTheFullTime runs steps under it")
	deep := deepModel(t, 300)
	for _, tc := range []struct {
		model, topo, algo string
		sharded, symmetry bool
	}{
		{"gpt2-small", "switch:4", "ring", false, false},
		{"gpt2-small", "cluster:2x4", "ring", false, true},
		{"gpt2-small", "dgx-h100x2", "ring", false, true},
		{deep, "switch:8", "ring", false, false},
		{deep, "ring:6", "rhd", false, false},
		{deep, "torus:2x3", "tree", false, false},
		{"gpt2-small", "switch:4", "ring", true, false},
		{"gpt2-small", "dgx-h100x2", "ring", true, true},
		{deep, "switch:8", "ring", true, false},
		{deep, "switch:8,bw=2GB/s", "ring", true, false},
		{deep, "ring:6", "tree", true, false},
		{deep, "torus:2x3", "rhd", true, false},
	} {
		whole := simulateStep(t, tc.model, tc.topo, tc.algo, tc.sharded, tc.symmetry, 1<<30)
		for _, window := range []int{1, 3, 64} {
			if got := simulateStep(t, tc.model, tc.topo, tc.algo, tc.sharded, tc.symmetry, window); !reflect.DeepEqual(got, whole) {
				t.Errorf("%+v, window %d: step %v us, %d buckets; enqueued whole: %v us, %d buckets",
					tc, window, got.StepUS, len(got.Buckets), whole.StepUS, len(whole.Buckets))
			}
		}
	}
}

// TestDeepStepsRunInBoundedMemory: when the last of a deep step is
// enqueued, the memory held is a window's ops and a few hundred bytes per
// layer and rank (param sync's gradients, a sharded layer's gathered
// parameters, and their events), where enqueueing the whole step up front
// held every op of it at once, over 2 KB per layer and rank (a
// 100,000-layer model on 64 ranks passed 10 GB), and windows of a fixed
// 4,096 units per rank held 3 KB in a sharded step on 32 ranks.
func TestDeepStepsRunInBoundedMemory(t *testing.T) {
	if raceEnabled {
		t.Skip("measures the heap, which the race detector's shadow memory inflates; the run without -race checks it")
	}
	const layers, ranks = 20_000, 8
	var b strings.Builder
	b.WriteString("name: deep\nlayers:\n")
	for i := range layers {
		fmt.Fprintf(&b, "  - {name: l%d, params: 1000000, dtype: bf16, forward: 100us, backward: 200us}\n", i)
	}
	path := filepath.Join(t.TempDir(), "deep.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, sharded := range []bool{false, true} {
		st, err := parseStep(path, fmt.Sprintf("switch:%d", ranks), "25MiB", "ring", sharded)
		if err != nil {
			t.Fatal(err)
		}
		st.symmetry = false // and the window trainWindowUnits gives
		var base, held runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&base)
		st.enqueued = func() {
			runtime.GC()
			runtime.ReadMemStats(&held)
		}
		_, c, err := st.simulate(nil, false)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		budget := int64(600) // bytes per layer and rank
		if sharded {
			budget = 800 // and the gathers' buffers, events and ops
		}
		perUnit := (int64(held.HeapAlloc) - int64(base.HeapAlloc)) / (layers * ranks)
		t.Logf("sharded %v: %d layers on %d ranks: %d bytes held per layer and rank once enqueued", sharded, layers, ranks, perUnit)
		if perUnit > budget {
			t.Errorf("sharded %v: %d layers on %d ranks: %d bytes held per layer and rank once enqueued, more than %d", sharded, layers, ranks, perUnit, budget)
		}
	}
}

// TestTrainBarCountsLayerPasses: a paced step's bar counts rank 0's layer
// passes as the simulation passes them, windows before the step is
// enqueued whole, and then the communication that ends it, without moving
// the step by a picosecond (its marks are events on rank 0's compute
// stream). A step with a trace has no bar: its marks would show there.
func TestTrainBarCountsLayerPasses(t *testing.T) {
	deep := deepModel(t, 40)
	for _, tc := range []struct {
		topo              string
		sharded, symmetry bool
	}{
		{"switch:4", false, false},
		{"switch:4,bw=2GB/s", true, false},
		{"switch:8", false, true},   // timed on the mirror, by one rank
		{"dgx-h100x2", false, true}, // tried on the mirror, which cannot time it, then in full
	} {
		whole := simulateStep(t, deep, tc.topo, "ring", tc.sharded, tc.symmetry, 3)
		st, err := parseStep(deep, tc.topo, "25MiB", "ring", tc.sharded)
		if err != nil {
			t.Fatal(err)
		}
		st.symmetry, st.window = tc.symmetry, 3
		var bars []*progress
		var out syncBuffer
		st.newBar = func(n int) *progress {
			bars = append(bars, startProgressOf(&out, n, "layer passes", time.Hour))
			return bars[len(bars)-1]
		}
		var atEnqueued int64
		st.enqueued = func() { atEnqueued = bars[len(bars)-1].bar.State().CurrentNum }
		rep, c, err := st.simulate(nil, false)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		c.Close()
		if !reflect.DeepEqual(rep, whole) {
			t.Errorf("%+v: with a bar, step %v us; without, %v us", tc, rep.StepUS, whole.StepUS)
		}
		if tc.symmetry && rep.standingRanks == 0 && !st.unmirrored {
			t.Errorf("%+v: the mirror was not tried", tc)
		}
		// A try on the mirror that fails leaves its bar for the next.
		if s := bars[len(bars)-1].bar.State(); s.Max != 2*40+1 || s.CurrentNum != s.Max {
			t.Errorf("%+v: bar at %d of %d, want it full at %d", tc, s.CurrentNum, s.Max, 2*40+1)
		}
		if atEnqueued == 0 || atEnqueued >= 2*40 {
			t.Errorf("%+v: the bar stood at %d of 81 when the step was enqueued whole: want it to move while windows run", tc, atEnqueued)
		}
		if !strings.Contains(out.String(), "layer passes") {
			t.Errorf("%+v: bar %q does not say what it counts", tc, out.String())
		}
	}
	st, err := parseStep(deep, "switch:4", "25MiB", "ring", false)
	if err != nil {
		t.Fatal(err)
	}
	st.newBar = func(n int) *progress { t.Error("a bar on a traced step"); return nil }
	_, c, err := st.simulate(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
