package sim

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/topology"
)

// Thinned returns a timing-only cluster over the same fabric with every
// capacity divided by k: each link's bandwidth, and each GPU's and
// switch's reduction bandwidth; latencies stay. A plan whose channels
// come in k identical copies (ops.Plan.FoldChannels) runs one copy on it
// in the time all k take here: each flow of the copy stands for k equal
// flows, which share every link they cross k ways. It is made once per k
// and its clock set to the cluster's each time it is handed out; ok is
// false where a mirror's would be (see Mirror: the cluster made with
// Config.Symmetry, timing-only, untraced, unseeded, free of faults and
// idle).
func (c *Cluster) Thinned(k int) (thinned *Cluster, ok bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, fmt.Errorf("sim: thinned: %w", hw.ErrClosed)
	}
	if k < 2 {
		return nil, false, fmt.Errorf("sim: thinned: %w: divisor %d", hw.ErrBadArgument, k)
	}
	if !c.cfg.Symmetry || !c.cfg.TimingOnly || c.trace != nil || c.cfg.Seed != 0 || c.faulted || c.quot != nil || !c.idle() {
		return nil, false, nil
	}
	t := c.thinned[k]
	if t != nil && !t.idleLocked() {
		_ = t.Close()
		t = nil
	}
	if t == nil {
		topo, err := thin(c.topo, float64(k))
		if err != nil {
			return nil, false, err
		}
		if t, err = NewCluster(topo, Config{TimingOnly: true}); err != nil {
			return nil, false, err
		}
		if c.thinned == nil {
			c.thinned = map[int]*Cluster{}
		}
		c.thinned[k] = t
	}
	t.setNow(c.eng.now)
	return t, true, nil
}

// thin is topo with every bandwidth divided by k.
func thin(topo *topology.Topology, k float64) (*topology.Topology, error) {
	nodes := append([]topology.Node(nil), topo.Nodes...)
	for i := range nodes {
		nodes[i].ReduceBW /= k
	}
	links := append([]topology.Link(nil), topo.Links...)
	for i := range links {
		links[i].BW /= k
	}
	return topology.New(fmt.Sprintf("%s thinned ÷%g", topo.Name, k), nodes, links)
}
