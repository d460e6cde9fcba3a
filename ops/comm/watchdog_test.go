package comm_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/comm"
)

// hangDevice is a backend whose streams accept work and then never finish
// it on the ranks told to hang, until the device is aborted: a stuck
// kernel, as a dead NCCL peer leaves one. The others finish their work at
// once. It counts its buffers and aborts, and, when noStreams, makes no
// stream. Make one with newHangDevice.
type hangDevice struct {
	name      string
	hang      bool
	noStreams bool
	allocs    atomic.Int32
	aborts    atomic.Int32
	aborted   chan struct{}
	once      sync.Once
	reason    error
}

var (
	_ hw.Device  = (*hangDevice)(nil)
	_ hw.Aborter = (*hangDevice)(nil)
)

var errNoStreams = errors.New("out of streams")

func newHangDevice(name string, hang bool) *hangDevice {
	return &hangDevice{name: name, hang: hang, aborted: make(chan struct{})}
}

func (d *hangDevice) Kind() string { return "hang" }
func (d *hangDevice) Name() string { return d.name }
func (d *hangDevice) Alloc(dt hw.DType, n int) (hw.Buffer, error) {
	d.allocs.Add(1)
	return &hangBuffer{dev: d, dt: dt, n: n}, nil
}
func (d *hangDevice) NewStream() (hw.Stream, error) {
	if d.noStreams {
		return nil, fmt.Errorf("%s: %w", d.name, errNoStreams)
	}
	return &hangStream{dev: d}, nil
}
func (d *hangDevice) NewEvent() (hw.Event, error) { return &hangEvent{dev: d}, nil }
func (d *hangDevice) Abort(reason error) error {
	d.aborts.Add(1)
	d.once.Do(func() { d.reason = reason; close(d.aborted) })
	return nil
}

type hangBuffer struct {
	dev *hangDevice
	dt  hw.DType
	n   int
}

func (b *hangBuffer) Device() hw.Device  { return b.dev }
func (b *hangBuffer) DType() hw.DType    { return b.dt }
func (b *hangBuffer) Len() int           { return b.n }
func (b *hangBuffer) Phantom() bool      { return true }
func (b *hangBuffer) Write([]byte) error { return hw.ErrPhantom }
func (b *hangBuffer) Read([]byte) error  { return hw.ErrPhantom }
func (b *hangBuffer) Free() error        { return nil }

type hangStream struct{ dev *hangDevice }

func (s *hangStream) Device() hw.Device                            { return s.dev }
func (s *hangStream) Copy(_, _ hw.Slice) error                     { return nil }
func (s *hangStream) Reduce(hw.ReduceOp, hw.Slice, hw.Slice) error { return nil }
func (s *hangStream) Divide(hw.Slice, int) error                   { return nil }
func (s *hangStream) Send(hw.Slice, hw.Device, uint64) error       { return nil }
func (s *hangStream) Recv(hw.Slice, hw.Device, uint64) error       { return nil }
func (s *hangStream) Record(hw.Event) error                        { return nil }
func (s *hangStream) Wait(hw.Event) error                          { return nil }
func (s *hangStream) Synchronize() error {
	if !s.dev.hang {
		return nil
	}
	<-s.dev.aborted
	return fmt.Errorf("%s: aborted: %w", s.dev.name, s.dev.reason)
}

type hangEvent struct{ dev *hangDevice }

func (e *hangEvent) Device() hw.Device                      { return e.dev }
func (e *hangEvent) ElapsedSince(hw.Event) (float64, error) { return 0, nil }

func TestWatchdogTurnsAStuckCollectiveIntoAnError(t *testing.T) {
	devs := make([]hw.Device, 4)
	hangs := make([]*hangDevice, 4)
	for r := range devs {
		hangs[r] = newHangDevice(fmt.Sprintf("hang:%d", r), r == 2)
		devs[r] = hangs[r]
	}
	w, err := hw.NewWorld(devs)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := comm.New(w, comm.Config{RunTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for r, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf, _ := d.Alloc(hw.F32, 8)
			_, errs[r] = cm.Do(r, comm.Call{Op: ops.AllReduce, Count: 8, DType: hw.F32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf))
		}()
	}
	wg.Wait()
	var stuck *comm.StuckError
	found := 0
	for _, err := range errs {
		if errors.As(err, &stuck) {
			found++
			if !strings.Contains(err.Error(), "rank 2 still running") || stuck.Aborted != 4 {
				t.Fatalf("stuck error = %v (aborted %d)", err, stuck.Aborted)
			}
		}
	}
	if found == 0 {
		t.Fatalf("no StuckError: %v", errs)
	}
	for _, h := range hangs {
		select {
		case <-h.aborted:
		default:
			t.Fatalf("%s was not aborted", h.name)
		}
	}
	buf, _ := devs[0].Alloc(hw.F32, 8)
	if _, err := cm.Do(0, comm.Call{Op: ops.AllReduce, Count: 8, DType: hw.F32, Redop: hw.Sum}, hw.Whole(buf), hw.Whole(buf)); !errors.Is(err, comm.ErrClosed) {
		t.Fatalf("after a stuck collective: %v, want ErrClosed", err)
	}
}
