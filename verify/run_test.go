package verify

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
)

// A sweep through one Runner keeps its buffers from size to size, grows
// them when a size needs more, and gives the outputs a one-off run gives,
// in place and out of place alike, whatever earlier runs left behind.
func TestRunnerReusesBuffers(t *testing.T) {
	w := simWorld(t, 4, sim.Config{})
	exec := ops.NewExecutor(w)
	var r Runner
	defer r.Free()
	held := func() []hw.Buffer {
		var out []hw.Buffer
		for _, d := range w.Devices() {
			if pair := r.bufs[d]; pair != nil {
				out = append(out, pair[0], pair[1])
			}
		}
		return out
	}
	var before []hw.Buffer
	for i, count := range []int{16, 8, 3, 16, 40} {
		for _, op := range []ops.Op{ops.AllGather, ops.ReduceScatter, ops.AllReduce} {
			s := ops.Spec{Op: op, Algo: "ring", Ranks: 4, Count: count, DType: hw.F32, Redop: hw.Sum}
			plan, err := ops.Compile(s)
			if err != nil {
				t.Fatal(err)
			}
			c := Case{Spec: s}
			if c.Inputs, err = PatternInputs(s); err != nil {
				t.Fatal(err)
			}
			want, err := RunPlan(exec, w, plan, c.Inputs, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, inPlace := range []bool{false, true} {
				got, err := r.Run(exec, w, plan, c.Inputs, inPlace)
				if err != nil {
					t.Fatal(err)
				}
				for q := range got.Outputs {
					if !bytes.Equal(got.Outputs[q], want.Outputs[q]) {
						t.Errorf("%v in place %v, after other sizes: rank %d's output differs from a one-off run's", s, inPlace, q)
					}
				}
			}
		}
		now := held()
		switch {
		case i == 1 || i == 2 || i == 3: // no larger than the first size
			for k := range now {
				if now[k] != before[k] {
					t.Errorf("count %d: buffer %d replaced; it was large enough", count, k)
				}
			}
		case i == 4:
			for k := range now {
				if now[k] == before[k] {
					t.Errorf("count %d: buffer %d kept; it was too small", count, k)
				}
			}
		}
		before = now
	}
	if err := r.Free(); err != nil || len(held()) != 0 {
		t.Errorf("Free: %v, %d buffers still held", err, len(held()))
	}
}

// A run without inputs is timed only: on a timing-only world it runs on
// phantom buffers, reads nothing back, and takes the time a data run takes.
func TestRunnerTimingRun(t *testing.T) {
	s := ops.Spec{Op: ops.AllReduce, Algo: "rhd", Ranks: 4, Count: 1 << 12, DType: hw.BF16, Redop: hw.Avg}
	plan, err := ops.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := PatternInputs(s)
	if err != nil {
		t.Fatal(err)
	}
	data := simWorld(t, 4, sim.Config{})
	want, err := RunPlan(ops.NewExecutor(data), data, plan, inputs, true)
	if err != nil {
		t.Fatal(err)
	}
	phantom := simWorld(t, 4, sim.Config{TimingOnly: true})
	var r Runner
	got, err := r.Run(ops.NewExecutor(phantom), phantom, plan, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outputs != nil || got.Seconds != want.Seconds || got.Seconds <= 0 {
		t.Errorf("timing run: %d outputs, %g s; the data run took %g s", len(got.Outputs), got.Seconds, want.Seconds)
	}
	if _, err := r.Run(ops.NewExecutor(phantom), phantom, plan, inputs, true); !errors.Is(err, hw.ErrPhantom) {
		t.Errorf("inputs on phantom buffers: %v, want hw.ErrPhantom", err)
	}
	if err := r.Free(); err != nil {
		t.Error(err)
	}
}

func TestRunnerRefusesBadInputs(t *testing.T) {
	w := simWorld(t, 3, sim.Config{})
	s := ops.Spec{Op: ops.Broadcast, Algo: "tree", Ranks: 3, Count: 5, DType: hw.I32}
	plan, err := ops.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := PatternInputs(s)
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][][]byte{
		"two ranks":   inputs[:2],
		"short input": {inputs[0], inputs[1][:4], inputs[2]},
	} {
		if _, err := RunPlan(ops.NewExecutor(w), w, plan, in, false); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	// A world of another size is named as that, for a bigger plan too.
	big, err := ops.Compile(ops.Spec{Op: ops.Broadcast, Algo: "tree", Ranks: 8, Count: 5, DType: hw.I32})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RunPlan(ops.NewExecutor(w), w, big, nil, false); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "the plan is for 8 ranks, the world has 3") {
		t.Errorf("a plan for 8 ranks on 3: %v", err)
	}
}

// RunRank lays out, fills and reads back one rank only: the rank's own
// input, at the place ops.Plan.InPlace gives it, and its output from there.
func TestRunRankHoldsOneRank(t *testing.T) {
	w := simWorld(t, 1, sim.Config{})
	dev, err := w.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	s := ops.Spec{Op: ops.AllGather, Algo: ops.Native, Ranks: 3, Count: 4, DType: hw.I64}
	plan, err := ops.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := PatternInputs(s)
	if err != nil {
		t.Fatal(err)
	}
	var want []byte // what a correct allgather leaves on every rank
	for _, in := range inputs {
		want = append(want, in...)
	}
	var r Runner
	defer r.Free()
	for _, inPlace := range []bool{false, true} {
		rank := Rank{Index: 1, Device: dev, Launch: func(plan *ops.Plan, in, out hw.Slice, _ int) (float64, error) {
			got, err := readOutput(in)
			if err != nil {
				return 0, err
			}
			if !bytes.Equal(got, inputs[1]) {
				t.Errorf("in place %v: rank 1 reads %v, want its own input", inPlace, FormatElems(hw.I64, got))
			}
			if inPlace && (in.Buf != out.Buf || in.Off != plan.Count) {
				t.Errorf("in place: input %v inside output %v, want at rank 1's block", in, out)
			}
			return 1e-6, writeInput(out, want) // the peers' part of the collective, done
		}}
		res, err := r.RunRank(rank, plan, inputs, inPlace)
		if err != nil {
			t.Fatal(err)
		}
		if res.Seconds != 1e-6 || res.Outputs[0] != nil || res.Outputs[2] != nil {
			t.Errorf("in place %v: %g s, outputs of other ranks %v, %v", inPlace, res.Seconds, res.Outputs[0], res.Outputs[2])
		}
		if n, first, err := CountWrongRank(Case{Spec: s, Inputs: inputs}, 1, res.Outputs[1]); n != 0 || err != nil {
			t.Errorf("in place %v: %d wrong (%s), %v", inPlace, n, first, err)
		}
	}
	if _, err := r.RunRank(Rank{Index: 3, Device: dev, Launch: func(*ops.Plan, hw.Slice, hw.Slice, int) (float64, error) { return 0, nil }}, plan, inputs, false); err == nil {
		t.Error("rank 3 of 3 accepted")
	}
	if _, err := r.RunRank(Rank{Index: 0, Device: dev}, plan, inputs, false); err == nil {
		t.Error("a rank without Launch accepted")
	}
}

// TestRunnerIterations: the Warmup runs go in one untimed launch, the
// Iters timed ones in one launch back to back whose mean is the time, and
// a run with inputs launches once more, one run on fresh inputs, for the
// outputs (an in-place run's timed launches reduce their own results).
func TestRunnerIterations(t *testing.T) {
	s := ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 2, Count: 4, DType: hw.F32, Redop: hw.Sum}
	plan, err := ops.Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	inputs, err := PatternInputs(s)
	if err != nil {
		t.Fatal(err)
	}
	w := simWorld(t, 2, sim.Config{})
	dev, err := w.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		warmup, iters int
		inputs        [][]byte
		launches      []int // the runs of each launch
		secs          float64
	}{
		{0, 0, nil, []int{1}, 11},
		{2, 3, nil, []int{2, 3}, 23},
		{2, 3, inputs, []int{2, 3, 1}, 23},
		{0, 1, inputs, []int{1}, 11}, // one launch serves both
		{1, 1, inputs, []int{1, 1, 1}, 21},
	} {
		var launches []int
		var firstIn []byte
		rank := Rank{Index: 0, Device: dev, Launch: func(_ *ops.Plan, in, _ hw.Slice, runs int) (float64, error) {
			launches = append(launches, runs)
			raw, err := readOutput(in)
			if err != nil {
				return 0, err
			}
			if len(launches) == 1 {
				firstIn = raw
			} else if c.inputs != nil && len(launches) == len(c.launches) && string(raw) != string(firstIn) {
				t.Errorf("warmup %d iters %d: the last launch did not start from the inputs", c.warmup, c.iters)
			}
			// What a launch in place would do: change its input.
			if err := in.Buf.Write(make([]byte, in.Buf.Len()*4)); err != nil {
				return 0, err
			}
			return float64(10*len(launches) + runs), nil
		}}
		r := Runner{Warmup: c.warmup, Iters: c.iters}
		res, err := r.RunRank(rank, plan, c.inputs, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(launches, c.launches) || res.Seconds != c.secs {
			t.Errorf("warmup %d iters %d inputs %v: launches of %v runs, %v s; want %v, %v", c.warmup, c.iters, c.inputs != nil, launches, res.Seconds, c.launches, c.secs)
		}
		if err := r.Free(); err != nil {
			t.Fatal(err)
		}
	}
}
