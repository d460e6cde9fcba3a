package nccl

import "github.com/commsim/commsim/ops"

// CollNet on the simulator (ops nccl-collnet-direct and
// nccl-collnet-chain): the network's switch (SHARP) all-reduces what each
// node's heads hold, as fast as the NICs' links and the switch's
// reduction bandwidth allow: the simulator's flows, not NCCL's modelled
// bandwidth, set the pace. Within a node of several GPUs, direct sends
// each GPU's share to its head and the result back, chain runs a chain
// to the channel's head and back. NCCL's NVLS chunk ladder stands in for
// CollNet's.

// collNetPlan compiles spec as NCCL's CollNet with c's channels, and its
// latencies, NCCL's model's terms (tuning.cc's CollNet latencies): its
// network hop on each all-reduce through the switch, its NVLink hop
// (with direct's 0.4 µs a GPU of arity serialization) on each message
// within a node, and its base latency to open the collective. With one
// GPU per node NCCL's network hop is the tree's, and a reduce-scatter or
// an all-gather, which the switch reduces or multicasts from each GPU,
// spends it on its one switch step.
func collNetPlan(s System, spec ops.Spec, c Choice, o Options) (*ops.Plan, error) {
	spec.Algo, spec.Channels, spec.NodeRanks = "nccl-"+c.Algo.String(), max(1, c.Channels), s.PerNode
	spec.Chunk = int(max(1, collNetChunk(s, spec.Channels, bytesOf(spec))/int64(spec.DType.Size())))
	plan, err := ops.Compile(spec)
	if err != nil {
		return nil, err
	}
	v, m := o.version(), o.Machine
	net := hwLatency(ops.PathNet, c.Algo, simple, v)
	if s.PerNode == 1 {
		net = hwLatency(ops.PathNet, Tree, simple, v)
	}
	intra := hwLatency(ops.PathNVLink, c.Algo, simple, v)
	if s.NVLinks == 0 {
		intra = hwLatency(ops.PathPCI, c.Algo, simple, v)
	}
	if c.Algo == CollNetDirect {
		intra += float64(s.PerNode-1) * 0.4
	}
	var w ops.Wire
	for class := range ops.NumPathClasses {
		w.Efficiency[class], w.Latency[class] = 1, intra*1e-6*orOne(m.Hop)
	}
	w.Latency[ops.PathNet] = net * 1e-6 * orOne(m.Hop)
	if spec.Op != ops.AllReduce {
		// Switch steps take the wire's NVLink figures (the simulator
		// and ops.Cost price every switch step so); with one GPU per
		// node such a plan has no other traffic.
		w.Latency[ops.PathNVLink] = w.Latency[ops.PathNet]
	}
	plan.Protocol, plan.Wire, plan.Launch = c.Protocol, withSlots(&w, int64(o.simpleStep())), baseLatency(c.Algo, simple, v)*1e-6*orOne(m.Launch)
	return plan, nil
}

// collNetChunk is the bytes of each head's part of a CollNet pass: NVLS's
// ladder, grown so that a rank's steps stay under half of
// ops.MaxPlanSteps (the all-reduce's plan is held in memory) and its
// passes at nvlsMaxPasses a channel, as nvlsPlan's are.
func collNetChunk(s System, channels int, bytes int64) int64 {
	heads := int64(max(1, channels) * s.PerNode)
	perPass := int64(5*s.PerNode + 2) // sends, receives and reductions within the node, the switch's
	maxPasses := max(1, min(nvlsMaxPasses, int64(ops.MaxPlanSteps/2)/(int64(s.Ranks)*int64(max(1, channels))*perPass)))
	return max(nvlsChunk(s, NVLS, channels, bytes), (bytes+heads*maxPasses-1)/(heads*maxPasses))
}
