package main

// Tests written from a mutation-testing review of bench.go, tuning.go,
// train.go, nccljson.go and ncclcompat.go: each pins down behaviour a
// user relies on that no other test held (a refusal, a column's value, a
// note, a figure passed on), so that a small slip in it fails a test.

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/model"
)

// flatOut is out with every run of white space one space, so that a box
// table's row reads as one string.
func flatOut(out string) string { return strings.Join(strings.Fields(out), " ") }

// Kills T04, T05: -g over the topology names the range tuning takes, and
// -g N names the first N GPUs as the topology.
func TestTuningGPUsFlagNamesItsRangeAndItsFirstGPUs(t *testing.T) {
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100", "-g", "9")
	if status != 2 || out != "" || !strings.Contains(errOut, "-g 9: want 2 to 8, the GPUs of dgx-h100") {
		t.Errorf("-g 9: status %d, stderr %q; want 2 naming 2 to 8", status, errOut)
	}
	status, out, errOut = commsim("tuning", "--topo", "dgx-h100", "-g", "4", "--format", "json")
	var rep tuningReport
	if status != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Topology != "dgx-h100 (first 4 GPUs)" || !strings.HasPrefix(rep.System, "4 ranks") {
		t.Errorf("-g 4: status %d, stderr %q, topology %q, system %q", status, errOut, rep.Topology, rep.System)
	}
}

// Kills T13: the graphs listed are those of the algorithms the tuner may
// pick somewhere, not every graph NCCL builds.
func TestTuningGraphsAreOnlyOfAlgorithmsItsTunerMayPick(t *testing.T) {
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100x2", "--format", "json")
	var rep tuningReport
	if status != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
	var algos []string
	for _, g := range rep.Graphs {
		algos = append(algos, g.Algo)
		if !slices.ContainsFunc(rep.Cells, func(c tuningCell) bool { return c.Algo == g.Algo && c.Off == "" }) {
			t.Errorf("graph of %s listed, but every cell of it is off", g.Algo)
		}
	}
	if want := []string{"tree", "ring", "nvlstree"}; !slices.Equal(algos, want) {
		t.Errorf("graphs of %v, want %v", algos, want)
	}
}

// Kills T16: a graph's bandwidths are within a node, then across nodes.
func TestTuningGraphsGiveIntraThenInterBandwidth(t *testing.T) {
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100x2")
	if status != 0 || !strings.Contains(out, "nvlstree 8 × 40.0/48.0") {
		t.Errorf("status %d, stderr %q; want NVLS tree's 40 GB/s within a node and 48 across:\n%s", status, errOut, out)
	}
}

// Kills T15: a log with several cost tables says that only the first is
// read.
func TestTuningWarnsOfALogWithSeveralTables(t *testing.T) {
	one, err := os.ReadFile(filepath.Join(costTables, "eunomia-ncclebpf-2x1-socket.txt"))
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "two.txt")
	if err := os.WriteFile(log, append(slices.Clone(one), one...), 0o644); err != nil {
		t.Fatal(err)
	}
	status, _, errOut := commsim("tuning", "--topo", "cluster:2x1", "--log", log)
	if status != 0 || !strings.Contains(errOut, "prints 2 cost tables (one for each communicator its rank 0 set up); the first is read") {
		t.Errorf("status %d, stderr %q; want a warning that the first of 2 tables is read", status, errOut)
	}
}

// Kills T20, T21: --format csv's cells hold the JSON's figures and
// marks, each in its own column.
func TestTuningCSVCarriesTheJSONsCells(t *testing.T) {
	args := []string{"tuning", "--topo", "cluster:2x1", "--log", filepath.Join(costTables, "eunomia-ncclebpf-2x1-socket.txt")}
	status, out, errOut := commsim(append(args, "--format", "json")...)
	var rep tuningReport
	if status != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("json: status %d, stderr %q", status, errOut)
	}
	status, out, errOut = commsim(append(args, "--format", "csv")...)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if status != 0 || err != nil || len(recs) != len(rep.Cells)+1 {
		t.Fatalf("csv: status %d, %v, stderr %q: %d records for %d cells", status, err, errOut, len(recs), len(rep.Cells))
	}
	mark := func(b *bool) string {
		if b == nil {
			return ""
		}
		return strconv.FormatBool(*b)
	}
	differ := 0
	for i, c := range rep.Cells {
		want := []string{c.Op, c.Algo, c.Protocol, fmtFloat(c.LatencyUS), fmtFloat(c.AlgBW), c.Off, strconv.Itoa(c.Line),
			fmtFloat(*c.LoggedLatencyUS), fmtFloat(*c.LoggedAlgBW), mark(c.LatencyAgree), mark(c.BandwidthAgree)}
		if !slices.Equal(recs[i+1], want) {
			t.Errorf("csv row %d: %q, want %q", i+1, recs[i+1], want)
		}
		if mark(c.LatencyAgree) != mark(c.BandwidthAgree) {
			differ++
		}
	}
	if differ == 0 || rep.Cells[3].LatencyUS == rep.Cells[3].AlgBW {
		t.Errorf("the log holds no cell whose two marks or figures differ: the test proves nothing")
	}
}

// Kills T22: the cost table is laid out as NCCL's, in blocks of three
// algorithms.
func TestTuningTableHasBlocksOfThreeAlgorithms(t *testing.T) {
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100x2")
	var heads []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  Algorithm   |") {
			heads = append(heads, flatOut(line))
		}
	}
	want := []string{"Algorithm | Tree | Ring | CollNetDirect |", "Algorithm | CollNetChain | NVLS | NVLSTree |", "Algorithm | PAT |"}
	if status != 0 || !slices.Equal(heads, want) {
		t.Errorf("status %d, stderr %q: blocks %q, want %q", status, errOut, heads, want)
	}
}

// Kills T24, T25: the cells that are off are explained under "# off:",
// each reason once and each pair once in it.
func TestTuningOffReasonsNameEachPairOnce(t *testing.T) {
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100x2")
	_, reasons, ok := strings.Cut(out, "\n# off:\n")
	if status != 0 || !ok {
		t.Fatalf("status %d, stderr %q: no \"# off:\" line:\n%s", status, errOut, out)
	}
	lines := strings.Split(strings.TrimSpace(reasons), "\n")
	if len(lines) < 5 {
		t.Fatalf("%d reasons:\n%s", len(lines), reasons)
	}
	for _, line := range lines {
		pairs, _, ok := strings.Cut(strings.TrimPrefix(line, "#   "), ": ")
		list := strings.Split(pairs, ", ")
		if !ok || len(slices.Compact(slices.Sorted(slices.Values(list)))) != len(list) {
			t.Errorf("reason names a pair twice: %q", line)
		}
	}
}

// Kills T26, T27: a log's table set beside the model's marks a cell the
// model never picks "off", and its uncompared marks "-".
func TestTuningCheckMarksOffAndUncomparedCells(t *testing.T) {
	status, out, _ := commsim("tuning", "--topo", "dgx-h100x2", "--log", filepath.Join(costTables, "nccl-issue-1519-2x8xH100.txt"))
	if flat := flatOut(out); status != 0 || !strings.Contains(flat, "│ 14 │ Broadcast │ Tree │ LL │ 0.0/0.0 │ off │ - │ - │") {
		t.Errorf("status %d; want broadcast's tree off and uncompared:\n%s", status, out)
	}
}

// Kills T29: a call whose tuning line gives no NCCL model time (2.24 on)
// shows "-" there, not a time of 0.
func TestTuningCallsWithoutNCCLTimeShowADash(t *testing.T) {
	log := filepath.Join(t.TempDir(), "calls.txt")
	if err := os.WriteFile(log, []byte("h:1:1 [0] NCCL INFO AllGather: 65536 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100", "--log", log)
	if flat := flatOut(out); status != 0 || !strings.Contains(flat, "│ 1 │ allgather │ 65536 │ ring/LL/4ch │ - │") || strings.Contains(out, "0.000000") {
		t.Errorf("status %d, stderr %q; want no NCCL model time:\n%s", status, errOut, out)
	}
}

// Kills T34: --op takes sweeps of hundreds of sizes (the limit is
// 10000).
func TestTuningOpSweepsHundredsOfSizes(t *testing.T) {
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100", "--op", "allreduce", "-b", "8", "-e", "1G", "-f", "1.1", "--format", "csv")
	if n := strings.Count(out, "\n") - 1; status != 0 || n < 150 {
		t.Errorf("status %d, stderr %q: %d sizes, want about 200", status, errOut, n)
	}
}

// Kills T38: --op's CSV holds the JSON's times, each in its own column.
func TestTuningOpCSVCarriesTheJSONsTimes(t *testing.T) {
	args := []string{"tuning", "--topo", "dgx-h100x2", "--op", "allreduce", "-b", "1MiB", "-e", "1MiB"}
	status, out, errOut := commsim(append(args, "--format", "json")...)
	var rep struct {
		Sizes []tuningChoice `json:"sizes"`
	}
	if status != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Sizes) != 1 || rep.Sizes[0].NextUS <= rep.Sizes[0].TimeUS {
		t.Fatalf("json: status %d, stderr %q:\n%s", status, errOut, out)
	}
	status, out, _ = commsim(append(args, "--format", "csv")...)
	r := rep.Sizes[0]
	want := "1048576," + r.Choice + "," + fmtFloat(r.TimeUS) + "," + r.Next + "," + fmtFloat(r.NextUS) + "," + fmtFloat(r.Margin) + "\n"
	if status != 0 || !strings.HasSuffix(out, want) {
		t.Errorf("csv: status %d:\n%s\nwant its row %q", status, out, want)
	}
}

// Kills T40: the model prices no point-to-point call: its time is "-".
func TestTuningOpShowsNoTimeForPointToPoint(t *testing.T) {
	status, out, _ := commsim("tuning", "--topo", "dgx-h100x2", "--op", "sendrecv", "-b", "1MiB", "-e", "1MiB")
	if status != 0 || !strings.Contains(flatOut(out), "│ 1048576 │ p2p/Simple/4ch │ - │ │ - │ - │") {
		t.Errorf("status %d:\n%s", status, out)
	}
}

// writeModel writes a model profile of YAML text to a file and returns
// its path.
func writeModel(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Kills R16: a step's compute is every layer's forward and backward.
func TestTrainComputeIsEveryLayersForwardAndBackward(t *testing.T) {
	prof, err := model.Resolve("gpt2-small")
	if err != nil {
		t.Fatal(err)
	}
	want := 0.0
	for _, l := range prof.Layers {
		want += (l.Forward + l.Backward) * 1e6
	}
	rep := trainJSON(t, "train", "--model", "gpt2-small", "--topo", "dgx-h100", "--format", "json")
	if d := rep.ComputeUS - want; d > 1e-3 || d < -1e-3 {
		t.Errorf("compute %.4f us, want the profile's %.4f us", rep.ComputeUS, want)
	}
}

// Kills R20: rank 0's communication stream runs one bucket at a time: a
// bucket starts when it is ready and the one before has ended.
func TestTrainBucketsRunOneAfterAnother(t *testing.T) {
	rep := trainJSON(t, "train", "--model", "gpt2-small", "--topo", "dgx-h100", "--format", "json")
	waited := 0
	for i, b := range rep.Buckets {
		want := b.ReadyUS
		if i > 0 && rep.Buckets[i-1].EndUS > want {
			want, waited = rep.Buckets[i-1].EndUS, waited+1
		}
		if b.StartUS != want {
			t.Errorf("bucket %d starts at %.4f us, want %.4f (ready at %.4f)", i, b.StartUS, want, b.ReadyUS)
		}
	}
	if waited == 0 {
		t.Errorf("no bucket waited for the one before: the test proves nothing")
	}
}

// Kills R22: a bucket's algo names each plan once, however many of its
// parameters ran it.
func TestTrainBucketAlgoNamesEachPlanOnce(t *testing.T) {
	rep := trainJSON(t, "train", "--model", "gpt2-small", "--topo", "dgx-h100", "--algo", "ring", "--format", "json")
	if len(rep.Buckets) == 0 || rep.Buckets[0].Params < 2 {
		t.Fatalf("want a first bucket of several parameters: %+v", rep.Buckets)
	}
	for _, b := range rep.Buckets {
		if b.Algo != "ring" {
			t.Errorf("bucket %d of %d parameters: algo %q, want ring", b.Index, b.Params, b.Algo)
		}
	}
}

// Kills R24, R25: overlap is the percentage of communication hidden
// under compute, and a step that hides none reads 0, not a rounding
// error below it.
func TestTrainOverlapIsAPercentNeverBelowZero(t *testing.T) {
	rep := trainJSON(t, "train", "--model", "gpt2-small", "--topo", "dgx-h100", "--format", "json")
	if want := 100 * (rep.CommUS - rep.ExposedCommUS) / rep.CommUS; rep.OverlapPct != want || want < 10 {
		t.Errorf("overlap %v %%, want %v", rep.OverlapPct, want)
	}
	one := writeModel(t, "name: one\nlayers:\n  - {name: l0, params: 50000000, dtype: bf16, forward: 1us, backward: 1us}\n")
	rep = trainJSON(t, "train", "--model", one, "--topo", "ring:3", "--algo", "ring", "--format", "json")
	if rep.OverlapPct != 0 {
		t.Errorf("a step whose one bucket runs after all compute: overlap %v %%, want 0", rep.OverlapPct)
	}
}

// Kills R27: a profile's sharded layers make the step sharded without
// --sharded.
func TestTrainProfilesShardedLayersMakeAShardedStep(t *testing.T) {
	m := writeModel(t, "name: half\nlayers:\n  - {name: a, params: 1000000, dtype: bf16, forward: 10us, backward: 20us, sharded: true}\n"+
		"  - {name: b, params: 1000000, dtype: bf16, forward: 10us, backward: 20us}\n")
	rep := trainJSON(t, "train", "--model", m, "--topo", "switch:4", "--algo", "ring", "--format", "json")
	if !rep.Sharded || rep.Gathers == 0 {
		t.Errorf("sharded %v, %d gathers; want a sharded step", rep.Sharded, rep.Gathers)
	}
	status, out, _ := commsim("train", "--model", m, "--topo", "switch:4", "--algo", "ring")
	if status != 0 || !strings.Contains(out, "sharded (FSDP/ZeRO-3)") {
		t.Errorf("status %d; want the header to say the step is sharded:\n%s", status, out)
	}
}

// Kills R29: a count is written in the largest unit it reaches, one
// included.
func TestHumanCountUnits(t *testing.T) {
	for n, want := range map[int64]string{999: "999", 1000: "1.0K", 1500: "1.5K", 1e6: "1.0M", 124_400_000: "124.4M", 1e9: "1.0B", 7e9: "7.0B", 1e12: "1.0T"} {
		if got := humanCount(n); got != want {
			t.Errorf("humanCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// Kills R31, R32: train's CSV holds the JSON's figures, each in its own
// column.
func TestTrainCSVCarriesTheJSONsFigures(t *testing.T) {
	args := []string{"train", "--model", "gpt2-small", "--topo", "dgx-h100"}
	rep := trainJSON(t, append(args, "--format", "json")...)
	status, out, errOut := commsim(append(args, "--format", "csv")...)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if status != 0 || err != nil || len(recs) != len(rep.Buckets)+1 {
		t.Fatalf("status %d, %v, stderr %q: %d records for %d buckets", status, err, errOut, len(recs), len(rep.Buckets))
	}
	for i, b := range rep.Buckets {
		want := []string{rep.Model, rep.Topology, strconv.Itoa(rep.Ranks), f2(rep.StepUS), f2(rep.ComputeUS), f2(rep.CommUS), f2(rep.ExposedCommUS),
			f2(rep.OverlapPct), strconv.Itoa(b.Index), strconv.Itoa(b.Params), strconv.FormatInt(b.Bytes, 10), strconv.FormatBool(b.Sharded),
			f2(b.ReadyUS), f2(b.StartUS), f2(b.EndUS), b.Algo}
		if !slices.Equal(recs[i+1], want) {
			t.Errorf("csv row %d: %q, want %q", i+1, recs[i+1], want)
		}
	}
}

// Kills R33, R34, R35: train's table says how many gathers ran, marks
// sharded buckets, and gives each bucket's communication time as its end
// less its start.
func TestTrainTableRowsHoldTheJSONsBuckets(t *testing.T) {
	args := []string{"train", "--model", "gpt2-small", "--topo", "dgx-h100", "--sharded"}
	rep := trainJSON(t, append(args, "--format", "json")...)
	status, out, errOut := commsim(args...)
	if status != 0 || !strings.Contains(out, "\ngathers                  28 (") {
		t.Fatalf("status %d, stderr %q; want 28 gathers named:\n%s", status, errOut, out)
	}
	flat := flatOut(out)
	for _, b := range rep.Buckets {
		row := strings.Join([]string{"│", strconv.Itoa(b.Index), "│", strconv.Itoa(b.Params), "(sharded) │", sizeOneDecimal(b.Bytes), "│", f2(b.ReadyUS), "│",
			f2(b.StartUS), "│", f2(b.EndUS), "│", f2(b.EndUS - b.StartUS), "│", b.Algo, "│"}, " ")
		if !b.Sharded || !strings.Contains(flat, row) {
			t.Errorf("no row %q:\n%s", row, out)
		}
	}
}

// Kills R09: a layer may have 2^31-1 parameters a rank, that many
// included.
func TestTrainTakesALayerOfTheMostParameters(t *testing.T) {
	m := writeModel(t, "name: huge\nlayers:\n  - {name: l0, params: 4294967294, dtype: bf16, forward: 1us, backward: 1us}\n")
	status, _, errOut := commsim("train", "--model", m, "--topo", "ring:2", "--algo", "ring", "--format", "json")
	if status != 0 {
		t.Errorf("a layer of 2 × (2^31-1) parameters on 2 ranks: status %d, stderr %q; want it run", status, errOut)
	}
}

// Kills B06: nccl-tests' --maxbytes is -e given: a --minbytes above it is
// refused, not taken as the sweep's one size.
func TestBenchMaxBytesAliasCountsAsGiven(t *testing.T) {
	for _, flag := range []string{"-e", "--max-bytes", "--maxbytes"} {
		status, out, errOut := commsim("bench", "--topo", "ring:4", "-b", "1MiB", flag, "1KiB")
		if status != 2 || out != "" || !strings.Contains(errOut, "--min-bytes 1MiB is larger than --max-bytes 1KiB") {
			t.Errorf("-b 1MiB %s 1KiB: status %d, stderr %q; want 2 refusing it", flag, status, errOut)
		}
	}
}

// Kills B09: -g over the topology's GPUs says how many it has.
func TestBenchGPUsOverTheTopologyNamesItsGPUs(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "dgx-h100", "-g", "9", "-e", "8")
	if status != 2 || out != "" || errOut != "commsim: -g 9: dgx-h100 has 8 GPUs\n" {
		t.Errorf("status %d, stderr %q; want 2 saying dgx-h100 has 8 GPUs", status, errOut)
	}
}

// Kills B44: a topology of exactly the most ranks commsim plans for is
// taken; one more is refused.
func TestBenchTakesTheMostRanks(t *testing.T) {
	s := parsedSweep(t, "switch:262144", "allreduce", "rd", nil)
	if got := s.topo.NumGPUs(); got != 262144 {
		t.Errorf("switch:262144: %d ranks", got)
	}
	status, _, errOut := commsim("bench", "--topo", "switch:262145", "-e", "8")
	if status != 2 || !strings.Contains(errOut, "over the limit of 262144 ranks") {
		t.Errorf("switch:262145: status %d, stderr %q; want 2 naming the limit", status, errOut)
	}
}

// Kills B42, B32: a sweep refused for its trace part-way still prints,
// with --format table, the rows it measured; refused at its last size the
// estimate is the whole sweep's, not "after 6 of 6 sizes".
func TestBenchTableKeepsTheRowsBeforeATraceRefusal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.json")
	status, out, errOut := commsim("bench", "--topo", "ring:4", "-b", "8", "-e", "1MiB", "-f", "8", "--trace", path, "--trace-max", "110KiB", "--format", "table")
	if status != 2 || !strings.Contains(errOut, "(estimated), more than --trace-max 110KiB") || strings.Contains(errOut, " of 6 sizes") {
		t.Errorf("status %d, stderr %q; want 2 and the whole sweep's estimate", status, errOut)
	}
	flat := flatOut(out)
	for _, size := range []string{"8", "64", "512", "4096", "32768"} {
		if !strings.Contains(flat, "│ "+size+" │") {
			t.Errorf("no row of size %s in the partial table:\n%s", size, out)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the refused trace was written (%v)", err)
	}
}

// Kills J03, J04, J05, J09, J11, J12, J13, J24, J25: -J's report states
// the sweep as nccl-tests' does: its bounds and factor, -n (not -n × -m)
// and -m, validation with --check, one device line a thread of -g GPUs
// naming the backend and topology, --algo as given, each record's -n,
// the out-of-bounds count and the average bus bandwidth of the rows.
func TestBenchJSONReportConfigIsTheSweeps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ag.json")
	recs, _ := benchRecords(t, "--topo", "switch:8", "-g", "4", "--op", "allgather", "--algo", "ring", "-b", "1KiB", "-e", "4KiB", "-n", "2", "-m", "3", "--check", "-J", path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep ncclReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	c := rep.Config
	if c.GPUs != 4 || c.MinBytes != 1024 || c.MaxBytes != 4096 || c.StepFactor != 2 || c.StepBytes != 0 || c.Iters != 2 || c.AggIters != 3 || c.Validation != 1 {
		t.Errorf("config %+v; want 4 GPUs, 1024 to 4096 by 2, -n 2, -m 3, validation 1", c)
	}
	if len(c.Devices) != 1 || c.Devices[0].DeviceInfo != "sim (data) on switch:8 (first 4 GPUs)" {
		t.Errorf("devices %+v; want one thread's line naming sim and the topology", c.Devices)
	}
	if rep.Commsim.Algo != "ring" || rep.Commsim.Op != "allgather" || rep.OutOfBounds.Count != 0 || !rep.OutOfBounds.Okay {
		t.Errorf("commsim %+v, out of bounds %+v", rep.Commsim, rep.OutOfBounds)
	}
	if len(rep.Results) != len(recs) || len(recs) != 3 {
		t.Fatalf("%d results for %d rows", len(rep.Results), len(recs))
	}
	sum := 0.0
	for i, r := range rep.Results {
		sum += recs[i].BusBW + recs[i].InBusBW
		if r.Iters != 2 || r.Size != recs[i].Bytes || r.OutOfPlace.BusBW != recs[i].BusBW || r.OutOfPlace.Wrong == nil || *r.OutOfPlace.Wrong != 0 {
			t.Errorf("result %d: %+v; want -n 2 and row %+v", i, r, recs[i])
		}
	}
	if want := roundTo(sum/6, 3); rep.AverageBusBandwidth.Bandwidth != want || want == 0 {
		t.Errorf("average bus bandwidth %v, want %v", rep.AverageBusBandwidth.Bandwidth, want)
	}
}

// Kills J02: a linear sweep's report gives its step in bytes and no step
// factor.
func TestBenchJSONReportOfALinearSweepHasStepBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lin.json")
	status, _, errOut := commsim("bench", "--topo", "ring:4", "-b", "1KiB", "-e", "3KiB", "-f", "1", "-i", "1KiB", "-J", path)
	data, err := os.ReadFile(path)
	if status != 0 || err != nil {
		t.Fatalf("status %d, %v: %s", status, err, errOut)
	}
	if !strings.Contains(string(data), `"step_bytes": 1024`) || strings.Contains(string(data), `"step_factor"`) {
		t.Errorf("want step_bytes 1024 and no step_factor:\n%s", data)
	}
}

// Kills J08, J10, J14: each record holds its row's out-of-place and
// in-place runs, bandwidths in their own fields, and NCCL's choice after
// the algorithm that ran.
func TestNCCLReportRecordsHoldEachRunsFigures(t *testing.T) {
	s := parsedSweep(t, "switch:4", "allreduce", "ring", nil)
	rows := []row{{algo: "ring", ncclChoice: "collnetchain/Simple/2ch", dtype: "f32", redop: "sum", root: -1, bytes: 64, count: 16,
		outOfPlace: result{timeUS: 10, algbw: 1, busbw: 2, wrong: -1}, inPlace: result{timeUS: 12, algbw: 3, busbw: 4, wrong: -1}}}
	r := s.ncclReportOf(rows).Results[0]
	o, i := r.OutOfPlace, r.InPlace
	if o.Time != 10 || o.AlgBW != 1 || o.BusBW != 2 || i.Time != 12 || i.AlgBW != 3 || i.BusBW != 4 || o.Wrong != nil {
		t.Errorf("out of place %+v, in place %+v", o, i)
	}
	if r.Algo != "ring (NCCL: collnetchain/Simple/2ch)" || r.Type != "float" || r.Root != "    -1" {
		t.Errorf("algo %q, type %q, root %q", r.Algo, r.Type, r.Root)
	}
}

// Kills J20: a failed sweep's report stops after its last record, with
// the results list left open as nccl-tests leaves it.
func TestBenchJSONPartialReportEndsAfterItsLastRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part.json")
	status, _, errOut := commsim("bench", "--topo", "switch:8,bw=1B/s", "-b", "8", "-e", "1GiB", "-f", "1024", "-J", path)
	data, err := os.ReadFile(path)
	if status != 1 || err != nil {
		t.Fatalf("status %d, %v: %s", status, err, errOut)
	}
	if end := strings.TrimSpace(string(data)); !strings.HasSuffix(end, `"algo": "rhd"`+"\n    }") {
		t.Errorf("the partial report ends %q; want its last record's end", end[max(0, len(end)-40):])
	}
}

// Kills C02: --check reads its value in any case, spaces around it
// ignored.
func TestCheckFlagReadsAnyCaseAndSpaces(t *testing.T) {
	for _, arg := range []string{"--check=TRUE", "--check= 1 ", "--check=False"} {
		status, out, errOut := commsim("bench", "--topo", "ring:4", "-b", "1K", "-e", "1K", arg)
		checked := strings.Contains(out, "validation: 1")
		if status != 0 || checked != !strings.Contains(arg, "False") {
			t.Errorf("%s: status %d, stderr %q, checked %v", arg, status, errOut, checked)
		}
	}
}

// Kills C04: --check prints as its value, so that its help gives no
// default of 1.
func TestCheckFlagPrintsItsValue(t *testing.T) {
	var c checkFlag
	if c.String() != "0" {
		t.Errorf("unset --check prints %q, want 0", c.String())
	}
	c = true
	if c.String() != "1" {
		t.Errorf("set --check prints %q, want 1", c.String())
	}
	status, out, _ := commsim("bench", "--help")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "--check 0|1") && (status != 0 || strings.Contains(line, "(default")) {
			t.Errorf("status %d; --check's help: %q", status, line)
		}
	}
}
