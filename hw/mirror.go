package hw

// Mirrorer is an optional interface of a Device whose backend can time a
// rank-symmetric program by running a few of its ranks.
//
// Take a program in which every rank r does what rank 0 does with its
// peers renamed by q ↦ q+r mod p (rotation) or q ↦ q xor r (xor, p a
// power of two), and a fabric that the renamings by multiples of some
// block b map onto itself (every GPU on one switch: b = 1; nodes of b
// GPUs on a network: b = the node size). Then rank r+k·b starts each step
// at the same instant as rank r, and each flow shares its links only with
// images of the flows of ranks 0..b-1. Running ranks 0..b-1 alone, on a
// mirror where every link stands for its orbit and messages to rank q go
// to rank q mod b, gives every rank's times exactly, provided the
// messages pair up (the program's business: see ops).
//
// Mirror returns the mirror's devices, in rank order, and b, when devs is
// the backend's whole world in rank order and the backend can promise the
// above: for the simulator, timing-only, untraced, without faults, idle,
// and only when the cluster was configured to allow it. xor selects the
// renaming. ok is false otherwise. The mirror's buffers hold no data; the
// world's own clock, streams and link counters do not move while the
// mirror runs.
type Mirrorer interface {
	Mirror(devs []Device, xor bool) (mirror []Device, block int, ok bool, err error)
}
