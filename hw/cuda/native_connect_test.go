//go:build linux || darwin

package cuda

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
)

// A dead peer at the first collective of a multi-process communicator:
// NCCL connects to the peers inside that group's end, which never finishes
// when one is gone. The communicator is nonblocking, so the launcher waits
// for the group outside launchMu, and Device.Abort, or the watchdog's
// timeout, ends the launch with the reason instead of waiting for the lock.
func TestJoinNativeDeadPeerAtFirstCollective(t *testing.T) {
	for _, how := range []string{"Device.Abort", "timeout"} {
		t.Run(how, func(t *testing.T) {
			procs := joinFakes(t, 2, nil)
			pr := procs[0] // rank 1 never launches: it is the dead peer
			pr.x.take()
			if how == "timeout" {
				pr.comm.SetTimeout(50 * time.Millisecond)
			} else {
				pr.comm.SetTimeout(0)
			}
			s := stream(t, pr.dev)
			b := hw.Whole(alloc(t, pr.dev, hw.F32, 4))
			if err := pr.comm.Launch([]hw.NativeCall{{Op: hw.NativeAllReduce, Rank: 0, Stream: s, Send: b, Recv: b, Reduce: hw.Sum}}); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.Synchronize() }()
			reason := errors.New("operator gave up")
			if how == "Device.Abort" {
				select {
				case err := <-done:
					t.Fatalf("synchronize returned %v while the peer is missing", err)
				case <-time.After(30 * time.Millisecond):
				}
				aborted := make(chan error, 1)
				go func() { aborted <- pr.dev.Abort(reason) }()
				select {
				case err := <-aborted:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("Device.Abort waits for the group being issued")
				}
			}
			select {
			case err := <-done:
				if how == "Device.Abort" && !errors.Is(err, reason) {
					t.Errorf("rank 0: %v; want the abort's reason", err)
				}
				if how == "timeout" && (!errors.Is(err, ErrNCCLTimeout) || !strings.Contains(err.Error(), "nccl allreduce sum 4 x f32 (rank 0 of 2)") ||
					!strings.Contains(err.Error(), "issuing the group: nccl: rank 0 of 2: collective timed out after 50ms")) {
					t.Errorf("rank 0: %v; want a timeout saying the group was never issued", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the launch stuck on the missing peer did not end")
			}
			log := pr.x.take()
			if len(log) < 2 || log[len(log)-2] != "groupEnd" || log[len(log)-1] != "abort rank=0" {
				t.Errorf("transcript %q: want the group, then the abort", log)
			}
		})
	}
}
