package ops_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/internal/simtest"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
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
// what costing every one would (Cost, or the busiest link's LinkBound
// where that is more): the earliest algorithm within the ties of the
// least cost. A pruned candidate's bound is at most its cost and more
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
					links, err := ops.LinkBound(p, topo)
					if err != nil {
						t.Fatal(err)
					}
					full[i] = max(full[i], links)
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
	// Paths of negative time priced every plan at 0, and auto chose ring.
	if plan, _, err := ops.Select(spec, negativeModel{}); err == nil || !strings.Contains(err.Error(), "want 0 or more") {
		t.Errorf("negative paths: chose %v, %v", plan, err)
	}
}

// negativeModel's paths take less than no time.
type negativeModel struct{}

func (negativeModel) PathCost(src, dst int) (float64, float64, error) { return -1, -1, nil }
func (negativeModel) ReduceCost(int) float64                          { return 0 }

// fatTree is a YAML fabric of leaves switches of perLeaf GPUs each (100
// GB/s, 1 us links), every leaf joined to one spine by an uplink of
// uplink: 400GB/s is 1:1, 100GB/s 4:1 oversubscribed.
func fatTree(t *testing.T, leaves, perLeaf int, uplink string) *topology.Topology {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "name: fat-tree\nnodes:\n")
	for g := range leaves * perLeaf {
		fmt.Fprintf(&b, "  - {name: gpu%d, kind: gpu}\n", g)
	}
	for l := range leaves {
		fmt.Fprintf(&b, "  - {name: leaf%d, kind: switch}\n", l)
	}
	fmt.Fprintf(&b, "  - {name: spine, kind: switch}\nlinks:\n")
	for g := range leaves * perLeaf {
		fmt.Fprintf(&b, "  - {a: gpu%d, b: leaf%d, bw: 100GB/s, lat: 1us}\n", g, g/perLeaf)
	}
	for l := range leaves {
		fmt.Fprintf(&b, "  - {a: leaf%d, b: spine, bw: %s, lat: 1us}\n", l, uplink)
	}
	topo, err := topology.ReadYAML([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// TestLinkBoundNeverExceedsTheSimulatedTime: the bytes a plan puts on its
// busiest link take that link's bandwidth whatever else happens, so the
// simulator never beats LinkBound; and on fabrics whose links flows share
// (rings and tori of GPUs, an oversubscribed fat-tree) the bound is more
// than Cost, which is why Select asks for it.
func TestLinkBoundNeverExceedsTheSimulatedTime(t *testing.T) {
	fabrics := map[string]*topology.Topology{
		"ring:12": mustTopo(t, "ring:12"), "torus:4x4": mustTopo(t, "torus:4x4"),
		"dgx-h100x2": mustTopo(t, "dgx-h100x2"), "fat-tree 4:1": fatTree(t, 4, 4, "100GB/s"),
	}
	above := 0
	for _, name := range []string{"ring:12", "torus:4x4", "dgx-h100x2", "fat-tree 4:1"} {
		topo := fabrics[name]
		c, err := sim.NewCluster(topo, sim.Config{TimingOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.AllToAll, ops.Broadcast} {
			for _, algo := range ops.AlgorithmsFor(op) {
				if ops.IsNCCL(algo) {
					continue
				}
				plan, err := ops.Compile(ops.Spec{Op: op, Algo: algo, Ranks: topo.NumGPUs(), Count: 1 << 18, DType: hw.F32, Redop: hw.Sum})
				if err != nil {
					t.Fatal(err)
				}
				bound, err := ops.LinkBound(plan, topo)
				if err != nil {
					t.Fatal(err)
				}
				cost, err := ops.Cost(plan, topo)
				if err != nil {
					t.Fatal(err)
				}
				if simulated := simtest.Time(t, c, plan); bound > simulated*(1+1e-9) {
					t.Errorf("%s %v/%s: link bound %.2f us, over the simulated %.2f us", name, op, algo, bound*1e6, simulated*1e6)
				}
				if bound > cost*(1+1e-9) {
					above++
				}
			}
		}
		c.Close()
	}
	if above == 0 {
		t.Error("no plan's link bound was ever above its α-β cost")
	}
}

// TestAutoSeesAnOversubscribedFatTree: on a fat-tree whose uplinks carry
// a quarter of what its GPUs can send, rhd's exchanges across leaves
// share each uplink four ways where ring's messages have one each. α-β
// prices them alike; Select, with the link bound, picks ring, and ring
// simulates over twice as fast. On the same tree at 1:1 rhd still wins.
func TestAutoSeesAnOversubscribedFatTree(t *testing.T) {
	spec := ops.Spec{Op: ops.AllReduce, Ranks: 16, Count: 16 << 20, DType: hw.F32, Redop: hw.Sum}
	for _, f := range []struct {
		uplink, want string
	}{{"100GB/s", "ring"}, {"400GB/s", "rhd"}} {
		topo := fatTree(t, 4, 4, f.uplink)
		plan, _, err := ops.Select(spec, topo)
		if err != nil {
			t.Fatal(err)
		}
		if plan.Algo != f.want {
			t.Errorf("uplinks of %s: auto picked %s, want %s", f.uplink, plan.Algo, f.want)
		}
		c, err := sim.NewCluster(topo, sim.Config{TimingOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		picked := simtest.Time(t, c, plan)
		for _, other := range []string{"ring", "rhd"} {
			s := spec
			s.Algo = other
			p, err := ops.Compile(s)
			if err != nil {
				t.Fatal(err)
			}
			if secs := simtest.Time(t, c, p); secs < picked*(1-1e-9) {
				t.Errorf("uplinks of %s: auto's %s simulates %.1f us, %s %.1f us", f.uplink, plan.Algo, picked*1e6, other, secs*1e6)
			}
		}
		c.Close()
	}
}

// TestSelectRefusesALinkBoundThatIsNotFinite: links so slow that the
// bytes on the busiest take forever make every plan's bound infinite, the
// fabric's fault (ErrCostNotFinite) as an infinite α-β cost is, not a
// plan picked at +Inf.
func TestSelectRefusesALinkBoundThatIsNotFinite(t *testing.T) {
	spec := ops.Spec{Op: ops.AllReduce, Ranks: 16, Count: 1, DType: hw.F32, Redop: hw.Sum}
	plan, cands, err := ops.Select(spec, mustTopo(t, "ring:16,bw=1e-307B/s"))
	if !errors.Is(err, ops.ErrCostNotFinite) {
		t.Errorf("Select on links of 1e-307B/s: plan %v, %v; want ErrCostNotFinite (candidates %+v)", plan, err, cands)
	}
}

// badRouter routes every message over edge -1, as no topology does.
type badRouter struct{}

func (badRouter) RouteEdges(src, dst int) ([]int, error) { return []int{-1}, nil }
func (badRouter) EdgeBW(edge int) float64                { return 1 }

// A router of its own that names a negative edge is an error from
// LinkBound, not an index out of range.
func TestLinkBoundRefusesANegativeEdge(t *testing.T) {
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ops.LinkBound(plan, badRouter{}); err == nil || !strings.Contains(err.Error(), "the router gave edge -1") {
		t.Errorf("LinkBound with a negative edge: %v", err)
	}
}
