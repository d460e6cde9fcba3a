package sim_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/commsim/commsim/sim"
)

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
