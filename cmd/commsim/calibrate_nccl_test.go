package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// Two nodes of four GPUs whose NICs, at half their rate, are slower than
// NCCL's ring channels there but not than its tree channels; with
// NCCL_PROTO=Simple, trees run the middle sizes and rings the large ones
// (their links within a node, 70 GB/s, let NCCL's search raise a tree
// channel's speed only so far).
const (
	calNCCLTopo  = "cluster:2x4,bw=70GB/s,nicbw=20GB/s"
	calNCCLProto = "Simple"
)

// machineRows simulates an all-reduce from 1 KiB to 1 GiB (×8) as NCCL's
// tuner (Simple only) chooses it on calNCCLTopo, run with machine m and
// the network links ×nic: the rows of an nccl-tests log.
func machineRows(t *testing.T, m nccl.Machine, nic float64) []logRow {
	t.Helper()
	base, err := topology.Resolve(calNCCLTopo)
	if err != nil {
		t.Fatal(err)
	}
	links := slices.Clone(base.Links)
	for e := range links {
		if base.EdgeClass(2*e) == topology.ClassNet {
			links[e].BW *= nic
		}
	}
	truth, err := topology.New("truth", base.Nodes, links)
	if err != nil {
		t.Fatal(err)
	}
	tuner, err := nccl.NewTuner(base, nccl.Options{Protos: []ops.Protocol{ops.ProtoSimple}, Machine: m})
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.NewCluster(truth, sim.Config{TimingOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	exec := simexec.NewExecutor(c)
	var r verify.Runner
	defer r.Free()
	var rows []logRow
	for b := int64(1 << 10); b <= 1<<30; b *= 8 {
		spec, _ := verify.SpecForSize(ops.Spec{Op: ops.AllReduce, Ranks: base.NumGPUs(), DType: hw.F32, Redop: hw.Sum}, b)
		plan, _, err := tuner.Plan(spec)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Run(exec, c.World(), plan, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		us := res.Seconds * 1e6
		rows = append(rows, logRow{b, spec.Count, us, us})
	}
	return rows
}

// machineLogFile writes machineRows as an nccl-tests table.
func machineLogFile(t *testing.T, m nccl.Machine, nic float64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "all_reduce.txt")
	st := logStyle{op: "allreduce", test: "all_reduce_perf", typ: "float", redop: "sum", ranks: 8}
	rows := machineRows(t, m, nic)
	writeLog(t, path, func(w io.Writer) { writeNCCLTable(w, st, rows) })
	return path
}

var calNCCLTruth = nccl.Machine{Launch: 1.7, Hop: 0.6, Bandwidth: [3]float64{1, 1, 0.8}}

// A log made with a hop latency past the fit's bound (×0.01) fits with a
// latency factor at its bound (here the launch, ×0.05: on this fabric
// the two trade), and the report names it, in JSON and in the table,
// rather than pass the bound off as a measurement.
func TestCalibrateNCCLNamesAFactorAtItsBound(t *testing.T) {
	if testing.Short() {
		t.Skip("a whole fit, twice; the race run (-short) would take over a minute on it, and TestCalibrateNCCLTable fits under it")
	}
	log := machineLogFile(t, nccl.Machine{Launch: 1.7, Hop: 0.01, Bandwidth: [3]float64{1, 1, 0.8}}, 0.5)
	rep, _ := calJSON(t, "--log", log, "--topo", calNCCLTopo, "--nccl-proto", calNCCLProto)
	n := rep.NCCL
	if n == nil || len(n.AtBound) == 0 {
		t.Fatalf("report %+v: want a factor named at its bound", n)
	}
	for _, q := range n.AtBound {
		if v := map[string]float64{"launch": n.Machine.Launch, "hop": n.Machine.Hop}[q]; !near(v, 0.04979, 0.001) {
			t.Errorf("%s ×%g named at its bound, want a latency at ×0.04979", q, v)
		}
	}
	status, out, errOut := commsim("calibrate", "--log", log, "--topo", calNCCLTopo, "--nccl-proto", calNCCLProto)
	if want := "at most or at least): " + strings.Join(n.AtBound, ", ") + "\n"; status != 0 || !strings.Contains(out, "#   at the fit's bound, ×0.05 or ×20 (") || !strings.Contains(out, want) {
		t.Errorf("status %d, stderr %q, table:\n%s\nwant a line ending %q", status, errOut, out, want)
	}
}

// calibrate --algo nccl (the default) finds the machine a log was made
// with, reports the fit on every other size and its error on the rest,
// and writes a fabric with the network links scaled.
func TestCalibrateNCCLRecoversMachine(t *testing.T) {
	log := machineLogFile(t, calNCCLTruth, 0.5)
	out := filepath.Join(t.TempDir(), "fitted.yaml")
	rep, errOut := calJSON(t, "--log", log, "--topo", calNCCLTopo, "--nccl-proto", calNCCLProto, "--out", out)
	n := rep.NCCL
	if n == nil || rep.Algo != "nccl" || rep.LatencyScale != 0 || errOut != "" {
		t.Fatalf("report %+v, stderr %q: want NCCL's fit", rep, errOut)
	}
	m := n.Machine
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"launch", m.Launch, 1.7}, {"hop", m.Hop, 0.6}, {"Simple", m.Simple, 0.8}, {"NIC", m.NICScale, 0.5}, {"LL", m.LL, 1}, {"LL128", m.LL128, 1}} {
		if !near(c.got, c.want, 0.03) {
			t.Errorf("%s ×%.4f, want ×%.4g", c.name, c.got, c.want)
		}
	}
	if want := []string{"launch", "hop", "Simple bandwidth", "NIC bandwidth"}; !slices.Equal(n.Params, want) || len(n.Undetermined) != 0 || n.AtBound == nil || len(n.AtBound) != 0 {
		t.Errorf("params %q, undetermined %q, at a bound %q; want %q, none and none", n.Params, n.Undetermined, n.AtBound, want)
	}
	if n.InSample.Sizes != 7 || n.InSample.Max > 0.005 || n.HeldOut == nil || n.HeldOut.FittedSizes != 4 || n.HeldOut.Sizes != 3 || n.HeldOut.Max > 0.01 {
		t.Errorf("in sample %+v, held out %+v: want 7 sizes within 0.5%%, 3 held out within 1%%", n.InSample, n.HeldOut)
	}
	for i, z := range rep.Sizes {
		if (z.HeldOutRelError != nil) != (i%2 == 1) || z.Algo == "" {
			t.Errorf("size %d (%d B): algo %q, held-out error %v: want one on the odd sizes alone", i, z.Bytes, z.Algo, z.HeldOutRelError)
		}
	}
	// The fitted fabric: the network's links at half their bandwidth, the
	// others as they were.
	if status, msg, errOut := commsim("topo", "validate", out); status != 0 {
		t.Fatalf("validate: %d %s %s", status, msg, errOut)
	}
	fitted, err := topology.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := topology.Resolve(calNCCLTopo)
	for e, l := range fitted.Links {
		want := base.Links[e].BW
		if base.EdgeClass(2*e) == topology.ClassNet {
			want *= m.NICScale
		}
		if !near(l.BW, want, 1e-3) {
			t.Errorf("link %d: %g B/s, want %g", e, l.BW, want)
		}
	}
	if len(rep.Links) != 2 { // gpu-nic and nic-switch
		t.Errorf("changed links %+v", rep.Links)
	}
}

func TestCalibrateNCCLTable(t *testing.T) {
	log := machineLogFile(t, calNCCLTruth, 0.5)
	status, out, errOut := commsim("calibrate", "--log", log, "--topo", calNCCLTopo, "--nccl-proto", calNCCLProto)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	for _, want := range []string{"as NCCL 2.30's tuner chooses per size (--algo nccl)", "# fit: launch ×1.", "hop ×0.6", "NIC bandwidth ×",
		"# machine: nccl.Machine{Launch: 1.", "# in-sample |error|: median", "# held out: fitted on 4 sizes", "predicting the 3 others",
		"held-out(%)", "(fitted)", "tree/Simple/", "ring/Simple/6ch", "nic-switch (8 links): bw 20GB/s → "} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	status, csv, errOut := commsim("calibrate", "--log", log, "--topo", calNCCLTopo, "--nccl-proto", calNCCLProto, "--format", "csv")
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if status != 0 || len(lines) != 8 || !strings.HasPrefix(lines[0], "bytes,measured_us,fitted_us,rel_error,held_out_rel_error,algo,launch,hop") {
		t.Errorf("csv: status %d, %d lines, header %q, stderr %q", status, len(lines), lines[0], errOut)
	}
}

// NCCL's own lines in a log (NCCL_DEBUG=INFO) set the environment the fit
// runs in, as --nccl-proto would (and nccl-tests' nccl-library=22703
// header line, its release), and the report says so.
func TestCalibrateNCCLTakesTheLogsEnvironment(t *testing.T) {
	log := machineLogFile(t, calNCCLTruth, 0.5)
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	info := "node1:1:1 [0] NCCL INFO NCCL_PROTO set by environment to " + calNCCLProto + "\n"
	if err := os.WriteFile(log, append([]byte(info), data...), 0o644); err != nil {
		t.Fatal(err)
	}
	status, out, errOut := commsim("calibrate", "--log", log, "--topo", calNCCLTopo)
	for _, want := range []string{"# NCCL's tuner runs in the environment the log states: NCCL 2.27.3, NCCL_PROTO=Simple\n", "--nccl-version 2.27 --nccl-proto Simple --nccl-machine", "# fit: launch ×1."} {
		if status != 0 || !strings.Contains(out, want) {
			t.Errorf("status %d, stderr %q; table lacks %q:\n%s", status, errOut, want, out)
		}
	}
}

// A log commsim ships knows its fabric and collective.
func TestCalibrateNCCLShippedLog(t *testing.T) {
	rep, _ := calJSON(t, "--log", "../../fidelity/nccl-logs/vultr-b200-sendrecv-8xB200.txt")
	if rep.Topology != "hgx-b200" || rep.Op != "sendrecv" || rep.Ranks != 8 || rep.NCCL == nil || rep.NCCL.HeldOut == nil || len(rep.Sizes) < 20 {
		t.Errorf("topology %q, op %q, %d ranks, %d sizes, fit %+v", rep.Topology, rep.Op, rep.Ranks, len(rep.Sizes), rep.NCCL)
	}
}

func TestCalibrateNCCLErrorsExit2(t *testing.T) {
	hdr := "# Collective test starting: all_reduce_perf\n#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"
	two := hdr + "  1024  256  float  sum  -1  20.00  0.05  0.09  0  20.00  0.05  0.09  0\n" +
		"  2048  512  float  sum  -1  21.00  0.10  0.17  0  21.00  0.10  0.17  0\n"
	dir := t.TempDir()
	path := filepath.Join(dir, "two.txt")
	if err := os.WriteFile(path, []byte(two), 0o644); err != nil {
		t.Fatal(err)
	}
	bare := strings.TrimPrefix(two, "# Collective test starting: all_reduce_perf\n")
	bpath := filepath.Join(dir, "bare.txt")
	if err := os.WriteFile(bpath, []byte(bare), 0o644); err != nil {
		t.Fatal(err)
	}
	ar := filepath.Join(ncclTestdata, "sim-dgx-h100-all_reduce.txt")
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"too few sizes":  {[]string{"--log", path, "--topo", "dgx-h100"}, "the fit of 3 parameters (launch, hop, LL bandwidth) needs at least 3"},
		"barrier":        {[]string{"--log", bpath, "--topo", "dgx-h100", "--op", "barrier"}, "--algo nccl plans"},
		"nccl flag":      {[]string{"--log", ar, "--topo", "dgx-h100", "--algo", "ring", "--nccl-proto", "LL"}, "go with --algo nccl"},
		"bad nccl proto": {[]string{"--log", ar, "--topo", "dgx-h100", "--nccl-proto", "LL64"}, "--nccl-proto"},
		"no topo":        {[]string{"--log", withoutDevices(t, ar)}, "it names no GPUs"},
		"as logged":      {[]string{"--log", ar, "--topo", "dgx-h100", "--algo", "ring", "--as-logged"}, "--as-logged fits what NCCL ran, with --algo nccl"},
		"nothing logged": {[]string{"--log", ar, "--topo", "dgx-h100", "--as-logged"}, "does not say what NCCL ran (no NCCL_DEBUG=INFO lines"},
	} {
		status, out, errOut := commsim(append([]string{"calibrate"}, c.args...)...)
		if status != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: status %d, stdout %q, stderr %q; want 2 and one line with %q", name, status, out, errOut, c.want)
		}
	}
}

// With --as-logged, the fit runs at each size what the log's NCCL tuning
// lines say NCCL ran, not the tuner's guess, and says so; sizes the lines
// leave out (or that only a line commsim cannot read names), or give two
// answers for, keep the tuner's choice, with a warning.
func TestCalibrateNCCLAsLogged(t *testing.T) {
	skipInRaceRun(t, "a fit at eight sizes, three times; TestCalibrateNCCLTable fits under it")
	var log strings.Builder
	log.WriteString("#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n")
	for i, b := range []int64{8, 1024, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20} {
		proto, hi := "LL", 23
		switch {
		case b < 64<<10:
			hi = 0
		case b >= 64<<20:
			proto = "SIMPLE"
		case b >= 4<<20:
			proto = "LL128"
		}
		tuning := fmt.Sprintf("gpu1:9:9 [0] NCCL INFO AllReduce: %d Bytes -> Algo RING proto %s channel{Lo..Hi}={0..%d}\n", b, proto, hi)
		if i == 0 {
			// Nothing commsim can read said of 8 bytes.
			tuning = "gpu1:9:9 [0] NCCL INFO AllReduce: 8 Bytes -> Algo SYMK proto LL channel{Lo..Hi}={0..0}\n"
		}
		inPlace := tuning
		if b == 65536 { // out of place and in place disagree
			inPlace = strings.Replace(tuning, "Algo RING", "Algo TREE", 1)
		}
		us := 14 + float64(b)/2.2e5
		fmt.Fprintf(&log, "  %d  %d  float  sum  -1%s  %.2f  0  0  0%s  %.2f  0  0  0\n", b, b/4, tuning, us, inPlace, us)
	}
	path := filepath.Join(t.TempDir(), "tuning.txt")
	if err := os.WriteFile(path, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"calibrate", "--log", path, "--topo", "dgx-h100", "--op", "allreduce"}
	status, out, errOut := commsim(append(args, "--as-logged", "--format", "json")...)
	var rep calReport
	if err := json.Unmarshal([]byte(out), &rep); status != 0 || err != nil || rep.NCCL == nil || rep.NCCL.AsLogged != 6 || len(rep.Sizes) != 8 {
		t.Fatalf("status %d, %v, %+v; stderr %s", status, err, rep, errOut)
	}
	for _, z := range rep.Sizes[1:] {
		if z.Bytes == 65536 {
			continue
		}
		if !strings.HasPrefix(z.Algo, "ring/") || z.Bytes >= 1<<20 && !strings.HasSuffix(z.Algo, "/24ch") {
			t.Errorf("%d bytes ran %s; want the log's ring", z.Bytes, z.Algo)
		}
	}
	if !strings.Contains(errOut, "--as-logged: the log says what NCCL ran at 6 of the 8 sizes fitted") ||
		!strings.Contains(errOut, `--as-logged: NCCL's tuning lines (Bytes -> Algo) that could not be read, left out: 2, the first at line 2: algorithm "SYMK" is none commsim models`) {
		t.Errorf("no warning of the size the lines leave out, or of the lines not read: %s", errOut)
	}
	_, out, _ = commsim(append(args, "--as-logged")...)
	if !strings.HasPrefix(out, "# commsim calibrate: allreduce as the log says NCCL ran it at 6 of 8 sizes, the others as NCCL 2.30's tuner chooses (--algo nccl --as-logged)") {
		t.Errorf("table:\n%s", out)
	}
	// Without the flag, NCCL's tuner runs NVLS for the large sizes.
	_, out, _ = commsim(append(args, "--format", "json")...)
	var guessed calReport
	if err := json.Unmarshal([]byte(out), &guessed); err != nil || guessed.NCCL.AsLogged != 0 || !strings.HasPrefix(guessed.Sizes[7].Algo, "nvls/") {
		t.Errorf("the tuner's choice: %v, %+v", err, guessed.Sizes)
	}
}

// What calibrate prints for --nccl-machine predicts, in bench, the times
// it fitted: the machine scales the plans, nic the network links, and
// NCCL's tuner still chooses on the fabric as given.
func TestBenchWithCalibratedMachine(t *testing.T) {
	log := machineLogFile(t, calNCCLTruth, 0.5)
	rep, _ := calJSON(t, "--log", log, "--topo", calNCCLTopo, "--nccl-proto", calNCCLProto)
	machine := rep.NCCL.Machine.flag()
	if !strings.Contains(machine, ",nic=0.5") && !strings.Contains(machine, ",nic=0.49") {
		t.Fatalf("--nccl-machine %s: want the network scaled", machine)
	}
	status, out, errOut := commsim("bench", "--topo", calNCCLTopo, "--op", "allreduce", "--algo", "nccl", "--nccl-proto", calNCCLProto,
		"--nccl-machine", machine, "-b", "1KiB", "-e", "1GiB", "-f", "8", "--timing-only", "--format", "json")
	if status != 0 {
		t.Fatalf("bench --nccl-machine %s: status %d: %s", machine, status, errOut)
	}
	rows := jsonLines[jsonRow](t, out)
	if len(rows) != len(rep.Sizes) {
		t.Fatalf("bench gave %d sizes, calibrate %d", len(rows), len(rep.Sizes))
	}
	for i, row := range rows {
		z := rep.Sizes[i]
		if row.Bytes != z.Bytes || row.Algo != z.Algo || !near(row.TimeUS, z.FittedUS, 1e-9) {
			t.Errorf("%d B: bench %s %.4f µs, calibrate fitted %s %.4f µs", row.Bytes, row.Algo, row.TimeUS, z.Algo, z.FittedUS)
		}
	}
}

func TestNCCLMachineFlagErrorsExit2(t *testing.T) {
	for _, c := range []struct{ machine, want string }{
		{"launch", "want key=factor"},
		{"launch=0", "want a factor from 0.001 to 1000"},
		{"hop=-1", "want a factor from 0.001 to 1000"},
		{"simple=inf", "want a factor from 0.001 to 1000"},
		{"hop=1e300", "want a factor from 0.001 to 1000"},
		{"nic=1e-300", "want a factor from 0.001 to 1000"},
		{"launch=1,launch=2", "launch given twice"},
		{"speed=2", `unknown factor "speed"`},
		{"channel=0", "want a rate in GB/s (or arch, or none) from 0.001 to 1000"},
		{"channel=archx", "want a rate in GB/s (or arch, or none)"},
		{"channel=arch,channel=20", "channel given twice"},
		{"channel=20,channel=arch", "channel given twice"},
		{"channel=none,channel=arch", "channel given twice"},
	} {
		status, out, errOut := commsim("bench", "--topo", "dgx-h100", "--algo", "nccl", "--nccl-machine", c.machine, "-b", "1KiB", "-e", "1KiB", "--timing-only")
		if status != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("--nccl-machine %s: status %d, stdout %q, stderr %q; want 2 and one line with %q", c.machine, status, out, errOut, c.want)
		}
	}
	status, _, errOut := commsim("bench", "--topo", "dgx-h100", "--algo", "ring", "--nccl-machine", "launch=2", "-b", "1KiB", "-e", "1KiB", "--timing-only")
	if status != 2 || !strings.Contains(errOut, "go with --algo nccl") {
		t.Errorf("--nccl-machine without nccl: status %d, stderr %q", status, errOut)
	}
	status, _, errOut = commsim("calibrate", "--log", filepath.Join(ncclTestdata, "sim-dgx-h100-all_reduce.txt"), "--topo", "dgx-h100", "--nccl-machine", "launch=2")
	if status != 2 || !strings.Contains(errOut, "calibrate fits NCCL's machine") {
		t.Errorf("calibrate --nccl-machine: status %d, stderr %q", status, errOut)
	}
}

// A shipped log is calibrated in its run's NCCL environment (p4de's
// NCCL_PROTO=Simple, and its presumed NCCL 2.20, whose tuner runs rings
// at these sizes), also with a channel rate given (--nccl-machine says
// how the machine runs, not what NCCL chooses), and the command the
// report gives to predict with the fit sets it too, reproducing the
// fitted times.
func TestCalibrateShippedLogInItsNCCLEnvironment(t *testing.T) {
	for _, extra := range [][]string{nil, {"--nccl-machine", "channel=none"}} {
		args := append([]string{"calibrate", "--log", "../../fidelity/nccl-logs/aws-p4de-allreduce-16xA100.txt", "-b", "8", "-e", "256"}, extra...)
		status, out, errOut := commsim(args...)
		if status != 0 {
			t.Fatalf("%v: status %d: %s", extra, status, errOut)
		}
		cmd := predictsFittedTimes(t, out, "-b", "8", "-e", "256")
		if !strings.Contains(cmd, "--nccl-version 2.20 --nccl-proto Simple ") || strings.Count(out, "ring/Simple/1ch") != 6 {
			t.Fatalf("%v: report:\n%s", extra, out)
		}
	}
}

// calibrate takes a channel rate (--nccl-machine channel=, which it does
// not fit) and holds it: the fit differs from one with the default rate
// (measured on the GPUs), the command it gives to predict carries it and
// reproduces the fitted times; so with channel=none, no rate; a factor
// beside it is refused.
func TestCalibrateHoldsAGivenChannelRate(t *testing.T) {
	args := []string{"calibrate", "--log", "../../fidelity/nccl-logs/vultr-b200-sendrecv-8xB200.txt", "-b", "1MiB", "-e", "256MiB"}
	_, byDefault, _ := commsim(args...)
	fit := func(out string) string { l, _, _ := strings.Cut(out[strings.Index(out, "# fit: "):], "\n"); return l }
	for _, channel := range []string{"channel=15", "channel=none"} {
		status, held, errOut := commsim(append(args, "--nccl-machine", channel)...)
		if status != 0 {
			t.Fatalf("%s: status %d: %s", channel, status, errOut)
		}
		if cmd := predictsFittedTimes(t, held, "-b", "1MiB", "-e", "256MiB"); !strings.Contains(cmd, ","+channel) {
			t.Errorf("the command to predict with does not hold %s: %s", channel, cmd)
		}
		if fit(held) == fit(byDefault) {
			t.Errorf("the same fit with %s and by default: %s", channel, fit(held))
		}
	}
	status, _, errOut := commsim(append(args, "--nccl-machine", "channel=20,launch=2")...)
	if status != 2 || !strings.Contains(errOut, "gives calibrate only channel=") {
		t.Errorf("a factor beside the channel rate: status %d, stderr %q", status, errOut)
	}
}

// predictsFittedTimes runs the command a calibrate report gives to
// predict with its fit (with bench's extra flags) and checks that it
// reproduces the fitted times; it returns the command.
func predictsFittedTimes(t *testing.T, out string, extra ...string) string {
	t.Helper()
	_, cmd, ok := strings.Cut(out, "to predict with it: commsim ")
	cmd, _, _ = strings.Cut(cmd, "\n")
	if !ok {
		t.Fatalf("no command to predict with in:\n%s", out)
	}
	var fitted []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 6 && !strings.HasPrefix(l, "#") && f[0] != "size(B)" {
			fitted = append(fitted, f[2])
		}
	}
	status, bench, errOut := commsim(append(append(strings.Fields(cmd), extra...), "--format", "csv")...)
	if status != 0 {
		t.Fatalf("%s: status %d: %s", cmd, status, errOut)
	}
	rows, err := csv.NewReader(strings.NewReader(bench)).ReadAll()
	if err != nil || len(rows) != len(fitted)+1 || rows[0][9] != "time_us" {
		t.Fatalf("%v: %d rows against %d fitted sizes:\n%s", err, len(rows)-1, len(fitted), bench)
	}
	for i, row := range rows[1:] {
		us, _ := strconv.ParseFloat(row[9], 64)
		want, _ := strconv.ParseFloat(fitted[i], 64)
		if math.Abs(us-want) > 0.006 {
			t.Errorf("size %d: bench %.3f us, the fit %.2f us", i, us, want)
		}
	}
	return cmd
}

// A broadcast timed as bench -n 5 times it (five runs back to back, which
// overlap) fits back to its own fabric: calibrate times each size as the
// log's -n runs, as it does with NCCL's machine and with link scales.
func TestCalibrateTimesARootedLogsRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bcast.csv")
	for _, algo := range []string{"nccl", "ring"} {
		status, out, errOut := commsim("bench", "--topo", "ring:8", "--op", "broadcast", "-n", "5", "--algo", algo, "-b", "64KiB", "-e", "16MiB", "-f", "4", "--format", "csv")
		if status != 0 || os.WriteFile(path, []byte(out), 0o644) != nil {
			t.Fatalf("bench --algo %s: status %d: %s", algo, status, errOut)
		}
		status, out, errOut = commsim("calibrate", "--log", path, "--topo", "ring:8", "--algo", algo, "--format", "json")
		var rep calReport
		if err := json.Unmarshal([]byte(out), &rep); status != 0 || err != nil || rep.MaxRelError > 1e-6 {
			t.Errorf("--algo %s: status %d, %v, max error %v: %s%s", algo, status, err, rep.MaxRelError, out, errOut)
		}
		// Two scales fit one run's times to five's within 0.01% (3.18 ×
		// the bandwidth): the fabric's own are 1.
		if algo == "ring" && (math.Abs(rep.LatencyScale-1) > 1e-6 || math.Abs(rep.BWScale-1) > 1e-6) {
			t.Errorf("--algo ring: fitted latency ×%v, bandwidth ×%v, want 1", rep.LatencyScale, rep.BWScale)
		}
	}
}

// --as-logged with a log whose NCCL ran an algorithm the fabric cannot
// (NVLS on a ring, which has no NVLink switch) is the log's fault, not the
// simulator's: a usage error naming the row, its size and why.
func TestCalibrateAsLoggedAlgorithmTheFabricCannotRun(t *testing.T) {
	var log strings.Builder
	log.WriteString("#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n")
	for _, b := range []int64{1024, 65536, 1 << 20, 4 << 20, 16 << 20, 64 << 20} {
		fmt.Fprintf(&log, "gpu1:9:9 [0] NCCL INFO AllReduce: %d Bytes -> Algo NVLS proto SIMPLE channel{Lo..Hi}={0..15}\n", b)
		us := 14 + float64(b)/2.2e5
		fmt.Fprintf(&log, "  %d  %d  float  sum  -1  %.2f  0  0  0  %.2f  0  0  0\n", b, b/4, us, us)
	}
	path := filepath.Join(t.TempDir(), "nvls.txt")
	if err := os.WriteFile(path, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	status, _, errOut := commsim("calibrate", "--log", path, "--topo", "ring:8", "--op", "allreduce", "--as-logged")
	if status != 2 || !strings.HasPrefix(errOut, "commsim: "+path+":3 (1024 bytes): NCCL ran nvls/Simple/16ch here") || !strings.Contains(errOut, "no NVLS") {
		t.Errorf("status %d, stderr %q; want 2, naming line 3, its size and the missing NVLS", status, errOut)
	}
}
