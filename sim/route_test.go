package sim

import (
	"testing"

	"github.com/commsim/commsim/topology"
)

// TestRoutesMatchTheTopology: every route the cluster uses, made directly
// between leaves of a switch or taken from its caches, has the topology's
// links and latency, for every pair of GPUs (a GPU and itself too: no
// links), asked twice.
func TestRoutesMatchTheTopology(t *testing.T) {
	for _, spec := range []string{"switch:9,lat=3us", "dgx-h100", "cluster:2x4", "cluster:2x4,rail=true", "ring:5", "torus:3x3"} {
		topo, err := topology.Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCluster(topo, Config{TimingOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		leaves := 0
		for range 2 {
			for _, a := range c.devices {
				for _, b := range c.devices {
					if a != b && a.leaf.ok && b.leaf.ok && a.leaf.Neighbour == b.leaf.Neighbour {
						leaves++
					}
					got, err := c.routeBetween(a, b)
					if err != nil {
						t.Fatal(err)
					}
					p, err := topo.RouteRanks(a.rank, b.rank)
					if err != nil {
						t.Fatal(err)
					}
					ok := len(got.links) == len(p.Edges) && got.latency == FromSeconds(p.Latency)
					for i := 0; ok && i < len(p.Edges); i++ {
						ok = got.links[i] == c.edge(p.Edges[i])
					}
					if !ok {
						t.Fatalf("%s: route %d->%d: %d links, %v; topology: edges %v, %v", spec, a.rank, b.rank, len(got.links), got.latency, p.Edges, FromSeconds(p.Latency))
					}
				}
			}
		}
		if spec == "switch:9,lat=3us" && leaves == 0 {
			t.Fatalf("%s: no pair of GPUs was found to be leaves of one switch", spec)
		}
	}
}
