package hw

import "fmt"

// Slice is a range of a buffer, in elements: [Off, Off+Len).
type Slice struct {
	Buf      Buffer
	Off, Len int
}

// Whole is the slice covering all of b.
func Whole(b Buffer) Slice {
	if b == nil {
		return Slice{}
	}
	return Slice{Buf: b, Len: b.Len()}
}

// Sub returns the part of s at [off, off+n) relative to s.
// It does not check bounds; Check does.
func (s Slice) Sub(off, n int) Slice {
	return Slice{Buf: s.Buf, Off: s.Off + off, Len: n}
}

// DType is the element type of the underlying buffer.
func (s Slice) DType() DType {
	if s.Buf == nil {
		return 0
	}
	return s.Buf.DType()
}

// Bytes is the slice's length in bytes.
func (s Slice) Bytes() int { return s.Len * s.DType().Size() }

// String prints the slice for errors and traces.
func (s Slice) String() string {
	if s.Buf == nil {
		return "<nil buffer>"
	}
	return fmt.Sprintf("%s[%d:%d] %s", deviceName(s.Buf.Device()), s.Off, s.Off+s.Len, s.Buf.DType())
}

// deviceName is d's name, or "<nil>": a buffer no device allocated (a
// backend's zero Buffer) has no device to name.
func deviceName(d Device) string {
	if d == nil {
		return "<nil>"
	}
	return d.Name()
}

// Check reports whether s lies inside its buffer.
func (s Slice) Check() error {
	if s.Buf == nil {
		return fmt.Errorf("%w: nil buffer", ErrBadArgument)
	}
	if s.Off < 0 || s.Len < 0 || s.Off > s.Buf.Len() || s.Len > s.Buf.Len()-s.Off {
		return fmt.Errorf("%w: slice [%d:%d] outside buffer of %d elements", ErrBadArgument, s.Off, s.Off+s.Len, s.Buf.Len())
	}
	return nil
}

// CheckOn checks s and that its buffer lives on dev.
func (s Slice) CheckOn(dev Device) error {
	if err := s.Check(); err != nil {
		return err
	}
	if s.Buf.Device() != dev {
		return fmt.Errorf("%w: buffer on %s used by a stream of %s", ErrBadArgument, deviceName(s.Buf.Device()), deviceName(dev))
	}
	return nil
}

// CheckPair checks that dst and src are valid slices on dev with the same
// dtype and length, as Copy and Reduce need.
func CheckPair(dev Device, dst, src Slice) error {
	if err := dst.CheckOn(dev); err != nil {
		return fmt.Errorf("dst: %w", err)
	}
	if err := src.CheckOn(dev); err != nil {
		return fmt.Errorf("src: %w", err)
	}
	if dst.DType() != src.DType() {
		return fmt.Errorf("%w: dst is %s, src is %s", ErrDTypeMismatch, dst.DType(), src.DType())
	}
	if dst.Len != src.Len {
		return fmt.Errorf("%w: dst has %d elements, src %d", ErrSizeMismatch, dst.Len, src.Len)
	}
	return nil
}
