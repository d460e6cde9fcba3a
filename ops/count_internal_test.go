package ops

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// TestACountPastTheLimitNamesTheLimit: the counters of a streamed plan
// share one total, so the sum that the one passing the limit sees
// depends on how they were scheduled; the error names the limit, the
// same on every run, not that sum, nor a count it does not know.
func TestACountPastTheLimitNamesTheLimit(t *testing.T) {
	var total atomic.Int64
	total.Store(1 << 20) // the other counters' shares, added before
	limit := 1<<20 + countShare
	b := &builder{p: &Plan{Spec: Spec{Op: AllReduce, Ranks: 1}, Lanes: 1}, mode: modeCount,
		limit: limit, lo: 0, hi: 1, count: make([]int, 1), total: &total}
	err := generate(func(b *builder) error {
		for range 4 * countShare {
			b.add(0, Step{})
		}
		return nil
	}, b)
	want := fmt.Sprintf("plan too large: over the limit of %d plan steps;", limit)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want ErrTooLarge saying %q", err, want)
	}
}
