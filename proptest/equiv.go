package proptest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// Backend is a kind of device that the equivalence harness can run a Case
// on: the simulator, CUDA (real GPUs or virtual ranks on one GPU), Metal, or
// a decorator around any of them. It is the only thing a backend author
// writes to get the harness:
//
//	cuda := proptest.Backend{Name: "cuda", NewWorld: func(c proptest.Case) (*hw.World, func(), error) {
//		// p virtual ranks on one GPU; free frees their streams and buffers
//		w, free, err := mycuda.VirtualWorld(c.Spec.Ranks)
//		return w, free, err
//	}}
//	proptest.CheckEquivalence(t, proptest.SimBackend(sim.Config{}), cuda)
//
// Resources that outlive one world (a driver handle, a context) belong to
// whoever built the Backend, who releases them after the check.
type Backend struct {
	// Name identifies the backend in mismatch reports, e.g. "sim" or
	// "cuda:0".
	Name string
	// NewWorld returns a world of c.Spec.Ranks ranks on which c will run
	// (both out of place and in place, one after the other), and a function
	// that releases it, called once after both runs; release may be nil.
	// Backends that model a fabric build it from c.Topo; others ignore it.
	// The world's buffers must come back zeroed from Alloc, as hw requires.
	NewWorld func(c Case) (w *hw.World, release func(), err error)
}

// SimBackend is the simulator as a Backend: every world is a fresh
// sim.Cluster over topology.Parse(c.Topo) with cfg. Backends with different
// cfg.Seed run different valid interleavings of simultaneous events and must
// agree bit for bit. cfg.TimingOnly has no data to compare, so such a
// backend's NewWorld returns an error.
func SimBackend(cfg sim.Config) Backend {
	name := "sim"
	if cfg.Seed != 0 {
		name = fmt.Sprintf("sim(seed=%d)", cfg.Seed)
	}
	return Backend{Name: name, NewWorld: func(c Case) (*hw.World, func(), error) {
		if cfg.TimingOnly {
			return nil, nil, fmt.Errorf("proptest: %s: a timing-only simulator has no data to compare", name)
		}
		topo, err := topology.Parse(c.Topo)
		if err != nil {
			return nil, nil, err
		}
		cl, err := sim.NewCluster(topo, cfg)
		if err != nil {
			return nil, nil, err
		}
		return cl.World(), func() { cl.Close() }, nil
	}}
}

// Mismatch is the error Equivalent returns when two runs of a Case differ:
// the first element, in rank order, whose bits differ.
type Mismatch struct {
	// Got and Want name the two runs compared, e.g. "cuda in place" and
	// "sim in place", or "cuda in place" and "cuda out of place".
	Got, Want string
	// Case is the collective that was run; Reproducer is its command line.
	Case       Case
	Reproducer string
	// Rank and Index locate the element in the rank's output buffer.
	Rank, Index int
	// DType is the case's element type.
	DType hw.DType
	// GotValue and WantValue are the element decoded (integers exactly as
	// long as they fit in a float64's 53 bits; the bits are always exact).
	GotValue, WantValue float64
	// GotBits and WantBits are the element's raw bits, zero-extended.
	GotBits, WantBits uint64
}

// Error reports the mismatch on one line and the reproducer on a second:
//
//	proptest: rank 1 element 5 (f32): cuda in place = 0 (0x00000000), sim in place = -0 (0x80000000) in allreduce/ring p=3 … on switch:3
//	reproduce: commsim bench --topo switch:3 --op allreduce …
func (m *Mismatch) Error() string {
	return fmt.Sprintf("proptest: rank %d element %d (%s): %s = %s (%s), %s = %s (%s) in %v\nreproduce: %s",
		m.Rank, m.Index, m.DType,
		m.Got, verify.ElemText(m.DType, m.GotBits), formatBits(m.DType, m.GotBits),
		m.Want, verify.ElemText(m.DType, m.WantBits), formatBits(m.DType, m.WantBits),
		m.Case, m.Reproducer)
}

func formatBits(dt hw.DType, bits uint64) string {
	return fmt.Sprintf("0x%0*x", 2*dt.Size(), bits)
}

// Equivalent runs c on ref and on test, each out of place and in place (with
// Run), and requires bit-identical outputs: test's out-of-place outputs
// equal ref's on every rank, test's in-place outputs equal its own
// out-of-place ones on every rank whose output the collective defines (the
// root only, for gather and reduce), and test's in-place outputs equal
// ref's on every rank. It returns nil, a *Mismatch for the first differing
// element, or an error naming the backend that failed to run c.
//
// Nothing here depends on the kind of either backend, so any pair can be
// compared: sim against sim with another interleaving, sim against CUDA,
// CUDA against Metal. Timing is not compared.
func Equivalent(ref, test Backend, c Case) error {
	r, err := runBoth(ref, c)
	if err != nil {
		return err
	}
	t, err := runBoth(test, c)
	if err != nil {
		return err
	}
	all := func(int) bool { return true }
	defined := func(rank int) bool {
		return !(c.Spec.Op == ops.Gather || c.Spec.Op == ops.Reduce) || rank == c.Spec.Root
	}
	checks := []struct {
		got, want    Result
		gName, wName string
		ranks        func(int) bool
	}{
		{t[0], r[0], test.Name + " out of place", ref.Name + " out of place", all},
		{t[1], t[0], test.Name + " in place", test.Name + " out of place", defined},
		{t[1], r[1], test.Name + " in place", ref.Name + " in place", all},
	}
	for _, ch := range checks {
		if err := compareResults(c, ch.got, ch.want, ch.gName, ch.wName, ch.ranks); err != nil {
			return err
		}
	}
	return nil
}

// runBoth runs c out of place and then in place on one world of b.
func runBoth(b Backend, c Case) ([2]Result, error) {
	var res [2]Result
	fail := func(err error) ([2]Result, error) {
		return res, fmt.Errorf("proptest: backend %s on %v: %w\nreproduce: %s", b.Name, c, err, c.Reproducer())
	}
	if b.NewWorld == nil {
		return fail(errors.New("Backend.NewWorld is nil"))
	}
	w, release, err := b.NewWorld(c)
	if release != nil {
		defer release()
	}
	if err != nil {
		return fail(err)
	}
	if w == nil || w.Size() != c.Spec.Ranks {
		size := 0
		if w != nil {
			size = w.Size()
		}
		return fail(fmt.Errorf("NewWorld gave a world of %d ranks, the case has %d", size, c.Spec.Ranks))
	}
	for i, inPlace := range []bool{false, true} {
		if res[i], err = Run(w, c, inPlace); err != nil {
			return fail(fmt.Errorf("in place=%v: %w", inPlace, err))
		}
	}
	return res, nil
}

// compareResults returns a *Mismatch for the first element, in rank order,
// where got and want differ on a rank that ranks selects.
func compareResults(c Case, got, want Result, gName, wName string, ranks func(int) bool) error {
	dt := c.Spec.DType
	size := dt.Size()
	if len(got.Outputs) != len(want.Outputs) {
		return fmt.Errorf("proptest: %v: %s has %d outputs, %s %d", c, gName, len(got.Outputs), wName, len(want.Outputs))
	}
	for rank := range got.Outputs {
		if !ranks(rank) {
			continue
		}
		g, w := got.Outputs[rank], want.Outputs[rank]
		if len(g) != len(w) {
			return fmt.Errorf("proptest: %v: rank %d: %s has %d output bytes, %s %d", c, rank, gName, len(g), wName, len(w))
		}
		if bytes.Equal(g, w) {
			continue
		}
		for i := 0; i+size <= len(g); i += size {
			ge, we := g[i:i+size], w[i:i+size]
			if bytes.Equal(ge, we) {
				continue
			}
			m := &Mismatch{Got: gName, Want: wName, Case: c, Reproducer: c.Reproducer(),
				Rank: rank, Index: i / size, DType: dt, GotBits: elemBits(ge), WantBits: elemBits(we)}
			if v, err := hw.ToFloat64s(dt, ge); err == nil {
				m.GotValue = v[0]
			}
			if v, err := hw.ToFloat64s(dt, we); err == nil {
				m.WantValue = v[0]
			}
			return m
		}
	}
	return nil
}

// elemBits reads one little-endian element of up to 8 bytes.
func elemBits(b []byte) uint64 {
	var buf [8]byte
	copy(buf[:], b)
	return binary.LittleEndian.Uint64(buf[:])
}

// EquivalenceProperty is the property that Equivalent(ref, test, c) holds
// for every Case c that gen generates (gen must generate Case values). A
// failure's label is the *Mismatch (or run error) of the smallest case
// gopter shrinks to, reproducer included.
func EquivalenceProperty(ref, test Backend, gen gopter.Gen) gopter.Prop {
	return prop.ForAll(func(c Case) string {
		if err := Equivalent(ref, test, c); err != nil {
			return err.Error()
		}
		return ""
	}, gen)
}

// Environment variables read by CheckEquivalence and the kit's other
// property runners.
const (
	// EnvTests, when set, is the number of successful tests every property
	// needs (gopter's MinSuccessfulTests), replacing the defaults.
	EnvTests = "COMMSIM_PROPTEST_N"
	// EnvSeed, when set, seeds the generators; failures print the seed
	// to set here to replay them.
	EnvSeed = "COMMSIM_PROPTEST_SEED"
)

// EquivalenceOption configures CheckEquivalence.
type EquivalenceOption func(*equivalenceConfig)

type equivalenceConfig struct {
	gen   gopter.Gen
	tests int
}

// EquivalenceCases makes CheckEquivalence draw its cases from gen, which
// must generate Case values, instead of GenCase(GenOptions{}).
func EquivalenceCases(gen gopter.Gen) EquivalenceOption {
	return func(c *equivalenceConfig) { c.gen = gen }
}

// EquivalenceTests sets how many cases CheckEquivalence runs when
// COMMSIM_PROPTEST_N is not set (default 50).
func EquivalenceTests(n int) EquivalenceOption {
	return func(c *equivalenceConfig) { c.tests = n }
}

// CheckEquivalence checks EquivalenceProperty(ref, test, …) with gopter
// inside a Go test: MinSuccessfulTests comes from COMMSIM_PROPTEST_N (or
// EquivalenceTests, or 50), the seed from COMMSIM_PROPTEST_SEED (or the
// clock). On failure it reports gopter's shrunk case, the mismatch with its
// reproducer, and the seed that replays the run.
func CheckEquivalence(t testing.TB, ref, test Backend, opts ...EquivalenceOption) {
	t.Helper()
	cfg := equivalenceConfig{tests: 50}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.gen == nil {
		cfg.gen = GenCase(GenOptions{})
	}
	eqCheck(t, fmt.Sprintf("%s equivalent to %s", test.Name, ref.Name), EquivalenceProperty(ref, test, cfg.gen), cfg.tests)
}

// eqParameters returns gopter parameters with MinSuccessfulTests from
// EnvTests (else defaultN) and the seed from EnvSeed (else the clock).
func eqParameters(t testing.TB, defaultN int) *gopter.TestParameters {
	t.Helper()
	seed := time.Now().UnixNano()
	if s := os.Getenv(EnvSeed); s != "" {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("proptest: %s=%q: want an integer seed", EnvSeed, s)
		}
		seed = v
	}
	params := gopter.DefaultTestParametersWithSeed(seed)
	params.MinSuccessfulTests = defaultN
	if s := os.Getenv(EnvTests); s != "" {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			t.Fatalf("proptest: %s=%q: want a positive number of tests", EnvTests, s)
		}
		params.MinSuccessfulTests = n
	}
	return params
}

// eqCheck runs one property with eqParameters and fails t with gopter's
// report and the seed that replays it.
func eqCheck(t testing.TB, name string, p gopter.Prop, defaultN int) {
	t.Helper()
	params := eqParameters(t, defaultN)
	props := gopter.NewProperties(params)
	props.Property(name, p)
	var out bytes.Buffer
	ok := props.Run(gopter.NewFormatedReporter(false, math.MaxInt32, &out))
	if !ok {
		t.Errorf("%s\nseed %d: rerun with %s=%d", strings.TrimSpace(out.String()), params.Seed(), EnvSeed, params.Seed())
		return
	}
	t.Logf("%s (%s=%d)", strings.TrimSpace(out.String()), EnvSeed, params.Seed())
}
