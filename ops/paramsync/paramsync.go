// Package paramsync synchronises gradients across data-parallel ranks, the
// way PyTorch DDP and ZeRO/FSDP do, with Burn's DistributedOps API:
//
//	s, _ := paramsync.Start(world, paramsync.Config{})
//	s.Register(rank, params)                   // every rank, the same list
//	s.SubmitGradient(rank, id, grad, ready)    // during backward, any order
//	s.Sync(rank)                               // averaged gradients in place
//	s.Close()
//
// Parameters are grouped into buckets of about Config.BucketBytes (25 MiB
// by default, as DDP), in reverse registration order since backward
// produces the last layers' gradients first. When all gradients of a bucket
// have been submitted on a rank (and all earlier buckets have launched:
// buckets launch in order, as in DDP), the bucket's collectives are
// enqueued on that rank's communication streams behind the gradients'
// ready events,
// so communication overlaps the compute that produces later gradients
// (MLX's signal/wait). Replicated parameters get an averaged all-reduce;
// sharded ones an averaged reduce-scatter of the gradient (rank r keeps
// shard r, in place) and, on request, an all-gather of the parameter
// (GatherParams; GatherParamsAfter behind events, returning its own, for
// FSDP's gathers before each layer's forward and backward), with
// Config.Algo where it implements them, ring otherwise (AlgoFor), and
// auto choosing by cost.
//
// Buckets decide when collectives start, not how data is cut: each
// gradient is reduced by its own plan, in place. Fusing a bucket into one
// buffer would change the reduction order of position-dependent
// algorithms (ring), and results here are bit-identical to a plain
// all-reduce or reduce-scatter of each gradient with the same plan.
package paramsync

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// Errors, wrapped with the rank and parameter they concern.
var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("paramsync: closed")
	// ErrUnregistered is returned for a gradient whose id was not registered.
	ErrUnregistered = errors.New("paramsync: unregistered parameter")
	// ErrDuplicate is returned when a gradient is submitted twice in a step.
	ErrDuplicate = errors.New("paramsync: gradient submitted twice in one step")
	// ErrMismatch is returned for a gradient of the wrong length, dtype or
	// device, for ranks that registered different lists, and for a rank
	// that gathers another parameter than the others did at that point.
	ErrMismatch = errors.New("paramsync: mismatch")
	// ErrTimeout is returned by Sync when gradients are still missing
	// after Config.Timeout.
	ErrTimeout = errors.New("paramsync: timed out")
)

// DefaultBucketBytes is PyTorch DDP's default bucket size.
const DefaultBucketBytes = 25 << 20

// Param describes one parameter tensor.
type Param struct {
	ID      string
	Len     int // elements
	DType   hw.DType
	Sharded bool // ZeRO/FSDP: gradients reduce-scattered; Len must divide by the ranks
}

// Config tunes a Server.
type Config struct {
	BucketBytes int64         // default DefaultBucketBytes
	Algo        string        // default "ring"; "auto" needs Cost
	Cost        ops.CostModel // prices plans for "auto"
	Timeout     time.Duration // how long Sync waits for missing gradients; default 30 s
	// Driver puts the collectives on the world's streams; nil is ops'
	// generic driver. On the simulator, simexec.NewDriver feeds plans as
	// the streams drain, so worlds of thousands of ranks fit in memory,
	// and times the plans of package nccl as they move (the generic
	// driver refuses those on the simulator).
	Driver ops.Driver
	// Callers is how many ranks use the server, ranks 0..Callers-1; 0
	// means every rank of the world. Fewer is for a simulator's mirror,
	// on which a few ranks stand for all (simexec.Driver.Mirror): the
	// collectives still span the whole world.
	Callers int
	// Planner, when set, compiles every collective's plan in place of
	// Algo, which then only names it (for instance "nccl": NCCL's tuner
	// choosing algorithm, protocol and channels per size). It is called
	// once per distinct spec, with Algo in the spec.
	Planner func(ops.Spec) (*ops.Plan, error)
}

// Bucket is a group of parameters whose collectives start together.
type Bucket struct {
	Params  []int // indices into the registered list
	Bytes   int64
	Sharded bool
}

// Server synchronises gradients for every rank of a world.
type Server struct {
	w    *hw.World
	cfg  Config
	exec *ops.Executor
	// gatherExec runs the parameters' all-gathers on streams of their
	// own, and a world of its own, as FSDP has an all-gather stream: a
	// gather prefetched for the next layer does not queue behind a
	// reduce-scatter that waits for this layer's gradients.
	gatherExec *ops.Executor

	mu      sync.Mutex
	changed *sync.Cond
	params  []Param
	index   map[string]int
	buckets []Bucket
	plans   map[ops.Spec]*ops.Plan // reductions' and gathers' plans, made once
	ranks   []*rankState
	closed  bool
	// gathers is the parameter of each all-gather that some rank has
	// still to call, in call order: set by the first rank to reach it,
	// held against the others.
	gathers []gatherCall
	// gathered counts the all-gathers before gathers[0], which every
	// rank has called.
	gathered int
}

// gatherCall is the parameter of one all-gather, and the rank that
// called it first.
type gatherCall struct {
	id   string
	rank int
}

type rankState struct {
	registered bool
	round      int // steps this rank has synced
	submitted  int // rounds whose every gradient this rank has submitted
	have       []bool
	grads      []hw.Buffer
	ready      []hw.Event
	missing    []int      // per bucket: gradients not yet submitted this round
	launched   int        // buckets launched this round (always a prefix)
	done       []hw.Event // per bucket: recorded when its collectives finish
	gathers    int        // all-gathers called
	// failed is why a bucket of the rank's could not launch: the step
	// cannot finish, nor can the server (the ranks that launched wait on
	// its messages), and every later call says so rather than wait.
	failed error
}

// Start makes a server over w.
func Start(w *hw.World, cfg Config) (*Server, error) {
	if w == nil {
		return nil, fmt.Errorf("paramsync: nil world")
	}
	if cfg.BucketBytes < 0 {
		return nil, fmt.Errorf("paramsync: bucket size %d bytes, want 0 (the default) or more", cfg.BucketBytes)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("paramsync: timeout %v, want 0 (the default) or more", cfg.Timeout)
	}
	if cfg.BucketBytes == 0 {
		cfg.BucketBytes = DefaultBucketBytes
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Algo == "" {
		cfg.Algo = "ring"
	}
	if cfg.Algo == "auto" && cfg.Cost == nil && cfg.Planner == nil {
		return nil, fmt.Errorf("paramsync: algorithm auto needs Config.Cost")
	}
	if cfg.Planner == nil {
		if err := checkAlgo(cfg.Algo); err != nil {
			return nil, err
		}
	}
	if cfg.Callers < 0 || cfg.Callers > w.Size() {
		return nil, fmt.Errorf("paramsync: %d callers for a world of %d ranks", cfg.Callers, w.Size())
	}
	if cfg.Callers == 0 {
		cfg.Callers = w.Size()
	}
	// A world of its own keeps its messages from matching a
	// communicator's, or another server's, on the same devices.
	own, err := w.Dup()
	if err != nil {
		return nil, fmt.Errorf("paramsync: %w", err)
	}
	gatherWorld, err := w.Dup()
	if err != nil {
		return nil, fmt.Errorf("paramsync: %w", err)
	}
	s := &Server{w: own, cfg: cfg, exec: ops.NewExecutorWith(own, cfg.Driver), gatherExec: ops.NewExecutorWith(gatherWorld, cfg.Driver),
		plans: map[ops.Spec]*ops.Plan{}, ranks: make([]*rankState, cfg.Callers)}
	s.changed = sync.NewCond(&s.mu)
	for r := range s.ranks {
		s.ranks[r] = &rankState{}
	}
	return s, nil
}

// checkAlgo refuses, when the server is made rather than at the first
// bucket, an algorithm that cannot all-reduce: replicated parameters are
// all-reduced with it (sharded ones fall back, see AlgoFor).
func checkAlgo(algo string) error {
	var known []string
	for _, a := range ops.Algorithms() {
		if slices.Contains(ops.AlgorithmsFor(ops.AllReduce), a) || ops.NeedsSwitch(a) {
			known = append(known, a)
		}
	}
	switch {
	case algo == "auto" || slices.Contains(known, algo):
		return nil
	case algo == ops.Native:
		// The executor refuses to enqueue such a plan rank by rank.
		return fmt.Errorf("paramsync: algorithm %s: the library's collectives launch every rank at once, and a bucket launches on each rank as its gradients come (want auto or one of %s)", ops.Native, strings.Join(known, ", "))
	case slices.Contains(ops.Algorithms(), algo):
		return fmt.Errorf("paramsync: algorithm %q has no all-reduce (want auto or one of %s)", algo, strings.Join(known, ", "))
	}
	return fmt.Errorf("paramsync: unknown algorithm %q (want auto or one of %s)", algo, strings.Join(known, ", "))
}

// Close ends the server; later calls return ErrClosed.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.closed = true
	s.changed.Broadcast()
	return nil
}

func (s *Server) rank(r int) (*rankState, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if r < 0 || r >= len(s.ranks) {
		return nil, fmt.Errorf("paramsync: rank %d not in 0..%d", r, len(s.ranks)-1)
	}
	return s.ranks[r], nil
}

// Register declares rank's parameters. Every rank must register the same
// list (IDs, lengths, dtypes, sharding, order); the first list registered
// is the reference and a different one is refused, naming the difference.
func (s *Server) Register(rank int, params []Param) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.rank(rank)
	if err != nil {
		return err
	}
	if st.registered {
		return fmt.Errorf("paramsync: rank %d registered twice", rank)
	}
	if s.params == nil {
		if err := s.setParams(params); err != nil {
			return err
		}
	} else if err := sameList(s.params, params); err != nil {
		return fmt.Errorf("%w: rank %d's parameters differ from the first registered list: %v", ErrMismatch, rank, err)
	}
	st.registered = true
	n := len(s.params)
	st.have, st.grads, st.ready = make([]bool, n), make([]hw.Buffer, n), make([]hw.Event, n)
	st.missing, st.done = make([]int, len(s.buckets)), make([]hw.Event, len(s.buckets))
	s.resetRound(st)
	return nil
}

func (s *Server) setParams(params []Param) error {
	if len(params) == 0 {
		return fmt.Errorf("paramsync: empty parameter list")
	}
	index := map[string]int{}
	var total int64 // every parameter's bytes, which no bucket exceeds
	for i, p := range params {
		switch {
		case p.ID == "":
			return fmt.Errorf("paramsync: parameter %d has no ID", i)
		case p.Len <= 0:
			return fmt.Errorf("paramsync: parameter %q: length %d", p.ID, p.Len)
		case !p.DType.Valid():
			return fmt.Errorf("paramsync: parameter %q: invalid dtype %v", p.ID, p.DType)
		case int64(p.Len) > (math.MaxInt64-total)/int64(p.DType.Size()):
			return fmt.Errorf("paramsync: parameter %q: %d elements of %s take the parameters past %d bytes", p.ID, p.Len, p.DType, int64(math.MaxInt64))
		case p.Sharded && p.Len%s.w.Size() != 0:
			return fmt.Errorf("paramsync: sharded parameter %q: length %d does not divide by %d ranks", p.ID, p.Len, s.w.Size())
		}
		if j, dup := index[p.ID]; dup {
			return fmt.Errorf("paramsync: parameters %d and %d are both %q", j, i, p.ID)
		}
		index[p.ID] = i
		total += int64(p.Len) * int64(p.DType.Size())
	}
	s.params, s.index = slices.Clone(params), index
	s.buckets = makeBuckets(params, s.cfg.BucketBytes)
	return nil
}

// makeBuckets fills buckets in reverse order of the list, keeping
// replicated and sharded parameters apart.
func makeBuckets(params []Param, limit int64) []Bucket {
	var out []Bucket
	open := map[bool]int{false: -1, true: -1}
	for i := len(params) - 1; i >= 0; i-- {
		p := params[i]
		b := open[p.Sharded]
		if b < 0 || out[b].Bytes >= limit {
			out = append(out, Bucket{Sharded: p.Sharded})
			b = len(out) - 1
			open[p.Sharded] = b
		}
		out[b].Params = append(out[b].Params, i)
		out[b].Bytes += int64(p.Len) * int64(p.DType.Size())
	}
	return out
}

func sameList(want, got []Param) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d parameters, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("parameter %d is %+v, want %+v", i, got[i], want[i])
		}
	}
	return nil
}

// Buckets returns the bucket layout (the same on every rank).
func (s *Server) Buckets() []Bucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.buckets)
}

func (s *Server) resetRound(st *rankState) {
	clear(st.have)
	clear(st.grads)
	clear(st.ready)
	for b, bk := range s.buckets {
		st.missing[b] = len(bk.Params)
	}
	st.launched = 0
}

// SubmitGradient hands rank's gradient for id to the server; ready is
// reached when the gradient has been computed (nil: already). When it
// completes a bucket, the bucket's collectives are enqueued at once. The
// gradient is averaged in place (sharded: rank r's shard of it).
func (s *Server) SubmitGradient(rank int, id string, grad hw.Buffer, ready hw.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.rank(rank)
	if err != nil {
		return err
	}
	if !st.registered {
		return fmt.Errorf("paramsync: rank %d submitted %q before registering", rank, id)
	}
	if st.failed != nil {
		return st.failed
	}
	i, ok := s.index[id]
	if !ok {
		return fmt.Errorf("%w: rank %d submitted %q", ErrUnregistered, rank, id)
	}
	p := s.params[i]
	if st.have[i] {
		return fmt.Errorf("%w: rank %d, %q", ErrDuplicate, rank, id)
	}
	dev, _ := s.w.Device(rank)
	switch {
	case grad == nil:
		return fmt.Errorf("%w: rank %d, %q: nil gradient", ErrMismatch, rank, id)
	case grad.Len() != p.Len || grad.DType() != p.DType:
		return fmt.Errorf("%w: rank %d, %q: gradient is %d x %s, registered %d x %s", ErrMismatch, rank, id, grad.Len(), grad.DType(), p.Len, p.DType)
	case grad.Device() != dev:
		return fmt.Errorf("%w: rank %d, %q: gradient lives on %s, not %s", ErrMismatch, rank, id, grad.Device().Name(), dev.Name())
	}
	if j := slices.Index(st.grads, grad); j >= 0 && st.have[j] {
		// Averaged in place: one buffer for two parameters would be
		// averaged twice, the second time from the first's result.
		return fmt.Errorf("%w: rank %d, %q: its gradient is the buffer already submitted for %q", ErrMismatch, rank, id, s.params[j].ID)
	}
	st.have[i], st.grads[i], st.ready[i] = true, grad, ready
	st.missing[s.bucketOf(i)]--
	// Buckets launch in index order on every rank, as DDP's do: collectives
	// of a rank run in the order they were enqueued, so ranks that
	// launched complete buckets in different orders would wait on each
	// other forever.
	for st.launched < len(s.buckets) && st.missing[st.launched] == 0 {
		if err := s.launch(rank, st, st.launched); err != nil {
			st.failed = fmt.Errorf("paramsync: rank %d: bucket %d failed to launch, so this step cannot finish: %w", rank, st.launched, err)
			s.changed.Broadcast()
			return st.failed
		}
		st.launched++
	}
	if !slices.Contains(st.have, false) {
		st.submitted = st.round + 1
		s.changed.Broadcast()
	}
	return nil
}

func (s *Server) bucketOf(param int) int {
	for b, bk := range s.buckets {
		if slices.Contains(bk.Params, param) {
			return b
		}
	}
	return -1
}

// launch enqueues bucket b's collectives on rank's streams, behind the
// ready events of its gradients.
func (s *Server) launch(rank int, st *rankState, b int) error {
	var after []hw.Event
	for _, i := range s.buckets[b].Params {
		if st.ready[i] != nil {
			after = append(after, st.ready[i])
		}
	}
	for _, i := range s.buckets[b].Params {
		plan, err := s.plan(s.params[i])
		if err != nil {
			return err
		}
		whole := hw.Whole(st.grads[i])
		in, out := plan.InPlace(rank, whole)
		end, err := s.exec.Enqueue(plan, rank, in, out, after...)
		if err != nil {
			return fmt.Errorf("paramsync: rank %d, %q: %w", rank, s.params[i].ID, err)
		}
		after, st.done[b] = nil, end
	}
	return nil
}

// plan is the averaged all-reduce (or reduce-scatter) of one parameter.
func (s *Server) plan(p Param) (*ops.Plan, error) {
	spec := ops.Spec{Op: ops.AllReduce, Algo: s.cfg.Algo, Ranks: s.w.Size(), Count: p.Len, DType: p.DType, Redop: hw.Avg}
	if p.Sharded {
		spec.Op, spec.Count = ops.ReduceScatter, p.Len/s.w.Size()
		spec.Algo = s.algoFor(ops.ReduceScatter)
	}
	return s.compiled(p, spec)
}

// compiled is spec's plan, made once per spec: chosen by cost under auto.
// p names the parameter in an error.
func (s *Server) compiled(p Param, spec ops.Spec) (*ops.Plan, error) {
	if plan, ok := s.plans[spec]; ok {
		return plan, nil
	}
	var plan *ops.Plan
	var err error
	switch {
	case s.cfg.Planner != nil:
		if plan, err = s.cfg.Planner(spec); err == nil {
			err = spec.Made(plan)
		}
	case spec.Algo == "auto":
		plan, _, err = ops.Select(spec, s.cfg.Cost)
	default:
		plan, err = ops.Compile(spec)
	}
	if err != nil {
		return nil, fmt.Errorf("paramsync: %q: %w", p.ID, err)
	}
	plan = plan.Refined() // a planner's plan made coarse to be folded runs finer
	s.plans[spec] = plan
	return plan, nil
}

// Plan returns the plan that averages the registered parameter id's
// gradient (its reduce-scatter when sharded), compiling it if no bucket
// has yet: what auto or a planner chose for it.
func (s *Server) Plan(id string) (*ops.Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	i, ok := s.index[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnregistered, id)
	}
	return s.plan(s.params[i])
}

// BucketDone returns the event recorded when bucket b's collectives
// finished on rank in the current step (nil before it was launched).
func (s *Server) BucketDone(rank, b int) hw.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rank < 0 || rank >= len(s.ranks) || b < 0 || b >= len(s.ranks[rank].done) {
		return nil
	}
	return s.ranks[rank].done[b]
}

// Sync waits until every rank has submitted every gradient of this step
// (up to Config.Timeout, then an error naming what is missing), then until
// rank's buckets have been reduced and its gathers (GatherParams) have
// run, and starts rank's next step. A bucket that failed to launch on any
// rank fails it at once: the server is then of no more use.
func (s *Server) Sync(rank int) error {
	s.mu.Lock()
	st, err := s.rank(rank)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	if !st.registered {
		s.mu.Unlock()
		return fmt.Errorf("paramsync: rank %d syncs without registering", rank)
	}
	deadline := time.Now().Add(s.cfg.Timeout)
	timer := time.AfterFunc(s.cfg.Timeout, func() {
		s.mu.Lock()
		s.changed.Broadcast()
		s.mu.Unlock()
	})
	defer timer.Stop()
	for !s.allSubmitted(st.round) {
		if s.closed {
			s.mu.Unlock()
			return ErrClosed
		}
		if err := s.failedLaunch(); err != nil {
			s.mu.Unlock()
			return err
		}
		if !time.Now().Before(deadline) {
			err := fmt.Errorf("%w: rank %d: after %v, %s", ErrTimeout, rank, s.cfg.Timeout, s.missingReport(st.round))
			s.mu.Unlock()
			return err
		}
		s.changed.Wait()
	}
	s.mu.Unlock()
	if err := s.synchronize(rank); err != nil {
		return fmt.Errorf("paramsync: rank %d: %w", rank, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetRound(st)
	st.round++
	return nil
}

// failedLaunch is the first rank's bucket that failed to launch, which
// every rank's Sync reports: the ranks that did launch wait on its
// messages.
func (s *Server) failedLaunch() error {
	for _, st := range s.ranks {
		if st.failed != nil {
			return st.failed
		}
	}
	return nil
}

// allSubmitted reports whether every rank submitted round's gradients.
func (s *Server) allSubmitted(round int) bool {
	for _, st := range s.ranks {
		if !st.registered || st.submitted <= round {
			return false
		}
	}
	return true
}

// missingReport names the ranks and gradients still missing for round.
func (s *Server) missingReport(round int) string {
	var parts []string
	for r, st := range s.ranks {
		switch {
		case !st.registered:
			parts = append(parts, fmt.Sprintf("rank %d has not registered", r))
		case st.submitted <= round && st.round == round:
			var ids []string
			for i, ok := range st.have {
				if !ok {
					ids = append(ids, s.params[i].ID)
				}
			}
			sort.Strings(ids)
			parts = append(parts, fmt.Sprintf("rank %d is missing %s", r, strings.Join(ids, ", ")))
		}
	}
	return "gradients never submitted: " + strings.Join(parts, "; ")
}

// GatherParams enqueues the all-gather of a sharded parameter on rank: on
// entry rank r holds its shard at [r·Len/p, (r+1)·Len/p) of param, on
// completion all of it. Every rank must call it, in the same order (a
// rank that gathers another parameter than the others did at that point
// is refused with ErrMismatch), before any rank waits on the result with
// Wait.
func (s *Server) GatherParams(rank int, id string, param hw.Buffer) error {
	_, _, err := s.GatherParamsAfter(rank, id, param)
	return err
}

// gatherInTurn holds rank's next all-gather, of id, to the one the ranks
// before it called at that point: the k-th all-gathers of the ranks run
// as one collective, so two parameters gathered in different orders would
// swap their shards, with no error. The caller holds s.mu, as for
// tookGatherTurn.
func (s *Server) gatherInTurn(rank int, id string) error {
	st := s.ranks[rank]
	if k := st.gathers - s.gathered; k < len(s.gathers) && s.gathers[k].id != id {
		first := s.gathers[k]
		return fmt.Errorf("%w: rank %d's all-gather %d is of %q, rank %d's was of %q: ranks must gather parameters in the same order",
			ErrMismatch, rank, st.gathers, id, first.rank, first.id)
	}
	return nil
}

// tookGatherTurn counts rank's all-gather of id, enqueued in its turn.
func (s *Server) tookGatherTurn(rank int, id string) {
	st := s.ranks[rank]
	if st.gathers-s.gathered == len(s.gathers) {
		s.gathers = append(s.gathers, gatherCall{id, rank})
	}
	st.gathers++
	// Forget the gathers every rank has called.
	least := st.gathers
	for _, other := range s.ranks {
		least = min(least, other.gathers)
	}
	if drop := least - s.gathered; drop > 0 {
		s.gathers = slices.Delete(s.gathers, 0, drop)
		s.gathered = least
	}
}

// GatherParamsAfter is GatherParams behind the events in after (nil ones
// are none), returning
// the events recorded when rank's part starts and ends: FSDP gathers a
// layer's parameters while the layer before it computes, and the layer's
// compute waits for the end.
func (s *Server) GatherParamsAfter(rank int, id string, param hw.Buffer, after ...hw.Event) (start, end hw.Event, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.rank(rank); err != nil {
		return nil, nil, err
	}
	i, ok := s.index[id]
	if !ok {
		return nil, nil, fmt.Errorf("%w: rank %d gathers %q", ErrUnregistered, rank, id)
	}
	p := s.params[i]
	if !p.Sharded {
		return nil, nil, fmt.Errorf("paramsync: %q is not sharded", id)
	}
	if param == nil || param.Len() != p.Len || param.DType() != p.DType {
		return nil, nil, fmt.Errorf("%w: rank %d, %q: parameter buffer does not match %d x %s", ErrMismatch, rank, id, p.Len, p.DType)
	}
	plan, err := s.gatherPlan(p)
	if err != nil {
		return nil, nil, err
	}
	if err := s.gatherInTurn(rank, id); err != nil {
		return nil, nil, err
	}
	in, out := plan.InPlace(rank, hw.Whole(param))
	if start, end, err = s.gatherExec.EnqueueTimed(plan, rank, in, out, after...); err == nil {
		s.tookGatherTurn(rank, id)
	}
	return start, end, err
}

// gatherPlan is the all-gather of one sharded parameter, chosen by cost
// under auto as the reductions are.
func (s *Server) gatherPlan(p Param) (*ops.Plan, error) {
	return s.compiled(p, ops.Spec{Op: ops.AllGather, Algo: s.algoFor(ops.AllGather), Ranks: s.w.Size(), Count: p.Len / s.w.Size(), DType: p.DType})
}

// algoFor is the algorithm named in op's specs: the planner's name for
// every op, else AlgoFor's.
func (s *Server) algoFor(op ops.Op) string {
	if s.cfg.Planner != nil {
		return s.cfg.Algo
	}
	return AlgoFor(op, s.cfg.Algo)
}

// AlgoFor is the algorithm the server uses for op when configured with
// algo: algo itself when it implements op (or is auto), else ring. (rd,
// tree and dbtree have no reduce-scatter; sharded parameters fall back.)
func AlgoFor(op ops.Op, algo string) string {
	if algo == "auto" || slices.Contains(ops.AlgorithmsFor(op), algo) {
		return algo
	}
	return "ring"
}

// Wait waits for everything enqueued on rank (gathers included).
func (s *Server) Wait(rank int) error {
	s.mu.Lock()
	_, err := s.rank(rank)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.synchronize(rank)
}

// synchronize waits for rank's reductions and gathers, and returns the
// first failure, the reductions' first.
func (s *Server) synchronize(rank int) error {
	reduced, gathered := s.exec.Synchronize(rank), s.gatherExec.Synchronize(rank)
	return cmp.Or(reduced, gathered)
}
