package cuda

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Nonblocking communicators (ncclConfig_t.blocking = 0, NCCL ≥ 2.14) are
// how a multi-process job gives up on a dead peer: NCCL's calls return
// ncclInProgress while it still works, in the background, and
// ncclCommGetAsyncError says when it is done, so the caller waits where it
// can stop waiting, and ncclCommAbort ends what NCCL still waits for. A
// blocking ncclCommInitRank, or the ncclGroupEnd of a first collective,
// inside which NCCL connects to the peers, cannot be left when a peer is
// gone. JoinNative makes its communicators this way.

// initRankNonblocking starts joining rank of an nranks-rank communicator as
// a nonblocking one (ncclCommInitRankConfig with blocking = 0) and returns
// at once, before the other ranks have joined: Ready polls for the end of
// the join, and Abort gives up on it. setDevice makes the rank's device
// current on the calling thread, as for NCCLInitRanks. ok is false where
// the join would not be nonblocking, or would not be safe so; use
// initRanks (under a timer) then:
//   - the library has no ncclCommInitRankConfig (NCCL before 2.14);
//   - NCCL 2.14–2.17 keep the caller's pointer to the communicator and
//     write it from their own thread after the call returns, where Go
//     memory may no longer be where it was (2.18 writes it during the
//     call);
//   - NCCL_COMM_BLOCKING set to a number other than 0 overrides the
//     config's blocking = 0, and the call would wait for every rank,
//     past any timer.
func (l *ncclLib) initRankNonblocking(id NCCLUniqueID, nranks, rank int, setDevice func() error) (c *NCCLComm, ok bool, err error) {
	if l.commInitRankConfig == nil || l.version < 21800 || envForcesBlocking() {
		return nil, false, nil
	}
	if err := checkNCCLRanks(nranks, []int{rank}, false); err != nil {
		return nil, true, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := setDevice(); err != nil {
		return nil, true, fmt.Errorf("nccl: making rank %d's device current: %w", rank, err)
	}
	handle, config := new(uintptr), new(ncclConfig)
	*config = nonblockingConfig()
	var pin runtime.Pinner
	pin.Pin(handle)
	pin.Pin(config)
	r := l.commInitRankConfig(handle, int32(nranks), ncclUniqueIDArg{id}, int32(rank), config)
	pin.Unpin()
	if r != ncclSuccess && r != ncclInProgress {
		if *handle != 0 {
			// NCCL may hand out the communicator before failing.
			l.commAbort(*handle)
		}
		return nil, true, l.check(fmt.Sprintf("ncclCommInitRankConfig(rank %d of %d, nonblocking)", rank, nranks), 0, r)
	}
	return &NCCLComm{lib: l, nranks: nranks, ranks: []int{rank}, handles: []uintptr{*handle}, devices: []int{-1}, nonblocking: true}, true, nil
}

// envCommBlocking is NCCL_COMM_BLOCKING as NCCL reads it, a number that
// overrides every communicator's config: set, and whether it makes them
// blocking (any number but 0) or nonblocking (0).
func envCommBlocking() (set, blocking bool) {
	n, err := strconv.Atoi(strings.TrimSpace(os.Getenv("NCCL_COMM_BLOCKING")))
	return err == nil, n != 0
}

// envForcesBlocking reports whether NCCL_COMM_BLOCKING makes every
// communicator blocking, whatever its config says.
func envForcesBlocking() bool {
	set, blocking := envCommBlocking()
	return set && blocking
}

// errEnvNonblocking refuses NCCL_COMM_BLOCKING=0 where commsim asks NCCL
// for blocking communicators (ncclCommInitAll, ncclCommInitRank): it makes
// them nonblocking, and NCCL would then write their handles from its own
// thread after the call returned, into Go memory no longer pinned.
func errEnvNonblocking() error {
	if set, blocking := envCommBlocking(); !set || blocking {
		return nil
	}
	return errors.New("nccl: NCCL_COMM_BLOCKING=0 makes this communicator nonblocking, which its init does not wait for: unset it (JoinNative makes its communicators nonblocking itself, with NCCL 2.18 or later)")
}

// Ready reports whether NCCL has finished the communicator's last
// nonblocking call (its init, a group): false while ncclCommGetAsyncError
// says ncclInProgress on any local rank, an error when it reports one. A
// blocking communicator is always ready.
func (c *NCCLComm) Ready() (bool, error) {
	inProgress, err := c.pollAsync()
	return !inProgress && err == nil, err
}

// waitReady polls Ready until NCCL is done, with the watchdog's backoff
// and no time limit: for the public API, whose nonblocking communicators
// come from JoinNative, which bounds its waits itself.
func (c *NCCLComm) waitReady() error {
	delay := ncclWatchMinDelay
	for {
		ok, err := c.Ready()
		if ok || err != nil {
			return err
		}
		time.Sleep(delay)
		delay = min(2*delay, ncclWatchMaxDelay)
	}
}
