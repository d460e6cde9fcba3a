package ops

const ncclTreeDoc = "NCCL's tree all-reduce: the data split over Spec.Channels channels, each its own lane; " +
	"within a node a chain from the channel's head GPU, across nodes NCCL's double binary tree of the heads " +
	"(even channels on one tree, odd on the other), moving Spec.Chunk elements at a time, reduced up and broadcast down"

var ncclTreePlans = map[Op]generator{AllReduce: ncclTreeAllReduce}

// chainTree is channel c's tree through the ranks: node k's ranks are a
// chain from local index head, the head of each node joined to the heads
// of its parent and children in a binary tree over the nodes.
type chainTree struct {
	nodes dtree // over node indices
	g     int   // ranks per node
	head  int   // local index of each node's head
}

// ncclChainTree is channel c's tree for s: tree t of NCCL's double binary
// tree over the nodes, with its head on local index h mod the node's
// GPUs, so that each channel crosses nodes on its own NIC rail. Without
// TreeChannels, t is c%2 and h is c. With TreeChannels n, channel c runs
// what NCCL's channel src runs: c itself below 2n, or the channel it
// copies (TreeCopies; without them, c mod 2n); src runs tree 0 below n
// and tree 1 from there, from the head of search channel src mod n. On an
// even number of nodes, where tree 1 is tree 0 mirrored, mirroring the
// nodes maps channel c to c+n, which lets the simulator fold them
// (Plan.FoldMirror). Where the channels are whole sets of 2n (their
// copies too), which run alike whatever their order, and every GPU heads
// as many (n a multiple of the node's GPUs), a head's two come together
// instead (NCCL's search channel c/2 on tree c%2), so that rotating a
// node's GPUs by one maps channel c to c+2, and the mirror maps channel
// 2h to 2h+1, which lets it fold them further (Plan.FoldRotationAndMirror).
func ncclChainTree(s Spec, c int) chainTree {
	g, t, h := nodeSize(s), c%2, c
	if n := s.TreeChannels; n > 0 {
		src, whole := c, s.Channels%(2*n) == 0 && n%g == 0
		for k := len(s.TreeCopies) - 1; k >= 0; k-- {
			if start := s.TreeCopies[k]; start > 0 {
				whole = whole && (start%(2*n) == 0 || start >= s.Channels)
				if src >= start {
					src %= start
				}
			}
		}
		src %= 2 * n
		t, h = src/n, src%n
		if whole {
			t, h = src%2, src/2
		}
	}
	return chainTree{nodes: dbtreeAllReduceTrees(s.Ranks / g)[t], g: g, head: h % g}
}

// pos is rank r's place in its node's chain, 0 at the head.
func (t chainTree) pos(r int) int { return mod(r%t.g-t.head, t.g) }

func (t chainTree) at(node, pos int) int { return node*t.g + mod(t.head+pos, t.g) }

// parentOf is rank r's parent, −1 at the root.
func (t chainTree) parentOf(r int) int {
	node, pos := r/t.g, t.pos(r)
	if pos > 0 {
		return t.at(node, pos-1)
	}
	if up := t.nodes.parentOf(node); up >= 0 {
		return t.at(up, 0)
	}
	return -1
}

// kidsOf is rank r's children in fold order: the next in its chain, then
// at a head the heads of the child nodes.
func (t chainTree) kidsOf(r int) []int {
	node, pos := r/t.g, t.pos(r)
	var kids []int
	if pos < t.g-1 {
		kids = append(kids, t.at(node, pos+1))
	}
	if pos == 0 {
		for _, k := range t.nodes.kidsOf(node) {
			kids = append(kids, t.at(k, 0))
		}
	}
	return kids
}

// treeLanes is the lanes of one channel of nccl-tree: one up, and one
// down per child a rank sends to (a chain child and two node children at
// most), so that a rank's sends down go out together as NCCL's do.
const treeLanes = 4

// ncclTreeAllReduce: channel c reduces its share of the data up its chain
// tree on lane 4c and broadcasts the result down on lanes 4c+1…4c+3, in
// passes of Chunk elements, so that the two directions overlap as NCCL's
// split tree kernels do. Lane 4c+1 receives a pass from the parent and
// sends it to child 0, lane 4c+1+k sends it to child k once it is there;
// the root sends each pass down once it has it. Reduction order, per
// element: T[v] = ((x[v] op T[chain child]) op T[node child 0]) op
// T[node child 1], computed once at the root (and divided there for avg)
// and broadcast. A rank accumulates in Out (In is read only to start the
// partial, and in place the down lane receives a pass After the up lane
// has sent it) and receives its children's partials in the channel's
// Tmp. Tags: 2c up, 2c+1 down. Its lanes wait for each other, so its
// plans are held.
func ncclTreeAllReduce(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	C := channels(b.p.Spec, n)
	pass := passLimit(b.p.Spec, n, C, 1)
	if p > 1 {
		b.tmp(C, pass)
	}
	// Per rank, per pass, of the channel being made: the up lane's step
	// after which the pass may go down (its send up, or at the root its
	// result), and the down lane's receive of it.
	var upDone, received [][]int
	for l := range b.lanes(treeLanes * C) {
		c, role, lb := l/treeLanes, l%treeLanes, laneBuilder{b, l}
		t := ncclChainTree(b.p.Spec, c)
		off, ln := chunk(n, C, c)
		inc := ref(Tmp, c*pass, pass)
		up, down := uint32(2*c), uint32(2*c+1)
		if role == 0 {
			upDone, received = make([][]int, p), make([][]int, p)
		}
		for r := range b.ranks() {
			parent, kids, j := t.parentOf(r), t.kidsOf(r), 0
			passes(ln, b.p.Chunk, func(o, m int) {
				acc := ref(Out, off+o, m)
				defer func() { j++ }()
				switch {
				case role == 0:
					res := dtreeUp(lb, t, r, ref(In, off+o, m), acc, ref(inc.Buf, inc.Off, m), up)
					if parent < 0 {
						lb.copy(r, acc, res)
						lb.finishAvg(r, acc)
					}
					upDone[r] = append(upDone[r], b.last(r))
				case role == 1 && parent >= 0:
					// In place, acc is the input the up lane sent from;
					// the result comes back only after it left, but After
					// says so, for every backend and for Check.
					b.add(r, Step{Kind: StepRecv, Peer: parent, Dst: acc, Tag: down, Lane: l, After: []int{upDone[r][j]}})
					received[r] = append(received[r], b.last(r))
					if len(kids) > 0 {
						lb.send(r, kids[0], acc, down)
					}
				case role-1 < len(kids):
					ready := upDone[r][j]
					if parent >= 0 {
						ready = received[r][j]
					}
					b.add(r, Step{Kind: StepSend, Peer: kids[role-1], Src: acc, Tag: down, Lane: l, After: []int{ready}})
				}
			})
		}
	}
	return nil
}
