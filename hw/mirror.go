package hw

// Mirrorer is an optional interface of a Device whose backend can time a
// rank-symmetric program by running one rank of it.
//
// Take a program in which every rank does what rank 0 does, with peers
// renamed by a group of rank permutations that takes rank 0 to any other
// rank (rotation r ↦ r+x mod p, or r ↦ r xor x), on a fabric that looks
// the same from every rank (every device on one switch behind identical
// links, with identical reduction units). Then every rank starts each step
// at the same instant as rank 0, and a flow of rank 0 shares each of its
// links with exactly the images of rank 0's other flows. Running rank 0's
// part alone on a device whose sends to itself cross its own link out and
// back in, taking each message it receives from the one it sent with the
// same tag, gives every rank's times exactly.
//
// Mirror returns such a device when devs is the backend's whole world, in
// rank order, and the backend can promise the above: for the simulator,
// timing-only, untraced, without faults, over such a fabric, and only when
// the cluster was configured to allow it. ok is false otherwise. The
// mirror's buffers hold no data; the world's own clock, streams and link
// counters do not move while the mirror runs.
type Mirrorer interface {
	Mirror(devs []Device) (mirror Device, ok bool, err error)
}
