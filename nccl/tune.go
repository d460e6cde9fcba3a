package nccl

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// Options are NCCL's environment in commsim's terms.
type Options struct {
	// Version is the release whose constants and behaviours to use (0:
	// 2.30).
	Version Version
	// Algos and Protos restrict the choice, as NCCL_ALGO and NCCL_PROTO
	// do; nil allows all. OpAlgos and OpProtos replace them for the
	// collectives they name, as NCCL's "allreduce:tree" entries do.
	Algos    []Algo
	Protos   []ops.Protocol
	OpAlgos  map[ops.Op][]Algo
	OpProtos map[ops.Op][]ops.Protocol
	// MinChannels and MaxChannels bound the channels the collectives run
	// on, as NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS do, and Channels
	// sets both; 0 leaves a bound to NCCL. NCCL applies them after its
	// search: its model, and so its choice, does not see them, but each
	// channel runs at most one of the search's channels' speed. A least
	// above the most wins, as in NCCL (connect.cc clamps to the most
	// first, then raises to the least).
	Channels, MinChannels, MaxChannels int
	// Machine corrects what the simulator runs where measurements say
	// the machine departs from NCCL's model (package calibrate fits it);
	// NCCL's choice stays its model's.
	Machine Machine
	// BuffSize is the bytes of each connection's Simple buffer, as
	// NCCL_BUFFSIZE sets it; 0 is NCCL's 4 MiB. A Simple step is an
	// eighth of it (NCCL_STEPS), and Simple chains, trees and buffer
	// slots move in steps. NCCL's model does not read it: the choice is
	// the same, what runs is not.
	BuffSize int64
	// NetPeerChannels is the channels point-to-point operations give a
	// peer across the network, as NCCL_NCHANNELS_PER_NET_PEER sets them;
	// 0 is NCCL's default for the release (see p2pChannels).
	NetPeerChannels int
	// P2PNetChannelGBps is the GB/s NCCL sizes a network peer's
	// point-to-point channels by (from 2.29: enough to carry the GPU's
	// NICs at this each), and that each such channel moves at most, as
	// NCCL_P2P_PER_CHANNEL_NET_BW sets it; 0 is NCCL's 14.
	P2PNetChannelGBps int
	// P2PNetChunk, P2PNVLChunk and P2PPCIChunk are the bytes of a
	// point-to-point chunk across nodes, on one node joined by NVLink,
	// and on one joined by PCIe, as NCCL_P2P_NET_CHUNKSIZE,
	// NCCL_P2P_NVL_CHUNKSIZE and NCCL_P2P_PCI_CHUNKSIZE set them; 0 is
	// NCCL's default (128 KiB, 512 KiB, 128 KiB).
	P2PNetChunk, P2PNVLChunk, P2PPCIChunk int64
	// P2PLLThreshold is the most bytes per channel a point-to-point
	// operation moves with LL, as NCCL_P2P_LL_THRESHOLD sets it; 0 is
	// NCCL's 16 KiB. NoP2PLL moves them all with Simple, as
	// NCCL_P2P_LL_THRESHOLD=0 does.
	P2PLLThreshold int64
	NoP2PLL        bool
	// NoNVLS and NoCollNet leave NVLS (and NVLS tree) and CollNet out, as
	// NCCL_NVLS_ENABLE=0 and NCCL_COLLNET_ENABLE=0 do (NVLS across nodes
	// needs CollNet). commsim runs CollNet wherever the network's
	// switches reduce, as NCCL does with NCCL_COLLNET_ENABLE=1 and a
	// SHARP plugin; NCCL's own default is off.
	NoNVLS, NoCollNet bool
	// NVLSChannels is the channels NVLS and NVLSTree run on, as
	// NCCL_NVLS_NCHANNELS sets them; NVLSChunk the most an NVLS pass's
	// chunk may be (NCCL_NVLS_CHUNKSIZE, read from 2.21 on) and
	// NVLSTreeMaxChunk the most an NVLSTree chunk may be
	// (NCCL_NVLSTREE_MAX_CHUNKSIZE, from 2.20 on); 0 is NCCL's default
	// for the release and fabric (nvlsSetupOf).
	NVLSChannels                int
	NVLSChunk, NVLSTreeMaxChunk int64
	// MinCTAs and MaxCTAs bound every channel count NCCL sets up, as
	// NCCL_MIN_CTAS and NCCL_MAX_CTAS do: the collectives' (as the
	// MIN/MAX_NCHANNELS do), NVLS's and so point-to-point's.
	MinCTAs, MaxCTAs int
	// MinP2PChannels and MaxP2PChannels bound the point-to-point
	// channels, as NCCL_MIN_P2P_NCHANNELS and NCCL_MAX_P2P_NCHANNELS do.
	MinP2PChannels, MaxP2PChannels int
	// Threads is the threads of a ring's or a tree's block with Simple
	// and LL, and LL128Threads with LL128, as NCCL_NTHREADS and
	// NCCL_LL128_NTHREADS set them; 0 is NCCL's (512, or 256 for a
	// ring's Simple on PCIe-class fabrics; 640). Small sizes run on
	// fewer channels while each thread would have too few bytes.
	Threads, LL128Threads int
	// NoPAT leaves PAT out, as NCCL_PAT_ENABLE=0 does; ForcePAT lets it
	// run with several GPUs a node too, as NCCL_PAT_ENABLE=1 does
	// (NCCL's default, 2, keeps it to one GPU a node: tuning.cc,
	// ncclPatEnable).
	NoPAT, ForcePAT bool
	// CollNetNodes is the fewest nodes CollNet runs on, as
	// NCCL_COLLNET_NODE_THRESHOLD sets it; 0 is NCCL's 2.
	CollNetNodes int
}

// Bounds on Options.BuffSize: a step of at least 4 KiB, and a buffer no
// larger than 1 GiB (a plan's pieces grow with it).
const (
	MinBuffSize = ncclSteps * 4 << 10
	MaxBuffSize = 1 << 30
)

// minP2PChunk bounds a point-to-point chunk from below, as a Simple step.
const minP2PChunk = 4 << 10

// check refuses options NCCL would not run with.
func (o Options) check() error {
	if o.Version != 0 && (o.Version < V2_18 || o.Version > V2_30) {
		return fmt.Errorf("nccl: version %v: the model has 2.18 to 2.30", o.Version)
	}
	if o.Channels < 0 || o.Channels > maxChannels {
		return fmt.Errorf("nccl: %d channels: want 1 to %d", o.Channels, maxChannels)
	}
	if err := o.Machine.check(); err != nil {
		return err
	}
	if o.NoPAT && o.ForcePAT {
		return errors.New("nccl: PAT both off and forced (NCCL_PAT_ENABLE is 0 or 1)")
	}
	algos, protos := slices.Clone(o.Algos), slices.Clone(o.Protos)
	for _, op := range slices.Sorted(maps.Keys(o.OpAlgos)) {
		if !op.Valid() {
			return fmt.Errorf("nccl: algorithms for %v: no collective", op)
		}
		algos = append(algos, o.OpAlgos[op]...)
	}
	for _, op := range slices.Sorted(maps.Keys(o.OpProtos)) {
		if !op.Valid() {
			return fmt.Errorf("nccl: protocols for %v: no collective", op)
		}
		protos = append(protos, o.OpProtos[op]...)
	}
	for _, a := range algos {
		if a >= numAlgos {
			return fmt.Errorf("nccl: algorithm %d: want one of %s", a, strings.Join(algoNames[:], ", "))
		}
	}
	for _, p := range protos {
		if _, ok := protoIndex(p); !ok {
			return fmt.Errorf("nccl: protocol %v: want LL, LL128 or Simple", p)
		}
	}
	for _, n := range o.numbers() {
		if v := n.get(); v != 0 && !n.allows(v) {
			return fmt.Errorf("nccl: %s=%d: want %s", n.name, v, n.want())
		}
		if n.zero != nil && *n.zero && n.get() != 0 {
			return fmt.Errorf("nccl: %s: both %d and 0 (set one)", n.name, n.get())
		}
	}
	return nil
}

// simpleStep is the bytes of a Simple step: an eighth of the buffer.
func (o Options) simpleStep() int {
	if o.BuffSize == 0 {
		return defaultSimpleStep
	}
	return int(o.BuffSize / ncclSteps)
}

// Machine is how a machine runs NCCL's choice where it departs from
// NCCL's model: factors (0 means 1) and what one channel moves. The zero
// Machine is NCCL's model with the channel rate published runs measure.
type Machine struct {
	// Launch scales the base latency each collective pays once, and Hop
	// the latency of each hop.
	Launch, Hop float64
	// Bandwidth scales a channel's speed, by protocol (LL, LL128,
	// Simple), whatever bounds it (its share of NCCL's model, or the
	// channel rate below), so that a fit finds it either way.
	Bandwidth [numProtos]float64
	// ChannelGBps, when above 0, is the most one channel moves, in GB/s
	// (before Bandwidth's factor):
	// a channel is one block of threads, and a block copies only so
	// fast. NCCL's model states no such figure (its tuner, and so its
	// choice, never sees it). At 0 it is what published runs measure on
	// the fabric's GPU architecture (MeasuredChannel: Hopper and
	// Blackwell), none where they measure none. It bounds the channels
	// of rings and trees, each also held to its share of NCCL's model's
	// bandwidth, and sets what a point-to-point channel moves, for which
	// NCCL's model has no figure (without a rate, a ring channel's share
	// stands in), all of a rank's together still within the ring's whole
	// bandwidth. NVLS, NVLSTree and CollNet, whose channels drive a
	// switch, are not bounded.
	ChannelGBps float64
	// NoChannelRate, where ChannelGBps is 0, bounds no channel by a
	// rate: each moves its share of NCCL's model alone.
	NoChannelRate bool
}

// check refuses factors and rates that are not finite and at least 0
// (0 means the default).
func (m Machine) check() error {
	named := []struct {
		name string
		v    float64
	}{{"launch", m.Launch}, {"hop", m.Hop}, {"LL bandwidth", m.Bandwidth[ll]}, {"LL128 bandwidth", m.Bandwidth[ll128]},
		{"Simple bandwidth", m.Bandwidth[simple]}, {"channel rate", m.ChannelGBps}}
	for _, f := range named {
		if !(f.v >= 0) || math.IsInf(f.v, 1) {
			return fmt.Errorf("nccl: machine's %s %v: want a finite number, 0 or more (0: NCCL's model)", f.name, f.v)
		}
	}
	return nil
}

// channelGBps is m's channel rate on s in GB/s, 0 for none.
func (m Machine) channelGBps(s System) float64 {
	if m.ChannelGBps > 0 || m.NoChannelRate {
		return m.ChannelGBps
	}
	gbps, _ := MeasuredChannel(s.Arch)
	return gbps
}

// channelBound is rate (bytes/s; 0 for none) of a flow that channels
// carry on s, bounded by m's channel rate.
func (m Machine) channelBound(s System, rate, channels float64) float64 {
	if most := m.channelGBps(s) * 1e9 * channels; most > 0 && (rate == 0 || rate > most) {
		return most
	}
	return rate
}

func orOne(x float64) float64 {
	if x == 0 {
		return 1
	}
	return x
}

// Estimate is NCCL's model of one algorithm and protocol for one
// collective: its latency, bandwidths and time, or why it is off.
type Estimate struct {
	Algo     Algo
	Protocol ops.Protocol
	Channels int
	// LatencyUS is the fixed part, BusBW and AlgBW the bandwidths in GB/s
	// (bus is what nccl-tests prints, alg what the time divides by), and
	// TimeUS = LatencyUS + bytes / (1000 AlgBW × the tree correction, 1
	// but for trees: see treeCorrection).
	LatencyUS, BusBW, AlgBW, TimeUS float64
	// Off says why the model does not consider this pair; "" when it does.
	Off string
}

func (e Estimate) String() string {
	return fmt.Sprintf("%s/%s/%dch", e.Algo, e.Protocol, e.Channels)
}

// Runs reports whether plan runs e's algorithm and protocol: whether a
// plan Tuner.Plan made is NCCL's choice, or runs in its stead.
func (e Estimate) Runs(plan *ops.Plan) bool {
	return plan != nil && plan.Algo == "nccl-"+e.Algo.String() && plan.Protocol == e.Protocol
}

// Simulable reports whether commsim can run algorithm a as a plan
// on s: rings, trees and PAT anywhere NCCL runs them; NVLS on one node,
// and across nodes over CollNet (SHARP); NVLSTree; CollNet (see ops'
// nccl-collnet-direct). Across nodes every node must hold ranks
// k·PerNode… (NodeMajor).
func Simulable(s System, a Algo) bool {
	switch a {
	case Ring, Tree, PAT:
		return true
	case NVLS:
		return s.Nodes == 1 || s.NodeMajor
	case NVLSTree:
		return s.NodeMajor
	case CollNetDirect, CollNetChain:
		return s.PerNode == 1 || s.NodeMajor
	}
	return false
}

// Estimates prices every algorithm and protocol for op on bytes (NCCL's
// size: the larger of a rank's send and receive buffers, the whole
// gathered buffer for all-gather and reduce-scatter).
// The element type is taken for one that every algorithm reduces
// (Tuner.Choose reads the collective's).
func Estimates(s System, op ops.Op, bytes int64, o Options) []Estimate {
	return estimates(s, op, bytes, o, elements{})
}

func estimates(s System, op ops.Op, bytes int64, o Options, el elements) []Estimate {
	out := make([]Estimate, 0, int(numAlgos)*numProtos)
	for a := range numAlgos {
		for p := range numProtos {
			out = append(out, estimate(s, op, bytes, a, p, o, el))
		}
	}
	return out
}

// Choice is what the tuner picks for one collective: the cheapest of the
// algorithms commsim can simulate (Estimate), and the cheapest of all,
// what NCCL itself would run (NCCL), which differ where NCCL would pick
// an algorithm commsim does not run yet.
type Choice struct {
	Estimate
	NCCL Estimate
}

// Tune picks NCCL's algorithm, protocol and channel count for op on bytes,
// of an element type that every algorithm reduces (Tuner.Choose reads
// the collective's).
func Tune(s System, op ops.Op, bytes int64, o Options) (Choice, error) {
	if err := cmp.Or(s.check(), o.check()); err != nil {
		return Choice{}, err
	}
	if bytes < 0 || !op.Valid() {
		return Choice{}, fmt.Errorf("nccl: tune %v of %d bytes: want a collective and 0 bytes or more", op, bytes)
	}
	return tune(s, op, bytes, o, elements{})
}

func tune(s System, op ops.Op, bytes int64, o Options, el elements) (Choice, error) {
	var c Choice
	best, bestSim := math.Inf(1), math.Inf(1)
	var reasons []string           // why pairs are off, in order
	offBy := map[string][]string{} // the pairs off for each
	for _, e := range estimates(s, op, bytes, o, el) {
		if e.Off != "" {
			if offBy[e.Off] == nil {
				reasons = append(reasons, e.Off)
			}
			offBy[e.Off] = append(offBy[e.Off], e.Algo.String()+"/"+e.Protocol.String())
			continue
		}
		if e.TimeUS < best {
			best, c.NCCL = e.TimeUS, e
		}
		if Simulable(s, e.Algo) && e.TimeUS < bestSim {
			bestSim, c.Estimate = e.TimeUS, e
		}
	}
	if math.IsInf(bestSim, 1) {
		var why []string
		for _, r := range reasons {
			if r != notAllowed && r != protoNotAllowed {
				why = append(why, r+" ("+strings.Join(offBy[r], ", ")+")")
			}
		}
		if len(why) == 0 {
			why = append(why, "the algorithms and protocols allowed leave nothing")
		}
		if !math.IsInf(best, 1) {
			why = append(why, fmt.Sprintf("commsim cannot simulate %v, which NCCL would run", c.NCCL))
		}
		return c, fmt.Errorf("nccl: no algorithm commsim simulates can run %s of %d bytes on %d ranks: %s", op, bytes, s.Ranks, strings.Join(why, "; "))
	}
	return c, nil
}

// estimate prices algorithm a with protocol p.
func estimate(s System, op ops.Op, bytes int64, a Algo, p int, o Options, el elements) Estimate {
	e := Estimate{Algo: a, Protocol: protocols[p], TimeUS: math.Inf(1)}
	if err := s.check(); err != nil {
		e.Off = err.Error()
		return e
	}
	if s.Ranks == 1 {
		// NCCL's cost table for one rank holds ring/Simple alone, at 0,
		// whatever NCCL_ALGO and NCCL_PROTO say (enqueue.cc,
		// updateCollCostTable); the call copies its buffer
		// (oneRankCopy).
		if a != Ring || p != simple {
			e.Off = "one rank: NCCL's cost table has ring/Simple alone"
			return e
		}
		e.Channels, e.TimeUS = 1, 0
		return e
	}
	if why := cmp.Or(enabled(s, op, a, p, o), el.off(s, op, a)); why != "" {
		e.Off = why
		return e
	}
	bw := graphOf(s, a, o.Release())
	if (a == NVLS || a == NVLSTree) && bw.channels < 2 {
		e.Off = "NCCL's NVLS search finds fewer than 2 heads (a GPU with a NIC of its own, across nodes)"
		return e
	}
	if a == CollNetDirect && bw.channels == 0 {
		e.Off = "NCCL's CollNet direct search finds no head (a GPU with a NIC of its own)"
		return e
	}
	e.Channels = bw.channels
	coll := collChannels(s, o)
	e.LatencyUS = latency(s, op, bytes, a, p, o.Release(), coll)
	e.BusBW = busBandwidth(s, op, a, p, bw, o.Release())
	e.AlgBW = e.BusBW * busToAlg(s, op, a, o.Release())
	if !finite(e.AlgBW) {
		e.Off = "no bandwidth"
		return e
	}
	e.TimeUS = e.LatencyUS + float64(bytes)/(1000*e.AlgBW*treeCorrection(s, op, a, p, bytes, o.Release()))
	// What runs (enqueue.cc, topoGetAlgoInfo): NVLS's own channels, no
	// more than the communicator's across nodes; the others from the
	// communicator's, fewer for small sizes.
	e.Channels = coll
	if a == NVLS || a == NVLSTree {
		e.Channels = nvlsSetupOf(s, o).channels
		if a == NVLS && s.Nodes > 1 {
			e.Channels = min(e.Channels, coll)
		}
	}
	e.Channels = threadChannels(s, bytes, e.Channels, a, p, o)
	return e
}

// treeCorrectionFactor is NCCL's per-size factor on a tree all-reduce's
// bandwidth, by protocol and log2 of the size in 64-byte units
// (tuning.cc, the same in 2.18 to 2.30).
var treeCorrectionFactor = [numProtos][24]float64{
	{1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
	{1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
	{.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
}

// treeCorrection is the factor NCCL's model puts on a tree all-reduce's
// bandwidth when it estimates the time, by size (ncclTopoGetAlgoTime):
// machineCorrection's, where release v's tuner applies it: to trees in
// every release, to NVLSTree on Blackwell from 2.29 on. It sways NCCL's
// choice.
func treeCorrection(s System, op ops.Op, a Algo, p int, bytes int64, v Version) float64 {
	if a == NVLSTree && (v <= V2_28 || s.Arch.SM() < 100) {
		return 1
	}
	return machineCorrection(s, op, a, p, bytes)
}

// machineCorrection is NCCL's per-size tree correction as machines show
// it, whichever release's tuner made the choice: below 512 MiB for trees,
// below 1 GiB for NVLSTree on x86 hosts; 1 for every other choice and
// for sizes under 64 bytes. What it adds to the time opens the plan's run
// (treeDip). A host CPU commsim does not know is taken for x86.
func machineCorrection(s System, op ops.Op, a Algo, p int, bytes int64) float64 {
	if op != ops.AllReduce || bytes>>6 == 0 {
		return 1
	}
	log := bits.Len64(uint64(bytes>>6)) - 1
	switch {
	case a == Tree && log < 23:
	case a == NVLSTree && log < 24 && s.CPU != topology.ARMCPU:
	default:
		return 1
	}
	return treeCorrectionFactor[p][log]
}

// Release is the NCCL release o prices with: Version, or 2.30 where it
// is unset.
func (o Options) Release() Version {
	if o.Version == 0 {
		return V2_30
	}
	return o.Version
}

// Why an algorithm or protocol is off when Options leave it out.
const (
	notAllowed      = "not in the algorithms allowed"
	protoNotAllowed = "not in the protocols allowed"
)

// enabled says why NCCL would not run a with protocol p for op, or "".
func enabled(s System, op ops.Op, a Algo, p int, o Options) string {
	algos, protos := o.Algos, o.Protos
	if l, ok := o.OpAlgos[op]; ok {
		algos = l
	}
	if l, ok := o.OpProtos[op]; ok {
		protos = l
	}
	switch {
	case algos != nil && !slices.Contains(algos, a):
		return notAllowed
	case protos != nil && !slices.Contains(protos, protocols[p]):
		return protoNotAllowed
	case protos == nil && p == ll128:
		// NCCL_PROTO naming a collective's protocols, LL128 among them,
		// turns it on wherever it is off by default.
		if why := ll128Off(s, o.Release()); why != "" {
			return why
		}
	}
	switch op {
	case ops.Broadcast, ops.Reduce:
		if a != Ring {
			return "broadcast and reduce run on rings only"
		}
	case ops.AllGather, ops.ReduceScatter:
		if a != Ring && a != PAT && a != NVLS && a != CollNetDirect {
			return "all-gather and reduce-scatter run on ring, PAT, NVLS or CollNet direct"
		}
		if (a == NVLS || a == CollNetDirect) && s.Nodes > 1 && s.PerNode > s.NICs {
			// tuning.cc: "AllGather/ReduceScatter requires 1:1 GPU:NIC".
			return "all-gather and reduce-scatter through the network's switch need a NIC for every GPU of a node"
		}
		// By release (tuning.cc's algorithm loop, enqueue.cc's cost
		// table): rings only in 2.18, NVLS from 2.19, CollNet direct from
		// 2.20 (PAT from 2.23, below); NVLS on one node of up to 32 GPUs
		// in 2.25 and 2.26, and on nodes of up to 32 GPUs from 2.27
		// (NCCL_MAX_NVLS_ARITY).
		switch v := o.Release(); {
		case a != Ring && v < v2_19:
			return "NCCL 2.18 runs all-gather and reduce-scatter on rings only"
		case a == CollNetDirect && v < v2_20:
			return "NCCL runs all-gather and reduce-scatter on CollNet from 2.20"
		case a == NVLS && v >= v2_25 && v < V2_27 && (s.Nodes > 1 || s.Ranks > maxNVLSArity):
			return fmt.Sprintf("NCCL 2.25 and 2.26 run NVLS all-gather and reduce-scatter on one node of up to %d GPUs", maxNVLSArity)
		case a == NVLS && v >= V2_27 && s.PerNode > maxNVLSArity:
			return fmt.Sprintf("NVLS runs all-gather and reduce-scatter on nodes of up to %d GPUs", maxNVLSArity)
		}
	case ops.AllReduce:
		if a == PAT {
			return "PAT runs all-gather and reduce-scatter only"
		}
	default:
		return fmt.Sprintf("NCCL's tuner does not choose for %s", op)
	}
	switch a {
	case NVLS, NVLSTree:
		switch netOff := o.collNetOff(s); {
		case o.NoNVLS || p == simple && o.nvlsOff(s) != "":
			return o.nvlsOff(s)
		case p != simple:
			return "NVLS runs Simple only"
		case a == NVLSTree && s.Nodes == 1:
			return "NVLS tree needs several nodes"
		case a == NVLS && s.Nodes > 1 && netOff != "":
			return "NVLS across nodes needs CollNet: " + netOff
		}
	case CollNetDirect, CollNetChain:
		switch off := o.collNetOff(s); {
		case p != simple:
			return "CollNet runs Simple only"
		case off != "":
			return off
		case a == CollNetDirect && !s.NVSwitch:
			// tuning.cc: no NVSwitch in the topology, no CollNet direct.
			return "CollNet direct needs the GPUs of a node on an NVSwitch"
		case s.PerNode > maxDirectArity && (a == CollNetDirect || o.Release() >= V2_28):
			// enqueue.cc: direct from 2.23, chain from 2.28.
			return fmt.Sprintf("%v runs on nodes of up to %d GPUs", a, maxDirectArity)
		}
	case PAT:
		switch {
		case o.Release() < V2_23:
			return "PAT came in NCCL 2.23"
		case o.NoPAT:
			return "PAT is disabled (NCCL_PAT_ENABLE=0)"
		case p != simple:
			return "PAT runs Simple only"
		case s.PerNode != 1 && !o.ForcePAT:
			return "PAT needs one GPU per node (NCCL_PAT_ENABLE=1 runs it on more)"
		}
	}
	return ""
}

// ll128Off says why NCCL leaves LL128 off where NCCL_PROTO does not ask
// for it, or "" (tuning.cc: "Enable LL128 by default only on
// Volta/Ampere/Hopper/Blackwell+NVLink. Other cases are not tested and
// may cause silent data corruption"). commsim's NICs hang off a GPU's
// PCIe (NCCL's PIX or PXB path), or else off a host's CPU (PHB), which
// is past every release's bound on the path to the network.
func ll128Off(s System, v Version) string {
	switch sm := s.Arch.SM(); {
	case s.PerNode > 1 && s.NVLinks == 0:
		return "NCCL runs LL128 by default only between GPUs joined by NVLink, not PCIe (NCCL_PROTO naming it forces it)"
	case s.Nodes > 1 && s.NICsOnCPU:
		return "NCCL runs LL128 by default only where a GPU reaches its NIC through a PCIe switch, not a host's CPU (NCCL_PROTO naming it forces it)"
	case v < v2_25 && sm != 70 && sm != 80 && sm != 90:
		return fmt.Sprintf("NCCL %v runs LL128 by default only on Volta, Ampere and Hopper (Blackwell from 2.25; NCCL_PROTO naming it forces it)", v)
	}
	return ""
}

// NCCL's most GPUs a node for NVLS's all-gather and reduce-scatter
// (NCCL_MAX_NVLS_ARITY, 2.25 on) and for CollNet (NCCL_MAX_DIRECT_ARITY
// + 1).
const (
	maxNVLSArity   = 32
	maxDirectArity = 8
)

// nvlsOff says why NCCL sets up no NVLS on s, "" where it does
// (nvls.cc, ncclNvlsInit).
func (o Options) nvlsOff(s System) string {
	switch {
	case o.NoNVLS:
		return "NVLS is disabled (NCCL_NVLS_ENABLE=0)"
	case !s.NVLSCapable:
		return "the NVSwitch does not reduce (no NVLS)"
	case s.PerNode <= 2 && o.Release() < V2_28 || s.PerNode < 2:
		// More than 2 GPUs (2 or more from 2.28).
		return "NVLS needs more GPUs on the NVSwitch"
	}
	return ""
}

// collNetOff says why CollNet does not run on s, "" where it does: where
// the network's switches reduce, unless NCCL_COLLNET_ENABLE=0, on as
// many nodes as NCCL_COLLNET_NODE_THRESHOLD asks, and up to 2.22 on
// nodes of at most 8 GPUs (init.cc).
func (o Options) collNetOff(s System) string {
	switch {
	case !s.SHARP:
		return "the network's switches do not reduce (no SHARP)"
	case s.SHARPOff != "":
		return s.SHARPOff
	case o.NoCollNet:
		return "CollNet is disabled (NCCL_COLLNET_ENABLE=0)"
	case s.Nodes < o.collNetNodes():
		return fmt.Sprintf("CollNet needs %d nodes (NCCL_COLLNET_NODE_THRESHOLD)", o.collNetNodes())
	case s.PerNode > maxDirectArity && o.Release() < V2_23:
		return fmt.Sprintf("NCCL up to 2.22 runs CollNet on nodes of up to %d GPUs", maxDirectArity)
	}
	return ""
}

func (o Options) collNetNodes() int { return cmp.Or(o.CollNetNodes, 2) }
