package sim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/commsim/commsim/sim"
)

// TestMutCutNamesThreeGPUsWithoutEllipsisAndCountsTheRest: parts of three
// GPUs are named in full (no "…"), and the parts past the fourth are
// counted with all their GPUs, not one a part.
func TestMutCutNamesThreeGPUsWithoutEllipsisAndCountsTheRest(t *testing.T) {
	c := newCluster(t, "ring:15,bw=100GB/s,lat=1us", sim.Config{})
	for g := 2; g < 15; g += 3 {
		ok(t, c.Inject(try(sim.ParseFault(fmt.Sprintf("link gpu%d-gpu%d down", g, (g+1)%15)))(t)))
	}
	ok(t, firstErr(sendOnce(t, c, 0, 1, 1)))
	log := strings.Join(c.FaultLog(), "\n")
	want := "cut the gpus into 5 parts that cannot reach one another: gpu0 gpu1 gpu2 (3 gpus) | gpu3 gpu4 gpu5 (3 gpus) | gpu6 gpu7 gpu8 (3 gpus) | gpu9 gpu10 gpu11 (3 gpus) | 1 more parts (3 gpus)"
	if !strings.Contains(log, want) {
		t.Errorf("log %s\nwants %q", log, want)
	}
}

// TestMutLinkDownThatLeavesTheCutAsItWasSaysNothingNew: on a torus, the
// four links of gpu0 down cut it off once; a fifth link down elsewhere
// leaves the same two parts, and the cut is not logged again.
func TestMutLinkDownThatLeavesTheCutAsItWasSaysNothingNew(t *testing.T) {
	c := newCluster(t, "torus:4x4,bw=100GB/s,lat=1us", sim.Config{})
	for i, l := range []string{"gpu0-gpu1", "gpu0-gpu4", "gpu3-gpu0", "gpu12-gpu0", "gpu5-gpu6"} {
		ok(t, c.Inject(try(sim.ParseFault(fmt.Sprintf("link %s down at %dus", l, i+1)))(t)))
	}
	ok(t, firstErr(sendOnce(t, c, 9, 10, 1_000_000)))
	var cuts []string
	for _, line := range c.FaultLog() {
		if strings.Contains(line, "cut the gpus") {
			cuts = append(cuts, line)
		}
	}
	want := "4.000000us: the links down cut the gpus into 2 parts that cannot reach one another: gpu0 (1 gpu) | gpu1 gpu2 gpu3 … (15 gpus)"
	if len(cuts) != 1 || cuts[0] != want {
		t.Errorf("cut lines %q, want only %q (log %q)", cuts, want, c.FaultLog())
	}
}
