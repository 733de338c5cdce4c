/*
 * The gradient of the distributed heat equation (heat_input.c) with respect to each rank's
 * initial state, through 1000 checkpointed steps with a halo exchange at each, written by
 * chainrules-ad: equal on every rank to its block of the serial equation's gradient (the
 * same tool on code without MPI) and to central differences at a few points.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

#define NL    6
#define STEPS 1000

double heat_mpi(const double *u0, int steps, double nu);
double heat_mpi_rev(const double *u0, double *u0_b, int steps, double nu, double *nu_b,
                    double heat_mpi_b);
double heat_serial(const double *u0, int n, int steps, double nu);
double heat_serial_rev(const double *u0, double *u0_b, int n, int steps, double nu, double *nu_b,
                       double heat_serial_b);

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const double nu = 0.2;
    double all[64], gall[64] = {0}, nu_sb = 0;
    int n = NL * size;
    if (n > 64) {
        MPI_Finalize();
        return 1;
    }
    for (int i = 0; i < n; i++)
        all[i] = sin(0.9 * i) + 0.3 * cos(2.1 * i);
    const double *u0 = all + NL * rank;
    double g[NL] = {0}, nu_b = 0;
    /* the total is every rank's return value: seeded on one rank only (seeding it on every
     * rank differentiates the sum of the P copies, P times the total) */
    double y = heat_mpi_rev(u0, g, STEPS, nu, &nu_b, rank == 0 ? 1.0 : 0.0);
    double ys = heat_serial_rev(all, gall, n, STEPS, nu, &nu_sb, 1.0);
    if (!(fabs(y - ys) <= 1e-12 * fabs(ys))) {
        fprintf(stderr, "rank %d: value %.17g, serial %.17g\n", rank, y, ys);
        bad = 1;
    }
    for (int i = 0; i < NL; i++)
        if (!(fabs(g[i] - gall[NL * rank + i]) <= 1e-10 * (1 + fabs(gall[NL * rank + i])))) {
            fprintf(stderr, "rank %d: dJ/du0[%d] = %.17g, serial %.17g\n", rank, i, g[i],
                    gall[NL * rank + i]);
            bad = 1;
        }
    /* nu is every rank's: the ranks' parts sum to the serial derivative */
    double nsum = 0;
    MPI_Allreduce(&nu_b, &nsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (!(fabs(nsum - nu_sb) <= 1e-10 * (1 + fabs(nu_sb)))) {
        if (rank == 0)
            fprintf(stderr, "dJ/dnu: sum over ranks %.17g, serial %.17g\n", nsum, nu_sb);
        bad = 1;
    }
    /* central differences of the distributed objective, rank 0's point 2 */
    double h = 1e-6, u[NL];
    for (int i = 0; i < NL; i++)
        u[i] = u0[i];
    if (rank == 0)
        u[2] += h;
    double jp = heat_mpi(u, STEPS, nu);
    if (rank == 0)
        u[2] -= 2 * h;
    double jm = heat_mpi(u, STEPS, nu);
    if (rank == 0 && !(fabs((jp - jm) / (2 * h) - g[2]) <= 1e-6 * (1 + fabs(g[2])))) {
        fprintf(stderr, "rank 0: dJ/du0[2] = %.12g, central difference %.12g\n", g[2],
                (jp - jm) / (2 * h));
        bad = 1;
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_ad_heat: %d ranks, %d steps: %s\n", size, STEPS, any ? "FAILED" : "passed");
    MPI_Finalize();
    return any;
}
