/*
 * Failures of one rank reach every rank concerned as a clear status, never a hang (the test
 * has a timeout): a bad buffer, a count beyond MPI's or a mismatched count in collectives and
 * in point-to-point messages, a rank whose tape failed earlier, an uncovered reduction, a tape that
 * cannot hold the records; and cr_mpi_agree() lets every rank sweep, or none.
 */
#include <limits.h>

#include "mpi_ops.h"

static cr_ctx *g_ctx;
static int g_rank, g_p;

static cr_tape *fresh(uint32_t flags)
{
    cr_tape_params prm;
    memset(&prm, 0, sizeof prm);
    prm.flags = flags;
    cr_tape *t = NULL;
    if (cr_tape_new(g_ctx, &prm, &t) != CR_OK)
        MPI_Abort(MPI_COMM_WORLD, 2);
    return t;
}

#define EXPECT(t, got, want, text)                                                           \
    CHECK((got) == (want) && strstr(cr_tape_errmsg(t), (text)) != NULL,                      \
          "status %s (%s), expected %s with \"%s\"", cr_status_name(got), cr_tape_errmsg(t), \
          cr_status_name(want), (text))

/* Rank 1 gives a buffer of n elements without storage to an allreduce. */
static void bad_buffer_collective(void)
{
    cr_tape *t = fresh(0);
    cr_var x[3], y[3];
    double v[3] = {1, 2, 3};
    cr_tape_inputs(t, v, 3, x);
    cr_mpi_in in = g_rank == 1 ? cr_mpi_in_vars(NULL, 3) : cr_mpi_in_vars(x, 3);
    cr_status st = cr_mpi_allreduce(t, in, cr_mpi_out_vars(y, 3), MPI_SUM, NULL, MPI_COMM_WORLD);
    if (g_rank == 1)
        EXPECT(t, st, CR_EINVAL, "cr_mpi_allreduce: the buffer has 3 elements and no buffer");
    else
        EXPECT(t, st, CR_ECOMM, "cr_mpi_allreduce: rank 1 failed");
    CHECK(y[0].v != y[0].v && cr_var_is_const(y[0]), "the results of a failed call are NaN");
    /* Every rank then refuses to sweep. */
    cr_status sa = cr_mpi_agree(t, MPI_COMM_WORLD);
    CHECK(sa != CR_OK, "cr_mpi_agree after a failure gave CR_OK");
    cr_tape_free(t);
}

/* Rank 1 gives a count beyond MPI's int counts (its variables are not read): CR_EOVERFLOW
 * there, and the others learn it. */
static void count_overflow(void)
{
    cr_tape *t = fresh(0);
    cr_var x[3], y[3];
    double v[3] = {1, 2, 3};
    cr_tape_inputs(t, v, 3, x);
    size_t n = g_rank == 1 ? (size_t)INT_MAX : 3;
    cr_status st = cr_mpi_allreduce(t, cr_mpi_in_vars(x, n), cr_mpi_out_vars(y, 3), MPI_SUM, NULL,
                                    MPI_COMM_WORLD);
    if (g_rank == 1)
        EXPECT(t, st, CR_EOVERFLOW, "cr_mpi_allreduce: the buffer has 2147483647 elements");
    else
        EXPECT(t, st, CR_ECOMM, "cr_mpi_allreduce: rank 1 failed");
    CHECK(y[0].v != y[0].v, "the results of a failed call are NaN");
    cr_tape_free(t);
}

/* The ranks give different counts to a collective. */
static void mismatched_collective(void)
{
    cr_tape *t = fresh(0);
    cr_var x[3], y[3];
    double v[3] = {1, 2, 3};
    cr_tape_inputs(t, v, 3, x);
    size_t n = g_rank == 1 ? 2 : 3;
    cr_status st = cr_mpi_bcast(t, cr_mpi_in_vars(x, n), cr_mpi_out_vars(y, n), 0, MPI_COMM_WORLD);
    EXPECT(t, st, CR_ESHAPE, "cr_mpi_bcast: the ranks give from 2 to 3 elements");
    cr_tape_free(t);
}

/* Rank 0 sends a bad buffer to rank 1; rank 1 learns it from the message's header. */
static void bad_buffer_p2p(void)
{
    cr_tape *t = fresh(0);
    cr_var x[3], y[3];
    double v[3] = {1, 2, 3};
    cr_tape_inputs(t, v, 3, x);
    cr_status st = CR_OK;
    if (g_rank == 0) {
        st = cr_mpi_send(t, cr_mpi_in_vars(NULL, 3), 1, 11, MPI_COMM_WORLD);
        EXPECT(t, st, CR_EINVAL, "cr_mpi_send: the buffer has 3 elements and no buffer");
    } else if (g_rank == 1) {
        st = cr_mpi_recv(t, cr_mpi_out_vars(y, 3), 0, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        EXPECT(t, st, CR_ECOMM, "cr_mpi_recv: rank 0 (the sender) failed");
    }
    cr_status sa = cr_mpi_agree(t, MPI_COMM_WORLD);
    CHECK(sa != CR_OK, "cr_mpi_agree: every rank fails after rank 0 did");
    if (g_rank > 1)
        EXPECT(t, sa, CR_ECOMM, "cr_mpi_agree: rank 0 failed");
    cr_tape_free(t);
}

/* Counts that differ between a send and its receive, blocking and non-blocking. */
static void mismatched_p2p(void)
{
    cr_tape *t = fresh(0);
    cr_var x[4], y[4];
    double v[4] = {1, 2, 3, 4};
    cr_tape_inputs(t, v, 4, x);
    if (g_rank == 0) {
        cr_status st = cr_mpi_send(t, cr_mpi_in_vars(x, 3), 1, 12, MPI_COMM_WORLD);
        CHECK(st == CR_OK, "the sender of a message of the wrong size: %s", cr_tape_errmsg(t));
    } else if (g_rank == 1) {
        cr_status st =
            cr_mpi_recv(t, cr_mpi_out_vars(y, 2), 0, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        EXPECT(t, st, CR_ESHAPE, "cr_mpi_recv: the message from rank 0 has 3 elements, 2 expected");
    }
    cr_status sa = cr_mpi_agree(t, MPI_COMM_WORLD);
    if (g_rank != 1)
        EXPECT(t, sa, CR_ECOMM, "cr_mpi_agree: rank 1 failed");
    cr_tape_free(t);

    t = fresh(0);
    cr_tape_inputs(t, v, 4, x);
    cr_mpi_request q = NULL;
    cr_status st = CR_OK;
    if (g_rank == 0)
        st = cr_mpi_isend(t, cr_mpi_in_vars(x, 3), 1, 13, MPI_COMM_WORLD, &q);
    else if (g_rank == 1)
        st = cr_mpi_irecv(t, cr_mpi_out_vars(y, 4), 0, 13, MPI_COMM_WORLD, &q);
    CHECK(st == CR_OK, "posting: %s", cr_tape_errmsg(t));
    st = cr_mpi_wait(t, &q, MPI_STATUS_IGNORE);
    CHECK(q == NULL, "a completed request is NULL");
    if (g_rank == 1)
        EXPECT(t, st, CR_ESHAPE, "cr_mpi_wait: the message from rank 0 has 3 elements, 4 expected");
    else
        CHECK(st == CR_OK, "rank %d: %s", g_rank, cr_tape_errmsg(t));
    cr_tape_free(t);
}

/* A rank whose tape failed before goes on communicating (error marks): its partners fail
 * too, with the rank named, and nobody hangs in the calls that follow. */
static void failed_rank_keeps_step(void)
{
    cr_tape *t = fresh(0);
    cr_var x[3], y[3], z[3];
    double v[3] = {1, 2, 3};
    cr_tape_inputs(t, v, 3, x);
    if (g_rank == g_p - 1)
        cr_tape_op_fail(t, CR_EDOMAIN, "an earlier operation failed");
    int next = (g_rank + 1) % g_p, prev = (g_rank + g_p - 1) % g_p;
    cr_status s1 = cr_mpi_sendrecv(t, cr_mpi_in_vars(x, 3), next, 14, cr_mpi_out_vars(y, 3), prev,
                                   14, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    cr_status s2 = cr_mpi_allreduce(t, cr_mpi_in_vars(x, 3), cr_mpi_out_vars(z, 3), MPI_SUM, NULL,
                                    MPI_COMM_WORLD);
    if (g_rank == g_p - 1) {
        EXPECT(t, s1, CR_EDOMAIN, "an earlier operation failed");
        CHECK(s2 == CR_EDOMAIN, "the failed rank keeps its status");
    } else if (g_rank == 0) {
        EXPECT(t, s1, CR_ECOMM, "the sender) failed");
        CHECK(s2 == CR_ECOMM, "rank 0 keeps its first failure");
    } else {
        CHECK(s1 == CR_OK, "rank %d's sendrecv: %s", g_rank, cr_tape_errmsg(t));
        EXPECT(t, s2, CR_ECOMM, "failed");
    }
    cr_status sa = cr_mpi_agree(t, MPI_COMM_WORLD);
    CHECK(sa != CR_OK, "nobody sweeps");
    cr_tape_free(t);
}

/* Reductions without a derivative here are refused, naming them. */
static void uncovered_reduction(void)
{
    cr_tape *t = fresh(0);
    cr_var x[2], y[2];
    double v[2] = {1, 2};
    cr_tape_inputs(t, v, 2, x);
    cr_status st = cr_mpi_allreduce(t, cr_mpi_in_vars(x, 2), cr_mpi_out_vars(y, 2), MPI_BAND, NULL,
                                    MPI_COMM_WORLD);
    EXPECT(t, st, CR_EUNIMPL, "cr_mpi_allreduce: MPI_BAND is not covered");
    cr_tape_free(t);
    t = fresh(0);
    cr_tape_inputs(t, v, 2, x);
    st = cr_mpi_reduce(t, cr_mpi_in_vars(x, 2), cr_mpi_out_vars(y, 2), MPI_MAXLOC, NULL, 0,
                       MPI_COMM_WORLD);
    EXPECT(t, st, CR_EUNIMPL, "cr_mpi_reduce: MPI_MAXLOC is not covered");
    cr_tape_free(t);
}

/* gatherv: the root's counts disagree with rank 1's buffer. */
static void gatherv_counts(void)
{
    cr_tape *t = fresh(0);
    cr_var x[3], y[3 * MAXP];
    double v[3] = {1, 2, 3};
    cr_tape_inputs(t, v, 3, x);
    int counts[MAXP], displs[MAXP];
    for (int r = 0; r < g_p; r++) {
        counts[r] = r == 1 ? 3 : 2;
        displs[r] = 3 * r;
    }
    cr_status st = cr_mpi_gatherv(t, cr_mpi_in_vars(x, 2), cr_mpi_out_vars(y, 3 * (size_t)g_p),
                                  counts, displs, 0, MPI_COMM_WORLD);
    if (g_rank == 1)
        EXPECT(t, st, CR_ESHAPE, "this rank's buffer has 2 elements, the root's counts say 3");
    else
        EXPECT(t, st, CR_ECOMM, "cr_mpi_gatherv: rank 1 failed");
    cr_tape_free(t);
}

/* A second-order tape cannot hold the records: every rank refuses, naming the operation. */
static void second_order_tape(void)
{
    cr_tape *t = fresh(CR_TAPE_SECOND_ORDER);
    cr_var x[2], y[2];
    double v[2] = {1, 2};
    cr_tape_inputs(t, v, 2, x);
    cr_status st = cr_mpi_allreduce(t, cr_mpi_in_vars(x, 2), cr_mpi_out_vars(y, 2), MPI_SUM, NULL,
                                    MPI_COMM_WORLD);
    EXPECT(t, st, CR_EUNIMPL, "MPI_Allreduce: an operation with its own steps is not recorded");
    cr_tape_free(t);
}

/* A rank that is not in the communicator. */
static void bad_rank(void)
{
    cr_tape *t = fresh(0);
    cr_var x[2];
    double v[2] = {1, 2};
    cr_tape_inputs(t, v, 2, x);
    cr_status st = cr_mpi_send(t, cr_mpi_in_vars(x, 2), g_p + 3, 1, MPI_COMM_WORLD);
    EXPECT(t, st, CR_EINVAL, "is not a rank of the communicator");
    cr_tape_free(t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_p);
    if (g_p < 2 || g_p > MAXP) {
        if (g_rank == 0)
            fprintf(stderr, "test_mpi_errors runs on 2 to %d ranks\n", MAXP);
        MPI_Finalize();
        return 1;
    }
    if (cr_ctx_new(NULL, &g_ctx) != CR_OK) {
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    bad_buffer_collective();
    mismatched_collective();
    count_overflow();
    bad_buffer_p2p();
    mismatched_p2p();
    failed_rank_keeps_step();
    uncovered_reduction();
    gatherv_counts();
    second_order_tape();
    bad_rank();
    int fails = 0, checks = 0;
    MPI_Allreduce(&g_fail, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g_checks, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_mpi_errors on %d ranks: %d checks, %d failed\n", g_p, checks, fails);
    cr_ctx_free(g_ctx);
    MPI_Finalize();
    return fails == 0 ? 0 : 1;
}
