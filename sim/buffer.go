package sim

import "fmt"

// This file holds the buffers of a Wire with Slots: what a stream has
// sent to one device that the device has not yet received. NCCL's sender
// writes into its peer's buffer of NCCL_STEPS slots and waits for room;
// so a fast sender stays at most a buffer ahead of a slow receiver,
// rather than queueing without bound. The receiver's word that a slot is
// free (NCCL's head pointer, written back across the connection) takes
// the message's own hop latency to reach the sender: a connection keeps
// at most a buffer in flight per round trip.

// connection is one stream's buffer on one device.
type connection struct {
	owner   *Stream
	held    int64 // bytes of messages sent and not yet freed
	blocked bool  // the owner waits for room for its front send
	// credits[heard:] are the room receives have freed that the owner has
	// not yet heard of, in the order it hears of them. waking says an
	// event at wakeAt will tell a blocked owner of the first.
	credits []credit
	heard   int
	waking  bool
	wakeAt  Time
}

// credit is room freed on a connection that its sender hears of at a time.
type credit struct {
	at    Time
	bytes int64
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
// when there is not enough by what the stream has heard at now, leaves it
// waiting for room and returns false. The room goes with o's message (see
// message.held).
func (s *Stream) reserve(o *op, now Time) bool {
	need := o.wire.holds(int64(o.src.Bytes()))
	if need == 0 {
		return true
	}
	cn := s.connection(o.peer)
	cn.hear(now)
	if cn.held+need > o.wire.buffer() {
		cn.blocked = true
		cn.wakeAtFirstCredit()
		return false
	}
	cn.held += need
	s.sending = held{conn: cn, bytes: need}
	return true
}

// hear frees the room of the credits that have reached the owner by now.
func (cn *connection) hear(now Time) {
	for cn.heard < len(cn.credits) && cn.credits[cn.heard].at <= now {
		cn.held -= cn.credits[cn.heard].bytes
		cn.heard++
	}
	if cn.heard == len(cn.credits) {
		cn.credits, cn.heard = cn.credits[:0], 0
	} else if cn.heard > len(cn.credits)/2 {
		n := copy(cn.credits, cn.credits[cn.heard:])
		cn.credits, cn.heard = cn.credits[:n], 0
	}
}

// hearAll has every sender hear of all the room freed on its
// connections, for an idle cluster whose clock is about to be set back:
// nothing is in flight, and a credit's time would be the old clock's.
func (c *Cluster) hearAll() {
	for _, s := range c.streams {
		for _, cn := range s.conns {
			cn.hear(Never)
			cn.waking = false
		}
	}
}

// wakeAtFirstCredit has a blocked owner look again when the first credit
// on its way reaches it.
func (cn *connection) wakeAtFirstCredit() {
	if cn.heard == len(cn.credits) {
		return
	}
	at := cn.credits[cn.heard].at
	if cn.waking && cn.wakeAt <= at {
		return
	}
	cn.waking, cn.wakeAt = true, at
	cn.owner.dev.c.eng.schedule(at, cn, 0)
}

// fire is a credit reaching a blocked owner.
func (cn *connection) fire(now Time, _ uint64) {
	if now >= cn.wakeAt {
		cn.waking = false
	}
	cn.wake()
}

// wake has a blocked owner look for room again.
func (cn *connection) wake() {
	if cn.blocked {
		cn.blocked = false
		cn.owner.dev.c.kick(cn.owner)
	}
}

// held is the room one message holds in its connection's buffer, and the
// latency of the receiver's word that frees it.
type held struct {
	conn  *connection
	bytes int64
	back  Time
}

// release frees the room at now: its sender hears of it back later.
func (h held) release(now Time) {
	cn := h.conn
	if cn == nil {
		return
	}
	if at := after(now, h.back); at > now {
		// In the order they arrive (a rerouted message's hop may differ).
		k := len(cn.credits)
		cn.credits = append(cn.credits, credit{})
		for ; k > cn.heard && cn.credits[k-1].at > at; k-- {
			cn.credits[k] = cn.credits[k-1]
		}
		cn.credits[k] = credit{at, h.bytes}
		if cn.blocked {
			cn.wakeAtFirstCredit()
		}
		return
	}
	cn.held -= h.bytes
	cn.wake()
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
