package verify

import (
	"errors"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// TestReproducerSaysWhatBenchCannotSet: a case's command line is bench's
// flags for its collective; channels, chunk and nodes, which bench takes
// from the fabric, are named beside it rather than silently dropped.
func TestReproducerSaysWhatBenchCannotSet(t *testing.T) {
	c := Case{Spec: ops.Spec{Op: ops.AllReduce, Algo: "nccl-ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Avg}, Topo: "switch:4"}
	want := "commsim bench --topo switch:4 --op allreduce --algo nccl-ring --dtype f32 -b 32 -e 32 --check --redop avg"
	if got := c.Reproducer(); got != want {
		t.Errorf("Reproducer() = %q, want %q", got, want)
	}
	c.Spec.Channels, c.Spec.Chunk, c.Spec.NodeRanks = 3, 16, 2
	if got := c.Reproducer(); !strings.HasPrefix(got, want+" ") || !strings.Contains(got, "channels=3 chunk=16 node=2") {
		t.Errorf("Reproducer() = %q, want %q and the case's channels, chunk and nodes", got, want)
	}
	// A plan made by hand has no command: bench would refuse its name.
	c.Spec.Algo = "star"
	if got := c.Reproducer(); strings.Contains(got, "commsim bench") || !strings.Contains(got, `algorithm "star" is not one of commsim's`) {
		t.Errorf("Reproducer() of a hand-made plan = %q", got)
	}
}

// TestSpecForSizeReadsSizesAsNCCLTests: the size of an all-gather,
// reduce-scatter, gather or all-to-all is every rank's share together;
// of the others, a rank's buffer (whole elements of it).
func TestSpecForSizeReadsSizesAsNCCLTests(t *testing.T) {
	for _, op := range []ops.Op{ops.AllGather, ops.ReduceScatter, ops.Gather, ops.AllToAll} {
		s, moved := SpecForSize(ops.Spec{Op: op, Ranks: 4, DType: hw.F32}, 1600)
		if s.Count != 100 || moved != 1600 {
			t.Errorf("%v: count %d, %d bytes; want 100, 1600", op, s.Count, moved)
		}
	}
	for _, op := range []ops.Op{ops.AllReduce, ops.Broadcast, ops.Reduce, ops.SendRecv} {
		s, moved := SpecForSize(ops.Spec{Op: op, Ranks: 4, DType: hw.F32}, 1602)
		if s.Count != 400 || moved != 1600 {
			t.Errorf("%v: count %d, %d bytes; want 400, 1600", op, s.Count, moved)
		}
	}
}

// A spec with no ranks or no type sizes to nothing rather than dividing
// by zero; PatternInputs refuses what Validate refuses and inputs past
// MaxPatternBytes, before making any.
func TestBadSpecsAreRefusedBeforeAnythingIsMade(t *testing.T) {
	if s, moved := SpecForSize(ops.Spec{}, 100); s.Count != 0 || moved != 0 {
		t.Errorf("SpecForSize of the zero spec: count %d, %d bytes; want none", s.Count, moved)
	}
	for name, s := range map[string]ops.Spec{
		"zero spec":      {},
		"negative ranks": {Op: ops.AllReduce, Ranks: -1, Count: 8, DType: hw.F32, Redop: hw.Sum},
		"past the bound": {Op: ops.AllReduce, Ranks: 8, Count: 1 << 40, DType: hw.F32, Redop: hw.Sum},
	} {
		if in, err := PatternInputs(s); err == nil || in != nil {
			t.Errorf("%s: %d inputs, err %v; want an error", name, len(in), err)
		}
	}
	if _, err := PatternInputs(ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: 1 << 40, DType: hw.F32, Redop: hw.Sum}); !errors.Is(err, ops.ErrTooLarge) || !strings.Contains(err.Error(), "over the limit of 17179869184") {
		t.Errorf("past the bound: %v, want ErrTooLarge naming it", err)
	}
	if err := CheckReference(Case{}, nil); !errors.Is(err, ErrWrong) {
		t.Errorf("the zero Case passed its check: %v", err)
	}
}
