/*
 * A message whose size does not match in plain C that chainrules-ad differentiates: rank 0
 * sends 3 doubles to rank 1 by MPI_Isend, rank 1 posts MPI_Irecv for 3 + bad (bad -1: the
 * message is longer, an MPI error; +1: shorter, another count; 2, 3: the sizes match, then
 * a blocking message that rank 1 receives as MPI_UINT64_T, as MPI_BYTE; 4: an
 * MPI_Allgatherv of MPI_BYTE on every rank; 5 to 13: blocking calls whose counts do not
 * match, below). *err is rank 1's view: the wait's or receive's error, or 1 for another
 * count; for the collectives, each rank's MPI result (test_ad_mismatch.c).
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
    /* bad 5, 6: a blocking message of 3 that rank 1 receives with a count of 4 (shorter than
     * posted) or 2 (longer: MPI's truncation error) */
    if ((bad == 5 || bad == 6) && rank == 0)
        MPI_Send(s, 3, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD);
    else if ((bad == 5 || bad == 6) && rank == 1) {
        MPI_Status s2;
        const int n = bad == 5 ? 4 : 2;
        *err = MPI_Recv(r, n, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, &s2);
        int c = 0;
        MPI_Get_count(&s2, MPI_DOUBLE, &c);
        if (*err == MPI_SUCCESS && c != n)
            *err = 1;
    }
    /* bad 7 to 10: collectives whose ranks give different counts (every rank's call returns
     * MPI_ERR_COUNT, nothing moves): a broadcast (the root 3, the others 2), an allreduce
     * (rank 1: 3, the others 2), a gather (the last rank sends 2, the root takes 1 of each)
     * and an allgather (rank 0 sends 2, every rank takes 1 of each) */
    if (bad == 7)
        *err = MPI_Bcast(r, rank == 0 ? 3 : 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (bad == 8) {
        double t[3] = {0, 0, 0};
        *err = MPI_Allreduce(s, t, rank == 1 ? 3 : 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        r[0] += t[0] * t[1];
    }
    if ((bad == 9 || bad == 10) && size <= 8) {
        double g[16] = {0};
        if (bad == 9)
            *err = MPI_Gather(s, rank == size - 1 ? 2 : 1, MPI_DOUBLE, g, 1, MPI_DOUBLE, 0,
                              MPI_COMM_WORLD);
        else
            *err =
                MPI_Allgather(s, rank == 0 ? 2 : 1, MPI_DOUBLE, g, 1, MPI_DOUBLE, MPI_COMM_WORLD);
        for (int q = 0; q < size; q++)
            r[0] += g[q] * g[q];
    }
    /* bad 11 to 13: the v variants, one block of 1 per rank in the counts, while the last
     * rank gives 2 (gatherv: it sends 2; scatterv: it receives 2) or rank 0 sends 2
     * (allgatherv) */
    if (bad >= 11 && bad <= 13 && size <= 8) {
        int cnt[8], dis[8];
        double g[16] = {0}, h[2] = {0, 0};
        for (int q = 0; q < size; q++) {
            cnt[q] = 1;
            dis[q] = q;
        }
        if (bad == 11)
            *err = MPI_Gatherv(s, rank == size - 1 ? 2 : 1, MPI_DOUBLE, g, cnt, dis, MPI_DOUBLE, 0,
                               MPI_COMM_WORLD);
        else if (bad == 12)
            *err = MPI_Scatterv(s, cnt, dis, MPI_DOUBLE, h, rank == size - 1 ? 2 : 1, MPI_DOUBLE, 0,
                                MPI_COMM_WORLD);
        else
            *err = MPI_Allgatherv(s, rank == 0 ? 2 : 1, MPI_DOUBLE, g, cnt, dis, MPI_DOUBLE,
                                  MPI_COMM_WORLD);
        for (int q = 0; q < size; q++)
            r[0] += g[q] * g[q];
        r[1] += h[0] * h[1];
    }
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
