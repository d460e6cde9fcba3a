package topology

import "strings"

// Preset describes a built-in named fabric, for --help and documentation.
type Preset struct {
	Name    string   // as written in a spec; N stands for a count
	Summary string   // one line
	Sources []string // where every number comes from
}

// Link rates and latencies used by the presets. Every number names its
// source; REFERENCE means /work/shared/REFERENCE.md of the commsim project,
// which records the public source of each row.
const (
	// DGX A100: 12 NVLink3 links per GPU × 25 GB/s per direction = 300 GB/s
	// per direction per GPU (REFERENCE, DGX A100 row; nccl-tests#149, #178).
	a100NVLinkBW = 12 * 25e9

	// DGX H100: 18 NVLink4 links per GPU = 450 GB/s per direction, 900 GB/s
	// bidirectional (REFERENCE, DGX H100 row; nccl-tests#212, nccl#1455).
	// HGX H200 uses the same NVLink4/NVSwitch fabric: NVIDIA's H200 product
	// page lists "NVLink: 900GB/s" (bidirectional) per GPU.
	h100NVLinkBW = 450e9

	// GB200 NVL72: NVLink5, 1.8 TB/s bidirectional per GPU (NVIDIA GB200
	// NVL72 specification: 130 TB/s NVLink bandwidth over 72 GPUs) = 900 GB/s
	// per direction, through one NVLink Switch domain.
	b200NVLinkBW = 1.8e12 / 2

	// NVSwitch hop: the ASTRA-sim validated HGX-H100 config ("Switch, 8 NPUs,
	// 400 GB/s, 936.25 ns", REFERENCE) has 936.25 ns GPU to GPU through the
	// switch; we put half on each GPU-switch link, so GPU->switch->GPU is
	// exactly 936.25 ns. No A100, H200 or GB200 figure is in REFERENCE; those
	// presets reuse it (override with lat=).
	nvswitchLinkLat = 936.25e-9 / 2 // 468.125 ns

	// NDR InfiniBand: 400 Gb/s per port = 50 GB/s per direction (REFERENCE;
	// measured ≈46–48 GB/s per NIC, nccl-tests#290).
	ndrBW = 400e9 / 8

	// Network hop latency: NCCL's tuning model (src/graph/tuning.cc, Simple
	// protocol, REFERENCE) charges 14 µs per network hop; a NIC->switch->NIC
	// hop crosses two NIC links, so 7 µs each.
	ndrLinkLat = 14e-6 / 2

	// GPU to NIC: PCIe Gen5 x16 ≈ 64 GB/s per direction (REFERENCE); the
	// latency is folded into the network hop above, so 0.
	pcieGen5BW = 64e9

	// Thunderbolt 5: 80 Gb/s per direction = 10 GB/s (REFERENCE).
	tb5BW = 80e9 / 8

	// Mac to Mac over Thunderbolt with MLX's ring backend is TCP: "tens of
	// µs" between hosts (REFERENCE); we take the low end, 10 µs.
	tcpLat = 10e-6
)

// GPU reduce bandwidths. A reduction of s bytes reads 2s and writes s bytes,
// so reduce_bw = (memory copy throughput counted as bytes read + written)/3.
// The one measurement we have is the H200's device-to-device copy at
// ≈4.3 TB/s read+written (REFERENCE, measured on a lent machine), so
// H200 reduce = 4.3e12/3 = 1.433e12 B/s. Other GPUs scale it by their
// published HBM bandwidth over the H200's 4.8 TB/s (NVIDIA H200 datasheet),
// assuming the same fraction of peak. Values are rounded to 3 significant
// figures; the measurement has 2.
const (
	h200CopyBW = 4.3e12
	h200HBM    = 4.8e12

	// H200: 4.3e12/3 = 1.4333e12 -> 1.43 TB/s.
	h200ReduceBW = 1.43e12
	// A100 80GB SXM, HBM2e 2.039 TB/s (NVIDIA A100 datasheet):
	// 1.4333e12 × 2.039/4.8 = 0.6089e12 -> 609 GB/s.
	a100ReduceBW = 609e9
	// H100 SXM, HBM3 3.35 TB/s (NVIDIA H100 datasheet):
	// 1.4333e12 × 3.35/4.8 = 1.0003e12 -> 1.00 TB/s.
	h100ReduceBW = 1.00e12
	// B200 (in GB200), HBM3e 8 TB/s (NVIDIA GB200 NVL72 specification,
	// 576 TB/s over 72 GPUs): 1.4333e12 × 8/4.8 = 2.3889e12 -> 2.39 TB/s.
	b200ReduceBW = 2.39e12
	// Apple M4 Max, 546 GB/s unified memory (Apple M4 Max specifications):
	// 1.4333e12 × 0.546/4.8 = 0.16304e12 -> 163 GB/s.
	m4MaxReduceBW = 163e9
)

// Virtual ranks on one GPU (commsim's cuda backend, placement virtual): a
// message is two device-to-device copies, into the sender's staging block
// and out of it into the receiver's buffer, each reading and writing every
// byte. So the H200's copy throughput of 4.3 TB/s read+written moves
// 4.3e12/4 = 1.075e12 bytes of messages per second, shared by every rank
// that sends at once, as the reductions share the reduce bandwidth.
const h200VirtualMsgBW = h200CopyBW / 4

var (
	srcA100NVLink = "DGX A100 NVLink3: 12 links × 25 GB/s = 300 GB/s per direction per GPU (REFERENCE.md; nccl-tests#149, #178: all-reduce busbw ≈230 GB/s)"
	srcH100NVLink = "DGX H100 NVLink4: 18 links, 450 GB/s per direction per GPU (REFERENCE.md; nccl-tests#212: ring busbw ≈365–370 GB/s; nccl#1455)"
	srcH200NVLink = "HGX H200 NVLink4: 900 GB/s bidirectional = 450 GB/s per direction per GPU (NVIDIA H200 product page)"
	srcB200NVLink = "GB200 NVL72 NVLink5: 1.8 TB/s bidirectional = 900 GB/s per direction per GPU, 72 GPUs in one NVLink Switch domain (NVIDIA GB200 NVL72 specification: 130 TB/s total)"
	srcSwitchLat  = "NVSwitch latency: ASTRA-sim validated HGX-H100 config, Switch, 8 NPUs, 936.25 ns GPU to GPU; 468.125 ns on each GPU-switch link (REFERENCE.md)"
	srcSwitchLat2 = "NVSwitch latency: no published figure for this system in REFERENCE.md; reuses the ASTRA-sim HGX-H100 936.25 ns, 468.125 ns per GPU-switch link"
	srcReduce     = "reduce bandwidth: a reduction reads 2s and writes s bytes, so reduce_bw = copy throughput/3; H200 device-to-device copy measured ≈4.3 TB/s read+written (REFERENCE.md) gives 1.43 TB/s"
	srcA100Reduce = srcReduce + "; A100 80GB scaled by HBM 2.039/4.8 TB/s (NVIDIA A100 and H200 datasheets) = 609 GB/s"
	srcH100Reduce = srcReduce + "; H100 SXM scaled by HBM 3.35/4.8 TB/s (NVIDIA H100 and H200 datasheets) = 1.00 TB/s"
	srcB200Reduce = srcReduce + "; B200 scaled by HBM 8/4.8 TB/s (NVIDIA GB200 NVL72 specification, H200 datasheet) = 2.39 TB/s"
	srcM4Reduce   = srcReduce + "; Apple M4 Max scaled by memory bandwidth 546 GB/s / 4.8 TB/s (Apple M4 Max specifications) = 163 GB/s"
	srcNDR        = "NIC: NDR InfiniBand 400 Gb/s = 50 GB/s per direction, one per GPU (REFERENCE.md; measured ≈46–48 GB/s, nccl-tests#290)"
	srcNDRLat     = "network latency: NCCL tuning model (src/graph/tuning.cc, Simple) 14 µs per network hop (REFERENCE.md), 7 µs on each NIC-switch link"
	srcPCIe       = "GPU-NIC: PCIe Gen5 x16 ≈ 64 GB/s per direction (REFERENCE.md), latency 0 (folded into the network hop)"
	srcTB5        = "Thunderbolt 5: 80 Gb/s per direction = 10 GB/s (REFERENCE.md)"
	srcTCP        = "latency: TCP between hosts, tens of µs (REFERENCE.md); 10 µs taken"
	srcVirtualBW  = "virtual ranks on one H200: a message is two device-to-device copies (into staging, out of it), each reading and writing every byte; the copy measured ≈4.3 TB/s read+written (REFERENCE.md) moves 4.3/4 = 1.075 TB/s of messages, split evenly: each of N ranks' links gets 1/N, as they share the HBM (bw= sets the GPU's total)"
	srcVirtualRed = srcReduce + ", split evenly: each of N ranks reduces at 1/N of it (reduce= sets the GPU's total)"
	srcVirtualLat = "latency: no figure for a virtual-rank message in REFERENCE.md yet; 0 until a GPU run measures it (scripts/gpu-check.sh's cli part prints the simulator beside the measurement); set it with lat="
)

type presetDef struct {
	Preset
	fam      family
	shape    bool // takes :N
	suffixed bool // takes xN glued to the name (dgx-h100xN)
}

func switchParams(bw, reduce float64) params {
	p := genericParams()
	p.bw, p.lat, p.reduce = bw, nvswitchLinkLat, reduce
	return p
}

// fixedSwitch builds n GPUs on one switch, ignoring the shape.
func fixedSwitch(n int) func(string, []int, params) ([]Node, []Link, error) {
	return func(spec string, _ []int, p params) ([]Node, []Link, error) {
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

// dgxNodes builds n[0] DGX nodes of 8 GPUs as a cluster.
func dgxNodes(spec string, n []int, p params) ([]Node, []Link, error) {
	return buildCluster(spec, []int{n[0], 8}, p)
}

func presetTable() []presetDef {
	h100x := genericParams()
	h100x.bw, h100x.lat, h100x.reduce = h100NVLinkBW, nvswitchLinkLat, h100ReduceBW
	h100x.nicbw, h100x.niclat = ndrBW, ndrLinkLat
	h100x.pciebw, h100x.pcielat = pcieGen5BW, 0

	mac := genericParams()
	mac.bw, mac.lat, mac.reduce = tb5BW, tcpLat, m4MaxReduceBW

	virtual := genericParams()
	virtual.bw, virtual.lat, virtual.reduce = h200VirtualMsgBW, 0, h200ReduceBW

	return []presetDef{
		{Preset: Preset{"dgx-a100", "8× A100 80GB on NVSwitch, 300 GB/s per direction per GPU",
			[]string{srcA100NVLink, srcSwitchLat2, srcA100Reduce}},
			fam: family{"dgx-a100", plainKeys, switchParams(a100NVLinkBW, a100ReduceBW), fixedSwitch(8)}},
		{Preset: Preset{"dgx-h100", "8× H100 SXM on NVSwitch, 450 GB/s per direction per GPU",
			[]string{srcH100NVLink, srcSwitchLat, srcH100Reduce}},
			fam: family{"dgx-h100", plainKeys, switchParams(h100NVLinkBW, h100ReduceBW), fixedSwitch(8)}},
		{Preset: Preset{"hgx-h200", "8× H200 on NVSwitch, 450 GB/s per direction per GPU",
			[]string{srcH200NVLink, srcSwitchLat2, srcReduce}},
			fam: family{"hgx-h200", plainKeys, switchParams(h100NVLinkBW, h200ReduceBW), fixedSwitch(8)}},
		{Preset: Preset{"dgx-h100xN", "N DGX H100 nodes (8 GPUs on NVSwitch each), one 400 Gb/s NDR NIC per GPU, one non-blocking IB switch (rail=true: rail-optimised)",
			[]string{srcH100NVLink, srcSwitchLat, srcH100Reduce, srcNDR, srcNDRLat, srcPCIe}},
			fam:      family{"dgx-h100xN", clusterKeys, h100x, dgxNodes},
			suffixed: true},
		{Preset: Preset{"gb200-nvl72", "72× B200 in one NVLink5 Switch domain, 900 GB/s per direction per GPU",
			[]string{srcB200NVLink, srcSwitchLat2, srcB200Reduce}},
			fam: family{"gb200-nvl72", plainKeys, switchParams(b200NVLinkBW, b200ReduceBW), fixedSwitch(72)}},
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

func presetNames() string {
	var names []string
	for _, d := range presetTable() {
		names = append(names, d.Name)
	}
	return strings.Join(names, ", ")
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
