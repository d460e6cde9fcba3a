//go:build linux || darwin

package cuda

import (
	"errors"
	"math/bits"
	"runtime"
	"sync"
)

// pool recycles one world's staging memory and CUevents on one GPU. Sends
// copy into staging and record an event per message, Records take an event
// per generation: allocating each afresh would put cuMemAlloc (which may
// synchronise the device) and cuEventCreate on every step of a plan.
// Callers hold the GPU's context current when get may allocate.
type pool struct {
	g  *gpu
	mu sync.Mutex
	// mem holds free staging blocks by size class (log2 of the bytes).
	mem map[int][]uint64
	// events holds free events: [0] timed (for Event generations), [1]
	// without timing (message and release markers, which are cheaper).
	events [2][]uintptr
	// Everything ever allocated, freed when the world closes.
	allMem    []uint64
	allEvents [2][]uintptr
}

func newPool(g *gpu) *pool { return &pool{g: g, mem: map[int][]uint64{}} }

// minStagingClass is the smallest staging block: 256 bytes, the driver's
// allocation granularity anyway.
const minStagingClass = 8

// sizeClass is the power of two that holds n bytes.
func sizeClass(n int) int {
	if n <= 1<<minStagingClass {
		return minStagingClass
	}
	return bits.Len(uint(n - 1))
}

// getMem returns a staging block of at least n bytes and its class.
func (p *pool) getMem(d *driver, n int) (uint64, int, error) {
	c := sizeClass(n)
	p.mu.Lock()
	if free := p.mem[c]; len(free) > 0 {
		ptr := free[len(free)-1]
		p.mem[c] = free[:len(free)-1]
		p.mu.Unlock()
		return ptr, c, nil
	}
	p.mu.Unlock()
	var ptr uint64
	if err := d.check("cuMemAlloc_v2(staging)", callPinned(&ptr, func(p *uint64) cuResult { return d.cuMemAlloc(p, uintptr(1)<<c) })); err != nil {
		return 0, 0, err
	}
	p.mu.Lock()
	p.allMem = append(p.allMem, ptr)
	p.mu.Unlock()
	return ptr, c, nil
}

func (p *pool) putMem(ptr uint64, class int) {
	p.mu.Lock()
	p.mem[class] = append(p.mem[class], ptr)
	p.mu.Unlock()
}

func timingIndex(timed bool) int {
	if timed {
		return 0
	}
	return 1
}

// getEvent returns an event created in the pool's GPU context.
func (p *pool) getEvent(d *driver, timed bool) (uintptr, error) {
	i := timingIndex(timed)
	p.mu.Lock()
	if free := p.events[i]; len(free) > 0 {
		ev := free[len(free)-1]
		p.events[i] = free[:len(free)-1]
		p.mu.Unlock()
		return ev, nil
	}
	p.mu.Unlock()
	flags := uint32(eventDefault)
	if !timed {
		flags = eventNoTiming
	}
	var ev uintptr
	if err := d.check("cuEventCreate", callPinned(&ev, func(p *uintptr) cuResult { return d.cuEventCreate(p, flags) })); err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.allEvents[i] = append(p.allEvents[i], ev)
	p.mu.Unlock()
	return ev, nil
}

func (p *pool) putEvent(ev uintptr, timed bool) {
	i := timingIndex(timed)
	p.mu.Lock()
	p.events[i] = append(p.events[i], ev)
	p.mu.Unlock()
}

// release frees everything the pool ever allocated; the caller has made the
// GPU's context current and every stream using the memory has finished.
func (p *pool) release(d *driver) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, ptr := range p.allMem {
		errs = append(errs, d.check("cuMemFree_v2(staging)", d.cuMemFree(ptr)))
	}
	for _, evs := range p.allEvents {
		for _, ev := range evs {
			errs = append(errs, d.check("cuEventDestroy_v2", d.cuEventDestroy(ev)))
		}
	}
	p.allMem, p.allEvents, p.mem, p.events = nil, [2][]uintptr{}, map[int][]uint64{}, [2][]uintptr{}
	return errors.Join(errs...)
}

// callPinned calls fn with a pointer to *out pinned for the call, for the
// driver's out-parameters.
func callPinned[T any](out *T, fn func(*T) cuResult) cuResult {
	var pin runtime.Pinner
	pin.Pin(out)
	defer pin.Unpin()
	return fn(out)
}
