package ops

const dbtreeDoc = "NCCL-style double binary tree, unpipelined: half h of the data goes up/down tree h on lane h, " +
	"the trees' interior nodes being (mostly) each other's leaves. A node folds its children in order: (x[v] op T[child0]) op T[child1]"

var dbtreePlans = map[Op]generator{
	AllReduce: dbtreeAllReduce,
	Broadcast: dbtreeBroadcast,
	Reduce:    dbtreeReduce,
}

// dtree is one binary tree over the p ranks: NCCL's binary tree over
// labels 0…n−1 (n = p, or p−1 under a root set on top), mapped onto ranks.
// Links are found per rank in O(log p), so a streamed plan's rank makes
// its steps without building the whole tree.
type dtree struct {
	p, n  int
	root  int             // the rank at the top
	rank  func(v int) int // label → rank
	label func(r int) int // rank → label; −1 for a root set above label 0
}

// btreeLinks are label v's links in ncclBtree over n labels
// (ncclGetBtree in src/graph/trees.cc). Label 0 is the root and has one
// child, the largest power of two below n. Any other label v with lowest
// set bit `bit` has parent (v ^ bit) | (bit << 1), or v ^ bit when that is
// out of range; with low = bit/2 > 0 its children are v − low (child 0)
// and v + l (child 1) for the largest power of two l <= low with v + l < n,
// if any. So the interior nodes are the even labels and the leaves the odd
// ones:
//
//	0---------------8
//	         ______/ \______
//	        4               12
//	      /   \            /  \
//	    2       6       10     \
//	   / \     / \     /  \     \
//	  1   3   5   7   9   11    13
func btreeLinks(n, v int) (parent int, kids [2]int, nkids int) {
	bit := 1
	for bit < n && v&bit == 0 {
		bit <<= 1
	}
	if v == 0 {
		if n > 1 {
			return -1, [2]int{bit >> 1}, 1
		}
		return -1, kids, 0
	}
	parent = (v ^ bit) | (bit << 1)
	if parent >= n {
		parent = v ^ bit
	}
	low := bit >> 1
	if low == 0 {
		return parent, kids, 0
	}
	kids[0], nkids = v-low, 1
	for l := low; l > 0; l >>= 1 {
		if v+l < n {
			kids[1], nkids = v+l, 2
			break
		}
	}
	return parent, kids, nkids
}

// ncclBtree is btreeLinks over p labels, each label its own rank.
func ncclBtree(p int) dtree {
	id := func(v int) int { return v }
	return dtree{p: p, n: p, root: 0, rank: id, label: id}
}

// rankTree is a tree through the ranks: dtree, chainTree.
type rankTree interface {
	parentOf(r int) int
	kidsOf(r int) []int
}

// parentOf is rank r's parent, −1 at the root.
func (t dtree) parentOf(r int) int {
	v := t.label(r)
	switch {
	case v < 0:
		return -1
	case v == 0:
		if top := t.rank(0); top != t.root {
			return t.root
		}
		return -1
	}
	parent, _, _ := btreeLinks(t.n, v)
	return t.rank(parent)
}

// kidsOf is rank r's children in fold order: child 0, then child 1.
func (t dtree) kidsOf(r int) []int {
	v := t.label(r)
	if v < 0 {
		return []int{t.rank(0)}
	}
	_, kids, n := btreeLinks(t.n, v)
	out := make([]int, n)
	for i := range out {
		out[i] = t.rank(kids[i])
	}
	return out
}

// dbtreeAllReduceTrees are NCCL's two trees (ncclGetDtree): tree 0 is
// ncclBtree(p) on the ranks as they are, rooted at rank 0. Tree 1 is the
// same tree mirrored, label v on rank p−1−v, when p is even (rooted at
// p−1; its interior nodes are the odd ranks, tree 0's leaves), and shifted
// by one, label v on rank v+1 mod p, when p is odd (rooted at 1; interior
// nodes are the odd ranks and rank 0).
func dbtreeAllReduceTrees(p int) [2]dtree {
	t0 := ncclBtree(p)
	if p%2 == 0 {
		mirror := func(v int) int { return p - 1 - v }
		return [2]dtree{t0, {p: p, n: p, root: p - 1, rank: mirror, label: mirror}}
	}
	return [2]dtree{t0, {p: p, n: p, root: 1 % p,
		rank: func(v int) int { return (v + 1) % p }, label: func(r int) int { return mod(r-1, p) }}}
}

// dbtreeRootedTrees are two trees that both have root at the top. NCCL's
// mirror or shift would move the root, and any rotation that brings it
// back also brings tree 1's interior nodes back onto tree 0's, so instead,
// in root-relative ranks vr = (r − root) mod p:
//
//   - tree 0 is ncclBtree(p) on the vr: interior nodes even vr, leaves odd;
//   - tree 1 is the root alone on top of ncclBtree(p−1) on vr−1 (the rest
//     of the ranks shifted by one): its root's single child is vr 1, its
//     interior nodes are vr 0 and the odd vr, its leaves the even vr >= 2.
//
// So every leaf of tree 0 is interior in tree 1 and vice versa, except vr
// 0, which is the root of both.
func dbtreeRootedTrees(p, root int) [2]dtree {
	t0 := dtree{p: p, n: p, root: root,
		rank: func(v int) int { return mod(v+root, p) }, label: func(r int) int { return mod(r-root, p) }}
	if p == 1 {
		return [2]dtree{t0, t0}
	}
	t1 := dtree{p: p, n: p - 1, root: root,
		rank: func(v int) int { return mod(v+1+root, p) }, label: func(r int) int { return mod(r-root, p) - 1 }}
	return [2]dtree{t0, t1}
}

// laneBuilder adds steps on one lane.
type laneBuilder struct {
	b    *builder
	lane int
}

func (l laneBuilder) send(r, peer int, src Ref, tag uint32) {
	l.b.add(r, Step{Kind: StepSend, Peer: peer, Src: src, Tag: tag, Lane: l.lane})
}

func (l laneBuilder) recv(r, peer int, dst Ref, tag uint32) {
	l.b.add(r, Step{Kind: StepRecv, Peer: peer, Dst: dst, Tag: tag, Lane: l.lane})
}

func (l laneBuilder) reduce(r int, dst, src Ref) {
	l.b.add(r, Step{Kind: StepReduce, Dst: dst, Src: src, Lane: l.lane})
}

func (l laneBuilder) copy(r int, dst, src Ref) {
	if dst != src && dst.Len > 0 {
		l.b.add(r, Step{Kind: StepCopy, Dst: dst, Src: src, Lane: l.lane})
	}
}

func (l laneBuilder) finishAvg(r int, dst Ref) {
	if isAvg(l.b.p.Spec) {
		l.b.add(r, Step{Kind: StepDivide, Dst: dst, Lane: l.lane})
	}
}

// dbtreeHalves calls f for each half h of the n elements that is not
// empty, with half h's range at offset off: chunk(n, 2, h), so half 0 has
// the odd element. Half h travels on tree h, on lane h.
func dbtreeHalves(b *builder, n int, f func(h, off, l int)) {
	for h := range b.lanes(2) {
		if off, l := chunk(n, 2, h); l > 0 {
			f(h, off, l)
		}
	}
}

// dtreeUp emits rank r's reduction up tree t on lane l: with children, r
// copies own into acc and folds each child's partial, received into inc,
// child 0 first (acc = acc op inc); a leaf's partial is own itself. A
// non-root sends its partial to its parent. It returns the partial.
func dtreeUp(l laneBuilder, t rankTree, r int, own, acc, inc Ref, tag uint32) Ref {
	cur := own
	for _, k := range t.kidsOf(r) {
		if cur == own {
			l.copy(r, acc, own)
			cur = acc
		}
		l.recv(r, k, inc, tag)
		l.reduce(r, acc, inc)
	}
	if parent := t.parentOf(r); parent >= 0 {
		l.send(r, parent, cur, tag)
	}
	return cur
}

// dtreeDown emits rank r's broadcast down tree t on lane l: receive buf
// from the parent (not at the root), then send it to child 0, child 1.
func dtreeDown(l laneBuilder, t rankTree, r int, buf Ref, tag uint32) {
	if parent := t.parentOf(r); parent >= 0 {
		l.recv(r, parent, buf, tag)
	}
	for _, k := range t.kidsOf(r) {
		l.send(r, k, buf, tag)
	}
}

// dbtreeAllReduce reduces half h up tree h of dbtreeAllReduceTrees and
// broadcasts it back down, both halves concurrently on their own lanes.
// Reduction order, per element of half h: the partial of node v is
// T[v] = (x[v] op T[child0]) op T[child1], so the element is T[root of tree
// h], computed once at that root (and divided there for avg) and
// broadcast, so every rank holds the same tree. A node accumulates in its
// half of Out (every rank overwrites Out, and In is read only to start the
// partial, so in place is safe) and receives children in its half of Tmp.
// Tags: 2h up tree h, 2h+1 down.
func dbtreeAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	trees := dbtreeAllReduceTrees(p)
	if p > 1 {
		b.tmp(1, n)
	}
	dbtreeHalves(b, n, func(h, off, ln int) {
		t, l := trees[h], laneBuilder{b, h}
		for r := range b.ranks() {
			acc := ref(Out, off, ln)
			res := dtreeUp(l, t, r, ref(In, off, ln), acc, ref(Tmp, off, ln), uint32(2*h))
			if r == t.root {
				l.copy(r, acc, res)
				l.finishAvg(r, acc)
			}
			dtreeDown(l, t, r, acc, uint32(2*h+1))
		}
	})
	return nil
}

// dbtreeBroadcast sends half h of the root's data down tree h of
// dbtreeRootedTrees, both halves concurrently on their own lanes: the
// root copies In to Out, every other rank receives its half of Out from
// its parent and forwards it to child 0, then child 1.
func dbtreeBroadcast(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	trees := dbtreeRootedTrees(p, root)
	dbtreeHalves(b, n, func(h, off, ln int) {
		l := laneBuilder{b, h}
		for r := range b.ranks() {
			if r == root {
				l.copy(r, ref(Out, off, ln), ref(In, off, ln))
			}
			dtreeDown(l, trees[h], r, ref(Out, off, ln), uint32(h))
		}
	})
	return nil
}

// dbtreeReduce reduces half h up tree h of dbtreeRootedTrees, both halves
// concurrently on their own lanes. Reduction order, per element of half h:
// T[v] = (x[v] op T[child0]) op T[child1], the root holding T[root] (it
// has one child in each tree: x[root] op T[child]). Partials accumulate
// in Tmp (a non-root's Out is its input in place); the root copies its
// result to Out and divides there for avg.
func dbtreeReduce(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	trees := dbtreeRootedTrees(p, root)
	if p > 1 {
		b.tmp(2, n)
	}
	dbtreeHalves(b, n, func(h, off, ln int) {
		l := laneBuilder{b, h}
		for r := range b.ranks() {
			res := dtreeUp(l, trees[h], r, ref(In, off, ln), ref(Tmp, off, ln), ref(Tmp, n+off, ln), uint32(h))
			if r == root {
				l.copy(r, ref(Out, off, ln), res)
				l.finishAvg(r, ref(Out, off, ln))
			}
		}
	})
	return nil
}
