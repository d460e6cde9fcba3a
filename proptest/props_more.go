package proptest

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// This file holds the simulator's own properties: determinism, exact α-β-γ
// times on uncontended fabrics, the lower bounds of Chan et al., and the
// invariants of max-min fair sharing.

// DeterministicProperty is the property that the simulator is
// deterministic on every Case gen generates (gen must generate Case
// values), out of place and in place:
//
//   - two runs with the same sim.Config give bit-identical outputs, the
//     same simulated time (bit for bit) and the same trace bytes;
//   - for each seed, a run with sim.Config{Seed: seed} (another valid
//     interleaving of simultaneous events) gives outputs bit-identical to
//     the unshuffled run, and a rerun with that seed gives the same time.
//
// Without seeds it uses 1, 2 and 0x9e3779b97f4a7c15.
func DeterministicProperty(gen gopter.Gen, seeds ...uint64) gopter.Prop {
	if len(seeds) == 0 {
		seeds = []uint64{1, 2, 0x9e3779b97f4a7c15}
	}
	return prop.ForAll(func(c Case) string {
		for _, inPlace := range []bool{false, true} {
			if err := moreDeterministic(c, inPlace, seeds); err != nil {
				return err.Error()
			}
		}
		return ""
	}, gen)
}

func moreDeterministic(c Case, inPlace bool, seeds []uint64) error {
	how := "out of place"
	if inPlace {
		how = "in place"
	}
	base, trace, err := moreSimRun(c, sim.Config{Trace: true}, inPlace)
	if err != nil {
		return err
	}
	again, trace2, err := moreSimRun(c, sim.Config{Trace: true}, inPlace)
	if err != nil {
		return err
	}
	if err := moreSameRun(c, base, again, "sim "+how, "sim rerun "+how); err != nil {
		return err
	}
	if !bytes.Equal(trace, trace2) {
		a, b := moreFirstDiffLine(trace, trace2)
		return fmt.Errorf("proptest: %v %s: a rerun's trace differs: %q, rerun %q\nreproduce: %s", c, how, a, b, c.Reproducer())
	}
	for _, seed := range seeds {
		cfg := sim.Config{Seed: seed}
		a, _, err := moreSimRun(c, cfg, inPlace)
		if err != nil {
			return err
		}
		b, _, err := moreSimRun(c, cfg, inPlace)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("sim(seed=%d) %s", seed, how)
		if err := moreSameRun(c, a, b, name, "rerun of "+name); err != nil {
			return err
		}
		all := func(int) bool { return true }
		if err := compareResults(c, a, base, name, "sim "+how, all); err != nil {
			return err
		}
	}
	return nil
}

// moreFirstDiffLine returns the first line where a and b differ.
func moreFirstDiffLine(a, b []byte) (string, string) {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range max(len(la), len(lb)) {
		var x, y []byte
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if !bytes.Equal(x, y) {
			return string(x), string(y)
		}
	}
	return "", ""
}

// moreSameRun requires two runs to agree on outputs and, bit for bit, on
// the simulated time.
func moreSameRun(c Case, got, want Result, gName, wName string) error {
	if err := compareResults(c, got, want, gName, wName, func(int) bool { return true }); err != nil {
		return err
	}
	if math.Float64bits(got.Seconds) != math.Float64bits(want.Seconds) {
		return fmt.Errorf("proptest: %v: %s took %.17g s, %s %.17g s\nreproduce: %s", c, gName, got.Seconds, wName, want.Seconds, c.Reproducer())
	}
	return nil
}

// moreSimRun runs c on a fresh cluster with cfg and returns the result and,
// with cfg.Trace, the trace bytes.
func moreSimRun(c Case, cfg sim.Config, inPlace bool) (Result, []byte, error) {
	topo, err := topology.Parse(c.Topo)
	if err != nil {
		return Result{}, nil, err
	}
	cl, err := sim.NewCluster(topo, cfg)
	if err != nil {
		return Result{}, nil, err
	}
	defer cl.Close()
	res, err := Run(cl.World(), c, inPlace)
	if err != nil {
		return Result{}, nil, fmt.Errorf("proptest: %v: %w\nreproduce: %s", c, err, c.Reproducer())
	}
	var trace bytes.Buffer
	if cfg.Trace {
		if err := cl.WriteTrace(&trace); err != nil {
			return Result{}, nil, err
		}
	}
	return res, trace.Bytes(), nil
}

// moreFormula is an α-β-γ time from REFERENCE.md, for n bytes (per rank,
// the total gathered size for allgather and reducescatter, all a rank
// sends for alltoall).
type moreFormula struct {
	op     ops.Op
	algo   string
	pow2   bool // the formula holds for powers of two only
	timeOf func(p, n, a, b, g float64) float64
}

func moreLg(p float64) float64 { return math.Log2(p) }

// moreFormulas is REFERENCE.md's table, with the algorithm names of ops.
var moreFormulas = []moreFormula{
	{ops.AllReduce, "ring", false, func(p, n, a, b, g float64) float64 {
		return 2*(p-1)*a + 2*(p-1)/p*n*b + (p-1)/p*n*g
	}},
	{ops.AllReduce, "rd", true, func(p, n, a, b, g float64) float64 { return moreLg(p)*a + n*moreLg(p)*b + n*moreLg(p)*g }},
	{ops.AllReduce, "rhd", true, func(p, n, a, b, g float64) float64 {
		return 2*moreLg(p)*a + 2*(p-1)/p*n*b + (p-1)/p*n*g
	}},
	{ops.AllGather, "ring", false, func(p, n, a, b, g float64) float64 { return (p-1)*a + (p-1)/p*n*b }},
	{ops.AllGather, "rd", true, func(p, n, a, b, g float64) float64 { return moreLg(p)*a + (p-1)/p*n*b }},
	{ops.ReduceScatter, "ring", false, func(p, n, a, b, g float64) float64 {
		return (p-1)*a + (p-1)/p*n*b + (p-1)/p*n*g
	}},
	{ops.ReduceScatter, "rhd", true, func(p, n, a, b, g float64) float64 {
		return moreLg(p)*a + (p-1)/p*n*b + (p-1)/p*n*g
	}},
	{ops.Broadcast, "tree", true, func(p, n, a, b, g float64) float64 { return moreLg(p)*a + n*moreLg(p)*b }},
	{ops.Reduce, "tree", true, func(p, n, a, b, g float64) float64 { return moreLg(p)*a + n*moreLg(p)*b + n*moreLg(p)*g }},
	{ops.Broadcast, "rhd", true, func(p, n, a, b, g float64) float64 { return 2*moreLg(p)*a + 2*(p-1)/p*n*b }},
	{ops.AllToAll, "pairwise", false, func(p, n, a, b, g float64) float64 { return (p-1)*a + n*b }},
}

// moreFabric is a generated uncontended fabric, switch:P: every GPU has one
// link to a non-blocking switch.
//
// In exact mode the bandwidths are chosen so that every transfer and reduce
// of a multiple of Quantum bytes takes a whole number of picoseconds:
// β = BetaNum/Quantum ps per byte, γ = GammaNum/Quantum ps per byte (0: a
// free reduction). The simulator rounds each finish time to the nearest
// picosecond, so only then can its times equal a formula to 1e-9 for any
// size. In decimal mode the bandwidths are arbitrary decimals (BWMilli and
// RedMilli thousandths of a GB/s) and each rounded step may be off by half
// a picosecond. Latency is LatPs picoseconds in both.
type moreFabric struct {
	P                 int
	Exact             bool
	Quantum           int
	BetaNum, GammaNum int
	BWMilli, RedMilli int
	LatPs             int
}

// Spec is the topology spec string.
func (f moreFabric) Spec() string {
	bw, red := "", "inf"
	if f.Exact {
		bw = strconv.FormatFloat(1000*float64(f.Quantum)/float64(f.BetaNum), 'g', -1, 64) + "GB/s"
		if f.GammaNum != 0 {
			red = strconv.FormatFloat(1000*float64(f.Quantum)/float64(f.GammaNum), 'g', -1, 64) + "GB/s"
		}
	} else {
		bw = strconv.FormatFloat(float64(f.BWMilli)/1000, 'f', -1, 64) + "GB/s"
		if f.RedMilli != 0 {
			red = strconv.FormatFloat(float64(f.RedMilli)/1000, 'f', -1, 64) + "GB/s"
		}
	}
	return fmt.Sprintf("switch:%d,bw=%s,lat=%dps,reduce=%s", f.P, bw, f.LatPs, red)
}

// moreFabricGen generates fabrics of p ranks from pGen, exact or decimal,
// with bandwidths in [1, 1000] GB/s (the reduction also free half the time)
// and latencies in [10 ns, 10 µs].
func moreFabricGen(pGen gopter.Gen, quantum int) gopter.Gen {
	maybeFree := func(g gopter.Gen) gopter.Gen { return gen.OneGenOf(gen.Const(0), g) }
	return gopter.DeriveGen(
		func(p int, exact bool, beta, gamma, bw, red, lat int) moreFabric {
			return moreFabric{P: p, Exact: exact, Quantum: quantum, BetaNum: beta, GammaNum: gamma, BWMilli: bw, RedMilli: red, LatPs: lat}
		},
		func(f moreFabric) (int, bool, int, int, int, int, int) {
			return f.P, f.Exact, f.BetaNum, f.GammaNum, f.BWMilli, f.RedMilli, f.LatPs
		},
		pGen, gen.Bool(),
		gen.IntRange(quantum, 1000*quantum), maybeFree(gen.IntRange(quantum, 1000*quantum)),
		gen.IntRange(1000, 1000000), maybeFree(gen.IntRange(1000, 1000000)),
		gen.IntRange(10000, 10000000),
	)
}

// moreParams reads α (two link latencies: GPU→switch→GPU), β and γ off the
// parsed fabric.
func moreParams(topo *topology.Topology) (a, b, g float64) {
	gpu := topo.Nodes[topo.GPUs()[0]]
	a, b, g = 0, 0, 1/gpu.ReduceBW
	if topo.NumEdges() > 0 {
		a, b = 2*topo.EdgeLatency(0), 1/topo.EdgeBW(0)
	}
	return a, b, g
}

// moreTime runs spec timing-only on topo and returns the simulated time and
// the plan.
func moreTime(spec ops.Spec, topo *topology.Topology) (float64, *ops.Plan, error) {
	t, plan, _, err := moreTimeWith(spec, topo, sim.Config{TimingOnly: true})
	return t, plan, err
}

// moreTimeWith is moreTime on a cluster configured by cfg, with the
// simulator's driver; mirrored says whether it timed the plan on the
// cluster's mirror.
func moreTimeWith(spec ops.Spec, topo *topology.Topology, cfg sim.Config) (t float64, plan *ops.Plan, mirrored bool, err error) {
	plan, err = ops.Compile(spec)
	if err != nil {
		return 0, nil, false, err
	}
	t, driver, err := timeDriven(plan, topo, cfg, 1)
	return t, plan, err == nil && driver.MirroredRuns() > 0, err
}

// timeDriven times runs of plan back to back (ops.Executor.RunBackToBack)
// on a fresh cluster over topo configured by cfg, with the simulator's
// driver, which it returns for its counts.
func timeDriven(plan *ops.Plan, topo *topology.Topology, cfg sim.Config, runs int) (float64, *simexec.Driver, error) {
	cl, err := sim.NewCluster(topo, cfg)
	if err != nil {
		return 0, nil, err
	}
	defer cl.Close()
	in, out := make([]hw.Slice, plan.Ranks), make([]hw.Slice, plan.Ranks)
	for r, d := range cl.Devices() {
		ib, err := d.Alloc(plan.DType, plan.InLen)
		if err != nil {
			return 0, nil, err
		}
		ob, err := d.Alloc(plan.DType, plan.OutLen)
		if err != nil {
			return 0, nil, err
		}
		in[r], out[r] = hw.Whole(ib), hw.Whole(ob)
	}
	driver := simexec.NewDriver(cl)
	t, err := ops.NewExecutorWith(cl.World(), driver).RunBackToBack(plan, in, out, runs)
	return t, driver, err
}

// moreRounding is how far rounding finish times to the picosecond may move
// a run of plan on an uncontended fabric: half a picosecond for each step
// that takes time (a send's transfer, a reduce, a divide) on the plan's
// longest chain of dependencies.
func moreRounding(plan *ops.Plan) float64 {
	return 0.5e-12 * float64(moreChain(plan))
}

// moreChain is the number of timed steps on the longest dependency chain
// of plan: a step waits for the step before it on its lane, for its After
// steps and, for a receive, for the matching send (the k-th send from a to
// b with a tag matches b's k-th receive from a with that tag).
func moreChain(plan *ops.Plan) int {
	type msg struct {
		from, to int
		tag      uint32
	}
	sends := map[msg][]int{}
	for r, steps := range plan.Steps {
		for i, s := range steps {
			if s.Kind == ops.StepSend {
				k := msg{r, s.Peer, s.Tag}
				sends[k] = append(sends[k], i)
			}
		}
	}
	type at struct{ r, i int }
	deps := map[at][]at{}
	for r, steps := range plan.Steps {
		last := map[int]int{} // lane → its latest step
		recvs := map[msg]int{}
		for i, s := range steps {
			var d []at
			if j, ok := last[s.Lane]; ok {
				d = append(d, at{r, j})
			}
			for _, a := range s.After {
				d = append(d, at{r, a})
			}
			if s.Kind == ops.StepRecv {
				k := msg{s.Peer, r, s.Tag}
				if n := recvs[k]; n < len(sends[k]) {
					d = append(d, at{s.Peer, sends[k][n]})
				}
				recvs[k]++
			}
			deps[at{r, i}] = d
			last[s.Lane] = i
		}
	}
	memo := map[at]int{}
	var depth func(a at) int
	depth = func(a at) int {
		if v, ok := memo[a]; ok {
			return v
		}
		memo[a] = 0 // a plan that passes ops.Check has no cycles
		v := 0
		for _, d := range deps[a] {
			v = max(v, depth(d))
		}
		switch plan.Steps[a.r][a.i].Kind {
		case ops.StepSend, ops.StepReduce, ops.StepDivide:
			v++
		}
		memo[a] = v
		return v
	}
	longest := 0
	for r, steps := range plan.Steps {
		for i := range steps {
			longest = max(longest, depth(at{r, i}))
		}
	}
	return longest
}

// moreTimingCase is one collective on one fabric, with the generator's
// raw draws it was derived from (so shrinking maps back to them, and the
// generators' sieves reject the out-of-range values shrinkers try).
type moreTimingCase struct {
	Fabric moreFabric
	Spec   ops.Spec
	// Index is the draw of a formula (FormulaTimeProperty) or of an
	// algorithm × op pair (LowerBoundProperty); Size, Root and Redop are
	// the size, root and reduce-op draws.
	Index, Size, Root, Redop int
}

// String is the spec and the fabric, for gopter's reports.
func (c moreTimingCase) String() string { return fmt.Sprintf("%v on %s", c.Spec, c.Fabric.Spec()) }

// moreIn reports whether every i is in [0, n).
func moreIn(n int, is ...int) bool {
	for _, i := range is {
		if i < 0 || i >= n {
			return false
		}
	}
	return true
}

// moreDTypeGen generates any dtype.
func moreDTypeGen() gopter.Gen {
	dts := hw.DTypes()
	vals := make([]any, len(dts))
	for i, d := range dts {
		vals[i] = d
	}
	return gen.OneConstOf(vals...)
}

// moreFormulaCaseGen generates, for each formula, a case it covers: p a
// power of two (up to 16) where the formula needs one and any p from 1 to
// 16 otherwise, and sizes that split into whole chunks of 8j elements (so
// the chunks of every algorithm are multiples of 8 bytes, the exact
// fabrics' quantum).
func moreFormulaCaseGen() gopter.Gen {
	return gopter.DeriveGen(
		func(fi, j int, dt hw.DType, root int, fab moreFabric) moreTimingCase {
			c := moreTimingCase{Fabric: fab, Index: fi, Size: j, Root: root}
			if !moreIn(len(moreFormulas), fi) || fab.P < 1 || j < 0 || root < 0 {
				return c // a shrinker's try that the sieve will reject
			}
			f := moreFormulas[fi]
			p := fab.P
			if f.pow2 {
				p = 1 << (bits.Len(uint(p)) - 1) // the largest power of two <= p
			}
			c.Fabric.P = p
			chunk := 8 * j
			c.Spec = ops.Spec{Op: f.op, Algo: f.algo, Ranks: p, Count: p * chunk, Root: root % p, DType: dt, Redop: hw.Sum}
			switch f.op {
			case ops.AllGather, ops.ReduceScatter, ops.AllToAll:
				c.Spec.Count = chunk
			}
			return c
		},
		func(c moreTimingCase) (int, int, hw.DType, int, moreFabric) {
			return c.Index, c.Size, c.Spec.DType, c.Root, c.Fabric
		},
		gen.IntRange(0, len(moreFormulas)-1), gen.IntRange(1, 512), moreDTypeGen(), gen.IntRange(0, 15),
		moreFabricGen(gen.IntRange(1, 16), 8),
	)
}

// FormulaTimeProperty is the property that on generated uncontended
// fabrics (switch:p, bandwidth in [1, 1000] GB/s, latency in [10 ns,
// 10 µs], reduction bandwidth in [1, 1000] GB/s or free) the simulated
// time of every algorithm × op that REFERENCE.md's α-β-γ table covers
// equals the formula, with α = 2 × the link latency (GPU→switch→GPU), β =
// 1/bandwidth and γ = 1/reduction bandwidth: within 1e-9 relative when
// every step takes a whole number of picoseconds, and otherwise within
// that plus half a picosecond per timed step (transfer, reduce, divide) on
// the plan's longest dependency chain (the simulator rounds each finish
// time to the picosecond). Sizes divide by p, and
// p is a power of two where the formula needs it; p = 1 must take no time.
func FormulaTimeProperty() gopter.Prop {
	return prop.ForAll(func(c moreTimingCase) string {
		f := moreFormulas[c.Index]
		topo, err := topology.Parse(c.Fabric.Spec())
		if err != nil {
			return err.Error()
		}
		got, plan, err := moreTime(c.Spec, topo)
		if err != nil {
			return err.Error()
		}
		a, b, g := moreParams(topo)
		p, size := c.Spec.Ranks, c.Spec.DType.Size()
		n := float64(c.Spec.Count * size)
		switch c.Spec.Op {
		case ops.AllGather, ops.ReduceScatter:
			n *= float64(p)
		case ops.AllToAll:
			n *= float64(p - 1)
		}
		want := f.timeOf(float64(p), n, a, b, g)
		tol := 1e-9 * want
		if !c.Fabric.Exact {
			tol += moreRounding(plan)
		}
		if math.Abs(got-want) > tol || math.IsNaN(got) {
			return fmt.Sprintf("%s/%s p=%d n=%g B: simulated %.12g s, formula %.12g s (off by %.3g s, tolerance %.3g s; α=%g β=%g γ=%g)",
				f.op, f.algo, p, n, got, want, got-want, tol, a, b, g)
		}
		return ""
	}, moreFormulaCaseGen())
}

// moreBoundCaseGen generates any algorithm × op with p from 1 to 12, counts
// from 1 to 5000 (0 for barrier), any root, dtype and reduction, on a
// fabric of quantum 1 (exact fabrics take whole picoseconds per byte).
func moreBoundCaseGen() gopter.Gen { return moreBoundCaseGenOf(gen.IntRange(1, 12)) }

// moreBoundCaseGenOf is moreBoundCaseGen with the ranks drawn from pGen.
func moreBoundCaseGenOf(pGen gopter.Gen) gopter.Gen {
	type pair struct {
		op   ops.Op
		algo string
	}
	var pairs []pair
	for _, op := range ops.Ops() {
		for _, a := range ops.AlgorithmsFor(op) {
			pairs = append(pairs, pair{op, a})
		}
	}
	redops := hw.ReduceOps()
	return gopter.DeriveGen(
		func(pi, count int, dt hw.DType, root, redop int, fab moreFabric) moreTimingCase {
			c := moreTimingCase{Fabric: fab, Index: pi, Size: count, Root: root, Redop: redop}
			if !moreIn(len(pairs), pi) || !moreIn(len(redops), redop) || fab.P < 1 || count < 0 || root < 0 {
				return c // a shrinker's try that the sieve will reject
			}
			pr := pairs[pi]
			c.Spec = ops.Spec{Op: pr.op, Algo: pr.algo, Ranks: fab.P, Count: count, Root: root % fab.P, DType: dt}
			if pr.op.Reduces() {
				c.Spec.Redop = redops[redop]
			}
			if pr.op == ops.Barrier {
				c.Spec.Count = 0
			}
			return c
		},
		func(c moreTimingCase) (int, int, hw.DType, int, int, moreFabric) {
			return c.Index, c.Size, c.Spec.DType, c.Root, c.Redop, c.Fabric
		},
		gen.IntRange(0, len(pairs)-1), gen.IntRange(1, 5000), moreDTypeGen(), gen.IntRange(0, 11),
		gen.IntRange(0, len(redops)-1), moreFabricGen(pGen, 1),
	)
}

// LowerBoundProperty is the property that no algorithm of any op beats the
// lower bounds of Chan et al. (REFERENCE.md) on generated uniform switch
// fabrics: one α for p > 1 (not ⌈lg p⌉α: a simulated switch, like NVSwitch,
// lets a rank receive from many peers at once), plus 2(p−1)/p·nβ +
// (p−1)/p·nγ for all-reduce, (p−1)/p·nβ (n the total size) for all-gather
// and reduce-scatter, and nβ for broadcast. The tolerance is 1e-9 relative
// on fabrics where every byte takes whole picoseconds; on decimal fabrics
// add a picosecond per timed step on the plan's longest dependency chain
// (twice FormulaTimeProperty's allowance: contended flows are re-rounded
// when their rates change).
func LowerBoundProperty() gopter.Prop {
	return prop.ForAll(func(c moreTimingCase) string {
		topo, err := topology.Parse(c.Fabric.Spec())
		if err != nil {
			return err.Error()
		}
		got, plan, err := moreTime(c.Spec, topo)
		if err != nil {
			return err.Error()
		}
		bound := moreLowerBound(c.Spec, topo)
		tol := 1e-9 * bound
		if !c.Fabric.Exact {
			tol += 2 * moreRounding(plan)
		}
		if got < bound-tol || math.IsNaN(got) {
			return fmt.Sprintf("%v: simulated %.12g s beats the lower bound %.12g s by %.3g s (tolerance %.3g s)", c.Spec, got, bound, bound-got, tol)
		}
		return ""
	}, moreBoundCaseGen())
}

// moreLowerBound is the bound LowerBoundProperty checks.
func moreLowerBound(s ops.Spec, topo *topology.Topology) float64 {
	a, b, g := moreParams(topo)
	if math.IsInf(1/g, 1) {
		g = 0
	}
	if s.Ranks == 1 {
		return 0
	}
	P := float64(s.Ranks)
	n := float64(s.Count * s.DType.Size())
	bound := a
	switch s.Op {
	case ops.AllReduce:
		bound += 2*(P-1)/P*n*b + (P-1)/P*n*g
	case ops.AllGather, ops.ReduceScatter:
		bound += (P - 1) / P * n * P * b
	case ops.Broadcast:
		bound += n * b
	}
	return bound
}

// moreFlows is a flow problem for sim.MaxMinFair: link capacities and the
// links each flow crosses.
type moreFlows struct {
	Capacity []float64
	Paths    [][]int
}

// String prints the problem compactly for gopter's reports.
func (m moreFlows) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "capacity %v paths %v", m.Capacity, m.Paths)
	return b.String()
}

// moreFlowsGen generates 1 to 10 links with capacities in [1, 1000] (a
// third of them from a few small integers, so ties happen, and some
// unlimited) and 1 to 16 flows, each crossing 1 to 4 distinct links in
// random order. It shrinks by dropping flows.
func moreFlowsGen() gopter.Gen {
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		rng := gp.Rng
		m := moreFlows{Capacity: make([]float64, 1+rng.Intn(10))}
		for i := range m.Capacity {
			switch rng.Intn(12) {
			case 0:
				m.Capacity[i] = math.Inf(1)
			case 1, 2, 3:
				m.Capacity[i] = []float64{1, 2, 3, 10}[rng.Intn(4)]
			default:
				m.Capacity[i] = 1 + 999*rng.Float64()
			}
		}
		for range 1 + rng.Intn(16) {
			perm := rng.Perm(len(m.Capacity))
			m.Paths = append(m.Paths, perm[:1+rng.Intn(min(4, len(perm)))])
		}
		return gopter.NewGenResult(m, moreShrinkFlows)
	}
}

// moreShrinkFlows offers the problem with one flow fewer, for each flow.
func moreShrinkFlows(v any) gopter.Shrink {
	m := v.(moreFlows)
	i := 0
	return func() (any, bool) {
		if len(m.Paths) <= 1 || i >= len(m.Paths) {
			return nil, false
		}
		paths := append(append([][]int{}, m.Paths[:i]...), m.Paths[i+1:]...)
		i++
		return moreFlows{Capacity: m.Capacity, Paths: paths}, true
	}
}

// MaxMinFairProperty is the property that sim.MaxMinFair, on random link
// capacities (some unlimited) and flows crossing random sets of distinct
// links, returns a max-min fair allocation:
//
//   - every rate is > 0, and +Inf exactly for flows crossing only
//     unlimited links;
//   - no link carries more than its capacity (relative 1e-9);
//   - every other flow has a bottleneck: a link on its path that is
//     saturated (its flows' rates sum to its capacity, relative 1e-9) and
//     on which no flow gets a larger rate.
func MaxMinFairProperty() gopter.Prop {
	return prop.ForAll(func(m moreFlows) string {
		rates, err := sim.MaxMinFair(m.Capacity, m.Paths)
		if err != nil {
			return err.Error()
		}
		if len(rates) != len(m.Paths) {
			return fmt.Sprintf("%d rates for %d flows", len(rates), len(m.Paths))
		}
		load := make([]float64, len(m.Capacity))
		top := make([]float64, len(m.Capacity)) // the largest rate on each link
		for f, path := range m.Paths {
			for _, l := range path {
				load[l] += rates[f]
				top[l] = max(top[l], rates[f])
			}
		}
		const rel = 1e-9
		for l, c := range m.Capacity {
			if !math.IsInf(c, 1) && load[l] > c*(1+rel) {
				return fmt.Sprintf("link %d carries %.17g, more than its capacity %.17g (rates %v)", l, load[l], c, rates)
			}
		}
		for f, path := range m.Paths {
			r := rates[f]
			unlimited := true
			for _, l := range path {
				unlimited = unlimited && math.IsInf(m.Capacity[l], 1)
			}
			switch {
			case unlimited && !math.IsInf(r, 1):
				return fmt.Sprintf("flow %d crosses only unlimited links and gets %g", f, r)
			case unlimited:
				continue
			case !(r > 0) || math.IsInf(r, 1):
				return fmt.Sprintf("flow %d gets rate %g, want finite and > 0 (rates %v)", f, r, rates)
			}
			bottleneck := false
			for _, l := range path {
				c := m.Capacity[l]
				if !math.IsInf(c, 1) && load[l] >= c*(1-rel) && r >= top[l]*(1-rel) {
					bottleneck = true
					break
				}
			}
			if !bottleneck {
				return fmt.Sprintf("flow %d (rate %.17g, links %v) has no bottleneck: loads %v, largest rates %v", f, r, path, load, top)
			}
		}
		return ""
	}, moreFlowsGen())
}
