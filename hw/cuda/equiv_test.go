//go:build linux || darwin

package cuda

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/leanovate/gopter"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/proptest"
	"github.com/commsim/commsim/sim"
)

// virtualBackend is the CUDA backend as the equivalence harness sees it:
// every case gets a fresh world of virtual ranks on GPU 0, through the real
// driver or the fake one.
func virtualBackend(t testing.TB, e env) proptest.Backend {
	name := "cuda(virtual)"
	if !e.real {
		name = "cuda(virtual, emulated)"
	}
	return proptest.Backend{Name: name, NewWorld: func(c proptest.Case) (*hw.World, func(), error) {
		var w *hw.World
		var closeWorld func() error
		var err error
		if e.real {
			w, closeWorld, err = NewWorld(c.Spec.Ranks, Virtual)
		} else {
			_, d := fake()
			w, closeWorld, err = newWorld(d, make([]int, c.Spec.Ranks))
		}
		if err != nil {
			return nil, nil, err
		}
		return w, func() {
			if err := closeWorld(); err != nil {
				t.Errorf("close world of %v: %v", c, err)
			}
		}, nil
	}}
}

// TestEquivalenceWithSimGrid runs every algorithm × collective × dtype ×
// reduce op on p = 2…8 virtual ranks (on the GPU; one p per combination
// when emulated, cycling through 2…8) and on the simulator, out of place
// and in place, and requires bit-identical outputs. Inputs are proptest's
// (special values mixed in), from a seed that the log prints and
// COMMSIM_PROPTEST_SEED replays.
func TestEquivalenceWithSimGrid(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) { equivalenceGrid(t, e) })
}

func equivalenceGrid(t *testing.T, e env) {
	seed := time.Now().UnixNano()
	if s := os.Getenv(proptest.EnvSeed); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", proptest.EnvSeed, s, err)
		}
		seed = v
	}
	t.Logf("inputs from seed %d (%s=%d replays)", seed, proptest.EnvSeed, seed)
	ref, test := proptest.SimBackend(sim.Config{}), virtualBackend(t, e)
	params := gopter.DefaultGenParameters().CloneWithSeed(seed)
	cases, failures, combos := 0, 0, 0
	start := time.Now()
	for _, op := range ops.Ops() {
		for _, algo := range ops.AlgorithmsFor(op) {
			if algo == "native" || algo == "auto" {
				continue
			}
			for _, dt := range hw.DTypes() {
				redops := []hw.ReduceOp{hw.Sum}
				if op.Reduces() {
					redops = hw.ReduceOps()
				}
				for _, redop := range redops {
					combo := combos
					combos++
					for p := 2; p <= 8; p++ {
						// Emulated, one p per combination keeps the
						// package's tests quick; the GPU runs them all.
						if !e.real && p != 2+combo%7 {
							continue
						}
						o := proptest.GenOptions{MinRanks: p, MaxRanks: p, Ops: []ops.Op{op}, Algos: []string{algo},
							DTypes: []hw.DType{dt}, Redops: []hw.ReduceOp{redop}, MaxElems: 512}
						r := proptest.GenCase(o)(params)
						v, ok := r.Retrieve()
						if !ok {
							t.Fatalf("no case for %s/%s p=%d %s %s", op, algo, p, dt, redop)
						}
						c := v.(proptest.Case)
						cases++
						if err := proptest.Equivalent(ref, test, c); err != nil {
							if failures++; failures <= 10 {
								t.Errorf("%v", err)
							}
						}
					}
				}
			}
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d cases of %d combinations, %d failed, in %v", cases, combos, failures, elapsed.Round(time.Millisecond))
	if want := gridCases(combos, e.real); cases != want {
		t.Errorf("ran %d cases, want %d", cases, want)
	}
	if e.real {
		recordFigure(t, "equivalence", map[string]any{"cases": cases, "failed": failures, "seconds": elapsed.Seconds()})
	}
}

// gridCases is how many cases the grid runs over combos combinations: 7
// per combination (p = 2…8) on the GPU, one emulated.
func gridCases(combos int, real bool) int {
	if real {
		return 7 * combos
	}
	return combos
}

// TestEquivalenceWithSimGenerated is the property form: gopter draws
// cases of 2 to 8 ranks (every op, algorithm, dtype, reduce op, counts up
// to 4096 elements) and shrinks a failure to a small reproducer.
func TestEquivalenceWithSimGenerated(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		gen := proptest.GenCase(proptest.GenOptions{MinRanks: 2, MaxRanks: 8})
		n := 200
		if !e.real {
			n = 50
		}
		start := time.Now()
		proptest.CheckEquivalence(t, proptest.SimBackend(sim.Config{}), virtualBackend(t, e),
			proptest.EquivalenceCases(gen), proptest.EquivalenceTests(n))
		if e.real {
			failed := 0
			if t.Failed() {
				failed = 1 // gopter stops at the first failure and shrinks it
			}
			recordFigure(t, "equivalence", map[string]any{"cases": n, "failed": failed, "seconds": time.Since(start).Seconds()})
		}
	})
}

// TestRingAllReduceBusBW logs nccl-tests-style figures for the textbook
// ring all-reduce on virtual ranks of one GPU: every rank's traffic is
// device-to-device copies and reduce kernels on the same memory, so busbw
// here measures the backend's overhead, not a fabric. It never asserts on
// time.
func TestRingAllReduceBusBW(t *testing.T) {
	needGPU(t)
	if testing.Short() {
		t.Skip("bandwidth sweep skipped in -short mode")
	}
	t.Logf("%8s %4s %12s %10s %12s %12s", "bytes", "p", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)")
	for _, p := range []int{2, 4, 8} {
		w, _ := openWorld(t, p, Virtual)
		exec := ops.NewExecutor(w)
		for _, bytes := range []int{1 << 20, 16 << 20, 256 << 20} {
			count := bytes / 4
			plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: p, Count: count, DType: hw.F32, Redop: hw.Sum})
			if err != nil {
				t.Fatal(err)
			}
			bufs := make([]hw.Slice, p)
			for r := range p {
				d, _ := w.Device(r)
				bufs[r] = hw.Whole(alloc(t, d, hw.F32, count))
			}
			// One warm-up, then the best of a few: first runs pay for
			// staging allocation and the JIT.
			best := 0.0
			for i := range 4 {
				sec, err := exec.Run(plan, bufs, bufs)
				if err != nil {
					t.Fatal(err)
				}
				if i > 0 && (best == 0 || sec < best) {
					best = sec
				}
			}
			algbw := float64(bytes) / best / 1e9
			busbw := algbw * 2 * float64(p-1) / float64(p)
			t.Logf("%8d %4d %12d %10.1f %12.2f %12.2f", bytes, p, count, best*1e6, algbw, busbw)
			recordFigure(t, "busbw", map[string]any{"algo": "ring", "ranks": p, "placement": "virtual", "bytes": bytes,
				"time_us": best * 1e6, "algbw_gbps": algbw, "busbw_gbps": busbw})
			for _, b := range bufs {
				b.Buf.Free()
			}
		}
	}
}

// TestReduceBandwidth logs the bandwidth of the reduce kernels against a
// device-to-device copy (cuMemcpyDtoDAsync) and the copy kernel, counting
// bytes read plus written (a reduce reads two arrays and writes one; a
// copy reads one and writes one). The target on an H200 is the f32 sum at
// 90% of the copy or better; this logs and records the ratio (a figure of
// scripts/gpu-check.sh's summary) and never asserts on time.
func TestReduceBandwidth(t *testing.T) {
	needGPU(t)
	if testing.Short() {
		t.Skip("bandwidth measurement skipped in -short mode")
	}
	_, devs := openWorld(t, 1, Virtual)
	d := devs[0]
	s := stream(t, d).(*Stream)
	const bytes = 1 << 30
	start, end := event(t, d), event(t, d)
	timeIt := func(run func() error) float64 {
		return fastest(t, 6, s, start, end, []hw.Stream{s}, func(int) error { return run() })
	}
	x := alloc(t, d, hw.U8, bytes)
	y := alloc(t, d, hw.U8, bytes)
	copySec := timeIt(func() error { return s.Copy(hw.Whole(y), hw.Whole(x)) })
	copyBW := 2 * bytes / copySec / 1e9
	kernSec := timeIt(func() error {
		return s.enqueueHost("copy kernel", func(uintptr) error {
			return s.launch("copy_u8", hw.Whole(y), hw.Whole(x), 0)
		})
	})
	t.Logf("%-14s %8.1f GB/s  (cuMemcpyDtoDAsync, read+write)", "d2d copy", copyBW)
	t.Logf("%-14s %8.1f GB/s  %5.1f%% of the d2d copy", "copy kernel", 2*bytes/kernSec/1e9, 100*copySec/kernSec)
	recordFigure(t, "copy", map[string]any{"what": "cuMemcpyDtoDAsync", "bytes": bytes, "gbps": copyBW})
	recordFigure(t, "kernel", map[string]any{"what": "copy kernel", "bytes": bytes, "gbps": 2 * bytes / kernSec / 1e9, "of_copy": copySec / kernSec})
	x.Free()
	y.Free()
	for _, dt := range hw.DTypes() {
		n := bytes / dt.Size()
		a, b := alloc(t, d, dt, n), alloc(t, d, dt, n)
		for _, op := range []hw.ReduceOp{hw.Sum, hw.Max} {
			sec := timeIt(func() error { return s.Reduce(op, hw.Whole(a), hw.Whole(b)) })
			bw := 3 * float64(bytes) / sec / 1e9
			what := fmt.Sprintf("reduce %s %s", op, dt)
			t.Logf("%-14s %8.1f GB/s  %5.1f%% of the d2d copy", what, bw, 100*bw/copyBW)
			recordFigure(t, "kernel", map[string]any{"what": what, "bytes": bytes, "gbps": bw, "of_copy": bw / copyBW})
			if op == hw.Sum && dt == hw.F32 {
				recordFigure(t, "reduce_vs_copy", map[string]any{"bytes": bytes, "reduce_gbps": bw, "copy_gbps": copyBW,
					"ratio": bw / copyBW, "target": 0.9, "meets_target": bw >= 0.9*copyBW})
			}
		}
		sec := timeIt(func() error { return s.Divide(hw.Whole(a), 3) })
		bw := 2 * float64(bytes) / sec / 1e9
		what := fmt.Sprintf("divide %s", dt)
		t.Logf("%-14s %8.1f GB/s  %5.1f%% of the d2d copy", what, bw, 100*bw/copyBW)
		recordFigure(t, "kernel", map[string]any{"what": what, "bytes": bytes, "gbps": bw, "of_copy": bw / copyBW})
		a.Free()
		b.Free()
	}
}

// BenchmarkReduceF32 measures the f32 Sum kernel on 256 MiB; b.SetBytes
// counts bytes read plus written.
func BenchmarkReduceF32(b *testing.B) {
	needGPU(b)
	_, devs := openWorld(b, 1, Virtual)
	d := devs[0]
	s := stream(b, d)
	const n = 64 << 20
	x, y := alloc(b, d, hw.F32, n), alloc(b, d, hw.F32, n)
	b.SetBytes(3 * 4 * n)
	for b.Loop() {
		if err := s.Reduce(hw.Sum, hw.Whole(x), hw.Whole(y)); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCopyD2D measures a 256 MiB device-to-device copy, bytes read
// plus written.
func BenchmarkCopyD2D(b *testing.B) {
	needGPU(b)
	_, devs := openWorld(b, 1, Virtual)
	d := devs[0]
	s := stream(b, d)
	const n = 256 << 20
	x, y := alloc(b, d, hw.U8, n), alloc(b, d, hw.U8, n)
	b.SetBytes(2 * n)
	for b.Loop() {
		if err := s.Copy(hw.Whole(y), hw.Whole(x)); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
	}
}
