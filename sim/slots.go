package sim

import "fmt"

// This file holds the buffer slots of a Wire with Slots: what a stream
// has sent to one device that the device has not yet received. NCCL's
// sender writes into its peer's buffer of NCCL_STEPS slots and waits for
// a free one; so a fast sender stays at most a buffer ahead of a slow
// receiver, rather than queueing without bound.

// connection is one stream's slots to one device.
type connection struct {
	owner   *Stream
	used    int  // slots held by messages sent and not yet received
	blocked bool // the owner waits for slots on its front send
}

// connection is the stream's connection to d, made on first use.
func (s *Stream) connection(d *Device) *connection {
	if s.conns == nil {
		s.conns = map[*Device]*connection{}
	}
	cn := s.conns[d]
	if cn == nil {
		cn = &connection{owner: s}
		s.conns[d] = cn
	}
	return cn
}

// takeSlots holds the slots send o needs on its connection, or, when
// they are not free, leaves the stream waiting for them and returns
// false. The held slots go with o's message (see message.slots).
func (s *Stream) takeSlots(o *op) bool {
	cn := s.connection(o.peer)
	need := o.wire.slotsFor(int64(o.src.Bytes()))
	if cn.used > 0 && cn.used+need > o.wire.Slots {
		cn.blocked = true
		return false
	}
	cn.used += need
	s.sending = heldSlots{cn, need}
	return true
}

// heldSlots are the slots one message holds on its connection.
type heldSlots struct {
	conn *connection
	n    int
}

// release frees the slots, waking their sender if it waits for them.
func (h heldSlots) release() {
	cn := h.conn
	if cn == nil {
		return
	}
	cn.used -= h.n
	if cn.blocked {
		cn.blocked = false
		cn.owner.dev.c.kick(cn.owner)
	}
}

// slotsWait describes, for a deadlock report, the slots send o waits for,
// or is empty when it waits for none.
func (s *Stream) slotsWait(o *op) string {
	if o.kind != opSend || o.wire == nil || o.wire.Slots == 0 {
		return ""
	}
	cn := s.conns[o.peer]
	if cn == nil || !cn.blocked {
		return ""
	}
	return fmt.Sprintf(", waiting for a free buffer slot: %d of its %d to rank %d hold messages not yet received",
		cn.used, o.wire.Slots, o.peer.rank)
}
