package sim_test

import (
	"fmt"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/hwtest"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

// TestConformance runs the hw contract's suite on clusters of GPUs on one
// switch, with data and timing-only. Simulated devices are no hw.Aborters.
func TestConformance(t *testing.T) {
	hwtest.Conformance(t, hwtest.Backend{
		NewWorld:       switchWorld(sim.Config{}),
		NewTimingWorld: switchWorld(sim.Config{TimingOnly: true}),
	})
}

// switchWorld opens clusters of the given size on one switch.
func switchWorld(cfg sim.Config) func(ranks int) (*hw.World, func() error, error) {
	return func(ranks int) (*hw.World, func() error, error) {
		topo, err := topology.Resolve(fmt.Sprintf("switch:%d", ranks))
		if err != nil {
			return nil, nil, err
		}
		c, err := sim.NewCluster(topo, cfg)
		if err != nil {
			return nil, nil, err
		}
		return c.World(), c.Close, nil
	}
}
