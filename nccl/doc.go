// Package nccl predicts what NCCL does on a fabric: it reads from a
// topology what NCCL's topology search would see (ranks per node, GPU
// architecture, NVLink and NIC bandwidth, in-network reduction), runs
// NCCL's own tuning model on it (the constants and formulas of
// src/graph/tuning.cc and enqueue.cc, NCCL 2.30 by default; see
// NCCL-MODEL.md in the project's shared notes) to choose an algorithm, a
// protocol and a number of channels for each collective and size, and
// turns the choice into a plan that the simulator runs on the fabric, so
// contention, faults and unusual fabrics still show.
//
// The choice is NCCL's where the model says how NCCL chooses. What the
// simulator then runs is an approximation, stated per algorithm:
//
//   - Ring: NCCL's rings, one per channel, each its own lane, crossing
//     nodes on one NIC rail; data pipelined in chunks (NCCL's chunk size
//     per protocol); every message pays NCCL's per-hop latency for its
//     protocol and path class, and moves at NCCL's modelled bandwidth for
//     the protocol (ops.Wire); the collective starts after NCCL's base
//     latency (ops.Plan.Launch). NCCL's slot-based flow control (8 steps
//     of buffer per connection) is not modelled: a sender never waits for
//     a receiver's free slot.
//
// Algorithms NCCL would pick that the simulator cannot run yet (Tree,
// NVLS, NVLSTree, CollNet, PAT) are priced by the model but left out of
// the choice (Options.Simulable), and Estimates says what NCCL would
// have picked.
package nccl
