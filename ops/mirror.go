package ops

import (
	"errors"

	"github.com/commsim/commsim/hw"
)

// rankMap is a group of rank renamings under which a plan may be
// symmetric: rank r's program is rank 0's with every peer q renamed to
// r+q mod p (rotation) or r xor q (p a power of two). Either group takes
// rank 0 to any rank, and no renaming but the identity fixes a rank.
type rankMap uint8

const (
	notSymmetric rankMap = iota
	rotation
	xor
)

func (g rankMap) apply(r, q, p int) int {
	if g == xor {
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
func newSymmetryCheck(rank0 []Step, p, lanes int) symmetryCheck {
	c := symmetryCheck{rank0: rank0, p: p}
	if p < 2 || lanes != 1 || rank0 == nil {
		return c
	}
	c.alive = 1 << rotation
	if p&(p-1) == 0 {
		c.alive |= 1 << xor
	}
	return c
}

// step checks step i of rank r.
func (c *symmetryCheck) step(r, i int, s Step) {
	if i >= len(c.rank0) {
		c.alive = 0
		return
	}
	for _, g := range []rankMap{rotation, xor} {
		if c.alive&(1<<g) != 0 && !sameStep(c.rank0[i], s, g, r, c.p) {
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

// group is the group found, rotation first, or notSymmetric.
func (c *symmetryCheck) group() rankMap {
	for _, g := range []rankMap{rotation, xor} {
		if c.alive&(1<<g) != 0 {
			return g
		}
	}
	return notSymmetric
}

// symmetry is the group under which every rank runs rank 0's program, up
// to offsets (which do not change times). Compile finds a streamed
// plan's while counting its steps. A held plan's is found on each call:
// its steps are plain data that may have been edited since.
func (p *Plan) symmetry() rankMap {
	if p.Streamed() || p.native || len(p.Steps) != p.Ranks || p.Ranks < 2 {
		return p.sym
	}
	c := newSymmetryCheck(p.Steps[0], p.Ranks, p.Lanes)
	for r := 1; r < p.Ranks && c.alive != 0; r++ {
		for i, s := range p.Steps[r] {
			c.step(r, i, s)
		}
		c.rankDone(len(p.Steps[r]))
	}
	return c.group()
}

// sameStep reports whether b, on rank r, is a, of rank 0, renamed by g.
// Only what sets times must agree: kinds, sizes, tags and peers.
func sameStep(a, b Step, g rankMap, r, p int) bool {
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Src.Len != b.Src.Len || a.Dst.Len != b.Dst.Len {
		return false
	}
	if a.Kind == StepSend || a.Kind == StepRecv {
		return b.Peer == g.apply(r, a.Peer, p)
	}
	return true
}

// inverse is the renaming that undoes renaming by off.
func (g rankMap) inverse(off, p int) int {
	if g == xor {
		return off
	}
	return (p - off) % p
}

// between is the renaming that takes rank s to rank x.
func (g rankMap) between(s, x, p int) int {
	if g == xor {
		return s ^ x
	}
	return (x - s + p) % p
}

// pairsUp reports whether the messages of ranks 0..block-1 pair up as a
// mirror with that block runs them (see hw.Mirrorer): there, rank j's
// i-th receive from x with tag t takes the i-th message that rank x mod
// block sent with tag t to any rank congruent to j. In the full plan it
// takes the i-th message x sends j, which is, renamed, what x mod block
// sends the rank that x's renaming takes to j. So for every sender,
// receiver and tag, the i-th send must go to that rank, with the size of
// the i-th receive. Ranks 0..block-1 run rank0 renamed by g.
func pairsUp(rank0 []Step, g rankMap, p, block int) bool {
	type key struct {
		from, to int // ranks below block
		tag      uint32
	}
	type message struct{ peer, size int } // the rank at the other end
	sent, got := map[key][]message{}, map[key][]message{}
	for j := range block {
		for _, s := range rank0 {
			switch s.Kind {
			case StepSend:
				q := g.apply(j, s.Peer, p)
				k := key{j, q % block, s.Tag}
				sent[k] = append(sent[k], message{q, s.Src.Len})
			case StepRecv:
				x := g.apply(j, s.Peer, p)
				k := key{x % block, j, s.Tag}
				got[k] = append(got[k], message{x, s.Dst.Len})
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
			want := g.apply(g.inverse(g.between(k.from, in.peer, p), p), k.to, p)
			if outs[i].peer != want || outs[i].size != in.size {
				return false
			}
		}
	}
	return true
}

// runMirrored times plan on the world's mirror (hw.Mirrorer) by running
// the ranks that stand for all, when the world offers a mirror, the plan
// is symmetric and its messages pair up. ok is false when it cannot, or
// when the mirrored run fails: Run then runs every rank, which reports the
// failure as it really happens.
func (e *Executor) runMirrored(plan *Plan) (seconds float64, ok bool) {
	world, block, ok := e.mirrorFor(plan)
	if !ok {
		return 0, false
	}
	var err error
	if e.mirror == nil || e.mirror.devs[0] != world[0] {
		w, err := hw.NewWorld(world)
		if err != nil {
			return 0, false
		}
		e.mirror = NewExecutor(w)
	}
	in, out := make([]hw.Slice, block), make([]hw.Slice, block)
	var bufs []hw.Buffer
	for r := range block {
		for _, s := range []struct {
			slice *hw.Slice
			n     int
		}{{&in[r], plan.InLen}, {&out[r], plan.OutLen}} {
			b, berr := world[r].Alloc(plan.DType, s.n)
			if err = errors.Join(err, berr); berr == nil {
				*s.slice = hw.Whole(b)
				bufs = append(bufs, b)
			}
		}
	}
	if err == nil {
		seconds, err = e.mirror.run(plan, in, out)
	}
	for _, b := range bufs {
		err = errors.Join(err, b.Free())
	}
	if err != nil {
		e.mirror = nil
		return 0, false
	}
	e.mirroredRuns++
	return seconds, true
}

// mirrorFor finds the world's mirror for plan and the block of ranks that
// stand for all there, when the world offers one, the plan is symmetric
// and its messages pair up.
func (e *Executor) mirrorFor(plan *Plan) (world []hw.Device, block int, ok bool) {
	if plan.native || plan.Lanes != 1 || plan.Ranks < 2 {
		return nil, 0, false
	}
	m, isMirrorer := e.devs[0].(hw.Mirrorer)
	g := plan.symmetry()
	if !isMirrorer || g == notSymmetric {
		return nil, 0, false
	}
	world, block, ok, err := m.Mirror(e.devs, g == xor)
	if err != nil || !ok || !pairsUp(plan.Rank(0), g, plan.Ranks, block) {
		return nil, 0, false
	}
	return world, block, true
}

// MirrorBlock is how many ranks Run would simulate for plan, standing for
// all on the world's mirror (see hw.Mirrorer), or 0 when Run would run
// every rank.
func (e *Executor) MirrorBlock(plan *Plan) int {
	_, block, _ := e.mirrorFor(plan)
	return block
}

// MirroredRuns counts the runs this executor timed by running only the
// ranks that stand for all on the world's mirror (see hw.Mirrorer and
// Plan.RankSymmetric).
func (e *Executor) MirroredRuns() int { return e.mirroredRuns }

// RankSymmetric reports whether every rank runs rank 0's steps with its
// peers renamed by one rotation or xor of the ranks, with the same kinds,
// sizes and tags. The Executor times such a plan on a world with a mirror
// (hw.Mirrorer) by running the few ranks that stand for all, when its
// messages pair up there. For a plan held in memory this checks every
// step.
func (p *Plan) RankSymmetric() bool { return p.symmetry() != notSymmetric }
