// Package hwtest is the conformance suite of the hw contract: checks that
// every backend (the simulator, CUDA, Metal, or a new one) runs from its
// own tests with a constructor, in the shape of gonum's graph/testgraph.
//
//	func TestConformance(t *testing.T) {
//		hwtest.Conformance(t, hwtest.Backend{NewWorld: openWorld, Aborts: true})
//	}
//
// Each check is an exported function that opens the worlds it needs, so a
// backend may also run one alone. The checks use only the hw API, and each
// is written against the words of hw's doc comments: message matching,
// Wait and Record, ElapsedSince, bad arguments, host reads and writes,
// phantom buffers, deadlocks, failures that travel from one stream to
// another, Abort, and closed worlds. Errors are tested with errors.Is
// against hw's sentinels and for the device names the contract says they
// carry.
//
// No check measures time. Every call that could block runs under a
// generous guard (hangAfter), so a backend that hangs fails the check
// instead of the test run, and a panic fails the check that caused it
// rather than ending the test binary: bad calls must never panic.
package hwtest

import (
	"testing"

	"github.com/commsim/commsim/hw"
)

// Backend is what the suite needs to know about a backend.
type Backend struct {
	// NewWorld opens a world of ranks devices whose buffers hold data, and
	// returns the function that closes it. The suite closes every world it
	// opens, once.
	NewWorld func(ranks int) (w *hw.World, close func() error, err error)
	// NewTimingWorld opens a timing-only world, whose buffers are phantoms;
	// nil for a backend that has none (Conformance then leaves
	// PhantomBuffers out, and PhantomBuffers called alone skips).
	NewTimingWorld func(ranks int) (w *hw.World, close func() error, err error)
	// Aborts says that the devices implement hw.Aborter. The suite checks
	// the claim both ways.
	Aborts bool
	// Hold, if not nil, enqueues on s work that does not finish until
	// release is called, without being blocked on anything the world can
	// see: the world is then busy, not deadlocked. AbortEndsSynchronize
	// uses it to hold a Synchronize pending; without it, a backend may
	// report the stuck receive of that check as a deadlock before Abort.
	Hold func(s hw.Stream) (release func(), err error)
}

// Conformance runs every check as a subtest.
func Conformance(t *testing.T, b Backend) {
	if b.NewWorld == nil {
		t.Fatal("hwtest: Backend.NewWorld is nil")
	}
	checks := []struct {
		name string
		run  func(*testing.T, Backend)
		// missing, when set, says why a backend lacks the capability the
		// check is of ("" where it has it).
		missing func(Backend) string
	}{
		{"MessagesMatchFIFO", MessagesMatchFIFO, nil},
		{"MismatchedMessageFails", MismatchedMessageFails, nil},
		{"SplitWorldsKeepTagsApart", SplitWorldsKeepTagsApart, nil},
		{"WaitsFollowRecords", WaitsFollowRecords, nil},
		{"ElapsedNeedsCompletedRecords", ElapsedNeedsCompletedRecords, nil},
		{"BadArgumentsAreRefused", BadArgumentsAreRefused, nil},
		{"UnmadeArgumentsAreRefused", UnmadeArgumentsAreRefused, nil},
		{"HostReadWrite", HostReadWrite, nil},
		{"FreedWhileQueued", FreedWhileQueued, nil},
		{"PhantomBuffers", PhantomBuffers, noTimingWorlds},
		{"DeadlockIsReported", DeadlockIsReported, nil},
		{"FailedStreamFailsEventWaiters", FailedStreamFailsEventWaiters, nil},
		{"FailedSenderFailsReceivers", FailedSenderFailsReceivers, nil},
		{"AbortEndsSynchronize", AbortEndsSynchronize, nil},
		{"ClosedWorldRefusesCalls", ClosedWorldRefusesCalls, nil},
	}
	for _, c := range checks {
		// A check of a capability the backend does not claim does not
		// apply: it is logged, not skipped, so that a skip still means a
		// check that could not run where it should have (no GPU, say).
		if c.missing != nil {
			if why := c.missing(b); why != "" {
				t.Logf("%s: not run: %s", c.name, why)
				continue
			}
		}
		t.Run(c.name, func(t *testing.T) { c.run(t, b) })
	}
}
