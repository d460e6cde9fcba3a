package verify

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// Runner runs plans and keeps the device buffers it allocated for them: two
// per device (input and output, or one buffer in place), grown when a plan
// needs more. A sweep of sizes through one Runner allocates each buffer
// once, as nccl-tests does, instead of once per run. The zero Runner is
// ready to use; Free releases its buffers. A Runner is not safe for
// concurrent use.
//
// A run with inputs writes them (zeroing the rest of the input's buffer,
// so that an in-place run does not start from what earlier runs left) and
// reads every output back. A run without inputs (nil) writes and reads nothing: it is timed
// only, on whatever the buffers hold, which is all a timing-only world's
// phantom buffers allow.
//
// Warmup and Iters are nccl-tests' -w and -n: Warmup untimed launches,
// then Iters timed ones back to back, each rank starting its next as soon
// as its own last one ends (ops.Executor.RunBackToBack), whose mean is the
// Result's time (0 counts as 1). On real devices they smooth times that
// vary from run to run; on every device, a rooted chain's back-to-back
// runs overlap, so its mean is less than one run's time. A run with inputs
// then writes them again and launches once more for the outputs, since
// the timed launches of an in-place run reduce what the previous one left.
type Runner struct {
	Warmup, Iters int
	bufs          map[hw.Device]*[2]hw.Buffer
}

// Rank is one rank of a plan whose other ranks run elsewhere, as in a
// multi-process job where each process holds one rank.
type Rank struct {
	Index  int
	Device hw.Device
	// Launch runs this rank's share of plan on in and out, runs times back
	// to back, and returns the mean seconds of a run, as
	// ops.RunNativeRankBackToBack does with a communicator and a stream.
	Launch func(plan *ops.Plan, in, out hw.Slice, runs int) (seconds float64, err error)
}

// Run runs plan on every rank of w through exec, with rank r reading
// inputs[r] (nil for a timing run), in place as NCCL lays it out
// (ops.Plan.InPlace) or out of place. Errors of the devices and of the
// executor come back as they are.
func (r *Runner) Run(exec *ops.Executor, w *hw.World, plan *ops.Plan, inputs [][]byte, inPlace bool) (Result, error) {
	switch {
	case plan == nil:
		return Result{}, fmt.Errorf("verify: run: %w: nil plan", ops.ErrBadPlan)
	case exec == nil || w == nil:
		return Result{}, fmt.Errorf("verify: run %v: no executor or no world", plan.Spec)
	case plan.Ranks != w.Size():
		return Result{}, fmt.Errorf("verify: run %v: %w: the plan is for %d ranks, the world has %d", plan.Spec, hw.ErrBadArgument, plan.Ranks, w.Size())
	}
	ranks := make([]int, plan.Ranks)
	devs := make([]hw.Device, plan.Ranks)
	for q := range plan.Ranks {
		d, err := w.Device(q)
		if err != nil {
			return Result{}, err
		}
		ranks[q], devs[q] = q, d
	}
	return r.run(plan, ranks, devs, inputs, inPlace, func(in, out []hw.Slice, runs int) (float64, error) {
		return exec.RunBackToBack(plan, in, out, runs)
	})
}

// RunRank runs one rank's share of plan: it lays out and fills that rank's
// buffers on its device and reads its output back (Result.Outputs[rank.Index]).
// inputs, when not nil, holds every rank's input, since judging one rank's
// output (CountWrongRank) needs them all; only the rank's own is written.
func (r *Runner) RunRank(rank Rank, plan *ops.Plan, inputs [][]byte, inPlace bool) (Result, error) {
	switch {
	case plan == nil:
		return Result{}, fmt.Errorf("verify: run: %w: nil plan", ops.ErrBadPlan)
	case rank.Index < 0 || rank.Index >= plan.Ranks:
		return Result{}, fmt.Errorf("verify: rank %d of a plan for %d ranks", rank.Index, plan.Ranks)
	case rank.Device == nil || rank.Launch == nil:
		return Result{}, fmt.Errorf("verify: rank %d has no device or no Launch", rank.Index)
	}
	return r.run(plan, []int{rank.Index}, []hw.Device{rank.Device}, inputs, inPlace, func(in, out []hw.Slice, runs int) (float64, error) {
		return rank.Launch(plan, in[rank.Index], out[rank.Index], runs)
	})
}

// run is Run and RunRank: it lays out the buffers of ranks (on devs), writes
// their inputs, launches the plan over slices indexed by rank and reads
// the ranks' outputs.
func (r *Runner) run(plan *ops.Plan, ranks []int, devs []hw.Device, inputs [][]byte, inPlace bool,
	launch func(in, out []hw.Slice, runs int) (float64, error)) (Result, error) {
	size := plan.DType.Size()
	if inputs != nil {
		if len(inputs) != plan.Ranks {
			return Result{}, fmt.Errorf("verify: inputs for %d ranks, plan for %d", len(inputs), plan.Ranks)
		}
		for q, b := range inputs {
			if len(b) != plan.InLen*size {
				return Result{}, fmt.Errorf("verify: rank %d input has %d bytes, want %d", q, len(b), plan.InLen*size)
			}
		}
	}
	in, out := make([]hw.Slice, plan.Ranks), make([]hw.Slice, plan.Ranks)
	for i, q := range ranks {
		var err error
		if in[q], out[q], err = r.layout(plan, q, devs[i], inPlace); err != nil {
			return Result{}, err
		}
		if inputs != nil {
			if err := writeInput(in[q], inputs[q]); err != nil {
				return Result{}, err
			}
		}
	}
	secs, err := r.time(func(runs int) (float64, error) { return launch(in, out, runs) })
	if err != nil {
		return Result{}, err
	}
	res := Result{Seconds: secs}
	if inputs != nil && (r.Warmup > 0 || r.Iters > 1) {
		for _, q := range ranks {
			if err := writeInput(in[q], inputs[q]); err != nil {
				return Result{}, err
			}
		}
		if _, err := launch(in, out, 1); err != nil {
			return Result{}, err
		}
	}
	if inputs == nil {
		return res, nil
	}
	res.Outputs = make([][]byte, plan.Ranks)
	for _, q := range ranks {
		if res.Outputs[q], err = readOutput(out[q]); err != nil {
			return Result{}, err
		}
	}
	return res, nil
}

// time launches Warmup runs untimed, then Iters runs back to back, and
// returns their mean time.
func (r *Runner) time(launch func(runs int) (float64, error)) (float64, error) {
	if r.Warmup > 0 {
		if _, err := launch(r.Warmup); err != nil {
			return 0, err
		}
	}
	return launch(r.Runs())
}

// Runs is how many runs back to back a launch times: Iters, at least one.
func (r *Runner) Runs() int { return max(r.Iters, 1) }

// layout returns rank's input and output slices of plan on dev: the
// device's two buffers out of place, or its first one in place, split as
// ops.Plan.InPlace says.
func (r *Runner) layout(plan *ops.Plan, rank int, dev hw.Device, inPlace bool) (in, out hw.Slice, err error) {
	if inPlace {
		whole, err := r.buffer(dev, 0, plan.DType, max(plan.InLen, plan.OutLen))
		if err != nil {
			return hw.Slice{}, hw.Slice{}, err
		}
		in, out = plan.InPlace(rank, whole)
		return in, out, nil
	}
	if in, err = r.buffer(dev, 0, plan.DType, plan.InLen); err != nil {
		return hw.Slice{}, hw.Slice{}, err
	}
	if out, err = r.buffer(dev, 1, plan.DType, plan.OutLen); err != nil {
		return hw.Slice{}, hw.Slice{}, err
	}
	return in, out, nil
}

// buffer returns the first n elements of dev's buffer number which (0 or
// 1), replacing it by a larger one when needed, or by one of dt when its
// dtype differs.
func (r *Runner) buffer(dev hw.Device, which int, dt hw.DType, n int) (hw.Slice, error) {
	if r.bufs == nil {
		r.bufs = map[hw.Device]*[2]hw.Buffer{}
	}
	pair := r.bufs[dev]
	if pair == nil {
		pair = &[2]hw.Buffer{}
		r.bufs[dev] = pair
	}
	if b := pair[which]; b == nil || b.Len() < n || b.DType() != dt {
		if b != nil {
			pair[which] = nil
			if err := b.Free(); err != nil {
				return hw.Slice{}, err
			}
		}
		b, err := dev.Alloc(dt, n)
		if err != nil {
			return hw.Slice{}, err
		}
		pair[which] = b
	}
	return hw.Slice{Buf: pair[which], Len: n}, nil
}

// Free releases every buffer the runner holds; the runner can be used
// again.
func (r *Runner) Free() error {
	var errs []error
	for _, pair := range r.bufs {
		for _, b := range pair {
			if b != nil {
				errs = append(errs, b.Free())
			}
		}
	}
	r.bufs = nil
	// In the errors' order, not the map's, so that a rerun says the same.
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return errors.Join(errs...)
}

// writeInput stores raw as s's elements and zeroes the rest of its buffer.
func writeInput(s hw.Slice, raw []byte) error {
	size := s.DType().Size()
	if s.Off == 0 && len(raw) == s.Buf.Len()*size {
		return s.Buf.Write(raw) // nothing else to zero: spare a copy
	}
	all := make([]byte, s.Buf.Len()*size)
	copy(all[s.Off*size:], raw)
	return s.Buf.Write(all)
}

// readOutput reads s's elements.
func readOutput(s hw.Slice) ([]byte, error) {
	size := s.DType().Size()
	all := make([]byte, s.Buf.Len()*size)
	if err := s.Buf.Read(all); err != nil {
		return nil, err
	}
	return all[s.Off*size : (s.Off+s.Len)*size], nil
}

// Run compiles c.Spec and runs it once on w through exec, in place or out
// of place, on buffers of its own that it frees after: Runner.Run for a
// single case.
func Run(exec *ops.Executor, w *hw.World, c Case, inPlace bool) (Result, error) {
	plan, err := ops.Compile(c.Spec)
	if err != nil {
		return Result{}, err
	}
	return RunPlan(exec, w, plan, c.Inputs, inPlace)
}

// RunPlan is Run for a plan that is already compiled (or mutated): rank r
// reads inputs[r] (the plan's InLen elements; nil inputs make a timing
// run, see Runner).
func RunPlan(exec *ops.Executor, w *hw.World, plan *ops.Plan, inputs [][]byte, inPlace bool) (Result, error) {
	var r Runner
	res, err := r.Run(exec, w, plan, inputs, inPlace)
	if ferr := r.Free(); err == nil && ferr != nil {
		return Result{}, ferr
	}
	return res, err
}
