package ops

import (
	"fmt"
	"math"
	"strings"
)

// Protocol is how a plan's messages move, in NCCL's terms.
type Protocol uint8

const (
	// ProtoDefault is the backend's plain transfer.
	ProtoDefault Protocol = iota
	// ProtoLL: 8 bytes of data and an 8-byte flag per 16-byte line, no
	// handshake: the lowest latency, half the bandwidth.
	ProtoLL
	// ProtoLL128: 120 bytes of data per 128-byte line.
	ProtoLL128
	// ProtoSimple: whole buffers behind a handshake per step.
	ProtoSimple
)

var protocolNames = [...]string{ProtoDefault: "default", ProtoLL: "LL", ProtoLL128: "LL128", ProtoSimple: "Simple"}

func (p Protocol) String() string {
	if int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return fmt.Sprintf("Protocol(%d)", uint8(p))
}

// ParseProtocol reads a protocol name, in any case: LL, LL128 or Simple.
func ParseProtocol(s string) (Protocol, error) {
	for p := ProtoLL; p <= ProtoSimple; p++ {
		if strings.EqualFold(s, protocolNames[p]) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("ops: unknown protocol %q (want LL, LL128 or Simple)", s)
}

// The classes of path a message takes (a topology.PathClass): GPUs joined
// by NVLink, through the host's PCIe, or over the network.
const (
	PathNVLink = iota
	PathPCI
	PathNet
	NumPathClasses
)

// Wire is how a plan's messages move on a simulator, by the class of
// each message's path: Efficiency is the share of each byte on the wire
// that is payload, and a message lands Latency seconds after its bytes
// are on the wire, in place of its links' own latency, while its sender
// goes on (a protocol's connection keeps several messages in flight, so
// their latencies overlap). A plan with a Wire also reduces as it
// receives, as NCCL's kernels do: its reductions take no time of their
// own. It models NCCL's protocols, whose per-hop latencies and
// bandwidths are constants of NCCL's tuner (see package nccl).
//
// A switch step (StepSwitchReduce, StepMulticast) moves as an NVLink
// message: Latency[PathNVLink] in place of its way's latency,
// Efficiency[PathNVLink] of its bytes, at most Rate; but its rank waits
// for it to land, since it reads or writes the rank's own memory, unless
// the lane's next step is another such step (NCCL's kernels keep several
// in flight): the latency is paid once per run of switch steps on a
// lane. A collective's fixed cost (NCCL's 25 µs NVLS latency) belongs in
// Plan.Launch. A network collective (StepNetAllReduce, …) moves as a
// network message, Latency[PathNet] and Efficiency[PathNet], and its
// rank waits for it to land.
type Wire struct {
	Latency    [NumPathClasses]float64
	Efficiency [NumPathClasses]float64
	// Reference is, per path class, the way latency that Latency already
	// stands for: a message or switch step whose way takes longer adds
	// the difference, so a fabric slower than the one NCCL's figures
	// describe (a network hop through more switches, or slower ones)
	// still shows. 0 adds nothing, whatever the way.
	Reference [NumPathClasses]float64
	// Rate is the most payload bytes per second a lane's message moves
	// however idle its links (an NCCL channel copies at its own pace);
	// 0 sets no limit.
	Rate float64
	// Slots and SlotBytes are the buffer a lane's connection to each peer
	// has (NCCL's NCCL_STEPS slots of one step each): a message of at
	// most SlotBytes holds its bytes from its send until the sender hears
	// that the peer received it (on the simulator, the message's Latency
	// after), and a send waits while it would not fit beside those
	// held in the Slots×SlotBytes bytes. A larger message streams
	// through the slots as the peer drains them, which whole messages
	// cannot follow, and holds nothing. Slots 0 bounds nothing: sends
	// are eager. Check proves a plan cannot deadlock under its buffer;
	// Cost ignores it.
	Slots     int
	SlotBytes int64
}

// moves is the α and β of a way of path class class, whose α and β are
// alpha and beta, as the Wire moves a message there: its latency in
// place of the way's (and what the way takes beyond its Reference), β
// grown by its efficiency, and no faster than its rate.
func (w *Wire) moves(class int, alpha, beta float64) (wireAlpha, wireBeta float64) {
	wireBeta = beta / w.Efficiency[class]
	if w.Rate > 0 {
		wireBeta = max(wireBeta, 1/w.Rate)
	}
	wireAlpha = w.Latency[class]
	if r := w.Reference[class]; r > 0 && alpha > r {
		wireAlpha += alpha - r
	}
	return wireAlpha, wireBeta
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

// check reports a wire that would make messages free or endless.
func (w *Wire) check() error {
	for k := range NumPathClasses {
		if e := w.Efficiency[k]; !(e > 0 && e <= 1) {
			return fmt.Errorf("wire efficiency %v on path class %d is not in (0, 1]", e, k)
		}
		if l := w.Latency[k]; !(l >= 0) || math.IsInf(l, 0) {
			return fmt.Errorf("wire latency %v s on path class %d is not a time", l, k)
		}
		if r := w.Reference[k]; !(r >= 0) || math.IsInf(r, 0) {
			return fmt.Errorf("wire reference latency %v s on path class %d is not a time", r, k)
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
