package metal

import (
	"errors"
	"fmt"

	"github.com/commsim/commsim/hw"
)

// ErrUnavailable is returned (wrapped, with the reason) by NewWorld,
// Available and DeviceName when there is no usable Metal GPU: on every OS
// but macOS, and on a Mac where Metal.framework, the GPU or the kernels'
// compilation fails.
var ErrUnavailable = errors.New("metal backend: needs macOS with a Metal GPU")

// ErrF64 is wrapped by the error Alloc returns for f64: Metal has no
// 64-bit floating-point type, so there are no f64 kernels. The error also
// wraps hw.ErrBadArgument.
var ErrF64 = errors.New("metal backend: f64 is not supported: Metal has no 64-bit floats")

// notOpened is the error for a value of type typ that ctor did not make
// (a nil *Stream or a zero Device, with no world, GPU or lock behind it).
func notOpened(typ, ctor string) error {
	return fmt.Errorf("metal: %s %w (use %s)", typ, hw.ErrNotMade, ctor)
}

// checkDType refuses dtypes without kernels.
func checkDType(dt hw.DType) error {
	switch {
	case !dt.Valid():
		return fmt.Errorf("%w: invalid dtype %s", hw.ErrBadArgument, dt)
	case dt == hw.F64:
		return fmt.Errorf("%w (%w)", ErrF64, hw.ErrBadArgument)
	}
	return nil
}
