package sim

import (
	"errors"
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestPacedStreamStaysSmall: a stream fed a window at a time, run to the
// first window's end before the next is enqueued, never drains; what it
// holds stays a few windows long, and every compute ends when it would
// had the stream been fed at once.
func TestPacedStreamStaysSmall(t *testing.T) {
	c := mirrorCluster(t, "switch:2", Config{TimingOnly: true})
	defer c.Close()
	d := c.Devices()[0]
	hs, _ := d.NewStream()
	s := hs.(*Stream)
	const window, windows = 100, 200
	var prev *Event
	for w := range windows {
		for range window {
			if err := s.Compute(1e-6, "unit"); err != nil {
				t.Fatal(err)
			}
		}
		ev, _ := d.NewEvent()
		if err := s.Record(ev); err != nil {
			t.Fatal(err)
		}
		if prev != nil {
			if err := c.RunUntilAny(prev); err != nil {
				t.Fatal(err)
			}
			if at, _ := prev.Time(); at != Time(w*window)*FromSeconds(1e-6) {
				t.Fatalf("window %d ended at %v, want %v", w-1, at, Time(w*window)*FromSeconds(1e-6))
			}
		}
		if held := cap(s.queue); held > 8*window+2048 {
			t.Fatalf("window %d: the stream holds room for %d ops, %d queued", w, held, len(s.queue)-s.head)
		}
		prev = ev.(*Event)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if got, want := c.Now(), Time(window*windows)*FromSeconds(1e-6); got != want {
		t.Fatalf("done at %v, want %v", got, want)
	}
}

// TestRunUntilAnyStopsAtTheFirst: the run stands at the earliest of the
// events, refuses events never recorded or from elsewhere, and names the
// failure of a record its stream skipped.
func TestRunUntilAnyStopsAtTheFirst(t *testing.T) {
	c := mirrorCluster(t, "switch:2", Config{TimingOnly: true})
	defer c.Close()
	var evs []*Event
	for i, d := range c.Devices() {
		s, _ := d.NewStream()
		s.(*Stream).Compute(float64(2-i)*1e-3, "work")
		ev, _ := d.NewEvent()
		s.Record(ev)
		evs = append(evs, ev.(*Event))
	}
	if err := c.RunUntilAny(evs...); err != nil {
		t.Fatal(err)
	}
	if c.Now() != FromSeconds(1e-3) {
		t.Fatalf("stood at %v, want the second rank's 1ms", c.Now())
	}
	if _, err := evs[0].Time(); !errors.Is(err, hw.ErrNotReady) {
		t.Fatalf("the later event completed too early: %v", err)
	}
	fresh, _ := c.Devices()[0].NewEvent()
	if err := c.RunUntilAny(fresh.(*Event)); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("an event never recorded: %v", err)
	}
	other := mirrorCluster(t, "switch:2", Config{TimingOnly: true})
	defer other.Close()
	if err := other.RunUntilAny(evs[0]); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("an event from another cluster: %v", err)
	}
	// A crashed rank skips its record: the run names the crash.
	crashed := mirrorCluster(t, "switch:2", Config{TimingOnly: true})
	defer crashed.Close()
	if err := crashed.Inject(Fault{Kind: RankCrash, Rank: 0, At: FromSeconds(1e-6)}); err != nil {
		t.Fatal(err)
	}
	d := crashed.Devices()[0]
	s, _ := d.NewStream()
	s.(*Stream).Compute(1e-3, "work")
	ev, _ := d.NewEvent()
	s.Record(ev)
	if err := crashed.RunUntilAny(ev.(*Event)); err == nil {
		t.Error("a record its crashed stream skipped: no error")
	}
}

// TestRewindGivesTheWholeHorizonBack: two computes of 60 days each pass
// the 106-day horizon one after the other, but not with the clock rewound
// between them; a busy or failed cluster is not rewound.
func TestRewindGivesTheWholeHorizonBack(t *testing.T) {
	const days60 = 60 * 24 * 3600.0
	for _, rewind := range []bool{false, true} {
		c := mirrorCluster(t, "switch:2", Config{TimingOnly: true})
		hs, _ := c.Devices()[0].NewStream()
		s := hs.(*Stream)
		s.Compute(days60, "first")
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if rewind {
			if err := c.Rewind(); err != nil {
				t.Fatal(err)
			}
			if c.Now() != 0 {
				t.Fatalf("rewound to %v", c.Now())
			}
		}
		s.Compute(days60, "second")
		err := s.Synchronize()
		if rewind && err != nil {
			t.Errorf("after a rewind: %v", err)
		}
		if !rewind && !errors.Is(err, ErrHorizon) {
			t.Errorf("without a rewind: %v, want the horizon", err)
		}
		if !rewind {
			if err := c.Rewind(); !errors.Is(err, hw.ErrBadArgument) {
				t.Errorf("rewinding a failed cluster: %v", err)
			}
		}
		c.Close()
		if err := c.Rewind(); !errors.Is(err, hw.ErrClosed) {
			t.Errorf("rewinding a closed cluster: %v", err)
		}
	}
}
