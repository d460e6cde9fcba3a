package nccl

// NCCL's model of one algorithm and protocol, as tuning.cc computes it:
// the search's graph, the per-hop and base latencies, the bus bandwidth
// and its caps, and the channels a size keeps. tune.go prices and
// chooses with these.

import (
	"cmp"
	"math/bits"

	"github.com/commsim/commsim/ops"
)

// graph is what NCCL's search found for an algorithm: its channels and
// per-channel bandwidth inside a node and across nodes, in GB/s.
type graph struct {
	channels       int
	intra, inter   float64
	nvlsEfficiency float64
}

// bandwidths approximates NCCL's graph for algorithm a: its channels
// and their speed as the search finds them, before connect.cc doubles the
// channels the collectives run on and NCCL_MIN/MAX_NCHANNELS clamp them
// (collChannels). NCCL's model and its per-channel caps count the
// graph's channels, whatever the environment.
func bandwidths(s System, a Algo) graph {
	switch a {
	case NVLS, NVLSTree:
		return nvlsGraph(s)
	case PAT, CollNetChain, CollNetDirect:
		// NCCL prices PAT with the tree's graph: init.cc hands the tuner
		// treeGraph as PAT's (graphs[], in NCCL's algorithm order).
		// CollNet chain's is a tree's search through the NICs that
		// reduce, on the ring's channels, as the tree's is (init.cc:
		// pattern TREE, collNet, the ring's channels at least and at
		// most; commsim's SHARP switch takes every NIC), and before 2.22
		// it served direct too (graphOf has direct's own from 2.22).
		a = Tree
	}
	var g graph
	g.channels, g.intra = searchChannels(s.Arch, s.IntraBW)
	ringLike := a == Ring || a == Tree
	if ringLike && s.Nodes > 1 {
		g.channels, g.intra = netSearchChannels(s)
	}
	g.inter = g.intra
	if s.Nodes > 1 {
		// Channels share the NICs, and a ring or a tree moves at the pace
		// of its slowest link: what NCCL's search finds with the network
		// in the graph.
		g.inter = min(g.intra, s.NICBW*float64(s.NICs)/float64(g.channels))
		if ringLike {
			g.intra = g.inter
		}
		if a == Tree {
			// The search's second pass raises a tree's speed within a
			// node, up the ladder, while it is below twice the network's
			// and the node's NVLinks carry every channel at it
			// (search.cc: "increase bwIntra for trees (2 nodes or
			// collnet)"). The model reads it on 2 nodes.
			ladder := interLadder(s.Arch)
			net := atMost(ladder, g.inter) // the network's speed on the ladder
			for i := len(ladder) - 1; i >= 0 && g.intra < 2*net; i-- {
				if sp := ladder[i]; sp > g.intra {
					if sp*float64(g.channels) > s.IntraBW {
						break
					}
					g.intra = sp
				}
			}
		}
	}
	return g
}

// graphOf is NCCL's graph for algorithm a in release v: bandwidths',
// but CollNet direct's own search from 2.22 (init.cc's
// collNetDirectGraph).
func graphOf(s System, a Algo, v Version) graph {
	if a == CollNetDirect && v >= v2_22 {
		return collNetDirectGraph(s)
	}
	return bandwidths(s, a)
}

// intraLatency is NCCL's per-hop latency of algorithm a with protocol p
// within a node, in µs: over NVLink, or PCIe where a node has none.
func intraLatency(s System, a Algo, p int, v Version) float64 {
	if s.NVLinks == 0 {
		return hwLatency(ops.PathPCI, a, p, v)
	}
	return hwLatency(ops.PathNVLink, a, p, v)
}

// interLatency is NCCL's per-hop latency of algorithm a with protocol p
// across nodes, in µs; with one GPU per node, from 2.23, the tree's
// ("with ppn=1 latencies are fully exposed, use the Tree network
// latency", tuning.cc).
func interLatency(s System, a Algo, p int, v Version) float64 {
	if s.PerNode == 1 && v >= V2_23 {
		a = Tree
	}
	return hwLatency(ops.PathNet, a, p, v)
}

// ringStepFloor is the least a step within a node takes on a ring that
// crosses nodes, in µs: "inter-node rings still have to launch nsteps *
// net overhead" (tuning.cc), the host's network overhead, three times it
// with Simple. Trees, and rings that broadcast or reduce, have none.
func ringStepFloor(s System, op ops.Op, a Algo, p int) float64 {
	if s.Nodes == 1 || a != Ring || op == ops.Broadcast || op == ops.Reduce {
		return 0
	}
	over := netOverhead(s.CPU)
	if p == simple {
		over *= 3
	}
	return over
}

// latency is the fixed part of the time, in µs (tuning.cc:289-435).
func latency(s System, op ops.Op, bytes int64, a Algo, p int, v Version, channels int) float64 {
	intra, inter := intraLatency(s, a, p, v), interLatency(s, a, p, v)
	intra = max(intra, ringStepFloor(s, op, a, p))
	base := baseLatency(a, p, v)
	nodes, ppn := float64(s.Nodes), float64(s.PerNode)
	// NCCL's log2i: the floor of the logarithm, so 3 nodes count 1.
	lg := float64(bits.Len(uint(max(1, s.Nodes))) - 1)
	var lat float64
	switch a {
	case Ring:
		if op == ops.Broadcast || op == ops.Reduce {
			// One hop, as NCCL counts a ring that broadcasts or reduces
			// when its channels all keep one pattern (sameChannels); a
			// hop a rank where they do not, Simple's at the tree's figure
			// ("some chunk latency, waiting for proper chunk modeling").
			if s.sameChannels() {
				hop := intra
				if s.Nodes > 1 {
					hop = hwLatency(ops.PathNet, a, p, v)
				}
				lat = base + hop
				break
			}
			hop := hwLatency(ops.PathNet, a, p, v)
			if p == simple {
				hop = hwLatency(ops.PathNet, Tree, p, v)
			}
			lat = base + float64(ringSteps(op, s.Ranks))*hop
			break
		}
		steps, crossings := ringSteps(op, s.Ranks), 0
		switch {
		case s.Nodes == 1:
		case op == ops.AllReduce && v < V2_23:
			// Up to 2.22 NCCL counts an all-reduce's ring 2·nNodes
			// network steps, where it crosses 2(nNodes-1) times.
			crossings = 2 * s.Nodes
		case op == ops.AllReduce:
			crossings = 2 * (s.Nodes - 1)
		default:
			crossings = s.Nodes - 1
		}
		lat = base + float64(steps-crossings)*intra + float64(crossings)*inter
		lat *= ringPlateau(s, op, p, bytes, channels)
	case Tree:
		lat = base + 2*((ppn-1)*intra+lg*inter)
	case CollNetDirect:
		lat = base + 2*(min(1, ppn-1)*intra+(ppn-1)*0.4) + inter
	case CollNetChain:
		lat = base + 2*(ppn-1)*intra + inter
	case NVLS:
		// From 2.19 NVLS's base is 0 and its NVLink hop the whole; 2.18
		// the reverse.
		lat = base + intra
		if s.Nodes > 1 {
			lat += inter
		}
	case NVLSTree:
		lat = base + intra + 2*lg*inter
		if v < v2_19 {
			lat = base + 2*(nodes-1)*inter
		}
	case PAT:
		lat = base + lg*inter/3.5 + float64(s.Ranks)*2.8
	}
	return lat
}

// ringPlateau is the factor NCCL's model puts on a multi-node
// Ring/Simple all-reduce's latency from 64 bytes per rank on each of the
// communicator's channels (tuning.cc counts comm->nChannels, not the
// channels a collective launches), 1 for any other ring.
func ringPlateau(s System, op ops.Op, p int, bytes int64, channels int) float64 {
	if s.Nodes == 1 || op != ops.AllReduce || p != simple || float64(bytes)/float64(channels*s.Ranks) < 64 {
		return 1
	}
	if s.Arch.SM() >= 80 {
		return 1.4
	}
	return 1.9
}

// ringSteps is how many steps a ring takes for op (tuning.cc:289-291).
func ringSteps(op ops.Op, ranks int) int {
	switch op {
	case ops.AllReduce:
		return 2 * (ranks - 1)
	case ops.AllGather, ops.ReduceScatter:
		return ranks - 1
	}
	return ranks
}

// busBandwidth is the bus bandwidth in GB/s (tuning.cc:263-383).
func busBandwidth(s System, op ops.Op, a Algo, p int, g graph, v Version) float64 {
	ch := float64(g.channels)
	bw := g.intra
	if s.Nodes > 2 && a != CollNetDirect && a != CollNetChain {
		bw = g.inter
	}
	bus := ch * bw
	row, col, caps := archRow(s.Arch), nodesColumn(s.Nodes), capsOf(v)
	switch a {
	case Ring:
		switch p {
		case ll:
			bus = min(llMaxBw(s, v), llFactor(s, op, v)*bus)
		case ll128:
			bus = min(ll128Factor(s, v)*bus, ch*caps.ringLL128[row][col])
		}
	case Tree:
		if op == ops.AllReduce {
			bus = min(0.92*bus, ch*caps.tree[row][col])
		}
		switch p {
		case ll:
			bus = min(bus/3.8, llMaxBw(s, v))
		case ll128:
			f := 120.0 / 128
			if s.Nodes == 1 {
				f = 7.0 / 9
			}
			bus = min(bus*f, ch*caps.treeLL128[row][col])
		}
		if s.PerNode == 1 && v >= v2_19 {
			// One GPU a node makes the search's tree a plain tree
			// (search.cc), which NCCL's model slows.
			bus *= 0.85
		}
	case PAT:
		if v < v2_24 {
			bus *= 0.85
		} else {
			bus *= 0.75
		}
	case CollNetDirect, CollNetChain:
		switch {
		case op == ops.AllGather || op == ops.ReduceScatter:
			bus = float64(s.PerNode) * min(g.intra, 0.9*g.inter)
		case a == CollNetDirect:
			// "Collnet+Direct requires all GPUs to have a local NIC to
			// work at full speed": the node's GPUs over the graph's
			// channels, half of that ratio's excess over 1.
			perHead := float64(s.PerNode) / ch
			bus /= perHead - (perHead-1)/2
			if s.Arch.SM() >= 90 {
				bus *= 0.85
			}
		}
	case NVLS, NVLSTree:
		bus = ch * nvlsChannelBW(s, op, a, g, v, caps.nvlsTree[row][col])
	}
	return bus
}

// nvlsChannelBW is what NCCL's model gives each channel of its NVLS
// search, by release: from 2.28 the NVSwitch's efficiency, all-reduce's
// two pipelined passes and the head's own share, under bwInter (twice it
// for NVLSTree on two nodes) and NVLSTree's cap; before, the lesser of
// bwIntra and bwInter (half bwInter for NVLSTree past two nodes, and
// from 2.27 NVLS's all-gather and reduce-scatter at (ppn-1)/ppn of
// bwIntra and 0.9 of bwInter).
func nvlsChannelBW(s System, op ops.Op, a Algo, g graph, v Version, treeCap float64) float64 {
	ch, ppn := float64(g.channels), float64(s.PerNode)
	allReduce := op == ops.AllReduce
	if v < V2_28 {
		switch {
		case a == NVLSTree && s.Nodes > 2:
			return min(g.intra, g.inter/2)
		case a == NVLS && !allReduce && v >= V2_27:
			return min(g.intra*(ppn-1)/ppn, 0.9*g.inter)
		}
		return min(g.intra, g.inter)
	}
	intra := g.intra * g.nvlsEfficiency * (ch - 1) / ch
	if allReduce {
		intra *= 2
	} else {
		intra *= (ppn - 1) / ppn
	}
	inter := g.inter
	if a == NVLSTree && s.Nodes <= 2 {
		inter *= 2
	}
	if a == NVLSTree {
		return min(intra, inter, treeCap)
	}
	return min(intra, inter)
}

// llFactor is Ring LL's share of the bus bandwidth: 0.5 (LL moves 8 data
// bytes per 16-byte line); 2.18 used 1/4 across nodes for all-reduce and
// reduce, 1/3 otherwise.
func llFactor(s System, op ops.Op, v Version) float64 {
	if v < V2_21 {
		if s.Nodes > 1 && (op == ops.AllReduce || op == ops.Reduce) {
			return 1.0 / 4
		}
		return 1.0 / 3
	}
	return 0.5
}

// ll128Factor is Ring LL128's share: 0.92 (120 of 128 bytes), 0.7 before
// 2.23 with one GPU per node.
func ll128Factor(s System, v Version) float64 {
	if v < V2_23 && s.PerNode < 2 {
		return 0.7
	}
	return 0.92
}

// busToAlg turns bus bandwidth into the bandwidth the time divides by.
func busToAlg(s System, op ops.Op, a Algo, v Version) float64 {
	switch a {
	case NVLS, NVLSTree:
		switch {
		case (op == ops.AllGather || op == ops.ReduceScatter) && v >= V2_23:
			// From 2.23 NCCL converts only rings' all-gather and
			// reduce-scatter.
			return 1
		case v >= V2_28:
			return float64(s.Ranks) / float64(ringSteps(op, s.Ranks))
		case v >= v2_19 || a == NVLS:
			return 5.0 / 6
		}
		// 2.18.3, the 2.18 whose constants the model has (2.18.1's NVLS
		// took 0.75).
		return 0.7 * float64(s.Nodes) / float64(2*(s.Nodes-1))
	case Ring:
		return float64(s.Ranks) / float64(ringSteps(op, s.Ranks))
	case Tree, CollNetDirect, CollNetChain:
		if op == ops.AllReduce {
			return 0.5
		}
	}
	return 1
}

// baseLatency is the base latency of a with protocol p in version v.
func baseLatency(a Algo, p int, v Version) float64 {
	if a == Tree && p == simple && v < V2_23 {
		return 0
	}
	if (a == NVLS || a == NVLSTree) && v < v2_19 {
		return 23
	}
	return baseLat[a][p]
}

// hwLatency is the per-hop latency of a with protocol p on a path class.
func hwLatency(class int, a Algo, p int, v Version) float64 {
	switch {
	case a == Tree && p == simple && v >= v2_19 && v < V2_23:
		return 28
	case a == Tree && p == simple && v < v2_19:
		return [...]float64{4, 6, 14}[class] // 2.18.3's (2.18.1 had 28)
	case (a == NVLS || a == NVLSTree) && class == ops.PathNVLink && v < v2_19:
		return 0 // 2.18 has its 23 µs in the base latency
	case (a == NVLS || a == NVLSTree) && class == ops.PathNVLink && v < V2_21:
		return 23
	case a == NVLSTree && class == ops.PathNet && v < v2_19:
		return 19
	case a == NVLSTree && class == ops.PathNet && v < V2_28:
		return 14
	}
	return hwLat[class][a][p]
}

// threadChannels is how many channels NCCL launches for bytes
// (enqueue.cc:2070-2094, comm.h:49-51, tuning.cc:244-257): CollNet
// direct drops channels while bytes < channels × threads × heads ×
// threshold, halving the threshold at 24, 12, 6 and 3 channels and
// stopping at 16, 8, 4, 2 and 1 once the test fails; NVLS keeps its own;
// the others drop them while each thread would have under its
// threshold of bytes. PAT has no thread count and keeps them all.
func threadChannels(s System, bytes int64, channels int, a Algo, p int, o Options) int {
	threads, threshold := cmp.Or(o.Threads, 512), int64(64)
	switch {
	case a == NVLS || a == NVLSTree || a == PAT:
		return channels
	case a == CollNetDirect || a == CollNetChain:
		threads, threshold = ncclMaxThreads, 512
	case p == ll:
		threshold = 8
		if a == Ring {
			threshold *= int64(s.Ranks)
		}
	case p == ll128:
		threads, threshold = cmp.Or(o.LL128Threads, 640), 8
	case a == Ring && o.Threads == 0:
		// A ring's Simple blocks have half the threads where the ring
		// search found no more than PCIe's 12 GB/s in all (tuning.cc).
		if ring := bandwidths(s, Ring); ring.intra*float64(ring.channels) <= pciBW {
			threads = 256
		}
	}
	if a == CollNetDirect {
		heads := int64(directHeads(s, o.Release()))
		need := func() int64 { return int64(channels) * int64(threads) * heads * threshold }
		for sw := 16; sw >= 1; sw /= 2 {
			for bytes < need() && channels > sw {
				if channels == sw+sw/2 {
					threshold /= 2
				}
				channels--
			}
			if bytes >= need() {
				break
			}
		}
		return channels
	}
	for channels > 1 && bytes < int64(channels)*int64(threads)*threshold {
		channels--
	}
	return channels
}

// ncclMaxThreads is the threads of NVLS's, CollNet's, trees' and PAT's
// blocks (NCCL_MAX_NTHREADS).
const ncclMaxThreads = 640
