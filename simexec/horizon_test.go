package simexec_test

import (
	"errors"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
)

// TestMirroredRunsShareTheClustersHorizon: a mirror's run stands for one
// on the cluster, starting at the cluster's clock. Two runs of 60 days
// each fit the horizon (106.75 days) from the cluster's clock, which a
// mirrored run leaves where it was, so both are timed on the mirror and
// agree, rather than the second passing a horizon that the mirror's own
// clock brought nearer.
func TestMirroredRunsShareTheClustersHorizon(t *testing.T) {
	c, _ := world(t, "switch:4,bw=1kB/s", sim.Config{TimingOnly: true, Symmetry: true})
	// A ring all-reduce of 4e9 bytes on 4 ranks moves 2·(3/4)·4e9 bytes
	// through every rank's link of 1 kB/s: 6e6 s.
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 1_000_000_000, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	in, out := buffers(t, c, plan, false)
	exec := simexec.NewExecutor(c)
	var first float64
	for run := range 2 {
		seconds, err := exec.Run(plan, in, out)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if c.EventsFired() != 0 {
			t.Fatalf("run %d was not timed on the mirror", run)
		}
		if seconds < 6e6 || seconds > 6e6+1 {
			t.Fatalf("run %d took %v s, want 6e6 s and latencies", run, seconds)
		}
		if run == 0 {
			first = seconds
		} else if seconds != first {
			t.Fatalf("the second run took %v s, the first %v s", seconds, first)
		}
	}
}

// TestPastTheHorizonOnTheMirrorAsInFull: a collective that would end past
// the horizon fails with ErrHorizon, mirrored or not, never with a time.
func TestPastTheHorizonOnTheMirrorAsInFull(t *testing.T) {
	for _, symmetry := range []bool{true, false} {
		c, _ := world(t, "switch:4,bw=1e-6B/s", sim.Config{TimingOnly: true, Symmetry: symmetry})
		plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 2, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		in, out := buffers(t, c, plan, false)
		seconds, err := simexec.NewExecutor(c).Run(plan, in, out)
		if !errors.Is(err, sim.ErrHorizon) || sim.IsDeadlock(err) {
			t.Fatalf("symmetry %v: %v s, error %v; want ErrHorizon", symmetry, seconds, err)
		}
	}
}
