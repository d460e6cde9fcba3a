package ops

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/commsim/commsim/hw"
)

// Op is a collective operation.
type Op uint8

// The collectives. Counts are in elements; Spec.Count means:
//
//	AllReduce, Broadcast, Reduce, SendRecv: elements per rank (in and out)
//	AllGather, Gather: elements each rank contributes; out holds Ranks×Count
//	ReduceScatter: elements each rank ends with; in holds Ranks×Count
//	AllToAll: elements per block; in and out hold Ranks×Count, block j of
//	          rank i's input becomes block i of rank j's output
//	Barrier: no data (Count must be 0)
const (
	AllReduce Op = iota + 1
	ReduceScatter
	AllGather
	Gather
	Broadcast
	Reduce
	AllToAll
	SendRecv
	Barrier
)

var opNames = [...]string{
	AllReduce: "allreduce", ReduceScatter: "reducescatter", AllGather: "allgather", Gather: "gather",
	Broadcast: "broadcast", Reduce: "reduce", AllToAll: "alltoall", SendRecv: "sendrecv", Barrier: "barrier",
}

// Ops lists every collective in declaration order.
func Ops() []Op {
	out := make([]Op, 0, len(opNames)-1)
	for o := AllReduce; o <= Barrier; o++ {
		out = append(out, o)
	}
	return out
}

func (o Op) String() string {
	if o >= AllReduce && o <= Barrier {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Valid reports whether o is one of the declared ops.
func (o Op) Valid() bool { return o >= AllReduce && o <= Barrier }

// ParseOp parses an op name such as "allreduce".
func ParseOp(s string) (Op, error) {
	for o := AllReduce; o <= Barrier; o++ {
		if strings.EqualFold(s, opNames[o]) {
			return o, nil
		}
	}
	return 0, fmt.Errorf("ops: unknown op %q (want one of %s)", s, strings.Join(opNames[1:], ", "))
}

// Reduces reports whether the op combines values (and so uses a ReduceOp).
func (o Op) Reduces() bool { return o == AllReduce || o == ReduceScatter || o == Reduce }

// Rooted reports whether the op has a root rank.
func (o Op) Rooted() bool { return o == Gather || o == Broadcast || o == Reduce }

// Buf names one of a rank's buffers in a plan.
type Buf uint8

const (
	In  Buf = iota // the caller's input buffer
	Out            // the caller's output buffer (the same memory as In when in place)
	Tmp            // scratch the executor allocates
)

func (b Buf) String() string {
	switch b {
	case In:
		return "in"
	case Out:
		return "out"
	case Tmp:
		return "tmp"
	}
	return fmt.Sprintf("buf(%d)", uint8(b))
}

// Ref is a range of one of a rank's buffers, in elements.
type Ref struct {
	Buf      Buf
	Off, Len int
}

func (r Ref) String() string { return fmt.Sprintf("%s[%d:%d]", r.Buf, r.Off, r.Off+r.Len) }

// StepKind is what a step does.
type StepKind uint8

const (
	StepSend   StepKind = iota // send Src to Peer
	StepRecv                   // receive from Peer into Dst
	StepReduce                 // Dst = Dst op Src (the plan's ReduceOp; Sum for Avg)
	StepCopy                   // Dst = Src
	StepDivide                 // Dst = Dst / Ranks (the end of an Avg)
	// StepSwitchReduce is in-network reduction (NVLS's multimem.ld_reduce):
	// Dst on the rank = the reduction of Src, the same range, on every
	// member of the rank's group (Spec.Group), combined by the switch they
	// all link to in member order: ((x_first op x_first+1) op …). Avg sums;
	// a StepDivide ends it as elsewhere.
	StepSwitchReduce
	// StepMulticast is a multicast through the switch (NVLS's
	// multimem.st): Dst, the same range, on every member of the rank's
	// group (itself included) = Src on the rank.
	StepMulticast
	// StepNetAllReduce is in-network all-reduce through the network's
	// switch (SHARP, NCCL's CollNet): every member of the rank's network
	// group (Spec.NetGroup: its local index on every node) runs one, with
	// the same Tag, and each gets in its Dst the reduction of every
	// member's Src (the same range), combined by the switch in member
	// order: ((x_first op x_first+stride) op …). Unlike the other switch
	// steps it touches only its own rank's memory: the members' steps
	// meet as a message's two ends do, the k-th of a Tag on each member
	// with the k-th on the others. Avg sums; a StepDivide ends it.
	StepNetAllReduce
	// StepNetAllGather is an all-gather through the network's switch
	// (SHARP's, for NCCL's CollNet), its members meeting as
	// StepNetAllReduce's do: member i's Src (L elements) becomes block i
	// of every member's Dst (L × the group's size).
	StepNetAllGather
	// StepNetReduceScatter is a reduce-scatter through the network's
	// switch, its members meeting as StepNetAllReduce's do: member i's
	// Dst (L elements) = the reduction, in member order, of block i of
	// every member's Src (L × the group's size). Avg sums.
	StepNetReduceScatter
)

var stepNames = [...]string{StepSend: "send", StepRecv: "recv", StepReduce: "reduce", StepCopy: "copy", StepDivide: "divide",
	StepSwitchReduce: "switch-reduce", StepMulticast: "multicast", StepNetAllReduce: "net-allreduce",
	StepNetAllGather: "net-allgather", StepNetReduceScatter: "net-reducescatter"}

// IsSwitch reports whether the step needs a switch that reduces or
// multicasts for a group of ranks (StepSwitchReduce, StepMulticast, and
// the network's collectives: IsNet). Only a simulator with a reducing
// switch runs such steps; see Plan.UsesSwitch.
func (k StepKind) IsSwitch() bool { return k == StepSwitchReduce || k == StepMulticast || k.IsNet() }

// IsNet reports whether the step is a collective through the network's
// switch that every member of its rank's network group runs
// (StepNetAllReduce, StepNetAllGather, StepNetReduceScatter).
func (k StepKind) IsNet() bool {
	return k == StepNetAllReduce || k == StepNetAllGather || k == StepNetReduceScatter
}

func (k StepKind) String() string {
	if int(k) < len(stepNames) {
		return stepNames[k]
	}
	return fmt.Sprintf("step(%d)", uint8(k))
}

// Step is one action of one rank. Steps of a rank on the same Lane run in
// order; a step also waits for the steps of its rank listed in After (which
// come earlier in the rank's list, usually on other lanes). Messages
// between a pair of ranks match by Tag, in order.
type Step struct {
	Kind  StepKind
	Peer  int    // Send, Recv
	Tag   uint32 // Send, Recv, the Net steps
	Src   Ref    // Send, Reduce (the operand), Copy, SwitchReduce (on every member), Multicast, the Net steps
	Dst   Ref    // Recv, Reduce (the accumulator), Copy, Divide, SwitchReduce, Multicast (on every member), the Net steps
	Lane  int
	After []int
}

func (s Step) String() string {
	var b strings.Builder
	switch s.Kind {
	case StepSend:
		fmt.Fprintf(&b, "send %v to %d tag %d", s.Src, s.Peer, s.Tag)
	case StepRecv:
		fmt.Fprintf(&b, "recv %v from %d tag %d", s.Dst, s.Peer, s.Tag)
	case StepReduce:
		fmt.Fprintf(&b, "reduce %v += %v", s.Dst, s.Src)
	case StepCopy:
		fmt.Fprintf(&b, "copy %v = %v", s.Dst, s.Src)
	case StepDivide:
		fmt.Fprintf(&b, "divide %v", s.Dst)
	case StepSwitchReduce:
		fmt.Fprintf(&b, "switch-reduce %v = %v of every member", s.Dst, s.Src)
	case StepMulticast:
		fmt.Fprintf(&b, "multicast %v of every member = %v", s.Dst, s.Src)
	case StepNetAllReduce, StepNetAllGather, StepNetReduceScatter:
		fmt.Fprintf(&b, "%s %v = %v of every member tag %d", s.Kind, s.Dst, s.Src, s.Tag)
	default:
		b.WriteString(s.Kind.String())
	}
	if s.Lane != 0 {
		fmt.Fprintf(&b, " lane %d", s.Lane)
	}
	if len(s.After) > 0 {
		fmt.Fprintf(&b, " after %v", s.After)
	}
	return b.String()
}

// Spec is what a caller asks for: the collective, the algorithm and the
// shape of the data.
type Spec struct {
	Op    Op
	Algo  string // an algorithm name; see Algorithms
	Ranks int
	Count int // elements; see Op for its meaning per collective
	Root  int // Gather, Broadcast, Reduce
	// DType is the elements' type. A barrier, which moves none, may
	// leave it zero; its plan then has U8.
	DType hw.DType
	Redop hw.ReduceOp // AllReduce, ReduceScatter, Reduce
	// Channels and Chunk shape the algorithms that run like NCCL's
	// (nccl-ring, …): the data is split over Channels lanes, and each
	// moves Chunk elements per step at most; 0 means one channel, and
	// chunks as large as the data. NodeRanks is the ranks of each node
	// (ranks node·NodeRanks … are one node's), which they route around;
	// 0 means every rank is on one node.
	Channels, Chunk, NodeRanks int
	// NetChunk, where it is above Chunk, is what a broadcast's or
	// reduce's chain (nccl-ring) moves at a time between two nodes:
	// NCCL's proxy sends an LL or LL128 step across the network only
	// once all of it is written, while the GPUs relay lines within a
	// node. It is taken as the nearest multiple of Chunk, so that a rank
	// relays whole pieces; 0, or what comes to one piece, is Chunk.
	NetChunk int
	// TreeChannels, for nccl-tree, is how many channels run the first of
	// NCCL's two trees before as many run the second: NCCL's search's
	// channels, which it connects to tree 0 and duplicates onto tree 1,
	// and whose later copies keep their tree (connect.cc: connectTrees,
	// copyChannels), so that channel c runs NCCL's channel c mod
	// 2·TreeChannels (ncclChainTree says in what order), where
	// TreeCopies has none. 0 alternates them, channel c on tree c%2.
	TreeChannels int
	// TreeCopies, with TreeChannels, are where the copies NCCL makes of
	// its duplicated channels start, in the order made (0: none): a
	// channel from a start on runs what the channel start before it ran
	// (connect.cc, copyChannels), which is NCCL's channel c mod 2n only
	// where every start is a multiple of 2n. CollNet's half again copied
	// again (16 channels on tree 0 and 8 on tree 1 of 24), or
	// NCCL_MIN_NCHANNELS copying channels NCCL_MAX_NCHANNELS cut (14 and 2
	// of 16 with 10 and 16), are not.
	TreeCopies [3]int
}

// Group is the ranks a switch step of rank r acts on (StepSwitchReduce,
// StepMulticast): first..first+n-1, the ranks of its node when NodeRanks
// is set, else every rank; for CollNet, whose switch is the network's,
// every rank (see NetworkSwitch).
func (s Spec) Group(r int) (first, n int) {
	if s.NodeRanks > 0 && !NetworkSwitch(s.Algo) {
		return r / s.NodeRanks * s.NodeRanks, s.NodeRanks
	}
	return 0, s.Ranks
}

// nodeSize is the ranks of each of s's nodes: NodeRanks, or every rank
// when it is 0 (or more than the ranks: one node).
func nodeSize(s Spec) int {
	if s.NodeRanks <= 0 || s.NodeRanks > s.Ranks {
		return s.Ranks
	}
	return s.NodeRanks
}

// NetGroup is the ranks a network step of rank r meets (IsNet): first,
// first+stride, … (n of them), those of r's local index on every node,
// each reaching the network's switch through its own NIC. With one node
// (NodeRanks 0, or all the ranks) it is r alone.
func (s Spec) NetGroup(r int) (first, stride, n int) {
	if s.NodeRanks <= 0 || s.NodeRanks >= s.Ranks {
		return r, 1, 1
	}
	return r % s.NodeRanks, s.NodeRanks, s.Ranks / s.NodeRanks
}

// String names the spec's fields that bear on its op: a root only for a
// rooted collective, a reduce op only for one that reduces, so that a
// field the op ignores (an all-reduce's Root: 7) does not read as used.
func (s Spec) String() string {
	str := fmt.Sprintf("%s/%s p=%d count=%d", s.Op, s.Algo, s.Ranks, s.Count)
	if s.Op.Rooted() {
		str += fmt.Sprintf(" root=%d", s.Root)
	}
	str += " " + s.DType.String()
	if s.Op.Reduces() {
		str += " " + s.Redop.String()
	}
	if s.Channels > 0 || s.Chunk > 0 || s.NodeRanks > 0 {
		str += fmt.Sprintf(" channels=%d chunk=%d node=%d", s.Channels, s.Chunk, s.NodeRanks)
	}
	if s.NetChunk > 0 {
		str += fmt.Sprintf(" netchunk=%d", s.NetChunk)
	}
	if s.TreeChannels > 0 {
		str += fmt.Sprintf(" treechannels=%d", s.TreeChannels)
	}
	if s.TreeCopies != [3]int{} {
		str += fmt.Sprintf(" treecopies=%v", s.TreeCopies)
	}
	return str
}

// Plan is an algorithm compiled for one Spec: for every rank, the ordered
// steps it runs. A plan is plain data: it can be printed, checked (Check),
// costed (Cost) and run on any hw world (Executor).
type Plan struct {
	Spec
	// Buffer sizes in elements, the same on every rank.
	InLen, OutLen, TmpLen int
	// Lanes is how many streams each rank uses.
	Lanes int
	// Steps[r] is rank r's program. It is nil in a streamed plan, whose
	// ranks are generated on demand (see Streamed).
	Steps [][]Step
	// Protocol, Wire and Launch say how a plan that runs like NCCL's
	// moves its messages, for a simulator (real devices have their own
	// protocols and launch costs): the protocol's name, how its messages
	// cross each class of path (nil: as the links do), and the fixed
	// seconds every rank spends launching the collective. Package nccl
	// sets them from NCCL's own cost model.
	Protocol Protocol
	Wire     *Wire
	Launch   float64
	// FineChunk is the Chunk a run makes the plan's lanes at where a
	// held plan's step budget made Spec.Chunk coarser (package nccl sets
	// it: NCCL's own, or for NVLSTree what half of MaxPlanSteps holds
	// every lane at; 0 where it did not): a run that keeps only some
	// lanes or ranks may make those at this chunk, and one of every lane
	// make them as near it as the budget allows by the plan's own count
	// of steps (Refine, Refined). A plan edited by hand should clear it:
	// what runs is made again from its Spec.
	FineChunk int

	gen       generator // a streamed plan's algorithm
	numSteps  int       // a streamed plan's step count
	native    bool      // algorithm native: see Native
	symmetric uint8     // a streamed plan's groups (bit g for Symmetry g), found by Compile
	switched  switchUse // whether it has switch steps, recorded by Compile
}

// Streamed reports whether the plan keeps no steps in memory: Compile
// streams plans of more than StreamAbove steps from the algorithms that can
// make one rank's steps without the others'. Rank, RankSteps and
// Materialized give their steps; the Executor pulls them as it runs, so a
// streamed plan of a billion steps runs in memory that grows with the
// ranks.
func (p *Plan) Streamed() bool { return p != nil && p.Steps == nil && p.gen != nil }

// RankSteps yields rank r's steps in order; none for a rank the plan does
// not have.
func (p *Plan) RankSteps(r int) iter.Seq[Step] {
	if p == nil || r < 0 || r >= p.Ranks || !p.Streamed() && r >= len(p.Steps) {
		return func(func(Step) bool) {}
	}
	if !p.Streamed() {
		return slices.Values(p.Steps[r])
	}
	return func(yield func(Step) bool) {
		for batch := range p.rankBatches(r, -1, genBatch) {
			for _, s := range batch {
				if !yield(s) {
					return
				}
			}
		}
	}
}

// rankBatches yields a streamed plan's rank r, on one lane or (lane -1)
// all of them, in batches of up to n steps. A batch is valid until the
// next is asked for.
func (p *Plan) rankBatches(r, lane, n int) iter.Seq[[]Step] {
	return func(yield func([]Step) bool) {
		scratch := &Plan{Spec: p.Spec, InLen: p.InLen, OutLen: p.OutLen, Lanes: 1}
		b := &builder{p: scratch, mode: modeStream, only: r, lane: lane, buf: make([]Step, 0, n), emit: yield}
		defer func() {
			if x := recover(); x != nil {
				if _, ok := x.(streamStopped); !ok {
					panic(x)
				}
			}
		}()
		_ = p.gen(b) // the counting pass in Compile already ran it without error
		b.flush()
	}
}

// Rank returns rank r's steps, generating them for a streamed plan; none
// for a rank the plan does not have.
func (p *Plan) Rank(r int) []Step {
	if !p.Streamed() {
		if p == nil || r < 0 || r >= p.Ranks || r >= len(p.Steps) {
			return nil
		}
		return p.Steps[r]
	}
	return slices.Collect(p.RankSteps(r))
}

// Materialized returns the plan with every step in memory: p itself unless
// it is streamed. A streamed plan over MaxPlanSteps is refused with
// ErrTooLarge.
func (p *Plan) Materialized() (*Plan, error) {
	if p == nil {
		return nil, fmt.Errorf("ops: materialize: %w: nil plan", ErrBadPlan)
	}
	if !p.Streamed() {
		return p, nil
	}
	if p.numSteps > MaxPlanSteps {
		return nil, fmt.Errorf("ops: %v: %w: %d plan steps cannot be held in memory (limit %d); only the executor runs it, streaming",
			p.Spec, ErrTooLarge, p.numSteps, MaxPlanSteps)
	}
	b := newBuilder(p.Spec, p.InLen, p.OutLen)
	if err := generate(p.gen, b); err != nil {
		return nil, err
	}
	return b.p, nil
}

// Len is the length of buffer b on every rank.
func (p *Plan) Len(b Buf) int {
	if p == nil {
		return 0
	}
	switch b {
	case In:
		return p.InLen
	case Out:
		return p.OutLen
	case Tmp:
		return p.TmpLen
	}
	return 0
}

// InPlaceOffset is where In starts inside Out when the collective runs in
// place (NCCL's convention): the same buffer for most ops, rank×Count for
// AllGather and Gather (each rank's block of the output), and for
// ReduceScatter Out lies inside In at rank×Count instead (see OutInIn).
func (p *Plan) InPlaceOffset(rank int) int {
	if p == nil {
		return 0
	}
	switch p.Op {
	case AllGather, Gather:
		return rank * p.Count
	}
	return 0
}

// OutInIn reports whether, in place, Out is the part of In at
// rank×Count (ReduceScatter) rather than In being part of Out.
func (p *Plan) OutInIn() bool { return p != nil && p.Op == ReduceScatter }

// NumSteps counts every rank's steps.
func (p *Plan) NumSteps() int {
	if p == nil {
		return 0
	}
	if p.Streamed() {
		return p.numSteps
	}
	n := 0
	for _, s := range p.Steps {
		n += len(s)
	}
	return n
}

// Describe prints the plan, one rank per paragraph, deterministically.
func (p *Plan) Describe() string {
	if p == nil {
		return "plan <nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "plan %v: in %d, out %d, tmp %d elements, %d lane(s)\n", p.Spec, p.InLen, p.OutLen, p.TmpLen, p.Lanes)
	for r := range p.Ranks {
		fmt.Fprintf(&b, "rank %d:\n", r)
		i := 0
		for s := range p.RankSteps(r) {
			fmt.Fprintf(&b, "  %d: %v\n", i, s)
			i++
		}
	}
	return b.String()
}
