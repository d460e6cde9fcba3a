package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// oneLineUsageError fails unless the run exited 2 with one line on stderr
// that contains want.
func oneLineUsageError(t *testing.T, args []string, want string) {
	t.Helper()
	status, _, errOut := commsim(args...)
	if status != 2 || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 || !strings.Contains(errOut, want) {
		t.Errorf("%q: status %d, stderr %q; want 2 and one line saying %q", args, status, errOut, want)
	}
}

func TestVersion(t *testing.T) {
	status, out, errOut := commsim("--version")
	if status != 0 || !strings.HasPrefix(out, "commsim ") || strings.TrimSpace(out) == "commsim" || errOut != "" {
		t.Fatalf("--version: status %d, stdout %q, stderr %q", status, out, errOut)
	}
}

func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"benhc"}, "did you mean bench?"},
		{[]string{"topo", "shwo", "dgx-h100"}, "did you mean show?"},
		{[]string{"bench", "--op", "allredcue"}, "did you mean allreduce?"},
		{[]string{"bench", "--algo", "rign"}, "did you mean ring?"},
		{[]string{"bench", "--topo", "dgx-h10"}, "did you mean dgx-h100?"},
		{[]string{"bench", "--topo", "swich:4"}, "did you mean switch?"},
		{[]string{"train", "--algo", "rhb"}, "did you mean rhd?"},
		{[]string{"train", "--model", "gpt2-smal"}, "did you mean gpt2-small?"},
	} {
		oneLineUsageError(t, tc.args, tc.want)
	}
	// Nothing near: no guess.
	status, _, errOut := commsim("bench", "--op", "zzzzzz")
	if status != 2 || strings.Contains(errOut, "did you mean") {
		t.Errorf("--op zzzzzz: status %d, stderr %q", status, errOut)
	}
}

func TestMissingArgumentPrintsTheUsageLine(t *testing.T) {
	oneLineUsageError(t, []string{"topo", "show"}, "usage: commsim topo show SPEC|FILE")
	oneLineUsageError(t, []string{"topo", "export", "a", "b"}, "usage: commsim topo export SPEC|FILE")
}

func TestFaultWithoutItsDurationSaysSo(t *testing.T) {
	oneLineUsageError(t, []string{"what-if", "--topo", "ring:4", "--fault", "rank 1 stall at 5us"}, "stall needs a duration")
	// A collective computes nothing: slowing its compute would change nothing.
	oneLineUsageError(t, []string{"what-if", "--topo", "ring:4", "--fault", "rank 1 compute-slow 50%"}, "add --model")
}

// TestMinBytesAloneRaisesTheDefaultMax: -b past the default -e is a sweep
// of one size; given both, b > e is still refused.
func TestMinBytesAloneRaisesTheDefaultMax(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "switch:4", "--timing-only", "-b", "128MiB", "--format", "json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var row map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &row); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if len(lines) != 1 || row["bytes"] != float64(128<<20) {
		t.Errorf("-b 128MiB alone: %d rows, first %v; want one of 128MiB", len(lines), row)
	}
	oneLineUsageError(t, []string{"bench", "-b", "128MiB", "-e", "64MiB"}, "--min-bytes 128MiB is larger than --max-bytes 64MiB")
}

func TestBandwidthsAsPeopleWriteThem(t *testing.T) {
	for _, spec := range []string{"cluster:2x4,nicbw=400Gbps", "ring:4,bw=50GBps", "ring:4,bw=400Gbit/s"} {
		if status, _, errOut := commsim("topo", "show", spec); status != 0 {
			t.Errorf("%s: status %d: %s", spec, status, errOut)
		}
	}
}

// TestYAMLSyntaxErrorsNameTheirLine: the yaml library's "yaml: line N:"
// reaches the user once, line and all.
func TestYAMLSyntaxErrorsNameTheirLine(t *testing.T) {
	dir := t.TempDir()
	topo := filepath.Join(dir, "bad.topo")
	model := filepath.Join(dir, "bad.model")
	if err := os.WriteFile(topo, []byte("name: t\nnodes:\n\t- {name: gpu0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, []byte("name: m\nlayers:\n\t- {name: a}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A parser's error (an unclosed brace) the library counts from 0.
	flow := filepath.Join(dir, "flow.topo")
	if err := os.WriteFile(flow, []byte("name: t\nnodes:\n  - {name: gpu0, kind: gpu\nlinks: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"topo", "show", topo}, {"train", "--model", model}, {"topo", "show", flow}} {
		status, _, errOut := commsim(args...)
		if status != 2 || !strings.Contains(errOut, "yaml: line 3:") || strings.Contains(errOut, "yaml: yaml:") {
			t.Errorf("%q: status %d, stderr %q; want 2 and the line, said once", args, status, errOut)
		}
	}
}

// --format's two words for reading, text and table, name the one layout
// for reading of a command that has one; other words are usage errors
// that list the command's own.
func TestFormatTakesEitherWordForReading(t *testing.T) {
	for _, args := range [][]string{
		{"topo", "show", "ring:4", "--format", "text"},
		{"topo", "presets", "--format", "text"},
		{"tuning", "--topo", "dgx-h100", "--format", "table"},
		{"train", "--format", "text"},
	} {
		if status, out, errOut := commsim(args...); status != 0 || out == "" {
			t.Errorf("%v: status %d, stderr %q", args, status, errOut)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"topo", "show", "ring:4", "--format", "xml"}, `unknown format "xml" (want table, csv or json)`},
		{[]string{"topo", "presets", "--format", "csv"}, `unknown format "csv" (want table or json)`},
		{[]string{"tuning", "--topo", "dgx-h100", "--format", "yaml"}, `unknown format "yaml" (want text, csv or json)`},
	} {
		oneLineUsageError(t, c.args, c.want)
	}
}

// A barrier moves no data: its one row is size 0, the header says so,
// and sizes given for it are noted as left out.
func TestBarrierLeavesSizesOut(t *testing.T) {
	status, out, errOut := commsim("bench", "--op", "barrier", "-b", "64", "-e", "1K")
	if status != 0 || !strings.Contains(out, "minBytes 0 maxBytes 0 ") ||
		errOut != "commsim: note: a barrier moves no data: -b and -e are left out, and its one row is size 0\n" {
		t.Errorf("status %d, stdout:\n%s\nstderr %q", status, out, errOut)
	}
	if _, _, errOut := commsim("bench", "--op", "barrier"); errOut != "" {
		t.Errorf("no sizes given: stderr %q, want none", errOut)
	}
}
