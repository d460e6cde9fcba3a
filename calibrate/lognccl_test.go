package calibrate

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

// A log carries what NCCL said of itself: its version (NCCL's version
// line, or nccl-tests' nccl-library code) and, with NCCL_DEBUG=INFO, the
// variables it read; NCCLOptions keeps those commsim follows and names
// the others.
func TestParseLogReadsNCCLsOwnLines(t *testing.T) {
	info := "node1:4242:4242 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" +
		"node1:4242:4242 [0] NCCL INFO NCCL_IB_HCA set to mlx5\n" +
		"node1:4242:4242 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n" +
		"node1:4243:4243 [1] NCCL INFO NCCL_PROTO set by environment to Simple\n" +
		"node1:4242:4242 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 8388608.\n" +
		"node1:4242:4242 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
	lg, err := ParseLog("info", []byte(info+plainLog))
	if err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{"NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": "8388608", "NCCL_SOCKET_IFNAME": "eth0"}
	if lg.NCCLVersion != "2.21.5" || !reflect.DeepEqual(lg.NCCLEnv, wantEnv) {
		t.Errorf("version %q, env %v; want 2.21.5, %v", lg.NCCLVersion, lg.NCCLEnv, wantEnv)
	}
	run, stated, err := lg.NCCLOptions()
	want := nccl.Options{Version: nccl.V2_21, Protos: []ops.Protocol{ops.ProtoSimple}, BuffSize: 8 << 20}
	followed := map[string]string{"NCCL_PROTO": "Simple", "NCCL_BUFFSIZE": "8388608"}
	if err != nil || !stated || !reflect.DeepEqual(run.Options, want) || !reflect.DeepEqual(run.Env, followed) || !reflect.DeepEqual(run.Ignored, []string{"NCCL_SOCKET_IFNAME=eth0"}) {
		t.Errorf("NCCLOptions: %+v, %v, %v; want %+v from %v, the socket ignored", run, stated, err, want, followed)
	}

	header := "# nccl-tests version 2.13.9 nccl-headers=22703 nccl-library=22703\n"
	if lg, err := ParseLog("header", []byte(header+plainLog)); err != nil || lg.NCCLVersion != "2.27.3" {
		t.Errorf("nccl-library=22703: %+v, %v; want 2.27.3", lg, err)
	}
	if lg, err := ParseLog("old", []byte("# nccl-tests version 2.0.0 nccl-headers=2708 nccl-library=2708\n"+plainLog)); err != nil || lg.NCCLVersion != "2.7.8" {
		t.Errorf("nccl-library=2708: %+v, %v; want 2.7.8", lg, err)
	}
	plain, err := ParseLog("plain", []byte(plainLog))
	if _, stated, _ := plain.NCCLOptions(); err != nil || stated {
		t.Errorf("a log that says nothing of NCCL: %+v, %v", plain, err)
	}
	for text, why := range map[string]string{
		"NCCL version 2.16.5+cuda12.0\n":                           "older than 2.18",
		"x [0] NCCL INFO NCCL_PROTO set by environment to LL256\n": `unknown protocol "LL256"`,
	} {
		lg, err := ParseLog("bad", []byte(text+plainLog))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := lg.NCCLOptions(); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v; want an error saying %q", text, err, why)
		}
	}
}

// With NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=TUNING, rank 0 says what NCCL
// ran for each call, and its lines cut nccl-tests' rows in pieces: the
// size columns, NCCL's lines for the out-of-place calls, their times,
// NCCL's lines for the in-place calls, their times. ParseLog joins the
// pieces and keeps, for each size, what NCCL ran.
func TestParseLogReadsWhatNCCLRan(t *testing.T) {
	const host = "gpu01:1234:1234 [0] NCCL INFO "
	named := func(fn string, bytes int, algo, proto string, hi int) string {
		return fmt.Sprintf("%s%s: %d Bytes -> Algo %s proto %s channel{Lo..Hi}={0..%d}\n", host, fn, bytes, algo, proto, hi)
	}
	// 2.24 on: an all-gather's line gives a rank's bytes.
	log := "# Collective test starting: all_gather_perf\n" +
		"#  Rank  0 Group  0 Pid   1234 on     gpu01 device  0 [0x18] NVIDIA H100 80GB HBM3\n" +
		"#  Rank  1 Group  0 Pid   1235 on     gpu01 device  1 [0x19] NVIDIA H100 80GB HBM3\n" +
		"#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
		"  1024  128  float  none  -1" + named("AllGather", 512, "RING", "LL", 0) +
		named("AllGather", 512, "RING", "LL", 0) +
		"  10.00  0.10  0.05  0" + named("AllGather", 512, "RING", "LL", 0) +
		"  10.50  0.10  0.05  0\n" +
		"[0]  2097152  262144  float  none  -1[0] " + named("AllGather", 1048576, "NVLS", "SIMPLE", 15) +
		"[0]  30.00  69.9  34.9  0[0] " + named("AllGather", 1048576, "RING", "LL128", 15) +
		"[0]  31.00  67.6  33.8  0\n"
	lg, err := ParseLog("tuning", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Samples) != 2 || lg.Samples[0].Bytes != 1024 || lg.Samples[0].TimeUS != 10 || lg.Samples[0].Line != 5 ||
		lg.Samples[1].Bytes != 2097152 || lg.Samples[1].TimeUS != 30 || lg.Samples[1].Line != 9 {
		t.Fatalf("samples %+v; want 1024 B in 10 µs from line 5 and 2 MiB in 30 µs from line 9", lg.Samples)
	}
	want := map[int64]Ran{
		1024:    {Algo: nccl.Ring, Proto: ops.ProtoLL, Channels: 1},
		2097152: {Algo: nccl.NVLS, Proto: ops.ProtoSimple, Channels: 16, Varies: true},
	}
	if !reflect.DeepEqual(lg.NCCLRan, want) || lg.UnreadRan != nil {
		t.Errorf("NCCLRan %v, unread %v; want %v, none unread", lg.NCCLRan, lg.UnreadRan, want)
	}
	// A line NCCL may print that commsim cannot read is left out, named
	// by its line.
	unknown := strings.Replace(log, named("AllGather", 1048576, "RING", "LL128", 15), named("AllGather", 1048576, "SYMK", "LL128", 15), 1)
	lg, err = ParseLog("unknown", []byte(unknown))
	if err != nil || lg.NCCLRan[2097152] != (Ran{Algo: nccl.NVLS, Proto: ops.ProtoSimple, Channels: 16}) ||
		!reflect.DeepEqual(lg.UnreadRan, []UnreadLine{{10, `algorithm "SYMK" is none commsim models`}}) {
		t.Errorf("a line of an unknown algorithm: %v, unread %+v, %v; want NVLS alone, line 10 unread", lg.NCCLRan, lg.UnreadRan, err)
	}
	if got := want[2097152].String() + " " + (Ran{Algo: nccl.Tree, Proto: ops.ProtoLL128}).String(); got != "nvls/Simple/16ch tree/LL128" {
		t.Errorf("Ran.String: %q", got)
	}

	// 2.20 to 2.22: numbers, and the collective's whole size.
	old := strings.NewReplacer("# Collective test starting: all_gather_perf", "# Collective test starting: all_reduce_perf",
		"float  none", "float  sum",
		named("AllGather", 512, "RING", "LL", 0), host+"1024 Bytes -> Algo 0 proto 2 time 12.500000\n",
		named("AllGather", 1048576, "NVLS", "SIMPLE", 15), host+"2097152 Bytes -> Algo 5 proto 1 time 25.000000\n",
		named("AllGather", 1048576, "RING", "LL128", 15), host+"2097152 Bytes -> Algo 5 proto 1 time 25.000000\n").Replace(log)
	lg, err = ParseLog("numbered", []byte(old))
	want = map[int64]Ran{1024: {Algo: nccl.Tree, Proto: ops.ProtoSimple}, 2097152: {Algo: nccl.NVLSTree, Proto: ops.ProtoLL128}}
	if err != nil || !reflect.DeepEqual(lg.NCCLRan, want) || len(lg.Samples) != 2 {
		t.Errorf("2.21's lines: %v, %v; want %v", lg, err, want)
	}
	// 2.23 names the collective before the numbers; another
	// collective's line is not the log's.
	named23 := strings.NewReplacer(host+"1024 Bytes", host+"AllReduce: 1024 Bytes", host+"2097152 Bytes", host+"AllReduce: 2097152 Bytes").Replace(old)
	named23 = strings.Replace(named23, "  10.50  0.10  0.05  0\n", "  10.50  0.10  0.05  0\n"+host+"AllGather: 2097152 Bytes -> Algo 1 proto 2 time 5.000000\n", 1)
	lg, err = ParseLog("named", []byte(named23))
	if err != nil || !reflect.DeepEqual(lg.NCCLRan, want) || len(lg.Samples) != 2 {
		t.Errorf("2.23's lines: %v, %v; want %v", lg, err, want)
	}

	// NCCL's lines as users paste them, without host:pid:tid, and a
	// warning with its time stamp.
	bare := "  1024  256  float  sum  -1[0] NCCL INFO 1024 Bytes -> Algo 1 proto 2 time 9.500000\n" +
		"  10.00  0.10  0.18  0[2024-05-01 12:00:00] gpu01:1:1 [0] enqueue.cc:100 NCCL WARN something\n" +
		"  10.50  0.10  0.17  0\n"
	lg, err = ParseLog("bare", []byte(bare))
	if err != nil || len(lg.Samples) != 1 || lg.Samples[0].TimeUS != 10 || !reflect.DeepEqual(lg.NCCLRan, map[int64]Ran{1024: {Algo: nccl.Ring, Proto: ops.ProtoSimple}}) {
		t.Errorf("NCCL's lines without a host: %+v, %v", lg, err)
	}

	// A whole row with NCCL's line glued after it stands alone, the next
	// row its own, at the end of the log too; a host's name may start
	// with a digit.
	whole := "  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0 4090box:9:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n"
	next := "  2048  512  float  sum  -1  20.00  0.10  0.18  0  20.50  0.10  0.17  0\n"
	for _, text := range []string{whole + next, next + whole} {
		lg, err := ParseLog("whole", []byte(text))
		if err != nil || len(lg.Samples) != 2 || lg.Samples[0].TimeUS != 10 || lg.Samples[1].TimeUS != 20 {
			t.Errorf("%q: %+v, %v; want 1024 B at 10 us and 2048 B at 20 us", text, lg, err)
		}
	}

	// A line's channels past an int32 are no count NCCL prints (0..2^63−1
	// counted −2^63 channels): the line is left out.
	huge := strings.Replace(bare, "[0] NCCL INFO 1024 Bytes -> Algo 1 proto 2 time 9.500000", host+"AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..9223372036854775807}", 1)
	if lg, err := ParseLog("huge", []byte(huge)); err != nil || len(lg.Samples) != 1 || len(lg.NCCLRan) != 0 {
		t.Errorf("a line of 2^63 channels: %+v, %v; want it left out", lg, err)
	}

	// A row that never gets its times is refused where it starts.
	for _, bad := range []struct{ log, why string }{
		{"  1024  256  float  sum  -1" + named("AllReduce", 1024, "RING", "LL", 0), "log:1: a row cut off by the end of the log"},
		{"  1024  256  float  sum  -1" + named("AllReduce", 1024, "RING", "LL", 0) + "# Avg bus bandwidth : 1\n", "log:1: a row cut off (a comment at line 2"},
		{"  1024  256  float  sum  -1" + named("AllReduce", 1024, "RING", "LL", 0) + "  10.0  x  0.1  0\n", "log:1: want time, algbw and busbw"},
	} {
		if _, err := ParseLog("log", []byte(bad.log)); err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("%q: %v; want %q", bad.log, err, bad.why)
		}
	}
}

// Every rank says what NCCL read from its environment; where they
// disagree, the first word stands.
func TestParseLogKeepsTheFirstWordOnAVariable(t *testing.T) {
	info := "node1:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n" +
		"node1:2:2 [1] NCCL INFO NCCL_PROTO set by environment to LL\n" +
		"node1:2:2 [2] NCCL INFO NCCL_PROTO set by environment to LL\n" +
		"node1:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n" +
		"node1:2:2 [1] NCCL INFO NCCL version 2.23.4+cuda12.6\n" +
		"# nccl-library=22105\n"
	lg, err := ParseLog("info", []byte(info+plainLog))
	want := []string{"NCCL_PROTO Simple, then LL", "NCCL's release 2.21.5, then 2.23.4"}
	if err != nil || lg.NCCLEnv["NCCL_PROTO"] != "Simple" || lg.NCCLVersion != "2.21.5" || !slices.Equal(lg.Disagree, want) {
		t.Errorf("%v, env %v, release %s, disagreeing %q; want NCCL_PROTO=Simple and 2.21.5, the first rank's, and the others said once each", err, lg.NCCLEnv, lg.NCCLVersion, lg.Disagree)
	}
}
