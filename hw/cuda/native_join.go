//go:build linux || darwin

package cuda

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/commsim/commsim/hw"
)

// JoinNative makes this process one rank of a multi-process NCCL
// communicator, on its local GPU gpu. It opens a one-rank world on that
// GPU (as NewWorldOn([]int{gpu}) does), meets the other processes through
// rdv (rank 0 makes NCCL's unique id and serves it over TCP; see
// NCCLRendezvous), and joins rank rdv.Rank of rdv.Size ranks with
// ncclCommInitRank.
//
// The communicator's Ranks() is rdv.Size and its Launch takes calls of
// rank rdv.Rank only, on streams of w's one device; the other processes
// must launch the matching calls of their ranks (ops.RunNativeRank does
// one rank's part of a native plan). Everything else is as for
// Device.NewNativeComm: collectives run in stream order, the watchdog
// aborts one that runs past COMMSIM_NCCL_TIMEOUT (EnvNCCLTimeout,
// DefaultNCCLTimeout; the result can be asserted to *NativeComm for
// SetTimeout), and Device.Abort of w's device aborts it (ncclCommAbort).
//
// rdv.Timeout (DefaultRendezvousTimeout when zero) bounds the rendezvous,
// and then again the join, which waits until every rank has joined: a
// process that failed between the two would otherwise hang the others.
// With NCCL 2.18 or later the communicator is a nonblocking one
// (ncclCommInitRankConfig): on a timeout, or when ctx ends, the join is
// aborted (ncclCommAbort), and so can a first collective be while NCCL
// connects to the peers. With an older NCCL, or NCCL_COMM_BLOCKING set to
// a number other than 0 (which makes every communicator blocking), the
// join is the blocking ncclCommInitRank: JoinNative returns an error when
// the timeout or ctx ends first and leaves NCCL's call running; the
// communicator it may still make is aborted and the world closed when the
// call returns. Such a communicator's first collective connects to the
// peers inside a blocking ncclGroupEnd, which nothing can end: a peer
// that dies then hangs this rank's launches, and Device.Abort waits
// behind them. NCCL 2.18 or later, without NCCL_COMM_BLOCKING, bounds
// every wait.
//
// close closes the communicator (waiting for its work) and then the world.
// Without NCCL the error wraps ErrNoNCCL; without a driver, ErrNoDriver.
func JoinNative(ctx context.Context, rdv Rendezvous, gpu int) (w *hw.World, comm hw.NativeComm, close func() error, err error) {
	if err := checkJoin(rdv, gpu); err != nil {
		return nil, nil, nil, err
	}
	d, err := load()
	if err != nil {
		return nil, nil, nil, joinError(rdv, err)
	}
	w, n, close, err := joinNative(ctx, d, loadNCCL, rdv, gpu)
	if err != nil {
		return nil, nil, nil, err
	}
	return w, n, close, nil
}

func checkJoin(rdv Rendezvous, gpu int) error {
	if err := rdv.Validate(); err != nil {
		return joinError(rdv, err)
	}
	if gpu < 0 {
		return joinError(rdv, fmt.Errorf("%w: GPU %d", hw.ErrBadArgument, gpu))
	}
	return nil
}

func joinError(rdv Rendezvous, err error) error {
	return fmt.Errorf("cuda: join native communicator as rank %d of %d: %w", rdv.Rank, rdv.Size, err)
}

// joinNative is JoinNative over driver d and NCCL from loadLib (the real
// ones, or a test's fakes).
func joinNative(ctx context.Context, d *driver, loadLib func() (*ncclLib, error), rdv Rendezvous, gpu int) (*hw.World, *NativeComm, func() error, error) {
	fail := func(err error) (*hw.World, *NativeComm, func() error, error) {
		return nil, nil, nil, joinError(rdv, err)
	}
	if err := checkJoin(rdv, gpu); err != nil {
		return nil, nil, nil, err
	}
	timeout, err := parseNCCLTimeout(os.Getenv(EnvNCCLTimeout))
	if err != nil {
		return fail(err)
	}
	// NCCL and the GPU come first: a process that cannot have them fails
	// before the rendezvous, where the others then report it missing,
	// rather than after it, where they would wait in ncclCommInitRank.
	lib, err := loadLib()
	if err != nil {
		return fail(err)
	}
	w, closeWorld, err := newWorld(d, []int{gpu})
	if err != nil {
		return fail(err)
	}
	dev := w.Devices()[0].(*Device)
	id, err := ncclRendezvous(ctx, rdv, func() (*ncclLib, error) { return lib, nil })
	if err != nil {
		return fail(errors.Join(err, closeWorld()))
	}
	comm, abandoned, err := initRankTimed(ctx, d, lib, dev, id, rdv, func() { closeWorld() })
	if err != nil {
		if !abandoned {
			err = errors.Join(err, closeWorld())
		}
		return fail(err)
	}
	devs := make([]*Device, rdv.Size)
	devs[rdv.Rank] = dev
	n := &NativeComm{h: dev.h, comm: comm, devs: devs, timeout: timeout,
		what: fmt.Sprintf("NCCL communicator rank %d of %d (%s)", rdv.Rank, rdv.Size, dev.name)}
	if err := n.register(dev); err != nil {
		return fail(errors.Join(err, comm.Destroy(), closeWorld()))
	}
	close := func() error { return errors.Join(n.Close(), closeWorld()) }
	return w, n, close, nil
}

// initRankTimed joins the rank with dev current, giving up after rdv's
// timeout or when ctx ends. The communicator is a nonblocking one
// (ncclCommInitRankConfig, NCCL ≥ 2.14): the join runs in NCCL's
// background while this polls for its end, and giving up aborts it
// (ncclCommAbort), so nothing is left behind; its collectives can then be
// given up on too while NCCL connects (see native_launch.go). An older
// NCCL joins with the blocking ncclCommInitRank, which cannot be
// cancelled: on giving up that call is left running and abandoned is true;
// whatever it makes is aborted once it returns, and then cleanup runs
// (closing the world under it). Otherwise cleanup is not called.
func initRankTimed(ctx context.Context, d *driver, lib *ncclLib, dev *Device, id NCCLUniqueID, rdv Rendezvous, cleanup func()) (c *NCCLComm, abandoned bool, err error) {
	setDevice := func() error { return d.check("cuCtxSetCurrent", d.cuCtxSetCurrent(dev.g.ctx)) }
	c, ok, err := lib.initRankNonblocking(id, rdv.Size, rdv.Rank, setDevice)
	if ok {
		if err != nil {
			return nil, false, fmt.Errorf("GPU %d: %w", dev.GPU(), err)
		}
		if err := waitJoined(ctx, c, rdv); err != nil {
			return nil, false, fmt.Errorf("GPU %d: %w", dev.GPU(), err)
		}
		return c, false, nil
	}
	type result struct {
		c   *NCCLComm
		err error
	}
	res := make(chan result, 1)
	go func() {
		c, err := lib.initRanks(id, rdv.Size, []int{rdv.Rank}, func(int) error { return setDevice() })
		res <- result{c, err}
	}()
	timer := time.NewTimer(rdv.timeout())
	defer timer.Stop()
	var why error
	select {
	case r := <-res:
		if r.err != nil {
			return nil, false, fmt.Errorf("GPU %d: %w", dev.GPU(), r.err)
		}
		return r.c, false, nil
	case <-timer.C:
		why = fmt.Errorf("%w after %v", context.DeadlineExceeded, rdv.timeout())
	case <-ctx.Done():
		why = ctx.Err()
	}
	go func() {
		if r := <-res; r.c != nil {
			r.c.Abort()
		}
		cleanup()
	}()
	return nil, true, fmt.Errorf("GPU %d: ncclCommInitRank(rank %d of %d) did not return: %w (every rank joins right after the rendezvous: a process may have failed in between; NCCL's call is left running, since this NCCL has no nonblocking init)",
		dev.GPU(), rdv.Rank, rdv.Size, why)
}

// waitJoined polls a nonblocking communicator until its join is done, NCCL
// reports an error, rdv's timeout passes or ctx ends; in the last three
// cases it aborts the communicator.
func waitJoined(ctx context.Context, c *NCCLComm, rdv Rendezvous) error {
	timer := time.NewTimer(rdv.timeout())
	defer timer.Stop()
	delay := ncclWatchMinDelay
	for {
		ok, err := c.Ready()
		if ok {
			return nil
		}
		var why error
		if err != nil {
			why = err
		} else {
			select {
			case <-time.After(delay):
				delay = min(2*delay, ncclWatchMaxDelay)
				continue
			case <-timer.C:
				why = fmt.Errorf("%w after %v", context.DeadlineExceeded, rdv.timeout())
			case <-ctx.Done():
				why = ctx.Err()
			}
		}
		return errors.Join(fmt.Errorf("ncclCommInitRankConfig(rank %d of %d) did not finish: %w (every rank joins right after the rendezvous: a process may have failed in between); communicator aborted",
			rdv.Rank, rdv.Size, why), c.Abort())
	}
}
