package proptest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
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
			if defined(c.Spec, r) && !bytes.Equal(res[0].Outputs[r], res[1].Outputs[r]) {
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
			fmt.Fprintf(&b, "input %d: %s\n", r, formatElems(c.Spec.DType, in))
		}
	}
	fmt.Fprintf(&b, "reproduce: %s", c.Reproducer())
	return b.String()
}

// formatElems prints encoded elements as values, with raw bits for NaNs.
func formatElems(dt hw.DType, b []byte) string {
	var parts []string
	for i := 0; i+dt.Size() <= len(b); i += dt.Size() {
		parts = append(parts, fmtElem(dt, leBits(b[i:i+dt.Size()])))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// elemText prints one element's value: integers in decimal, floats as the
// shortest decimal (f16 and bf16 widen exactly to float32).
func elemText(dt hw.DType, bits uint64) string {
	switch dt {
	case hw.I32:
		return strconv.FormatInt(int64(int32(bits)), 10)
	case hw.I64:
		return strconv.FormatInt(int64(bits), 10)
	case hw.U8:
		return strconv.FormatUint(bits&0xFF, 10)
	}
	return strconv.FormatFloat(floatValue(dt, bits), 'g', -1, cond(dt == hw.F64, 64, 32))
}

// fmtElem is elemText with the bits of NaNs and zeros, whose decimal hides
// them.
func fmtElem(dt hw.DType, bits uint64) string {
	s := elemText(dt, bits)
	if !dt.IsFloat() {
		return s
	}
	if v := floatValue(dt, bits); math.IsNaN(v) || v == 0 {
		s += fmt.Sprintf("(0x%0*x)", 2*dt.Size(), bits)
	}
	return s
}

// floatValue is a float element's exact value.
func floatValue(dt hw.DType, bits uint64) float64 {
	switch dt {
	case hw.F16:
		return hw.Float16(bits).Float64()
	case hw.BF16:
		return hw.BFloat16(bits).Float64()
	case hw.F32:
		return float64(math.Float32frombits(uint32(bits)))
	}
	return math.Float64frombits(bits)
}

// defined reports whether the op defines rank r's output.
func defined(s ops.Spec, r int) bool {
	switch s.Op {
	case ops.Gather, ops.Reduce:
		return r == s.Root
	case ops.Barrier:
		return false
	}
	return true
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
			if defined(plan.Spec, r) && !bytes.Equal(got[r], want[r]) {
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
// Run returns them) are what c's collective must compute from c.Inputs,
// and otherwise an error naming the first wrong element and how many are
// wrong. Outputs the op leaves undefined (gather and reduce off the root)
// are not looked at. The expectations:
//
//   - copies (allgather, gather, broadcast, alltoall, sendrecv) and every
//     result of one rank (p = 1, a plain copy, or a division by 1 for avg)
//     are bit-exact;
//   - integers: exact, with the dtype's wrap-around; avg truncates the
//     wrapped sum toward zero;
//   - float min and max: exact bits (IEEE 754-2019: NaN anywhere gives the
//     canonical NaN, −0 < +0), since they are associative bit for bit;
//   - float sum: NaN anywhere, or +Inf and −Inf, give the canonical NaN;
//     one sign of Inf gives that Inf; a finite result lies within
//     γ(p−1)·Σ|x| of the exact sum, γ(k) = k·u/(1−k·u) and u the unit
//     roundoff (2^-24 f32, 2^-53 f64, 2^-11 f16, 2^-8 bf16): the bound of
//     any order of the p−1 additions each plan makes, each rounded once
//     (hw's f16 and bf16 double rounding equals single rounding);
//   - float avg: the sum's rules, the bound divided by p, plus u·|avg|
//     and one subnormal step η for the division;
//   - float prod: NaN for NaN or 0 × Inf; the sign is always the product
//     of the signs; a finite result within γ(p−1)·|Πx| + 4p·η·M^(p−1)
//     (M the largest |x|, at least 1: the underflow term);
//   - where partial results could overflow (Σ|x| or Π max(1,|x|) reaching
//     the dtype's largest finite) any non-finite result is accepted, and
//     where a partial product could underflow to 0 before meeting an Inf,
//     NaN is accepted for ±Inf.
//
// The exact values come from double-double arithmetic (TwoSum, and FMA
// for products): about 106 bits, so even f64 is checked against something
// far more precise; its own error (2^-100·Σ|x| and the underflow term) is
// added to the bound.
func CheckReference(c Case, outputs [][]byte) error {
	wrong, first, err := CountWrong(c, outputs)
	if err != nil {
		return err
	}
	if wrong > 0 {
		return fmt.Errorf("%w: %s; %d element(s) wrong", errWrong, first, wrong)
	}
	return nil
}

// CountWrong is CheckReference's verdict as numbers: how many output
// elements (on the ranks the op defines) break the bounds, and the first of
// them described. err reports outputs of the wrong shape.
func CountWrong(c Case, outputs [][]byte) (wrong int, first string, err error) {
	p := c.Spec.Ranks
	if len(outputs) != p || len(c.Inputs) != p {
		return 0, "", fmt.Errorf("%w: %d outputs and %d inputs for %d ranks", errWrong, len(outputs), len(c.Inputs), p)
	}
	for r := range p {
		n, f, err := countWrongRank(c, r, outputs[r])
		if err != nil {
			return 0, "", err
		}
		if wrong == 0 {
			first = f
		}
		wrong += n
	}
	return wrong, first, nil
}

// CountWrongRank is CountWrong for the output of one rank only, judged
// against every rank's input in c.Inputs: what a process that holds one
// rank of a multi-process collective can check. A rank whose output the op
// leaves undefined (gather and reduce off the root) has none wrong.
func CountWrongRank(c Case, rank int, output []byte) (wrong int, first string, err error) {
	if p := c.Spec.Ranks; len(c.Inputs) != p || rank < 0 || rank >= p {
		return 0, "", fmt.Errorf("%w: rank %d with %d inputs for %d ranks", errWrong, rank, len(c.Inputs), p)
	}
	return countWrongRank(c, rank, output)
}

// countWrongRank judges rank r's output; the caller has checked the inputs'
// number.
func countWrongRank(c Case, r int, output []byte) (wrong int, first string, err error) {
	s := c.Spec
	p, n, size := s.Ranks, s.Count, s.DType.Size()
	if !defined(s, r) {
		return 0, "", nil
	}
	in := func(q, i int) uint64 { return leBits(c.Inputs[q][i*size : (i+1)*size]) }
	_, outLen := s.BufferLens()
	if len(output) != outLen*size {
		return 0, "", fmt.Errorf("%w: rank %d output has %d bytes, want %d", errWrong, r, len(output), outLen*size)
	}
	vals := make([]uint64, p)
	for j := range outLen {
		got := leBits(output[j*size : (j+1)*size])
		var ok bool
		var want string
		if s.Op.Reduces() {
			base := cond(s.Op == ops.ReduceScatter, r*n, 0)
			for q := range p {
				vals[q] = in(q, base+j)
			}
			ok, want = judgeReduce(s.DType, s.Redop, vals, got)
		} else {
			var w uint64
			switch s.Op {
			case ops.AllGather, ops.Gather:
				w = in(j/n, j%n)
			case ops.Broadcast:
				w = in(s.Root, j)
			case ops.AllToAll:
				w = in(j/n, r*n+j%n)
			case ops.SendRecv:
				w = in((r+p-1)%p, j)
			}
			ok, want = got == w, fmtElem(s.DType, w)
		}
		if !ok {
			if wrong++; wrong == 1 {
				first = fmt.Sprintf("rank %d element %d = %s, want %s", r, j, fmtElem(s.DType, got), want)
				if s.Op.Reduces() {
					var b []byte
					for _, v := range vals {
						b = appendElem(b, s.DType, v)
					}
					first += " (inputs " + formatElems(s.DType, b) + ")"
				}
			}
		}
	}
	return wrong, first, nil
}

// errWrong is wrapped by CheckReference's errors.
var errWrong = errors.New("proptest: wrong output")

// dd is a double-double: the unevaluated sum hi + lo.
type dd struct{ hi, lo float64 }

func twoSum(a, b float64) (s, e float64) {
	s = a + b
	bb := s - a
	return s, (a - (s - bb)) + (b - bb)
}

func (d dd) add(x float64) dd {
	s, e := twoSum(d.hi, x)
	e += d.lo
	hi := s + e
	return dd{hi, e - (hi - s)}
}

func (d dd) mul(x float64) dd {
	p := d.hi * x
	e := math.FMA(d.hi, x, -p) + d.lo*x
	hi := p + e
	return dd{hi, e - (hi - p)}
}

// minus is |x − d|, nearly exactly.
func (d dd) minus(x float64) float64 {
	s, e := twoSum(x, -d.hi)
	return math.Abs(s + (e - d.lo))
}

// unitRoundoff is half the gap from 1 to the next float of dt; tiny is
// its smallest subnormal.
func unitRoundoff(dt hw.DType) (u, tiny float64) {
	f := floatFormat(dt)
	return math.Ldexp(1, -int(f.mbits)-1), floatValue(dt, 1)
}

// judgeReduce decides whether got is an acceptable reduction of vals (one
// element of every rank) and describes what was expected.
func judgeReduce(dt hw.DType, op hw.ReduceOp, vals []uint64, got uint64) (bool, string) {
	p := len(vals)
	if !dt.IsFloat() {
		w := intReduce(dt, op, vals)
		return got == w, fmtElem(dt, w)
	}
	f := floatFormat(dt)
	nan := f.canonicalNaN()
	g := floatValue(dt, got)
	if p == 1 { // a copy, or a division by 1 (which canonicalises NaN)
		w := vals[0]
		if op == hw.Avg && math.IsNaN(floatValue(dt, w)) {
			w = nan
		}
		return got == w, fmtElem(dt, w)
	}
	xs := make([]float64, p)
	hasNaN, pos, neg, zero, signNeg := false, false, false, false, false
	for i, v := range vals {
		xs[i] = floatValue(dt, v)
		hasNaN = hasNaN || math.IsNaN(xs[i])
		pos, neg = pos || math.IsInf(xs[i], 1), neg || math.IsInf(xs[i], -1)
		zero = zero || xs[i] == 0
		signNeg = signNeg != (v&f.sign() != 0)
	}
	if op == hw.Min || op == hw.Max {
		w := vals[0]
		for _, v := range vals[1:] {
			if key(f, v) < key(f, w) == (op == hw.Min) && key(f, v) != key(f, w) {
				w = v
			}
		}
		if hasNaN {
			w = nan
		}
		return got == w, fmtElem(dt, w)
	}
	u, tiny := unitRoundoff(dt)
	gamma := float64(p-1) * u / (1 - float64(p-1)*u) * (1 + 0x1p-50)
	maxFinite := floatValue(dt, f.inf()-1)
	finite := !math.IsNaN(g) && !math.IsInf(g, 0)
	inf := func(negative bool) uint64 { return f.inf() | cond(negative, f.sign(), 0) }
	if op == hw.Prod {
		acc, m, lo, hi := dd{hi: 1}, 1.0, 1.0, 1.0
		for _, x := range xs {
			if finite := !math.IsNaN(x) && !math.IsInf(x, 0); finite && x != 0 {
				acc = acc.mul(x)
				m, lo, hi = max(m, math.Abs(x)), lo*min(1, math.Abs(x)), hi*max(1, math.Abs(x))
			}
		}
		abs := 4 * float64(p) * tiny * math.Pow(m, float64(p-1))
		over := hi*(1+gamma) >= maxFinite
		under := lo*(1-gamma) <= abs
		switch {
		case hasNaN || (pos || neg) && zero:
			return got == nan, fmtElem(dt, nan)
		case pos || neg:
			return got == inf(signNeg) || under && got == nan, fmtElem(dt, inf(signNeg)) + cond(under, " or NaN", "")
		case zero:
			w := cond(signNeg, f.sign(), 0)
			return got == w || over && !finite, fmtElem(dt, w)
		}
		if over {
			return true, "anything (partial products may overflow)"
		}
		tol := gamma*math.Abs(acc.hi) + abs
		return finite && acc.minus(g) <= tol, fmt.Sprintf("%g ± %g", acc.hi, tol)
	}
	acc, abs := dd{}, 0.0 // Sum and Avg
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			acc, abs = acc.add(x), abs+math.Abs(x)
		}
	}
	abs *= 1 + 0x1p-48
	over := abs*(1+gamma) >= maxFinite
	switch {
	case hasNaN || pos && neg:
		return got == nan, fmtElem(dt, nan)
	case pos || neg:
		return got == inf(neg) || over && !finite, fmtElem(dt, inf(neg))
	}
	if over {
		return true, "anything (partial sums may overflow)"
	}
	tol := gamma*abs + 0x1p-100*abs
	diff := acc.minus(g)
	if op == hw.Avg {
		q := float64(p)
		qh := acc.hi / q // the exact average as a double-double
		diff = dd{qh, (math.FMA(-qh, q, acc.hi) + acc.lo) / q}.minus(g)
		tol = tol/q*(1+u) + u*math.Abs(acc.hi/q) + tiny
		return finite && diff <= tol, fmt.Sprintf("%g ± %g", acc.hi/q, tol)
	}
	return finite && diff <= tol, fmt.Sprintf("%g ± %g", acc.hi, tol)
}

// key orders a float's bits as IEEE 754-2019 minimum and maximum do: −0
// just below +0 (NaNs are handled apart).
func key(f floatFmt, v uint64) uint64 {
	if v&f.sign() != 0 {
		return f.sign() - 1 - (v &^ f.sign())
	}
	return f.sign() + v
}

// intReduce is the exact wrapped reduction of integer elements.
func intReduce(dt hw.DType, op hw.ReduceOp, vals []uint64) uint64 {
	bits := 8 * dt.Size()
	mask := uint64(math.MaxUint64) >> (64 - bits)
	signed := func(v uint64) int64 { return int64(v<<(64-bits)) >> (64 - bits) }
	less := func(a, b uint64) bool {
		if dt == hw.U8 {
			return a < b
		}
		return signed(a) < signed(b)
	}
	acc := vals[0]
	for _, v := range vals[1:] {
		switch op {
		case hw.Sum, hw.Avg:
			acc += v
		case hw.Prod:
			acc *= v
		case hw.Min:
			acc = cond(less(v, acc), v, acc)
		case hw.Max:
			acc = cond(less(acc, v), v, acc)
		}
	}
	acc &= mask
	if op == hw.Avg {
		if dt == hw.U8 {
			return acc / uint64(len(vals))
		}
		return uint64(signed(acc)/int64(len(vals))) & mask
	}
	return acc
}
