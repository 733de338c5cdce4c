/*
 * A 1-D periodic heat equation (with a small nonlinear source) split across the ranks, NL
 * points each, halos exchanged with MPI_Sendrecv at every step, the time loop checkpointed
 * (binomial, 20 snapshots); and the same equation on one domain of NL x P points, without
 * MPI, for the serial reference. chainrules-ad differentiates both (test_ad_heat.c).
 */
#include <math.h>
#include <mpi.h>

#define NL 6

double heat_mpi(const double *u0, int steps, double nu);
double heat_serial(const double *u0, int n, int steps, double nu);

/* the step's update of point i from its neighbours */
static double update(double l, double c, double r, double nu)
{
    return c + nu * (l - 2 * c + r) + 0.01 * sin(c);
}

double heat_mpi(const double *u0, int steps, double nu)
{
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    double u[NL + 2], v[NL + 2];
    for (int i = 0; i < NL; i++)
        u[i + 1] = u0[i];
    u[0] = 0;
    u[NL + 1] = 0;
    v[0] = 0;
    v[NL + 1] = 0;
#pragma chainrules checkpoint(20)
    for (int t = 0; t < steps; t++) {
        /* my first point to the left, the right halo from the right; then the other way */
        MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 0, &u[NL + 1], 1, MPI_DOUBLE, right, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&u[NL], 1, MPI_DOUBLE, right, 1, &u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        for (int i = 1; i <= NL; i++)
            v[i] = update(u[i - 1], u[i], u[i + 1], nu);
        for (int i = 1; i <= NL; i++)
            u[i] = v[i];
    }
    double s = 0, total = 0;
    for (int i = 1; i <= NL; i++)
        s += u[i] * u[i];
    MPI_Allreduce(&s, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

double heat_serial(const double *u0, int n, int steps, double nu)
{
    double u[64], v[64];
    for (int i = 0; i < n; i++)
        u[i] = u0[i];
#pragma chainrules checkpoint(20)
    for (int t = 0; t < steps; t++) {
        for (int i = 0; i < n; i++)
            v[i] = update(u[(i + n - 1) % n], u[i], u[(i + 1) % n], nu);
        for (int i = 0; i < n; i++)
            u[i] = v[i];
    }
    double s = 0;
    for (int i = 0; i < n; i++)
        s += u[i] * u[i];
    return s;
}
