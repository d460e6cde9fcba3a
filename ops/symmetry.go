package ops

import (
	"fmt"
	"slices"
)

// Symmetry is a group of rank renamings under which a plan may be
// symmetric: every rank r runs rank 0's program with each peer q renamed
// to r+q mod p (Rotation) or r xor q (Xor, p a power of two). Either group
// takes rank 0 to any rank, and no renaming but the identity fixes a rank.
// A simulator uses it to time a plan from a few ranks that stand for all
// (package simexec explains mirroring).
type Symmetry uint8

const (
	NotSymmetric Symmetry = iota
	Rotation
	Xor
)

func (g Symmetry) String() string {
	if g > Xor {
		return fmt.Sprintf("Symmetry(%d)", uint8(g))
	}
	return [...]string{NotSymmetric: "none", Rotation: "rotation", Xor: "xor"}[g]
}

// Rename is the peer that rank r's program names where rank 0's names q,
// of p ranks; -1, which is no rank, when there are none.
func (g Symmetry) Rename(r, q, p int) int {
	switch {
	case p < 1:
		return -1
	case g == Xor:
		return r ^ q
	}
	return (r + q) % p
}

// maxMirroredSteps bounds rank 0's program, which the check holds in
// memory (about 100 bytes a step).
const maxMirroredSteps = 1 << 18

// symmetryCheck finds which groups every rank's program follows: rank r's
// i-th step must be rank 0's renamed (see sameStep). Workers checking
// ranges of ranks each hold a copy, and their verdicts are ANDed.
type symmetryCheck struct {
	rank0 []Step
	p     int
	alive uint8 // bit g: every step seen so far follows group g
}

// newSymmetryCheck starts a check against rank 0's program, with the
// groups that fit p.
func newSymmetryCheck(rank0 []Step, p int) symmetryCheck {
	c := symmetryCheck{rank0: rank0, p: p}
	if p < 2 || rank0 == nil {
		return c
	}
	c.alive = 1 << Rotation
	if p&(p-1) == 0 {
		c.alive |= 1 << Xor
	}
	return c
}

// step checks step i of rank r.
func (c *symmetryCheck) step(r, i int, s *Step) {
	if i >= len(c.rank0) {
		c.alive = 0
		return
	}
	for _, g := range []Symmetry{Rotation, Xor} {
		if c.alive&(1<<g) != 0 && !sameStep(&c.rank0[i], s, g, r, c.p) {
			c.alive &^= 1 << g
		}
	}
}

// rankDone checks that a rank that made n steps made as many as rank 0.
func (c *symmetryCheck) rankDone(n int) {
	if n != len(c.rank0) {
		c.alive = 0
	}
}

// Symmetry is a group under which every rank runs rank 0's program, up
// to offsets (which do not change times): the same kinds, sizes, tags,
// lanes and After lists, with peers renamed; Rotation when the plan
// follows both groups, NotSymmetric when it follows neither, or when it
// has switch steps (see sameStep).
func (p *Plan) Symmetry() Symmetry {
	groups := p.symmetries()
	for _, g := range []Symmetry{Rotation, Xor} {
		if groups&(1<<g) != 0 {
			return g
		}
	}
	return NotSymmetric
}

// SymmetricUnder reports whether every rank runs rank 0's program renamed
// by g (see Symmetry).
func (p *Plan) SymmetricUnder(g Symmetry) bool {
	return g != NotSymmetric && p.symmetries()&(1<<g) != 0
}

// symmetries is the set of groups the plan follows, bit g for group g.
// Compile finds a streamed plan's while counting its steps. A held plan's
// are found on each call: its steps are plain data that may have been
// edited since.
func (p *Plan) symmetries() uint8 {
	if p == nil || p.native || p.Ranks < 2 {
		return 0
	}
	if p.Streamed() {
		return p.symmetric
	}
	if len(p.Steps) != p.Ranks {
		return 0
	}
	c := newSymmetryCheck(p.Steps[0], p.Ranks)
	for r := 1; r < p.Ranks && c.alive != 0; r++ {
		for i := range p.Steps[r] {
			c.step(r, i, &p.Steps[r][i])
		}
		c.rankDone(len(p.Steps[r]))
	}
	return c.alive
}

// sameStep reports whether b, on rank r, is a, of rank 0, renamed by g.
// Only what sets times must agree: kinds, sizes, tags, lanes, ordering
// and peers.
func sameStep(a, b *Step, g Symmetry, r, p int) bool {
	if a.Kind.IsSwitch() || b.Kind.IsSwitch() {
		// A switch step reaches every member of its group at once, and a
		// mirror folds only messages between two ranks: a plan with such
		// steps is simulated in full, never mirrored.
		return false
	}
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Src.Len != b.Src.Len || a.Dst.Len != b.Dst.Len || a.Lane != b.Lane ||
		len(a.After) != len(b.After) || (len(a.After) > 0 && !slices.Equal(a.After, b.After)) {
		return false
	}
	if a.Kind == StepSend || a.Kind == StepRecv {
		return b.Peer == g.Rename(r, a.Peer, p)
	}
	return true
}

// inverse is the renaming that undoes renaming by off.
func (g Symmetry) inverse(off, p int) int {
	if g == Xor {
		return off
	}
	return (p - off) % p
}

// between is the renaming that takes rank s to rank x.
func (g Symmetry) between(s, x, p int) int {
	if g == Xor {
		return s ^ x
	}
	return (x - s + p) % p
}

// PairsUpInBlocks reports whether the messages of a plan symmetric under
// g pair up when only ranks 0..block-1 run and a message to rank q goes
// to rank q mod block, as on a simulator's mirror (see package simexec).
// There,
// rank j's i-th receive from x with tag t takes the i-th message that
// rank x mod block sent with tag t to any rank congruent to j. In the
// full plan it takes the i-th message x sends j, which is, renamed, what
// x mod block sends the rank that x's renaming takes to j. So for every
// sender, receiver and tag, the i-th send must go to that rank, with the
// size of the i-th receive, and on one lane (lanes would race for the
// order). It is false for a plan that is not symmetric under g, or whose
// rank 0 is too long to hold.
func (p *Plan) PairsUpInBlocks(g Symmetry, block int) bool {
	if !p.SymmetricUnder(g) || block < 1 || p.Ranks%block != 0 {
		return false
	}
	rank0, ok := p.rankProgram(0)
	return ok && pairsUpWith(block, p.Ranks, g, func(int) []Step { return rank0 }, func(j, q int) int { return g.Rename(j, q, p.Ranks) })
}

// pairsUpWith checks that messages pair up on a mirror of ranks
// 0..block-1 (see PairsUpInBlocks), rank j running program(j) with its
// steps' peers named by peer(j, q).
func pairsUpWith(block, p int, g Symmetry, program func(j int) []Step, peer func(j, q int) int) bool {
	type key struct {
		from, to int // ranks below block
		tag      uint32
	}
	type message struct{ peer, size, lane int } // the rank at the other end
	sent, got := map[key][]message{}, map[key][]message{}
	for j := range block {
		for _, s := range program(j) {
			switch s.Kind {
			case StepSend:
				q := peer(j, s.Peer)
				k := key{j, q % block, s.Tag}
				sent[k] = append(sent[k], message{q, s.Src.Len, s.Lane})
			case StepRecv:
				x := peer(j, s.Peer)
				k := key{x % block, j, s.Tag}
				got[k] = append(got[k], message{x, s.Dst.Len, s.Lane})
			}
		}
	}
	if len(sent) != len(got) {
		return false
	}
	for k, ins := range got {
		outs := sent[k]
		if len(outs) != len(ins) {
			return false
		}
		for i, in := range ins {
			want := g.Rename(g.inverse(g.between(k.from, in.peer, p), p), k.to, p)
			if outs[i].peer != want || outs[i].size != in.size || in.lane != ins[0].lane || outs[i].lane != outs[0].lane {
				return false
			}
		}
	}
	return true
}

// MirrorsInBlocks reports whether only ranks 0..block-1 of the plan, run
// as a simulator's mirror runs them (package simexec: a message to rank q
// goes to rank q mod block), stand for every rank, where the plan need not
// be symmetric under a group that takes rank 0 to every rank (Symmetry)
// but maps onto itself when every rank is shifted by block, r ↦ r+block
// mod p: rank r runs rank r mod block's program with its peers shifted by
// r − r mod block (the same kinds, sizes, tags, lanes and After lists).
// NCCL's rings and their channels, which keep to their rails, map so by
// a node. The messages must pair up as PairsUpInBlocks says, and no lane
// of a rank may send to two ranks that one rank stands for (the mirror
// would give their messages one connection's buffer). It reads every
// rank's steps: false for a plan whose ranks below block are too long to
// hold.
func (p *Plan) MirrorsInBlocks(block int) bool {
	if p == nil || p.native || p.Ranks < 2 || block < 1 || block >= p.Ranks || p.Ranks%block != 0 {
		return false
	}
	// The ranks below block are read as the others need them: a plan
	// that a shift does not map usually fails at rank block.
	bases, read := make([][]Step, block), make([]bool, block)
	for r := block; r < p.Ranks; r++ {
		j := r % block
		if !read[j] {
			var ok bool
			if bases[j], ok = p.rankProgram(j); !ok {
				return false
			}
			read[j] = true
		}
		base, shift := bases[j], r-j
		i := 0
		for s := range p.RankSteps(r) {
			if i >= len(base) || !sameStep(&base[i], &s, Rotation, shift, p.Ranks) {
				return false
			}
			i++
		}
		if i != len(base) {
			return false
		}
	}
	return pairsUpBases(bases, p.Ranks, block)
}

// rankProgram is rank r's program, unless it is too long to hold.
func (p *Plan) rankProgram(r int) ([]Step, bool) {
	if !p.Streamed() {
		return p.Steps[r], true
	}
	var steps []Step
	for s := range p.RankSteps(r) {
		if len(steps) == maxMirroredSteps {
			return nil, false
		}
		steps = append(steps, s)
	}
	return steps, true
}

// pairsUpBases is pairsUpWith for ranks 0..block-1 each running its own
// program, bases[j], the plan mapping onto itself under shifts by block;
// and no lane of theirs sends to two ranks one stands for.
func pairsUpBases(bases [][]Step, p, block int) bool {
	type laneKey struct{ rank, lane, standIn int }
	peerOf := map[laneKey]int{}
	for j, steps := range bases {
		for _, s := range steps {
			if s.Kind != StepSend {
				continue
			}
			k := laneKey{j, s.Lane, s.Peer % block}
			if q, ok := peerOf[k]; ok && q != s.Peer {
				return false
			}
			peerOf[k] = s.Peer
		}
	}
	return pairsUpWith(block, p, Rotation, func(j int) []Step { return bases[j] }, func(_ int, q int) int { return q })
}
