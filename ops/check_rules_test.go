package ops

import (
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestCheckRefusesEachRule breaks a good plan in a way that only one of
// Check's rules sees (the results stay right, or stay the same on every
// rank) and wants that rule's refusal: each case fails if its rule is
// taken out of the checker, where TestCheckerCatchesBrokenPlans's
// breaks are caught by several rules at once.
func TestCheckRefusesEachRule(t *testing.T) {
	cases := []struct {
		rule   string
		good   func(t *testing.T) *Plan
		mutate func(p *Plan)
		want   string
	}{{
		// Every rank reduces every element once, but rank 0 groups
		// ((x0 x1) x2) and rank 1 ((x1 x2) x0): bits differ between ranks.
		rule:   "every rank reduces in the same order",
		good:   func(*testing.T) *Plan { return foldEverywhere(func(int) []int { return []int{0, 1, 2} }) },
		mutate: func(p *Plan) { *p = *foldEverywhere(func(r int) []int { return []int{r, (r + 1) % 3, (r + 2) % 3} }) },
		want:   "in different orders",
	}, {
		// Every rank divides twice, alike, so ranks still agree.
		rule: "avg divides the whole reduction once",
		good: func(*testing.T) *Plan {
			p := foldEverywhere(func(int) []int { return []int{0, 1, 2} })
			p.Redop = hw.Avg
			divideOut(p)
			return p
		},
		mutate: divideOut,
		want:   "want every rank's element once",
	}, {
		// Rank 0 copies its result over its input at the end: every output
		// is right, but out of place the caller's input is gone.
		rule: "out of place nothing writes the input",
		good: planOf(Spec{Op: AllReduce, Algo: "ring", Ranks: 4, Count: 10, DType: hw.F32, Redop: hw.Sum}),
		mutate: func(p *Plan) {
			p.Steps[0] = append(p.Steps[0], Step{Kind: StepCopy, Dst: Ref{In, 0, 1}, Src: Ref{Out, 0, 1}})
		},
		want: "writes its input",
	}, {
		// Rank 0 copies a scratch element that nothing wrote onto itself:
		// a garbage read that changes no output.
		rule: "nothing reads an element before it is written",
		good: planOf(Spec{Op: AllReduce, Algo: "ring", Ranks: 4, Count: 10, DType: hw.F32, Redop: hw.Sum}),
		mutate: func(p *Plan) {
			p.TmpLen++
			spare := Ref{Tmp, p.TmpLen - 1, 1}
			p.Steps[0] = append(p.Steps[0], Step{Kind: StepCopy, Dst: spare, Src: spare})
		},
		want: "which nothing has written",
	}, {
		// In place, rank 1's receive on its own lane overwrites the buffer
		// its send on lane 0 may not have read yet.
		rule: "a write waits for reads on other lanes",
		good: planOf(Spec{Op: SendRecv, Algo: "nccl-p2p", Ranks: 2, Count: 1, DType: hw.F32}),
		mutate: func(p *Plan) {
			i := slices.IndexFunc(p.Steps[1], func(s Step) bool { return s.Kind == StepRecv })
			p.Steps[1][i].After = nil
		},
		want: "may still read it",
	}, {
		// The root sends one element more than the receive holds.
		rule: "a message fits its receive exactly",
		good: planOf(Spec{Op: Broadcast, Algo: "nccl-ring", Ranks: 3, Count: 4, Chunk: 2, DType: hw.F32}),
		mutate: func(p *Plan) {
			i := slices.IndexFunc(p.Steps[0], func(s Step) bool { return s.Kind == StepSend })
			p.Steps[0][i].Src.Len++
		},
		want: "has 3 elements, receive buffer 2",
	}}
	for _, c := range cases {
		p := c.good(t)
		if err := Check(p); err != nil {
			t.Fatalf("%s: the good plan fails: %v", c.rule, err)
		}
		c.mutate(p)
		err := Check(p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Check gave %v, want an error saying %q", c.rule, err, c.want)
		}
	}
}

// divideOut ends every rank's program with a division of its output.
func divideOut(p *Plan) {
	for r := range p.Steps {
		p.Steps[r] = append(p.Steps[r], Step{Kind: StepDivide, Dst: Ref{Out, 0, p.OutLen}})
	}
}

func planOf(s Spec) func(t *testing.T) *Plan {
	return func(t *testing.T) *Plan { return mustPlan(t, s) }
}

// foldEverywhere is a 3-rank all-reduce of one element in which every
// rank gathers all inputs into its scratch and folds them itself in the
// order order(rank) gives.
func foldEverywhere(order func(rank int) []int) *Plan {
	p := &Plan{Spec: Spec{Op: AllReduce, Algo: "fold", Ranks: 3, Count: 1, DType: hw.F32, Redop: hw.Sum}, InLen: 1, OutLen: 1, TmpLen: 3, Lanes: 1, Steps: make([][]Step, 3)}
	for r := range 3 {
		steps := []Step{{Kind: StepCopy, Dst: Ref{Tmp, r, 1}, Src: Ref{In, 0, 1}}}
		for q := range 3 {
			if q != r {
				steps = append(steps, Step{Kind: StepSend, Peer: q, Src: Ref{In, 0, 1}})
			}
		}
		for q := range 3 {
			if q != r {
				steps = append(steps, Step{Kind: StepRecv, Peer: q, Dst: Ref{Tmp, q, 1}})
			}
		}
		o := order(r)
		steps = append(steps, Step{Kind: StepCopy, Dst: Ref{Out, 0, 1}, Src: Ref{Tmp, o[0], 1}})
		for _, q := range o[1:] {
			steps = append(steps, Step{Kind: StepReduce, Dst: Ref{Out, 0, 1}, Src: Ref{Tmp, q, 1}})
		}
		p.Steps[r] = steps
	}
	return p
}
