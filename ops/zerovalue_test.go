package ops

import (
	"errors"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/zerotest"
)

// TestZeroValues calls every exported method on a zero value and a nil
// pointer of each type. None may panic; an Executor or RankJob that was
// not made must say so, and a nil Plan is a malformed one.
func TestZeroValues(t *testing.T) {
	calls := zeroCalls(t)
	// Errorf decorates the error it is given; it has nothing to refuse.
	zerotest.WantErr(t, calls, hw.ErrNotMade, []string{"Executor", "RankJob"}, "RankJob.Errorf")
	for _, c := range calls {
		if c.Type == "Plan" && c.Recv == zerotest.Nil && c.Panic == nil && c.ReturnsErr && !errors.Is(c.Err, ErrBadPlan) {
			t.Errorf("%v: got error %v, want one wrapping ErrBadPlan", c, c.Err)
		}
	}
}

func zeroCalls(t *testing.T) []zerotest.Call {
	return zerotest.Run(t, []any{
		new(Buf), new(Cursor), new(Executor), new(Op), new(Operation), new(Plan),
		new(Protocol), new(RankJob), new(Ref), new(Spec), new(Step), new(StepKind),
		new(Symmetry),
	}, zerotest.Options{})
}
