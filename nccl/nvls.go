package nccl

import (
	"math"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// NVLS on the simulator: the node's switch reduces and multicasts (ops
// nccl-nvls, with the network's switch (SHARP) between nodes, and
// nccl-nvlstree with NCCL's tree), as fast as the fabric's links and the
// switches' reduction bandwidths allow: the simulator's flows, not
// NCCL's modelled bandwidth, set the pace.

// nvlsSetup is what NCCL's NVLS setup gives a communicator (nvls.cc:
// ncclNvlsInit, and ncclNvlsTuning from 2.30): the channels NVLS and
// NVLSTree launch, the most an NVLS pass's chunk may be, and the chunk
// NVLSTree starts from.
type nvlsSetup struct {
	channels         int
	chunk, treeChunk int64
}

// nvlsSetupOf is NCCL's NVLS setup on s, by release:
//   - channels: 16; on Blackwell 32 from 2.25, and from 2.27 24 on one
//     node (one NVLink domain); from 2.30 on several Blackwell nodes by
//     the GPUs' network bandwidth (ncclNvlsTreeSm100Tuning); then
//     NCCL_NVLS_NCHANNELS, then NCCL_MIN_CTAS and NCCL_MAX_CTAS;
//   - an NVLS chunk of at most 128 KiB (NCCL_NVLS_CHUNKSIZE from 2.21;
//     256 KiB from that 2.30 tuning on some fabrics);
//   - NVLSTree from a Simple step before 2.21 and from NVLS's chunk
//     after, at most 64 KiB on 4 nodes or more from 2.19, or what
//     NCCL_NVLSTREE_MAX_CHUNKSIZE (2.20 on) or the 2.30 tuning says.
func nvlsSetupOf(s System, o Options) nvlsSetup {
	v, blackwell := o.Release(), s.Arch.SM() >= 100
	n := nvlsSetup{channels: 16, chunk: 128 << 10, treeChunk: int64(o.simpleStep())}
	switch {
	case blackwell && v >= V2_27 && s.Nodes == 1:
		n.channels = 24
	case blackwell && v >= v2_25:
		n.channels = 32
	}
	var treeMax int64
	if v >= V2_30 && blackwell && s.Nodes > 1 {
		n.channels, n.chunk, treeMax = nvlsBlackwellNodes(s, n.channels)
	}
	if o.NVLSChannels > 0 {
		n.channels = o.NVLSChannels
	}
	n.channels = clampCTAs(n.channels, o)
	if v >= V2_21 {
		if o.NVLSChunk > 0 {
			n.chunk = o.NVLSChunk
		}
		n.treeChunk = n.chunk
	}
	switch {
	case v >= v2_20 && o.NVLSTreeMaxChunk > 0:
		treeMax = o.NVLSTreeMaxChunk
	case treeMax == 0 && v >= v2_19 && s.Nodes >= 4:
		treeMax = 64 << 10
	}
	if treeMax > 0 {
		n.treeChunk = min(n.treeChunk, treeMax)
	}
	return n
}

// nvlsBlackwellNodes is 2.30's NVLS tuning for several Blackwell nodes
// (ncclNvlsTreeSm100Tuning), from the slowest path from a GPU to its
// NICs (comm->minNetBw): the channels, the NVLS chunk and the most an
// NVLSTree chunk may be (0: NCCL's default). NCCL reads whether the path
// to the NIC stays under a PCIe switch; commsim takes it to where every
// GPU has a NIC of its own on an x86 host, as on DGX and HGX boards
// (Grace hosts reach theirs through the CPU).
func nvlsBlackwellNodes(s System, channels int) (int, int64, int64) {
	nicBW := s.nicPathBW()
	underSwitch := s.NICs >= s.PerNode && s.CPU != topology.ARMCPU
	chunk, treeMax := int64(128<<10), int64(0)
	switch {
	case s.Nodes == 2 && nicBW >= 48:
		channels, treeMax = 32, 128<<10
		switch {
		case s.PerNode <= 4:
			chunk, treeMax = 256<<10, 256<<10
		case s.PerNode >= 16 || s.PerNode <= 8 && underSwitch && nicBW < 96:
			treeMax = 64 << 10
		}
	case nicBW >= 96 && s.PerNode <= 8:
		channels, chunk, treeMax = 24, 256<<10, 256<<10
	case nicBW >= 96:
		channels, treeMax = 32, 128<<10
		if s.PerNode >= 32 {
			treeMax = 64 << 10
		}
	case nicBW >= 48:
		channels, treeMax = 24, 128<<10
		if underSwitch {
			treeMax = 64 << 10
		}
	}
	return channels, chunk, treeMax
}

// nvlsChunk is the bytes of each rank's part of an NVLS or NVLSTree pass
// (enqueue.cc, calcCollChunking). NVLS: a Simple step, at most the
// setup's chunk (32 KiB across nodes where NCCL's model gives NVLS under
// 150 GB/s, from 2.20), then 64, 32 and 16 KiB while bytes < 64×, 8×
// and 2× channels × heads × chunk. NVLSTree: the setup's, then 256, 128,
// 64 and 32 KiB while bytes < 32×, 16×, 4× and 1× that.
func nvlsChunk(s System, a Algo, channels int, bytes int64, o Options) int64 {
	n := nvlsSetupOf(s, o)
	type jump struct{ times, to int64 }
	ladder := []jump{{64, 64 << 10}, {8, 32 << 10}, {2, 16 << 10}}
	chunk := min(int64(o.simpleStep()), n.chunk)
	if a == NVLSTree {
		ladder, chunk = []jump{{32, 256 << 10}, {16, 128 << 10}, {4, 64 << 10}, {1, 32 << 10}}, n.treeChunk
	} else if s.Nodes > 1 && o.Release() >= v2_20 && busBandwidth(s, ops.AllReduce, NVLS, simple, bandwidths(s, NVLS), o.Release())*busToAlg(s, ops.AllReduce, NVLS, o.Release()) < 150 {
		chunk = min(chunk, 32<<10)
	}
	// NCCL's NVLS heads (connect.cc, connectNvls): its search's
	// channels, each led by a GPU of its own.
	heads := int64(max(1, channels) * max(1, nvlsGraph(s).channels))
	for _, r := range ladder {
		if bytes < r.times*heads*chunk && chunk > r.to {
			chunk = r.to
		}
	}
	return chunk
}

// switchChunk is the chunk of a plan with switch steps: ladder (NCCL's),
// grown so that a channel makes at most passCap passes and, the plan
// being held in memory (its lanes wait for each other), its ranks' steps
// stay under steps at scale (heldPasses). A channel's pass moves parts
// chunks of NCCL's bytes (a node's parts for an all-reduce, every rank's
// block for a reduce-scatter or an all-gather), in perPass steps of a
// rank.
func switchChunk(s System, channels int, bytes, ladder int64, parts, perPass int, passCap, steps int64) int64 {
	per := int64(max(1, channels) * parts)
	maxPasses := min(passCap, heldPasses(steps, s.Ranks, channels, max(perPass, nvlsStepsPerPass)))
	return max(ladder, (bytes+per*maxPasses-1)/(per*maxPasses))
}

// switchMaxPasses bounds the passes of an NVLS channel on one node or
// over CollNet, and of a CollNet channel: past it a channel's parts grow
// with the size rather than their count, where NCCL's fixed chunk makes
// more and shorter passes, each a few simulated steps on every rank. 128
// keeps large sizes fast to simulate (a 16 GiB NVLS all-reduce on one
// node makes 128 passes, not NCCL's 683). Each pass also waits for its
// reduction to land before the next (the multicast's lane waits on it),
// so fewer passes make that all-reduce 6% shorter: closer to the
// published 8-GPU B200 and H100 runs (+1.9% and +0.6% at 16 GiB, +7.9%
// and +5.0% with NCCL's passes).
//
// NVLSTree keeps NCCL's passes (ops.MaxPlanSteps alone bounds them): its
// parts fill a tree across nodes, and parts grown past NCCL's chunk fill
// it later at every level. On four nodes and more, where NCCL bounds that
// chunk to 64 KiB (NCCL_NVLSTREE_MAX_CHUNKSIZE), capped passes made the
// bus bandwidth fall as the size grew (348, 338, 324 GB/s at 2, 4, 8 GiB
// on dgx-h100x4).
const switchMaxPasses = 128

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
	passCap := int64(switchMaxPasses)
	if c.Algo == NVLSTree {
		passCap = math.MaxInt64
	}
	ladder, size := nvlsChunk(s, c.Algo, spec.Channels, bytesOf(spec), o), int64(spec.DType.Size())
	held := switchChunk(s, spec.Channels, bytesOf(spec), ladder, parts, perPass, passCap, ops.MaxPlanSteps/2)
	chunk := held
	if c.Algo == NVLSTree {
		// Its plan of every rank is made only to be checked and folded
		// (a rotation of each node's GPUs keeps a few ranks, which are
		// made again at held: ops.Plan.FoldRanks and Refine), as a
		// tree's is (heldChunk).
		chunk = switchChunk(s, spec.Channels, bytesOf(spec), ladder, parts, perPass, passCap, wholePlanSteps)
	}
	spec.Chunk = int(max(1, chunk/size))
	plan, err := ops.Compile(spec)
	if err != nil {
		return nil, err
	}
	if fine := int(max(1, held/size)); fine < spec.Chunk {
		plan.FineChunk = fine
	}
	v, m := o.Release(), o.Machine
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

// nvlsGraph is NCCL's NVLS search (search.cc, ncclTopoSearchTryNvls and
// ncclTopoCompute), which its model prices NVLS and NVLSTree by; the
// channels NVLS launches are nvlsSetup's. A channel is a head GPU that
// pulls from the NVSwitch twice its speed, every other GPU of the node
// once, so a head's NVLinks carry channels + 1 speeds. On one node every
// GPU is a head (up to 32); across nodes each head has a NIC of its
// own, whose path from the GPU carries the speed, and the search keeps,
// from the first ladder speed down to half of the best, the speed with
// the most channels. Its second pass raises bwInter up the ladder while
// it is under twice bwIntra and the NICs carry it. On 8 H100s: 8
// channels of 40 GB/s, bwInter 60.
func nvlsGraph(s System) graph {
	g := graph{nvlsEfficiency: nvlsEfficiency(s.Arch)}
	ladder, heads := speedLadder(s.Arch), min(maxNVLSArity, s.PerNode)
	carries := func(float64) bool { return true }
	if s.Nodes > 1 {
		ladder = interLadder(s.Arch)
		heads = min(heads, s.netHeads())
		path := s.nicPathBW()
		carries = func(sp float64) bool { return sp <= path }
	}
	fit := func(sp float64) int { return min(heads, int(s.IntraBW/sp+1e-9)-1) }
	best := -1
	for i, sp := range ladder {
		if best >= 0 && sp/ladder[best] <= 0.49 {
			break
		}
		// One node's search must pull from every GPU alike.
		if !carries(sp) || s.Nodes == 1 && fit(sp) < heads {
			continue
		}
		if best < 0 || fit(sp) > fit(ladder[best]) {
			best = i
		}
	}
	if best < 0 || fit(ladder[best]) < 1 {
		return g
	}
	g.channels, g.intra, g.inter = fit(ladder[best]), ladder[best], ladder[best]
	for i := best; i > 0 && g.inter < 2*g.intra && carries(ladder[i-1]); i-- {
		g.inter = ladder[i-1]
	}
	return g
}
