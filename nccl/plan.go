package nccl

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// Chunk sizes in bytes per channel step (init.cc:810-829,
// enqueue.cc:2222-2227): a Simple step is 512 KiB by default (a 4 MiB
// buffer over NCCL_STEPS = 8 slots; see Options.BuffSize), an LL step
// carries 32 KiB of payload, an LL128 step 576,000 bytes. Broadcast and
// reduce move one step at a time.
const (
	defaultSimpleStep = 512 << 10
	llChunk           = 32 << 10
	ll128Chunk        = 4915200 / 8 * 15 / 16
)

// ncclSteps is NCCL_STEPS (device.h): the slots of every connection's
// buffer, each holding one step.
const ncclSteps = 8

// finishWire gives w the buffer of NCCL's connections: ncclSteps slots
// of stepBytes of payload each, so that a sender stays at most a buffer
// ahead of its receiver. The slots hold bytes, not messages: the
// simulator's LL and LL128 pieces are finer than NCCL's chunks (see
// chainChunk), and a slot each would throttle them as NCCL's are not.
// And it gives w the network crossing NCCL's network figures stand for
// (topology.NetCrossing): a route across the network that takes longer
// (more switches, slower ones, an NVLink hop to another rail's NIC)
// lands the difference later.
func finishWire(w *ops.Wire, stepBytes int64) *ops.Wire {
	w.Slots, w.SlotBytes = ncclSteps, stepBytes
	w.Reference[ops.PathNet] = topology.NetCrossing
	return w
}

// machineHops turns NCCL's per-hop figures in w, which are Hopper's, into
// the machine's: an NVLink hop also takes what s's GPUs' crossing takes
// beyond Hopper's (NCCL's one figure for every generation leaves it out,
// and its tuner does not see it), and every hop scales by m.Hop.
func machineHops(w *ops.Wire, s System, m Machine) {
	w.Latency[ops.PathNVLink] += s.Arch.NVLinkExtraLatency()
	for class := range ops.NumPathClasses {
		w.Latency[class] *= orOne(m.Hop)
	}
}

// chunkBytes is the bytes a channel of a broadcast or a reduce moves per
// step with protocol p.
func chunkBytes(p int, o Options) int {
	switch p {
	case ll:
		return llChunk
	case ll128:
		return ll128Chunk
	}
	return o.simpleStep()
}

// chainChunk is the bytes a broadcast or reduce chain forwards at a
// time with protocol p: NCCL's step for Simple, which waits for a whole
// step before it forwards; LL and LL128 forward lines as they arrive,
// which the simulator approaches with pieces of a quarter of a channel's
// data per rank, no smaller than what a warp moves at once (32 lines) in
// a block's time. A line crosses a hop in that time however many
// channels share NCCL's bandwidth: a channel slowed to a share of a
// block's speed forwards pieces that much smaller (down to a line), so
// that a chain's or a tree's fill does not grow with the channels
// launched.
func chainChunk(spec ops.Spec, p int, o Options, share float64) int {
	step := chunkBytes(p, o)
	if p == simple {
		return step
	}
	line := int64(16)
	if p == ll128 {
		line = 128
	}
	warp := max(line, int64(32*share)*line)
	in, out := spec.BufferLens()
	perChannel := int64(max(in, out)) * int64(spec.DType.Size()) / int64(max(1, spec.Channels))
	return int(min(int64(step), max(warp, perChannel/int64(4*spec.Ranks))))
}

// heldChunk is chunk, or larger where a channel would make more passes
// than a plan held in memory has room for (steps, at stepsPerPass steps a
// pass for each rank): at scale, fewer and larger pieces, where a
// broadcast of a terabyte in 512 KiB steps was minutes of planning and
// one of 2^63 bytes hours. Plan records chunk as the plan's FineChunk
// then, and what runs is made again at it: the channels a folded run
// keeps, or every channel as near it as half of ops.MaxPlanSteps allows
// (ops.Plan.Refine, which an executor does where the simulator's driver
// does not).
func heldChunk(spec ops.Spec, chunk int64, stepsPerPass int, steps int64) int64 {
	perChannel := bytesOf(spec) / int64(max(1, spec.Channels))
	maxPasses := heldPasses(steps, spec.Ranks, spec.Channels, stepsPerPass)
	return max(chunk, (perChannel+maxPasses-1)/maxPasses)
}

// wholePlanSteps bounds a tree's or NVLSTree's plan of every channel: a
// sixteenth of ops.MaxPlanSteps, since it is only checked and folded
// before what runs is made again finer (heldChunk, nvlsPlan). At half,
// the plan made first was most of a 1024-GPU all-reduce sweep's time and
// memory (39 s and 4.7 GiB against 20 s and 1.9 GiB on a slow day of the
// project's machine, the same table). A chain's plan keeps half: past
// ops.StreamAbove steps it is streamed, never folded, and runs as made;
// held at a sixteenth it folds and its kept channels run at NCCL's
// pieces (a 1 GiB broadcast on 1024 GPUs 17.2 ms where the coarse pieces
// take 36.4), but the 1024-GPU broadcast sweep took 4 times as long and
// 5.8 GB.
const wholePlanSteps = ops.MaxPlanSteps / 16

// heldPasses is the most passes a channel has room for in a plan of at
// most steps steps, shared by ranks × channels lanes of stepsPerPass
// steps a pass.
func heldPasses(steps int64, ranks, channels, stepsPerPass int) int64 {
	return max(1, steps/(int64(ranks)*int64(max(1, channels))*int64(stepsPerPass)))
}

// chainStepsPerPass bounds a rank's steps per pass of a chain: a receive,
// a reduction, a send and a copy.
const chainStepsPerPass = 4

// treeChunk is the bytes NCCL's tree forwards at a time with protocol p: for
// Simple, NCCL's step, halved while a channel would make too few passes
// for the tree's depth (below 8 × depth passes down to 128 KiB, 4 × down
// to 64 KiB, 1 × down to 32 KiB: enqueue.cc's tree chunk tuning, which
// NCCL 2.20 dropped; kept for every version, since whole steps through
// a wire whose NVLink hops go at the channel's share of the NIC would
// fill a deep tree far slower than NCCL does); for LL and LL128 as a
// chain's. The depth is one more than NCCL's, a node's GPUs and the
// ceiling of log2 of the nodes, where NCCL's is a node's chain and the
// floor (connect.cc, connectTrees), on evidence: the simulated tree's
// whole steps fill it slower than NCCL's do, and with NCCL's depth, which
// halves the step at fewer sizes, OCI's 2 × 8 A100 all-reduce comes out
// 15% slow at 1 GiB (4.5% with this one) and p4de's 11-15% at 256-512
// MiB (1-5%).
func treeChunk(s System, spec ops.Spec, p int, o Options, share float64) int {
	perChannel := bytesOf(spec) / int64(max(1, spec.Channels))
	chunk := int64(chainChunk(spec, p, o, share))
	if p == simple {
		depth := int64(s.PerNode - 1 + bits.Len(uint(max(0, s.Nodes-1))) + 1)
		chunk = halved(chunk, perChannel, depth, []rung{{8, 128 << 10}, {4, 64 << 10}, {1, 32 << 10}})
	}
	return int(chunk)
}

// rung is a step of NCCL's chunk ladders (enqueue.cc, calcCollChunking):
// a chunk above floor is halved while the bytes make fewer than times ×
// depth of it.
type rung struct{ times, floor int64 }

// halved is chunk down ladder for bytes (a channel's, or a head's) and
// depth.
func halved(chunk, bytes, depth int64, ladder []rung) int64 {
	for _, r := range ladder {
		for bytes/chunk < r.times*depth && chunk > r.floor {
			chunk /= 2
		}
	}
	return chunk
}

// treeStepsPerPass bounds a rank's steps per pass of a tree channel: up,
// a receive and a reduction per child and a send; down, a receive and a
// send per child.
const treeStepsPerPass = 10

// Plan compiles spec as NCCL runs it per choice c: NCCL's rings or trees
// with c's channels, keeping to rails across nodes, with the wire and the
// launch of c's algorithm and protocol (see the package doc for what is
// approximated).
func Plan(s System, spec ops.Spec, c Choice, o Options) (*ops.Plan, error) {
	if err := cmp.Or(s.check(), o.check()); err != nil {
		return nil, err
	}
	if c.Channels < 0 {
		return nil, fmt.Errorf("nccl: %d channels: want 1 or more (0 for one)", c.Channels)
	}
	p, ok := protoIndex(c.Protocol)
	if !ok || !Simulable(s, c.Algo) {
		return nil, fmt.Errorf("nccl: commsim cannot simulate %v on %s yet", c.Estimate, s)
	}
	switch c.Algo {
	case NVLS, NVLSTree:
		return nvlsPlan(s, spec, c, o)
	case CollNetDirect, CollNetChain:
		return collNetPlan(s, spec, c, o)
	}
	spec.Algo, spec.Channels = "nccl-"+c.Algo.String(), max(1, c.Channels)
	if c.Algo == Tree {
		// NCCL connects the channels its search found (init.cc: the
		// fewer of the tree's and the ring's) to its first tree and
		// their duplicates to its second (connect.cc, connectTrees).
		spec.TreeChannels = min(bandwidths(s, Tree).channels, bandwidths(s, Ring).channels)
		// and later copies run the tree of the channel they copy.
		_, spec.TreeCopies = collLayout(s, o)
	}
	alone, each, ok := channelSpeeds(s, spec, c.Algo, p, o)
	share := 1.0 // of a block's speed, that each channel moves at
	if ok {
		share = each / alone
	}
	// want is the bytes NCCL moves at a time, where a tree or chain
	// forwards in pieces; held is as many as a plan held in memory has
	// room for, when that is more.
	var want, held int64
	switch {
	case c.Algo == Tree:
		want = int64(treeChunk(s, spec, p, o, share))
		held = heldChunk(spec, want, treeStepsPerPass, wholePlanSteps)
	case spec.Op == ops.Broadcast || spec.Op == ops.Reduce:
		// A chain pipelines: a rank forwards chunk i while chunk i+1
		// arrives. (Around a ring every rank is busy at every step, and
		// NCCL's loops over chunks would only pay the per-step latency
		// once per loop where NCCL's model pays it once per step.)
		want = int64(chainChunk(spec, p, o, share))
		held = heldChunk(spec, want, chainStepsPerPass, ops.MaxPlanSteps/2)
	}
	size := int64(spec.DType.Size())
	if held > 0 {
		spec.Chunk = int(max(1, held/size))
	}
	if s.Nodes > 1 && s.NodeMajor && !(c.Algo == PAT && s.PerNode > 1) {
		// PAT on nodes of several GPUs (NCCL_PAT_ENABLE=1) walks its
		// trees over ranks whatever their nodes, as NCCL's does: its
		// steps within a node take NVLink, the others the network.
		spec.NodeRanks = s.PerNode
		if (spec.Op == ops.Broadcast || spec.Op == ops.Reduce) && p != simple {
			// NCCL's proxy sends an LL step across the network once
			// every line of it has its flag, an LL128 step once the GPU
			// has posted it whole (net.cc, sendProxyProgress): a chain
			// crosses between nodes a step at a time.
			spec.NetChunk = int(max(1, int64(chunkBytes(p, o))/size))
		}
	}
	plan, err := ops.Compile(spec)
	if err != nil {
		return nil, err
	}
	plan.Protocol = c.Protocol
	if fine := int(max(1, want/size)); held > want && fine < spec.Chunk {
		plan.FineChunk = fine // a folded run may make its lanes at it (ops.Plan.Refine)
	}
	plan.Wire, plan.Launch = wire(s, spec, c.Algo, p, o, each)
	plan.Launch += treeDip(s, spec, c, p, o)
	if c.Algo == PAT {
		plan.Wire, plan.Launch = patWire(s, plan.Wire, plan.Launch, o)
	}
	return plan, nil
}

// wire is how the messages of algorithm a (ring or tree) with protocol
// p move for spec, and the launch that opens the collective: NCCL's base
// latency, and per hop its latency for each path class; NCCL's model
// multiplies a multi-node Ring/Simple all-reduce's by a plateau factor
// (ringPlateau), as its estimate does. An NVLink hop also takes what the
// GPUs' crossing takes beyond Hopper's, which NCCL's one figure for every
// generation leaves out (its tuner does not see it). Every byte on the
// wire carries the protocol's share of payload (LL 8 of 16 bytes, LL128
// 120 of 128), and each channel moves at most its share of the bandwidth
// of NCCL's model, rate GB/s (channelSpeeds; 0 where the model gives
// none), and at most the machine's channel rate (Machine.ChannelGBps): a
// channel is one block of threads, and a ring or a tree goes at its
// slowest link's pace.
func wire(s System, spec ops.Spec, a Algo, p int, o Options, rate float64) (*ops.Wire, float64) {
	v := o.Release()
	if a == Tree && p == simple && v >= v2_19 && v < V2_23 {
		// A Simple tree's hop cost 4 µs within a node in NCCL 2.18.3's
		// model, 28 in 2.18.1's and 2.19-2.22's, and 4 again from 2.23 on
		// (with an 8.4 µs base for their 0): a figure that steers the
		// tuner's choice, not the machine's. The choice takes the
		// release's; the hops take the figures NCCL has kept since.
		v = V2_23
	}
	scale := 1.0
	if a == Ring {
		scale = ringPlateau(s, spec.Op, p, bytesOf(spec), collChannels(s, o))
	}
	var w ops.Wire
	for class := range ops.NumPathClasses {
		w.Latency[class] = hwLatency(class, a, p, v) * 1e-6 * scale
	}
	w.Latency[ops.PathNet] = netHop(s, a, p, v) * 1e-6 * scale
	w.Latency[ops.PathNVLink] = max(w.Latency[ops.PathNVLink], ringStepFloor(s, spec.Op, a, p)*1e-6*scale)
	factor := 1.0
	switch p {
	case ll:
		factor = 0.5 // the line's payload, whatever share of bandwidth NCCL's model gives LL
	case ll128:
		factor = 120.0 / 128
	}
	for class := range ops.NumPathClasses {
		w.Efficiency[class] = factor
	}
	w.Rate = 1e9 * rate
	// NCCL's figures, its step's floor on several nodes among them, are
	// Hopper's.
	m := o.Machine
	machineHops(&w, s, m)
	w.Rate = m.channelBound(s, w.Rate, 1) * orOne(m.Bandwidth[p])
	return finishWire(&w, int64(chunkBytes(p, o))), baseLatency(a, p, v) * 1e-6 * scale * orOne(m.Launch)
}

// netHop is what a hop of algorithm a with protocol p takes across
// nodes on the machine, in µs: NCCL's figure (interLatency), but on
// Hopper and later a ring's LL128 hop takes NCCL's Simple one. A GPU
// ends each LL128 step it sends to the network as it ends a Simple step:
// with a barrier of its block, a fence at system scope (prims_ll128.h,
// postSend: __threadfence_system from sm_90, a device-scope fence
// before) and the tail its proxy waits for before it sends (net.cc,
// sendProxyProgress), where the proxy sends an LL step as soon as its
// lines' flags read. NCCL's model prices the ring's LL128 hop near LL's
// (4.0 µs against 2.7; Simple 14), and its tuner keeps that (latency).
// Evidence, all held out or a target: two-node LL128 rings on H100, H200,
// B200 and GB300 (1-32 MiB) took 15-31 µs an all-gather and 45-72 an
// all-reduce more than the simulation with NCCL's figure, about 10 µs a
// crossing; against it, xxrjun's ten-node rings (network unstated) show
// none at 32 MiB, though their Simple rings run faster than NCCL's 14 µs
// hop allows too. A tree keeps NCCL's LL128 figure, already 8.5 µs: with
// Simple's, its held-out logs came out no closer on the whole (from 64
// KiB to 16 MiB, three of the 309 issue's 2 to 8 nodes closer, its 32
// H100s 13% → 26%, Red Hat's 16 H200s 7% → 11%, OCI's 128 GB200s 13% →
// 17%).
func netHop(s System, a Algo, p int, v Version) float64 {
	if a == Ring && p == ll128 && s.Arch.SM() >= 90 {
		p = simple
	}
	return interLatency(s, a, p, v)
}

// channelSpeeds are, in GB/s, the speed of one block of threads (a
// channel alone) and the speed of each of spec's channels, and whether
// NCCL's model gives them. A channel is one block: it moves at most its
// share of one of the search's channels in NCCL's model (connect.cc runs
// each ring and tree on two blocks, as the point-to-point channels share
// them), and the channels launched share the model's whole bandwidth
// (its caps are on the sum). A ring channel's step carries 1/ranks of its
// data, as bus bandwidth counts; a tree's carries all of it, as
// algorithm bandwidth does.
func channelSpeeds(s System, spec ops.Spec, a Algo, p int, o Options) (alone, each float64, ok bool) {
	v := o.Release()
	g := graphOf(s, a, v)
	if a == Tree {
		// The chain's links carry more than the model counts (chainShare);
		// its per-channel caps still bound what a channel moves.
		g.intra *= chainShare(s, spec.Op, p, g)
	}
	one := g
	one.channels = 1
	all, alone := busBandwidth(s, spec.Op, a, p, g, v), busBandwidth(s, spec.Op, a, p, one, v)
	if a == Tree {
		all, alone = all*busToAlg(s, spec.Op, a, v), alone*busToAlg(s, spec.Op, a, v)
	}
	if !finite(all) || !finite(alone) || !(alone > 0) {
		return 0, 0, false
	}
	if a == Ring || a == Tree {
		alone *= min(1, float64(g.channels)/float64(collChannels(s, o)))
	}
	return alone, min(alone, all/float64(max(1, spec.Channels))), true
}

// chainShare is how much faster than NCCL's model the links of a Simple
// tree all-reduce's chain within a node carry it on two nodes (1 where
// they do not): the model prices the tree by the chain (bwIntra) and
// takes every byte to cross each GPU's links twice, up and down (busBw ×
// 0.5), but a chain's leaf sends only up and its head, whose other side
// is the network, only down, and NCCL's two-node search starts each
// channel at its NIC's GPU, so heads and leaves rotate over the GPUs:
// 2(ppn−1) sends a byte over ppn GPUs, ppn/(ppn−1) of the model's figure;
// no more than the network carries, one send a byte each way (bwInter a
// channel). The model's per-channel caps still apply (channelSpeeds
// scales bwIntra beneath them). Not on one node, where NCCL's tree
// channels all replay one chain, and not on GPUs numbered across nodes,
// whose tree is not a chain a node. LL's figure is its protocol's cost
// (busBw/3.8), not the links'; LL128's is the links' (× 120/128) and is
// left out on evidence alone: with it, OCI's 2 × 8 A100 run goes from
// 12.1% to 13.9% (4-16 MiB 13-17% fast).
func chainShare(s System, op ops.Op, p int, g graph) float64 {
	if op != ops.AllReduce || p != simple || s.Nodes != 2 || !s.NodeMajor || s.PerNode < 2 || !(g.intra > 0) || !(g.inter > 0) {
		return 1
	}
	return max(1, min(float64(s.PerNode)/float64(s.PerNode-1), 2*g.inter/g.intra))
}

// treeDip is the time NCCL's model adds to a tree all-reduce at sizes
// where its per-size correction (machineCorrection) is below 1: the
// model's bandwidth term divided by the factor, less the term itself.
// NCCL measured its trees slower there than its bandwidths say; the
// simulator's tree already pays its pipeline's fill, so the dip is added
// as the model states it, once per collective, and not by slowing every
// hop (which would multiply the fill as well).
//
// The dip is the machine's, not the release's: NCCL's model states
// NVLSTree's on Blackwell from 2.29 on, and runs its tuner does not
// correct show it as well. A 2 × 8 B200 all-reduce with NCCL 2.26.2 ran
// 16–256 MiB 10–21% slower than NVLSTree's links and switch without it.
// On Hopper, eight published H100 and H200 runs of 2 to 8 nodes on four
// clusters (held out of issue #16's targets) ran NVLSTree 8–30% slower
// than that at 8–256 MiB (10–19% at most sizes), converging on the
// bandwidth from 1 GiB, the factor's shape, and agree better with it;
// two ten-node runs agree less well (docs/nccl.md). So every release's
// run on every generation takes the dip, while the release's own model
// makes the choice.
func treeDip(s System, spec ops.Spec, c Choice, p int, o Options) float64 {
	bytes := bytesOf(spec)
	corr := machineCorrection(s, spec.Op, c.Algo, p, bytes)
	if corr >= 1 || !finite(c.AlgBW) {
		return 0
	}
	return float64(bytes) / (1e9 * c.AlgBW * orOne(o.Machine.Bandwidth[p])) * (1/corr - 1)
}

// TreeDip is the seconds of the launch of t's plan for spec with choice c
// that are NCCL's tree correction (see treeDip) rather than its launch:
// they scale with the protocol's bandwidth, not with Machine.Launch.
func (t *Tuner) TreeDip(spec ops.Spec, c Choice) float64 {
	p, ok := protoIndex(c.Protocol)
	if !ok || t.accepts(spec) != nil {
		return 0
	}
	return treeDip(t.System, spec, c, p, t.Options)
}

// FixedLaunch is the seconds of the launch of t's plan for spec with
// choice c that Machine.Launch does not scale: NCCL's tree correction
// (TreeDip), and what a group of point-to-point exchanges adds to a
// sendrecv's launch (p2pGroupUS): its operations within the node and its
// proxy's turns across nodes, rather than a kernel's launch.
func (t *Tuner) FixedLaunch(spec ops.Spec, c Choice) float64 {
	if t.accepts(spec) != nil {
		return 0
	}
	if c.Algo == P2P {
		return p2pGroupUS(t.System, spec, c.Channels, t.Options.Release()) * 1e-6
	}
	return t.TreeDip(spec, c)
}

// bytesOf is NCCL's size of a collective: the larger of a rank's send and
// receive buffers (enqueue.cc:2127).
func bytesOf(spec ops.Spec) int64 {
	in, out := spec.BufferLens()
	return int64(max(in, out)) * int64(spec.DType.Size())
}

// Label names a plan the way the algo column shows NCCL's choice,
// "ring/LL128/16ch", or gives its algorithm's name for any other plan.
func Label(plan *ops.Plan) string {
	if plan == nil {
		return ""
	}
	if !ops.IsNCCL(plan.Algo) {
		return plan.Algo
	}
	return fmt.Sprintf("%s/%s/%dch", strings.TrimPrefix(plan.Algo, "nccl-"), plan.Protocol, max(1, plan.Channels))
}

// Tuner chooses and compiles NCCL's plans on one fabric.
type Tuner struct {
	System  System
	Options Options
}

// NewTuner reads t's system for NCCL's model.
func NewTuner(t *topology.Topology, o Options) (*Tuner, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	s, err := Describe(t)
	if err != nil {
		return nil, err
	}
	return &Tuner{System: s, Options: o}, nil
}

// accepts says why t cannot choose for spec, or nil: a Tuner NewTuner
// did not make, Options set since that NewTuner or With would refuse (the
// field is the caller's to write), a spec Validate refuses, or ranks other
// than the fabric's GPUs.
func (t *Tuner) accepts(spec ops.Spec) error {
	if err := t.made(); err != nil {
		return err
	}
	if err := t.Options.check(); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	if spec.Ranks != t.System.Ranks {
		return fmt.Errorf("nccl: %v has %d ranks and the fabric %d GPUs", spec.Op, spec.Ranks, t.System.Ranks)
	}
	return nil
}

// ChannelGBps is what one channel moves at most on t's fabric, in GB/s:
// the machine's rate, or the one published runs measure on its GPUs
// (MeasuredChannel); 0 for none.
func (t *Tuner) ChannelGBps() float64 {
	if t == nil {
		return 0
	}
	return t.Options.Machine.channelGBps(t.System)
}

// made refuses a Tuner NewTuner did not make.
func (t *Tuner) made() error {
	if t == nil || t.System.check() != nil {
		return errors.New("nccl: a Tuner is made by NewTuner")
	}
	return nil
}

// With is a tuner of the same system in environment o.
func (t *Tuner) With(o Options) (*Tuner, error) {
	if err := t.made(); err != nil {
		return nil, err
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	return &Tuner{System: t.System, Options: o}, nil
}

// Plan chooses NCCL's algorithm, protocol and channels for spec and
// compiles the plan the simulator runs, with the choice. Where the
// choice's plan is too large to hold (ops.ErrTooLarge: CollNet direct's
// all-gather on 1024 GPUs from 64 MiB, whose every GPU takes each node's
// piece on each of 16 channels), it runs the cheapest pair in NCCL's
// ranking whose plan compiles: the Choice's Estimate is then that pair,
// and its NCCL still what NCCL would run, as where commsim cannot
// simulate NCCL's choice at all.
func (t *Tuner) Plan(spec ops.Spec) (*ops.Plan, Choice, error) {
	c, err := t.Choose(spec)
	if err != nil {
		return nil, c, err
	}
	plan, err := t.compile(spec, c)
	if errors.Is(err, ops.ErrTooLarge) && !isP2P(spec.Op) {
		tooLarge := err
		ranked, _ := t.Ranked(spec)
		for _, e := range ranked {
			if e == c.Estimate || !Simulable(t.System, e.Algo) {
				continue
			}
			alt := Choice{Estimate: e, NCCL: c.NCCL}
			if plan, err := t.compile(spec, alt); err == nil {
				return plan, alt, nil
			}
		}
		return nil, c, tooLarge
	}
	return plan, c, err
}

// compile makes the plan of choice c for spec.
func (t *Tuner) compile(spec ops.Spec, c Choice) (*ops.Plan, error) {
	var plan *ops.Plan
	var err error
	if isP2P(spec.Op) {
		plan, err = p2pPlan(t.System, spec, c, t.Options)
	} else {
		plan, err = Plan(t.System, spec, c, t.Options)
	}
	if err != nil {
		return nil, err
	}
	plan.Launch += oneRankCopy(t.System, spec)
	return plan, nil
}

// oneRankCopy is the seconds a call on one rank spends copying: NCCL runs
// no algorithm there but copies the send buffer into the receive buffer
// (enqueue.cc, ncclLaunchOneRank: a device-to-device cudaMemcpyAsync; a
// send to itself, its kernel's copy), at what a copy moves on the GPU,
// 1.5 times its reduce bandwidth: a copy reads and writes each byte once
// where a reduction reads two and writes one, and the presets' reduce
// figures come from a measured copy (topology/preset_numbers.go). An
// in-place call copies nothing, but the simulator prices it as the
// out-of-place one. 0 on several ranks, or where the GPU reduces for
// free.
func oneRankCopy(s System, spec ops.Spec) float64 {
	if s.Ranks != 1 || !(s.ReduceBW > 0) || math.IsInf(s.ReduceBW, 1) {
		return 0
	}
	return float64(bytesOf(spec)) / (1.5 * s.ReduceBW)
}

// Choose is NCCL's choice for spec, without compiling a plan: its
// tuner's for a collective, its point-to-point transport (P2P) for an
// all-to-all or a sendrecv.
func (t *Tuner) Choose(spec ops.Spec) (Choice, error) {
	if err := t.accepts(spec); err != nil {
		return Choice{}, err
	}
	if isP2P(spec.Op) {
		return p2pChoice(t.System, bytesPerPeer(spec), t.Options), nil
	}
	return tune(t.System, spec.Op, bytesOf(spec), t.Options, elements{spec.DType, spec.Redop})
}

// Ranked are the algorithm and protocol pairs NCCL's tuner weighs for
// spec, cheapest first by its model's time (the pairs it leaves out
// omitted; ties in NCCL's order, as it keeps the first): the first is
// what NCCL would run (Choice.NCCL), the gap to the second how far the
// model is from choosing otherwise. An all-to-all or a sendrecv has its
// point-to-point transport alone, which NCCL's model does not price (its
// TimeUS is 0).
func (t *Tuner) Ranked(spec ops.Spec) ([]Estimate, error) {
	if err := t.accepts(spec); err != nil {
		return nil, err
	}
	if isP2P(spec.Op) {
		return []Estimate{p2pChoice(t.System, bytesPerPeer(spec), t.Options).NCCL}, nil
	}
	el := elements{spec.DType, spec.Redop}
	var out []Estimate
	for _, e := range estimates(t.System, spec.Op, bytesOf(spec), t.Options, el) {
		if e.Off == "" {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		_, err := tune(t.System, spec.Op, bytesOf(spec), t.Options, el)
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Estimate) int { return cmp.Compare(a.TimeUS, b.TimeUS) })
	return out, nil
}

// Ops are the collectives Tuner plans.
func Ops() []ops.Op {
	return []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.Reduce, ops.AllToAll, ops.Gather, ops.SendRecv}
}
