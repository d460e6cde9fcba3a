package ops_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
)

// FuzzCompileAnySpec: any Spec, however wrong (ops, types and
// reductions out of range, negative and huge counts, ranks and chunks,
// algorithm names that are near misses), compiles or is refused with a
// one-line error; what compiles is what was asked for (Spec.Made), passes
// ops.Check, and, small, runs on the simulator or is refused there
// (a switch plan on a switch that does not reduce); nothing panics.
func FuzzCompileAnySpec(f *testing.F) {
	algos := ops.Algorithms()
	for i := range algos {
		f.Add(uint8(1), uint8(i), 4, 16, 0, uint8(1), uint8(1), 0, 0, 0, 0, 0)
		f.Add(uint8(2), uint8(i), 8, 64, 3, uint8(2), uint8(2), 2, 4, 4, 8, 1)
	}
	f.Add(uint8(3), uint8(0), -1, -5, -1, uint8(0), uint8(0), -1, -1, -1, -1, -1)
	f.Add(uint8(5), uint8(3), 1<<18, 1<<40, 1<<30, uint8(9), uint8(9), 1<<20, 1<<30, 1<<19, 1<<31, 1<<10)
	f.Fuzz(func(t *testing.T, op, algo uint8, ranks, count, root int, dtype, redop uint8, channels, chunk, nodeRanks, netChunk, treeChannels int) {
		name := algos[int(algo)%len(algos)]
		if algo >= 250 {
			name = []string{"auto", "", "RING", "ring ", "nccl-", "native"}[int(algo)%6]
		}
		s := ops.Spec{Op: ops.Op(op % 16), Algo: name, Ranks: ranks, Count: count, Root: root, DType: hw.DType(dtype % 12),
			Redop: hw.ReduceOp(redop % 10), Channels: channels, Chunk: chunk, NodeRanks: nodeRanks, NetChunk: netChunk,
			TreeChannels: treeChannels}
		plan, err := ops.Compile(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%v: an error of several lines: %v", s, err)
			}
			return
		}
		if err := s.Made(plan); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		if s.Ranks < 1 || s.Ranks > 16 || s.Count < 0 || s.Count > 4096 || s.Algo == ops.Native {
			return
		}
		if err := ops.Check(plan); err != nil {
			t.Fatalf("%v compiled, but: %v", s, err)
		}
		c, _ := simtest.World(t, fmt.Sprintf("switch:%d", s.Ranks), sim.Config{TimingOnly: true})
		in, out := simtest.Buffers(t, c, plan, false)
		secs, err := simexec.NewExecutor(c).Run(plan, in, out)
		switch {
		case err != nil && !strings.Contains(err.Error(), "switch"):
			t.Fatalf("%v on the simulator: %v", s, err)
		case err == nil && !(secs >= 0):
			t.Fatalf("%v on the simulator: %v s", s, secs)
		}
	})
}
