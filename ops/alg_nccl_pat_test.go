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

// TestNCCLPATPlansCheck: nccl-pat all-gathers and reduce-scatters check
// (every output exactly right, in place and out, lanes never racing) for
// any ranks, powers of two or not, one GPU per node or no nodes given,
// counts that split unevenly, any channels and any chunk, with sum and
// avg; their lanes are the channels; and they stream lane by lane into
// the held plan's operations.
func TestNCCLPATPlansCheck(t *testing.T) {
	if got := AlgorithmsOps("nccl-pat"); !reflect.DeepEqual(got, []Op{ReduceScatter, AllGather}) && !reflect.DeepEqual(got, []Op{AllGather, ReduceScatter}) {
		t.Fatalf("nccl-pat runs %v, want all-gather and reduce-scatter", got)
	}
	for _, op := range []Op{AllGather, ReduceScatter} {
		for _, shape := range [][2]int{{1, 0}, {2, 0}, {3, 1}, {5, 0}, {6, 1}, {8, 0}, {13, 1}} {
			p, nodeRanks := shape[0], shape[1]
			for _, count := range inShort([]int{0, 1, 7, 64}) {
				for _, ch := range inShort([]int{0, 1, 3}) {
					for _, chunkLen := range inShort([]int{0, 1, 3, 16}) {
						for _, redop := range []hw.ReduceOp{hw.Sum, hw.Avg} {
							spec := Spec{Op: op, Algo: "nccl-pat", Ranks: p, Count: count, DType: hw.F32, Redop: redop,
								Channels: ch, Chunk: chunkLen, NodeRanks: nodeRanks}
							checkPATPlan(t, spec)
						}
					}
				}
			}
		}
	}
}

func checkPATPlan(t *testing.T, spec Spec) {
	t.Helper()
	name := fmt.Sprint(spec)
	held, err := Compile(spec)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := Check(held); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if want := max(1, min(spec.Channels, spec.Count)); spec.Count > 0 && held.Lanes != want {
		t.Fatalf("%s: %d lanes, want %d", name, held.Lanes, want)
	}
	streamed, err := CompileStreamed(spec)
	if err != nil {
		t.Fatalf("%s streamed: %v", name, err)
	}
	for r := range spec.Ranks {
		if !reflect.DeepEqual(allOperations(t, streamed, r, true), allOperations(t, held, r, false)) {
			t.Fatalf("%s rank %d: streamed lanes differ", name, r)
		}
	}
}

// TestNCCLPATLogSteps: PAT's all-gather exchanges with log2(ranks) peers,
// farthest first, sending each step twice the blocks of the step before
// (one, two, four … blocks out of eight ranks' seven), and its
// reduce-scatter runs the same steps backwards, nearest first: what
// makes it NCCL's choice for small sizes at scale, where a ring takes
// ranks−1 steps.
func TestNCCLPATLogSteps(t *testing.T) {
	const p = 8
	for _, op := range []Op{AllGather, ReduceScatter} {
		plan, err := Compile(Spec{Op: op, Algo: "nccl-pat", Ranks: p, Count: 4, DType: hw.F32, Redop: hw.Sum, NodeRanks: 1})
		if err != nil {
			t.Fatal(err)
		}
		var peers []int
		perPeer := map[int]int{}
		for _, s := range plan.Steps[0] {
			if s.Kind != StepSend {
				continue
			}
			if perPeer[s.Peer]++; perPeer[s.Peer] == 1 {
				peers = append(peers, s.Peer)
			}
		}
		wantPeers, wantBlocks := []int{4, 2, 1}, []int{1, 2, 4}
		if op == ReduceScatter {
			wantPeers, wantBlocks = []int{7, 6, 4}, []int{4, 2, 1}
		}
		if !slices.Equal(peers, wantPeers) {
			t.Fatalf("%s: rank 0 sends to %v, want %v", op, peers, wantPeers)
		}
		for i, q := range wantPeers {
			if perPeer[q] != wantBlocks[i] {
				t.Errorf("%s: rank 0 sends %d blocks to rank %d, want %d", op, perPeer[q], q, wantBlocks[i])
			}
		}
	}
}

// TestNCCLPATRefusesNodesOfSeveralGPUs: PAT with more than one GPU per
// node is refused, naming why.
func TestNCCLPATRefusesNodesOfSeveralGPUs(t *testing.T) {
	for _, op := range []Op{AllGather, ReduceScatter} {
		_, err := Compile(Spec{Op: op, Algo: "nccl-pat", Ranks: 8, Count: 16, DType: hw.F32, Redop: hw.Sum, NodeRanks: 4})
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "one GPU per node") {
			t.Errorf("%s on nodes of 4: %v, want ErrUnsupported naming one GPU per node", op, err)
		}
	}
	if _, err := Compile(Spec{Op: AllReduce, Algo: "nccl-pat", Ranks: 4, Count: 16, DType: hw.F32, Redop: hw.Sum}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("all-reduce: %v, want ErrUnsupported", err)
	}
}
