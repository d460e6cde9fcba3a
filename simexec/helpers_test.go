package simexec_test

import (
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// world builds a simulated cluster over spec.
func world(t testing.TB, spec string, cfg sim.Config) (*sim.Cluster, *topology.Topology) {
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

// buffers allocates in and out on every rank; in place, out aliases in as
// NCCL does.
func buffers(t testing.TB, c *sim.Cluster, plan *ops.Plan, inPlace bool) (in, out []hw.Slice) {
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
