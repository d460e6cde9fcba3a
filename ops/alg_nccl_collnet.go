package ops

import "fmt"

const ncclCollNetDirectDoc = "NCCL's CollNet direct on InfiniBand SHARP, with one GPU per node: the data split over " +
	"Spec.Channels channels, each rank owning 1/Ranks of every pass of Ranks×Spec.Chunk elements, which the network " +
	"switch reduces from every node into it ((x0 op x1) op x2 …, in rank order) and multicasts from it to every node, " +
	"as nccl-nvls does on an NVSwitch; needs a simulator whose network switch reduces"

const ncclCollNetChainDoc = "NCCL's CollNet chain on InfiniBand SHARP, with one GPU per node: each node's chain is its " +
	"one GPU, which hands its data to the network switch, so it runs nccl-collnet-direct's all-reduce; needs a " +
	"simulator whose network switch reduces"

// CollNet's collectives. Within a node of several GPUs NCCL reduces
// before the network (direct: every GPU a share; chain: along a chain),
// so that each NIC carries a share of the data; a plan cannot say that
// yet: a switch step reads its members' memory with nothing but the
// plan's shape to order it after their own steps (see Check), so what
// it reads must be their input, and a node's partial sums are not. With
// one GPU per node there is nothing to reduce first, and the network
// switch reduces the inputs themselves.
var (
	ncclCollNetDirectPlans = map[Op]generator{
		AllReduce:     acrossNodesOfOne(ncclNVLSAllReduce),
		ReduceScatter: acrossNodesOfOne(ncclNVLSReduceScatter),
		AllGather:     acrossNodesOfOne(ncclNVLSAllGather),
	}
	ncclCollNetChainPlans = map[Op]generator{AllReduce: acrossNodesOfOne(ncclNVLSAllReduce)}
)

// NetworkSwitch reports whether algorithm name's switch steps go through
// the network's switch (SHARP), whose group is every rank, one a node
// (NodeRanks 1), rather than a node's NVSwitch: CollNet's.
func NetworkSwitch(name string) bool {
	return name == "nccl-collnet-direct" || name == "nccl-collnet-chain"
}

// acrossNodesOfOne is gen for CollNet: refused unless the ranks are nodes
// of one GPU (NodeRanks 1), or a single rank.
func acrossNodesOfOne(gen generator) generator {
	return func(b *builder) error {
		if s := b.p.Spec; s.Ranks > 1 && s.NodeRanks != 1 {
			nodes := "on one node"
			if s.NodeRanks > 1 {
				nodes = fmt.Sprintf("in nodes of %d", s.NodeRanks)
			}
			return fmt.Errorf("%w: CollNet reduces across nodes on the network's switch (SHARP), and commsim runs it with one GPU per node only (NodeRanks 1); %d ranks are %s",
				ErrUnsupported, s.Ranks, nodes)
		}
		return gen(b)
	}
}
