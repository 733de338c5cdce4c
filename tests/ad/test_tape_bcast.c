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
    return cr_abroadcast1(t, f, cr_targ_arr(x));
}

static cr_avar bc2(cr_tape *t, const cr_value *f, cr_targ x, cr_targ y)
{
    return cr_abroadcast2(t, f, x, y);
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
    return cr_add(t, cr_asum(t, bc2(t, &cr_fn_mul, cr_targ_arr(ab), cr_targ_arr(c))),
                  cr_asum(t, d));
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
    cr_avar m = cr_amatmul(t, bc2(t, &cr_fn_add, cr_targ_arr(ph), cr_targ_arr(at)), cr_aconst(&B));
    return cr_asum(t, m);
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
    return cr_mul(t, s[1], cr_add(t, cr_asum(t, ab), cr_asum(t, de)));
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
    cr_var a = cr_adot(t, X[0], X[1]);
    cr_var b = cr_adot(t, bc1(t, &cr_fn_sin, X[0]), cr_aconst(&C));
    cr_var d = cr_adot(t, X[1], X[1]);
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
    return cr_asum(t, m);
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
    cr_var d = cr_adot(t, X, Y);
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
        cr_avar Y = one ? bc1(t, fn, X) : bc2(t, fn, cr_targ_arr(X), cr_targ_arr(cr_aconst(&wa)));
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
    cr_var y = cr_asum(
        t, bc2(t, &cr_fn_mul, cr_targ_arr(bc1(t, &cr_fn_sin, X)), cr_targ_arr(cr_aconst(&ca))));
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
    cr_var y = cr_asum(t, bc2(t, &cr_fn_mul, cr_targ_arr(S), cr_targ_arr(X)));
    assert_true(y.v == 0.0);
    assert_ok(t, cr_tape_gradient_arrays(t, y, NULL, 0, NULL, &X, 1, &gp));
    assert_true(g[0] == 42);
    cr_tape_free(t);
}

/* ---- Prepared replays ---------------------------------------------------------------------- */

static cr_status mse_fn(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    cr_avar d = bc2(t, &cr_fn_sub, cr_targ_arr(xs[0]), cr_targ_arr(cr_aconst(env)));
    cr_avar e = bc2(t, &cr_fn_mul, cr_targ_arr(bc1(t, &cr_fn_tanh, d)), cr_targ_arr(xs[1]));
    cr_var s = cr_asum(t, bc1(t, &cr_fn_square, e));
    /* a product that needs e's 2x3 shape at every replay */
    static double b[3] = {0.5, -1.0, 2.0};
    static cr_array B;
    B = cr_array_matrix(b, 3, 1);
    cr_var m = cr_asum(t, cr_amatmul(t, e, cr_aconst(&B)));
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
    cr_var y = cr_add(t, cr_asum(t, bc1(t, &cr_fn_sin, X)), cr_adot(t, X, cr_aconst(&ca)));
    y = cr_add(t, y, cr_asum(t, cr_tape_acall_a(t, &cr_fn_map, neg, 2)));
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
    cr_var y = cr_asum(t, P);
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

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, fixture_setup, fixture_teardown)
    const struct CMUnitTest tests[] = {
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
    return cmocka_run_group_tests(tests, NULL, NULL);
}
