/*
 * Operations with their own steps (cr_tape_op_record): a linear map recorded as one
 * operation gives the gradient and the Jacobian-vector product of the same map written with
 * the tape's arithmetic (an independent path through the rows) and of central differences;
 * the reverse steps run in every sweep, in reverse record order, whatever the cotangents
 * (an operation with no result too), the forward steps in record order; bad arguments,
 * second-order tapes, prepared gradients and failing steps give clear statuses.
 */
#include "test_util.h"

#include <chainrules/testing_cmocka.h>

/* The map: inputs a and B = (B0, B1) (scalars); outputs c (scalar) and D (array of 3),
 *   c = 2 a - B0 + 0.5 B1,   D = (a + B1, 3 B0, -a).  M is its matrix, rows c, D0, D1, D2. */
static const double M[4][3] = {{2, -1, 0.5}, {1, 0, 1}, {0, 3, 0}, {-1, 0, 0}};

static int g_rev_calls, g_fwd_calls;

static cr_status lin_rev(cr_tape *t, void *env, const double *ybar, double *xbar)
{
    (void)t;
    (void)env;
    g_rev_calls++;
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < 4; i++)
            xbar[j] += M[i][j] * ybar[i];
    return CR_OK;
}

static cr_status lin_fwd(cr_tape *t, void *env, const double *xdot, double *ydot)
{
    (void)t;
    (void)env;
    g_fwd_calls++;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            ydot[i] += M[i][j] * xdot[j];
    return CR_OK;
}

static const cr_tape_op lin_op = {"lin", lin_rev, lin_fwd};

/* f(x) = c sin(c) + sum_k w_k cos(D_k) after a = x0^2, B = (x1 x2, exp(x2)). */
static const double W[3] = {0.7, -1.3, 0.4};

typedef struct rec {
    double wbuf[3];
    cr_array wa;
    bool with_op; /* false: the map written with the tape's arithmetic */
} rec;

static cr_status f_on_tape(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    rec *r = env;
    cr_var a = cr_mul(t, x[0], x[0]);
    cr_var b0 = cr_mul(t, x[1], x[2]), b1 = cr_exp(t, x[2]);
    cr_var c, d[3];
    if (r->with_op) {
        /* c, D from a, B with the operation; D an array result */
        cr_targ in[3] = {cr_targ_var(a), cr_targ_var(b0), cr_targ_var(b1)};
        double dv[3] = {a.v + b1.v, 3 * b0.v, -a.v};
        double *dbuf = cr_arena_alloc(cr_tape_arena(t), sizeof dv, _Alignof(double));
        cr_array *da = cr_arena_alloc(cr_tape_arena(t), sizeof *da, _Alignof(cr_array));
        if (dbuf == NULL || da == NULL)
            return CR_ENOMEM;
        memcpy(dbuf, dv, sizeof dv);
        *da = cr_array_vector(dbuf, 3);
        cr_targ vals[2] = {cr_targ_var(cr_const(2 * a.v - b0.v + 0.5 * b1.v)),
                           cr_targ_arr(cr_av_const(da))};
        cr_targ out[2];
        cr_status st = cr_tape_op_record(t, &lin_op, NULL, in, 3, vals, out, 2);
        if (st != CR_OK)
            return st;
        c = out[0].u.s;
        r->wa = cr_array_vector(r->wbuf, 3);
        memcpy(r->wbuf, W, sizeof W);
        cr_avar cosd = cr_av_broadcast1(t, &cr_fn_cos, cr_targ_arr(out[1].u.a));
        cr_var s = cr_av_dot(t, cosd, cr_av_const(&r->wa));
        y[0] = cr_add(t, cr_mul(t, c, cr_sin(t, c)), s);
        return cr_tape_status(t);
    }
    c = cr_add(t, cr_sub(t, cr_mul(t, cr_const(2), a), b0), cr_mul(t, cr_const(0.5), b1));
    d[0] = cr_add(t, a, b1);
    d[1] = cr_mul(t, cr_const(3), b0);
    d[2] = cr_neg(t, a);
    cr_var s = cr_const(0);
    for (int k = 0; k < 3; k++)
        s = cr_add(t, s, cr_mul(t, cr_const(W[k]), cr_cos(t, d[k])));
    y[0] = cr_add(t, cr_mul(t, c, cr_sin(t, c)), s);
    return cr_tape_status(t);
}

static void test_gradient_and_jvp(void **state)
{
    fixture *f = *state;
    const double x0[3] = {0.8, -0.6, 0.3}, v[3] = {0.5, 1.0, -2.0};
    double g_op[3], g_ref[3], jd_op, jd_ref;
    for (int pass = 0; pass < 2; pass++) {
        cr_tape_params prm = {0};
        prm.flags = CR_TAPE_FORWARD;
        cr_tape *t;
        assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
        rec r;
        memset(&r, 0, sizeof r);
        r.with_op = pass == 0;
        cr_var xs[3], y;
        assert_int_equal(cr_tape_record(t, f_on_tape, &r, x0, 3, xs, &y, 1), CR_OK);
        g_rev_calls = g_fwd_calls = 0;
        assert_int_equal(cr_tape_gradient(t, y, xs, 3, pass == 0 ? g_op : g_ref), CR_OK);
        assert_int_equal(cr_tape_jvp(t, xs, v, 3, &y, 1, pass == 0 ? &jd_op : &jd_ref), CR_OK);
        if (pass == 0) {
            assert_int_equal(g_rev_calls, 1);
            assert_int_equal(g_fwd_calls, 1);
        }
        cr_tape_free(t);
    }
    for (int j = 0; j < 3; j++)
        ASSERT_CLOSE(g_op[j], g_ref[j], 1e-14);
    ASSERT_CLOSE(jd_op, jd_ref, 1e-14);
    /* and central differences of the function itself */
    for (int j = 0; j < 3; j++) {
        double h = 1e-6, xp[3], xm[3], yp, ym;
        memcpy(xp, x0, sizeof xp);
        memcpy(xm, x0, sizeof xm);
        xp[j] += h;
        xm[j] -= h;
        rec r;
        memset(&r, 0, sizeof r);
        r.with_op = true;
        cr_tape *t;
        cr_var xs[3], y;
        assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
        assert_int_equal(cr_tape_record(t, f_on_tape, &r, xp, 3, xs, &y, 1), CR_OK);
        yp = y.v;
        assert_int_equal(cr_tape_record(t, f_on_tape, &r, xm, 3, xs, &y, 1), CR_OK);
        ym = y.v;
        cr_tape_free(t);
        ASSERT_CLOSE((yp - ym) / (2 * h), g_op[j], 1e-7);
    }
}

/* Operations with no result, logged: each sweep runs their steps, in order. */
static char g_log[64];

static cr_status log_rev(cr_tape *t, void *env, const double *ybar, double *xbar)
{
    (void)t;
    (void)ybar;
    xbar[0] = 0.0;
    strncat(g_log, (const char *)env, sizeof g_log - strlen(g_log) - 1);
    return CR_OK;
}

static cr_status log_fwd(cr_tape *t, void *env, const double *xdot, double *ydot)
{
    (void)t;
    (void)xdot;
    (void)ydot;
    strncat(g_log, (const char *)env, sizeof g_log - strlen(g_log) - 1);
    return CR_OK;
}

static const cr_tape_op log_op = {"log", log_rev, log_fwd};

static void test_order_and_zero_cotangents(void **state)
{
    fixture *f = *state;
    cr_tape_params prm = {0};
    prm.flags = CR_TAPE_FORWARD;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    cr_var x = cr_tape_input(t, 2.0);
    cr_var w = cr_sin(t, x);
    static char names[3][2] = {"A", "B", "C"};
    for (int k = 0; k < 3; k++) {
        cr_targ in = cr_targ_var(w);
        /* one input or none, no output: nothing flows back, the step runs all the same */
        assert_int_equal(
            cr_tape_op_record(t, &log_op, names[k], &in, k == 1 ? 0 : 1, NULL, NULL, 0), CR_OK);
    }
    cr_var y = cr_mul(t, w, x);
    double g, yd, one = 1.0;
    g_log[0] = '\0';
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    assert_string_equal(g_log, "CBA");
    ASSERT_CLOSE(g, cos(2.0) * 2.0 + sin(2.0), 1e-15);
    g_log[0] = '\0';
    assert_int_equal(cr_tape_jvp(t, &x, &one, 1, &y, 1, &yd), CR_OK);
    assert_string_equal(g_log, "ABC");
    ASSERT_CLOSE(yd, g, 1e-15);
    /* a sweep seeded at the last variable before them runs them; one seeded earlier not */
    g_log[0] = '\0';
    assert_int_equal(cr_tape_gradient(t, w, &x, 1, &g), CR_OK);
    assert_string_equal(g_log, "CBA");
    g_log[0] = '\0';
    assert_int_equal(cr_tape_gradient(t, x, &x, 1, &g), CR_OK);
    assert_string_equal(g_log, "");
    cr_tape_free(t);
}

static cr_status bad_rev(cr_tape *t, void *env, const double *ybar, double *xbar)
{
    (void)env;
    (void)ybar;
    (void)xbar;
    return cr_tape_op_fail(t, CR_EDOMAIN, "bad: the partner went away");
}

static const cr_tape_op bad_op = {"bad", bad_rev, NULL};

static void test_errors(void **state)
{
    fixture *f = *state;
    cr_tape *t;
    cr_var xs[1];
    cr_targ in, val, out;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    /* NULL reverse step */
    static const cr_tape_op none = {"none", NULL, NULL};
    xs[0] = cr_tape_input(t, 1.0);
    in = cr_targ_var(xs[0]);
    assert_int_equal(cr_tape_op_record(t, &none, NULL, &in, 1, NULL, NULL, 0), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "NULL operation, reverse step");
    cr_tape_reset(t);
    /* a constant value as an input */
    xs[0] = cr_tape_input(t, 1.0);
    in = cr_targ_value(cr_value_f64(1.0));
    assert_int_equal(cr_tape_op_record(t, &lin_op, NULL, &in, 1, NULL, NULL, 0), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "lin: input 0 is neither a scalar nor an array");
    cr_tape_reset(t);
    /* an f32 array */
    float fb[2] = {1, 2};
    cr_array fa = cr_array_vector(NULL, 2);
    fa.data = fb;
    fa.dtype = CR_DT_F32;
    in = cr_targ_arr(cr_av_const(&fa));
    assert_int_equal(cr_tape_op_record(t, &lin_op, NULL, &in, 1, NULL, NULL, 0), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "lin: input 0 is not a dense f64 array");
    cr_tape_reset(t);
    /* a variable of an earlier recording */
    cr_var old = cr_tape_input(t, 1.0);
    cr_tape_reset(t);
    in = cr_targ_var(old);
    assert_int_equal(cr_tape_op_record(t, &lin_op, NULL, &in, 1, NULL, NULL, 0), CR_ETAPE);
    cr_tape_reset(t);
    /* a failing reverse step fails the sweep, naming the operation */
    xs[0] = cr_tape_input(t, 1.0);
    in = cr_targ_var(xs[0]);
    val = cr_targ_var(cr_const(1.0));
    assert_int_equal(cr_tape_op_record(t, &bad_op, NULL, &in, 1, &val, &out, 1), CR_OK);
    double g;
    assert_int_equal(cr_tape_gradient(t, out.u.s, xs, 1, &g), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "the partner went away");
    cr_tape_free(t);
    /* no forward step: a forward sweep says which operation lacks it */
    cr_tape_params prm = {0};
    prm.flags = CR_TAPE_FORWARD;
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    xs[0] = cr_tape_input(t, 1.0);
    in = cr_targ_var(xs[0]);
    assert_int_equal(cr_tape_op_record(t, &bad_op, NULL, &in, 1, &val, &out, 1), CR_OK);
    double one = 1.0, yd;
    assert_int_equal(cr_tape_jvp(t, xs, &one, 1, &out.u.s, 1, &yd), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "bad: no forward step");
    cr_tape_free(t);
    /* second-order tapes refuse the record */
    prm.flags = CR_TAPE_SECOND_ORDER;
    assert_int_equal(cr_tape_new(f->ctx, &prm, &t), CR_OK);
    xs[0] = cr_tape_input(t, 1.0);
    in = cr_targ_var(xs[0]);
    assert_int_equal(cr_tape_op_record(t, &lin_op, NULL, &in, 1, NULL, NULL, 0), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "lin: an operation with its own steps is not recorded");
    cr_tape_free(t);
}

static cr_status with_op(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_targ in = cr_targ_var(x[0]), val = cr_targ_var(cr_const(x[0].v)), out;
    cr_status st = cr_tape_op_record(t, &log_op, (void *)"P", &in, 1, &val, &out, 1);
    y[0] = out.u.s;
    return st;
}

static void test_prepared_refuses(void **state)
{
    fixture *f = *state;
    cr_prepared *p = NULL;
    double x = 1.0;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, with_op, NULL, &x, 1, &p), CR_EUNIMPL);
    assert_null(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gradient_and_jvp, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_order_and_zero_cotangents, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_prepared_refuses, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
