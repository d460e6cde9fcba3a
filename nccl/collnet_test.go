package nccl_test

import (
	"cmp"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// TestCollNetRunsWhereNCCLPicksIt: on eight nodes of one GPU whose
// network switch reduces (sharp=), NCCL's tuner picks CollNet chain for
// all-reduce at every size (direct's search makes one channel of a
// node's one GPU, at 0.85 on Hopper, and chain's hop is 1 µs the
// shorter), and the simulator runs
// it (nccl-collnet-chain through the network switch): in NCCL's model's
// time within 10%
// at small sizes, where its one network hop is all there is. From 1 MiB
// the simulator's pace is its links', the switch's and the pipeline of
// NCCL's chunks on the channels NCCL launches (fewer for small sizes,
// which NCCL's model does not see), where NCCL's model prices CollNet at
// one bandwidth: 0.5 to 1.35 of it. On DGX H100s with SHARP, direct and
// chain (forced, as NCCL_ALGO does) run too, reducing within the node
// first: within 10% of the model at 1 KiB, and 0.45 to 1.25 of it at
// 1 GiB, where the pipeline is full (NCCL's chunks of 128 KiB, a
// channel's for chain, a head's for direct, keep the NICs busier than
// NCCL's model credits chain with; no measurement of SHARP says which is
// nearer). Middle sizes, where the simulator's pipeline still fills
// (direct 1.29 of the model at 256 MiB), are logged.
func TestCollNetRunsWhereNCCLPicksIt(t *testing.T) {
	c, tp := simtest.World(t, "cluster:8x1,arch=hopper,sharp=inf", sim.Config{TimingOnly: true})
	tu, err := nccl.NewTuner(tp, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !tu.System.SHARP {
		t.Fatalf("%s: no SHARP", tu.System)
	}
	for _, bytes := range []int{1 << 10, 1 << 20, 256 << 20} {
		spec := ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: bytes / 4, DType: hw.F32, Redop: hw.Sum}
		plan, choice, err := tu.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		if plan.Algo != "nccl-collnet-chain" || choice.NCCL != choice.Estimate || !plan.UsesSwitch() {
			t.Fatalf("%d B: planned %s for %v (NCCL: %v), want CollNet chain simulated", bytes, plan.Algo, choice.Estimate, choice.NCCL)
		}
		if e := estimate(t, tu.System, ops.AllReduce, int64(bytes), nccl.CollNetDirect, ops.ProtoSimple, nccl.Options{}); e.Off != "" || !(e.TimeUS > choice.TimeUS) {
			t.Errorf("%d B: CollNet direct %.1f µs (%s), want on and slower than chain's %.1f", bytes, e.TimeUS, e.Off, choice.TimeUS)
		}
		got := simtest.Time(t, c, plan)
		ratio := got * 1e6 / choice.TimeUS
		lo, hi := 0.9, 1.1
		if bytes >= 1<<20 {
			lo, hi = 0.5, 1.35
		}
		if !(ratio >= lo && ratio <= hi) || math.IsNaN(ratio) {
			t.Errorf("%d B: simulated %.1f µs, NCCL's model %.1f µs (ratio %.3f, want %.2f to %.2f)", bytes, got*1e6, choice.TimeUS, ratio, lo, hi)
		}
	}
	// Nodes of eight GPUs: CollNet direct reduces within the node to
	// each GPU's share first, then through the switch; chain along a
	// chain to each channel's head.
	c8, eight := simtest.World(t, "dgx-h100x2,sharp=inf", sim.Config{TimingOnly: true})
	tu, err = nccl.NewTuner(eight, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, algo := range []nccl.Algo{nccl.CollNetDirect, nccl.CollNetChain} {
		for _, bytes := range []int{1 << 10, 1 << 20, 256 << 20, 1 << 30} {
			tu.Options.Algos = []nccl.Algo{algo}
			plan, choice, err := tu.Plan(ops.Spec{Op: ops.AllReduce, Ranks: 16, Count: bytes / 4, DType: hw.F32, Redop: hw.Sum})
			if err != nil {
				t.Fatal(err)
			}
			if plan.Algo != "nccl-"+algo.String() || plan.NodeRanks != 8 || !plan.UsesSwitch() {
				t.Fatalf("nodes of 8, %d B: planned %s in nodes of %d for %v, want %v", bytes, plan.Algo, plan.NodeRanks, choice.Estimate, algo)
			}
			got := simtest.Time(t, c8, plan)
			ratio := got * 1e6 / choice.TimeUS
			t.Logf("nodes of 8, %v, %d B: simulated %.1f µs, NCCL's model %.1f µs", algo, bytes, got*1e6, choice.TimeUS)
			lo, hi := 0.9, 1.1
			if bytes == 1<<30 {
				lo, hi = 0.45, 1.25
			}
			if bytes <= 1<<10 || bytes == 1<<30 {
				if !(ratio >= lo && ratio <= hi) {
					t.Errorf("nodes of 8, %v, %d B: simulated %.1f µs, NCCL's model %.1f µs (ratio %.3f, want %.2f to %.2f)", algo, bytes, got*1e6, choice.TimeUS, ratio, lo, hi)
				}
			}
		}
	}
}

// TestNVLSAcrossNodesRunsOverCollNet: NCCL runs NVLS across nodes over
// CollNet (SHARP): where NCCL's tuner picks it, the simulator runs it
// (nccl-nvls in nodes of 8: each node's NVSwitch reduces, the network's
// switch all-reduces between nodes, the NVSwitch multicasts), faster
// than NCCL's model says (its NVLS bandwidth across nodes is the lesser
// of the NVLink and network figures it found; the simulator's links and
// switches here are unbounded but the NICs, and its search's 8 channels
// of 40 GB/s, not the 16 NVLS launches, price it): 0.45 to 1.25 of it.
func TestNVLSAcrossNodesRunsOverCollNet(t *testing.T) {
	c, tp := simtest.World(t, "dgx-h100x4,sharp=inf", sim.Config{TimingOnly: true})
	tu, err := nccl.NewTuner(tp, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan, choice, err := tu.Plan(ops.Spec{Op: ops.AllReduce, Ranks: 32, Count: 16 << 20, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if choice.NCCL.Algo != nccl.NVLS || choice.Algo != nccl.NVLS || plan.Algo != "nccl-nvls" || plan.NodeRanks != 8 {
		t.Fatalf("64 MiB: planned %s for %v, NCCL %v; want NVLS across nodes of 8", plan.Algo, choice.Estimate, choice.NCCL)
	}
	got := simtest.Time(t, c, plan)
	if ratio := got * 1e6 / choice.TimeUS; !(ratio >= 0.45 && ratio <= 1.25) {
		t.Errorf("64 MiB: simulated %.1f µs, NCCL's model %.1f µs (ratio %.3f, want 0.45 to 1.25)", got*1e6, choice.TimeUS, ratio)
	}
}

// TestCollNetReducesWhatSHARPAdds: NCCL runs CollNet, and NVLS across
// nodes, only where its SHARP plugin reduces the element type with the
// operation: sum (an average too), min and max, never a product; bf16 and
// 8-bit types only on SHARP's third generation, which commsim takes from
// 400 Gb/s (NDR) ports. Where it may not, the tuner picks what may and
// says why the others are off; an all-gather reduces nothing.
func TestCollNetReducesWhatSHARPAdds(t *testing.T) {
	for _, tc := range []struct {
		topo   string
		op     ops.Op
		dtype  hw.DType
		redop  hw.ReduceOp
		sharp  bool
		reason string
	}{
		{"cluster:8x1,arch=hopper,sharp=inf,nicbw=200Gb/s", ops.AllReduce, hw.F32, hw.Sum, true, ""},
		{"cluster:8x1,arch=hopper,sharp=inf,nicbw=200Gb/s", ops.AllReduce, hw.F64, hw.Avg, true, ""},
		{"cluster:8x1,arch=hopper,sharp=inf,nicbw=200Gb/s", ops.AllReduce, hw.I32, hw.Max, true, ""},
		{"cluster:8x1,arch=hopper,sharp=inf,nicbw=200Gb/s", ops.AllReduce, hw.F32, hw.Prod, false, "SHARP does not reduce with prod"},
		{"cluster:8x1,arch=hopper,sharp=inf,nicbw=200Gb/s", ops.ReduceScatter, hw.BF16, hw.Sum, false, "does not reduce bf16"},
		{"cluster:8x1,arch=hopper,sharp=inf,nicbw=200Gb/s", ops.AllReduce, hw.U8, hw.Sum, false, "does not reduce u8"},
		{"cluster:8x1,arch=hopper,sharp=inf,nicbw=400Gb/s", ops.AllReduce, hw.BF16, hw.Sum, true, ""},
		{"cluster:8x1,arch=hopper,sharp=inf,nicbw=400Gb/s", ops.AllReduce, hw.U8, hw.Min, true, ""},
		{"cluster:8x1,arch=hopper,sharp=inf,nicbw=400Gb/s", ops.AllReduce, hw.I64, hw.Prod, false, "SHARP does not reduce with prod"},
		{"cluster:4x8,arch=hopper,sharp=inf,nvls=inf", ops.AllReduce, hw.F32, hw.Prod, false, "SHARP does not reduce with prod"},
	} {
		tp := try(topology.Resolve(tc.topo))(t)
		ranks := tp.NumGPUs()
		algos := []nccl.Algo{nccl.CollNetDirect, nccl.CollNetChain}
		if ranks > 8 {
			algos = []nccl.Algo{nccl.NVLS}
		}
		only := try(nccl.NewTuner(tp, nccl.Options{Algos: algos}))(t)
		tu := try(nccl.NewTuner(tp, nccl.Options{}))(t)
		spec := ops.Spec{Op: tc.op, Ranks: ranks, Count: (64 << 20) / tc.dtype.Size(), DType: tc.dtype, Redop: tc.redop}
		if tc.op == ops.ReduceScatter {
			spec.Count /= ranks
		}
		c, err := only.Choose(spec)
		if (err == nil) != tc.sharp || err != nil && !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %v of %v with %v, %v alone: %v, %v; want it allowed: %v (%q)", tc.topo, tc.op, tc.dtype, tc.redop, algos, c.Estimate, err, tc.sharp, tc.reason)
		}
		c, err = tu.Choose(spec)
		onSHARP := c.Algo == nccl.CollNetDirect || c.Algo == nccl.CollNetChain || c.Algo == nccl.NVLS
		if err != nil || !tc.sharp && onSHARP {
			t.Errorf("%s: %v of %v with %v: %v, %v", tc.topo, tc.op, tc.dtype, tc.redop, c.Estimate, err)
		}
	}
	// All-gather reduces nothing: SHARP gathers every type.
	tp := try(topology.Resolve("cluster:8x1,arch=hopper,sharp=inf,nicbw=200Gb/s"))(t)
	only := try(nccl.NewTuner(tp, nccl.Options{Algos: []nccl.Algo{nccl.CollNetDirect}}))(t)
	if c, err := only.Choose(ops.Spec{Op: ops.AllGather, Ranks: 8, Count: 1 << 20, DType: hw.U8}); err != nil || c.Algo != nccl.CollNetDirect {
		t.Errorf("all-gather of u8, CollNet direct alone: %v, %v", c.Estimate, err)
	}
}

// TestGathersThroughTheNetworkNeedANICPerGPU: as in NCCL's tuner, NVLS
// and CollNet direct run all-gather and reduce-scatter across nodes only
// where every GPU of a node has a NIC (a CollNet head) of its own; with
// half as many NICs they are off, saying why, and all-reduce keeps them.
func TestGathersThroughTheNetworkNeedANICPerGPU(t *testing.T) {
	s := describe(t, "dgx-h100x2,rail=true,sharp=inf")
	for _, nics := range []int{8, 4} {
		s.NICs = nics
		for _, op := range []ops.Op{ops.AllGather, ops.ReduceScatter, ops.AllReduce} {
			for _, e := range nccl.Estimates(s, op, 64<<20, nccl.Options{}) {
				if e.Algo != nccl.NVLS && e.Algo != nccl.CollNetDirect || e.Protocol != ops.ProtoSimple {
					continue
				}
				if off := nics == 4 && op != ops.AllReduce; off != strings.Contains(e.Off, "a NIC for every GPU") {
					t.Errorf("%d NICs, %s, %v: off %q, want off for want of NICs: %v", nics, op, e.Algo, e.Off, off)
				}
			}
		}
	}
}

// TestNVLSAcrossNodesRunsOnTheCommunicatorsChannels: NVLS over CollNet
// launches at most the communicator's channels (enqueue.cc): 24 on two
// DGX B200s with SHARP (16, and half as many again for CollNet), whose
// NVLS graph has 32; on one node and for NVLS tree, the NVLS graph's 24
// and 32.
func TestNVLSAcrossNodesRunsOnTheCommunicatorsChannels(t *testing.T) {
	for _, tc := range []struct {
		topo string
		algo nccl.Algo
		want int
	}{{"dgx-b200x2,sharp=inf", nccl.NVLS, 24}, {"dgx-b200x2,sharp=inf", nccl.NVLSTree, 32}, {"hgx-b200", nccl.NVLS, 24}} {
		e := estimate(t, describe(t, tc.topo), ops.AllReduce, 1<<30, tc.algo, ops.ProtoSimple, nccl.Options{})
		if e.Channels != tc.want {
			t.Errorf("%s, %v: %d channels, want %d", tc.topo, tc.algo, e.Channels, tc.want)
		}
	}
}

// TestEnablesTurnNVLSAndCollNetOff: NCCL_NVLS_ENABLE=0 leaves NVLS and
// NVLS tree out, and NCCL_COLLNET_ENABLE=0 CollNet and NVLS across nodes
// (which runs over it), each saying so; the rest stay as they were.
func TestEnablesTurnNVLSAndCollNetOff(t *testing.T) {
	s := describe(t, "dgx-h100x2,rail=true,sharp=inf")
	offByDefault := map[nccl.Algo]string{}
	for _, e := range nccl.Estimates(s, ops.AllReduce, 64<<20, nccl.Options{}) {
		if e.Protocol == ops.ProtoSimple {
			offByDefault[e.Algo] = e.Off
		}
	}
	if offByDefault[nccl.NVLS] != "" || offByDefault[nccl.CollNetDirect] != "" {
		t.Fatalf("NVLS and CollNet should run here by default: %q", offByDefault)
	}
	for _, tc := range []struct {
		env string
		o   nccl.Options
		off map[nccl.Algo]string
	}{
		{"NCCL_NVLS_ENABLE=0", nccl.Options{NoNVLS: true}, map[nccl.Algo]string{nccl.NVLS: "NCCL_NVLS_ENABLE=0", nccl.NVLSTree: "NCCL_NVLS_ENABLE=0"}},
		{"NCCL_COLLNET_ENABLE=0", nccl.Options{NoCollNet: true}, map[nccl.Algo]string{nccl.NVLS: "needs CollNet", nccl.CollNetDirect: "NCCL_COLLNET_ENABLE=0", nccl.CollNetChain: "NCCL_COLLNET_ENABLE=0"}},
	} {
		for _, e := range nccl.Estimates(s, ops.AllReduce, 64<<20, tc.o) {
			if e.Protocol != ops.ProtoSimple {
				continue
			}
			why, off := tc.off[e.Algo]
			if off && (why == "" || !strings.Contains(e.Off, why)) || !off && e.Off != offByDefault[e.Algo] {
				t.Errorf("%s: %v off %q, want %q", tc.env, e.Algo, e.Off, cmp.Or(why, offByDefault[e.Algo]))
			}
		}
	}
}

// TestCollNetChunksAndChannelsAreNCCLs: CollNet direct launches fewer
// channels for small sizes by its own rule (enqueue.cc: while bytes <
// channels × 640 threads × heads × 512, stopping at 16, 8, 4, 2 or 1 once
// it holds): 3 of 4 for 1 MiB on nodes of one GPU, 1 on nodes of 8;
// chain by a ring's rule at 640 × 512 bytes a channel: 3. Their chunks
// are NCCL's (calcCollChunking): at 64 MiB on two nodes of 8, 64 KiB a
// head for direct, 128 KiB a channel for chain; at 32 MiB half that. NCCL_COLLNET_NODE_
// THRESHOLD keeps CollNet off below that many nodes, and its channels
// with it.
func TestCollNetChunksAndChannelsAreNCCLs(t *testing.T) {
	one, eight := describe(t, "cluster:8x1,arch=hopper,sharp=inf"), describe(t, "cluster:2x8,arch=hopper,sharp=inf")
	for _, tc := range []struct {
		s     nccl.System
		algo  nccl.Algo
		bytes int64
		want  int
	}{
		{one, nccl.CollNetDirect, 1 << 20, 3},
		{one, nccl.CollNetDirect, 400000, 2}, // at 3, half the threshold
		{one, nccl.CollNetDirect, 1 << 30, 4},
		{eight, nccl.CollNetDirect, 1 << 20, 1},
		{eight, nccl.CollNetDirect, 1 << 30, 8},
		{eight, nccl.CollNetChain, 1 << 20, 3},
		{eight, nccl.CollNetChain, 1 << 30, 8},
	} {
		if e := estimateOf(t, tc.s, ops.AllReduce, tc.bytes, tc.algo, nccl.Options{}); e.Channels != tc.want {
			t.Errorf("%s: %v of %d B on %d channels, want %d", tc.s, tc.algo, tc.bytes, e.Channels, tc.want)
		}
	}
	const fabric = "cluster:2x8,arch=hopper,sharp=inf"
	for _, tc := range []struct {
		algo        nccl.Algo
		bytes, want int64
	}{
		{nccl.CollNetDirect, 64 << 20, 64 << 10},
		{nccl.CollNetDirect, 32 << 20, 32 << 10},
		{nccl.CollNetChain, 64 << 20, 128 << 10},
		{nccl.CollNetChain, 32 << 20, 64 << 10},
	} {
		if got := chunkOf(t, fabric, tc.bytes, tc.algo, nccl.Options{}); got != tc.want {
			t.Errorf("%s, %v of %d B: chunk of %d bytes, want %d", fabric, tc.algo, tc.bytes, got, tc.want)
		}
	}
	for _, e := range nccl.Estimates(eight, ops.AllReduce, 1<<30, nccl.Options{CollNetNodes: 4}) {
		if (e.Algo == nccl.CollNetDirect || e.Algo == nccl.CollNetChain) && e.Protocol == ops.ProtoSimple && !strings.Contains(e.Off, "NCCL_COLLNET_NODE_THRESHOLD") {
			t.Errorf("CollNet on 2 nodes with a threshold of 4: %v is %q, want off", e, e.Off)
		}
	}
	checkRingChannels(t, "dgx-a100x2,sharp=inf", nccl.Options{CollNetNodes: 3}, 16)
}

// TestAPlanTooLargeToHoldRunsTheNextPair: on 1024 H100s with SHARP,
// NCCL's tuner picks CollNet direct for a 128 MiB all-gather or
// reduce-scatter, whose plan (every GPU takes or gives each node's piece
// on each of 16 channels) is past ops.MaxPlanSteps even at one pass.
// Tuner.Plan runs the next pair of NCCL's ranking that compiles, and its
// Choice says both: what ran (Estimate) and what NCCL would run (NCCL).
// The plan is refused before any step is made, naming its whole count
// (once it was refused only at the limit, after 2 GB of steps).
func TestAPlanTooLargeToHoldRunsTheNextPair(t *testing.T) {
	topo, err := topology.Parse("dgx-h100x128,rail=true,sharp=inf")
	if err != nil {
		t.Fatal(err)
	}
	tu, err := nccl.NewTuner(topo, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []ops.Op{ops.AllGather, ops.ReduceScatter} {
		spec := ops.Spec{Op: op, Ranks: 1024, Count: 32 << 10, DType: hw.F32, Redop: hw.Sum}
		nccls, err := tu.Choose(spec)
		if err != nil || nccls.NCCL.Algo != nccl.CollNetDirect || nccls.Estimate != nccls.NCCL {
			t.Fatalf("%v: NCCL's choice %+v, %v; want CollNet direct, which commsim simulates", op, nccls, err)
		}
		_, err = nccl.Plan(tu.System, spec, nccls, tu.Options)
		if !errors.Is(err, ops.ErrTooLarge) {
			t.Fatalf("%v: CollNet direct's plan: %v, want ops.ErrTooLarge", op, err)
		}
		var steps int
		if m := regexp.MustCompile(`at least (\d+) plan steps`).FindStringSubmatch(err.Error()); m != nil {
			steps, _ = strconv.Atoi(m[1])
		}
		if steps <= ops.MaxPlanSteps {
			t.Errorf("%v: CollNet direct's plan: %v, want its whole count, past %d", op, err, ops.MaxPlanSteps)
		}
		ranked, err := tu.Ranked(spec)
		if err != nil || len(ranked) < 2 || ranked[0] != nccls.NCCL {
			t.Fatalf("%v: ranked %v, %v", op, ranked, err)
		}
		plan, c, err := tu.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		if c.NCCL != nccls.NCCL || c.Estimate != ranked[1] || !c.Estimate.Runs(plan) || c.NCCL.Runs(plan) {
			t.Errorf("%v: ran %s as %+v (NCCL: %+v); want the ranking's second, %v, in place of %v", op, nccl.Label(plan), c.Estimate, c.NCCL, ranked[1], nccls.NCCL)
		}
	}
}

// TestTuningCountsTheSearchsHeads: NCCL tunes CollNet direct's channels
// and NVLS's chunk by the heads its search found (connect.cc: a GPU with
// a NIC of its own leads each), not by a node's GPUs. On two DGX H100s
// with SHARP but 4 NICs a node, CollNet direct launches 5 of its 24
// channels for 1 MiB and 12 for 8 MiB (3 and 11 counting 8 heads), and
// NVLS across the nodes keeps 32 KiB parts at 6 MiB (bytes ≥ 2 × 16
// channels × 4 heads × 32 KiB), where 8 heads would halve them.
func TestTuningCountsTheSearchsHeads(t *testing.T) {
	four := describe(t, "dgx-h100x2,sharp=inf")
	four.NICs = 4
	for _, tc := range []struct {
		bytes int64
		want  int
	}{{1 << 20, 5}, {8 << 20, 12}} {
		if e := estimateOf(t, four, ops.AllReduce, tc.bytes, nccl.CollNetDirect, nccl.Options{}); e.Channels != tc.want {
			t.Errorf("%s: CollNet direct of %d B on %d channels, want %d", four, tc.bytes, e.Channels, tc.want)
		}
	}
	const bytes = 6 << 20
	e := estimateOf(t, four, ops.AllReduce, bytes, nccl.NVLS, nccl.Options{})
	plan, err := nccl.Plan(four, ops.Spec{Op: ops.AllReduce, Ranks: four.Ranks, Count: bytes / 4, DType: hw.F32, Redop: hw.Sum}, nccl.Choice{Estimate: e, NCCL: e}, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Chunk * 4; e.Channels != 16 || got != 32<<10 {
		t.Errorf("%s: NVLS of %d B on %d channels in parts of %d bytes, want 16 channels of 32 KiB parts", four, bytes, e.Channels, got)
	}
}
