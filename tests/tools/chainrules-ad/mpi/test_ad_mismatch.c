/*
 * A message of the wrong size in code chainrules-ad differentiated (mismatch_input.c), on
 * 2 or more ranks under MPI_ERRORS_RETURN and a timeout: every rank finishes (no hang); the
 * receiver's own program sees the error (or the other count) as MPI reports it, its tangent
 * of the received buffer is NaN (forward mode), and the sender's gradient is NaN (the
 * adjoint of the receive is NaN). With sizes that match, every derivative is finite; a
 * receive of another datatype (of a double's size, or bytes) makes the receiver's
 * derivatives NaN and both sweeps end (the sweep goes on after the failure, its messages
 * matched, none past the buffers); so does an MPI_Allgatherv of MPI_BYTE, on every rank. A
 * blocking receive of another count fails the derivatives of both ranks (f_rev NaN); a
 * broadcast, allreduce, gather, allgather, gatherv, scatterv or allgatherv whose ranks give
 * different counts returns MPI_ERR_COUNT on every rank and fails every rank's derivative.
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
    for (int bad = -1; bad <= 13; bad++) {
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
        if (bad >= 7) {
            /* collectives of counts that differ: every rank's call fails, and every rank's
             * derivative (f_rev NaN: its stack failed; the tangent NaN) */
            if (err != MPI_ERR_COUNT || errf != MPI_ERR_COUNT || isfinite(yr) || isfinite(yd)) {
                fprintf(stderr,
                        "rank %d: collective %d of other counts: err %d / %d (%d "
                        "expected), f_rev %g, tangent %g\n",
                        rank, bad, err, errf, MPI_ERR_COUNT, yr, yd);
                bad_test = 1;
            }
            continue;
        }
        if (bad == 5 || bad == 6) {
            /* a blocking receive of another count: its rank sees MPI's error or the count;
             * both ranks' derivatives fail (the sender's adjoint message is empty) */
            if (rank == 1 && (err == 0 || errf == 0 || isfinite(yd) || isfinite(yr))) {
                fprintf(stderr,
                        "rank 1: a blocking message %s: err %d / %d, f_rev %g, "
                        "tangent %g\n",
                        bad == 5 ? "shorter than posted" : "longer than posted", err, errf, yr, yd);
                bad_test = 1;
            }
            if (rank == 0 && (isfinite(xb[0]) || isfinite(yr))) {
                fprintf(stderr,
                        "rank 0: its blocking message received with count %d: "
                        "gradient %g, f_rev %g, NaN expected\n",
                        bad == 5 ? 4 : 2, xb[0], yr);
                bad_test = 1;
            }
            continue;
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
