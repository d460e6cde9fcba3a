//go:build linux || darwin

package cuda

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/commsim/commsim/hw"
)

// closeRecorder is the shared fake driver with the calls a world's close
// makes written down in order, each with the GPU whose context was current.
type closeRecorder struct {
	mu    sync.Mutex
	calls []string
	cur   uintptr // the current context (one thread closes)
}

func (r *closeRecorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("gpu%d ", r.cur-1000)+fmt.Sprintf(format, args...))
}

func recordingDriver() (*driver, *closeRecorder) {
	_, base := fake()
	d := *base
	r := &closeRecorder{}
	d.cuCtxSetCurrent = func(ctx uintptr) cuResult {
		r.mu.Lock()
		r.cur = ctx
		r.mu.Unlock()
		return base.cuCtxSetCurrent(ctx)
	}
	d.cuStreamSynchronize = func(s uintptr) cuResult { r.add("sync"); return base.cuStreamSynchronize(s) }
	d.cuStreamDestroy = func(s uintptr) cuResult { r.add("destroy"); return base.cuStreamDestroy(s) }
	d.cuMemFree = func(p uint64) cuResult { r.add("free"); return base.cuMemFree(p) }
	d.cuEventDestroy = func(ev uintptr) cuResult { r.add("event destroy"); return base.cuEventDestroy(ev) }
	return &d, r
}

// Closing a world of ranks on two GPUs synchronises every stream of both
// GPUs before it frees anything on either: a queued peer copy may still
// read another GPU's staging memory.
func TestCloseSynchronizesEveryGPUBeforeFreeing(t *testing.T) {
	d, rec := recordingDriver()
	gpus, err := Layout(4, VirtualSpread, 2)
	if err != nil {
		t.Fatal(err)
	}
	w, closeWorld, err := newWorld(d, gpus)
	if err != nil {
		t.Fatal(err)
	}
	// Messages between the GPUs, so both have staging memory.
	streams := make([]hw.Stream, 4)
	for r := range 4 {
		dev, _ := w.Device(r)
		s, err := dev.NewStream()
		if err != nil {
			t.Fatal(err)
		}
		buf, err := dev.Alloc(hw.F32, 64)
		if err != nil {
			t.Fatal(err)
		}
		next, prev := (r+1)%4, (r+3)%4
		if err := errors.Join(w.Send(s, next, hw.Whole(buf), 0), w.Recv(s, prev, hw.Whole(buf), 0)); err != nil {
			t.Fatal(err)
		}
		streams[r] = s
	}
	for _, s := range streams {
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
	}
	rec.mu.Lock()
	rec.calls = nil
	rec.mu.Unlock()
	if err := closeWorld(); err != nil {
		t.Fatal(err)
	}
	calls := rec.calls
	firstRelease := slices.IndexFunc(calls, func(c string) bool { return !strings.HasSuffix(c, " sync") })
	lastSync := -1
	syncedOn := map[string]int{}
	for i, c := range calls {
		if gpu, ok := strings.CutSuffix(c, " sync"); ok {
			lastSync = i
			syncedOn[gpu]++
		}
	}
	if firstRelease < 0 || lastSync > firstRelease {
		t.Errorf("a stream was synchronised after something was freed or destroyed:\n  %s", strings.Join(calls, "\n  "))
	}
	if syncedOn["gpu0"] != 2 || syncedOn["gpu1"] != 2 {
		t.Errorf("streams synchronised per GPU: %v, want 2 on each", syncedOn)
	}
	for _, want := range []string{"gpu0 free", "gpu1 free", "gpu0 destroy", "gpu1 destroy"} {
		if !slices.Contains(calls, want) {
			t.Errorf("close made no %q:\n  %s", want, strings.Join(calls, "\n  "))
		}
	}
}
