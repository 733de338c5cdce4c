/*
 * Every operation of chainrules-mpi, on scalar and on array variables, under a real
 * launcher (mpirun -np 1..4): the gradient of a distributed objective
 *
 *     J(x_0, ..., x_{p-1}) = sum_r sum_i w(r, i) cos(y_r,i),   u_r = x_r .* x_r + sin(x_r),
 *                            y = the operation applied to (u_0, ..., u_{p-1})
 *
 * (summed over the ranks with cr_mpi_allreduce) on each rank equals the gradient of the
 * same objective computed serially on one tape (every rank's data on one process, the data
 * movement written out), and central differences of the distributed objective; the
 * Jacobian-vector product of a forward sweep (tangents communicated) equals the serial
 * gradient's inner product with the direction.
 */
#include "mpi_ops.h"

static cr_ctx *g_ctx;
static int g_rank, g_p;
static size_t g_L;

/* Storage the array variables borrow until the tape is reset. */
static double g_xbuf[MAXL], g_wbuf[MAXY];
static cr_array g_xa, g_wa;

/* The distributed objective at this rank's x, recorded on t. */
static cr_status dist_J(cr_tape *t, int op, int mode, const double *x, cr_var *xs, cr_avar *X,
                        cr_var *J)
{
    size_t L = g_L;
    vec *u = calloc(2, sizeof *u);
    if (u == NULL)
        return CR_ENOMEM;
    vec *y = u + 1;
    u->mode = mode;
    u->n = L;
    if (mode == M_SCALAR) {
        cr_tape_inputs(t, x, L, xs);
        for (size_t i = 0; i < L; i++)
            u->s[i] = pre1(t, xs[i]);
    } else {
        memcpy(g_xbuf, x, L * sizeof *x);
        g_xa = cr_array_vector(g_xbuf, L);
        *X = cr_tape_array_input(t, &g_xa);
        cr_avar sq = cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(*X), cr_targ_arr(*X));
        cr_avar sn = cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(*X));
        u->a = cr_av_broadcast2(t, &cr_fn_add, cr_targ_arr(sq), cr_targ_arr(sn));
    }
    cr_status st = dist_op(t, op, u, y, MPI_COMM_WORLD);
    cr_var local = cr_const(0.0);
    if (y->n > 0) {
        if (y->mode == M_SCALAR) {
            local = post1(t, g_rank, y->s, y->n);
        } else {
            for (size_t i = 0; i < y->n; i++)
                g_wbuf[i] = weight(g_rank, i);
            g_wa = cr_array_vector(g_wbuf, y->n);
            cr_avar c = cr_av_broadcast1(t, &cr_fn_cos, cr_targ_arr(y->a));
            local = cr_av_dot(t, c, cr_av_const(&g_wa));
        }
    }
    cr_status s2 = cr_mpi_allreduce(t, cr_mpi_in_vars(&local, 1), cr_mpi_out_vars(J, 1), MPI_SUM,
                                    NULL, MPI_COMM_WORLD);
    *J = cr_mpi_objective(t, *J, 0, MPI_COMM_WORLD);
    free(u);
    return st != CR_OK ? st : s2;
}

static double serial_J(int op, const double *xall, double *g)
{
    return serial_objective(g_ctx, op, g_p, g_L, xall, g);
}

/* The distributed objective's value at this rank's x (recorded, not swept). */
static double dist_value(int op, int mode, const double *x)
{
    cr_tape *t;
    cr_var xs[MAXL], J;
    cr_avar X;
    if (cr_tape_new(g_ctx, NULL, &t) != CR_OK)
        return NAN;
    cr_status st = dist_J(t, op, mode, x, xs, &X, &J);
    cr_status sa = cr_mpi_agree(t, MPI_COMM_WORLD);
    double v = st == CR_OK && sa == CR_OK ? J.v : (double)NAN;
    cr_tape_free(t);
    return v;
}

static void test_op(int op, int mode)
{
    const char *mname = mode == M_SCALAR ? "scalar" : "array";
    size_t L = g_L, N = (size_t)g_p * L;
    double xall[MAXP * MAXL], gser[MAXP * MAXL], x[MAXL], g[MAXL];
    for (int r = 0; r < g_p; r++)
        for (size_t i = 0; i < L; i++)
            xall[(size_t)r * L + i] = input_value(r, i, L);
    /* products: rank 1's element 1 is zero (u = x x + sin x at x = 0), whose derivative is
     * the others' product and makes every other rank's zero (no division) */
    if ((op == OP_REDUCE_PROD || op == OP_ALLREDUCE_PROD) && g_p >= 2)
        xall[L + 1] = 0.0;
    memcpy(x, xall + (size_t)g_rank * L, L * sizeof *x);
    double Js = serial_J(op, xall, gser);
    CHECK(Js == Js, "%s (%s): serial objective failed", op_names[op], mname);

    /* Reverse mode. */
    cr_tape *t;
    cr_tape_params prm;
    memset(&prm, 0, sizeof prm);
    prm.flags = CR_TAPE_FORWARD;
    if (cr_tape_new(g_ctx, &prm, &t) != CR_OK) {
        CHECK(0, "no tape");
        return;
    }
    cr_var xs[MAXL], J;
    cr_avar X;
    cr_status st = dist_J(t, op, mode, x, xs, &X, &J);
    CHECK(st == CR_OK, "%s (%s): recording failed: %s", op_names[op], mname, cr_tape_errmsg(t));
    st = cr_mpi_agree(t, MPI_COMM_WORLD);
    CHECK(st == CR_OK, "%s (%s): agreement failed: %s", op_names[op], mname, cr_tape_errmsg(t));
    if (st != CR_OK) {
        cr_tape_free(t);
        return;
    }
    CHECK(close_to(J.v, Js, 1e-13, 1e-13), "%s (%s): J = %.17g, serial %.17g", op_names[op], mname,
          J.v, Js);
    if (mode == M_SCALAR) {
        st = cr_tape_gradient(t, J, xs, L, g);
    } else {
        cr_array ga = cr_array_vector(g, L), *gp = &ga;
        st = cr_tape_gradient_arrays(t, J, NULL, 0, NULL, &X, 1, &gp);
    }
    CHECK(st == CR_OK, "%s (%s): gradient failed: %s", op_names[op], mname, cr_tape_errmsg(t));
    for (size_t i = 0; i < L && st == CR_OK; i++)
        CHECK(close_to(g[i], gser[(size_t)g_rank * L + i], 1e-12, 1e-13),
              "%s (%s): dJ/dx[%d][%zu] = %.17g, serial %.17g", op_names[op], mname, g_rank, i, g[i],
              gser[(size_t)g_rank * L + i]);

    /* Forward mode: J̇ along v (every rank's v known everywhere). */
    double v[MAXP * MAXL], expect = 0.0, jd = NAN;
    for (size_t k = 0; k < N; k++) {
        v[k] = cos(1.0 + 0.37 * (double)k);
        expect += gser[k] * v[k];
    }
    if (mode == M_SCALAR) {
        st = cr_tape_jvp(t, xs, v + (size_t)g_rank * L, L, &J, 1, &jd);
    } else {
        cr_array va = cr_array_vector(v + (size_t)g_rank * L, L);
        const cr_array *vp = &va;
        st = cr_tape_ajvp(t, NULL, NULL, 0, &X, &vp, 1, &J, 1, &jd, NULL, 0, NULL);
    }
    CHECK(st == CR_OK, "%s (%s): jvp failed: %s", op_names[op], mname, cr_tape_errmsg(t));
    CHECK(close_to(jd, expect, 1e-12, 1e-13), "%s (%s): jvp %.17g, serial %.17g", op_names[op],
          mname, jd, expect);
    cr_tape_free(t);

    /* Central differences of the distributed objective along a few coordinates of each
     * rank (every rank takes part in every evaluation). */
    size_t picks[3] = {0, L / 2, L - 1};
    for (int q = 0; q < g_p; q++)
        for (int k = 0; k < 3; k++) {
            size_t i = picks[k];
            double h = 1e-6, xp[MAXL];
            memcpy(xp, x, L * sizeof *x);
            if (g_rank == q)
                xp[i] = x[i] + h;
            double jp = dist_value(op, mode, xp);
            if (g_rank == q)
                xp[i] = x[i] - h;
            double jm = dist_value(op, mode, xp);
            double fd = (jp - jm) / (2 * h), want = gser[(size_t)q * L + i];
            CHECK(close_to(fd, want, 1e-6, 1e-7),
                  "%s (%s): central difference along x[%d][%zu] = %.12g, gradient %.12g",
                  op_names[op], mname, q, i, fd, want);
        }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_p);
    if (g_p > MAXP) {
        if (g_rank == 0)
            fprintf(stderr, "at most %d ranks\n", MAXP);
        MPI_Finalize();
        return 1;
    }
    g_L = (size_t)NPER * (size_t)(g_p + 1);
    if (cr_ctx_new(NULL, &g_ctx) != CR_OK) {
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    for (int op = 0; op < OP_COUNT; op++)
        for (int mode = M_SCALAR; mode <= M_ARRAY; mode++)
            test_op(op, mode);
    int fails = 0, checks = 0;
    MPI_Allreduce(&g_fail, &fails, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g_checks, &checks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("test_mpi_ops on %d ranks: %d operations, scalar and array variables: %d checks, "
               "%d failed\n",
               g_p, OP_COUNT, checks, fails);
    cr_ctx_free(g_ctx);
    MPI_Finalize();
    return fails == 0 ? 0 : 1;
}
