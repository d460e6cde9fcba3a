package sim

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// tracer records what happened, in simulation order, for WriteTrace.
type tracer struct {
	spans []span
}

type span struct {
	rank, tid  int // tid: stream id, or -1 for the network track
	name       string
	start, end Time
	args       string // preformatted JSON object members
}

func (t *tracer) op(s *Stream, o *op, now Time) {
	t.spans = append(t.spans, span{rank: s.dev.rank, tid: s.id, name: opNames[o.kind], start: o.start, end: now,
		args: `"op":` + strconv.Quote(o.String()) + `,"index":` + strconv.Itoa(o.index)})
}

func (t *tracer) transfer(from *Device, o *op, now Time) {
	t.spans = append(t.spans, span{rank: from.rank, tid: -1, name: "flow to " + o.peer.name, start: o.start, end: now,
		args: fmt.Sprintf(`"bytes":%d,"from":%d,"to":%d,"tag":%d`, o.src.Bytes(), from.rank, o.peer.rank, o.tag)})
}

// WriteTrace writes every recorded operation and transfer as Chrome/Perfetto
// trace-event JSON (open it in ui.perfetto.dev or chrome://tracing). Each rank
// is a process, each stream a thread (named compute or comm by whether it
// ran modelled compute), and transfers sit on a "network" thread of the
// sending rank. Times are microseconds with picosecond
// precision. The output depends only on the simulation, so a rerun writes
// the same bytes. Tracing must be enabled with Config.Trace.
func (c *Cluster) WriteTrace(w io.Writer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trace == nil {
		return fmt.Errorf("sim: write trace: tracing is off (set Config.Trace)")
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(`{"displayTimeUnit":"ns","traceEvents":[`)
	first := true
	sep := func() {
		if !first {
			bw.WriteString(",\n")
		} else {
			bw.WriteString("\n")
		}
		first = false
	}
	for _, d := range c.devices {
		sep()
		fmt.Fprintf(bw, `{"ph":"M","name":"process_name","pid":%d,"args":{"name":%s}}`, d.rank, strconv.Quote(fmt.Sprintf("rank %d (%s)", d.rank, d.name)))
	}
	for _, s := range c.streams {
		sep()
		kind := "comm"
		if s.computes {
			kind = "compute"
		}
		fmt.Fprintf(bw, `{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"%s stream %d"}}`, s.dev.rank, s.id, kind, s.id)
	}
	for _, d := range c.devices {
		sep()
		fmt.Fprintf(bw, `{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"network"}}`, d.rank, networkTID)
	}
	for _, sp := range c.trace.spans {
		sep()
		tid := sp.tid
		if tid < 0 {
			tid = networkTID
		}
		fmt.Fprintf(bw, `{"ph":"X","name":%s,"pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":{%s}}`,
			strconv.Quote(sp.name), sp.rank, tid, micros(sp.start), micros(sp.end-sp.start), sp.args)
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// networkTID is the thread id of each rank's transfer track.
const networkTID = 1 << 20

// micros formats picoseconds as exact decimal microseconds.
func micros(t Time) string {
	return fmt.Sprintf("%d.%06d", t/Microsecond, t%Microsecond)
}
