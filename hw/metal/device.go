package metal

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/commsim/commsim/hw"
)

// cluster is the state shared by the virtual ranks of one NewWorld: one
// GPU and one lock. A single mutex guards every device, buffer, stream,
// event and mailbox of the cluster, and a single condition variable is
// broadcast on every change that a waiter could care about. Encoding a
// command is microseconds of work, so one lock costs little, and it makes
// the scheduler's invariants (below) easy to keep.
//
// The invariant that keeps the GPU from hanging: a command buffer waits on
// a shared-event value only after the command buffer that signals it has
// been committed. Host-side waits (a Recv whose message has not been sent,
// a Wait on a Record not yet committed) block the stream's worker
// goroutine, never the GPU. So every committed command buffer finishes,
// and every stuck state is visible on the host, where deadlock detection
// and Abort can see it.
type cluster struct {
	g    gpu
	mu   sync.Mutex
	cond *sync.Cond
	wg   sync.WaitGroup // workers and completers

	devs    []*Device
	streams []*Stream
	buffers map[*Buffer]struct{} // live ones, released at close
	mail    map[mailKey]*mailbox
	pool    stagingPool
	events  int
	closed  bool

	// epoch counts progress (enqueues, processed ops, completed batches,
	// failures); deadlock detection needs it unchanged for a while.
	epoch         uint64
	syncing       int  // Synchronize calls waiting
	detecting     bool // the deadlock detector is running
	deadlockAfter time.Duration
}

// progress records a change and wakes every waiter. Callers hold c.mu.
func (c *cluster) progress() {
	c.epoch++
	c.cond.Broadcast()
}

// config holds what Options set.
type config struct {
	deadlockAfter time.Duration
}

// Option configures NewWorld.
type Option func(*config)

// DefaultDeadlockAfter is how long every stream with work must stay
// blocked on the host, with nothing enqueued and no GPU work in flight,
// while a Synchronize waits, before the world reports a deadlock. A program
// whose ranks enqueue from different goroutines, with host-side gaps longer
// than this while another rank already synchronizes, should set a longer
// delay (or none) with WithDeadlockAfter.
const DefaultDeadlockAfter = 10 * time.Second

// WithDeadlockAfter sets how long a world must look deadlocked before
// Synchronize reports it (see DefaultDeadlockAfter); d <= 0 turns
// detection off, leaving stuck work to Abort. The wait exists because the
// backend cannot know whether another goroutine is about to enqueue the
// Send or Record that a blocked stream waits for.
func WithDeadlockAfter(d time.Duration) Option {
	return func(c *config) { c.deadlockAfter = d }
}

// newCluster builds a world of p virtual ranks on g. The release function
// closes it.
func newCluster(g gpu, p int, opts []Option) (*hw.World, func() error, error) {
	if p < 1 {
		return nil, nil, fmt.Errorf("metal: new world: %w: %d ranks (want at least 1)", hw.ErrBadArgument, p)
	}
	cfg := config{deadlockAfter: DefaultDeadlockAfter}
	for _, o := range opts {
		o(&cfg)
	}
	c := &cluster{g: g, buffers: map[*Buffer]struct{}{}, mail: map[mailKey]*mailbox{}, deadlockAfter: cfg.deadlockAfter}
	c.cond = sync.NewCond(&c.mu)
	c.pool.free = map[int][]gpuBuffer{}
	devs := make([]hw.Device, p)
	for r := range p {
		d := &Device{c: c, rank: r, name: fmt.Sprintf("metal:%s/r%d", g.name(), r)}
		c.devs = append(c.devs, d)
		devs[r] = d
	}
	w, err := hw.NewWorld(devs)
	if err != nil {
		return nil, nil, err
	}
	return w, c.close, nil
}

// close stops every stream, waits for the GPU to finish what was
// committed, and releases every Metal object of the world. Later calls on
// its devices return errors wrapping hw.ErrClosed.
func (c *cluster) close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	for _, s := range c.streams {
		if s.err == nil {
			s.stop(fmt.Errorf("metal: %s stream %d: %w", s.dev.name, s.id, hw.ErrClosed))
		}
	}
	c.progress()
	c.mu.Unlock()

	c.wg.Wait() // workers exit; completers drain what the GPU still runs

	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.streams {
		s.q.release()
		s.tl.release()
	}
	for b := range c.buffers {
		b.freed, b.data = true, nil
		b.gb.release()
	}
	for k, mb := range c.mail {
		for _, m := range mb.msgs {
			c.pool.put(m.staging)
		}
		delete(c.mail, k)
	}
	c.pool.releaseAll()
	return nil
}

// Device is one virtual rank: its own buffers, streams (each a Metal
// command queue) and events, on the GPU it shares with the world's other
// ranks.
type Device struct {
	c       *cluster
	rank    int
	name    string
	aborted error // set by Abort
}

var (
	_ hw.Device  = (*Device)(nil)
	_ hw.Aborter = (*Device)(nil)
)

// Kind is "metal".
func (d *Device) Kind() string { return "metal" }

// Name is "metal:gpu0/r" followed by the rank; "" for a Device not
// opened.
func (d *Device) Name() string {
	if d == nil {
		return ""
	}
	return d.name
}

// Rank is the device's virtual rank in the world NewWorld made; 0 for a
// Device not opened.
func (d *Device) Rank() int {
	if d == nil {
		return 0
	}
	return d.rank
}

// opened refuses a Device that NewWorld did not make.
func (d *Device) opened() error {
	if d == nil || d.c == nil {
		return notOpened("Device", "metal.NewWorld")
	}
	return nil
}

// usable reports why the device cannot take calls. Callers hold c.mu.
func (d *Device) usable(what string) error {
	switch {
	case d.c.closed:
		return fmt.Errorf("metal: %s: %s: %w", d.name, what, hw.ErrClosed)
	case d.aborted != nil:
		return fmt.Errorf("metal: %s: %s: %w", d.name, what, d.aborted)
	}
	return nil
}

// Alloc returns a zeroed buffer in shared storage. f64 is refused (ErrF64).
func (d *Device) Alloc(dt hw.DType, n int) (hw.Buffer, error) {
	if err := d.opened(); err != nil {
		return nil, err
	}
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := d.usable("alloc"); err != nil {
		return nil, err
	}
	if err := checkDType(dt); err != nil {
		return nil, fmt.Errorf("metal: %s: alloc %d x %s: %w", d.name, n, dt, err)
	}
	if n < 0 || int64(n) > maxKernelElems {
		return nil, fmt.Errorf("metal: %s: alloc: %w: length %d (want 0 to %d elements)", d.name, hw.ErrBadArgument, n, int64(maxKernelElems))
	}
	size := n * dt.Size()
	// Metal has no empty buffers; an empty hw buffer still owns one.
	gb, err := c.g.newBuffer(max(size, 1))
	if err != nil {
		return nil, fmt.Errorf("metal: %s: alloc %d x %s (%d bytes): %w", d.name, n, dt, size, err)
	}
	data := gb.bytes()[:size]
	clear(data) // hw promises zeroed buffers; do not rely on Metal for it
	b := &Buffer{dev: d, dt: dt, n: n, gb: gb, data: data}
	c.buffers[b] = struct{}{}
	return b, nil
}

// NewStream returns a stream with its own command queue, shared event,
// worker and completer.
func (d *Device) NewStream() (hw.Stream, error) {
	if err := d.opened(); err != nil {
		return nil, err
	}
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := d.usable("new stream"); err != nil {
		return nil, err
	}
	q, err := c.g.newQueue()
	if err != nil {
		return nil, fmt.Errorf("metal: %s: new stream: %w", d.name, err)
	}
	tl, err := c.g.newTimeline()
	if err != nil {
		q.release()
		return nil, fmt.Errorf("metal: %s: new stream: %w", d.name, err)
	}
	s := &Stream{dev: d, id: len(c.streams), q: q, tl: tl}
	c.streams = append(c.streams, s)
	c.wg.Add(2)
	go s.work()
	go s.complete()
	return s, nil
}

// NewEvent returns an event that any stream of the world can record and
// wait on.
func (d *Device) NewEvent() (hw.Event, error) {
	if err := d.opened(); err != nil {
		return nil, err
	}
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := d.usable("new event"); err != nil {
		return nil, err
	}
	c.events++
	return &Event{dev: d, id: c.events}, nil
}

// Abort cancels the device's work: every stream of the device fails with
// an error wrapping reason, host-side waits end, records its streams had
// not reached fail their waiters, and pending and later Synchronize calls
// return at once. Command buffers already committed cannot be cancelled in
// Metal; they finish on their own (none waits on a signal that was not
// committed) and are released by the completers. The device takes no more
// work; close the world to free it.
func (d *Device) Abort(reason error) error {
	if err := d.opened(); err != nil {
		return err
	}
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("metal: %s: abort: %w", d.name, hw.ErrClosed)
	}
	if d.aborted != nil {
		return nil
	}
	if reason == nil {
		reason = errors.New("no reason given")
	}
	d.aborted = fmt.Errorf("aborted: %w", reason)
	for _, s := range c.streams {
		if s.dev == d && s.err == nil {
			s.stop(fmt.Errorf("metal: rank %d (%s) stream %d: %w", d.rank, d.name, s.id, d.aborted))
		}
	}
	c.progress()
	return nil
}

// Buffer is device memory in shared storage: the host reads and writes it
// with memcpy through the buffer's contents pointer.
type Buffer struct {
	dev   *Device
	dt    hw.DType
	n     int
	gb    gpuBuffer
	data  []byte // the first n*size bytes of gb
	freed bool
}

var _ hw.Buffer = (*Buffer)(nil)

// opened refuses a Buffer that Device.Alloc did not make.
func (b *Buffer) opened() error {
	if b == nil || b.dev == nil {
		return notOpened("Buffer", "Device.Alloc")
	}
	return nil
}

// Device is the buffer's device; nil for a Buffer not opened.
func (b *Buffer) Device() hw.Device {
	if b.opened() != nil {
		return nil // not a typed nil, which would compare != nil
	}
	return b.dev
}

// DType is 0 for a Buffer not opened.
func (b *Buffer) DType() hw.DType {
	if b == nil {
		return 0
	}
	return b.dt
}

// Len is 0 for a Buffer not opened.
func (b *Buffer) Len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// Phantom is false: Metal buffers always hold data.
func (b *Buffer) Phantom() bool { return false }

// Freed reports whether the buffer was freed (hw.FreedReporter).
func (b *Buffer) Freed() bool {
	if b.opened() != nil {
		return false
	}
	c := b.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return b.freed
}

// Write copies src into the buffer with the CPU. It is synchronous and
// sees only completed GPU work: synchronize the streams that use the
// buffer first, or the GPU may overwrite what was written.
func (b *Buffer) Write(src []byte) error {
	if err := b.opened(); err != nil {
		return err
	}
	c := b.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := b.hostAccess("write", len(src)); err != nil {
		return err
	}
	copy(b.data, src)
	return nil
}

// Read copies the buffer into dst with the CPU. It sees only GPU work that
// has completed: synchronize first.
func (b *Buffer) Read(dst []byte) error {
	if err := b.opened(); err != nil {
		return err
	}
	c := b.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := b.hostAccess("read", len(dst)); err != nil {
		return err
	}
	copy(dst, b.data)
	return nil
}

func (b *Buffer) hostAccess(what string, n int) error {
	switch {
	case b.dev.c.closed:
		return fmt.Errorf("metal: %s: %s: %w", b.dev.name, what, hw.ErrClosed)
	case b.freed:
		return fmt.Errorf("metal: %s: %s: %w", b.dev.name, what, hw.ErrFreed)
	case n != len(b.data):
		return fmt.Errorf("metal: %s: %s: %w: buffer holds %d bytes (%d x %s), host slice %d",
			b.dev.name, what, hw.ErrSizeMismatch, len(b.data), b.n, b.dt, n)
	}
	return nil
}

// Free releases the MTLBuffer. Command buffers already committed keep it
// alive until they finish (Metal retains what they use); operations still
// queued that name it fail with hw.ErrFreed.
func (b *Buffer) Free() error {
	if err := b.opened(); err != nil {
		return err
	}
	c := b.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("metal: %s: free: %w", b.dev.name, hw.ErrClosed)
	}
	if b.freed {
		return fmt.Errorf("metal: %s: free: %w", b.dev.name, hw.ErrFreed)
	}
	b.freed = true
	b.data = nil
	delete(c.buffers, b)
	b.gb.release()
	return nil
}

// Event is an hw.Event. Each Record of it is a signalPoint: a value of
// the recording stream's shared event. A Wait captures the most recent
// Record enqueued when Wait is called, as hw requires.
type Event struct {
	dev      *Device
	id       int
	enqueued int          // Records enqueued so far
	last     *signalPoint // the most recent Record enqueued
	done     *signalPoint // the most recent Record (by order of enqueueing) that completed
}

var _ hw.Event = (*Event)(nil)

// opened refuses an Event that Device.NewEvent did not make.
func (e *Event) opened() error {
	if e == nil || e.dev == nil {
		return notOpened("Event", "Device.NewEvent")
	}
	return nil
}

// Device is the device that created the event; nil for an Event not
// opened.
func (e *Event) Device() hw.Device {
	if e.opened() != nil {
		return nil // not a typed nil, which would compare != nil
	}
	return e.dev
}

// ElapsedSince returns the seconds between the GPU end times of the
// command buffers that completed start's and e's latest Records (see the
// package doc for the clock and its resolution).
func (e *Event) ElapsedSince(start hw.Event) (float64, error) {
	if err := e.opened(); err != nil {
		return 0, err
	}
	c := e.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := start.(*Event)
	if !ok || s.opened() != nil || s.dev.c != c {
		return 0, fmt.Errorf("metal: elapsed: %w: start event is not from this world", hw.ErrBadArgument)
	}
	for _, ev := range []*Event{s, e} {
		if ev.done == nil {
			return 0, fmt.Errorf("metal: elapsed: event %d on %s: %w", ev.id, ev.dev.name, hw.ErrNotReady)
		}
	}
	return e.done.time - s.done.time, nil
}

// signalPoint is one value of a stream's shared event: a Record of an
// Event, or the end of a Send's copy into its staging buffer.
type signalPoint struct {
	ev        *Event  // nil for a send
	gen       int     // the Record's number within ev, from 1
	s         *Stream // the stream that signals it
	value     uint64  // the shared-event value, set when committed
	committed bool    // its command buffer has been committed
	done      bool    // its command buffer completed without error
	completed bool    // its command buffer completed, with or without error
	err       error   // it will never be reached, and why
	time      float64 // GPU end time of its command buffer, once done
	// release is staging to hand back to the pool once its command buffer
	// completes: a send's, whose receive failed while the GPU may still
	// be copying into it.
	release []*staging
}

func (p *signalPoint) String() string {
	if p.ev != nil {
		return fmt.Sprintf("record #%d of event %d (%s) on %s stream %d", p.gen, p.ev.id, p.ev.dev.name, p.s.dev.name, p.s.id)
	}
	return fmt.Sprintf("send from %s stream %d", p.s.dev.name, p.s.id)
}

// stagingPool recycles the shared buffers that carry sends, by size class
// (powers of two from 256 bytes), keeping at most stagingKeep bytes idle.
type stagingPool struct {
	free map[int][]gpuBuffer
	idle int
}

const stagingKeep = 256 << 20

// staging is a pooled buffer and its size class.
type staging struct {
	buf   gpuBuffer
	class int
}

func (p *stagingPool) get(g gpu, n int) (*staging, error) {
	class := 256
	for class < n {
		class <<= 1
	}
	if l := p.free[class]; len(l) > 0 {
		b := l[len(l)-1]
		p.free[class] = l[:len(l)-1]
		p.idle -= class
		return &staging{b, class}, nil
	}
	b, err := g.newBuffer(class)
	if err != nil {
		return nil, err
	}
	return &staging{b, class}, nil
}

func (p *stagingPool) put(s *staging) {
	if s == nil {
		return
	}
	if p.idle+s.class > stagingKeep {
		s.buf.release()
		return
	}
	p.free[s.class] = append(p.free[s.class], s.buf)
	p.idle += s.class
}

func (p *stagingPool) releaseAll() {
	for class, l := range p.free {
		for _, b := range l {
			b.release()
		}
		delete(p.free, class)
	}
	p.idle = 0
}

// mailKey names the messages from one device to another with one tag.
type mailKey struct {
	from, to *Device
	tag      uint64
}

// mailbox holds sent messages not yet received, in send order.
type mailbox struct{ msgs []*message }

// post appends m to the mailbox of (from, to, tag). Callers hold c.mu and
// announce progress, which wakes the receiver.
func (c *cluster) post(from, to *Device, tag uint64, m *message) {
	k := mailKey{from: from, to: to, tag: tag}
	mb := c.mail[k]
	if mb == nil {
		mb = &mailbox{}
		c.mail[k] = mb
	}
	mb.msgs = append(mb.msgs, m)
}

// message is a send whose copy into staging has been committed: the
// receiver waits for sig on the GPU, then copies staging into its buffer.
// A send that failed, or that its failed stream skipped, is a message whose
// sig has an error: the receiver fails with it.
type message struct {
	dt      hw.DType
	n       int
	staging *staging // nil for an empty message
	sig     *signalPoint
}
