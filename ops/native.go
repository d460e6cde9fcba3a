package ops

import (
	"errors"
	"fmt"

	"github.com/commsim/commsim/hw"
)

// Native is the algorithm name of the backend's own collectives (NCCL):
// Compile gives a plan without steps, which the Executor hands to the
// world's hw.NativeCollectives. Its reduction order is the library's, so
// it is not bit-identical with the plans.
const Native = "native"

// nativeOps are the collectives NCCL offers; sendrecv is a ring of
// ncclSend/ncclRecv pairs in one group, like directSendRecv.
var nativeOps = map[Op]hw.NativeOp{
	AllReduce:     hw.NativeAllReduce,
	AllGather:     hw.NativeAllGather,
	ReduceScatter: hw.NativeReduceScatter,
	Broadcast:     hw.NativeBroadcast,
	SendRecv:      hw.NativeSend,
}

// Native reports whether the plan is the backend's own collective.
func (p *Plan) Native() bool { return p.native }

func compileNative(s Spec) (*Plan, error) {
	if _, ok := nativeOps[s.Op]; !ok {
		return nil, fmt.Errorf("ops: %w: algorithm native has no %s (NCCL offers allreduce, allgather, reducescatter, broadcast and sendrecv)", ErrUnsupported, s.Op)
	}
	in, out := s.BufferLens()
	return &Plan{Spec: s, InLen: in, OutLen: out, Lanes: 1, Steps: make([][]Step, s.Ranks), native: true}, nil
}

// nativeComm returns the world's native communicator, made on first use.
func (e *Executor) nativeComm() (hw.NativeComm, error) {
	if e.native != nil {
		return e.native, nil
	}
	nc, ok := hw.As[hw.NativeCollectives](e.devs[0])
	if !ok {
		return nil, fmt.Errorf("%w: algorithm native needs a backend with native collectives (NCCL); %s has none", ErrUnsupported, e.devs[0].Kind())
	}
	comm, err := nc.NewNativeComm(e.devs)
	if err != nil {
		return nil, err
	}
	e.native = comm
	return comm, nil
}

// runNative launches the native collective on every rank's first lane, as
// one group, between the ranks' start and end events.
func (e *Executor) runNative(plan *Plan, in, out []hw.Slice) error {
	comm, err := e.nativeComm()
	if err != nil {
		return err
	}
	p := plan.Ranks
	redop := plan.Redop
	if !plan.Op.Reduces() {
		redop = 0
	}
	var calls []hw.NativeCall
	for r := range p {
		s := e.lanes[r][0]
		if err := s.Record(e.starts[r]); err != nil {
			return err
		}
		call := hw.NativeCall{Op: nativeOps[plan.Op], Rank: r, Stream: s, Send: in[r], Recv: out[r], Reduce: redop, Peer: plan.Root}
		if plan.Op == SendRecv {
			send, recv := call, call
			send.Peer, send.Recv = (r+1)%p, hw.Slice{}
			recv.Op, recv.Peer, recv.Send = hw.NativeRecv, (r+p-1)%p, hw.Slice{}
			calls = append(calls, send, recv)
			continue
		}
		calls = append(calls, call)
	}
	if err := comm.Launch(calls); err != nil {
		return err
	}
	for r := range p {
		if err := e.lanes[r][0].Record(e.ends[r]); err != nil {
			return err
		}
	}
	return nil
}

// Close releases what the executor holds beyond its streams: the native
// communicator, if it made one.
func (e *Executor) Close() error {
	if e.native == nil {
		return nil
	}
	err := e.native.Close()
	e.native = nil
	return err
}

var errNativePlan = errors.New("a native plan has no steps: the backend's library runs it")
