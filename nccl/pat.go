package nccl

import "github.com/commsim/commsim/ops"

// PAT on the simulator (ops nccl-pat): NCCL's binomial trees, one per
// rank, log2(ranks) network steps, with one GPU per node (or, as
// NCCL_PAT_ENABLE=1 lets NCCL, on nodes of several GPUs, its steps then
// within a node or across as the ranks fall).

// patWire is how PAT's messages move, after wire's ring-like figures for
// protocol p: NCCL's model prices PAT's fixed time as its base latency,
// a network hop's latency over 3.5 per step (PAT keeps several steps in
// flight) and 2.8 µs per rank (the work of walking every rank's tree,
// tuning.cc), so a step's network latency is the hop's over 3.5 and the
// launch carries the per-rank term.
//
// PAT's sends are eager: its plan sends a peer several pieces before the
// peer receives them, more than NCCL_STEPS slots hold at 13 ranks and
// more (ops.Check finds it deadlocks under 8 slots there, not under 16),
// where NCCL's PAT kernel schedules its own steps through its buffer.
func patWire(s System, w *ops.Wire, launch float64, o Options) (*ops.Wire, float64) {
	w.Latency[ops.PathNet] /= 3.5
	w.Slots, w.SlotBytes = 0, 0
	return w, launch + float64(s.Ranks)*patPerRankUS*1e-6*orOne(o.Machine.Launch)
}

// patPerRankUS is NCCL's model's PAT latency per rank, in µs
// (NCCL-MODEL.md §4).
const patPerRankUS = 2.8
