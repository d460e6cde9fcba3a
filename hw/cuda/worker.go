//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/commsim/commsim/hw"
)

// A stream's worker is one goroutine locked to one OS thread for its whole
// life, with the GPU's context made current once: every driver call for the
// stream's queue comes from it, in queue order. A dedicated thread per
// stream (rather than a worker per GPU) is what lets one stream block on
// the host for a message while the other streams of the same GPU, virtual
// ranks included, keep issuing work.

// mailKey identifies a FIFO of messages: sender, receiver and tag.
type mailKey struct {
	from, to *Device
	tag      uint64
}

// mailbox holds messages sent and not yet received, oldest first.
type mailbox struct{ msgs []*message }

// message is a send whose data sits in a staging block on the sender's GPU,
// or, when err is set, a send that its failed stream skipped: it holds no
// data, and its receiver fails with err instead of waiting for a message
// that will never come.
type message struct {
	from    *Device
	dt      hw.DType
	n       int
	staging uint64  // 0 when the message is empty
	class   int     // staging's size class in its pool
	ev      uintptr // recorded after the copy into staging (no timing)
	pool    *pool   // the sender's GPU pool, owner of staging and ev
	err     error   // the sender's failure
}

// post appends msg to the mailbox of (msg.from, to, tag) and wakes to's
// streams; the caller holds the hub lock.
func (h *hub) post(to *Device, tag uint64, msg *message) {
	k := mailKey{from: msg.from, to: to, tag: tag}
	mb := h.boxes[k]
	if mb == nil {
		mb = &mailbox{}
		h.boxes[k] = mb
	}
	mb.msgs = append(mb.msgs, msg)
	for _, r := range to.strms {
		r.wake.Signal()
	}
}

// release returns staging memory and events to their pools once the CUDA
// event marker has completed, i.e. once the copy out of the staging block
// has run.
type release struct {
	marker     uintptr
	markerPool *pool
	msg        *message
}

// run is the worker loop of s.
func (s *Stream) run() {
	// The thread carries the context for the stream's life. Unlocking at
	// the end hands it back to Go's pool rather than ending it (worlds come
	// and go by the hundred in tests); a context left current on an idle
	// thread is harmless, as every driver call sets its own first.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := s.dev.h
	defer h.workers.Done()
	ctxErr := h.d.check("cuCtxSetCurrent", h.d.cuCtxSetCurrent(s.dev.g.ctx))
	s.args = newLaunchArgs()
	defer s.args.pin.Unpin()
	h.mu.Lock()
	defer h.mu.Unlock()
	if ctxErr != nil && s.err == nil {
		s.err = fmt.Errorf("cuda: rank %d (%s) stream %d: worker: %w", s.dev.rank, s.dev.name, s.id, ctxErr)
	}
	for {
		for len(s.queue) == 0 && !h.closed {
			s.wake.Wait()
		}
		if h.closed {
			return
		}
		o := s.queue[0]
		if s.err == nil && !h.ready(o) {
			// A host wait: a message not yet sent or a record not yet
			// issued. Synchronize callers re-check for a deadlock.
			if o.kind == opWait {
				o.gen.waiters = append(o.gen.waiters, s)
			}
			h.idle.Broadcast()
			s.wake.Wait()
			continue
		}
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if len(s.queue) == 0 {
			s.queue = s.queue[:0:0]
		}
		if s.err != nil {
			s.skip(o)
		} else {
			s.step(o)
		}
		s.done++
		h.idle.Broadcast()
	}
}

// ready reports whether o can be issued without a host wait; the caller
// holds the hub lock.
func (h *hub) ready(o *op) bool {
	switch o.kind {
	case opRecv:
		mb := h.boxes[mailKey{from: o.peer, to: o.dst.Buf.(*Buffer).dev, tag: o.tag}]
		return mb != nil && len(mb.msgs) > 0
	case opWait:
		return o.gen == nil || o.gen.state != genPending
	case opNative:
		return o.native.ready()
	}
	return true
}

// skip drops o from a failed stream: a Record's generation fails its
// waiters, a Send posts the failure to its receiver, a Wait lets go of its
// generation.
func (s *Stream) skip(o *op) {
	switch o.kind {
	case opRecord:
		o.gen.failed(s.err)
	case opSend:
		s.dev.h.post(o.peer, o.tag, &message{from: s.dev, err: s.err})
	case opWait:
		if o.gen != nil {
			o.gen.release()
		}
	case opNative:
		o.native.skipped(s)
	}
}

// fail records the stream's first failure, naming the rank, the stream,
// the op and the cause.
func (s *Stream) fail(o *op, cause error) {
	if s.err == nil {
		s.err = fmt.Errorf("cuda: rank %d (%s) stream %d, op #%d %s: %w", s.dev.rank, s.dev.name, s.id, o.index, o, cause)
	}
}

// step issues o; it is called with the hub lock held and releases it
// around the driver calls.
func (s *Stream) step(o *op) {
	h := s.dev.h
	var msg *message
	var waitOn uintptr
	// Under the lock: take what the driver calls need.
	if err := checkLive(o); err != nil {
		s.fail(o, err)
		s.skip(o)
		return
	}
	switch o.kind {
	case opNative:
		// One worker issues the whole group; it releases the lock itself.
		o.native.step(s, o)
		return
	case opRecv:
		k := mailKey{from: o.peer, to: s.dev, tag: o.tag}
		mb := h.boxes[k]
		msg = mb.msgs[0]
		mb.msgs[0] = nil
		mb.msgs = mb.msgs[1:]
		if len(mb.msgs) == 0 {
			// Plans use fresh tags per step: keep the map small.
			delete(h.boxes, k)
		}
		if msg.err != nil {
			s.fail(o, fmt.Errorf("%w: %w", hw.ErrPeerFailed, msg.err))
			return
		}
		if err := checkMessage(msg.from, msg.dt, msg.n, o.dst); err != nil {
			// The data is not needed, but the staging block is free only
			// once the copy into it is done.
			if msg.staging != 0 {
				s.releases = append(s.releases, release{marker: msg.ev, msg: msg})
			}
			s.fail(o, err)
			return
		}
	case opWait:
		if o.gen == nil {
			return
		}
		if o.gen.state == genFailed {
			err := o.gen.err
			o.gen.release()
			s.fail(o, fmt.Errorf("the record it waits for was skipped: %w", err))
			return
		}
		waitOn = o.gen.cu
	}
	s.inflight = true
	h.mu.Unlock()
	res, err := s.issue(o, msg, waitOn)
	if err == nil {
		err = s.pollReleases()
	}
	h.mu.Lock()
	s.inflight = false
	switch o.kind {
	case opSend:
		if err == nil {
			h.post(o.peer, o.tag, res.msg)
		}
	case opRecord:
		if err == nil {
			o.gen.issued(res.ev, res.pool)
		} else {
			o.gen.failed(err)
		}
	case opWait:
		o.gen.release()
	}
	if err != nil {
		s.fail(o, err)
		switch o.kind {
		case opRecord:
			o.gen.err = s.err
		case opSend:
			s.skip(o) // its receiver fails too
		}
	}
}

// checkLive fails an op whose buffers were freed after it was enqueued.
func checkLive(o *op) error {
	for _, sl := range []hw.Slice{o.dst, o.src} {
		if b, ok := sl.Buf.(*Buffer); ok && b.freed {
			return hw.ErrFreed
		}
	}
	return nil
}

// issued is what an op leaves behind for the bookkeeping after it.
type issued struct {
	msg  *message // Send
	ev   uintptr  // Record
	pool *pool    // Record: the pool of ev
}

// issue makes the driver calls of o on the worker's thread, without the
// hub lock.
func (s *Stream) issue(o *op, msg *message, waitOn uintptr) (issued, error) {
	h := s.dev.h
	d := h.d
	g := s.dev.g
	own := h.pool(g)
	switch o.kind {
	case opCopy:
		return issued{}, s.copy(o.dst, o.src)
	case opReduce:
		dt := o.dst.DType()
		return issued{}, s.launch(reduceKernel(o.redop, dt), o.dst, o.src, 0)
	case opDivide:
		dt := o.dst.DType()
		return issued{}, s.launch(divideKernel(dt), o.dst, hw.Slice{}, divisor(dt, o.n))
	case opSend:
		m := &message{from: s.dev, dt: o.src.DType(), n: o.src.Len, pool: own}
		bytes := o.src.Bytes()
		if bytes == 0 {
			return issued{msg: m}, nil
		}
		var err error
		if m.staging, m.class, err = own.getMem(d, bytes); err != nil {
			return issued{}, err
		}
		src := o.src.Buf.(*Buffer).addr(o.src.Off)
		if err := d.check("cuMemcpyDtoDAsync_v2(send to staging)", d.cuMemcpyDtoDAsync(m.staging, src, uintptr(bytes), s.cu)); err != nil {
			own.putMem(m.staging, m.class)
			return issued{}, err
		}
		if m.ev, err = own.getEvent(d, false); err != nil {
			return issued{}, err
		}
		if err := d.check("cuEventRecord(sent)", d.cuEventRecord(m.ev, s.cu)); err != nil {
			return issued{}, err
		}
		return issued{msg: m}, nil
	case opRecv:
		bytes := o.dst.Bytes()
		if bytes == 0 {
			return issued{}, nil
		}
		if err := d.check("cuStreamWaitEvent(message)", d.cuStreamWaitEvent(s.cu, msg.ev, 0)); err != nil {
			return issued{}, err
		}
		dst := o.dst.Buf.(*Buffer).addr(o.dst.Off)
		var err error
		if msg.pool.g == g {
			err = d.check("cuMemcpyDtoDAsync_v2(staging to recv)", d.cuMemcpyDtoDAsync(dst, msg.staging, uintptr(bytes), s.cu))
		} else {
			err = d.check("cuMemcpyPeerAsync(staging to recv)", d.cuMemcpyPeerAsync(dst, g.ctx, msg.staging, msg.pool.g.ctx, uintptr(bytes), s.cu))
		}
		if err != nil {
			return issued{}, err
		}
		marker, err := own.getEvent(d, false)
		if err != nil {
			return issued{}, err
		}
		if err := d.check("cuEventRecord(received)", d.cuEventRecord(marker, s.cu)); err != nil {
			return issued{}, err
		}
		s.releases = append(s.releases, release{marker: marker, markerPool: own, msg: msg})
		return issued{}, nil
	case opRecord:
		ev, err := own.getEvent(d, true)
		if err != nil {
			return issued{}, err
		}
		if err := d.check("cuEventRecord", d.cuEventRecord(ev, s.cu)); err != nil {
			own.putEvent(ev, true)
			return issued{}, err
		}
		return issued{ev: ev, pool: own}, nil
	case opWait:
		return issued{}, d.check("cuStreamWaitEvent", d.cuStreamWaitEvent(s.cu, waitOn, 0))
	case opHost:
		return issued{}, o.host(s.cu)
	}
	return issued{}, fmt.Errorf("unknown op kind %d", o.kind)
}

// copy issues dst = src on the stream. Overlapping ranges go through a
// staging block, as memmove would.
func (s *Stream) copy(dst, src hw.Slice) error {
	bytes := dst.Bytes()
	if bytes == 0 {
		return nil
	}
	d := s.dev.h.d
	da, sa := dst.Buf.(*Buffer).addr(dst.Off), src.Buf.(*Buffer).addr(src.Off)
	if da == sa {
		return nil
	}
	if da < sa+uint64(bytes) && sa < da+uint64(bytes) {
		own := s.dev.h.pool(s.dev.g)
		tmp, class, err := own.getMem(d, bytes)
		if err != nil {
			return err
		}
		err = errors.Join(
			d.check("cuMemcpyDtoDAsync_v2(overlap, to staging)", d.cuMemcpyDtoDAsync(tmp, sa, uintptr(bytes), s.cu)),
			d.check("cuMemcpyDtoDAsync_v2(overlap, from staging)", d.cuMemcpyDtoDAsync(da, tmp, uintptr(bytes), s.cu)))
		if err != nil {
			return err
		}
		marker, err := own.getEvent(d, false)
		if err != nil {
			return err
		}
		s.releases = append(s.releases, release{marker: marker, markerPool: own, msg: &message{staging: tmp, class: class, pool: own}})
		return d.check("cuEventRecord(copied)", d.cuEventRecord(marker, s.cu))
	}
	return d.check("cuMemcpyDtoDAsync_v2", d.cuMemcpyDtoDAsync(da, sa, uintptr(bytes), s.cu))
}

// pollReleases recycles staging blocks and events whose copies have run.
func (s *Stream) pollReleases() error {
	d := s.dev.h.d
	n := 0
	for _, r := range s.releases {
		res := d.cuEventQuery(r.marker)
		if res == cudaErrorNotReady {
			break
		}
		if err := d.check("cuEventQuery", res); err != nil {
			return err
		}
		if r.markerPool != nil {
			r.markerPool.putEvent(r.marker, false)
		}
		if m := r.msg; m != nil {
			m.pool.putMem(m.staging, m.class)
			if m.ev != 0 {
				m.pool.putEvent(m.ev, false)
			}
		}
		n++
	}
	s.releases = s.releases[n:]
	return nil
}

// pool returns the world's pool on g.
func (h *hub) pool(g *gpu) *pool {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.pools[g]
	if p == nil {
		p = newPool(g)
		h.pools[g] = p
	}
	return p
}

// DeadlockError reports streams that can never finish: each is blocked on
// the host waiting for a message nobody will send or an event record that
// no stream will reach. It wraps hw.ErrDeadlock.
type DeadlockError struct {
	Blocked []BlockedStream
}

// BlockedStream is one stream in a DeadlockError.
type BlockedStream = hw.BlockedStream

func (e *DeadlockError) Error() string {
	if e == nil {
		return "<nil>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cuda: deadlock: %d stream(s) can never finish:", len(e.Blocked))
	for _, s := range e.Blocked {
		fmt.Fprintf(&b, "\n  rank %d (%s) stream %d blocked at op #%d: %s (%d more queued)", s.Rank, s.Device, s.Stream, s.Op, s.Waiting, s.Pending)
	}
	return b.String()
}

func (e *DeadlockError) Unwrap() error { return hw.ErrDeadlock }

// deadlock returns the world's deadlock, or nil while any stream can still
// move: one is inside a driver call, has a failure to skip through, or has
// a head op it can issue. The caller holds the hub lock.
func (h *hub) deadlock() *DeadlockError {
	var blocked []BlockedStream
	for _, s := range h.streams {
		if s.inflight {
			return nil
		}
		if len(s.queue) == 0 {
			continue
		}
		o := s.queue[0]
		if s.err != nil || h.ready(o) {
			return nil
		}
		why := o.String()
		switch o.kind {
		case opRecv:
			why += ": no such message has been sent"
		case opWait:
			why += ": that record has not been issued by its stream"
		case opNative:
			why += ": " + o.native.waitingFor()
		}
		blocked = append(blocked, BlockedStream{Rank: s.dev.rank, Device: s.dev.name, Stream: s.id,
			Op: o.index, Waiting: why, Pending: len(s.queue) - 1})
	}
	if len(blocked) == 0 {
		return nil
	}
	return &DeadlockError{Blocked: blocked}
}
