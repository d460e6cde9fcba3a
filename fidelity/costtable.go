package fidelity

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/hw"
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
	// Calls are the log's tuning lines for the calls of a collective
	// NCCL's tuner chooses for, beside the model's choice. Choices counts
	// those, ChoicesAgree those that chose alike; Times the calls whose
	// line gives NCCL's model's time for what it ran and whose pair the
	// model prices, TimesAgree those within a millionth (NCCL computes in
	// single precision).
	Calls                                    []CallRow
	Choices, ChoicesAgree, Times, TimesAgree int
}

// CallRow is one of NCCL's tuning lines for a call beside commsim's
// model: its choice for the same call, and its price of what NCCL ran.
type CallRow struct {
	Logged calibrate.LoggedCall
	Choice nccl.Estimate
	// Ran is the model's estimate of what NCCL ran; its Off is set
	// where the model does not price that pair.
	Ran nccl.Estimate
}

// ChoiceAgrees reports whether the model chose what NCCL ran: the
// algorithm and protocol, and the channels where the line gives them.
func (r CallRow) ChoiceAgrees() bool {
	l := r.Logged.Ran
	return r.Choice.Algo == l.Algo && r.Choice.Protocol == l.Proto && (l.Channels == 0 || r.Choice.Channels == l.Channels)
}

// TimeAgree reports whether the line gives a time that the model can be
// held to (it prices what NCCL ran), and whether the two agree.
func (r CallRow) TimeAgree() (compared, agree bool) {
	if r.Logged.TimeUS == 0 || r.Ran.Off != "" {
		return false, false
	}
	return true, math.Abs(r.Ran.TimeUS-r.Logged.TimeUS) <= 1e-6*r.Logged.TimeUS+1e-6
}

// ChannelRow is one channel count NCCL's init reports ("coll", "nvls",
// "p2p", "p2p per peer"), as the log has it and as commsim's model does.
type ChannelRow struct {
	Name          string
	Logged, Model int
}

// CheckCostTable sets the cost table a log prints, the channels its init
// reports (all but CollNet's count, the coll channels' from 2.21) and
// its choice for each call beside the ones commsim's model of NCCL gives
// with t (on the log's fabric, in the environment its lines state,
// where the caller takes it). It never simulates: all of it is NCCL's
// model. A call's element type is taken as the widest of 4, 2 and 1
// bytes its size allows.
func CheckCostTable(logged *calibrate.CostTableLog, t *nccl.Tuner) (*CostReport, error) {
	if logged == nil || t == nil {
		return nil, errors.New("fidelity: cost table: no log or no tuner")
	}
	s, o := t.System, t.Options
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
	rep := &CostReport{System: s, Version: o.Release()}
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
	for _, l := range logged.Calls {
		op, err := ops.ParseOp(l.Op)
		if err != nil || !slices.Contains(nccl.TableOps, op) {
			continue // unnamed, or point to point, which the model does not choose
		}
		spec := callSpec(op, l, s.Ranks)
		if spec.Count <= 0 {
			continue
		}
		ranked, err := t.Ranked(spec)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", logged.Name, l.Line, err)
		}
		row := CallRow{Logged: l, Choice: ranked[0], Ran: nccl.Estimate{Algo: l.Ran.Algo, Protocol: l.Ran.Proto, Off: "not priced by the model"}}
		if i := slices.IndexFunc(ranked, func(e nccl.Estimate) bool { return e.Algo == l.Ran.Algo && e.Protocol == l.Ran.Proto }); i >= 0 {
			row.Ran = ranked[i]
		}
		rep.Calls = append(rep.Calls, row)
		rep.Choices++
		if row.ChoiceAgrees() {
			rep.ChoicesAgree++
		}
		if compared, agree := row.TimeAgree(); compared {
			rep.Times++
			if agree {
				rep.TimesAgree++
			}
		}
	}
	return rep, nil
}

// callSpec is the collective a tuning line's call ran: its count from
// the line's bytes (a rank's share of an all-gather or reduce-scatter
// from 2.24, the whole of it before), in the widest element type a
// rank's bytes divide into.
func callSpec(op ops.Op, l calibrate.LoggedCall, ranks int) ops.Spec {
	bytes := l.Bytes
	if (op == ops.AllGather || op == ops.ReduceScatter) && !l.PerRank {
		bytes /= int64(ranks)
	}
	dt := hw.U8
	switch {
	case bytes%4 == 0:
		dt = hw.F32
	case bytes%2 == 0:
		dt = hw.F16
	}
	return ops.Spec{Op: op, Algo: "nccl", Ranks: ranks, Count: int(bytes / int64(dt.Size())), DType: dt, Redop: hw.Sum}
}
