/*
 * Tests of the inline forward mode (dual_inline.h): for every scalar row of the table
 * (a loop over CR__DUAL_ROWS, the list dual_inline_rows.h is generated with),
 *   - the value of cr_dual1_NAME is the row's primal, and its tangent along each argument
 *     agrees with a central finite difference of the row's primal (cr_fd_derivative) at
 *     random points of the row's sampling box;
 *   - the run-time vector mode (cr_dualv_NAME, 5 directions) and the compile-time one
 *     (CR_DUALN_DEFINE, 3 and 16 directions) give, direction by direction, what the
 *     one-direction mode gives for the same tangents;
 * and the table covers every row of the built-in registry; the IEEE products at infinite
 * partials; the constructors; a composite function's gradient against differences, and
 * the same gradient in two stages on different types composed by TYPE_chain.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

CR_DUALN_DEFINE(dual3, 3);
CR_DUALN_DEFINE(dual16, 16);

enum { NV = 5 };

typedef struct entry {
    const char *name;
    unsigned nin, nout;
    const cr_value *fn;
    /* y[0..nout) from x[0..nin) in each form */
    void (*one)(const cr_dual1 *x, cr_dual1 *y);
    void (*vec)(const double *x, const double *dx, double *y, double *dy); /* NV dirs */
    void (*n3)(const dual3 *x, dual3 *y);
    void (*n16)(const dual16 *x, dual16 *y);
} entry;

/* Adapters from the operations' signatures to the entry's. dx holds NV tangents per
 * argument, dy NV per result. */
#define ADAPT1(TYPE, N, NAME)                                                        \
    static void one_##NAME(const cr_dual1 *x, cr_dual1 *y)                           \
    {                                                                                \
        y[0] = cr_dual1_##NAME(x[0]);                                                \
    }                                                                                \
    static void vec_##NAME(const double *x, const double *dx, double *y, double *dy) \
    {                                                                                \
        y[0] = cr_dualv_##NAME(NV, x[0], dx, dy);                                    \
    }                                                                                \
    static void n3_##NAME(const dual3 *x, dual3 *y)                                  \
    {                                                                                \
        y[0] = dual3_##NAME(x[0]);                                                   \
    }                                                                                \
    static void n16_##NAME(const dual16 *x, dual16 *y)                               \
    {                                                                                \
        y[0] = dual16_##NAME(x[0]);                                                  \
    }
#define ADAPT2(TYPE, N, NAME)                                                        \
    static void one_##NAME(const cr_dual1 *x, cr_dual1 *y)                           \
    {                                                                                \
        y[0] = cr_dual1_##NAME(x[0], x[1]);                                          \
    }                                                                                \
    static void vec_##NAME(const double *x, const double *dx, double *y, double *dy) \
    {                                                                                \
        y[0] = cr_dualv_##NAME(NV, x[0], dx, x[1], dx + NV, dy);                     \
    }                                                                                \
    static void n3_##NAME(const dual3 *x, dual3 *y)                                  \
    {                                                                                \
        y[0] = dual3_##NAME(x[0], x[1]);                                             \
    }                                                                                \
    static void n16_##NAME(const dual16 *x, dual16 *y)                               \
    {                                                                                \
        y[0] = dual16_##NAME(x[0], x[1]);                                            \
    }
#define ADAPT3(TYPE, N, NAME)                                                        \
    static void one_##NAME(const cr_dual1 *x, cr_dual1 *y)                           \
    {                                                                                \
        y[0] = cr_dual1_##NAME(x[0], x[1], x[2]);                                    \
    }                                                                                \
    static void vec_##NAME(const double *x, const double *dx, double *y, double *dy) \
    {                                                                                \
        y[0] = cr_dualv_##NAME(NV, x[0], dx, x[1], dx + NV, x[2], dx + 2 * NV, dy);  \
    }                                                                                \
    static void n3_##NAME(const dual3 *x, dual3 *y)                                  \
    {                                                                                \
        y[0] = dual3_##NAME(x[0], x[1], x[2]);                                       \
    }                                                                                \
    static void n16_##NAME(const dual16 *x, dual16 *y)                               \
    {                                                                                \
        y[0] = dual16_##NAME(x[0], x[1], x[2]);                                      \
    }
#define ADAPTM(TYPE, N, NAME, NOUT)                                                  \
    static void one_##NAME(const cr_dual1 *x, cr_dual1 *y)                           \
    {                                                                                \
        cr_dual1_##NAME(x[0], y);                                                    \
    }                                                                                \
    static void vec_##NAME(const double *x, const double *dx, double *y, double *dy) \
    {                                                                                \
        cr_dualv_##NAME(NV, x[0], dx, y, dy);                                        \
    }                                                                                \
    static void n3_##NAME(const dual3 *x, dual3 *y)                                  \
    {                                                                                \
        dual3_##NAME(x[0], y);                                                       \
    }                                                                                \
    static void n16_##NAME(const dual16 *x, dual16 *y)                               \
    {                                                                                \
        dual16_##NAME(x[0], y);                                                      \
    }

CR__DUAL_ROWS(ADAPT1, ADAPT2, ADAPT3, ADAPTM, _, _)

#define ENTRY(NAME, NIN, NOUT) \
    {#NAME, NIN, NOUT, &cr_fn_##NAME, one_##NAME, vec_##NAME, n3_##NAME, n16_##NAME},
#define ENTRY1(TYPE, N, NAME)       ENTRY(NAME, 1, 1)
#define ENTRY2(TYPE, N, NAME)       ENTRY(NAME, 2, 1)
#define ENTRY3(TYPE, N, NAME)       ENTRY(NAME, 3, 1)
#define ENTRYM(TYPE, N, NAME, NOUT) ENTRY(NAME, 1, NOUT)

static const entry k_rows[] = {CR__DUAL_ROWS(ENTRY1, ENTRY2, ENTRY3, ENTRYM, _, _)};
enum { NROWS = sizeof k_rows / sizeof k_rows[0] };

static const cr_scalar_rule *row_of(const entry *e)
{
    return cr_scalar_rule_of(e->fn->u.func.fn);
}

/* A uniform double in [lo, hi) from a 64-bit LCG. */
static double uniform(uint64_t *s, double lo, double hi)
{
    *s = *s * 6364136223846793005u + 1442695040888963407u;
    return lo + (hi - lo) * (double)(*s >> 11) * 0x1p-53;
}

/* The sampling box of argument j (the row's test registration; [-3, 3] by default). */
static void box(const cr_scalar_rule *r, unsigned j, double *lo, double *hi)
{
    *lo = r->test.lo != NULL ? r->test.lo[j] : -3.0;
    *hi = r->test.hi != NULL ? r->test.hi[j] : 3.0;
}

/* Output k of the row's primal as a function of argument j, the others fixed. */
typedef struct fd_env {
    const cr_scalar_rule *row;
    double x[CR_SCALAR_MAX_IN];
    unsigned j, k;
} fd_env;

static cr_status primal_j(double t, double *y, void *env)
{
    fd_env *e = env;
    double x[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_OUT];
    memcpy(x, e->x, sizeof x);
    x[e->j] = t;
    e->row->f64(x, Y, D);
    *y = Y[e->k];
    return CR_OK;
}

static void test_table_covers_registry(void **state)
{
    (void)state;
    assert_int_equal(NROWS, CR__DUAL_NROWS);
    /* every scalar row of the built-in registry has its operations */
    const cr_registry *reg = cr_registry_builtin();
    size_t missing = 0;
    for (size_t i = 0; i < cr_registry_size(reg); i++) {
        cr_rule_info info;
        assert_int_equal(cr_registry_get(reg, i, &info), CR_OK);
        const cr_scalar_rule *r = cr_scalar_rule_of(info.fn);
        if (r == NULL || info.non_differentiable || info.def->udata != r)
            continue;
        bool found = false;
        for (size_t k = 0; k < NROWS; k++)
            if (row_of(&k_rows[k]) == r)
                found = true;
        if (!found) {
            print_error("row %s has no inline dual operations\n", info.fn->name);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
    for (size_t k = 0; k < NROWS; k++) {
        const cr_scalar_rule *r = row_of(&k_rows[k]);
        assert_non_null(r);
        assert_int_equal(r->nin, k_rows[k].nin);
        assert_int_equal(r->nout, k_rows[k].nout);
    }
}

/* Every row's tangents against central differences of its primal. */
static void test_rows_against_fd(void **state)
{
    (void)state;
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    uint64_t seed = 12345;
    size_t failures = 0, checked_total = 0;
    for (size_t k = 0; k < NROWS; k++) {
        const entry *e = &k_rows[k];
        const cr_scalar_rule *r = row_of(e);
        size_t checked = 0;
        for (int p = 0; p < 12; p++) {
            fd_env env = {.row = r};
            double lo[CR_SCALAR_MAX_IN], hi[CR_SCALAR_MAX_IN];
            for (unsigned j = 0; j < e->nin; j++) {
                box(r, j, &lo[j], &hi[j]);
                env.x[j] = uniform(&seed, lo[j], hi[j]);
            }
            double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_OUT];
            r->f64(env.x, Y, D);
            for (unsigned j = 0; j < e->nin; j++) {
                cr_dual1 x[CR_SCALAR_MAX_IN], y[CR_SCALAR_MAX_OUT];
                for (unsigned i = 0; i < e->nin; i++)
                    x[i] = i == j ? cr_dual1_var(env.x[i]) : cr_dual1_const(env.x[i]);
                e->one(x, y);
                /* stay inside the box, whose edges may be the domain's */
                double range = fmin(env.x[j] - lo[j], hi[j] - env.x[j]);
                range = fmin(0.5 * range, 1e-2 * (1.0 + fabs(env.x[j])));
                if (!(range > 0))
                    continue;
                cr_fd_opts opts = {.max_range = range};
                for (unsigned o = 0; o < e->nout; o++) {
                    if (!(y[o].v == Y[o]) && !(isnan(y[o].v) && isnan(Y[o]))) {
                        print_error("%s: value %.17g, row %.17g\n", e->name, y[o].v, Y[o]);
                        failures++;
                    }
                    env.j = j;
                    env.k = o;
                    double d = (double)NAN, err = (double)NAN;
                    if (!isfinite(Y[o]) ||
                        cr_fd_derivative(&m, &opts, primal_j, &env, env.x[j], &d, &err) != CR_OK)
                        continue;
                    double scale = fabs(d) + fabs(y[o].d);
                    /* a difference that says itself it is unreliable (a kink or a jump
                     * within reach, an integer argument) proves nothing either way */
                    if (!(err <= 1e-7 * (1.0 + scale)))
                        continue;
                    checked++;
                    if (!(fabs(y[o].d - d) <= 1e-6 * scale + 1e-9 + 10 * err)) {
                        print_error("%s: ∂y%u/∂x%u at (%.17g, %.17g, %.17g) = %.17g, FD %.17g "
                                    "(err %.3g)\n",
                                    e->name, o, j, env.x[0], env.x[1], env.x[2], y[o].d, d, err);
                        failures++;
                    }
                }
            }
        }
        if (checked < 6) {
            print_error("%s: only %zu derivatives could be checked\n", e->name, checked);
            failures++;
        }
        checked_total += checked;
    }
    assert_int_equal(failures, 0);
    assert_true(checked_total > 10 * NROWS);
}

/* The vector modes against the one-direction mode, direction by direction. */
static void test_vector_modes_match_scalar(void **state)
{
    (void)state;
    uint64_t seed = 777;
    size_t failures = 0;
    for (size_t k = 0; k < NROWS; k++) {
        const entry *e = &k_rows[k];
        const cr_scalar_rule *r = row_of(e);
        for (int p = 0; p < 4; p++) {
            double x[CR_SCALAR_MAX_IN], dx[CR_SCALAR_MAX_IN * 16];
            for (unsigned j = 0; j < e->nin; j++) {
                double lo, hi;
                box(r, j, &lo, &hi);
                x[j] = uniform(&seed, lo, hi);
                for (unsigned i = 0; i < 16; i++)
                    /* some directions leave an argument still: exact zeros */
                    dx[j * 16 + i] = (i + j) % 4 == 3 ? 0.0 : uniform(&seed, -2, 2);
            }
            /* run-time: NV directions (argument j's tangents at dx + j * NV) */
            double xv[CR_SCALAR_MAX_IN * NV], yv[CR_SCALAR_MAX_OUT], dyv[CR_SCALAR_MAX_OUT * NV];
            for (unsigned j = 0; j < e->nin; j++)
                memcpy(xv + j * NV, dx + j * 16, NV * sizeof(double));
            e->vec(x, xv, yv, dyv);
            dual3 a3[CR_SCALAR_MAX_IN], y3[CR_SCALAR_MAX_OUT];
            dual16 a16[CR_SCALAR_MAX_IN], y16[CR_SCALAR_MAX_OUT];
            for (unsigned j = 0; j < e->nin; j++) {
                a3[j] = dual3_make(x[j], dx + j * 16);
                a16[j] = dual16_make(x[j], dx + j * 16);
            }
            e->n3(a3, y3);
            e->n16(a16, y16);
            for (unsigned i = 0; i < 16; i++) {
                cr_dual1 a[CR_SCALAR_MAX_IN], y[CR_SCALAR_MAX_OUT];
                for (unsigned j = 0; j < e->nin; j++)
                    a[j] = cr_dual1_make(x[j], dx[j * 16 + i]);
                e->one(a, y);
                for (unsigned o = 0; o < e->nout; o++) {
                    double want = y[o].d, tol = 1e-14 * (1 + fabs(want));
                    double got16 = y16[o].d[i];
#define SAME(g) ((isnan(want) && isnan(g)) || fabs((g)-want) <= tol || (g) == want)
                    bool ok = SAME(got16) && y16[o].v == y[o].v;
                    if (i < 3)
                        ok = ok && SAME(y3[o].d[i]) && y3[o].v == y[o].v;
                    if (i < NV)
                        ok = ok && SAME(dyv[o * NV + i]) && yv[o] == y[o].v;
#undef SAME
                    if (!ok && !isnan(y[o].v)) {
                        print_error("%s: direction %u output %u: one %.17g, N=16 %.17g\n", e->name,
                                    i, o, want, got16);
                        failures++;
                    }
                }
            }
        }
    }
    assert_int_equal(failures, 0);
}

/* IEEE products: a zero tangent through a finite partial gives 0; through an infinite one
 * (sqrt and log at 0) it gives NaN, in every form, as ForwardDiff does. */
static void test_ieee_products(void **state)
{
    (void)state;
    cr_dual1 c = cr_dual1_mul(cr_dual1_const(3.0), cr_dual1_var(2.0));
    ASSERT_DBL(c.d, 3.0);
    ASSERT_DBL(cr_dual1_mul(cr_dual1_const(3.0), cr_dual1_const(2.0)).d, 0.0);
    assert_true(isnan(cr_dual1_sqrt(cr_dual1_const(0.0)).d));
    assert_true(isinf(cr_dual1_sqrt(cr_dual1_var(0.0)).d));

    /* c moving along direction 1 only: inf there, NaN along the others */
    dual3 w = dual3_sqrt(dual3_var(0.0, 1));
    assert_true(isnan(w.d[0]));
    assert_true(isinf(w.d[1]) && w.d[1] > 0);
    assert_true(isnan(w.d[2]));
    double da[4] = {0.0, 1.0, 0.0, -1.0}, dy[4];
    ASSERT_DBL(cr_dualv_log(4, 0.0, da, dy), -(double)INFINITY);
    assert_true(isnan(dy[0]) && isnan(dy[2]));
    assert_true(isinf(dy[1]) && dy[1] > 0);
    assert_true(isinf(dy[3]) && dy[3] < 0);
}

static void test_constructors(void **state)
{
    (void)state;
    cr_dual1 a = cr_dual1_const(1.5), b = cr_dual1_var(2.5), c = cr_dual1_make(3.5, -2.0);
    ASSERT_DBL(a.v, 1.5);
    ASSERT_DBL(a.d, 0.0);
    ASSERT_DBL(b.d, 1.0);
    ASSERT_DBL(c.v, 3.5);
    ASSERT_DBL(c.d, -2.0);
    dual3 v = dual3_var(4.0, 2), k = dual3_var(4.0, 3);
    ASSERT_DBL(v.d[0], 0.0);
    ASSERT_DBL(v.d[1], 0.0);
    ASSERT_DBL(v.d[2], 1.0);
    for (int i = 0; i < 4; i++)
        ASSERT_DBL(k.d[i], 0.0); /* past the last direction: a constant */
    /* the lane past N (3 rounded up to 4) stays zero through the operations */
    dual3 z = dual3_exp(dual3_mul(v, dual3_make(1.0, (const double[]){1.0, 2.0, 3.0})));
    ASSERT_DBL(z.d[3], 0.0);
    assert_int_equal(sizeof z.d / sizeof z.d[0], 4);
    /* a result may overwrite an operand's tangents (dy == da) */
    double t[3] = {1.0, 2.0, 3.0};
    double y = cr_dualv_sin(3, 0.5, t, t);
    ASSERT_DBL(y, sin(0.5));
    for (int i = 0; i < 3; i++)
        ASSERT_DBL(t[i], cos(0.5) * (double)(i + 1));
}

/* f(x) = asin(0.2 + sin(x0)) * tanh(x1) / hypot(x2, logistic(x0 x1)) + atan2(x1, x2),
 * its gradient in one evaluation of dual3, against differences in plain C. */
static double f_plain(const double *x)
{
    double lg = 1.0 / (1.0 + exp(-x[0] * x[1]));
    return asin(0.2 + sin(x[0])) * tanh(x[1]) / hypot(x[2], lg) + atan2(x[1], x[2]);
}

typedef struct fenv {
    double x[3];
    int j;
} fenv;

static cr_status f_j(double t, double *y, void *env)
{
    fenv *e = env;
    double x[3] = {e->x[0], e->x[1], e->x[2]};
    x[e->j] = t;
    *y = f_plain(x);
    return CR_OK;
}

static void test_composite_gradient(void **state)
{
    (void)state;
    const double x0[3] = {0.4, -0.7, 1.3};
    dual3 x[3];
    for (int j = 0; j < 3; j++)
        x[j] = dual3_var(x0[j], (size_t)j);
    dual3 num =
        dual3_mul(dual3_asin(dual3_add(dual3_const(0.2), dual3_sin(x[0]))), dual3_tanh(x[1]));
    dual3 den = dual3_hypot(x[2], dual3_logistic(dual3_mul(x[0], x[1])));
    dual3 f = dual3_add(dual3_div(num, den), dual3_atan2(x[1], x[2]));
    assert_true(fabs(f.v - f_plain(x0)) <= 1e-15);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    for (int j = 0; j < 3; j++) {
        fenv e = {{x0[0], x0[1], x0[2]}, j};
        double d;
        assert_int_equal(cr_fd_derivative(&m, NULL, f_j, &e, x0[j], &d, NULL), CR_OK);
        assert_true(fabs(f.d[j] - d) <= 1e-8 * (1 + fabs(d)));
    }
}

/* The same f in two stages: u = (asin(0.2 + sin x0) tanh x1, hypot(x2, logistic(x0 x1)),
 * atan2(x1, x2)) on dual16 (x along directions 0..2, the others zero), then f = u0 / u1 + u2
 * on dual3 seeded on u; dual16_chain carries f's tangents back to x. Against differences
 * of f_plain; the directions no input was seeded on stay zero. */
static void test_chain_stages(void **state)
{
    (void)state;
    const double x0[3] = {0.4, -0.7, 1.3};
    dual16 x[3], u[3];
    for (int j = 0; j < 3; j++)
        x[j] = dual16_var(x0[j], (size_t)j);
    u[0] =
        dual16_mul(dual16_asin(dual16_add(dual16_const(0.2), dual16_sin(x[0]))), dual16_tanh(x[1]));
    u[1] = dual16_hypot(x[2], dual16_logistic(dual16_mul(x[0], x[1])));
    u[2] = dual16_atan2(x[1], x[2]);
    dual3 v[3];
    for (int k = 0; k < 3; k++)
        v[k] = dual3_var(u[k].v, (size_t)k);
    dual3 f = dual3_add(dual3_div(v[0], v[1]), v[2]);
    dual16 g = dual16_chain(f.v, 3, f.d, u);
    assert_true(g.v == f.v);
    assert_true(fabs(g.v - f_plain(x0)) <= 1e-15);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    for (int j = 0; j < 3; j++) {
        fenv e = {{x0[0], x0[1], x0[2]}, j};
        double d;
        assert_int_equal(cr_fd_derivative(&m, NULL, f_j, &e, x0[j], &d, NULL), CR_OK);
        assert_true(fabs(g.d[j] - d) <= 1e-8 * (1 + fabs(d)));
    }
    for (int j = 3; j < 16; j++)
        assert_true(g.d[j] == 0.0);
}

/* TYPE_chain's sum: no intermediate gives zero tangents; one intermediate of partial p
 * gives p times its tangents; the partials of several add up, in every lane. */
static void test_chain_sums(void **state)
{
    (void)state;
    dual16 u[2];
    double t0[16], t1[16];
    for (int i = 0; i < 16; i++) {
        t0[i] = (double)i - 5.5;
        t1[i] = 0.25 * (double)(i * i);
    }
    u[0] = dual16_make(1.0, t0);
    u[1] = dual16_make(2.0, t1);
    const double p[2] = {3.0, -0.5};
    dual16 z = dual16_chain(7.0, 0, p, u);
    dual16 one = dual16_chain(7.0, 1, p, u);
    dual16 two = dual16_chain(7.0, 2, p, u);
    assert_true(z.v == 7.0 && one.v == 7.0 && two.v == 7.0);
    for (int i = 0; i < 16; i++) {
        assert_true(z.d[i] == 0.0);
        assert_true(one.d[i] == 3.0 * t0[i]);
        assert_true(two.d[i] == 3.0 * t0[i] - 0.5 * t1[i]);
    }
    dual3 w = dual3_var(0.0, 1);
    dual3 y = dual3_chain(-1.0, 1, p + 1, &w);
    assert_true(y.d[0] == 0.0 && y.d[1] == -0.5 && y.d[2] == 0.0 && y.d[3] == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_covers_registry),
        cmocka_unit_test(test_rows_against_fd),
        cmocka_unit_test(test_vector_modes_match_scalar),
        cmocka_unit_test(test_ieee_products),
        cmocka_unit_test(test_constructors),
        cmocka_unit_test(test_composite_gradient),
        cmocka_unit_test(test_chain_stages),
        cmocka_unit_test(test_chain_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
