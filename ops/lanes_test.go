package ops_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
)

// TestParallelRings: a plan of many lanes (rings side by side, as NCCL's
// channels) checks, streams lane by lane into the held plan's steps, runs
// right on both drivers, and is timed on a mirror exactly as in full.
func TestParallelRings(t *testing.T) {
	held, err := ops.ParallelRings(6, 96, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	streamed, err := ops.ParallelRings(6, 96, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	if held.Streamed() || !streamed.Streamed() || held.Lanes != 4 || streamed.Lanes != 4 || held.NumSteps() != streamed.NumSteps() {
		t.Fatalf("held: streamed %v, %d lanes, %d steps; streamed: %v, %d lanes, %d steps",
			held.Streamed(), held.Lanes, held.NumSteps(), streamed.Streamed(), streamed.Lanes, streamed.NumSteps())
	}
	if err := ops.Check(held); err != nil {
		t.Fatal(err)
	}
	if err := ops.Check(streamed); err != nil {
		t.Fatal(err)
	}
	for r := range 6 {
		if !reflect.DeepEqual(held.Rank(r), streamed.Rank(r)) {
			t.Fatalf("rank %d: streamed steps differ from held ones", r)
		}
	}
	for _, plan := range []*ops.Plan{held, streamed} {
		var times [3]float64
		for i, exec := range []func(c *sim.Cluster) *ops.Executor{
			func(c *sim.Cluster) *ops.Executor { return ops.NewExecutor(c.World()) },
			simexec.NewExecutor, simexec.NewExecutor,
		} {
			c, _ := world(t, "switch:6", sim.Config{TimingOnly: true, Symmetry: i == 2})
			in, out := buffers(t, c, plan, false)
			e := exec(c)
			if times[i], err = e.Run(plan, in, out); err != nil {
				t.Fatal(err)
			}
			if d, ok := e.Driver().(*simexec.Driver); i == 2 && (!ok || d.MirroredRuns() != 1) {
				t.Fatalf("streamed %v: not mirrored", plan.Streamed())
			}
		}
		if times[0] != times[1] || times[1] != times[2] {
			t.Fatalf("streamed %v: enqueued %v s, fed %v s, mirrored %v s", plan.Streamed(), times[0], times[1], times[2])
		}
	}
}

// BenchmarkSixteenRings is the many-lane target: 16 rings side by
// side, a million elements, fed to the simulator on switch:512 (21M plan
// steps, every rank simulated) and mirrored on switch:1024 (84M steps,
// rank 0 simulated). Run with -benchtime 1x and measure the process's
// memory (/usr/bin/time -v).
func BenchmarkSixteenRings(b *testing.B) {
	for _, tc := range []struct {
		name     string
		p        int
		symmetry bool
	}{{"fed/512", 512, false}, {"mirrored/1024", 1024, true}} {
		b.Run(tc.name, func(b *testing.B) {
			plan, err := ops.ParallelRings(tc.p, 1<<20, 16, true)
			if err != nil {
				b.Fatal(err)
			}
			c, _ := world(b, fmt.Sprintf("switch:%d", tc.p), sim.Config{TimingOnly: true, Symmetry: tc.symmetry})
			in, out := buffers(b, c, plan, false)
			driver := simexec.NewDriver(c)
			exec := ops.NewExecutorWith(c.World(), driver)
			b.ResetTimer()
			var secs float64
			for range b.N {
				if secs, err = exec.Run(plan, in, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(plan.NumSteps()), "steps")
			b.ReportMetric(secs*1e6, "simulated-us")
			b.ReportMetric(float64(driver.MirroredRuns())/float64(b.N), "mirrored/run")
		})
	}
}
