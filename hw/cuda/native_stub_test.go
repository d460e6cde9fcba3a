//go:build linux && (amd64 || arm64)

package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
)

// The native glue over the C stand-in for libnccl.so.2 (nccl_fake_test.go)
// and the fake driver, together in one process: the stand-in's transcript
// shows what the C functions received for each hw call, so the mapping of
// ranks, device pointers (offsets included), counts, dtypes, ops, roots,
// peers and CUstreams is checked through the real purego ABI.
func TestNativeStandInTranscript(t *testing.T) {
	f := openNCCLFake(t)
	_, devs := openFakeWorld(t, 2, OnePerGPU)
	devs[0].h.nccl = func() (*ncclLib, error) { return f.lib, nil }
	c := nativeComm(t, devs)
	f.expect(t, "initAll ndev=2 devs=0,1")
	s := []*Stream{stream(t, devs[0]).(*Stream), stream(t, devs[1]).(*Stream)}
	big := []hw.Buffer{alloc(t, devs[0], hw.I32, 16), alloc(t, devs[1], hw.I32, 16)}
	small := []hw.Buffer{alloc(t, devs[0], hw.I32, 4), alloc(t, devs[1], hw.I32, 4)}
	at := func(b []hw.Buffer, r, off int) string { return fmt.Sprintf("%#x", b[r].(*Buffer).addr(off)) }
	sync := func() {
		t.Helper()
		for _, st := range s {
			if err := st.Synchronize(); err != nil {
				t.Fatal(err)
			}
		}
	}
	launch := func(calls ...hw.NativeCall) {
		t.Helper()
		if err := c.Launch(calls); err != nil {
			t.Fatal(err)
		}
		sync()
	}

	// AllReduce of 5 elements at offset 3 into offset 8; Prod is op 1.
	var calls []hw.NativeCall
	for r := range 2 {
		calls = append(calls, hw.NativeCall{Op: hw.NativeAllReduce, Rank: r, Stream: s[r], Reduce: hw.Prod,
			Send: hw.Whole(big[r]).Sub(3, 5), Recv: hw.Whole(big[r]).Sub(8, 5)})
	}
	launch(calls...)
	f.expect(t, "groupStart",
		fmt.Sprintf("allReduce rank=0 send=%s recv=%s count=5 dt=2 op=1 stream=%#x", at(big, 0, 3), at(big, 0, 8), s[0].cu),
		fmt.Sprintf("allReduce rank=1 send=%s recv=%s count=5 dt=2 op=1 stream=%#x", at(big, 1, 3), at(big, 1, 8), s[1].cu),
		"groupEnd")

	// AllGather counts what each rank sends; ReduceScatter what each gets.
	calls = nil
	for r := range 2 {
		calls = append(calls,
			hw.NativeCall{Op: hw.NativeAllGather, Rank: r, Stream: s[r], Send: hw.Whole(small[r]).Sub(1, 3), Recv: hw.Whole(big[r]).Sub(2, 6)},
			hw.NativeCall{Op: hw.NativeReduceScatter, Rank: r, Stream: s[r], Send: hw.Whole(big[r]).Sub(0, 8), Recv: hw.Whole(small[r]), Reduce: hw.Min})
	}
	launch(calls...)
	f.expect(t, "groupStart",
		fmt.Sprintf("allGather rank=0 send=%s recv=%s sendcount=3 dt=2 stream=%#x", at(small, 0, 1), at(big, 0, 2), s[0].cu),
		fmt.Sprintf("reduceScatter rank=0 send=%s recv=%s recvcount=4 dt=2 op=3 stream=%#x", at(big, 0, 0), at(small, 0, 0), s[0].cu),
		fmt.Sprintf("allGather rank=1 send=%s recv=%s sendcount=3 dt=2 stream=%#x", at(small, 1, 1), at(big, 1, 2), s[1].cu),
		fmt.Sprintf("reduceScatter rank=1 send=%s recv=%s recvcount=4 dt=2 op=3 stream=%#x", at(big, 1, 0), at(small, 1, 0), s[1].cu),
		"groupEnd")

	// Broadcast from root 1: rank 0 passes no send buffer.
	launch(
		hw.NativeCall{Op: hw.NativeBroadcast, Rank: 0, Stream: s[0], Recv: hw.Whole(small[0]), Peer: 1},
		hw.NativeCall{Op: hw.NativeBroadcast, Rank: 1, Stream: s[1], Send: hw.Whole(big[1]).Sub(4, 4), Recv: hw.Whole(small[1]), Peer: 1})
	f.expect(t, "groupStart",
		fmt.Sprintf("broadcast rank=0 send=0 recv=%s count=4 dt=2 root=1 stream=%#x", at(small, 0, 0), s[0].cu),
		fmt.Sprintf("broadcast rank=1 send=%s recv=%s count=4 dt=2 root=1 stream=%#x", at(big, 1, 4), at(small, 1, 0), s[1].cu),
		"groupEnd")

	// Sendrecv as ops issues it: a ring of sends and receives, one group.
	calls = nil
	for r := range 2 {
		calls = append(calls,
			hw.NativeCall{Op: hw.NativeSend, Rank: r, Stream: s[r], Send: hw.Whole(small[r]), Peer: 1 - r},
			hw.NativeCall{Op: hw.NativeRecv, Rank: r, Stream: s[r], Recv: hw.Whole(big[r]).Sub(12, 4), Peer: 1 - r})
	}
	launch(calls...)
	f.expect(t, "groupStart",
		fmt.Sprintf("send rank=0 buf=%s count=4 dt=2 peer=1 stream=%#x", at(small, 0, 0), s[0].cu),
		fmt.Sprintf("recv rank=0 buf=%s count=4 dt=2 peer=1 stream=%#x", at(big, 0, 12), s[0].cu),
		fmt.Sprintf("send rank=1 buf=%s count=4 dt=2 peer=0 stream=%#x", at(small, 1, 0), s[1].cu),
		fmt.Sprintf("recv rank=1 buf=%s count=4 dt=2 peer=0 stream=%#x", at(big, 1, 12), s[1].cu),
		"groupEnd")

	// An asynchronous error reported by the library fails both streams and
	// aborts both ranks.
	f.setAsync(0, 5)
	if err := c.Launch(allReduceCalls([]hw.Stream{s[0], s[1]}, small)); err != nil {
		t.Fatal(err)
	}
	for r, st := range s {
		if err := st.Synchronize(); err == nil || !strings.Contains(err.Error(), "rank 0: asynchronous error: ncclResult 5: fake error 5: fake last error") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	log := strings.Split(strings.TrimSpace(f.log()), "\n")
	if got := strings.Join(log[len(log)-4:], "|"); got != "groupStart|abort rank=0|abort rank=1|groupEnd" {
		t.Errorf("transcript ends %q", got)
	}
	f.reset()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	f.expect(t)
}

// Close right after Launch waits for the group to be issued and finished,
// then destroys the communicator.
func TestNativeStandInClose(t *testing.T) {
	f := openNCCLFake(t)
	_, devs := openFakeWorld(t, 2, OnePerGPU)
	devs[0].h.nccl = func() (*ncclLib, error) { return f.lib, nil }
	c := nativeComm(t, devs)
	s := []hw.Stream{stream(t, devs[0]), stream(t, devs[1])}
	bufs := []hw.Buffer{alloc(t, devs[0], hw.F64, 2), alloc(t, devs[1], hw.F64, 2)}
	f.reset()
	if err := c.Launch(allReduceCalls(s, bufs)); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	line := func(r int) string {
		a := bufs[r].(*Buffer).addr(0)
		return fmt.Sprintf("allReduce rank=%d send=%#x recv=%#x count=2 dt=8 op=0 stream=%#x", r, a, a, s[r].(*Stream).cu)
	}
	f.expect(t, "groupStart", line(0), line(1), "groupEnd", "groupStart", "destroy rank=0", "destroy rank=1", "groupEnd")
	for r, st := range s {
		if err := st.Synchronize(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
