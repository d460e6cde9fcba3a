package main

import (
	"fmt"
	"io"
)

// nccl-tests' -g N: one thread drives N GPUs and launches every collective
// on them in turn, so an iteration takes at least N launches of host time
// (nccl.ThreadFloorUS). bench and compare hold simulated times to it
// (sweep.threadFloor, from -g or --thread-gpus), fidelity and calibrate
// hold a log's predictions to its nGpus's, and the reports say so.

// gpusPerThread is how many GPUs each thread of the run drives, as
// nccl-tests' header and JSON report state it (nGpus): -g's, else one on
// sim, whose times are those of a process a GPU (mpirun -np N), and in a
// multi-process run; a real backend's one process drives all its ranks.
func (s *sweep) gpusPerThread() int {
	switch {
	case s.threadGPUs > 0:
		return s.threadGPUs
	case s.backend.name == "sim" || s.backend.multi != nil:
		return 1
	}
	return s.topo.NumGPUs()
}

// floored is a run's time as the sweep reports it: held to -g's thread
// floor (0 but on sim).
func (s *sweep) floored(secs float64) float64 { return max(secs, s.threadFloor) }

// writeThreadNote says, where simulated times are held to it, what -g
// N's thread costs the host.
func writeThreadNote(w io.Writer, s *sweep) {
	if s.threadGPUs > 1 {
		fmt.Fprintf(w, "# %s\n", threadFloorNote(s.threadGPUs, s.threadFloor*1e6))
	}
}

// threadFloorNote says what a run whose threads each drive gpus GPUs
// (nccl-tests -g) costs the host: floorUS a size.
func threadFloorNote(gpus int, floorUS float64) string {
	return fmt.Sprintf("each thread of the run drives %d GPUs (nccl-tests -g %d), launching every collective on them in turn: no size takes less than those %d launches of host time, %.2f us (nccl.ThreadFloorUS)", gpus, gpus, gpus, floorUS)
}
