package hw

import "fmt"

// NativeOp names a collective that a backend runs itself (NCCL's
// ncclAllReduce and friends) instead of through a plan.
type NativeOp uint8

// The native collectives, in NCCL's vocabulary.
const (
	NativeAllReduce NativeOp = iota + 1
	NativeAllGather
	NativeReduceScatter
	NativeBroadcast
	NativeSend
	NativeRecv
)

var nativeOpNames = [...]string{"", "allreduce", "allgather", "reducescatter", "broadcast", "send", "recv"}

func (o NativeOp) String() string {
	if o == 0 || int(o) >= len(nativeOpNames) {
		return fmt.Sprintf("NativeOp(%d)", uint8(o))
	}
	return nativeOpNames[o]
}

// NativeCall is one rank's part of a native collective. Counts follow
// NCCL: Send and Recv are the whole send and receive slices of the rank
// (for AllGather Recv holds Send.Len × ranks elements; for ReduceScatter
// Send holds Recv.Len × ranks).
type NativeCall struct {
	Op     NativeOp
	Rank   int    // the caller's rank in the communicator
	Stream Stream // a stream of the rank's device; the call is ordered on it
	Send   Slice  // input (unused by NativeRecv)
	Recv   Slice  // output (unused by NativeSend); may equal Send for in place
	Reduce ReduceOp
	// Peer is the root of NativeBroadcast and the other rank of NativeSend
	// and NativeRecv.
	Peer int
}

// NativeComm is a communicator of a backend's own collective library.
type NativeComm interface {
	// Ranks is the number of ranks in the communicator, local or not.
	Ranks() int
	// Launch enqueues calls as one group (ncclGroupStart … ncclGroupEnd):
	// one call per local rank for a collective, or any set of sends and
	// receives. It returns once the work is enqueued; completion is seen
	// through the calls' streams.
	Launch(calls []NativeCall) error
	// Close releases the communicator after its work has finished.
	Close() error
	// Abort cancels pending work (ncclCommAbort) so that stuck streams
	// return reason instead of hanging; the communicator is then closed.
	Abort(reason error) error
}

// NativeCollectives is an optional interface of a Device whose backend has
// a collective library. ops uses it only for algorithm "native". Without
// it, algorithm native fails with an error saying the backend has none;
// every other algorithm runs as a plan over the Stream methods.
type NativeCollectives interface {
	// NewNativeComm returns a communicator over devs, where devs[r] is rank
	// r and every device is local to this process. It returns an error if the
	// library refuses the set (NCCL refuses two ranks on one GPU).
	NewNativeComm(devs []Device) (NativeComm, error)
}
