// Package calibrate fits the simulator to measured collective times: it
// reads nccl-tests logs (ParseLog) and makes one of two fits.
//
// FitNCCL fits the machine NCCL runs on. Each size runs as NCCL's tuner
// chooses it (package nccl), and the fit finds how the machine departs
// from NCCL's model: the launch latency, the per-hop latency, the channel
// speed of each protocol the sizes use (nccl.Machine) and, on several
// nodes, the bandwidth of the network's links. NCCL's tuner reads the
// fabric as given, so the fit changes what runs, never what NCCL chooses
// (NCCL sees a NIC's line rate, whatever it delivers). It is a
// Gauss-Newton fit of the factors' logarithms from all ones, each within
// e^±3, with gonum/optimize (see ncclopt.go for why not Nelder-Mead). A
// problem can hold sizes out of the fit (NCCLProblem.HoldOut: every
// other one), which FitNCCL then only predicts: their error says how the
// fitted machine does on sizes it has not seen. Where the log says what
// NCCL ran (Log.NCCLRan, from NCCL's tuning lines), a problem can run
// that instead of the tuner's choice (NCCLProblem.Ran).
//
// Fit finds two numbers for any plans: sα multiplies every link's
// latency, sβ every link's effective bandwidth, so that the simulator
// reproduces the log. Scaling all links alike keeps the ratios between
// link classes (NVLink, PCIe, NIC) that the topology states: the times of
// one collective cannot tell the classes apart. Bandwidth and efficiency
// are one degree of freedom for the simulator (it uses BW×Efficiency), so
// the fit finds one effective-bandwidth scale; where every link has
// latency 0, sα sets each link's latency to sα×1µs instead. A linear
// α-β-γ decomposition from three simulations gives the start, and
// Nelder-Mead on (ln sα, ln sβ) refines it on the simulator itself.
//
// Both fit the simulated (timing-only) time to the measured out-of-place
// time by relative error: Fit minimises the sum of its squares, FitNCCL a
// robust sum (squares while small, growing ever more slowly past 5%:
// cauchy).
// Which collective a log's size stands for (nccl-tests' meaning of size,
// verify.SpecForSize) is the caller's choice: Fit takes the plans,
// FitNCCL the specs.
package calibrate

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/gonum/optimize"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// logScaleLimit keeps the scales within e^±13.8 ≈ 10^±6.
const logScaleLimit = 13.8

// Problem is a fit to make.
type Problem struct {
	// Topology is the fabric the log was measured on, before the fit.
	Topology *topology.Topology
	// Plans[i] is the collective of the log's i-th size, as the simulator
	// is to run it; MeasuredUS[i] its measured out-of-place time in µs.
	// The fit needs at least two sizes.
	Plans      []*ops.Plan
	MeasuredUS []float64
	// Runs is how many runs of each size the log timed back to back, as
	// the simulation is to time them (Log.TimedRuns); 0 or 1 for one.
	Runs int
}

// Result is a fitted model.
type Result struct {
	LatencyScale, BandwidthScale float64
	// Topology is Problem.Topology with both scales applied, named
	// NAME-calibrated, its link values rounded to 4 significant digits so
	// that it writes out short and reads back the same.
	Topology *topology.Topology
	// Seconds[i] is Plans[i]'s simulated time on Topology.
	Seconds []float64
	// Simulations counts the simulations of every size, the one on
	// Topology included.
	Simulations int
	// ReduceTooSlow reports a size where the GPUs' reductions alone (the
	// topology's reduce bandwidth) take longer than the measured time: no
	// link scale explains it.
	ReduceTooSlow bool
}

// fitter simulates the problem's sizes on scaled copies of its topology.
type fitter struct {
	Problem
	zeroLat bool // every link has latency 0: sα is then in µs
	round   bool // 4 significant digits, for Result.Topology
	evals   int
	err     error
}

// Fit finds the scales that bring the simulated times of p's plans
// closest to the measured ones (least squared relative error).
func Fit(p Problem) (*Result, error) {
	switch {
	case p.Topology == nil:
		return nil, errors.New("calibrate: no topology")
	case p.Runs < 0:
		return nil, fmt.Errorf("calibrate: %d runs a size, want 0 or 1 for one, or more", p.Runs)
	case len(p.Plans) != len(p.MeasuredUS):
		return nil, fmt.Errorf("calibrate: %d plans and %d measured times", len(p.Plans), len(p.MeasuredUS))
	case len(p.Plans) < 2:
		return nil, fmt.Errorf("calibrate: %d sizes; the fit needs at least 2", len(p.Plans))
	}
	for i, t := range p.MeasuredUS {
		if !(t > 0) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("calibrate: size %d: measured time %g µs, want a time > 0", i, t)
		}
	}
	f := &fitter{Problem: p, zeroLat: !slices.ContainsFunc(p.Topology.Links, func(l topology.Link) bool { return l.Latency > 0 })}
	x0, tooSlow, err := f.start()
	if err != nil {
		return nil, err
	}
	res, err := optimize.Minimize(optimize.Problem{Func: f.objective}, x0, &optimize.Settings{FuncEvaluations: 300,
		Converger: &optimize.FunctionConverge{Absolute: 1e-12, Relative: 1e-7, Iterations: 8}}, &optimize.NelderMead{SimplexSize: 0.05})
	if err = cmp.Or(f.err, err); err != nil {
		return nil, fmt.Errorf("calibrate: fit: %w", err)
	}
	sa, sb := math.Exp(res.X[0]), math.Exp(res.X[1])
	f.round = true
	ts, fitted, err := f.times(sa, sb)
	if err != nil {
		return nil, err
	}
	return &Result{LatencyScale: sa, BandwidthScale: sb, Topology: fitted, Seconds: ts, Simulations: f.evals, ReduceTooSlow: tooSlow}, nil
}

func round4(v float64) float64 {
	r, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 4, 64), 64)
	return r
}

// scaled returns the topology with latency ×sa and bandwidth ×sb.
func (f *fitter) scaled(sa, sb float64) (*topology.Topology, error) {
	base := f.Topology
	links := slices.Clone(base.Links)
	for i := range links {
		l := &links[i]
		l.Latency, l.BW = l.Latency*sa, l.BW*sb
		if f.zeroLat {
			l.Latency = sa * 1e-6
		}
		if f.round {
			l.Latency, l.BW = round4(l.Latency), round4(l.BW)
		}
	}
	t, err := topology.New(base.Name+"-calibrated", base.Nodes, links)
	if err == nil {
		t.HostCPU, t.NICPorts = base.HostCPU, base.NICPorts
	}
	return t, err
}

// times simulates every size at scales (sa, sb), in seconds, sharing the
// sizes among one cluster per core.
func (f *fitter) times(sa, sb float64) ([]float64, *topology.Topology, error) {
	t, err := f.scaled(sa, sb)
	if err != nil {
		return nil, nil, err
	}
	f.evals++
	out, err := Simulate(t, sim.Config{TimingOnly: true}, f.Runs, len(f.Plans), func(i int) (*ops.Plan, error) { return f.Plans[i], nil }, nil)
	if err != nil {
		return nil, nil, err
	}
	for i, s := range out {
		// Through microseconds, as bench reports a time: the fit has
		// always seen bench's figures, to the last bit.
		us := s * 1e6
		out[i] = us * 1e-6
	}
	return out, t, nil
}

// objective is the loss at scales (e^x0, e^x1), with a penalty outside the
// box where links stay valid.
func (f *fitter) objective(x []float64) float64 {
	hiA := logScaleLimit
	for _, l := range f.Topology.Links {
		hiA = min(hiA, math.Log(topology.MaxLatency/max(l.Latency, 1e-6)))
	}
	if out := max(x[0]-hiA, -logScaleLimit-x[0], math.Abs(x[1])-logScaleLimit); out > 0 {
		return 1e6 * (1 + out)
	}
	ts, _, err := f.times(math.Exp(x[0]), math.Exp(x[1]))
	if err != nil {
		f.err = cmp.Or(f.err, err)
		return 1e6
	}
	sum := 0.0
	for i, t := range ts {
		r := t/(f.MeasuredUS[i]*1e-6) - 1
		sum += r * r
	}
	return sum
}

// start fits T = sα·A + B/sβ + G by linear least squares in relative error,
// with A (latency), B (bandwidth) and G (reduction) from three simulations.
// tooSlow reports a size where G alone exceeds the measured time.
func (f *fitter) start() (x []float64, tooSlow bool, err error) {
	var t [3][]float64
	for k, sc := range [3][2]float64{{1, 1}, {2, 1}, {1, 2}} {
		if t[k], _, err = f.times(sc[0], sc[1]); err != nil {
			return nil, false, err
		}
	}
	var aa, ab, bb, am, bm float64
	for i, us := range f.MeasuredUS {
		m := us * 1e-6
		A, B := (t[1][i]-t[0][i])/m, 2*(t[0][i]-t[2][i])/m
		g := max(t[0][i]/m-A-B, 0)
		tooSlow = tooSlow || g > 1
		aa, ab, bb, am, bm = aa+A*A, ab+A*B, bb+B*B, am+A*(1-g), bm+B*(1-g)
	}
	a, u := 1.0, 1.0 // sα and 1/sβ
	if det := aa*bb - ab*ab; det > 1e-12*aa*bb {
		a, u = (am*bb-ab*bm)/det, (aa*bm-ab*am)/det
	}
	const tiny = 1e-6
	if a <= tiny && bb > 0 {
		a, u = tiny, (bm-tiny*ab)/bb
	}
	if u <= tiny && aa > 0 {
		a, u = (am-tiny*ab)/aa, tiny
	}
	a, u = min(max(a, tiny), 1/tiny), min(max(u, tiny), 1/tiny)
	return []float64{math.Log(a), -math.Log(u)}, tooSlow, nil
}
