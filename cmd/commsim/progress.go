package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress is a progress bar of a sweep on stderr. newProgress makes one
// only when stderr is a terminal; the methods of a nil progress do nothing.
//
// A size can take minutes to simulate (a million flows sharing a ring's
// links), and a bar that does not move looks like a hang: once a second
// the bar says how long it has been since a unit last finished (or the
// bar began).
type progress struct {
	bar    *progressbar.ProgressBar
	units  string // what the bar counts, "sizes" where not said
	stderr io.Writer
	mu     sync.Mutex
	last   time.Time // when a unit last finished, or the bar began
	quit   chan struct{}
	once   sync.Once
	beats  sync.WaitGroup
	ended  bool // the bar's line ended: cleared by done, or left by stop
}

func newProgress(stderr io.Writer, n int) *progress {
	return newProgressOf(stderr, n, "sizes")
}

// newProgressOf is newProgress of n units of another kind ("layer
// passes").
func newProgressOf(stderr io.Writer, n int, units string) *progress {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) || n < 1 {
		return nil
	}
	return startProgressOf(stderr, n, units, time.Second)
}

// startProgress starts a bar of n sizes on w, redescribed every period.
func startProgress(w io.Writer, n int, every time.Duration) *progress {
	return startProgressOf(w, n, "sizes", every)
}

// startProgressOf starts a bar of n units on w, redescribed every period.
func startProgressOf(w io.Writer, n int, units string, every time.Duration) *progress {
	p := &progress{bar: progressbar.NewOptions(n, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(heartbeat(units, 0)),
		progressbar.OptionClearOnFinish()), units: units, stderr: w, last: time.Now(), quit: make(chan struct{})}
	p.beats.Add(1)
	go p.beat(every)
	return p
}

// beat redescribes the bar every period until stop.
func (p *progress) beat(every time.Duration) {
	defer p.beats.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-p.quit:
			return
		case now := <-tick.C:
			p.mu.Lock()
			since := now.Sub(p.last)
			p.mu.Unlock()
			p.bar.Describe(heartbeat(p.units, since))
		}
	}
}

// heartbeat is the bar's description since the last unit finished.
func heartbeat(units string, since time.Duration) string {
	if since < 2*time.Second {
		return units
	}
	return fmt.Sprintf("%s (none finished for %s)", units, since.Round(time.Second))
}

// step marks one more unit done.
func (p *progress) step() {
	if p != nil {
		p.mu.Lock()
		p.last = time.Now()
		p.mu.Unlock()
		_ = p.bar.Add(1)
	}
}

// stop ends the heartbeat and, unless done cleared the bar, ends the
// bar's line as it stands, so that what follows (an error) starts a line
// of its own; done and a deferred stop may both call it, in either order.
func (p *progress) stop() {
	if p != nil {
		p.halt()
		if !p.ended {
			p.ended = true
			fmt.Fprintln(p.stderr)
		}
	}
}

// done stops the heartbeat and clears the bar.
func (p *progress) done() {
	if p != nil {
		p.halt()
		if !p.ended {
			p.ended = true
			_ = p.bar.Finish()
			fmt.Fprintln(p.stderr)
		}
	}
}

// halt ends the heartbeat.
func (p *progress) halt() {
	p.once.Do(func() { close(p.quit) })
	p.beats.Wait()
}
