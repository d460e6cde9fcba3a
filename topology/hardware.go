package topology

import (
	"fmt"
	"strings"
)

// Arch is a GPU's architecture. NCCL's cost model depends on it (per-link
// NVLink bandwidth, NVLS efficiency, per-channel caps, the LL bandwidth cap
// on one node: NCCL-MODEL.md §5, §6), so a fabric that wants NCCL's
// behaviour says which GPUs it has. The zero value, UnknownArch, is what a
// spec-built fabric (ring:8, cluster:2x8, …) has unless arch= says
// otherwise; a reader then assumes a default of its own and documents it.
type Arch uint8

// GPU architectures, oldest first.
const (
	UnknownArch Arch = iota
	Volta            // SM70: V100, NVLink2
	Ampere           // SM80: A100, NVLink3
	Hopper           // SM90: H100, H200, NVLink4
	Blackwell        // SM100: B200, GB200, NVLink5
)

var archNames = [...]string{UnknownArch: "unknown", Volta: "volta", Ampere: "ampere", Hopper: "hopper", Blackwell: "blackwell"}

// String returns "unknown", "volta", "ampere", "hopper" or "blackwell", and
// "arch(N)" for anything else.
func (a Arch) String() string {
	if a <= Blackwell {
		return archNames[a]
	}
	return fmt.Sprintf("arch(%d)", uint8(a))
}

// ParseArch parses "volta", "ampere", "hopper", "blackwell" or "unknown"
// (case-insensitive).
func ParseArch(s string) (Arch, error) {
	for a := UnknownArch; a <= Blackwell; a++ {
		if strings.EqualFold(s, archNames[a]) {
			return a, nil
		}
	}
	return 0, newErr(ErrSpec, "unknown gpu arch %q (want volta, ampere, hopper, blackwell or unknown)", s)
}

// SM returns the architecture's compute capability as NCCL numbers it
// (70, 80, 90, 100), or 0 when unknown.
func (a Arch) SM() int {
	switch a {
	case Volta:
		return 70
	case Ampere:
		return 80
	case Hopper:
		return 90
	case Blackwell:
		return 100
	}
	return 0
}

// NVLinkRate returns the line rate of one NVLink of this architecture, in
// bytes per second per direction, or 0 when unknown. A GPU's link to its
// NVSwitch in a preset carries all of the GPU's NVLinks, so the number of
// NVLinks is that link's BW / NVLinkRate (NCCL's own per-link figures,
// NCCL-MODEL.md §6, are lower: they are what it expects to achieve).
//
//	Volta     NVLink2 25 GB/s: V100, 6 links, 300 GB/s both directions together (NVIDIA V100 datasheet: NVLink 300 GB/s; Volta whitepaper: six links)
//	Ampere    NVLink3 25 GB/s: A100, 12 links, 300 GB/s per direction (REFERENCE.md, DGX A100 row)
//	Hopper    NVLink4 25 GB/s: H100/H200, 18 links, 450 GB/s per direction (REFERENCE.md, DGX H100 row)
//	Blackwell NVLink5 50 GB/s: B200, 18 links, 1.8 TB/s both directions (NVIDIA DGX SuperPOD GB200 RA, network fabrics: "18 NVL5 links", 1.8 TB/s)
func (a Arch) NVLinkRate() float64 {
	switch a {
	case Volta, Ampere, Hopper:
		return 25e9
	case Blackwell:
		return 50e9
	}
	return 0
}

// NVLinkExtraLatency is how much longer, in seconds, one crossing from a
// GPU through NVLink to another takes on this architecture than on
// Hopper. NCCL's model has one per-hop NVLink latency for every
// generation (its hwLat, NCCL-MODEL.md §3), which matches Hopper; a
// simulated wire adds this to it, and Blackwell presets to their
// GPU-switch links.
//
//	Blackwell 0.7 µs: an 8-byte all-reduce on 8× B200 took ≈3 µs where 8× H200 or H800 took
//	          ≈2.3 µs, with NCCL 2.27's symmetric-memory kernel and the same tuning on both
//	          (NVIDIA/nccl#1940); that kernel crosses NVLink once (each rank stores into its
//	          peers' buffers), so the crossing carries the difference.
func (a Arch) NVLinkExtraLatency() float64 {
	if a == Blackwell {
		return 0.7e-6
	}
	return 0
}

// CPUVendor is the vendor of a fabric's host CPUs. NCCL's LL bandwidth cap
// on several nodes and its per-step network overhead depend on it
// (NCCL-MODEL.md §3, §5). The zero value, UnknownCPU, is what a spec-built
// fabric has unless cpu= says otherwise.
type CPUVendor uint8

// Host CPU vendors.
const (
	UnknownCPU CPUVendor = iota
	IntelCPU             // x86, Intel (DGX H100/H200: Xeon 8480C; DGX B200: Xeon 8570)
	AMDCPU               // x86, AMD (DGX A100: EPYC 7742)
	ARMCPU               // Arm, such as NVIDIA Grace (GB200)
)

var cpuNames = [...]string{UnknownCPU: "unknown", IntelCPU: "intel", AMDCPU: "amd", ARMCPU: "arm"}

// String returns "unknown", "intel", "amd" or "arm", and "cpu(N)" for
// anything else.
func (c CPUVendor) String() string {
	if c <= ARMCPU {
		return cpuNames[c]
	}
	return fmt.Sprintf("cpu(%d)", uint8(c))
}

// ParseCPUVendor parses "intel", "amd", "arm" or "unknown"
// (case-insensitive).
func ParseCPUVendor(s string) (CPUVendor, error) {
	for c := UnknownCPU; c <= ARMCPU; c++ {
		if strings.EqualFold(s, cpuNames[c]) {
			return c, nil
		}
	}
	return 0, newErr(ErrSpec, "unknown cpu vendor %q (want intel, amd, arm or unknown)", s)
}
