package ops

import (
	"errors"
	"slices"
	"testing"

	"github.com/commsim/commsim/hw"
)

func foldSpec(algo string, ranks, nodeRanks, channels, count int) Spec {
	return Spec{Op: AllReduce, Algo: algo, Ranks: ranks, NodeRanks: nodeRanks, Count: count, DType: hw.F32, Redop: hw.Sum, Channels: channels, Chunk: 4}
}

// FoldChannels keeps the first channels of a plan whose channels repeat
// (NCCL's trees: channel c's head is local GPU c mod 8, its tree c mod
// 2), as a valid plan of their lanes alone, and says how many each
// stands for.
func TestFoldChannelsKeepsTheFirstCopy(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		k    int
	}{
		{foldSpec("nccl-tree", 16, 8, 16, 1<<12), 2}, // c and c+8
		{foldSpec("nccl-tree", 4, 2, 8, 1<<12), 4},   // heads and trees c mod 2: c, c+2, c+4, c+6
	} {
		plan, err := Compile(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		folded, k, ok := plan.FoldChannels()
		if !ok || k != tc.k {
			t.Fatalf("%v: folds %d channels into one (%v), want %d", tc.spec, k, ok, tc.k)
		}
		if err := folded.validate(); err != nil {
			t.Errorf("%v: folded plan: %v", tc.spec, err)
		}
		if folded.Channels*k != tc.spec.Channels || folded.NumSteps()*k != plan.NumSteps() {
			t.Errorf("%v: %d channels of %d steps, from %d of %d", tc.spec, folded.Channels, folded.NumSteps(), plan.Channels, plan.NumSteps())
		}
		for r := range plan.Ranks {
			if slices.ContainsFunc(folded.Steps[r], func(s Step) bool { return s.Lane >= folded.Lanes }) {
				t.Errorf("%v: rank %d keeps a lane past %d", tc.spec, r, folded.Lanes)
			}
		}
	}
}

// Channels that are not copies of each other are not folded: four
// channels on nodes of eight have four heads; a count that splits
// unevenly gives channel 0 one element more than channel 8; a streamed
// plan has no steps to compare; and a copy that waits on other steps, or
// sends elsewhere, or a kept send that no kept lane receives, is not one;
// nor is a malformed plan, which is refused without a panic.
func TestFoldChannelsRefusesWhatIsNotACopy(t *testing.T) {
	for _, spec := range []Spec{
		foldSpec("nccl-tree", 16, 8, 4, 1<<12),
		foldSpec("nccl-tree", 16, 8, 16, 1<<12+1),
		foldSpec("nccl-tree", 16, 8, 1, 1<<12),
		foldSpec("nccl-tree", 16, 8, 3, 1<<12),
	} {
		plan, err := Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, k, ok := plan.FoldChannels(); ok {
			t.Errorf("%v: folds %d channels into one", spec, k)
		}
	}
	// An algorithm that runs on lanes of its own keeps the spec's
	// channels, more than its lanes: nothing to fold (and nothing made
	// per channel, which grew with the count before it was bounded).
	if plan, err := Compile(Spec{Op: AllReduce, Algo: "dbtree", Ranks: 2, Count: 3, DType: hw.F32, Redop: hw.Sum, Channels: MaxChannels}); err != nil {
		t.Fatal(err)
	} else if _, _, ok := plan.FoldChannels(); ok || plan.Lanes >= plan.Channels {
		t.Errorf("dbtree of %d channels on %d lanes folds", plan.Channels, plan.Lanes)
	}
	if plan, err := CompileStreamed(Spec{Op: AllGather, Algo: "nccl-ring", Ranks: 16, NodeRanks: 8, Count: 1 << 12, DType: hw.F32, Channels: 16}); err != nil {
		t.Fatal(err)
	} else if _, _, ok := plan.FoldChannels(); ok {
		t.Errorf("a streamed plan folds")
	}
	base, err := Compile(foldSpec("nccl-tree", 16, 8, 16, 1<<12))
	if err != nil {
		t.Fatal(err)
	}
	shift := base.Lanes / 2
	// edit changes the first step of rank 3 that pick chooses.
	edit := func(pick func(Step) bool, change func(*Step)) *Plan {
		p := *base
		p.Steps = slices.Clone(base.Steps)
		p.Steps[3] = slices.Clone(base.Steps[3])
		for i, s := range p.Steps[3] {
			if pick(s) {
				s.After = slices.Clone(s.After)
				change(&s)
				p.Steps[3][i] = s
				return &p
			}
		}
		t.Fatal("no step to edit")
		return nil
	}
	for name, p := range map[string]*Plan{
		"a copy waits on nothing":     edit(func(s Step) bool { return s.Lane >= shift && len(s.After) > 0 }, func(s *Step) { s.After = nil }),
		"a copy sends elsewhere":      edit(func(s Step) bool { return s.Lane >= shift && s.Kind == StepSend }, func(s *Step) { s.Peer = (s.Peer + 1) % 16 }),
		"a kept send goes unreceived": edit(func(s Step) bool { return s.Lane < shift && s.Kind == StepSend }, func(s *Step) { s.Tag += 1000 }),
		"a wait on no earlier step":   edit(func(s Step) bool { return s.Lane < shift && len(s.After) > 0 }, func(s *Step) { s.After[0] = 1 << 20 }),
		"a lane past the plan's":      edit(func(s Step) bool { return s.Lane >= shift }, func(s *Step) { s.Lane = 1 << 10 }),
	} {
		if _, k, ok := p.FoldChannels(); ok {
			t.Errorf("%s: folds %d channels into one", name, k)
		}
	}
	if _, _, ok := base.FoldChannels(); !ok {
		t.Error("the plan edited above does not fold")
	}
}

// NCCL's tree channels turn into each other when every node's GPUs
// rotate by 2: channel c's head is GPU c mod 8 and its tree c mod 2.
// With as many channels as GPUs a node, the first two stand for all,
// where a Wire fuses the reductions into the transfers. On an even
// number of nodes tree 1 is tree 0 mirrored: rotating by 1 and
// mirroring the nodes turns channel c into c+1, and the first stands
// for all.
func TestFoldRotationKeepsTreeChannels(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); TestFoldChannelsRefusesWhatIsNotACopy takes the same concurrent paths under it")
	}
	plan, err := Compile(foldSpec("nccl-tree", 32, 8, 8, 1<<12))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := plan.FoldRotation(2, false); ok {
		t.Error("a plan without a Wire folds: its ranks' reductions would be shared less")
	}
	plan.Wire = &Wire{Efficiency: [NumPathClasses]float64{1, 1, 1}}
	for _, tc := range []struct {
		s        int
		mirrored bool
		order    int
		perm     [3]int // of ranks 0, 7 and 8
	}{
		{2, false, 4, [3]int{2, 1, 10}},
		{1, true, 8, [3]int{25, 24, 17}},
	} {
		kept, perm, order, ok := plan.FoldRotation(tc.s, tc.mirrored)
		if !ok || order != tc.order || kept.Channels != tc.s || [3]int{perm[0], perm[7], perm[8]} != tc.perm {
			t.Fatalf("by %d, mirrored %v: fold %v, order %d, kept %v, perm %v", tc.s, tc.mirrored, ok, order, kept, perm)
		}
		if err := kept.validate(); err != nil {
			t.Fatal(err)
		}
		if kept.NumSteps()*tc.order != plan.NumSteps() {
			t.Errorf("by %d, mirrored %v: %d steps kept of %d", tc.s, tc.mirrored, kept.NumSteps(), plan.NumSteps())
		}
	}
	for _, tc := range []struct {
		s        int
		mirrored bool
	}{{1, false}, {3, false}, {0, false}, {8, false}, {2, true}, {4, true}} { // mirrored by 2 or 4: tree c+2 is tree c, not its mirror
		if _, _, _, ok := plan.FoldRotation(tc.s, tc.mirrored); ok {
			t.Errorf("by %d, mirrored %v: folds", tc.s, tc.mirrored)
		}
	}
	for _, spec := range []Spec{
		foldSpec("nccl-tree", 32, 8, 16, 1<<12),  // duplicates: fold those first
		foldSpec("nccl-tree", 32, 8, 4, 1<<12),   // fewer channels than GPUs
		foldSpec("nccl-tree", 32, 8, 8, 1<<12+3), // channels of unequal lengths
		foldSpec("nccl-tree", 8, 0, 8, 1<<12),    // one node
		foldSpec("nccl-tree", 24, 8, 8, 1<<12),   // three nodes: tree 1 is tree 0 shifted, not mirrored
	} {
		p, err := Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		p.Wire = plan.Wire
		for _, mirrored := range []bool{false, true} {
			if _, _, _, ok := p.FoldRotation(1, mirrored); ok {
				t.Errorf("%v folds by 1 (mirrored %v)", spec, mirrored)
			}
		}
		if spec.Ranks == 24 {
			if _, _, _, ok := p.FoldRotation(2, false); !ok {
				t.Errorf("%v does not fold by 2", spec)
			}
		} else if _, _, _, ok := p.FoldRotation(2, false); ok {
			t.Errorf("%v folds by 2", spec)
		}
	}
}

// NCCL's split trees (Spec.TreeChannels) give GPU h channel 2h on tree 0
// and 2h+1 on tree 1: rotating every node's GPUs by one maps channel c to
// c+2, and on an even number of nodes mirroring the nodes maps 2h to
// 2h+1, so the first channel stands for all 16 (the rotation alone keeps
// two). Odd nodes (tree 1 is tree 0 shifted), the trees alternated by
// channel, duplicates, no Wire, a step changed on one rank, or tree 1's
// steps changed on every rank, fold no such way.
func TestFoldRotationAndMirrorKeepsOneTreeChannel(t *testing.T) {
	split := func(ranks, channels, count int) *Plan { return splitTrees(t, ranks, channels, 8, count) }
	plan := split(32, 16, 1<<12)
	kept, perms, order, ok := plan.FoldRotationAndMirror()
	if !ok || order != 16 || kept.Channels != 1 || len(perms) != 2 {
		t.Fatalf("fold %v, order %d, kept %v, %d renamings", ok, order, kept, len(perms))
	}
	if got := [4]int{perms[0][0], perms[0][7], perms[1][0], perms[1][15]}; got != [4]int{1, 0, 24, 23} {
		t.Errorf("rank 0 and 7 rotated to %d and %d, rank 0 and 15 mirrored to %d and %d; want 1, 0, 24, 23", got[0], got[1], got[2], got[3])
	}
	if err := kept.validate(); err != nil {
		t.Fatal(err)
	}
	if kept.NumSteps()*order != plan.NumSteps() {
		t.Errorf("%d steps kept of %d", kept.NumSteps(), plan.NumSteps())
	}
	if kept, _, order, ok := plan.FoldRotation(1, false); !ok || order != 8 || kept.Channels != 2 {
		t.Errorf("rotated alone: fold %v, order %d, kept %v; want 2 channels of order 8", ok, order, kept)
	}
	alternated, err := Compile(foldSpec("nccl-tree", 32, 8, 16, 1<<12))
	if err != nil {
		t.Fatal(err)
	}
	alternated.Wire = plan.Wire
	bare := *plan
	bare.Wire = nil
	changed := split(32, 16, 1<<12)
	changed.Steps[5][3].Src.Len++
	changed.Steps[5][3].Dst.Len++
	// Tree 1's channels changed alike on every rank: they still rotate
	// into each other, but are no longer tree 0's mirror.
	unmirrored := split(32, 16, 1<<12)
	changeChannels(unmirrored, func(c int) bool { return c%2 == 1 })
	if _, _, _, ok := unmirrored.FoldRotation(1, false); !ok {
		t.Error("tree 1 changed on every rank: the rotation alone does not fold")
	}
	for name, p := range map[string]*Plan{
		"three nodes":     split(24, 16, 1<<12),
		"alternated":      alternated,
		"duplicates":      split(32, 32, 1<<12),
		"no wire":         &bare,
		"a step changed":  changed,
		"tree 1 changed":  unmirrored,
		"unequal lengths": split(32, 16, 1<<12+3),
	} {
		if _, _, _, ok := p.FoldRotationAndMirror(); ok {
			t.Errorf("%s: folds", name)
		}
	}
	if _, _, _, ok := split(24, 16, 1<<12).FoldRotation(1, false); !ok {
		t.Error("three nodes: the rotation alone does not fold")
	}
}

// Where fewer channels than a node's GPUs run each of NCCL's split trees
// (4 of 8 here), no rotation of the GPUs maps them, but on an even number
// of nodes tree 1 is tree 0 mirrored: mirroring the nodes maps channel c
// onto c+4, and the first 4 stand for all. Odd nodes, no Wire, or tree
// 1's steps changed on every rank fold no such way.
func TestFoldMirrorKeepsOneTree(t *testing.T) {
	split := func(ranks int) *Plan { return splitTrees(t, ranks, 8, 4, 1<<12) }
	plan := split(32)
	kept, perm, order, ok := plan.FoldMirror()
	if !ok || order != 2 || kept.Channels != 4 || perm[0] != 24 || perm[9] != 17 {
		t.Fatalf("fold %v, order %d, kept %v, rank 0 and 9 to %d and %d", ok, order, kept, perm[0], perm[9])
	}
	if err := kept.validate(); err != nil {
		t.Fatal(err)
	}
	if 2*kept.NumSteps() != plan.NumSteps() {
		t.Errorf("%d steps kept of %d", kept.NumSteps(), plan.NumSteps())
	}
	for s := 1; s < 8; s++ {
		if _, _, _, ok := plan.FoldRotation(s, false); ok {
			t.Errorf("folds by a rotation by %d", s)
		}
	}
	bare := split(32)
	bare.Wire = nil
	unmirrored := split(32)
	changeChannels(unmirrored, func(c int) bool { return c >= 4 })
	for name, p := range map[string]*Plan{"three nodes": split(24), "no wire": bare, "tree 1 changed": unmirrored} {
		if _, _, _, ok := p.FoldMirror(); ok {
			t.Errorf("%s: folds", name)
		}
	}
}

// splitTrees compiles an all-reduce of NCCL's trees split by channel (n
// search channels on each, Spec.TreeChannels) on nodes of 8 GPUs, with
// a Wire, which the folds of a rank's channels ask for.
func splitTrees(t *testing.T, ranks, channels, n, count int) *Plan {
	t.Helper()
	spec := foldSpec("nccl-tree", ranks, 8, channels, count)
	spec.TreeChannels = n
	p, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	p.Wire = &Wire{Efficiency: [NumPathClasses]float64{1, 1, 1}}
	return p
}

// changeChannels makes every step of the channels changed picks one
// element longer, alike on every rank.
func changeChannels(p *Plan, changed func(c int) bool) {
	per := p.Lanes / p.Channels
	for _, steps := range p.Steps {
		for i := range steps {
			if changed(steps[i].Lane / per) {
				steps[i].Src.Len++
				steps[i].Dst.Len++
			}
		}
	}
}

// Refine makes the ranks FoldRanks keeps again at the plan's FineChunk,
// every lane of them, step for step as in the plan made whole at that
// chunk, and makes nothing of the ranks it dropped.
func TestRefineMakesTheKeptRanksAtTheFineChunk(t *testing.T) {
	coarseSpec := foldSpec("nccl-nvlstree", 32, 8, 2, 1<<12)
	coarseSpec.Chunk = 64
	coarse, err := Compile(coarseSpec)
	if err != nil {
		t.Fatal(err)
	}
	coarse.FineChunk = 4
	kept, _, _, ok := coarse.FoldRanks(2)
	if !ok {
		t.Fatal("no fold")
	}
	fine, ok := coarse.Refine(kept)
	if !ok {
		t.Fatal("not refined")
	}
	whole, err := Compile(foldSpec("nccl-nvlstree", 32, 8, 2, 1<<12))
	if err != nil {
		t.Fatal(err)
	}
	if fine.Chunk != 4 || fine.Lanes != whole.Lanes {
		t.Errorf("chunk %d, %d lanes; want 4, %d", fine.Chunk, fine.Lanes, whole.Lanes)
	}
	for r := range whole.Ranks {
		want := whole.Steps[r]
		if r%8 >= 2 {
			want = nil
		}
		if !slices.EqualFunc(fine.Steps[r], want, func(a, b Step) bool { return a.String() == b.String() }) {
			t.Fatalf("rank %d: %d steps, want %d", r, len(fine.Steps[r]), len(want))
		}
	}
}

// NCCL's NVLSTree gives local rank i part i of every pass, its switch
// operations and its rail's tree: rotating every node's GPUs by one maps
// each rank's work onto the next's, and the nodes' first GPUs stand for
// all, keeping all their work. Rotating by 2 keeps two a node. A tree's
// channels, whose heads rotate with them, are no such plan; nor is one
// whose parts differ in length, or whose kept rank sends to one dropped.
func TestFoldRanksKeepsTheNodesFirstGPUs(t *testing.T) {
	plan, err := Compile(foldSpec("nccl-nvlstree", 32, 8, 2, 1<<12))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ s, order, kept int }{{1, 8, 4}, {2, 4, 8}, {4, 2, 16}} {
		kept, perm, order, ok := plan.FoldRanks(tc.s)
		if !ok || order != tc.order || perm[0] != tc.s || perm[7] != tc.s-1 || perm[8] != 8+tc.s {
			t.Fatalf("rotation by %d: %v, order %d, perm %v", tc.s, ok, order, perm[:9])
		}
		ranks := 0
		for r, steps := range kept.Steps {
			if len(steps) > 0 {
				ranks++
				if r%8 >= tc.s || len(steps) != len(plan.Steps[r]) {
					t.Errorf("rotation by %d: rank %d keeps %d of its %d steps", tc.s, r, len(steps), len(plan.Steps[r]))
				}
			}
		}
		if ranks != tc.kept || kept.NumSteps()*tc.order != plan.NumSteps() {
			t.Errorf("rotation by %d: %d ranks and %d steps kept, want %d ranks and %d of %d", tc.s, ranks, kept.NumSteps(), tc.kept, plan.NumSteps()/tc.order, plan.NumSteps())
		}
	}
	if _, _, _, ok := plan.FoldRanks(3); ok {
		t.Error("a rotation by 3 on nodes of 8 folds")
	}
	for _, spec := range []Spec{
		foldSpec("nccl-tree", 32, 8, 8, 1<<12),       // channels rotate with the ranks
		foldSpec("nccl-nvlstree", 32, 8, 2, 1<<12+3), // parts of unequal lengths
	} {
		p, err := Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, ok := p.FoldRanks(1); ok {
			t.Errorf("%v folds", spec)
		}
	}
	// A ring through each node's GPUs maps onto itself rotated, but a
	// kept rank's message goes to a dropped one.
	ring := &Plan{Spec: Spec{Op: AllGather, Algo: "ring", Ranks: 16, NodeRanks: 8, Count: 4, DType: hw.F32}, Lanes: 1, Steps: make([][]Step, 16)}
	for r := range 16 {
		next, prev := r/8*8+(r+1)%8, r/8*8+(r+7)%8
		ring.Steps[r] = []Step{{Kind: StepSend, Peer: next, Src: ref(Out, 0, 4)}, {Kind: StepRecv, Peer: prev, Dst: ref(Out, 4, 4)}}
	}
	if _, _, _, ok := ring.FoldRanks(1); ok {
		t.Error("a plan whose kept ranks send to dropped ones folds")
	}
	if _, _, _, ok := ring.FoldRanks(4); ok {
		t.Error("a plan whose kept ranks send to dropped ones folds by 4")
	}
}

// A rank's kept lanes are its first steps when its plan was made lane
// after lane (kept as they are), and are picked out and renumbered when
// lanes interleave; a wait on a dropped step refuses either way.
func TestKeepRankLanesRenumbersInterleavedLanes(t *testing.T) {
	send := func(lane int, after ...int) Step {
		return Step{Kind: StepSend, Peer: 1, Tag: uint32(lane), Lane: lane, Src: ref(In, 0, 1), After: after}
	}
	for _, tc := range []struct {
		name  string
		steps []Step
		want  [][]int // each kept step's After
		ok    bool
	}{
		{"lane after lane", []Step{send(0), send(0, 0), send(1), send(1, 2)}, [][]int{nil, {0}}, true},
		{"interleaved", []Step{send(1), send(0), send(1, 0), send(0, 1)}, [][]int{nil, {0}}, true},
		{"a wait on a dropped step", []Step{send(1), send(0, 0)}, nil, false},
	} {
		sends := map[foldMessage]int{}
		kept, ok := keepRankLanes(tc.steps, 1, 0, sends)
		if ok != tc.ok {
			t.Errorf("%s: ok %v, want %v", tc.name, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if len(kept) != len(tc.want) || sends[foldMessage{0, 1, 0}] != len(tc.want) || len(sends) != 1 {
			t.Errorf("%s: kept %v, counted %v", tc.name, kept, sends)
			continue
		}
		for i, s := range kept {
			if s.Lane != 0 || !slices.Equal(s.After, tc.want[i]) {
				t.Errorf("%s: kept step %d is %v, want lane 0 after %v", tc.name, i, s, tc.want[i])
			}
		}
	}
}

// Refine makes the lanes a fold keeps again at the plan's FineChunk: on
// every rank, step for step, the first lanes of the plan made whole at
// that chunk, a valid plan of those lanes (all of them, where the part is
// the whole plan); and refuses a plan with no
// finer chunk, a kept part that is not every rank's first lanes, and a
// generator whose kept lanes would wait on one not kept.
func TestRefineMakesTheKeptLanesAtTheFineChunk(t *testing.T) {
	coarseSpec := foldSpec("nccl-tree", 16, 8, 16, 1<<12)
	coarseSpec.Chunk = 64
	coarse, err := Compile(coarseSpec)
	if err != nil {
		t.Fatal(err)
	}
	folded, _, ok := coarse.FoldChannels()
	if !ok {
		t.Fatal("no fold")
	}
	if _, ok := coarse.Refine(folded); ok {
		t.Error("refined a plan with no FineChunk")
	}
	coarse.FineChunk = 4
	fine, ok := coarse.Refine(folded)
	if !ok {
		t.Fatal("not refined")
	}
	whole, err := Compile(foldSpec("nccl-tree", 16, 8, 16, 1<<12))
	if err != nil {
		t.Fatal(err)
	}
	if fine.Chunk != 4 || fine.Channels != folded.Channels || fine.Lanes != folded.Lanes {
		t.Errorf("chunk %d, %d channels, %d lanes; want 4, %d, %d", fine.Chunk, fine.Channels, fine.Lanes, folded.Channels, folded.Lanes)
	}
	for r := range whole.Ranks {
		want := slices.DeleteFunc(slices.Clone(whole.Steps[r]), func(s Step) bool { return s.Lane >= folded.Lanes })
		if !slices.EqualFunc(fine.Steps[r], want, func(a, b Step) bool { return a.String() == b.String() }) {
			t.Fatalf("rank %d: %d steps, want the whole plan's %d on lanes below %d", r, len(fine.Steps[r]), len(want), folded.Lanes)
		}
	}
	if err := fine.validate(); err != nil {
		t.Errorf("refined plan: %v", err)
	}
	all, ok := coarse.Refine(coarse)
	if !ok {
		t.Fatal("the whole plan as its own part: not refined")
	}
	for r := range whole.Ranks {
		if !slices.EqualFunc(all.Steps[r], whole.Steps[r], func(a, b Step) bool { return a.String() == b.String() }) {
			t.Fatalf("whole plan refined, rank %d: %d steps, want the plan made at the fine chunk's %d", r, len(all.Steps[r]), len(whole.Steps[r]))
		}
	}
	dropped := *folded // a rank's steps dropped: its messages left unpaired
	dropped.Steps = slices.Clone(folded.Steps)
	dropped.Steps[1] = nil
	if _, ok := coarse.Refine(&dropped); ok {
		t.Error("refined a part that drops a rank its kept peers exchange with")
	}
	part := *folded // a rank's first lanes cut short
	part.Steps = slices.Clone(folded.Steps)
	part.Steps[1] = part.Steps[1][:len(part.Steps[1])-1]
	if _, ok := coarse.Refine(&part); ok {
		t.Error("refined a part that is not a rank's first lanes")
	}
	// Lane 0 waits on lane 1, which a refined part of one lane drops.
	b := newBuilder(Spec{Op: AllReduce, Ranks: 1, Count: 1, DType: hw.F32}, 1, 1)
	b.keepLanes = 1
	err = generate(func(b *builder) error {
		a := b.add(0, Step{Kind: StepCopy, Src: ref(In, 0, 1), Dst: ref(Out, 0, 1), Lane: 1})
		b.add(0, Step{Kind: StepCopy, Src: ref(In, 0, 1), Dst: ref(Out, 0, 1), Lane: 0, After: []int{a}})
		return nil
	}, b)
	if !errors.Is(err, ErrBadPlan) {
		t.Errorf("a kept lane waiting on one not kept: %v, want ErrBadPlan", err)
	}
}

// A plan made by hand whose programs are not one a rank does not fold:
// every Fold method says so (ok false), where five of them indexed past
// the programs they had.
func TestFoldRefusesAPlanOfTheWrongShape(t *testing.T) {
	wire := &Wire{Efficiency: [3]float64{1, 1, 1}}
	for _, programs := range []int{2, 6} {
		p := &Plan{Spec: Spec{Op: AllGather, Ranks: 4, Count: 1, DType: hw.F32, NodeRanks: 2, Channels: 2},
			InLen: 1, OutLen: 4, Lanes: 2, Wire: wire, Steps: make([][]Step, programs)}
		_, _, ok1 := p.FoldChannels()
		_, _, _, ok2 := p.FoldRotation(1, false)
		_, _, _, ok3 := p.FoldRotationAndMirror()
		_, _, _, ok4 := p.FoldMirror()
		_, _, _, ok5 := p.FoldRanks(1)
		if ok1 || ok2 || ok3 || ok4 || ok5 {
			t.Errorf("%d programs for 4 ranks folded: %v %v %v %v %v", programs, ok1, ok2, ok3, ok4, ok5)
		}
	}
}
