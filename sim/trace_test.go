package sim_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// TestTraceToNoWriterIsRefused: a nil writer is an argument error, not a
// panic in the flush.
func TestTraceToNoWriterIsRefused(t *testing.T) {
	c := runScenario(t, sim.Config{Trace: true})
	if err := c.WriteTrace(nil); !errors.Is(err, hw.ErrBadArgument) {
		t.Fatalf("WriteTrace(nil): %v", err)
	}
	// A cap below 0 is refused, as MaxDataBytes's is (it read as no cap).
	topo, err := topology.Parse("switch:2")
	if err != nil {
		t.Fatal(err)
	}
	c, err = sim.NewCluster(topo, sim.Config{Trace: true, TraceMaxBytes: -1})
	if err == nil {
		c.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "TraceMaxBytes must be >= 0") {
		t.Errorf("TraceMaxBytes -1: %v", err)
	}
}

// TestTraceEstimateBoundsTheTrace checks TraceBytes against the bytes
// WriteTrace writes: one more, for the separator the first line lacks.
func TestTraceEstimateBoundsTheTrace(t *testing.T) {
	c := runScenario(t, sim.Config{Trace: true})
	var buf bytes.Buffer
	ok(t, c.WriteTrace(&buf))
	est, got := c.TraceBytes(), int64(buf.Len())
	if est != got+1 {
		t.Fatalf("TraceBytes = %d for a trace of %d bytes", est, got)
	}
	if err := c.CheckTrace(); err != nil {
		t.Fatalf("CheckTrace without a limit: %v", err)
	}
}

// TestTraceOverTheLimitIsRefused checks that a trace past
// Config.TraceMaxBytes is refused before a byte is written, with the
// estimate of the whole trace, and that one within it is written whole.
func TestTraceOverTheLimitIsRefused(t *testing.T) {
	full := scenario(t)
	c := runScenario(t, sim.Config{Trace: true, TraceMaxBytes: int64(len(full)) / 4})
	var buf bytes.Buffer
	err := c.WriteTrace(&buf)
	var tl *sim.TraceTooLargeError
	if !errors.As(err, &tl) || buf.Len() != 0 {
		t.Fatalf("WriteTrace past the limit: %v, %d bytes written", err, buf.Len())
	}
	if tl.Limit != int64(len(full))/4 || tl.Estimate < int64(len(full)) {
		t.Fatalf("refusal %+v for a trace of %d bytes", tl, len(full))
	}
	if err := c.CheckTrace(); !errors.As(err, &tl) {
		t.Fatalf("CheckTrace past the limit: %v", err)
	}
	c = runScenario(t, sim.Config{Trace: true, TraceMaxBytes: int64(len(full)) + 64})
	buf.Reset()
	ok(t, c.WriteTrace(&buf))
	if !bytes.Equal(buf.Bytes(), full) {
		t.Fatal("a trace within the limit differs from the trace without one")
	}
}

// traceEvent is one event of a written trace, as a viewer reads it.
type traceEvent struct {
	Ph   string         `json:"ph"`
	S    string         `json:"s"`
	Name string         `json:"name"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	TS   json.Number    `json:"ts"`
	Dur  json.Number    `json:"dur"`
	Args map[string]any `json:"args"`
}

func writtenEvents(t *testing.T, c *sim.Cluster) []traceEvent {
	t.Helper()
	var buf bytes.Buffer
	ok(t, c.WriteTrace(&buf))
	if est := c.TraceBytes(); est != int64(buf.Len())+1 {
		t.Errorf("TraceBytes = %d for a trace of %d bytes", est, buf.Len())
	}
	var doc struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	dec := json.NewDecoder(&buf)
	dec.UseNumber()
	ok(t, dec.Decode(&doc))
	return doc.TraceEvents
}

func micros(t *testing.T, n json.Number) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		t.Fatalf("time %q: %v", n, err)
	}
	return v
}

// TestTraceTracksReadInTimeOrder: on every track, events come in the
// order they start (spans were written in the order they ended, so a
// long transfer came after a short one that began later).
func TestTraceTracksReadInTimeOrder(t *testing.T) {
	c := runScenario(t, sim.Config{Trace: true})
	last := map[[2]int]float64{}
	n := 0
	for _, ev := range writtenEvents(t, c) {
		if ev.Ph != "X" && ev.Ph != "i" {
			continue
		}
		track, ts := [2]int{ev.PID, ev.TID}, micros(t, ev.TS)
		if prev, seen := last[track]; seen && ts < prev {
			t.Fatalf("track pid %d tid %d: %q at %v after an event at %v", ev.PID, ev.TID, ev.Name, ts, prev)
		}
		last[track] = ts
		n++
	}
	if n < 100 {
		t.Fatalf("only %d events", n)
	}
}

// TestTraceInstantsForWhatTookNoTime: a record and a met wait are instants
// on their stream's track; no operation is a slice of zero length (an
// arrival, which anchors its transfer's arrow, may be).
func TestTraceInstantsForWhatTookNoTime(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{Trace: true})
	d := c.Devices()[0]
	s := try(d.NewStream())(t)
	ev := try(d.NewEvent())(t)
	ok(t, s.Record(ev))
	ok(t, s.Wait(ev))
	ok(t, s.(*sim.Stream).Compute(2e-6, "block0 forward"))
	ok(t, s.Synchronize())
	var instants, computes []string
	for _, e := range writtenEvents(t, c) {
		switch {
		case e.Ph == "i" && e.S == "t":
			instants = append(instants, e.Name)
		case e.Ph == "X" && micros(t, e.Dur) == 0 && !strings.HasPrefix(e.Name, "arrival from"):
			t.Errorf("zero-length slice %q", e.Name)
		case e.Ph == "X":
			computes = append(computes, e.Name)
		}
	}
	if strings.Join(instants, ",") != "record,wait" || strings.Join(computes, ",") != "block0 forward" {
		t.Errorf("instants %q, slices %q; want record and wait, then the compute by its label", instants, computes)
	}
}

// TestTraceShowsMarkersFaultsAndFailures: Mark, every fault and what it
// caused are instants across the trace; a stream that fails says so on
// its track, with the error.
func TestTraceShowsMarkersFaultsAndFailures(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{Trace: true})
	ok(t, c.Inject(try(sim.ParseFault("rank 1 crash at 3us"))(t)))
	ok(t, c.Inject(try(sim.ParseFault("link gpu0-gpu1 degrade 50% at 1us"))(t)))
	c.Mark("allreduce 1MiB out-of-place")
	d := c.Devices()
	s := try(d[0].NewStream())(t)
	ok(t, s.(*sim.Stream).Compute(5e-6, "long"))
	r := try(d[1].NewStream())(t)
	ok(t, r.(*sim.Stream).Compute(5e-6, "crashes"))
	if err := r.Synchronize(); !errors.Is(err, sim.ErrCrashed) {
		t.Fatalf("rank 1: %v", err)
	}
	ok(t, s.Synchronize())
	var globals []string
	failed := false
	for _, e := range writtenEvents(t, c) {
		if e.Ph == "i" && e.S == "g" {
			globals = append(globals, e.TS.String()+" "+e.Name)
		}
		if e.Ph == "i" && e.Name == "failed" && e.PID == 1 {
			msg, _ := e.Args["error"].(string)
			failed = strings.Contains(msg, "crashed")
		}
	}
	want := "0.000000 allreduce 1MiB out-of-place,1.000000 link gpu0-gpu1 degrade 50% at 1us,3.000000 rank 1 crash at 3us"
	if strings.Join(globals, ",") != want {
		t.Errorf("global instants %q, want %q", globals, want)
	}
	if !failed {
		t.Error("rank 1's failure is not on its track")
	}
}
