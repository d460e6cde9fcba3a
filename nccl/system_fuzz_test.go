package nccl_test

import (
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// FuzzModelOnAnySystem: NCCL's model on a System and Options of any
// fields (NaN, infinite and negative figures, releases it has not, an
// Options written into a Tuner after it was made): the model's functions
// and a Tuner's choose, price and plan, or refuse with a one-line error;
// what they plan passes ops.Check; nothing panics (a Tuner's unchecked
// Options divided by zero).
func FuzzModelOnAnySystem(f *testing.F) {
	f.Add(16, 2, 8, true, uint8(2), uint8(1), 18, 360.0, 50e9, 8, 50.0, 48.0, false, true, true, false, 1e12,
		uint8(12), 0, 0, 0, int64(0), 0, 0, 0.0, 0.0, 0.0, uint8(0), int64(1024), 3)
	f.Add(8, 1, 8, true, uint8(1), uint8(2), 12, 240.0, 25e9, 0, 0.0, 0.0, false, true, false, false, math.Inf(1),
		uint8(5), 4, 2, 8, int64(1<<20), 512, 256, 1.5, 0.5, 20.0, uint8(3), int64(1<<30), 100)
	f.Add(-8, 0, -8, false, uint8(0), uint8(0), -1, math.NaN(), -1.0, -1, math.Inf(1), -0.0, true, false, true, true, -1.0,
		uint8(255), -1, -1, -1, int64(-1), -1, -1, math.NaN(), math.Inf(-1), -5.0, uint8(7), int64(-7), -3)
	f.Add(16, 2, 8, true, uint8(2), uint8(1), 18, 360.0, 50e9, 8, 50.0, 48.0, false, true, true, false, 1e12,
		uint8(12), 0, 0, 0, int64(1), 0, 0, -90.0, 0.0, 0.0, uint8(8), int64(1024), 256) // sendrecv: a byte's buffer divided by zero
	f.Fuzz(func(t *testing.T, ranks, nodes, perNode int, nodeMajor bool, arch, cpu uint8, nvlinks int, intraBW, linkBW float64,
		nics int, nicBW, pcieBW float64, nicsOnCPU, nvswitch, nvls, sharp bool, reduceBW float64,
		minor uint8, channels, minCh, maxCh int, buff int64, threads, ll128Threads int,
		launch, hop, chanGBps float64, op uint8, bytes int64, count int) {
		s := nccl.System{Ranks: ranks, Nodes: nodes, PerNode: perNode, NodeMajor: nodeMajor, Arch: topology.Arch(arch % 8),
			CPU: topology.CPUVendor(cpu % 6), NVLinks: nvlinks, IntraBW: intraBW, LinkBW: linkBW, NICs: nics, NICBW: nicBW,
			PCIeBW: pcieBW, NICsOnCPU: nicsOnCPU, NVSwitch: nvswitch, NVLSCapable: nvls, SHARP: sharp, ReduceBW: reduceBW}
		v := nccl.Version(210 + int(minor)%25) // 2.10 to 2.34: releases the model has, and some it has not
		o := nccl.Options{Version: v, Channels: channels, MinChannels: minCh, MaxChannels: maxCh, BuffSize: buff,
			Threads: threads, LL128Threads: ll128Threads, Machine: nccl.Machine{Launch: launch, Hop: hop, ChannelGBps: chanGBps}}
		oneLine := func(what string, err error) {
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s on %v: an error of several lines: %v", what, s, err)
			}
		}
		theOp := ops.Op(op % 11)
		_ = nccl.Estimates(s, theOp, bytes, o)
		_ = nccl.Channels(s, o)
		_ = nccl.Graphs(s, v)
		c, err := nccl.Tune(s, theOp, bytes, o)
		oneLine("Tune", err)
		_, err2 := nccl.CostTable(s, o)
		oneLine("CostTable", err2)
		if ranks < 1 || ranks > 64 || count < 0 || count > 4096 {
			return
		}
		spec := ops.Spec{Op: theOp, Ranks: ranks, Count: count, DType: hw.F32, Redop: hw.Sum}
		if err == nil {
			plan, err := nccl.Plan(s, spec, c, o)
			oneLine("Plan", err)
			if err == nil {
				if err := ops.Check(plan); err != nil {
					t.Fatalf("%v, %v: %s fails ops.Check: %v", s, spec, nccl.Label(plan), err)
				}
			}
		}
		tuner, err := (&nccl.Tuner{System: s}).With(nccl.Options{})
		if err != nil {
			return
		}
		tuner.Options = o // the caller's field: written after the Tuner was made
		plan, _, err := tuner.Plan(spec)
		oneLine("Tuner.Plan", err)
		if err == nil {
			if err := ops.Check(plan); err != nil {
				t.Fatalf("%v, %v: the Tuner's %s fails ops.Check: %v", s, spec, nccl.Label(plan), err)
			}
		}
		_, err = tuner.Ranked(spec)
		oneLine("Ranked", err)
	})
}
