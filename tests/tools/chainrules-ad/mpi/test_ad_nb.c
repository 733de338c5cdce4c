/*
 * The derivatives chainrules-ad writes for the MPI calls of nb_input.c (non-blocking halo
 * exchange, the v variants, products), on the ranks mpirun starts. On every rank:
 * - the gradient of J (the sum over the ranks of the function's value) equals the block of
 *   the serial program's gradient (the same tool on code without MPI) that is the rank's;
 * - central differences of the distributed J agree with it (every input of v_obj, a few
 *   points of the heat equation);
 * - the tangent (forward mode, tangent messages) agrees with it: J_d = <x_b, d> summed.
 * Exit status 0 when every rank passes.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

#define NL    5
#define PM    8
#define STEPS 200

double heat_nb(const double *u0, int steps, double nu);
double heat_nb_rev(const double *u0, double *u0_b, int steps, double nu, double *nu_b,
                   double heat_nb_b);
double heat_nb_fwd(const double *u0, const double *u0_d, int steps, double nu, double nu_d,
                   double *heat_nb_d);
double heat_nb_serial(const double *u0, int n, int steps, double nu);
double heat_nb_serial_rev(const double *u0, double *u0_b, int n, int steps, double nu, double *nu_b,
                          double heat_nb_serial_b);
double v_obj(const double *x, int n);
double v_obj_rev(const double *x, double *x_b, int n, double v_obj_b);
double v_obj_fwd(const double *x, const double *x_d, int n, double *v_obj_d);
double v_serial(const double *x, int p);
double v_serial_rev(const double *x, double *x_b, int p, double v_serial_b);

static int rank, size;

static int close_to(double a, double b, double tol)
{
    return fabs(a - b) <= tol * (1 + fabs(b));
}

static double sum_all(double v)
{
    double s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return s;
}

/* J = the sum of every rank's value */
static double v_total(const double *x)
{
    return sum_all(v_obj(x, 3));
}

static int check_v(void)
{
    int bad = 0;
    double all[3 * PM], gs[3 * PM] = {0};
    for (int k = 0; k < 3 * size; k++)
        all[k] = 0.4 * sin(1.0 + 1.7 * k);
    if (size > 1)
        all[3 * 1 + 1] = 0.25; /* rank 1's factor of the product is zero */
    double *x = all + 3 * rank, xb[3] = {0}, xd[3], yd = 0;
    for (int i = 0; i < 3; i++)
        xd[i] = cos(0.7 * i + rank);
    double y = v_obj_rev(x, xb, 3, 1.0);
    double yp = v_obj(x, 3);
    double ys = v_serial_rev(all, gs, size, 1.0);
    if (!close_to(y, yp, 1e-14) || !close_to(size * y, ys, 1e-12)) {
        fprintf(stderr, "rank %d: v_obj_rev %.17g, v_obj %.17g, serial / P %.17g\n", rank, y, yp,
                ys / size);
        bad = 1;
    }
    for (int i = 0; i < 3; i++)
        if (!close_to(xb[i], gs[3 * rank + i], 1e-11)) {
            fprintf(stderr, "rank %d: v_obj: dJ/dx[%d] = %.17g, serial %.17g\n", rank, i, xb[i],
                    gs[3 * rank + i]);
            bad = 1;
        }
    double yf = v_obj_fwd(x, xd, 3, &yd);
    double dot = xb[0] * xd[0] + xb[1] * xd[1] + xb[2] * xd[2];
    double jd = sum_all(yd), xbd = sum_all(dot);
    if (!close_to(yf, yp, 1e-14) || !close_to(jd, xbd, 1e-11)) {
        if (rank == 0)
            fprintf(stderr, "v_obj: tangent J_d = %.17g, <x_b, d> = %.17g\n", jd, xbd);
        bad = 1;
    }
    const double h = 1e-6;
    for (int r = 0; r < size; r++)
        for (int i = 0; i < 3; i++) {
            double keep = x[i];
            if (rank == r)
                x[i] = keep + h;
            double jp = v_total(x);
            if (rank == r)
                x[i] = keep - h;
            double jm = v_total(x);
            if (rank == r) {
                x[i] = keep;
                double fd = (jp - jm) / (2 * h);
                if (!close_to(xb[i], fd, 1e-6)) {
                    fprintf(stderr, "rank %d: v_obj: dJ/dx[%d] = %.12g, central difference %.12g\n",
                            rank, i, xb[i], fd);
                    bad = 1;
                }
            }
        }
    return bad;
}

static int check_heat(void)
{
    int bad = 0;
    const double nu = 0.2;
    double all[NL * PM], gs[NL * PM] = {0}, nus = 0;
    const int n = NL * size;
    for (int i = 0; i < n; i++)
        all[i] = sin(0.9 * i) + 0.3 * cos(2.1 * i);
    double u[NL], g[NL] = {0}, ud[NL], nub = 0, yd = 0;
    for (int i = 0; i < NL; i++) {
        u[i] = all[NL * rank + i];
        ud[i] = cos(0.3 * i + rank);
    }
    /* the total is every rank's: seeded on one rank only */
    double y = heat_nb_rev(u, g, STEPS, nu, &nub, rank == 0 ? 1.0 : 0.0);
    double ys = heat_nb_serial_rev(all, gs, n, STEPS, nu, &nus, 1.0);
    if (!close_to(y, ys, 1e-12)) {
        fprintf(stderr, "rank %d: heat_nb %.17g, serial %.17g\n", rank, y, ys);
        bad = 1;
    }
    for (int i = 0; i < NL; i++)
        if (!close_to(g[i], gs[NL * rank + i], 1e-10)) {
            fprintf(stderr, "rank %d: heat_nb: dJ/du0[%d] = %.17g, serial %.17g\n", rank, i, g[i],
                    gs[NL * rank + i]);
            bad = 1;
        }
    double nsum = sum_all(nub);
    if (!close_to(nsum, nus, 1e-10)) {
        if (rank == 0)
            fprintf(stderr, "heat_nb: dJ/dnu %.17g, serial %.17g\n", nsum, nus);
        bad = 1;
    }
    /* forward mode with the tangent of nu on rank 0 only (nu is every rank's) */
    double nud = rank == 0 ? 0.5 : 0;
    double yf = heat_nb_fwd(u, ud, STEPS, nu, nud, &yd);
    double dot = nub * nud;
    for (int i = 0; i < NL; i++)
        dot += g[i] * ud[i];
    /* yd is the same on every rank (an allreduce of the tangents) */
    double xbd = sum_all(dot);
    if (!close_to(yf, y, 1e-14) || !close_to(yd, xbd, 1e-10)) {
        fprintf(stderr, "rank %d: heat_nb: tangent J_d = %.17g, <x_b, d> = %.17g\n", rank, yd, xbd);
        bad = 1;
    }
    /* central differences: the last rank's first point, rank 0's last */
    const double h = 1e-6;
    for (int c = 0; c < 2; c++) {
        const int r = c == 0 ? size - 1 : 0, i = c == 0 ? 0 : NL - 1;
        if (rank == r)
            u[i] += h;
        double jp = heat_nb(u, STEPS, nu);
        if (rank == r)
            u[i] -= 2 * h;
        double jm = heat_nb(u, STEPS, nu);
        if (rank == r) {
            u[i] += h;
            double fd = (jp - jm) / (2 * h);
            if (!close_to(g[i], fd, 1e-6)) {
                fprintf(stderr, "rank %d: heat_nb: dJ/du0[%d] = %.12g, central difference %.12g\n",
                        rank, i, g[i], fd);
                bad = 1;
            }
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > PM) {
        if (rank == 0)
            fprintf(stderr, "test_ad_nb: at most %d ranks\n", PM);
        MPI_Finalize();
        return 1;
    }
    int bad = check_v();
    bad |= check_heat();
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_ad_nb: %d ranks: %s\n", size, any ? "FAILED" : "passed");
    MPI_Finalize();
    return any;
}
