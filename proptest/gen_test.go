package proptest_test

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/proptest"
	"github.com/commsim/commsim/topology"
)

// ExampleGenCase draws one case with a fixed seed (generation uses only
// the gopter parameters' random source, so it is reproducible) and shows
// what a shrink step offers.
func ExampleGenCase() {
	g := proptest.GenCase(proptest.GenOptions{Ops: []ops.Op{ops.AllReduce}, DTypes: []hw.DType{hw.F32}, MaxRanks: 8})
	res := g(gopter.DefaultGenParameters().CloneWithSeed(7))
	c := res.Result.(proptest.Case)
	fmt.Println(c.Spec.Op, c.Spec.Ranks == len(c.Inputs), len(c.Inputs[0]) == 4*c.Spec.Count)
	smaller, _ := res.Shrinker(c)()
	fmt.Println(smaller.(proptest.Case).Spec.Ranks)
	// Output:
	// allreduce true true
	// 1
}

// checkCase verifies everything a generated case promises.
func checkCase(c proptest.Case, maxElems int) error {
	s := c.Spec
	if _, err := ops.Compile(s); err != nil {
		return err
	}
	in, out := s.BufferLens()
	if max(in, out) > maxElems {
		return fmt.Errorf("%v: buffers of %d elements, limit %d", s, max(in, out), maxElems)
	}
	if len(c.Inputs) != s.Ranks {
		return fmt.Errorf("%v: %d inputs", s, len(c.Inputs))
	}
	for r, b := range c.Inputs {
		if len(b) != in*s.DType.Size() {
			return fmt.Errorf("%v: rank %d input has %d bytes", s, r, len(b))
		}
	}
	topo, err := topology.Parse(c.Topo)
	if err != nil {
		return err
	}
	if topo.NumGPUs() != s.Ranks {
		return fmt.Errorf("%v: %s has %d gpus", s, c.Topo, topo.NumGPUs())
	}
	if (!s.Op.Reduces() && s.Redop != 0) || (!s.Op.Rooted() && s.Root != 0) {
		return fmt.Errorf("%v: fields the op does not use are set", s)
	}
	return nil
}

// TestGenCaseCovers draws many cases and requires each to be valid and,
// together, to cover every op, dtype, reduce op, topology kind and count
// class, and the awkward values.
func TestGenCaseCovers(t *testing.T) {
	g := proptest.GenCase(proptest.GenOptions{})
	gp := gopter.DefaultGenParameters()
	seen := map[string]bool{}
	for range 3000 {
		c := g(gp).Result.(proptest.Case)
		if err := checkCase(c, 4096); err != nil {
			t.Fatal(err)
		}
		s, p, n := c.Spec, c.Spec.Ranks, c.Spec.Count
		seen["op "+s.Op.String()] = true
		seen["dtype "+s.DType.String()] = true
		seen["redop "+s.Redop.String()] = s.Redop != 0 || seen["redop "+s.Redop.String()]
		seen["topo "+strings.Split(c.Topo, ":")[0]] = true
		seen[fmt.Sprintf("ranks %d", p)] = true
		if ops.IsNCCL(s.Algo) {
			seen["nccl channels"] = seen["nccl channels"] || s.Channels > 1
			seen["nccl passes"] = seen["nccl passes"] || s.Chunk > 0 && n > s.Chunk*p
			seen["nccl nodes"] = seen["nccl nodes"] || s.NodeRanks > 1 && s.NodeRanks < p
		}
		switch in, out := s.BufferLens(); {
		case n == 0 && s.Op != ops.Barrier:
			seen["count 0"] = true
		case n == 1:
			seen["count 1"] = true
		case n > 2 && p > 2 && n%p == p-1:
			seen["count k·p−1"] = true
		case n > 2 && p > 2 && n%p == 1:
			seen["count k·p+1"] = true
		case max(in, out) >= 1024:
			seen["count large"] = true
		}
		for _, b := range c.Inputs {
			vals, _ := hw.ToFloat64s(s.DType, b)
			for i, v := range vals {
				switch {
				case math.IsNaN(v):
					seen["NaN"] = true
				case math.IsInf(v, -1):
					seen["-Inf"] = true
				case v == 0 && math.Signbit(v) && s.DType.IsFloat():
					seen["-0"] = true
				case s.DType == hw.F16 && v != 0 && math.Abs(v) < 0x1p-14:
					seen["f16 subnormal"] = true
				case s.DType == hw.BF16 && v != 0 && math.Abs(v) < 0x1p-126:
					seen["bf16 subnormal"] = true
				case s.DType == hw.I32 && v == math.MinInt32:
					seen["MinInt32"] = true
				case s.DType == hw.I32 && v == math.MaxInt32:
					seen["MaxInt32"] = true
				case s.DType == hw.U8 && v == 255:
					seen["u8 255"] = true
				}
				_ = i
			}
		}
	}
	var want []string
	for _, o := range ops.Ops() {
		want = append(want, "op "+o.String())
	}
	for _, d := range hw.DTypes() {
		want = append(want, "dtype "+d.String())
	}
	for _, r := range hw.ReduceOps() {
		want = append(want, "redop "+r.String())
	}
	for p := 1; p <= 17; p++ {
		want = append(want, fmt.Sprintf("ranks %d", p))
	}
	want = append(want, "topo switch", "topo ring", "topo mesh", "topo torus", "topo cluster",
		"count 0", "count 1", "count k·p−1", "count k·p+1", "count large",
		"NaN", "-Inf", "-0", "f16 subnormal", "bf16 subnormal", "MinInt32", "MaxInt32", "u8 255",
		"nccl channels", "nccl passes", "nccl nodes")
	for _, w := range want {
		if !seen[w] {
			t.Errorf("3000 cases never had %s", w)
		}
	}
}

// TestShrinkCaseShrinks: every candidate ShrinkCase offers is a valid
// case, and a property that fails for p ≥ 3 and count ≥ 5 shrinks to
// exactly p = 3, count = 5 on a plain switch.
func TestShrinkCaseShrinks(t *testing.T) {
	g := proptest.GenCase(proptest.GenOptions{MinRanks: 12})
	gp := gopter.DefaultGenParameters()
	for range 20 {
		c := g(gp).Result.(proptest.Case)
		shrink := proptest.ShrinkCase(c)
		for v, ok := shrink(); ok; v, ok = shrink() {
			if err := checkCase(v.(proptest.Case), 4096); err != nil {
				t.Fatalf("shrinking %v: %v", c, err)
			}
		}
	}
	params := gopter.DefaultTestParameters()
	params.MinSuccessfulTests = 50
	opts := proptest.GenOptions{Ops: []ops.Op{ops.AllGather, ops.AllReduce}, MinRanks: 3}
	res := prop.ForAll(func(c proptest.Case) bool {
		return c.Spec.Ranks < 3 || c.Spec.Count < 5
	}, proptest.GenCase(opts)).Check(params)
	if res.Passed() || len(res.Args) == 0 {
		t.Fatalf("the property did not fail: %+v", res)
	}
	got := res.Args[0].Arg.(proptest.Case)
	if got.Spec.Ranks != 3 || got.Spec.Count != 5 || got.Topo != "switch:3" {
		t.Errorf("shrunk to %v, want p=3 count=5 on switch:3", got)
	}
	for r, b := range got.Inputs {
		if slices.ContainsFunc(b, func(x byte) bool { return x != 0 }) {
			t.Errorf("rank %d's input did not shrink to zeros: %v", r, b)
		}
	}
}

// TestGenTopoSpec: every kind, for every size, parses to that many GPUs;
// YAML graphs read back with that many GPUs.
func TestGenTopoSpec(t *testing.T) {
	gp := gopter.DefaultGenParameters()
	for p := 1; p <= 17; p++ {
		for _, kind := range []string{"switch", "ring", "mesh", "torus", "cluster"} {
			for range 10 {
				spec := proptest.GenTopoSpec(p, kind)(gp).Result.(string)
				topo, err := topology.Parse(spec)
				if err != nil || topo.NumGPUs() != p || !strings.HasPrefix(spec, kind+":") {
					t.Fatalf("%s: %v (want %d gpus of kind %s)", spec, err, p, kind)
				}
			}
		}
		doc := proptest.GenYAMLGraph(p)(gp).Result.(string)
		topo, err := topology.ReadYAML([]byte(doc))
		if err != nil || topo.NumGPUs() != p {
			t.Fatalf("%v\n%s", err, doc)
		}
	}
}

// Generators given what cannot be generated (no GPUs, a negative count,
// an unknown dtype or fabric kind) generate nothing, and ShrinkCase of
// anything but a Case shrinks to nothing, where each panicked or made
// invalid cases.
func TestGeneratorsOfNothingGenerateNothing(t *testing.T) {
	gp := gopter.DefaultGenParameters()
	for name, g := range map[string]gopter.Gen{
		"no GPUs":        proptest.GenTopoSpec(-4),
		"no GPUs, YAML":  proptest.GenYAMLGraph(0),
		"negative count": proptest.GenElements(hw.F32, -1),
		"no dtype":       proptest.GenElements(0, 4),
		"too many":       proptest.GenElements(hw.F32, math.MaxInt/2),
		"no bound":       proptest.GenCount(ops.AllReduce, 4, -1),
		"no ranks":       proptest.GenCount(ops.AllReduce, 0, 10),
		"unknown dtype":  proptest.GenCase(proptest.GenOptions{DTypes: []hw.DType{0}}),
		"unknown fabric": proptest.GenCase(proptest.GenOptions{TopoKinds: []string{"bogus"}}),
	} {
		if r := g(gp); r.Result != nil {
			t.Errorf("%s: generated %v", name, r.Result)
		}
	}
	if v, ok := proptest.ShrinkCase(42)(); ok {
		t.Errorf("ShrinkCase(42) shrank to %v", v)
	}
}

// TestGenDeterministic: the same seed gives the same cases.
func TestGenDeterministic(t *testing.T) {
	g := proptest.GenCase(proptest.GenOptions{})
	a, b := gopter.DefaultGenParameters().CloneWithSeed(42), gopter.DefaultGenParameters().CloneWithSeed(42)
	for range 50 {
		x, y := g(a).Result.(proptest.Case), g(b).Result.(proptest.Case)
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("%v != %v", x, y)
		}
	}
}

// TestSpecials: every dtype's awkward values are whole elements.
func TestSpecials(t *testing.T) {
	for _, dt := range hw.DTypes() {
		b := proptest.Specials(dt)
		if len(b) == 0 || len(b)%dt.Size() != 0 {
			t.Errorf("%s: %d bytes", dt, len(b))
		}
		e := proptest.GenElements(dt, 10)(gopter.DefaultGenParameters()).Result.([]byte)
		if len(e) != 10*dt.Size() {
			t.Errorf("%s: GenElements gave %d bytes", dt, len(e))
		}
	}
}

// TestGenCaseRoots: rooted collectives get every root, not only 0 (an
// algorithm that ignores the root is right whenever it is 0), and GenRoot
// draws all of [0, ranks).
func TestGenCaseRoots(t *testing.T) {
	g := proptest.GenCase(proptest.GenOptions{Ops: []ops.Op{ops.Broadcast, ops.Reduce, ops.Gather}, MinRanks: 4, MaxRanks: 4})
	gp := gopter.DefaultGenParameters().CloneWithSeed(1)
	seen, roots := map[int]bool{}, map[int]bool{}
	for range 300 {
		seen[g(gp).Result.(proptest.Case).Spec.Root] = true
		roots[proptest.GenRoot(4)(gp).Result.(int)] = true
	}
	for r := range 4 {
		if !seen[r] || !roots[r] {
			t.Errorf("root %d: GenCase %v, GenRoot %v", r, seen[r], roots[r])
		}
	}
}

// TestGenCaseKeepsRanks: MinRanks = MaxRanks = p generates p ranks only
// (the CUDA harness draws a case per world size this way).
func TestGenCaseKeepsRanks(t *testing.T) {
	g := proptest.GenCase(proptest.GenOptions{MinRanks: 5, MaxRanks: 5})
	gp := gopter.DefaultGenParameters().CloneWithSeed(1)
	for range 200 {
		if c := g(gp).Result.(proptest.Case); c.Spec.Ranks != 5 {
			t.Fatalf("%v: want 5 ranks", c)
		}
	}
}

// TestGenCaseProductsNearOne: product inputs are mostly near ±1, so that a
// product of 17 of them is neither Inf nor 0 (which would hide a wrong
// reduction order or a missing term).
func TestGenCaseProductsNearOne(t *testing.T) {
	g := proptest.GenCase(proptest.GenOptions{Ops: []ops.Op{ops.AllReduce}, DTypes: []hw.DType{hw.F64}, Redops: []hw.ReduceOp{hw.Prod}})
	gp := gopter.DefaultGenParameters().CloneWithSeed(1)
	near, all := 0, 0
	for range 200 {
		c := g(gp).Result.(proptest.Case)
		for _, b := range c.Inputs {
			vals, _ := hw.ToFloat64s(hw.F64, b)
			for _, v := range vals {
				all++
				if math.Abs(math.Abs(v)-1) <= 0.125 {
					near++
				}
			}
		}
	}
	if near*2 < all {
		t.Errorf("%d of %d product inputs within 1/8 of ±1", near, all)
	}
}

// TestSpecialsHaveSignallingNaN: Specials promises a signalling NaN (all
// exponent bits, quiet bit clear, mantissa not 0) for every float dtype: a
// copy that quiets NaNs would otherwise go unseen.
func TestSpecialsHaveSignallingNaN(t *testing.T) {
	for dt, f := range map[hw.DType]struct{ ebits, mbits uint }{hw.F16: {5, 10}, hw.BF16: {8, 7}, hw.F32: {8, 23}, hw.F64: {11, 52}} {
		b, size, found := proptest.Specials(dt), dt.Size(), false
		for i := 0; i+size <= len(b); i += size {
			var v uint64
			for j := range size {
				v |= uint64(b[i+j]) << (8 * j)
			}
			exp, mant := v>>f.mbits&(1<<f.ebits-1), v&(1<<f.mbits-1)
			found = found || exp == 1<<f.ebits-1 && mant != 0 && mant>>(f.mbits-1) == 0
		}
		if !found {
			t.Errorf("%s: no signalling NaN in Specials", dt)
		}
	}
}

// TestGenElementsShrinksToZeros: GenElements shrinks toward zeros, as it
// says; a shrinker that never shrinks leaves failures unreduced.
func TestGenElementsShrinksToZeros(t *testing.T) {
	r := proptest.GenElements(hw.F32, 4)(gopter.DefaultGenParameters().CloneWithSeed(1))
	v, ok := r.Shrinker([]byte{1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})()
	if !ok || !reflect.DeepEqual(v, make([]byte, 16)) {
		t.Errorf("first shrink %v, %v; want 16 zero bytes", v, ok)
	}
}

// TestShrinkSteps: GenSpec's shrinker offers root 0 at the same size and
// stays within MinRanks and Redops; ShrinkCase offers a shorter count from
// the end of each block; GenCount offers one less.
func TestShrinkSteps(t *testing.T) {
	gp := gopter.DefaultGenParameters().CloneWithSeed(1)
	o := proptest.GenOptions{MinRanks: 3, Redops: []hw.ReduceOp{hw.Max}}
	r := proptest.GenSpec(o)(gp)
	var root0 bool
	for _, s := range []ops.Spec{
		{Op: ops.Broadcast, Algo: "tree", Ranks: 4, Count: 6, Root: 3, DType: hw.U8},
		{Op: ops.AllReduce, Algo: "ring", Ranks: 6, Count: 6, DType: hw.U8, Redop: hw.Max},
	} {
		shrink := r.Shrinker(s)
		for v, ok := shrink(); ok; v, ok = shrink() {
			sp := v.(ops.Spec)
			root0 = root0 || sp.Op == ops.Broadcast && sp.Ranks == 4 && sp.Root == 0
			if sp.Ranks < 3 || sp.Op.Reduces() && sp.Redop != hw.Max {
				t.Fatalf("GenSpec(%+v) shrank %v to %v", o, s, sp)
			}
		}
	}
	if !root0 {
		t.Error("GenSpec never shrank a broadcast's root to 0 at the same size")
	}
	c := proptest.Case{Spec: ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 1, Count: 4, DType: hw.U8, Redop: hw.Sum},
		Topo: "switch:1", Inputs: [][]byte{{1, 2, 3, 4}}}
	var tail bool
	shrink := proptest.ShrinkCase(c)
	for v, ok := shrink(); ok; v, ok = shrink() {
		d := v.(proptest.Case)
		tail = tail || d.Spec.Count == 3 && reflect.DeepEqual(d.Inputs, [][]byte{{2, 3, 4}})
	}
	if !tail {
		t.Error("ShrinkCase never offered count 3 from the end of the block")
	}
	var less bool
	shrinkN := proptest.GenCount(ops.AllReduce, 2, 100)(gp).Shrinker(10)
	for v, ok := shrinkN(); ok; v, ok = shrinkN() {
		less = less || v.(int) == 9
	}
	if !less {
		t.Error("GenCount never shrank 10 to 9")
	}
}
