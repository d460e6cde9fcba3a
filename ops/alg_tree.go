package ops

const treeDoc = "binomial trees (MPICH) in root-relative ranks vr = (r−root) mod p; allreduce = reduce to 0 then broadcast from 0. " +
	"A node folds its children's subtrees into its own data nearest first: ((x[vr] op T[vr+1]) op T[vr+2]) op T[vr+4] …"

var treePlans = map[Op]generator{
	AllReduce: treeAllReduce,
	Broadcast: treeBroadcast,
	Reduce:    treeReduce,
	Gather:    treeGather,
	Barrier:   treeBarrier,
}

// The binomial tree over p ranks, in root-relative ranks vr (the root is
// vr 0): the parent of vr is vr with its lowest set bit cleared, and the
// children of vr are vr+1, vr+2, vr+4, … below vr's lowest set bit (below
// p for the root) and below p. The subtree of vr holds the contiguous
// ranks vr … vr+min(lowbit(vr), p−vr)−1.

// binomialUp returns vr's parent (−1 for the root) and vr's lowest set bit;
// for the root the "bit" is the smallest power of two >= p, so that in both
// cases the children are vr+m for the powers of two m < bit with vr+m < p.
func binomialUp(vr, p int) (parent, bit int) {
	for bit = 1; bit < p; bit <<= 1 {
		if vr&bit != 0 {
			return vr - bit, bit
		}
	}
	return -1, bit
}

// binomialKids lists vr's children nearest first (vr+1, vr+2, vr+4, …),
// the order in which a reduction folds them.
func binomialKids(vr, p int) []int {
	_, bit := binomialUp(vr, p)
	var kids []int
	for m := 1; m < bit && vr+m < p; m <<= 1 {
		kids = append(kids, vr+m)
	}
	return kids
}

// binomialBcast emits rank r's part of a binomial broadcast of buf from
// root: receive buf from the parent, then send it to the children farthest
// first (decreasing mask, as MPICH does), so the largest subtree starts
// earliest.
func binomialBcast(b *builder, r, root int, buf Ref, tag uint32) {
	p := b.p.Ranks
	vr := mod(r-root, p)
	toRank := func(v int) int { return mod(v+root, p) }
	if parent, _ := binomialUp(vr, p); parent >= 0 {
		b.recv(r, toRank(parent), buf, tag)
	}
	kids := binomialKids(vr, p)
	for i := len(kids) - 1; i >= 0; i-- {
		b.send(r, toRank(kids[i]), buf, tag)
	}
}

// binomialReduce emits rank r's part of a binomial reduction toward root
// and returns where r's partial result lies: own when r has no children
// (a leaf sends its input as it is), acc otherwise. A node with children
// copies own into acc, then for each child nearest first receives the
// child's partial into inc and folds it in (acc = acc op inc); a non-root
// then sends its partial to its parent.
func binomialReduce(b *builder, r, root int, own, acc, inc Ref, tag uint32) Ref {
	p := b.p.Ranks
	vr := mod(r-root, p)
	toRank := func(v int) int { return mod(v+root, p) }
	cur := own
	for _, k := range binomialKids(vr, p) {
		if cur == own {
			b.copy(r, acc, own)
			cur = acc
		}
		b.recv(r, toRank(k), inc, tag)
		b.reduce(r, acc, inc)
	}
	if parent, _ := binomialUp(vr, p); parent >= 0 {
		b.send(r, toRank(parent), cur, tag)
	}
	return cur
}

// treeBroadcast is the binomial broadcast (lg p·α + n·lg p·β for p a power
// of two): the root copies In to Out, every other rank receives Out from
// its parent, and each rank forwards Out to its children farthest first.
func treeBroadcast(b *builder) error {
	n, root := b.p.Count, b.p.Root
	all := ref(Out, 0, n)
	for r := range b.ranks() {
		if r == root {
			b.copy(r, all, ref(In, 0, n))
		}
		binomialBcast(b, r, root, all, 0)
	}
	return nil
}

// treeReduce is the binomial reduce (lg p·α + n·lg p·β + n·lg p·γ for p a
// power of two). Reduction order: the partial of vr is T[vr] =
// ((x[vr] op T[vr+1]) op T[vr+2]) op T[vr+4] … over its children nearest
// first, so the root holds ((x[root] op T[1]) op T[2]) op T[4] … in
// root-relative ranks. Partials accumulate in Tmp, never in Out (in place
// Out is a non-root's input); the root copies its result to Out and, for
// avg, divides there.
func treeReduce(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	if p > 1 {
		b.tmp(2, n)
	}
	for r := range b.ranks() {
		res := binomialReduce(b, r, root, ref(In, 0, n), ref(Tmp, 0, n), ref(Tmp, n, n), 0)
		if r == root {
			b.copy(r, ref(Out, 0, n), res)
			b.finishAvg(r, ref(Out, 0, n))
		}
	}
	return nil
}

// treeAllReduce is a binomial reduce to rank 0 followed by a binomial
// broadcast from rank 0 (2·lg p·α + 2n·lg p·β + n·lg p·γ for p a power of
// two). Reduction order: that of treeReduce with root 0,
// ((x[0] op T[1]) op T[2]) op T[4] …, computed once by rank 0 (and divided
// there for avg) and broadcast, so every rank holds the same tree. Here a
// node accumulates in Out: every rank overwrites Out anyway and reads In
// only to start its partial, so in place is safe; Tmp receives children.
func treeAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	all := ref(Out, 0, n)
	if p > 1 {
		b.tmp(1, n)
	}
	for r := range b.ranks() {
		res := binomialReduce(b, r, 0, ref(In, 0, n), all, ref(Tmp, 0, n), 0)
		if r == 0 {
			b.copy(r, all, res)
			b.finishAvg(r, all)
		}
		binomialBcast(b, r, 0, all, 1)
	}
	return nil
}

// treeGather is the binomial gather (lg p·α + (p−1)·count·β for p a power
// of two): a subtree's blocks travel together, in vr order, so each node
// keeps its subtree's blocks contiguous: its own block first, then each
// child's subtree received right after it (child vr+m's blocks at m·count).
// Leaves send In directly. Non-roots stage in Tmp (in place, Out holds a
// non-root's input). Root 0 gathers straight into Out, whose order is then
// the vr order; any other root gathers in Tmp and rotates the blocks into
// Out by real rank at the end (its own In is read before Out is written).
func treeGather(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	toRank := func(v int) int { return mod(v+root, p) }
	for r := range b.ranks() {
		vr := mod(r-root, p)
		parent, bit := binomialUp(vr, p)
		kids := binomialKids(vr, p)
		own := ref(In, 0, n)
		if len(kids) == 0 {
			if parent >= 0 {
				b.send(r, toRank(parent), own, 0)
			} else {
				b.copy(r, ref(Out, r*n, n), own) // p = 1
			}
			continue
		}
		size := min(bit, p-vr) // blocks in vr's subtree
		stage := Tmp
		if vr == 0 && root == 0 {
			stage = Out
		} else {
			b.tmp(size, n)
		}
		b.copy(r, ref(stage, 0, n), own)
		for _, k := range kids {
			m := k - vr
			b.recv(r, toRank(k), ref(stage, m*n, min(m, p-k)*n), 0)
		}
		if parent >= 0 {
			b.send(r, toRank(parent), ref(stage, 0, size*n), 0)
			continue
		}
		if stage == Tmp { // vr v goes to Out block (v+root) mod p
			b.copy(r, ref(Out, root*n, (p-root)*n), ref(Tmp, 0, (p-root)*n))
			b.copy(r, ref(Out, 0, root*n), ref(Tmp, (p-root)*n, root*n))
		}
	}
	return nil
}

// treeBarrier is a zero-length binomial gather to rank 0 (each node hears
// from all its children, nearest first, then tells its parent) followed by
// a zero-length binomial broadcast from rank 0: 2·lg p·α for p a power of
// two.
func treeBarrier(b *builder) error {
	p := b.p.Ranks
	none := ref(In, 0, 0)
	for r := range b.ranks() {
		for _, k := range binomialKids(r, p) {
			b.recv(r, k, none, 0)
		}
		if parent, _ := binomialUp(r, p); parent >= 0 {
			b.send(r, parent, none, 0)
		}
		binomialBcast(b, r, 0, none, 1)
	}
	return nil
}
