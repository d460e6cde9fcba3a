package ops

const rhdDoc = "Rabenseifner: reduce-scatter by recursive halving (mask p/2 … 1), then all-gather by recursive doubling " +
	"(or binomial gather to the root); MPICH fold-in for non-power-of-two p. Chunks are combined across the top " +
	"rank bit first: ((x0 op x4) op (x2 op x6)) op ((x1 op x5) op (x3 op x7)) for p = 8"

var rhdPlans = map[Op]generator{
	AllReduce:     rhdAllReduce,
	ReduceScatter: rhdReduceScatter,
	Broadcast:     rhdBroadcast,
	Reduce:        rhdReduce,
}

// rhdHalve is a reduce-scatter by recursive halving among the pof2 new
// ranks of f. span(i, j) gives the offset and length of new ranks i…j−1's
// share of the data, the same in In and in acc. The partials start in from
// (In, or acc itself) and are combined into acc: at mask = pof2/2, …, 1
// new rank nr keeps the half of its group's range on its side of the mask
// bit, sends the other half to new rank nr^mask, receives that rank's
// partial of the kept half into Tmp[tmpOff:] and folds it in as
// acc = acc op incoming (own partial on the left). New rank nr ends with
// span(nr, nr+1) complete in acc. Tags run from tag.
func rhdHalve(b *builder, f rdFolding, r, nr int, span func(i, j int) (int, int), from, acc Buf, tmpOff int, tag uint32) {
	for mask := f.pof2 / 2; mask >= 1; mask /= 2 {
		keep := nr &^ (2*mask - 1)
		give := keep + mask
		if nr&mask != 0 {
			keep, give = give, keep
		}
		q := f.old(nr ^ mask)
		ko, kn := span(keep, keep+mask)
		gofs, gn := span(give, give+mask)
		rdSend(b, r, q, ref(from, gofs, gn), tag)
		b.copy(r, ref(acc, ko, kn), ref(from, ko, kn))
		rdRecv(b, r, q, ref(Tmp, tmpOff, kn), tag)
		rdReduce(b, r, ref(acc, ko, kn), ref(Tmp, tmpOff, kn))
		if kn > 0 {
			b.tmpTo(tmpOff, kn)
		}
		from = acc
		tag++
	}
}

// rhdChunks returns span functions over parts nearly equal chunks of n
// elements (chunk): the chunks of i…j−1 as an offset and length, and as a
// Ref into buf.
func rhdChunks(n, parts int, buf Buf) (func(i, j int) (int, int), func(i, j int) Ref) {
	off := func(i int) int { o, _ := chunk(n, parts, min(i, parts)); return o }
	span := func(i, j int) (int, int) { return off(i), off(j) - off(i) }
	return span, func(i, j int) Ref { o, l := span(i, j); return ref(buf, o, l) }
}

// rhdAllReduce is Rabenseifner's all-reduce. Out = In; with a
// non-power-of-two p each even rank r < 2·rem first sends In to r+1
// (tag 0), which folds it in as Out = x[r+1] op x[r] and becomes new rank
// (r+1)/2 (rdFolding). Among the pof2 new ranks Out is cut into pof2
// nearly equal chunks: rhdHalve (tags 1…lg) leaves new rank i with chunk i
// reduced; with avg it divides that chunk; then rdDouble (tags lg+1…2lg)
// gathers the chunks in Out, and rank 2i+1 sends Out to 2i (tag 2lg+1).
// Reduction order: each combine is own partial op incoming partial, and a
// chunk first combines new ranks that differ in the top bit, so for pof2 = 8
// every element is ((y0 op y4) op (y2 op y6)) op ((y1 op y5) op (y3 op y7)),
// y_i = x[2i+1] op x[2i] for i < rem and x[i+rem] otherwise (up to the
// mirror image of each combine, which every reduce op gives bit for bit).
// Every rank receives the owner's tree, so all ranks agree. For a power of
// two p dividing n this costs 2·lg p·α + 2·(p−1)/p·nβ + (p−1)/p·nγ.
func rhdAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	f := newRdFolding(p, 0, true)
	span, chunks := rhdChunks(n, f.pof2, Out)
	all := ref(Out, 0, n)
	post := uint32(2*f.lg + 1)
	for r := range b.ranks() {
		nr, peer := f.newRank(r), f.partner(r)
		if nr < 0 {
			rdSend(b, r, peer, ref(In, 0, n), 0)
			rdRecv(b, r, peer, all, post)
			continue
		}
		foldIn(b, r, peer, n, all)
		rhdHalve(b, f, r, nr, span, Out, Out, 0, 1)
		rdAvg(b, r, chunks(nr, nr+1))
		rdDouble(b, f, r, nr, chunks, uint32(f.lg+1))
		if peer >= 0 {
			rdSend(b, r, peer, all, post)
		}
	}
	return nil
}

// rhdReduceScatter is MPICH's recursive-halving reduce-scatter over the p
// blocks of In (block j, Count elements, is rank j's result). With a
// non-power-of-two p each even rank r < 2·rem sends all of In to r+1
// (tag 0), which receives it into Tmp and folds in its own input as
// x[r] op x[r+1]; new rank i then stands for the contiguous blocks
// [start(i), start(i+1)) (rdFolding). rhdHalve (tags 1…lg) works on those
// block ranges in Tmp[0:p·Count], taking the first step's partials straight
// from In, with incoming halves in Tmp after it; a rank without a pair
// copies its block to Out, and rank 2i+1 copies block 2i+1 and sends block
// 2i to rank 2i (tag lg+1). Each rank divides its Out for avg. Reduction
// order: own partial op incoming, top new-rank bit first, as in
// rhdAllReduce. For a power of two this costs
// lg p·α + (p−1)/p·Nβ + (p−1)/p·Nγ, N = p·Count.
func rhdReduceScatter(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	f := newRdFolding(p, 0, true)
	N := p * n
	span := func(i, j int) (int, int) { return f.start(i) * n, (f.start(j) - f.start(i)) * n }
	out := ref(Out, 0, n)
	post := uint32(f.lg + 1)
	for r := range b.ranks() {
		nr, peer := f.newRank(r), f.partner(r)
		if nr < 0 {
			rdSend(b, r, peer, ref(In, 0, N), 0)
			rdRecv(b, r, peer, out, post)
			rdAvg(b, r, out)
			continue
		}
		from := In
		if peer >= 0 && n > 0 {
			b.tmp(1, N)
			rdRecv(b, r, peer, ref(Tmp, 0, N), 0)
			rdReduce(b, r, ref(Tmp, 0, N), ref(In, 0, N))
			from = Tmp
		}
		if f.pof2 > 1 && n > 0 {
			rhdHalve(b, f, r, nr, span, from, Tmp, N, 1)
			from = Tmp
		}
		if peer >= 0 {
			rdSend(b, r, peer, ref(from, peer*n, n), post)
		}
		b.copy(r, out, ref(from, r*n, n))
		rdAvg(b, r, out)
	}
	return nil
}

// rhdBroadcast is van de Geijn's scatter + all-gather. In root-relative
// ranks v = (r − root) mod p, Out is cut into p nearly equal chunks, chunk
// v for v. A binomial scatter (tag 0) gives v the chunks [v, v+lowbit(v))
// from v − lowbit(v), and v passes [v+m, v+2m) on to v+m for m below its
// lowbit, largest first. Then the chunks are all-gathered in Out: by
// recursive doubling (tags 1…lg) when p is a power of two, else by a ring
// (tags 1…p−1: at step k, v sends chunk v−k to v+1 and receives chunk
// v−k−1 from v−1). For a power of two p dividing n this costs
// 2·lg p·α + 2·(p−1)/p·nβ.
func rhdBroadcast(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	f := newRdFolding(p, root, true)
	_, chunks := rhdChunks(n, p, Out)
	for r := range b.ranks() {
		v := f.virt(r)
		if v == 0 {
			b.copy(r, ref(Out, 0, n), ref(In, 0, n))
		}
		mask := 1
		for ; mask < p; mask *= 2 {
			if v&mask != 0 {
				rdRecv(b, r, f.real(v-mask), chunks(v, min(v+mask, p)), 0)
				break
			}
		}
		for mask /= 2; mask > 0; mask /= 2 {
			if v+mask < p {
				rdSend(b, r, f.real(v+mask), chunks(v+mask, min(v+2*mask, p)), 0)
			}
		}
		if f.rem == 0 {
			rdDouble(b, f, r, v, chunks, 1)
			continue
		}
		for k := 0; k < p-1; k++ {
			s, d := mod(v-k, p), mod(v-k-1, p)
			rdSend(b, r, f.real(v+1), chunks(s, s+1), uint32(1+k))
			rdRecv(b, r, f.real(v-1), chunks(d, d+1), uint32(1+k))
		}
	}
	return nil
}

// rhdReduce is Rabenseifner's reduce: recursive halving, then a binomial
// gather of the chunks to the root. The fold-in works in root-relative
// ranks v = (r − root) mod p with the even rank of each pair keeping, so
// the root is always new rank 0: odd v < 2·rem sends In to v−1 (tag 0),
// which folds it in as x[v−1] op x[v]. Among the pof2 new ranks Out is cut
// into pof2 chunks; rhdHalve (tags 1…lg) leaves chunk i on new rank i, and
// at mask = 1, 2, …, a new rank with the mask bit set sends the chunks it
// holds, [nr, nr+mask), to nr − mask (tag lg+1+k) and stops; otherwise it
// receives [nr+mask, nr+2·mask) into Out. The root divides for avg. Other
// ranks' Out is left holding partials. Reduction order: own partial op
// incoming, top new-rank bit first, as in rhdAllReduce (with
// y_i = x[v=2i] op x[v=2i+1]). For a power of two p dividing n this costs
// 2·lg p·α + 2·(p−1)/p·nβ + (p−1)/p·nγ.
func rhdReduce(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	f := newRdFolding(p, root, false)
	span, chunks := rhdChunks(n, f.pof2, Out)
	all := ref(Out, 0, n)
	for r := range b.ranks() {
		nr, peer := f.newRank(r), f.partner(r)
		if nr < 0 {
			rdSend(b, r, peer, ref(In, 0, n), 0)
			continue
		}
		foldIn(b, r, peer, n, all)
		rhdHalve(b, f, r, nr, span, Out, Out, 0, 1)
		for mask, tag := 1, uint32(f.lg+1); mask < f.pof2; mask, tag = mask*2, tag+1 {
			if nr&mask != 0 {
				rdSend(b, r, f.old(nr-mask), chunks(nr, nr+mask), tag)
				break
			}
			rdRecv(b, r, f.old(nr+mask), chunks(nr+mask, nr+2*mask), tag)
		}
		if r == root {
			rdAvg(b, r, all)
		}
	}
	return nil
}
