package nccl

import "github.com/commsim/commsim/ops"

// CollNet on the simulator (ops nccl-collnet-direct and
// nccl-collnet-chain), with one GPU per node: the network's switch
// (SHARP) reduces every node's share and multicasts the result, as fast
// as the NICs' links and the switch's reduction bandwidth allow: the
// simulator's flows, not NCCL's modelled bandwidth, set the pace. NCCL's
// NVLS chunk ladder stands in for CollNet's.

// collNetPlan compiles spec as NCCL's CollNet with c's channels, and its
// latency: NCCL's model gives CollNet across nodes of one GPU one network
// hop (the tree's, as for every algorithm with one GPU per node) and no
// base latency, which the plan spends on its way through the switch:
// half on the reduction and half on the multicast of an all-reduce, all
// of it on the one switch step of a reduce-scatter or an all-gather.
func collNetPlan(s System, spec ops.Spec, c Choice, o Options) (*ops.Plan, error) {
	spec.Algo, spec.Channels, spec.NodeRanks = "nccl-"+c.Algo.String(), max(1, c.Channels), 1
	spec.Chunk = int(max(1, nvlsChunk(s, NVLS, spec.Channels, bytesOf(spec))/int64(spec.DType.Size())))
	plan, err := ops.Compile(spec)
	if err != nil {
		return nil, err
	}
	v, m := o.version(), o.Machine
	hop := hwLatency(ops.PathNet, Tree, simple, v) * 1e-6 * orOne(m.Hop)
	if spec.Op == ops.AllReduce {
		hop /= 2
	}
	var w ops.Wire
	// Switch steps take the wire's NVLink figures (the simulator and
	// ops.Cost price every switch step so); with one GPU per node a
	// CollNet plan has no other traffic, and every class carries the
	// network's.
	for class := range ops.NumPathClasses {
		w.Efficiency[class], w.Latency[class] = 1, hop
	}
	plan.Protocol, plan.Wire, plan.Launch = c.Protocol, withSlots(&w, int64(o.simpleStep())), baseLatency(c.Algo, simple, v)*1e-6*orOne(m.Launch)
	return plan, nil
}
