package sim

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

var _ hw.Mirrorer = (*Device)(nil)

// Mirror implements hw.Mirrorer. It returns device 0 of a second,
// timing-only cluster over the same topology, made once, in which a
// device's sends to itself go out over its link to the switch and back in:
// the path, latency and sharing of a send between any two GPUs of the
// fabric. ok is false unless the cluster was made with Config.Symmetry,
// is timing-only, untraced, unseeded, free of faults and idle, devs is its
// whole world in rank order, and its fabric is uniform (see uniform).
func (d *Device) Mirror(devs []hw.Device) (hw.Device, bool, error) {
	c := d.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, fmt.Errorf("sim: %s: mirror: %w", d.name, hw.ErrClosed)
	}
	if !c.cfg.Symmetry || !c.cfg.TimingOnly || c.trace != nil || c.cfg.Seed != 0 || c.faulted || c.loopback ||
		len(devs) != len(c.devices) || !c.idle() || !c.uniform() {
		return nil, false, nil
	}
	for r, dev := range devs {
		if dev != hw.Device(c.devices[r]) {
			return nil, false, nil
		}
	}
	if c.mirror != nil && !c.mirror.idleLocked() {
		// A run on it failed and left work behind: start afresh.
		_ = c.mirror.Close()
		c.mirror = nil
	}
	if c.mirror == nil {
		m, err := NewCluster(c.topo, Config{TimingOnly: true})
		if err != nil {
			return nil, false, err
		}
		m.loopback = true
		c.mirror = m
	}
	return c.mirror.devices[0], true, nil
}

// idle reports whether nothing is pending: no event and no stream with
// work, so a collective enqueued now starts on every rank at this instant.
func (c *Cluster) idle() bool {
	if len(c.eng.queue) > 0 || len(c.eng.soon) > 0 {
		return false
	}
	for _, s := range c.streams {
		if s.head < len(s.queue) || s.busy || s.feed != nil || s.err != nil {
			return false
		}
	}
	return true
}

// idleLocked is idle for a cluster whose lock the caller does not hold.
func (c *Cluster) idleLocked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idle()
}

// uniform reports whether the fabric looks the same from every GPU: each
// is a leaf of one common node, over links of equal bandwidth each way and
// equal latency, with equal reduction bandwidth. Every route between two
// GPUs is then a link out and a link in, and any renaming of the GPUs maps
// the fabric onto itself.
func (c *Cluster) uniform() bool {
	d0 := c.devices[0]
	if !d0.leaf.ok {
		return false
	}
	bw := func(d *Device) [2]float64 { return [2]float64{c.topo.EdgeBW(d.leaf.Out), c.topo.EdgeBW(d.leaf.In)} }
	for _, d := range c.devices {
		if !d.leaf.ok || d.leaf.Neighbour != d0.leaf.Neighbour || d.leaf.LatencyPS != d0.leaf.LatencyPS ||
			bw(d) != bw(d0) || d.reducer.capacity != d0.reducer.capacity {
			return false
		}
	}
	return true
}
