package sim

import (
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/zerotest"
	"github.com/commsim/commsim/topology"
)

// TestZeroValues calls every exported method on a zero value and a nil
// pointer of each type. None may panic, and the types that only a
// constructor makes must refuse with hw.ErrNotMade before they reach for a
// cluster or a lock that is not there.
func TestZeroValues(t *testing.T) {
	calls := zeroCalls(t)
	zerotest.WantErr(t, calls, hw.ErrNotMade, []string{"Buffer", "Cluster", "Device", "Event", "Stream"})
}

func zeroCalls(t *testing.T) []zerotest.Call {
	return zerotest.Run(t, []any{
		new(Buffer), new(Cluster), new(DeadlockError), new(Device), new(Event),
		new(Fault), new(OpKind), new(PathClass), new(Stream), new(Time),
		new(TraceTooLargeError),
	}, zerotest.Options{})
}

// TestUnmadeArgumentsToSimOnlyCalls hands the simulator's own calls, which
// hwtest's conformance check does not know, values its constructors did
// not make: each must be refused, not crash on what is not there.
func TestUnmadeArgumentsToSimOnlyCalls(t *testing.T) {
	topo, err := topology.Parse("switch:2")
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(topo, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := c.Devices()
	hs, err := d[0].NewStream()
	if err != nil {
		t.Fatal(err)
	}
	s := hs.(*Stream)
	b, err := d[0].Alloc(hw.F32, 4)
	if err != nil {
		t.Fatal(err)
	}
	own := hw.Whole(b)
	calls := map[string]func() error{}
	for what, u := range map[string]struct {
		buf *Buffer
		dev *Device
		ev  *Event
	}{"zero": {new(Buffer), new(Device), new(Event)}, "nil": {}} {
		sl := hw.Slice{Buf: u.buf}
		calls["switch reduce from a slice of a "+what+" buffer"] = func() error { return s.SwitchReduce(hw.Sum, own, []hw.Slice{own, sl}) }
		calls["multicast into a slice of a "+what+" buffer"] = func() error { return s.Multicast([]hw.Slice{own, sl}, own) }
		calls["switch all-reduce with a "+what+" device"] = func() error { return s.SwitchAllReduce(hw.Sum, own, own, []*Device{d[0], u.dev}, 1) }
		calls["run until a "+what+" event"] = func() error { return c.RunUntilAny(u.ev) }
	}
	zerotest.Refused(t, calls)
}
