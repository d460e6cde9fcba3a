package nccl

import "testing"

// TestP2PChannelForIsNCCLs: the channel each part of a round's exchange
// runs on, as NCCL's releases compute it (32 p2p channels): on one node
// from the round's own base, 2.22 to 2.27 adding the part's bits reversed
// (ncclP2pChannelForPart), other releases reversing the base's bits and
// adding the part; on several nodes from one base for each node's ranks
// (up to 2.28; 8 at a time past 8, 2.21 counting a node as one base), and
// from 2.29 for each group of NCCL_P2P_SCHEDULE_GROUP_SIZE (8, or its
// greatest common divisor with a node's ranks).
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
		{fours, V2_28, 3, 1, []int{0}},
		{sixteens, V2_28, 9, 1, []int{16}},
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
