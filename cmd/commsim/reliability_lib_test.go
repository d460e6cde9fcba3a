package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// These are the CLI's cases of issue #17 whose fixes are in the library:
// simulated time past its horizon, failures named in workloads, and
// conflicting faults.

const horizonText = "simulated time passes the clock's horizon of 106.75 days (2^63−1 ps)"

// TestBenchSlowSizesInsideTheHorizonAreExact: on a 1 kB/s ring, a ring
// all-reduce of S bytes over 8 ranks moves 2·(7/8)·S bytes through each
// link: 3,758,096,384 s for 2 GiB and 5,637,144,576 s for 3 GiB (plus 14
// link latencies of 1 us). Each fits the horizon alone; the second once
// wrapped past it on the mirror's clock, which the first had moved on.
func TestBenchSlowSizesInsideTheHorizonAreExact(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "ring:8,bw=1kB/s", "-b", "2GiB", "-e", "3GiB", "-f", "1.5",
		"--timing-only", "--algo", "ring", "--format", "csv")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"2147483648,", ",3758096384014,", "3221225472,", ",5637144576014,"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
}

// TestBenchPastTheHorizonFails: 8 bytes over 4 ranks at 1e-6 B/s is six
// steps of 2e6 s, 1.2e7 s in all: past the horizon (9.22e6 s). That is an
// error that says so, not a time (it was 12 us in place) nor a deadlock.
func TestBenchPastTheHorizonFails(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "switch:4,bw=1e-6B/s", "-b", "8", "-e", "8", "--algo", "ring")
	if status != 1 {
		t.Fatalf("status %d, want 1: %s", status, errOut)
	}
	if !strings.Contains(errOut, horizonText) || strings.Contains(errOut, "deadlock") {
		t.Fatalf("stderr does not name the horizon alone: %s", errOut)
	}
	if strings.Contains(out, "12.00") {
		t.Fatalf("a time was printed:\n%s", out)
	}
}

// TestWhatIfSlowerNeverFaster: rank 3 reducing at P% of its bandwidth
// takes 7 reduces of 128 KiB at P% of 1 TB/s. The step grows as P shrinks
// until it passes the horizon; from there on it is an error naming the
// horizon (it once wrapped round to shorter steps).
func TestWhatIfSlowerNeverFaster(t *testing.T) {
	timeOf := regexp.MustCompile(`with faults +([0-9.]+) us`)
	prev := 0.0
	for _, pct := range []string{"100", "1", "1e-6", "1e-10", "2e-11", "1e-11", "9.95e-12", "9.9e-12", "5e-12", "2e-12"} {
		status, out, errOut := commsim("what-if", "--topo", "dgx-h100", "--algo", "ring", "-e", "1MiB", "--timing-only",
			"--fault", "rank 3 slow "+pct+"%")
		if strings.Contains(out+errOut, "deadlock") {
			t.Fatalf("%s%%: slow work reported as a deadlock:\n%s%s", pct, out, errOut)
		}
		m := timeOf.FindStringSubmatch(out)
		if m == nil {
			if status == 0 || !strings.Contains(out, horizonText) {
				t.Fatalf("%s%%: status %d, neither a time nor the horizon:\n%s%s", pct, status, out, errOut)
			}
			prev = -1 // past the horizon: so must every slower rank be
			continue
		}
		us, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		if prev < 0 || us < prev {
			t.Fatalf("%s%%: %v us after %v us for a faster rank", pct, us, prev)
		}
		prev = us
	}
	if prev != -1 {
		t.Fatal("no rate slow enough to pass the horizon")
	}
}

// TestWhatIfModelNamesTheFailure: a training step's collectives fail for
// the crashed rank or the lost link, and say so, as a single collective's
// what-if does; the ranks that waited on them are not a "deadlock".
func TestWhatIfModelNamesTheFailure(t *testing.T) {
	for fault, want := range map[string]string{
		"rank 3 crash at 1ms":     "rank 3 (sim:gpu3) crashed at 1000.000000us",
		"link gpu3-sw0 down at 0": "no route left with gpu3-sw0 down",
	} {
		_, out, errOut := commsim("what-if", "--model", "gpt2-small", "--topo", "dgx-h100", "--fault", fault)
		if !strings.Contains(out, want) || strings.Contains(out+errOut, "deadlock") {
			t.Errorf("%s: want the failure to name %q:\n%s%s", fault, want, out, errOut)
		}
	}
}

// TestConflictingFaultsAreUsageErrors: two faults of one kind on one rank
// or link, or a fault on a rank after its crash, are refused before
// anything runs, naming both faults, whatever their order.
func TestConflictingFaultsAreUsageErrors(t *testing.T) {
	for _, faults := range [][2]string{
		{"rank 3 crash at 1us", "rank 3 crash at 2us"},
		{"rank 3 crash at 2us", "rank 3 crash at 1us"},
		{"rank 3 crash at 1us", "rank 3 stall 5us at 2us"},
		{"link gpu3-sw0 down at 0", "link sw0-gpu3 down at 1us"},
	} {
		for _, workload := range [][]string{{"--algo", "ring", "-e", "1MiB", "--timing-only"}, {"--model", "gpt2-small"}} {
			args := append([]string{"what-if", "--topo", "dgx-h100", "--fault", faults[0], "--fault", faults[1]}, workload...)
			status, out, errOut := commsim(args...)
			line := strings.TrimRight(errOut, "\n")
			if status != 2 || strings.Contains(line, "\n") || out != "" {
				t.Errorf("%q: status %d, stdout %q, stderr %q; want 2, nothing and one line", args, status, out, errOut)
			}
			if !strings.Contains(line, strconv.Quote(faults[0])) || !strings.Contains(line, strconv.Quote(faults[1])) {
				t.Errorf("%q: %q does not name both faults", args, line)
			}
		}
	}
}
