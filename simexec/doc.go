// Package simexec runs ops plans on the simulator: it is the simulator's
// driver for ops.Executor, the package above both ops and sim (which
// import neither each other nor it).
//
//	c, _ := sim.NewCluster(topo, sim.Config{TimingOnly: true, Symmetry: true})
//	exec := simexec.NewExecutor(c)
//	seconds, err := exec.Run(plan, in, out)
//
// # Feeding
//
// ops hands a driver each rank's lanes as cursors (ops.Cursor), plain data
// pulled a few operations at a time. The generic driver drains them onto
// the streams at once, as a real device's queue holds its work anyway.
// This driver instead gives each lane to its simulated stream as a
// sim.Source: the stream pulls the next few operations at the simulated
// instant it has run the ones before, which gives the same times, to the
// picosecond, as enqueueing everything up front, while the simulation
// holds a few operations per lane. So a plan of a billion steps runs in
// memory that grows with the ranks and lanes, not the steps. It also moves
// a plan of package nccl as NCCL's protocols do (ops.Plan.Wire, Launch),
// which the generic driver cannot, and so refuses on the simulator. A streamed
// plan's lanes are made on goroutines of their own, a couple of batches
// ahead, so a spare core makes steps while the simulation runs; only the
// order of each lane's steps reaches the simulation, and that is fixed, so
// no goroutine schedule can change a result.
//
// # Mirroring
//
// A plan is rank-symmetric (ops.Plan.Symmetry) when every rank r runs
// what rank 0 runs with its peers renamed, q ↦ q+r mod p (rotation: rings,
// pairwise exchanges) or q ↦ q xor r (xor: recursive halving and doubling
// on 2^k ranks), with the same kinds, sizes, tags and lanes. A fabric
// folds (sim.Cluster.Mirror) when the renamings of ranks by multiples of a
// block b map it onto itself: b = 1 for GPUs on one switch, b = the node
// size for nodes on a network (cluster:MxG, dgx-h100xN). A link that the
// renamings move onto fewer images than there are renamings (a spine's,
// which they fix) carries every block's flows in the full run: on the
// mirror its bandwidth is divided by the number of renamings over its
// images'.
//
// A plan that no such group maps onto itself but a shift by a block
// does, rank r running rank r mod b's program with its peers shifted by
// r − r mod b (ops.Plan.MirrorsInBlocks), mirrors too, on a block that
// is the fabric's or a power-of-two multiple of it
// (sim.Cluster.MirrorBy): NCCL's rings, whose way through a node
// alternates from node to node, by two nodes.
//
// Then rank r+k·b starts every step at the same instant as rank r, and
// each flow shares its links only with images of the flows of ranks
// 0..b-1. So ranks 0..b-1, run alone on a mirror where every link stands
// for its orbit and a message to rank q goes to rank q mod b, take exactly
// the time of the full run, provided the messages pair up there
// (ops.Plan.PairsUpInBlocks). A 1024-rank ring on a switch is timed by
// simulating one rank.
//
// The driver mirrors only what it can promise: Executor.Run (every rank
// starting at once on an idle cluster) of a symmetric plan whose messages
// pair up, on a cluster made with sim.Config.Symmetry that is timing-only,
// untraced, unseeded and free of faults, over a fabric that folds with no
// route crossing an orbit twice or tied with another shortest path. A run
// that fails on the mirror is run again on every rank, which reports the
// failure as it really happens. Tests hold mirrored and full runs equal to
// the picosecond.
//
// A plan's switch steps (ops.StepSwitchReduce, ops.StepMulticast: NVLS)
// become the simulator's switch operations, which reach the other members'
// buffers of the same run (ops.RankJob.MemberSlice) and move with the
// plan's Wire; its network collectives (ops.StepNetAllReduce and the
// others of ops.StepKind.IsNet: SHARP) become the simulator's switch
// collectives (sim.OpSwitchAllReduce, …) that the members of its network
// group meet at, matched by the plan's tag. They act on
// several ranks at once, which a mirror cannot fold: plans with them are
// never mirrored, and a fabric folded by a rotation does not run network
// collectives (the run is simulated whole instead).
//
// A whole workload of ranks that all do the same (a training step with no
// faults) can be mirrored the same way by running only ranks 0..b-1 of it
// on the mirror: see Driver.Mirror.
//
// # Thinning
//
// NCCL's plans are not rank-symmetric across nodes (a tree gives nodes
// different roles), but their channels repeat or turn into each other
// (below): a ring's 16 channels over nodes of 8 GPUs are 8 pairs that take
// the same path, an NVLS node's channels are alike. When a plan's channels come in k identical copies
// (ops.Plan.FoldChannels), every link and reducing switch carries all k
// or none, each getting the same share of it. So one copy, run on every
// rank of a cluster whose every bandwidth is divided by k
// (sim.Cluster.Thinned), takes exactly the time of them all, in 1/k of
// the work.
//
// The copy's channels may in turn be images of each other: NCCL's ring
// channel c has its head on GPU c of each node, so rotating every node's
// GPUs by s maps channel c onto c+s. Then the first s channels, on every
// rank of a fabric folded by that renaming as a mirror is (each link
// standing for its orbit, sim.Cluster.Rotated), carry on each folded link
// exactly what all channels carry on one real link (ops.Plan.FoldRotation).
// NCCL's trees have no copies, since each GPU heads a channel of each of
// its two trees, but rotating by 1 maps channel c onto c+2, and on an even
// number of nodes tree 1 is tree 0 mirrored, so mirroring the nodes maps a
// GPU's two channels onto each other: the first channel, on the fabric
// folded by the group of the two renamings, stands for all
// (ops.Plan.FoldRotationAndMirror). 16 ring or tree channels on nodes of
// 8 run as 1. Where fewer channels than a node's GPUs run each tree (a
// rack of 64 GB200s, 16 heads), no rotation maps them, but the mirror
// alone maps channel c onto c+C/2, and half stand for all
// (ops.Plan.FoldMirror). Only plans with a Wire and no switch steps fold
// so: a rank keeps only its part of the channels, so what its device does
// for all of them at once (reductions, which a Wire fuses into the
// transfers; a switch's) would be shared less. Back to back, a rank of
// such a fold starts its next run when every rank of its orbit has ended
// its last (ops.Executor.EnqueueBackToBackWaiting): those run the images
// of the channels it does not keep, so the last of them ends when its own
// whole run would.
//
// NVLS and NVLSTree give local GPU i part i of every pass instead: rotating
// every node's GPUs maps each rank's work onto another's, lane for lane.
// The nodes' first GPUs, which keep all their work, then stand for all
// (ops.Plan.FoldRanks) on the fabric folded by the rotation, where each
// switch operation crosses its members' folded links once per member and
// a switch that reduced for all its members reduces for one, at its
// bandwidth shared out. The driver does these where it cannot mirror,
// under the same conditions; tests hold thinned, rotated and full runs
// equal to the picosecond.
//
// A thinned or rotated run keeps a few of the plan's lanes or ranks, so
// it can afford the pieces a plan held whole could not: where package
// nccl coarsened a plan's pieces to hold every lane (ops.Plan.FineChunk),
// the kept lanes or ranks are made again at the finer ones
// (ops.Plan.Refine), and take the time, to the picosecond, of the plan
// made whole at them. A plan that neither mirrors nor folds (NCCL's 32
// trees over two 64-GPU racks), and every plan run with Symmetry off, the
// executor makes again whole, as fine as half of ops.MaxPlanSteps holds
// (ops.Executor.RunBackToBack).
package simexec
