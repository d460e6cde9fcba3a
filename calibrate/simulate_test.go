package calibrate

import (
	"runtime"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// TestSimulateGivesEverySizeTheWholeHorizon: on one core every size runs
// on the same cluster, and each starts with the simulator's whole
// 106-day horizon: 2 MiB and 4 MiB ring all-reduces on 8 ranks at 1 B/s
// take 42 and 85 days, and the second failed past the horizon when it
// started where the first ended.
func TestSimulateGivesEverySizeTheWholeHorizon(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	topo, err := topology.Parse("switch:8,bw=1B/s")
	if err != nil {
		t.Fatal(err)
	}
	counts := []int{512 << 10, 1 << 20}
	secs, err := Simulate(topo, sim.Config{TimingOnly: true}, len(counts), func(i int) (*ops.Plan, error) {
		return ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 8, Count: counts[i], DType: hw.F32, Redop: hw.Sum})
	})
	if err != nil {
		t.Fatal(err)
	}
	if days := secs[1] / 86400; days < 80 || days > 90 {
		t.Errorf("4 MiB took %.1f days, want about 85", days)
	}
}
