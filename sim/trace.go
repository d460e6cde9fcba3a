package sim

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// tracer records what happened, in simulation order, for WriteTrace.
type tracer struct {
	spans    []span
	counters []counter
	flows    int // transfers recorded, numbering the arrows
}

type span struct {
	rank, tid  int // tid: stream id, or -1 for the network track
	name       string
	start, end Time
	args       string // preformatted JSON object members
	flowOut    int    // > 0: an arrow starts at this span
	flowIn     int    // > 0: an arrow ends at this span
}

// counter is one link direction's total rate from time at on.
type counter struct {
	at   Time
	link *link
	rate float64 // bytes per picosecond
}

func (t *tracer) op(s *Stream, o *op, now Time) {
	t.spans = append(t.spans, span{rank: s.dev.rank, tid: s.id, name: opNames[o.kind], start: o.start, end: now,
		args: `"op":` + strconv.Quote(o.String()) + `,"index":` + strconv.Itoa(o.index)})
}

// transfer records a finished send as a span on the sender's network track,
// an arrival on the receiver's, and an arrow between them.
func (t *tracer) transfer(from *Device, o *op, now Time) {
	t.flows++
	t.spans = append(t.spans,
		span{rank: from.rank, tid: -1, name: "flow to " + o.peer.name, start: o.start, end: now, flowOut: t.flows,
			args: fmt.Sprintf(`"bytes":%d,"from":%d,"to":%d,"tag":%d`, o.src.Bytes(), from.rank, o.peer.rank, o.tag)},
		span{rank: o.peer.rank, tid: -1, name: "arrival from " + from.name, start: now, end: now, flowIn: t.flows,
			args: fmt.Sprintf(`"bytes":%d,"from":%d`, o.src.Bytes(), from.rank)})
}

// rates records the total rate of each link of a re-solved component.
func (t *tracer) rates(now Time, links []*link) {
	for _, l := range links {
		if l.id < 0 {
			continue // a device's reduction unit or a stream's channel, not a link
		}
		sum := 0.0
		for _, f := range l.flows {
			sum += f.rate
		}
		t.counters = append(t.counters, counter{at: now, link: l, rate: sum})
	}
}

// WriteTrace writes every recorded operation and transfer as Chrome/Perfetto
// trace-event JSON (open it in ui.perfetto.dev or chrome://tracing):
//
//   - each rank is a process and each stream a thread, named compute or
//     comm by whether it ran modelled compute;
//   - transfers are spans on a "network" thread of the sending rank, with
//     an arrow (flow event) to an arrival on the receiving rank's;
//   - every link direction that carried traffic is a counter track of the
//     "links" process, in GB/s, changing whenever the fair shares do.
//
// Times are microseconds with picosecond precision. The output depends
// only on the simulation, so a rerun writes the same bytes. Tracing must be
// enabled with Config.Trace.
func (c *Cluster) WriteTrace(w io.Writer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trace == nil {
		return fmt.Errorf("sim: write trace: tracing is off (set Config.Trace)")
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(`{"displayTimeUnit":"ns","traceEvents":[`)
	first := true
	emit := func(format string, args ...any) {
		if first {
			bw.WriteString("\n")
		} else {
			bw.WriteString(",\n")
		}
		first = false
		fmt.Fprintf(bw, format, args...)
	}
	for _, d := range c.devices {
		emit(`{"ph":"M","name":"process_name","pid":%d,"args":{"name":%s}}`, d.rank, strconv.Quote(fmt.Sprintf("rank %d (%s)", d.rank, d.name)))
		emit(`{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"network"}}`, d.rank, networkTID)
	}
	for _, s := range c.streams {
		kind := "comm"
		if s.computes {
			kind = "compute"
		}
		emit(`{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"%s stream %d"}}`, s.dev.rank, s.id, kind, s.id)
	}
	linksPID := len(c.devices)
	if len(c.trace.counters) > 0 {
		emit(`{"ph":"M","name":"process_name","pid":%d,"args":{"name":"links"}}`, linksPID)
	}
	for _, sp := range c.trace.spans {
		tid := sp.tid
		if tid < 0 {
			tid = networkTID
		}
		emit(`{"ph":"X","name":%s,"pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":{%s}}`,
			strconv.Quote(sp.name), sp.rank, tid, micros(sp.start), micros(sp.end-sp.start), sp.args)
		if sp.flowOut > 0 {
			emit(`{"ph":"s","name":"transfer","cat":"transfer","id":%d,"pid":%d,"tid":%d,"ts":%s}`, sp.flowOut, sp.rank, tid, micros(sp.start))
		}
		if sp.flowIn > 0 {
			emit(`{"ph":"f","bp":"e","name":"transfer","cat":"transfer","id":%d,"pid":%d,"tid":%d,"ts":%s}`, sp.flowIn, sp.rank, tid, micros(sp.start))
		}
	}
	for _, ct := range c.trace.counters {
		emit(`{"ph":"C","name":%s,"pid":%d,"ts":%s,"args":{"GB/s":%s}}`,
			strconv.Quote("link "+ct.link.name), linksPID, micros(ct.at), strconv.FormatFloat(ct.rate*1e3, 'g', 12, 64))
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
