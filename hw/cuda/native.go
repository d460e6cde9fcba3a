//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/commsim/commsim/hw"
)

// This file is hw.NativeCollectives on *Device: algorithm "native" of ops
// handed to NCCL. It maps hw's calls (ranks, slices, streams) onto NCCLCall
// values (device pointers and CUstreams) and runs them inside the streams'
// order; native_launch.go issues and watches the group.

// EnvNCCLTimeout names the environment variable that sets the watchdog
// timeout of new native communicators: a Go duration ("90s", "10m") or a
// number of seconds; "0" or "off" means no limit (a dead peer then hangs
// the streams until Device.Abort). Unset, DefaultNCCLTimeout applies.
const EnvNCCLTimeout = "COMMSIM_NCCL_TIMEOUT"

// DefaultNCCLTimeout is how long a native collective may run before its
// watchdog gives up on it and aborts the communicator.
const DefaultNCCLTimeout = 5 * time.Minute

var (
	_ hw.NativeCollectives = (*Device)(nil)
	_ hw.NativeComm        = (*NativeComm)(nil)
)

// NativeComm is the hw.NativeComm of the cuda backend: an NCCL
// communicator with one rank per device, whose collectives run in the
// order of the backend's streams. Device.NewNativeComm makes one with
// every rank in this process (ncclCommInitAll); JoinNative makes this
// process's share of a multi-process one (ncclCommInitRank), which holds
// one rank and launches that rank's calls only.
type NativeComm struct {
	h    *hub
	comm *NCCLComm
	devs []*Device // by rank; nil for a rank another process holds
	what string    // for errors: "NCCL communicator of 2 ranks (cuda:gpu0, cuda:gpu1)"
	// launchMu keeps Abort out of a group being issued: NCCL allows
	// ncclCommAbort while a call blocks, not while one is being issued.
	launchMu sync.Mutex

	// Guarded by the hub lock.
	timeout  time.Duration
	pending  []*nativeLaunch // enqueued, not yet issued or failed
	watching int             // launches whose watchdog still runs
	abortErr error           // set by Abort
	closed   bool            // by Close, Abort or the world's close
}

// NewNativeComm makes an NCCL communicator over devs, rank r on devs[r]
// (ncclCommInitAll). Every device must be a device of this world (a
// decorator is looked through with hw.As) and have a GPU to itself: NCCL
// refuses two ranks on one GPU, so virtual ranks are refused with an error
// that says so. Without NCCL the error wraps ErrNoNCCL. The watchdog
// timeout comes from COMMSIM_NCCL_TIMEOUT (see EnvNCCLTimeout) and can be
// changed with SetTimeout.
func (d *Device) NewNativeComm(devs []hw.Device) (hw.NativeComm, error) {
	if err := d.opened(); err != nil {
		return nil, err
	}
	n, err := d.newNativeComm(devs)
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (d *Device) newNativeComm(devs []hw.Device) (*NativeComm, error) {
	fail := func(err error) (*NativeComm, error) {
		return nil, fmt.Errorf("cuda: native collectives: %w", err)
	}
	if len(devs) == 0 {
		return fail(fmt.Errorf("%w: no devices", hw.ErrBadArgument))
	}
	h := d.h
	cds := make([]*Device, len(devs))
	gpus := make([]int, len(devs))
	rankOnGPU := map[int]int{}
	for r, dev := range devs {
		cd, ok := hw.As[*Device](dev)
		if !ok || cd == nil {
			name := "<nil>"
			if dev != nil {
				name = dev.Name() + " (" + dev.Kind() + ")"
			}
			return fail(fmt.Errorf("%w: rank %d is %s, not a cuda device", hw.ErrBadArgument, r, name))
		}
		if cd.h != h {
			return fail(fmt.Errorf("%w: rank %d (%s) is not a device of %s's world", hw.ErrUnknownPeer, r, cd.name, d.name))
		}
		if q, dup := rankOnGPU[cd.GPU()]; dup {
			if cds[q] == cd {
				return fail(fmt.Errorf("%w: ranks %d and %d are both %s", hw.ErrBadArgument, q, r, cd.name))
			}
			return fail(fmt.Errorf("%w: ranks %d (%s) and %d (%s) are both on GPU %d: NCCL refuses two ranks on one GPU; use one GPU per rank (placement gpu)",
				hw.ErrBadArgument, q, cds[q].name, r, cd.name, cd.GPU()))
		}
		rankOnGPU[cd.GPU()] = r
		cds[r], gpus[r] = cd, cd.GPU()
	}
	timeout, err := parseNCCLTimeout(os.Getenv(EnvNCCLTimeout))
	if err != nil {
		return fail(err)
	}
	h.mu.Lock()
	err = d.closedErr("new native communicator")
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	load := h.nccl
	if load == nil {
		load = loadNCCL
	}
	lib, err := load()
	if err != nil {
		return fail(err)
	}
	comm, err := lib.initAll(gpus)
	if err != nil {
		return fail(fmt.Errorf("GPUs %v: %w", gpus, err))
	}
	names := make([]string, len(cds))
	for r, cd := range cds {
		names[r] = cd.name
	}
	n := &NativeComm{h: h, comm: comm, devs: cds, timeout: timeout,
		what: fmt.Sprintf("NCCL communicator of %d ranks (%s)", len(cds), strings.Join(names, ", "))}
	if err := n.register(d); err != nil {
		comm.Destroy()
		return nil, err
	}
	return n, nil
}

// register puts a new communicator on its hub and local devices, so that
// Device.Abort and the world's close reach it; it fails if the world has
// closed meanwhile.
func (n *NativeComm) register(d *Device) error {
	h := n.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := d.closedErr("new native communicator"); err != nil {
		return err
	}
	h.comms = append(h.comms, n)
	for _, cd := range n.devs {
		if cd != nil {
			cd.comms = append(cd.comms, n)
		}
	}
	return nil
}

// parseNCCLTimeout reads COMMSIM_NCCL_TIMEOUT's value.
func parseNCCLTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	switch strings.ToLower(v) {
	case "":
		return DefaultNCCLTimeout, nil
	case "0", "off", "none":
		return 0, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	if sec, err := strconv.ParseFloat(v, 64); err == nil && sec >= 0 && sec < math.MaxInt64/float64(time.Second) {
		return time.Duration(sec * float64(time.Second)), nil
	}
	return 0, fmt.Errorf("%w: %s=%q is not a duration (e.g. 90s or 10m; 0 or off for no limit)", hw.ErrBadArgument, EnvNCCLTimeout, v)
}

// opened refuses a NativeComm that NewNativeComm or JoinNative did not
// make.
func (n *NativeComm) opened() error {
	if n == nil || n.h == nil {
		return notOpened("NativeComm", "Device.NewNativeComm or cuda.JoinNative")
	}
	return nil
}

// Ranks is the number of ranks of the communicator, in every process; 0
// for a NativeComm not opened.
func (n *NativeComm) Ranks() int {
	if n.opened() != nil {
		return 0
	}
	return n.comm.Ranks()
}

// LocalRanks lists the ranks this process holds, ascending: all of them
// for Device.NewNativeComm, one for JoinNative; none for a NativeComm not
// opened.
func (n *NativeComm) LocalRanks() []int {
	if n.opened() != nil {
		return nil
	}
	return n.comm.LocalRanks()
}

// Timeout is how long the watchdog lets a collective run (0: no limit).
func (n *NativeComm) Timeout() time.Duration {
	if n.opened() != nil {
		return 0
	}
	n.h.mu.Lock()
	defer n.h.mu.Unlock()
	return n.timeout
}

// SetTimeout changes the watchdog's limit for collectives issued from now
// on; d ≤ 0 means no limit.
func (n *NativeComm) SetTimeout(d time.Duration) {
	if n.opened() != nil {
		return // no collective can be issued on it to time
	}
	n.h.mu.Lock()
	defer n.h.mu.Unlock()
	n.timeout = max(d, 0)
}

// usable refuses a launch on a communicator that cannot take one; the
// caller holds the hub lock.
func (n *NativeComm) usable() error {
	switch {
	case n.h.closed:
		return fmt.Errorf("cuda: native launch: %s: %w", n.what, hw.ErrClosed)
	case n.abortErr != nil:
		return fmt.Errorf("cuda: native launch: %w (%w)", n.abortErr, ErrNCCLClosed)
	case n.closed:
		return fmt.Errorf("cuda: native launch: %s: %w", n.what, ErrNCCLClosed)
	}
	if err := n.comm.isClosed(); err != nil {
		// A watchdog aborted it.
		return fmt.Errorf("cuda: native launch: %s: %w", n.what, err)
	}
	return nil
}

// Launch checks calls and enqueues them, as one NCCL group, on the calls'
// streams after the work already there; it returns without waiting (see
// native_launch.go for how the group is issued and watched). Every call is
// checked first, and nothing is enqueued if one is wrong: the rank (one
// this process holds), the stream (a stream of the rank's device), the
// slices (buffers of the rank's device, inside them, not freed), dtypes,
// NCCL's counts (AllReduce and Broadcast: Send.Len = Recv.Len; AllGather:
// Recv.Len = Send.Len × ranks; ReduceScatter: Send.Len = Recv.Len × ranks),
// the reduce op, and that the ranks held by this process agree: each
// collective needs one matching call per local rank, and each send between
// two local ranks a matching receive. Calls of ranks in other processes
// cannot be seen; their processes must launch matching calls. Errors wrap
// the hw sentinels.
func (n *NativeComm) Launch(calls []hw.NativeCall) error {
	if err := n.opened(); err != nil {
		return err
	}
	if len(calls) == 0 {
		return nil
	}
	h := n.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := n.usable(); err != nil {
		return err
	}
	l, err := n.plan(calls)
	if err != nil {
		return fmt.Errorf("cuda: native launch: %w", err)
	}
	for _, p := range l.parts {
		// All devices share the hub, so the first enqueue fails or none.
		if err := p.s.enqueue("native launch", p.o); err != nil {
			return err
		}
	}
	n.pending = append(n.pending, l)
	return nil
}

// Close waits for the communicator's enqueued work to be issued and to
// finish (a collective stuck on the GPU: until its watchdog's timeout),
// then frees it (ncclCommDestroy). If enqueued work can never be issued
// (its streams are deadlocked) it is failed, and the error says so. Close
// after Abort, or a second Close, returns nil.
func (n *NativeComm) Close() error {
	if err := n.opened(); err != nil {
		return err
	}
	h := n.h
	h.mu.Lock()
	if n.closed {
		h.mu.Unlock()
		return nil
	}
	var stuck error
	for len(n.pending) > 0 && !h.closed || n.watching > 0 {
		if len(n.pending) > 0 && n.watching == 0 && !h.closed {
			if dl := h.deadlock(); dl != nil {
				stuck = dl
				break
			}
		}
		h.idle.Wait()
	}
	n.closed = true
	n.failPending(fmt.Errorf("nccl group not launched: %s was closed: %w", n.what, ErrNCCLClosed))
	n.unregister()
	h.mu.Unlock()
	// A launch may still be under way if the world is closing meanwhile.
	n.launchMu.Lock()
	err := n.comm.Destroy()
	n.launchMu.Unlock()
	if stuck != nil {
		return fmt.Errorf("cuda: close %s: enqueued collectives could never launch: %w", n.what, errors.Join(stuck, err))
	}
	if err != nil {
		return fmt.Errorf("cuda: close %s: %w", n.what, err)
	}
	return nil
}

// Abort cancels the communicator (ncclCommAbort): collectives still
// running end (their outputs are garbage) and their streams fail with an
// error wrapping reason, collectives enqueued but not issued fail the
// same way, and later launches are refused. Device.Abort of any of its
// devices calls it too. A second Abort, or one after Close, does nothing
// more.
func (n *NativeComm) Abort(reason error) error {
	if err := n.opened(); err != nil {
		return err
	}
	if reason == nil {
		reason = errors.New("aborted")
	}
	h := n.h
	h.mu.Lock()
	if n.abortErr == nil {
		n.abortErr = fmt.Errorf("cuda: %s aborted: %w", n.what, reason)
	}
	n.closed = true
	n.failPending(n.abortErr)
	n.unregister()
	h.mu.Unlock()
	n.launchMu.Lock()
	err := n.comm.Abort()
	n.launchMu.Unlock()
	if err != nil {
		return fmt.Errorf("cuda: abort %s: %w", n.what, err)
	}
	return nil
}

// failPending fails every launch not yet issued; the caller holds the hub
// lock.
func (n *NativeComm) failPending(err error) {
	for _, l := range slices.Clone(n.pending) {
		if l.state == nativePending {
			l.resolve(err)
		}
	}
}

// unregister takes n off its devices and hub; the caller holds the lock.
func (n *NativeComm) unregister() {
	drop := func(cs []*NativeComm) []*NativeComm {
		return slices.DeleteFunc(cs, func(c *NativeComm) bool { return c == n })
	}
	n.h.comms = drop(n.h.comms)
	for _, d := range n.devs {
		if d != nil {
			d.comms = drop(d.comms)
		}
	}
}

// closeComms destroys the world's open communicators when it closes: the
// workers have stopped and every watchdog has ended.
func (h *hub) closeComms() error {
	h.mu.Lock()
	comms := slices.Clone(h.comms)
	for _, n := range comms {
		n.closed = true
		n.failPending(fmt.Errorf("nccl group not launched: the world was closed: %w", hw.ErrClosed))
		n.unregister()
	}
	h.mu.Unlock()
	var errs []error
	for _, n := range comms {
		if err := n.comm.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("cuda: close %s: %w", n.what, err))
		}
	}
	return errors.Join(errs...)
}

// plan checks calls and maps them onto NCCL's; the caller holds the hub
// lock (buffers' freed flags are read under it).
func (n *NativeComm) plan(calls []hw.NativeCall) (*nativeLaunch, error) {
	l := &nativeLaunch{n: n, calls: make([]NCCLCall, len(calls))}
	partOf := map[*Stream]*nativePart{}
	for i, c := range calls {
		k, s, bufs, err := n.mapCall(c)
		if err != nil {
			return nil, fmt.Errorf("call %d (%v, rank %d): %w", i, c.Op, c.Rank, err)
		}
		if _, err := n.comm.prepare(k); err != nil {
			return nil, fmt.Errorf("call %d: %w", i, err)
		}
		l.calls[i] = k
		l.bufs = append(l.bufs, bufs...)
		p := partOf[s]
		if p == nil {
			p = &nativePart{s: s, rank: c.Rank}
			partOf[s] = p
			l.parts = append(l.parts, p)
		}
		p.calls = append(p.calls, i)
	}
	if err := n.matchCalls(l.calls); err != nil {
		return nil, err
	}
	for _, p := range l.parts {
		p.o = &op{kind: opNative, native: l, label: l.label(p)}
	}
	return l, nil
}

// mapCall turns one hw call into NCCL's terms, checking it.
func (n *NativeComm) mapCall(c hw.NativeCall) (NCCLCall, *Stream, []*Buffer, error) {
	var k NCCLCall
	ranks := len(n.devs)
	if c.Rank < 0 || c.Rank >= ranks {
		return k, nil, nil, fmt.Errorf("%w: rank %d is out of range [0, %d)", hw.ErrBadArgument, c.Rank, ranks)
	}
	dev := n.devs[c.Rank]
	if dev == nil {
		return k, nil, nil, fmt.Errorf("%w: rank %d is held by another process (this process holds %s)", hw.ErrBadArgument, c.Rank, n.comm.describeRanks())
	}
	s, ok := c.Stream.(*Stream)
	if !ok {
		return k, nil, nil, fmt.Errorf("%w: stream %T is not a stream of the cuda backend", hw.ErrBadArgument, c.Stream)
	}
	if err := s.opened(); err != nil {
		return k, nil, nil, fmt.Errorf("%w: %w", hw.ErrBadArgument, err)
	}
	if s.dev != dev {
		return k, nil, nil, fmt.Errorf("%w: the stream belongs to %s, but rank %d is %s", hw.ErrBadArgument, s.dev.name, c.Rank, dev.name)
	}
	var useSend, useRecv bool
	switch c.Op {
	case hw.NativeAllReduce, hw.NativeAllGather, hw.NativeReduceScatter:
		useSend, useRecv = true, true
	case hw.NativeBroadcast:
		// NCCL reads the send buffer on the root only.
		useSend, useRecv = c.Peer == c.Rank || c.Send.Buf != nil, true
	case hw.NativeSend:
		useSend = true
	case hw.NativeRecv:
		useRecv = true
	default:
		return k, nil, nil, fmt.Errorf("%w: unknown native op %v", hw.ErrBadArgument, c.Op)
	}
	var bufs []*Buffer
	addr := func(which string, sl hw.Slice) (uintptr, error) {
		if err := checkSlice(dev, "native "+c.Op.String(), which, sl); err != nil {
			return 0, err
		}
		b := sl.Buf.(*Buffer)
		bufs = append(bufs, b)
		return uintptr(b.addr(sl.Off)), nil
	}
	var err error
	if useSend {
		if k.Send, err = addr("send", c.Send); err != nil {
			return k, nil, nil, err
		}
		k.DType = c.Send.DType()
	}
	if useRecv {
		if k.Recv, err = addr("recv", c.Recv); err != nil {
			return k, nil, nil, err
		}
		if useSend && c.Recv.DType() != k.DType {
			return k, nil, nil, fmt.Errorf("%w: send is %v, recv is %v", hw.ErrDTypeMismatch, k.DType, c.Recv.DType())
		}
		k.DType = c.Recv.DType()
	}
	mismatch := func(bad bool) error {
		if !bad {
			return nil
		}
		return fmt.Errorf("%w: send has %d elements, recv %d; %v needs %s", hw.ErrSizeMismatch, c.Send.Len, c.Recv.Len, c.Op, nativeShape[c.Op])
	}
	switch c.Op {
	case hw.NativeAllReduce:
		k.Count, err = c.Send.Len, mismatch(c.Recv.Len != c.Send.Len)
	case hw.NativeAllGather:
		k.Count, err = c.Send.Len, mismatch(c.Recv.Len != c.Send.Len*ranks)
	case hw.NativeReduceScatter:
		k.Count, err = c.Recv.Len, mismatch(c.Send.Len != c.Recv.Len*ranks)
	case hw.NativeBroadcast:
		k.Count, err = c.Recv.Len, mismatch(useSend && c.Send.Len != c.Recv.Len)
	case hw.NativeSend:
		k.Count = c.Send.Len
	case hw.NativeRecv:
		k.Count = c.Recv.Len
	}
	if err != nil {
		return k, nil, nil, err
	}
	k.Op, k.Rank, k.Stream = c.Op, c.Rank, s.cu
	switch c.Op {
	case hw.NativeAllReduce, hw.NativeReduceScatter:
		k.Reduce = c.Reduce
	case hw.NativeBroadcast, hw.NativeSend, hw.NativeRecv:
		k.Peer = c.Peer
	}
	return k, s, bufs, nil
}

// nativeShape is what each op needs of the lengths, for errors.
var nativeShape = map[hw.NativeOp]string{
	hw.NativeAllReduce:     "recv as long as send",
	hw.NativeAllGather:     "recv of send × ranks elements",
	hw.NativeReduceScatter: "send of recv × ranks elements",
	hw.NativeBroadcast:     "send (on the root) as long as recv",
}

// matchCalls checks that the ranks held by this process agree. A
// collective missing on one of them, or a send between two of them without
// its receive, would leave the others waiting in NCCL forever; and ranks
// that disagree on count, dtype, op or root make NCCL read or write past
// buffers. Ranks of other processes are theirs to match.
func (n *NativeComm) matchCalls(calls []NCCLCall) error {
	ranks := len(n.devs)
	local := n.comm.ranks             // ascending
	byOp := map[hw.NativeOp][][]int{} // op → rank → call indices
	type pair struct{ from, to int }
	sends, recvs := map[pair][]int{}, map[pair][]int{}
	for i, k := range calls {
		switch k.Op {
		case hw.NativeSend:
			sends[pair{k.Rank, k.Peer}] = append(sends[pair{k.Rank, k.Peer}], i)
		case hw.NativeRecv:
			recvs[pair{k.Peer, k.Rank}] = append(recvs[pair{k.Peer, k.Rank}], i)
		default:
			if byOp[k.Op] == nil {
				byOp[k.Op] = make([][]int, ranks)
			}
			byOp[k.Op][k.Rank] = append(byOp[k.Op][k.Rank], i)
		}
	}
	for op := hw.NativeAllReduce; op <= hw.NativeBroadcast; op++ {
		byRank := byOp[op]
		if byRank == nil {
			continue
		}
		first := local[0]
		for _, r := range local {
			if len(byRank[r]) != len(byRank[first]) {
				return fmt.Errorf("%w: %v: rank %d has %d call(s), rank %d has %d; every rank of the communicator in this process must take part, or the others wait forever",
					hw.ErrBadArgument, op, r, len(byRank[r]), first, len(byRank[first]))
			}
			for j, i := range byRank[r] {
				if err := agree(calls[byRank[first][j]], calls[i], op.String()); err != nil {
					return err
				}
			}
		}
	}
	// Only pairs of local ranks can be matched here.
	both := func(k pair) bool { return n.devs[k.from] != nil && n.devs[k.to] != nil }
	keys := make([]pair, 0, len(sends)+len(recvs))
	for k := range sends {
		if both(k) {
			keys = append(keys, k)
		}
	}
	for k := range recvs {
		if _, ok := sends[k]; !ok && both(k) {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b pair) int { return (a.from-b.from)*ranks + a.to - b.to })
	for _, k := range keys {
		s, r := sends[k], recvs[k]
		if len(s) != len(r) {
			return fmt.Errorf("%w: %d send(s) from rank %d to rank %d but %d matching recv(s) at rank %d; both ranks are in this process, so an unmatched send or recv waits forever",
				hw.ErrBadArgument, len(s), k.from, k.to, len(r), k.to)
		}
		for j := range s {
			if err := agree(calls[s[j]], calls[r[j]], fmt.Sprintf("send from rank %d to rank %d", k.from, k.to)); err != nil {
				return err
			}
		}
	}
	return nil
}

// agree checks that two ranks' calls of one collective (or a send and its
// receive) match.
func agree(a, b NCCLCall, what string) error {
	switch {
	case a.DType != b.DType:
		return fmt.Errorf("%w: %s: rank %d has %v, rank %d has %v", hw.ErrDTypeMismatch, what, a.Rank, a.DType, b.Rank, b.DType)
	case a.Count != b.Count:
		return fmt.Errorf("%w: %s: rank %d has count %d, rank %d has count %d (NCCL's count: per rank for allgather and reducescatter)",
			hw.ErrSizeMismatch, what, a.Rank, a.Count, b.Rank, b.Count)
	case a.Reduce != b.Reduce:
		return fmt.Errorf("%w: %s: rank %d reduces with %v, rank %d with %v", hw.ErrBadArgument, what, a.Rank, a.Reduce, b.Rank, b.Reduce)
	case a.Op == hw.NativeBroadcast && a.Peer != b.Peer:
		return fmt.Errorf("%w: %s: rank %d has root %d, rank %d has root %d", hw.ErrBadArgument, what, a.Rank, a.Peer, b.Rank, b.Peer)
	}
	return nil
}

// label names a part's op in errors: "nccl allreduce sum 1024 x f32 (rank
// 1 of 4)".
func (l *nativeLaunch) label(p *nativePart) string {
	var b []string
	for j, i := range p.calls {
		if j == 3 {
			b = append(b, fmt.Sprintf("and %d more", len(p.calls)-3))
			break
		}
		k := l.calls[i]
		switch k.Op {
		case hw.NativeAllReduce, hw.NativeReduceScatter:
			b = append(b, fmt.Sprintf("%v %v %d x %v", k.Op, k.Reduce, k.Count, k.DType))
		case hw.NativeAllGather:
			b = append(b, fmt.Sprintf("%v %d x %v", k.Op, k.Count, k.DType))
		case hw.NativeBroadcast:
			b = append(b, fmt.Sprintf("%v %d x %v from root %d", k.Op, k.Count, k.DType, k.Peer))
		case hw.NativeSend:
			b = append(b, fmt.Sprintf("send %d x %v to rank %d", k.Count, k.DType, k.Peer))
		case hw.NativeRecv:
			b = append(b, fmt.Sprintf("recv %d x %v from rank %d", k.Count, k.DType, k.Peer))
		}
	}
	return fmt.Sprintf("nccl %s (rank %d of %d)", strings.Join(b, ", "), p.rank, len(l.n.devs))
}
