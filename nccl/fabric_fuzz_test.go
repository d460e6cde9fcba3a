package nccl_test

import (
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// FuzzTunerOnAnyFabric: on any fabric a spec string makes (up to 32
// GPUs and 64 elements, to keep an input fast), NCCL's tuner, under any
// release, chooses or refuses every collective with a one-line error,
// and what it chooses compiles to a plan that ops.Check proves and the
// simulator runs (timing only); nothing panics.
func FuzzTunerOnAnyFabric(f *testing.F) {
	for _, s := range []string{"ring:3", "mesh:4", "switch:5", "torus:2x3", "cluster:2x3", "cluster:3x5,rail=true,nicbw=100Gb/s",
		"dgx-h100x2", "dgx-a100x2,nicports=2", "hgx-b200", "gb200-nvl72", "mac-tb5:4", "cluster:4x1,sharp=inf", "cluster:2x4,arch=blackwell,cpu=arm,nvls=482GB/s"} {
		f.Add(s, uint8(30), uint8(40))
	}
	f.Fuzz(func(t *testing.T, spec string, minor, count uint8) {
		tp, err := topology.Parse(spec)
		if err != nil || tp.NumGPUs() > 32 {
			return
		}
		v := nccl.Version(218 + int(minor)%13) // 2.18 to 2.30
		tuner, err := nccl.NewTuner(tp, nccl.Options{Version: v})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s: an error of several lines: %v", spec, err)
			}
			return
		}
		ranks := tp.NumGPUs()
		cluster, _ := simtest.World(t, spec, sim.Config{TimingOnly: true})
		for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.Reduce, ops.AllToAll, ops.Gather, ops.SendRecv} {
			want := ops.Spec{Op: op, Ranks: ranks, Count: int(count)%64 + 1, DType: hw.F32, Redop: hw.Sum, Root: ranks - 1}
			plan, _, err := tuner.Plan(want)
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("%s, NCCL %v: %v: an error of several lines: %v", spec, v, op, err)
				}
				continue
			}
			if err := ops.Check(plan); err != nil {
				t.Fatalf("%s, NCCL %v: %v of %d: %v", tp.Name, v, op, want.Count, err)
			}
			if secs := simtest.Time(t, cluster, plan); !(secs > 0) {
				t.Fatalf("%s, NCCL %v: %v of %d: simulated in %v s", tp.Name, v, op, want.Count, secs)
			}
		}
	})
}
