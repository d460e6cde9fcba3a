package verify

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// simWorld is a fresh simulated switch of p GPUs, closed with the test.
func simWorld(t *testing.T, p int, cfg sim.Config) *hw.World {
	t.Helper()
	topo, err := topology.Parse(fmt.Sprintf("switch:%d", p))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sim.NewCluster(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl.World()
}

// TestCheckReferenceRejects makes sure the reference is not vacuous: one
// flipped high bit in a correct output is caught, on that rank only.
func TestCheckReferenceRejects(t *testing.T) {
	c := Case{Spec: ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 3, Count: 2, DType: hw.F32, Redop: hw.Sum}, Topo: "switch:3"}
	for r := range 3 {
		c.Inputs = append(c.Inputs, hw.Encode([]float32{float32(r) + 0.5, -1}))
	}
	w := simWorld(t, 3, sim.Config{})
	res, err := Run(ops.NewExecutor(w), w, c, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckReference(c, res.Outputs); err != nil {
		t.Fatalf("correct output rejected: %v", err)
	}
	res.Outputs[1][3] ^= 0x40 // exponent bit of element 0 on rank 1
	err = CheckReference(c, res.Outputs)
	if err == nil {
		t.Fatal("a wrong output was accepted")
	}
	t.Log(err)

	// One rank's output alone, as a process of a multi-process run checks
	// it: only rank 1's is wrong, and the ranks' counts add up.
	total, _, err := CountWrong(c, res.Outputs)
	if err != nil || total != 1 {
		t.Fatalf("CountWrong: %d, %v", total, err)
	}
	sum := 0
	for r := range 3 {
		n, first, err := CountWrongRank(c, r, res.Outputs[r])
		if err != nil || n != map[bool]int{true: 1}[r == 1] || r == 1 && !strings.HasPrefix(first, "rank 1 element 0 = ") {
			t.Errorf("rank %d: %d wrong (%q), %v", r, n, first, err)
		}
		sum += n
	}
	if sum != total {
		t.Errorf("ranks' counts add up to %d, CountWrong says %d", sum, total)
	}
	for _, r := range []int{-1, 3} {
		if _, _, err := CountWrongRank(c, r, res.Outputs[0]); err == nil {
			t.Errorf("rank %d accepted", r)
		}
	}
	if _, _, err := CountWrongRank(c, 0, res.Outputs[0][:4]); err == nil {
		t.Error("a short output accepted")
	}
	short := c
	short.Inputs = [][]byte{c.Inputs[0], c.Inputs[1][:4], c.Inputs[2]}
	if _, _, err := CountWrong(short, res.Outputs); err == nil {
		t.Error("a short input accepted")
	}
	// Gather's output is defined on the root only.
	g := Case{Spec: ops.Spec{Op: ops.Gather, Ranks: 3, Count: 2, Root: 2, DType: hw.F32}, Inputs: c.Inputs}
	if n, _, err := CountWrongRank(g, 0, nil); n != 0 || err != nil {
		t.Errorf("gather off the root: %d, %v", n, err)
	}
}

// TestPatternRunsMeetTheReference runs every op with every algorithm,
// dtype and reduction on the pattern inputs, out of place and in place on
// an odd number of ranks, and requires CountWrong to accept the outputs
// and to count exactly one wrong element after one is corrupted on a rank
// whose output is defined.
func TestPatternRunsMeetTheReference(t *testing.T) {
	const p = 5
	w := simWorld(t, p, sim.Config{})
	exec := ops.NewExecutor(w)
	var runner Runner
	defer runner.Free()
	runs := 0
	for _, op := range ops.Ops() {
		for _, algo := range ops.AlgorithmsFor(op) {
			for _, dt := range hw.DTypes() {
				redops := []hw.ReduceOp{hw.Sum}
				if op.Reduces() {
					redops = hw.ReduceOps()
				}
				for _, redop := range redops {
					s := ops.Spec{Op: op, Algo: algo, Ranks: p, Count: 7, Root: 3, DType: dt, Redop: redop}
					if op == ops.Barrier {
						s.Count = 0
					}
					plan, err := ops.Compile(s)
					if err != nil {
						t.Fatalf("%v: %v", s, err)
					}
					c := Case{Spec: s}
					if c.Inputs, err = PatternInputs(s); err != nil {
						t.Fatal(err)
					}
					for _, inPlace := range []bool{false, true} {
						res, err := runner.Run(exec, w, plan, c.Inputs, inPlace)
						if err != nil {
							t.Fatalf("%v in place %v: %v", s, inPlace, err)
						}
						if err := CheckReference(c, res.Outputs); err != nil {
							t.Errorf("%v in place %v: %v", s, inPlace, err)
						}
						runs++
						r := s.Root // defined for every op but barrier
						if len(res.Outputs[r]) == 0 {
							continue
						}
						res.Outputs[r][len(res.Outputs[r])-1] ^= 0x80 // the last element's top bit
						if n, _, err := CountWrong(c, res.Outputs); n != 1 || err != nil {
							t.Errorf("%v in place %v: a flipped sign bit gives %d wrong, %v", s, inPlace, n, err)
						}
					}
				}
			}
		}
	}
	t.Logf("%d runs", runs)
}

func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }

// TestJudgeReduce pins the reference's rules for single elements: what it
// accepts, and the neighbours it must refuse.
func TestJudgeReduce(t *testing.T) {
	f32NaN, f32Inf := uint64(0x7fc00000), f32(float32(math.Inf(1)))
	next := func(v float32) uint64 { return f32(v) + 1 }
	for _, c := range []struct {
		name string
		dt   hw.DType
		op   hw.ReduceOp
		vals []uint64
		ok   []uint64 // accepted results
		bad  []uint64 // refused results
	}{
		{"f32 exact sum", hw.F32, hw.Sum, []uint64{f32(1), f32(2)}, []uint64{f32(3)}, []uint64{next(3), f32(3) - 1, f32(-3)}},
		{"f32 rounded sum within γ(p-1)", hw.F32, hw.Sum, []uint64{f32(1), f32(0x1p-24), f32(0x1p-24)}, []uint64{f32(1), next(1)}, []uint64{next(1) + 2, f32(1) - 1}},
		{"f32 NaN gives the canonical NaN", hw.F32, hw.Sum, []uint64{f32NaN | 5, f32(1)}, []uint64{f32NaN}, []uint64{f32NaN | 5, f32(1)}},
		{"f32 +Inf and -Inf give NaN", hw.F32, hw.Sum, []uint64{f32Inf, f32Inf | 1<<31}, []uint64{f32NaN}, []uint64{f32Inf}},
		{"f32 one Inf wins", hw.F32, hw.Sum, []uint64{f32Inf, f32(-5)}, []uint64{f32Inf}, []uint64{f32NaN, f32(-5)}},
		{"f32 min orders -0 below +0", hw.F32, hw.Min, []uint64{f32(0), 1 << 31}, []uint64{1 << 31}, []uint64{0}},
		{"f32 max orders +0 above -0", hw.F32, hw.Max, []uint64{1 << 31, f32(0)}, []uint64{0}, []uint64{1 << 31}},
		{"f32 prod 0 × Inf is NaN", hw.F32, hw.Prod, []uint64{f32(0), f32Inf}, []uint64{f32NaN}, []uint64{0, f32Inf}},
		{"f32 prod keeps the sign of zero", hw.F32, hw.Prod, []uint64{f32(-1), f32(0)}, []uint64{1 << 31}, []uint64{0}},
		{"f32 avg", hw.F32, hw.Avg, []uint64{f32(1), f32(2)}, []uint64{f32(1.5), next(1.5)}, []uint64{next(1.5) + 1, f32(3)}},
		{"f32 avg of one NaN rank is the canonical NaN", hw.F32, hw.Avg, []uint64{f32NaN | 5}, []uint64{f32NaN}, []uint64{f32NaN | 5}},
		{"i32 sum wraps", hw.I32, hw.Sum, []uint64{math.MaxInt32, 1}, []uint64{1 << 31}, []uint64{0, math.MaxInt32}},
		{"i32 avg truncates toward zero", hw.I32, hw.Avg, []uint64{0xFFFFFFFD, 0}, []uint64{0xFFFFFFFF}, []uint64{0xFFFFFFFE}},
		{"u8 sum wraps", hw.U8, hw.Sum, []uint64{255, 2}, []uint64{1}, []uint64{0, 2}},
		{"i64 min is signed", hw.I64, hw.Min, []uint64{1 << 63, 1}, []uint64{1 << 63}, []uint64{1}},
	} {
		for _, got := range c.ok {
			if ok, want := judgeReduce(c.dt, c.op, c.vals, got); !ok {
				t.Errorf("%s: %s refused, want %s", c.name, fmtElem(c.dt, got), want)
			}
		}
		for _, got := range c.bad {
			if ok, want := judgeReduce(c.dt, c.op, c.vals, got); ok {
				t.Errorf("%s: %s accepted (want %s)", c.name, fmtElem(c.dt, got), want)
			}
		}
	}
}

func TestFormatElems(t *testing.T) {
	b := hw.Encode([]float32{1.5, float32(math.NaN()), float32(math.Copysign(0, -1))})
	if got, want := FormatElems(hw.F32, b), "[1.5 NaN(0x7fc00000) -0(0x80000000)]"; got != want {
		t.Errorf("FormatElems = %q, want %q", got, want)
	}
	if got, want := FormatElems(hw.I32, hw.Encode([]int32{-7, 3})), "[-7 3]"; got != want {
		t.Errorf("FormatElems = %q, want %q", got, want)
	}
	// An invalid dtype, of size 0, looped forever on its elements.
	if got, want := FormatElems(0, []byte{1}), "[1 bytes of dtype(0)]"; got != want {
		t.Errorf("FormatElems of an invalid dtype = %q, want %q", got, want)
	}
}
