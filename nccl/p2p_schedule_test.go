package nccl

import (
	"math"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// TestP2PChannelForIsNCCLs: the channel each part of a round's exchange
// runs on, as NCCL's releases compute it (32 p2p channels): on one node
// from the round's own base, 2.22 to 2.27 adding the part's bits reversed
// (ncclP2pChannelForPart), other releases reversing the base's bits and
// adding the part; on several nodes from one base for each node's ranks
// (up to 2.28.3; 8 at a time past 8, 2.21 counting a node as one base),
// and from 2.28.7 (the model's 2.28) for each group of
// NCCL_P2P_SCHEDULE_GROUP_SIZE (8, or its greatest common divisor with a
// node's ranks).
func TestP2PChannelForIsNCCLs(t *testing.T) {
	oneNode := System{Ranks: 8, Nodes: 1, PerNode: 8}
	twoNodes := System{Ranks: 16, Nodes: 2, PerNode: 8}
	fours := System{Ranks: 8, Nodes: 2, PerNode: 4}
	sixteens := System{Ranks: 32, Nodes: 2, PerNode: 16}
	for _, tc := range []struct {
		s            System
		v            Version
		round, parts int
		want         []int
	}{
		{oneNode, V2_30, 1, 4, []int{16, 17, 18, 19}},
		{oneNode, V2_28, 3, 2, []int{24, 25}},
		{oneNode, V2_27, 1, 4, []int{1, 17, 9, 25}},
		{oneNode, 222, 2, 2, []int{2, 18}},
		{oneNode, V2_21, 1, 4, []int{16, 17, 18, 19}},
		{twoNodes, V2_30, 7, 1, []int{0}},
		{twoNodes, V2_30, 8, 1, []int{16}},
		{twoNodes, V2_27, 15, 2, []int{1, 17}},
		{fours, V2_30, 4, 1, []int{16}},
		{fours, V2_28, 4, 1, []int{16}},
		{fours, V2_27, 3, 1, []int{0}},
		{fours, V2_27, 4, 1, []int{1}},
		{sixteens, V2_27, 9, 1, []int{1}},
		{sixteens, V2_27, 16, 1, []int{2}},
		{sixteens, V2_28, 16, 1, []int{8}},
		{sixteens, V2_21, 16, 1, []int{16}},
		{sixteens, V2_30, 16, 1, []int{8}},
		{sixteens, V2_30, 8, 1, []int{16}},
	} {
		for part, want := range tc.want {
			if got := p2pChannelFor(tc.s, tc.v, 32, tc.round, part); got != want {
				t.Errorf("%d ranks on %d nodes, NCCL %v, round %d part %d: channel %d, want %d", tc.s.Ranks, tc.s.Nodes, tc.v, tc.round, part, got, want)
			}
		}
	}
}

// TestP2PExchangeEndsWithItsSlowestPart: an exchange's parts are equal,
// so one whose parts share busier and quieter channels moves at n times
// its busiest channel's share. With 2.21 on 4 nodes of 16 and 8 channels
// an exchange, the bases 0 to 4 (a node's distance plus which 8 of its
// ranks) take channels 0-7, 16-23, 8-15, 24-31 and 4-11: channels 8-11
// carry 24 exchanges (16 of base 2, 8 of base 4) and 4-7 15, so base 4's
// exchanges, half on each, move at 8/24 of a channel, not 4/24 + 4/15;
// across the network at most the cap on each part.
func TestP2PExchangeEndsWithItsSlowestPart(t *testing.T) {
	s := System{Ranks: 64, Nodes: 4, PerNode: 16}
	o := Options{Version: V2_21}
	if gbps, channels := p2pPeerGBps(s, o, 8, 32, 24, 100); gbps != 8 || channels != 8.0/24 {
		t.Errorf("%.4g GB/s on %.4g channels' worth, want 8 on 1/3", gbps, channels)
	}
	if gbps, _ := p2pPeerGBps(s, o, 8, 32, 24, 0.5); gbps != 4 {
		t.Errorf("under a cap of 0.5 GB/s a channel: %.4g GB/s, want 4", gbps)
	}
}

// TestP2PProxyCountsNetworkOperations: the busiest GPU's proxy delays
// a grouped send and receive by proxyOpUS for each of its network
// operations (a send or a receive to a peer on another node, on each of
// the exchange's channels) past the first: an all-to-all rank has a send
// and a receive for every rank of the other nodes, a gather's root a
// receive; a sendrecv's GPU at a node's edge one, or two where PXN has
// the node's first GPU relay its last's send (GPUs on NVLink, NICs on
// PCIe switches), with one GPU a node, or ranks not node by node; one
// node has none, nor from 2.28 an all-to-all or gather of nothing.
func TestP2PProxyCountsNetworkOperations(t *testing.T) {
	oneNode := System{Ranks: 8, Nodes: 1, PerNode: 8, NodeMajor: true, NVLinks: 18}
	twoNodes := System{Ranks: 16, Nodes: 2, PerNode: 8, NodeMajor: true, NVLinks: 18}
	pcieOnly := System{Ranks: 16, Nodes: 2, PerNode: 8, NodeMajor: true}
	nicsOnCPU := System{Ranks: 16, Nodes: 2, PerNode: 8, NodeMajor: true, NVLinks: 12, NICsOnCPU: true}
	tenOnes := System{Ranks: 10, Nodes: 10, PerNode: 1, NodeMajor: true}
	scattered := System{Ranks: 16, Nodes: 2, PerNode: 8}
	for _, tc := range []struct {
		s        System
		op       ops.Op
		count    int
		v        Version
		channels int
		ops      int // the busiest GPU's network operations
	}{
		{oneNode, ops.AllToAll, 1, V2_30, 4, 0},
		{oneNode, ops.SendRecv, 1, V2_30, 4, 0},
		{twoNodes, ops.AllToAll, 1, V2_30, 1, 16},
		{twoNodes, ops.AllToAll, 1, V2_30, 2, 32},
		{twoNodes, ops.AllToAll, 0, V2_30, 1, 0},
		{twoNodes, ops.AllToAll, 0, V2_27, 1, 16},
		{twoNodes, ops.Gather, 1, V2_30, 1, 8},
		{twoNodes, ops.Gather, 0, V2_28, 1, 0},
		{twoNodes, ops.SendRecv, 1, V2_30, 1, 2},
		{twoNodes, ops.SendRecv, 0, V2_30, 2, 4},
		{pcieOnly, ops.SendRecv, 1, V2_30, 1, 1},
		{nicsOnCPU, ops.SendRecv, 1, V2_30, 2, 2},
		{pcieOnly, ops.AllToAll, 1, V2_30, 1, 16},
		{tenOnes, ops.AllToAll, 1, V2_30, 2, 36},
		{tenOnes, ops.SendRecv, 1, V2_30, 1, 2},
		{scattered, ops.SendRecv, 1, V2_30, 1, 2},
	} {
		want := proxyOpUS * float64(max(0, tc.ops-1))
		spec := ops.Spec{Op: tc.op, Ranks: tc.s.Ranks, Count: tc.count}
		if got := p2pProxyUS(tc.s, spec, tc.channels, tc.v); got != want {
			t.Errorf("%v of %d on %d nodes of %d (%d NVLinks), %v, %d channels: proxy %.4g µs, want %.4g (%d operations)", tc.op, tc.count, tc.s.Nodes, tc.s.PerNode, tc.s.NVLinks, tc.v, tc.channels, got, want, tc.ops)
		}
	}
}

// TestP2PCountsLocalOperations: a group of exchanges within a node
// costs localOpUS for each of the busiest GPU's sends and receives to
// peers on its node past a sendrecv's two, whatever their channels: an
// all-to-all rank's to each other GPU of its node (and of no other), a
// gather's root's receives; none for a sendrecv, a node of two, one GPU
// a node, or from 2.28 an all-to-all or gather of nothing.
func TestP2PCountsLocalOperations(t *testing.T) {
	eight := System{Ranks: 8, Nodes: 1, PerNode: 8, NodeMajor: true, NVLinks: 18}
	four := System{Ranks: 4, Nodes: 1, PerNode: 4, NodeMajor: true, NVLinks: 18}
	two := System{Ranks: 2, Nodes: 1, PerNode: 2, NodeMajor: true, NVLinks: 18}
	twoNodes := System{Ranks: 16, Nodes: 2, PerNode: 8, NodeMajor: true, NVLinks: 18}
	tenOnes := System{Ranks: 10, Nodes: 10, PerNode: 1, NodeMajor: true}
	for _, tc := range []struct {
		s     System
		op    ops.Op
		count int
		v     Version
		ops   int // the busiest GPU's operations within its node
	}{
		{eight, ops.AllToAll, 1, V2_30, 14},
		{four, ops.AllToAll, 1, V2_30, 6},
		{two, ops.AllToAll, 1, V2_30, 2},
		{eight, ops.Gather, 1, V2_30, 7},
		{eight, ops.SendRecv, 1, V2_30, 2},
		{eight, ops.AllToAll, 0, V2_28, 0},
		{eight, ops.AllToAll, 0, V2_27, 14},
		{twoNodes, ops.AllToAll, 1, V2_30, 14},
		{twoNodes, ops.Gather, 1, V2_30, 7},
		{tenOnes, ops.AllToAll, 1, V2_30, 0},
	} {
		want := localOpUS * float64(max(0, tc.ops-2))
		spec := ops.Spec{Op: tc.op, Ranks: tc.s.Ranks, Count: tc.count}
		if got := p2pOpsUS(tc.s, spec, tc.v); got != want {
			t.Errorf("%v of %d on %d nodes of %d, %v: %.4g µs, want %.4g (%d operations)", tc.op, tc.count, tc.s.Nodes, tc.s.PerNode, tc.v, got, want, tc.ops)
		}
	}
}

// TestP2PPlanLaunchesWithItsProxy: a point-to-point plan's launch is the
// ring's base latency of its protocol, its operations within the node and
// its proxy's turns for the channels it runs on (FixedLaunch names the
// latter two, under the tuner's own release), on 2 × 8 B200 at one
// channel a peer and at several; an all-to-all or gather of nothing has
// its operations before 2.28 and none from it.
func TestP2PPlanLaunchesWithItsProxy(t *testing.T) {
	topo, err := topology.Resolve("dgx-b200x2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op       ops.Op
		perPeer  int
		v        Version
		channels int
		ops      int // network operations
		local    int // operations within the node
	}{
		{ops.AllToAll, 256, V2_30, 1, 16, 14},
		{ops.AllToAll, 16 << 20, V2_30, 4, 64, 14},
		{ops.Gather, 256, V2_30, 1, 8, 7},
		{ops.SendRecv, 256, V2_30, 1, 2, 2},
		{ops.AllToAll, 0, V2_27, 1, 16, 14},
		{ops.AllToAll, 0, V2_28, 1, 0, 0},
		{ops.Gather, 0, V2_27, 1, 8, 7},
		{ops.Gather, 0, V2_30, 1, 0, 0},
	} {
		tuner, err := NewTuner(topo, Options{Version: tc.v})
		if err != nil {
			t.Fatal(err)
		}
		spec := ops.Spec{Op: tc.op, Ranks: 16, Count: tc.perPeer, DType: hw.U8}
		plan, c, err := tuner.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := protoIndex(c.Protocol)
		fixed := (localOpUS*float64(max(0, tc.local-2)) + proxyOpUS*float64(max(0, tc.ops-1))) * 1e-6
		if got := tuner.FixedLaunch(spec, c); c.Channels != tc.channels || math.Abs(plan.Launch-baseLatency(Ring, p, tc.v)*1e-6-fixed) > 1e-15 || math.Abs(got-fixed) > 1e-18 {
			t.Errorf("%v, %v of %d B a peer on %d channels: launch %.4g µs, fixed %.4g; want %d channels and %.4g µs fixed", tc.v, tc.op, tc.perPeer, c.Channels, plan.Launch*1e6, got*1e6, tc.channels, fixed*1e6)
		}
	}
}
