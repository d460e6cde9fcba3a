package ops

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestNCCLCollNetPlansCheck: nccl-collnet-direct's all-reduces,
// reduce-scatters and all-gathers, and nccl-collnet-chain's all-reduces,
// check as nccl-nvls plans do (every output exactly right, in place and
// out, no lanes or ranks racing, the all-reduce held and the others
// streamed): on nodes of one GPU, whose network switch's group is every
// rank, and the all-reduces on nodes of several GPUs too, which reduce
// within the node before the network's switch.
func TestNCCLCollNetPlansCheck(t *testing.T) {
	shapes := [][2]int{{1, 0}, {1, 1}, {2, 1}, {3, 1}, {5, 1}, {8, 1}}
	checkNVLSPlans(t, "nccl-collnet-direct", nvlsOps, shapes)
	checkNVLSPlans(t, "nccl-collnet-chain", []Op{AllReduce}, shapes)
	checkNVLSPlans(t, "nccl-collnet-direct", nvlsOps, [][2]int{{4, 0}, {4, 2}, {6, 3}})
	checkNVLSPlans(t, "nccl-collnet-direct", []Op{AllReduce}, [][2]int{{12, 4}})
	checkNVLSPlans(t, "nccl-collnet-chain", []Op{AllReduce}, [][2]int{{4, 0}, {6, 2}, {8, 4}})
	if first, n := (Spec{Algo: "nccl-collnet-direct", Ranks: 6, NodeRanks: 1}).Group(4); first != 0 || n != 6 {
		t.Errorf("CollNet's group of rank 4 of 6: %d ranks from %d, want all 6", n, first)
	}
	for _, tc := range []struct {
		spec                 Spec
		rank                 int
		first, stride, ranks int
	}{
		{Spec{Ranks: 12, NodeRanks: 4}, 6, 2, 4, 3},
		{Spec{Ranks: 12, NodeRanks: 1}, 6, 0, 1, 12},
		{Spec{Ranks: 12}, 6, 6, 1, 1},
		{Spec{Ranks: 12, NodeRanks: 12}, 6, 6, 1, 1},
	} {
		if first, stride, n := tc.spec.NetGroup(tc.rank); first != tc.first || stride != tc.stride || n != tc.ranks {
			t.Errorf("%v: rank %d's network group %d ranks from %d by %d, want %d from %d by %d",
				tc.spec, tc.rank, n, first, stride, tc.ranks, tc.first, tc.stride)
		}
	}
}

// TestNCCLCollNetMeetsThroughTheNetwork: on 2 nodes of 2 GPUs, CollNet
// direct's heads of part i (ranks i and 2+i) all-reduce through the
// network's switch, with the same tag, on the channel's first network
// lane; chain's head of channel c is local rank c mod 2.
func TestNCCLCollNetMeetsThroughTheNetwork(t *testing.T) {
	nets := func(p *Plan, r int) (out []Step) {
		for _, s := range p.Steps[r] {
			if s.Kind == StepNetAllReduce {
				out = append(out, s)
			}
		}
		return out
	}
	spec := Spec{Op: AllReduce, Algo: "nccl-collnet-direct", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum, NodeRanks: 2}
	p, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		got := nets(p, r)
		// One channel, one pass: rank r is the head of part r%2, 4 elements.
		if len(got) != 1 || got[0].Dst != ref(Out, r%2*4, 4) || got[0].Src != got[0].Dst || got[0].Tag != 2 || got[0].Lane != 1 {
			t.Errorf("direct, rank %d: net steps %v, want part %d on lane 1 with tag 2", r, got, r%2)
		}
	}
	spec.Algo, spec.Channels = "nccl-collnet-chain", 2
	if p, err = Compile(spec); err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		// Channel c (elements 4c…) ends at local rank c: its first
		// network lane and tag.
		got := nets(p, r)
		c := r % 2
		if len(got) != 1 || got[0].Dst != ref(Out, 4*c, 4) || got[0].Tag != uint32(netTags*c+2) || got[0].Lane != netTags*c+1 {
			t.Errorf("chain, rank %d: net steps %v, want channel %d's", r, got, c)
		}
	}
}

// TestNCCLCollNetRefusals: CollNet's plans need whole nodes: Compile
// refuses others naming why; like NVLS it needs a reducing switch
// (NeedsSwitch), so AlgorithmsFor leaves it out, and chain has only the
// all-reduce.
func TestNCCLCollNetRefusals(t *testing.T) {
	for _, tc := range []struct {
		algo string
		op   Op
	}{{"nccl-collnet-direct", AllReduce}, {"nccl-collnet-direct", AllGather}, {"nccl-collnet-direct", ReduceScatter},
		{"nccl-collnet-chain", AllReduce}, {"nccl-nvls", AllReduce}} {
		_, err := Compile(Spec{Op: tc.op, Algo: tc.algo, Ranks: 6, Count: 16, DType: hw.F32, Redop: hw.Sum, NodeRanks: 4})
		if err == nil || !strings.Contains(err.Error(), "do not make nodes of 4") {
			t.Errorf("%s %s on 6 ranks in nodes of 4: %v, want a refusal naming the nodes", tc.algo, tc.op, err)
		}
	}
	for _, algo := range []string{"nccl-collnet-direct", "nccl-collnet-chain"} {
		if !NeedsSwitch(algo) || !IsNCCL(algo) || AlgorithmDoc(algo) == "" {
			t.Errorf("%s: needs a switch %v, nccl %v", algo, NeedsSwitch(algo), IsNCCL(algo))
		}
		for _, op := range Ops() {
			if slices.Contains(AlgorithmsFor(op), algo) {
				t.Errorf("AlgorithmsFor(%s) lists %s", op, algo)
			}
		}
	}
	if _, err := Compile(Spec{Op: AllGather, Algo: "nccl-collnet-chain", Ranks: 4, Count: 16, DType: hw.F32, NodeRanks: 1}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("chain all-gather: %v, want ErrUnsupported", err)
	}
}

// TestCostMeetsNetAllReduces: a network all-reduce starts when its last
// member reaches it and costs the model's NetAllReduceCost. CollNet
// direct on 2 nodes of 2 GPUs, 8 floats: each rank sends 16 bytes to its
// node's other GPU (1 µs + 16 ns), adds what it receives, all-reduces its
// 16 bytes through the switch (5 µs + 2 × 1 µs + 16 × 4 ns) and sends the
// result back (1 µs + 16 ns).
func TestCostMeetsNetAllReduces(t *testing.T) {
	plan, err := Compile(Spec{Op: AllReduce, Algo: "nccl-collnet-direct", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum, NodeRanks: 2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Cost(plan, switchModel{})
	if want := 1.016e-6 + 7.064e-6 + 1.016e-6; err != nil || !near(got, want) {
		t.Fatalf("cost %v (%v), want %v", got, err, want)
	}
	if _, err := Cost(plan, flatModel{}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "SwitchCoster") {
		t.Errorf("cost without a switch: %v, want ErrUnsupported naming SwitchCoster", err)
	}
}

// TestCheckCatchesBrokenNetAllReduces: Check refuses a CollNet plan whose
// network all-reduce reads the wrong part, whose members do not all
// reach their all-reduce (a deadlock, naming the members that wait), or
// whose members' all-reduces differ in length.
func TestCheckCatchesBrokenNetAllReduces(t *testing.T) {
	spec := Spec{Op: AllReduce, Algo: "nccl-collnet-direct", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum, NodeRanks: 2}
	netStep := func(p *Plan, r int) *Step {
		for i := range p.Steps[r] {
			if p.Steps[r][i].Kind == StepNetAllReduce {
				return &p.Steps[r][i]
			}
		}
		t.Fatalf("rank %d has no net-allreduce", r)
		return nil
	}
	for _, tc := range []struct {
		name, want string
		breakIt    func(p *Plan)
	}{
		{"an offset", "out[", func(p *Plan) { netStep(p, 3).Src.Off-- }},
		{"a tag", "deadlock", func(p *Plan) { netStep(p, 1).Tag = 7 }},
		{"a length", "does not match its kind and lengths", func(p *Plan) { s := netStep(p, 2); s.Src.Len, s.Dst.Len = 3, 3 }},
	} {
		p, err := Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(p); err != nil {
			t.Fatalf("unbroken: %v", err)
		}
		tc.breakIt(p)
		if err := Check(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s broken: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

// TestCheckCatchesBrokenNetGathers: Check refuses CollNet's all-gather or
// reduce-scatter on nodes of two GPUs when one rank's step through the
// network's switch reads or writes a piece off by one element.
func TestCheckCatchesBrokenNetGathers(t *testing.T) {
	for _, op := range []Op{AllGather, ReduceScatter} {
		p, err := Compile(Spec{Op: op, Algo: "nccl-collnet-direct", Ranks: 4, Count: 6, DType: hw.F32, Redop: hw.Sum, NodeRanks: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(p); err != nil {
			t.Fatalf("%s unbroken: %v", op, err)
		}
		for i := range p.Steps[1] {
			if s := &p.Steps[1][i]; s.Kind.IsNet() {
				if op == AllGather {
					s.Src.Off++
				} else {
					s.Dst.Off--
				}
				break
			}
		}
		if err := Check(p); err == nil {
			t.Errorf("%s with a piece off by one: Check passed", op)
		}
	}
}

// TestNCCLCollNetRefusesPlansPastTheLimitAtOnce: CollNet direct's
// all-gather and reduce-scatter count their steps before making any, so a
// plan past MaxPlanSteps is refused naming more than the limit (making
// steps would stop at it), and a count past int64 (2^58 elements in
// passes of one) stays past it rather than wrapping.
func TestNCCLCollNetRefusesPlansPastTheLimitAtOnce(t *testing.T) {
	for _, op := range []Op{AllGather, ReduceScatter} {
		for _, count := range []int{1 << 21, 1 << 58} {
			_, err := Compile(Spec{Op: op, Algo: "nccl-collnet-direct", Ranks: 16, NodeRanks: 8, Count: count, Chunk: 1, DType: hw.U8, Redop: hw.Sum})
			var steps int
			if err != nil {
				if i := strings.Index(err.Error(), "at least "); i >= 0 {
					fmt.Sscan(err.Error()[i+len("at least "):], &steps)
				}
			}
			if !errors.Is(err, ErrTooLarge) || steps <= MaxPlanSteps {
				t.Errorf("%v of %d elements in passes of one: %v, want ErrTooLarge naming more than %d steps", op, count, err, MaxPlanSteps)
			}
		}
	}
}
