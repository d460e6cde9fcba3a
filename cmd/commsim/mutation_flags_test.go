package main

// Tests written from a mutation-testing review of ncclflags.go, sizes.go,
// duration.go, whatif.go and compare.go: each pins down behaviour a user
// relies on that no other test held (a flag's bounds, a unit's value, a
// refusal, a figure passed on), so that a small slip in it fails a test.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commsim/commsim/sim"
)

// NCCL flags given without --algo nccl are refused, whatever their
// value: a negative --nccl-channels and a --nccl-net-peer-channels too,
// not only those that differ from 0 one way.
func TestNCCLFlagsWithoutAlgoNCCLAreRefused(t *testing.T) {
	for _, flag := range [][]string{{"--nccl-channels", "-1"}, {"--nccl-net-peer-channels", "2"}, {"--nccl-buffsize", "8MiB"}} {
		status, out, errOut := commsim(append([]string{"bench", "--topo", "ring:4", "-e", "8"}, flag...)...)
		if status != 2 || out != "" || !strings.Contains(errOut, "go with --algo nccl") {
			t.Errorf("%q without --algo nccl: status %d, stdout %q, stderr %q; want 2 saying they go with --algo nccl", flag, status, out, errOut)
		}
	}
}

// --nccl-machine's factors run from 1/1000 to 1000, both bounds included.
func TestNCCLMachineFactorBoundsAreInclusive(t *testing.T) {
	for _, m := range []string{"launch=0.001", "hop=1000", "nic=0.001", "channel=1000"} {
		status, _, errOut := commsim("bench", "--topo", "dgx-h100", "--algo", "nccl", "-e", "8", "--timing-only", "--nccl-machine", m)
		if status != 0 {
			t.Errorf("--nccl-machine %s: status %d, stderr %q; want it taken", m, status, errOut)
		}
	}
	for _, m := range []string{"launch=0.000999", "hop=1000.001"} {
		status, _, errOut := commsim("bench", "--topo", "dgx-h100", "--algo", "nccl", "-e", "8", "--timing-only", "--nccl-machine", m)
		if status != 2 || !strings.Contains(errOut, "from 0.001 to 1000") {
			t.Errorf("--nccl-machine %s: status %d, stderr %q; want 2 naming the bounds", m, status, errOut)
		}
	}
}

// Each protocol's factor scales that protocol's runs and no other's: an
// LL128 ring is slowed by ll128=0.5, untouched by ll=0.5 and simple=0.5.
func TestNCCLMachineFactorsScaleTheirOwnProtocol(t *testing.T) {
	timeOf := func(proto, machine string) float64 {
		t.Helper()
		args := []string{"bench", "--topo", "dgx-h100", "--algo", "nccl", "--nccl-algo", "ring", "--nccl-proto", proto,
			"-b", "1MiB", "-e", "1MiB", "--timing-only", "--format", "json"}
		if machine != "" {
			args = append(args, "--nccl-machine", machine)
		}
		status, out, errOut := commsim(args...)
		rows := jsonLines[jsonRow](t, out)
		if status != 0 || len(rows) != 1 || !strings.Contains(rows[0].Algo, "/"+proto+"/") {
			t.Fatalf("%s %s: status %d, stderr %q:\n%s", proto, machine, status, errOut, out)
		}
		return rows[0].TimeUS
	}
	for _, proto := range []string{"LL", "LL128", "Simple"} {
		base := timeOf(proto, "")
		for _, key := range []string{"ll", "ll128", "simple"} {
			got := timeOf(proto, key+"=0.5")
			if own := strings.EqualFold(key, proto); own && !(got > base) || !own && got != base {
				t.Errorf("%s ring: %.4f us with %s=0.5, %.4f us without; want only its own protocol's factor to slow it", proto, got, key, base)
			}
		}
	}
}

// --nccl-channels and --nccl-net-peer-channels take 0 to 64, 64 included.
func TestNCCLChannelFlagsTakeUpTo64(t *testing.T) {
	for _, c := range []struct {
		flag, value string
		ok          bool
	}{
		{"--nccl-channels", "64", true}, {"--nccl-channels", "65", false},
		{"--nccl-net-peer-channels", "64", true}, {"--nccl-net-peer-channels", "65", false},
	} {
		status, _, errOut := commsim("bench", "--topo", "dgx-h100", "--algo", "nccl", "-e", "8", "--timing-only", c.flag, c.value)
		if c.ok && status != 0 || !c.ok && (status != 2 || !strings.Contains(errOut, c.flag+" "+c.value+": want 0")) {
			t.Errorf("%s %s: status %d, stderr %q; want taken %v", c.flag, c.value, status, errOut, c.ok)
		}
	}
}

// A flag and the --nccl-env variable it stands for cannot both be given,
// for every such pair (NCCL_MAX_NCHANNELS alone too, for --nccl-channels).
func TestNCCLFlagAndItsVariableAreRefusedTogether(t *testing.T) {
	for _, c := range []struct{ flag, value, env string }{
		{"--nccl-algo", "ring", "NCCL_ALGO=tree"},
		{"--nccl-proto", "LL", "NCCL_PROTO=LL"},
		{"--nccl-channels", "4", "NCCL_MAX_NCHANNELS=4"},
		{"--nccl-channels", "4", "NCCL_MIN_NCHANNELS=4"},
		{"--nccl-net-peer-channels", "2", "NCCL_NCHANNELS_PER_NET_PEER=2"},
	} {
		name, _, _ := strings.Cut(c.env, "=")
		status, out, errOut := commsim("bench", "--topo", "dgx-h100", "--algo", "nccl", "-e", "8", "--timing-only", c.flag, c.value, "--nccl-env", c.env)
		if status != 2 || out != "" || !strings.Contains(errOut, c.flag+" and --nccl-env "+name+" both set it") {
			t.Errorf("%s with --nccl-env %s: status %d, stderr %q; want 2 refusing both", c.flag, c.env, status, errOut)
		}
	}
}

// --algo nccl predicts NCCL on the simulator; on a real backend it is
// refused. From the command line that check is reached only where the
// backend's driver loads (elsewhere opening the backend fails first), so
// here the sweep is made on sim and then named as on cuda.
func TestAlgoNCCLIsRefusedOnARealBackend(t *testing.T) {
	s := parsedSweep(t, "dgx-h100", "allreduce", "ring", nil)
	s.backend = &backendPlan{name: "cuda", ranks: s.topo.NumGPUs()}
	err := s.useNCCL(ncclFlags{})
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--algo native runs NCCL itself") {
		t.Errorf("useNCCL on cuda: %v; want a usage error pointing to --algo native", err)
	}
}

// calibrate takes from --nccl-machine only channel=: a network factor
// (nic=) is one it fits, and is refused like the others.
func TestCalibrateRefusesANetworkFactor(t *testing.T) {
	status, _, errOut := commsim("calibrate", "--log", filepath.Join(ncclTestdata, "sim-dgx-h100-all_reduce.txt"), "--topo", "dgx-h100", "--nccl-machine", "nic=0.5")
	if status != 2 || !strings.Contains(errOut, "calibrate fits NCCL's machine") {
		t.Errorf("calibrate --nccl-machine nic=0.5: status %d, stderr %q; want 2", status, errOut)
	}
}

// A shipped log's known misses are named only on NCCL's own machine: a
// network scaled by --nccl-machine nic= is not it.
func TestFidelityKnownMissesNeedAnUnscaledNetwork(t *testing.T) {
	skipInRaceRun(t, "a 16-rank log checked on a slowed network; TestFidelityShippedLogKnowsItsFabric checks under it")
	status, out, errOut := commsim("fidelity", "--log", filepath.Join(shippedLogs, "aws-p4de-allreduce-16xA100.txt"), "--format", "json", "--nccl-machine", "nic=0.5")
	var rep struct {
		Misses  []json.RawMessage `json:"known_misses"`
		Machine string            `json:"nccl_machine"`
	}
	if status != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep.Machine != "nic=0.5" {
		t.Fatalf("status %d, stderr %q:\n%s", status, errOut, out)
	}
	if len(rep.Misses) != 0 {
		t.Errorf("known misses named on a machine whose network runs at half speed: %d", len(rep.Misses))
	}
}

// Every unit parseBytes takes has its value: KB, MB, GB and TB are powers
// of ten, KiB … TiB and bare K, M, G, T (either case, as nccl-tests') of
// two.
func TestParseBytesUnitValues(t *testing.T) {
	for in, want := range map[string]int64{
		"1KB": 1e3, "1MB": 1e6, "1GB": 1e9, "1TB": 1e12, "3MB": 3e6, "2TB": 2e12,
		"1KiB": 1 << 10, "1MiB": 1 << 20, "1GiB": 1 << 30, "1TiB": 1 << 40,
		"1K": 1 << 10, "1M": 1 << 20, "1G": 1 << 30, "1T": 1 << 40, "3T": 3 << 40,
		"1k": 1 << 10, "1m": 1 << 20, "1g": 1 << 30, "7B": 7, "1.5MB": 1500000,
	} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

// A geometric sweep rounds each size × factor up before it rounds down to
// whole elements: 20 B × 1.39 is 27.8, which rounds up to 28 (7 floats),
// not down to 27 and then to 24.
func TestSweepRoundsTheProductUp(t *testing.T) {
	rows, _ := benchRecords(t, "--topo", "ring:4", "-b", "20", "-e", "40", "-f", "1.39", "--timing-only")
	var got []int64
	for _, r := range rows {
		got = append(got, r.Bytes)
	}
	if want := []int64{20, 28, 36}; !slices.Equal(got, want) {
		t.Errorf("-b 20 -e 40 -f 1.39: sizes %v, want %v", got, want)
	}
}

// A size with no number says so, whatever its unit.
func TestParseBytesNamesAMissingNumber(t *testing.T) {
	for _, in := range []string{"", " ", "MiB", "k"} {
		if _, err := parseBytes(in); err == nil || !strings.Contains(err.Error(), "has no number") {
			t.Errorf("parseBytes(%q): %v; want it to say the size has no number", in, err)
		}
	}
}

// formatBytes names a size in the largest unit that holds it whole, and
// in bytes where none does: 0 is 0B.
func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1: "1B", 1023: "1023B", 1024: "1KiB", 1536: "1536B", 3 << 20: "3MiB",
		1<<20 + 1024: "1025KiB", 1 << 30: "1GiB", 5 << 40: "5TiB", 5<<40 + 1<<30: "5121GiB", 3 << 50: "3PiB", 7 << 60: "7EiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// A bad -e is named as --max-bytes, the flag given, not as -b's.
func TestBadMaxBytesNamesItsFlag(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "ring:4", "-b", "8", "-e", "12Q")
	if status != 2 || out != "" || !strings.Contains(errOut, "--max-bytes: ") || strings.Contains(errOut, "min-bytes") {
		t.Errorf("-e 12Q: status %d, stderr %q; want 2 naming --max-bytes", status, errOut)
	}
}

// A size whose count does not split evenly over the ranks is estimated at
// every rank's cost even beside a size the simulator mirrors: in a sweep
// of an uneven size and a larger even one, the mirror saves only what it
// saves on the even size alone.
func TestEstimateCountsUnevenSizesInFullBesideMirroredOnes(t *testing.T) {
	s := parsedSweep(t, "switch:8", "allreduce", "ring", nil)
	w := openSimWorld(t, s)
	uneven, even := int64(4*(8*1024+1)), int64(4*8*1024*2)
	seconds := func(w *openedWorld, sizes ...int64) float64 {
		t.Helper()
		s.sizes = sizes
		e, err := s.estimate(w, 1)
		if err != nil {
			t.Fatal(err)
		}
		return e.seconds
	}
	saved := seconds(nil, even) - seconds(w, even)
	if !(saved > 0) {
		t.Fatalf("%d B: the mirror saves %g s; want it mirrored", even, saved)
	}
	both := seconds(nil, uneven, even) - seconds(w, uneven, even)
	if diff := both - saved; diff > 1e-9*saved || diff < -1e-9*saved {
		t.Errorf("%d B and %d B: the mirror saves %g s, want %g (what it saves on %d B alone)", uneven, even, both, saved, even)
	}
}

// A sweep of over 10000 sizes is refused, also one just over.
func TestSweepOfJustOver10000SizesIsRefused(t *testing.T) {
	status, out, errOut := commsim("bench", "--topo", "ring:4", "-b", "8", "-e", "80008", "-i", "8", "--timing-only")
	if status != 2 || out != "" || !strings.Contains(errOut, "has over 10000 sizes") {
		t.Errorf("10001 sizes: status %d, stderr %q; want 2 refusing them", status, errOut)
	}
}

// A refused sweep with data offers --timing-only as a way to make it
// cheaper; one already timing only does not.
func TestRefusalOffersTimingOnlyOnlyWithData(t *testing.T) {
	for _, data := range []bool{false, true} {
		s := parsedSweep(t, "ring:8", "allreduce", "ring", func(bf *benchFlags) { bf.data = data })
		est, err := s.estimate(nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		est.seconds = 2 * maxHostSeconds
		err = est.judge(nil, "sweep")
		if err == nil || strings.HasSuffix(err.Error(), ", or --timing-only") != data {
			t.Errorf("data %v: %v", data, err)
		}
	}
}

// The links a plan's step crosses are those of what rank 0 sends: the
// root of a ring broadcast on ring:8 sends to its neighbour, one link
// away, and receives nothing: its steps cross some links, never over one.
func TestHopsCountWhatRanksSend(t *testing.T) {
	s := parsedSweep(t, "ring:8", "broadcast", "ring", nil)
	spec, _ := s.spec(1 << 20)
	plan, err := s.plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := mostHops(sampledRoutes(s.topo, plan)); !(got > 0 && got <= 1) {
		t.Errorf("ring broadcast from rank 0 on ring:8: %v links a step, want over 0 and at most 1", got)
	}
}

// On the simulator, timing only, each size runs once, unless a trace is
// written, which shows the in-place run too: the estimate counts both.
func TestTracedSweepsAreEstimatedTwice(t *testing.T) {
	s := parsedSweep(t, "ring:512", "allreduce", "direct", func(bf *benchFlags) { bf.maxBytes = "2MiB" })
	w := &openedWorld{cluster: new(sim.Cluster)} // no driver: no mirror
	for _, c := range []struct {
		trace string
		runs  float64
	}{{"", 1}, {filepath.Join(t.TempDir(), "t.json"), 2}} {
		s.trace = c.trace
		var got strings.Builder
		if err := s.checkDuration(w, &got); err != nil {
			t.Fatal(err)
		}
		est, err := s.estimate(nil, c.runs)
		if err != nil {
			t.Fatal(err)
		}
		if want := judged(t, est); want == "" || got.String() != want {
			t.Errorf("trace %q: stderr %q, want %q (%v runs a size)", c.trace, got.String(), want, c.runs)
		}
	}
}

// A baseline of 0 µs (0 bytes) has no relative difference to print: no
// "difference" line, never NaN or Inf.
func TestWhatIfPrintsNoDifferenceFromZero(t *testing.T) {
	status, out, errOut := commsim("what-if", "--topo", "ring:4", "-e", "0", "--timing-only", "--fault", "rank 1 stall 1us")
	if status != 0 || !strings.Contains(out, " of 0B on ring:4 (4 ranks), timing-only\n") || !strings.Contains(out, "baseline            0.000 us") {
		t.Fatalf("status %d, stderr %q:\n%s", status, errOut, out)
	}
	if strings.Contains(out, "difference") || strings.Contains(out, "NaN") || strings.Contains(out, "Inf") {
		t.Errorf("a difference from a 0 µs baseline:\n%s", out)
	}
}

// The text header says how the runs were made: timing only, or with data.
func TestWhatIfHeaderSaysTimingOnlyOrData(t *testing.T) {
	for flag, want := range map[string]string{"--timing-only": ", timing-only\n", "--check": ", with data\n"} {
		status, out, errOut := commsim("what-if", "--topo", "ring:4", "--algo", "ring", "-e", "1KiB", flag, "--fault", "rank 1 slow 50%")
		if first, _, _ := strings.Cut(out, "\n"); status != 0 || !strings.HasSuffix(first+"\n", want) {
			t.Errorf("%s: status %d, stderr %q; want the header to end %q:\n%s", flag, status, errOut, want, out)
		}
	}
}

// With --check, the CSV's wrong column holds each run's count.
func TestWhatIfCSVHasTheWrongCount(t *testing.T) {
	status, out, errOut := commsim("what-if", "--topo", "ring:4", "--algo", "ring", "-e", "1KiB", "--check", "--format", "csv", "--fault", "rank 1 slow 50%")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if status != 0 || len(lines) != 3 {
		t.Fatalf("status %d, stderr %q:\n%s", status, errOut, out)
	}
	for _, line := range lines[1:] {
		if f := strings.Split(line, ","); len(f) != 5 || f[3] != "0" {
			t.Errorf("row %q: want 0 in the wrong column", line)
		}
	}
}

// A training step runs on every GPU of --topo and has no single
// collective: -g, --root, --redop and --dtype are refused with --model.
func TestWhatIfStepRefusesACollectivesFlags(t *testing.T) {
	for _, flag := range [][]string{{"-g", "2"}, {"--root", "1"}, {"--redop", "max"}, {"--dtype", "f16"}} {
		status, out, errOut := commsim(append([]string{"what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", "rank 1 slow 50%"}, flag...)...)
		if status != 2 || out != "" || !strings.Contains(errOut, "goes with a collective") {
			t.Errorf("%q with --model: status %d, stderr %q; want 2 saying it goes with a collective", flag, status, errOut)
		}
	}
}

// A training step's NCCL flags go with --algo nccl, as the step's own
// command (train) has them.
func TestWhatIfStepRefusesNCCLFlagsWithoutAlgoNCCL(t *testing.T) {
	status, out, errOut := commsim("what-if", "--model", "gpt2-small", "--topo", "switch:4", "--algo", "ring", "--nccl-proto", "LL", "--fault", "rank 1 slow 50%")
	if status != 2 || out != "" || !strings.Contains(errOut, "go with --algo nccl") {
		t.Errorf("status %d, stderr %q; want 2 saying the NCCL flags go with --algo nccl", status, errOut)
	}
}

// A fault that slows a training step reads so in every layout: the
// faulted step longer in CSV, a positive difference in the text.
func TestWhatIfStepDifferenceHasItsSign(t *testing.T) {
	args := []string{"what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", "link gpu0-sw0 degrade 10% at 0"}
	status, out, errOut := commsim(append(args, "--format", "csv")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if status != 0 || len(lines) != 3 {
		t.Fatalf("csv: status %d, stderr %q:\n%s", status, errOut, out)
	}
	base, hit := strings.Split(lines[1], ","), strings.Split(lines[2], ",")
	b, _ := strconv.ParseFloat(base[1], 64)
	h, _ := strconv.ParseFloat(hit[1], 64)
	if base[0] != "baseline" || hit[0] != "with faults" || !(h > b) {
		t.Errorf("csv: baseline step %q, faulted %q; want the faulted step longer:\n%s", base[1], hit[1], out)
	}
	status, out, errOut = commsim(args...)
	var diff float64
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "difference" && strings.HasPrefix(f[1], "+") {
			diff, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if status != 0 || !(diff > 0) || math.Abs(diff-(h-b)) > 0.1 {
		t.Errorf("text: status %d, stderr %q; want a difference of %+.1f us:\n%s", status, errOut, h-b, out)
	}
}

// The difference a collective's text prints is the faulted time less the
// baseline's: positive for a fault that slows it, as its JSON times say.
func TestWhatIfDifferenceIsFaultedLessBaseline(t *testing.T) {
	args := []string{"what-if", "--topo", "ring:4,bw=100GB/s,lat=1us", "--algo", "ring", "-e", "1MiB", "--timing-only", "--fault", "link gpu1-gpu2 down at 3us"}
	status, out, errOut := commsim(append(args, "--format", "json")...)
	runs := jsonLines[scenario](t, out)
	if status != 0 || len(runs) != 2 || runs[0].TimeUS == nil || runs[1].TimeUS == nil || !(*runs[1].TimeUS > *runs[0].TimeUS) {
		t.Fatalf("json: status %d, stderr %q; want the faulted run slower:\n%s", status, errOut, out)
	}
	want := *runs[1].TimeUS - *runs[0].TimeUS
	status, out, errOut = commsim(args...)
	var diff float64
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "difference" {
			diff, _ = strconv.ParseFloat(f[1], 64)
		}
	}
	if status != 0 || math.Abs(diff-want) > 0.001 {
		t.Errorf("text: status %d, stderr %q; want a difference of %+.3f us:\n%s", status, errOut, want, out)
	}
}

// A collective that fails without faults fails the what-if before any
// comparison is printed: there is nothing to compare with.
func TestWhatIfFailedBaselineIsTheError(t *testing.T) {
	status, out, errOut := commsim("what-if", "--topo", "switch:4,bw=1e-5B/s", "--algo", "ring", "-e", "64", "--timing-only", "--fault", "rank 1 slow 50%")
	if status != 1 || out != "" || !strings.Contains(errOut, "horizon") || strings.Contains(errOut, "with faults") {
		t.Errorf("status %d, stdout %q, stderr %q; want 1 with the baseline's failure and no comparison", status, out, errOut)
	}
}

// A training step's what-if refuses a format it does not write, as a
// collective's does.
func TestWhatIfStepRefusesAnUnknownFormat(t *testing.T) {
	status, out, errOut := commsim("what-if", "--model", "gpt2-small", "--topo", "switch:4", "--fault", "rank 1 slow 50%", "--format", "xml")
	if status != 2 || out != "" || !strings.Contains(errOut, `unknown format "xml"`) {
		t.Errorf("status %d, stdout %q, stderr %q; want 2 naming the format", status, out, errOut)
	}
}

// NCCL flags given to compare without nccl among --algos are refused.
func TestCompareRefusesNCCLFlagsWithoutNCCL(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "ring:4", "--algos", "ring,rd", "-e", "1KiB", "--timing-only", "--nccl-proto", "LL")
	if status != 2 || out != "" || !strings.Contains(errOut, "go with nccl among --algos") {
		t.Errorf("status %d, stdout %q, stderr %q; want 2 saying they go with nccl among --algos", status, out, errOut)
	}
}

// --plot of a sweep of 0 bytes only is refused before it runs: a chart on
// a logarithmic size axis needs a size above 0.
func TestComparePlotNeedsASizeAbove0(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "x.svg")
	status, out, errOut := commsim("compare", "--topo", "ring:4", "--algos", "ring,rd", "-b", "0", "-e", "0", "--timing-only", "--plot", plot)
	if status != 2 || out != "" || !strings.Contains(errOut, "--plot needs sizes above 0 bytes") {
		t.Errorf("status %d, stdout %q, stderr %q; want 2 refusing the plot", status, out, errOut)
	}
}

// Where algorithms tie (tree and ring take 6 us for 0 bytes on ring:4),
// the best is the first listed, in the records and the crossover line.
func TestCompareTieGoesToTheFirstAlgorithm(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "ring:4", "--algos", "tree,ring", "-b", "0", "-e", "0", "--timing-only", "--format", "json")
	recs := jsonLines[struct {
		Algo   string  `json:"algo"`
		TimeUS float64 `json:"time_us"`
		Best   bool    `json:"best"`
	}](t, out)
	if status != 0 || len(recs) != 2 || recs[0].TimeUS != recs[1].TimeUS {
		t.Fatalf("status %d, stderr %q:\n%s", status, errOut, out)
	}
	if !recs[0].Best || recs[1].Best || !strings.Contains(errOut, "no crossover: tree is fastest") {
		t.Errorf("a tie: best %v/%v, stderr %q; want the first, tree", recs[0].Best, recs[1].Best, errOut)
	}
}

// A comparison's estimate is every algorithm's sweep together: refused as
// too long, it says the sum of their hours, the steps of the plan with the
// most, and offers fewer algorithms before fewer ranks.
func TestCompareEstimateAddsTheAlgorithms(t *testing.T) {
	const iters = 100000
	total, steps := 0.0, 0
	for _, algo := range []string{"ring", "rd"} {
		s := parsedSweep(t, "ring:128", "allreduce", algo, func(bf *benchFlags) {
			bf.minBytes, bf.maxBytes, bf.iters, bf.timingOnly, bf.symmetry = "1MiB", "1MiB", iters, true, false
		})
		est, err := s.estimate(nil, float64(s.runner.Runs()))
		if err != nil {
			t.Fatal(err)
		}
		total, steps = total+est.seconds, max(steps, est.steps)
	}
	if total < 2*maxHostSeconds {
		t.Fatalf("the comparison is estimated at %g s: want one refused", total)
	}
	status, out, errOut := commsim("compare", "--topo", "ring:128", "--algos", "ring,rd", "-b", "1MiB", "-e", "1MiB", "-n", fmt.Sprint(iters), "--timing-only", "--symmetry=false")
	want := fmt.Sprintf("the comparison would take about %.1f hours (1 size of 2 algorithms, up to %d plan steps on 128 ranks", total/3600, steps)
	if status != 2 || out != "" || !strings.Contains(errOut, want) || !strings.Contains(errOut, "use fewer algorithms (--algos), fewer ranks (-g), fewer runs (-n, -m)") {
		t.Errorf("status %d, stderr %q; want 2 saying %q and offering fewer algorithms first", status, errOut, want)
	}
}

// compare notes, as bench does, that a rooted collective's sizes are
// each timed as one run alone unless -n is given.
func TestCompareNotesLoneRuns(t *testing.T) {
	for _, n := range []string{"", "3"} {
		args := []string{"compare", "--topo", "ring:4", "--op", "broadcast", "--algos", "ring,tree", "-b", "1KiB", "-e", "1KiB", "--timing-only"}
		if n != "" {
			args = append(args, "-n", n)
		}
		status, _, errOut := commsim(args...)
		if noted := strings.Contains(errOut, "each size is timed as one run alone"); status != 0 || noted != (n == "") {
			t.Errorf("-n %q: status %d, stderr %q; want the note only without -n", n, status, errOut)
		}
	}
}

// A collective that does not reduce has no reduction operator: compare's
// JSON and CSV say none, as bench's do.
func TestCompareRecordsNoRedopWhereNoneApplies(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "ring:4", "--op", "allgather", "--algos", "ring,rd", "-b", "1KiB", "-e", "1KiB", "--timing-only", "--format", "json")
	recs := jsonLines[struct {
		Redop string `json:"redop"`
	}](t, out)
	if status != 0 || len(recs) != 2 || recs[0].Redop != "none" || recs[1].Redop != "none" {
		t.Errorf("status %d, stderr %q:\n%s\nwant redop none", status, errOut, out)
	}
}

// --check's verdict names each algorithm with wrong values, and its own
// count, not another's.
func TestCompareVerdictNamesEachAlgorithmsWrongValues(t *testing.T) {
	c := &comparison{s: &sweep{check: true}, names: []string{"ring", "rd", "rhd"}}
	rows := []cmpRow{
		{res: []result{{wrong: 0}, {wrong: 2}, {wrong: -1}}},
		{res: []result{{wrong: 0}, {wrong: 1}, {wrong: 4}}},
	}
	var b strings.Builder
	c.writeVerdict(&b, rows)
	if want := "# Out of bounds values : 7 FAILED (rd 3, rhd 4)\n"; b.String() != want {
		t.Errorf("verdict %q, want %q", b.String(), want)
	}
}

// The text layout says, as the table does, how many runs were mirrored.
func TestCompareTextSaysWhatWasMirrored(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "switch:8", "--algos", "ring,rd", "-b", "1KiB", "-e", "4KiB", "--timing-only")
	if status != 0 || !strings.Contains(out, "\n# 6 of 6 runs were timed by simulating only the ranks that stand for all") {
		t.Errorf("status %d, stderr %q; want the mirrored runs said:\n%s", status, errOut, out)
	}
}

// An empty name in --algos is refused as such, not as an unknown
// algorithm "".
func TestCompareNamesAnEmptyAlgorithm(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "ring:4", "--algos", "ring,,rd", "-e", "1KiB", "--timing-only")
	if status != 2 || out != "" || !strings.Contains(errOut, `--algos "ring,,rd" has an empty name`) {
		t.Errorf("status %d, stderr %q; want 2 saying --algos has an empty name", status, errOut)
	}
}

// A crossover between the first two sizes is named like any other.
func TestCompareNamesACrossoverAtTheFirstStep(t *testing.T) {
	status, out, errOut := commsim("compare", "--topo", "switch:8", "--algos", "ring,rd", "-b", "1MiB", "-e", "2MiB", "--timing-only")
	if status != 0 || !strings.Contains(out, "\n# crossover: ring overtakes rd between 1MiB and 2MiB\n") {
		t.Errorf("status %d, stderr %q; want ring overtaking rd between 1MiB and 2MiB:\n%s", status, errOut, out)
	}
}

// compare says on stderr which plot it wrote.
func TestComparePlotSaysWhatItWrote(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "x.svg")
	status, _, errOut := commsim("compare", "--topo", "ring:4", "--algos", "ring,rd", "-b", "1KiB", "-e", "4KiB", "--timing-only", "--plot", plot)
	if status != 0 || !strings.Contains(errOut, "commsim: wrote "+plot+"\n") {
		t.Errorf("status %d, stderr %q; want it to say it wrote %s", status, errOut, plot)
	}
}
