//go:build !linux && !darwin

package cuda

import (
	"context"
	"errors"

	"github.com/commsim/commsim/hw"
)

// ErrNoDriver is wrapped by every error about the driver being unusable.
var ErrNoDriver = errors.New("cuda backend: no usable NVIDIA driver")

// DeviceInfo describes one GPU the driver reports.
type DeviceInfo struct {
	Index        int
	Name         string
	MemoryBytes  uint64
	Major, Minor int
}

// Available explains that this OS is not supported.
func Available() error { return errors.Join(ErrNoDriver, errors.New("cuda backend: needs Linux")) }

// DriverLibrary is unavailable on this OS.
func DriverLibrary() (Library, error) { return Library{}, Available() }

// DriverVersion is unavailable on this OS.
func DriverVersion() (int, error) { return 0, Available() }

// Devices is unavailable on this OS.
func Devices() ([]DeviceInfo, error) { return nil, Available() }

// NewWorldOn is unavailable on this OS.
func NewWorldOn(gpus []int) (*hw.World, func() error, error) { return nil, nil, Available() }

// JoinNative is unavailable on this OS.
func JoinNative(ctx context.Context, rdv Rendezvous, gpu int) (*hw.World, hw.NativeComm, func() error, error) {
	return nil, nil, nil, Available()
}
