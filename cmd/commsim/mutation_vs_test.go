package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commsim/commsim/topology"
)

// TestMutSameCutIsTheSamePartitionEitherWayRound: a cut and its mirror
// image (A and B swapped) split the GPUs alike; two different halvings
// do not.
func TestMutSameCutIsTheSamePartitionEitherWayRound(t *testing.T) {
	a := []bool{true, true, false, false}
	for _, c := range []struct {
		b    []bool
		want bool
	}{
		{[]bool{true, true, false, false}, true},
		{[]bool{false, false, true, true}, true},
		{[]bool{true, false, true, false}, false},
		{[]bool{false, true, false, true}, false},
	} {
		if got := sameCut(a, c.b); got != c.want {
			t.Errorf("sameCut(%v, %v) = %v, want %v", a, c.b, got, c.want)
		}
	}
}

// TestMutGraphCutsOfOneGPUAreNone: a single GPU has no halves to cut.
func TestMutGraphCutsOfOneGPUAreNone(t *testing.T) {
	topo, err := topology.Parse("switch:1")
	if err != nil {
		t.Fatal(err)
	}
	if cuts := graphCuts(topo); cuts != nil {
		t.Errorf("switch:1: graph cuts %+v, want none", cuts)
	}
}

// TestMutMultipathSamplesAtMostItsSourcesEvenly: on a ring of 100 GPUs
// each GPU's opposite has two equally short routes; show counts them from
// every second GPU (50 sources, no more than maxMultipathSources), and
// says from how many of the 100; on a ring of 8, from every GPU.
func TestMutMultipathSamplesAtMostItsSourcesEvenly(t *testing.T) {
	for _, c := range []struct {
		spec          string
		sources, gpus int
		from          string
	}{{"ring:100", 50, 100, "(from 50 of the 100 gpus)"}, {"ring:8", 8, 8, "(from every gpu)"}} {
		topo, err := topology.Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		m := multipath(topo)
		if want := (multipathSum{Pairs: c.sources, Checked: c.sources * (c.gpus - 1), Sources: c.sources}); *m != want {
			t.Errorf("%s: multipath %+v, want %+v", c.spec, *m, want)
		}
		if line := formatMultipath(m); !strings.Contains(line, c.from) {
			t.Errorf("%s: %q does not say %q", c.spec, line, c.from)
		}
	}
}

// TestMutCompareVsCountsMirroredRunsOfEveryFabric: with --vs, each fabric
// runs on a world of its own, and the runs a later fabric's world timed by
// simulating only the ranks that stand for all (a switch's) are counted
// too, though --topo's fabric (a ring) mirrors none.
func TestMutCompareVsCountsMirroredRunsOfEveryFabric(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "ring:8", "--vs", "switch:8", "--op", "alltoall", "--algos", "pairwise", "-b", "1KiB", "-e", "4KiB")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	if !strings.Contains(out+errOut, "of 6 runs were timed by simulating only the ranks that stand for all") {
		t.Errorf("no note of the switch's mirrored runs:\n%s\n%s", out, errOut)
	}
}

// TestMutCompareVsSaysItsFabricsInTheTitleAndTheEstimate: the plot of a
// --vs comparison is titled by its fabrics, and a comparison too long to
// run suggests fewer fabrics (--vs) among the ways to cut it.
func TestMutCompareVsSaysItsFabricsInTheTitleAndTheEstimate(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "vs.svg")
	if status, _, errOut := commsim("compare", "--topo", "switch:8", "--vs", "ring:8", "--algos", "pairwise", "--op", "alltoall", "-b", "1KiB", "-e", "4KiB", "--timing-only", "--plot", svg); status != 0 {
		t.Fatal(errOut)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("on 2 fabrics: 8 ranks")) {
		t.Errorf("the plot's title does not count the fabrics (%v)", err)
	}
	status, _, errOut := commsim("compare", "--topo", "ring:1024", "--vs", "torus:32x32", "--op", "allreduce", "--algos", "direct", "-b", "8", "-e", "64M", "-f", "1.5", "--timing-only")
	if status != 2 || !strings.Contains(errOut, "comparison would take about") || !strings.Contains(errOut, "on 2 fabrics") || !strings.Contains(errOut, "fewer fabrics (--vs), fewer ranks (-g)") {
		t.Errorf("compare --vs: status %d, stderr %q", status, errOut)
	}
}
