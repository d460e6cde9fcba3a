package paramsync_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/paramsync"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

func cluster(t testing.TB, p int, cfg sim.Config) *sim.Cluster {
	t.Helper()
	topo, err := topology.Parse(fmt.Sprintf("switch:%d,bw=50GB/s,lat=1us,reduce=500GB/s", p))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// scenario is a random parameter list, bucket size, algorithm and
// submission order, built from one seed so gopter can shrink the seed.
type scenario struct {
	p       int
	algo    string
	bucket  int64
	params  []paramsync.Param
	order   [][]int // per rank: the order gradients are submitted
	inputs  [][][]byte
	dtype   hw.DType
	sharded bool
}

func newScenario(seed uint64) scenario {
	rng := rand.New(rand.NewPCG(seed, 7))
	algos := []string{"ring", "rd", "rhd", "direct", "tree", "dbtree"}
	s := scenario{p: 1 + rng.IntN(6), algo: algos[rng.IntN(len(algos))], bucket: 8 << rng.IntN(10)}
	s.dtype = []hw.DType{hw.F32, hw.BF16, hw.I32}[rng.IntN(3)]
	for i := range 1 + rng.IntN(8) {
		sharded := rng.IntN(3) == 0
		n := 1 + rng.IntN(300)
		if sharded {
			n = s.p * (1 + rng.IntN(40))
			s.sharded = true
		}
		s.params = append(s.params, paramsync.Param{ID: fmt.Sprintf("layer%d.w", i), Len: n, DType: s.dtype, Sharded: sharded})
	}
	for r := range s.p {
		s.order = append(s.order, rng.Perm(len(s.params)))
		var grads [][]byte
		for _, pr := range s.params {
			vals := make([]float64, pr.Len)
			for k := range vals {
				vals[k] = float64(rng.IntN(2001)-1000) / 7
				if s.dtype == hw.I32 {
					vals[k] = float64(rng.IntN(2001) - 1000)
				}
			}
			raw, _ := hw.FromFloat64s(s.dtype, vals)
			grads = append(grads, raw)
		}
		s.inputs = append(s.inputs, grads)
		_ = r
	}
	return s
}

// withServer runs the scenario through paramsync and returns every rank's
// gradients afterwards.
func (s scenario) withServer(t testing.TB) ([][][]byte, error) {
	c := cluster(t, s.p, sim.Config{})
	srv, err := paramsync.Start(c.World(), paramsync.Config{BucketBytes: s.bucket, Algo: s.algo})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	grads := make([][]hw.Buffer, s.p)
	for r, d := range c.Devices() {
		if err := srv.Register(r, s.params); err != nil {
			return nil, err
		}
		for i, pr := range s.params {
			b, _ := d.Alloc(pr.DType, pr.Len)
			b.Write(s.inputs[r][i])
			grads[r] = append(grads[r], b)
		}
	}
	for r := range s.p {
		for _, i := range s.order[r] {
			if err := srv.SubmitGradient(r, s.params[i].ID, grads[r][i], nil); err != nil {
				return nil, err
			}
		}
	}
	for r := range s.p {
		if err := srv.Sync(r); err != nil {
			return nil, err
		}
	}
	return readAll(grads)
}

// plain reduces each gradient on its own with the same plan.
func (s scenario) plain(t testing.TB) ([][][]byte, error) {
	c := cluster(t, s.p, sim.Config{})
	e := ops.NewExecutor(c.World())
	grads := make([][]hw.Buffer, s.p)
	for r, d := range c.Devices() {
		for i, pr := range s.params {
			b, _ := d.Alloc(pr.DType, pr.Len)
			b.Write(s.inputs[r][i])
			grads[r] = append(grads[r], b)
		}
	}
	for i, pr := range s.params {
		spec := ops.Spec{Op: ops.AllReduce, Algo: s.algo, Ranks: s.p, Count: pr.Len, DType: pr.DType, Redop: hw.Avg}
		if pr.Sharded {
			spec.Op, spec.Count = ops.ReduceScatter, pr.Len/s.p
			spec.Algo = paramsync.AlgoFor(ops.ReduceScatter, s.algo)
		}
		plan, err := ops.Compile(spec)
		if err != nil {
			return nil, err
		}
		in, out := make([]hw.Slice, s.p), make([]hw.Slice, s.p)
		for r := range s.p {
			in[r], out[r] = plan.InPlace(r, hw.Whole(grads[r][i]))
		}
		if _, err := e.Run(plan, in, out); err != nil {
			return nil, err
		}
	}
	return readAll(grads)
}

func readAll(grads [][]hw.Buffer) ([][][]byte, error) {
	out := make([][][]byte, len(grads))
	for r, bs := range grads {
		for _, b := range bs {
			raw := make([]byte, b.Len()*b.DType().Size())
			if err := b.Read(raw); err != nil {
				return nil, err
			}
			out[r] = append(out[r], raw)
		}
	}
	return out, nil
}

// TestBitIdenticalToPlainAllReduce: whatever the parameters, bucket size
// and order of submission, the synchronised gradients equal a plain
// averaged all-reduce (reduce-scatter for sharded ones) of each gradient
// with the same plan, bit for bit.
func TestBitIdenticalToPlainAllReduce(t *testing.T) {
	params := gopter.DefaultTestParameters()
	params.MinSuccessfulTests = 150
	params.Rng.Seed(1)
	props := gopter.NewProperties(params)
	props.Property("paramsync = per-gradient all-reduce", prop.ForAll(func(seed uint64) string {
		s := newScenario(seed)
		got, err := s.withServer(t)
		if err != nil {
			return fmt.Sprintf("paramsync: %v", err)
		}
		want, err := s.plain(t)
		if err != nil {
			return fmt.Sprintf("plain: %v", err)
		}
		for r := range want {
			for i := range want[r] {
				if !bytes.Equal(got[r][i], want[r][i]) {
					return fmt.Sprintf("p=%d algo=%s bucket=%d: rank %d param %s differs", s.p, s.algo, s.bucket, r, s.params[i].ID)
				}
			}
		}
		return ""
	}, gen.UInt64()))
	props.TestingRun(t)
}

func TestBucketsFillInReverseOrderAndSplitSharding(t *testing.T) {
	c := cluster(t, 2, sim.Config{TimingOnly: true})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{BucketBytes: 100})
	params := []paramsync.Param{
		{ID: "a", Len: 10, DType: hw.F32}, {ID: "b", Len: 10, DType: hw.F32, Sharded: true},
		{ID: "c", Len: 20, DType: hw.F32}, {ID: "d", Len: 20, DType: hw.F32},
	}
	if err := srv.Register(0, params); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(srv.Buckets())
	// d (80 B) then c fill bucket 0 past 100 B; a starts bucket 2; b is alone (sharded).
	if want := "[{[3 2] 160 false} {[1] 40 true} {[0] 40 false}]"; got != want {
		t.Fatalf("buckets = %s, want %s", got, want)
	}
}

// TestCommunicationOverlapsCompute: with two buckets, the first one's
// all-reduce runs while the earlier layer is still computing, whether the
// generic driver enqueues it or the simulator's feeds it as the streams
// drain.
func TestCommunicationOverlapsCompute(t *testing.T) {
	for _, fed := range []bool{false, true} {
		communicationOverlapsCompute(t, fed)
	}
}

func communicationOverlapsCompute(t *testing.T, fed bool) {
	c := cluster(t, 4, sim.Config{TimingOnly: true})
	cfg := paramsync.Config{BucketBytes: 1 << 20}
	if fed {
		cfg.Driver = simexec.NewDriver(c)
	}
	srv, _ := paramsync.Start(c.World(), cfg)
	params := []paramsync.Param{{ID: "l0", Len: 1 << 18, DType: hw.F32}, {ID: "l1", Len: 1 << 18, DType: hw.F32}}
	const layer = 50e-6 // backward seconds per layer
	var last []hw.Event
	for r, d := range c.Devices() {
		if err := srv.Register(r, params); err != nil {
			t.Fatal(err)
		}
		compute, _ := d.NewStream()
		for _, i := range []int{1, 0} { // backward: last layer first
			compute.(*sim.Stream).Compute(layer, params[i].ID)
			ev, _ := d.NewEvent()
			compute.Record(ev)
			g, _ := d.Alloc(hw.F32, params[i].Len)
			if err := srv.SubmitGradient(r, params[i].ID, g, ev); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				last = append(last, ev)
			}
		}
	}
	for r := range 4 {
		if err := srv.Sync(r); err != nil {
			t.Fatal(err)
		}
	}
	// Ring all-reduce of 1 MiB on switch:4 (α = 2us, 50 GB/s, 500 GB/s
	// reduce), plus averaging the owned quarter before the all-gather.
	comm := 2*3*2e-6 + 2*0.75*(1<<20)/50e9 + 0.75*(1<<20)/500e9 + 0.25*(1<<20)/500e9
	step := c.Now().Seconds()
	if want := 2*layer + comm; abs(step-want) > 1e-9 {
		t.Fatalf("fed %v: step = %g s, want compute %g + one exposed all-reduce %g", fed, step, 2*layer, comm)
	}
	if step >= 2*layer+2*comm-1e-9 {
		t.Fatal("no overlap: both all-reduces are exposed")
	}
	_ = last
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func TestErrorsCorruptNothing(t *testing.T) {
	c := cluster(t, 2, sim.Config{})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{Timeout: 30 * time.Millisecond})
	params := []paramsync.Param{{ID: "w", Len: 4, DType: hw.F32}, {ID: "b", Len: 2, DType: hw.F32}}
	d := c.Devices()
	g := func(r, n int, dt hw.DType) hw.Buffer { b, _ := d[r].Alloc(dt, n); return b }
	if err := srv.SubmitGradient(0, "w", g(0, 4, hw.F32), nil); err == nil {
		t.Error("submit before register succeeded")
	}
	// Lengths whose bytes pass the largest int, alone or together, are
	// refused at Register, where Buckets reported 0 or -8 bytes for them.
	for _, huge := range [][]paramsync.Param{{{ID: "x", Len: math.MaxInt64/4 + 1, DType: hw.F32}},
		{{ID: "x", Len: math.MaxInt64 / 6, DType: hw.F32}, {ID: "y", Len: math.MaxInt64 / 6, DType: hw.F32}}} {
		if err := srv.Register(0, huge); err == nil || !strings.Contains(err.Error(), "past 9223372036854775807 bytes") || len(srv.Buckets()) != 0 {
			t.Errorf("%+v: %v, %d buckets; want refused, none made", huge, err, len(srv.Buckets()))
		}
	}
	if err := srv.Register(0, params); err != nil {
		t.Fatal(err)
	}
	if err := srv.Register(1, params[:1]); !errors.Is(err, paramsync.ErrMismatch) || !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("different lists: %v", err)
	}
	if err := srv.Register(1, params); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		err  error
		call func() error
	}{
		"unregistered": {paramsync.ErrUnregistered, func() error { return srv.SubmitGradient(0, "nope", g(0, 4, hw.F32), nil) }},
		"short":        {paramsync.ErrMismatch, func() error { return srv.SubmitGradient(0, "w", g(0, 3, hw.F32), nil) }},
		"dtype":        {paramsync.ErrMismatch, func() error { return srv.SubmitGradient(0, "w", g(0, 4, hw.F64), nil) }},
		"device":       {paramsync.ErrMismatch, func() error { return srv.SubmitGradient(0, "w", g(1, 4, hw.F32), nil) }},
	}
	for name, tc := range cases {
		if err := tc.call(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", name, err, tc.err)
		}
	}
	good := g(0, 4, hw.F32)
	if err := srv.SubmitGradient(0, "w", good, nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.SubmitGradient(0, "w", good, nil); !errors.Is(err, paramsync.ErrDuplicate) {
		t.Errorf("twice: %v", err)
	}
	// Rank 0 still lacks b, rank 1 everything: Sync names them, no hang.
	err := srv.Sync(0)
	if !errors.Is(err, paramsync.ErrTimeout) || !strings.Contains(err.Error(), "rank 0 is missing b") || !strings.Contains(err.Error(), "rank 1 is missing b, w") {
		t.Errorf("Sync with missing gradients: %v", err)
	}
	srv.Close()
	if err := srv.SubmitGradient(0, "b", g(0, 2, hw.F32), nil); !errors.Is(err, paramsync.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := srv.Sync(1); !errors.Is(err, paramsync.ErrClosed) {
		t.Errorf("Sync after Close: %v", err)
	}
}

func TestGatherParamsCompletesShards(t *testing.T) {
	c := cluster(t, 3, sim.Config{})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{})
	params := []paramsync.Param{{ID: "w", Len: 6, DType: hw.I32, Sharded: true}}
	bufs := make([]hw.Buffer, 3)
	for r, d := range c.Devices() {
		srv.Register(r, params)
		bufs[r], _ = d.Alloc(hw.I32, 6)
		shard := make([]int32, 6)
		shard[2*r], shard[2*r+1] = int32(10*r), int32(10*r+1)
		bufs[r].Write(hw.Encode(shard))
	}
	for r := range 3 {
		if err := srv.GatherParams(r, "w", bufs[r]); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 3 {
		if err := srv.Wait(r); err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, 24)
		bufs[r].Read(raw)
		got, _ := hw.Decode[int32](raw)
		if fmt.Sprint(got) != "[0 1 10 11 20 21]" {
			t.Fatalf("rank %d = %v", r, got)
		}
	}
}

// TestStartRefusesAlgorithmsThatCannotAllReduce: an algorithm that does
// not exist, or has no all-reduce, is refused by Start with the ones that
// do, not at the first bucket's launch.
func TestStartRefusesAlgorithmsThatCannotAllReduce(t *testing.T) {
	c := cluster(t, 4, sim.Config{})
	for _, tc := range []struct {
		cfg  paramsync.Config
		want string
	}{
		{paramsync.Config{BucketBytes: -1}, "paramsync: bucket size -1 bytes, want 0 (the default) or more"},
		{paramsync.Config{Timeout: -1}, "paramsync: timeout -1ns, want 0 (the default) or more"},
	} {
		if _, err := paramsync.Start(c.World(), tc.cfg); err == nil || err.Error() != tc.want {
			t.Errorf("Start: %v, want %q", err, tc.want)
		}
	}
	for algo, want := range map[string]string{
		"rign":     `paramsync: unknown algorithm "rign" (want auto or one of ring, rd, rhd, tree, dbtree, direct`,
		"pairwise": `paramsync: algorithm "pairwise" has no all-reduce (want auto or one of ring,`,
		// Each of its calls was refused, every bucket.
		"native": `paramsync: algorithm native: the library's collectives launch every rank at once`,
	} {
		srv, err := paramsync.Start(c.World(), paramsync.Config{Algo: algo})
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Start with %q = %v, %v; want an error starting %s", algo, srv, err, want)
		}
	}
	for _, algo := range append(ops.AlgorithmsFor(ops.AllReduce), "nccl-nvls", "nccl-nvlstree", "") {
		if _, err := paramsync.Start(c.World(), paramsync.Config{Algo: algo}); err != nil {
			t.Errorf("Start with %q: %v", algo, err)
		}
	}
}

// TestGatherParamsAfterWaitsAndTimes: under auto the gather's plan is
// chosen by cost (GatherParams used to compile "auto" and fail); it starts
// no sooner than the event it is behind, and its end event is when every
// shard has arrived.
func TestGatherParamsAfterWaitsAndTimes(t *testing.T) {
	c := cluster(t, 4, sim.Config{})
	srv, err := paramsync.Start(c.World(), paramsync.Config{Algo: "auto", Cost: c.Topology()})
	if err != nil {
		t.Fatal(err)
	}
	params := []paramsync.Param{{ID: "w", Len: 8, DType: hw.I32, Sharded: true}}
	bufs := make([]hw.Buffer, 4)
	ends := make([]hw.Event, 4)
	var gate, start0 hw.Event
	for r, d := range c.Devices() {
		srv.Register(r, params)
		bufs[r], _ = d.Alloc(hw.I32, 8)
		shard := make([]int32, 8)
		shard[2*r], shard[2*r+1] = int32(10*r), int32(10*r+1)
		bufs[r].Write(hw.Encode(shard))
		// Rank 0's gather waits for 5 us of compute.
		var after hw.Event
		if r == 0 {
			s, _ := d.NewStream()
			s.(*sim.Stream).Compute(5e-6, "layer before")
			gate, _ = d.NewEvent()
			s.Record(gate)
			after = gate
		}
		start, end, err := srv.GatherParamsAfter(r, "w", bufs[r], after)
		if err != nil {
			t.Fatal(err)
		}
		if r == 0 {
			start0 = start
		}
		ends[r] = end
	}
	for r := range 4 {
		if err := srv.Wait(r); err != nil {
			t.Fatal(err)
		}
		raw := make([]byte, 32)
		bufs[r].Read(raw)
		got, _ := hw.Decode[int32](raw)
		if fmt.Sprint(got) != "[0 1 10 11 20 21 30 31]" {
			t.Fatalf("rank %d = %v", r, got)
		}
		if took, err := ends[r].ElapsedSince(gate); err != nil || took <= 0 {
			t.Errorf("rank %d's gather ended %v s after rank 0's gate (%v)", r, took, err)
		}
	}
	if waited, err := start0.ElapsedSince(gate); err != nil || waited < 0 {
		t.Errorf("rank 0's gather started %v s after its gate (%v)", waited, err)
	}
}

// TestPlannersCoarsePlanRunsRefined: a planner's plan made coarse to be
// checked and folded (FineChunk set, as package nccl's trees at scale)
// is run made again at its finer pieces (ops.Plan.Refined), as a bench
// run of every rank is, not as it came.
func TestPlannersCoarsePlanRunsRefined(t *testing.T) {
	c := cluster(t, 4, sim.Config{TimingOnly: true})
	planner := func(spec ops.Spec) (*ops.Plan, error) {
		spec.Algo, spec.Channels, spec.NodeRanks, spec.Chunk = "nccl-tree", 2, 2, 1024
		plan, err := ops.Compile(spec)
		if err == nil {
			plan.FineChunk = 64
		}
		return plan, err
	}
	srv, err := paramsync.Start(c.World(), paramsync.Config{Algo: "mine", Planner: planner})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Register(0, []paramsync.Param{{ID: "w", Len: 4096, DType: hw.F32}}); err != nil {
		t.Fatal(err)
	}
	plan, err := srv.Plan("w")
	if err != nil {
		t.Fatal(err)
	}
	if plan.Chunk != 64 || plan.FineChunk != 0 {
		t.Errorf("chunk %d, FineChunk %d; want the plan made again at 64", plan.Chunk, plan.FineChunk)
	}
}

// TestPlannerCompilesEveryCollective: with a planner, every reduction and
// gather is the planner's plan, asked for once per spec under the
// configured name, and gives what that plan gives run plainly; a
// planner's failure names the parameter.
func TestPlannerCompilesEveryCollective(t *testing.T) {
	s := newScenario(3)
	for seed := uint64(4); !s.sharded || s.p < 3 || len(s.params) < 3; seed++ {
		s = newScenario(seed) // one with reductions and reduce-scatters
	}
	s.algo = "rhd"
	want, err := s.plain(t)
	if err != nil {
		t.Fatal(err)
	}
	c := cluster(t, s.p, sim.Config{})
	asked := map[ops.Spec]int{}
	planner := func(spec ops.Spec) (*ops.Plan, error) {
		asked[spec]++
		if spec.Algo != "mine" {
			return nil, fmt.Errorf("spec names %q", spec.Algo)
		}
		spec.Algo = paramsync.AlgoFor(spec.Op, "rhd")
		return ops.Compile(spec)
	}
	srv, err := paramsync.Start(c.World(), paramsync.Config{BucketBytes: s.bucket, Algo: "mine", Planner: planner})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	grads := make([][]hw.Buffer, s.p)
	for r, d := range c.Devices() {
		if err := srv.Register(r, s.params); err != nil {
			t.Fatal(err)
		}
		for i, pr := range s.params {
			b, _ := d.Alloc(pr.DType, pr.Len)
			b.Write(s.inputs[r][i])
			grads[r] = append(grads[r], b)
		}
	}
	for r := range s.p {
		for i := range s.params {
			if err := srv.SubmitGradient(r, s.params[i].ID, grads[r][i], nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	for r := range s.p {
		if err := srv.Sync(r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := readAll(grads)
	if err != nil {
		t.Fatal(err)
	}
	for r := range got {
		for i := range got[r] {
			if !bytes.Equal(got[r][i], want[r][i]) {
				t.Fatalf("rank %d, %s: the planner's result differs from its plan run plainly", r, s.params[i].ID)
			}
		}
	}
	if len(asked) == 0 {
		t.Fatal("the planner was never asked")
	}
	for spec, n := range asked {
		if n != 1 {
			t.Errorf("%+v planned %d times", spec, n)
		}
	}

	wrong := func(spec ops.Spec) (*ops.Plan, error) {
		spec.Algo, spec.Count = "ring", spec.Count+1
		return ops.Compile(spec)
	}
	srv3, err := paramsync.Start(c.World(), paramsync.Config{Algo: "mine", Planner: wrong})
	if err != nil {
		t.Fatal(err)
	}
	defer srv3.Close()
	if err := srv3.Register(0, s.params[:1]); err != nil {
		t.Fatal(err)
	}
	if err := srv3.SubmitGradient(0, s.params[0].ID, grads[0][0], nil); err == nil || !strings.Contains(err.Error(), "asked for") {
		t.Errorf("a planner's plan of the wrong count: %v", err)
	}

	failing := func(ops.Spec) (*ops.Plan, error) { return nil, errors.New("no plan today") }
	srv2, err := paramsync.Start(c.World(), paramsync.Config{Algo: "mine", Planner: failing})
	if err != nil {
		t.Fatal(err)
	}
	defer srv2.Close()
	if err := srv2.Register(0, s.params[:1]); err != nil {
		t.Fatal(err)
	}
	err = srv2.SubmitGradient(0, s.params[0].ID, grads[0][0], nil)
	if err == nil || !strings.Contains(err.Error(), "no plan today") || !strings.Contains(err.Error(), s.params[0].ID) {
		t.Errorf("a failing planner: %v", err)
	}
}

// TestPlanNamesEachParametersCollective: Plan gives the averaged
// all-reduce of a replicated parameter and the reduce-scatter of a sharded
// one, the same plan its bucket runs, and refuses unknown ids and a closed
// server.
func TestPlanNamesEachParametersCollective(t *testing.T) {
	c := cluster(t, 4, sim.Config{TimingOnly: true})
	srv, err := paramsync.Start(c.World(), paramsync.Config{Algo: "auto", Cost: c.Topology()})
	if err != nil {
		t.Fatal(err)
	}
	params := []paramsync.Param{{ID: "w", Len: 1 << 20, DType: hw.F32}, {ID: "s", Len: 4 << 20, DType: hw.BF16, Sharded: true}}
	for r := range 4 {
		if err := srv.Register(r, params); err != nil {
			t.Fatal(err)
		}
	}
	w, err := srv.Plan("w")
	if err != nil || w.Op != ops.AllReduce || w.Redop != hw.Avg || w.Count != 1<<20 {
		t.Fatalf("w: %+v, %v", w, err)
	}
	sh, err := srv.Plan("s")
	if err != nil || sh.Op != ops.ReduceScatter || sh.Count != 1<<20 {
		t.Fatalf("s: %+v, %v", sh, err)
	}
	if again, _ := srv.Plan("w"); again != w {
		t.Error("w's plan was compiled twice")
	}
	if _, err := srv.Plan("nope"); !errors.Is(err, paramsync.ErrUnregistered) {
		t.Errorf("unknown id: %v", err)
	}
	srv.Close()
	if _, err := srv.Plan("w"); !errors.Is(err, paramsync.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

// TestRegisterRefusesWhatIsNotOneList: every field of every parameter is
// compared between ranks (a rank whose lengths or sharding differ would
// run a different collective and hang or corrupt the others), a rank
// registers once, and the first list itself is checked: unique IDs, and
// sharded lengths that divide by the ranks, with no padding.
func TestRegisterRefusesWhatIsNotOneList(t *testing.T) {
	ref := []paramsync.Param{{ID: "w", Len: 4, DType: hw.F32}, {ID: "e", Len: 6, DType: hw.F32, Sharded: true}}
	changed := func(f func(ps []paramsync.Param) []paramsync.Param) []paramsync.Param {
		return f([]paramsync.Param{ref[0], ref[1]})
	}
	for name, tc := range map[string]struct {
		first, second []paramsync.Param // second nil: rank 0 registers first twice
		want          string
	}{
		"length":      {ref, changed(func(ps []paramsync.Param) []paramsync.Param { ps[0].Len = 5; return ps }), "rank 1's parameters differ"},
		"dtype":       {ref, changed(func(ps []paramsync.Param) []paramsync.Param { ps[0].DType = hw.BF16; return ps }), "rank 1's parameters differ"},
		"sharding":    {ref, changed(func(ps []paramsync.Param) []paramsync.Param { ps[1].Sharded = false; return ps }), "rank 1's parameters differ"},
		"order":       {ref, []paramsync.Param{ref[1], ref[0]}, "rank 1's parameters differ"},
		"twice":       {ref, nil, "rank 0 registered twice"},
		"same ID":     {[]paramsync.Param{{ID: "w", Len: 4, DType: hw.F32}, {ID: "w", Len: 2, DType: hw.F32}}, nil, `are both "w"`},
		"no division": {[]paramsync.Param{{ID: "e", Len: 5, DType: hw.F32, Sharded: true}}, nil, "does not divide by 2 ranks"},
	} {
		c := cluster(t, 2, sim.Config{TimingOnly: true})
		srv, _ := paramsync.Start(c.World(), paramsync.Config{})
		err := srv.Register(0, tc.first)
		if err == nil {
			if tc.second == nil {
				err = srv.Register(0, tc.first)
			} else {
				err = srv.Register(1, tc.second)
			}
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
		if tc.second != nil && !errors.Is(err, paramsync.ErrMismatch) {
			t.Errorf("%s: %v is not ErrMismatch", name, err)
		}
		srv.Close()
	}
}

// TestRanksOutsideTheWorldAreRefused: rank -1 and rank p (one past the
// last) get an error from every per-rank call, not an index panic.
func TestRanksOutsideTheWorldAreRefused(t *testing.T) {
	c := cluster(t, 2, sim.Config{TimingOnly: true})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{})
	params := []paramsync.Param{{ID: "e", Len: 2, DType: hw.F32, Sharded: true}}
	if err := srv.Register(0, params); err != nil {
		t.Fatal(err)
	}
	buf, _ := c.Devices()[0].Alloc(hw.F32, 2)
	for _, rank := range []int{-1, 2} {
		for name, call := range map[string]func() error{
			"Register":       func() error { return srv.Register(rank, params) },
			"SubmitGradient": func() error { return srv.SubmitGradient(rank, "e", buf, nil) },
			"Sync":           func() error { return srv.Sync(rank) },
			"GatherParams":   func() error { return srv.GatherParams(rank, "e", buf) },
			"Wait":           func() error { return srv.Wait(rank) },
		} {
			if err := call(); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rank %d not in 0..1", rank)) {
				t.Errorf("%s(rank %d) = %v", name, rank, err)
			}
		}
	}
}

// TestGatherParamsRefusesWhatItCannotGather: only a registered sharded
// parameter, into a buffer of its length and dtype, is gathered; a
// replicated one has no shards to gather.
func TestGatherParamsRefusesWhatItCannotGather(t *testing.T) {
	c := cluster(t, 2, sim.Config{TimingOnly: true})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{})
	defer srv.Close()
	params := []paramsync.Param{{ID: "w", Len: 4, DType: hw.F32}, {ID: "e", Len: 4, DType: hw.F32, Sharded: true}}
	for r := range 2 {
		if err := srv.Register(r, params); err != nil {
			t.Fatal(err)
		}
	}
	d := c.Devices()[0]
	buf := func(dt hw.DType, n int) hw.Buffer { b, _ := d.Alloc(dt, n); return b }
	for _, tc := range []struct {
		id   string
		buf  hw.Buffer
		want string
	}{
		{"w", buf(hw.F32, 4), `"w" is not sharded`},
		{"nope", buf(hw.F32, 4), "unregistered parameter"},
		{"e", buf(hw.F32, 2), "parameter buffer does not match"},
		{"e", buf(hw.BF16, 4), "parameter buffer does not match"},
		{"e", nil, "parameter buffer does not match"},
	} {
		if err := srv.GatherParams(0, tc.id, tc.buf); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("GatherParams(%q) = %v, want an error containing %q", tc.id, err, tc.want)
		}
	}
}

// TestSyncTimeoutNamesUnregisteredRanks: a rank that never registered is
// named as such, not as one missing an empty list of gradients.
func TestSyncTimeoutNamesUnregisteredRanks(t *testing.T) {
	c := cluster(t, 2, sim.Config{TimingOnly: true})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{Timeout: 20 * time.Millisecond})
	defer srv.Close()
	params := []paramsync.Param{{ID: "w", Len: 4, DType: hw.F32}}
	if err := srv.Register(0, params); err != nil {
		t.Fatal(err)
	}
	g, _ := c.Devices()[0].Alloc(hw.F32, 4)
	if err := srv.SubmitGradient(0, "w", g, nil); err != nil {
		t.Fatal(err)
	}
	err := srv.Sync(0)
	if !errors.Is(err, paramsync.ErrTimeout) || !strings.Contains(err.Error(), "rank 1 has not registered") || strings.Contains(err.Error(), "rank 0 is missing") {
		t.Errorf("Sync = %v, want a timeout naming only rank 1 as unregistered", err)
	}
}

// TestStepsFromConcurrentRanks is the DDP pattern: one goroutine per rank,
// several steps, each rank submitting and syncing on its own. Every step
// averages that step's gradients (rank r, step k: all (r+1)(k+1), so the
// average is 2.5(k+1)), which needs each Sync to start the rank's next
// round, and a Sync waiting on slower ranks to wake when they submit: the
// timeout is an hour, so a lost wake-up hangs the test rather than
// passing late. Run under -race, it also checks the server's locking.
func TestStepsFromConcurrentRanks(t *testing.T) {
	const p, steps = 4, 5
	c := cluster(t, p, sim.Config{})
	srv, err := paramsync.Start(c.World(), paramsync.Config{BucketBytes: 16, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	params := []paramsync.Param{
		{ID: "emb", Len: 8, DType: hw.F32, Sharded: true},
		{ID: "l0.w", Len: 6, DType: hw.F32},
		{ID: "l1.w", Len: 5, DType: hw.F32},
	}
	var wg sync.WaitGroup
	for r, d := range c.Devices() {
		wg.Go(func() {
			fail := func(format string, args ...any) {
				t.Errorf("rank %d: "+format, append([]any{r}, args...)...)
				srv.Close() // release the other ranks
			}
			if err := srv.Register(r, params); err != nil {
				fail("%v", err)
				return
			}
			grads := make([]hw.Buffer, len(params))
			for i, pr := range params {
				grads[i], _ = d.Alloc(pr.DType, pr.Len)
			}
			for k := range steps {
				for i := len(params) - 1; i >= 0; i-- { // backward order
					vals := make([]float32, params[i].Len)
					for j := range vals {
						vals[j] = float32((r + 1) * (k + 1))
					}
					grads[i].Write(hw.Encode(vals))
					if err := srv.SubmitGradient(r, params[i].ID, grads[i], nil); err != nil {
						fail("step %d: %v", k, err)
						return
					}
				}
				if err := srv.Sync(r); err != nil {
					fail("step %d: %v", k, err)
					return
				}
				want := 2.5 * float64(k+1)
				for i, pr := range params {
					raw := make([]byte, 4*pr.Len)
					grads[i].Read(raw)
					vals, _ := hw.ToFloat64s(pr.DType, raw)
					if pr.Sharded { // rank r keeps shard r
						n := pr.Len / p
						vals = vals[r*n : (r+1)*n]
					}
					for _, v := range vals {
						if v != want {
							fail("step %d: %s = %v, want all %v", k, pr.ID, vals, want)
							return
						}
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestSyncWakesOnClose: a Sync waiting for a rank that never submits
// returns ErrClosed when the server is closed, not when its (hour-long)
// timeout expires.
func TestSyncWakesOnClose(t *testing.T) {
	c := cluster(t, 2, sim.Config{TimingOnly: true})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{Timeout: time.Hour})
	params := []paramsync.Param{{ID: "w", Len: 4, DType: hw.F32}}
	for r := range 2 {
		if err := srv.Register(r, params); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error)
	go func() { done <- srv.Sync(0) }()
	// Give Sync time to start waiting. Nothing is asserted on time: if it
	// has not started, it sees the closed server at once, as it should.
	time.Sleep(10 * time.Millisecond)
	srv.Close()
	if err := <-done; !errors.Is(err, paramsync.ErrClosed) {
		t.Fatalf("Sync after Close = %v, want ErrClosed", err)
	}
}

// TestBucketWaitsForEveryGradient: a bucket's collectives start only
// after every one of its gradients is ready, whichever of them is ready
// last. Here "b" (handled first in the bucket, which fills in reverse)
// is computed for 100 µs and "a" is ready at once; the bucket must end
// after b's gradient, in simulated time.
func TestBucketWaitsForEveryGradient(t *testing.T) {
	c := cluster(t, 2, sim.Config{TimingOnly: true})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{})
	defer srv.Close()
	params := []paramsync.Param{{ID: "a", Len: 256, DType: hw.F32}, {ID: "b", Len: 256, DType: hw.F32}}
	slow := make([]hw.Event, 2)
	for r, d := range c.Devices() {
		if err := srv.Register(r, params); err != nil {
			t.Fatal(err)
		}
		compute, _ := d.NewStream()
		compute.(*sim.Stream).Compute(100e-6, "backward b")
		slow[r], _ = d.NewEvent()
		compute.Record(slow[r])
		quick, _ := d.NewEvent()
		other, _ := d.NewStream()
		other.Record(quick)
		for i, ready := range []hw.Event{quick, slow[r]} {
			g, _ := d.Alloc(hw.F32, params[i].Len)
			if err := srv.SubmitGradient(r, params[i].ID, g, ready); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(srv.Buckets()); n != 1 {
		t.Fatalf("%d buckets, want 1", n)
	}
	for r := range 2 {
		if err := srv.Sync(r); err != nil {
			t.Fatal(err)
		}
		after, err := srv.BucketDone(r, 0).ElapsedSince(slow[r])
		if err != nil || after <= 0 {
			t.Errorf("rank %d: bucket done %v s after b's gradient was ready (%v), want after it", r, after, err)
		}
	}
}

// TestGatherParamsFromConcurrentRanks: FSDP ranks gather from their own
// goroutines; once every rank has enqueued its gathers (the documented
// rule before any Wait), each ends with the whole parameter. Under -race
// this checks that gathers compile and enqueue under the server's lock.
func TestGatherParamsFromConcurrentRanks(t *testing.T) {
	const p = 4
	c := cluster(t, p, sim.Config{})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{})
	defer srv.Close()
	params := []paramsync.Param{{ID: "a", Len: 8, DType: hw.I32, Sharded: true}, {ID: "b", Len: 4, DType: hw.I32, Sharded: true}}
	bufs := make([][]hw.Buffer, p)
	for r, d := range c.Devices() {
		for i, pr := range params {
			n := pr.Len / p
			vals := make([]int32, pr.Len)
			for j := range n {
				vals[r*n+j] = int32(100*i + r*n + j) // rank r holds shard r
			}
			b, _ := d.Alloc(pr.DType, pr.Len)
			b.Write(hw.Encode(vals))
			bufs[r] = append(bufs[r], b)
		}
	}
	var enqueued sync.WaitGroup
	for r := range p {
		enqueued.Go(func() {
			if err := srv.Register(r, params); err != nil {
				t.Error(err)
				return
			}
			for i, pr := range params {
				if err := srv.GatherParams(r, pr.ID, bufs[r][i]); err != nil {
					t.Errorf("rank %d, %s: %v", r, pr.ID, err)
					return
				}
			}
		})
	}
	enqueued.Wait()
	if t.Failed() {
		return
	}
	for r := range p {
		if err := srv.Wait(r); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		for i, pr := range params {
			raw := make([]byte, 4*pr.Len)
			bufs[r][i].Read(raw)
			got, _ := hw.Decode[int32](raw)
			for j, v := range got {
				if v != int32(100*i+j) {
					t.Errorf("rank %d, %s = %v", r, pr.ID, got)
					break
				}
			}
		}
	}
}

// TestTimeoutReportWhileAnotherRankFinishesAStep: rank 0, a step ahead,
// times out waiting for rank 1 while rank 1 is still finishing the
// previous step; the report reads rank 1's state, which rank 1's Sync
// resets, so both must hold the server's lock (checked under -race). The
// report's content depends on where rank 1 is, so only the error's kind
// is checked.
func TestTimeoutReportWhileAnotherRankFinishesAStep(t *testing.T) {
	c := cluster(t, 2, sim.Config{TimingOnly: true})
	srv, _ := paramsync.Start(c.World(), paramsync.Config{Timeout: 50 * time.Millisecond})
	defer srv.Close()
	params := []paramsync.Param{{ID: "w", Len: 4, DType: hw.F32}}
	grads := make([]hw.Buffer, 2)
	for r, d := range c.Devices() {
		if err := srv.Register(r, params); err != nil {
			t.Fatal(err)
		}
		grads[r], _ = d.Alloc(hw.F32, 4)
		if err := srv.SubmitGradient(r, "w", grads[r], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Sync(0); err != nil {
		t.Fatal(err)
	}
	if err := srv.SubmitGradient(0, "w", grads[0], nil); err != nil { // rank 0's next step
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- srv.Sync(1) }() // rank 1 finishes the first step
	if err := srv.Sync(0); !errors.Is(err, paramsync.ErrTimeout) {
		t.Errorf("rank 0's second Sync = %v, want ErrTimeout", err)
	}
	if err := <-done; err != nil {
		t.Errorf("rank 1's first Sync: %v", err)
	}
}
