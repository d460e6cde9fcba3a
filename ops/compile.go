package ops

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/commsim/commsim/hw"
)

// MaxRanks is the largest world a plan may describe. Every documented
// limit must run within 8 GB (issue #17): a 1 MiB all-reduce bench on
// switch:262143 (auto's costing, then the simulation) peaks at 4.9 GB,
// where a million ranks ran out of memory past 10 GB.
const MaxRanks = 1 << 18

// MaxChannels is the most channels a spec may split its data over:
// NCCL's MAXCHANNELS. A plan's memory grows with its channels, whatever
// its size, so an unbounded count was an unbounded allocation.
const MaxChannels = 64

// MaxPlanSteps bounds the steps of a plan held in memory, all ranks
// together: about 100 bytes a step, so 16M steps is a few GB. Compile
// streams larger plans; Materialized refuses them with ErrTooLarge.
const MaxPlanSteps = 16 << 20

// StreamAbove is the size, in steps, above which Compile streams a plan:
// a plan of millions of steps held in memory costs more in cache misses and
// garbage collection than making the steps again as they are needed.
const StreamAbove = 1 << 20

// streamAbove is StreamAbove; tests move it.
var streamAbove = StreamAbove

// MaxStreamedSteps bounds a streamed plan: past a billion steps a run
// would take hours.
const MaxStreamedSteps = 1 << 30

// ErrUnsupported is wrapped by Compile's error when an algorithm does not
// implement an op (or a shape of it).
var ErrUnsupported = errors.New("unsupported")

// ErrTooLarge is wrapped by Compile's error when a plan would exceed
// MaxPlanSteps.
var ErrTooLarge = errors.New("plan too large")

// generator emits the steps of one algorithm for one op into b. The spec in
// b.p has been validated.
type generator func(b *builder) error

// algorithm is one named family of plans.
type algorithm struct {
	name string
	doc  string // one line: what it is and its reduction order
	gens map[Op]generator
	// nccl marks the algorithms that run like NCCL's (channels, chunks):
	// NCCL's tuner picks among them (package nccl), auto does not.
	nccl bool
	// held marks the algorithms whose lanes wait for each other (Step.
	// After): a lane streamed alone cannot name the other lanes' steps, so
	// their plans are always held, up to MaxPlanSteps.
	held bool
}

// algorithmTable lists the algorithms in the order help text shows them.
// Each alg_*.go file defines its generator map.
var algorithmTable = []algorithm{
	{"ring", ringDoc, ringPlans, false, false},
	{"rd", rdDoc, rdPlans, false, false},
	{"rhd", rhdDoc, rhdPlans, false, false},
	{"tree", treeDoc, treePlans, false, false},
	{"dbtree", dbtreeDoc, dbtreePlans, false, false},
	{"direct", directDoc, directPlans, false, false},
	{"pairwise", pairwiseDoc, pairwisePlans, false, false},
	{"nccl-ring", ncclRingDoc, ncclRingPlans, true, false},
	{"nccl-tree", ncclTreeDoc, ncclTreePlans, true, true},
	{"nccl-pat", ncclPATDoc, ncclPATPlans, true, false},
	{"nccl-nvls", ncclNVLSDoc, ncclNVLSPlans, true, false},
	{"nccl-nvlstree", ncclNVLSTreeDoc, ncclNVLSTreePlans, true, false},
	{"nccl-collnet-direct", ncclCollNetDirectDoc, ncclCollNetDirectPlans, true, false},
	{"nccl-collnet-chain", ncclCollNetChainDoc, ncclCollNetChainPlans, true, false},
	{"nccl-p2p", ncclP2PDoc, ncclP2PPlans, true, true},
}

// Algorithms lists the algorithm names Compile knows, in a fixed order.
func Algorithms() []string {
	out := make([]string, len(algorithmTable))
	for i, a := range algorithmTable {
		out[i] = a.name
	}
	return out
}

// AlgorithmsFor lists the algorithms that implement op on any backend and
// fabric: not those that need a reducing switch (NeedsSwitch).
func AlgorithmsFor(op Op) []string {
	var out []string
	for _, a := range algorithmTable {
		if a.gens[op] != nil && !NeedsSwitch(a.name) {
			out = append(out, a.name)
		}
	}
	return out
}

// Runs reports whether algorithm name has a plan for op (on a fabric it
// can run on: NeedsSwitch).
func Runs(name string, op Op) bool {
	a, ok := algorithmNamed(name)
	return ok && a.gens[op] != nil
}

// IsNCCL reports whether algorithm name runs like NCCL's, with channels
// and chunks (Spec.Channels, Spec.Chunk): package nccl's tuner picks among
// those, Select (auto) among the others.
func IsNCCL(name string) bool {
	a, ok := algorithmNamed(name)
	return ok && a.nccl
}

// AlgorithmDoc is the one-line description of an algorithm, or "".
func AlgorithmDoc(name string) string {
	a, _ := algorithmNamed(name)
	return a.doc
}

// algorithmNamed is the algorithm of that name in algorithmTable.
func algorithmNamed(name string) (algorithm, bool) {
	i := slices.IndexFunc(algorithmTable, func(a algorithm) bool { return a.name == name })
	if i < 0 {
		return algorithm{}, false
	}
	return algorithmTable[i], true
}

// Validate checks a spec without compiling it.
func (s Spec) Validate() error {
	s = s.withBarrierDType()
	switch {
	case !s.Op.Valid():
		return fmt.Errorf("ops: invalid op %v", s.Op)
	case s.Ranks < 1:
		return fmt.Errorf("ops: %s: ranks must be >= 1, got %d", s.Op, s.Ranks)
	case s.Ranks > MaxRanks:
		return fmt.Errorf("ops: %s: %d ranks is more than the limit of %d", s.Op, s.Ranks, MaxRanks)
	case s.Count < 0:
		return fmt.Errorf("ops: %s: count must be >= 0, got %d", s.Op, s.Count)
	case !s.DType.Valid():
		return fmt.Errorf("ops: %s: invalid dtype %v", s.Op, s.DType)
	case s.Count > math.MaxInt64/s.DType.Size():
		return fmt.Errorf("ops: %s: %d elements of %s are over the limit of %d bytes per buffer", s.Op, s.Count, s.DType, int64(math.MaxInt64))
	case s.Op.blocksPerRank() && s.Count > math.MaxInt64/s.DType.Size()/s.Ranks:
		return fmt.Errorf("ops: %s: %d ranks x %d elements of %s are over the limit of %d bytes per buffer", s.Op, s.Ranks, s.Count, s.DType, int64(math.MaxInt64))
	case s.Op.Reduces() && !s.Redop.Valid():
		return fmt.Errorf("ops: %s: invalid reduce op %v", s.Op, s.Redop)
	case s.Op.Rooted() && (s.Root < 0 || s.Root >= s.Ranks):
		return fmt.Errorf("ops: %s: root %d out of range 0..%d", s.Op, s.Root, s.Ranks-1)
	case s.Op == Barrier && s.Count != 0:
		return fmt.Errorf("ops: barrier carries no data, got count %d", s.Count)
	case s.Channels < 0 || s.Chunk < 0 || s.NodeRanks < 0 || s.NetChunk < 0 || s.TreeChannels < 0 || slices.Min(s.TreeCopies[:]) < 0:
		return fmt.Errorf("ops: %s: channels %d, chunk %d, node ranks %d, net chunk %d, tree channels %d and tree copies %v must be >= 0", s.Op, s.Channels, s.Chunk, s.NodeRanks, s.NetChunk, s.TreeChannels, s.TreeCopies)
	case s.TreeChannels > MaxChannels || slices.Max(s.TreeCopies[:]) > MaxChannels:
		// NCCL's channels, as package nccl lays them out (its search's,
		// and where each stage of copies starts): at most MaxChannels.
		return fmt.Errorf("ops: %s: tree channels %d and tree copies %v must be at most %d", s.Op, s.TreeChannels, s.TreeCopies, MaxChannels)
	case s.Channels > MaxChannels:
		return fmt.Errorf("ops: %s: %d channels is more than the limit of %d (NCCL's MAXCHANNELS)", s.Op, s.Channels, MaxChannels)
	case s.NodeRanks > 0 && s.Ranks%s.NodeRanks != 0:
		return fmt.Errorf("ops: %s: %d ranks do not make nodes of %d", s.Op, s.Ranks, s.NodeRanks)
	}
	return nil
}

// Made says whether plan, made by a planner of the caller's (NCCL's
// tuner, say) for s, is a plan of s's collective: of its op, ranks, count
// and dtype, and its root and reduction where the op has them. A plan of
// another would run, on buffers it may well fit, and give another result.
func (s Spec) Made(plan *Plan) error {
	if plan == nil {
		return fmt.Errorf("ops: the planner gave no plan for %v", s.Op)
	}
	want := s.withBarrierDType()
	got := plan.Spec
	got.Algo, got.Channels, got.Chunk, got.NodeRanks, got.NetChunk, got.TreeChannels, got.TreeCopies = want.Algo, want.Channels, want.Chunk, want.NodeRanks, want.NetChunk, want.TreeChannels, want.TreeCopies // how it runs is the planner's
	if !want.Op.Rooted() {
		got.Root = want.Root
	}
	if !want.Op.Reduces() {
		got.Redop = want.Redop
	}
	if got != want {
		return fmt.Errorf("ops: the planner gave a plan for %s, asked for %s", got.collective(), want.collective())
	}
	return nil
}

// collective says what s computes, not how: its elements, op and ranks,
// and its root and reduction where the op has them.
func (s Spec) collective() string {
	d := fmt.Sprintf("%d x %s %v on %d ranks", s.Count, s.DType, s.Op, s.Ranks)
	if s.Op.Rooted() {
		d += fmt.Sprintf(" to or from root %d", s.Root)
	}
	if s.Op.Reduces() {
		d += " by " + s.Redop.String()
	}
	return d
}

// withBarrierDType is s with U8 for a barrier's zero DType: a barrier
// moves no element, so asking its caller to name their type would only
// turn a correct call into an error.
func (s Spec) withBarrierDType() Spec {
	if s.Op == Barrier && s.DType == 0 {
		s.DType = hw.U8
	}
	return s
}

// BufferLens returns the input and output lengths, in elements, that a
// collective needs on every rank.
func (s Spec) BufferLens() (in, out int) {
	n, p := s.Count, s.Ranks
	switch s.Op {
	case AllReduce, Broadcast, Reduce, SendRecv:
		return n, n
	case ReduceScatter:
		return p * n, n
	case AllGather, Gather:
		return n, p * n
	case AllToAll:
		return p * n, p * n
	}
	return 0, 0
}

// Compile builds the plan of s.Algo for s: held in memory, or streamed
// when it has more than StreamAbove steps. For "native" the plan has no
// steps: the Executor hands it to the backend's library (see Native).
// "auto" is not an algorithm: see Select.
func Compile(s Spec) (*Plan, error) { return compileAbove(s, streamAbove) }

// CompileStreamed is Compile for a plan streamed whatever its size: its
// steps are made as they are asked for, and never held.
func CompileStreamed(s Spec) (*Plan, error) { return compileAbove(s, -1) }

// compileAbove is Compile, streaming plans of more than above steps.
func compileAbove(s Spec, above int) (*Plan, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s = s.withBarrierDType()
	if s.Algo == Native {
		return compileNative(s)
	}
	alg, ok := algorithmNamed(s.Algo)
	if !ok {
		return nil, fmt.Errorf("ops: unknown algorithm %q (want one of %s)", s.Algo, strings.Join(Algorithms(), ", "))
	}
	gen := alg.gens[s.Op]
	if gen == nil {
		return nil, fmt.Errorf("ops: %w: algorithm %s has no %s (for %s use one of %s)",
			ErrUnsupported, s.Algo, s.Op, s.Op, strings.Join(AlgorithmsFor(s.Op), ", "))
	}
	if alg.nccl && s.Ranks == 1 {
		// One rank exchanges nothing, so its passes split no messages:
		// looping over count/chunk passes that make no step never met
		// the step limits (2^31 elements in chunks of 1 took minutes).
		s.Chunk, s.NetChunk = 0, 0
	}
	in, out := s.BufferLens()
	if alg.held || heldSpec(s) {
		if above < 0 {
			return nil, fmt.Errorf("ops: %s/%s: %w: its lanes wait for each other's steps, so its plans are held, never streamed", s.Op, s.Algo, ErrUnsupported)
		}
		b := newBuilder(s, in, out)
		b.limit = MaxPlanSteps
		if err := generate(gen, b); err != nil {
			return nil, fmt.Errorf("ops: %s/%s with %d ranks: %w", s.Op, s.Algo, s.Ranks, err)
		}
		return b.p, nil
	}
	return compile(s, gen, in, out, above)
}

// compile holds a plan of up to above steps and streams a larger one. Rank 0's steps, made alone, estimate the size, so a small
// plan is made once. An estimate that was too low (rank 0 lighter than
// most) is caught when the held plan passes above, and the plan is
// counted after all.
func compile(s Spec, gen generator, in, out, above int) (*Plan, error) {
	wrap := func(err error) error { return fmt.Errorf("ops: %s/%s with %d ranks: %w", s.Op, s.Algo, s.Ranks, err) }
	n0, rank0, ok := rankAlone(s, gen, in, out, 0, max(maxMirroredSteps, above/s.Ranks))
	if ok && n0*s.Ranks <= above {
		b := newBuilder(s, in, out)
		b.limit = above
		err := generate(gen, b)
		if !errors.Is(err, ErrTooLarge) {
			if err != nil {
				return nil, wrap(err)
			}
			return b.p, nil
		}
	}
	steps, shape, err := countSteps(s, gen, in, out, rank0)
	if err != nil {
		return nil, wrap(err)
	}
	if steps > above {
		shape.gen, shape.numSteps = gen, steps
		return shape, nil
	}
	b := newBuilder(s, in, out)
	if err := generate(gen, b); err != nil {
		return nil, wrap(err)
	}
	return b.p, nil
}

// countSteps makes every rank's steps and counts them, without keeping
// them, on one goroutine per core, each taking a range of ranks: the
// streamable algorithms make a rank's steps without the others'. While
// counting it checks whether every rank follows rank0, rank 0's steps
// made alone (the plan's symmetry). The returned plan has no steps, only the shape
// the generator set (Lanes, TmpLen) and the symmetry.
func countSteps(s Spec, gen generator, in, out int, rank0 []Step) (int, *Plan, error) {
	workers := min(runtime.GOMAXPROCS(0), 1+s.Ranks/64)
	var total atomic.Int64
	counters := make([]*builder, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*s.Ranks/workers, (w+1)*s.Ranks/workers
		b := &builder{p: &Plan{Spec: s, InLen: in, OutLen: out, Lanes: 1}, mode: modeCount,
			limit: MaxStreamedSteps, lo: lo, hi: hi, count: make([]int, hi-lo), total: &total,
			sym: newSymmetryCheck(rank0, s.Ranks)}
		counters[w] = b
		wg.Go(func() { errs[w] = generate(gen, b) })
	}
	wg.Wait()
	shape := &Plan{Spec: s, InLen: in, OutLen: out, Lanes: 1}
	steps, sym := 0, newSymmetryCheck(rank0, s.Ranks)
	for w, b := range counters {
		if errs[w] != nil {
			return 0, nil, errs[w]
		}
		steps += b.steps
		shape.Lanes = max(shape.Lanes, b.p.Lanes)
		shape.TmpLen = max(shape.TmpLen, b.p.TmpLen)
		shape.switched = max(shape.switched, b.p.switched, switchNone)
		for _, n := range b.count {
			b.sym.rankDone(n)
		}
		sym.alive &= b.sym.alive
	}
	shape.symmetric = sym.alive
	if steps > MaxStreamedSteps {
		return 0, nil, fmt.Errorf("%w: %d plan steps, over the limit of %d", ErrTooLarge, steps, MaxStreamedSteps)
	}
	return steps, shape, nil
}

// rankAlone makes rank r's steps alone and counts them, keeping them
// unless there are more than maxMirroredSteps; ok is false if the
// generator failed, which the full pass then reports. It stops soon
// after enough steps (n is then over enough, and steps nil): a rank
// with more needs no exact count, and one of trillions (a chunk far
// smaller than its buffer) would take hours.
func rankAlone(s Spec, gen generator, in, out, r, enough int) (n int, steps []Step, ok bool) {
	made := 0
	b := &builder{p: &Plan{Spec: s, InLen: in, OutLen: out, Lanes: 1}, mode: modeStream, only: r, lane: -1,
		buf: make([]Step, 0, genBatch), emit: func(batch []Step) bool {
			if made += len(batch); made <= maxMirroredSteps {
				steps = append(steps, batch...)
			}
			return made <= enough
		}}
	if err := generate(gen, b); errors.Is(err, errStopped) {
		return b.n, nil, true
	} else if err != nil {
		return 0, nil, false
	}
	if len(b.buf) > 0 {
		b.emit(b.buf) // the count is whole: past enough or not, keep it
	}
	if b.n > len(steps) {
		steps = nil // too long to keep
	}
	return b.n, steps, true
}

// blocksPerRank reports whether a buffer of the op holds one block per rank.
func (o Op) blocksPerRank() bool {
	return o == ReduceScatter || o == AllGather || o == Gather || o == AllToAll
}

// generate runs gen, turning the builder's planTooLarge, scratchTooLarge
// and badStep unwinding into errors. Any other panic is a bug and keeps going.
func generate(gen generator, b *builder) (err error) {
	defer func() {
		switch r := recover().(type) {
		case nil:
		case planTooLarge:
			// Counters sharing a total know only that the plan passes the
			// limit (planTooLarge).
			at := fmt.Sprintf("at least %d plan steps, over the limit of %d", r.steps-1, b.limit)
			if r.steps-1 <= b.limit {
				at = fmt.Sprintf("over the limit of %d plan steps", b.limit)
			}
			err = fmt.Errorf("%w: %s; algorithms with O(p log p) steps (rd, rhd, tree) scale further", ErrTooLarge, at)
		case scratchTooLarge:
			err = fmt.Errorf("its scratch of %s elements of %s a rank is over the limit of %d bytes per buffer",
				r.elements, b.p.DType, int64(math.MaxInt64))
		case badStep:
			err = fmt.Errorf("%w: %w", ErrBadPlan, r.err)
		case streamStopped:
			err = errStopped
		default:
			panic(r)
		}
	}()
	return gen(b)
}

// isAvg reports whether the plan ends with a division.
func isAvg(s Spec) bool { return s.Op.Reduces() && s.Redop == hw.Avg }
