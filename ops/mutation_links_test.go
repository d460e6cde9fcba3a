package ops_test

import (
	"errors"
	"math"
	"testing"

	"github.com/commsim/commsim/hw"
	"github.com/commsim/commsim/ops"
)

// pairRouter gives each directed pair of its p ranks a link of its own,
// edge 2·(src·p+dst)+1, at bw bytes a second, and, where shared, routes
// every message over edge 0 too. The even edges above 0 carry nothing and
// have no bandwidth at all: LinkBound must not ask about them.
type pairRouter struct {
	p      int
	bw     float64
	shared bool
}

func (r pairRouter) RouteEdges(src, dst int) ([]int, error) {
	if src == dst || src < 0 || dst < 0 || src >= r.p || dst >= r.p {
		return nil, errors.New("no route")
	}
	own := 2*(src*r.p+dst) + 1
	if r.shared {
		return []int{0, own}, nil
	}
	return []int{own}, nil
}

func (r pairRouter) EdgeBW(e int) float64 {
	if e > 0 && e%2 == 0 {
		return 0
	}
	return r.bw
}

// TestMutLinkBoundIsTheBusiestPairsBytes: with a link of its own for each
// pair of ranks, LinkBound is the most bytes one rank sends another over
// the link's bandwidth; with one link every message crosses, all the
// bytes sent over it. Plans that send to more peers than LinkBound
// remembers (alltoall) price each peer's link, not the last one's.
func TestMutLinkBoundIsTheBusiestPairsBytes(t *testing.T) {
	const p, bw = 12, 1e9
	for _, c := range []struct {
		op   ops.Op
		algo string
	}{{ops.AllReduce, "ring"}, {ops.AllReduce, "rhd"}, {ops.AllToAll, "pairwise"}, {ops.AllGather, "ring"}} {
		plan, err := ops.Compile(ops.Spec{Op: c.op, Algo: c.algo, Ranks: p, Count: 1 << 12, DType: hw.F32, Redop: hw.Sum})
		if err != nil {
			t.Fatal(err)
		}
		pair := map[[2]int]float64{}
		total := 0.0
		for r := range plan.Ranks {
			for st := range plan.RankSteps(r) {
				if st.Kind == ops.StepSend {
					b := float64(st.Src.Len) * float64(plan.DType.Size())
					pair[[2]int{r, st.Peer}] += b
					total += b
				}
			}
		}
		most := 0.0
		for _, b := range pair {
			most = max(most, b)
		}
		if len(pair) < 2 || most == total {
			t.Fatalf("%v/%s: %d pairs, too few to tell the busiest link from the sum", c.op, c.algo, len(pair))
		}
		for _, shared := range []bool{false, true} {
			want := most / bw
			if shared {
				want = total / bw
			}
			got, err := ops.LinkBound(plan, pairRouter{p, bw, shared})
			if err != nil || math.Abs(got-want) > 1e-12*want {
				t.Errorf("%v/%s, shared link %v: LinkBound %v (%v), want %v", c.op, c.algo, shared, got, err, want)
			}
		}
	}
}

// TestMutLinkBoundRefusesAMalformedPlan: a plan whose sends and receives
// do not pair up has no bound (ErrBadPlan), as it has no cost.
func TestMutLinkBoundRefusesAMalformedPlan(t *testing.T) {
	plan, err := ops.Compile(ops.Spec{Op: ops.AllReduce, Algo: "ring", Ranks: 4, Count: 8, DType: hw.F32, Redop: hw.Sum})
	if err != nil {
		t.Fatal(err)
	}
	plan.Steps[2][1].Src.Len = 1 // a send one element short of its receive
	if got, err := ops.LinkBound(plan, pairRouter{4, 1e9, false}); !errors.Is(err, ops.ErrBadPlan) {
		t.Errorf("LinkBound of an unpaired plan: %v, %v; want ErrBadPlan", got, err)
	}
	if _, err := ops.LinkBound(nil, pairRouter{4, 1e9, false}); !errors.Is(err, ops.ErrBadPlan) {
		t.Errorf("LinkBound of no plan: %v, want ErrBadPlan", err)
	}
}

// TestMutSelectLeavesUnboundedOnlyWhatLinksRaised: Select raises costs to
// their LinkBound cheapest first and stops at the first α-β cost past the
// least it has seen, so a candidate it leaves costed in full (Bound false)
// outside the ties of the least is one whose links raised it there: its
// Cost is its LinkBound, above its α-β Cost. Any other is left a Bound.
func TestMutSelectLeavesUnboundedOnlyWhatLinksRaised(t *testing.T) {
	beyond := 0
	for _, fabric := range []string{"switch:8", "ring:12", "torus:4x4", "dgx-h100x2", "fat-tree 4:1", "fat-tree 2:1"} {
		topo := fatTree(t, 4, 4, "100GB/s")
		switch fabric {
		case "fat-tree 2:1":
			topo = fatTree(t, 4, 4, "200GB/s")
		case "fat-tree 4:1":
		default:
			topo = mustTopo(t, fabric)
		}
		for _, op := range []ops.Op{ops.AllReduce, ops.AllGather, ops.ReduceScatter, ops.AllToAll} {
			for _, count := range []int{96, 1 << 16, 1 << 22} {
				spec := ops.Spec{Op: op, Ranks: topo.NumGPUs(), Count: count, DType: hw.F32, Redop: hw.Sum}
				_, cands, err := ops.Select(spec, topo)
				if err != nil {
					t.Fatalf("%s %v %d: %v", fabric, op, count, err)
				}
				least := math.Inf(1)
				for _, c := range cands {
					if c.Err == nil && !c.Bound {
						least = min(least, c.Cost)
					}
				}
				for _, c := range cands {
					if c.Err != nil || c.Bound || c.Cost <= least*(1+1e-9) {
						continue
					}
					beyond++
					s := spec
					s.Algo = c.Algo
					p, err := ops.Compile(s)
					if err != nil {
						t.Fatal(err)
					}
					cost, err := ops.Cost(p, topo)
					if err != nil {
						t.Fatal(err)
					}
					links, err := ops.LinkBound(p, topo)
					if err != nil {
						t.Fatal(err)
					}
					if !(links > cost && c.Cost == links) {
						t.Errorf("%s %v %d: %s left costed at %v, past the least %v, with an α-β cost of %v and a link bound of %v",
							fabric, op, count, c.Algo, c.Cost, least, cost, links)
					}
				}
			}
		}
	}
	t.Logf("%d candidates raised past the least", beyond)
}
