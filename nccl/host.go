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
// hostLaunchPerGPUUS is the host's time for one GPU's launch, in µs, as
// published -g 8 runs of one node measure it where the GPUs' part is far
// shorter: the median out-of-place time of their smallest sizes, over 8.
// Each run is shipped held out of issue #16's targets (fidelity's
// nccl-logs; TestThreadFloorRuns reads them):
//
//   - 8 H100 80GB HBM3, NCCL 2.26.2, NCCL_ALGO ring and NVLS runs
//     (togethercomputer/together-nccl-tests): 34.98 and 35.31 µs over
//     8–128 B, 4.37 and 4.41 a GPU;
//   - 8 A100-SXM4-40GB, NCCL not stated (microsoft/superbenchmark's
//     recorded all-reduce): 34.78 µs over 4–512 B, 4.35 a GPU.
//
// The median of the three is the figure. nccl-tests issue #333 states
// about 9 µs with -g 2 and 22 with -g 4 on B200s (text, no table): the
// same order, which a figure per GPU follows roughly.
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
