package cuda

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

// notOpened is the error for a value of type typ that ctor did not make
// (a nil *Stream or a zero Device, with no world, driver or lock behind
// it).
func notOpened(typ, ctor string) error {
	return fmt.Errorf("cuda: %s %w (use %s)", typ, hw.ErrNotMade, ctor)
}

// The types below build on every system; those of the driver (Device,
// Buffer, Stream, Event, NativeComm) have their opened next to them.

// opened refuses an NCCLComm that no NCCLInit function made: it has no
// library to call.
func (c *NCCLComm) opened() error {
	if c == nil || c.lib == nil {
		return notOpened("NCCLComm", "cuda.NCCLInitAll, NCCLInitRank or NCCLInitRanks")
	}
	return nil
}

// opened refuses a RendezvousServer that Listen did not make: it has no
// listener.
func (s *RendezvousServer) opened() error {
	if s == nil || s.ln == nil {
		return notOpened("RendezvousServer", "Rendezvous.Listen")
	}
	return nil
}
