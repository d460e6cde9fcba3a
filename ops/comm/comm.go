// Package comm gives every rank its own communicator handle, as NCCL and
// MPI do: ranks (usually one goroutine each) call collectives
// independently; the k-th call of every rank forms slot k; the calls of a
// slot are matched and checked against each other before any data moves,
// and then run together as one ops plan on the world.
//
// This is where the two failures users hate most become errors:
//
//   - ranks that ask for different collectives, counts, dtypes, reduce ops
//     or roots in the same slot get a *MismatchError naming every rank and
//     what it asked for;
//   - a slot that some rank never joins does not hang: after
//     Config.Timeout every waiting rank gets a *TimeoutError naming the
//     ranks that did not come and what the others asked for. A rank that
//     comes later gets the same error for that call, its k-th call being
//     slot k: ranks whose calls fell out of step stay so, each slot timing
//     out, so a *TimeoutError, like a *StuckError, calls for Close and a
//     new communicator, as NCCL's errors call for ncclCommAbort.
//
// The timeout is host (wall-clock) time and only bounds waiting; it never
// enters simulated results.
package comm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// DefaultTimeout bounds how long a rank waits for the others when
// Config.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// DefaultRunTimeout bounds how long a collective may run once every rank
// has joined, when Config.RunTimeout is 0.
const DefaultRunTimeout = 5 * time.Minute

// ErrClosed is returned by calls on a closed communicator.
var ErrClosed = errors.New("comm: closed")

// Config tunes a communicator.
type Config struct {
	// Timeout is how long a rank waits in a slot for the other ranks.
	Timeout time.Duration
	// RunTimeout is the watchdog on a collective that every rank joined:
	// past it, devices that implement hw.Aborter are aborted and the call
	// returns a *StuckError naming the ranks that had not finished. An
	// abort is the device's: it ends the work of every communicator and
	// gradient server on those devices, as ncclCommAbort ends its
	// streams'. It does not watch algorithm native, which the backend's
	// library runs.
	RunTimeout time.Duration
	// Algo is the algorithm for calls that leave Call.Algo empty; default
	// "auto" when Cost is set, else "ring" for the collectives ring runs
	// and, for the others, the first of ops.AlgorithmsFor (tree for
	// gather, direct for all-to-all and send/recv, rd for barrier).
	Algo string
	// Cost prices plans for "auto".
	Cost ops.CostModel
	// Planner, when set, makes every call's plan in place of its
	// algorithm, which then only names it: nccl.Tuner's Plan, say, runs
	// each call as NCCL's tuner would (algorithm, protocol and channels
	// by size), which Algo "nccl-ring" alone does not.
	Planner func(ops.Spec) (*ops.Plan, error)
	// Driver puts the collectives on the world's streams; nil is ops'
	// generic driver. On the simulator, simexec.NewDriver feeds plans as
	// the streams drain, and times the plans of package nccl as they move
	// (the generic driver refuses those on the simulator).
	Driver ops.Driver
}

// Call is what one rank asks for. Count follows ops.Spec's meaning per op.
type Call struct {
	Op    ops.Op
	Algo  string
	Count int
	DType hw.DType
	Redop hw.ReduceOp
	Root  int
}

func (c Call) String() string {
	s := fmt.Sprintf("%s count=%d %s", c.Op, c.Count, c.DType)
	if c.Op.Reduces() {
		s += " " + c.Redop.String()
	}
	if c.Op.Rooted() {
		s += fmt.Sprintf(" root=%d", c.Root)
	}
	if c.Algo != "" {
		s += " algo=" + c.Algo
	}
	return s
}

// Comm is a communicator over a world.
type Comm struct {
	w    *hw.World
	cfg  Config
	exec *ops.Executor

	mu     sync.Mutex
	next   []int         // per rank: its next slot
	slots  map[int]*slot // open slots
	closed bool
	// running counts the collectives under way, whose last to end after
	// Close lets go of the executor's library communicator.
	running int
	// empty is each rank's buffer of no bytes, made at its first
	// barrier called without buffers. It is never freed: it holds
	// nothing, and a barrier's streams may still drain after Close.
	empty []hw.Buffer
}

// slot gathers the calls of one round.
type slot struct {
	id      int
	calls   []*Call // per rank; nil until the rank arrives
	in, out []hw.Slice
	after   [][]hw.Event // per rank: what its part waits for
	arrived int
	done    chan struct{}
	err     error
	seconds float64
}

// New makes a communicator over w.
func New(w *hw.World, cfg Config) (*Comm, error) {
	if w == nil {
		return nil, fmt.Errorf("comm: nil world")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("comm: negative timeout %v", cfg.Timeout)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.RunTimeout < 0 {
		return nil, fmt.Errorf("comm: negative run timeout %v", cfg.RunTimeout)
	}
	if cfg.RunTimeout == 0 {
		cfg.RunTimeout = DefaultRunTimeout
	}
	if cfg.Algo == "" && cfg.Cost != nil {
		cfg.Algo = "auto"
	}
	if err := checkAlgo(cfg); err != nil {
		return nil, err
	}
	// A world of its own keeps its messages from matching another
	// communicator's, or a paramsync server's, on the same devices.
	own, err := w.Dup()
	if err != nil {
		return nil, fmt.Errorf("comm: %w", err)
	}
	n := own.Size()
	return &Comm{w: own, cfg: cfg, exec: ops.NewExecutorWith(own, cfg.Driver), next: make([]int, n), slots: map[int]*slot{}, empty: make([]hw.Buffer, n)}, nil
}

// defaultAlgo is the algorithm of a call of op that names none.
func (cfg Config) defaultAlgo(op ops.Op) string {
	if cfg.Algo != "" {
		return cfg.Algo
	}
	if ops.Runs("ring", op) {
		return "ring"
	}
	for _, a := range ops.AlgorithmsFor(op) {
		if !ops.IsNCCL(a) {
			return a
		}
	}
	return "ring" // no algorithm runs op: Compile says why
}

// checkAlgo refuses a Config.Algo that no call could run, when the
// communicator is made rather than at its first collective. Each op is
// checked against it only when called: one algorithm rarely has them all.
func checkAlgo(cfg Config) error {
	known := ops.Algorithms()
	switch {
	case cfg.Planner != nil:
		return nil
	case cfg.Algo == "auto" && cfg.Cost == nil:
		return fmt.Errorf("comm: algorithm auto needs Config.Cost")
	case cfg.Algo == "" || cfg.Algo == "auto" || cfg.Algo == ops.Native || slices.Contains(known, cfg.Algo):
		return nil
	}
	return fmt.Errorf("comm: unknown algorithm %q (want auto, %s or one of %s)", cfg.Algo, ops.Native, strings.Join(known, ", "))
}

// Close fails every open slot and later calls with ErrClosed, and lets go
// of the backend library's communicator (algorithm native): at once, or,
// if a collective is running, when the last one ends.
func (c *Comm) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	for _, s := range c.slots {
		if s.err == nil {
			s.err = ErrClosed
			close(s.done)
		}
	}
	release := c.running == 0
	c.mu.Unlock()
	if release {
		return c.exec.Close()
	}
	return nil
}

// Do is rank's next collective: it blocks until every rank has made its
// matching call and the collective has run, and returns the collective's
// time in seconds. in and out follow ops.Executor.Run (in place when they
// overlap as NCCL's in-place calls do). The rank's part starts once the
// events in after are reached (nil ones are none), as NCCL's call follows
// the work before it on its stream: a gradient's all-reduce after the
// compute that makes it, enqueued but not waited for. Its time is from
// that start. Native plans take no events.
func (c *Comm) Do(rank int, call Call, in, out hw.Slice, after ...hw.Event) (float64, error) {
	if call.Algo == "" {
		call.Algo = c.cfg.defaultAlgo(call.Op)
	}
	// A root or reduction that the op does not read is no disagreement
	// (NCCL ignores them too), and Call.String would not show it.
	if !call.Op.Rooted() {
		call.Root = 0
	}
	if !call.Op.Reduces() {
		call.Redop = 0
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, ErrClosed
	}
	if rank < 0 || rank >= c.w.Size() {
		c.mu.Unlock()
		return 0, fmt.Errorf("comm: rank %d not in 0..%d", rank, c.w.Size()-1)
	}
	if call.Op == ops.Barrier && in.Buf == nil && out.Buf == nil {
		var err error
		if in, err = c.emptyOn(rank); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		out, call.DType = in, in.DType()
	}
	id := c.next[rank]
	c.next[rank]++
	s := c.slots[id]
	if s == nil {
		n := c.w.Size()
		s = &slot{id: id, calls: make([]*Call, n), in: make([]hw.Slice, n), out: make([]hw.Slice, n), after: make([][]hw.Event, n), done: make(chan struct{})}
		c.slots[id] = s
	}
	if s.err != nil { // the slot already failed (timed out or closed)
		s.calls[rank] = &call
		err := s.err
		c.mu.Unlock()
		if timeout := (*TimeoutError)(nil); errors.As(err, &timeout) && slices.Contains(timeout.Missing, rank) {
			return 0, fmt.Errorf("comm: rank %d came to slot %d after it had timed out: %w", rank, id, err)
		}
		return 0, err
	}
	s.calls[rank], s.in[rank], s.out[rank] = &call, in, out
	s.after[rank] = slices.Clone(after)
	if err := c.checkCall(call); err != nil {
		// Found at once, not when the others come: the slot fails for
		// every rank, those waiting and those still to come.
		s.err = fmt.Errorf("comm: slot %d: rank %d asked for %v: %w", id, rank, call, err)
		close(s.done)
		c.mu.Unlock()
		return 0, s.err
	}
	s.arrived++
	last := s.arrived == c.w.Size()
	if last {
		delete(c.slots, id)
		c.running++
	}
	c.mu.Unlock()
	// A slot that failed stays in c.slots, so ranks arriving late get its
	// error rather than opening a new slot with the same number.

	if last {
		secs, err := c.run(s)
		c.mu.Lock()
		s.seconds, s.err = secs, err
		close(s.done)
		c.running--
		release := c.closed && c.running == 0
		c.mu.Unlock()
		if release {
			c.exec.Close() // the communicator is closed: no one to tell
		}
		return secs, err
	}
	timer := time.NewTimer(c.cfg.Timeout)
	defer timer.Stop()
	select {
	case <-s.done:
		return s.seconds, s.err
	case <-timer.C:
	}
	c.mu.Lock()
	if s.arrived == c.w.Size() || s.err != nil {
		// Everyone came (the collective is running) or another rank
		// already failed the slot: its outcome is on the way.
		c.mu.Unlock()
		<-s.done
		return s.seconds, s.err
	}
	s.err = s.timeout(c.cfg.Timeout)
	close(s.done)
	c.mu.Unlock()
	return 0, s.err
}

// emptyOn is rank's buffer of no bytes, for a barrier, which moves
// nothing but whose executor, like every backend, wants its messages'
// buffers named. The caller holds c.mu.
func (c *Comm) emptyOn(rank int) (hw.Slice, error) {
	if c.empty[rank] == nil {
		dev, err := c.w.Device(rank)
		if err != nil {
			return hw.Slice{}, fmt.Errorf("comm: barrier: %w", err)
		}
		if c.empty[rank], err = dev.Alloc(hw.U8, 0); err != nil {
			return hw.Slice{}, fmt.Errorf("comm: barrier on rank %d: %w", rank, err)
		}
	}
	return hw.Whole(c.empty[rank]), nil
}

// checkCall checks what a call says alone: the collective, its count,
// element type, reduction and root on the communicator's ranks. Whether
// the ranks agree, and their buffers, are checked when all have called.
func (c *Comm) checkCall(call Call) error {
	spec := ops.Spec{Op: call.Op, Ranks: c.w.Size(), Count: call.Count, Root: call.Root, DType: call.DType, Redop: call.Redop}
	return spec.Validate()
}

// run checks a full slot and executes it.
func (c *Comm) run(s *slot) (float64, error) {
	if err := s.mismatch(); err != nil {
		return 0, err
	}
	call := *s.calls[0]
	spec := ops.Spec{Op: call.Op, Algo: call.Algo, Ranks: c.w.Size(), Count: call.Count, Root: call.Root, DType: call.DType, Redop: call.Redop}
	var plan *ops.Plan
	var err error
	switch {
	case c.cfg.Planner != nil:
		if plan, err = c.cfg.Planner(spec); err == nil {
			err = spec.Made(plan)
		}
	case spec.Algo == "auto":
		if c.cfg.Cost == nil {
			return 0, fmt.Errorf("comm: slot %d: algorithm auto needs Config.Cost", s.id)
		}
		plan, _, err = ops.Select(spec, c.cfg.Cost)
	default:
		plan, err = ops.Compile(spec)
	}
	if err != nil {
		return 0, fmt.Errorf("comm: slot %d: %w", s.id, err)
	}
	plan = plan.Refined() // a planner's plan made coarse to be folded runs finer
	if plan.Algo == ops.Native {
		// The library launches every rank at once (Run), not rank by
		// rank, and its communicator has no watchdog of this package's.
		for r, after := range s.after {
			if slices.ContainsFunc(after, func(ev hw.Event) bool { return ev != nil }) {
				return 0, fmt.Errorf("comm: slot %d: rank %d: %w: algorithm %s takes no events to wait for", s.id, r, ops.ErrUnsupported, ops.Native)
			}
		}
		secs, err := c.exec.Run(plan, s.in, s.out)
		if err != nil {
			return 0, fmt.Errorf("comm: slot %d: %w", s.id, err)
		}
		return secs, nil
	}
	return c.watch(s.id, plan, s.in, s.out, s.after)
}

// watch runs plan on every rank under the watchdog: each rank's part is
// enqueued behind the rank's events in after, then waited for in its own
// goroutine; if some rank has not finished after Config.RunTimeout, the
// devices are aborted (hw.Aborter) and a *StuckError names the ranks
// still running.
func (c *Comm) watch(slot int, plan *ops.Plan, in, out []hw.Slice, after [][]hw.Event) (float64, error) {
	if err := c.exec.CheckRun(plan, in, out); err != nil {
		return 0, fmt.Errorf("comm: slot %d: %w", slot, err)
	}
	p := plan.Ranks
	starts, ends := make([]hw.Event, p), make([]hw.Event, p)
	for r := range p {
		var err error
		if starts[r], ends[r], err = c.exec.EnqueueTimed(plan, r, in[r], out[r], after[r]...); err != nil {
			err = fmt.Errorf("comm: slot %d: rank %d: %w", slot, r, err)
			if r > 0 {
				// The ranks enqueued wait for this one's messages.
				c.abortAll(err)
			}
			return 0, err
		}
	}
	type done struct {
		rank int
		err  error
	}
	finished := make(chan done, p)
	for r := range p {
		go func() { finished <- done{r, c.exec.Synchronize(r)} }()
	}
	timer := time.NewTimer(c.cfg.RunTimeout)
	defer timer.Stop()
	ok := make([]bool, p)
	errs := make([]error, p)
	for n := 0; n < p; n++ {
		select {
		case d := <-finished:
			ok[d.rank], errs[d.rank] = true, d.err
		case <-timer.C:
			stuck := &StuckError{Slot: slot, Op: plan.Spec, After: c.cfg.RunTimeout}
			for r, fin := range ok {
				if !fin {
					stuck.Ranks = append(stuck.Ranks, r)
				}
			}
			// Its streams may still be draining in the goroutines above.
			stuck.Aborted = c.abortAll(fmt.Errorf("comm: watchdog: slot %d (%v) ran past %v", slot, plan.Spec, c.cfg.RunTimeout))
			return 0, stuck
		}
	}
	if err := ops.JoinRankErrors(errs); err != nil {
		return 0, fmt.Errorf("comm: slot %d: %w", slot, err)
	}
	longest := 0.0
	for r := range p {
		t, err := ends[r].ElapsedSince(starts[r])
		if err != nil {
			return 0, fmt.Errorf("comm: slot %d: rank %d timing: %w", slot, r, err)
		}
		longest = max(longest, t)
	}
	return longest, nil
}

// abortAll aborts every device that can be aborted, counts them, and
// closes the communicator: like an aborted NCCL communicator, it is
// finished, its ranks' parts of a collective left waiting or stuck.
func (c *Comm) abortAll(reason error) int {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	n := 0
	for _, d := range c.w.Devices() {
		if a, ok := hw.As[hw.Aborter](d); ok && a.Abort(reason) == nil {
			n++
		}
	}
	return n
}

// StuckError reports a collective that every rank joined but that did not
// finish within Config.RunTimeout. The communicator is closed after it.
type StuckError struct {
	Slot    int
	Op      ops.Spec
	After   time.Duration
	Ranks   []int // ranks whose part had not finished
	Aborted int   // devices aborted through hw.Aborter
}

func (e *StuckError) Error() string {
	return fmt.Sprintf("comm: slot %d: %v did not finish within %v: %s still running; aborted %d device(s)",
		e.Slot, e.Op, e.After, rankList(e.Ranks), e.Aborted)
}

// MismatchError reports ranks that asked for different collectives in one
// slot. Calls[r] is rank r's request.
type MismatchError struct {
	Slot  int
	Calls []Call
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("comm: slot %d: ranks disagree: %s", e.Slot, groupRanks(e.Calls, nil))
}

// TimeoutError reports a slot that some ranks never joined.
type TimeoutError struct {
	Slot    int
	After   time.Duration
	Missing []int
	Calls   []*Call // nil for the missing ranks
}

func (e *TimeoutError) Error() string {
	var present []Call
	var who []int
	for r, c := range e.Calls {
		if c != nil {
			present = append(present, *c)
			who = append(who, r)
		}
	}
	return fmt.Sprintf("comm: slot %d: %s never called within %v; %s", e.Slot, rankList(e.Missing), e.After, groupRanks(present, who))
}

func (s *slot) mismatch() error {
	first := *s.calls[0]
	for _, c := range s.calls[1:] {
		if *c != first {
			calls := make([]Call, len(s.calls))
			for r, c := range s.calls {
				calls[r] = *c
			}
			return &MismatchError{Slot: s.id, Calls: calls}
		}
	}
	return nil
}

func (s *slot) timeout(after time.Duration) error {
	var missing []int
	for r, c := range s.calls {
		if c == nil {
			missing = append(missing, r)
		}
	}
	return &TimeoutError{Slot: s.id, After: after, Missing: missing, Calls: slices.Clone(s.calls)}
}

// groupRanks prints "ranks 0-2,4 asked for X; rank 3 asked for Y", in
// the order each request first appears. who[i] is the rank of calls[i]
// (nil: calls are indexed by rank).
func groupRanks(calls []Call, who []int) string {
	var order []Call
	ranks := map[Call][]int{}
	for i, c := range calls {
		r := i
		if who != nil {
			r = who[i]
		}
		if _, ok := ranks[c]; !ok {
			order = append(order, c)
		}
		ranks[c] = append(ranks[c], r)
	}
	var parts []string
	for _, c := range order {
		parts = append(parts, fmt.Sprintf("%s asked for %v", rankList(ranks[c]), c))
	}
	return strings.Join(parts, "; ")
}

// rankList prints "rank 3" or "ranks 0, 1, 4".
func rankList(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	var s []string
	for _, r := range rs {
		s = append(s, fmt.Sprint(r))
	}
	return "ranks " + strings.Join(s, ", ")
}
