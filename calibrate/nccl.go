package calibrate

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// NCCLProblem is a fit of the machine NCCL runs on to a log: the sizes,
// as NCCL's tuner chooses and the simulator runs each (package nccl), and
// their measured times.
type NCCLProblem struct {
	// Topology is the fabric the log was measured on, before the fit.
	// NCCL's tuner reads it as it stands: the fit changes what runs, never
	// what NCCL chooses.
	Topology *topology.Topology
	// Options is NCCL's environment (version, algorithms, protocols,
	// channels). Its Machine's factors are ignored: they are what the fit
	// finds. Its channel rate (ChannelGBps, NoChannelRate), which the fit
	// does not find, holds throughout it, and the result keeps it.
	Options nccl.Options
	// Specs[i] is the collective of the log's i-th size, in nccl-tests'
	// meaning of size (verify.SpecForSize); MeasuredUS[i] its measured
	// out-of-place time in µs.
	Specs      []ops.Spec
	MeasuredUS []float64
	// Runs is how many runs of each size the log timed back to back, as
	// the simulation is to time them (Log.TimedRuns); 0 or 1 for one.
	Runs int
	// Fit, when not nil, marks the sizes the fit uses; the others are only
	// predicted (held out). nil fits every size.
	Fit []bool
	// Ran, when not nil, says what NCCL ran at each size where its log
	// says so (Log.NCCLRan; nil elsewhere): the fit runs that (Ran.Tuner)
	// instead of NCCL's tuner's choice, so that it fits the machine, not
	// the tuner's mistakes.
	Ran []*Ran
	// FloorUS is the least time a size takes, in µs: the host's launches
	// where each thread of the run drove several GPUs
	// (nccl.ThreadFloorUS(Log.GPUsPerThread)); 0 for none. An iteration
	// takes the longer of the host's part and the GPUs', so a size
	// measured at the floor (within hostBoundBy) says nothing of the
	// machine and is not fitted, and one measured above it is the GPUs'
	// time, fitted as such; every size is predicted held to the floor.
	FloorUS float64
}

// tunerAt is what runs size i: t, or t running what NCCL ran there.
func (p NCCLProblem) tunerAt(t *nccl.Tuner, i int) (*nccl.Tuner, error) {
	if p.Ran == nil || p.Ran[i] == nil {
		return t, nil
	}
	forced, err := p.Ran[i].Tuner(t, p.Specs[i])
	if err != nil {
		return nil, fmt.Errorf("NCCL ran %s here: %w", p.Ran[i], err)
	}
	return forced, nil
}

// HoldOut returns p fitted on every other size only, the first, the
// third and so on (even indices, smallest first when the log is sorted),
// and the others held out for FitNCCL to predict.
func (p NCCLProblem) HoldOut() NCCLProblem {
	p.Fit = make([]bool, len(p.Specs))
	for i := range p.Fit {
		p.Fit[i] = i%2 == 0
	}
	return p
}

// Param is one number FitNCCL fits: a factor of nccl.Machine, or the
// scale of the network's bandwidth.
type Param uint8

const (
	// Launch is nccl.Machine.Launch: the base latency a collective pays
	// once.
	Launch Param = iota
	// Hop is nccl.Machine.Hop: the latency of every hop.
	Hop
	// BandwidthLL, BandwidthLL128 and BandwidthSimple are
	// nccl.Machine.Bandwidth: a channel's speed with each protocol. Only
	// the protocols NCCL chooses for the fitted sizes are fitted.
	BandwidthLL
	BandwidthLL128
	BandwidthSimple
	// NIC scales the bandwidth of the network's links (those whose
	// topology.EdgeClass is ClassNet), on fabrics of several nodes: what
	// the NICs deliver, where NCCL's tuner still sees their line rate.
	NIC
	numParams
)

var paramNames = [numParams]string{"launch", "hop", "LL bandwidth", "LL128 bandwidth", "Simple bandwidth", "NIC bandwidth"}

func (p Param) String() string {
	if p < numParams {
		return paramNames[p]
	}
	return fmt.Sprintf("Param(%d)", uint8(p))
}

// bandwidthParam is the Param of a protocol's channel speed.
func bandwidthParam(p ops.Protocol) (Param, bool) {
	switch p {
	case ops.ProtoLL:
		return BandwidthLL, true
	case ops.ProtoLL128:
		return BandwidthLL128, true
	case ops.ProtoSimple:
		return BandwidthSimple, true
	}
	return 0, false
}

// hostBoundBy is how close to NCCLProblem.FloorUS a measured time is taken
// to be the host's, not the machine's: within 15%. The published -g 8 run
// the floor comes from holds its sizes up to 256 KiB within 12% of it
// (34.8-39.2 µs), and fitted as the GPUs' time they would make its
// launch ×5.7.
const hostBoundBy = 1.15

// ErrTooFewSizes is returned by FitNCCL when a problem has fewer sizes to
// fit than parameters: at least as many as there are parameters are
// needed, and a few more to say anything of the fit.
var ErrTooFewSizes = errors.New("too few sizes to fit")

// ncclLogLimit bounds each parameter to e^±3 (×0.05 to ×20) of NCCL's
// model: a machine further from it is a wrong fabric, not a correction.
const ncclLogLimit = 3

// ErrorSummary is the absolute relative errors of a set of sizes.
type ErrorSummary struct {
	Sizes       int
	Median, Max float64
	// MaxIndex is the size (index into the problem's sizes) of Max; -1
	// when Sizes is 0.
	MaxIndex int
}

// NCCLResult is a fitted NCCL machine and how well it predicts the log.
type NCCLResult struct {
	// Machine is the fitted correction with every factor set: 1 where a
	// factor is not fitted (a protocol no fitted size uses). The factors
	// are rounded to 4 significant digits, as Seconds uses them.
	Machine nccl.Machine
	// NICScale multiplies the bandwidth of the network's links, 1 on one
	// node (rounded as Machine).
	NICScale float64
	// Params are the parameters fitted, in Param order.
	Params []Param
	// Undetermined are the parameters of Params that no fitted size's
	// time depends on where the fit ended (the NIC where it never limits,
	// a protocol's speed where the fabric's links set the pace): other
	// values fit the log alike. One the fit never moved stays at 1.
	Undetermined []Param
	// AtBound are the parameters of Params that ended at a bound of the
	// fit (×0.05 or ×20, ncclLogLimit), the log pulling them further: no
	// machine near NCCL's model explains the log there, and such a
	// factor reads as "at most" or "at least", not as a measurement.
	AtBound []Param
	// Topology is Problem.Topology with NICScale applied, named
	// NAME-calibrated, its network links rounded to 4 significant digits
	// (the others as they were): with Machine, it reproduces Seconds.
	Topology *topology.Topology
	// Per size, fitted or held out: NCCL's choice (on Problem.Topology,
	// which Machine and NICScale do not change; what NCCL ran where
	// Problem.Ran says), the plan's label
	// (nccl.Label), its simulated time with Machine on Topology, and the
	// relative error (simulated − measured) / measured.
	Choices []nccl.Choice
	Labels  []string
	Seconds []float64
	Errors  []float64
	// HostBound marks the sizes held at Problem.FloorUS.
	HostBound []bool
	// Fitted marks the sizes the problem gives the fit (all but those
	// NCCLProblem.Fit holds out); of them, those measured at
	// NCCLProblem.FloorUS move no factor.
	Fitted []bool
	// InSample sums up the errors of the fitted sizes, HeldOut those of
	// the others (Sizes 0 when none is held out).
	InSample, HeldOut ErrorSummary
	// Simulations counts the simulations of the fitted sizes, each a run
	// of all of them, and the final run of every size.
	Simulations int
}

// Value is parameter q's fitted factor (1 where not fitted).
func (r *NCCLResult) Value(q Param) float64 {
	switch q {
	case Launch:
		return r.Machine.Launch
	case Hop:
		return r.Machine.Hop
	case BandwidthLL, BandwidthLL128, BandwidthSimple:
		return r.Machine.Bandwidth[q-BandwidthLL]
	case NIC:
		return r.NICScale
	}
	return 0
}

// Describe names the fitted factors in a line: "launch ×1.7, hop ×0.6,
// Simple bandwidth ×0.8, NIC bandwidth ×0.5".
func (r *NCCLResult) Describe() string {
	parts := make([]string, len(r.Params))
	for i, q := range r.Params {
		parts[i] = fmt.Sprintf("%s ×%.4g", q, r.Value(q))
	}
	return strings.Join(parts, ", ")
}

// ncclFitter simulates the problem's sizes with a machine.
type ncclFitter struct {
	NCCLProblem
	tuner    *nccl.Tuner // on the fabric as given: NCCL's view
	choices  []nccl.Choice
	fit      []int   // the sizes fitted
	atFloor  int     // the sizes to fit left out: measured at the floor
	params   []Param // what x holds, in order
	netLinks []int   // the links NIC scales
	evals    int
	err      error
	recent   []*point // the last points simulated, oldest first
}

// FitNCCL finds the nccl.Machine (launch and hop latency, each used
// protocol's channel speed) and, on several nodes, the network's
// bandwidth that bring the simulated times of p's fitted sizes closest to
// the measured ones (least relative error, robustly: cauchy), then
// predicts every size with them. The fit runs Gauss-Newton on the logarithms of the
// factors from NCCL's model as it stands (all ones), each within e^±3
// (ncclopt.go says how). A size NCCL's tuner cannot plan is a *SizeError;
// fewer sizes to fit than parameters is ErrTooFewSizes.
func FitNCCL(p NCCLProblem) (*NCCLResult, error) {
	f, err := newNCCLFitter(p)
	if err != nil {
		return nil, err
	}
	x, err := f.minimize()
	if err != nil {
		return nil, err
	}
	undetermined := f.undetermined(x)
	if f.err != nil {
		return nil, fmt.Errorf("calibrate: fit: %w", f.err)
	}
	// Round the factors as they are printed, and predict every size with
	// what was printed.
	m, nic := f.machine(x)
	m.Launch, m.Hop, nic = round4(m.Launch), round4(m.Hop), round4(nic)
	for i := range m.Bandwidth {
		m.Bandwidth[i] = round4(m.Bandwidth[i])
	}
	all := make([]int, len(p.Specs))
	for i := range all {
		all[i] = i
	}
	final, err := f.times(m, nic, all, true)
	if err != nil {
		return nil, err
	}
	secs, hostBound := final.secs, make([]bool, len(final.secs))
	for i, s := range secs {
		if floor := f.FloorUS * 1e-6; s < floor {
			secs[i], hostBound[i] = floor, true
		}
	}
	r := &NCCLResult{Machine: m, NICScale: nic, Params: f.params, Topology: final.topo, Choices: f.choices, Labels: final.labels,
		Seconds: secs, Errors: make([]float64, len(secs)), HostBound: hostBound, Fitted: make([]bool, len(secs)), Simulations: f.evals, Undetermined: undetermined,
		AtBound: f.atBounds(x, undetermined)}
	for i := range r.Machine.Bandwidth {
		r.Machine.Bandwidth[i] = cmp.Or(r.Machine.Bandwidth[i], 1)
	}
	r.Machine.Launch, r.Machine.Hop = cmp.Or(r.Machine.Launch, 1), cmp.Or(r.Machine.Hop, 1)
	var in, out []int
	for i, s := range secs {
		r.Errors[i] = s/(p.MeasuredUS[i]*1e-6) - 1
	}
	for i := range r.Fitted {
		r.Fitted[i] = p.Fit == nil || p.Fit[i] // those at the floor too: their error is in sample
	}
	for i := range secs {
		if r.Fitted[i] {
			in = append(in, i)
		} else {
			out = append(out, i)
		}
	}
	r.InSample, r.HeldOut = summarize(r.Errors, in), summarize(r.Errors, out)
	return r, nil
}

// newNCCLFitter checks p and asks NCCL's tuner for every size's choice,
// which decides the protocols whose speed is fitted.
func newNCCLFitter(p NCCLProblem) (*ncclFitter, error) {
	switch {
	case p.Topology == nil:
		return nil, errors.New("calibrate: no topology")
	case len(p.Specs) != len(p.MeasuredUS):
		return nil, fmt.Errorf("calibrate: %d sizes and %d measured times", len(p.Specs), len(p.MeasuredUS))
	case p.Fit != nil && len(p.Fit) != len(p.Specs):
		return nil, fmt.Errorf("calibrate: %d sizes, and Fit marks %d", len(p.Specs), len(p.Fit))
	case p.Ran != nil && len(p.Ran) != len(p.Specs):
		return nil, fmt.Errorf("calibrate: %d sizes, and Ran has %d", len(p.Specs), len(p.Ran))
	case !(p.FloorUS >= 0) || math.IsInf(p.FloorUS, 0):
		return nil, fmt.Errorf("calibrate: floor %g µs, want a time >= 0", p.FloorUS)
	case p.Runs < 0:
		return nil, fmt.Errorf("calibrate: %d runs a size, want 0 or 1 for one, or more", p.Runs)
	}
	for i, t := range p.MeasuredUS {
		if !(t > 0) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("calibrate: size %d: measured time %g µs, want a time > 0", i, t)
		}
	}
	given := p.Options.Machine
	p.Options.Machine = nccl.Machine{ChannelGBps: given.ChannelGBps, NoChannelRate: given.NoChannelRate}
	tuner, err := nccl.NewTuner(p.Topology, p.Options)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	f := &ncclFitter{NCCLProblem: p, tuner: tuner, choices: make([]nccl.Choice, len(p.Specs))}
	used := map[Param]bool{Launch: true, Hop: true}
	for i, spec := range p.Specs {
		if err := spec.Validate(); err != nil {
			return nil, &SizeError{i, true, err}
		}
		if spec.Ranks != tuner.System.Ranks {
			return nil, &SizeError{i, true, fmt.Errorf("%v on %d ranks, but the fabric has %d GPUs", spec.Op, spec.Ranks, tuner.System.Ranks)}
		}
		t, err := p.tunerAt(tuner, i)
		if err != nil {
			return nil, &SizeError{i, true, err}
		}
		c, err := t.Choose(spec)
		if err != nil {
			return nil, &SizeError{i, true, err}
		}
		f.choices[i] = c
		if p.Fit != nil && !p.Fit[i] {
			continue
		}
		if p.MeasuredUS[i] <= hostBoundBy*p.FloorUS {
			f.atFloor++
			continue
		}
		f.fit = append(f.fit, i)
		if q, ok := bandwidthParam(c.Protocol); ok {
			used[q] = true
		}
	}
	if tuner.System.Nodes > 1 {
		f.netLinks = networkLinks(p.Topology)
		used[NIC] = len(f.netLinks) > 0
	}
	for q := range numParams {
		if used[q] {
			f.params = append(f.params, q)
		}
	}
	if len(f.fit) < len(f.params) {
		names := make([]string, len(f.params))
		for i, q := range f.params {
			names[i] = q.String()
		}
		held := ""
		if f.atFloor > 0 {
			held = fmt.Sprintf(" (%d more measured at the host's floor, which say nothing of the machine)", f.atFloor)
		}
		return nil, fmt.Errorf("calibrate: %w: %d sizes to fit%s, and the fit of %d parameters (%s) needs at least %d",
			ErrTooFewSizes, len(f.fit), held, len(f.params), strings.Join(names, ", "), len(f.params))
	}
	return f, nil
}

// machine is the machine and the network scale at x (log factors, in
// f.params order).
func (f *ncclFitter) machine(x []float64) (nccl.Machine, float64) {
	m := f.tuner.Options.Machine // the given channel rate
	nic := 1.0
	for i, q := range f.params {
		v := math.Exp(x[i])
		switch q {
		case Launch:
			m.Launch = v
		case Hop:
			m.Hop = v
		case BandwidthLL, BandwidthLL128, BandwidthSimple:
			m.Bandwidth[q-BandwidthLL] = v
		case NIC:
			nic = v
		}
	}
	return m, nic
}

// scaled is the fabric with the network's links' bandwidth ×nic.
func (f *ncclFitter) scaled(nic float64, round bool) (*topology.Topology, error) {
	return scaleLinks(f.Topology, f.netLinks, nic, round)
}

// ScaleNetwork is t with the bandwidth of its network links (those whose
// topology.EdgeClass is ClassNet) ×nic, each rounded to 4 significant
// digits, named NAME-calibrated: the fabric FitNCCL's NCCLResult.Topology
// is for a fitted NICScale. NCCL's tuner still reads t: a NIC's line rate
// is what NCCL sees, whatever it delivers.
func ScaleNetwork(t *topology.Topology, nic float64) (*topology.Topology, error) {
	if !(nic > 0) || math.IsInf(nic, 0) {
		return nil, fmt.Errorf("calibrate: network scale %g, want a factor > 0", nic)
	}
	if t == nil {
		return nil, errors.New("calibrate: network scale: no topology")
	}
	return scaleLinks(t, networkLinks(t), nic, true)
}

// networkLinks lists t's links between a NIC and the network.
func networkLinks(t *topology.Topology) []int {
	var out []int
	for e := range t.Links {
		if t.EdgeClass(2*e) == topology.ClassNet {
			out = append(out, e)
		}
	}
	return out
}

func scaleLinks(base *topology.Topology, idx []int, factor float64, round bool) (*topology.Topology, error) {
	links := slices.Clone(base.Links)
	for _, e := range idx {
		links[e].BW *= factor
		if round {
			links[e].BW = round4(links[e].BW)
		}
	}
	t, err := topology.New(base.Name+"-calibrated", base.Nodes, links)
	if err == nil {
		t.HostCPU, t.NICPorts = base.HostCPU, base.NICPorts
	}
	return t, err
}

// times simulates the sizes idx with machine m on the fabric with the
// network ×nic, in seconds, sharing the sizes among one timing-only,
// mirroring cluster per core; labels name each size's plan.
func (f *ncclFitter) times(m nccl.Machine, nic float64, idx []int, round bool) (*run, error) {
	topo, err := f.scaled(nic, round)
	if err != nil {
		return nil, fmt.Errorf("calibrate: network ×%g: %w", nic, err)
	}
	f.evals++
	o := f.tuner.Options
	o.Machine = m
	tuner := &nccl.Tuner{System: f.tuner.System, Options: o}
	n := len(f.Specs)
	out := &run{topo: topo, secs: make([]float64, n), launch: make([]float64, n), labels: make([]string, n)}
	secs, err := Simulate(topo, sim.Config{TimingOnly: true, Symmetry: true}, f.Runs, len(idx), func(k int) (*ops.Plan, error) {
		i := idx[k]
		t, err := f.tunerAt(tuner, i)
		if err != nil {
			return nil, err
		}
		plan, c, err := t.Plan(f.Specs[i])
		if err == nil {
			out.launch[i], out.labels[i] = plan.Launch-t.FixedLaunch(f.Specs[i], c), nccl.Label(plan)
		}
		return plan, err
	}, nil)
	var se *SizeError
	if errors.As(err, &se) {
		se.Index = idx[se.Index] // into the problem's sizes
	}
	if err != nil {
		return nil, err
	}
	for k, i := range idx {
		out.secs[i] = secs[k]
	}
	return out, nil
}

// run is a simulation of some of the sizes: per size (indexed as the
// problem's), its time and its plan's launch in seconds, and its plan's
// label; and the fabric it ran on.
type run struct {
	topo         *topology.Topology
	secs, launch []float64
	labels       []string
}

// summarize is the absolute errors of the sizes idx.
func summarize(errs []float64, idx []int) ErrorSummary {
	s := ErrorSummary{Sizes: len(idx), MaxIndex: -1}
	abs := make([]float64, len(idx))
	for k, i := range idx {
		abs[k] = math.Abs(errs[i])
		if s.MaxIndex < 0 || abs[k] > s.Max {
			s.Max, s.MaxIndex = abs[k], i
		}
	}
	slices.Sort(abs)
	if n := len(abs); n > 0 {
		s.Median = (abs[(n-1)/2] + abs[n/2]) / 2
	}
	return s
}
