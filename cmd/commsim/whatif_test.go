package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestWhatIfReroutesAndStillComputesRightResults(t *testing.T) {
	status, out, errOut := commsim("what-if", "--topo", "ring:4,bw=100GB/s,lat=1us", "--op", "allreduce", "--algo", "ring",
		"-e", "1MiB", "--check", "--fault", "link gpu1-gpu2 down at 3us")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"baseline", "with faults", "#wrong 0", "difference", "link gpu1-gpu2 down", "rank 1 -> rank 2 rerouted (3 hops"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "#wrong 1") || strings.Contains(out, "failed") {
		t.Errorf("the rerouted run went wrong:\n%s", out)
	}
}

func TestWhatIfReportsCrashAsErrorNotHang(t *testing.T) {
	status, out, errOut := commsim("what-if", "--topo", "switch:8", "--op", "broadcast", "--algo", "tree", "--timing-only",
		"-e", "1MiB", "--fault", "rank 2 crash at 1us", "--format", "json")
	if status != 1 || !strings.Contains(errOut, "the run with faults failed") || !strings.Contains(errOut, "rank 2") {
		t.Fatalf("status %d, stderr %q: want 1, naming the failure after the comparison", status, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %q", out)
	}
	var hit map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &hit); err != nil {
		t.Fatal(err)
	}
	if e, _ := hit["error"].(string); !strings.Contains(e, "rank 2") || !strings.Contains(e, "crash") {
		t.Fatalf("faulted run error = %q, want it to name the crashed rank", e)
	}
}

// A run that finished reports its time, even 0 µs for 0 bytes; a run that
// failed reports none, in JSON and in CSV.
func TestWhatIfReportsTimeOnlyForRunsThatFinished(t *testing.T) {
	args := []string{"what-if", "--topo", "ring:4", "--op", "allreduce", "-e", "0", "--fault", "rank 1 crash at 0"}
	_, out, _ := commsim(append(args, "--format", "json")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %q", out)
	}
	for i, want := range []bool{true, false} {
		var rec map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &rec); err != nil {
			t.Fatal(err)
		}
		_, hasTime := rec["time_us"]
		_, hasBW := rec["busbw_gbps"]
		if hasTime != want || hasBW != want {
			t.Errorf("line %d has time_us %v and busbw_gbps %v, want %v: %s", i, hasTime, hasBW, want, lines[i])
		}
	}
	_, out, _ = commsim(append(args, "--format", "csv")...)
	if !strings.Contains(out, "\nbaseline,0.00,0.00,,\n") || !strings.Contains(out, "\nwith faults,,,,") {
		t.Errorf("CSV: want the baseline's 0 µs and no time for the failed run:\n%s", out)
	}
}

func TestWhatIfBadInputExits2(t *testing.T) {
	for name, args := range map[string][]string{
		"no fault":      {"what-if", "--topo", "ring:4"},
		"bad syntax":    {"what-if", "--topo", "ring:4", "--fault", "link gpu0-gpu1 sideways"},
		"unknown link":  {"what-if", "--topo", "ring:4", "--fault", "link gpu0-gpu2 down at 1us"},
		"bad rank":      {"what-if", "--topo", "ring:4", "--fault", "rank 9 crash at 1us"},
		"xml":           {"what-if", "--topo", "ring:4", "--fault", "rank 1 crash at 1us", "--format", "xml"},
		"step and op":   {"what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", "rank 1 slow 50%", "--op", "alltoall"},
		"step and -e":   {"what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", "rank 1 slow 50%", "-e", "1M"},
		"op and bucket": {"what-if", "--topo", "ring:4", "--fault", "rank 1 slow 50%", "--bucket-bytes", "garbage"},
		"op and shard":  {"what-if", "--topo", "ring:4", "--fault", "rank 1 slow 50%", "--sharded"},
		"step bytes":    {"what-if", "--topo", "ring:4", "-e", "1M", "-i", "4M", "--fault", "rank 1 slow 50%"}, // one size: no steps
	} {
		status, _, errOut := commsim(args...)
		if status != 2 || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("%s: status %d, stderr %q; want 2 and one line", name, status, errOut)
		}
	}
	// A link of --topo that -g leaves out is named as such.
	status, _, errOut := commsim("what-if", "-g", "4", "--topo", "ring:8", "-e", "1M", "--fault", "link gpu3-gpu4 down")
	if want := `no link named "gpu3-gpu4" (write it as NODE-NODE, e.g. gpu0-sw0) (-g 4 keeps the first 4 GPUs of ring:8 and only the links and switches that serve them)`; status != 2 || !strings.Contains(errOut, want) {
		t.Errorf("a link -g left out: status %d, stderr %q; want 2 and %q", status, errOut, want)
	}
}

func TestWhatIfTrainingStep(t *testing.T) {
	status, out, errOut := commsim("what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", "link gpu0-sw0 degrade 10% at 0", "--format", "json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %q", out)
	}
	var base, hit struct {
		Step struct {
			StepUS float64 `json:"step_us"`
		} `json:"step"`
		Log []string `json:"log"`
	}
	json.Unmarshal([]byte(lines[0]), &base)
	json.Unmarshal([]byte(lines[1]), &hit)
	if !(hit.Step.StepUS > base.Step.StepUS) || len(hit.Log) == 0 {
		t.Fatalf("a link at 10%% should slow the step: base %v, faulted %v, log %v", base.Step.StepUS, hit.Step.StepUS, hit.Log)
	}
}

// TestWhatIfFailedRunExits1AfterTheComparison: when the run with faults
// fails, the comparison is printed whole, then the failure is on stderr,
// on one line, and the status is 1; for a collective and for a training
// step, in every format.
func TestWhatIfFailedRunExits1AfterTheComparison(t *testing.T) {
	collective := []string{"what-if", "--topo", "switch:8", "--op", "broadcast", "--algo", "tree", "--timing-only", "-e", "1MiB", "--fault", "rank 2 crash at 1us"}
	step := []string{"what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", "rank 2 crash at 1us"}
	for _, args := range [][]string{collective, step} {
		for format, want := range map[string][]string{
			"table": {"baseline", "with faults  failed: ", "# what the faults did:", "rank 2 crash at 1us"},
			"csv":   {"scenario,", "baseline,", "with faults,,,,\""}, // a failed run has no figures, never zeros
			"json":  {`"scenario":"baseline"`, `"scenario":"with faults"`, `"error":"`},
		} {
			status, out, errOut := commsim(append(args, "--format", format)...)
			if status != 1 || !strings.HasPrefix(errOut, "commsim: the run with faults failed: ") || strings.Count(errOut, "\n") != 1 {
				t.Errorf("%q %s: status %d, stderr %q; want 1 and one line", args[1:3], format, status, errOut)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("%q %s: output lacks %q:\n%s", args[1:3], format, w, out)
				}
			}
			if format == "json" {
				faulted := out[strings.Index(out, `"scenario":"with faults"`):]
				if strings.Contains(faulted, "_us\":") {
					t.Errorf("%q: the failed run reports times: %s", args[1:3], faulted)
				}
			}
		}
	}
}

// TestWhatIfSaysWhichFaultsNeverFired: a fault timed after the run's end
// changes nothing, and what-if says it never fired rather than leave
// "what the faults did" empty or silent about it; for a collective and a
// training step.
func TestWhatIfSaysWhichFaultsNeverFired(t *testing.T) {
	for _, args := range [][]string{
		{"what-if", "--topo", "ring:4", "-e", "1MiB", "--fault", "link gpu0-gpu1 down at 1s", "--fault", "rank 2 stall 200us at 1us"},
		{"what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", "link gpu0-sw0 down at 1000s", "--fault", "rank 2 stall 200us at 1us"},
	} {
		status, out, errOut := commsim(args...)
		if status != 0 {
			t.Fatalf("%v: status %d: %s", args, status, errOut)
		}
		fired, never := strings.Contains(out, "us: rank 2 stall 200us at 1us"), strings.Count(out, "never fired: ")
		if !fired || never != 1 || !strings.Contains(out, "never fired: link gpu0-") {
			t.Errorf("%v: want the stall applied and only the link named as never fired:\n%s", args, out)
		}
	}
}

// A fault that cannot slow the run says why: a link degraded to 100%, or
// a slowed reduction where the collective does not reduce or the rank's
// GPU reduces for free (ring:N's do, and a fraction of free is free); one
// that can, on a GPU with a reduction bandwidth, slows it and says
// nothing of the kind.
func TestWhatIfSaysWhenAFaultChangesNothing(t *testing.T) {
	for _, c := range []struct {
		args []string
		note string
	}{
		{[]string{"--topo", "ring:4", "--op", "allreduce", "--algo", "ring"}, "changes nothing: rank 0 slow 1% at 0: gpu0 reduces for free on ring:4 (reduce: inf)"},
		{[]string{"--topo", "ring:4,reduce=100GB/s", "--op", "allgather", "--algo", "ring"}, "changes nothing: rank 0 slow 1% at 0: allgather does not reduce"},
		{[]string{"--topo", "ring:4,reduce=100GB/s", "--op", "allreduce", "--algo", "ring"}, ""},
		{[]string{"--topo", "ring:4,reduce=100GB/s", "--op", "allgather", "--algo", "ring", "--fault", "link gpu0-gpu1 degrade 100%"},
			"changes nothing: link gpu0-gpu1 degrade 100% at 0: the link keeps all of its bandwidth"},
	} {
		status, out, errOut := commsim(append(append([]string{"what-if", "-e", "1MiB", "--fault", "rank 0 slow 1%"}, c.args...), "--format", "json")...)
		if status != 0 {
			t.Fatalf("%v: status %d: %s", c.args, status, errOut)
		}
		runs := jsonLines[struct {
			TimeUS float64  `json:"time_us"`
			Log    []string `json:"log"`
		}](t, out)
		if len(runs) != 2 {
			t.Fatalf("%v: %d scenarios, want 2:\n%s", c.args, len(runs), out)
		}
		slowed, log := runs[1].TimeUS > runs[0].TimeUS, strings.Join(runs[1].Log, "\n")
		if c.note == "" {
			if strings.Contains(log, "changes nothing") || !slowed {
				t.Errorf("%v: want the run slowed and no note:\n%s", c.args, out)
			}
		} else if !strings.Contains(log, c.note) || slowed {
			t.Errorf("%v: want the same time and %q:\n%s", c.args, c.note, out)
		}
	}
}
