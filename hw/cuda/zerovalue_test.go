//go:build linux || darwin

package cuda

import (
	"context"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/zerotest"
)

// TestZeroValues calls every exported method on a zero value and a nil
// pointer of each type. None may panic, and the types that only a
// constructor makes must refuse with hw.ErrNotMade before they reach for a
// driver, NCCL or a lock that is not there.
func TestZeroValues(t *testing.T) {
	calls := zeroCalls(t)
	zerotest.WantErr(t, calls, hw.ErrNotMade, []string{
		"Buffer", "Device", "Event", "NCCLComm", "NativeComm", "RendezvousServer", "Stream"})
	// 0 is a GPU: a device not opened must not claim it.
	if g := new(Device).GPU(); g != -1 {
		t.Errorf("a zero Device's GPU is %d, want -1", g)
	}
}

func zeroCalls(t *testing.T) []zerotest.Call {
	return zerotest.Run(t, []any{
		new(Buffer), new(DeadlockError), new(Device), new(Event), new(Library),
		new(NCCLCall), new(NCCLComm), new(NCCLError), new(NativeComm), new(Placement),
		new(Rendezvous), new(RendezvousServer), new(Stream),
	}, zerotest.Options{
		Args: map[string][]any{
			// A done that never reports done would poll for ever.
			"NCCLComm.Watch": {context.Background(), 0, func() (bool, error) { return true, nil }},
		},
	})
}

// TestUnmadeArgumentsToNativeCollectives hands the calls of native
// collectives, which hwtest's conformance check does not know, values the
// package did not make: each must be refused, not crash on what is not
// there.
func TestUnmadeArgumentsToNativeCollectives(t *testing.T) {
	_, devs, _ := openNativeFake(t, 2, nil)
	c := nativeComm(t, devs)
	s, err := devs[0].NewStream()
	if err != nil {
		t.Fatal(err)
	}
	b, err := devs[0].Alloc(hw.F32, 4)
	if err != nil {
		t.Fatal(err)
	}
	own := hw.Whole(b)
	launch := func(k hw.NativeCall) func() error {
		return func() error { return c.Launch([]hw.NativeCall{k}) }
	}
	calls := map[string]func() error{}
	for what, u := range map[string]struct {
		buf *Buffer
		dev *Device
		s   *Stream
	}{"zero": {new(Buffer), new(Device), new(Stream)}, "nil": {}} {
		calls["a communicator over a "+what+" device"] = func() error {
			_, err := devs[0].NewNativeComm([]hw.Device{devs[0], u.dev})
			return err
		}
		calls["launch on a "+what+" stream"] = launch(hw.NativeCall{Op: hw.NativeSend, Stream: u.s, Send: own, Peer: 1})
		calls["launch from a slice of a "+what+" buffer"] = launch(hw.NativeCall{Op: hw.NativeSend, Stream: s, Send: hw.Slice{Buf: u.buf}, Peer: 1})
	}
	zerotest.Refused(t, calls)
}
