package ops

const rdDoc = "recursive doubling, MPICH fold-in for non-power-of-two p: allreduce swaps whole vectors, " +
	"each rank doing own op partner's, so every element is the balanced tree ((x0 op x1) op (x2 op x3)) …; " +
	"allgather doubles block ranges; barrier is dissemination"

var rdPlans = map[Op]generator{
	AllReduce: rdAllReduce,
	AllGather: rdAllGather,
	Barrier:   rdBarrier,
}

// rdFolding is MPICH's pre- and post-processing that lets a power-of-two
// algorithm run on any p. With pof2 the largest power of two <= p and
// rem = p − pof2, ranks are numbered virtually, v = (r − base) mod p; the
// first 2·rem virtual ranks pair up as (2i, 2i+1), i < rem, and one rank of
// each pair (the giver) hands its data to the other (the keeper) and sits
// out. The pof2 survivors get new ranks 0…pof2−1: keeper of pair i is new
// rank i, and virtual rank v >= 2·rem is new rank v − rem. Either way new
// rank order follows virtual rank order, so with base 0 new rank i stands
// for the contiguous old ranks [start(i), start(i+1)).
type rdFolding struct {
	p, pof2, rem, lg int
	base             int  // virtual rank 0 is real rank base
	keepOdd          bool // in each pair, the odd virtual rank keeps
}

func newRdFolding(p, base int, keepOdd bool) rdFolding {
	f := rdFolding{p: p, pof2: pof2(p), base: base, keepOdd: keepOdd}
	f.rem = p - f.pof2
	for 1<<f.lg < f.pof2 {
		f.lg++
	}
	return f
}

func (f rdFolding) virt(r int) int { return mod(r-f.base, f.p) }
func (f rdFolding) real(v int) int { return mod(v+f.base, f.p) }

// newRank is r's rank among the pof2 survivors, or −1 for a giver.
func (f rdFolding) newRank(r int) int {
	v := f.virt(r)
	switch {
	case v >= 2*f.rem:
		return v - f.rem
	case (v%2 == 1) == f.keepOdd:
		return v / 2
	}
	return -1
}

// partner is the other rank of r's pair, or −1 when r is not paired.
func (f rdFolding) partner(r int) int {
	if v := f.virt(r); v < 2*f.rem {
		return f.real(v ^ 1)
	}
	return -1
}

// old is the real rank that new rank i runs on.
func (f rdFolding) old(i int) int {
	if i < f.rem {
		v := 2 * i
		if f.keepOdd {
			v++
		}
		return f.real(v)
	}
	return f.real(i + f.rem)
}

// start is the first virtual rank new rank i stands for; start(pof2) = p.
func (f rdFolding) start(i int) int {
	if i < f.rem {
		return 2 * i
	}
	return i + f.rem
}

// rdSend, rdRecv and rdReduce add a step unless its range is empty. Both
// ends of a transfer compute the same length from the spec, so an empty
// message is left out on both sides (counts below p, count 0).
func rdSend(b *builder, r, peer int, src Ref, tag uint32) {
	if src.Len > 0 {
		b.send(r, peer, src, tag)
	}
}

func rdRecv(b *builder, r, peer int, dst Ref, tag uint32) {
	if dst.Len > 0 {
		b.recv(r, peer, dst, tag)
	}
}

func rdReduce(b *builder, r int, dst, src Ref) {
	if dst.Len > 0 {
		b.reduce(r, dst, src)
	}
}

// foldIn starts a surviving rank's vector all (n elements): its own input,
// then, when it stands for an extra rank too (peer >= 0), that rank's vector
// received into Tmp (tag 0) and folded in as all op Tmp.
func foldIn(b *builder, r, peer, n int, all Ref) {
	b.copy(r, all, ref(In, 0, n))
	if peer >= 0 && n > 0 {
		b.tmp(1, n)
		rdRecv(b, r, peer, ref(Tmp, 0, n), 0)
		rdReduce(b, r, all, ref(Tmp, 0, n))
	}
}

// rdAvg divides dst once when the plan averages.
func rdAvg(b *builder, r int, dst Ref) {
	if dst.Len > 0 {
		b.finishAvg(r, dst)
	}
}

// rdDouble is an all-gather by recursive doubling among the pof2 new ranks
// of f: span(i, j) is the range of buf holding the data of new ranks
// i…j−1. At mask = 1, 2, …, pof2/2 new rank nr sends the range of its
// group of mask new ranks to new rank nr^mask and receives that rank's
// group range in place. Tags run from tag; it returns the next free one.
func rdDouble(b *builder, f rdFolding, r, nr int, span func(i, j int) Ref, tag uint32) uint32 {
	for mask := 1; mask < f.pof2; mask *= 2 {
		lo, q := nr&^(mask-1), nr^mask
		qlo := q &^ (mask - 1)
		rdSend(b, r, f.old(q), span(lo, lo+mask), tag)
		rdRecv(b, r, f.old(q), span(qlo, qlo+mask), tag)
		tag++
	}
	return tag
}

// rdAllReduce is recursive doubling on whole vectors. Out = In; then, with
// a non-power-of-two p, each even rank r < 2·rem sends In to r+1 (tag 0)
// and waits, and r+1 folds it in: Out = x[r+1] op x[r]. Among the pof2
// survivors (new ranks, rdFolding), at step k (mask 2^k, tag k+1) new rank
// nr sends Out to nr^mask, receives that rank's Out into Tmp and combines
// Out = Out op Tmp: its own partial is the left operand. So every element
// is the balanced binary tree over new ranks in order,
// ((y0 op y1) op (y2 op y3)) op …, with y_i = x[2i+1] op x[2i] for i < rem
// and y_i = x[i+rem] otherwise; partners hold mirror images of each
// combine, which every reduce op gives bit for bit. With avg each
// survivor divides Out; then rank 2i+1 sends the result to 2i (tag lg+1).
// For a power of two this costs lg p·α + n·lg p·β + n·lg p·γ.
func rdAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	f := newRdFolding(p, 0, true)
	all, tmp := ref(Out, 0, n), ref(Tmp, 0, n)
	post := uint32(f.lg + 1)
	if p > 1 && n > 0 {
		b.tmp(1, n)
	}
	for r := range b.ranks() {
		nr, peer := f.newRank(r), f.partner(r)
		if nr < 0 {
			rdSend(b, r, peer, ref(In, 0, n), 0)
			rdRecv(b, r, peer, all, post)
			continue
		}
		foldIn(b, r, peer, n, all)
		for mask, tag := 1, uint32(1); mask < f.pof2; mask, tag = mask*2, tag+1 {
			q := f.old(nr ^ mask)
			rdSend(b, r, q, all, tag)
			rdRecv(b, r, q, tmp, tag)
			rdReduce(b, r, all, tmp)
		}
		rdAvg(b, r, all)
		if peer >= 0 {
			rdSend(b, r, peer, all, post)
		}
	}
	return nil
}

// rdAllGather is recursive doubling on block ranges of Out. Each rank
// places its block; with a non-power-of-two p each even rank r < 2·rem
// sends its block to r+1 (tag 0), which stores it, so new rank i holds the
// contiguous blocks of old ranks [start(i), start(i+1)). The survivors
// then double (rdDouble) directly in Out, and rank 2i+1 finally sends the
// whole of Out to 2i (tag lg+1). For a power of two this costs
// lg p·α + (p−1)/p·nβ, n the gathered size.
func rdAllGather(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	f := newRdFolding(p, 0, true)
	span := func(i, j int) Ref { return ref(Out, f.start(i)*n, (f.start(j)-f.start(i))*n) }
	post := uint32(f.lg + 1)
	for r := range b.ranks() {
		nr, peer := f.newRank(r), f.partner(r)
		if nr < 0 {
			rdSend(b, r, peer, ref(In, 0, n), 0)
			rdRecv(b, r, peer, ref(Out, 0, p*n), post)
			continue
		}
		b.copy(r, ref(Out, r*n, n), ref(In, 0, n))
		if peer >= 0 {
			rdRecv(b, r, peer, ref(Out, peer*n, n), 0)
		}
		rdDouble(b, f, r, nr, span, 1)
		if peer >= 0 {
			rdSend(b, r, peer, ref(Out, 0, p*n), post)
		}
	}
	return nil
}

// rdBarrier is the dissemination barrier, for any p: in round k (tag k),
// while 2^k < p, rank r sends an empty message to r+2^k and receives one
// from r−2^k, so after ceil(lg p) rounds it has heard from every rank.
func rdBarrier(b *builder) error {
	p := b.p.Ranks
	none := ref(Tmp, 0, 0)
	for r := range b.ranks() {
		for d, k := 1, uint32(0); d < p; d, k = d*2, k+1 {
			b.send(r, mod(r+d, p), none, k)
			b.recv(r, mod(r-d, p), none, k)
		}
	}
	return nil
}
