package simtest

import (
	"fmt"

	"github.com/commsim/commsim/hw"
)

// LibDevice decorates a simulated device with a fake collective library
// (hostComm) that computes on the host, the way a tracing or NCCL-backed
// device would decorate one: buffers and streams report the decorator as
// their device, and capabilities are found through Unwrap. Every call
// that reaches the library is appended to Launched. It computes the
// native collectives of i32 sums only (ComputeOnHost).
type LibDevice struct {
	hw.Device
	Launched *[]hw.NativeCall
	Closed   *int // when not nil, counts the library communicators closed
}

func (d *LibDevice) Unwrap() hw.Device { return d.Device }
func (d *LibDevice) Alloc(dt hw.DType, n int) (hw.Buffer, error) {
	b, err := d.Device.Alloc(dt, n)
	if err != nil {
		return nil, err
	}
	return &libBuffer{Buffer: b, dev: d}, nil
}
func (d *LibDevice) NewStream() (hw.Stream, error) {
	s, err := d.Device.NewStream()
	if err != nil {
		return nil, err
	}
	return &libStream{Stream: s, dev: d}, nil
}
func (d *LibDevice) NewNativeComm(devs []hw.Device) (hw.NativeComm, error) {
	return &hostComm{ranks: len(devs), launched: d.Launched, closed: d.Closed}, nil
}

type libBuffer struct {
	hw.Buffer
	dev *LibDevice
}

func (b *libBuffer) Device() hw.Device { return b.dev }

// libStream passes events and waits through; the native path enqueues
// nothing else.
type libStream struct {
	hw.Stream
	dev *LibDevice
}

func (s *libStream) Device() hw.Device { return s.dev }

// hostComm is a collective library that synchronizes the callers'
// streams and computes the collective on the host in rank order.
type hostComm struct {
	ranks    int
	launched *[]hw.NativeCall
	closed   *int
}

func (c *hostComm) Ranks() int { return c.ranks }
func (c *hostComm) Close() error {
	if c.closed != nil {
		*c.closed++
	}
	return nil
}
func (c *hostComm) Abort(reason error) error { return reason }
func (c *hostComm) Launch(calls []hw.NativeCall) error {
	*c.launched = append(*c.launched, calls...)
	for _, call := range calls {
		if err := call.Stream.Synchronize(); err != nil {
			return err
		}
	}
	return ComputeOnHost(c.ranks, calls)
}

// ComputeOnHost computes the i32 sum collectives of calls, every rank's
// calls of one launch, reading every input before writing any output.
func ComputeOnHost(ranks int, calls []hw.NativeCall) error {
	sent := map[[2]int][]int32{} // {from, to}
	inputs := map[int][]int32{}
	for _, call := range calls {
		switch call.Op {
		case hw.NativeSend:
			sent[[2]int{call.Rank, call.Peer}] = sliceInts(call.Send)
		case hw.NativeRecv:
		default:
			inputs[call.Rank] = sliceInts(call.Send)
		}
	}
	for _, call := range calls {
		var out []int32
		n := call.Recv.Len
		switch call.Op {
		case hw.NativeAllReduce, hw.NativeReduceScatter:
			out = make([]int32, n)
			off := 0
			if call.Op == hw.NativeReduceScatter {
				off = call.Rank * n
			}
			for q := range ranks {
				for i := range out {
					out[i] += inputs[q][off+i]
				}
			}
		case hw.NativeAllGather:
			for q := range ranks {
				out = append(out, inputs[q]...)
			}
		case hw.NativeBroadcast:
			out = inputs[call.Peer]
		case hw.NativeRecv:
			out = sent[[2]int{call.Peer, call.Rank}]
		case hw.NativeSend:
			continue
		}
		if err := writeInts(call.Recv, out); err != nil {
			return err
		}
	}
	return nil
}

func sliceInts(s hw.Slice) []int32 {
	all := make([]byte, s.Buf.Len()*4)
	if err := s.Buf.Read(all); err != nil {
		panic(err)
	}
	vals, err := hw.Decode[int32](all)
	if err != nil {
		panic(err)
	}
	return vals[s.Off : s.Off+s.Len]
}

func writeInts(s hw.Slice, vals []int32) error {
	if len(vals) != s.Len {
		return fmt.Errorf("%w: %d values for %d elements", hw.ErrSizeMismatch, len(vals), s.Len)
	}
	all := sliceInts(hw.Whole(s.Buf))
	copy(all[s.Off:], vals)
	return s.Buf.Write(hw.Encode(all))
}
