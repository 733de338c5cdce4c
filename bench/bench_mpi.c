/*
 * chainrules-mpi's overhead per communication (BENCHMARKS.md, "MPI"): for each operation
 * and message size n (doubles), on however many ranks it is launched with
 * (mpiexec -n P chainrules-bench-mpi [reps-scale [n ...]], n 1, 1024 and 1048576 unless
 * given; CR_BENCH_MPI_OP=name measures that operation only):
 *
 *   primal   the plain MPI call on a double buffer;
 *   record   the call on the tape (cr_mpi_*, an f64 array variable: the communication, the
 *            agreement of collectives or the header word of point-to-point messages, and
 *            the record), followed by a dot product that makes the rank's result a scalar;
 *   adjoint  the reverse sweep over those records (the adjoint communication, and the dot
 *            product's pullback).
 *
 * Each figure is the median over 7 runs of the slowest rank's time for R calls, divided by
 * R; the ratios are record / primal and adjoint / primal. The dot product (one pass over n
 * doubles forwards, one backwards) is part of record and adjoint.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>
#include <chainrules/mpi.h>
#include <chainrules/tape_inline.h>

enum {
    B_SENDRECV,
    B_ISEND,
    B_BCAST,
    B_REDUCE,
    B_ALLREDUCE,
    B_ALLREDUCE_MAX,
    B_GATHER,
    B_ALLGATHER,
    B_ALLTOALL,
    B_COUNT
};
static const char *const names[B_COUNT] = {"sendrecv",   "isend+irecv+wait", "bcast",
                                           "reduce sum", "allreduce sum",    "allreduce max",
                                           "gather",     "allgather",        "alltoall"};

/* plain() and taped() stay functions of their own, for callgrind's inclusive counts */
#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

static int rank_, p_;
static cr_ctx *ctx_;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The elements op sends per rank (x) and receives (y) for a message of n. */
static void sizes(int op, size_t n, size_t *nx, size_t *ny)
{
    size_t p = (size_t)p_;
    *nx = op == B_ALLTOALL ? n * p : n;
    *ny = op == B_GATHER                          ? (rank_ == 0 ? n * p : 0)
          : op == B_ALLGATHER || op == B_ALLTOALL ? n * p
                                                  : n;
    if (op == B_REDUCE && rank_ != 0)
        *ny = 0;
}

NOINLINE static void plain(int op, const double *x, double *y, size_t n)
{
    int c = (int)n, next = (rank_ + 1) % p_, prev = (rank_ + p_ - 1) % p_;
    MPI_Request q[2];
    switch (op) {
    case B_SENDRECV:
        MPI_Sendrecv(x, c, MPI_DOUBLE, next, 1, y, c, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        break;
    case B_ISEND:
        MPI_Irecv(y, c, MPI_DOUBLE, prev, 2, MPI_COMM_WORLD, &q[0]);
        MPI_Isend(x, c, MPI_DOUBLE, next, 2, MPI_COMM_WORLD, &q[1]);
        MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
        break;
    case B_BCAST:
        if (rank_ == 0)
            memcpy(y, x, n * sizeof *x);
        MPI_Bcast(y, c, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        break;
    case B_REDUCE:
        MPI_Reduce(x, y, c, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        break;
    case B_ALLREDUCE:
        MPI_Allreduce(x, y, c, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        break;
    case B_ALLREDUCE_MAX:
        MPI_Allreduce(x, y, c, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        break;
    case B_GATHER:
        MPI_Gather(x, c, MPI_DOUBLE, y, c, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        break;
    case B_ALLGATHER:
        MPI_Allgather(x, c, MPI_DOUBLE, y, c, MPI_DOUBLE, MPI_COMM_WORLD);
        break;
    default:
        MPI_Alltoall(x, c, MPI_DOUBLE, y, c, MPI_DOUBLE, MPI_COMM_WORLD);
        break;
    }
}

NOINLINE static cr_status taped(cr_tape *t, int op, cr_avar X, size_t n, cr_avar *Y)
{
    int next = (rank_ + 1) % p_, prev = (rank_ + p_ - 1) % p_;
    size_t nx, ny;
    sizes(op, n, &nx, &ny);
    cr_mpi_in in = cr_mpi_in_array(X);
    cr_mpi_out out = cr_mpi_out_array(Y, ny);
    cr_mpi_request q[2];
    switch (op) {
    case B_SENDRECV:
        return cr_mpi_sendrecv(t, in, next, 1, out, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    case B_ISEND:
        cr_mpi_irecv(t, out, prev, 2, MPI_COMM_WORLD, &q[0]);
        cr_mpi_isend(t, in, next, 2, MPI_COMM_WORLD, &q[1]);
        return cr_mpi_waitall(t, 2, q, MPI_STATUSES_IGNORE);
    case B_BCAST:
        return cr_mpi_bcast(t, in, out, 0, MPI_COMM_WORLD);
    case B_REDUCE:
        return cr_mpi_reduce(t, in, out, MPI_SUM, NULL, 0, MPI_COMM_WORLD);
    case B_ALLREDUCE:
        return cr_mpi_allreduce(t, in, out, MPI_SUM, NULL, MPI_COMM_WORLD);
    case B_ALLREDUCE_MAX:
        return cr_mpi_allreduce(t, in, out, MPI_MAX, NULL, MPI_COMM_WORLD);
    case B_GATHER:
        return cr_mpi_gather(t, in, out, 0, MPI_COMM_WORLD);
    case B_ALLGATHER:
        return cr_mpi_allgather(t, in, out, MPI_COMM_WORLD);
    default:
        return cr_mpi_alltoall(t, in, out, MPI_COMM_WORLD);
    }
}

/* The slowest rank's time of the last region. */
static double slowest(double t0)
{
    double dt = MPI_Wtime() - t0, mx = 0.0;
    MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return mx;
}

static void measure(int op, size_t n, double scale)
{
    size_t nx, ny, np = n * (size_t)p_;
    sizes(op, n, &nx, &ny);
    int reps = (int)(scale * 2e5 / (double)(n + 256));
    reps = reps < 3 ? 3 : reps > 2000 ? 2000 : reps;
    double *x = malloc(np * sizeof *x), *y = malloc(np * sizeof *y), *w = malloc(np * sizeof *w);
    double *g = malloc(np * sizeof *g);
    if (x == NULL || y == NULL || w == NULL || g == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    for (size_t i = 0; i < np; i++) {
        x[i] = 1.0 + 1e-3 * (double)(i % 97) + 0.01 * rank_;
        w[i] = 0.5;
    }
    cr_array xa = cr_array_vector(x, nx), wa = cr_array_vector(w, np), ga = cr_array_vector(g, nx);
    cr_array *gp = &ga;
    cr_tape *t;
    if (cr_tape_new(ctx_, NULL, &t) != CR_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    enum { RUNS = 7 };
    double tp[RUNS], tr[RUNS], ta[RUNS];
    for (int run = 0; run < RUNS; run++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int k = 0; k < reps; k++)
            plain(op, x, y, n);
        tp[run] = slowest(t0) / reps;

        cr_tape_reset(t);
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_var s = cr_const(0.0);
        for (int k = 0; k < reps; k++) {
            cr_avar Y;
            taped(t, op, X, n, &Y);
            wa.shape[0] = ny > 0 ? ny : nx;
            s = cr_add(t, s, cr_av_dot(t, ny > 0 ? Y : X, cr_av_const(&wa)));
        }
        tr[run] = slowest(t0) / reps;
        if (cr_mpi_agree(t, MPI_COMM_WORLD) != CR_OK) {
            if (rank_ == 0)
                fprintf(stderr, "%s: %s\n", names[op], cr_tape_errmsg(t));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        if (cr_tape_gradient_arrays(t, s, NULL, 0, NULL, &X, 1, &gp) != CR_OK)
            MPI_Abort(MPI_COMM_WORLD, 1);
        ta[run] = slowest(t0) / reps;
    }
    qsort(tp, RUNS, sizeof *tp, cmp_double);
    qsort(tr, RUNS, sizeof *tr, cmp_double);
    qsort(ta, RUNS, sizeof *ta, cmp_double);
    if (rank_ == 0)
        printf("| %d | %-16s | %8zu | %9.2f | %9.2f | %9.2f | %5.2f | %5.2f (%4.2f-%4.2f) |\n", p_,
               names[op], n, tp[RUNS / 2] * 1e6, tr[RUNS / 2] * 1e6, ta[RUNS / 2] * 1e6,
               tr[RUNS / 2] / tp[RUNS / 2], ta[RUNS / 2] / tp[RUNS / 2], ta[1] / tp[RUNS - 2],
               ta[RUNS - 2] / tp[1]);
    cr_tape_free(t);
    free(x);
    free(y);
    free(w);
    free(g);
}

/* The heat equation's step (examples/mpi/08_mpi_heat.c) on one rank without communication:
 * the plain loop, the loop recorded on the tape and its reverse sweep, per point and step,
 * and the tape's bytes per point and step: the computation terms of docs/mpi.md's model. */
static void heat_costs(void)
{
    enum { NP = 4096, ST = 50, RUNS = 7 };
    static double u[NP], v[NP], g[NP];
    static cr_var x[NP], a[NP], b[NP];
    double tp[RUNS], tr[RUNS], ta[RUNS];
    size_t bytes = 0;
    cr_tape *t;
    if (cr_tape_new(ctx_, NULL, &t) != CR_OK)
        return;
    for (int run = 0; run < RUNS; run++) {
        for (int i = 0; i < NP; i++)
            u[i] = sin(0.01 * i);
        double t0 = MPI_Wtime();
        for (int k = 0; k < ST; k++) {
            for (int i = 0; i < NP; i++) {
                double l = i > 0 ? u[i - 1] : 0.0, r = i < NP - 1 ? u[i + 1] : 0.0;
                v[i] = u[i] + 0.25 * (l + r - 2 * u[i]);
            }
            memcpy(u, v, sizeof u);
        }
        tp[run] = (MPI_Wtime() - t0) / ((double)NP * ST);
        for (int i = 0; i < NP; i++)
            u[i] = sin(0.01 * i);
        cr_tape_reset(t);
        t0 = MPI_Wtime();
        cr_tape_inputs(t, u, NP, x);
        memcpy(a, x, sizeof a);
        for (int k = 0; k < ST; k++) {
            for (int i = 0; i < NP; i++) {
                cr_var l = i > 0 ? a[i - 1] : cr_const(0.0),
                       r = i < NP - 1 ? a[i + 1] : cr_const(0.0);
                cr_var lap = cr_sub(t, cr_add(t, l, r), cr_mul(t, cr_const(2.0), a[i]));
                b[i] = cr_add(t, a[i], cr_mul(t, cr_const(0.25), lap));
            }
            memcpy(a, b, sizeof a);
        }
        cr_var s = cr_const(0.0);
        for (int i = 0; i < NP; i++)
            s = cr_add(t, s, cr_mul(t, a[i], a[i]));
        tr[run] = (MPI_Wtime() - t0) / ((double)NP * ST);
        t0 = MPI_Wtime();
        if (cr_tape_gradient(t, s, x, NP, g) != CR_OK)
            return;
        ta[run] = (MPI_Wtime() - t0) / ((double)NP * ST);
        cr_tape_stats stt;
        if (cr_tape_stats_get(t, &stt) == CR_OK)
            bytes = stt.record_bytes;
    }
    cr_tape_free(t);
    qsort(tp, RUNS, sizeof *tp, cmp_double);
    qsort(tr, RUNS, sizeof *tr, cmp_double);
    qsort(ta, RUNS, sizeof *ta, cmp_double);
    printf("\nheat step, %d points x %d steps on one rank: plain %.2f ns, recorded %.2f ns, "
           "reverse sweep %.2f ns per point and step (medians of %d; recorded %.2f-%.2f, "
           "sweep %.2f-%.2f); %.1f tape bytes per point and step\n",
           NP, ST, tp[RUNS / 2] * 1e9, tr[RUNS / 2] * 1e9, ta[RUNS / 2] * 1e9, RUNS, tr[0] * 1e9,
           tr[RUNS - 1] * 1e9, ta[0] * 1e9, ta[RUNS - 1] * 1e9, (double)bytes / (NP * ST));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &p_);
    double scale = argc > 1 ? atof(argv[1]) : 1.0;
    if (cr_ctx_new(NULL, &ctx_) != CR_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    /* 1, 1k and 1M doubles, or the sizes given after the scale */
    size_t ns[8] = {1, 1024, 1048576};
    size_t nn = 3;
    if (argc > 2) {
        nn = 0;
        for (int a = 2; a < argc && nn < 8; a++)
            ns[nn++] = (size_t)strtoul(argv[a], NULL, 10);
    }
    if (rank_ == 0)
        printf("| ranks | operation | n (doubles) | primal µs | record µs | adjoint µs | "
               "record / primal | adjoint / primal (range) |\n|---|---|---|---|---|---|---|---|\n");
    /* CR_BENCH_MPI_OP=name: that operation only (and no heat step), e.g. for callgrind */
    const char *only = getenv("CR_BENCH_MPI_OP");
    for (int op = 0; op < B_COUNT; op++)
        for (size_t k = 0; k < nn; k++)
            if (only == NULL || strcmp(only, names[op]) == 0)
                measure(op, ns[k], scale);
    if (rank_ == 0 && p_ == 1 && only == NULL)
        heat_costs();
    cr_ctx_free(ctx_);
    MPI_Finalize();
    return 0;
}
