package metal

// The GPU seam. Everything above it (devices, streams, events, mailboxes,
// failure propagation, deadlock detection, abort) is plain Go that runs on
// every OS; below it, gpu_darwin.go drives Metal through internal/mtl, and
// the tests drive a CPU fake that runs the Go mirror of the MSL kernels.
// The seam is what lets the scheduler be tested here, with no Mac.
//
// Concurrency: a gpu and its buffers, queues and timelines may be used
// from any goroutine. A batch is built and committed by one goroutine (a
// stream's worker) and then waited for and released by another (its
// completer), never by two at once.

// gpu is one GPU shared by every virtual rank of a world.
type gpu interface {
	// name identifies the GPU in device names and errors.
	name() string
	// newBuffer allocates size > 0 bytes that the host and the GPU both
	// address (MTLStorageModeShared).
	newBuffer(size int) (gpuBuffer, error)
	// newQueue makes a FIFO of batches: batches committed to one queue
	// start in commit order, and each runs its commands in order.
	newQueue() (gpuQueue, error)
	// newTimeline makes a shared event (MTLSharedEvent) with value 0.
	newTimeline() (gpuTimeline, error)
}

// gpuBuffer is shared memory.
type gpuBuffer interface {
	// bytes is the host's view of the whole buffer.
	bytes() []byte
	release()
}

// gpuTimeline is a monotonic counter that batches signal and wait on.
type gpuTimeline interface {
	// signalFromHost raises the value to v; used only to release GPU
	// waiters after a failure.
	signalFromHost(v uint64)
	release()
}

// gpuQueue is one MTLCommandQueue.
type gpuQueue interface {
	// newBatch starts a command buffer.
	newBatch() (gpuBatch, error)
	release()
}

// gpuBatch is one command buffer: commands are encoded, then it is
// committed once, waited for once and released once.
type gpuBatch interface {
	// dispatch runs kernel k over p.N > 0 elements of dst from element
	// p.DOff (and of src from p.SOff, for reduce and copy; src is nil for
	// divide).
	dispatch(k kernelID, dst, src gpuBuffer, p kernelParams) error
	// touch encodes a tiny command so that the batch has GPU timestamps
	// even when it carries nothing else.
	touch() error
	// waitFor holds the commands encoded after it until t reaches v.
	waitFor(t gpuTimeline, v uint64)
	// signal raises t to v once the commands encoded before it are done.
	signal(t gpuTimeline, v uint64)
	commit()
	// wait blocks until the batch has finished and returns the GPU's
	// start and end times in seconds (one clock for the whole GPU) and the
	// batch's error, if it failed.
	wait() (start, end float64, err error)
	release()
}
