// Package nccl predicts what NCCL does on a fabric: it reads from a
// topology what NCCL's topology search would see (Describe: ranks per
// node, GPU architecture, NVLinks and NCCL's figure for them, NICs,
// in-network reduction, host CPU), runs NCCL's own tuning model on it
// (the constants and formulas of src/graph/tuning.cc and enqueue.cc,
// NCCL 2.30 by default and any release from 2.18 on request; see
// NCCL-MODEL.md in the project's shared notes), in the environment an
// NCCL run reads (FromEnv: NCCL_ALGO, NCCL_PROTO, channels, threads,
// buffers, chunks, NVLS, CollNet and PAT), to choose an algorithm, a
// protocol and a number of channels for each collective and size (Tune),
// and turns the choice into a plan that the simulator runs on the fabric
// (Tuner.Plan), so contention, faults and unusual fabrics still show.
// CostTable is the model laid out as NCCL prints it at init
// (NCCL_DEBUG_SUBSYS=TUNING), Graphs the graphs it prices with and
// Channels the channels NCCL's init reports, for setting beside what
// NCCL printed on a machine; Tuner.Ranked is every pair its tuner weighs
// for a call, cheapest first.
//
// The choice is NCCL's where its model says how NCCL chooses. What the
// simulator runs is an approximation, stated per algorithm:
//
//   - Every plan carries NCCL's base latency as its launch, and a Wire:
//     per hop, NCCL's latency for the protocol and the path class
//     (NVLink, PCIe, network; from Hopper on, a ring's LL128 hop across
//     nodes takes the Simple one's, netHop); per byte, the protocol's
//     payload (LL 8 of 16 bytes, LL128 120 of 128); per channel, at most
//     one channel's speed in NCCL's model, the channels launched sharing
//     its whole bandwidth (which holds a ring or a tree to its slowest
//     link's pace).
//     A message lands its latency after its bytes leave, so a channel's
//     messages overlap their latencies; reductions are fused into the
//     transfers, as NCCL's kernels reduce while they copy.
//   - Each channel's connection to a peer has NCCL's buffer: NCCL_STEPS
//     = 8 slots of the protocol's step (Simple 512 KiB, LL 32 KiB and
//     LL128 576,000 bytes of payload; the p2p chunk for point-to-point;
//     Options.BuffSize, as NCCL_BUFFSIZE, sets the Simple step).
//     A message of at most a step holds its bytes there until the
//     sender hears that the peer received it (the receiver's word comes
//     back in the message's hop latency, as NCCL's head pointer does),
//     and a send waits for room, so a sender stays at most a buffer
//     ahead of a slow receiver, and a connection keeps at most a buffer
//     in flight per round trip. A message larger than a step
//     (a ring's whole block, moved in one pass) would stream through the
//     slots as the receiver drains them, which whole messages cannot
//     follow: it is not held. PAT's plan sends further ahead than 8
//     slots allow (NCCL's PAT kernel schedules its own steps), and is
//     eager. The slots hold bytes, and the simulator's LL and LL128
//     pieces are finer than NCCL's chunks, so a piece smaller than a step
//     holds less than the whole slot NCCL's chunk would.
//   - Ring (ops nccl-ring): one ring per channel, each its own lane,
//     crossing nodes on one NIC rail (channels spread over the rails).
//     All-reduce, all-gather and reduce-scatter move each channel's block
//     in one pass per step; broadcast and reduce chains forward in
//     NCCL's Simple step, or in pieces of a warp's lines for LL and LL128,
//     which forward lines as they arrive.
//   - Tree (ops nccl-tree, all-reduce): per channel a chain through each
//     node from the channel's NIC rail and NCCL's double binary tree
//     between the nodes, reduced up and broadcast down on lanes of their
//     own, in pieces (NCCL's tree chunk tuning for Simple), coarser than
//     NCCL's where a held plan's step budget would not hold that many
//     passes (heldChunk; ops.Plan.FineChunk then says NCCL's, and a
//     folded run makes the lanes it keeps at it, an unfolded one every lane
//     as near it as memory allows, ops.Plan.Refine). NCCL's model
//     slows a tree all-reduce by a per-size factor on its bandwidth
//     (NCCL measured its trees slower at middle sizes than its bandwidths
//     say): the factor sways the choice, as it does NCCL's, and what it
//     adds to the model's time opens the plan's run, once, on top of the
//     launch (the simulated tree already pays its pipeline's fill, which
//     slowing every hop would pay again). On 2 nodes a tree channel's speed within a node is the
//     search's second pass's (up the ladder while below twice the
//     network's and the NVLinks carry it), which NCCL's model reads
//     there: a tree's bandwidth may then pass a ring's.
//   - NVLS (ops nccl-nvls; across nodes over CollNet, below): each rank
//     has the NVSwitch reduce its part of every pass from all GPUs and
//     multicast the result back;
//     NVLSTree (ops nccl-nvlstree, several nodes): the node's switch
//     reduces, NCCL's tree joins the nodes, the switch multicasts. The
//     simulator's links and the switch's reduction bandwidth set the
//     pace, not NCCL's modelled NVLS bandwidth; NCCL's NVLS latency opens
//     the collective and each switch step pays a Simple step's handshake
//     (a run of them on a lane, once: NCCL keeps several steps in flight;
//     but an all-reduce's reduction, which its multicast waits for, lands
//     before the next pass's starts). Channels and chunks are NCCL's
//     setup's by release (nvlsSetupOf: 16, 24 or 32 channels, 2.30's
//     tuning for several Blackwell nodes) and its chunk ladders; NVLS on
//     one node makes at most 128 passes a channel, larger ones past that
//     (switchMaxPasses), NVLSTree NCCL's.
//   - PAT (ops nccl-pat, all-gather and reduce-scatter, one GPU per
//     node, or more with NCCL_PAT_ENABLE=1, Options.ForcePAT): every
//     block down (or, reducing, up) a binomial tree rooted at its rank,
//     log2(ranks) steps, farthest first for all-gather; NCCL's model's
//     fixed terms (a network hop over 3.5 per step, 2.8 µs per rank in
//     the launch) are the plan's.
//   - CollNet direct and chain (ops nccl-collnet-*): each node's heads
//     (direct: every GPU, the head of its share, which the node's GPUs
//     send it; chain: the channel's head, at the end of a chain through
//     the node) all-reduce through the network's switch (SHARP) with the
//     same heads of the other nodes, and send the result back;
//     all-gather and reduce-scatter gather or reduce the blocks of each
//     local index's ranks through the switch at that index's GPU. Its
//     links and reduction bandwidth set the pace;
//     NCCL's network hop is spent on each all-reduce through the switch,
//     its NVLink hop (and direct's 0.4 µs a GPU) on each message within
//     a node. NVLS across nodes runs over it (ops nccl-nvls in nodes):
//     the node's switch reduces, the network's switch all-reduces (or
//     all-gathers, or reduce-scatters) between nodes, the node's switch
//     multicasts. CollNet runs on the channels NCCL launches (direct
//     drops them for small sizes by its own rule) in NCCL's chunks. It,
//     and NVLS across nodes, reduce only what NCCL's SHARP plugin does:
//     sum, min and max; bf16 and 8-bit types on SHARP's third generation
//     only, which commsim takes from 400 Gb/s ports (elements.offSHARP).
//     NCCL prices chain with the tree's graph and, from 2.22, direct with
//     a search of its own, a channel for each GPU with a NIC
//     (collNetDirectGraph).
//   - All-to-all, gather and sendrecv run NCCL's point-to-point
//     transport (P2P, ops nccl-p2p; a gather is its root's receives from
//     every rank, as ncclGather makes them): every exchange at once, each on as many channels as
//     NCCL's split gives its size (more as it grows, to the most a peer
//     gets), at the machine's channel rate, or where it has none a
//     channel's share of the ring's bandwidth (across nodes
//     at most NCCL_P2P_PER_CHANNEL_NET_BW, 14 GB/s, by which NCCL counts
//     a network peer's channels), an all-to-all's exchanges sharing the
//     communicator's p2p channels; LL up to 16 KiB per channel, at the 9
//     warps of 16 a transfer's side of a channel has, else Simple.
//     NCCL's model has no point-to-point figures, so the ring's
//     latencies stand in. The launch grows with the sends and receives
//     the busiest GPU has within its node past a sendrecv's two
//     (localOpUS), and across nodes with the network sends and receives
//     its proxy thread takes in turn (proxyOpUS): figures published runs
//     measure.
//   - One rank: NCCL's cost table holds ring/Simple alone and the call
//     copies its buffer (ncclLaunchOneRank); the plan is ring/Simple's
//     launch and the copy at 1.5 × the GPU's reduce bandwidth
//     (oneRankCopy).
//
// Machine departs from NCCL's model where a machine is measured to:
// factors on its launch, hop latency and each protocol's speed (package
// calibrate fits them), and what one channel moves
// (Machine.ChannelGBps), a figure NCCL's model does not have. By default
// a channel moves at most what published runs measure on Hopper and
// Blackwell (MeasuredChannel); Machine.NoChannelRate leaves NCCL's model's
// shares alone.
//
// The host's part shows where one thread drives several GPUs (nccl-tests
// -g N): it launches every collective on them in turn, and an iteration
// takes at least ThreadFloorUS(N), N launches of host time, a figure a
// published run measures. Callers hold a simulated time to it.
//
// Not modelled: the tuner plugins some clusters load, and proxy threads
// beyond point-to-point's cost per network operation.
// Algorithms NCCL would pick that the simulator cannot run on a fabric
// (NVLS or CollNet across nodes whose GPUs are not numbered node by node)
// are priced by the model but left out of the choice (Simulable);
// Choice.NCCL says what NCCL itself would run.
package nccl
