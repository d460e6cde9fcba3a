package ops

import "github.com/commsim/commsim/hw"

// ParallelRings compiles, for tests and benchmarks, an all-reduce of
// lanes rings run side by side: the data is cut into lanes parts, and
// part l goes round its own ring on lane l with tags of its own, as
// NCCL's channels do. It streams when it is large, like Compile's plans.
func ParallelRings(ranks, count, lanes int, streamed bool) (*Plan, error) {
	s := Spec{Op: AllReduce, Algo: "rings", Ranks: ranks, Count: count, DType: hw.F32, Redop: hw.Sum}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	above := streamAbove
	if streamed {
		above = -1
	}
	return compile(s, parallelRings(lanes), count, count, above)
}

func parallelRings(lanes int) generator {
	return func(b *builder) error {
		p, n := b.p.Ranks, b.p.Count
		_, most := chunk(n, lanes, 0)
		_, maxLen := chunk(most, p, 0)
		b.tmp(lanes, maxLen)
		for l := range b.lanes(lanes) {
			lb := laneBuilder{b, l}
			off, ln := chunk(n, lanes, l)
			c := func(i int) Ref { o, cl := chunk(ln, p, mod(i, p)); return ref(Out, off+o, cl) }
			tag := func(k int) uint32 { return uint32(2*p*l + k) }
			for r := range b.ranks() {
				lb.copy(r, ref(Out, off, ln), ref(In, off, ln))
				for k := 0; k < p-1; k++ {
					in := c(r - k - 1)
					lb.send(r, mod(r+1, p), c(r-k), tag(k))
					lb.recv(r, mod(r-1, p), ref(Tmp, l*maxLen, in.Len), tag(k))
					lb.reduce(r, in, ref(Tmp, l*maxLen, in.Len))
				}
				for k := 0; k < p-1; k++ {
					lb.send(r, mod(r+1, p), c(r+1-k), tag(p-1+k))
					lb.recv(r, mod(r-1, p), c(r-k), tag(p-1+k))
				}
			}
		}
		return nil
	}
}
