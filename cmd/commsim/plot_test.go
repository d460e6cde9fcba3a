package main

import (
	"bytes"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// tickLabels returns the labelled ticks of a marker.
func tickLabels(m plot.Ticker, min, max float64) []string {
	var out []string
	for _, t := range m.Ticks(min, max) {
		if t.Label != "" {
			out = append(out, t.Label)
		}
	}
	return out
}

func TestByteTicksLabelPowersOf1024AndFitAPanel(t *testing.T) {
	cases := []struct {
		min, max float64
		want     []string
	}{
		{8, 1 << 30, []string{"1KiB", "1MiB", "1GiB"}},                 // 27 doublings: every 10th
		{8, 4 << 20, []string{"32B", "1KiB", "32KiB", "1MiB"}},         // 19: every 5th
		{1 << 10, 1 << 16, []string{"1KiB", "4KiB", "16KiB", "64KiB"}}, // 6: every 2nd
		{1 << 20, 8 << 20, []string{"1MiB", "2MiB", "4MiB", "8MiB"}},   // 3: all
		{100, 120, []string{"100B", "120B"}},                           // no power of two: the ends
		{3 << 30, 3 << 30, []string{"3GiB", "3GiB"}},                   // one size, no power of two
		{1 << 20, 1 << 20, []string{"1MiB"}},                           // one size
	}
	for _, c := range cases {
		got := tickLabels(byteTicks{}, c.min, c.max)
		if !slices.Equal(got, c.want) {
			t.Errorf("%g..%g: labels %q, want %q", c.min, c.max, got, c.want)
		}
		if len(got) > 5 {
			t.Errorf("%g..%g: %d labels crowd a panel", c.min, c.max, len(got))
		}
	}
}

func TestDecadeTicksLabelTheTimeAxis(t *testing.T) {
	if got, want := tickLabels(decadeTicks{}, 4, 200), []string{"5", "10", "20", "50", "100", "200"}; !slices.Equal(got, want) {
		t.Errorf("4..200 µs: %q, want %q", got, want)
	}
	if got, want := tickLabels(decadeTicks{}, 0.5, 2e6), []string{"1", "10", "100", "1000", "10000", "100000", "1000000"}; !slices.Equal(got, want) {
		t.Errorf("0.5..2e6 µs: %q, want %q", got, want)
	}
	if got, want := tickLabels(decadeTicks{}, 20.6, 46), []string{"30", "40"}; !slices.Equal(got, want) {
		t.Errorf("20.6..46 µs (one size): %q, want %q", got, want)
	}
	if got := tickLabels(plainTicks{}, 0, 500); slices.ContainsFunc(got, func(s string) bool { return strings.HasSuffix(s, ".00") }) {
		t.Errorf("busbw ticks %q: want no trailing zeros", got)
	}
}

// Curves that coincide must still show as several: no two series share a
// dash pattern or a marker, whatever their colour.
func TestSeriesDifferByDashAndMarker(t *testing.T) {
	const n = 6
	for i := range n {
		for j := i + 1; j < n; j++ {
			li, gi := seriesStyle(i)
			lj, gj := seriesStyle(j)
			if slices.Equal(li.Dashes, lj.Dashes) || gi.Shape == gj.Shape {
				t.Errorf("series %d and %d: dashes %v %v, shapes %T %T", i, j, li.Dashes, lj.Dashes, gi.Shape, gj.Shape)
			}
		}
	}
}

func TestChoiceKeyLeavesOutChannels(t *testing.T) {
	for in, want := range map[string]string{
		"ring/LL/8ch": "ring/LL", "nvls/Simple/16ch": "nvls/Simple", "rd": "rd", "ring": "ring",
		"tree/LL128": "tree/LL128", "x/ch": "x/ch", "a/bxch": "a/bxch",
	} {
		if got := choiceKey(in); got != want {
			t.Errorf("choiceKey(%q) = %q, want %q", in, got, want)
		}
	}
}

// benchChoices runs bench as CSV and returns the algorithm of each size.
func benchChoices(t *testing.T, args ...string) []string {
	t.Helper()
	status, out, errOut := commsim(append(append([]string{"bench"}, args...), "--format", "csv")...)
	if status != 0 {
		t.Fatalf("%q: status %d: %s", args, status, errOut)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) < 2 {
		t.Fatalf("csv %v:\n%s", err, out)
	}
	col := slices.Index(recs[0], "algo")
	var algos []string
	for _, r := range recs[1:] {
		algos = append(algos, r[col])
	}
	return algos
}

func TestBenchPlotHasBothPanelsAndMarksWhereAutoSwitches(t *testing.T) {
	sweep := []string{"--topo", "switch:8", "--op", "allreduce", "-b", "8", "-e", "4MiB", "-f", "4", "--timing-only"}
	algos := benchChoices(t, sweep...)
	var want []string // "rd → rhd" for each change of auto's choice
	for i := 1; i < len(algos); i++ {
		if algos[i] != algos[i-1] {
			want = append(want, algos[i-1]+" → "+algos[i])
		}
	}
	if len(want) == 0 {
		t.Fatalf("auto picks %q at every size: the sweep shows no switch to mark", algos[0])
	}
	dir := t.TempDir()
	svgFile, pngFile := filepath.Join(dir, "auto.svg"), filepath.Join(dir, "auto.png")
	for _, f := range []string{svgFile, pngFile} {
		if status, _, errOut := commsim(append(append([]string{"bench"}, sweep...), "--plot", f)...); status != 0 || errOut != "commsim: wrote "+f+"\n" {
			t.Fatalf("--plot %s: status %d, stderr %q: want 0 and what it wrote", f, status, errOut)
		}
	}
	svg, err := os.ReadFile(svgFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(want,
		"allreduce on switch:8: 8 ranks, f32, out of place",
		"bus bandwidth per rank (GB/s)", "algbw × 2(n-1)/n, as nccl-tests defines it",
		"time per collective (µs)", "bytes per rank", ">1KiB<", ">1MiB<",
		"auto (cost model&#39;s choice)", "choice changes") {
		if !bytes.Contains(svg, []byte(s)) && !bytes.Contains(svg, []byte(strings.ReplaceAll(s, "'", "&#39;"))) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	data, err := os.ReadFile(pngFile)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < chartPanels*96+1.6*96 || b.Dx() > 14*96 || b.Dy() != chartHeight*96 {
		t.Errorf("PNG %v, want %v px high and 11.5 to 14 inches wide", b, chartHeight*96)
	}
}

func TestBenchPlotOfOneAlgorithmMarksNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.svg")
	if status, _, errOut := commsim("bench", "--topo", "switch:8", "--algo", "ring", "-b", "8", "-e", "4MiB", "-f", "4", "--timing-only", "--plot", path); status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg, []byte(">ring</text>")) || bytes.Contains(svg, []byte("→")) || bytes.Contains(svg, []byte("choice changes")) {
		t.Errorf("a fixed algorithm's plot: want the series ring and no marks")
	}
}

// TestBenchPlotSaysWhyZeroTimesAreMissing: one rank moves nothing, so
// every time is 0 and has no place on the log axis; the panel says so
// rather than stand empty. A sweep with times says nothing of the kind.
func TestBenchPlotSaysWhyZeroTimesAreMissing(t *testing.T) {
	for topo, want := range map[string]string{"ring:1": "4 point(s) of 0 µs not drawn", "ring:2": ""} {
		path := filepath.Join(t.TempDir(), "one.svg")
		if status, _, errOut := commsim("bench", "--topo", topo, "-b", "8", "-e", "512", "-f", "4", "--plot", path); status != 0 {
			t.Fatalf("%s: status %d: %s", topo, status, errOut)
		}
		svg, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(svg, []byte("not drawn")); got != (want != "") || want != "" && !bytes.Contains(svg, []byte(want)) {
			t.Errorf("%s: want %q in the SVG (none when empty), found any: %v", topo, want, got)
		}
	}
}

func TestComparePlotSaysWhatTheSizesAreAndMarksCrossovers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ag.svg")
	status, out, errOut := commsim("compare", "--topo", "switch:8", "--op", "allgather", "--algos", "ring,rd", "-b", "64", "-e", "16MiB", "-f", "4",
		"--timing-only", "--plot", path)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"total over all ranks", "algbw × (n-1)/n", ">ring</text>", ">rd</text>"} {
		if !bytes.Contains(svg, []byte(s)) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	if crossed := strings.Contains(out, "# crossover:"); crossed != bytes.Contains(svg, []byte("fastest changes")) {
		t.Errorf("the table says crossover %v, the plot's legend disagrees", crossed)
	}
}

// fidelity --plot draws the log's times and the simulated ones, with the
// simulated choice's changes marked, and with --algo nccl NCCL's cost
// model's; a file neither PNG nor SVG is a usage error before anything
// runs.
func TestFidelityPlotDrawsMeasuredAndSimulated(t *testing.T) {
	skipInRaceRun(t, "a 16-rank log checked and drawn; TestBenchPlotOfNCCLMarksOnlyChangesOfAlgorithmOrProtocol draws under it")
	path := filepath.Join(t.TempDir(), "fid.svg")
	log := filepath.Join(shippedLogs, "vultr-b200-allreduce-16xB200.txt")
	status, out, errOut := commsim("fidelity", "--log", log, "--plot", path)
	if status != 0 || errOut != "commsim: wrote "+path+"\n" || !strings.Contains(out, "# commsim fidelity: allreduce") {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"allreduce on dgx-b200x2: 16 ranks, out of place; measured (vultr-b200-allreduce-16xB200.txt) and simulated (--algo nccl) beside NCCL&#39;s cost model, nothing fitted",
		">measured</text>", ">simulated</text>", ">NCCL&#39;s cost model</text>", "tree/LL → tree/LL128", "tree/LL128 → nvlstree/Simple", "simulated choice changes", "bytes per rank"} {
		if !bytes.Contains(svg, []byte(s)) {
			t.Errorf("SVG lacks %q", s)
		}
	}
	if status, _, errOut := commsim("fidelity", "--log", log, "--plot", "fid.pdf"); status != 2 || !strings.Contains(errOut, "--plot fid.pdf: want a .png or .svg file name") {
		t.Errorf("--plot fid.pdf: status %d, %q", status, errOut)
	}
}
