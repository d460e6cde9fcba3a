package sim_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
)

// Simulated time is int64 picoseconds: its horizon, sim.Never, is about
// 9.22e6 s (106.75 days) from time 0. These tests build work around it
// from durations of 4e6 to 6e6 s, which fit once and pass it twice.

// send enqueues a send of n bytes from a to b on sa and its receive on sb,
// on fresh phantom buffers.
func send(t *testing.T, c *sim.Cluster, sa, sb hw.Stream, a, b int, n int, tag uint64) {
	t.Helper()
	d := c.Devices()
	src := try(d[a].Alloc(hw.U8, n))(t)
	dst := try(d[b].Alloc(hw.U8, n))(t)
	ok(t, sa.Send(hw.Whole(src), d[b], tag))
	ok(t, sb.Recv(hw.Whole(dst), d[a], tag))
}

// wantPastHorizon checks that err reports the horizon, by name and as
// ErrHorizon, and not a deadlock.
func wantPastHorizon(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, sim.ErrHorizon) {
		t.Fatalf("%s = %v, want an error wrapping ErrHorizon", what, err)
	}
	if sim.IsDeadlock(err) || strings.Contains(err.Error(), "deadlock") {
		t.Fatalf("%s calls work past the horizon a deadlock: %v", what, err)
	}
	if !strings.Contains(err.Error(), "horizon of 106.75 days (2^63−1 ps)") {
		t.Fatalf("%s does not name the horizon: %v", what, err)
	}
}

func TestWorkPastTheHorizonFails(t *testing.T) {
	const fiveMillionSeconds = 5e6
	cases := map[string]struct {
		topo string
		// work enqueues on rank 0's stream s0 and rank 1's s1 work that
		// ends past the horizon.
		work   func(t *testing.T, c *sim.Cluster, s0, s1 hw.Stream)
		faults []string
	}{
		"three sends of 4e6 s each": {
			topo: "switch:2,bw=1B/s",
			work: func(t *testing.T, c *sim.Cluster, s0, s1 hw.Stream) {
				for tag := range uint64(3) {
					send(t, c, s0, s1, 0, 1, 4_000_000, tag)
				}
			},
		},
		"one send of 1e7 s": {
			topo: "switch:2,bw=1e-6B/s",
			work: func(t *testing.T, c *sim.Cluster, s0, s1 hw.Stream) {
				send(t, c, s0, s1, 0, 1, 10, 0)
			},
		},
		"a reduce of 1e7 s": {
			topo: "switch:2,reduce=1B/s",
			work: func(t *testing.T, c *sim.Cluster, s0, _ hw.Stream) {
				d := c.Devices()[0]
				a, b := try(d.Alloc(hw.U8, 10_000_000))(t), try(d.Alloc(hw.U8, 10_000_000))(t)
				ok(t, s0.Reduce(hw.Max, hw.Whole(a), hw.Whole(b)))
			},
		},
		"two computes of 5e6 s": {
			topo: "switch:2",
			work: func(t *testing.T, c *sim.Cluster, s0, _ hw.Stream) {
				ok(t, s0.(*sim.Stream).Compute(fiveMillionSeconds, "forward"))
				ok(t, s0.(*sim.Stream).Compute(fiveMillionSeconds, "backward"))
			},
		},
		"a compute longer than the horizon": {
			topo: "switch:2",
			work: func(t *testing.T, c *sim.Cluster, s0, _ hw.Stream) {
				ok(t, s0.(*sim.Stream).Compute(1e300, "forever"))
			},
		},
		"two delays of 5e6 s": {
			topo: "switch:2",
			work: func(t *testing.T, c *sim.Cluster, s0, _ hw.Stream) {
				delay := sim.Op{Kind: sim.OpDelay, Duration: sim.Time(fiveMillionSeconds) * sim.Second}
				ok(t, s0.(*sim.Stream).Feed(&ops{list: []sim.Op{delay, delay}, n: 1}))
			},
		},
		"a stall that ends past the horizon": {
			topo:   "switch:2",
			faults: []string{"rank 0 stall 5000000s at 5000000s"},
			work: func(t *testing.T, c *sim.Cluster, s0, _ hw.Stream) {
				ok(t, s0.(*sim.Stream).Compute(fiveMillionSeconds, "forward"))
				ok(t, s0.(*sim.Stream).Compute(1e-6, "after the stall"))
			},
		},
		"a message that lands past the horizon": {
			topo: "switch:2",
			work: func(t *testing.T, c *sim.Cluster, s0, s1 hw.Stream) {
				ok(t, s0.(*sim.Stream).Compute(fiveMillionSeconds, "forward"))
				var wire sim.Wire
				for k := range wire.Latency {
					wire.Latency[k], wire.Efficiency[k] = sim.Time(fiveMillionSeconds)*sim.Second, 1
				}
				d := c.Devices()
				src, dst := try(d[0].Alloc(hw.U8, 8))(t), try(d[1].Alloc(hw.U8, 8))(t)
				ok(t, s0.(*sim.Stream).Feed(&ops{list: []sim.Op{{Kind: sim.OpSend, Src: hw.Whole(src), Peer: d[1], Wire: &wire}}, n: 1}))
				ok(t, s1.Recv(hw.Whole(dst), d[0], 0))
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var report string
			for run := range 2 {
				c := newCluster(t, tc.topo, sim.Config{TimingOnly: true})
				for _, f := range tc.faults {
					ok(t, c.Inject(try(sim.ParseFault(f))(t)))
				}
				d := c.Devices()
				s0, s1 := try(d[0].NewStream())(t), try(d[1].NewStream())(t)
				tc.work(t, c, s0, s1)
				err := errors.Join(s1.Synchronize(), s0.Synchronize())
				wantPastHorizon(t, "Synchronize", err)
				wantPastHorizon(t, "Run", c.Run())
				if now := c.Now(); now < 0 || now >= sim.Never {
					t.Fatalf("the clock reads %v", now)
				}
				if run == 1 && err.Error() != report {
					t.Fatalf("a rerun reports\n%v\nnot\n%v", err, report)
				}
				report = err.Error()
			}
		})
	}
}

func TestSlowWorkInsideTheHorizonFinishes(t *testing.T) {
	// Two sends of 4e6 s each, one after the other: 8e6 s and the two
	// paths' latency of 2 x 1us, inside the horizon.
	c := newCluster(t, "switch:2,bw=1B/s,lat=1us", sim.Config{TimingOnly: true})
	d := c.Devices()
	s0, s1 := try(d[0].NewStream())(t), try(d[1].NewStream())(t)
	send(t, c, s0, s1, 0, 1, 4_000_000, 0)
	send(t, c, s0, s1, 0, 1, 4_000_000, 1)
	ok(t, s1.Synchronize())
	ok(t, c.Run())
	if want := 8_000_000*sim.Second + 4*sim.Microsecond; c.Now() != want {
		t.Fatalf("finished at %v, want %v", c.Now(), want)
	}
}

func TestAFlowWhoseFinishComesBackInsideTheHorizonFinishes(t *testing.T) {
	// Ranks 0 and 1 both send to rank 2 through its one link of 1 B/s.
	// Sharing it, rank 0's 6e6 bytes would end at 1.2e7 s, past the
	// horizon; once rank 1's 2 bytes are through (4 s), it has the link
	// to itself and ends at 6e6 + 2 s.
	c := newCluster(t, "switch:3,bw=1B/s,lat=1us", sim.Config{TimingOnly: true})
	d := c.Devices()
	s0, s1, s2 := try(d[0].NewStream())(t), try(d[1].NewStream())(t), try(d[2].NewStream())(t)
	send(t, c, s0, s2, 0, 2, 6_000_000, 0)
	send(t, c, s1, s2, 1, 2, 2, 0)
	ok(t, s2.Synchronize())
	ok(t, c.Run())
	want := 6_000_002*sim.Second + 2*sim.Microsecond
	if got := c.Now(); math.Abs(float64(got-want)) > 1e-12*float64(want) {
		t.Fatalf("finished at %v, want %v", got, want)
	}
}

func TestAFaultPastTheHorizonIsRefused(t *testing.T) {
	c := newCluster(t, "switch:2", sim.Config{})
	err := c.Inject(sim.Fault{Kind: sim.RankCrash, Rank: 0, At: sim.Never})
	if !errors.Is(err, sim.ErrHorizon) {
		t.Fatalf("Inject at Never = %v, want ErrHorizon", err)
	}
}
