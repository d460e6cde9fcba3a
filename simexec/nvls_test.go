package simexec_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// nvlsInputs writes random f32 inputs (of either sign, so that the order
// of a sum shows in its bits) to every rank's input and returns them.
func nvlsInputs(t *testing.T, plan *ops.Plan, in []hw.Slice, seed uint64) [][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 2))
	xs := make([][]byte, plan.Ranks)
	for r := range xs {
		vals := make([]float32, plan.InLen)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * 1e3)
		}
		xs[r] = hw.Encode(vals)
		whole := make([]byte, in[r].Buf.Len()*4)
		if err := in[r].Buf.Read(whole); err != nil {
			t.Fatal(err)
		}
		copy(whole[in[r].Off*4:], xs[r])
		if err := in[r].Buf.Write(whole); err != nil {
			t.Fatal(err)
		}
	}
	return xs
}

// nvlsWant is what rank r's output must hold, bit for bit: each element
// the ranks' inputs combined in rank order (((x0 op x1) op x2) …, divided
// for avg), or, for all-gather, every rank's input in turn.
func nvlsWant(t *testing.T, spec ops.Spec, xs [][]byte, r int) []byte {
	t.Helper()
	n, size := spec.Count, spec.DType.Size()
	fold := func(off int) []byte {
		acc := bytes.Clone(xs[0][off*size : (off+n)*size])
		rop := spec.Redop
		if rop == hw.Avg {
			rop = hw.Sum
		}
		for _, x := range xs[1:] {
			if err := hw.ReduceBytes(rop, spec.DType, acc, x[off*size:(off+n)*size]); err != nil {
				t.Fatal(err)
			}
		}
		if spec.Redop == hw.Avg {
			if err := hw.DivideBytes(spec.DType, acc, spec.Ranks); err != nil {
				t.Fatal(err)
			}
		}
		return acc
	}
	switch spec.Op {
	case ops.AllReduce:
		return fold(0)
	case ops.ReduceScatter:
		return fold(r * n)
	}
	return bytes.Join(xs, nil)
}

// TestNVLSPlansRunRight: nccl-nvls plans run on a node whose switch
// reduces, and nccl-nvlstree plans on nodes whose switches do, give every
// rank exactly the reduction (nccl-nvls: in rank order) or the gathered
// blocks, bit for bit, in place and out, held or streamed, run at once
// (Run) or rank by rank (Enqueue), with sum and avg, over channels and
// chunks that split the data unevenly.
func TestNVLSPlansRunRight(t *testing.T) {
	type fabric struct {
		topo                             string
		nodeRanks, count, channels, chnk int
		redop                            hw.ReduceOp
	}
	oneNode := []fabric{
		{"switch:3,nvls=inf", 0, 11, 2, 2, hw.Sum},
		{"switch:5,nvls=100GB/s", 0, 37, 3, 0, hw.Avg},
		{"dgx-h100", 8, 64, 4, 3, hw.Sum},
	}
	nodes := []fabric{
		{"cluster:3x2,nvls=inf", 2, 13, 2, 2, hw.Avg},
		{"dgx-h100x2", 8, 40, 3, 1, hw.Sum},
	}
	// Nodes whose network switches reduce (SHARP): the network's switch
	// all-reduces between nodes, for NVLS and CollNet.
	sharpNodes := []fabric{
		{"cluster:3x2,nvls=inf,sharp=inf", 2, 13, 2, 2, hw.Avg},
		{"dgx-h100x2,rail=true,sharp=100GB/s", 8, 40, 3, 1, hw.Sum},
	}
	for _, run := range []struct {
		algo    string
		op      ops.Op
		fabrics []fabric
		inOrder bool // reduced in rank order
	}{
		{"nccl-nvls", ops.AllReduce, oneNode, true},
		{"nccl-nvls", ops.ReduceScatter, oneNode, true},
		{"nccl-nvls", ops.AllGather, oneNode, true},
		{"nccl-nvlstree", ops.AllReduce, append(oneNode[1:2], nodes...), false},
		{"nccl-nvls", ops.AllReduce, sharpNodes, false},
		{"nccl-collnet-direct", ops.AllReduce, sharpNodes, false},
		{"nccl-collnet-direct", ops.ReduceScatter, sharpNodes, false},
		{"nccl-collnet-direct", ops.AllGather, sharpNodes, true},
		{"nccl-collnet-chain", ops.AllReduce, sharpNodes, false},
	} {
		op := run.op
		for _, tc := range run.fabrics {
			c, _ := world(t, tc.topo, sim.Config{})
			spec := ops.Spec{Op: op, Algo: run.algo, Ranks: len(c.Devices()), Count: tc.count, DType: hw.F32, Redop: tc.redop,
				Channels: tc.channels, Chunk: tc.chnk, NodeRanks: tc.nodeRanks}
			for _, streamed := range []bool{false, true} {
				compile := ops.Compile
				if streamed {
					if op == ops.AllReduce || ops.NetworkSwitch(run.algo) {
						continue // held: its lanes wait for each other
					}
					compile = ops.CompileStreamed
				}
				plan, err := compile(spec)
				if err != nil {
					t.Fatal(err)
				}
				first := map[int][]byte{} // rank 0's output, which every rank must match (each rank's, for reduce-scatter)
				for _, inPlace := range []bool{false, true} {
					for _, enqueue := range []bool{false, true} {
						name := fmt.Sprintf("%v on %s, streamed %v, in place %v, enqueued %v", spec, tc.topo, streamed, inPlace, enqueue)
						in, out := buffers(t, c, plan, inPlace)
						xs := nvlsInputs(t, plan, in, uint64(tc.count))
						exec := simexec.NewExecutor(c)
						if enqueue {
							// The ranks' parts go in one by one; each rank's
							// switch steps find the others' buffers.
							for r := range plan.Ranks {
								if _, err := exec.Enqueue(plan, r, in[r], out[r]); err != nil {
									t.Fatalf("%s: rank %d: %v", name, r, err)
								}
							}
							for r := range plan.Ranks {
								if err := exec.Synchronize(r); err != nil {
									t.Fatalf("%s: %v", name, err)
								}
							}
						} else if _, err := exec.Run(plan, in, out); err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						for r := range plan.Ranks {
							got := make([]byte, out[r].Buf.Len()*4)
							if err := out[r].Buf.Read(got); err != nil {
								t.Fatal(err)
							}
							got = got[out[r].Off*4 : (out[r].Off+out[r].Len)*4]
							if run.inOrder {
								if want := nvlsWant(t, spec, xs, r); !bytes.Equal(got, want) {
									t.Fatalf("%s: rank %d's output differs from the rank-order reduction", name, r)
								}
								continue
							}
							// The tree's order: the same bits on every rank
							// (each rank's own block, for a reduce-scatter)
							// and every run, and within rounding of the
							// rank-order sum.
							same := 0
							if op == ops.ReduceScatter {
								same = r
							}
							if first[same] == nil {
								first[same] = got
							}
							if !bytes.Equal(got, first[same]) {
								t.Fatalf("%s: rank %d's output differs from rank %d's, or from another run's", name, r, same)
							}
							want, _ := hw.Decode[float32](nvlsWant(t, spec, xs, r))
							have, _ := hw.Decode[float32](got)
							for i := range want {
								if d := math.Abs(float64(have[i] - want[i])); d > 1e-3*(1+math.Abs(float64(want[i]))) {
									t.Fatalf("%s: rank %d out[%d] = %v, want about %v", name, r, i, have[i], want[i])
								}
							}
						}
						for _, b := range append(in, out...) {
							_ = b.Buf.Free() // in place frees twice: the second says so
						}
					}
				}
			}
		}
	}
}

// asymmetricNode is four GPUs on a switch that reduces at 80 GB/s, their
// links of different bandwidths and latencies, so that a switch
// operation's time takes the slowest member's latency and the narrowest
// link of its way.
func asymmetricNode(t *testing.T) *topology.Topology {
	t.Helper()
	nodes := []topology.Node{{Name: "sw0", Kind: topology.Switch, ReduceBW: 80e9}}
	var links []topology.Link
	for i, l := range []struct{ bw, lat float64 }{{200e9, 1e-6}, {100e9, 0.5e-6}, {300e9, 2.5e-6}, {250e9, 0.25e-6}} {
		nodes = append(nodes, topology.Node{Name: fmt.Sprintf("gpu%d", i), Kind: topology.GPU, ReduceBW: math.Inf(1)})
		links = append(links, topology.Link{A: i + 1, B: 0, BW: l.bw, Latency: l.lat})
	}
	topo, err := topology.New("asymmetric", nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// switchChain is a plan in which one thing happens at a time: rank 0
// switch-reduces every rank's input, tells rank 2 so with a message, and
// rank 2 multicasts its input into every rank's output. Nothing contends,
// so the simulator must time it as Cost prices it.
func switchChain(p, n int) *ops.Plan {
	spec := ops.Spec{Op: ops.AllReduce, Algo: "chain", Ranks: p, Count: n, DType: hw.F32, Redop: hw.Sum}
	all := ops.Ref{Buf: ops.Out, Len: n}
	plan := &ops.Plan{Spec: spec, InLen: n, OutLen: n, TmpLen: 1, Lanes: 1, Steps: make([][]ops.Step, p)}
	plan.Steps[0] = []ops.Step{
		{Kind: ops.StepSwitchReduce, Dst: all, Src: ops.Ref{Buf: ops.In, Len: n}},
		{Kind: ops.StepSend, Peer: 2, Tag: 1, Src: ops.Ref{Buf: ops.Out, Len: 1}},
	}
	plan.Steps[2] = []ops.Step{
		{Kind: ops.StepRecv, Peer: 0, Tag: 1, Dst: ops.Ref{Buf: ops.Tmp, Len: 1}},
		{Kind: ops.StepMulticast, Dst: all, Src: ops.Ref{Buf: ops.In, Len: n}},
	}
	return plan
}

// TestSwitchStepsSimulatedAsCosted: on an idle fabric the simulator times
// switch steps as Cost prices them, with and without a wire and a launch
// time, on a node whose switch's reduction is the bottleneck (dgx-h100),
// one where the links are (nvls=inf), and one whose links all differ; a
// wire's rate caps them too. (Each operation's end is rounded to the
// picosecond: they agree to a picosecond a step.)
func TestSwitchStepsSimulatedAsCosted(t *testing.T) {
	wire := &ops.Wire{Latency: [3]float64{2.5e-6, 5.7e-6, 14e-6}, Efficiency: [3]float64{0.85, 0.9, 0.94}}
	capped := *wire
	capped.Rate = 40e9
	for _, fabric := range []string{"dgx-h100", "switch:4,bw=100GB/s,lat=1us,nvls=inf", "asymmetric"} {
		var topo *topology.Topology
		if fabric == "asymmetric" {
			topo = asymmetricNode(t)
		} else {
			var err error
			if topo, err = topology.Parse(fabric); err != nil {
				t.Fatal(err)
			}
		}
		for _, w := range []*ops.Wire{nil, wire, &capped} {
			c, err := sim.NewCluster(topo, sim.Config{TimingOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			plan := switchChain(topo.NumGPUs(), 1<<20)
			plan.Wire = w
			if w != nil {
				plan.Launch = 4e-6
			}
			in, out := buffers(t, c, plan, false)
			got, err := simexec.NewExecutor(c).Run(plan, in, out)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ops.Cost(plan, topo)
			if err != nil || math.Abs(got-want) > 1e-12*float64(plan.NumSteps()) {
				t.Errorf("%s, wire %v: simulated %v s, costed %v s (%v)", fabric, w, got, want, err)
			}
			c.Close()
		}
	}
}

// TestNVLSAllReduceReachesTheSwitchRate: on dgx-h100, whose NVSwitch
// reduces 276 GB/s of results, a large NVLS all-reduce in NCCL's shape
// (16 channels, 128 KiB chunks) pipelines its reductions and multicasts
// so that the switch's reduction is the bottleneck: its algorithm
// bandwidth lies within 5% under that rate (busbw about 480 GB/s, as
// NCCL's maintainers report), far above what running the two halves one
// after the other would give.
func TestNVLSAllReduceReachesTheSwitchRate(t *testing.T) {
	c, _ := world(t, "dgx-h100", sim.Config{TimingOnly: true})
	spec := ops.Spec{Op: ops.AllReduce, Algo: "nccl-nvls", Ranks: 8, Count: 1 << 28, DType: hw.F32, Redop: hw.Sum, Channels: 16, Chunk: 32 << 10}
	plan, err := ops.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	in, out := buffers(t, c, plan, false)
	secs, err := simexec.NewExecutor(c).Run(plan, in, out)
	if err != nil {
		t.Fatal(err)
	}
	if algbw := float64(spec.Count*4) / secs; algbw > 276e9 || algbw < 0.95*276e9 {
		t.Fatalf("algorithm bandwidth %.1f GB/s, want just under the switch's 276 GB/s", algbw/1e9)
	}
}

// TestSwitchPlansNeedTheSimulator: the generic driver, which real devices
// use, refuses a plan with switch steps before enqueueing anything, with
// ErrUnsupported and the reason; on a fabric whose switch does not reduce
// the simulator fails the run, and Cost the pricing, with the reason;
// and a simulated run of such a plan is the same twice, to the trace byte.
func TestSwitchPlansNeedTheSimulator(t *testing.T) {
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-nvls", Ranks: 4, Count: 64, DType: hw.F32, Redop: hw.Sum, Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	c, topo := world(t, "switch:4,nvls=inf", sim.Config{})
	in, out := buffers(t, c, plan, false)
	exec := ops.NewExecutor(c.World())
	if _, err := exec.Run(plan, in, out); !errors.Is(err, ops.ErrUnsupported) || !strings.Contains(err.Error(), "only the simulator") {
		t.Fatalf("generic run: %v, want ErrUnsupported saying only the simulator runs it", err)
	}
	if _, err := exec.Enqueue(plan, 0, in[0], out[0]); !errors.Is(err, ops.ErrUnsupported) {
		t.Fatalf("generic enqueue: %v, want ErrUnsupported", err)
	}
	if _, err := ops.Cost(plan, topo); err != nil {
		t.Fatal(err)
	}

	flat, flatTopo := world(t, "switch:4", sim.Config{})
	in, out = buffers(t, flat, plan, false)
	if _, err := simexec.NewExecutor(flat).Run(plan, in, out); !errors.Is(err, topology.ErrRoute) || !strings.Contains(err.Error(), "in-network reduction") {
		t.Fatalf("run without NVLS: %v, want topology.ErrRoute naming in-network reduction", err)
	}
	if _, err := ops.Cost(plan, flatTopo); !errors.Is(err, topology.ErrRoute) {
		t.Fatalf("cost without NVLS: %v, want topology.ErrRoute", err)
	}

	var traces [2]bytes.Buffer
	for i := range traces {
		tc, _ := world(t, "dgx-h100", sim.Config{TimingOnly: true, Trace: true})
		p8, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-nvls", Ranks: 8, Count: 1 << 12, DType: hw.F32, Redop: hw.Sum, Channels: 3, Chunk: 100})
		if err != nil {
			t.Fatal(err)
		}
		in, out := buffers(t, tc, p8, false)
		if _, err := simexec.NewExecutor(tc).Run(p8, in, out); err != nil {
			t.Fatal(err)
		}
		if err := tc.WriteTrace(&traces[i]); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(traces[0].Bytes(), traces[1].Bytes()) || !strings.Contains(traces[0].String(), "sw0.reduce") {
		t.Fatal("two runs of one NVLS plan traced differently, or without the switch's reduction")
	}
}

var _ ops.SwitchCoster = (*topology.Topology)(nil)

// TestSwitchPlansAreNotMirrored: a plan with switch steps acts on a whole
// node at once, which a mirror cannot fold: on a cluster that mirrors
// symmetric plans it is simulated on every rank (and so still right), and
// a workload mirror refuses it.
func TestSwitchPlansAreNotMirrored(t *testing.T) {
	c, _ := world(t, "switch:8,nvls=inf", sim.Config{TimingOnly: true, Symmetry: true})
	plan, err := ops.Compile(ops.Spec{Op: ops.AllGather, Algo: "nccl-nvls", Ranks: 8, Count: 1 << 10, DType: hw.F32, Channels: 2})
	if err != nil {
		t.Fatal(err)
	}
	if g := plan.Symmetry(); g != ops.NotSymmetric {
		t.Fatalf("an NVLS plan is %v-symmetric", g)
	}
	d := simexec.NewDriver(c)
	in, out := buffers(t, c, plan, false)
	if _, err := ops.NewExecutorWith(c.World(), d).Run(plan, in, out); err != nil {
		t.Fatal(err)
	}
	if d.MirroredRuns() != 0 || d.MirrorBlock(c.World(), plan) != 0 {
		t.Fatalf("%d mirrored runs, block %d: want none", d.MirroredRuns(), d.MirrorBlock(c.World(), plan))
	}
	md, _, ok, err := d.Mirror(ops.Rotation)
	if err != nil || !ok {
		t.Fatalf("mirror of switch:8: ok %v, %v", ok, err)
	}
	mc := md.Cluster()
	mIn, mOut := buffers(t, mc, plan, false)
	if _, err := ops.NewExecutorWith(mc.World(), md).Enqueue(plan, 0, mIn[0], mOut[0]); !errors.Is(err, simexec.ErrNotMirrorable) {
		t.Fatalf("workload mirror: %v, want ErrNotMirrorable", err)
	}
}
