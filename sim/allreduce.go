package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/commsim/commsim/hw"
)

// A switch all-reduce (OpSwitchAllReduce) is SHARP's, for NCCL's CollNet:
// every member of a group enqueues one, and they meet as a message's two
// ends do, the k-th of a group and Tag on each member with the k-th on
// the others. A member that reaches its own waits for the rest; once all
// have, one flow carries the data in through every member's link up to
// the switch that reduces for them (topology.ReducingSwitch: a network
// switch reached through each member's NIC, or an NVSwitch), through the
// switch's reduction unit and out through every member's link down. It
// first waits the group's α (topology.SwitchGroup.AllReduceCost), then
// drains at its fair rate; with a Wire it drains at once, its bytes grown
// by the network efficiency and its rate capped by the last member's
// channel, and lands the Wire's network latency after. When it lands the
// switch reads every member's Src and writes every member's Dst (not in
// TimingOnly mode), and every member goes on. A member that crashes or
// fails, or a link of the way that goes down, fails every member: a
// switch operation takes no other way. Folded clusters do not run them.

// SwitchAllReduce enqueues the stream's part in an all-reduce through the
// switch by every device of group, in whose order the switch combines
// their src (Sum, Prod, Min or Max; Avg is Sum then Divide), each member
// getting the result in its dst; every member enqueues one with the same
// tag (see OpSwitchAllReduce). It is the simulator's own: no hw device
// reaches SHARP but through NCCL.
func (s *Stream) SwitchAllReduce(rop hw.ReduceOp, dst, src hw.Slice, group []*Device, tag uint64) error {
	return s.locked(func() error {
		return s.enqueue(Op{Kind: OpSwitchAllReduce, Redop: rop, Dst: dst, Src: src, Group: group, Tag: tag})
	})
}

// prepareAllReduce checks a switch all-reduce as prepare does the others:
// the stream's own slices, alike, and a group of distinct devices of the
// cluster, the stream's among them.
func (s *Stream) prepareAllReduce(q *op, o *Op) error {
	bad := func(err error) error { return fmt.Errorf("sim: %s: switch-allreduce: %w", s.dev.name, err) }
	if err := s.checkPair("switch-allreduce", o.Dst, o.Src); err != nil {
		return err
	}
	if o.Redop == hw.Avg || !o.Redop.Valid() {
		return bad(fmt.Errorf("%w: op %s is not elementwise (use Sum, Prod, Min or Max; Avg is Sum then Divide)", hw.ErrBadArgument, o.Redop))
	}
	self := false
	for i, d := range o.Group {
		if d == nil || d.c != s.dev.c {
			return bad(fmt.Errorf("member %d: %w: not a device of this cluster", i, hw.ErrUnknownPeer))
		}
		if j := slices.Index(o.Group[:i], d); j >= 0 {
			return bad(fmt.Errorf("%w: members %d and %d are both rank %d (%s)", hw.ErrBadArgument, j, i, d.rank, d.name))
		}
		self = self || d == s.dev
	}
	if !self {
		return bad(fmt.Errorf("%w: the stream's device is not a member of the group", hw.ErrBadArgument))
	}
	if o.Wire != nil {
		if err := o.Wire.check(); err != nil {
			return bad(fmt.Errorf("%w: %v", hw.ErrBadArgument, err))
		}
	}
	*q = op{index: -1, kind: OpSwitchAllReduce, dst: o.Dst, src: o.Src, redop: o.Redop, tag: o.Tag, wire: o.Wire,
		ext: &opExt{group: slices.Clone(o.Group)}}
	return nil
}

// meetingKey names a group's all-reduces of one tag: the group by its
// first member and size (members check the rest).
type meetingKey struct {
	first, size int
	tag         uint64
}

// meeting is one switch all-reduce: the members' ops and streams as they
// reach it, in group order, or why it failed.
type meeting struct {
	c       *Cluster
	key     meetingKey
	group   []*Device
	ops     []*op
	streams []*Stream
	arrived int
	err     error
}

// meetingOf is the all-reduce that o, of device d, joins: the oldest of
// its group and tag that d has not joined yet.
func (c *Cluster) meetingOf(d *Device, o *op) *meeting {
	g := o.ext.group
	k := meetingKey{g[0].rank, len(g), o.tag}
	me := slices.Index(g, d)
	for _, m := range c.meetings[k] {
		if m.ops[me] == nil {
			return m
		}
	}
	m := &meeting{c: c, key: k, group: g, ops: make([]*op, len(g)), streams: make([]*Stream, len(g))}
	if c.meetings == nil {
		c.meetings = map[meetingKey][]*meeting{}
	}
	c.meetings[k] = append(c.meetings[k], m)
	return m
}

// joinAllReduce brings o to its meeting, and starts the switch's flow
// when o is the last to come. It never finishes at once: the stream
// waits, busy, until the meeting ends.
func (s *Stream) joinAllReduce(o *op, now Time) bool {
	c := s.dev.c
	if freed(o.dst, o.src) {
		s.fail(o, hw.ErrFreed)
		return false
	}
	if c.quot != nil {
		s.fail(o, fmt.Errorf("%w: a folded cluster does not run all-reduces through the switch", hw.ErrBadArgument))
		return false
	}
	m := c.meetingOf(s.dev, o)
	me := slices.Index(m.group, s.dev)
	m.ops[me], m.streams[me] = o, s
	m.arrived++
	o.ext.meeting = m
	s.busy = true
	if m.err != nil {
		s.fail(o, m.err)
		return false
	}
	if err := m.agrees(o); err != nil {
		m.fail(err)
		return false
	}
	for _, d := range m.group {
		if d.crashed {
			m.fail(fmt.Errorf("%w: member rank %d (%s) crashed at %v", ErrCrashed, d.rank, d.name, d.crashedAt))
			return false
		}
	}
	if m.arrived < len(m.group) {
		return false
	}
	ranks := make([]int, len(m.group))
	for i, d := range m.group {
		ranks[i] = d.rank
	}
	w, err := c.switchWayFor(ranks)
	if err != nil {
		m.fail(err)
		return false
	}
	path := append(append(append([]*link(nil), w.up...), w.reducer), w.down...)
	for _, l := range path {
		if l.down {
			m.fail(fmt.Errorf("link %s is down, and a switch operation takes no other way", l.name))
			return false
		}
	}
	alpha, _ := w.g.AllReduceCost()
	wait, n := FromSeconds(alpha), float64(o.dst.Bytes())
	o.land = 0
	if wire := o.wire; wire != nil {
		eff := wire.Efficiency[PathNet]
		wait, n, o.land = 0, n/eff, wire.Latency[PathNet]
		if wire.Rate > 0 {
			s.channel.capacity = perPicosecond(wire.Rate / eff)
			path = append(path, &s.channel)
		}
	}
	s.flow = c.fab.start(path, wait, n, s, o)
	return false
}

// agrees checks that o, the latest to come, is the same all-reduce as the
// first member's: group, reduction, dtype and length.
func (m *meeting) agrees(o *op) error {
	var first *op
	for _, q := range m.ops {
		if q != nil {
			first = q
			break
		}
	}
	switch {
	case !slices.Equal(o.ext.group, first.ext.group):
		return fmt.Errorf("%w: its members are not those of the others' all-reduce with tag %d", hw.ErrBadArgument, o.tag)
	case o.redop != first.redop:
		return fmt.Errorf("%w: op %s, another member's %s", hw.ErrBadArgument, o.redop, first.redop)
	case o.dst.DType() != first.dst.DType():
		return fmt.Errorf("%w: %s, another member's %s", hw.ErrDTypeMismatch, o.dst.DType(), first.dst.DType())
	case o.dst.Len != first.dst.Len:
		return fmt.Errorf("%w: %d elements, another member's %d", hw.ErrSizeMismatch, o.dst.Len, first.dst.Len)
	}
	return nil
}

// finish ends a meeting whose data has landed: the switch reads every
// member's source and writes every member's destination, and every
// member goes on.
func (m *meeting) finish(now Time) {
	m.c.leave(m)
	if err := m.apply(); err != nil {
		m.fail(err)
		return
	}
	for i, s := range m.streams {
		s.busy, s.flow, s.computing = false, nil, nil
		s.complete(m.ops[i], now)
	}
	for _, s := range m.streams {
		s.advance(now)
	}
}

// apply moves a meeting's data.
func (m *meeting) apply() error {
	for _, o := range m.ops {
		if freed(o.dst, o.src) {
			return hw.ErrFreed
		}
	}
	if m.c.cfg.TimingOnly {
		return nil
	}
	// A destination may be a source (in place): reduce apart, then write.
	acc := slices.Clone(sliceBytes(m.ops[0].src))
	for _, o := range m.ops[1:] {
		if err := hw.ReduceBytes(o.redop, o.dst.DType(), acc, sliceBytes(o.src)); err != nil {
			return err
		}
	}
	for _, o := range m.ops {
		copy(sliceBytes(o.dst), acc)
	}
	return nil
}

// fail fails the meeting for cause: every member there now, and every
// member that comes later.
func (m *meeting) fail(cause error) {
	if m.err != nil {
		return
	}
	m.err = cause
	for i, s := range m.streams {
		if s == nil || s.err != nil || m.ops[i] != s.peek() {
			continue
		}
		if s.flow != nil {
			m.c.fab.cancel(s.flow)
			s.flow = nil
		}
		s.fail(m.ops[i], cause)
	}
}

// skipAllReduce fails the all-reduce o of device d's failed stream, which
// it will never reach if it has not: its meeting fails every member.
func (c *Cluster) skipAllReduce(d *Device, o *op, cause error) {
	m := o.ext.meeting
	if m == nil {
		if !slices.Contains(o.ext.group, d) {
			return // refused when enqueued: not a member
		}
		m = c.meetingOf(d, o)
		m.ops[slices.Index(m.group, d)] = o
		m.arrived++
		o.ext.meeting = m
	}
	m.fail(cause)
	if m.arrived == len(m.group) {
		c.leave(m)
	}
}

// leave forgets a meeting every member has reached.
func (c *Cluster) leave(m *meeting) {
	q := c.meetings[m.key]
	if i := slices.Index(q, m); i >= 0 {
		q = slices.Delete(q, i, i+1)
	}
	if len(q) == 0 {
		delete(c.meetings, m.key)
		return
	}
	c.meetings[m.key] = q
}

// meetingString describes a switch all-reduce, and while it waits, the
// members it waits for.
func (o *op) meetingString() string {
	s := fmt.Sprintf("switch-allreduce %s %d x %s with %d members tag %d", o.redop, o.dst.Len, o.dst.DType(), len(o.ext.group), o.tag)
	m := o.ext.meeting
	if m == nil || m.arrived == len(m.group) || m.err != nil {
		return s
	}
	var missing []string
	for i, q := range m.ops {
		if q == nil {
			missing = append(missing, fmt.Sprint(m.group[i].rank))
		}
	}
	return s + ", waiting for rank(s) " + strings.Join(missing, ", ")
}
