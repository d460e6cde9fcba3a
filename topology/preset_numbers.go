package topology

// The numbers the presets are built from and the source of each. Every
// number names its source; REFERENCE means /work/shared/REFERENCE.md of the
// commsim project, which records the public source of each row, and
// nccl-logs/ and NCCL-MODEL.md sit beside it.

// NetCrossing is how long the presets' network takes a message from NIC
// to switch to NIC: NCCL's per-hop network latency with Simple (14 µs,
// tuning.cc), which their NDR InfiniBand takes as its own. Package
// nccl's wires take NCCL's per-protocol figures for a crossing this long
// and add what a longer route across the network takes beyond it.
const NetCrossing = 14e-6

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
	ndrLinkLat = NetCrossing / 2

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

// A small message between two virtual ranks took 46.6 µs on a lent H200
// (2026-12-04: hw/cuda's TestVirtualMessageLatency, 200 ping-pongs of 4
// bytes timed by GPU events; 39–47 µs with GOMAXPROCS 1, 2 and 16). The
// GPU's own part is 5.5–7.4 µs a copy; the rest is the host handing the
// message from the sender's worker thread to the receiver's. A message
// crosses two links (rank, switch, rank), so each link takes half.
const h200VirtualMsgLat = 46.6e-6 / 2

var (
	srcA100NVLink    = "DGX A100 NVLink3: 12 links × 25 GB/s = 300 GB/s per direction per GPU (NVIDIA DGX A100 datasheet; nccl-tests#149, #178: all-reduce busbw ≈230 GB/s)"
	srcH100NVLink    = "DGX H100 NVLink4: 18 links, 450 GB/s per direction per GPU (NVIDIA DGX H100 datasheet; nccl-tests#212: ring busbw ≈365–370 GB/s; nccl#1455)"
	srcH200NVLink    = "HGX H200 NVLink4: 900 GB/s bidirectional = 450 GB/s per direction per GPU (NVIDIA H200 product page)"
	srcB200NVLink    = "GB200 NVL72 NVLink5: 1.8 TB/s bidirectional = 900 GB/s per direction per GPU, 72 GPUs in one NVLink Switch domain (NVIDIA GB200 NVL72 specification: 130 TB/s total)"
	srcSwitchLat     = "NVSwitch latency: ASTRA-sim validated HGX-H100 config, Switch, 8 NPUs, 936.25 ns GPU to GPU; 468.125 ns on each GPU-switch link (ASTRA-sim examples)"
	srcSwitchLat2    = "NVSwitch latency: no published figure for this system was found; reuses the ASTRA-sim HGX-H100 936.25 ns, 468.125 ns per GPU-switch link"
	srcSwitchLatB200 = "NVLink5 latency: the ASTRA-sim HGX-H100 936.25 ns GPU to GPU plus 0.7 µs, 818.125 ns per GPU-switch link: an 8-byte all-reduce took ≈3 µs on 8× B200 and ≈2.3 µs on 8× H200/H800 with the same NCCL 2.27 symmetric kernel and tuning (NVIDIA/nccl#1940), one NVLink crossing apart (topology.Arch.NVLinkExtraLatency)"
	srcReduce        = "reduce bandwidth: a reduction reads 2s and writes s bytes, so reduce_bw = copy throughput/3; H200 device-to-device copy ≈4.3 TB/s read+written (the project's reference figure for a lent H200; commsim's own H200 run measured 3.76-4.18) gives 1.43 TB/s"
	srcA100Reduce    = srcReduce + "; A100 80GB scaled by HBM 2.039/4.8 TB/s (NVIDIA A100 and H200 datasheets) = 609 GB/s"
	srcH100Reduce    = srcReduce + "; H100 SXM scaled by HBM 3.35/4.8 TB/s (NVIDIA H100 and H200 datasheets) = 1.00 TB/s"
	srcB200Reduce    = srcReduce + "; B200 scaled by HBM 8/4.8 TB/s (NVIDIA GB200 NVL72 specification, H200 datasheet) = 2.39 TB/s"
	srcM4Reduce      = srcReduce + "; Apple M4 Max scaled by memory bandwidth 546 GB/s / 4.8 TB/s (Apple M4 Max specifications) = 163 GB/s"
	srcNDR           = "NIC: NDR InfiniBand 400 Gb/s = 50 GB/s per direction, one per GPU (measured ≈46–48 GB/s, nccl-tests#290)"
	srcNDRLat        = "network latency: NCCL tuning model (src/graph/tuning.cc, Simple) 14 µs per network hop, 7 µs on each NIC-switch link"
	srcPCIe          = "GPU-NIC: PCIe Gen5 x16 ≈ 64 GB/s per direction (32 GT/s × 16 lanes), latency 0 (folded into the network hop)"
	srcTB5           = "Thunderbolt 5: 80 Gb/s per direction = 10 GB/s (Intel Thunderbolt 5: 80 Gb/s each way)"
	srcTCP           = "latency: TCP between hosts, tens of µs; 10 µs taken (an assumption: no measurement at hand)"
	srcVirtualBW     = "virtual ranks on one H200: a message is two device-to-device copies (into staging, out of it), each reading and writing every byte; the copy at ≈4.3 TB/s read+written (the reference figure for a lent H200) moves 4.3/4 = 1.075 TB/s of messages, split evenly: each of N ranks' links gets 1/N, as they share the HBM (bw= sets the GPU's total)"
	srcVirtualRed    = srcReduce + ", split evenly: each of N ranks reduces at 1/N of it (reduce= sets the GPU's total)"
	srcVirtualLat    = "latency: a 4-byte message between two virtual ranks took 46.6 µs on a lent H200 (hw/cuda's TestVirtualMessageLatency, by GPU events; 5.5–7.4 µs of it the GPU's copies, the rest the host's hand-over between worker threads), 23.3 µs on each of its two links; rings of more ranks take longer a step than a message, as the GPU runs every rank's small operations (set it with lat=)"
)

// Networks and host links of the multi-node presets other than dgx-h100xN.
const (
	// HDR InfiniBand: 200 Gb/s per port = 25 GB/s per direction; a DGX
	// A100 has eight, one per GPU (REFERENCE, DGX A100 with 8×200 Gb/s IB,
	// nccl#812).
	hdrBW = 200e9 / 8

	// GPU to NIC on an A100: PCIe Gen4 x16 ≈ 32 GB/s per direction
	// (REFERENCE); latency 0, folded into the network hop as for Gen5.
	pcieGen4BW = 32e9
	// XDR InfiniBand or ConnectX-8 at 800 Gb/s = 100 GB/s per direction,
	// one per GPU on Blackwell Ultra systems (NVIDIA HGX AI Factory RA:
	// "800 Gb/s bandwidth per GPU"; ConnectX-8 firmware release notes:
	// "800Gb/s or XDR IB or 2 x 400GbE").
	xdrBW = 800e9 / 8

	// GPU to ConnectX-8: PCIe Gen6 x16 ≈ 128 GB/s per direction (64 GT/s
	// × 16 lanes; NVIDIA's Grace Blackwell CX8 GPUDirect RDMA guide:
	// "connected by a PCIe Gen6 x16 link"); latency 0 as for Gen5.
	pcieGen6BW = 128e9
)

// In-network reduction of the NVSwitch (NVLS, NVLink SHARP), as
// Node.ReduceBW defines it for a switch: the rate at which the switch
// produces reduced data, whatever the number of GPUs contributing.
//
// No datasheet gives this rate in bytes: NVIDIA publishes only relative
// figures (its HGX H100 technical blog: the third-generation NVSwitch's
// multicast and SHARP reductions, with NVLink4's faster links, give
// all-reduce 3x the effective bandwidth of HGX A100). ASSUMPTION: the switch's
// rate is the measured peak algorithm bandwidth of an 8-GPU NVLS all-reduce
// (a reduction of s bytes per GPU produces s bytes), that is, the switch,
// not the links, sets that peak. A100's second-generation NVSwitch has no
// NVLS (NCCL's nvlsEfficiency is 0 on Ampere, NCCL-MODEL.md §5).
const (
	// Hopper (H100, H200): 8× H100 all-reduce at 16 GiB, algbw 276.03 GB/s,
	// busbw 483 (nccl-logs/aws-batch-p5-allreduce-8xH100.txt); nccl-tests#212
	// gives busbw ≈480, algbw ≈275 (NCCL-MODEL.md §11). 276 GB/s.
	nvlsHopperBW = 276e9
	// Blackwell (B200, GB200): 8× B200 (HGX) all-reduce at 16 GiB, algbw
	// 481.66 GB/s, busbw 843 (fidelity/nccl-logs/vultr-b200-allreduce-8xB200.txt).
	// 482 GB/s. No 72-GPU measurement is at hand: gb200-nvl72 uses the same
	// figure (same NVLink5 links and switch generation), also an assumption.
	nvlsBlackwellBW = 482e9
)

var (
	srcNVLSNone   = "NVLS: none; A100's second-generation NVSwitch has no NVLink SHARP, which came with the third generation (NVIDIA technical blog, Upgrading Multi-GPU Interconnectivity with the Third-Generation NVIDIA NVSwitch); NCCL's nvlsEfficiency is 0 on Ampere (NCCL's src/graph/tuning.cc)"
	srcNVLSHopper = "NVLS switch reduce 276 GB/s: no datasheet gives NVLink SHARP's rate in bytes; ASSUMPTION: the switch's rate is the measured 8-GPU NVLS all-reduce peak algbw, 276.03 GB/s at 16 GiB (fidelity/nccl-logs/aws-batch-p5-allreduce-8xH100.txt, busbw 483; nccl-tests#212 ≈480 busbw), i.e. the switch, not the links, sets that peak"
	srcNVLSH200   = srcNVLSHopper + "; H200 uses the same NVLink4 NVSwitch baseboard as H100, so the H100 figure is assumed"
	srcNVLSB200   = "NVLS switch reduce 482 GB/s: no datasheet gives NVLink SHARP's rate in bytes; ASSUMPTION: the switch's rate is the measured 8× B200 NVLS all-reduce peak algbw, 481.66 GB/s at 16 GiB (fidelity/nccl-logs/vultr-b200-allreduce-8xB200.txt, busbw 843), i.e. the switch, not the links, sets that peak"
	srcNVLSNVL72  = srcNVLSB200 + "; no 72-GPU measurement is at hand: the 8-GPU figure is assumed for the NVL72 domain (same NVLink5 links and switch generation)"

	srcDGXA100 = "DGX A100: 8× A100 (arch Ampere, SM80); host CPUs 2× AMD EPYC 7742 (NVIDIA DGX A100 user guide and datasheet): cpu amd"
	srcDGXH100 = "DGX H100: 8× H100 (arch Hopper, SM90), four NVSwitch chips; host CPUs 2× Intel Xeon Platinum 8480C with PCIe 5.0; eight single-port ConnectX-7 up to 400 Gb/s (NVIDIA DGX BasePOD RA, core components): cpu intel"
	srcHGXH200 = "HGX H200: 8× H200 (arch Hopper, SM90) on an NVLink4 NVSwitch baseboard; an HGX server's host CPU is its maker's choice (NVIDIA HGX AI Factory RA), so cpu unknown"
	srcB200x8  = "B200 8-GPU node NVLink5: 18 links per GPU (NV18) = 1.8 TB/s both directions = 900 GB/s per direction; two NVLink5 switches with 14.4 TB/s aggregate = 8 × 1.8 TB/s (NVIDIA DGX B200 user guide, hardware overview)"
	srcHGXB200 = "HGX B200: 8× B200 (arch Blackwell, SM100); an HGX server's host CPU is its maker's choice (NVIDIA HGX AI Factory RA), so cpu unknown"
	srcDGXB200 = "DGX B200: 8× B200 (arch Blackwell, SM100) on two NVLink5 switches (14.4 TB/s aggregate), host CPUs 2× Intel Xeon 8570 with PCIe Gen5, 8 single-port ConnectX-7 up to 400 Gb/s InfiniBand, one per GPU (NVIDIA DGX B200 user guide, hardware overview; DGX BasePOD RA): cpu intel"
	srcGB200   = "GB200 NVL72: 72 B200 (arch Blackwell, SM100) and 36 Grace CPUs (Arm): 18 compute trays of 2 Grace + 4 B200, each with 4 single-port ConnectX-7 400G NICs for the cluster network: one NIC per GPU (NVIDIA DGX GB200 user guide, hardware): cpu arm"

	srcB200HGXReduce = srcB200Reduce + "; assumes the HGX/DGX B200's GPU has the GB200's 8 TB/s (NVIDIA's own HGX B200 HBM figure was not found in the sources searched)"

	// Blackwell Ultra (B300, GB300): NCCL treats compute capability 10.3
	// as Blackwell (tuning.cc: minCompCap >= 100; topo.h: SM100_NVLINK_BW
	// for every cc >= 100), so only the numbers below differ from B200's.
	srcB300NVLink    = "B300 NVLink5: 18 links × 100 GB/s = 1.8 TB/s both directions = 900 GB/s per direction per GPU (NVIDIA NVLink page); HGX B300: eight GPUs, 14.4 TB/s total NVLink (NVIDIA HGX AI Factory RA, 2-8-9-800); GB300 NVL72: 9 NVSwitch trays, 130 TB/s over 72 GPUs (NVIDIA NVL72 AI Factory RA, components)"
	srcB300Reduce    = srcReduce + "; B300 scaled by HBM 8/4.8 TB/s (GB300 NVL72: 20 TB of HBM at 576 TB/s over 72 GPUs, NVIDIA's GTC 2025 figures; H200 datasheet) = 2.39 TB/s, B200's"
	srcB300HGXReduce = srcB300Reduce + "; assumes the HGX/DGX B300's GPU has the GB300's 8 TB/s"
	srcNVLSB300      = srcNVLSB200 + "; B300 assumed the same (same NVLink5 switch generation), which NVIDIA/nccl#2140 bears out: 8× B300 NVLS all-reduce busbw 845 GB/s, algbw 483"
	srcNVLSNVL72U    = srcNVLSB300 + "; no 72-GPU measurement is at hand: the 8-GPU figure is assumed for the NVL72 domain"
	srcHGXB300       = "HGX B300: 8× B300 (Blackwell Ultra, compute capability 10.3, arch Blackwell to NCCL); an HGX server's host CPU is its maker's choice (NVIDIA HGX AI Factory RA), so cpu unknown"
	srcDGXB300       = "DGX B300: 8× B300 (arch Blackwell to NCCL) on 2 NVLink5 switch chips (14.4 TB/s aggregate), host CPUs Intel Xeon 6776P, 8 OSFP ports serving 8 single-port ConnectX-8, one per GPU (NVIDIA DGX B300 specifications): cpu intel"
	srcGB300         = "GB300 NVL72: 72 B300 (arch Blackwell to NCCL) and 36 Grace CPUs (Arm): 18 compute trays of 2 Grace + 4 GPUs, each with 4 ConnectX-8 for the cluster network, one per GPU (NVIDIA NVL72 AI Factory RA, components): cpu arm"
	srcXDR           = "NIC: ConnectX-8 at 800 Gb/s (XDR InfiniBand) = 100 GB/s per direction, one per GPU on its rail (NVIDIA HGX AI Factory RA: 800 Gb/s per GPU; ConnectX-8 firmware release notes: 800Gb/s or XDR IB or 2 x 400GbE: on Ethernet, nicbw=800Gb/s,nicports=2)"
	srcPCIeGen6      = "GPU-NIC: PCIe Gen6 x16 ≈ 128 GB/s per direction (64 GT/s × 16 lanes; NVIDIA Grace Blackwell CX8 GPUDirect RDMA guide: GPU and CX8 connected by a PCIe Gen6 x16 link; on HGX B300 the ConnectX-8's own Gen6 switch joins them, an assumption from secondary sources), latency 0 (folded into the network hop)"

	srcHDR       = "NIC: HDR InfiniBand 200 Gb/s = 25 GB/s per direction, one per GPU (DGX A100 with 8×200 Gb/s IB, nccl#812; NVIDIA DGX SuperPOD H100 RA: DGX H100's 400 Gb/s ConnectX-7 is 2X the DGX A100's networking)"
	srcNDRRail   = "NIC: NDR InfiniBand 400 Gb/s = 50 GB/s per direction, one per GPU on its rail (measured ≈46–48 GB/s, nccl-tests#290)"
	srcPCIeGen4  = "GPU-NIC: PCIe Gen4 x16 ≈ 32 GB/s per direction (16 GT/s × 16 lanes; A100's host interface is PCIe Gen4, NVIDIA A100 datasheet), latency 0 (folded into the network hop)"
	srcPCIeGB200 = "GPU-NIC: PCIe Gen5 x16 ≈ 64 GB/s per direction (32 GT/s × 16 lanes), the ConnectX-7's own host interface; how a GB200 tray wires each NIC to its B200 was not found: assumption; latency 0 (folded into the network hop)"

	// The rail-optimised fabric of the DGX SuperPOD RAs, as this package
	// draws it (buildCluster with rail=true).
	srcRailRA      = "network: rail-optimised leaf/spine: NIC g of every node on rail g's leaf switch rail<g> (NVIDIA DGX SuperPOD H100 RA: each group of 32 nodes is rail-aligned, traffic between rails traverses the spine). Non-blocking: 4 scalable units = 32 leaf + 16 spine switches with 1024 node-leaf and 1024 leaf-spine cables (NVIDIA DGX SuperPOD B200 RA; H100 RA: 32 leaf, 16 spine, 1020 and 1024), so each leaf has as many 400 Gb/s uplinks as downlinks. Here one leaf per rail whatever N (the RA has one per rail per 32-node unit) and one node, spine, stands for the N/8 spine switches, since a route takes one path (no ECMP) and parallel spines would leave all but the first idle: each leaf-spine link is N × the NIC rate, latency niclat"
	srcRailAssumed = srcRailRA + "; this system's own RA figures were not read: the DGX SuperPOD shape is assumed"
)
