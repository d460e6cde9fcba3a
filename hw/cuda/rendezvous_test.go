package cuda_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda"
)

// rdvPayload is a stand-in for an NCCL unique id: 128 bytes that differ
// from run to run would be better, but fixed bytes make failures readable.
func rdvPayload() []byte {
	b := make([]byte, cuda.NCCLUniqueIDBytes)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}

// rdvFreeAddr finds a loopback port nobody listens on, for tests where the
// clients must know rank 0's address before rank 0 exists.
func rdvFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// rdvFetchAll starts ranks in goroutines and collects what each fetched.
func rdvFetchAll(ctx context.Context, addr string, size int, timeout time.Duration, ranks []int) (map[int][]byte, map[int]error, *sync.WaitGroup) {
	var mu sync.Mutex
	got, errs := map[int][]byte{}, map[int]error{}
	var wg sync.WaitGroup
	for _, r := range ranks { // a rank listed twice plays two processes with one rank
		wg.Go(func() {
			b, err := cuda.Rendezvous{Addr: addr, Rank: r, Size: size, Timeout: timeout}.Fetch(ctx, cuda.NCCLUniqueIDBytes)
			mu.Lock()
			got[r], errs[r] = b, err
			mu.Unlock()
		})
	}
	return got, errs, &wg
}

func TestRendezvousFourRanks(t *testing.T) {
	ctx := context.Background()
	srv, err := cuda.Rendezvous{Addr: "127.0.0.1:0", Rank: 0, Size: 4, Timeout: 2 * time.Second}.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, errs, wg := rdvFetchAll(ctx, srv.Addr(), 4, 2*time.Second, []int{1, 2, 3})
	if err := srv.Serve(ctx, rdvPayload()); err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	wg.Wait()
	for r := 1; r < 4; r++ {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if !bytes.Equal(got[r], rdvPayload()) {
			t.Errorf("rank %d got % x", r, got[r])
		}
	}
}

// Rank 0 starting after the others is normal in batch jobs: the clients
// must keep retrying rather than fail on the first refused connection.
func TestRendezvousLateRankZero(t *testing.T) {
	ctx := context.Background()
	addr := rdvFreeAddr(t)
	got, errs, wg := rdvFetchAll(ctx, addr, 3, 2*time.Second, []int{1, 2})
	time.Sleep(150 * time.Millisecond) // let the clients fail to connect a few times
	id, err := cuda.Rendezvous{Addr: addr, Rank: 0, Size: 3, Timeout: 2 * time.Second}.Exchange(ctx, cuda.NCCLUniqueIDBytes,
		func() ([]byte, error) { return rdvPayload(), nil })
	if err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	wg.Wait()
	if !bytes.Equal(id, rdvPayload()) {
		t.Errorf("rank 0 returned % x", id)
	}
	for _, r := range []int{1, 2} {
		if errs[r] != nil || !bytes.Equal(got[r], id) {
			t.Errorf("rank %d: % x, %v", r, got[r], errs[r])
		}
	}
}

func TestRendezvousTimeoutNamesMissingRanks(t *testing.T) {
	ctx := context.Background()
	srv, err := cuda.Rendezvous{Addr: "127.0.0.1:0", Rank: 0, Size: 4, Timeout: 300 * time.Millisecond}.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, errs, wg := rdvFetchAll(ctx, srv.Addr(), 4, 2*time.Second, []int{2, 2})
	err = srv.Serve(ctx, rdvPayload())
	wg.Wait()
	if errs[2] != nil {
		t.Fatalf("rank 2 should have joined: %v", errs[2])
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a deadline error, got %v", err)
	}
	for _, want := range []string{"1 of 3 other ranks", "missing ranks 1, 3", "300ms", "rank 2 fetched 2 times"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestRendezvousClientTimeout(t *testing.T) {
	addr := rdvFreeAddr(t)
	_, err := cuda.Rendezvous{Addr: addr, Rank: 1, Size: 2, Timeout: 200 * time.Millisecond}.Fetch(context.Background(), cuda.NCCLUniqueIDBytes)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("want a deadline error naming rank 1 and %s, got %v", addr, err)
	}
}

// A rank started with another world size is told why at once, and does not
// stop rank 0 from serving the ranks that are right.
func TestRendezvousWrongWorldSizeRefused(t *testing.T) {
	ctx := context.Background()
	srv, err := cuda.Rendezvous{Addr: "127.0.0.1:0", Rank: 0, Size: 2, Timeout: 2 * time.Second}.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, rdvPayload()) }()

	_, err = cuda.Rendezvous{Addr: srv.Addr(), Rank: 1, Size: 3, Timeout: 2 * time.Second}.Fetch(ctx, cuda.NCCLUniqueIDBytes)
	if !errors.Is(err, cuda.ErrRendezvousRefused) || !strings.Contains(err.Error(), "world size 3, rank 0 has 2") {
		t.Fatalf("want a refusal naming both world sizes, got %v", err)
	}
	_, err = cuda.Rendezvous{Addr: srv.Addr(), Rank: 1, Size: 2, Timeout: 2 * time.Second}.Fetch(ctx, 64)
	if !errors.Is(err, cuda.ErrRendezvousRefused) || !strings.Contains(err.Error(), "64-byte") {
		t.Fatalf("want a refusal naming the payload length, got %v", err)
	}
	got, err := cuda.Rendezvous{Addr: srv.Addr(), Rank: 1, Size: 2, Timeout: 2 * time.Second}.Fetch(ctx, cuda.NCCLUniqueIDBytes)
	if err != nil || !bytes.Equal(got, rdvPayload()) {
		t.Fatalf("the right rank 1 after refusals: % x, %v", got, err)
	}
	if err := <-served; err != nil {
		t.Fatalf("rank 0: %v", err)
	}
}

// Garbage, silence and a slammed connection must neither crash rank 0 nor
// keep it from serving the real ranks.
func TestRendezvousGarbageClient(t *testing.T) {
	ctx := context.Background()
	srv, err := cuda.Rendezvous{Addr: "127.0.0.1:0", Rank: 0, Size: 3, Timeout: 2 * time.Second}.Listen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, rdvPayload()) }()

	silent, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	slammed, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	slammed.Write([]byte("CSRZ"))
	slammed.Close()
	junk, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	junk.Write([]byte("GET / HTTP/1.0\r\nHost: x\r\n\r\n"))
	reply, _ := io.ReadAll(junk)
	junk.Close()
	if !bytes.Contains(reply, []byte("not a commsim rendezvous client")) {
		t.Errorf("rank 0 answered junk with %q", reply)
	}

	got, errs, wg := rdvFetchAll(ctx, srv.Addr(), 3, 2*time.Second, []int{1, 2})
	wg.Wait()
	for _, r := range []int{1, 2} {
		if errs[r] != nil || !bytes.Equal(got[r], rdvPayload()) {
			t.Errorf("rank %d: % x, %v", r, got[r], errs[r])
		}
	}
	if err := <-served; err != nil {
		t.Fatalf("rank 0: %v", err)
	}
}

// A client that reaches something other than rank 0 (another service on
// the port) fails at once instead of retrying until its timeout.
func TestRendezvousStrayServerRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
			c.Close()
		}
	}()
	_, err = cuda.Rendezvous{Addr: ln.Addr().String(), Rank: 1, Size: 2, Timeout: 2 * time.Second}.Fetch(context.Background(), cuda.NCCLUniqueIDBytes)
	if !errors.Is(err, cuda.ErrRendezvousRefused) || !strings.Contains(err.Error(), "not a commsim rendezvous") {
		t.Fatalf("want a refusal, got %v", err)
	}
}

func TestRendezvousOneRankNeedsNoNetwork(t *testing.T) {
	calls := 0
	got, err := cuda.Rendezvous{Size: 1}.Exchange(context.Background(), 4, func() ([]byte, error) {
		calls++
		return []byte{1, 2, 3, 4}, nil
	})
	if err != nil || calls != 1 || !bytes.Equal(got, []byte{1, 2, 3, 4}) {
		t.Fatalf("got % x, %v after %d calls", got, err, calls)
	}
	_, err = cuda.Rendezvous{Size: 1}.Exchange(context.Background(), 4, func() ([]byte, error) { return []byte{1}, nil })
	if err == nil || !strings.Contains(err.Error(), "1 bytes, want 4") {
		t.Fatalf("a short payload: %v", err)
	}
}

func TestRendezvousValidate(t *testing.T) {
	for _, tc := range []struct {
		r    cuda.Rendezvous
		want string // "" for valid
	}{
		{cuda.Rendezvous{Size: 1}, ""},
		{cuda.Rendezvous{Addr: "10.0.0.1:29500", Rank: 3, Size: 4}, ""},
		{cuda.Rendezvous{Addr: "[::1]:0", Rank: 0, Size: 2}, ""},
		{cuda.Rendezvous{Size: 0}, "world size 0"},
		{cuda.Rendezvous{Rank: 1, Size: 1}, "rank 1 is out of range [0, 1)"},
		{cuda.Rendezvous{Rank: -1, Size: 2, Addr: "h:1"}, "rank -1"},
		{cuda.Rendezvous{Rank: 1, Size: 2}, "needs the address"},
		{cuda.Rendezvous{Addr: "node0", Rank: 1, Size: 2}, `"node0": want host:port`},
		{cuda.Rendezvous{Addr: "node0:http", Rank: 1, Size: 2}, `port "http"`},
		{cuda.Rendezvous{Addr: "node0:0", Rank: 1, Size: 2}, "port 0 can only be used by rank 0"},
		{cuda.Rendezvous{Size: 1, Timeout: -time.Second}, "timeout -1s"},
	} {
		err := tc.r.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.r, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, hw.ErrBadArgument)):
			t.Errorf("%+v: got %v, want an ErrBadArgument saying %q", tc.r, err, tc.want)
		}
	}
}

func TestRendezvousFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want cuda.Rendezvous
		err  string // a substring of the error; "" for success
	}{
		{env: nil, want: cuda.Rendezvous{Size: 1}},
		{env: map[string]string{"COMMSIM_RANK": "2", "COMMSIM_WORLD_SIZE": "4", "COMMSIM_ADDR": "node0:29500", "COMMSIM_TIMEOUT": "90s"},
			want: cuda.Rendezvous{Addr: "node0:29500", Rank: 2, Size: 4, Timeout: 90 * time.Second}},
		{env: map[string]string{"COMMSIM_RANK": "x", "COMMSIM_WORLD_SIZE": "4", "COMMSIM_ADDR": "h:1"}, err: `COMMSIM_RANK="x" is not an integer`},
		{env: map[string]string{"COMMSIM_RANK": "4", "COMMSIM_WORLD_SIZE": "4", "COMMSIM_ADDR": "h:1"}, err: `COMMSIM_RANK="4" is out of range [0, 4)`},
		{env: map[string]string{"COMMSIM_WORLD_SIZE": "four"}, err: `COMMSIM_WORLD_SIZE="four" is not an integer`},
		{env: map[string]string{"COMMSIM_WORLD_SIZE": "0"}, err: `COMMSIM_WORLD_SIZE="0" must be at least 1`},
		{env: map[string]string{"COMMSIM_WORLD_SIZE": "2", "COMMSIM_ADDR": "h:1"}, err: "COMMSIM_RANK is not set"},
		{env: map[string]string{"COMMSIM_WORLD_SIZE": "2", "COMMSIM_RANK": "1"}, err: "COMMSIM_ADDR is not set"},
		{env: map[string]string{"COMMSIM_WORLD_SIZE": "2", "COMMSIM_RANK": "1", "COMMSIM_ADDR": "node0"}, err: `COMMSIM_ADDR="node0": want host:port`},
		{env: map[string]string{"COMMSIM_TIMEOUT": "soon"}, err: `COMMSIM_TIMEOUT="soon" is not a duration`},
		{env: map[string]string{"COMMSIM_TIMEOUT": "-5s"}, err: `COMMSIM_TIMEOUT="-5s" must be positive`},
	} {
		for _, k := range []string{"COMMSIM_RANK", "COMMSIM_WORLD_SIZE", "COMMSIM_ADDR", "COMMSIM_TIMEOUT"} {
			if v, ok := tc.env[k]; ok {
				t.Setenv(k, v)
			} else {
				t.Setenv(k, "") // registers the restore, then unset for this case
				os.Unsetenv(k)
			}
		}
		got, err := cuda.RendezvousFromEnv()
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%v: got %+v, %v; want %+v", tc.env, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, hw.ErrBadArgument)):
			t.Errorf("%v: got %v, want an ErrBadArgument saying %q", tc.env, err, tc.err)
		}
	}
}

func TestNCCLRendezvousWithoutNCCL(t *testing.T) {
	if cuda.NCCLAvailable() == nil {
		t.Skip("NCCL is installed; this checks the error without it")
	}
	_, err := cuda.NCCLRendezvous(context.Background(), cuda.Rendezvous{Size: 1})
	if !errors.Is(err, cuda.ErrNoNCCL) {
		t.Fatalf("rank 0 without NCCL: %v", err)
	}
}

// RendezvousFromLookup reads the same variables through the lookup given,
// so values of the caller's own (flags) can fill in for the environment.
func TestRendezvousFromLookup(t *testing.T) {
	env := map[string]string{cuda.EnvWorldSize: "4", cuda.EnvAddr: "node0:29500"}
	lookup := func(rank string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			if k == cuda.EnvRank {
				return rank, true
			}
			v, ok := env[k]
			return v, ok
		}
	}
	got, err := cuda.RendezvousFromLookup(lookup("3"))
	if want := (cuda.Rendezvous{Addr: "node0:29500", Rank: 3, Size: 4}); err != nil || got != want {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	if _, err := cuda.RendezvousFromLookup(lookup("4")); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), `COMMSIM_RANK="4" is out of range [0, 4)`) {
		t.Errorf("rank 4 of 4: %v", err)
	}
}
