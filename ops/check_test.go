package ops

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// awkwardCounts are counts that do and do not divide by p, around it.
func awkwardCounts(p int) []int {
	return []int{0, 1, 2, p - 1, p, p + 1, 2*p + 3, 13}
}

// TestEveryPlanChecks compiles and checks every algorithm for every op it
// implements, for p = 1…17 and awkward counts, with sum and avg, and a
// root that is not 0.
func TestEveryPlanChecks(t *testing.T) {
	for _, alg := range Algorithms() {
		for _, op := range Ops() {
			if AlgorithmsFor(op) == nil || !contains(AlgorithmsFor(op), alg) {
				continue
			}
			t.Run(alg+"/"+op.String(), func(t *testing.T) {
				t.Parallel()
				for p := 1; p <= 17; p++ {
					counts := awkwardCounts(p)
					if op == Barrier {
						counts = []int{0}
					}
					for _, n := range counts {
						if n < 0 {
							continue
						}
						for _, redop := range []hw.ReduceOp{hw.Sum, hw.Avg} {
							if redop == hw.Avg && !op.Reduces() {
								continue
							}
							spec := Spec{Op: op, Algo: alg, Ranks: p, Count: n, Root: (p - 1) / 2, DType: hw.F32, Redop: redop}
							plan, err := Compile(spec)
							if err != nil {
								t.Fatalf("compile %v: %v", spec, err)
							}
							if err := Check(plan); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			})
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func mustPlan(t *testing.T, s Spec) *Plan {
	t.Helper()
	p, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCheckerCatchesBrokenPlans mutates a good plan in the ways bugs do and
// expects the checker to refuse each.
func TestCheckerCatchesBrokenPlans(t *testing.T) {
	good := Spec{Op: AllReduce, Algo: "ring", Ranks: 4, Count: 10, DType: hw.F32, Redop: hw.Sum}
	mutations := map[string]func(p *Plan){
		"dropped step": func(p *Plan) { p.Steps[2] = append(p.Steps[2][:3], p.Steps[2][4:]...) },
		"swapped peer": func(p *Plan) {
			for i, s := range p.Steps[1] {
				if s.Kind == StepSend {
					p.Steps[1][i].Peer = 3
					return
				}
			}
		},
		"shifted offset": func(p *Plan) {
			for i, s := range p.Steps[0] {
				if s.Kind == StepRecv && s.Dst.Buf == Out {
					p.Steps[0][i].Dst.Off++
					p.Steps[0][i].Dst.Len--
					return
				}
			}
		},
		"reduce twice": func(p *Plan) {
			for i, s := range p.Steps[3] {
				if s.Kind == StepReduce {
					p.Steps[3] = append(p.Steps[3][:i+1], p.Steps[3][i:]...)
					return
				}
			}
		},
		"wrong tag": func(p *Plan) {
			for i, s := range p.Steps[2] {
				if s.Kind == StepRecv {
					p.Steps[2][i].Tag += 100
					return
				}
			}
		},
		"out of range": func(p *Plan) { p.Steps[1][0].Dst.Len = 1000 },
	}
	for name, mutate := range mutations {
		p := mustPlan(t, good)
		if err := Check(p); err != nil {
			t.Fatalf("unmutated plan fails: %v", err)
		}
		mutate(p)
		if err := Check(p); err == nil {
			t.Errorf("%s: checker accepted the broken plan", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestCompileRefusesBadSpecs(t *testing.T) {
	ok := Spec{Op: AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum}
	cases := map[string]func(s *Spec){
		"unknown algo":  func(s *Spec) { s.Algo = "bogus" },
		"zero ranks":    func(s *Spec) { s.Ranks = 0 },
		"huge ranks":    func(s *Spec) { s.Ranks = MaxRanks + 1 },
		"negative":      func(s *Spec) { s.Count = -1 },
		"bad dtype":     func(s *Spec) { s.DType = 0 },
		"bad redop":     func(s *Spec) { s.Redop = 0 },
		"root":          func(s *Spec) { s.Op, s.Root = Broadcast, 4 },
		"overflow":      func(s *Spec) { s.Op, s.Count, s.Ranks = AllGather, 1<<52, 1<<10 },
		"huge count":    func(s *Spec) { s.Count, s.DType = 1<<61, hw.F64 },
		"unimplemented": func(s *Spec) { s.Op = AllToAll },
		"barrier data":  func(s *Spec) { s.Op, s.Algo = Barrier, "direct" },
		"channels":      func(s *Spec) { s.Channels = MaxChannels + 1 },
	}
	for name, mut := range cases {
		s := ok
		mut(&s)
		if _, err := Compile(s); err == nil {
			t.Errorf("%s: Compile(%v) succeeded", name, s)
		}
	}
}

// TestSpecStringNamesOnlyFieldsItsOpUses: a root that an all-reduce
// ignores does not show, as if it were used; a reduce shows both.
func TestSpecStringNamesOnlyFieldsItsOpUses(t *testing.T) {
	for s, want := range map[Spec]string{
		{Op: AllReduce, Algo: "ring", Ranks: 4, Count: 8, Root: 7, DType: hw.F32, Redop: hw.Sum}: "allreduce/ring p=4 count=8 f32 sum",
		{Op: Broadcast, Algo: "tree", Ranks: 4, Count: 8, Root: 2, DType: hw.F16, Redop: hw.Max}: "broadcast/tree p=4 count=8 root=2 f16",
		{Op: Reduce, Algo: "ring", Ranks: 4, Count: 8, Root: 3, DType: hw.F64, Redop: hw.Max}:    "reduce/ring p=4 count=8 root=3 f64 max",
		{Op: Gather, Algo: "direct", Ranks: 2, Count: 1, DType: hw.U8}:                           "gather/direct p=2 count=1 root=0 u8",
	} {
		if got := s.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}

func ExamplePlan_Describe() {
	p, err := Compile(Spec{Op: AllGather, Algo: "ring", Ranks: 3, Count: 1, DType: hw.F32})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(p.Describe())
	// Output:
	// plan allgather/ring p=3 count=1 f32: in 1, out 3, tmp 0 elements, 1 lane(s)
	// rank 0:
	//   0: copy out[0:1] = in[0:1]
	//   1: send out[0:1] to 1 tag 0
	//   2: recv out[2:3] from 2 tag 0
	//   3: send out[2:3] to 1 tag 1
	//   4: recv out[1:2] from 2 tag 1
	// rank 1:
	//   0: copy out[1:2] = in[0:1]
	//   1: send out[1:2] to 2 tag 0
	//   2: recv out[0:1] from 0 tag 0
	//   3: send out[0:1] to 2 tag 1
	//   4: recv out[2:3] from 0 tag 1
	// rank 2:
	//   0: copy out[2:3] = in[0:1]
	//   1: send out[2:3] to 0 tag 0
	//   2: recv out[1:2] from 1 tag 0
	//   3: send out[1:2] to 0 tag 1
	//   4: recv out[0:1] from 1 tag 1
}

func TestCompileStreamsLargePlansAndRefusesHugeOnes(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); TestStreamedRunsEqualHeldRuns takes the same concurrent paths under it")
	}
	// Ring all-reduce on 4096 ranks: 4096 × (5·4095 + 1) ≈ 84M steps, too
	// many to hold: streamed, and refused where it must be held.
	plan, err := Compile(Spec{Op: AllReduce, Algo: "ring", Ranks: 4096, Count: 4096, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Streamed() || plan.NumSteps() != 4096*(5*4095+1) || plan.Steps != nil {
		t.Fatalf("streamed %v, %d steps; want a streamed plan of %d", plan.Streamed(), plan.NumSteps(), 4096*(5*4095+1))
	}
	if got := len(plan.Rank(4095)); got != 5*4095+1 {
		t.Fatalf("rank 4095 has %d steps, want %d", got, 5*4095+1)
	}
	if err := Check(plan); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "over the limit of 4194304") {
		t.Fatalf("Check: err = %v, want ErrTooLarge naming the limit", err)
	}
	// Buffers near the largest int, whose sum wrapped negative and passed
	// the bound; and a hand-made plan of a million lanes, whose clocks
	// grow with the square of its lanes: both refused before any is made.
	huge, err := Compile(Spec{Op: AllReduce, Algo: "ring", Ranks: 2, Count: math.MaxInt64 / 4, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(huge); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "symbolic elements, over the limit of 4194304") {
		t.Errorf("Check of buffers of 2^61 elements: %v, want ErrTooLarge", err)
	}
	wide, err := Compile(Spec{Op: AllReduce, Algo: "ring", Ranks: 4, Count: 1 << 17, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	wide.Lanes = wide.NumSteps() + maxIdleLanes
	if err := Check(wide); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "words of lane clocks, over the limit of 268435456") {
		t.Errorf("Check of %d lanes: %v, want ErrTooLarge", wide.Lanes, err)
	}
	// Lanes past the plan's steps are malformed, refused before a lane's
	// clock is made (2^40 of them took the host's memory).
	wide.Lanes = 1 << 40
	if err := Check(wide); !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), "plan has 1099511627776 lanes for") {
		t.Errorf("Check of 2^40 lanes: %v, want ErrBadPlan", err)
	}
	// One rank with chunks of one element: a copy, made as one pass (the
	// 2^31 passes of nothing it looped over took minutes).
	if one, err := Compile(Spec{Op: AllReduce, Algo: "nccl-ring", Ranks: 1, Count: 1 << 31, Chunk: 1, DType: hw.F32, Redop: hw.Sum}); err != nil || one.NumSteps() != 1 {
		t.Errorf("nccl-ring on one rank in chunks of 1: %v, want one step", err)
	}
	// direct on 32768 ranks: 2·32767·32768 ≈ 2.1G steps, refused at once.
	_, err = Compile(Spec{Op: AllReduce, Algo: "direct", Ranks: 32768, Count: 1, DType: hw.F32, Redop: hw.Sum})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "over the limit of 1073741824") {
		t.Fatalf("err = %v, want ErrTooLarge with the step count", err)
	}
	// Rings of 30000 ranks: their every rank's steps are refused at once,
	// counted (where counting the 4.5G steps took 25 s).
	for op, steps := range map[Op]int{AllReduce: 30000 * (5*29999 + 1), AllGather: 30000 * 2 * 29999, ReduceScatter: 30000 * 2 * 29999} {
		_, err = Compile(Spec{Op: op, Algo: "ring", Ranks: 30000, Count: 1 << 20, DType: hw.F32, Redop: hw.Sum})
		if want := fmt.Sprintf("at least %d plan steps, over the limit of 1073741824", steps); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s ring on 30000 ranks: %v, want %q", op, err, want)
		}
	}
	// rhd on 16384 ranks stays well inside.
	if _, err := Compile(Spec{Op: AllReduce, Algo: "rhd", Ranks: 16384, Count: 16384, DType: hw.F32, Redop: hw.Sum}); err != nil {
		t.Fatal(err)
	}
}

// TestAvgOnlyDividesReductions: a redop on an op that does not reduce is
// ignored; in particular avg must not add a division to a copy.
func TestAvgOnlyDividesReductions(t *testing.T) {
	for _, op := range []Op{SendRecv, AllGather, Broadcast, Gather, AllToAll} {
		for _, alg := range AlgorithmsFor(op) {
			p := mustPlan(t, Spec{Op: op, Algo: alg, Ranks: 3, Count: 4, DType: hw.F32, Redop: hw.Avg})
			if err := Check(p); err != nil {
				t.Errorf("%s/%s with redop avg: %v", op, alg, err)
			}
		}
	}
}

// TestStreamedPlansEqualHeldPlans: a streamed plan's ranks, made one at a
// time, are step for step the plan Compile holds in memory, and each of
// its lanes, made alone, yields the held plan's operations on that lane,
// for every algorithm and every op. At 130 ranks the count that sizes a
// streamed plan is split between goroutines, by ranges of ranks.
func TestStreamedPlansEqualHeldPlans(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); TestStreamedRunsEqualHeldRuns takes the same concurrent paths under it")
	}
	for _, a := range algorithmTable {
		for _, op := range Ops() {
			if a.gens[op] == nil {
				continue
			}
			for _, p := range []int{1, 2, 5, 8, 13, 130} {
				spec := Spec{Op: op, Algo: a.name, Ranks: p, Count: 7, Root: p / 2, DType: hw.F32, Redop: hw.Avg}
				if op == Barrier {
					spec.Count = 0
				}
				if NetworkSwitch(a.name) {
					spec.NodeRanks = 1 // CollNet: one GPU per node
				}
				held := mustPlan(t, spec)
				streamAbove = -1
				streamed, err := Compile(spec)
				streamAbove = StreamAbove
				if a.held || heldSpec(spec) {
					if !errors.Is(err, ErrUnsupported) {
						t.Fatalf("%v streamed: %v, want ErrUnsupported: its lanes wait for each other", spec, err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if !streamed.Streamed() || streamed.NumSteps() != held.NumSteps() ||
					streamed.TmpLen != held.TmpLen || streamed.Lanes != held.Lanes {
					t.Fatalf("%v: streamed %v, %d steps, tmp %d, %d lanes; held %d steps, tmp %d, %d lanes", spec,
						streamed.Streamed(), streamed.NumSteps(), streamed.TmpLen, streamed.Lanes, held.NumSteps(), held.TmpLen, held.Lanes)
				}
				for r := range p {
					if got, want := streamed.Rank(r), held.Steps[r]; !reflect.DeepEqual(got, want) {
						t.Fatalf("%v rank %d:\nstreamed %v\nheld     %v", spec, r, got, want)
					}
					want := allOperations(t, held, r, false)
					for _, batched := range []bool{false, true} {
						if got := allOperations(t, streamed, r, batched); !reflect.DeepEqual(got, want) {
							t.Fatalf("%v rank %d operations (batched %v):\nstreamed %v\nheld     %v", spec, r, batched, got, want)
						}
					}
				}
				if got, want := streamed.Describe(), held.Describe(); got != want {
					t.Fatalf("%v: Describe differs", spec)
				}
			}
		}
	}
}

// TestRankAloneStopsPastEnough: the estimate from rank 0 stops soon after
// the steps it needs, where a chain in chunks of one element over 2^40
// elements would make rank 0's 10^12 steps first (hours) before the count
// refused the plan.
func TestRankAloneStopsPastEnough(t *testing.T) {
	spec := Spec{Op: Broadcast, Algo: "nccl-ring", Ranks: 8, Count: 1 << 40, DType: hw.U8, Channels: 1, Chunk: 1}
	alg, _ := algorithmNamed(spec.Algo)
	in, out := spec.BufferLens()
	n, steps, ok := rankAlone(spec, alg.gens[Broadcast], in, out, 0, 1000)
	if !ok || n <= 1000 || n > 1000+2*genBatch || steps != nil {
		t.Errorf("rank 0 alone: %d steps (%d kept, ok %v), want a count stopped just past 1000 and none kept", n, len(steps), ok)
	}
	// A rank whose last batch takes it past enough has its whole count:
	// the root's copy and 600 sends.
	spec.Count = 600
	n, _, ok = rankAlone(spec, alg.gens[Broadcast], in, out, 0, 590)
	if !ok || n != 601 {
		t.Errorf("the root alone, 600 one-element chunks: %d steps (ok %v), want all 601 counted", n, ok)
	}
}

// TestCompileCorrectsLowEstimates: Compile guesses a plan's size from rank
// 0. When rank 0 is lighter than the others (a gather whose root is rank
// 1) and the guess is under the streaming threshold but the plan is over
// it, the plan is still streamed, whole; at the threshold it is held.
func TestCompileCorrectsLowEstimates(t *testing.T) {
	spec := Spec{Op: Gather, Algo: "direct", Ranks: 64, Count: 3, Root: 1, DType: hw.F32}
	held := mustPlan(t, spec)
	in, out := spec.BufferLens()
	rank0, _, ok := rankAlone(spec, directPlans[Gather], in, out, 0, maxMirroredSteps)
	total := held.NumSteps()
	if !ok || rank0*spec.Ranks >= total {
		t.Fatalf("rank 0 has %d steps (ok %v) of %d: it should be lighter than the average", rank0, ok, total)
	}
	defer func() { streamAbove = StreamAbove }()
	for _, tc := range []struct {
		above    int
		streamed bool
	}{{rank0 * spec.Ranks, true}, {total - 1, true}, {total, false}} {
		streamAbove = tc.above
		plan, err := Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		if plan.Streamed() != tc.streamed || plan.NumSteps() != total {
			t.Fatalf("threshold %d: streamed %v with %d steps, want streamed %v with %d", tc.above, plan.Streamed(), plan.NumSteps(), tc.streamed, total)
		}
		for r := range spec.Ranks {
			if !reflect.DeepEqual(plan.Rank(r), held.Steps[r]) {
				t.Fatalf("threshold %d: rank %d differs from the held plan", tc.above, r)
			}
		}
	}
}

// allOperations drains every lane of rank r's cursors, a few operations
// at a time, with Next or with Batches.
func allOperations(t *testing.T, p *Plan, r int, batched bool) [][]Operation {
	t.Helper()
	cursors, err := p.Cursors(r)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]Operation, len(cursors))
	for l, c := range cursors {
		if batched {
			for batch := range c.Batches(3) {
				out[l] = append(out[l], batch...)
			}
			continue
		}
		buf := make([]Operation, 3)
		for n := c.Next(buf); n > 0; n = c.Next(buf) {
			out[l] = append(out[l], buf[:n]...)
		}
	}
	return out
}

// TestCheckHoldsSendsToTheirBuffers: a receiver that takes a chunk of a
// broadcast before the ones sent ahead of it is correct with eager sends,
// with slots too small to hold a chunk (which then streams), and with a
// buffer that holds what the root sends ahead; with less, the root waits
// for room the receiver never frees, and Check says so.
func TestCheckHoldsSendsToTheirBuffers(t *testing.T) {
	spec := Spec{Op: Broadcast, Algo: "nccl-ring", Ranks: 2, Count: 4, Chunk: 1, DType: hw.F32, Channels: 1}
	lastFirst := func(slots int, slotBytes int64) *Plan {
		p := mustPlan(t, spec)
		tag := uint32(0)
		for i, s := range p.Steps[0] {
			if s.Kind == StepSend {
				p.Steps[0][i].Tag = tag
				tag++
			}
		}
		r := p.Steps[1]
		for i := range r {
			r[i].Tag = uint32(i)
		}
		r[0], r[1], r[2], r[3] = r[3], r[0], r[1], r[2]
		if slots > 0 {
			p.Wire = &Wire{Efficiency: [NumPathClasses]float64{1, 1, 1}, Slots: slots, SlotBytes: slotBytes}
		}
		return p
	}
	for _, b := range [][2]int{{0, 0}, {4, 3}, {4, 4}, {1, 16}} {
		if err := Check(lastFirst(b[0], int64(b[1]))); err != nil {
			t.Errorf("%d slots of %d bytes: %v", b[0], b[1], err)
		}
	}
	err := Check(lastFirst(3, 4))
	if err == nil || !strings.Contains(err.Error(), "deadlock") || !strings.Contains(err.Error(), "waiting for room in its buffer: 12 of 12 bytes held") {
		t.Fatalf("3 slots of 4 bytes: %v, want a deadlock waiting for room", err)
	}
	p := lastFirst(-1, 4)
	p.Wire = &Wire{Efficiency: [NumPathClasses]float64{1, 1, 1}, Slots: -1}
	if err := Check(p); !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), "buffer") {
		t.Fatalf("-1 slots: %v, want ErrBadPlan naming the buffer", err)
	}
	for _, ref := range []float64{-1e-6, math.Inf(1), math.NaN()} {
		p.Wire = &Wire{Efficiency: [NumPathClasses]float64{1, 1, 1}, Reference: [NumPathClasses]float64{0, 0, ref}}
		if err := Check(p); !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), "reference latency") {
			t.Errorf("reference %v s: %v, want ErrBadPlan naming the reference latency", ref, err)
		}
	}
}

// TestHugeCountsNeverWrapTheScratch: at the largest counts a buffer may
// hold, every algorithm of every op either makes a well-formed plan whose
// scratch fits a buffer, or refuses the count; a scratch of 2 × count
// elements must never wrap around to a small one (it did: reduce/ring of
// 2^62 u8 made a plan with no scratch, caught only when it ran).
func TestHugeCountsNeverWrapTheScratch(t *testing.T) {
	for _, op := range Ops() {
		if op == Barrier {
			continue // no data
		}
		for _, alg := range AlgorithmsFor(op) {
			for _, ranks := range []int{2, 3, 8} {
				for _, dt := range []hw.DType{hw.U8, hw.F32} {
					most := math.MaxInt64 / dt.Size()
					if op.blocksPerRank() {
						most /= ranks
					}
					s := Spec{Op: op, Algo: alg, Ranks: ranks, Count: 64, DType: dt, Redop: hw.Sum, Channels: 2, NodeRanks: ranks}
					if _, err := Compile(s); err != nil {
						s.NodeRanks = 1 // PAT's one GPU a node
						if _, err := Compile(s); err != nil {
							continue // not a shape the algorithm runs
						}
					}
					for _, count := range []int{most, most/2 + 1, most / 3} {
						s.Count = count
						p, err := Compile(s)
						if err != nil {
							if errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), "over the limit") {
								t.Errorf("%s/%s p=%d count=%d %s: %v, want a plan or a refusal naming the limit", op, alg, ranks, count, dt, err)
							}
							continue
						}
						if p.TmpLen > math.MaxInt64/dt.Size() {
							t.Errorf("%s/%s p=%d count=%d %s: scratch of %d elements, over the limit", op, alg, ranks, count, dt, p.TmpLen)
						}
						if err := p.validate(); err != nil {
							t.Errorf("%s/%s p=%d count=%d %s: %v", op, alg, ranks, count, dt, err)
						}
					}
				}
			}
		}
	}
}

// TestHugeChunksSaturate: a chunk of any size (the library's Spec.Chunk is
// unbounded) times the ranks is a pass of the whole channel, never a
// product wrapped to a small or negative scratch.
func TestHugeChunksSaturate(t *testing.T) {
	for _, alg := range []string{"nccl-ring", "nccl-tree", "nccl-pat"} {
		for _, chunk := range []int{math.MaxInt / 3, math.MaxInt} {
			s := Spec{Op: AllReduce, Algo: alg, Ranks: 4, Count: 1000, DType: hw.F32, Redop: hw.Sum, Channels: 2, Chunk: chunk}
			p, err := Compile(s)
			if errors.Is(err, ErrUnsupported) {
				continue
			}
			if err != nil {
				t.Errorf("%s chunk %d: %v", alg, chunk, err)
				continue
			}
			if err := p.validate(); err != nil {
				t.Errorf("%s chunk %d: %v", alg, chunk, err)
			}
		}
	}
}

// A rank the plan does not have has no steps, whether the plan holds its
// steps or streams them; a rank it has yields the same steps either way.
func TestRankStepsOfARankThePlanHasNot(t *testing.T) {
	spec := Spec{Op: AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum}
	held, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := CompileStreamed(spec)
	if err != nil || !streamed.Streamed() {
		t.Fatalf("%v, streamed %v", err, streamed != nil && streamed.Streamed())
	}
	for _, p := range []*Plan{held, streamed, {}} {
		for _, r := range []int{-1, 4, 99} {
			n := 0
			for range p.RankSteps(r) {
				n++
			}
			if n != 0 || p.Rank(r) != nil {
				t.Errorf("streamed %v, rank %d: %d steps, Rank %v; want none", p.Streamed(), r, n, p.Rank(r))
			}
		}
	}
	if got, want := slices.Collect(streamed.RankSteps(2)), held.Rank(2); len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("rank 2: streamed %d steps, held %d; want the same", len(got), len(want))
	}
}

// A plan with no element type is malformed, for Check as for Run.
func TestCheckRefusesAPlanWithoutADType(t *testing.T) {
	p, err := Compile(Spec{Op: AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	p.DType = 0
	if err := Check(p); !errors.Is(err, ErrBadPlan) || !strings.Contains(err.Error(), "invalid dtype") {
		t.Errorf("Check: %v, want ErrBadPlan naming the dtype", err)
	}
}

// A barrier moves no element, so its spec may leave DType zero: it
// compiles and checks as a barrier of U8, on every algorithm that has one.
// Any other op without a dtype is still refused.
func TestABarrierNeedsNoDType(t *testing.T) {
	for _, algo := range AlgorithmsFor(Barrier) {
		s := Spec{Op: Barrier, Algo: algo, Ranks: 5}
		if err := s.Validate(); err != nil {
			t.Fatalf("%s: Validate: %v", algo, err)
		}
		p, err := Compile(s)
		if err != nil {
			t.Fatalf("%s: %v", algo, err)
		}
		if p.DType != hw.U8 {
			t.Errorf("%s: plan's dtype %v, want u8", algo, p.DType)
		}
		if err := Check(p); err != nil {
			t.Errorf("%s: Check: %v", algo, err)
		}
	}
	if _, err := Compile(Spec{Op: AllGather, Algo: "ring", Ranks: 5}); err == nil || !strings.Contains(err.Error(), "invalid dtype") {
		t.Errorf("an all-gather of no dtype: %v, want invalid dtype", err)
	}
}

// A plan whose sends and receives do not pair up is malformed to Check as
// to Run (ErrBadPlan), whichever finds it; one that pairs them but
// computes the wrong thing is wrong, not malformed.
func TestCheckCallsUnpairedPlansMalformedAsRunDoes(t *testing.T) {
	spec := Spec{Op: AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum}
	unpaired, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	unpaired.Steps[2][1].Src.Len = 1 // a send one element short of its receive
	if err := unpaired.validate(); !errors.Is(err, ErrBadPlan) {
		t.Fatalf("Run's check: %v, want ErrBadPlan", err)
	}
	if err := Check(unpaired); !errors.Is(err, ErrBadPlan) {
		t.Errorf("Check: %v, want ErrBadPlan", err)
	}
	wrong, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(wrong.Steps[0], func(s Step) bool { return s.Kind == StepReduce })
	wrong.Steps[0] = slices.Delete(wrong.Steps[0], i, i+1) // rank 0 skips a reduction
	for r := range wrong.Steps[0] {
		wrong.Steps[0][r].After = nil
	}
	if err := Check(wrong); err == nil || errors.Is(err, ErrBadPlan) {
		t.Errorf("Check of a plan that skips a reduction: %v, want an error that is not ErrBadPlan", err)
	}
}
