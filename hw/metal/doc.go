// Package metal implements hw on Apple GPUs through Metal.framework, with
// purego's Objective-C runtime and MSL kernels compiled at run time: there
// is no cgo.
//
// Status: everything below is implemented, compiles for darwin/arm64, and
// its platform-independent part is tested on every OS against a CPU fake of
// the GPU. It has NOT run on Apple hardware: nobody on the project has a
// Mac, so the Objective-C bindings, the MSL (its compilation and its
// arithmetic on a real GPU) and the timing are compile-checked only. On a
// Mac, run
//
//	go test ./hw/metal/ -run Metal -v
//
// to check it: TestMetalKernels compares the GPU's kernels with
// hw.ReduceBytes and hw.DivideBytes on every f16 and bf16 bit pattern
// (among other vectors), and TestMetalEquivalence runs proptest's
// sim-versus-backend harness on every algorithm, dtype and reduce op. On other OSes NewWorld, Available and DeviceName return
// ErrUnavailable.
//
// # Worlds and virtual ranks
//
// NewWorld(p) puts p virtual ranks on the Mac's one GPU, named
// "metal:gpu0/r0" … "metal:gpu0/r<p-1>". Each rank has its own buffers,
// streams and events, so any p-rank plan runs on one Mac and can be
// compared bit for bit with the simulator. Devices implement hw.Aborter.
//
// # What maps to what
//
//   - Buffer: an MTLBuffer in shared storage (MTLResourceStorageModeShared).
//     Write and Read are memcpy through its contents pointer, synchronous,
//     and see only completed GPU work (synchronize first, as hw says).
//     Alloc zeroes the memory itself.
//   - Stream: one MTLCommandQueue, one MTLSharedEvent (the stream's
//     "timeline", one value per Record and Send), a worker goroutine that
//     encodes the stream's ops in FIFO order into command buffers, and a
//     completer goroutine that waits for them (waitUntilCompleted) in
//     commit order and reads their status, error and GPU times.
//   - Copy, Reduce, Divide: compute kernels (kernels.metal) on whole
//     buffers, with the slices' element offsets as kernel parameters, so no
//     binding offset has alignment constraints (a u8 slice may start at any
//     byte).
//   - Event: each Record is a signal of the recording stream's shared event
//     (encodeSignalEvent:value:) that ends and commits the current command
//     buffer. A Wait captures the most recent Record enqueued at the time of
//     the Wait call; the worker waits on the host until that Record's
//     command buffer is committed and then encodes encodeWaitForEvent:value:
//     on its own command buffer (MLX's signal-and-wait). Waiting on an
//     event never recorded does not wait.
//   - Send and Recv: Send is eager. Its worker copies the source into a
//     pooled shared staging buffer on the GPU, signals its shared event,
//     commits, and posts the message to a mailbox keyed by (sender,
//     receiver, tag). Recv's worker blocks on the host until the message
//     exists (a Recv is often enqueued before its Send: ops' executor
//     enqueues rank 0's whole plan first), then encodes a wait for the
//     sender's signal and a copy from staging. Messages of one (sender,
//     receiver, tag) match in send order.
//
// The invariant that keeps the GPU from hanging: a command buffer waits on
// a shared-event value only after the command buffer that signals it has
// been committed; everything that can block indefinitely blocks a worker
// goroutine on the host, where it can be seen and cancelled. Hence:
//
//   - Failures: a stream whose op fails (a bad message, a freed buffer, a
//     command buffer with an error) skips the rest of its queue, the
//     Records it skips fail their waiters, and the Sends it skips fail
//     their receivers with its cause. A command buffer that fails on
//     the GPU also fails the Records and Sends it would have signalled, and
//     the stream's shared event is raised from the CPU so no GPU wait on it
//     hangs; a stream whose command buffer waited on a failed point fails
//     too (its data would be wrong).
//   - Abort (hw.Aborter) fails the device's streams with the reason, ends
//     their host waits, and makes pending and later Synchronize calls
//     return at once. Committed command buffers cannot be cancelled in
//     Metal; by the invariant they finish on their own.
//   - Deadlock: when a Synchronize waits, every stream with work is blocked
//     on the host, no command buffer is in flight, and nothing changes for
//     DefaultDeadlockAfter (see WithDeadlockAfter), the blocked streams fail
//     with a *DeadlockError (wrapping hw.ErrDeadlock) naming each rank and
//     what it waits for. The delay exists because another goroutine might
//     still enqueue the missing Send.
//
// # Threads, autorelease pools, ownership
//
// There is no ARC. Every batch of Objective-C calls runs inside
// mtl.WithPool, which locks the goroutine to its OS thread and wraps the
// calls in an NSAutoreleasePool, so autoreleased temporaries die at the end
// of the batch on the thread that made them. Objects kept longer (command
// buffers and encoders, which Metal returns autoreleased) are retained and
// released explicitly; objects from new… selectors are owned and released.
// One lock per world guards the scheduler; Objective-C calls that can block
// (waitUntilCompleted) are made outside it, and at most 32 command buffers
// per queue are in flight, below Metal's 64, so commandBuffer never blocks
// under the lock. The MTLDevice and its compiled pipelines are made once
// per process and shared by all worlds; close releases a world's queues,
// events and buffers.
//
// # Timing
//
// ElapsedSince uses GPU timestamps: a Record's time is the GPUEndTime of
// the command buffer that the Record closes, i.e. when the GPU finished all
// of the stream's work before the Record (a Record with no work before it
// in its command buffer adds a 4-byte blit fill, so the command buffer has
// times). GPUStartTime and GPUEndTime are seconds of the host's
// mach_absolute_time clock, shared by all queues; on Apple silicon that
// clock ticks at 24 MHz, so the resolution is about 42 ns, and the
// granularity is one command buffer. Counter sample buffers
// (MTLCounterSampleBuffer) were not used: they need a supported timestamp
// counter set and a resolve pass, and Apple-silicon GPUs sample only at
// pass boundaries, which command-buffer times already give.
//
// # Arithmetic
//
// The kernels reproduce hw.ReduceBytes and hw.DivideBytes bit for bit. The
// MSL is compiled with MTLLanguageVersion 2.4 pinned (macOS 12; it has
// 64-bit integers, as_type and precise::divide, and runs on every
// Apple-silicon Mac) and fast math off (fastMathEnabled = NO, and mathMode
// = safe where MTLCompileOptions has it, macOS 15+). kernels.metal says
// how each rule is met: elements travel as integer bit patterns; each float
// result is a single IEEE operation (no expression could be contracted to
// an FMA); division is precise::divide by float32(n) computed on the host;
// NaN is tested on the bits and replaced by the canonical pattern (f32
// 0x7FC00000, f16 0x7E00, bf16 0x7FC0); f16 goes through half <-> float
// conversions, bf16 through bit shifts and integer round-to-nearest-even
// (MSL's bfloat is not used); Min and Max order the bit patterns with -0
// below +0 and propagate NaN; integers wrap (i64 in 64-bit ulong/long, u8 in
// uchar).
//
// Without a Mac the kernels are checked two ways, on the same vectors (all
// 65,536 f16 and bf16 patterns paired with special operands, random and
// special f32 values, integer extremes, divisors around every threshold):
// mirror_test.go is a Go port of kernels.metal, function for function,
// which the CPU fake also runs as its kernels; and TestMSLOnHostCompiler
// compiles kernels.metal itself as C++ with the host's compiler (a
// stand-in <metal_stdlib> in testdata/mslhost) and runs it. What only a Mac
// can confirm is that Metal's compiler accepts the source and that Metal
// keeps its promises: float32 subnormals are kept with fast math off,
// float -> half rounds to nearest even, and precise::divide is correctly
// rounded.
//
// f64 is not supported: Metal has no 64-bit floating-point type. Alloc
// refuses it with an error wrapping ErrF64 and hw.ErrBadArgument.
package metal
