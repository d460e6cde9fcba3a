package cuda

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/commsim/commsim/hw"
)

// This file is NCCL as the package uses it: a lazily loaded library and a
// communicator over raw handles (device pointers and CUstreams as uintptr).
// It does not know the package's Device, Buffer or Stream types; the
// hw.NativeCollectives glue maps those onto NCCLCall values. The purego
// binding itself is in nccl_dl.go; on other systems nccl_other.go makes
// every call fail with ErrNoNCCL.

// ncclUniqueIDArg is how an id crosses into ncclCommInitRank, whose C
// signature takes the 128-byte ncclUniqueId struct by value. purego (v0.11)
// accepts a Go struct argument on amd64 and arm64 and lays it out per the C
// ABI, which for an aggregate this large is:
//
//   - amd64 System V: an aggregate over 16 bytes is class MEMORY, so the
//     caller copies it onto the stack in the argument's position; the other
//     arguments still take registers (comm → RDI, nranks → RSI, rank → RDX)
//     and the 16 eightbytes go to the stack area. purego's placeStack copies
//     the struct's memory eightbyte by eightbyte into the stack slots.
//   - arm64 AAPCS64 (Linux and Apple): a composite over 16 bytes is copied
//     to caller-allocated memory and replaced by a pointer in the next
//     general register (x2 here). purego copies the struct to the Go heap,
//     passes that address, and keeps it alive for the call.
//
// A Go [128]byte is not accepted as an argument by purego (arrays are not a
// C argument type) and a *ncclUniqueId would be wrong on amd64, so the array
// is wrapped in a one-field struct: the same bytes, no padding, alignment 1,
// exactly as C's struct { char internal[128]; }. NCCL copies the id during
// the call, so nothing needs to outlive it. nccl_fake_test.go checks the
// amd64 layout against a C function compiled on the spot.
type ncclUniqueIDArg struct {
	Internal NCCLUniqueID
}

// ncclLib holds the resolved entry points. The signatures mirror nccl.h
// with size_t as uintptr, int and enums as int32, and every handle or
// device pointer (ncclComm_t, cudaStream_t, void*) as uintptr, since they
// point to memory Go must not touch.
type ncclLib struct {
	path    string // the file opened
	from    string // where the search found it (see ncclPlaces)
	version int

	getVersion   func(version *int32) ncclResult
	getUniqueID  func(id *NCCLUniqueID) ncclResult
	commInitRank func(comm *uintptr, nranks int32, id ncclUniqueIDArg, rank int32) ncclResult
	// commInitRankConfig is optional (NCCL ≥ 2.14); nil when the library
	// lacks it, and then JoinNative's communicators block as before.
	commInitRankConfig func(comm *uintptr, nranks int32, id ncclUniqueIDArg, rank int32, config *ncclConfig) ncclResult
	commInitAll        func(comms *uintptr, ndev int32, devlist *int32) ncclResult
	allReduce          func(send, recv, count uintptr, dt, op int32, comm, stream uintptr) ncclResult
	allGather          func(send, recv, sendcount uintptr, dt int32, comm, stream uintptr) ncclResult
	reduceScatter      func(send, recv, recvcount uintptr, dt, op int32, comm, stream uintptr) ncclResult
	broadcast          func(send, recv, count uintptr, dt, root int32, comm, stream uintptr) ncclResult
	send               func(buf, count uintptr, dt, peer int32, comm, stream uintptr) ncclResult
	recv               func(buf, count uintptr, dt, peer int32, comm, stream uintptr) ncclResult
	groupStart         func() ncclResult
	groupEnd           func() ncclResult
	commGetAsyncError  func(comm uintptr, result *ncclResult) ncclResult
	commAbort          func(comm uintptr) ncclResult
	commDestroy        func(comm uintptr) ncclResult
	getErrorString     func(result ncclResult) string
	// getLastError is optional (NCCL ≥ 2.13); nil when the library lacks it.
	getLastError func(comm uintptr) string
}

var (
	ncclOnce    sync.Once
	ncclLoaded  *ncclLib
	ncclLoadErr error
)

// loadNCCL finds and opens NCCL once: COMMSIM_NCCL_LIBRARY when set, else
// the loader's path, then the places pip and conda put it (ncclPlaces).
func loadNCCL() (*ncclLib, error) {
	ncclOnce.Do(func() {
		ncclLoaded, ncclLoadErr = findNCCL(osLibEnv)
	})
	return ncclLoaded, ncclLoadErr
}

func findNCCL(e libEnv) (*ncclLib, error) {
	var l *ncclLib
	found, err := findLibrary(e.ncclPlaces(), func(file string) error {
		var err error
		l, err = openNCCL(file)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: no usable %s (native collectives need NCCL 2.7 or later: pip install nvidia-nccl-cu12, or set %s to the file): %v",
			ErrNoNCCL, LibNCCL, EnvNCCLLibrary, err)
	}
	l.path, l.from = found.Path, found.From
	return l, nil
}

// NCCLLibrary says which NCCL was loaded and from where, or why none
// could be.
func NCCLLibrary() (Library, error) {
	l, err := loadNCCL()
	if err != nil {
		return Library{}, err
	}
	return Library{Path: l.path, From: l.from}, nil
}

// NCCLVersionString spells an NCCL version code: 22703 is "2.27.3", 2708
// (before 2.9) "2.7.8".
func NCCLVersionString(code int) string {
	if code < 10000 {
		return fmt.Sprintf("%d.%d.%d", code/1000, code%1000/100, code%100)
	}
	return fmt.Sprintf("%d.%d.%d", code/10000, code%10000/100, code%100)
}

// check turns a result into an *NCCLError naming the call, with NCCL's text
// and, where the library has ncclGetLastError, its last message. comm may
// be 0 (the message is then the thread's last one).
func (l *ncclLib) check(call string, comm uintptr, r ncclResult) error {
	if r == ncclSuccess {
		return nil
	}
	e := &NCCLError{Call: call, Result: int(r), Text: l.getErrorString(r)}
	if l.getLastError != nil {
		e.Detail = l.getLastError(comm)
	}
	return e
}

// NCCLAvailable reports whether NCCL loads, or why not (an error wrapping
// ErrNoNCCL that names the library).
func NCCLAvailable() error {
	_, err := loadNCCL()
	return err
}

// NCCLVersion is NCCL's version code: major×10000 + minor×100 + patch for
// 2.9 and later (22105 is 2.21.5), major×1000 + minor×100 + patch before.
func NCCLVersion() (int, error) {
	l, err := loadNCCL()
	if err != nil {
		return 0, err
	}
	return l.version, nil
}

// NCCLGetUniqueID makes the id that names a new multi-process communicator.
// Rank 0 calls it once and sends the bytes to every other rank (see
// NCCLRendezvous). It needs NCCL but no GPU.
func NCCLGetUniqueID() (NCCLUniqueID, error) {
	l, err := loadNCCL()
	if err != nil {
		return NCCLUniqueID{}, err
	}
	return l.uniqueID()
}

func (l *ncclLib) uniqueID() (NCCLUniqueID, error) {
	id := new(NCCLUniqueID)
	var pin runtime.Pinner
	pin.Pin(id)
	defer pin.Unpin()
	if err := l.check("ncclGetUniqueId", 0, l.getUniqueID(id)); err != nil {
		return NCCLUniqueID{}, err
	}
	return *id, nil
}

// NCCLRendezvous gives every process of a job the same unique id: rank 0
// makes it with NCCLGetUniqueID and serves it over TCP, the others fetch
// it. Only rank 0 loads NCCL here; a missing library on rank 0 fails the
// meeting there and times out the others.
func NCCLRendezvous(ctx context.Context, r Rendezvous) (NCCLUniqueID, error) {
	return ncclRendezvous(ctx, r, loadNCCL)
}

// ncclRendezvous is NCCLRendezvous with NCCL from load (the real library
// or a test's stand-in).
func ncclRendezvous(ctx context.Context, r Rendezvous, load func() (*ncclLib, error)) (NCCLUniqueID, error) {
	b, err := r.Exchange(ctx, NCCLUniqueIDBytes, func() ([]byte, error) {
		l, err := load()
		if err != nil {
			return nil, err
		}
		id, err := l.uniqueID()
		return id[:], err
	})
	if err != nil {
		return NCCLUniqueID{}, err
	}
	return NCCLUniqueID(b), nil
}

// NCCLComm is one process's share of an NCCL communicator: one ncclComm_t
// per rank that lives in this process (all of them after NCCLInitAll, one
// after NCCLInitRank). Methods take the global rank to say which handle
// they act for.
//
// NCCL's rules carry over. Only one goroutine may issue calls on a
// communicator at a time, and every rank must issue the same collectives in
// the same order. Abort is the exception: it may run while another
// goroutine is blocked inside NCCL (that is what it is for), but not while
// one is starting a new call.
type NCCLComm struct {
	lib     *ncclLib
	nranks  int
	ranks   []int     // global ranks held here, ascending
	handles []uintptr // ncclComm_t of ranks[i]
	devices []int     // CUDA ordinal of ranks[i], or -1 when NCCL chose

	// nonblocking communicators (ncclConfig_t.blocking = 0) return
	// ncclInProgress from calls NCCL is still working on, and
	// ncclCommGetAsyncError reports ncclInProgress until it is done.
	nonblocking bool

	// mu orders async-error polling against Abort and Destroy, so a poll
	// never reads a freed communicator. It is never held across a call
	// that can block.
	mu     sync.Mutex
	closed error // nil while open; why it closed otherwise

	groups atomic.Int32 // Group calls under way, to refuse a lone Do that would deadlock
}

// NCCLInitAll makes a communicator of len(devices) ranks in this process,
// rank r on CUDA device devices[r] (ncclCommInitAll). Two ranks on one GPU
// are refused before NCCL is called. NCCL sets the CUDA device of the
// calling thread while it works and restores it before returning.
func NCCLInitAll(devices []int) (*NCCLComm, error) {
	if err := checkNCCLDevices(devices); err != nil {
		return nil, err
	}
	l, err := loadNCCL()
	if err != nil {
		return nil, err
	}
	return l.initAll(devices)
}

func (l *ncclLib) initAll(devices []int) (*NCCLComm, error) {
	if err := cmp.Or(checkNCCLDevices(devices), errEnvNonblocking()); err != nil {
		return nil, err
	}
	n := len(devices)
	handles := make([]uintptr, n)
	devlist := make([]int32, n)
	for i, d := range devices {
		devlist[i] = int32(d)
	}
	var pin runtime.Pinner
	pin.Pin(&handles[0])
	pin.Pin(&devlist[0])
	r := l.commInitAll(&handles[0], int32(n), &devlist[0])
	pin.Unpin()
	// On failure NCCL has already cleaned up what it set up; the handles
	// are not touched, since freeing one twice would crash the process.
	if err := l.check(fmt.Sprintf("ncclCommInitAll(devices %v)", devices), 0, r); err != nil {
		return nil, err
	}
	c := &NCCLComm{lib: l, nranks: n, ranks: make([]int, n), handles: handles, devices: slices.Clone(devices)}
	for i := range c.ranks {
		c.ranks[i] = i
	}
	return c, nil
}

// NCCLInitRank joins rank of an nranks-rank communicator named by id
// (ncclCommInitRank). It blocks until all nranks ranks, in any processes,
// have joined. The rank's GPU is the CUDA device current on the calling OS
// thread, so call it from a goroutine that has locked its thread and made
// the device's primary context current. For several ranks in one process
// use NCCLInitRanks: separate NCCLInitRank calls on one thread deadlock.
func NCCLInitRank(id NCCLUniqueID, nranks, rank int) (*NCCLComm, error) {
	return NCCLInitRanks(id, nranks, []int{rank}, nil)
}

// NCCLInitRanks joins several ranks of one communicator from this process
// inside one ncclGroupStart/ncclGroupEnd, as NCCL requires. Before joining
// ranks[i] it calls setDevice(i), which must make that rank's device
// current on the calling thread (cuCtxSetCurrent of its primary context);
// the goroutine is locked to its thread for the whole call so setDevice and
// NCCL see the same thread. setDevice may be nil for one rank, which then
// uses the current device.
func NCCLInitRanks(id NCCLUniqueID, nranks int, ranks []int, setDevice func(i int) error) (*NCCLComm, error) {
	if err := checkNCCLRanks(nranks, ranks, setDevice != nil); err != nil {
		return nil, err
	}
	l, err := loadNCCL()
	if err != nil {
		return nil, err
	}
	return l.initRanks(id, nranks, ranks, setDevice)
}

func checkNCCLRanks(nranks int, ranks []int, haveSetDevice bool) error {
	switch {
	case nranks < 1:
		return fmt.Errorf("nccl: %w: %d ranks; need at least 1", hw.ErrBadArgument, nranks)
	case len(ranks) == 0:
		return fmt.Errorf("nccl: %w: no ranks to join", hw.ErrBadArgument)
	case len(ranks) > 1 && !haveSetDevice:
		return fmt.Errorf("nccl: %w: %d ranks in one process need setDevice: on one device NCCL refuses two ranks on one GPU; use one GPU per rank", hw.ErrBadArgument, len(ranks))
	}
	seen := map[int]bool{}
	for _, r := range ranks {
		if r < 0 || r >= nranks {
			return fmt.Errorf("nccl: %w: rank %d is out of range [0, %d)", hw.ErrBadArgument, r, nranks)
		}
		if seen[r] {
			return fmt.Errorf("nccl: %w: rank %d listed twice", hw.ErrBadArgument, r)
		}
		seen[r] = true
	}
	return nil
}

func (l *ncclLib) initRanks(id NCCLUniqueID, nranks int, ranks []int, setDevice func(i int) error) (*NCCLComm, error) {
	if err := cmp.Or(checkNCCLRanks(nranks, ranks, setDevice != nil), errEnvNonblocking()); err != nil {
		return nil, err
	}
	// The group, the current device and NCCL's per-thread group state all
	// belong to one OS thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	// A setDevice that fails once ranks are queued would leave those ranks
	// waiting in ncclGroupEnd for peers that never come, so every device is
	// tried once before the group starts.
	if setDevice != nil {
		for i, rank := range ranks {
			if err := setDevice(i); err != nil {
				return nil, fmt.Errorf("nccl: making rank %d's device current: %w", rank, err)
			}
		}
	}
	handles := make([]uintptr, len(ranks))
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&handles[0])
	grouped := len(ranks) > 1
	if grouped {
		if err := l.check("ncclGroupStart", 0, l.groupStart()); err != nil {
			return nil, err
		}
	}
	var errs []error
	for i, rank := range ranks {
		if setDevice != nil {
			if err := setDevice(i); err != nil {
				// It worked a moment ago. The group must still be closed,
				// and the ranks already queued may then wait for their
				// peers until NCCL's bootstrap gives up.
				errs = append(errs, fmt.Errorf("nccl: making rank %d's device current: %w", rank, err))
				break
			}
		}
		r := l.commInitRank(&handles[i], int32(nranks), ncclUniqueIDArg{id}, int32(rank))
		if err := l.check(fmt.Sprintf("ncclCommInitRank(rank %d of %d)", rank, nranks), 0, r); err != nil {
			errs = append(errs, err)
			break
		}
	}
	if grouped {
		errs = append(errs, l.check(fmt.Sprintf("ncclGroupEnd(init of ranks %v)", ranks), 0, l.groupEnd()))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c := &NCCLComm{lib: l, nranks: nranks, ranks: slices.Clone(ranks), handles: handles, devices: make([]int, len(ranks))}
	for i := range c.devices {
		c.devices[i] = -1
	}
	c.sortRanks()
	return c, nil
}

// sortRanks puts the local ranks in ascending order, keeping handles and
// devices alongside, so errors and LocalRanks read in rank order.
func (c *NCCLComm) sortRanks() {
	idx := make([]int, len(c.ranks))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return c.ranks[a] - c.ranks[b] })
	ranks, handles, devices := slices.Clone(c.ranks), slices.Clone(c.handles), slices.Clone(c.devices)
	for i, j := range idx {
		c.ranks[i], c.handles[i], c.devices[i] = ranks[j], handles[j], devices[j]
	}
}

// Ranks is the size of the communicator, local ranks or not (0 if not opened).
func (c *NCCLComm) Ranks() int {
	if c == nil {
		return 0
	}
	return c.nranks
}

// LocalRanks lists the ranks this process holds, ascending (none if not opened).
func (c *NCCLComm) LocalRanks() []int {
	if c == nil {
		return nil
	}
	return slices.Clone(c.ranks)
}

// Device is the CUDA ordinal of a local rank, or -1 when it was the
// thread's current device at NCCLInitRank(s) and is not recorded.
func (c *NCCLComm) Device(rank int) (int, error) {
	if err := c.opened(); err != nil {
		return 0, err
	}
	i, err := c.local(rank)
	if err != nil {
		return 0, err
	}
	return c.devices[i], nil
}

func (c *NCCLComm) local(rank int) (int, error) {
	if i, ok := slices.BinarySearch(c.ranks, rank); ok {
		return i, nil
	}
	return 0, fmt.Errorf("nccl: %w: rank %d is not held by this process (local ranks %v of %d)", hw.ErrBadArgument, rank, c.ranks, c.nranks)
}

// isClosed is also where the calls that issue work refuse an NCCLComm not
// opened.
func (c *NCCLComm) isClosed() error {
	if err := c.opened(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// NCCLCall is one rank's part of a native collective, in raw handles:
// Send and Recv are CUDA device pointers (CUdeviceptr), Stream a CUstream of
// the rank's device (0 is the legacy default stream).
//
// Count is in elements and follows NCCL: for AllReduce, Broadcast, Send and
// Recv it is the whole buffer; for AllGather it is the per-rank send count
// (Recv holds Count × Ranks elements); for ReduceScatter it is the per-rank
// receive count (Send holds Count × Ranks elements). In place is Send ==
// Recv for AllReduce and Broadcast, Send == Recv + rank×Count×size for
// AllGather and Send + rank×Count×size == Recv for ReduceScatter.
type NCCLCall struct {
	Op     hw.NativeOp
	Rank   int
	Send   uintptr // unused by NativeRecv
	Recv   uintptr // unused by NativeSend
	Count  int
	DType  hw.DType
	Reduce hw.ReduceOp // AllReduce and ReduceScatter only
	Peer   int         // root of Broadcast; other rank of Send and Recv
	Stream uintptr
}

func (k NCCLCall) String() string {
	return fmt.Sprintf("%v(rank %d, count %d, %v)", k.Op, k.Rank, k.Count, k.DType)
}

// ncclArgs is a validated call, ready for the library.
type ncclArgs struct {
	handle uintptr
	count  uintptr
	dt, op int32
	peer   int32
}

func (c *NCCLComm) prepare(k NCCLCall) (ncclArgs, error) {
	bad := func(format string, args ...any) (ncclArgs, error) {
		return ncclArgs{}, fmt.Errorf("nccl: %v: %w: "+format, append([]any{k, hw.ErrBadArgument}, args...)...)
	}
	i, err := c.local(k.Rank)
	if err != nil {
		return ncclArgs{}, fmt.Errorf("nccl: %v: %w", k, err)
	}
	a := ncclArgs{handle: c.handles[i], count: uintptr(k.Count)}
	if k.Count < 0 {
		return bad("negative count")
	}
	if a.dt, err = ncclDataType(k.DType); err != nil {
		return ncclArgs{}, fmt.Errorf("nccl: %v: %w", k, err)
	}
	needSend, needRecv := true, true
	switch k.Op {
	case hw.NativeAllReduce, hw.NativeReduceScatter:
		if a.op, err = ncclRedOp(k.Reduce, k.DType); err != nil {
			return ncclArgs{}, fmt.Errorf("nccl: %v: %w", k, err)
		}
	case hw.NativeAllGather:
	case hw.NativeBroadcast, hw.NativeSend, hw.NativeRecv:
		if k.Peer < 0 || k.Peer >= c.nranks {
			return bad("peer %d is out of range [0, %d)", k.Peer, c.nranks)
		}
		a.peer = int32(k.Peer)
		needSend = k.Op == hw.NativeSend || k.Op == hw.NativeBroadcast && k.Peer == k.Rank
		needRecv = k.Op != hw.NativeSend
	default:
		return bad("unknown native op %d", uint8(k.Op))
	}
	if k.Count > 0 && (needSend && k.Send == 0 || needRecv && k.Recv == 0) {
		return bad("null device pointer (send %#x, recv %#x)", k.Send, k.Recv)
	}
	return a, nil
}

// enqueue issues one prepared call.
func (c *NCCLComm) enqueue(k NCCLCall, a ncclArgs) error {
	l := c.lib
	var r ncclResult
	switch k.Op {
	case hw.NativeAllReduce:
		r = l.allReduce(k.Send, k.Recv, a.count, a.dt, a.op, a.handle, k.Stream)
	case hw.NativeAllGather:
		r = l.allGather(k.Send, k.Recv, a.count, a.dt, a.handle, k.Stream)
	case hw.NativeReduceScatter:
		r = l.reduceScatter(k.Send, k.Recv, a.count, a.dt, a.op, a.handle, k.Stream)
	case hw.NativeBroadcast:
		r = l.broadcast(k.Send, k.Recv, a.count, a.dt, a.peer, a.handle, k.Stream)
	case hw.NativeSend:
		r = l.send(k.Send, a.count, a.dt, a.peer, a.handle, k.Stream)
	case hw.NativeRecv:
		r = l.recv(k.Recv, a.count, a.dt, a.peer, a.handle, k.Stream)
	}
	if c.nonblocking && r == ncclInProgress {
		return nil // queued; the group's end says when it is issued
	}
	return l.check(fmt.Sprintf("%s(rank %d)", ncclFuncName[k.Op], k.Rank), a.handle, r)
}

var ncclFuncName = map[hw.NativeOp]string{
	hw.NativeAllReduce:     "ncclAllReduce",
	hw.NativeAllGather:     "ncclAllGather",
	hw.NativeReduceScatter: "ncclReduceScatter",
	hw.NativeBroadcast:     "ncclBroadcast",
	hw.NativeSend:          "ncclSend",
	hw.NativeRecv:          "ncclRecv",
}

// Do issues one call on its own. Outside Group this blocks until the other
// ranks of the collective are ready to enqueue, so with several local ranks
// use Launch or Group; inside Group it only queues.
func (c *NCCLComm) Do(k NCCLCall) error {
	if err := c.isClosed(); err != nil {
		return err
	}
	if len(c.ranks) > 1 && c.groups.Load() == 0 {
		return fmt.Errorf("nccl: %v: %w: with local ranks %v a call outside a group waits forever for the others; use Launch or Group",
			k, hw.ErrBadArgument, c.ranks)
	}
	a, err := c.prepare(k)
	if err != nil {
		return err
	}
	return c.enqueue(k, a)
}

// AllReduce is Do of a NativeAllReduce call.
func (c *NCCLComm) AllReduce(rank int, send, recv uintptr, count int, dt hw.DType, op hw.ReduceOp, stream uintptr) error {
	return c.Do(NCCLCall{Op: hw.NativeAllReduce, Rank: rank, Send: send, Recv: recv, Count: count, DType: dt, Reduce: op, Stream: stream})
}

// AllGather is Do of a NativeAllGather call; sendCount is per rank.
func (c *NCCLComm) AllGather(rank int, send, recv uintptr, sendCount int, dt hw.DType, stream uintptr) error {
	return c.Do(NCCLCall{Op: hw.NativeAllGather, Rank: rank, Send: send, Recv: recv, Count: sendCount, DType: dt, Stream: stream})
}

// ReduceScatter is Do of a NativeReduceScatter call; recvCount is per rank.
func (c *NCCLComm) ReduceScatter(rank int, send, recv uintptr, recvCount int, dt hw.DType, op hw.ReduceOp, stream uintptr) error {
	return c.Do(NCCLCall{Op: hw.NativeReduceScatter, Rank: rank, Send: send, Recv: recv, Count: recvCount, DType: dt, Reduce: op, Stream: stream})
}

// Broadcast is Do of a NativeBroadcast call from root; send matters on the
// root only.
func (c *NCCLComm) Broadcast(rank int, send, recv uintptr, count int, dt hw.DType, root int, stream uintptr) error {
	return c.Do(NCCLCall{Op: hw.NativeBroadcast, Rank: rank, Send: send, Recv: recv, Count: count, DType: dt, Peer: root, Stream: stream})
}

// Send is Do of a NativeSend call to peer.
func (c *NCCLComm) Send(rank int, buf uintptr, count int, dt hw.DType, peer int, stream uintptr) error {
	return c.Do(NCCLCall{Op: hw.NativeSend, Rank: rank, Send: buf, Count: count, DType: dt, Peer: peer, Stream: stream})
}

// Recv is Do of a NativeRecv call from peer.
func (c *NCCLComm) Recv(rank int, buf uintptr, count int, dt hw.DType, peer int, stream uintptr) error {
	return c.Do(NCCLCall{Op: hw.NativeRecv, Rank: rank, Recv: buf, Count: count, DType: dt, Peer: peer, Stream: stream})
}

// Group runs fn between ncclGroupStart and ncclGroupEnd, with the goroutine
// locked to its OS thread because NCCL keeps the group per thread: every
// NCCL call of the group must be made by fn itself, not by goroutines it
// starts. ncclGroupEnd is called even when fn fails, since NCCL needs the
// pair balanced; calls fn made before failing may then still launch, and a
// caller that cannot tell should Abort. Launch avoids this by validating
// every call first.
//
// On a nonblocking communicator (JoinNative's) Group returns once NCCL has
// issued the group, polling ncclCommGetAsyncError while it is in progress.
func (c *NCCLComm) Group(fn func() error) error {
	pending, err := c.group(fn)
	if err == nil && pending {
		err = c.waitReady()
	}
	return err
}

// group is Group without the wait: pending says that NCCL is still issuing
// the group of a nonblocking communicator (ncclGroupEnd returned
// ncclInProgress, which it does while it connects to the peers on a first
// collective), so its work is not on the streams yet; Ready says when it
// is.
func (c *NCCLComm) group(fn func() error) (pending bool, err error) {
	if err := c.isClosed(); err != nil {
		return false, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.lib.check("ncclGroupStart", 0, c.lib.groupStart()); err != nil {
		return false, err
	}
	c.groups.Add(1)
	ferr := fn()
	c.groups.Add(-1)
	r := c.lib.groupEnd()
	if c.nonblocking && r == ncclInProgress {
		return ferr == nil, ferr
	}
	return false, errors.Join(ferr, c.lib.check("ncclGroupEnd", 0, r))
}

// Launch validates calls and then issues them as one group: one call per
// local rank for a collective (a local rank left out would make the others
// wait forever, so that is refused), or any mix of sends and receives. It
// returns once the work is queued on the calls' streams; use Watch to wait.
// Nothing is issued if any call is invalid.
func (c *NCCLComm) Launch(calls []NCCLCall) error {
	pending, err := c.launch(calls)
	if err == nil && pending {
		err = c.waitReady()
	}
	return err
}

// launch is Launch without waiting for a nonblocking communicator's group
// to be issued (see group).
func (c *NCCLComm) launch(calls []NCCLCall) (pending bool, err error) {
	if err := c.isClosed(); err != nil {
		return false, err
	}
	if len(calls) == 0 {
		return false, nil
	}
	args := make([]ncclArgs, len(calls))
	perOp := map[hw.NativeOp]map[int]int{}
	for i, k := range calls {
		a, err := c.prepare(k)
		if err != nil {
			return false, fmt.Errorf("nccl: launch call %d: %w", i, err)
		}
		args[i] = a
		if k.Op != hw.NativeSend && k.Op != hw.NativeRecv {
			if perOp[k.Op] == nil {
				perOp[k.Op] = map[int]int{}
			}
			perOp[k.Op][k.Rank]++
		}
	}
	for op, byRank := range perOp {
		want := byRank[c.ranks[0]]
		for _, r := range c.ranks {
			if byRank[r] != want {
				return false, fmt.Errorf("nccl: %w: launch has %d %v call(s) for rank %d but %d for rank %d; every local rank (%v) must take part equally",
					hw.ErrBadArgument, byRank[r], op, r, want, c.ranks[0], c.ranks)
			}
		}
	}
	return c.group(func() error {
		for i, k := range calls {
			if err := c.enqueue(k, args[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// AsyncError polls ncclCommGetAsyncError on every local rank and returns
// their errors joined, or nil. An async error means the communicator is
// broken and its streams may never finish: Abort it. ncclInProgress (a
// nonblocking call NCCL is still working on) is not an error.
func (c *NCCLComm) AsyncError() error {
	_, err := c.pollAsync()
	return err
}

// pollAsync is AsyncError, and whether some local rank is still in
// progress.
func (c *NCCLComm) pollAsync() (inProgress bool, err error) {
	if err := c.opened(); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed != nil {
		return false, c.closed
	}
	res := new(ncclResult)
	var pin runtime.Pinner
	pin.Pin(res)
	defer pin.Unpin()
	var errs []error
	for i, h := range c.handles {
		*res = ncclSuccess
		call := fmt.Sprintf("ncclCommGetAsyncError(rank %d)", c.ranks[i])
		if err := c.lib.check(call, h, c.lib.commGetAsyncError(h, res)); err != nil {
			errs = append(errs, err)
			continue
		}
		switch *res {
		case ncclSuccess:
		case ncclInProgress:
			inProgress = true
		default:
			errs = append(errs, c.lib.check(fmt.Sprintf("rank %d: asynchronous error", c.ranks[i]), h, *res))
		}
	}
	return inProgress, errors.Join(errs...)
}

// Destroy frees the communicator after its queued work has finished
// (ncclCommDestroy on every local rank, in one group so ranks of one process
// do not wait on each other). Later calls return ErrNCCLClosed; a second
// Destroy or one after Abort returns nil.
func (c *NCCLComm) Destroy() error {
	if err := c.opened(); err != nil {
		return err
	}
	return c.close("ncclCommDestroy", fmt.Errorf("nccl: %w (destroyed)", ErrNCCLClosed), c.lib.commDestroy)
}

// Abort cancels whatever the communicator still has running, as
// ncclCommAbort does, and frees it: streams blocked in its kernels finish
// (with garbage in the outputs), and later calls return ErrNCCLClosed. It
// may be called while another goroutine is blocked inside NCCL. A second
// Abort or one after Destroy returns nil.
func (c *NCCLComm) Abort() error {
	if err := c.opened(); err != nil {
		return err
	}
	return c.close("ncclCommAbort", fmt.Errorf("nccl: %w (aborted)", ErrNCCLClosed), c.lib.commAbort)
}

func (c *NCCLComm) close(name string, why error, fn func(uintptr) ncclResult) error {
	c.mu.Lock()
	if c.closed != nil {
		c.mu.Unlock()
		return nil
	}
	c.closed = why
	c.mu.Unlock()

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	grouped := len(c.handles) > 1
	var errs []error
	if grouped {
		errs = append(errs, c.lib.check("ncclGroupStart", 0, c.lib.groupStart()))
	}
	for i, h := range c.handles {
		// No ncclGetLastError here: the handle may be gone already. A
		// nonblocking communicator may answer ncclInProgress: NCCL then
		// finishes freeing it on its own.
		if r := fn(h); r != ncclSuccess && !(c.nonblocking && r == ncclInProgress) {
			errs = append(errs, &NCCLError{Call: fmt.Sprintf("%s(rank %d)", name, c.ranks[i]), Result: int(r), Text: c.lib.getErrorString(r)})
		}
	}
	if grouped {
		if r := c.lib.groupEnd(); r != ncclSuccess && !(c.nonblocking && r == ncclInProgress) {
			errs = append(errs, &NCCLError{Call: "ncclGroupEnd(" + name + ")", Result: int(r), Text: c.lib.getErrorString(r)})
		}
	}
	return errors.Join(errs...)
}
