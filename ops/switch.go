package ops

import (
	"errors"
	"fmt"

	"github.com/commsim/commsim/hw"
)

// Switch steps (StepSwitchReduce, StepMulticast) are NVLS as a plan sees
// it: one rank's step reads or writes the same range on every member of
// its group, through the switch they all link to. No hw device has such
// an operation (CUDA reaches NVLS only inside NCCL, through --algo
// native), so only the simulator runs them, through package simexec; the
// generic driver refuses them (ErrUnsupported).
//
// Such a step has no counterpart on the members it touches: nothing but
// the plan's shape orders it against their own steps. NCCL's NVLS kernels
// bracket the work with barriers on the switch; a plan assumes the same:
// every member's input is ready before any member starts, and a member's
// output is complete only when every member has finished. Executor.Run
// starts every rank at once and waits for all of them, which keeps both.
// Check proves the rest (see Check).

// SwitchCoster is an optional interface of a CostModel that prices switch
// steps. A *topology.Topology implements it. Without it, Cost refuses a
// plan with switch steps.
type SwitchCoster interface {
	// SwitchCost returns the α (seconds) and β (seconds per byte) of rank's
	// switch reduction (reduce) or multicast over the group of ranks
	// first..first+n-1, on an idle fabric: α the longest way through the
	// switch, β the narrowest of every link the operation crosses and,
	// for a reduction, of the switch's reduction unit.
	SwitchCost(rank, first, n int, reduce bool) (alpha, beta float64, err error)
	// NetAllReduceCost returns the α and β of an all-reduce through the
	// switch by the group of ranks (StepNetAllReduce): α the slowest way
	// in plus the slowest way out, β the narrowest of every member's
	// links to the switch and of its reduction unit.
	NetAllReduceCost(ranks []int) (alpha, beta float64, err error)
}

// errSwitchOnly says why a backend without a switch cannot run a plan.
var errSwitchOnly = errors.New("switch steps (in-network reduction and multicast: NVLS on an NVSwitch, SHARP on a network switch) need a reducing switch, " +
	"which only the simulator has (package simexec); on CUDA, NCCL runs NVLS and CollNet itself through --algo native")

// switchUse records whether a plan has switch steps: Compile knows, a plan
// built by hand is looked at.
type switchUse uint8

const (
	switchUnknown switchUse = iota
	switchNone
	switchSome
)

// UsesSwitch reports whether the plan has switch steps, which only a
// simulator with a reducing switch runs. Compile records it (a compiled
// plan edited by hand keeps the record); a plan built by hand is read
// through, every rank.
func (p *Plan) UsesSwitch() bool {
	if p == nil || p.native {
		return false
	}
	switch p.switched {
	case switchSome:
		return true
	case switchNone:
		return false
	}
	if p.Streamed() {
		return false // made by Compile, which records it
	}
	for _, steps := range p.Steps {
		for i := range steps {
			if steps[i].Kind.IsSwitch() {
				return true
			}
		}
	}
	return false
}

// checkSwitchStep checks what a switch step of rank r can get wrong by
// itself, beyond its ranges: the plan's op, the lengths, the group, and
// the range it names on every member, which must be the caller's input or
// output (another rank's scratch belongs to its executor, and lives no
// longer than that rank's own part).
func checkSwitchStep(p *Plan, r int, s *Step) error {
	if s.Kind == StepSwitchReduce && !p.Op.Reduces() {
		return fmt.Errorf("switch-reduce in a %s plan", p.Op)
	}
	if s.Src.Len != s.Dst.Len {
		return fmt.Errorf("src has %d elements, dst %d", s.Src.Len, s.Dst.Len)
	}
	shared := s.Src
	if s.Kind == StepMulticast {
		shared = s.Dst
	}
	if shared.Buf != In && shared.Buf != Out {
		return fmt.Errorf("%v names every member's %s; a switch step may name only in or out there", shared, shared.Buf)
	}
	first, n := p.Group(r)
	if n < 1 || first < 0 || first+n > p.Ranks || r < first || r >= first+n {
		return fmt.Errorf("group of %d ranks from %d does not hold rank %d within the plan's %d ranks", n, first, r, p.Ranks)
	}
	return nil
}

// checkNetStep checks what a network step of rank r can get wrong by
// itself: the plan's op, the lengths, and ranks that make whole nodes,
// so that every local index has a member on every node.
func checkNetStep(p *Plan, r int, s *Step) error {
	if s.Kind != StepNetAllGather && !p.Op.Reduces() {
		return fmt.Errorf("%s in a %s plan", s.Kind, p.Op)
	}
	if g := p.NodeRanks; g > 0 && p.Ranks%g != 0 {
		return fmt.Errorf("%s over %d ranks in nodes of %d: the nodes are not whole", s.Kind, p.Ranks, g)
	}
	_, _, n := p.NetGroup(r)
	src, dst := s.Src.Len, s.Dst.Len
	switch s.Kind {
	case StepNetAllGather:
		src *= n
	case StepNetReduceScatter:
		dst *= n
	}
	if src != dst {
		return fmt.Errorf("%s of %d members: src has %d elements, dst %d", s.Kind, n, s.Src.Len, s.Dst.Len)
	}
	return nil
}

// runBuffers is every rank's input and output in one run of a plan with
// switch steps, which name other ranks' memory (RankJob.MemberSlice). Run
// knows them all at once; Enqueue learns them rank by rank, matching each
// rank's k-th enqueue of such a plan with the other ranks' k-th, as
// collectives match by order.
type runBuffers struct {
	plan    *Plan
	in, out []hw.Slice
	known   []bool // nil: all of them
	left    int    // ranks not yet known
}

// register records rank's buffers for its next run of a plan with switch
// steps, and returns that run's buffers.
func (e *Executor) register(plan *Plan, rank int, in, out hw.Slice) (*runBuffers, error) {
	if e.switchRuns == nil {
		e.switchRuns, e.switchSeq = map[int]*runBuffers{}, make([]int, len(e.devs))
	}
	k := e.switchSeq[rank]
	run := e.switchRuns[k]
	if run == nil {
		n := plan.Ranks
		run = &runBuffers{plan: plan, in: make([]hw.Slice, n), out: make([]hw.Slice, n), known: make([]bool, n), left: n}
		e.switchRuns[k] = run
	}
	if run.plan != plan {
		return nil, fmt.Errorf("ops: enqueue %v: rank %d: %w: its plan with switch steps number %d is not the other ranks' (%v); enqueue such plans in the same order on every rank",
			plan.Spec, rank, hw.ErrBadArgument, k, run.plan.Spec)
	}
	e.switchSeq[rank]++
	run.in[rank], run.out[rank], run.known[rank] = in, out, true
	if run.left--; run.left == 0 {
		delete(e.switchRuns, k)
	}
	return run, nil
}

// MemberSlice resolves ref, In or Out, on rank q of the same run: the
// memory a switch step of the job's rank reaches on member q. Ranks run
// through Enqueue must all have been enqueued first, as before any wait.
func (j *RankJob) MemberSlice(q int, ref Ref) (hw.Slice, error) {
	if err := j.made(); err != nil {
		return hw.Slice{}, err
	}
	run := j.run
	switch {
	case run == nil:
		return hw.Slice{}, fmt.Errorf("%w: rank %d knows no other rank's buffers", ErrBadPlan, j.Rank)
	case q < 0 || q >= len(run.in):
		return hw.Slice{}, fmt.Errorf("%w: member rank %d not in world of %d ranks", hw.ErrUnknownPeer, q, len(run.in))
	case run.known != nil && !run.known[q]:
		return hw.Slice{}, fmt.Errorf("%w: rank %d's buffers for this run are not known: enqueue every rank's part before waiting", hw.ErrNotReady, q)
	}
	switch ref.Buf {
	case In:
		return run.in[q].Sub(ref.Off, ref.Len), nil
	case Out:
		return run.out[q].Sub(ref.Off, ref.Len), nil
	}
	return hw.Slice{}, fmt.Errorf("%w: %v names another rank's %s", ErrBadPlan, ref, ref.Buf)
}

// refuseUnsupported refuses, before anything is enqueued, what the
// generic driver cannot do: a plan with switch steps, on any backend; and
// on a simulated device, a plan that moves as NCCL's protocols (a Wire or
// a Launch), which real devices ignore (theirs are their own) but which a
// simulator would time wrongly without them.
func (e *Executor) refuseUnsupported(plan *Plan) error {
	if _, generic := e.driver.(genericDriver); !generic {
		return nil
	}
	if plan.UsesSwitch() {
		return fmt.Errorf("ops: run %v: %w: %w", plan.Spec, ErrUnsupported, errSwitchOnly)
	}
	if (plan.Wire != nil || plan.Launch > 0) && len(e.devs) > 0 && e.devs[0].Kind() == "sim" {
		return fmt.Errorf("ops: run %v: %w: %w", plan.Spec, ErrUnsupported, errWireOnSim)
	}
	return nil
}

// errWireOnSim says why the generic driver does not time an NCCL plan on
// the simulator.
var errWireOnSim = errors.New("the plan moves as NCCL's protocols (its Wire and Launch, from package nccl), which the generic driver (NewExecutor's) " +
	"cannot give a simulated device, so its times would be wrong: run it with package simexec's driver (simexec.NewExecutor(cluster), or simexec.NewDriver(cluster) as a Driver)")
