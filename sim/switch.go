package sim

import (
	"fmt"
	"slices"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/topology"
)

// Switch operations (OpSwitchReduce, OpMulticast) are NVLS: a group of
// GPUs all linked to one switch that reduces (topology.Node.ReduceBW > 0;
// topology.ReducingSwitch finds it) read and write each other's memory
// through it. Each is one flow on the fabric, fairly shared like any
// other, whose bytes are the operation's:
//
//   - a switch reduction by member i crosses every member's link up to the
//     switch, the switch's reduction unit (a resource of capacity
//     ReduceBW, in bytes of result, shared by every reduction through the
//     switch; +Inf never limits) and member i's link down;
//   - a multicast by member i crosses its link up and every member's link
//     down.
//
// It first waits the longest way's latency through the switch
// (topology.SwitchGroup.Cost), then drains at its fair rate. With a Wire,
// it drains at once, its bytes grown by the NVLink efficiency and its
// rate capped by the stream's channel as a send's, and lands the Wire's
// NVLink latency after: unlike a send, the stream waits for it to land,
// as it reads or writes the rank's own memory, unless its next operation
// is another switch reduction or multicast (switchDrained), in which case
// only what follows the run waits for all of it. The data moves when it
// lands: the sources are read and the destinations written then (not in
// TimingOnly mode). A crashed member or a link of the way that is down
// fails it: a switch operation takes no other way. Mirrors do not run
// them; a folded cluster (Cluster.Rotated) does, each member's links
// folded onto their orbits' stand-ins, several onto one, which the flow
// then crosses once for each.

func (k OpKind) isSwitch() bool {
	return k == OpSwitchReduce || k == OpMulticast || k.meets()
}

// SwitchReduce enqueues dst = the reduction by rop (Sum, Prod, Min or
// Max; Avg is Sum then Divide) of srcs, one slice on every member of a
// group that includes the stream's device, in their order, computed by the
// switch they all link to (see OpSwitchReduce). It is the simulator's own:
// no hw device reaches NVLS but through NCCL.
func (s *Stream) SwitchReduce(rop hw.ReduceOp, dst hw.Slice, srcs []hw.Slice) error {
	return s.locked(func() error { return s.enqueue(Op{Kind: OpSwitchReduce, Redop: rop, Dst: dst, Members: srcs}) })
}

// Multicast enqueues a copy of src into dsts, one slice on every member of
// a group that includes the stream's device, through the switch they all
// link to (see OpMulticast).
func (s *Stream) Multicast(dsts []hw.Slice, src hw.Slice) error {
	return s.locked(func() error { return s.enqueue(Op{Kind: OpMulticast, Src: src, Members: dsts}) })
}

// prepareSwitch checks a switch operation as prepare does the others:
// the stream's own slice, and one slice per member, each on a distinct
// device of the cluster, the stream's among them, alike in dtype and
// length.
func (s *Stream) prepareSwitch(q *op, o *Op) error {
	what, own := o.Kind.String(), o.Dst
	if o.Kind == OpMulticast {
		own = o.Src
	}
	bad := func(err error) error { return fmt.Errorf("sim: %s: %s: %w", s.dev.name, what, err) }
	if err := s.checkSlice(what, own); err != nil {
		return err
	}
	if o.Kind == OpSwitchReduce && (o.Redop == hw.Avg || !o.Redop.Valid()) {
		return bad(fmt.Errorf("%w: op %s is not elementwise (use Sum, Prod, Min or Max; Avg is Sum then Divide)", hw.ErrBadArgument, o.Redop))
	}
	if len(o.Members) == 0 {
		return bad(fmt.Errorf("%w: no members", hw.ErrBadArgument))
	}
	self := false
	for i, m := range o.Members {
		if err := m.Check(); err != nil {
			return bad(fmt.Errorf("member %d: %w", i, err))
		}
		b, ok := m.Buf.(*Buffer)
		switch {
		case !ok || b.made() != nil || b.dev.c != s.dev.c:
			return bad(fmt.Errorf("member %d: %w: its buffer is not on a device of this cluster", i, hw.ErrUnknownPeer))
		case b.freed:
			return bad(fmt.Errorf("member %d: %w", i, hw.ErrFreed))
		case m.DType() != own.DType():
			return bad(fmt.Errorf("member %d: %w: %s, the stream's slice %s", i, hw.ErrDTypeMismatch, m.DType(), own.DType()))
		case m.Len != own.Len:
			return bad(fmt.Errorf("member %d: %w: %d elements, the stream's slice %d", i, hw.ErrSizeMismatch, m.Len, own.Len))
		}
		for j, earlier := range o.Members[:i] {
			if earlier.Buf.(*Buffer).dev == b.dev {
				return bad(fmt.Errorf("%w: members %d and %d are both rank %d (%s)", hw.ErrBadArgument, j, i, b.dev.rank, b.dev.name))
			}
		}
		self = self || b.dev == s.dev
	}
	if !self {
		return bad(fmt.Errorf("%w: the stream's device is not a member of the group", hw.ErrBadArgument))
	}
	if o.Wire != nil {
		if err := o.Wire.check(); err != nil {
			return bad(fmt.Errorf("%w: %v", hw.ErrBadArgument, err))
		}
	}
	*q = op{index: -1, kind: o.Kind, dst: o.Dst, src: o.Src, redop: o.Redop, wire: o.Wire, ext: &opExt{members: slices.Clone(o.Members)}}
	return nil
}

// foldedEdge is directed edge e's link, or on a folded cluster its
// orbit's stand-in.
func (c *Cluster) foldedEdge(e int) *link {
	if c.quot != nil {
		e = int(c.quot.edgeRep[e])
	}
	return c.edge(e)
}

// memberDevice is the device of a member's slice (checked by prepareSwitch).
func memberDevice(m hw.Slice) *Device { return m.Buf.(*Buffer).dev }

// switchWay is a group's ways through its reducing switch, made on first
// use and kept for groups of consecutive ranks (every NVLS plan's).
type switchWay struct {
	g        topology.SwitchGroup
	up, down []*link
	reducer  *link
	// paths[reduce][i]: member i's operation's links, made on first use.
	paths [2][][]*link
}

// switchWayOf is the way through the switch of a group with those members.
func (c *Cluster) switchWayOf(members []hw.Slice) (*switchWay, error) {
	ranks := make([]int, len(members))
	for i, m := range members {
		ranks[i] = memberDevice(m).rank
	}
	return c.switchWayFor(ranks)
}

// switchWayFor is the way through the switch of the group of ranks.
func (c *Cluster) switchWayFor(ranks []int) (*switchWay, error) {
	first := ranks[0]
	consecutive := true
	for i, r := range ranks {
		consecutive = consecutive && r == first+i
	}
	key := [2]int{first, len(ranks)}
	if w := c.switchWays[key]; consecutive && w != nil {
		return w, nil
	}
	g, err := c.topo.ReducingSwitch(ranks)
	if err != nil {
		return nil, err
	}
	w := &switchWay{g: g, up: make([]*link, len(ranks)), down: make([]*link, len(ranks)), reducer: c.switchReducer(g.Switch)}
	for i := range ranks {
		w.up[i], w.down[i] = c.foldedEdge(g.Up[i]), c.foldedEdge(g.Down[i])
	}
	w.paths[0], w.paths[1] = make([][]*link, len(ranks)), make([][]*link, len(ranks))
	if consecutive {
		if c.switchWays == nil {
			c.switchWays = map[[2]int]*switchWay{}
		}
		c.switchWays[key] = w
	}
	return w, nil
}

// switchReducer is switch node sw's reduction unit: one resource that all
// its reductions share. Its id follows every edge's, so that it shows in
// traces as the switch's own track.
func (c *Cluster) switchReducer(sw int) *link {
	if l := c.switchReducers[sw]; l != nil {
		return l
	}
	node := c.topo.Nodes[sw]
	l := &link{id: c.topo.NumEdges() + sw, name: node.Name + ".reduce", capacity: perPicosecond(node.ReduceBW)}
	if c.switchReducers == nil {
		c.switchReducers = map[int]*link{}
	}
	c.switchReducers[sw] = l
	return l
}

// path is the links member i's switch reduction (reduce) or multicast
// crosses.
func (w *switchWay) path(i int, reduce bool) []*link {
	k := 0
	if reduce {
		k = 1
	}
	if p := w.paths[k][i]; p != nil {
		return p
	}
	var p []*link
	if reduce {
		p = append(append(slices.Clip(w.up), w.reducer), w.down[i])
	} else {
		p = append([]*link{w.up[i]}, w.down...)
	}
	w.paths[k][i] = p
	return p
}

// beginSwitch starts switch operation o: one flow through the switch (see
// the top of this file). It never finishes at once.
func (s *Stream) beginSwitch(o *op, now Time) bool {
	c := s.dev.c
	if freed(o.dst, o.src) || freed(o.ext.members...) {
		s.fail(o, hw.ErrFreed)
		return false
	}
	if c.quot != nil && c.quot.block < len(c.devices) {
		s.fail(o, fmt.Errorf("%w: a mirror folds messages between two ranks, not a switch's groups", hw.ErrBadArgument))
		return false
	}
	me := -1
	for i, m := range o.ext.members {
		d := memberDevice(m)
		if d.crashed {
			s.fail(o, fmt.Errorf("%w: member rank %d (%s) crashed at %v", ErrCrashed, d.rank, d.name, d.crashedAt))
			return false
		}
		if d == s.dev {
			me = i
		}
	}
	w, err := c.switchWayOf(o.ext.members)
	if err != nil {
		s.fail(o, err)
		return false
	}
	reduce := o.kind == OpSwitchReduce
	links := w.path(me, reduce)
	for _, l := range links {
		if l.down {
			s.fail(o, fmt.Errorf("link %s is down, and a switch operation takes no other way", l.name))
			return false
		}
	}
	alpha, _ := w.g.Cost(me, reduce)
	s.busy = true
	s.startSwitchFlow(o, links, alpha, o.bytes(), PathNVLink)
	return false
}

// startSwitchFlow starts switch operation o's one flow of bytes across
// links, after its way's α; with a Wire, at once, its bytes grown by the
// Wire's efficiency for class and its rate capped by the stream's
// channel, landing the Wire's latency for class (and what α takes beyond
// its Reference) after it drains.
func (s *Stream) startSwitchFlow(o *op, links []*link, alpha float64, bytes int, class PathClass) {
	wait, n, path := FromSeconds(alpha), float64(bytes), links
	o.land = 0
	if wire := o.wire; wire != nil {
		eff := wire.Efficiency[class]
		wait, n, o.land = 0, n/eff, wire.landing(class, FromSeconds(alpha))
		if wire.Rate > 0 {
			s.channel.capacity = perPicosecond(wire.Rate / eff)
			s.path = append(append(s.path[:0], links...), &s.channel)
			path = s.path
		}
	}
	s.flow = s.dev.c.fab.start(path, wait, n, s, o)
	// On a folded cluster the members' links fold onto their orbits'
	// stand-ins, several onto one: the flow crosses it once for each, as
	// the whole run's flows through the links of that orbit do.
	s.flow.repeats = s.dev.c.quot != nil
}

// pipelines reports whether switch operations of kind k may follow each
// other without waiting to land (switchDrained).
func (k OpKind) pipelines() bool { return k == OpSwitchReduce || k == OpMulticast }

// afterFront is the operation queued right after the one the stream is
// at, pulled from the feed it came from when that is where the next one
// comes from (so that a feed's batches do not change what runs), or nil
// when there is none, or when it would come from a feed queued behind an
// operation enqueued directly. ok is false when the stream failed
// pulling.
func (s *Stream) afterFront() (next *op, ok bool) {
	if s.fedHead < len(s.fed) {
		if s.fedHead+1 == len(s.fed) && s.head < len(s.queue) && s.queue[s.head].kind == opFeed {
			if !s.pull(s.queue[s.head]) {
				return nil, false
			}
		}
		if s.fedHead+1 < len(s.fed) {
			return s.fed[s.fedHead+1], true
		}
		if s.head < len(s.queue) && s.queue[s.head].kind != opFeed {
			return s.queue[s.head], true
		}
		return nil, true
	}
	if s.head+1 < len(s.queue) && s.queue[s.head+1].kind != opFeed {
		return s.queue[s.head+1], true
	}
	return nil, true
}

// switchLanding is a switch operation that lands after its stream went
// on (see switchDrained): it moves the data then, and lets the stream go
// on past its run once the last of them has landed.
type switchLanding struct {
	s *Stream
	o op
}

func (l *switchLanding) fire(now Time, _ uint64) {
	s := l.s
	if err := s.applySwitch(&l.o); err != nil && s.err == nil {
		s.abort(fmt.Errorf("sim: rank %d (%s) stream %d, op #%d %s: %w", s.dev.rank, s.dev.name, s.onDevice, l.o.index, &l.o, err), err)
	}
	if s.landing--; s.landing == 0 {
		s.dev.c.kick(s)
	}
}

// bytes is what a switch operation moves: its own slice's bytes.
func (o *op) bytes() int {
	if o.kind == OpMulticast {
		return o.src.Bytes()
	}
	return o.dst.Bytes()
}

// switchDrained goes on from a switch operation whose flow has drained:
// it lands now, or its Wire's latency later. A switch reduction or
// multicast that the stream's next operation, already at hand, follows
// with another lands on its own (switchLanding) while the stream goes on
// to that one: a GPU issues a run of them back to back, as NCCL's kernels
// keep several steps in flight, and only what follows the run waits for
// them all to land.
func (s *Stream) switchDrained(now Time, o *op) {
	if o.land > 0 && !o.kind.meets() {
		next, ok := s.afterFront()
		if !ok {
			return // the stream failed pulling from its feed
		}
		if next != nil && next.kind.pipelines() {
			s.landing++
			s.dev.c.eng.schedule(after(now, o.land), &switchLanding{s: s, o: *o}, 0)
			s.complete(o, now)
			s.advance(now)
			return
		}
	}
	if o.land > 0 {
		s.busy, s.computing = true, o
		s.dev.c.eng.schedule(after(now, o.land), s, computeDone)
		return
	}
	if o.kind.meets() {
		o.ext.meeting.finish(now)
		return
	}
	if err := s.applySwitch(o); err != nil {
		s.fail(o, err)
		return
	}
	s.complete(o, now)
	s.advance(now)
}

// applySwitch moves a switch operation's data as it lands: the sources
// are read, and the destinations written, now.
func (s *Stream) applySwitch(o *op) error {
	if freed(o.dst, o.src) || freed(o.ext.members...) {
		return hw.ErrFreed
	}
	if s.dev.c.cfg.TimingOnly {
		return nil
	}
	switch o.kind {
	case OpSwitchReduce:
		// The destination may be one of the sources (in place): reduce
		// apart, then write.
		acc := slices.Clone(sliceBytes(o.ext.members[0]))
		for _, m := range o.ext.members[1:] {
			if err := hw.ReduceBytes(o.redop, o.dst.DType(), acc, sliceBytes(m)); err != nil {
				return err
			}
		}
		copy(sliceBytes(o.dst), acc)
	case OpMulticast:
		data := slices.Clone(sliceBytes(o.src))
		for _, m := range o.ext.members {
			copy(sliceBytes(m), data)
		}
	}
	return nil
}

// switchMember reports whether the stream is in the middle of a switch
// operation with d among its members.
func (s *Stream) switchMember(d *Device) bool {
	o := s.peek()
	if !s.busy || o == nil || !o.kind.isSwitch() {
		return false
	}
	if o.kind.meets() {
		return slices.Contains(o.ext.group, d)
	}
	return slices.ContainsFunc(o.ext.members, func(m hw.Slice) bool { return memberDevice(m) == d })
}

// cutSwitch fails the switch operation whose flow f lost a link: it takes
// no other way.
func (c *Cluster) cutSwitch(s *Stream, f *flow, now Time) {
	o := f.op
	c.fab.cancel(f)
	s.flow = nil
	c.logf(now, "%s of rank %d cut off", o.kind, s.dev.rank)
	err := fmt.Errorf("a link of its way through the switch is down (%s), and a switch operation takes no other way", c.downNames())
	if o.kind.meets() {
		o.ext.meeting.fail(err)
		return
	}
	s.fail(o, err)
}
