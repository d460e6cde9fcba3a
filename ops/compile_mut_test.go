package ops_test

// Tests from a mutation run over Spec.Made and a barrier's dtype.

import (
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// TestMadeRefusesAPlanOfAnotherCollective: a planner's plan is of the
// call's collective, its op, ranks, count and dtype, each; a barrier's
// zero dtype is u8's; no plan at all is refused.
func TestMadeRefusesAPlanOfAnotherCollective(t *testing.T) {
	spec := ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum}
	compile := func(s ops.Spec) *ops.Plan {
		t.Helper()
		p, err := ops.Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if err := spec.Made(compile(spec)); err != nil {
		t.Errorf("its own plan: %v", err)
	}
	for name, s := range map[string]ops.Spec{
		"op":    {Op: ops.ReduceScatter, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum},
		"ranks": {Op: ops.AllReduce, Algo: "ring", Ranks: 3, Count: 8, DType: hw.F32, Redop: hw.Sum},
		"count": {Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 16, DType: hw.F32, Redop: hw.Sum},
		"dtype": {Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.I32, Redop: hw.Sum},
	} {
		if err := spec.Made(compile(s)); err == nil || !strings.Contains(err.Error(), "the planner gave a plan for") {
			t.Errorf("a plan of another %s: %v", name, err)
		}
	}
	if err := spec.Made(nil); err == nil || !strings.Contains(err.Error(), "no plan") {
		t.Errorf("no plan: %v", err)
	}
	barrier := ops.Spec{Op: ops.Barrier, Algo: "rd", Ranks: 4}
	if err := barrier.Made(compile(barrier)); err != nil {
		t.Errorf("a barrier of no dtype, its own plan: %v", err)
	}
}

// TestABarriersDTypeIsU8OnlyWhenItNamesNone: a barrier that names no
// dtype is planned as u8 and one that names f32 as f32; an all-reduce
// must name one.
func TestABarriersDTypeIsU8OnlyWhenItNamesNone(t *testing.T) {
	for dt, want := range map[hw.DType]hw.DType{0: hw.U8, hw.F32: hw.F32} {
		p, err := ops.Compile(ops.Spec{Op: ops.Barrier, Algo: "rd", Ranks: 4, DType: dt})
		if err != nil || p.DType != want {
			t.Errorf("barrier of dtype %v: %v, planned as %v, want %v", dt, err, p.DType, want)
		}
	}
	if err := (ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 8, Redop: hw.Sum}).Validate(); err == nil {
		t.Error("an all-reduce of no dtype is valid")
	}
}

// TestNegativeLayoutsAreRefused: every count of how a plan runs (channels,
// chunk, node ranks, net chunk, tree channels, where NCCL's copies start)
// is refused below 0, named.
func TestNegativeLayoutsAreRefused(t *testing.T) {
	for name, set := range map[string]func(*ops.Spec){
		"channels":      func(s *ops.Spec) { s.Channels = -1 },
		"chunk":         func(s *ops.Spec) { s.Chunk = -1 },
		"node ranks":    func(s *ops.Spec) { s.NodeRanks = -1 },
		"net chunk":     func(s *ops.Spec) { s.NetChunk = -1 },
		"tree channels": func(s *ops.Spec) { s.TreeChannels = -1 },
		"tree copies":   func(s *ops.Spec) { s.TreeCopies = [3]int{0, -2, 0} },
	} {
		s := ops.Spec{Op: ops.AllReduce, Algo: "nccl-tree", Ranks: 8, NodeRanks: 4, Count: 64, DType: hw.F32, Redop: hw.Sum}
		set(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "must be >= 0") {
			t.Errorf("%s below 0: %v", name, err)
		}
	}
	// Past NCCL's 64 channels, the tree layout is no layout either.
	for name, set := range map[string]func(*ops.Spec){
		"tree channels": func(s *ops.Spec) { s.TreeChannels = 99 },
		"tree copies":   func(s *ops.Spec) { s.TreeCopies = [3]int{math.MaxInt, 0, 0} },
	} {
		s := ops.Spec{Op: ops.AllReduce, Algo: "nccl-tree", Ranks: 8, NodeRanks: 4, Count: 64, DType: hw.F32, Redop: hw.Sum}
		set(&s)
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "must be at most 64") {
			t.Errorf("%s past 64: %v", name, err)
		}
	}
}
