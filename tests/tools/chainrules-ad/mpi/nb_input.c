/*
 * MPI calls chainrules-ad differentiates, in plain C: a 1-D heat equation whose halos
 * travel by MPI_Irecv / MPI_Isend / MPI_Waitall (MPI_PROC_NULL at the two ends of the
 * domain; the time loop checkpointed, 10 snapshots), and an objective through
 * MPI_Gatherv, MPI_Scatterv (overlapping parts), MPI_Allgatherv (also in place),
 * MPI_Reduce and MPI_Allreduce of a product (with a zero factor), an MPI_Irecv from
 * MPI_ANY_SOURCE completed by MPI_Wait, an MPI_Sendrecv from MPI_PROC_NULL (which keeps
 * the buffer) and integers sent and reduced beside them; each with the same computation on one
 * process without MPI, for the serial reference (test_ad_nb.c).
 */
#include <math.h>
#include <mpi.h>

#define NL 5 /* points per rank */
#define PM 8 /* ranks at most */

double heat_nb(const double *u0, int steps, double nu);
double heat_nb_serial(const double *u0, int n, int steps, double nu);
double v_obj(const double *x, int n);
double v_serial(const double *x, int p);

static double update(double l, double c, double r, double nu)
{
    return c + nu * (l - 2 * c + r) + 0.01 * sin(c);
}

double heat_nb(const double *u0, int steps, double nu)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
    double u[NL + 2], v[NL + 2];
    MPI_Request rq[4];
    for (int i = 0; i < NL; i++)
        u[i + 1] = u0[i];
    u[0] = 0;
    u[NL + 1] = 0;
#pragma chainrules checkpoint(10)
    for (int t = 0; t < steps; t++) {
        /* the halos posted first, then my end points sent; all four completed together */
        MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(&u[NL + 1], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &rq[2]);
        MPI_Isend(&u[NL], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &rq[3]);
        MPI_Waitall(4, rq, MPI_STATUSES_IGNORE);
        for (int i = 1; i <= NL; i++)
            v[i] = update(u[i - 1], u[i], u[i + 1], nu);
        for (int i = 1; i <= NL; i++)
            u[i] = v[i];
    }
    double s = 0, total = 0;
    for (int i = 1; i <= NL; i++)
        s += (1 + 0.1 * (NL * rank + i)) * u[i] * u[i];
    MPI_Allreduce(&s, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

/* the same on n points, zero beyond both ends */
double heat_nb_serial(const double *u0, int n, int steps, double nu)
{
    double u[NL * PM + 2], v[NL * PM + 2];
    for (int i = 0; i < n; i++)
        u[i + 1] = u0[i];
    u[0] = 0;
    u[n + 1] = 0;
    for (int t = 0; t < steps; t++) {
        for (int i = 1; i <= n; i++)
            v[i] = update(u[i - 1], u[i], u[i + 1], nu);
        for (int i = 1; i <= n; i++)
            u[i] = v[i];
    }
    double s = 0;
    for (int i = 1; i <= n; i++)
        s += (1 + 0.1 * i) * u[i] * u[i];
    return s;
}

/* Every rank's y summed (the value every rank returns); rank q sends 1 + q % 3 elements
 * to the v variants, at displacements with gaps. n = 3. */
double v_obj(const double *x, int n)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int cnt[PM], dis[PM], ov[PM], tot = 0;
    for (int q = 0; q < size; q++) {
        cnt[q] = 1 + q % 3;
        dis[q] = tot + q % 2;
        tot = dis[q] + cnt[q];
        ov[q] = q; /* overlapping parts for the scatter */
    }
    const int mine = cnt[rank], root = size - 1;
    double a[3], b[3], c[3], g[4 * PM], h[4 * PM], e[4 * PM], f[4 * PM];
    for (int i = 0; i < n; i++)
        a[i] = sin(x[i]) + 0.5 * x[i] * x[i] * (rank + 1);
    for (int k = 0; k < 4 * PM; k++) {
        g[k] = 0;
        h[k] = 0;
        e[k] = 0;
        f[k] = 0;
    }
    MPI_Gatherv(a, mine, MPI_DOUBLE, g, cnt, dis, MPI_DOUBLE, root, MPI_COMM_WORLD);
    if (rank == root)
        for (int k = 0; k < tot; k++)
            h[k] = exp(0.2 * g[k]) + g[k] * g[k];
    MPI_Scatterv(h, cnt, ov, MPI_DOUBLE, b, mine, MPI_DOUBLE, root, MPI_COMM_WORLD);
    for (int j = 0; j < mine; j++)
        c[j] = b[j] * cos(a[j]) + x[j];
    MPI_Allgatherv(c, mine, MPI_DOUBLE, e, cnt, dis, MPI_DOUBLE, MPI_COMM_WORLD);
    /* in place: my part is in f already */
    for (int j = 0; j < mine; j++)
        f[dis[rank] + j] = c[j] * c[j];
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, f, cnt, dis, MPI_DOUBLE, MPI_COMM_WORLD);
    double y = 0;
    for (int k = 0; k < tot; k++)
        y += 0.3 * (k + 1) * e[k] * e[k] / (rank + 1) + 0.05 * f[k] * (k % 3);
    /* products over the ranks: element 1 is zero on rank 1 at the test's point */
    double pr[3], q2[3], q3[3];
    pr[0] = 1 + 0.5 * sin(x[0]);
    pr[1] = x[1] - 0.25;
    pr[2] = 1.2 + 0.4 * cos(x[2]) * x[0];
    MPI_Allreduce(pr, q2, n, MPI_DOUBLE, MPI_PROD, MPI_COMM_WORLD);
    MPI_Reduce(pr, q3, n, MPI_DOUBLE, MPI_PROD, 0, MPI_COMM_WORLD);
    double z = 1.1 + 0.3 * cos(x[0]);
    MPI_Allreduce(MPI_IN_PLACE, &z, 1, MPI_DOUBLE, MPI_PROD, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        y += (i + 1) * q2[i];
    if (rank == 0)
        for (int i = 0; i < n; i++)
            y += q3[i] * q3[i];
    y += 0.5 * z;
    /* a ring by MPI_Isend and an MPI_Irecv from any source, each completed by MPI_Wait */
    double sv[2], w[2];
    MPI_Request rs, rr;
    MPI_Status st;
    sv[0] = cos(x[0]) * (1 + rank);
    sv[1] = x[2] * x[1];
    MPI_Irecv(w, 2, MPI_DOUBLE, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, &rr);
    MPI_Isend(sv, 2, MPI_DOUBLE, (rank + 1) % size, 9, MPI_COMM_WORLD, &rs);
    MPI_Wait(&rs, MPI_STATUS_IGNORE);
    MPI_Wait(&rr, &st);
    y += w[0] * w[1] + 0.1 * w[0] * st.MPI_SOURCE;
    /* a blocking chain: rank 0 receives from MPI_PROC_NULL, which keeps its value */
    double c0 = sin(x[1]) * (rank + 2), hb = x[0] * x[0];
    MPI_Sendrecv(&c0, 1, MPI_DOUBLE, rank + 1 < size ? rank + 1 : MPI_PROC_NULL, 4, &hb, 1,
                 MPI_DOUBLE, rank > 0 ? rank - 1 : MPI_PROC_NULL, 4, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    y += 0.7 * hb * hb;
    /* integers travel too (no derivative, and no failure): a ring, and their maximum */
    int ni = rank + 3, nr = 0, nmax = 0;
    MPI_Request ri[2];
    MPI_Irecv(&nr, 1, MPI_INT, (rank + size - 1) % size, 11, MPI_COMM_WORLD, &ri[0]);
    MPI_Isend(&ni, 1, MPI_INT, (rank + 1) % size, 11, MPI_COMM_WORLD, &ri[1]);
    MPI_Waitall(2, ri, MPI_STATUSES_IGNORE);
    MPI_Allreduce(&ni, &nmax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    y += 0.01 * nr * nmax * x[0];
    MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return y;
}

/* p ranks' v_obj on one process (x: 3 per rank): the sum of their return values */
double v_serial(const double *x, int p)
{
    int cnt[PM], dis[PM], tot = 0;
    for (int q = 0; q < p; q++) {
        cnt[q] = 1 + q % 3;
        dis[q] = tot + q % 2;
        tot = dis[q] + cnt[q];
    }
    double a[3 * PM], b[3 * PM], c[3 * PM], g[4 * PM], h[4 * PM], e[4 * PM], f[4 * PM];
    for (int k = 0; k < 4 * PM; k++) {
        g[k] = 0;
        e[k] = 0;
        f[k] = 0;
    }
    for (int q = 0; q < p; q++)
        for (int i = 0; i < 3; i++)
            a[3 * q + i] = sin(x[3 * q + i]) + 0.5 * x[3 * q + i] * x[3 * q + i] * (q + 1);
    for (int q = 0; q < p; q++)
        for (int j = 0; j < cnt[q]; j++)
            g[dis[q] + j] = a[3 * q + j];
    for (int k = 0; k < tot; k++)
        h[k] = exp(0.2 * g[k]) + g[k] * g[k];
    for (int q = 0; q < p; q++)
        for (int j = 0; j < cnt[q]; j++) {
            b[3 * q + j] = h[q + j];
            c[3 * q + j] = b[3 * q + j] * cos(a[3 * q + j]) + x[3 * q + j];
            e[dis[q] + j] = c[3 * q + j];
            f[dis[q] + j] = c[3 * q + j] * c[3 * q + j];
        }
    double y = 0;
    for (int q = 0; q < p; q++)
        for (int k = 0; k < tot; k++)
            y += 0.3 * (k + 1) * e[k] * e[k] / (q + 1) + 0.05 * f[k] * (k % 3);
    double q2[3] = {1, 1, 1}, z = 1;
    for (int q = 0; q < p; q++) {
        q2[0] *= 1 + 0.5 * sin(x[3 * q]);
        q2[1] *= x[3 * q + 1] - 0.25;
        q2[2] *= 1.2 + 0.4 * cos(x[3 * q + 2]) * x[3 * q];
        z *= 1.1 + 0.3 * cos(x[3 * q]);
    }
    for (int q = 0; q < p; q++)
        for (int i = 0; i < 3; i++)
            y += (i + 1) * q2[i];
    for (int i = 0; i < 3; i++)
        y += q2[i] * q2[i];
    y += p * 0.5 * z;
    for (int q = 0; q < p; q++) {
        const int s = (q + p - 1) % p; /* the sender to q */
        const double w0 = cos(x[3 * s]) * (1 + s), w1 = x[3 * s + 2] * x[3 * s + 1];
        y += w0 * w1 + 0.1 * w0 * s;
        const double hb = q == 0 ? x[0] * x[0] : sin(x[3 * (q - 1) + 1]) * (q - 1 + 2);
        y += 0.7 * hb * hb;
        y += 0.01 * ((q + p - 1) % p + 3) * (p + 2) * x[3 * q];
    }
    return p * y;
}
