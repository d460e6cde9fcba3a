package ops_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// TestSelectCostsStreamedPlans: auto prices every candidate, streamed or
// held. On a ring of 1024 GPUs at 1 GiB the ring plan (5M steps, streamed)
// is the cheapest by far; it used to be dropped for want of held steps,
// leaving rhd, 312 times slower.
func TestSelectCostsStreamedPlans(t *testing.T) {
	spec := ops.Spec{Op: ops.AllReduce, Ranks: 1024, Count: 1 << 28, DType: hw.F32, Redop: hw.Sum}
	plan, cands, err := ops.Select(spec, mustTopo(t, "ring:1024"))
	if err != nil {
		t.Fatal(err)
	}
	if plan.Algo != "ring" || !plan.Streamed() {
		t.Errorf("auto picked %s (streamed %v), want the streamed ring", plan.Algo, plan.Streamed())
	}
	for _, c := range cands {
		if c.Err != nil {
			t.Errorf("%s: %v", c.Algo, c.Err)
		}
		t.Logf("%-8s %12.1f us", c.Algo, c.Cost*1e6)
	}
}

// TestSelectPrunesOnlyWhatCannotWin: Select costs in full only the
// candidates whose lower bound could still tie the cheapest, and picks
// what costing every one would: the earliest algorithm within the ties of
// the least cost. A pruned candidate's bound is at most its cost and more
// than the winner's.
func TestSelectPrunesOnlyWhatCannotWin(t *testing.T) {
	pruned := 0
	for _, fabric := range []string{"switch:8", "ring:12", "cluster:4x4", "dgx-h100x2", "torus:4x4", "dgx-h100x8"} {
		topo := mustTopo(t, fabric)
		for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.Broadcast, ops.AllToAll} {
			for _, count := range []int{1, 96, 4096, 1 << 20} {
				spec := ops.Spec{Op: op, Ranks: topo.NumGPUs(), Count: count, DType: hw.F32, Redop: hw.Sum}
				plan, cands, err := ops.Select(spec, topo)
				if err != nil {
					t.Fatalf("%s %v %d: %v", fabric, op, count, err)
				}
				least, want := math.Inf(1), ""
				full := make([]float64, len(cands))
				for i, c := range cands {
					if c.Err != nil {
						continue
					}
					s := spec
					s.Algo = c.Algo
					p, err := ops.Compile(s)
					if err != nil {
						t.Fatal(err)
					}
					if full[i], err = ops.Cost(p, topo); err != nil {
						t.Fatal(err)
					}
					least = min(least, full[i])
					if c.Bound {
						pruned++
						if c.Cost > full[i]*(1+1e-12) { // summed in another order
							t.Errorf("%s %v %d: %s's bound %v is over its cost %v", fabric, op, count, c.Algo, c.Cost, full[i])
						}
					} else if c.Cost != full[i] {
						t.Errorf("%s %v %d: %s costed %v, Cost says %v", fabric, op, count, c.Algo, c.Cost, full[i])
					}
				}
				for i, c := range cands {
					if c.Err == nil && full[i] <= least*(1+1e-9) {
						want = c.Algo
						break
					}
				}
				if plan.Algo != want {
					t.Errorf("%s %v %d: Select picked %s, costing all picks %s", fabric, op, count, plan.Algo, want)
				}
				for _, c := range cands {
					if c.Bound && c.Cost <= least*(1+1e-9) {
						t.Errorf("%s %v %d: %s pruned with a bound %v within the ties of %v", fabric, op, count, c.Algo, c.Cost, least)
					}
				}
			}
		}
	}
	if pruned == 0 {
		t.Error("no candidate was ever pruned")
	}
	t.Logf("%d candidates pruned", pruned)
}

// infiniteModel's reductions take forever: no all-reduce has a finite cost.
type infiniteModel struct{}

func (infiniteModel) PathCost(src, dst int) (float64, float64, error) { return 1e-6, 1e-9, nil }
func (infiniteModel) ReduceCost(int) float64                          { return math.Inf(1) }

// brokenModel has no route between ranks.
type brokenModel struct{}

func (brokenModel) PathCost(src, dst int) (float64, float64, error) {
	return 0, 0, errors.New("no route, as planted")
}
func (brokenModel) ReduceCost(int) float64 { return 0 }

// neighboursModel routes only between neighbours on a ring of p ranks,
// whose reductions take forever.
type neighboursModel struct{ p int }

func (m neighboursModel) PathCost(src, dst int) (float64, float64, error) {
	if d := (dst - src + m.p) % m.p; d != 1 && d != m.p-1 {
		return 0, 0, errors.New("not a neighbour")
	}
	return 1e-6, 1e-9, nil
}
func (neighboursModel) ReduceCost(int) float64 { return math.Inf(1) }

// TestSelectSaysWhyNothingRuns: where no candidate can be priced, auto's
// error says why, for the spec it was asked (auto, not the last algorithm
// tried): that no cost is finite (ErrCostNotFinite, the fabric's fault),
// or each candidate's reason.
func TestSelectSaysWhyNothingRuns(t *testing.T) {
	spec := ops.Spec{Op: ops.AllReduce, Ranks: 8, Count: 1 << 10, DType: hw.F32, Redop: hw.Sum}
	_, _, err := ops.Select(spec, infiniteModel{})
	if !errors.Is(err, ops.ErrCostNotFinite) || !strings.Contains(err.Error(), "allreduce/auto p=8") || !strings.Contains(err.Error(), "(ring, rd, rhd, tree, dbtree, direct)") {
		t.Errorf("infinite reductions: %v, want ErrCostNotFinite naming auto and every candidate", err)
	}
	// Neighbours only, and reductions that take forever: ring's cost is
	// not finite, rd's plan cannot be costed at all; still the fabric's.
	_, _, err = ops.Select(spec, neighboursModel{8})
	if !errors.Is(err, ops.ErrCostNotFinite) || !strings.Contains(err.Error(), "no plan's cost (ring") || !strings.Contains(err.Error(), "; and rd: ") {
		t.Errorf("neighbours only: %v, want ErrCostNotFinite naming ring, and rd's reason", err)
	}
	_, cands, err := ops.Select(spec, brokenModel{})
	if err == nil || errors.Is(err, ops.ErrCostNotFinite) || strings.Count(err.Error(), "no route, as planted") != len(cands) || !strings.Contains(err.Error(), "; rd: ") {
		t.Errorf("no routes: %v, want every candidate's reason", err)
	}
}
