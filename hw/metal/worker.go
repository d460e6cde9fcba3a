package metal

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/commsim/commsim/hw"
)

const (
	// maxBatchOps bounds the ops in one command buffer, so a long run of
	// local work still reaches the GPU in pieces.
	maxBatchOps = 64
	// maxInflight bounds a stream's committed, unfinished command buffers,
	// below Metal's default of 64 per queue: commandBuffer would block
	// beyond it, and it must not block while the world's lock is held.
	maxInflight = 32
)

// errStopped is returned inside the worker when its stream failed, or the
// world closed, while it waited: the op is skipped, not failed again.
var errStopped = errors.New("stream stopped")

// batch is one command buffer: the ops encoded in it, and what to do when
// it completes.
type batch struct {
	g          gpuBatch
	ops        []*op
	dispatches int
	sigs       []*signalPoint // signaled at its end
	deps       []*signalPoint // waited for on the GPU
	staging    []*staging     // receives' staging buffers, recycled after it
}

// work is the stream's worker goroutine: it encodes ops in FIFO order.
// It holds the world's lock except while it waits.
func (s *Stream) work() {
	c := s.dev.c
	defer c.wg.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for s.head == len(s.ops) && !c.closed {
			s.flush()
			c.cond.Wait()
		}
		if c.closed {
			s.flush()
			s.workerDone = true
			c.progress()
			return
		}
		o := s.ops[s.head]
		s.ops[s.head] = nil
		s.head++
		if s.head == len(s.ops) {
			s.ops, s.head = s.ops[:0], 0
		}
		if s.err == nil {
			if err := s.do(o); err != nil {
				if !errors.Is(err, errStopped) {
					s.stop(fmt.Errorf("metal: rank %d (%s) stream %d, op #%d %s: %w", s.dev.rank, s.dev.name, s.id, o.index, o, err))
				}
				s.skip(o)
			}
		} else {
			s.skip(o)
		}
		c.progress()
	}
}

// skip counts o as finished without running it; a Record that will now
// never happen fails its waiters, and a Send its receiver.
func (s *Stream) skip(o *op) {
	s.finished++
	switch {
	case o.kind == opRecord && o.sig.err == nil:
		o.sig.err = s.err
	case o.kind == opSend:
		s.dev.c.post(s.dev, o.peer, o.tag, &message{sig: &signalPoint{s: s, err: s.err}})
	}
}

// stop fails the stream with err: the rest of its queue will be skipped,
// and the Records in it fail their waiters now. Callers hold c.mu.
func (s *Stream) stop(err error) {
	if s.err != nil {
		return
	}
	s.err = err
	for _, o := range s.ops[s.head:] {
		if o.kind == opRecord && o.sig.err == nil {
			o.sig.err = err
		}
	}
	// What was encoded before the failure is valid work: let it run, so
	// Synchronize can wait for the GPU to let go of the buffers.
	s.flush()
	s.dev.c.progress()
}

// block waits on the host for o's condition; the caller loops. It commits
// the open batch first, so earlier work runs meanwhile.
func (s *Stream) block(o *op) error {
	s.flush()
	s.blockedOn = o
	s.dev.c.cond.Wait()
	s.blockedOn = nil
	if s.err != nil || s.dev.c.closed {
		return errStopped
	}
	return nil
}

// batch returns the open batch, starting one (once fewer than maxInflight
// are in flight) if there is none.
func (s *Stream) batch() (*batch, error) {
	if s.open != nil {
		return s.open, nil
	}
	c := s.dev.c
	for s.inflight >= maxInflight {
		c.cond.Wait()
		if s.err != nil || c.closed {
			return nil, errStopped
		}
	}
	g, err := s.q.newBatch()
	if err != nil {
		return nil, err
	}
	s.open = &batch{g: g}
	return s.open, nil
}

// add counts o in b, committing b when it is full.
func (s *Stream) add(b *batch, o *op) {
	b.ops = append(b.ops, o)
	if len(b.ops) >= maxBatchOps {
		s.flush()
	}
}

// flush commits the open batch, if any.
func (s *Stream) flush() {
	b := s.open
	if b == nil {
		return
	}
	s.open = nil
	b.g.commit()
	s.committed = append(s.committed, b)
	s.inflight++
	s.dev.c.progress()
}

// signal ends the open batch (starting one if needed) with a signal of the
// stream's shared event and commits it, so that others may wait for it.
func (s *Stream) signal(b *batch, o *op, sig *signalPoint) {
	s.tlValue++
	sig.value = s.tlValue
	b.g.signal(s.tl, sig.value)
	b.sigs = append(b.sigs, sig)
	b.ops = append(b.ops, o)
	s.flush()
	sig.committed = true
}

func buf(sl hw.Slice) *Buffer { return sl.Buf.(*Buffer) }

// live checks, when an op runs, that its buffers were not freed after it
// was enqueued.
func live(sls ...hw.Slice) error {
	for _, sl := range sls {
		if buf(sl).freed {
			return hw.ErrFreed
		}
	}
	return nil
}

// do encodes o. It returns errStopped if the stream stopped while o waited.
func (s *Stream) do(o *op) error {
	switch o.kind {
	case opCopy:
		return s.copy(o, o.dst, o.src)
	case opReduce:
		if err := live(o.dst, o.src); err != nil {
			return err
		}
		k, err := reduceKernel(o.redop, o.dst.DType())
		if err != nil {
			return err
		}
		return s.dispatch(o, k, o.dst, buf(o.src).gb, uint32(o.src.Off))
	case opDivide:
		if err := live(o.dst); err != nil {
			return err
		}
		k, err := divideKernel(o.dst.DType())
		if err != nil {
			return err
		}
		return s.dispatchParams(o, k, buf(o.dst).gb, nil, kernelParams{
			N: uint32(o.dst.Len), QF: math.Float32bits(float32(o.n)), QI: uint64(o.n), DOff: uint32(o.dst.Off),
		})
	case opRecord:
		b, err := s.batch()
		if err != nil {
			return err
		}
		if b.dispatches == 0 {
			// A command buffer with no command may have no GPU times.
			if err := b.g.touch(); err != nil {
				return err
			}
			b.dispatches++
		}
		s.signal(b, o, o.sig)
		return nil
	case opWait:
		return s.wait(o)
	case opSend:
		return s.send(o)
	case opRecv:
		return s.recv(o)
	}
	return fmt.Errorf("unknown op kind %d", o.kind)
}

// dispatch encodes kernel k over o.dst (and src from element soff).
func (s *Stream) dispatch(o *op, k kernelID, dst hw.Slice, src gpuBuffer, soff uint32) error {
	return s.dispatchParams(o, k, buf(dst).gb, src, kernelParams{N: uint32(dst.Len), DOff: uint32(dst.Off), SOff: soff})
}

func (s *Stream) dispatchParams(o *op, k kernelID, dst, src gpuBuffer, p kernelParams) error {
	b, err := s.batch()
	if err != nil {
		return err
	}
	if p.N > 0 {
		if err := b.g.dispatch(k, dst, src, p); err != nil {
			return err
		}
		b.dispatches++
	}
	s.add(b, o)
	return nil
}

// copy encodes dst = src. Slices of one buffer that overlap without being
// equal go through a staging buffer, since the kernel's threads run in any
// order.
func (s *Stream) copy(o *op, dst, src hw.Slice) error {
	if err := live(dst, src); err != nil {
		return err
	}
	k, err := copyKernel(dst.DType())
	if err != nil {
		return err
	}
	overlap := dst.Buf == src.Buf && dst.Off != src.Off && dst.Off < src.Off+src.Len && src.Off < dst.Off+dst.Len
	if !overlap {
		if dst.Buf == src.Buf && dst.Off == src.Off {
			s.finished++ // copying a slice onto itself changes nothing
			return nil
		}
		return s.dispatch(o, k, dst, buf(src).gb, uint32(src.Off))
	}
	c := s.dev.c
	b, err := s.batch()
	if err != nil {
		return err
	}
	tmp, err := c.pool.get(c.g, src.Bytes())
	if err != nil {
		return err
	}
	// Dispatches of one compute pass run one after another, so the second
	// sees the first's writes.
	if err := b.g.dispatch(k, tmp.buf, buf(src).gb, kernelParams{N: uint32(src.Len), SOff: uint32(src.Off)}); err != nil {
		c.pool.put(tmp)
		return err
	}
	b.staging = append(b.staging, tmp)
	if err := b.g.dispatch(k, buf(dst).gb, tmp.buf, kernelParams{N: uint32(dst.Len), DOff: uint32(dst.Off)}); err != nil {
		return err
	}
	b.dispatches += 2
	s.add(b, o)
	return nil
}

// wait makes later work wait for o.sig on the GPU, once it is committed.
func (s *Stream) wait(o *op) error {
	dep := o.sig
	if dep == nil || dep.s == s {
		// Never recorded, or recorded earlier on this very queue, which
		// already orders it.
		s.finished++
		return nil
	}
	for !dep.committed && dep.err == nil {
		if err := s.block(o); err != nil {
			return err
		}
	}
	if dep.err != nil {
		return fmt.Errorf("the awaited %s failed: %w", dep, dep.err)
	}
	if dep.done {
		s.finished++
		return nil
	}
	b, err := s.batch()
	if err != nil {
		return err
	}
	b.g.waitFor(dep.s.tl, dep.value)
	b.deps = append(b.deps, dep)
	s.add(b, o)
	return nil
}

// send copies o.src into staging, signals, and posts the message.
func (s *Stream) send(o *op) error {
	if err := live(o.src); err != nil {
		return err
	}
	if o.peer.aborted != nil {
		return fmt.Errorf("peer rank %d (%s) was %w", o.peer.rank, o.peer.name, o.peer.aborted)
	}
	c := s.dev.c
	b, err := s.batch()
	if err != nil {
		return err
	}
	var stg *staging
	if n := o.src.Bytes(); n > 0 {
		if stg, err = c.pool.get(c.g, n); err != nil {
			return err
		}
		k, err := copyKernel(o.src.DType())
		if err != nil {
			c.pool.put(stg)
			return err
		}
		if err := b.g.dispatch(k, stg.buf, buf(o.src).gb, kernelParams{N: uint32(o.src.Len), SOff: uint32(o.src.Off)}); err != nil {
			c.pool.put(stg)
			return err
		}
		b.dispatches++
	}
	sig := &signalPoint{s: s}
	s.signal(b, o, sig)
	c.post(s.dev, o.peer, o.tag, &message{dt: o.src.DType(), n: o.src.Len, staging: stg, sig: sig})
	return nil
}

// recv waits on the host for the message, then on the GPU for its copy
// into staging, and copies it into o.dst.
func (s *Stream) recv(o *op) error {
	c := s.dev.c
	k := mailKey{from: o.peer, to: s.dev, tag: o.tag}
	for c.mail[k] == nil {
		if o.peer.aborted != nil {
			return fmt.Errorf("peer rank %d (%s) was %w before sending", o.peer.rank, o.peer.name, o.peer.aborted)
		}
		if err := s.block(o); err != nil {
			return err
		}
	}
	mb := c.mail[k]
	m := mb.msgs[0]
	mb.msgs[0] = nil
	if mb.msgs = mb.msgs[1:]; len(mb.msgs) == 0 {
		delete(c.mail, k) // plans use a fresh tag per step: keep the map small
	}
	fail := func(err error) error {
		// The sender's GPU may still be copying into the staging (a
		// failed point may belong to a batch still running): it goes
		// back to the pool, for another send to fill, only once the
		// sender's command buffer has completed.
		if m.staging != nil && !m.sig.completed {
			m.sig.release = append(m.sig.release, m.staging)
		} else {
			c.pool.put(m.staging)
		}
		return err
	}
	switch {
	case m.sig.err != nil:
		return fail(fmt.Errorf("%w (%s): %w", hw.ErrPeerFailed, m.sig, m.sig.err))
	case m.dt != o.dst.DType():
		return fail(fmt.Errorf("%w: message is %d x %s, receive buffer %d x %s", hw.ErrDTypeMismatch, m.n, m.dt, o.dst.Len, o.dst.DType()))
	case m.n != o.dst.Len:
		return fail(fmt.Errorf("%w: message is %d x %s, receive buffer %d x %s", hw.ErrSizeMismatch, m.n, m.dt, o.dst.Len, o.dst.DType()))
	}
	if err := live(o.dst); err != nil {
		return fail(err)
	}
	if m.staging == nil {
		s.finished++
		return nil
	}
	kern, err := copyKernel(m.dt)
	if err != nil {
		return fail(err)
	}
	b, err := s.batch()
	if err != nil {
		return fail(err)
	}
	if !m.sig.done {
		b.g.waitFor(m.sig.s.tl, m.sig.value)
		b.deps = append(b.deps, m.sig)
	}
	b.staging = append(b.staging, m.staging)
	if err := b.g.dispatch(kern, buf(o.dst).gb, m.staging.buf, kernelParams{N: uint32(o.dst.Len), DOff: uint32(o.dst.Off)}); err != nil {
		return err
	}
	b.dispatches++
	s.add(b, o)
	return nil
}

// complete is the stream's completer goroutine: it waits for committed
// batches in commit order, outside the world's lock.
func (s *Stream) complete() {
	c := s.dev.c
	defer c.wg.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for len(s.committed) == 0 {
			if s.workerDone {
				return
			}
			c.cond.Wait()
		}
		b := s.committed[0]
		s.committed[0] = nil
		s.committed = s.committed[1:]
		c.mu.Unlock()
		_, end, gerr := b.g.wait()
		c.mu.Lock()
		s.finish(b, end, gerr)
	}
}

// finish accounts for a completed batch. A batch fails if the GPU says so
// or if one of the points it waited for failed (its data would then be
// wrong even though the GPU ran it).
func (s *Stream) finish(b *batch, end float64, gerr error) {
	c := s.dev.c
	var cause error
	if gerr != nil {
		cause = fmt.Errorf("command buffer failed on the GPU: %w", gerr)
	}
	for _, d := range b.deps {
		// The GPU passed the wait, so d's command buffer has finished;
		// its completer is about to say how.
		for !d.done && d.err == nil {
			c.cond.Wait()
		}
		if cause == nil && d.err != nil {
			cause = fmt.Errorf("the awaited %s failed: %w", d, d.err)
		}
	}
	if cause != nil {
		s.stop(fmt.Errorf("metal: rank %d (%s) stream %d, %s: %w", s.dev.rank, s.dev.name, s.id, describe(b.ops), cause))
		s.poison(b)
	}
	for _, p := range b.sigs {
		p.completed = true
		for _, stg := range p.release {
			c.pool.put(stg)
		}
		p.release = nil
		if p.err != nil {
			continue
		}
		p.done, p.time = true, end
		if e := p.ev; e != nil && (e.done == nil || p.gen > e.done.gen) {
			e.done = p
		}
	}
	for _, stg := range b.staging {
		c.pool.put(stg)
	}
	s.finished += len(b.ops)
	s.inflight--
	b.g.release()
	c.progress()
}

// poison fails every point that b and the batches committed after it
// signal, then raises the shared event to the last committed value from
// the CPU, so that no GPU wait on this stream hangs. (Consumers check
// their dependencies in finish, so they fail too.)
func (s *Stream) poison(b *batch) {
	for _, bb := range append([]*batch{b}, s.committed...) {
		for _, p := range bb.sigs {
			if p.err == nil {
				p.err = s.err
			}
		}
	}
	s.tl.signalFromHost(s.tlValue)
}

// describe names the ops of a batch for an error.
func describe(ops []*op) string {
	switch len(ops) {
	case 0:
		return "empty command buffer"
	case 1:
		return fmt.Sprintf("op #%d %s", ops[0].index, ops[0])
	}
	names := make([]string, 0, 3)
	for _, o := range ops[:min(3, len(ops))] {
		names = append(names, o.String())
	}
	more := ""
	if len(ops) > 3 {
		more = ", …"
	}
	return fmt.Sprintf("ops #%d-#%d (%s%s)", ops[0].index, ops[len(ops)-1].index, strings.Join(names, "; "), more)
}
