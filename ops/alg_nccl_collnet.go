package ops

const ncclCollNetDirectDoc = "NCCL's CollNet direct on InfiniBand SHARP: the data split over Spec.Channels channels and " +
	"cut into passes of NodeRanks×Spec.Chunk elements, local rank i of every node the head of part i of each pass; " +
	"every rank sends part i to its node's head i, which reduces the node's parts (its own first, then the others in " +
	"local order), all-reduces that through the network's switch with head i of every other node (in node order) " +
	"and sends the result back to its node; all-gather and reduce-scatter gather or reduce the blocks of the ranks " +
	"of local index i through the switch at head i, which hands them to its node or first sums its node's; with one " +
	"GPU per node the network switch reduces from and multicasts to every rank, as nccl-nvls does on an NVSwitch; " +
	"needs a simulator whose network switch reduces"

const ncclCollNetChainDoc = "NCCL's CollNet chain on InfiniBand SHARP: channel c's chain runs through every GPU of a " +
	"node to its head, local rank c mod NodeRanks, each adding its input to what the one before sent; the head " +
	"all-reduces the node's sum through the network's switch with the heads of the other nodes (in node order), " +
	"and the result runs back down the chain; needs a simulator whose network switch reduces"

// CollNet's collectives. All-reduce reduces within each node before the
// network (direct: each GPU a share; chain: along a chain), so each NIC
// carries its share of the data once, and the heads meet through the
// network's switch (StepNetAllReduce). Direct's reduce-scatter and
// all-gather give each GPU the blocks of the ranks of its local index:
// it gathers them through the network's switch and hands them to its
// node (StepNetAllGather), or sums its node's and reduces them through
// the switch (StepNetReduceScatter). With one GPU per node they go
// through the switch's reduction and multicast as NVLS's do, reading
// and writing the members' buffers.
var (
	ncclCollNetDirectPlans = map[Op]generator{
		AllReduce:     ncclCollNetDirectAllReduce,
		ReduceScatter: ncclCollNetDirectReduceScatter,
		AllGather:     ncclCollNetDirectAllGather,
	}
	ncclCollNetChainPlans = map[Op]generator{AllReduce: ncclCollNetChainAllReduce}
)

// NetworkSwitch reports whether algorithm name's switch steps go through
// the network's switch (SHARP), whose group is every rank, one a node
// (NodeRanks 1), rather than a node's NVSwitch: CollNet's.
func NetworkSwitch(name string) bool {
	return name == "nccl-collnet-direct" || name == "nccl-collnet-chain"
}

// netDepth is how many passes of a channel a plan keeps in the network at
// once. NCCL keeps several chunks of a channel in flight through the
// network (NCCL_STEPS slots), so that one's latency overlaps the others'
// transfer; a plan gives each channel netDepth lanes and tags for its
// network collectives, which its passes take in turn, each lane keeping
// its passes in order for the members to meet alike.
const netDepth = 4

// netLanes are the lanes and tags of channel c of a plan that goes
// through the network: its first lane, netDepth for the network, and its
// last; tags from netTags·c on, the first two the plan's own.
type netLanes struct{ c int }

const netTags = netDepth + 2

func (l netLanes) first(b *builder) laneBuilder { return laneBuilder{b, netTags * l.c} }
func (l netLanes) last() int                    { return netTags*l.c + netDepth + 1 }
func (l netLanes) tag(i int) uint32             { return uint32(netTags*l.c + i) }
func (l netLanes) netTag(pass int) uint32       { return l.tag(2 + pass%netDepth) }
func (l netLanes) net(pass int) int             { return netTags*l.c + 1 + pass%netDepth }

// netAllReduce adds rank r's network all-reduce of part for the channel's
// pass-th pass, on the pass's network lane, After the rank's last step,
// and the division that ends an average.
func (l netLanes) netAllReduce(b *builder, r, pass int, part Ref) {
	b.add(r, Step{Kind: StepNetAllReduce, Dst: part, Src: part, Tag: l.netTag(pass), Lane: l.net(pass), After: []int{b.last(r)}})
	laneBuilder{b, l.net(pass)}.finishAvg(r, part)
}

// netReduceScatter adds rank r's network reduce-scatter of sum into out
// for the channel's pass-th pass, on the pass's network lane, After the
// rank's last step; records it as its slot's last use; and adds the
// division that ends an average.
func (l netLanes) netReduceScatter(b *builder, r, pass int, sum, out Ref, used *slotUses) {
	b.add(r, Step{Kind: StepNetReduceScatter, Src: sum, Dst: out, Tag: l.netTag(pass), Lane: l.net(pass), After: []int{b.last(r)}})
	used[pass%netDepth] = b.last(r)
	laneBuilder{b, l.net(pass)}.finishAvg(r, out)
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
		b.tmp(C, piece)
	}
	b.madeLanes(netTags * C)
	for c := range C {
		nl := netLanes{c}
		first := nl.first(b)
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
				gather := stage(b, r, nl.last())
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
		b.tmp(C, pass)
	}
	b.madeLanes(netTags * C)
	for c := range C {
		nl := netLanes{c}
		upLane := nl.first(b)
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
				down := stage(b, r, nl.last())
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

// ncclCollNetDirectAllGather: with one GPU per node, nccl-nvls's
// all-gather through the network's switch. Otherwise channel c cuts its
// share of each rank's block into passes of Chunk elements, and rank r,
// of local index i, gathers the ranks of local index i: on the pass's
// network lane (netLanes) it all-gathers its In through the network's
// switch into one of the channel's netDepth result slots in Tmp (node k's
// piece at k·pass); After that, on the channel's last lane, it copies
// the pieces into their blocks of its Out, sends the slot to its node's
// other GPUs, and receives theirs (through the channel's receive slot)
// into their blocks. A slot is written again After its pass's sends.
// Tags (netLanes): the second, between a node's GPUs. No reduction.
func ncclCollNetDirectAllGather(b *builder) error {
	if nodeSize(b.p.Spec) == 1 || b.p.Ranks == 1 {
		return ncclNVLSAllGather(b)
	}
	n := b.p.Count
	bp := newBlockPasses(b, netDepth+1)
	g, N, pass, slot := bp.g, bp.N, bp.pass, bp.slot
	// A pass: its network step, its N copies, and for each other GPU of
	// the node a send, a receive and N copies.
	bp.expect(b, 1+N+(g-1)*(N+2))
	for c := range bp.C {
		nl := netLanes{c}
		off, ln := chunk(n, bp.C, c)
		base := c * (netDepth + 1) * slot
		recvSlot := base + netDepth*slot
		back := nl.tag(1)
		for r := range b.ranks() {
			node, me, k := r/g*g, r%g, 0
			used := newSlotUses()
			passes(ln, pass, func(o, m int) {
				if m == 0 {
					return
				}
				d := k % netDepth
				res := ref(Tmp, base+d*slot, N*m)
				b.add(r, Step{Kind: StepNetAllGather, Src: ref(In, off+o, m), Dst: res, Tag: nl.netTag(k), Lane: nl.net(k), After: used.after(d)})
				gather := stage(b, r, nl.last())
				for i := range N {
					gather(Step{Kind: StepCopy, Dst: ref(Out, (i*g+me)*n+off+o, m), Src: ref(Tmp, res.Off+i*m, m)})
				}
				for j := range g {
					if j != me {
						gather(Step{Kind: StepSend, Peer: node + j, Src: res, Tag: back})
					}
				}
				used[d] = b.last(r)
				for j := range g {
					if j == me {
						continue
					}
					gather(Step{Kind: StepRecv, Peer: node + j, Dst: ref(Tmp, recvSlot, N*m), Tag: back})
					for i := range N {
						gather(Step{Kind: StepCopy, Dst: ref(Out, (i*g+j)*n+off+o, m), Src: ref(Tmp, recvSlot+i*m, m)})
					}
				}
				k++
			})
		}
	}
	return nil
}

// ncclCollNetDirectReduceScatter: with one GPU per node, nccl-nvls's
// reduce-scatter through the network's switch. Otherwise channel c cuts
// its share of each rank's block into passes of Chunk elements, and rank
// r, of local index i, reduces the blocks of the ranks of local index i.
// On the channel's first lane it copies, for each other GPU of its node,
// that GPU's ranks' pieces of its In into the channel's staging slot in
// Tmp (node k's at k·pass) and sends them to it; copies its own ranks'
// pieces into one of the channel's netDepth sum slots (After the slot's
// last use), and receives and adds the node's other GPUs' (through the
// channel's receive slot, in local order). After that, on the pass's
// network lane (netLanes), it reduce-scatters the sums through the
// network's switch into its Out (dividing for avg). Reduction order, per
// element of rank q's block: P[k] = x[k,i] op the others of node k in
// local order, then ((P[0] op P[1]) op …) over the nodes, computed once
// by the switch. Tags (netLanes): the first, between a node's GPUs.
func ncclCollNetDirectReduceScatter(b *builder) error {
	if nodeSize(b.p.Spec) == 1 || b.p.Ranks == 1 {
		return ncclNVLSReduceScatter(b)
	}
	n := b.p.Count
	bp := newBlockPasses(b, netDepth+2)
	g, N, pass, slot := bp.g, bp.N, bp.pass, bp.slot
	// A pass, at least (an average divides once more): for each other GPU
	// of the node N copies, a send, a receive and a reduction; N copies of
	// its own; its network step.
	bp.expect(b, (g-1)*(N+3)+N+1)
	for c := range bp.C {
		nl := netLanes{c}
		first := nl.first(b)
		off, ln := chunk(n, bp.C, c)
		base := c * (netDepth + 2) * slot
		staging, recvSlot := base, base+slot
		toHeads := nl.tag(0)
		for r := range b.ranks() {
			node, me, k := r/g*g, r%g, 0
			used := newSlotUses()
			// pieces copies the pass's pieces of the blocks of the ranks
			// of local index j into Tmp from at, the first After after.
			pieces := func(j, at, o, m int, after []int) {
				for i := range N {
					s := Step{Kind: StepCopy, Dst: ref(Tmp, at+i*m, m), Src: ref(In, (i*g+j)*n+off+o, m), Lane: first.lane}
					if i == 0 {
						s.After = after
					}
					b.add(r, s)
				}
			}
			passes(ln, pass, func(o, m int) {
				if m == 0 {
					return
				}
				for j := range g {
					if j != me {
						pieces(j, staging, o, m, nil)
						first.send(r, node+j, ref(Tmp, staging, N*m), toHeads)
					}
				}
				d := k % netDepth
				sum := ref(Tmp, base+(2+d)*slot, N*m)
				pieces(me, sum.Off, o, m, used.after(d))
				for j := range g {
					if j != me {
						inc := ref(Tmp, recvSlot, N*m)
						first.recv(r, node+j, inc, toHeads)
						first.reduce(r, sum, inc)
					}
				}
				out := ref(Out, off+o, m)
				nl.netReduceScatter(b, r, k, sum, out, &used)
				k++
			})
		}
	}
	return nil
}

// blockPasses is how a plan that takes every rank's block through the
// network's switch (an all-gather, a reduce-scatter) cuts them: nodes of
// g GPUs, N of them, C channels, passes of pass elements of each block; a
// slot of Tmp holds a pass's piece of the N blocks of one local index.
type blockPasses struct{ g, N, C, pass, slot int }

// newBlockPasses is b's blockPasses, with Tmp for slots slots a channel
// and netTags lanes a channel.
func newBlockPasses(b *builder, slots int) blockPasses {
	g := nodeSize(b.p.Spec)
	C := channels(b.p.Spec, b.p.Count)
	pass := passLimit(b.p.Spec, b.p.Count, C, 1)
	bp := blockPasses{g: g, N: b.p.Ranks / g, C: C, pass: pass, slot: b.p.Ranks / g * pass}
	b.tmp(C*slots, bp.slot)
	b.madeLanes(netTags * C)
	return bp
}

// expect refuses at once, before any step is made, a plan whose every
// rank makes at least perPass steps in each pass of its channels: every
// GPU takes or gives each node's piece, so on 1024 GPUs and 16 channels
// one pass alone is past the limit, which making the steps would find
// only after millions of them.
func (bp blockPasses) expect(b *builder, perPass int) {
	perRank := 0
	for c := range bp.C {
		_, ln := chunk(b.p.Count, bp.C, c)
		n := 0 // the channel's passes (passes)
		switch {
		case ln == 0:
		case bp.pass <= 0 || bp.pass >= ln:
			n = 1
		default:
			n = (ln + bp.pass - 1) / bp.pass
		}
		// Past the limit a rank's count only needs to stay past it, not
		// overflow on the way (2^58 elements in passes of one, on 16 ranks).
		perRank = min(perRank+min(n, b.limit+1)*perPass, b.limit+1)
	}
	b.expect(perRank)
}

// slotUses is, for each of a channel's netDepth slots, the rank's step
// that last used it, which its next use waits for (-1: none yet).
type slotUses [netDepth]int

func newSlotUses() slotUses {
	var u slotUses
	for d := range u {
		u[d] = -1
	}
	return u
}

// after is what the next use of slot d waits for (After).
func (u *slotUses) after(d int) []int {
	if u[d] < 0 {
		return nil
	}
	return []int{u[d]}
}

// stage is a function that adds rank r's steps on lane, the first of
// them After the rank's last step so far: a stage of a pass that waits
// for the one before, on a lane of its own.
func stage(b *builder, r, lane int) func(Step) {
	after := []int{b.last(r)}
	return func(s Step) {
		s.Lane, s.After, after = lane, after, nil
		b.add(r, s)
	}
}
