package cuda

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A collective whose peer died never finishes: its kernels spin on the GPU
// waiting for data, cuStreamSynchronize blocks forever, and nothing in CUDA
// will ever say so. NCCL notices some failures itself and reports them
// through ncclCommGetAsyncError, but only to a caller that asks, and the
// stuck kernels only stop on ncclCommAbort. The watchdog asks, and aborts,
// so that a dead peer becomes an error instead of a hang.

// The watchdog's polling backoff. The first poll is immediate; short
// collectives finish within a few polls, long ones cost at most one poll
// per ncclWatchMaxDelay.
const (
	ncclWatchMinDelay = 20 * time.Microsecond
	ncclWatchMaxDelay = 5 * time.Millisecond
)

// Watch waits for the work this communicator queued to finish. done
// reports whether it has: the glue passes a cuStreamQuery over the streams
// of the launch (CUDA_SUCCESS → true, CUDA_ERROR_NOT_READY → false, any
// other result → an error). Watch polls done and AsyncError, immediately
// and then with a backoff from 20µs to 5ms, and returns
//
//   - nil once done reports true and NCCL has no async error;
//   - an error naming the rank and NCCL's text when NCCL reports an async
//     error, or done's error when the stream failed;
//   - when timeout > 0 passes first, an error naming the timeout and the
//     local ranks that wraps ErrNCCLTimeout and context.DeadlineExceeded;
//   - when ctx ends first, an error wrapping ctx.Err().
//
// In every error case it aborts the communicator first (Abort), so stuck
// streams finish and peers that wait on this process see it go; the
// communicator is then closed. A timeout ≤ 0 means no limit but ctx's.
func (c *NCCLComm) Watch(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	return c.watch(ctx, timeout, done, c.Abort)
}

// watch is Watch with the abort to use: the native glue's keeps it out of
// a group being issued.
func (c *NCCLComm) watch(ctx context.Context, timeout time.Duration, done func() (bool, error), abort func() error) error {
	if err := c.isClosed(); err != nil {
		return err
	}
	w := ncclWatchdog{
		what:    c.describeRanks(),
		timeout: timeout,
		done:    done,
		async:   c.AsyncError,
		abort:   abort,
		now:     time.Now,
		sleep:   ncclSleep,
	}
	return w.run(ctx)
}

// describeRanks names the local ranks for errors: "rank 2 of 4", "ranks 0,
// 1, 2 of 4".
func (c *NCCLComm) describeRanks() string {
	s := make([]string, len(c.ranks))
	for i, r := range c.ranks {
		s[i] = strconv.Itoa(r)
	}
	word := "rank"
	if len(s) > 1 {
		word = "ranks"
	}
	return fmt.Sprintf("%s %s of %d", word, strings.Join(s, ", "), c.nranks)
}

// ncclWatchdog is the watchdog's loop with its clock and its NCCL calls
// injected, so tests can drive it without a GPU or real time.
type ncclWatchdog struct {
	what    string
	timeout time.Duration
	done    func() (bool, error)
	async   func() error
	abort   func() error
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error
}

func (w *ncclWatchdog) run(ctx context.Context) error {
	start := w.now()
	delay := ncclWatchMinDelay
	for {
		// done first: work that finished before an async error appeared
		// still reports the error, since NCCL may have produced garbage.
		finished, derr := w.done()
		aerr := w.async()
		switch {
		case aerr != nil:
			return w.fail(fmt.Errorf("nccl: %s: %w", w.what, errors.Join(aerr, derr)))
		case derr != nil:
			return w.fail(fmt.Errorf("nccl: %s: waiting for the streams: %w", w.what, derr))
		case finished:
			return nil
		}
		elapsed := w.now().Sub(start)
		if w.timeout > 0 && elapsed >= w.timeout {
			return w.fail(fmt.Errorf("nccl: %s: %w after %v (a peer may be dead or stuck): %w",
				w.what, ErrNCCLTimeout, w.timeout, context.DeadlineExceeded))
		}
		d := delay
		if w.timeout > 0 {
			d = min(d, w.timeout-elapsed)
		}
		if err := w.sleep(ctx, d); err != nil {
			return w.fail(fmt.Errorf("nccl: %s: gave up waiting: %w", w.what, err))
		}
		delay = min(2*delay, ncclWatchMaxDelay)
	}
}

// fail aborts the communicator and says so in err.
func (w *ncclWatchdog) fail(err error) error {
	if aerr := w.abort(); aerr != nil {
		return fmt.Errorf("%w; aborting the communicator failed too: %w", err, aerr)
	}
	return fmt.Errorf("%w; communicator aborted", err)
}

// ncclSleep sleeps for d or until ctx ends, and then returns ctx's error.
func ncclSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
