package calibrate

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A plain nccl-tests table, and the same rows as a cluster prints them:
// launcher tags, time stamps, dates, banners and Open MPI's notes on
// the help messages it held back.
const (
	plainLog = "# Collective test starting: all_reduce_perf\n" +
		"#  Rank  0 Group  0 Pid   4242 on     node01 device  0 [0x18] NVIDIA H100 80GB HBM3\n" +
		"#  Rank  1 Group  0 Pid   4243 on     node01 device  1 [0x19] NVIDIA H100 80GB HBM3\n" +
		"#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
		"  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0\n" +
		"  2048  512  float  sum  -1  11.00  0.19  0.33  0  11.10  0.18  0.32  0\n" +
		"  4096  1024  float  sum  -1  12.00  0.34  0.60  0  12.10  0.34  0.60  0\n" +
		"  8192  2048  float  sum  -1  13.00  0.63  1.10  0  13.10  0.63  1.10  0\n" +
		"  16384  4096  float  sum  -1  14.00  1.17  2.05  0  14.10  1.16  2.03  0\n" +
		"  32768  8192  float  sum  -1  15.00  2.18  3.82  0  15.10  2.17  3.80  0\n" +
		"  65536  16384  float  sum  -1  16.00  4.10  7.17  0  16.10  4.07  7.12  0\n" +
		"# Avg bus bandwidth    : 2.1\n"
	clusterLog = "===== all_reduce_perf on 2 GPUs =====\n" +
		"+ mpirun -np 2 --tag-output ./all_reduce_perf -b 1K -e 64K\n" +
		"Wed May  1 12:00:00 UTC 2024\n" +
		"[1,0]<stdout>:# Collective test starting: all_reduce_perf\n" +
		"[1,0]<stdout>:#  Rank  0 Group  0 Pid   4242 on     node01 device  0 [0x18] NVIDIA H100 80GB HBM3\n" +
		"[1,0]<stdout>:#  Rank  1 Group  0 Pid   4243 on     node01 device  1 [0x19] NVIDIA H100 80GB HBM3\n" +
		"[1,0]<stdout>:#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
		"[1,0]<stdout>:  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0\n" +
		"2024-05-01 12:00:00\n" +
		"0:   2048  512  float  sum  -1  11.00  0.19  0.33  0  11.10  0.18  0.32  0\n" +
		"2024-05-01T12:00:01.123456789Z [1,0]<stdout>:  4096  1024  float  sum  -1  12.00  0.34  0.60  0  12.10  0.34  0.60  0\n" +
		"gpu01: [0]   8192  2048  float  sum  -1  13.00  0.63  1.10  0  13.10  0.63  1.10  0\n" +
		"-----------------------------------------\n" +
		"[2024-05-01 12:00:02] 0:  16384  4096  float  sum  -1  14.00  1.17  2.05  0  14.10  1.16  2.03  0\n" +
		"*** still running ***\n" +
		"[1,1]<stderr>:Warning: Permanently added 'gpu02' (ED25519) to the list of known hosts.\n" +
		"NCCL version 2.21.5+cuda12.4\n" +
		"[pod/nccl-test-launcher/mpi] 32768  8192  float  sum  -1  15.00  2.18  3.82  0  15.10  2.17  3.80  0\n" +
		"12:00:03 [1,0]<stdout>:65536  16384  float  sum  -1  16.00  4.10  7.17  0  16.10  4.07  7.12  0\n" +
		"[1,0]<stdout>:\n" +
		"[1,0]<stdout>:# Avg bus bandwidth    : 2.1\n" +
		"Wed, 01 May 2024 12:00:04 +0000\n" +
		"8 more processes have sent help message help-mtl-ofi.txt / OFI call fail\n" +
		"Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error messages\n" +
		"Warning: Permanently added '10.15.28.33' (ED25519) to the list of known hosts.\n" +
		"[g138:341911] Warning: could not find environment variable \"LD_LIBRARY_PATH\"\n"
)

// Issue #17: a plain time-stamp line ended calibrate in "index out of
// range [-1]".
func TestParseLogTimestampLine(t *testing.T) {
	text := strings.Replace(plainLog, "  2048", "2024-05-01 12:00:00\n  2048", 1)
	lg, err := ParseLog("x", []byte(text))
	if err != nil || len(lg.Samples) != 7 {
		t.Fatalf("%v, %+v", err, lg)
	}
	for _, line := range []string{"2024-05-01 12:00:00", "2024-05-01", "12:00:00", "[2024-05-01 12:00:00]", "2024-05-01T12:00:00Z"} {
		if _, err := ParseLog("x", []byte(plainLog+line+"\n")); err != nil {
			t.Errorf("%q: %v", line, err)
		}
	}
}

// A cluster's tags, stamps, dates and banners change nothing: the rows,
// their lines excepted, are the plain log's.
func TestParseLogAsClustersPrintIt(t *testing.T) {
	plain, err := ParseLog("plain", []byte(plainLog))
	if err != nil {
		t.Fatal(err)
	}
	lg, err := ParseLog("cluster", []byte(clusterLog))
	if err != nil {
		t.Fatal(err)
	}
	if lg.Op != plain.Op || lg.Ranks != plain.Ranks || lg.Type != plain.Type || lg.Format != plain.Format || len(lg.Samples) != len(plain.Samples) {
		t.Fatalf("cluster log %+v, plain %+v", lg, plain)
	}
	for i, s := range lg.Samples {
		if s.Bytes != plain.Samples[i].Bytes || s.TimeUS != plain.Samples[i].TimeUS {
			t.Errorf("row %d: %+v, want %+v", i, s, plain.Samples[i])
		}
	}
	if want := []int{8, 10, 11, 12, 14, 18, 19}; !reflect.DeepEqual(sampleLines(lg), want) {
		t.Errorf("lines %v, want %v", sampleLines(lg), want)
	}
}

// Open MPI's --tag-output tags each piece of a rank's output: nccl-tests
// writes a row in three (its sizes, the out-of-place times, the in-place
// ones), so a row carries the tag three times, as published p5 runs on
// AWS show (KeitaW/p5-nccl-test-2024-07-19). The log reads as the plain
// one, line for line. A rank's stderr glued into a row is still no part
// of it, and a tag inside a number (no piece starts there: each starts
// with spaces) leaves the row refused, not read as two numbers.
func TestParseLogTagsOnEachPieceOfARow(t *testing.T) {
	plain, err := ParseLog("plain", []byte(plainLog))
	if err != nil {
		t.Fatal(err)
	}
	const tag = "[1,0]<stdout>:"
	lines := strings.Split(plainLog, "\n")
	for i, l := range lines {
		if f := strings.Fields(l); len(f) == 13 && !strings.HasPrefix(l, "#") {
			l = "  " + strings.Join(f[:5], "  ") + tag + "  " + strings.Join(f[5:9], "  ") + tag + "  " + strings.Join(f[9:], "  ")
		}
		lines[i] = tag + l
	}
	pieces := strings.Join(lines, "\n")
	if !strings.Contains(pieces, "-1"+tag+"  10.00  0.10  0.18  0"+tag+"  10.50") {
		t.Fatalf("no row cut in pieces: %q", pieces)
	}
	lg, err := ParseLog("pieces", []byte(pieces))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lg.Samples, plain.Samples) || lg.Op != plain.Op || lg.Ranks != plain.Ranks {
		t.Errorf("tagged in pieces %+v, plain %+v", lg, plain)
	}
	for name, glued := range map[string]string{
		"stderr": strings.Replace(pieces, "-1"+tag+"  10.00", "-1[1,1]<stderr>:  10.00", 1),
		"number": strings.Replace(pieces, "-1"+tag+"  10.00", "-1  1"+tag+"0.00", 1),
	} {
		if _, err := ParseLog(name, []byte(glued)); err == nil {
			t.Errorf("a row with a tag glued in (%s) was read: %q", name, glued)
		}
	}
}

// A page quoting a run may drop the '#' of nccl-tests' comment lines
// (Markdown reads it as a heading): the log reads as the plain one,
// its collective, ranks and columns included, and a line that only
// looks like one of them is still refused.
func TestParseLogBareComments(t *testing.T) {
	plain, err := ParseLog("plain", []byte(plainLog))
	if err != nil {
		t.Fatal(err)
	}
	bare := "nccl-tests version 2.17.6 nccl-headers=22602 nccl-library=22602\n" +
		"nThread 1 nGpus 1 minBytes 1024 maxBytes 65536 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n" +
		"Using devices\n" + strings.ReplaceAll(plainLog, "#", "") +
		"Out of bounds values : 0 OK\n"
	lg, err := ParseLog("bare", []byte(bare))
	if err != nil {
		t.Fatal(err)
	}
	if lg.Op != plain.Op || lg.Ranks != plain.Ranks || lg.Type != plain.Type || lg.GPUsPerThread != 1 || len(lg.Samples) != len(plain.Samples) {
		t.Fatalf("bare log %+v, plain %+v", lg, plain)
	}
	for i, s := range lg.Samples {
		if s.Bytes != plain.Samples[i].Bytes || s.TimeUS != plain.Samples[i].TimeUS {
			t.Errorf("row %d: %+v, want %+v", i, s, plain.Samples[i])
		}
	}
	for _, line := range []string{"Using devices now", "nccl-tests", "Avg bus", "size of the run: 2"} {
		if _, err := ParseLog("x", []byte(plainLog+line+"\n")); err == nil {
			t.Errorf("%q: read as a comment, want an error naming it", line)
		}
	}
}

func sampleLines(lg *Log) []int {
	var out []int
	for _, s := range lg.Samples {
		out = append(out, s.Line)
	}
	return out
}

// Behind its tags a broken row is still named, and text that is neither a
// row, a comment, a date nor a banner is still refused.
func TestParseLogTaggedErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct {
		text string
		line int
		want string
	}{
		{clusterLog + "[1,0]<stdout>:  131072  32768  float  sum  -1  fast  0  0  0  1  0  0  0\n", 27, `time "fast" is not a number: "[1,0]<stdout>:  131072`},
		{clusterLog + "0: 131072  32768  float  sum  -1  16.00\n", 27, "want time, algbw and busbw"},
		{clusterLog + "mpirun noticed that process rank 1 exited on signal 9\n", 27, "want a result row"},
		{clusterLog + "Warning: the GPU fell off the bus\n", 27, "want a result row"},
		{clusterLog + "Warning: Permanently added  131072  32768  float  sum  -1  16.00  8.19  14.3  0 to the list of known hosts.\n", 27, "want a result row"},
		{"2024-05-01 12:00:00 [1,0]<stdout>: mpirun: forwarding signal\n", 1, "want a result row"},
	} {
		_, err := ParseLog("log", []byte(c.text))
		var le *LogError
		if !errors.As(err, &le) || le.Line != c.line || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v (line %v), want line %d and %q", err, le, c.line, c.want)
		}
	}
}

// realLogs are the published nccl-tests runs (package fidelity carries
// them) and cmd/commsim's calibrate logs, by name.
func realLogs(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, pattern := range []string{"../fidelity/nccl-logs/*.txt", "../cmd/commsim/testdata/nccl-tests/*.txt", "../cmd/commsim/testdata/nccl-tests/*.csv"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out[f] = data
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d real logs; want the published ones and calibrate's", len(out))
	}
	return out
}

// Every real log parses, the published ones with their "0:" and
// "[1,0]<stdout>:" tags.
func TestParseLogRealLogs(t *testing.T) {
	for name, data := range realLogs(t) {
		lg, err := ParseLog(name, data)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		checkWellFormed(t, name, data, lg)
	}
}

// checkWellFormed fails t unless lg is what an accepted log must be: rows
// with a size >= 0 and a finite time > 0, sorted by size with no size
// twice, each on a line of data.
func checkWellFormed(t *testing.T, name string, data []byte, lg *Log) {
	t.Helper()
	lines := strings.Count(string(data), "\n") + 1
	if lg.Format != "nccl-tests table" && lg.Format != "csv" || len(lg.Samples) == 0 || lg.Ranks < 0 {
		t.Fatalf("%s: format %q, %d rows, %d ranks", name, lg.Format, len(lg.Samples), lg.Ranks)
	}
	for i, s := range lg.Samples {
		if s.Bytes < 0 || !(s.TimeUS > 0) || math.IsInf(s.TimeUS, 0) || s.Line < 1 || s.Line > lines ||
			(i > 0 && s.Bytes <= lg.Samples[i-1].Bytes) {
			t.Fatalf("%s: row %d is %+v (after %+v) of a log of %d lines", name, i, s, lg.Samples[max(i-1, 0)], lines)
		}
	}
}

// FuzzParseLog: no input panics; an accepted log is well formed; a
// refused one is a *LogError naming a line of the input on one line; and
// a launcher's tag on every line of a text log changes nothing (a JSON
// report is the file nccl-tests writes itself, -J FILE, which no launcher
// tags; tagged, it reads as text and is refused as text).
func FuzzParseLog(f *testing.F) {
	for _, data := range realLogs(f) {
		f.Add(data)
	}
	f.Add([]byte(plainLog))
	f.Add([]byte(clusterLog))
	f.Add([]byte("size(B),time(us)\n8,20.5\n16,21\n"))
	f.Add([]byte("2024-05-01 12:00:00\n"))
	f.Add([]byte("  1024  256  float  sum  -1h:1:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n" +
		"  10.0  0.1  0.1  0[0] h:1:1 [0] NCCL INFO 1024 Bytes -> Algo 1 proto 0 time 9.000000\n  10.5  0.1  0.1  0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lg, err := ParseLog("fuzz", data)
		if err != nil {
			checkRefusal(t, data, err)
		} else {
			checkWellFormed(t, "fuzz", data, lg)
		}
		if isJSON([]byte(strings.TrimPrefix(string(data), "\ufeff"))) {
			return
		}
		lines := strings.Split(string(data), "\n")
		for i := range lines {
			lines[i] = "[1,0]<stdout>:" + lines[i]
		}
		tagged, terr := ParseLog("fuzz", []byte(strings.Join(lines, "\n")))
		var le, tle *LogError
		switch {
		case (err == nil) != (terr == nil):
			t.Fatalf("untagged: %v; tagged: %v", err, terr)
		case err == nil && !reflect.DeepEqual(lg, tagged):
			t.Fatalf("untagged %+v, tagged %+v", lg, tagged)
		case err != nil && errors.As(err, &le) && errors.As(terr, &tle) && (le.Line != tle.Line || le.Reason != tle.Reason):
			t.Fatalf("untagged: %v; tagged: %v", err, terr)
		}
	})
}

func checkRefusal(t *testing.T, data []byte, err error) {
	t.Helper()
	var le *LogError
	lines := strings.Count(string(data), "\n") + 1
	if !errors.As(err, &le) || le.Line < 0 || le.Line > lines || strings.Contains(err.Error(), "\n") || len(le.Text) > 120 {
		t.Fatalf("refused with %v (line %v) for a log of %d lines", err, le, lines)
	}
}

// A log collector's level is a tag only after a stamp or another tag: a
// line that starts with one is a line of its own, and "ERROR" alone in
// the middle of a table (a wrapper's word on a crashed run) is refused,
// not read as a blank line.
func TestParseLogKeepsALevelThatStartsALine(t *testing.T) {
	for _, c := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"ERROR alone", clusterLog + "ERROR\n", 27, "want a result row"},
		{"WARN before a banner", plainLog + "WARN =====\n", 13, "want a result row"},
	} {
		_, err := ParseLog("log", []byte(c.text))
		var le *LogError
		if !errors.As(err, &le) || le.Line != c.line || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want line %d and %q", c.name, err, c.line, c.want)
		}
	}
	// After a stamp, the level is the collector's.
	if lg, err := ParseLog("log", []byte(plainLog+"2024-05-01 10:00:00,123 ERROR\n")); err != nil || len(lg.Samples) != 7 {
		t.Errorf("a stamped level alone: %v", err)
	}
}

// A tag glued to a comment's '#' ("[0]#", "gpu01:#") is still a tag:
// the comment is read (its collective, its ranks).
func TestParseLogTagGluedToAComment(t *testing.T) {
	row := "  1024  256  float  none  -1  10.00  0.10  0.05  0  10.50  0.10  0.05  0\n"
	for _, tag := range []string{"[0]", "gpu01:"} {
		text := tag + "# Collective test starting: all_gather_perf\n" +
			tag + "#  Rank  1 Group  0 Pid 1 on h device  1 [0x1b] H100\n" + tag + row
		lg, err := ParseLog("x", []byte(text))
		if err != nil || lg.Op != "allgather" || lg.Ranks != 2 || len(lg.Samples) != 1 {
			t.Errorf("%q: %+v, %v; want an all-gather on 2 ranks", tag, lg, err)
		}
	}
}
