package sim

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/topology"
)

// Config tunes a Cluster. The zero value is a data-carrying simulation
// without a trace.
type Config struct {
	// TimingOnly makes every buffer a phantom: sizes and times are
	// simulated, no data is stored or computed. Host reads and writes of
	// such buffers return hw.ErrPhantom.
	TimingOnly bool
	// Trace records every operation and flow for WriteTrace.
	Trace bool
	// Seed, when not 0, fires simultaneous events in a seeded shuffled
	// order rather than the order they were scheduled: a different valid
	// interleaving of independent work. Results must not change; times may
	// differ in the last picosecond from floating-point summation order.
	Seed uint64
	// Symmetry lets the simulator's driver (package simexec) time a
	// rank-symmetric collective by simulating the few ranks that stand
	// for all (see Cluster.Mirror): one on a switch, a node's on a cluster
	// of nodes. The same picoseconds, hundreds of times faster on
	// thousands of ranks.
	// Such a run leaves no trace in the cluster: its clock, link usage
	// and event count stay as they were. Only idle timing-only clusters
	// without a trace or faults, over fabrics that renamings of the ranks
	// map onto themselves, are mirrored; others ignore it.
	Symmetry bool
	// MaxDataBytes caps the bytes of real (non-phantom) buffers the cluster
	// holds at once; 0 means DefaultMaxDataBytes. Larger experiments belong
	// in timing-only mode.
	MaxDataBytes int64
	// TraceMaxBytes caps the trace: past it the cluster stops holding the
	// trace (it keeps counting its size) and WriteTrace refuses with a
	// *TraceTooLargeError. 0 means no cap.
	TraceMaxBytes int64
}

// DefaultMaxDataBytes is the cap on real buffer memory when
// Config.MaxDataBytes is 0. A run holds more than its simulated buffers
// (host copies of the data, references), and every documented limit must
// run within 8 GB (issue #17): the largest bench under 4 GiB (all-reduce,
// 170 MiB per rank on 8 ranks) peaks at 6.6 GB, where 6 GiB let a 256 MiB
// one reach 9.9 GB.
const DefaultMaxDataBytes = 4 << 30

// Cluster is a simulated set of GPUs on a fabric: one Device per GPU of the
// topology, in rank order, sharing one simulated clock.
//
// A Cluster is safe for concurrent use, but simulated time advances only
// inside Synchronize and Run: the simulation is driven by whoever waits.
// Enqueue the work of every rank that a wait depends on before waiting, as
// the ops executor does; a wait that can never finish returns an error
// wrapping hw.ErrDeadlock that lists every blocked stream.
type Cluster struct {
	mu         sync.Mutex
	topo       *topology.Topology
	cfg        Config
	eng        engine
	fab        fabric
	devices    []*Device
	world      *hw.World
	edges      []*link            // one per directed topology edge, created on first use
	routeEpoch int                // bumped by forgetRoutes, emptying the devices' route caches
	detours    map[[2]int32]route // routes around the links that are down
	leafPath   [2]*link           // scratch for a route between leaves (routeBetween)
	streams    []*Stream
	freeOps    []*op
	opSlab     []op // ops are carved from slabs: a plan enqueues millions at once
	freeBoxes  []*mailbox
	landings   []*landing     // delivered, for the next send with a Wire's latency
	nodeIndex  map[string]int // node name -> index, built when a fault names a link
	linkDown   []bool         // per topology link, once a link has gone down
	downAs     []string       // per topology link, the name its fault gave it (linkDown's)
	lastCut    string         // the parts the links down last cut the GPUs into (cut)
	faultLog   []string
	data       int64
	trace      *tracer
	closed     bool
	faulted    bool                // a fault was injected: no mirror
	injected   []placed            // the faults injected, to refuse conflicting ones
	mirrors    [2]mirror           // by renaming: rotation, xor (see Mirror)
	mirrorsBy  map[int]*mirror     // by block, rotations (see MirrorBy)
	foldedBy   map[string]*Cluster // thinned and rotated clusters, by fold (see Thinned); nil where a rotation does not fold
	quot       *quotient           // a mirror's folding of the fabric
	// switchWays are groups' ways through their reducing switch, by first
	// rank and size; switchReducers the switches' reduction units, by node.
	switchWays     map[[2]int]*switchWay
	switchReducers map[int]*link
	// meetings are the switch collectives (OpSwitchAllReduce, …) members
	// have reached, or that failed before they did, by group and tag,
	// oldest first.
	meetings map[meetingKey][]*meeting
}

type route struct {
	links   []*link
	latency Time
}

// notMade is the error for a value of type typ that ctor did not make
// (a nil *Stream or a zero Cluster, with no clock or lock behind it).
func notMade(typ, ctor string) error {
	return fmt.Errorf("sim: %s %w (use %s)", typ, hw.ErrNotMade, ctor)
}

// made refuses a Cluster that NewCluster did not make.
func (c *Cluster) made() error {
	if c == nil || c.topo == nil {
		return notMade("Cluster", "sim.NewCluster")
	}
	return nil
}

// NewCluster builds a simulated cluster over topo.
func NewCluster(topo *topology.Topology, cfg Config) (*Cluster, error) {
	if topo == nil {
		return nil, fmt.Errorf("sim: nil topology")
	}
	if cfg.MaxDataBytes < 0 || cfg.TraceMaxBytes < 0 {
		return nil, fmt.Errorf("sim: MaxDataBytes and TraceMaxBytes must be >= 0, got %d and %d", cfg.MaxDataBytes, cfg.TraceMaxBytes)
	}
	if cfg.MaxDataBytes == 0 {
		cfg.MaxDataBytes = DefaultMaxDataBytes
	}
	c := &Cluster{topo: topo, cfg: cfg}
	c.fab.eng = &c.eng
	c.eng.settle = c.fab.settle
	c.eng.seed = cfg.Seed
	c.fab.onDown = c.reroute
	if cfg.Trace {
		c.trace = &tracer{limit: cfg.TraceMaxBytes}
		c.fab.trace = c.trace
	}
	gpus := topo.GPUs()
	c.devices = make([]*Device, len(gpus))
	devs := make([]hw.Device, len(gpus))
	for r, n := range gpus {
		node := topo.Nodes[n]
		d := &Device{c: c, rank: r, node: n, name: "sim:" + node.Name}
		d.leaf.Leaf, d.leaf.ok = topo.Leaf(n)
		d.reducer.id = -1 - r
		d.reducer.name = node.Name + ".reduce"
		d.reducer.capacity = perPicosecond(node.ReduceBW)
		d.reducerPath = []*link{&d.reducer}
		c.devices[r] = d
		devs[r] = d
	}
	w, err := hw.NewWorld(devs)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	c.world = w
	return c, nil
}

// perPicosecond converts bytes per second to bytes per picosecond.
func perPicosecond(bw float64) float64 {
	if math.IsInf(bw, 1) {
		return bw
	}
	return bw / float64(Second)
}

// World is the world of all devices, rank r being the topology's r-th GPU.
func (c *Cluster) World() *hw.World {
	if c == nil {
		return nil
	}
	return c.world
}

// Devices returns the devices in rank order; none for a Cluster not made.
func (c *Cluster) Devices() []*Device {
	if c == nil {
		return nil
	}
	return append([]*Device(nil), c.devices...)
}

// Topology is the fabric the cluster simulates; nil for a Cluster not
// made.
func (c *Cluster) Topology() *topology.Topology {
	if c == nil {
		return nil
	}
	return c.topo
}

// Now is the current simulated time.
func (c *Cluster) Now() Time {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eng.now
}

// EventsFired counts the simulator events processed so far.
func (c *Cluster) EventsFired() uint64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.eng.fired
}

// Run advances the simulation until nothing is left to do. It returns an
// error wrapping ErrHorizon if work would finish only past the clock's
// horizon, a deadlock error if streams still hold work that can never
// start, and otherwise the first stream failure, if any.
func (c *Cluster) Run() error {
	if err := c.made(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("sim: run: %w", hw.ErrClosed)
	}
	for c.eng.step() {
	}
	if err := c.failStuck(); err != nil {
		return err
	}
	for _, s := range c.streams {
		if s.err != nil {
			return s.err
		}
	}
	return nil
}

// Rewind sets the clock of an idle cluster back to zero, so that the next
// run has the whole horizon before it, as on a new cluster: a sweep that
// runs its sizes one after another on one cluster would otherwise spend
// the horizon on the sizes before (events recorded earlier keep their
// times). What the engine still holds once the streams are done (the
// last instants of finished flows) runs out first. A cluster whose
// streams have work left, or have failed, is not rewound.
func (c *Cluster) Rewind() error {
	if err := c.made(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("sim: rewind: %w", hw.ErrClosed)
	}
	for _, s := range c.streams {
		if !s.empty() || s.err != nil {
			return fmt.Errorf("sim: rewind: %w: the cluster has work pending or a failed stream", hw.ErrBadArgument)
		}
	}
	for c.eng.step() {
	}
	if !c.idle() {
		return fmt.Errorf("sim: rewind: %w: the cluster has work pending or a failed stream", hw.ErrBadArgument)
	}
	c.hearAll()
	c.eng.now = 0
	return nil
}

// RunUntilAny advances the simulation an instant at a time until one of
// the events has completed every Record enqueued on it. A driver that
// enqueues work a window at a time calls it to stand at the earliest
// instant any rank finishes a window: work enqueued then, behind that
// window on every rank, starts when it would have had it been enqueued at
// the outset. It returns the event's failure if its Record was skipped,
// and the failure of the stuck work if none can complete.
func (c *Cluster) RunUntilAny(events ...*Event) error {
	if err := c.made(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("sim: run: %w", hw.ErrClosed)
	}
	for _, e := range events {
		if e.made() != nil || e.dev.c != c {
			return fmt.Errorf("sim: run: %w: an event that is not from this cluster", hw.ErrBadArgument)
		}
		if e.enqueued == 0 {
			return fmt.Errorf("sim: run: %w: event %d on %s was never recorded", hw.ErrBadArgument, e.id, e.dev.name)
		}
	}
	for {
		for _, e := range events {
			if e.err != nil {
				return e.err
			}
			if e.completed == e.enqueued {
				return nil
			}
		}
		if !c.eng.step() {
			if err := c.failStuck(); err != nil {
				return err
			}
			return fmt.Errorf("sim: run: nothing left to do and none of %d events completed", len(events))
		}
	}
}

// Close releases every buffer. Later calls on the cluster or its devices
// return hw.ErrClosed.
func (c *Cluster) Close() error {
	if err := c.made(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, s := range c.streams {
		for _, o := range s.queue[s.head:] {
			if o.kind == opFeed {
				o.ext.feed.close()
			}
		}
	}
	var errs []error
	for _, m := range c.mirrors {
		if m.cluster != nil {
			errs = append(errs, m.cluster.Close())
		}
	}
	for _, b := range slices.Sorted(maps.Keys(c.mirrorsBy)) {
		if m := c.mirrorsBy[b]; m.cluster != nil {
			errs = append(errs, m.cluster.Close())
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.foldedBy)) {
		if f := c.foldedBy[k]; f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// routeBetween returns the links and latency from device a to device b.
// Each device keeps its recent routes in a small cache: most algorithms
// send to one peer many times in a row, or to a few peers in turn, and a
// cluster-wide map of every pair grew large enough on 16,384 ranks to cost
// a sixth of a run in cache misses. The topology caches the routes that
// are costly to find, except detours around links that are down, which
// the cluster keeps until the next link goes down.
//
// A route between two GPUs that are leaves of one switch, the commonest
// case, is made directly and costs no allocation; its links are scratch
// space, valid until the next call (flows copy short paths).
//
// On a mirror or a folded cluster the route is then folded onto its
// links' stand-ins (foldRoute), and the device's cache keeps it so.
func (c *Cluster) routeBetween(a, b *Device) (route, error) {
	if a != b && a.leaf.ok && b.leaf.ok && a.leaf.Neighbour == b.leaf.Neighbour && c.linkDown == nil && c.quot == nil {
		c.leafPath = [2]*link{c.edge(a.leaf.Out), c.edge(b.leaf.In)}
		return route{links: c.leafPath[:], latency: FromSeconds((a.leaf.LatencyPS + b.leaf.LatencyPS) / 1e12)}, nil
	}
	if a.routes == nil {
		// Not in the Device itself: leaves of a switch never need it, and
		// a thousand ranks' devices stay smaller in cache.
		a.routes = new([8]cachedRoute)
	}
	slot := &a.routes[mix64(uint64(b.rank))%uint64(len(a.routes))]
	if slot.peer == b && slot.epoch == c.routeEpoch {
		return slot.route, nil
	}
	key := [2]int32{int32(a.rank), int32(b.rank)}
	r, ok := c.detours[key]
	if !ok {
		var p topology.Path
		var err error
		if c.linkDown == nil {
			p, err = c.topo.RouteRanks(a.rank, b.rank)
		} else {
			p, err = c.topo.RouteAvoiding(a.node, b.node, c.isDown)
		}
		if err != nil {
			return route{}, err
		}
		r = route{links: make([]*link, len(p.Edges)), latency: FromSeconds(p.Latency)}
		for i, e := range p.Edges {
			r.links[i] = c.edge(e)
		}
		if c.linkDown != nil {
			c.detours[key] = r
		}
	}
	if c.quot != nil {
		var err error
		if r, err = c.foldRoute(a, b, r); err != nil {
			return route{}, err
		}
	}
	*slot = cachedRoute{peer: b, epoch: c.routeEpoch, route: r}
	return r, nil
}

// leafLink is a device's only link, if it has one (topology.Leaf).
type leafLink struct {
	topology.Leaf
	ok bool
}

// cachedRoute is a route in a device's cache, valid while the cluster's
// routeEpoch is unchanged.
type cachedRoute struct {
	peer  *Device
	epoch int
	route route
}

// forgetRoutes drops every cached route: a link went down.
func (c *Cluster) forgetRoutes() {
	c.routeEpoch++
	c.detours = make(map[[2]int32]route)
}

func (c *Cluster) edge(e int) *link {
	if c.edges == nil {
		c.edges = make([]*link, 2*len(c.topo.Links))
	}
	if l := c.edges[e]; l != nil {
		return l
	}
	tl := c.topo.Links[e/2]
	from, to := c.topo.Nodes[tl.A].Name, c.topo.Nodes[tl.B].Name
	if e%2 == 1 {
		from, to = to, from
	}
	l := &link{id: e, name: from + "->" + to, capacity: perPicosecond(c.topo.EdgeBW(e)), class: linkClass(c.topo, e)}
	c.edges[e] = l
	return l
}

// LinkUse is how many bytes crossed one direction of a link.
type LinkUse struct {
	Name  string
	Bytes float64
}

// LinkUsage lists the bytes carried by every link direction that carried
// any, in edge order.
func (c *Cluster) LinkUsage() []LinkUse {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []LinkUse
	for _, l := range c.edges {
		if l != nil && l.carried > 0 {
			out = append(out, LinkUse{Name: l.name, Bytes: l.carried})
		}
	}
	return out
}
