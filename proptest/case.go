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
	if len(c.Inputs) != plan.Ranks {
		return Result{}, fmt.Errorf("proptest: case has inputs for %d ranks, plan %d", len(c.Inputs), plan.Ranks)
	}
	size := plan.DType.Size()
	in, out := make([]hw.Slice, plan.Ranks), make([]hw.Slice, plan.Ranks)
	var bufs []hw.Buffer
	defer func() {
		for _, b := range bufs {
			b.Free()
		}
	}()
	for r := range plan.Ranks {
		d, err := w.Device(r)
		if err != nil {
			return Result{}, err
		}
		if len(c.Inputs[r]) != plan.InLen*size {
			return Result{}, fmt.Errorf("proptest: rank %d input has %d bytes, want %d", r, len(c.Inputs[r]), plan.InLen*size)
		}
		if !inPlace {
			ib, err := d.Alloc(plan.DType, plan.InLen)
			if err != nil {
				return Result{}, err
			}
			ob, err := d.Alloc(plan.DType, plan.OutLen)
			if err != nil {
				return Result{}, err
			}
			bufs = append(bufs, ib, ob)
			if err := ib.Write(c.Inputs[r]); err != nil {
				return Result{}, err
			}
			in[r], out[r] = hw.Whole(ib), hw.Whole(ob)
			continue
		}
		b, err := d.Alloc(plan.DType, max(plan.InLen, plan.OutLen))
		if err != nil {
			return Result{}, err
		}
		bufs = append(bufs, b)
		whole := hw.Whole(b)
		in[r], out[r] = whole, whole
		switch {
		case plan.OutInIn():
			out[r] = whole.Sub(r*plan.Count, plan.Count)
		case plan.InLen < plan.OutLen:
			in[r] = whole.Sub(plan.InPlaceOffset(r), plan.InLen)
		}
		raw := make([]byte, b.Len()*size)
		copy(raw[in[r].Off*size:], c.Inputs[r])
		if err := b.Write(raw); err != nil {
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
