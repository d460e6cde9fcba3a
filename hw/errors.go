package hw

import "errors"

// Sentinel errors. Backends wrap them with the device, the operation and the
// values involved; callers test with errors.Is.
var (
	// ErrBadArgument is returned for a nil buffer, a slice outside its
	// buffer, a buffer on another device, a negative count or an invalid
	// dtype or reduce op.
	ErrBadArgument = errors.New("bad argument")
	// ErrDTypeMismatch is returned when two buffers, or a message and its
	// receive buffer, have different dtypes.
	ErrDTypeMismatch = errors.New("dtype mismatch")
	// ErrSizeMismatch is returned when lengths that must agree do not.
	ErrSizeMismatch = errors.New("size mismatch")
	// ErrUnknownPeer is returned when a send or receive names a device that
	// is not in the same world (or is of another backend).
	ErrUnknownPeer = errors.New("unknown peer")
	// ErrPhantom is returned when a phantom (timing-only) buffer is read or
	// written from the host.
	ErrPhantom = errors.New("phantom buffer has no data")
	// ErrFreed is returned when a freed buffer is used.
	ErrFreed = errors.New("buffer already freed")
	// ErrClosed is returned by any call on a closed world or device.
	ErrClosed = errors.New("closed")
	// ErrNotReady is returned by ElapsedSince when an event has not been
	// recorded and completed.
	ErrNotReady = errors.New("event not ready")
	// ErrMixedKinds is returned by NewWorld when devices of different
	// backends are mixed.
	ErrMixedKinds = errors.New("devices of different kinds in one world")
	// ErrDeadlock is wrapped by errors that report work which can never
	// finish; backends attach which ranks wait for what.
	ErrDeadlock = errors.New("deadlock")
	// ErrPeerFailed is wrapped, with the sender's cause, by the error of a
	// receive whose sender's stream failed before sending the message.
	ErrPeerFailed = errors.New("the sender failed before sending")
	// ErrNotMade is wrapped by the error of a method called on a value
	// that its package's constructor did not make (a nil pointer, a zero
	// struct), here and in every backend and package above: such a value
	// has nothing behind it to act on, so the method refuses, as os.File's
	// do on a nil *File, rather than crash.
	ErrNotMade = errors.New("was not made by its constructor")
)

// BlockedStream is one stream that can never finish, as the deadlock
// reports of every backend (errors wrapping ErrDeadlock) list them.
type BlockedStream struct {
	Rank    int
	Device  string
	Stream  int    // the stream's number, as the backend's errors name it (sim: on its device)
	Op      int    // index of the blocked op in the stream
	Waiting string // the op, with what it waits for
	Pending int    // ops queued after it
}
