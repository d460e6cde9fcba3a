package hw

// Device is one rank's accelerator: a simulated GPU, a CUDA GPU (or a virtual
// rank sharing one), or a Metal GPU. Devices of one world share a Kind.
type Device interface {
	// Kind names the backend: "sim", "cuda" or "metal".
	Kind() string
	// Name identifies the device in errors and traces, e.g. "sim:gpu3".
	Name() string
	// Alloc returns a zeroed buffer of n elements of dt. A timing-only
	// backend returns a phantom buffer that has a size and no data.
	Alloc(dt DType, n int) (Buffer, error)
	// NewStream returns a new FIFO queue of asynchronous work.
	NewStream() (Stream, error)
	// NewEvent returns an event that streams of any device in the world can
	// record and wait on.
	NewEvent() (Event, error)
}

// Buffer is device memory holding Len elements of one DType.
// Host data moves in and out only through Write and Read, which are
// synchronous: they see every operation that completed before the call and
// none that is still queued. Synchronize the streams that touch the buffer
// first.
type Buffer interface {
	Device() Device
	DType() DType
	Len() int
	// Phantom reports whether the buffer has a size and no data.
	Phantom() bool
	// Write copies little-endian host bytes into the buffer, starting at
	// element 0; len(src) must be Len()*DType().Size().
	Write(src []byte) error
	// Read copies the buffer into dst, which must be Len()*DType().Size()
	// bytes long. Phantom buffers return ErrPhantom.
	Read(dst []byte) error
	// Free releases the memory. Later use of the buffer is an error.
	Free() error
}

// FreedReporter is a Buffer that can tell it was freed, an optional
// capability (the simulator's, CUDA's and Metal's have it): a run checks
// its buffers with it before it enqueues anything, where a freed one was
// found only once the work reached it, with other ranks' work already
// enqueued.
type FreedReporter interface{ Freed() bool }

// Stream is a FIFO of asynchronous work on one device. Each enqueueing
// method checks its arguments at once and returns an error without
// enqueueing anything if they are wrong. Failures found while the work runs
// are returned by Synchronize. After a failure the stream skips the rest of
// its queue, events it would have recorded fail their waiters, and
// messages it would have sent fail their receivers with its cause,
// wrapped in ErrPeerFailed (not a deadlock). Package hwtest checks a backend against this contract.
type Stream interface {
	Device() Device
	// Copy copies src to dst (same dtype and length, same device).
	Copy(dst, src Slice) error
	// Reduce computes dst[i] = op(dst[i], src[i]) with the arithmetic of
	// ReduceBytes. op is Sum, Prod, Min or Max; Avg is Sum then Divide.
	Reduce(op ReduceOp, dst, src Slice) error
	// Divide computes dst[i] = dst[i] / n with the arithmetic of DivideBytes.
	Divide(dst Slice, n int) error
	// Send transfers src to peer. It is eager: the send completes once the
	// bytes have arrived at peer, whether or not the matching Recv has been
	// enqueued, so src may be reused after the send completes.
	Send(src Slice, peer Device, tag uint64) error
	// Recv completes when the next message from peer with this tag has
	// arrived, and writes it to dst. Messages between one pair of devices
	// with one tag match in FIFO order. A message whose dtype or length
	// differs from dst is an error at Synchronize.
	Recv(dst Slice, peer Device, tag uint64) error
	// Record marks ev as reached once all earlier work on the stream is done.
	Record(ev Event) error
	// Wait holds later work on the stream until the most recent Record of ev
	// enqueued before this call has completed. Waiting on an event that was
	// never recorded does not wait (CUDA's cuStreamWaitEvent semantics).
	Wait(ev Event) error
	// Synchronize blocks until every operation enqueued so far has finished
	// and returns the first failure, if any, naming the device, the
	// operation and the cause.
	Synchronize() error
}

// Event marks a point in a stream. Elapsed time between two events comes from
// simulated time on sim, cuEventElapsedTime on CUDA and GPU timestamps on
// Metal.
type Event interface {
	Device() Device
	// ElapsedSince returns the seconds between start and this event. Both
	// must have completed a Record; otherwise the error wraps ErrNotReady.
	ElapsedSince(start Event) (float64, error)
}

// Aborter is an optional interface of a Device whose stuck work can be
// cancelled, as NCCL's ncclCommAbort cancels a communicator: after Abort,
// pending and later Synchronize calls on the device's streams return an
// error wrapping reason instead of waiting. Watchdogs (ops/comm) call it
// when a collective runs past its timeout. Without it the watchdog still
// returns its error, but the stuck streams stay stuck: their Synchronize
// calls return only if the backend finds a deadlock. (The simulator's
// devices are no Aborters; its Synchronize reports every stuck state as a
// deadlock.)
type Aborter interface {
	Abort(reason error) error
}

// Unwrapper is an optional interface implemented by a Device that decorates
// another one (tracing, fault injection, timing). Capability lookups go
// through it; see As. Without it a decorator hides the optional interfaces
// of the device inside: As sees only the decorator's own methods.
type Unwrapper interface {
	Unwrap() Device
}

// As finds the first device in d's Unwrap chain that has type T, the way
// errors.As finds an error. Use it to look for optional capabilities:
//
//	if native, ok := hw.As[NativeAllReducer](dev); ok { … }
func As[T any](d Device) (T, bool) {
	for d != nil {
		if t, ok := d.(T); ok {
			return t, true
		}
		u, ok := d.(Unwrapper)
		if !ok {
			break
		}
		d = u.Unwrap()
	}
	var zero T
	return zero, false
}
