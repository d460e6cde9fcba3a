package main

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress is a progress bar of a sweep on stderr. newProgress makes one
// only when stderr is a terminal; the methods of a nil progress do nothing.
type progress struct {
	bar    *progressbar.ProgressBar
	stderr io.Writer
}

func newProgress(stderr io.Writer, n int) *progress {
	f, ok := stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) || n < 2 {
		return nil
	}
	return &progress{progressbar.NewOptions(n, progressbar.OptionSetWriter(stderr), progressbar.OptionSetDescription("sizes"),
		progressbar.OptionClearOnFinish()), stderr}
}

// step marks one more unit done.
func (p *progress) step() {
	if p != nil {
		_ = p.bar.Add(1)
	}
}

// done clears the bar.
func (p *progress) done() {
	if p != nil {
		_ = p.bar.Finish()
		fmt.Fprintln(p.stderr)
	}
}
