package nccl

// NCCL's cost table, as its rank 0 prints it at init with NCCL_DEBUG=INFO
// and NCCL_DEBUG_SUBSYS=TUNING (tuning.cc, ncclTopoTuneModel): for each
// collective it tunes, algorithm and protocol, the latency and the
// bandwidth its tuner prices a call with. A user sets commsim's table
// beside the one NCCL printed on their machine to see whether commsim
// reads the machine as NCCL does.

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/commsim/commsim/ops"
)

// TableOps are the collectives NCCL's cost table holds, in its order
// (ncclFuncStr).
var TableOps = []ops.Op{ops.Broadcast, ops.Reduce, ops.AllGather, ops.ReduceScatter, ops.AllReduce}

// Cost is one cell of NCCL's cost table: what its model gives algorithm
// Algo with protocol Protocol for collective Op.
type Cost struct {
	Op       ops.Op
	Algo     Algo
	Protocol ops.Protocol
	// LatencyUS is the fixed part of a call's time in µs, and AlgBW the
	// algorithm bandwidth in GB/s its bytes move at: what NCCL prints as
	// "latency/bandwidth". Both are 0 where the pair is off.
	LatencyUS, AlgBW float64
	// Off says why NCCL's tuner never picks the pair; "" when it may.
	Off string
}

// Graph is what NCCL's search finds for an algorithm, as commsim reads
// it: its channels, and each one's speed within a node and across the
// network in GB/s (NCCL's bwIntra and bwInter).
type Graph struct {
	Algo                 Algo
	Channels             int
	IntraGBps, InterGBps float64
}

// ncclAlgoNames are the algorithms as NCCL spells them in its logs
// (ncclAlgoStr).
var ncclAlgoNames = [numAlgos]string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}

// NCCLName is a as NCCL names it in its logs: "CollNetDirect".
func (a Algo) NCCLName() string {
	if a < numAlgos {
		return ncclAlgoNames[a]
	}
	return a.String()
}

// FuncName is op as NCCL names it in its logs (ncclFuncStr): "AllReduce".
func FuncName(op ops.Op) string {
	switch op {
	case ops.Broadcast:
		return "Broadcast"
	case ops.Reduce:
		return "Reduce"
	case ops.AllGather:
		return "AllGather"
	case ops.ReduceScatter:
		return "ReduceScatter"
	case ops.AllReduce:
		return "AllReduce"
	}
	return op.String()
}

// Algos are the algorithms of release v's tuner, in NCCL's order: PAT
// came in 2.23.
func Algos(v Version) []Algo {
	out := make([]Algo, 0, numAlgos)
	for a := range numAlgos {
		if a != PAT || v >= V2_23 {
			out = append(out, a)
		}
	}
	return out
}

// Protocols are NCCL's protocols, in its order.
func Protocols() []ops.Protocol { return protocols[:] }

// CostTable is NCCL's cost table on s in the environment o: a cell for
// each collective of TableOps, algorithm of Algos and protocol, in that
// order. A size-dependent part of NCCL's estimate (the tree
// corrections, the Ring/Simple plateau on several nodes) is not in the
// table, as it is not in NCCL's. With one rank NCCL prices every call
// as ring/Simple at 0 and copies the buffer, so there is no table.
func CostTable(s System, o Options) ([]Cost, error) {
	if err := cmp.Or(s.check(), o.check()); err != nil {
		return nil, err
	}
	if s.Ranks < 2 {
		return nil, errors.New("nccl: one rank has no cost table: NCCL's tuner prices its call as ring/Simple at 0 and copies the buffer")
	}
	algos := Algos(o.Release())
	out := make([]Cost, 0, len(TableOps)*len(algos)*numProtos)
	for _, op := range TableOps {
		for _, a := range algos {
			for p := range numProtos {
				e := estimate(s, op, 0, a, p, o, elements{})
				c := Cost{Op: op, Algo: a, Protocol: protocols[p], Off: e.Off}
				if e.Off == "" {
					c.LatencyUS, c.AlgBW = e.LatencyUS, e.AlgBW
				}
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// Graphs are the graphs NCCL's model prices each algorithm of release v
// with on s, in NCCL's order: PAT and CollNet chain take the tree's, and
// CollNet direct too before 2.22.
func Graphs(s System, v Version) []Graph {
	algos := Algos(v)
	out := make([]Graph, len(algos))
	for i, a := range algos {
		g := graphOf(s, a, v)
		out[i] = Graph{Algo: a, Channels: g.channels, IntraGBps: g.intra, InterGBps: g.inter}
	}
	return out
}

// InitChannels are the channels NCCL's init sets up, as it reports them
// ("24 coll channels, 24 collnet channels, 16 nvls channels, 32 p2p
// channels, 32 p2p channels per peer"): the collectives', CollNet's,
// NVLS's (0 where it sets up none), the point-to-point ones and the most
// a peer gets.
type InitChannels struct {
	Coll, CollNet, NVLS, P2P, P2PPerPeer int
	// Version is the release whose line it is: 2.20 added the CollNet
	// count, every communicator's from 2.21, CollNet's before.
	Version Version
}

// Channels are the channels NCCL's init sets up on s in the environment o.
func Channels(s System, o Options) InitChannels {
	c := InitChannels{Coll: collChannels(s, o), Version: o.Release()}
	c.P2P, c.P2PPerPeer, _ = p2pChannels(s, o)
	switch {
	case c.Version >= V2_21:
		c.CollNet = c.Coll
	case c.Version >= v2_20 && o.collNetOff(s) == "":
		c.CollNet = c.Coll
	}
	if o.nvlsOff(s) == "" && nvlsGraph(s).channels > 0 {
		c.NVLS = nvlsSetupOf(s, o).channels
	}
	return c
}

// String is the line NCCL's release prints.
func (c InitChannels) String() string {
	if c.Version < v2_20 {
		return fmt.Sprintf("%d coll channels, %d nvls channels, %d p2p channels, %d p2p channels per peer", c.Coll, c.NVLS, c.P2P, c.P2PPerPeer)
	}
	return fmt.Sprintf("%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, %d p2p channels per peer", c.Coll, c.CollNet, c.NVLS, c.P2P, c.P2PPerPeer)
}

// String is the cell as NCCL prints it: "latency/bandwidth".
func (c Cost) String() string { return fmt.Sprintf("%.1f/%.1f", c.LatencyUS, c.AlgBW) }
