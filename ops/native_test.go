package ops_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
)

// libDevice decorates a simulated device with a fake collective library
// (hostComm) that computes on the host, the way a tracing or NCCL-backed
// device would decorate one: buffers and streams report the decorator as
// their device, and capabilities are found through Unwrap.
type libDevice struct {
	hw.Device
	launched *[]hw.NativeCall
}

func (d *libDevice) Unwrap() hw.Device { return d.Device }
func (d *libDevice) Alloc(dt hw.DType, n int) (hw.Buffer, error) {
	b, err := d.Device.Alloc(dt, n)
	return &libBuffer{Buffer: b, dev: d}, err
}
func (d *libDevice) NewStream() (hw.Stream, error) {
	s, err := d.Device.NewStream()
	return &libStream{Stream: s, dev: d}, err
}
func (d *libDevice) NewNativeComm(devs []hw.Device) (hw.NativeComm, error) {
	return &hostComm{ranks: len(devs), launched: d.launched}, nil
}

type libBuffer struct {
	hw.Buffer
	dev *libDevice
}

func (b *libBuffer) Device() hw.Device { return b.dev }

// libStream passes events and waits through; the native path enqueues
// nothing else.
type libStream struct {
	hw.Stream
	dev *libDevice
}

func (s *libStream) Device() hw.Device { return s.dev }

// hostComm is a collective library that synchronizes the callers'
// streams and computes the collective on the host in rank order.
type hostComm struct {
	ranks    int
	launched *[]hw.NativeCall
}

func (c *hostComm) Ranks() int               { return c.ranks }
func (c *hostComm) Close() error             { return nil }
func (c *hostComm) Abort(reason error) error { return reason }
func (c *hostComm) Launch(calls []hw.NativeCall) error {
	*c.launched = append(*c.launched, calls...)
	for _, call := range calls {
		if err := call.Stream.Synchronize(); err != nil {
			return err
		}
	}
	return computeOnHost(c.ranks, calls)
}

// computeOnHost computes the i32 sum collectives of calls, every rank's
// calls of one launch, reading every input before writing any output.
func computeOnHost(ranks int, calls []hw.NativeCall) error {
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
	all, err := readSlice(hw.Whole(s.Buf))
	if err != nil {
		panic(err)
	}
	return all[s.Off : s.Off+s.Len]
}

func writeInts(s hw.Slice, vals []int32) error {
	if len(vals) != s.Len {
		return fmt.Errorf("%w: %d values for %d elements", hw.ErrSizeMismatch, len(vals), s.Len)
	}
	all := sliceInts(hw.Whole(s.Buf))
	copy(all[s.Off:], vals)
	return writeSlice(hw.Whole(s.Buf), all)
}

// TestNativePlansReachTheLibrary: algorithm native hands each op to the
// backend's library once per rank and run, in one launch a run, with
// NCCL's slices and peers, and the results are what the collective means.
func TestNativePlansReachTheLibrary(t *testing.T) {
	const p, n = 3, 4
	for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.SendRecv} {
		c, _ := world(t, fmt.Sprintf("switch:%d", p), sim.Config{})
		var launched []hw.NativeCall
		devs := make([]hw.Device, p)
		for r, d := range c.Devices() {
			devs[r] = &libDevice{Device: d, launched: &launched}
		}
		w, err := hw.NewWorld(devs)
		if err != nil {
			t.Fatal(err)
		}
		spec := ops.Spec{Op: op, Algo: ops.Native, Ranks: p, Count: n, Root: 1, DType: hw.I32, Redop: hw.Sum}
		plan, err := ops.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Native() || plan.NumSteps() != 0 {
			t.Fatalf("%v: native %v with %d steps", op, plan.Native(), plan.NumSteps())
		}
		var in, out []hw.Slice
		inputs := make([][]int32, p)
		for r, d := range devs {
			ib, _ := d.Alloc(hw.I32, plan.InLen)
			ob, _ := d.Alloc(hw.I32, plan.OutLen)
			in, out = append(in, hw.Whole(ib)), append(out, hw.Whole(ob))
			for i := range plan.InLen {
				inputs[r] = append(inputs[r], int32(100*r+i))
			}
			if err := writeSlice(in[r], inputs[r]); err != nil {
				t.Fatal(err)
			}
		}
		exec := ops.NewExecutor(w)
		// One run, then three back to back: each a launch of every
		// rank's calls.
		for _, runs := range []int{1, 3} {
			launched = nil
			if _, err := exec.RunBackToBack(plan, in, out, runs); err != nil {
				t.Fatalf("%v: %v", op, err)
			}
			if want := runs * p * map[bool]int{true: 2, false: 1}[op == ops.SendRecv]; len(launched) != want {
				t.Fatalf("%v, %d runs: %d calls reached the library, want %d: %+v", op, runs, len(launched), want, launched)
			}
			for r := range p {
				got, _ := readSlice(out[r])
				if want := expected(plan, inputs, r); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%v rank %d: got %v, want %v", op, r, got, want)
				}
			}
		}
		if err := exec.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestNativeRefusals(t *testing.T) {
	if _, err := ops.Compile(ops.Spec{Op: ops.Gather, Algo: ops.Native, Ranks: 2, Count: 1, DType: hw.F32}); !errors.Is(err, ops.ErrUnsupported) {
		t.Fatalf("native gather: %v", err)
	}
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: ops.Native, Ranks: 2, Count: 1, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if err := ops.Check(plan); err == nil || !strings.Contains(err.Error(), "no steps") {
		t.Fatalf("Check of a native plan: %v", err)
	}
	c, _ := world(t, "switch:2", sim.Config{})
	in, out := buffers(t, c, plan, false)
	exec := ops.NewExecutor(c.World())
	if _, err := exec.Run(plan, in, out); !errors.Is(err, ops.ErrUnsupported) || !strings.Contains(err.Error(), "sim has none") {
		t.Fatalf("native on sim: %v", err)
	}
	if _, err := exec.Enqueue(plan, 0, in[0], out[0]); !errors.Is(err, ops.ErrUnsupported) {
		t.Fatalf("Enqueue of a native plan: %v", err)
	}
}
