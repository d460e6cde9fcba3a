package verify

import (
	"fmt"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// oneByOne is the reference judged the plain way, element by element and
// rank by rank, as CountWrong did before it shared reductions and split the
// work over cores: the parallel judge must agree with it on every count
// and on the first wrong element's description.
func oneByOne(c Case, outputs [][]byte) (wrong int, first string) {
	s := c.Spec
	p, n, size := s.Ranks, s.Count, s.DType.Size()
	in := func(q, i int) uint64 { return leBits(c.Inputs[q][i*size : (i+1)*size]) }
	_, outLen := s.BufferLens()
	vals := make([]uint64, p)
	for r := range p {
		if !Defined(s, r) {
			continue
		}
		for j := range outLen {
			got := leBits(outputs[r][j*size : (j+1)*size])
			var ok bool
			var want string
			if s.Op.Reduces() {
				base := cond(s.Op == ops.ReduceScatter, r*n, 0)
				for q := range p {
					vals[q] = in(q, base+j)
				}
				ok, want = judgeReduce(s.DType, s.Redop, vals, got)
			} else {
				var w uint64
				switch s.Op {
				case ops.AllGather, ops.Gather:
					w = in(j/n, j%n)
				case ops.Broadcast:
					w = in(s.Root, j)
				case ops.AllToAll:
					w = in(j/n, r*n+j%n)
				case ops.SendRecv:
					w = in((r+p-1)%p, j)
				}
				ok, want = got == w, fmtElem(s.DType, w)
			}
			if !ok {
				if wrong++; wrong == 1 {
					first = fmt.Sprintf("rank %d element %d = %s, want %s", r, j, fmtElem(s.DType, got), want)
					if s.Op.Reduces() {
						var b []byte
						for _, v := range vals {
							b = appendElem(b, s.DType, v)
						}
						first += " (inputs " + FormatElems(s.DType, b) + ")"
					}
				}
			}
		}
	}
	return wrong, first
}

// TestCountWrongAgreesWithOneByOne runs the judge over outputs of several
// chunks with wrong elements scattered over ranks and chunks (the later
// rank's in an earlier chunk), for every op, and compares it with the
// element-by-element reference.
func TestCountWrongAgreesWithOneByOne(t *testing.T) {
	const p = 4
	count := 2*judgeChunk + 5
	for _, op := range ops.Ops() {
		if op == ops.Barrier {
			continue
		}
		for _, dt := range []hw.DType{hw.F32, hw.I32} {
			redops := []hw.ReduceOp{hw.Sum}
			if op.Reduces() {
				redops = []hw.ReduceOp{hw.Prod, hw.Max, hw.Avg}
			}
			for _, redop := range redops {
				s := ops.Spec{Op: op, Ranks: p, Count: count, Root: 2, DType: dt, Redop: redop}
				c := Case{Spec: s}
				var err error
				if c.Inputs, err = PatternInputs(s); err != nil {
					t.Fatal(err)
				}
				right := expectedOutputs(t, c)
				outputs := make([][]byte, p)
				for r := range outputs {
					outputs[r] = append([]byte(nil), right[r]...)
				}
				if n, first, err := CountWrong(c, outputs); n != 0 || first != "" || err != nil {
					t.Fatalf("%v: right outputs judged %d wrong (%s), %v", s, n, first, err)
				}
				size := dt.Size()
				for _, at := range []struct{ rank, elem int }{{3, 7}, {2, judgeChunk + 1}, {2, 2 * judgeChunk}, {1, judgeChunk - 1}} {
					if len(outputs[at.rank]) > at.elem*size {
						outputs[at.rank][at.elem*size+size-1] ^= 0x40
					}
				}
				wantN, wantFirst := oneByOne(c, outputs)
				n, first, err := CountWrong(c, outputs)
				if err != nil || n != wantN || first != wantFirst {
					t.Errorf("%v: CountWrong = %d %q %v, element by element %d %q", s, n, first, err, wantN, wantFirst)
				}
				if wantN == 0 {
					t.Errorf("%v: no corruption landed on a defined output", s)
				}
				for _, r := range []int{2, 3} {
					rn, rfirst, err := CountWrongRank(c, r, outputs[r])
					one := make([][]byte, p)
					for q := range one {
						one[q] = outputs[r]
						if q != r {
							one[q] = right[q]
						}
					}
					if wn, wf := oneByOne(c, one); err != nil || rn != wn || rfirst != wf {
						t.Errorf("%v rank %d: CountWrongRank = %d %q %v, element by element %d %q", s, r, rn, rfirst, err, wn, wf)
					}
				}
			}
		}
	}
}

// expectedOutputs computes every rank's right output on the host: copies
// exactly, reductions in rank order through hw's arithmetic.
func expectedOutputs(t *testing.T, c Case) [][]byte {
	t.Helper()
	s := c.Spec
	p, n, size := s.Ranks, s.Count, s.DType.Size()
	_, outLen := s.BufferLens()
	out := make([][]byte, p)
	for r := range p {
		out[r] = make([]byte, outLen*size)
		if !s.Op.Reduces() {
			j := newJudge(c, nil, nil)
			for e := range outLen {
				copy(out[r][e*size:], appendElem(nil, s.DType, j.copied(r, e)))
			}
			continue
		}
		base := cond(s.Op == ops.ReduceScatter, r*n, 0) * size
		acc := out[r]
		copy(acc, c.Inputs[0][base:])
		op := cond(s.Redop == hw.Avg, hw.Sum, s.Redop)
		for q := 1; q < p; q++ {
			if err := hw.ReduceBytes(op, s.DType, acc, c.Inputs[q][base:base+len(acc)]); err != nil {
				t.Fatal(err)
			}
		}
		if s.Redop == hw.Avg {
			if err := hw.DivideBytes(s.DType, acc, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// TestPatternInputsKeepTheirBits: the pattern, now encoded once and on
// every core, is bit for bit what rounding the values to the dtype, then
// encoding the rounded values, made: the inputs of a --check line and of
// a Reproducer do not change.
func TestPatternInputsKeepTheirBits(t *testing.T) {
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.Reduce} {
		for _, dt := range hw.DTypes() {
			for _, redop := range []hw.ReduceOp{hw.Sum, hw.Prod} {
				s := ops.Spec{Op: op, Ranks: 5, Count: 1000, DType: dt, Redop: redop}
				got, err := PatternInputs(s)
				if err != nil {
					t.Fatal(err)
				}
				n, _ := s.BufferLens()
				for r := range s.Ranks {
					raw, _ := hw.FromFloat64s(dt, patternValues(s, r, 0, n))
					rounded, _ := hw.ToFloat64s(dt, raw)
					want, _ := hw.FromFloat64s(dt, rounded)
					if string(got[r]) != string(want) {
						t.Errorf("%v rank %d: the pattern's bits changed", s, r)
					}
				}
			}
		}
	}
}

// TestCountWrongCountsEveryElement: CountWrong counts every wrong element, not one per chunk.
func TestCountWrongCountsEveryElement(t *testing.T) {
	c := Case{Spec: ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 2, Count: 5, DType: hw.I32, Redop: hw.Sum},
		Inputs: [][]byte{make([]byte, 20), make([]byte, 20)}}
	outs := [][]byte{make([]byte, 20), make([]byte, 20)}
	outs[0][0], outs[0][8], outs[1][16] = 1, 1, 1 // elements 0 and 2 of rank 0, 4 of rank 1
	n, _, err := CountWrong(c, outs)
	if err != nil || n != 3 {
		t.Fatalf("CountWrong = %d, %v; want 3", n, err)
	}
}

// TestDefinedOnlyOnRanks: a rank the spec does not have has no output.
func TestDefinedOnlyOnRanks(t *testing.T) {
	s := ops.Spec{Op: ops.AllReduce, Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum}
	if Defined(s, -1) || Defined(s, 4) || !Defined(s, 3) {
		t.Error("Defined of ranks -1, 4 and 3 of 4: want false, false, true")
	}
}

// A rank's input made a block at a time is the one made whole: the
// blocks start where the last one ended.
func TestPatternBlocksJoin(t *testing.T) {
	for _, dt := range []hw.DType{hw.U8, hw.F32, hw.BF16} {
		s := ops.Spec{Op: ops.AllReduce, Ranks: 2, Count: 2*patternBlock + 123, DType: dt, Redop: hw.Sum}
		n, _ := s.BufferLens()
		whole, err := hw.FromFloat64s(dt, patternValues(s, 1, 0, n))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := patternBytes(s, 1, n); err != nil || string(got) != string(whole) {
			t.Errorf("%s: the blocked pattern differs from the whole one (%v)", dt, err)
		}
	}
}
