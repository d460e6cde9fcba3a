package fidelity

import (
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/verify"
)

// A rooted collective's log is predicted as nccl-tests timed it: the
// mean of its -n runs back to back (ops.Executor.RunBackToBack), which
// overlap down the chain, twenty where the header states none; any other
// collective's as one run.
func TestCheckTimesRootedRunsBackToBack(t *testing.T) {
	const fabric = "ring:8,bw=10GB/s,lat=2us"
	rows := "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
		"1048576  262144  float  none  0  500.00  2.10  2.10  0  500.00  2.10  2.10  0\n"
	header := func(op string, iters string) string {
		h := "# Collective test starting: " + op + "_perf\n"
		if iters != "" {
			h += "# nThread 1 nGpus 1 minBytes 1048576 maxBytes 1048576 step: 2(factor) warmup iters: 1 iters: " + iters + " agg iters: 1 validation: 1 graph: 0\n"
		}
		return h + rows
	}
	// backToBack is the executor's mean of runs of the 1 MiB broadcast.
	backToBack := func(op ops.Op, runs int) float64 {
		c, err := sim.NewCluster(topo(t, fabric), sim.Config{TimingOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		spec, _ := verify.SpecForSize(ops.Spec{Op: op, Algo: "ring", Ranks: 8, DType: hw.F32, Redop: hw.Sum}, 1<<20)
		plan, err := ops.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		var r verify.Runner
		r.Iters = runs
		defer r.Free()
		res, err := r.Run(simexec.NewExecutor(c), c.World(), plan, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		return res.Seconds * 1e6
	}
	for _, tc := range []struct {
		op    ops.Op
		test  string
		iters string
		runs  int
	}{
		{ops.Broadcast, "broadcast", "5", 5},
		{ops.Broadcast, "broadcast", "", 20},
		{ops.Reduce, "reduce", "100", 100},
		{ops.AllReduce, "all_reduce", "20", 1},
	} {
		rep, err := Check(parse(t, header(tc.test, tc.iters)), topo(t, fabric), Config{Algo: "ring"})
		if err != nil {
			t.Fatal(err)
		}
		want := backToBack(tc.op, tc.runs)
		if rep.Runs != tc.runs || len(rep.Rows) != 1 || rep.Rows[0].PredictedUS != want {
			t.Errorf("%s, iters %q: %d runs, %+v; want %d runs predicting %v us", tc.test, tc.iters, rep.Runs, rep.Rows, tc.runs, want)
		}
		if tc.runs > 1 && !(want < 0.9*backToBack(tc.op, 1)) {
			t.Errorf("%s: %d runs back to back take %v us each, one alone %v: want them to overlap", tc.test, tc.runs, want, backToBack(tc.op, 1))
		}
	}
}
