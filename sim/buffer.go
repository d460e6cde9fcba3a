package sim

import "fmt"

// This file holds the buffers of a Wire with Slots: what a stream has
// sent to one device that the device has not yet received. NCCL's sender
// writes into its peer's buffer of NCCL_STEPS slots and waits for room;
// so a fast sender stays at most a buffer ahead of a slow receiver,
// rather than queueing without bound.

// connection is one stream's buffer on one device.
type connection struct {
	owner   *Stream
	held    int64 // bytes of messages sent and not yet received
	blocked bool  // the owner waits for room for its front send
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

// reserve holds the room send o needs in its connection's buffer, or,
// when there is not enough, leaves the stream waiting for it and returns
// false. The room goes with o's message (see message.held).
func (s *Stream) reserve(o *op) bool {
	need := o.wire.holds(int64(o.src.Bytes()))
	if need == 0 {
		return true
	}
	cn := s.connection(o.peer)
	if cn.held+need > o.wire.buffer() {
		cn.blocked = true
		return false
	}
	cn.held += need
	s.sending = held{cn, need}
	return true
}

// held is the room one message holds in its connection's buffer.
type held struct {
	conn  *connection
	bytes int64
}

// release frees the room, waking its sender if it waits for room.
func (h held) release() {
	cn := h.conn
	if cn == nil {
		return
	}
	cn.held -= h.bytes
	if cn.blocked {
		cn.blocked = false
		cn.owner.dev.c.kick(cn.owner)
	}
}

// bufferWait describes, for a deadlock report, the room send o waits
// for, or is empty when it waits for none.
func (s *Stream) bufferWait(o *op) string {
	if o.kind != opSend || o.wire == nil || o.wire.Slots == 0 {
		return ""
	}
	cn := s.conns[o.peer]
	if cn == nil || !cn.blocked {
		return ""
	}
	return fmt.Sprintf(", waiting for room in its buffer to rank %d: %d of its %d bytes hold messages not yet received",
		o.peer.rank, cn.held, o.wire.buffer())
}
