package cuda

import (
	"fmt"
	"runtime"
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
// current on the calling thread, as for NCCLInitRanks. ok is false when
// the library has no ncclCommInitRankConfig (NCCL before 2.14); use
// initRanks then.
func (l *ncclLib) initRankNonblocking(id NCCLUniqueID, nranks, rank int, setDevice func() error) (c *NCCLComm, ok bool, err error) {
	if l.commInitRankConfig == nil {
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
