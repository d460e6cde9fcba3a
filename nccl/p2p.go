package nccl

import (
	"cmp"
	"math"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// P2P is NCCL's point-to-point transport, which all-to-all and sendrecv
// (grouped ncclSend/ncclRecv) run on: no tuner picks it, and its time is
// not in NCCL's model; Estimates never lists it.
const P2P Algo = numAlgos

// NCCL's point-to-point channels, as init sets them up and enqueue.cc's
// addP2pToPlan splits each send and receive over them:
//   - the communicator has twice the ring search's channels (connect.cc
//     duplicates them after the search), the p2p channels are that
//     count rounded up to a power of two, and each channel carries an
//     equal share of the ring's bandwidth;
//   - a peer gets at most as many channels as its path allows, the
//     least over all peers, rounded up to a power of two (paths.cc,
//     ncclTopoGetNchannels): two per NVLink to an NVLink peer, two over
//     PCIe, and across the network NCCL_NCHANNELS_PER_NET_PEER where it
//     is set; else, up to 2.28, two (halved while twice the ranks exceed
//     four times the p2p channels) but at least one a local NIC, and
//     from 2.29 one a local NIC but at least what drives their bandwidth
//     at NCCL_P2P_PER_CHANNEL_NET_BW (14 GB/s) a channel, halved while
//     that many for each batch of 8 peers exceeds the p2p channels;
//   - an operation starts on that many channels, halved while they times
//     the ranks exceed the p2p channels, no more than it has pieces of
//     the smallest part, and doubles its channels while a part is larger
//     than the largest (part sizes from the p2p chunk: on one node 1/8 and
//     32 chunks, across nodes 1/2 and 1 chunk);
//   - it moves with LL while it carries at most 16 KiB per channel
//     (NCCL_P2P_LL_THRESHOLD; 0 never), else with Simple. NCCL 2.23 to 2.28
//     choose the protocol first, LL while the operation carries at most
//     16 KiB for each channel a peer may get, and split an LL operation
//     by LL's step (64 KiB of lines, so 8 KiB pieces on one node): LL
//     on 4 channels up to 512 KiB a peer on 8 B200s, where 2.29 on (and
//     2.22 and before) move anything over 16 KiB with Simple.
//
// Approximated: NCCL gives a network peer's p2p connection no LL buffers
// (net.cc, unless NCCL_ALLOC_P2P_NET_LL_BUFFERS=1), so it moves with
// Simple whatever the size; here it moves as a local peer's does. NCCL's
// model has no p2p figures, and its ring's Simple hop across the network
// (14 µs) overshoots a lone message by more than LL's undershoots it.
const (
	p2pNetPeerChannels = 2
	p2pPerChannelNetBW = 14 // GB/s, NCCL_P2P_PER_CHANNEL_NET_BW's default
	p2pPeersPerBatch   = 8  // NCCL_MAX_DEV_WORK_P2P_PER_BATCH
	p2pLLThreshold     = 16 << 10
	maxChannels        = 64
)

// p2pChannels are the communicator's p2p channels, the most channels a
// peer gets, and each channel's share of the bandwidth in GB/s.
func p2pChannels(s System, o Options) (total, perPeer int, bw float64) {
	g := bandwidths(s, Ring)
	coll := collChannels(s, o)
	// NCCL's p2pnChannels within NCCL_MIN_P2P_NCHANNELS and
	// NCCL_MAX_P2P_NCHANNELS, before its power of two: what a network
	// peer's channels are counted against (paths.cc,
	// ncclTopoComputeP2pChannels).
	bounded := coll
	if o.MaxP2PChannels > 0 {
		bounded = min(bounded, o.MaxP2PChannels)
	}
	bounded = max(bounded, o.MinP2PChannels)
	total = min(maxChannels, pow2Up(bounded))
	least := maxChannels // the least a peer allows
	if s.PerNode > 1 {
		least = 2 // over PCIe
		if s.NVLinks > 0 {
			least = 2 * s.NVLinks
		}
	}
	if s.Nodes > 1 {
		least = min(least, netPeerChannels(s, o, bounded))
	}
	perPeer = pow2Up(least)
	if s.Nodes > 1 && o.NetPeerChannels == 0 && o.Release() > V2_28 {
		for perPeer*ceilDiv(s.Ranks, p2pPeersPerBatch) > total && perPeer > 1 {
			perPeer /= 2
		}
	}
	return total, min(total, perPeer), g.intra * min(1, float64(g.channels)/float64(coll))
}

// p2pNetChannelGBps is NCCL_P2P_PER_CHANNEL_NET_BW: what a network
// peer's p2p channel is sized by, and moves at most.
func (o Options) p2pNetChannelGBps() int { return cmp.Or(o.P2PNetChannelGBps, p2pPerChannelNetBW) }

// netPeerChannels is how many channels NCCL gives a peer across the
// network, on a communicator of p2pn point-to-point channels (NCCL's
// p2pnChannels, before its power of two).
func netPeerChannels(s System, o Options, p2pn int) int {
	if o.NetPeerChannels > 0 {
		return o.NetPeerChannels
	}
	// A GPU's local NICs (ncclTopoGetLocalNetCountByBw: its own, up to
	// the bandwidth of its PCIe link), each at what the path to it
	// carries.
	local, path := max(1, s.NICs/max(1, s.PerNode)), s.nicPathBW()
	if s.PCIeBW > 0 {
		local = min(local, max(1, int(math.Ceil(s.PCIeBW/path-1e-9))))
	}
	if o.Release() > V2_28 {
		return max(local, ceilDiv(int(float64(local)*path), o.p2pNetChannelGBps()))
	}
	n := p2pNetPeerChannels
	for n*s.Ranks > 4*p2pn && n > 1 {
		n /= 2
	}
	return max(local, n)
}

// ringWhole is, in GB/s, what NCCL's model gives all of a ring's
// channels together: what a rank's point-to-point exchanges, all at once,
// move at most. The p2p channels are the ring's rounded up to a power of
// two (32 of 24 on 8 H100s), each at a ring channel's share: the extra
// ones are more blocks of threads, not more NVLink or network.
func ringWhole(s System) float64 {
	g := bandwidths(s, Ring)
	return g.intra * float64(g.channels)
}

// ceilDiv is a/b rounded up, for a >= 0 and b > 0, without the overflow
// of (a+b-1)/b near the largest int64.
func ceilDiv[T int | int64](a, b T) T {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// p2pChunk is NCCL's p2p chunk (init.cc, computeBuffSizes): across nodes
// 128 KiB (NCCL_P2P_NET_CHUNKSIZE; twice it on Arm hosts with Blackwell
// GPUs, whose trays hold 4 GPUs), on one node joined by NVLink 512 KiB
// (NCCL_P2P_NVL_CHUNKSIZE), else 128 KiB (NCCL_P2P_PCI_CHUNKSIZE); never
// more than a Simple step, so that NCCL_STEPS chunks fit the buffer.
func p2pChunk(s System, o Options) int64 {
	var chunk int64
	switch {
	case s.Nodes > 1:
		chunk = cmp.Or(o.P2PNetChunk, 128<<10)
		if s.CPU == topology.ARMCPU && s.Arch.SM() >= 100 {
			chunk *= 2
		}
	case s.NVLinks > 0:
		chunk = cmp.Or(o.P2PNVLChunk, 512<<10)
	default:
		chunk = cmp.Or(o.P2PPCIChunk, 128<<10)
	}
	return min(chunk, int64(o.simpleStep()))
}

// p2pSplit is how NCCL moves one send (or receive) of bytes: on how many
// channels, and whether with LL.
func p2pSplit(s System, bytes int64, o Options) (channels int, ll bool) {
	v := o.Release()
	total, perPeer, _ := p2pChannels(s, o)
	least := perPeer
	for least*s.Ranks > total && least > 1 {
		least /= 2
	}
	if bytes <= 0 {
		return 1, true
	}
	step := p2pChunk(s, o)
	threshold := cmp.Or(o.P2PLLThreshold, p2pLLThreshold)
	if o.NoP2PLL {
		threshold = 0
	}
	llFirst := v >= V2_23 && v <= V2_28
	if llFirst {
		ll = bytes <= int64(perPeer)*threshold
		if ll {
			step = 2 * llChunk // an LL step's lines: its payload and flags
		}
	}
	minPart, maxPart := step/8, step*32
	if s.Nodes > 1 {
		minPart, maxPart = step/2, step
	}
	n := int(min(int64(least), ceilDiv(bytes, minPart)))
	part := max(minPart, ceilDiv(bytes, int64(n)))
	for part > maxPart && n <= perPeer/2 {
		n *= 2
		part = ceilDiv(bytes, int64(n))
	}
	if !llFirst {
		ll = bytes <= int64(n)*threshold
	}
	return n, ll
}

// pow2Up is the least power of two at least n (1 for n < 1).
func pow2Up(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// p2pChoice is how NCCL moves op's point-to-point messages of bytes per
// peer with options o (p2pSplit). Its time is what the simulation says;
// NCCL's model has none.
func p2pChoice(s System, bytesPerPeer int64, o Options) Choice {
	n, ll := p2pSplit(s, bytesPerPeer, o)
	e := Estimate{Algo: P2P, Protocol: ops.ProtoSimple, Channels: n}
	if ll {
		e.Protocol = ops.ProtoLL
	}
	return Choice{Estimate: e, NCCL: e}
}

// p2pPlan compiles an all-to-all or a sendrecv as NCCL runs it: every
// exchange at once, each at the speed of its channels' share of NCCL's
// ring bandwidth, or the machine's channel rate (Machine.ChannelGBps)
// where it has one (for LL, LL's share of it, as a ring's, of which a
// transfer's threads drive 9/16: p2pLLThreadShare), the exchanges
// of an all-to-all sharing the communicator's p2p channels when they
// need more than it has, all of a rank's together moving at most
// the ring's whole bandwidth (ringWhole), each channel on several nodes
// at most NCCL_P2P_PER_CHANNEL_NET_BW; with the per-hop latency and
// base latency of the protocol in NCCL's ring model (NCCL's model has no
// point-to-point figures; these are the nearest it has), an NVLink hop
// taking its arch's extra as a ring's does.
func p2pPlan(s System, spec ops.Spec, c Choice, o Options) (*ops.Plan, error) {
	spec.Algo, spec.Channels = "nccl-p2p", c.Channels
	plan, err := ops.Compile(spec)
	if err != nil {
		return nil, err
	}
	p, _ := protoIndex(c.Protocol)
	v := o.Release()
	var w ops.Wire
	for class := range ops.NumPathClasses {
		w.Latency[class] = hwLatency(class, Ring, p, v) * 1e-6
		w.Efficiency[class] = 1
	}
	if p == ll {
		for class := range ops.NumPathClasses {
			w.Efficiency[class] = 0.5
		}
	}
	m := o.Machine
	machineHops(&w, s, m)
	total, _, perChannel := p2pChannels(s, o)
	if gbps := m.channelGBps(s); gbps > 0 {
		// The ring channel's share stands in for what a p2p channel
		// moves, which NCCL's model does not say; the machine's channel
		// rate says it, where it has one. ringWhole still bounds all of
		// a rank's channels together.
		perChannel = gbps
	}
	// Across the network an exchange moves at most what NCCL sizes a
	// network peer's channels by (paths.cc: as many as carry the NICs at
	// NCCL_P2P_PER_CHANNEL_NET_BW each) on each channel. The plan has one
	// rate for all its exchanges, the slowest's, which sets the time.
	net := float64(o.p2pNetChannelGBps())
	peers, channels, rate := 1, float64(c.Channels), float64(c.Channels)*perChannel
	if s.Nodes > 1 {
		rate = channels * min(perChannel, net)
	}
	if spec.Op == ops.AllToAll || spec.Op == ops.Gather {
		// An all-to-all's exchanges, or a gather's at its root, share a
		// rank's channels and bandwidth.
		peers = max(1, spec.Ranks-1)
		rate, channels = p2pPeerGBps(s, o, c.Channels, total, perChannel, net)
	}
	rate = min(rate, ringWhole(s)/float64(peers))
	if p == ll {
		// What NCCL's ring model gives LL, its share of the channels'
		// bandwidth under the LL cap, at the p2p transfer's threads.
		rate = min(llMaxBw(s, v), llFactor(s, spec.Op, v)*rate) * p2pLLThreadShare
	}
	w.Rate = m.channelBound(s, rate*1e9, channels) * orOne(m.Bandwidth[p])
	// A p2p connection's buffer is NCCL_STEPS p2p chunks (LL's lines
	// for LL).
	step := p2pChunk(s, o)
	if p == ll {
		step = llChunk
	}
	plan.Protocol, plan.Wire = c.Protocol, finishWire(&w, step)
	plan.Launch = baseLatency(Ring, p, v)*1e-6*orOne(m.Launch) + p2pGroupUS(s, spec, c.Channels, v)*1e-6
	return plan, nil
}

// p2pGroupUS is what a group of point-to-point exchanges spends, in µs,
// beyond a sendrecv's launch on the busiest GPU: its operations within
// the node past a sendrecv's two (p2pOpsUS), and its proxy's network
// operations past the first (p2pProxyUS). Neither scales with the
// kernel's launch (Tuner.FixedLaunch).
func p2pGroupUS(s System, spec ops.Spec, channels int, v Version) float64 {
	return p2pOpsUS(s, spec, v) + p2pProxyUS(s, spec, channels, v)
}

// localOpUS is what, in µs, each operation of a group's exchanges within
// a node beyond a sendrecv's send and receive adds to it: an operation is
// a send or a receive to a peer on the node, however many channels carry
// it. NCCL's model has no point-to-point figures, and what in NCCL takes
// the time is not known: from 2.27 an all-to-all's operations run on
// distinct channels, each its own block.
//
// From the held-out 8 x H20 all-to-all (fidelity/nccl-logs,
// deepep-h20-alltoall-8xH20.txt; fidelity's TestLocalOpRun reads it): its
// 128 B-4 KiB take 3.27-3.84 µs (median 3.48) more than the model
// without this term, a ring LL launch and one NVLink hop, over 12
// operations past the first two (7 peers, a send and a receive each):
// 0.29 µs an operation. Issue #16's 8 x B200 all-to-all, which it was not
// read from, bears it out: its floor (11.2 µs, the median under 64 KiB)
// within 2%, and under NCCL 2.28's protocols, presumably the run's, every
// row up to 4 MiB within 17%, where exchanges of 16 KiB-512 KiB take LL
// on 2-4 channels a peer (counted once a channel, the term would make
// those 30-80% slow). From 8 MiB its rows and the held-out 8 x H100
// all-to-all's (xxrjun) still take about 20 µs more than the model, which
// this does not explain. A sendrecv's floor stays 1.4 µs under the B200
// log's.
const localOpUS = 0.29

// p2pOpsUS is what the operations of spec's exchanges within a node add,
// in µs, on the busiest GPU (localOpUS): an all-to-all's GPU sends to and
// receives from each other GPU of its node, a gather's root receives from
// them, and a sendrecv has its send and receive (none past the two).
func p2pOpsUS(s System, spec ops.Spec, v Version) float64 {
	if spec.Op != ops.AllToAll && spec.Op != ops.Gather || makesNoOperation(spec, v) {
		return 0
	}
	n := min(s.PerNode, spec.Ranks) - 1
	if spec.Op == ops.AllToAll {
		n *= 2
	}
	return localOpUS * float64(max(0, n-2))
}

// makesNoOperation reports whether release v makes no operation at all
// of spec, an all-to-all or a gather: from 2.28 ncclAlltoAll and
// ncclGather drop a count of 0 before any (enqueue.cc, taskAppend).
func makesNoOperation(spec ops.Spec, v Version) bool { return spec.Count == 0 && v >= V2_28 }

// proxyOpUS is what, in µs, each network operation a GPU's proxy thread
// progresses beyond the first delays a grouped send and receive by. An
// operation is a send or a receive to a peer across the network on one
// of its channels. NCCL's proxy (proxy.cc, net.cc) is one CPU thread a
// GPU that posts every step of every such operation, polls its
// completions and, for a receive, flushes it to the GPU; its operations
// take turns, so the first steps of many start one after another.
// NCCL's model has no point-to-point figures and no proxy.
//
// From the two 2 x 8 B200 runs of one cluster shipped excluded from
// issue #16's targets (fidelity/nccl-logs, vultr-b200-*-16xB200.txt,
// presumed NCCL_NCHANNELS_PER_NET_PEER=1): an all-to-all, whose every
// GPU has 16 network operations (8 peers across the network, a send and
// a receive each, on one channel), takes 37.68 µs at 256 B–16 KiB
// (median), and a sendrecv, whose busiest GPU has 2 (p2pProxyUS), 14.56
// at 8 B–8 KiB: 23.12 µs, of which 3.48 are the all-to-all's 12
// operations within the node past a sendrecv's two (p2pOpsUS), leave
// 19.64 for 14 more network operations (fidelity's TestProxyOpRuns
// reads them). The held-out 10-node H100 all-to-alls
// (xxrjun-h100-alltoall-*, NCCL 2.29.2; 36 to 144 operations a GPU)
// measure 110-280 µs more than the transfer at 32-128 MiB, about 2 µs
// an operation.
const proxyOpUS = 1.40

// p2pProxyUS is what the busiest GPU's proxy adds, in µs, to the
// exchanges of spec across the network on channels channels each
// (proxyOpUS). Ranks are taken node by node. An all-to-all's GPU sends to
// and receives from every rank of the other nodes; a gather's root
// receives from them. With PXN (search.cc, ncclTopoGetNetDev: on by
// default where a node's GPUs share NVLink and reach their NICs through
// PCIe switches) a send goes through the proxy of the local GPU on the
// receiver's rail, which leaves the all-to-all's count as it is (each
// GPU relays as many sends as it makes) and gives a sendrecv's GPU at a
// node's first place both the send it relays for the node's last and its
// own receive; without PXN a sendrecv's GPU at a node's edge has one of
// them, and with one GPU a node (or ranks not node by node) both. An
// all-to-all or gather of nothing may make none (makesNoOperation).
func p2pProxyUS(s System, spec ops.Spec, channels int, v Version) float64 {
	if s.Nodes < 2 {
		return 0
	}
	remote := s.Ranks - s.PerNode
	var netOps int
	switch spec.Op {
	case ops.AllToAll, ops.Gather:
		if makesNoOperation(spec, v) {
			return 0
		}
		netOps = remote * channels
		if spec.Op == ops.AllToAll {
			netOps *= 2
		}
	default:
		netOps = channels
		if pxn := s.NVLinks > 0 && !s.NICsOnCPU; pxn || s.PerNode == 1 || !s.NodeMajor {
			netOps = 2 * channels
		}
	}
	return proxyOpUS * float64(max(0, netOps-1))
}

// p2pLLThreadShare is the part of a channel's LL rate that one p2p
// transfer gets. LL moves as fast as its threads write lines and poll
// their flags, and NCCL's ring LL figure is for a channel whose
// NCCL_LL_MAX_NTHREADS (16 warps) all work one stream. A p2p channel's
// 20 warps (NCCL_MAX_NTHREADS) split between its send and its receive,
// 10 and 9 (sendrecv.h, nSendWarpPerWork and nRecvWarpPerWork), so a
// transfer moves at its receiver's 9 warps of 16. On 8 B200s a 4-channel
// LL send of 128-512 KiB took 20 GB/s in the Vultr sendrecv log (which
// NCCL 2.23-2.28 move with LL, fidelity/nccl-logs/logs.yaml); 9/16 of the
// ring's share gives 25, the ring's share alone 45.
const p2pLLThreadShare = 9.0 / 16

// isP2P reports whether NCCL runs op point to point: all-to-all and
// gather as grouped sends and receives (ncclAlltoAll and ncclGather from
// 2.28 make the same ones, enqueue.cc), sendrecv as such.
func isP2P(op ops.Op) bool { return op == ops.AllToAll || op == ops.Gather || op == ops.SendRecv }

// bytesPerPeer is what a rank sends each peer in spec.
func bytesPerPeer(spec ops.Spec) int64 {
	return int64(spec.Count) * int64(spec.DType.Size())
}

// p2pPeerGBps is what the slowest peer of an all-to-all (or of a gather's
// root) moves at, in GB/s, when each exchange runs on n of the total p2p
// channels, each channel moving perChannel and, across the network, each
// exchange at most netGBps a channel (the model's cap; NCCL only sizes a
// network peer's channels by NCCL_P2P_PER_CHANNEL_NET_BW); and the
// channels' worth it gets.
//
// NCCL's schedule puts each round's exchange (send and receive to one
// peer each, the first round to oneself) on channels counted from a base
// of its own on one node, and on several nodes from one base for each
// group of up to 8 peers the same distance away in nodes
// (ncclP2pChannelBaseForRound), so those peers share their channels. A
// channel's block splits its warps evenly among the exchanges on it
// (sendrecv.h: 20 warps, 10 to send for one, 1 each for 6 to 8), and a
// channel moves about as much however they are split, so the model gives
// each exchange an equal share of the channel; the copy to oneself,
// through local memory, is quickly done and takes no share. One node's 8
// B200s with 32 channels a peer (Vultr's all-to-all, fidelity/nccl-logs)
// move 3.0 GB/s for each of a channel's 7 exchanges with other GPUs, 21
// GB/s a channel, as a sendrecv's lone exchange moves 21.7. An exchange's
// parts are equal, so it ends with its slowest part.
//
// Approximated: rounds past a node's ranks are taken to cross the
// network, as they do up to 2.28.3 and wherever a node has at most 8
// ranks; from 2.28.7 a node of more sends within it for some rounds and
// receives across the network (their channels' shares, at most 1/8 of a
// channel, are under the cap anyway).
func p2pPeerGBps(s System, o Options, n, total int, perChannel, netGBps float64) (gbps, channels float64) {
	if s.Ranks < 2 {
		return float64(n) * perChannel, float64(n)
	}
	v := o.Release()
	// on[(round-1)*n+part] is the channel of a round's part; round 0 is
	// the copy to oneself.
	on, works := make([]int, (s.Ranks-1)*n), make([]int, total)
	for i := range on {
		on[i] = p2pChannelFor(s, v, total, 1+i/n, i%n)
		works[on[i]]++
	}
	gbps, channels = math.Inf(1), math.Inf(1)
	local := max(1, s.PerNode)
	for i, c := range on {
		share := 1 / float64(works[c])
		rate := perChannel * share
		if round := 1 + i/n; s.Nodes > 1 && round >= local {
			rate = min(rate, netGBps)
		}
		gbps, channels = min(gbps, float64(n)*rate), min(channels, float64(n)*share)
	}
	return gbps, channels
}

// p2pChannelFor is the channel NCCL runs part of round's exchange on, of
// total (a power of two): from 2.22 to 2.27 the base plus the part's bits
// reversed (ncclP2pChannelForPart), before and after it the base's bits
// reversed plus the part (2.21's p2pChannels table, 2.28's
// ncclP2pChannelBaseForRound).
func p2pChannelFor(s System, v Version, total, round, part int) int {
	base := p2pBase(s, v, round) & 0xff
	if v >= 222 && v <= V2_27 {
		return (base + reverseBits(part, total)) % total
	}
	return (reverseBits(base%total, total) + part) % total
}

// p2pBase is the base channel of round's exchange: the round on one node;
// on several, the group of peers it falls in, a group being a node's
// ranks (up to 2.28.3; from 2.28.7, which the model's 2.28 follows, the
// greatest common divisor of NCCL_P2P_SCHEDULE_GROUP_SIZE, 8, and them),
// each group's peers taking 8 at a time a base of their own.
func p2pBase(s System, v Version, round int) int {
	if s.Nodes <= 1 {
		return round
	}
	group := max(1, s.PerNode)
	if v <= V2_21 {
		return round/group + round%group/p2pPeersPerBatch
	}
	if v >= V2_28 {
		group = gcd(p2pPeersPerBatch, group)
	}
	return round/group*ceilDiv(group, p2pPeersPerBatch) + round%group/p2pPeersPerBatch
}

// reverseBits is x's low log2(n) bits in reverse order, for n a power of
// two.
func reverseBits(x, n int) int {
	r := 0
	for b := 1; b < n; b <<= 1 {
		r <<= 1
		if x&b != 0 {
			r |= 1
		}
	}
	return r
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
