package fidelity

import (
	"cmp"
	"fmt"
	"math"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

// CostRow is one cell of NCCL's cost table, as a log prints it and as
// commsim's model of NCCL gives it on the fabric.
type CostRow struct {
	Logged calibrate.LoggedCost
	Model  nccl.Cost
}

// costTolerance is how far apart two figures may be and still print
// alike: NCCL prints a tenth of a µs and of a GB/s.
const costTolerance = 0.05 + 1e-6

// near reports whether a and b print alike.
func near(a, b float64) bool { return math.Abs(a-b) <= costTolerance }

// LatencyAgree reports whether both sides give the cell a latency (NCCL
// prints one for a pair it prices, or prices and then turns off) and
// whether they print alike.
func (r CostRow) LatencyAgree() (compared, agree bool) {
	logged := r.Logged.LatencyUS > 0 || r.Logged.AlgBW > 0
	if !logged || r.Model.Off != "" {
		return false, false
	}
	return true, near(r.Logged.LatencyUS, r.Model.LatencyUS)
}

// BandwidthAgree reports whether either side's tuner may pick the cell
// (a bandwidth above 0), and whether both may, at bandwidths that print
// alike.
func (r CostRow) BandwidthAgree() (compared, agree bool) {
	loggedOn, modelOn := r.Logged.AlgBW > 0, r.Model.AlgBW > 0
	if !loggedOn && !modelOn {
		return false, false
	}
	return true, loggedOn && modelOn && near(r.Logged.AlgBW, r.Model.AlgBW)
}

// CostReport is a log's cost table set beside commsim's.
type CostReport struct {
	System  nccl.System // what commsim's model of NCCL reads of the fabric
	Version nccl.Version
	Rows    []CostRow // the log's cells, in its order
	// Latencies counts the cells both sides give a latency, and
	// LatenciesAgree those that print alike; Bandwidths the cells either
	// side's tuner may pick, and BandwidthsAgree those both may, alike.
	Latencies, LatenciesAgree, Bandwidths, BandwidthsAgree int
	// Channels are the channel counts the log's init reports beside the
	// model's, where it reports them.
	Channels []ChannelRow
}

// ChannelRow is one channel count NCCL's init reports ("coll", "nvls",
// "p2p", "p2p per peer"), as the log has it and as commsim's model does.
type ChannelRow struct {
	Name          string
	Logged, Model int
}

// CheckCostTable sets the cost table a log prints, and the channels its
// init reports (all but CollNet's count, the coll channels' from 2.21),
// beside the ones commsim's model of NCCL gives on s (nccl.Describe of
// the fabric, or a Tuner's System) in the environment o (the log's own,
// as its lines state it, where the caller takes them). It never
// simulates: the table is NCCL's model, before any size.
func CheckCostTable(logged *calibrate.CostTableLog, s nccl.System, o nccl.Options) (*CostReport, error) {
	table, err := nccl.CostTable(s, o)
	if err != nil {
		return nil, err
	}
	type cell struct {
		op    ops.Op
		algo  nccl.Algo
		proto ops.Protocol
	}
	model := make(map[cell]nccl.Cost, len(table))
	for _, c := range table {
		model[cell{c.Op, c.Algo, c.Protocol}] = c
	}
	rep := &CostReport{System: s, Version: cmp.Or(o.Version, nccl.V2_30)}
	if l := logged.Channels; l != nil {
		m := nccl.Channels(s, o)
		rep.Channels = []ChannelRow{{"coll", l.Coll, m.Coll}, {"nvls", l.NVLS, m.NVLS}, {"p2p", l.P2P, m.P2P}, {"p2p per peer", l.P2PPerPeer, m.P2PPerPeer}}
	}
	for _, l := range logged.Cells {
		m, ok := model[cell{l.Op, l.Algo, l.Protocol}]
		if !ok {
			// An algorithm this release's tuner does not have (PAT
			// before 2.23): off.
			m = nccl.Cost{Op: l.Op, Algo: l.Algo, Protocol: l.Protocol, Off: fmt.Sprintf("NCCL %v has no %v", rep.Version, l.Algo)}
		}
		row := CostRow{Logged: l, Model: m}
		rep.Rows = append(rep.Rows, row)
		if compared, agree := row.LatencyAgree(); compared {
			rep.Latencies++
			if agree {
				rep.LatenciesAgree++
			}
		}
		if compared, agree := row.BandwidthAgree(); compared {
			rep.Bandwidths++
			if agree {
				rep.BandwidthsAgree++
			}
		}
	}
	return rep, nil
}
