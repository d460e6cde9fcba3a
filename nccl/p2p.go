package nccl

import (
	"github.com/commsim/commsim/ops"
)

// P2P is NCCL's point-to-point transport, which all-to-all and sendrecv
// (grouped ncclSend/ncclRecv) run on: no tuner picks it, and its time is
// not in NCCL's model; Estimates never lists it.
const P2P Algo = numAlgos

// p2pChannelsPerPeer is how many channels NCCL gives each peer of a
// point-to-point call (NCCL_NCHANNELS_PER_PEER and
// NCCL_NCHANNELS_PER_NET_PEER, 2 by default).
const p2pChannelsPerPeer = 2

// p2pLLThreshold is the bytes per channel below which NCCL sends
// point-to-point with LL (NCCL_P2P_LL_THRESHOLD, 16 KiB).
const p2pLLThreshold = 16 << 10

// p2pChoice is how NCCL moves op's point-to-point messages of bytes per
// peer: p2pChannelsPerPeer channels, LL below the threshold, else Simple.
// Its time is what the simulation says; NCCL's model has none.
func p2pChoice(bytesPerPeer int64) Choice {
	e := Estimate{Algo: P2P, Protocol: ops.ProtoSimple, Channels: p2pChannelsPerPeer}
	if bytesPerPeer <= p2pChannelsPerPeer*p2pLLThreshold {
		e.Protocol = ops.ProtoLL
	}
	return Choice{Estimate: e, NCCL: e}
}

// p2pPlan compiles an all-to-all or a sendrecv as NCCL runs it: every
// exchange at once, each peer's messages at two channels' speed of NCCL's
// ring search, with the per-hop latency and base latency of the protocol
// in NCCL's ring model (NCCL's model has no point-to-point figures; these
// are the nearest it has).
func p2pPlan(s System, spec ops.Spec, c Choice, o Options) (*ops.Plan, error) {
	spec.Algo, spec.Channels = "nccl-p2p", c.Channels
	plan, err := ops.Compile(spec)
	if err != nil {
		return nil, err
	}
	p, _ := protoIndex(c.Protocol)
	v := o.version()
	var w ops.Wire
	for class := range ops.NumPathClasses {
		w.Latency[class] = hwLatency(class, Ring, p, v) * 1e-6
		w.Efficiency[class] = 1
	}
	if p == ll {
		for class := range ops.NumPathClasses {
			w.Efficiency[class] = 0.5
		}
	}
	g := bandwidths(s, Ring, o)
	m := o.Machine
	for class := range ops.NumPathClasses {
		w.Latency[class] *= orOne(m.Hop)
	}
	w.Rate = float64(c.Channels) * g.intra * 1e9 * orOne(m.Bandwidth[p])
	plan.Protocol, plan.Wire, plan.Launch = c.Protocol, &w, baseLatency(Ring, p, v)*1e-6*orOne(m.Launch)
	return plan, nil
}

// isP2P reports whether NCCL runs op point to point.
func isP2P(op ops.Op) bool { return op == ops.AllToAll || op == ops.SendRecv }

// bytesPerPeer is what a rank sends each peer in spec.
func bytesPerPeer(spec ops.Spec) int64 {
	return int64(spec.Count) * int64(spec.DType.Size())
}
