package cuda

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/commsim/commsim/hw"
)

// A multi-process NCCL job needs every rank to hold the same 128-byte
// unique id before ncclCommInitRank, and NCCL does not move it itself. The
// rendezvous below is that bootstrap: rank 0 makes the id and serves it over
// TCP, the other ranks fetch it. It moves opaque bytes, so it knows nothing
// of NCCL and is tested without a GPU.
//
// The wire format is deliberately tiny and versioned. Each side checks the
// other's magic, version, world size and payload length, so a misconfigured
// job (two jobs on one port, a wrong COMMSIM_WORLD_SIZE, a port scanner)
// becomes an error that says so instead of a hang or a wrong id.
//
//	hello (client → rank 0), 20 bytes, big-endian:
//	  magic "CSRZ" | version u16 | 0 u16 | world size u32 | rank u32 | payload length u32
//	reply (rank 0 → client):
//	  magic "CSRZ" | version u16 | status u16 | length u32 | length bytes
//	  (status 0: the payload; status 1: why rank 0 refused, as text)
//	ack (client → rank 0): one byte, sent after the whole payload arrived,
//	  so rank 0 counts a rank only once it really holds the payload.

// Rendezvous says how the processes of one job meet. Rank 0 listens on Addr;
// the other ranks connect to it.
type Rendezvous struct {
	// Addr is host:port of rank 0. Rank 0 listens on exactly this address,
	// so give an address the other hosts can reach (an IP, or a name that
	// does not resolve to a loopback address on rank 0's host). A port of 0
	// is allowed for rank 0 only; RendezvousServer.Addr tells the real one.
	Addr string
	// Rank is this process's rank, in [0, Size).
	Rank int
	// Size is the number of processes (the world size), at least 1.
	Size int
	// Timeout bounds the whole meeting on every rank: rank 0 waits this long
	// for all others to fetch, and the others keep retrying to reach rank 0
	// (which may start later) for this long. Zero means
	// DefaultRendezvousTimeout.
	Timeout time.Duration
}

// DefaultRendezvousTimeout is used when Rendezvous.Timeout is zero. It is
// long because the ranks of a batch job may start minutes apart.
const DefaultRendezvousTimeout = 5 * time.Minute

// The environment variables RendezvousFromEnv reads.
const (
	EnvRank      = "COMMSIM_RANK"
	EnvWorldSize = "COMMSIM_WORLD_SIZE"
	EnvAddr      = "COMMSIM_ADDR"
	EnvTimeout   = "COMMSIM_TIMEOUT"
)

// ErrRendezvousRefused is wrapped by the error a rank gets when rank 0
// answered but refused it (a different world size, payload length or
// protocol version), and by the error for a peer that does not speak the
// protocol at all. Retrying cannot help, so Fetch returns it at once.
var ErrRendezvousRefused = errors.New("rendezvous refused")

const (
	rdvMagic      = "CSRZ"
	rdvVersion    = 1
	rdvHelloLen   = 20
	rdvReplyLen   = 12
	rdvStatusOK   = 0
	rdvStatusNo   = 1
	rdvAck        = 'K'
	rdvMaxPayload = 1 << 16 // far above 128; a bound so garbage cannot make us allocate
	rdvMaxText    = 1024
)

// RendezvousFromEnv builds a Rendezvous from COMMSIM_RANK,
// COMMSIM_WORLD_SIZE, COMMSIM_ADDR (host:port of rank 0) and COMMSIM_TIMEOUT
// (a Go duration such as "90s"). With none of them set it returns a
// one-process world {Rank: 0, Size: 1}. A bad or missing value gives an
// error wrapping hw.ErrBadArgument that names the variable and the value.
func RendezvousFromEnv() (Rendezvous, error) { return RendezvousFromLookup(os.LookupEnv) }

// RendezvousFromLookup is RendezvousFromEnv reading the variables through
// lookup (os.LookupEnv's signature), so a caller can put values of its own,
// such as command-line flags, over the environment. Errors name the
// variables.
func RendezvousFromLookup(lookup func(key string) (value string, ok bool)) (Rendezvous, error) {
	bad := func(format string, args ...any) (Rendezvous, error) {
		return Rendezvous{}, fmt.Errorf("rendezvous: %w: "+format, append([]any{hw.ErrBadArgument}, args...)...)
	}
	r := Rendezvous{Size: 1}
	if v, ok := lookup(EnvWorldSize); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return bad("%s=%q is not an integer", EnvWorldSize, v)
		}
		if n < 1 {
			return bad("%s=%q must be at least 1", EnvWorldSize, v)
		}
		r.Size = n
	}
	if v, ok := lookup(EnvRank); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return bad("%s=%q is not an integer", EnvRank, v)
		}
		if n < 0 || n >= r.Size {
			return bad("%s=%q is out of range [0, %d) for %s=%d", EnvRank, v, r.Size, EnvWorldSize, r.Size)
		}
		r.Rank = n
	} else if r.Size > 1 {
		return bad("%s is not set, but %s=%d needs it", EnvRank, EnvWorldSize, r.Size)
	}
	if v, ok := lookup(EnvAddr); ok {
		r.Addr = strings.TrimSpace(v)
		if err := checkRendezvousAddr(r.Addr, r.Rank); err != nil {
			return bad("%s=%q: %v", EnvAddr, v, err)
		}
	} else if r.Size > 1 {
		return bad("%s is not set, but %s=%d needs host:port of rank 0", EnvAddr, EnvWorldSize, r.Size)
	}
	if v, ok := lookup(EnvTimeout); ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return bad("%s=%q is not a duration (like 90s or 5m)", EnvTimeout, v)
		}
		if d <= 0 {
			return bad("%s=%q must be positive", EnvTimeout, v)
		}
		r.Timeout = d
	}
	return r, r.Validate()
}

// Validate checks the fields: Size ≥ 1, Rank in [0, Size), Timeout not
// negative, and for Size > 1 an Addr of the form host:port (port 0 only on
// rank 0). The error wraps hw.ErrBadArgument.
func (r Rendezvous) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("rendezvous: %w: "+format, append([]any{hw.ErrBadArgument}, args...)...)
	}
	switch {
	case r.Size < 1:
		return bad("world size %d must be at least 1", r.Size)
	case r.Rank < 0 || r.Rank >= r.Size:
		return bad("rank %d is out of range [0, %d)", r.Rank, r.Size)
	case r.Timeout < 0:
		return bad("timeout %v is negative", r.Timeout)
	case r.Size > 1 && r.Addr == "":
		return bad("world size %d needs the address (host:port) of rank 0", r.Size)
	}
	if r.Size > 1 {
		if err := checkRendezvousAddr(r.Addr, r.Rank); err != nil {
			return bad("address %q: %v", r.Addr, err)
		}
	}
	return nil
}

func checkRendezvousAddr(addr string, rank int) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("port %q is not a number in [0, 65535]", port)
	}
	if p == 0 && rank != 0 {
		return errors.New("port 0 can only be used by rank 0")
	}
	return nil
}

func (r Rendezvous) timeout() time.Duration {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultRendezvousTimeout
}

// deadline is the earlier of ctx's deadline and now + the timeout.
func (r Rendezvous) deadline(ctx context.Context) time.Time {
	d := time.Now().Add(r.timeout())
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}

// Exchange gives every rank the same payload of n bytes. Rank 0 calls
// create (after it started listening, so a taken port fails first) and
// serves the result until every other rank holds it; the other ranks fetch
// it. With Size 1 it just calls create. It returns an error when the
// configuration is invalid, create fails or returns other than n bytes, or
// the meeting does not complete before the timeout or ctx ends.
func (r Rendezvous) Exchange(ctx context.Context, n int, create func() ([]byte, error)) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if n < 1 || n > rdvMaxPayload {
		return nil, fmt.Errorf("rendezvous: %w: payload length %d outside [1, %d]", hw.ErrBadArgument, n, rdvMaxPayload)
	}
	if r.Rank != 0 {
		return r.Fetch(ctx, n)
	}
	var srv *RendezvousServer
	if r.Size > 1 {
		var err error
		if srv, err = r.Listen(ctx); err != nil {
			return nil, err
		}
		defer srv.Close()
	}
	payload, err := create()
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank 0: making the payload: %w", err)
	}
	if len(payload) != n {
		return nil, fmt.Errorf("rendezvous: rank 0: payload is %d bytes, want %d", len(payload), n)
	}
	if srv != nil {
		if err := srv.Serve(ctx, payload); err != nil {
			return nil, err
		}
	}
	return slices.Clone(payload), nil
}

// RendezvousServer is rank 0's side of a rendezvous: a listener that hands
// one payload to each of the other ranks.
type RendezvousServer struct {
	r  Rendezvous
	ln net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// Listen starts rank 0's listener on r.Addr. Only rank 0 listens; Serve
// then hands out the payload.
func (r Rendezvous) Listen(ctx context.Context) (*RendezvousServer, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Rank != 0 {
		return nil, fmt.Errorf("rendezvous: %w: rank %d cannot listen; only rank 0 serves", hw.ErrBadArgument, r.Rank)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", r.Addr)
	if err != nil {
		return nil, fmt.Errorf("rendezvous: rank 0 cannot listen on %s: %w", r.Addr, err)
	}
	return &RendezvousServer{r: r, ln: ln, conns: map[net.Conn]struct{}{}}, nil
}

// Addr is the address the server listens on, with the real port when
// Rendezvous.Addr asked for port 0; "" for a server not opened.
func (s *RendezvousServer) Addr() string {
	if s.opened() != nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Close stops listening and drops every open connection. It is safe to call
// more than once and after Serve returned.
func (s *RendezvousServer) Close() error {
	if err := s.opened(); err != nil {
		return err
	}
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.conns = nil // handlers accepted from now on are closed at once
	s.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// rdvJoin is what one connection's handler reports back to Serve.
type rdvJoin struct {
	rank    int    // the rank that now holds the payload, or -1
	refused string // why a client was refused, or ""
}

// Serve hands payload to every rank in [1, Size) and returns once each has
// acknowledged it, then closes the server. Clients that speak another
// protocol, version, world size or payload length are refused (they get the
// reason) and do not stop the others. If the timeout passes or ctx ends
// first, the error names how many and which ranks joined, lists the refusals,
// and wraps context.DeadlineExceeded (or ctx's error).
func (s *RendezvousServer) Serve(ctx context.Context, payload []byte) error {
	if err := s.opened(); err != nil {
		return err
	}
	if len(payload) < 1 || len(payload) > rdvMaxPayload {
		s.Close()
		return fmt.Errorf("rendezvous: %w: payload length %d outside [1, %d]", hw.ErrBadArgument, len(payload), rdvMaxPayload)
	}
	deadline := s.r.deadline(ctx)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	joins := make(chan rdvJoin)
	// handlers counts the accept loop and every connection's handler, so
	// Serve returns only after all of them stopped touching the server. The
	// order matters: closing unblocks Accept and every read, cancelling
	// unblocks a handler that would report to the finished loop below.
	var handlers sync.WaitGroup
	defer func() {
		s.Close()
		cancel()
		handlers.Wait()
	}()
	handlers.Add(1)
	go func() {
		defer handlers.Done()
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return // closed by Serve's exit; Accept errors are not retried
			}
			if !s.track(c) {
				c.Close()
				return
			}
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				defer s.untrack(c)
				j := s.handle(c, payload, deadline)
				select {
				case joins <- j:
				case <-ctx.Done():
				}
			}()
		}
	}()

	joined := map[int]int{} // rank → times served
	var refusals []string
	for len(joined) < s.r.Size-1 {
		select {
		case j := <-joins:
			if j.rank > 0 {
				joined[j.rank]++
			}
			if j.refused != "" && len(refusals) < 8 {
				refusals = append(refusals, j.refused)
			}
		case <-ctx.Done():
			return s.timeoutError(ctx.Err(), joined, refusals)
		}
	}
	return nil
}

func (s *RendezvousServer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *RendezvousServer) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *RendezvousServer) timeoutError(cause error, joined map[int]int, refusals []string) error {
	var missing []string
	for r := 1; r < s.r.Size; r++ {
		if joined[r] == 0 {
			missing = append(missing, strconv.Itoa(r))
		}
	}
	msg := fmt.Sprintf("rendezvous: rank 0 at %s: %d of %d other ranks fetched the id within %v (missing ranks %s)",
		s.Addr(), len(joined), s.r.Size-1, s.r.timeout(), strings.Join(missing, ", "))
	for r := 1; r < s.r.Size; r++ {
		if joined[r] > 1 {
			msg += fmt.Sprintf("; rank %d fetched %d times (two processes with one rank?)", r, joined[r])
		}
	}
	if len(refusals) > 0 {
		msg += "; refused: " + strings.Join(refusals, "; ")
	}
	return fmt.Errorf("%s: %w", msg, cause)
}

// handle runs the server side of one connection. It never panics on what a
// client sends: every short read, bad magic or mismatch becomes a refusal.
func (s *RendezvousServer) handle(c net.Conn, payload []byte, deadline time.Time) rdvJoin {
	c.SetDeadline(deadline)
	from := c.RemoteAddr().String()
	var hello [rdvHelloLen]byte
	if _, err := io.ReadFull(c, hello[:]); err != nil {
		return rdvJoin{rank: -1, refused: fmt.Sprintf("%s sent no complete hello (%v)", from, err)}
	}
	refuse := func(format string, args ...any) rdvJoin {
		why := fmt.Sprintf(format, args...)
		writeRdvReply(c, rdvStatusNo, []byte(why))
		return rdvJoin{rank: -1, refused: from + ": " + why}
	}
	if string(hello[0:4]) != rdvMagic {
		return refuse("not a commsim rendezvous client (magic %q)", hello[0:4])
	}
	version := binary.BigEndian.Uint16(hello[4:6])
	size := binary.BigEndian.Uint32(hello[8:12])
	rank := binary.BigEndian.Uint32(hello[12:16])
	n := binary.BigEndian.Uint32(hello[16:20])
	switch {
	case version != rdvVersion:
		return refuse("protocol version %d, rank 0 speaks %d", version, rdvVersion)
	case int64(size) != int64(s.r.Size):
		return refuse("rank %d has world size %d, rank 0 has %d", rank, size, s.r.Size)
	case rank == 0 || int64(rank) >= int64(s.r.Size):
		return refuse("rank %d is not in [1, %d)", rank, s.r.Size)
	case int64(n) != int64(len(payload)):
		return refuse("rank %d wants a %d-byte payload, rank 0 has %d bytes", rank, n, len(payload))
	}
	if err := writeRdvReply(c, rdvStatusOK, payload); err != nil {
		return rdvJoin{rank: -1}
	}
	var ack [1]byte
	if _, err := io.ReadFull(c, ack[:]); err != nil || ack[0] != rdvAck {
		return rdvJoin{rank: -1}
	}
	return rdvJoin{rank: int(rank)}
}

func writeRdvReply(c net.Conn, status uint16, body []byte) error {
	if status != rdvStatusOK && len(body) > rdvMaxText {
		body = body[:rdvMaxText]
	}
	msg := make([]byte, rdvReplyLen+len(body))
	copy(msg, rdvMagic)
	binary.BigEndian.PutUint16(msg[4:6], rdvVersion)
	binary.BigEndian.PutUint16(msg[6:8], status)
	binary.BigEndian.PutUint32(msg[8:12], uint32(len(body)))
	copy(msg[rdvReplyLen:], body)
	_, err := c.Write(msg)
	return err
}

// Fetch is the side of every rank but 0: it connects to rank 0, retrying
// with backoff until the timeout because rank 0 may start later, and returns
// the n-byte payload. A refusal by rank 0, or a peer that does not speak the
// protocol, ends it at once with an error wrapping ErrRendezvousRefused. If
// rank 0 cannot be reached in time the error names the address, the timeout
// and the last failure, and wraps context.DeadlineExceeded.
func (r Rendezvous) Fetch(ctx context.Context, n int) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Rank == 0 {
		return nil, fmt.Errorf("rendezvous: %w: rank 0 serves the payload; it does not fetch it", hw.ErrBadArgument)
	}
	if n < 1 || n > rdvMaxPayload {
		return nil, fmt.Errorf("rendezvous: %w: payload length %d outside [1, %d]", hw.ErrBadArgument, n, rdvMaxPayload)
	}
	deadline := r.deadline(ctx)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	backoff := 10 * time.Millisecond
	var last error
	for attempt := 1; ; attempt++ {
		payload, err := r.fetchOnce(ctx, n, deadline)
		if err == nil {
			return payload, nil
		}
		if errors.Is(err, ErrRendezvousRefused) {
			return nil, err
		}
		last = err
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			cause := ctx.Err()
			return nil, fmt.Errorf("rendezvous: rank %d could not fetch the id from rank 0 at %s within %v (%d attempts; last: %v): %w",
				r.Rank, r.Addr, r.timeout(), attempt, last, cause)
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// fetchOnce makes one attempt. Errors that retrying may fix (nothing
// listening yet, a connection reset) come back plain; the rest wrap
// ErrRendezvousRefused.
func (r Rendezvous) fetchOnce(ctx context.Context, n int, deadline time.Time) ([]byte, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", r.Addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()

	var hello [rdvHelloLen]byte
	copy(hello[:], rdvMagic)
	binary.BigEndian.PutUint16(hello[4:6], rdvVersion)
	binary.BigEndian.PutUint32(hello[8:12], uint32(r.Size))
	binary.BigEndian.PutUint32(hello[12:16], uint32(r.Rank))
	binary.BigEndian.PutUint32(hello[16:20], uint32(n))
	if _, err := c.Write(hello[:]); err != nil {
		return nil, err
	}
	var head [rdvReplyLen]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return nil, err
	}
	refused := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("rendezvous: rank %d: %w by %s: %s", r.Rank, ErrRendezvousRefused, r.Addr, fmt.Sprintf(format, args...))
	}
	if string(head[0:4]) != rdvMagic {
		return refused("the peer is not a commsim rendezvous (magic %q)", head[0:4])
	}
	if v := binary.BigEndian.Uint16(head[4:6]); v != rdvVersion {
		return refused("protocol version %d, this rank speaks %d", v, rdvVersion)
	}
	status := binary.BigEndian.Uint16(head[6:8])
	length := binary.BigEndian.Uint32(head[8:12])
	switch {
	case status == rdvStatusNo && length <= rdvMaxText:
		text := make([]byte, length)
		if _, err := io.ReadFull(c, text); err != nil {
			return refused("rank 0 refused without saying why (%v)", err)
		}
		return refused("%s", text)
	case status != rdvStatusOK:
		return refused("unknown status %d", status)
	case int64(length) != int64(n):
		return refused("rank 0 sent %d bytes, want %d", length, n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(c, payload); err != nil {
		return nil, err
	}
	// A failed ack is ignored: the payload is complete, and a retry would
	// only fetch the same bytes again. Rank 0 then does not count this rank
	// and reports it missing if it times out.
	c.Write([]byte{rdvAck})
	return payload, nil
}
