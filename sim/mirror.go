package sim

import (
	"fmt"
	"slices"

	"github.com/commsim/commsim/hw"
)

// quotient is how a mirror cluster folds the whole fabric onto the ranks
// 0..block-1 that stand in for all (see Device.Mirror).
type quotient struct {
	block int
	// edgeRep is each directed edge's stand-in: the lowest edge of its
	// orbit under the renamings.
	edgeRep []int32
	// tree: the fabric is a tree, where every route is the only path.
	// Elsewhere a route must be the only shortest path (unique caches the
	// counts by source rank): equal paths are told apart by the router's
	// tie-break, which renamings do not respect.
	tree   bool
	unique map[int][]uint8
	// linkShare is, per link, how many of the whole run's links one
	// stand-in carries the flows of: the group's order over the size of
	// the link's orbit (nil when every orbit is as large as the group). A
	// link the renamings fix (a spine's) carries every block's flows in
	// the whole run and one block's in the fold, so the fold divides its
	// bandwidth by its share.
	linkShare []float64
}

// renamingOf is one renaming of the fabric.
type renamingOf struct {
	rank []int
	edge []int
}

// Renaming is a group of renamings of the ranks, by which a mirror folds
// a fabric (see Cluster.Mirror).
type Renaming uint8

const (
	// Rotation renames rank r to r+k mod p.
	Rotation Renaming = iota + 1
	// Xor renames rank r to r xor k (p a power of two).
	Xor
)

// Mirror returns the cluster's mirror under the renamings g, made once,
// and the block b of ranks that stand for all there; package simexec
// explains what a mirror is for and why it is exact. It looks for the
// smallest b such that renaming ranks by r ↦ r+b mod p (Rotation), or by
// r ↦ r xor k·b (Xor), maps the fabric onto itself (see
// topology.Automorphism). The mirror is a second, timing-only cluster
// over the same topology in which
//   - a flow crosses, in place of each link of its route, the lowest link
//     of that link's orbit, and a route that would cross one orbit twice,
//     or that is not the only shortest path, fails the send;
//   - a link whose orbit is smaller than the group (one the renamings fix,
//     as a spine's) has its bandwidth divided by the group's order over
//     its orbit's size: the whole run puts that many times the mirror's
//     flows on it;
//   - a message to rank q is delivered to rank q mod b, and a receive from
//     rank x takes what rank x mod b sent.
//
// ok is false unless the cluster was made with Config.Symmetry, is
// timing-only, untraced, unseeded, free of faults and idle, and such a b
// exists. A mirror left with work by a failed run is replaced. The
// mirror's clock is set to the cluster's each time it is handed out.
func (c *Cluster) Mirror(g Renaming) (mirror *Cluster, block int, ok bool, err error) {
	if err := c.made(); err != nil {
		return nil, 0, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, 0, false, fmt.Errorf("sim: mirror: %w", hw.ErrClosed)
	}
	if g != Rotation && g != Xor {
		return nil, 0, false, fmt.Errorf("sim: mirror: %w: renaming %d", hw.ErrBadArgument, g)
	}
	if !c.mayFold() {
		return nil, 0, false, nil
	}
	m := &c.mirrors[g-1]
	if !m.tried {
		m.tried, m.quot = true, c.fold(g == Xor)
	}
	mc, err := c.handOut(m)
	if err != nil || mc == nil {
		return nil, 0, false, err
	}
	return mc, m.quot.block, true, nil
}

// MirrorBy is Mirror for the rotation by block, r ↦ r+block mod p, when
// it maps the fabric onto itself: a plan that only shifts by a multiple
// of Mirror's block map onto itself (NCCL's rings, whose way through a
// node alternates from node to node) mirrors there.
func (c *Cluster) MirrorBy(block int) (mc *Cluster, ok bool, err error) {
	if err := c.made(); err != nil {
		return nil, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, fmt.Errorf("sim: mirror: %w", hw.ErrClosed)
	}
	p := len(c.devices)
	if block < 1 || block >= p || p%block != 0 {
		return nil, false, fmt.Errorf("sim: mirror: %w: a block of %d of %d ranks", hw.ErrBadArgument, block, p)
	}
	if !c.mayFold() {
		return nil, false, nil
	}
	if c.mirrorsBy == nil {
		c.mirrorsBy = map[int]*mirror{}
	}
	m := c.mirrorsBy[block]
	if m == nil {
		m = &mirror{tried: true, quot: c.shiftQuotient(block)}
		c.mirrorsBy[block] = m
	}
	mc, err = c.handOut(m)
	return mc, mc != nil, err
}

// handOut is m's mirror cluster, made on first use or when the last one
// was left with work, its clock set to the cluster's; nil when m's
// renamings do not fold the fabric.
func (c *Cluster) handOut(m *mirror) (*Cluster, error) {
	if m.quot == nil {
		return nil, nil
	}
	if m.cluster != nil && !m.cluster.idleLocked() {
		_ = m.cluster.Close()
		m.cluster = nil
	}
	if m.cluster == nil {
		topo := c.topo
		if m.quot.linkShare != nil {
			var err error
			if topo, err = thin(c.topo, 1, nil, m.quot.linkShare); err != nil {
				return nil, err
			}
		}
		mc, err := NewCluster(topo, Config{TimingOnly: true})
		if err != nil {
			return nil, err
		}
		mc.quot = m.quot
		m.cluster = mc
	}
	// The mirror's run stands for one on this cluster, starting now: its
	// clock starts here too, so the horizon is the same for both.
	m.cluster.setNow(c.eng.now)
	return m.cluster, nil
}

// mirror is a cluster's mirror for one kind of renaming, made on first use.
type mirror struct {
	tried   bool      // fold was asked: a nil quot means there is no mirror
	quot    *quotient // how the fabric folds
	cluster *Cluster
}

// fold finds the smallest block whose renamings map the fabric onto
// itself, or returns nil. Links the renamings fix, or map onto fewer
// images than the group has renamings, carry a share of the flows
// (quotient.linkShare).
func (c *Cluster) fold(xor bool) *quotient {
	p := len(c.devices)
	for b := 1; b < p; b++ {
		if p%b != 0 || (xor && (p&(p-1) != 0 || b&(b-1) != 0)) {
			continue
		}
		if !xor {
			if q := c.shiftQuotient(b); q != nil {
				return q
			}
			continue
		}
		// The xors by b, 2b, 4b, … make the xors by multiples of b.
		var renames []func(int) int
		for k := b; k < p; k *= 2 {
			renames = append(renames, func(r int) int { return r ^ k })
		}
		if gens, ok := c.renamings(renames); ok {
			return c.quotientBy(gens, p/b, b)
		}
	}
	return nil
}

// shiftQuotient folds the fabric by the rotations of ranks by multiples
// of block (one shift makes them all), ranks 0..block-1 standing for all;
// nil when the shift does not map the fabric onto itself.
func (c *Cluster) shiftQuotient(block int) *quotient {
	p := len(c.devices)
	gens, ok := c.renamings([]func(int) int{func(r int) int { return (r + block) % p }})
	if !ok {
		return nil
	}
	return c.quotientBy(gens, p/block, block)
}

// quotientBy folds the fabric by the group the renamings gens make, of
// the given order, ranks 0..block-1 standing for all.
func (c *Cluster) quotientBy(gens []renamingOf, order, block int) *quotient {
	q := c.orbits(gens, order)
	q.block = block
	q.tree = len(c.topo.Links) == len(c.topo.Nodes)-1
	q.unique = map[int][]uint8{}
	return q
}

// mayFold reports whether the cluster may hand out a mirror or a folded
// cluster: made with Config.Symmetry, timing-only, untraced, unseeded,
// free of faults, not itself a fold, and idle.
func (c *Cluster) mayFold() bool {
	return c.cfg.Symmetry && c.cfg.TimingOnly && c.trace == nil && c.cfg.Seed == 0 && !c.faulted && c.quot == nil && c.idle()
}

// renamings extends each renaming of ranks to the fabric, or reports
// false if one does not map it onto itself.
func (c *Cluster) renamings(renames []func(int) int) ([]renamingOf, bool) {
	gens := make([]renamingOf, len(renames))
	for i, rename := range renames {
		g := renamingOf{rank: make([]int, len(c.devices))}
		for r := range g.rank {
			g.rank[r] = rename(r)
		}
		var ok bool
		if g.edge, ok = c.topo.Automorphism(g.rank); !ok {
			return nil, false
		}
		gens[i] = g
	}
	return gens, true
}

// orbits joins every directed edge with its images under gens and returns
// each edge's lowest-numbered fellow, and each link's share (linkShare)
// where an orbit is smaller than the group of the given order.
func (c *Cluster) orbits(gens []renamingOf, order int) *quotient {
	n := c.topo.NumEdges()
	classes := newUnionFind(n)
	for _, g := range gens {
		for e, f := range g.edge {
			classes.join(e, f)
		}
	}
	q := &quotient{edgeRep: make([]int32, n)}
	size := make([]int, n)
	for e := range q.edgeRep {
		q.edgeRep[e] = int32(classes.find(e))
		size[q.edgeRep[e]]++
	}
	for e, rep := range q.edgeRep {
		if size[rep] == order {
			continue
		}
		if q.linkShare == nil {
			q.linkShare = slices.Repeat([]float64{1}, len(c.topo.Links))
		}
		// A link's two directions have orbits of one size: a renaming
		// maps a link's reverse to its image's reverse.
		q.linkShare[e/2] = float64(order) / float64(size[rep])
	}
	return q
}

// unionFind joins elements 0..n-1 into classes, each named by its
// lowest element.
type unionFind []int32

func newUnionFind(n int) unionFind {
	u := make(unionFind, n)
	for x := range u {
		u[x] = int32(x)
	}
	return u
}

func (u unionFind) find(x int) int {
	for int(u[x]) != x {
		u[x] = u[u[x]]
		x = int(u[x])
	}
	return x
}

func (u unionFind) join(x, y int) {
	if a, b := u.find(x), u.find(y); a != b {
		u[max(a, b)] = int32(min(a, b))
	}
}

// standIn is the device that receives for d in a mirror.
func (c *Cluster) standIn(d *Device) *Device {
	if c.quot == nil {
		return d
	}
	return c.devices[d.rank%c.quot.block]
}

// foldRoute maps the route r from a to b onto the orbits' stand-in links.
// It fails when r would cross one orbit twice, or when r is not the only
// shortest path (then the routes between renamed pairs need not be r
// renamed).
func (c *Cluster) foldRoute(a, b *Device, r route) (route, error) {
	q := c.quot
	links := make([]*link, len(r.links))
	for i, l := range r.links {
		links[i] = c.edge(int(q.edgeRep[l.id]))
		for _, earlier := range links[:i] {
			if earlier == links[i] {
				return route{}, fmt.Errorf("mirror: the route from %s to %s crosses %s and another link like it", a.name, b.name, l.name)
			}
		}
	}
	if !q.tree && a != b {
		counts, ok := q.unique[a.rank]
		if !ok {
			counts = c.topo.ShortestRoutes(a.node)
			q.unique[a.rank] = counts
		}
		if counts[b.node] != 1 {
			return route{}, fmt.Errorf("mirror: the route from %s to %s is one of several equal paths, which renamings need not keep", a.name, b.name)
		}
	}
	return route{links: links, latency: r.latency}, nil
}

// idle reports whether nothing is pending: no event (beyond the horizon
// included, once those no longer wanted are dropped) and no stream with
// work, so a collective enqueued now starts on every rank at this instant.
func (c *Cluster) idle() bool {
	if len(c.eng.queue) > 0 || len(c.eng.soon) > 0 || c.eng.pastHorizon() {
		return false
	}
	for _, s := range c.streams {
		if !s.empty() || s.busy || s.err != nil {
			return false
		}
	}
	return true
}

// setNow sets the clock of an idle mirror.
func (c *Cluster) setNow(t Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hearAll()
	c.eng.now = t
}

// idleLocked is idle for a cluster whose lock the caller does not hold.
func (c *Cluster) idleLocked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idle()
}
