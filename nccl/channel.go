package nccl

import "github.com/commsim/commsim/topology"

// What one channel, one block of threads, moves on each GPU architecture,
// in GB/s, as published nccl-tests runs measure it where nothing else
// limits it: few channels over NVLink, or rings whose channels share a
// NIC two to one and so cannot fill it. NCCL's model states no such
// figure. Every figure comes from runs held out of issue #16's targets
// (fidelity/nccl-logs, held_out in logs.yaml):
//
//   - Hopper, 20.3: 8 H100s' sendrecv (xxrjun, NCCL 2.29.2) 19.9, 20.5
//     and 20.3 a channel on 4, 4 and 8 channels (32, 64 and 128 MiB);
//     10 × 8 H100s' all-gather and reduce-scatter rings at 16 GiB
//     (the same cluster) 20.3 and 20.2 on 16 channels; 2 × 8 H200s'
//     all-gather rings at 8 GiB (GCP A3 Ultra) 20.4 on 16. The median of
//     the six is 20.3 (fidelity's TestMeasuredChannelRates reads them).
//   - Blackwell, 22.3: 2 × 4 GB300s' all-gather rings at 16 GiB (GCP
//     A4X Max, NCCL 2.28.9) on 16 channels. The B200 runs in the targets
//     move 19.0–21.7 (16 and 8 B200s' all-gather and reduce-scatter, 8
//     B200s' sendrecv): not used, and so left 2–15% fast from 1 GiB,
//     where a channel binds.
//
// NCCL's own tuner carries constants of the same kind, measured caps on
// a channel's speed (perChMaxRingLL128Bw, perChMaxTreeBw: NCCL-MODEL.md),
// but none for a ring's Simple channel, the one that binds at large
// sizes; these fill that gap by default.
//
// Older architectures have none: their channels' shares of NCCL's model
// are below what a block moves, and no run shows one.
var measuredChannelGBps = map[topology.Arch]float64{
	topology.Hopper:    20.3,
	topology.Blackwell: 22.3,
}

// MeasuredChannel is what one channel moves on architecture a, in GB/s,
// as the published runs above measure it; ok is false where none does.
// The zero Machine applies it; Machine.NoChannelRate drops it.
func MeasuredChannel(a topology.Arch) (gbps float64, ok bool) {
	gbps, ok = measuredChannelGBps[a]
	return gbps, ok
}
