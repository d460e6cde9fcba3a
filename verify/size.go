package verify

import "github.com/commsim/commsim/ops"

// SpecForSize returns the collective that nccl-tests runs for a size of
// bytes, and the bytes it moves. base gives the op, algorithm, ranks,
// dtype, reduce op and root; its Count is replaced.
//
// nccl-tests' size is each rank's buffer for allreduce, broadcast, reduce
// and sendrecv, and the total of every rank's share for allgather,
// reducescatter, gather and alltoall (REFERENCE.md, nccl-tests'
// PERFORMANCE.md). Counts round down to whole elements per rank, so the
// bytes moved can be fewer than asked; a size under one element per rank
// gives Count 0. Bench, calibrate and the fidelity check all size their
// collectives here, so a log's row and a sweep's row of the same size run
// the same collective.
func SpecForSize(base ops.Spec, bytes int64) (ops.Spec, int64) {
	p := int64(base.Ranks)
	size := int64(base.DType.Size())
	spec := base
	if p < 1 || size < 1 {
		spec.Count = 0 // no ranks or no type: nothing to size (Validate says why)
		return spec, 0
	}
	switch base.Op {
	case ops.AllGather, ops.ReduceScatter, ops.Gather, ops.AllToAll:
		spec.Count = int(bytes / size / p)
		return spec, int64(spec.Count) * size * p
	case ops.Barrier:
		spec.Count = 0
		return spec, 0
	}
	spec.Count = int(bytes / size)
	return spec, int64(spec.Count) * size
}
