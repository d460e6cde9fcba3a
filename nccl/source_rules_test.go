package nccl_test

// Rules of NCCL's source that no other test reached: each was found by
// planting a bug in package nccl that the other tests let through, and
// each test fails on that bug. The NCCL file and line each follows is
// named beside it.

import (
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// TestNVLSTreeCorrectionFrom229: NCCL's model slows NVLSTree by its tree
// correction from 2.29 (v2.29.2 tuning.cc:595); 2.28.9's has none.
func TestNVLSTreeCorrectionFrom229(t *testing.T) {
	s := describe(t, "dgx-b200x2")
	for _, tc := range []struct {
		v      nccl.Version
		factor float64
	}{{nccl.V2_28, 1}, {229, 0.8}} {
		e := estimate(t, s, ops.AllReduce, 64<<20, nccl.NVLSTree, ops.ProtoSimple, nccl.Options{Version: tc.v})
		if want := e.LatencyUS + float64(64<<20)/(1000*e.AlgBW*tc.factor); math.Abs(e.TimeUS-want) > 1e-9*want {
			t.Errorf("%v: %v, want %v", tc.v, e.TimeUS, want)
		}
	}
}

// TestPATOffWithTwoGPUsANode: PAT needs one GPU a node (tuning.cc,
// ncclPatEnable: nNodes != nRanks turns it off).
func TestPATOffWithTwoGPUsANode(t *testing.T) {
	s := describe(t, "cluster:4x2,arch=hopper")
	if s.PerNode != 2 {
		t.Fatalf("per node %d", s.PerNode)
	}
	e := estimate(t, s, ops.AllGather, 1<<20, nccl.PAT, ops.ProtoSimple, nccl.Options{})
	if !strings.Contains(e.Off, "one GPU per node") {
		t.Errorf("PAT on 2 GPUs a node: %q", e.Off)
	}
}

// TestTreeLL128ChannelCapOnThreeHopperNodes: a tree/LL128 channel on
// Hopper moves at most 29.0 GB/s past two nodes (v2.30.7 tuning.cc,
// perChMaxTreeLL128Bws {36.7, 36.7, 29.0}).
func TestTreeLL128ChannelCapOnThreeHopperNodes(t *testing.T) {
	s := describe(t, "dgx-h100x4")
	var ch int
	for _, g := range nccl.Graphs(s, nccl.V2_30) {
		if g.Algo == nccl.Tree {
			ch = g.Channels
		}
	}
	e := estimate(t, s, ops.AllReduce, 1<<30, nccl.Tree, ops.ProtoLL128, nccl.Options{})
	if want := float64(ch) * 29.0; math.Abs(e.BusBW-want) > 1e-9 {
		t.Errorf("tree/LL128 bus %v, want %d x 29.0 = %v", e.BusBW, ch, want)
	}
}

// TestRingPlateauFrom64BytesAChannelAndRank: the ring's latency plateau
// (×1.4) starts where a channel's share per rank reaches 64 bytes
// (tuning.cc, ncclTopoGetAlgoTime: >= 64).
func TestRingPlateauFrom64BytesAChannelAndRank(t *testing.T) {
	s := describe(t, "dgx-h100x2")
	coll := nccl.Channels(s, nccl.Options{}).Coll
	b := int64(64 * coll * s.Ranks)
	o := nccl.Options{Algos: []nccl.Algo{nccl.Ring}, Protos: []ops.Protocol{ops.ProtoSimple}}
	at := estimate(t, s, ops.AllReduce, b, nccl.Ring, ops.ProtoSimple, o).LatencyUS
	below := estimate(t, s, ops.AllReduce, b-1, nccl.Ring, ops.ProtoSimple, o).LatencyUS
	if math.Abs(at/below-1.4) > 1e-9 {
		t.Errorf("at %d B: %v, below %v: ratio %v, want 1.4", b, at, below, at/below)
	}
}

// TestLLThreadThresholdSetsRingChannels: LL's thread threshold is 8 bytes
// a thread (comm.h NCCL_LL_THREAD_THRESHOLD), times the ranks for rings
// (tuning.cc:593), so 256 KiB on 8 ranks runs on 8 channels.
func TestLLThreadThresholdSetsRingChannels(t *testing.T) {
	s := describe(t, "dgx-h100")
	o := nccl.Options{Algos: []nccl.Algo{nccl.Ring}, Protos: []ops.Protocol{ops.ProtoLL}}
	c, err := nccl.Tune(s, ops.AllReduce, 256<<10, o)
	if err != nil || c.Channels != 8 {
		t.Errorf("ring/LL 256 KiB on 8 H100s: %v %v, want 8 channels", c.Estimate, err)
	}
}

// TestRingLL128FactorOf222WithTwoGPUsANode: 2.22 slows ring/LL128 to 0.7
// only with one GPU a node (v2.22.3 tuning.cc:179: ppn < 2 ? 0.7 : 0.92).
func TestRingLL128FactorOf222WithTwoGPUsANode(t *testing.T) {
	s := nccl.System{Ranks: 8, Nodes: 4, PerNode: 2, NodeMajor: true, Arch: topology.Hopper, CPU: topology.IntelCPU,
		NVLinks: 18, IntraBW: 18 * 20.6, NICs: 2, NICBW: 12.5}
	o := func(v nccl.Version) nccl.Options { return nccl.Options{Version: v} }
	a := estimate(t, s, ops.AllGather, 1<<30, nccl.Ring, ops.ProtoLL128, o(222))
	b := estimate(t, s, ops.AllGather, 1<<30, nccl.Ring, ops.ProtoLL128, o(223))
	if a.Off != "" || math.Abs(a.BusBW-b.BusBW) > 1e-9 {
		t.Errorf("2 GPUs a node: 2.22 %v (%s), 2.23 %v: want equal (0.92 both)", a.BusBW, a.Off, b.BusBW)
	}
}

// TestNetPeerChannelsAtTheHalvingBoundary: up to 2.28 NCCL halves a
// network peer's p2p channels only while nChannelsMax × nRanks exceeds
// p2pnChannels × 4 (v2.28.9 paths.cc:846); at equality it keeps 2.
func TestNetPeerChannelsAtTheHalvingBoundary(t *testing.T) {
	s := describe(t, "dgx-h100x4")
	c := nccl.Channels(s, nccl.Options{Version: nccl.V2_28})
	if 2*s.Ranks != 4*c.Coll || c.P2PPerPeer != 2 {
		t.Errorf("%d ranks, %d coll: %d p2p channels per peer, want 2 (boundary)", s.Ranks, c.Coll, c.P2PPerPeer)
	}
}

// TestP2PNetChunkDoublesOnlyOnArmHosts: the network p2p chunk doubles on
// Arm hosts with SM100 and later only (init.cc:833), not on AMD ones.
func TestP2PNetChunkDoublesOnlyOnArmHosts(t *testing.T) {
	checkP2PSplit(t, "dgx-b200x2,cpu=amd", nccl.Options{}, 256<<10, 2, ops.ProtoSimple)
}

// TestNVLSChannelsOnEightBlackwellsANode: 2.30 gives Blackwell nodes of
// at most 8 GPUs with NICs of 96 GB/s or more 24 NVLS channels (v2.30.7
// nvls.cc:182-186).
func TestNVLSChannelsOnEightBlackwellsANode(t *testing.T) {
	s := nccl.System{Ranks: 32, Nodes: 4, PerNode: 8, NodeMajor: true, Arch: topology.Blackwell, CPU: topology.IntelCPU,
		NVLinks: 18, IntraBW: 18 * 40.1, NICs: 8, NICBW: 100, NVSwitch: true, NVLSCapable: true}
	if got := nccl.Channels(s, nccl.Options{}).NVLS; got != 24 {
		t.Errorf("NVLS channels %d, want 24", got)
	}
}

// TestLL128WireCarries120Of128: an LL128 line carries 120 bytes of
// payload in 128, and the plan's wire says so.
func TestLL128WireCarries120Of128(t *testing.T) {
	tu := tunerOn(t, "dgx-h100", nccl.Options{Algos: []nccl.Algo{nccl.Ring}, Protos: []ops.Protocol{ops.ProtoLL128}})
	plan, _ := planOf(t, tu, ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: 1 << 20, DType: hw.F32, Redop: hw.Sum})
	if got := plan.Wire.Efficiency[ops.PathNVLink]; got != 120.0/128 {
		t.Errorf("LL128 efficiency %v, want 120/128", got)
	}
}

// TestCollNetChainChunkCap: a CollNet chain's chunk is at most 256 KiB
// (v2.30.7 enqueue.cc:2250, min(256 KiB, stepSize)).
func TestCollNetChainChunkCap(t *testing.T) {
	const spec = "cluster:8x1,arch=hopper,sharp=inf"
	s := describe(t, spec)
	nc := nccl.Channels(s, nccl.Options{}).Coll
	tu := tunerOn(t, spec, nccl.Options{Algos: []nccl.Algo{nccl.CollNetChain}})
	bytes := int64(48<<20) * int64(nc)
	c, err := tu.Choose(ops.Spec{Op: ops.AllReduce, Ranks: s.Ranks, Count: int(bytes / 4), DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	got := chunkOf(t, spec, bytes, nccl.CollNetChain, nccl.Options{})
	if want := bytes / int64(c.Channels*128); got > want+4 {
		t.Errorf("%d channels (%d coll), %d B: chunk %d, want %d (the pass cap's, under 512 KiB)", c.Channels, nc, bytes, got, want)
	}
}

// TestPATNetworkStepIsAHopOver3Point5: NCCL's model prices a PAT step's
// network latency as its tree/Simple network hop (14 µs, tuning.cc hwLat
// NET) over 3.5, since PAT keeps several steps in flight; the plan's
// wire crosses a network hop in that time.
func TestPATNetworkStepIsAHopOver3Point5(t *testing.T) {
	tu := tunerOn(t, "cluster:8x1,arch=hopper", nccl.Options{Algos: []nccl.Algo{nccl.PAT}, Protos: []ops.Protocol{ops.ProtoSimple}})
	plan, _ := planOf(t, tu, ops.Spec{Op: ops.AllGather, Ranks: 8, Count: 1 << 16, DType: hw.F32})
	if got, want := plan.Wire.Latency[ops.PathNet], 14e-6/3.5; math.Abs(got-want) > 1e-15 {
		t.Errorf("PAT's network step takes %g s, want 14 µs / 3.5 = %g", got, want)
	}
}

// TestTreeSimpleChunkLadder: a Simple tree halves its chunk while a
// channel would make too few passes for the tree's depth, to 128 KiB
// below 8 × depth passes, 64 KiB below 4 × and 32 KiB below 1 × (the
// tree chunk tuning of enqueue.cc before 2.20, kept by commsim). On two
// DGX H100s (depth 9) a channel's 2 MiB stops at the second rung's 64 KiB:
// 2 MiB / 64 KiB = 32 passes, under 36, over 9.
func TestTreeSimpleChunkLadder(t *testing.T) {
	const spec = "dgx-h100x2"
	o := nccl.Options{Protos: []ops.Protocol{ops.ProtoSimple}}
	ch := nccl.Channels(describe(t, spec), o).Coll
	o.Algos = []nccl.Algo{nccl.Tree}
	tu := tunerOn(t, spec, o)
	bytes := int64(2<<20) * int64(ch)
	c, err := tu.Choose(ops.Spec{Op: ops.AllReduce, Ranks: 16, Count: int(bytes / 4), DType: hw.F32, Redop: hw.Sum})
	if err != nil || c.Channels != ch {
		t.Fatalf("tree/Simple on %d channels: %v, %v", ch, c.Estimate, err)
	}
	if got := chunkOf(t, spec, bytes, nccl.Tree, o); got != 64<<10 {
		t.Errorf("a channel's 2 MiB moves in chunks of %d bytes, want 64 KiB", got)
	}
}

// TestNetPeerChannelsCountNCCLsP2PChannels: up to 2.28 a network peer's
// channels halve against the communicator's p2p channels as
// NCCL_MAX_P2P_NCHANNELS bounds them, not its collective channels
// (v2.28.9 paths.cc, ncclTopoComputeP2pChannels sets p2pnChannels before
// ncclTopoGetNchannels reads it): on 32 H100s with at most 8, 2 × 32 >
// 8 × 4 halves a peer's 2 to 1.
func TestNetPeerChannelsCountNCCLsP2PChannels(t *testing.T) {
	s := describe(t, "dgx-h100x4")
	if got := nccl.Channels(s, nccl.Options{Version: nccl.V2_28}).P2PPerPeer; got != 2 {
		t.Fatalf("without a bound: %d p2p channels a peer, want 2", got)
	}
	if got := nccl.Channels(s, nccl.Options{Version: nccl.V2_28, MaxP2PChannels: 8}).P2PPerPeer; got != 1 {
		t.Errorf("NCCL_MAX_P2P_NCHANNELS=8: %d p2p channels a peer, want 1", got)
	}
}

// tunerOn is a tuner on the fabric spec names, with options o.
func tunerOn(t *testing.T, spec string, o nccl.Options) *nccl.Tuner {
	t.Helper()
	return try(nccl.NewTuner(try(topology.Resolve(spec))(t), o))(t)
}

// TestRingLL128CrossesTheNetworkAsSimple: from Hopper on, a GPU ends a
// ring's LL128 step to the network as it ends a Simple one (a system
// fence and the tail its proxy waits for), so the machine's LL128 hop
// across nodes is NCCL's Simple figure (14 µs), while its tuner keeps
// its own (4.0 µs). LL, which the proxy sends as its flags read, keeps
// 2.7 µs, a tree's LL128 its 8.5, Ampere's ring (a device-scope fence)
// NCCL's 4.0, and a ring's LL128 hop within a node NCCL's NVLink figure.
func TestRingLL128CrossesTheNetworkAsSimple(t *testing.T) {
	for _, tc := range []struct {
		arch        string
		algo        nccl.Algo
		proto       ops.Protocol
		net, nvlink float64 // µs
	}{
		{"hopper", nccl.Ring, ops.ProtoLL128, 14, 1.9},
		{"blackwell", nccl.Ring, ops.ProtoLL128, 14, 1.9},
		{"ampere", nccl.Ring, ops.ProtoLL128, 4.0, 1.9},
		{"hopper", nccl.Ring, ops.ProtoLL, 2.7, 0.6},
		{"hopper", nccl.Tree, ops.ProtoLL128, 8.5, 1.25},
	} {
		tu := tunerOn(t, "cluster:2x8,arch="+tc.arch, nccl.Options{Algos: []nccl.Algo{tc.algo}, Protos: []ops.Protocol{tc.proto}})
		spec := ops.Spec{Op: ops.AllReduce, Ranks: 16, Count: 1 << 10, DType: hw.F32, Redop: hw.Sum}
		plan, c := planOf(t, tu, spec)
		if got := plan.Wire.Latency[ops.PathNet] * 1e6; math.Abs(got-tc.net) > 1e-9 {
			t.Errorf("%s %s: the network hop takes %.2f µs, want %.2f", tc.arch, nccl.Label(plan), got, tc.net)
		}
		if got := plan.Wire.Latency[ops.PathNVLink] * 1e6; got < tc.nvlink-1e-9 || got >= tc.net {
			t.Errorf("%s %s: the NVLink hop takes %.2f µs, want NCCL's %.2f (or the host's floor on a step)", tc.arch, nccl.Label(plan), got, tc.nvlink)
		}
		// NCCL's model: its base, and 2(16-1) steps, 2 of them across
		// the network.
		if tc.algo == nccl.Ring && tc.proto == ops.ProtoLL128 {
			want := 14.0 + 28*1.9 + 2*4.0
			if math.Abs(c.LatencyUS-want) > 1e-6 {
				t.Errorf("%s %s: NCCL's model gives %.2f µs of latency, want %.2f with its 4.0 µs network hop", tc.arch, nccl.Label(plan), c.LatencyUS, want)
			}
		}
	}
}
