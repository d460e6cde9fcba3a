package cuda

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// ncclFakeWatch drives the watchdog loop with a clock that moves only when
// the loop sleeps, and records what the loop did as a transcript.
type ncclFakeWatch struct {
	clock   time.Time
	sleeps  []time.Duration
	aborts  int
	polls   int
	doneAt  int   // poll at which done turns true; 0 for never
	asyncAt int   // poll at which NCCL reports an async error; 0 for never
	doneErr error // returned by done from the first poll
	abort   error
	ctxErr  error // returned by sleep instead of sleeping
}

func (f *ncclFakeWatch) watchdog(timeout time.Duration) *ncclWatchdog {
	return &ncclWatchdog{
		what:    "ranks 0, 1 of 2",
		timeout: timeout,
		done: func() (bool, error) {
			f.polls++
			return f.doneAt > 0 && f.polls >= f.doneAt, f.doneErr
		},
		async: func() error {
			if f.asyncAt > 0 && f.polls >= f.asyncAt {
				return &NCCLError{Call: "rank 1: asynchronous error", Result: 6, Text: "remote process exited or there was a network error"}
			}
			return nil
		},
		abort: func() error { f.aborts++; return f.abort },
		now:   func() time.Time { return f.clock },
		sleep: func(ctx context.Context, d time.Duration) error {
			if f.ctxErr != nil {
				return f.ctxErr
			}
			f.sleeps = append(f.sleeps, d)
			f.clock = f.clock.Add(d)
			return nil
		},
	}
}

func TestNCCLWatchdogFinishes(t *testing.T) {
	f := &ncclFakeWatch{doneAt: 4}
	if err := f.watchdog(time.Second).run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(f.sleeps), "[20µs 40µs 80µs]"; got != want || f.aborts != 0 {
		t.Fatalf("sleeps %s (want %s), %d aborts", got, want, f.aborts)
	}
}

func TestNCCLWatchdogAsyncErrorAborts(t *testing.T) {
	f := &ncclFakeWatch{asyncAt: 3}
	err := f.watchdog(time.Second).run(context.Background())
	var ne *NCCLError
	if !errors.As(err, &ne) || ne.Result != 6 || f.aborts != 1 {
		t.Fatalf("got %v after %d aborts", err, f.aborts)
	}
	want := "nccl: ranks 0, 1 of 2: nccl: rank 1: asynchronous error: ncclResult 6: remote process exited or there was a network error; communicator aborted"
	if err.Error() != want {
		t.Errorf("error\n %s\nwant\n %s", err, want)
	}
}

func TestNCCLWatchdogStreamErrorAborts(t *testing.T) {
	bad := errors.New("cuda: cuStreamQuery: CUresult 700: an illegal memory access was encountered")
	f := &ncclFakeWatch{doneErr: bad}
	err := f.watchdog(time.Second).run(context.Background())
	if !errors.Is(err, bad) || f.aborts != 1 || !strings.Contains(err.Error(), "waiting for the streams") {
		t.Fatalf("got %v after %d aborts", err, f.aborts)
	}
}

// The timeout is measured on the injected clock: the loop backs off to
// 5ms, clips its last sleep to the time left, then aborts.
func TestNCCLWatchdogTimeoutAborts(t *testing.T) {
	f := &ncclFakeWatch{}
	err := f.watchdog(12 * time.Millisecond).run(context.Background())
	if !errors.Is(err, ErrNCCLTimeout) || !errors.Is(err, context.DeadlineExceeded) || f.aborts != 1 {
		t.Fatalf("got %v after %d aborts", err, f.aborts)
	}
	want := "nccl: ranks 0, 1 of 2: collective timed out after 12ms (a peer may be dead or stuck): context deadline exceeded; communicator aborted"
	if err.Error() != want {
		t.Errorf("error\n %s\nwant\n %s", err, want)
	}
	if got, want := fmt.Sprint(f.sleeps), "[20µs 40µs 80µs 160µs 320µs 640µs 1.28ms 2.56ms 5ms 1.9ms]"; got != want {
		t.Errorf("sleeps %s, want %s", got, want)
	}
}

func TestNCCLWatchdogContextEndAborts(t *testing.T) {
	f := &ncclFakeWatch{ctxErr: context.Canceled, abort: errors.New("nccl: ncclCommAbort(rank 0): boom")}
	err := f.watchdog(0).run(context.Background())
	if !errors.Is(err, context.Canceled) || f.aborts != 1 || !strings.Contains(err.Error(), "aborting the communicator failed too: nccl: ncclCommAbort(rank 0): boom") {
		t.Fatalf("got %v after %d aborts", err, f.aborts)
	}
}

func TestNCCLWatchdogRealSleepHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ncclSleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("ncclSleep on a cancelled context: %v", err)
	}
	if err := ncclSleep(context.Background(), time.Microsecond); err != nil {
		t.Fatal(err)
	}
}
