package simexec

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
)

// laneSource feeds one lane of one rank to its stream (a sim.Source):
// it turns the lane's operations into the stream's ops as the stream asks
// for them. A held plan's cursor is read as the stream asks; a streamed
// plan's is read ahead by a producer goroutine (see producer).
type laneSource struct {
	job   *ops.RankJob
	cur   *ops.Cursor
	marks rankMarks
	prod  *producer // nil for a held plan's lane
	// ops are the lane's operations read and not yet handed over, and
	// spill the stream ops of one operation that did not fit.
	ops   []ops.Operation
	held  []ops.Operation // storage for ops when there is no producer
	spill []sim.Op
}

// sourceBatch is how many operations a held plan's lane reads at a time.
const sourceBatch = 4

func newLaneSource(job *ops.RankJob, cur *ops.Cursor, marks rankMarks) *laneSource {
	s := &laneSource{job: job, cur: cur, marks: marks}
	if job.Plan.Streamed() {
		s.prod = &producer{cur: cur}
	}
	return s
}

// Next implements sim.Source.
func (s *laneSource) Next(out []sim.Op) (int, error) {
	n := copy(out, s.spill)
	s.spill = s.spill[n:]
	for n < len(out) {
		if len(s.ops) == 0 && !s.read() {
			break
		}
		op := &s.ops[0]
		s.ops = s.ops[1:]
		k, err := s.convert(op, out[n:])
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

// read gets the lane's next operations, and reports false at its end.
func (s *laneSource) read() bool {
	if s.prod != nil {
		s.ops = s.prod.next()
		return len(s.ops) > 0
	}
	if s.held == nil {
		s.held = make([]ops.Operation, sourceBatch)
	}
	s.ops = s.held[:s.cur.Next(s.held)]
	return len(s.ops) > 0
}

// convert writes op as the stream's ops to out: the waits for the marks
// it awaits, the op, and the record of its own mark. What does not fit
// goes to spill; it returns how many went to out.
func (s *laneSource) convert(op *ops.Operation, out []sim.Op) (int, error) {
	j := s.job
	var o sim.Op
	switch op.Kind {
	case ops.StepSend, ops.StepRecv:
		peer, err := j.Peer(op.Peer)
		if err != nil {
			return 0, j.Errorf(op, err)
		}
		dev, ok := peer.(*sim.Device)
		if !ok {
			return 0, j.Errorf(op, fmt.Errorf("%w: peer %s is not simulated", hw.ErrUnknownPeer, peer.Name()))
		}
		o = sim.Op{Kind: sim.OpSend, Src: j.Slice(op.Src), Peer: dev, Tag: j.Tag(op.Tag)}
		if op.Kind == ops.StepRecv {
			o = sim.Op{Kind: sim.OpRecv, Dst: j.Slice(op.Dst), Peer: dev, Tag: j.Tag(op.Tag)}
		}
	case ops.StepReduce:
		o = sim.Op{Kind: sim.OpReduce, Redop: j.ReduceOp(), Dst: j.Slice(op.Dst), Src: j.Slice(op.Src)}
	case ops.StepCopy:
		o = sim.Op{Kind: sim.OpCopy, Dst: j.Slice(op.Dst), Src: j.Slice(op.Src)}
	case ops.StepDivide:
		o = sim.Op{Kind: sim.OpDivide, Dst: j.Slice(op.Dst), Divisor: j.Plan.Ranks}
	default:
		return 0, j.Errorf(op, fmt.Errorf("%w: unknown step kind %v", ops.ErrBadPlan, op.Kind))
	}
	if len(op.Awaits) == 0 && !op.Signals && len(out) > 0 {
		out[0] = o
		return 1, nil
	}
	var all []sim.Op
	for _, m := range op.Awaits {
		all = append(all, sim.Op{Kind: sim.OpWait, Event: s.marks[m], Count: 1})
	}
	all = append(all, o)
	if op.Signals {
		all = append(all, sim.Op{Kind: sim.OpRecord, Event: s.marks[op.Mark]})
	}
	n := copy(out, all)
	s.spill = append(s.spill, all[n:]...)
	return n, nil
}

// Close implements sim.Source.
func (s *laneSource) Close() {
	if s.prod != nil {
		s.prod.stop()
		return
	}
	s.cur.Close()
}

// producer reads a streamed plan's lane on a goroutine of its own, a
// couple of batches ahead of the stream, so that a spare core makes the
// steps while the simulation runs. It starts when the stream first asks.
type producer struct {
	cur     *ops.Cursor
	batches chan []ops.Operation
	quit    chan struct{}
	done    chan struct{}
}

// The producer hands over batches of produceBatch operations and may
// make prefetchDepth of them ahead.
const (
	produceBatch  = 32
	prefetchDepth = 2
)

func (p *producer) start() {
	p.batches = make(chan []ops.Operation, prefetchDepth)
	p.quit, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		defer close(p.batches)
		defer p.cur.Close()
		// The consumer reads one buffer, the channel holds prefetchDepth
		// more and the producer fills one: a buffer is refilled only
		// after the consumer has asked for the next, when it is done with
		// it.
		var bufs [prefetchDepth + 2][]ops.Operation
		for i := 0; ; i = (i + 1) % len(bufs) {
			if bufs[i] == nil {
				bufs[i] = make([]ops.Operation, produceBatch)
			}
			n := p.cur.Next(bufs[i])
			if n == 0 {
				return
			}
			select {
			case p.batches <- bufs[i][:n]:
			case <-p.quit:
				return
			}
		}
	}()
}

// next is the lane's next batch, empty at its end. A batch is valid until
// the next call.
func (p *producer) next() []ops.Operation {
	if p.batches == nil {
		p.start()
	}
	return <-p.batches
}

// stop ends the producer and waits until it has returned.
func (p *producer) stop() {
	if p.batches == nil {
		p.cur.Close()
		return
	}
	close(p.quit)
	<-p.done
}
