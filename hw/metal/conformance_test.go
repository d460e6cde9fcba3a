package metal

import (
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/hwtest"
)

// TestCPUConformance runs the hw contract's suite on the CPU fake of the
// GPU; metal_darwin_test.go runs it on a Mac's GPU as TestMetalConformance.
func TestCPUConformance(t *testing.T) {
	hwtest.Conformance(t, conformanceBackend(func(p int, opts ...Option) (*hw.World, func() error, error) {
		return newCluster(newFakeGPU(), p, opts)
	}))
}

// conformanceBackend describes the backend to the suite. Its deadlocks are
// reported after a short delay, so the suite's deadlock checks are quick.
func conformanceBackend(newWorld func(p int, opts ...Option) (*hw.World, func() error, error)) hwtest.Backend {
	return hwtest.Backend{
		NewWorld: func(ranks int) (*hw.World, func() error, error) {
			return newWorld(ranks, WithDeadlockAfter(50*time.Millisecond))
		},
		Aborts: true,
	}
}
