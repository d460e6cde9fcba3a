//go:build linux || darwin

package cuda

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/commsim/commsim/hw"
)

// The group launch of native collectives (native.go), and its watchdog.
//
// NCCL keeps a group (ncclGroupStart … ncclGroupEnd) per OS thread, while
// every Stream here has its own worker thread. Launch therefore enqueues
// one opNative on each stream the calls use, all pointing at one
// nativeLaunch, and returns. The op acts as a barrier inside the worker
// loop: it is ready once every participating stream has finished all the
// work before it (Stream.done equals the op's index). The worker that
// finds it ready first becomes the launcher: it marks every participant
// in flight, issues the whole group on its own thread (NCCLComm.Launch,
// which locks the thread and pairs ncclGroupStart with ncclGroupEnd),
// records a marker event after the group on each participating stream,
// makes its own context current again (NCCL switches devices as it works),
// and then releases the other participants, which have nothing left to do.
// Prior work on every stream was issued before the group, and later work
// after it, so CUDA keeps the order.
//
// The barrier is an ordinary host wait to the rest of the core: the
// deadlock check (hub.deadlock) sees a stream stopped at it as blocked, and
// names the streams that have not arrived, exactly as it does for a Recv
// whose message nobody sent, so a plan that can never reach the collective
// on every rank is reported instead of hanging. While the group is being
// issued the participants are in flight, so nothing is reported then and
// Buffer.Free waits. A participant that failed or was aborted before the
// group was issued skips its op, which fails the launch for every other
// participant with an error naming it (nativeLaunch.skipped).
//
// On a nonblocking communicator (JoinNative's) ncclGroupEnd returns
// ncclInProgress while NCCL still issues the group, which on the first
// collective includes connecting to the peers: the launcher then waits,
// without launchMu, until ncclCommGetAsyncError says the group is issued,
// under the same timeout, and Abort can end the wait. A blocking group end
// could not be left (NCCL allows no ncclCommAbort while a call is being
// issued), so a dead peer at the first collective would have hung the
// launcher, Abort and the watchdog alike.
//
// A collective whose peer is stuck never finishes, and nothing in CUDA says
// so. After the group is issued a goroutine runs NCCLComm's watchdog over the
// marker events (cuEventQuery: CUDA_SUCCESS done, CUDA_ERROR_NOT_READY not
// yet, anything else an error). Markers rather than cuStreamQuery, because
// a stream that keeps receiving later work would never look idle and could
// time out a healthy collective. On an asynchronous NCCL error, a CUDA
// error or the timeout (NativeComm.SetTimeout, COMMSIM_NCCL_TIMEOUT,
// DefaultNCCLTimeout) the watchdog aborts the communicator, which ends the
// stuck kernels, and fails every participating stream with an error naming
// the call. Stream.Synchronize waits for the watchdogs of the work it waits
// for, so it returns that error rather than a success over garbage.

// nativeLaunch is one Launch: the NCCL calls and the streams that carry
// them.
type nativeLaunch struct {
	n     *NativeComm
	calls []NCCLCall
	bufs  []*Buffer // every buffer of the calls, checked before issue
	parts []*nativePart

	// Guarded by the hub lock.
	state nativeState
	err   error // why it failed

	// Set by the launcher, then owned by the watchdog.
	timeout time.Duration
	markers []uintptr // per part: recorded after the group on its stream
	next    int       // parts whose marker has completed
}

// nativePart is one stream's share of a launch.
type nativePart struct {
	s     *Stream
	o     *op
	rank  int
	calls []int // indices into calls
}

type nativeState uint8

const (
	nativePending   nativeState = iota // enqueued; not every stream has reached it
	nativeLaunching                    // a worker is issuing the group
	nativeDone                         // issued; the watchdog runs
	nativeFailed                       // never issued (err says why)
)

// ready reports whether a participant's worker can take its op: once the
// group is issued or has failed, or, before that, once every participant
// has finished everything before it (then the taker issues the group).
// The caller holds the hub lock.
func (l *nativeLaunch) ready() bool {
	switch l.state {
	case nativeDone, nativeFailed:
		return true
	case nativeLaunching:
		return false
	}
	for _, p := range l.parts {
		if p.s.done != p.o.index {
			return false
		}
	}
	return true
}

// waitingFor says, for a deadlock report, which streams have not reached
// the group.
func (l *nativeLaunch) waitingFor() string {
	var missing []string
	for _, p := range l.parts {
		if p.s.done != p.o.index {
			missing = append(missing, fmt.Sprintf("rank %d (%s) stream %d", p.rank, p.s.dev.name, p.s.id))
		}
	}
	return "the NCCL group is issued once every stream of it has reached it; not there: " + strings.Join(missing, ", ")
}

// skipped is a participant's failed stream dropping its op: a group not yet
// issued then fails for everyone, since it can never be complete.
func (l *nativeLaunch) skipped(s *Stream) {
	if l.state != nativePending {
		return
	}
	for _, p := range l.parts {
		if p.s == s {
			l.resolve(fmt.Errorf("nccl group not launched: rank %d (%s) stream %d failed before reaching it: %w",
				p.rank, s.dev.name, s.id, s.err))
			return
		}
	}
}

// resolve ends the pending phase: issued (err nil) or failed. The caller
// holds the hub lock.
func (l *nativeLaunch) resolve(err error) {
	n := l.n
	n.pending = slices.DeleteFunc(n.pending, func(x *nativeLaunch) bool { return x == l })
	if err != nil {
		l.state, l.err = nativeFailed, err
	} else {
		l.state = nativeDone
	}
	for _, p := range l.parts {
		p.s.wake.Signal()
	}
	n.h.idle.Broadcast()
}

// step runs a participant's op on its worker, with the hub lock held (it
// releases it while the group is issued).
func (l *nativeLaunch) step(s *Stream, o *op) {
	h := s.dev.h
	switch l.state {
	case nativeFailed:
		s.fail(o, l.err)
		return
	case nativeDone:
		return // the launcher issued this stream's part
	case nativeLaunching:
		s.fail(o, errors.New("internal error: nccl group taken by two workers"))
		return
	}
	if err := l.preflight(s); err != nil {
		l.resolve(err)
		s.fail(o, err)
		return
	}
	l.state = nativeLaunching
	l.timeout = l.n.timeout
	for _, p := range l.parts {
		p.s.inflight = true
	}
	h.mu.Unlock()
	launched, err := l.launch(s)
	h.mu.Lock()
	for _, p := range l.parts {
		p.s.inflight = false
	}
	if !launched {
		if l.n.abortErr != nil {
			err = fmt.Errorf("%w: %w", l.n.abortErr, err)
		}
		l.resolve(err)
		s.fail(o, err)
		return
	}
	for _, p := range l.parts {
		p.s.watches = append(p.s.watches, p.o.index)
	}
	l.n.watching++
	h.watches.Add(1)
	go l.watch()
	l.resolve(nil)
	if err != nil {
		s.fail(o, err) // the group runs, but this worker's context is lost
	}
}

// preflight checks, just before issue, what may have changed since
// Launch; the caller holds the hub lock.
func (l *nativeLaunch) preflight(launcher *Stream) error {
	n := l.n
	if n.abortErr != nil {
		return fmt.Errorf("nccl group not launched: %w", n.abortErr)
	}
	if n.closed {
		return fmt.Errorf("nccl group not launched: %s was closed: %w", n.what, ErrNCCLClosed)
	}
	for _, p := range l.parts {
		if p.s != launcher && p.s.err != nil {
			return fmt.Errorf("nccl group not launched: rank %d (%s) stream %d failed before reaching it: %w",
				p.rank, p.s.dev.name, p.s.id, p.s.err)
		}
	}
	for _, b := range l.bufs {
		if b.freed {
			return fmt.Errorf("nccl group not launched: a buffer of %s (%d x %s): %w", b.dev.name, b.n, b.dt, hw.ErrFreed)
		}
	}
	return nil
}

// launch issues the group on the launcher's thread, without the hub lock,
// and records a marker after it on every participating stream. launched
// says whether NCCL work is now in flight (then the watchdog must run); err
// may be set either way.
func (l *nativeLaunch) launch(s *Stream) (launched bool, err error) {
	n := l.n
	d := n.h.d
	n.launchMu.Lock()
	pending, err := n.comm.launch(l.calls)
	var ne *NCCLError
	if errors.As(err, &ne) {
		// NCCL failed inside the group, which may have issued part of it:
		// kernels of some ranks could then wait forever for the others.
		if aerr := n.comm.Abort(); aerr != nil {
			err = fmt.Errorf("%w; aborting the communicator failed too: %w", err, aerr)
		} else {
			err = fmt.Errorf("%w; communicator aborted, since part of the group may have been issued", err)
		}
	}
	if err == nil && pending {
		// A nonblocking communicator is still issuing the group: on its
		// first collective NCCL connects to the peers, which never ends if
		// one is dead. The kernels are not on the streams yet, so the
		// markers wait; launchMu is let go meanwhile, so that Abort and
		// the watchdog's timeout can end the wait (ncclCommAbort).
		n.launchMu.Unlock()
		err = n.comm.watch(context.Background(), l.timeout, n.comm.Ready, n.abortComm)
		if err != nil {
			err = fmt.Errorf("issuing the group: %w", err)
		}
		n.launchMu.Lock()
	}
	if err == nil {
		launched = true
		if merr := l.recordMarkers(); merr != nil {
			// The group runs but cannot be watched: stop it rather than
			// risk a stream that hangs.
			launched = false
			err = fmt.Errorf("recording the group's completion markers: %w", merr)
			if aerr := n.comm.Abort(); aerr != nil {
				err = fmt.Errorf("%w; aborting the communicator failed too: %w", err, aerr)
			} else {
				err = fmt.Errorf("%w; communicator aborted", err)
			}
		}
	}
	n.launchMu.Unlock()
	// NCCL sets the thread's current device as it works, and the markers
	// were recorded in each GPU's context: the worker's own goes back.
	if cerr := d.check("cuCtxSetCurrent(after the NCCL group)", d.cuCtxSetCurrent(s.dev.g.ctx)); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return launched, err
}

// recordMarkers records an event after the group on each part's stream.
func (l *nativeLaunch) recordMarkers() error {
	h := l.n.h
	d := h.d
	l.markers = make([]uintptr, 0, len(l.parts))
	for _, p := range l.parts {
		g := p.s.dev.g
		pl := h.pool(g)
		err := withContext(d, g.ctx, func() error {
			ev, err := pl.getEvent(d, false)
			if err != nil {
				return err
			}
			if err := d.check("cuEventRecord(after the NCCL group)", d.cuEventRecord(ev, p.s.cu)); err != nil {
				pl.putEvent(ev, false)
				return err
			}
			l.markers = append(l.markers, ev)
			return nil
		})
		if err != nil {
			l.putMarkers()
			return fmt.Errorf("rank %d (%s) stream %d: %w", p.rank, p.s.dev.name, p.s.id, err)
		}
	}
	return nil
}

// putMarkers returns the markers to their pools. A marker still pending
// may be handed out again: a new cuEventRecord simply replaces it.
func (l *nativeLaunch) putMarkers() {
	for i, ev := range l.markers {
		l.n.h.pool(l.parts[i].s.dev.g).putEvent(ev, false)
	}
	l.markers = nil
}

// done is the watchdog's view of the group: every marker complete.
func (l *nativeLaunch) done() (bool, error) {
	d := l.n.h.d
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for ; l.next < len(l.markers); l.next++ {
		p := l.parts[l.next]
		if err := d.check("cuCtxSetCurrent", d.cuCtxSetCurrent(p.s.dev.g.ctx)); err != nil {
			return false, err
		}
		switch r := d.cuEventQuery(l.markers[l.next]); r {
		case 0:
		case cudaErrorNotReady:
			return false, nil
		default:
			return false, fmt.Errorf("rank %d (%s) stream %d: %w", p.rank, p.s.dev.name, p.s.id,
				d.check("cuEventQuery(after the NCCL group)", r))
		}
	}
	return true, nil
}

// watch is the watchdog of an issued group (see the file comment).
func (l *nativeLaunch) watch() {
	n := l.n
	h := n.h
	defer h.watches.Done()
	err := n.comm.watch(context.Background(), l.timeout, l.done, n.abortComm)
	l.putMarkers()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if n.abortErr != nil {
			err = fmt.Errorf("%w: %w", n.abortErr, err)
		}
		for _, p := range l.parts {
			p.s.fail(p.o, err)
			p.s.wake.Signal()
		}
	}
	for _, p := range l.parts {
		if i := slices.Index(p.s.watches, p.o.index); i >= 0 {
			p.s.watches = slices.Delete(p.s.watches, i, i+1)
		}
	}
	n.watching--
	h.idle.Broadcast()
}

// abortComm aborts the communicator outside any group being issued.
func (n *NativeComm) abortComm() error {
	n.launchMu.Lock()
	defer n.launchMu.Unlock()
	return n.comm.Abort()
}

// watching reports whether a watchdog still runs for one of the stream's
// first target ops; the caller holds the hub lock.
func (s *Stream) watching(target int) bool {
	for _, i := range s.watches {
		if i < target {
			return true
		}
	}
	return false
}
