/*
 * Requests completed by MPI_Test, MPI_Testall, MPI_Waitany, MPI_Testany, MPI_Waitsome and
 * MPI_Testsome (mode 0 to 5), and persistent requests (6, 7: below), in plain C that
 * chainrules-ad differentiates: a ring in which
 * each rank sends s = sin(x) (rank + 1) to the right and t = x x to the left by MPI_Isend,
 * receives the left's s and the right's t by MPI_Irecv, and completes the four requests
 * with the call of its mode (the tests in loops until they succeed); its value is
 * r1 . r2 + sum x. c_serial: the sum of every rank's value, computed on one process from
 * every rank's x (test_ad_completions.c).
 */
#include <math.h>
#include <mpi.h>

#define CN 3

double c_obj(const double *x, int mode);
double c_serial(const double *x, int p, int persistent);

double c_obj(const double *x, int mode)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const int left = (rank + size - 1) % size, right = (rank + 1) % size;
    double s[CN], t[CN], r1[CN], r2[CN];
    for (int i = 0; i < CN; i++) {
        s[i] = sin(x[i]) * (rank + 1);
        t[i] = x[i] * x[i];
        r1[i] = 0;
        r2[i] = 0;
    }
    MPI_Request q[4];
    MPI_Irecv(r1, CN, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &q[0]);
    MPI_Irecv(r2, CN, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &q[1]);
    MPI_Isend(s, CN, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &q[2]);
    MPI_Isend(t, CN, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &q[3]);
    int flag = 0, idx = 0, done = 0, out = 0, ids[4];
    if (mode == 0) {
        for (int k = 0; k < 4; k++) {
            flag = 0;
            while (!flag)
                MPI_Test(&q[k], &flag, MPI_STATUS_IGNORE);
        }
    } else if (mode == 1) {
        while (!flag)
            MPI_Testall(4, q, &flag, MPI_STATUSES_IGNORE);
    } else if (mode == 2) {
        for (int k = 0; k < 4; k++)
            MPI_Waitany(4, q, &idx, MPI_STATUS_IGNORE);
    } else if (mode == 3) {
        while (done < 4) {
            MPI_Testany(4, q, &idx, &flag, MPI_STATUS_IGNORE);
            if (flag && idx != MPI_UNDEFINED)
                done++;
        }
    } else if (mode == 4) {
        while (done < 4) {
            MPI_Waitsome(4, q, &out, ids, MPI_STATUSES_IGNORE);
            done += out;
        }
    } else if (mode == 5) {
        while (done < 4) {
            MPI_Testsome(4, q, &out, ids, MPI_STATUSES_IGNORE);
            done += out;
        }
    } else {
        /* then two rounds of a persistent exchange to the right, by MPI_Startall and
         * MPI_Waitall (6) or MPI_Start and MPI_Wait (7), the requests freed after */
        MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
        double s2[CN], r3[CN];
        MPI_Request pq[2];
        MPI_Recv_init(r3, CN, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &pq[0]);
        MPI_Send_init(s2, CN, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, &pq[1]);
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < CN; i++)
                s2[i] = s[i] * (1 + round) + r1[i] * r1[i];
            if (mode == 6) {
                MPI_Startall(2, pq);
                MPI_Waitall(2, pq, MPI_STATUSES_IGNORE);
            } else {
                MPI_Start(&pq[0]);
                MPI_Start(&pq[1]);
                MPI_Wait(&pq[1], MPI_STATUS_IGNORE);
                MPI_Wait(&pq[0], MPI_STATUS_IGNORE);
            }
            for (int i = 0; i < CN; i++)
                r2[i] += r3[i] * (round + 1);
        }
        MPI_Request_free(&pq[0]);
        MPI_Request_free(&pq[1]);
    }
    double y = 0;
    for (int i = 0; i < CN; i++)
        y += r1[i] * r2[i] + x[i];
    return y;
}

double c_serial(const double *x, int p, int persistent)
{
    double y = 0;
    for (int q = 0; q < p; q++) {
        const int l = (q + p - 1) % p, ll = (l + p - 1) % p, r = (q + 1) % p;
        for (int i = 0; i < CN; i++) {
            const double r1 = sin(x[CN * l + i]) * (l + 1);
            double r2 = x[CN * r + i] * x[CN * r + i];
            if (persistent) {
                /* the left's s2 of each round: its s and the s of its own left, squared */
                const double sl = sin(x[CN * l + i]) * (l + 1);
                const double sll = sin(x[CN * ll + i]) * (ll + 1);
                for (int round = 0; round < 2; round++)
                    r2 += (sl * (1 + round) + sll * sll) * (round + 1);
            }
            y += r1 * r2 + x[CN * q + i];
        }
    }
    return y;
}
