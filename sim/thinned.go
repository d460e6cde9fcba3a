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
// flows, which share every link they cross k ways. Thinned by 1 it is a
// copy of the fabric, where a plan runs as it would here without touching
// this cluster's clock or links. It is made once per k
// and its clock set to the cluster's each time it is handed out; ok is
// false where a mirror's would be (see Mirror: the cluster made with
// Config.Symmetry, timing-only, untraced, unseeded, free of faults and
// idle).
func (c *Cluster) Thinned(k int) (thinned *Cluster, ok bool, err error) {
	if err := c.made(); err != nil {
		return nil, false, err
	}
	if k < 1 {
		return nil, false, fmt.Errorf("sim: thinned: %w: divisor %d", hw.ErrBadArgument, k)
	}
	return c.folded(foldKey{k: k})
}

// Rotated is Thinned(k) (k = 1: not thinned) folded as a mirror folds
// (see Mirror) by the group that the renamings of ranks perms generate,
// of the given order, which must map the fabric onto itself: a flow
// crosses, in place of each link, the lowest of its orbit, and a link
// whose orbit is smaller than the group stands for the whole run's flows
// on fewer links (its bandwidth divided by the order over its orbit's
// size). Every rank stays (a message to rank q goes to rank q). A plan
// whose lanes for ranks r and perm[r] are images of each other, for each
// perm (ops.Plan.FoldRotation, FoldRotationAndMirror, FoldMirror), runs a
// part that stands for the whole on it: each link of the fold carries,
// from the flows of the part on its orbit's links, exactly the flows of
// the whole on one link. A switch the group fixes (a node's NVSwitch
// under a rotation of its GPUs) reduces in the fold for one orbit's
// stand-in where the whole run has it reduce for all: its reduction
// bandwidth is divided by the order over its orbit's size; and a switch
// operation crosses its members' links folded, several onto one, once
// for each. ok is false where Thinned's would be, and where perms do not
// fold the fabric so or their group's order is not order.
func (c *Cluster) Rotated(perms [][]int, order, k int) (rotated *Cluster, ok bool, err error) {
	if err := c.made(); err != nil {
		return nil, false, err
	}
	bad := k < 1 || order < 2 || len(perms) == 0
	for _, perm := range perms {
		// A renaming of the ranks: each once.
		seen := make([]bool, len(c.devices))
		bad = bad || len(perm) != len(c.devices)
		for _, r := range perm {
			bad = bad || r < 0 || r >= len(seen) || seen[r]
			if !bad {
				seen[r] = true
			}
		}
	}
	if bad {
		return nil, false, fmt.Errorf("sim: rotated: %w: %d renamings of %d ranks, order %d, divisor %d", hw.ErrBadArgument, len(perms), len(c.devices), order, k)
	}
	return c.folded(foldKey{k: k, order: order, renames: perms})
}

// foldKey names a folded cluster: thinned by k, and folded by the group
// renames generate, of the given order, when given.
type foldKey struct {
	k, order int
	renames  [][]int
}

// folded makes, once per key, or hands out again the cluster key names.
func (c *Cluster) folded(key foldKey) (*Cluster, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, fmt.Errorf("sim: fold: %w", hw.ErrClosed)
	}
	if !c.mayFold() {
		return nil, false, nil
	}
	if c.foldedBy == nil {
		c.foldedBy = map[string]*Cluster{}
	}
	id := fmt.Sprint(key.k, key.order, key.renames)
	f, seen := c.foldedBy[id]
	if seen && f == nil {
		return nil, false, nil // the renaming does not fold the fabric
	}
	if f != nil && !f.idleLocked() {
		_ = f.Close()
		f = nil
	}
	if f == nil {
		var q *quotient
		var share []float64
		if key.renames != nil {
			if groupOrder(key.renames, key.order) != key.order {
				// A link's share is the order over its orbit's size:
				// the order must be the group's own.
				c.foldedBy[id] = nil
				return nil, false, nil
			}
			renames := make([]func(int) int, len(key.renames))
			for i, perm := range key.renames {
				renames[i] = func(r int) int { return perm[r] }
			}
			gens, ok := c.renamings(renames)
			if !ok {
				c.foldedBy[id] = nil
				return nil, false, nil
			}
			q = c.quotientBy(gens, key.order, len(c.devices))
			share = c.reducerShares(gens, key.order)
		}
		topo := c.topo
		var linkShare []float64
		if q != nil {
			linkShare = q.linkShare
		}
		if key.k > 1 || share != nil || linkShare != nil {
			var err error
			if topo, err = thin(c.topo, float64(key.k), share, linkShare); err != nil {
				return nil, false, err
			}
		}
		var err error
		if f, err = NewCluster(topo, Config{TimingOnly: true}); err != nil {
			return nil, false, err
		}
		f.quot = q
		c.foldedBy[id] = f
	}
	f.setNow(c.eng.now)
	return f, true, nil
}

// groupOrder is the order of the group of permutations that perms
// generate, found by composing them until nothing new comes; 0 when one
// is not a permutation of as many ranks as the first, or the group has
// more than limit elements.
func groupOrder(perms [][]int, limit int) int {
	n := len(perms[0])
	for _, p := range perms {
		if len(p) != n || !isPermutation(p) {
			return 0
		}
	}
	identity := make([]int, n)
	for r := range identity {
		identity[r] = r
	}
	seen := map[string]bool{fmt.Sprint(identity): true}
	for todo := [][]int{identity}; len(todo) > 0; {
		x := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		for _, p := range perms {
			y := make([]int, n)
			for r := range y {
				y[r] = p[x[r]]
			}
			if id := fmt.Sprint(y); !seen[id] {
				if len(seen) == limit {
					return 0
				}
				seen[id] = true
				todo = append(todo, y)
			}
		}
	}
	return len(seen)
}

// isPermutation reports whether p maps 0..len(p)-1 onto itself.
func isPermutation(p []int) bool {
	hit := make([]bool, len(p))
	for _, q := range p {
		if q < 0 || q >= len(p) || hit[q] {
			return false
		}
		hit[q] = true
	}
	return true
}

// reducerShares is, for each node, how many of the whole run's
// reductions there one of the folded run's stands for: the group's order
// over the size of the node's orbit. A GPU moves with its rank (1: it
// keeps all its work), and a switch the renamings fix (every node's
// NVSwitch under a rotation of its GPUs) reduces for all of its members
// in the whole run and for one orbit's stand-in in the fold. nil when
// every reducing node's share is 1.
func (c *Cluster) reducerShares(gens []renamingOf, order int) []float64 {
	nodes := c.topo.Nodes
	classes := newUnionFind(len(nodes))
	for _, g := range gens {
		for e, f := range g.edge {
			from, _ := c.topo.EdgeEnds(e)
			image, _ := c.topo.EdgeEnds(f)
			classes.join(from, image)
		}
	}
	size := make([]int, len(nodes))
	for v := range nodes {
		size[classes.find(v)]++
	}
	var share []float64
	for v, n := range nodes {
		if s := order / size[classes.find(v)]; n.ReduceBW > 0 && s > 1 {
			if share == nil {
				share = make([]float64, len(nodes))
				for i := range share {
					share[i] = 1
				}
			}
			share[v] = float64(s)
		}
	}
	return share
}

// thin is topo with every bandwidth divided by k, each node's reduction
// bandwidth by its share too, and each link's bandwidth by its linkShare
// (nil: 1 each).
func thin(topo *topology.Topology, k float64, share, linkShare []float64) (*topology.Topology, error) {
	nodes := append([]topology.Node(nil), topo.Nodes...)
	for i := range nodes {
		nodes[i].ReduceBW /= k
		if share != nil {
			nodes[i].ReduceBW /= share[i]
		}
	}
	links := append([]topology.Link(nil), topo.Links...)
	for i := range links {
		links[i].BW /= k
		if linkShare != nil {
			links[i].BW /= linkShare[i]
		}
	}
	name := fmt.Sprintf("%s thinned ÷%g", topo.Name, k)
	if share != nil {
		name += ", switches shared"
	}
	if linkShare != nil {
		name += ", links shared"
	}
	return topo.WithCapacities(name, nodes, links)
}
