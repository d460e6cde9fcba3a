package sim_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
)

func TestParseFaultRoundTrip(t *testing.T) {
	for _, s := range []string{
		"link gpu3-sw0 down at 100us",
		"link gpu0-gpu1 degrade 50% at 1.5ms",
		"link gpu 0-leaf down at 1us", // a YAML node's name may hold spaces
		"link gpu 0-down degrade 50% at 0",
		"rank 2 stall 20us at 5us",
		"rank 1 crash at 1ms",
		"rank 0 slow 25% at 0",
	} {
		f, err := sim.ParseFault(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if got := f.String(); got != s {
			t.Errorf("ParseFault(%q).String() = %q", s, got)
		}
	}
	for _, s := range []string{"", "link", "link a-b", "link a-b up at 1us", "link a-b degrade 0% at 1us",
		"link a-b degrade 150% at 1us", "rank x crash at 1us", "rank -1 crash", "rank 1 stall",
		"rank 1 crash at", "rank 1 crash in 5us", "disk 3 full", "rank 1 slow 50", "rank 1 crash at 1parsec",
		"rank 1 crash at -1h", "rank 1 crash at 30000h", "rank 1 crash at 1hmin"} {
		if _, err := sim.ParseFault(s); err == nil {
			t.Errorf("ParseFault(%q) succeeded", s)
		}
	}
	// A run simulated for days takes its faults in minutes and hours.
	f, err := sim.ParseFault("rank 2 stall 2000h at 1.5min")
	if err != nil || f.For != sim.FromSeconds(2000*3600) || f.At != sim.FromSeconds(90) {
		t.Errorf("stall 2000h at 1.5min: %+v, %v", f, err)
	}
	if _, err := sim.ParseFault("rank 1 crash at 1parsec"); err == nil || !strings.Contains(err.Error(), "min or h") {
		t.Errorf("an unknown unit: %v, want the units listed", err)
	}
}

// sendOnce sends n bytes from rank a to rank b and returns the send's
// error, the receive's, and when the receive finished.
func sendOnce(t *testing.T, c *sim.Cluster, a, b, n int) (sendErr, recvErr error) {
	t.Helper()
	d := c.Devices()
	src := try(d[a].Alloc(hw.U8, n))(t)
	dst := try(d[b].Alloc(hw.U8, n))(t)
	pattern := make([]byte, n)
	for i := range pattern {
		pattern[i] = byte(i * 7)
	}
	ok(t, src.Write(pattern))
	sa, sb := try(d[a].NewStream())(t), try(d[b].NewStream())(t)
	ok(t, sa.Send(hw.Whole(src), d[b], 0))
	ok(t, sb.Recv(hw.Whole(dst), d[a], 0))
	sendErr, recvErr = sa.Synchronize(), sb.Synchronize()
	if recvErr == nil {
		got := make([]byte, n)
		ok(t, dst.Read(got))
		if string(got) != string(pattern) {
			t.Fatal("received data differs from what was sent")
		}
	}
	return sendErr, recvErr
}

func TestLinkDownReroutesInFlightTransfer(t *testing.T) {
	c := newCluster(t, "ring:4,bw=100GB/s,lat=1us", sim.Config{})
	// 1 MB 0->1 direct: 1us latency, then 10us of drain. The link dies at
	// 6us with half the bytes moved; the rest takes the 3-hop detour:
	// 3us latency + 5us = done at 14us.
	ok(t, c.Inject(try(sim.ParseFault("link gpu0-gpu1 down at 6us"))(t)))
	sendErr, recvErr := sendOnce(t, c, 0, 1, 1_000_000)
	ok(t, sendErr)
	ok(t, recvErr)
	if now := c.Now(); now != 14*sim.Microsecond {
		t.Fatalf("finished at %v, want 14us", now)
	}
	log := strings.Join(c.FaultLog(), "\n")
	if !strings.Contains(log, "link gpu0-gpu1 down") || !strings.Contains(log, "rank 0 -> rank 1 rerouted (3 hops") {
		t.Fatalf("fault log does not report the reroute:\n%s", log)
	}
	// Later transfers route around the hole from the start: 3us + 10us.
	start := c.Now()
	ok(t, firstErr(sendOnce(t, c, 0, 1, 1_000_000)))
	if d := c.Now() - start; d != 13*sim.Microsecond {
		t.Fatalf("a transfer after the fault took %v, want 13us", d)
	}
}

// TestUnfiredListsFaultsTheRunNeverReached: a fault whose time comes
// after the work ends is not applied and Unfired names it; one that came
// is not listed.
func TestUnfiredListsFaultsTheRunNeverReached(t *testing.T) {
	c := newCluster(t, "ring:4,bw=100GB/s,lat=1us", sim.Config{})
	early := try(sim.ParseFault("rank 2 stall 1us at 2us"))(t)
	late := try(sim.ParseFault("link gpu0-gpu1 down at 1s"))(t)
	ok(t, c.Inject(late))
	ok(t, c.Inject(early))
	if got := c.Unfired(); len(got) != 2 || got[0] != late || got[1] != early {
		t.Fatalf("before the run: Unfired() = %v, want both in injected order", got)
	}
	ok(t, firstErr(sendOnce(t, c, 0, 1, 1_000_000))) // ends at 11us
	if got := c.Unfired(); len(got) != 1 || got[0] != late {
		t.Fatalf("Unfired() = %v, want only %v", got, late)
	}
	if log := strings.Join(c.FaultLog(), "\n"); strings.Contains(log, "down") || !strings.Contains(log, "stall") {
		t.Fatalf("fault log:\n%s", log)
	}
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func TestLinkDownWithoutDetourFailsAndNamesTheLink(t *testing.T) {
	c := newCluster(t, "switch:3,bw=100GB/s,lat=1us", sim.Config{})
	ok(t, c.Inject(try(sim.ParseFault("link sw0-gpu1 down at 5us"))(t)))
	sendErr, recvErr := sendOnce(t, c, 0, 1, 1_000_000)
	if sendErr == nil || !strings.Contains(sendErr.Error(), "with sw0-gpu1 down") || !strings.Contains(sendErr.Error(), "rank 0") || !strings.Contains(sendErr.Error(), "rank 1") {
		t.Fatalf("send error %v should name the link, as its fault did, and both ranks", sendErr)
	}
	// The receiver fails with the sender's cause, neither hanging nor
	// calling it a deadlock.
	if !errors.Is(recvErr, hw.ErrPeerFailed) || errors.Is(recvErr, hw.ErrDeadlock) || !strings.Contains(recvErr.Error(), "sw0-gpu1 down") {
		t.Fatalf("receiver: %v, want the sender's failure", recvErr)
	}
}

// TestLinksDownThatCutTheFabricSaySoOnce: on a ring of 8, one link down
// leaves a detour and the log says nothing of a cut; the second, opposite
// it, cuts the GPUs into two arcs of four, and the log names both once.
// Cut at every link, four of the eight parts are named.
func TestLinksDownThatCutTheFabricSaySoOnce(t *testing.T) {
	c := newCluster(t, "ring:8,bw=100GB/s,lat=1us", sim.Config{})
	ok(t, c.Inject(try(sim.ParseFault("link gpu0-gpu1 down at 1us"))(t)))
	ok(t, c.Inject(try(sim.ParseFault("link gpu4-gpu5 down at 2us"))(t)))
	ok(t, firstErr(sendOnce(t, c, 2, 3, 1_000_000)))
	want := "2.000000us: the links down cut the gpus into 2 parts that cannot reach one another: gpu0 gpu5 gpu6 … (4 gpus) | gpu1 gpu2 gpu3 … (4 gpus)"
	var cuts []string
	for _, line := range c.FaultLog() {
		if strings.Contains(line, "cut the gpus") {
			cuts = append(cuts, line)
		}
	}
	if len(cuts) != 1 || cuts[0] != want {
		t.Errorf("cut lines %q, want only %q", cuts, want)
	}
	// Cut into eight, a part a GPU: four are named, the rest counted.
	c = newCluster(t, "ring:8,bw=100GB/s,lat=1us", sim.Config{})
	for g := range 8 {
		ok(t, c.Inject(try(sim.ParseFault(fmt.Sprintf("link gpu%d-gpu%d down", g, (g+1)%8)))(t)))
	}
	if firstErr(sendOnce(t, c, 0, 1, 1)) == nil {
		t.Error("a send between GPUs cut apart succeeded")
	}
	log := strings.Join(c.FaultLog(), "\n")
	if want := "cut the gpus into 8 parts that cannot reach one another: gpu0 (1 gpu) | gpu1 (1 gpu) | gpu2 (1 gpu) | gpu3 (1 gpu) | 4 more parts (4 gpus)"; !strings.Contains(log, want) {
		t.Errorf("log %s\nwants %q", log, want)
	}
}

// TestDegradedLinkHalvesBandwidth: 1 MB over ring:2 at 100 GB/s, lat 1 us,
// halved from the start takes 1 us + 20 us; halved from 6 us, mid-transfer,
// the rest slows: 1 us + 5 us at 100 GB/s (500 kB) + 500 kB at 50 GB/s
// (10 us) = 16 us.
func TestDegradedLinkHalvesBandwidth(t *testing.T) {
	for at, want := range map[string]sim.Time{"0": 21 * sim.Microsecond, "6us": 16 * sim.Microsecond} {
		c := newCluster(t, "ring:2,bw=100GB/s,lat=1us", sim.Config{})
		ok(t, c.Inject(try(sim.ParseFault("link gpu0-gpu1 degrade 50% at "+at))(t)))
		ok(t, firstErr(sendOnce(t, c, 0, 1, 1_000_000)))
		if now := c.Now(); now != want {
			t.Errorf("degraded at %s: finished at %v, want %v", at, now, want)
		}
	}
}

func TestStalledRankStartsLate(t *testing.T) {
	c := newCluster(t, "ring:2,bw=100GB/s,lat=1us", sim.Config{})
	ok(t, c.Inject(try(sim.ParseFault("rank 0 stall 7us at 0"))(t)))
	ok(t, firstErr(sendOnce(t, c, 0, 1, 1_000_000)))
	if now := c.Now(); now != 18*sim.Microsecond {
		t.Fatalf("finished at %v, want 7us stall + 11us", now)
	}
}

func TestCrashFailsPeersInsteadOfHanging(t *testing.T) {
	c := newCluster(t, "ring:3,bw=100GB/s,lat=1us", sim.Config{})
	ok(t, c.Inject(try(sim.ParseFault("rank 1 crash at 5us"))(t)))
	d := c.Devices()
	buf := func(r int) hw.Slice { return hw.Whole(try(d[r].Alloc(hw.U8, 1_000_000))(t)) }
	s0, s2 := try(d[0].NewStream())(t), try(d[2].NewStream())(t)
	ok(t, s0.Send(buf(0), d[1], 0)) // in flight when rank 1 dies
	ok(t, s2.Recv(buf(2), d[1], 0)) // waits for a message that never comes
	if err := s0.Synchronize(); !errors.Is(err, sim.ErrCrashed) || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("sender: %v, want ErrCrashed naming rank 1", err)
	}
	err := s2.Synchronize()
	if !errors.Is(err, hw.ErrDeadlock) || !strings.Contains(err.Error(), "rank 1 crashed at 5.000000us") {
		t.Fatalf("receiver: %v, want a deadlock report saying rank 1 crashed", err)
	}
}

func TestSlowReduce(t *testing.T) {
	c := newCluster(t, "ring:2,reduce=2GB/s", sim.Config{})
	ok(t, c.Inject(try(sim.ParseFault("rank 0 slow 25% at 0"))(t)))
	d := c.Devices()[0]
	x, y := try(d.Alloc(hw.F32, 500))(t), try(d.Alloc(hw.F32, 500))(t)
	s := try(d.NewStream())(t)
	ok(t, s.Reduce(hw.Sum, hw.Whole(x), hw.Whole(y)))
	ok(t, s.Synchronize())
	if now := c.Now(); now != 4*sim.Microsecond {
		t.Fatalf("2000 bytes at 0.5 GB/s took %v, want 4us", now)
	}
}

func TestInjectRefusesBadFaults(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	for _, f := range []string{"link gpu0-gpu9 down at 0", "link gpu0-sw0 down at 0", "rank 5 crash at 0"} {
		if err := c.Inject(try(sim.ParseFault(f))(t)); err == nil {
			t.Errorf("Inject(%q) succeeded", f)
		}
	}
	// Made by hand, past ParseFault: times and stalls below 0.
	for _, f := range []sim.Fault{{Kind: sim.RankStall, At: -5, For: 100}, {Kind: sim.RankStall, At: 5, For: -100}} {
		if err := c.Inject(f); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("Inject(%+v): %v, want an error saying what is negative", f, err)
		}
	}
	// On a cluster whose clock has moved, a fault that could never be
	// injected says why, not that its time has passed.
	devs := c.Devices()
	buf0, buf1 := try(devs[0].Alloc(hw.F32, 4))(t), try(devs[1].Alloc(hw.F32, 4))(t)
	s0, s1 := try(devs[0].NewStream())(t), try(devs[1].NewStream())(t)
	ok(t, s0.Send(hw.Whole(buf0), devs[1], 1))
	ok(t, s1.Recv(hw.Whole(buf1), devs[0], 1))
	ok(t, s1.Synchronize())
	if c.Now() == 0 {
		t.Fatal("the send took no time")
	}
	for f, want := range map[string]string{"rank 77 crash at 0": "rank 77 not in 0..1", "link gpu0-gpu9 down at 0": "gpu9", "rank 0 crash at 0": "simulated time is already"} {
		if err := c.Inject(try(sim.ParseFault(f))(t)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Inject(%q) after a run: %v, want %q", f, err, want)
		}
	}
}

// TestHyphenatedLinkNames: nodes may have '-' in their names, so a link
// is found at whichever split names it; a name two links answer to is
// refused, naming both, where the first split's link went down.
func TestHyphenatedLinkNames(t *testing.T) {
	topo, err := topology.ReadYAML([]byte(`nodes:
  - {name: gpu-0, kind: gpu}
  - {name: gpu-1, kind: gpu}
  - {name: sw, kind: switch}
  - {name: gpu, kind: gpu}
  - {name: 0-sw, kind: switch}
links:
  - {a: gpu-0, b: sw, bw: 10GB/s, lat: 1us}
  - {a: gpu-1, b: sw, bw: 10GB/s, lat: 1us}
  - {a: gpu, b: 0-sw, bw: 10GB/s, lat: 1us}
  - {a: 0-sw, b: sw, bw: 10GB/s, lat: 1us}
`))
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(topo, sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Inject(try(sim.ParseFault("link gpu-1-sw down at 0"))(t)); err != nil {
		t.Errorf("gpu-1-sw: %v", err)
	}
	err = c.Inject(try(sim.ParseFault("link gpu-0-sw down at 0"))(t))
	if err == nil || !strings.Contains(err.Error(), "ambiguous") || !strings.Contains(err.Error(), "gpu-0 and sw") || !strings.Contains(err.Error(), "gpu and 0-sw") {
		t.Errorf("gpu-0-sw: %v, want it refused as naming two links", err)
	}
}

func FuzzParseFault(f *testing.F) {
	for _, s := range []string{"link gpu3-sw0 down at 100us", "link a-b-c degrade 12.5% at 1ms", "rank 2 stall 20us at 5us",
		"rank 1 crash at 1ms", "rank 0 slow 25%", "rank 99999999999999999999 crash", "link - down at -1us", "rank 1 stall 1e400s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ft, err := sim.ParseFault(s)
		if err != nil {
			return
		}
		again, err := sim.ParseFault(ft.String())
		if err != nil {
			t.Fatalf("%q parsed, but its String %q does not: %v", s, ft.String(), err)
		}
		if again != ft {
			t.Fatalf("%q -> %+v -> %q -> %+v", s, ft, ft.String(), again)
		}
	})
}

func TestConflictingFaultsAreRefused(t *testing.T) {
	cases := []struct {
		first, second string
		why           string // "" when the two may both be injected
	}{
		{"rank 3 crash at 1us", "rank 3 crash at 2us", "rank 3 has two crash faults"},
		{"rank 3 crash at 2us", "rank 3 crash at 1us", "rank 3 has two crash faults"},
		{"rank 1 stall 5us at 0", "rank 1 stall 1us at 10us", "rank 1 has two stall faults"},
		{"rank 1 slow 50% at 0", "rank 1 slow 25% at 1us", "rank 1 has two slow faults"},
		{"link gpu0-sw0 degrade 50% at 0", "link sw0-gpu0 degrade 20% at 0", "link gpu0-sw0 has two degrade faults"},
		{"link gpu0-sw0 down at 1us", "link sw0-gpu0 down at 2us", "link gpu0-sw0 has two down faults"},
		{"rank 2 crash at 1us", "rank 2 stall 5us at 1us", "rank 2 crashes at 1us, so it cannot stall at 1us"},
		{"rank 2 slow 50% at 3us", "rank 2 crash at 1us", "rank 2 crashes at 1us, so it cannot slow at 3us"},
		{"link gpu0-sw0 down at 1us", "link gpu0-sw0 degrade 50% at 2us", "link gpu0-sw0 goes down at 1us, so it cannot degrade at 2us"},
		// A fault before the end, or on another rank or link, is no conflict.
		{"rank 2 stall 5us at 0", "rank 2 crash at 1us", ""},
		{"link gpu0-sw0 degrade 50% at 0", "link gpu0-sw0 down at 2us", ""},
		{"rank 2 crash at 1us", "rank 3 crash at 1us", ""},
		{"link gpu0-sw0 down at 1us", "link gpu1-sw0 down at 1us", ""},
		{"rank 0 crash at 1us", "link gpu0-sw0 down at 2us", ""},
	}
	for _, tc := range cases {
		c := newCluster(t, "switch:4", sim.Config{})
		ok(t, c.Inject(try(sim.ParseFault(tc.first))(t)))
		err := c.Inject(try(sim.ParseFault(tc.second))(t))
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("%q then %q: %v", tc.first, tc.second, err)
		case tc.why == "":
		case err == nil:
			t.Errorf("%q then %q: both injected", tc.first, tc.second)
		default:
			want := "sim: faults \"" + tc.first + "\" and \"" + tc.second + "\" conflict: " + tc.why
			if err.Error() != want {
				t.Errorf("%q then %q:\n got %v\nwant %s", tc.first, tc.second, err, want)
			}
		}
	}
}

func TestCrashOfAStalledRankNumbersItsOperation(t *testing.T) {
	c := newCluster(t, "switch:2", sim.Config{})
	ok(t, c.Inject(try(sim.ParseFault("rank 0 stall 5us at 0"))(t)))
	ok(t, c.Inject(try(sim.ParseFault("rank 0 crash at 1us"))(t)))
	s := try(c.Devices()[0].NewStream())(t)
	ok(t, s.(*sim.Stream).Compute(1e-6, "never begun"))
	err := s.Synchronize()
	if !errors.Is(err, sim.ErrCrashed) || !strings.Contains(err.Error(), "stream 0, op #0 compute") {
		t.Fatalf("Synchronize = %v, want the crash at op #0", err)
	}
}

// TestSlowCompute: a rank's computes that start once it is slow take
// 1/P as long, those before and on other ranks do not change.
func TestSlowCompute(t *testing.T) {
	c := newCluster(t, "ring:2", sim.Config{})
	ok(t, c.Inject(try(sim.ParseFault("rank 0 compute-slow 25% at 5us"))(t)))
	d := c.Devices()
	s0, s1 := try(d[0].NewStream())(t), try(d[1].NewStream())(t)
	for _, s := range []hw.Stream{s0, s1} {
		ok(t, s.(*sim.Stream).Compute(10e-6, "before"))
		ok(t, s.(*sim.Stream).Compute(10e-6, "after"))
	}
	ok(t, s1.Synchronize())
	if now := c.Now(); now != 20*sim.Microsecond {
		t.Fatalf("rank 1 computed 2 x 10us in %v, want 20us", now)
	}
	ok(t, s0.Synchronize())
	if now := c.Now(); now != 50*sim.Microsecond {
		t.Fatalf("rank 0 computed 10us, then 10us at 25%% speed, in %v, want 50us", now)
	}
}

// TestParseFaultSaysWhatIsMissing: a fault missing its duration or
// percentage says so rather than failing to read "at" as a number.
func TestParseFaultSaysWhatIsMissing(t *testing.T) {
	for s, want := range map[string]string{
		"rank 1 stall at 5us":         "stall needs a duration",
		"rank 1 slow at 5us":          "slow needs a percentage",
		"rank 3 compute-slow":         "compute-slow needs a percentage",
		"link a-b degrade at 1us":     "degrade needs a percentage",
		"rank 1 crash 5us":            `"5us" where "at TIME"`,
		"rank 1 compute-slow 20% 5us": `"5us" where "at TIME"`,
		"rank 1 stall -1us at 0":      `time "-1us" is not a duration of 0 or more`,
		"link a-b down at 5parsecs":   `time "5parsecs" is not a duration`,
	} {
		_, err := sim.ParseFault(s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseFault(%q) = %v, want an error saying %q", s, err, want)
		}
	}
	f, err := sim.ParseFault("rank 3 compute-slow 80% at 1ms")
	if err != nil || f.Kind != sim.SlowCompute || f.Rank != 3 || f.Factor != 0.8 || f.At != sim.Millisecond {
		t.Fatalf("ParseFault(compute-slow) = %+v, %v", f, err)
	}
	if got := f.String(); got != "rank 3 compute-slow 80% at 1ms" {
		t.Errorf("String() = %q", got)
	}
}

// TestFaultStringStaysOnOneLine: a link name no fabric has, empty or with
// a newline, is quoted where a fault is named (an error quoting it broke
// across lines).
func TestFaultStringStaysOnOneLine(t *testing.T) {
	for _, link := range []string{"\n", "", "a\tb"} {
		f := sim.Fault{Kind: sim.LinkDegrade, Link: link, Factor: 0.5}
		if got := f.String(); strings.ContainsAny(got, "\n\t") || !strings.Contains(got, fmt.Sprintf("%q", link)) {
			t.Errorf("link %q: %q", link, got)
		}
	}
}
