package ops

const ncclNVLSDoc = "NCCL's NVLS on one node's NVSwitch: the data split over Spec.Channels channels, each rank owning " +
	"1/Ranks of every pass of Ranks×Spec.Chunk elements, which the switch reduces from every GPU into it " +
	"(((x0 op x1) op x2) …, in rank order) and multicasts from it into every GPU; across nodes (NCCL's NVLS with " +
	"CollNet) the network's switch (SHARP) all-reduces, all-gathers or reduce-scatters between the nodes' switches; " +
	"needs a simulator whose switches reduce"

// ncclNVLSPlans are NVLS's collectives. They run only where the switch
// reduces (see UsesSwitch), so AlgorithmsFor leaves them out.
var ncclNVLSPlans = map[Op]generator{
	AllReduce:     ncclNVLSAnyAllReduce,
	ReduceScatter: ncclNVLSAnyReduceScatter,
	AllGather:     ncclNVLSAnyAllGather,
}

// switchAlgorithms need a switch that reduces: AlgorithmsFor, which the
// suites that run every algorithm on every backend and fabric read,
// leaves them out.
var switchAlgorithms = map[string]bool{"nccl-nvls": true, "nccl-nvlstree": true, "nccl-collnet-direct": true, "nccl-collnet-chain": true}

// NeedsSwitch reports whether algorithm name makes plans with switch
// steps (Plan.UsesSwitch), which only a simulator with a reducing switch
// runs. AlgorithmsFor does not list such algorithms; Compile makes them.
func NeedsSwitch(name string) bool { return switchAlgorithms[name] }

// heldSpec reports whether s's plans order their lanes with After, and
// so are held whatever their size, where the rest of the algorithm's
// plans stream: NVLS's all-reduces send a pass back out on a lane of
// their own once the other lane has reduced it, and CollNet's
// collectives, and NVLS's across nodes, give the network lanes of their
// own.
func heldSpec(s Spec) bool {
	return switchAlgorithms[s.Algo] && (s.Op == AllReduce || NetworkSwitch(s.Algo) || acrossNodes(s))
}

func (l laneBuilder) switchReduce(r int, dst, src Ref) int {
	return l.b.add(r, Step{Kind: StepSwitchReduce, Dst: dst, Src: src, Lane: l.lane})
}

func (l laneBuilder) multicast(r int, dst, src Ref) int {
	return l.b.add(r, Step{Kind: StepMulticast, Dst: dst, Src: src, Lane: l.lane})
}

// ncclNVLSAllReduce: channel c cuts its share of the data into passes of
// Ranks×Chunk elements; rank r owns part r of each pass (chunk), which it
// switch-reduces from every rank's In into its Out on lane 2c (dividing
// there for avg) and then multicasts from its Out into every rank's Out
// on lane 2c+1, After the reduce, so that a pass's multicast overlaps the
// next pass's reduction, as NCCL's NVLS kernels pipeline the two.
// Reduction order, per element: ((x0 op x1) op x2) … op x(p−1), computed
// once by the switch for the part's owner and multicast to all, so every
// rank holds the same bits. In place, the owner alone reads and then
// writes its part on every rank. One rank copies.
func ncclNVLSAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	C := channels(b.p.Spec, n)
	pass := passLimit(b.p.Spec, n, C, p)
	b.madeLanes(2 * C)
	for c := range C {
		reduceLane, castLane := laneBuilder{b, 2 * c}, laneBuilder{b, 2*c + 1}
		off, ln := chunk(n, C, c)
		for r := range b.ranks() {
			if p == 1 {
				lb := laneBuilder{b, c}
				lb.copy(r, ref(Out, off, ln), ref(In, off, ln))
				lb.finishAvg(r, ref(Out, off, ln))
				continue
			}
			passes(ln, pass, func(o, m int) {
				so, sl := chunk(m, p, r)
				if sl == 0 {
					return
				}
				part := off + o + so
				reduceLane.switchReduce(r, ref(Out, part, sl), ref(In, part, sl))
				reduceLane.finishAvg(r, ref(Out, part, sl))
				reduced := b.last(r)
				b.add(r, Step{Kind: StepMulticast, Dst: ref(Out, part, sl), Src: ref(Out, part, sl), Lane: castLane.lane, After: []int{reduced}})
			})
		}
	}
	return nil
}

// ncclNVLSAnyAllReduce, ncclNVLSAnyReduceScatter and
// ncclNVLSAnyAllGather are NVLS's collectives on one node, or across
// nodes through the network's switch.
func ncclNVLSAnyAllReduce(b *builder) error {
	if acrossNodes(b.p.Spec) {
		return ncclNVLSNetAllReduce(b)
	}
	return ncclNVLSAllReduce(b)
}

func ncclNVLSAnyReduceScatter(b *builder) error {
	if acrossNodes(b.p.Spec) {
		return ncclNVLSNetReduceScatter(b)
	}
	return ncclNVLSReduceScatter(b)
}

func ncclNVLSAnyAllGather(b *builder) error {
	if acrossNodes(b.p.Spec) {
		return ncclNVLSNetAllGather(b)
	}
	return ncclNVLSAllGather(b)
}

// ncclNVLSNetAllReduce is NCCL's NVLS all-reduce across nodes, over
// CollNet: channel c cuts its share of the data into passes of
// NodeRanks×Chunk elements, and local rank i of every node owns part i
// of each pass. On the channel's first lane (netLanes) rank r
// switch-reduces its part from its node's In into its Out; After that,
// on the pass's network lane, it all-reduces that through the network's
// switch with the same local rank of every node (dividing for avg);
// After that, on the channel's last lane, it multicasts the result into
// its node's Outs, so that a pass's stages overlap those of the passes
// around it. Reduction order, per element of part i: P[k] = ((x[k,0] op
// x[k,1]) op …) by node k's NVSwitch, then ((P[0] op P[1]) op …) over the
// nodes by the network's switch, computed once for the owners and
// multicast, so every rank holds the same bits.
func ncclNVLSNetAllReduce(b *builder) error {
	n := b.p.Count
	g := nodeSize(b.p.Spec)
	C := channels(b.p.Spec, n)
	pass := passLimit(b.p.Spec, n, C, g)
	b.madeLanes(netTags * C)
	for c := range C {
		nl := netLanes{c}
		first := nl.first(b)
		off, ln := chunk(n, C, c)
		for r := range b.ranks() {
			k := 0
			passes(ln, pass, func(o, m int) {
				so, sl := chunk(m, g, r%g)
				if sl == 0 {
					return
				}
				part := ref(Out, off+o+so, sl)
				first.switchReduce(r, part, ref(In, part.Off, sl))
				nl.netAllReduce(b, r, k, part)
				k++
				b.add(r, Step{Kind: StepMulticast, Dst: part, Src: part, Lane: nl.last(), After: []int{b.last(r)}})
			})
		}
	}
	return nil
}

// acrossNodes reports whether a plan of NVLS's goes across nodes (over
// CollNet): NodeRanks makes several nodes.
func acrossNodes(s Spec) bool { return s.NodeRanks > 0 && s.NodeRanks < s.Ranks }

// ncclNVLSNetAllGather is NCCL's NVLS all-gather across nodes, over
// CollNet: channel c cuts its share of each rank's block into passes of
// Chunk elements, and rank r, of local index i, brings the ranks of local
// index i to its node: on the pass's network lane (netLanes) it
// all-gathers its In through the network's switch into one of the
// channel's netDepth slots in Tmp (node k's piece at k·pass); After that,
// on the channel's last lane, it multicasts each node's piece into that
// rank's block of its node's Outs. A slot is written again After its
// pass's multicasts. No reduction.
func ncclNVLSNetAllGather(b *builder) error {
	n := b.p.Count
	bp := newBlockPasses(b, netDepth)
	g, N, slot := bp.g, bp.N, bp.slot
	for c := range bp.C {
		nl := netLanes{c}
		off, ln := chunk(n, bp.C, c)
		for r := range b.ranks() {
			me, k := r%g, 0
			used := newSlotUses()
			passes(ln, bp.pass, func(o, m int) {
				if m == 0 {
					return
				}
				d := k % netDepth
				res := ref(Tmp, (c*netDepth+d)*slot, N*m)
				b.add(r, Step{Kind: StepNetAllGather, Src: ref(In, off+o, m), Dst: res, Tag: nl.netTag(k), Lane: nl.net(k), After: used.after(d)})
				cast := stage(b, r, nl.last())
				for i := range N {
					cast(Step{Kind: StepMulticast, Dst: ref(Out, (i*g+me)*n+off+o, m), Src: ref(Tmp, res.Off+i*m, m)})
				}
				used[d] = b.last(r)
				k++
			})
		}
	}
	return nil
}

// ncclNVLSNetReduceScatter is NCCL's NVLS reduce-scatter across nodes,
// over CollNet: channel c cuts its share of each rank's block into passes
// of Chunk elements, and rank r, of local index i, reduces the blocks of
// the ranks of local index i: on the channel's first lane it has its
// node's NVSwitch reduce each such rank's piece from its node's Ins (in
// rank order) into one of the channel's netDepth slots in Tmp (node k's
// at k·pass; After the slot's last use); After that, on the pass's
// network lane (netLanes), it reduce-scatters the slot through the
// network's switch into its Out (dividing for avg). Reduction order, per
// element of rank q's block: P[k] = ((x[k,0] op x[k,1]) op …) by node k's
// NVSwitch, then ((P[0] op P[1]) op …) over the nodes by the network's
// switch.
func ncclNVLSNetReduceScatter(b *builder) error {
	n := b.p.Count
	bp := newBlockPasses(b, netDepth)
	g, N, slot := bp.g, bp.N, bp.slot
	for c := range bp.C {
		nl := netLanes{c}
		lane := nl.first(b).lane
		off, ln := chunk(n, bp.C, c)
		for r := range b.ranks() {
			me, k := r%g, 0
			used := newSlotUses()
			passes(ln, bp.pass, func(o, m int) {
				if m == 0 {
					return
				}
				d := k % netDepth
				sum := ref(Tmp, (c*netDepth+d)*slot, N*m)
				for i := range N {
					s := Step{Kind: StepSwitchReduce, Dst: ref(Tmp, sum.Off+i*m, m), Src: ref(In, (i*g+me)*n+off+o, m), Lane: lane}
					if i == 0 {
						s.After = used.after(d)
					}
					b.add(r, s)
				}
				out := ref(Out, off+o, m)
				nl.netReduceScatter(b, r, k, sum, out, &used)
				k++
			})
		}
	}
	return nil
}

// ncclNVLSReduceScatter: on lane c, rank r switch-reduces its share of
// block r of every rank's In into its Out, in passes of Chunk elements,
// dividing for avg. Reduction order as ncclNVLSAllReduce's. One rank
// copies.
func ncclNVLSReduceScatter(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	C := channels(b.p.Spec, n)
	for c := range b.lanes(C) {
		lb := laneBuilder{b, c}
		off, ln := chunk(n, C, c)
		for r := range b.ranks() {
			passes(ln, b.p.Chunk, func(o, m int) {
				if m == 0 {
					return
				}
				out := ref(Out, off+o, m)
				if p == 1 {
					lb.copy(r, out, ref(In, off+o, m))
				} else {
					lb.switchReduce(r, out, ref(In, r*n+off+o, m))
				}
				lb.finishAvg(r, out)
			})
		}
	}
	return nil
}

// ncclNVLSAllGather: on lane c, rank r multicasts its share of In into
// block r of every rank's Out, in passes of Chunk elements. No reduction.
// One rank copies.
func ncclNVLSAllGather(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	C := channels(b.p.Spec, n)
	for c := range b.lanes(C) {
		lb := laneBuilder{b, c}
		off, ln := chunk(n, C, c)
		for r := range b.ranks() {
			passes(ln, b.p.Chunk, func(o, m int) {
				if m == 0 {
					return
				}
				dst, src := ref(Out, r*n+off+o, m), ref(In, off+o, m)
				if p == 1 {
					lb.copy(r, dst, src)
				} else {
					lb.multicast(r, dst, src)
				}
			})
		}
	}
	return nil
}

const ncclNVLSTreeDoc = "NCCL's NVLSTree all-reduce across nodes: per channel and pass, each rank's NVSwitch reduces its node's " +
	"part into it (NVLS, in rank order), the ranks holding one part on every node reduce it up and broadcast it down " +
	"NCCL's double binary tree of the nodes (even channels on one tree, odd on the other), and each multicasts the " +
	"result into its node; needs a simulator whose switches reduce"

var ncclNVLSTreePlans = map[Op]generator{AllReduce: ncclNVLSTreeAllReduce}

// railTree is a tree through the ranks with one local index: node k's
// rank of that index joined to those of its parent and child nodes.
type railTree struct {
	nodes dtree // over node indices
	g     int   // ranks per node
}

func (t railTree) parentOf(r int) int {
	if up := t.nodes.parentOf(r / t.g); up >= 0 {
		return up*t.g + r%t.g
	}
	return -1
}

func (t railTree) kidsOf(r int) []int {
	kids := t.nodes.kidsOf(r / t.g)
	for i, k := range kids {
		kids[i] = k*t.g + r%t.g
	}
	return kids
}

// ncclNVLSTreeAllReduce: channel c cuts its share of the data into passes
// of NodeRanks×Chunk elements, and local rank i of every node owns part i
// of each pass. Each pass runs through four lanes of the channel, each
// After the one before, so that its stages overlap those of the passes
// around it, as NCCL's NVLSTree kernels give each stage its own warps:
// on lane 4c rank r switch-reduces its part from its node's In into its
// Out (a copy with one rank a node); on lane 4c+1 it reduces that partial
// up tree c%2 of the nodes' double binary tree among the ranks of its
// local index, receiving children's partials into the channel's Tmp, and
// the root divides for avg; on lane 4c+2 it receives the result back down
// into its Out (in place, where the partial went up from) and passes it
// to its children; on lane 4c+3 it multicasts it into its node's Outs.
// Reduction order, per element of part i: with P[k] = ((x[k,0] op
// x[k,1]) op …) op x[k,g−1] reduced by node k's switch, T[k] = (P[k] op
// T[child 0]) op T[child 1] over the nodes' tree, the element is T[root],
// computed once and broadcast, so every rank holds the same bits. Tags:
// 2c up, 2c+1 down. One rank copies.
func ncclNVLSTreeAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	g := nodeSize(b.p.Spec)
	C := channels(b.p.Spec, n)
	pass := passLimit(b.p.Spec, n, C, g)
	_, piece := chunk(pass, g, 0)
	if p > g {
		b.tmp(C, piece)
	}
	trees := dbtreeAllReduceTrees(p / g)
	b.madeLanes(4 * C)
	for c := range C {
		reduceLane, upLane := laneBuilder{b, 4 * c}, laneBuilder{b, 4*c + 1}
		downLane, castLane := laneBuilder{b, 4*c + 2}, laneBuilder{b, 4*c + 3}
		t := railTree{nodes: trees[c%2], g: g}
		off, ln := chunk(n, C, c)
		up, down := uint32(2*c), uint32(2*c+1)
		for r := range b.ranks() {
			if p == 1 {
				lb := laneBuilder{b, c}
				lb.copy(r, ref(Out, off, ln), ref(In, off, ln))
				lb.finishAvg(r, ref(Out, off, ln))
				continue
			}
			parent, kids := t.parentOf(r), t.kidsOf(r)
			passes(ln, pass, func(o, m int) {
				so, sl := chunk(m, g, r%g)
				if sl == 0 {
					return
				}
				part := ref(Out, off+o+so, sl)
				if g == 1 {
					reduceLane.copy(r, part, ref(In, part.Off, sl))
				} else {
					reduceLane.switchReduce(r, part, ref(In, part.Off, sl))
				}
				// Each stage's first step waits for the last step of the
				// stage before: a lane of its own, in order.
				upStep := stage(b, r, upLane.lane)
				for _, k := range kids {
					inc := ref(Tmp, c*piece, sl)
					upStep(Step{Kind: StepRecv, Peer: k, Dst: inc, Tag: up})
					upStep(Step{Kind: StepReduce, Dst: part, Src: inc})
				}
				if parent >= 0 {
					upStep(Step{Kind: StepSend, Peer: parent, Src: part, Tag: up})
				} else if isAvg(b.p.Spec) {
					upStep(Step{Kind: StepDivide, Dst: part})
				}
				downStep := stage(b, r, downLane.lane)
				if parent >= 0 {
					downStep(Step{Kind: StepRecv, Peer: parent, Dst: part, Tag: down})
				}
				for _, k := range kids {
					downStep(Step{Kind: StepSend, Peer: k, Src: part, Tag: down})
				}
				if g > 1 {
					stage(b, r, castLane.lane)(Step{Kind: StepMulticast, Dst: part, Src: part})
				}
			})
		}
	}
	return nil
}
