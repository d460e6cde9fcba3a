package nccl

import (
	"testing"

	"github.com/commsim/commsim/ops"
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
// receive, a sendrecv's GPU at a node's edge one (two with one GPU a
// node, or ranks not taken node by node); one node has none.
func TestP2PProxyCountsNetworkOperations(t *testing.T) {
	oneNode := System{Ranks: 8, Nodes: 1, PerNode: 8, NodeMajor: true}
	twoNodes := System{Ranks: 16, Nodes: 2, PerNode: 8, NodeMajor: true}
	tenOnes := System{Ranks: 10, Nodes: 10, PerNode: 1, NodeMajor: true}
	scattered := System{Ranks: 16, Nodes: 2, PerNode: 8}
	for _, tc := range []struct {
		s        System
		op       ops.Op
		channels int
		ops      int // the busiest GPU's network operations
	}{
		{oneNode, ops.AllToAll, 4, 0},
		{oneNode, ops.SendRecv, 4, 0},
		{twoNodes, ops.AllToAll, 1, 16},
		{twoNodes, ops.AllToAll, 2, 32},
		{twoNodes, ops.Gather, 1, 8},
		{twoNodes, ops.SendRecv, 1, 1},
		{twoNodes, ops.SendRecv, 2, 2},
		{tenOnes, ops.AllToAll, 2, 36},
		{tenOnes, ops.SendRecv, 1, 2},
		{scattered, ops.SendRecv, 1, 2},
	} {
		want := proxyOpUS * float64(max(0, tc.ops-1))
		if got := p2pProxyUS(tc.s, tc.op, tc.channels); got != want {
			t.Errorf("%v on %d nodes of %d, %d channels: proxy %.4g µs, want %.4g (%d operations)", tc.op, tc.s.Nodes, tc.s.PerNode, tc.channels, got, want, tc.ops)
		}
	}
}
