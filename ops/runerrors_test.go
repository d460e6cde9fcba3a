package ops

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestARunsErrorSpellsOutAFewCausesAndCountsTheRest: a run that fails on
// many ranks, each for its own reason (every send across a cut fabric),
// names the first three causes and counts the others with their ranks;
// a cause several ranks share is named once; errors.Is still finds a
// counted one's sentinel.
func TestARunsErrorSpellsOutAFewCausesAndCountsTheRest(t *testing.T) {
	shared := errors.New("past the horizon")
	counted := errors.New("planted sentinel")
	var failed []rankError
	for r := range 6 {
		failed = append(failed, rankError{r, fmt.Errorf("rank %d: no route to rank %d", r, r+1)})
	}
	failed = append(failed, rankError{6, shared}, rankError{7, shared}, rankError{8, fmt.Errorf("rank 8: %w", counted)})
	err := joinErrors(foldAlike(failed))
	msg := err.Error()
	for _, want := range []string{"rank 0: no route to rank 1; rank 1: no route to rank 2; rank 2: no route to rank 3; ",
		"and 5 other failure(s), on rank(s) 3, 4, 5, 6, 7, 8"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "rank 3: no route") || !errors.Is(err, counted) || !errors.Is(err, shared) {
		t.Errorf("error %q: a counted cause is spelled out, or its sentinel is lost", msg)
	}
	if got := joinErrors(foldAlike(failed[:3])).Error(); strings.Contains(got, "other failure") || strings.Count(got, "no route") != 3 {
		t.Errorf("three causes: %q, want all three spelled out", got)
	}
}
