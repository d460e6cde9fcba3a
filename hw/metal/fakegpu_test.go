package metal

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
)

// fakeGPU implements the gpu seam on the CPU, so the scheduler above it
// (streams, events, mailboxes, failures, deadlock, abort) runs in tests on
// every OS. It behaves as the Metal queue model the backend assumes: each
// queue runs its committed batches one after another on its own goroutine,
// in commit order; a batch runs its commands in order; a wait blocks the
// queue until the shared event reaches the value; kernels are the Go
// mirror of kernels.metal. A batch that fails stops at the failing command,
// so its signals never fire: the worst case the backend must survive.
type fakeGPU struct {
	t0 time.Time

	mu         sync.Mutex
	failKernel string // a dispatch of this kernel fails its batch
	slowQueue  time.Duration
	hold       chan struct{} // when set, no batch runs before it is closed
}

func newFakeGPU() *fakeGPU { return &fakeGPU{t0: time.Now()} }

func (g *fakeGPU) name() string { return "cpu0" }

func (g *fakeGPU) now() float64 { return time.Since(g.t0).Seconds() }

func (g *fakeGPU) newBuffer(size int) (gpuBuffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("fake: newBuffer(%d)", size)
	}
	b := make([]byte, size)
	for i := range b {
		b[i] = 0xA5 // not zero: Alloc must clear what it hands out
	}
	return &fakeBuffer{b: b}, nil
}

func (g *fakeGPU) newQueue() (gpuQueue, error) {
	q := &fakeQueue{g: g, ch: make(chan *fakeBatch, 2*maxInflight)}
	go q.run()
	return q, nil
}

func (g *fakeGPU) newTimeline() (gpuTimeline, error) {
	t := &fakeTimeline{}
	t.cond = sync.NewCond(&t.mu)
	return t, nil
}

type fakeBuffer struct {
	b        []byte
	released bool
}

func (b *fakeBuffer) bytes() []byte { return b.b }
func (b *fakeBuffer) release()      { b.released = true }

type fakeTimeline struct {
	mu   sync.Mutex
	cond *sync.Cond
	v    uint64
}

func (t *fakeTimeline) raise(v uint64) {
	t.mu.Lock()
	t.v = max(t.v, v)
	t.cond.Broadcast()
	t.mu.Unlock()
}

func (t *fakeTimeline) waitFor(v uint64) {
	t.mu.Lock()
	for t.v < v {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

func (t *fakeTimeline) signalFromHost(v uint64) { t.raise(v) }
func (t *fakeTimeline) release()                {}

type fakeQueue struct {
	g  *fakeGPU
	ch chan *fakeBatch
}

func (q *fakeQueue) run() {
	for b := range q.ch {
		b.start = q.g.now()
		q.g.mu.Lock()
		slow, hold := q.g.slowQueue, q.g.hold
		q.g.mu.Unlock()
		if hold != nil {
			<-hold
		}
		time.Sleep(slow)
		for _, cmd := range b.cmds {
			if err := cmd(); err != nil {
				b.err = err
				break
			}
		}
		b.end = q.g.now()
		close(b.done)
	}
}

func (q *fakeQueue) newBatch() (gpuBatch, error) {
	return &fakeBatch{q: q, done: make(chan struct{})}, nil
}

func (q *fakeQueue) release() { close(q.ch) }

type fakeBatch struct {
	q          *fakeQueue
	cmds       []func() error
	committed  bool
	done       chan struct{}
	start, end float64
	err        error
}

func (b *fakeBatch) dispatch(k kernelID, dst, src gpuBuffer, p kernelParams) error {
	name := kernelNames[k]
	mk, ok := mirrorKernels[name]
	if !ok {
		return fmt.Errorf("fake: no kernel %s", name)
	}
	b.q.g.mu.Lock()
	fail := b.q.g.failKernel == name
	b.q.g.mu.Unlock()
	b.cmds = append(b.cmds, func() error {
		if fail {
			return fmt.Errorf("fake: injected failure of %s", name)
		}
		var s []byte
		if src != nil {
			s = src.bytes()
		}
		mk.run(dst.bytes(), s, p)
		return nil
	})
	return nil
}

func (b *fakeBatch) touch() error {
	b.cmds = append(b.cmds, func() error { return nil })
	return nil
}

func (b *fakeBatch) waitFor(t gpuTimeline, v uint64) {
	b.cmds = append(b.cmds, func() error { t.(*fakeTimeline).waitFor(v); return nil })
}

func (b *fakeBatch) signal(t gpuTimeline, v uint64) {
	b.cmds = append(b.cmds, func() error { t.(*fakeTimeline).raise(v); return nil })
}

func (b *fakeBatch) commit() {
	if b.committed {
		panic("fake: batch committed twice")
	}
	b.committed = true
	b.q.ch <- b
}

func (b *fakeBatch) wait() (float64, float64, error) {
	<-b.done
	return b.start, b.end, b.err
}

func (b *fakeBatch) release() {}

// fakeWorld is NewWorld on the CPU fake.
func fakeWorld(t testing.TB, p int, opts ...Option) (*hw.World, *fakeGPU) {
	t.Helper()
	g := newFakeGPU()
	w, closeFn, err := newCluster(g, p, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := closeFn(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return w, g
}

// TestFakeGPUReportsFailure: the fake's fault injection works, so the
// failure tests below test something.
func TestFakeGPUReportsFailure(t *testing.T) {
	g := newFakeGPU()
	g.failKernel = "copy_b32"
	q, _ := g.newQueue()
	defer q.release()
	b, _ := q.newBatch()
	buf, _ := g.newBuffer(8)
	k, err := lookupKernel("copy_b32")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.dispatch(k, buf, buf, kernelParams{N: 1, DOff: 1}); err != nil {
		t.Fatal(err)
	}
	b.commit()
	if _, _, err := b.wait(); err == nil {
		t.Fatalf("injected failure not reported: %v", err)
	}
}
