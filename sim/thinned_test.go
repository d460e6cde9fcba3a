package sim_test

import (
	"errors"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
)

// sendTime is how long rank 0's send of n f32 to rank 1 takes on c.
func sendTime(t *testing.T, c *sim.Cluster, n int) sim.Time {
	t.Helper()
	d := c.Devices()
	s := try(d[0].NewStream())(t).(*sim.Stream)
	r := try(d[1].NewStream())(t).(*sim.Stream)
	start, end := try(d[1].NewEvent())(t), try(d[1].NewEvent())(t)
	ok(t, r.Record(start))
	ok(t, s.Send(hw.Whole(try(d[0].Alloc(hw.F32, n))(t)), d[1], 1))
	ok(t, r.Recv(hw.Whole(try(d[1].Alloc(hw.F32, n))(t)), d[0], 1))
	ok(t, r.Record(end))
	ok(t, s.Synchronize())
	ok(t, r.Synchronize())
	return sim.FromSeconds(try(end.ElapsedSince(start))(t))
}

// TestThinnedDividesEveryCapacity: on the cluster thinned by 4 a message
// takes 4× as long on the wire and the same latency, and thinned by 1 as
// long as on the cluster; it is made once per divisor and handed out only
// where a mirror would be.
func TestThinnedDividesEveryCapacity(t *testing.T) {
	c := newCluster(t, "switch:2,bw=100GB/s,lat=1us", sim.Config{TimingOnly: true, Symmetry: true})
	// 40 ns on the wire, 1 µs on each of the two links.
	if got, want := sendTime(t, c, 1000), 2*sim.Microsecond+40*sim.Nanosecond; got != want {
		t.Fatalf("whole: %v, want %v", got, want)
	}
	th, okay, err := c.Thinned(4)
	if err != nil || !okay {
		t.Fatalf("Thinned(4): %v, %v", okay, err)
	}
	if got, want := sendTime(t, th, 1000), 2*sim.Microsecond+160*sim.Nanosecond; got != want {
		t.Errorf("thinned by 4: %v, want %v", got, want)
	}
	if again, _, _ := c.Thinned(4); again != th {
		t.Error("a second Thinned(4) made another cluster")
	}
	same, okay, err := c.Thinned(1)
	if err != nil || !okay {
		t.Fatalf("Thinned(1): %v, %v", okay, err)
	}
	if got, want := sendTime(t, same, 1000), 2*sim.Microsecond+40*sim.Nanosecond; got != want {
		t.Errorf("thinned by 1: %v, want the whole's %v", got, want)
	}
	if _, _, err := c.Thinned(0); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("Thinned(0): %v, want ErrBadArgument", err)
	}
	plain := newCluster(t, "switch:2", sim.Config{TimingOnly: true})
	if _, okay, err := plain.Thinned(2); okay || err != nil {
		t.Errorf("without Symmetry: %v, %v; want no thinned cluster", okay, err)
	}
	ok(t, c.Close())
	if _, _, err := c.Thinned(2); !errors.Is(err, hw.ErrClosed) {
		t.Errorf("closed: %v, want ErrClosed", err)
	}
}

// TestRotatedFoldsByARenaming: rotating each node's GPUs folds a
// cluster of nodes, every rank kept, and thinned too when asked, and so
// does the group of that rotation and the nodes' swap; a renaming that
// is not a symmetry of the fabric, or an order that is not the group's,
// folds nothing; bad arguments are refused.
func TestRotatedFoldsByARenaming(t *testing.T) {
	c := newCluster(t, "cluster:2x4", sim.Config{TimingOnly: true, Symmetry: true})
	within := func(s int) []int { // each node's 4 GPUs rotated by s
		perm := make([]int, 8)
		for r := range perm {
			perm[r] = r/4*4 + (r%4+s)%4
		}
		return perm
	}
	swap := []int{4, 5, 6, 7, 0, 1, 2, 3} // the two nodes
	for _, k := range []int{1, 2} {
		rc, okay, err := c.Rotated([][]int{within(1)}, 4, k)
		if err != nil || !okay || len(rc.Devices()) != 8 {
			t.Fatalf("rotated by 1, thinned by %d: %v, %v", k, okay, err)
		}
	}
	if rc, okay, err := c.Rotated([][]int{within(1), swap}, 8, 1); err != nil || !okay || len(rc.Devices()) != 8 {
		t.Errorf("rotated by 1 and swapped, order 8: %v, %v", okay, err)
	}
	ring := newCluster(t, "ring:8", sim.Config{TimingOnly: true, Symmetry: true})
	if _, okay, err := ring.Rotated([][]int{{1, 0, 2, 3, 4, 5, 6, 7}}, 2, 1); okay || err != nil {
		t.Errorf("a swap on a ring: %v, %v; want no fold", okay, err)
	}
	for _, wrong := range []struct {
		perms [][]int
		order int
	}{
		{[][]int{within(2)}, 4},            // its order is 2
		{[][]int{within(1), swap}, 4},      // 8
		{[][]int{within(1), within(2)}, 2}, // 4
	} {
		if _, okay, err := c.Rotated(wrong.perms, wrong.order, 1); okay || err != nil {
			t.Errorf("%v given order %d: %v, %v; want no fold", wrong.perms, wrong.order, okay, err)
		}
	}
	for _, bad := range []struct {
		perms    [][]int
		order, k int
	}{{[][]int{within(1)[:4]}, 4, 1}, {[][]int{within(1), swap[:4]}, 8, 1}, {nil, 4, 1}, {[][]int{within(1)}, 1, 1}, {[][]int{within(1)}, 4, 0},
		// no renaming of the ranks: one twice, one past them, one below 0
		{[][]int{{0, 0, 2, 3, 4, 5, 6, 7}}, 2, 1}, {[][]int{{9, 1, 2, 3, 4, 5, 6, 7}}, 2, 1}, {[][]int{{-1, 1, 2, 3, 4, 5, 6, 7}}, 2, 1}} {
		if _, _, err := c.Rotated(bad.perms, bad.order, bad.k); !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("Rotated(%v, %d, %d): %v, want ErrBadArgument", bad.perms, bad.order, bad.k, err)
		}
	}
}
