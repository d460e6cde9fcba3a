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
	// A held lane's operations read and not yet handed over, and spill
	// the stream ops of one operation that did not fit; a streamed lane's
	// from its producer.
	ops     []ops.Operation
	held    []ops.Operation // storage for ops
	spill   []sim.Op
	scratch []sim.Op // storage for an operation's stream ops that do not fit
	fed     []fedOp
	// wire is how the plan's sends and switch steps move (ops.Plan.Wire;
	// its reductions are then fused into them), and launch the
	// delay that opens each lane (ops.Plan.Launch), until it is given.
	wire   *sim.Wire
	launch sim.Time
	// netGroup is the rank's network group's devices (ops.Spec.NetGroup),
	// found at its first network collective.
	netGroup []*sim.Device
}

// sourceBatch is how many operations a held plan's lane reads at a time.
const sourceBatch = 4

func newLaneSource(job *ops.RankJob, cur *ops.Cursor, marks rankMarks, wire *sim.Wire) *laneSource {
	s := &laneSource{job: job, cur: cur, marks: marks, wire: wire, launch: sim.FromSeconds(job.Plan.Launch)}
	if job.Plan.Streamed() {
		s.prod = &producer{cur: cur}
	}
	return s
}

// Next implements sim.Source.
func (s *laneSource) Next(out []sim.Op) (int, error) {
	if s.launch > 0 && len(out) > 0 {
		out[0] = sim.Op{Kind: sim.OpDelay, Duration: s.launch}
		s.launch = 0
		n, err := s.Next(out[1:])
		return n + 1, err
	}
	if s.prod != nil {
		return s.nextFed(out)
	}
	n := copy(out, s.spill)
	s.spill = s.spill[n:]
	for n < len(out) {
		if len(s.ops) == 0 {
			if s.held == nil {
				s.held = make([]ops.Operation, sourceBatch)
			}
			if s.ops = s.held[:s.cur.Next(s.held)]; len(s.ops) == 0 {
				break
			}
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

// nextFed is Next for a streamed lane.
func (s *laneSource) nextFed(out []sim.Op) (int, error) {
	j := s.job
	n := 0
	for n < len(out) {
		if len(s.fed) == 0 {
			batch := s.prod.next()
			if batch.err != nil {
				return 0, batch.err
			}
			if s.fed = batch.ops; len(s.fed) == 0 {
				break
			}
		}
		f := &s.fed[0]
		s.fed = s.fed[1:]
		o, err := s.simOp(f.kind, f.src(), f.dst(), int(f.peer), f.tag)
		if err != nil {
			return 0, fmt.Errorf("simexec: rank %d: %w", j.Rank, err)
		}
		out[n] = o
		n++
	}
	return n, nil
}

// simOp is a step of the lane's rank as the stream's op: the plan's Wire
// on what moves bytes, and its reductions fused into them under a Wire.
func (s *laneSource) simOp(kind ops.StepKind, src, dst ops.Ref, peer int, tag uint32) (sim.Op, error) {
	j := s.job
	switch kind {
	case ops.StepSend, ops.StepRecv:
		dev, err := s.peer(peer)
		if err != nil {
			return sim.Op{}, err
		}
		if kind == ops.StepRecv {
			return sim.Op{Kind: sim.OpRecv, Dst: j.Slice(dst), Peer: dev, Tag: j.Tag(tag)}, nil
		}
		return sim.Op{Kind: sim.OpSend, Src: j.Slice(src), Peer: dev, Tag: j.Tag(tag), Wire: s.wire}, nil
	case ops.StepReduce:
		return sim.Op{Kind: sim.OpReduce, Redop: j.ReduceOp(), Dst: j.Slice(dst), Src: j.Slice(src), Fused: s.wire != nil}, nil
	case ops.StepCopy:
		return sim.Op{Kind: sim.OpCopy, Dst: j.Slice(dst), Src: j.Slice(src)}, nil
	case ops.StepDivide:
		return sim.Op{Kind: sim.OpDivide, Dst: j.Slice(dst), Divisor: j.Plan.Ranks, Fused: s.wire != nil}, nil
	case ops.StepSwitchReduce:
		members, err := s.members(src)
		if err != nil {
			return sim.Op{}, err
		}
		return sim.Op{Kind: sim.OpSwitchReduce, Redop: j.ReduceOp(), Dst: j.Slice(dst), Members: members, Wire: s.wire}, nil
	case ops.StepMulticast:
		members, err := s.members(dst)
		if err != nil {
			return sim.Op{}, err
		}
		return sim.Op{Kind: sim.OpMulticast, Src: j.Slice(src), Members: members, Wire: s.wire}, nil
	case ops.StepNetAllReduce, ops.StepNetAllGather, ops.StepNetReduceScatter:
		if s.netGroup == nil {
			first, stride, n := j.Plan.NetGroup(j.Rank)
			for i := range n {
				dev, err := s.peer(first + i*stride)
				if err != nil {
					return sim.Op{}, err
				}
				s.netGroup = append(s.netGroup, dev)
			}
		}
		return sim.Op{Kind: switchCollectives[kind], Redop: j.ReduceOp(), Dst: j.Slice(dst), Src: j.Slice(src), Group: s.netGroup, Tag: j.Tag(tag), Wire: s.wire}, nil
	}
	return sim.Op{}, fmt.Errorf("%w: unknown step kind %v", ops.ErrBadPlan, kind)
}

// switchCollectives is the simulator's op for each network step.
var switchCollectives = map[ops.StepKind]sim.OpKind{
	ops.StepNetAllReduce:     sim.OpSwitchAllReduce,
	ops.StepNetAllGather:     sim.OpSwitchAllGather,
	ops.StepNetReduceScatter: sim.OpSwitchReduceScatter,
}

// members is ref on every member of the rank's group, in rank order: the
// switch step's slices there.
func (s *laneSource) members(ref ops.Ref) ([]hw.Slice, error) {
	first, n := s.job.Plan.Group(s.job.Rank)
	out := make([]hw.Slice, n)
	for i := range out {
		var err error
		if out[i], err = s.job.MemberSlice(first+i, ref); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// peer is rank q's simulated device.
func (s *laneSource) peer(q int) (*sim.Device, error) {
	peer, err := s.job.Peer(q)
	if err != nil {
		return nil, err
	}
	dev, ok := peer.(*sim.Device)
	if !ok {
		return nil, fmt.Errorf("%w: peer %s is not simulated", hw.ErrUnknownPeer, peer.Name())
	}
	return dev, nil
}

// convert writes op as the stream's ops to out: the waits for the marks
// it awaits, the op, and the record of its own mark. What does not fit
// goes to spill; it returns how many went to out.
func (s *laneSource) convert(op *ops.Operation, out []sim.Op) (int, error) {
	j := s.job
	o, err := s.simOp(op.Kind, op.Src, op.Dst, op.Peer, op.Tag)
	if err != nil {
		return 0, j.Errorf(op, err)
	}
	n := len(op.Awaits) + 1
	if op.Signals {
		n++
	}
	all := out[:0]
	if len(out) < n {
		all = s.scratch[:0] // rare: what does not fit waits in spill
	}
	for _, m := range op.Awaits {
		all = append(all, sim.Op{Kind: sim.OpWait, Event: s.marks[m], Count: 1})
	}
	all = append(all, o)
	if op.Signals {
		all = append(all, sim.Op{Kind: sim.OpRecord, Event: s.marks[op.Mark]})
	}
	if len(out) >= n {
		return n, nil
	}
	s.scratch = all
	k := copy(out, all)
	s.spill = append(s.spill, all[k:]...)
	return k, nil
}

// Close implements sim.Source.
func (s *laneSource) Close() {
	if s.prod != nil {
		s.prod.stop()
		return
	}
	s.cur.Close()
}

// fedOp is a streamed lane's operation as its producer hands it over:
// 48 bytes where an ops.Operation takes 130, so that the batches of a
// thousand lanes waiting to be fed stay in cache (reading them was a
// fifth of a 1024-rank ring all-reduce). Ranks fit in 32 bits (MaxRanks
// is 2^18); offsets and lengths take 64, for buffers up to 2^63 bytes.
type fedOp struct {
	kind           ops.StepKind
	srcBuf, dstBuf ops.Buf
	tag            uint32
	peer           int32
	srcOff, srcLen int
	dstOff, dstLen int
}

// compact is op as a fedOp, or an error for what a streamed lane cannot
// hold (marks between lanes, which only held plans have).
func compact(op *ops.Operation) (fedOp, error) {
	if op.Signals || len(op.Awaits) > 0 {
		return fedOp{}, fmt.Errorf("%w: step %v: a streamed lane cannot order other lanes", ops.ErrBadPlan, op)
	}
	return fedOp{kind: op.Kind, srcBuf: op.Src.Buf, dstBuf: op.Dst.Buf, tag: op.Tag, peer: int32(op.Peer),
		srcOff: op.Src.Off, srcLen: op.Src.Len, dstOff: op.Dst.Off, dstLen: op.Dst.Len}, nil
}

func (f *fedOp) src() ops.Ref { return ops.Ref{Buf: f.srcBuf, Off: f.srcOff, Len: f.srcLen} }
func (f *fedOp) dst() ops.Ref { return ops.Ref{Buf: f.dstBuf, Off: f.dstOff, Len: f.dstLen} }

// producer reads a streamed plan's lane on a goroutine of its own, a
// couple of batches ahead of the stream, so that a spare core makes the
// steps while the simulation runs. It starts when the stream first asks.
type producer struct {
	cur     *ops.Cursor
	batches chan fedBatch
	quit    chan struct{}
	done    chan struct{}
}

// fedBatch is a batch of a lane's operations, or the error that ended it.
type fedBatch struct {
	ops []fedOp
	err error
}

// The producer hands over batches of produceBatch operations and may
// make prefetchDepth of them ahead.
const (
	produceBatch  = 32
	prefetchDepth = 2
)

func (p *producer) start() {
	p.batches = make(chan fedBatch, prefetchDepth)
	p.quit, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		defer close(p.batches)
		defer p.cur.Close()
		// The consumer reads one buffer, the channel holds prefetchDepth
		// more and the producer fills one: a buffer is refilled only
		// after the consumer has asked for the next, when it is done with
		// it.
		var bufs [prefetchDepth + 2][]fedOp
		i := 0
		for read := range p.cur.Batches(produceBatch) {
			b := fedBatch{ops: bufs[i][:0]}
			for k := range read {
				var f fedOp
				if f, b.err = compact(&read[k]); b.err != nil {
					break
				}
				b.ops = append(b.ops, f)
			}
			bufs[i], i = b.ops, (i+1)%len(bufs)
			select {
			case p.batches <- b:
				if b.err != nil {
					return
				}
			case <-p.quit:
				return
			}
		}
	}()
}

// next is the lane's next batch, empty at its end. A batch is valid until
// the next call.
func (p *producer) next() fedBatch {
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
