package ops_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// world and buffers make simulated clusters and collective buffers.
var (
	world   = simtest.World
	buffers = simtest.Buffers
)

// expected computes what rank r's output must hold, from every rank's
// input, with exact integer arithmetic (sum or max).
func expected(plan *ops.Plan, inputs [][]int32, r int) []int32 {
	n, p := plan.Count, plan.Ranks
	combine := func(vals func(q int) int32) int32 {
		acc := vals(0)
		for q := 1; q < p; q++ {
			if plan.Redop == hw.Max {
				acc = max(acc, vals(q))
			} else {
				acc += vals(q)
			}
		}
		return acc
	}
	out := make([]int32, plan.OutLen)
	for i := range out {
		switch plan.Op {
		case ops.AllReduce, ops.Reduce:
			out[i] = combine(func(q int) int32 { return inputs[q][i] })
		case ops.ReduceScatter:
			out[i] = combine(func(q int) int32 { return inputs[q][r*n+i] })
		case ops.AllGather, ops.Gather:
			out[i] = inputs[i/n][i%n]
		case ops.Broadcast:
			out[i] = inputs[plan.Root][i]
		case ops.AllToAll:
			out[i] = inputs[i/n][r*n+i%n]
		case ops.SendRecv:
			out[i] = inputs[(r-1+p)%p][i]
		}
	}
	return out
}

// meaningful reports whether rank r's output is defined for the op.
func meaningful(op ops.Op, r, root int) bool {
	return !(op == ops.Gather || op == ops.Reduce) || r == root
}

// TestRunMatchesReference runs every algorithm of every op on simulated
// devices with real data, out of place and in place, and compares each
// rank's output with an exact integer reference.
func TestRunMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, op := range ops.Ops() {
		for _, alg := range ops.AlgorithmsFor(op) {
			for _, p := range []int{1, 2, 3, 5, 8} {
				for _, n := range []int{0, 1, 7, p + 1} {
					if op == ops.Barrier {
						n = 0
					}
					for _, redop := range []hw.ReduceOp{hw.Sum, hw.Max} {
						for _, inPlace := range []bool{false, true} {
							spec := ops.Spec{Op: op, Algo: alg, Ranks: p, Count: n, Root: p / 2, DType: hw.I32, Redop: redop}
							name := fmt.Sprintf("%v inplace=%v", spec, inPlace)
							plan, err := ops.Compile(spec)
							if err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							c, _ := world(t, fmt.Sprintf("switch:%d", p), sim.Config{})
							in, out := buffers(t, c, plan, inPlace)
							inputs := make([][]int32, p)
							for r := range p {
								inputs[r] = make([]int32, plan.InLen)
								for i := range inputs[r] {
									inputs[r][i] = rng.Int32N(2000) - 1000
								}
								if err := writeSlice(in[r], inputs[r]); err != nil {
									t.Fatal(err)
								}
							}
							if _, err := ops.NewExecutor(c.World()).Run(plan, in, out); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							for r := range p {
								if !meaningful(op, r, spec.Root) {
									continue
								}
								got, err := readSlice(out[r])
								if err != nil {
									t.Fatal(err)
								}
								want := expected(plan, inputs, r)
								for i := range want {
									if got[i] != want[i] {
										t.Fatalf("%s: rank %d out[%d] = %d, want %d", name, r, i, got[i], want[i])
									}
								}
							}
						}
					}
					if op == ops.Barrier {
						break
					}
				}
			}
		}
	}
}

func writeSlice(s hw.Slice, vals []int32) error {
	all := make([]byte, s.Buf.Len()*4)
	if err := s.Buf.Read(all); err != nil {
		return err
	}
	copy(all[s.Off*4:], hw.Encode(vals))
	return s.Buf.Write(all)
}

func readSlice(s hw.Slice) ([]int32, error) {
	all := make([]byte, s.Buf.Len()*4)
	if err := s.Buf.Read(all); err != nil {
		return nil, err
	}
	return hw.Decode[int32](all[s.Off*4 : (s.Off+s.Len)*4])
}

// formula is an α-β-γ time from REFERENCE.md; n is bytes per rank (the
// total gathered size for allgather and reducescatter).
type formula struct {
	op     ops.Op
	algo   string
	pow2   bool // the formula holds for powers of two only
	bytes  func(n, p float64) float64
	timeOf func(p, n, a, b, g float64) float64
}

func lg(p float64) float64 { return math.Log2(p) }

var formulas = []formula{
	{ops.AllReduce, "ring", false, nil, func(p, n, a, b, g float64) float64 {
		return 2*(p-1)*a + 2*(p-1)/p*n*b + (p-1)/p*n*g
	}},
	{ops.AllReduce, "rd", true, nil, func(p, n, a, b, g float64) float64 { return lg(p)*a + n*lg(p)*b + n*lg(p)*g }},
	{ops.AllReduce, "rhd", true, nil, func(p, n, a, b, g float64) float64 {
		return 2*lg(p)*a + 2*(p-1)/p*n*b + (p-1)/p*n*g
	}},
	{ops.AllGather, "ring", false, nil, func(p, n, a, b, g float64) float64 { return (p-1)*a + (p-1)/p*n*b }},
	{ops.AllGather, "rd", true, nil, func(p, n, a, b, g float64) float64 { return lg(p)*a + (p-1)/p*n*b }},
	{ops.ReduceScatter, "ring", false, nil, func(p, n, a, b, g float64) float64 {
		return (p-1)*a + (p-1)/p*n*b + (p-1)/p*n*g
	}},
	{ops.ReduceScatter, "rhd", true, nil, func(p, n, a, b, g float64) float64 {
		return lg(p)*a + (p-1)/p*n*b + (p-1)/p*n*g
	}},
	{ops.Broadcast, "tree", true, nil, func(p, n, a, b, g float64) float64 { return lg(p)*a + n*lg(p)*b }},
	{ops.Reduce, "tree", true, nil, func(p, n, a, b, g float64) float64 { return lg(p)*a + n*lg(p)*b + n*lg(p)*g }},
	{ops.Broadcast, "rhd", true, nil, func(p, n, a, b, g float64) float64 { return 2*lg(p)*a + 2*(p-1)/p*n*b }},
	{ops.AllToAll, "pairwise", false, nil, func(p, n, a, b, g float64) float64 { return (p-1)*a + n*b }},
}

// TestSimulatedTimesMatchFormulas runs each algorithm the formulas cover
// on a switch (GPU→switch→GPU: α = 2 × link latency, β = 1/bw, no
// contention for these patterns) and requires the simulated time, and the
// cost model, to equal the formula within 1e-9.
func TestSimulatedTimesMatchFormulas(t *testing.T) {
	const lat, bw, red = 0.7e-6, 50e9, 200e9
	a, b, g := 2*lat, 1/bw, 1/red
	for _, f := range formulas {
		for _, p := range []int{2, 3, 4, 6, 8, 16} {
			if f.pow2 && p&(p-1) != 0 {
				continue
			}
			count := 3 * 1024 * p // divisible by p
			spec := ops.Spec{Op: f.op, Algo: f.algo, Ranks: p, Count: count, Root: 1, DType: hw.F32, Redop: hw.Sum}
			var n float64 // bytes as the formula counts them
			switch f.op {
			case ops.AllGather, ops.ReduceScatter:
				spec.Count = count / p
				n = float64(count * 4)
			case ops.AllToAll:
				spec.Count = 1024
				n = float64((p - 1) * 1024 * 4)
			default:
				n = float64(count * 4)
			}
			plan, err := ops.Compile(spec)
			if err != nil {
				t.Fatalf("%v: %v", spec, err)
			}
			c, topo := world(t, fmt.Sprintf("switch:%d,bw=50GB/s,lat=700ns,reduce=200GB/s", p), sim.Config{TimingOnly: true})
			in, out := buffers(t, c, plan, false)
			got, err := ops.NewExecutor(c.World()).Run(plan, in, out)
			if err != nil {
				t.Fatalf("%v: %v", spec, err)
			}
			want := f.timeOf(float64(p), n, a, b, g)
			if rel := math.Abs(got-want) / want; rel > 1e-9 {
				t.Errorf("%s/%s p=%d: simulated %.9g s, formula %.9g s (rel %.2g)", f.op, f.algo, p, got, want, rel)
			}
			cost, err := ops.Cost(plan, topo)
			if err != nil {
				t.Fatal(err)
			}
			if rel := math.Abs(cost-want) / want; rel > 1e-9 {
				t.Errorf("%s/%s p=%d: cost model %.9g s, formula %.9g s", f.op, f.algo, p, cost, want)
			}
		}
	}
}

// TestNeverBeatsLowerBounds checks every algorithm of every op, on sizes
// that do and do not divide, against the lower bounds of Chan et al.
// Their bandwidth bounds hold here as stated: every GPU has one link of
// bandwidth 1/β each way. Their latency bound ⌈lg p⌉α assumes a rank takes
// one message at a time; a simulated switch, like NVSwitch, lets a rank
// receive from many peers at once, so the latency bound that holds is one
// α (and a direct gather of one element really does finish in about α).
func TestNeverBeatsLowerBounds(t *testing.T) {
	const lat, bw, red = 1e-6, 100e9, 400e9
	a, b, g := 2*lat, 1/bw, 1/red
	for _, op := range ops.Ops() {
		for _, alg := range ops.AlgorithmsFor(op) {
			for _, p := range []int{2, 3, 5, 8, 12} {
				for _, count := range []int{1, 1000, 4099} {
					if op == ops.Barrier {
						count = 0
					}
					spec := ops.Spec{Op: op, Algo: alg, Ranks: p, Count: count, Root: 0, DType: hw.F32, Redop: hw.Sum}
					plan, err := ops.Compile(spec)
					if err != nil {
						t.Fatalf("%v: %v", spec, err)
					}
					c, _ := world(t, fmt.Sprintf("switch:%d,bw=100GB/s,lat=1us,reduce=400GB/s", p), sim.Config{TimingOnly: true})
					in, out := buffers(t, c, plan, false)
					got, err := ops.NewExecutor(c.World()).Run(plan, in, out)
					if err != nil {
						t.Fatalf("%v: %v", spec, err)
					}
					P := float64(p)
					bound := 0.0
					if p > 1 {
						bound = a
					}
					n := float64(count * 4)
					switch op {
					case ops.AllReduce:
						bound += 2*(P-1)/P*n*b + (P-1)/P*n*g
					case ops.AllGather, ops.ReduceScatter:
						bound += (P - 1) / P * n * P * b
					case ops.Broadcast:
						bound += n * b
					}
					if got < bound*(1-1e-12) {
						t.Errorf("%v: %.9g s beats the lower bound %.9g s", spec, got, bound)
					}
				}
			}
		}
	}
}

func TestRunRefusesBadBuffers(t *testing.T) {
	c, _ := world(t, "switch:2", sim.Config{})
	plan, err := ops.Compile(ops.Spec{Op: ops.AllGather, Algo: "ring", Ranks: 2, Count: 4, DType: hw.F32})
	if err != nil {
		t.Fatal(err)
	}
	in, out := buffers(t, c, plan, false)
	e := ops.NewExecutor(c.World())
	d := c.Devices()
	wrongType, _ := d[0].Alloc(hw.F64, 4)
	cases := map[string]func() ([]hw.Slice, []hw.Slice){
		"short output": func() ([]hw.Slice, []hw.Slice) {
			return in, []hw.Slice{out[0].Sub(0, 7), out[1]}
		},
		"dtype":      func() ([]hw.Slice, []hw.Slice) { return []hw.Slice{hw.Whole(wrongType), in[1]}, out },
		"wrong rank": func() ([]hw.Slice, []hw.Slice) { return []hw.Slice{in[1], in[0]}, out },
		"bad alias": func() ([]hw.Slice, []hw.Slice) {
			return []hw.Slice{out[0].Sub(4, 4), out[1].Sub(0, 4)}, out // rank 0's block is at 0
		},
		"missing rank": func() ([]hw.Slice, []hw.Slice) { return in[:1], out[:1] },
	}
	for name, args := range cases {
		i, o := args()
		if _, err := e.Run(plan, i, o); err == nil {
			t.Errorf("%s: Run succeeded", name)
		}
	}
	if _, err := e.Run(plan, in, out); err != nil {
		t.Fatalf("good run after refusals: %v", err)
	}
}

// TestEnqueueLetsRanksStartApart: rank 1 joins after 10us of compute; the
// all-reduce starts when it does, and the result is right.
func TestEnqueueLetsRanksStartApart(t *testing.T) {
	c, _ := world(t, "switch:2,bw=100GB/s,lat=1us", sim.Config{})
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 2, Count: 2, DType: hw.I32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	e := ops.NewExecutor(c.World())
	d := c.Devices()
	bufs := make([]hw.Slice, 2)
	for r := range 2 {
		b, _ := d[r].Alloc(hw.I32, 2)
		bufs[r] = hw.Whole(b)
		if err := writeSlice(bufs[r], []int32{int32(r + 1), 10}); err != nil {
			t.Fatal(err)
		}
	}
	compute, _ := d[1].NewStream()
	ready, _ := d[1].NewEvent()
	compute.(*sim.Stream).Compute(10e-6, "backward")
	compute.Record(ready)
	if _, err := e.Enqueue(plan, 0, bufs[0], bufs[0]); err != nil {
		t.Fatal(err)
	}
	end, err := e.Enqueue(plan, 1, bufs[1], bufs[1], ready)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		if err := e.Synchronize(r); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 2 {
		if got, _ := readSlice(bufs[r]); got[0] != 3 || got[1] != 20 {
			t.Fatalf("rank %d = %v, want [3 20]", r, got)
		}
	}
	// 10us wait, then 2 ring steps of 2us (GPU→switch→GPU) + 4 bytes.
	at, _ := end.(*sim.Event).Time()
	if want := 10*sim.Microsecond + 2*(2*sim.Microsecond+40); at != want {
		t.Fatalf("rank 1 finished at %v, want %v", at, want)
	}
}

// TestStreamedRunsEqualHeldRuns: a streamed plan, made lane by lane as
// the generic driver drains its cursors, gives the held plan's results bit
// for bit and its time to the picosecond, for every algorithm and op.
func TestStreamedRunsEqualHeldRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, op := range ops.Ops() {
		for _, alg := range ops.AlgorithmsFor(op) {
			for _, p := range []int{3, 8} {
				spec := ops.Spec{Op: op, Algo: alg, Ranks: p, Count: 7, Root: 1, DType: hw.F32, Redop: hw.Sum}
				if op == ops.Barrier {
					spec.Count = 0
				}
				var inputs [][]byte
				var outs [2][][]byte
				var times [2]float64
				for i, stream := range []bool{false, true} {
					compile := ops.Compile
					if stream {
						compile = ops.CompileStreamed
					}
					plan, err := compile(spec)
					if stream && errors.Is(err, ops.ErrUnsupported) {
						continue // an algorithm whose lanes wait for each other (nccl-tree) is never streamed
					}
					if err != nil {
						t.Fatal(err)
					}
					if stream != plan.Streamed() {
						t.Fatalf("%v: streamed %v, want %v", spec, plan.Streamed(), stream)
					}
					c, _ := world(t, fmt.Sprintf("switch:%d", p), sim.Config{})
					in, out := buffers(t, c, plan, false)
					if inputs == nil {
						for r := range p {
							b := make([]byte, in[r].Buf.Len()*4)
							for j := range b {
								b[j] = byte(rng.Uint32())
							}
							inputs = append(inputs, b)
						}
					}
					for r := range p {
						if err := in[r].Buf.Write(inputs[r]); err != nil {
							t.Fatal(err)
						}
					}
					if times[i], err = ops.NewExecutor(c.World()).Run(plan, in, out); err != nil {
						t.Fatalf("%v streamed=%v: %v", spec, stream, err)
					}
					for r := range p {
						b := make([]byte, out[r].Buf.Len()*4)
						if err := out[r].Buf.Read(b); err != nil {
							t.Fatal(err)
						}
						outs[i] = append(outs[i], b)
					}
				}
				if outs[1] == nil {
					continue
				}
				if times[0] != times[1] || !reflect.DeepEqual(outs[0], outs[1]) {
					t.Fatalf("%v: streamed run differs from held run: times %v vs %v", spec, times[1], times[0])
				}
			}
		}
	}
}

// TestRunRefusesMalformedPlans: a plan made or edited by hand with a
// structural fault is refused by Run with an error wrapping ErrBadPlan
// that says what is wrong, before anything runs, and never panics; a plan
// whose sends and receives do not pair up names the unpaired message. The
// executor then runs a good plan. A plan of the wrong shape (shape) is
// refused by Enqueue and EnqueueBackToBack too, before they make its
// lanes' streams: a million lanes of no steps took 590 MB of streams
// before being refused, and 2^62 lanes on 4 ranks wrapped the count of
// lanes to 0 and divided by it.
func TestRunRefusesMalformedPlans(t *testing.T) {
	spec := ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum}
	for _, tc := range []struct {
		name  string
		edit  func(p *ops.Plan)
		want  string
		shape bool
	}{
		{"a lane out of range", func(p *ops.Plan) { p.Steps[2][3].Lane = 1 }, "rank 2 step 3 (reduce out[2:4] += tmp[0:2] lane 1): lane 1 outside 0..0", false},
		{"a negative lane", func(p *ops.Plan) { p.Steps[1][0].Lane = -1 }, "lane -1 outside 0..0", false},
		{"After pointing forward", func(p *ops.Plan) { p.Steps[0][2].After = []int{5} }, "rank 0 step 2 (recv tmp[0:2] from 3 tag 0 after [5]): After names step 5, not an earlier step", false},
		{"After naming itself", func(p *ops.Plan) { p.Steps[0][2].After = []int{2} }, "After names step 2", false},
		{"a send to itself", func(p *ops.Plan) { p.Steps[3][1].Peer = 3 }, "rank 3 step 1 (send out[6:8] to 3 tag 0): peer 3 is not another rank of 4", false},
		{"a peer out of range", func(p *ops.Plan) { p.Steps[3][1].Peer = 9 }, "peer 9 is not another rank of 4", false},
		{"an offset past 2^32", func(p *ops.Plan) { p.Steps[1][1].Src.Off += 1 << 32 }, "outside out of 8 elements", false},
		{"no lanes", func(p *ops.Plan) { p.Lanes = 0 }, "plan has 0 lanes", true},
		{"negative lanes", func(p *ops.Plan) { p.Lanes = -2 }, "plan has -2 lanes", true},
		{"lanes past its steps", func(p *ops.Plan) { p.Lanes = 1 << 40 }, "plan has 1099511627776 lanes for 64 steps", true},
		{"a million lanes", func(p *ops.Plan) { p.Lanes = 1 << 20 }, "plan has 1048576 lanes for 64 steps", true},
		{"2^62 lanes", func(p *ops.Plan) { p.Lanes = 1 << 62 }, "plan has 4611686018427387904 lanes for 64 steps", true},
		{"a negative count", func(p *ops.Plan) { p.Count = -1 }, "plan of 4 ranks, count -1", true},
		{"fewer programs than ranks", func(p *ops.Plan) { p.Steps = p.Steps[:3] }, "plan has programs for 3 ranks, want 4", true},
		{"a send nobody receives", func(p *ops.Plan) { p.Steps[1][1].Tag = 40 },
			"rank 1 step 1 sends 2 elements to rank 2 with tag 40, and rank 2 never receives it", false},
		{"a send of the wrong size", func(p *ops.Plan) { p.Steps[2][1].Src.Len = 1 },
			"rank 2 step 1 sends 1 elements to rank 3 with tag 0, which receives 2 at step 2", false},
	} {
		plan, err := ops.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := world(t, "switch:4", sim.Config{})
		in, out := buffers(t, c, plan, false)
		tc.edit(plan)
		secs, err := ops.NewExecutor(c.World()).Run(plan, in, out)
		if !errors.Is(err, ops.ErrBadPlan) || !strings.Contains(err.Error(), tc.want) || secs != 0 {
			t.Errorf("%s: %v s, %v; want an error wrapping ErrBadPlan with %q", tc.name, secs, err, tc.want)
		}
		if c.EventsFired() != 0 {
			t.Errorf("%s: the refused plan ran", tc.name)
		}
		if _, err := ops.Cost(plan, mustTopo(t, "switch:4")); !errors.Is(err, ops.ErrBadPlan) {
			t.Errorf("%s: Cost: %v, want ErrBadPlan", tc.name, err)
		}
		if !tc.shape {
			continue
		}
		e := ops.NewExecutor(c.World())
		if _, err := e.Enqueue(plan, 0, in[0], out[0]); !errors.Is(err, ops.ErrBadPlan) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Enqueue: %v, want ErrBadPlan with %q", tc.name, err, tc.want)
		}
		if _, _, err := e.EnqueueBackToBack(plan, in, out, 1); !errors.Is(err, ops.ErrBadPlan) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: EnqueueBackToBack: %v, want ErrBadPlan with %q", tc.name, err, tc.want)
		}
	}
}

func mustTopo(t testing.TB, spec string) *topology.Topology {
	t.Helper()
	topo, err := topology.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestFailuresNameTheirCause: when every rank's lanes fail only because a
// peer's send failed (a ring whose every hop lands past the simulator's
// horizon), the error still names the cause, on one line.
func TestFailuresNameTheirCause(t *testing.T) {
	c, _ := world(t, "switch:8", sim.Config{TimingOnly: true})
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-ring", Ranks: 8, Count: 1 << 10, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	w := &ops.Wire{}
	for k := range w.Latency {
		w.Latency[k], w.Efficiency[k] = 1e294, 1
	}
	plan.Wire = w
	in, out := buffers(t, c, plan, false)
	_, err = simexec.NewExecutor(c).Run(plan, in, out)
	if err == nil || !errors.Is(err, sim.ErrHorizon) || strings.Contains(err.Error(), "\n") {
		t.Errorf("every hop past the horizon: %v; want one line naming the horizon", err)
	}
}

// Nil plans, cost models and worlds, and ranks a plan does not have,
// are errors (or no steps), not panics.
func TestNilArgumentsAreErrors(t *testing.T) {
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Parse("switch:4")
	if err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"check nil":        func() error { return ops.Check(nil) },
		"cost nil plan":    func() error { _, err := ops.Cost(nil, topo); return err },
		"cost nil model":   func() error { _, err := ops.Cost(plan, nil); return err },
		"select nil model": func() error { _, _, err := ops.Select(plan.Spec, nil); return err },
		"run without world": func() error {
			_, err := ops.NewExecutor(nil).Run(plan, make([]hw.Slice, 4), make([]hw.Slice, 4))
			return err
		},
		"run on a nil cluster": func() error {
			_, err := simexec.NewExecutor(nil).Run(plan, make([]hw.Slice, 4), make([]hw.Slice, 4))
			return err
		},
	} {
		if err := call(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	for _, r := range []int{-1, 4} {
		if steps := plan.Rank(r); steps != nil {
			t.Errorf("rank %d of 4: %d steps, want none", r, len(steps))
		}
	}
}
