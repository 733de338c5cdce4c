/*
 * The dual-number operations of chainrules-mpi (values and tangents in one message) under
 * mpirun on 1 to 4 ranks: the objective of test_mpi_ops.c computed on duals with two
 * directions, J and its two directional derivatives on every rank, against the serial
 * objective's value and its gradient (one tape on one process, the data movement written
 * out) dotted with each direction, and central differences of the distributed objective
 * along each direction; and their errors on every rank.
 */
#include "mpi_ops.h"

static cr_ctx *g_ctx;
static int g_rank, g_p;
static size_t g_L;

/* The direction vectors of every rank: v_j(k) for the k-th of the p L inputs. */
static double dir(int j, size_t k)
{
    return j == 0 ? cos(1.0 + 0.37 * (double)k) : sin(0.5 + 0.21 * (double)k * (double)k);
}

/* The operation of mpi_ops.h on duals; *ny its result's count here. */
static cr_status dual_op(int op, const cr_dual *u, cr_dual *y, size_t *ny)
{
    MPI_Comm c = MPI_COMM_WORLD;
    int r = g_rank, p = g_p, next = (r + 1) % p, prev = (r + p - 1) % p, root = p - 1;
    size_t P = (size_t)p;
    cr_status st;
    *ny = NPER;
    switch (op) {
    case OP_SENDRECV:
        return cr_mpi_dual_sendrecv(g_ctx, u, NPER, next, 7, y, NPER, prev, 7, c,
                                    MPI_STATUS_IGNORE);
    case OP_SEND_RECV:
        if (p == 1) {
            *ny = 0;
            return CR_OK;
        }
        if (r == 0) {
            st = cr_mpi_dual_send(g_ctx, u, NPER, next, 3, c);
            return st != CR_OK ? st
                               : cr_mpi_dual_recv(g_ctx, y, NPER, prev, 3, c, MPI_STATUS_IGNORE);
        }
        st = cr_mpi_dual_recv(g_ctx, y, NPER, MPI_ANY_SOURCE, 3, c, MPI_STATUS_IGNORE);
        cr_status s2 = cr_mpi_dual_send(g_ctx, u, NPER, next, 3, c);
        return st != CR_OK ? st : s2;
    case OP_BCAST:
        if (r == root)
            memcpy(y, u + 1, NPER * sizeof *y);
        return cr_mpi_dual_bcast(g_ctx, y, NPER, root, c);
    case OP_REDUCE_SUM:
    case OP_REDUCE_PROD:
    case OP_REDUCE_MAX:
    case OP_REDUCE_MIN:
        *ny = r == 0 ? NPER : 0;
        return cr_mpi_dual_reduce(g_ctx, u, y, NPER, red_op(op), 0, c);
    case OP_ALLREDUCE_SUM:
    case OP_ALLREDUCE_PROD:
    case OP_ALLREDUCE_MAX:
    case OP_ALLREDUCE_MIN:
        return cr_mpi_dual_allreduce(g_ctx, u, y, NPER, red_op(op), c);
    case OP_GATHER:
        *ny = r == 0 ? NPER * P : 0;
        return cr_mpi_dual_gather(g_ctx, u, NPER, y, 0, c);
    case OP_SCATTER:
        return cr_mpi_dual_scatter(g_ctx, u, y, NPER, root, c);
    case OP_ALLGATHER:
        *ny = NPER * P;
        return cr_mpi_dual_allgather(g_ctx, u, NPER, y, c);
    case OP_ISEND_IRECV: {
        cr_mpi_dual_request q[2];
        cr_status r1 = cr_mpi_dual_irecv(g_ctx, y, NPER, prev, 5, c, &q[0]);
        cr_status r2 = cr_mpi_dual_isend(g_ctx, u + NPER, NPER, next, 5, c, &q[1]);
        st = cr_mpi_dual_waitall(2, q, MPI_STATUSES_IGNORE);
        return r1 != CR_OK ? r1 : r2 != CR_OK ? r2 : st;
    }
    case OP_ISEND_CROSS: { /* two messages on one channel, waited in opposite orders */
        cr_mpi_dual_request q[4];
        *ny = 2 * NPER;
        cr_status all[7];
        all[0] = cr_mpi_dual_irecv(g_ctx, y, NPER, prev, 9, c, &q[0]);
        all[1] = cr_mpi_dual_irecv(g_ctx, y + NPER, NPER, MPI_ANY_SOURCE, MPI_ANY_TAG, c, &q[1]);
        all[2] = cr_mpi_dual_isend(g_ctx, u, NPER, next, 9, c, &q[2]);
        all[3] = cr_mpi_dual_isend(g_ctx, u + NPER, NPER, next, 9, c, &q[3]);
        all[4] = cr_mpi_dual_wait(&q[1], MPI_STATUS_IGNORE);
        all[5] = cr_mpi_dual_wait(&q[0], MPI_STATUS_IGNORE);
        all[6] = cr_mpi_dual_waitall(2, q + 2, MPI_STATUSES_IGNORE);
        for (int k = 0; k < 7; k++)
            if (all[k] != CR_OK)
                return all[k];
        return CR_OK;
    }
    case OP_GATHERV:
    case OP_SCATTERV:
    case OP_ALLGATHERV: {
        int counts[MAXP], displs[MAXP];
        size_t total;
        vlayout(p, counts, displs, &total);
        if (op == OP_GATHERV) {
            *ny = r == root ? total : 0;
            return cr_mpi_dual_gatherv(g_ctx, u, (size_t)vcount(r), y, total, counts, displs, root,
                                       c);
        }
        if (op == OP_SCATTERV) {
            *ny = (size_t)vcount(r);
            return cr_mpi_dual_scatterv(g_ctx, u, total, counts, displs, y, *ny, 0, c);
        }
        *ny = total;
        return cr_mpi_dual_allgatherv(g_ctx, u, (size_t)vcount(r), y, total, counts, displs, c);
    }
    default: /* OP_ALLTOALL */
        *ny = NPER * P;
        return cr_mpi_dual_alltoall(g_ctx, u, y, NPER, c);
    }
}

static const int dual_ops[] = {
    OP_SENDRECV,      OP_SEND_RECV,     OP_ISEND_IRECV, OP_BCAST,         OP_REDUCE_SUM,
    OP_REDUCE_PROD,   OP_REDUCE_MAX,    OP_REDUCE_MIN,  OP_ALLREDUCE_SUM, OP_ALLREDUCE_PROD,
    OP_ALLREDUCE_MAX, OP_ALLREDUCE_MIN, OP_GATHER,      OP_GATHERV,       OP_SCATTER,
    OP_SCATTERV,      OP_ALLGATHER,     OP_ALLGATHERV,  OP_ALLTOALL,      OP_ISEND_CROSS};

/* The distributed objective on duals at this rank's inputs xall + h v_j (j < 0: no shift),
 * with the two directions as tangents; *st the first failure. */
static cr_dual dual_J(int op, const double *xall, int j, double h, cr_status *st)
{
    size_t L = g_L;
    cr_dual *u = calloc(MAXL + MAXY, sizeof *u), J = cr_dual_const((double)NAN);
    if (u == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    cr_dual *y = u + MAXL;
    for (size_t i = 0; i < L; i++) {
        size_t k = (size_t)g_rank * L + i;
        double d[2] = {dir(0, k), dir(1, k)};
        cr_dual x = cr_dual_make(xall[k] + (j >= 0 ? h * dir(j, k) : 0.0), d, 2);
        u[i] = cr_dual_add(cr_dual_mul(x, x), cr_dual_sin(x));
    }
    size_t ny = 0;
    *st = dual_op(op, u, y, &ny);
    cr_dual local = cr_dual_const(0.0);
    for (size_t i = 0; i < ny && *st == CR_OK; i++)
        local =
            cr_dual_add(local, cr_dual_mul(cr_dual_const(weight(g_rank, i)), cr_dual_cos(y[i])));
    cr_status s2 = cr_mpi_dual_allreduce(g_ctx, &local, &J, 1, MPI_SUM, MPI_COMM_WORLD);
    *st = *st != CR_OK ? *st : s2;
    free(u);
    return J;
}

static void test_op(int op)
{
    size_t L = g_L, N = (size_t)g_p * L;
    double xall[MAXP * MAXL], gser[MAXP * MAXL];
    for (int r = 0; r < g_p; r++)
        for (size_t i = 0; i < L; i++)
            xall[(size_t)r * L + i] = input_value(r, i, L);
    /* products: a zero factor (u = x x + sin x at x = 0) on rank 1 */
    if ((op == OP_REDUCE_PROD || op == OP_ALLREDUCE_PROD) && g_p >= 2)
        xall[L + 1] = 0.0;
    double Js = serial_objective(g_ctx, op, g_p, L, xall, gser);
    double want[2] = {0.0, 0.0};
    for (size_t k = 0; k < N; k++)
        for (int j = 0; j < 2; j++)
            want[j] += gser[k] * dir(j, k);
    cr_status st;
    cr_dual J = dual_J(op, xall, -1, 0.0, &st);
    CHECK(st == CR_OK, "%s on duals: %s", op_names[op], cr_ctx_errmsg(g_ctx));
    CHECK(close_to(J.v, Js, 1e-13, 1e-13), "%s on duals: J = %.17g, serial %.17g", op_names[op],
          J.v, Js);
    for (int j = 0; j < 2; j++)
        CHECK(close_to(J.d[j], want[j], 1e-12, 1e-13),
              "%s on duals: direction %d: %.17g, serial gradient . v = %.17g", op_names[op], j,
              J.d[j], want[j]);
    /* central differences of the distributed objective along each direction */
    const double h = 1e-6;
    for (int j = 0; j < 2; j++) {
        cr_status sp, sm;
        double jp = dual_J(op, xall, j, h, &sp).v, jm = dual_J(op, xall, j, -h, &sm).v;
        double fd = (jp - jm) / (2 * h);
        CHECK(sp == CR_OK && sm == CR_OK && close_to(J.d[j], fd, 1e-6, 1e-8),
              "%s on duals: direction %d: %.12g, central difference %.12g", op_names[op], j, J.d[j],
              fd);
    }
}

static void test_errors(void)
{
    cr_dual x[3] = {cr_dual_var(1.0, 0), cr_dual_var(2.0, 1), cr_dual_const(3.0)}, y[3];
    /* a buffer without storage on rank 1: every rank fails */
    cr_status st =
        cr_mpi_dual_allreduce(g_ctx, g_rank == 1 ? NULL : x, y, 3, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 1)
        CHECK(st == CR_EINVAL, "rank 1's own error: %s", cr_status_name(st));
    else
        CHECK(st == CR_ECOMM && strstr(cr_ctx_errmsg(g_ctx), "rank 1 failed") != NULL,
              "the others learn it: %s (%s)", cr_status_name(st), cr_ctx_errmsg(g_ctx));
    /* counts that differ */
    st = cr_mpi_dual_bcast(g_ctx, x, g_rank == 0 ? 3 : 2, 0, MPI_COMM_WORLD);
    CHECK(st == CR_ESHAPE, "different counts: %s", cr_status_name(st));
    /* a count whose product with the number of ranks does not fit a size_t: CR_EOVERFLOW
     * on every rank, nothing read or written */
    const size_t huge = SIZE_MAX / 2 + 1;
    st = cr_mpi_dual_alltoall(g_ctx, x, y, huge, MPI_COMM_WORLD);
    CHECK(st == CR_EOVERFLOW && strstr(cr_ctx_errmsg(g_ctx), "cr_mpi_dual_alltoall") != NULL,
          "alltoall, count x ranks overflows: %s (%s)", cr_status_name(st), cr_ctx_errmsg(g_ctx));
    st = cr_mpi_dual_allgather(g_ctx, x, huge, y, MPI_COMM_WORLD);
    CHECK(st == CR_EOVERFLOW && strstr(cr_ctx_errmsg(g_ctx), "cr_mpi_dual_allgather") != NULL,
          "allgather, count x ranks overflows: %s (%s)", cr_status_name(st), cr_ctx_errmsg(g_ctx));
    /* an uncovered operation */
    st = cr_mpi_dual_allreduce(g_ctx, x, y, 3, MPI_LAND, MPI_COMM_WORLD);
    CHECK(st == CR_EUNIMPL, "MPI_LAND: %s", cr_status_name(st));
    /* a sender that fails, and a size that does not match */
    if (g_rank == 0) {
        st = cr_mpi_dual_send(g_ctx, NULL, 3, 1, 4, MPI_COMM_WORLD);
        CHECK(st == CR_EINVAL, "the sender's error: %s", cr_status_name(st));
        st = cr_mpi_dual_send(g_ctx, x, 3, 1, 4, MPI_COMM_WORLD);
        CHECK(st == CR_OK, "a sound send: %s", cr_status_name(st));
    } else if (g_rank == 1) {
        st = cr_mpi_dual_recv(g_ctx, y, 3, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(st == CR_ECOMM && strstr(cr_ctx_errmsg(g_ctx), "rank 0 (the sender) failed"),
              "the receiver learns it: %s (%s)", cr_status_name(st), cr_ctx_errmsg(g_ctx));
        st = cr_mpi_dual_recv(g_ctx, y, 2, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(st == CR_ESHAPE, "a message of another count: %s", cr_status_name(st));
    }
    /* the same by non-blocking calls: a sender without a buffer, then counts that differ
     * (shorter or longer than posted, within the room the receive posts: CR_ESHAPE) */
    if (g_rank == 0) {
        cr_mpi_dual_request q[3];
        st = cr_mpi_dual_isend(g_ctx, NULL, 3, 1, 6, MPI_COMM_WORLD, &q[0]);
        CHECK(st == CR_EINVAL && q[0] != NULL, "isend's own error: %s", cr_status_name(st));
        cr_mpi_dual_isend(g_ctx, x, 2, 1, 6, MPI_COMM_WORLD, &q[1]);
        cr_mpi_dual_isend(g_ctx, x, 3, 1, 6, MPI_COMM_WORLD, &q[2]);
        st = cr_mpi_dual_waitall(3, q, MPI_STATUSES_IGNORE);
        CHECK(st == CR_EINVAL && q[0] == NULL && q[2] == NULL, "the sender's waitall: %s",
              cr_status_name(st));
    } else if (g_rank == 1) {
        cr_mpi_dual_request q[3];
        cr_status s0 = cr_mpi_dual_irecv(g_ctx, y, 3, 0, 6, MPI_COMM_WORLD, &q[0]);
        cr_mpi_dual_irecv(g_ctx, y, 3, 0, 6, MPI_COMM_WORLD, &q[1]);
        cr_mpi_dual_irecv(g_ctx, y, 2, 0, 6, MPI_COMM_WORLD, &q[2]);
        CHECK(s0 == CR_OK, "a sound irecv: %s", cr_status_name(s0));
        st = cr_mpi_dual_wait(&q[0], MPI_STATUS_IGNORE);
        CHECK(st == CR_ECOMM && strstr(cr_ctx_errmsg(g_ctx), "rank 0 (the sender) failed"),
              "the receiver learns it at the wait: %s (%s)", cr_status_name(st),
              cr_ctx_errmsg(g_ctx));
        st = cr_mpi_dual_wait(&q[1], MPI_STATUS_IGNORE);
        CHECK(st == CR_ESHAPE, "a shorter message: %s (%s)", cr_status_name(st),
              cr_ctx_errmsg(g_ctx));
        st = cr_mpi_dual_wait(&q[2], MPI_STATUS_IGNORE);
        CHECK(st == CR_ESHAPE, "a longer message: %s (%s)", cr_status_name(st),
              cr_ctx_errmsg(g_ctx));
    }
    /* v variants: a rank whose count is not the root's, and blocks outside the buffer */
    int counts[MAXP], displs[MAXP];
    cr_dual big[4 * MAXP];
    for (int q = 0; q < g_p; q++) {
        counts[q] = 1;
        displs[q] = q;
    }
    st = cr_mpi_dual_gatherv(g_ctx, x, g_rank == 1 ? 2 : 1, big, (size_t)g_p, counts, displs, 0,
                             MPI_COMM_WORLD);
    if (g_rank == 1)
        CHECK(st == CR_ESHAPE && strstr(cr_ctx_errmsg(g_ctx), "the root's counts say 1"),
              "gatherv, a count unlike the root's: %s (%s)", cr_status_name(st),
              cr_ctx_errmsg(g_ctx));
    else
        CHECK(st == CR_ECOMM && strstr(cr_ctx_errmsg(g_ctx), "rank 1 failed"),
              "gatherv: the others learn it: %s (%s)", cr_status_name(st), cr_ctx_errmsg(g_ctx));
    st = cr_mpi_dual_scatterv(g_ctx, big, (size_t)g_p - 1, counts, displs, y, 1, 0, MPI_COMM_WORLD);
    if (g_rank == 0)
        CHECK(st == CR_ESHAPE && strstr(cr_ctx_errmsg(g_ctx), "outside the buffer"),
              "scatterv, a block outside: %s (%s)", cr_status_name(st), cr_ctx_errmsg(g_ctx));
    else
        CHECK(st == CR_ECOMM, "scatterv: the others learn it: %s", cr_status_name(st));
    /* blocks written twice (MPI forbids it) */
    displs[g_p - 1] = 0;
    st = cr_mpi_dual_gatherv(g_ctx, x, 1, big, (size_t)g_p, counts, displs, 0, MPI_COMM_WORLD);
    if (g_rank == 0)
        CHECK(st == CR_EINVAL && strstr(cr_ctx_errmsg(g_ctx), "overlap"),
              "gatherv, overlapping blocks: %s (%s)", cr_status_name(st), cr_ctx_errmsg(g_ctx));
    else
        CHECK(st == CR_ECOMM, "gatherv, overlapping blocks: the others: %s", cr_status_name(st));
    displs[g_p - 1] = g_p - 1;
    st = cr_mpi_dual_allgatherv(g_ctx, x, g_rank == 0 ? 2 : 1, big, (size_t)g_p, counts, displs,
                                MPI_COMM_WORLD);
    CHECK(st == (g_rank == 0 ? CR_ESHAPE : CR_ECOMM), "allgatherv, a count unlike counts[0]: %s",
          cr_status_name(st));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_p);
    if (g_p > MAXP) {
        MPI_Finalize();
        return 1;
    }
    g_L = (size_t)NPER * (size_t)(g_p + 1);
    if (cr_ctx_new(NULL, &g_ctx) != CR_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t k = 0; k < sizeof dual_ops / sizeof dual_ops[0]; k++)
        test_op(dual_ops[k]);
    if (g_p >= 2)
        test_errors();
    int fails = 0, checks = 0;
    MPI_Allreduce(&g_fail, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g_checks, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_mpi_dual on %d ranks: %d checks, %d failed\n", g_p, checks, fails);
    cr_ctx_free(g_ctx);
    MPI_Finalize();
    return fails == 0 ? 0 : 1;
}
