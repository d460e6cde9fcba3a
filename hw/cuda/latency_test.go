//go:build linux || darwin

package cuda

import (
	"testing"

	"github.com/commsim/commsim/hw"
)

// TestVirtualMessageLatency logs what a small message between two virtual
// ranks of one GPU costs: a chain of ping-pongs of one f32, timed by GPU
// events, over the messages in it. That is the latency h200-virtual's
// links stand for (--sim-topo). Beside it, the same chain of 4-byte copies
// on one stream: what the GPU itself takes per operation, so the rest is
// the host's path from one worker to the next. It never asserts on time;
// on the fake driver it checks that the chains run and time.
func TestVirtualMessageLatency(t *testing.T) { onDrivers(t, virtualMessageLatency) }

func virtualMessageLatency(t *testing.T, e env) {
	if e.real && testing.Short() {
		t.Skip("latency measurement skipped in -short mode")
	}
	_, devs := e.open(t, 2, Virtual)
	s0, s1 := stream(t, devs[0]), stream(t, devs[1])
	a, b := hw.Whole(alloc(t, devs[0], hw.F32, 1)), hw.Whole(alloc(t, devs[1], hw.F32, 1))
	c := hw.Whole(alloc(t, devs[0], hw.F32, 1))
	start, end := event(t, devs[0]), event(t, devs[0])
	const rounds = 200
	// One warm-up run, then the fastest of three.
	both := []hw.Stream{s0, s1}
	pingPong := fastest(t, 4, s0, start, end, both, func(run int) error {
		for k := range rounds {
			tag := uint64(run*rounds+k) * 2
			if err := s0.Send(a, devs[1], tag); err != nil {
				return err
			}
			if err := s1.Recv(b, devs[0], tag); err != nil {
				return err
			}
			if err := s1.Send(b, devs[0], tag+1); err != nil {
				return err
			}
			if err := s0.Recv(a, devs[1], tag+1); err != nil {
				return err
			}
		}
		return nil
	})
	copies := fastest(t, 4, s0, start, end, both, func(int) error {
		for range 2 * rounds {
			if err := s0.Copy(c, a); err != nil {
				return err
			}
		}
		return nil
	})
	perMessage, perCopy := pingPong/(2*rounds), copies/(2*rounds)
	if !(perMessage > 0) || !(perCopy > 0) {
		t.Fatalf("a message %v s, a copy %v s: the events did not time the chains", perMessage, perCopy)
	}
	if !e.real {
		return
	}
	t.Logf("message between virtual ranks: %.2f us (%d ping-pongs of 4 bytes, by GPU events)", perMessage*1e6, rounds)
	t.Logf("4-byte copy on one stream:     %.2f us (the GPU's own part)", perCopy*1e6)
	recordFigure(t, "latency", map[string]any{"what": "virtual message", "bytes": 4, "us": perMessage * 1e6})
	recordFigure(t, "latency", map[string]any{"what": "copy on one stream", "bytes": 4, "us": perCopy * 1e6})
}
