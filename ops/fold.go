package ops

// Folding a plan's duplicate channels. NCCL doubles its channels when a
// channel would be fast (search.cc's duplication): channels c and c+C/2
// then take the same path, peer for peer and byte for byte. Every link
// either carries both or neither, so on a fabric whose every capacity is
// halved, channel c alone takes the time the two take together: a
// simulator may run half the lanes (see simexec's Driver.TimeRun).

// FoldChannels returns the plan's first channels alone and how many of
// its channels each stands for (k), when k > 1 and its channels c,
// c+C/k, c+2C/k, … are duplicates. Lanes belong to channels in order
// (lane l to channel l/L, L = ⌈Lanes/C⌉ lanes each). Duplicates have, on
// every rank, lane for lane, the same steps: kind, peer, bytes, and
// waits on the same steps of the lanes that correspond. The folded plan
// keeps the lanes of the first C/k channels; no kept step waits on a
// dropped one, and every message a kept lane sends a kept lane receives.
// ok is false for a streamed or native plan, or one with no duplicates.
func (p *Plan) FoldChannels() (folded *Plan, k int, ok bool) {
	if p == nil {
		return nil, 1, false
	}
	c := p.Channels
	if p.Steps == nil || len(p.Steps) != p.Ranks || p.native || c < 2 || p.Lanes < c {
		return p, 1, false // no channel has a lane of its own to fold
	}
	per := (p.Lanes + c - 1) / c // lanes per channel
	lanes := make([]laneIndex, p.Ranks)
	for r, steps := range p.Steps {
		if lanes[r], ok = indexLanes(steps, per*c); !ok {
			return p, 1, false
		}
	}
	// Halve while the channels below C/2k do what those C/2k on do: with
	// those below C/k checked already, all k copies of each are alike.
	k = 1
	for c%(2*k) == 0 && duplicated(lanes, per*c/(2*k)) {
		k *= 2
	}
	for ; k > 1; k /= 2 {
		if folded, ok = p.keepLanes(c/k, per*c/k); ok {
			return folded, k, true
		}
	}
	return p, 1, false
}

// foldMessage is one direction and tag of a plan's messages.
type foldMessage struct {
	from, to int
	tag      uint32
}

// duplicated reports whether, on every rank, the lanes below shift do
// what their duplicates, shift lanes on, do.
func duplicated(lanes []laneIndex, shift int) bool {
	same := func(q int) int { return q }
	dup := func(l int) int { return l + shift }
	for _, x := range lanes {
		for l := range shift {
			if !x.same(l, x, l+shift, same, dup) {
				return false
			}
		}
	}
	return true
}

// keepLanes returns the plan of its channels below channels, whose
// lanes are those below lanes, every wait renumbered; false where a kept
// step waits on a step dropped, or a kept lane sends a message no kept
// lane receives (or receives one none sends).
func (p *Plan) keepLanes(channels, lanes int) (*Plan, bool) {
	kept := *p
	kept.Spec.Channels, kept.Lanes = channels, lanes
	kept.Steps = make([][]Step, len(p.Steps))
	sends := map[foldMessage]int{}
	for r, steps := range p.Steps {
		var ok bool
		if kept.Steps[r], ok = keepRankLanes(steps, lanes, r, sends); !ok {
			return nil, false
		}
	}
	if !balanced(sends) {
		return nil, false
	}
	return &kept, true
}

// laneIndex is a rank's steps by lane: at[l] lists lane l's steps, pos[i]
// is step i's place in its lane.
type laneIndex struct {
	steps []Step
	at    [][]int
	pos   []int
}

// indexLanes indexes steps on lanes 0..n-1; ok is false for a step on
// another lane.
func indexLanes(steps []Step, n int) (laneIndex, bool) {
	x := laneIndex{steps: steps, at: make([][]int, n), pos: make([]int, len(steps))}
	for i, s := range steps {
		if s.Lane < 0 || s.Lane >= n {
			return x, false
		}
		x.pos[i] = len(x.at[s.Lane])
		x.at[s.Lane] = append(x.at[s.Lane], i)
	}
	return x, true
}

// same reports whether lane la of a and lane lb of b do the same: step
// for step the same kind and bytes, to peers renamed by peer, waiting on
// the same places of lanes renamed by lane.
func (a laneIndex) same(la int, b laneIndex, lb int, peer, lane func(int) int) bool {
	sa, sb := a.at[la], b.at[lb]
	if len(sa) != len(sb) {
		return false
	}
	for j, i := range sa {
		s, d := a.steps[i], b.steps[sb[j]]
		if s.Kind != d.Kind || s.Src.Len != d.Src.Len || s.Dst.Len != d.Dst.Len || len(s.After) != len(d.After) {
			return false
		}
		if (s.Kind == StepSend || s.Kind == StepRecv) && peer(s.Peer) != d.Peer {
			return false
		}
		for w, x := range s.After {
			y := d.After[w]
			if x < 0 || x >= i || y < 0 || y >= sb[j] { // not an earlier step: a malformed plan
				return false
			}
			if lane(a.steps[x].Lane) != b.steps[y].Lane || a.pos[x] != b.pos[y] {
				return false
			}
		}
	}
	return true
}

// keepRankLanes returns rank r's steps on lanes below n, their waits
// renumbered, and counts their messages into sends (+1 a send, −1 a
// receive); ok is false when a kept step waits on a step it drops.
func keepRankLanes(steps []Step, n, r int, sends map[foldMessage]int) ([]Step, bool) {
	if kept, ok := keptPrefix(steps, n); ok {
		// Made lane after lane, as NCCL's plans are: the kept steps come
		// first and wait on none after them, so they keep their numbers.
		for _, s := range kept {
			countMessage(s, r, sends)
		}
		return kept, true
	}
	index := make([]int, len(steps))
	kept := make([]Step, 0, len(steps)/2)
	for i, s := range steps {
		index[i] = -1
		if s.Lane >= n {
			continue
		}
		index[i] = len(kept)
		if len(s.After) > 0 {
			after := make([]int, len(s.After))
			for w, x := range s.After {
				if x < 0 || x >= i || index[x] < 0 {
					return nil, false
				}
				after[w] = index[x]
			}
			s.After = after
		}
		countMessage(s, r, sends)
		kept = append(kept, s)
	}
	return kept, true
}

// keptPrefix returns steps' first steps, those on lanes below n, when no
// later step is on one and each waits only on steps before it: then they
// are the rank's steps on those lanes, numbered as they are.
func keptPrefix(steps []Step, n int) ([]Step, bool) {
	m := 0
	for m < len(steps) && steps[m].Lane < n {
		for _, x := range steps[m].After {
			if x < 0 || x >= m {
				return nil, false
			}
		}
		m++
	}
	for _, s := range steps[m:] {
		if s.Lane < n {
			return nil, false
		}
	}
	return steps[:m:m], true
}

// balanced reports whether every message counted into sends is both
// sent and received.
func balanced(sends map[foldMessage]int) bool {
	for _, n := range sends {
		if n != 0 {
			return false
		}
	}
	return true
}

// pairsUp reports whether every message of steps, a plan's rank by rank
// (a rank left out has none), is both sent and received there.
func pairsUp(steps [][]Step) bool {
	sends := map[foldMessage]int{}
	for r, rs := range steps {
		for _, s := range rs {
			countMessage(s, r, sends)
		}
	}
	return balanced(sends)
}

// countMessage counts rank r's step s into sends: +1 for a send, −1 for
// a receive, by direction and tag.
func countMessage(s Step, r int, sends map[foldMessage]int) {
	switch s.Kind {
	case StepSend:
		sends[foldMessage{r, s.Peer, s.Tag}]++
	case StepRecv:
		sends[foldMessage{s.Peer, r, s.Tag}]--
	}
}

// FoldRotation returns the plan's first s·m channels alone when rotating
// every node's GPUs by s (rank n·g+i to n·g+(i+s) mod g, g = NodeRanks),
// together with the channels (c to c+s·m mod C, m = C/g channels a GPU),
// maps the plan onto itself: NCCL's trees alternated by channel, whose
// channel c has its head on GPU c mod g and runs tree c mod 2, turn into
// each other under a rotation by 2, and NCCL's split (Spec.TreeChannels),
// whose channels 2h and 2h+1 run each tree from GPU h, under one by 1. With
// mirrored, the nodes are mirrored too (node n to N−1−n of N): NCCL's
// tree 1 is tree 0 mirrored on an even number of nodes, so channels c
// and c+1 turn into each other under a rotation by 1 and the mirror. It
// also returns the renaming (perm[r] is rank r's image) and its order
// g/s (which must be even when mirrored). The plan must have a multiple
// of a node's GPUs in channels (fold duplicates first, FoldChannels), a
// Wire and no switch steps: a rank keeps only its part of the channels,
// so what its device does for all of them at once (reductions, unless a
// Wire fuses them into the transfers; a switch's) would be shared less
// than in the whole run. ok is false otherwise, or when the renaming
// does not map the plan onto itself.
// The channels kept, run on every rank of a fabric folded by the same
// renaming (every link standing for its orbit of g/s links), take the
// time the whole plan takes on the whole fabric.
func (p *Plan) FoldRotation(s int, mirrored bool) (kept *Plan, perm []int, order int, ok bool) {
	if !p.mayFoldChannels() {
		return nil, nil, 0, false
	}
	g, c := p.NodeRanks, p.Channels
	if g < 2 || c < g || c%g != 0 || s < 1 || s >= g || g%s != 0 || (mirrored && (g/s)%2 != 0) {
		return nil, nil, 0, false
	}
	perm = nodeRotation(p.Ranks, g, s, mirrored)
	per, m := (p.Lanes+c-1)/c, c/g // lanes a channel, channels a GPU
	lanes, ok := p.indexRenamed(perm, per*c)
	if !ok || !rotates(lanes, perm, shiftLanes(s*m*per, per*c), per*c) {
		return nil, nil, 0, false
	}
	if kept, ok = p.keepLanes(s*m, s*m*per); !ok {
		return nil, nil, 0, false
	}
	return kept, perm, g / s, true
}

// FoldRotationAndMirror returns the plan's first channel alone when two
// renamings map the plan onto itself: rotating every node's GPUs by one
// (rank n·g+i to n·g+(i+1) mod g, g = NodeRanks) together with the
// channels (c to c+2 mod C), and mirroring the nodes (rank n·g+i to
// (N−1−n)·g+i of N nodes) together with each pair of channels (2h to
// 2h+1). NCCL's split trees (Spec.TreeChannels) are such a plan: GPU h
// heads channel 2h on tree 0 and 2h+1 on tree 1, and tree 1 is tree 0
// mirrored on an even number of nodes. The two renamings make a group of
// order 2g that moves every channel, so one channel stands for all where
// FoldRotation keeps two. It returns the renamings (perms[i][r] is rank
// r's image) and the group's order. The plan must have 2g channels (fold
// duplicates first, FoldChannels), an even number of nodes, and what
// FoldRotation asks; ok is false otherwise, or when a renaming does not
// map the plan onto itself.
// The channel kept, run on every rank of a fabric folded by the same
// group, takes the time the whole plan takes on the whole fabric.
func (p *Plan) FoldRotationAndMirror() (kept *Plan, perms [][]int, order int, ok bool) {
	if !p.mayFoldChannels() {
		return nil, nil, 0, false
	}
	g, c := p.NodeRanks, p.Channels
	if g < 2 || p.Ranks%(2*g) != 0 || c != 2*g {
		return nil, nil, 0, false
	}
	per := (p.Lanes + c - 1) / c // lanes a channel
	rotation, mirror := nodeRotation(p.Ranks, g, 1, false), nodeMirror(p.Ranks, g)
	pairSwap := func(l int) int { return ((l/per)^1)*per + l%per }
	lanes, ok := p.indexRenamed(rotation, per*c)
	if !ok || !rotates(lanes, rotation, shiftLanes(2*per, per*c), per*c) || !rotates(lanes, mirror, pairSwap, per*c) {
		return nil, nil, 0, false
	}
	if kept, ok = p.keepLanes(1, per); !ok {
		return nil, nil, 0, false
	}
	return kept, [][]int{rotation, mirror}, 2 * g, true
}

// FoldMirror returns the plan's first half of its channels alone when
// mirroring the nodes (rank n·g+i to (N−1−n)·g+i of N nodes, g =
// NodeRanks), together with the channels (c to c+C/2 mod C), maps the
// plan onto itself: NCCL's split trees (Spec.TreeChannels) where fewer
// channels than a node's GPUs run each tree (a rack of 64 GB200s, 16
// each), so that no rotation of the GPUs maps them, but tree 1 is tree 0
// mirrored on an even number of nodes. It returns the mirror (perm[r] is
// rank r's image) and its order, 2. The plan must have an even number of
// channels and of nodes (of one GPU or more), a Wire and no switch steps
// (see FoldRotation); ok is false otherwise, or when the mirror does not
// map the plan onto itself.
// The channels kept, run on every rank of a fabric folded by the mirror,
// take the time the whole plan takes on the whole fabric.
func (p *Plan) FoldMirror() (kept *Plan, perm []int, order int, ok bool) {
	if !p.mayFoldChannels() {
		return nil, nil, 0, false
	}
	g, c := p.NodeRanks, p.Channels
	if p.Ranks%(2*g) != 0 || c%2 != 0 {
		return nil, nil, 0, false
	}
	per := (p.Lanes + c - 1) / c // lanes a channel
	perm = nodeMirror(p.Ranks, g)
	lanes, ok := p.indexRenamed(perm, per*c)
	if !ok || !rotates(lanes, perm, shiftLanes(per*c/2, per*c), per*c) {
		return nil, nil, 0, false
	}
	if kept, ok = p.keepLanes(c/2, per*c/2); !ok {
		return nil, nil, 0, false
	}
	return kept, perm, 2, true
}

// mayFoldChannels reports whether p is a plan whose channels a renaming
// of its ranks may fold (FoldRotation, FoldRotationAndMirror, FoldMirror):
// made (not streamed or native), on more than one node, with a lane for
// each channel, a Wire and no switch steps. A rank keeps only its part of
// the channels, so what its device does for all of them at once
// (reductions, unless a Wire fuses them into the transfers; a switch's)
// would be shared less than in the whole run.
func (p *Plan) mayFoldChannels() bool {
	if p == nil {
		return false
	}
	g := p.NodeRanks
	return p.Steps != nil && len(p.Steps) == p.Ranks && !p.native && p.Wire != nil && !p.UsesSwitch() &&
		g >= 1 && g < p.Ranks && p.Ranks%g == 0 && p.Channels >= 2 && p.Lanes >= p.Channels
}

// nodeMirror renames rank n·g+i (of ranks, g a node) to (N−1−n)·g+i of N
// nodes.
func nodeMirror(ranks, g int) []int { return nodeRotation(ranks, g, 0, true) }

// nodeRotation renames rank n·g+i (of ranks, g a node) to n'·g+(i+s) mod
// g, where n' is n, or N−1−n of N nodes when mirrored.
func nodeRotation(ranks, g, s int, mirrored bool) []int {
	perm := make([]int, ranks)
	for r := range perm {
		n := r / g
		if mirrored {
			n = ranks/g - 1 - n
		}
		perm[r] = n*g + (r%g+s)%g
	}
	return perm
}

// indexRenamed indexes every rank's steps on n lanes, unless a rank has
// not as many steps as its image under perm, which no renaming of the
// plan onto itself allows (a cheaper refusal than the index).
func (p *Plan) indexRenamed(perm []int, n int) ([]laneIndex, bool) {
	for r, steps := range p.Steps {
		if len(steps) != len(p.Steps[perm[r]]) {
			return nil, false
		}
	}
	lanes := make([]laneIndex, p.Ranks)
	for r, steps := range p.Steps {
		var ok bool
		if lanes[r], ok = indexLanes(steps, n); !ok {
			return nil, false
		}
	}
	return lanes, true
}

// rotates reports whether every rank r's lane l does what rank perm[r]'s
// lane lane(l) does, with peers renamed by perm.
func rotates(x []laneIndex, perm []int, lane func(int) int, lanes int) bool {
	peer := func(q int) int {
		if q < 0 || q >= len(perm) {
			return -1
		}
		return perm[q]
	}
	for r := range x {
		for l := range lanes {
			if !x[r].same(l, x[perm[r]], lane(l), peer, lane) {
				return false
			}
		}
	}
	return true
}

// shiftLanes maps lane l to l+shift mod lanes.
func shiftLanes(shift, lanes int) func(int) int {
	return func(l int) int { return (l + shift) % lanes }
}

// FoldRanks returns the plan with only the ranks of local index below s
// left (every other rank's steps dropped), when rotating every node's
// GPUs by s (rank n·g+i to n·g+(i+s) mod g, g = NodeRanks, or every rank
// on one node) maps the plan onto itself lane for lane: rank r does on
// each lane what rank perm[r] does on it, with peers renamed by perm.
// NCCL's NVLS and NVLSTree are such plans: local rank i owns part i of
// every pass, with its switch operations and its rail's tree. It also
// returns the rotation and its order g/s. Every message a kept rank sends, a kept rank receives.
// Unlike FoldRotation's part, a kept rank keeps all its work, so its
// device's reductions need no Wire; a switch, which reduces for all its
// members at once, is shared out by the fold (sim.Cluster.Rotated). ok is
// false for a streamed or native plan, or one the rotation does not map
// onto itself.
// The kept ranks, run on a fabric folded by the same rotation, take the
// time the whole plan takes on the whole fabric.
func (p *Plan) FoldRanks(s int) (kept *Plan, perm []int, order int, ok bool) {
	if p == nil {
		return nil, nil, 0, false
	}
	g := nodeSize(p.Spec)
	if p.Steps == nil || len(p.Steps) != p.Ranks || p.native || g < 2 || s < 1 || s >= g || g%s != 0 || p.Ranks%g != 0 {
		return nil, nil, 0, false
	}
	perm = nodeRotation(p.Ranks, g, s, false)
	lanes, ok := p.indexRenamed(perm, p.Lanes)
	if !ok || !rotates(lanes, perm, shiftLanes(0, p.Lanes), p.Lanes) {
		return nil, nil, 0, false
	}
	k := *p
	k.Steps = make([][]Step, p.Ranks)
	for r, steps := range p.Steps {
		if r%g < s {
			k.Steps[r] = steps
		}
	}
	if !pairsUp(k.Steps) {
		return nil, nil, 0, false
	}
	return &k, perm, g / s, true
}

// RefinedChunk is the chunk Refine makes lanes of p again at that hold
// steps steps at p's chunk: p's FineChunk, or as near it as half of
// MaxPlanSteps allows them. ok is false where that is not finer than
// p's chunk.
func (p *Plan) RefinedChunk(steps int) (chunk int, ok bool) {
	if p == nil || p.FineChunk <= 0 {
		return 0, false
	}
	// A lane's steps grow with its passes, as Chunk over the chunk.
	budget := int64(MaxPlanSteps / 2)
	chunk = max(p.FineChunk, int((int64(p.Chunk)*int64(steps)+budget-1)/budget))
	return chunk, chunk < p.Chunk
}

// Refined is p as a run of every lane takes it: made again at its
// FineChunk, as fine as half of MaxPlanSteps allows (Refine), where p was
// made coarser to be checked and folded; p itself otherwise. A plan
// edited by hand should clear FineChunk: what runs is made again from its
// Spec.
func (p *Plan) Refined() *Plan {
	if fine, ok := p.Refine(p); ok {
		return fine
	}
	return p
}

// Refine returns kept, p's first kept.Lanes lanes on every rank it keeps
// (as FoldChannels and FoldRotation keep lanes, FoldRanks ranks, or all of
// them: kept may be p), made again at p's FineChunk: where p's pieces
// were coarsened so that every lane fits in memory, the lanes a folded run
// keeps fit at the chunk the algorithm asked for, or as near it as half of
// MaxPlanSteps allows them, counting the steps they make at p's chunk
// (the generator's budget counts a worst case, so even every lane may fit
// finer). Each kept lane holds what it would in the whole plan made at
// that chunk, since a generator makes every lane from the spec alone. ok
// is false where p has no finer chunk, kept is not the first lanes of the
// ranks it keeps, or the lanes at the finer chunk would not fit, wait on
// a lane not kept, or send a message no kept lane receives.
func (p *Plan) Refine(kept *Plan) (fine *Plan, ok bool) {
	if p == nil || p.FineChunk <= 0 || p.FineChunk >= p.Chunk || p.Steps == nil || kept == nil || len(kept.Steps) != len(p.Steps) || kept.Lanes > p.Lanes {
		return nil, false
	}
	alg, ok := algorithmNamed(p.Algo)
	if !ok || alg.gens[p.Op] == nil {
		return nil, false
	}
	steps := 0
	var dropped []bool
	for r, ks := range kept.Steps {
		n := 0
		for _, s := range p.Steps[r] {
			if s.Lane < kept.Lanes {
				n++
			}
		}
		switch {
		case len(ks) == 0 && n > 0: // a rank FoldRanks dropped
			if dropped == nil {
				dropped = make([]bool, len(kept.Steps))
			}
			dropped[r] = true
		case len(ks) != n:
			return nil, false // not the rank's first lanes
		}
		steps += len(ks)
	}
	spec := p.Spec
	if spec.Chunk, ok = p.RefinedChunk(steps); !ok {
		return nil, false
	}
	in, out := spec.BufferLens()
	b := newBuilder(spec, in, out)
	b.keepLanes, b.dropped = kept.Lanes, dropped
	if err := generate(alg.gens[p.Op], b); err != nil {
		return nil, false
	}
	fine = b.p
	fine.Spec.Channels, fine.Lanes = kept.Spec.Channels, kept.Lanes // its last lanes may have no steps
	fine.Protocol, fine.Wire, fine.Launch = p.Protocol, p.Wire, p.Launch
	if !pairsUp(fine.Steps) {
		return nil, false
	}
	return fine, true
}
