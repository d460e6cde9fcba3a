package sim

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/topology"
)

// FaultKind is what a Fault does.
type FaultKind uint8

const (
	LinkDown    FaultKind = iota + 1 // both directions of Link stop carrying traffic
	LinkDegrade                      // Link keeps Factor of its bandwidth
	RankStall                        // Rank starts no new operation for For
	RankCrash                        // Rank fails: its streams stop with ErrCrashed
	SlowReduce                       // Rank's reduction bandwidth is scaled by Factor
	SlowCompute                      // Rank's compute (Stream.Compute) runs at Factor of its speed
)

// ErrCrashed is wrapped by the errors of operations on, or sends to, a
// crashed rank.
var ErrCrashed = errors.New("rank crashed")

// Fault is a change to the simulated system at a chosen time. Its text
// form (ParseFault, String) is:
//
//	link A-B down [at T]
//	link A-B degrade P% [at T]
//	rank R stall D [at T]
//	rank R crash [at T]
//	rank R slow P% [at T]
//	rank R compute-slow P% [at T]
//
// where A-B names a link by its two nodes (either order), T and D are
// durations such as 100us or 1.5ms (T is 0 without "at T"), and P is the percentage of nominal
// bandwidth, or of compute speed, left (0 < P ≤ 100): compute-slow 80%
// makes every compute that starts from T on take 1/0.8 = 1.25 times as
// long.
type Fault struct {
	Kind   FaultKind
	At     Time
	Link   string  // LinkDown, LinkDegrade
	Rank   int     // RankStall, RankCrash, SlowReduce, SlowCompute
	Factor float64 // LinkDegrade, SlowReduce, SlowCompute: fraction of nominal bandwidth or speed left
	For    Time    // RankStall
}

// ParseFault reads one fault in the syntax documented on Fault.
func ParseFault(s string) (Fault, error) {
	bad := func(why string, args ...any) (Fault, error) {
		return Fault{}, fmt.Errorf("sim: fault %q: %s", s, fmt.Sprintf(why, args...))
	}
	w := strings.Fields(s)
	at := func(i int) (Time, error) {
		if len(w) == i {
			return 0, nil
		}
		if len(w) != i+2 || w[i] != "at" {
			return 0, fmt.Errorf("%q where \"at TIME\" (e.g. at 10us) or the end was expected", strings.Join(w[i:], " "))
		}
		return parseTime(w[i+1])
	}
	var f Fault
	var err error
	if len(w) < 3 {
		return bad("too short; see the syntax in the README (e.g. 'link gpu3-sw0 down at 100us')")
	}
	switch w[0] {
	case "link":
		k := linkAction(w)
		f.Link = strings.Join(w[1:k], " ")
		switch w[k] {
		case "down":
			f.Kind = LinkDown
			f.At, err = at(k + 1)
		case "degrade":
			f.Kind = LinkDegrade
			if len(w) < k+2 || w[k+1] == "at" {
				return bad("degrade needs a percentage, e.g. 'degrade 50%%'")
			}
			if f.Factor, err = parsePercent(w[k+1]); err == nil {
				f.At, err = at(k + 2)
			}
		default:
			return bad("unknown link fault %q (want down or degrade)", w[2])
		}
	case "rank":
		if f.Rank, err = strconv.Atoi(w[1]); err != nil || f.Rank < 0 {
			return bad("rank %q is not a non-negative integer", w[1])
		}
		switch w[2] {
		case "stall":
			f.Kind = RankStall
			if len(w) < 4 || w[3] == "at" {
				return bad("stall needs a duration before \"at\", e.g. 'rank %d stall 20us at 5us'", f.Rank)
			}
			if f.For, err = parseTime(w[3]); err == nil {
				f.At, err = at(4)
			}
		case "crash":
			f.Kind = RankCrash
			f.At, err = at(3)
		case "slow", "compute-slow":
			f.Kind = SlowReduce
			if w[2] == "compute-slow" {
				f.Kind = SlowCompute
			}
			if len(w) < 4 || w[3] == "at" {
				return bad("%s needs a percentage left, e.g. 'rank %d %s 80%%'", w[2], f.Rank, w[2])
			}
			if f.Factor, err = parsePercent(w[3]); err == nil {
				f.At, err = at(4)
			}
		default:
			return bad("unknown rank fault %q (want stall, crash, slow or compute-slow)", w[2])
		}
	default:
		return bad("unknown target %q (want link or rank)", w[0])
	}
	if err != nil {
		return bad("%v", err)
	}
	return f, nil
}

// linkAction is the index of a link fault's action in its words w: the
// last "down" or "degrade" that the rest of the fault follows as its
// syntax says, so that a link's name may hold spaces (a YAML node's may);
// 2 where none does, for the error to name.
func linkAction(w []string) int {
	for k := len(w) - 1; k > 1; k-- {
		rest := len(w) - k
		switch {
		case w[k] == "down" && (rest == 1 || rest == 3 && w[k+1] == "at"),
			w[k] == "degrade" && (rest == 2 || rest == 4 && w[k+2] == "at"):
			return k
		}
	}
	return 2
}

// parseTime reads a fault's time: a latency (ps to s), or minutes or
// hours, since a run may be simulated for days.
func parseTime(s string) (Time, error) {
	num, scale := s, 1.0
	for _, u := range []struct {
		suffix string
		secs   float64
	}{{"min", 60}, {"h", 3600}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, scale = n+"s", u.secs
			break
		}
	}
	sec, err := topology.ParseLatency(num)
	if err != nil || !(sec*scale >= 0) {
		return 0, fmt.Errorf("time %q is not a duration of 0 or more with a unit (ps, ns, us, µs, ms, s, min or h; e.g. 0, 10us, 1.5ms)", s)
	}
	sec *= scale
	t := FromSeconds(sec)
	if t == Never {
		return 0, fmt.Errorf("time %q is too large", s)
	}
	return t, nil
}

func parsePercent(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || !strings.HasSuffix(s, "%") || !(v > 0 && v <= 100) {
		return 0, fmt.Errorf("%q is not a percentage in (0%%, 100%%]", s)
	}
	return v / 100, nil
}

// String prints the fault in ParseFault's syntax.
func (f Fault) String() string {
	pct := strconv.FormatFloat(f.Factor*100, 'g', -1, 64) + "%"
	at := " at " + topology.FormatLatency(f.At.Seconds())
	link := f.Link
	if link == "" || strings.ContainsFunc(link, func(r rune) bool { return !unicode.IsPrint(r) }) {
		// No link has such a name; quoted, it cannot break the line of
		// the error that names it. (A YAML node's name may hold spaces,
		// which print, and round-trip through ParseFault unquoted.)
		link = strconv.Quote(link)
	}
	switch f.Kind {
	case LinkDown:
		return "link " + link + " down" + at
	case LinkDegrade:
		return "link " + link + " degrade " + pct + at
	case RankStall:
		return fmt.Sprintf("rank %d stall %s%s", f.Rank, topology.FormatLatency(f.For.Seconds()), at)
	case RankCrash:
		return fmt.Sprintf("rank %d crash%s", f.Rank, at)
	case SlowReduce:
		return fmt.Sprintf("rank %d slow %s%s", f.Rank, pct, at)
	case SlowCompute:
		return fmt.Sprintf("rank %d compute-slow %s%s", f.Rank, pct, at)
	}
	return "fault?"
}

// faultEvent applies the cluster's injected fault i when its time comes.
type faultEvent struct {
	c *Cluster
	i int
}

func (e *faultEvent) fire(now Time, _ uint64) {
	e.c.injected[e.i].fired = true
	e.c.apply(e.c.injected[e.i].Fault, now)
}

// Unfired lists, in the order injected, the faults whose time the
// simulation has not reached: a run that ended before a fault's time
// never saw it.
func (c *Cluster) Unfired() []Fault {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Fault
	for _, p := range c.injected {
		if !p.fired {
			out = append(out, p.Fault)
		}
	}
	return out
}

// Inject schedules f. It checks the fault against the topology at once;
// a fault in the past is an error, and so is one that conflicts with a
// fault injected before (see conflict).
func (c *Cluster) Inject(f Fault) error {
	if err := c.made(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("sim: inject: %w", hw.ErrClosed)
	}
	if f.At < 0 {
		return fmt.Errorf("sim: inject %v: a negative time; faults count from time 0", f)
	}
	if f.At == Never {
		return fmt.Errorf("sim: inject %v: %w", f, ErrHorizon)
	}
	at := placed{Fault: f, link: -1}
	switch f.Kind {
	case LinkDown, LinkDegrade:
		l, err := c.linkNamed(f.Link)
		if err != nil {
			return fmt.Errorf("sim: inject %v: %w", f, err)
		}
		at.link = l
	case RankStall, RankCrash, SlowReduce, SlowCompute:
		if f.Rank < 0 || f.Rank >= len(c.devices) {
			return fmt.Errorf("sim: inject %v: rank %d not in 0..%d", f, f.Rank, len(c.devices)-1)
		}
	default:
		return fmt.Errorf("sim: inject: unknown fault kind %d", f.Kind)
	}
	if (f.Kind == LinkDegrade || f.Kind == SlowReduce || f.Kind == SlowCompute) && !(f.Factor > 0 && f.Factor <= 1) {
		return fmt.Errorf("sim: inject %v: factor %v not in (0, 1]", f, f.Factor)
	}
	if f.Kind == RankStall && f.For < 0 {
		return fmt.Errorf("sim: inject %v: negative stall", f)
	}
	// What the fault is comes first: a fault that could never be
	// injected should say why, whatever the clock.
	if f.At < c.eng.now {
		return fmt.Errorf("sim: inject %v: simulated time is already %v", f, c.eng.now)
	}
	for _, earlier := range c.injected {
		if why := conflict(earlier, at); why != "" {
			return fmt.Errorf("sim: faults %q and %q conflict: %s", earlier.Fault, f, why)
		}
	}
	c.injected = append(c.injected, at)
	c.faulted = true
	c.eng.schedule(f.At, &faultEvent{c: c, i: len(c.injected) - 1}, 0)
	return nil
}

// placed is an injected fault and the topology link it names (-1 for a
// rank's fault).
type placed struct {
	Fault
	link  int
	fired bool // its time came and it was applied
}

// conflict says why two faults cannot both be injected, or returns "":
// each would undo or repeat the other, and which one wins would depend on
// the order they were given in. They conflict when both are of one kind
// on the same rank or link (which crash, which stall length, which
// percentage?), or when one strikes a rank after it crashed or a link
// after it went down (nothing is left to stall, slow or degrade; a
// degrade would bring a dead link's bandwidth back).
func conflict(a, b placed) string {
	onRank := func(f placed) bool { return f.link < 0 }
	same := onRank(a) == onRank(b) && (onRank(a) && a.Rank == b.Rank || !onRank(a) && a.link == b.link)
	if !same {
		return ""
	}
	target := fmt.Sprintf("rank %d", a.Rank)
	if !onRank(a) {
		target = "link " + a.Link
	}
	if a.Kind == b.Kind {
		return fmt.Sprintf("%s has two %s faults", target, faultWords[a.Kind])
	}
	when := func(t Time) string { return topology.FormatLatency(t.Seconds()) }
	for _, p := range [2][2]placed{{a, b}, {b, a}} {
		end, other := p[0], p[1]
		if (end.Kind == RankCrash || end.Kind == LinkDown) && other.At >= end.At {
			return fmt.Sprintf("%s %s at %s, so it cannot %s at %s", target, endWords[end.Kind], when(end.At), faultWords[other.Kind], when(other.At))
		}
	}
	return ""
}

// endWords say how a rank or link ends.
var endWords = map[FaultKind]string{LinkDown: "goes down", RankCrash: "crashes"}

// faultWords names each kind of fault as its syntax does.
var faultWords = map[FaultKind]string{
	LinkDown: "down", LinkDegrade: "degrade", RankStall: "stall", RankCrash: "crash", SlowReduce: "slow",
	SlowCompute: "compute-slow",
}

// cut says, once links are down, into which parts they have cut the GPUs,
// none reaching another ("" while every GPU reaches every other): every
// send across the cut then fails with no route, and a run's error names
// a few; this line, logged when the parts change, says why.
func (c *Cluster) cut() string {
	t := c.topo
	adj := make([][]int, len(t.Nodes))
	for i, l := range t.Links {
		if !c.linkDown[i] {
			adj[l.A], adj[l.B] = append(adj[l.A], l.B), append(adj[l.B], l.A)
		}
	}
	part := make([]int, len(t.Nodes)) // 1 + the part's index; 0 until reached
	var parts [][]int                 // each part's GPUs, by node
	for _, g := range t.GPUs() {
		if part[g] > 0 {
			parts[part[g]-1] = append(parts[part[g]-1], g)
			continue
		}
		parts = append(parts, []int{g})
		part[g] = len(parts)
		for queue := []int{g}; len(queue) > 0; queue = queue[1:] {
			for _, v := range adj[queue[0]] {
				if part[v] == 0 {
					part[v] = len(parts)
					queue = append(queue, v)
				}
			}
		}
	}
	if len(parts) < 2 {
		return ""
	}
	const named, listed = 3, 4 // gpus named a part, parts listed
	descs := make([]string, min(len(parts), listed))
	for i, gpus := range parts[:len(descs)] {
		var names []string
		for _, g := range gpus[:min(named, len(gpus))] {
			names = append(names, t.Nodes[g].Name)
		}
		if len(gpus) > named {
			names = append(names, "…")
		}
		descs[i] = fmt.Sprintf("%s (%d gpu%s)", strings.Join(names, " "), len(gpus), map[bool]string{true: "s"}[len(gpus) > 1])
	}
	if rest := parts[len(descs):]; len(rest) > 0 {
		gpus := 0
		for _, p := range rest {
			gpus += len(p)
		}
		descs = append(descs, fmt.Sprintf("%d more parts (%d gpus)", len(rest), gpus))
	}
	return fmt.Sprintf("the links down cut the gpus into %d parts that cannot reach one another: %s", len(parts), strings.Join(descs, " | "))
}

// linkNamed finds the topology link "A-B" (either order). Node names may
// contain '-', so every split point is tried; a name two links answer to
// (nodes gpu-0 and sw, gpu and 0-sw) is refused, naming both.
func (c *Cluster) linkNamed(name string) (int, error) {
	if c.nodeIndex == nil {
		c.nodeIndex = make(map[string]int, len(c.topo.Nodes))
		for i, n := range c.topo.Nodes {
			c.nodeIndex[n.Name] = i
		}
	}
	found, ends := -1, ""
	var nodes []string // splits that name two nodes but no link
	for i := 0; i < len(name); i++ {
		if name[i] != '-' {
			continue
		}
		a, okA := c.nodeIndex[name[:i]]
		b, okB := c.nodeIndex[name[i+1:]]
		if !okA || !okB {
			continue
		}
		l := slices.IndexFunc(c.topo.Links, func(lk topology.Link) bool { return lk.A == a && lk.B == b || lk.A == b && lk.B == a })
		switch {
		case l < 0:
			nodes = append(nodes, name[:i]+" and "+name[i+1:])
		case found >= 0:
			return 0, fmt.Errorf("link name %q is ambiguous: it names the link between %s and the one between %s and %s (rename a node)", name, ends, name[:i], name[i+1:])
		default:
			found, ends = l, name[:i]+" and "+name[i+1:]
		}
	}
	switch {
	case found >= 0:
		return found, nil
	case len(nodes) > 0:
		return 0, fmt.Errorf("no link between %s", nodes[0])
	}
	return 0, fmt.Errorf("no link named %q (write it as NODE-NODE, e.g. gpu0-sw0)", name)
}

func (c *Cluster) logf(now Time, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.faultLog = append(c.faultLog, fmt.Sprintf("%v: ", now)+msg)
	if c.trace != nil {
		c.trace.global(now, msg)
	}
}

// FaultLog lists, in order, every fault applied and what it caused
// (reroutes, failed transfers).
func (c *Cluster) FaultLog() []string {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.faultLog...)
}

// apply carries out a fault at its time.
func (c *Cluster) apply(f Fault, now Time) {
	c.logf(now, "%v", f)
	switch f.Kind {
	case LinkDown, LinkDegrade:
		l, _ := c.linkNamed(f.Link)
		for _, e := range []int{2 * l, 2*l + 1} {
			lk := c.edge(e)
			if f.Kind == LinkDegrade {
				lk.capacity = perPicosecond(c.topo.EdgeBW(e)) * f.Factor
			} else {
				lk.down, lk.capacity = true, 0
			}
			c.fab.capacityChanged(lk)
		}
		if f.Kind == LinkDown {
			if c.linkDown == nil {
				c.linkDown, c.downAs = make([]bool, len(c.topo.Links)), make([]string, len(c.topo.Links))
			}
			// Errors name the link as its fault did: node names may hold
			// '-', and "A-B" from the topology may name another link too.
			c.linkDown[l], c.downAs[l] = true, cmp.Or(c.downAs[l], f.Link)
			if cut := c.cut(); cut != "" && cut != c.lastCut {
				c.logf(now, "%s", cut)
				c.lastCut = cut
			}
			c.forgetRoutes() // routes change around the hole
			for _, e := range []int{2 * l, 2*l + 1} {
				for _, fl := range append([]*flow(nil), c.edges[e].flows...) {
					c.reroute(fl, now)
				}
			}
		}
	case RankStall:
		d := c.devices[f.Rank]
		d.stalledUntil = max(d.stalledUntil, after(now, f.For))
	case SlowReduce:
		d := c.devices[f.Rank]
		d.reducer.capacity = perPicosecond(c.topo.Nodes[d.node].ReduceBW) * f.Factor
		c.fab.capacityChanged(&d.reducer)
	case SlowCompute:
		c.devices[f.Rank].computeSpeed = f.Factor
	case RankCrash:
		d := c.devices[f.Rank]
		d.crashed, d.crashedAt = true, now
		for _, s := range c.streams {
			switch {
			case s.dev == d:
				s.crash(fmt.Errorf("%w: rank %d (%s) crashed at %v", ErrCrashed, d.rank, d.name, now))
			case s.busy && s.flow != nil && s.peek().kind == opSend && s.peek().peer == d:
				s.crash(fmt.Errorf("%w: peer rank %d (%s) crashed at %v during the transfer", ErrCrashed, d.rank, d.name, now))
			case s.switchMember(d):
				s.crash(fmt.Errorf("%w: member rank %d (%s) crashed at %v during the switch operation", ErrCrashed, d.rank, d.name, now))
			case s.conns[d] != nil && s.conns[d].blocked:
				// Waiting for room the crashed rank will never free:
				// the send looks again, and fails.
				c.kick(s)
			}
		}
	}
}

// crash cancels the stream's transfer in flight, if any, and fails it.
func (s *Stream) crash(err error) {
	if s.err != nil || s.idleQueue() {
		if s.err == nil {
			s.err = fmt.Errorf("sim: rank %d (%s) stream %d: %w", s.dev.rank, s.dev.name, s.onDevice, err)
		}
		return
	}
	if s.flow != nil {
		s.dev.c.fab.cancel(s.flow)
		s.flow = nil
	}
	o := s.peek()
	if o.index < 0 {
		// Not begun (a stalled stream): numbered as if it had.
		o.index = s.started
		s.started++
	}
	s.fail(o, err)
}

// reroute moves a transfer whose path lost a link onto the best remaining
// route, or fails it when no route is left. A switch operation has no
// other way: it fails.
func (c *Cluster) reroute(f *flow, now Time) {
	s, ok := f.owner.(*Stream)
	if ok && f.op != nil && f.op.kind.isSwitch() {
		c.cutSwitch(s, f, now)
		return
	}
	if !ok || f.op == nil || f.op.kind != opSend {
		c.fab.cancel(f)
		return
	}
	o := f.op
	r, err := c.routeBetween(s.dev, o.peer)
	if err != nil {
		c.logf(now, "transfer rank %d -> rank %d cut off: %v", s.dev.rank, o.peer.rank, err)
		c.fab.cancel(f)
		s.flow = nil
		s.fail(o, fmt.Errorf("no route left from rank %d (%s) to rank %d (%s) with %s down: %w",
			s.dev.rank, s.dev.name, o.peer.rank, o.peer.name, c.downNames(), err))
		return
	}
	// What is left keeps the wire bytes of the route it started on.
	var latency Time
	latency, _, o.land = c.sendCost(r, o)
	c.logf(now, "transfer rank %d -> rank %d rerouted (%d hops, %v)", s.dev.rank, o.peer.rank, len(r.links), after(latency, o.land))
	c.fab.restart(f, s.sendPath(r, o), latency)
}

// downNames lists the links that are down, for errors.
func (c *Cluster) downNames() string {
	var names []string
	for l, d := range c.linkDown {
		if d {
			names = append(names, c.downAs[l])
		}
	}
	return strings.Join(names, ", ")
}

// isDown reports whether topology link l is down.
func (c *Cluster) isDown(l int) bool { return l < len(c.linkDown) && c.linkDown[l] }
