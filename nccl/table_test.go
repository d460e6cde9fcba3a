package nccl_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// The cost table holds a cell for each collective NCCL tunes, algorithm
// of the release and protocol, in NCCL's order; a cell it prices is the
// estimate's latency and bandwidth before any size (no Ring/Simple
// plateau, which NCCL applies per call), and an off one is 0/0 with its
// reason.
func TestCostTableIsNCCLsModelBeforeAnySize(t *testing.T) {
	s := describe(t, "dgx-h100x2")
	for _, v := range []nccl.Version{nccl.V2_30, nccl.V2_21} {
		o := nccl.Options{Version: v}
		table, err := nccl.CostTable(s, o)
		if err != nil {
			t.Fatal(err)
		}
		algos := nccl.Algos(v)
		if want := len(nccl.TableOps) * len(algos) * 3; len(table) != want {
			t.Fatalf("%v: %d cells, want %d", v, len(table), want)
		}
		for i, c := range table {
			op, a, p := nccl.TableOps[i/(3*len(algos))], algos[i/3%len(algos)], nccl.Protocols()[i%3]
			if c.Op != op || c.Algo != a || c.Protocol != p {
				t.Fatalf("%v: cell %d is %v %v %v, want %v %v %v", v, i, c.Op, c.Algo, c.Protocol, op, a, p)
			}
			var est nccl.Estimate
			for _, e := range nccl.Estimates(s, op, 1, o) {
				if e.Algo == a && e.Protocol == p {
					est = e
				}
			}
			switch {
			case c.Off != est.Off:
				t.Errorf("%v %v: off %q, the estimate's %q", v, c, c.Off, est.Off)
			case c.Off != "" && (c.LatencyUS != 0 || c.AlgBW != 0):
				t.Errorf("%v %v/%v/%v is off (%s) but priced %v", v, op, a, p, c.Off, c)
			case c.Off == "" && (c.LatencyUS != est.LatencyUS || c.AlgBW != est.AlgBW || !(c.AlgBW > 0)):
				t.Errorf("%v %v/%v/%v: %v, the estimate at 1 byte %.3f/%.3f", v, op, a, p, c, est.LatencyUS, est.AlgBW)
			}
		}
		// The plateau: NCCL's estimate of a multi-node Ring/Simple
		// all-reduce of 64 bytes a channel and rank or more has 1.4 times
		// the table's latency (Hopper).
		ring := table[(len(nccl.TableOps)-1)*3*len(algos)+3*int(nccl.Ring)+2]
		for _, e := range nccl.Estimates(s, ops.AllReduce, 1<<30, o) {
			if e.Algo == nccl.Ring && e.Protocol == ops.ProtoSimple && !near(e.LatencyUS, 1.4*ring.LatencyUS) {
				t.Errorf("%v: ring/Simple all-reduce of 1 GiB has latency %.2f, want 1.4 × the table's %.2f", v, e.LatencyUS, ring.LatencyUS)
			}
		}
	}
	if got := nccl.Algos(nccl.V2_21); len(got) != 6 || got[5] != nccl.NVLSTree {
		t.Errorf("2.21's algorithms %v, want six without PAT", got)
	}
	if got := nccl.Algos(nccl.V2_23); len(got) != 7 || got[6] != nccl.PAT {
		t.Errorf("2.23's algorithms %v, want seven, PAT last", got)
	}
	one := s
	one.Ranks, one.Nodes, one.PerNode = 1, 1, 1
	if _, err := nccl.CostTable(one, nccl.Options{}); err == nil || !strings.Contains(err.Error(), "one rank") {
		t.Errorf("one rank: %v, want an error that says NCCL has no table for it", err)
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// The channels NCCL's init reports, in each release's line: NVLS's 0
// where it sets none up, no CollNet count before 2.20, CollNet's own in
// 2.20, the communicator's from 2.21.
func TestChannelsAreNCCLsInitLine(t *testing.T) {
	for _, tc := range []struct {
		spec string
		v    nccl.Version
		want string
	}{
		{"dgx-h100", nccl.V2_30, "24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer"},
		{"dgx-a100", nccl.V2_30, "24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer"},
		{"dgx-h100x2", 219, "16 coll channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer"},
		{"dgx-h100x2", 220, "16 coll channels, 0 collnet channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer"},
		{"dgx-h100x2,sharp=inf", 220, "16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer"},
	} {
		if got := nccl.Channels(describe(t, tc.spec), nccl.Options{Version: tc.v}).String(); got != tc.want {
			t.Errorf("%s at %v: %q, want %q", tc.spec, tc.v, got, tc.want)
		}
	}
	if got := nccl.Channels(describe(t, "dgx-h100"), nccl.Options{NoNVLS: true}); got.NVLS != 0 {
		t.Errorf("NCCL_NVLS_ENABLE=0: %d NVLS channels, want 0", got.NVLS)
	}
}

// What NCCL 2.29.7 set up for 8 GB300s on two trays of an NVL72 (one
// NVLink domain, MNNVL), as a published root-cause report gives it from
// NCCL's graph dump and init line (eunomia-bpf/nccl-eBPF, 2026-08-14
// report on a GB300 NVL72's cross-tray channel collapse, its healthy
// trays04/05 control): the ring's search 16 channels of 45 GB/s, the
// tree's 16, NVLS 8 heads of 80 within and 90 across; 32 coll, 24 NVLS,
// 32 p2p channels and 32 a peer.
func TestGraphsOfEightGB300sAreNCCLs(t *testing.T) {
	topo, err := topology.Resolve("gb300-nvl72")
	if err != nil {
		t.Fatal(err)
	}
	if topo, err = topology.FirstGPUs(topo, 8); err != nil {
		t.Fatal(err)
	}
	s := describeTopology(t, topo)
	want := map[nccl.Algo]nccl.Graph{
		nccl.Ring: {Algo: nccl.Ring, Channels: 16, IntraGBps: 45, InterGBps: 45},
		nccl.Tree: {Algo: nccl.Tree, Channels: 16, IntraGBps: 45, InterGBps: 45},
		nccl.NVLS: {Algo: nccl.NVLS, Channels: 8, IntraGBps: 80, InterGBps: 90},
	}
	for _, g := range nccl.Graphs(s, 229) {
		if w, ok := want[g.Algo]; ok && g != w {
			t.Errorf("%v's graph %+v, want %+v", g.Algo, g, w)
		}
	}
	if got, want := nccl.Channels(s, nccl.Options{Version: 229}).String(), "32 coll channels, 32 collnet channels, 24 nvls channels, 32 p2p channels, 32 p2p channels per peer"; got != want {
		t.Errorf("channels %q, want %q", got, want)
	}
}

// Ranked lists the pairs NCCL's tuner weighs, cheapest first, NCCL's
// choice first; point to point has its transport alone.
func TestRankedPutsNCCLsChoiceFirst(t *testing.T) {
	topo, err := topology.Resolve("dgx-h100x2")
	if err != nil {
		t.Fatal(err)
	}
	tu, err := nccl.NewTuner(topo, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.Broadcast} {
		for _, count := range []int{1, 1 << 10, 1 << 20, 1 << 28} {
			spec := ops.Spec{Op: op, Algo: "nccl", Ranks: 16, Count: count, DType: hw.F32, Redop: hw.Sum}
			ranked, err := tu.Ranked(spec)
			if err != nil {
				t.Fatal(err)
			}
			c, err := tu.Choose(spec)
			if err != nil {
				t.Fatal(err)
			}
			if ranked[0] != c.NCCL || len(ranked) < 2 {
				t.Errorf("%v of %d: first %v of %d, NCCL's choice %v", op, count, ranked[0], len(ranked), c.NCCL)
			}
			for i := 1; i < len(ranked); i++ {
				if ranked[i].TimeUS < ranked[i-1].TimeUS || ranked[i].Off != "" {
					t.Errorf("%v of %d: %v (%.2f us, off %q) after %v (%.2f us)", op, count, ranked[i], ranked[i].TimeUS, ranked[i].Off, ranked[i-1], ranked[i-1].TimeUS)
				}
			}
		}
	}
	ranked, err := tu.Ranked(ops.Spec{Op: ops.SendRecv, Algo: "nccl", Ranks: 16, Count: 1 << 20, DType: hw.F32, Redop: hw.Sum})
	if err != nil || len(ranked) != 1 || ranked[0].Algo != nccl.P2P {
		t.Errorf("sendrecv: %v, %v; want the p2p transport alone", ranked, err)
	}
	// A collective whose buffers pass the largest int64 is refused, not
	// priced at a wrapped size.
	huge := ops.Spec{Op: ops.AllGather, Algo: "nccl", Ranks: 16, Count: math.MaxInt64 / 4, DType: hw.F32}
	if ranked, err := tu.Ranked(huge); err == nil {
		t.Errorf("all-gather of 16 x 2^61 floats: %v, want an error", ranked)
	}
	if c, err := tu.Choose(huge); err == nil {
		t.Errorf("all-gather of 16 x 2^61 floats: chose %v, want an error", c)
	}
}

// NCCL 2.21-2.23 print their model's time for each call: "805306368
// Bytes -> Algo 1 proto 2 time 3970.683594" on 8 H100s with
// NCCL_PROTO=Simple (NVIDIA/nccl issue 1595; ring/Simple, as its
// maintainer reads it there, so NVLS, which would be cheaper, was not
// set up). commsim's model gives the same time within NCCL's single
// precision (3970.683733).
func TestModelTimeIsTheOneNCCLPrinted(t *testing.T) {
	topo, err := topology.Resolve("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []nccl.Version{nccl.V2_21, nccl.V2_23} {
		tu, err := nccl.NewTuner(topo, nccl.Options{Version: v, Protos: []ops.Protocol{ops.ProtoSimple}, NoNVLS: true})
		if err != nil {
			t.Fatal(err)
		}
		c, err := tu.Choose(ops.Spec{Op: ops.AllReduce, Algo: "nccl", Ranks: 8, Count: 805306368 / 2, DType: hw.F16, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		if c.NCCL.Algo != nccl.Ring || c.NCCL.Protocol != ops.ProtoSimple || math.Abs(c.NCCL.TimeUS-3970.683594) > 1e-3 {
			t.Errorf("%v: %v in %.6f us, want ring/Simple in 3970.683594", v, c.NCCL, c.NCCL.TimeUS)
		}
	}
}

// NCCL 2.22.3 printed its model's time for every call of a 3-node,
// 24-H100 all-reduce sweep (NVIDIA/nccl issue 1453: 8 NICs of 200 Gb/s a
// node; the lines below as its thread quotes them). Where commsim's model
// and NCCL's agree on the graph, the times are NCCL's to its float
// precision: the ring (8 channels of 24 GB/s) from 512 MiB, NVLSTree (its
// 53 µs latency, 80 GB/s) at 512 KiB and 4 MiB, and the tree's latency
// (25.2 µs: one level for 3 nodes, as NCCL's log2i counts them). The
// tree's bandwidth there is 0.85 of commsim's model's, LL's and LL128's
// alike (8.67 GB/s against 10.2; 70.4 against 82.8): the factor NCCL
// puts on a tree whose search ended with the plain TREE pattern
// (tuning.cc), which commsim takes only with one GPU a node, where the
// run read its topology from a file of its own (NCCL_TOPO_FILE) with
// NCCL_CROSS_NIC=2. So NCCL runs an LL128 tree at 128 KiB and NVLSTree
// at 512 KiB, where commsim's model keeps LL and LL128 trees
// (fidelity's TestCallsNCCLPrintedAreTheModels).
func TestModelTimesAreTheOnesNCCLPrintedOnThreeNodes(t *testing.T) {
	topo, err := topology.Resolve("dgx-h100x3,nicbw=200Gb/s")
	if err != nil {
		t.Fatal(err)
	}
	tu, err := nccl.NewTuner(topo, nccl.Options{Version: 222})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []struct {
		bytes int64
		algo  nccl.Algo
		proto ops.Protocol
		us    float64
	}{
		{524288, nccl.NVLSTree, ops.ProtoSimple, 59.553600},
		{4194304, nccl.NVLSTree, ops.ProtoSimple, 105.428802},
		{536870912, nccl.Ring, ops.ProtoSimple, 5679.147949},
		{1073741824, nccl.Ring, ops.ProtoSimple, 11038.536133},
		{8589934592, nccl.Ring, ops.ProtoSimple, 86069.968750},
	} {
		ranked, err := tu.Ranked(ops.Spec{Op: ops.AllReduce, Algo: "nccl", Ranks: 24, Count: int(line.bytes / 4), DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ranked, func(e nccl.Estimate) bool { return e.Algo == line.algo && e.Protocol == line.proto })
		if i < 0 || math.Abs(ranked[i].TimeUS-line.us) > 1e-6*line.us {
			t.Errorf("%d B %v/%v: commsim's model %v, NCCL printed %.6f us", line.bytes, line.algo, line.proto, ranked, line.us)
		}
	}
	tree := estimate(t, tu.System, ops.AllReduce, 4, nccl.Tree, ops.ProtoLL, tu.Options)
	if math.Abs(tree.LatencyUS-25.2) > 1e-9 { // "4 Bytes -> Algo 0 proto 0 time 25.200462"
		t.Errorf("tree/LL latency %v us, want NCCL's 25.2", tree.LatencyUS)
	}
}
