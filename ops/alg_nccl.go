package ops

import "math"

const ncclRingDoc = "NCCL's ring: the data split over Spec.Channels channels, each its own lane and its own ring " +
	"(rank i sends to i+1), moving at most Spec.Chunk elements per step so that chunks pipeline around the ring. " +
	"Within a channel's pass a chunk is combined as textbook ring's is"

var ncclRingPlans = map[Op]generator{
	AllReduce:     ncclRingAllReduce,
	ReduceScatter: ncclRingReduceScatter,
	AllGather:     ncclRingAllGather,
	Broadcast:     ncclRingBroadcast,
	Reduce:        ncclRingReduce,
}

// channels is how many channels an NCCL-style plan uses: Spec.Channels,
// at least one, and no more than there are elements to share.
func channels(s Spec, elems int) int {
	return max(1, min(s.Channels, elems))
}

// passes calls f for each pass of a channel over n elements: consecutive
// ranges of at most per elements (all n when per is 0), as NCCL loops
// over a channel's data a chunk per rank at a time.
func passes(n, per int, f func(off, n int)) {
	if per <= 0 || per >= n {
		f(0, n)
		return
	}
	for off := 0; off < n; off += per {
		f(off, min(per, n-off))
	}
}

// ncclRingAllReduce: channel c all-reduces its share of Out in passes of
// Ranks×Chunk elements, each a textbook ring all-reduce (reduce-scatter
// then all-gather of Ranks pieces) on lane c with tags of its own.
func ncclRingAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	C := channels(b.p.Spec, n)
	pass := satMul(b.p.Chunk, p)
	_, piece := chunk(passLimit(b.p.Spec, n, C, p), p, 0)
	b.tmp(C, piece)
	for c := range b.lanes(C) {
		lb, g := laneBuilder{b, c}, channelRing(b.p.Spec, c)
		off, ln := chunk(n, C, c)
		for r := range b.ranks() {
			lb.copy(r, ref(Out, off, ln), ref(In, off, ln))
			passes(ln, pass, func(o, m int) {
				ringAllReducePass(lb, g, r, ref(Out, off+o, m), ref(Tmp, c*piece, piece), uint32(2*p*c))
			})
		}
	}
	return nil
}

// passLimit is the most elements a channel (of C, sharing n) moves in one
// pass: Chunk elements for each of per parts, or the largest channel's
// share when Chunk is 0 or more than that.
func passLimit(s Spec, n, C, per int) int {
	_, most := chunk(n, C, 0)
	if s.Chunk > 0 {
		return min(most, satMul(s.Chunk, per))
	}
	return most
}

// satMul is a × b for a, b >= 0, or the largest int where that overflows:
// a chunk of any size (Spec.Chunk is unbounded) times the ranks.
func satMul(a, b int) int {
	if b > 0 && a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}

// ring is the order of the ranks around one ring: at position v is rank
// order[v], or rank v itself when order is nil.
type ring struct{ order, pos []int }

// newRing is the ring through order (nil: the ranks in turn).
func newRing(order []int) ring {
	if order == nil {
		return ring{}
	}
	pos := make([]int, len(order))
	for v, r := range order {
		pos[r] = v
	}
	return ring{order, pos}
}

func (g ring) rank(v, p int) int {
	if g.order == nil {
		return mod(v, p)
	}
	return g.order[mod(v, p)]
}

func (g ring) position(r int) int {
	if g.pos == nil {
		return r
	}
	return g.pos[r]
}

// ringAllReducePass emits rank r's textbook ring all-reduce of buf (which
// holds the rank's own data) around g on lane l, receiving into tmp, with
// tags from tag: p−1 reduce-scatter steps, the owner dividing for avg, then
// p−1 all-gather steps (see ringAllReduce for the reduction order, with
// ring positions for ranks).
func ringAllReducePass(l laneBuilder, g ring, r int, buf, tmp Ref, tag uint32) {
	p, v := l.b.p.Ranks, g.position(r)
	next, prev := g.rank(v+1, p), g.rank(v-1, p)
	c := func(i int) Ref { o, n := chunk(buf.Len, p, mod(i, p)); return ref(buf.Buf, buf.Off+o, n) }
	for k := 0; k < p-1; k++ {
		in := c(v - k - 1)
		l.send(r, next, c(v-k), tag+uint32(k))
		l.recv(r, prev, ref(tmp.Buf, tmp.Off, in.Len), tag+uint32(k))
		l.reduce(r, in, ref(tmp.Buf, tmp.Off, in.Len))
	}
	l.finishAvg(r, c(v+1))
	for k := 0; k < p-1; k++ {
		t := tag + uint32(p-1+k)
		l.send(r, next, c(v+1-k), t)
		l.recv(r, prev, c(v-k), t)
	}
}

// channelRing is channel c's ring through the ranks, nil (the ranks in
// turn) on one node. Across nodes it goes one node after another; within
// node k it runs from local rank c onward when k is even and back from
// local rank c−1 when k is odd, so that every crossing between nodes
// leaves and enters on one local index, as NCCL's rings keep to one NIC
// rail, and channels spread over the rails. (With an odd number of nodes
// the crossing from the last node back to the first changes rail.)
func channelRing(s Spec, c int) ring {
	g := s.NodeRanks
	if g <= 0 || g >= s.Ranks {
		return ring{}
	}
	order := make([]int, 0, s.Ranks)
	for node := range s.Ranks / g {
		for i := range g {
			local := mod(c+i, g)
			if node%2 == 1 {
				local = mod(c-1-i, g)
			}
			order = append(order, node*g+local)
		}
	}
	return newRing(order)
}

// ncclRingAllGather: channel c gathers its share of every rank's block, in
// passes of Chunk elements of each block, each a textbook ring all-gather.
func ncclRingAllGather(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	C := channels(b.p.Spec, n)
	for c := range b.lanes(C) {
		lb, g := laneBuilder{b, c}, channelRing(b.p.Spec, c)
		off, ln := chunk(n, C, c)
		tag := uint32(p * c)
		for r := range b.ranks() {
			v := g.position(r)
			lb.copy(r, ref(Out, r*n+off, ln), ref(In, off, ln))
			passes(ln, b.p.Chunk, func(o, m int) {
				blk := func(i int) Ref { return ref(Out, g.rank(i, p)*n+off+o, m) }
				for k := 0; k < p-1; k++ {
					lb.send(r, g.rank(v+1, p), blk(v-k), tag+uint32(k))
					lb.recv(r, g.rank(v-1, p), blk(v-k-1), tag+uint32(k))
				}
			})
		}
	}
	return nil
}

// ncclRingReduceScatter: channel c reduce-scatters its share of every
// block, in passes of Chunk elements of each block, each a textbook ring
// reduce-scatter (see ringReduceScatter for the order) through two halves
// of the channel's scratch.
func ncclRingReduceScatter(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	C := channels(b.p.Spec, n)
	piece := passLimit(b.p.Spec, n, C, 1)
	b.tmp(2*C, piece)
	for c := range b.lanes(C) {
		lb, g := laneBuilder{b, c}, channelRing(b.p.Spec, c)
		off, ln := chunk(n, C, c)
		tag := uint32(p * c)
		for r := range b.ranks() {
			v := g.position(r)
			passes(ln, b.p.Chunk, func(o, m int) {
				in := func(pos int) Ref { return ref(In, g.rank(pos, p)*n+off+o, m) }
				half := func(k int) Ref { return ref(Tmp, (2*c+k%2)*piece, m) }
				if p == 1 {
					lb.copy(r, ref(Out, off+o, m), in(0))
					lb.finishAvg(r, ref(Out, off+o, m))
					return
				}
				for k := 0; k < p-1; k++ {
					src := in(v - 1)
					if k > 0 {
						src = half(k - 1)
					}
					lb.send(r, g.rank(v+1, p), src, tag+uint32(k))
					lb.recv(r, g.rank(v-1, p), half(k), tag+uint32(k))
					lb.reduce(r, half(k), in(v-k-2))
				}
				lb.copy(r, ref(Out, off+o, m), half(p-2))
				lb.finishAvg(r, ref(Out, off+o, m))
			})
		}
	}
	return nil
}

// netGroup is the elements a chain's rank a gathers before it sends them
// on to rank b: where a and b are on two nodes, Spec.NetChunk taken to
// the nearest multiple of Chunk (a Chunk made coarse for a plan's size is
// then off NCCL's step by half a piece at most, either way); 0 (send each
// piece as it is done) elsewhere, or where that multiple is one piece.
func netGroup(s Spec, a, b int) int {
	g := nodeSize(s)
	if s.NetChunk <= s.Chunk || s.Chunk <= 0 || a/g == b/g {
		return 0
	}
	pieces, rest := s.NetChunk/s.Chunk, s.NetChunk%s.Chunk
	if rest >= s.Chunk-rest {
		pieces++
	}
	if pieces <= 1 {
		return 0
	}
	return satMul(pieces, s.Chunk)
}

// relay walks a channel's n elements as a rank of a chain relays them, in
// pieces of per elements (0: all n at once), calling for each piece
// before, recv and after, each where set. It sends each piece (send, where
// set) once it is done or, with group above per, the pieces of each group
// of group elements (a multiple of per) together once the group's last is
// done: NCCL's proxy sends a step across the network only once all of it
// is written, while the peer's GPU takes its lines as they land.
func relay(n, per, group int, before, recv, after, send func(o, m int)) {
	sent := 0
	passes(n, per, func(o, m int) {
		for _, f := range [...]func(o, m int){before, recv, after} {
			if f != nil {
				f(o, m)
			}
		}
		end := o + m
		if send == nil || group > per && per > 0 && end%group != 0 && end != n {
			return
		}
		passes(end-sent, per, func(o, m int) { send(sent+o, m) })
		sent = end
	})
}

// ncclRingBroadcast: channel c sends its share along its ring from the
// root in chunks, which pipeline: a rank forwards chunk i while it
// receives chunk i+1; to another node, NetChunk at a time.
func ncclRingBroadcast(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	C := channels(b.p.Spec, n)
	for c := range b.lanes(C) {
		lb, g := laneBuilder{b, c}, channelRing(b.p.Spec, c)
		off, ln := chunk(n, C, c)
		for r := range b.ranks() {
			pos := g.position(r)
			v := mod(pos-g.position(root), p)
			if v == 0 {
				lb.copy(r, ref(Out, off, ln), ref(In, off, ln))
			}
			from, to := g.rank(pos-1, p), g.rank(pos+1, p)
			var recv, send func(o, m int)
			if v > 0 {
				recv = func(o, m int) { lb.recv(r, from, ref(Out, off+o, m), uint32(c)) }
			}
			if v < p-1 {
				send = func(o, m int) { lb.send(r, to, ref(Out, off+o, m), uint32(c)) }
			}
			relay(ln, b.p.Chunk, netGroup(b.p.Spec, r, to), nil, recv, nil, send)
		}
	}
	return nil
}

// ncclRingReduce: channel c reduces its share along its ring toward the
// root in chunks, each rank folding a chunk into its own (own op
// incoming, as ringReduce) and passing it on while the next arrives.
// To another node it passes NetChunk at a time.
func ncclRingReduce(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	C := channels(b.p.Spec, n)
	b.tmp(2, n)
	for c := range b.lanes(C) {
		lb, g := laneBuilder{b, c}, channelRing(b.p.Spec, c)
		off, ln := chunk(n, C, c)
		accBase := 2 * off // the channel's accumulator and its incoming chunks
		acc := func(o, m int) Ref { return ref(Tmp, accBase+o, m) }
		inc := func(o, m int) Ref { return ref(Tmp, accBase+ln+o, m) }
		for r := range b.ranks() {
			pos := g.position(r)
			v := mod(pos-g.position(root), p)
			from, to := g.rank(pos+1, p), g.rank(pos-1, p)
			var recv, send func(o, m int)
			if v != p-1 {
				recv = func(o, m int) { lb.recv(r, from, inc(o, m), uint32(c)) }
			}
			if v != 0 {
				send = func(o, m int) { lb.send(r, to, acc(o, m), uint32(c)) }
			}
			own := func(o, m int) { lb.copy(r, acc(o, m), ref(In, off+o, m)) }
			fold := func(o, m int) {
				if v != p-1 {
					lb.reduce(r, acc(o, m), inc(o, m))
				}
				if v == 0 {
					lb.copy(r, ref(Out, off+o, m), acc(o, m))
					lb.finishAvg(r, ref(Out, off+o, m))
				}
			}
			relay(ln, b.p.Chunk, netGroup(b.p.Spec, r, to), own, recv, fold, send)
		}
	}
	return nil
}
