package sim_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
)

// buffering has rank 0 send ten messages of 1000 f32 (40 ns each at
// 100 GB/s, landing 1 µs after) to rank 1 under w, while rank 1 first
// computes for 1 ms and then receives them in recvOrder (tags 1…10). It
// returns when rank 0's sends were done, and the error of each side.
func buffering(t *testing.T, w *sim.Wire, recvOrder []int, faults ...string) (sim.Time, error, error) {
	t.Helper()
	c := newCluster(t, "switch:2,bw=100GB/s,lat=1us", sim.Config{TimingOnly: true})
	for _, f := range faults {
		ok(t, c.Inject(try(sim.ParseFault(f))(t)))
	}
	d := c.Devices()
	s := try(d[0].NewStream())(t).(*sim.Stream)
	r := try(d[1].NewStream())(t).(*sim.Stream)
	start, sent := try(d[0].NewEvent())(t), try(d[0].NewEvent())(t)
	ok(t, s.Record(start))
	var sends []sim.Op
	for tag := 1; tag <= 10; tag++ {
		src := try(d[0].Alloc(hw.F32, 1000))(t)
		sends = append(sends, sim.Op{Kind: sim.OpSend, Src: hw.Whole(src), Peer: d[1], Tag: uint64(tag), Wire: w})
	}
	ok(t, s.Feed(&ops{list: sends, n: 3}))
	ok(t, s.Record(sent))
	ok(t, r.Compute(1e-3, "busy"))
	for _, tag := range recvOrder {
		ok(t, r.Recv(hw.Whole(try(d[1].Alloc(hw.F32, 1000))(t)), d[0], uint64(tag)))
	}
	sendErr, recvErr := s.Synchronize(), r.Synchronize()
	if sendErr != nil {
		return 0, sendErr, recvErr
	}
	return sim.FromSeconds(try(sent.ElapsedSince(start))(t)), nil, recvErr
}

var inOrder = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}

func buffered(slots int, slotBytes int64) *sim.Wire {
	return &sim.Wire{Latency: [3]sim.Time{sim.Microsecond, sim.Microsecond, sim.Microsecond},
		Efficiency: [3]float64{1, 1, 1}, Slots: slots, SlotBytes: slotBytes}
}

// TestBufferHoldsAFastSenderToItsReceiver: with no buffer a sender runs
// as far ahead of a busy receiver as it likes; with one, it waits for the
// receiver to take messages before it sends what would not fit beside
// them, and hears that one was taken a hop's latency (1 µs) later.
func TestBufferHoldsAFastSenderToItsReceiver(t *testing.T) {
	const busy = sim.Millisecond
	for _, tc := range []struct {
		name string
		wire *sim.Wire
		want sim.Time
	}{
		// Ten sends of 40 ns back to back.
		{"eager", buffered(0, 0), 400 * sim.Nanosecond},
		// Eight go at once; the receiver takes them (already landed) at
		// 1 ms, and the sender hears of it at +1000 ns: the last two go
		// then.
		{"8 messages' room", buffered(8, 4000), busy + 1080*sim.Nanosecond},
		// Two go at once. At 1 ms the receiver takes both; heard of at
		// +1000 ns, sends 3 and 4 go then (land at +2040 and +2080 ns,
		// heard of at +3040 and +3080); each later pair is 2040 ns behind
		// the one before: 5 and 6 at +3040 ns, 7 and 8 at +5080, 9 and 10
		// at +7120, done 80 ns later.
		{"2 messages' room", buffered(2, 4000), busy + 7200*sim.Nanosecond},
		{"room for 2 but not 3", buffered(2, 5999), busy + 7200*sim.Nanosecond},
		// One at a time: send 2 goes when the first is heard of, at
		// +1000 ns; each later one 2040 ns after the one before (40 ns
		// sending, 1 µs landing, 1 µs back).
		{"1 message's room", buffered(1, 4000), busy + 1000*sim.Nanosecond + 8*2040*sim.Nanosecond + 40*sim.Nanosecond},
		// A message larger than a slot streams through them: eager.
		{"slots smaller than a message", buffered(8, 3999), 400 * sim.Nanosecond},
	} {
		got, sendErr, recvErr := buffering(t, tc.wire, inOrder)
		if sendErr != nil || recvErr != nil || got != tc.want {
			t.Errorf("%s: sends done after %v (%v, %v), want %v", tc.name, got, sendErr, recvErr, tc.want)
		}
	}
}

// TestAFullBufferThatNoReceiveDrainsIsADeadlock: a receiver that waits
// for the last message before it takes the others never makes room for
// it in a buffer of two, and the report says so; eager sends finish.
func TestAFullBufferThatNoReceiveDrainsIsADeadlock(t *testing.T) {
	order := []int{10, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	if _, sendErr, recvErr := buffering(t, buffered(0, 0), order); sendErr != nil || recvErr != nil {
		t.Fatalf("eager: %v, %v", sendErr, recvErr)
	}
	_, sendErr, _ := buffering(t, buffered(2, 4000), order)
	if !errors.Is(sendErr, hw.ErrDeadlock) || !strings.Contains(sendErr.Error(), "waiting for room in its buffer to rank 1: 8000 of its 8000 bytes") {
		t.Fatalf("sender: %v, want a deadlock report naming the full buffer", sendErr)
	}
}

// TestABufferOnACrashedRankFailsTheSender: a sender waiting for room that
// a crashed rank will never free fails with the crash, not a deadlock.
func TestABufferOnACrashedRankFailsTheSender(t *testing.T) {
	_, sendErr, _ := buffering(t, buffered(2, 4000), inOrder, "rank 1 crash at 500us")
	if !errors.Is(sendErr, sim.ErrCrashed) || !strings.Contains(sendErr.Error(), "rank 1") {
		t.Fatalf("sender: %v, want ErrCrashed naming rank 1", sendErr)
	}
}

// TestWireRefusesBadWires: a wire with negative slots, slots too large
// to add up, or a negative reference latency is bad input, named.
func TestWireRefusesBadWires(t *testing.T) {
	negativeReference := buffered(2, 4000)
	negativeReference.Reference[sim.PathNet] = -1
	for _, tc := range []struct {
		w     *sim.Wire
		names string
	}{
		{buffered(-1, 4000), "buffer"}, {buffered(2, -1), "buffer"}, {buffered(2, math.MaxInt64), "buffer"},
		{negativeReference, "reference latency"},
	} {
		c := newCluster(t, "switch:2", sim.Config{TimingOnly: true})
		d := c.Devices()
		s := try(d[0].NewStream())(t).(*sim.Stream)
		src := try(d[0].Alloc(hw.F32, 4))(t)
		ok(t, s.Feed(&ops{list: []sim.Op{{Kind: sim.OpSend, Src: hw.Whole(src), Peer: d[1], Tag: 1, Wire: tc.w}}, n: 1}))
		if err := s.Synchronize(); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), tc.names) {
			t.Errorf("wire %+v: %v, want ErrBadArgument naming the %s", *tc.w, err, tc.names)
		}
	}
}

// TestRewoundBuffersStartEmpty: a connection's last word that a slot is
// free may be on its way when its collective ends; once the cluster is
// rewound, the next run finds the room free and takes the time the first
// did, to the picosecond.
func TestRewoundBuffersStartEmpty(t *testing.T) {
	c := newCluster(t, "switch:2,bw=100GB/s,lat=1us", sim.Config{TimingOnly: true})
	d := c.Devices()
	s := try(d[0].NewStream())(t).(*sim.Stream)
	r := try(d[1].NewStream())(t).(*sim.Stream)
	src := try(d[0].Alloc(hw.F32, 1000))(t)
	dst := try(d[1].Alloc(hw.F32, 1000))(t)
	run := func() sim.Time {
		start, sent := try(d[0].NewEvent())(t), try(d[0].NewEvent())(t)
		ok(t, s.Record(start))
		var sends []sim.Op
		for tag := uint64(1); tag <= 4; tag++ {
			sends = append(sends, sim.Op{Kind: sim.OpSend, Src: hw.Whole(src), Peer: d[1], Tag: tag, Wire: buffered(1, 4000)})
			ok(t, r.Recv(hw.Whole(dst), d[0], tag))
		}
		ok(t, s.Feed(&ops{list: sends, n: 2}))
		ok(t, s.Record(sent))
		ok(t, s.Synchronize())
		ok(t, r.Synchronize())
		return sim.FromSeconds(try(sent.ElapsedSince(start))(t))
	}
	// Each send but the first waits 2040 ns for the one before: 40 ns
	// sending, 1 µs landing, 1 µs for the word back.
	want := 3*2040*sim.Nanosecond + 40*sim.Nanosecond
	if got := run(); got != want {
		t.Fatalf("first run: %v, want %v", got, want)
	}
	ok(t, c.Rewind())
	if got := run(); got != want {
		t.Errorf("after a rewind: %v, want %v", got, want)
	}
	// Not rewound, the next run starts as the last message lands: its
	// first send waits 1 µs for the word that the slot is free.
	if got := run(); got != want+sim.Microsecond {
		t.Errorf("a run at once: %v, want %v", got, want+sim.Microsecond)
	}
}
