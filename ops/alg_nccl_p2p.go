package ops

const ncclP2PDoc = "NCCL's point-to-point: a rank's sends and receives of one call go out together, each exchange " +
	"on its own lane (all-to-all: lane k−1 sends block r+k to rank r+k and receives block r−k from rank r−k; " +
	"gather: the root receives block root+k on lane k−1, which rank root+k sends it on; " +
	"sendrecv: lane 0 sends to r+1, lane 1 receives from r−1). No reduction"

var ncclP2PPlans = map[Op]generator{
	AllToAll: ncclP2PAllToAll,
	Gather:   ncclP2PGather,
	SendRecv: ncclP2PSendRecv,
}

// ncclP2PGather: NCCL's gather (ncclGather, or nccl-tests' group of
// sends to the root on older releases): the root copies its own block and,
// on lane k−1, receives block root+k from rank root+k, which sends it on
// its lane k−1, every exchange at once.
func ncclP2PGather(b *builder) error {
	p, n, root := b.p.Ranks, b.p.Count, b.p.Root
	b.reserve(p)
	for r := range b.ranks() {
		if k := mod(r-root, p); k != 0 {
			b.add(r, Step{Kind: StepSend, Peer: root, Src: ref(In, 0, n), Tag: uint32(k), Lane: k - 1})
			continue
		}
		laneBuilder{b, 0}.copy(r, ref(Out, r*n, n), ref(In, 0, n))
		for k := 1; k < p; k++ {
			q := mod(r+k, p)
			b.add(r, Step{Kind: StepRecv, Peer: q, Dst: ref(Out, q*n, n), Tag: uint32(k), Lane: k - 1})
		}
	}
	return nil
}

// ncclP2PAllToAll: rank r copies its own block, then on lane k−1, for
// k = 1…p−1, sends In block r+k to rank r+k and receives Out block r−k
// from rank r−k. In place, Out block r−k is In block r−k, which lane
// p−k−1 sends: the receive waits for that send (After), so its plans are
// held.
func ncclP2PAllToAll(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	block := func(buf Buf, i int) Ref { return ref(buf, mod(i, p)*n, n) }
	b.reserve(2*p - 1)
	for r := range b.ranks() {
		laneBuilder{b, 0}.copy(r, block(Out, r), block(In, r))
		sent := make([]int, p) // each receive's After is one of these
		for k := 1; k < p; k++ {
			sent[k] = b.add(r, Step{Kind: StepSend, Peer: mod(r+k, p), Src: block(In, r+k), Tag: uint32(k), Lane: k - 1})
		}
		for k := 1; k < p; k++ {
			b.add(r, Step{Kind: StepRecv, Peer: mod(r-k, p), Dst: block(Out, r-k), Tag: uint32(k), Lane: k - 1, After: sent[p-k : p-k+1 : p-k+1]})
		}
	}
	return nil
}

// ncclP2PSendRecv: rank r sends In to r+1 on lane 0 and receives Out from
// r−1 on lane 1, after its send (in place, Out is In).
func ncclP2PSendRecv(b *builder) error {
	p, n := b.p.Ranks, b.p.Count
	for r := range b.ranks() {
		if p == 1 {
			laneBuilder{b, 0}.copy(r, ref(Out, 0, n), ref(In, 0, n))
			continue
		}
		sent := b.add(r, Step{Kind: StepSend, Peer: mod(r+1, p), Src: ref(In, 0, n), Lane: 0})
		b.add(r, Step{Kind: StepRecv, Peer: mod(r-1, p), Dst: ref(Out, 0, n), Lane: 1, After: []int{sent}})
	}
	return nil
}
