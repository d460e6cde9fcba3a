package nccl_test

import (
	"fmt"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// A Tuner chooses what NCCL would run on a fabric and compiles the plan
// the simulator runs in its place.
func ExampleTuner() {
	topo, _ := topology.Resolve("dgx-h100")
	tuner, _ := nccl.NewTuner(topo, nccl.Options{})
	for _, bytes := range []int{8, 1 << 30} {
		plan, choice, err := tuner.Plan(ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: bytes / 4, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d B: simulate %s, %.1f µs by NCCL's model; NCCL itself would run %v, %.1f µs\n",
			bytes, nccl.Label(plan), choice.TimeUS, choice.NCCL, choice.NCCL.TimeUS)
	}
	// Output:
	// 8 B: simulate ring/LL/1ch, 15.0 µs by NCCL's model; NCCL itself would run ring/LL/1ch, 15.0 µs
	// 1073741824 B: simulate nvls/Simple/16ch, 3972.6 µs by NCCL's model; NCCL itself would run nvls/Simple/16ch, 3972.6 µs
}

// Timing NCCL's choice on the simulator: the plan runs through the
// simulator's executor (package simexec), which applies how NCCL's
// protocols move it (plan.Wire) and its launch (plan.Launch); ops'
// generic executor, for real devices, refuses such a plan there.
func ExampleTuner_Plan() {
	topo, _ := topology.Resolve("dgx-h100")
	tuner, _ := nccl.NewTuner(topo, nccl.Options{})
	plan, choice, err := tuner.Plan(ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: 1 << 18, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, _ := sim.NewCluster(topo, sim.Config{TimingOnly: true})
	in, out := make([]hw.Slice, 8), make([]hw.Slice, 8)
	for r, d := range c.Devices() {
		ib, _ := d.Alloc(hw.F32, plan.InLen)
		ob, _ := d.Alloc(hw.F32, plan.OutLen)
		in[r], out[r] = hw.Whole(ib), hw.Whole(ob)
	}
	secs, err := simexec.NewExecutor(c).Run(plan, in, out)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("1 MiB: %s, simulated %.1f µs; NCCL's model says %.1f µs\n", nccl.Label(plan), secs*1e6, choice.TimeUS)
	// Output: 1 MiB: ring/LL/24ch, simulated 28.0 µs; NCCL's model says 28.0 µs
}

// FromEnv reads the environment an NCCL run had, as NCCL reads it, into
// the tuner's options: here what the later releases of AWS's network
// plugin set on p4de instances, Simple only and an 8 MiB buffer.
func ExampleFromEnv() {
	o, err := nccl.FromEnv(map[string]string{"NCCL_PROTO": "^LL,LL128", "NCCL_BUFFSIZE": "8388608"})
	if err != nil {
		fmt.Println(err)
		return
	}
	topo, _ := topology.Resolve("dgx-a100x2")
	tuner, _ := nccl.NewTuner(topo, o)
	_, choice, _ := tuner.Plan(ops.Spec{Op: ops.AllReduce, Ranks: 16, Count: 1 << 10, DType: hw.F32, Redop: hw.Sum})
	fmt.Println(o.Protos, o.BuffSize, choice.Estimate)
	// Output:
	// [Simple] 8388608 tree/Simple/1ch
}

// A Machine says where a machine departs from NCCL's model. An 8-B200
// ring's 32 channels move 22.5 GB/s each by NCCL's share of the NVLinks
// (with no channel rate); by default each, a block of threads, moves at
// most the 22.3 GB/s published Blackwell runs measure; here at most 20
// in the last. NCCL's choice does not see it.
func ExampleMachine() {
	topo, _ := topology.Resolve("hgx-b200")
	spec := ops.Spec{Op: ops.AllGather, Ranks: 8, Count: 1 << 28, DType: hw.F32}
	for _, m := range []nccl.Machine{{NoChannelRate: true}, {}, {ChannelGBps: 20}} {
		tuner, _ := nccl.NewTuner(topo, nccl.Options{Machine: m})
		plan, choice, err := tuner.Plan(spec)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%v: a channel moves %.1f GB/s\n", choice.Estimate, plan.Wire.Rate/1e9)
	}
	// Output:
	// ring/Simple/32ch: a channel moves 22.5 GB/s
	// ring/Simple/32ch: a channel moves 22.3 GB/s
	// ring/Simple/32ch: a channel moves 20.0 GB/s
}

// CostTable is NCCL's cost table as its rank 0 prints it at init
// (NCCL_DEBUG_SUBSYS=TUNING), Channels the channels its init reports,
// and Ranked every pair its tuner weighs for a call, cheapest first.
func ExampleCostTable() {
	topo, _ := topology.Resolve("dgx-h100x2")
	tuner, _ := nccl.NewTuner(topo, nccl.Options{})
	table, _ := nccl.CostTable(tuner.System, tuner.Options)
	for _, c := range table {
		if c.Op == ops.AllReduce && c.Algo == nccl.Ring {
			fmt.Printf("AllReduce %s/%s %v\n", c.Algo.NCCLName(), c.Protocol, c)
		}
	}
	fmt.Println(nccl.Channels(tuner.System, tuner.Options))
	ranked, _ := tuner.Ranked(ops.Spec{Op: ops.AllReduce, Ranks: 16, Count: 1 << 20, DType: hw.F32, Redop: hw.Sum})
	fmt.Printf("4 MiB: %v %.1f µs, then %v %.1f µs\n", ranked[0], ranked[0].TimeUS, ranked[1], ranked[1].TimeUS)
	// Output:
	// AllReduce Ring/LL 40.0/20.8
	// AllReduce Ring/LL128 75.2/156.6
	// AllReduce Ring/Simple 131.6/192.0
	// 16 coll channels, 16 collnet channels, 16 nvls channels, 16 p2p channels, 4 p2p channels per peer
	// 4 MiB: nvlstree/Simple/16ch 83.8 µs, then tree/LL128/16ch 84.2 µs
}
