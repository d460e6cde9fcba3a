// Package sim is a deterministic, in-process simulator of a GPU fabric. It
// implements the hw interfaces, so the same algorithm code that drives CUDA
// or Metal devices drives simulated ones, with real data or (TimingOnly)
// with phantom buffers.
//
// # Model
//
// Time is integer picoseconds. A single-threaded discrete-event engine fires
// events in (time, sequence) order, where the sequence is the order in which
// events were scheduled; no map order, goroutine schedule or wall clock
// reaches a simulated result, so a rerun is identical down to the trace
// bytes.
//
// Transfers are flows over the topology's route between two GPUs (see
// topology.Route). A flow first spends the path's summed latency, then drains
// at its max-min fair share of every link direction it crosses, so an
// uncontended transfer of s bytes takes exactly Σ latency + s/bandwidth.
// Links are full duplex: each direction is a separate capacity. Fair shares
// are found by progressive filling and recomputed once per instant, only for
// the flows connected (through shared links) to a flow that started or ended,
// so flows that share nothing cost O(1) each and thousands of ranks stay
// fast. Where the flows that start or end cross only links that are not
// tight (links with room for every flow on them to run at the speed of its
// own slowest link, as a pipelined collective's mostly have), the instant
// is settled without visiting the flows connected to them, with the same
// rates bit for bit. Finish times are rounded to the nearest picosecond.
//
// A reduce or divide of s bytes runs on the device's reduction unit, a
// resource of capacity reduce_bw (the topology's GPU ReduceBW) shared fairly
// by the device's streams: alone it takes s/reduce_bw, and nothing when
// reduce_bw is infinite. Local copies take no simulated time. Send is eager:
// it completes when the bytes reach the peer, and a Recv at the head of its
// stream takes the oldest matching message at no cost. So a send followed by
// its receive and a reduce costs α + sβ + sγ, the terms of the α-β-γ model.
//
// A switch that reduces (NVLS on an NVSwitch: topology.Node.ReduceBW > 0)
// serves two more operations, the simulator's own, for the GPUs linked to
// it: a switch reduction (OpSwitchReduce: the switch reads a slice from
// every member and writes the reduction to the one that asks) and a
// multicast (OpMulticast: one member's slice written into every member).
// Each is one flow across every link it uses (the members' links up, or
// down) and, for a reduction, the switch's own reduction unit of capacity
// ReduceBW, which all reductions through the switch share; see
// switch.go.
//
// # Data
//
// Reductions are computed in Go by hw.ReduceBytes and hw.DivideBytes, the
// arithmetic contract that GPU kernels reproduce bit for bit. A send's data
// is captured when the transfer completes.
//
// # Driving the simulation
//
// Simulated time advances only inside Stream.Synchronize and Cluster.Run.
// Enqueue the work of every rank a wait depends on first (as the ops executor
// does). When no event is pending and work is left, the wait returns a
// *DeadlockError (wrapping hw.ErrDeadlock) that names every blocked rank,
// its stream, the operation it is stuck on and what that waits for.
//
// Time ends at Never, 2^63−1 ps (106.75 days): every duration is added
// with saturation, and an operation that would end there or later is
// held beyond the horizon, where it may still come back (a flow whose
// share of a link rises). If such work is all that is left, the wait
// fails it with an error wrapping ErrHorizon, never with a wrapped-round
// time or a deadlock; the ranks that waited on it fail naming it, as
// they would a crashed peer.
//
// With Config.Trace, WriteTrace writes Chrome/Perfetto trace-event JSON.
package sim
