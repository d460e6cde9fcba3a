package sim

import (
	"fmt"
	"math"

	"github.com/commsim/commsim/topology"
)

// PathClass is the kind of path a transfer takes, as a communication
// library tells them apart (topology.EdgeClass): GPUs joined by NVLink
// (directly or through an NVSwitch), through the host's PCIe, or over the
// network.
type PathClass uint8

const (
	PathNVLink     PathClass = topology.ClassNVLink
	PathPCI        PathClass = topology.ClassPCI
	PathNet        PathClass = topology.ClassNet
	numPathClasses           = 3
)

var pathClassNames = [numPathClasses]string{"nvlink", "pci", "net"}

func (k PathClass) String() string {
	if k < numPathClasses {
		return pathClassNames[k]
	}
	return fmt.Sprintf("PathClass(%d)", uint8(k))
}

// Wire is how a transfer's protocol moves its bytes, by the class of its
// route: Efficiency of every byte on the wire is payload (so a message of
// s bytes occupies its links as s/Efficiency bytes would), and the
// message lands Latency after its bytes are on the wire, in place of the
// route's links' own latencies, while its sender goes on (see sendCost).
// It models NCCL's protocols (LL carries 8 bytes of data per 16-byte
// line, LL128 120 of 128, Simple whole buffers with a handshake per step)
// for the plans that run like NCCL's; a message without a Wire costs its
// links' latency and full bandwidth.
type Wire struct {
	Latency    [numPathClasses]Time
	Efficiency [numPathClasses]float64
	// Reference is, per path class, the route latency that Latency
	// already stands for: a message or switch operation whose route takes
	// longer lands the difference later too. 0 adds nothing.
	Reference [numPathClasses]Time
	// Rate is the most payload bytes per second one stream's message
	// moves, however idle its links (NCCL's channel is one block of
	// threads, and copies at its pace); 0 sets no limit.
	Rate float64
	// Slots and SlotBytes are the buffer one stream's connection to a
	// device has, as NCCL's NCCL_STEPS slots of a step each: a message of
	// at most SlotBytes holds its bytes there from when its send starts
	// until the sender hears that a receive on the device took it, the
	// message's Latency after the receive, and a send waits while it
	// would not fit beside those held in the Slots×SlotBytes bytes. A
	// larger message streams through the slots as the receiver drains
	// them, which whole-message timing cannot follow: it holds nothing.
	// Slots 0 sets no bound: sends are eager.
	Slots     int
	SlotBytes int64
}

// holds is the bytes a message of bytes payload holds in w's buffer.
func (w *Wire) holds(bytes int64) int64 {
	if bytes > w.SlotBytes {
		return 0
	}
	return bytes
}

// buffer is the bytes w's slots hold in all.
func (w *Wire) buffer() int64 { return int64(w.Slots) * w.SlotBytes }

// landing is how long after it drains a message or switch operation of
// class whose route takes latency lands: the Wire's latency, and what
// the route takes beyond its Reference.
func (w *Wire) landing(class PathClass, latency Time) Time {
	l := w.Latency[class]
	if r := w.Reference[class]; r > 0 && latency > r {
		l += latency - r
	}
	return l
}

// check reports a wire that would make a transfer take no time or
// forever.
func (w *Wire) check() error {
	for k, e := range w.Efficiency {
		if !(e > 0 && e <= 1) {
			return fmt.Errorf("wire efficiency %v on %s paths is not in (0, 1]", e, PathClass(k))
		}
		if w.Latency[k] < 0 {
			return fmt.Errorf("wire latency %v on %s paths is negative", w.Latency[k], PathClass(k))
		}
		if w.Reference[k] < 0 {
			return fmt.Errorf("wire reference latency %v on %s paths is negative", w.Reference[k], PathClass(k))
		}
	}
	if !(w.Rate >= 0) || math.IsInf(w.Rate, 0) {
		return fmt.Errorf("wire rate %v B/s is not a rate", w.Rate)
	}
	if w.Slots < 0 || w.SlotBytes < 0 || w.Slots > 0 && w.SlotBytes > math.MaxInt64/int64(w.Slots) {
		return fmt.Errorf("wire buffer of %d slots of %d bytes: not a buffer", w.Slots, w.SlotBytes)
	}
	return nil
}

// classOf is the class of a route: the network when it crosses a NIC,
// PCIe when it crosses a CPU (a host bridge), else NVLink.
func (c *Cluster) classOf(r route) PathClass {
	class := PathNVLink
	for _, l := range r.links {
		class = max(class, l.class)
	}
	return class
}

// linkClass is the class of a path through the topology's link e.
func linkClass(t *topology.Topology, e int) PathClass {
	return PathClass(t.EdgeClass(e))
}

// sendCost is how send o starts over r: the latency its flow waits
// before it drains, the bytes it puts on the wire, and how long after it
// drains it lands. A plain message waits its route's latency and lands as
// it drains. A message with a Wire drains at once, its bytes grown by the
// protocol's efficiency, and lands its latency later: a protocol's
// connection keeps several messages in flight, so the sender is done once
// its bytes are on the wire and per-message latencies overlap.
func (c *Cluster) sendCost(r route, o *op) (wait Time, n float64, land Time) {
	n = float64(o.src.Bytes())
	if o.wire == nil {
		return r.latency, n, 0
	}
	class := c.classOf(r)
	return 0, n / o.wire.Efficiency[class], o.wire.landing(class, r.latency)
}

// sendPath is what send o over r shares: the route's links, and the
// stream's channel when o's Wire has a Rate, set to it in wire bytes.
func (s *Stream) sendPath(r route, o *op) []*link {
	if o.wire == nil || o.wire.Rate == 0 {
		return r.links
	}
	s.channel.capacity = perPicosecond(o.wire.Rate / o.wire.Efficiency[s.dev.c.classOf(r)])
	if s.flow != nil {
		// A detour: the flow may still hold s.path, which it leaves.
		s.path = nil
	}
	s.path = append(append(s.path[:0], r.links...), &s.channel)
	return s.path
}
