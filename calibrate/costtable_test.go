package calibrate

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

// A table as NCCL 2.29 prints it (the PAT block's protocol line repeats
// three algorithms' protocols, as NCCL's does), cut to two algorithms a
// block, with srun's rank tags and NCCL's init lines around it, and a
// second communicator's table after it.
const costTable229 = `0: host:1:2 [0] NCCL INFO NCCL version 2.29.7+cuda12.9
0: host:1:2 [0] NCCL INFO NCCL_PROTO set by environment to ^LL128
0: host:1:2 [0] NCCL INFO comm 0x55d0 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
0: host:1:2 [0] NCCL INFO 16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, 4 p2p channels per peer
0: host:1:2 [0] NCCL INFO   Algorithm   |                            Tree                  |                            Ring                  |
0: host:1:2 [0] NCCL INFO   Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |
0: host:1:2 [0] NCCL INFO  Max NThreads |            512 |            640 |            512 |            512 |            640 |            512 |
0: host:1:2 [0] NCCL INFO     Broadcast |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     9.3/  39.0 |    18.0/   0.0 |    22.4/ 360.0 |
0: host:1:2 [0] NCCL INFO     AllReduce |    25.2/  19.5 |    48.5/   0.0 |    92.4/ 165.6 |    40.0/  20.8 |    75.2/   0.0 |   131.6/ 192.0 |
0: host:1:2 [0] NCCL INFO   Algorithm   |                             PAT                  |
0: host:1:2 [0] NCCL INFO   Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |
0: host:1:2 [0] NCCL INFO     AllGather |     0.0/   0.0 |     0.0/   0.0 |    17.6/   3.6 |
0: host:1:2 [0] NCCL INFO   Algorithm   |                            Tree                  |                            Ring                  |
0: host:1:2 [0] NCCL INFO   Protocol    |             LL |          LL128 |         Simple |             LL |          LL128 |         Simple |
0: host:1:2 [0] NCCL INFO     Broadcast |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     7.2/ 141.0 |    15.9/   0.0 |    11.8/ 360.0 |
`

func TestParseCostTableReadsNCCLsBlocks(t *testing.T) {
	got, err := ParseCostTable("tuning.txt", []byte(costTable229))
	if err != nil {
		t.Fatal(err)
	}
	run, stated, err := got.Stated.NCCLOptions()
	if err != nil || got.Tables != 2 || got.Ranks != 16 || got.Nodes != 2 || !stated || run.Options.Version != 229 || run.Env["NCCL_PROTO"] != "^LL128" {
		t.Errorf("tables %d, ranks %d, nodes %d, stated %v, NCCL %v %v (%v); want 2 tables of 16 ranks on 2 nodes, 2.29 with NCCL_PROTO=^LL128",
			got.Tables, got.Ranks, got.Nodes, stated, run.Options.Version, run.Env, err)
	}
	if len(got.Cells) != 15 {
		t.Fatalf("%d cells, want the first table's 15", len(got.Cells))
	}
	if c := got.Channels; c == nil || *c != (nccl.InitChannels{Coll: 16, CollNet: 16, NVLS: 16, P2P: 16, P2PPerPeer: 4}) || got.ChannelsLine != 4 {
		t.Errorf("channels %+v at line %d, want 16/16/16/16/4 at line 4", c, got.ChannelsLine)
	}
	for _, want := range []LoggedCost{
		{nccl.Cost{Op: ops.Broadcast, Algo: nccl.Tree, Protocol: ops.ProtoLL}, 8},
		{nccl.Cost{Op: ops.Broadcast, Algo: nccl.Ring, Protocol: ops.ProtoSimple, LatencyUS: 22.4, AlgBW: 360}, 8},
		{nccl.Cost{Op: ops.AllReduce, Algo: nccl.Tree, Protocol: ops.ProtoSimple, LatencyUS: 92.4, AlgBW: 165.6}, 9},
		{nccl.Cost{Op: ops.AllReduce, Algo: nccl.Ring, Protocol: ops.ProtoLL128, LatencyUS: 75.2}, 9},
		{nccl.Cost{Op: ops.AllGather, Algo: nccl.PAT, Protocol: ops.ProtoSimple, LatencyUS: 17.6, AlgBW: 3.6}, 12},
	} {
		found := false
		for _, c := range got.Cells {
			if c.Op == want.Op && c.Algo == want.Algo && c.Protocol == want.Protocol {
				found = true
				if c != want {
					t.Errorf("%v %v/%v: %+v, want %+v", want.Op, want.Algo, want.Protocol, c, want)
				}
			}
		}
		if !found {
			t.Errorf("%v %v/%v: not read", want.Op, want.Algo, want.Protocol)
		}
	}
}

// Before 2.18 NCCL heads its one block "Latency/AlgBw", each column
// "algo/proto"; CollNet, one algorithm then, is not one of commsim's and
// its columns are left out, and named.
func TestParseCostTableReadsTheOldLayout(t *testing.T) {
	old := `x:9373:9456 [0] NCCL INFO Latency/AlgBw |    Tree/    LL |    Tree/ LL128 |    Tree/Simple |    Ring/    LL |    Ring/ LL128 |    Ring/Simple | CollNet/    LL | CollNet/ LL128 | CollNet/Simple |
x:9373:9456 [0] NCCL INFO  Max NThreads |            512 |            640 |            512 |            512 |            640 |            256 |            512 |            640 |            512 |
x:9373:9456 [0] NCCL INFO     Broadcast |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |     6.3/   0.8 |    14.0/   0.0 |    18.0/   3.0 |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 |
`
	got, err := ParseCostTable("old.txt", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Cells) != 6 || got.Tables != 1 || got.Stated.NCCLVersion != "" {
		t.Fatalf("%d cells in %d tables (NCCL %q), want the tree's and the ring's 6 in one, no release", len(got.Cells), got.Tables, got.Stated.NCCLVersion)
	}
	if c := got.Cells[5]; c.Algo != nccl.Ring || c.Protocol != ops.ProtoSimple || c.LatencyUS != 18 || c.AlgBW != 3 {
		t.Errorf("last cell %+v, want ring/Simple 18.0/3.0", c)
	}
	if want := []string{"CollNet/LL", "CollNet/LL128", "CollNet/Simple"}; !slices.Equal(got.Unmodelled, want) || got.UnmodelledLine != 3 {
		t.Errorf("columns left out %v (line %d), want %v (line 3)", got.Unmodelled, got.UnmodelledLine, want)
	}
}

// A row that ends before its headers' columns (a log cut at a width,
// an excerpt) is read up to the cut and named; the rows after it are
// read whole. Before 2.18, the heads give the columns.
func TestParseCostTableNamesRowsCutOff(t *testing.T) {
	blocks := "NCCL INFO   Algorithm   |     Tree      |\nNCCL INFO   Protocol    |  LL |  LL128 | Simple |\n" +
		"NCCL INFO     Broadcast |  1/1 | 2/2 |\nNCCL INFO     AllReduce |  1/1 | 2/2 | 3/3 |\n"
	old := "NCCL INFO Latency/AlgBw |    Tree/    LL |    Tree/ LL128 |\nNCCL INFO     AllReduce |  1/1 |\n"
	for text, want := range map[string]struct{ cells, line int }{blocks: {5, 3}, old: {1, 2}} {
		got, err := ParseCostTable("x.txt", []byte(text))
		if err != nil || len(got.Cells) != want.cells || !slices.Equal(got.CutRows, []int{want.line}) {
			t.Errorf("%q: %+v, %v: want %d cells, the row on line %d cut off", text, got, err, want.cells, want.line)
		}
	}
}

// A table with no header above a row and a cell that is no
// latency/bandwidth are refused, naming the line; a log with no table
// is ErrNoCostTable.
func TestParseCostTableRefusesWhatItCannotRead(t *testing.T) {
	header := "NCCL INFO   Algorithm   |     Tree      |\nNCCL INFO   Protocol    |  LL |  LL128 | Simple |\n"
	for _, tc := range []struct {
		name, log string
		line      int
		want      string
	}{
		{"no header", "NCCL INFO     AllReduce |    25.2/  19.5 |\n", 1, "no algorithm and protocol above it"},
		{"bad cell", header + "NCCL INFO     AllReduce |    25.2/  19.5 |  48.5 | 1/1 |\n", 3, `column 2 of NCCL's cost table: "48.5" is not latency/bandwidth`},
		{"negative", header + "NCCL INFO     AllReduce |    25.2/  -1 |\n", 3, "is not latency/bandwidth"},
		{"not a number", header + "NCCL INFO     AllReduce |    NaN/  1.0 |\n", 3, "is not latency/bandwidth"},
		{"too many cells", header + "NCCL INFO     AllReduce |  1/1 | 1/1 | 1/1 | 1/1 |\n", 3, "column 4"},
		// Three columns an algorithm, whatever the Protocol line repeats:
		// a fourth column under one algorithm is no column of it.
		{"protocols beyond the algorithms", "NCCL INFO   Algorithm   |  Tree |\nNCCL INFO   Protocol    |  LL |  LL128 | Simple |  LL |  LL128 | Simple |\n" +
			"NCCL INFO     AllReduce |  1/1 | 1/1 | 1/1 | 1/1 | 1/1 | 1/1 |\n", 3, "column 4 of NCCL's cost table has no algorithm"},
		{"a short Protocol line", "NCCL INFO   Algorithm   |  Tree |  Ring |  CollNetDirect |\nNCCL INFO   Protocol    |  LL |  LL128 | Simple |  LL |  LL128 | Simple |\n" +
			"NCCL INFO     AllReduce |  1/1 | 1/1 | 1/1 | 1/1 | 1/1 | 1/1 | 1/1 |\n", 3, "column 7 of NCCL's cost table has no algorithm"},
		{"a cell twice", header + "NCCL INFO     AllReduce |  1/1 | 2/2 | 3/3 |\nNCCL INFO     AllReduce |  1/1 | 2/2 | 3/3 |\n", 4,
			"allreduce's tree/LL cost is given twice in one table (first on line 3)"},
	} {
		_, err := ParseCostTable("x.txt", []byte(tc.log))
		var le *LogError
		if !errors.As(err, &le) || le.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a LogError at line %d naming %q", tc.name, err, tc.line, tc.want)
		}
	}
	_, err := ParseCostTable("x.txt", []byte("# nccl-tests\n#  Rank  0 Group  0 Pid 1 on host device  0 [0x18] NVIDIA H100\n"))
	if !errors.Is(err, ErrNoCostTable) || !strings.HasPrefix(err.Error(), "x.txt: no NCCL cost table") {
		t.Errorf("no table: %v, want ErrNoCostTable naming the log", err)
	}
}

// FuzzParseCostTable: no input panics; a table read has cells with an
// algorithm, a protocol and figures of at least 0, each on a line of the
// input; a refusal is ErrNoCostTable or a *LogError naming a line.
func FuzzParseCostTable(f *testing.F) {
	f.Add([]byte(costTable229))
	f.Add([]byte("NCCL INFO Latency/AlgBw |    Tree/    LL |    Ring/Simple |\nNCCL INFO     Broadcast |     0.0/   0.0 |  18.0/   3.0 |\n"))
	f.Add([]byte("NCCL INFO   Algorithm   |  Tree |\nNCCL INFO   Protocol    |  LL |\nNCCL INFO     AllReduce |  1e3/1e-3 |\n"))
	f.Add([]byte("h [0] NCCL INFO 1048576 Bytes -> Algo 1 proto 1 time 28.5\nh [0] NCCL INFO AllGather: 64 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..3}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseCostTable("fuzz", data)
		if err != nil {
			var le *LogError
			if !errors.Is(err, ErrNoCostTable) && (!errors.As(err, &le) || le.Line < 1 || le.Line > strings.Count(string(data), "\n")+1) {
				t.Fatalf("refusal %v is neither ErrNoCostTable nor a LogError naming a line", err)
			}
			return
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, c := range got.Cells {
			if c.Line < 1 || c.Line > lines || !(c.LatencyUS >= 0) || !(c.AlgBW >= 0) || c.Protocol > ops.ProtoSimple {
				t.Fatalf("cell %+v of %d lines", c, lines)
			}
		}
		for _, c := range got.Calls {
			if c.Line < 1 || c.Line > lines || c.Bytes <= 0 || !(c.TimeUS >= 0) || c.Ran.Proto > ops.ProtoSimple {
				t.Fatalf("call %+v of %d lines", c, lines)
			}
		}
	})
}

// NCCL's tuning lines for calls: named from 2.24 (a rank's share of an
// all-gather, the channels), numbered with the model's time before, and
// named too in 2.23 (the whole collective's bytes); the first line of
// each collective and size is kept, and a collective the tuner does not
// choose for (a send) is left out.
func TestParseCostTableReadsTheCalls(t *testing.T) {
	log := `h:1:1 [0] NCCL INFO AllGather: 65536 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..3}
h:1:1 [0] NCCL INFO AllGather: 65536 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..3}
h:1:1 [0] NCCL INFO AllReduce: 65536 Bytes -> Algo NVLS proto SIMPLE channel{Lo..Hi}={0..15}
h:1:1 [0] NCCL INFO 1048576 Bytes -> Algo 1 proto 1 time 28.500000
h:1:1 [0] NCCL INFO 2048 Bytes -> Algo 9 proto 1 time 28.500000
h:1:1 [0] NCCL INFO ReduceScatter: 302006272 Bytes -> Algo 1 proto 2 time 3628.243652
h:1:1 [0] NCCL INFO Send: 64 Bytes -> Algo 1 proto 2 time 1.000000
`
	got, err := ParseCostTable("calls.txt", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []LoggedCall{
		{Op: "allgather", Bytes: 65536, PerRank: true, Ran: Ran{Algo: nccl.Ring, Proto: ops.ProtoLL, Channels: 4}, Line: 1},
		{Op: "allreduce", Bytes: 65536, Ran: Ran{Algo: nccl.NVLS, Proto: ops.ProtoSimple, Channels: 16}, Line: 3},
		{Bytes: 1048576, Ran: Ran{Algo: nccl.Ring, Proto: ops.ProtoLL128}, TimeUS: 28.5, Line: 4},
		{Op: "reducescatter", Bytes: 302006272, Ran: Ran{Algo: nccl.Ring, Proto: ops.ProtoSimple}, TimeUS: 3628.243652, Line: 6},
	}
	if len(got.Calls) != len(want) || len(got.Cells) != 0 || got.Channels != nil {
		t.Fatalf("calls %+v, cells %d, channels %v; want %+v alone", got.Calls, len(got.Cells), got.Channels, want)
	}
	for i, c := range got.Calls {
		if c != want[i] {
			t.Errorf("call %d: %+v, want %+v", i, c, want[i])
		}
	}
	got.NameCalls("allreduce")
	if got.Calls[2].Op != "allreduce" || got.Calls[0].Op != "allgather" {
		t.Errorf("named: %+v", got.Calls)
	}
	unread := []UnreadLine{{5, "algorithm 9 is none of NCCL's numbers 0-6"}, {7, "Send is no collective NCCL's tuner chooses for in commsim's model"}}
	if !reflect.DeepEqual(got.Stated.UnreadRan, unread) {
		t.Errorf("unread %+v; want %+v", got.Stated.UnreadRan, unread)
	}
}

// A tuning line that cannot be read says why; a line of another kind, or
// of nothing (a size of 0), says nothing.
func TestParseRanLineSaysWhyALineCannotBeRead(t *testing.T) {
	const h = "h:1:1 [0] NCCL INFO "
	for line, why := range map[string]string{
		h + "AllReduce: 8 Bytes -> Algo SYMK proto LL channel{Lo..Hi}={0..0}":   `algorithm "SYMK" is none commsim models`,
		h + "AllReduce: 8 Bytes -> Algo RING proto LL64 channel{Lo..Hi}={0..0}": `protocol "LL64" is none commsim models`,
		h + "AllToAll: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}":    "AllToAll is no collective NCCL's tuner chooses for in commsim's model",
		h + "AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={3..1}":   "channels {3..1} are no range of channels",
		h + "AllReduce: 8 Bytes -> Algo RING proto LL":                          "not in either form NCCL 2.20-2.30 print",
		h + "1024 Bytes -> Algo 1 proto 7 time 9.5":                             "protocol 7 is none of NCCL's numbers 0-2",
		h + "AllReduce: 0 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}":   "",
		h + "AllReduce: 0 Bytes -> Algo SYMK proto LL channel{Lo..Hi}={0..0}":   "",
		h + "0 Bytes -> Algo 9 proto 0 time 1.0":                                "",
		"h:1:1 [0] NCCL TRACE 1024 Bytes -> Algo 1 proto 2 time 9.5":            "",
		h + "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM":                         "",
		h + "AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}":   "",
	} {
		_, _, got := parseRanLine(line)
		if got != why {
			t.Errorf("%q: %q; want %q", line, got, why)
		}
	}
	if got := DescribeUnread([]UnreadLine{{12, "protocol 7 is none of NCCL's numbers 0-2"}, {30, "x"}}); got != "# NCCL's tuning lines (Bytes -> Algo) that could not be read, left out: 2, the first at line 12: protocol 7 is none of NCCL's numbers 0-2\n" {
		t.Errorf("DescribeUnread: %q", got)
	}
	if got := DescribeUnread(nil); got != "" {
		t.Errorf("DescribeUnread(nil): %q", got)
	}
}

// A log of several communicators states the first one's size: a later
// communicator's init line (another group's, smaller) does not change it.
func TestParseCostTableTakesTheFirstCommunicator(t *testing.T) {
	second := "0: host:1:2 [0] NCCL INFO comm 0x66e0 rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0 MNNVL 0\n"
	got, err := ParseCostTable("tuning.txt", []byte(costTable229+second))
	if err != nil || got.Ranks != 16 || got.Nodes != 2 {
		t.Errorf("%+v, %v; want the first communicator's 16 ranks on 2 nodes", got, err)
	}
}
