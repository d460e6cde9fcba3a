package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bench -J writes nccl-tests' JSON report: its layout, the NCCL
// environment the tuner ran in, the same bytes on a rerun; and fidelity
// reads it back, environment and all, to an error of 0.
func TestBenchJSONReportRoundTrips(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ar.json")
	args := []string{"bench", "--topo", "dgx-h100", "--algo", "nccl", "--nccl-version", "2.19", "--nccl-env", "NCCL_PROTO=Simple",
		"--nccl-channels", "4", "-b", "1K", "-e", "1M", "-f", "4", "-J", path}
	status, _, errOut := commsim(args...)
	if status != 0 || !strings.Contains(errOut, "commsim: wrote "+path) {
		t.Fatalf("status %d: %s", status, errOut)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Version     int      `json:"version"`
		Env         []string `json:"env"`
		NCCLVersion int      `json:"nccl_version"`
		Config      struct {
			GPUs    int `json:"ngpus"`
			Devices []struct {
				PID      int    `json:"pid"`
				Hostname string `json:"hostname"`
			} `json:"devices"`
		} `json:"config"`
		Results []struct {
			Size       int64  `json:"size"`
			Type       string `json:"type"`
			Root       string `json:"root"`
			OutOfPlace struct {
				Time  float64 `json:"time"`
				Wrong *int    `json:"nwrong"`
			} `json:"out_of_place"`
			Algo string `json:"algo"`
		} `json:"results"`
	}
	if err := json.Unmarshal(first, &rep); err != nil {
		t.Fatal(err)
	}
	wantEnv := []string{"NCCL_MAX_NCHANNELS=4", "NCCL_MIN_NCHANNELS=4", "NCCL_PROTO=Simple"}
	if rep.Version != 3 || rep.NCCLVersion != 21900 || !slices.Equal(rep.Env, wantEnv) || rep.Config.GPUs != 1 ||
		len(rep.Config.Devices) != 8 || rep.Config.Devices[0].PID != 0 || rep.Config.Devices[0].Hostname != "" { // a process a GPU, as sim times them
		t.Errorf("report: %s", first)
	}
	if len(rep.Results) != 6 || rep.Results[0].Size != 1024 || rep.Results[0].Type != "float" || rep.Results[0].Root != "    -1" ||
		!(rep.Results[0].OutOfPlace.Time > 0) || rep.Results[0].OutOfPlace.Wrong != nil || !strings.Contains(rep.Results[0].Algo, "/Simple/") {
		t.Errorf("results: %+v", rep.Results)
	}

	if status, _, errOut := commsim(args...); status != 0 {
		t.Fatalf("rerun: status %d: %s", status, errOut)
	}
	if again, _ := os.ReadFile(path); string(again) != string(first) {
		t.Error("a rerun wrote different bytes")
	}

	status, out, errOut := commsim("fidelity", "--log", path, "--topo", "dgx-h100")
	if status != 0 || !strings.Contains(out, "allreduce, algorithm nccl") || !strings.Contains(out, "(nccl-tests json), 6 sizes") ||
		!strings.Contains(out, "NCCL 2.19.0, NCCL_MAX_NCHANNELS=4, NCCL_MIN_NCHANNELS=4, NCCL_PROTO=Simple") || !strings.Contains(out, "median 0.0% over 6 sizes") {
		t.Errorf("fidelity of bench's own report: status %d\n%s\n%s", status, out, errOut)
	}
}

// A sweep from 0 bytes reads back too: its empty call, timed as nothing,
// is left out as fidelity leaves size 0 out.
func TestBenchJSONReportFromZeroBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "z.json")
	if status, _, errOut := commsim("bench", "--topo", "switch:4", "-b", "0", "-e", "1K", "-f", "4", "-J", path); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	status, out, errOut := commsim("fidelity", "--log", path, "--topo", "switch:4", "--algo", "auto")
	if status != 0 || !strings.Contains(out, "size 0 left out") || !strings.Contains(out, "median 0.0% over") {
		t.Errorf("status %d\n%s\n%s", status, out, errOut)
	}
}

// A sweep that fails half-way leaves its -J report unfinished after the
// sizes it measured, as nccl-tests leaves partial output: fidelity reads
// them with a warning, and no JSON reader takes the file for a finished
// run (it was a whole report, "okay" and averaged over what ran).
func TestBenchJSONReportOfAFailedSweepIsUnfinished(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part.json")
	if err := os.WriteFile(path, []byte("an earlier report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// 8 B and 8 KiB fit the clock's horizon at 1 B/s; 8 MiB does not.
	status, _, errOut := commsim("bench", "--topo", "switch:8,bw=1B/s", "-b", "8", "-e", "1GiB", "-f", "1024", "-J", path)
	if status != 1 || !strings.Contains(errOut, "wrote "+path+", partial: the 2 sizes measured") || !strings.Contains(errOut, "horizon") {
		t.Fatalf("status %d: %s", status, errOut)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err == nil || strings.Contains(string(data), "out_of_bounds") || strings.Contains(string(data), "average_bus_bandwidth") {
		t.Errorf("the partial report reads as a whole one (%v):\n%s", err, data)
	}
	status, out, errOut := commsim("fidelity", "--log", path, "--topo", "switch:8,bw=1B/s", "--algo", "auto")
	if status != 0 || !strings.Contains(errOut, "ends early") || !strings.Contains(out, "allreduce, algorithm auto") || !strings.Contains(out, "2 sizes") {
		t.Errorf("fidelity: status %d\n%s\n%s", status, out, errOut)
	}
}

// A file to write in a folder that does not exist, or over a folder, is
// a usage error found before the run: -J, and every command's --trace,
// --plot and --out.
func TestOutputFilesInNoFolderExit2(t *testing.T) {
	dir := t.TempDir()
	folder := filepath.Join(dir, "a.svg")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join("..", "..", "fidelity", "nccl-logs", "vultr-b200-allreduce-8xB200.txt")
	for path, want := range map[string]string{filepath.Join(dir, "no", "such", "dir", "r.svg"): ": there is no folder", folder: ": is a folder, not a file to write"} {
		for _, args := range [][]string{
			{"bench", "--topo", "switch:4", "-b", "1K", "-e", "1K", "-J", path},
			{"bench", "--topo", "switch:4", "-b", "1K", "-e", "1K", "--trace", path},
			{"train", "--model", "gpt2-small", "--topo", "switch:4", "--trace", path},
			{"what-if", "--topo", "switch:4", "--fault", "rank 1 slow 50%", "--trace", path},
			{"topo", "draw", "switch:4", "--out", path},
			{"calibrate", "--log", log, "--out", path},
			{"fidelity", "--log", log, "--plot", path},
		} {
			flag := args[len(args)-2]
			status, out, errOut := commsim(args...)
			if status != 2 || out != "" || !strings.Contains(errOut, flag+" "+args[len(args)-1]+want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
				t.Errorf("%s %s %s, refused before the run: status %d, %q", args[0], flag, path, status, errOut)
			}
		}
	}
}
