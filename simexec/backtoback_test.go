package simexec_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/nccl"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/simexec"
	"github.com/commsim/commsim/topology"
)

// TestBackToBackRunsOverlapOnlyWhereRanksIdle: nccl-tests times -n runs
// launched back to back, each rank starting its next as soon as its own
// last one ends. A rooted chain's root (broadcast) or leaf (reduce) is done
// long before the chain's far end, so its next run overlaps: the mean of
// five runs is well under one run's time. So do sendrecv's across two
// nodes: the ranks fed over NVLink run ahead of those fed over the
// network. A ring all-reduce keeps every
// rank busy to the end, so its runs follow one another and the mean is
// one run's time. Every shortcut (a mirror, folded channels) times the
// runs as the full simulation does, to the picosecond. A plan with switch
// steps (NVLS, NVLSTree, CollNet) waits for every rank between runs, as
// NCCL's barrier at the switch does, so its runs do not overlap either:
// without the wait, CollNet's next run would start on the ranks done
// first and contend with the last one's tail.
func TestBackToBackRunsOverlapOnlyWhereRanksIdle(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); TestFedRunsEqualEnqueuedRuns takes the same concurrent paths under it")
	}
	for _, tc := range []struct {
		topo    string
		op      ops.Op
		bytes   int
		algo    nccl.Algo
		overlap bool  // the mean of five runs is under one run's time
		folded  *bool // timed on a mirror or folded cluster; nil: either
	}{
		{"dgx-h100x2", ops.Broadcast, 16 << 20, nccl.Ring, true, yes},
		{"dgx-h100x2", ops.Reduce, 16 << 20, nccl.Ring, true, yes},
		{"dgx-h100", ops.Broadcast, 2 << 20, nccl.Ring, true, yes},
		{"dgx-h100", ops.Broadcast, 8, nccl.Ring, true, nil},
		{"dgx-h100x2", ops.SendRecv, 64 << 10, nccl.P2P, true, nil},
		{"dgx-h100x2", ops.AllReduce, 16 << 20, nccl.Ring, false, yes},
		{"dgx-h100", ops.AllReduce, 64 << 20, nccl.NVLS, false, yes},
		{"dgx-h100x2", ops.AllReduce, 64 << 20, nccl.NVLSTree, false, nil},
		{"dgx-h100x2", ops.AllReduce, 1 << 20, nccl.NVLSTree, false, nil},
		{"dgx-h100", ops.ReduceScatter, 1 << 20, nccl.NVLS, false, nil},
		{"dgx-h100", ops.AllGather, 1 << 20, nccl.NVLS, false, nil},
		{"dgx-h100x2,rail=true,sharp=100GB/s", ops.AllReduce, 64 << 20, nccl.CollNetDirect, false, nil},
	} {
		topo, err := topology.Resolve(tc.topo)
		if err != nil {
			t.Fatal(err)
		}
		opts := nccl.Options{Algos: []nccl.Algo{tc.algo}, Channels: 16}
		if tc.algo == nccl.P2P {
			opts = nccl.Options{} // point-to-point, which NCCL_ALGO does not name
		}
		tuner, err := nccl.NewTuner(topo, opts)
		if err != nil {
			t.Fatal(err)
		}
		p := topo.NumGPUs()
		plan, _, err := tuner.Plan(ops.Spec{Op: tc.op, Ranks: p, Count: tc.bytes / 4, Root: 1, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		name := tc.topo + " " + tc.op.String() + " " + nccl.Label(plan)
		one, _ := runOn(t, topo, plan, false)
		five, _ := runsOn(t, topo, plan, false, 5)
		fast, d := runsOn(t, topo, plan, true, 5)
		shortcut := d.MirroredRuns()+d.ThinnedRuns()+d.RotatedRuns()+d.RefinedRuns() > 0
		if tc.folded != nil && shortcut != *tc.folded {
			t.Errorf("%s: timed by a shortcut %v, want %v", name, shortcut, *tc.folded)
		}
		if fast != five {
			t.Errorf("%s: five runs back to back %.15g s a run with shortcuts, %.15g s in full", name, fast, five)
		}
		switch {
		case tc.overlap && !(five < 0.9*one):
			t.Errorf("%s: five runs back to back %.6g µs a run, one alone %.6g µs: want them to overlap", name, five*1e6, one*1e6)
		case !tc.overlap && math.Abs(five-one) > 1e-6*one:
			t.Errorf("%s: five runs back to back %.6g µs a run, one alone %.6g µs: want one run's time", name, five*1e6, one*1e6)
		}
	}
}

var yes = func() *bool { b := true; return &b }()

// TestBackToBackRunsMirrorExactly: a symmetric plan's back-to-back runs
// timed on the cluster's mirror, by the ranks that stand for all, take the
// full simulation's time to the picosecond, as one run does.
func TestBackToBackRunsMirrorExactly(t *testing.T) {
	for _, tc := range []struct {
		topo string
		spec ops.Spec
	}{
		{"switch:8", ops.Spec{Op: ops.AllReduce, Algo: "ring", Count: 1 << 16}},
		{"cluster:2x4", ops.Spec{Op: ops.AllReduce, Algo: "rhd", Count: 1 << 16}},
		{"dgx-h100x2", ops.Spec{Op: ops.AllGather, Algo: "ring", Count: 1 << 14}},
		{"cluster:4x2,rail=true", ops.Spec{Op: ops.AllToAll, Algo: "pairwise", Count: 1 << 10}},
	} {
		topo, err := topology.Resolve(tc.topo)
		if err != nil {
			t.Fatal(err)
		}
		spec := tc.spec
		spec.Ranks, spec.DType, spec.Redop = topo.NumGPUs(), hw.F32, hw.Sum
		plan, err := ops.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		full, _ := runsOn(t, topo, plan, false, 3)
		fast, d := runsOn(t, topo, plan, true, 3)
		if d.MirroredRuns() != 1 {
			t.Errorf("%s on %s: %d mirrored runs, want 1", spec, tc.topo, d.MirroredRuns())
		}
		if fast != full {
			t.Errorf("%s on %s: three runs back to back %.15g s a run on the mirror, %.15g s in full", spec, tc.topo, fast, full)
		}
	}
}

// unpaced is a driver that enqueues as its Driver does and can neither
// pace runs back to back (ops.Pacer) nor time them otherwise
// (ops.Shortcut): every run of every rank is enqueued at once.
type unpaced struct{ ops.Driver }

// paced is a driver that enqueues and paces as its Driver does, counting
// the times it stood, and times nothing otherwise.
type paced struct {
	d     *simexec.Driver
	stood int
}

func (p *paced) Enqueue(job *ops.RankJob) error { return p.d.Enqueue(job) }

func (p *paced) RunUntilAny(events ...hw.Event) error {
	p.stood++
	return p.d.RunUntilAny(events...)
}

// TestBackToBackRefusesNoRuns: zero runs is a caller's mistake, named; so
// are more than the limits, where every run is enqueued at once (2^63
// runs took the host's memory).
func TestBackToBackRefusesNoRuns(t *testing.T) {
	plan, err := ops.Compile(ops.Spec{Op: ops.Broadcast, Algo: "ring", Ranks: 8, Count: 64, DType: hw.F32})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := world(t, "dgx-h100", sim.Config{TimingOnly: true})
	in, out := buffers(t, c, plan, false)
	exec := ops.NewExecutorWith(c.World(), unpaced{simexec.NewDriver(c)})
	// 64 channels on 8 ranks: 512 lanes, whose runs bound them first.
	wide, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "nccl-ring", Ranks: 8, Channels: 64, Count: 1 << 12, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	wideIn, wideOut := buffers(t, c, wide, false)
	lanes := 8 * wide.Lanes
	for _, tc := range []struct {
		plan    *ops.Plan
		in, out []hw.Slice
		runs    int
		want    string
	}{
		{plan, in, out, 0, "0 runs, want 1 or more"},
		{plan, in, out, ops.MaxBackToBackRuns + 1, fmt.Sprintf("%d runs back to back: over %d enqueued at once; run fewer", ops.MaxBackToBackRuns+1, ops.MaxBackToBackRuns)},
		{plan, in, out, math.MaxInt, "run fewer"},
		{wide, wideIn, wideOut, ops.MaxBackToBackLaneRuns/lanes + 1, fmt.Sprintf("of 8 ranks × %d lanes: over %d runs of lanes enqueued at once, which would hold 6.3 GB of host memory; run %d or fewer",
			wide.Lanes, ops.MaxBackToBackLaneRuns, ops.MaxBackToBackLaneRuns/lanes)},
	} {
		if _, err := exec.RunBackToBack(tc.plan, tc.in, tc.out, tc.runs); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d runs: %v, want %q", tc.runs, err, tc.want)
		}
		if _, _, err := exec.EnqueueBackToBack(tc.plan, tc.in, tc.out, tc.runs); !errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%d runs enqueued: %v, want %q", tc.runs, err, tc.want)
		}
	}
	if _, err := exec.RunBackToBack(plan, in, out, 3); err != nil {
		t.Errorf("3 runs after the refusals: %v", err)
	}
	if _, err := exec.RunBackToBack(wide, wideIn, wideOut, 20); err != nil {
		t.Errorf("20 runs of 512 lanes: %v", err)
	}
}

// TestBackToBackCountsTheLanesItEnqueues: the runs' bound on lanes is on
// those enqueued, so a plan whose runs in full would pass it runs them on
// its mirror, which holds one rank's; in full, on a driver that cannot
// pace them, they are refused, saying how many runs fit.
func TestBackToBackCountsTheLanesItEnqueues(t *testing.T) {
	const p = 1024
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "rd", Ranks: p, Count: p, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	runs := ops.MaxBackToBackLaneRuns/(p*plan.Lanes) + 1
	for _, symmetry := range []bool{true, false} {
		c, _ := world(t, "switch:1024", sim.Config{TimingOnly: true, Symmetry: symmetry})
		in, out := buffers(t, c, plan, false)
		d := simexec.NewDriver(c)
		var drv ops.Driver = d
		if !symmetry {
			drv = unpaced{d}
		}
		_, err := ops.NewExecutorWith(c.World(), drv).RunBackToBack(plan, in, out, runs)
		switch want := fmt.Sprintf("run %d or fewer", runs-1); {
		case symmetry && (err != nil || d.MirroredRuns() != 1):
			t.Errorf("%d runs on the mirror: %v, %d mirrored runs; want one, no error", runs, err, d.MirroredRuns())
		case !symmetry && (!errors.Is(err, hw.ErrBadArgument) || !strings.Contains(err.Error(), want)):
			t.Errorf("%d runs in full: %v; want %q", runs, err, want)
		}
	}
}

// TestPacedRunsTakeTheTimeOfRunsEnqueuedWhole: runs back to back that a
// Pacer lets the executor enqueue a window at a time (a 64-channel ring's
// 512 lanes: 128 runs a window) take, to the picosecond, the time they
// take enqueued at once: an all-reduce whose runs follow one another, and
// a broadcast chain whose root runs ahead of its last rank.
func TestPacedRunsTakeTheTimeOfRunsEnqueuedWhole(t *testing.T) {
	if testing.Short() {
		t.Skip("minutes under the race detector (.ci/run's -short run); the driver paces on one goroutine")
	}
	const runs = 200
	for _, spec := range []ops.Spec{
		{Op: ops.AllReduce, Algo: "nccl-ring", Ranks: 8, Channels: 64, Count: 1 << 10, DType: hw.F32, Redop: hw.Sum},
		{Op: ops.Broadcast, Algo: "nccl-ring", Ranks: 8, Channels: 64, Count: 1 << 12, Root: 3, DType: hw.F32},
	} {
		plan, err := ops.Compile(spec)
		if err != nil {
			t.Fatal(err)
		}
		var times [2]float64
		var stood int
		for i := range times {
			c, _ := world(t, "dgx-h100", sim.Config{TimingOnly: true})
			in, out := buffers(t, c, plan, false)
			var drv ops.Driver = unpaced{simexec.NewDriver(c)}
			p := &paced{d: simexec.NewDriver(c)}
			if i == 1 {
				drv = p
			}
			if times[i], err = ops.NewExecutorWith(c.World(), drv).RunBackToBack(plan, in, out, runs); err != nil {
				t.Fatal(err)
			}
			stood = p.stood
		}
		if want := runs - 128; stood != want || times[1] != times[0] {
			t.Errorf("%v: paced %.15g s a run, standing %d times (want %d); enqueued whole %.15g s", spec, times[1], stood, want, times[0])
		}
	}
}

// TestRanksWaitForTheirOrbitBetweenRuns: a rank of a rotated fold starts
// its next run when every rank of its orbit under the fold's group has
// ended its last. The orbits of rotating each node's GPUs and mirroring
// the nodes (4 nodes of 2) are node pairs 0 and 3, 1 and 2; of the
// rotation alone, the nodes. A broadcast's ranks end apart, so its runs
// overlap back to back; where every rank waits for all (one orbit), they
// follow one another, the mean of two runs one run's time to the
// picosecond, as a switch's barrier makes them; where each waits for
// itself alone, they overlap as free. Waits naming no rank of the run are
// refused.
func TestRanksWaitForTheirOrbitBetweenRuns(t *testing.T) {
	rotate, mirror := make([]int, 8), make([]int, 8)
	for r := range 8 {
		rotate[r] = r/2*2 + (r%2+1)%2
		mirror[r] = (3-r/2)*2 + r%2
	}
	for _, tc := range []struct {
		perms [][]int
		want  [][]int // rank 0's and rank 2's orbits
	}{
		{[][]int{rotate, mirror}, [][]int{{0, 1, 6, 7}, {2, 3, 4, 5}}},
		{[][]int{rotate}, [][]int{{0, 1}, {2, 3}}},
	} {
		of := simexec.Orbits(tc.perms)
		for i, r := range []int{0, 2} {
			got := slices.Sorted(slices.Values(of[r]))
			if !slices.Equal(got, tc.want[i]) {
				t.Errorf("%d renamings: rank %d's orbit %v, want %v", len(tc.perms), r, got, tc.want[i])
			}
		}
	}

	plan, err := ops.Compile(ops.Spec{Op: ops.Broadcast, Algo: "ring", Ranks: 8, Count: 1 << 18, DType: hw.F32})
	if err != nil {
		t.Fatal(err)
	}
	all := make([][]int, 8)
	for r := range all {
		all[r] = []int{0, 1, 2, 3, 4, 5, 6, 7}
	}
	timeWith := func(waits [][]int, runs int) float64 {
		c, _ := world(t, "dgx-h100", sim.Config{TimingOnly: true})
		in, out := buffers(t, c, plan, false)
		exec := simexec.NewExecutor(c)
		starts, ends, err := exec.EnqueueBackToBackWaiting(plan, in, out, runs, waits)
		if err != nil {
			t.Fatal(err)
		}
		longest := 0.0
		for r := range 8 {
			if err := exec.Synchronize(r); err != nil {
				t.Fatal(err)
			}
			d, err := ends[r].ElapsedSince(starts[r])
			if err != nil {
				t.Fatal(err)
			}
			longest = max(longest, d)
		}
		return longest / float64(runs)
	}
	self := make([][]int, 8)
	for r := range self {
		self[r] = []int{r}
	}
	one, free, held, own := timeWith(nil, 1), timeWith(nil, 2), timeWith(all, 2), timeWith(self, 2)
	if !(free < 0.95*one) || held != one || own != free {
		t.Errorf("two broadcasts back to back: %.6g µs a run free, %.6g µs each rank waiting for all, %.6g µs each for itself; one alone %.6g µs", free*1e6, held*1e6, own*1e6, one*1e6)
	}
	c, _ := world(t, "dgx-h100", sim.Config{TimingOnly: true})
	in, out := buffers(t, c, plan, false)
	for _, bad := range [][][]int{all[:4], {{8}, {}, {}, {}, {}, {}, {}, {}}, {{-1}, {}, {}, {}, {}, {}, {}, {}}} {
		if _, _, err := simexec.NewExecutor(c).EnqueueBackToBackWaiting(plan, in, out, 2, bad); !errors.Is(err, hw.ErrBadArgument) {
			t.Errorf("waits %v: %v, want ErrBadArgument", bad, err)
		}
	}
}
