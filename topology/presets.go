package topology

import (
	"cmp"
	"slices"
	"strings"
)

// Preset describes a built-in named fabric, for --help and documentation.
type Preset struct {
	Name    string   // as written in a spec; N stands for a count
	Summary string   // one line
	Sources []string // where every number comes from
}

type presetDef struct {
	Preset
	fam      family
	shape    bool // takes :N
	suffixed bool // takes xN glued to the name (dgx-h100xN)
}

// nvswitchParams are the numbers of GPUs on an NVSwitch: NVLink bandwidth
// per GPU, the GPU's reduce bandwidth and arch, the switch's NVLS, and the
// host CPU. Every preset's GPU-switch link has latency nvswitchLinkLat,
// and half of what its arch's NVLink crossing takes beyond Hopper's.
func nvswitchParams(bw, reduce float64, arch Arch, nvls float64, cpu CPUVendor) params {
	p := genericParams()
	p.bw, p.lat, p.reduce = bw, nvswitchLinkLat+arch.NVLinkExtraLatency()/2, reduce
	p.arch, p.nvls, p.cpu = arch, nvls, cpu
	return p
}

// withNetwork adds a node's network to nvswitchParams: one NIC per GPU at
// nicbw behind a GPU-NIC link of pciebw, the network hop's latency, and
// rail-optimised leaf/spine switches when rail is true.
func withNetwork(p params, nicbw, pciebw float64, rail bool) params {
	p.nicbw, p.niclat = nicbw, ndrLinkLat
	p.pciebw, p.pcielat = pciebw, 0
	p.rail = rail
	return p
}

// inUse is how many of a node's g GPUs a preset builds: gpus= where it is
// given, as a job sees a machine when it runs fewer ranks a node than the
// node has GPUs (srun's --ntasks-per-node, nccl-tests' -g). Building the
// node with fewer GPUs is the same as keeping its first ones, or any
// others: the GPUs on an NVSwitch are alike, each keeps its own NIC, and
// the switch keeps its NVLS.
func inUse(spec string, g int, p params) (int, error) {
	if p.gpus > g {
		return 0, newErr(ErrSpec, "spec %q: gpus=%d, but a node has %d GPUs", spec, p.gpus, g)
	}
	return cmp.Or(p.gpus, g), nil
}

// fixedSwitch builds n GPUs on one switch (gpus= of them), ignoring the
// shape.
func fixedSwitch(n int) func(string, []int, params) ([]Node, []Link, error) {
	return func(spec string, _ []int, p params) ([]Node, []Link, error) {
		n, err := inUse(spec, n, p)
		if err != nil {
			return nil, nil, err
		}
		return buildSwitch(spec, []int{n}, p)
	}
}

// virtualRanks builds n ranks sharing one GPU: each rank on a switch that
// stands for the GPU's memory, with 1/n of the GPU's message and reduce
// bandwidth (p.bw, p.reduce), so that n ranks moving data at once share it
// as they share the HBM.
func virtualRanks(spec string, n []int, p params) ([]Node, []Link, error) {
	p.bw /= float64(n[0])
	p.reduce /= float64(n[0])
	return buildSwitch(spec, n, p)
}

// nodesOf builds n[0] nodes of g GPUs (gpus= of them) as a cluster.
func nodesOf(g int) func(string, []int, params) ([]Node, []Link, error) {
	return func(spec string, n []int, p params) ([]Node, []Link, error) {
		g, err := inUse(spec, g, p)
		if err != nil {
			return nil, nil, err
		}
		return buildCluster(spec, []int{n[0], g}, p)
	}
}

// presetKeys are the keys of a preset of fixed nodes built from a kind that
// takes keys: the kind's and gpus=.
func presetKeys(keys []string) []string { return append(slices.Clip(keys), keyGPUs) }

// presetTable lists the presets. The single-node ones are switch:N with
// their numbers; the multi-node ones (…xN) are cluster:Nx8 (cluster:Nx72
// for gb200-nvl72xN), so they take the cluster keys, and all but
// dgx-h100xN default to rail=true: rail-optimised leaf and spine switches.
// dgx-h100xN keeps its one flat network switch (its outputs are golden
// files); dgx-h100xN,rail=true is its rail-optimised form.
func presetTable() []presetDef {
	a100 := nvswitchParams(a100NVLinkBW, a100ReduceBW, Ampere, 0, AMDCPU)
	h100 := nvswitchParams(h100NVLinkBW, h100ReduceBW, Hopper, nvlsHopperBW, IntelCPU)
	h200 := nvswitchParams(h100NVLinkBW, h200ReduceBW, Hopper, nvlsHopperBW, UnknownCPU)
	hgxB200 := nvswitchParams(b200NVLinkBW, b200ReduceBW, Blackwell, nvlsBlackwellBW, UnknownCPU)
	dgxB200 := nvswitchParams(b200NVLinkBW, b200ReduceBW, Blackwell, nvlsBlackwellBW, IntelCPU)
	nvl72 := nvswitchParams(b200NVLinkBW, b200ReduceBW, Blackwell, nvlsBlackwellBW, ARMCPU)

	mac := genericParams()
	mac.bw, mac.lat, mac.reduce = tb5BW, tcpLat, m4MaxReduceBW

	virtual := genericParams()
	virtual.bw, virtual.lat, virtual.reduce = h200VirtualMsgBW, h200VirtualMsgLat, h200ReduceBW

	single := func(name, summary string, n int, p params, sources ...string) presetDef {
		return presetDef{Preset: Preset{name, summary, sources},
			fam: family{name, presetKeys(switchKeys), p, fixedSwitch(n)}}
	}
	multi := func(name, summary string, g int, p params, sources ...string) presetDef {
		return presetDef{Preset: Preset{name, summary, sources},
			fam: family{name, presetKeys(clusterKeys), p, nodesOf(g)}, suffixed: true}
	}
	return []presetDef{
		single("dgx-a100", "8× A100 80GB on NVSwitch, 300 GB/s per direction per GPU; no NVLS; AMD hosts", 8, a100,
			srcA100NVLink, srcSwitchLat2, srcA100Reduce, srcDGXA100, srcNVLSNone),
		single("dgx-h100", "8× H100 SXM on NVSwitch, 450 GB/s per direction per GPU; NVLS 276 GB/s; Intel hosts", 8, h100,
			srcH100NVLink, srcSwitchLat, srcH100Reduce, srcDGXH100, srcNVLSHopper),
		single("hgx-h200", "8× H200 on NVSwitch, 450 GB/s per direction per GPU; NVLS 276 GB/s", 8, h200,
			srcH200NVLink, srcSwitchLat2, srcReduce, srcHGXH200, srcNVLSH200),
		single("hgx-b200", "8× B200 on NVLink5 switches, 900 GB/s per direction per GPU; NVLS 482 GB/s", 8, hgxB200,
			srcB200x8, srcSwitchLatB200, srcB200HGXReduce, srcHGXB200, srcNVLSB200),
		multi("dgx-h100xN", "N DGX H100 nodes (8 GPUs on NVSwitch each), one 400 Gb/s NDR NIC per GPU, one non-blocking IB switch (rail=true: rail-optimised)", 8,
			withNetwork(h100, ndrBW, pcieGen5BW, false),
			srcH100NVLink, srcSwitchLat, srcH100Reduce, srcDGXH100, srcNVLSHopper, srcNDR, srcNDRLat, srcPCIe),
		multi("dgx-a100xN", "N DGX A100 nodes, one 200 Gb/s HDR NIC per GPU (PCIe Gen4), rail-optimised leaf/spine", 8,
			withNetwork(a100, hdrBW, pcieGen4BW, true),
			srcA100NVLink, srcSwitchLat2, srcA100Reduce, srcDGXA100, srcNVLSNone, srcHDR, srcNDRLat, srcPCIeGen4, srcRailAssumed),
		multi("hgx-h200xN", "N HGX H200 nodes, one 400 Gb/s NDR NIC per GPU (PCIe Gen5), rail-optimised leaf/spine", 8,
			withNetwork(h200, ndrBW, pcieGen5BW, true),
			srcH200NVLink, srcSwitchLat2, srcReduce, srcHGXH200, srcNVLSH200, srcNDRRail, srcNDRLat, srcPCIe, srcRailAssumed),
		multi("dgx-b200xN", "N DGX B200 nodes, one 400 Gb/s NDR ConnectX-7 per GPU (PCIe Gen5), rail-optimised leaf/spine", 8,
			withNetwork(dgxB200, ndrBW, pcieGen5BW, true),
			srcB200x8, srcSwitchLatB200, srcB200HGXReduce, srcDGXB200, srcNVLSB200, srcNDRRail, srcNDRLat, srcPCIe, srcRailRA),
		single("gb200-nvl72", "72× B200 in one NVLink5 Switch domain, 900 GB/s per direction per GPU; NVLS 482 GB/s; Grace (Arm) hosts", 72, nvl72,
			srcB200NVLink, srcSwitchLatB200, srcB200Reduce, srcGB200, srcNVLSNVL72),
		multi("gb200-nvl72xN", "N GB200 NVL72 racks joined by InfiniBand: one 400 Gb/s NDR NIC per GPU, one rail per GPU position (72), leaf/spine", 72,
			withNetwork(nvl72, ndrBW, pcieGen5BW, true),
			srcB200NVLink, srcSwitchLatB200, srcB200Reduce, srcGB200, srcNVLSNVL72, srcNDRRail, srcNDRLat, srcPCIeGB200, srcRailAssumed),
		// Blackwell Ultra: its GPUs are B200s to NCCL and to these numbers
		// (preset_numbers.go); its network is ConnectX-8 at 800 Gb/s.
		single("hgx-b300", "8× B300 (Blackwell Ultra) on NVLink5 switches, 900 GB/s per direction per GPU; NVLS 482 GB/s", 8, hgxB200,
			srcB300NVLink, srcSwitchLatB200, srcB300HGXReduce, srcHGXB300, srcNVLSB300),
		multi("dgx-b300xN", "N DGX B300 nodes, one 800 Gb/s ConnectX-8 per GPU (PCIe Gen6), rail-optimised leaf/spine", 8,
			withNetwork(dgxB200, xdrBW, pcieGen6BW, true),
			srcB300NVLink, srcSwitchLatB200, srcB300HGXReduce, srcDGXB300, srcNVLSB300, srcXDR, srcNDRLat, srcPCIeGen6, srcRailAssumed),
		single("gb300-nvl72", "72× B300 in one NVLink5 Switch domain, 900 GB/s per direction per GPU; NVLS 482 GB/s; Grace (Arm) hosts", 72, nvl72,
			srcB300NVLink, srcSwitchLatB200, srcB300Reduce, srcGB300, srcNVLSNVL72U),
		multi("gb300-nvl72xN", "N GB300 NVL72 racks: one 800 Gb/s ConnectX-8 per GPU (PCIe Gen6), one rail per GPU position (72), leaf/spine", 72,
			withNetwork(nvl72, xdrBW, pcieGen6BW, true),
			srcB300NVLink, srcSwitchLatB200, srcB300Reduce, srcGB300, srcNVLSNVL72U, srcXDR, srcNDRLat, srcPCIeGen6, srcRailAssumed),
		{Preset: Preset{"mac-tb5:N", "ring of N Macs (M4 Max) cabled with Thunderbolt 5, 10 GB/s per direction",
			[]string{srcTB5, srcTCP, srcM4Reduce}},
			fam:   family{"mac-tb5", plainKeys, mac, buildRing},
			shape: true},
		{Preset: Preset{"h200-virtual:N", "N virtual ranks sharing one H200 (commsim's cuda backend, --placement virtual): each on a switch standing for the HBM, with 1/N of 1.075 TB/s of messages and of 1.43 TB/s of reduction",
			[]string{srcVirtualBW, srcVirtualRed, srcVirtualLat}},
			fam:   family{"h200-virtual", plainKeys, virtual, virtualRanks},
			shape: true},
	}
}

// Presets lists the built-in presets in a fixed order.
func Presets() []Preset {
	tab := presetTable()
	out := make([]Preset, len(tab))
	for i, d := range tab {
		out[i] = d.Preset
		out[i].Sources = append([]string(nil), d.Sources...)
	}
	return out
}

// specKinds are the kinds a spec may start with, as typed: dgx-h100xN's
// is dgx-h100x4's "dgx-h100x" less its x, which also names the one-node
// preset; mac-tb5:N's is "mac-tb5".
func specKinds() []string {
	names := []string{"ring", "mesh", "switch", "torus", "cluster"}
	for _, d := range presetTable() {
		n := strings.TrimSuffix(strings.TrimSuffix(d.Name, ":N"), "xN")
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

func presetNames() string {
	var names []string
	for _, d := range presetTable() {
		names = append(names, d.Name)
	}
	return strings.Join(names, ", ")
}

// PresetOf returns the preset a spec string names (dgx-h100x4,rail=true
// names dgx-h100xN), with its sources; ok is false for other specs and
// for files. It does not check the rest of the spec: Parse does.
func PresetOf(spec string) (Preset, bool) {
	head, _, _ := strings.Cut(strings.TrimSpace(spec), ",")
	kind, _, _ := strings.Cut(head, ":")
	kind = strings.ToLower(strings.TrimSpace(kind))
	for _, d := range presetTable() {
		names := kind == d.Name
		switch {
		case d.suffixed:
			prefix := strings.TrimSuffix(d.Name, "N")
			names = strings.HasPrefix(kind, prefix) && kind != prefix
		case d.shape:
			names = kind == d.fam.name
		}
		if names {
			p := d.Preset
			p.Sources = slices.Clone(d.Sources)
			return p, true
		}
	}
	return Preset{}, false
}

// lookupPreset resolves a preset name; ok is false when kind names none.
func lookupPreset(spec, kind, shape string, hasShape bool) (family, []int, bool, error) {
	for _, d := range presetTable() {
		switch {
		case d.suffixed:
			prefix := strings.TrimSuffix(d.Name, "N")
			if !strings.HasPrefix(kind, prefix) {
				continue
			}
			if hasShape {
				return family{}, nil, true, newErr(ErrSpec, "spec %q: preset %s takes no :shape; write e.g. %s4", spec, d.Name, prefix)
			}
			n, err := parseCount(spec, d.Name+" node count", kind[len(prefix):])
			return d.fam, []int{n}, true, err
		case d.shape:
			if kind != d.fam.name {
				continue
			}
			if !hasShape {
				return family{}, nil, true, newErr(ErrSpec, "spec %q: preset %s needs a size, e.g. %s:4", spec, d.Name, d.fam.name)
			}
			n, err := parseCount(spec, d.fam.name+" size", shape)
			return d.fam, []int{n}, true, err
		default:
			if kind != d.Name {
				continue
			}
			if hasShape {
				return family{}, nil, true, newErr(ErrSpec, "spec %q: preset %s takes no shape", spec, d.Name)
			}
			return d.fam, nil, true, nil
		}
	}
	return family{}, nil, false, nil
}
