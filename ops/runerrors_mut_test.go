package ops_test

// Tests from a mutation run over JoinRankErrors: each case is a run's
// failures as its ranks report them, and the one line Run makes of them.

import (
	"errors"
	"fmt"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// TestJoinRankErrorsReadsAsRunsReport: ranks in order, a deadlock once, a
// shared cause once with its other ranks, and the ranks that failed only
// for a peer named after the failures, or, when no rank failed of its
// own, the first of theirs with all of them; nil when no rank failed. A
// follower of a deadlock is a follower.
func TestJoinRankErrorsReadsAsRunsReport(t *testing.T) {
	crash := errors.New("rank 2 crashed")
	dead := fmt.Errorf("%w: every stream waits", hw.ErrDeadlock)
	follow := func(r int, cause error) error {
		return fmt.Errorf("rank %d: %w: %w", r, hw.ErrPeerFailed, cause)
	}
	for _, c := range []struct {
		name string
		errs []error
		want string
		is   []error
	}{
		{"none", nil, "", nil},
		{"no rank failed", []error{nil, nil, nil}, "", nil},
		{"a failure and its followers", []error{follow(0, crash), nil, crash, follow(3, crash), nil},
			"rank 2 crashed; the sender failed before sending: rank(s) 0, 3, whose peers failed before sending to them",
			[]error{crash, hw.ErrPeerFailed}},
		{"followers only", []error{nil, follow(1, crash), follow(2, dead)},
			"rank 1: the sender failed before sending: rank 2 crashed (rank(s) 1, 2 failed that way)",
			[]error{crash, hw.ErrPeerFailed}},
		{"one deadlock", []error{dead, nil, dead, dead}, "deadlock: every stream waits", []error{hw.ErrDeadlock}},
		{"a cause shared", []error{nil, crash, errors.New("no route"), crash},
			"rank 2 crashed (rank(s) 3 failed with the same error); no route", []error{crash}},
		{"a follower of a deadlock", []error{dead, follow(1, dead)},
			"deadlock: every stream waits; the sender failed before sending: rank(s) 1, whose peers failed before sending to them",
			[]error{hw.ErrDeadlock, hw.ErrPeerFailed}},
		{"only a follower of a deadlock", []error{nil, follow(1, dead)},
			"rank 1: the sender failed before sending: deadlock: every stream waits (rank(s) 1 failed that way)",
			[]error{hw.ErrDeadlock, hw.ErrPeerFailed}},
	} {
		err := ops.JoinRankErrors(c.errs)
		if got := fmt.Sprint(err); (err == nil) != (c.want == "") || (err != nil && got != c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
		for _, target := range c.is {
			if !errors.Is(err, target) {
				t.Errorf("%s: %v is not %v", c.name, err, target)
			}
		}
	}
}
