package sim_test

import (
	"errors"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
)

// fedSend times one message of n f32 from rank from to rank to, fed with
// wire w, from a start event on the sender to an end event on the
// receiver, after a delay on the sender.
func fedSend(t *testing.T, spec string, from, to, n int, w *sim.Wire, delay sim.Time) (sim.Time, error) {
	t.Helper()
	c := newCluster(t, spec, sim.Config{TimingOnly: true})
	d := c.Devices()
	src, dst := try(d[from].Alloc(hw.F32, n))(t), try(d[to].Alloc(hw.F32, n))(t)
	s := try(d[from].NewStream())(t).(*sim.Stream)
	r := try(d[to].NewStream())(t).(*sim.Stream)
	start, end := try(d[from].NewEvent())(t), try(d[to].NewEvent())(t)
	ok(t, s.Record(start))
	ok(t, s.Feed(&ops{list: []sim.Op{{Kind: sim.OpDelay, Duration: delay}, {Kind: sim.OpSend, Src: hw.Whole(src), Peer: d[to], Tag: 1, Wire: w}}, n: 4}))
	ok(t, r.Recv(hw.Whole(dst), d[from], 1))
	ok(t, r.Record(end))
	if err := s.Synchronize(); err != nil {
		return 0, err
	}
	ok(t, r.Synchronize())
	return sim.FromSeconds(try(end.ElapsedSince(start))(t)), nil
}

// TestWireSetsLatencyAndEfficiency: a message with a wire takes the
// wire's latency for its route's class in place of the links' own, and
// occupies its links as payload/efficiency bytes; without a wire it
// costs the links' latency and full bandwidth. A delay comes first.
func TestWireSetsLatencyAndEfficiency(t *testing.T) {
	w := &sim.Wire{
		Latency:    [3]sim.Time{3 * sim.Microsecond, 5 * sim.Microsecond, 14 * sim.Microsecond},
		Efficiency: [3]float64{0.5, 1, 0.8},
	}
	for _, tc := range []struct {
		name     string
		spec     string
		from, to int
		wire     *sim.Wire
		want     sim.Time
	}{
		// 2 links of 1 µs; 4000 B at 100 GB/s = 40 ns.
		{"plain, NVLink", "switch:2,bw=100GB/s,lat=1us", 0, 1, nil, 2*sim.Microsecond + 40*sim.Nanosecond},
		// 3 µs; 4000 B at half of 100 GB/s = 80 ns.
		{"wire, NVLink", "switch:2,bw=100GB/s,lat=1us", 0, 1, w, 3*sim.Microsecond + 80*sim.Nanosecond},
		// Across nodes: 14 µs; 4000 B at 0.8 × 10 GB/s = 500 ns.
		{"wire, network", "cluster:2x1,bw=100GB/s,nicbw=10GB/s", 0, 1, w, 14*sim.Microsecond + 500*sim.Nanosecond},
	} {
		got, err := fedSend(t, tc.spec, tc.from, tc.to, 1000, tc.wire, 7*sim.Microsecond)
		if err != nil || got != tc.want+7*sim.Microsecond {
			t.Errorf("%s: %v (%v), want %v", tc.name, got, err, tc.want+7*sim.Microsecond)
		}
	}
	bad := *w
	bad.Efficiency[1] = 0
	if _, err := fedSend(t, "switch:2", 0, 1, 10, &bad, 0); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("a wire of efficiency 0: %v, want ErrBadArgument", err)
	}
	if _, err := fedSend(t, "switch:2", 0, 1, 10, nil, -1); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("a negative delay: %v, want ErrBadArgument", err)
	}
}

// TestWireMessagesOverlapTheirLatency: a sender's messages with a wire
// leave one after another at the wire's pace, each landing the wire's
// latency after its bytes are on the wire, so two messages take one
// latency, not two; plain messages pay their route's latency each.
func TestWireMessagesOverlapTheirLatency(t *testing.T) {
	w := &sim.Wire{Latency: [3]sim.Time{3 * sim.Microsecond, 0, 0}, Efficiency: [3]float64{0.5, 1, 1}}
	for _, tc := range []struct {
		name       string
		wire       *sim.Wire
		sent, land sim.Time
	}{
		// 4000 B at 50 GB/s: 80 ns each, on the wire back to back.
		{"wire", w, 160 * sim.Nanosecond, 160*sim.Nanosecond + 3*sim.Microsecond},
		// 2 µs of links' latency, then 40 ns, for each.
		{"plain", nil, 2 * (2*sim.Microsecond + 40*sim.Nanosecond), 2 * (2*sim.Microsecond + 40*sim.Nanosecond)},
	} {
		c := newCluster(t, "switch:2,bw=100GB/s,lat=1us", sim.Config{TimingOnly: true})
		d := c.Devices()
		src, dst := try(d[0].Alloc(hw.F32, 1000))(t), try(d[1].Alloc(hw.F32, 1000))(t)
		s := try(d[0].NewStream())(t).(*sim.Stream)
		r := try(d[1].NewStream())(t)
		start, sent, end := try(d[0].NewEvent())(t), try(d[0].NewEvent())(t), try(d[1].NewEvent())(t)
		ok(t, s.Record(start))
		send := sim.Op{Kind: sim.OpSend, Src: hw.Whole(src), Peer: d[1], Tag: 1, Wire: tc.wire}
		ok(t, s.Feed(&ops{list: []sim.Op{send, send}, n: 4}))
		ok(t, s.Record(sent))
		ok(t, r.Recv(hw.Whole(dst), d[0], 1))
		ok(t, r.Recv(hw.Whole(dst), d[0], 1))
		ok(t, r.Record(end))
		ok(t, s.Synchronize())
		ok(t, r.Synchronize())
		if got := sim.FromSeconds(try(sent.ElapsedSince(start))(t)); got != tc.sent {
			t.Errorf("%s: sender done after %v, want %v", tc.name, got, tc.sent)
		}
		if got := sim.FromSeconds(try(end.ElapsedSince(start))(t)); got != tc.land {
			t.Errorf("%s: both landed after %v, want %v", tc.name, got, tc.land)
		}
	}
}

// TestFusedReduceTakesNoTime: a reduction fused into the transfer that
// fed it takes no time; the same reduction unfused takes its bytes at the
// GPU's reduce bandwidth. Both reduce.
func TestFusedReduceTakesNoTime(t *testing.T) {
	for _, fused := range []bool{false, true} {
		c := newCluster(t, "switch:2,reduce=100GB/s", sim.Config{})
		d := c.Devices()[0]
		a, b := try(d.Alloc(hw.F32, 1000))(t), try(d.Alloc(hw.F32, 1000))(t)
		ok(t, a.Write(make([]byte, 4000)))
		one := make([]byte, 4000)
		for i := 0; i < len(one); i += 4 {
			one[i+2], one[i+3] = 0x80, 0x3f // 1.0
		}
		ok(t, b.Write(one))
		s := try(d.NewStream())(t).(*sim.Stream)
		start, end := try(d.NewEvent())(t), try(d.NewEvent())(t)
		ok(t, s.Record(start))
		ok(t, s.Feed(&ops{list: []sim.Op{{Kind: sim.OpReduce, Redop: hw.Sum, Dst: hw.Whole(a), Src: hw.Whole(b), Fused: fused}}, n: 4}))
		ok(t, s.Record(end))
		ok(t, s.Synchronize())
		want := 40 * sim.Nanosecond // 4000 B at 100 GB/s
		if fused {
			want = 0
		}
		if got := sim.FromSeconds(try(end.ElapsedSince(start))(t)); got != want {
			t.Errorf("fused %v: took %v, want %v", fused, got, want)
		}
		got := make([]byte, 4000)
		ok(t, a.Read(got))
		if string(got) != string(one) {
			t.Errorf("fused %v: 0 + 1 is not 1", fused)
		}
	}
}
