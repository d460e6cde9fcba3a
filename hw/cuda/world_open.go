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

// close ends the world: workers stop (blocked ones give up), then every
// stream on every GPU is drained, and only then are the streams destroyed
// and the world's memory and events freed. Later calls on its devices
// return hw.ErrClosed.
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
	// Every stream of every GPU finishes before anything is freed: a
	// receiver's peer copy reads the sender's staging on another GPU, so
	// freeing one GPU's memory after only its own streams are done could
	// pull it from under a copy still queued elsewhere (after an error or
	// an abort left work behind).
	onEach := func(what string, fn func(g *gpu) []error) {
		for _, g := range order {
			if err := withContext(h.d, g.ctx, func() error { return errors.Join(fn(g)...) }); err != nil {
				errs = append(errs, fmt.Errorf("cuda: close gpu %d: %s: %w", g.ordinal, what, err))
			}
		}
	}
	onEach("synchronizing its streams", func(g *gpu) (errs []error) {
		for _, dev := range byGPU[g] {
			for _, s := range dev.strms {
				errs = append(errs, h.d.check("cuStreamSynchronize", h.d.cuStreamSynchronize(s.cu)))
			}
		}
		return errs
	})
	onEach("freeing", func(g *gpu) (errs []error) {
		for _, dev := range byGPU[g] {
			for _, s := range dev.strms {
				errs = append(errs, h.d.check("cuStreamDestroy_v2", h.d.cuStreamDestroy(s.cu)))
			}
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
		return errs
	})
	return errors.Join(errs...)
}
