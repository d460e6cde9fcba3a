package sim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/commsim/commsim/hw"
)

// A switch collective (OpSwitchAllReduce, OpSwitchAllGather,
// OpSwitchReduceScatter) is SHARP's, for NCCL's CollNet: every member of
// a group enqueues one, and they meet as a message's two ends do, the
// k-th of a group and Tag on each member with the k-th on the others. A
// member that reaches its own waits for the rest; once all have, one
// flow carries the data in through every member's link up to the switch
// that serves them (topology.ReducingSwitch: a network switch reached
// through each member's NIC, or an NVSwitch), through the switch's
// reduction unit when it reduces, and out through every member's link
// down. It first waits the group's α (topology.SwitchGroup.AllReduceCost),
// then drains its bytes (a member's larger slice: an all-gather's
// result, a reduce-scatter's input, so the side that carries less is
// charged as much) at its fair rate; with a Wire it drains at once, its
// bytes grown by the network efficiency and its rate capped by the last
// member's channel, and lands the Wire's network latency after. When it
// lands the switch reads every member's Src and writes every member's
// Dst (not in TimingOnly mode), and every member goes on. A member that
// crashes or fails, or a link of the way that goes down, fails every
// member: a switch operation takes no other way. Mirrors do not run them;
// a folded cluster (Cluster.Rotated) does, as it runs the others.

// meets reports whether ops of kind k are switch collectives, which
// every member of a group enqueues.
func (k OpKind) meets() bool {
	return k == OpSwitchAllReduce || k == OpSwitchAllGather || k == OpSwitchReduceScatter
}

// reduces reports whether a switch collective of kind k reduces.
func (k OpKind) reduces() bool { return k != OpSwitchAllGather }

// SwitchAllReduce enqueues the stream's part in an all-reduce through the
// switch by every device of group, in whose order the switch combines
// their src (Sum, Prod, Min or Max; Avg is Sum then Divide), each member
// getting the result in its dst; every member enqueues one with the same
// tag (see OpSwitchAllReduce). It is the simulator's own: no hw device
// reaches SHARP but through NCCL. The all-gather and reduce-scatter are
// Ops of their kinds (OpSwitchAllGather, OpSwitchReduceScatter).
func (s *Stream) SwitchAllReduce(rop hw.ReduceOp, dst, src hw.Slice, group []*Device, tag uint64) error {
	return s.locked(func() error {
		return s.enqueue(Op{Kind: OpSwitchAllReduce, Redop: rop, Dst: dst, Src: src, Group: group, Tag: tag})
	})
}

// prepareMeeting checks a switch collective as prepare does the others:
// the stream's own slices, alike in dtype and of lengths its kind
// matches, and a group of distinct devices of the cluster, the stream's
// among them.
func (s *Stream) prepareMeeting(q *op, o *Op) error {
	what := o.Kind.String()
	bad := func(err error) error { return fmt.Errorf("sim: %s: %s: %w", s.dev.name, what, err) }
	if err := s.checkSlice(what, o.Dst); err != nil {
		return err
	}
	if err := s.checkSlice(what, o.Src); err != nil {
		return err
	}
	if o.Dst.DType() != o.Src.DType() {
		return bad(fmt.Errorf("%w: dst %s, src %s", hw.ErrDTypeMismatch, o.Dst.DType(), o.Src.DType()))
	}
	if o.Kind.reduces() && (o.Redop == hw.Avg || !o.Redop.Valid()) {
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
	src, dst := o.Src.Len, o.Dst.Len
	switch o.Kind {
	case OpSwitchAllGather:
		src *= len(o.Group)
	case OpSwitchReduceScatter:
		dst *= len(o.Group)
	}
	if src != dst {
		return bad(fmt.Errorf("%w: dst %d elements, src %d, for %d members", hw.ErrSizeMismatch, o.Dst.Len, o.Src.Len, len(o.Group)))
	}
	if o.Wire != nil {
		if err := o.Wire.check(); err != nil {
			return bad(fmt.Errorf("%w: %v", hw.ErrBadArgument, err))
		}
	}
	*q = op{index: -1, kind: o.Kind, dst: o.Dst, src: o.Src, redop: o.Redop, tag: o.Tag, wire: o.Wire,
		ext: &opExt{group: slices.Clone(o.Group)}}
	return nil
}

// meetingKey names a group's collectives of one tag: the group by its
// first member and size (members check the rest).
type meetingKey struct {
	first, size int
	tag         uint64
}

// meeting is one switch collective: the members' ops and streams as they
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

// meetingOf is the collective that o, of device d, joins: the oldest of
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

// joinMeeting brings o to its meeting, and starts the switch's flow when
// o is the last to come. It never finishes at once: the stream waits,
// busy, until the meeting ends.
func (s *Stream) joinMeeting(o *op, now Time) bool {
	c := s.dev.c
	if freed(o.dst, o.src) {
		s.fail(o, hw.ErrFreed)
		return false
	}
	if c.quot != nil && c.quot.block < len(c.devices) {
		s.fail(o, fmt.Errorf("%w: a mirror folds messages between two ranks, not a switch's groups", hw.ErrBadArgument))
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
	path := slices.Clone(w.up)
	if o.kind.reduces() {
		path = append(path, w.reducer)
	}
	path = append(path, w.down...)
	for _, l := range path {
		if l.down {
			m.fail(fmt.Errorf("link %s is down, and a switch operation takes no other way", l.name))
			return false
		}
	}
	alpha, _ := w.g.AllReduceCost()
	s.startSwitchFlow(o, path, alpha, max(o.dst.Bytes(), o.src.Bytes()), PathNet)
	return false
}

// agrees checks that o, the latest to come, is the same collective as the
// first member's: kind, group, reduction, dtype and lengths.
func (m *meeting) agrees(o *op) error {
	var first *op
	for _, q := range m.ops {
		if q != nil {
			first = q
			break
		}
	}
	switch {
	case o.kind != first.kind:
		return fmt.Errorf("%w: %s, another member's %s with tag %d", hw.ErrBadArgument, o.kind, first.kind, o.tag)
	case !slices.Equal(o.ext.group, first.ext.group):
		return fmt.Errorf("%w: its members are not those of the others' %s with tag %d", hw.ErrBadArgument, o.kind, o.tag)
	case o.kind.reduces() && o.redop != first.redop:
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
	// Destinations may be sources (in place): read all, then write.
	first := m.ops[0]
	var result []byte
	switch first.kind {
	case OpSwitchAllGather:
		for _, o := range m.ops {
			result = append(result, sliceBytes(o.src)...)
		}
	default:
		result = slices.Clone(sliceBytes(first.src))
		for _, o := range m.ops[1:] {
			if err := hw.ReduceBytes(o.redop, o.dst.DType(), result, sliceBytes(o.src)); err != nil {
				return err
			}
		}
	}
	for i, o := range m.ops {
		out := result
		if o.kind == OpSwitchReduceScatter {
			n := o.dst.Bytes()
			out = result[i*n : (i+1)*n]
		}
		copy(sliceBytes(o.dst), out)
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

// skipMeeting fails the collective o of device d's failed stream, which
// it will never reach if it has not: its meeting fails every member.
func (c *Cluster) skipMeeting(d *Device, o *op, cause error) {
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

// meetingString describes a switch collective, and while it waits, the
// members it waits for.
func (o *op) meetingString() string {
	s := fmt.Sprintf("%s %d x %s with %d members tag %d", o.kind, o.dst.Len, o.dst.DType(), len(o.ext.group), o.tag)
	if o.kind.reduces() {
		s = fmt.Sprintf("%s %s %d x %s with %d members tag %d", o.kind, o.redop, o.dst.Len, o.dst.DType(), len(o.ext.group), o.tag)
	}
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
