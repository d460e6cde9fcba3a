package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// commsim runs the CLI in-process and returns its status and outputs.
func commsim(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	status := run(args, &out, &errOut)
	return status, out.String(), errOut.String()
}

// jsonLines decodes out, one JSON value of type T a line (--format json's
// JSON Lines).
func jsonLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var values []T
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var v T
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		values = append(values, v)
	}
	return values
}

func TestUsageErrorsExit2WithOneLine(t *testing.T) {
	cases := [][]string{
		{"topo", "show", "ring:0"},
		{"topo", "show", "nosuch:4"},
		{"topo", "show"},
		{"topo", "show", "ring:4", "extra"},
		{"topo", "frobnicate"},
		{"frobnicate"},
		{"--no-such-flag"},
		{"topo", "validate", "/no/such/file.yaml"},
		{"help", "frobnicate"},
		{"help", "topo", "frobnicate"},
		{"completion", "frobnicate"},
		{"bench", "--algo", "nccl", "--nccl-algo", "ri\nng"},
		{"bench", "--algo", "nccl", "--nccl-buffsize", "1\nK"},
	}
	for _, args := range cases {
		status, out, errOut := commsim(args...)
		if status != 2 {
			t.Errorf("%q: status %d, want 2 (stderr %q)", args, status, errOut)
		}
		if lines := strings.Count(strings.TrimRight(errOut, "\n"), "\n"); lines != 0 || errOut == "" {
			t.Errorf("%q: stderr is not one line: %q", args, errOut)
		}
		if out != "" {
			t.Errorf("%q: wrote to stdout on error: %q", args, out)
		}
		if strings.Contains(errOut, "goroutine") {
			t.Errorf("%q: printed a panic trace", args)
		}
	}
}

// TestSizeErrorsNameTheFlagGiven: what-if and topo draw take one size,
// -e/--bytes, and run it through bench's sweep, whose error named -b's
// --min-bytes, a flag neither command has.
func TestSizeErrorsNameTheFlagGiven(t *testing.T) {
	for _, args := range [][]string{
		{"what-if", "--topo", "ring:4", "--fault", "rank 1 slow 50%", "-e", "12Q"},
		{"topo", "draw", "ring:4", "--op", "allreduce", "-e", "-1", "--out", filepath.Join(t.TempDir(), "x.svg")},
	} {
		status, _, errOut := commsim(args...)
		if status != 2 || !strings.Contains(errOut, "--bytes:") || strings.Contains(errOut, "min-bytes") {
			t.Errorf("%q: status %d, stderr %q; want 2 naming --bytes", args, status, errOut)
		}
	}
}

// TestWriteErrorsNameTheFlag: a file that cannot be written when the run
// is done (a path under /proc passes the checks made before it) is an
// error naming the flag that asked for it, as -J's is.
func TestWriteErrorsNameTheFlag(t *testing.T) {
	if _, err := os.Stat("/proc/self"); err != nil {
		t.Skip("no /proc here")
	}
	for _, tc := range []struct {
		flag string
		args []string
	}{
		{"--plot", []string{"bench", "-e", "64", "--plot", "/proc/commsim-none.svg"}},
		{"--trace", []string{"bench", "-e", "64", "--trace", "/proc/commsim-none.json"}},
		{"--out", []string{"topo", "draw", "ring:4", "--out", "/proc/commsim-none.svg"}},
	} {
		status, _, errOut := commsim(tc.args...)
		if status != 1 || !strings.Contains(errOut, "commsim: "+tc.flag+" /proc/commsim-none") {
			t.Errorf("%q: status %d, stderr %q; want 1 naming %s", tc.args, status, errOut, tc.flag)
		}
	}
}

// TestAutoOnAFabricNothingCanCrossFails: where no plan's cost is finite
// (a bandwidth of the smallest float), auto fails as the simulator's
// horizon does with a named algorithm, exit 1, saying so, not that "no
// algorithm can run allreduce/direct".
func TestAutoOnAFabricNothingCanCrossFails(t *testing.T) {
	status, _, errOut := commsim("bench", "--topo", "switch:4,bw=4.9e-324B/s", "-e", "1KiB")
	if status != 1 || !strings.Contains(errOut, "allreduce/auto p=4") || !strings.Contains(errOut, "is a finite time on this fabric") {
		t.Errorf("status %d, stderr %q; want 1 saying no cost is finite", status, errOut)
	}
}

func TestHelpNamesCommandsAndRefusesUnknownTopics(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "Available Commands"},
		{[]string{"help", "topo", "show"}, "commsim topo show"},
		{[]string{"completion"}, "bash"},
	} {
		status, out, errOut := commsim(tc.args...)
		if status != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%q: status %d, stdout lacks %q (stderr %q)", tc.args, status, tc.want, errOut)
		}
	}
	if _, _, errOut := commsim("help", "bnech"); !strings.Contains(errOut, "did you mean bench?") {
		t.Errorf("help on a typo: %q, want a suggestion", errOut)
	}
}

func TestTopoShowSummarisesPreset(t *testing.T) {
	status, out, errOut := commsim("topo", "show", "dgx-h100")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"topology dgx-h100", "8 gpu", "1 switch", "450GB/s", "rank 0 -> 1", "gpu0 > sw0 > gpu1"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestTopoExportValidatesAndRoundTrips(t *testing.T) {
	status, yaml, errOut := commsim("topo", "export", "cluster:2x2,rail=true")
	if status != 0 {
		t.Fatalf("export: status %d: %s", status, errOut)
	}
	path := filepath.Join(t.TempDir(), "fabric.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := commsim("topo", "validate", path)
	if status != 0 || !strings.Contains(out, "ok (4 gpus") {
		t.Fatalf("validate: status %d, out %q, err %q", status, out, errOut)
	}
	status, again, _ := commsim("topo", "export", path)
	if status != 0 || again != yaml {
		t.Fatalf("export of the exported file differs:\n%s\nvs\n%s", yaml, again)
	}
}

func TestTopoValidateNamesTheProblem(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "name: bad\nnodes:\n  - {name: gpu0, kind: gpu}\n  - {name: gpu1, kind: gpu}\nlinks:\n  - {a: gpu0, b: gpu9, bw: 1GB/s, lat: 1us}\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	status, _, errOut := commsim("topo", "validate", path)
	if status != 2 || !strings.Contains(errOut, "gpu9") {
		t.Fatalf("status %d, stderr %q: want 2 naming gpu9", status, errOut)
	}
}

// TestEveryCommandHasAnExample walks the command tree: each runnable
// command's help carries an example.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" || (c.Parent() != nil && c.Parent().Name() == "completion") {
			return
		}
		if c.Example == "" {
			t.Errorf("%q has no example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
}

func TestTopoShowJSONAndCSV(t *testing.T) {
	status, out, errOut := commsim("topo", "show", "switch:8,bw=100GB/s", "--format", "json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var sum struct {
		Nodes     map[string]int `json:"nodes"`
		Bisection struct {
			BW float64 `json:"bw_bytes_per_s"`
		} `json:"bisection"`
		Routes []struct {
			Hops int `json:"hops"`
		} `json:"routes"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Nodes["gpu"] != 8 || sum.Bisection.BW != 400e9 || len(sum.Routes) == 0 || sum.Routes[0].Hops != 2 {
		t.Fatalf("summary = %+v", sum)
	}
	status, out, _ = commsim("topo", "show", "ring:4", "--format", "csv")
	if status != 0 || !strings.HasPrefix(out, "record,name,count") || !strings.Contains(out, "bisection,") {
		t.Fatalf("csv: status %d, %q", status, out)
	}
	if status, _, _ := commsim("topo", "show", "ring:4", "--format", "xml"); status != 2 {
		t.Fatalf("bad format: status %d", status)
	}
}

func TestDevicesListsEveryBackend(t *testing.T) {
	status, out, errOut := commsim("devices")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"sim:", "cuda:", "metal:"} {
		if !strings.Contains(out, want) {
			t.Errorf("devices output lacks %q:\n%s", want, out)
		}
	}
}

// TestSoftMemoryLimitLeavesGOMEMLIMITAlone: without GOMEMLIMIT the heap's
// soft limit becomes defaultMemoryLimit; with it, the limit the runtime
// read stays.
func TestSoftMemoryLimitLeavesGOMEMLIMITAlone(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	debug.SetMemoryLimit(1 << 40)
	softMemoryLimit(func(string) string { return "3GiB" })
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("with GOMEMLIMIT set: limit %d, want the runtime's %d", got, int64(1<<40))
	}
	softMemoryLimit(func(string) string { return "" })
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("without GOMEMLIMIT: limit %d, want %d", got, int64(defaultMemoryLimit))
	}
}

// skipInRaceRun skips, in .ci/run's race run (-short), a test whose work
// is long and mostly on one goroutine: the plain run has already run it
// in full, the race detector makes it about ten times slower and has no
// race to find in it, and why names the test that takes the same path
// under the detector.
func skipInRaceRun(t *testing.T, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip(why)
	}
}

// A flag's value that does not parse says what the flag wants, not which
// strconv function refused it.
func TestFlagValuesThatDoNotParseSayWhatTheFlagWants(t *testing.T) {
	for args, want := range map[string]string{
		"--symmetry=maybe":            `commsim: invalid argument "maybe" for "--symmetry" flag: want true or false`,
		"--root 99999999999999999999": `commsim: invalid argument "99999999999999999999" for "-r, --root" flag: out of range`,
		"-n 1.5":                      `commsim: invalid argument "1.5" for "-n, --iters" flag: want a whole number`,
		"-f abc":                      `commsim: invalid argument "abc" for "-f, --factor" flag: want a number`,
	} {
		status, out, errOut := commsim(append([]string{"bench"}, strings.Fields(args)...)...)
		if status != 2 || out != "" || errOut != want+"\n" {
			t.Errorf("%s: status %d, stdout %q, stderr %q; want 2 and %q", args, status, out, errOut, want)
		}
	}
	if err := plainFlagError(errors.New("x")); err.Error() != "x" {
		t.Errorf("another error: %v", err)
	}
}
