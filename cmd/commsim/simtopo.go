package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/commsim/commsim/ops"
	"github.com/commsim/commsim/sim"
	"github.com/commsim/commsim/topology"
	"github.com/commsim/commsim/verify"
)

// bench --sim-topo: on a real backend, the simulator's prediction for each
// size's plan on a topology that describes the machine, printed beside the
// measurement, so a GPU run also says how far the model is from the
// hardware (h200-virtual:N describes N virtual ranks on one H200).

// prediction is the simulator's time for a row's plan, out of place.
type prediction struct {
	result
	topology string
}

func registerSimTopo(cmd *cobra.Command, spec *string) {
	cmd.Flags().StringVar(spec, "sim-topo", "", "with --backend cuda or metal: also print, per size, the simulator's time for the same plan on this topology (a spec, preset or YAML file; h200-virtual:N for N virtual ranks on one H200), beside the measurement")
}

// setSimTopo checks --sim-topo against the sweep.
func (s *sweep) setSimTopo(spec string) error {
	if spec == "" {
		return nil
	}
	switch {
	case s.backend.name == "sim":
		return usagef("--sim-topo is for real backends; on the simulator, --topo is the fabric")
	case s.algo == ops.Native:
		return usagef("--sim-topo needs a plan to simulate, and algorithm native runs NCCL's own; use ring, auto or another algorithm")
	}
	topo, err := topology.Resolve(spec)
	if err != nil {
		return usageError{err}
	}
	if topo.NumGPUs() != s.topo.NumGPUs() {
		return usagef("--sim-topo %s has %d GPUs but the %s backend runs %d ranks", spec, topo.NumGPUs(), s.backend.name, s.topo.NumGPUs())
	}
	s.simTopo = topo
	return nil
}

// predict simulates each size's plan on --sim-topo, timing only and out of
// place, and puts the time beside the measured row. Without --sim-topo it
// does nothing.
func (s *sweep) predict(rows []row) (err error) {
	if s.simTopo == nil {
		return nil
	}
	w, err := (&backendPlan{name: "sim"}).open(s.simTopo, sim.Config{TimingOnly: true, Symmetry: true})
	if err != nil {
		return err
	}
	exec := w.newExecutor()
	runner := verify.Runner{Iters: s.runner.Iters} // back to back, as the real runs
	defer func() { err = errors.Join(err, runner.Free(), exec.Close(), w.close()) }()
	for i := range rows {
		spec, moved := s.spec(s.sizes[i])
		plan, err := s.plan(spec)
		if err != nil {
			return err
		}
		run, err := runner.Run(exec, w.World, plan, nil, false)
		if err != nil {
			return fmt.Errorf("--sim-topo %s: %d bytes: %w", s.simTopo.Name, moved, err)
		}
		rows[i].sim = &prediction{timed(run.Seconds, moved, plan.Op, plan.Ranks), s.simTopo.Name}
	}
	return nil
}

// simHeader says what the prediction columns are, when there are any.
func simHeader(w io.Writer, rows []row) {
	if len(rows) > 0 && rows[0].sim != nil {
		fmt.Fprintf(w, "# sim columns: the simulator's time for the same plan on %s (timing only, out of place); time/sim is the measured out-of-place time over it\n", rows[0].sim.topology)
	}
}

// simColumns are the prediction's column names for the tables, or none.
func simColumns(rows []row) []string {
	if len(rows) == 0 || rows[0].sim == nil {
		return nil
	}
	return []string{"sim time(us)", "sim busbw(GB/s)", "time/sim"}
}

// simCSVColumns are the prediction's CSV column names, in the CSV's and
// JSON's vocabulary, or none.
func simCSVColumns(rows []row) []string {
	if len(rows) == 0 || rows[0].sim == nil {
		return nil
	}
	return []string{"sim_time_us", "sim_busbw_gbps", "time_over_sim"}
}

// simCells are a row's prediction columns, or none.
func simCells(r row) []string {
	if r.sim == nil {
		return nil
	}
	ratio := "N/A"
	if r.sim.timeUS > 0 {
		ratio = strconv.FormatFloat(r.outOfPlace.timeUS/r.sim.timeUS, 'f', 2, 64)
	}
	return []string{f2(r.sim.timeUS), f2(r.sim.busbw), ratio}
}

// simJSON are the prediction's JSON fields, absent without --sim-topo.
type simJSON struct {
	SimTimeUS   *float64 `json:"sim_time_us,omitempty"`
	SimBusBW    *float64 `json:"sim_busbw_gbps,omitempty"`
	SimTopology string   `json:"sim_topology,omitempty"`
}

func simFields(r row) simJSON {
	if r.sim == nil {
		return simJSON{}
	}
	return simJSON{&r.sim.timeUS, &r.sim.busbw, r.sim.topology}
}
