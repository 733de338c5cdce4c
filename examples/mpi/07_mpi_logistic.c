/*
 * Data-parallel logistic regression with chainrules-mpi (run with 2 ranks by `make demo`:
 * mpiexec -n 2 example_07_mpi_logistic).
 *
 * The data set (N samples of D features) is split in shards, one per rank. The loss
 *
 *     L(w) = (1/N) sum_i log(1 + exp(-y_i w . x_i)) + (lambda/2) |w|^2
 *
 * is differentiated two ways, both checked against the gradient of the whole data set
 * computed on one rank:
 *
 *  1. on the tape, communication included: rank 0's w is broadcast (cr_mpi_bcast), every
 *     rank adds its shard's loss, the sum is formed by cr_mpi_allreduce. The reverse sweep
 *     runs the adjoints: an allreduce of the loss's cotangent, then a sum-reduction of the
 *     shards' gradients to rank 0 (the adjoint of the broadcast), whose w receives the full
 *     gradient;
 *  2. as data-parallel training does: each rank differentiates its shard's loss alone, and
 *     the gradients are summed by MPI_Allreduce, on every rank.
 *
 * Then 50 steps of gradient descent with the summed gradient.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>
#include <chainrules/mpi.h>

#define N      240 /* samples */
#define D      5   /* features */
#define LAMBDA 0.01

/* Sample i: features x and label y in {-1, 1}, the same on every rank. */
static void sample(int i, double *x, double *y)
{
    double s = 0.0;
    for (int k = 0; k < D; k++) {
        x[k] = sin(0.37 * (i + 1) * (k + 1)) + 0.1 * cos(1.3 * i - k);
        s += (k % 2 ? -0.8 : 1.1) * x[k];
    }
    *y = s + 0.3 * sin(7.0 * i) > 0 ? 1.0 : -1.0;
}

/* Samples [lo, hi) of the loss's data term, with w (D variables), on tape t. */
static cr_var shard_loss(cr_tape *t, const cr_var *w, int lo, int hi)
{
    cr_var acc = cr_const(0.0);
    for (int i = lo; i < hi; i++) {
        double x[D], y;
        sample(i, x, &y);
        cr_var m = cr_const(0.0);
        for (int k = 0; k < D; k++)
            m = cr_add(t, m, cr_mul(t, w[k], cr_const(x[k])));
        /* log(1 + exp(-y m)) */
        cr_var z = cr_mul(t, cr_const(-y), m);
        acc = cr_add(t, acc, cr_log(t, cr_add(t, cr_const(1.0), cr_exp(t, z))));
    }
    return cr_mul(t, acc, cr_const(1.0 / N));
}

static cr_var regulariser(cr_tape *t, const cr_var *w)
{
    cr_var r = cr_const(0.0);
    for (int k = 0; k < D; k++)
        r = cr_add(t, r, cr_mul(t, w[k], w[k]));
    return cr_mul(t, r, cr_const(0.5 * LAMBDA));
}

/* The serial reference: value and gradient over every sample. */
static cr_status serial(cr_ctx *ctx, const double *w0, double *loss, double *g)
{
    cr_tape *t;
    cr_status st = cr_tape_new(ctx, NULL, &t);
    if (st != CR_OK)
        return st;
    cr_var w[D];
    cr_tape_inputs(t, w0, D, w);
    cr_var l = cr_add(t, shard_loss(t, w, 0, N), regulariser(t, w));
    *loss = l.v;
    st = cr_tape_gradient(t, l, w, D, g);
    cr_tape_free(t);
    return st;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    int rank, p;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &p);
    int lo = (int)((long)N * rank / p), hi = (int)((long)N * (rank + 1) / p);
    cr_ctx *ctx;
    if (cr_ctx_new(NULL, &ctx) != CR_OK)
        MPI_Abort(comm, 1);
    double w0[D] = {0.1, -0.2, 0.3, 0.0, 0.05};
    double g_ref[D] = {0}, loss_ref = 0.0;
    int bad = serial(ctx, w0, &loss_ref, g_ref) != CR_OK;

    /* 1. Communication on the tape: w broadcast from rank 0, the loss reduced to it. */
    cr_tape *t;
    if (cr_tape_new(ctx, NULL, &t) != CR_OK)
        MPI_Abort(comm, 1);
    cr_var w_root[D], w[D], local, total;
    if (rank == 0)
        cr_tape_inputs(t, w0, D, w_root);
    cr_mpi_bcast(t, cr_mpi_in_vars(w_root, D), cr_mpi_out_vars(w, D), 0, comm);
    local = shard_loss(t, w, lo, hi);
    if (rank == 0)
        local = cr_add(t, local, regulariser(t, w));
    cr_mpi_allreduce(t, cr_mpi_in_vars(&local, 1), cr_mpi_out_vars(&total, 1), MPI_SUM, NULL, comm);
    /* One loss, held by every rank: its cotangent counted once. */
    cr_var f = cr_mpi_objective(t, total, 0, comm);
    double g_tape[D] = {0};
    cr_status st = cr_mpi_agree(t, comm);
    if (st == CR_OK) /* every rank sweeps: its records hold the adjoint communication */
        st = cr_tape_gradient(t, f, rank == 0 ? w_root : w, D, g_tape);
    if (st != CR_OK) {
        fprintf(stderr, "rank %d: %s\n", rank, cr_tape_errmsg(t));
        MPI_Abort(comm, 1);
    }
    double loss_tape = f.v;
    cr_tape_free(t);

    /* 2. Data-parallel: each shard's gradient, summed by MPI_Allreduce. */
    if (cr_tape_new(ctx, NULL, &t) != CR_OK)
        MPI_Abort(comm, 1);
    double w_cur[D], g_local[D], g_sum[D];
    memcpy(w_cur, w0, sizeof w_cur);
    for (int iter = 0; iter <= 50; iter++) {
        cr_tape_reset(t);
        cr_var wv[D];
        cr_tape_inputs(t, w_cur, D, wv);
        cr_var l = shard_loss(t, wv, lo, hi);
        /* the regulariser once, on rank 0 */
        if (rank == 0)
            l = cr_add(t, l, regulariser(t, wv));
        if (cr_tape_gradient(t, l, wv, D, g_local) != CR_OK)
            MPI_Abort(comm, 1);
        double lsum = 0.0;
        MPI_Allreduce(g_local, g_sum, D, MPI_DOUBLE, MPI_SUM, comm);
        MPI_Allreduce(&l.v, &lsum, 1, MPI_DOUBLE, MPI_SUM, comm);
        if (iter == 0) {
            double e1 = 0.0, e2 = 0.0;
            for (int k = 0; k < D; k++) {
                e1 = fmax(e1, fabs(g_tape[k] - g_ref[k]));
                e2 = fmax(e2, fabs(g_sum[k] - g_ref[k]));
            }
            if (rank == 0) {
                printf("logistic regression, %d samples in %d shards:\n", N, p);
                printf("  loss %.15f (one rank: %.15f)\n", loss_tape, loss_ref);
                printf("  gradient, communication on the tape: max |difference| %.2e\n", e1);
                printf("  gradient, shards summed by MPI_Allreduce: max |difference| %.2e\n", e2);
                bad |= !(e1 <= 1e-12) || !(fabs(loss_tape - loss_ref) <= 1e-12);
            }
            bad |= !(e2 <= 1e-12);
        }
        if (iter % 25 == 0 && rank == 0)
            printf("  step %2d: loss %.6f\n", iter, lsum);
        for (int k = 0; k < D; k++)
            w_cur[k] -= 2.0 * g_sum[k];
    }
    cr_tape_free(t);
    cr_ctx_free(ctx);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm);
    if (rank == 0)
        printf("%s\n", any ? "MISMATCH" : "both gradients equal the single-rank gradient");
    MPI_Finalize();
    return any ? 1 : 0;
}
