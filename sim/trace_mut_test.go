package sim_test

// Tests from a mutation run over the trace's numbering and ordering: a
// trace is the same bytes whatever order the ranks (goroutines, one a
// rank) made their streams and events and enqueued their work in.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
)

// ringStep runs, the ranks taken in order, each rank's 10 µs of compute
// on a stream of its own, then, behind it, a send to the next rank on a
// second stream, and a receive from the one before on a third, a fourth
// left idle: sixteen streams, computes that start together, sends that
// start together on links of their own, and a flow each.
func ringStep(t *testing.T, order []int) *sim.Cluster {
	t.Helper()
	c := newCluster(t, "switch:4,bw=100GB/s,lat=1us", sim.Config{Trace: true})
	d := c.Devices()
	n := len(d)
	for _, r := range order {
		compute := try(d[r].NewStream())(t)
		send := try(d[r].NewStream())(t)
		recv := try(d[r].NewStream())(t)
		try(d[r].NewStream())(t) // idle: sixteen tracks in all
		ok(t, compute.(*sim.Stream).Compute(10e-6, "forward"))
		made := try(d[r].NewEvent())(t)
		ok(t, compute.Record(made))
		ok(t, send.Wait(made))
		src := try(d[r].Alloc(hw.F32, 1024))(t)
		dst := try(d[r].Alloc(hw.F32, 1024))(t)
		ok(t, send.Send(hw.Whole(src), d[(r+1)%n], 7))
		ok(t, recv.Recv(hw.Whole(dst), d[(r-1+n)%n], 7))
	}
	ok(t, c.Run())
	return c
}

func traceBytes(t *testing.T, c *sim.Cluster) []byte {
	t.Helper()
	var buf bytes.Buffer
	ok(t, c.WriteTrace(&buf))
	return buf.Bytes()
}

// TestATraceIsTheSameWhateverOrderRanksEnqueueIn: the ranks' work made
// and enqueued in two orders is one trace: tracks and events numbered on
// their device, spans that start together taken by rank and track, flows
// numbered as written, counters of one instant by link.
func TestATraceIsTheSameWhateverOrderRanksEnqueueIn(t *testing.T) {
	want := traceBytes(t, ringStep(t, []int{0, 1, 2, 3}))
	for _, order := range [][]int{{3, 2, 1, 0}, {2, 0, 3, 1}} {
		if got := traceBytes(t, ringStep(t, order)); !bytes.Equal(got, want) {
			t.Errorf("ranks in order %v wrote another trace (%d bytes, in rank order %d)", order, len(got), len(want))
		}
	}
}

// TestTraceTracksAndEventsAreNumberedOnTheirDevice: each rank's streams
// are its tracks 0 to 3, in the order the rank made them, named so
// and listed rank by rank; each rank's first event is its event 1, though
// rank 3 made its own first.
func TestTraceTracksAndEventsAreNumberedOnTheirDevice(t *testing.T) {
	c := ringStep(t, []int{3, 2, 1, 0})
	var threads []string
	records := map[int]string{}
	lastPID := -1
	for _, e := range writtenEvents(t, c) {
		if e.Ph == "M" && e.Name == "thread_name" && e.TID >= 0 {
			name, _ := e.Args["name"].(string)
			if strings.HasSuffix(name, "network") {
				continue
			}
			threads = append(threads, fmt.Sprintf("%d/%d %s", e.PID, e.TID, name))
			if e.PID < lastPID {
				t.Errorf("rank %d's tracks listed after rank %d's", e.PID, lastPID)
			}
			lastPID = e.PID
		}
		if e.Ph == "i" && e.Name == "record" {
			records[e.PID], _ = e.Args["op"].(string)
		}
	}
	var want []string
	for r := range 4 {
		want = append(want, fmt.Sprintf("%d/0 compute stream 0", r), fmt.Sprintf("%d/1 comm stream 1", r), fmt.Sprintf("%d/2 comm stream 2", r), fmt.Sprintf("%d/3 comm stream 3", r))
		if got, w := records[r], fmt.Sprintf("record event 1 of sim:gpu%d", r); got != w {
			t.Errorf("rank %d records %q, want %q", r, got, w)
		}
	}
	slices.Sort(threads)
	if strings.Join(threads, "; ") != strings.Join(want, "; ") {
		t.Errorf("tracks %q, want %q", threads, want)
	}
}

// TestTraceFlowsAreNumberedAsWritten: the transfers' arrows are numbered
// 1, 2, ... in the order their starts are written, and every end names a
// start written before it.
func TestTraceFlowsAreNumberedAsWritten(t *testing.T) {
	var doc struct {
		TraceEvents []struct {
			Ph string `json:"ph"`
			ID int    `json:"id"`
		} `json:"traceEvents"`
	}
	ok(t, json.Unmarshal(traceBytes(t, ringStep(t, []int{3, 2, 1, 0})), &doc))
	starts, ends := 0, 0
	for _, e := range doc.TraceEvents {
		switch e.Ph {
		case "s":
			starts++
			if e.ID != starts {
				t.Errorf("flow start %d has id %d", starts, e.ID)
			}
		case "f":
			ends++
			if e.ID < 1 || e.ID > starts {
				t.Errorf("flow end %d has id %d, of no start before it", ends, e.ID)
			}
		}
	}
	if starts != 4 || ends != 4 {
		t.Errorf("%d flow starts and %d ends, want 4 of each", starts, ends)
	}
}

// TestTraceKeepsATracksInstantsInTheirOrder: forty records at one
// instant on one track are written in the order they were made: spans
// that start together on one track keep it.
func TestTraceKeepsATracksInstantsInTheirOrder(t *testing.T) {
	c := newCluster(t, "switch:2", sim.Config{Trace: true})
	d := c.Devices()[0]
	s := try(d.NewStream())(t)
	for range 40 {
		ok(t, s.Record(try(d.NewEvent())(t)))
	}
	ok(t, s.Synchronize())
	k := 0
	for _, e := range writtenEvents(t, c) {
		if e.Ph == "i" && e.Name == "record" {
			k++
			if got, want := e.Args["op"], fmt.Sprintf("record event %d of sim:gpu0", k); got != want {
				t.Fatalf("record %d written as %q, want %q", k, got, want)
			}
		}
	}
	if k != 40 {
		t.Errorf("%d records written, want 40", k)
	}
}

// TestSpansThatStartTogetherOnARankAreTakenByTrack: two computes that
// start and end together on two streams of one rank are written track by
// track, whichever was enqueued first.
func TestSpansThatStartTogetherOnARankAreTakenByTrack(t *testing.T) {
	run := func(first int) []byte {
		c := newCluster(t, "switch:2", sim.Config{Trace: true})
		d := c.Devices()[0]
		s := []hw.Stream{try(d.NewStream())(t), try(d.NewStream())(t)}
		for _, k := range []int{first, 1 - first} {
			ok(t, s[k].(*sim.Stream).Compute(5e-6, "block"))
		}
		ok(t, c.Run())
		return traceBytes(t, c)
	}
	if a, b := run(0), run(1); !bytes.Equal(a, b) {
		t.Errorf("computes enqueued in two orders wrote two traces:\n%s\n%s", a, b)
	}
}

// TestAFailureIsOnItsStreamsTrack: rank 1's only stream, made after rank
// 0's, is its track 0; its failure is an instant on that track.
func TestAFailureIsOnItsStreamsTrack(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{Trace: true})
	ok(t, c.Inject(try(sim.ParseFault("rank 1 crash at 1us"))(t)))
	d := c.Devices()
	s := try(d[0].NewStream())(t)
	ok(t, s.(*sim.Stream).Compute(5e-6, "long"))
	r := try(d[1].NewStream())(t)
	ok(t, r.(*sim.Stream).Compute(5e-6, "crashes"))
	if err := r.Synchronize(); err == nil {
		t.Fatal("rank 1 did not fail")
	}
	ok(t, s.Synchronize())
	found := false
	for _, e := range writtenEvents(t, c) {
		if e.Ph == "i" && e.Name == "failed" {
			found = true
			if e.PID != 1 || e.TID != 0 {
				t.Errorf("the failure is on pid %d tid %d, want rank 1's track 0", e.PID, e.TID)
			}
		}
	}
	if !found {
		t.Error("no failure in the trace")
	}
}

// TestAStuckStreamIsNamedAsItsTraceTrackIs: errors name a stream by its
// number on its device, as its trace track does, whatever order the ranks
// made their streams in. They named it by the cluster's count, which
// goroutines, one a rank, made differ from run to run.
func TestAStuckStreamIsNamedAsItsTraceTrackIs(t *testing.T) {
	run := func(order []int) string {
		c := newCluster(t, "switch:2", sim.Config{})
		d := c.Devices()
		streams := make([]hw.Stream, 2)
		for _, r := range order {
			streams[r] = try(d[r].NewStream())(t)
		}
		buf := try(d[1].Alloc(hw.F32, 4))(t)
		ok(t, streams[1].Recv(hw.Whole(buf), d[0], 9)) // nothing sends it
		return streams[1].Synchronize().Error()
	}
	a, b := run([]int{0, 1}), run([]int{1, 0})
	if a != b || !strings.Contains(a, "rank 1 (sim:gpu1) stream 0 blocked at op #0") {
		t.Errorf("one program, two errors, or not rank 1's stream 0:\n%s\n%s", a, b)
	}
}

// TestArrivalsAtOneInstantAreWrittenInOneOrder: three ranks send to rank 0
// at once, so their arrivals share an instant on rank 0's network track.
// The trace is the same bytes whichever rank enqueued first; the arrivals
// and their arrows had come out in the order the engine ran them.
func TestArrivalsAtOneInstantAreWrittenInOneOrder(t *testing.T) {
	trace := func(order []int) string {
		c := newCluster(t, "switch:4", sim.Config{Trace: true})
		d := c.Devices()
		streams := make([]hw.Stream, 4)
		for r := range 4 {
			streams[r] = try(d[r].NewStream())(t)
		}
		for _, r := range order {
			if r == 0 {
				for from := 1; from < 4; from++ {
					ok(t, streams[0].Recv(hw.Whole(try(d[0].Alloc(hw.F32, 1024))(t)), d[from], 7))
				}
				continue
			}
			ok(t, streams[r].Send(hw.Whole(try(d[r].Alloc(hw.F32, 1024))(t)), d[0], 7))
		}
		for _, s := range streams {
			ok(t, s.Synchronize())
		}
		var b bytes.Buffer
		ok(t, c.WriteTrace(&b))
		return b.String()
	}
	a, b := trace([]int{0, 1, 2, 3}), trace([]int{3, 2, 1, 0})
	if a != b {
		t.Errorf("one program, two traces:\n%s\n%s", a, b)
	}
	if !strings.Contains(a, "arrival from sim:gpu1") {
		t.Errorf("no arrivals in the trace:\n%s", a)
	}
}
