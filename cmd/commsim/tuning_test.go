package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/topology"
)

const costTables = "../../fidelity/testdata/costtables"

// The table tuning prints is laid out as NCCL's, so the parser of NCCL's
// reads it back: every cell of commsim's model, to NCCL's tenth.
func TestTuningPrintsNCCLsLayout(t *testing.T) {
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100x2")
	if status != 0 || errOut != "" {
		t.Fatalf("status %d: %s", status, errOut)
	}
	if !strings.HasPrefix(out, "# commsim tuning: NCCL 2.30's cost table on dgx-h100x2 (16 ranks on 2 nodes of 8") ||
		!strings.Contains(out, "ring 8 × 45.0/45.0") || !strings.Contains(out, "# channels, as NCCL's init reports them: 16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, 4 p2p channels per peer\n") || !strings.Contains(out, "nvls/Simple: NVLS across nodes needs CollNet") {
		t.Errorf("output:\n%s", out)
	}
	printed, err := calibrate.ParseCostTable("stdout", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Resolve("dgx-h100x2")
	if err != nil {
		t.Fatal(err)
	}
	s, err := nccl.Describe(topo)
	if err != nil {
		t.Fatal(err)
	}
	want, err := nccl.CostTable(s, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(printed.Cells) != len(want) {
		t.Fatalf("%d cells printed, want %d", len(printed.Cells), len(want))
	}
	// NCCL prints the cells block by block: three algorithms, each
	// collective's row.
	for _, c := range printed.Cells {
		i := slices.IndexFunc(want, func(w nccl.Cost) bool { return w.Op == c.Op && w.Algo == c.Algo && w.Protocol == c.Protocol })
		if i < 0 {
			t.Errorf("%v %v/%v printed, not in the model", c.Op, c.Algo, c.Protocol)
			continue
		}
		if w := want[i]; math.Abs(c.LatencyUS-w.LatencyUS) > 0.05 || math.Abs(c.AlgBW-w.AlgBW) > 0.05 {
			t.Errorf("%v %v/%v printed %v, want %v", c.Op, c.Algo, c.Protocol, c.Cost, w)
		}
		want = slices.Delete(want, i, i+1)
	}
}

// A log with the channels NCCL's init reports and no table has them set
// beside the model's, each count that differs marked.
func TestTuningChecksALogsChannels(t *testing.T) {
	log := filepath.Join(costTables, "aws-do-eks-p5-2x8xH100-channels.txt")
	for _, tc := range []struct{ version, want string }{
		{"2.19", "coll 16 (commsim 16), nvls 16 (commsim 16), p2p 16 (commsim 16), p2p per peer 2 (commsim 2)\n"},
		{"2.30", "p2p per peer 2 (commsim 4) DIFFERS\n"},
	} {
		status, out, errOut := commsim("tuning", "--topo", "dgx-h100x2", "--log", log, "--nccl-version", tc.version)
		if status != 0 || errOut != "" || !strings.HasSuffix(out, tc.want) || strings.Contains(out, "latencies:") {
			t.Errorf("%s: status %d, stderr %q:\n%s", tc.version, status, errOut, out)
		}
	}
}

// --log sets the table NCCL printed beside commsim's: all the latencies
// of NVIDIA/nccl#1519's run at its release, two fewer at 2.30, which
// the log does not rule out since it names none. The excerpt's
// all-reduce row is cut after its fourth cell, which a warning names.
func TestTuningChecksALogsTable(t *testing.T) {
	log := filepath.Join(costTables, "nccl-issue-1519-2x8xH100.txt")
	for _, tc := range []struct {
		args       []string
		want, tree string
	}{
		{nil, "# latencies: 14 of the 16 cells both sides price read the same; bandwidths: 0 of the 16", "448.0/0.0 │ 92.4/20.7 │ DIFFERS │"},
		{[]string{"--nccl-version", "2.21"}, "# latencies: 16 of the 16 cells both sides price read the same", "448.0/0.0 │ 448.0/20.7 │ same │"},
	} {
		status, out, errOut := commsim(append([]string{"tuning", "--topo", filepath.Join(costTables, "nccl-issue-1519-one-nic.yaml"), "--log", log}, tc.args...)...)
		if status != 0 || errOut != "commsim: warning: "+log+": 1 row of NCCL's cost table cut off before the columns the headers give (first on line 18): the cells past the cut are not compared\n" {
			t.Fatalf("%v: status %d: %s", tc.args, status, errOut)
		}
		if !strings.Contains(out, tc.want) || !strings.Contains(strings.Join(strings.Fields(out), " "), tc.tree) {
			t.Errorf("%v: output:\n%s", tc.args, out)
		}
	}
	status, out, errOut := commsim("tuning", "--topo", "cluster:2x1", "--log", filepath.Join(costTables, "eunomia-ncclebpf-2x1-socket.txt"), "--format", "json")
	if status != 0 || errOut != "" {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var rep tuningReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.NCCLVersion != "2.29" || rep.Log == nil || rep.Log.Latencies != 20 || rep.Log.LatenciesAgree != 20 || len(rep.Cells) != 105 {
		t.Fatalf("report: version %s, log %+v, %d cells; want the log's 2.29, 20 of 20 latencies, 105 cells", rep.NCCLVersion, rep.Log, len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if c.Algo == "pat" && c.Op == "allgather" && c.Protocol == "Simple" && (c.LatencyAgree == nil || !*c.LatencyAgree || *c.LoggedLatencyUS != 17.6 || c.Line != 33) {
			t.Errorf("PAT's all-gather: %+v, want the log's 17.6 at line 33, the same", c)
		}
	}
}

func TestTuningRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	table := "h:1:2 [0] NCCL INFO   Algorithm   |     Ring      |\nh:1:2 [0] NCCL INFO   Protocol    |  LL |  LL128 | Simple |\n" +
		"h:1:2 [0] NCCL INFO     AllReduce |    40.0/  20.8 | 75.2/ 156.6 | 131.6/ 192.0 |\n"
	sixteen := writeTemp(t, dir, "16.txt", "h:1:2 [0] NCCL INFO comm 0x55d0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0\n"+table)
	old := writeTemp(t, dir, "2.14.txt", "h:1:2 [0] NCCL INFO NCCL version 2.14.3+cuda11.7\n"+table)
	calls := writeTemp(t, dir, "calls.txt", "h [0] NCCL INFO AllGather: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nccl-machine", "launch=2"}, "the cost table is the model itself"},
		{[]string{"-g", "1"}, "-g 1: want 2 to 8"},
		{[]string{"-g", "0"}, "-g 0: want 2 to 8, the GPUs of dgx-h100 (leave -g out for all)"},
		{[]string{"--format", "xml"}, `unknown format "xml" (want text, csv or json)`},
		{[]string{"--topo", "ring:"}, "ring"},
		{[]string{"--log", filepath.Join(dir, "absent.txt")}, "--log:"},
		{[]string{"--log", writeTemp(t, dir, "none.txt", "nothing here\n")}, "no NCCL cost table"},
		{[]string{"--log", sixteen}, "its communicator has 16 ranks, dgx-h100 8 GPUs"},
		{[]string{"--nccl-version", "1.0"}, "--nccl-version"},
		{[]string{"--log", sixteen, "--topo", "cluster:4x4"}, "its communicator spans 2 nodes, cluster:4x4 4"},
		{[]string{"--log", old, "--topo", "dgx-h100x2"}, "give --nccl-version or --nccl-env to replace it"},
		{[]string{"--nccl-version", "2.20abc"}, `version "2.20abc": want 2.N or 2.N.P`},
		{[]string{"--topo", "dgx-h100x10", "-g", "10"}, "node 1 has 2 GPUs and node 0 8"},
		// --log takes --op only to name its calls' collective, one NCCL's
		// tuner chooses for, and none of the sweep's flags.
		{[]string{"--log", sixteen, "--topo", "dgx-h100x2", "--op", "sendrecv"}, "NCCL's tuning lines are of the collectives its tuner chooses for"},
		{[]string{"--log", sixteen, "--topo", "dgx-h100x2", "-b", "8"}, "--min-bytes sets --op's sweep, which --log does not run"},
		{[]string{"--log", calls, "--topo", "dgx-h100x2", "--format", "csv"}, "--format csv writes a cost table's cells, and " + calls + " has none, only 1 tuning lines"},
		// The sweep's flags without --op, which they would be ignored by.
		{[]string{"-b", "8"}, "--min-bytes sets --op's sweep of NCCL's choices: give --op"},
		{[]string{"-d", "f16"}, "--dtype sets --op's sweep of NCCL's choices: give --op"},
		// --op's sizes as bench takes them.
		{[]string{"--op", "allreduce", "-b", "0", "-e", "3"}, "size 3 bytes is not a multiple of f32's 4 bytes"},
		{[]string{"--op", "allreduce", "-b", "0", "-e", "0"}, "no size from 0 to 0 has an element of f32 for each of the 8 ranks"},
	} {
		status, out, errOut := commsim(append([]string{"tuning"}, tc.args...)...)
		if status != 2 || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want 2 and one line naming %q", tc.args, status, out, errOut, tc.want)
		}
	}
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100x2", "--log", sixteen)
	if status != 0 || !strings.Contains(out, "latencies: 3 of the 3") {
		t.Errorf("16 ranks on dgx-h100x2: status %d:\n%s", status, out)
	}
	// -b alone past the default -e is a sweep of -b, as bench takes it.
	if status, out, errOut := commsim("tuning", "--op", "allreduce", "-b", "1G", "--format", "csv"); status != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, "\n1073741824,") {
		t.Errorf("-b 1G alone: status %d, stderr %q:\n%s", status, errOut, out)
	}
	// A log's cells go to CSV, with a note of what only JSON and text hold.
	status, out, errOut = commsim("tuning", "--topo", "dgx-h100x2", "--log", sixteen, "--format", "csv")
	if status != 0 || strings.Count(out, "\n") != 4 || errOut != "" {
		t.Errorf("cells as CSV: status %d, stderr %q:\n%s", status, errOut, out)
	}
	both := writeTemp(t, dir, "both.txt", "h:1:2 [0] NCCL INFO 24 coll channels, 32 nvls channels, 32 p2p channels, 32 p2p channels per peer\n"+table)
	status, out, errOut = commsim("tuning", "--topo", "dgx-h100x2", "--log", both, "--format", "csv")
	if status != 0 || strings.Count(out, "\n") != 4 || !strings.Contains(errOut, "0 tuning lines of calls and 4 channel counts are in --format json and text") {
		t.Errorf("cells and channels as CSV: status %d, stderr %q:\n%s", status, errOut, out)
	}
	// A release past the model's is priced with the model's latest.
	newer := writeTemp(t, dir, "2.31.txt", "h:1:2 [0] NCCL INFO NCCL version 2.31.0+cuda13.0\n"+table)
	if status, out, _ := commsim("tuning", "--topo", "dgx-h100x2", "--log", newer); status != 0 || !strings.Contains(out, "NCCL 2.31.0 (priced with 2.30's constants, the latest the model has)") {
		t.Errorf("NCCL 2.31's table: status %d:\n%s", status, out)
	}
	// A flag replaces the release NCCL's lines state.
	if status, out, _ := commsim("tuning", "--topo", "dgx-h100x2", "--log", old, "--nccl-version", "2.30"); status != 0 || !strings.Contains(out, "latencies: 3 of the 3") {
		t.Errorf("NCCL 2.14's table at 2.30: status %d:\n%s", status, out)
	}
}

// fidelity --log compares the cost table a log's NCCL printed, where it
// printed one, with commsim's: here the table commsim prints for the
// fabric, as NCCL's lines, so every cell agrees; one it cannot read is
// a warning, and the sizes are checked all the same.
func TestFidelityComparesTheLogsCostTable(t *testing.T) {
	// The log names NCCL 2.27.3 (nccl-library=22703), which fidelity takes.
	status, table, errOut := commsim("tuning", "--topo", "dgx-h100", "--nccl-version", "2.27")
	if status != 0 {
		t.Fatalf("tuning: status %d: %s", status, errOut)
	}
	sweep, err := os.ReadFile(filepath.Join(ncclTestdata, "sim-dgx-h100-all_reduce.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{"host:1:2 [0] NCCL INFO 24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer"}
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, "host:1:2 [0] NCCL INFO "+l)
		}
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.txt")
	if err := os.WriteFile(good, []byte(strings.Join(lines, "\n")+"\n"+string(sweep)), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := commsim("fidelity", "--log", good, "--topo", "dgx-h100")
	if status != 0 || errOut != "" || !strings.Contains(out, "# NCCL's cost table in the log: 21 of the 21 latencies both sides price agree with commsim's model of it, 21 of the 21 bandwidths") ||
		!strings.Contains(out, "# NCCL's channels in the log (line 1), and commsim's model's: coll 24 (commsim 24), nvls 16 (commsim 16), p2p 32 (commsim 32), p2p per peer 32 (commsim 32)\n") {
		t.Errorf("status %d, stderr %q:\n%s", status, errOut, out)
	}
	bad := filepath.Join(dir, "bad.txt")
	lines[len(lines)-1] = strings.Replace(lines[len(lines)-1], "/", " ", 1)
	if err := os.WriteFile(bad, []byte(strings.Join(lines, "\n")+"\n"+string(sweep)), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut = commsim("fidelity", "--log", bad, "--topo", "dgx-h100")
	if status != 0 || !strings.Contains(errOut, "is not latency/bandwidth") || !strings.HasSuffix(errOut, "; the cost table is not compared\n") || strings.Contains(out, "NCCL's cost table in the log") || !strings.Contains(out, "median |error|") {
		t.Errorf("a table that cannot be read: status %d, stderr %q:\n%s", status, errOut, out)
	}
}

// --op lists, per size, NCCL's choice and the next cheapest pair: at 4
// MiB on two DGX H100s NVLSTree wins by half a percent over LL128 trees.
func TestTuningOpListsTheChoiceAndTheNext(t *testing.T) {
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100x2", "--op", "all_reduce", "-b", "4MiB", "-e", "8MiB")
	if status != 0 || errOut != "" {
		t.Fatalf("status %d: %s", status, errOut)
	}
	flat := strings.Join(strings.Fields(out), " ")
	if !strings.Contains(flat, "│ 4194304 │ nvlstree/Simple/16ch │ 83.84 │ tree/LL128/16ch │ 84.21 │ +0.5% │") || strings.Count(out, "/16ch │") != 4 {
		t.Errorf("output:\n%s", out)
	}
	status, out, _ = commsim("tuning", "--topo", "dgx-h100x2", "--op", "sendrecv", "-b", "1MiB", "-e", "1MiB", "--format", "json")
	var rep struct {
		Sizes []tuningChoice `json:"sizes"`
	}
	if err := json.Unmarshal([]byte(out), &rep); status != 0 || err != nil || len(rep.Sizes) != 1 || rep.Sizes[0].Choice != "p2p/Simple/4ch" || rep.Sizes[0].TimeUS != 0 || rep.Sizes[0].Next != "" {
		t.Errorf("sendrecv: status %d, %v:\n%s", status, err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--op", "barrier"}, "NCCL's tuner chooses for"},
		{[]string{"--op", "sum"}, "the reduction is -o/--redop"},
		{[]string{"--op", "allreduce", "-f", "1"}, "--factor 1: want a number above 1"},
		{[]string{"--op", "allreduce", "-b", "1MiB", "-e", "1KiB"}, "is larger than --max-bytes"},
		{[]string{"--op", "allreduce", "-d", "f8"}, "f8"},
		{[]string{"--op", "allreduce", "-b", "4", "-e", "1G", "-f", "1.0001"}, "over 10000 sizes"},
	} {
		status, out, errOut := commsim(append([]string{"tuning", "--topo", "dgx-h100x2"}, tc.args...)...)
		if status != 2 || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("%v: status %d, stdout %q, stderr %q; want 2 and one line naming %q", tc.args, status, out, errOut, tc.want)
		}
	}
}

// --log sets the log's tuning lines for calls beside the model's choice;
// lines that name no collective (2.20-2.22) wait for --op to name it.
func TestTuningChecksALogsCalls(t *testing.T) {
	log := filepath.Join(costTables, "nccl-issue-1453-3x8xH100-calls.txt")
	args := []string{"tuning", "--topo", "dgx-h100x3,nicbw=200Gb/s", "--nccl-version", "2.22", "--log", log}
	status, out, errOut := commsim(args...)
	if status != 0 || errOut != "" || !strings.HasSuffix(out, "# 15 of the log's tuning lines do not name their collective (NCCL 2.20-2.22): --op names it\n") {
		t.Errorf("unnamed: status %d, stderr %q:\n%s", status, errOut, out)
	}
	status, out, errOut = commsim(append(args, "--op", "all_reduce")...)
	flat := strings.Join(strings.Fields(out), " ")
	if status != 0 || errOut != "" || !strings.HasSuffix(out, "# choices: 13 of 15 calls chose alike; model times: 5 of the 15 NCCL printed agree to a millionth\n") ||
		!strings.Contains(flat, "│ 20 │ allreduce │ 536870912 │ ring/Simple │ 5679.147949 │ ring/Simple/16ch │ 5679.148444 │ same │ same │") {
		t.Errorf("named: status %d, stderr %q:\n%s", status, errOut, out)
	}
	status, out, _ = commsim(append(args, "--op", "allreduce", "--format", "json")...)
	var rep tuningReport
	if err := json.Unmarshal([]byte(out), &rep); status != 0 || err != nil || rep.Log == nil || len(rep.Log.Calls) != 15 || rep.Log.ChoicesAgree != 13 || rep.Log.Calls[10].NCCLRan != "nvlstree/Simple" || rep.Log.Calls[10].Agree ||
		rep.Log.Unread != nil {
		t.Errorf("json: status %d, %v:\n%s", status, err, out)
	}

	// A line of an algorithm NCCL does not number is left out, and said so.
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(string(data), "\n")
	bad := filepath.Join(t.TempDir(), "bad.txt")
	if err := os.WriteFile(bad, append(data, "[0] h:1:1 [0] NCCL INFO 2048 Bytes -> Algo 9 proto 0 time 25.3\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	args[len(args)-1] = bad
	status, out, errOut = commsim(append(args, "--op", "allreduce")...)
	want := fmt.Sprintf("# choices: 13 of 15 calls chose alike; model times: 5 of the 15 NCCL printed agree to a millionth\n"+
		"# NCCL's tuning lines (Bytes -> Algo) that could not be read, left out: 1, the first at line %d: algorithm 9 is none of NCCL's numbers 0-6\n", lines+1)
	if status != 0 || errOut != "" || !strings.HasSuffix(out, want) {
		t.Errorf("a line not read: status %d, stderr %q:\n%s\nwant it to end\n%s", status, errOut, out, want)
	}
	status, out, _ = commsim(append(args, "--op", "allreduce", "--format", "json")...)
	rep = tuningReport{}
	if err := json.Unmarshal([]byte(out), &rep); status != 0 || err != nil || rep.Log == nil ||
		!reflect.DeepEqual(rep.Log.Unread, []tuningUnread{{lines + 1, "algorithm 9 is none of NCCL's numbers 0-6"}}) {
		t.Errorf("json, a line not read: status %d, %v:\n%s", status, err, out)
	}
}

// A table's columns of an algorithm commsim does not model (an older
// release's, or a newer one's) are left out of the comparison, and a note
// on stderr names them.
func TestTuningNamesColumnsItDoesNotModel(t *testing.T) {
	status, table, _ := commsim("tuning", "--topo", "dgx-h100")
	if status != 0 {
		t.Fatal(status)
	}
	log := filepath.Join(t.TempDir(), "renamed.txt")
	if err := os.WriteFile(log, []byte(strings.Replace(table, " Tree ", " Tr33 ", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := commsim("tuning", "--topo", "dgx-h100", "--log", log)
	want := "commsim: note: " + log + ": NCCL's cost table has 3 columns of algorithms or protocols commsim does not model (Tr33/LL, Tr33/LL128, Tr33/Simple; first on line 7): their cells are not compared\n"
	if status != 0 || errOut != want || !strings.Contains(out, "# latencies: 18 of the 18 cells both sides price read the same") {
		t.Errorf("status %d, stderr %q, want %q:\n%s", status, errOut, want, out)
	}
}
