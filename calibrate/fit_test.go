package calibrate

import (
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// problem is the fit of an all-reduce over sizes 1 KiB to 64 MiB (×4 each
// step) on base, with the times simulated on truth.
func problem(t *testing.T, base, truth string, algo string) Problem {
	t.Helper()
	bt, err := topology.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	tt, err := topology.Parse(truth)
	if err != nil {
		t.Fatal(err)
	}
	p := Problem{Topology: bt}
	for b := 1 << 10; b <= 64<<20; b *= 4 {
		plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: algo, Ranks: bt.NumGPUs(), Count: b / 4, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		p.Plans = append(p.Plans, plan)
	}
	for _, s := range simulate(t, tt, p.Plans) {
		p.MeasuredUS = append(p.MeasuredUS, s*1e6)
	}
	return p
}

// simulate times plans on topo, timing-only.
func simulate(t *testing.T, topo *topology.Topology, plans []*ops.Plan) []float64 {
	t.Helper()
	c, err := sim.NewCluster(topo, sim.Config{TimingOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exec := ops.NewExecutor(c.World())
	var r verify.Runner
	var out []float64
	for _, plan := range plans {
		res, err := r.Run(exec, c.World(), plan, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Seconds)
	}
	return out
}

func near(got, want, tol float64) bool { return math.Abs(got/want-1) <= tol }

// Times simulated on a fabric with twice the latency and half the
// bandwidth fit back to those scales, and the fitted topology reproduces
// the times it reports.
func TestFitRecoversScales(t *testing.T) {
	p := problem(t, "switch:8,bw=100GB/s,lat=1us", "switch:8,bw=50GB/s,lat=2us", "ring")
	fit, err := Fit(p)
	if err != nil {
		t.Fatal(err)
	}
	if !near(fit.LatencyScale, 2, 1e-3) || !near(fit.BandwidthScale, 0.5, 1e-3) || fit.ReduceTooSlow {
		t.Errorf("latency ×%.5f, bandwidth ×%.5f, reduce too slow %v; want ×2 and ×0.5", fit.LatencyScale, fit.BandwidthScale, fit.ReduceTooSlow)
	}
	for i, s := range fit.Seconds {
		if !near(s, p.MeasuredUS[i]*1e-6, 1e-3) {
			t.Errorf("size %d: fitted %g s, measured %g s", i, s, p.MeasuredUS[i]*1e-6)
		}
	}
	again := simulate(t, fit.Topology, p.Plans)
	for i := range again {
		if !near(again[i], fit.Seconds[i], 1e-12) {
			t.Errorf("size %d: %g s on the fitted topology, the fit says %g s", i, again[i], fit.Seconds[i])
		}
	}
	if !strings.HasSuffix(fit.Topology.Name, "-calibrated") || fit.Simulations < 5 {
		t.Errorf("topology %q after %d simulations", fit.Topology.Name, fit.Simulations)
	}
	for _, l := range fit.Topology.Links { // rounded to 4 significant digits
		if l.BW != round4(l.BW) || l.Latency != round4(l.Latency) {
			t.Errorf("link %v not rounded", l)
		}
	}
}

// On a fabric whose links have no latency, the latency scale is the links'
// latency in µs.
func TestFitZeroLatencyLinks(t *testing.T) {
	p := problem(t, "switch:4,bw=100GB/s,lat=0s", "switch:4,bw=100GB/s,lat=3us", "rhd")
	fit, err := Fit(p)
	if err != nil {
		t.Fatal(err)
	}
	if !near(fit.LatencyScale, 3, 1e-3) || !near(fit.BandwidthScale, 1, 1e-3) {
		t.Errorf("latency ×%.5f, bandwidth ×%.5f; want 3 (µs) and ×1", fit.LatencyScale, fit.BandwidthScale)
	}
	for _, l := range fit.Topology.Links {
		if !near(l.Latency, 3e-6, 1e-3) {
			t.Errorf("link %v: latency %g s, want 3 µs", l, l.Latency)
		}
	}
}

func TestFitRefusesBadProblems(t *testing.T) {
	p := problem(t, "switch:2", "switch:2", "ring")
	for name, bad := range map[string]Problem{
		"one size":      {Topology: p.Topology, Plans: p.Plans[:1], MeasuredUS: p.MeasuredUS[:1]},
		"uneven":        {Topology: p.Topology, Plans: p.Plans, MeasuredUS: p.MeasuredUS[1:]},
		"time 0":        {Topology: p.Topology, Plans: p.Plans[:2], MeasuredUS: []float64{1, 0}},
		"infinite time": {Topology: p.Topology, Plans: p.Plans[:2], MeasuredUS: []float64{math.Inf(1), 1}},
		"no topology":   {Plans: p.Plans, MeasuredUS: p.MeasuredUS},
		"runs -1":       {Topology: p.Topology, Plans: p.Plans, MeasuredUS: p.MeasuredUS, Runs: -1},
	} {
		if _, err := Fit(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Fit's start, the α-β-γ least squares, lands on the scales where the
// times are that model: a ring's latency and bandwidth terms on a fabric
// whose GPUs reduce for free.
func TestFitStartsAtTheLinearFit(t *testing.T) {
	p := problem(t, "switch:8,bw=100GB/s,lat=1us", "switch:8,bw=50GB/s,lat=2us", "ring")
	f := &fitter{Problem: p}
	x, tooSlow, err := f.start()
	if err != nil {
		t.Fatal(err)
	}
	if sa, sb := math.Exp(x[0]), math.Exp(x[1]); !near(sa, 2, 0.02) || !near(sb, 0.5, 0.02) || tooSlow {
		t.Errorf("start at latency ×%.4f, bandwidth ×%.4f (reduce too slow %v); want ×2 and ×0.5", sa, sb, tooSlow)
	}
}

// Measured times shorter than the GPUs' reductions alone take are
// reported (Result.ReduceTooSlow): no link scale explains them.
func TestFitReportsReductionsTooSlow(t *testing.T) {
	const fabric = "switch:8,bw=100GB/s,lat=1us,reduce=5GB/s"
	p := problem(t, fabric, fabric, "ring")
	for i := range p.MeasuredUS {
		p.MeasuredUS[i] /= 10
	}
	fit, err := Fit(p)
	if err != nil {
		t.Fatal(err)
	}
	if !fit.ReduceTooSlow {
		t.Errorf("times a tenth of the simulated ones with slow reductions: ReduceTooSlow false")
	}
}
