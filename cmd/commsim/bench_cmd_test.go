package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw/cuda"
	"github.com/spf13/cobra"
)

func TestBenchBadInputExits2(t *testing.T) {
	base := []string{"bench", "--topo", "ring:4", "-b", "8", "-e", "64"}
	cases := map[string][]string{
		"unknown op":        {"--op", "allfoo"},
		"unknown algo":      {"--algo", "bogus"},
		"algo lacks op":     {"--op", "alltoall", "--algo", "ring"},
		"unknown dtype":     {"--dtype", "f8"},
		"unknown redop":     {"--redop", "xor"},
		"unknown format":    {"--format", "xml"},
		"unknown backend":   {"--backend", "tpu"},
		"min > max":         {"-b", "128", "-e", "64"},
		"negative size":     {"-b", "-8"},
		"factor below 1":    {"-f", "0.5"},
		"factor 0.5":        {"-f", "0.5"},
		"not a multiple":    {"-b", "6", "--dtype", "f64"},
		"root out of range": {"--op", "broadcast", "--root", "4"},
		"bad topology":      {"--topo", "ring:0"},
		"missing file":      {"--topo", "/no/such.yaml"},
		"absurd world":      {"--topo", "switch:2000000"},
		"too much memory":   {"--topo", "switch:64", "-e", "1GiB", "--check"},
		"too much data":     {"--topo", "switch:64", "-e", "1GiB", "--data"},
		"check timing":      {"--check", "--timing-only"},
		"data timing":       {"--data", "--timing-only"},
		"native on sim":     {"--algo", "native"},
		"stray argument":    {"extra"},
		// nccl-tests' flags with values commsim cannot take
		"-g 0":               {"-g", "0"},
		"-g past the topo":   {"-g", "5"},
		"-n 0":               {"-n", "0"},
		"-m 0":               {"-m", "0"},
		"-n × -m too many":   {"-n", "100000", "-m", "100000"},
		"-w -1":              {"-w", "-1"},
		"-t 2":               {"-t", "2"},
		"-c 2":               {"-c", "2"},
		"--check=yes":        {"--check=yes"},
		"--check 1":          {"--check", "1"},
		"--check 2":          {"--check", "2"},
		"reduction as --op":  {"--op", "sum"},
		"-d all":             {"-d", "all"},
		"-o mulsum":          {"-o", "mulsum"},
		"-n × -m past sim's": {"-n", "1000", "-m", "101"},
	}
	for name, extra := range cases {
		status, out, errOut := commsim(append(append([]string{}, base...), extra...)...)
		if status != 2 {
			t.Errorf("%s: status %d, want 2 (stderr %q)", name, status, errOut)
			continue
		}
		if strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 || out != "" {
			t.Errorf("%s: want one line on stderr and nothing on stdout, got %q / %q", name, errOut, out)
		}
	}
	for _, c := range []struct{ args, want string }{
		{"--check 2", `stray argument "2": --check takes 0 or 1`},
		{"-d all", `-d/--dtype "all": one type a sweep (nccl-tests' -d all runs each in turn`},
		{"-d int8", `-d/--dtype "int8": unknown element type; want f32, f64`},
		{"-o all", `-o/--redop "all": one reduction a sweep`},
		{"--algo nccl-nvls --op reduce", "algorithm nccl-nvls has no reduce (for reduce use one of ring, rhd, tree, dbtree, direct, nccl-ring, auto, nccl)"},
		{"--algo nccl --nccl-version=", "--nccl-version is empty: give a value, or leave the flag out for the default"},
		{"--algo nccl --nccl-proto=", "--nccl-proto is empty"},
		{"--output_file=", "--output_file is empty"},
		{"--plot= --trace=x.json", "--plot is empty"},
		{"--algo nccl --nccl-machine=", "--nccl-machine is empty"},
		{"--algo nccl-pat", "algorithm nccl-pat has no allreduce (for allreduce use one of ring, rd, rhd, tree, dbtree, direct, nccl-ring, nccl-tree, auto, nccl; " +
			"where switches reduce, nccl-nvls, nccl-nvlstree, nccl-collnet-direct, nccl-collnet-chain)"},
	} {
		if _, _, errOut := commsim(append([]string{"bench"}, strings.Fields(c.args)...)...); !strings.Contains(errOut, c.want) || strings.Contains(errOut, "hw: ") || strings.Contains(errOut, "ops: ") {
			t.Errorf("%s: %q, want %q and no package's prefix", c.args, errOut, c.want)
		}
	}
	// Memory past the largest int64 is said so, not wrapped negative.
	if status, _, errOut := commsim("bench", "--topo", "ring:8", "-b", "8", "-e", "9223372036854775800", "--check"); status != 2 || !strings.Contains(errOut, "needs more than 8 EiB of simulated device memory") {
		t.Errorf("--check of 2^63 bytes: status %d, %q", status, errOut)
	}
}

// TestRealBackendsWithoutDevicesAreRuntimeErrors runs where there is no
// GPU (CI); on a machine with one the backend is tested by hw/cuda.
func TestRealBackendsWithoutDevicesAreRuntimeErrors(t *testing.T) {
	if cuda.Available() == nil {
		t.Skip("a CUDA GPU is present")
	}
	for _, tc := range []struct{ backend, want string }{
		{"cuda", "libcuda.so.1"},
		{"metal", "needs macOS"},
	} {
		status, out, errOut := commsim("bench", "--backend", tc.backend, "-e", "8")
		if status != 1 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%s: status %d, stdout %q, stderr %q", tc.backend, status, out, errOut)
		}
	}
}

func TestBackendFlagMisuseIsUsageError(t *testing.T) {
	for name, args := range map[string][]string{
		"ranks on sim":        {"--ranks", "4"},
		"no ranks on sim":     {"--ranks", "0"}, // given, not the default
		"no ranks on cuda":    {"--backend", "cuda", "--ranks", "0"},
		"placement on sim":    {"--placement", "virtual"},
		"native on sim":       {"--algo", "native"},
		"timing-only on cuda": {"--backend", "cuda", "--timing-only"},
		"trace on metal":      {"--backend", "metal", "--trace", "t.json"},
		// The note on a rooted sweep's lone runs waits for its plans.
		"a tree broadcast": {"--algo", "nccl", "--op", "broadcast", "--nccl-env", "NCCL_ALGO=tree"},
	} {
		status, _, errOut := commsim(append([]string{"bench", "-e", "8"}, args...)...)
		if status != 2 || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 {
			t.Errorf("%s: status %d, stderr %q; want 2 and one line", name, status, errOut)
		}
	}
}

func TestBenchTableHasNcclTestsColumnsAndChecks(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "switch:4", "--op", "allreduce", "--algo", "ring", "-b", "8", "-e", "4KiB", "--check", "--format", "table")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"size(B)", "count", "type", "redop", "root", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "in-place", "Out of bounds values : 0 OK", "Avg bus bandwidth"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if rows := strings.Count(out, " f32 "); rows != 10 { // 8B..4KiB by 2
		t.Errorf("%d rows, want 10:\n%s", rows, out)
	}
}

// TestBenchTextIsNcclTestsLayout: the default output is nccl-tests' own
// plain layout, header lines and units as nccl-tests prints them, rows
// aligned on its columns (a size ends where the header's "size" ends), the
// algorithm last, the verdict and the average bus bandwidth at the end.
func TestBenchTextIsNcclTestsLayout(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "switch:4", "--op", "allreduce", "--algo", "ring", "-b", "8", "-e", "4KiB", "--check")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{
		"# nThread 1 nGpus 1 minBytes 8 maxBytes 4096 step: 2(factor) warmup iters: 0 iters: 1 agg iters: 1 validation: 1 graph: 0\n", // a process a GPU
		"#                                                              out-of-place                       in-place          \n",
		"#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong  algo\n",
		"#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       \n",
		"\n        4096          1024     float     sum      -1    12.06    0.34    0.51      0    12.06    0.34    0.51      0  ring\n",
		"\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : ",
		"# times are simulated with data",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "│") {
		t.Errorf("the default output has a box table:\n%s", out)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			rows++
		}
	}
	if rows != 10 {
		t.Errorf("%d rows, want 10:\n%s", rows, out)
	}
	// Without --check the sweep is timed without data, and says so.
	status, out, _ = commsim("bench", "--topo", "switch:4", "--algo", "ring", "-b", "8", "-e", "4KiB")
	if status != 0 || !strings.Contains(out, "backend sim (timing-only)") || !strings.Contains(out, "validation: 0") || strings.Contains(out, "Out of bounds") {
		t.Errorf("without --check:\n%s", out)
	}
}

func TestBenchJSONLinesFields(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "switch:8,bw=100GB/s,lat=1us", "--op", "allgather", "--algo", "ring",
		"-b", "8KiB", "-e", "8KiB", "--format", "json", "--check")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1: %q", len(lines), out)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"op", "algo", "topology", "ranks", "dtype", "redop", "bytes", "count", "time_us", "algbw_gbps", "busbw_gbps", "wrong"} {
		if _, ok := rec[k]; !ok {
			t.Errorf("record lacks %q: %v", k, rec)
		}
	}
	// Ring allgather of 8 KiB total on 8 ranks: 7 steps of 1us + 1KiB/100GB/s
	// each way through the switch: 7 × (2us + 10.24ns).
	if got, want := rec["time_us"].(float64), 7*(2+0.01024); abs(got-want) > 1e-9 {
		t.Errorf("time_us = %v, want %v", got, want)
	}
	if rec["wrong"].(float64) != 0 || rec["redop"] != "none" || rec["bytes"].(float64) != 8192 {
		t.Errorf("record = %v", rec)
	}
	// busbw = algbw × (p−1)/p
	if a, b := rec["algbw_gbps"].(float64), rec["busbw_gbps"].(float64); abs(b-a*7/8) > 1e-6 {
		t.Errorf("busbw %v is not algbw %v × 7/8", b, a)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestBenchCSV(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "ring:3", "--op", "broadcast", "--algo", "ring", "--root", "2", "-b", "4", "-e", "16", "--format", "csv")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || recs[0][0] != "op" || recs[1][6] != "2" || recs[1][5] != "none" {
		t.Fatalf("csv = %q", recs)
	}
}

// TestBenchCheckFindsEveryOpCorrect runs --check for every op and a few
// dtypes and reduce ops; any wrong element fails.
func TestBenchCheckFindsEveryOpCorrect(t *testing.T) {
	for _, op := range []string{"allreduce", "reducescatter", "allgather", "gather", "broadcast", "reduce", "alltoall", "sendrecv"} {
		for _, dt := range []string{"f32", "f16", "bf16", "i32", "u8", "f64"} {
			for _, redop := range []string{"sum", "prod", "max", "avg"} {
				status, out, errOut := commsim("bench", "--topo", "ring:5", "--op", op, "--dtype", dt, "--redop", redop, "--root", "3",
					"-b", "40", "-e", "4000", "-f", "10", "--check", "--format", "json")
				if status != 0 {
					t.Fatalf("%s %s %s: status %d: %s", op, dt, redop, status, errOut)
				}
				if strings.Contains(out, `"wrong":null`) || strings.Contains(out, `"inplace_wrong":null`) {
					t.Fatalf("%s %s %s: unchecked rows:\n%s", op, dt, redop, out)
				}
				for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
					if !strings.Contains(line, `"wrong":0,`) || !strings.Contains(line, `"inplace_wrong":0`) {
						t.Fatalf("%s %s %s: wrong elements:\n%s", op, dt, redop, line)
					}
				}
			}
		}
	}
}

// TestBenchIsDeterministic runs a contended sweep twice: the bytes match.
func TestBenchIsDeterministic(t *testing.T) {
	args := []string{"bench", "--topo", "cluster:2x4", "--op", "alltoall", "--algo", "direct", "-b", "1KiB", "-e", "1MiB", "-f", "4", "--format", "csv"}
	_, a, _ := commsim(args...)
	_, b, _ := commsim(args...)
	if a != b || a == "" {
		t.Fatalf("two runs differ:\n%s\n---\n%s", a, b)
	}
}

// TestBenchRefusesSweepsThatWouldTakeHours: 102 sizes of a ring
// all-reduce on 4096 ranks, every rank simulated, 84M plan steps each
// (the ring's steps do not grow with its size), at about a microsecond a
// step, would take over two hours.
func TestBenchRefusesSweepsThatWouldTakeHours(t *testing.T) {
	skipInRaceRun(t, "an estimate of 102 sizes on 4096 ranks; TestCheckDurationCountsEveryRun estimates under it")
	status, _, errOut := commsim("bench", "--topo", "switch:4096", "--op", "allreduce", "--algo", "ring", "-b", "8", "-e", "1GiB", "-f", "1.2", "--timing-only", "--symmetry=false")
	if status != 2 || !strings.Contains(errOut, "hours") || !strings.Contains(errOut, "limit is 1 hour") {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
}

// TestBenchTraceMatchesReportedTime: the trace of a one-size sweep ends
// where the two runs' reported times say it should, and shows link rates.
func TestBenchTraceMatchesReportedTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.json")
	status, out, errOut := commsim("bench", "--topo", "switch:4,bw=100GB/s,lat=1us", "--op", "allreduce", "--algo", "ring",
		"-b", "1MiB", "-e", "1MiB", "--timing-only", "--format", "json", "--trace", path)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var rec struct {
		TimeUS   float64 `json:"time_us"`
		InTimeUS float64 `json:"inplace_time_us"`
	}
	json.Unmarshal([]byte(out), &rec)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Ph  string  `json:"ph"`
			Ts  float64 `json:"ts"`
			Dur float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	end, counters, arrows := 0.0, 0, 0
	for _, ev := range tr.TraceEvents {
		switch ev.Ph {
		case "X":
			end = max(end, ev.Ts+ev.Dur)
		case "C":
			counters++
		case "s":
			arrows++
		}
	}
	// Out of place then in place, back to back from time 0.
	if want := rec.TimeUS + rec.InTimeUS; abs(end-want) > 1e-3 {
		t.Fatalf("trace ends at %v us, the two runs took %v us", end, want)
	}
	if counters == 0 || arrows == 0 {
		t.Fatalf("%d link counters, %d transfer arrows", counters, arrows)
	}
}

// TestBenchSymmetryChangesNothingButSpeed: on a switch and on a cluster of
// DGX nodes, symmetric plans are timed by default from the ranks that
// stand for all; the figures are the full simulation's, digit for digit,
// and the table says how many runs were mirrored.
func TestBenchSymmetryChangesNothingButSpeed(t *testing.T) {
	for _, tc := range []struct{ topo, op, algo string }{
		{"switch:64,reduce=500GB/s", "allreduce", "ring"}, {"switch:64,reduce=500GB/s", "allreduce", "rhd"},
		{"switch:64,reduce=500GB/s", "alltoall", "pairwise"}, {"switch:64,reduce=500GB/s", "allreduce", "auto"},
		{"dgx-h100x4", "allreduce", "ring"}, {"dgx-h100x4", "allgather", "rd"},
	} {
		args := []string{"bench", "--topo", tc.topo, "--op", tc.op, "--algo", tc.algo, "-b", "1KiB", "-e", "4MiB", "-f", "8", "--timing-only"}
		var csv [2]string
		for i, symmetry := range []string{"--symmetry=true", "--symmetry=false"} {
			status, out, errOut := commsim(append(args, symmetry, "--format", "csv")...)
			if status != 0 {
				t.Fatalf("%v %s: status %d: %s", args, symmetry, status, errOut)
			}
			csv[i] = out
		}
		if csv[0] != csv[1] {
			t.Errorf("%s/%s on %s: mirrored and full runs differ:\n%s\n---\n%s", tc.op, tc.algo, tc.topo, csv[0], csv[1])
		}
		_, table, _ := commsim(args...)
		if !strings.Contains(table, "runs were timed by simulating only the ranks that stand for all") {
			t.Errorf("%s/%s on %s: the table does not say that runs were mirrored:\n%s", tc.op, tc.algo, tc.topo, table)
		}
		_, table, _ = commsim(append(args, "--symmetry=false")...)
		if strings.Contains(table, "stand for all") {
			t.Errorf("%s/%s on %s: --symmetry=false still mirrored:\n%s", tc.op, tc.algo, tc.topo, table)
		}
	}
}

// TestBenchNamesRefinedSizes: where a tree's pieces are too fine to
// hold every channel (256 ranks × 16 channels at 32 MiB) and its
// channels fold, the run makes the ones it keeps at NCCL's pieces, and
// bench's and compare's text name those sizes, and their JSON and CSV
// flag them, since --symmetry=false (every channel, so coarser pieces)
// takes another time there; at 16 MiB every channel fits.
func TestBenchNamesRefinedSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("six sweeps of 256 ranks, one goroutine each; the race run (-short) would take minutes on them")
	}
	status, table, errOut := commsim("bench", "--topo", "dgx-h100x32,rail=true", "--algo", "nccl", "--nccl-algo", "tree", "--nccl-proto", "LL128", "-b", "16M", "-e", "32M", "--timing-only")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	if !strings.Contains(table, "\n# 32MiB: the channels that stand for all simulated at NCCL's pieces") {
		t.Errorf("the table does not name 32MiB, and 32MiB alone, as refined:\n%s", table)
	}
	status, table, errOut = commsim("compare", "--topo", "dgx-h100x32,rail=true", "--algos", "nccl", "--nccl-algo", "tree", "--nccl-proto", "LL128", "-b", "16M", "-e", "32M", "--timing-only")
	if status != 0 {
		t.Fatalf("compare: status %d: %s", status, errOut)
	}
	if !strings.Contains(table, "\n# 32MiB: the channels that stand for all simulated at NCCL's pieces") {
		t.Errorf("compare's table does not name 32MiB, and 32MiB alone, as refined:\n%s", table)
	}
	type record struct {
		Bytes   int64 `json:"bytes"`
		Refined bool  `json:"refined"`
	}
	for _, cmd := range []string{"bench", "compare"} {
		algo := map[string]string{"bench": "--algo", "compare": "--algos"}[cmd]
		status, out, errOut := commsim(cmd, "--topo", "dgx-h100x32,rail=true", algo, "nccl", "--nccl-algo", "tree", "--nccl-proto", "LL128", "-b", "16M", "-e", "32M", "--timing-only", "--format", "json")
		if status != 0 {
			t.Fatalf("%s json: status %d: %s", cmd, status, errOut)
		}
		if rs := jsonLines[record](t, out); len(rs) != 2 || rs[0].Refined || !rs[1].Refined {
			t.Errorf("%s json: %+v, want 32 MiB alone refined", cmd, rs)
		}
		status, out, errOut = commsim(cmd, "--topo", "dgx-h100x32,rail=true", algo, "nccl", "--nccl-algo", "tree", "--nccl-proto", "LL128", "-b", "16M", "-e", "32M", "--timing-only", "--format", "csv")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if status != 0 || len(lines) != 3 || !strings.HasSuffix(lines[0], ",refined,gpus_per_thread,iters") || !strings.HasSuffix(lines[1], ",false,1,1") || !strings.HasSuffix(lines[2], ",true,1,1") {
			t.Errorf("%s csv: status %d, stderr %q, want 32 MiB alone refined:\n%s", cmd, status, errOut, out)
		}
	}
}

// TestBenchSizesLikeNcclTests: nccl-tests' usual top sizes, 16G and 32G,
// run in timing-only mode with counts past 2^31 (every byte count exact in
// the JSON), and data mode refuses them naming the bytes it would need.
func TestBenchSizesLikeNcclTests(t *testing.T) {
	code, out, errOut := commsim("bench", "--topo", "switch:8", "--op", "allgather", "-b", "16G", "-e", "32G", "--timing-only", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	type row struct {
		Bytes int64   `json:"bytes"`
		Count int64   `json:"count"`
		Time  float64 `json:"time_us"`
	}
	rows := jsonLines[row](t, out)
	// The count is a rank's elements, as nccl-tests prints it: 32 GiB of
	// f32 over 8 ranks is 2^30 each, 2^33 in all.
	if len(rows) != 2 || rows[0].Bytes != 16<<30 || rows[1].Bytes != 32<<30 || rows[1].Count != 32<<30/4/8 || !(rows[1].Time > rows[0].Time) {
		t.Fatalf("rows %+v, want 16 GiB and 32 GiB (count %d)", rows, 32<<30/4/8)
	}
	code, _, errOut = commsim("bench", "--topo", "switch:8", "--op", "allreduce", "-b", "16G", "-e", "16G", "--data")
	if code != 2 || !strings.Contains(errOut, "384GiB") || !strings.Contains(errOut, "without --check and --data") {
		t.Fatalf("data mode at 16G: exit %d, %q; want a usage error naming the bytes", code, errOut)
	}
}

// TestSweepSecondsScalesStepsWithSize: a plan whose steps grow with its
// bytes (NCCL's chunked broadcast on 1024 ranks: 67M steps at 16 GiB, 10k
// at 8 B) costs its doubling sizes about twice the largest's steps, not
// 32 times; one whose steps do not (a ring's) costs every size the
// largest's.
func TestSweepSecondsScalesStepsWithSize(t *testing.T) {
	var sizes []int64
	for b := int64(8); b <= 16<<30; b *= 2 {
		sizes = append(sizes, b)
	}
	perStep := func(int64) float64 { return 1e-6 }
	if got := sweepSeconds(sizes, 1e4, 67e6, 1, perStep); got < 134 || got > 135 {
		t.Errorf("chunked: %.1f s, want about 2 × 67 s", got)
	}
	if got, want := sweepSeconds(sizes, 5e6, 5e6, 2, perStep), float64(len(sizes))*2*5; math.Abs(got-want) > 1e-9 {
		t.Errorf("a ring's: %.1f s, want %.1f", got, want)
	}
}

// TestBusBandwidthFactorsFollowNCCLTests: every collective's busbw is its
// algbw times nccl-tests' factor (PERFORMANCE.md): 2(p−1)/p for
// all-reduce, (p−1)/p for reduce-scatter, all-gather, all-to-all and
// gather, 1 for broadcast, reduce and sendrecv; and algbw is the size
// over the time.
func TestBusBandwidthFactorsFollowNCCLTests(t *testing.T) {
	const p = 8.0
	for op, factor := range map[string]float64{
		"allreduce": 2 * (p - 1) / p, "reducescatter": (p - 1) / p, "allgather": (p - 1) / p, "alltoall": (p - 1) / p,
		"gather": (p - 1) / p, "broadcast": 1, "reduce": 1, "sendrecv": 1,
	} {
		status, out, errOut := commsim("bench", "--topo", "switch:8,bw=100GB/s,lat=1us", "--op", op, "-b", "64KiB", "-e", "64KiB", "--format", "json", "--timing-only")
		if status != 0 {
			t.Fatalf("%s: status %d: %s", op, status, errOut)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &rec); err != nil {
			t.Fatalf("%s: %v: %q", op, err, out)
		}
		algbw, busbw, us := rec["algbw_gbps"].(float64), rec["busbw_gbps"].(float64), rec["time_us"].(float64)
		// JSON carries 6 decimals (5 for the time).
		if want := 65536 / (us * 1e3); abs(algbw-want) > 1e-5*want {
			t.Errorf("%s: algbw %v, want 64 KiB / %v us = %v", op, algbw, us, want)
		}
		if abs(busbw-algbw*factor) > 1e-5*busbw {
			t.Errorf("%s: busbw %v, want algbw %v × %v", op, busbw, algbw, factor)
		}
	}
}

// TestBenchCountsTheLinksFlowsCross: a direct all-reduce on a ring of
// 1024 GPUs makes 5M plan steps a size, whose flows cross 102 links on
// average: counting steps alone put its 40 sizes at under 4 minutes, where
// the flow solver's work makes it hours (one size of it on ring:512 took
// 18 s). The sweep is refused before it starts, naming the links; so is
// a comparison that has direct among its algorithms, and a what-if of it
// on ring:4096, which had no estimate at all.
func TestBenchCountsTheLinksFlowsCross(t *testing.T) {
	skipInRaceRun(t, "estimates of direct sweeps on ring:1024 and ring:4096; TestCheckDurationCountsEveryRun estimates under it")
	status, _, errOut := commsim("bench", "--topo", "ring:1024", "--op", "allreduce", "--algo", "direct", "-b", "8", "-e", "64M", "-f", "1.5", "--timing-only")
	if status != 2 || !strings.Contains(errOut, "sweep would take about") || !strings.Contains(errOut, "its flows crossing 102.5 links a step") {
		t.Fatalf("bench: status %d, stderr %q", status, errOut)
	}
	status, _, errOut = commsim("compare", "--topo", "ring:1024", "--op", "allreduce", "--algos", "ring,direct", "-b", "8", "-e", "64M", "-f", "1.5")
	if status != 2 || !strings.Contains(errOut, "comparison would take about") || !strings.Contains(errOut, "40 sizes of 2 algorithms") || !strings.Contains(errOut, "use fewer sizes (-b, -e, -f), fewer algorithms (--algos), fewer ranks (-g)") {
		t.Fatalf("compare: status %d, stderr %q", status, errOut)
	}
	status, _, errOut = commsim("what-if", "--topo", "ring:4096", "--op", "allreduce", "--algo", "direct", "--fault", "link gpu3-gpu4 down at 10us")
	if status != 2 || !strings.Contains(errOut, "what-if would take about 8.6 hours (1 size, up to 83869697 plan steps on 4096 ranks, its flows crossing 409.7 links a step)") || !strings.Contains(errOut, "; use fewer ranks (-g)") {
		t.Fatalf("what-if: status %d, stderr %q", status, errOut)
	}
}

// TestCheckDurationWarnsOfLongSweeps: a sweep estimated at minutes (24
// sizes of that all-reduce on ring:512, each run twice where no simulator
// is open to run it once) is said so on stderr before it starts, with the
// figures; a short one says nothing.
func TestCheckDurationWarnsOfLongSweeps(t *testing.T) {
	for _, c := range []struct {
		topo string
		want string
	}{
		{"ring:512", "commsim: this sweep may take about 15 minutes (24 sizes, up to 1308673 plan steps on 512 ranks, its flows crossing 51.3 links a step)\n"},
		{"ring:64", ""},
	} {
		var bf benchFlags
		bf.register(&cobra.Command{}, "auto")
		bf.topo, bf.op, bf.algo, bf.timingOnly = c.topo, "allreduce", "direct", true
		s, err := bf.parse()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		if err := s.checkDuration(nil, &stderr); err != nil || stderr.String() != c.want {
			t.Errorf("%s: %v, stderr %q, want %q", c.topo, err, stderr.String(), c.want)
		}
	}
}
