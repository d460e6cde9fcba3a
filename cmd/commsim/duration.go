package main

// How long a simulation will take on this host, estimated before it
// starts, so that none runs for an hour unasked or for minutes unsaid.

import (
	"fmt"
	"io"
	"strings"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/topology"
)

// Host-time model for refusing sweeps that would run for hours: about a
// microsecond per plan step (measured: 0.5–1.8 M steps/s on a 2-core
// machine), a quarter of one more for each link a step's flow crosses
// (the flow solver's share: 13.9 µs a step for a direct all-reduce on
// ring:512, whose flows cross 51 links a step, 5.9 on ring:256 at 26),
// and in data mode a reduction throughput of about 200 MB/s per byte of
// input on every rank. A mirrored run makes and checks every step (about
// 20 ns each, measured) and simulates those of the ranks that stand for
// all. A sweep estimated past warnSweepSeconds is said so on stderr
// before it starts; past maxSweepSeconds it is refused. The estimate is
// rough, within a few times either way: small sizes cost the solver less
// (the 24-size sweep on ring:512, estimated at 7 minutes, took 2 min 43
// s), and NCCL's plans more (the 1024-GPU all-reduce sweep with
// --symmetry=false, estimated under a minute, takes three).
const (
	secondsPerStep        = 1e-6
	secondsPerHop         = 2.5e-7
	secondsPerCheckedStep = 5e-8
	dataBytesPerSec       = 200e6
	warnSweepSeconds      = 120
	maxSweepSeconds       = 3600
)

// checkDuration estimates the sweep's host time and refuses it, with the
// figures, if it would take over an hour, or says it on stderr (when not
// nil) if it would take over two minutes. A size runs once where the
// in-place run is the out-of-place one (the simulator, timing only,
// untraced), else twice. w, when not nil, tells which plans it would time
// on a mirror.
func (s *sweep) checkDuration(w *openedWorld, stderr io.Writer) error {
	runs := 2.0
	if s.runsOnce(w) {
		runs = 1
	}
	est, err := s.estimate(w, runs)
	if err != nil {
		return err
	}
	return est.judge(stderr, "sweep", s.timingOnly)
}

// sweepEstimate is a sweep's estimated host time and the figures that
// make it, to say to a user.
type sweepEstimate struct {
	seconds      float64
	sizes, algos int // algos: how many ran each size, for compare
	steps, ranks int // the largest plan's
	hops         float64
}

// estimate is the sweep's host time, each size run runs times. A plan's
// steps grow with its size no faster than in proportion (chunks): each
// size is counted at the largest's steps scaled to its bytes, and never
// below the smallest's.
func (s *sweep) estimate(w *openedWorld, runs float64) (sweepEstimate, error) {
	top := s.sizes[len(s.sizes)-1]
	spec, moved := s.spec(top)
	plan, err := s.plan(spec)
	if err != nil {
		return sweepEstimate{}, err
	}
	s.kept[0] = keptPlan{spec, plan}
	topSteps, floorSteps := float64(plan.NumSteps()), float64(plan.NumSteps())
	if len(s.sizes) > 1 {
		bottom, _ := s.spec(s.sizes[0])
		small, err := s.plan(bottom)
		if err != nil {
			return sweepEstimate{}, err
		}
		s.kept[1] = keptPlan{bottom, small}
		floorSteps = float64(small.NumSteps())
	}
	block := 0
	if w != nil {
		block = w.mirrorBlock(plan)
	}
	hops := hopsPerStep(s.topo, plan)
	simulated := secondsPerStep + secondsPerHop*hops
	est := sweepSeconds(s.sizes, floorSteps, topSteps, runs, func(bytes int64) float64 {
		// Sizes whose count does not split evenly over the ranks make
		// chunked plans (ring, rhd) unsymmetric: count them in full.
		if spec, _ := s.spec(bytes); block > 0 && spec.Count%spec.Ranks == 0 {
			return secondsPerCheckedStep + simulated*float64(block)/float64(plan.Ranks)
		}
		return simulated
	})
	if !s.timingOnly {
		est += runs * float64(len(s.sizes)) * float64(moved) * float64(plan.Ranks) / dataBytesPerSec
	}
	return sweepEstimate{seconds: est, sizes: len(s.sizes), algos: 1, steps: plan.NumSteps(), ranks: plan.Ranks, hops: hops}, nil
}

// add sums two estimates of the same sizes (compare's algorithms),
// keeping the figures of the plan with more steps.
func (e sweepEstimate) add(o sweepEstimate) sweepEstimate {
	seconds, algos := e.seconds+o.seconds, e.algos+o.algos
	if o.steps > e.steps {
		e = o
	}
	e.seconds, e.algos = seconds, algos
	return e
}

// judge refuses a run (what: "sweep", "comparison", "what-if")
// estimated past an hour, and says on stderr, when not nil, one past two
// minutes.
func (e sweepEstimate) judge(stderr io.Writer, what string, timingOnly bool) error {
	sizes := fmt.Sprintf("%d %s", e.sizes, plural(e.sizes, "size", "sizes"))
	if e.algos > 1 {
		sizes += fmt.Sprintf(" of %d algorithms", e.algos)
	}
	figures := fmt.Sprintf("%s, up to %d plan steps on %s, its flows crossing %.1f links a step", sizes, e.steps, rankCount(e.ranks), e.hops)
	if e.seconds > maxSweepSeconds {
		var fewer []string
		if e.sizes > 1 {
			fewer = append(fewer, "sizes (-b, -e, -f)")
		}
		if e.algos > 1 {
			fewer = append(fewer, "algorithms (--algos)")
		}
		hint := "use fewer " + strings.Join(append(fewer, "ranks (-g)"), ", fewer ")
		if !timingOnly {
			hint += ", or --timing-only"
		}
		return usagef("the %s would take about %.1f hours (%s); the limit is %d hour; %s",
			what, e.seconds/3600, figures, maxSweepSeconds/3600, hint)
	}
	if e.seconds > warnSweepSeconds && stderr != nil {
		fmt.Fprintf(stderr, "commsim: this %s may take about %.0f minutes (%s)\n", what, e.seconds/60, figures)
	}
	return nil
}

// hopsPerStep is the links a step of plan's rank 0 sends across, on
// average over its steps: the flow solver's work grows with the links its
// flows cross (each re-solve visits every link of every flow it touches),
// which plan steps alone do not count. Rank 0 stands for all, as in
// ops.Select's estimate; a route that cannot be found counts none.
func hopsPerStep(t *topology.Topology, plan *ops.Plan) float64 {
	hops, steps := 0, 0
	byPeer := map[int]int{}
	for st := range plan.RankSteps(0) {
		steps++
		if st.Kind != ops.StepSend {
			continue
		}
		n, ok := byPeer[st.Peer]
		if !ok {
			if path, err := t.RouteRanks(0, st.Peer); err == nil {
				n = len(path.Edges)
			}
			byPeer[st.Peer] = n
		}
		hops += n
	}
	if steps == 0 {
		return 0
	}
	return float64(hops) / float64(steps)
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
