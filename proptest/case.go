// Package proptest is a property-testing kit for collectives: gopter
// generators of topologies, world sizes, dtypes, counts and awkward inputs;
// properties every algorithm and backend must satisfy; and a harness that
// runs the same generated collectives on two hw worlds (a reference and a
// backend under test) and requires bit-identical results.
//
// Authors of a backend plug it in through a Backend function (see
// Equivalent); authors of an algorithm get it checked by the properties as
// soon as ops knows it. Each failure shrinks to a small case and prints a
// one-line reproducer.
package proptest

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// Case is one generated collective: what to run, on which fabric, with
// which inputs. It is plain data, printed by String.
type Case struct {
	Spec ops.Spec
	// Topo is a topology spec string with Spec.Ranks GPUs, for backends
	// that simulate a fabric; real backends ignore it.
	Topo string
	// Inputs[r] is rank r's input, little-endian, Spec's InLen elements.
	Inputs [][]byte
}

// String is a one-line description.
func (c Case) String() string {
	return fmt.Sprintf("%v on %s", c.Spec, c.Topo)
}

// Reproducer is a command that runs the same collective shape with
// commsim's own input pattern and checks it.
func (c Case) Reproducer() string {
	s := c.Spec
	in, out := s.BufferLens()
	bytes := int64(max(in, out)) * int64(s.DType.Size())
	switch s.Op {
	case ops.AllReduce, ops.Broadcast, ops.Reduce, ops.SendRecv:
		bytes = int64(s.Count) * int64(s.DType.Size())
	}
	cmd := fmt.Sprintf("commsim bench --topo %s --op %s --algo %s --dtype %s -b %d -e %d --check",
		c.Topo, s.Op, s.Algo, s.DType, bytes, bytes)
	if s.Op.Reduces() {
		cmd += " --redop " + s.Redop.String()
	}
	if s.Op.Rooted() {
		cmd += fmt.Sprintf(" --root %d", s.Root)
	}
	return cmd
}

// Result is what a run produced: every rank's whole output buffer and the
// collective's time.
type Result struct {
	Outputs [][]byte
	Seconds float64
}

// Run executes c on w (whose size must be c.Spec.Ranks) with ops'
// executor, in place or out of place, and reads every rank's output back.
func Run(w *hw.World, c Case, inPlace bool) (Result, error) {
	plan, err := ops.Compile(c.Spec)
	if err != nil {
		return Result{}, err
	}
	return RunPlan(w, plan, c.Inputs, inPlace)
}

// RunPlan is Run for a plan that is already compiled (or mutated): rank r
// reads inputs[r] (the plan's InLen elements), in place as NCCL lays it
// out (ops.Plan.InPlace) or out of place.
func RunPlan(w *hw.World, plan *ops.Plan, inputs [][]byte, inPlace bool) (Result, error) {
	if len(inputs) != plan.Ranks {
		return Result{}, fmt.Errorf("proptest: inputs for %d ranks, plan for %d", len(inputs), plan.Ranks)
	}
	size := plan.DType.Size()
	in, out := make([]hw.Slice, plan.Ranks), make([]hw.Slice, plan.Ranks)
	var bufs []hw.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	alloc := func(d hw.Device, n int) (hw.Slice, error) {
		b, err := d.Alloc(plan.DType, n)
		if err != nil {
			return hw.Slice{}, err
		}
		bufs = append(bufs, b)
		return hw.Whole(b), nil
	}
	for r := range plan.Ranks {
		d, err := w.Device(r)
		if err != nil {
			return Result{}, err
		}
		if len(inputs[r]) != plan.InLen*size {
			return Result{}, fmt.Errorf("proptest: rank %d input has %d bytes, want %d", r, len(inputs[r]), plan.InLen*size)
		}
		if inPlace {
			whole, err := alloc(d, max(plan.InLen, plan.OutLen))
			if err != nil {
				return Result{}, err
			}
			in[r], out[r] = plan.InPlace(r, whole)
		} else {
			if in[r], err = alloc(d, plan.InLen); err != nil {
				return Result{}, err
			}
			if out[r], err = alloc(d, plan.OutLen); err != nil {
				return Result{}, err
			}
		}
		raw := make([]byte, in[r].Buf.Len()*size)
		copy(raw[in[r].Off*size:], inputs[r])
		if err := in[r].Buf.Write(raw); err != nil {
			return Result{}, err
		}
	}
	secs, err := ops.NewExecutor(w).Run(plan, in, out)
	if err != nil {
		return Result{}, err
	}
	res := Result{Seconds: secs, Outputs: make([][]byte, plan.Ranks)}
	for r := range plan.Ranks {
		raw := make([]byte, out[r].Buf.Len()*size)
		if err := out[r].Buf.Read(raw); err != nil {
			return Result{}, err
		}
		res.Outputs[r] = raw[out[r].Off*size : (out[r].Off+out[r].Len)*size]
	}
	return res, nil
}
