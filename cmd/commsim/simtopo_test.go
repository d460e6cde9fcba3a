package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// measuredSweep stands for a real backend's sweep: it measures a ring
// all-reduce of 4 ranks on the simulator's switch:4 (the hardware here),
// then calls the backend cuda, as bench does after measuring on a GPU.
func measuredSweep(t *testing.T, format string) (*sweep, []row) {
	t.Helper()
	f := benchFlags{topo: "switch:4", op: "allreduce", algo: "ring", dtype: "f32", redop: "sum", format: format,
		minBytes: "1KiB", maxBytes: "1MiB", factor: 32, root: 0, symmetry: true, backendFlags: backendFlags{backend: "sim"}}
	s, err := f.parse()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.measure(io.Discard, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.backend = &backendPlan{name: "cuda", ranks: 4, gpus: []int{0, 0, 0, 0}}
	s.topoName = "cuda"
	return s, rows
}

// simBenchJSON is commsim bench's own JSON on the simulator.
func simBenchJSON(t *testing.T, args ...string) []jsonRow {
	t.Helper()
	status, out, errOut := commsim(append([]string{"bench", "--format", "json"}, args...)...)
	if status != 0 {
		t.Fatalf("bench %v: status %d: %s", args, status, errOut)
	}
	return jsonLines[jsonRow](t, out)
}

// --sim-topo puts, beside each measured size, the time the simulator gives
// the same plan on the named topology: exactly what bench --timing-only
// prints on that topology.
func TestSimTopoPredictsEachSize(t *testing.T) {
	s, rows := measuredSweep(t, "json")
	if err := s.setSimTopo("h200-virtual:4"); err != nil {
		t.Fatal(err)
	}
	if err := s.predict(rows); err != nil {
		t.Fatal(err)
	}
	want := simBenchJSON(t, "--topo", "h200-virtual:4", "--timing-only", "--algo", "ring", "-b", "1KiB", "-e", "1MiB", "-f", "32")
	if len(rows) != 3 || len(want) != 3 {
		t.Fatalf("%d rows predicted, %d simulated", len(rows), len(want))
	}
	var out bytes.Buffer
	if err := writeReport(&out, s, rows); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var got jsonRow
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatal(err)
		}
		if got.SimTimeUS == nil || *got.SimTimeUS != want[i].TimeUS || *got.SimBusBW != want[i].BusBW || got.SimTopology != "h200-virtual:4" {
			t.Errorf("size %d: %s; want sim_time_us %v, sim_busbw_gbps %v", i, line, want[i].TimeUS, want[i].BusBW)
		}
		if got.TimeUS != rows[i].outOfPlace.timeUS {
			t.Errorf("size %d: the measured time changed: %v", i, got.TimeUS)
		}
	}

	// The tables (nccl-tests' text, the default, and the box table) get
	// three columns and a line saying what they are, naming the topology.
	ratio := fmt.Sprintf("%.2f", rows[1].outOfPlace.timeUS/rows[1].sim.timeUS)
	for _, format := range []string{"text", "table"} {
		s.format = format
		out.Reset()
		if err := writeReport(&out, s, rows); err != nil {
			t.Fatal(err)
		}
		table := out.String()
		for _, want := range []string{"# sim columns: the simulator's time for the same plan on h200-virtual:4 (", "SIM TIME(US)", "TIME/SIM", ratio} {
			if !strings.Contains(strings.ToUpper(table), strings.ToUpper(want)) {
				t.Errorf("%s lacks %q:\n%s", format, want, table)
			}
		}
	}
	s.format = "csv"
	out.Reset()
	if err := writeReport(&out, s, rows); err != nil {
		t.Fatal(err)
	}
	if header, _, _ := strings.Cut(out.String(), "\n"); !strings.HasSuffix(header, ",sim_time_us,sim_busbw_gbps,time_over_sim") {
		t.Errorf("csv header %q", header)
	}
}

// Without --sim-topo nothing is added, in any format.
func TestSimTopoAbsentAddsNothing(t *testing.T) {
	for _, format := range []string{"table", "csv", "json"} {
		s, rows := measuredSweep(t, format)
		if err := s.predict(rows); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := writeReport(&out, s, rows); err != nil {
			t.Fatal(err)
		}
		if text := strings.ToLower(out.String()); strings.Contains(text, "sim columns") || strings.Contains(text, "sim time") || strings.Contains(text, "sim_") || strings.Contains(text, "time/sim") {
			t.Errorf("%s report mentions sim:\n%s", format, out.String())
		}
	}
}

func TestSimTopoRefusals(t *testing.T) {
	s, _ := measuredSweep(t, "table")
	for _, tc := range []struct {
		spec, algo, backend, text string
	}{
		{"h200-virtual:8", "ring", "cuda", "--sim-topo h200-virtual:8 has 8 GPUs but the cuda backend runs 4 ranks"},
		{"ring:0", "ring", "cuda", "ring"},
		{"h200-virtual:4", "native", "cuda", "algorithm native runs NCCL's own"},
		{"h200-virtual:4", "ring", "sim", "--sim-topo is for real backends"},
	} {
		s.algo, s.backend.name = tc.algo, tc.backend
		err := s.setSimTopo(tc.spec)
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), tc.text) || !asUsage(err, &ue) {
			t.Errorf("--sim-topo %s, algo %s, backend %s: %v; want a usage error saying %q", tc.spec, tc.algo, tc.backend, err, tc.text)
		}
	}
	if status, _, errOut := commsim("bench", "--topo", "ring:4", "-e", "8", "--sim-topo", "h200-virtual:4"); status != 2 || !strings.Contains(errOut, "--sim-topo is for real backends") {
		t.Errorf("on the simulator: status %d, %q", status, errOut)
	}
}

func asUsage(err error, ue *usageError) bool {
	u, ok := err.(usageError)
	*ue = u
	return ok
}
