package simexec_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// timeOn runs spec once, timing-only, on a fresh cluster, and reports the
// time and whether the cluster's own clock moved (it does not when the
// driver timed the plan on the cluster's mirror).
func timeOn(t *testing.T, topo string, spec ops.Spec, symmetry bool) (seconds float64, mirrored bool) {
	t.Helper()
	c, _ := world(t, topo, sim.Config{TimingOnly: true, Symmetry: symmetry})
	spec.Ranks = len(c.Devices())
	plan, err := ops.Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	in, out := buffers(t, c, plan, false)
	seconds, err = simexec.NewExecutor(c).Run(plan, in, out)
	if err != nil {
		t.Fatal(err)
	}
	return seconds, c.EventsFired() == 0
}

// TestMirroredRunsTakeExactlyTheFullTime: with Config.Symmetry, a
// symmetric plan is run on the cluster's mirror by the ranks that stand
// for all (one on a switch, a node's on a cluster), and its time is the
// full simulation's to the picosecond. Plans that are not symmetric
// (rooted ops, trees, counts that do not split evenly, rd/rhd on other
// than powers of two) and fabrics that do not fold (a torus, whose equal
// paths the router tells apart by a tie-break) run in full and agree
// trivially; the cases listed as mirrored must be. A rail-optimised
// cluster folds too: its spine's links, which the renamings fix or swap,
// carry their share of every block's flows.
func TestMirroredRunsTakeExactlyTheFullTime(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); TestFedRunsEqualEnqueuedRuns takes the same concurrent paths under it")
	}
	mirrors := map[string]bool{
		"allreduce/ring/8/64 on switch:8": true, "allreduce/ring/12/96 on switch:12": true,
		"allreduce/rd/8/64 on switch:8": true, "allreduce/rhd/8/64 on switch:8": true,
		"allreduce/rhd/16/64 on switch:16": true, "reducescatter/ring/12/7 on switch:12": true,
		"allgather/ring/12/7 on switch:12": true, "allgather/rd/8/7 on switch:8": true,
		"alltoall/pairwise/12/7 on switch:12": true, "reducescatter/rhd/16/7 on switch:16": true,
		"allreduce/ring/8/64 on cluster:2x4": true, "allreduce/rhd/8/64 on cluster:2x4": true,
		"alltoall/pairwise/8/7 on cluster:4x2": true, "allreduce/ring/16/64 on dgx-h100x2": true,
		"allgather/ring/8/7 on ring:8": true, "allreduce/rhd/8/64 on mesh:8": true,
		"allreduce/rd/8/64 on cluster:4x2,rail=true": true, "allreduce/rhd/8/64 on cluster:4x2,rail=true": true,
		"alltoall/pairwise/8/7 on cluster:4x2,rail=true": true, "alltoall/pairwise/8/64 on cluster:4x2,rail=true": true,
	}
	seen := map[string]bool{}
	fabrics := []string{"cluster:2x4", "cluster:4x2", "cluster:4x2,rail=true", "cluster:3x2,bw=80GB/s,nicbw=30GB/s", "dgx-h100x2", "ring:8", "mesh:8", "torus:2x4"}
	for _, p := range []int{2, 3, 8, 12, 16} {
		fabrics = append(fabrics, fmt.Sprintf("switch:%d", p), fmt.Sprintf("switch:%d,bw=50GB/s,lat=700ns,reduce=300GB/s", p))
	}
	for _, fabric := range fabrics {
		topo, err := topology.Parse(fabric)
		if err != nil {
			t.Fatal(err)
		}
		p := topo.NumGPUs()
		for _, op := range ops.Ops() {
			for _, algo := range ops.AlgorithmsFor(op) {
				for _, count := range []int{7, 64, 96} {
					spec := ops.Spec{Op: op, Algo: algo, Count: count, Root: 1, DType: hw.F32, Redop: hw.Sum}
					if op == ops.Barrier {
						spec.Count = 0
					}
					if _, err := ops.Compile(ops.Spec{Op: op, Algo: algo, Ranks: p, Count: spec.Count, Root: 1, DType: hw.F32, Redop: hw.Sum}); err != nil {
						continue // refused shapes, such as rd on 12 ranks
					}
					name := fmt.Sprintf("%s/%s/%d/%d on %s", op, algo, p, count, fabric)
					full, mirroredFull := timeOn(t, fabric, spec, false)
					fast, mirrored := timeOn(t, fabric, spec, true)
					if mirroredFull {
						t.Fatalf("%s: ran on a mirror without Config.Symmetry", name)
					}
					if fast != full {
						t.Errorf("%s: mirrored %v: %.15g s, full simulation %.15g s", name, mirrored, fast, full)
					}
					if mirrors[name] && !mirrored {
						t.Errorf("%s: not mirrored", name)
					}
					seen[name] = seen[name] || mirrored
				}
			}
		}
	}
	for name := range mirrors {
		if !seen[name] {
			t.Errorf("%s never ran", name)
		}
	}
}

// TestMirroredRunsRoundAsTheFullOne: where a finish falls on half a
// picosecond (nice sizes and bandwidths make that common), the full run
// and the mirror, which sum a link's flows in other orders, must round it
// alike. nccl-p2p's all-to-alls on cluster:2x4 at these counts ended a
// picosecond apart when halves rounded to the nearest by float64's last
// bits.
func TestMirroredRunsRoundAsTheFullOne(t *testing.T) {
	const fabric = "cluster:2x4,bw=1GB/s,lat=8338348ps,nicbw=64GB/s,niclat=10000ps"
	for _, count := range []int{134, 246, 274, 470, 498, 526, 554, 582, 890, 1870} {
		spec := ops.Spec{Op: ops.AllToAll, Algo: "nccl-p2p", Count: count, DType: hw.BF16}
		full, _ := timeOn(t, fabric, spec, false)
		fast, mirrored := timeOn(t, fabric, spec, true)
		if !mirrored || fast != full {
			t.Errorf("count %d: mirrored %v: %.15g s, full simulation %.15g s", count, mirrored, fast, full)
		}
	}
}

// TestHandMadePlansMirrorOrNot: symmetric or not, pairing up or not,
// deadlocking or not, a hand-made plan has the same outcome with
// Config.Symmetry as without.
func TestHandMadePlansMirrorOrNot(t *testing.T) {
	// By hand, on 4 ranks: each sends to r+1 and receives from r+peerShift.
	handMade := func(peerShift, oddRank int, recvFirst bool) *ops.Plan {
		plan := &ops.Plan{Spec: ops.Spec{Op: ops.AllReduce, Algo: "hand", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum},
			InLen: 8, OutLen: 8, Lanes: 1, Steps: make([][]ops.Step, 4)}
		for r := range 4 {
			send := (r + 1) % 4
			if r == oddRank {
				send = (r + 3) % 4
			}
			plan.Steps[r] = []ops.Step{
				{Kind: ops.StepSend, Peer: send, Src: ops.Ref{Buf: ops.In, Len: 8}},
				{Kind: ops.StepRecv, Peer: (r + peerShift) % 4, Dst: ops.Ref{Buf: ops.Out, Len: 8}},
			}
			if recvFirst {
				plan.Steps[r][0], plan.Steps[r][1] = plan.Steps[r][1], plan.Steps[r][0]
			}
		}
		return plan
	}
	for _, tc := range []struct {
		name, want string
		plan       *ops.Plan
		outcome    string // "time", "unpaired" or "deadlock"
	}{
		{"a ring", "rotation", handMade(3, -1, false), "time"},
		{"a ring whose rank 2 sends backwards", "none", handMade(3, 2, false), "unpaired"},
		// Symmetric, but its messages do not pair up.
		{"receiving from the rank sent to", "rotation", handMade(1, -1, false), "unpaired"},
		// Symmetric, so mirrored; the mirror deadlocks too, and Run falls
		// back to every rank, which reports the deadlock as it is, with
		// every rank blocked.
		{"a ring that receives first", "rotation", handMade(3, -1, true), "deadlock"},
	} {
		if got := tc.plan.Symmetry().String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		for _, symmetry := range []bool{false, true} {
			c, _ := world(t, "switch:4", sim.Config{TimingOnly: true, Symmetry: symmetry})
			in, out := buffers(t, c, tc.plan, false)
			seconds, err := simexec.NewExecutor(c).Run(tc.plan, in, out)
			got := "time"
			switch {
			case errors.Is(err, ops.ErrBadPlan) && strings.Contains(err.Error(), "never receives it"):
				got = "unpaired"
			case errors.Is(err, hw.ErrDeadlock) && strings.Contains(err.Error(), "4 stream(s)"):
				got = "deadlock"
			case err != nil || seconds <= 0:
				got = fmt.Sprintf("%v s, %v", seconds, err)
			}
			if got != tc.outcome {
				t.Errorf("%s, symmetry %v: %s, want %s", tc.name, symmetry, got, tc.outcome)
			}
		}
	}
}

// A ring all-reduce of 1 MiB per rank on 1024 GPUs behind one switch,
// timing only, with Config.Symmetry: every rank runs the ring alike, so
// the simulator's driver times it by simulating rank 0 alone, exactly (the time is
// the α-β formula's), in a tenth of a second instead of two.
func Example_mirrored() {
	topo, _ := topology.Parse("switch:1024")
	c, _ := sim.NewCluster(topo, sim.Config{TimingOnly: true, Symmetry: true})
	plan, _ := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 1024, Count: 1 << 18, DType: hw.F32, Redop: hw.Sum})
	in, out := make([]hw.Slice, 1024), make([]hw.Slice, 1024)
	for r, d := range c.Devices() {
		ib, _ := d.Alloc(hw.F32, plan.InLen)
		ob, _ := d.Alloc(hw.F32, plan.OutLen)
		in[r], out[r] = hw.Whole(ib), hw.Whole(ob)
	}
	exec := simexec.NewExecutor(c)
	secs, err := exec.Run(plan, in, out)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%.2f us, %d plan steps, %d run on the mirror\n", secs*1e6, plan.NumSteps(), exec.Driver().(*simexec.Driver).MirroredRuns())
	// Output: 4112.95 us, 5238784 plan steps, 1 run on the mirror
}

// TestMirrorBlock: the driver says how many ranks Run would simulate
// for a plan: one on a switch, a node's on a cluster, none (every rank)
// for a tree or without Config.Symmetry.
func TestMirrorBlock(t *testing.T) {
	for _, tc := range []struct {
		topo, algo string
		symmetry   bool
		want       int
	}{
		{"switch:8", "ring", true, 1},
		{"cluster:2x4", "ring", true, 4},
		{"cluster:2x4", "tree", true, 0},
		{"switch:8", "ring", false, 0},
	} {
		c, _ := world(t, tc.topo, sim.Config{TimingOnly: true, Symmetry: tc.symmetry})
		plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: tc.algo, Ranks: 8, Count: 64, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		if got := simexec.NewDriver(c).MirrorBlock(c.World(), plan); got != tc.want {
			t.Errorf("%s on %s, symmetry %v: block %d, want %d", tc.algo, tc.topo, tc.symmetry, got, tc.want)
		}
	}
}

// railsNoNVLink is 4 nodes of 2 GPUs without NVLink, each GPU on its
// rail's switch, the rails joined by a spine: renaming rank r to r+1 maps
// it onto itself (the rails swap), but no renaming moves the spine off
// itself, and each rail–spine link has an orbit of 2 under a group of 8.
const railsNoNVLink = `
nodes:
  - {name: g0, kind: gpu}
  - {name: g1, kind: gpu}
  - {name: g2, kind: gpu}
  - {name: g3, kind: gpu}
  - {name: g4, kind: gpu}
  - {name: g5, kind: gpu}
  - {name: g6, kind: gpu}
  - {name: g7, kind: gpu}
  - {name: rail0, kind: switch}
  - {name: rail1, kind: switch}
  - {name: spine, kind: switch}
links:
  - {a: g0, b: rail0, bw: 50GB/s, lat: 2us}
  - {a: g1, b: rail1, bw: 50GB/s, lat: 2us}
  - {a: g2, b: rail0, bw: 50GB/s, lat: 2us}
  - {a: g3, b: rail1, bw: 50GB/s, lat: 2us}
  - {a: g4, b: rail0, bw: 50GB/s, lat: 2us}
  - {a: g5, b: rail1, bw: 50GB/s, lat: 2us}
  - {a: g6, b: rail0, bw: 50GB/s, lat: 2us}
  - {a: g7, b: rail1, bw: 50GB/s, lat: 2us}
  - {a: rail0, b: spine, bw: 100GB/s, lat: 1us}
  - {a: rail1, b: spine, bw: 100GB/s, lat: 1us}
`

// TestMirrorsShareFixedLinks: on railsNoNVLink every ring message crosses
// the spine, 4 of them on each rail–spine link at once, and the spine's
// links carry a quarter of their bandwidth for the one rank that stands
// for all (its orbit of 2 under 8 renamings): the mirrored ring all-reduce
// and all-to-all take the full simulation's time to the picosecond, and
// are mirrored. Without the share, the spine would be 4 times as fast.
func TestMirrorsShareFixedLinks(t *testing.T) {
	topo, err := topology.ReadYAML([]byte(railsNoNVLink))
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []ops.Spec{
		{Op: ops.AllReduce, Algo: "ring", Ranks: 8, Count: 1 << 16, DType: hw.F32, Redop: hw.Sum},
		{Op: ops.AllToAll, Algo: "pairwise", Ranks: 8, Count: 1 << 14, DType: hw.F32},
	} {
		plan, err := ops.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		full, _ := runOn(t, topo, plan, false)
		fast, d := runOn(t, topo, plan, true)
		if d.MirroredRuns() != 1 || fast != full {
			t.Errorf("%v: %d mirrored runs, %.15g s against the full run's %.15g s; want 1, equal", spec, d.MirroredRuns(), fast, full)
		}
	}
}
