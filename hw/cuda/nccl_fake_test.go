//go:build linux && (amd64 || arm64)

package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/ebitengine/purego"
)

// These tests load a stand-in for libnccl.so.2, compiled from the C below
// by the system's C compiler, and check the bindings against it: the C
// compiler lays out every argument by the real ABI, so a wrong purego
// signature (most of all the 128-byte ncclUniqueId passed by value, and the
// seventh argument that amd64 passes on the stack) shows up as a wrong
// transcript. The stand-in logs every call it receives. Without a C
// compiler the tests skip.

const ncclFakeSource = `
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef struct fakeComm { int rank, nranks, dev; } *ncclComm_t;
typedef int ncclResult_t;

static char logbuf[1 << 16];
static size_t loglen;
static int asyncErr[64];
static ncclUniqueId lastId;

static void logf_(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(logbuf + loglen, sizeof logbuf - loglen - 2, fmt, ap);
	va_end(ap);
	if (n > 0) loglen += (size_t)n;
	logbuf[loglen++] = '\n';
	logbuf[loglen] = 0;
}

const char *fake_log(void) { return logbuf; }
void fake_reset(void) { loglen = 0; logbuf[0] = 0; memset(asyncErr, 0, sizeof asyncErr); }
void fake_last_id(char *out) { memcpy(out, lastId.internal, 128); }
void fake_set_async(int rank, int r) { asyncErr[rank] = r; }

static ncclComm_t newComm(int rank, int nranks, int dev) {
	ncclComm_t c = calloc(1, sizeof *c);
	c->rank = rank; c->nranks = nranks; c->dev = dev;
	return c;
}

ncclResult_t ncclGetVersion(int *v) { *v = 22105; return 0; }
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
	for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 7 + 3);
	return 0;
}
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
	lastId = id;
	logf_("initRank nranks=%d rank=%d id[0]=%d id[127]=%d", nranks, rank,
		(unsigned char)id.internal[0], (unsigned char)id.internal[127]);
	if (rank < 0 || rank >= nranks) return 4;
	*comm = newComm(rank, nranks, -1);
	return 0;
}
typedef struct {
	size_t size; unsigned int magic, version;
	int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char *netName;
} ncclConfig_t;
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config) {
	lastId = id;
	logf_("initRankConfig nranks=%d rank=%d id[0]=%d id[127]=%d size=%zu magic=%#x version=%u blocking=%d cga=%d min=%d max=%d net=%p",
		nranks, rank, (unsigned char)id.internal[0], (unsigned char)id.internal[127], config->size, config->magic,
		config->version, config->blocking, config->cgaClusterSize, config->minCTAs, config->maxCTAs, (void *)config->netName);
	if (rank < 0 || rank >= nranks) return 4;
	*comm = newComm(rank, nranks, -1);
	return config->blocking == 0 ? 7 : 0;
}
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
	logf_("initAll ndev=%d devs=%d,%d", ndev, devlist[0], ndev > 1 ? devlist[1] : -1);
	for (int i = 0; i < ndev; i++) comms[i] = newComm(i, ndev, devlist[i]);
	return 0;
}
ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st) {
	if (n == 999) return 4;
	logf_("allReduce rank=%d send=%#lx recv=%#lx count=%zu dt=%d op=%d stream=%#lx",
		c->rank, (unsigned long)s, (unsigned long)r, n, dt, op, (unsigned long)st);
	return 0;
}
ncclResult_t ncclAllGather(const void *s, void *r, size_t n, int dt, ncclComm_t c, void *st) {
	logf_("allGather rank=%d send=%#lx recv=%#lx sendcount=%zu dt=%d stream=%#lx",
		c->rank, (unsigned long)s, (unsigned long)r, n, dt, (unsigned long)st);
	return 0;
}
ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, int dt, int op, ncclComm_t c, void *st) {
	logf_("reduceScatter rank=%d send=%#lx recv=%#lx recvcount=%zu dt=%d op=%d stream=%#lx",
		c->rank, (unsigned long)s, (unsigned long)r, n, dt, op, (unsigned long)st);
	return 0;
}
ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, int dt, int root, ncclComm_t c, void *st) {
	logf_("broadcast rank=%d send=%#lx recv=%#lx count=%zu dt=%d root=%d stream=%#lx",
		c->rank, (unsigned long)s, (unsigned long)r, n, dt, root, (unsigned long)st);
	return 0;
}
ncclResult_t ncclSend(const void *b, size_t n, int dt, int peer, ncclComm_t c, void *st) {
	logf_("send rank=%d buf=%#lx count=%zu dt=%d peer=%d stream=%#lx",
		c->rank, (unsigned long)b, n, dt, peer, (unsigned long)st);
	return 0;
}
ncclResult_t ncclRecv(void *b, size_t n, int dt, int peer, ncclComm_t c, void *st) {
	logf_("recv rank=%d buf=%#lx count=%zu dt=%d peer=%d stream=%#lx",
		c->rank, (unsigned long)b, n, dt, peer, (unsigned long)st);
	return 0;
}
ncclResult_t ncclGroupStart(void) { logf_("groupStart"); return 0; }
ncclResult_t ncclGroupEnd(void) { logf_("groupEnd"); return 0; }
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r) { *r = asyncErr[c->rank]; return 0; }
ncclResult_t ncclCommAbort(ncclComm_t c) { logf_("abort rank=%d", c->rank); free(c); return 0; }
ncclResult_t ncclCommDestroy(ncclComm_t c) { logf_("destroy rank=%d", c->rank); free(c); return 0; }
const char *ncclGetErrorString(ncclResult_t r) {
	static char buf[64];
	snprintf(buf, sizeof buf, "fake error %d", r);
	return buf;
}
const char *ncclGetLastError(ncclComm_t c) { return "fake last error"; }
`

// ncclFake is the compiled stand-in with its test hooks bound.
type ncclFake struct {
	lib      *ncclLib
	so       string // the compiled stand-in
	log      func() string
	reset    func()
	lastID   func(out *NCCLUniqueID)
	setAsync func(rank, result int32)
}

var (
	ncclFakeOnce sync.Once
	ncclFakeLib  *ncclFake
	ncclFakeErr  error
	ncclFakeMu   sync.Mutex // the stand-in's log is global
)

func openNCCLFake(t *testing.T) *ncclFake {
	t.Helper()
	ncclFakeOnce.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			ncclFakeErr = err
			return
		}
		dir, err := os.MkdirTemp("", "commsim-ncclfake")
		if err != nil {
			ncclFakeErr = err
			return
		}
		src, so := filepath.Join(dir, "fake.c"), filepath.Join(dir, "libncclfake.so")
		if err := os.WriteFile(src, []byte(ncclFakeSource), 0o644); err != nil {
			ncclFakeErr = err
			return
		}
		if out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", so, src).CombinedOutput(); err != nil {
			ncclFakeErr = errors.New(string(out))
			return
		}
		l, err := openNCCL(so)
		if err != nil {
			ncclFakeErr = err
			return
		}
		h, err := purego.Dlopen(so, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			ncclFakeErr = err
			return
		}
		f := &ncclFake{lib: l, so: so}
		purego.RegisterLibFunc(&f.log, h, "fake_log")
		purego.RegisterLibFunc(&f.reset, h, "fake_reset")
		purego.RegisterLibFunc(&f.lastID, h, "fake_last_id")
		purego.RegisterLibFunc(&f.setAsync, h, "fake_set_async")
		ncclFakeLib = f
	})
	if ncclFakeErr != nil {
		t.Skipf("no C compiler to build the NCCL stand-in: %v", ncclFakeErr)
	}
	ncclFakeMu.Lock()
	t.Cleanup(ncclFakeMu.Unlock)
	ncclFakeLib.reset()
	return ncclFakeLib
}

func (f *ncclFake) expect(t *testing.T, want ...string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(f.log(), "\n"), "\n")
	if len(want) == 0 {
		want = []string{""}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("NCCL saw\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	f.reset()
}

func TestNCCLFakeUniqueIDByValue(t *testing.T) {
	f := openNCCLFake(t)
	if f.lib.version != 22105 {
		t.Errorf("version %d", f.lib.version)
	}
	id, err := f.lib.uniqueID()
	if err != nil || id[0] != 3 || id[1] != 10 || id[127] != byte((127*7+3)%256) {
		t.Fatalf("ncclGetUniqueId: % x, %v", id[:4], err)
	}
	for i := range id {
		id[i] ^= byte(0x5a + i)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := f.lib.initRanks(id, 4, []int{2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen NCCLUniqueID
	f.lastID(&seen)
	if seen != id {
		t.Fatalf("ncclCommInitRank received a different id:\n got % x\nwant % x", seen[:16], id[:16])
	}
	f.expect(t, "initRank nranks=4 rank=2 id[0]=89 id[127]=165")
	if c.Ranks() != 4 || c.LocalRanks()[0] != 2 {
		t.Errorf("comm: %d ranks, local %v", c.Ranks(), c.LocalRanks())
	}
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	f.expect(t, "destroy rank=2")
}

// ncclCommInitRankConfig gets the id by value, the rank and the config
// pointer in their C places, and the config as NCCL_CONFIG_INITIALIZER
// with blocking = 0; ncclInProgress is not an error there.
func TestNCCLFakeInitRankConfigNonblocking(t *testing.T) {
	f := openNCCLFake(t)
	if f.lib.commInitRankConfig == nil {
		t.Fatal("ncclCommInitRankConfig not bound")
	}
	var id NCCLUniqueID
	for i := range id {
		id[i] = byte(i*5 + 1)
	}
	c, ok, err := f.lib.initRankNonblocking(id, 3, 1, func() error { return nil })
	if !ok || err != nil {
		t.Fatalf("initRankNonblocking: %v, %v", ok, err)
	}
	var seen NCCLUniqueID
	f.lastID(&seen)
	if seen != id {
		t.Fatalf("ncclCommInitRankConfig received a different id:\n got % x\nwant % x", seen[:16], id[:16])
	}
	f.expect(t, "initRankConfig nranks=3 rank=1 id[0]=1 id[127]=124 size=40 magic=0xcafebeef version=21700 blocking=0 cga=-2147483648 min=-2147483648 max=-2147483648 net=(nil)")
	if ready, err := c.Ready(); !ready || err != nil || !c.nonblocking {
		t.Errorf("ready %v, %v, nonblocking %v", ready, err, c.nonblocking)
	}
	if err := c.Abort(); err != nil {
		t.Fatal(err)
	}
	f.expect(t, "abort rank=1")
}

// The join is not made nonblocking where NCCL would write the caller's
// pointer from its own thread after the call (2.14–2.17), nor where
// NCCL_COMM_BLOCKING makes it block anyway: JoinNative then takes the
// blocking call under its timer.
func TestNCCLFakeInitRankConfigOnlyWhereNonblockingHolds(t *testing.T) {
	f := openNCCLFake(t)
	join := func() bool {
		t.Helper()
		c, ok, err := f.lib.initRankNonblocking(NCCLUniqueID{}, 3, 1, func() error { return nil })
		if c != nil || err != nil {
			t.Fatalf("a communicator %v or an error %v where none was made", c, err)
		}
		return ok
	}
	version := f.lib.version
	f.lib.version = 21703
	if join() {
		t.Error("NCCL 2.17.3: joined nonblocking")
	}
	f.lib.version = version
	for _, v := range []string{"1", " 2"} {
		t.Setenv("NCCL_COMM_BLOCKING", v)
		if join() {
			t.Errorf("NCCL_COMM_BLOCKING=%q: joined nonblocking", v)
		}
	}
	t.Setenv("NCCL_COMM_BLOCKING", "0")
	if envForcesBlocking() {
		t.Error("NCCL_COMM_BLOCKING=0 forces blocking")
	}
	// The blocking inits refuse it: NCCL would make their communicators
	// nonblocking and write the handles after the call.
	if _, err := f.lib.initAll([]int{0}); err == nil || !strings.Contains(err.Error(), "NCCL_COMM_BLOCKING=0") {
		t.Errorf("initAll under NCCL_COMM_BLOCKING=0: %v", err)
	}
	if _, err := f.lib.initRanks(NCCLUniqueID{}, 4, []int{2}, nil); err == nil || !strings.Contains(err.Error(), "NCCL_COMM_BLOCKING=0") {
		t.Errorf("initRanks under NCCL_COMM_BLOCKING=0: %v", err)
	}
}

// NCCL installed by pip into a virtualenv is found and loaded, and says
// where it came from.
func TestNCCLFakeFoundInVirtualEnv(t *testing.T) {
	f := openNCCLFake(t)
	if h, err := purego.Dlopen(LibNCCL, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
		purego.Dlclose(h)
		t.Skip("an NCCL on the loader's path would be found first")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "venv/lib/python3.12/site-packages/nvidia/nccl/lib")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.so, filepath.Join(dir, LibNCCL)); err != nil {
		t.Fatal(err)
	}
	e := fakeLibEnv(root, map[string]string{"VIRTUAL_ENV": "$ROOT/venv"}, nil, errors.New("not asked"))
	l, err := findNCCL(e)
	if err != nil {
		t.Fatal(err)
	}
	if l.path != filepath.Join(dir, LibNCCL) || l.from != "site-packages of $VIRTUAL_ENV" || l.version != 22105 {
		t.Errorf("loaded %s from %q, version %d", l.path, l.from, l.version)
	}
}

func TestNCCLFakeInitRanksGrouped(t *testing.T) {
	f := openNCCLFake(t)
	var order []int
	c, err := f.lib.initRanks(NCCLUniqueID{}, 4, []int{3, 1}, func(i int) error { order = append(order, i); return nil })
	if err != nil {
		t.Fatal(err)
	}
	f.expect(t, "groupStart", "initRank nranks=4 rank=3 id[0]=0 id[127]=0", "initRank nranks=4 rank=1 id[0]=0 id[127]=0", "groupEnd")
	if fmt.Sprint(order) != "[0 1 0 1]" { // a dry run, then one call before each rank joins
		t.Errorf("setDevice calls %v", order)
	}
	if got := c.LocalRanks(); got[0] != 1 || got[1] != 3 {
		t.Errorf("local ranks %v, want ascending", got)
	}
	failOn1 := func(i int) error {
		if i == 1 {
			return errors.New("no context")
		}
		return nil
	}
	if _, err := f.lib.initRanks(NCCLUniqueID{}, 4, []int{0, 2}, failOn1); err == nil || !strings.Contains(err.Error(), "making rank 2's device current: no context") {
		t.Errorf("failing setDevice: %v", err)
	}
	f.expect(t) // nothing was queued
	c.Abort()
}

// Every collective's arguments arrive in the right C parameter, including
// the stream that amd64 passes on the stack.
func TestNCCLFakeLaunchTranscript(t *testing.T) {
	f := openNCCLFake(t)
	c, err := f.lib.initAll([]int{3, 1})
	if err != nil {
		t.Fatal(err)
	}
	f.expect(t, "initAll ndev=2 devs=3,1")
	if d, _ := c.Device(1); d != 1 {
		t.Errorf("rank 1 on device %d", d)
	}
	calls := []NCCLCall{
		{Op: hw.NativeAllReduce, Rank: 0, Send: 0x1000, Recv: 0x2000, Count: 10, DType: hw.F32, Reduce: hw.Min, Stream: 0xa0},
		{Op: hw.NativeAllReduce, Rank: 1, Send: 0x3000, Recv: 0x3000, Count: 10, DType: hw.F32, Reduce: hw.Min, Stream: 0xa1},
	}
	if err := c.Launch(calls); err != nil {
		t.Fatal(err)
	}
	f.expect(t, "groupStart",
		"allReduce rank=0 send=0x1000 recv=0x2000 count=10 dt=7 op=3 stream=0xa0",
		"allReduce rank=1 send=0x3000 recv=0x3000 count=10 dt=7 op=3 stream=0xa1",
		"groupEnd")
	err = c.Launch([]NCCLCall{
		{Op: hw.NativeAllGather, Rank: 0, Send: 0x1000, Recv: 0x2000, Count: 5, DType: hw.BF16, Stream: 0xa0},
		{Op: hw.NativeAllGather, Rank: 1, Send: 0x3000, Recv: 0x4000, Count: 5, DType: hw.BF16, Stream: 0xa1},
		{Op: hw.NativeReduceScatter, Rank: 0, Send: 0x1000, Recv: 0x2000, Count: 6, DType: hw.I64, Reduce: hw.Max, Stream: 0xa0},
		{Op: hw.NativeReduceScatter, Rank: 1, Send: 0x3000, Recv: 0x4000, Count: 6, DType: hw.I64, Reduce: hw.Max, Stream: 0xa1},
		{Op: hw.NativeBroadcast, Rank: 0, Send: 0x1000, Recv: 0x1000, Count: 7, DType: hw.U8, Peer: 1, Stream: 0xa0},
		{Op: hw.NativeBroadcast, Rank: 1, Send: 0x3000, Recv: 0x3000, Count: 7, DType: hw.U8, Peer: 1, Stream: 0xa1},
		{Op: hw.NativeSend, Rank: 0, Send: 0x1000, Count: 8, DType: hw.F64, Peer: 1, Stream: 0xa0},
		{Op: hw.NativeRecv, Rank: 1, Recv: 0x4000, Count: 8, DType: hw.F64, Peer: 0, Stream: 0xa1},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.expect(t, "groupStart",
		"allGather rank=0 send=0x1000 recv=0x2000 sendcount=5 dt=9 stream=0xa0",
		"allGather rank=1 send=0x3000 recv=0x4000 sendcount=5 dt=9 stream=0xa1",
		"reduceScatter rank=0 send=0x1000 recv=0x2000 recvcount=6 dt=4 op=2 stream=0xa0",
		"reduceScatter rank=1 send=0x3000 recv=0x4000 recvcount=6 dt=4 op=2 stream=0xa1",
		"broadcast rank=0 send=0x1000 recv=0x1000 count=7 dt=1 root=1 stream=0xa0",
		"broadcast rank=1 send=0x3000 recv=0x3000 count=7 dt=1 root=1 stream=0xa1",
		"send rank=0 buf=0x1000 count=8 dt=8 peer=1 stream=0xa0",
		"recv rank=1 buf=0x4000 count=8 dt=8 peer=0 stream=0xa1",
		"groupEnd")

	// Refusals happen before anything reaches NCCL.
	for _, bad := range [][]NCCLCall{
		calls[:1], // rank 1 left out: it would hang rank 0
		{calls[0], {Op: hw.NativeAllReduce, Rank: 1, Send: 1, Recv: 1, Count: 1, DType: hw.I32, Reduce: hw.Avg}},
		{calls[0], {Op: hw.NativeAllReduce, Rank: 7, Send: 1, Recv: 1, Count: 1, DType: hw.F32, Reduce: hw.Sum}},
		{{Op: hw.NativeSend, Rank: 0, Send: 1, Count: 1, DType: hw.F32, Peer: 2}},
		{{Op: hw.NativeRecv, Rank: 0, Recv: 0, Count: 1, DType: hw.F32, Peer: 1}},
		{{Op: 0, Rank: 0}},
	} {
		if err := c.Launch(bad); !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("launch %v: %v", bad, err)
		}
	}
	f.expect(t)

	// A lone call on a communicator with two local ranks would deadlock.
	if err := c.AllReduce(0, 0x1000, 0x2000, 10, hw.F32, hw.Sum, 0); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "use Launch or Group") {
		t.Errorf("lone allreduce: %v", err)
	}
	f.expect(t)

	// An NCCL failure carries the call, the rank and both of NCCL's texts.
	err = c.Group(func() error { return c.AllReduce(0, 0x1000, 0x2000, 999, hw.F32, hw.Sum, 0) })
	var ne *NCCLError
	if !errors.As(err, &ne) || err.Error() != "nccl: ncclAllReduce(rank 0): ncclResult 4: fake error 4: fake last error" {
		t.Errorf("failing allreduce: %v", err)
	}
	f.expect(t, "groupStart", "groupEnd")
	if err := c.Destroy(); err != nil {
		t.Fatal(err)
	}
	f.expect(t, "groupStart", "destroy rank=0", "destroy rank=1", "groupEnd")
	if err := c.Launch(calls); !errors.Is(err, ErrNCCLClosed) || c.Destroy() != nil || c.Abort() != nil {
		t.Errorf("after destroy: %v", err)
	}
	f.expect(t)
}

// An async error reported by NCCL ends Watch with the error and an abort of
// every local rank; later calls say the communicator is closed.
func TestNCCLFakeWatchAsyncError(t *testing.T) {
	f := openNCCLFake(t)
	c, err := f.lib.initAll([]int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	f.reset()
	f.setAsync(1, 6)
	err = c.Watch(context.Background(), time.Minute, func() (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "nccl: rank 1: asynchronous error: ncclResult 6: fake error 6") || !strings.Contains(err.Error(), "communicator aborted") {
		t.Fatalf("got %v", err)
	}
	f.expect(t, "groupStart", "abort rank=0", "abort rank=1", "groupEnd")
	if err := c.AsyncError(); !errors.Is(err, ErrNCCLClosed) {
		t.Errorf("after abort: %v", err)
	}
}

func TestNCCLFakeWatchTimeout(t *testing.T) {
	f := openNCCLFake(t)
	c, err := f.lib.initAll([]int{0})
	if err != nil {
		t.Fatal(err)
	}
	f.reset()
	err = c.Watch(context.Background(), 30*time.Millisecond, func() (bool, error) { return false, nil })
	if !errors.Is(err, ErrNCCLTimeout) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "rank 0 of 1") {
		t.Fatalf("got %v", err)
	}
	f.expect(t, "abort rank=0")

	c, _ = f.lib.initAll([]int{0})
	f.reset()
	polls := 0
	if err := c.Watch(context.Background(), time.Minute, func() (bool, error) { polls++; return polls == 3, nil }); err != nil {
		t.Fatal(err)
	}
	f.expect(t)
	c.Destroy()
}
