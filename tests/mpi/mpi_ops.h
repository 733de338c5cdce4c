/*
 * The operations of chainrules-mpi twice: on the tape with real communication (each rank
 * holding its own vector), and serially on one tape holding every rank's vector (the same
 * function with the data movement written out). The tests compare the two gradients and
 * central differences of the distributed function.
 *
 * A rank's vector has L = NPER * (p + 1) elements. Values are scalar variables or one f64 array
 * variable (vec.mode), so that both kinds of buffer go through every operation.
 */
#ifndef CR_TEST_MPI_OPS_H
#define CR_TEST_MPI_OPS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>
#include <chainrules/mpi.h>

#define NPER 3 /* elements per rank in the blocks the operations move */
#define MAXP 8 /* most ranks the tests run on */
#define MAXL (NPER * (MAXP + 1))
#define MAXY (MAXL * MAXP)

/* ---- Checks ------------------------------------------------------------------------------ */

static int g_fail;
static int g_checks;

#define CHECK(cond, ...)                                                 \
    do {                                                                 \
        g_checks++;                                                      \
        if (!(cond)) {                                                   \
            g_fail++;                                                    \
            int r_;                                                      \
            MPI_Comm_rank(MPI_COMM_WORLD, &r_);                          \
            fprintf(stderr, "rank %d: %s:%d: ", r_, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                \
            fputc('\n', stderr);                                         \
        }                                                                \
    } while (0)

static inline int close_to(double a, double b, double rtol, double atol)
{
    return fabs(a - b) <= atol + rtol * fmax(fabs(a), fabs(b));
}

/* ---- Vectors on the tape ----------------------------------------------------------------- */

enum { M_SCALAR = 0, M_ARRAY = 1 };

typedef struct vec {
    int mode;
    cr_var s[MAXY];
    cr_avar a;
    size_t n;
} vec;

/* Elements [off, off + len) of v as a buffer to send. */
static inline cr_mpi_in vin(cr_tape *t, const vec *v, size_t off, size_t len)
{
    if (v->mode == M_SCALAR)
        return cr_mpi_in_vars(v->s + off, len);
    if (off == 0 && len == v->n)
        return cr_mpi_in_array(v->a);
    cr_mpi_in b = cr_mpi_in_array(cr_av_slice(t, v->a, (int64_t)off, (int64_t)(off + len)));
    b.n = len;
    return b;
}

static inline cr_mpi_out vout(vec *y, int mode, size_t n)
{
    y->mode = mode;
    y->n = n;
    return mode == M_SCALAR ? cr_mpi_out_vars(y->s, n) : cr_mpi_out_array(&y->a, n);
}

/* ---- The operations ---------------------------------------------------------------------- */

enum {
    OP_SENDRECV,
    OP_SEND_RECV,
    OP_ISEND_IRECV,
    OP_BCAST,
    OP_REDUCE_SUM,
    OP_REDUCE_PROD,
    OP_REDUCE_MAX,
    OP_REDUCE_MIN,
    OP_ALLREDUCE_SUM,
    OP_ALLREDUCE_PROD,
    OP_ALLREDUCE_MAX,
    OP_ALLREDUCE_MIN,
    OP_GATHER,
    OP_GATHERV,
    OP_SCATTER,
    OP_SCATTERV,
    OP_ALLGATHER,
    OP_ALLGATHERV,
    OP_ALLTOALL,
    OP_ISEND_CROSS,
    OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
    "sendrecv",
    "send/recv",
    "isend/irecv/waitall",
    "bcast",
    "reduce sum",
    "reduce prod",
    "reduce max",
    "reduce min",
    "allreduce sum",
    "allreduce prod",
    "allreduce max",
    "allreduce min",
    "gather",
    "gatherv",
    "scatter",
    "scatterv",
    "allgather",
    "allgatherv",
    "alltoall",
    "two isends on one channel, waited in opposite orders"};

/* gatherv / scatterv / allgatherv: rank r's block has 1 + r % NPER elements, the blocks
 * in reverse rank order with a hole of one element after each. */
static inline int vcount(int r)
{
    return 1 + r % NPER;
}
static inline void vlayout(int p, int *counts, int *displs, size_t *total)
{
    size_t off = 0;
    for (int r = p - 1; r >= 0; r--) {
        counts[r] = vcount(r);
        displs[r] = (int)off;
        off += (size_t)counts[r] + 1;
    }
    *total = off;
}

static inline MPI_Op red_op(int op)
{
    switch (op) {
    case OP_REDUCE_PROD:
    case OP_ALLREDUCE_PROD:
        return MPI_PROD;
    case OP_REDUCE_MAX:
    case OP_ALLREDUCE_MAX:
        return MPI_MAX;
    case OP_REDUCE_MIN:
    case OP_ALLREDUCE_MIN:
        return MPI_MIN;
    default:
        return MPI_SUM;
    }
}

/* The distributed operation on this rank's u (L elements): its result y (y->n 0: none). */
static inline cr_status dist_op(cr_tape *t, int op, const vec *u, vec *y, MPI_Comm comm)
{
    int r, p;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &p);
    int next = (r + 1) % p, prev = (r + p - 1) % p, root = p - 1;
    int counts[MAXP], displs[MAXP];
    size_t total;
    vlayout(p, counts, displs, &total);
    cr_status st = CR_OK;
    y->n = 0;
    y->mode = u->mode;
    switch (op) {
    case OP_SENDRECV:
        return cr_mpi_sendrecv(t, vin(t, u, 0, NPER), next, 7, vout(y, u->mode, NPER), prev, 7,
                               comm, MPI_STATUS_IGNORE);
    case OP_SEND_RECV: /* a ring; rank 0 sends first; one rank: no message */
        if (p == 1) {
            y->n = 0;
            return CR_OK;
        }
        if (r == 0) {
            st = cr_mpi_send(t, vin(t, u, 0, NPER), next, 3, comm);
            if (st == CR_OK)
                st = cr_mpi_recv(t, vout(y, u->mode, NPER), prev, 3, comm, MPI_STATUS_IGNORE);
        } else {
            st = cr_mpi_recv(t, vout(y, u->mode, NPER), MPI_ANY_SOURCE, 3, comm, MPI_STATUS_IGNORE);
            cr_status s2 = cr_mpi_send(t, vin(t, u, 0, NPER), next, 3, comm);
            st = st != CR_OK ? st : s2;
        }
        return st;
    case OP_ISEND_IRECV: {
        cr_mpi_request q[2];
        cr_status s1 = cr_mpi_irecv(t, vout(y, u->mode, NPER), prev, 5, comm, &q[0]);
        cr_status s2 = cr_mpi_isend(t, vin(t, u, NPER, NPER), next, 5, comm, &q[1]);
        st = cr_mpi_waitall(t, 2, q, MPI_STATUSES_IGNORE);
        return s1 != CR_OK ? s1 : s2 != CR_OK ? s2 : st;
    }
    case OP_BCAST:
        return cr_mpi_bcast(t, vin(t, u, 1, NPER), vout(y, u->mode, NPER), root, comm);
    case OP_REDUCE_SUM:
    case OP_REDUCE_PROD:
    case OP_REDUCE_MAX:
    case OP_REDUCE_MIN: {
        int loc[MAXL];
        st = cr_mpi_reduce(t, vin(t, u, 0, NPER),
                           r == 0 ? vout(y, u->mode, NPER) : vout(y, u->mode, 0), red_op(op), loc,
                           0, comm);
        if (r != 0)
            y->n = 0;
        return st;
    }
    case OP_ALLREDUCE_SUM:
    case OP_ALLREDUCE_PROD:
    case OP_ALLREDUCE_MAX:
    case OP_ALLREDUCE_MIN:
        return cr_mpi_allreduce(t, vin(t, u, 0, NPER), vout(y, u->mode, NPER), red_op(op), NULL,
                                comm);
    case OP_GATHER:
        st = cr_mpi_gather(t, vin(t, u, 0, NPER), vout(y, u->mode, (size_t)NPER * (size_t)p), 0,
                           comm);
        if (r != 0)
            y->n = 0;
        return st;
    case OP_GATHERV:
        st = cr_mpi_gatherv(t, vin(t, u, 0, (size_t)vcount(r)), vout(y, u->mode, total), counts,
                            displs, root, comm);
        if (r != root)
            y->n = 0;
        return st;
    case OP_SCATTER:
        return cr_mpi_scatter(t, vin(t, u, 0, (size_t)NPER * (size_t)p), vout(y, u->mode, NPER),
                              root, comm);
    case OP_SCATTERV:
        return cr_mpi_scatterv(t, vin(t, u, 0, total <= u->n ? total : u->n), counts, displs,
                               vout(y, u->mode, (size_t)vcount(r)), 0, comm);
    case OP_ALLGATHER:
        return cr_mpi_allgather(t, vin(t, u, 0, NPER), vout(y, u->mode, (size_t)NPER * (size_t)p),
                                comm);
    case OP_ALLGATHERV:
        return cr_mpi_allgatherv(t, vin(t, u, 0, (size_t)vcount(r)), vout(y, u->mode, total),
                                 counts, displs, comm);
    case OP_ISEND_CROSS: { /* results as scalar variables whatever u's kind */
        cr_mpi_request q[4];
        y->mode = M_SCALAR;
        y->n = 2 * NPER;
        cr_status s1 = cr_mpi_irecv(t, cr_mpi_out_vars(y->s, NPER), prev, 9, comm, &q[0]);
        cr_status s2 = cr_mpi_irecv(t, cr_mpi_out_vars(y->s + NPER, NPER), prev, 9, comm, &q[1]);
        cr_status s3 = cr_mpi_isend(t, vin(t, u, 0, NPER), next, 9, comm, &q[2]);
        cr_status s4 = cr_mpi_isend(t, vin(t, u, NPER, NPER), next, 9, comm, &q[3]);
        /* the receives waited second first, the sends first first */
        cr_status w1 = cr_mpi_wait(t, &q[1], MPI_STATUS_IGNORE);
        cr_status w2 = cr_mpi_wait(t, &q[0], MPI_STATUS_IGNORE);
        cr_status w3 = cr_mpi_waitall(t, 2, q + 2, MPI_STATUSES_IGNORE);
        cr_status all[7] = {s1, s2, s3, s4, w1, w2, w3};
        for (int k = 0; k < 7; k++)
            if (all[k] != CR_OK)
                return all[k];
        return CR_OK;
    }
    default: /* OP_ALLTOALL: blocks of NPER */
        return cr_mpi_alltoall(t, vin(t, u, 0, (size_t)NPER * (size_t)p),
                               vout(y, u->mode, (size_t)NPER * (size_t)p), comm);
    }
}

/* The same operation serially: U[r] (L scalar variables each) for every rank r; Y[r] and
 * ny[r] the results. Constants 0 in the holes of gatherv / allgatherv. */
static inline void serial_op(cr_tape *t, int op, int p, size_t L, cr_var (*U)[MAXL],
                             cr_var (*Y)[MAXY], size_t *ny)
{
    int counts[MAXP], displs[MAXP];
    size_t total;
    vlayout(p, counts, displs, &total);
    int root = p - 1;
    for (int r = 0; r < p; r++)
        ny[r] = 0;
    switch (op) {
    case OP_ISEND_CROSS:
        for (int r = 0; r < p; r++) {
            int prev = (r + p - 1) % p;
            ny[r] = 2 * NPER;
            for (int i = 0; i < 2 * NPER; i++)
                Y[r][i] = U[prev][i];
        }
        return;
    case OP_SENDRECV:
    case OP_SEND_RECV:
    case OP_ISEND_IRECV:
        if (op == OP_SEND_RECV && p == 1)
            return;
        for (int r = 0; r < p; r++) {
            int prev = (r + p - 1) % p;
            ny[r] = NPER;
            for (int i = 0; i < NPER; i++)
                Y[r][i] = U[prev][i + (op == OP_ISEND_IRECV ? NPER : 0)];
        }
        return;
    case OP_BCAST:
        for (int r = 0; r < p; r++) {
            ny[r] = NPER;
            for (int i = 0; i < NPER; i++)
                Y[r][i] = U[root][1 + i];
        }
        return;
    case OP_REDUCE_SUM:
    case OP_REDUCE_PROD:
    case OP_REDUCE_MAX:
    case OP_REDUCE_MIN:
    case OP_ALLREDUCE_SUM:
    case OP_ALLREDUCE_PROD:
    case OP_ALLREDUCE_MAX:
    case OP_ALLREDUCE_MIN: {
        MPI_Op o = red_op(op);
        cr_var acc[NPER];
        for (int i = 0; i < NPER; i++) {
            acc[i] = U[0][i];
            for (int r = 1; r < p; r++) {
                cr_var b = U[r][i];
                if (o == MPI_SUM)
                    acc[i] = cr_add(t, acc[i], b);
                else if (o == MPI_PROD)
                    acc[i] = cr_mul(t, acc[i], b);
                else if (o == MPI_MAX)
                    acc[i] = b.v > acc[i].v ? b : acc[i]; /* the lowest rank on ties */
                else
                    acc[i] = b.v < acc[i].v ? b : acc[i];
            }
        }
        bool all = op >= OP_ALLREDUCE_SUM;
        for (int r = 0; r < p; r++)
            if (all || r == 0) {
                ny[r] = NPER;
                for (int i = 0; i < NPER; i++)
                    Y[r][i] = acc[i];
            }
        return;
    }
    case OP_GATHER:
        ny[0] = (size_t)NPER * (size_t)p;
        for (int r = 0; r < p; r++)
            for (int i = 0; i < NPER; i++)
                Y[0][r * NPER + i] = U[r][i];
        return;
    case OP_GATHERV:
    case OP_ALLGATHERV:
        for (int q = 0; q < p; q++) {
            if (op == OP_GATHERV && q != root)
                continue;
            ny[q] = total;
            for (size_t i = 0; i < total; i++)
                Y[q][i] = cr_const(0.0);
            for (int r = 0; r < p; r++)
                for (int i = 0; i < counts[r]; i++)
                    Y[q][displs[r] + i] = U[r][i];
        }
        return;
    case OP_SCATTER:
        for (int r = 0; r < p; r++) {
            ny[r] = NPER;
            for (int i = 0; i < NPER; i++)
                Y[r][i] = U[root][r * NPER + i];
        }
        return;
    case OP_SCATTERV:
        for (int r = 0; r < p; r++) {
            ny[r] = (size_t)counts[r];
            for (int i = 0; i < counts[r]; i++)
                Y[r][i] = U[0][displs[r] + i];
        }
        return;
    case OP_ALLGATHER:
        for (int q = 0; q < p; q++) {
            ny[q] = (size_t)NPER * (size_t)p;
            for (int r = 0; r < p; r++)
                for (int i = 0; i < NPER; i++)
                    Y[q][r * NPER + i] = U[r][i];
        }
        return;
    default: { /* OP_ALLTOALL: block s of rank r's u is block r of rank s's y */
        size_t b = NPER;
        (void)L;
        for (int s = 0; s < p; s++) {
            ny[s] = (size_t)NPER * (size_t)p;
            for (int r = 0; r < p; r++)
                for (size_t i = 0; i < b; i++)
                    Y[s][(size_t)r * b + i] = U[r][(size_t)s * b + i];
        }
        return;
    }
    }
}

/* ---- The objective around an operation ----------------------------------------------------- */

/* Rank r's inputs: distinct values, none equal across ranks (no ties in max / min). */
static inline double input_value(int r, size_t i, size_t L)
{
    return 0.3 + 0.7 * sin(1.0 + (double)r * 1.7 + (double)i * 0.61) +
           0.01 * (double)(r * (int)L + (int)i);
}

/* The weight of element i of rank r's result in the objective. */
static inline double weight(int r, size_t i)
{
    return 1.0 + 0.25 * (double)r - 0.1 * (double)i;
}

/* u = x .* x + sin(x), elementwise, on scalar variables. */
static inline cr_var pre1(cr_tape *t, cr_var x)
{
    return cr_add(t, cr_mul(t, x, x), cr_sin(t, x));
}

/* The local part of the objective from a result: sum_i w(r, i) cos(y_i). */
static inline cr_var post1(cr_tape *t, int r, const cr_var *y, size_t n)
{
    cr_var acc = cr_const(0.0);
    for (size_t i = 0; i < n; i++)
        acc = cr_add(t, acc, cr_mul(t, cr_const(weight(r, i)), cr_cos(t, y[i])));
    return acc;
}

/* The serial objective around op of every rank's inputs xall (p L values: the ranks' x one
 * after the other) and its gradient into g. */
static inline double serial_objective(cr_ctx *ctx, int op, int p, size_t L, const double *xall,
                                      double *g)
{
    size_t N = (size_t)p * L;
    cr_tape *t;
    if (cr_tape_new(ctx, NULL, &t) != CR_OK)
        return (double)NAN;
    cr_var(*U)[MAXL] = calloc(MAXP, sizeof *U);
    cr_var(*Y)[MAXY] = calloc(MAXP, sizeof *Y);
    cr_var *xs = calloc(N, sizeof *xs);
    size_t ny[MAXP];
    double J = (double)NAN;
    if (U != NULL && Y != NULL && xs != NULL) {
        cr_tape_inputs(t, xall, N, xs);
        for (int r = 0; r < p; r++)
            for (size_t i = 0; i < L; i++)
                U[r][i] = pre1(t, xs[(size_t)r * L + i]);
        serial_op(t, op, p, L, U, Y, ny);
        cr_var acc = cr_const(0.0);
        for (int r = 0; r < p; r++)
            acc = cr_add(t, acc, post1(t, r, Y[r], ny[r]));
        J = acc.v;
        if (cr_var_is_const(acc))
            memset(g, 0, N * sizeof *g);
        else if (cr_tape_gradient(t, acc, xs, N, g) != CR_OK)
            J = (double)NAN;
    }
    free(U);
    free(Y);
    free(xs);
    cr_tape_free(t);
    return J;
}

#endif /* CR_TEST_MPI_OPS_H */
