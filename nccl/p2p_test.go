package nccl_test

import (
	"cmp"
	"math"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// TestP2PChannelsFollowNCCLsSplit: a point-to-point operation's channels
// and protocol follow enqueue.cc's addP2pToPlan. On 8 B200s (32 p2p
// channels: the ring search's 16, duplicated) a send starts on 4
// channels, one per 64 KiB piece below that, and doubles them while a
// channel's part is over 16 MiB (32 chunks of 512 KiB), up to 32 — the
// flat time from 64 to 512 MiB a published sendrecv run shows. On 8
// H100s (24 coll channels, 32 p2p) the same; across nodes a peer gets
// 4 channels (TestP2PChannelsAcrossTheNetwork). LL carries up to 16 KiB
// a channel.
func TestP2PChannelsFollowNCCLsSplit(t *testing.T) {
	for _, tc := range []struct {
		topo  string
		bytes int64
		want  int
		proto ops.Protocol
	}{
		{"hgx-b200", 8, 1, ops.ProtoLL},
		{"hgx-b200", 16 << 10, 1, ops.ProtoLL},
		{"hgx-b200", 32 << 10, 1, ops.ProtoSimple},
		{"hgx-b200", 128 << 10, 2, ops.ProtoSimple},
		{"hgx-b200", 256 << 10, 4, ops.ProtoSimple},
		{"hgx-b200", 64 << 20, 4, ops.ProtoSimple},
		{"hgx-b200", 128 << 20, 8, ops.ProtoSimple},
		{"hgx-b200", 256 << 20, 16, ops.ProtoSimple},
		{"hgx-b200", 512 << 20, 32, ops.ProtoSimple},
		{"hgx-b200", 16 << 30, 32, ops.ProtoSimple},
		{"hgx-b200", math.MaxInt64, 32, ops.ProtoSimple}, // no rounding up past the largest int64
		{"dgx-h100", 128 << 20, 8, ops.ProtoSimple},
		{"dgx-h100x2", 8, 1, ops.ProtoLL},
		{"dgx-h100x2", 32 << 10, 1, ops.ProtoSimple},
		{"dgx-h100x2", 64 << 10, 1, ops.ProtoSimple},
		{"dgx-h100x2", 256 << 10, 2, ops.ProtoSimple},
		{"dgx-h100x2", 64 << 20, 4, ops.ProtoSimple},
	} {
		checkP2PSplit(t, tc.topo, nccl.Options{}, tc.bytes, tc.want, tc.proto)
	}
}

// TestP2PChannelsAcrossTheNetwork: the channels a peer across the
// network gets (paths.cc, ncclTopoGetNchannels and
// ncclTopoComputeP2pChannels), seen as those a 16 GiB sendrecv runs on.
// NCCL_NCHANNELS_PER_NET_PEER sets them. Else 2.29 on gives one a local
// NIC, or as many as drive its path at 14 GB/s a channel: 4 for H100s'
// 48 GB/s (PCIe Gen5 before NDR), 2 for A100s' 24 (Gen4 before HDR) and
// for two 100 Gb/s ports a GPU; then halves them while that many for
// each batch of 8 peers exceeds the 16 p2p channels (64 ranks: 2; 1024:
// 1). Up to 2.28 a peer got 2, halved while twice the ranks exceed four
// times the coll channels (64 ranks: 1), but one a local NIC.
func TestP2PChannelsAcrossTheNetwork(t *testing.T) {
	for _, tc := range []struct {
		topo    string
		version nccl.Version
		env     int
		want    int
	}{
		{"dgx-h100x2", nccl.V2_30, 0, 4},
		{"dgx-h100x2", nccl.V2_28, 0, 2},
		{"dgx-h100x2", nccl.V2_30, 1, 1},
		{"dgx-h100x2", nccl.V2_27, 8, 8},
		{"dgx-a100x2", nccl.V2_30, 0, 2},
		{"dgx-a100x2,nicbw=200Gb/s,nicports=2", nccl.V2_30, 0, 2},
		{"dgx-a100x2,nicbw=200Gb/s,nicports=2", nccl.V2_27, 0, 2},
		{"dgx-h100x8", nccl.V2_30, 0, 2},
		{"dgx-h100x8", nccl.V2_27, 0, 1},
		{"dgx-h100x8", nccl.V2_30, 4, 4},
		{"dgx-h100x128", nccl.V2_30, 0, 1},
	} {
		checkP2PSplit(t, tc.topo, nccl.Options{Version: tc.version, NetPeerChannels: tc.env}, 16<<30, tc.want, ops.ProtoSimple)
	}
}

// checkP2PSplit checks that NCCL (with o) moves a sendrecv of bytes on
// topo point to point, on want channels with proto.
func checkP2PSplit(t *testing.T, topo string, o nccl.Options, bytes int64, want int, proto ops.Protocol) {
	t.Helper()
	tp := try(topology.Resolve(topo))(t)
	tuner := try(nccl.NewTuner(tp, o))(t)
	spec := ops.Spec{Op: ops.SendRecv, Ranks: tp.NumGPUs(), Count: int(bytes), DType: hw.U8}
	c, err := tuner.Choose(spec)
	if err != nil {
		t.Fatal(err)
	}
	if c.Algo != nccl.P2P || c.Channels != want || c.Protocol != proto {
		v := cmp.Or(o.Version, nccl.V2_30)
		t.Errorf("%s, NCCL %v, %d bytes: %v, want p2p/%v/%dch", topo, v, bytes, c.Estimate, proto, want)
	}
}

// TestP2PChunkSetsTheSplit: the p2p chunk sets a part's bounds (on one
// node at most 32 chunks, across nodes one), so NCCL_P2P_*_CHUNKSIZE
// changes how many channels a send takes; NCCL keeps the chunk within a
// Simple step (NCCL_BUFFSIZE / 8), and doubles the network's on Arm hosts
// with Blackwell GPUs (GB200 trays).
func TestP2PChunkSetsTheSplit(t *testing.T) {
	for _, tc := range []struct {
		topo  string
		o     nccl.Options
		bytes int64
		want  int
	}{
		{"hgx-b200", nccl.Options{}, 64 << 20, 4},                        // 16 MiB parts of 32 × 512 KiB
		{"hgx-b200", nccl.Options{P2PNVLChunk: 128 << 10}, 64 << 20, 16}, // 4 MiB parts at most
		{"hgx-b200", nccl.Options{BuffSize: 1 << 20}, 64 << 20, 16},      // a 128 KiB step caps the chunk
		{"hgx-b200", nccl.Options{P2PNVLChunk: 1 << 20}, 64 << 20, 4},    // capped at the 512 KiB step
		{"hgx-b200", nccl.Options{P2PPCIChunk: 128 << 10}, 64 << 20, 4},  // not a PCIe node
		{"dgx-b200x2", nccl.Options{}, 256 << 10, 2},                     // 128 KiB parts at most
		{"dgx-b200x2", nccl.Options{P2PNetChunk: 256 << 10}, 256 << 10, 1},
		{"dgx-b200x2,cpu=arm", nccl.Options{}, 256 << 10, 1},
		{"dgx-h100x2,cpu=arm", nccl.Options{}, 256 << 10, 2}, // Hopper: not doubled
	} {
		checkP2PSplit(t, tc.topo, tc.o, tc.bytes, tc.want, ops.ProtoSimple)
	}
}

// TestP2PProtocolByVersion: NCCL 2.23 to 2.28 choose LL first, while a
// send carries at most 16 KiB for each of the 32 channels a peer may get
// on 8 B200s, and split it by LL's 64 KiB step (8 KiB pieces, at most 4
// channels); 2.29 on, and 2.22 and before, split by the Simple chunk and
// keep LL for at most 16 KiB a channel. So 2.27 moves 512 KiB with LL on
// 4 channels and 1 MiB with Simple, where 2.30 has gone Simple from
// 32 KiB: the switch a published B200 sendrecv run shows (512 KiB slower
// than 1 MiB). Across nodes a peer gets 2 channels: LL up to 32 KiB.
func TestP2PProtocolByVersion(t *testing.T) {
	for _, tc := range []struct {
		topo    string
		version nccl.Version
		bytes   int64
		want    int
		proto   ops.Protocol
	}{
		{"hgx-b200", nccl.V2_27, 8 << 10, 1, ops.ProtoLL},
		{"hgx-b200", nccl.V2_27, 16 << 10, 2, ops.ProtoLL},
		{"hgx-b200", nccl.V2_27, 32 << 10, 4, ops.ProtoLL},
		{"hgx-b200", nccl.V2_28, 512 << 10, 4, ops.ProtoLL},
		{"hgx-b200", nccl.V2_23, 1 << 20, 4, ops.ProtoSimple},
		{"hgx-b200", nccl.V2_27, 512 << 20, 32, ops.ProtoSimple},
		{"hgx-b200", nccl.V2_30, 32 << 10, 1, ops.ProtoSimple},
		{"hgx-b200", nccl.V2_21, 32 << 10, 1, ops.ProtoSimple},
		{"hgx-b200", nccl.V2_21, 16 << 10, 1, ops.ProtoLL},
		{"dgx-h100x2", nccl.V2_27, 32 << 10, 1, ops.ProtoLL},
		{"dgx-h100x2", nccl.V2_27, 64 << 10, 1, ops.ProtoSimple},
		{"dgx-h100x2", nccl.V2_30, 32 << 10, 1, ops.ProtoSimple},
	} {
		checkP2PSplit(t, tc.topo, nccl.Options{Version: tc.version}, tc.bytes, tc.want, tc.proto)
	}
}

// NCCL_P2P_LL_THRESHOLD moves the switch to Simple (bytes per channel
// at most it), and 0 moves everything with Simple.
func TestP2PLLThreshold(t *testing.T) {
	for _, tc := range []struct {
		o     nccl.Options
		bytes int64
		want  int
		proto ops.Protocol
	}{
		{nccl.Options{}, 8 << 10, 1, ops.ProtoLL},
		{nccl.Options{NoP2PLL: true}, 8 << 10, 1, ops.ProtoSimple},
		{nccl.Options{P2PLLThreshold: 4 << 10}, 8 << 10, 1, ops.ProtoSimple},
		{nccl.Options{P2PLLThreshold: 64 << 10}, 32 << 10, 1, ops.ProtoLL},
		{nccl.Options{Version: nccl.V2_27, NoP2PLL: true}, 8 << 10, 1, ops.ProtoSimple},
		{nccl.Options{Version: nccl.V2_27, P2PLLThreshold: 1 << 10}, 64 << 10, 1, ops.ProtoSimple},
		{nccl.Options{Version: nccl.V2_27}, 64 << 10, 4, ops.ProtoLL},
	} {
		checkP2PSplit(t, "hgx-b200", tc.o, tc.bytes, tc.want, tc.proto)
	}
}

// TestAllToAllSharesTheP2PChannels: an all-to-all's exchanges share the
// communicator's p2p channels (32 on 8 B200s): a rank's 7 exchanges of 2
// GiB with other GPUs each take all 32 (as does the copy to itself, which
// moves through no channel), so an exchange moves at 32/7 channels' worth,
// not 32.
func TestAllToAllSharesTheP2PChannels(t *testing.T) {
	tuner := try(nccl.NewTuner(try(topology.Resolve("hgx-b200"))(t), nccl.Options{}))(t)
	rate := func(op ops.Op, perPeer int) float64 {
		plan, _, err := tuner.Plan(ops.Spec{Op: op, Ranks: 8, Count: perPeer, DType: hw.U8})
		if err != nil {
			t.Fatal(err)
		}
		return plan.Wire.Rate
	}
	one, shared := rate(ops.SendRecv, 2<<30), rate(ops.AllToAll, 2<<30)
	if want := one * 32 / 7 / 32; shared < want*0.999 || shared > want*1.001 {
		t.Errorf("an all-to-all exchange moves at %.4g B/s, want 32/7 channels' %.4g (a sendrecv on 32 channels: %.4g)", shared, want, one)
	}
	if small := rate(ops.AllToAll, 256<<10); small != rate(ops.SendRecv, 256<<10) {
		t.Errorf("4 channels a peer fit 7 peers in 32: exchange at %.4g B/s, a sendrecv's %.4g", small, rate(ops.SendRecv, 256<<10))
	}
}

// TestAllToAllPeersOfANodeShareChannels: on several nodes NCCL gives
// the peers that are the same number of nodes away one base channel, so
// with one channel a network peer (NCCL_NCHANNELS_PER_NET_PEER=1) a 2 × 8
// B200 all-to-all puts the other node's 8 peers on one channel, and its
// own 7 (and the copy to itself) on another: an exchange moves at an eighth
// of the 22.3 GB/s a Blackwell channel moves (Vultr's run, in
// fidelity/nccl-logs, 2.8 GB/s), at 2 channels a peer twice that, and an
// exchange across the network at most NCCL_P2P_PER_CHANNEL_NET_BW a
// channel. A sendrecv has one exchange a channel: across the network it
// moves at that 14 GB/s.
func TestAllToAllPeersOfANodeShareChannels(t *testing.T) {
	const blackwell = 22.3 // GB/s, nccl.MeasuredChannel
	for _, tc := range []struct {
		op   ops.Op
		o    nccl.Options
		want float64 // GB/s
	}{
		{ops.AllToAll, nccl.Options{NetPeerChannels: 1}, blackwell / 8},
		{ops.AllToAll, nccl.Options{NetPeerChannels: 2}, 2 * blackwell / 8},
		{ops.AllToAll, nccl.Options{NetPeerChannels: 1, P2PNetChannelGBps: 2}, 2},
		{ops.AllToAll, nccl.Options{NetPeerChannels: 1, Version: nccl.V2_27}, blackwell / 8},
		{ops.AllToAll, nccl.Options{NetPeerChannels: 1, Version: nccl.V2_21}, blackwell / 8},
		{ops.SendRecv, nccl.Options{NetPeerChannels: 1}, 14},
	} {
		tuner := try(nccl.NewTuner(try(topology.Resolve("dgx-b200x2"))(t), tc.o))(t)
		plan, c := planOf(t, tuner, ops.Spec{Op: tc.op, Ranks: 16, Count: 1 << 30, DType: hw.U8})
		if got := plan.Wire.Rate / 1e9; c.Channels != tc.o.NetPeerChannels || math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%v, %+v: an exchange on %d channels moves at %.6g GB/s, want %d at %.6g", tc.op, tc.o, c.Channels, got, tc.o.NetPeerChannels, tc.want)
		}
	}
}

// TestGatherIsTheRootsAllToAll: NCCL runs a gather as grouped sends to
// the root (ncclGather from 2.28, nccl-tests' group of ncclSend and
// ncclRecv before), so the root's receives share its p2p channels as an
// all-to-all rank's do: the same split and exchange rate for the same
// bytes a peer, the same simulated transfer on 8 H100s and 2 × 8, and a
// plan that ops.Check proves, with the root anywhere. The root has half
// the operations of an all-to-all rank (receives only), within its node
// and across the network, so its launch is shorter.
func TestGatherIsTheRootsAllToAll(t *testing.T) {
	for _, topo := range []string{"dgx-h100", "dgx-h100x2"} {
		c, tp := simtest.World(t, topo, sim.Config{TimingOnly: true})
		tuner := try(nccl.NewTuner(tp, nccl.Options{}))(t)
		ranks := tp.NumGPUs()
		for _, perPeer := range []int{1 << 10, 1 << 20, 64 << 20} {
			gather, gc := planOf(t, tuner, ops.Spec{Op: ops.Gather, Ranks: ranks, Root: 3, Count: perPeer, DType: hw.U8})
			a2a, ac := planOf(t, tuner, ops.Spec{Op: ops.AllToAll, Ranks: ranks, Count: perPeer, DType: hw.U8})
			if gather.Algo != "nccl-p2p" || gc.Estimate != ac.Estimate || gather.Wire.Rate != a2a.Wire.Rate {
				t.Errorf("%s, %d B a peer: gather %s %v at %.4g B/s; all-to-all %v at %.4g", topo, perPeer, gather.Algo, gc.Estimate, gather.Wire.Rate, ac.Estimate, a2a.Wire.Rate)
			}
			if g, a := simtest.Time(t, c, gather), simtest.Time(t, c, a2a); math.Abs((g-gather.Launch)-(a-a2a.Launch)) > 1e-9*a {
				t.Errorf("%s, %d B a peer: gather %.3f µs, all-to-all %.3f µs, past launches of %.3f and %.3f", topo, perPeer, g*1e6, a*1e6, gather.Launch*1e6, a2a.Launch*1e6)
			}
			if gather.Launch >= a2a.Launch {
				t.Errorf("%s, %d B a peer: gather launches in %.3f µs, all-to-all in %.3f", topo, perPeer, gather.Launch*1e6, a2a.Launch*1e6)
			}
		}
		plan, _ := planOf(t, tuner, ops.Spec{Op: ops.Gather, Ranks: ranks, Root: ranks - 1, Count: 5, DType: hw.F32})
		if err := ops.Check(plan); err != nil {
			t.Errorf("%s: %v", topo, err)
		}
	}
}

// TestP2PMovesAtMostTheRingsWhole: a rank's point-to-point exchanges
// together move at most what NCCL's model gives the ring's channels
// together. Without a channel rate (Machine.NoChannelRate), on 8 H100s the ring search finds 12 channels of 30 GB/s
// (360), duplicated to 24 of 15, and the p2p channels are 32 of 15: a
// sendrecv on all 32 moves at 360 GB/s, not 480 (a published 8 x H100
// sendrecv moves 356-367 GB/s from 512 MiB), an all-to-all's 7 exchanges
// at 360/7 each, under the 32/7 channels' worth (68.6) each gets of the
// 32; a sendrecv on 4 channels keeps their 60. On 8 B200s (16 of 45, 32
// of 22.5) 32 channels are the whole.
func TestP2PMovesAtMostTheRingsWhole(t *testing.T) {
	rate := func(topo string, op ops.Op, perPeer int) float64 {
		tuner := try(nccl.NewTuner(try(topology.Resolve(topo))(t), nccl.Options{Machine: nccl.Machine{NoChannelRate: true}}))(t)
		plan, _ := planOf(t, tuner, ops.Spec{Op: op, Ranks: 8, Count: perPeer, DType: hw.U8})
		return plan.Wire.Rate / 1e9
	}
	for _, tc := range []struct {
		topo    string
		op      ops.Op
		perPeer int
		want    float64 // GB/s
	}{
		{"dgx-h100", ops.SendRecv, 16 << 30, 360},
		{"dgx-h100", ops.AllToAll, 2 << 30, 360.0 / 7},
		{"dgx-h100", ops.SendRecv, 32 << 20, 60},
		{"hgx-b200", ops.SendRecv, 16 << 30, 720},
		{"hgx-b200", ops.AllToAll, 2 << 30, 720.0 / 7},
	} {
		if got := rate(tc.topo, tc.op, tc.perPeer); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s %v of %d bytes a peer: an exchange moves at %.6g GB/s, want %.6g", tc.topo, tc.op, tc.perPeer, got, tc.want)
		}
	}
}

// TestP2PNetworkChannelRate: on several nodes a p2p channel moves
// at most the 14 GB/s by which NCCL sizes a network peer's channels
// (NCCL_P2P_PER_CHANNEL_NET_BW, which sets it), under a ring channel's
// share (22.5 and 24 GB/s on 2 H100 and 2 B200 nodes) and the channel
// rate measured on their GPUs (20.3 and 22.3); on one node it moves
// that rate, or without one (Machine.NoChannelRate) the share.
func TestP2PNetworkChannelRate(t *testing.T) {
	for _, tc := range []struct {
		topo       string
		ranks      int
		o          nccl.Options
		perChannel float64 // GB/s
	}{
		{"dgx-h100x2", 16, nccl.Options{}, 14},
		{"dgx-b200x2", 16, nccl.Options{}, 14},
		{"dgx-b200x2", 16, nccl.Options{P2PNetChannelGBps: 7}, 7},
		{"dgx-h100x2", 16, nccl.Options{Machine: nccl.Machine{NoChannelRate: true}}, 14},
		{"dgx-h100", 8, nccl.Options{}, 20.3},
		{"dgx-h100", 8, nccl.Options{Machine: nccl.Machine{NoChannelRate: true}}, 15},
	} {
		tuner := try(nccl.NewTuner(try(topology.Resolve(tc.topo))(t), tc.o))(t)
		plan, c := planOf(t, tuner, ops.Spec{Op: ops.SendRecv, Ranks: tc.ranks, Count: 64 << 20, DType: hw.U8})
		if got, want := plan.Wire.Rate/1e9, tc.perChannel*float64(c.Channels); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: sendrecv of 64 MiB on %d channels moves at %.6g GB/s, want %.6g", tc.topo, c.Channels, got, want)
		}
	}
}

// TestP2PChannelBounds: NCCL_MAX_P2P_NCHANNELS and NCCL_MIN_P2P_NCHANNELS
// bound the point-to-point channels (paths.cc, a power of two), and so
// does NCCL_MAX_CTAS through the communicator's channels.
func TestP2PChannelBounds(t *testing.T) {
	for _, tc := range []struct {
		o    nccl.Options
		want int
	}{
		{nccl.Options{}, 32},
		{nccl.Options{MaxP2PChannels: 8}, 8},
		{nccl.Options{MaxP2PChannels: 6}, 8},
		{nccl.Options{MinP2PChannels: 64}, 64},
		{nccl.Options{MaxCTAs: 4}, 4},
	} {
		checkP2PSplit(t, "dgx-h100", tc.o, 16<<30, tc.want, ops.ProtoSimple)
	}
}

// TestP2PLLMovesAtItsThreadsShare: a p2p LL transfer gets LL's half of
// its channels' bandwidth, as a ring does, but only the 9 warps of 16
// that its receiving side has (p2pLLThreadShare): 9/32 of what the same
// channels carry with Simple.
func TestP2PLLMovesAtItsThreadsShare(t *testing.T) {
	topo := try(topology.Resolve("hgx-b200"))(t)
	rate := func(o nccl.Options) (float64, ops.Protocol, int) {
		tuner := try(nccl.NewTuner(topo, o))(t)
		plan, c, err := tuner.Plan(ops.Spec{Op: ops.SendRecv, Ranks: 8, Count: 8 << 10, DType: hw.U8})
		if err != nil {
			t.Fatal(err)
		}
		return plan.Wire.Rate, plan.Protocol, c.Channels
	}
	ll, llProto, llChannels := rate(nccl.Options{})
	simple, simpleProto, simpleChannels := rate(nccl.Options{NoP2PLL: true})
	if llProto != ops.ProtoLL || simpleProto != ops.ProtoSimple || llChannels != simpleChannels {
		t.Fatalf("want LL and Simple on the same channels, got %v on %d and %v on %d", llProto, llChannels, simpleProto, simpleChannels)
	}
	if got, want := ll/simple, 9.0/32; math.Abs(got-want) > 1e-9 {
		t.Errorf("LL moves at %.4g of Simple's rate (%.4g against %.4g B/s), want 9/32", got, ll, simple)
	}
}
