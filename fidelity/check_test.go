package fidelity

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

func parse(t *testing.T, text string) *calibrate.Log {
	t.Helper()
	lg, err := calibrate.ParseLog("log", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return lg
}

func topo(t *testing.T, spec string) *topology.Topology {
	t.Helper()
	tp, err := topology.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// An all-gather log as nccl-tests prints one on 4 ranks: sizes under one
// float per rank print as 0, and the rest are totals over the ranks.
const allGatherLog = "# Collective test starting: all_gather_perf\n" +
	"#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
	"     0     0  float  none  -1   0.15  0.00  0.00  0   0.14  0.00  0.00  0\n" +
	"     0     0  float  none  -1   0.13  0.00  0.00  0   0.14  0.00  0.00  0\n" +
	"    16     1  float  none  -1  10.00  0.00  0.00  0  10.00  0.00  0.00  0\n" +
	"131072  8192  float  none  -1  20.00  6.55  4.92  0  20.00  6.55  4.92  0\n" +
	"33554432 2097152 float none -1 900.00 37.28 27.96 0 900.00 37.28 27.96 0\n"

// Check runs each size with nccl-tests' meaning of size, leaves size 0
// out, and reports the errors, their medians by band and the largest.
// The same check twice gives the same report, the second telling its
// progress once a size.
func TestCheckSmallLog(t *testing.T) {
	lg, tp := parse(t, allGatherLog), topo(t, "switch:4,bw=10GB/s,lat=2us")
	rep, err := Check(lg, tp, Config{Algo: "ring"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Op != ops.AllGather || rep.Ranks != 4 || rep.Skipped != 1 || len(rep.Rows) != 3 || rep.Algo != "ring" {
		t.Fatalf("%+v", rep)
	}
	// Ring all-gather of n bytes in all: 3 steps of α + n/4·β.
	for i, r := range rep.Rows {
		n := float64(r.Bytes)
		want := 3 * (4e-6 + n/4/10e9) * 1e6
		if math.Abs(r.PredictedUS/want-1) > 1e-9 || r.Algo != "ring" || math.Abs(r.Error-(r.PredictedUS/r.MeasuredUS-1)) > 1e-15 {
			t.Errorf("row %d: %+v, want %.4f us predicted", i, r, want)
		}
	}
	small, medium, large := rep.Bands[0], rep.Bands[1], rep.Bands[2]
	if small.Sizes != 1 || medium.Sizes != 1 || large.Sizes != 1 || small.Median != math.Abs(rep.Rows[0].Error) || large.Median != math.Abs(rep.Rows[2].Error) {
		t.Errorf("bands %+v", rep.Bands)
	}
	if rep.Max != max(math.Abs(rep.Rows[0].Error), math.Abs(rep.Rows[1].Error), math.Abs(rep.Rows[2].Error)) {
		t.Errorf("max %v of %+v", rep.Max, rep.Rows)
	}
	var mu sync.Mutex // sizes are simulated on several goroutines
	progress := 0
	again, err := Check(lg, tp, Config{Algo: "ring", Progress: func() { mu.Lock(); progress++; mu.Unlock() }})
	if err != nil || !reflect.DeepEqual(rep, again) {
		t.Errorf("a second check differs: %v\n%+v\n%+v", err, rep, again)
	}
	if progress != len(rep.Rows) || SimulatedSizes(lg, ops.AllGather) != len(rep.Rows) {
		t.Errorf("progress reported %d sizes done and SimulatedSizes %d, want the %d simulated", progress, SimulatedSizes(lg, ops.AllGather), len(rep.Rows))
	}
	auto, err := Check(lg, tp, Config{Algo: "auto"})
	if err != nil || auto.Algo != "auto" || auto.Rows[0].Algo == "" || auto.Rows[0].Algo == "auto" {
		t.Errorf("auto: %v, %+v", err, auto)
	}
	// By default, NCCL's choice: the algo column says algorithm,
	// protocol and channels.
	dflt, err := Check(lg, tp, Config{})
	if err != nil || dflt.Algo != "nccl" || !strings.HasPrefix(dflt.Rows[0].Algo, "ring/LL/") {
		t.Errorf("nccl: %v, %+v", err, dflt)
	}
}

// With nccl, every size also gets NCCL's own cost model's time for its
// choice, priced in Config.NCCL's environment whatever the planner, and
// the model's errors are summed up beside the simulation's; other
// algorithms get none.
func TestCheckPricesNCCLsModel(t *testing.T) {
	lg, tp := parse(t, allGatherLog), topo(t, "switch:4,bw=10GB/s,lat=2us")
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"default", Config{}},
		{"simple only", Config{NCCL: nccl.Options{Protos: []ops.Protocol{ops.ProtoSimple}}}},
		{"a planner of the caller's", Config{Algo: "nccl", NCCL: nccl.Options{Protos: []ops.Protocol{ops.ProtoSimple}}, Plan: func(s ops.Spec) (*ops.Plan, error) {
			s.Algo = "ring"
			return ops.Compile(s)
		}}},
	} {
		rep, err := Check(lg, tp, c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tuner, err := nccl.NewTuner(tp, c.cfg.NCCL)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rep.Rows {
			spec, _ := verify.SpecForSize(ops.Spec{Op: ops.AllGather, Algo: "nccl", Ranks: 4, DType: hw.F32, Redop: hw.Sum}, r.Bytes)
			choice, err := tuner.Choose(spec)
			if err != nil {
				t.Fatal(err)
			}
			if want := choice.NCCL.TimeUS; !(want > 0) || r.ModelUS != want || r.ModelError != want/r.MeasuredUS-1 {
				t.Errorf("%s: %d bytes: model %v us (error %v), want NCCL's %v us (%v)", c.name, r.Bytes, r.ModelUS, r.ModelError, want, choice.NCCL)
			}
		}
		if !reflect.DeepEqual(rep.Model, Summarize(ModelRows(rep.Rows))) || rep.Model.Sizes != 3 {
			t.Errorf("%s: model summary %+v", c.name, rep.Model)
		}
	}
	ring, err := Check(lg, tp, Config{Algo: "ring"})
	if err != nil || ring.Model.Sizes != 0 || ring.Rows[0].ModelUS != 0 {
		t.Errorf("ring: %v, %+v", err, ring)
	}
	var table strings.Builder
	if err := ring.WriteTable(&table); err != nil || strings.Contains(table.String(), "model") {
		t.Errorf("ring's table names a model: %v\n%s", err, table.String())
	}
}

// A planner of the caller's own (bench's, a tuner's) runs every size.
func TestCheckUsesTheCallersPlanner(t *testing.T) {
	var mu sync.Mutex // sizes are planned on several goroutines
	var asked []string
	plan := func(s ops.Spec) (*ops.Plan, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, s.Algo)
		s.Algo = "direct"
		return ops.Compile(s)
	}
	rep, err := Check(parse(t, allGatherLog), topo(t, "switch:4"), Config{Algo: "mine", Plan: plan})
	if err != nil || len(asked) != 3 || asked[0] != "mine" || rep.Rows[2].Algo != "direct" {
		t.Errorf("%v, asked %q, %+v", err, asked, rep)
	}
	// A planner's plan of another collective or size is an error, not a
	// prediction (every size was one all-reduce's 5.6 µs).
	wrong, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 1024, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := Check(parse(t, allGatherLog), topo(t, "switch:4"), Config{Plan: func(ops.Spec) (*ops.Plan, error) { return wrong, nil }}); err == nil || !strings.Contains(err.Error(), "the planner gave a plan for") {
		t.Errorf("a plan of another collective: %+v, %v", rep, err)
	}
}

func TestCheckErrors(t *testing.T) {
	noOp := "  1024  256  float  sum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0\n"
	for _, c := range []struct {
		name, log, topo string
		cfg             Config
		want            string
	}{
		{"no op", noOp, "switch:4", Config{}, "does not name its collective"},
		{"op conflict", allGatherLog, "switch:4", Config{Op: ops.AllReduce}, "asked for allreduce, but the log measured allgather"},
		{"ranks", "#  Rank  0 Group 0\n#  Rank  1 Group 0\n" + noOp, "switch:4", Config{Op: ops.AllReduce}, "the log has 2 ranks, but topology switch:4 has 4 GPUs"},
		{"no element", "   8  2  float  none  -1  10.00  0  0  0  10.00  0  0  0\n", "switch:4", Config{Op: ops.AllGather}, "line 1: 8 bytes of f32 hold no element per rank on 4 ranks"},
		{"algo", allGatherLog, "switch:4", Config{Algo: "rhd"}, "line 5 (16 bytes)"},
		{"type", "  8  8  quaternion  sum  -1  10.00  0  0  0  10.00  0  0  0\n", "switch:4", Config{Op: ops.AllReduce}, `"quaternion" has no commsim dtype`},
		{"redop", "  1024  256  float  mulsum  -1  10.00  0.10  0.18  0  10.50  0.10  0.17  0\n", "switch:4", Config{Op: ops.AllReduce}, "redop mulsum is not one commsim models"},
	} {
		_, err := Check(parse(t, c.log), topo(t, c.topo), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// A Log made by hand: a time of no number, or below zero, is no
	// measurement (its error came out NaN or -57.6), nor are -3 ranks.
	for _, edit := range []func(*calibrate.Log){
		func(lg *calibrate.Log) { lg.Samples[1].TimeUS = math.NaN() },
		func(lg *calibrate.Log) { lg.Samples[1].TimeUS = -4 },
		func(lg *calibrate.Log) { lg.Ranks = -3 },
	} {
		lg := parse(t, allGatherLog)
		edit(lg)
		if rep, err := Check(lg, topo(t, "switch:4"), Config{Algo: "ring"}); !errors.Is(err, ErrMismatch) {
			t.Errorf("a hand-made log: %+v, %v", rep, err)
		}
	}
}

// Each size runs the reduction the log's rows name: NCCL's NVLS
// reduces sums in the switch but not products, so on one DGX H100 its
// tuner runs a 256 MiB sum on NVLS and a product on rings, and the check
// predicts each as the tuner runs it.
func TestCheckRunsTheLogsReduction(t *testing.T) {
	tp, err := topology.Resolve("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ redop, algo string }{{"sum", "nvls/"}, {"prod", "ring/"}, {"", "nvls/"}} {
		row := "  268435456  67108864  float  " + c.redop + "  -1  1000.00  0  0  0  1000.00  0  0  0\n"
		if c.redop == "" { // older nccl-tests print no redop column: sum
			row = "  268435456  67108864  float  1000.00  0  0  0  1000.00  0  0  0\n"
		}
		rep, err := Check(parse(t, row), tp, Config{Op: ops.AllReduce})
		if err != nil || !strings.HasPrefix(rep.Rows[0].Algo, c.algo) {
			t.Errorf("redop %q: %v, ran %+v, want %s", c.redop, err, rep, c.algo)
		}
	}
}

func TestSummarize(t *testing.T) {
	rows := []Row{{Bytes: 8, Error: -0.5}, {Bytes: 1024, Error: 0.1}, {Bytes: 64 << 10, Error: 0.3}, {Bytes: 16<<20 - 1, Error: -0.2},
		{Bytes: 16 << 20, Error: 0.05}}
	s := Summarize(rows)
	if s.Sizes != 5 || s.Median != 0.2 || s.Max != 0.5 || s.MaxBytes != 8 {
		t.Errorf("%+v", s)
	}
	want := []BandSummary{{Bands[0], 2, 0.3}, {Bands[1], 2, 0.25}, {Bands[2], 1, 0.05}}
	for i, b := range s.Bands {
		if b.Sizes != want[i].Sizes || math.Abs(b.Median-want[i].Median) > 1e-15 || b.Band != want[i].Band {
			t.Errorf("band %d: %+v, want %+v", i, b, want[i])
		}
	}
	if e := Summarize(nil); e.Sizes != 0 || e.Median != 0 || len(e.Bands) != 3 || !strings.Contains(e.Describe(), "no sizes") {
		t.Errorf("empty: %+v", e)
	}
}

// The mapping file names every shipped log once, with an op, a fabric and
// the header's NCCL version; a copy of a shipped log is found by its
// content.
func TestPublishedCatalog(t *testing.T) {
	cat, err := Published()
	if err != nil {
		t.Fatal(err)
	}
	heldOut := 0
	for _, l := range cat.Logs {
		if l.HeldOut != "" {
			heldOut++
		}
	}
	if len(cat.Logs)-heldOut != 13 || heldOut != 52 {
		t.Errorf("%d logs, %d of them found since; want issue #16's 13 published runs and 52 since", len(cat.Logs), heldOut)
	}
	for _, l := range cat.Logs {
		if l.NCCLVersion == "" || l.NCCLSettings == "" || l.Hardware == "" || len(l.Data) == 0 {
			t.Errorf("%s: %+v", l.File, l)
		}
		if strings.Contains(l.Topo, ",") != (l.Overrides != "") {
			t.Errorf("%s: topo %s, overrides %q: say why a preset is overridden, and only then", l.File, l.Topo, l.Overrides)
		}
		if found := cat.Find([]byte(strings.ReplaceAll(string(l.Data), "\n", "\r\n"))); found == nil || found.File != l.File {
			t.Errorf("%s: found %v", l.File, found)
		}
	}
	if cat.Find([]byte(allGatherLog)) != nil {
		t.Error("an unknown log was found")
	}
}

// A log's NCCL environment and its release, stated or presumed, reach
// the check: p4de's run had NCCL_PROTO=Simple (from AWS's plugin) and
// presumably NCCL 2.20.3, whose tuner runs rings at small sizes where
// 2.30's runs trees; OCI's NCCL 2.26.6 takes the constants of 2.23 to
// 2.27; a setting commsim would not follow is refused, and so is a
// presumed release beside a stated one.
func TestPublishedLogsRunInTheirNCCLEnvironment(t *testing.T) {
	cat, err := Published()
	if err != nil {
		t.Fatal(err)
	}
	byFile := map[string]*PublishedLog{}
	for i := range cat.Logs {
		byFile[cat.Logs[i].File] = &cat.Logs[i]
	}
	p4de := byFile["aws-p4de-allreduce-16xA100.txt"]
	lg, cfg, err := p4de.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.NCCL.Protos, []ops.Protocol{ops.ProtoSimple}) {
		t.Fatalf("p4de: protocols %v, want Simple only", cfg.NCCL.Protos)
	}
	rep, err := Check(lg, topo(t, p4de.Topo), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if !strings.Contains(r.Algo, "/Simple/") {
			t.Errorf("p4de: %d bytes ran %s, not Simple", r.Bytes, r.Algo)
		}
	}
	if cfg.NCCL.Version.String() != "2.20" || !strings.HasPrefix(rep.Rows[0].Algo, "ring/") {
		t.Errorf("p4de: NCCL %v ran %s at %d bytes; want 2.20's ring", cfg.NCCL.Version, rep.Rows[0].Algo, rep.Rows[0].Bytes)
	}
	if _, cfg, err := byFile["oci-oke-allreduce-16xA100.txt"].Parse(); err != nil || cfg.NCCL.Version.String() != "2.26" {
		t.Errorf("OCI: version %v, %v; want 2.26", cfg.NCCL.Version, err)
	}
	for _, bad := range []PublishedLog{
		{NCCLEnv: map[string]string{"NCCL_TUNER_PLUGIN": "libnccl-ofi-tuner.so"}},
		{NCCLEnv: map[string]string{"NCCL_PROTO": "LL256"}},
		{NCCLVersion: "2.16.5"},
		{NCCLVersion: "not stated", NCCLPresumed: "2.16.5"},
		{NCCLVersion: "2.26.6", NCCLPresumed: "2.20.3"},
	} {
		if _, err := bad.Options(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// A log with NCCL's tuning lines says what NCCL ran at each size. Check
// shows it beside each row and counts the sizes where NCCL's tuner, as
// commsim models it, chose the same; AsLogged simulates what NCCL ran
// instead, where the lines agree, and the tuner's choice elsewhere.
func TestCheckReadsWhatNCCLRan(t *testing.T) {
	const info = "gpu01:1:1 [0] NCCL INFO AllReduce: "
	log := "# Collective test starting: all_reduce_perf\n" +
		"#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n" +
		info + "8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n" +
		"       8        2  float  sum  -1   15.00  0.00  0.00  0   15.00  0.00  0.00  0\n" +
		"   16384     4096  float  sum  -1   18.00  0.91  1.59  0   18.00  0.91  1.59  0\n" +
		info + "16384 Bytes -> Algo SYMK proto LL channel{Lo..Hi}={0..0}\n" +
		info + "1048576 Bytes -> Algo TREE proto SIMPLE channel{Lo..Hi}={0..3}\n" +
		" 1048576   262144  float  sum  -1   40.00 26.21 45.88  0   40.00 26.21 45.88  0\n" +
		info + "67108864 Bytes -> Algo NVLS proto SIMPLE channel{Lo..Hi}={0..15}\n" +
		info + "67108864 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..23}\n" +
		"67108864 16777216  float  sum  -1  330.00 203.4 355.9  0  330.00 203.4 355.9  0\n"
	lg, tp := parse(t, log), topo(t, "dgx-h100")
	unread := []calibrate.UnreadLine{{Line: 6, Reason: `algorithm "SYMK" is none commsim models`}}
	rep, err := Check(lg, tp, Config{})
	if err != nil {
		t.Fatal(err)
	}
	tuner, err := nccl.NewTuner(tp, nccl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"ring/LL/1ch", "", "tree/Simple/4ch", "nvls/Simple/16ch (lines disagree)"} {
		if rep.Rows[i].Ran != want {
			t.Errorf("%d bytes: ran %q, want %q", rep.Rows[i].Bytes, rep.Rows[i].Ran, want)
		}
	}
	eight, _ := tuner.Choose(ops.Spec{Op: ops.AllReduce, Algo: "nccl", Ranks: 8, DType: hw.F32, Redop: hw.Sum, Count: 2})
	mib, _ := tuner.Choose(ops.Spec{Op: ops.AllReduce, Algo: "nccl", Ranks: 8, DType: hw.F32, Redop: hw.Sum, Count: 262144})
	if eight.NCCL.Algo != nccl.Ring || eight.NCCL.Protocol != ops.ProtoLL || mib.NCCL.Algo == nccl.Tree {
		t.Fatalf("the tuner's choices moved (%v at 8 B, %v at 1 MiB): the log's lines no longer test agreement and its absence", eight.NCCL, mib.NCCL)
	}
	if want := (Choices{Logged: 2, Agree: 1, Varied: 1, Unread: unread}); !reflect.DeepEqual(rep.Choices, want) {
		t.Errorf("choices %+v, want %+v", rep.Choices, want)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil || !strings.Contains(table.String(), "nccl ran (its log)") ||
		!strings.Contains(table.String(), "tuner chose the same algorithm and protocol at 1 of 2 sizes (1 more whose lines disagree left out)\n"+
			"# NCCL's tuning lines (Bytes -> Algo) that could not be read, left out: 1, the first at line 6: algorithm \"SYMK\" is none commsim models\n") {
		t.Errorf("table (%v):\n%s", err, table.String())
	}

	as, err := Check(lg, tp, Config{AsLogged: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range as.Rows {
		forced := r.Bytes == 1048576
		switch {
		case forced && (r.Algo != "tree/Simple/4ch" || r.PredictedUS == rep.Rows[i].PredictedUS):
			t.Errorf("1 MiB as logged: %+v; want tree/Simple/4ch, not the tuner's %+v", r, rep.Rows[i])
		case !forced && (r.Algo != rep.Rows[i].Algo || r.PredictedUS != rep.Rows[i].PredictedUS):
			t.Errorf("%d bytes as logged: %+v; want the tuner's %+v (the lines agree, say nothing or disagree)", r.Bytes, r, rep.Rows[i])
		}
	}
	if want := (Choices{Logged: 2, Agree: 1, Varied: 1, AsLogged: true, Unread: unread}); !reflect.DeepEqual(as.Choices, want) {
		t.Errorf("choices as logged %+v, want %+v", as.Choices, want)
	}

	if _, err := Check(lg, tp, Config{Algo: "ring", AsLogged: true}); err == nil || !strings.Contains(err.Error(), "with Algo nccl") {
		t.Errorf("AsLogged with ring: %v", err)
	}
	// An A100 has no NVLS: the log did not run on it.
	nvls := strings.Replace(log, "Algo TREE proto SIMPLE channel{Lo..Hi}={0..3}", "Algo NVLS proto SIMPLE channel{Lo..Hi}={0..3}", 1)
	if _, err := Check(parse(t, nvls), topo(t, "dgx-a100"), Config{AsLogged: true}); err == nil ||
		!strings.Contains(err.Error(), "line 8 (1048576 bytes): the log does not fit: NCCL ran nvls/Simple/4ch here, which this fabric cannot") || !errors.Is(err, ErrMismatch) {
		t.Errorf("NVLS logged, checked on an A100: %v", err)
	}
}
