/*
 * Broadcasts, maps, sums and dot products of f64 arrays on the tape, which the engine records as
 * fused kernels (an arithmetic function by its own loops, any other scalar-table function by
 * its row's): gradients against central differences of the recorded value, J v on forward
 * tapes and H v on second-order tapes against central differences, prepared replays at new
 * inputs, results of several dimensions keeping their shape, scalar and constant arguments,
 * an array read twice, strided and empty arrays, the primal bit for bit against the
 * broadcast rule's own, and a user registry's rule for broadcast, map, sum or dot taking the call
 * instead.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_prob.h"

#include "test_alloc.h"
#include <chainrules/rules_special.h>

/* Central differences (four points) of the recorded value along each coordinate. */
static void fd_grad(cr_ctx *ctx, const prob *p, const double *z, double *g)
{
    size_t L = flat_len(p);
    double zz[MAXZ];
    for (size_t i = 0; i < L; i++) {
        double h = 1e-4 * fmax(1.0, fabs(z[i])), f[4];
        static const double steps[4] = {-2, -1, 1, 2};
        for (int q = 0; q < 4; q++) {
            memcpy(zz, z, L * sizeof *z);
            zz[i] += steps[q] * h;
            f[q] = value_at(ctx, p, zz);
        }
        g[i] = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h);
    }
}

/* Gradient (first-order tape), J v (forward tape) and H v (second-order tape) of p at z. */
static void check_all(cr_ctx *ctx, const prob *p, double *z)
{
    size_t L = flat_len(p);
    double got[MAXZ], want[MAXZ];
    grad_at(ctx, p, z, got);
    fd_grad(ctx, p, z, want);
    for (size_t i = 0; i < L; i++)
        ASSERT_CLOSE(got[i], want[i], 1e-7);
    check_jvp(ctx, p, z, 1e-7, 2);
    check_hvp_dirs(ctx, p, z, 1e-6, 2);
}

/* ---- Programs ----------------------------------------------------------------------------- */

static cr_avar bc1(cr_tape *t, const cr_value *f, cr_avar x)
{
    return cr_av_broadcast1(t, f, cr_targ_arr(x));
}

static cr_avar bc2(cr_tape *t, const cr_value *f, cr_targ x, cr_targ y)
{
    return cr_av_broadcast2(t, f, x, y);
}

/* One-argument rows (sin, exp, log, tanh, erf, sqrt, cbrt) and the arithmetic kernels. */
static cr_var prog_unary(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar a = bc2(t, &cr_fn_mul, cr_targ_arr(bc1(t, &cr_fn_sin, X[0])),
                    cr_targ_arr(bc1(t, &cr_fn_exp, X[0])));
    cr_avar b = bc2(t, &cr_fn_add, cr_targ_arr(bc1(t, &cr_fn_log, X[0])),
                    cr_targ_arr(bc1(t, &cr_fn_tanh, X[0])));
    cr_avar c = bc2(t, &cr_fn_div, cr_targ_arr(bc1(t, &cr_fn_erf, X[0])),
                    cr_targ_arr(bc1(t, &cr_fn_sqrt, X[0])));
    cr_avar d = bc1(t, &cr_fn_neg, bc1(t, &cr_fn_cbrt, bc1(t, &cr_fn_square, X[0])));
    cr_avar ab = bc2(t, &cr_fn_sub, cr_targ_arr(a), cr_targ_arr(b));
    return cr_add(t, cr_av_sum(t, bc2(t, &cr_fn_mul, cr_targ_arr(ab), cr_targ_arr(c))),
                  cr_av_sum(t, d));
}

/* Two-argument rows with both arguments variable (their cross second derivatives), on
 * matrices: the results keep the 2x3 shape, which the matrix product after them needs. */
static cr_var prog_binary(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_avar p = bc2(t, &cr_fn_pow, cr_targ_arr(X[0]), cr_targ_arr(X[1]));
    cr_avar a = bc2(t, &cr_fn_atan2, cr_targ_arr(X[0]), cr_targ_arr(X[1]));
    cr_avar h = bc2(t, &cr_fn_hypot, cr_targ_arr(X[1]), cr_targ_arr(X[0]));
    cr_avar ph = bc2(t, &cr_fn_mul, cr_targ_arr(p), cr_targ_arr(h));
    assert_int_equal(ph.a->ndim, 2);
    assert_int_equal(ph.a->shape[0], 2);
    assert_int_equal(ph.a->shape[1], 3);
    /* (2x3) (3x2): a 2x2 product, then its sum */
    static double b[6] = {1.0, -0.5, 0.25, 2.0, -1.5, 0.75};
    static cr_array B;
    B = cr_array_matrix(b, 3, 2);
    cr_avar at = bc2(t, &cr_fn_add, cr_targ_arr(a), cr_targ_var(cr_const(0.5)));
    cr_avar m =
        cr_av_matmul(t, bc2(t, &cr_fn_add, cr_targ_arr(ph), cr_targ_arr(at)), cr_av_const(&B));
    return cr_av_sum(t, m);
}

/* Scalar variables and constants broadcast against an array; an array read twice. */
static cr_var prog_scalars(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)env;
    cr_avar a = bc2(t, &cr_fn_mul, cr_targ_var(s[0]), cr_targ_arr(X[0]));
    cr_avar b = bc2(t, &cr_fn_pow, cr_targ_arr(X[0]), cr_targ_var(s[1]));
    cr_avar c = bc2(t, &cr_fn_sub, cr_targ_value(cr_value_f64(1.0)), cr_targ_arr(X[0]));
    cr_avar d = bc2(t, &cr_fn_hypot, cr_targ_arr(X[0]), cr_targ_arr(X[0]));
    cr_avar e = bc2(t, &cr_fn_mul, cr_targ_arr(c), cr_targ_arr(c));
    cr_avar ab = bc2(t, &cr_fn_atan2, cr_targ_arr(a), cr_targ_arr(b));
    cr_avar de = bc2(t, &cr_fn_div, cr_targ_arr(d), cr_targ_arr(e));
    return cr_mul(t, s[1], cr_add(t, cr_av_sum(t, ab), cr_av_sum(t, de)));
}

/* dot of two variables of one shape (matrices), of a variable and a constant, and of an
 * array with itself. */
static cr_var prog_dot(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    static double c[6] = {0.5, -1.5, 2.0, 0.25, -0.75, 1.25};
    static cr_array C;
    C = cr_array_matrix(c, 2, 3);
    cr_var a = cr_av_dot(t, X[0], X[1]);
    cr_var b = cr_av_dot(t, bc1(t, &cr_fn_sin, X[0]), cr_av_const(&C));
    cr_var d = cr_av_dot(t, X[1], X[1]);
    return cr_add(t, cr_mul(t, a, b), d);
}

/* map(f, X...) of arrays of one shape: the same kernels as broadcasts. */
static cr_avar map2(cr_tape *t, const cr_value *f, cr_avar x, cr_avar y)
{
    cr_targ a[3] = {cr_targ_value(*f), cr_targ_arr(x), cr_targ_arr(y)};
    return cr_tape_acall_a(t, &cr_fn_map, a, 3);
}

static cr_var prog_map(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)s;
    (void)env;
    cr_targ a[2] = {cr_targ_value(cr_fn_sin), cr_targ_arr(X[0])};
    cr_avar sn = cr_tape_acall_a(t, &cr_fn_map, a, 2);
    cr_avar h = map2(t, &cr_fn_hypot, sn, X[1]);
    cr_avar m = map2(t, &cr_fn_mul, h, X[0]);
    assert_int_equal(m.a->ndim, 2);
    assert_int_equal(m.a->shape[1], 3);
    return cr_av_sum(t, m);
}

static void test_rows_and_arithmetic(void **state)
{
    fixture *f = *state;
    prob p = {.f = prog_unary, .ns = 0, .na = 1, .ndim = {1}, .shape = {{5}}};
    double z[5] = {0.15, 0.3, 0.45, 0.6, 0.85};
    check_all(f->ctx, &p, z);
}

static void test_two_argument_rows_on_matrices(void **state)
{
    fixture *f = *state;
    prob p = {.f = prog_binary, .ns = 0, .na = 2, .ndim = {2, 2}, .shape = {{2, 3}, {2, 3}}};
    double z[12] = {0.7, 1.2, 0.9, 1.5, 0.4, 1.1, 0.3, 1.7, 0.6, 0.8, 1.3, 0.5};
    check_all(f->ctx, &p, z);
}

static void test_dot(void **state)
{
    fixture *f = *state;
    prob p = {.f = prog_dot, .ns = 0, .na = 2, .ndim = {2, 2}, .shape = {{2, 3}, {2, 3}}};
    double z[12] = {0.7, -1.2, 0.9, 1.5, 0.4, -1.1, 0.3, 1.7, -0.6, 0.8, 1.3, 0.5};
    check_all(f->ctx, &p, z);
    /* the value: the sum of the products (to rounding: four interleaved sums) */
    double want = 0;
    for (size_t i = 0; i < 6; i++)
        want += z[i] * z[6 + i];
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_array xa = cr_array_matrix(z, 2, 3), ya = cr_array_matrix(z + 6, 2, 3);
    cr_avar X = cr_tape_array_input(t, &xa), Y = cr_tape_array_input(t, &ya);
    cr_var d = cr_av_dot(t, X, Y);
    assert_ok(t, cr_tape_status(t));
    ASSERT_CLOSE(d.v, want, 1e-15);
    cr_tape_free(t);
}

static void test_map(void **state)
{
    fixture *f = *state;
    prob p = {.f = prog_map, .ns = 0, .na = 2, .ndim = {2, 2}, .shape = {{2, 3}, {2, 3}}};
    double z[12] = {0.7, -1.2, 0.9, 1.5, 0.4, -1.1, 0.3, 1.7, -0.6, 0.8, 1.3, 0.5};
    check_all(f->ctx, &p, z);
}

static void test_scalar_arguments(void **state)
{
    fixture *f = *state;
    prob p = {.f = prog_scalars, .ns = 2, .na = 1, .ndim = {1}, .shape = {{4}}};
    double z[6] = {1.3, 0.7, 0.2, 0.5, 0.9, 1.4};
    check_all(f->ctx, &p, z);
}

/* The results are the broadcast rule's primal, bit for bit (same rows, same operations). */
static void test_primal_bits(void **state)
{
    fixture *f = *state;
    double x[7] = {0.1, -0.5, 2.0, 3.5, -1.25, 0.75, 9.0}, w[7] = {1.5, 2, -3, 0.5, 4, -1, 2.5};
    cr_array xa = cr_array_vector(x, 7), wa = cr_array_vector(w, 7);
    const cr_value *fns1[] = {&cr_fn_sin, &cr_fn_exp, &cr_fn_square, &cr_fn_neg, &cr_fn_erf};
    const cr_value *fns2[] = {&cr_fn_add, &cr_fn_sub,   &cr_fn_mul,
                              &cr_fn_div, &cr_fn_atan2, &cr_fn_hypot};
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    for (size_t k = 0; k < sizeof fns1 / sizeof fns1[0] + sizeof fns2 / sizeof fns2[0]; k++) {
        bool one = k < sizeof fns1 / sizeof fns1[0];
        const cr_value *fn = one ? fns1[k] : fns2[k - sizeof fns1 / sizeof fns1[0]];
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_avar Y = one ? bc1(t, fn, X) : bc2(t, fn, cr_targ_arr(X), cr_targ_arr(cr_av_const(&wa)));
        assert_ok(t, cr_tape_status(t));
        cr_value args[3] = {*fn, cr_value_array(&xa), cr_value_array(&wa)}, y;
        assert_int_equal(cr_function_call(f->arena, &cr_fn_broadcast, args, one ? 2 : 3, &y),
                         CR_OK);
        assert_int_equal(y.kind, CR_KIND_ARRAY);
        assert_int_equal(cr_array_numel(Y.a), 7);
        assert_memory_equal(Y.a->data, y.u.arr->data, 7 * sizeof(double));
    }
    cr_tape_free(t);
}

/* A strided input (every other element of a buffer) and a strided constant. */
static void test_strided(void **state)
{
    fixture *f = *state;
    double buf[10] = {0.3, 99, 0.8, 99, 1.1, 99, 0.5, 99, 1.9, 99};
    double cbuf[15] = {2, 0, 0, 3, 0, 0, -1, 0, 0, 0.5, 0, 0, 4, 0, 0};
    cr_array xa = cr_array_vector(buf, 5), ca = cr_array_vector(cbuf, 5);
    xa.strides[0] = 2;
    ca.strides[0] = 3;
    double g[5] = {0}, want[5];
    cr_array ga = cr_array_vector(g, 5), *gp = &ga;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    /* sum(sin(x) * c) */
    cr_var y = cr_av_sum(
        t, bc2(t, &cr_fn_mul, cr_targ_arr(bc1(t, &cr_fn_sin, X)), cr_targ_arr(cr_av_const(&ca))));
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    double v = 0;
    for (size_t i = 0; i < 5; i++) {
        double xi = buf[2 * i], c = cbuf[3 * i], h = 1e-5;
        v += sin(xi) * c;
        want[i] = (sin(xi + h) * c - sin(xi - h) * c) / (2 * h);
        ASSERT_CLOSE(g[i], want[i], 1e-8);
    }
    ASSERT_CLOSE(y.v, v, 1e-14);
    assert_true(buf[1] == 99 && buf[9] == 99); /* the gaps are not written */
    cr_tape_free(t);
}

/* Empty arrays: an empty result of the arguments' shape, a zero sum, no gradient. */
static void test_empty(void **state)
{
    fixture *f = *state;
    double x[1] = {7}, g[1] = {42};
    cr_array xa = cr_array_vector(x, 0), ga = cr_array_vector(g, 0), *gp = &ga;
    cr_tape *t;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_avar S = bc1(t, &cr_fn_sin, X);
    assert_ok(t, cr_tape_status(t));
    assert_int_equal(S.a->ndim, 1);
    assert_int_equal(S.a->shape[0], 0);
    cr_var y = cr_av_sum(t, bc2(t, &cr_fn_mul, cr_targ_arr(S), cr_targ_arr(X)));
    assert_true(y.v == 0.0);
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    assert_true(g[0] == 42);
    cr_tape_free(t);
}

/* ---- Prepared replays ---------------------------------------------------------------------- */

static cr_status mse_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    cr_avar d = bc2(t, &cr_fn_sub, cr_targ_arr(xs[0]), cr_targ_arr(cr_av_const(env)));
    cr_avar e = bc2(t, &cr_fn_mul, cr_targ_arr(bc1(t, &cr_fn_tanh, d)), cr_targ_arr(xs[1]));
    cr_var s = cr_av_sum(t, bc1(t, &cr_fn_square, e));
    /* a product that needs e's 2x3 shape at every replay */
    static double b[3] = {0.5, -1.0, 2.0};
    static cr_array B;
    B = cr_array_matrix(b, 3, 1);
    cr_var m = cr_av_sum(t, cr_av_matmul(t, e, cr_av_const(&B)));
    *y = cr_add(t, cr_div(t, s, cr_const(6.0)), m);
    return cr_tape_status(t);
}

static double mse_c(const double *x, const double *w, const double *c)
{
    static const double b[3] = {0.5, -1.0, 2.0};
    double s = 0, m = 0;
    for (size_t i = 0; i < 6; i++) {
        double e = tanh(x[i] - c[i]) * w[i];
        s += e * e;
        m += e * b[i % 3];
    }
    return s / 6.0 + m;
}

static void test_prepared(void **state)
{
    fixture *f = *state;
    double x[6] = {0.1, 0.5, -0.3, 0.8, 1.2, -0.9}, w[6] = {1, 2, 0.5, -1, 0.3, 1.5};
    double c[6] = {0.2, -0.1, 0.4, 0.3, 0.9, -0.5}, gx[6], gw[6];
    /* 2x3 matrices: the replay keeps the shapes */
    cr_array xa = cr_array_matrix(x, 2, 3), wa = cr_array_matrix(w, 2, 3),
             ca = cr_array_matrix(c, 2, 3);
    cr_array gxa = cr_array_matrix(gx, 2, 3), gwa = cr_array_matrix(gw, 2, 3);
    const cr_array *xs[2] = {&xa, &wa};
    cr_array *gs[2] = {&gxa, &gwa};
    cr_prepared *pp;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, mse_fn, &ca, xs, 2, &pp), CR_OK);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < 6; i++) {
            x[i] += 0.37 * (double)round * cos((double)i);
            w[i] -= 0.21 * (double)round * sin((double)i);
        }
        double y = NAN;
        assert_int_equal(cr_prepared_value_and_gradient_arrays(pp, xs, 2, &y, gs), CR_OK);
        ASSERT_CLOSE(y, mse_c(x, w, c), 1e-14);
        for (size_t i = 0; i < 6; i++) {
            double h = 1e-5, xi = x[i], wi = w[i];
            x[i] = xi + h;
            double fp = mse_c(x, w, c);
            x[i] = xi - h;
            double fm = mse_c(x, w, c);
            x[i] = xi;
            ASSERT_CLOSE(gx[i], (fp - fm) / (2 * h), 1e-8);
            w[i] = wi + h;
            fp = mse_c(x, w, c);
            w[i] = wi - h;
            fm = mse_c(x, w, c);
            w[i] = wi;
            ASSERT_CLOSE(gw[i], (fp - fm) / (2 * h), 1e-8);
        }
    }
    cr_prepared_free(pp);
}

/* ---- A user registry's own rule takes the call -------------------------------------------- */

static int g_calls;

static cr_status counting_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                const void *udata)
{
    (void)cfg;
    (void)udata;
    g_calls++;
    return cr_rrule(NULL, arena, f, args, nargs, y, pb);
}

static cr_status counting_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                                cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    g_calls++;
    return cr_frule(NULL, arena, dargs, f, args, nargs, y, dy);
}

/* The gradient of sum(sin.(x)) + dot(x, c) + sum(map(-, x)) on a tape of engine eng (NULL:
 * built-ins), against cos(x) + c - 1. */
static void sum_sin(fixture *f, cr_engine *eng, uint32_t flags)
{
    double x[4] = {0.1, 0.7, -1.2, 2.0}, c[4] = {0.5, -1.0, 1.5, 2.0}, g[4];
    cr_array xa = cr_array_vector(x, 4), ca = cr_array_vector(c, 4), ga = cr_array_vector(g, 4),
             *gp = &ga;
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_targ neg[2] = {cr_targ_value(cr_fn_neg), cr_targ_arr(X)};
    cr_var y = cr_add(t, cr_av_sum(t, bc1(t, &cr_fn_sin, X)), cr_av_dot(t, X, cr_av_const(&ca)));
    y = cr_add(t, y, cr_av_sum(t, cr_tape_acall_a(t, &cr_fn_map, neg, 2)));
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    for (size_t i = 0; i < 4; i++)
        ASSERT_CLOSE(g[i], cos(x[i]) + c[i] - 1.0, 1e-15);
    cr_tape_free(t);
}

static void test_user_rule(void **state)
{
    fixture *f = *state;
    cr_argspec specs[2] = {CR_ARG_FUNC, CR_ARG_ARRAY_F64};
    cr_rule_def d = {0};
    d.args = specs;
    d.rrule = counting_rrule;
    d.frule = counting_frule;
    const cr_function *fns[4] = {cr_fn_broadcast.u.func.fn, cr_fn_sum.u.func.fn,
                                 cr_fn_dot.u.func.fn, cr_fn_map.u.func.fn};
    cr_argspec dspecs[2] = {CR_ARG_ARRAY_F64, CR_ARG_ARRAY_F64};
    for (int which = 0; which < 4; which++) {
        cr_registry *reg;
        cr_engine *eng;
        assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
        d.fn = fns[which];
        d.nargs = which == 1 ? 1 : 2;
        d.args = which == 0 || which == 3 ? specs : which == 1 ? specs + 1 : dspecs;
        assert_int_equal(cr_registry_add(reg, &d), CR_OK);
        assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
        g_calls = 0;
        sum_sin(f, eng, 0);
        assert_int_equal(g_calls, which == 1 ? 2 : 1); /* the rrule, once per call (two sums) */
        g_calls = 0;
        sum_sin(f, eng, CR_TAPE_FORWARD);
        assert_true(g_calls >= 1);
        cr_engine_free(eng);
        cr_registry_free(reg);
    }
    /* An engine whose registry has no rule of its own for them: the kernels. */
    cr_registry *reg;
    cr_engine *eng;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
    g_calls = 0;
    sum_sin(f, eng, 0);
    sum_sin(f, NULL, 0);
    assert_int_equal(g_calls, 0);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/* Arguments the kernels do not take go to the broadcast rule, with its results and errors:
 * f32 arrays, broadcasting shapes, a variable of another tape. */
static void test_fallbacks(void **state)
{
    fixture *f = *state;
    float xf[3] = {0.5f, 1.5f, -2.0f};
    double col[2] = {1, 2}, row[3] = {10, 20, 30}, g[2], gr[3];
    cr_array xfa = {0}, ca = cr_array_matrix(col, 2, 1), ra = cr_array_matrix(row, 1, 3);
    assert_int_equal(cr_array_view_init(&xfa, xf, CR_DT_F32, 1, (size_t[]){3}, NULL), CR_OK);
    cr_tape *t, *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &t), CR_OK);
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    cr_avar F = cr_tape_array_input(t, &xfa);
    cr_avar S = bc1(t, &cr_fn_sin, F);
    assert_ok(t, cr_tape_status(t));
    assert_int_equal(S.a->dtype, CR_DT_F32);
    /* (2x1) .* (1x3): a 2x3 result; d/dcol_i sum = sum(row) */
    cr_tape_reset(t);
    cr_avar C = cr_tape_array_input(t, &ca), R = cr_tape_array_input(t, &ra);
    cr_avar P = bc2(t, &cr_fn_mul, cr_targ_arr(C), cr_targ_arr(R));
    assert_int_equal(P.a->ndim, 2);
    assert_int_equal(P.a->shape[0], 2);
    assert_int_equal(P.a->shape[1], 3);
    cr_var y = cr_av_sum(t, P);
    cr_array ga = cr_array_matrix(g, 2, 1), gra = cr_array_matrix(gr, 1, 3);
    cr_array *gp[2] = {&ga, &gra};
    cr_avar in[2] = {C, R};
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, in, 2, gp));
    ASSERT_CLOSE(g[0], 60, 1e-15);
    ASSERT_CLOSE(g[1], 60, 1e-15);
    ASSERT_CLOSE(gr[2], 3, 1e-15);
    /* a variable of another tape */
    cr_avar Cu = cr_tape_array_input(u, &ca);
    cr_avar bad = bc2(t, &cr_fn_mul, cr_targ_arr(Cu), cr_targ_arr(C));
    assert_null(bad.a);
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    assert_non_null(strstr(cr_tape_errmsg(t), "belongs to another tape"));
    cr_tape_free(u);
    cr_tape_free(t);
}

static int run_tape_bcast(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)
    const struct CMUnitTest tape_bcast[] = {
        T(test_rows_and_arithmetic),
        T(test_two_argument_rows_on_matrices),
        T(test_scalar_arguments),
        T(test_dot),
        T(test_map),
        T(test_primal_bits),
        T(test_strided),
        T(test_empty),
        T(test_prepared),
        T(test_user_rule),
        T(test_fallbacks),
    };
#undef T
    return cmocka_run_group_tests(tape_bcast, NULL, NULL);
}

/*
 * The broadcast and sum kernels (cr__kernel_broadcast, cr__kernel_sum) against the rules they
 * stand in for, with hostile arguments: the same calls recorded on a tape whose engine has a
 * rule of its own for broadcast and sum (which forwards to the built-in rule, so the tape
 * takes the generic path) give the same values bit for bit and the same gradients, NaN and
 * Inf included; odd layouts (zero and negative strides, 0-d, 3-d, empty, NULL data),
 * arguments the kernels do not take, every tape kind, replays at new inputs, caller buffers.
 */

/* ---- The generic path, forced: a registry whose own broadcast and sum rules forward ------ */

static int g_rrules; /* calls of the forwarding rrule */

static cr_status fwd_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    (void)udata;
    g_rrules++;
    return cr_rrule(NULL, arena, f, args, nargs, y, pb);
}

static cr_status fwd_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                           const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                           cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    return cr_frule(NULL, arena, dargs, f, args, nargs, y, dy);
}

typedef struct generic {
    cr_registry *reg;
    cr_engine *eng;
} generic;

/* Rules for broadcast(f, a...) of 1 to 3 arguments each an f64 or an f64 array, and for
 * sum(x) of an f64 array. */
static void generic_new(cr_ctx *ctx, generic *g)
{
    assert_int_equal(cr_registry_new(ctx, NULL, &g->reg), CR_OK);
    static cr_argspec specs[4];
    specs[0] = CR_ARG_FUNC;
    cr_rule_def d = {0};
    d.rrule = fwd_rrule;
    d.frule = fwd_frule;
    d.fn = cr_fn_broadcast.u.func.fn;
    for (size_t m = 1; m <= 3; m++) {
        for (unsigned bits = 0; bits < (1u << m); bits++) {
            cr_argspec *s = calloc(m + 1, sizeof *s);
            assert_non_null(s);
            s[0] = CR_ARG_FUNC;
            for (size_t j = 0; j < m; j++)
                s[j + 1] = (bits >> j) & 1u ? CR_ARG_F64 : CR_ARG_ARRAY_F64;
            d.args = s;
            d.nargs = m + 1;
            assert_int_equal(cr_registry_add(g->reg, &d), CR_OK);
            free(s); /* (the registry keeps a copy, or the test fails under ASan) */
        }
    }
    specs[1] = CR_ARG_ARRAY_F64;
    d.fn = cr_fn_sum.u.func.fn;
    d.args = specs + 1;
    d.nargs = 1;
    assert_int_equal(cr_registry_add(g->reg, &d), CR_OK);
    assert_int_equal(cr_engine_new(ctx, g->reg, &g->eng), CR_OK);
}

static void generic_free(generic *g)
{
    cr_engine_free(g->eng);
    cr_registry_free(g->reg);
}

static cr_tape *new_tape(cr_ctx *ctx, const cr_engine *eng, uint32_t flags)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .flags = flags, .engine = eng};
    assert_int_equal(cr_tape_new(ctx, &tp, &t), CR_OK);
    return t;
}

/* a and b equal, NaN equal to NaN */
static bool same_bits(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static char g_what[160]; /* the call being compared, for messages */

/* a close to b, or both the same non-finite value (NaN with NaN, Inf of one sign) */
static void assert_same_grad_(double a, double b, double rtol, const char *what, int line)
{
    bool ok = isfinite(b) ? isfinite(a) && fabs(a - b) <= rtol * fmax(1e-300, fabs(b)) + 1e-300
                          : (isnan(b) ? isnan(a) : a == b);
    if (!ok) {
        print_error("%s: %s (line %d): %.17g, generic path %.17g\n", g_what, what, line, a, b);
        fail();
    }
}
#define assert_same_grad(a, b, rtol) assert_same_grad_((a), (b), (rtol), #a, __LINE__)

/* ---- One broadcast, both paths ------------------------------------------------------------ */

enum { NE = 16 };

/* A call f.(args...) with arguments: 'a' an array input (xs[j], n elements), 's' a scalar
 * input (c[j]), 'k' an f64 constant (c[j]), 'c' a constant array (xs[j]). */
typedef struct call {
    const cr_value *f;
    const char *kinds;
    size_t n;
    double xs[3][NE];
    double c[3];
} call;

typedef struct outcome {
    cr_status st;
    double y[NE];
    double ga[3][NE]; /* gradients of the array inputs */
    double gs[3];     /* of the scalar inputs */
    double sum;       /* sum(y) */
    double gsum[3][NE];
} outcome;

static void run_call(cr_ctx *ctx, const cr_engine *eng, const call *c, outcome *o)
{
    size_t m = strlen(c->kinds);
    cr_tape *t = new_tape(ctx, eng, 0);
    cr_array xa[3];
    cr_targ args[4];
    cr_avar as[3];
    cr_var ss[3];
    size_t na = 0, ns = 0;
    args[0] = cr_targ_value(*c->f);
    for (size_t j = 0; j < m; j++) {
        xa[j] = cr_array_vector((double *)c->xs[j], c->n);
        switch (c->kinds[j]) {
        case 'a':
            as[na] = cr_tape_array_input(t, &xa[j]);
            args[j + 1] = cr_targ_arr(as[na++]);
            break;
        case 'c':
            args[j + 1] = cr_targ_arr(cr_av_const(&xa[j]));
            break;
        case 's':
            ss[ns] = cr_tape_input(t, c->c[j]);
            args[j + 1] = cr_targ_var(ss[ns++]);
            break;
        default:
            args[j + 1] = cr_targ_value(cr_value_f64(c->c[j]));
            break;
        }
    }
    cr_targ out;
    memset(o, 0, sizeof *o);
    o->st = cr_tape_acall(t, &cr_fn_broadcast, args, m + 1, &out);
    if (o->st != CR_OK) {
        cr_tape_free(t);
        return;
    }
    assert_int_equal(out.kind, CR_TARG_ARR);
    cr_avar Y = out.u.a;
    assert_int_equal(cr_array_numel(Y.a), c->n);
    memcpy(o->y, Y.a->data, c->n * sizeof(double));
    /* the pullback of a cotangent with every element different (zeros included) */
    double w[NE];
    for (size_t i = 0; i < c->n; i++)
        w[i] = i % 5 == 3 ? 0.0 : 0.5 + 0.25 * (double)i;
    cr_array wa = cr_array_vector(w, c->n), ga[3], *gp[3];
    for (size_t j = 0; j < na; j++) {
        ga[j] = cr_array_vector(o->ga[j], c->n);
        gp[j] = &ga[j];
    }
    if (Y.idx != CR_VAR_CONST)
        assert_ok(t, cr_tape_avjp(t, Y, &wa, ss, ns, o->gs, as, na, gp));
    /* the sum and its gradient */
    cr_var s = cr_av_sum(t, Y);
    assert_ok(t, cr_tape_status(t));
    o->sum = s.v;
    for (size_t j = 0; j < na; j++) {
        ga[j] = cr_array_vector(o->gsum[j], c->n);
        gp[j] = &ga[j];
    }
    double gss[3];
    if (s.idx != CR_VAR_CONST)
        assert_ok(t, cr_tape_gradient_arrays(t, s, ss, ns, gss, as, na, gp));
    cr_tape_free(t);
}

/* Both paths: the same status; the values bit for bit; the gradients to rtol, with the same
 * NaN and Inf. */
static void compare_call(cr_ctx *ctx, const generic *g, const call *c, double rtol)
{
    outcome a, b;
    snprintf(g_what, sizeof g_what, "%s.(%s) c = %g, %g, %g", c->f->u.func.fn->name, c->kinds,
             c->c[0], c->c[1], c->c[2]);
    g_rrules = 0;
    run_call(ctx, NULL, c, &a);
    assert_int_equal(g_rrules, 0);
    run_call(ctx, g->eng, c, &b);
    if (b.st == CR_OK)
        assert_true(g_rrules >= 2); /* the broadcast and the sum took the rules */
    if (a.st != b.st)
        print_error("%s (%s): status %s, generic path %s\n", c->f->u.func.fn->name, c->kinds,
                    cr_status_str(a.st), cr_status_str(b.st));
    assert_int_equal(a.st, b.st);
    if (a.st != CR_OK)
        return;
    size_t m = strlen(c->kinds), na = 0, ns = 0;
    for (size_t i = 0; i < c->n; i++)
        if (!same_bits(a.y[i], b.y[i])) {
            print_error("%s element %zu: %.17g, generic path %.17g\n", c->f->u.func.fn->name, i,
                        a.y[i], b.y[i]);
            fail();
        }
    assert_same_grad(a.sum, b.sum, 1e-14);
    for (size_t j = 0; j < m; j++) {
        if (c->kinds[j] == 'a') {
            for (size_t i = 0; i < c->n; i++) {
                snprintf(g_what, sizeof g_what, "%s.(%s) c = %g, %g, %g; element %zu (%g, %g)",
                         c->f->u.func.fn->name, c->kinds, c->c[0], c->c[1], c->c[2], i, c->xs[0][i],
                         c->xs[1][i]);
                assert_same_grad(a.ga[na][i], b.ga[na][i], rtol);
                assert_same_grad(a.gsum[na][i], b.gsum[na][i], rtol);
            }
            na++;
        } else if (c->kinds[j] == 's') {
            assert_same_grad(a.gs[ns], b.gs[ns], rtol);
            ns++;
        }
    }
}

static const double specials[NE] = {-2.5,     -1.0,      -0.0,   0.0,   0.5,     1.0,  2.0, NAN,
                                    INFINITY, -INFINITY, 1e-310, 1e300, -1e-300, 0.75, 3.0, -0.3};

static void test_rows_vs_generic_unary(void **state)
{
    fixture *f = *state;
    generic g;
    generic_new(f->ctx, &g);
    const cr_value *fns[] = {
        &cr_fn_sin,    &cr_fn_cos,  &cr_fn_tan,   &cr_fn_asin,    &cr_fn_acos,     &cr_fn_atan,
        &cr_fn_sinh,   &cr_fn_cosh, &cr_fn_tanh,  &cr_fn_exp,     &cr_fn_expm1,    &cr_fn_log,
        &cr_fn_log1p,  &cr_fn_sqrt, &cr_fn_cbrt,  &cr_fn_fabs,    &cr_fn_square,   &cr_fn_neg,
        &cr_fn_inv,    &cr_fn_cube, &cr_fn_sign,  &cr_fn_erf,     &cr_fn_erfc,     &cr_fn_tgamma,
        &cr_fn_lgamma, &cr_fn_log2, &cr_fn_log10, &cr_fn_exp2,    &cr_fn_identity, &cr_fn_acosh,
        &cr_fn_atanh,  &cr_fn_sinc, &cr_fn_sinpi, &cr_fn_deg2rad,
    };
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
        call c = {.f = fns[k], .kinds = "a", .n = NE};
        memcpy(c.xs[0], specials, sizeof specials);
        compare_call(f->ctx, &g, &c, 1e-14);
    }
    generic_free(&g);
}

/* Two-argument functions over every mix of arrays, scalar variables and constants, at
 * special points on both sides (pow of negative bases, division by zero and by subnormals,
 * atan2 at the origin). */
static void test_rows_vs_generic_binary(void **state)
{
    fixture *f = *state;
    generic g;
    generic_new(f->ctx, &g);
    const cr_value *fns[] = {&cr_fn_add,   &cr_fn_sub,   &cr_fn_mul, &cr_fn_div, &cr_fn_pow,
                             &cr_fn_atan2, &cr_fn_hypot, &cr_fn_max, &cr_fn_min, &cr_fn_fmod};
    const char *mixes[] = {"aa", "ac", "ca", "as", "sa", "ak", "ka"};
    static const double scal[] = {0.0, -0.0, 0.5, -2.0, 2.0, NAN, INFINITY, 1e-310};
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++)
        for (size_t mi = 0; mi < sizeof mixes / sizeof mixes[0]; mi++)
            for (size_t si = 0; si < sizeof scal / sizeof scal[0]; si++) {
                call c = {.f = fns[k], .kinds = mixes[mi], .n = NE};
                memcpy(c.xs[0], specials, sizeof specials);
                for (size_t i = 0; i < NE; i++)
                    c.xs[1][i] = specials[(i * 7 + si) % NE];
                c.c[0] = c.c[1] = scal[si];
                /* Division by a subnormal: the kernel scales the cotangent by the row's
                 * partial 1/y, which overflows, where the rule divides the cotangent by y
                 * (docs/engine.md); the scalar tape does as the kernel. */
                if (fns[k] == &cr_fn_div)
                    for (size_t i = 0; i < NE; i++) {
                        if (fabs(c.xs[1][i]) < 1e-300 && c.xs[1][i] != 0)
                            c.xs[1][i] = 1e-300;
                        if (fabs(c.c[1]) < 1e-300 && c.c[1] != 0)
                            c.c[1] = 1e-300;
                    }
                compare_call(f->ctx, &g, &c, 1e-13);
            }
    generic_free(&g);
}

/* Three-argument rows (muladd, fma, clamp) through cr_tape_acall. */
static void test_rows_vs_generic_ternary(void **state)
{
    fixture *f = *state;
    generic g;
    generic_new(f->ctx, &g);
    const cr_value *fns[] = {&cr_fn_muladd, &cr_fn_fma, &cr_fn_clamp};
    const char *mixes[] = {"aaa", "asa", "kak", "aca", "ssa"};
    for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++)
        for (size_t mi = 0; mi < sizeof mixes / sizeof mixes[0]; mi++) {
            call c = {.f = fns[k], .kinds = mixes[mi], .n = NE, .c = {-0.5, 0.25, 1.5}};
            for (size_t i = 0; i < NE; i++) {
                c.xs[0][i] = specials[i];
                c.xs[1][i] = specials[(i * 3 + 1) % NE];
                c.xs[2][i] = specials[(i * 5 + 2) % NE];
            }
            compare_call(f->ctx, &g, &c, 1e-13);
        }
    generic_free(&g);
}

/* ---- Every tape kind ------------------------------------------------------------------- */

static cr_avar bc1_kernel_vs_rules(cr_tape *t, const cr_value *f, cr_targ x)
{
    return cr_av_broadcast1(t, f, x);
}

static cr_avar bc3(cr_tape *t, const cr_value *f, cr_targ x, cr_targ y, cr_targ z)
{
    cr_targ a[4] = {cr_targ_value(*f), x, y, z};
    return cr_tape_acall_a(t, &cr_fn_broadcast, a, 4);
}

static double cvec[4] = {0.3, -0.7, 1.1, 0.4};

/* Scalar inputs only, reaching arrays through broadcasts over a constant array: rows of
 * one, two and three arguments, real-only rows (hypot, atan2, clamp), the same scalar in
 * several places. */
static cr_var prog_scalars_only(cr_tape *t, const cr_var *s, const cr_avar *X, const void *env)
{
    (void)X;
    (void)env;
    static cr_array C;
    C = cr_array_vector(cvec, 4);
    cr_targ c = cr_targ_arr(cr_av_const(&C));
    cr_avar a = bc2(t, &cr_fn_mul, cr_targ_var(s[0]), c);                /* s0 c */
    cr_avar b = bc2(t, &cr_fn_hypot, cr_targ_arr(a), cr_targ_var(s[1])); /* hypot */
    cr_avar d = bc2(t, &cr_fn_atan2, cr_targ_var(s[2]), cr_targ_arr(b)); /* atan2 */
    cr_avar e = bc3(t, &cr_fn_muladd, cr_targ_arr(d), cr_targ_var(s[0]), cr_targ_arr(a));
    cr_avar h = bc1_kernel_vs_rules(
        t, &cr_fn_sin, cr_targ_arr(bc2(t, &cr_fn_pow, cr_targ_arr(b), cr_targ_var(s[3]))));
    cr_avar k =
        bc3(t, &cr_fn_clamp, cr_targ_arr(h), cr_targ_value(cr_value_f64(-0.9)), cr_targ_var(s[1]));
    cr_var u = cr_av_sum(t, bc2(t, &cr_fn_mul, cr_targ_arr(e), cr_targ_arr(k)));
    return cr_mul(t, u, cr_av_sum(t, bc1_kernel_vs_rules(t, &cr_fn_exp, cr_targ_arr(d))));
}

static void test_hessian_scalar_inputs(void **state)
{
    fixture *f = *state;
    prob p = {.f = prog_scalars_only, .ns = 4, .na = 0};
    double z[4] = {0.8, 1.3, -0.6, 1.7};
    check_hessian(f->ctx, &p, z, 1e-6);
    check_jvp(f->ctx, &p, z, 1e-7, 2);
    check_hvp_dirs(f->ctx, &p, z, 1e-6, 2);
}

/* ---- Layouts -------------------------------------------------------------------------- */

typedef cr_var (*aprog)(cr_tape *t, cr_avar X, const void *env);

/* Record p on x on a tape of engine eng; its value, and its gradient into ga (when not
 * NULL). Returns the tape's status. */
static cr_status eval_prog(cr_ctx *ctx, const cr_engine *eng, aprog p, const cr_array *xa,
                           const void *env, double *y, cr_array *ga)
{
    cr_tape *t = new_tape(ctx, eng, 0);
    cr_avar X = cr_tape_array_input(t, xa);
    cr_var v = p(t, X, env);
    cr_status st = cr_tape_status(t);
    *y = v.v;
    if (st == CR_OK && ga != NULL)
        st = cr_tape_gradient_arrays(t, v, NULL, 0, NULL, &X, 1, &ga);
    cr_tape_free(t);
    return st;
}

/* sum(sin.(x) .* x + x .* x ./ 3) - sum(x): rows, a slot read twice, sums. */
static cr_var prog_mix(cr_tape *t, cr_avar X, const void *env)
{
    (void)env;
    cr_targ x = cr_targ_arr(X);
    cr_avar a = bc2(t, &cr_fn_mul, cr_targ_arr(bc1_kernel_vs_rules(t, &cr_fn_sin, x)), x);
    cr_avar b =
        bc2(t, &cr_fn_div, cr_targ_arr(bc2(t, &cr_fn_mul, x, x)), cr_targ_value(cr_value_f64(3.0)));
    return cr_sub(t, cr_av_sum(t, bc2(t, &cr_fn_add, cr_targ_arr(a), cr_targ_arr(b))),
                  cr_av_sum(t, X));
}

/* The same on both paths (values to the sum's rounding, gradients to 1e-14). */
static void compare_layout(fixture *f, const generic *g, const cr_array *xa, size_t numel)
{
    double ya, yb, da[24], db[24];
    assert_true(numel <= 24);
    cr_array gaa = cr_array_vector(da, numel), gab = cr_array_vector(db, numel);
    g_rrules = 0;
    assert_int_equal(eval_prog(f->ctx, NULL, prog_mix, xa, NULL, &ya, &gaa), CR_OK);
    assert_int_equal(g_rrules, 0);
    assert_int_equal(eval_prog(f->ctx, g->eng, prog_mix, xa, NULL, &yb, &gab), CR_OK);
    assert_true(g_rrules > 0);
    snprintf(g_what, sizeof g_what, "layout of %u dimensions, %zu elements", (unsigned)xa->ndim,
             numel);
    assert_same_grad(ya, yb, 1e-14);
    for (size_t i = 0; i < numel; i++)
        assert_same_grad(da[i], db[i], 1e-14);
}

/* A 1-d input of stride 0 (one element read four times), of negative stride, a 0-d array,
 * a 3-d contiguous array, an empty array with NULL data; against the rules, and the zero
 * stride against central differences of the same function in plain C (each of the four
 * logical elements has its own gradient). */
static void test_layouts(void **state)
{
    fixture *f = *state;
    generic g;
    generic_new(f->ctx, &g);
    double one[1] = {0.7}, buf[24];
    for (size_t i = 0; i < 24; i++)
        buf[i] = 0.1 + 0.13 * (double)i - (i % 3 == 0 ? 1.0 : 0.0);
    cr_array xa;
    assert_int_equal(cr_array_view_init(&xa, one, CR_DT_F64, 1, (size_t[]){4}, (ptrdiff_t[]){0}),
                     CR_OK);
    compare_layout(f, &g, &xa, 4);
    {
        double y, d[4];
        cr_array ga = cr_array_vector(d, 4);
        assert_int_equal(eval_prog(f->ctx, NULL, prog_mix, &xa, NULL, &y, &ga), CR_OK);
        double v = one[0], h = 1e-6;
        ASSERT_CLOSE(y, 4 * (sin(v) * v + v * v / 3 - v), 1e-14);
        for (size_t i = 0; i < 4; i++) /* each element by itself */
            ASSERT_CLOSE(d[i],
                         ((sin(v + h) * (v + h) + (v + h) * (v + h) / 3 - (v + h)) -
                          (sin(v - h) * (v - h) + (v - h) * (v - h) / 3 - (v - h))) /
                             (2 * h),
                         1e-8);
        assert_true(one[0] == 0.7);
    }
    assert_int_equal(
        cr_array_view_init(&xa, buf + 9, CR_DT_F64, 1, (size_t[]){5}, (ptrdiff_t[]){-2}), CR_OK);
    compare_layout(f, &g, &xa, 5);
    assert_int_equal(cr_array_view_init(&xa, buf + 3, CR_DT_F64, 0, NULL, NULL), CR_OK);
    compare_layout(f, &g, &xa, 1);
    assert_int_equal(cr_array_view_init(&xa, buf, CR_DT_F64, 3, (size_t[]){2, 3, 4}, NULL), CR_OK);
    compare_layout(f, &g, &xa, 24);
    assert_int_equal(cr_array_view_init(&xa, NULL, CR_DT_F64, 2, (size_t[]){3, 0}, NULL), CR_OK);
    compare_layout(f, &g, &xa, 0);
    generic_free(&g);
}

/* ---- Arguments the kernels must not take ------------------------------------------------ */

/* A constant array with NULL data and elements, and an array variable whose descriptor is not
 * the one its slot holds (another shape), and one whose index is out of range: refused with
 * a status and a message, as the rules refuse them, never read. */
static void test_bad_arrays(void **state)
{
    fixture *f = *state;
    double x[4] = {1, 2, 3, 4}, w[6] = {1, 2, 3, 4, 5, 6};
    cr_array xa = cr_array_vector(x, 4), wa = cr_array_vector(w, 6), na = cr_array_vector(NULL, 4);
    generic g;
    generic_new(f->ctx, &g);
    cr_tape *t = new_tape(f->ctx, NULL, 0);
    for (int round = 0; round < 2; round++) {
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_avar bad = round == 0
                          ? bc2(t, &cr_fn_mul, cr_targ_arr(X), cr_targ_arr(cr_av_const(&na)))
                          : bc1_kernel_vs_rules(t, &cr_fn_sin, cr_targ_arr(cr_av_const(&na)));
        assert_null(bad.a);
        assert_int_not_equal(cr_tape_status(t), CR_OK);
        assert_contains(cr_tape_errmsg(t), "broadcast");
        cr_tape_reset(t);
        X = cr_tape_array_input(t, &xa);
        cr_var s = cr_av_sum(t, cr_av_const(&na));
        assert_true(isnan(s.v));
        assert_int_not_equal(cr_tape_status(t), CR_OK);
        assert_contains(cr_tape_errmsg(t), "sum");
    }
    /* X's index with W's descriptor (6 elements, X has 4): on both paths, a failure or a
     * gradient of X's 4 elements, never 6 written */
    for (int path = 0; path < 2; path++) {
        cr_tape *tg = path == 0 ? t : new_tape(f->ctx, g.eng, 0);
        cr_tape_reset(tg);
        cr_avar X = cr_tape_array_input(tg, &xa);
        cr_avar forged = X;
        forged.a = &wa;
        cr_var y = cr_av_sum(tg, bc1_kernel_vs_rules(tg, &cr_fn_sin, cr_targ_arr(forged)));
        double gbuf[8] = {0, 0, 0, 0, 42, 42, 42, 42};
        cr_array ga = cr_array_vector(gbuf, 4), *gp = &ga;
        cr_status st = cr_tape_status(tg);
        if (st == CR_OK)
            st = cr_tape_gradient_arrays(tg, y, NULL, 0, NULL, &X, 1, &gp);
        assert_int_not_equal(st, CR_OK);
        assert_true(gbuf[4] == 42 && gbuf[7] == 42);
        if (path == 1)
            cr_tape_free(tg);
    }
    /* an index past the slots */
    cr_tape_reset(t);
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_avar forged = X;
    forged.idx = 7;
    cr_avar r = bc1_kernel_vs_rules(t, &cr_fn_exp, cr_targ_arr(forged));
    assert_null(r.a);
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    (void)cr_av_sum(t, forged);
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    /* a scalar variable of another tape, and of an earlier recording */
    cr_tape *u = new_tape(f->ctx, NULL, 0);
    cr_var su = cr_tape_input(u, 2.0);
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    r = bc2(t, &cr_fn_mul, cr_targ_var(su), cr_targ_arr(X));
    assert_null(r.a);
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    cr_tape_reset(t);
    cr_var old = cr_tape_input(t, 1.0);
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    r = bc2(t, &cr_fn_mul, cr_targ_var(old), cr_targ_arr(X));
    assert_int_equal(cr_tape_status(t), CR_ETAPE);
    cr_tape_free(u);
    cr_tape_free(t);
    generic_free(&g);
}

/* ---- Fallbacks: the rule's results ------------------------------------------------------ */

/* f32, complex and integer arrays, integer and bool constants, a transposed (non-contiguous)
 * matrix, hypot of three arrays, a function of two results, scalars only: the rule path's
 * values and status. */
static void test_fallbacks_kernel_vs_rules(void **state)
{
    fixture *f = *state;
    double x[6] = {0.5, -1.5, 2.0, 0.25, 3.0, -0.75}, g[6];
    cr_array xa = cr_array_vector(x, 6), ga = cr_array_vector(g, 6), *gp = &ga;
    cr_tape *t = new_tape(f->ctx, NULL, 0);
    /* integer and bool constants: x .^ 3 and x .* true */
    cr_avar X = cr_tape_array_input(t, &xa);
    cr_avar p = bc2(t, &cr_fn_pow, cr_targ_arr(X), cr_targ_value(cr_value_i64(3)));
    cr_avar q = bc2(t, &cr_fn_mul, cr_targ_value(cr_value_bool(true)), cr_targ_arr(p));
    cr_var y = cr_av_sum(t, q);
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    double want = 0;
    for (size_t i = 0; i < 6; i++) {
        want += x[i] * x[i] * x[i];
        double h = 1e-5;
        ASSERT_CLOSE(g[i], (pow(x[i] + h, 3) - pow(x[i] - h, 3)) / (2 * h), 1e-8);
    }
    ASSERT_CLOSE(y.v, want, 1e-14);
    /* a transposed matrix: the 3x2 view of a 2x3 buffer; sum(x' .* W) */
    cr_tape_reset(t);
    cr_array m = cr_array_matrix(x, 2, 3), mt = m;
    mt.shape[0] = 3;
    mt.shape[1] = 2;
    mt.strides[0] = 1;
    mt.strides[1] = 3;
    double w[6] = {1, 2, 3, 4, 5, 6}, gm[6];
    cr_array wa = cr_array_matrix(w, 3, 2), gma = cr_array_matrix(gm, 3, 2), *gmp = &gma;
    cr_avar M = cr_tape_array_input(t, &mt);
    cr_avar S = bc1_kernel_vs_rules(t, &cr_fn_sin, cr_targ_arr(M));
    cr_avar P = bc2(t, &cr_fn_mul, cr_targ_arr(S), cr_targ_arr(cr_av_const(&wa)));
    y = cr_av_sum(t, P);
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &M, 1, &gmp));
    want = 0;
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++) {
            double v = x[j * 3 + i], h = 1e-6;
            want += sin(v) * w[i * 2 + j];
            ASSERT_CLOSE(gm[i * 2 + j], (sin(v + h) - sin(v - h)) / (2 * h) * w[i * 2 + j], 1e-8);
            ASSERT_DBL(
                ((double *)
                     S.a->data)[(ptrdiff_t)i * S.a->strides[0] + (ptrdiff_t)j * S.a->strides[1]],
                sin(v));
        }
    ASSERT_CLOSE(y.v, want, 1e-14);
    /* hypot of three arrays (its row has two arguments) */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_array wv = cr_array_vector(w, 6);
    cr_avar H = bc3(t, &cr_fn_hypot, cr_targ_arr(X), cr_targ_arr(cr_av_const(&wv)), cr_targ_arr(X));
    y = cr_av_sum(t, H);
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    want = 0;
    for (size_t i = 0; i < 6; i++) {
        double h = 1e-6, a = x[i], b = w[i];
        want += sqrt(2 * a * a + b * b);
        ASSERT_CLOSE(g[i],
                     (sqrt(2 * (a + h) * (a + h) + b * b) - sqrt(2 * (a - h) * (a - h) + b * b)) /
                         (2 * h),
                     1e-8);
    }
    ASSERT_CLOSE(y.v, want, 1e-14);
    /* sincos: the rule gives a tuple of two arrays, which a call of one result refuses */
    cr_tape_reset(t);
    X = cr_tape_array_input(t, &xa);
    cr_avar bad = bc1_kernel_vs_rules(t, &cr_fn_sincos, cr_targ_arr(X));
    assert_null(bad.a);
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "a tuple of 2 elements, 1 result expected");
    /* scalars only: a 0-d array from the rule */
    cr_tape_reset(t);
    cr_var s = cr_tape_input(t, 0.3);
    cr_avar z = bc1_kernel_vs_rules(t, &cr_fn_exp, cr_targ_var(s));
    assert_ok(t, cr_tape_status(t));
    assert_int_equal(z.a->ndim, 0);
    double gs = 0;
    y = cr_av_sum(t, z);
    assert_ok(t, cr_tape_gradient_arrays(t, y, &s, 1, &gs, NULL, 0, NULL));
    ASSERT_CLOSE(gs, (exp(0.3 + 1e-6) - exp(0.3 - 1e-6)) / 2e-6, 1e-8);
    /* f32, c128 and i64 arrays */
    float xf[3] = {0.5f, 1.5f, -2.0f};
    cr_complex xc[3] = {CMPLX(0.5, 1), CMPLX(-1, 0.25), CMPLX(2, -1)};
    int64_t xi[3] = {1, -2, 3};
    cr_array fa, ca, ia;
    assert_int_equal(cr_array_view_init(&fa, xf, CR_DT_F32, 1, (size_t[]){3}, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&ca, xc, CR_DT_C128, 1, (size_t[]){3}, NULL), CR_OK);
    assert_int_equal(cr_array_view_init(&ia, xi, CR_DT_I64, 1, (size_t[]){3}, NULL), CR_OK);
    cr_tape_reset(t);
    cr_avar F = cr_tape_array_input(t, &fa);
    cr_avar FS = bc2(t, &cr_fn_mul, cr_targ_arr(F), cr_targ_arr(F));
    assert_ok(t, cr_tape_status(t));
    assert_int_equal(FS.a->dtype, CR_DT_F32);
    cr_avar C = cr_tape_array_input(t, &ca);
    cr_avar CS = bc1_kernel_vs_rules(t, &cr_fn_exp, cr_targ_arr(C));
    assert_ok(t, cr_tape_status(t));
    assert_int_equal(CS.a->dtype, CR_DT_C128);
    cr_avar IF = bc2(t, &cr_fn_mul, cr_targ_arr(cr_av_const(&ia)), cr_targ_arr(F));
    assert_ok(t, cr_tape_status(t));
    assert_int_equal(IF.a->dtype, CR_DT_F32);
    for (size_t i = 0; i < 3; i++)
        assert_true(((float *)IF.a->data)[i] == (float)xi[i] * xf[i]);
    cr_tape_free(t);
}

/* ---- Prepared gradients ------------------------------------------------------------------ */

static cr_status prep_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_targ x = cr_targ_arr(xs[0]);
    cr_avar a = bc2(t, &cr_fn_mul, cr_targ_arr(bc1_kernel_vs_rules(t, &cr_fn_sin, x)), x);
    cr_avar b = bc2(t, &cr_fn_pow, x, cr_targ_value(cr_value_f64(2.5)));
    *y = cr_add(t, cr_av_sum(t, a), cr_av_sum(t, b));
    return cr_tape_status(t);
}

static double prep_c(const double *x, size_t n, ptrdiff_t s)
{
    double v = 0;
    for (size_t i = 0; i < n; i++)
        v += sin(x[(ptrdiff_t)i * s]) * x[(ptrdiff_t)i * s] + pow(x[(ptrdiff_t)i * s], 2.5);
    return v;
}

/* A replay at inputs of another shape is refused (never a gradient of the old shape's
 * elements); strided vectors (stride 0, negative) and a non-contiguous matrix where a
 * contiguous one was prepared are read, as the rules read them; the prepared gradient stays
 * usable. */
static void test_prepared_inputs(void **state)
{
    fixture *f = *state;
    double x[12], g[12];
    for (size_t i = 0; i < 12; i++)
        x[i] = 0.3 + 0.1 * (double)i;
    cr_array xa = cr_array_vector(x, 6), ga = cr_array_vector(g, 6);
    const cr_array *xs[1] = {&xa};
    cr_array *gs[1] = {&ga};
    cr_prepared *pp;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, prep_fn, NULL, xs, 1, &pp), CR_OK);
    double y = 0;
    /* more and fewer elements */
    for (size_t n = 5; n <= 7; n += 2) {
        cr_array other = cr_array_vector(x, n), go = cr_array_vector(g, n);
        const cr_array *os[1] = {&other};
        cr_array *gos[1] = {&go};
        for (size_t i = 0; i < 12; i++)
            g[i] = 42;
        assert_int_equal(cr_prepared_value_and_gradient_arrays(pp, os, 1, &y, gos), CR_ESHAPE);
        assert_true(g[0] == 42);
    }
    /* a 2x3 matrix for a vector of 6 */
    cr_array mat = cr_array_matrix(x, 2, 3);
    const cr_array *ms[1] = {&mat};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(pp, ms, 1, &y, gs), CR_ESHAPE);
    /* stride 2, stride -1, stride 0 */
    static const ptrdiff_t strides[3] = {2, -1, 0};
    for (int k = 0; k < 3; k++) {
        cr_array sa;
        double *base = strides[k] < 0 ? x + 5 : x;
        assert_int_equal(cr_array_view_init(&sa, base, CR_DT_F64, 1, (size_t[]){6}, &strides[k]),
                         CR_OK);
        const cr_array *ss[1] = {&sa};
        assert_int_equal(cr_prepared_value_and_gradient_arrays(pp, ss, 1, &y, gs), CR_OK);
        ASSERT_CLOSE(y, prep_c(base, 6, strides[k]), 1e-14);
        for (size_t i = 0; i < 6; i++) {
            double v = base[(ptrdiff_t)i * strides[k]], h = 1e-6;
            ASSERT_CLOSE(
                g[i],
                (sin(v + h) * (v + h) + pow(v + h, 2.5) - sin(v - h) * (v - h) - pow(v - h, 2.5)) /
                    (2 * h),
                1e-8);
        }
    }
    assert_int_equal(cr_prepared_value_and_gradient_arrays(pp, xs, 1, &y, gs), CR_OK);
    ASSERT_CLOSE(y, prep_c(x, 6, 1), 1e-14);
    cr_prepared_free(pp);
    /* a 2x3 matrix prepared, replayed at the transposed view of a 3x2 buffer */
    cr_array m = cr_array_matrix(x, 2, 3), gmat = cr_array_matrix(g, 2, 3);
    const cr_array *m1[1] = {&m};
    cr_array *gm1[1] = {&gmat};
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, prep_fn, NULL, m1, 1, &pp), CR_OK);
    double tb[6] = {0.4, 0.9, 0.5, 1.1, 0.6, 1.3};
    cr_array tv = cr_array_matrix(tb, 3, 2);
    tv.shape[0] = 2;
    tv.shape[1] = 3;
    tv.strides[0] = 1;
    tv.strides[1] = 2;
    const cr_array *m2[1] = {&tv};
    assert_int_equal(cr_prepared_value_and_gradient_arrays(pp, m2, 1, &y, gm1), CR_OK);
    {
        double want = 0;
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 3; j++) {
                double v = tb[j * 2 + i], h = 1e-6;
                want += sin(v) * v + pow(v, 2.5);
                ASSERT_CLOSE(g[i * 3 + j],
                             (sin(v + h) * (v + h) + pow(v + h, 2.5) - sin(v - h) * (v - h) -
                              pow(v - h, 2.5)) /
                                 (2 * h),
                             1e-8);
            }
        ASSERT_CLOSE(y, want, 1e-14);
    }
    assert_int_equal(cr_prepared_value_and_gradient_arrays(pp, m1, 1, &y, gm1), CR_OK);
    ASSERT_CLOSE(y, prep_c(x, 6, 1), 1e-14);
    cr_prepared_free(pp);
}

/* ---- Interplay with the rules, sweeps, memory --------------------------------------------- */

static double inter_c(const double *x)
{
    /* x a 2x3 matrix; e = exp.(x) .* x; m = e * B (B 3x1); c = cumsum(vec(e)); */
    static const double B[3] = {0.5, -1.0, 2.0};
    double e[6], v = 0, c = 0;
    for (size_t i = 0; i < 6; i++)
        e[i] = exp(x[i]) * x[i];
    for (size_t r = 0; r < 2; r++) {
        double m = 0;
        for (size_t k = 0; k < 3; k++)
            m += e[r * 3 + k] * B[k];
        v += sin(m);
    }
    for (size_t i = 0; i < 6; i++) {
        c += e[i];
        v += c * c * 0.1;
    }
    return v + e[4] * x[1];
}

/* Kernel results through matmul, reshape, cumsum and getindex, and a rule's result (matmul)
 * through a kernel again; x read by kernels and by rules. */
static cr_var prog_inter(cr_tape *t, cr_avar X, const void *env)
{
    (void)env;
    static double b[3] = {0.5, -1.0, 2.0};
    static cr_array B;
    B = cr_array_matrix(b, 3, 1);
    cr_avar e = bc2(t, &cr_fn_mul, cr_targ_arr(bc1_kernel_vs_rules(t, &cr_fn_exp, cr_targ_arr(X))),
                    cr_targ_arr(X));
    cr_avar m = cr_av_matmul(t, e, cr_av_const(&B));
    cr_var v = cr_av_sum(t, bc1_kernel_vs_rules(t, &cr_fn_sin, cr_targ_arr(m)));
    cr_targ ra[2] = {cr_targ_arr(e), cr_targ_value(cr_value_i64(6))};
    cr_avar r = cr_tape_acall_a(t, &cr_fn_reshape, ra, 2);
    cr_targ ca[1] = {cr_targ_arr(r)};
    cr_avar c = cr_tape_acall_a(t, &cr_fn_cumsum, ca, 1);
    cr_var q = cr_av_sum(t, bc2(t, &cr_fn_mul,
                                cr_targ_arr(bc1_kernel_vs_rules(t, &cr_fn_square, cr_targ_arr(c))),
                                cr_targ_value(cr_value_f64(0.1))));
    cr_targ ga[3] = {cr_targ_arr(e), cr_targ_value(cr_value_i64(1)),
                     cr_targ_value(cr_value_i64(1))};
    cr_targ gx[3] = {cr_targ_arr(X), cr_targ_value(cr_value_i64(0)),
                     cr_targ_value(cr_value_i64(1))};
    cr_var e4 = cr_tape_acall_s(t, &cr_fn_getindex, ga, 3);
    cr_var x1 = cr_tape_acall_s(t, &cr_fn_getindex, gx, 3);
    return cr_add(t, cr_add(t, v, q), cr_mul(t, e4, x1));
}

static void test_interplay(void **state)
{
    fixture *f = *state;
    double x[6] = {0.2, -0.4, 0.7, 0.1, -0.9, 0.5}, g[6], y;
    cr_array xa = cr_array_matrix(x, 2, 3), ga = cr_array_matrix(g, 2, 3);
    assert_int_equal(eval_prog(f->ctx, NULL, prog_inter, &xa, NULL, &y, &ga), CR_OK);
    ASSERT_CLOSE(y, inter_c(x), 1e-13);
    for (size_t i = 0; i < 6; i++) {
        double xi = x[i], h = 1e-6;
        x[i] = xi + h;
        double fp = inter_c(x);
        x[i] = xi - h;
        double fm = inter_c(x);
        x[i] = xi;
        ASSERT_CLOSE(g[i], (fp - fm) / (2 * h), 1e-7);
    }
    /* the gradient into an f32 array and into a strided f64 array */
    float gf[6];
    double gbig[12];
    cr_array gfa, gsa;
    assert_int_equal(cr_array_view_init(&gfa, gf, CR_DT_F32, 2, (size_t[]){2, 3}, NULL), CR_OK);
    assert_int_equal(
        cr_array_view_init(&gsa, gbig, CR_DT_F64, 2, (size_t[]){2, 3}, (ptrdiff_t[]){1, 2}), CR_OK);
    assert_int_equal(eval_prog(f->ctx, NULL, prog_inter, &xa, NULL, &y, &gfa), CR_OK);
    assert_int_equal(eval_prog(f->ctx, NULL, prog_inter, &xa, NULL, &y, &gsa), CR_OK);
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++) {
            ASSERT_CLOSE(gf[i * 3 + j], g[i * 3 + j], 1e-6);
            ASSERT_DBL(gbig[i + 2 * j], g[i * 3 + j]);
        }
}

/* cr_tape_avjp seeding a broadcast's result: a strided cotangent, an f32 one, and one whose
 * memory is the gradient array's. */
static void test_avjp_seeds(void **state)
{
    fixture *f = *state;
    double x[4] = {0.3, -1.2, 0.8, 2.0}, wbuf[8] = {1, 9, -2, 9, 0.5, 9, 3, 9}, g[4], g2[4];
    float wf[4] = {1, -2, 0.5f, 3};
    cr_array xa = cr_array_vector(x, 4), ga = cr_array_vector(g, 4), *gp = &ga, wa, wfa;
    assert_int_equal(cr_array_view_init(&wa, wbuf, CR_DT_F64, 1, (size_t[]){4}, (ptrdiff_t[]){2}),
                     CR_OK);
    assert_int_equal(cr_array_view_init(&wfa, wf, CR_DT_F32, 1, (size_t[]){4}, NULL), CR_OK);
    cr_tape *t = new_tape(f->ctx, NULL, 0);
    for (int k = 0; k < 3; k++) {
        cr_tape_reset(t);
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_avar Y =
            bc2(t, &cr_fn_mul, cr_targ_arr(bc1_kernel_vs_rules(t, &cr_fn_atan, cr_targ_arr(X))),
                cr_targ_arr(X));
        double w[4] = {1, -2, 0.5, 3};
        cr_array wd = cr_array_vector(w, 4), gw = cr_array_vector(w, 4), *gwp = &gw;
        if (k == 2) /* the seed's memory is the gradient's */
            assert_ok(t, cr_tape_avjp(t, Y, &wd, NULL, 0, NULL, &X, 1, &gwp));
        else
            assert_ok(t, cr_tape_avjp(t, Y, k == 0 ? &wa : &wfa, NULL, 0, NULL, &X, 1, &gp));
        const double *got = k == 2 ? w : g;
        for (size_t i = 0; i < 4; i++) {
            double h = 1e-6, v = x[i], c = wbuf[2 * i];
            g2[i] = c * ((atan(v + h) * (v + h) - atan(v - h) * (v - h)) / (2 * h));
            ASSERT_CLOSE(got[i], g2[i], 1e-8);
        }
    }
    cr_tape_free(t);
}

static cr_var prog_small(cr_tape *t, cr_avar X, const void *env)
{
    (void)env;
    cr_avar a =
        bc2(t, &cr_fn_hypot, cr_targ_arr(bc1_kernel_vs_rules(t, &cr_fn_sin, cr_targ_arr(X))),
            cr_targ_arr(X));
    return cr_av_sum(t, bc2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(X)));
}

/* Caller buffers of every size up to the one that fits: CR_EARENA, sticky, then the same
 * tape reset records and differentiates the program as a roomy tape does. */
static void test_caller_buffers(void **state)
{
    fixture *f = *state;
    double x[40], g[40], want[40], yw;
    for (size_t i = 0; i < 40; i++)
        x[i] = 0.1 * (double)i - 1.7;
    cr_array xa = cr_array_vector(x, 40), ga = cr_array_vector(g, 40),
             wa = cr_array_vector(want, 40);
    assert_int_equal(eval_prog(f->ctx, NULL, prog_small, &xa, NULL, &yw, &wa), CR_OK);
    static unsigned char buf[16384];
    bool fitted = false;
    for (size_t size = 256; size <= sizeof buf && !fitted; size += 64) {
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp, .buffer = buf, .buffer_size = size};
        if (cr_tape_new(f->ctx, &tp, &t) != CR_OK)
            continue;
        cr_avar X = cr_tape_array_input(t, &xa);
        cr_var y = prog_small(t, X, NULL);
        cr_array *gp = &ga;
        cr_status st = cr_tape_status(t);
        if (st == CR_OK)
            st = cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp);
        if (st == CR_OK) {
            fitted = true;
            ASSERT_DBL(y.v, yw);
            for (size_t i = 0; i < 40; i++)
                ASSERT_DBL(g[i], want[i]);
        } else {
            assert_int_equal(st, CR_EARENA);
            assert_int_equal(cr_tape_status(t), CR_EARENA); /* sticky */
            (void)bc1_kernel_vs_rules(t, &cr_fn_exp, cr_targ_arr(X));
            assert_int_equal(cr_tape_status(t), CR_EARENA);
            /* a small program fits after the reset */
            cr_tape_reset(t);
            double s2[2] = {0.5, 1.5}, g2[2];
            cr_array sa = cr_array_vector(s2, 2), g2a = cr_array_vector(g2, 2), *g2p = &g2a;
            cr_avar S = cr_tape_array_input(t, &sa);
            cr_var z = cr_av_sum(t, bc1_kernel_vs_rules(t, &cr_fn_sin, cr_targ_arr(S)));
            if (cr_tape_status(t) == CR_OK &&
                cr_tape_gradient_arrays(t, z, NULL, 0, NULL, &S, 1, &g2p) == CR_OK) {
                ASSERT_DBL(g2[0], cos(0.5));
                ASSERT_DBL(g2[1], cos(1.5));
            }
        }
        cr_tape_free(t);
    }
    assert_true(fitted);
}

/* Every allocation failing in turn (a context whose hook fails the N-th): CR_ENOMEM, no crash,
 * nothing live once freed; the first run that succeeds gives the gradient of a plain run. */
static void test_alloc_failures(void **state)
{
    fixture *f = *state;
    double x[6] = {0.2, -0.4, 0.7, 0.1, -0.9, 0.5}, g[6], want[6], yw, y;
    cr_array xa = cr_array_matrix(x, 2, 3), ga = cr_array_matrix(g, 2, 3),
             wa = cr_array_matrix(want, 2, 3);
    assert_int_equal(eval_prog(f->ctx, NULL, prog_inter, &xa, NULL, &yw, &wa), CR_OK);
    bool done = false;
    for (size_t n = 1; n < 400 && !done; n++) {
        counter c = {0, 0, 0};
        cr_ctx_params cp = {.realloc_fn = counting_realloc, .alloc_env = &c};
        cr_ctx *ctx;
        assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
        c.fail_at = c.allocs + n;
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp, .block_size = 256};
        if (cr_tape_new(ctx, &tp, &t) == CR_OK) {
            cr_avar X = cr_tape_array_input(t, &xa);
            cr_var v = prog_inter(t, X, NULL);
            cr_array *gp = &ga;
            cr_status st = cr_tape_status(t);
            if (st == CR_OK)
                st = cr_tape_gradient_arrays(t, v, NULL, 0, NULL, &X, 1, &gp);
            if (st == CR_OK && c.allocs < c.fail_at) {
                done = true;
                y = v.v;
                ASSERT_DBL(y, yw);
                for (size_t i = 0; i < 6; i++)
                    ASSERT_DBL(g[i], want[i]);
            } else {
                assert_int_equal(st, CR_ENOMEM);
            }
            cr_tape_free(t);
        }
        cr_ctx_free(ctx);
        assert_int_equal(c.live, 0);
    }
    assert_true(done);
}

static int run_kernel_vs_rules(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)
    const struct CMUnitTest kernel_vs_rules[] = {
        T(test_rows_vs_generic_unary),
        T(test_rows_vs_generic_binary),
        T(test_rows_vs_generic_ternary),
        T(test_hessian_scalar_inputs),
        T(test_layouts),
        T(test_bad_arrays),
        T(test_fallbacks_kernel_vs_rules),
        T(test_prepared_inputs),
        T(test_interplay),
        T(test_avjp_seeds),
        T(test_caller_buffers),
        T(test_alloc_failures),
    };
#undef T
    return cmocka_run_group_tests(kernel_vs_rules, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_tape_bcast();
    failed += run_kernel_vs_rules();
    return failed;
}
