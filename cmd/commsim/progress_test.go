package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestHeartbeatSaysHowLongSinceTheLastSize: the bar's description names
// the time since a size last finished once it passes 2 s, so a size that
// simulates for minutes does not look like a hang, and says nothing more
// before then.
func TestHeartbeatSaysHowLongSinceTheLastSize(t *testing.T) {
	for _, tc := range []struct {
		since time.Duration
		want  string
	}{
		{0, "sizes"},
		{1900 * time.Millisecond, "sizes"},
		{2 * time.Second, "sizes (none finished for 2s)"},
		{65*time.Second + 400*time.Millisecond, "sizes (none finished for 1m5s)"},
	} {
		if got := heartbeat("sizes", tc.since); got != tc.want {
			t.Errorf("%v since: %q, want %q", tc.since, got, tc.want)
		}
	}
}

// TestNoProgressOffATerminal: off a terminal there is no bar, and a nil
// bar's methods do nothing (no heartbeat goroutine to stop).
func TestNoProgressOffATerminal(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, 3)
	if p != nil {
		t.Fatal("a bar on a buffer")
	}
	p.step()
	p.stop()
	p.done()
	if out.Len() != 0 {
		t.Errorf("wrote %q", out.String())
	}
}

// TestHeartbeatRunsBesideTheSweep: the heartbeat redescribes the bar
// while units finish on other goroutines (the race detector watches),
// and stop and done, in either order and more than once, end it.
func TestHeartbeatRunsBesideTheSweep(t *testing.T) {
	var out syncBuffer
	p := startProgress(&out, 4, time.Millisecond)
	done := make(chan struct{})
	for range 2 {
		go func() {
			for range 2 {
				p.step()
				time.Sleep(2 * time.Millisecond)
			}
			done <- struct{}{}
		}()
	}
	<-done
	<-done
	p.stop()
	p.done()
	p.stop()
	if !bytes.Contains(out.Bytes(), []byte("sizes")) {
		t.Errorf("the bar wrote %q", out.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the bar's writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (s *syncBuffer) String() string { return string(s.Bytes()) }

// TestAStoppedBarEndsItsLine: a sweep that fails leaves its bar as it
// stands and ends the line, so the error starts a line of its own; a bar
// done is cleared, and its line ended once, whatever calls follow.
func TestAStoppedBarEndsItsLine(t *testing.T) {
	var out syncBuffer
	p := startProgress(&out, 4, time.Hour)
	p.step()
	p.stop()
	p.stop()
	p.done()
	if got := out.String(); !strings.HasSuffix(got, "\n") || strings.Count(got, "\n") != 1 || !strings.Contains(got, "25%") {
		t.Errorf("a stopped bar wrote %q; want it as it stood, then one line end", got)
	}
	var done syncBuffer
	p = startProgress(&done, 4, time.Hour)
	p.step()
	p.done()
	p.stop()
	if got := done.String(); strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") {
		t.Errorf("a bar done wrote %q; want one line end", got)
	}
}
