package sim

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

// OpKind is what an Op does.
type OpKind uint8

// The kinds of Op a Source can feed, one per Stream method; the others
// are the stream's own.
const (
	OpCopy OpKind = iota
	OpReduce
	OpDivide
	OpSend
	OpRecv
	OpRecord
	OpWait
	// OpDelay occupies the stream for Duration, as the fixed cost of
	// launching a collective does.
	OpDelay
	// OpSwitchReduce is in-network reduction (NVLS's multimem.ld_reduce):
	// the switch that every member of a group links to reads Members[i]
	// from member i, combines them in member order with Redop
	// (((m0 op m1) op m2) …, rounding as hw.ReduceBytes does) and writes
	// the result to Dst, on the stream's device, which is a member. See
	// Stream.SwitchReduce for its time.
	OpSwitchReduce
	// OpMulticast is a multicast through the switch (NVLS's multimem.st):
	// the stream's device, a member, writes Src once to the switch, which
	// copies it into Members[i] on every member. See Stream.Multicast.
	OpMulticast
	// OpSwitchAllReduce is an all-reduce through the switch (SHARP, for
	// NCCL's CollNet) that every device of Group enqueues, with the same
	// Tag: once all have reached theirs, the switch combines their Src in
	// Group order with Redop and writes the result to each one's Dst. See
	// Stream.SwitchAllReduce.
	OpSwitchAllReduce
	// OpSwitchAllGather is an all-gather through the switch, met as
	// OpSwitchAllReduce is: member i's Src becomes block i of every
	// member's Dst (len(Group) × Src's length).
	OpSwitchAllGather
	// OpSwitchReduceScatter is a reduce-scatter through the switch, met as
	// OpSwitchAllReduce is: member i's Dst = block i of every member's Src
	// (len(Group) × Dst's length) combined in Group order with Redop.
	OpSwitchReduceScatter
	opCompute
	opFeed
)

const (
	opCopy    = OpCopy
	opReduce  = OpReduce
	opDivide  = OpDivide
	opSend    = OpSend
	opRecv    = OpRecv
	opRecord  = OpRecord
	opWait    = OpWait
	opKinds   = opFeed + 1
	opUnknown = "op?"
)

var opNames = [opKinds]string{
	opCopy:                "copy",
	opReduce:              "reduce",
	opDivide:              "divide",
	opSend:                "send",
	opRecv:                "recv",
	opRecord:              "record",
	opWait:                "wait",
	OpDelay:               "delay",
	OpSwitchReduce:        "switch-reduce",
	OpMulticast:           "multicast",
	OpSwitchAllReduce:     "switch-allreduce",
	OpSwitchAllGather:     "switch-allgather",
	OpSwitchReduceScatter: "switch-reducescatter",
	opCompute:             "compute",
	opFeed:                "feed",
}

// op is one queued stream operation: plain data, described by String.
type op struct {
	kind     OpKind
	index    int // position in the stream, from 0, given when it starts
	dst, src hw.Slice
	redop    hw.ReduceOp
	n        int
	peer     *Device
	tag      uint64
	ev       *Event
	target   int    // Wait: the Record count that must have completed
	dur      Time   // Compute, Delay
	label    string // Compute
	start    Time
	ext      *opExt // Feed and the switch operations: what only they carry
	wire     *Wire  // Send and the switch operations: its protocol, or nil
	land     Time   // Send and the switch operations with a Wire: its latency, from drained to delivered
	fused    bool   // Reduce, Divide: takes no time (Op.Fused)
}

// opExt is what few ops carry, kept out of op so that the many, queued by
// the million, stay small.
type opExt struct {
	feed    *feed      // Feed
	members []hw.Slice // SwitchReduce: the sources, Multicast: the destinations, one per member
	group   []*Device  // the switch collectives (OpKind.meets): the members
	meeting *meeting   // the switch collectives: the one it joined, once it has
}

func (o *op) String() string {
	switch o.kind {
	case opCopy:
		return hw.DescribeCopy(o.dst)
	case opReduce:
		return hw.DescribeReduce(o.redop, o.dst)
	case opDivide:
		return hw.DescribeDivide(o.dst, o.n)
	case opSend:
		return hw.DescribeSend(o.src, o.peer.rank, o.peer, o.tag)
	case opRecv:
		return hw.DescribeRecv(o.dst, o.peer.rank, o.peer, o.tag)
	case opRecord:
		return fmt.Sprintf("record event %d of %s", o.ev.id, o.ev.dev.name)
	case opWait:
		return fmt.Sprintf("wait for event %d of %s (record #%d; %d done)", o.ev.id, o.ev.dev.name, o.target, o.ev.completed)
	case opCompute:
		return fmt.Sprintf("compute %q for %v", o.label, o.dur)
	case OpDelay:
		return fmt.Sprintf("delay for %v", o.dur)
	case OpSwitchReduce:
		return fmt.Sprintf("switch-reduce %s %d x %s from %d members", o.redop, o.dst.Len, o.dst.DType(), len(o.ext.members))
	case OpMulticast:
		return fmt.Sprintf("multicast %d x %s to %d members", o.src.Len, o.src.DType(), len(o.ext.members))
	case OpSwitchAllReduce, OpSwitchAllGather, OpSwitchReduceScatter:
		return o.meetingString()
	case opFeed:
		return "feed"
	}
	return opUnknown
}

func (k OpKind) String() string {
	if k < opKinds {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", uint8(k))
}
