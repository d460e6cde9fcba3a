//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"

	"github.com/commsim/commsim/hw"
)

// NewWorldOn opens a world whose rank r runs on GPU gpus[r]; several ranks
// may share a GPU (virtual ranks). See NewWorld for close.
func NewWorldOn(gpus []int) (w *hw.World, close func() error, err error) {
	if len(gpus) == 0 {
		return nil, nil, fmt.Errorf("cuda: new world: %w: no ranks", hw.ErrBadArgument)
	}
	d, err := load()
	if err != nil {
		return nil, nil, err
	}
	return newWorld(d, gpus)
}

// newWorld is NewWorldOn over driver d (the real one or a test's fake).
func newWorld(d *driver, gpus []int) (w *hw.World, close func() error, err error) {
	h := newHub(d)
	byOrdinal := map[int]*gpu{}
	var distinct []*gpu
	devs := make([]hw.Device, len(gpus))
	for r, ord := range gpus {
		g := byOrdinal[ord]
		if g == nil {
			if g, err = openGPU(d, ord); err != nil {
				return nil, nil, fmt.Errorf("cuda: new world: rank %d: %w", r, err)
			}
			byOrdinal[ord] = g
			distinct = append(distinct, g)
		}
		dev := &Device{h: h, g: g, rank: r, name: deviceName(gpus, r), bufs: map[*Buffer]struct{}{}}
		h.devs = append(h.devs, dev)
		devs[r] = dev
	}
	if len(distinct) > 1 {
		if err := enablePeers(d, distinct); err != nil {
			return nil, nil, fmt.Errorf("cuda: new world: %w", err)
		}
	}
	if w, err = hw.NewWorld(devs); err != nil {
		return nil, nil, err
	}
	return w, h.close, nil
}

// close ends the world: workers stop (blocked ones give up), then each
// GPU's streams are drained and destroyed and the world's memory and
// events freed. Later calls on its devices return hw.ErrClosed.
func (h *hub) close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	for _, s := range h.streams {
		s.wake.Broadcast()
	}
	h.idle.Broadcast()
	h.mu.Unlock()
	h.workers.Wait()
	// Native collectives already launched run to their end (or their
	// watchdog's timeout); then their communicators go.
	h.watches.Wait()
	var errs []error
	errs = append(errs, h.closeComms())

	h.mu.Lock()
	defer h.mu.Unlock()
	byGPU := map[*gpu][]*Device{}
	var order []*gpu
	for _, dev := range h.devs {
		if byGPU[dev.g] == nil {
			order = append(order, dev.g)
		}
		byGPU[dev.g] = append(byGPU[dev.g], dev)
	}
	for _, g := range order {
		err := withContext(h.d, g.ctx, func() error {
			var errs []error
			for _, dev := range byGPU[g] {
				for _, s := range dev.strms {
					errs = append(errs, h.d.check("cuStreamSynchronize", h.d.cuStreamSynchronize(s.cu)),
						h.d.check("cuStreamDestroy_v2", h.d.cuStreamDestroy(s.cu)))
				}
			}
			for _, dev := range byGPU[g] {
				for b := range dev.bufs {
					if b.ptr != 0 {
						errs = append(errs, h.d.check("cuMemFree_v2", h.d.cuMemFree(b.ptr)))
					}
				}
				dev.bufs = nil
			}
			if p := h.pools[g]; p != nil {
				errs = append(errs, p.release(h.d))
			}
			return errors.Join(errs...)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("cuda: close gpu %d: %w", g.ordinal, err))
		}
	}
	return errors.Join(errs...)
}
