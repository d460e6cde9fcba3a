package nccl

import (
	"github.com/commsim/commsim/ops"
)

// NVLS on the simulator: the node's switch reduces and multicasts (ops
// nccl-nvls, with the network's switch (SHARP) between nodes, and
// nccl-nvlstree with NCCL's tree), as fast as the fabric's links and the
// switches' reduction bandwidths allow: the simulator's flows, not
// NCCL's modelled bandwidth, set the pace.

// nvlsChunk is the bytes of each rank's part of an NVLS pass: 128 KiB,
// down to 64, 32 and 16 KiB while bytes < 64×, 8× and 2× channels ×
// heads × chunk (enqueue.cc:2258-2275); NVLSTree starts from 256 KiB
// (enqueue.cc:2276-2285).
func nvlsChunk(s System, a Algo, channels int, bytes int64) int64 {
	chunk := int64(128 << 10)
	if a == NVLSTree {
		chunk = 256 << 10
	}
	heads := int64(max(1, channels) * s.PerNode)
	for _, factor := range [...]int64{64, 8, 2} {
		if bytes < factor*heads*chunk && chunk > 16<<10 {
			chunk /= 2
		}
	}
	return chunk
}

// switchChunk is the chunk of a plan with switch steps: ladder (NCCL's),
// grown so that a channel makes at most nvlsMaxPasses passes and, the
// plan being held in memory (its lanes wait for each other), its ranks'
// steps stay under half of ops.MaxPlanSteps at scale, as treeChunk does
// for trees. A channel's pass moves parts chunks of NCCL's bytes (a
// node's parts for an all-reduce, every rank's block for a reduce-scatter
// or an all-gather), in perPass steps of a rank.
func switchChunk(s System, channels int, bytes, ladder int64, parts, perPass int) int64 {
	per := int64(max(1, channels) * parts)
	maxPasses := max(1, min(nvlsMaxPasses, int64(ops.MaxPlanSteps/2)/(int64(s.Ranks)*int64(max(1, channels))*int64(max(perPass, nvlsStepsPerPass)))))
	return max(ladder, (bytes+per*maxPasses-1)/(per*maxPasses))
}

// nvlsMaxPasses bounds the passes of an NVLS or NVLSTree channel: past it
// a channel's parts grow with the size rather than their count, where
// NCCL's fixed chunk makes more and shorter passes, each a few simulated
// steps on every rank. 128 keeps a 16 GiB all-reduce on two DGX nodes to
// 0.66 s of simulation (1.3 s at 256 passes, 2.6 s at NCCL's 512) and
// makes its time 1.3% shorter than at 512 (fewer passes, fewer hop
// latencies left uncovered); up to 2 GiB on that fabric the passes are
// NCCL's.
const nvlsMaxPasses = 128

// nvlsStepsPerPass bounds a rank's steps per pass of an NVLS channel: the
// switch's reduce and multicast, and NVLSTree's tree between nodes.
const nvlsStepsPerPass = 2 + treeStepsPerPass

// nvlsPlan compiles spec as NCCL's NVLS (on one node, or across nodes
// over CollNet) or NVLSTree with c's channels, and its latencies: NCCL's
// NVLS latency opens the collective, its network latency goes on each
// hop of the tree or all-reduce through the network's switch.
func nvlsPlan(s System, spec ops.Spec, c Choice, o Options) (*ops.Plan, error) {
	spec.Algo, spec.Channels = "nccl-nvls", max(1, c.Channels)
	if s.Nodes > 1 {
		// Across nodes, NVLS goes through the network's switch (over
		// CollNet), NVLSTree through NCCL's tree.
		spec.NodeRanks = s.PerNode
	}
	if c.Algo == NVLSTree {
		spec.Algo = "nccl-nvlstree"
	}
	parts, perPass := s.PerNode, nvlsStepsPerPass
	if spec.Op != ops.AllReduce {
		// A pass moves a piece of every rank's block; across nodes a rank
		// multicasts or reduces every node's piece of its local index.
		parts, perPass = s.Ranks, s.Nodes+2
	}
	chunk := switchChunk(s, spec.Channels, bytesOf(spec), nvlsChunk(s, c.Algo, spec.Channels, bytesOf(spec)), parts, perPass)
	spec.Chunk = int(max(1, chunk/int64(spec.DType.Size())))
	plan, err := ops.Compile(spec)
	if err != nil {
		return nil, err
	}
	v, m := o.version(), o.Machine
	var w ops.Wire
	for class := range ops.NumPathClasses {
		w.Efficiency[class] = 1
	}
	// A switch step is a Simple step behind a flag handshake, as a ring's
	// is: NCCL's model has no per-step NVLS figure, and the ring's stands
	// in.
	w.Latency[ops.PathNVLink] = hwLatency(ops.PathNVLink, Ring, simple, v) * 1e-6
	w.Latency[ops.PathNet] = hwLatency(ops.PathNet, c.Algo, simple, v) * 1e-6
	machineHops(&w, s, m)
	launch := (baseLatency(c.Algo, simple, v) + hwLatency(ops.PathNVLink, c.Algo, simple, v)) * 1e-6 * orOne(m.Launch)
	plan.Protocol, plan.Wire, plan.Launch = c.Protocol, finishWire(&w, int64(o.simpleStep())), launch+treeDip(s, spec, c, simple, o)
	return plan, nil
}
