/* One MPI_Allreduce of 1 MiB of floats, timed on rank 0, for SimGrid's SMPI
 * (see compare.sh). Buffers are SMPI_SHARED_MALLOC: SMPI keeps one copy for
 * all ranks, so, like commsim's timing-only mode, it moves no real data.
 * Rank 0's clock starts when it leaves the barrier, before the last barrier
 * message reaches the others, so its time includes about one GPU-to-GPU
 * latency more than the collective itself. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int n = 1 << 18; /* 1 MiB of float */
  float *in = SMPI_SHARED_MALLOC(n * sizeof(float));
  float *out = SMPI_SHARED_MALLOC(n * sizeof(float));
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double t1 = MPI_Wtime();
  if (rank == 0) printf("simulated allreduce time: %.9f s\n", t1 - t0);
  SMPI_SHARED_FREE(in); SMPI_SHARED_FREE(out);
  MPI_Finalize();
  return 0;
}
