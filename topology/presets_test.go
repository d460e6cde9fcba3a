package topology

import (
	"math"
	"strconv"
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
		{"hgx-b200", 8, 900e9, 818.125e-9, 2.39e12},
		{"dgx-h100x1", 8, 450e9, 468.125e-9, 1e12},
		{"dgx-h100x4", 32, 450e9, 468.125e-9, 1e12},
		{"DGX-H100x3", 24, 450e9, 468.125e-9, 1e12},
		{"dgx-a100x2", 16, 300e9, 468.125e-9, 609e9},
		{"hgx-h200x3", 24, 450e9, 468.125e-9, 1.43e12},
		{"dgx-b200x4", 32, 900e9, 818.125e-9, 2.39e12},
		{"gb200-nvl72", 72, 900e9, 818.125e-9, 2.39e12},
		{"gb200-nvl72x2", 144, 900e9, 818.125e-9, 2.39e12},
		{"hgx-b300", 8, 900e9, 818.125e-9, 2.39e12},
		{"dgx-b300x2", 16, 900e9, 818.125e-9, 2.39e12},
		{"gb300-nvl72", 72, 900e9, 818.125e-9, 2.39e12},
		{"gb300-nvl72x3", 216, 900e9, 818.125e-9, 2.39e12},
		{"mac-tb5:1", 1, 0, 0, 163e9},
		{"mac-tb5:2", 2, 10e9, 10e-6, 163e9},
		{"mac-tb5:4", 4, 10e9, 10e-6, 163e9},
		{"h200-virtual:1", 1, 1.075e12, 23.3e-6, 1.43e12},
		{"h200-virtual:4", 4, 1.075e12 / 4, 23.3e-6, 1.43e12 / 4},
		{"h200-virtual:8,lat=5us", 8, 1.075e12 / 8, 5e-6, 1.43e12 / 8},
		{"h200-virtual:2,bw=2TB/s,reduce=1TB/s", 2, 1e12, 23.3e-6, 0.5e12},
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

// TestPresetsKeepTheirLinks pins the links of the presets that existed
// before arch, cpu and NVLS were added (their commsim outputs are golden
// files): each must have exactly the links of the generic spec with its
// documented numbers (gb200-nvl72's latency has since taken NVLink5's
// extra, Arch.NVLinkExtraLatency).
func TestPresetsKeepTheirLinks(t *testing.T) {
	for preset, generic := range map[string]string{
		"dgx-a100":             "switch:8,bw=300GB/s,lat=468.125ns",
		"dgx-h100":             "switch:8,bw=450GB/s,lat=468.125ns",
		"hgx-h200":             "switch:8,bw=450GB/s,lat=468.125ns",
		"gb200-nvl72":          "switch:72,bw=900GB/s,lat=818.125ns", // NVLink5: 0.7 µs more per crossing
		"dgx-h100x3":           "cluster:3x8,bw=450GB/s,lat=468.125ns,nicbw=400Gb/s,niclat=7us,pciebw=64GB/s,pcielat=0",
		"dgx-h100x2,rail=true": "cluster:2x8,bw=450GB/s,lat=468.125ns,nicbw=400Gb/s,niclat=7us,pciebw=64GB/s,pcielat=0,rail=true",
	} {
		p, g := mustParse(t, preset), mustParse(t, generic)
		if len(p.Nodes) != len(g.Nodes) || len(p.Links) != len(g.Links) {
			t.Errorf("%s: %d nodes, %d links; %s has %d, %d", preset, len(p.Nodes), len(p.Links), generic, len(g.Nodes), len(g.Links))
			continue
		}
		for i := range p.Nodes {
			if p.Nodes[i].Name != g.Nodes[i].Name || p.Nodes[i].Kind != g.Nodes[i].Kind {
				t.Errorf("%s: node %d is %s %s, want %s %s", preset, i, p.Nodes[i].Kind, p.Nodes[i].Name, g.Nodes[i].Kind, g.Nodes[i].Name)
			}
		}
		for i := range p.Links {
			if p.Links[i] != g.Links[i] {
				t.Errorf("%s: link %d is %+v, want %+v", preset, i, p.Links[i], g.Links[i])
				break
			}
		}
	}
}

func TestPresetList(t *testing.T) {
	ps := Presets()
	want := []string{"dgx-a100", "dgx-h100", "hgx-h200", "hgx-b200", "dgx-h100xN", "dgx-a100xN", "hgx-h200xN", "dgx-b200xN",
		"gb200-nvl72", "gb200-nvl72xN", "hgx-b300", "dgx-b300xN", "gb300-nvl72", "gb300-nvl72xN", "mac-tb5:N", "h200-virtual:N"}
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
			cites := false
			for _, doc := range []string{"fidelity/nccl-logs/", "nccl-tests#", "nccl#", "tuning.cc", "ASTRA-sim", "NVIDIA", "Apple", "Intel", "lent H200", "GT/s", "assumption"} {
				cites = cites || strings.Contains(s, doc)
			}
			if !cites {
				t.Errorf("preset %s: source %q cites nothing", p.Name, s)
			}
			// show prints the sources: they cite what a reader can find,
			// not the project's notes outside the repository.
			for _, private := range []string{"REFERENCE", "NCCL-MODEL"} {
				if strings.Contains(s, private) {
					t.Errorf("preset %s: source %q cites %s, which is not in the repository", p.Name, s, private)
				}
			}
		}
		spec := strings.Replace(p.Name, "N", "3", 1)
		tp, err := Parse(spec)
		if err != nil {
			t.Errorf("preset %s as %q: %v", p.Name, spec, err)
			continue
		}
		roundTrip(t, tp)
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
	// The NVLS figures are the measured 8-GPU all-reduce peaks (algbw at
	// 16 GiB in nccl-logs), rounded to 3 significant figures.
	for _, c := range []struct {
		name          string
		got, measured float64
	}{{"Hopper", nvlsHopperBW, 276.03e9}, {"Blackwell", nvlsBlackwellBW, 481.66e9}} {
		if rel := math.Abs(c.got-c.measured) / c.measured; rel > 0.005 {
			t.Errorf("%s NVLS %v, measured %v", c.name, c.got, c.measured)
		}
	}
	if hdrBW != 25e9 || pcieGen4BW != 32e9 {
		t.Error("hdrBW or pcieGen4BW changed")
	}
}

// TestPresetFacts checks what each preset says about its hardware: what
// NCCL's model reads from a fabric (NCCL-MODEL.md §3, §5, §6), as the
// comments in preset_numbers.go claim it.
func TestPresetFacts(t *testing.T) {
	tests := []struct {
		spec    string
		arch    Arch
		cpu     CPUVendor
		nvlinks int     // NVLinks per GPU: GPU-switch link BW / Arch.NVLinkRate
		nvls    float64 // the GPUs' own switches' ReduceBW
		nicbw   float64 // 0: no network
		pciebw  float64 // GPU-NIC link: 128e9 PCIe Gen6 x16, 64e9 Gen5 x16, 32e9 Gen4 x16
		rails   int     // leaf switches (rail<g>); 0: one flat netsw
	}{
		{"dgx-a100", Ampere, AMDCPU, 12, 0, 0, 0, 0},
		{"dgx-h100", Hopper, IntelCPU, 18, 276e9, 0, 0, 0},
		{"hgx-h200", Hopper, UnknownCPU, 18, 276e9, 0, 0, 0},
		{"hgx-b200", Blackwell, UnknownCPU, 18, 482e9, 0, 0, 0},
		{"gb200-nvl72", Blackwell, ARMCPU, 18, 482e9, 0, 0, 0},
		{"dgx-h100x2", Hopper, IntelCPU, 18, 276e9, 50e9, 64e9, 0},
		{"dgx-h100x2,rail=true", Hopper, IntelCPU, 18, 276e9, 50e9, 64e9, 8},
		{"dgx-a100x3", Ampere, AMDCPU, 12, 0, 25e9, 32e9, 8},
		{"hgx-h200x2", Hopper, UnknownCPU, 18, 276e9, 50e9, 64e9, 8},
		{"dgx-b200x4", Blackwell, IntelCPU, 18, 482e9, 50e9, 64e9, 8},
		{"dgx-b200x2,rail=false", Blackwell, IntelCPU, 18, 482e9, 50e9, 64e9, 0},
		{"gb200-nvl72x2", Blackwell, ARMCPU, 18, 482e9, 50e9, 64e9, 72},
		{"hgx-b300", Blackwell, UnknownCPU, 18, 482e9, 0, 0, 0},
		{"gb300-nvl72", Blackwell, ARMCPU, 18, 482e9, 0, 0, 0},
		{"dgx-b300x2", Blackwell, IntelCPU, 18, 482e9, 100e9, 128e9, 8},
		{"gb300-nvl72x2", Blackwell, ARMCPU, 18, 482e9, 100e9, 128e9, 72},
	}
	for _, tc := range tests {
		tp := mustParse(t, tc.spec)
		if tp.HostCPU != tc.cpu {
			t.Errorf("%s: host cpu %s, want %s", tc.spec, tp.HostCPU, tc.cpu)
		}
		nics := map[int]int{} // NICs per GPU
		for i, l := range tp.Links {
			a, b := tp.Nodes[l.A], tp.Nodes[l.B]
			switch {
			case a.Kind == GPU && b.Kind == Switch:
				if n := l.BW / a.Arch.NVLinkRate(); n != float64(tc.nvlinks) {
					t.Errorf("%s: link %d (%s): %v NVLinks, want %d", tc.spec, i, tp.linkLabel(i), n, tc.nvlinks)
				}
			case a.Kind == GPU && b.Kind == NIC:
				nics[l.A]++
				if l.BW != tc.pciebw {
					t.Errorf("%s: link %d (%s): bw %v, want PCIe %v", tc.spec, i, tp.linkLabel(i), l.BW, tc.pciebw)
				}
			case a.Kind == NIC && b.Kind == Switch:
				if l.BW != tc.nicbw {
					t.Errorf("%s: link %d (%s): bw %v, want the NIC's %v", tc.spec, i, tp.linkLabel(i), l.BW, tc.nicbw)
				}
			}
		}
		rails, nodes := 0, 0
		for i, n := range tp.Nodes {
			switch {
			case n.Kind == GPU:
				if n.Arch != tc.arch {
					t.Errorf("%s: %s arch %s, want %s", tc.spec, n.Name, n.Arch, tc.arch)
				}
				if want := map[bool]int{true: 1, false: 0}[tc.nicbw > 0]; nics[i] != want {
					t.Errorf("%s: %s has %d NICs, want %d", tc.spec, n.Name, nics[i], want)
				}
			case n.Kind == Switch && strings.HasPrefix(n.Name, "sw"):
				nodes++
				if n.ReduceBW != tc.nvls {
					t.Errorf("%s: %s reduce %v, want NVLS %v", tc.spec, n.Name, n.ReduceBW, tc.nvls)
				}
			case n.Kind == Switch: // the network: no SHARP unless sharp= says so
				if strings.HasPrefix(n.Name, "rail") {
					rails++
				}
				if n.ReduceBW != 0 {
					t.Errorf("%s: %s reduce %v, want 0 (sharp off)", tc.spec, n.Name, n.ReduceBW)
				}
			}
		}
		if rails != tc.rails {
			t.Errorf("%s: %d rail switches, want %d", tc.spec, rails, tc.rails)
		}
		if tc.rails == 0 {
			continue
		}
		// Rail-optimised: NIC i's leaf is rail<i mod G>, and every leaf has
		// as much bandwidth up to the spine as down to its NICs.
		g := tp.NumGPUs() / nodes
		for i, l := range tp.Links {
			a, b := tp.Nodes[l.A], tp.Nodes[l.B]
			if a.Kind == NIC {
				k, err := strconv.Atoi(strings.TrimPrefix(a.Name, "nic"))
				if err != nil || b.Name != "rail"+strconv.Itoa(k%g) {
					t.Errorf("%s: link %d is %s, want nic%d on rail%d", tc.spec, i, tp.linkLabel(i), k, k%g)
				}
			}
			if b.Name == "spine" && l.BW != float64(nodes)*tc.nicbw {
				t.Errorf("%s: link %d (%s): bw %v, want %d nodes × %v", tc.spec, i, tp.linkLabel(i), l.BW, nodes, tc.nicbw)
			}
		}
	}
}

// TestPresetOverrides checks the keys a preset takes for its new facts.
func TestPresetOverrides(t *testing.T) {
	tp := mustParse(t, "dgx-h100,nvls=off,arch=ampere,cpu=amd")
	if tp.Nodes[8].ReduceBW != 0 || tp.Nodes[0].Arch != Ampere || tp.HostCPU != AMDCPU {
		t.Errorf("dgx-h100 overridden: sw0 reduce %v, gpu0 arch %s, cpu %s", tp.Nodes[8].ReduceBW, tp.Nodes[0].Arch, tp.HostCPU)
	}
	tp = mustParse(t, "dgx-b200x2,sharp=50GB/s,nvls=inf")
	for _, n := range tp.Nodes {
		want := map[bool]float64{true: math.Inf(1), false: 50e9}[strings.HasPrefix(n.Name, "sw")]
		if n.Kind == Switch && n.ReduceBW != want {
			t.Errorf("dgx-b200x2,sharp=50GB/s,nvls=inf: %s reduce %v, want %v", n.Name, n.ReduceBW, want)
		}
	}
	tp = mustParse(t, "cluster:2x4,arch=blackwell,cpu=arm,nvls=1TB/s,sharp=400Gb/s")
	if tp.Nodes[0].Arch != Blackwell || tp.HostCPU != ARMCPU || tp.Nodes[8].ReduceBW != 1e12 || tp.Nodes[len(tp.Nodes)-1].ReduceBW != 50e9 {
		t.Errorf("cluster with facts: %+v %s", tp.Nodes, tp.HostCPU)
	}
	// Spec-built fabrics say nothing unless asked.
	tp = mustParse(t, "switch:4")
	if tp.Nodes[0].Arch != UnknownArch || tp.HostCPU != UnknownCPU || tp.Nodes[4].ReduceBW != 0 {
		t.Errorf("switch:4: arch %s, cpu %s, sw0 reduce %v", tp.Nodes[0].Arch, tp.HostCPU, tp.Nodes[4].ReduceBW)
	}
}

func TestPresetOf(t *testing.T) {
	for spec, want := range map[string]string{
		"dgx-h100": "dgx-h100", "dgx-h100x4": "dgx-h100xN", "DGX-H100x4,rail=true": "dgx-h100xN", "gb200-nvl72": "gb200-nvl72",
		"gb200-nvl72x2": "gb200-nvl72xN", "dgx-b300x4": "dgx-b300xN", "gb300-nvl72x2": "gb300-nvl72xN", "hgx-b300": "hgx-b300",
		"mac-tb5:4,lat=2us": "mac-tb5:N", "h200-virtual:2": "h200-virtual:N",
		"switch:8": "", "ring:4": "", "fabric.yaml": "", "dgx-h100x": "",
	} {
		p, ok := PresetOf(spec)
		if p.Name != want || ok != (want != "") || ok && len(p.Sources) == 0 {
			t.Errorf("PresetOf(%q) = %q (%d sources), %v; want %q", spec, p.Name, len(p.Sources), ok, want)
		}
	}
}

// gpus= takes 1 to the node's count, so gpus=8 on an 8-GPU preset is
// the whole node, not an error.
func TestPresetGPUsUpToTheNodesCount(t *testing.T) {
	for _, c := range []struct {
		spec string
		gpus int
	}{{"dgx-h100,gpus=8", 8}, {"dgx-h100x2,gpus=8", 16}, {"gb200-nvl72,gpus=72", 72}} {
		tp, err := Parse(c.spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.spec, err)
		}
		if n := len(tp.GPUs()); n != c.gpus {
			t.Errorf("%s: %d GPUs, want %d", c.spec, n, c.gpus)
		}
	}
	if _, err := Parse("dgx-h100,gpus=9"); err == nil {
		t.Error("dgx-h100,gpus=9 parsed")
	}
}
