package ops

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestNCCLRingPlansCheck: nccl-ring plans check (every output exactly
// right, lanes never racing) for any ranks, on one node or several,
// counts that split unevenly, any number of channels and any chunk, for
// every op it has, and stream lane by lane into the held plan's
// operations.
func TestNCCLRingPlansCheck(t *testing.T) { checkNCCLPlans(t, "nccl-ring") }

// TestNCCLTreePlansCheck: nccl-tree plans check as nccl-ring's do.
func TestNCCLTreePlansCheck(t *testing.T) { checkNCCLPlans(t, "nccl-tree") }

// TestNCCLP2PPlansCheck: nccl-p2p plans check as nccl-ring's do.
func TestNCCLP2PPlansCheck(t *testing.T) { checkNCCLPlans(t, "nccl-p2p") }

// inShort is all, or with -short (CI's race-detector run, where these
// single-goroutine grids find no race and take minutes) its ends only.
func inShort[T any](all []T) []T {
	if !testing.Short() || len(all) < 3 {
		return all
	}
	return []T{all[0], all[len(all)-1]}
}

func checkNCCLPlans(t *testing.T, algo string) {
	for _, op := range AlgorithmsOps(algo) {
		for _, shape := range [][2]int{{1, 0}, {2, 0}, {3, 0}, {5, 0}, {8, 0}, {6, 3}, {8, 2}} {
			p, nodeRanks := shape[0], shape[1]
			for _, count := range inShort([]int{0, 1, 7, 64}) {
				for _, ch := range inShort([]int{0, 1, 3, 5}) {
					for _, chunkLen := range inShort([]int{0, 1, 3, 16}) {
						spec := Spec{Op: op, Algo: algo, Ranks: p, Count: count, Root: p/2 + 1, DType: hw.F32, Redop: hw.Avg, Channels: ch, Chunk: chunkLen, NodeRanks: nodeRanks}
						spec.Root %= p
						name := fmt.Sprint(spec)
						held, err := Compile(spec)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						if err := Check(held); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						checkBuffers(t, name, held)
						want := max(1, min(ch, count))
						switch {
						case algo == "nccl-tree" && held.Lanes <= treeLanes*want && held.Lanes > treeLanes*(want-1):
							want = held.Lanes // up, and down to each child: the last channel's trailing lanes may be empty
						case algo == "nccl-p2p" && (op == AllToAll || op == Gather):
							want = max(1, p-1) // one per peer
						case algo == "nccl-p2p":
							want = min(2, p) // send, receive
						}
						if count > 0 && held.Lanes != want {
							t.Fatalf("%s: %d lanes, want %d", name, held.Lanes, want)
						}
						streamed, err := CompileStreamed(spec)
						if algo == "nccl-tree" || algo == "nccl-p2p" {
							if !errors.Is(err, ErrUnsupported) {
								t.Fatalf("%s streamed: %v, want ErrUnsupported (its lanes wait for each other)", name, err)
							}
							continue
						}
						if err != nil {
							t.Fatal(err)
						}
						for r := range p {
							if !reflect.DeepEqual(allOperations(t, streamed, r, true), allOperations(t, held, r, false)) {
								t.Fatalf("%s rank %d: streamed lanes differ", name, r)
							}
						}
					}
				}
			}
		}
	}
}

// TestChannelRingsKeepToRails: across nodes, channel c's ring visits
// every rank once, a node at a time, and every crossing between nodes
// leaves and enters on one local index; channels spread over the
// indices.
func TestChannelRingsKeepToRails(t *testing.T) {
	const nodes, g = 4, 8
	spec := Spec{Ranks: nodes * g, NodeRanks: g}
	rails := map[int]bool{}
	for c := range 2 * g {
		ring := channelRing(spec, c)
		seen := map[int]bool{}
		for v := range spec.Ranks {
			r, next := ring.rank(v, spec.Ranks), ring.rank(v+1, spec.Ranks)
			if seen[r] || ring.position(r) != v {
				t.Fatalf("channel %d: position %d holds rank %d twice or out of place", c, v, r)
			}
			seen[r] = true
			if v/g != (v+1)/g%nodes && (v+1)%g == 0 {
				if r/g == next/g || r%g != next%g {
					t.Errorf("channel %d crosses from rank %d to %d: not one rail between nodes", c, r, next)
				}
				rails[r%g] = true
			} else if r/g != next/g {
				t.Errorf("channel %d leaves node %d mid-node, from rank %d to %d", c, r/g, r, next)
			}
		}
	}
	if len(rails) != g {
		t.Errorf("channels cross on rails %v, want all %d", rails, g)
	}
}

// AlgorithmsOps lists the ops algorithm name implements.
func AlgorithmsOps(name string) []Op {
	var out []Op
	for _, op := range Ops() {
		for _, a := range AlgorithmsFor(op) {
			if a == name {
				out = append(out, op)
			}
		}
	}
	return out
}

// TestChainTreesSpanTheRanks: each channel's tree reaches every rank once
// from its root, a child's parent is the rank that lists it, links
// between nodes join heads on the channel's rail, and the two trees of
// the double binary tree take turns: a node whose head is interior in one
// is a leaf in the other, where there are enough nodes.
func TestChainTreesSpanTheRanks(t *testing.T) {
	for _, shape := range [][2]int{{8, 0}, {16, 8}, {24, 8}, {64, 8}, {12, 3}} {
		p, g := shape[0], shape[1]
		spec := Spec{Ranks: p, NodeRanks: g}
		if g == 0 {
			g = p
		}
		interior := [2]map[int]bool{{}, {}}
		for c := range 4 {
			tree := ncclChainTree(spec, c)
			roots, seen := 0, map[int]bool{}
			var walk func(r int)
			walk = func(r int) {
				if seen[r] {
					t.Fatalf("%v channel %d: rank %d reached twice", shape, c, r)
				}
				seen[r] = true
				for _, k := range tree.kidsOf(r) {
					if tree.parentOf(k) != r {
						t.Fatalf("%v channel %d: %d lists %d, whose parent is %d", shape, c, r, k, tree.parentOf(k))
					}
					if k/g != r/g {
						if k%g != c%g || r%g != c%g {
							t.Errorf("%v channel %d: %d -> %d crosses nodes off rail %d", shape, c, r, k, c%g)
						}
						interior[c%2][r/g] = true
					}
					walk(k)
				}
			}
			for r := range p {
				if tree.parentOf(r) < 0 {
					roots++
					walk(r)
				}
			}
			if roots != 1 || len(seen) != p {
				t.Errorf("%v channel %d: %d roots reach %d of %d ranks", shape, c, roots, len(seen), p)
			}
		}
		if nodes := p / g; nodes >= 4 {
			for node := range nodes {
				if interior[0][node] && interior[1][node] {
					t.Errorf("%v: node %d is interior in both trees", shape, node)
				}
			}
		}
	}
}

// checkBuffers checks plan again under buffers of two shapes, one slot of
// one f32 and four of four: a lane's send to a peer waits while the messages
// it sent there and the peer has not received leave no room for it (see
// Wire.Slots), which the simulator holds NCCL's plans to.
func checkBuffers(t *testing.T, name string, plan *Plan) {
	t.Helper()
	saved := plan.Wire
	defer func() { plan.Wire = saved }()
	for _, b := range []struct {
		slots int
		bytes int64
	}{{1, 4}, {4, 16}} {
		plan.Wire = &Wire{Efficiency: [NumPathClasses]float64{1, 1, 1}, Slots: b.slots, SlotBytes: b.bytes}
		if err := Check(plan); err != nil {
			t.Fatalf("%s, %d slots of %d bytes: %v", name, b.slots, b.bytes, err)
		}
	}
}

// TestNCCLPlansKeepTheirShape pins what the NCCL plans' docs promise of
// their steps' sizes and lanes, which results do not show (a plan that
// breaks them still computes the right outputs, only at another pace).
func TestNCCLPlansKeepTheirShape(t *testing.T) {
	// A ring moves Chunk elements a step: 48 elements over 4 ranks in
	// passes of 4 × 3.
	ring := mustPlan(t, Spec{Op: AllReduce, Algo: "nccl-ring", Ranks: 4, Count: 48, Channels: 1, Chunk: 3, DType: hw.F32, Redop: hw.Sum})
	for r, steps := range ring.Steps {
		for _, s := range steps {
			if s.Kind == StepSend && s.Src.Len != 3 {
				t.Fatalf("nccl-ring: rank %d sends %d elements in a step (%v), want Chunk's 3", r, s.Src.Len, s)
			}
		}
	}
	// All-to-all: lane k−1 sends to r+k and receives from r−k, so every
	// exchange runs on a lane of its own.
	const p = 5
	a2a := mustPlan(t, Spec{Op: AllToAll, Algo: "nccl-p2p", Ranks: p, Count: 2, DType: hw.F32})
	for r, steps := range a2a.Steps {
		for _, s := range steps {
			k := mod(s.Peer-r, p)
			if s.Kind == StepRecv {
				k = mod(r-s.Peer, p)
			}
			if (s.Kind == StepSend || s.Kind == StepRecv) && s.Lane != k-1 {
				t.Errorf("nccl-p2p alltoall: rank %d's %v is on lane %d, want %d", r, s, s.Lane, k-1)
			}
		}
	}
	// CollNet's all-gather keeps netDepth passes in flight through the
	// network: the first netDepth wait for nothing, each in a slot of
	// its own.
	ag := mustPlan(t, Spec{Op: AllGather, Algo: "nccl-collnet-direct", Ranks: 4, NodeRanks: 2, Count: 16, Channels: 1, Chunk: 1, DType: hw.F32})
	slots := map[int]bool{}
	for _, s := range ag.Steps[0] {
		if s.Kind != StepNetAllGather || len(slots) == netDepth {
			continue
		}
		if len(s.After) > 0 || slots[s.Dst.Off] {
			t.Fatalf("nccl-collnet-direct allgather: net step %v waits for %v or reuses a slot among the first %d (%v)", s, s.After, netDepth, slots)
		}
		slots[s.Dst.Off] = true
	}
	if len(slots) != netDepth {
		t.Fatalf("nccl-collnet-direct allgather: %d passes through the network, want at least %d", len(slots), netDepth)
	}
}

// A chain crossing to another node sends there NetChunk at a time: the
// rank before the crossing receives a group's pieces, then sends them
// all; within a node, and where NetChunk is not above Chunk, each piece
// goes on as it comes. Broadcast and reduce alike, checked as plans.
func TestChainGathersStepsAcrossNodes(t *testing.T) {
	kinds := func(plan *Plan, r int) string {
		var b strings.Builder
		for _, s := range plan.Steps[r] {
			switch s.Kind {
			case StepSend:
				fmt.Fprintf(&b, "s%d ", s.Src.Len)
			case StepRecv:
				fmt.Fprintf(&b, "r%d ", s.Dst.Len)
			}
		}
		return strings.TrimSpace(b.String())
	}
	const gathered, relayed = "r2 r2 s2 s2 r2 r2 s2 s2 r2 s2", "r2 s2 r2 s2 r2 s2 r2 s2 r2 s2"
	// One channel on 4 ranks in 2 nodes goes round 0 1 3 2: a broadcast
	// from 0 crosses from 1 to 3 and goes on to 2 within the node; a
	// reduce to 0 comes from 2 to 3, crosses from 3 to 1 and goes on to 0.
	for _, tc := range []struct {
		op             Op
		netChunk       int
		crossing, next int // the rank that sends across, and one that sends within a node
		want           string
	}{
		{Broadcast, 4, 1, 3, gathered},
		{Broadcast, 3, 1, 3, gathered},                        // taken to 4, the nearest multiple of the chunk (half up)
		{Broadcast, 5, 1, 3, "r2 r2 r2 s2 s2 s2 r2 r2 s2 s2"}, // 6: groups of three pieces
		{Broadcast, 2, 1, 3, relayed},
		{Broadcast, 0, 1, 3, relayed},
		{Reduce, 4, 3, 1, gathered},
		{Reduce, 0, 3, 1, relayed},
	} {
		spec := Spec{Op: tc.op, Algo: "nccl-ring", Ranks: 4, Count: 10, DType: hw.F32, Redop: hw.Sum, Channels: 1, Chunk: 2, NodeRanks: 2, NetChunk: tc.netChunk}
		plan := mustPlan(t, spec)
		if err := Check(plan); err != nil {
			t.Fatalf("%v: %v", spec, err)
		}
		if got := kinds(plan, tc.crossing); got != tc.want {
			t.Errorf("%v: rank %d sends and receives %q, want %q", spec, tc.crossing, got, tc.want)
		}
		if got := kinds(plan, tc.next); got != relayed {
			t.Errorf("%v: rank %d, within its node, sends and receives %q, want %q", spec, tc.next, got, relayed)
		}
	}
}

// NCCL connects its search's channels to the first of its two trees and
// their duplicates to the second (connect.cc): with TreeChannels n,
// channels 0..n-1 run tree 0 and n..2n-1 tree 1, and copies beyond keep
// their tree; without it the trees alternate. Where the channels are
// whole sets of 2n and every GPU heads as many (n a multiple of the
// node's GPUs), each head's two come together (2h on tree 0, 2h+1 on tree
// 1). Two nodes of 4 GPUs: tree 0's root is node 0, tree 1's node 1; a
// channel's head is its root's local index.
func TestTreeChannelsSplitTheTrees(t *testing.T) {
	for _, tc := range []struct {
		channels, treeChannels int
		copies                 [3]int
		roots                  []int // per channel
	}{
		{6, 0, [3]int{}, []int{0, 5, 2, 7, 0, 5}},
		{6, 2, [3]int{}, []int{0, 1, 4, 5, 0, 1}},
		{5, 3, [3]int{}, []int{0, 1, 2, 4, 5}},
		{6, 3, [3]int{}, []int{0, 1, 2, 4, 5, 6}},
		{8, 2, [3]int{}, []int{0, 1, 4, 5, 0, 1, 4, 5}},
		{8, 4, [3]int{}, []int{0, 4, 1, 5, 2, 6, 3, 7}},
		{16, 4, [3]int{}, []int{0, 4, 1, 5, 2, 6, 3, 7, 0, 4, 1, 5, 2, 6, 3, 7}},
		{6, 4, [3]int{}, []int{0, 1, 2, 3, 4, 5}},
		// NCCL's copies of channels as they stood: CollNet's half again
		// from 4, then the doubling from 6 (c−6, not c mod 4); 5 channels
		// kept by NCCL_MAX_NCHANNELS, copied from 5 to 8.
		{12, 2, [3]int{4, 6, 0}, []int{0, 1, 4, 5, 0, 1, 0, 1, 4, 5, 0, 1}},
		{8, 4, [3]int{0, 0, 5}, []int{0, 1, 2, 3, 4, 0, 1, 2}},
		{16, 4, [3]int{0, 8, 0}, []int{0, 4, 1, 5, 2, 6, 3, 7, 0, 4, 1, 5, 2, 6, 3, 7}}, // whole sets, interleaved
	} {
		spec := Spec{Op: AllReduce, Algo: "nccl-tree", Ranks: 8, Count: 48, DType: hw.F32, Redop: hw.Sum, Channels: tc.channels, NodeRanks: 4, TreeChannels: tc.treeChannels, TreeCopies: tc.copies}
		var roots []int
		for c := range spec.Channels {
			tree := ncclChainTree(spec, c)
			for r := range spec.Ranks {
				if tree.parentOf(r) < 0 {
					roots = append(roots, r)
				}
			}
		}
		if !reflect.DeepEqual(roots, tc.roots) {
			t.Errorf("%d channels, %d tree channels, copies from %v: channels' roots %v, want %v", tc.channels, tc.treeChannels, tc.copies, roots, tc.roots)
		}
		if err := Check(mustPlan(t, spec)); err != nil {
			t.Errorf("%v: %v", spec, err)
		}
	}
}
