// Package simtest makes simulated clusters and collective buffers for the
// tests of the packages that run plans on the simulator (ops, ops/comm,
// simexec, nccl), and a fake collective library (LibDevice) for native
// plans.
package simtest

import (
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// World builds a simulated cluster over spec, closed when the test ends.
func World(t testing.TB, spec string, cfg sim.Config) (*sim.Cluster, *topology.Topology) {
	t.Helper()
	topo, err := topology.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, topo
}

// Buffers allocates plan's input and output on every rank of c; in place,
// the output aliases the input as NCCL lays it out (ops.Plan.InPlace).
func Buffers(t testing.TB, c *sim.Cluster, plan *ops.Plan, inPlace bool) (in, out []hw.Slice) {
	t.Helper()
	for r, d := range c.Devices() {
		if !inPlace {
			ib, err := d.Alloc(plan.DType, plan.InLen)
			if err != nil {
				t.Fatal(err)
			}
			ob, err := d.Alloc(plan.DType, plan.OutLen)
			if err != nil {
				t.Fatal(err)
			}
			in, out = append(in, hw.Whole(ib)), append(out, hw.Whole(ob))
			continue
		}
		b, err := d.Alloc(plan.DType, max(plan.InLen, plan.OutLen))
		if err != nil {
			t.Fatal(err)
		}
		i, o := plan.InPlace(r, hw.Whole(b))
		in, out = append(in, i), append(out, o)
	}
	return in, out
}

// Time runs plan once, out of place, on every rank of c through the
// simulator's driver, on buffers freed afterwards, and returns the
// simulated seconds.
func Time(t testing.TB, c *sim.Cluster, plan *ops.Plan) float64 {
	t.Helper()
	in, out := Buffers(t, c, plan, false)
	defer func() {
		for r := range in {
			in[r].Buf.Free()
			out[r].Buf.Free()
		}
	}()
	secs, err := simexec.NewExecutor(c).Run(plan, in, out)
	if err != nil {
		t.Fatal(err)
	}
	return secs
}

// BehindCompute is an event on d reached after us µs of compute on a
// stream of its own: what a training step's collective waits for.
func BehindCompute(t testing.TB, d *sim.Device, us float64) hw.Event {
	t.Helper()
	st, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.(*sim.Stream).Compute(us*1e-6, "compute"); err != nil {
		t.Fatal(err)
	}
	ev, err := d.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Record(ev); err != nil {
		t.Fatal(err)
	}
	return ev
}
