package nccl_test

import (
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// nicsOnCPU is two nodes of two NVLinked GPUs and two NICs, each NIC
// hanging off the end twoNodes names: the host's CPU, as on a server
// without PCIe switches, or a GPU's PCIe.
const nicsOnCPU = `
name: nics-on-cpu
nodes:
  - {name: gpu0, kind: gpu, arch: hopper}
  - {name: gpu1, kind: gpu, arch: hopper}
  - {name: gpu2, kind: gpu, arch: hopper}
  - {name: gpu3, kind: gpu, arch: hopper}
  - {name: nvs0, kind: switch}
  - {name: nvs1, kind: switch}
  - {name: cpu0, kind: cpu}
  - {name: cpu1, kind: cpu}
  - {name: nic0, kind: nic}
  - {name: nic1, kind: nic}
  - {name: nic2, kind: nic}
  - {name: nic3, kind: nic}
  - {name: ib, kind: switch}
links:
  - {a: gpu0, b: nvs0, bw: 450GB/s, lat: 0.5us}
  - {a: gpu1, b: nvs0, bw: 450GB/s, lat: 0.5us}
  - {a: gpu2, b: nvs1, bw: 450GB/s, lat: 0.5us}
  - {a: gpu3, b: nvs1, bw: 450GB/s, lat: 0.5us}
  - {a: cpu0, b: gpu0, bw: 64GB/s, lat: 1us}
  - {a: cpu1, b: gpu2, bw: 64GB/s, lat: 1us}
  - {a: NIC0END, b: nic0, bw: 64GB/s, lat: 1us}
  - {a: NIC1END, b: nic1, bw: 64GB/s, lat: 1us}
  - {a: NIC2END, b: nic2, bw: 64GB/s, lat: 1us}
  - {a: NIC3END, b: nic3, bw: 64GB/s, lat: 1us}
  - {a: nic0, b: ib, bw: 50GB/s, lat: 1us}
  - {a: nic1, b: ib, bw: 50GB/s, lat: 1us}
  - {a: nic2, b: ib, bw: 50GB/s, lat: 1us}
  - {a: nic3, b: ib, bw: 50GB/s, lat: 1us}
`

func twoNodes(t *testing.T, nicEnds ...string) nccl.System {
	t.Helper()
	yaml := strings.NewReplacer("NIC0END", nicEnds[0], "NIC1END", nicEnds[1], "NIC2END", nicEnds[2], "NIC3END", nicEnds[3]).Replace(nicsOnCPU)
	topo, err := topology.ReadYAML([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return describeTopology(t, topo)
}

// TestLL128IsOffWhereNCCLLeavesItOff: NCCL turns LL128 on by default only
// between GPUs joined by NVLink, where a GPU reaches its NIC through a
// PCIe switch, and (before 2.25) on Volta, Ampere and Hopper; NCCL_PROTO
// naming it turns it on anywhere, and an entry for another collective
// leaves this one's default.
func TestLL128IsOffWhereNCCLLeavesItOff(t *testing.T) {
	pcie := nccl.System{Ranks: 8, Nodes: 1, PerNode: 8, Arch: topology.Hopper, CPU: topology.IntelCPU, IntraBW: 12}
	onCPU := twoNodes(t, "cpu0", "cpu1", "cpu0", "cpu1")
	onGPU := twoNodes(t, "gpu0", "gpu2", "gpu1", "gpu3")
	if !onCPU.NICsOnCPU || onCPU.NICs != 2 || onGPU.NICsOnCPU || onGPU.NICs != 2 {
		t.Fatalf("Describe: NICs on the CPU %v (%d a node), on a GPU %v (%d): want true, false, two a node each", onCPU.NICsOnCPU, onCPU.NICs, onGPU.NICsOnCPU, onGPU.NICs)
	}
	b200 := describe(t, "hgx-b200")
	forced := nccl.Options{Protos: []ops.Protocol{ops.ProtoLL128, ops.ProtoSimple}}
	otherOp := nccl.Options{OpProtos: map[ops.Op][]ops.Protocol{ops.AllGather: {ops.ProtoLL128}}}
	for _, tc := range []struct {
		name string
		sys  nccl.System
		o    nccl.Options
		off  string // what the reason names; "" when LL128 is on
	}{
		{"PCIe", pcie, nccl.Options{}, "NVLink"},
		{"PCIe, an entry for all-gather", pcie, otherOp, "NVLink"},
		{"PCIe, NCCL_PROTO names it", pcie, forced, ""},
		{"NVLink", describe(t, "dgx-h100"), nccl.Options{}, ""},
		{"NICs on the CPU", onCPU, nccl.Options{}, "PCIe switch"},
		{"NICs on the CPU, NCCL_PROTO names it", onCPU, forced, ""},
		{"NICs on a GPU", onGPU, nccl.Options{}, ""},
		{"Blackwell, 2.23", b200, nccl.Options{Version: 223}, "Volta, Ampere and Hopper"},
		{"Blackwell, 2.23, NCCL_PROTO names it", b200, nccl.Options{Version: 223, Protos: forced.Protos}, ""},
		{"Blackwell, 2.25", b200, nccl.Options{Version: 225}, ""},
		{"Hopper, 2.18", describe(t, "dgx-h100"), nccl.Options{Version: 218}, ""},
		{"Ampere, 2.18", describe(t, "dgx-a100"), nccl.Options{Version: 218}, ""},
	} {
		for _, a := range []nccl.Algo{nccl.Ring, nccl.Tree} {
			e := estimate(t, tc.sys, ops.AllReduce, 1<<20, a, ops.ProtoLL128, tc.o)
			switch {
			case tc.off == "" && e.Off != "":
				t.Errorf("%s: %v/LL128 is off (%s), want on", tc.name, a, e.Off)
			case tc.off != "" && !strings.Contains(e.Off, tc.off):
				t.Errorf("%s: %v/LL128 off for %q, want a reason naming %q", tc.name, a, e.Off, tc.off)
			}
		}
		if tc.off == "" {
			continue
		}
		// Where it is off the tuner never picks it.
		for bytes := int64(8); bytes <= 1<<30; bytes *= 4 {
			c, err := nccl.Tune(tc.sys, ops.AllReduce, bytes, tc.o)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if c.Protocol == ops.ProtoLL128 {
				t.Errorf("%s: the tuner picks %v at %d bytes", tc.name, c, bytes)
			}
		}
	}
}

// checkCollNetDirect: CollNet direct's all-reduce, priced from its own
// search from 2.22 (a channel for each GPU with a NIC of its own, up to
// 8, at the inter-node ladder's speed its NIC carries; the second pass
// raises the speed within the node to up to twice that where every
// channel keeps a head of its own; fast channels doubled as the ring's),
// and before from chain's graph, which is the tree's: the graph's
// channels × its speed within the node, divided by the GPUs over the
// channels less half that ratio's excess over 1, and × 0.85 from Hopper
// on (tuning.cc).
func checkCollNetDirect(t *testing.T) {
	t.Helper()
	withNICs := func(spec string, nics int) nccl.System {
		s := describe(t, spec)
		s.NICs = nics
		return s
	}
	h100, a100 := describe(t, "dgx-h100x2,sharp=inf"), describe(t, "dgx-a100x2,sharp=inf")
	for _, tc := range []struct {
		name string
		s    nccl.System
		v    nccl.Version
		want float64
	}{
		// 8 heads of 48 (NDR's 50 GB/s on Hopper's ladder), which a GPU's
		// 370.8 GB/s of NVLink carry twice; 48 tops the ladder.
		{"DGX H100s", h100, 230, 8 * 48 * 0.85},
		// 8 heads of 24 (HDR's 25), raised within the node to 48.
		{"DGX A100s", a100, 230, 8 * 48},
		// 4 heads of 48 doubled to 8 channels of 24 (Hopper doubles up
		// to 4 channels under 50 GB/s); 8 GPUs over 8 channels.
		{"DGX H100s with 4 NICs a node", withNICs("dgx-h100x2,sharp=inf", 4), 230, 8 * 24 * 0.85},
		// 4 heads of 24, not doubled (under 25 GB/s), raised to 48; 8
		// GPUs over 4 channels: 2 − ½ = 1.5.
		{"DGX A100s with 4 NICs a node", withNICs("dgx-a100x2,sharp=inf", 4), 230, 4 * 48 / 1.5},
		// One GPU a node: the tree's search on one channel of 48.
		{"one GPU a node", describe(t, "cluster:4x1,arch=hopper,sharp=inf"), 230, 48 * 0.85},
		// 2.21: chain's graph, the tree's 8 channels of 45 (8 × 48
		// overfills the NVLinks).
		{"DGX H100s, 2.21", h100, 221, 8 * 45 * 0.85},
	} {
		e := estimate(t, tc.s, ops.AllReduce, 1<<30, nccl.CollNetDirect, ops.ProtoSimple, nccl.Options{Version: tc.v})
		if e.Off != "" || math.Abs(e.BusBW-tc.want) > 1e-9 {
			t.Errorf("%s: CollNet direct's bus bandwidth %.2f GB/s (%s), want %.2f", tc.name, e.BusBW, e.Off, tc.want)
		}
	}
	for _, v := range []nccl.Version{221, 230} {
		if e := estimate(t, h100, ops.AllReduce, 1<<30, nccl.CollNetChain, ops.ProtoSimple, nccl.Options{Version: v}); math.Abs(e.BusBW-8*45) > 1e-9 {
			t.Errorf("DGX H100s, %v: CollNet chain's bus bandwidth %.2f GB/s, want the tree's 8 channels of 45", v, e.BusBW)
		}
	}
	onHost := h100
	onHost.NICsOnCPU = true
	if e := estimate(t, onHost, ops.AllReduce, 1<<30, nccl.CollNetDirect, ops.ProtoSimple, nccl.Options{}); !strings.Contains(e.Off, "no head") {
		t.Errorf("NICs on the host: CollNet direct is %q, want off for want of a head", e.Off)
	}
}

// TestBandwidthRefinementsAreTuningCCs: the refinements NCCL's model
// makes to a bus bandwidth, and its conversion to an algorithm
// bandwidth, by release (tuning.cc): a plain tree (one GPU a node) at
// 0.85 from 2.19; PAT at 0.85 in 2.23 and 0.75 from 2.24; CollNet
// direct's all-reduce (checkCollNetDirect), and direct only where GPUs
// meet on an NVSwitch;
// and no conversion for all-gather and reduce-scatter but on rings from
// 2.23, so NVLS's algorithm bandwidth is its bus bandwidth.
func TestBandwidthRefinementsAreTuningCCs(t *testing.T) {
	oneGPU, eightGPUs := describe(t, "cluster:8x1,arch=hopper"), describe(t, "cluster:2x8,arch=hopper")
	at := func(v nccl.Version) nccl.Options { return nccl.Options{Version: v} }
	ratio := func(s nccl.System, op ops.Op, a nccl.Algo, o1, o2 nccl.Options) float64 {
		return estimate(t, s, op, 1<<30, a, ops.ProtoSimple, o1).BusBW / estimate(t, s, op, 1<<30, a, ops.ProtoSimple, o2).BusBW
	}
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"a tree of one GPU a node, 2.19 against 2.18", ratio(oneGPU, ops.AllReduce, nccl.Tree, at(219), at(218)), 0.85},
		{"a tree of 8 GPUs a node, 2.19 against 2.18", ratio(eightGPUs, ops.AllReduce, nccl.Tree, at(219), at(218)), 1},
		{"PAT, 2.23 against 2.24", ratio(oneGPU, ops.AllGather, nccl.PAT, at(223), at(224)), 0.85 / 0.75},
	} {
		if math.Abs(tc.got-tc.want) > 1e-9 {
			t.Errorf("%s: bus bandwidth ×%.4f, want ×%.4f", tc.name, tc.got, tc.want)
		}
	}
	checkCollNetDirect(t)
	noNVSwitch := describe(t, "cluster:2x8,sharp=inf,arch=hopper")
	noNVSwitch.NVSwitch = false
	if e := estimate(t, noNVSwitch, ops.AllReduce, 1<<30, nccl.CollNetDirect, ops.ProtoSimple, nccl.Options{}); !strings.Contains(e.Off, "NVSwitch") {
		t.Errorf("no NVSwitch: CollNet direct is %q, want off for want of one", e.Off)
	}
	b200 := describe(t, "hgx-b200")
	for _, v := range []nccl.Version{223, 230} {
		for _, op := range []ops.Op{ops.AllGather, ops.ReduceScatter} {
			if e := estimate(t, b200, op, 1<<30, nccl.NVLS, ops.ProtoSimple, at(v)); e.Off != "" || e.AlgBW != e.BusBW {
				t.Errorf("NVLS %v, %v: algorithm bandwidth %.1f GB/s, bus %.1f (%s): want equal", op, v, e.AlgBW, e.BusBW, e.Off)
			}
		}
	}
	if e := estimate(t, b200, ops.AllReduce, 1<<30, nccl.NVLS, ops.ProtoSimple, at(230)); math.Abs(e.AlgBW/e.BusBW-8.0/14) > 1e-9 {
		t.Errorf("NVLS all-reduce: algorithm bandwidth %.1f GB/s of bus %.1f, want 8/14 of it", e.AlgBW, e.BusBW)
	}
}

// TestPATTakesTheTreesGraph: NCCL hands its tuner the tree's graph as
// PAT's (init.cc), so on nodes of one GPU, where a tree's graph and a
// ring's are the same past two nodes, PAT's all-gather has the ring's
// bus bandwidth at PAT's 0.75 (2.24 on). commsim's own search for PAT
// found 2 channels of 40 GB/s on these 800 Gb/s NICs, where the tree's
// has 4 of 24.
func TestPATTakesTheTreesGraph(t *testing.T) {
	s := describe(t, "cluster:16x1,arch=blackwell,nicbw=800Gb/s")
	pat := estimate(t, s, ops.AllGather, 1<<30, nccl.PAT, ops.ProtoSimple, nccl.Options{})
	ring := estimate(t, s, ops.AllGather, 1<<30, nccl.Ring, ops.ProtoSimple, nccl.Options{})
	if pat.Off != "" || ring.Off != "" || math.Abs(pat.BusBW/ring.BusBW-0.75) > 1e-9 {
		t.Errorf("PAT %.1f GB/s (%s), ring %.1f (%s): want PAT at 0.75 of the ring", pat.BusBW, pat.Off, ring.BusBW, ring.Off)
	}
}

// TestNVLSIsPricedByNCCLsSearch: NCCL's model prices NVLS and NVLSTree by
// its NVLS search's graph (a channel a head GPU, each head's NVLinks
// carrying channels + 1 speeds; across nodes a head a NIC), not by the
// channels NVLS launches. On 8 H100s that is 8 channels of 40 GB/s and
// bus bandwidth 476 GB/s (algorithm 272), what NCCL's maintainer gives
// for NVLS on 8 H100s (busBw ~480, algBw ~275: nccl-tests issue 212);
// before 2.28 the lesser of bwIntra and bwInter, with 5/6 for the
// algorithm bandwidth and NVLSTree past two nodes at half bwInter.
func TestNVLSIsPricedByNCCLsSearch(t *testing.T) {
	for _, tc := range []struct {
		topo     string
		algo     nccl.Algo
		v        nccl.Version
		bus, alg float64
	}{
		{"dgx-h100", nccl.NVLS, 230, 8 * 40 * 0.85 * 7 / 8 * 2, 476.0 * 8 / 14},
		{"hgx-b200", nccl.NVLS, 230, 8 * 90, 720.0 * 8 / 14}, // bwInter 90 under 80 × 0.74 × 7/8 × 2
		{"gb200-nvl72", nccl.NVLS, 230, 32 * 20 * 0.74 * 31 / 32 * 2, 917.6 * 72 / 142},
		{"dgx-h100x2", nccl.NVLSTree, 230, 8 * 57.7, 461.6 * 16 / 30}, // NVLSTree's cap on 2 nodes
		{"dgx-b200x2", nccl.NVLSTree, 230, 8 * 48 * 0.74 * 7 / 8 * 2, 497.28 * 16 / 30},
		{"dgx-h100x8", nccl.NVLSTree, 230, 8 * 45.5, 364.0 * 64 / 126},
		{"dgx-h100", nccl.NVLS, 226, 8 * 40, 320.0 * 5 / 6},
		{"dgx-h100x2", nccl.NVLSTree, 226, 8 * 40, 320.0 * 5 / 6},
		{"dgx-h100x4", nccl.NVLSTree, 226, 8 * 24, 192.0 * 5 / 6},
	} {
		e := estimate(t, describe(t, tc.topo), ops.AllReduce, 1<<30, tc.algo, ops.ProtoSimple, nccl.Options{Version: tc.v})
		if e.Off != "" || math.Abs(e.BusBW-tc.bus) > 0.05 || math.Abs(e.AlgBW-tc.alg) > 0.05 {
			t.Errorf("%s %v %v: bus %.2f, algorithm %.2f GB/s (%s); want %.2f, %.2f", tc.topo, tc.algo, tc.v, e.BusBW, e.AlgBW, e.Off, tc.bus, tc.alg)
		}
	}
}

// TestCapsFollowTheRelease: NCCL's per-channel caps by release, as a ring
// LL128 on two nodes of 8 B200s meets them (8 search channels of 48
// GB/s, 353 GB/s at LL128's 0.92 before its cap): Hopper's 36.7 a
// channel before 2.25, twice it in 2.25 to 2.27, 34.6 on two nodes in
// 2.28 and 2.29, 40 in 2.30.
func TestCapsFollowTheRelease(t *testing.T) {
	s := describe(t, "dgx-b200x2")
	for _, tc := range []struct {
		v   nccl.Version
		bus float64
	}{{224, 8 * 36.7}, {225, 8 * 48 * 0.92}, {227, 8 * 48 * 0.92}, {228, 8 * 34.6}, {229, 8 * 34.6}, {230, 8 * 40}} {
		// NCCL_PROTO names LL128, which 2.24 leaves off on Blackwell.
		o := nccl.Options{Version: tc.v, Protos: []ops.Protocol{ops.ProtoLL128}}
		e := estimate(t, s, ops.AllGather, 1<<30, nccl.Ring, ops.ProtoLL128, o)
		if e.Off != "" || math.Abs(e.BusBW-tc.bus) > 1e-6 {
			t.Errorf("%v: ring/LL128 bus bandwidth %.2f GB/s (%s), want %.2f", tc.v, e.BusBW, e.Off, tc.bus)
		}
	}
}

// TestOlderReleasesPriceRingsAsTheirSource: up to 2.22 NCCL counts a
// ring all-reduce 2·nNodes network steps (2(nNodes-1) from 2.23), and
// only from 2.23 does one GPU a node take the tree's network latency.
func TestOlderReleasesPriceRingsAsTheirSource(t *testing.T) {
	lat := func(topo string, v nccl.Version) float64 {
		return estimate(t, describe(t, topo), ops.AllReduce, 1<<10, nccl.Ring, ops.ProtoLL, nccl.Options{Version: v}).LatencyUS
	}
	// Two nodes of 8 H100s on Intel hosts: 2 more network steps of 2.7 µs
	// in place of 2 steps within a node, each at least the hosts' 1 µs.
	if got, want := lat("dgx-h100x2", 222)-lat("dgx-h100x2", 223), 2*(2.7-1.0); math.Abs(got-want) > 1e-9 {
		t.Errorf("two nodes: 2.22's ring all-reduce latency exceeds 2.23's by %.3f µs, want %.3f", got, want)
	}
	// Eight nodes of one GPU: 2.23 on takes the tree's LL hop (5 µs) for
	// each of 14 crossings; 2.22 the ring's (2.7) for 16, and 2 steps
	// fewer within a node.
	const intra = 1.0 // the hosts' network overhead, above NVLink's LL hop (0.6)
	if got, want := lat("cluster:8x1,arch=hopper", 223), 6.6+14*5.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("eight nodes of one GPU, 2.23: %.3f µs, want %.3f", got, want)
	}
	if got, want := lat("cluster:8x1,arch=hopper", 222), 6.6+16*2.7-2*intra; math.Abs(got-want) > 1e-9 {
		t.Errorf("eight nodes of one GPU, 2.22: %.3f µs, want %.3f", got, want)
	}
}

// TestOlderReleasesHopLatencies: tuning.cc's hop and base latencies by
// tag: a tree's Simple hop is 28 µs on every path in 2.19 to 2.22 (4, 6
// and 14 in 2.18.3, 4, 4 and 14 from 2.23, whose base is 8.4 where the
// older ones' is 0); NVLS costs 23 µs up to 2.20 (2.18 in its base, 2.19
// and 2.20 in its NVLink hop) and 25 after; NVLSTree's network hop is 19
// µs in 2.18, where its latency grows with the nodes, 14 to 2.27.
func TestOlderReleasesHopLatencies(t *testing.T) {
	for _, tc := range []struct {
		topo string
		algo nccl.Algo
		v    nccl.Version
		us   float64
	}{
		{"dgx-h100", nccl.Tree, 218, 2 * 7 * 4},
		{"dgx-h100", nccl.Tree, 220, 2 * 7 * 28},
		{"dgx-h100", nccl.Tree, 223, 8.4 + 2*7*4},
		{"dgx-h100", nccl.NVLS, 218, 23},
		{"dgx-h100", nccl.NVLS, 220, 23},
		{"dgx-h100", nccl.NVLS, 221, 25},
		{"dgx-h100x4", nccl.NVLSTree, 218, 23 + 2*3*19},
		{"dgx-h100x4", nccl.NVLSTree, 220, 23 + 2*2*14},
		{"dgx-h100x4", nccl.NVLSTree, 230, 25 + 2*2*20.9},
	} {
		e := estimate(t, describe(t, tc.topo), ops.AllReduce, 1<<20, tc.algo, ops.ProtoSimple, nccl.Options{Version: tc.v})
		if e.Off != "" || math.Abs(e.LatencyUS-tc.us) > 1e-9 {
			t.Errorf("%s %v %v: latency %.2f µs (%s), want %.2f", tc.topo, tc.algo, tc.v, e.LatencyUS, e.Off, tc.us)
		}
	}
}

// pcieGPUs is GPUs without NVLink, each its own node, behind NICs on
// the network: gpu0 on nic0, gpu1 on NIC1 (nic0 too, or its own),
// gpu2 on nic2; the NICs go to a reducing switch (SWITCH), or nic0 and
// nic1 are cabled to nic2.
const pcieGPUs = `
name: pcie-gpus
nodes:
  - {name: gpu0, kind: gpu, arch: hopper}
  - {name: gpu1, kind: gpu, arch: hopper}
  - {name: gpu2, kind: gpu, arch: hopper}
  - {name: nic0, kind: nic}
  - {name: nic1, kind: nic}
  - {name: nic2, kind: nic}
SWITCH
links:
  - {a: gpu0, b: nic0, bw: 64GB/s, lat: 0}
  - {a: gpu1, b: NIC1, bw: 64GB/s, lat: 0}
  - {a: gpu2, b: nic2, bw: 64GB/s, lat: 0}
`

// TestDescribeReadsEveryNetworkLink: a NIC's network link is the one to
// a switch or to another NIC cabled to it (which read as NICs of 0 GB/s
// and priced a 128 MiB all-reduce 700 times too slow); a fabric whose
// NICs have none is refused. CollNet runs only where SHARP can reduce
// for its groups (the tuner chose it, and the simulation refused it): not
// through a NIC two nodes share (SHARP reduces one contribution a NIC),
// nor for a NIC off the reducing switch.
func TestDescribeReadsEveryNetworkLink(t *testing.T) {
	read := func(nic1, net string) (nccl.System, error) {
		sw := ""
		if strings.Contains(net, "sw,") {
			sw = "  - {name: sw, kind: switch, reduce: inf}"
		}
		if strings.Contains(net, "sw2,") {
			sw += "\n  - {name: sw2, kind: switch}"
		}
		topo, err := topology.ReadYAML([]byte(strings.NewReplacer("NIC1", nic1, "SWITCH", sw).Replace(pcieGPUs) + net))
		if err != nil {
			t.Fatal(err)
		}
		return nccl.Describe(topo)
	}
	switched := "  - {a: nic0, b: sw, bw: 50GB/s, lat: 1us}\n  - {a: nic1, b: sw, bw: 50GB/s, lat: 1us}\n  - {a: nic2, b: sw, bw: 50GB/s, lat: 1us}\n"
	cabled := "  - {a: nic0, b: nic2, bw: 40GB/s, lat: 1us}\n  - {a: nic1, b: nic2, bw: 40GB/s, lat: 1us}\n"
	for _, tc := range []struct {
		name, nic1, net   string
		nicGBps           float64
		sharpOff, collNet bool
	}{
		{"a NIC each, switched", "nic1", switched, 50, false, true},
		{"a NIC each, cabled", "nic1", cabled, 40, false, false},
		{"one NIC for two nodes", "nic0", switched, 50, true, false},
		// SHARP reduces for the NICs on its switch: not nic2, behind sw2.
		{"a NIC off the reducing switch", "nic1", "  - {a: nic0, b: sw, bw: 50GB/s, lat: 1us}\n  - {a: nic1, b: sw, bw: 50GB/s, lat: 1us}\n" +
			"  - {a: nic2, b: sw2, bw: 50GB/s, lat: 1us}\n  - {a: sw, b: sw2, bw: 400GB/s, lat: 1us}\n", 50, true, false},
	} {
		s, err := read(tc.nic1, tc.net)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.NICBW != tc.nicGBps || (s.SHARPOff != "") != tc.sharpOff || s.Nodes != 3 {
			t.Errorf("%s: %s (SHARP off: %q), want NICs of %v GB/s, SHARP off %v", tc.name, s, s.SHARPOff, tc.nicGBps, tc.sharpOff)
		}
		c, err := nccl.Tune(s, ops.AllReduce, 1<<20, nccl.Options{Algos: []nccl.Algo{nccl.CollNetChain}})
		if (err == nil) != tc.collNet {
			t.Errorf("%s: CollNet forced: %v, %v; want it to run: %v", tc.name, c, err, tc.collNet)
		}
	}
	// Two GPUs on one NIC and nothing else: two nodes with no network.
	topo, err := topology.ReadYAML([]byte("name: one-nic\nnodes:\n  - {name: gpu0, kind: gpu}\n  - {name: gpu1, kind: gpu}\n  - {name: nic0, kind: nic}\n" +
		"links:\n  - {a: gpu0, b: nic0, bw: 64GB/s, lat: 0}\n  - {a: gpu1, b: nic0, bw: 64GB/s, lat: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := nccl.Describe(topo); err == nil || !strings.Contains(err.Error(), "no network link") {
		t.Errorf("NICs on nothing: %s, %v; want them refused", s, err)
	}
}
