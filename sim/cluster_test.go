package sim_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

func newCluster(t testing.TB, spec string, cfg sim.Config) *sim.Cluster {
	t.Helper()
	topo, err := topology.Parse(spec)
	if err != nil {
		t.Fatalf("topology %q: %v", spec, err)
	}
	c, err := sim.NewCluster(topo, cfg)
	if err != nil {
		t.Fatalf("cluster: %v", err)
	}
	return c
}

// try unwraps a (value, error) pair, failing the test on error:
// try(d.Alloc(hw.F32, 4))(t).
func try[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ok(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func upload(t testing.TB, d hw.Device, vals []float32) hw.Buffer {
	t.Helper()
	b := try(d.Alloc(hw.F32, len(vals)))(t)
	ok(t, b.Write(hw.Encode(vals)))
	return b
}

func download(t testing.TB, b hw.Buffer) []float32 {
	t.Helper()
	raw := make([]byte, b.Len()*4)
	ok(t, b.Read(raw))
	return try(hw.Decode[float32](raw))(t)
}

// timeSend measures a send of n bytes from rank 0 to rank 1 with events.
func timeSend(t *testing.T, c *sim.Cluster, n int) float64 {
	t.Helper()
	d0, d1 := c.Devices()[0], c.Devices()[1]
	src := try(d0.Alloc(hw.U8, n))(t)
	dst := try(d1.Alloc(hw.U8, n))(t)
	s0, s1 := try(d0.NewStream())(t), try(d1.NewStream())(t)
	start, end := try(d0.NewEvent())(t), try(d0.NewEvent())(t)
	ok(t, s0.Record(start))
	ok(t, s0.Send(hw.Whole(src), d1, 7))
	ok(t, s0.Record(end))
	ok(t, s1.Recv(hw.Whole(dst), d0, 7))
	ok(t, s0.Synchronize())
	ok(t, s1.Synchronize())
	return try(end.ElapsedSince(start))(t)
}

func TestSendTimeMatchesAlphaBeta(t *testing.T) {
	// switch:2: gpu0 -> sw0 -> gpu1, two 100 GB/s links of 1 us each.
	c := newCluster(t, "switch:2,bw=100GB/s,lat=1us", sim.Config{})
	got := timeSend(t, c, 1_000_000)
	want := 2e-6 + 1e6/100e9
	if rel := (got - want) / want; rel > 1e-9 || rel < -1e-9 {
		t.Fatalf("elapsed = %g s, want %g s", got, want)
	}
}

func TestSendDeliversData(t *testing.T) {
	c := newCluster(t, "ring:3", sim.Config{})
	d := c.Devices()
	src := upload(t, d[0], []float32{1, 2, 3, 4})
	dst := upload(t, d[2], []float32{0, 0, 0, 0})
	s0, s2 := try(d[0].NewStream())(t), try(d[2].NewStream())(t)
	ok(t, s2.Recv(hw.Whole(dst).Sub(1, 2), d[0], 1))
	ok(t, s0.Send(hw.Whole(src).Sub(2, 2), d[2], 1))
	ok(t, s2.Synchronize())
	if got := download(t, dst); !equal(got, []float32{0, 3, 4, 0}) {
		t.Fatalf("dst = %v, want [0 3 4 0]", got)
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestEventsOrderStreams runs a slow reduce on one stream and a copy of its
// result on another. Waiting on the event makes the copy see the reduce;
// without the wait the copy runs first and sees the old data.
func TestEventsOrderStreams(t *testing.T) {
	for _, wait := range []bool{true, false} {
		c := newCluster(t, "ring:2,reduce=1GB/s", sim.Config{})
		d := c.Devices()[0]
		acc := upload(t, d, []float32{1, 1})
		inc := upload(t, d, []float32{10, 20})
		out := upload(t, d, []float32{0, 0})
		a, b := try(d.NewStream())(t), try(d.NewStream())(t)
		ev := try(d.NewEvent())(t)
		ok(t, a.Reduce(hw.Sum, hw.Whole(acc), hw.Whole(inc)))
		ok(t, a.Record(ev))
		if wait {
			ok(t, b.Wait(ev))
		}
		ok(t, b.Copy(hw.Whole(out), hw.Whole(acc)))
		ok(t, b.Synchronize())
		ok(t, a.Synchronize())
		want := []float32{11, 21}
		if !wait {
			want = []float32{1, 1}
		}
		if got := download(t, out); !equal(got, want) {
			t.Fatalf("wait=%v: out = %v, want %v", wait, got, want)
		}
	}
}

func TestReduceTakesBytesOverReduceBandwidth(t *testing.T) {
	c := newCluster(t, "ring:2,reduce=2GB/s", sim.Config{})
	d := c.Devices()[0]
	x := try(d.Alloc(hw.F32, 500))(t) // 2000 bytes at 2 GB/s = 1 us
	y := try(d.Alloc(hw.F32, 500))(t)
	s := try(d.NewStream())(t)
	e0, e1 := try(d.NewEvent())(t), try(d.NewEvent())(t)
	ok(t, s.Record(e0))
	ok(t, s.Reduce(hw.Max, hw.Whole(x), hw.Whole(y)))
	ok(t, s.Record(e1))
	ok(t, s.Synchronize())
	if got := try(e1.ElapsedSince(e0))(t); got != 1e-6 {
		t.Fatalf("reduce took %g s, want 1e-6", got)
	}
}

func TestTwoStreamsShareTheReductionUnit(t *testing.T) {
	c := newCluster(t, "ring:2,reduce=2GB/s", sim.Config{TimingOnly: true})
	d := c.Devices()[0]
	x := try(d.Alloc(hw.F32, 500))(t)
	y := try(d.Alloc(hw.F32, 500))(t)
	for range 2 {
		s := try(d.NewStream())(t)
		ok(t, s.Reduce(hw.Sum, hw.Whole(x), hw.Whole(y)))
	}
	ok(t, c.Run())
	// Each gets 1 GB/s: 2000 bytes in 2 us.
	if got := c.Now(); got != 2*sim.Microsecond {
		t.Fatalf("now = %v, want 2us", got)
	}
}

func TestErrorsSurfaceAtSynchronize(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	d := c.Devices()
	src := try(d[0].Alloc(hw.F32, 4))(t)
	dst := try(d[1].Alloc(hw.F32, 3))(t)
	after := try(d[1].Alloc(hw.F32, 3))(t)
	s0, s1 := try(d[0].NewStream())(t), try(d[1].NewStream())(t)
	ev := try(d[1].NewEvent())(t)
	ok(t, s0.Send(hw.Whole(src), d[1], 0))
	ok(t, s1.Recv(hw.Whole(dst), d[0], 0)) // 4 elements into 3: fails when it runs
	ok(t, s1.Copy(hw.Whole(after), hw.Whole(dst)))
	ok(t, s1.Record(ev))
	// A stream waiting on an event the failed stream would have recorded
	// fails too, instead of hanging.
	s2 := try(d[1].NewStream())(t)
	ok(t, s2.Wait(ev))
	err := s1.Synchronize()
	if !errors.Is(err, hw.ErrSizeMismatch) {
		t.Fatalf("Synchronize = %v, want ErrSizeMismatch", err)
	}
	for _, frag := range []string{"rank 1", "recv", "from rank 0", "4 x f32", "3 x f32"} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("error %q lacks %q", err, frag)
		}
	}
	if err := s2.Synchronize(); !errors.Is(err, hw.ErrSizeMismatch) {
		t.Fatalf("waiter Synchronize = %v, want the recorder's failure", err)
	}
}

func TestBadCallsReturnErrors(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	other := newCluster(t, "ring:2", sim.Config{})
	d := c.Devices()
	f32 := try(d[0].Alloc(hw.F32, 4))(t)
	f64 := try(d[0].Alloc(hw.F64, 4))(t)
	short := try(d[0].Alloc(hw.F32, 2))(t)
	remote := try(d[1].Alloc(hw.F32, 4))(t)
	s := try(d[0].NewStream())(t)
	foreignEv := try(other.Devices()[0].NewEvent())(t)
	cases := []struct {
		name string
		call func() error
		want error
	}{
		{"copy dtype", func() error { return s.Copy(hw.Whole(f32), hw.Whole(f64)) }, hw.ErrDTypeMismatch},
		{"copy size", func() error { return s.Copy(hw.Whole(f32), hw.Whole(short)) }, hw.ErrSizeMismatch},
		{"reduce other device", func() error { return s.Reduce(hw.Sum, hw.Whole(f32), hw.Whole(remote)) }, hw.ErrBadArgument},
		{"reduce avg", func() error { return s.Reduce(hw.Avg, hw.Whole(f32), hw.Whole(f32)) }, hw.ErrBadArgument},
		{"reduce bad op", func() error { return s.Reduce(hw.ReduceOp(99), hw.Whole(f32), hw.Whole(f32)) }, hw.ErrBadArgument},
		{"slice out of range", func() error { return s.Copy(hw.Whole(f32).Sub(3, 2), hw.Whole(short)) }, hw.ErrBadArgument},
		{"negative offset", func() error { return s.Divide(hw.Whole(f32).Sub(-1, 1), 2) }, hw.ErrBadArgument},
		{"nil buffer", func() error { return s.Copy(hw.Slice{}, hw.Whole(f32)) }, hw.ErrBadArgument},
		{"divide by zero", func() error { return s.Divide(hw.Whole(f32), 0) }, hw.ErrBadArgument},
		{"send to nil", func() error { return s.Send(hw.Whole(f32), nil, 0) }, hw.ErrUnknownPeer},
		{"send to other cluster", func() error { return s.Send(hw.Whole(f32), other.Devices()[1], 0) }, hw.ErrUnknownPeer},
		{"recv from other cluster", func() error { return s.Recv(hw.Whole(f32), other.Devices()[1], 0) }, hw.ErrUnknownPeer},
		{"record foreign event", func() error { return s.Record(foreignEv) }, hw.ErrBadArgument},
		{"wait nil event", func() error { return s.Wait(nil) }, hw.ErrBadArgument},
		{"record a nil *Event", func() error { return s.Record((*sim.Event)(nil)) }, hw.ErrBadArgument},
		{"elapsed since a nil *Event", func() error {
			_, err := try(d[0].NewEvent())(t).ElapsedSince((*sim.Event)(nil))
			return err
		}, hw.ErrBadArgument},
		{"alloc negative", func() error { _, err := d[0].Alloc(hw.F32, -1); return err }, hw.ErrBadArgument},
		{"alloc bad dtype", func() error { _, err := d[0].Alloc(hw.DType(0), 1); return err }, hw.ErrBadArgument},
		{"write short", func() error { return f32.Write(make([]byte, 3)) }, hw.ErrSizeMismatch},
		{"read long", func() error { return f32.Read(make([]byte, 17)) }, hw.ErrSizeMismatch},
		{"world send bad rank", func() error { return c.World().Send(s, 5, hw.Whole(f32), 0) }, hw.ErrUnknownPeer},
		{"world recv negative rank", func() error { return c.World().Recv(s, -1, hw.Whole(f32), 0) }, hw.ErrUnknownPeer},
	}
	for _, tc := range cases {
		if err := tc.call(); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Nothing was enqueued by the failed calls.
	ok(t, s.Synchronize())
	if c.Now() != 0 {
		t.Errorf("failed calls advanced time to %v", c.Now())
	}
}

func TestAllocBeyondDataLimitSuggestsTimingOnly(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{MaxDataBytes: 1 << 20})
	_, err := c.Devices()[0].Alloc(hw.F64, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "timing-only") || !strings.Contains(err.Error(), "8388608") {
		t.Fatalf("err = %v, want a refusal naming the size and suggesting timing-only", err)
	}
	// A size near the largest int is refused with the numbers as they
	// are: no sum of them overflows into a negative count of bytes.
	_, err = c.Devices()[0].Alloc(hw.U8, math.MaxInt)
	if err == nil || strings.Contains(err.Error(), " -") || !strings.Contains(err.Error(), "holds 0 bytes of data already, and its limit is 1048576") {
		t.Errorf("alloc of MaxInt bytes: %v", err)
	}
}

func TestFreedBuffersAreRefused(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	d := c.Devices()[0]
	b := try(d.Alloc(hw.F32, 2))(t)
	ok(t, b.Free())
	s := try(d.NewStream())(t)
	if err := s.Divide(hw.Whole(b), 2); !errors.Is(err, hw.ErrFreed) {
		t.Errorf("divide freed: %v", err)
	}
	if err := b.Read(make([]byte, 8)); !errors.Is(err, hw.ErrFreed) {
		t.Errorf("read freed: %v", err)
	}
	if err := b.Free(); !errors.Is(err, hw.ErrFreed) {
		t.Errorf("double free: %v", err)
	}
}

func TestClosedClusterRefusesWork(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	d := c.Devices()[0]
	s := try(d.NewStream())(t)
	ok(t, c.Close())
	if _, err := d.Alloc(hw.F32, 1); !errors.Is(err, hw.ErrClosed) {
		t.Errorf("alloc after close: %v", err)
	}
	if err := s.Synchronize(); !errors.Is(err, hw.ErrClosed) {
		t.Errorf("synchronize after close: %v", err)
	}
}

func TestPhantomBuffersRefuseHostAccess(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{TimingOnly: true})
	b := try(c.Devices()[0].Alloc(hw.F32, 1<<30))(t) // 4 GiB, never allocated
	if !b.Phantom() {
		t.Fatal("timing-only buffer is not a phantom")
	}
	if err := b.Read(make([]byte, 4)); !errors.Is(err, hw.ErrPhantom) {
		t.Fatalf("read = %v, want ErrPhantom", err)
	}
	if err := b.Write(make([]byte, 4)); !errors.Is(err, hw.ErrPhantom) {
		t.Fatalf("write = %v, want ErrPhantom", err)
	}
}

func TestTimingOnlyGivesTheSameTimes(t *testing.T) {
	real := timeSend(t, newCluster(t, "ring:4,bw=50GB/s,lat=700ns", sim.Config{}), 123457)
	phantom := timeSend(t, newCluster(t, "ring:4,bw=50GB/s,lat=700ns", sim.Config{TimingOnly: true}), 123457)
	if real != phantom {
		t.Fatalf("timing-only %g s, with data %g s", phantom, real)
	}
}

func TestDeadlockNamesEveryBlockedRank(t *testing.T) {
	c := newCluster(t, "ring:3", sim.Config{})
	d := c.Devices()
	buf := func(r int) hw.Slice { return hw.Whole(try(d[r].Alloc(hw.F32, 8))(t)) }
	s0, s1, s2 := try(d[0].NewStream())(t), try(d[1].NewStream())(t), try(d[2].NewStream())(t)
	// Rank 1 waits for a message rank 0 never sends; rank 2 waits on an
	// event rank 1 records only after its receive.
	ev := try(d[1].NewEvent())(t)
	ok(t, s0.Send(buf(0), d[1], 1)) // wrong tag: 1, not 2
	ok(t, s1.Recv(buf(1), d[0], 2))
	ok(t, s1.Record(ev))
	ok(t, s2.Wait(ev))
	err := s2.Synchronize()
	var dl *sim.DeadlockError
	if !errors.As(err, &dl) || !errors.Is(err, hw.ErrDeadlock) {
		t.Fatalf("Synchronize = %v, want a DeadlockError", err)
	}
	if len(dl.Blocked) != 2 || dl.Blocked[0].Rank != 1 || dl.Blocked[1].Rank != 2 {
		t.Fatalf("blocked = %+v, want ranks 1 and 2", dl.Blocked)
	}
	for _, frag := range []string{"rank 1 (sim:gpu1)", "recv 8 x f32 (32 bytes) from rank 0 (sim:gpu0) tag 0x2", "rank 2 (sim:gpu2)", "wait for event"} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("error lacks %q:\n%v", frag, err)
		}
	}
}

func TestWaitOnNeverRecordedEventDoesNotWait(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	d := c.Devices()[0]
	s := try(d.NewStream())(t)
	ok(t, s.Wait(try(d.NewEvent())(t)))
	ok(t, s.Synchronize())
}

func TestElapsedBeforeRecordIsNotReady(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	d := c.Devices()[0]
	a, b := try(d.NewEvent())(t), try(d.NewEvent())(t)
	if _, err := b.ElapsedSince(a); !errors.Is(err, hw.ErrNotReady) {
		t.Fatalf("elapsed = %v, want ErrNotReady", err)
	}
}

func TestSplitWorldsDoNotCrossTalk(t *testing.T) {
	c := newCluster(t, "ring:4", sim.Config{})
	w := c.World()
	subs := try(w.Split([]int{0, 0, 1, 1}, []int{1, 0, 0, 0}))(t)
	if len(subs) != 2 || subs[0].Size() != 2 {
		t.Fatalf("split gave %d worlds", len(subs))
	}
	// Key 0 < 1, so rank 1 of the parent is rank 0 of the first sub-world.
	if r, _ := subs[0].RankOf(c.Devices()[1]); r != 0 {
		t.Fatalf("parent rank 1 is rank %d of the sub-world, want 0", r)
	}
	d := c.Devices()
	src := upload(t, d[1], []float32{5})
	viaParent := upload(t, d[1], []float32{6})
	dst := upload(t, d[0], []float32{0})
	s1, s0 := try(d[1].NewStream())(t), try(d[0].NewStream())(t)
	// Same user tag in two worlds: the receive in the sub-world must get
	// the sub-world's message even though the parent's was sent first.
	ok(t, w.Send(s1, 0, hw.Whole(viaParent), 3))
	ok(t, subs[0].Send(s1, 1, hw.Whole(src), 3))
	ok(t, subs[0].Recv(s0, 0, hw.Whole(dst), 3))
	ok(t, s0.Synchronize())
	if got := download(t, dst); got[0] != 5 {
		t.Fatalf("received %v, want the sub-world's 5", got)
	}
}

func TestMixedKindsRefused(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	_, err := hw.NewWorld([]hw.Device{c.Devices()[0], fakeDevice{}})
	if !errors.Is(err, hw.ErrMixedKinds) {
		t.Fatalf("NewWorld = %v, want ErrMixedKinds", err)
	}
}

type fakeDevice struct{ hw.Device }

func (fakeDevice) Kind() string { return "fake" }
func (fakeDevice) Name() string { return "fake:0" }

// runScenario runs a contended all-to-all-like exchange with reductions.
func runScenario(t testing.TB, cfg sim.Config) *sim.Cluster {
	c := newCluster(t, "cluster:2x4,reduce=500GB/s", cfg)
	d := c.Devices()
	n := len(d)
	for r := range n {
		s := try(d[r].NewStream())(t)
		for k := 1; k < n; k++ {
			src := try(d[r].Alloc(hw.F32, 1000*k))(t)
			dst := try(d[r].Alloc(hw.F32, 1000*k))(t)
			ok(t, s.Send(hw.Whole(src), d[(r+k)%n], uint64(k)))
			ok(t, s.Recv(hw.Whole(dst), d[(r-k+n)%n], uint64(k)))
			ok(t, s.Reduce(hw.Sum, hw.Whole(dst), hw.Whole(src)))
		}
	}
	ok(t, c.Run())
	return c
}

// scenario returns the trace of runScenario.
func scenario(t testing.TB) []byte {
	c := runScenario(t, sim.Config{Trace: true})
	var buf bytes.Buffer
	ok(t, c.WriteTrace(&buf))
	return buf.Bytes()
}

func TestRerunGivesIdenticalTraceBytes(t *testing.T) {
	a, b := scenario(t), scenario(t)
	if !bytes.Equal(a, b) {
		t.Fatal("two runs of one scenario wrote different traces")
	}
	if !json.Valid(a) {
		t.Fatalf("trace is not valid JSON:\n%.500s", a)
	}
	if !bytes.Contains(a, []byte(`"ph":"X","name":"send"`)) || !bytes.Contains(a, []byte(`"name":"flow to sim:gpu`)) {
		t.Fatalf("trace lacks send spans or flows:\n%.500s", a)
	}
}

// TestConcurrentEnqueue drives every rank from its own goroutine, as a
// program with a thread per GPU would; run it with -race.
func TestConcurrentEnqueue(t *testing.T) {
	c := newCluster(t, "mesh:4", sim.Config{})
	d := c.Devices()
	var wg sync.WaitGroup
	for r := range d {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := d[r].NewStream()
			if err != nil {
				t.Error(err)
				return
			}
			for k := 1; k < len(d); k++ {
				src, _ := d[r].Alloc(hw.F32, 64)
				dst, _ := d[r].Alloc(hw.F32, 64)
				if err := s.Send(hw.Whole(src), d[(r+k)%len(d)], uint64(k)); err != nil {
					t.Error(err)
				}
				if err := s.Recv(hw.Whole(dst), d[(r-k+len(d))%len(d)], uint64(k)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	ok(t, c.Run())
}

func TestComputeOccupiesTheStream(t *testing.T) {
	c := newCluster(t, "ring:2,bw=100GB/s,lat=1us", sim.Config{Trace: true})
	d := c.Devices()
	compute, comm := try(d[0].NewStream())(t), try(d[0].NewStream())(t)
	ev := try(d[0].NewEvent())(t)
	ok(t, compute.(*sim.Stream).Compute(5e-6, "layer 3 backward"))
	ok(t, compute.Record(ev))
	ok(t, comm.Wait(ev))
	src, dst := try(d[0].Alloc(hw.U8, 1_000_000))(t), try(d[1].Alloc(hw.U8, 1_000_000))(t)
	ok(t, comm.Send(hw.Whole(src), d[1], 0))
	r := try(d[1].NewStream())(t)
	ok(t, r.Recv(hw.Whole(dst), d[0], 0))
	ok(t, r.Synchronize())
	// 5us of compute, then 1us + 10us of transfer.
	if now := c.Now(); now != 16*sim.Microsecond {
		t.Fatalf("finished at %v, want 16us", now)
	}
	if err := compute.(*sim.Stream).Compute(-1, "x"); !errors.Is(err, hw.ErrBadArgument) {
		t.Fatalf("negative compute: %v", err)
	}
	var buf bytes.Buffer
	ok(t, c.WriteTrace(&buf))
	if !strings.Contains(buf.String(), `compute \"layer 3 backward\"`) {
		t.Fatal("trace lacks the compute span")
	}
}

func TestCrashDuringComputeDoesNotPanic(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	ok(t, c.Inject(try(sim.ParseFault("rank 0 crash at 1us"))(t)))
	s := try(c.Devices()[0].NewStream())(t)
	ok(t, s.(*sim.Stream).Compute(5e-6, "busy"))
	if err := s.Synchronize(); !errors.Is(err, sim.ErrCrashed) {
		t.Fatalf("Synchronize = %v, want ErrCrashed", err)
	}
	// The compute's end event still fires, into a failed stream.
	if err := c.Run(); !errors.Is(err, sim.ErrCrashed) {
		t.Fatalf("Run = %v", err)
	}
}

// TestTraceIsConsistentWithSimulatedTimes parses the trace of a contended
// exchange and checks it against the simulation: spans end by the final
// time, every transfer arrow has both ends, and no link counter exceeds
// the link's bandwidth.
func TestTraceIsConsistentWithSimulatedTimes(t *testing.T) {
	raw := scenario(t)
	var tr struct {
		TraceEvents []struct {
			Ph   string         `json:"ph"`
			Name string         `json:"name"`
			Ts   float64        `json:"ts"`
			Dur  float64        `json:"dur"`
			ID   int            `json:"id"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &tr); err != nil {
		t.Fatal(err)
	}
	var end float64
	starts, finishes := map[int]bool{}, map[int]bool{}
	counters := 0
	for _, ev := range tr.TraceEvents {
		switch ev.Ph {
		case "X":
			if ev.Dur < 0 {
				t.Fatalf("negative span %v", ev)
			}
			end = max(end, ev.Ts+ev.Dur)
		case "s":
			starts[ev.ID] = true
		case "f":
			finishes[ev.ID] = true
		case "C":
			counters++
			// cluster:2x4 links: 100GB/s (node switch), 64GB/s (PCIe), 50GB/s (NIC).
			if v := ev.Args["GB/s"].(float64); v < 0 || v > 100+1e-9 {
				t.Fatalf("counter %s = %v GB/s, beyond any link", ev.Name, v)
			}
		}
	}
	if len(starts) == 0 || len(starts) != len(finishes) {
		t.Fatalf("%d arrow starts, %d ends", len(starts), len(finishes))
	}
	if counters == 0 {
		t.Fatal("no link counters")
	}
	want := runScenario(t, sim.Config{}).Now().Micros()
	if d := end - want; d > 1e-6 || d < -1e-6 {
		t.Fatalf("trace ends at %vus, simulation at %vus", end, want)
	}
}

// TestAllocPastTheByteRangeIsRefused: a buffer whose bytes would not fit
// in an int64 is refused, phantom or not, rather than overflowing later.
func TestAllocPastTheByteRangeIsRefused(t *testing.T) {
	for _, cfg := range []sim.Config{{}, {TimingOnly: true}} {
		c := newCluster(t, "switch:2", cfg)
		if _, err := c.Devices()[0].Alloc(hw.F64, 1<<60); !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("timing-only %v: alloc of 2^60 x f64: %v, want ErrBadArgument", cfg.TimingOnly, err)
		}
	}
	c := newCluster(t, "switch:2", sim.Config{TimingOnly: true})
	b, err := c.Devices()[0].Alloc(hw.F64, 1<<59) // 4 EiB of phantom: fine
	if err != nil || b.Len() != 1<<59 {
		t.Fatalf("phantom of 2^59 x f64: %v", err)
	}
}

// Ties between links of equal share go to the lower link id, which
// fixes its flows at capacity/n exactly; the other link's flows get what
// is left, to the last bit.
func TestTieGoesToLowerLinkID(t *testing.T) {
	got := try(sim.MaxMinFair([]float64{0.3, 0.3}, [][]int{{0}, {0}, {0, 1}, {1}, {1}}))(t)
	c := 0.3 // a variable: Go folds constant expressions exactly
	first := c / 3
	rest := (c - first) / 2
	want := []float64{first, first, first, rest, rest}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("rates %v, want %v bit for bit", got, want)
		}
	}
}
