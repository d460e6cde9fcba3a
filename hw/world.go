package hw

import (
	"fmt"
	"slices"
	"sync/atomic"
)

// World is an ordered set of ranks, each bound to a device of one backend
// kind. Rank numbers are local to the world: a sub-world made by Split
// numbers its ranks from 0 again. Messages sent through a world carry the
// world's id in the tag, so traffic of different worlds over the same
// devices never matches by mistake.
type World struct {
	devs   []Device
	ranks  map[Device]int
	id     uint32
	family *worldFamily
}

// worldFamily hands out world ids to a root world and its sub-worlds and
// duplicates, so ids (and with them tags and traces) depend only on the
// order of Split and Dup calls: made from goroutines (every executor
// ops makes, comm.New and paramsync.Start duplicate their world), they
// take the goroutines' order, and a reproducible trace wants them made
// in one.
type worldFamily struct{ next atomic.Uint32 }

// NewWorld binds rank r to devs[r]. Devices must be distinct, non-nil and of
// one Kind.
func NewWorld(devs []Device) (*World, error) {
	return newWorld(devs, &worldFamily{})
}

func newWorld(devs []Device, fam *worldFamily) (*World, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("hw: new world: %w: no devices", ErrBadArgument)
	}
	w := &World{devs: slices.Clone(devs), ranks: make(map[Device]int, len(devs)), family: fam}
	for r, d := range devs {
		if d == nil {
			return nil, fmt.Errorf("hw: new world: %w: rank %d has a nil device", ErrBadArgument, r)
		}
		if d.Kind() != devs[0].Kind() {
			return nil, fmt.Errorf("hw: new world: %w: rank 0 is %s (%s), rank %d is %s (%s)",
				ErrMixedKinds, devs[0].Kind(), devs[0].Name(), r, d.Kind(), d.Name())
		}
		if prev, dup := w.ranks[d]; dup {
			return nil, fmt.Errorf("hw: new world: %w: ranks %d and %d share device %s", ErrBadArgument, prev, r, d.Name())
		}
		w.ranks[d] = r
	}
	w.id = fam.next.Add(1) - 1
	return w, nil
}

// made refuses a World that newWorld did not make (a nil one from a
// NewWorld that failed, say); it always sets family.
func (w *World) made() error {
	if w == nil || w.family == nil {
		return fmt.Errorf("hw: World %w (use hw.NewWorld or a backend's NewWorld)", ErrNotMade)
	}
	return nil
}

// Size is the number of ranks; 0 for a World not made.
func (w *World) Size() int {
	if w == nil {
		return 0
	}
	return len(w.devs)
}

// Kind is the backend kind of every device in the world; "" for a World
// not made.
func (w *World) Kind() string {
	if w.made() != nil {
		return ""
	}
	return w.devs[0].Kind()
}

// ID is the world's number within its family (0 for a root world, and for
// a World not made).
func (w *World) ID() uint32 {
	if w == nil {
		return 0
	}
	return w.id
}

// Device returns the device bound to rank.
func (w *World) Device(rank int) (Device, error) {
	if err := w.made(); err != nil {
		return nil, err
	}
	if rank < 0 || rank >= len(w.devs) {
		return nil, fmt.Errorf("hw: %w: rank %d not in world of %d ranks", ErrBadArgument, rank, len(w.devs))
	}
	return w.devs[rank], nil
}

// Devices returns the devices in rank order; none for a World not made.
func (w *World) Devices() []Device {
	if w == nil {
		return nil
	}
	return slices.Clone(w.devs)
}

// RankOf returns the rank bound to d.
func (w *World) RankOf(d Device) (int, bool) {
	if w == nil {
		return 0, false
	}
	r, ok := w.ranks[d]
	return r, ok
}

// Split partitions the world as MPI_Comm_split does: rank r joins the
// sub-world of color[r], ordered by (key[r], r). A negative color leaves the
// rank out. Sub-worlds are returned in increasing color order.
func (w *World) Split(color, key []int) ([]*World, error) {
	if err := w.made(); err != nil {
		return nil, err
	}
	if len(color) != len(w.devs) || len(key) != len(w.devs) {
		return nil, fmt.Errorf("hw: split: %w: world has %d ranks, got %d colors and %d keys",
			ErrSizeMismatch, len(w.devs), len(color), len(key))
	}
	var colors []int
	for _, c := range color {
		if c >= 0 && !slices.Contains(colors, c) {
			colors = append(colors, c)
		}
	}
	slices.Sort(colors)
	out := make([]*World, 0, len(colors))
	for _, c := range colors {
		var members []int
		for r := range w.devs {
			if color[r] == c {
				members = append(members, r)
			}
		}
		slices.SortStableFunc(members, func(a, b int) int { return key[a] - key[b] })
		devs := make([]Device, len(members))
		for i, r := range members {
			devs[i] = w.devs[r]
		}
		sub, err := newWorld(devs, w.family)
		if err != nil {
			return nil, err
		}
		out = append(out, sub)
	}
	return out, nil
}

// Dup is a world of the same devices in the same order under an id of its
// own, as MPI_Comm_dup: the messages of two libraries that each hold a
// duplicate (a communicator, a gradient server) never match each other's
// receives, as they would on one world, whose tags they would share.
func (w *World) Dup() (*World, error) {
	if err := w.made(); err != nil {
		return nil, err
	}
	return newWorld(w.devs, w.family)
}

// Tag combines the world's id with a caller's tag into the tag a Stream
// sees; 0 for a World not made.
func (w *World) Tag(tag uint32) uint64 {
	if w.made() != nil {
		return 0
	}
	return uint64(w.id)<<32 | uint64(tag)
}

// Send enqueues on s (a stream of one of the world's devices) a send of src
// to rank peer.
func (w *World) Send(s Stream, peer int, src Slice, tag uint32) error {
	p, err := w.peer(s, peer)
	if err != nil {
		return fmt.Errorf("hw: send: %w", err)
	}
	return s.Send(src, p, w.Tag(tag))
}

// Recv enqueues on s a receive into dst of the next message from rank peer
// with tag.
func (w *World) Recv(s Stream, peer int, dst Slice, tag uint32) error {
	p, err := w.peer(s, peer)
	if err != nil {
		return fmt.Errorf("hw: recv: %w", err)
	}
	return s.Recv(dst, p, w.Tag(tag))
}

func (w *World) peer(s Stream, peer int) (Device, error) {
	if err := w.made(); err != nil {
		return nil, err
	}
	if s == nil {
		return nil, fmt.Errorf("%w: nil stream", ErrBadArgument)
	}
	if _, ok := w.ranks[s.Device()]; !ok {
		return nil, fmt.Errorf("%w: stream's device %s is not in this world", ErrUnknownPeer, deviceName(s.Device()))
	}
	if peer < 0 || peer >= len(w.devs) {
		return nil, fmt.Errorf("%w: peer rank %d not in world of %d ranks", ErrUnknownPeer, peer, len(w.devs))
	}
	return w.devs[peer], nil
}
