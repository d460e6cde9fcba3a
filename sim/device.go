package sim

import (
	"fmt"
	"math"

	"github.com/commsim/commsim/hw"
)

// Device is one simulated GPU. Its reductions run on a compute unit with the
// topology's reduce bandwidth, shared fairly by the device's streams.
type Device struct {
	c           *Cluster
	rank        int
	node        int
	name        string
	reducer     link
	reducerPath []*link         // just &reducer, so flows need no new slice
	inbox       inbox           // messages arrived from peers, by sender and tag
	routes      *[8]cachedRoute // recent routes from here, by a hash of the peer; made on first use
	leaf        leafLink        // the device's only link, if it has one
	streams     int             // made on the device
	events      int             // made on the device: an event's id

	stalledUntil Time    // RankStall: no operation starts before this
	computeSpeed float64 // SlowCompute: fraction of nominal speed left; 0 is nominal
	crashed      bool
	crashedAt    Time
}

var _ hw.Device = (*Device)(nil)

// Kind is "sim".
func (d *Device) Kind() string { return "sim" }

// Name is "sim:" followed by the topology node's name; "" for a Device
// not made.
func (d *Device) Name() string {
	if d == nil {
		return ""
	}
	return d.name
}

// Rank is the device's rank in the cluster's world; 0 for a Device not
// made.
func (d *Device) Rank() int {
	if d == nil {
		return 0
	}
	return d.rank
}

// Node is the device's node index in the topology; 0 for a Device not
// made.
func (d *Device) Node() int {
	if d == nil {
		return 0
	}
	return d.node
}

// made refuses a Device that NewCluster did not make.
func (d *Device) made() error {
	if d == nil || d.c == nil {
		return notMade("Device", "sim.NewCluster")
	}
	return nil
}

// Alloc returns a zeroed buffer, or a phantom one in timing-only mode.
func (d *Device) Alloc(dt hw.DType, n int) (hw.Buffer, error) {
	if err := d.made(); err != nil {
		return nil, err
	}
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("sim: %s: alloc: %w", d.name, hw.ErrClosed)
	}
	if !dt.Valid() {
		return nil, fmt.Errorf("sim: %s: alloc: %w: invalid dtype %d", d.name, hw.ErrBadArgument, dt)
	}
	if n < 0 {
		return nil, fmt.Errorf("sim: %s: alloc: %w: negative length %d", d.name, hw.ErrBadArgument, n)
	}
	if n > math.MaxInt64/dt.Size() {
		return nil, fmt.Errorf("sim: %s: alloc: %w: %d x %s is over the limit of %d bytes", d.name, hw.ErrBadArgument, n, dt, int64(math.MaxInt64))
	}
	b := &Buffer{dev: d, dt: dt, n: n}
	if c.cfg.TimingOnly {
		return b, nil
	}
	size := int64(n) * int64(dt.Size())
	if size > c.cfg.MaxDataBytes-c.data {
		return nil, fmt.Errorf("sim: %s: alloc %d x %s = %d bytes: the cluster holds %d bytes of data already, and its limit is %d; use timing-only mode for experiments this large",
			d.name, n, dt, size, c.data, c.cfg.MaxDataBytes)
	}
	b.data = make([]byte, size)
	c.data += size
	return b, nil
}

// NewStream returns a new stream on the device.
func (d *Device) NewStream() (hw.Stream, error) {
	if err := d.made(); err != nil {
		return nil, err
	}
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("sim: %s: new stream: %w", d.name, hw.ErrClosed)
	}
	s := &Stream{dev: d, id: len(c.streams), onDevice: d.streams}
	d.streams++
	// The stream's channel limits its messages with a Wire Rate; its id
	// follows the devices' reduction units' among the ids no link has.
	s.channel = link{id: -1 - len(c.devices) - s.id, name: fmt.Sprintf("%s.stream%d", d.name, s.onDevice), capacity: math.Inf(1)}
	c.streams = append(c.streams, s)
	return s, nil
}

// NewEvent returns a new event.
func (d *Device) NewEvent() (hw.Event, error) {
	if err := d.made(); err != nil {
		return nil, err
	}
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("sim: %s: new event: %w", d.name, hw.ErrClosed)
	}
	d.events++
	return &Event{dev: d, id: d.events}, nil
}

// Buffer is simulated device memory. In timing-only mode it is a phantom
// with no data.
type Buffer struct {
	dev   *Device
	dt    hw.DType
	n     int
	data  []byte // nil for phantoms
	freed bool
}

var _ hw.Buffer = (*Buffer)(nil)

// made refuses a Buffer that Device.Alloc did not make.
func (b *Buffer) made() error {
	if b == nil || b.dev == nil {
		return notMade("Buffer", "Device.Alloc")
	}
	return nil
}

// Device is the buffer's device; nil for a Buffer not made.
func (b *Buffer) Device() hw.Device {
	if b.made() != nil {
		return nil // not a typed nil, which would compare != nil
	}
	return b.dev
}

// DType is 0 for a Buffer not made.
func (b *Buffer) DType() hw.DType {
	if b == nil {
		return 0
	}
	return b.dt
}

// Len is 0 for a Buffer not made.
func (b *Buffer) Len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// Phantom is false for a Buffer not made: it has no timing-only cluster.
func (b *Buffer) Phantom() bool { return b.made() == nil && b.dev.c.cfg.TimingOnly }

// Freed reports whether the buffer was freed (hw.FreedReporter).
func (b *Buffer) Freed() bool {
	if b.made() != nil {
		return false
	}
	c := b.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return b.freed
}

// Write copies host bytes into the buffer.
func (b *Buffer) Write(src []byte) error {
	if err := b.made(); err != nil {
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

// Read copies the buffer to host bytes.
func (b *Buffer) Read(dst []byte) error {
	if err := b.made(); err != nil {
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
		return fmt.Errorf("sim: %s: %s: %w", b.dev.name, what, hw.ErrClosed)
	case b.freed:
		return fmt.Errorf("sim: %s: %s: %w", b.dev.name, what, hw.ErrFreed)
	case b.Phantom():
		return fmt.Errorf("sim: %s: %s of %d x %s: %w", b.dev.name, what, b.n, b.dt, hw.ErrPhantom)
	case n != len(b.data):
		return fmt.Errorf("sim: %s: %s: %w: buffer holds %d bytes (%d x %s), host slice %d",
			b.dev.name, what, hw.ErrSizeMismatch, len(b.data), b.n, b.dt, n)
	}
	return nil
}

// Free releases the buffer's memory.
func (b *Buffer) Free() error {
	if err := b.made(); err != nil {
		return err
	}
	c := b.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.freed {
		return fmt.Errorf("sim: %s: free: %w", b.dev.name, hw.ErrFreed)
	}
	b.freed = true
	c.data -= int64(len(b.data))
	b.data = nil
	return nil
}

// Event is a simulated event. It counts Records enqueued and completed, so
// a Wait knows which Record it waits for.
type Event struct {
	dev       *Device
	id        int // among its device's events, so that no goroutine's turn shows
	enqueued  int // Records enqueued so far
	completed int // Records completed so far
	at        Time
	err       error // set when a Record was skipped because its stream failed
	waiters   []*Stream
}

var _ hw.Event = (*Event)(nil)

// made refuses an Event that Device.NewEvent did not make.
func (e *Event) made() error {
	if e == nil || e.dev == nil {
		return notMade("Event", "Device.NewEvent")
	}
	return nil
}

// Device is the device that created the event; nil for an Event not
// made.
func (e *Event) Device() hw.Device {
	if e.made() != nil {
		return nil // not a typed nil, which would compare != nil
	}
	return e.dev
}

// ElapsedSince returns the simulated seconds from start to e.
func (e *Event) ElapsedSince(start hw.Event) (float64, error) {
	if err := e.made(); err != nil {
		return 0, err
	}
	c := e.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := start.(*Event)
	if !ok || s.made() != nil || s.dev.c != c {
		return 0, fmt.Errorf("sim: elapsed: %w: start event is not from this cluster", hw.ErrBadArgument)
	}
	for _, ev := range []*Event{s, e} {
		if ev.completed == 0 {
			return 0, fmt.Errorf("sim: elapsed: event %d on %s: %w", ev.id, ev.dev.name, hw.ErrNotReady)
		}
	}
	return (e.at - s.at).Seconds(), nil
}

// Time is the simulated time of the event's latest completed Record.
func (e *Event) Time() (Time, error) {
	if err := e.made(); err != nil {
		return 0, err
	}
	c := e.dev.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.completed == 0 {
		return 0, fmt.Errorf("sim: event %d on %s: %w", e.id, e.dev.name, hw.ErrNotReady)
	}
	return e.at, nil
}
