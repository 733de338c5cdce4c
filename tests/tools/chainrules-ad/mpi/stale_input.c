/*
 * Two reverse sweeps at once on rank 0, in two threads (test_ad_stale.c). st_fail: rank 0
 * sends x to rank 1 and reduces x[0] x[1] over MPI_COMM_SELF with `op`; a user's operation
 * has no derivative, so st_fail's adjoint fails there, then waits for rank 1's adjoint
 * message. Rank 1 receives x, then waits for a message on `ctl` before its own adjoint.
 * st_good: a sum over `self`, whose derivative never fails.
 */
#include <mpi.h>

double st_fail(const double *x, MPI_Op op, MPI_Comm data, MPI_Comm ctl);
double st_good(const double *x, MPI_Comm self);

double st_fail(const double *x, MPI_Op op, MPI_Comm data, MPI_Comm ctl)
{
    int rank = 0;
    MPI_Comm_rank(data, &rank);
    double s = 0, t = 0, y[2] = {0, 0};
    if (rank == 0) {
        MPI_Send(x, 2, MPI_DOUBLE, 1, 0, data);
        s = x[0] * x[1];
        MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, op, MPI_COMM_SELF);
        return t;
    }
    MPI_Recv(y, 2, MPI_DOUBLE, 0, 0, data, MPI_STATUS_IGNORE);
    int go = 0;
    MPI_Recv(&go, 1, MPI_INT, 0, 1, ctl, MPI_STATUS_IGNORE);
    return y[0] + 3 * y[1] + go;
}

double st_good(const double *x, MPI_Comm self)
{
    double s = x[0] * x[0] + x[1], t = 0;
    MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, MPI_SUM, self);
    return t;
}
