//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// These tests run the native glue on the fake driver with fakeNCCL (a Go
// NCCL that computes on the host, native_fake_test.go); the ABI of the
// calls is checked against the C stand-in in native_stub_test.go, and real
// NCCL on GPUs in native_gpu_test.go.

// nativeValue is rank r's input element i: small integers of both signs,
// so sums are exact in any order and in every dtype used here.
func nativeValue(r, i int) int32 { return int32((r+1)*(i%7+1) - 3*(i%5)) }

// checkNativeOps runs every collective of algorithm native through
// ops.Executor on w (one rank per GPU), out of place and in place, with
// i32 sum over n elements, and compares the outputs with the exact
// answers.
func checkNativeOps(t *testing.T, w *hw.World, n int) {
	p := w.Size()
	e := ops.NewExecutor(w)
	defer func() {
		if err := e.Close(); err != nil {
			t.Errorf("executor close: %v", err)
		}
	}()
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.SendRecv} {
		for _, inPlace := range []bool{false, true} {
			spec := ops.Spec{Op: op, Algo: ops.Native, Ranks: p, Count: n, Root: p - 1, DType: hw.I32, Redop: hw.Sum}
			t.Run(fmt.Sprintf("%v/n=%d/inplace=%v", op, n, inPlace), func(t *testing.T) {
				plan, err := ops.Compile(spec)
				if err != nil {
					t.Fatal(err)
				}
				in, out := make([]hw.Slice, p), make([]hw.Slice, p)
				inputs := make([][]int32, p)
				for r := range p {
					dev, _ := w.Device(r)
					inputs[r] = make([]int32, plan.InLen)
					for i := range inputs[r] {
						inputs[r][i] = nativeValue(r, i)
					}
					if inPlace {
						whole := hw.Whole(alloc(t, dev, hw.I32, max(plan.InLen, plan.OutLen)))
						in[r], out[r] = plan.InPlace(r, whole)
					} else {
						in[r], out[r] = hw.Whole(alloc(t, dev, hw.I32, plan.InLen)), hw.Whole(alloc(t, dev, hw.I32, plan.OutLen))
					}
					writeSliceI32(t, in[r], inputs[r])
				}
				if _, err := e.Run(plan, in, out); err != nil {
					t.Fatal(err)
				}
				for r := range p {
					got := readSliceI32(t, out[r])
					want := make([]int32, plan.OutLen)
					for i := range want {
						switch op {
						case ops.AllReduce:
							for q := range p {
								want[i] += inputs[q][i]
							}
						case ops.ReduceScatter:
							for q := range p {
								want[i] += inputs[q][r*n+i]
							}
						case ops.AllGather:
							want[i] = inputs[i/n][i%n]
						case ops.Broadcast:
							want[i] = inputs[p-1][i]
						case ops.SendRecv:
							want[i] = inputs[(r+p-1)%p][i]
						}
					}
					if !slices.Equal(got, want) {
						t.Errorf("rank %d: got %v, want %v", r, got, want)
					}
				}
			})
		}
	}
}

func writeSliceI32(t testing.TB, s hw.Slice, vals []int32) {
	t.Helper()
	all := readSliceI32(t, hw.Whole(s.Buf))
	copy(all[s.Off:s.Off+s.Len], vals)
	if err := s.Buf.Write(hw.Encode(all)); err != nil {
		t.Fatal(err)
	}
}

func readSliceI32(t testing.TB, s hw.Slice) []int32 {
	t.Helper()
	all, err := hw.Decode[int32](readAll(t, s.Buf))
	if err != nil {
		t.Fatal(err)
	}
	return all[s.Off : s.Off+s.Len]
}

func TestNativeOpsEmulated(t *testing.T) {
	for _, p := range []int{1, 2} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			w, _, x := openNativeFake(t, p, nil)
			checkNativeOps(t, w, 5)
			log := x.take()
			if log[0] != fmt.Sprintf("initAll devs=%v", []int32{0, 1}[:p]) || !slices.Contains(log, fmt.Sprintf("destroy rank=%d", p-1)) {
				t.Errorf("transcript: %q", log)
			}
			// Ten runs, each exactly one group, and the destroy's group.
			want := int32(10)
			if p > 1 {
				want++
			}
			if got := x.groups.Load(); got != want {
				t.Errorf("%d groups, want %d", got, want)
			}
		})
	}
}

// Virtual ranks share a GPU, which NCCL refuses: the error says so before
// NCCL is even loaded, through ops as well.
func TestNativeRefusesVirtualRanks(t *testing.T) {
	w, devs := openFakeWorld(t, 2, Virtual)
	_, err := devs[0].NewNativeComm([]hw.Device{devs[0], devs[1]})
	if !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "NCCL refuses two ranks on one GPU; use one GPU per rank (placement gpu)") {
		t.Fatalf("virtual ranks: %v", err)
	}
	plan, _ := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: ops.Native, Ranks: 2, Count: 4, DType: hw.F32, Redop: hw.Sum})
	in := []hw.Slice{hw.Whole(alloc(t, devs[0], hw.F32, 4)), hw.Whole(alloc(t, devs[1], hw.F32, 4))}
	if _, err := ops.NewExecutor(w).Run(plan, in, in); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), "placement gpu") {
		t.Fatalf("ops run on virtual ranks: %v", err)
	}
	_, others := openFakeWorld(t, 1, OnePerGPU)
	for name, devs := range map[string][]hw.Device{
		"none":         nil,
		"nil device":   {devs[0], nil},
		"twice":        {devs[0], devs[0]},
		"other world":  {devs[0], others[0]},
		"not cuda dev": {devs[0], foreignDevice{}},
	} {
		if _, err := devs0(devs).NewNativeComm(devs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// devs0 is the device to ask for a communicator: the first cuda one.
func devs0(devs []hw.Device) *Device {
	for _, d := range devs {
		if cd, ok := d.(*Device); ok {
			return cd
		}
	}
	return fakeDevices(1)[0]
}

type foreignDevice struct{ hw.Device }

func (foreignDevice) Name() string { return "sim:0" }
func (foreignDevice) Kind() string { return "sim" }

func TestNativeTimeoutSetting(t *testing.T) {
	for v, want := range map[string]time.Duration{"": DefaultNCCLTimeout, "90s": 90 * time.Second, "2.5": 2500 * time.Millisecond, "off": 0, "0": 0, " 10m ": 10 * time.Minute} {
		if got, err := parseNCCLTimeout(v); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"-1s", "soon", "-3", "1e30"} {
		if _, err := parseNCCLTimeout(v); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), EnvNCCLTimeout) {
			t.Errorf("%q: %v", v, err)
		}
	}
	_, devs, _ := openNativeFake(t, 2, nil)
	t.Setenv(EnvNCCLTimeout, "42s")
	c := nativeComm(t, devs)
	if c.Timeout() != 42*time.Second {
		t.Errorf("timeout %v from the environment", c.Timeout())
	}
	c.SetTimeout(-time.Second)
	if c.Timeout() != 0 {
		t.Errorf("negative timeout kept as %v", c.Timeout())
	}
	t.Setenv(EnvNCCLTimeout, "never")
	if _, err := devs[0].NewNativeComm([]hw.Device{devs[0], devs[1]}); !errors.Is(err, hw.ErrBadArgument) {
		t.Errorf("bad %s: %v", EnvNCCLTimeout, err)
	}
}

func nativeComm(t *testing.T, devs []*Device) *NativeComm {
	t.Helper()
	hdevs := make([]hw.Device, len(devs))
	for r, d := range devs {
		hdevs[r] = d
	}
	c, err := devs[0].NewNativeComm(hdevs)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*NativeComm)
}

// allReduceCalls is one allreduce over whole buffers, rank r on streams[r].
func allReduceCalls(streams []hw.Stream, bufs []hw.Buffer) []hw.NativeCall {
	calls := make([]hw.NativeCall, len(streams))
	for r := range calls {
		calls[r] = hw.NativeCall{Op: hw.NativeAllReduce, Rank: r, Stream: streams[r], Send: hw.Whole(bufs[r]), Recv: hw.Whole(bufs[r]), Reduce: hw.Sum}
	}
	return calls
}

// Every mistake in a launch is refused up front with an hw sentinel, and
// nothing reaches NCCL or the streams.
func TestNativeLaunchChecks(t *testing.T) {
	_, devs, x := openNativeFake(t, 2, nil)
	c := nativeComm(t, devs)
	x.take()
	s := []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	f4 := []hw.Buffer{alloc(t, devs[0], hw.F32, 4), alloc(t, devs[1], hw.F32, 4)}
	f8 := []hw.Buffer{alloc(t, devs[0], hw.F32, 8), alloc(t, devs[1], hw.F32, 8)}
	i4 := []hw.Buffer{alloc(t, devs[0], hw.I32, 4), alloc(t, devs[1], hw.I32, 4)}
	freed := alloc(t, devs[1], hw.F32, 4)
	if err := freed.Free(); err != nil {
		t.Fatal(err)
	}
	ok := allReduceCalls(s, f4)
	with := func(r int, edit func(*hw.NativeCall)) []hw.NativeCall {
		calls := slices.Clone(ok)
		edit(&calls[r])
		return calls
	}
	send := func(from, to int, b []hw.Buffer) hw.NativeCall {
		return hw.NativeCall{Op: hw.NativeSend, Rank: from, Peer: to, Stream: s[from], Send: hw.Whole(b[from])}
	}
	recv := func(at, from int, b []hw.Buffer) hw.NativeCall {
		return hw.NativeCall{Op: hw.NativeRecv, Rank: at, Peer: from, Stream: s[at], Recv: hw.Whole(b[at])}
	}
	gather := func(r int, sendLen, recvLen int) hw.NativeCall {
		return hw.NativeCall{Op: hw.NativeAllGather, Rank: r, Stream: s[r], Send: hw.Whole(f8[r]).Sub(0, sendLen), Recv: hw.Whole(f8[r]).Sub(0, recvLen)}
	}
	scatter := func(r int, sendLen, recvLen int) hw.NativeCall {
		return hw.NativeCall{Op: hw.NativeReduceScatter, Rank: r, Stream: s[r], Send: hw.Whole(f8[r]).Sub(0, sendLen), Recv: hw.Whole(f4[r]).Sub(0, recvLen), Reduce: hw.Max}
	}
	for _, tc := range []struct {
		name  string
		calls []hw.NativeCall
		want  error
		text  string
	}{
		{"recv shorter", with(1, func(k *hw.NativeCall) { k.Recv = k.Recv.Sub(0, 3) }), hw.ErrSizeMismatch, "recv as long as send"},
		{"dtypes differ", with(0, func(k *hw.NativeCall) { k.Recv = hw.Whole(i4[0]) }), hw.ErrDTypeMismatch, "send is f32, recv is i32"},
		{"ranks' counts differ", with(1, func(k *hw.NativeCall) { k.Send, k.Recv = hw.Whole(f8[1]), hw.Whole(f8[1]) }), hw.ErrSizeMismatch, "rank 0 has count 4, rank 1 has count 8"},
		{"ranks' dtypes differ", with(1, func(k *hw.NativeCall) { k.Send, k.Recv = hw.Whole(i4[1]), hw.Whole(i4[1]) }), hw.ErrDTypeMismatch, "rank 0 has f32, rank 1 has i32"},
		{"ranks' ops differ", with(1, func(k *hw.NativeCall) { k.Reduce = hw.Max }), hw.ErrBadArgument, "rank 0 reduces with sum, rank 1 with max"},
		{"a rank missing", ok[:1], hw.ErrBadArgument, "rank 1 has 0 call(s), rank 0 has 1"},
		{"rank out of range", with(1, func(k *hw.NativeCall) { k.Rank = 2 }), hw.ErrBadArgument, "rank 2 is out of range"},
		{"another rank's stream", with(1, func(k *hw.NativeCall) { k.Stream = s[0] }), hw.ErrBadArgument, "the stream belongs to cuda:gpu0, but rank 1 is cuda:gpu1"},
		{"no stream", with(1, func(k *hw.NativeCall) { k.Stream = nil }), hw.ErrBadArgument, "not a stream of the cuda backend"},
		{"another rank's buffer", with(1, func(k *hw.NativeCall) { k.Send = hw.Whole(f4[0]) }), hw.ErrBadArgument, "buffer on cuda:gpu0 used by a stream of cuda:gpu1"},
		{"outside the buffer", with(0, func(k *hw.NativeCall) { k.Send.Off = 2 }), hw.ErrBadArgument, "outside buffer"},
		{"freed buffer", with(1, func(k *hw.NativeCall) { k.Send, k.Recv = hw.Whole(freed), hw.Whole(freed) }), hw.ErrFreed, "send"},
		{"avg on i32", []hw.NativeCall{
			{Op: hw.NativeAllReduce, Rank: 0, Stream: s[0], Send: hw.Whole(i4[0]), Recv: hw.Whole(i4[0]), Reduce: hw.Avg},
			{Op: hw.NativeAllReduce, Rank: 1, Stream: s[1], Send: hw.Whole(i4[1]), Recv: hw.Whole(i4[1]), Reduce: hw.Avg}}, hw.ErrBadArgument, "NCCL averages only unsigned"},
		{"unknown op", with(0, func(k *hw.NativeCall) { k.Op = 42 }), hw.ErrBadArgument, "unknown native op"},
		{"allgather recv", []hw.NativeCall{gather(0, 4, 8), gather(1, 4, 7)}, hw.ErrSizeMismatch, "recv of send × ranks"},
		{"reducescatter send", []hw.NativeCall{scatter(0, 8, 4), scatter(1, 7, 4)}, hw.ErrSizeMismatch, "send of recv × ranks"},
		{"broadcast roots differ", []hw.NativeCall{
			{Op: hw.NativeBroadcast, Rank: 0, Stream: s[0], Recv: hw.Whole(f4[0]), Peer: 1},
			{Op: hw.NativeBroadcast, Rank: 1, Stream: s[1], Send: hw.Whole(f4[1]), Recv: hw.Whole(f4[1]), Peer: 0}}, hw.ErrBadArgument, "rank 0 has root 1, rank 1 has root 0"},
		{"root without send", []hw.NativeCall{
			{Op: hw.NativeBroadcast, Rank: 0, Stream: s[0], Recv: hw.Whole(f4[0])},
			{Op: hw.NativeBroadcast, Rank: 1, Stream: s[1], Recv: hw.Whole(f4[1])}}, hw.ErrBadArgument, "send: bad argument: nil buffer"},
		{"send without recv", []hw.NativeCall{send(0, 1, f4)}, hw.ErrBadArgument, "1 send(s) from rank 0 to rank 1 but 0 matching recv(s)"},
		{"recv without send", []hw.NativeCall{send(0, 1, f4), recv(1, 0, f4), recv(0, 1, f4)}, hw.ErrBadArgument, "0 send(s) from rank 1 to rank 0 but 1"},
		{"send and recv sizes", []hw.NativeCall{send(0, 1, f4), recv(1, 0, f8)}, hw.ErrSizeMismatch, "send from rank 0 to rank 1"},
		{"send and recv dtypes", []hw.NativeCall{send(0, 1, f4), recv(1, 0, i4)}, hw.ErrDTypeMismatch, "send from rank 0 to rank 1"},
		{"peer out of range", []hw.NativeCall{send(0, 2, f4)}, hw.ErrBadArgument, "peer 2 is out of range"},
	} {
		err := c.Launch(tc.calls)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v\nwant %v and %q", tc.name, err, tc.want, tc.text)
		}
	}
	for r, st := range s {
		if n := st.(*Stream).enqueued; n != 0 {
			t.Errorf("rank %d: %d ops enqueued by refused launches", r, n)
		}
	}
	x.expect(t)
	if err := c.Launch(nil); err != nil {
		t.Errorf("empty launch: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(ok); !errors.Is(err, ErrNCCLClosed) {
		t.Errorf("launch after close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// The group waits for every stream's earlier work, is issued once, with
// the right pointers, counts and streams, and work after it on the streams
// sees its results.
func TestNativeLaunchOrder(t *testing.T) {
	_, devs, x := openNativeFake(t, 2, nil)
	c := nativeComm(t, devs)
	x.take()
	s := []*Stream{stream(t, devs[0]).(*Stream), stream(t, devs[1]).(*Stream)}
	src := []hw.Buffer{newBuf(t, devs[0], hw.I32, hw.Encode([]int32{1, 2, 3, 4, 5, 6})), newBuf(t, devs[1], hw.I32, hw.Encode([]int32{10, 20, 30, 40, 50, 60}))}
	work := []hw.Buffer{alloc(t, devs[0], hw.I32, 6), alloc(t, devs[1], hw.I32, 6)}
	res := []hw.Buffer{alloc(t, devs[0], hw.I32, 3), alloc(t, devs[1], hw.I32, 3)}
	release := make(chan struct{})
	if err := s[0].enqueueHost("slow host work", func(uintptr) error { <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		if err := s[r].Copy(hw.Whole(work[r]), hw.Whole(src[r])); err != nil {
			t.Fatal(err)
		}
	}
	// allreduce of elements 1..3 into 2..4, in the middle of the buffers.
	calls := make([]hw.NativeCall, 2)
	for r := range calls {
		calls[r] = hw.NativeCall{Op: hw.NativeAllReduce, Rank: r, Stream: s[r], Send: hw.Whole(work[r]).Sub(1, 3), Recv: hw.Whole(work[r]).Sub(2, 3), Reduce: hw.Max}
	}
	if err := c.Launch(calls); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		if err := s[r].Copy(hw.Whole(res[r]), hw.Whole(work[r]).Sub(2, 3)); err != nil {
			t.Fatal(err)
		}
	}
	// Rank 0's stream is busy: the group must not be issued, and the world
	// is not deadlocked (rank 1 waits for rank 0, which is in flight).
	done := make(chan error, 1)
	go func() { done <- s[1].Synchronize() }()
	time.Sleep(30 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("rank 1 synchronized (%v) while rank 0 had not reached the group", err)
	default:
	}
	x.expect(t)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s[0].Synchronize(); err != nil {
		t.Fatal(err)
	}
	b := func(r, off int) uint64 { return work[r].(*Buffer).addr(off) }
	x.expect(t, "groupStart",
		fmt.Sprintf("allReduce rank=0 send=%#x recv=%#x count=3 dt=2 op=2 stream=%#x", b(0, 1), b(0, 2), s[0].cu),
		fmt.Sprintf("allReduce rank=1 send=%#x recv=%#x count=3 dt=2 op=2 stream=%#x", b(1, 1), b(1, 2), s[1].cu),
		"groupEnd")
	for r := range 2 {
		if got, _ := hw.Decode[int32](readAll(t, res[r])); !slices.Equal(got, []int32{20, 30, 40}) {
			t.Errorf("rank %d after the group: %v", r, got)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	x.expect(t, "groupStart", "destroy rank=0", "destroy rank=1", "groupEnd")
}

// A stream that fails before the group fails the group for every rank
// without reaching NCCL; a buffer freed before the group is issued does
// too.
func TestNativeFailureBeforeGroup(t *testing.T) {
	_, devs, x := openNativeFake(t, 2, nil)
	c := nativeComm(t, devs)
	x.take()
	s := []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	bufs := []hw.Buffer{alloc(t, devs[0], hw.F32, 4), alloc(t, devs[1], hw.F32, 4)}
	boom := errors.New("boom")
	if err := s[1].(*Stream).enqueueHost("failing host work", func(uintptr) error { return boom }); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(allReduceCalls(s, bufs)); err != nil {
		t.Fatal(err)
	}
	err := s[0].Synchronize()
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "rank 1 (cuda:gpu1) stream") || !strings.Contains(err.Error(), "failed before reaching it") ||
		!strings.Contains(err.Error(), "nccl allreduce sum 4 x f32 (rank 0 of 2)") {
		t.Errorf("rank 0: %v", err)
	}
	if err := s[1].Synchronize(); !errors.Is(err, boom) {
		t.Errorf("rank 1: %v", err)
	}
	x.expect(t)

	s = []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	release := make(chan struct{})
	if err := s[0].(*Stream).enqueueHost("slow host work", func(uintptr) error { <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(allReduceCalls(s, bufs)); err != nil {
		t.Fatal(err)
	}
	if err := bufs[1].Free(); err != nil {
		t.Fatal(err)
	}
	close(release)
	for r := range 2 {
		if err := s[r].Synchronize(); !errors.Is(err, hw.ErrFreed) {
			t.Errorf("rank %d after a free: %v", r, err)
		}
	}
	x.expect(t)
}

// A rank that can never reach the group is a deadlock, reported as one
// with the stream that is missing; Close then fails the group.
func TestNativeGroupDeadlock(t *testing.T) {
	w, devs, x := openNativeFake(t, 2, nil)
	c := nativeComm(t, devs)
	x.take()
	s := []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	bufs := []hw.Buffer{alloc(t, devs[0], hw.F32, 4), alloc(t, devs[1], hw.F32, 4)}
	if err := w.Recv(s[1], 0, hw.Whole(bufs[1]), 7); err != nil { // nobody sends it
		t.Fatal(err)
	}
	if err := c.Launch(allReduceCalls(s, bufs)); err != nil {
		t.Fatal(err)
	}
	var dl *DeadlockError
	err := s[0].Synchronize()
	if !errors.As(err, &dl) || len(dl.Blocked) != 2 ||
		!strings.Contains(err.Error(), "nccl allreduce sum 4 x f32 (rank 0 of 2): the NCCL group is issued once every stream of it has reached it; not there: rank 1 (cuda:gpu1) stream") {
		t.Fatalf("synchronize: %v", err)
	}
	if err := c.Close(); !errors.Is(err, hw.ErrDeadlock) || !strings.Contains(err.Error(), "could never launch") {
		t.Errorf("close: %v", err)
	}
	if err := s[0].Synchronize(); !errors.Is(err, ErrNCCLClosed) {
		t.Errorf("rank 0 after close: %v", err)
	}
	x.expect(t, "groupStart", "destroy rank=0", "destroy rank=1", "groupEnd")
}

// An asynchronous NCCL error fails every stream of the group, naming the
// call, and aborts the communicator; later launches are refused.
func TestNativeAsyncErrorFailsStreams(t *testing.T) {
	_, devs, x := openNativeFake(t, 2, nil)
	c := nativeComm(t, devs)
	s := []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	bufs := []hw.Buffer{alloc(t, devs[0], hw.F32, 4), alloc(t, devs[1], hw.F32, 4)}
	x.setAsync(1, 6)
	x.take()
	if err := c.Launch(allReduceCalls(s, bufs)); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		err := s[r].Synchronize()
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("nccl allreduce sum 4 x f32 (rank %d of 2)", r)) ||
			!strings.Contains(err.Error(), "rank 1: asynchronous error: ncclResult 6: fake error 6") || !strings.Contains(err.Error(), "communicator aborted") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	log := x.take()
	if want := []string{"groupStart", "abort rank=0", "abort rank=1", "groupEnd"}; !slices.Equal(log[len(log)-4:], want) {
		t.Errorf("transcript %q, want it to end with %q", log, want)
	}
	if err := c.Launch(allReduceCalls(s, bufs)); !errors.Is(err, ErrNCCLClosed) {
		t.Errorf("launch after the abort: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close after the abort: %v", err)
	}
}

// An NCCL call that fails inside the group fails every stream of it, and
// the communicator is aborted, since part of the group may be running.
func TestNativeLibraryCallFails(t *testing.T) {
	_, devs, x := openNativeFake(t, 2, nil)
	c := nativeComm(t, devs)
	s := []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	bufs := []hw.Buffer{alloc(t, devs[0], hw.F32, 4), alloc(t, devs[1], hw.F32, 4)}
	x.mu.Lock()
	x.failOp = "allReduce"
	x.mu.Unlock()
	x.take()
	if err := c.Launch(allReduceCalls(s, bufs)); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		var ne *NCCLError
		err := s[r].Synchronize()
		if !errors.As(err, &ne) || !strings.Contains(err.Error(), "nccl: ncclAllReduce(rank 0): ncclResult 2: fake error 2") ||
			!strings.Contains(err.Error(), "communicator aborted") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	x.expect(t, "groupStart", "groupEnd", "groupStart", "abort rank=0", "abort rank=1", "groupEnd")
	if err := c.Launch(allReduceCalls(s, bufs)); !errors.Is(err, ErrNCCLClosed) {
		t.Errorf("launch after the abort: %v", err)
	}
}

// A collective that never finishes (its markers stay pending, as behind a
// dead peer) fails the streams at the timeout and aborts the communicator.
func TestNativeTimeoutFailsStreams(t *testing.T) {
	d, stuck := stuckDriver()
	_, devs, x := openNativeFake(t, 2, d)
	c := nativeComm(t, devs)
	c.SetTimeout(40 * time.Millisecond)
	s := []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	bufs := []hw.Buffer{alloc(t, devs[0], hw.F32, 4), alloc(t, devs[1], hw.F32, 4)}
	x.take()
	stuck.Store(true)
	defer stuck.Store(false)
	start := time.Now()
	if err := c.Launch(allReduceCalls(s, bufs)); err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		err := s[r].Synchronize()
		if !errors.Is(err, ErrNCCLTimeout) || !strings.Contains(err.Error(), fmt.Sprintf("op #0 nccl allreduce sum 4 x f32 (rank %d of 2)", r)) ||
			!strings.Contains(err.Error(), "ranks 0, 1 of 2: collective timed out after 40ms") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if el := time.Since(start); el < 40*time.Millisecond || el > 10*time.Second {
		t.Errorf("failed after %v", el)
	}
	log := x.take()
	if want := []string{"groupStart", "abort rank=0", "abort rank=1", "groupEnd"}; len(log) < 4 || !slices.Equal(log[len(log)-4:], want) {
		t.Errorf("transcript %q, want it to end with %q", log, want)
	}
}

// Device.Abort, found through hw.Aborter as watchdogs find it, reaches the
// communicator: a collective stuck on the GPU ends, and the other rank's
// stream fails with the reason too.
func TestNativeAbortThroughDevice(t *testing.T) {
	d, stuck := stuckDriver()
	w, devs, x := openNativeFake(t, 2, d)
	c := nativeComm(t, devs)
	s := []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	bufs := []hw.Buffer{alloc(t, devs[0], hw.F32, 4), alloc(t, devs[1], hw.F32, 4)}
	x.take()
	stuck.Store(true)
	defer stuck.Store(false)
	if err := c.Launch(allReduceCalls(s, bufs)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s[0].Synchronize() }()
	select {
	case err := <-done:
		t.Fatalf("synchronize returned %v before the abort", err)
	case <-time.After(30 * time.Millisecond):
	}
	dev1, _ := w.Device(1)
	ab, ok := hw.As[hw.Aborter](dev1)
	if !ok {
		t.Fatal("no hw.Aborter")
	}
	reason := errors.New("watchdog fired")
	if err := ab.Abort(reason); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, reason) || !strings.Contains(err.Error(), "nccl allreduce sum 4 x f32 (rank 0 of 2)") {
			t.Errorf("rank 0 after the abort: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Device.Abort did not end the stuck collective")
	}
	if err := s[1].Synchronize(); !errors.Is(err, reason) {
		t.Errorf("rank 1 after the abort: %v", err)
	}
	log := x.take()
	if want := []string{"groupStart", "abort rank=0", "abort rank=1", "groupEnd"}; len(log) != 8 || !slices.Equal(log[4:], want) {
		t.Errorf("transcript %q, want the group and then %q", log, want)
	}
	if err := c.Launch(allReduceCalls(s, bufs)); !errors.Is(err, reason) || !errors.Is(err, ErrNCCLClosed) {
		t.Errorf("launch after the abort: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close after the abort: %v", err)
	}
}

// NativeComm.Abort fails a group that is enqueued but not issued, and the
// world's close destroys a communicator nobody closed.
func TestNativeAbortPendingAndWorldClose(t *testing.T) {
	f, shared := fake()
	w, closeWorld, err := newWorld(shared, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	devs := make([]*Device, 2)
	for r := range devs {
		d, _ := w.Device(r)
		devs[r] = d.(*Device)
	}
	x := newFakeNCCL(f)
	devs[0].h.nccl = func() (*ncclLib, error) { return x.lib, nil }
	c := nativeComm(t, devs)
	s := []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	bufs := []hw.Buffer{alloc(t, devs[0], hw.F32, 4), alloc(t, devs[1], hw.F32, 4)}
	release := make(chan struct{})
	if err := s[0].(*Stream).enqueueHost("slow host work", func(uintptr) error { <-release; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(allReduceCalls(s, bufs)); err != nil {
		t.Fatal(err)
	}
	reason := errors.New("operator gave up")
	if err := c.Abort(reason); err != nil {
		t.Fatal(err)
	}
	close(release)
	for r := range 2 {
		if err := s[r].Synchronize(); !errors.Is(err, reason) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	c2 := nativeComm(t, devs)
	x.take()
	if err := closeWorld(); err != nil {
		t.Fatal(err)
	}
	x.expect(t, "groupStart", "destroy rank=0", "destroy rank=1", "groupEnd")
	if err := c2.Close(); err != nil {
		t.Errorf("close after the world's: %v", err)
	}
	if err := c2.Launch(allReduceCalls(s, bufs)); !errors.Is(err, hw.ErrClosed) {
		t.Errorf("launch after the world's close: %v", err)
	}
}
