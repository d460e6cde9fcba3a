package nccl

import (
	"slices"

	"github.com/commsim/commsim/ops"
)

// CollNet on the simulator (ops nccl-collnet-direct and
// nccl-collnet-chain): the network's switch (SHARP) all-reduces what each
// node's heads hold, as fast as the NICs' links and the switch's
// reduction bandwidth allow: the simulator's flows, not NCCL's modelled
// bandwidth, set the pace. Within a node of several GPUs, direct sends
// each GPU's share to its head and the result back, chain runs a chain
// to the channel's head and back.

// collNetPlan compiles spec as NCCL's CollNet with c's channels, and its
// latencies, NCCL's model's terms (tuning.cc's CollNet latencies): its
// network hop on each all-reduce through the switch, its NVLink hop
// (with direct's 0.4 µs a GPU of arity serialization, and what a
// crossing takes beyond Hopper's) on each message within a node, and its
// base latency to open the collective. With one
// GPU per node NCCL's network hop is the tree's, and a reduce-scatter or
// an all-gather, which the switch reduces or multicasts from each GPU,
// spends it on its one switch step.
func collNetPlan(s System, spec ops.Spec, c Choice, o Options) (*ops.Plan, error) {
	spec.Algo, spec.Channels, spec.NodeRanks = "nccl-"+c.Algo.String(), max(1, c.Channels), s.PerNode
	spec.Chunk = int(max(1, collNetChunk(s, spec.Op, c.Algo, spec.Channels, bytesOf(spec), o)/int64(spec.DType.Size())))
	plan, err := ops.Compile(spec)
	if err != nil {
		return nil, err
	}
	v, m := o.Release(), o.Machine
	net, intra := interLatency(s, c.Algo, simple, v), intraLatency(s, c.Algo, simple, v)
	if c.Algo == CollNetDirect {
		intra += float64(s.PerNode-1) * 0.4
	}
	var w ops.Wire
	for class := range ops.NumPathClasses {
		w.Efficiency[class], w.Latency[class] = 1, intra*1e-6
	}
	w.Latency[ops.PathNet] = net * 1e-6
	machineHops(&w, s, m)
	if spec.Op != ops.AllReduce && s.PerNode == 1 {
		// With one GPU per node a reduce-scatter or an all-gather is
		// NVLS's plan through the network's switch: its switch steps
		// take the wire's NVLink figures (the simulator and ops.Cost
		// price every switch step so), and there is no other traffic.
		w.Latency[ops.PathNVLink] = w.Latency[ops.PathNet]
	}
	plan.Protocol, plan.Wire, plan.Launch = c.Protocol, finishWire(&w, int64(o.simpleStep())), baseLatency(c.Algo, simple, v)*1e-6*orOne(m.Launch)
	return plan, nil
}

// collNetChunk is the bytes of a CollNet pass's part (enqueue.cc,
// calcCollChunking): direct's, each head's, from a Simple step, halved
// while bytes ÷ (channels × heads × chunk) < 64 × depth above 128 KiB,
// then < 8 × depth above 64 KiB and again above 32 KiB (depth 2 where a
// node has several GPUs, else 1); chain's, each channel's, from a Simple
// step of at most 256 KiB, halved while bytes ÷ (channels × chunk) <
// 64 × depth above 128 KiB, < 8 × depth above 64 KiB and < depth above
// 32 KiB (depth: the GPUs of a node). switchChunk then bounds the passes
// and steps.
func collNetChunk(s System, op ops.Op, a Algo, channels int, bytes int64, o Options) int64 {
	per, depth := int64(max(1, channels)), int64(s.PerNode)
	chunk := int64(o.simpleStep())
	ladder := []rung{{64, 128 << 10}, {8, 64 << 10}, {1, 32 << 10}}
	// An all-reduce's pass: a node's parts, each GPU sending and
	// receiving one to and from each other and the switch's.
	parts, perPass := s.PerNode, 5*s.PerNode+2
	if a == CollNetChain {
		chunk, parts = min(chunk, 256<<10), 1
	} else {
		per *= int64(directHeads(s, o.Release()))
		depth = min(2, depth)
		ladder[2].times = 8
	}
	if op != ops.AllReduce {
		// A piece of every rank's block; each GPU copies, sends and
		// receives every node's piece for each other GPU.
		parts, perPass = s.Ranks, (s.PerNode+1)*(s.Nodes+1)+2
	}
	chunk = halved(chunk, bytes/per, depth, ladder)
	return switchChunk(s, channels, bytes, chunk, parts, perPass, switchMaxPasses, ops.MaxPlanSteps/2)
}

// directHeads is the heads of NCCL's CollNet direct channels, which its
// channel and chunk tuning multiply by (connect.cc, connectCollNet: the
// distinct first GPUs of the CollNet graph's channels): one a GPU with a
// NIC of its own, no more than the graph's channels. The simulated plan
// still makes every GPU the head of its share (ops, nccl-collnet-direct).
func directHeads(s System, v Version) int {
	return max(1, min(graphOf(s, CollNetDirect, v).channels, maxDirectArity, s.netHeads()))
}

// collNetDirectGraph is NCCL's CollNet direct search from 2.22 (search.cc,
// ncclTopoSearchTryCollnetDirect and ncclTopoCompute), which its model
// prices direct by. A channel is a head, a GPU with a NIC of its own, up
// to 8 a node; a head sends to and receives from each of the node's other
// GPUs a share of its speed, so a GPU's NVLinks carry its own channel's
// speed and a share of every other head's. The search takes the speeds of
// the inter-node ladder that the path to a NIC carries, from the first
// down to half of the best, and keeps the one whose heads move the most;
// doubles fast channels up to the heads' limit (dupChannels); then, where
// every channel still has a head of its own, raises the speed within the
// node up the ladder while it is under twice the network's and the
// NVLinks carry it ("increase bwIntra for trees (2 nodes or collnet)").
// With one GPU a node the search is the tree's, on one channel. On 8
// H100s a node with 400 Gb/s NICs: 8 channels of 48 GB/s.
func collNetDirectGraph(s System) graph {
	heads, most := min(maxDirectArity, s.netHeads()), min(maxDirectArity, s.PerNode)
	carries := func(sp float64, channels int) bool {
		if s.PerNode == 1 {
			return true
		}
		others := float64(channels-1) / float64(s.PerNode-1)
		return sp*(1+others) <= s.IntraBW+1e-9
	}
	fit := func(sp float64) int {
		n := heads
		for n > 0 && !carries(sp, n) {
			n--
		}
		return n
	}
	ladder, path := interLadder(s.Arch), s.nicPathBW()
	var g graph
	for _, sp := range ladder {
		n := fit(sp)
		if sp > path || n == 0 {
			continue
		}
		if g.channels > 0 && sp/g.inter <= 0.49 {
			break
		}
		if float64(n)*sp > float64(g.channels)*g.inter {
			g.channels, g.inter = n, sp
		}
	}
	if g.channels == 0 {
		return g
	}
	g.channels, g.inter = dupChannels(s.Arch, g.channels, g.inter, most)
	g.intra = g.inter
	if g.channels > heads {
		return g
	}
	for i := slices.Index(ladder, atMost(ladder, g.inter)) - 1; i >= 0 && g.intra < 2*g.inter && carries(ladder[i], g.channels); i-- {
		g.intra = ladder[i]
	}
	return g
}
