//go:build linux || darwin

package cuda

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/commsim/commsim/hw"
)

// fakeNCCL is NCCL as a Go function table over the fake driver's memory:
// it keeps a transcript like the C stand-in of nccl_fake_test.go and, at
// ncclGroupEnd, computes the group's collectives on the host with hw's
// arithmetic, so the native glue runs end to end (ops.Executor included)
// without a GPU. The fake driver runs every call when it is issued, so
// computing at issue is what a GPU running the group in stream order
// would produce. With net set it is one process's NCCL in a job of
// several (see fakeNet): ncclGetUniqueId, ncclCommInitRank and
// ncclCommInitRankConfig work, and a group on such a communicator computes
// once every process launched its part. A nonblocking communicator
// (ncclCommInitRankConfig with blocking = 0) does its init and each group
// in the background: the call returns ncclInProgress, and
// ncclCommGetAsyncError says ncclInProgress until the job's other
// processes have come, as NCCL's does while it connects to its peers.
type fakeNCCL struct {
	f   *fakeCUDA
	lib *ncclLib
	net *fakeNet

	mu     sync.Mutex
	log    []string
	comms  map[uintptr]*fakeNCCLComm
	next   uintptr
	depth  int
	queued []fakeNCCLCall
	async  map[int]ncclResult // by rank: what ncclCommGetAsyncError reports
	failOp string             // calls of this op (e.g. "allReduce") return ncclSystemError
	groups atomic.Int32       // ncclGroupEnd calls
}

type fakeNCCLComm struct {
	rank, nranks int
	closed       string
	job          *fakeJob // nil unless made by ncclCommInitRank(Config)
	id           NCCLUniqueID
	nonblocking  bool
	busy         int        // nonblocking calls still running
	failed       ncclResult // what the last of them returned, when not success
}

type fakeNCCLCall struct {
	op                string
	rank, nranks      int
	send, recv, count uintptr
	dt, red, peer     int32
	job               *fakeJob
	comm              *fakeNCCLComm
}

func newFakeNCCL(f *fakeCUDA) *fakeNCCL {
	x := &fakeNCCL{f: f, comms: map[uintptr]*fakeNCCLComm{}, async: map[int]ncclResult{}}
	call := func(c fakeNCCLCall, comm, stream uintptr, format string, args ...any) ncclResult {
		x.mu.Lock()
		defer x.mu.Unlock()
		cm := x.comms[comm]
		if cm == nil || cm.closed != "" {
			return 4 // ncclInvalidArgument
		}
		c.rank, c.nranks, c.job, c.comm = cm.rank, cm.nranks, cm.job, cm
		if c.op == x.failOp {
			return 2
		}
		x.log = append(x.log, fmt.Sprintf("%s rank=%d ", c.op, c.rank)+fmt.Sprintf(format, args...)+fmt.Sprintf(" stream=%#x", stream))
		x.queued = append(x.queued, c)
		if x.depth == 0 {
			return x.runLocked()
		}
		return 0
	}
	x.lib = &ncclLib{
		path:       "fake",
		version:    22105,
		getVersion: func(v *int32) ncclResult { *v = 22105; return 0 },
		getUniqueID: func(id *NCCLUniqueID) ncclResult {
			if x.net == nil {
				return 5
			}
			*id = x.net.newID()
			return 0
		},
		commInitRank: func(comm *uintptr, nranks int32, id ncclUniqueIDArg, rank int32) ncclResult {
			if x.net == nil {
				return 5 // Device.NewNativeComm uses ncclCommInitAll
			}
			job, r := x.net.join(id.Internal, int(nranks), int(rank))
			x.mu.Lock()
			defer x.mu.Unlock()
			x.log = append(x.log, fmt.Sprintf("initRank nranks=%d rank=%d", nranks, rank))
			if r != 0 {
				return r
			}
			x.next++
			x.comms[x.next] = &fakeNCCLComm{rank: int(rank), nranks: int(nranks), job: job}
			*comm = x.next
			return 0
		},
		commInitRankConfig: func(comm *uintptr, nranks int32, id ncclUniqueIDArg, rank int32, config *ncclConfig) ncclResult {
			if x.net == nil {
				return 5
			}
			if config.magic != ncclConfigMagic || config.size != ncclConfigSize || config.version != ncclConfigVersion {
				return 4
			}
			x.mu.Lock()
			defer x.mu.Unlock()
			x.log = append(x.log, fmt.Sprintf("initRankConfig nranks=%d rank=%d blocking=%d", nranks, rank, config.blocking))
			x.next++
			cm := &fakeNCCLComm{rank: int(rank), nranks: int(nranks), id: id.Internal, nonblocking: config.blocking == 0, busy: 1}
			x.comms[x.next] = cm
			*comm = x.next
			join := func() {
				job, r := x.net.join(id.Internal, int(nranks), int(rank))
				x.mu.Lock()
				defer x.mu.Unlock()
				cm.job, cm.busy, cm.failed = job, 0, r
			}
			if cm.nonblocking {
				go join()
				return ncclInProgress
			}
			x.mu.Unlock()
			join()
			x.mu.Lock()
			return cm.failed
		},
		commInitAll: func(comms *uintptr, ndev int32, devlist *int32) ncclResult {
			x.mu.Lock()
			defer x.mu.Unlock()
			hs, ds := unsafe.Slice(comms, ndev), unsafe.Slice(devlist, ndev)
			for i := range hs {
				x.next++
				x.comms[x.next] = &fakeNCCLComm{rank: i, nranks: int(ndev)}
				hs[i] = x.next
			}
			x.log = append(x.log, fmt.Sprintf("initAll devs=%v", ds))
			return 0
		},
		allReduce: func(s, r, n uintptr, dt, op int32, comm, st uintptr) ncclResult {
			return call(fakeNCCLCall{op: "allReduce", send: s, recv: r, count: n, dt: dt, red: op}, comm, st,
				"send=%#x recv=%#x count=%d dt=%d op=%d", s, r, n, dt, op)
		},
		allGather: func(s, r, n uintptr, dt int32, comm, st uintptr) ncclResult {
			return call(fakeNCCLCall{op: "allGather", send: s, recv: r, count: n, dt: dt}, comm, st,
				"send=%#x recv=%#x sendcount=%d dt=%d", s, r, n, dt)
		},
		reduceScatter: func(s, r, n uintptr, dt, op int32, comm, st uintptr) ncclResult {
			return call(fakeNCCLCall{op: "reduceScatter", send: s, recv: r, count: n, dt: dt, red: op}, comm, st,
				"send=%#x recv=%#x recvcount=%d dt=%d op=%d", s, r, n, dt, op)
		},
		broadcast: func(s, r, n uintptr, dt, root int32, comm, st uintptr) ncclResult {
			return call(fakeNCCLCall{op: "broadcast", send: s, recv: r, count: n, dt: dt, peer: root}, comm, st,
				"send=%#x recv=%#x count=%d dt=%d root=%d", s, r, n, dt, root)
		},
		send: func(b, n uintptr, dt, peer int32, comm, st uintptr) ncclResult {
			return call(fakeNCCLCall{op: "send", send: b, count: n, dt: dt, peer: peer}, comm, st,
				"buf=%#x count=%d dt=%d peer=%d", b, n, dt, peer)
		},
		recv: func(b, n uintptr, dt, peer int32, comm, st uintptr) ncclResult {
			return call(fakeNCCLCall{op: "recv", recv: b, count: n, dt: dt, peer: peer}, comm, st,
				"buf=%#x count=%d dt=%d peer=%d", b, n, dt, peer)
		},
		groupStart: func() ncclResult {
			x.mu.Lock()
			defer x.mu.Unlock()
			x.depth++
			x.log = append(x.log, "groupStart")
			return 0
		},
		groupEnd: func() ncclResult {
			x.mu.Lock()
			defer x.mu.Unlock()
			x.depth--
			x.log = append(x.log, "groupEnd")
			x.groups.Add(1)
			if x.depth == 0 {
				return x.runLocked()
			}
			return 0
		},
		commGetAsyncError: func(comm uintptr, r *ncclResult) ncclResult {
			x.mu.Lock()
			defer x.mu.Unlock()
			cm := x.comms[comm]
			if cm == nil || cm.closed != "" {
				return 4
			}
			switch {
			case cm.busy > 0:
				*r = ncclInProgress
			case cm.failed != ncclSuccess:
				*r = cm.failed
			default:
				*r = x.async[cm.rank]
			}
			return 0
		},
		commAbort:      func(comm uintptr) ncclResult { return x.close(comm, "abort") },
		commDestroy:    func(comm uintptr) ncclResult { return x.close(comm, "destroy") },
		getErrorString: func(r ncclResult) string { return fmt.Sprintf("fake error %d", r) },
	}
	return x
}

func (x *fakeNCCL) close(comm uintptr, how string) ncclResult {
	x.mu.Lock()
	defer x.mu.Unlock()
	cm := x.comms[comm]
	if cm == nil || cm.closed != "" {
		return 4
	}
	cm.closed = how
	x.log = append(x.log, fmt.Sprintf("%s rank=%d", how, cm.rank))
	if how == "abort" && x.net != nil && cm.busy > 0 {
		// Like ncclCommAbort, end what the communicator still waits for;
		// its peers then see it gone.
		x.net.kill(cm.id)
	}
	return 0
}

// setAsync makes ncclCommGetAsyncError report r for rank.
func (x *fakeNCCL) setAsync(rank int, r ncclResult) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.async[rank] = r
}

// take returns the transcript so far and clears it.
func (x *fakeNCCL) take() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := x.log
	x.log = nil
	return out
}

func (x *fakeNCCL) expect(t *testing.T, want ...string) {
	t.Helper()
	if got := x.take(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("NCCL saw\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

var (
	fakeNCCLDTypes = map[int32]hw.DType{ncclUint8: hw.U8, ncclInt32: hw.I32, ncclInt64: hw.I64, ncclFloat16: hw.F16,
		ncclFloat32: hw.F32, ncclFloat64: hw.F64, ncclBfloat16: hw.BF16}
	fakeNCCLOps = map[int32]hw.ReduceOp{ncclSum: hw.Sum, ncclProd: hw.Prod, ncclMax: hw.Max, ncclMin: hw.Min, ncclAvg: hw.Avg}
)

// runLocked computes the queued calls, or for a communicator of several
// processes hands them to the job (releasing the lock while it waits for
// the other processes).
func (x *fakeNCCL) runLocked() ncclResult {
	calls := x.queued
	x.queued = nil
	if len(calls) == 0 || calls[0].job == nil {
		return runFakeCalls(x.f, calls)
	}
	if cm := calls[0].comm; cm.nonblocking {
		cm.busy++
		go func() {
			r := x.net.submit(calls[0].job, calls)
			x.mu.Lock()
			defer x.mu.Unlock()
			cm.busy--
			if r != ncclSuccess {
				cm.failed = r
			}
		}()
		return ncclInProgress
	}
	x.mu.Unlock()
	defer x.mu.Lock()
	return x.net.submit(calls[0].job, calls)
}

// runFakeCalls computes calls on f's memory: every input is read before
// any output is written, as in place calls need. The k-th call of an op on
// each rank form one collective; the k-th send from a to b meets the k-th
// receive at b from a.
func runFakeCalls(f *fakeCUDA, calls []fakeNCCLCall) ncclResult {
	type inst struct {
		op  string
		occ int
	}
	seen := map[[2]any]int{}
	colls := map[inst][]fakeNCCLCall{}
	var order []inst
	sends := map[[2]int][][]byte{}
	var writes []func()
	for _, c := range calls {
		dt := fakeNCCLDTypes[c.dt]
		size := uintptr(dt.Size())
		switch c.op {
		case "send":
			k := [2]int{c.rank, int(c.peer)}
			sends[k] = append(sends[k], clone(f.bytes(uint64(c.send), int(c.count*size))))
			continue
		case "recv":
			continue
		}
		key := [2]any{c.op, c.rank}
		i := inst{c.op, seen[key]}
		seen[key]++
		if colls[i] == nil {
			order = append(order, i)
		}
		colls[i] = append(colls[i], c)
	}
	for _, i := range order {
		cs := colls[i]
		c0 := cs[0]
		dt := fakeNCCLDTypes[c0.dt]
		size, n, p := dt.Size(), int(c0.count), c0.nranks
		if len(cs) != p {
			return 5 // a rank missing: real NCCL would hang
		}
		in := make([][]byte, p)
		for _, c := range cs {
			inLen := n
			switch c.op {
			case "reduceScatter":
				inLen = n * p
			case "broadcast":
				if c.rank != int(c.peer) {
					continue
				}
			}
			in[c.rank] = clone(f.bytes(uint64(c.send), inLen*size))
		}
		reduce := func(off, m int) []byte {
			acc := clone(in[0][off*size : (off+m)*size])
			op := fakeNCCLOps[c0.red]
			for q := 1; q < p; q++ {
				rop := op
				if op == hw.Avg {
					rop = hw.Sum
				}
				if err := hw.ReduceBytes(rop, dt, acc, in[q][off*size:(off+m)*size]); err != nil {
					panic(err)
				}
			}
			if op == hw.Avg {
				if err := hw.DivideBytes(dt, acc, p); err != nil {
					panic(err)
				}
			}
			return acc
		}
		for _, c := range cs {
			var out []byte
			switch c.op {
			case "allReduce":
				out = reduce(0, n)
			case "reduceScatter":
				out = reduce(c.rank*n, n)
			case "allGather":
				for q := range p {
					out = append(out, in[q]...)
				}
			case "broadcast":
				out = in[c0.peer]
			}
			dst := f.bytes(uint64(c.recv), len(out))
			writes = append(writes, func() { copy(dst, out) })
		}
	}
	got := map[[2]int]int{}
	for _, c := range calls {
		if c.op != "recv" {
			continue
		}
		k := [2]int{int(c.peer), c.rank}
		msgs := sends[k]
		if got[k] >= len(msgs) {
			return 5
		}
		msg := msgs[got[k]]
		got[k]++
		dst := f.bytes(uint64(c.recv), len(msg))
		writes = append(writes, func() { copy(dst, msg) })
	}
	for _, w := range writes {
		w()
	}
	return 0
}

func clone(b []byte) []byte { return append([]byte(nil), b...) }

// openNativeFake opens a world of p ranks, one per fake GPU, over driver d
// (nil: the shared fake), whose native collectives go to a fresh fakeNCCL.
func openNativeFake(t *testing.T, p int, d *driver) (*hw.World, []*Device, *fakeNCCL) {
	t.Helper()
	f, shared := fake()
	if d == nil {
		d = shared
	}
	gpus, err := Layout(p, OnePerGPU, f.gpus)
	if err != nil {
		t.Fatal(err)
	}
	w, closeWorld, err := newWorld(d, gpus)
	devs := keepWorld(t, w, closeWorld, err)
	x := newFakeNCCL(f)
	devs[0].h.nccl = func() (*ncclLib, error) { return x.lib, nil }
	return w, devs, x
}

// stuckDriver is the shared fake driver whose events stay pending while
// stuck is set: a collective that never ends, as with a dead peer.
func stuckDriver() (*driver, *atomic.Bool) {
	_, base := fake()
	d := *base
	stuck := new(atomic.Bool)
	d.cuEventQuery = func(ev uintptr) cuResult {
		if stuck.Load() {
			return cudaErrorNotReady
		}
		return base.cuEventQuery(ev)
	}
	return &d, stuck
}
