package ops_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
)

// benchRun compiles and runs one collective per iteration on a cluster
// configured by cfg, with the simulator's driver, reporting plan steps per
// second and allocations per step.
func benchRun(b *testing.B, topo string, spec ops.Spec, cfg sim.Config) {
	c, _ := world(b, topo, cfg)
	spec.Ranks = len(c.Devices())
	plan, err := ops.Compile(spec)
	if err != nil {
		b.Fatal(err)
	}
	in, out := buffers(b, c, plan, false)
	exec := simexec.NewExecutor(c)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for range b.N {
		plan, err = ops.Compile(spec)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := exec.Run(plan, in, out); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	steps := float64(plan.NumSteps() * b.N)
	b.ReportMetric(steps/b.Elapsed().Seconds(), "steps/s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/steps, "allocs/step")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/collective")
}

var (
	timingOnly = sim.Config{TimingOnly: true}
	// mirrored lets symmetric plans run as one rank (Config.Symmetry).
	mirrored = sim.Config{TimingOnly: true, Symmetry: true}
)

// BenchmarkRingAllReduce1024 is the target: a timing-only ring
// all-reduce of 1 MiB on switch:1024, compile and run, every rank
// simulated.
func BenchmarkRingAllReduce1024(b *testing.B) {
	benchRun(b, "switch:1024", ops.Spec{Op: ops.AllReduce, Algo: "ring", Count: 1 << 18, DType: hw.F32, Redop: hw.Sum}, timingOnly)
}

// BenchmarkRingAllReduce1024Mirrored is the same with Config.Symmetry:
// compile, check the plan's symmetry, and simulate rank 0 alone.
func BenchmarkRingAllReduce1024Mirrored(b *testing.B) {
	benchRun(b, "switch:1024", ops.Spec{Op: ops.AllReduce, Algo: "ring", Count: 1 << 18, DType: hw.F32, Redop: hw.Sum}, mirrored)
}

func BenchmarkAllReduce(b *testing.B) {
	for _, tc := range []struct {
		algo string
		p    int
	}{{"ring", 64}, {"ring", 256}, {"rd", 1024}, {"rhd", 1024}, {"tree", 1024}} {
		b.Run(fmt.Sprintf("%s/%d", tc.algo, tc.p), func(b *testing.B) {
			benchRun(b, fmt.Sprintf("switch:%d", tc.p), ops.Spec{Op: ops.AllReduce, Algo: tc.algo, Count: 1 << 18, DType: hw.F32, Redop: hw.Sum}, timingOnly)
		})
	}
}

// BenchmarkAllReduceData runs with real data: every reduction is computed.
// bytes/s is the per-rank buffer size over the host time.
func BenchmarkAllReduceData(b *testing.B) {
	for _, algo := range []string{"ring", "rhd"} {
		b.Run(algo+"/8x16MiB", func(b *testing.B) {
			b.SetBytes(16 << 20)
			benchRun(b, "switch:8", ops.Spec{Op: ops.AllReduce, Algo: algo, Count: 4 << 20, DType: hw.F32, Redop: hw.Sum}, sim.Config{})
		})
	}
}

// BenchmarkAtScale is the large-world targets, timing-only, one
// collective per iteration on a cluster built once (the first iteration
// also pays for computing routes), every rank simulated and mirrored.
// Run with -benchtime 1x.
func BenchmarkAtScale(b *testing.B) {
	for _, tc := range []struct {
		algo string
		p    int
	}{{"rhd", 16384}, {"ring", 4096}} {
		for _, mode := range []struct {
			name string
			cfg  sim.Config
		}{{"full", timingOnly}, {"mirrored", mirrored}} {
			b.Run(fmt.Sprintf("%s/%d/%s", tc.algo, tc.p, mode.name), func(b *testing.B) {
				benchRun(b, fmt.Sprintf("switch:%d", tc.p), ops.Spec{Op: ops.AllReduce, Algo: tc.algo, Count: 1 << 18, DType: hw.F32, Redop: hw.Sum}, mode.cfg)
			})
		}
	}
}

// BenchmarkCompile makes plans small enough to hold in memory, as a bench
// sweep does for every size.
func BenchmarkCompile(b *testing.B) {
	for _, tc := range []struct {
		algo string
		p    int
	}{{"ring", 256}, {"rhd", 1024}, {"tree", 1024}} {
		b.Run(fmt.Sprintf("%s/%d", tc.algo, tc.p), func(b *testing.B) {
			spec := ops.Spec{Op: ops.AllReduce, Algo: tc.algo, Ranks: tc.p, Count: 1 << 18, DType: hw.F32, Redop: hw.Sum}
			var plan *ops.Plan
			for range b.N {
				var err error
				if plan, err = ops.Compile(spec); err != nil || plan.Streamed() {
					b.Fatalf("streamed %v, %v", plan != nil && plan.Streamed(), err)
				}
			}
			b.ReportMetric(float64(plan.NumSteps()*b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// BenchmarkCompileStreamed sizes a plan too large to hold: every rank's
// steps are made and counted, on every core, and none is kept.
func BenchmarkCompileStreamed(b *testing.B) {
	spec := ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 1024, Count: 1 << 18, DType: hw.F32, Redop: hw.Sum}
	var plan *ops.Plan
	for range b.N {
		var err error
		if plan, err = ops.Compile(spec); err != nil || !plan.Streamed() {
			b.Fatalf("streamed %v, %v", plan != nil && plan.Streamed(), err)
		}
	}
	b.ReportMetric(float64(plan.NumSteps()*b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkSelectRing1024 prices every all-reduce candidate at 1 GiB on a
// ring of 1024 GPUs, as auto does for one size: ring and direct are
// streamed plans of 5M steps, direct's to every pair of ranks.
func BenchmarkSelectRing1024(b *testing.B) {
	topo := mustTopo(b, "ring:1024")
	spec := ops.Spec{Op: ops.AllReduce, Ranks: 1024, Count: 1 << 28, DType: hw.F32, Redop: hw.Sum}
	for range b.N {
		if _, _, err := ops.Select(spec, topo); err != nil {
			b.Fatal(err)
		}
	}
}
