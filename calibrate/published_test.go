package calibrate_test

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/fidelity"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

var (
	published     = flag.Bool("published", false, "fit NCCL's machine to every published log in the targets and report the held-out errors (minutes)")
	publishedOnly = flag.String("published-only", "", "with -published: only the logs whose file name contains this (the runs found since, held_out in the mapping file, only so)")
)

// heldOutTarget is issue #16's: fitted on half the sizes, the median
// |error| on the other half.
const heldOutTarget = 0.05

// publishedProblem is the fit of a published log on its fabric, every
// size as fidelity.Check simulates it (nccl-tests' meaning of size, the
// log's element type, sizes of 0 elements left out, NCCL's tuner in the
// run's environment).
func publishedProblem(t *testing.T, l *fidelity.PublishedLog) calibrate.NCCLProblem {
	t.Helper()
	topo, err := topology.Resolve(l.Topo)
	if err != nil {
		t.Fatalf("%s: %v", l.File, err)
	}
	lg, cfg, err := l.Parse()
	if err != nil {
		t.Fatalf("%s: %v", l.File, err)
	}
	dt, ok := lg.DType()
	if !ok {
		dt = hw.F32
	}
	p := calibrate.NCCLProblem{Topology: topo, Options: cfg.NCCL}
	for _, s := range lg.Samples {
		spec, _ := verify.SpecForSize(ops.Spec{Op: cfg.Op, Algo: "nccl", Ranks: topo.NumGPUs(), DType: dt, Redop: hw.Sum}, s.Bytes)
		if s.Bytes <= 0 || spec.Count == 0 {
			continue
		}
		p.Specs, p.MeasuredUS = append(p.Specs, spec), append(p.MeasuredUS, s.TimeUS)
	}
	return p
}

// TestPublishedHeldOut fits NCCL's machine to every published log in the
// targets (fidelity's mapping file), on all its sizes and on every other
// one, and reports the fitted factors, the in-sample error and the error
// on the sizes held out, against issue #16's target of a held-out median
// within 5%. It measures, it does not judge: run it with
//
//	go test ./calibrate -run TestPublishedHeldOut -published -v -timeout 2h
func TestPublishedHeldOut(t *testing.T) {
	if !*published {
		t.Skip("run with -published to fit the published logs (minutes)")
	}
	cat, err := fidelity.Published()
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| log | sizes | fitted factors (all sizes) | in-sample median / max | held-out median / max | ≤ 5%% |\n|---|---|---|---|---|---|\n")
	for i := range cat.Logs {
		l := &cat.Logs[i]
		// The runs found since are fitted when -published-only names them.
		if l.Exclude != "" || (l.HeldOut != "" && *publishedOnly == "") || !strings.Contains(l.File, *publishedOnly) {
			continue
		}
		if _, err := topology.Resolve(l.Preset()); err != nil {
			t.Logf("%s: preset missing (%v); not fitted", l.File, err)
			continue
		}
		p := publishedProblem(t, l)
		full, err := calibrate.FitNCCL(p)
		if err != nil {
			t.Errorf("%s: %v", l.File, err)
			continue
		}
		half, err := calibrate.FitNCCL(p.HoldOut())
		if err != nil {
			t.Errorf("%s: held out: %v", l.File, err)
			continue
		}
		factors := full.Describe()
		if len(full.Undetermined) > 0 {
			factors += fmt.Sprintf(" (undetermined: %v)", full.Undetermined)
		}
		if len(full.AtBound) > 0 {
			factors += fmt.Sprintf(" (at a bound: %v)", full.AtBound)
		}
		ok := "yes"
		if half.HeldOut.Median > heldOutTarget {
			ok = "no"
		}
		fmt.Fprintf(&table, "| %s | %d | %s | %.1f%% / %.1f%% | %.1f%% / %.1f%% | %s |\n", l.File, len(p.Specs), factors,
			100*full.InSample.Median, 100*full.InSample.Max, 100*half.HeldOut.Median, 100*half.HeldOut.Max, ok)
		var rows strings.Builder
		for k := range p.Specs {
			held := "(fitted)"
			if !half.Fitted[k] {
				held = fmt.Sprintf("%+.2f%%", 100*half.Errors[k])
			}
			fmt.Fprintf(&rows, "%3d %12.2f us  fit %12.2f us %+7.2f%%  held-out %9s  %s\n", k, p.MeasuredUS[k], full.Seconds[k]*1e6, 100*full.Errors[k], held, full.Labels[k])
		}
		t.Logf("%s: %s (%d simulations); held-out fit: %s (%d simulations)\n%s", l.File, factors, full.Simulations, half.Describe(), half.Simulations, rows.String())
	}
	t.Logf("NCCL's machine fitted to the published logs in the targets:\n%s", table.String())
}
