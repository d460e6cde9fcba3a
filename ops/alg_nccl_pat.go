package ops

import "fmt"

const ncclPATDoc = "NCCL's PAT (Parallel Aggregated Trees, one GPU per node): the data split over Spec.Channels channels, " +
	"each its own lane, in passes of Spec.Chunk elements of each block; every block travels a binomial tree rooted at " +
	"its rank, the trees shifted to every rank and their steps aggregated: log2(ranks) steps, farthest peer first for " +
	"all-gather (each step sends twice the blocks of the last), nearest first for reduce-scatter, where a rank reduces " +
	"into a block's partial its tree children's in order of distance (((x op T[+1]) op T[+2]) op T[+4] …)"

var ncclPATPlans = map[Op]generator{
	AllGather:     ncclPATAllGather,
	ReduceScatter: ncclPATReduceScatter,
}

// patOneGPUPerNode refuses nodes of several GPUs: NCCL runs PAT only with
// one GPU per node, where every step crosses the network. A spec without
// nodes (NodeRanks 0) is one GPU a rank, as the suites that run every
// algorithm on every backend build it.
func patOneGPUPerNode(s Spec) error {
	if s.NodeRanks > 1 {
		return fmt.Errorf("%w: PAT runs with one GPU per node (NCCL uses it only then), and %d ranks make nodes of %d",
			ErrUnsupported, s.Ranks, s.NodeRanks)
	}
	return nil
}

// patDistances is the distances of PAT's steps over p ranks, nearest
// first: 1, 2, 4, … below p.
func patDistances(p int) []int {
	var out []int
	for d := 1; d < p; d *= 2 {
		out = append(out, d)
	}
	return out
}

// ncclPATAllGather: channel c gathers its share of every rank's block in
// passes of Chunk elements of each. Block s goes down a binomial tree
// rooted at rank s: at the step of distance d (the largest power of two
// below Ranks first, halving to 1), a rank at distance v = (r−s) mod Ranks
// from the root with v a multiple of 2d and v+d < Ranks sends it to rank
// r+d. A rank's sends of one step all go to r+d, its receives all come
// from r−d, on the step's tag, so NCCL's aggregation of a step's blocks
// into one exchange is the plan's back-to-back sends to one peer. No
// reduction; Out block r starts as a copy of In.
func ncclPATAllGather(b *builder) error {
	if err := patOneGPUPerNode(b.p.Spec); err != nil {
		return err
	}
	p, n := b.p.Ranks, b.p.Count
	C := channels(b.p.Spec, n)
	dist := patDistances(p)
	for c := range b.lanes(C) {
		lb := laneBuilder{b, c}
		off, ln := chunk(n, C, c)
		for r := range b.ranks() {
			lb.copy(r, ref(Out, r*n+off, ln), ref(In, off, ln))
			passes(ln, b.p.Chunk, func(o, m int) {
				blk := func(v int) Ref { return ref(Out, mod(r-v, p)*n+off+o, m) }
				for k := len(dist) - 1; k >= 0; k-- {
					d, tag := dist[k], uint32(len(dist)*c+k)
					for v := 0; v+d < p; v += 2 * d {
						lb.send(r, mod(r+d, p), blk(v), tag)
					}
					for v := d; v < p; v += 2 * d {
						lb.recv(r, mod(r-d, p), blk(v), tag)
					}
				}
			})
		}
	}
	return nil
}

// ncclPATReduceScatter: the all-gather's trees run backwards, nearest
// step first: at the step of distance d, a rank at distance v from block
// s's owner with v ≡ d (mod 2d) sends its partial of block s to rank r−d,
// and one with v a multiple of 2d and v+d < Ranks receives rank r+d's
// and reduces it into its own. A rank's partial of block s is its In
// block s where no child has sent one, else a slot of the channel's Tmp:
// the first child's partial is received into it and the rank's own input
// reduced in, later ones arrive in the channel's incoming slot. Reduction
// order, per element of block s, with v the distance from s:
// T[v] = ((x[v] op T[v+1]) op T[v+2]) op T[v+4] … over the children
// v+2^i < Ranks with 2^i below v's lowest set bit (any for the root);
// the owner's T[0] is copied to Out and divided for avg.
func ncclPATReduceScatter(b *builder) error {
	if err := patOneGPUPerNode(b.p.Spec); err != nil {
		return err
	}
	p, n := b.p.Ranks, b.p.Count
	C := channels(b.p.Spec, n)
	piece := passLimit(b.p.Spec, n, C, 1)
	// Per channel: a partial for every even distance (those with
	// children), and the incoming slot.
	slots := (p+1)/2 + 1
	if p > 1 {
		b.tmp(C*slots, piece)
	}
	dist := patDistances(p)
	for c := range b.lanes(C) {
		lb := laneBuilder{b, c}
		off, ln := chunk(n, C, c)
		base := c * slots * piece
		for r := range b.ranks() {
			passes(ln, b.p.Chunk, func(o, m int) {
				out := ref(Out, off+o, m)
				if p == 1 {
					lb.copy(r, out, ref(In, off+o, m))
					lb.finishAvg(r, out)
					return
				}
				in := func(v int) Ref { return ref(In, mod(r-v, p)*n+off+o, m) }
				partial := func(v int) Ref {
					if v%2 == 1 || v+1 >= p {
						return in(v) // no child: its own input
					}
					return ref(Tmp, base+v/2*piece, m)
				}
				incoming := ref(Tmp, base+(slots-1)*piece, m)
				for k, d := range dist {
					tag := uint32(len(dist)*c + k)
					for v := d; v < p; v += 2 * d {
						lb.send(r, mod(r-d, p), partial(v), tag)
					}
					for v := 0; v+d < p; v += 2 * d {
						acc := partial(v)
						if d == 1 {
							lb.recv(r, mod(r+d, p), acc, tag)
							lb.reduce(r, acc, in(v))
							continue
						}
						lb.recv(r, mod(r+d, p), incoming, tag)
						lb.reduce(r, acc, incoming)
					}
				}
				lb.copy(r, out, partial(0))
				lb.finishAvg(r, out)
			})
		}
	}
	return nil
}
