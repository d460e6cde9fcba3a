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
//
// Running a case and judging its outputs against the exact reference are
// package verify's, which programs use without linking testing or gopter
// (the commsim CLI's --check does); Case, Result, Run, RunPlan and
// CheckReference here are verify's, for the properties and their users.
package proptest

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/verify"
)

// Case is one generated collective: what to run, on which fabric, with
// which inputs (verify.Case, with its String and Reproducer).
type Case = verify.Case

// Result is what a run produced: every rank's whole output buffer and the
// collective's time (verify.Result).
type Result = verify.Result

// Run executes c on w (whose size must be c.Spec.Ranks) with a new ops
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
// out (ops.Plan.InPlace) or out of place. It is verify.RunPlan with every
// rank's input required: properties judge data, never a timing run.
func RunPlan(w *hw.World, plan *ops.Plan, inputs [][]byte, inPlace bool) (Result, error) {
	if len(inputs) != plan.Ranks {
		return Result{}, fmt.Errorf("proptest: inputs for %d ranks, plan for %d", len(inputs), plan.Ranks)
	}
	return verify.RunPlan(ops.NewExecutor(w), w, plan, inputs, inPlace)
}
