package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// errDiskFull is what fullDisk's writes fail with.
var errDiskFull = errors.New("no space left on device")

// fullDisk is a stdout on which every write fails.
type fullDisk struct{ writes int }

func (d *fullDisk) Write([]byte) (int, error) {
	d.writes++
	return 0, errDiskFull
}

// commsimTo runs the CLI in-process with its stdout going to w, and
// returns its status and stderr.
func commsimTo(w io.Writer, args ...string) (int, string) {
	var errOut bytes.Buffer
	status := run(args, w, &errOut)
	return status, errOut.String()
}

// outputCases invoke every command in every output format, cheaply. The
// test below checks that the list covers the whole command tree.
func outputCases() [][]string {
	log := ncclTestdata + "/sim-dgx-h100-all_reduce.txt"
	slow := "rank 1 slow 50%"
	cases := [][]string{
		{},
		{"help"},
		{"completion"}, {"completion", "bash"}, {"completion", "zsh"}, {"completion", "fish"}, {"completion", "powershell"},
		{"topo"},
		{"topo", "validate", "ring:4"},
		{"topo", "export", "ring:4"},
		{"topo", "presets"},
		{"topo", "presets", "--format", "json"},
		{"topo", "draw", "ring:4"},
		{"devices"},
		{"tuning", "--topo", "ring:4"},
		{"tuning", "--topo", "ring:4", "--op", "allreduce", "-e", "1KiB"},
		{"tuning", "--topo", "dgx-h100x2", "--log", costTables + "/nccl-issue-1519-2x8xH100.txt"},
	}
	for _, format := range []string{"table", "csv", "json"} {
		cases = append(cases,
			[]string{"topo", "show", "ring:4", "--format", format},
			[]string{"bench", "--topo", "ring:4", "--timing-only", "-b", "1KiB", "-e", "1KiB", "--format", format},
			[]string{"compare", "--topo", "ring:4", "--timing-only", "-b", "1KiB", "-e", "4KiB", "--format", format},
			[]string{"what-if", "--topo", "ring:4", "--algo", "ring", "-e", "1KiB", "--timing-only", "--fault", slow, "--format", format},
			[]string{"what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", slow, "--format", format},
			[]string{"train", "--model", "gpt2-small", "--topo", "switch:4", "--format", format},
			[]string{"calibrate", "--log", log, "--topo", "dgx-h100", "--algo", "ring", "-b", "16MiB", "-e", "64MiB", "--format", format},
			[]string{"calibrate", "--log", log, "--topo", "dgx-h100", "-b", "16MiB", "-e", "128MiB", "--format", format},
			[]string{"fidelity", "--log", log, "--topo", "dgx-h100", "--format", format},
		)
		if format != "table" {
			cases = append(cases, []string{"tuning", "--topo", "dgx-h100x2", "--log", costTables + "/nccl-issue-1519-2x8xH100.txt", "--format", format},
				[]string{"tuning", "--topo", "ring:4", "--op", "allreduce", "-e", "1KiB", "--format", format})
		}
	}
	return cases
}

// TestEveryCommandFailsWhenItsOutputIsLost: whatever a command prints, in
// whatever format, a stdout that refuses the bytes makes the run exit 1
// with one line that says so, last on stderr.
func TestEveryCommandFailsWhenItsOutputIsLost(t *testing.T) {
	for _, args := range outputCases() {
		var disk fullDisk
		status, errOut := commsimTo(&disk, args...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		want := "commsim: writing the output: " + errDiskFull.Error()
		if status != 1 || lines[len(lines)-1] != want || strings.Count(errOut, "writing the output") != 1 || disk.writes == 0 {
			t.Errorf("%q: status %d after %d writes, stderr %q; want 1 and %q last", args, status, disk.writes, errOut, want)
		}
	}
}

// TestOutputCasesCoverEveryCommand keeps the list above whole: a new
// command gets the output check from run, and this test asks for the case
// that proves it.
func TestOutputCasesCoverEveryCommand(t *testing.T) {
	root := newRoot(io.Discard, io.Discard)
	covered := map[string]bool{}
	for _, args := range outputCases() {
		c, _, err := root.Find(args)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		covered[c.CommandPath()] = true
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !covered[c.CommandPath()] {
			t.Errorf("no case writes the output of %q to a full disk", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// TestOutputCasesSucceedOnAWorkingStdout: the cases above fail only for
// their output.
func TestOutputCasesSucceedOnAWorkingStdout(t *testing.T) {
	for _, args := range outputCases() {
		var out bytes.Buffer
		if status, errOut := commsimTo(&out, args...); status != 0 || out.Len() == 0 {
			t.Errorf("%q: status %d, %d bytes out, stderr %q", args, status, out.Len(), errOut)
		}
	}
}

// TestOutputToDevFull runs a command into the real /dev/full, whose
// writes fail with ENOSPC.
func TestOutputToDevFull(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer full.Close()
	status, errOut := commsimTo(full, "bench", "--topo", "dgx-h100", "--op", "allreduce", "--timing-only", "-b", "1KiB", "-e", "1MiB")
	if want := "commsim: writing the output: write /dev/full: no space left on device\n"; status != 1 || errOut != want {
		t.Fatalf("status %d, stderr %q; want 1 and %q", status, errOut, want)
	}
}

// TestCommandErrorAndLostOutputAreBothReported: when a command fails and
// its output is lost too, stderr says both and the status stays a
// failure.
func TestCommandErrorAndLostOutputAreBothReported(t *testing.T) {
	var disk fullDisk
	status, errOut := commsimTo(&disk, "what-if", "--topo", "switch:8", "--op", "broadcast", "--algo", "tree", "--timing-only",
		"-e", "1MiB", "--fault", "rank 2 crash at 1us")
	lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
	if status != 1 || len(lines) != 2 || !strings.Contains(lines[0], "the run with faults failed") || !strings.Contains(lines[1], "writing the output") {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
}
