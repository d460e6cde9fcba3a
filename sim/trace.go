package sim

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/commsim/commsim/hw"
)

// tracer records what happened, in simulation order, for WriteTrace.
//
// It also counts the bytes WriteTrace will write for what it recorded, an
// upper bound that is exact but for the first line's separator. Past the limit
// (Config.TraceMaxBytes) it keeps counting but drops what it holds: a
// trace that will be refused must not hold the memory of a trace that
// could be written.
type tracer struct {
	spans    []span
	counters []counter
	flows    int   // transfers recorded, numbering the arrows
	bytes    int64 // what WriteTrace writes for the spans and counters, but the counters' pid
	counted  int   // counters recorded, dropped or not
	limit    int64 // 0: none
	dropped  bool  // past the limit: spans and counters are gone
	scratch  []byte
}

// TraceTooLargeError is WriteTrace's refusal of a trace larger than
// Config.TraceMaxBytes, returned before anything is written.
type TraceTooLargeError struct {
	// Estimate is the bytes of the whole trace (an upper bound, off by
	// one at most); Limit is Config.TraceMaxBytes.
	Estimate, Limit int64
}

func (e *TraceTooLargeError) Error() string {
	if e == nil {
		return "<nil>"
	}
	return fmt.Sprintf("sim: write trace: the trace would be %d bytes (estimated), more than the limit of %d", e.Estimate, e.Limit)
}

// Bytes of each kind of trace line: the fixed text of its format in
// WriteTrace and the separator ",\n" before it. Keep them in step with WriteTrace
// (TestTraceEstimateBoundsTheTrace checks).
const (
	spanFixedBytes    = len(`{"ph":"X","name":,"pid":,"tid":,"ts":,"dur":,"args":{}}`) + 2
	flowOutFixedBytes = len(`{"ph":"s","name":"transfer","cat":"transfer","id":,"pid":,"tid":,"ts":}`) + 2
	flowInFixedBytes  = len(`{"ph":"f","bp":"e","name":"transfer","cat":"transfer","id":,"pid":,"tid":,"ts":}`) + 2
	counterFixedBytes = len(`{"ph":"C","name":,"pid":,"ts":,"args":{"GB/s":}}`) + 2
	instantFixedBytes = len(`{"ph":"i","s":"t","name":,"pid":,"tid":,"ts":,"args":{}}`) + 2
	globalFixedBytes  = len(`{"ph":"i","s":"g","name":,"pid":0,"tid":0,"ts":,"args":{}}`) + 2
)

// add counts n more bytes of trace, and drops what the tracer holds when
// they pass the limit. It reports whether to keep the new record.
func (t *tracer) add(n int) bool {
	t.bytes += int64(n)
	if t.limit > 0 && t.bytes > t.limit && !t.dropped {
		t.dropped = true
		t.spans, t.counters = nil, nil
	}
	return !t.dropped
}

// spanBytes is what WriteTrace writes for sp, arrows included.
func spanBytes(sp *span) int {
	tid := sp.tid
	if tid < 0 {
		tid = networkTID
	}
	switch sp.kind {
	case instantSpan:
		return instantFixedBytes + quotedLen(sp.name) + intLen(sp.rank) + intLen(tid) + microsLen(sp.start) + len(sp.args)
	case globalSpan:
		return globalFixedBytes + quotedLen(sp.name) + microsLen(sp.start) + len(sp.args)
	}
	n := spanFixedBytes + quotedLen(sp.name) + intLen(sp.rank) + intLen(tid) + microsLen(sp.start) + microsLen(sp.end-sp.start) + len(sp.args)
	if sp.flowOut > 0 {
		n += flowOutFixedBytes + intLen(sp.flowOut) + intLen(sp.rank) + intLen(tid) + microsLen(sp.start)
	}
	if sp.flowIn > 0 {
		n += flowInFixedBytes + intLen(sp.flowIn) + intLen(sp.rank) + intLen(tid) + microsLen(sp.start)
	}
	return n
}

func (t *tracer) addSpan(sp span) {
	if t.add(spanBytes(&sp)) {
		t.spans = append(t.spans, sp)
	}
}

// quotedLen is len(strconv.Quote(s)), without building it for the plain
// ASCII names that are nearly all of them.
func quotedLen(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return len(strconv.Quote(s))
		}
	}
	return len(s) + 2
}

func intLen(v int) int {
	n := 1
	if v < 0 {
		n, v = 2, -v
	}
	for ; v >= 10; v /= 10 {
		n++
	}
	return n
}

// microsLen is len(micros(t)).
func microsLen(t Time) int {
	n := 8 // "." and six digits, and the first digit of the whole part
	if t < 0 {
		n, t = n+1, -t
	}
	for w := t / Microsecond; w >= 10; w /= 10 {
		n++
	}
	return n
}

type span struct {
	kind       spanKind
	rank, tid  int // tid: stream id, or -1 for the network track
	name       string
	start, end Time
	args       string // preformatted JSON object members
	flowOut    int    // > 0: an arrow starts at this span
	flowIn     int    // > 0: an arrow ends at this span
	// peer, tag and index name a transfer on a network track (the other
	// end, the message's tag, the send's place on its stream), so that
	// transfers that start at one instant are written in the same order
	// whatever order the engine ran them in.
	peer, index int
	tag         uint64
}

// spanKind is how a span is written: a slice, an instant on its track
// (an operation that took no time), or an instant across the whole trace
// (a marker, a fault).
type spanKind uint8

const (
	sliceSpan   spanKind = iota // "ph":"X"
	instantSpan                 // "ph":"i", "s":"t"
	globalSpan                  // "ph":"i", "s":"g"
)

// counter is one link direction's total rate from time at on.
type counter struct {
	at   Time
	link *link
	rate float64 // bytes per picosecond
}

// op records a finished operation: a slice named by its kind, or by its
// label for a compute (a layer's forward); an instant when it took no
// time (a record, a wait already met, a local copy).
func (t *tracer) op(s *Stream, o *op, now Time) {
	name := opNames[o.kind]
	if o.kind == opCompute && o.label != "" {
		name = o.label
	}
	kind := sliceSpan
	if now == o.start {
		kind = instantSpan
	}
	t.addSpan(span{kind: kind, rank: s.dev.rank, tid: s.onDevice, name: name, start: o.start, end: now,
		args: `"op":` + strconv.Quote(o.String()) + `,"index":` + strconv.Itoa(o.index)})
}

// failed records a stream's failure as an instant on its track.
func (t *tracer) failed(s *Stream, now Time, err error) {
	t.addSpan(span{kind: instantSpan, rank: s.dev.rank, tid: s.onDevice, name: "failed", start: now, end: now,
		args: `"error":` + strconv.Quote(err.Error())})
}

// global records an instant across the whole trace: a marker, a fault or
// what a fault caused.
func (t *tracer) global(now Time, name string) {
	t.addSpan(span{kind: globalSpan, name: name, start: now, end: now})
}

// Mark puts a named instant across the whole trace at the current
// simulated time, such as "allreduce 64MiB out-of-place" where a run
// begins, so a person can find it; without tracing, or on a nil
// cluster (a real backend's), it does nothing.
func (c *Cluster) Mark(name string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trace != nil {
		c.trace.global(c.eng.now, name)
	}
}

// transfer records a finished send as a span on the sender's network track,
// an arrival on the receiver's, and an arrow between them.
func (t *tracer) transfer(from *Device, o *op, now Time) {
	t.flows++
	t.addSpan(span{rank: from.rank, tid: -1, name: "flow to " + o.peer.name, start: o.start, end: now, flowOut: t.flows,
		peer: o.peer.rank, tag: o.tag, index: o.index,
		args: fmt.Sprintf(`"bytes":%d,"from":%d,"to":%d,"tag":%d`, o.src.Bytes(), from.rank, o.peer.rank, o.tag)})
	t.addSpan(span{rank: o.peer.rank, tid: -1, name: "arrival from " + from.name, start: now, end: now, flowIn: t.flows,
		peer: from.rank, tag: o.tag, index: o.index,
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
		t.counted++
		t.scratch = strconv.AppendFloat(t.scratch[:0], sum*1e3, 'g', 12, 64)
		if t.add(counterFixedBytes + len("link ") + quotedLen(l.name) + microsLen(now) + len(t.scratch)) {
			t.counters = append(t.counters, counter{at: now, link: l, rate: sum})
		}
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
//     "links" process, in GB/s, changing whenever the fair shares do;
//   - operations that took no time are instants on their track, a
//     stream's failure is an instant named "failed", and markers (Mark),
//     faults and what they caused (FaultLog's lines) are instants across
//     the trace.
//
// Events are written in order of their start time (ties by rank and
// track, then in the order they were recorded), so every track reads in
// time order.
//
// Times are microseconds with picosecond precision. The output depends
// only on the simulation, so a rerun writes the same bytes. Tracing must be
// enabled with Config.Trace.
func (c *Cluster) WriteTrace(w io.Writer) error {
	if err := c.made(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.trace == nil:
		return fmt.Errorf("sim: write trace: tracing is off (set Config.Trace)")
	case w == nil:
		return fmt.Errorf("sim: write trace: %w: no writer", hw.ErrBadArgument)
	}
	if err := c.checkTrace(); err != nil {
		return err
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
	for _, s := range c.streamsByRank() {
		kind := "comm"
		if s.computes {
			kind = "compute"
		}
		emit(`{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"%s stream %d"}}`, s.dev.rank, s.onDevice, kind, s.onDevice)
	}
	linksPID := len(c.devices)
	if len(c.trace.counters) > 0 {
		emit(`{"ph":"M","name":"process_name","pid":%d,"args":{"name":"links"}}`, linksPID)
	}
	// Spans are recorded when they end: a long transfer ends after a short
	// one that began later. Those that start together are taken track by
	// track, a stream's in the order they were recorded (its own), a
	// network track's by the transfers' other end, tag and place on the
	// sending stream: the engine ran spans that tie in an order that
	// goroutines enqueuing their work, one a rank, can change.
	slices.SortStableFunc(c.trace.spans, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.rank, b.rank), cmp.Compare(a.tid, b.tid),
			cmp.Compare(a.peer, b.peer), cmp.Compare(a.tag, b.tag), cmp.Compare(a.index, b.index))
	})
	// Flows are numbered as they are recorded: number them again as they
	// are written, for the same reason.
	flowIDs, written := make([]int, c.trace.flows+1), 0 // recorded ids are 1..flows
	flowID := func(recorded int) int {
		if flowIDs[recorded] == 0 {
			written++
			flowIDs[recorded] = written
		}
		return flowIDs[recorded]
	}
	for _, sp := range c.trace.spans {
		tid := sp.tid
		if tid < 0 {
			tid = networkTID
		}
		switch sp.kind {
		case instantSpan:
			emit(`{"ph":"i","s":"t","name":%s,"pid":%d,"tid":%d,"ts":%s,"args":{%s}}`, strconv.Quote(sp.name), sp.rank, tid, micros(sp.start), sp.args)
			continue
		case globalSpan:
			emit(`{"ph":"i","s":"g","name":%s,"pid":0,"tid":0,"ts":%s,"args":{%s}}`, strconv.Quote(sp.name), micros(sp.start), sp.args)
			continue
		}
		emit(`{"ph":"X","name":%s,"pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":{%s}}`,
			strconv.Quote(sp.name), sp.rank, tid, micros(sp.start), micros(sp.end-sp.start), sp.args)
		if sp.flowOut > 0 {
			emit(`{"ph":"s","name":"transfer","cat":"transfer","id":%d,"pid":%d,"tid":%d,"ts":%s}`, flowID(sp.flowOut), sp.rank, tid, micros(sp.start))
		}
		if sp.flowIn > 0 {
			emit(`{"ph":"f","bp":"e","name":"transfer","cat":"transfer","id":%d,"pid":%d,"tid":%d,"ts":%s}`, flowID(sp.flowIn), sp.rank, tid, micros(sp.start))
		}
	}
	// A link's rate at an instant is its last counter then, so each link's
	// keep their order; links that change together are taken by id.
	slices.SortStableFunc(c.trace.counters, func(a, b counter) int {
		return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.link.id, b.link.id))
	})
	for _, ct := range c.trace.counters {
		emit(`{"ph":"C","name":%s,"pid":%d,"ts":%s,"args":{"GB/s":%s}}`,
			strconv.Quote("link "+ct.link.name), linksPID, micros(ct.at), strconv.FormatFloat(ct.rate*1e3, 'g', 12, 64))
	}
	bw.WriteString("\n]}\n")
	return bw.Flush()
}

// TraceBytes returns the bytes WriteTrace would write now (an upper
// bound, off by one at most); 0 when tracing is off. It
// counts everything recorded, also past Config.TraceMaxBytes.
func (c *Cluster) TraceBytes() int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.traceBytes()
}

// CheckTrace returns a *TraceTooLargeError when the trace recorded so far
// is larger than Config.TraceMaxBytes, so WriteTrace would refuse it, and
// nil otherwise.
func (c *Cluster) CheckTrace() error {
	if err := c.made(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkTrace()
}

func (c *Cluster) checkTrace() error {
	if c.trace == nil || c.trace.limit <= 0 {
		return nil
	}
	if n := c.traceBytes(); n > c.trace.limit {
		return &TraceTooLargeError{Estimate: n, Limit: c.trace.limit}
	}
	return nil
}

func (c *Cluster) traceBytes() int64 {
	t := c.trace
	if t == nil {
		return 0
	}
	const (
		process = len(`{"ph":"M","name":"process_name","pid":,"args":{"name":}}`) + 2
		thread  = len(`{"ph":"M","name":"thread_name","pid":,"tid":,"args":{"name":"network"}}`) + 2
		stream  = len(`{"ph":"M","name":"thread_name","pid":,"tid":,"args":{"name":" stream "}}`) + 2
	)
	n := int64(len(`{"displayTimeUnit":"ns","traceEvents":[`) + len("\n]}\n"))
	for _, d := range c.devices {
		n += int64(process + intLen(d.rank) + len("\"rank  ()\"") + intLen(d.rank) + quotedLen(d.name) - 2)
		n += int64(thread + intLen(d.rank) + intLen(networkTID))
	}
	for _, s := range c.streams {
		kind := len("comm")
		if s.computes {
			kind = len("compute")
		}
		n += int64(stream + intLen(s.dev.rank) + 2*intLen(s.onDevice) + kind)
	}
	linksPID := len(c.devices)
	if t.counted > 0 {
		n += int64(process + intLen(linksPID) + len(`"links"`))
	}
	return n + t.bytes + int64(t.counted)*int64(intLen(linksPID))
}

// networkTID is the thread id of each rank's transfer track.
const networkTID = 1 << 20

// micros formats picoseconds as exact decimal microseconds.
func micros(t Time) string {
	return fmt.Sprintf("%d.%06d", t/Microsecond, t%Microsecond)
}
