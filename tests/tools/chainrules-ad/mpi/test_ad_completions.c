/*
 * The derivatives chainrules-ad writes for requests completed by MPI_Test, MPI_Testall,
 * MPI_Waitany, MPI_Testany, MPI_Waitsome and MPI_Testsome, and for persistent requests
 * (MPI_Send_init, MPI_Recv_init, MPI_Startall or MPI_Start, MPI_Request_free;
 * completions_input.c), on the ranks mpirun starts. For each, on every rank:
 * - the gradient of J (the sum over the ranks of the function's value) equals the rank's
 *   block of the gradient of the serial program (the same tool on code without MPI);
 * - central differences of the distributed J along a direction agree with <dJ/dx, d>;
 * - the tangent (forward mode) gives the same directional derivative.
 * Exit status 0 when every rank passes.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

#define CN 3
#define PM 8

double c_obj(const double *x, int mode);
double c_obj_rev(const double *x, double *x_b, int mode, double c_obj_b);
double c_obj_fwd(const double *x, const double *x_d, int mode, double *c_obj_d);
double c_serial(const double *x, int p, int persistent);
double c_serial_rev(const double *x, double *x_b, int p, int persistent, double c_serial_b);

static const char *const names[] = {"MPI_Test",
                                    "MPI_Testall",
                                    "MPI_Waitany",
                                    "MPI_Testany",
                                    "MPI_Waitsome",
                                    "MPI_Testsome",
                                    "persistent requests by MPI_Startall",
                                    "persistent requests by MPI_Start"};

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

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > PM) {
        MPI_Finalize();
        return 1;
    }
    double all[CN * PM], gs1[CN * PM] = {0}, gs2[CN * PM] = {0};
    for (int k = 0; k < CN * size; k++)
        all[k] = 0.3 + 0.5 * sin(1.0 + 1.3 * k);
    const double js1 = c_serial_rev(all, gs1, size, 0, 1.0);
    const double js2 = c_serial_rev(all, gs2, size, 1, 1.0);
    double *x = all + CN * rank, d[CN];
    for (int i = 0; i < CN; i++)
        d[i] = cos(0.9 * i + rank);
    for (int mode = 0; mode < 8; mode++) {
        const double js = mode < 6 ? js1 : js2, *gs = mode < 6 ? gs1 : gs2;
        double xb[CN] = {0}, yd = 0, xp[CN], xm[CN];
        const double y = c_obj_rev(x, xb, mode, 1.0);
        if (!close_to(sum_all(y), js, 1e-13)) {
            fprintf(stderr, "rank %d: %s: J %.17g, serial %.17g\n", rank, names[mode], sum_all(y),
                    js);
            bad = 1;
        }
        double dot = 0;
        for (int i = 0; i < CN; i++) {
            dot += xb[i] * d[i];
            if (!close_to(xb[i], gs[CN * rank + i], 1e-12)) {
                fprintf(stderr, "rank %d: %s: dJ/dx[%d] = %.17g, serial %.17g\n", rank, names[mode],
                        i, xb[i], gs[CN * rank + i]);
                bad = 1;
            }
        }
        const double h = 1e-6;
        for (int i = 0; i < CN; i++) {
            xp[i] = x[i] + h * d[i];
            xm[i] = x[i] - h * d[i];
        }
        const double fd = (sum_all(c_obj(xp, mode)) - sum_all(c_obj(xm, mode))) / (2 * h);
        (void)c_obj_fwd(x, d, mode, &yd);
        const double jd = sum_all(yd), g = sum_all(dot);
        if (!close_to(fd, g, 1e-7) || !close_to(jd, g, 1e-12)) {
            fprintf(stderr,
                    "rank %d: %s: <dJ/dx, d> %.17g, central difference %.17g, tangent %.17g\n",
                    rank, names[mode], g, fd, jd);
            bad = 1;
        }
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_ad_completions: %d ranks: %s\n", size, any ? "FAILED" : "passed");
    MPI_Finalize();
    return any;
}
