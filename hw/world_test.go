package hw_test

import (
	"errors"
	"testing"

	"github.com/commsim/commsim/hw"
)

// stubDevice is just enough of a Device to build worlds.
type stubDevice struct {
	hw.Device
	kind, name string
}

func (d *stubDevice) Kind() string { return d.kind }
func (d *stubDevice) Name() string { return d.name }

// tracing decorates a device, as a tracer or fault injector would.
type tracing struct{ hw.Device }

func (t tracing) Unwrap() hw.Device { return t.Device }

func devices(n int) []hw.Device {
	out := make([]hw.Device, n)
	for i := range out {
		out[i] = &stubDevice{kind: "stub", name: string(rune('a' + i))}
	}
	return out
}

func TestSplitOrdersByColorThenKeyThenRank(t *testing.T) {
	devs := devices(6)
	w, err := hw.NewWorld(devs)
	if err != nil {
		t.Fatal(err)
	}
	subs, err := w.Split([]int{1, 0, 1, -1, 0, 1}, []int{0, 5, 0, 0, 2, -1})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"e", "b"}, {"f", "a", "c"}}
	if len(subs) != len(want) {
		t.Fatalf("got %d sub-worlds, want %d", len(subs), len(want))
	}
	for i, sub := range subs {
		var names []string
		for _, d := range sub.Devices() {
			names = append(names, d.Name())
		}
		if len(names) != len(want[i]) {
			t.Fatalf("sub-world %d = %v, want %v", i, names, want[i])
		}
		for j := range names {
			if names[j] != want[i][j] {
				t.Fatalf("sub-world %d = %v, want %v", i, names, want[i])
			}
		}
		if sub.ID() == w.ID() || (i > 0 && sub.ID() == subs[i-1].ID()) {
			t.Fatalf("sub-world ids not distinct: %d", sub.ID())
		}
	}
	if _, in := subs[0].RankOf(devs[3]); in {
		t.Fatal("rank with negative color joined a sub-world")
	}
}

func TestSplitWantsOneColorAndKeyPerRank(t *testing.T) {
	w, _ := hw.NewWorld(devices(3))
	if _, err := w.Split([]int{0, 0}, []int{0, 0, 0}); !errors.Is(err, hw.ErrSizeMismatch) {
		t.Fatalf("err = %v, want ErrSizeMismatch", err)
	}
}

func TestNewWorldRefusesBadDeviceLists(t *testing.T) {
	devs := devices(2)
	other := &stubDevice{kind: "other", name: "z"}
	cases := map[string]struct {
		devs []hw.Device
		want error
	}{
		"empty":      {nil, hw.ErrBadArgument},
		"nil device": {[]hw.Device{devs[0], nil}, hw.ErrBadArgument},
		"duplicate":  {[]hw.Device{devs[0], devs[1], devs[0]}, hw.ErrBadArgument},
		"mixed":      {[]hw.Device{devs[0], other}, hw.ErrMixedKinds},
	}
	for name, tc := range cases {
		if _, err := hw.NewWorld(tc.devs); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
}

func TestWorldDeviceChecksRank(t *testing.T) {
	w, _ := hw.NewWorld(devices(2))
	for _, r := range []int{-1, 2} {
		if _, err := w.Device(r); !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("Device(%d) err = %v", r, err)
		}
	}
	if d, err := w.Device(1); err != nil || d.Name() != "b" {
		t.Errorf("Device(1) = %v, %v", d, err)
	}
}

func TestTagsCarryTheWorld(t *testing.T) {
	w, _ := hw.NewWorld(devices(2))
	subs, _ := w.Split([]int{0, 0}, []int{0, 0})
	if w.Tag(5) == subs[0].Tag(5) {
		t.Fatal("parent and sub-world map tag 5 to the same stream tag")
	}
}

// A duplicate has the same devices in the same order and tags of its own,
// and ids follow the order of Split and Dup calls, not their goroutines.
func TestDupKeepsTheDevicesUnderItsOwnTags(t *testing.T) {
	w, _ := hw.NewWorld(devices(3))
	dup, err := w.Dup()
	if err != nil {
		t.Fatal(err)
	}
	if dup.Size() != 3 || w.Tag(5) == dup.Tag(5) || dup.ID() != 1 {
		t.Fatalf("dup: %d ranks, id %d, tag 5 %#x (the world's %#x); want 3 ranks, id 1 and another tag", dup.Size(), dup.ID(), dup.Tag(5), w.Tag(5))
	}
	for r, d := range w.Devices() {
		if got, _ := dup.Device(r); got != d {
			t.Errorf("rank %d: dup has %s, the world %s", r, got.Name(), d.Name())
		}
	}
	subs, _ := dup.Split([]int{0, 0, 0}, []int{0, 0, 0})
	if again, _ := w.Dup(); subs[0].ID() != 2 || again.ID() != 3 {
		t.Errorf("ids %d then %d, want 2 then 3", subs[0].ID(), again.ID())
	}
}

type special interface{ Special() string }

type specialDevice struct{ stubDevice }

func (specialDevice) Special() string { return "native" }

func TestAsLooksThroughDecorators(t *testing.T) {
	inner := &specialDevice{stubDevice{kind: "stub", name: "s"}}
	wrapped := tracing{tracing{inner}}
	got, ok := hw.As[special](wrapped)
	if !ok || got.Special() != "native" {
		t.Fatal("As did not find the capability through two wrappers")
	}
	if _, ok := hw.As[special](tracing{devices(1)[0]}); ok {
		t.Fatal("As found a capability the device lacks")
	}
	if _, ok := hw.As[special](nil); ok {
		t.Fatal("As found a capability on nil")
	}
}
