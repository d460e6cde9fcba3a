//go:build linux || darwin

package cuda

import (
	"sync"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/hwtest"
)

// TestConformance runs the hw contract's suite on the GPU (skipped, with
// the reason, where there is none) and on the fake driver, with ranks
// spread over the GPUs so that messages cross between them.
func TestConformance(t *testing.T) {
	onDrivers(t, func(t *testing.T, e env) {
		hwtest.Conformance(t, hwtest.Backend{
			NewWorld: func(ranks int) (*hw.World, func() error, error) {
				if e.real {
					return NewWorld(ranks, VirtualSpread)
				}
				f, d := fake()
				gpus, err := Layout(ranks, VirtualSpread, f.gpus)
				if err != nil {
					return nil, nil, err
				}
				return newWorld(d, gpus)
			},
			Aborts: true,
			Hold:   hold,
		})
	})
}

// hold occupies s with a host function until release: busy, not blocked on
// anything the deadlock check could see.
func hold(s hw.Stream) (release func(), err error) {
	done := make(chan struct{})
	err = s.(*Stream).enqueueHost("held by hwtest", func(uintptr) error { <-done; return nil })
	return sync.OnceFunc(func() { close(done) }), err
}
