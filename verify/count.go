package verify

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"github.com/commsim/commsim/ops"
)

// judgeChunk is how many output elements one worker judges at a time:
// enough to dwarf the hand-off, few enough to spread a 64 MiB output over
// every core.
const judgeChunk = 1 << 14

// chunkVerdict is one chunk's count of wrong elements on each judged rank
// and the index of the first, -1 where none.
type chunkVerdict struct {
	wrong []int
	first []int
}

// countWrongRanks judges the outputs of ranks (in increasing order) against
// every rank's input; the caller has checked the inputs' number and
// lengths. The elements are judged in chunks on every core; the verdict
// (the count, and the first wrong element in rank then element order)
// does not depend on which core judged what.
func countWrongRanks(c Case, ranks []int, outputs [][]byte) (wrong int, first string, err error) {
	s := c.Spec
	size := s.DType.Size()
	_, outLen := s.BufferLens()
	var judged []int
	for _, r := range ranks {
		if !Defined(s, r) {
			continue
		}
		if len(outputs[r]) != outLen*size {
			return 0, "", fmt.Errorf("%w: rank %d output has %d bytes, want %d", ErrWrong, r, len(outputs[r]), outLen*size)
		}
		judged = append(judged, r)
	}
	if len(judged) == 0 || outLen == 0 {
		return 0, "", nil
	}
	verdicts := make([]chunkVerdict, (outLen+judgeChunk-1)/judgeChunk)
	next := make(chan int, len(verdicts))
	for i := range verdicts {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(verdicts)) {
		wg.Go(func() {
			j := newJudge(c, judged, outputs)
			for i := range next {
				verdicts[i] = j.chunk(i*judgeChunk, min((i+1)*judgeChunk, outLen))
			}
		})
	}
	wg.Wait()
	for k, r := range judged {
		firstAt := -1
		for _, v := range verdicts {
			if v.wrong[k] > 0 && firstAt < 0 {
				firstAt = v.first[k]
			}
			wrong += v.wrong[k]
		}
		if firstAt >= 0 && first == "" {
			first = newJudge(c, judged, outputs).describe(r, firstAt)
		}
	}
	return wrong, first, nil
}

// judge holds one worker's scratch for judging elements.
type judge struct {
	c       Case
	ranks   []int
	outputs [][]byte
	vals    []uint64 // one element of every rank's input
}

func newJudge(c Case, ranks []int, outputs [][]byte) *judge {
	return &judge{c: c, ranks: ranks, outputs: outputs, vals: make([]uint64, c.Spec.Ranks)}
}

// in is element i of rank q's input.
func (j *judge) in(q, i int) uint64 { return elemAt(j.c.Inputs[q], i, j.c.Spec.DType.Size()) }

// reduction is what the reference expects of element base+e of a
// reduction, with vals holding every rank's input of it.
func (j *judge) reduction(base, e int) expectation {
	s := j.c.Spec
	i := base + e
	if s.DType.Size() == 4 { // f32 and i32, the most judged: no switch per load
		for q, in := range j.c.Inputs {
			j.vals[q] = uint64(binary.LittleEndian.Uint32(in[4*i:]))
		}
	} else {
		for q := range s.Ranks {
			j.vals[q] = j.in(q, i)
		}
	}
	return expectReduce(s.DType, s.Redop, j.vals)
}

// copied is the input element that output element e of rank r copies.
func (j *judge) copied(r, e int) uint64 {
	s := j.c.Spec
	p, n := s.Ranks, s.Count
	switch s.Op {
	case ops.AllGather, ops.Gather:
		return j.in(e/n, e%n)
	case ops.Broadcast:
		return j.in(s.Root, e)
	case ops.AllToAll:
		return j.in(e/n, r*n+e%n)
	case ops.SendRecv:
		return j.in((r+p-1)%p, e)
	}
	return 0
}

// chunk judges output elements lo..hi-1 of every judged rank. An
// all-reduce's element has one expectation for every rank: it is computed
// once.
func (j *judge) chunk(lo, hi int) chunkVerdict {
	s := j.c.Spec
	size := s.DType.Size()
	v := chunkVerdict{wrong: make([]int, len(j.ranks)), first: make([]int, len(j.ranks))}
	for k := range v.first {
		v.first[k] = -1
	}
	mark := func(k, e int) {
		if v.wrong[k]++; v.first[k] < 0 {
			v.first[k] = e
		}
	}
	for e := lo; e < hi; e++ {
		var shared expectation
		if s.Op.Reduces() && s.Op != ops.ReduceScatter {
			shared = j.reduction(0, e)
		}
		for k, r := range j.ranks {
			got := elemAt(j.outputs[r], e, size)
			switch {
			case s.Op == ops.ReduceScatter:
				if exp := j.reduction(r*s.Count, e); !exp.accepts(got) {
					mark(k, e)
				}
			case s.Op.Reduces():
				if !shared.accepts(got) {
					mark(k, e)
				}
			case got != j.copied(r, e):
				mark(k, e)
			}
		}
	}
	return v
}

// describe names wrong element e of rank r: its value, what was wanted,
// and for a reduction every rank's input of it.
func (j *judge) describe(r, e int) string {
	s := j.c.Spec
	got := elemAt(j.outputs[r], e, s.DType.Size())
	if !s.Op.Reduces() {
		return fmt.Sprintf("rank %d element %d = %s, want %s", r, e, fmtElem(s.DType, got), fmtElem(s.DType, j.copied(r, e)))
	}
	exp := j.reduction(cond(s.Op == ops.ReduceScatter, r*s.Count, 0), e)
	var b []byte
	for _, v := range j.vals {
		b = appendElem(b, s.DType, v)
	}
	return fmt.Sprintf("rank %d element %d = %s, want %s (inputs %s)", r, e, fmtElem(s.DType, got), exp.String(), FormatElems(s.DType, b))
}
