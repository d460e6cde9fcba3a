package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/nccl"
)

// calibrate --algo nccl: the fit of NCCL's machine (package calibrate's
// FitNCCL), its held-out check and its report.

// calNCCL is the fit of NCCL's machine, as JSON.
type calNCCL struct {
	Version string `json:"nccl_version"`
	// Machine is the fitted machine and the network links' bandwidth
	// scale (1 on one node).
	Machine      calMachine `json:"machine"`
	Params       []string   `json:"params"`       // the factors fitted
	Undetermined []string   `json:"undetermined"` // those no fitted size depends on where the fit ended
	AtBound      []string   `json:"at_bound"`     // those that ended at ×0.05 or ×20, the log pulling them further
	InSample     calErrors  `json:"in_sample"`
	// HeldOut is the fit on every other size and its error on the others;
	// nil when the log has too few sizes to hold half out.
	HeldOut     *calHeldOut `json:"held_out,omitempty"`
	Simulations int         `json:"simulations"`
	// AsLogged counts the sizes run as the log says NCCL ran them
	// (--as-logged).
	AsLogged int `json:"as_logged_sizes,omitempty"`
	// GPUsPerThread and ThreadFloorUS are, where each thread of the run
	// drove several GPUs (nccl-tests -g), how many, and the least time a
	// size then takes (nccl.ThreadFloorUS), which the fit holds to.
	GPUsPerThread int     `json:"gpus_per_thread,omitempty"`
	ThreadFloorUS float64 `json:"thread_floor_us,omitempty"`
	env           string  // the --nccl-* flags of the environment it ran in
	envNote       string  // the environment the log states, as taken
}

// calMachine is an nccl.Machine, every factor written out.
type calMachine struct {
	Launch   float64 `json:"launch"`
	Hop      float64 `json:"hop"`
	LL       float64 `json:"bandwidth_ll"`
	LL128    float64 `json:"bandwidth_ll128"`
	Simple   float64 `json:"bandwidth_simple"`
	NICScale float64 `json:"nic_scale"`
	// Channel is the channel rate the fit held (--nccl-machine channel=,
	// not fitted): GB/s, or "none"; "" for the default, the rate measured
	// on the fabric's GPUs.
	Channel string `json:"channel,omitempty"`
}

func newCalMachine(m nccl.Machine, nic float64) calMachine {
	c := calMachine{m.Launch, m.Hop, m.Bandwidth[0], m.Bandwidth[1], m.Bandwidth[2], nic, ""}
	switch {
	case m.ChannelGBps > 0:
		c.Channel = strconv.FormatFloat(m.ChannelGBps, 'g', -1, 64)
	case m.NoChannelRate:
		c.Channel = "none"
	}
	return c
}

// flag is the machine as --nccl-machine takes it.
func (m calMachine) flag() string {
	s := fmt.Sprintf("launch=%.4g,hop=%.4g,ll=%.4g,ll128=%.4g,simple=%.4g", m.Launch, m.Hop, m.LL, m.LL128, m.Simple)
	if m.NICScale != 1 {
		s += fmt.Sprintf(",nic=%.4g", m.NICScale)
	}
	if m.Channel != "" {
		s += ",channel=" + m.Channel
	}
	return s
}

// goLiteral is the machine as the nccl.Machine a Go program passes in
// nccl.Options.
func (m calMachine) goLiteral() string {
	s := fmt.Sprintf("nccl.Machine{Launch: %.4g, Hop: %.4g, Bandwidth: [3]float64{%.4g, %.4g, %.4g}", m.Launch, m.Hop, m.LL, m.LL128, m.Simple)
	switch m.Channel {
	case "":
	case "none":
		s += ", NoChannelRate: true"
	default:
		s += ", ChannelGBps: " + m.Channel
	}
	return s + "}"
}

// calErrors sums up the absolute relative errors of some sizes.
type calErrors struct {
	Sizes  int     `json:"sizes"`
	Median float64 `json:"median_abs_error"`
	Max    float64 `json:"max_abs_error"`
}

func newCalErrors(s calibrate.ErrorSummary) calErrors { return calErrors{s.Sizes, s.Median, s.Max} }

// calHeldOut is the fit on every other size, and how it predicts the
// others.
type calHeldOut struct {
	FittedSizes int        `json:"fitted_sizes"`
	Machine     calMachine `json:"machine"`
	calErrors
}

// runNCCL fits NCCL's machine to the log's sizes within [lo, hi], then
// again on every other one to predict the rest, and reports both.
func (f *calFlags) runNCCL(stdout, stderr io.Writer, s *sweep, lg *calibrate.Log, lo, hi int64) error {
	p := s.topo.NumGPUs()
	specs, rows, warnings, err := f.fitSizes(s, lg, lo, hi)
	if err != nil {
		return err
	}
	noteLongFit(stderr, f.log, len(specs))
	prob := calibrate.NCCLProblem{Topology: s.topo, Options: s.tuner.Options, Specs: specs, FloorUS: nccl.ThreadFloorUS(lg.GPUsPerThread), Runs: lg.TimedRuns(s.op)}
	for _, r := range rows {
		prob.MeasuredUS = append(prob.MeasuredUS, r.TimeUS)
	}
	logged := 0
	if f.asLogged {
		if err := saysWhatRan(lg, f.log); err != nil {
			return err
		}
		prob.Ran = make([]*calibrate.Ran, len(rows))
		for i, r := range rows {
			if ran, ok := lg.NCCLRan[r.Bytes]; ok && !ran.Varies {
				prob.Ran[i], logged = &ran, logged+1
			}
		}
		if logged < len(rows) {
			warnings = append(warnings, fmt.Sprintf("--as-logged: the log says what NCCL ran at %d of the %d sizes fitted (NCCL_DEBUG_SUBSYS=TUNING lines, in agreement); the others run as NCCL's tuner chooses", logged, len(rows)))
		}
		if unread := calibrate.DescribeUnread(lg.UnreadRan); unread != "" {
			warnings = append(warnings, "--as-logged: "+strings.TrimSpace(strings.TrimPrefix(unread, "#")))
		}
	}
	fit, err := calibrate.FitNCCL(prob)
	if err != nil {
		return fitError(f.log, rows, err)
	}
	half, err := calibrate.FitNCCL(prob.HoldOut())
	switch {
	case errors.Is(err, calibrate.ErrTooFewSizes):
		warnings = append(warnings, fmt.Sprintf("no held-out error: %v", err))
		half = nil
	case err != nil:
		return fitError(f.log, rows, err)
	}
	o := s.tuner.Options
	if o.Version == 0 {
		o.Version = nccl.V2_30
	}
	m := newCalMachine(fit.Machine, fit.NICScale)
	rep := calReport{Op: s.op.String(), Algo: algoNCCL, Topology: f.topo, Ranks: p, Log: f.log, LogFormat: lg.Format,
		Links: changedLinks(linkClasses(s.topo, fit.Topology)), Simulations: fit.Simulations,
		NCCL: &calNCCL{Version: o.Version.String(), env: optionFlags(s.tuner.Options), envNote: f.envNote, Machine: m, Params: paramNames(fit.Params),
			Undetermined: paramNames(fit.Undetermined), AtBound: paramNames(fit.AtBound), InSample: newCalErrors(fit.InSample), Simulations: fit.Simulations,
			AsLogged: logged}}
	if lg.GPUsPerThread > 1 {
		rep.NCCL.GPUsPerThread, rep.NCCL.ThreadFloorUS = lg.GPUsPerThread, prob.FloorUS
	}
	if half != nil {
		rep.NCCL.HeldOut = &calHeldOut{FittedSizes: half.InSample.Sizes, Machine: newCalMachine(half.Machine, half.NICScale), calErrors: newCalErrors(half.HeldOut)}
	}
	if rep.Links == nil {
		rep.Links = []calLink{}
	}
	bus := busFactor(s.op, p)
	for i, r := range rows {
		meas, t := r.TimeUS*1e-6, fit.Seconds[i]
		e := fit.Errors[i]
		z := calSize{Bytes: r.Bytes, MeasuredUS: r.TimeUS, FittedUS: t * 1e6, RelError: e,
			MeasuredBus: float64(r.Bytes) / meas / 1e9 * bus, FittedBus: float64(r.Bytes) / t / 1e9 * bus, Algo: fit.Labels[i], HostBound: fit.HostBound[i]}
		if half != nil && !half.Fitted[i] {
			us, he := half.Seconds[i]*1e6, half.Errors[i]
			z.HeldOutUS, z.HeldOutRelError = &us, &he
		}
		rep.Sizes = append(rep.Sizes, z)
		rep.RMSRelError += e * e / float64(len(rows))
		rep.MaxRelError = max(rep.MaxRelError, math.Abs(e))
	}
	rep.RMSRelError = math.Sqrt(rep.RMSRelError)
	rep.Warnings = append(warnings, offWarnings(rep.Sizes)...)
	if f.out != "" {
		err := writeFileAtomic(f.out, func(w io.Writer) error {
			fmt.Fprintf(w, "# calibrated by commsim calibrate from %s: %s as NCCL %s's tuner chooses it on %s, run with\n",
				f.log, rep.Op, rep.NCCL.Version, f.topo)
			fmt.Fprintf(w, "# %s", m.goLiteral())
			if fit.NICScale != 1 {
				fmt.Fprintf(w, " and the network links ×%.4g (NCCL's tuner reads %s's)", fit.NICScale, f.topo)
			}
			fmt.Fprintf(w, "; in-sample rms error %.2f%%\n", 100*rep.RMSRelError)
			return fit.Topology.WriteYAML(w)
		})
		if err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		rep.Out = f.out
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "commsim: warning: %s\n", w)
	}
	switch f.format {
	case "json":
		if rep.Warnings == nil {
			rep.Warnings = []string{}
		}
		return writeJSON(stdout, rep)
	case "csv":
		// One row per size; the fitted factors repeat on every row.
		out := [][]string{{"bytes", "measured_us", "fitted_us", "rel_error", "held_out_rel_error", "algo",
			"launch", "hop", "bandwidth_ll", "bandwidth_ll128", "bandwidth_simple", "nic_scale"}}
		for _, z := range rep.Sizes {
			held := ""
			if z.HeldOutRelError != nil {
				held = fmtFloat(*z.HeldOutRelError)
			}
			out = append(out, []string{strconv.FormatInt(z.Bytes, 10), fmtFloat(z.MeasuredUS), fmtFloat(z.FittedUS), fmtFloat(z.RelError), held, z.Algo,
				fmtFloat(m.Launch), fmtFloat(m.Hop), fmtFloat(m.LL), fmtFloat(m.LL128), fmtFloat(m.Simple), fmtFloat(m.NICScale)})
		}
		return writeCSVRows(stdout, out)
	}
	return writeCalNCCLTable(stdout, &rep, fit)
}

// fitError is a failed fit, a size named by its line in the log and its
// bytes: too few sizes, or a size whose plan cannot be made (NCCL's tuner
// does not tune it, say), is the log's fault (exit 2); others are the
// simulator's.
func fitError(log string, rows []calibrate.Sample, err error) error {
	if errors.Is(err, calibrate.ErrTooFewSizes) {
		return usagef("%s: %v", log, err)
	}
	var se *calibrate.SizeError
	if errors.As(err, &se) && se.Index < len(rows) {
		err = fmt.Errorf("%s:%d (%d bytes): %w", log, rows[se.Index].Line, rows[se.Index].Bytes, se.Err)
		if se.Planning {
			return usageError{err}
		}
	}
	return err
}

func paramNames(ps []calibrate.Param) []string {
	out := make([]string, len(ps))
	for i, q := range ps {
		out[i] = q.String()
	}
	return out
}

// changedLinks keeps the classes of links the fit changed.
func changedLinks(all []calLink) []calLink {
	var out []calLink
	for _, l := range all {
		if l.EffBW != l.BeforeEffBW || l.LatUS != l.BeforeLatUS {
			out = append(out, l)
		}
	}
	return out
}

// offWarnings flags sizes the fitted model misses by more than 10%.
func offWarnings(sz []calSize) []string {
	var off []string
	for _, s := range sz {
		if math.Abs(s.RelError) > residualWarn {
			off = append(off, fmt.Sprintf("%s (%+.1f%%)", formatBytes(s.Bytes), 100*s.RelError))
		}
	}
	n := len(off)
	if n == 0 {
		return nil
	}
	if n > 6 {
		off = append(off[:6], fmt.Sprintf("and %d more", n-6))
	}
	return []string{fmt.Sprintf("the fit is off by more than %.0f%% at %d of %d sizes: %s", 100*residualWarn, n, len(sz), strings.Join(off, ", "))}
}

func writeCalNCCLTable(w io.Writer, r *calReport, fit *calibrate.NCCLResult) error {
	n := r.NCCL
	switch n.AsLogged {
	case len(r.Sizes):
		fmt.Fprintf(w, "# commsim calibrate: %s as the log says NCCL ran it at every size (--algo nccl --as-logged), on %s (%d ranks)\n", r.Op, r.Topology, r.Ranks)
	case 0:
		fmt.Fprintf(w, "# commsim calibrate: %s as NCCL %s's tuner chooses per size (--algo nccl), on %s (%d ranks)\n", r.Op, n.Version, r.Topology, r.Ranks)
	default:
		fmt.Fprintf(w, "# commsim calibrate: %s as the log says NCCL ran it at %d of %d sizes, the others as NCCL %s's tuner chooses (--algo nccl --as-logged), on %s (%d ranks)\n",
			r.Op, n.AsLogged, len(r.Sizes), n.Version, r.Topology, r.Ranks)
	}
	fmt.Fprintf(w, "# log: %s (%s), %d sizes, out-of-place times\n", r.Log, r.LogFormat, len(r.Sizes))
	if n.envNote != "" {
		fmt.Fprintf(w, "# %s\n", n.envNote)
	}
	if n.GPUsPerThread > 1 {
		fmt.Fprintf(w, "# %s; a size held there is host-bound\n", threadFloorNote(n.GPUsPerThread, n.ThreadFloorUS))
	}
	fmt.Fprintf(w, "# fit: %s (Gauss-Newton on the factors' logarithms from NCCL's model; %d simulations of every size)\n", fit.Describe(), n.Simulations)
	if len(n.Undetermined) > 0 {
		fmt.Fprintf(w, "#   not determined by the log (no fitted size depends on them there; other values fit alike): %s\n", strings.Join(n.Undetermined, ", "))
	}
	if len(n.AtBound) > 0 {
		fmt.Fprintf(w, "#   at the fit's bound, ×0.05 or ×20 (the log pulls them further, which no machine near NCCL's model follows: read them as at most or at least): %s\n", strings.Join(n.AtBound, ", "))
	}
	for _, l := range r.Links {
		fmt.Fprintf(w, "#   %s (%d links): %s\n", l.Class, l.Links, l.text)
	}
	env := n.env
	if env != "" {
		env += " "
	}
	if r.Op != "allreduce" {
		env = "--op " + r.Op + " " + env
	}
	if g := n.GPUsPerThread; g > 1 {
		env = fmt.Sprintf("--thread-gpus %d %s", g, env) // the run's threads, whose floor holds its sizes
	}
	fmt.Fprintf(w, "# machine: %s; to predict with it: commsim bench --algo nccl --topo %s %s--nccl-machine %s\n", n.Machine.goLiteral(), r.Topology, env, n.Machine.flag())
	fmt.Fprintf(w, "# in-sample |error|: median %.2f%%, max %.2f%%, rms %.2f%% over %d sizes\n", 100*n.InSample.Median, 100*n.InSample.Max, 100*r.RMSRelError, n.InSample.Sizes)
	if h := n.HeldOut; h != nil {
		fmt.Fprintf(w, "# held out: fitted on %d sizes (every other one, from the first: %s), predicting the %d others: median |error| %.2f%%, max %.2f%%\n",
			h.FittedSizes, h.Machine.flag(), h.Sizes, 100*h.Median, 100*h.Max)
	}
	fmt.Fprintf(w, "%12s %13s %13s %9s %12s  %s\n", "size(B)", "measured(us)", "fitted(us)", "error(%)", "held-out(%)", "algo")
	for _, s := range r.Sizes {
		held := "(fitted)"
		if s.HeldOutRelError != nil {
			held = fmt.Sprintf("%+.2f", 100**s.HeldOutRelError)
		} else if n.HeldOut == nil {
			held = "-"
		}
		algo := s.Algo
		if s.HostBound {
			algo += " host-bound"
		}
		fmt.Fprintf(w, "%12d %13.2f %13.2f %+9.2f %12s  %s\n", s.Bytes, s.MeasuredUS, s.FittedUS, 100*s.RelError, held, algo)
	}
	if r.Out != "" {
		_, err := fmt.Fprintf(w, "# wrote the calibrated topology to %s: NCCL's choice on %s, run with the machine above on it, reproduces the fitted times\n", r.Out, r.Topology)
		return err
	}
	_, err := fmt.Fprintf(w, "# add --out FILE to write the calibrated topology\n")
	return err
}
