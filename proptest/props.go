package proptest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// The properties below take the world factory of the backend under test,
// with the signature of Backend.NewWorld (pass SimBackend(cfg).NewWorld,
// or your own): it returns a world of c.Spec.Ranks ranks and a function
// that releases it (which may be nil). Each property runs every case out
// of place and in place, on one world. The optional gens replace the
// default case generator (several are drawn from evenly). A failure's
// label (see Describe) names what broke, the shrunk case, its inputs when
// they are short, and the reproducer; the seed that replays it is the
// runner's (gopter's TestParameters.Seed; the kit's own tests print it
// with the COMMSIM_PROPTEST_SEED to set).

// ReferenceProperty: every collective's outputs match a reference computed
// from the inputs, as CheckReference states, out of place and in place.
// By default the cases are GenCase(DefaultGenOptions()).
func ReferenceProperty(newWorld func(Case) (*hw.World, func(), error), gens ...gopter.Gen) gopter.Prop {
	return caseProp(newWorld, casesOr(gens, GenOptions{}), func(c Case, res [2]Result, _ *hw.World) error {
		for i, mode := range modes {
			if err := CheckReference(c, res[i].Outputs); err != nil {
				return fmt.Errorf("%s: %w", mode, err)
			}
		}
		return nil
	})
}

// ConsistencyProperty: after allreduce, allgather and broadcast every rank
// holds bit-identical output, and in place gives the same bits as out of
// place on every rank whose output the op defines. By default the cases
// are GenCase with those three ops.
func ConsistencyProperty(newWorld func(Case) (*hw.World, func(), error), gens ...gopter.Gen) gopter.Prop {
	opts := GenOptions{Ops: []ops.Op{ops.AllReduce, ops.AllGather, ops.Broadcast}}
	return caseProp(newWorld, casesOr(gens, opts), func(c Case, res [2]Result, _ *hw.World) error {
		for i, mode := range modes {
			out := res[i].Outputs
			switch c.Spec.Op {
			case ops.AllReduce, ops.AllGather, ops.Broadcast:
				for r := 1; r < len(out); r++ {
					if !bytes.Equal(out[r], out[0]) {
						return fmt.Errorf("%s: rank %d's output differs from rank 0's at element %d", mode, r, firstDiff(out[r], out[0], c.Spec.DType))
					}
				}
			}
		}
		for r := range res[0].Outputs {
			if verify.Defined(c.Spec, r) && !bytes.Equal(res[0].Outputs[r], res[1].Outputs[r]) {
				return fmt.Errorf("rank %d: in place differs from out of place at element %d", r, firstDiff(res[0].Outputs[r], res[1].Outputs[r], c.Spec.DType))
			}
		}
		return nil
	})
}

// AlgebraProperty checks laws that tie collectives together, bit for bit:
//
//   - allreduce(x) = allgather(reducescatter(x)) with count p·⌊n/p⌋, for
//     every reducescatter and allgather algorithm. For integers and for
//     min and max every algorithm triple must agree (their arithmetic is
//     associative). For float sum, prod and avg the pair must group each
//     element's reduction alike, which ops documents for two pairs:
//     direct (allreduce folds chunk j in rank order ((x0 op x1) op x2)…,
//     as reducescatter folds block j) and rhd (both fold in x[r] op
//     x[r+1], then halve top new-rank bit first, whichever rank owns the
//     element); float cases whose algorithm is neither use direct. Ring
//     does not qualify: its allreduce and reducescatter start each fold
//     at different ranks.
//   - gather at the root = allgather on every rank (all algorithm pairs).
//   - alltoall twice (the case's, then each) gives back the input.
//   - sendrecv p times gives back the input.
//   - broadcast delivers the root's input to every rank.
//
// By default the cases are GenCase with those ops.
func AlgebraProperty(newWorld func(Case) (*hw.World, func(), error), gens ...gopter.Gen) gopter.Prop {
	opts := GenOptions{Ops: []ops.Op{ops.AllReduce, ops.Gather, ops.AllGather, ops.AllToAll, ops.SendRecv, ops.Broadcast}}
	return caseProp(newWorld, casesOr(gens, opts), func(c Case, _ [2]Result, w *hw.World) error {
		for i, inPlace := range []bool{false, true} {
			if err := algebraLaw(w, c, inPlace); err != nil {
				return fmt.Errorf("%s: %w", modes[i], err)
			}
		}
		return nil
	})
}

var modes = [2]string{"out of place", "in place"}

// casesOr is gens drawn evenly, or GenCase(o).
func casesOr(gens []gopter.Gen, o GenOptions) gopter.Gen {
	if len(gens) == 0 {
		return GenCase(o)
	}
	return gen.OneGenOf(gens...)
}

// caseProp runs each case out of place and in place on one world and
// applies check; a failure becomes a label describing the case.
func caseProp(newWorld func(Case) (*hw.World, func(), error), cases gopter.Gen, check func(Case, [2]Result, *hw.World) error) gopter.Prop {
	return prop.ForAll(func(c Case) string {
		err := func() error {
			w, release, err := newWorld(c)
			if release != nil {
				defer release()
			}
			if err != nil {
				return fmt.Errorf("new world: %w", err)
			}
			var res [2]Result
			for i, inPlace := range []bool{false, true} {
				if res[i], err = Run(w, c, inPlace); err != nil {
					return fmt.Errorf("%s: %w", modes[i], err)
				}
			}
			return check(c, res, w)
		}()
		if err == nil {
			return ""
		}
		return Describe(c, err)
	}, cases)
}

// Describe formats a failure of c: the error, the case, every rank's input
// when there are at most 64 elements in all, and the reproducer.
func Describe(c Case, err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v\ncase: %v\n", err, c)
	n := 0
	for _, in := range c.Inputs {
		n += len(in) / max(c.Spec.DType.Size(), 1)
	}
	if n <= 64 {
		for r, in := range c.Inputs {
			fmt.Fprintf(&b, "input %d: %s\n", r, verify.FormatElems(c.Spec.DType, in))
		}
	}
	fmt.Fprintf(&b, "reproduce: %s", c.Reproducer())
	return b.String()
}

// firstDiff is the index of the first element where a and b differ.
func firstDiff(a, b []byte, dt hw.DType) int {
	size := max(dt.Size(), 1)
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return i / size
		}
	}
	return min(len(a), len(b)) / size
}

// algebraLaw checks the law of c's op on w (see AlgebraProperty), with
// every partner algorithm, so that shrinking never changes which ones run.
func algebraLaw(w *hw.World, c Case, inPlace bool) error {
	s, p := c.Spec, c.Spec.Ranks
	run := func(t ops.Spec, in [][]byte) ([][]byte, error) {
		res, err := Run(w, Case{Spec: t, Topo: c.Topo, Inputs: in}, inPlace)
		if err != nil {
			return nil, fmt.Errorf("%v: %w", t, err)
		}
		return res.Outputs, nil
	}
	same := func(got, want [][]byte, format string, args ...any) error {
		for r := range got {
			if !bytes.Equal(got[r], want[r]) {
				return fmt.Errorf("%s: rank %d differs at element %d", fmt.Sprintf(format, args...), r, firstDiff(got[r], want[r], s.DType))
			}
		}
		return nil
	}
	switch s.Op {
	case ops.AllReduce:
		ar, m := s, s.Count/p
		ar.Count = m * p
		rsAlgos := ops.AlgorithmsFor(ops.ReduceScatter)
		if s.DType.IsFloat() && s.Redop != hw.Min && s.Redop != hw.Max {
			if ar.Algo != "rhd" { // rhd and direct have a matching reducescatter
				ar.Algo = "direct"
			}
			rsAlgos = []string{ar.Algo}
		}
		x := make([][]byte, p)
		for r := range x {
			x[r] = c.Inputs[r][:ar.Count*s.DType.Size()]
		}
		want, err := run(ar, x)
		for _, rs := range rsAlgos {
			mid, err2 := run(ops.Spec{Op: ops.ReduceScatter, Algo: rs, Ranks: p, Count: m, DType: s.DType, Redop: s.Redop}, x)
			for _, ag := range ops.AlgorithmsFor(ops.AllGather) {
				got, err3 := run(ops.Spec{Op: ops.AllGather, Algo: ag, Ranks: p, Count: m, DType: s.DType}, mid)
				if err := errors.Join(err, err2, err3); err != nil {
					return err
				}
				if err := same(got, want, "allgather/%s(reducescatter/%s(x)) vs allreduce/%s(x), count %d", ag, rs, ar.Algo, ar.Count); err != nil {
					return err
				}
			}
		}
	case ops.Gather, ops.AllGather:
		for _, ga := range ops.AlgorithmsFor(ops.Gather) {
			for _, aa := range ops.AlgorithmsFor(ops.AllGather) {
				g := ops.Spec{Op: ops.Gather, Algo: ga, Ranks: p, Count: s.Count, Root: s.Root, DType: s.DType}
				a := ops.Spec{Op: ops.AllGather, Algo: aa, Ranks: p, Count: s.Count, DType: s.DType}
				gathered, err := run(g, c.Inputs)
				all, err2 := run(a, c.Inputs)
				if err := errors.Join(err, err2); err != nil {
					return err
				}
				for r := range all {
					if !bytes.Equal(all[r], gathered[g.Root]) {
						return fmt.Errorf("allgather/%s on rank %d differs from gather/%s at root %d at element %d", aa, r, ga, g.Root, firstDiff(all[r], gathered[g.Root], s.DType))
					}
				}
			}
		}
	case ops.AllToAll:
		y, err := run(s, c.Inputs)
		for _, a := range ops.AlgorithmsFor(ops.AllToAll) {
			t := s
			t.Algo = a
			z, err2 := run(t, y)
			if err := errors.Join(err, err2); err != nil {
				return err
			}
			if err := same(z, c.Inputs, "alltoall/%s(alltoall/%s(x)) vs x", a, s.Algo); err != nil {
				return err
			}
		}
	case ops.SendRecv:
		x := c.Inputs
		for range p {
			var err error
			if x, err = run(s, x); err != nil {
				return err
			}
		}
		return same(x, c.Inputs, "sendrecv applied %d times vs x", p)
	case ops.Broadcast:
		out, err := run(s, c.Inputs)
		if err != nil {
			return err
		}
		for r := range out {
			if !bytes.Equal(out[r], c.Inputs[s.Root]) {
				return fmt.Errorf("broadcast: rank %d differs from root %d's input at element %d", r, s.Root, firstDiff(out[r], c.Inputs[s.Root], s.DType))
			}
		}
	}
	return nil
}

// CheckerProperty: ops.Check accepts every generated plan, and it is
// sound against one mutation of it: a dropped step (later After indices
// renumbered), a send or receive redirected to another peer, or a range
// shifted by one element; the mutation's kind, position and direction are
// generated (and shrunk) with the spec. Only mutations that can matter are
// made (a dropped or shifted step moves at least one element, or is a
// message), yet some still cannot: a plan may receive data a rank already
// holds (rhd's broadcast passes the root its own chunks), and moving such
// a dead write changes nothing. So when Check accepts a mutant, the mutant
// and the original are both run on a simulated switch with distinct i64
// inputs (sum, or avg for avg plans), in and out of place, and must agree
// on every output: a mutant Check accepts that computes something else is
// a hole in Check. By default the specs are GenSpec with up to 9 ranks and
// 48 elements, as Check's cost grows with steps times lengths.
func CheckerProperty(gens ...gopter.Gen) gopter.Prop {
	specs := GenSpec(GenOptions{MaxRanks: 9, MaxElems: 48})
	if len(gens) > 0 {
		specs = gen.OneGenOf(gens...)
	}
	return prop.ForAll(func(s ops.Spec, kind, pos int, up bool) string {
		plan, err := ops.Compile(s)
		if err != nil {
			return fmt.Sprintf("compile %v: %v", s, err)
		}
		if err := ops.Check(plan); err != nil {
			return fmt.Sprintf("check rejects the unmutated plan: %v", err)
		}
		bad, what, ok := mutate(plan, kind, pos, up)
		if !ok || ops.Check(bad) != nil {
			return "" // nothing of that kind to mutate (p = 1, say), or caught
		}
		if err := sameResults(plan, bad); err != nil {
			msg := fmt.Sprintf("check accepts %v with %s, which computes something else: %v", s, what, err)
			if bad.NumSteps() <= 60 {
				msg += "\n" + bad.Describe()
			}
			return msg
		}
		return ""
	}, specs, gen.IntRange(0, 2), gen.IntRange(0, 1<<20), gen.Bool())
}

// sameResults runs plan and bad as i64 plans on a simulated switch, with
// input element i of rank r set to a distinct value, and compares their
// outputs out of place and in place.
func sameResults(plan, bad *ops.Plan) error {
	as := func(p *ops.Plan) *ops.Plan {
		q := *p
		q.DType, q.Redop = hw.I64, cond(p.Redop == hw.Avg, hw.Avg, hw.Sum)
		return &q
	}
	plan, bad = as(plan), as(bad)
	inputs := make([][]byte, plan.Ranks)
	for r := range inputs {
		for i := range plan.InLen {
			inputs[r] = appendElem(inputs[r], hw.I64, uint64(r+1)<<32|uint64(i+1)*0x9E3779B97F4A7C15>>32)
		}
	}
	for _, inPlace := range []bool{false, true} {
		want, err := runPlan(plan, inputs, inPlace)
		if err != nil {
			return fmt.Errorf("the original plan fails: %w", err)
		}
		got, err := runPlan(bad, inputs, inPlace)
		if err != nil {
			return fmt.Errorf("%s: %w", modes[cond(inPlace, 1, 0)], err)
		}
		for r := range got {
			if verify.Defined(plan.Spec, r) && !bytes.Equal(got[r], want[r]) {
				return fmt.Errorf("%s: rank %d's output differs at element %d", modes[cond(inPlace, 1, 0)], r, firstDiff(got[r], want[r], hw.I64))
			}
		}
	}
	return nil
}

// runPlan runs plan on a fresh simulated switch, in place as Run does,
// and returns every rank's output.
func runPlan(plan *ops.Plan, inputs [][]byte, inPlace bool) ([][]byte, error) {
	topo, err := topology.Parse(fmt.Sprintf("switch:%d", plan.Ranks))
	if err != nil {
		return nil, err
	}
	cl, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	res, err := RunPlan(cl.World(), plan, inputs, inPlace)
	return res.Outputs, err
}

// mutate returns a copy of plan with one mutation of the kind (0 drop, 1
// peer, 2 shift) at the pos-th eligible step (mod their number), a
// description, and false when no step is eligible.
func mutate(plan *ops.Plan, kind, pos int, up bool) (*ops.Plan, string, bool) {
	type at struct{ r, i int }
	var cand []at
	for r, steps := range plan.Steps {
		for i, st := range steps {
			msg := st.Kind == ops.StepSend || st.Kind == ops.StepRecv
			long := st.Src.Len > 0 || st.Dst.Len > 0
			if kind == 0 && (msg || long) || kind == 1 && msg && plan.Ranks > 2 || kind == 2 && long {
				cand = append(cand, at{r, i})
			}
		}
	}
	if len(cand) == 0 {
		return nil, "", false
	}
	c := cand[pos%len(cand)]
	bad := *plan
	bad.Steps = slices.Clone(plan.Steps)
	steps := slices.Clone(plan.Steps[c.r])
	bad.Steps[c.r] = steps
	st := &steps[c.i]
	what := fmt.Sprintf("rank %d step %d (%v)", c.r, c.i, *st)
	switch kind {
	case 0:
		steps = slices.Delete(steps, c.i, c.i+1)
		for j := c.i; j < len(steps); j++ {
			var after []int
			for _, a := range steps[j].After {
				if a != c.i {
					after = append(after, a-cond(a > c.i, 1, 0))
				}
			}
			steps[j].After = after
		}
		bad.Steps[c.r] = steps
		return &bad, what + " dropped", true
	case 1:
		var others []int
		for q := range plan.Ranks {
			if q != c.r && q != st.Peer {
				others = append(others, q)
			}
		}
		peer := others[pos%len(others)]
		st.Peer = peer
		return &bad, fmt.Sprintf("%s sent to/received from %d", what, peer), true
	}
	ref := &st.Dst
	if st.Src.Len > 0 && (st.Dst.Len == 0 || pos%2 == 1) {
		ref = &st.Src
	}
	d := cond(up || ref.Off == 0, 1, -1)
	ref.Off += d
	return &bad, fmt.Sprintf("%s shifted by %d to %v", what, d, *ref), true
}

// CheckReference returns nil when outputs (every rank's output buffer, as
// Run returns them) are what c's collective must compute from c.Inputs; it
// is verify.CheckReference, whose comment states the expectations and the
// error bounds.
func CheckReference(c Case, outputs [][]byte) error { return verify.CheckReference(c, outputs) }

// CountWrong is CheckReference's verdict as numbers (verify.CountWrong).
func CountWrong(c Case, outputs [][]byte) (wrong int, first string, err error) {
	return verify.CountWrong(c, outputs)
}

// CountWrongRank is CountWrong for the output of one rank only
// (verify.CountWrongRank).
func CountWrongRank(c Case, rank int, output []byte) (wrong int, first string, err error) {
	return verify.CountWrongRank(c, rank, output)
}
