package nccl

import (
	"fmt"
	"strings"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// Chunk sizes in bytes per channel step (init.cc:810-829,
// enqueue.cc:2222-2227): a Simple step is 512 KiB (a 4 MiB buffer over
// NCCL_STEPS = 8 slots), an LL step carries 32 KiB of payload, an LL128
// step 576,000 bytes. Broadcast and reduce move one step at a time.
const (
	simpleStep = 512 << 10
	llChunk    = 32 << 10
	ll128Chunk = 4915200 / 8 * 15 / 16
)

// chunkBytes is the bytes a channel of a broadcast or a reduce moves per
// step with protocol p.
func chunkBytes(p int) int {
	switch p {
	case ll:
		return llChunk
	case ll128:
		return ll128Chunk
	}
	return simpleStep
}

// chainChunk is the bytes a broadcast or reduce chain forwards at a
// time with protocol p: NCCL's step for Simple, which waits for a whole
// step before it forwards; LL and LL128 forward lines as they arrive,
// which the simulator approaches with pieces of a quarter of a channel's
// data per rank, no smaller than minPiece.
func chainChunk(spec ops.Spec, p int) int {
	step := chunkBytes(p)
	if p == simple {
		return step
	}
	in, out := spec.BufferLens()
	perChannel := int64(max(in, out)) * int64(spec.DType.Size()) / int64(max(1, spec.Channels))
	return int(min(int64(step), max(minPiece, perChannel/int64(4*spec.Ranks))))
}

// minPiece is the smallest piece a chain forwards, which bounds the
// messages a simulation of many ranks makes.
const minPiece = 4 << 10

// Plan compiles spec as NCCL runs it per choice c: NCCL's rings with c's
// channels and NCCL's chunk, keeping to rails across nodes, with the wire
// and the launch of c's protocol (see the package doc for what is
// approximated).
func Plan(s System, spec ops.Spec, c Choice, o Options) (*ops.Plan, error) {
	p, ok := protoIndex(c.Protocol)
	if !ok || c.Algo != Ring {
		return nil, fmt.Errorf("nccl: commsim cannot simulate %v yet", c.Estimate)
	}
	spec.Algo, spec.Channels = "nccl-ring", max(1, c.Channels)
	if spec.Op == ops.Broadcast || spec.Op == ops.Reduce {
		// A chain pipelines: a rank forwards chunk i while chunk i+1
		// arrives. (Around a ring every rank is busy at every step, and
		// NCCL's loops over chunks would only pay the per-step latency
		// once per loop where NCCL's model pays it once per step.)
		spec.Chunk = max(1, chainChunk(spec, p)/spec.DType.Size())
	}
	if s.Nodes > 1 && s.NodeMajor {
		spec.NodeRanks = s.PerNode
	}
	plan, err := ops.Compile(spec)
	if err != nil {
		return nil, err
	}
	plan.Protocol = c.Protocol
	plan.Wire, plan.Launch = wire(s, spec, p, o)
	return plan, nil
}

// wire is how ring messages of protocol p move for spec, and the launch
// that opens the collective: NCCL's base latency, and per hop its latency
// for each path class; NCCL's model multiplies all of them by a plateau
// factor for multi-node Ring/Simple all-reduce past 64 bytes per channel
// and rank. Every byte on the wire carries the protocol's share of
// payload (LL 8 of 16 bytes, LL128 120 of 128), and each channel moves
// at most its share of the bus bandwidth of NCCL's model: a channel is
// one block of threads, and the ring goes at its slowest link's pace.
func wire(s System, spec ops.Spec, p int, o Options) (*ops.Wire, float64) {
	v := o.version()
	scale := 1.0
	if s.Nodes > 1 && spec.Op == ops.AllReduce && p == simple && bytesOf(spec)/int64(max(1, spec.Channels)*s.Ranks) >= 64 {
		scale = plateau(s)
	}
	var w ops.Wire
	for class := range ops.NumPathClasses {
		w.Latency[class] = hwLatency(class, Ring, p, v) * 1e-6 * scale
	}
	if s.PerNode == 1 {
		w.Latency[ops.PathNet] = hwLatency(ops.PathNet, Tree, p, v) * 1e-6 * scale
	}
	if s.Nodes > 1 {
		over := netOverhead(s.CPU)
		if p == simple {
			over *= 3
		}
		w.Latency[ops.PathNVLink] = max(w.Latency[ops.PathNVLink], over*1e-6*scale)
	}
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
	g := bandwidths(s, Ring, o)
	if bus := busBandwidth(s, spec.Op, Ring, p, g, v); finite(bus) {
		w.Rate = bus * 1e9 / float64(g.channels)
	}
	return &w, baseLatency(Ring, p, v) * 1e-6 * scale
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
	if !ops.IsNCCL(plan.Algo) {
		return plan.Algo
	}
	return fmt.Sprintf("%s/%s/%dch", strings.TrimPrefix(plan.Algo, "nccl-"), plan.Protocol, plan.Lanes)
}

// Tuner chooses and compiles NCCL's plans on one fabric.
type Tuner struct {
	System  System
	Options Options
}

// NewTuner reads t's system for NCCL's model.
func NewTuner(t *topology.Topology, o Options) (*Tuner, error) {
	s, err := Describe(t)
	if err != nil {
		return nil, err
	}
	return &Tuner{System: s, Options: o}, nil
}

// Plan chooses NCCL's algorithm, protocol and channels for spec and
// compiles the plan the simulator runs, with the choice.
func (t *Tuner) Plan(spec ops.Spec) (*ops.Plan, Choice, error) {
	if err := spec.Validate(); err != nil {
		return nil, Choice{}, err
	}
	if spec.Ranks != t.System.Ranks {
		return nil, Choice{}, fmt.Errorf("nccl: %v has %d ranks and the fabric %d GPUs", spec.Op, spec.Ranks, t.System.Ranks)
	}
	c, err := Tune(t.System, spec.Op, bytesOf(spec), t.Options)
	if err != nil {
		return nil, c, err
	}
	plan, err := Plan(t.System, spec, c, t.Options)
	return plan, c, err
}
