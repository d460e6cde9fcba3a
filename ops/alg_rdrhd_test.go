package ops

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

func rdSpec(op Op, algo string, p, n, root int, redop hw.ReduceOp) Spec {
	return Spec{Op: op, Algo: algo, Ranks: p, Count: n, Root: root, DType: hw.F32, Redop: redop}
}

// stepStrings prints rank r's program, one step a line.
func stepStrings(p *Plan, r int) []string {
	out := make([]string, len(p.Steps[r]))
	for i, s := range p.Steps[r] {
		out[i] = s.String()
	}
	return out
}

// TestRdRhdSteps pins a few programs step by step.
func TestRdRhdSteps(t *testing.T) {
	cases := []struct {
		name string
		spec Spec
		rank int
		want []string
	}{
		{"rd allreduce p=4: rank 0 exchanges with 1 then 2", rdSpec(AllReduce, "rd", 4, 3, 0, hw.Sum), 0, []string{
			"copy out[0:3] = in[0:3]",
			"send out[0:3] to 1 tag 1", "recv tmp[0:3] from 1 tag 1", "reduce out[0:3] += tmp[0:3]",
			"send out[0:3] to 2 tag 2", "recv tmp[0:3] from 2 tag 2", "reduce out[0:3] += tmp[0:3]",
		}},
		{"rd allreduce p=3 avg: rank 0 folds into 1 and waits", rdSpec(AllReduce, "rd", 3, 2, 0, hw.Avg), 0, []string{
			"send in[0:2] to 1 tag 0", "recv out[0:2] from 1 tag 2",
		}},
		{"rd allreduce p=3 avg: rank 1 stands for ranks 0 and 1", rdSpec(AllReduce, "rd", 3, 2, 0, hw.Avg), 1, []string{
			"copy out[0:2] = in[0:2]",
			"recv tmp[0:2] from 0 tag 0", "reduce out[0:2] += tmp[0:2]",
			"send out[0:2] to 2 tag 1", "recv tmp[0:2] from 2 tag 1", "reduce out[0:2] += tmp[0:2]",
			"divide out[0:2]", "send out[0:2] to 0 tag 2",
		}},
		{"rd allgather p=4: rank 2 doubles its block range", rdSpec(AllGather, "rd", 4, 2, 0, 0), 2, []string{
			"copy out[4:6] = in[0:2]",
			"send out[4:6] to 3 tag 1", "recv out[6:8] from 3 tag 1",
			"send out[4:8] to 0 tag 2", "recv out[0:4] from 0 tag 2",
		}},
		{"rd barrier p=5: three rounds", rdSpec(Barrier, "rd", 5, 0, 0, 0), 1, []string{
			"send tmp[0:0] to 2 tag 0", "recv tmp[0:0] from 0 tag 0",
			"send tmp[0:0] to 3 tag 1", "recv tmp[0:0] from 4 tag 1",
			"send tmp[0:0] to 0 tag 2", "recv tmp[0:0] from 2 tag 2",
		}},
		{"rhd allreduce p=4 avg: rank 1 halves, divides chunk 1, doubles", rdSpec(AllReduce, "rhd", 4, 8, 0, hw.Avg), 1, []string{
			"copy out[0:8] = in[0:8]",
			"send out[4:8] to 3 tag 1", "recv tmp[0:4] from 3 tag 1", "reduce out[0:4] += tmp[0:4]",
			"send out[0:2] to 0 tag 2", "recv tmp[0:2] from 0 tag 2", "reduce out[2:4] += tmp[0:2]",
			"divide out[2:4]",
			"send out[2:4] to 0 tag 3", "recv out[0:2] from 0 tag 3",
			"send out[0:4] to 3 tag 4", "recv out[4:8] from 3 tag 4",
		}},
		{"rhd reducescatter p=4: first step straight from In", rdSpec(ReduceScatter, "rhd", 4, 1, 0, hw.Sum), 3, []string{
			"send in[0:2] to 1 tag 1", "copy tmp[2:4] = in[2:4]", "recv tmp[4:6] from 1 tag 1", "reduce tmp[2:4] += tmp[4:6]",
			"send tmp[2:3] to 2 tag 2", "recv tmp[4:5] from 2 tag 2", "reduce tmp[3:4] += tmp[4:5]",
			"copy out[0:1] = tmp[3:4]",
		}},
		{"rhd broadcast p=4 root 1: the root scatters halves then quarters", rdSpec(Broadcast, "rhd", 4, 4, 1, 0), 1, []string{
			"copy out[0:4] = in[0:4]",
			"send out[2:4] to 3 tag 0", "send out[1:2] to 2 tag 0",
			"send out[0:1] to 2 tag 1", "recv out[1:2] from 2 tag 1",
			"send out[0:2] to 3 tag 2", "recv out[2:4] from 3 tag 2",
		}},
		{"rhd reduce p=4 root 2: the root gathers chunks 1 then 2..3", rdSpec(Reduce, "rhd", 4, 4, 2, hw.Sum), 2, []string{
			"copy out[0:4] = in[0:4]",
			"send out[2:4] to 0 tag 1", "recv tmp[0:2] from 0 tag 1", "reduce out[0:2] += tmp[0:2]",
			"send out[1:2] to 3 tag 2", "recv tmp[0:1] from 3 tag 2", "reduce out[0:1] += tmp[0:1]",
			"recv out[1:2] from 3 tag 3", "recv out[2:4] from 0 tag 4",
		}},
	}
	for _, c := range cases {
		p := mustPlan(t, c.spec)
		if got := stepStrings(p, c.rank); !slices.Equal(got, c.want) {
			t.Errorf("%s: rank %d runs\n  %s\nwant\n  %s", c.name, c.rank, strings.Join(got, "\n  "), strings.Join(c.want, "\n  "))
		}
	}
}

// rankTotals counts what one rank does in a plan, in elements.
type rankTotals struct {
	sends, sent, recvs, recvd, reduced, divided int
}

func totals(p *Plan, r int) rankTotals {
	var t rankTotals
	for _, s := range p.Steps[r] {
		switch s.Kind {
		case StepSend:
			t.sends++
			t.sent += s.Src.Len
		case StepRecv:
			t.recvs++
			t.recvd += s.Dst.Len
		case StepReduce:
			t.reduced += s.Dst.Len
		case StepDivide:
			t.divided += s.Dst.Len
		}
	}
	return t
}

// TestRdRhdFormulaTerms checks, for power-of-two p and counts that divide
// by p, that each rank sends the messages and elements the α, β and γ
// terms of REFERENCE.md's formulas count.
func TestRdRhdFormulaTerms(t *testing.T) {
	for lg := 1; lg <= 5; lg++ {
		p := 1 << lg
		n := 8 * p // all-reduce, broadcast, reduce: elements per rank
		c := 8     // all-gather, reduce-scatter: elements per block; N = p·c
		share := (p - 1) * n / p
		type want struct {
			name     string
			spec     Spec
			rank     int // -1: every rank
			sends    int
			sent     int
			reduced  int
			divided  int
			recvd    int // -1: not checked
			maxSends int // the most any rank sends, -1: not checked
		}
		wants := []want{
			{"rd allreduce: lg p·α + n·lg p·(β+γ)", rdSpec(AllReduce, "rd", p, n, 0, hw.Avg), -1, lg, n * lg, n * lg, n, n * lg, -1},
			{"rd allgather: lg p·α + (p−1)/p·Nβ", rdSpec(AllGather, "rd", p, c, 0, 0), -1, lg, (p - 1) * c, 0, 0, (p - 1) * c, -1},
			{"rhd allreduce: 2lg p·α + 2(p−1)/p·nβ + (p−1)/p·nγ", rdSpec(AllReduce, "rhd", p, n, 0, hw.Avg), -1, 2 * lg, 2 * share, share, n / p, 2 * share, -1},
			{"rhd reducescatter: lg p·α + (p−1)/p·N(β+γ)", rdSpec(ReduceScatter, "rhd", p, c, 0, hw.Avg), -1, lg, (p - 1) * c, (p - 1) * c, c, (p - 1) * c, -1},
			{"rhd broadcast root: 2lg p·α + 2(p−1)/p·nβ", rdSpec(Broadcast, "rhd", p, n, (p/2+1)%p, 0), (p/2 + 1) % p, 2 * lg, 2 * share, 0, 0, share, 2 * lg},
			{"rhd reduce root: lg p sends, 2lg p receives of 2(p−1)/p·n, (p−1)/p·nγ", rdSpec(Reduce, "rhd", p, n, p-1, hw.Avg), p - 1, lg, share, share, n, 2 * share, 2 * lg},
		}
		for _, w := range wants {
			plan := mustPlan(t, w.spec)
			maxSends := 0
			for r := range p {
				got := totals(plan, r)
				maxSends = max(maxSends, got.sends)
				if w.rank >= 0 && r != w.rank {
					continue
				}
				exp := rankTotals{sends: w.sends, sent: w.sent, recvs: got.recvs, recvd: w.recvd, reduced: w.reduced, divided: w.divided}
				if got != exp {
					t.Errorf("p=%d %s: rank %d does %+v, want %+v", p, w.name, r, got, exp)
				}
			}
			if w.maxSends >= 0 && maxSends > w.maxSends {
				t.Errorf("p=%d %s: a rank sends %d messages, more than %d", p, w.name, maxSends, w.maxSends)
			}
		}
	}
	// Dissemination: ceil(lg p) empty messages per rank, for any p.
	for p := 1; p <= 17; p++ {
		rounds := 0
		for 1<<rounds < p {
			rounds++
		}
		plan := mustPlan(t, rdSpec(Barrier, "rd", p, 0, 0, 0))
		for r := range p {
			if got := totals(plan, r); got.sends != rounds || got.recvs != rounds || got.sent != 0 {
				t.Errorf("barrier p=%d rank %d: %+v, want %d rounds of empty messages", p, r, got, rounds)
			}
		}
	}
	// The fold-in costs one message before and one after, no more.
	for p := 5; p <= 7; p++ {
		plan := mustPlan(t, rdSpec(AllReduce, "rd", p, 4, 0, hw.Sum))
		for r := range p {
			if got, most := totals(plan, r).sends, 2+1; got > most {
				t.Errorf("rd allreduce p=%d: rank %d sends %d messages, want at most %d", p, r, got, most)
			}
		}
	}
}

// symTree runs plan symbolically out of place and prints element i of rank
// r's Out as a tree with each combine's operands ordered by their smallest
// rank, so mirror-image combines print alike.
func symTree(t *testing.T, plan *Plan, r, i int) string {
	t.Helper()
	s := newSymRun(plan, false)
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	arr, off := s.loc(r, Ref{Buf: Out, Off: i, Len: 1})
	var walk func(v sym) (string, int32)
	walk = func(v sym) (string, int32) {
		switch n := s.t.nodes[v]; n.kind {
		case symLeaf:
			return fmt.Sprintf("x%d", n.a), n.a
		case symCombine:
			a, ka := walk(sym(n.a))
			b, kb := walk(sym(n.b))
			if kb < ka {
				a, b, ka = b, a, kb
			}
			return "(" + a + " " + b + ")", ka
		case symDivide:
			a, k := walk(sym(n.a))
			return a + "/p", k
		}
		return "?", -1
	}
	str, _ := walk(arr[off])
	return str
}

// TestRdRhdReductionOrder checks the grouping the doc comments promise.
func TestRdRhdReductionOrder(t *testing.T) {
	cases := []struct {
		spec  Spec
		rank  int
		elem  int
		want  string
		every bool // the same on every rank
	}{
		{rdSpec(AllReduce, "rd", 8, 3, 0, hw.Sum), 5, 1, "(((x0 x1) (x2 x3)) ((x4 x5) (x6 x7)))", true},
		{rdSpec(AllReduce, "rd", 6, 3, 0, hw.Avg), 0, 2, "(((x0 x1) (x2 x3)) (x4 x5))/p", true},
		{rdSpec(AllReduce, "rhd", 8, 11, 0, hw.Sum), 3, 10, "(((x0 x4) (x2 x6)) ((x1 x5) (x3 x7)))", true},
		{rdSpec(AllReduce, "rhd", 6, 5, 0, hw.Sum), 4, 0, "(((x0 x1) x4) ((x2 x3) x5))", true},
		{rdSpec(ReduceScatter, "rhd", 8, 2, 0, hw.Sum), 5, 1, "(((x0 x4) (x2 x6)) ((x1 x5) (x3 x7)))", false},
		{rdSpec(ReduceScatter, "rhd", 7, 2, 0, hw.Sum), 2, 0, "(((x0 x1) (x4 x5)) ((x2 x3) x6))", false},
		// Root-relative fold: v = r−3, pairs (v0,v1) = ranks (3,4), (v2,v3) = (5,0).
		{rdSpec(Reduce, "rhd", 6, 4, 3, hw.Sum), 3, 3, "(((x0 x5) x2) (x1 (x3 x4)))", false},
	}
	for _, c := range cases {
		plan := mustPlan(t, c.spec)
		if got := symTree(t, plan, c.rank, c.elem); got != c.want {
			t.Errorf("%v: rank %d out[%d] = %s, want %s", c.spec, c.rank, c.elem, got, c.want)
		}
		for r := 0; c.every && r < c.spec.Ranks; r++ {
			if got := symTree(t, plan, r, c.elem); got != c.want {
				t.Errorf("%v: rank %d out[%d] = %s, want %s", c.spec, r, c.elem, got, c.want)
			}
		}
	}
}

// TestRdRhdCheckerCatchesBreaks breaks each plan the way an off-by-one in a
// generator would and expects Check to refuse it.
func TestRdRhdCheckerCatchesBreaks(t *testing.T) {
	specs := []Spec{
		rdSpec(AllReduce, "rd", 6, 7, 0, hw.Sum),
		rdSpec(AllGather, "rd", 5, 3, 0, 0),
		rdSpec(AllReduce, "rhd", 8, 13, 0, hw.Avg),
		rdSpec(AllReduce, "rhd", 7, 13, 0, hw.Sum),
		rdSpec(ReduceScatter, "rhd", 6, 3, 0, hw.Sum),
		rdSpec(Broadcast, "rhd", 6, 13, 4, 0),
		rdSpec(Broadcast, "rhd", 8, 13, 4, 0),
		rdSpec(Reduce, "rhd", 7, 13, 3, hw.Sum),
	}
	mutations := map[string]func(p *Plan) bool{
		"receive shifted by one": func(p *Plan) bool {
			for r := range p.Steps {
				for i, s := range p.Steps[r] {
					if s.Kind == StepRecv && s.Dst.Buf == Out && s.Dst.Off > 0 {
						p.Steps[r][i].Dst.Off--
						return true
					}
				}
			}
			return false
		},
		"send shifted by one": func(p *Plan) bool {
			for r := range p.Steps {
				for i, s := range p.Steps[r] {
					if s.Kind == StepSend && s.Src.Off > 0 {
						p.Steps[r][i].Src.Off--
						return true
					}
				}
			}
			return false
		},
		"last reduce dropped": func(p *Plan) bool {
			for r := range p.Steps {
				for i := len(p.Steps[r]) - 1; i >= 0; i-- {
					if p.Steps[r][i].Kind == StepReduce {
						p.Steps[r] = slices.Delete(p.Steps[r], i, i+1)
						return true
					}
				}
			}
			return false
		},
	}
	for _, spec := range specs {
		for name, mutate := range mutations {
			p := mustPlan(t, spec)
			if err := Check(p); err != nil {
				t.Fatalf("%v: unmutated plan fails: %v", spec, err)
			}
			if !mutate(p) {
				continue
			}
			if err := Check(p); err == nil {
				t.Errorf("%v: %s: checker accepted the broken plan", spec, name)
			}
		}
	}
}
