package ops

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrBadPlan is wrapped by the errors of plans that are malformed: a step
// on a lane the plan does not have, an After list that points forward, a
// message to oneself, a range outside its buffer, sends and receives that
// do not pair up, a switch step whose group does not hold its rank.
// Compile never makes such a plan; one built or edited by hand is refused
// by Run, Enqueue, Cost and Check before anything runs.
var ErrBadPlan = errors.New("malformed plan")

// validate is the cheap structural check that every plan passes before it
// runs or is costed: a held plan is checked step by step, with its sends
// and receives paired. A streamed plan is one of Compile's algorithms,
// never made or edited by hand, whose held plans the tests check.
func (p *Plan) validate() error {
	if p != nil && p.native {
		return nil
	}
	if err := checkShape(p); err != nil {
		return err
	}
	if p.Streamed() {
		return nil
	}
	var pairs pairSum
	for r, steps := range p.Steps {
		for i := range steps {
			pairs.add(r, &steps[i])
		}
	}
	if !pairs.balanced() {
		return unpairedMessage(p)
	}
	return nil
}

// checkShape checks a plan's shape, and every step of a held plan: see
// checkRankShape.
func checkShape(p *Plan) error {
	if err := checkPlanShape(p); err != nil {
		return err
	}
	for r := range p.Steps {
		if err := checkRankShape(p, r); err != nil {
			return err
		}
	}
	return nil
}

// maxIdleLanes bounds the lanes of a plan that have no steps (a folded
// plan's last ones may have none).
const maxIdleLanes = 1024

// checkPlanShape checks what a plan of any size can get wrong at once: a
// held plan's program per rank, and its lanes.
func checkPlanShape(p *Plan) error {
	switch {
	case p == nil:
		return fmt.Errorf("%w: nil plan", ErrBadPlan)
	case p.Ranks < 1 || p.Count < 0 || p.InLen < 0 || p.OutLen < 0:
		return fmt.Errorf("%w: plan of %d ranks, count %d, buffers of %d and %d elements", ErrBadPlan, p.Ranks, p.Count, p.InLen, p.OutLen)
	case p.Lanes < 1:
		return fmt.Errorf("%w: plan has %d lanes", ErrBadPlan, p.Lanes)
	case p.Lanes > p.NumSteps()+maxIdleLanes:
		// Each lane keeps a clock a rank: a plan's lanes come from its
		// steps, and 2^40 of them took the host's memory.
		return fmt.Errorf("%w: plan has %d lanes for %d steps", ErrBadPlan, p.Lanes, p.NumSteps())
	case !p.DType.Valid():
		return fmt.Errorf("%w: plan has the invalid dtype %v", ErrBadPlan, p.DType)
	case !p.Streamed() && len(p.Steps) != p.Ranks:
		return fmt.Errorf("%w: plan has programs for %d ranks, want %d", ErrBadPlan, len(p.Steps), p.Ranks)
	case !(p.Launch >= 0) || math.IsInf(p.Launch, 0):
		return fmt.Errorf("%w: launch time %v s", ErrBadPlan, p.Launch)
	}
	if p.Wire != nil {
		if err := p.Wire.check(); err != nil {
			return fmt.Errorf("%w: %v", ErrBadPlan, err)
		}
	}
	return nil
}

// checkRankShape checks every step of rank r of a held plan: its lane
// exists, its After list points to earlier steps, and checkStep. A
// streamed plan's steps were checked by Compile.
func checkRankShape(p *Plan, r int) error {
	if p.Streamed() {
		return nil
	}
	for i, s := range p.Steps[r] {
		bad := func(err error) error {
			return fmt.Errorf("%w: rank %d step %d (%v): %w", ErrBadPlan, r, i, s, err)
		}
		if s.Lane < 0 || s.Lane >= p.Lanes {
			return bad(fmt.Errorf("lane %d outside 0..%d", s.Lane, p.Lanes-1))
		}
		for _, a := range s.After {
			if a < 0 || a >= i {
				return bad(fmt.Errorf("After names step %d, not an earlier step", a))
			}
		}
		if err := checkStep(p, r, &s); err != nil {
			return bad(err)
		}
	}
	return nil
}

// checkStep checks what one step of rank r can get wrong by itself: its
// kind, its peer, its ranges.
func checkStep(p *Plan, r int, s *Step) error {
	var refs [2]Ref
	nrefs := 0
	switch s.Kind {
	case StepSend, StepRecv:
		if s.Peer < 0 || s.Peer >= p.Ranks || s.Peer == r {
			return fmt.Errorf("peer %d is not another rank of %d", s.Peer, p.Ranks)
		}
		refs[0], nrefs = s.Src, 1
		if s.Kind == StepRecv {
			refs[0] = s.Dst
		}
	case StepReduce, StepCopy:
		if s.Kind == StepReduce && !p.Op.Reduces() {
			return fmt.Errorf("reduce in a %s plan", p.Op)
		}
		if s.Src.Len != s.Dst.Len {
			return fmt.Errorf("src has %d elements, dst %d", s.Src.Len, s.Dst.Len)
		}
		refs, nrefs = [2]Ref{s.Src, s.Dst}, 2
	case StepDivide:
		if !isAvg(p.Spec) {
			return fmt.Errorf("divide in a plan that does not average")
		}
		refs[0], nrefs = s.Dst, 1
	case StepSwitchReduce, StepMulticast:
		if err := checkSwitchStep(p, r, s); err != nil {
			return err
		}
		refs, nrefs = [2]Ref{s.Src, s.Dst}, 2
	case StepNetAllReduce, StepNetAllGather, StepNetReduceScatter:
		if err := checkNetStep(p, r, s); err != nil {
			return err
		}
		refs, nrefs = [2]Ref{s.Src, s.Dst}, 2
	default:
		return fmt.Errorf("unknown step kind %d", s.Kind)
	}
	for _, ref := range refs[:nrefs] {
		n := p.Len(ref.Buf)
		if ref.Buf > Tmp || ref.Off < 0 || ref.Len < 0 || ref.Off > n-ref.Len {
			return fmt.Errorf("%v outside %s of %d elements", ref, ref.Buf, n)
		}
	}
	return nil
}

// pairSum tells, in one pass and without memory, whether every send of a
// plan has a receive of the same size: each message (from, to, tag,
// length) adds a hash when sent and subtracts it when received, so the
// sum is zero when the two multisets agree (and otherwise is zero with
// probability 2⁻⁶⁴). Order within a pair is the backends' business: a
// receive of the wrong size fails there.
type pairSum uint64

func (ps *pairSum) add(r int, s *Step) {
	switch s.Kind {
	case StepSend:
		*ps += pairSum(messageHash(r, s.Peer, s.Tag, s.Src.Len))
	case StepRecv:
		*ps -= pairSum(messageHash(s.Peer, r, s.Tag, s.Dst.Len))
	}
}

func (ps pairSum) balanced() bool { return ps == 0 }

// messageHash mixes a message's ends (each under 2^20; MaxRanks is 2^18), tag and
// length into one word.
func messageHash(from, to int, tag uint32, n int) uint64 {
	return splitmix(uint64(from)<<44 ^ uint64(to)<<24 ^ uint64(tag)*0x9e3779b97f4a7c15 ^ uint64(n)*0xc2b2ae3d27d4eb4f)
}

// splitmix is splitmix64's finaliser, a bijection with good mixing.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// unpairedMessage finds, once pairSum has said there is one, the first
// send (by sender, receiver, tag) that no receive takes or that is
// received with another size, or else the first receive that no send
// feeds, and names it.
func unpairedMessage(p *Plan) error {
	type key struct {
		from, to int
		tag      uint32
	}
	type message struct{ step, n int }
	sent, got := map[key][]message{}, map[key][]message{}
	for r := range p.Ranks {
		i := 0
		for s := range p.RankSteps(r) {
			switch s.Kind {
			case StepSend:
				k := key{r, s.Peer, s.Tag}
				sent[k] = append(sent[k], message{i, s.Src.Len})
			case StepRecv:
				k := key{s.Peer, r, s.Tag}
				got[k] = append(got[k], message{i, s.Dst.Len})
			}
			i++
		}
	}
	var keys []key
	for k := range sent {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := sent[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int { return cmpInts(a.from, b.from, a.to, b.to, int(a.tag), int(b.tag)) })
	// Sends first: a receive left waiting is the consequence of a send
	// gone astray more often than the cause.
	for _, k := range keys {
		s, g := sent[k], got[k]
		for i := range s {
			switch {
			case i >= len(g):
				return fmt.Errorf("%w: rank %d step %d sends %d elements to rank %d with tag %d, and rank %d never receives it",
					ErrBadPlan, k.from, s[i].step, s[i].n, k.to, k.tag, k.to)
			case s[i].n != g[i].n:
				return fmt.Errorf("%w: rank %d step %d sends %d elements to rank %d with tag %d, which receives %d at step %d",
					ErrBadPlan, k.from, s[i].step, s[i].n, k.to, k.tag, g[i].n, g[i].step)
			}
		}
	}
	for _, k := range keys {
		if s, g := sent[k], got[k]; len(g) > len(s) {
			return fmt.Errorf("%w: rank %d step %d receives %d elements from rank %d with tag %d, and rank %d never sends it",
				ErrBadPlan, k.to, g[len(s)].step, g[len(s)].n, k.from, k.tag, k.from)
		}
	}
	return fmt.Errorf("%w: sends and receives do not pair up", ErrBadPlan)
}
