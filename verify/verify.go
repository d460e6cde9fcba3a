// Package verify runs a collective and judges its outputs against an exact
// reference.
//
// A Case is what to run (an ops.Spec, a fabric, every rank's input); a
// Runner lays out the device buffers a plan needs (out of place, or in
// place as ops.Plan.InPlace lays them out), writes the inputs, runs the
// plan through an executor the caller made and reads the outputs back;
// CheckReference, CountWrong and CountWrongRank judge the outputs against
// double-double arithmetic with stated error bounds. PatternInputs is the
// deterministic input that `commsim bench --check` runs.
//
// The package is the part of proptest that a program needs: the commsim
// CLI checks its runs with it without linking testing or gopter, and
// proptest's properties run and judge their generated cases through it.
package verify

import (
	"fmt"
	"slices"

	"github.com/commsim/commsim/ops"
)

// Case is one collective: what to run, on which fabric, with which inputs.
// It is plain data, printed by String.
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
// commsim's own input pattern (PatternInputs) and checks it. bench has no
// flags for an NCCL-style plan's channels, chunk and nodes, so for a spec
// that sets them the command says which it had. A plan made by hand,
// whose algorithm commsim does not have, has no such command.
func (c Case) Reproducer() string {
	s := c.Spec
	if !slices.Contains(ops.Algorithms(), s.Algo) {
		return fmt.Sprintf("none: algorithm %q is not one of commsim's (a plan made by hand); rerun its test with the case above", s.Algo)
	}
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
	if s.Channels != 0 || s.Chunk != 0 || s.NodeRanks != 0 || s.NetChunk != 0 || s.TreeChannels != 0 || s.TreeCopies != [3]int{} {
		// A shell comment, so that the line still pastes as a command.
		cmd += fmt.Sprintf("  # the case had channels=%d chunk=%d node=%d netchunk=%d treechannels=%d treecopies=%v; bench makes its own", s.Channels, s.Chunk, s.NodeRanks, s.NetChunk, s.TreeChannels, s.TreeCopies)
	}
	return cmd
}

// Result is what a run produced: every rank's whole output buffer and the
// collective's time.
type Result struct {
	// Outputs[r] is rank r's output, the plan's OutLen elements; nil when
	// the run did not read it (a timing run, or a rank another process
	// holds).
	Outputs [][]byte
	Seconds float64
}
