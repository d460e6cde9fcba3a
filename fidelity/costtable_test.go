package fidelity

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

func readCostTable(t *testing.T, name string) *calibrate.CostTableLog {
	t.Helper()
	path := filepath.Join("testdata", "costtables", name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	logged, err := calibrate.ParseCostTable(path, data)
	if err != nil {
		t.Fatal(err)
	}
	return logged
}

func checkCostTable(t *testing.T, logged *calibrate.CostTableLog, spec string, o nccl.Options) *CostReport {
	t.Helper()
	topo, err := topology.Resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	tu, err := nccl.NewTuner(topo, o)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := CheckCostTable(logged, tu)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// The latencies in the cost tables NCCL printed on real machines are
// commsim's, cell for cell as NCCL prints them, in the release that
// printed them: 2.20-2.22 on 2 nodes of 8 H100s (NVIDIA/nccl#1519), and
// 2.29 on 2 one-GPU nodes (a log that names its release, which is taken).
// Their bandwidths are of machines no preset describes (one NIC in use of
// eight; an unstated socket NIC), so only the latencies are held. The
// H100s' are dgx-h100x2's with the one NIC NCCL used a node, on which its
// rings keep one pattern (a broadcast's latency is one hop).
func TestCostTablesNCCLPrintedHaveCommsimsLatencies(t *testing.T) {
	const oneNIC = "testdata/costtables/nccl-issue-1519-one-nic.yaml"
	h100 := readCostTable(t, "nccl-issue-1519-2x8xH100.txt")
	if len(h100.Cells) != 40 || h100.Tables != 1 || h100.Stated.NCCLVersion != "" {
		t.Fatalf("#1519: %d cells in %d tables, NCCL %q; want the first block's 40 (its last row cut to 4) in one, no release", len(h100.Cells), h100.Tables, h100.Stated.NCCLVersion)
	}
	rep := checkCostTable(t, h100, oneNIC, nccl.Options{Version: nccl.V2_21})
	if rep.Latencies != 16 || rep.LatenciesAgree != 16 {
		t.Errorf("#1519 at 2.21: %d of %d latencies agree, want 16 of 16", rep.LatenciesAgree, rep.Latencies)
	}
	// 2.23 moved two of them: the all-reduce ring's network steps and the
	// tree's Simple hop.
	rep = checkCostTable(t, h100, oneNIC, nccl.Options{Version: nccl.V2_30})
	var moved []string
	for _, r := range rep.Rows {
		if compared, agree := r.LatencyAgree(); compared && !agree {
			moved = append(moved, r.Logged.Algo.String()+"/"+r.Logged.Protocol.String())
			if r.Logged.Op != ops.AllReduce {
				t.Errorf("#1519 at 2.30: %v's latency %v differs", r.Logged.Op, r.Model)
			}
		}
	}
	if len(moved) != 2 || moved[0] != "tree/Simple" || moved[1] != "ring/LL" {
		t.Errorf("#1519 at 2.30: the latencies that differ are %v, want tree/Simple and ring/LL", moved)
	}

	socket := readCostTable(t, "eunomia-ncclebpf-2x1-socket.txt")
	run, stated, err := socket.Stated.NCCLOptions()
	if err != nil || !stated || run.Options.Version != 229 || len(socket.Cells) != 105 {
		t.Fatalf("socket log: stated %v, NCCL %v (%v), %d cells; want 2.29 stated and 105 cells", stated, run.Options.Version, err, len(socket.Cells))
	}
	rep = checkCostTable(t, socket, "cluster:2x1", run.Options)
	if rep.Latencies != 20 || rep.LatenciesAgree != 20 {
		t.Errorf("socket log at 2.29: %d of %d latencies agree, want 20 of 20", rep.LatenciesAgree, rep.Latencies)
	}
}

// A cell is compared where both sides have something to compare:
// latencies where both price it (NCCL prints one for a pair it prices and
// then turns off), bandwidths where either side may pick it.
func TestCostRowComparesWhatBothSidesHave(t *testing.T) {
	logged := func(lat, bw float64) calibrate.LoggedCost {
		return calibrate.LoggedCost{Cost: nccl.Cost{LatencyUS: lat, AlgBW: bw}}
	}
	for _, tc := range []struct {
		name          string
		row           CostRow
		lat, latAgree bool
		bw, bwAgree   bool
	}{
		{"both price alike", CostRow{logged(9.3, 39.0), nccl.Cost{LatencyUS: 9.34, AlgBW: 38.96}}, true, true, true, true},
		{"latency off by a tenth", CostRow{logged(9.3, 39.0), nccl.Cost{LatencyUS: 9.4, AlgBW: 39.0}}, true, false, true, true},
		{"both off", CostRow{logged(0, 0), nccl.Cost{Off: "rings only"}}, false, false, false, false},
		{"NCCL turned it off", CostRow{logged(25.2, 0), nccl.Cost{LatencyUS: 25.2, AlgBW: 19.5}}, true, true, true, false},
		{"commsim has it off", CostRow{logged(44.0, 0), nccl.Cost{Off: "no SHARP"}}, false, false, false, false},
		{"only NCCL prices it", CostRow{logged(66.8, 246.2), nccl.Cost{Off: "no SHARP"}}, false, false, true, false},
	} {
		lat, latAgree := tc.row.LatencyAgree()
		bw, bwAgree := tc.row.BandwidthAgree()
		if lat != tc.lat || latAgree != tc.latAgree || bw != tc.bw || bwAgree != tc.bwAgree {
			t.Errorf("%s: latency compared %v agree %v, bandwidth compared %v agree %v; want %v %v %v %v", tc.name, lat, latAgree, bw, bwAgree, tc.lat, tc.latAgree, tc.bw, tc.bwAgree)
		}
	}
}

// The channels NCCL's init reported on AWS p5 nodes are commsim's at the
// release the line's layout shows (2.18 or 2.19: no CollNet count): 24
// coll, 16 NVLS, 32 p2p channels and 32 a peer on one node; 16, 16, 16
// and 2 a peer on two (on dgx-h100x2, 8 NICs of 400 Gb/s where p5 has
// 32 of 100, which NCCL's search counts the same there). From 2.29 a
// network peer gets the channels that drive its NIC at 14 GB/s each: 4.
func TestChannelsNCCLReportedAreCommsims(t *testing.T) {
	for _, tc := range []struct {
		file, topo string
		v          nccl.Version
		want       [4]int // coll, nvls, p2p, a peer's: the model's
		differ     bool
	}{
		{"aws-do-eks-p5-1x8xH100-channels.txt", "dgx-h100", 219, [4]int{24, 16, 32, 32}, false},
		{"aws-do-eks-p5-2x8xH100-channels.txt", "dgx-h100x2", 219, [4]int{16, 16, 16, 2}, false},
		{"aws-do-eks-p5-2x8xH100-channels.txt", "dgx-h100x2", nccl.V2_30, [4]int{16, 16, 16, 4}, true},
	} {
		logged := readCostTable(t, tc.file)
		if len(logged.Cells) != 0 || logged.Channels == nil || logged.ChannelsLine != 8 {
			t.Fatalf("%s: %d cells, channels %+v at line %d; want no table and the channels at line 8", tc.file, len(logged.Cells), logged.Channels, logged.ChannelsLine)
		}
		rep := checkCostTable(t, logged, tc.topo, nccl.Options{Version: tc.v})
		if len(rep.Channels) != 4 {
			t.Fatalf("%s: %d channel rows, want 4", tc.file, len(rep.Channels))
		}
		differ := false
		for i, c := range rep.Channels {
			if c.Model != tc.want[i] {
				t.Errorf("%s at %v: %s %d, want %d", tc.file, tc.v, c.Name, c.Model, tc.want[i])
			}
			differ = differ || c.Logged != c.Model
		}
		if differ != tc.differ {
			t.Errorf("%s at %v: %+v; want the log and the model to differ: %v", tc.file, tc.v, rep.Channels, tc.differ)
		}
	}
}

// NCCL 2.22.3's tuning lines for a 24-H100 all-reduce on 3 nodes
// (NVIDIA/nccl issue 1453), set beside the model's: every time NCCL
// printed for the ring and NVLSTree is the model's to a millionth, and
// the model chooses as NCCL did at 13 of the 15 sizes. At 128 and 512
// KiB it keeps LL and LL128 trees where NCCL went to LL128 trees and
// NVLSTree: that run's trees have 0.85 of the model's bandwidth, so
// their times differ too (nccl's
// TestModelTimesAreTheOnesNCCLPrintedOnThreeNodes says why).
func TestCallsNCCLPrintedAreTheModels(t *testing.T) {
	logged := readCostTable(t, "nccl-issue-1453-3x8xH100-calls.txt")
	if len(logged.Calls) != 15 || logged.Calls[0].Op != "" || logged.Calls[0].TimeUS != 25.200462 || logged.Calls[0].Line != 8 {
		t.Fatalf("calls %+v, want 15 unnamed, the first of 25.200462 us at line 8", logged.Calls)
	}
	if rep := checkCostTable(t, logged, "dgx-h100x3,nicbw=200Gb/s", nccl.Options{Version: 222}); len(rep.Calls) != 0 {
		t.Errorf("%d calls checked before they are named, want none", len(rep.Calls))
	}
	logged.NameCalls("allreduce")
	rep := checkCostTable(t, logged, "dgx-h100x3,nicbw=200Gb/s", nccl.Options{Version: 222})
	if rep.Choices != 15 || rep.ChoicesAgree != 13 || rep.Times != 15 || rep.TimesAgree != 5 {
		t.Errorf("%d of %d choices agree, %d of %d times; want 13 of 15, and 5 of 15", rep.ChoicesAgree, rep.Choices, rep.TimesAgree, rep.Times)
	}
	for _, c := range rep.Calls {
		compared, agree := c.TimeAgree()
		wantTime := c.Logged.Ran.Algo != nccl.Tree // the ring's and NVLSTree's: the graphs agree
		if compared && agree != wantTime {
			t.Errorf("%d B %v: NCCL %.6f us, the model %.6f us", c.Logged.Bytes, c.Logged.Ran, c.Logged.TimeUS, c.Ran.TimeUS)
		}
		if differs := c.Logged.Bytes == 131072 || c.Logged.Bytes == 524288; c.ChoiceAgrees() == differs {
			t.Errorf("%d B: NCCL ran %v, the model chooses %v", c.Logged.Bytes, c.Logged.Ran, c.Choice)
		}
	}
}

// A tuning line's bytes are a collective's; an all-gather's before 2.24
// are all its ranks', whose share sets the element type: 48 bytes on 16
// ranks are 3 bytes a rank, so bytes, not a quarter of a float each.
func TestCallSpecKeepsTheLinesBytes(t *testing.T) {
	for _, tc := range []struct {
		op      ops.Op
		bytes   int64
		perRank bool
		want    int64 // the spec's bytes, as NCCL counts them
	}{
		{ops.AllGather, 48, false, 48},
		{ops.AllGather, 80, false, 80},
		{ops.AllGather, 5, true, 5 * 16},
		{ops.ReduceScatter, 1 << 20, false, 1 << 20},
		{ops.AllReduce, 6, false, 6},
	} {
		spec := callSpec(tc.op, calibrate.LoggedCall{Op: tc.op.String(), Bytes: tc.bytes, PerRank: tc.perRank}, 16)
		in, out := spec.BufferLens()
		if got := int64(max(in, out) * spec.DType.Size()); got != tc.want || spec.Count == 0 {
			t.Errorf("%v of %d bytes (per rank %v): %d x %v, %d bytes; want %d", tc.op, tc.bytes, tc.perRank, spec.Count, spec.DType, got, tc.want)
		}
	}
}
