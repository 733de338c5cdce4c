/*
 * A distributed objective whose calls of MPI chainrules-ad differentiates: every
 * communication it maps (send, receive, sendrecv, broadcast, reduce and allreduce with
 * sum, max and min, gather, scatter, allgather, alltoall), between arithmetic, on any
 * number of ranks up to 8.
 */
#include <math.h>
#include <mpi.h>

double m_obj(const double *x, int n);

double m_obj(const double *x, int n)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double a[4], b[4], c[4], r[4], d[4], g[32], h[32];
    double s = 0, t = 0, u = 0;
    for (int i = 0; i < n; i++)
        a[i] = sin(x[i]) * (rank + 1);
    /* a ring: a to the right, b from the left */
    MPI_Sendrecv(a, n, MPI_DOUBLE, (rank + 1) % size, 7, b, n, MPI_DOUBLE, (rank + size - 1) % size,
                 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* pairs: an even rank sends b to the next, which overwrites a with it */
    if (rank % 2 == 0 && rank + 1 < size)
        MPI_Send(b, n, MPI_DOUBLE, rank + 1, 3, MPI_COMM_WORLD);
    else if (rank % 2 == 1)
        MPI_Recv(a, n, MPI_DOUBLE, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        c[i] = cos(b[i]) + t * x[i];
    /* rank 0's c to every rank */
    MPI_Bcast(c, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Allgather(c, n, MPI_DOUBLE, g, n, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int k = 0; k < n * size; k++)
        g[k] = g[k] * g[k] + x[k % n];
    MPI_Reduce(a, r, n, MPI_DOUBLE, MPI_SUM, size - 1, MPI_COMM_WORLD);
    if (rank == size - 1)
        for (int i = 0; i < n; i++)
            u += r[i] * r[i];
    MPI_Gather(b, n, MPI_DOUBLE, h, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int k = 0; k < n * size; k++)
            h[k] = exp(0.3 * h[k]) + g[k];
    MPI_Scatter(h, n, MPI_DOUBLE, d, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    /* the largest of every rank's value, the smallest of a scalar, and blocks sent to every
     * rank */
    double cm[4], mx[4], at[32];
    for (int i = 0; i < n; i++)
        cm[i] = c[i] * (rank + 1) + 0.1 * a[i];
    MPI_Allreduce(cm, mx, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double lo = cm[0] - cm[1] * (rank + 2);
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Alltoall(g, n, MPI_DOUBLE, at, n, MPI_DOUBLE, MPI_COMM_WORLD);
    /* the same maximum to the last rank only, and a minimum to rank 0 */
    double rmx[4] = {0, 0, 0, 0}, rmn[4] = {0, 0, 0, 0};
    MPI_Reduce(cm, rmx, n, MPI_DOUBLE, MPI_MAX, size - 1, MPI_COMM_WORLD);
    MPI_Reduce(cm, rmn, n, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
    double y = t * t + u + 0.2 * lo;
    if (rank == size - 1)
        for (int i = 0; i < n; i++)
            y += 0.7 * rmx[i] * rmx[i];
    if (rank == 0)
        for (int i = 0; i < n; i++)
            y += 0.4 * sin(rmn[i]);
    for (int i = 0; i < n; i++)
        y += d[i] * c[i] + 0.1 * g[i] + 0.3 * mx[i] * mx[i];
    for (int k = 0; k < n * size; k++)
        y += 0.01 * (k + 1) * at[k] * at[k];
    /* an in-place allreduce of the result */
    MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return y * (rank + 1);
}
