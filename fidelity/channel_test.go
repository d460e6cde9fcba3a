package fidelity

import (
	"math"
	"slices"
	"testing"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// TestMeasuredChannelRates: each of nccl.MeasuredChannel's figures is the
// median of what its source runs, shipped here and held out of the
// targets, show one channel moving: bus bandwidth (nccl-tests') over the
// channels NCCL's tuner gives the size, within 1%. A figure changed
// without its runs, or a run re-read, fails here.
func TestMeasuredChannelRates(t *testing.T) {
	sources := []struct {
		arch  topology.Arch
		file  string
		sizes []int64
	}{
		{topology.Hopper, "xxrjun-h100-sendrecv-8xH100.txt", []int64{32 << 20, 64 << 20, 128 << 20}},
		{topology.Hopper, "xxrjun-h100-allgather-80xH100.txt", []int64{17179868160}},
		{topology.Hopper, "xxrjun-h100-reducescatter-80xH100.txt", []int64{17179868160}},
		{topology.Hopper, "gcp-a3ultra-allgather-16xH200.txt", []int64{8 << 30}},
		{topology.Blackwell, "gcp-a4xmax-allgather-8xGB300.txt", []int64{16 << 30}},
	}
	rates := map[topology.Arch][]float64{}
	for _, src := range sources {
		l, lg, cfg := figureSource(t, src.file)
		topo, err := topology.Resolve(l.Topo)
		if err != nil {
			t.Fatal(err)
		}
		tuner, err := nccl.NewTuner(topo, cfg.NCCL)
		if err != nil {
			t.Fatal(err)
		}
		if tuner.System.Arch != src.arch {
			t.Errorf("%s: %s GPUs, want %s", src.file, tuner.System.Arch, src.arch)
		}
		ranks := topo.NumGPUs()
		for _, bytes := range src.sizes {
			i := slices.IndexFunc(lg.Samples, func(s calibrate.Sample) bool { return s.Bytes == bytes })
			if i < 0 {
				t.Fatalf("%s: no row of %d bytes", src.file, bytes)
			}
			spec, _ := verify.SpecForSize(ops.Spec{Op: cfg.Op, Algo: "nccl", Ranks: ranks, DType: hw.F32, Redop: hw.Sum}, bytes)
			c, err := tuner.Choose(spec)
			if err != nil {
				t.Fatal(err)
			}
			bus := float64(bytes) / (lg.Samples[i].TimeUS * 1e3) // GB/s
			if cfg.Op != ops.SendRecv {
				bus *= float64(ranks-1) / float64(ranks)
			}
			rates[src.arch] = append(rates[src.arch], bus/float64(c.Channels))
		}
	}
	for arch, r := range rates {
		m := median(r)
		got, ok := nccl.MeasuredChannel(arch)
		if !ok || math.Abs(got-m) > 0.01*m {
			t.Errorf("%s: MeasuredChannel %v (%v); its runs show %.2f GB/s a channel (median of %.2f)", arch, got, ok, m, r)
		}
	}
	if _, ok := nccl.MeasuredChannel(topology.Ampere); ok {
		t.Error("Ampere has a channel rate, which no run measures")
	}
}

// TestThreadFloorRuns: nccl.ThreadFloorUS's figure is what its source run,
// shipped here and held out of the targets, shows a thread spending on
// each GPU it drives: the median time of its smallest sizes (8-128 B,
// where the GPUs' part is a fraction of it) over its GPUs a thread, to
// the hundredth of a µs the figure is given in. A figure changed without
// its run, or the run re-read, fails here.
func TestThreadFloorRuns(t *testing.T) {
	const file = "together-h100-allreduce-ring-8xH100.txt"
	_, lg, _ := figureSource(t, file)
	small := timesBetween(lg, 8, 128)
	g := lg.GPUsPerThread
	if len(small) != 5 || g != 8 {
		t.Fatalf("%s: %d sizes of 8-128 B, %d GPUs a thread; want 5 and 8", file, len(small), g)
	}
	perGPU := math.Round(median(small)/float64(g)*100) / 100
	if got := nccl.ThreadFloorUS(g) / float64(g); math.Abs(got-perGPU) > 1e-9 {
		t.Errorf("nccl.ThreadFloorUS gives %v us a GPU; %s shows %v (median %v over %d)", got, file, perGPU, median(small), g)
	}
	if nccl.ThreadFloorUS(1) != 0 || nccl.ThreadFloorUS(0) != 0 {
		t.Error("one GPU a thread (or none given) has a floor")
	}
}

// TestLocalOpRun: what an all-to-all's operation within a node costs
// (nccl.localOpUS, the part of Tuner.FixedLaunch that one node's
// all-to-all has) is what its source run, shipped here and held out of the
// targets, shows: the median over its sizes of the measured time less the
// simulation's without it, over the 12 operations a GPU of 8 has past a
// sendrecv's two, to the hundredth of a µs the figure is given in. A
// figure changed without its run, or the run re-read, fails here.
func TestLocalOpRun(t *testing.T) {
	const file = "deepep-h20-alltoall-8xH20.txt"
	l, lg, cfg := figureSource(t, file)
	topo, err := topology.Resolve(l.Topo)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Check(lg, topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	tuner, err := nccl.NewTuner(topo, cfg.NCCL)
	if err != nil {
		t.Fatal(err)
	}
	var gaps []float64
	perOp := 0.0
	for _, r := range rep.Rows {
		spec, _ := verify.SpecForSize(ops.Spec{Op: ops.AllToAll, Algo: "nccl", Ranks: 8, DType: hw.F32}, r.Bytes)
		c, err := tuner.Choose(spec)
		if err != nil {
			t.Fatal(err)
		}
		fixed := tuner.FixedLaunch(spec, c) * 1e6
		gaps = append(gaps, r.MeasuredUS-(r.PredictedUS-fixed))
		perOp = fixed / 12
	}
	if len(gaps) != 6 {
		t.Fatalf("%s: %d sizes, want 6 (128 B-4 KiB)", file, len(gaps))
	}
	if want := math.Round(median(gaps)/12*100) / 100; perOp == 0 || math.Abs(perOp-want) > 1e-9 {
		t.Errorf("an all-to-all's operation within a node costs %v us; %s shows %v (median %.3f over 12)", perOp, file, want, median(gaps))
	}
}

// figureSource is the shipped log file, a source of one of the model's
// figures, parsed; it must be held out of the targets.
func figureSource(t *testing.T, file string) (*PublishedLog, *calibrate.Log, Config) {
	t.Helper()
	l, lg, cfg := shippedLog(t, file)
	if l.HeldOut == "" {
		t.Errorf("%s: a figure's source must be held out of the targets", file)
	}
	return l, lg, cfg
}

// shippedLog is the shipped log file, parsed.
func shippedLog(t *testing.T, file string) (*PublishedLog, *calibrate.Log, Config) {
	t.Helper()
	cat, err := Published()
	if err != nil {
		t.Fatal(err)
	}
	k := slices.IndexFunc(cat.Logs, func(l PublishedLog) bool { return l.File == file })
	if k < 0 {
		t.Fatalf("%s is not shipped", file)
	}
	l := &cat.Logs[k]
	lg, cfg, err := l.Parse()
	if err != nil {
		t.Fatal(err)
	}
	return l, lg, cfg
}

// TestProxyOpRuns: a network operation's cost (nccl.proxyOpUS, the part of
// Tuner.FixedLaunch a node's all-to-all does not have) is what its source
// runs show, two 2 x 8 B200 runs excluded from the targets: the
// all-to-all's median at 256 B-16 KiB less the sendrecv's at 8 B-8 KiB,
// less the all-to-all's operations within the node (the fixed launch of
// the same all-to-all on one node), over the 14 network operations it has
// past the sendrecv's two, to the hundredth of a µs. A figure changed
// without its runs, or localOpUS changed without this one, fails here.
func TestProxyOpRuns(t *testing.T) {
	l, a2a, cfg := shippedLog(t, "vultr-b200-alltoall-16xB200.txt")
	_, sr, _ := shippedLog(t, "vultr-b200-sendrecv-16xB200.txt")
	fixed := func(topo string, ranks int) (us float64, channels int) {
		tp, err := topology.Resolve(topo)
		if err != nil {
			t.Fatal(err)
		}
		tuner, err := nccl.NewTuner(tp, cfg.NCCL)
		if err != nil {
			t.Fatal(err)
		}
		spec, _ := verify.SpecForSize(ops.Spec{Op: ops.AllToAll, Algo: "nccl", Ranks: ranks, DType: hw.U8}, 1024*int64(ranks))
		c, err := tuner.Choose(spec)
		if err != nil {
			t.Fatal(err)
		}
		return tuner.FixedLaunch(spec, c) * 1e6, c.Channels
	}
	both, channels := fixed(l.Topo, 16)
	local, _ := fixed("hgx-b200", 8)
	perOp := (both - local) / 15 // 16 network operations, the first free
	want := math.Round((median(timesBetween(a2a, 256, 16<<10))-median(timesBetween(sr, 8, 8<<10))-local)/14*100) / 100
	if channels != 1 || math.Abs(perOp-want) > 1e-9 {
		t.Errorf("a network operation costs %v us on %d channels a peer; the runs show %v", perOp, channels, want)
	}
}

// timesBetween is the log's out-of-place times of the sizes from lo to hi
// bytes.
func timesBetween(lg *calibrate.Log, lo, hi int64) []float64 {
	var v []float64
	for _, s := range lg.Samples {
		if s.Bytes >= lo && s.Bytes <= hi {
			v = append(v, s.TimeUS)
		}
	}
	return v
}
