package proptest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

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
