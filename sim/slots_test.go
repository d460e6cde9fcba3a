package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
)

// slotted has rank 0 send ten messages of 1000 f32 (40 ns each at
// 100 GB/s, landing 1 µs after) to rank 1 under w, while rank 1 first
// computes for 1 ms and then receives them in recvOrder (tags 1…10). It
// returns when rank 0's sends were done, and the error of each side.
func slotted(t *testing.T, w *sim.Wire, recvOrder []int, faults ...string) (sim.Time, error, error) {
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

func slotWire(slots int, slotBytes int64) *sim.Wire {
	return &sim.Wire{Latency: [3]sim.Time{sim.Microsecond, sim.Microsecond, sim.Microsecond},
		Efficiency: [3]float64{1, 1, 1}, Slots: slots, SlotBytes: slotBytes}
}

// TestSlotsHoldAFastSenderToItsReceiver: with no slots a sender runs as
// far ahead of a busy receiver as it likes; with them, it waits for the
// receiver to take a message before it reuses the message's slots.
func TestSlotsHoldAFastSenderToItsReceiver(t *testing.T) {
	const busy = sim.Millisecond
	for _, tc := range []struct {
		name string
		wire *sim.Wire
		want sim.Time
	}{
		// Ten sends of 40 ns back to back.
		{"eager", slotWire(0, 0), 400 * sim.Nanosecond},
		// Eight go at once; the last two when the receiver takes the
		// first (already landed) at 1 ms.
		{"8 slots", slotWire(8, 0), busy + 80*sim.Nanosecond},
		// Two go at once. At 1 ms the receiver takes both, sends 3 and 4
		// go (land at +1040 and +1080 ns); each later pair waits for the
		// pair before it to land: 5 and 6 at +1040 ns, 7 and 8 at +2080,
		// 9 and 10 at +3120, done 80 ns later.
		{"2 slots", slotWire(2, 0), busy + 3200*sim.Nanosecond},
		// 4000-byte messages in slots of 2000 bytes take two each: as 2.
		{"4 slots of 2000 B", slotWire(4, 2000), busy + 3200*sim.Nanosecond},
		// A message larger than the whole buffer takes all of it, one
		// at a time: sends 2…10 each wait for the one before to land.
		{"1 slot", slotWire(1, 0), busy + 8*1040*sim.Nanosecond + 40*sim.Nanosecond},
		{"2 slots of 1000 B", slotWire(2, 1000), busy + 8*1040*sim.Nanosecond + 40*sim.Nanosecond},
	} {
		got, sendErr, recvErr := slotted(t, tc.wire, inOrder)
		if sendErr != nil || recvErr != nil || got != tc.want {
			t.Errorf("%s: sends done after %v (%v, %v), want %v", tc.name, got, sendErr, recvErr, tc.want)
		}
	}
}

// TestFullSlotsThatNoReceiveFreesAreADeadlock: a receiver that waits for
// the third message before it takes the first two never frees a slot for
// it under two slots, and the report says so; eager sends finish.
func TestFullSlotsThatNoReceiveFreesAreADeadlock(t *testing.T) {
	order := []int{10, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	if _, sendErr, recvErr := slotted(t, slotWire(0, 0), order); sendErr != nil || recvErr != nil {
		t.Fatalf("eager: %v, %v", sendErr, recvErr)
	}
	_, sendErr, _ := slotted(t, slotWire(2, 0), order)
	if !errors.Is(sendErr, hw.ErrDeadlock) || !strings.Contains(sendErr.Error(), "waiting for a free buffer slot: 2 of its 2 to rank 1") {
		t.Fatalf("sender: %v, want a deadlock report naming the full slots", sendErr)
	}
}

// TestSlotsToACrashedRankFailTheSender: a sender waiting for slots that a
// crashed rank will never free fails with the crash, not a deadlock.
func TestSlotsToACrashedRankFailTheSender(t *testing.T) {
	_, sendErr, _ := slotted(t, slotWire(2, 0), inOrder, "rank 1 crash at 500us")
	if !errors.Is(sendErr, sim.ErrCrashed) || !strings.Contains(sendErr.Error(), "rank 1") {
		t.Fatalf("sender: %v, want ErrCrashed naming rank 1", sendErr)
	}
}

// TestWireRefusesNegativeSlots: a wire with negative slots is bad input.
func TestWireRefusesNegativeSlots(t *testing.T) {
	for _, w := range []*sim.Wire{slotWire(-1, 0), slotWire(2, -1)} {
		c := newCluster(t, "switch:2", sim.Config{TimingOnly: true})
		d := c.Devices()
		s := try(d[0].NewStream())(t).(*sim.Stream)
		src := try(d[0].Alloc(hw.F32, 4))(t)
		ok(t, s.Feed(&ops{list: []sim.Op{{Kind: sim.OpSend, Src: hw.Whole(src), Peer: d[1], Tag: 1, Wire: w}}, n: 1}))
		if err := s.Synchronize(); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "slots") {
			t.Errorf("wire %+v: %v, want ErrBadArgument naming the slots", *w, err)
		}
	}
}
