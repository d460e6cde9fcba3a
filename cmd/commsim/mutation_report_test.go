package main

// Tests written from a mutation-testing review of report.go, files.go,
// launchenv.go, calibrate_nccl.go and fidelity_shipped.go: each pins down
// behaviour a user relies on that no other test held.

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/fidelity"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/hw/cuda"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
)

// mirroredLine matches the note on runs timed on a mirror: how many of
// how many runs.
var mirroredLine = regexp.MustCompile(`(?m)^# (\d+) of (\d+) runs were timed by simulating only the ranks`)

// The note on mirrored runs counts every run, out of place and in place:
// twice the sizes, in the text layout and in the box table alike.
func TestMirroredNoteCountsBothRunsOfEverySize(t *testing.T) {
	for _, format := range []string{"text", "table"} {
		status, out, errOut := commsim("bench", "--topo", "switch:8", "--algo", "ring", "-b", "1K", "-e", "8K", "--format", format)
		if status != 0 {
			t.Fatalf("%s: status %d: %s", format, status, errOut)
		}
		m := mirroredLine.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s: no note on mirrored runs:\n%s", format, out)
		}
		if m[1] != "8" || m[2] != "8" { // 4 sizes, 2 runs each, all mirrored on a switch
			t.Errorf("%s: %s of %s runs mirrored, want 8 of 8:\n%s", format, m[1], m[2], out)
		}
	}
}

// nccl-tests' average bus bandwidth is the mean over every run, out of
// place and in place, to 3 decimals, as the footer of a sweep prints it.
func TestAvgBusBandwidthIsRoundedToThreeDecimals(t *testing.T) {
	if got := avgBusBW([]row{{outOfPlace: result{busbw: 1}, inPlace: result{busbw: 1.2345}}}); got != 1.117 {
		t.Errorf("avgBusBW = %v, want 1.117", got)
	}
	status, out, errOut := commsim("bench", "--topo", "ring:4", "--algo", "ring", "-b", "1K", "-e", "64K", "-f", "4")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	recs, _ := benchRecords(t, "--topo", "ring:4", "--algo", "ring", "-b", "1K", "-e", "64K", "-f", "4")
	sum := 0.0
	for _, r := range recs {
		sum += r.BusBW + r.InBusBW
	}
	want := "# Avg bus bandwidth    : " + strconv.FormatFloat(math.Round(sum/float64(2*len(recs))*1000)/1000, 'g', -1, 64) + " \n"
	if !strings.Contains(out, want) {
		t.Errorf("footer lacks %q:\n%s", want, out)
	}
}

// A JSON record's in-place fields are the in-place run's.
func TestJSONInPlaceFieldsAreTheInPlaceRun(t *testing.T) {
	r := row{outOfPlace: result{timeUS: 10, algbw: 1, busbw: 2, wrong: 0}, inPlace: result{timeUS: 12, algbw: 3, busbw: 4, wrong: 5}}
	j := jsonOf(r)
	if j.TimeUS != 10 || j.AlgBW != 1 || j.BusBW != 2 || j.InTimeUS != 12 || j.InAlgBW != 3 || j.InBusBW != 4 || j.InWrong == nil || *j.InWrong != 5 {
		t.Errorf("jsonOf = %+v", j)
	}
}

// tidy keeps 15 significant digits where 6 decimals are more than a
// float64 holds.
func TestTidyKeepsFifteenSignificantDigits(t *testing.T) {
	for v, want := range map[float64]string{1234567890.1234567: "1234567890.12346", 12.3456789: "12.345679", 0: "0"} {
		if got := exact(v); got != want {
			t.Errorf("exact(%v) = %s, want %s", v, got, want)
		}
	}
}

// Traced runs are each simulated, in place too: the header says the
// times are out of place then in place, not that the in-place run takes
// the out-of-place time.
func TestTracedBenchSaysInPlaceRunsAreTimed(t *testing.T) {
	path := t.TempDir() + "/trace.json"
	status, out, errOut := commsim("bench", "--topo", "ring:4", "-b", "1K", "-e", "1K", "--trace", path)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	if !strings.Contains(out, "; out-of-place then in-place\n") || strings.Contains(out, "an in-place run takes the out-of-place time") {
		t.Errorf("traced sweep's header:\n%s", out)
	}
	_, out, _ = commsim("bench", "--topo", "ring:4", "-b", "1K", "-e", "1K")
	if !strings.Contains(out, "an in-place run takes the out-of-place time\n") {
		t.Errorf("untraced timing-only sweep's header:\n%s", out)
	}
}

// Where NCCL would run what commsim cannot simulate, the algo column
// names what ran and then NCCL's choice.
func TestAlgoColumnNamesNCCLsChoiceAfterWhatRan(t *testing.T) {
	r := row{algo: "ring/Simple/4ch", ncclChoice: "collnetchain/Simple/2ch"}
	if got, want := algoCell(r), "ring/Simple/4ch (NCCL: collnetchain/Simple/2ch)"; got != want {
		t.Errorf("algoCell = %q, want %q", got, want)
	}
	if got := algoCell(row{algo: "ring/LL/2ch"}); got != "ring/LL/2ch" {
		t.Errorf("algoCell without NCCL's choice = %q", got)
	}
}

// The box table's and the CSV's algbw and busbw columns hold algbw and
// busbw: an all-reduce on 4 ranks moves busbw = algbw × 2(p−1)/p.
func TestTableAndCSVBandwidthColumnsHoldTheirOwnValues(t *testing.T) {
	recs, _ := benchRecords(t, "--topo", "switch:4", "--algo", "ring", "-b", "64K", "-e", "64K")
	if len(recs) != 1 || !(recs[0].BusBW > recs[0].AlgBW) {
		t.Fatalf("records %+v", recs)
	}
	status, out, errOut := commsim("bench", "--topo", "switch:4", "--algo", "ring", "-b", "64K", "-e", "64K", "--format", "table")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	var cellsOf []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, " 65536 ") {
			for _, c := range strings.Split(line, "│") {
				cellsOf = append(cellsOf, strings.TrimSpace(c))
			}
		}
	}
	// │ size │ count │ type │ redop │ root │ time │ algbw │ busbw │ ...
	if len(cellsOf) < 9 || cellsOf[7] != f2(recs[0].AlgBW) || cellsOf[8] != f2(recs[0].BusBW) {
		t.Errorf("table row %q, want algbw %s and busbw %s", cellsOf, f2(recs[0].AlgBW), f2(recs[0].BusBW))
	}
	status, out, errOut = commsim("bench", "--topo", "switch:4", "--algo", "ring", "-b", "64K", "-e", "64K", "--format", "csv")
	csvRows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if status != 0 || err != nil || len(csvRows) != 2 {
		t.Fatalf("csv: status %d, %v, stderr %s:\n%s", status, err, errOut, out)
	}
	for i, name := range csvRows[0] {
		want := map[string]float64{"algbw_gbps": recs[0].AlgBW, "busbw_gbps": recs[0].BusBW, "inplace_algbw_gbps": recs[0].InAlgBW, "inplace_busbw_gbps": recs[0].InBusBW}
		if w, ok := want[name]; ok {
			if got, _ := strconv.ParseFloat(csvRows[1][i], 64); got != w {
				t.Errorf("csv %s = %s, want %v", name, csvRows[1][i], w)
			}
		}
	}
}

// The text report ends as nccl-tests' does, with a lone "#" line after
// the average bus bandwidth.
func TestTextReportEndsWithAHashLine(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "ring:4", "-b", "1K", "-e", "2K")
	if status != 0 || !regexp.MustCompile(`# Avg bus bandwidth    : [0-9.]+ \n#\n$`).MatchString(out) {
		t.Errorf("status %d, stderr %q; the report does not end with the average and a # line:\n%s", status, errOut, out)
	}
}

// Every time and bandwidth bench's JSON Lines carry is rounded as tidy
// rounds it: a picosecond, a kB/s, no binary noise.
func TestBenchJSONTimesAndBandwidthsAreTidy(t *testing.T) {
	noisy := result{timeUS: 10.612798000000002, algbw: 3758096384013.9995, busbw: 0.1 + 0.2}
	j := jsonOf(row{outOfPlace: noisy, inPlace: noisy})
	if j.TimeUS != 10.612798 || j.AlgBW != 3758096384014 || j.BusBW != 0.3 || j.InTimeUS != 10.612798 || j.InBusBW != 0.3 {
		t.Errorf("jsonOf of noisy figures = %+v", j)
	}
	recs, _ := benchRecords(t, "--topo", "ring:8,bw=33GB/s,lat=0.7us", "--algo", "ring", "-b", "8", "-e", "1GiB", "-f", "7")
	if len(recs) < 10 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		for name, v := range map[string]float64{"time_us": r.TimeUS, "algbw_gbps": r.AlgBW, "busbw_gbps": r.BusBW,
			"inplace_time_us": r.InTimeUS, "inplace_algbw_gbps": r.InAlgBW, "inplace_busbw_gbps": r.InBusBW} {
			if v != tidy(v) {
				t.Errorf("%d B: %s = %v, not rounded (%v)", r.Bytes, name, v, tidy(v))
			}
		}
	}
}

// A file written anew is readable by all (0644, whatever the umask); one
// replaced keeps the permissions it had.
func TestWrittenFilesHaveTheirPermissions(t *testing.T) {
	dir := t.TempDir()
	write := func(w io.Writer) error { _, err := io.WriteString(w, "new\n"); return err }
	fresh := filepath.Join(dir, "fresh.yaml")
	if err := writeFileAtomic(fresh, write); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(dir, "kept.yaml")
	if err := os.WriteFile(kept, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(kept, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(kept, write); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{fresh: 0o644, kept: 0o640} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if data, _ := os.ReadFile(path); fi.Mode().Perm() != want || string(data) != "new\n" {
			t.Errorf("%s: mode %v, %q; want %v and the new text", filepath.Base(path), fi.Mode().Perm(), data, want)
		}
	}
}

// A path under /proc or /dev that names an open descriptor (as
// /dev/stdout does) is written through it, in place: the file the
// descriptor holds gets the text, not a new file renamed over its name.
func TestDescriptorPathsAreWrittenInPlace(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd here")
	}
	for _, dir := range []string{"/proc/self/fd", "/dev/fd"} {
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		f, err := os.CreateTemp(t.TempDir(), "held-*.txt")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, strconv.Itoa(int(f.Fd())))
		if err := writeFileAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, "through the descriptor\n"); return err }); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		data, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
		if err != nil || string(data) != "through the descriptor\n" {
			t.Errorf("%s: the descriptor's file holds %q (%v), want the text written", path, data, err)
		}
		f.Close()
	}
}

// Launchers' variables as people's environments hold them: set but empty
// is unset, values padded with blanks are taken, an IPv6 address is
// bracketed before its port; a port of 0 or past 65535 is refused, as is
// a MASTER_PORT set empty beside a MASTER_ADDR.
func TestLauncherVariablesAsEnvironmentsHoldThem(t *testing.T) {
	clearRendezvousEnv(t)
	var got cuda.Rendezvous
	stop := errors.New("stopped after the join")
	stubJoin(t, 2, func(_ context.Context, rdv cuda.Rendezvous, gpu int) (*hw.World, hw.NativeComm, func() error, error) {
		got = rdv
		return nil, nil, nil, stop
	})
	for _, tc := range []struct {
		name string
		env  map[string]string
		want cuda.Rendezvous
	}{
		{"empty WORLD_SIZE is unset", map[string]string{"WORLD_SIZE": "", "RANK": "", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1", cuda.EnvAddr: "h:1"},
			cuda.Rendezvous{Addr: "h:1", Rank: 1, Size: 2}},
		{"padded values", map[string]string{"WORLD_SIZE": " 4 ", "RANK": "3\n", "MASTER_ADDR": " node0 ", "MASTER_PORT": " 29500"},
			cuda.Rendezvous{Addr: "node0:29500", Rank: 3, Size: 4}},
		{"IPv6 master", map[string]string{"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "fd00::1", "MASTER_PORT": "29500"},
			cuda.Rendezvous{Addr: "[fd00::1]:29500", Rank: 1, Size: 2}},
		{"empty MASTER_ADDR and MASTER_PORT are unset", map[string]string{"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "", "MASTER_PORT": "", cuda.EnvAddr: "h:2"},
			cuda.Rendezvous{Addr: "h:2", Rank: 1, Size: 2}},
		{"empty MASTER_ADDR alone is unset", map[string]string{"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": " ", cuda.EnvAddr: "h:3"},
			cuda.Rendezvous{Addr: "h:3", Rank: 1, Size: 2}},
	} {
		got = cuda.Rendezvous{}
		status, out, errOut := commsimEnv(tc.env, nativeBench...)
		if status != 1 || out != "" || !strings.Contains(errOut, "stopped after the join") || got != tc.want {
			t.Errorf("%s: status %d, stderr %q, joined %+v; want %+v", tc.name, status, errOut, got, tc.want)
		}
	}
	for _, tc := range []struct {
		env  map[string]string
		text string
	}{
		{map[string]string{"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": "0"}, `MASTER_PORT="0" is not a port number (1 to 65535)`},
		{map[string]string{"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": "65536"}, `MASTER_PORT="65536" is not a port number (1 to 65535)`},
		{map[string]string{"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "node0", "MASTER_PORT": " "}, "MASTER_ADDR=node0 is set but MASTER_PORT is not"},
		{map[string]string{"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "", "MASTER_PORT": "29500"}, "MASTER_PORT=29500 is set but MASTER_ADDR is not"},
	} {
		status, out, errOut := commsimEnv(tc.env, nativeBench...)
		if status != 2 || out != "" || !oneLine(errOut) || !strings.Contains(errOut, tc.text) {
			t.Errorf("%v: status %d, stderr %q; want 2 and %q", tc.env, status, errOut, tc.text)
		}
	}
}

// shippedSuite is fidelity --shipped --format json, as far as the tests
// below read it.
type shippedSuite struct {
	Machine string `json:"nccl_machine"`
	Logs    []struct {
		File     string `json:"file"`
		Group    string `json:"group"`
		Op       string `json:"op"`
		Topology string `json:"topology"`
		Ranks    int    `json:"ranks"`
		shippedFigures
	} `json:"logs"`
	Pooled []struct {
		Group string `json:"group"`
		Logs  int    `json:"logs"`
		shippedFigures
		Simulated *fidModel `json:"simulated_where_priced"`
	} `json:"pooled"`
}

type shippedFigures struct {
	Sizes  int       `json:"sizes"`
	Median float64   `json:"median_abs_error"`
	Max    float64   `json:"max_abs_error"`
	Bands  []fidBand `json:"bands"`
	Over   int       `json:"sizes_over_bound"`
	Model  *fidModel `json:"nccl_model"`
}

func shippedJSON(t *testing.T, args ...string) shippedSuite {
	t.Helper()
	status, out, errOut := commsim(append([]string{"fidelity", "--shipped", "--format", "json"}, args...)...)
	var suite shippedSuite
	if err := json.Unmarshal([]byte(out), &suite); status != 0 || err != nil {
		t.Fatalf("%q: status %d, %v: %s", args, status, err, errOut)
	}
	return suite
}

// fidelity --shipped counts, for each log and pooled, the sizes off by
// more than 30% either way, as fidelity --log's sizes show them; NCCL's
// own model's errors are over the sizes it prices alone (none of a
// send/receive), and so is the simulation's set beside them.
func TestShippedCountsMissesAndPricedSizesAsEachLogDoes(t *testing.T) {
	suite := shippedJSON(t, "--only", "-8xB200")
	if len(suite.Logs) != 5 || len(suite.Pooled) != 2 {
		t.Fatalf("%d logs, %d pools", len(suite.Logs), len(suite.Pooled))
	}
	over, priced := 0, 0
	for _, l := range suite.Logs {
		status, out, errOut := commsim("fidelity", "--log", filepath.Join(shippedLogs, l.File), "--format", "json")
		var single struct {
			Sizes []struct {
				RelError float64  `json:"rel_error"`
				Model    *float64 `json:"nccl_model_us"`
			} `json:"sizes"`
		}
		if err := json.Unmarshal([]byte(out), &single); status != 0 || err != nil {
			t.Fatalf("%s: status %d, %v: %s", l.File, status, err, errOut)
		}
		n, p := 0, 0
		for _, z := range single.Sizes {
			if math.Abs(z.RelError) > fidelity.MissBound {
				n++
			}
			if z.Model != nil {
				p++
			}
		}
		if l.Over != n {
			t.Errorf("%s: %d sizes over the bound, fidelity --log has %d", l.File, l.Over, n)
		}
		if (l.Model == nil) != (p == 0) || l.Model != nil && l.Model.Sizes != p {
			t.Errorf("%s: NCCL's model %+v, fidelity --log prices %d sizes", l.File, l.Model, p)
		}
		over, priced = over+n, priced+p
	}
	p := suite.Pooled[0]
	if p.Group != fidelity.GroupTargets || p.Logs != 5 || p.Over != over || p.Model == nil || p.Model.Sizes != priced || p.Simulated == nil || p.Simulated.Sizes != priced {
		t.Errorf("pooled targets %+v: want 5 logs, %d sizes over the bound, %d priced by NCCL's model and by the simulation", p, over, priced)
	}
}

// fidelity --shipped's CSV and table carry each log's figures of its
// JSON, column by column (an empty size band and an unpriced log's model
// empty), and the table's pooled lines its pooled ones.
func TestShippedCSVAndTableCarryTheJSONsFigures(t *testing.T) {
	skipInRaceRun(t, "fidelity --shipped over nine logs, four times; TestShippedCountsMissesAndPricedSizesAsEachLogDoes checks under it")
	for _, only := range []string{"-8xB200", "xxrjun-h100-allgather-8x"} {
		suite := shippedJSON(t, "--only", only)
		status, out, errOut := commsim("fidelity", "--shipped", "--only", only, "--format", "csv")
		recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		pooled := 0
		for _, p := range suite.Pooled {
			if p.Logs > 0 {
				pooled++
			}
		}
		if status != 0 || err != nil || len(recs) != 1+len(suite.Logs)+pooled {
			t.Fatalf("%s csv: status %d, %v, %s:\n%s", only, status, err, errOut, out)
		}
		cells := func(e shippedFigures) []string {
			want := []string{strconv.Itoa(e.Sizes), fmtFloat(e.Median), fmtFloat(e.Max)}
			for _, b := range e.Bands {
				cell := ""
				if b.Sizes > 0 {
					cell = fmtFloat(b.Median)
				}
				want = append(want, cell)
			}
			model := ""
			if e.Model != nil {
				model = fmtFloat(e.Model.Median)
			}
			return append(want, strconv.Itoa(e.Over), model)
		}
		var want [][]string
		for _, l := range suite.Logs {
			want = append(want, append([]string{"log", l.File, l.Group, l.Op, l.Topology, strconv.Itoa(l.Ranks), ""}, cells(l.shippedFigures)...))
		}
		for _, p := range suite.Pooled {
			if p.Logs > 0 {
				want = append(want, append([]string{"pooled", "", p.Group, "", "", "", strconv.Itoa(p.Logs)}, cells(p.shippedFigures)...))
			}
		}
		for i, w := range want {
			if strings.Join(recs[i+1], ",") != strings.Join(w, ",") {
				t.Errorf("%s csv row %q, want %q", only, recs[i+1], w)
			}
		}
		status, table, errOut := commsim("fidelity", "--shipped", "--only", only)
		if status != 0 || !strings.Contains(table, "; algorithm nccl; nothing fitted\n") {
			t.Fatalf("%s table: status %d, %s:\n%s", only, status, errOut, table)
		}
		for _, l := range suite.Logs {
			row := regexp.MustCompile(`(?m)^│ +` + regexp.QuoteMeta(l.File) + ` +│[^│]+│[^│]+│ +([^│ ]+) │ +(\d+) │ +(\d+) │`).FindStringSubmatch(table)
			if row == nil || row[1] != l.Topology || row[2] != strconv.Itoa(l.Ranks) || row[3] != strconv.Itoa(l.Sizes) {
				t.Errorf("%s: table row %q, want %s, %d ranks and %d sizes", l.File, row, l.Topology, l.Ranks, l.Sizes)
			}
		}
		for _, p := range suite.Pooled {
			if p.Logs == 0 {
				continue
			}
			want := fmt.Sprintf("# pooled, %s (%d logs): median %.1f%% over %d sizes (%s); %d sizes off by more than 30%%\n", p.Group, p.Logs, 100*p.Median, p.Sizes, bandsText(p.Bands), p.Over)
			if !strings.Contains(table, want) {
				t.Errorf("%s: table lacks %q:\n%s", only, want, table)
			}
			if p.Model != nil && p.Simulated != nil {
				want := fmt.Sprintf("#   over the %d sizes NCCL's cost model prices: the simulation %s; NCCL's model %s\n", p.Model.Sizes, bandsText(p.Simulated.Bands), bandsText(p.Model.Bands))
				if !strings.Contains(table, want) {
					t.Errorf("%s: table lacks %q:\n%s", only, want, table)
				}
			}
		}
	}
	// The machine is named as given, less the blanks around it.
	status, table, _ := commsim("fidelity", "--shipped", "--only", "xxrjun-h100-allgather-8x", "--nccl-machine", " channel=none ")
	if status != 0 || !strings.Contains(table, "; algorithm nccl; the machine as --nccl-machine channel=none says\n") {
		t.Errorf("the table's header does not name the machine: status %d:\n%s", status, table)
	}
	// --shipped draws no plot: --plot is refused.
	status, _, errOut := commsim("fidelity", "--shipped", "--only", "xxrjun-h100-allgather-8x", "--plot", filepath.Join(t.TempDir(), "p.svg"))
	if status != 2 || !strings.Contains(errOut, "--plot does not go with it") {
		t.Errorf("--shipped --plot: status %d, stderr %q", status, errOut)
	}
}

// bandsText is the size bands that hold sizes, with their medians, as
// the table's pooled lines write them.
func bandsText(bands []fidBand) string {
	var parts []string
	for _, b := range bands {
		if b.Sizes > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", b.Range, 100*b.Median))
		}
	}
	return strings.Join(parts, ", ")
}

// calibrate reports each protocol's fitted bandwidth factor under its own
// name, in the JSON, in --nccl-machine's form and in Go's.
func TestCalibratedMachineNamesEachProtocolsFactor(t *testing.T) {
	m := newCalMachine(nccl.Machine{Launch: 1.5, Hop: 0.25, Bandwidth: [3]float64{0.5, 0.75, 0.875}, ChannelGBps: 15}, 0.5)
	if m.LL != 0.5 || m.LL128 != 0.75 || m.Simple != 0.875 || m.NICScale != 0.5 || m.Channel != "15" {
		t.Errorf("machine %+v", m)
	}
	if got, want := m.flag(), "launch=1.5,hop=0.25,ll=0.5,ll128=0.75,simple=0.875,nic=0.5,channel=15"; got != want {
		t.Errorf("flag %q, want %q", got, want)
	}
	if got, want := m.goLiteral(), "nccl.Machine{Launch: 1.5, Hop: 0.25, Bandwidth: [3]float64{0.5, 0.75, 0.875}, ChannelGBps: 15}"; got != want {
		t.Errorf("Go literal %q, want %q", got, want)
	}
}

// A log that says what NCCL ran at every size is fitted as logged at
// every size: the table says so, and no warning names sizes left to the
// tuner.
func TestCalibrateAsLoggedAtEverySizeWarnsOfNone(t *testing.T) {
	var log strings.Builder
	log.WriteString("#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n")
	for _, b := range []int64{1 << 20, 4 << 20, 16 << 20, 64 << 20} {
		tuning := fmt.Sprintf("gpu1:9:9 [0] NCCL INFO AllReduce: %d Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n", b)
		us := 14 + float64(b)/2.2e5
		fmt.Fprintf(&log, "  %d  %d  float  sum  -1%s  %.2f  0  0  0%s  %.2f  0  0  0\n", b, b/4, tuning, us, tuning, us)
	}
	path := filepath.Join(t.TempDir(), "tuning.txt")
	if err := os.WriteFile(path, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := commsim("calibrate", "--log", path, "--topo", "dgx-h100", "--op", "allreduce", "--as-logged")
	if status != 0 || !strings.HasPrefix(out, "# commsim calibrate: allreduce as the log says NCCL ran it at every size (--algo nccl --as-logged)") || strings.Contains(errOut, "--as-logged:") {
		t.Errorf("status %d, stderr %q, table:\n%s", status, errOut, out)
	}
}

// calibrate's figures agree across its formats and with its sizes: the
// rms and largest |error| are those of the sizes' errors, the bus
// bandwidths are bytes over time times the op's bus factor, the CSV's
// columns are the JSON's fields, and the table's in-sample line its
// median and max.
func TestCalibrateNCCLFiguresAgreeAcrossFormats(t *testing.T) {
	skipInRaceRun(t, "a fit, three times; TestCalibrateNCCLTable fits under it")
	args := []string{"calibrate", "--log", "../../fidelity/nccl-logs/aws-p4de-allreduce-16xA100.txt", "-b", "8", "-e", "256"}
	status, out, errOut := commsim(append(args, "--format", "json")...)
	var rep calReport
	if err := json.Unmarshal([]byte(out), &rep); status != 0 || err != nil || rep.NCCL == nil || len(rep.Sizes) < 4 {
		t.Fatalf("status %d, %v: %s", status, err, errOut)
	}
	if !strings.Contains(out, `"warnings": [`) || strings.Contains(out, "gpus_per_thread") || strings.Contains(out, "thread_floor_us") {
		t.Errorf("JSON warnings are not a list, or a log of one GPU a thread is held to a thread's floor:\n%s", out)
	}
	sq, mx := 0.0, 0.0
	bus := busFactor(ops.AllReduce, rep.Ranks)
	for _, z := range rep.Sizes {
		sq += z.RelError * z.RelError
		mx = max(mx, math.Abs(z.RelError))
		if want := float64(z.Bytes) / z.MeasuredUS / 1e3 * bus; !near(z.MeasuredBus, want, 1e-9) {
			t.Errorf("%d B: measured busbw %v, want %v", z.Bytes, z.MeasuredBus, want)
		}
		if want := float64(z.Bytes) / z.FittedUS / 1e3 * bus; !near(z.FittedBus, want, 1e-9) {
			t.Errorf("%d B: fitted busbw %v, want %v", z.Bytes, z.FittedBus, want)
		}
	}
	if rms := math.Sqrt(sq / float64(len(rep.Sizes))); !near(rep.RMSRelError, rms, 1e-9) || rep.MaxRelError != mx {
		t.Errorf("rms %v, max %v; the sizes' are %v and %v", rep.RMSRelError, rep.MaxRelError, rms, mx)
	}
	status, out, errOut = commsim(append(args, "--format", "csv")...)
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if status != 0 || err != nil || len(recs) != len(rep.Sizes)+1 {
		t.Fatalf("csv: status %d, %v, %s", status, err, errOut)
	}
	m := rep.NCCL.Machine
	for i, z := range rep.Sizes {
		want := map[string]string{"bytes": strconv.FormatInt(z.Bytes, 10), "measured_us": fmtFloat(z.MeasuredUS), "fitted_us": fmtFloat(z.FittedUS),
			"rel_error": fmtFloat(z.RelError), "algo": z.Algo, "launch": fmtFloat(m.Launch), "hop": fmtFloat(m.Hop), "bandwidth_ll": fmtFloat(m.LL),
			"bandwidth_ll128": fmtFloat(m.LL128), "bandwidth_simple": fmtFloat(m.Simple), "nic_scale": fmtFloat(m.NICScale)}
		for j, name := range recs[0] {
			if w, ok := want[name]; ok && recs[i+1][j] != w {
				t.Errorf("csv row %d: %s = %s, want %s", i, name, recs[i+1][j], w)
			}
		}
	}
	fitted := filepath.Join(t.TempDir(), "fitted.yaml")
	status, out, errOut = commsim(append(args, "--out", fitted)...)
	head, err := os.ReadFile(fitted)
	lines := strings.SplitN(string(head), "\n", 3)
	if status != 0 || err != nil || len(lines) < 3 {
		t.Fatalf("--out: status %d, %v, %s", status, err, errOut)
	}
	nic := fmt.Sprintf(" and the network links ×%.4g (", m.NICScale)
	if strings.Contains(lines[1], nic) != (m.NICScale != 1) || !strings.HasSuffix(lines[1], fmt.Sprintf("; in-sample rms error %.2f%%", 100*rep.RMSRelError)) {
		t.Errorf("--out's header line %q: want the network scale ×%v named where not 1, and the rms error", lines[1], m.NICScale)
	}
	want := fmt.Sprintf("# in-sample |error|: median %.2f%%, max %.2f%%, rms %.2f%% over %d sizes\n", 100*rep.NCCL.InSample.Median, 100*rep.NCCL.InSample.Max, 100*rep.RMSRelError, rep.NCCL.InSample.Sizes)
	if rep.NCCL.HeldOut == nil && strings.Contains(out, "(fitted)") {
		t.Errorf("no size was held out, yet the table marks sizes as fitted rather than -:\n%s", out)
	}
	if status != 0 || !strings.Contains(out, want) || rep.NCCL.InSample.Median > rep.NCCL.InSample.Max {
		t.Errorf("status %d, stderr %q: table lacks %q:\n%s", status, errOut, want, out)
	}
}

// A fit without warnings says so in JSON with an empty list, not null.
func TestCalibrateJSONWithoutWarningsHasAnEmptyList(t *testing.T) {
	log := machineLogFile(t, calNCCLTruth, 0.5)
	status, out, errOut := commsim("calibrate", "--log", log, "--topo", calNCCLTopo, "--nccl-proto", calNCCLProto, "--format", "json")
	if status != 0 || errOut != "" || !strings.Contains(out, `"warnings": []`) {
		t.Errorf("status %d, stderr %q: want no warnings, written as []:\n%s", status, errOut, out)
	}
}

// A log of a run whose threads drove several GPUs (-g 4) is fitted held
// to the thread's floor, and the table says so: the floor's note, the
// sizes held there marked host-bound, and --thread-gpus in the command
// that predicts with the fit.
func TestCalibrateNCCLNamesTheThreadFloor(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "switch:8", "-g", "4", "--algo", "nccl", "-b", "1KiB", "-e", "1GiB", "-f", "2", "--format", "csv")
	path := filepath.Join(t.TempDir(), "g4.csv")
	if status != 0 || os.WriteFile(path, []byte(out), 0o644) != nil {
		t.Fatalf("bench: status %d: %s", status, errOut)
	}
	status, out, errOut = commsim("calibrate", "--log", path, "--topo", "switch:4")
	if status != 0 || !strings.Contains(out, "# each thread of the run drives 4 GPUs (nccl-tests -g 4)") || !regexp.MustCompile(`(?m)^ +\d+ .*/\d+ch host-bound$`).MatchString(out) ||
		!strings.Contains(out, "to predict with it: commsim bench --algo nccl --topo switch:4 --thread-gpus 4 --nccl-machine ") {
		t.Errorf("status %d, stderr %q, table:\n%s", status, errOut, out)
	}
	// A run of one GPU a thread is held to no floor.
	status, out, errOut = commsim("bench", "--topo", "switch:4", "--algo", "nccl", "-b", "1KiB", "-e", "1GiB", "-f", "2", "--format", "csv")
	if status != 0 || os.WriteFile(path, []byte(out), 0o644) != nil {
		t.Fatalf("bench: status %d: %s", status, errOut)
	}
	status, out, errOut = commsim("calibrate", "--log", path, "--topo", "switch:4", "--format", "json")
	if status != 0 || strings.Contains(out, "gpus_per_thread") || strings.Contains(out, "thread_floor_us") {
		t.Errorf("one GPU a thread: status %d, stderr %q:\n%s", status, errOut, out)
	}
}

// The warning of sizes the fit misses by over 10% names six of them and
// counts the rest.
func TestCalibrateOffWarningNamesSixSizesAndCountsTheRest(t *testing.T) {
	var sz []calSize
	for i := range 9 {
		e := 0.2
		if i == 8 {
			e = 0.05 // within 10%: not named
		}
		sz = append(sz, calSize{Bytes: 1 << (10 + i), RelError: e})
	}
	w := offWarnings(sz)
	if len(w) != 1 || !strings.HasPrefix(w[0], "the fit is off by more than 10% at 8 of 9 sizes: ") || !strings.HasSuffix(w[0], "32KiB (+20.0%), and 2 more") {
		t.Errorf("warnings %q", w)
	}
	if w := offWarnings(sz[:7]); len(w) != 1 || !strings.HasSuffix(w[0], ", and 1 more") {
		t.Errorf("seven sizes off: warnings %q, want six named and one counted", w)
	}
	if w := offWarnings(sz[:6]); len(w) != 1 || !strings.HasSuffix(w[0], ", 32KiB (+20.0%)") {
		t.Errorf("six sizes off: warnings %q, want each named", w)
	}
}
