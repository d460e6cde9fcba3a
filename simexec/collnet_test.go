package simexec_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// TestCollNetPlansRunRight: CollNet plans (one GPU per node) run on
// fabrics whose network switches reduce (SHARP: sharp=), flat or
// rail-optimised, and give every rank exactly the reduction of the
// ranks' inputs in rank order, or the gathered blocks, bit for bit, in
// place and out, with sum and avg.
func TestCollNetPlansRunRight(t *testing.T) {
	for _, run := range []struct {
		algo string
		op   ops.Op
	}{
		{"nccl-collnet-direct", ops.AllReduce},
		{"nccl-collnet-direct", ops.ReduceScatter},
		{"nccl-collnet-direct", ops.AllGather},
		{"nccl-collnet-chain", ops.AllReduce},
	} {
		for _, tc := range []struct {
			topo                  string
			count, channels, chnk int
			redop                 hw.ReduceOp
		}{
			{"cluster:4x1,sharp=inf", 11, 2, 2, hw.Sum},
			{"cluster:3x1,rail=true,sharp=100GB/s", 37, 3, 0, hw.Avg},
		} {
			c, _ := world(t, tc.topo, sim.Config{})
			spec := ops.Spec{Op: run.op, Algo: run.algo, Ranks: len(c.Devices()), Count: tc.count, DType: hw.F32, Redop: tc.redop,
				Channels: tc.channels, Chunk: tc.chnk, NodeRanks: 1}
			plan, err := ops.Compile(spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, inPlace := range []bool{false, true} {
				name := fmt.Sprintf("%v on %s, in place %v", spec, tc.topo, inPlace)
				in, out := buffers(t, c, plan, inPlace)
				xs := nvlsInputs(t, plan, in, uint64(tc.count))
				if _, err := simexec.NewExecutor(c).Run(plan, in, out); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				for r := range plan.Ranks {
					got := make([]byte, out[r].Buf.Len()*4)
					if err := out[r].Buf.Read(got); err != nil {
						t.Fatal(err)
					}
					got = got[out[r].Off*4 : (out[r].Off+out[r].Len)*4]
					if want := nvlsWant(t, spec, xs, r); !bytes.Equal(got, want) {
						t.Fatalf("%s: rank %d's output differs from the rank-order reduction", name, r)
					}
				}
				for _, b := range append(in, out...) {
					_ = b.Buf.Free()
				}
			}
		}
	}
}

// TestCollNetSwitchStepsSimulatedAsCosted: through a network switch that
// reduces, the simulator times switch steps as Cost prices them: the way
// up from each GPU through its NIC (PCIe hop and NIC link latencies),
// the switch's reduction rate or the NIC links', whichever is narrower.
func TestCollNetSwitchStepsSimulatedAsCosted(t *testing.T) {
	for _, fabric := range []string{"cluster:4x1,sharp=30GB/s,pcielat=1us,niclat=2us", "cluster:4x1,rail=true,sharp=inf,pcielat=0.5us"} {
		topo, err := topology.Parse(fabric)
		if err != nil {
			t.Fatal(err)
		}
		c, err := sim.NewCluster(topo, sim.Config{TimingOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		plan := switchChain(topo.NumGPUs(), 1<<20)
		in, out := buffers(t, c, plan, false)
		got, err := simexec.NewExecutor(c).Run(plan, in, out)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ops.Cost(plan, topo)
		if err != nil || math.Abs(got-want) > 1e-12*float64(plan.NumSteps()) {
			t.Errorf("%s: simulated %v s, costed %v s (%v)", fabric, got, want, err)
		}
		c.Close()
	}
}

// TestCollNetRunsAtTheSHARPPace: a large CollNet all-reduce over eight
// nodes keeps several passes of a channel in the network at once, so
// that the narrower of the SHARP switch's reduction (sharp=) and the
// NICs' links sets its algorithm bandwidth: within 10% under 20 GB/s
// with sharp=20GB/s, and under the NICs' 50 GB/s with sharp=inf (each
// NIC carries the data up once and the result down once).
func TestCollNetRunsAtTheSHARPPace(t *testing.T) {
	for _, tc := range []struct {
		topo string
		rate float64
	}{
		{"cluster:8x1,sharp=20GB/s,nicbw=50GB/s", 20e9},
		{"cluster:8x1,sharp=inf,nicbw=50GB/s", 50e9},
	} {
		c, _ := world(t, tc.topo, sim.Config{TimingOnly: true})
		spec := ops.Spec{Op: ops.AllReduce, Algo: "nccl-collnet-direct", Ranks: 8, Count: 1 << 26, DType: hw.F32, Redop: hw.Sum,
			Channels: 4, Chunk: 32 << 10, NodeRanks: 1}
		plan, err := ops.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		in, out := buffers(t, c, plan, false)
		secs, err := simexec.NewExecutor(c).Run(plan, in, out)
		if err != nil {
			t.Fatal(err)
		}
		if algbw := float64(spec.Count*4) / secs; algbw > tc.rate || algbw < 0.9*tc.rate {
			t.Errorf("%s: algorithm bandwidth %.1f GB/s, want just under %.0f GB/s", tc.topo, algbw/1e9, tc.rate/1e9)
		}
	}
}

// TestCollNetNeedsSHARP: on nodes joined by a network whose switch does
// not reduce, the simulator fails a CollNet run, and Cost its pricing,
// with topology.ErrRoute naming SHARP; the generic driver refuses it
// before running anything.
func TestCollNetNeedsSHARP(t *testing.T) {
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-collnet-direct", Ranks: 4, Count: 64, DType: hw.F32, Redop: hw.Sum, Channels: 2, NodeRanks: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, topo := world(t, "cluster:4x1", sim.Config{})
	in, out := buffers(t, c, plan, false)
	if _, err := simexec.NewExecutor(c).Run(plan, in, out); !errors.Is(err, topology.ErrRoute) || !strings.Contains(err.Error(), "SHARP") {
		t.Fatalf("run without SHARP: %v, want topology.ErrRoute naming SHARP", err)
	}
	if _, err := ops.Cost(plan, topo); !errors.Is(err, topology.ErrRoute) {
		t.Fatalf("cost without SHARP: %v, want topology.ErrRoute", err)
	}
	if _, err := ops.NewExecutor(c.World()).Run(plan, in, out); !errors.Is(err, ops.ErrUnsupported) || !strings.Contains(err.Error(), "SHARP") {
		t.Fatalf("generic run: %v, want ErrUnsupported naming SHARP", err)
	}
}
