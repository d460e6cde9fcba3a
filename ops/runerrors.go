package ops

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/commsim/commsim/hw"
)

// How a run's failures on many ranks become one error, on one line.

// JoinRankErrors is one error for a run whose rank r failed with errs[r]
// (nil where it did not), as Run reports it: ranks in order, a deadlock
// once (its report lists every blocked stream), a cause that several
// ranks share once with their ranks, at most a few causes spelt out, and
// the ranks that failed only because a peer had (hw.ErrPeerFailed) named
// after the failures themselves. It is nil when no rank failed. A
// communicator that waits for its ranks itself (package comm) reports
// through it as the executor does.
func JoinRankErrors(errs []error) error {
	var failed []rankError
	var followers []int // ranks that failed only because a peer had
	var followed error  // the first of their errors, which names the cause
	deadlock := false
	for r, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, hw.ErrPeerFailed):
			followers = append(followers, r)
			followed = cmp.Or(followed, err)
		case errors.Is(err, hw.ErrDeadlock):
			if !deadlock {
				failed = append(failed, rankError{r, err})
			}
			deadlock = true
		default:
			failed = append(failed, rankError{r, err})
		}
	}
	folded := foldAlike(failed)
	switch {
	case len(followers) > 0 && len(folded) == 0:
		// The failure they followed is on none of the ranks: the first
		// follower's error names it.
		folded = append(folded, fmt.Errorf("%w (rank(s) %s failed that way)", followed, joinRanks(followers)))
	case len(followers) > 0:
		// Each says which failure reached it first: name them once,
		// after the failures themselves.
		folded = append(folded, fmt.Errorf("%w: rank(s) %s, whose peers failed before sending to them",
			hw.ErrPeerFailed, joinRanks(followers)))
	}
	return joinErrors(folded)
}

// rankError is how one rank failed.
type rankError struct {
	rank int
	err  error
}

// foldAlike keeps one error per cause: the ranks whose errors wrap the
// same root error (every rank passing the simulator's horizon, say) are
// named after the first of them, so that a failure all ranks share reads
// as one line, not one per rank.
func foldAlike(failed []rankError) []error {
	var errs []error
	var ranks [][]int // the ranks of each of errs
	for i, f := range failed {
		root := rootError(f.err)
		if slices.ContainsFunc(failed[:i], func(g rankError) bool { return sameError(rootError(g.err), root) }) {
			continue
		}
		var alike []int
		for _, g := range failed[i+1:] {
			if sameError(rootError(g.err), root) {
				alike = append(alike, g.rank)
			}
		}
		ranks = append(ranks, append([]int{f.rank}, alike...))
		if len(alike) == 0 {
			errs = append(errs, f.err)
			continue
		}
		errs = append(errs, fmt.Errorf("%w (rank(s) %s failed with the same error)", f.err, joinRanks(alike)))
	}
	if len(errs) <= maxShownFailures {
		return errs
	}
	var more []int
	for _, rs := range ranks[maxShownFailures:] {
		more = append(more, rs...)
	}
	slices.Sort(more)
	return append(errs[:maxShownFailures:maxShownFailures], moreFailures{errs[maxShownFailures:], more})
}

// maxShownFailures is how many causes of a run's failure its error
// spells out: past them the others are counted, with their ranks. A link
// down that cuts a fabric in two fails every send across it, each with its
// own error, and hundreds of them made a line of kilobytes.
const maxShownFailures = 3

// moreFailures stands for the causes of a run's failure past the first
// maxShownFailures: its message counts them, and errors.Is and As still
// find each.
type moreFailures struct {
	errs  []error
	ranks []int
}

func (m moreFailures) Error() string {
	return fmt.Sprintf("and %d other failure(s), on rank(s) %s", len(m.errs), joinRanks(m.ranks))
}

func (m moreFailures) Unwrap() []error { return m.errs }

// joinedErrors is errors.Join's on one line: a run's failures read as
// one line of an error message, each after a semicolon.
type joinedErrors []error

func (e joinedErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (e joinedErrors) Unwrap() []error { return e }

// joinErrors is errs as one error, nil for none, the error itself for one.
func joinErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return joinedErrors(errs)
}

// rootError is the innermost error err wraps along its single chain.
func rootError(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// sameError reports whether a and b are one error value: a sentinel such
// as a backend's horizon. Errors made per failure (fmt.Errorf's) differ.
func sameError(a, b error) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// joinRanks lists ranks for an error: all of them, or the first few.
func joinRanks(ranks []int) string {
	const most = 16
	var b strings.Builder
	for i, r := range ranks {
		if i == most {
			fmt.Fprintf(&b, " and %d more", len(ranks)-most)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, r)
	}
	return b.String()
}
