/*
 * A message whose size does not match in plain C that chainrules-ad differentiates: rank 0
 * sends 3 doubles to rank 1 by MPI_Isend, rank 1 posts MPI_Irecv for 3 + bad (bad -1: the
 * message is longer, an MPI error; +1: shorter, another count; 2, 3: the sizes match, then
 * a blocking message that rank 1 receives as MPI_UINT64_T, as MPI_BYTE; 4: an
 * MPI_Allgatherv of MPI_BYTE on every rank). *err is rank 1's view: the
 * wait's error, or 1 for another count (test_ad_mismatch.c).
 */
#include <math.h>
#include <mpi.h>

double mm_obj(const double *x, int bad, int *err);

double mm_obj(const double *x, int bad, int *err)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double s[4], r[4];
    MPI_Request q;
    MPI_Status st;
    *err = 0;
    for (int i = 0; i < 4; i++) {
        s[i] = sin(x[i]) * (rank + 1);
        r[i] = 0.5 * x[i];
    }
    if (rank == 0) {
        MPI_Isend(s, 3, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        MPI_Irecv(r, 3 + (bad >= 2 ? 0 : bad), MPI_DOUBLE, 0, 2, MPI_COMM_WORLD, &q);
        *err = MPI_Wait(&q, &st);
        int c = 0;
        MPI_Get_count(&st, MPI_DOUBLE, &c);
        if (*err == MPI_SUCCESS && c != 3 + (bad >= 2 ? 0 : bad))
            *err = 1;
    }
    /* bad 2, 3: the receiver gives a datatype that is not MPI_DOUBLE (of a double's size;
     * bytes) */
    if ((bad == 2 || bad == 3) && rank == 0)
        MPI_Send(&s[1], 2, MPI_DOUBLE, 1, 5, MPI_COMM_WORLD);
    else if (bad == 2 && rank == 1)
        MPI_Recv(&r[1], 2, MPI_UINT64_T, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else if (bad == 3 && rank == 1)
        MPI_Recv(&r[1], 16, MPI_BYTE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double y = 0;
    for (int i = 0; i < 4; i++)
        y += r[i] * r[i] + s[i];
    /* bad 4: every rank gathers one double from each as 8 MPI_BYTEs */
    if (bad == 4 && size <= 8) {
        int cnt[8], dis[8];
        double g[8];
        for (int q = 0; q < size; q++) {
            cnt[q] = 8;
            dis[q] = 8 * q;
        }
        MPI_Allgatherv(&s[0], 8, MPI_BYTE, g, cnt, dis, MPI_BYTE, MPI_COMM_WORLD);
        for (int q = 0; q < size; q++)
            y += g[q] * g[q];
    }
    MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return y;
}
