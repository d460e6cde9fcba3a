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
// takes 4× as long on the wire and the same latency; it is made once per
// divisor and handed out only where a mirror would be.
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
	if _, _, err := c.Thinned(1); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("Thinned(1): %v, want ErrBadArgument", err)
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
