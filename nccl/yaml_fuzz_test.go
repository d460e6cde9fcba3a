package nccl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// fabricBytes makes a small YAML fabric out of b, a byte a choice (0
// where b runs out): 2 to 6 GPUs of one architecture, in nodes of 1 to 3
// on an NVLink switch of their own (which may reduce, as NVLS); each GPU
// with a NIC of its own, its neighbour's, or none; each NIC cabled to a
// network switch (which may reduce, as SHARP), to a second switch behind
// it, or to another NIC. What spec strings cannot make: NICs shared by
// GPUs of two nodes, NICs cabled to each other, GPUs without a NIC.
func fabricBytes(b []byte) string {
	next := func(n int) int {
		if len(b) == 0 {
			return 0
		}
		v := int(b[0]) % n
		b = b[1:]
		return v
	}
	arch := []string{"hopper", "blackwell", "ampere"}[next(3)]
	gpus, perNode := 2+next(5), 1+next(3)
	var nodes, links []string
	node := func(name, kind, extra string) {
		nodes = append(nodes, fmt.Sprintf("  - {name: %s, kind: %s%s}", name, kind, extra))
	}
	link := func(a, b string, gbps, us int) {
		links = append(links, fmt.Sprintf("  - {a: %s, b: %s, bw: %dGB/s, lat: %dus}", a, b, gbps, us))
	}
	reduce := func() string { return []string{"", ", reduce: inf", ", reduce: 400GB/s"}[next(3)] }
	for g := range gpus {
		node(fmt.Sprintf("gpu%d", g), "gpu", ", arch: "+arch)
	}
	for n := 0; n*perNode < gpus; n++ {
		if perNode == 1 {
			continue
		}
		node(fmt.Sprintf("nv%d", n), "switch", reduce())
		for g := n * perNode; g < min(gpus, (n+1)*perNode); g++ {
			link(fmt.Sprintf("gpu%d", g), fmt.Sprintf("nv%d", n), 450, 1)
		}
	}
	node("ib", "switch", reduce())
	node("ib2", "switch", "")
	link("ib", "ib2", 400, 1)
	nics := 0
	for g := range gpus {
		switch choice := next(3); {
		case choice == 1 && nics > 0: // the last NIC, shared
			link(fmt.Sprintf("gpu%d", g), fmt.Sprintf("nic%d", nics-1), 64, 0)
		case choice == 2 && g > 0 && perNode > 1 && g%perNode != 0: // none: through its node's switch
		default:
			node(fmt.Sprintf("nic%d", nics), "nic", "")
			link(fmt.Sprintf("gpu%d", g), fmt.Sprintf("nic%d", nics), 64, 0)
			nics++
		}
	}
	for k := range nics {
		nic := fmt.Sprintf("nic%d", k)
		switch choice := next(3); {
		case choice == 1:
			link(nic, "ib2", 50, 2)
		case choice == 2 && k > 0:
			link(nic, fmt.Sprintf("nic%d", k-1), 50, 2)
		default:
			link(nic, "ib", []int{25, 50, 100}[next(3)], 2)
		}
	}
	return "name: fuzzed\nnodes:\n" + strings.Join(nodes, "\n") + "\nlinks:\n" + strings.Join(links, "\n") + "\n"
}

// FuzzTunerOnAnyYAMLFabric: on the fabrics fabricBytes makes, NCCL's
// tuner chooses or refuses every collective with a one-line error, and
// what it chooses the simulator runs (timing only); nothing panics. It
// found the tuner choosing CollNet through a NIC two nodes share, which
// the simulation then refused.
func FuzzTunerOnAnyYAMLFabric(f *testing.F) {
	for _, seed := range [][]byte{
		{},                                // two Hopper GPUs, a NIC each, on one switch
		{0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1}, // three nodes of one, two sharing a NIC, SHARP
		{0, 0, 0, 0, 0, 0, 0, 1, 2},       // two nodes whose NICs are cabled to each other
		{1, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 2, 0, 2, 0, 2, 0, 2}, // two Blackwell nodes of two, NVLS and SHARP
		{2, 2, 1, 0, 0, 0, 0, 2, 0, 2, 1, 0, 0},                // two A100 nodes of two, one NIC each, one behind a second switch
	} {
		f.Add(seed, uint8(40))
	}
	f.Fuzz(func(t *testing.T, b []byte, count uint8) {
		yaml := fabricBytes(b)
		tp, err := topology.ReadYAML([]byte(yaml))
		if err != nil {
			return // a fabric the reader refuses (GPUs with no way out)
		}
		tuner, err := nccl.NewTuner(tp, nccl.Options{})
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s: an error of several lines: %v", yaml, err)
			}
			return
		}
		c, err := sim.NewCluster(tp, sim.Config{TimingOnly: true})
		if err != nil {
			t.Fatalf("%s: the tuner takes it, the simulator does not: %v", yaml, err)
		}
		defer c.Close()
		ranks := tp.NumGPUs()
		for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.AllToAll} {
			for _, elems := range []int{int(count)%64 + 1, 1 << 14} {
				want := ops.Spec{Op: op, Ranks: ranks, Count: elems, DType: hw.F32, Redop: hw.Sum, Root: ranks - 1}
				plan, _, err := tuner.Plan(want)
				if err != nil {
					if strings.Contains(err.Error(), "\n") {
						t.Fatalf("%s%v: an error of several lines: %v", yaml, op, err)
					}
					continue
				}
				// Check proves plans of up to a few million symbolic elements:
				// the small count (the large one makes other choices).
				if err := ops.Check(plan); err != nil && elems < 1<<14 {
					t.Fatalf("%s%v of %d: %v", yaml, op, elems, err)
				}
				in, out := simtest.Buffers(t, c, plan, false)
				secs, err := simexec.NewExecutor(c).Run(plan, in, out)
				for r := range in {
					in[r].Buf.Free()
					out[r].Buf.Free()
				}
				if err != nil || !(secs > 0) {
					t.Fatalf("%s%v of %d (%s): simulated in %v s: %v", yaml, op, elems, nccl.Label(plan), secs, err)
				}
			}
		}
	})
}
