package calibrate

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

func TestParseLogLayouts(t *testing.T) {
	benchCSV := "op,algo,topology,ranks,size(B),count,type,redop,root,time(us),algbw(GB/s),busbw(GB/s),#wrong," +
		"in-place time(us),in-place algbw(GB/s),in-place busbw(GB/s),in-place #wrong\n" +
		`allreduce,ring,"switch:8,bw=1GB/s",8,64,16,f32,sum,-1,5.50,0.01,0.02,N/A,5.50,0.01,0.02,N/A` + "\n"
	cases := []struct {
		name, text string
		bytes      []int64
		times      []float64
	}{
		{"timestamps and big times", "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong  timestamp\n" +
			"  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0  2025-01-02 03:04:05\n" +
			"  1073741824  268435456  float  sum  -1  12345  86.98  152.2  0  12346  86.97  152.2  0  2025-01-02 03:04:06\n",
			[]int64{1024, 1 << 30}, []float64{10, 12345}},
		{"per-iteration columns", "#  size  count  type  redop  root  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%\n" +
			"  2048  512  float  sum  -1  11.00  0.19  0.33  0  10.9  11.2  11.2  0.50  11.10  0.18  0.32  0  11.0  11.3  11.3  0.40\n",
			[]int64{2048}, []float64{11}},
		{"no header, no root", "  1024  256  float  sum  10.00  0.10  0.18  0e+00  10.50  0.10  0.17  0e+00\n",
			[]int64{1024}, []float64{10}},
		{"no header, root", "  1024  256  float  sum  -1  10.00  0.10  0.18  N/A  10.50  0.10  0.17  N/A\n",
			[]int64{1024}, []float64{10}},
		// A stamp after a row with no root column makes the column count
		// odd; algbw = bytes/time says where the time is.
		{"no header, no root, a stamp", "  1048576  262144  float  sum  20.00  52.43  91.75  0  20.50  51.15  89.51  0  2024-05-01T12:00:00Z\n",
			[]int64{1048576}, []float64{20}},
		{"old gather without redop, NCCL INFO lines, CRLF, repeats averaged",
			"#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error\r\n" +
				"node01:123:123 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\r\n" +
				"  4096  128  float  30.00  0.14  0.13  0e+00  31.00  0.13  0.12  0e+00\r\n" +
				"  4096  128  float  32.00  0.14  0.13  0e+00  31.00  0.13  0.12  0e+00\r\n",
			[]int64{4096}, []float64{31}},
		{"bench csv", benchCSV, []int64{64}, []float64{5.5}},
		{"a byte-order mark", "\ufeff# Collective test starting: all_reduce_perf, with a comma\n" +
			"  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0\n", []int64{1024}, []float64{10}},
	}
	for _, c := range cases {
		lg, err := ParseLog("x", []byte(c.text))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if len(lg.Samples) != len(c.bytes) {
			t.Errorf("%s: %d rows, want %d", c.name, len(lg.Samples), len(c.bytes))
			continue
		}
		for i, r := range lg.Samples {
			if r.Bytes != c.bytes[i] || r.TimeUS != c.times[i] {
				t.Errorf("%s: row %d = %d B %.2f us, want %d B %.2f us", c.name, i, r.Bytes, r.TimeUS, c.bytes[i], c.times[i])
			}
		}
	}
	// A second run that quotes no rank lines ran on the first's.
	twice := "# Collective test starting: all_reduce_perf\n#  Rank  3 Group  0 Pid 1 on h device  3 [0x1b] H100\n" +
		"  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0\n# Collective test starting: all_reduce_perf\n" +
		"  1024  256  float  sum  -1  12.00  0.09  0.15  0  12.50  0.08  0.14  0\n"
	if lg, err := ParseLog("x", []byte(twice)); err != nil || lg.Ranks != 4 || len(lg.Samples) != 1 || lg.Samples[0].TimeUS != 11 {
		t.Errorf("two runs, the second without rank lines: %+v, %v; want 4 ranks, 1024 B at 11 us", lg, err)
	}
	if lg, err := ParseLog("x", []byte("size,time,op\n8,20,AllReduce\n16,21,all_reduce\n")); err != nil || lg.Op != "allreduce" {
		t.Errorf("a CSV's op as nccl-tests and NCCL name it: %+v, %v; want allreduce", lg, err)
	}
	lg, err := ParseLog("x", []byte(benchCSV))
	if err != nil || lg.Format != "csv" || lg.Op != "allreduce" || lg.Ranks != 8 || lg.Type != "f32" {
		t.Errorf("bench csv: %+v, %v", lg, err)
	}
}

// The header of nccl-tests names the collective, the rank lines count the
// ranks, and the type column the element type.
func TestParseLogHeader(t *testing.T) {
	text := "# Collective test starting: reduce_scatter_perf\n" +
		"#  Rank  0 Group  0 Pid   4242 on     node01 device  0 [0x18] NVIDIA H100 80GB HBM3\n" +
		"#  Rank  1 Group  0 Pid   4243 on     node01 device  1 [0x19] NVIDIA H100 80GB HBM3\n" +
		"#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
		"  2048  256  uint32  sum  -1  9.00  0.2  0.1  0  9.10  0.2  0.1  0\n" +
		"  1024  128  uint32  sum  -1  8.00  0.1  0.1  0  8.10  0.1  0.1  0\n"
	lg, err := ParseLog("rs.txt", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	dt, ok := lg.DType()
	if lg.Format != "nccl-tests table" || lg.Op != "reducescatter" || lg.Ranks != 2 || lg.Type != "uint32" || !ok || dt != hw.I32 {
		t.Errorf("%+v, dtype %v %v", lg, dt, ok)
	}
	if len(lg.Samples) != 2 || lg.Samples[0] != (Sample{1024, 8, 6, 128}) || lg.Samples[1] != (Sample{2048, 9, 5, 256}) {
		t.Errorf("samples %+v, want sorted by size with their lines and counts", lg.Samples)
	}
	if _, ok := (&Log{Type: "quaternion"}).DType(); ok {
		t.Error("an unknown type has a dtype")
	}
}

// A log that quotes only its last rank's line (a README's excerpt) still
// says how many ranks ran: the highest rank counts them.
func TestParseLogCountsRanksByTheHighest(t *testing.T) {
	text := "#  Rank 71 Group  0 Pid  14840 on slurm-gb200-207-171 device  3 [0x01] NVIDIA Graphics Device\n" +
		"#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
		"   536870912     134217728     float     sum      -1   1806.7  297.16  586.06      0   1835.9  292.43  576.74      0\n"
	lg, err := ParseLog("gb200.txt", []byte(text))
	if err != nil || lg.Ranks != 72 {
		t.Errorf("ranks %+v, %v: want 72", lg, err)
	}
}

// The device lines name each rank's host and GPU, in both of nccl-tests'
// layouts (Group in newer ones), behind a launcher's tag; a second run of
// the test names its own, which replace the first's.
func TestParseLogReadsDevices(t *testing.T) {
	row := "   1048576     262144     float     sum      -1   20.00  52.43  91.75      0   20.00  52.43  91.75      0\n"
	text := "# Collective test starting: all_reduce_perf\n" +
		"#   Rank  0 Pid 112424 on localhost device  0 [0x00] A100-SXM4-40GB\n" +
		"[1,0]<stdout>:#  Rank  1 Group  0 Pid     25 on test-node-1 device  7 [0000:db:00] NVIDIA H100 80GB HBM3\n" + row
	lg, err := ParseLog("devices.txt", []byte(text))
	want := []Device{{0, "localhost", 0, "0x00", "A100-SXM4-40GB", 2}, {1, "test-node-1", 7, "0000:db:00", "NVIDIA H100 80GB HBM3", 3}}
	if err != nil || !reflect.DeepEqual(lg.Devices, want) {
		t.Errorf("devices %+v, %v: want %+v", lg.Devices, err, want)
	}
	again := text + "# Collective test starting: all_reduce_perf\n#  Rank  0 Group  0 Pid 9 on other device  1 [0x1b] NVIDIA H200\n#  Rank  1 Group  0 Pid 9 on other device  2 [0x2b] NVIDIA H200\n" + row
	lg, err = ParseLog("again.txt", []byte(again))
	if err != nil || len(lg.Devices) != 2 || lg.Devices[0].Host != "other" || lg.Devices[1].Line != 7 {
		t.Errorf("a second run's devices %+v, %v: want its two", lg.Devices, err)
	}
	// A second run that quotes no device lines ran on the first's, as its
	// ranks are counted.
	lg, err = ParseLog("quiet.txt", []byte(text+"# Collective test starting: all_reduce_perf\n"+row))
	if err != nil || !reflect.DeepEqual(lg.Devices, want) || lg.Ranks != 2 {
		t.Errorf("a second run without device lines: devices %+v, ranks %d, %v: want the first run's", lg.Devices, lg.Ranks, err)
	}
}

// Each bad log is a *LogError naming the line and quoting it.
func TestParseLogErrorsNameTheLine(t *testing.T) {
	hdr := "# Collective test starting: all_reduce_perf\n#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
	row := "     1048576   262144  float  sum  -1   20.00  52.43  91.75  0   20.00  52.43  91.75  0\n"
	for _, c := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"bad time", hdr + row + "     2097152   524288  float  sum  -1   abc  52.43  91.75  0   20.00  52.43  91.75  0\n", 4, `log:4: time "abc" is not a number: "2097152`},
		{"garbage", hdr + row + "mpirun noticed that process rank 3 exited\n", 4, `log:4: want a result row`},
		{"short row", hdr + "  1048576  262144  float  sum  -1  20.00  52.43\n", 3, `log:3: want time, algbw and busbw`},
		{"zero time", hdr + "  1048576  262144  float  sum  -1  0.00  0  0  0  0.00  0  0  0\n", 3, `log:3: want a size >= 0 and a time from 1e-6 µs`},
		{"time below a picosecond", hdr + "  1048576  262144  float  sum  -1  1e-300  0  0  0  1e-300  0  0  0\n", 3, `log:3: want a size >= 0 and a time from 1e-6 µs`},
		{"time past the horizon", hdr + "  1048576  262144  float  sum  -1  1e308  0  0  0  1e308  0  0  0\n", 3, `log:3: want a size >= 0 and a time from 1e-6 µs`},
		{"two collectives", hdr + row + "# Collective test starting: all_gather_perf\n" + row, 4, `log:4: a second collective, allgather after allreduce (line 1): give one collective per log`},
		{"bad size", hdr + "  1e6  262144  float  sum  -1  20.00  52.43  91.75  0  20.00  52.43  91.75  0\n", 3, `log:3: size "1e6" is not a byte count`},
		{"the header's root, no root in the row", hdr + "  33554432  8388608  float  sum  1234.5  27.18  27.18  0  1234.5  27.18  27.18  0\n", 3,
			"log:3: the header's columns do not fit this row: its time and algbw are columns 5 and 6 (algbw = bytes/time), where the header puts them at 6 and 7"},
		{"mixed types", hdr + row + "     2097152   524288  half  sum  -1   30.00  52.43  91.75  0   20.00  52.43  91.75  0\n", 4, `log:4: type half after float`},
		{"long line", hdr + strings.Repeat("x", 200) + "\n", 3, `..."`},
		{"no rows", hdr + "# Avg bus bandwidth : 0\n", 0, "log: no result rows"},
		{"csv no time", "size(B),count\n8,2\n", 1, `log:1: CSV header has no time column`},
		{"csv two algorithms", "size,time,algo\n8,2,ring\n8,1,rd\n", 3, `log:3: 8 bytes by rd after ring (commsim compare's rows?): give one algorithm's rows`},
		{"csv column twice", "size(B),time(us),Size(B)\n8,2,16\n", 1, `log:1: CSV header names "size(B)" twice (fields 1 and 3): keep one`},
		{"csv fields", "size(B),time(us)\n8,20.5\n16,20.5,7\n", 3, `log:3: 3 fields, the header has 2`},
		{"csv bad time", "# comment\nsize,time\n8,fast\n", 3, `log:3: time "fast" is not a number: "8,fast"`},
		{"csv two collectives", "size,time,op\n8,20,allreduce\n16,20,AllGather\n", 3, "log:3: a second collective, allgather after allreduce"},
		{"csv two rank counts", "size,time,ranks\n8,20,4\n16,20,8\n", 3, "log:3: 8 ranks after 4: give one run per log"},
		{"a test commsim does not model", "# Collective test starting: scatter_perf\n" + row, 1, "log:1: scatter_perf is no collective commsim models"},
		{"size not whole elements", hdr + "  7  2  float  sum  -1  20.00  0.00  0.00  0  20.00  0.00  0.00  0\n", 3, "log:3: size 7 bytes is not a whole number of float elements (4 bytes each)"},
		{"csv size not whole elements", "size,time,type\n8,20,double\n12,20,double\n", 3, "log:3: size 12 bytes is not a whole number of double elements (8 bytes each)"},
		{"unknown redop", hdr + "  8  2  float  foo  -1  20.00  0.00  0.00  0  20.00  0.00  0.00  0\n", 3, `log:3: redop "foo" is none of nccl-tests' (sum, prod, max, min, avg, mulsum, premulsum, none)`},
		{"root past the ranks", "#  Rank  7 Group  0 Pid 1 on h device  7 [0x1b] H100\n" + hdr + "  8  2  float  sum  8  20.00  0.00  0.00  0  20.00  0.00  0.00  0\n", 4, "log:4: root 8 is no rank of the log's 8"},
		{"root no rank", hdr + "  8  2  float  sum  -2  20.00  0.00  0.00  0  20.00  0.00  0.00  0\n", 3, `log:3: root "-2" is no rank`},
		{"a count of another collective", hdr + row + "     2097152   65536  float  sum  -1   20.00  104.86  183.50  0   20.00  104.86  183.50  0\n", 4,
			"log:4: 32 bytes a counted element (size/count), where line 3's row has 4: a row of another collective, type or rank count"},
		{"a count that is no whole number of elements", hdr + "     1048576   999999  float  sum  -1   20.00  52.43  91.75  0   20.00  52.43  91.75  0\n", 3,
			"log:3: size 1048576 bytes is not a whole number of its count's 999999 elements"},
		{"a collective that does not reduce after one that does", hdr + row + "     2097152   524288  float  none  -1   20.00  104.86  104.86  0   20.00  104.86  104.86  0\n", 4,
			"log:4: redop none after rows of redop sum: a row of another collective"},
		{"a rooted collective after one without a root", hdr + row + "     2097152   524288  float  sum  0   20.00  104.86  104.86  0   20.00  104.86  104.86  0\n", 4,
			"log:4: root 0 after rows of root -1: a row of another collective"},
		{"a line with a comma, then a table", "Running all_reduce_perf on 8 GPUs, 1 node\n" + hdr + row, 1,
			"log:1: want a result row (size count type [redop] [root] time algbw busbw …), a # comment, a date, a banner or a blank line; a CSV's header names its size"},
		{"rows only on stderr", "[1,0]<stderr>:" + hdr + "[1,0]<stderr>:" + row, 0, "log: no result rows (want nccl-tests output, its JSON report, a CSV with size and time columns or commsim bench's JSON records); left out as a rank's stderr ([1,0]<stderr>:), where nccl-tests prints its table on stdout: 2 lines"},
		{"two runs on other ranks", "# Collective test starting: all_reduce_perf\n#  Rank  3 Group  0 Pid 1 on h device  3 [0x1b] H100\n" + row +
			"# Collective test starting: all_reduce_perf\n#  Rank  7 Group  0 Pid 1 on h device  7 [0x1b] H100\n" + row, 6,
			"log:6: a second run of allreduce on 8 ranks after one on 4: give one run per log"},
	} {
		_, err := ParseLog("log", []byte(c.text))
		var le *LogError
		if !errors.As(err, &le) || le.Line != c.line || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v (line %v), want line %d and %q", c.name, err, le, c.line, c.want)
		}
	}
}

// A row's last digits glued to the host name of NCCL's line stay the
// row's (its root -1 was read as "-"), where a host name that starts
// with a digit, after a space or a launcher's tag, is the NCCL line's.
// A size on several rows (a rerun) is averaged and counted; rows that found wrong elements are counted, the first named;
// a log collector's stamp and level are no part of a row.
func TestParseLogCountsRepeatsAndWrongRows(t *testing.T) {
	text := "2024-05-01 10:00:00,123 INFO # Collective test starting: all_reduce_perf\n" +
		"2024-05-01 10:00:00,123 INFO      1048576   262144  float  sum  -1   20.00  52.43  91.75  0   20.00  52.43  91.75  0\n" +
		"2024-05-01 10:00:00,124 INFO      1048576   262144  float  sum  -1   30.00  34.95  61.17  0   30.00  34.95  61.17  0\n" +
		"2024-05-01 10:00:00,125 INFO      2097152   524288  float  sum  -1   40.00  52.43  91.75  0   40.00  52.43  91.75  3\n" +
		"2024-05-01 10:00:00,126 INFO      4194304  1048576  float  sum  -1   80.00  52.43  91.75  N/A   80.00  52.43  91.75  N/A\n" +
		// per-iteration columns: the in-place #wrong is past them, and
		// i_cv% is no count of wrong elements
		"2024-05-01 10:00:00,127 INFO      8388608  2097152  float  sum  -1   160.00  52.43  91.75  0  159  161  161  2   160.00  52.43  91.75  0  159  161  161  3\n" +
		"2024-05-01 10:00:00,128 INFO     16777216  4194304  float  sum  -1   320.00  52.43  91.75  0   320.00  52.43  91.75  5\n"
	lg, err := ParseLog("log", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Samples) != 5 || lg.Samples[0].TimeUS != 25 || lg.Repeated != 1 || lg.WrongRows != 2 || lg.FirstWrong != 4 || lg.Redop != "sum" {
		t.Errorf("%+v: want 5 sizes, 1 MiB's two rows averaged to 25 us and counted, two rows with wrong elements from line 4 (8 MiB's i_cv%% none)", lg)
	}
}

// nccl-tests' -o all prints every size for each reduction in turn: the
// first reduction's rows are read, and the others counted and named.
func TestParseLogReadsTheFirstReduction(t *testing.T) {
	hdr := "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
	rows := ""
	for _, redop := range []string{"sum", "prod", "max", "prod"} {
		rows += "  1048576  262144  float  " + redop + "  -1  20.00  52.43  91.75  0  20.00  52.43  91.75  0\n"
		rows += "  2097152  524288  float  " + redop + "  -1  30.00  69.91  122.3  0  30.00  69.91  122.3  0\n"
	}
	lg, err := ParseLog("log", []byte(hdr+rows))
	if err != nil || len(lg.Samples) != 2 || lg.Repeated != 0 || lg.Redop != "sum" || lg.OtherRedopRows != 6 || !slices.Equal(lg.OtherRedops, []string{"prod", "max"}) {
		t.Errorf("%+v, %v: want sum's 2 rows, and 6 of prod and max left out", lg, err)
	}
}

func TestParseLogKeepsDigitsGluedToNCCLsLine(t *testing.T) {
	hdr := "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
	for _, text := range []string{
		hdr + "  8  2  float  sum  -1gpu1:9:9 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL\n  13.67  0.00  0.00  0  13.50  0.00  0.00  0\n",
		hdr + "  8  2  float  sum  -1  13.67  0.00  0.00  0  13.50  0.00  0.00  0 4090box:9:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n",
		hdr + "  8  2  float  sum  -1[1,0]<stdout>:4090box:9:9 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL\n  13.67  0.00  0.00  0  13.50  0.00  0.00  0\n",
		hdr + "  8  2  float  sum  -1[node3]4090box:9:9 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL\n  13.67  0.00  0.00  0  13.50  0.00  0.00  0\n",
	} {
		lg, err := ParseLog("glued", []byte(text))
		if err != nil || len(lg.Samples) != 1 || lg.Samples[0].Bytes != 8 || lg.Samples[0].TimeUS != 13.67 {
			t.Errorf("%q: %+v, %v; want 8 B at 13.67 us", text, lg, err)
		}
	}
}

// A log says how many GPUs each thread drove (nccl-tests' -g) and how
// many runs it timed back to back (-n): the header's nGpus and iters, or
// the JSON report's ngpus and iterations.
func TestParseLogReadsGPUsPerThreadAndIters(t *testing.T) {
	row := "  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0\n"
	for _, tc := range []struct {
		name, text  string
		gpus, iters int
	}{
		{"one thread, 8 GPUs", "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n" + row, 8, 20},
		{"-n 100, older header", "# nThread 1 nGpus 1 minBytes 4 maxBytes 2147483648 step: 2(factor) warmup iters: 50 iters: 100 validation: 0\n" + row, 1, 100},
		{"a GPU a process, tagged", "0: # nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor)\n" + row, 1, 0},
		{"no header", row, 0, 0},
		{"json", ncclTestsJSON(jsonRecord1K), 4, 20},
	} {
		lg, err := ParseLog("x", []byte(tc.text))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if lg.GPUsPerThread != tc.gpus || lg.Iters != tc.iters {
			t.Errorf("%s: %d GPUs a thread, %d runs; want %d, %d", tc.name, lg.GPUsPerThread, lg.Iters, tc.gpus, tc.iters)
		}
	}
}

// A collective whose back-to-back runs overlap (the rooted ones) is
// simulated as many runs back to back as the log timed (-n times -m;
// nccl-tests' default 20 where it does not say); the others once.
func TestTimedRunsWhereRunsOverlap(t *testing.T) {
	for _, tc := range []struct {
		iters int
		op    ops.Op
		want  int
	}{
		{100, ops.Broadcast, 100}, {100, ops.Reduce, 100}, {7, ops.Gather, 7}, {0, ops.Broadcast, 20}, {20, ops.SendRecv, 1},
		{100, ops.AllReduce, 1}, {0, ops.AllGather, 1}, {20, ops.AllToAll, 1}, {20, ops.ReduceScatter, 1},
	} {
		if got := (&Log{Iters: tc.iters}).TimedRuns(tc.op); got != tc.want {
			t.Errorf("%s, -n %d: %d runs, want %d", tc.op, tc.iters, got, tc.want)
		}
	}
}

// The runs a log timed: the header's iters times its agg iters (or the
// JSON config's iterations times aggregated_iterations); a commsim CSV
// says them in its iters column, and one written before it had the
// column timed one run a size. A CSV whose rows disagree is refused.
func TestParseLogReadsItersTimesAggIters(t *testing.T) {
	row := "  1024  256  float  none  0  10.00  0.10  0.10  N/A  10.50  0.10  0.10  N/A\n"
	csvHead := "op,algo,topology,ranks,dtype,redop,root,bytes,count,time_us,algbw_gbps,busbw_gbps,wrong,inplace_time_us,inplace_algbw_gbps,inplace_busbw_gbps,inplace_wrong,nccl_choice,refined,gpus_per_thread"
	csvRow := "broadcast,ring,ring:8,8,f32,none,0,65536,16384,11.58752,5.65574,5.65574,N/A,11.58752,5.65574,5.65574,N/A,,false,1"
	for _, tc := range []struct {
		name, text string
		iters      int
	}{
		{"-n 5 -m 4", "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 5 agg iters: 4 validation: 1 graph: 0\n" + row, 20},
		{"-n 100, no agg", "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 100 validation: 1\n" + row, 100},
		{"json -m 3", strings.Replace(ncclTestsJSON(jsonRecord1K), `"aggregated_iterations": 1`, `"aggregated_iterations": 3`, 1), 60},
		{"commsim csv before iters", csvHead + "\n" + csvRow + "\n", 1},
		{"commsim csv -n 5", csvHead + ",iters\n" + csvRow + ",5\n", 5},
		{"other csv", "size,time\n65536,11.5\n", 0},
	} {
		lg, err := ParseLog("x", []byte(tc.text))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if lg.Iters != tc.iters {
			t.Errorf("%s: %d runs, want %d", tc.name, lg.Iters, tc.iters)
		}
	}
	mixed := csvHead + ",iters\n" + csvRow + ",5\n" + strings.Replace(csvRow, "65536,16384", "131072,32768", 1) + ",20\n"
	if _, err := ParseLog("mixed.csv", []byte(mixed)); err == nil || !strings.Contains(err.Error(), "20 runs a size after 5") {
		t.Errorf("rows of 5 and 20 runs: %v", err)
	}
}

// The times a row may state run from 1 ps to the simulator's horizon,
// both ends included: a row at either bound is read, one just past it
// refused.
func TestParseLogTakesTimesAtTheBounds(t *testing.T) {
	hdr := "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
	row := func(us float64) string {
		s := strconv.FormatFloat(us, 'g', -1, 64)
		return "  8  2  float  sum  -1  " + s + "  0  0  0  " + s + "  0  0  0\n"
	}
	for _, c := range []struct {
		name string
		us   float64
		ok   bool
	}{
		{"1 ps", minTimeUS, true},
		{"the horizon", maxTimeUS, true},
		{"under 1 ps", math.Nextafter(minTimeUS, 0), false},
		{"past the horizon", math.Nextafter(maxTimeUS, math.Inf(1)), false},
	} {
		lg, err := ParseLog("x", []byte(hdr+row(c.us)))
		if c.ok && (err != nil || len(lg.Samples) != 1 || lg.Samples[0].TimeUS != c.us) {
			t.Errorf("%s (%g µs): %+v, %v; want the row read", c.name, c.us, lg, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "want a size >= 0 and a time from 1e-6 µs")) {
			t.Errorf("%s (%g µs): %v; want the row refused", c.name, c.us, err)
		}
	}
}

// A row's time stamp (nccl-tests' timestamp column, a date and a time)
// is no part of its halves: the in-place #wrong before it still counts.
func TestParseLogCountsWrongRowsBeforeAStamp(t *testing.T) {
	hdr := "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong  timestamp\n"
	for _, c := range []struct {
		name, row string
		wrong     int
	}{
		{"in place wrong", "  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  3  2025-01-02 03:04:05\n", 1},
		{"out of place wrong", "  1024  256  float  sum  -1  10.00  0.10  0.18  2  10.50  0.10  0.17  0  2025-01-02 03:04:05\n", 1},
		{"none wrong", "  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0  2025-01-02 03:04:05\n", 0},
	} {
		lg, err := ParseLog("x", []byte(hdr+c.row))
		if err != nil || lg.WrongRows != c.wrong || len(lg.Samples) != 1 || lg.Samples[0].TimeUS != 10 {
			t.Errorf("%s: %+v, %v; want %d rows with wrong elements, 1024 B at 10 µs", c.name, lg, err, c.wrong)
		}
	}
}

// A CSV header that names a column twice (time_us and cputime both
// stand for the time) is read by the first of them.
func TestParseLogCSVTakesTheFirstOfAColumn(t *testing.T) {
	for _, c := range []struct {
		name, text string
		times      []float64
	}{
		{"time_us, then cputime", "size,time_us,cputime\n8,20,99\n16,21,98\n", []float64{20, 21}},
		{"cputime, then time", "size,cputime,time\n8,20,99\n16,21,98\n", []float64{20, 21}},
		{"bytes, then size", "bytes,size,time\n8,16,20\n", []float64{20}},
	} {
		lg, err := ParseLog("x", []byte(c.text))
		if err != nil || len(lg.Samples) != len(c.times) {
			t.Errorf("%s: %+v, %v", c.name, lg, err)
			continue
		}
		for i, s := range lg.Samples {
			if s.TimeUS != c.times[i] || (c.name == "bytes, then size" && s.Bytes != 8) {
				t.Errorf("%s: row %d = %d B %g µs, want %g µs from the first column", c.name, i, s.Bytes, s.TimeUS, c.times[i])
			}
		}
	}
}

// nccl-tests prints every size too small to give each rank an element
// as 0: several rows of size 0 are no rerun, and Repeated (which
// calibrate warns of) leaves them out.
func TestParseLogCountsNoRepeatsOfSizeZero(t *testing.T) {
	hdr := "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
	zero := "  0  0  float  none  -1  0.00  0.00  0.00  0  0.00  0.00  0.00  0\n"
	row := "  1024  32  float  none  -1  10.00  0.10  0.09  0  10.50  0.10  0.09  0\n"
	for _, c := range []struct {
		name, text string
		repeated   int
	}{
		{"zeros", hdr + zero + zero + zero + row, 0},
		{"zeros and a rerun", hdr + zero + zero + row + row, 1},
	} {
		lg, err := ParseLog("x", []byte(c.text))
		if err != nil || lg.Repeated != c.repeated || len(lg.Samples) != 2 {
			t.Errorf("%s: %+v, %v; want 2 sizes, %d repeated", c.name, lg, err, c.repeated)
		}
	}
}

// A table that ends on a row narrower than the one before was cut short
// there (its in-place half lost): the row is read, and ShortLastRow says
// where; a narrow row with rows after it, or a table of narrow rows, is
// not a cut.
func TestParseLogFindsACutLastRow(t *testing.T) {
	hdr := "# Collective test starting: all_reduce_perf\n#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
	full := "     1048576   262144  float  sum  -1   20.00  52.43  91.75  0   20.00  52.43  91.75  0\n"
	half := "     2097152   524288  float  sum  -1   30.00  69.91  122.3  0\n"
	next := "     4194304  1048576  float  sum  -1   50.00  83.89  146.8  0   50.00  83.89  146.8  0\n"
	for _, c := range []struct {
		name, text string
		want       int
	}{
		{"cut", hdr + full + half + "\n", 4},
		{"narrow, then more", hdr + full + half + next, 0},
		{"all narrow", hdr + half, 0},
		{"whole", hdr + full + next, 0},
	} {
		lg, err := ParseLog("log", []byte(c.text))
		if err != nil || lg.ShortLastRow != c.want {
			t.Errorf("%s: ShortLastRow %d, %v; want %d", c.name, lg.ShortLastRow, err, c.want)
		}
	}
}
