package main

// How long a simulation will take on this host, estimated before it
// starts, so that none runs for an hour unasked or for minutes unsaid.

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/commsim/commsim/calibrate"
	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/ops/paramsync"
	"github.com/commsim/commsim/topology"
)

// Host-time model for refusing simulations (a sweep, a comparison, a
// what-if, a training step) that would run for hours: about a
// microsecond per plan step (measured: 0.5–1.8 M steps/s on a 2-core
// machine), a quarter of one more for each link a step's flow crosses
// (the flow solver's share: 13.9 µs a step for a direct all-reduce on
// ring:512, whose flows cross 51 links a step, 5.9 on ring:256 at 26),
// and in data mode a reduction throughput of about 200 MB/s per byte of
// input on every rank. A mirrored run makes and checks every step (about
// 20 ns each, measured) and simulates those of the ranks that stand for
// all. A run estimated past warnHostSeconds is said so on stderr before
// it starts; past maxHostSeconds it is refused. The estimate is
// rough, within a few times either way: small sizes cost the solver less
// (the 24-size sweep on ring:512, estimated at 7 minutes, took 2 min 43
// s), and NCCL's plans more (the 1024-GPU all-reduce sweep with
// --symmetry=false, estimated under a minute, takes three).
const (
	secondsPerStep        = 1e-6
	secondsPerHop         = 2.5e-7
	secondsPerCheckedStep = 5e-8
	dataBytesPerSec       = 200e6
	warnHostSeconds       = 120
	maxHostSeconds        = 3600
)

// checkDuration estimates the sweep's host time and refuses it, with the
// figures, if it would take over an hour, or says it on stderr (when not
// nil) if it would take over two minutes. A size's runs (-n × -m, back to
// back) run once where the in-place run is the out-of-place one (the
// simulator, timing only, untraced), else twice. w, when not nil, tells
// which plans it would time on a mirror.
func (s *sweep) checkDuration(w *openedWorld, stderr io.Writer) error {
	runs := 2.0
	if s.runsOnce(w) {
		runs = 1
	}
	// -n × -m runs back to back, and with data one more on fresh inputs
	// for the outputs (verify.Runner).
	timed := s.runner.Runs()
	if !s.timingOnly && timed > 1 {
		timed++
	}
	runs *= float64(timed)
	est, err := s.estimate(w, runs)
	if err != nil {
		return err
	}
	if err := est.judge(stderr, "sweep"); err != nil {
		return err
	}
	// After the plans are made: a sweep refused says one line, its reason.
	s.noteLoneRuns(stderr)
	return nil
}

// noteLoneRuns says on stderr, when not nil, that a sweep of a collective
// whose back-to-back runs overlap (calibrate.RunsOverlap) times each size
// as one run alone unless -n says otherwise, where nccl-tests' figures,
// twenty runs back to back by default, overlap.
func (s *sweep) noteLoneRuns(stderr io.Writer) {
	if stderr != nil && calibrate.RunsOverlap(s.op) && !s.itersGiven {
		fmt.Fprintf(stderr, "commsim: note: %s: each size is timed as one run alone; nccl-tests times -n runs back to back (20 by default), which overlap for %s: give -n 20 to time them so\n", s.op, s.op)
	}
}

// hostEstimate is a simulation's estimated host time and the figures
// that make it, to say to a user.
type hostEstimate struct {
	seconds float64
	work    string // what runs: "24 sizes", "163 collectives"
	steps   int    // the largest plan's
	ranks   int
	hops    float64 // the largest plan's links crossed a step
	// cut is what the user can have fewer of, for a refusal: "sizes (-b,
	// -e, -f)"; instead, a flag that would make it cheaper.
	cut     []string
	instead string
}

// estimate is the sweep's host time, each size run runs times. A plan's
// steps grow with its size no faster than in proportion (chunks): each
// size is counted at the largest's steps scaled to its bytes, and never
// below the smallest's.
func (s *sweep) estimate(w *openedWorld, runs float64) (hostEstimate, error) {
	top := s.sizes[len(s.sizes)-1]
	spec, moved := s.spec(top)
	plan, err := s.plan(spec)
	if err != nil {
		return hostEstimate{}, err
	}
	s.kept[0] = keptPlan{spec, plan}
	topSteps, floorSteps := runSteps(plan), runSteps(plan)
	if len(s.sizes) > 1 {
		bottom, _ := s.spec(s.sizes[0])
		small, err := s.plan(bottom)
		if err != nil {
			return hostEstimate{}, err
		}
		s.kept[1] = keptPlan{bottom, small}
		floorSteps = runSteps(small)
	}
	block := 0
	if w != nil {
		block = w.mirrorBlock(plan)
	}
	sampled := sampledRoutes(s.topo, plan)
	hops := mostHops(sampled)
	est := sweepSeconds(s.sizes, floorSteps, topSteps, runs, func(bytes int64) float64 {
		// Sizes whose count does not split evenly over the ranks make
		// chunked plans (ring, rhd) unsymmetric: count them in full.
		if spec, _ := s.spec(bytes); block > 0 && spec.Count%spec.Ranks == 0 {
			return stepSeconds(hops, block, plan.Ranks)
		}
		return stepSeconds(hops, plan.Ranks, plan.Ranks)
	})
	simulated := plan.Ranks
	if block > 0 {
		simulated = block
	}
	routes, again := routeSeconds(s.topo, sampled, simulated)
	if again {
		routes *= runs * float64(len(s.sizes))
	}
	est += routes
	var cut []string
	if len(s.sizes) > 1 {
		cut = append(cut, "sizes (-b, -e, -f)")
	}
	cut = append(cut, "ranks (-g)")
	if s.runner.Iters > 1 {
		cut = append(cut, "runs (-n, -m)")
	}
	if !s.timingOnly {
		est += runs * float64(len(s.sizes)) * float64(moved) * float64(plan.Ranks) / dataBytesPerSec
	}
	e := hostEstimate{seconds: est, steps: int(topSteps), ranks: plan.Ranks, hops: hops, cut: cut}
	e.work = fmt.Sprintf("%d %s", len(s.sizes), plural(len(s.sizes), "size", "sizes"))
	if !s.timingOnly {
		e.instead = "--timing-only"
	}
	return e, nil
}

// runSteps is the steps a run of p simulates at most: a plan made coarse
// to be checked and folded (package nccl's trees and NVLSTree at scale)
// runs made again finer (ops.Plan.Refine), each lane's steps growing as
// its pieces shrink, within half of ops.MaxPlanSteps.
func runSteps(p *ops.Plan) float64 {
	n := p.NumSteps()
	if chunk, ok := p.RefinedChunk(n); ok {
		return min(float64(n)*float64(p.Chunk)/float64(chunk), ops.MaxPlanSteps/2)
	}
	return float64(n)
}

// stepSeconds is the host time of a plan step whose flows cross hops
// links, simulated on ranks of all of them (fewer on a mirror, which
// checks every step and simulates those of the ranks that stand for all).
func stepSeconds(hops float64, ranks, all int) float64 {
	simulated := secondsPerStep + secondsPerHop*hops
	if ranks < all {
		return secondsPerCheckedStep + simulated*float64(ranks)/float64(all)
	}
	return simulated
}

// judge refuses a run (what: "sweep", "comparison", "what-if", "training
// step") estimated past an hour, and says on stderr, when not nil, one
// past two minutes.
func (e hostEstimate) judge(stderr io.Writer, what string) error {
	figures := fmt.Sprintf("%s, up to %d plan steps on %s, its flows crossing %.1f links a step", e.work, e.steps, rankCount(e.ranks), e.hops)
	if e.seconds > maxHostSeconds {
		hint := "use fewer " + strings.Join(e.cut, ", fewer ")
		if e.instead != "" {
			hint += ", or " + e.instead
		}
		return usagef("the %s would take about %.1f hours (%s); the limit is %d hour; %s",
			what, e.seconds/3600, figures, maxHostSeconds/3600, hint)
	}
	if e.seconds > warnHostSeconds && stderr != nil {
		fmt.Fprintf(stderr, "commsim: this %s may take about %.0f minutes (%s)\n", what, e.seconds/60, figures)
	}
	return nil
}

// mostHops is the links a step sends across, on average over a rank's
// steps, for the rank of the sampled ones (sampledRoutes) that sends
// across the most: the flow solver's work grows with the links its flows
// cross (each re-solve visits every link of every flow it touches), which
// plan steps alone do not count. A route that cannot be found counts
// none.
func mostHops(sampled []routeFigures) float64 {
	most := 0.0
	for _, f := range sampled {
		if f.steps > 0 {
			most = max(most, float64(f.hops)/float64(f.steps))
		}
	}
	return most
}

// secondsPerRouteLink is a route search's host time for each link of the
// route it finds: the search settles the nodes nearer than its
// destination, which on a ring or a chain are about two a link (0.4 µs a
// link, measured: ring:4000's 1 MiB recursive-doubling all-reduce makes
// some 52,000 searches of 333 links on average, in 7 s). On a switch or a
// cluster a route is a few links, and its search costs next to nothing.
const secondsPerRouteLink = 4e-7

// routeSeconds is the host time of the route searches that ranks of a
// plan's ranks make on t (fewer than all on a mirror): each rank's routes
// to its distinct peers, as many and as long as the sampled rank's
// (sampledRoutes) with the most links, leaving out the routes of two
// links (between two GPUs of one switch), which are found without a
// search. again says the route cache cannot hold them all, as on a ring
// of thousands of GPUs, so every run finds them again; else they are
// found once.
func routeSeconds(t *topology.Topology, sampled []routeFigures, ranks int) (seconds float64, again bool) {
	var most routeFigures
	for _, f := range sampled {
		if f.searchedLinks > most.searchedLinks {
			most = f
		}
	}
	again = !t.KeepsRoutes(ranks, ranks*most.peers, ranks*most.searchedLinks)
	return float64(ranks) * float64(most.searchedLinks) * secondsPerRouteLink, again
}

// sampledRoutes is the routeFigures of plan's sampled ranks (sampleRanks)
// on t, found once for what an estimate reads of them.
func sampledRoutes(t *topology.Topology, plan *ops.Plan) []routeFigures {
	var out []routeFigures
	for _, r := range sampleRanks(plan.Ranks) {
		out = append(out, rankRoutes(t, plan, r))
	}
	return out
}

// sampleRanks are the ranks whose routes stand for a plan's: the first,
// the middle and the last. One alone misleads: recursive doubling on a
// number of ranks that is no power of two folds its first ranks into
// their neighbours, whose one send crosses one link where the others'
// cross thousands on a ring.
func sampleRanks(p int) []int {
	return slices.Compact([]int{0, p / 2, p - 1})
}

// routeFigures are a rank's routes in a plan: its steps, the links its
// sends cross over them all, its distinct peers, and the links of its
// routes to them that a search finds (those of more than two links).
type routeFigures struct{ steps, hops, peers, searchedLinks int }

// rankRoutes is rank's routeFigures in plan on t.
func rankRoutes(t *topology.Topology, plan *ops.Plan, rank int) routeFigures {
	var f routeFigures
	byPeer := map[int]int{}
	for st := range plan.RankSteps(rank) {
		f.steps++
		if st.Kind != ops.StepSend {
			continue
		}
		n, ok := byPeer[st.Peer]
		if !ok {
			if path, err := t.RouteRanks(rank, st.Peer); err == nil {
				n = len(path.Edges)
			}
			byPeer[st.Peer] = n
			f.peers++
			if n > 2 {
				f.searchedLinks += n
			}
		}
		f.hops += n
	}
	return f
}

// runsOnce reports whether each size runs once on w: on the simulator,
// timing only, a run's time does not depend on where its buffers are, so
// the in-place run is the out-of-place one (unless a trace shows both).
func (s *sweep) runsOnce(w *openedWorld) bool {
	return w != nil && w.cluster != nil && s.timingOnly && s.trace == ""
}

// sweepSeconds is the host time of a sweep over sizes (ascending) whose
// smallest plan has floorSteps steps and largest topSteps: each size's
// steps scaled from the largest's by its bytes, within those two, run
// runs times at perStep(bytes) seconds a step.
func sweepSeconds(sizes []int64, floorSteps, topSteps, runs float64, perStep func(bytes int64) float64) float64 {
	top := float64(sizes[len(sizes)-1])
	est := 0.0
	for _, bytes := range sizes {
		steps := min(topSteps, max(floorSteps, topSteps*float64(bytes)/top))
		est += runs * steps * perStep(bytes)
	}
	return est
}

// stepEstimate is a training step's host time on ranks of all of them
// (fewer on a mirror): each parameter's collective once, and a sharded
// one's two gathers, each counted at its reduce-scatter's steps (a ring's
// all-gather makes as many); and the route searches of its plans
// (routeSeconds): once for the plan whose routes take longest to find,
// which the others' share, where the cache keeps them, else for every
// collective of each plan. plan gives a parameter's collective.
func stepEstimate(t *topology.Topology, params []paramsync.Param, plan func(id string) (*ops.Plan, error), ranks, all int) (hostEstimate, error) {
	e := hostEstimate{ranks: all, cut: []string{"ranks (a smaller --topo)"}}
	// A plan's figures, found once however many parameters it serves.
	type planFigures struct {
		hops, routeSeconds float64
		again              bool
	}
	figures := map[*ops.Plan]planFigures{}
	kept := 0.0 // the searches of routes the cache keeps, shared by the plans
	calls := 0
	for _, p := range params {
		pl, err := plan(p.ID)
		if err != nil {
			return e, err
		}
		f, ok := figures[pl]
		if !ok {
			sampled := sampledRoutes(t, pl)
			f.hops = mostHops(sampled)
			f.routeSeconds, f.again = routeSeconds(t, sampled, ranks)
			figures[pl] = f
		}
		h := f.hops
		n := 1
		if p.Sharded {
			n = 3
		}
		calls += n
		steps := runSteps(pl)
		e.seconds += float64(n) * steps * stepSeconds(h, ranks, all)
		if int(steps) > e.steps {
			e.steps, e.hops = int(steps), h
		}
		if f.again {
			e.seconds += float64(n) * f.routeSeconds
		} else {
			kept = max(kept, f.routeSeconds)
		}
	}
	e.seconds += kept
	e.work = fmt.Sprintf("%d %s", calls, plural(calls, "collective", "collectives"))
	return e, nil
}
