package fidelity

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// An all-reduce log of a run whose one thread drove all 4 GPUs (nccl-tests
// -g 4): its 8-byte size takes less than the thread's launches on a fast
// fabric, its 1 GiB size more.
const hostBoundLog = "# Collective test starting: all_reduce_perf\n" +
	"# nThread 1 nGpus 4 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0\n" +
	"#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
	"         8          2  float  sum  -1   20.00  0.00  0.00  0   20.00  0.00  0.00  0\n" +
	"1073741824  268435456  float  sum  -1  20000.0 53.69 80.53  0  20000.0 53.69 80.53  0\n"

// A size the simulation runs faster than the run's thread could launch it
// on its GPUs is predicted at the thread floor (nccl.ThreadFloorUS of the
// header's nGpus), marked host-bound, and its table line says so; a size
// above the floor keeps its simulated time and no mark.
func TestCheckHoldsAThreadsGPUsToItsFloor(t *testing.T) {
	lg := parse(t, hostBoundLog)
	if lg.GPUsPerThread != 4 {
		t.Fatalf("the log's GPUs a thread: %d, want 4", lg.GPUsPerThread)
	}
	rep, err := Check(lg, topo(t, "switch:4,bw=100GB/s,lat=0.1us"), Config{Algo: "ring"})
	if err != nil {
		t.Fatal(err)
	}
	floor := nccl.ThreadFloorUS(4)
	if rep.ThreadFloorUS != floor || len(rep.Rows) != 2 {
		t.Fatalf("floor %v us, %d rows; want %v us and 2", rep.ThreadFloorUS, len(rep.Rows), floor)
	}
	small, large := rep.Rows[0], rep.Rows[1]
	if !small.HostBound || small.PredictedUS != floor || small.Error != floor/20-1 {
		t.Errorf("8 bytes: %+v; want host-bound at the %v us floor", small, floor)
	}
	if large.HostBound || !(large.PredictedUS > floor) {
		t.Errorf("1 GiB: %+v; want its simulated time, above the floor", large)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(table.String(), "\n"); !strings.HasSuffix(lines[1], "ring host-bound") || strings.Contains(lines[2], "host-bound") {
		t.Errorf("table:\n%s", table.String())
	}
}

// A collective that moves no data (a barrier) is not simulated: every size
// of its log is skipped, and SimulatedSizes counts none.
func TestCheckSkipsABarriersSizes(t *testing.T) {
	lg := parse(t, "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"+
		"  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0\n"+
		"  4096 1024  float  sum  -1  11.00  0.37  0.65  0  11.50  0.36  0.62  0\n")
	rep, err := Check(lg, topo(t, "switch:4"), Config{Op: ops.Barrier, Algo: "ring"})
	if err != nil || len(rep.Rows) != 0 || rep.Skipped != 2 || SimulatedSizes(lg, ops.Barrier) != 0 {
		t.Errorf("barrier: %v, %+v; want no rows, 2 skipped", err, rep)
	}
}

// The largest error's size is that of the first row to reach it: with
// every error alike (0 here, as a log predicted exactly), the first row's.
func TestSummarizeMaxBytesIsTheFirstOfTheLargest(t *testing.T) {
	s := Summarize([]Row{{Bytes: 8, Error: 0}, {Bytes: 1024, Error: 0}})
	if s.Max != 0 || s.MaxBytes != 8 {
		t.Errorf("all exact: max %v at %d bytes, want 0 at 8", s.Max, s.MaxBytes)
	}
	s = Summarize([]Row{{Bytes: 8, Error: 0.1}, {Bytes: 16, Error: -0.4}, {Bytes: 1024, Error: 0.4}})
	if s.Max != 0.4 || s.MaxBytes != 16 {
		t.Errorf("tie: max %v at %d bytes, want 0.4 at 16", s.Max, s.MaxBytes)
	}
}

// AsLogged simulates a logged choice only where the size's lines agree: a
// size whose lines disagree runs NCCL's tuner's choice, even where the
// first of its lines names another algorithm.
func TestAsLoggedKeepsTheTunersChoiceWhereLinesDisagree(t *testing.T) {
	lg, tp := parse(t, allGatherLog), topo(t, "switch:4,bw=10GB/s,lat=2us")
	tuned, err := Check(lg, tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	const size = 131072
	proto := ops.ProtoSimple
	if strings.Contains(tuned.Rows[1].Algo, "/Simple/") {
		proto = ops.ProtoLL
	}
	lg.NCCLRan = map[int64]calibrate.Ran{size: {Algo: nccl.Ring, Proto: proto, Channels: 1, Varies: true}}
	as, err := Check(lg, tp, Config{AsLogged: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := as.Rows[1]; r.Bytes != size || r.Algo != tuned.Rows[1].Algo || r.PredictedUS != tuned.Rows[1].PredictedUS {
		t.Errorf("as logged, lines disagreeing: %+v; want the tuner's %+v", r, tuned.Rows[1])
	}
	lg.NCCLRan[size] = calibrate.Ran{Algo: nccl.Ring, Proto: proto, Channels: 1}
	if as, err = Check(lg, tp, Config{AsLogged: true}); err != nil || as.Rows[1].Algo == tuned.Rows[1].Algo {
		t.Errorf("as logged, lines agreeing: %v, %+v; want %v/1ch, not the tuner's %s", err, as.Rows[1], proto, tuned.Rows[1].Algo)
	}
}

// NCCL's tuner agrees with a logged choice only when it chooses the
// logged protocol as well as the algorithm.
func TestChoicesAgreeOnAlgorithmAndProtocol(t *testing.T) {
	lg, tp := parse(t, allGatherLog), topo(t, "switch:4,bw=10GB/s,lat=2us")
	tuner, err := nccl.NewTuner(tp, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := verify.SpecForSize(ops.Spec{Op: ops.AllGather, Algo: "nccl", Ranks: 4, DType: hw.F32, Redop: hw.Sum}, 16)
	c, err := tuner.Choose(spec)
	if err != nil {
		t.Fatal(err)
	}
	other := ops.ProtoSimple
	if c.NCCL.Protocol == ops.ProtoSimple {
		other = ops.ProtoLL
	}
	lg.NCCLRan = map[int64]calibrate.Ran{16: {Algo: c.NCCL.Algo, Proto: other}}
	rep, err := Check(lg, tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Choices{Logged: 1}); !reflect.DeepEqual(rep.Choices, want) {
		t.Errorf("tuner %v/%v, logged %v/%v: choices %+v, want %+v", c.NCCL.Algo, c.NCCL.Protocol, c.NCCL.Algo, other, rep.Choices, want)
	}
	lg.NCCLRan[16] = calibrate.Ran{Algo: c.NCCL.Algo, Proto: c.NCCL.Protocol}
	if rep, err = Check(lg, tp, Config{}); err != nil || !reflect.DeepEqual(rep.Choices, Choices{Logged: 1, Agree: 1}) {
		t.Errorf("logged as the tuner chose: %v, choices %+v", err, rep.Choices)
	}
}

// ModelRows are the priced rows only, each with NCCL's model's time as its
// prediction; a pool's Priced rows are the simulation's at the same sizes,
// and a pool counts the logs added to it.
func TestModelRowsAndPoolsKeepThePricedRows(t *testing.T) {
	rows := []Row{
		{Bytes: 8, MeasuredUS: 10, PredictedUS: 12, Error: 0.2, ModelUS: 15, ModelError: 0.5},
		{Bytes: 16, MeasuredUS: 10, PredictedUS: 9, Error: -0.1}, // point to point: not priced
	}
	m := ModelRows(rows)
	if len(m) != 1 || m[0].Bytes != 8 || m[0].PredictedUS != 15 || m[0].Error != 0.5 || m[0].MeasuredUS != 10 {
		t.Errorf("model rows %+v, want the 8-byte row at the model's 15 us", m)
	}
	var p Pool
	p.Add(rows)
	p.Add(rows[:1])
	priced := p.Priced()
	if p.Logs != 2 || len(p.Rows) != 3 || len(priced) != 2 || priced[0].PredictedUS != 12 || priced[1].Bytes != 8 {
		t.Errorf("pool of %d logs, %d rows, priced %+v; want 2 logs, 3 rows, the two 8-byte rows", p.Logs, len(p.Rows), priced)
	}
}

// Where NCCL's model is priced, a size it does not price prints "-" in
// both of its columns, not a time of 0.
func TestWriteTableDashesAnUnpricedSize(t *testing.T) {
	rep := &Report{Rows: []Row{
		{Bytes: 8, MeasuredUS: 10, PredictedUS: 12, Error: 0.2, ModelUS: 15, ModelError: 0.5, Algo: "ring/LL/1ch"},
		{Bytes: 16, MeasuredUS: 10, PredictedUS: 9, Error: -0.1, Algo: "p2p"},
	}}
	rep.Summary, rep.Model = Summarize(rep.Rows), Summarize(ModelRows(rep.Rows))
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(table.String(), "\n")
	if f := strings.Fields(lines[1]); len(f) != 7 || f[4] != "15.00" {
		t.Errorf("priced line %q", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) != 7 || f[4] != "-" || f[5] != "-" {
		t.Errorf("unpriced line %q, want - for the model's time and error", lines[2])
	}
}

// failsOnce is a writer whose first write fails and whose later ones
// succeed.
type failsOnce struct{ failed bool }

func (f *failsOnce) Write(p []byte) (int, error) {
	if !f.failed {
		f.failed = true
		return 0, fmt.Errorf("disk full")
	}
	return len(p), nil
}

// A table whose writing fails says so, even where a later write would
// succeed (it reported only the last write's error).
func TestWriteTableReportsAFailedWrite(t *testing.T) {
	rep := &Report{Rows: []Row{{Bytes: 8, MeasuredUS: 10, PredictedUS: 12, Error: 0.2, Algo: "ring/LL/1ch"}}}
	rep.Summary = Summarize(rep.Rows)
	if err := rep.WriteTable(&failsOnce{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("WriteTable to a failing writer: %v, want its error", err)
	}
}

// A summary describes its largest error and where, and an empty one says
// it has no sizes, not a median of 0.
func TestSummaryDescribe(t *testing.T) {
	d := Summarize([]Row{{Bytes: 8, Error: -0.5}, {Bytes: 1024, Error: 0.1}, {Bytes: 2048, Error: 0.2}}).Describe()
	if !strings.Contains(d, "median 20.0% over 3 sizes, max 50.0% at 8 bytes") || !strings.Contains(d, "< 64 KiB: 20.0% (3 sizes); 64 KiB–16 MiB: no sizes") {
		t.Errorf("describe:\n%s", d)
	}
	if e := Summarize(nil).Describe(); e != "# no sizes above 0 bytes\n" {
		t.Errorf("empty: %q", e)
	}
}

// The line on NCCL's logged choices counts the sizes whose lines disagree
// only where there are some, appears where every logged size's lines
// disagree, and says when the logged choices were simulated; a line on
// the tuning lines that could not be read follows it, alone too.
func TestChoicesDescribe(t *testing.T) {
	for _, tc := range []struct {
		c    Choices
		want string
	}{
		{Choices{}, ""},
		{Choices{Logged: 2, Agree: 1}, "# NCCL's logged choice: the tuner chose the same algorithm and protocol at 1 of 2 sizes\n"},
		{Choices{Varied: 2}, "# NCCL's logged choice: the tuner chose the same algorithm and protocol at 0 of 0 sizes (2 more whose lines disagree left out)\n"},
		{Choices{Logged: 1, Agree: 1, AsLogged: true}, "# NCCL's logged choice: the tuner chose the same algorithm and protocol at 1 of 1 sizes; simulated as logged\n"},
		{Choices{Unread: []calibrate.UnreadLine{{Line: 7, Reason: "r"}}}, "# NCCL's tuning lines (Bytes -> Algo) that could not be read, left out: 1, the first at line 7: r\n"},
		{Choices{Logged: 1, Unread: []calibrate.UnreadLine{{Line: 7, Reason: "r"}}}, "# NCCL's logged choice: the tuner chose the same algorithm and protocol at 0 of 1 sizes\n" +
			"# NCCL's tuning lines (Bytes -> Algo) that could not be read, left out: 1, the first at line 7: r\n"},
	} {
		if got := tc.c.Describe(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.c, got, tc.want)
		}
	}
}

// A log is excluded where it ran with what commsim cannot reproduce, even
// one found after the model was built; held out where only found since;
// one of the targets otherwise.
func TestGroupPrefersExcluded(t *testing.T) {
	for _, tc := range []struct {
		l    PublishedLog
		want string
	}{
		{PublishedLog{}, GroupTargets},
		{PublishedLog{HeldOut: "found since"}, GroupHeldOut},
		{PublishedLog{Exclude: "a plugin"}, GroupExcluded},
		{PublishedLog{Exclude: "a plugin", HeldOut: "found since"}, GroupExcluded},
	} {
		if got := tc.l.Group(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.l, got, tc.want)
		}
	}
}

// Figures print alike up to half a tenth apart, whatever the rounding of
// their difference in floating point; a latency NCCL prints as 0 beside a
// bandwidth is still a latency to compare.
func TestCostRowToleranceAndZeroLatency(t *testing.T) {
	for _, a := range []float64{0.1, 1.3, 9.3, 25.2, 246.2} {
		if b := a + 0.05; !near(a, b) || near(a, a+0.06) {
			t.Errorf("%v and %v (%v apart): near %v; %v: near %v", a, b, b-a, near(a, b), a+0.06, near(a, a+0.06))
		}
	}
	row := CostRow{calibrate.LoggedCost{Cost: nccl.Cost{LatencyUS: 0, AlgBW: 39}}, nccl.Cost{LatencyUS: 0.04, AlgBW: 39}}
	if compared, agree := row.LatencyAgree(); !compared || !agree {
		t.Errorf("latency 0 beside 39 GB/s: compared %v, agree %v; want both", compared, agree)
	}
}

// A call agrees only where the model chooses the channels the line gives;
// a line with no time is not compared; times agree to a millionth, and to
// a millionth of a µs for the smallest.
func TestCallRowChannelsAndTimes(t *testing.T) {
	ran := calibrate.Ran{Algo: nccl.Ring, Proto: ops.ProtoLL, Channels: 16}
	choice := nccl.Estimate{Algo: nccl.Ring, Protocol: ops.ProtoLL, Channels: 8}
	if (CallRow{Logged: calibrate.LoggedCall{Ran: ran}, Choice: choice}).ChoiceAgrees() {
		t.Error("8 channels chosen, 16 logged: agree")
	}
	choice.Channels = 16
	if !(CallRow{Logged: calibrate.LoggedCall{Ran: ran}, Choice: choice}).ChoiceAgrees() {
		t.Error("16 channels chosen, 16 logged: disagree")
	}
	if compared, _ := (CallRow{Logged: calibrate.LoggedCall{Ran: ran}, Ran: choice}).TimeAgree(); compared {
		t.Error("a line with no time is compared")
	}
	choice.TimeUS = 0.5000009
	if compared, agree := (CallRow{Logged: calibrate.LoggedCall{Ran: ran, TimeUS: 0.5}, Ran: choice}).TimeAgree(); !compared || !agree {
		t.Errorf("0.5 us beside 0.5000009 us: compared %v, agree %v", compared, agree)
	}
}

// CheckCostTable prices what NCCL ran at the protocol it ran, passes over
// a call of no elements, and a point-to-point call, which the tuner does
// not choose for.
func TestCheckCostTableCalls(t *testing.T) {
	tu, err := nccl.NewTuner(topo(t, "dgx-h100"), nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logged := &calibrate.CostTableLog{Name: "calls", Calls: []calibrate.LoggedCall{
		{Op: "allreduce", Bytes: 8, Ran: calibrate.Ran{Algo: nccl.Ring, Proto: ops.ProtoSimple}, Line: 1},
		{Op: "allreduce", Bytes: 0, Ran: calibrate.Ran{Algo: nccl.Ring, Proto: ops.ProtoLL}, Line: 2},
		{Op: "sendrecv", Bytes: 1024, Ran: calibrate.Ran{Algo: nccl.Ring, Proto: ops.ProtoSimple}, Line: 3},
	}}
	rep, err := CheckCostTable(logged, tu)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Choices != 1 || len(rep.Calls) != 1 {
		t.Fatalf("%d choices, calls %+v; want the 8-byte all-reduce only", rep.Choices, rep.Calls)
	}
	if r := rep.Calls[0].Ran; r.Algo != nccl.Ring || r.Protocol != ops.ProtoSimple || r.Off != "" || !(r.TimeUS > 0) || math.IsInf(r.TimeUS, 0) {
		t.Errorf("priced %+v; want the model's ring/Simple", r)
	}
}

// The mapping file is refused, naming why, where an entry lacks ranks,
// where a log is named twice, where a log file is named nowhere, and where
// an entry names a file that is not there.
func TestReadCatalogRefusesABadMapping(t *testing.T) {
	entry := func(file string, ranks int) string {
		return fmt.Sprintf("  - file: %s\n    op: allreduce\n    ranks: %d\n    topo: dgx-h100\n    hardware: x\n    nccl_version: 2.29.2\n    nccl_settings: x\n", file, ranks)
	}
	log := &fstest.MapFile{Data: []byte("# a log\n")}
	for _, tc := range []struct {
		name    string
		mapping string
		files   []string
		want    string
	}{
		{"ranks 0", entry("a.txt", 0), []string{"a.txt"}, `log "a.txt": want an op, a topo and ranks`},
		{"named twice", entry("a.txt", 8) + entry("a.txt", 8), []string{"a.txt"}, `log "a.txt" named twice`},
		{"not named", entry("a.txt", 8), []string{"a.txt", "b.txt"}, "log b.txt is not in the mapping file"},
		{"no such file", entry("a.txt", 8) + entry("c.txt", 8), []string{"a.txt"}, "c.txt"},
	} {
		fsys := fstest.MapFS{logsDir + "/" + mappingFile: {Data: []byte("logs:\n" + tc.mapping)}}
		for _, f := range tc.files {
			fsys[logsDir+"/"+f] = log
		}
		if _, err := readCatalog(fsys); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
	good := fstest.MapFS{logsDir + "/" + mappingFile: {Data: []byte("logs:\n" + entry("a.txt", 8))}, logsDir + "/a.txt": log}
	if c, err := readCatalog(good); err != nil || len(c.Logs) != 1 || string(c.Logs[0].Data) != "# a log\n" {
		t.Errorf("a good mapping: %v, %+v", err, c)
	}
}

// The entry points take a nil log, topology or tuner as an error, not a
// panic.
func TestChecksRefuseNothingToCheck(t *testing.T) {
	topo, err := topology.Parse("switch:4")
	if err != nil {
		t.Fatal(err)
	}
	lg := &calibrate.Log{Op: "allreduce", Ranks: 4, Samples: []calibrate.Sample{{Bytes: 1024, TimeUS: 10}}}
	if _, err := Check(nil, topo, Config{}); err == nil {
		t.Error("Check of no log: no error")
	}
	if _, err := Check(lg, nil, Config{}); err == nil {
		t.Error("Check on no topology: no error")
	}
	if _, err := CheckCostTable(nil, nil); err == nil {
		t.Error("CheckCostTable of nothing: no error")
	}
	if _, err := CheckCostTable(&calibrate.CostTableLog{}, nil); err == nil {
		t.Error("CheckCostTable with no tuner: no error")
	}
	if n := SimulatedSizes(nil, ops.AllReduce); n != 0 {
		t.Errorf("SimulatedSizes of no log: %d", n)
	}
	if n := SimulatedSizes(lg, ops.AllReduce); n != 1 {
		t.Errorf("SimulatedSizes: %d, want 1", n)
	}
}
