package ops

const pairwiseDoc = "pairwise-exchange all-to-all: at step k = 1…p−1 rank r sends block r+k to rank r+k and receives block r−k from rank r−k. No reduction"

var pairwisePlans = map[Op]generator{
	AllToAll: pairwiseAllToAll,
}

// pairwiseAllToAll is the pairwise exchange ((p−1)α + (p−1)·count·β): rank
// r copies its own block, then at step k = 1…p−1 sends block (r+k) mod p
// of In to rank r+k and receives block (r−k) mod p of Out from rank r−k.
// In place, Out block r−k is In block r−k, which r sends only at step p−k:
// when that step is still to come (2k < p) the block is received into Tmp
// and copied to Out after the last step; otherwise it has been sent
// already (at step k itself when 2k = p, the send preceding the receive)
// and is received straight into Out. Tmp holds ⌊(p−1)/2⌋ blocks.
func pairwiseAllToAll(b *builder) error {
	b.expect(2 * (b.p.Ranks - 1)) // at least a send and a receive per peer
	p, n := b.p.Ranks, b.p.Count
	blk := func(buf Buf, j int) Ref { return ref(buf, mod(j, p)*n, n) }
	staged := (p - 1) / 2 // the steps k with 2k < p
	b.tmp(staged, n)
	for r := range b.ranks() {
		b.copy(r, blk(Out, r), blk(In, r))
		for k := 1; k < p; k++ {
			b.send(r, mod(r+k, p), blk(In, r+k), 0)
			dst := blk(Out, r-k)
			if 2*k < p {
				dst = ref(Tmp, (k-1)*n, n)
			}
			b.recv(r, mod(r-k, p), dst, 0)
		}
		for k := 1; k <= staged; k++ {
			b.copy(r, blk(Out, r-k), ref(Tmp, (k-1)*n, n))
		}
	}
	return nil
}
