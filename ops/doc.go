// Package ops holds commsim's collectives as plans, and the one executor
// that runs any plan on any hw world. It imports hw only.
//
// An algorithm (ring, rd, rhd, tree, dbtree, direct, pairwise) compiles a
// Spec — the op, the ranks, the count, the dtype, the reduce op — into a
// Plan: for every rank, an ordered list of steps (send, recv, reduce,
// copy, divide) on one or more lanes, with explicit dependencies. Because
// the plan fixes every reduction's order, results are bit for bit the same
// on every backend that follows hw's arithmetic contract.
//
// More steps need a switch that reduces (NVLS on an NVSwitch,
// SHARP on a network switch). Two act on every rank of a group at once
// (a node, or for CollNet every node of one GPU: Spec.Group): a switch
// reduction and a multicast (StepSwitchReduce, StepMulticast). The
// network's collectives (StepNetAllReduce, StepNetAllGather,
// StepNetReduceScatter: IsNet) are run by every member of a network
// group (the ranks of one local index: Spec.NetGroup) on its own memory,
// and their members meet as a message's ends do. No hw device offers them (CUDA reaches NVLS and SHARP only
// inside NCCL, through "native"), so plans that use them (algorithms
// nccl-nvls, nccl-nvlstree, nccl-collnet-*; see UsesSwitch, NeedsSwitch)
// run on the simulator only, through package simexec, and AlgorithmsFor
// leaves their algorithms out.
//
// A plan is plain data:
//
//   - Check proves it correct without running it: every send received, no
//     deadlock, no unordered access, every output element holding exactly
//     its contributions in the documented order;
//   - Cost prices it with the α-β-γ model over a topology's paths, and
//     Select picks the cheapest plan ("auto");
//   - Executor.Run runs it on a world and times it with events.
//
// Plans of more than StreamAbove steps are streamed: Compile counts them,
// and the executor makes each rank's steps on a goroutine of its own, a
// few batches ahead of a backend that implements hw.Feeder and asks for
// them, so memory grows with the ranks, not the steps, and a spare core
// makes steps while the simulation runs.
// Algorithm "native" is the backend's own library (NCCL), reached through
// hw.NativeCollectives.
package ops
