//go:build darwin

package metal

import (
	"errors"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/hwtest"
	"github.com/commsim/commsim/hw/metal/internal/mtl"
	"github.com/commsim/commsim/proptest"
)

// The backend's tests on the Mac's GPU. They are the CPU fake's tests
// (cpu_test.go) run on Metal, plus the kernels against hw on every f16 and
// bf16 pattern, and the sim equivalence matrix. Select them with
//
//	go test ./hw/metal/ -run Metal -v
//
// Each skips, saying why, where the Mac has no Metal GPU, and fails where
// Metal is there but the kernels do not compile.

// needMetal skips the test where this Mac has no Metal GPU, and fails it
// where Metal is there but the backend cannot start (the MSL does not
// compile, a pipeline fails): that is a bug, not a missing GPU.
func needMetal(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if errors.Is(err, mtl.ErrNoMetal) {
			t.Skipf("no usable Metal GPU: %v", err)
		}
		t.Fatalf("Metal is present but the backend cannot start: %v", err)
	}
}

func metalWorld(t testing.TB, p int, opts ...Option) *hw.World {
	t.Helper()
	needMetal(t)
	w, closeFn, err := NewWorld(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := closeFn(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return w
}

func TestMetalDevice(t *testing.T) {
	w := metalWorld(t, 2)
	name, err := DeviceName()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GPU %q; ranks %s and %s", name, device(t, w, 0).Name(), device(t, w, 1).Name())
}

func TestMetalBufferRoundTrip(t *testing.T) { testBufferRoundTrip(t, metalWorld) }
func TestMetalReduceDivide(t *testing.T)    { testReduceDivide(t, metalWorld) }
func TestMetalCopy(t *testing.T)            { testCopy(t, metalWorld) }
func TestMetalSendRecv(t *testing.T)        { testSendRecv(t, metalWorld) }
func TestMetalEvents(t *testing.T)          { testEvents(t, metalWorld) }
func TestMetalBadArguments(t *testing.T)    { testBadArguments(t, metalWorld) }
func TestMetalAbort(t *testing.T)           { testAbort(t, metalWorld) }
func TestMetalDeadlock(t *testing.T)        { testDeadlock(t, metalWorld) }

func TestMetalConformance(t *testing.T) {
	needMetal(t)
	hwtest.Conformance(t, conformanceBackend(NewWorld))
}

func TestMetalClosed(t *testing.T) {
	needMetal(t)
	w, closeFn, err := NewWorld(1)
	if err != nil {
		t.Fatal(err)
	}
	testClosed(t, w, closeFn)
}

// TestMetalKernels runs the kernels' test vectors (arith_test.go: every
// f16 and bf16 pattern against special operands, f32 and integer pairs,
// divides, offset slices) on the GPU through the streams' Reduce, Divide
// and Copy, and compares with hw.ReduceBytes and hw.DivideBytes. A
// failure here that TestMirrorKernels and TestMSLOnHostCompiler do not
// show means Metal's arithmetic is not what the package doc assumes
// (flushed subnormals, a half conversion that does not round to nearest
// even, an inexact divide).
func TestMetalKernels(t *testing.T) {
	w := metalWorld(t, 1)
	d := device(t, w, 0)
	s := newStream(t, d)
	widths := map[string]hw.DType{"copy_b8": hw.U8, "copy_b16": hw.F16, "copy_b32": hw.F32, "copy_b64": hw.I64}
	checkKernels(t, func(t *testing.T, name string, dst, src []byte, p kernelParams) {
		t.Helper()
		var dt hw.DType
		var apply func(a, b hw.Slice) error
		var err error
		switch kind, rest, _ := strings.Cut(name, "_"); kind {
		case "reduce":
			opName, dtName, _ := strings.Cut(rest, "_")
			var op hw.ReduceOp
			if op, err = hw.ParseReduceOp(opName); err == nil {
				dt, err = hw.ParseDType(dtName)
			}
			apply = func(a, b hw.Slice) error { return s.Reduce(op, a, b) }
		case "divide":
			dt, err = hw.ParseDType(rest)
			apply = func(a, _ hw.Slice) error { return s.Divide(a, int(p.QI)) }
		default:
			dt = widths[name]
			apply = s.Copy
		}
		if err != nil || !dt.Valid() {
			t.Fatalf("kernel %s: cannot tell its op and dtype (%v)", name, err)
		}
		size := dt.Size()
		da := alloc(t, d, dt, len(dst)/size)
		defer da.Free()
		write(t, da, dst)
		db := da
		if src != nil {
			db = alloc(t, d, dt, len(src)/size)
			defer db.Free()
			write(t, db, src)
		}
		n := int(p.N)
		must(t, apply(hw.Slice{Buf: da, Off: int(p.DOff), Len: n}, hw.Slice{Buf: db, Off: int(p.SOff), Len: n}))
		must(t, s.Synchronize())
		must(t, da.Read(dst))
	})
}

// TestMetalEquivalence: sim and the GPU agree bit for bit on every
// algorithm x dtype (f64 excepted) x op, for 2 to 8 virtual ranks, out of
// place and in place. COMMSIM_PROPTEST_N sets the cases per combination
// (default 3).
func TestMetalEquivalence(t *testing.T) {
	needMetal(t)
	gpu := proptest.Backend{Name: "metal", NewWorld: func(c proptest.Case) (*hw.World, func(), error) {
		w, closeFn, err := NewWorld(c.Spec.Ranks)
		if err != nil {
			return nil, nil, err
		}
		return w, func() {
			if err := closeFn(); err != nil {
				t.Errorf("close: %v", err)
			}
		}, nil
	}}
	checkEquivalenceMatrix(t, gpu, 3, 4096)
}
