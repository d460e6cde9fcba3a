package simexec_test

import (
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
)

// TestMirroredBuffersHoldAsInFull: a ring all-reduce across two nodes,
// its messages under a wire whose buffer holds one message per
// connection, so that a rank whose next hop crosses the network (14 µs
// there, 1 µs within a node) holds up the rank before it, takes longer
// than with eager sends; and its mirror holds the sends as the full
// simulation does, to the picosecond.
func TestMirroredBuffersHoldAsInFull(t *testing.T) {
	const fabric = "cluster:2x4"
	run := func(slots int, symmetry bool) (float64, bool) {
		c, _ := world(t, fabric, sim.Config{TimingOnly: true, Symmetry: symmetry})
		plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: len(c.Devices()), Count: 1 << 16, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		// A slot of a ring step's message: 1/ranks of the data.
		plan.Wire = &ops.Wire{Latency: [ops.NumPathClasses]float64{1e-6, 1e-6, 14e-6}, Efficiency: [ops.NumPathClasses]float64{1, 1, 1},
			Slots: slots, SlotBytes: int64(plan.Count * 4 / plan.Ranks)}
		in, out := buffers(t, c, plan, false)
		exec := simexec.NewExecutor(c)
		secs, err := exec.Run(plan, in, out)
		if err != nil {
			t.Fatal(err)
		}
		mirrored := c.EventsFired() == 0
		if mirrored {
			// Again, on the same mirror, from the same instant: the words
			// freeing its slots that were still on their way when the
			// first run ended are heard before its clock is set back.
			again, err := exec.Run(plan, in, out)
			if err != nil {
				t.Fatal(err)
			}
			if again != secs {
				t.Errorf("mirrored: %.15g s, then %.15g s", secs, again)
			}
		}
		return secs, mirrored
	}
	eager, _ := run(0, false)
	full, _ := run(1, false)
	mirrored, wasMirrored := run(1, true)
	if !wasMirrored {
		t.Fatalf("the ring all-reduce on %s did not run on the mirror", fabric)
	}
	if !(full > eager) {
		t.Errorf("one message per connection: %.15g s, eager %.15g s: the buffer never held a send", full, eager)
	}
	if mirrored != full {
		t.Errorf("mirrored %.15g s, full simulation %.15g s", mirrored, full)
	}
	t.Logf("eager %.6g s, one message per connection %.6g s, mirrored %.6g s", eager, full, mirrored)
}
