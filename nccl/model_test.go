package nccl_test

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

func describe(t *testing.T, spec string) nccl.System {
	t.Helper()
	topo, err := topology.Resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	return describeTopology(t, topo)
}

// describeTopology is what NCCL's search sees of topo.
func describeTopology(t *testing.T, topo *topology.Topology) nccl.System {
	t.Helper()
	s, err := nccl.Describe(topo)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDescribeReadsWhatNCCLSees: ranks per node, GPU and CPU, NVLinks and
// NCCL's figure for them (18 × 20.6 GB/s on an H100, 12 × 20 on an A100:
// NCCL-MODEL.md §6), NICs (a NIC link of two ports as two NICs), the
// PCIe link before them as NCCL rates it, the NVSwitch and NVLink
// SHARP, and the GPU's reduce bandwidth, from the presets.
func TestDescribeReadsWhatNCCLSees(t *testing.T) {
	for _, tc := range []struct {
		topo string
		want nccl.System
	}{
		{"dgx-h100", nccl.System{Ranks: 8, Nodes: 1, PerNode: 8, NodeMajor: true, Arch: topology.Hopper, CPU: topology.IntelCPU,
			NVLinks: 18, IntraBW: 18 * 20.6, LinkBW: 450e9, NVLSCapable: true, NVSwitch: true, ReduceBW: 1.00e12}},
		{"dgx-a100x2", nccl.System{Ranks: 16, Nodes: 2, PerNode: 8, NodeMajor: true, Arch: topology.Ampere, CPU: topology.AMDCPU,
			NVLinks: 12, IntraBW: 12 * 20, LinkBW: 300e9, NICs: 8, NICBW: 25, PCIeBW: 24, NVSwitch: true, ReduceBW: 609e9}},
		{"dgx-a100x2,nicports=2", nccl.System{Ranks: 16, Nodes: 2, PerNode: 8, NodeMajor: true, Arch: topology.Ampere, CPU: topology.AMDCPU,
			NVLinks: 12, IntraBW: 12 * 20, LinkBW: 300e9, NICs: 16, NICBW: 12.5, PCIeBW: 24, NVSwitch: true, ReduceBW: 609e9}},
		{"dgx-b200x2", nccl.System{Ranks: 16, Nodes: 2, PerNode: 8, NodeMajor: true, Arch: topology.Blackwell, CPU: topology.IntelCPU,
			NVLinks: 18, IntraBW: 18 * 40.1, LinkBW: 900e9, NICs: 8, NICBW: 50, PCIeBW: 48, NVLSCapable: true, NVSwitch: true, ReduceBW: 2.39e12}},
		// ConnectX-8 at 800 Gb/s behind PCIe Gen6 x16, which NCCL rates at
		// 96 GB/s (topo.cc: 64 GT/s as 480 × 16 lanes / 80).
		{"dgx-b300x2", nccl.System{Ranks: 16, Nodes: 2, PerNode: 8, NodeMajor: true, Arch: topology.Blackwell, CPU: topology.IntelCPU,
			NVLinks: 18, IntraBW: 18 * 40.1, LinkBW: 900e9, NICs: 8, NICBW: 100, PCIeBW: 96, NVLSCapable: true, NVSwitch: true, ReduceBW: 2.39e12}},
		// One rank a node: the GPU keeps its NVLinks and switch, its NIC
		// is the node's only one, and NVLS has no peers to run with
		// (Options.nvlsOff).
		{"dgx-h100x10,gpus=1", nccl.System{Ranks: 10, Nodes: 10, PerNode: 1, NodeMajor: true, Arch: topology.Hopper, CPU: topology.IntelCPU,
			NVLinks: 18, IntraBW: 18 * 20.6, LinkBW: 450e9, NICs: 1, NICBW: 50, PCIeBW: 48, NVLSCapable: true, NVSwitch: true, ReduceBW: 1.00e12}},
		{"dgx-b200x2,gpus=4", nccl.System{Ranks: 8, Nodes: 2, PerNode: 4, NodeMajor: true, Arch: topology.Blackwell, CPU: topology.IntelCPU,
			NVLinks: 18, IntraBW: 18 * 40.1, LinkBW: 900e9, NICs: 4, NICBW: 50, PCIeBW: 48, NVLSCapable: true, NVSwitch: true, ReduceBW: 2.39e12}},
		{"gb300-nvl72x2,nicports=2", nccl.System{Ranks: 144, Nodes: 2, PerNode: 72, NodeMajor: true, Arch: topology.Blackwell, CPU: topology.ARMCPU,
			NVLinks: 18, IntraBW: 18 * 40.1, LinkBW: 900e9, NICs: 144, NICBW: 50, PCIeBW: 96, NVLSCapable: true, NVSwitch: true, ReduceBW: 2.39e12}},
	} {
		got := describe(t, tc.topo)
		if math.Abs(got.IntraBW-tc.want.IntraBW) < 1e-9 {
			got.IntraBW = tc.want.IntraBW
		}
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.topo, got, tc.want)
		}
	}
	if _, err := nccl.Describe(try(topology.Parse("cluster:2x4"))(t)); err != nil {
		t.Errorf("cluster:2x4: %v", err)
	}
}

func try[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// TestFixedLatenciesAreNCCLs: the size-independent part of NCCL's
// estimates for 8 GPUs on one node, NVLink or PCIe, is what NCCL-MODEL.md
// §8 derives from tuning.cc by hand; on two nodes, what §4's formulas
// give with tuning.cc's table.
func TestFixedLatenciesAreNCCLs(t *testing.T) {
	nvlink := describe(t, "dgx-h100")
	pcie := nccl.System{Ranks: 8, Nodes: 1, PerNode: 8, Arch: topology.Hopper, CPU: topology.IntelCPU, IntraBW: 12}
	twoAMD := describe(t, "dgx-h100x2,cpu=amd")
	threeNodes, sixNodes := describe(t, "dgx-h100x3"), describe(t, "dgx-h100x6")
	twoAMDOneNIC, twoOneGPU := twoAMD, describe(t, "dgx-h100x2,gpus=1")
	twoAMDOneNIC.NICs = 1
	twoAMDNICsOnCPU, twoAMDPCIe, twoAMDFourNICs := twoAMD, twoAMD, twoAMD
	twoAMDNICsOnCPU.NICsOnCPU = true
	twoAMDPCIe.NVLinks = 0
	twoAMDFourNICs.NICs = 4
	for _, tc := range []struct {
		sys   nccl.System
		op    ops.Op
		algo  nccl.Algo
		proto ops.Protocol
		us    float64
	}{
		{nvlink, ops.AllReduce, nccl.Ring, ops.ProtoLL, 15.0},
		{nvlink, ops.AllReduce, nccl.Ring, ops.ProtoLL128, 40.6},
		{nvlink, ops.AllReduce, nccl.Ring, ops.ProtoSimple, 56.0},
		{nvlink, ops.AllReduce, nccl.Tree, ops.ProtoLL, 15.2},
		{nvlink, ops.AllReduce, nccl.Tree, ops.ProtoLL128, 31.5},
		{nvlink, ops.AllReduce, nccl.Tree, ops.ProtoSimple, 64.4},
		{nvlink, ops.AllReduce, nccl.NVLS, ops.ProtoSimple, 25},
		{nvlink, ops.AllGather, nccl.Ring, ops.ProtoLL, 10.8},
		{nvlink, ops.ReduceScatter, nccl.Ring, ops.ProtoLL128, 27.3},
		{nvlink, ops.AllGather, nccl.Ring, ops.ProtoSimple, 32.2},
		{pcie, ops.AllReduce, nccl.Ring, ops.ProtoLL, 20.6},
		// NCCL leaves LL128 off between GPUs on PCIe unless NCCL_PROTO
		// names it (estimate below names it): its latency stays priced.
		{pcie, ops.AllReduce, nccl.Ring, ops.ProtoLL128, 49.0},
		{pcie, ops.AllReduce, nccl.Ring, ops.ProtoSimple, 88.2},
		// A ring that broadcasts or reduces counts one hop where its
		// channels keep one pattern: on one node, or across nodes with a
		// NIC, or a GPU, a node.
		{nvlink, ops.Broadcast, nccl.Ring, ops.ProtoLL, 6.6 + 0.6},
		{nvlink, ops.Reduce, nccl.Ring, ops.ProtoLL128, 14 + 1.9},
		{nvlink, ops.Broadcast, nccl.Ring, ops.ProtoSimple, 8.4 + 3.4},
		{twoAMDOneNIC, ops.Broadcast, nccl.Ring, ops.ProtoLL, 6.6 + 2.7},
		{twoAMDOneNIC, ops.Reduce, nccl.Ring, ops.ProtoSimple, 8.4 + 14},
		{twoOneGPU, ops.Broadcast, nccl.Ring, ops.ProtoLL128, 14 + 4.0},
		// Taken to keep one too: NICs on the host CPU, which every GPU
		// reaches alike, and GPUs joined through AMD hosts only, where
		// NCCL's search never tries channels of their own.
		{twoAMDNICsOnCPU, ops.Broadcast, nccl.Ring, ops.ProtoLL, 6.6 + 2.7},
		{twoAMDPCIe, ops.Reduce, nccl.Ring, ops.ProtoLL, 6.6 + 2.7},
		// Where a node's NICs hang off its GPUs, more than one, they
		// differ, and it counts a network hop a rank, Simple's at the
		// tree's figure.
		{twoAMD, ops.Broadcast, nccl.Ring, ops.ProtoLL, 6.6 + 16*2.7},
		{twoAMD, ops.Reduce, nccl.Ring, ops.ProtoLL128, 14 + 16*4.0},
		{twoAMD, ops.Broadcast, nccl.Ring, ops.ProtoSimple, 8.4 + 16*14},
		{twoAMDFourNICs, ops.Broadcast, nccl.Ring, ops.ProtoLL, 6.6 + 16*2.7},
		// On two nodes a ring's steps within a node take at least the
		// host's network overhead (2 µs on AMD, three times it with
		// Simple); a tree's do not.
		{twoAMD, ops.AllReduce, nccl.Ring, ops.ProtoLL, 6.6 + 28*2.0 + 2*2.7},
		{twoAMD, ops.AllGather, nccl.Ring, ops.ProtoSimple, 8.4 + 14*max(3.4, 6) + 14},
		{twoAMD, ops.AllReduce, nccl.Tree, ops.ProtoLL, 6.8 + 2*(7*0.6+5.0)},
		{twoAMD, ops.AllReduce, nccl.Tree, ops.ProtoLL128, 14 + 2*(7*1.25+8.5)},
		// Trees count the floor of log2 of the nodes (NCCL's log2i): 3
		// nodes one level, 6 two.
		{threeNodes, ops.AllReduce, nccl.Tree, ops.ProtoLL, 6.8 + 2*(7*0.6+1*5.0)},
		{sixNodes, ops.AllReduce, nccl.Tree, ops.ProtoLL, 6.8 + 2*(7*0.6+2*5.0)},
	} {
		e := estimate(t, tc.sys, tc.op, 1<<20, tc.algo, tc.proto, nccl.Options{Protos: []ops.Protocol{tc.proto}})
		if e.Off != "" || math.Abs(e.LatencyUS-tc.us) > 1e-9 {
			t.Errorf("%v %v/%v: latency %v µs (%s), want %v", tc.op, tc.algo, tc.proto, e.LatencyUS, e.Off, tc.us)
		}
	}
}

// planOf is tu's plan and choice for spec.
func planOf(t *testing.T, tu *nccl.Tuner, spec ops.Spec) (*ops.Plan, nccl.Choice) {
	t.Helper()
	plan, choice, err := tu.Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	return plan, choice
}

// estimate finds one algorithm and protocol among Estimates.
func estimate(t *testing.T, s nccl.System, op ops.Op, bytes int64, a nccl.Algo, p ops.Protocol, o nccl.Options) nccl.Estimate {
	t.Helper()
	for _, e := range nccl.Estimates(s, op, bytes, o) {
		if e.Algo == a && e.Protocol == p {
			return e
		}
	}
	t.Fatalf("no estimate of %v/%v", a, p)
	return nccl.Estimate{}
}

// TestEstimatesFollowNCCLsRules: which algorithms NCCL considers for each
// op and fabric, LL's bandwidth cap, NVLS's channels, the channels NCCL
// launches for few bytes, and a time that is latency plus bytes over
// algorithm bandwidth.
func TestEstimatesFollowNCCLsRules(t *testing.T) {
	h100, a100x2 := describe(t, "dgx-h100"), describe(t, "dgx-a100x2")
	off := func(s nccl.System, op ops.Op, a nccl.Algo, p ops.Protocol) string {
		return estimate(t, s, op, 1<<20, a, p, nccl.Options{}).Off
	}
	for _, tc := range []struct {
		sys  nccl.System
		op   ops.Op
		algo nccl.Algo
		p    ops.Protocol
		on   bool
	}{
		{h100, ops.Broadcast, nccl.Ring, ops.ProtoLL, true},
		{h100, ops.Broadcast, nccl.Tree, ops.ProtoLL, false},
		{h100, ops.AllGather, nccl.Tree, ops.ProtoSimple, false},
		{h100, ops.AllGather, nccl.NVLS, ops.ProtoSimple, true},
		{h100, ops.AllReduce, nccl.NVLS, ops.ProtoLL, false},
		{h100, ops.AllReduce, nccl.NVLSTree, ops.ProtoSimple, false}, // one node
		{h100, ops.AllReduce, nccl.PAT, ops.ProtoSimple, false},
		{h100, ops.AllGather, nccl.PAT, ops.ProtoSimple, false}, // 8 GPUs per node
		{a100x2, ops.AllReduce, nccl.NVLS, ops.ProtoSimple, false},
		{a100x2, ops.AllReduce, nccl.CollNetDirect, ops.ProtoSimple, false},
		{a100x2, ops.AllReduce, nccl.Tree, ops.ProtoLL128, true},
		{h100, ops.AllToAll, nccl.Ring, ops.ProtoSimple, false},
	} {
		if got := off(tc.sys, tc.op, tc.algo, tc.p); (got == "") != tc.on {
			t.Errorf("%v %v/%v on %d nodes: off %q, want on=%v", tc.op, tc.algo, tc.p, tc.sys.Nodes, got, tc.on)
		}
	}
	// LL on one Hopper node: min(141 GB/s, 0.5 × channels × per-channel).
	if e := estimate(t, h100, ops.AllReduce, 1<<30, nccl.Ring, ops.ProtoLL, nccl.Options{}); e.BusBW != 141 {
		t.Errorf("ring/LL bus bandwidth on dgx-h100: %v GB/s, want llMaxBw's 141", e.BusBW)
	}
	for _, e := range nccl.Estimates(h100, ops.AllReduce, 1<<30, nccl.Options{}) {
		if e.Off != "" {
			continue
		}
		if want := e.LatencyUS + float64(1<<30)/(1000*e.AlgBW); math.Abs(e.TimeUS-want) > 1e-9*want {
			t.Errorf("%v: time %v µs, want latency + bytes/algbw = %v", e, e.TimeUS, want)
		}
		if e.Algo == nccl.NVLS && e.Channels != 16 {
			t.Errorf("NVLS on Hopper: %d channels, want 16", e.Channels)
		}
	}
	// Few bytes: NCCL launches fewer channels (8 B: one), while a channel
	// would have under 64 bytes a thread for Simple: 48 KiB keeps one of
	// 512 threads on NVLink, two of 256 where the ring search found no
	// more than PCIe's 12 GB/s (tuning.cc halves Simple's threads there).
	if e := estimate(t, h100, ops.AllReduce, 8, nccl.Ring, ops.ProtoLL, nccl.Options{}); e.Channels != 1 {
		t.Errorf("8 B ring/LL: %d channels, want 1", e.Channels)
	}
	pcie := nccl.System{Ranks: 8, Nodes: 1, PerNode: 8, Arch: topology.Hopper, CPU: topology.IntelCPU, IntraBW: 12}
	for _, tc := range []struct {
		sys  nccl.System
		want int
	}{{h100, 1}, {pcie, 2}} {
		if e := estimate(t, tc.sys, ops.AllReduce, 48<<10, nccl.Ring, ops.ProtoSimple, nccl.Options{}); e.Channels != tc.want {
			t.Errorf("48 KiB ring/Simple on %v: %d channels, want %d", tc.sys, e.Channels, tc.want)
		}
	}
	big := estimate(t, h100, ops.AllReduce, 1<<30, nccl.Ring, ops.ProtoSimple, nccl.Options{})
	// NCCL_MIN/MAX_NCHANNELS clamp the channels after the search: the
	// model, which reads the search's, does not see them.
	for _, tc := range []struct {
		o    nccl.Options
		want int
	}{{nccl.Options{Channels: 4}, 4}, {nccl.Options{MaxChannels: 8}, 8}, {nccl.Options{MinChannels: 32}, 32}, {nccl.Options{MinChannels: 8, MaxChannels: 16}, 16}} {
		if e := estimate(t, h100, ops.AllReduce, 1<<30, nccl.Ring, ops.ProtoSimple, tc.o); e.Channels != tc.want || e.BusBW != big.BusBW {
			t.Errorf("%+v: %d channels at %v GB/s, want %d at the model's %v (%d unforced)", tc.o, e.Channels, e.BusBW, tc.want, big.BusBW, big.Channels)
		}
	}
	// Across nodes channels spread evenly over the NICs.
	if e := estimate(t, a100x2, ops.AllReduce, 1<<30, nccl.Ring, ops.ProtoSimple, nccl.Options{}); e.Channels%a100x2.NICs != 0 {
		t.Errorf("dgx-a100x2: %d channels over %d NICs", e.Channels, a100x2.NICs)
	}
}

// TestTuneChoosesTheCheapest: Tune takes the cheapest estimate, reports
// what NCCL would run where commsim cannot simulate it, honours NCCL_ALGO
// and NCCL_PROTO's restrictions, and says why nothing is left.
func TestTuneChoosesTheCheapest(t *testing.T) {
	h100 := describe(t, "dgx-h100")
	for _, bytes := range []int64{8, 1 << 16, 1 << 24, 1 << 30} {
		c, err := nccl.Tune(h100, ops.AllReduce, bytes, nccl.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range nccl.Estimates(h100, ops.AllReduce, bytes, nccl.Options{}) {
			if e.Off == "" && e.TimeUS < c.NCCL.TimeUS || e.Off == "" && nccl.Simulable(h100, e.Algo) && e.TimeUS < c.TimeUS {
				t.Errorf("%d B: chose %v (%v µs) and NCCL's %v (%v µs), but %v takes %v µs", bytes, c.Estimate, c.TimeUS, c.NCCL, c.NCCL.TimeUS, e, e.TimeUS)
			}
		}
		if !nccl.Simulable(h100, c.Algo) {
			t.Errorf("%d B: chose %v, which commsim cannot simulate", bytes, c.Estimate)
		}
	}
	c, _ := nccl.Tune(h100, ops.AllReduce, 1<<30, nccl.Options{})
	if c.NCCL.Algo != nccl.NVLS || c.Algo != nccl.NVLS {
		t.Errorf("1 GiB all-reduce on dgx-h100: NCCL %v, simulated %v; want NVLS for both", c.NCCL, c.Estimate)
	}
	// One GPU per node: NCCL's PAT, which commsim simulates.
	onePerNode := describe(t, "cluster:8x1,arch=hopper")
	c, _ = nccl.Tune(onePerNode, ops.AllGather, 1<<20, nccl.Options{})
	if c.NCCL.Algo != nccl.PAT || c.Algo != nccl.PAT {
		t.Errorf("1 MiB all-gather on 8 nodes of 1: NCCL %v, simulated %v; want PAT for both", c.NCCL, c.Estimate)
	}
	c, _ = nccl.Tune(h100, ops.AllReduce, 1<<30, nccl.Options{Protos: []ops.Protocol{ops.ProtoLL}})
	if c.Protocol != ops.ProtoLL || c.NCCL.Protocol != ops.ProtoLL {
		t.Errorf("NCCL_PROTO=LL: chose %v (NCCL %v)", c.Estimate, c.NCCL)
	}
	a100x2 := describe(t, "dgx-a100x2")
	if _, err := nccl.Tune(a100x2, ops.AllReduce, 1<<30, nccl.Options{Algos: []nccl.Algo{nccl.NVLS}}); err == nil || !strings.Contains(err.Error(), "does not reduce") {
		t.Errorf("NCCL_ALGO=nvls on A100s: %v, want an error saying the switch does not reduce", err)
	}
	if c, err := nccl.Tune(onePerNode, ops.AllGather, 1<<20, nccl.Options{Algos: []nccl.Algo{nccl.PAT}}); err != nil || c.Algo != nccl.PAT {
		t.Errorf("NCCL_ALGO=pat: %v, %v; want PAT", c.Estimate, err)
	}
	if _, err := nccl.Tune(h100, ops.AllToAll, 1<<20, nccl.Options{}); err == nil {
		t.Error("all-to-all: no error; NCCL's tuner does not choose for it")
	}
}

// TestVersionsKeepTheirConstants: 2.18's ring LL bandwidth was a third of
// the bus on one node where 2.30's is half (NCCL-MODEL.md §10), and 2.21's
// tree Simple per-hop latency was 28 µs.
func TestVersionsKeepTheirConstants(t *testing.T) {
	s := describe(t, "dgx-a100") // LL is not capped by llMaxBw here
	old := estimate(t, s, ops.AllGather, 1<<30, nccl.Ring, ops.ProtoLL, nccl.Options{Version: nccl.V2_18})
	now := estimate(t, s, ops.AllGather, 1<<30, nccl.Ring, ops.ProtoLL, nccl.Options{})
	if old.BusBW >= now.BusBW {
		t.Errorf("ring/LL: 2.18 %v GB/s, 2.30 %v GB/s; want 2.18 slower", old.BusBW, now.BusBW)
	}
	t21 := estimate(t, s, ops.AllReduce, 1<<20, nccl.Tree, ops.ProtoSimple, nccl.Options{Version: nccl.V2_21})
	if want := 0 + 2*7*28.0; math.Abs(t21.LatencyUS-want) > 1e-9 {
		t.Errorf("2.21 tree/Simple latency %v µs, want %v", t21.LatencyUS, want)
	}
	for _, tc := range []struct {
		in   string
		want nccl.Version
	}{{"2.30.7", nccl.V2_30}, {"2.31", nccl.V2_30}, {"2.29.2", 229}, {"2.28", nccl.V2_28}, {"2.28.3", nccl.V2_28}, {"2.27.3", nccl.V2_27}, {"2.26.6", 226}, {"2.21.5", nccl.V2_21}, {"2.18.3", nccl.V2_18}, {"2.21.5-1", nccl.V2_21}, {"2.29.7+cuda12.9", 229}} {
		if v, err := nccl.ParseVersion(tc.in); err != nil || v != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", tc.in, v, err, tc.want)
		}
	}
	for _, bad := range []string{"2.17", "3.0", "", "two", "2.20abc", "2.20.x", "02.20", "2.", "2.1000", " 2.20"} {
		if _, err := nccl.ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q): no error", bad)
		}
		if _, err := nccl.ParseRelease(bad); err == nil {
			t.Errorf("ParseRelease(%q): no error", bad)
		}
	}
	// A value that is no release prints as a value, in errors too.
	for v, want := range map[nccl.Version]string{0: "Version(0)", 99: "Version(99)", -1: "Version(-1)", nccl.V2_18: "2.18", 231: "2.31"} {
		if v.String() != want {
			t.Errorf("Version(%d).String() = %q, want %q", int(v), v.String(), want)
		}
	}
	if _, err := nccl.NewTuner(try(topology.Resolve("switch:4"))(t), nccl.Options{Version: 99}); err == nil || !strings.Contains(err.Error(), "version Version(99): the model has 2.18 to 2.30") {
		t.Errorf("NewTuner of version 99: %v", err)
	}
	// ParseRelease reads the release as written, a newer one included.
	for in, want := range map[string]nccl.Version{"2.31": 231, "2.99.1-1": 299, "2.30+cuda12.9": nccl.V2_30, "2.26-1": 226} {
		if v, err := nccl.ParseRelease(in); err != nil || v != want {
			t.Errorf("ParseRelease(%q) = %v, %v; want %v", in, v, err, want)
		}
	}
}

// TestLabelNamesNCCLsChoice: the algo column reads algorithm, protocol
// and channels for NCCL's plans, and the algorithm for commsim's own.
func TestLabelNamesNCCLsChoice(t *testing.T) {
	tu, err := nccl.NewTuner(try(topology.Resolve("dgx-h100"))(t), nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, c, err := tu.Plan(ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: 2, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if got := nccl.Label(plan); got != "ring/LL/1ch" || c.Channels != 1 {
		t.Errorf("8 B all-reduce: %q (%v), want ring/LL/1ch", got, c.Estimate)
	}
	own, _ := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "rhd", Ranks: 8, Count: 8, DType: hw.F32, Redop: hw.Sum})
	if got := nccl.Label(own); got != "rhd" {
		t.Errorf("rhd plan labelled %q", got)
	}
	if _, _, err := tu.Plan(ops.Spec{Op: ops.AllReduce, Ranks: 4, Count: 2, DType: hw.F32, Redop: hw.Sum}); err == nil {
		t.Error("4 ranks on an 8-GPU fabric: no error")
	}
}

// TestMachineScalesWhatRunsNotTheChoice: a machine's corrections scale
// the plan's launch, hop latencies and channel rate, and leave NCCL's
// choice as its model makes it.
func TestMachineScalesWhatRunsNotTheChoice(t *testing.T) {
	topo := try(topology.Resolve("dgx-h100"))(t)
	spec := ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: 1 << 20, DType: hw.F32, Redop: hw.Sum}
	plain := try(nccl.NewTuner(topo, nccl.Options{}))(t)
	m := nccl.Machine{Launch: 2, Hop: 3, Bandwidth: [3]float64{0.5, 0.5, 0.5}}
	fitted := try(nccl.NewTuner(topo, nccl.Options{Machine: m}))(t)
	a, ca := planOf(t, plain, spec)
	b, cb := planOf(t, fitted, spec)
	if ca != cb {
		t.Errorf("choice %v became %v", ca.Estimate, cb.Estimate)
	}
	if b.Launch != 2*a.Launch || b.Wire.Latency[ops.PathNVLink] != 3*a.Wire.Latency[ops.PathNVLink] || b.Wire.Rate != 0.5*a.Wire.Rate {
		t.Errorf("launch %v -> %v, hop %v -> %v, rate %v -> %v", a.Launch, b.Launch, a.Wire.Latency, b.Wire.Latency, a.Wire.Rate, b.Wire.Rate)
	}
}

// TestMachineChannelRate: Machine.ChannelGBps (or, where it is 0, the
// rate published runs measure on the fabric's GPUs) bounds what each
// channel of a ring moves, where a channel already slower keeps its
// speed, and is what a point-to-point channel moves (in place of the ring
// channel's share that stands in without it), within the ring's whole
// bandwidth and, across nodes, NCCL_P2P_PER_CHANNEL_NET_BW; NCCL's choice
// stays its model's, and NVLS, whose channels drive the switch, is not
// bounded.
func TestMachineChannelRate(t *testing.T) {
	none := nccl.Machine{NoChannelRate: true}
	for _, tc := range []struct {
		topo  string
		op    ops.Op
		bytes int // a rank's
		m     nccl.Machine
		want  float64 // GB/s; 0: as with no channel rate
	}{
		{"hgx-b200", ops.AllGather, 2 << 30, nccl.Machine{ChannelGBps: 10}, 10},   // 32 channels of 22.5 GB/s
		{"hgx-b200", ops.AllGather, 2 << 30, nccl.Machine{ChannelGBps: 30}, 22.5}, // already slower
		{"hgx-b200", ops.SendRecv, 16 << 30, nccl.Machine{ChannelGBps: 10}, 320},  // 32 channels
		{"hgx-b200", ops.SendRecv, 32 << 20, nccl.Machine{ChannelGBps: 10}, 40},   // 4 channels of 22.5
		{"dgx-h100", ops.SendRecv, 32 << 20, nccl.Machine{ChannelGBps: 20}, 80},   // 4 channels at the rate, not the ring's share of 15
		{"dgx-h100", ops.SendRecv, 16 << 30, nccl.Machine{ChannelGBps: 20}, 360},  // 32 channels, held to the ring's whole bandwidth
		{"dgx-h100x2", ops.SendRecv, 64 << 20, nccl.Machine{ChannelGBps: 20}, 56}, // 4 channels across nodes at 14 (NCCL_P2P_PER_CHANNEL_NET_BW)
		{"dgx-h100", ops.AllReduce, 1 << 30, nccl.Machine{ChannelGBps: 10}, 0},    // NVLS: the links set its pace
		// By default, what published runs measure on the GPUs
		// (nccl.MeasuredChannel), where the machine gives no rate.
		{"hgx-b200", ops.AllGather, 2 << 30, nccl.Machine{}, 22.3},
		{"dgx-h100", ops.SendRecv, 32 << 20, nccl.Machine{}, 4 * 20.3},
		{"dgx-a100", ops.AllGather, 2 << 30, nccl.Machine{}, 0}, // none measured
		{"hgx-b200", ops.AllGather, 2 << 30, nccl.Machine{Launch: 2}, 22.3},
		{"hgx-b200", ops.AllGather, 2 << 30, none, 0},
		{"hgx-b200", ops.AllGather, 2 << 30, nccl.Machine{ChannelGBps: 10, NoChannelRate: true}, 10},
		// A protocol's factor scales a channel's speed whatever bounds it,
		// so that calibrate finds it either way.
		{"hgx-b200", ops.AllGather, 2 << 30, nccl.Machine{ChannelGBps: 10, Bandwidth: [3]float64{1, 1, 1.5}}, 15},
		{"hgx-b200", ops.AllGather, 2 << 30, nccl.Machine{Bandwidth: [3]float64{1, 1, 1.1}}, 22.3 * 1.1},
		{"dgx-h100", ops.SendRecv, 32 << 20, nccl.Machine{Bandwidth: [3]float64{1, 1, 0.5}}, 2 * 20.3},
	} {
		topo := try(topology.Resolve(tc.topo))(t)
		spec := ops.Spec{Op: tc.op, Ranks: topo.NumGPUs(), Count: tc.bytes / 4, DType: hw.F32, Redop: hw.Sum}
		plainPlan, plain := planOf(t, try(nccl.NewTuner(topo, nccl.Options{Machine: none}))(t), spec)
		plan, c := planOf(t, try(nccl.NewTuner(topo, nccl.Options{Machine: tc.m}))(t), spec)
		if c != plain {
			t.Errorf("%s %v: choice %v became %v", tc.topo, tc.op, plain.Estimate, c.Estimate)
		}
		want := tc.want
		if want == 0 {
			want = plainPlan.Wire.Rate / 1e9
		}
		if got := plan.Wire.Rate / 1e9; math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s %v of %d bytes a rank, %v, machine %+v: a flow moves at %.6g GB/s, want %.6g", tc.topo, tc.op, tc.bytes, c.Estimate, tc.m, got, want)
		}
	}
}

// TestTreesRunFasterWithinTwoNodes: NCCL's search raises a tree's speed
// within a node, up the ladder, while it is below twice the network's
// and the NVLinks carry every channel at it, and on 2 nodes the model
// reads that speed, under its per-channel cap (counted on the search's
// channels). On two A100 nodes with 400 Gb/s each (p4de: 8 channels of
// 6 GB/s on the network) a tree channel runs at 12 GB/s and beats a
// ring; with 200 Gb/s a GPU (8 channels of 24) at 30, but Ampere's cap of
// 23.6 GB/s a channel holds the tree to 188.8 GB/s, under the ring's 192:
// NCCL's model runs rings there. The same 200 Gb/s as two ports of 100
// (OCI's A100 nodes) make 16 channels of 12, a tree's at 15, and a tree
// of 220.8 GB/s under twice the cap: trees win. On 2 DGX B200s the cap (42.8) holds a
// tree at 86 GB/s to 342.4. On 3 nodes the model reads the network's
// speed, and the cap for more than 2 nodes (17.8).
func TestTreesRunFasterWithinTwoNodes(t *testing.T) {
	for _, tc := range []struct {
		fabric   string
		tree     float64 // bus GB/s of tree/Simple
		treeWins bool
	}{
		{"dgx-a100x2,nicbw=50Gb/s", 0.92 * 8 * 12, true},
		{"dgx-a100x2,nicbw=200Gb/s", 8 * 23.6, false},
		{"dgx-a100x2,nicbw=200Gb/s,nicports=2", 0.92 * 16 * 15, true},
		{"dgx-b200x2", 8 * 42.8, false},
		{"dgx-a100x3,nicbw=200Gb/s", 8 * 17.8, false},
	} {
		s := describe(t, tc.fabric)
		tree := estimate(t, s, ops.AllReduce, 1<<30, nccl.Tree, ops.ProtoSimple, nccl.Options{})
		ring := estimate(t, s, ops.AllReduce, 1<<30, nccl.Ring, ops.ProtoSimple, nccl.Options{})
		if math.Abs(tree.BusBW-tc.tree) > 1e-9*tc.tree {
			t.Errorf("%s: tree/Simple bus bandwidth %v GB/s, want %v", tc.fabric, tree.BusBW, tc.tree)
		}
		if s.Nodes == 2 && tree.AlgBW > ring.AlgBW != tc.treeWins {
			t.Errorf("%s: tree %v GB/s, ring %v GB/s of algorithm bandwidth: tree faster %v, want %v", tc.fabric, tree.AlgBW, ring.AlgBW, !tc.treeWins, tc.treeWins)
		}
	}
}

// TestFourComputeChannelsPerSearchChannel: across nodes of Hopper GPUs
// whose ring channels run over 45 GB/s, connect.cc doubles the channels
// once more while under 16 ("4 compute channels per search channel"):
// six GPUs and six 400 Gb/s NICs a node find 6 channels of 48 GB/s, so
// the collectives run on 24; Blackwell joined the rule in 2.25; before
// 2.20 it doubled up to 64 channels, so 8 H100s a node (16 coll channels
// of 45 GB/s) are too slow for it either way.
func TestFourComputeChannelsPerSearchChannel(t *testing.T) {
	for _, tc := range []struct {
		topo    string
		version nccl.Version
		want    int
	}{
		{"cluster:2x6,arch=hopper,bw=450GB/s,nicbw=400Gb/s", nccl.V2_30, 24},
		{"cluster:2x6,arch=hopper,bw=450GB/s,nicbw=400Gb/s", nccl.V2_18, 24},
		{"cluster:2x6,arch=blackwell,bw=900GB/s,nicbw=400Gb/s", nccl.V2_30, 24},
		{"cluster:2x6,arch=blackwell,bw=900GB/s,nicbw=400Gb/s", nccl.V2_23, 12},
		{"cluster:2x6,arch=hopper,bw=450GB/s,nicbw=200Gb/s", nccl.V2_30, 12},
		{"cluster:2x8,arch=hopper,bw=900GB/s,nicbw=400Gb/s", nccl.V2_30, 16},
		{"cluster:2x8,arch=hopper,bw=900GB/s,nicbw=400Gb/s", nccl.V2_18, 32},
		{"dgx-h100x2", nccl.V2_18, 16},
		{"dgx-b200x2", nccl.V2_30, 16},
		{"dgx-b200x2", nccl.V2_18, 16},
	} {
		checkRingChannels(t, tc.topo, nccl.Options{Version: tc.version}, tc.want)
	}
}

// TestCollNetAddsChannels: where CollNet runs on nodes of several GPUs
// whose chains within a node outpace the network, connect.cc gives the
// communicator half as many channels again: 24 on two DGX A100s whose
// switches reduce (16 without CollNet), none on DGX H100s, whose NVLink
// speed the search keeps to the network's.
func TestCollNetAddsChannels(t *testing.T) {
	checkRingChannels(t, "dgx-a100x2,sharp=inf", nccl.Options{}, 24)
	checkRingChannels(t, "dgx-a100x2,sharp=inf", nccl.Options{NoCollNet: true}, 16)
	checkRingChannels(t, "dgx-a100x2", nccl.Options{}, 16)
	checkRingChannels(t, "dgx-h100x2,sharp=inf", nccl.Options{}, 16)
}

// checkRingChannels checks that a ring all-reduce of 1 GiB on topo runs
// on want channels (the communicator's) with options o.
func checkRingChannels(t *testing.T, topo string, o nccl.Options, want int) {
	t.Helper()
	o.Algos, o.Protos = []nccl.Algo{nccl.Ring}, []ops.Protocol{ops.ProtoSimple}
	tu := try(nccl.NewTuner(try(topology.Resolve(topo))(t), o))(t)
	c, err := tu.Choose(ops.Spec{Op: ops.AllReduce, Ranks: tu.System.Ranks, Count: 1 << 28, DType: hw.F32, Redop: hw.Sum})
	if err != nil || c.Channels != want {
		t.Errorf("%s, NCCL %v (CollNet off: %v): %v, %v; want ring on %d channels", topo, cmp.Or(o.Version, nccl.V2_30), o.NoCollNet, c.Estimate, err, want)
	}
}

// TestChannelsFollowNCCLsSearch: across nodes a ring channel crosses on
// one NIC at the highest ladder speed the path to it carries (PCIe Gen5's
// 48 GB/s under NDR's 50 on H100 and B200 nodes, Gen4's 24 under HDR's
// 25 on A100s; 45 on H100s, whose NVLinks do not carry 8 channels of 48),
// one channel a NIC, and NCCL's model counts those 8; the
// collectives run on twice the search's channels, as connect.cc
// duplicates them: 24 on 8 H100s (12 found), 32 on 8 B200s, 16 on two
// nodes of any of them.
func TestChannelsFollowNCCLsSearch(t *testing.T) {
	for _, tc := range []struct {
		fabric   string
		channels int
		bus      float64 // ring/Simple bus GB/s
	}{
		{"dgx-h100", 24, 12 * 30},
		{"hgx-b200", 32, 16 * 45},
		{"dgx-h100x2", 16, 8 * 45}, // 18 NVLinks (370.8 GB/s) do not carry 8 × 48
		{"dgx-b200x2", 16, 8 * 48},
		{"dgx-a100x2", 16, 8 * 24},
		{"dgx-a100x2,nicbw=50Gb/s", 16, 8 * 6},
	} {
		s := describe(t, tc.fabric)
		e := estimate(t, s, ops.AllGather, 1<<30, nccl.Ring, ops.ProtoSimple, nccl.Options{})
		if e.Channels != tc.channels || math.Abs(e.BusBW-tc.bus) > 1e-9*tc.bus {
			t.Errorf("%s: ring/Simple on %d channels at %v GB/s, want %d at %v", tc.fabric, e.Channels, e.BusBW, tc.channels, tc.bus)
		}
	}
	forced := estimate(t, describe(t, "dgx-h100"), ops.AllGather, 1<<30, nccl.Ring, ops.ProtoSimple, nccl.Options{Channels: 4})
	if forced.Channels != 4 {
		t.Errorf("NCCL_MAX_NCHANNELS=4: %d channels", forced.Channels)
	}
	// A block alone moves half a search channel on 8 B200s (22.5 of 45
	// GB/s), as two blocks run each ring; with the channels set, a
	// whole one. These are NCCL's model's shares alone: no channel
	// rate (by default Blackwell's 22.3 GB/s) bounds them.
	noRate := nccl.Machine{NoChannelRate: true}
	for _, tc := range []struct {
		channels int
		rate     float64
	}{{0, 22.5e9}, {1, 45e9}} {
		tu := try(nccl.NewTuner(try(topology.Resolve("hgx-b200"))(t), nccl.Options{Algos: []nccl.Algo{nccl.Ring}, Protos: []ops.Protocol{ops.ProtoSimple}, Channels: tc.channels, Machine: noRate}))(t)
		plan, c, err := tu.Plan(ops.Spec{Op: ops.AllGather, Ranks: 8, Count: 1024, DType: hw.F32})
		if err != nil {
			t.Fatal(err)
		}
		if c.Channels != 1 || math.Abs(plan.Wire.Rate-tc.rate) > 1e-6*tc.rate {
			t.Errorf("NCCL_MAX_NCHANNELS %d: one channel at %.4g B/s (%v), want %.4g", tc.channels, plan.Wire.Rate, c.Estimate, tc.rate)
		}
	}
	// At 1 GiB the 32 channels share the model's 720 GB/s; 64 (NCCL_MIN_NCHANNELS)
	// share it too, 4 (NCCL_MAX_NCHANNELS) move a search channel each.
	for _, tc := range []struct {
		o        nccl.Options
		channels int
		rate     float64
	}{{nccl.Options{}, 32, 22.5e9}, {nccl.Options{MinChannels: 64}, 64, 11.25e9}, {nccl.Options{MaxChannels: 4}, 4, 45e9}} {
		tc.o.Algos, tc.o.Protos, tc.o.Machine = []nccl.Algo{nccl.Ring}, []ops.Protocol{ops.ProtoSimple}, noRate
		tu := try(nccl.NewTuner(try(topology.Resolve("hgx-b200"))(t), tc.o))(t)
		plan, c, err := tu.Plan(ops.Spec{Op: ops.AllGather, Ranks: 8, Count: 1 << 28, DType: hw.F32})
		if err != nil {
			t.Fatal(err)
		}
		if c.Channels != tc.channels || math.Abs(plan.Wire.Rate-tc.rate) > 1e-6*tc.rate {
			t.Errorf("min %d, max %d channels: %d at %.4g B/s, want %d at %.4g", tc.o.MinChannels, tc.o.MaxChannels, c.Channels, plan.Wire.Rate, tc.channels, tc.rate)
		}
	}
}

// TestTreeCorrectionSwaysTheChoice: NCCL's model divides a tree
// all-reduce's time by a per-size factor on its bandwidth (tuning.cc's
// treeCorrectionFactor, by log2 of the size in 64-byte units), and from
// 2.29 an NVLSTree all-reduce's on Blackwell with x86 hosts; nothing else,
// and nothing under 64 bytes or from 512 MiB (trees), 1 GiB (NVLSTree).
func TestTreeCorrectionSwaysTheChoice(t *testing.T) {
	a100x2, b200x2, gb200x2 := describe(t, "dgx-a100x2"), describe(t, "dgx-b200x2"), describe(t, "gb200-nvl72x2")
	v227 := nccl.Options{Version: nccl.V2_27}
	for _, tc := range []struct {
		sys    nccl.System
		op     ops.Op
		bytes  int64
		algo   nccl.Algo
		p      ops.Protocol
		o      nccl.Options
		factor float64
	}{
		{a100x2, ops.AllReduce, 256 << 10, nccl.Tree, ops.ProtoLL, nccl.Options{}, 0.4},    // log 12
		{a100x2, ops.AllReduce, 1 << 20, nccl.Tree, ops.ProtoLL128, nccl.Options{}, 0.6},   // log 14
		{a100x2, ops.AllReduce, 64 << 20, nccl.Tree, ops.ProtoSimple, nccl.Options{}, 0.8}, // log 20
		{a100x2, ops.AllReduce, 63, nccl.Tree, ops.ProtoSimple, nccl.Options{}, 1},
		{a100x2, ops.AllReduce, 64, nccl.Tree, ops.ProtoSimple, nccl.Options{}, 0.9},
		{a100x2, ops.AllReduce, 512 << 20, nccl.Tree, ops.ProtoSimple, nccl.Options{}, 1}, // log 23
		{a100x2, ops.AllReduce, 64 << 20, nccl.Ring, ops.ProtoSimple, nccl.Options{}, 1},
		{b200x2, ops.AllReduce, 64 << 20, nccl.NVLSTree, ops.ProtoSimple, nccl.Options{}, 0.8},
		{b200x2, ops.AllReduce, 512 << 20, nccl.NVLSTree, ops.ProtoSimple, nccl.Options{}, 0.9}, // log 23
		{b200x2, ops.AllReduce, 64 << 20, nccl.NVLSTree, ops.ProtoSimple, v227, 1},
		{gb200x2, ops.AllReduce, 64 << 20, nccl.NVLSTree, ops.ProtoSimple, nccl.Options{}, 1}, // Arm hosts
	} {
		e := estimate(t, tc.sys, tc.op, tc.bytes, tc.algo, tc.p, tc.o)
		if want := e.LatencyUS + float64(tc.bytes)/(1000*e.AlgBW*tc.factor); math.Abs(e.TimeUS-want) > 1e-9*want {
			t.Errorf("%v/%v at %d bytes on %d nodes: %v µs, want %v (bandwidth ×%v)", tc.algo, tc.p, tc.bytes, tc.sys.Nodes, e.TimeUS, want, tc.factor)
		}
	}
}

// TestTreeDipRunsAsTheModelSays: what NCCL's tree correction adds to
// its model's time (the bandwidth term over the factor, less the term)
// opens the plan's run on top of its launch, so a tree all-reduce at a
// size NCCL measured slow runs that much longer; a faster protocol
// (Machine.Bandwidth) shrinks it with the term, and a size or an
// algorithm without a correction adds nothing. NVLSTree's dip runs in
// every release's plan on every generation (treeDip), not with Arm
// hosts; the model that chooses (the estimate's time) has it only where
// NCCL's does: on Blackwell with x86 hosts from 2.29.
func TestTreeDipRunsAsTheModelSays(t *testing.T) {
	fast := nccl.Machine{Bandwidth: [3]float64{2, 2, 2}}
	for _, tc := range []struct {
		fabric         string
		bytes          int
		algo           nccl.Algo
		p              ops.Protocol
		m              nccl.Machine
		factor, priced float64 // the dip's factor, and the estimate's
		v              nccl.Version
	}{
		{"dgx-a100x2", 1 << 20, nccl.Tree, ops.ProtoLL128, nccl.Machine{}, 0.6, 0.6, 0},
		{"dgx-a100x2", 1 << 20, nccl.Tree, ops.ProtoLL128, fast, 0.6, 0.6, 0},
		{"dgx-a100x2", 256 << 10, nccl.Tree, ops.ProtoLL, nccl.Machine{}, 0.4, 0.4, 0},
		{"dgx-a100x2", 64 << 20, nccl.Tree, ops.ProtoSimple, nccl.Machine{}, 0.8, 0.8, 0},
		{"dgx-b200x2", 64 << 20, nccl.NVLSTree, ops.ProtoSimple, nccl.Machine{}, 0.8, 0.8, 0},
		{"dgx-b200x2", 64 << 20, nccl.NVLSTree, ops.ProtoSimple, nccl.Machine{}, 0.8, 1, nccl.V2_27},
		{"dgx-b200x2,cpu=arm", 64 << 20, nccl.NVLSTree, ops.ProtoSimple, nccl.Machine{}, 1, 1, nccl.V2_27},
		{"dgx-b200x2,cpu=arm", 64 << 20, nccl.NVLSTree, ops.ProtoSimple, nccl.Machine{}, 1, 1, 0},
		{"dgx-h100x2", 64 << 20, nccl.NVLSTree, ops.ProtoSimple, nccl.Machine{}, 0.8, 1, 0},
		{"dgx-h100x2", 64 << 20, nccl.NVLSTree, ops.ProtoSimple, nccl.Machine{}, 0.8, 1, nccl.V2_27},
		{"dgx-h100x2", 2 << 30, nccl.NVLSTree, ops.ProtoSimple, nccl.Machine{}, 1, 1, 0},
		{"dgx-a100x2", 64 << 20, nccl.Ring, ops.ProtoSimple, nccl.Machine{}, 1, 1, 0},
	} {
		tu := try(nccl.NewTuner(try(topology.Resolve(tc.fabric))(t), nccl.Options{Algos: []nccl.Algo{tc.algo}, Protos: []ops.Protocol{tc.p}, Machine: tc.m, Version: tc.v}))(t)
		spec := ops.Spec{Op: ops.AllReduce, Ranks: tu.System.Ranks, Count: tc.bytes / 4, DType: hw.F32, Redop: hw.Sum}
		plan, c := planOf(t, tu, spec)
		// 1 GiB is past every correction: its launch is the launch alone.
		big := spec
		big.Count = 1 << 28
		whole, _ := planOf(t, tu, big)
		want := float64(tc.bytes) / (1e9 * c.AlgBW * orOne(tc.m.Bandwidth[0])) * (1/tc.factor - 1)
		if got := plan.Launch - whole.Launch; math.Abs(got-want) > 1e-9*max(want, 1e-6) {
			t.Errorf("%s %s at %d bytes (machine %+v, release %v): the correction adds %.4g s, want %.4g s (×%v on %.1f GB/s)", tc.fabric, nccl.Label(plan), tc.bytes, tc.m, tc.v, got, want, tc.factor, c.AlgBW)
		}
		if got := tu.TreeDip(spec, c); math.Abs(got-want) > 1e-9*max(want, 1e-6) {
			t.Errorf("%s %s: TreeDip %.4g s, want %.4g s", tc.fabric, nccl.Label(plan), got, want)
		}
		if want := c.LatencyUS + float64(tc.bytes)/(1000*c.AlgBW*tc.priced); math.Abs(c.TimeUS-want) > 1e-9*want {
			t.Errorf("%s %s at %d bytes, release %v: NCCL's estimate %.6g µs, want %.6g (×%v)", tc.fabric, c.Estimate, tc.bytes, tc.v, c.TimeUS, want, tc.priced)
		}
	}
}

func orOne(x float64) float64 {
	if x == 0 {
		return 1
	}
	return x
}

// TestBlackwellHopsTakeTheirExtraNotTheChoice: NCCL's model has Hopper's
// per-hop NVLink latency for every generation, and its tuner chooses by
// it; what runs on a Blackwell fabric takes 0.7 µs more per NVLink hop
// (topology.Arch.NVLinkExtraLatency), on rings and point-to-point alike.
func TestBlackwellHopsTakeTheirExtraNotTheChoice(t *testing.T) {
	hopper := try(nccl.NewTuner(try(topology.Resolve("switch:8,arch=hopper,bw=900GB/s"))(t), nccl.Options{}))(t)
	blackwell := try(nccl.NewTuner(try(topology.Resolve("switch:8,arch=blackwell,bw=900GB/s"))(t), nccl.Options{}))(t)
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.SendRecv} {
		spec := ops.Spec{Op: op, Ranks: 8, Count: 8, DType: hw.F32, Redop: hw.Sum}
		h, ch := planOf(t, hopper, spec)
		b, cb := planOf(t, blackwell, spec)
		if ch.LatencyUS != cb.LatencyUS || nccl.Label(h) != nccl.Label(b) {
			t.Errorf("%v: NCCL's model chose %s at %.2f us on Hopper, %s at %.2f us on Blackwell", op, nccl.Label(h), ch.LatencyUS, nccl.Label(b), cb.LatencyUS)
		}
		if d := b.Wire.Latency[ops.PathNVLink] - h.Wire.Latency[ops.PathNVLink]; math.Abs(d-0.7e-6) > 1e-12 {
			t.Errorf("%v (%s): a Blackwell NVLink hop takes %.3g s more than Hopper's, want 0.7 us", op, nccl.Label(b), d)
		}
		if b.Wire.Latency[ops.PathNet] != h.Wire.Latency[ops.PathNet] {
			t.Errorf("%v: the network's hop changed with the GPUs' arch", op)
		}
	}
	// CollNet within a node of GPUs crosses NVLink too; with one GPU per
	// node its all-gather's switch steps are the network's and take none.
	for _, tc := range []struct {
		fabric string
		algo   nccl.Algo
		op     ops.Op
		extra  float64
	}{
		{"cluster:2x8,arch=%s,sharp=inf", nccl.CollNetDirect, ops.AllReduce, 0.7e-6},
		{"cluster:2x8,arch=%s,sharp=inf", nccl.CollNetChain, ops.AllReduce, 0.7e-6},
		{"cluster:4x1,arch=%s,sharp=inf", nccl.CollNetDirect, ops.AllGather, 0},
	} {
		var lat [2]float64
		for i, arch := range []string{"hopper", "blackwell"} {
			tu := try(nccl.NewTuner(try(topology.Resolve(fmt.Sprintf(tc.fabric, arch)))(t), nccl.Options{Algos: []nccl.Algo{tc.algo}, Protos: []ops.Protocol{ops.ProtoSimple}}))(t)
			plan, _ := planOf(t, tu, ops.Spec{Op: tc.op, Ranks: tu.System.Ranks, Count: 1024, DType: hw.F32, Redop: hw.Sum})
			lat[i] = plan.Wire.Latency[ops.PathNVLink]
		}
		if d := lat[1] - lat[0]; math.Abs(d-tc.extra) > 1e-12 {
			t.Errorf("%s %v %v: a Blackwell NVLink hop takes %.3g s more than Hopper's, want %.3g", fmt.Sprintf(tc.fabric, "blackwell"), tc.algo, tc.op, d, tc.extra)
		}
	}
}

// TestThreadsSetTheChannelsOfSmallSizes: NCCL launches fewer channels
// while each thread would have fewer bytes than its threshold (64 with
// Simple, 8 with LL128): with NCCL_NTHREADS=256 a 512 KiB ring Simple
// all-reduce on 8 H100s keeps its 24 channels where 512 threads keep 16,
// and with NCCL_LL128_NTHREADS=320 a 64 KiB LL128 one 24 where 640 keep
// 12. PAT has no thread count and keeps the communicator's channels at
// any size; NCCL_PAT_ENABLE=0 turns it off.
func TestThreadsSetTheChannelsOfSmallSizes(t *testing.T) {
	s := describe(t, "dgx-h100")
	for _, tc := range []struct {
		proto int
		bytes int64
		o     nccl.Options
		want  int
	}{
		{2, 512 << 10, nccl.Options{}, 16},
		{2, 512 << 10, nccl.Options{Threads: 256}, 24},
		{1, 64 << 10, nccl.Options{}, 12},
		{1, 64 << 10, nccl.Options{LL128Threads: 320}, 24},
		{1, 64 << 10, nccl.Options{Threads: 256}, 12},
	} {
		proto := []ops.Protocol{ops.ProtoLL, ops.ProtoLL128, ops.ProtoSimple}[tc.proto]
		tc.o.Algos, tc.o.Protos = []nccl.Algo{nccl.Ring}, []ops.Protocol{proto}
		c, err := nccl.Tune(s, ops.AllReduce, tc.bytes, tc.o)
		if err != nil || c.Channels != tc.want {
			t.Errorf("ring/%v, %d B, threads %d/%d: %v, %v; want %d channels", proto, tc.bytes, tc.o.Threads, tc.o.LL128Threads, c.Estimate, err, tc.want)
		}
	}
	pat := describe(t, "cluster:8x1,arch=hopper")
	ring := estimateOf(t, pat, ops.AllGather, 1<<30, nccl.Ring, nccl.Options{})
	if e := estimateOf(t, pat, ops.AllGather, 64, nccl.PAT, nccl.Options{}); e.Channels != ring.Channels || e.Channels < 2 {
		t.Errorf("PAT all-gather of 64 B: %d channels, want the communicator's %d", e.Channels, ring.Channels)
	}
	for _, e := range nccl.Estimates(pat, ops.AllGather, 64, nccl.Options{NoPAT: true}) {
		if e.Algo == nccl.PAT && !strings.Contains(e.Off, "NCCL_PAT_ENABLE=0") {
			t.Errorf("NCCL_PAT_ENABLE=0: %v is %q, want off", e, e.Off)
		}
	}
}

// TestEligibilityFollowsTheRelease: what NCCL may run, by release
// (tuning.cc's algorithm loop, enqueue.cc's cost table, init.cc and
// nvls.cc): all-gather and reduce-scatter on rings only in 2.18, NVLS
// from 2.19, CollNet direct from 2.20, PAT from 2.23; NVLS all-gather
// on one node of up to 32 GPUs in 2.25 and 2.26 and on nodes of up to
// 32 GPUs from 2.27 (not a GB200 NVL72's 72); NVLS on more than 2 GPUs
// a node, 2 from 2.28; CollNet on nodes of up to 8 GPUs to 2.22, then
// direct only to 2.27, then neither.
func TestEligibilityFollowsTheRelease(t *testing.T) {
	for _, tc := range []struct {
		topo string
		op   ops.Op
		algo nccl.Algo
		v    nccl.Version
		off  string // "" where NCCL may run it
	}{
		{"cluster:8x1,arch=hopper", ops.AllGather, nccl.PAT, 222, "PAT came in NCCL 2.23"},
		{"cluster:8x1,arch=hopper", ops.AllGather, nccl.PAT, 223, ""},
		{"hgx-b200", ops.ReduceScatter, nccl.NVLS, 218, "rings only"},
		{"hgx-b200", ops.ReduceScatter, nccl.NVLS, 219, ""},
		{"dgx-h100x2,sharp=inf", ops.AllGather, nccl.CollNetDirect, 219, "CollNet from 2.20"},
		{"dgx-h100x2,sharp=inf", ops.AllGather, nccl.CollNetDirect, 220, ""},
		{"dgx-h100x2,sharp=inf", ops.AllGather, nccl.NVLS, 226, "one node of up to 32 GPUs"},
		{"dgx-h100x2,sharp=inf", ops.AllGather, nccl.NVLS, 227, ""},
		{"gb200-nvl72", ops.AllGather, nccl.NVLS, 224, ""},
		{"gb200-nvl72", ops.AllGather, nccl.NVLS, 230, "nodes of up to 32 GPUs"},
		{"gb200-nvl72", ops.AllReduce, nccl.NVLS, 230, ""},
		{"cluster:1x2,arch=hopper,nvls=inf", ops.AllReduce, nccl.NVLS, 227, "more GPUs on the NVSwitch"},
		{"cluster:1x2,arch=hopper,nvls=inf", ops.AllReduce, nccl.NVLS, 228, ""},
		{"cluster:2x16,arch=hopper,sharp=inf", ops.AllReduce, nccl.CollNetChain, 222, "up to 2.22 runs CollNet on nodes of up to 8"},
		{"cluster:2x16,arch=hopper,sharp=inf", ops.AllReduce, nccl.CollNetChain, 227, ""},
		{"cluster:2x16,arch=hopper,sharp=inf", ops.AllReduce, nccl.CollNetDirect, 227, "nodes of up to 8 GPUs"},
		{"cluster:2x16,arch=hopper,sharp=inf", ops.AllReduce, nccl.CollNetChain, 228, "nodes of up to 8 GPUs"},
		{"cluster:2x8,arch=hopper,sharp=inf", ops.AllReduce, nccl.CollNetChain, 230, ""},
	} {
		s := describe(t, tc.topo)
		found := false
		for _, e := range nccl.Estimates(s, tc.op, 1<<20, nccl.Options{Version: tc.v}) {
			if e.Algo != tc.algo || e.Protocol != ops.ProtoSimple {
				continue
			}
			found = true
			if tc.off == "" && e.Off != "" || tc.off != "" && !strings.Contains(e.Off, tc.off) {
				t.Errorf("%s, %s, %v in %v: off %q, want %q", tc.topo, tc.op, tc.algo, tc.v, e.Off, tc.off)
			}
		}
		if !found {
			t.Errorf("%s, %s: no estimate for %v/Simple", tc.topo, tc.op, tc.algo)
		}
	}
}

// TestDescribeReadsTheSlowestNodesNICs: NCCL's ranks each search their
// own node and agree on the least bandwidth; on a fabric whose second
// node has slower NICs than the first, Describe reads the second's 25
// GB/s, not node 0's 50 or the fastest anywhere.
func TestDescribeReadsTheSlowestNodesNICs(t *testing.T) {
	topo, err := topology.ReadYAML([]byte(`name: mixed-nics
nodes:
  - {name: gpu0, kind: gpu, arch: hopper}
  - {name: gpu1, kind: gpu, arch: hopper}
  - {name: nic0, kind: nic}
  - {name: nic1, kind: nic}
  - {name: netsw, kind: switch}
links:
  - {a: gpu0, b: nic0, bw: 64GB/s, lat: 0}
  - {a: gpu1, b: nic1, bw: 64GB/s, lat: 0}
  - {a: nic0, b: netsw, bw: 50GB/s, lat: 2us}
  - {a: nic1, b: netsw, bw: 25GB/s, lat: 2us}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s := describeTopology(t, topo); s.Nodes != 2 || s.NICs != 1 || s.NICBW != 25 {
		t.Errorf("%s: want 2 nodes of one NIC of 25 GB/s", s)
	}
}
