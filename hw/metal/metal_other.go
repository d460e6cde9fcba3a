//go:build !darwin

package metal

import "github.com/commsim/commsim/hw"

// NewWorld returns an error wrapping ErrUnavailable: Metal exists only on
// macOS.
func NewWorld(p int, opts ...Option) (*hw.World, func() error, error) {
	return nil, nil, ErrUnavailable
}

// Available returns ErrUnavailable: Metal exists only on macOS.
func Available() error { return ErrUnavailable }

// DeviceName returns ErrUnavailable: Metal exists only on macOS.
func DeviceName() (string, error) { return "", ErrUnavailable }
