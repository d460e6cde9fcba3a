package topology

import (
	"math"
	"strings"
	"testing"
)

func TestPresets(t *testing.T) {
	tests := []struct {
		spec   string
		gpus   int
		bw     float64 // of link 0
		lat    float64 // of link 0
		reduce float64
	}{
		{"dgx-a100", 8, 300e9, 468.125e-9, 609e9},
		{"dgx-h100", 8, 450e9, 468.125e-9, 1e12},
		{"hgx-h200", 8, 450e9, 468.125e-9, 1.43e12},
		{"dgx-h100x1", 8, 450e9, 468.125e-9, 1e12},
		{"dgx-h100x4", 32, 450e9, 468.125e-9, 1e12},
		{"DGX-H100x3", 24, 450e9, 468.125e-9, 1e12},
		{"gb200-nvl72", 72, 900e9, 468.125e-9, 2.39e12},
		{"mac-tb5:1", 1, 0, 0, 163e9},
		{"mac-tb5:2", 2, 10e9, 10e-6, 163e9},
		{"mac-tb5:4", 4, 10e9, 10e-6, 163e9},
		{"h200-virtual:1", 1, 1.075e12, 0, 1.43e12},
		{"h200-virtual:4", 4, 1.075e12 / 4, 0, 1.43e12 / 4},
		{"h200-virtual:8,lat=5us", 8, 1.075e12 / 8, 5e-6, 1.43e12 / 8},
		{"h200-virtual:2,bw=2TB/s,reduce=1TB/s", 2, 1e12, 0, 0.5e12},
	}
	for _, tc := range tests {
		tp, err := Parse(tc.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.spec, err)
			continue
		}
		if tp.NumGPUs() != tc.gpus {
			t.Errorf("%s: %d gpus, want %d", tc.spec, tp.NumGPUs(), tc.gpus)
		}
		if len(tp.Links) > 0 && (tp.Links[0].BW != tc.bw || tp.Links[0].Latency != tc.lat) {
			t.Errorf("%s: link 0 bw=%v lat=%v, want %v %v", tc.spec, tp.Links[0].BW, tp.Links[0].Latency, tc.bw, tc.lat)
		}
		for _, g := range tp.GPUs() {
			if tp.Nodes[g].ReduceBW != tc.reduce {
				t.Errorf("%s: %s reduce %v, want %v", tc.spec, tp.Nodes[g].Name, tp.Nodes[g].ReduceBW, tc.reduce)
				break
			}
		}
	}
}

func TestPresetList(t *testing.T) {
	ps := Presets()
	want := []string{"dgx-a100", "dgx-h100", "hgx-h200", "dgx-h100xN", "gb200-nvl72", "mac-tb5:N", "h200-virtual:N"}
	if len(ps) != len(want) {
		t.Fatalf("%d presets, want %d", len(ps), len(want))
	}
	for i, p := range ps {
		if p.Name != want[i] {
			t.Errorf("preset %d is %q, want %q", i, p.Name, want[i])
		}
		if p.Summary == "" || len(p.Sources) == 0 {
			t.Errorf("preset %s: summary %q, %d sources", p.Name, p.Summary, len(p.Sources))
		}
		for _, s := range p.Sources {
			if !strings.Contains(s, "REFERENCE.md") && !strings.Contains(s, "NVIDIA") && !strings.Contains(s, "Apple") {
				t.Errorf("preset %s: source %q cites nothing", p.Name, s)
			}
		}
		spec := strings.Replace(p.Name, "N", "3", 1)
		if _, err := Parse(spec); err != nil {
			t.Errorf("preset %s as %q: %v", p.Name, spec, err)
		}
	}
	// Presets returns copies: changing them changes nothing.
	ps[0].Sources[0] = "changed"
	if Presets()[0].Sources[0] == "changed" {
		t.Error("Presets shares its Sources slices")
	}
}

func TestPresetNumbers(t *testing.T) {
	// The GPU to GPU latency through an NVSwitch is ASTRA-sim's 936.25 ns.
	tp, err := Parse("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	p, err := tp.RouteRanks(0, 7)
	if err != nil || p.Latency != 936.25e-9 || len(p.Edges) != 2 {
		t.Errorf("dgx-h100 rank 0->7: %+v, %v; want 2 hops, 936.25ns", p, err)
	}
	// Cross-node on dgx-h100xN is NCCL's 14 us network hop.
	tp, err = Parse("dgx-h100x2")
	if err != nil {
		t.Fatal(err)
	}
	p, err = tp.RouteRanks(0, 8)
	if err != nil || p.Latency != 14e-6 {
		t.Errorf("dgx-h100x2 rank 0->8: %+v, %v; want 14us", p, err)
	}
	// The reduce bandwidths follow from the H200 copy measurement and the
	// HBM bandwidths, rounded to 3 significant figures.
	base := h200CopyBW / 3
	for _, c := range []struct {
		name      string
		got, mem  float64
		maxRelErr float64
	}{
		{"H200", h200ReduceBW, 4.8e12, 0.005},
		{"A100", a100ReduceBW, 2.039e12, 0.005},
		{"H100", h100ReduceBW, 3.35e12, 0.005},
		{"B200", b200ReduceBW, 8e12, 0.005},
		{"M4 Max", m4MaxReduceBW, 546e9, 0.005},
	} {
		want := base * c.mem / h200HBM
		if rel := math.Abs(c.got-want) / want; rel > c.maxRelErr {
			t.Errorf("%s reduce %v, derivation gives %v (rel err %.4f)", c.name, c.got, want, rel)
		}
	}
	if nvswitchLinkLat != 468.125e-9 || ndrBW != 50e9 || tb5BW != 10e9 || a100NVLinkBW != 300e9 || b200NVLinkBW != 900e9 {
		t.Error("a preset constant changed")
	}
}
