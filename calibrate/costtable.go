package calibrate

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

// NCCL's cost table as its rank 0 prints it at init with NCCL_DEBUG=INFO
// and NCCL_DEBUG_SUBSYS=TUNING (tuning.cc). From 2.18 it comes in blocks
// of three algorithms, each headed by the algorithms and then the
// protocols:
//
//	NCCL INFO   Algorithm   |                   Tree   ...   |   Ring   ...
//	NCCL INFO   Protocol    |             LL |          LL128 |         Simple | ...
//	NCCL INFO  Max NThreads |            512 |            640 |            512 | ...
//	NCCL INFO     Broadcast |     0.0/   0.0 |     0.0/   0.0 |     0.0/   0.0 | ...
//
// Before, in one block headed "Latency/AlgBw |    Tree/    LL |    Tree/ LL128 | …".
// Each cell is "latency/bandwidth": µs and GB/s.
//
// commsim tuning prints the same rows without the "NCCL INFO" before them.
var costRowRE = regexp.MustCompile(`^(?:.*\bNCCL INFO)?\s*(Algorithm|Protocol|Latency/AlgBw|Max NThreads|Broadcast|Reduce|AllGather|ReduceScatter|AllReduce)\s*\|(.*)$`)

// The communicator's size, as NCCL's init lines state it: "comm 0x5636
// rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0" (2.19
// on), "… rank 0 nranks 16 cudaDev 0 … - Init COMPLETE".
var (
	commRanksRE = regexp.MustCompile(`\bNCCL INFO comm 0x[0-9a-fA-F]+ rank 0 n[Rr]anks (\d+)\b`)
	commNodesRE = regexp.MustCompile(`\bNCCL INFO comm 0x[0-9a-fA-F]+ rank 0 n[Rr]anks \d+ nNodes (\d+)\b`)
)

// ErrNoCostTable is ParseCostTable's error for a log that prints
// neither a cost table, nor the channels NCCL set up, nor its choice for
// a call.
var ErrNoCostTable = errors.New("no NCCL cost table, channel count or tuning line in it (NCCL_DEBUG=INFO prints the channels at init; with NCCL_DEBUG_SUBSYS=TUNING the table and each call's choice)")

// The channels NCCL's init sets up, as it reports them with
// NCCL_DEBUG=INFO (init.cc): "24 coll channels, 24 collnet channels, 16
// nvls channels, 32 p2p channels, 32 p2p channels per peer", without the
// CollNet count before 2.20.
var initChannelsRE = regexp.MustCompile(`\bNCCL INFO (\d+) coll channels, (?:(\d+) collnet channels, )?(\d+) nvls channels, (\d+) p2p channels, (\d+) p2p channels per peer\b`)

// LoggedCost is one cell of the cost table a log prints, and its line.
type LoggedCost struct {
	nccl.Cost
	Line int
}

// LoggedCall is one of NCCL's tuning lines for a call (NCCL_DEBUG_SUBSYS
// =TUNING, 2.20 on): what it ran for a size, and, from 2.20 to 2.23, its
// model's time.
type LoggedCall struct {
	// Op is commsim's name of the collective, "" where the line does not
	// name it (2.20-2.22); CostTableLog.NameCalls names those.
	Op string
	// Bytes is the size as NCCL writes it: from 2.24 the call's count
	// times its type's size (a rank's share for all-gather and
	// reduce-scatter), before the whole collective's.
	Bytes   int64
	PerRank bool
	Ran     Ran
	TimeUS  float64 // NCCL's model's time; 0 where the line has none
	Line    int
}

// CostTableLog is what an NCCL log states of its tuning: the cells of
// its first cost table, in the log's order (none where it prints only
// the channels or calls), the channels, the calls, and NCCL's version
// and environment as its lines state them.
type CostTableLog struct {
	Name  string // the log's, as ParseCostTable was given it
	Cells []LoggedCost
	// Stated holds the NCCL version and environment the log's lines
	// state (Log.NCCLVersion, Log.NCCLEnv; Log.NCCLOptions reads them)
	// and the tuning lines that could not be read (Log.UnreadRan), and
	// nothing else.
	Stated *Log
	// Tables counts the tables the log prints (one per communicator
	// rank 0 sets up); only the first is read.
	Tables int
	// Ranks and Nodes are the first communicator's size as NCCL's init
	// lines state it, 0 where they do not.
	Ranks, Nodes int
	// Channels are the channels the first communicator's init reports
	// (its Version unset, its CollNet 0 where the line has none), nil
	// where no line does; ChannelsLine is that line.
	Channels     *nccl.InitChannels
	ChannelsLine int
	// Calls are NCCL's tuning lines for calls, the first of each
	// collective and size, in the log's order.
	Calls []LoggedCall
	// CutRows are the lines of the first table's rows that end before
	// the columns their headers give (a log cut at a width, a quoted
	// excerpt): their cells up to the cut are read.
	CutRows []int
	// Unmodelled are the first table's columns of an algorithm or
	// protocol commsim does not model ("CollNet/LL"), in the order first
	// met, their cells left out; UnmodelledLine is the first such cell's.
	Unmodelled     []string
	UnmodelledLine int
}

// NameCalls names the calls whose lines do not (NCCL 2.20-2.22) as op,
// commsim's name of the collective the log ran.
func (l *CostTableLog) NameCalls(op string) {
	for i := range l.Calls {
		if l.Calls[i].Op == "" {
			l.Calls[i].Op = op
		}
	}
}

// ParseCostTable reads the cost table NCCL printed into a log (any
// text: nccl-tests' output, a training job's), with rank and host tags
// and time stamps around its lines as ParseLog takes them, the channels
// its init reports, and what it says it ran for each call. A cell or a
// call of an algorithm or protocol commsim does not know (the single
// CollNet of releases before 2.14, say) is left out. A table row that
// cannot be read is an error that names its line; a log with none of
// the three is ErrNoCostTable.
func ParseCostTable(name string, data []byte) (*CostTableLog, error) {
	out := &CostTableLog{Name: name, Stated: &Log{}}
	type callKey struct {
		op    string
		bytes int64
	}
	seen := map[callKey]bool{}
	// The block's algorithms (one per group of columns) and protocols
	// (one per column) from 2.18; before, each column's "algo/proto".
	var algos, protos, heads []string
	cellLine := map[cellKey]int{} // the line each of the first table's cells is on
	for i, line := range strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n") {
		t := untag(line)
		out.Stated.readNCCLLine(t, i+1)
		if r, ok, _ := parseRanLine(t); ok && !seen[callKey{r.op, r.bytes}] {
			seen[callKey{r.op, r.bytes}] = true
			out.Calls = append(out.Calls, LoggedCall{Op: r.op, Bytes: r.bytes, PerRank: r.perRank, Ran: r.ran, TimeUS: r.timeUS, Line: i + 1})
		}
		if m := commRanksRE.FindStringSubmatch(t); m != nil && out.Ranks == 0 {
			out.Ranks, _ = strconv.Atoi(m[1])
		}
		if m := commNodesRE.FindStringSubmatch(t); m != nil && out.Nodes == 0 {
			out.Nodes, _ = strconv.Atoi(m[1])
		}
		if m := initChannelsRE.FindStringSubmatch(t); m != nil && out.Channels == nil {
			n := make([]int, len(m))
			for k := 1; k < len(m); k++ {
				n[k], _ = strconv.Atoi(m[k]) // digits; "" (no CollNet count) reads 0
			}
			out.Channels, out.ChannelsLine = &nccl.InitChannels{Coll: n[1], CollNet: n[2], NVLS: n[3], P2P: n[4], P2PPerPeer: n[5]}, i+1
		}
		m := costRowRE.FindStringSubmatch(t)
		if m == nil {
			continue
		}
		cells := splitCells(m[2])
		switch m[1] {
		case "Algorithm":
			// A table's first block starts with the tree.
			if out.Tables == 0 || len(cells) > 0 && strings.EqualFold(cells[0], nccl.Tree.String()) {
				out.Tables++
			}
			algos, protos, heads = cells, nil, nil
			continue
		case "Latency/AlgBw":
			out.Tables++
			algos, protos, heads = nil, nil, cells
			continue
		case "Protocol":
			protos = cells
			continue
		case "Max NThreads":
			continue
		}
		if out.Tables > 1 {
			continue // a later communicator's table
		}
		op, err := ops.ParseOp(m[1])
		if err != nil {
			return nil, &LogError{Name: name, Line: i + 1, Reason: err.Error(), Text: shortLine(line)}
		}
		for k, cell := range cells {
			algo, proto, ok := columnOf(k, algos, protos, heads)
			if !ok {
				return nil, &LogError{Name: name, Line: i + 1, Text: shortLine(line),
					Reason: fmt.Sprintf("column %d of NCCL's cost table has no algorithm and protocol above it", k+1)}
			}
			a, errA := nccl.ParseAlgo(algo)
			p, errP := ops.ParseProtocol(proto)
			if errA != nil || errP != nil {
				// An algorithm or protocol commsim does not model.
				if col := algo + "/" + proto; !slices.Contains(out.Unmodelled, col) {
					out.Unmodelled = append(out.Unmodelled, col)
				}
				out.UnmodelledLine = cmp.Or(out.UnmodelledLine, i+1)
				continue
			}
			lat, bw, err := parseCost(cell)
			if err != nil {
				return nil, &LogError{Name: name, Line: i + 1, Text: shortLine(line), Reason: fmt.Sprintf("column %d of NCCL's cost table: %v", k+1, err)}
			}
			key := cellKey{op, a, p}
			if first, twice := cellLine[key]; twice {
				return nil, &LogError{Name: name, Line: i + 1, Text: shortLine(line),
					Reason: fmt.Sprintf("%s's %s/%s cost is given twice in one table (first on line %d)", op, a, p, first)}
			}
			cellLine[key] = i + 1
			out.Cells = append(out.Cells, LoggedCost{Cost: nccl.Cost{Op: op, Algo: a, Protocol: p, LatencyUS: lat, AlgBW: bw}, Line: i + 1})
		}
		if len(cells) < blockColumns(algos, protos, heads) {
			out.CutRows = append(out.CutRows, i+1)
		}
	}
	if len(out.Cells) == 0 && out.Channels == nil && len(out.Calls) == 0 {
		return nil, fmt.Errorf("%s: %w", name, ErrNoCostTable)
	}
	return out, nil
}

// splitCells is a table row's cells between its bars, trimmed.
func splitCells(row string) []string {
	cells := strings.Split(row, "|")
	if last := len(cells) - 1; strings.TrimSpace(cells[last]) == "" {
		cells = cells[:last]
	}
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// cellKey names a cost table's cell.
type cellKey struct {
	op    ops.Op
	algo  nccl.Algo
	proto ops.Protocol
}

// protosPerAlgo is how many columns NCCL prints under each algorithm of a
// block: one a protocol (NCCL_NUM_PROTOCOLS). The Protocol line may name
// more than the block has algorithms for (2.29's PAT block repeats three
// algorithms' worth), so the count, not that line's length, places a
// column.
const protosPerAlgo = 3

// columnOf is the algorithm and protocol of column k: from the block's
// headers (each algorithm over protosPerAlgo columns), or from the
// column's own "algo/proto" before 2.18.
func columnOf(k int, algos, protos, heads []string) (algo, proto string, ok bool) {
	if heads != nil {
		if k >= len(heads) {
			return "", "", false
		}
		algo, proto, ok = strings.Cut(heads[k], "/")
		return strings.TrimSpace(algo), strings.TrimSpace(proto), ok
	}
	if k >= len(protos) || k/protosPerAlgo >= len(algos) {
		return "", "", false
	}
	return algos[k/protosPerAlgo], protos[k], true
}

// blockColumns is how many cells each row of a block has: one under
// each of its columns that columnOf places.
func blockColumns(algos, protos, heads []string) int {
	if heads != nil {
		return len(heads)
	}
	return min(len(protos), len(algos)*protosPerAlgo)
}

// parseCost reads a cell, "latency/bandwidth".
func parseCost(cell string) (lat, bw float64, err error) {
	l, b, ok := strings.Cut(cell, "/")
	if ok {
		lat, err = strconv.ParseFloat(strings.TrimSpace(l), 64)
	}
	if ok && err == nil {
		bw, err = strconv.ParseFloat(strings.TrimSpace(b), 64)
	}
	if !ok || err != nil || !(lat >= 0 && bw >= 0) || math.IsInf(lat+bw, 0) {
		return 0, 0, fmt.Errorf("%q is not latency/bandwidth", cell)
	}
	return lat, bw, nil
}
