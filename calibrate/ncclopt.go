package calibrate

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize"
)

// How FitNCCL minimises. Every evaluation simulates every fitted size, a
// second or more on a fabric of several nodes, so the fit is a
// Gauss-Newton one, with gonum/optimize's Newton method on the
// Gauss-Newton Hessian 2JᵀJ (damped where singular) and an Armijo
// backtracking line search: a handful of iterations, each a few
// simulations, where Nelder-Mead on the same loss takes hundreds.
//
// The Jacobian J of the residuals rᵢ = simulatedᵢ/measuredᵢ − 1 in the
// log factors is cheap to take: the launch opens every lane of a plan, so
// a size's time is its launch plus the rest and the launch's column is
// exact; a size moves with one protocol's speed only, so one simulation
// with every protocol's speed nudged gives all their columns; the hop
// latency and the network take one simulation each.
const (
	// jacStep is the forward-difference step in the log factors (0.1%).
	jacStep = 1e-3
	// ridge pulls the log factors toward 0, NCCL's model as it stands:
	// too faint to move a factor the log determines, it settles the ones
	// the log cannot tell apart (a channel's speed and the NIC's where
	// the NIC alone limits) at the values nearest the model.
	ridge = 1e-6
	// robustScale is the relative error past which a size weighs less
	// than its square (see cauchy).
	robustScale = 0.05
	// maxGNIterations bounds the Gauss-Newton iterations.
	maxGNIterations = 40
	// recentPoints is how many simulated points the fit keeps: a start,
	// a line search's first point and its Jacobian are asked for again.
	recentPoints = 8
)

// point is the fit at log factors x: the residuals of the fitted sizes
// (in f.fit order), their plans' launches in seconds, and the Jacobian
// once asked for.
type point struct {
	x      []float64
	r      []float64
	launch []float64
	loss   float64
	jac    *mat.Dense
}

// inBox reports whether x lies within the bounds.
func inBox(x []float64) bool {
	return !slices.ContainsFunc(x, func(v float64) bool { return !(math.Abs(v) <= ncclLogLimit) })
}

// at simulates the fitted sizes at x, or returns the point when one of
// the last few simulated is x; nil on an error (kept in f.err).
func (f *ncclFitter) at(x []float64) *point {
	for _, p := range f.recent {
		if slices.Equal(p.x, x) {
			return p
		}
	}
	m, nic := f.machine(x)
	res, err := f.times(m, nic, f.fit, false)
	if err != nil {
		f.err = cmp.Or(f.err, err)
		return nil
	}
	p := &point{x: slices.Clone(x), r: make([]float64, len(f.fit)), launch: make([]float64, len(f.fit))}
	for k, i := range f.fit {
		p.r[k] = res.secs[i]/(f.MeasuredUS[i]*1e-6) - 1
		p.launch[k] = res.launch[i]
		p.loss += cauchy(p.r[k], robustScale)
	}
	for _, v := range x {
		p.loss += ridge * v * v
	}
	if len(f.recent) == recentPoints {
		f.recent = f.recent[1:]
	}
	f.recent = append(f.recent, p)
	return p
}

// cauchy is what a size's relative error r adds to the loss, c²·ln(1 +
// r²/c²) (Cauchy's; the fit's c is robustScale): r² while small, and a size far
// off pulls the factors the less the farther it is. A few sizes that no
// factor explains (a protocol NCCL switched at another size, a measured
// step) then leave the fit to the many it can match, as the held-out
// median, the figure the fit is judged by, wants; with least squares
// they set the factors for every size.
func cauchy(r, c float64) float64 {
	return c * c * math.Log1p(r*r/(c*c))
}

// cauchyWeight is cauchy's slope in r², the weight of a size's squared
// error in the gradient and the Gauss-Newton Hessian: 1 at 0, falling as
// c²/r² past c.
func cauchyWeight(r, c float64) float64 {
	return 1 / (1 + r*r/(c*c))
}

// jacobian fills p.jac: the launch's column exactly, the others by
// forward differences (backward at the upper bound), all protocols'
// speeds in one simulation.
func (f *ncclFitter) jacobian(p *point) {
	if p.jac != nil {
		return
	}
	n := len(f.fit)
	J := mat.NewDense(n, len(f.params), nil)
	col := map[Param]int{}
	for j, q := range f.params {
		col[q] = j
	}
	if j, ok := col[Launch]; ok {
		for k, i := range f.fit {
			J.Set(k, j, p.launch[k]/(f.MeasuredUS[i]*1e-6))
		}
	}
	// One nudge per group: the hop, every protocol's speed, the network.
	groups := [][]Param{{Hop}, {BandwidthLL, BandwidthLL128, BandwidthSimple}, {NIC}}
	for _, g := range groups {
		x := slices.Clone(p.x)
		var js []int
		for _, q := range g {
			if j, ok := col[q]; ok {
				js = append(js, j)
			}
		}
		if len(js) == 0 {
			continue
		}
		// A bandwidth limits only where it is the narrowest: nudged
		// down, it shows where it is about to limit too (where a
		// channel's speed and the NIC's are equal, both), which nudged
		// up it would not.
		h := make([]float64, len(x))
		for _, j := range js {
			h[j] = -jacStep
			if g[0] == Hop && x[j]+jacStep <= ncclLogLimit || x[j]-jacStep < -ncclLogLimit {
				h[j] = jacStep
			}
			x[j] += h[j]
		}
		nudged := f.at(x)
		if nudged == nil {
			p.jac = J
			return
		}
		r := nudged.r
		for k, i := range f.fit {
			q := g[0]
			if len(g) > 1 {
				// A size moves with its own protocol's speed only.
				var ok bool
				if q, ok = bandwidthParam(f.choices[i].Protocol); !ok {
					continue
				}
			}
			if j, ok := col[q]; ok {
				J.Set(k, j, (r[k]-p.r[k])/h[j])
			}
		}
	}
	p.jac = J
}

// gnLoss, gnGrad and gnHess are the loss, its gradient 2JᵀWr + 2ρx and
// the Gauss-Newton Hessian 2JᵀWJ + 2ρI, W the sizes' cauchy weights, with
// a steep wall outside the bounds.
func (f *ncclFitter) gnLoss(x []float64) float64 {
	if !inBox(x) {
		out := 0.0
		for _, v := range x {
			out = max(out, math.Abs(v)-ncclLogLimit)
		}
		return 1e6 * (1 + out)
	}
	p := f.at(x)
	if p == nil {
		return math.Inf(1)
	}
	return p.loss
}

func (f *ncclFitter) gnGrad(grad, x []float64) {
	p := f.at(x)
	if p == nil {
		clear(grad)
		return
	}
	f.jacobian(p)
	wr := make([]float64, len(p.r))
	for k, r := range p.r {
		wr[k] = cauchyWeight(r, robustScale) * r
	}
	var g mat.VecDense
	g.MulVec(p.jac.T(), mat.NewVecDense(len(wr), wr))
	for j := range grad {
		grad[j] = 2*g.AtVec(j) + 2*ridge*x[j]
	}
}

func (f *ncclFitter) gnHess(hess *mat.SymDense, x []float64) {
	p := f.at(x)
	if p == nil {
		for i := range len(x) {
			for j := i; j < len(x); j++ {
				hess.SetSym(i, j, 0)
			}
			hess.SetSym(i, i, 1)
		}
		return
	}
	f.jacobian(p)
	rows, cols := p.jac.Dims()
	weighted := mat.NewDense(rows, cols, nil) // √W J
	for k := range rows {
		w := math.Sqrt(cauchyWeight(p.r[k], robustScale))
		for j := range cols {
			weighted.Set(k, j, w*p.jac.At(k, j))
		}
	}
	var jtj mat.SymDense
	jtj.SymOuterK(1, weighted.T())
	for i := range len(x) {
		for j := i; j < len(x); j++ {
			v := 2 * jtj.At(i, j)
			if i == j {
				v += 2 * ridge
			}
			hess.SetSym(i, j, v)
		}
	}
}

// minimize runs the Gauss-Newton fit from all ones (log factors 0).
//
// A bandwidth that limits no fitted size has no slope for the fit to
// follow, though a lower one might limit and explain the log better. The
// NIC is such a one at the start (NCCL's model never gives its channels
// more than the NICs carry), so on several nodes the fit also starts from
// a NIC at ×e^-0.7 and ×e^-1.4 (about ×0.5 and ×0.25), unless a start
// run before already reproduces the log (rms error under 0.1%) or ends
// where the NIC limits some size (the fit then sees it); and after each
// run every such bandwidth is probed at ×e^-0.5, ×e^-1 and ×e^-2, the fit
// running again from the best probe while one lowers the loss. The best
// end wins.
func (f *ncclFitter) minimize() ([]float64, error) {
	// NCCL's model first, then the NIC lowered.
	starts := [][]float64{make([]float64, len(f.params))}
	if j := slices.Index(f.params, NIC); j >= 0 {
		for _, down := range []float64{0.7, 1.4} {
			x := make([]float64, len(f.params))
			x[j] = -down
			starts = append(starts, x)
		}
	}
	// The most promising start first: it is often the only one run.
	loss := make([]float64, len(starts))
	for i, x := range starts {
		loss[i] = f.gnLoss(x)
	}
	order := make([]int, len(starts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(loss[a], loss[b]) })
	var best []float64
	bestLoss := math.Inf(1)
	for _, i := range order {
		if i > 0 && best != nil && !slices.Contains(f.undetermined(best), NIC) {
			continue
		}
		x, l, err := f.probed(starts[i])
		if err != nil {
			return nil, err
		}
		if l < bestLoss {
			best, bestLoss = x, l
		}
		if bestLoss < reproduced*float64(len(f.fit)) {
			break
		}
	}
	if best == nil {
		// Every start's error overflowed: a time no machine comes near.
		return nil, fmt.Errorf("calibrate: fit: the error is infinite from every start: a measured time is out of any machine's reach (the least is %g µs)", slices.Min(f.MeasuredUS))
	}
	return best, nil
}

// reproduced is the loss per fitted size below which a start reproduces
// the log (an rms error of 0.1%, the ridge's share included) and the
// others are not run.
const reproduced = 1e-6

// probed runs the fit from x0, then from the best probe of the
// bandwidths that limit nothing while one lowers the loss, and returns
// where it ends and its loss.
func (f *ncclFitter) probed(x0 []float64) ([]float64, float64, error) {
	x := x0
	for range maxProbeRounds {
		var err error
		if x, err = f.gaussNewton(x); err != nil {
			return nil, 0, err
		}
		best, bestLoss := x, f.gnLoss(x)*(1-1e-3)
		for _, q := range f.undetermined(x) {
			if q == Launch || q == Hop {
				continue
			}
			j := slices.Index(f.params, q)
			for _, down := range []float64{0.5, 1, 2} {
				y := slices.Clone(x)
				y[j] = max(-ncclLogLimit, x[j]-down)
				if l := f.gnLoss(y); l < bestLoss {
					best, bestLoss = y, l
				}
			}
		}
		if f.err != nil {
			return nil, 0, fmt.Errorf("calibrate: fit: %w", f.err)
		}
		if slices.Equal(best, x) {
			break
		}
		x = best
	}
	return x, f.gnLoss(x), f.err
}

// maxProbeRounds bounds the Gauss-Newton runs of minimize.
const maxProbeRounds = 4

// gaussNewton runs gonum/optimize's Newton method with the Gauss-Newton
// Hessian from x0, to the best point it finds; then, while they lower the
// loss, damped steps that keep to the bounds (levenberg) and Newton's
// method again from where they end. Newton's method stops where its
// step gets nowhere, though the loss still falls: its line search gives
// up where the step points far off along a direction the log barely
// determines, where the sizes far off (which Cauchy's loss weighs
// little) leave its Hessian a poor guide, or where the step crosses a
// bound (the fit's wall there refuses the whole step, though every
// factor but the one at its bound could still move: the 16×B200
// all-gather's held-out fit stopped at hop ×0.05 with a 14.5% median,
// and ends at 2.3% with the damped steps).
func (f *ncclFitter) gaussNewton(x0 []float64) ([]float64, error) {
	x, err := f.newton(x0)
	if err != nil {
		return x, err
	}
	for range maxLMRounds {
		y, err := f.levenberg(x)
		if err != nil {
			return nil, err
		}
		if !(f.gnLoss(y) < f.gnLoss(x)*(1-1e-3)) {
			return x, nil
		}
		if x, err = f.newton(y); err != nil {
			return nil, err
		}
		// Newton's method that gets nowhere from where the damped steps
		// stopped leaves nothing for them either.
		if !(f.gnLoss(x) < f.gnLoss(y)*(1-1e-3)) {
			return x, nil
		}
	}
	return x, nil
}

// newton runs gonum/optimize's Newton method with the Gauss-Newton
// Hessian from x0, to the best point it finds.
func (f *ncclFitter) newton(x0 []float64) ([]float64, error) {
	prob := optimize.Problem{Func: f.gnLoss, Grad: f.gnGrad, Hess: f.gnHess}
	// The backtracking line search gives up after a few contractions:
	// near the minimum the loss stops falling (the simulator's times are
	// whole picoseconds), and every try is a simulation.
	res, err := optimize.Minimize(prob, x0, &optimize.Settings{MajorIterations: maxGNIterations,
		Converger: &gnConverge{}},
		&optimize.Newton{Linesearcher: &optimize.Backtracking{ContractionFactor: 0.25, MinimumStepSize: 1e-2}})
	if f.err != nil {
		return nil, fmt.Errorf("calibrate: fit: %w", f.err)
	}
	if res == nil {
		return nil, fmt.Errorf("calibrate: fit: %w", err)
	}
	// A line search that gives up, or the iterations running out, still
	// leave the best point found.
	return res.X, nil
}

// maxLMRounds bounds gaussNewton's rounds of damped steps and Newton.
const maxLMRounds = 4

// levenberg runs Levenberg-Marquardt from x0: the Gauss-Newton step
// with its Hessian's diagonal scaled up by 1 + λ, taken when it lowers
// the loss by 0.1%. It keeps to the bounds as a projected method does: a
// factor at its bound with the loss falling past it is held there (left
// out of the step), and a step that would cross a bound stops at it. λ
// starts at 1, falls tenfold after each step taken and rises tenfold
// after each refused, and the fit stops once λ passes 10⁶ or the
// iterations run out. Large λ
// is a short step down the gradient, each parameter scaled by its own
// curvature, which a loss that Gauss-Newton overshoots still falls along.
func (f *ncclFitter) levenberg(x0 []float64) ([]float64, error) {
	x, loss := slices.Clone(x0), f.gnLoss(x0)
	n := len(x)
	grad, hess := make([]float64, n), mat.NewSymDense(n, nil)
	lambda := 1.0
	for range maxLMTries {
		if lambda > 1e6 {
			break
		}
		f.gnGrad(grad, x)
		f.gnHess(hess, x)
		damped := mat.NewSymDense(n, nil)
		damped.CopySym(hess)
		g := slices.Clone(grad)
		for j := range n {
			damped.SetSym(j, j, hess.At(j, j)*(1+lambda)+1e-12)
			if atBound(x[j], g[j]) {
				for k := range n {
					if k != j {
						damped.SetSym(j, k, 0)
					}
				}
				damped.SetSym(j, j, 1)
				g[j] = 0
			}
		}
		var step mat.VecDense
		solved := step.SolveVec(damped, mat.NewVecDense(n, g)) == nil
		y := make([]float64, n)
		for j := range y {
			y[j] = max(-ncclLogLimit, min(ncclLogLimit, x[j]-step.AtVec(j)))
		}
		lambda *= 10
		if solved && inBox(y) {
			if l := f.gnLoss(y); l < loss*(1-1e-3) {
				x, loss, lambda = y, l, lambda/100
			}
		}
		if f.err != nil {
			return nil, fmt.Errorf("calibrate: fit: %w", f.err)
		}
	}
	return x, nil
}

// atBound reports whether a factor at log value v, with the loss's slope
// g there, is held by its bound: on it, and the loss falling past it.
func atBound(v, g float64) bool {
	return onBound(v) && v*g < 0
}

// onBound reports whether log factor v is at one of the fit's bounds
// (within 1e-9).
func onBound(v float64) bool { return math.Abs(v) >= ncclLogLimit-1e-9 }

// atBounds lists the parameters at a bound at x, but those in
// undetermined (whose value the log does not tell).
func (f *ncclFitter) atBounds(x []float64, undetermined []Param) []Param {
	var out []Param
	for j, q := range f.params {
		if onBound(x[j]) && !slices.Contains(undetermined, q) {
			out = append(out, q)
		}
	}
	return out
}

// maxLMTries bounds levenberg's tries, steps taken and refused.
const maxLMTries = 4 * maxGNIterations

// gnConverge stops the fit where the Gauss-Newton step would lower the
// loss by less than 0.01% (½ gᵀH⁻¹g, its predicted decrease), or where a
// whole iteration lowered it by less than 0.1%: each further try would
// be a simulation for nothing the report shows.
type gnConverge struct {
	last float64
	n    int
}

func (c *gnConverge) Init(int) { c.last, c.n = math.Inf(1), 0 }

func (c *gnConverge) Converged(loc *optimize.Location) optimize.Status {
	defer func() { c.last, c.n = loc.F, c.n+1 }()
	if c.n > 0 && loc.F > c.last*(1-1e-3) {
		return optimize.FunctionConvergence
	}
	if loc.Gradient == nil || loc.Hessian == nil {
		return optimize.NotTerminated
	}
	var chol mat.Cholesky
	if !chol.Factorize(loc.Hessian) {
		return optimize.NotTerminated
	}
	g := mat.NewVecDense(len(loc.Gradient), slices.Clone(loc.Gradient))
	var step mat.VecDense
	if err := chol.SolveVecTo(&step, g); err != nil {
		return optimize.NotTerminated
	}
	if pred := mat.Dot(g, &step) / 2; pred < 1e-4*loc.F+1e-14 {
		return optimize.FunctionConvergence
	}
	return optimize.NotTerminated
}

// undetermined lists the parameters whose Jacobian column is zero at x:
// no size's time moves by a millionth per e-fold of the factor (a factor
// that limits nothing can still leave such traces in the simulator's
// sums of times).
func (f *ncclFitter) undetermined(x []float64) []Param {
	p := f.at(x)
	if p == nil {
		return nil
	}
	f.jacobian(p)
	var out []Param
	for j, q := range f.params {
		if mat.Norm(p.jac.ColView(j), math.Inf(1)) < 1e-6 {
			out = append(out, q)
		}
	}
	return out
}
