package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/ops"
)

// compareTable splits compare's output, the box table or the default text
// layout, into its header and data rows. The text layout's header names
// each algorithm once above its busbw and time columns: the header comes
// back with the table's names ("ring busbw(GB/s)").
func compareTable(t *testing.T, out string) (header []string, rows [][]string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	if strings.Contains(out, "│") {
		for _, line := range lines {
			if !strings.HasPrefix(line, "│") {
				continue
			}
			var cells []string
			for _, c := range strings.Split(strings.Trim(line, "│"), "│") {
				cells = append(cells, strings.TrimSpace(c))
			}
			if header == nil {
				header = cells
				continue
			}
			rows = append(rows, cells)
		}
	} else {
		for i, line := range lines {
			f := strings.Fields(strings.TrimPrefix(line, "#"))
			switch {
			case strings.HasPrefix(line, "#") && len(f) > 2 && f[0] == "size" && f[len(f)-1] == "best" && i > 0:
				header = []string{"size(B)", "count"}
				for _, a := range strings.Fields(strings.TrimPrefix(lines[i-1], "#")) {
					header = append(header, a+" busbw(GB/s)", a+" time(us)")
				}
				header = append(header, "best")
				if len(header) != len(f) {
					t.Fatalf("algorithm line %q does not head the columns %q", lines[i-1], line)
				}
			case line != "" && !strings.HasPrefix(line, "#"):
				rows = append(rows, strings.Fields(line))
			}
		}
	}
	if header == nil || len(rows) == 0 {
		t.Fatalf("no table in output:\n%s", out)
	}
	return header, rows
}

// checkBestAndCrossovers recomputes the best column and the crossover lines
// from the table's times and compares them with what compare printed.
func checkBestAndCrossovers(t *testing.T, out string, algos []string) []string {
	t.Helper()
	header, rows := compareTable(t, out)
	col := func(name string) int {
		for i, h := range header {
			if h == name {
				return i
			}
		}
		t.Fatalf("header %q lacks %q", header, name)
		return -1
	}
	for _, a := range algos {
		col(a + " busbw(GB/s)")
	}
	best := col("best")
	var want []string
	prev, prevSize := "", ""
	for _, r := range rows {
		fastest, fastestT := "", 0.0
		for _, a := range algos {
			v, err := strconv.ParseFloat(r[col(a+" time(us)")], 64)
			if err != nil {
				t.Fatalf("row %q: %v", r, err)
			}
			if fastest == "" || v < fastestT {
				fastest, fastestT = a, v
			}
		}
		// Times are printed to 0.01us: only insist where the winner is clear.
		if r[best] != fastest {
			v, _ := strconv.ParseFloat(r[col(r[best]+" time(us)")], 64)
			if v != fastestT {
				t.Errorf("size %s: best is %s, but %s is faster (%v us)", r[0], r[best], fastest, fastestT)
			}
		}
		n, _ := strconv.ParseInt(r[col("size(B)")], 10, 64)
		if prev != "" && r[best] != prev {
			p, _ := strconv.ParseInt(prevSize, 10, 64)
			want = append(want, fmt.Sprintf("# crossover: %s overtakes %s between %s and %s", r[best], prev, formatBytes(p), formatBytes(n)))
		}
		prev, prevSize = r[best], r[0]
	}
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "# crossover:") {
			got = append(got, line)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("crossover lines\n%s\nwant (from the table)\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return got
}

func TestCompareTableShowsEveryAlgorithmBestAndCrossovers(t *testing.T) {
	algos := []string{"ring", "rd", "rhd"}
	status, out, errOut := commsim("compare", "--topo", "switch:8", "--op", "allreduce", "--algos", "ring,rd,rhd",
		"-b", "8", "-e", "4MiB", "--timing-only", "--format", "table")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	header, rows := compareTable(t, out)
	if header[0] != "size(B)" || header[1] != "count" || header[len(header)-1] != "best" {
		t.Errorf("header %q: want size(B), count, …, best", header)
	}
	if len(rows) != 20 { // 8B .. 4MiB by 2
		t.Errorf("%d rows, want 20", len(rows))
	}
	if got := checkBestAndCrossovers(t, out, algos); len(got) == 0 {
		t.Errorf("no crossover line; on switch:8 rd wins small sizes and rhd large ones:\n%s", out)
	}
}

func TestCompareRingOvertakesRecursiveDoubling(t *testing.T) {
	// Recursive doubling moves the whole vector log2(8) = 3 times, the ring
	// 2·7/8 of it: at large sizes the ring must win, at small sizes rd's
	// 3 latency steps beat the ring's 14.
	status, out, errOut := commsim("compare", "--topo", "switch:8", "--algos", "ring,rd", "-b", "8", "-e", "64MiB", "--timing-only")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	got := checkBestAndCrossovers(t, out, []string{"ring", "rd"})
	if len(got) != 1 || !strings.HasPrefix(got[0], "# crossover: ring overtakes rd between ") {
		t.Errorf("crossovers %q: want one, ring overtaking rd\n%s", got, out)
	}
}

func TestCompareDefaultsToEveryAlgorithmOfTheOp(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "ring:4", "--op", "allgather", "-b", "1KiB", "-e", "4KiB")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var algos []string // commsim's own: NCCL's shapes run through --algos nccl
	for _, a := range ops.AlgorithmsFor(ops.AllGather) {
		if !ops.IsNCCL(a) {
			algos = append(algos, a)
		}
	}
	if len(algos) < 2 {
		t.Fatalf("allgather has %d algorithms", len(algos))
	}
	checkBestAndCrossovers(t, out, algos)
	if !strings.Contains(out, "crossover") {
		t.Errorf("no crossover summary line:\n%s", out)
	}
}

func TestCompareJSONAndCSV(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "switch:8", "--algos", "ring,rd", "-b", "1KiB", "-e", "8MiB",
		"--timing-only", "--format", "json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	type rec struct {
		Op, Algo, Topology, Dtype, Redop string
		Ranks, Count                     int
		Bytes                            int64
		TimeUS                           float64  `json:"time_us"`
		BusBW                            *float64 `json:"busbw_gbps"`
		AlgBW                            *float64 `json:"algbw_gbps"`
		Wrong                            *int
		Best                             *bool
	}
	bySize := map[int64][]rec{}
	var sizes []int64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var r rec
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.Op != "allreduce" || r.Topology != "switch:8" || r.Ranks != 8 || r.Dtype != "f32" || r.Redop != "sum" ||
			r.BusBW == nil || r.AlgBW == nil || r.Best == nil || r.Wrong != nil || r.Count*4 != int(r.Bytes) {
			t.Errorf("bad record %s", sc.Text())
		}
		if bySize[r.Bytes] == nil {
			sizes = append(sizes, r.Bytes)
		}
		bySize[r.Bytes] = append(bySize[r.Bytes], r)
	}
	if len(sizes) != 14 {
		t.Fatalf("%d sizes, want 14 (1KiB..8MiB)", len(sizes))
	}
	for _, n := range sizes {
		rs := bySize[n]
		if len(rs) != 2 || rs[0].Algo != "ring" || rs[1].Algo != "rd" {
			t.Fatalf("size %d: records %+v, want ring then rd", n, rs)
		}
		fast := 0
		if rs[1].TimeUS < rs[0].TimeUS {
			fast = 1
		}
		if !*rs[fast].Best || *rs[1-fast].Best {
			t.Errorf("size %d: best flags %v/%v, want %s best", n, *rs[0].Best, *rs[1].Best, rs[fast].Algo)
		}
	}
	if !strings.Contains(errOut, "# crossover: ring overtakes rd") || strings.Contains(out, "#") {
		t.Errorf("crossovers belong on stderr for json; stderr %q", errOut)
	}

	status, out, errOut = commsim("compare", "--topo", "switch:8", "--algos", "ring,rd", "-b", "1KiB", "-e", "8MiB", "--timing-only", "--format", "csv")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if status != 0 || len(lines) != 1+28 || !strings.HasSuffix(lines[0], ",best,refined,gpus_per_thread,iters") || !strings.Contains(errOut, "crossover") {
		t.Errorf("csv: status %d, %d lines, stderr %q:\n%s", status, len(lines), errOut, out)
	}
}

func TestCompareCheckVerifiesEveryAlgorithm(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "ring:5", "--op", "reduce", "--root", "2", "--redop", "max",
		"-b", "40", "-e", "40KiB", "-f", "4", "--check")
	if status != 0 || !strings.Contains(out, "# Out of bounds values : 0 OK") {
		t.Fatalf("status %d, stderr %q:\n%s", status, errOut, out)
	}
	status, out, errOut = commsim("compare", "--topo", "ring:5", "--op", "broadcast", "--root", "4",
		"-b", "40", "-e", "40KiB", "-f", "4", "--check", "--format", "json")
	own := 0
	for _, a := range ops.AlgorithmsFor(ops.Broadcast) {
		if !ops.IsNCCL(a) {
			own++
		}
	}
	if status != 0 || strings.Count(out, `"wrong":0,`) != 6*own { // 40B..40KiB by 4
		t.Fatalf("json --check: status %d, stderr %q:\n%s", status, errOut, out)
	}
}

func TestComparePlotWritesPNGAndSVG(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"busbw.png", "busbw.svg"} {
		path := filepath.Join(dir, name)
		status, _, errOut := commsim("compare", "--topo", "switch:8", "--algos", "ring,rd,rhd", "-b", "8", "-e", "4MiB",
			"--timing-only", "--plot", path)
		if status != 0 {
			t.Fatalf("%s: status %d: %s", name, status, errOut)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch filepath.Ext(name) {
		case ".png":
			if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) || len(data) < 1000 {
				t.Errorf("%s: not a PNG (%d bytes)", name, len(data))
			}
		case ".svg":
			s := string(data)
			for _, want := range []string{"<svg", "ring", "rhd", "1MiB", "switch:8"} {
				if !strings.Contains(s, want) {
					t.Errorf("%s lacks %q", name, want)
				}
			}
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp")); len(left) > 0 {
			t.Errorf("temporary files left behind: %q", left)
		}
	}
}

func TestCompareUsageErrorsExit2WithOneLine(t *testing.T) {
	gif := filepath.Join(t.TempDir(), "out.gif")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--algos", "ring,nosuch"}, `"nosuch"`},
		{[]string{"--algos", "pairwise"}, "pairwise"},
		{[]string{"--algos", "ring,ring"}, "twice"},
		{[]string{"--algo", "ring"}, "--algo"},
		{[]string{"--plot", gif}, "out.gif"},
		{[]string{"--factor", "0.5"}, "--factor"},
		{[]string{"--check", "--timing-only"}, "--check"},
		{[]string{"--algos", "ring,nccl-nvls"}, "needs GPUs on a switch that reduces (NVLS)"},
		{[]string{"--algos", "ring,nccl-collnet-direct"}, "(SHARP)"},
		{[]string{"--algos", "ring,nccl", "--nccl-algo", "nvls", "--nccl-proto", "LL"}, "NVLS runs Simple only"},
	}
	for _, c := range cases {
		args := append([]string{"compare", "--topo", "switch:8", "-e", "1KiB"}, c.args...)
		status, out, errOut := commsim(args...)
		if status != 2 {
			t.Errorf("%q: status %d, want 2 (stderr %q)", c.args, status, errOut)
		}
		if strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: stderr %q: want one line naming %s", c.args, errOut, c.want)
		}
		if out != "" || strings.Contains(errOut, "goroutine") {
			t.Errorf("%q: stdout %q, stderr %q", c.args, out, errOut)
		}
	}
	if _, err := os.Stat(gif); err == nil {
		t.Errorf("--plot out.gif wrote a file")
	}
}

// A plot into a folder that does not exist is refused before the sweep
// runs, as a usage error naming the file.
func TestComparePlotToMissingDirectoryIsRefusedFirst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "x.png")
	status, out, errOut := commsim("compare", "--topo", "switch:4", "--algos", "ring,rd", "-e", "1KiB", "--timing-only", "--plot", path)
	if status != 2 || out != "" || !strings.Contains(errOut, "--plot "+path+": there is no folder") {
		t.Errorf("status %d, stdout %q, stderr %q: want 2 naming the file, before any output", status, out, errOut)
	}
}

// TestCompareDataKeepsOneSetOfBuffers: compare with data runs every
// algorithm on the same buffers. Each algorithm once got a copy of the
// sweep's runner with buffers of its own, never freed: three algorithms
// of 384 MiB on two ranks then asked for 4.4 GB of the simulator's 4 GiB,
// where one set of buffers and scratch needs 2.3 GB.
func TestCompareDataKeepsOneSetOfBuffers(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 2.3 GB of simulated data")
	}
	status, out, errOut := commsim("compare", "--topo", "switch:2", "--algos", "ring,rd,rhd", "-b", "384MiB", "-e", "384MiB", "--data")
	if status != 0 || !strings.Contains(out, "backend sim (data)") {
		t.Fatalf("status %d, stderr %q:\n%s", status, errOut, out)
	}
}

// TestCompareKeepsTheRowsItHas: a comparison that fails at a size prints
// the sizes measured before it, in every format, then exits 1. On a
// 1e-5 B/s switch an 8-byte all-reduce takes weeks and a 64-byte one
// passes the simulator's horizon.
func TestCompareKeepsTheRowsItHas(t *testing.T) {
	for _, format := range []string{"text", "table", "csv", "json"} {
		status, out, errOut := commsim("compare", "--topo", "switch:4,bw=1e-5B/s", "--algos", "ring,rd", "-b", "8", "-e", "64", "-f", "8", "--format", format)
		if status != 1 || !strings.Contains(errOut, "ring at 64B") || !strings.Contains(errOut, "horizon") ||
			!strings.Contains(out, "1600000000004") || strings.Contains(out, "crossover") {
			t.Errorf("%s: status %d, stderr %q:\n%s", format, status, errOut, out)
		}
	}
	// bench too.
	status, out, errOut := commsim("bench", "--topo", "switch:4,bw=1e-5B/s", "--algo", "ring", "-b", "8", "-e", "64", "-f", "8")
	if status != 1 || !strings.Contains(out, "\n           8             2     float") || strings.Contains(out, "Avg bus bandwidth") || !strings.Contains(errOut, "64B: ") {
		t.Errorf("bench: status %d, stderr %q:\n%s", status, errOut, out)
	}
}

// A sweep of size 0 alone, whose plans have no step, is compared as any
// other (the duration check once indexed past its figures and panicked;
// found by a mutation review).
func TestCompareSizeZeroAlone(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "ring:4", "--algos", "rd,rhd", "-b", "0", "-e", "0")
	if status != 0 || !strings.Contains(out, "           0             0     0.00     0.00     0.00     0.00") {
		t.Errorf("status %d, stderr %q:\n%s", status, errOut, out)
	}
}

// TestCompareVsRunsOneAlgorithmOnEachFabric: with --vs the columns are
// fabrics. A pairwise all-to-all on switch:8 and ring:8 takes, on each,
// what bench times there; the switch is fastest at every size; JSON and
// CSV carry each record's fabric and the algorithm; the plot names the
// fabrics.
func TestCompareVsRunsOneAlgorithmOnEachFabric(t *testing.T) {
	sweep := []string{"--op", "alltoall", "-b", "64KiB", "-e", "4MiB", "-f", "8", "--timing-only"}
	status, out, errOut := commsim(append([]string{"compare", "--topo", "switch:8", "--vs", "ring:8", "--algos", "pairwise"}, sweep...)...)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	if !strings.Contains(out, "# commsim compare: alltoall (8 ranks), f32, backend sim (timing-only), algorithm pairwise, on fabrics switch:8, ring:8") ||
		!strings.Contains(out, "best is the fastest fabric at each size") || !strings.Contains(out, "# no crossover: switch:8 is fastest at every size") {
		t.Errorf("header or verdict:\n%s", out)
	}
	var got [][2]string // per size, the two times
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 7 && !strings.HasPrefix(line, "#") {
			got = append(got, [2]string{f[3], f[5]})
			if f[6] != "switch:8" {
				t.Errorf("best %s in %q, want switch:8", f[6], line)
			}
		}
	}
	for i, topo := range []string{"switch:8", "ring:8"} {
		_, bench, _ := commsim(append([]string{"bench", "--topo", topo, "--algo", "pairwise"}, sweep...)...)
		var want []string
		for _, line := range strings.Split(bench, "\n") {
			if f := strings.Fields(line); len(f) > 6 && !strings.HasPrefix(line, "#") {
				want = append(want, f[5])
			}
		}
		if len(got) != 3 || len(want) != 3 {
			t.Fatalf("%d compared sizes and %d benched on %s, want 3:\n%s", len(got), len(want), topo, out)
		}
		for k := range want {
			if got[k][i] != want[k] {
				t.Errorf("%s, size %d: compare %s us, bench %s us", topo, k, got[k][i], want[k])
			}
		}
	}
	_, js, _ := commsim(append([]string{"compare", "--topo", "switch:8", "--vs", "ring:8", "--algos", "pairwise", "--format", "json"}, sweep...)...)
	var topos []string
	for _, line := range strings.Split(strings.TrimSpace(js), "\n") {
		var r struct{ Algo, Topology string }
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Algo != "pairwise" {
			t.Fatalf("record %q: %v", line, err)
		}
		topos = append(topos, r.Topology)
	}
	if want := []string{"switch:8", "ring:8", "switch:8", "ring:8", "switch:8", "ring:8"}; !slices.Equal(topos, want) {
		t.Errorf("JSON records' fabrics %v, want %v", topos, want)
	}
	svg := filepath.Join(t.TempDir(), "vs.svg")
	if status, _, errOut := commsim(append([]string{"compare", "--topo", "switch:8", "--vs", "ring:8", "--algos", "pairwise", "--plot", svg}, sweep...)...); status != 0 {
		t.Fatal(errOut)
	}
	if b, err := os.ReadFile(svg); err != nil || !bytes.Contains(b, []byte("ring:8")) || !bytes.Contains(b, []byte("switch:8")) {
		t.Errorf("the plot does not name both fabrics (%v)", err)
	}
}

// TestCompareVsOfAnOversubscribedTreeShowsOneRoutePerPair: a second
// spine, which the simulator's single route per pair leaves idle, makes
// no difference to auto's all-reduce: the two fabrics time alike, and
// the 1:1 tree beats both.
func TestCompareVsOfAnOversubscribedTreeShowsOneRoutePerPair(t *testing.T) {
	full, two, one := twoLeafTree(t, 8, 1, "400GB/s"), twoLeafTree(t, 8, 2, "100GB/s"), twoLeafTree(t, 8, 1, "100GB/s")
	status, out, errOut := commsim("compare", "--topo", full, "--vs", two, "--vs", one, "--op", "alltoall", "--algos", "pairwise", "-b", "16MiB", "-e", "16MiB", "--format", "json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var times []float64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r struct {
			TimeUS float64 `json:"time_us"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		times = append(times, r.TimeUS)
	}
	if len(times) != 3 || times[1] != times[2] || !(times[0] < times[1]) {
		t.Errorf("times %v: want the 1:1 tree fastest and the two spines of 100GB/s timed as one", times)
	}
}

// TestCompareVsBadInputExits2WithOneLine: --vs compares fabrics of the
// same ranks, each once, under one algorithm, on the simulator.
func TestCompareVsBadInputExits2WithOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--vs", "ring:4"}, "--vs ring:4: 4 ranks of allreduce where switch:8 has 8 ranks"},
		{[]string{"--vs", "ring:8", "--algos", "ring,rhd"}, "under one algorithm"},
		{[]string{"--vs", "switch:8"}, "--vs switch:8: that fabric is compared already"},
		{[]string{"--vs", "ring:8", "--algos", "nosuch"}, `unknown algorithm "nosuch"`},
		{[]string{"--vs", "ring:8", "--algos", "pairwise"}, "algorithm pairwise has no allreduce"},
		{[]string{"--vs", "ring:8", "--backend", "cuda"}, "on the simulator, not on --backend cuda"},
		{[]string{"--vs", "ring:8", "--nccl-proto", "LL"}, "go with --algos nccl"},
		{[]string{"--vs", "nosuch:8"}, "nosuch"},
		{[]string{"--vs", "ring:8", "-b", "128MiB", "-e", "128MiB", "--check"}, "--vs: 2 fabrics with data (--check, --data) hold about 6GiB"},
	} {
		status, out, errOut := commsim(append([]string{"compare", "--topo", "switch:8", "-e", "1KiB"}, c.args...)...)
		if status != 2 || out != "" || strings.Count(strings.TrimRight(errOut, "\n"), "\n") != 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: status %d, stdout %q, stderr %q; want 2 and one line naming %q", c.args, status, out, errOut, c.want)
		}
	}
	if status, _, errOut := commsim("compare", "--vs", "ring:8", "-e", "1KiB"); status != 2 || !strings.Contains(errOut, "give --topo too") {
		t.Errorf("--vs without --topo: status %d, stderr %q", status, errOut)
	}
}
