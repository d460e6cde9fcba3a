package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomPaths makes nFlows paths of one to four distinct links among
// links, from rng.
func randomPaths(rng *rand.Rand, links []*link, nFlows int) [][]*link {
	paths := make([][]*link, nFlows)
	for i := range paths {
		for _, j := range rng.Perm(len(links))[:1+rng.IntN(min(4, len(links)))] {
			paths[i] = append(paths[i], links[j])
		}
	}
	return paths
}

// randomLinks makes n links whose capacities are drawn from a few, as a
// fabric's are: equal capacities make the exact fits and ties that
// rounding could tip.
func randomLinks(rng *rand.Rand, n int) []*link {
	rates := []float64{22.5, 45, 100, 450, 900, inf}
	links := make([]*link, n)
	for i := range links {
		links[i] = gbps(i, rates[rng.IntN(len(rates))])
	}
	return links
}

// TestOwnBottleneckShortcutMatchesProgressiveFilling: where solve takes the
// shortcut of atOwnBottlenecks, its rates are progressive filling's, bit
// for bit; and the random cases take both ways.
func TestOwnBottleneckShortcutMatchesProgressiveFilling(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var fb fabric
	shortcuts, cases := 0, 2000
	for c := range cases {
		links := randomLinks(rng, 2+rng.IntN(6))
		paths := randomPaths(rng, links, 2+rng.IntN(8))
		rates := make([][]float64, 2)
		for way := range rates {
			for _, l := range links {
				l.flows = l.flows[:0]
			}
			flows := make([]*flow, len(paths))
			for i, p := range paths {
				flows[i] = &flow{links: p}
				for _, l := range p {
					l.flows = append(l.flows, flows[i])
				}
			}
			if way == 0 {
				if atOwnBottlenecks(links, flows) {
					shortcuts++
				} else {
					fb.fill(links, flows)
				}
			} else {
				fb.fill(links, flows)
			}
			for _, f := range flows {
				rates[way] = append(rates[way], f.rate)
			}
		}
		for i := range rates[0] {
			if math.Float64bits(rates[0][i]) != math.Float64bits(rates[1][i]) {
				t.Fatalf("case %d, flow %d: solve gives %v, progressive filling %v", c, i, rates[0][i], rates[1][i])
			}
		}
	}
	if shortcuts == 0 || shortcuts == cases {
		t.Fatalf("%d of %d cases took the shortcut: the cases do not try both ways", shortcuts, cases)
	}
}

// TestLocalSettlesMatchSolvingEveryInstant: flows that come and go at
// random end at the same picosecond whether the fabric settles locally
// where it can or solves every change; and settling locally re-solves
// fewer flows, so it was taken. Most flows cross a slow channel of their
// own besides two shared links, as a collective's do; the rest run at a
// shared link's speed and make it tight while they last.
func TestLocalSettlesMatchSolvingEveryInstant(t *testing.T) {
	var resolved [2]uint64
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		shared := make([]*link, 2+rng.IntN(8))
		for i := range shared {
			shared[i] = gbps(i, []float64{450, 900}[rng.IntN(2)])
		}
		type start struct {
			path     []*link
			at, lat  Time
			bytes    float64
			finishes *Time
		}
		starts := make([]start, 5+rng.IntN(60))
		for i := range starts {
			s := &starts[i]
			for _, j := range rng.Perm(len(shared))[:2] {
				s.path = append(s.path, shared[j])
			}
			if rng.IntN(8) > 0 {
				s.path = append(s.path, gbps(len(shared)+i, []float64{22.5, 45, 100}[rng.IntN(3)]))
			}
			s.at = Time(rng.IntN(20)) * Microsecond
			s.lat = Time(rng.IntN(3)) * 500 * Nanosecond
			s.bytes = float64(1+rng.IntN(8)) * 1e5
		}
		var finishes [2][]Time
		for way := range 2 {
			for i := range starts {
				for _, l := range starts[i].path {
					*l = link{id: l.id, capacity: l.capacity} // as new
				}
			}
			r := newFlowRig()
			r.fab.faulted = way == 1 // solves every change
			for i := range starts {
				s := &starts[i]
				r.eng.schedule(s.at, startEvent(func() { s.finishes = r.start(s.path, s.lat, s.bytes) }), 0)
			}
			r.run()
			for _, s := range starts {
				finishes[way] = append(finishes[way], *s.finishes)
			}
			resolved[way] += r.fab.resolved
		}
		for i := range starts {
			if finishes[0][i] != finishes[1][i] {
				t.Fatalf("seed %d, flow %d: ends at %v settling locally, %v solving every change", seed, i, finishes[0][i], finishes[1][i])
			}
		}
	}
	if resolved[0] >= resolved[1] {
		t.Fatalf("settling locally re-solved %d flows, solving every change %d: it was never taken", resolved[0], resolved[1])
	}
	t.Logf("re-solved %d flows settling locally, %d solving every change", resolved[0], resolved[1])
}

// startEvent is an engine event that runs a function once.
type startEvent func()

func (e startEvent) fire(Time, uint64) { e() }
