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
// groups that fit p and under which rank 0's messages pair up.
func newSymmetryCheck(rank0 []Step, p, lanes int) symmetryCheck {
	c := symmetryCheck{rank0: rank0, p: p}
	if p < 2 || lanes != 1 || rank0 == nil {
		return c
	}
	for _, g := range []rankMap{rotation, xor} {
		if (g != xor || p&(p-1) == 0) && mirrorsMessages(rank0, g, p) {
			c.alive |= 1 << g
		}
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
// to offsets (which do not change times), with rank 0's messages pairing
// up as mirroring needs (see mirrorsMessages). Compile finds a streamed
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

// mirrorsMessages reports whether rank 0's messages pair up as a mirror
// runs them: the mirror's i-th receive with tag t takes the i-th message it
// sent itself with tag t. In the full plan, rank 0's receive from x takes
// the next message x sends it with that tag, which is, renamed, rank 0's
// next send with the tag to the q that x's renaming takes to 0. So for
// every tag, the i-th receive (from x) and the i-th send (to q) must have
// g(x, q) = 0 and one size; and no rank may send to itself, since a
// mirror's sends to itself cross links.
func mirrorsMessages(rank0 []Step, g rankMap, p int) bool {
	type message struct{ peer, size int }
	sent, got := map[uint32][]message{}, map[uint32][]message{}
	for _, s := range rank0 {
		switch {
		case s.Kind == StepSend && s.Peer != 0:
			sent[s.Tag] = append(sent[s.Tag], message{s.Peer, s.Src.Len})
		case s.Kind == StepRecv && s.Peer != 0:
			got[s.Tag] = append(got[s.Tag], message{s.Peer, s.Dst.Len})
		case s.Kind == StepSend || s.Kind == StepRecv:
			return false
		}
	}
	if len(sent) != len(got) {
		return false
	}
	for tag, ins := range got {
		outs := sent[tag]
		if len(outs) != len(ins) {
			return false
		}
		for i, in := range ins {
			if outs[i].size != in.size || g.apply(in.peer, outs[i].peer, p) != 0 {
				return false
			}
		}
	}
	return true
}

// runMirrored times plan on the world's mirror (hw.Mirrorer) by running
// rank 0 alone, when the world offers one and the plan is symmetric. ok is
// false when it cannot, or when the mirrored run fails: Run then runs
// every rank, which reports the failure as it really happens.
func (e *Executor) runMirrored(plan *Plan) (seconds float64, ok bool) {
	if e.mirrored || plan.native || plan.Lanes != 1 || plan.Ranks < 2 {
		return 0, false
	}
	m, isMirrorer := e.devs[0].(hw.Mirrorer)
	if !isMirrorer {
		return 0, false
	}
	dev, ok, err := m.Mirror(e.devs)
	if err != nil || !ok || plan.symmetry() == notSymmetric {
		return 0, false
	}
	if e.mirror == nil || e.mirror.devs[0] != dev {
		w, err := hw.NewWorld([]hw.Device{dev})
		if err != nil {
			return 0, false
		}
		e.mirror = NewExecutor(w)
		e.mirror.mirrored = true
	}
	in, errIn := dev.Alloc(plan.DType, plan.InLen)
	out, errOut := dev.Alloc(plan.DType, plan.OutLen)
	if errIn == nil && errOut == nil {
		seconds, err = e.mirror.run(plan, []hw.Slice{hw.Whole(in)}, []hw.Slice{hw.Whole(out)})
	}
	for _, b := range []hw.Buffer{in, out} {
		if b != nil {
			err = errors.Join(err, b.Free())
		}
	}
	if err = errors.Join(errIn, errOut, err); err != nil {
		e.mirror = nil
		return 0, false
	}
	e.mirroredRuns++
	return seconds, true
}

// MirroredRuns counts the runs this executor timed by running rank 0
// alone on the world's mirror (see hw.Mirrorer and Plan.RankSymmetric).
func (e *Executor) MirroredRuns() int { return e.mirroredRuns }

// RankSymmetric reports whether every rank runs rank 0's steps with its
// peers renamed by one rotation or xor of the ranks, with the same kinds,
// sizes and tags, and with rank 0's messages pairing up as a mirror needs.
// The Executor times such a plan on a world with a mirror (hw.Mirrorer)
// by running rank 0 alone. For a plan held in memory this checks every
// step.
func (p *Plan) RankSymmetric() bool { return p.symmetry() != notSymmetric }
