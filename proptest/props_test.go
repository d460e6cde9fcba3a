package proptest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// propsSimWorld is the simulator as a world factory: a fresh cluster over
// the case's fabric (equiv.go's SimBackend, which any backend's NewWorld
// can replace).
var propsSimWorld = SimBackend(sim.Config{}).NewWorld

// The default numbers of cases keep these tests near a minute in all on
// two cores; COMMSIM_PROPTEST_N overrides them.

func TestReferenceProperty(t *testing.T) {
	eqCheck(t, "reference", ReferenceProperty(propsSimWorld), 3000)
}

func TestConsistencyProperty(t *testing.T) {
	eqCheck(t, "consistency", ConsistencyProperty(propsSimWorld), 400)
}

func TestAlgebraProperty(t *testing.T) {
	eqCheck(t, "algebra", AlgebraProperty(propsSimWorld), 600)
}

func TestCheckerProperty(t *testing.T) {
	eqCheck(t, "checker", CheckerProperty(), 3000)
}

// TestYAMLGraphs runs collectives on random YAML fabrics: each document
// reads back with exactly p GPUs, exports and re-reads to the same nodes
// and links, and a simulated run on it meets the reference.
func TestYAMLGraphs(t *testing.T) {
	cases := GenCase(GenOptions{MaxRanks: 9, MaxElems: 512})
	eqCheck(t, "yaml graphs", prop.ForAll(func(c Case, seed int64) string {
		doc, ok := GenYAMLGraph(c.Spec.Ranks)(gopter.DefaultGenParameters().CloneWithSeed(seed)).Retrieve()
		if !ok {
			return "no graph"
		}
		fail := func(err error) string { return Describe(c, fmt.Errorf("%w\ngraph:\n%s", err, doc)) }
		topo, err := topology.ReadYAML([]byte(doc.(string)))
		if err != nil {
			return fail(err)
		}
		if topo.NumGPUs() != c.Spec.Ranks {
			return fail(fmt.Errorf("graph has %d gpus, want %d", topo.NumGPUs(), c.Spec.Ranks))
		}
		var buf bytes.Buffer
		if err := topo.WriteYAML(&buf); err != nil {
			return fail(err)
		}
		back, err := topology.ReadYAML(buf.Bytes())
		if err != nil {
			return fail(fmt.Errorf("re-reading the export: %w", err))
		}
		if fmt.Sprint(back.Nodes, back.Links) != fmt.Sprint(topo.Nodes, topo.Links) {
			return fail(fmt.Errorf("export and re-read changed the fabric:\n%s", buf.String()))
		}
		cl, err := sim.NewCluster(topo, sim.Config{})
		if err != nil {
			return fail(err)
		}
		defer cl.Close()
		for _, inPlace := range []bool{false, true} {
			res, err := Run(cl.World(), c, inPlace)
			if err == nil {
				err = CheckReference(c, res.Outputs)
			}
			if err != nil {
				return fail(fmt.Errorf("in place %v: %w", inPlace, err))
			}
		}
		return ""
	}, cases, gen.Int64()), 300)
}

// TestMutantsMostlyCaught keeps CheckerProperty from being vacuous: of
// the mutants it makes, Check rejects nearly all, and runs of those it
// accepts agree with the original plan.
func TestMutantsMostlyCaught(t *testing.T) {
	g := GenSpec(GenOptions{MaxRanks: 9, MaxElems: 48})
	gp := gopter.DefaultGenParameters()
	var made, caught [3]int
	for range 1000 {
		s := g(gp).Result.(ops.Spec)
		plan, err := ops.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		for kind := range 3 {
			bad, what, ok := mutate(plan, kind, gp.Rng.Intn(1<<20), gp.NextBool())
			if !ok {
				continue
			}
			made[kind]++
			if ops.Check(bad) != nil {
				caught[kind]++
			} else if err := sameResults(plan, bad); err != nil {
				t.Errorf("%v with %s: %v", s, what, err)
			}
		}
	}
	for kind, name := range []string{"drop", "peer", "shift"} {
		if made[kind] < 500 || caught[kind] < made[kind]*99/100 {
			t.Errorf("%s: %d mutants, %d caught", name, made[kind], caught[kind])
		}
	}
	t.Logf("mutants made %v, caught by Check %v", made, caught)
}

// TestSameResultsSeesADifference keeps CheckerProperty's second line of
// defence from being vacuous: a shifted range that still runs computes
// something else, and sameResults must say so.
func TestSameResultsSeesADifference(t *testing.T) {
	plan, err := ops.Compile(ops.Spec{Op: ops.AllGather, Algo: "ring", Ranks: 3, Count: 4, DType: hw.F32})
	if err != nil {
		t.Fatal(err)
	}
	for pos := range 40 {
		bad, what, ok := mutate(plan, 2, pos, true)
		if !ok {
			t.Fatal("no step to shift")
		}
		if err := sameResults(plan, bad); err != nil && strings.Contains(err.Error(), "output differs") {
			return
		}
		_ = what
	}
	t.Error("no shifted plan's outputs differed from the original's")
}

// TestCountWrongRankJudgesThatRank: each rank of a reducescatter has its
// own expected block, so a rank's correct output is right for it and wrong
// for another.
func TestCountWrongRankJudgesThatRank(t *testing.T) {
	c := Case{Spec: ops.Spec{Op: ops.ReduceScatter, Algo: "ring", Ranks: 2, Count: 1, DType: hw.U8, Redop: hw.Sum},
		Topo: "switch:2", Inputs: [][]byte{{1, 2}, {10, 20}}}
	if n, first, err := CountWrongRank(c, 1, []byte{22}); err != nil || n != 0 {
		t.Errorf("rank 1 with 2+20: %d wrong (%s), %v", n, first, err)
	}
	if n, _, err := CountWrongRank(c, 0, []byte{22}); err != nil || n != 1 {
		t.Errorf("rank 0 with 2+20: %d wrong, %v; want 1", n, err)
	}
}

// recordTB is a testing.TB that records failures instead of failing.
type recordTB struct {
	testing.TB
	failed bool
}

func (r *recordTB) Helper()               {}
func (r *recordTB) Errorf(string, ...any) { r.failed = true }
func (r *recordTB) Fatalf(string, ...any) { r.failed = true }
func (r *recordTB) Logf(string, ...any)   {}

// TestEqCheckFails: every property test of the kit goes through eqCheck,
// so if eqCheck did not fail on a falsified property none of them could.
func TestEqCheckFails(t *testing.T) {
	rec := &recordTB{TB: t}
	eqCheck(rec, "false", prop.ForAll(func(int) bool { return false }, gen.Int()), 5)
	if !rec.failed {
		t.Error("eqCheck passed a property that is always false")
	}
}

// TestEqParametersReadTheEnvironment: the seed a failure prints must
// replay it, and COMMSIM_PROPTEST_N must set the number of tests.
func TestEqParametersReadTheEnvironment(t *testing.T) {
	t.Setenv(EnvSeed, "12345")
	t.Setenv(EnvTests, "3")
	p := eqParameters(t, 7)
	if p.Seed() != 12345 || p.MinSuccessfulTests != 3 {
		t.Errorf("seed %d, %d tests; want 12345 and 3", p.Seed(), p.MinSuccessfulTests)
	}
}

// TestLowerBoundHasAlpha: for p > 1 no collective beats one message's
// latency, α = 2 link latencies on a switch, even with no data.
func TestLowerBoundHasAlpha(t *testing.T) {
	topo, err := topology.Parse("switch:2,bw=1GB/s,lat=1us")
	if err != nil {
		t.Fatal(err)
	}
	s := ops.Spec{Op: ops.Broadcast, Algo: "tree", Ranks: 2, Count: 0, DType: hw.F32}
	if got := moreLowerBound(s, topo); got < 2e-6*(1-1e-9) {
		t.Errorf("lower bound %g s, want at least α = 2 µs", got)
	}
}

// TestMutateShiftsBothWays: CheckerProperty's shifts move a range down as
// well as up (when up is false and the offset allows), so Check is tried
// against both off-by-one directions.
func TestMutateShiftsBothWays(t *testing.T) {
	plan, err := ops.Compile(ops.Spec{Op: ops.AllGather, Algo: "ring", Ranks: 3, Count: 4, DType: hw.F32})
	if err != nil {
		t.Fatal(err)
	}
	for pos := range 40 {
		if _, what, ok := mutate(plan, 2, pos, false); ok && strings.Contains(what, "shifted by -1") {
			return
		}
	}
	t.Error("no range was shifted down")
}
