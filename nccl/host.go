package nccl

// A host thread's part. NCCL's model prices a collective from its launch
// on; where one thread drives one GPU, what the host spends enqueuing it
// does not show: NCCL's base latency holds it, and the GPUs' work
// outlasts it. nccl-tests' -g N has one thread launch every collective on
// N GPUs in turn (ncclGroupStart, a call for each GPU, ncclGroupEnd), and
// its iterations run back to back: the thread enqueues iteration i+1
// while the GPUs run iteration i, so an iteration takes the longer of
// the host's N launches and the GPUs' work, however little that is.
//
// hostLaunchPerGPUUS is the host's time for one GPU's launch, in µs, as a
// published -g 8 run of one node measures it where the GPUs' part is far
// shorter: the median out-of-place time of its smallest sizes, over 8.
// The run is shipped held out of issue #16's targets (fidelity's
// nccl-logs, together-h100-allreduce-ring-8xH100.txt; TestThreadFloorRuns
// reads it): 8 H100 80GB HBM3, NCCL 2.26.2, NCCL_ALGO=RING
// (togethercomputer/together-nccl-tests), 34.98 µs over 8–128 B, 4.37 a
// GPU. Two runs not shipped bear it out: the same repository's NVLS run
// of the node, 35.31 µs (4.41 a GPU), and an 8 A100-SXM4-40GB run with
// NCCL not stated (microsoft/superbenchmark's recorded all-reduce,
// tests/data/nccl_allreduce.log), 34.78 µs over 4–512 B (4.35).
// nccl-tests issue #333 states about 9 µs with -g 2 and 22 with -g 4 on
// B200s (text, no table): the same order, which a figure per GPU follows
// roughly.
const hostLaunchPerGPUUS = 4.37

// ThreadFloorUS is the least time, in µs, an iteration of nccl-tests takes
// where each of its threads launches the collective on gpusPerThread GPUs
// (its -g): that many launches of host time. It is 0 for one GPU a
// thread, where NCCL's base latency holds the host's part.
func ThreadFloorUS(gpusPerThread int) float64 {
	if gpusPerThread <= 1 {
		return 0
	}
	return float64(gpusPerThread) * hostLaunchPerGPUUS
}
