/*
 * The derivatives of an MPI program (mpi_input.c) written by chainrules-ad, on the ranks
 * mpirun starts: on every rank the gradient (m_obj_rev, the adjoint communications) and the
 * tangent (m_obj_fwd, the tangent communications) of J = the sum over ranks of m_obj agree
 * with each other (the dot-product test: <x_b, d> summed over ranks = J_d) and with central
 * differences of J on every rank's every input. Exit status 0 when every rank passes.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

double m_obj(const double *x, int n);
double m_obj_rev(const double *x, double *x_b, int n, double m_obj_b);
double m_obj_fwd(const double *x, const double *x_d, int n, double *m_obj_d);

enum { N = 4 };

static double total(const double *x)
{
    double y = m_obj(x, N), j = 0;
    MPI_Allreduce(&y, &j, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return j;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 8) {
        if (rank == 0)
            fprintf(stderr, "test_ad_mpi: at most 8 ranks\n");
        MPI_Finalize();
        return 1;
    }
    double x[N], xb[N] = {0}, xd[N], yd = 0;
    for (int i = 0; i < N; i++) {
        x[i] = 0.4 * sin(1.0 + i + 2.0 * rank);
        xd[i] = cos(0.7 * i + rank);
    }
    double y = m_obj_rev(x, xb, N, 1.0);
    double yp = m_obj(x, N);
    if (!(fabs(y - yp) <= 1e-14 * (1 + fabs(yp)))) {
        fprintf(stderr, "rank %d: m_obj_rev returned %.17g, m_obj %.17g\n", rank, y, yp);
        bad = 1;
    }
    double yf = m_obj_fwd(x, xd, N, &yd);
    if (!(fabs(yf - yp) <= 1e-14 * (1 + fabs(yp)))) {
        fprintf(stderr, "rank %d: m_obj_fwd returned %.17g, m_obj %.17g\n", rank, yf, yp);
        bad = 1;
    }
    /* the dot-product test over all ranks */
    double local[2] = {yd, 0}, sum[2];
    for (int i = 0; i < N; i++)
        local[1] += xb[i] * xd[i];
    MPI_Allreduce(local, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (!(fabs(sum[0] - sum[1]) <= 1e-12 * (1 + fabs(sum[0])))) {
        if (rank == 0)
            fprintf(stderr, "dot-product test: J_d = %.17g, <x_b, d> = %.17g\n", sum[0], sum[1]);
        bad = 1;
    }
    /* central differences of J, one rank's input at a time */
    double h = 1e-6;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < N; i++) {
            double keep = x[i];
            if (rank == r)
                x[i] = keep + h;
            double jp = total(x);
            if (rank == r)
                x[i] = keep - h;
            double jm = total(x);
            if (rank == r) {
                x[i] = keep;
                double fd = (jp - jm) / (2 * h);
                if (!(fabs(fd - xb[i]) <= 1e-6 * (1 + fabs(fd)))) {
                    fprintf(stderr, "rank %d: dJ/dx[%d] = %.12g, central difference %.12g\n", rank,
                            i, xb[i], fd);
                    bad = 1;
                }
            }
        }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_ad_mpi: %d ranks: %s\n", size, any ? "FAILED" : "passed");
    MPI_Finalize();
    return any;
}
