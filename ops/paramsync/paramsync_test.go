package paramsync_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
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
	for algo, want := range map[string]string{
		"rign":     `paramsync: unknown algorithm "rign" (want auto, native or one of ring, rd, rhd, tree, dbtree, direct`,
		"pairwise": `paramsync: algorithm "pairwise" has no all-reduce (want auto, native or one of ring,`,
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
