/*
 * A 1-D heat equation split across ranks, differentiated through 1000 time steps with
 * chainrules-mpi (run with 2 ranks by `make demo`: mpiexec -n 2 example_08_mpi_heat).
 *
 *     u_t = u_xx on (0, 1), u = 0 at both ends,   explicit Euler, c = dt / dx^2 = 0.25
 *     u_i <- u_i + c (u_{i-1} - 2 u_i + u_{i+1})
 *
 * Each rank holds NX / p points and two ghost cells, filled at every step by a halo
 * exchange (cr_mpi_sendrecv to the left and to the right; MPI_PROC_NULL at the ends). The
 * objective is J = sum_i w_i u_i(T)^2 (cr_mpi_allreduce of the ranks' parts), and its
 * gradient with respect to the initial state u(0) is computed twice:
 *
 *  1. with the whole time loop on the tape (every step's records kept);
 *  2. with binomial checkpointing (revolve.h, 20 snapshots): the schedule stores a few
 *     states, runs the primal forward again without recording (plain MPI_Sendrecv), and
 *     records one step at a time, whose reverse sweep performs that step's adjoint halo
 *     exchange. Every rank follows the same schedule, so the exchanges match.
 *
 * Both are compared with the gradient of the same loop on one rank (the whole grid on one
 * tape, no communication).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <chainrules.h>
#include <chainrules/mpi.h>

#define NX    64
#define STEPS 1000
#define SNAPS 20
#define C     0.25
#define CR_PI 3.14159265358979323846

static int g_rank, g_p, g_n, g_lo; /* this rank's points: [g_lo, g_lo + g_n) */
static MPI_Comm g_comm;

static double u_init(int i)
{
    double x = (i + 1.0) / (NX + 1.0);
    return sin(CR_PI * x) + 0.5 * sin(3 * CR_PI * x) * x;
}

static double w_obj(int i)
{
    return 1.0 + 0.5 * cos(0.3 * i);
}

/* One step on scalar variables: u (n) -> v (n), with the neighbours' ghost values. */
static void step_vars(cr_tape *t, const cr_var *u, cr_var left, cr_var right, cr_var *v, int n)
{
    for (int i = 0; i < n; i++) {
        cr_var a = i > 0 ? u[i - 1] : left, b = i < n - 1 ? u[i + 1] : right;
        cr_var lap = cr_sub(t, cr_add(t, a, b), cr_mul(t, cr_const(2.0), u[i]));
        v[i] = cr_add(t, u[i], cr_mul(t, cr_const(C), lap));
    }
}

/* The halo exchange on the tape: ghosts (left, right) from the neighbours. */
static void halo_tape(cr_tape *t, const cr_var *u, cr_var *left, cr_var *right)
{
    int l = g_rank > 0 ? g_rank - 1 : MPI_PROC_NULL;
    int r = g_rank < g_p - 1 ? g_rank + 1 : MPI_PROC_NULL;
    *left = *right = cr_const(0.0); /* the boundary: MPI_PROC_NULL leaves them */
    /* send my last point right, receive my left ghost from the left; then the other way */
    cr_mpi_sendrecv(t, cr_mpi_in_vars(&u[g_n - 1], 1), r, 1, cr_mpi_out_vars(left, 1), l, 1, g_comm,
                    MPI_STATUS_IGNORE);
    cr_mpi_sendrecv(t, cr_mpi_in_vars(&u[0], 1), l, 2, cr_mpi_out_vars(right, 1), r, 2, g_comm,
                    MPI_STATUS_IGNORE);
}

/* The plain primal step (no tape), for the checkpointing schedule's ADVANCE. */
static void step_plain(double *u)
{
    int l = g_rank > 0 ? g_rank - 1 : MPI_PROC_NULL;
    int r = g_rank < g_p - 1 ? g_rank + 1 : MPI_PROC_NULL;
    double left = 0.0, right = 0.0, v[NX];
    MPI_Sendrecv(&u[g_n - 1], 1, MPI_DOUBLE, r, 1, &left, 1, MPI_DOUBLE, l, 1, g_comm,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(&u[0], 1, MPI_DOUBLE, l, 2, &right, 1, MPI_DOUBLE, r, 2, g_comm,
                 MPI_STATUS_IGNORE);
    for (int i = 0; i < g_n; i++) {
        double a = i > 0 ? u[i - 1] : left, b = i < g_n - 1 ? u[i + 1] : right;
        v[i] = u[i] + C * (a + b - 2 * u[i]);
    }
    memcpy(u, v, (size_t)g_n * sizeof *u);
}

/* J's part on this rank, summed over the ranks and made the one objective. */
static cr_var objective(cr_tape *t, const cr_var *u)
{
    cr_var s = cr_const(0.0), tot;
    for (int i = 0; i < g_n; i++)
        s = cr_add(t, s, cr_mul(t, cr_const(w_obj(g_lo + i)), cr_mul(t, u[i], u[i])));
    cr_mpi_allreduce(t, cr_mpi_in_vars(&s, 1), cr_mpi_out_vars(&tot, 1), MPI_SUM, NULL, g_comm);
    return cr_mpi_objective(t, tot, 0, g_comm);
}

/* 1. The whole loop on one tape. */
static cr_status full_tape(cr_ctx *ctx, double *J, double *g)
{
    cr_tape *t;
    cr_status st = cr_tape_new(ctx, NULL, &t);
    if (st != CR_OK)
        return st;
    double u0[NX];
    cr_var *x = malloc(sizeof(cr_var) * 3 * NX);
    if (x == NULL) {
        cr_tape_free(t);
        return CR_ENOMEM;
    }
    cr_var *u = x + NX, *v = x + 2 * NX;
    for (int i = 0; i < g_n; i++)
        u0[i] = u_init(g_lo + i);
    cr_tape_inputs(t, u0, (size_t)g_n, x);
    memcpy(u, x, (size_t)g_n * sizeof *u);
    for (int k = 0; k < STEPS; k++) {
        cr_var left, right;
        halo_tape(t, u, &left, &right);
        step_vars(t, u, left, right, v, g_n);
        memcpy(u, v, (size_t)g_n * sizeof *u);
    }
    cr_var f = objective(t, u);
    *J = f.v;
    st = cr_mpi_agree(t, g_comm);
    if (st == CR_OK)
        st = cr_tape_gradient(t, f, x, (size_t)g_n, g);
    if (st != CR_OK && g_rank == 0)
        fprintf(stderr, "%s\n", cr_tape_errmsg(t));
    free(x);
    cr_tape_free(t);
    return st;
}

/* 2. Binomial checkpointing: one step recorded at a time. */
static cr_status checkpointed(cr_ctx *ctx, double *J, double *g)
{
    cr_tape *t;
    cr_status st = cr_tape_new(ctx, NULL, &t);
    if (st != CR_OK)
        return st;
    double(*slot)[NX] = malloc(sizeof(double[NX]) * SNAPS);
    double u[NX], lam[NX];
    if (slot == NULL) {
        cr_tape_free(t);
        return CR_ENOMEM;
    }
    for (int i = 0; i < g_n; i++)
        u[i] = u_init(g_lo + i);
    /* The primal to the end, then the objective's gradient with respect to u(T). */
    double uT[NX];
    memcpy(uT, u, sizeof uT);
    for (int k = 0; k < STEPS; k++)
        step_plain(uT);
    {
        cr_var xs[NX];
        cr_tape_inputs(t, uT, (size_t)g_n, xs);
        cr_var f = objective(t, xs);
        *J = f.v;
        st = cr_mpi_agree(t, g_comm);
        if (st == CR_OK)
            st = cr_tape_gradient(t, f, xs, (size_t)g_n, lam);
    }
    cr_revolve rv;
    if (st == CR_OK)
        st = cr_revolve_init(&rv, STEPS, SNAPS);
    long forward = 0, recorded = 0;
    while (st == CR_OK) {
        cr_revolve_op op;
        cr_revolve_action a = cr_revolve_next(&rv, &op);
        if (a == CR_REVOLVE_STORE) {
            memcpy(slot[op.slot], u, sizeof u);
        } else if (a == CR_REVOLVE_RESTORE) {
            memcpy(u, slot[op.slot], sizeof u);
        } else if (a == CR_REVOLVE_ADVANCE) {
            for (int64_t k = op.step; k < op.end; k++, forward++)
                step_plain(u);
        } else if (a == CR_REVOLVE_REVERSE) {
            /* record step op.step from u, then pull lam back through it */
            cr_tape_reset(t);
            cr_var xs[NX], v[NX], left, right;
            cr_tape_inputs(t, u, (size_t)g_n, xs);
            halo_tape(t, xs, &left, &right);
            step_vars(t, xs, left, right, v, g_n);
            double nl[NX];
            st = cr_mpi_agree(t, g_comm);
            if (st == CR_OK)
                st = cr_tape_vjp(t, v, lam, (size_t)g_n, xs, (size_t)g_n, nl);
            memcpy(lam, nl, sizeof nl);
            recorded++;
        } else if (a == CR_REVOLVE_DONE) {
            break;
        } else {
            st = cr_revolve_status(&rv);
        }
    }
    if (st == CR_OK && g_rank == 0)
        printf("  checkpointing: %d snapshots, %ld steps run again, %ld steps recorded "
               "(one at a time)\n",
               SNAPS, forward, recorded);
    memcpy(g, lam, (size_t)g_n * sizeof *g);
    free(slot);
    cr_tape_free(t);
    return st;
}

/* The reference: the whole grid on one tape, on this process alone. */
static cr_status serial(cr_ctx *ctx, double *J, double *g)
{
    cr_tape *t;
    cr_status st = cr_tape_new(ctx, NULL, &t);
    if (st != CR_OK)
        return st;
    double u0[NX];
    cr_var x[NX], u[NX], v[NX];
    for (int i = 0; i < NX; i++)
        u0[i] = u_init(i);
    cr_tape_inputs(t, u0, NX, x);
    memcpy(u, x, sizeof u);
    for (int k = 0; k < STEPS; k++) {
        step_vars(t, u, cr_const(0.0), cr_const(0.0), v, NX);
        memcpy(u, v, sizeof u);
    }
    cr_var s = cr_const(0.0);
    for (int i = 0; i < NX; i++)
        s = cr_add(t, s, cr_mul(t, cr_const(w_obj(i)), cr_mul(t, u[i], u[i])));
    *J = s.v;
    st = cr_tape_gradient(t, s, x, NX, g);
    cr_tape_free(t);
    return st;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    g_comm = MPI_COMM_WORLD;
    MPI_Comm_set_errhandler(g_comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(g_comm, &g_rank);
    MPI_Comm_size(g_comm, &g_p);
    if (NX % g_p != 0) {
        if (g_rank == 0)
            fprintf(stderr, "the number of ranks must divide %d\n", NX);
        MPI_Finalize();
        return 1;
    }
    g_n = NX / g_p;
    g_lo = g_rank * g_n;
    cr_ctx *ctx;
    if (cr_ctx_new(NULL, &ctx) != CR_OK)
        MPI_Abort(g_comm, 1);
    if (g_rank == 0)
        printf("heat equation: %d points on %d ranks, %d steps\n", NX, g_p, STEPS);
    double J1 = 0.0, J2 = 0.0, Js = 0.0, g1[NX] = {0}, g2[NX] = {0}, gs[NX] = {0}, all1[NX],
           all2[NX];
    int bad = full_tape(ctx, &J1, g1) != CR_OK;
    bad |= checkpointed(ctx, &J2, g2) != CR_OK;
    bad |= serial(ctx, &Js, gs) != CR_OK;
    MPI_Allgather(g1, g_n, MPI_DOUBLE, all1, g_n, MPI_DOUBLE, g_comm);
    MPI_Allgather(g2, g_n, MPI_DOUBLE, all2, g_n, MPI_DOUBLE, g_comm);
    double e1 = 0.0, e2 = 0.0, gmax = 0.0;
    for (int i = 0; i < NX; i++) {
        e1 = fmax(e1, fabs(all1[i] - gs[i]));
        e2 = fmax(e2, fabs(all2[i] - gs[i]));
        gmax = fmax(gmax, fabs(gs[i]));
    }
    bad |= !(e1 <= 1e-12 * gmax) || !(e2 <= 1e-12 * gmax) || !(fabs(J1 - Js) <= 1e-12 * Js) ||
           !(fabs(J2 - Js) <= 1e-12 * Js);
    if (g_rank == 0) {
        printf("  J = %.15g (one rank: %.15g)\n", J1, Js);
        printf("  dJ/du(0), whole loop on the tape: max |difference| %.2e (max |dJ/du0| %.3g)\n",
               e1, gmax);
        printf("  dJ/du(0), checkpointed: max |difference| %.2e\n", e2);
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, g_comm);
    if (g_rank == 0)
        printf("%s\n", any ? "MISMATCH" : "both gradients equal the single-rank gradient");
    cr_ctx_free(ctx);
    MPI_Finalize();
    return any ? 1 : 0;
}
