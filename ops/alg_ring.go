package ops

const ringDoc = "textbook unidirectional ring, unpipelined: rank i sends to i+1. " +
	"A reduced chunk is combined as it travels: ((x[c+1] op x[c+2]) op x[c+3]) … ending at rank c, for chunk c"

var ringPlans = map[Op]generator{
	AllReduce:     ringAllReduce,
	ReduceScatter: ringReduceScatter,
	AllGather:     ringAllGather,
	Broadcast:     ringBroadcast,
	Reduce:        ringReduce,
}

// ringAllReduce is p−1 reduce-scatter steps then p−1 all-gather steps, each
// moving one of p nearly equal chunks of Out. At reduce-scatter step k,
// rank r sends chunk r−k and folds the incoming chunk r−k−1 into its own:
// chunk[c] = chunk[c] op incoming, so chunk c ends complete at rank c−1,
// holding x[c] op (x[c−1] op (… op x[c+1])) (the incoming partial is always
// the right operand). With avg, the owner divides its chunk before the
// all-gather.
func ringAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	_, maxLen := chunk(n, p, 0)
	b.tmp(1, maxLen)
	steps := 5*(p-1) + 1 // and the division of an average
	if isAvg(b.p.Spec) {
		steps++
	}
	b.reserve(steps)
	for r := range b.ranks() {
		b.copy(r, ref(Out, 0, n), ref(In, 0, n))
		ringAllReducePass(laneBuilder{b, 0}, ring{}, r, ref(Out, 0, n), ref(Tmp, 0, maxLen), 0)
	}
	return nil
}

// ringReduceScatter: at step k rank r sends its partial of block r−k−1 and
// receives the partial of block r−k−2, folding in its own input block:
// partial = incoming op x[r][block]. After p−1 steps rank r holds block r,
// reduced as (((x[r+1] op x[r+2]) op …) op x[r]).
func ringReduceScatter(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	in := func(blk int) Ref { return ref(In, mod(blk, p)*n, n) }
	half := func(k int) Ref { return ref(Tmp, (k%2)*n, n) }
	b.tmp(2, n)
	b.expect(2 * (p - 1)) // a send and a receive a step
	for r := range b.ranks() {
		if p == 1 {
			b.copy(r, ref(Out, 0, n), in(0))
			b.finishAvg(r, ref(Out, 0, n))
			continue
		}
		for k := 0; k < p-1; k++ {
			src := in(r - 1)
			if k > 0 {
				src = half(k - 1)
			}
			b.send(r, mod(r+1, p), src, uint32(k))
			b.recv(r, mod(r-1, p), half(k), uint32(k))
			b.reduce(r, half(k), in(r-k-2))
		}
		b.copy(r, ref(Out, 0, n), half(p-2))
		b.finishAvg(r, ref(Out, 0, n))
	}
	return nil
}

// ringAllGather: rank r places its block, then at step k forwards block
// r−k and receives block r−k−1 straight into Out.
func ringAllGather(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	blk := func(i int) Ref { return ref(Out, mod(i, p)*n, n) }
	b.expect(2 * (p - 1)) // a send and a receive a step
	for r := range b.ranks() {
		b.copy(r, blk(r), ref(In, 0, n))
		for k := 0; k < p-1; k++ {
			b.send(r, mod(r+1, p), blk(r-k), uint32(k))
			b.recv(r, mod(r-1, p), blk(r-k-1), uint32(k))
		}
	}
	return nil
}

// ringBroadcast is a chain from the root: each rank receives the whole
// buffer from its predecessor and forwards it, unpipelined.
func ringBroadcast(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	all := ref(Out, 0, n)
	for r := range b.ranks() {
		v := mod(r-root, p)
		if v == 0 {
			b.copy(r, all, ref(In, 0, n))
		} else {
			b.recv(r, mod(r-1, p), all, 0)
		}
		if v < p-1 {
			b.send(r, mod(r+1, p), all, 0)
		}
	}
	return nil
}

// ringReduce is a chain toward the root: rank root−1 starts and sends to
// root−2, each rank folds the partial it received into its input (own op
// incoming) and passes it on, so the root holds
// x[root] op (x[root+1] op (… op x[root−1])).
func ringReduce(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	acc, inc := ref(Tmp, 0, n), ref(Tmp, n, n)
	b.tmp(2, n)
	for r := range b.ranks() {
		v := mod(r-root, p) // distance after the root; v = p−1 starts
		b.copy(r, acc, ref(In, 0, n))
		if v != p-1 {
			b.recv(r, mod(r+1, p), inc, 0)
			b.reduce(r, acc, inc)
		}
		if v != 0 {
			b.send(r, mod(r-1, p), acc, 0)
			continue
		}
		b.copy(r, ref(Out, 0, n), acc)
		b.finishAvg(r, ref(Out, 0, n))
	}
	return nil
}
