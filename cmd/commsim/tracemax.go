package main

import (
	"errors"
	"fmt"
	"math"

	"github.com/spf13/pflag"

	"github.com/commsim/commsim/sim"
)

// defaultTraceMax is --trace-max's default. A trace is held in memory until
// the run ends, about as many bytes as it writes, so the cap keeps a
// --trace run within the machine: llama-70b sharded on dgx-h100x8 writes
// 141 MiB under auto and 1.2 GiB under ring (docs/train.md), and a
// 100,000-layer model on four GPUs would write 3.4 GB.
const defaultTraceMax = 1 << 30

// traceMaxFlag is --trace-max SIZE: the largest trace a run may write.
type traceMaxFlag struct {
	bytes int64
	given bool // set on the command line
}

func (f *traceMaxFlag) String() string { return formatBytes(f.bytes) }
func (f *traceMaxFlag) Type() string   { return "SIZE" }

func (f *traceMaxFlag) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil || n <= 0 {
		return fmt.Errorf("want a positive size such as 4GiB, got %q", s)
	}
	f.bytes, f.given = n, true
	return nil
}

// addTraceMaxFlag registers --trace-max beside a command's --trace.
func addTraceMaxFlag(fl *pflag.FlagSet, f *traceMaxFlag) {
	f.bytes = defaultTraceMax
	fl.Var(f, "trace-max", "refuse a --trace larger than SIZE (estimated before writing); raise it to write a larger one")
}

// checkTrace refuses, as usage errors, a --trace path that cannot be
// written (checkOutputPath) and a --trace-max with no --trace to bound.
func (f *traceMaxFlag) checkTrace(path string) error {
	if f.given && path == "" {
		return usagef("--trace-max bounds a --trace; without --trace there is nothing to bound")
	}
	return checkOutputPath("--trace", path)
}

// checkTraceSize refuses, as bad input, a trace larger than the cluster's
// Config.TraceMaxBytes, before its file is created. sofar, when not "",
// says the run is not over (after 3 of 28 sizes): the trace would be at
// least the estimate.
func checkTraceSize(c *sim.Cluster, sofar string) error {
	var tl *sim.TraceTooLargeError
	if err := c.CheckTrace(); errors.As(err, &tl) {
		size, when := formatTraceSize(tl.Estimate), "estimated"
		if sofar != "" {
			size, when = "at least "+size, when+" "+sofar
		}
		return usagef("--trace: the trace would be %s (%s), more than --trace-max %s; raise --trace-max to write it",
			size, when, formatBytes(tl.Limit))
	}
	return nil
}

// formatTraceSize writes an estimate in the unit a person would pass to
// --trace-max.
func formatTraceSize(n int64) string {
	// Rounded up, so an estimate just over the limit never reads as the
	// limit itself.
	for _, u := range []struct {
		name string
		size float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if float64(n) >= u.size {
			return fmt.Sprintf("%.2f%s", math.Ceil(float64(n)/u.size*100)/100, u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// writeTraceFile writes the cluster's Perfetto trace to path, whole or not
// at all.
func writeTraceFile(c *sim.Cluster, path string) error {
	if err := checkTraceSize(c, ""); err != nil {
		return err
	}
	if err := writeFileAtomic(path, c.WriteTrace); err != nil {
		return fmt.Errorf("--trace %s: %w", path, err)
	}
	return nil
}
