package metal

import (
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/zerotest"
)

// TestZeroValues calls every exported method on a zero value and a nil
// pointer of each type. None may panic, and the types that only a
// constructor makes must refuse with hw.ErrNotMade before they reach for a
// GPU or a lock that is not there.
func TestZeroValues(t *testing.T) {
	calls := zeroCalls(t)
	zerotest.WantErr(t, calls, hw.ErrNotMade, []string{"Buffer", "Device", "Event", "Stream"})
}

func zeroCalls(t *testing.T) []zerotest.Call {
	return zerotest.Run(t, []any{
		new(Buffer), new(DeadlockError), new(Device), new(Event), new(Stream),
	}, zerotest.Options{})
}
