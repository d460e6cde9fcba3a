package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// traceCommands are the commands that take --trace, with small runs.
var traceCommands = map[string][]string{
	"bench":         {"bench", "--topo", "switch:4", "-b", "1KiB", "-e", "4KiB", "--timing-only"},
	"train":         {"train", "--model", "gpt2-small", "--topo", "switch:4"},
	"what-if":       {"what-if", "--topo", "ring:4", "--fault", "link gpu0-gpu1 down at 0"},
	"what-if model": {"what-if", "--topo", "ring:4", "--model", "gpt2-small", "--fault", "link gpu0-gpu1 down at 0"},
}

// TestTraceOverTraceMaxIsRefused: a trace larger than --trace-max is bad
// input, refused in one line that gives the estimate and the flag, and no
// file is written.
func TestTraceOverTraceMaxIsRefused(t *testing.T) {
	for name, args := range traceCommands {
		path := filepath.Join(t.TempDir(), "trace.json")
		status, _, errOut := commsim(append(args, "--trace", path, "--trace-max", "1KiB")...)
		want := "(estimated), more than --trace-max 1KiB"
		if name == "bench" { // refused at the first size over the limit, not after the sweep
			want = "KiB (estimated after 1 of 3 sizes), more than --trace-max 1KiB"
		}
		if status != 2 || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 || !strings.Contains(errOut, want) {
			t.Errorf("%s: status %d, stderr %q", name, status, errOut)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("%s: the refused trace was written (%v)", name, err)
		}
		entries, _ := os.ReadDir(filepath.Dir(path))
		if len(entries) != 0 {
			t.Errorf("%s: left %d files behind", name, len(entries))
		}
	}
}

// TestTraceMaxWithoutTraceIsRefused: --trace-max alone bounds nothing,
// a usage error in one line, on every command that takes it.
func TestTraceMaxWithoutTraceIsRefused(t *testing.T) {
	for name, args := range traceCommands {
		status, out, errOut := commsim(append(args, "--trace-max", "1GiB")...)
		if status != 2 || out != "" || errOut != "commsim: --trace-max bounds a --trace; without --trace there is nothing to bound\n" {
			t.Errorf("%s: status %d, stdout %q, stderr %q", name, status, out, errOut)
		}
	}
}

// TestTraceUnderTraceMaxIsWrittenWhole: within --trace-max (the default
// or a raised one) the trace is the same bytes as ever.
func TestTraceUnderTraceMaxIsWrittenWhole(t *testing.T) {
	for name, args := range traceCommands {
		var traces [][]byte
		for _, extra := range [][]string{nil, {"--trace-max", "1GiB"}, {"--trace-max", "64MiB"}} {
			path := filepath.Join(t.TempDir(), "trace.json")
			status, _, errOut := commsim(append(append(args, "--trace", path), extra...)...)
			if status != 0 {
				t.Fatalf("%s %v: status %d: %s", name, extra, status, errOut)
			}
			raw, err := os.ReadFile(path)
			if err != nil || len(raw) == 0 {
				t.Fatalf("%s %v: %v, %d bytes", name, extra, err, len(raw))
			}
			traces = append(traces, raw)
		}
		if !bytes.Equal(traces[0], traces[1]) || !bytes.Equal(traces[0], traces[2]) {
			t.Errorf("%s: the trace changes with --trace-max", name)
		}
	}
}

func TestTraceMaxBadValueExits2(t *testing.T) {
	for _, v := range []string{"0", "-1KiB", "lots"} {
		status, _, errOut := commsim("train", "--trace", filepath.Join(t.TempDir(), "t.json"), "--trace-max", v)
		if status != 2 || !strings.Contains(errOut, "--trace-max") {
			t.Errorf("--trace-max %s: status %d, stderr %q", v, status, errOut)
		}
	}
}
