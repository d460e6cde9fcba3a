package cuda

import (
	"errors"
	"fmt"

	"github.com/commsim/commsim/hw"
)

// LibNCCL is the NCCL library's name. It is looked for on the loader's
// path and where pip and conda put it (see NCCLLibrary); the environment
// variable COMMSIM_NCCL_LIBRARY, when set, names the file to load instead.
const LibNCCL = "libnccl.so.2"

// EnvNCCLLibrary names the NCCL file to load; when it is set nothing else is
// tried.
const EnvNCCLLibrary = "COMMSIM_NCCL_LIBRARY"

// Sentinel errors of the NCCL capability.
var (
	// ErrNoNCCL is wrapped by every error that comes from NCCL being absent
	// or unusable (library missing, a symbol missing, an unsupported OS).
	// Plans still work without it; only algorithm "native" needs NCCL.
	ErrNoNCCL = errors.New("cuda backend: NCCL unavailable")
	// ErrNCCLTimeout is wrapped, together with context.DeadlineExceeded, by
	// the error of a watchdog that gave up on a collective and aborted the
	// communicator. NCCLError values for ncclTimeout match it too.
	ErrNCCLTimeout = errors.New("collective timed out")
	// ErrNCCLClosed is wrapped by the error of any call on a communicator
	// after Destroy or Abort.
	ErrNCCLClosed = errors.New("communicator closed")
)

// NCCLUniqueIDBytes is the size of ncclUniqueId (NCCL_UNIQUE_ID_BYTES).
const NCCLUniqueIDBytes = 128

// NCCLUniqueID is ncclUniqueId: the 128 opaque bytes rank 0 makes with
// NCCLGetUniqueID and every rank passes to NCCLInitRank. Move it between
// processes with Rendezvous (see NCCLRendezvous).
type NCCLUniqueID [NCCLUniqueIDBytes]byte

// ncclConfig is the head of ncclConfig_t (nccl.h) as NCCL 2.17 laid it out:
// size, magic and version, then the attributes, of which only blocking is
// set here. NCCL copies min(size, its own sizeof) bytes and takes the
// attributes the version says the caller knew of, so a newer NCCL reads
// this prefix and defaults the rest; it copies the struct during the call,
// so pinned Go memory serves. On 64-bit targets: size at 0 (size_t),
// magic at 8, version at 12, blocking at 16, cgaClusterSize, minCTAs and
// maxCTAs at 20, 24 and 28, netName at 32; 40 bytes.
type ncclConfig struct {
	size           uintptr
	magic          uint32
	version        uint32
	blocking       int32
	cgaClusterSize int32
	minCTAs        int32
	maxCTAs        int32
	netName        uintptr
}

const (
	ncclConfigMagic    = 0xcafebeef          // NCCL_API_MAGIC
	ncclConfigVersion  = 21700               // NCCL_VERSION(2, 17, 0): the layout above
	ncclConfigUndefInt = -(1 << 31)          // NCCL_CONFIG_UNDEF_INT (INT_MIN): NCCL's default
	ncclConfigSize     = 8 + 4 + 4 + 4*4 + 8 // sizeof on 64-bit targets
)

// nonblockingConfig is NCCL_CONFIG_INITIALIZER with blocking = 0: calls on
// the communicator (its init, a group's end) return ncclInProgress instead
// of blocking while NCCL works, and ncclCommGetAsyncError says when it is
// done, so a dead peer can be given up on with ncclCommAbort.
func nonblockingConfig() ncclConfig {
	return ncclConfig{size: ncclConfigSize, magic: ncclConfigMagic, version: ncclConfigVersion, blocking: 0,
		cgaClusterSize: ncclConfigUndefInt, minCTAs: ncclConfigUndefInt, maxCTAs: ncclConfigUndefInt}
}

// ncclResult is ncclResult_t.
type ncclResult int32

// The ncclResult_t values this package treats specially.
const (
	ncclSuccess    ncclResult = 0
	ncclInProgress ncclResult = 7 // a nonblocking call still running; not an error
	ncclTimeout    ncclResult = 8 // NCCL ≥ 2.23
)

// NCCLError is an ncclResult_t other than success, returned by a call.
type NCCLError struct {
	Call   string // the function and the rank, e.g. "ncclAllReduce(rank 1)"
	Result int    // the ncclResult_t
	Text   string // ncclGetErrorString
	Detail string // ncclGetLastError, when the library has it and said anything
}

func (e *NCCLError) Error() string {
	if e == nil {
		return "<nil>"
	}
	s := fmt.Sprintf("nccl: %s: ncclResult %d: %s", e.Call, e.Result, e.Text)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is makes an ncclTimeout result match ErrNCCLTimeout.
func (e *NCCLError) Is(target error) bool {
	return e != nil && target == ErrNCCLTimeout && ncclResult(e.Result) == ncclTimeout
}

// ncclDataType_t values.
const (
	ncclUint8    int32 = 1
	ncclInt32    int32 = 2
	ncclInt64    int32 = 4
	ncclFloat16  int32 = 6
	ncclFloat32  int32 = 7
	ncclFloat64  int32 = 8
	ncclBfloat16 int32 = 9
)

// ncclRedOp_t values. Note that NCCL orders Max before Min; hw does not.
const (
	ncclSum  int32 = 0
	ncclProd int32 = 1
	ncclMax  int32 = 2
	ncclMin  int32 = 3
	ncclAvg  int32 = 4
)

// ncclDataType maps a dtype onto ncclDataType_t. Every hw dtype has one;
// bf16 needs NCCL ≥ 2.10 built against CUDA ≥ 11, which NCCL itself checks.
func ncclDataType(dt hw.DType) (int32, error) {
	switch dt {
	case hw.F32:
		return ncclFloat32, nil
	case hw.F64:
		return ncclFloat64, nil
	case hw.F16:
		return ncclFloat16, nil
	case hw.BF16:
		return ncclBfloat16, nil
	case hw.I32:
		return ncclInt32, nil
	case hw.I64:
		return ncclInt64, nil
	case hw.U8:
		return ncclUint8, nil
	}
	return 0, fmt.Errorf("nccl: %w: dtype %v has no NCCL type", hw.ErrBadArgument, dt)
}

// ncclRedOp maps a reduce op onto ncclRedOp_t.
//
// Native results are NOT bit-identical with plans, and no test may demand
// it; they are checked against the error bound instead:
//
//   - NCCL picks its own reduction order (ring or tree, split over
//     channels, a different order per protocol and size), so float Sum and
//     Prod round differently from any plan.
//   - Float Min and Max are fminf/fmaxf (fmin/fmax for f64): a NaN operand
//     is dropped in favour of the number, and −0 versus +0 is unspecified,
//     where hw's contract propagates a canonical NaN and orders −0 < +0.
//     Integer Min and Max, and integer Sum and Prod (which wrap), do match.
//   - Avg maps to ncclAvg (NCCL ≥ 2.10). For floats NCCL multiplies every
//     input by 1/ranks and then sums (two roundings per element and a
//     rounded reciprocal), where hw's Avg sums and divides once. For u8 NCCL
//     sums (wrapping) and then divides by ranks, which happens to be hw's
//     arithmetic. NCCL's integer average is meant for unsigned types only
//     (it truncates wrongly for negative values), so Avg on i32 and i64 is
//     refused here: use Sum, then hw.DivideBytes.
func ncclRedOp(op hw.ReduceOp, dt hw.DType) (int32, error) {
	switch op {
	case hw.Sum:
		return ncclSum, nil
	case hw.Prod:
		return ncclProd, nil
	case hw.Max:
		return ncclMax, nil
	case hw.Min:
		return ncclMin, nil
	case hw.Avg:
		if dt == hw.I32 || dt == hw.I64 {
			return 0, fmt.Errorf("nccl: %w: native avg on %v: NCCL averages only unsigned integers; use sum, then divide", hw.ErrBadArgument, dt)
		}
		return ncclAvg, nil
	}
	return 0, fmt.Errorf("nccl: %w: reduce op %v has no NCCL op", hw.ErrBadArgument, op)
}

// checkNCCLDevices refuses a device list NCCL would refuse, before any NCCL
// call: NCCL only finds duplicates deep inside init ("Duplicate GPU
// detected"), after it has set up half a communicator.
func checkNCCLDevices(devices []int) error {
	if len(devices) == 0 {
		return fmt.Errorf("nccl: %w: no devices", hw.ErrBadArgument)
	}
	seen := make(map[int]int, len(devices))
	for rank, d := range devices {
		if d < 0 {
			return fmt.Errorf("nccl: %w: rank %d has device %d; device ordinals start at 0", hw.ErrBadArgument, rank, d)
		}
		if first, ok := seen[d]; ok {
			return fmt.Errorf("nccl: %w: ranks %d and %d are both on GPU %d: NCCL refuses two ranks on one GPU; use one GPU per rank", hw.ErrBadArgument, first, rank, d)
		}
		seen[d] = rank
	}
	return nil
}
