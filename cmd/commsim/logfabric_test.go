package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/fidelity"
)

// TestLogsNameTheirPresets: every shipped log whose device lines name
// each of its ranks on the SXM boards the presets build gets, from those
// lines alone, the preset its mapping file names (less the overrides
// that a device line cannot tell: NICs, host CPUs). The logs that name
// none, or a rack's superchips, are refused with the reason.
func TestLogsNameTheirPresets(t *testing.T) {
	cat, err := fidelity.Published()
	if err != nil {
		t.Fatal(err)
	}
	named := 0
	for _, pub := range cat.Logs {
		lg, err := calibrate.ParseLog(pub.File, pub.Data)
		if err != nil {
			t.Fatal(err)
		}
		spec, note, err := fabricOfLog("fidelity", pub.File, lg)
		if err != nil {
			if len(lg.Devices) == lg.Ranks && lg.Ranks > 0 && !strings.HasPrefix(lg.Devices[0].Name, "NVIDIA GB") {
				t.Errorf("%s: every rank's GPU named (%s), but %v", pub.File, lg.Devices[0].Name, err)
			}
			continue
		}
		named++
		// The mapping file's overrides may follow the preset; gpus= is
		// the device lines' to give.
		if over, ok := strings.CutPrefix(pub.Topo, spec); !ok || over != "" && (over[0] != ',' || strings.Contains(over, "gpus=")) {
			t.Errorf("%s: %s from its devices; its mapping file names %s", pub.File, spec, pub.Topo)
		}
		if !strings.Contains(note, spec) || !strings.Contains(note, lg.Devices[0].Name) {
			t.Errorf("%s: note %q does not say what it read", pub.File, note)
		}
	}
	if named < 43 {
		t.Errorf("%d shipped logs named their preset: want the 43 whose device lines say", named)
	}
}

// TestFidelityWithoutTopo: a log of the user's own, no --topo: fidelity
// and calibrate run on the preset its device lines name, and say so on
// stderr; a log whose lines cannot name one is refused with why, exit 2.
func TestFidelityWithoutTopo(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "fidelity", "nccl-logs", "xxrjun-h100-allreduce-10x2xH100.txt"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	own := writeTemp(t, dir, "own.txt", string(data)+"# a copy of one's own\n") // not the shipped log's bytes
	status, out, errOut := commsim("fidelity", "--log", own, "--format", "csv")
	if status != 0 || !strings.Contains(errOut, "--topo not given") || !strings.Contains(errOut, "dgx-h100x10,gpus=2 (") {
		t.Errorf("fidelity of an own log: status %d, stderr %q", status, errOut)
	}
	_, want, _ := commsim("fidelity", "--log", own, "--format", "csv", "--topo", "dgx-h100x10,gpus=2")
	if out != want {
		t.Errorf("without --topo:\n%s\nwith --topo dgx-h100x10,gpus=2:\n%s", out, want)
	}
	one, err := os.ReadFile(filepath.Join("..", "..", "fidelity", "nccl-logs", "xxrjun-h100-allreduce-4xH100.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ownNode := writeTemp(t, dir, "own-node.txt", string(one)+"# a copy of one's own\n") // one node's: a fit in a second
	if status, out, errOut := commsim("calibrate", "--log", ownNode); status != 0 || !strings.Contains(errOut, "calibrate: --topo not given") || !strings.Contains(out, "dgx-h100,gpus=4") {
		t.Errorf("calibrate of an own log: status %d, stderr %q, stdout %q", status, errOut, out)
	}

	lines := strings.SplitAfter(string(data), "\n")
	rankLine := func(r int) int {
		for i, l := range lines {
			if strings.HasPrefix(l, fmt.Sprintf("#  Rank %2d ", r)) {
				return i
			}
		}
		t.Fatalf("no line of rank %d", r)
		return 0
	}
	edit := func(name string, change func(ls []string) []string) string {
		ls := change(append([]string(nil), lines...))
		return writeTemp(t, dir, name, strings.Join(ls, ""))
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"no devices", edit("none.txt", func(ls []string) []string {
			return append(ls[:rankLine(0)], ls[rankLine(19)+1:]...)
		}), "it names no GPUs"},
		{"some devices", edit("some.txt", func(ls []string) []string {
			return append(ls[:rankLine(2)], ls[rankLine(19):]...) // ranks 0, 1 and 19
		}), "it names the GPUs of 3 of its 20 ranks"},
		{"two GPUs", edit("mixed.txt", func(ls []string) []string {
			ls[rankLine(5)] = strings.Replace(ls[rankLine(5)], "H100 80GB HBM3", "H200", 1)
			return ls
		}), "different GPUs: NVIDIA H100 80GB HBM3 (rank 0) and NVIDIA H200 (rank 5"},
		{"round robin", edit("rr.txt", func(ls []string) []string {
			ls[rankLine(1)] = strings.Replace(ls[rankLine(1)], "cnode3-002 device  1 [0000:c3:00]", "cnode3-003 device  0 [0000:9d:00]", 1)
			ls[rankLine(2)] = strings.Replace(ls[rankLine(2)], "cnode3-003 device  0 [0000:9d:00]", "cnode3-002 device  1 [0000:c3:00]", 1)
			return ls
		}), "not numbered host by host (rank 1 is on cnode3-003"},
		{"uneven hosts", edit("uneven.txt", func(ls []string) []string {
			ls[rankLine(3)] = strings.Replace(strings.Replace(ls[rankLine(3)], "cnode3-003", "cnode3-002", 1), "device  1 [0000:c3:00]", "device  2 [0000:d3:00]", 1)
			return ls
		}), "hosts run different numbers of ranks"},
		{"twice", edit("twice.txt", func(ls []string) []string {
			return append(ls[:rankLine(0)+1], append([]string{strings.Replace(ls[rankLine(0)], "cnode3-002", "cnode3-099", 1)}, ls[rankLine(0)+1:]...)...)
		}), "it names rank 0 twice"},
		{"one name, two machines", edit("alike.txt", func(ls []string) []string {
			for _, r := range []int{2, 3} {
				ls[rankLine(r)] = strings.Replace(ls[rankLine(r)], "cnode3-003", "cnode3-002", 1)
			}
			return ls
		}), "ranks 0 and 2 both run on device 0 [0000:9d:00] of cnode3-002"},
		{"a PCIe card", edit("pcie.txt", func(ls []string) []string {
			for r := range 20 {
				ls[rankLine(r)] = strings.Replace(ls[rankLine(r)], "H100 80GB HBM3", "H100 PCIe", 1)
			}
			return ls
		}), "no preset for \"NVIDIA H100 PCIe\": a PCIe card"},
	} {
		status, out, errOut := commsim("fidelity", "--log", tc.path)
		if status != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "needs --topo") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: status %d, stderr %q; want 2 and one line with %q", tc.name, status, errOut, tc.want)
		}
	}
}

// withoutDevices writes the log at path less its device lines, so that
// no preset can be taken from it, and returns the copy's path.
func withoutDevices(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(string(data), "\n") {
		if !strings.HasPrefix(strings.TrimLeft(l, "# "), "Rank ") {
			kept = append(kept, l)
		}
	}
	return writeTemp(t, t.TempDir(), filepath.Base(path), strings.Join(kept, ""))
}

// TestTuningTakesTheLogsPreset: tuning --log without --topo runs on the
// preset the log's nccl-tests device lines name (here NCCL's cost table of
// a 2 × 8 H100 run after a 2 × 8 H100 sweep), says so, and prints what
// --topo naming it prints; a log that names none keeps dgx-h100.
func TestTuningTakesTheLogsPreset(t *testing.T) {
	var both []byte
	for _, path := range []string{
		filepath.Join("..", "..", "fidelity", "nccl-logs", "nccl-tests-309-allreduce-16xH100.txt"),
		filepath.Join(costTables, "nccl-issue-1519-2x8xH100.txt"),
	} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		both = append(both, data...)
	}
	log := writeTemp(t, t.TempDir(), "both.txt", string(both))
	status, out, errOut := commsim("tuning", "--log", log)
	if status != 0 || !strings.Contains(errOut, "tuning: --topo not given") || !strings.Contains(errOut, ": dgx-h100x2 (") {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
	if _, want, _ := commsim("tuning", "--log", log, "--topo", "dgx-h100x2"); out != want {
		t.Errorf("without --topo:\n%s\nwith --topo dgx-h100x2:\n%s", out, want)
	}
	status, out, errOut = commsim("tuning", "--log", filepath.Join(costTables, "nccl-issue-1519-2x8xH100.txt"))
	if status != 0 || strings.Contains(errOut, "--topo not given") || !strings.Contains(out, "cost table on dgx-h100 (") {
		t.Errorf("a log that names no GPUs: status %d, stderr %q, stdout %.200q; want dgx-h100's table", status, errOut, out)
	}
}
