package ops

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// messages lists, per rank, its sends and receives in program order, as
// "send→peer" and "recv←peer".
func messages(p *Plan) []string {
	out := make([]string, p.Ranks)
	for r, steps := range p.Steps {
		var parts []string
		for _, s := range steps {
			switch s.Kind {
			case StepSend:
				parts = append(parts, fmt.Sprintf("send→%d", s.Peer))
			case StepRecv:
				parts = append(parts, fmt.Sprintf("recv←%d", s.Peer))
			}
		}
		out[r] = fmt.Sprintf("rank %d: %s", r, strings.Join(parts, " "))
	}
	return out
}

// TestTreeBroadcastP8Root3 reads the binomial broadcast as a transcript. In
// root-relative ranks vr = (r−3) mod 8 the root sends to vr 4, 2, 1 (real
// 7, 5, 4), vr 4 to vr 6, 5 (real 1, 0), vr 2 to vr 3 (real 6), vr 6 to vr
// 7 (real 2).
func TestTreeBroadcastP8Root3(t *testing.T) {
	p := mustPlan(t, Spec{Op: Broadcast, Algo: "tree", Ranks: 8, Count: 5, Root: 3, DType: hw.F32})
	want := []string{
		"rank 0: recv←7",
		"rank 1: recv←7 send→2",
		"rank 2: recv←1",
		"rank 3: send→7 send→5 send→4",
		"rank 4: recv←3",
		"rank 5: recv←3 send→6",
		"rank 6: recv←5",
		"rank 7: recv←3 send→1 send→0",
	}
	if got := messages(p); !slices.Equal(got, want) {
		t.Errorf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := p.Steps[3][0]; got.Kind != StepCopy || got.Src != ref(In, 0, 5) || got.Dst != ref(Out, 0, 5) {
		t.Errorf("root's first step is %v, want copy out[0:5] = in[0:5]", got)
	}
}

// checkTree verifies that t is a tree over all p ranks: parent and kids
// agree, at most two children, everything reachable from the root once.
func checkTree(t *testing.T, name string, tr dtree, p int) {
	t.Helper()
	if tr.parentOf(tr.root) != -1 {
		t.Fatalf("%s: root %d has parent %d", name, tr.root, tr.parentOf(tr.root))
	}
	seen := make([]bool, p)
	queue := []int{tr.root}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		if seen[v] {
			t.Fatalf("%s: rank %d reached twice", name, v)
		}
		seen[v] = true
		if len(tr.kidsOf(v)) > 2 {
			t.Fatalf("%s: rank %d has %d children", name, v, len(tr.kidsOf(v)))
		}
		for _, k := range tr.kidsOf(v) {
			if tr.parentOf(k) != v {
				t.Fatalf("%s: %d is a child of %d but its parent is %d", name, k, v, tr.parentOf(k))
			}
			queue = append(queue, k)
		}
	}
	if i := slices.Index(seen, false); i >= 0 {
		t.Fatalf("%s: rank %d is not in the tree", name, i)
	}
}

func leaves(tr dtree) []int {
	var out []int
	for v := range tr.p {
		k := tr.kidsOf(v)
		if len(k) == 0 {
			out = append(out, v)
		}
	}
	return out
}

func TestNCCLBtreeMatchesNCCLFigure(t *testing.T) {
	tr := ncclBtree(14)
	want := map[int][]int{0: {8}, 8: {4, 12}, 4: {2, 6}, 12: {10, 13}, 2: {1, 3}, 6: {5, 7}, 10: {9, 11}}
	for v := range 14 {
		if !slices.Equal(tr.kidsOf(v), want[v]) {
			t.Errorf("rank %d children %v, want %v", v, tr.kidsOf(v), want[v])
		}
	}
}

// TestDbtreeTreesComplement: both trees are trees, and (nearly) every leaf
// of one is interior in the other, which is what balances the load.
func TestDbtreeTreesComplement(t *testing.T) {
	// Exact leaves for p = 8 and p = 7.
	exact := []struct {
		name             string
		trees            [2]dtree
		leaves0, leaves1 []int
	}{
		{"allreduce p=8", dbtreeAllReduceTrees(8), []int{1, 3, 5, 7}, []int{0, 2, 4, 6}},
		{"allreduce p=7", dbtreeAllReduceTrees(7), []int{1, 3, 5}, []int{2, 4, 6}},
		{"rooted p=8 root 0", dbtreeRootedTrees(8, 0), []int{1, 3, 5, 7}, []int{2, 4, 6}},
		{"rooted p=7 root 3", dbtreeRootedTrees(7, 3), []int{4, 6, 1}, []int{5, 0, 2}},
	}
	for _, c := range exact {
		l0, l1 := leaves(c.trees[0]), leaves(c.trees[1])
		slices.Sort(c.leaves0)
		slices.Sort(c.leaves1)
		if !slices.Equal(l0, c.leaves0) || !slices.Equal(l1, c.leaves1) {
			t.Errorf("%s: leaves %v and %v, want %v and %v", c.name, l0, l1, c.leaves0, c.leaves1)
		}
	}
	for p := 1; p <= 40; p++ {
		sets := map[string][2]dtree{"allreduce": dbtreeAllReduceTrees(p)}
		for _, root := range []int{0, (p - 1) / 2, p - 1} {
			sets[fmt.Sprintf("rooted at %d", root)] = dbtreeRootedTrees(p, root)
			if tr := sets[fmt.Sprintf("rooted at %d", root)]; tr[0].root != root || tr[1].root != root {
				t.Errorf("p=%d: rooted trees have roots %d, %d, want %d", p, tr[0].root, tr[1].root, root)
			}
		}
		for name, tr := range sets {
			for h := range 2 {
				checkTree(t, fmt.Sprintf("p=%d %s tree %d", p, name, h), tr[h], p)
			}
			// At most one rank (a root, or p <= 2) is a leaf in both trees
			// or interior in both.
			both := 0
			for v := range p {
				if (len(tr[0].kidsOf(v)) == 0) == (len(tr[1].kidsOf(v)) == 0) {
					both++
				}
			}
			if p > 2 && both > 1 {
				t.Errorf("p=%d %s: %d ranks play the same part in both trees, want at most 1", p, name, both)
			}
		}
	}
}

// sent counts, per rank, the messages and elements it sends.
func sent(p *Plan) (msgs, elems []int) {
	msgs, elems = make([]int, p.Ranks), make([]int, p.Ranks)
	for r, steps := range p.Steps {
		for _, s := range steps {
			if s.Kind == StepSend {
				msgs[r]++
				elems[r] += s.Src.Len
			}
		}
	}
	return msgs, elems
}

// The units of modelTime, chosen so that a time splits back into its α, β
// and γ coefficients (for the small plans tested).
const unitAlpha, unitBeta, unitGamma = 1_000_000_000, 10_000, 1

// modelTime runs a plan in the plain α-β-γ model the REFERENCE formulas
// assume: a send occupies its lane for α + len·β and the message arrives
// when it ends; a receive ends when both its lane and its message are
// ready; a reduce takes len·γ; copies and divides are free; lanes run
// concurrently, ordered by After. It returns the finish time of the last
// step as coefficients of α, β (per element) and γ (per element).
func modelTime(t *testing.T, p *Plan) (a, b, g int64) {
	t.Helper()
	end := make([][]int64, p.Ranks)
	for r := range p.Ranks {
		end[r] = slices.Repeat([]int64{-1}, len(p.Steps[r]))
	}
	next := make([][]int, p.Ranks)
	for r := range p.Ranks {
		next[r] = make([]int, p.Lanes)
	}
	mail := map[msgKey][]int64{}
	var last int64
	for progress := true; progress; {
		progress = false
		for r, steps := range p.Steps {
			for lane := range p.Lanes {
				var laneEnd int64
				for i := 0; i < len(steps); i++ {
					s := steps[i]
					if s.Lane != lane {
						continue
					}
					if end[r][i] >= 0 {
						laneEnd = end[r][i]
						continue
					}
					ready := laneEnd
					blocked := false
					for _, j := range s.After {
						if end[r][j] < 0 {
							blocked = true
						}
						ready = max(ready, end[r][j])
					}
					if blocked {
						break
					}
					var f int64
					switch s.Kind {
					case StepSend:
						f = ready + unitAlpha + unitBeta*int64(s.Src.Len)
						k := msgKey{r, s.Peer, s.Tag}
						mail[k] = append(mail[k], f)
					case StepRecv:
						k := msgKey{s.Peer, r, s.Tag}
						if len(mail[k]) == 0 {
							blocked = true
							break
						}
						f = max(ready, mail[k][0])
						mail[k] = mail[k][1:]
					case StepReduce:
						f = ready + unitGamma*int64(s.Dst.Len)
					default:
						f = ready
					}
					if blocked {
						break
					}
					end[r][i], laneEnd, last, progress = f, f, max(last, f), true
				}
			}
		}
	}
	for r := range p.Ranks {
		if i := slices.Index(end[r], -1); i >= 0 {
			t.Fatalf("%v: model stuck at rank %d step %d", p.Spec, r, i)
		}
	}
	return last / unitAlpha, last % unitAlpha / unitBeta, last % unitBeta
}

// TestCostTermsPowerOfTwo checks, for p a power of two, each plan's
// critical path in the α-β-γ model against its formula (REFERENCE.md where
// it has one), and what each rank sends.
func TestCostTermsPowerOfTwo(t *testing.T) {
	for _, p := range []int{2, 4, 8, 16} {
		lg := int64(bits.TrailingZeros(uint(p)))
		P := int64(p)
		c := int64(3) // elements per block, or per rank
		n := c * P    // elements per rank for allreduce, broadcast, reduce
		cases := []struct {
			op      Op
			algo    string
			count   int64
			a, b, g int64 // α, β, γ coefficients of the time
			sends   func(r int) (msgs, elems int64)
		}{
			// binomial broadcast: lg p·α + n·lg p·β; the root sends lg p messages.
			{Broadcast, "tree", n, lg, n * lg, 0, func(r int) (int64, int64) {
				k := int64(len(binomialKids(mod(r-1, p), p)))
				return k, k * n
			}},
			// binomial reduce: lg p·α + n·lg p·β + n·lg p·γ; one message per non-root.
			{Reduce, "tree", n, lg, n * lg, n * lg, func(r int) (int64, int64) {
				if r == 1 {
					return 0, 0
				}
				return 1, n
			}},
			// reduce + broadcast: twice the broadcast, once the reduce's γ.
			{AllReduce, "tree", n, 2 * lg, 2 * n * lg, n * lg, func(r int) (int64, int64) {
				k := int64(len(binomialKids(r, p)))
				if r == 0 {
					return k, k * n
				}
				return 1 + k, (1 + k) * n
			}},
			// binomial gather: lg p·α + (p−1)·count·β; vr sends its subtree.
			{Gather, "tree", c, lg, (P - 1) * c, 0, func(r int) (int64, int64) {
				vr := mod(r-1, p)
				if vr == 0 {
					return 0, 0
				}
				return 1, int64(vr&-vr) * c
			}},
			{Barrier, "tree", 0, 2 * lg, 0, 0, nil},
			// pairwise all-to-all: (p−1)α + nβ with n = (p−1)·count sent per rank.
			{AllToAll, "pairwise", c, P - 1, (P - 1) * c, 0, func(int) (int64, int64) { return P - 1, (P - 1) * c }},
			{AllToAll, "direct", c, P - 1, (P - 1) * c, 0, func(int) (int64, int64) { return P - 1, (P - 1) * c }},
			// direct all-reduce has the ring's terms: 2(p−1)α + 2(p−1)/p·nβ + (p−1)/p·nγ.
			{AllReduce, "direct", n, 2 * (P - 1), 2 * (P - 1) * c, (P - 1) * c, func(int) (int64, int64) { return 2 * (P - 1), 2 * (P - 1) * c }},
			// direct reduce-scatter and all-gather: the ring's terms too, n = p·count.
			{ReduceScatter, "direct", c, P - 1, (P - 1) * c, (P - 1) * c, func(int) (int64, int64) { return P - 1, (P - 1) * c }},
			{AllGather, "direct", c, P - 1, (P - 1) * c, 0, func(int) (int64, int64) { return P - 1, (P - 1) * c }},
		}
		for _, tc := range cases {
			spec := Spec{Op: tc.op, Algo: tc.algo, Ranks: p, Count: int(tc.count), Root: 1 % p, DType: hw.F32, Redop: hw.Sum}
			plan := mustPlan(t, spec)
			if a, b, g := modelTime(t, plan); a != tc.a || b != tc.b || g != tc.g {
				t.Errorf("%v: time %dα + %dβ + %dγ, want %dα + %dβ + %dγ", spec, a, b, g, tc.a, tc.b, tc.g)
			}
			if tc.sends == nil {
				continue
			}
			msgs, elems := sent(plan)
			for r := range p {
				if m, e := tc.sends(r); int64(msgs[r]) != m || int64(elems[r]) != e {
					t.Errorf("%v: rank %d sends %d messages, %d elements; want %d, %d", spec, r, msgs[r], elems[r], m, e)
				}
			}
		}
	}
}

// TestDbtreeSendVolume: in the double binary tree all-reduce no rank sends
// more than 2n elements (as in a ring) because no rank is interior in both
// trees; the broadcast root sends n, one half down each tree.
func TestDbtreeSendVolume(t *testing.T) {
	for _, p := range []int{2, 4, 7, 8, 16} {
		n := 4 * p
		plan := mustPlan(t, Spec{Op: AllReduce, Algo: "dbtree", Ranks: p, Count: n, DType: hw.F32, Redop: hw.Sum})
		if plan.Lanes != 2 {
			t.Errorf("p=%d: %d lanes, want 2", p, plan.Lanes)
		}
		_, elems := sent(plan)
		if m := slices.Max(elems); m > 2*n {
			t.Errorf("p=%d allreduce: a rank sends %d elements, more than 2n = %d (%v)", p, m, 2*n, elems)
		}
		root := p / 2
		plan = mustPlan(t, Spec{Op: Broadcast, Algo: "dbtree", Ranks: p, Count: n, Root: root, DType: hw.F32})
		if msgs, elems := sent(plan); msgs[root] != 2 || elems[root] != n {
			t.Errorf("p=%d broadcast: root sends %d messages, %d elements; want 2, %d", p, msgs[root], elems[root], n)
		}
	}
}

// reductionTree is the symbolic value out[i] of rank r after running plan
// out of place, as the checker prints it.
func reductionTree(t *testing.T, plan *Plan, r, i int) string {
	t.Helper()
	s := newSymRun(plan, false)
	if err := s.run(); err != nil {
		t.Fatal(err)
	}
	arr, off := s.loc(r, ref(Out, i, 1))
	return s.t.describe(arr[off])
}

// TestDocumentedReductionOrders pins the groupings the doc comments state.
// The checker prints the two operands of a combine in an order of its own
// (the grouping is what counts), so (x2 + (x0 + x1)) reads ((x0 op x1) op
// x2).
func TestDocumentedReductionOrders(t *testing.T) {
	cases := []struct {
		spec Spec
		elem int
		want string
	}{
		// ((x0 op T1) op T2), T2 = x2 op x3
		{Spec{Op: AllReduce, Algo: "tree", Ranks: 4, Count: 1}, 0, "((x0[0] + x1[0]) + (x2[0] + x3[0]))"},
		// root 1: ((x1 op T[vr1]) op T[vr2]), vr1 = rank 2, vr2 = rank 3 (with x0)
		{Spec{Op: Reduce, Algo: "tree", Ranks: 4, Count: 1, Root: 1}, 0, "((x0[0] + x3[0]) + (x1[0] + x2[0]))"},
		// rank order
		{Spec{Op: AllReduce, Algo: "direct", Ranks: 3, Count: 1}, 0, "(x2[0] + (x0[0] + x1[0]))"},
		// half 0 on tree 0 (0→2, 2→1,3): x0 op ((x2 op x1) op x3)
		{Spec{Op: AllReduce, Algo: "dbtree", Ranks: 4, Count: 2}, 0, "(x0[0] + (x3[0] + (x1[0] + x2[0])))"},
		// half 1 on the mirrored tree (3→1, 1→2,0): x3 op ((x1 op x2) op x0)
		{Spec{Op: AllReduce, Algo: "dbtree", Ranks: 4, Count: 2}, 1, "(x3[1] + (x0[1] + (x1[1] + x2[1])))"},
		// NCCL's ring: an element's chunk starts at the rank of its index
		// and gathers the next ranks' in ring order: ((x2 op x3) op x0) op x1
		{Spec{Op: AllReduce, Algo: "nccl-ring", Ranks: 4, Count: 4}, 2, "(x1[2] + (x0[2] + (x2[2] + x3[2])))"},
		// NCCL's tree, channel 0 on tree 0 (nodes 0→1→2, heads at local
		// index 0): T[0] = (x0 op x1) op T[2], T[2] = (x2 op x3) op (x4 op x5)
		{Spec{Op: AllReduce, Algo: "nccl-tree", Ranks: 6, NodeRanks: 2, Count: 2, Channels: 2}, 0, "((x0[0] + x1[0]) + ((x2[0] + x3[0]) + (x4[0] + x5[0])))"},
		// channel 1 on tree 1 (nodes 1→0→2, heads at local index 1):
		// T[3] = (x3 op x2) op T[1], T[1] = (x1 op x0) op (x5 op x4)
		{Spec{Op: AllReduce, Algo: "nccl-tree", Ranks: 6, NodeRanks: 2, Count: 2, Channels: 2}, 1, "((x2[1] + x3[1]) + ((x0[1] + x1[1]) + (x4[1] + x5[1])))"},
		// NVLS: the switch combines the members in order
		{Spec{Op: AllReduce, Algo: "nccl-nvls", Ranks: 4, Count: 4}, 1, "(x3[1] + (x2[1] + (x0[1] + x1[1])))"},
		// NVLSTree, with P[k] node k's switch sum: channel 0 on tree 0
		// (nodes 0→1→{2,3}): P0 op ((P1 op P2) op P3)
		{Spec{Op: AllReduce, Algo: "nccl-nvlstree", Ranks: 8, NodeRanks: 2, Count: 4, Channels: 2}, 0, "((x0[0] + x1[0]) + (((x2[0] + x3[0]) + (x4[0] + x5[0])) + (x6[0] + x7[0])))"},
		// channel 1 on tree 1, tree 0 mirrored (nodes 3→2→{1,0}):
		// P3 op ((P2 op P1) op P0)
		{Spec{Op: AllReduce, Algo: "nccl-nvlstree", Ranks: 8, NodeRanks: 2, Count: 4, Channels: 2}, 2, "((x6[2] + x7[2]) + ((x0[2] + x1[2]) + ((x2[2] + x3[2]) + (x4[2] + x5[2]))))"},
		// PAT: block 0's partial takes its tree children's by distance:
		// (x0 op T[+1]) op T[+2], T[+2] = x2 op x3
		{Spec{Op: ReduceScatter, Algo: "nccl-pat", Ranks: 4, Count: 1}, 0, "((x0[0] + x1[0]) + (x2[0] + x3[0]))"},
		// CollNet: each node's partial in local order, then the nodes'
		{Spec{Op: AllReduce, Algo: "nccl-collnet-direct", Ranks: 4, NodeRanks: 2, Count: 4}, 1, "((x0[1] + x1[1]) + (x2[1] + x3[1]))"},
		{Spec{Op: AllReduce, Algo: "nccl-collnet-chain", Ranks: 4, NodeRanks: 2, Count: 4}, 1, "((x0[1] + x1[1]) + (x2[1] + x3[1]))"},
	}
	for _, c := range cases {
		c.spec.DType, c.spec.Redop = hw.F32, hw.Sum
		if got := reductionTree(t, mustPlan(t, c.spec), c.spec.Root, c.elem); got != c.want {
			t.Errorf("%v out[%d] = %s, want %s", c.spec, c.elem, got, c.want)
		}
	}
}

// TestCheckerCatchesBrokenTreePlans shows the checker guards these plans:
// each mutation of a good plan must be refused.
func TestCheckerCatchesBrokenTreePlans(t *testing.T) {
	firstOf := func(p *Plan, r int, kind StepKind) int {
		i := slices.IndexFunc(p.Steps[r], func(s Step) bool { return s.Kind == kind })
		if i < 0 {
			t.Fatalf("%v: rank %d has no %v step", p.Spec, r, kind)
		}
		return i
	}
	cases := []struct {
		name   string
		spec   Spec
		mutate func(p *Plan)
	}{
		{"tree gather: child's blocks one block off", Spec{Op: Gather, Algo: "tree", Ranks: 8, Count: 2, Root: 3},
			func(p *Plan) { p.Steps[3][firstOf(p, 3, StepRecv)].Dst.Off += 2 }},
		{"tree allreduce: reduce dropped", Spec{Op: AllReduce, Algo: "tree", Ranks: 8, Count: 3},
			func(p *Plan) { i := firstOf(p, 0, StepReduce); p.Steps[0] = slices.Delete(p.Steps[0], i, i+1) }},
		{"dbtree allreduce: lane 1 writes lane 0's half", Spec{Op: AllReduce, Algo: "dbtree", Ranks: 6, Count: 6},
			func(p *Plan) {
				i := slices.IndexFunc(p.Steps[0], func(s Step) bool { return s.Kind == StepRecv && s.Lane == 1 })
				p.Steps[0][i].Dst.Off = 0
			}},
		{"direct alltoall: received into the block still to send", Spec{Op: AllToAll, Algo: "direct", Ranks: 4, Count: 2},
			func(p *Plan) {
				// Move rank 0's first receive before its sends.
				i := firstOf(p, 0, StepRecv)
				s := p.Steps[0][i]
				p.Steps[0] = slices.Insert(slices.Delete(p.Steps[0], i, i+1), 1, s)
			}},
		{"pairwise: staged block not copied", Spec{Op: AllToAll, Algo: "pairwise", Ranks: 5, Count: 1},
			func(p *Plan) { p.Steps[1] = p.Steps[1][:len(p.Steps[1])-1] }},
	}
	for _, c := range cases {
		c.spec.DType, c.spec.Redop = hw.F32, hw.Sum
		p := mustPlan(t, c.spec)
		if err := Check(p); err != nil {
			t.Fatalf("%s: unmutated plan fails: %v", c.name, err)
		}
		c.mutate(p)
		if err := Check(p); err == nil {
			t.Errorf("%s: checker accepted the broken plan", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}
