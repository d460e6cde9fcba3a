package ops_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// published is a bus bandwidth reported for real hardware (REFERENCE.md).
type published struct {
	topo      string
	algo      string
	gbps      float64 // the published busbw, GB/s
	source    string
	countMiB  int
	tolerance float64
}

var publishedFigures = []published{
	{"dgx-a100", "ring", 230, "nccl-tests#149, #178: DGX A100 all-reduce busbw ≈ 230 GB/s", 1024, 0.10},
	{"dgx-h100", "ring", 367.5, "nccl-tests#212: DGX H100 ring busbw ≈ 365–370 GB/s", 1024, 0.10},
	{"dgx-h100x2", "ring", 47, "nccl-tests#290: NDR 400 Gb/s ≈ 46–48 GB/s per NIC (two nodes, ring crosses the network)", 1024, 0.10},
}

// simulatedBusBW runs a large timing-only all-reduce and returns nccl-tests'
// busbw in GB/s.
func simulatedBusBW(t testing.TB, topo, algo string, mib int) float64 {
	c, _ := world(t, topo, sim.Config{TimingOnly: true})
	p := len(c.Devices())
	count := mib << 20 / 4
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: algo, Ranks: p, Count: count, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	in, out := buffers(t, c, plan, false)
	secs, err := ops.NewExecutor(c.World()).Run(plan, in, out)
	if err != nil {
		t.Fatal(err)
	}
	algbw := float64(count*4) / secs / 1e9
	return algbw * 2 * float64(p-1) / float64(p)
}

// TestPresetsMatchPublishedNumbers: each preset's large-message all-reduce
// bus bandwidth lies within 10% of what was measured on the real system.
// No efficiency factor is applied: the presets' link rates and reduction
// bandwidths alone land there (the reduction term brings the DGX H100's
// 450 GB/s links to ≈367 GB/s busbw).
func TestPresetsMatchPublishedNumbers(t *testing.T) {
	for _, f := range publishedFigures {
		got := simulatedBusBW(t, f.topo, f.algo, f.countMiB)
		rel := (got - f.gbps) / f.gbps
		t.Logf("%-10s %-4s simulated %7.1f GB/s, published %6.1f GB/s (%+.1f%%) — %s", f.topo, f.algo, got, f.gbps, 100*rel, f.source)
		if math.Abs(rel) > f.tolerance {
			t.Errorf("%s: simulated busbw %.1f GB/s is %+.1f%% from the published %.1f GB/s (%s)", f.topo, got, 100*rel, f.gbps, f.source)
		}
	}
}

// A ring all-reduce of 64 MiB per rank on a simulated DGX H100, timing
// only: the one executor runs the plan on simulated devices, through the
// simulator's driver (package simexec), which also applies how NCCL's
// plans move; ops.NewExecutor's generic driver is for real devices.
func ExampleExecutor_Run() {
	topo, _ := topology.Parse("dgx-h100")
	c, _ := sim.NewCluster(topo, sim.Config{TimingOnly: true})
	plan, _ := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 8, Count: 16 << 20, DType: hw.F32, Redop: hw.Sum})
	in, out := make([]hw.Slice, 8), make([]hw.Slice, 8)
	for r, d := range c.Devices() {
		ib, _ := d.Alloc(hw.F32, plan.InLen)
		ob, _ := d.Alloc(hw.F32, plan.OutLen)
		in[r], out[r] = hw.Whole(ib), hw.Whole(ob)
	}
	secs, err := simexec.NewExecutor(c).Run(plan, in, out)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.1f us, busbw %.0f GB/s\n", secs*1e6, float64(64<<20)/secs/1e9*2*7/8)
	// Output: 332.8 us, busbw 353 GB/s
}

// A chain broadcast of 16 MiB from rank 0 on a simulated DGX H100, timed
// as nccl-tests' -n 20 times it: twenty runs back to back, each rank
// starting its next as soon as its own last one ends. The root is done
// long before the chain's far end, so the runs overlap and the mean run
// is a fraction of one alone.
func ExampleExecutor_RunBackToBack() {
	topo, _ := topology.Parse("dgx-h100")
	c, _ := sim.NewCluster(topo, sim.Config{TimingOnly: true})
	plan, _ := ops.Compile(ops.Spec{Op: ops.Broadcast, Algo: "ring", Ranks: 8, Count: 4 << 20, DType: hw.F32})
	in, out := make([]hw.Slice, 8), make([]hw.Slice, 8)
	for r, d := range c.Devices() {
		ib, _ := d.Alloc(hw.F32, plan.InLen)
		ob, _ := d.Alloc(hw.F32, plan.OutLen)
		in[r], out[r] = hw.Whole(ib), hw.Whole(ob)
	}
	exec := simexec.NewExecutor(c)
	alone, err := exec.Run(plan, in, out)
	if err != nil {
		fmt.Println(err)
		return
	}
	each, err := exec.RunBackToBack(plan, in, out, 20)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("alone %.1f us, %.1f us a run of twenty back to back\n", alone*1e6, each*1e6)
	// Output: alone 267.5 us, 49.7 us a run of twenty back to back
}
