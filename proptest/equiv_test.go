package proptest_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/proptest"
	"github.com/commsim/commsim/sim"
)

// ExampleEquivalent compares the simulator with itself under another
// interleaving of simultaneous events: the same plan must give the same
// bits. A backend author compares proptest.SimBackend with their own
// Backend the same way (or with CheckEquivalence, over generated cases).
func ExampleEquivalent() {
	c := proptest.Case{
		Spec: ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 3, Count: 4, DType: hw.F32, Redop: hw.Sum},
		Topo: "switch:3",
	}
	for r := range 3 {
		c.Inputs = append(c.Inputs, hw.Encode([]float32{0.1 * float32(r+1), 1e-8, float32(math.Copysign(0, -1)), 3}))
	}
	ref := proptest.SimBackend(sim.Config{})
	shuffled := proptest.SimBackend(sim.Config{Seed: 42})
	if err := proptest.Equivalent(ref, shuffled, c); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s and %s agree on %v\n", ref.Name, shuffled.Name, c)
	// Output:
	// sim and sim(seed=42) agree on allreduce/ring p=3 count=4 f32 sum on switch:3
}

// TestSimInterleavingsEquivalent runs generated cases on the simulator with
// seeded shuffles of simultaneous events against the plain order.
func TestSimInterleavingsEquivalent(t *testing.T) {
	ref := proptest.SimBackend(sim.Config{})
	for _, seed := range []uint64{1, 0xdecafbad} {
		proptest.CheckEquivalence(t, ref, proptest.SimBackend(sim.Config{Seed: seed}), proptest.EquivalenceTests(150))
	}
}

// faulty is a Backend whose devices decorate simulated ones (as a tracing
// or fault-injecting hw.Device would, with Unwrap) and misbehave on rank
// Rank as the fault says.
type fault struct {
	rank int
	// flip, when not 0, is XORed into element index's bits on every read
	// of a buffer of the rank.
	index int
	flip  uint64
	// maxForSum makes the rank's Sum reductions compute Max.
	maxForSum bool
	// inPlaceOnly keeps flip to buffers the host wrote: in place, the
	// output buffer holds the input; out of place it never does.
	inPlaceOnly bool
}

func faultyBackend(name string, f fault) proptest.Backend {
	inner := proptest.SimBackend(sim.Config{})
	return proptest.Backend{Name: name, NewWorld: func(c proptest.Case) (*hw.World, func(), error) {
		w, release, err := inner.NewWorld(c)
		if err != nil {
			return nil, release, err
		}
		devs := w.Devices()
		wrapped := make([]hw.Device, len(devs))
		for r, d := range devs {
			fd := &faultDevice{inner: d}
			if r == f.rank {
				fd.fault = &f
			}
			wrapped[r] = fd
		}
		fw, err := hw.NewWorld(wrapped)
		return fw, release, err
	}}
}

type faultDevice struct {
	inner hw.Device
	fault *fault // nil: behaves
}

var _ hw.Device = (*faultDevice)(nil)
var _ hw.Unwrapper = (*faultDevice)(nil)

func (d *faultDevice) Kind() string      { return d.inner.Kind() }
func (d *faultDevice) Name() string      { return "faulty:" + d.inner.Name() }
func (d *faultDevice) Unwrap() hw.Device { return d.inner }
func (d *faultDevice) NewEvent() (hw.Event, error) {
	return d.inner.NewEvent()
}
func (d *faultDevice) Alloc(dt hw.DType, n int) (hw.Buffer, error) {
	b, err := d.inner.Alloc(dt, n)
	if err != nil {
		return nil, err
	}
	return &faultBuffer{Buffer: b, dev: d}, nil
}
func (d *faultDevice) NewStream() (hw.Stream, error) {
	s, err := d.inner.NewStream()
	if err != nil {
		return nil, err
	}
	return &faultStream{inner: s, dev: d}, nil
}

type faultBuffer struct {
	hw.Buffer
	dev     *faultDevice
	written bool // by the host
}

func (b *faultBuffer) Device() hw.Device { return b.dev }
func (b *faultBuffer) Write(src []byte) error {
	b.written = true
	return b.Buffer.Write(src)
}
func (b *faultBuffer) Read(dst []byte) error {
	if err := b.Buffer.Read(dst); err != nil {
		return err
	}
	if f := b.dev.fault; f != nil && f.flip != 0 && f.index < b.Len() && (b.written || !f.inPlaceOnly) {
		size := b.DType().Size()
		for i := range size {
			dst[f.index*size+i] ^= byte(f.flip >> (8 * i))
		}
	}
	return nil
}

type faultStream struct {
	inner hw.Stream
	dev   *faultDevice
}

func unwrap(s hw.Slice) hw.Slice {
	if fb, ok := s.Buf.(*faultBuffer); ok {
		s.Buf = fb.Buffer
	}
	return s
}

func unwrapDev(d hw.Device) hw.Device {
	if fd, ok := d.(*faultDevice); ok {
		return fd.inner
	}
	return d
}

func (s *faultStream) Device() hw.Device            { return s.dev }
func (s *faultStream) Copy(dst, src hw.Slice) error { return s.inner.Copy(unwrap(dst), unwrap(src)) }
func (s *faultStream) Reduce(op hw.ReduceOp, dst, src hw.Slice) error {
	if f := s.dev.fault; f != nil && f.maxForSum && op == hw.Sum {
		op = hw.Max
	}
	return s.inner.Reduce(op, unwrap(dst), unwrap(src))
}
func (s *faultStream) Divide(dst hw.Slice, n int) error { return s.inner.Divide(unwrap(dst), n) }
func (s *faultStream) Send(src hw.Slice, peer hw.Device, tag uint64) error {
	return s.inner.Send(unwrap(src), unwrapDev(peer), tag)
}
func (s *faultStream) Recv(dst hw.Slice, peer hw.Device, tag uint64) error {
	return s.inner.Recv(unwrap(dst), unwrapDev(peer), tag)
}
func (s *faultStream) Record(ev hw.Event) error { return s.inner.Record(ev) }
func (s *faultStream) Wait(ev hw.Event) error   { return s.inner.Wait(ev) }
func (s *faultStream) Synchronize() error       { return s.inner.Synchronize() }

// TestMismatchNamesTheElement flips one bit of one element on one rank of
// the tested backend and checks the report names them.
func TestMismatchNamesTheElement(t *testing.T) {
	c := proptest.Case{
		Spec: ops.Spec{Op: ops.AllReduce, Algo: "rhd", Ranks: 4, Count: 6, DType: hw.F32, Redop: hw.Sum},
		Topo: "switch:4",
	}
	for r := range 4 {
		c.Inputs = append(c.Inputs, hw.Encode([]float32{1, 2, 0.5 * float32(r), 4, 5, -6}))
	}
	ref := proptest.SimBackend(sim.Config{})
	// Element 3 of rank 2 is 4·4 = 16 = 0x41800000; flipping the sign bit
	// gives -16.
	bad := faultyBackend("flaky", fault{rank: 2, index: 3, flip: 1 << 31})
	if err := proptest.Equivalent(ref, ref, c); err != nil {
		t.Fatalf("sim against itself: %v", err)
	}
	err := proptest.Equivalent(ref, bad, c)
	var m *proptest.Mismatch
	if !errors.As(err, &m) {
		t.Fatalf("Equivalent = %v, want a *Mismatch", err)
	}
	t.Logf("report:\n%v", err)
	if m.Rank != 2 || m.Index != 3 || m.DType != hw.F32 || m.GotValue != -16 || m.WantValue != 16 ||
		m.GotBits != 0xc1800000 || m.WantBits != 0x41800000 || m.Got != "flaky out of place" || m.Want != "sim out of place" {
		t.Errorf("mismatch %+v", *m)
	}
	want := "proptest: rank 2 element 3 (f32): flaky out of place = -16 (0xc1800000), sim out of place = 16 (0x41800000) in allreduce/rhd p=4 count=6 f32 sum on switch:4\n" +
		"reproduce: commsim bench --topo switch:4 --op allreduce --algo rhd --dtype f32 -b 24 -e 24 --check --redop sum"
	if err.Error() != want {
		t.Errorf("Error() =\n%s\nwant\n%s", err, want)
	}
}

// TestMismatchFormats checks the decoded values and bit widths of every
// dtype in a report.
func TestMismatchFormats(t *testing.T) {
	for _, tc := range []struct {
		dt   hw.DType
		vals []float64
		flip uint64
		want string
	}{
		{hw.F64, []float64{0.1}, 1, "faulty out of place = 0.10000000000000002 (0x3fb999999999999b), sim out of place = 0.1 (0x3fb999999999999a)"},
		{hw.F32, []float64{0.1}, 1, "faulty out of place = 0.099999994 (0x3dcccccc), sim out of place = 0.1 (0x3dcccccd)"},
		{hw.F16, []float64{1}, 1 << 15, "faulty out of place = -1 (0xbc00)"},
		{hw.BF16, []float64{-2}, 1 << 6, "faulty out of place = -3 (0xc040), sim out of place = -2 (0xc000)"},
		{hw.BF16, []float64{math.NaN()}, 1 << 15, "faulty out of place = NaN (0xffc0), sim out of place = NaN (0x7fc0)"},
		{hw.I32, []float64{-5}, 1 << 31, "faulty out of place = 2147483643 (0x7ffffffb)"},
		{hw.I64, []float64{7}, 1 << 63, "faulty out of place = -9223372036854775801 (0x8000000000000007)"},
		{hw.U8, []float64{200}, 1, "faulty out of place = 201 (0xc9), sim out of place = 200 (0xc8)"},
	} {
		in, err := hw.FromFloat64s(tc.dt, tc.vals)
		if err != nil {
			t.Fatal(err)
		}
		c := proptest.Case{
			Spec:   ops.Spec{Op: ops.Broadcast, Algo: "tree", Ranks: 2, Count: 1, DType: tc.dt},
			Topo:   "switch:2",
			Inputs: [][]byte{in, in},
		}
		err = proptest.Equivalent(proptest.SimBackend(sim.Config{}), faultyBackend("faulty", fault{rank: 1, flip: tc.flip}), c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v\nwant it to contain %q", tc.dt, err, tc.want)
		}
	}
}

// TestEquivalencePropertyCatchesAWrongKernel runs the property with
// gopter against a backend whose rank 0 reduces Sum with Max, and checks
// that it fails with a shrunk case, a mismatch and a reproducer.
func TestEquivalencePropertyCatchesAWrongKernel(t *testing.T) {
	ref := proptest.SimBackend(sim.Config{})
	bad := faultyBackend("maxy", fault{rank: 0, maxForSum: true})
	params := gopter.DefaultTestParametersWithSeed(1)
	params.MinSuccessfulTests = 200
	props := gopter.NewProperties(params)
	props.Property("maxy equivalent to sim", proptest.EquivalenceProperty(ref, bad, proptest.GenCase(proptest.GenOptions{})))
	var out bytes.Buffer
	if props.Run(gopter.NewFormatedReporter(false, math.MaxInt32, &out)) {
		t.Fatalf("the property passed a backend that reduces Sum with Max:\n%s", &out)
	}
	report := out.String()
	t.Logf("gopter:\n%s", report)
	for _, want := range []string{"Falsified", "rank ", "maxy ", "sim ", "reproduce: commsim bench", "sum"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestEquivalentRefusesBrokenBackends checks the errors for backends that
// cannot run a case at all.
func TestEquivalentRefusesBrokenBackends(t *testing.T) {
	c := proptest.Case{
		Spec:   ops.Spec{Op: ops.AllGather, Algo: "ring", Ranks: 2, Count: 1, DType: hw.U8},
		Topo:   "switch:2",
		Inputs: [][]byte{{1}, {2}},
	}
	ref := proptest.SimBackend(sim.Config{})
	wrongSize := proptest.Backend{Name: "small", NewWorld: func(proptest.Case) (*hw.World, func(), error) {
		return ref.NewWorld(proptest.Case{Topo: "switch:3"})
	}}
	for _, tc := range []struct {
		b    proptest.Backend
		want string
	}{
		{proptest.SimBackend(sim.Config{TimingOnly: true}), "timing-only"},
		{wrongSize, "world of 3 ranks, the case has 2"},
		{proptest.Backend{Name: "none"}, "NewWorld is nil"},
	} {
		err := proptest.Equivalent(ref, tc.b, c)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "reproduce: commsim bench") {
			t.Errorf("%s: got %v, want an error containing %q and a reproducer", tc.b.Name, err, tc.want)
		}
	}
}

// TestMismatchOnRankZero: a backend wrong on rank 0 alone (the root of
// most rooted cases) is caught: compareResults looks at every rank.
func TestMismatchOnRankZero(t *testing.T) {
	c := proptest.Case{
		Spec:   ops.Spec{Op: ops.Broadcast, Algo: "tree", Ranks: 2, Count: 1, DType: hw.U8},
		Topo:   "switch:2",
		Inputs: [][]byte{{7}, {9}},
	}
	err := proptest.Equivalent(proptest.SimBackend(sim.Config{}), faultyBackend("rank0", fault{rank: 0, flip: 1}), c)
	var m *proptest.Mismatch
	if !errors.As(err, &m) || m.Rank != 0 {
		t.Errorf("Equivalent = %v, want a *Mismatch on rank 0", err)
	}
}

// TestPropertiesFailOnAWrongBackend: a property that cannot fail is a
// defect, so each one, given a backend that is wrong in one way and a case
// the way shows in, must fail. A fault in place only catches a property
// that never runs in place or never checks the in-place outputs; one on
// rank 1 catches a property that compares a rank with itself, or a law
// that never runs the collective (sendrecv applied zero times) or compares
// its result with itself (alltoall twice).
func TestPropertiesFailOnAWrongBackend(t *testing.T) {
	u8 := func(op ops.Op, algo string, p, count int) proptest.Case {
		s := ops.Spec{Op: op, Algo: algo, Ranks: p, Count: count, DType: hw.U8}
		if op.Reduces() {
			s.Redop = hw.Sum
		}
		in, _ := s.BufferLens()
		c := proptest.Case{Spec: s, Topo: fmt.Sprintf("switch:%d", p)}
		for r := range p {
			b := make([]byte, in)
			for i := range b {
				b[i] = byte(10*r + i + 1)
			}
			c.Inputs = append(c.Inputs, b)
		}
		return c
	}
	inPlace := faultyBackend("in place", fault{rank: 0, flip: 1, inPlaceOnly: true}).NewWorld
	rank1 := faultyBackend("rank 1", fault{rank: 1, flip: 1}).NewWorld
	for _, tc := range []struct {
		name string
		p    gopter.Prop
	}{
		{"reference, in place wrong", proptest.ReferenceProperty(inPlace, gen.Const(u8(ops.AllReduce, "ring", 2, 2)))},
		{"consistency, rank 1 wrong", proptest.ConsistencyProperty(rank1, gen.Const(u8(ops.AllGather, "ring", 2, 2)))},
		{"algebra alltoall, rank 1 wrong", proptest.AlgebraProperty(rank1, gen.Const(u8(ops.AllToAll, "pairwise", 2, 1)))},
		{"algebra sendrecv, rank 1 wrong", proptest.AlgebraProperty(rank1, gen.Const(u8(ops.SendRecv, "direct", 2, 2)))},
	} {
		params := gopter.DefaultTestParametersWithSeed(1)
		params.MinSuccessfulTests = 1
		if res := tc.p.Check(params); res.Passed() {
			t.Errorf("%s: the property passed", tc.name)
		}
	}
}
