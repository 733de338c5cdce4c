/*
 * A message of the wrong size in code chainrules-ad differentiated (mismatch_input.c), on
 * 2 or more ranks under MPI_ERRORS_RETURN and a timeout: every rank finishes (no hang); the
 * receiver's own program sees the error (or the other count) as MPI reports it, its tangent
 * of the received buffer is NaN (forward mode), and the sender's gradient is NaN (the
 * adjoint of the receive is NaN). With sizes that match, every derivative is finite; a
 * receive of another datatype (of a double's size, or bytes) makes the receiver's
 * derivatives NaN and both sweeps end (the sweep goes on after the failure, its messages
 * matched, none past the buffers); so does an MPI_Allgatherv of MPI_BYTE, on every rank.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>

double mm_obj(const double *x, int bad, int *err);
double mm_obj_rev(const double *x, double *x_b, int bad, int *err, double mm_obj_b);
double mm_obj_fwd(const double *x, const double *x_d, int bad, int *err, double *mm_obj_d);

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rank, size, bad_test = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2) {
        MPI_Finalize();
        return 0;
    }
    for (int bad = -1; bad <= 4; bad++) {
        double x[4], xb[4] = {0}, xd[4], yd = 0;
        int err = 0, errf = 0;
        for (int i = 0; i < 4; i++) {
            x[i] = 0.3 + 0.2 * i + 0.1 * rank;
            xd[i] = 1.0;
        }
        double yr = mm_obj_rev(x, xb, bad, &err, 1.0);
        (void)mm_obj_fwd(x, xd, bad, &errf, &yd);
        int finite = isfinite(yd);
        for (int i = 0; i < 4; i++)
            finite &= isfinite(xb[i]);
        const char *what = bad < 0 ? "longer" : bad == 1 ? "shorter" : "matching";
        if (bad == 0 && (!finite || err != 0)) {
            fprintf(stderr, "rank %d: matching sizes: err %d, finite %d\n", rank, err, finite);
            bad_test = 1;
        }
        if (bad == 4 && (isfinite(yr) || isfinite(yd))) {
            fprintf(stderr, "rank %d: allgatherv of MPI_BYTE: f_rev %g, tangent %g\n", rank, yr,
                    yd);
            bad_test = 1;
        }
        if (bad >= 2) {
            /* the receiver's derivative fails (NaN value and tangent); the sweeps of both
             * ranks still end */
            if (rank == 1 && (isfinite(yr) || isfinite(yd))) {
                fprintf(stderr, "rank 1: datatype %s: f_rev %g, tangent %g\n",
                        bad == 2 ? "MPI_UINT64_T" : "MPI_BYTE", yr, yd);
                bad_test = 1;
            }
            continue;
        }
        if (bad != 0 && rank == 1 && (err == 0 || errf == 0 || isfinite(yd))) {
            fprintf(stderr, "rank 1: a %s message: err %d / %d, tangent %g\n", what, err, errf, yd);
            bad_test = 1;
        }
        if (bad != 0 && rank == 0 && (isfinite(xb[0]) || isfinite(xb[1]) || isfinite(xb[2]))) {
            fprintf(stderr, "rank 0: a %s message: gradient %g %g %g, NaN expected\n", what, xb[0],
                    xb[1], xb[2]);
            bad_test = 1;
        }
    }
    int any = 0;
    MPI_Allreduce(&bad_test, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_ad_mismatch: %d ranks: %s\n", size, any ? "FAILED" : "passed");
    MPI_Finalize();
    return any;
}
