package sim

import (
	"errors"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/topology"
)

// TestMirrorOnlyWhereExact: a cluster offers a mirror only when asked to,
// timing-only, untraced, unseeded and fault-free, for its whole world in
// rank order, over a fabric that looks the same from every GPU.
func TestMirrorOnlyWhereExact(t *testing.T) {
	unevenYAML := `
nodes:
  - {name: g0, kind: gpu}
  - {name: g1, kind: gpu}
  - {name: g2, kind: gpu}
  - {name: sw, kind: switch}
links:
  - {a: g0, b: sw, bw: 100GB/s, lat: 1us}
  - {a: g1, b: sw, bw: 100GB/s, lat: 1us}
  - {a: g2, b: sw, bw: 50GB/s, lat: 1us}
`
	symmetric := Config{TimingOnly: true, Symmetry: true}
	for _, tc := range []struct {
		name   string
		topo   string // a spec, or YAML when it starts with a newline
		cfg    Config
		before func(c *Cluster) []hw.Device // the world to mirror
		want   bool
	}{
		{name: "a switch", topo: "switch:8", cfg: symmetric, want: true},
		{name: "a switch with slow reductions", topo: "switch:5,reduce=100GB/s,lat=3us", cfg: symmetric, want: true},
		{name: "not asked", topo: "switch:8", cfg: Config{TimingOnly: true}},
		{name: "real data", topo: "switch:8", cfg: Config{Symmetry: true}},
		{name: "traced", topo: "switch:8", cfg: Config{TimingOnly: true, Symmetry: true, Trace: true}},
		{name: "seeded", topo: "switch:8", cfg: Config{TimingOnly: true, Symmetry: true, Seed: 3}},
		{name: "a node of nodes", topo: "cluster:2x4", cfg: symmetric},
		{name: "a ring", topo: "ring:8", cfg: symmetric},
		{name: "a torus", topo: "torus:2x4", cfg: symmetric},
		{name: "one slower link", topo: unevenYAML, cfg: symmetric},
		{name: "a fault", topo: "switch:8", cfg: symmetric, before: func(c *Cluster) []hw.Device {
			if err := c.Inject(Fault{Kind: RankStall, Rank: 3, At: Microsecond, For: Microsecond}); err != nil {
				t.Fatal(err)
			}
			return c.World().Devices()
		}},
		{name: "work pending", topo: "switch:8", cfg: symmetric, before: func(c *Cluster) []hw.Device {
			s, err := c.devices[5].NewStream()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.(*Stream).Compute(1e-6, "busy"); err != nil {
				t.Fatal(err)
			}
			return c.World().Devices()
		}},
		{name: "part of the world", topo: "switch:8", cfg: symmetric, before: func(c *Cluster) []hw.Device {
			return c.World().Devices()[:4]
		}},
		{name: "the world out of order", topo: "switch:8", cfg: symmetric, before: func(c *Cluster) []hw.Device {
			devs := c.World().Devices()
			devs[0], devs[1] = devs[1], devs[0]
			return devs
		}},
	} {
		var topo *topology.Topology
		var err error
		if tc.topo[0] == '\n' {
			topo, err = topology.ReadYAML([]byte(tc.topo))
		} else {
			topo, err = topology.Parse(tc.topo)
		}
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCluster(topo, tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		devs := c.World().Devices()
		if tc.before != nil {
			devs = tc.before(c)
		}
		m, ok, err := c.devices[0].Mirror(devs)
		if err != nil || ok != tc.want || (m != nil) != ok {
			t.Errorf("%s: mirror %v, ok %v, err %v; want ok %v", tc.name, m, ok, err, tc.want)
		}
	}
}

// TestMirrorSendsToItselfAcrossTheFabric: a mirror's send to itself takes
// exactly as long as a send between two GPUs of its cluster, and the
// cluster's own clock does not move; closing the cluster closes the
// mirror.
func TestMirrorSendsToItselfAcrossTheFabric(t *testing.T) {
	topo, err := topology.Parse("switch:4,bw=40GB/s,lat=1300ns")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(topo, Config{TimingOnly: true, Symmetry: true})
	if err != nil {
		t.Fatal(err)
	}
	timeSend := func(from, to hw.Device) Time {
		t.Helper()
		buf, err := from.Alloc(hw.F32, 1000)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := to.Alloc(hw.F32, 1000)
		if err != nil {
			t.Fatal(err)
		}
		s, err := from.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		r, err := to.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		start, _ := from.NewEvent()
		end, _ := to.NewEvent()
		for _, err := range []error{s.Record(start), s.Send(hw.Whole(buf), to, 7), r.Recv(hw.Whole(dst), from, 7), r.Record(end), r.Synchronize()} {
			if err != nil {
				t.Fatal(err)
			}
		}
		seconds, err := end.ElapsedSince(start)
		if err != nil {
			t.Fatal(err)
		}
		return FromSeconds(seconds)
	}
	m, ok, err := c.devices[0].Mirror(c.World().Devices())
	if err != nil || !ok {
		t.Fatalf("no mirror: %v", err)
	}
	mirrored := timeSend(m, m)
	if c.Now() != 0 {
		t.Fatalf("the cluster's clock moved to %v", c.Now())
	}
	if full := timeSend(c.devices[1], c.devices[2]); mirrored != full || full != 2*1300*Nanosecond+100*Nanosecond {
		t.Fatalf("mirror's send to itself took %v, a send between GPUs %v, want 2.7us", mirrored, full)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.NewStream(); !errors.Is(err, hw.ErrClosed) {
		t.Fatalf("mirror after Close: %v, want ErrClosed", err)
	}
}
