package ops

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestMutFailuresPastTheShownAreCountedOnSortedRanks: the ranks of the
// failures counted rather than spelled out are listed in order, though a
// cause met early (ranks 3 and 5) comes before one met later (rank 4).
func TestMutFailuresPastTheShownAreCountedOnSortedRanks(t *testing.T) {
	shared := errors.New("link down")
	failed := []rankError{
		{0, errors.New("rank 0: a")}, {1, errors.New("rank 1: b")}, {2, errors.New("rank 2: c")},
		{3, shared}, {4, fmt.Errorf("rank 4: d")}, {5, shared},
	}
	msg := joinErrors(foldAlike(failed)).Error()
	if want := "and 2 other failure(s), on rank(s) 3, 4, 5"; !strings.Contains(msg, want) {
		t.Errorf("error %q lacks %q", msg, want)
	}
}
