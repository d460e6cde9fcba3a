package ops

import "fmt"

const ncclCollNetDirectDoc = "NCCL's CollNet direct on InfiniBand SHARP: the data split over Spec.Channels channels and " +
	"cut into passes of NodeRanks×Spec.Chunk elements, local rank i of every node the head of part i of each pass; " +
	"every rank sends part i to its node's head i, which reduces the node's parts (its own first, then the others in " +
	"local order), all-reduces that through the network's switch with head i of every other node (in node order) " +
	"and sends the result back to its node; with one GPU per node, the network switch reduces every rank's input " +
	"(reduce-scatter and all-gather: each rank's share, as nccl-nvls on an NVSwitch); needs a simulator whose " +
	"network switch reduces"

const ncclCollNetChainDoc = "NCCL's CollNet chain on InfiniBand SHARP: channel c's chain runs through every GPU of a " +
	"node to its head, local rank c mod NodeRanks, each adding its input to what the one before sent; the head " +
	"all-reduces the node's sum through the network's switch with the heads of the other nodes (in node order), " +
	"and the result runs back down the chain; needs a simulator whose network switch reduces"

// CollNet's collectives. All-reduce reduces within each node before the
// network (direct: each GPU a share; chain: along a chain), so each NIC
// carries its share of the data once, and the heads meet through the
// network's switch (StepNetAllReduce). Reduce-scatter and all-gather go
// through the switch's reduction and multicast as NVLS's do, which
// reads the members' inputs: with one GPU per node there is nothing to
// reduce first.
var (
	ncclCollNetDirectPlans = map[Op]generator{
		AllReduce:     ncclCollNetDirectAllReduce,
		ReduceScatter: acrossNodesOfOne(ncclNVLSReduceScatter),
		AllGather:     acrossNodesOfOne(ncclNVLSAllGather),
	}
	ncclCollNetChainPlans = map[Op]generator{AllReduce: ncclCollNetChainAllReduce}
)

// NetworkSwitch reports whether algorithm name's switch steps go through
// the network's switch (SHARP), whose group is every rank, one a node
// (NodeRanks 1), rather than a node's NVSwitch: CollNet's.
func NetworkSwitch(name string) bool {
	return name == "nccl-collnet-direct" || name == "nccl-collnet-chain"
}

// acrossNodesOfOne is gen for CollNet's reduce-scatter and all-gather:
// refused unless the ranks are nodes of one GPU (NodeRanks 1), or a
// single rank.
func acrossNodesOfOne(gen generator) generator {
	return func(b *builder) error {
		if s := b.p.Spec; s.Ranks > 1 && s.NodeRanks != 1 {
			nodes := "on one node"
			if s.NodeRanks > 1 {
				nodes = fmt.Sprintf("in nodes of %d", s.NodeRanks)
			}
			return fmt.Errorf("%w: CollNet's %s goes through the network's switch (SHARP) from each GPU's own input, and commsim runs it with one GPU per node only (NodeRanks 1); %d ranks are %s",
				ErrUnsupported, s.Op, s.Ranks, nodes)
		}
		return gen(b)
	}
}

// nodeSize is the ranks of each node of a plan that goes through the
// network: NodeRanks, or every rank when it is 0 (Compile has refused
// nodes that are not whole).
func nodeSize(s Spec) int {
	if s.NodeRanks <= 0 || s.NodeRanks > s.Ranks {
		return s.Ranks
	}
	return s.NodeRanks
}

// netDepth is how many passes of a channel a plan keeps in the network at
// once. NCCL keeps several chunks of a channel in flight through the
// network (NCCL_STEPS slots), so that one's latency overlaps the others'
// transfer; a plan gives each channel netDepth lanes and tags for its
// network all-reduces, which its passes take in turn, each lane keeping
// its passes in order for the members to meet alike.
const netDepth = 4

// netLanes are the lanes and tags of channel c of a plan that goes
// through the network: its first lane, netDepth for the network, and its
// last; tags from netTags·c on, the first two the plan's own.
type netLanes struct{ c int }

const netTags = netDepth + 2

func (l netLanes) first() laneBuilder     { return laneBuilder{lane: netTags * l.c} }
func (l netLanes) last() int              { return netTags*l.c + netDepth + 1 }
func (l netLanes) tag(i int) uint32       { return uint32(netTags*l.c + i) }
func (l netLanes) netTag(pass int) uint32 { return l.tag(2 + pass%netDepth) }

// netAllReduce adds rank r's network all-reduce of part for the channel's
// pass-th pass, on the pass's network lane, After the rank's last step,
// and the division that ends an average.
func (l netLanes) netAllReduce(b *builder, r, pass int, part Ref) {
	lane := netTags*l.c + 1 + pass%netDepth
	b.add(r, Step{Kind: StepNetAllReduce, Dst: part, Src: part, Tag: l.netTag(pass), Lane: lane, After: []int{b.last(r)}})
	laneBuilder{b, lane}.finishAvg(r, part)
}

// ncclCollNetDirectAllReduce: channel c cuts its share of the data into
// passes of NodeRanks×Chunk elements, and local rank i of every node is
// the head of part i of each pass. On the channel's first lane rank r
// sends every other part of its In to that part's head on its node,
// then, as the head of its own part, copies its own In there into its
// Out and receives and adds the node's other GPUs' (in local order,
// through the channel's Tmp); After that, on the pass's network lane
// (netLanes), it all-reduces the sum through the network's switch with
// the same head of every node (dividing for avg); After that, on the
// channel's last lane, it sends the result to its node's other GPUs and
// receives theirs. So a pass's stages overlap those of the passes around
// it. Reduction order, per element of part i: P[k] = x[k,i] op the others
// of node k in local order, then ((P[0] op P[1]) op …) over the nodes,
// computed once by the switch for the heads, so every rank holds the
// same bits. Tags (netLanes): the first towards the heads, the second
// back. One rank copies.
func ncclCollNetDirectAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	g := nodeSize(b.p.Spec)
	C := channels(b.p.Spec, n)
	pass := passLimit(b.p.Spec, n, C, g)
	_, piece := chunk(pass, g, 0)
	if g > 1 {
		b.tmp(C * piece)
	}
	b.madeLanes(netTags * C)
	for c := range C {
		nl := netLanes{c}
		first := nl.first()
		first.b = b
		off, ln := chunk(n, C, c)
		toHeads, back := nl.tag(0), nl.tag(1)
		for r := range b.ranks() {
			if p == 1 {
				lb := laneBuilder{b, c}
				lb.copy(r, ref(Out, off, ln), ref(In, off, ln))
				lb.finishAvg(r, ref(Out, off, ln))
				continue
			}
			node, me, k := r/g*g, r%g, 0
			passes(ln, pass, func(o, m int) {
				if m == 0 {
					return
				}
				part := func(i int) Ref {
					so, sl := chunk(m, g, i)
					return ref(Out, off+o+so, sl)
				}
				for i := range g {
					if i != me && part(i).Len > 0 {
						first.send(r, node+i, ref(In, part(i).Off, part(i).Len), toHeads)
					}
				}
				own := part(me)
				if own.Len > 0 {
					first.copy(r, own, ref(In, own.Off, own.Len))
					inc := ref(Tmp, c*piece, own.Len)
					for i := range g {
						if i != me {
							first.recv(r, node+i, inc, toHeads)
							first.reduce(r, own, inc)
						}
					}
					nl.netAllReduce(b, r, k, own)
				}
				k++
				// The gather waits for the pass's reduction: in place,
				// it overwrites what the sends to the heads read.
				after := []int{b.last(r)}
				gather := func(s Step) {
					s.Lane, s.After, after = nl.last(), after, nil
					b.add(r, s)
				}
				for i := range g {
					if i != me && own.Len > 0 {
						gather(Step{Kind: StepSend, Peer: node + i, Src: own, Tag: back})
					}
				}
				for i := range g {
					if i != me && part(i).Len > 0 {
						gather(Step{Kind: StepRecv, Peer: node + i, Dst: part(i), Tag: back})
					}
				}
			})
		}
	}
	return nil
}

// ncclCollNetChainAllReduce: channel c's head is local rank h = c mod
// NodeRanks, and its chain runs through the node's ranks from h+1 round
// to h. In passes of Chunk elements, on the channel's first lane the
// chain's first rank sends its In; each next rank copies its In into its
// Out, receives what the one before sent (into the channel's Tmp), adds
// it and sends the sum on; the head, last, After that, on the pass's
// network lane (netLanes), all-reduces the node's sum through the
// network's switch with the heads of every other node (dividing for
// avg). After that, on the channel's last lane, the result runs back
// down the chain into each Out. Reduction order, per element: P[k] =
// x[k,h] op (… op (x[k,h+2] op x[k,h+1])) along node k's chain, then
// ((P[0] op P[1]) op …) over the nodes, computed once by the switch, so
// every rank holds the same bits. Tags (netLanes): the first up the
// chain, the second back down. One rank copies.
func ncclCollNetChainAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	g := nodeSize(b.p.Spec)
	C := channels(b.p.Spec, n)
	pass := passLimit(b.p.Spec, n, C, 1)
	if g > 1 {
		b.tmp(C * pass)
	}
	b.madeLanes(netTags * C)
	for c := range C {
		nl := netLanes{c}
		upLane := nl.first()
		upLane.b = b
		off, ln := chunk(n, C, c)
		up, back := nl.tag(0), nl.tag(1)
		head := c % g
		for r := range b.ranks() {
			if p == 1 {
				lb := laneBuilder{b, c}
				lb.copy(r, ref(Out, off, ln), ref(In, off, ln))
				lb.finishAvg(r, ref(Out, off, ln))
				continue
			}
			node, k := r/g*g, 0
			// pos is r's place in the chain, 0 first and g−1 the head.
			pos := mod(r%g-head-1, g)
			prev, next := node+mod(r%g-1, g), node+mod(r%g+1, g)
			passes(ln, pass, func(o, m int) {
				if m == 0 {
					return
				}
				out, in := ref(Out, off+o, m), ref(In, off+o, m)
				switch {
				case pos == 0 && g > 1:
					upLane.send(r, next, in, up)
				default:
					upLane.copy(r, out, in)
					if pos > 0 {
						inc := ref(Tmp, c*pass, m)
						upLane.recv(r, prev, inc, up)
						upLane.reduce(r, out, inc)
					}
					if pos < g-1 {
						upLane.send(r, next, out, up)
					}
				}
				if pos == g-1 {
					nl.netAllReduce(b, r, k, out)
				}
				k++
				// The way down waits for the way up: in place, it
				// overwrites what went up.
				after := []int{b.last(r)}
				down := func(s Step) {
					s.Lane, s.After, after = nl.last(), after, nil
					b.add(r, s)
				}
				if pos < g-1 {
					down(Step{Kind: StepRecv, Peer: next, Dst: out, Tag: back})
				}
				if pos > 0 {
					down(Step{Kind: StepSend, Peer: prev, Src: out, Tag: back})
				}
			})
		}
	}
	return nil
}
