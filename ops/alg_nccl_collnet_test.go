package ops

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestNCCLCollNetPlansCheck: nccl-collnet-direct's all-reduces,
// reduce-scatters and all-gathers, and nccl-collnet-chain's all-reduces,
// check as nccl-nvls plans do (every output exactly right, in place and
// out, no lanes or ranks racing, the all-reduce held and the others
// streamed), on nodes of one GPU, whose network switch's group is every
// rank.
func TestNCCLCollNetPlansCheck(t *testing.T) {
	shapes := [][2]int{{1, 0}, {1, 1}, {2, 1}, {3, 1}, {5, 1}, {8, 1}}
	checkNVLSPlans(t, "nccl-collnet-direct", nvlsOps, shapes)
	checkNVLSPlans(t, "nccl-collnet-chain", []Op{AllReduce}, shapes)
	if first, n := (Spec{Algo: "nccl-collnet-direct", Ranks: 6, NodeRanks: 1}).Group(4); first != 0 || n != 6 {
		t.Errorf("CollNet's group of rank 4 of 6: %d ranks from %d, want all 6", n, first)
	}
}

// TestNCCLCollNetRefusals: CollNet needs nodes of one GPU (NodeRanks 1):
// on one node, or in nodes of several GPUs, Compile refuses it with
// ErrUnsupported naming why; like NVLS it needs a reducing switch
// (NeedsSwitch), so AlgorithmsFor leaves it out, and chain has only the
// all-reduce.
func TestNCCLCollNetRefusals(t *testing.T) {
	for _, algo := range []string{"nccl-collnet-direct", "nccl-collnet-chain"} {
		for _, nodeRanks := range []int{0, 4} {
			_, err := Compile(Spec{Op: AllReduce, Algo: algo, Ranks: 8, Count: 16, DType: hw.F32, Redop: hw.Sum, NodeRanks: nodeRanks})
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "one GPU per node") {
				t.Errorf("%s, node ranks %d: %v, want ErrUnsupported naming one GPU per node", algo, nodeRanks, err)
			}
		}
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
