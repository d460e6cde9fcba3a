package main

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/nccl"
)

// benchRecords runs bench with --format json and returns its records.
func benchRecords(t *testing.T, args ...string) ([]jsonRow, string) {
	t.Helper()
	status, out, errOut := commsim(append(append([]string{"bench"}, args...), "--format", "json")...)
	if status != 0 {
		t.Fatalf("%q: status %d: %s", args, status, errOut)
	}
	return jsonLines[jsonRow](t, out), errOut
}

// TestNcclTestsFlagsMeanWhatCommsimsDo: nccl-tests' command line gives the
// sweep commsim's own flags give: -g 4 of switch:8 is switch:4 driven by
// one thread, -d float is f32, -o max is --redop max, -c 1 is --check,
// --op all_reduce is allreduce; -n 20 times twenty runs back to back,
// which a ring all-reduce under the thread's floor takes each as long as
// one; -w is noted on sim, which has nothing to warm up.
func TestNcclTestsFlagsMeanWhatCommsimsDo(t *testing.T) {
	want, _ := benchRecords(t, "--topo", "switch:4", "-g", "4", "--op", "allreduce", "--dtype", "f32", "--redop", "max", "--check", "-b", "1KiB", "-e", "64KiB", "-f", "8")
	for _, args := range [][]string{
		{"--topo", "switch:8", "-g", "4", "--op", "all_reduce", "-d", "float", "-o", "max", "-c", "1", "-n", "20", "-w", "5", "-b", "1K", "-e", "64K", "-f", "8"},
		{"--topo", "switch:8", "--ngpus", "4", "--op", "all_reduce_perf", "--datatype", "float", "--redop", "max", "--check=1", "--iters", "20", "--warmup_iters", "5",
			"--minbytes", "1K", "--maxbytes", "64K", "--stepfactor", "8"},
		{"--topo", "switch:8", "-g", "4", "-o", "max", "--check", "-b", "1K", "-e", "64K", "-f", "8"},
	} {
		got, errOut := benchRecords(t, args...)
		if len(got) != len(want) {
			t.Fatalf("%q: %d rows, want %d", args, len(got), len(want))
		}
		for i := range got {
			g, w := got[i], want[i]
			if g.Op != w.Op || g.DType != w.DType || g.Redop != w.Redop || g.Ranks != 4 || g.Bytes != w.Bytes || g.TimeUS != w.TimeUS ||
				g.Wrong == nil || *g.Wrong != 0 || g.InWrong == nil || g.Topology != "switch:8 (first 4 GPUs)" {
				t.Errorf("%q: row %d %+v, want %+v", args, i, g, w)
			}
		}
		if warm := strings.Contains(strings.Join(args, " "), "5"); warm != strings.Contains(errOut, "note: -w: on sim there is nothing to warm up") {
			t.Errorf("%q: stderr %q", args, errOut)
		}
	}
}

// TestBenchGPUsPerThreadHoldsToTheHostFloor: -g N (N > 1) has one thread
// launch every collective on N GPUs, so no simulated size takes less than
// nccl.ThreadFloorUS(N); a size the GPUs take longer over keeps its time,
// and without -g (a process a GPU) nothing is held. The header's nGpus
// says which.
func TestBenchGPUsPerThreadHoldsToTheHostFloor(t *testing.T) {
	sweep := []string{"--topo", "switch:4", "--algo", "ring", "-b", "1KiB", "-e", "64MiB", "-f", "64"}
	free, _ := benchRecords(t, sweep...)
	held, _ := benchRecords(t, append(sweep, "-g", "4")...)
	floor := nccl.ThreadFloorUS(4)
	if len(free) != 3 || len(held) != 3 || !(free[0].TimeUS < floor) || !(free[2].TimeUS > floor) {
		t.Fatalf("want a size under the floor and one over it: %+v", free)
	}
	for i := range free {
		if want := max(free[i].TimeUS, floor); held[i].TimeUS != want || held[i].InTimeUS != want {
			t.Errorf("%d B with -g 4: %v us out of place, %v in place; want %v", free[i].Bytes, held[i].TimeUS, held[i].InTimeUS, want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{{sweep, "# nThread 1 nGpus 1 "}, {append(sweep, "-g", "4"), "# nThread 1 nGpus 4 "}} {
		_, out, _ := commsim(append([]string{"bench"}, c.args...)...)
		if !strings.Contains(out, c.want) || strings.Contains(out, "nccl.ThreadFloorUS") != (c.want == "# nThread 1 nGpus 4 ") {
			t.Errorf("%q: want %q, and the floor named only with -g:\n%s", c.args, c.want, out)
		}
	}
	// --thread-gpus is the floor without -g's choice of GPUs: every rank
	// runs, in threads of N (nccl-tests' -g under mpirun).
	all, _ := benchRecords(t, "--topo", "switch:8", "--algo", "rd", "-b", "1KiB", "-e", "1KiB", "--thread-gpus", "4")
	if len(all) != 1 || all[0].Ranks != 8 || all[0].TimeUS != floor {
		t.Errorf("--thread-gpus 4 on switch:8: %+v, want 8 ranks at %v us", all, floor)
	}
	for args, want := range map[string]string{
		"--thread-gpus 3":      "--thread-gpus 3: switch:8's 8 GPUs are no whole number of threads of 3",
		"--thread-gpus 0":      "--thread-gpus 0: want 1 or more GPUs",
		"-g 4 --thread-gpus 2": "-g 4 and --thread-gpus 2 disagree",
	} {
		status, _, errOut := commsim(append([]string{"bench", "--topo", "switch:8", "-b", "1K", "-e", "1K"}, strings.Fields(args)...)...)
		if status != 2 || !strings.Contains(errOut, want) {
			t.Errorf("%s: status %d, stderr %q; want 2 and %q", args, status, errOut, want)
		}
	}
	if status, _, errOut := commsim("bench", "--backend", "cuda", "--thread-gpus", "2"); status != 2 || !strings.Contains(errOut, "--thread-gpus is for the simulator") {
		t.Errorf("--thread-gpus on cuda: status %d, %q", status, errOut)
	}
	// compare holds every algorithm to it alike, and says so.
	_, out, _ := commsim("compare", "--topo", "switch:4", "-g", "4", "-b", "1KiB", "-e", "1KiB")
	if !strings.Contains(out, "no size takes less than those 4 launches of host time, 17.48 us") || strings.Count(out, " 17.48 ") < 2 {
		t.Errorf("compare -g 4:\n%s", out)
	}
}

func TestNcclTestsOpNames(t *testing.T) {
	for name, op := range map[string]string{"all_reduce": "allreduce", "reduce_scatter": "reducescatter", "all_gather": "allgather",
		"alltoall": "alltoall", "broadcast_perf": "broadcast", "sendrecv": "sendrecv", "AllReduce": "allreduce"} {
		rows, _ := benchRecords(t, "--topo", "ring:4", "--op", name, "-b", "1K", "-e", "1K")
		if rows[0].Op != op {
			t.Errorf("--op %s ran %s, want %s", name, rows[0].Op, op)
		}
	}
}

// TestCheckTakesNcclTestsValues: -c 0|1 and --check=0|1, a bare --check
// meaning 1; without a check the sweep runs timing only.
func TestCheckTakesNcclTestsValues(t *testing.T) {
	for _, c := range []struct {
		args    []string
		checked bool
	}{
		{nil, false}, {[]string{"--check"}, true}, {[]string{"--check=1"}, true}, {[]string{"--check=0"}, false},
		{[]string{"-c", "1"}, true}, {[]string{"-c", "0"}, false}, {[]string{"-c1"}, true}, {[]string{"--check=true"}, true},
	} {
		status, out, errOut := commsim(append([]string{"bench", "--topo", "ring:4", "-b", "1K", "-e", "1K"}, c.args...)...)
		if status != 0 {
			t.Fatalf("%q: status %d: %s", c.args, status, errOut)
		}
		checked := strings.Contains(out, "Out of bounds values : 0 OK") && strings.Contains(out, "validation: 1") && strings.Contains(out, "backend sim (data)")
		timing := !strings.Contains(out, "Out of bounds") && strings.Contains(out, "validation: 0") && strings.Contains(out, "backend sim (timing-only)")
		if checked != c.checked || timing == c.checked {
			t.Errorf("%q: checked %v, want %v:\n%s", c.args, checked, c.checked, out)
		}
	}
	// --data moves data without judging it.
	status, out, _ := commsim("bench", "--topo", "ring:4", "-b", "1K", "-e", "1K", "--data")
	if status != 0 || !strings.Contains(out, "backend sim (data)") || strings.Contains(out, "Out of bounds") {
		t.Errorf("--data:\n%s", out)
	}
}

// TestNcclTestsLaunchFlagsAreNoted: flags that tune nccl-tests' launches
// are accepted with one note each on stderr; the output is unchanged.
func TestNcclTestsLaunchFlagsAreNoted(t *testing.T) {
	base := []string{"bench", "--topo", "ring:4", "-b", "1K", "-e", "1K"}
	_, plain, _ := commsim(base...)
	status, out, errOut := commsim(append(base, "-G", "1", "-a", "1", "-z", "1", "-p", "1", "-t", "1")...)
	if status != 0 || out != plain {
		t.Fatalf("status %d, stdout changed:\n%s\nvs\n%s", status, out, plain)
	}
	for _, f := range []string{"-G", "-a", "-z", "-p"} {
		if !strings.Contains(errOut, "commsim: note: "+f+": ") {
			t.Errorf("no note for %s: %q", f, errOut)
		}
	}
	if strings.Contains(errOut, "note: -t") {
		t.Errorf("-t 1 is what commsim runs; noted anyway: %q", errOut)
	}
}

// A recipe's flags that ask for what commsim does anyway (-R 0, -C 0, -N
// 1, …) pass silently; others are noted, one line each, and change
// nothing.
func TestNcclTestsReportingFlagsAreNotedWhereTheyDiffer(t *testing.T) {
	base := []string{"bench", "--topo", "ring:4", "-b", "1K", "-e", "1K"}
	_, plain, _ := commsim(base...)
	status, out, errOut := commsim(append(base, "-R", "0", "-C", "0", "-S", "0", "-N", "1", "-y", "0", "-T", "0", "-x", "0", "-D", "0", "-V", "16", "-M", "0", "-u", "0", "-I", "0", "-K", "0")...)
	if status != 0 || out != plain || errOut != "" {
		t.Errorf("what commsim does anyway: status %d, stderr %q", status, errOut)
	}
	set := []string{"-R", "1", "-C", "1", "-S", "1", "-N", "0", "-y", "1", "-T", "30", "-x", "1", "-D", "1", "-V", "4", "-M", "1", "-u", "1", "-I", "1", "-K", "2"}
	status, out, errOut = commsim(append(base, set...)...)
	if status != 0 || out != plain || strings.Count(errOut, "\n") != len(set)/2 {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
	for i := 0; i < len(set); i += 2 {
		if !strings.Contains(errOut, "commsim: note: "+set[i]+": ") {
			t.Errorf("no note for %s: %q", set[i], errOut)
		}
	}
}

// nccl-tests' sweep by steps of -i bytes: where -f is 1, or -i is given
// without -f (nccl-tests' factor is 1 by default); -f above 1 multiplies
// and -i is then noted as ignored, as nccl-tests ignores it.
func TestNcclTestsLinearSweep(t *testing.T) {
	sizes := func(rows []jsonRow) (out []int64) {
		for _, r := range rows {
			out = append(out, r.Bytes)
		}
		return out
	}
	for _, c := range []struct {
		args []string
		want []int64
		note bool
	}{
		{[]string{"-b", "1M", "-e", "3M", "-f", "1"}, []int64{1 << 20, 2 << 20, 3 << 20}, false},
		{[]string{"-b", "1K", "-e", "4K", "-i", "1K"}, []int64{1024, 2048, 3072, 4096}, false},
		{[]string{"-b", "8", "-e", "20", "--stepbytes", "8"}, []int64{8, 16}, false},
		{[]string{"-b", "1K", "-e", "4K", "-i", "1K", "-f", "2"}, []int64{1024, 2048, 4096}, true},
	} {
		rows, errOut := benchRecords(t, append([]string{"--topo", "switch:4"}, c.args...)...)
		if got := sizes(rows); !slices.Equal(got, c.want) || c.note != strings.Contains(errOut, "note: -i: ignored") {
			t.Errorf("%q: sizes %v, want %v; stderr %q", c.args, got, c.want, errOut)
		}
	}
	status, out, _ := commsim("bench", "--topo", "switch:4", "-b", "1K", "-e", "2K", "-i", "1K")
	if status != 0 || !strings.Contains(out, "step: 1024(bytes)") {
		t.Errorf("the header of a linear sweep: status %d\n%s", status, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-i", "6"}, "--stepbytes 6: want a positive multiple of f32's 4 bytes"},
		{[]string{"-i", "0"}, "--stepbytes 0: want a positive multiple"},
		{[]string{"-i", "x"}, "--stepbytes: byte size"},
		{[]string{"-f", "0.5"}, "--factor must be a number > 1, or 1 for steps of --stepbytes"},
		{[]string{"-e", "1G", "-i", "8"}, "in steps of 8 has over 10000 sizes"},
	} {
		status, _, errOut := commsim(append([]string{"bench", "--topo", "switch:4", "-b", "8"}, c.args...)...)
		if status != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: status %d, %q, want %q", c.args, status, errOut, c.want)
		}
	}
}

// A recipe's -g 1, one GPU a process, is one rank on sim: said on stderr.
func TestNcclTestsOneGPUIsNoted(t *testing.T) {
	rows, errOut := benchRecords(t, "--topo", "dgx-h100", "-g", "1", "-b", "1K", "-e", "1K")
	if len(rows) != 1 || rows[0].Ranks != 1 || !strings.Contains(errOut, "note: -g 1: one rank of dgx-h100's 8 GPUs") {
		t.Errorf("-g 1: %+v, stderr %q", rows, errOut)
	}
	if _, errOut := benchRecords(t, "--topo", "dgx-h100", "-g", "2", "-b", "1K", "-e", "1K"); errOut != "" {
		t.Errorf("-g 2: stderr %q", errOut)
	}
}

// -r is nccl-tests' --root.
func TestNcclTestsRootFlag(t *testing.T) {
	got, _ := benchRecords(t, "--topo", "switch:4", "--op", "reduce", "-r", "2", "-b", "1K", "-e", "1K")
	if len(got) != 1 || got[0].Root != 2 {
		t.Errorf("-r 2: %+v", got)
	}
}

// TestNcclTestsFlagsOnEveryCommand: compare and what-if take -g and the
// other nccl-tests flags too.
func TestNcclTestsFlagsOnEveryCommand(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "switch:8", "-g", "4", "--op", "all_gather", "-d", "half", "--algos", "ring,rd", "-b", "1K", "-e", "4K", "-c", "1")
	if status != 0 || !strings.Contains(out, "allgather on switch:8 (first 4 GPUs) (4 ranks), f16") || !strings.Contains(out, "Out of bounds values : 0 OK") {
		t.Errorf("compare: status %d, stderr %q:\n%s", status, errOut, out)
	}
	status, out, errOut = commsim("what-if", "--topo", "ring:8", "-g", "4", "--op", "all_reduce", "-o", "max", "--algo", "ring", "-e", "4K", "-c", "1", "--fault", "rank 1 slow 50%")
	if status != 0 || !strings.Contains(out, "on ring:8 (first 4 GPUs) (4 ranks)") || !strings.Contains(out, "#wrong 0") {
		t.Errorf("what-if: status %d, stderr %q:\n%s", status, errOut, out)
	}
	status, _, errOut = commsim("what-if", "--model", "gpt2-small", "--topo", "dgx-h100", "-g", "4", "--fault", "rank 1 slow 50%")
	if status != 2 || !strings.Contains(errOut, "-g 4 goes with a collective") {
		t.Errorf("what-if --model -g: status %d, %q", status, errOut)
	}
	// On a real backend -g is the ranks of the process; it cannot disagree
	// with --ranks (refused before any device is looked for).
	status, _, errOut = commsim("bench", "--backend", "cuda", "-g", "2", "--ranks", "3", "-e", "8")
	if status != 2 || !strings.Contains(errOut, "-g 2 and --ranks 3 disagree") {
		t.Errorf("cuda -g/--ranks: status %d, %q", status, errOut)
	}
}

// TestDefaultOutputReadsBack: calibrate and fidelity read bench's default
// output as the nccl-tests log it imitates: every size, its out-of-place
// time as printed, the op and the type; and the simulator against its own
// log is off by nothing.
func TestDefaultOutputReadsBack(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "dgx-h100", "--op", "allreduce", "--algo", "ring", "-b", "1KiB", "-e", "64MiB", "-f", "4")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	lg, err := calibrate.ParseLog("bench.txt", []byte(out))
	if err != nil {
		t.Fatalf("calibrate cannot read bench's output: %v\n%s", err, out)
	}
	rows, _ := benchRecords(t, "--topo", "dgx-h100", "--op", "allreduce", "--algo", "ring", "-b", "1KiB", "-e", "64MiB", "-f", "4")
	if lg.Op != "allreduce" || lg.Type != "float" || len(lg.Samples) != len(rows) {
		t.Fatalf("log: op %q type %q, %d samples; want allreduce, float, %d", lg.Op, lg.Type, len(lg.Samples), len(rows))
	}
	for i, s := range lg.Samples {
		if s.Bytes != rows[i].Bytes || ncclTime(s.TimeUS) != ncclTime(rows[i].TimeUS) {
			t.Errorf("sample %d: %d B %v us, want %d B %v us", i, s.Bytes, s.TimeUS, rows[i].Bytes, rows[i].TimeUS)
		}
	}
	path := filepath.Join(t.TempDir(), "all_reduce.txt")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	status, fid, errOut := commsim("fidelity", "--log", path, "--topo", "dgx-h100", "--algo", "ring")
	if status != 0 || !strings.Contains(fid, "over 9 sizes") {
		t.Fatalf("fidelity: status %d, stderr %q:\n%s", status, errOut, fid)
	}
	if m := regexp.MustCompile(`(?m)^# median \|error\|[^\n]*`).FindString(fid); m == "" || !regexp.MustCompile(`\b0\.0%`).MatchString(m) {
		t.Errorf("fidelity of the simulator against itself is not 0.0%%:\n%s", fid)
	}
	status, cal, errOut := commsim("calibrate", "--log", path, "--topo", "dgx-h100", "--algo", "ring")
	if status != 0 {
		t.Fatalf("calibrate: status %d, stderr %q:\n%s", status, errOut, cal)
	}
}

// TestCSVColumnsMatchAcrossCommands: bench's and compare's CSV name the
// same quantities alike (compare has out-of-place runs and best), and
// both end with refined, gpus_per_thread and iters.
func TestCSVColumnsMatchAcrossCommands(t *testing.T) {
	header := func(args ...string) []string {
		status, out, errOut := commsim(append(args, "--topo", "ring:4", "-b", "1K", "-e", "1K", "--format", "csv")...)
		if status != 0 {
			t.Fatalf("%q: status %d: %s", args, status, errOut)
		}
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return recs[0]
	}
	bench, cmp := header("bench"), header("compare", "--algos", "ring")
	shared := []string{"op", "algo", "topology", "ranks", "dtype", "redop", "root", "bytes", "count", "time_us", "algbw_gbps", "busbw_gbps", "wrong"}
	if strings.Join(bench[:len(shared)], ",") != strings.Join(shared, ",") || strings.Join(cmp[:len(shared)], ",") != strings.Join(shared, ",") || cmp[len(cmp)-4] != "best" ||
		strings.Join(cmp[len(cmp)-3:], ",") != "refined,gpus_per_thread,iters" || strings.Join(bench[len(bench)-3:], ",") != "refined,gpus_per_thread,iters" {
		t.Errorf("bench %q\ncompare %q\nwant both to start %q", bench, cmp, shared)
	}
}

// TestJSONHasNoFloatNoise: times and bandwidths are rounded to 6 decimals
// (a picosecond, a kB/s): no JSON number carries more.
func TestJSONHasNoFloatNoise(t *testing.T) {
	noise := regexp.MustCompile(`\d\.\d{7,}`)
	for _, args := range [][]string{
		{"bench", "--topo", "dgx-h100", "-b", "8", "-e", "1GiB", "-f", "3", "--format", "json"},
		{"compare", "--topo", "ring:8,bw=33GB/s,lat=0.7us", "-b", "8", "-e", "1GiB", "-f", "3", "--format", "json"},
		{"compare", "--topo", "ring:8,bw=33GB/s,lat=0.7us", "-b", "8", "-e", "1GiB", "-f", "3", "--format", "csv"},
	} {
		status, out, errOut := commsim(args...)
		if status != 0 {
			t.Fatalf("%q: status %d: %s", args, status, errOut)
		}
		if m := noise.FindString(out); m != "" {
			t.Errorf("%q: %s has over 6 decimals:\n%s", args, m, out)
		}
	}
	if got := tidy(10.612798000000002); got != 10.612798 {
		t.Errorf("tidy(10.612798000000002) = %v", got)
	}
	if got := exact(3758096384013.9995); got != "3758096384014" {
		t.Errorf("exact(3758096384013.9995) = %s", got)
	}
}

// TestBenchNotesIgnoredRootAndRedop: a --root on an op without one, or a
// --redop on one that reduces nothing, is ignored as nccl-tests ignores
// -r and -o, and commsim says so; on an op that uses it, nothing is said.
func TestBenchNotesIgnoredRootAndRedop(t *testing.T) {
	for _, c := range []struct {
		args       []string
		root, redo bool
	}{
		{[]string{"--op", "allreduce", "--root", "3"}, true, false},
		{[]string{"--op", "reduce", "--root", "3", "--redop", "max"}, false, false},
		{[]string{"--op", "allgather", "-o", "max", "-r", "0"}, true, true},
		{[]string{"--op", "broadcast", "--redop", "max"}, false, true},
		{[]string{"--op", "allreduce"}, false, false},
	} {
		args := append([]string{"bench", "--topo", "ring:4", "-b", "64", "-e", "64"}, c.args...)
		status, _, errOut := commsim(args...)
		if status != 0 {
			t.Fatalf("%v: status %d: %s", c.args, status, errOut)
		}
		if got := strings.Contains(errOut, "has no root; ignored"); got != c.root {
			t.Errorf("%v: root note %v, want %v: %s", c.args, got, c.root, errOut)
		}
		if got := strings.Contains(errOut, "reduces nothing; ignored"); got != c.redo {
			t.Errorf("%v: redop note %v, want %v: %s", c.args, got, c.redo, errOut)
		}
	}
}

// TestBenchTimesRunsBackToBack: -n N times N runs launched back to back,
// as nccl-tests does, and -m M makes each run M collectives, N × M in
// all. A broadcast's root starts its next run while the last one still
// flows down the chain, so at 16 MiB on dgx-h100 twenty runs take well
// under twenty times one; in the simulator so do sendrecv's of 64 KiB
// across two nodes, whose ranks fed over NVLink run ahead of those fed
// over the network. An all-reduce keeps every rank busy to its end, so
// its mean is one run's time. Without -n a rooted collective's sweep says
// that it times one run alone (calibrate.RunsOverlap: a published
// multi-node sendrecv does not overlap as the model does). The header
// states the runs.
func TestBenchTimesRunsBackToBack(t *testing.T) {
	for _, c := range []struct {
		topo, op, size string
		overlap        bool
	}{{"dgx-h100", "broadcast", "16M", true}, {"dgx-h100", "reduce", "16M", true}, {"dgx-h100x2", "sendrecv", "64K", true}, {"dgx-h100", "allreduce", "16M", false}} {
		args := []string{"--topo", c.topo, "--algo", "nccl", "-b", c.size, "-e", c.size, "--op", c.op}
		one, errOne := benchRecords(t, args...)
		twenty, errTwenty := benchRecords(t, append(args, "-n", "20")...)
		grouped, _ := benchRecords(t, append(args, "-n", "5", "-m", "4")...)
		if len(one) != 1 || len(twenty) != 1 || len(grouped) != 1 {
			t.Fatalf("%s: %d, %d and %d rows", c.op, len(one), len(twenty), len(grouped))
		}
		a, b := one[0].TimeUS, twenty[0].TimeUS
		if c.overlap && !(b < 0.9*a) || !c.overlap && math.Abs(b-a) > 1e-3*a {
			t.Errorf("%s: %v µs alone, %v µs a run of twenty back to back (overlap %v)", c.op, a, b, c.overlap)
		}
		if grouped[0].TimeUS != b || twenty[0].Iters != 20 || grouped[0].Iters != 20 {
			t.Errorf("%s: -n 5 -m 4 %v µs (%d runs), -n 20 %v µs (%d runs): want the same twenty", c.op, grouped[0].TimeUS, grouped[0].Iters, b, twenty[0].Iters)
		}
		note := "timed as one run alone"
		if strings.Contains(errOne, note) != (c.op == "broadcast" || c.op == "reduce") || strings.Contains(errTwenty, note) {
			t.Errorf("%s: stderr %q without -n, %q with", c.op, errOne, errTwenty)
		}
	}
	_, out, _ := commsim("bench", "--op", "broadcast", "-n", "5", "-m", "4", "--topo", "dgx-h100", "-b", "16M", "-e", "16M")
	if !strings.Contains(out, " iters: 5 agg iters: 4 ") {
		t.Errorf("the header does not say five runs of four:\n%s", out)
	}
}
