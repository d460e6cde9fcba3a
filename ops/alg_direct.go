package ops

const directDoc = "every rank exchanges directly with every other, peers in the order r+1, r+2, …; one lane, sends before receives. " +
	"Reductions fold in rank order: ((x[0] op x[1]) op x[2]) … op x[p−1]"

var directPlans = map[Op]generator{
	AllReduce:     directAllReduce,
	ReduceScatter: directReduceScatter,
	AllGather:     directAllGather,
	Gather:        directGather,
	Broadcast:     directBroadcast,
	Reduce:        directReduce,
	AllToAll:      directAllToAll,
	SendRecv:      directSendRecv,
	Barrier:       directBarrier,
}

// Every direct plan runs on one lane and, in each phase, posts all of a
// rank's sends before its receives: sends are eager, so nothing waits on a
// peer's receive, and a rank's input has been read (sent) before anything
// of it is overwritten, which makes in place safe without staging.

// foldRankOrder emits, for rank r, the reduction of one piece received
// from every rank (own is r's own piece, read in place) into acc, in rank
// order: acc = ((x[0] op x[1]) op x[2]) … op x[p−1]. Pieces from other
// ranks arrive into inc (x[0] straight into acc), with the given tag.
func foldRankOrder(b *builder, r int, own, acc, inc Ref, tag uint32) {
	for q := range b.p.Ranks {
		switch {
		case q == 0 && q == r:
			b.copy(r, acc, own)
		case q == 0:
			b.recv(r, q, acc, tag)
		case q == r:
			b.reduce(r, acc, own)
		default:
			b.recv(r, q, inc, tag)
			b.reduce(r, acc, inc)
		}
	}
}

// directCopyOnly handles p = 1 for the ops whose output is the input
// (reduced or not): Out = In, divided for avg.
func directCopyOnly(b *builder) {
	n := b.p.Count
	b.copy(0, ref(Out, 0, n), ref(In, 0, n))
	b.finishAvg(0, ref(Out, 0, n))
}

// directAllReduce is a direct reduce-scatter of p nearly equal chunks
// (chunk j is reduced by rank j) followed by a direct all-gather of the
// reduced chunks: 2(p−1) messages of about n/p per rank. Reduction order,
// per element: ((x[0] op x[1]) op x[2]) … op x[p−1], in Tmp at the chunk's
// owner, which copies it to Out (dividing there for avg) and sends it to
// everyone; each chunk is reduced once, so every rank holds the same tree.
// Tags: 0 reduce-scatter, 1 all-gather.
func directAllReduce(b *builder) error {
	b.expect(2 * (b.p.Ranks - 1)) // at least a send and a receive per peer
	p, n := b.p.Ranks, b.p.Count
	if p == 1 {
		directCopyOnly(b)
		return nil
	}
	c := func(buf Buf, i int) Ref { off, l := chunk(n, p, mod(i, p)); return ref(buf, off, l) }
	_, maxLen := chunk(n, p, 0)
	b.tmp(2, maxLen)
	for r := range b.ranks() {
		for k := 1; k < p; k++ {
			b.send(r, mod(r+k, p), c(In, r+k), 0)
		}
		l := c(Out, r).Len
		foldRankOrder(b, r, c(In, r), ref(Tmp, 0, l), ref(Tmp, l, l), 0)
		b.copy(r, c(Out, r), ref(Tmp, 0, l))
		b.finishAvg(r, c(Out, r))
		for k := 1; k < p; k++ {
			b.send(r, mod(r+k, p), c(Out, r), 1)
		}
		for k := 1; k < p; k++ {
			b.recv(r, mod(r-k, p), c(Out, r-k), 1)
		}
	}
	return nil
}

// directReduceScatter sends block j of In to rank j, for every j ≠ r, then
// folds block r from every rank. Reduction order:
// ((x[0] op x[1]) op x[2]) … op x[p−1], accumulated in Tmp (in place, Out
// is r's own input block, read by the fold), then copied to Out and
// divided there for avg.
func directReduceScatter(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	if p == 1 {
		directCopyOnly(b)
		return nil
	}
	blk := func(j int) Ref { return ref(In, mod(j, p)*n, n) }
	b.tmp(2, n)
	for r := range b.ranks() {
		for k := 1; k < p; k++ {
			b.send(r, mod(r+k, p), blk(r+k), 0)
		}
		foldRankOrder(b, r, blk(r), ref(Tmp, 0, n), ref(Tmp, n, n), 0)
		b.copy(r, ref(Out, 0, n), ref(Tmp, 0, n))
		b.finishAvg(r, ref(Out, 0, n))
	}
	return nil
}

// directAllGather: rank r places In as block r of Out, sends In to every
// other rank and receives block q from rank q, for q = r−1, r−2, … (the
// order in which they are sent to r).
func directAllGather(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	for r := range b.ranks() {
		b.copy(r, ref(Out, r*n, n), ref(In, 0, n))
		for k := 1; k < p; k++ {
			b.send(r, mod(r+k, p), ref(In, 0, n), 0)
		}
		for k := 1; k < p; k++ {
			q := mod(r-k, p)
			b.recv(r, q, ref(Out, q*n, n), 0)
		}
	}
	return nil
}

// directGather: every rank sends In to the root, which places its own
// block and receives block q from rank q, for q = root+1, root+2, ….
func directGather(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	for r := range b.ranks() {
		if r != root {
			b.send(r, root, ref(In, 0, n), 0)
			continue
		}
		b.copy(r, ref(Out, r*n, n), ref(In, 0, n))
		for k := 1; k < p; k++ {
			q := mod(r+k, p)
			b.recv(r, q, ref(Out, q*n, n), 0)
		}
	}
	return nil
}

// directBroadcast: the root copies In to Out and sends it to root+1,
// root+2, …; every other rank receives Out from the root.
func directBroadcast(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	all := ref(Out, 0, n)
	for r := range b.ranks() {
		if r != root {
			b.recv(r, root, all, 0)
			continue
		}
		b.copy(r, all, ref(In, 0, n))
		for k := 1; k < p; k++ {
			b.send(r, mod(r+k, p), all, 0)
		}
	}
	return nil
}

// directReduce: every rank sends In to the root, which folds them in rank
// order: ((x[0] op x[1]) op x[2]) … op x[p−1], in Tmp, then copies the
// result to Out and divides there for avg.
func directReduce(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	if p == 1 {
		directCopyOnly(b)
		return nil
	}
	b.tmp(2, n)
	for r := range b.ranks() {
		if r != root {
			b.send(r, root, ref(In, 0, n), 0)
			continue
		}
		foldRankOrder(b, r, ref(In, 0, n), ref(Tmp, 0, n), ref(Tmp, n, n), 0)
		b.copy(r, ref(Out, 0, n), ref(Tmp, 0, n))
		b.finishAvg(r, ref(Out, 0, n))
	}
	return nil
}

// directAllToAll: rank r copies its own block, sends block j of In to rank
// j for j = r+1, r+2, …, then receives block q of Out from rank q for
// q = r−1, r−2, …. All sends precede the receives on the one lane, so In
// is fully read before Out (the same memory in place) is written: no Tmp.
func directAllToAll(b *builder) error {
	b.expect(2 * (b.p.Ranks - 1)) // at least a send and a receive per peer
	p, n := b.p.Ranks, b.p.Count
	blk := func(buf Buf, j int) Ref { return ref(buf, mod(j, p)*n, n) }
	for r := range b.ranks() {
		b.copy(r, blk(Out, r), blk(In, r))
		for k := 1; k < p; k++ {
			b.send(r, mod(r+k, p), blk(In, r+k), 0)
		}
		for k := 1; k < p; k++ {
			b.recv(r, mod(r-k, p), blk(Out, r-k), 0)
		}
	}
	return nil
}

// directSendRecv: rank r sends In to r+1, then receives Out from r−1 (the
// send comes first, so in place needs no staging); with p = 1 it is a copy.
func directSendRecv(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	if p == 1 {
		directCopyOnly(b)
		return nil
	}
	for r := range b.ranks() {
		b.send(r, mod(r+1, p), ref(In, 0, n), 0)
		b.recv(r, mod(r-1, p), ref(Out, 0, n), 0)
	}
	return nil
}

// directBarrier: a zero-length message to every other rank (r+1, r+2, …),
// then one from every other rank (r−1, r−2, …).
func directBarrier(b *builder) error {
	p := b.p.Ranks
	none := ref(In, 0, 0)
	for r := range b.ranks() {
		for k := 1; k < p; k++ {
			b.send(r, mod(r+k, p), none, 0)
		}
		for k := 1; k < p; k++ {
			b.recv(r, mod(r-k, p), none, 0)
		}
	}
	return nil
}
