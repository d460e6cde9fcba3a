package ops

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

var nvlsOps = []Op{AllReduce, ReduceScatter, AllGather}

// TestNCCLNVLSPlansCheck: nccl-nvls plans check (every output exactly
// right, in place and out, no lanes or ranks racing) for any ranks of one
// node, counts that split unevenly, any number of channels and any chunk,
// for every op it has, with sum and avg; their lanes are the channels
// (two per channel for the all-reduce, which multicasts on the second;
// four for NVLSTree's, one a stage);
// and the reduce-scatter and all-gather stream lane by lane into the held
// plan's operations, where the all-reduce, whose lanes wait for each
// other, is always held.
func TestNCCLNVLSPlansCheck(t *testing.T) {
	checkNVLSPlans(t, "nccl-nvls", nvlsOps, [][2]int{{1, 0}, {2, 0}, {3, 3}, {5, 0}, {8, 8}})
}

// TestNCCLNVLSTreePlansCheck: nccl-nvlstree all-reduces check as
// nccl-nvls plans do, on one node or several (of one rank or more, in
// numbers that make whole binary trees or not), and stream.
func TestNCCLNVLSTreePlansCheck(t *testing.T) {
	checkNVLSPlans(t, "nccl-nvlstree", []Op{AllReduce}, [][2]int{{1, 0}, {4, 0}, {4, 1}, {6, 3}, {8, 2}, {10, 2}, {12, 4}, {16, 8}})
}

func checkNVLSPlans(t *testing.T, algo string, opList []Op, shapes [][2]int) {
	for _, op := range opList {
		for _, shape := range shapes {
			p, nodeRanks := shape[0], shape[1]
			for _, count := range inShort([]int{0, 1, 7, 64}) {
				for _, ch := range inShort([]int{0, 1, 3, 5}) {
					for _, chunkLen := range inShort([]int{0, 1, 3, 16}) {
						for _, redop := range []hw.ReduceOp{hw.Sum, hw.Avg} {
							spec := Spec{Op: op, Algo: algo, Ranks: p, Count: count, DType: hw.F32, Redop: redop,
								Channels: ch, Chunk: chunkLen, NodeRanks: nodeRanks}
							checkNVLSPlan(t, spec)
						}
					}
				}
			}
		}
	}
}

func checkNVLSPlan(t *testing.T, spec Spec) {
	t.Helper()
	name := fmt.Sprint(spec)
	held, err := Compile(spec)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := Check(held); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	checkBuffers(t, name, held)
	_, group := spec.Group(0)
	if want := group > 1 && spec.Count > 0; held.UsesSwitch() != want {
		t.Fatalf("%s: UsesSwitch %v, want %v", name, held.UsesSwitch(), want)
	}
	want := max(1, min(spec.Channels, spec.Count))
	switch {
	case spec.Algo == "nccl-nvlstree" && spec.Ranks > 1:
		// Four stages a channel; nodes of one rank have no multicast,
		// the last channel's last lane.
		want *= 4
		if spec.NodeRanks == 1 {
			want--
		}
	case spec.Ranks > 1 && (NetworkSwitch(spec.Algo) && (spec.Op == AllReduce || spec.NodeRanks != 1) ||
		spec.Algo == "nccl-nvls" && acrossNodes(spec)):
		// Through the network: netTags lanes a channel, of which the
		// last channel may leave its last network lanes, or its last
		// lane, empty.
		if spec.Count > 0 && (held.Lanes > netTags*want || held.Lanes <= netTags*(want-1)+1) {
			t.Fatalf("%s: %d lanes, want %d channels' of %d", name, held.Lanes, want, netTags)
		}
		want = held.Lanes
	case NetworkSwitch(spec.Algo) && spec.Op != AllReduce:
		// Nodes of one GPU: NVLS's reduce-scatter and all-gather, a
		// lane a channel.
	case heldSpec(spec) && spec.Ranks > 1:
		want *= 2
	}
	if spec.Count > 0 && held.Lanes != want {
		t.Fatalf("%s: %d lanes, want %d", name, held.Lanes, want)
	}
	streamed, err := CompileStreamed(spec)
	if heldSpec(spec) {
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("%s streamed: %v, want ErrUnsupported (its lanes wait for each other)", name, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s streamed: %v", name, err)
	}
	if streamed.UsesSwitch() != held.UsesSwitch() {
		t.Fatalf("%s: streamed UsesSwitch %v, held %v", name, streamed.UsesSwitch(), held.UsesSwitch())
	}
	for r := range spec.Ranks {
		if !reflect.DeepEqual(allOperations(t, streamed, r, true), allOperations(t, held, r, false)) {
			t.Fatalf("%s rank %d: streamed lanes differ", name, r)
		}
	}
}

// TestNCCLNVLSAcrossNodes: NVLS's collectives go across nodes through
// the network's switch (NCCL's NVLS over CollNet): each node's NVSwitch
// and the network's switch between them, and check, held.
func TestNCCLNVLSAcrossNodes(t *testing.T) {
	checkNVLSPlans(t, "nccl-nvls", nvlsOps, [][2]int{{4, 2}, {6, 3}, {12, 4}})
}

// TestSwitchAlgorithmsAreListedApart: nccl-nvls and nccl-nvlstree are
// algorithms Compile knows and NCCL's tuner may pick (IsNCCL), with a
// one-line doc, but AlgorithmsFor, which suites read to run every
// algorithm everywhere, leaves them out: they need a reducing switch.
func TestSwitchAlgorithmsAreListedApart(t *testing.T) {
	for _, a := range []string{"nccl-nvls", "nccl-nvlstree"} {
		if !slices.Contains(Algorithms(), a) || !IsNCCL(a) || !NeedsSwitch(a) || AlgorithmDoc(a) == "" {
			t.Fatalf("%s: listed %v, nccl %v, needs a switch %v", a, slices.Contains(Algorithms(), a), IsNCCL(a), NeedsSwitch(a))
		}
		for _, op := range Ops() {
			if slices.Contains(AlgorithmsFor(op), a) {
				t.Errorf("AlgorithmsFor(%s) lists %s", op, a)
			}
		}
	}
	if NeedsSwitch("nccl-ring") {
		t.Error("nccl-ring needs a switch")
	}
}

// nvlsPlan is a held nccl-nvls plan of op on p ranks with one channel.
func nvlsPlan(t *testing.T, op Op, p, count int) *Plan {
	t.Helper()
	return mustPlan(t, Spec{Op: op, Algo: "nccl-nvls", Ranks: p, Count: count, DType: hw.F32, Redop: hw.Sum})
}

// stepOf is the first step of kind k on rank r.
func stepOf(p *Plan, r int, k StepKind) *Step {
	for i := range p.Steps[r] {
		if p.Steps[r][i].Kind == k {
			return &p.Steps[r][i]
		}
	}
	return nil
}

// TestCheckCatchesBrokenNVLSPlans mutates good NVLS plans the ways bugs
// do, and expects Check to refuse each, for the right reason: an output
// that is not the sum, lanes that race, and the steps of two ranks that
// touch one element (the conservative rule of Check for switch steps),
// in place and out.
func TestCheckCatchesBrokenNVLSPlans(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     Op
		mutate func(p *Plan)
		want   [2]string // out of place, in place
	}{
		{"multicast one element off", AllReduce, func(p *Plan) { stepOf(p, 1, StepMulticast).Dst.Off++ },
			[2]string{"race", "race"}},
		// Rank 2 reduces an element of rank 1's part: out of place the
		// sum misses one, in place rank 1 later writes what rank 2 read.
		{"reduce from one element off", AllReduce, func(p *Plan) { stepOf(p, 2, StepSwitchReduce).Src.Off-- },
			[2]string{"want every rank's element once", "race"}},
		{"multicast before its reduce", AllReduce, func(p *Plan) { stepOf(p, 0, StepMulticast).After = nil },
			[2]string{"may still write", "may still write"}},
		{"reduce the wrong block", ReduceScatter, func(p *Plan) { stepOf(p, 1, StepSwitchReduce).Src.Off -= 4 },
			[2]string{"want every rank's element once", "race"}},
		{"multicast one element short", AllGather, func(p *Plan) {
			s := stepOf(p, 3, StepMulticast)
			s.Src.Len--
			s.Dst.Len--
		}, [2]string{"never written", "never written"}},
		{"multicast into the wrong block", AllGather, func(p *Plan) { stepOf(p, 3, StepMulticast).Dst.Off = 8 },
			[2]string{"race", "race"}},
		{"a rank writes where another multicasts", AllReduce, func(p *Plan) {
			// Rank 1 overwrites, on its own, the part rank 0 multicasts
			// into it: nothing orders the two.
			p.Steps[1] = append(p.Steps[1], Step{Kind: StepCopy, Dst: ref(Out, 0, 1), Src: ref(Out, 4, 1)})
		}, [2]string{"race", "race"}},
	} {
		for i, inPlace := range []bool{false, true} {
			plan := nvlsPlan(t, tc.op, 4, 16)
			if err := newSymRun(plan, inPlace).run(); err != nil {
				t.Fatalf("%s: the good plan fails: %v", tc.name, err)
			}
			tc.mutate(plan)
			err := newSymRun(plan, inPlace).run()
			if err == nil || !strings.Contains(err.Error(), tc.want[i]) {
				t.Errorf("%s, in place %v: %v, want an error saying %q", tc.name, inPlace, err, tc.want[i])
			}
		}
	}
}

// TestCheckRefusesRacesOnlyInPlace: a copy of its own input that a rank
// makes into scratch races, in place, with the multicast another rank
// makes into its output, which is then the same memory; out of place the
// two never meet.
func TestCheckRefusesRacesOnlyInPlace(t *testing.T) {
	plan := nvlsPlan(t, AllReduce, 4, 16)
	plan.TmpLen = 16
	plan.Steps[2] = append(plan.Steps[2], Step{Kind: StepCopy, Dst: ref(Tmp, 0, 16), Src: ref(In, 0, 16)})
	if err := newSymRun(plan, false).run(); err != nil {
		t.Fatalf("out of place: %v", err)
	}
	if err := newSymRun(plan, true).run(); err == nil || !strings.Contains(err.Error(), "race") {
		t.Fatalf("in place: %v, want a race between ranks", err)
	}
}

// TestSwitchStepsAreValidated: a switch step that names another rank's
// scratch, a switch-reduce in a plan that does not reduce, or a group that
// does not fit the plan's ranks make a malformed plan.
func TestSwitchStepsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     Op
		mutate func(p *Plan)
		want   string
	}{
		{"scratch on every member", AllReduce, func(p *Plan) {
			p.TmpLen = 16
			stepOf(p, 0, StepMulticast).Dst.Buf = Tmp
		}, "only in or out"},
		{"switch-reduce in an all-gather", AllGather, func(p *Plan) {
			s := stepOf(p, 0, StepMulticast)
			s.Kind, s.Dst = StepSwitchReduce, ref(Out, 0, s.Src.Len)
		}, "switch-reduce in a allgather plan"},
		{"lengths differ", AllGather, func(p *Plan) { stepOf(p, 1, StepMulticast).Dst.Len-- }, "src has"},
		{"nodes that do not fit", AllReduce, func(p *Plan) { p.NodeRanks = 3 }, "group of 3 ranks from 3"},
	} {
		plan := nvlsPlan(t, tc.op, 4, 16)
		tc.mutate(plan)
		for what, err := range map[string]error{"check": Check(plan), "validate": plan.validate()} {
			if !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %s: %v, want ErrBadPlan saying %q", tc.name, what, err, tc.want)
			}
		}
	}
}

// flatModel prices every path alike and has no switch.
type flatModel struct{}

func (flatModel) PathCost(src, dst int) (float64, float64, error) { return 1e-6, 1e-9, nil }
func (flatModel) ReduceCost(int) float64                          { return 0 }

// switchModel is flatModel with a switch: α 2 µs, β 1 ns a byte for a
// reduction and half that for a multicast.
type switchModel struct{ flatModel }

func (switchModel) SwitchCost(rank, first, n int, reduce bool) (float64, float64, error) {
	if reduce {
		return 2e-6, 1e-9, nil
	}
	return 2e-6, 0.5e-9, nil
}

// NetAllReduceCost: α 5 µs plus 1 µs a member, β 4 ns a byte.
func (switchModel) NetAllReduceCost(ranks []int) (float64, float64, error) {
	return 5e-6 + float64(len(ranks))*1e-6, 4e-9, nil
}

// TestCostPricesSwitchSteps: Cost prices a switch step with the model's
// SwitchCost, and a Wire's NVLink latency, efficiency and rate in its
// place, a run of them on a lane paying the latency once; a model
// without SwitchCost cannot price it, and says so.
func TestCostPricesSwitchSteps(t *testing.T) {
	plan := nvlsPlan(t, AllReduce, 4, 1000) // each rank's part: 250 f32, 1000 bytes
	if _, err := Cost(plan, flatModel{}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "SwitchCoster") {
		t.Fatalf("cost without SwitchCost: %v, want ErrUnsupported naming SwitchCoster", err)
	}
	got, err := Cost(plan, switchModel{})
	if want := 2e-6 + 1000e-9 + 2e-6 + 500e-9; err != nil || !near(got, want) {
		t.Fatalf("cost %v (%v), want %v", got, err, want)
	}
	plan.Wire = &Wire{Latency: [NumPathClasses]float64{1e-6, 9, 9}, Efficiency: [NumPathClasses]float64{0.5, 1, 1}, Rate: 0.5e9}
	plan.Launch = 3e-6
	got, err = Cost(plan, switchModel{})
	// The reduction at 1 ns/B over an efficiency of 0.5, the multicast
	// at the rate's 2 ns/B.
	if want := 3e-6 + 1e-6 + 2000e-9 + 1e-6 + 2000e-9; err != nil || !near(got, want) {
		t.Fatalf("cost with a wire %v (%v), want %v", got, err, want)
	}
	// An all-gather of 3 passes a rank: its multicasts follow each other
	// on one lane and pay the wire's latency once, as the simulator runs
	// them (each 1000 bytes at the rate's 2 ns/B).
	ag := mustPlan(t, Spec{Op: AllGather, Algo: "nccl-nvls", Ranks: 4, Count: 750, DType: hw.F32, Chunk: 250})
	ag.Wire, ag.Launch = plan.Wire, plan.Launch
	got, err = Cost(ag, switchModel{})
	if want := 3e-6 + 3*2000e-9 + 1e-6; err != nil || !near(got, want) {
		t.Fatalf("all-gather with a wire %v (%v), want %v", got, err, want)
	}
}

func near(a, b float64) bool { return a == b || (a-b)/b < 1e-12 && (b-a)/b < 1e-12 }

// TestUsesSwitch: Compile records whether a plan has switch steps, held
// or streamed; a plan made by hand is read through.
func TestUsesSwitch(t *testing.T) {
	ring := mustPlan(t, Spec{Op: AllGather, Algo: "nccl-ring", Ranks: 4, Count: 8, DType: hw.F32})
	streamed, err := CompileStreamed(Spec{Op: AllGather, Algo: "nccl-nvls", Ranks: 4, Count: 8, DType: hw.F32})
	if err != nil {
		t.Fatal(err)
	}
	hand := &Plan{Spec: Spec{Op: AllGather, Ranks: 2, Count: 1, DType: hw.F32}, InLen: 1, OutLen: 2, Lanes: 1,
		Steps: [][]Step{{}, {{Kind: StepMulticast, Src: ref(In, 0, 1), Dst: ref(Out, 1, 1)}}}}
	for _, tc := range []struct {
		name string
		plan *Plan
		want bool
	}{{"nccl-ring", ring, false}, {"nccl-nvls held", nvlsPlan(t, AllGather, 4, 8), true}, {"nccl-nvls streamed", streamed, true}, {"by hand", hand, true}} {
		if got := tc.plan.UsesSwitch(); got != tc.want {
			t.Errorf("%s: UsesSwitch %v, want %v", tc.name, got, tc.want)
		}
	}
	if g, n := (Spec{Ranks: 16, NodeRanks: 8}).Group(11); g != 8 || n != 8 {
		t.Errorf("group of rank 11 in nodes of 8: %d..%d", g, g+n-1)
	}
	if g, n := (Spec{Ranks: 6}).Group(5); g != 0 || n != 6 {
		t.Errorf("group of rank 5 on one node of 6: %d..%d", g, g+n-1)
	}
}
