package hw

import (
	"testing"

	"github.com/commsim/commsim/internal/zerotest"
)

// TestZeroValues calls every exported method on a zero value and a nil
// pointer of each type. None may panic, and a World that was not made must
// say so: a nil one is what a failed NewWorld returns.
func TestZeroValues(t *testing.T) {
	calls := zerotest.Run(t, []any{
		new(BFloat16), new(DType), new(Float16), new(NativeOp), new(ReduceOp), new(Slice), new(World),
	}, zerotest.Options{})
	zerotest.WantErr(t, calls, ErrNotMade, []string{"World"})
}
