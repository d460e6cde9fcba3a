package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/topology"
)

// TestMirrorOnlyWhereExact: a cluster offers a mirror only when asked to,
// timing-only, untraced, unseeded, fault-free and idle, over a fabric
// that renamings by multiples of a block map onto itself, moving every
// link; the block is the smallest such.
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
		name     string
		topo     string // a spec, or YAML when it starts with a newline
		cfg      Config
		before   func(c *Cluster) // what happens before the mirror is asked for
		rot, xor int              // the blocks, 0 for none
	}{
		{name: "a switch", topo: "switch:8", cfg: symmetric, rot: 1, xor: 1},
		{name: "a switch of 5 with slow reductions", topo: "switch:5,reduce=100GB/s,lat=3us", cfg: symmetric, rot: 1},
		{name: "nodes of 4 on a network", topo: "cluster:2x4", cfg: symmetric, rot: 4, xor: 1},
		{name: "a DGX pair", topo: "dgx-h100x2", cfg: symmetric, rot: 8, xor: 1},
		{name: "a ring", topo: "ring:8", cfg: symmetric, rot: 1, xor: 4},
		{name: "a mesh", topo: "mesh:8", cfg: symmetric, rot: 1, xor: 1},
		{name: "rails and a spine, whose links the renamings fix or swap", topo: "cluster:4x2,rail=true", cfg: symmetric, rot: 2, xor: 1},
		{name: "one slower link", topo: unevenYAML, cfg: symmetric},
		{name: "not asked", topo: "switch:8", cfg: Config{TimingOnly: true}},
		{name: "real data", topo: "switch:8", cfg: Config{Symmetry: true}},
		{name: "traced", topo: "switch:8", cfg: Config{TimingOnly: true, Symmetry: true, Trace: true}},
		{name: "seeded", topo: "switch:8", cfg: Config{TimingOnly: true, Symmetry: true, Seed: 3}},
		{name: "a fault", topo: "switch:8", cfg: symmetric, before: func(c *Cluster) {
			if err := c.Inject(Fault{Kind: RankStall, Rank: 3, At: Microsecond, For: Microsecond}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "work pending", topo: "switch:8", cfg: symmetric, before: func(c *Cluster) {
			s, err := c.devices[5].NewStream()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.(*Stream).Compute(1e-6, "busy"); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		c := mirrorCluster(t, tc.topo, tc.cfg)
		if tc.before != nil {
			tc.before(c)
		}
		for i, want := range []int{tc.rot, tc.xor} {
			g := []Renaming{Rotation, Xor}[i]
			m, block, ok, err := c.Mirror(g)
			if err != nil || ok != (want > 0) || block != want || (m != nil) != ok {
				t.Errorf("%s, renaming %d: mirror %v, block %d, ok %v, err %v; want block %d", tc.name, g, m != nil, block, ok, err, want)
			}
		}
	}
	if _, _, _, err := mirrorCluster(t, "switch:4", symmetric).Mirror(7); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("an unknown renaming: %v, want ErrBadArgument", err)
	}
}

func mirrorCluster(t *testing.T, spec string, cfg Config) *Cluster {
	t.Helper()
	var topo *topology.Topology
	var err error
	if spec[0] == '\n' {
		topo, err = topology.ReadYAML([]byte(spec))
	} else {
		topo, err = topology.Parse(spec)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(topo, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sendTime times a send of 1000 f32 from one device to another (to), and
// its receive on device on from device recvFrom, under tag. Off a mirror,
// on is to and recvFrom is from.
func sendTime(t *testing.T, from, to, on, recvFrom hw.Device, tag uint64) (Time, error) {
	t.Helper()
	src, err := from.Alloc(hw.F32, 1000)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := on.Alloc(hw.F32, 1000)
	if err != nil {
		t.Fatal(err)
	}
	s, err := from.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	r, err := on.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	start, _ := from.NewEvent()
	end, _ := on.NewEvent()
	for _, err := range []error{s.Record(start), s.Send(hw.Whole(src), to, tag), r.Recv(hw.Whole(dst), recvFrom, tag), r.Record(end)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	if err := r.Synchronize(); err != nil {
		return 0, err
	}
	seconds, err := end.ElapsedSince(start)
	if err != nil {
		t.Fatal(err)
	}
	return FromSeconds(seconds), nil
}

// TestMirrorFoldsLinksAndMessages: on a mirror, a send to rank q crosses
// the stand-ins of its route's links and is received from any rank that q
// stands for; it takes as long as on the cluster, whose clock does not
// move; a route that would cross two links of one orbit fails; closing
// the cluster closes its mirrors.
func TestMirrorFoldsLinksAndMessages(t *testing.T) {
	for _, tc := range []struct {
		topo                string
		from, to, standIn   int // the mirror's ranks: to is received from standIn
		recvFrom, wantBlock int
		fullFrom, fullTo    int
		want                Time
	}{
		// On a switch rank 0 stands for all: its send to 2 is received
		// from 3, and takes 2 × 1.3 us + 4000 B / 40 GB/s.
		{topo: "switch:4,bw=40GB/s,lat=1300ns", from: 0, to: 2, standIn: 0, recvFrom: 3, wantBlock: 1, fullFrom: 1, fullTo: 2, want: 2700 * Nanosecond},
		// On two nodes of 4, rank 3's send to rank 4 of the next node is
		// received by rank 0 from rank 7, over the NICs.
		{topo: "cluster:2x4", from: 3, to: 4, standIn: 0, recvFrom: 7, wantBlock: 4, fullFrom: 3, fullTo: 4},
	} {
		c := mirrorCluster(t, tc.topo, Config{TimingOnly: true, Symmetry: true})
		mc, block, ok, err := c.Mirror(Rotation)
		if err != nil || !ok || block != tc.wantBlock {
			t.Fatalf("%s: block %d, ok %v, err %v", tc.topo, block, ok, err)
		}
		world := mc.World().Devices()
		mirrored, err := sendTime(t, world[tc.from], world[tc.to], world[tc.standIn], world[tc.recvFrom], 7)
		if err != nil {
			t.Fatalf("%s: %v", tc.topo, err)
		}
		if c.Now() != 0 {
			t.Fatalf("%s: the cluster's clock moved to %v", tc.topo, c.Now())
		}
		full, err := sendTime(t, c.devices[tc.fullFrom], c.devices[tc.fullTo], c.devices[tc.fullTo], c.devices[tc.fullFrom], 7)
		if err != nil || mirrored != full || (tc.want != 0 && full != tc.want) {
			t.Fatalf("%s: mirrored send took %v, on the cluster %v (%v), want %v", tc.topo, mirrored, full, err, tc.want)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := world[0].NewStream(); !errors.Is(err, hw.ErrClosed) {
			t.Fatalf("%s: mirror after Close: %v, want ErrClosed", tc.topo, err)
		}
	}
	// On a ring of 8, rank 0's route to rank 2 crosses 0->1 and 1->2,
	// both standing for 0->1.
	c := mirrorCluster(t, "ring:8", Config{TimingOnly: true, Symmetry: true})
	mc, _, _, _ := c.Mirror(Rotation)
	world := mc.World().Devices()
	if _, err := sendTime(t, world[0], world[2], world[0], world[6], 1); err == nil || !strings.Contains(err.Error(), "crosses") {
		t.Fatalf("a route across one orbit twice: %v", err)
	}
	// The failed run left work behind on that mirror: the next is fresh.
	fresh, _, ok, err := c.Mirror(Rotation)
	if err != nil || !ok || fresh == mc {
		t.Fatalf("after a failed run: a fresh mirror %v, ok %v, err %v", fresh != mc, ok, err)
	}
	again := fresh.World().Devices()
	if _, err := sendTime(t, again[0], again[1], again[0], again[7], 1); err != nil {
		t.Fatalf("on the fresh mirror: %v", err)
	}
}
