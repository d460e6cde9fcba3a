package nccl_test

import (
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// estimateOf is NCCL's estimate of algorithm a for op on bytes.
func estimateOf(t *testing.T, s nccl.System, op ops.Op, bytes int64, a nccl.Algo, o nccl.Options) nccl.Estimate {
	t.Helper()
	for _, e := range nccl.Estimates(s, op, bytes, o) {
		if e.Algo == a && e.Off == "" {
			return e
		}
	}
	t.Fatalf("%s: no %v for %s of %d bytes", s, a, op, bytes)
	return nccl.Estimate{}
}

// chunkOf is the bytes of a pass's part in the plan NCCL's algorithm a
// makes for an all-reduce of bytes (f32) on spec's fabric.
func chunkOf(t *testing.T, spec string, bytes int64, a nccl.Algo, o nccl.Options) int64 {
	t.Helper()
	topo, err := topology.Resolve(spec)
	if err != nil {
		t.Fatal(err)
	}
	o.Algos = []nccl.Algo{a}
	tu, err := nccl.NewTuner(topo, o)
	if err != nil {
		t.Fatal(err)
	}
	plan, c, err := tu.Plan(ops.Spec{Op: ops.AllReduce, Ranks: tu.System.Ranks, Count: int(bytes / 4), DType: hw.F32, Redop: hw.Sum})
	if err != nil || c.Algo != a {
		t.Fatalf("%s, %v: %v, %v", spec, a, c.Estimate, err)
	}
	return int64(plan.Chunk) * 4
}

// TestNVLSChannelsFollowTheRelease: NVLS launches 16 channels up to
// 2.24; on Blackwell 32 from 2.25, 24 on one node from 2.27; from 2.30
// several Blackwell nodes take their count from the GPUs' path to the
// NIC (48 GB/s on DGX B200: 32 on two nodes, 24 on more);
// NCCL_NVLS_NCHANNELS sets it, NCCL_MIN_CTAS and NCCL_MAX_CTAS bound it.
func TestNVLSChannelsFollowTheRelease(t *testing.T) {
	for _, tc := range []struct {
		topo string
		algo nccl.Algo
		o    nccl.Options
		want int
	}{
		{"hgx-b200", nccl.NVLS, nccl.Options{Version: 224}, 16},
		{"hgx-b200", nccl.NVLS, nccl.Options{Version: 225}, 32},
		{"hgx-b200", nccl.NVLS, nccl.Options{Version: 227}, 24},
		{"hgx-b200", nccl.NVLS, nccl.Options{}, 24},
		{"dgx-h100", nccl.NVLS, nccl.Options{}, 16},
		{"dgx-b200x2", nccl.NVLSTree, nccl.Options{Version: 227}, 32},
		{"dgx-b200x2", nccl.NVLSTree, nccl.Options{}, 32},
		{"dgx-b200x4", nccl.NVLSTree, nccl.Options{Version: 229}, 32},
		{"dgx-b200x4", nccl.NVLSTree, nccl.Options{}, 24},
		{"hgx-b200", nccl.NVLS, nccl.Options{NVLSChannels: 8}, 8},
		{"hgx-b200", nccl.NVLS, nccl.Options{NVLSChannels: 8, MinCTAs: 12}, 12},
		{"dgx-b200x2", nccl.NVLSTree, nccl.Options{MaxCTAs: 20}, 20},
		{"dgx-h100", nccl.NVLS, nccl.Options{MinCTAs: 40, MaxCTAs: 20}, 20},
	} {
		e := estimateOf(t, describe(t, tc.topo), ops.AllReduce, 1<<30, tc.algo, tc.o)
		if e.Channels != tc.want {
			t.Errorf("%s, %+v: %v runs %d channels, want %d", tc.topo, tc.o, tc.algo, e.Channels, tc.want)
		}
	}
	// The CTA bounds hold the collectives' channels too, and NCCL's
	// model does not see them.
	s := describe(t, "dgx-b200x2")
	free, bound := estimateOf(t, s, ops.AllReduce, 1<<30, nccl.Ring, nccl.Options{}), estimateOf(t, s, ops.AllReduce, 1<<30, nccl.Ring, nccl.Options{MaxCTAs: 4})
	if bound.Channels != 4 || bound.BusBW != free.BusBW {
		t.Errorf("NCCL_MAX_CTAS=4: ring on %d channels at %.1f GB/s, want 4 at the model's %.1f", bound.Channels, bound.BusBW, free.BusBW)
	}
}

// TestNVLSChunksFollowTheRelease: an NVLSTree chunk starts from a Simple
// step before 2.21 (then 256, 128, 64, 32 KiB while the size is under
// 32×, 16×, 4×, 1× channels × heads × chunk), from NVLS's 128 KiB after,
// and 2.30 caps it at 64 KiB on two DGX B200s (a PCIe switch before
// NICs under 96 GB/s); NCCL_NVLSTREE_MAX_CHUNKSIZE and
// NCCL_NVLS_CHUNKSIZE set them. NVLS's is at most 128 KiB, 32 KiB across
// nodes where NCCL's model gives NVLS under 150 GB/s (from 2.20).
func TestNVLSChunksFollowTheRelease(t *testing.T) {
	for _, tc := range []struct {
		topo  string
		algo  nccl.Algo
		bytes int64
		o     nccl.Options
		want  int64
	}{
		{"dgx-b200x2", nccl.NVLSTree, 1 << 30, nccl.Options{}, 64 << 10},
		{"dgx-b200x2", nccl.NVLSTree, 1 << 30, nccl.Options{Version: 229}, 128 << 10},
		{"dgx-b200x2", nccl.NVLSTree, 1 << 30, nccl.Options{Version: 220}, 256 << 10},
		{"dgx-b200x2", nccl.NVLSTree, 256 << 20, nccl.Options{Version: 220}, 128 << 10},
		{"dgx-b200x2", nccl.NVLSTree, 1 << 30, nccl.Options{NVLSTreeMaxChunk: 32 << 10}, 32 << 10},
		{"dgx-b200x2", nccl.NVLSTree, 1 << 30, nccl.Options{Version: 229, NVLSChunk: 256 << 10}, 256 << 10},
		{"dgx-b200x2", nccl.NVLSTree, 1 << 30, nccl.Options{Version: 220, NVLSChunk: 32 << 10}, 256 << 10},
		{"dgx-b200x4", nccl.NVLSTree, 1 << 30, nccl.Options{Version: 229}, 64 << 10},
		{"hgx-b200", nccl.NVLS, 2 << 30, nccl.Options{}, 128 << 10},
		{"hgx-b200", nccl.NVLS, 1 << 30, nccl.Options{}, 64 << 10},
		{"hgx-b200", nccl.NVLS, 32 << 20, nccl.Options{}, 32 << 10},
		{"hgx-b200", nccl.NVLS, 8 << 20, nccl.Options{}, 16 << 10},
		{"hgx-b200", nccl.NVLS, 4 << 30, nccl.Options{NVLSChunk: 256 << 10}, 256 << 10},
		{"hgx-b200", nccl.NVLS, 2 << 30, nccl.Options{Version: 220, NVLSChunk: 64 << 10}, 128 << 10},
	} {
		if got := chunkOf(t, tc.topo, tc.bytes, tc.algo, tc.o); got != tc.want {
			t.Errorf("%s, %v, %d B, %+v: chunk of %d bytes, want %d", tc.topo, tc.algo, tc.bytes, tc.o, got, tc.want)
		}
	}
	const sharp = "cluster:2x8,arch=hopper,sharp=inf,nvls=inf"
	if e := estimateOf(t, describe(t, sharp), ops.AllReduce, 1<<30, nccl.NVLS, nccl.Options{}); e.AlgBW >= 150 {
		t.Fatalf("%s: NVLS at %.0f GB/s in NCCL's model, want under 150", sharp, e.AlgBW)
	}
	for v, want := range map[nccl.Version]int64{nccl.V2_30: 32 << 10, 219: 64 << 10} {
		if got := chunkOf(t, sharp, 64<<20, nccl.NVLS, nccl.Options{Version: v}); got != want {
			t.Errorf("%s, NVLS in %v: chunk of %d bytes, want %d", sharp, v, got, want)
		}
	}
}

// TestNVLSReducesWhatTheSwitchAdds: NCCL runs NVLS only where the switch
// reduces the element type with the operation (device.h,
// ncclNvlsSupported): sums of every type it adds, min and max of integers
// and 16-bit floats, no average, nothing of 8 bits; an all-gather, which
// reduces nothing, whatever the type. PAT's reduce-scatter does not
// average.
func TestNVLSReducesWhatTheSwitchAdds(t *testing.T) {
	tu := try(nccl.NewTuner(try(topology.Resolve("dgx-h100"))(t), nccl.Options{}))(t)
	only := try(nccl.NewTuner(try(topology.Resolve("dgx-h100"))(t), nccl.Options{Algos: []nccl.Algo{nccl.NVLS}}))(t)
	for _, tc := range []struct {
		op    ops.Op
		dtype hw.DType
		redop hw.ReduceOp
		nvls  bool
	}{
		{ops.AllReduce, hw.F32, hw.Sum, true},
		{ops.AllReduce, hw.F32, hw.Max, false},
		{ops.AllReduce, hw.BF16, hw.Min, true},
		{ops.AllReduce, hw.I64, hw.Max, true},
		{ops.AllReduce, hw.I32, hw.Prod, false},
		{ops.AllReduce, hw.F64, hw.Avg, false},
		{ops.AllReduce, hw.U8, hw.Sum, false},
		{ops.ReduceScatter, hw.U8, hw.Sum, false},
		{ops.AllGather, hw.U8, 0, true},
	} {
		spec := ops.Spec{Op: tc.op, Ranks: 8, Count: (1 << 30) / tc.dtype.Size(), DType: tc.dtype, Redop: tc.redop}
		if tc.op == ops.ReduceScatter || tc.op == ops.AllGather {
			spec.Count /= 8
		}
		if _, err := only.Choose(spec); (err == nil) != tc.nvls || err != nil && !strings.Contains(err.Error(), "NVLS does not reduce") {
			t.Errorf("%v of %v with %v, NVLS alone: %v; want it allowed: %v", tc.op, tc.dtype, tc.redop, err, tc.nvls)
		}
		// Where NVLS may not, the tuner picks what may.
		if c, err := tu.Choose(spec); err != nil || !tc.nvls && c.Algo == nccl.NVLS {
			t.Errorf("%v of %v with %v: %v, %v", tc.op, tc.dtype, tc.redop, c.Estimate, err)
		}
	}
	pat := try(nccl.NewTuner(try(topology.Resolve("cluster:8x1,arch=hopper"))(t), nccl.Options{Algos: []nccl.Algo{nccl.PAT}}))(t)
	spec := ops.Spec{Op: ops.ReduceScatter, Ranks: 8, Count: 1 << 20, DType: hw.F32, Redop: hw.Avg}
	if c, err := pat.Choose(spec); err == nil || !strings.Contains(err.Error(), "does not average") {
		t.Errorf("PAT reduce-scatter average: %v, %v; want refused", c.Estimate, err)
	}
	spec.Redop = hw.Sum
	if c, err := pat.Choose(spec); err != nil || c.Algo != nccl.PAT {
		t.Errorf("PAT reduce-scatter sum: %v, %v", c.Estimate, err)
	}
}
