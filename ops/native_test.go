package ops_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
)

// TestNativePlansReachTheLibrary: algorithm native hands each op to the
// backend's library once per rank and run, in one launch a run, with
// NCCL's slices and peers, and the results are what the collective means.
func TestNativePlansReachTheLibrary(t *testing.T) {
	const p, n = 3, 4
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.SendRecv} {
		c, _ := world(t, fmt.Sprintf("switch:%d", p), sim.Config{})
		var launched []hw.NativeCall
		devs := make([]hw.Device, p)
		for r, d := range c.Devices() {
			devs[r] = &simtest.LibDevice{Device: d, Launched: &launched}
		}
		w, err := hw.NewWorld(devs)
		if err != nil {
			t.Fatal(err)
		}
		spec := ops.Spec{Op: op, Algo: ops.Native, Ranks: p, Count: n, Root: 1, DType: hw.I32, Redop: hw.Sum}
		plan, err := ops.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Native() || plan.NumSteps() != 0 {
			t.Fatalf("%v: native %v with %d steps", op, plan.Native(), plan.NumSteps())
		}
		var in, out []hw.Slice
		inputs := make([][]int32, p)
		for r, d := range devs {
			ib, _ := d.Alloc(hw.I32, plan.InLen)
			ob, _ := d.Alloc(hw.I32, plan.OutLen)
			in, out = append(in, hw.Whole(ib)), append(out, hw.Whole(ob))
			for i := range plan.InLen {
				inputs[r] = append(inputs[r], int32(100*r+i))
			}
			if err := writeSlice(in[r], inputs[r]); err != nil {
				t.Fatal(err)
			}
		}
		exec := ops.NewExecutor(w)
		// One run, then three back to back: each a launch of every
		// rank's calls.
		for _, runs := range []int{1, 3} {
			launched = nil
			if _, err := exec.RunBackToBack(plan, in, out, runs); err != nil {
				t.Fatalf("%v: %v", op, err)
			}
			if want := runs * p * map[bool]int{true: 2, false: 1}[op == ops.SendRecv]; len(launched) != want {
				t.Fatalf("%v, %d runs: %d calls reached the library, want %d: %+v", op, runs, len(launched), want, launched)
			}
			for r := range p {
				got, _ := readSlice(out[r])
				if want := expected(plan, inputs, r); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%v rank %d: got %v, want %v", op, r, got, want)
				}
			}
		}
		if err := exec.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNativeRefusals(t *testing.T) {
	if _, err := ops.Compile(ops.Spec{Op: ops.Gather, Algo: ops.Native, Ranks: 2, Count: 1, DType: hw.F32}); !errors.Is(err, ops.ErrUnsupported) {
		t.Fatalf("native gather: %v", err)
	}
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: ops.Native, Ranks: 2, Count: 1, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.Check(plan); err == nil || !strings.Contains(err.Error(), "no steps") {
		t.Fatalf("Check of a native plan: %v", err)
	}
	c, _ := world(t, "switch:2", sim.Config{})
	in, out := buffers(t, c, plan, false)
	exec := ops.NewExecutor(c.World())
	if _, err := exec.Run(plan, in, out); !errors.Is(err, ops.ErrUnsupported) || !strings.Contains(err.Error(), "sim has none") {
		t.Fatalf("native on sim: %v", err)
	}
	if _, err := exec.Enqueue(plan, 0, in[0], out[0]); !errors.Is(err, ops.ErrUnsupported) {
		t.Fatalf("Enqueue of a native plan: %v", err)
	}
}
