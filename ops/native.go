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
func (p *Plan) Native() bool { return p != nil && p.native }

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

// runNative launches the native collective runs times on every rank's
// first lane, each time as one group, as nccl-tests does, between the
// ranks' start and end events.
func (e *Executor) runNative(plan *Plan, in, out []hw.Slice, runs int) error {
	comm, err := e.nativeComm()
	if err != nil {
		return err
	}
	for r := range plan.Ranks {
		if err := e.lanes[r][0].Record(e.starts[r]); err != nil {
			return err
		}
	}
	for range runs {
		var calls []hw.NativeCall
		for r := range plan.Ranks {
			calls = appendNativeCalls(calls, plan, r, e.lanes[r][0], in[r], out[r])
		}
		if err := comm.Launch(calls); err != nil {
			return err
		}
	}
	for r := range plan.Ranks {
		if err := e.lanes[r][0].Record(e.ends[r]); err != nil {
			return err
		}
	}
	return nil
}

// appendNativeCalls appends rank r's part of a native plan, on stream s:
// one call of the collective, or for sendrecv a send to rank r+1 and a
// receive from rank r−1 (a ring, as directSendRecv).
func appendNativeCalls(calls []hw.NativeCall, plan *Plan, r int, s hw.Stream, in, out hw.Slice) []hw.NativeCall {
	p := plan.Ranks
	redop := plan.Redop
	if !plan.Op.Reduces() {
		redop = 0
	}
	call := hw.NativeCall{Op: nativeOps[plan.Op], Rank: r, Stream: s, Send: in, Recv: out, Reduce: redop, Peer: plan.Root}
	if plan.Op != SendRecv {
		return append(calls, call)
	}
	send, recv := call, call
	send.Peer, send.Recv = (r+1)%p, hw.Slice{}
	recv.Op, recv.Peer, recv.Send = hw.NativeRecv, (r+p-1)%p, hw.Slice{}
	return append(calls, send, recv)
}

// RunNativeRank runs one rank's part of a native plan in a process that
// holds only that rank of comm, a communicator spanning processes (as
// cuda.JoinNative makes): every other rank runs the same plan in its own
// process, and the collective completes once all have launched. It checks
// in and out as Executor.Run does (on s's device, the plan's dtype and
// lengths, disjoint or NCCL's in-place layout; see Run), launches the
// rank's call on s between two events (for sendrecv, a send to rank+1 and
// a receive from rank−1), waits for s, and returns the seconds between the
// events: this rank's time, which the caller may combine across ranks.
func RunNativeRank(comm hw.NativeComm, s hw.Stream, plan *Plan, rank int, in, out hw.Slice) (seconds float64, err error) {
	return RunNativeRankBackToBack(comm, s, plan, rank, in, out, 1)
}

// RunNativeRankBackToBack is RunNativeRank launching the rank's call runs
// times in a row before it waits, as nccl-tests' -n does (see
// Executor.RunBackToBack), and returns the mean seconds of a run.
func RunNativeRankBackToBack(comm hw.NativeComm, s hw.Stream, plan *Plan, rank int, in, out hw.Slice, runs int) (seconds float64, err error) {
	if plan == nil {
		return 0, fmt.Errorf("ops: run native rank: nil plan")
	}
	fail := func(err error) (float64, error) {
		return 0, fmt.Errorf("ops: run %v: rank %d: %w", plan.Spec, rank, err)
	}
	switch {
	case !plan.native:
		return fail(fmt.Errorf("%w: RunNativeRank takes algorithm native plans; %s plans run on an Executor", ErrUnsupported, plan.Algo))
	case comm == nil || s == nil:
		return fail(fmt.Errorf("%w: nil communicator or stream", hw.ErrBadArgument))
	case plan.Ranks != comm.Ranks():
		return fail(fmt.Errorf("%w: plan is for %d ranks, the communicator has %d", hw.ErrBadArgument, plan.Ranks, comm.Ranks()))
	case rank < 0 || rank >= plan.Ranks:
		return fail(fmt.Errorf("%w: rank %d is out of range [0, %d)", hw.ErrBadArgument, rank, plan.Ranks))
	case runs < 1:
		return fail(fmt.Errorf("%w: %d runs, want 1 or more", hw.ErrBadArgument, runs))
	}
	dev := s.Device()
	if err := checkSlices(plan, rank, dev, in, out); err != nil {
		return 0, err
	}
	start, err := dev.NewEvent()
	if err != nil {
		return fail(err)
	}
	end, err := dev.NewEvent()
	if err != nil {
		return fail(err)
	}
	if err := s.Record(start); err != nil {
		return fail(err)
	}
	for range runs {
		if err := comm.Launch(appendNativeCalls(nil, plan, rank, s, in, out)); err != nil {
			return fail(err)
		}
	}
	if err := s.Record(end); err != nil {
		return fail(err)
	}
	if err := s.Synchronize(); err != nil {
		return fail(err)
	}
	if seconds, err = end.ElapsedSince(start); err != nil {
		return fail(fmt.Errorf("timing: %w", err))
	}
	return seconds / float64(runs), nil
}

// Close releases what the executor holds beyond its streams: the native
// communicator, if it made one.
func (e *Executor) Close() error {
	if err := e.made(); err != nil {
		return err
	}
	if e.native == nil {
		return nil
	}
	err := e.native.Close()
	e.native = nil
	return err
}

var errNativePlan = errors.New("a native plan has no steps: the backend's library runs it")
