/*
 * Tests of prepared gradients (record once, replay at new inputs): gradients at new points
 * against Rosenbrock's hand-derived gradient and against central differences of functions
 * in plain C (rows with constants, tuple results, three-argument rows, repeated operands,
 * overlays); no allocation during replays; comparisons recorded with cr_tape_cmp that come
 * out otherwise fail the replay instead of giving the other branch's gradient; a rule kept
 * as a pullback is replayed; shape changes and inputs made inside the function are refused;
 * allocation failures while preparing.
 */
#include <math.h>
#include <stdio.h>

#include "test_alloc.h"
#include "test_fault_hook.h"
#include "test_rosen.h"
#include "test_util.h"

#define FD_RTOL 1e-8

static void test_rosenbrock_replay(void **state)
{
    (void)state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    enum { N = 300 };
    double x[N], g[N], want[N], y;
    for (size_t i = 0; i < N; i++)
        x[i] = 0.5;
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(ctx, NULL, rosen_t, NULL, x, N, &p), CR_OK);
    size_t allocs = c.allocs;
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < N; i++)
            x[i] = 0.3 + 0.6 * sin(0.7 * (double)i + round);
        assert_int_equal(cr_prepared_value_and_gradient(p, x, N, &y, g), CR_OK);
        rosen_grad(x, N, want);
        double fy = 0;
        for (size_t i = 0; i + 1 < N; i++)
            fy += 100 * pow(x[i + 1] - x[i] * x[i], 2) + pow(1 - x[i], 2);
        assert_close(y, fy, 1e-13);
        for (size_t i = 0; i < N; i++)
            assert_close(g[i], want[i], 1e-12);
    }
    assert_int_equal(c.allocs, allocs); /* replays allocate nothing */
    /* Another number of inputs */
    assert_int_equal(cr_prepared_value_and_gradient(p, x, N - 1, &y, g), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(ctx), "prepared for 300 inputs, 299 given");
    cr_prepared_free(p);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* k(x) = pow(x0, 3) sin(x1) + muladd(x0, x1, x2) x2 + 2.5 x0 x0 + sincos(x1) product
 *        + exp(x2) / 4 - (x1 - x1) */
static double k_c(const double *x)
{
    return pow(x[0], 3) * sin(x[1]) + (x[0] * x[1] + x[2]) * x[2] + 2.5 * x[0] * x[0] +
           sin(x[1]) * cos(x[1]) + exp(x[2]) / 4;
}

static cr_status k_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = k_c(x);
    return CR_OK;
}

static cr_status k_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var pa[2] = {x[0], cr_const(3.0)}, ma[3] = {x[0], x[1], x[2]}, sc[2];
    cr_var a = cr_mul(t, cr_tape_call1(t, &cr_fn_pow, pa, 2), cr_sin(t, x[1]));
    cr_var b = cr_mul(t, cr_tape_call1(t, &cr_fn_muladd, ma, 3), x[2]);
    cr_var c = cr_mul(t, cr_const(2.5), cr_mul(t, x[0], x[0]));
    cr_tape_call(t, &cr_fn_sincos, &x[1], 1, sc, 2);
    cr_var d = cr_add(t, cr_mul(t, sc[0], sc[1]), cr_div(t, cr_exp(t, x[2]), cr_const(4.0)));
    y[0] = cr_sub(t, cr_add(t, cr_add(t, a, b), cr_add(t, c, d)), cr_sub(t, x[1], x[1]));
    return cr_tape_status(t);
}

static void test_rows_replay(void **state)
{
    fixture *f = *state;
    const double x0[3] = {0.4, 1.1, -0.3};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, k_t, NULL, x0, 3, &p), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    const double pts[][3] = {{0.4, 1.1, -0.3}, {1.3, -0.2, 0.8}, {-0.9, 2.0, 0.1}};
    for (size_t i = 0; i < 3; i++) {
        double y, g[3], fd[3];
        assert_int_equal(cr_prepared_value_and_gradient(p, pts[i], 3, &y, g), CR_OK);
        assert_close(y, k_c(pts[i]), 1e-14);
        assert_int_equal(cr_fd_jacobian(&m, NULL, k_fd, NULL, pts[i], 3, 1, f->arena, fd, NULL),
                         CR_OK);
        for (size_t j = 0; j < 3; j++)
            assert_close(g[j], fd[j], FD_RTOL);
    }
    cr_prepared_free(p);
}

/* h(x) = x^2 if x > 0 else -x^3, branching through the tape */
static cr_status branchy(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    if (cr_tape_cmp(t, x[0], CR_CMP_GT, cr_const(0.0)))
        y[0] = cr_mul(t, x[0], x[0]);
    else
        y[0] = cr_neg(t, cr_mul(t, x[0], cr_mul(t, x[0], x[0])));
    return cr_tape_status(t);
}

static void test_branch_guard(void **state)
{
    fixture *f = *state;
    double x = 1.0, y, g;
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, branchy, NULL, &x, 1, &p), CR_OK);
    x = 2.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(y, 4.0, 0);
    assert_close(g, 4.0, 0);
    /* The other branch: refused, nothing written. */
    x = -1.0;
    y = g = 42.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "-1 > 0");
    assert_contains(cr_ctx_errmsg(f->ctx), "prepare it again");
    assert_true(y == 42.0 && g == 42.0);
    /* Still usable where the recording holds. */
    x = 3.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(g, 6.0, 0);
    cr_prepared_free(p);
    /* Prepared on the other side, the other branch is checked the same way. */
    x = -2.0;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, branchy, NULL, &x, 1, &p), CR_OK);
    x = -1.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(g, -3.0, 0);
    x = 0.5;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_EDOMAIN);
    cr_prepared_free(p);
}

/* clampish(x) = 2 if x < 0.5 else x^2: a branch that makes the output a constant */
static cr_status clampish(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    if (cr_tape_cmp(t, x[0], CR_CMP_LT, cr_const(0.5)))
        y[0] = cr_const(2.0);
    else
        y[0] = cr_mul(t, x[0], x[0]);
    return cr_tape_status(t);
}

/* A constant output still depends on the comparisons that chose it: a replay where one
 * comes out otherwise is refused (it used to return the constant and a zero gradient). */
static void test_branch_to_constant(void **state)
{
    fixture *f = *state;
    double x = 0.0, y, g, v = 1.0, hv;
    cr_prepared *p, *ph;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, clampish, NULL, &x, 1, &p), CR_OK);
    assert_int_equal(cr_prepare_hvp(f->ctx, NULL, clampish, NULL, &x, 1, &ph), CR_OK);
    x = 0.25;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    ASSERT_DBL(y, 2.0);
    ASSERT_DBL(g, 0.0);
    assert_int_equal(cr_prepared_hvp(ph, &x, 1, &v, &hv, &y, &g), CR_OK);
    ASSERT_DBL(y, 2.0);
    ASSERT_DBL(g, 0.0);
    ASSERT_DBL(hv, 0.0);
    x = 1.0;
    y = g = hv = 42.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "the comparison 1 < 0.5");
    assert_true(y == 42.0 && g == 42.0);
    assert_int_equal(cr_prepared_hvp(ph, &x, 1, &v, &hv, &y, &g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "the comparison 1 < 0.5");
    assert_true(y == 42.0 && g == 42.0 && hv == 42.0);
    assert_int_equal(cr_prepared_value_and_gradient(ph, &x, 1, &y, &g), CR_EDOMAIN);
    x = -3.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    ASSERT_DBL(y, 2.0);
    assert_int_equal(cr_prepared_hvp(ph, &x, 1, &v, &hv, &y, &g), CR_OK);
    ASSERT_DBL(hv, 0.0);
    cr_prepared_free(p);
    cr_prepared_free(ph);
}

/* A pullback replayed; refusals: inputs made inside the function */
static cr_status twice_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(2 * args[0].u.f64);
    return CR_OK;
}
static const cr_function twice_fn = {.name = "twice", .arity = 1, .primal = twice_primal};

static cr_status twice_pb(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                          void *env)
{
    (void)nx;
    (void)arena;
    (void)env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(2 * dy->u.f64);
    return CR_OK;
}

static cr_status twice_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){twice_pb, NULL, "twice_pullback", 2};
    return twice_primal(arena, fv, args, nargs, y);
}

static cr_status uses_twice(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    cr_value *tw = env;
    y[0] = cr_tape_call1(t, tw, x, 1);
    return cr_tape_status(t);
}

static cr_status twice_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_add(t, x[0], x[0]);
    return cr_tape_status(t);
}

static cr_status own_input(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], cr_tape_input(t, 2.0));
    return cr_tape_status(t);
}

static void test_refusals(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    static const cr_argspec a1[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &twice_fn, .nargs = 1, .args = a1, .rrule = twice_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_value tw = cr_value_function(&twice_fn, NULL);
    double x = 1.5, y, g;
    cr_prepared *p;
    /* A rule kept as a pullback is replayed by calling its rrule again (more in
     * tests/ad/test_prepared_generic.c). */
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, uses_twice, &tw, &x, 1, &p), CR_OK);
    x = 3.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(y, 6.0, 0);
    assert_close(g, 2.0, 0);
    cr_prepared_free(p);
    /* Through an overlay too. */
    cr_engine *eng2;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng2), CR_OK);
    assert_int_equal(cr_engine_overlay(eng2, &twice_fn, twice_ad, 1, NULL), CR_OK);
    assert_int_equal(cr_prepare_gradient(f->ctx, eng2, uses_twice, &tw, &x, 1, &p), CR_OK);
    x = 4.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x, 1, &y, &g), CR_OK);
    assert_close(y, 8.0, 0);
    assert_close(g, 2.0, 0);
    cr_prepared_free(p);
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, own_input, NULL, &x, 1, &p), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "made 1 input of its own");
    cr_engine_free(eng2);
    cr_engine_free(eng);
}

/* Allocation failures at every point of preparing: CR_ENOMEM, nothing leaks; the first call
 * of a prepared gradient allocates nothing that can fail, and its gradient is Rosenbrock's. */
typedef struct fault_env {
    double x[50], g[50], want[50], y;
} fault_env;

static cr_status fault_prepare(cr_ctx *ctx, void *env, cr_prepared **p)
{
    return cr_prepare_gradient(ctx, NULL, rosen_t, NULL, ((fault_env *)env)->x, 50, p);
}

static cr_status fault_call(cr_prepared *p, void *env)
{
    fault_env *e = env;
    return cr_prepared_value_and_gradient(p, e->x, 50, &e->y, e->g);
}

static void fault_check(void *env)
{
    fault_env *e = env;
    for (size_t i = 0; i < 50; i++)
        assert_close(e->g[i], e->want[i], 1e-13);
}

static void test_prepare_fault_injection(void **state)
{
    (void)state;
    fault_env e;
    for (size_t i = 0; i < 50; i++)
        e.x[i] = cos((double)i);
    rosen_grad(e.x, 50, e.want);
    const fault_case fc = {
        .prepare = fault_prepare, .call = fault_call, .check = fault_check, .max_runs = 99};
    fault_tally n = fault_each_allocation(&fc, &e);
    assert_int_equal(n.failed_call, 0);
}

static int run_tape_prepared(void)
{
    const struct CMUnitTest tape_prepared[] = {
        cmocka_unit_test(test_rosenbrock_replay),
        cmocka_unit_test_setup_teardown(test_rows_replay, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_branch_guard, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_branch_to_constant, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, fixture_setup, fixture_teardown),
        cmocka_unit_test(test_prepare_fault_injection),
    };
    return cmocka_run_group_tests(tape_prepared, NULL, NULL);
}

/*
 * Tests of the rarer paths of prepared gradients and prepared H v (prepared.c,
 * prepared_array.c, prepared_generic.c, prepared_hvp.c): the argument checks of both entry
 * points; a constant output; a function that makes array inputs of its own or returns
 * another tape's variable; every comparison operator of cr_tape_cmp() checked at replay (at
 * equality too); user array functions whose result changes dtype, kind or tuple shape at the
 * new inputs, or whose integer and bool tuple elements change; user scalar functions that
 * fail when recorded, return a complex number, give fewer results than asked, or return a
 * tuple of another descriptor of the same layout; a zero-adjoint function whose integer
 * value changes under cr_prepared_hvp(). Every refusal is followed by a good call, and
 * gradients and H v are checked against central differences of the functions in plain C.
 */

/* Central differences of a plain-C function of n variables, step scaled to each x. */
typedef double (*plain_fn)(const double *x, size_t n);

static void fd_grad(plain_fn f, double *x, size_t n, double *g)
{
    for (size_t i = 0; i < n; i++) {
        double xi = x[i], h = 1e-6 * fmax(1.0, fabs(xi));
        x[i] = xi + h;
        double fp = f(x, n);
        x[i] = xi - h;
        double fm = f(x, n);
        x[i] = xi;
        g[i] = (fp - fm) / (2 * h);
    }
}

static void check_grad(plain_fn f, double *x, size_t n, const double *g)
{
    double want[8];
    assert_true(n <= 8);
    fd_grad(f, x, n, want);
    for (size_t i = 0; i < n; i++)
        assert_close(g[i], want[i], 1e-7);
}

/* ---- Scalar prepared gradients: the checks, a constant output ---------------------------- */

static double prod_c(const double *x, size_t n)
{
    (void)n;
    return x[0] * sin(x[1]);
}

static cr_status prod_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], cr_sin(t, x[1]));
    return cr_tape_status(t);
}

static cr_status const_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)t;
    (void)x;
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_const(3.5);
    return CR_OK;
}

static cr_status own_array_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    cr_avar B = cr_tape_array_input(t, env);
    y[0] = cr_mul(t, x[0], cr_av_sum(t, B));
    return cr_tape_status(t);
}

static void test_scalar_checks(void **state)
{
    fixture *f = *state;
    double x[2] = {1.5, 0.3}, g[2] = {9, 9}, y = 0, b[2] = {1, 2};
    cr_array ba = cr_array_vector(b, 2);
    cr_prepared *p;
    cr_prepared_free(NULL); /* accepted */
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, prod_t, NULL, x, 2, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_prepare_gradient: out is NULL");
    /* A function making an array input of its own. */
    p = (cr_prepared *)(uintptr_t)1;
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, own_array_t, &ba, x, 2, &p), CR_EINVAL);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_prepare_gradient: the function made 1 array input of its own");
    /* The checks of a call. */
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, prod_t, NULL, x, 2, &p), CR_OK);
    assert_int_equal(cr_prepared_value_and_gradient(NULL, x, 2, &y, g), CR_EINVAL);
    assert_int_equal(cr_prepared_value_and_gradient(p, NULL, 2, &y, g), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_prepared_value_and_gradient: NULL x or grad");
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, NULL), CR_EINVAL);
    assert_true(g[0] == 9 && g[1] == 9);
    x[0] = -0.7;
    x[1] = 2.2;
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_OK);
    assert_close(y, prod_c(x, 2), 1e-15);
    check_grad(prod_c, x, 2, g);
    cr_prepared_free(p);
    /* A constant output: its value, zero gradient, at any inputs. */
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, const_t, NULL, x, 2, &p), CR_OK);
    g[0] = g[1] = 9;
    x[0] = 4.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_OK);
    assert_true(y == 3.5 && g[0] == 0.0 && g[1] == 0.0);
    g[0] = 9;
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, NULL, g), CR_OK);
    assert_true(g[0] == 0.0);
    cr_prepared_free(p);
}

/* ---- Comparisons at replay --------------------------------------------------------------- */

/* y = x0 x1 + x1^2 where x0 `op` x1 holds, x0 - 3 x1 otherwise */
static double branch_c(const double *x, size_t n, cr_cmp op)
{
    (void)n;
    bool b = op == CR_CMP_LE   ? x[0] <= x[1]
             : op == CR_CMP_GE ? x[0] >= x[1]
             : op == CR_CMP_EQ ? x[0] == x[1]
                               : x[0] != x[1];
    return b ? x[0] * x[1] + x[1] * x[1] : x[0] - 3 * x[1];
}

static cr_cmp g_op;
static double branch_op_c(const double *x, size_t n)
{
    return branch_c(x, n, g_op);
}

static cr_status branch_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    cr_cmp op = *(const cr_cmp *)env;
    if (cr_tape_cmp(t, x[0], op, x[1]))
        y[0] = cr_add(t, cr_mul(t, x[0], x[1]), cr_mul(t, x[1], x[1]));
    else
        y[0] = cr_sub(t, x[0], cr_mul(t, cr_const(3.0), x[1]));
    return cr_tape_status(t);
}

/* Prepared at rec; a replay at same (same outcome, on the boundary where it matters) works;
 * one at flip is refused naming the operator, then smooth (same outcome, away from the
 * boundary) gives the gradient of central differences. */
static void check_cmp(fixture *f, cr_cmp op, const char *name, const double *rec,
                      const double *same, const double *flip, const double *smooth)
{
    double x[2], g[2], y;
    cr_prepared *p;
    memcpy(x, rec, sizeof x);
    assert_int_equal(cr_prepare_gradient(f->ctx, NULL, branch_t, &op, x, 2, &p), CR_OK);
    memcpy(x, same, sizeof x);
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_OK);
    assert_close(y, branch_c(x, 2, op), 1e-15);
    memcpy(x, flip, sizeof x);
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_EDOMAIN);
    char want[32];
    snprintf(want, sizeof want, " %s ", name);
    assert_contains(cr_ctx_errmsg(f->ctx), want);
    assert_contains(cr_ctx_errmsg(f->ctx), "prepare it again");
    if (smooth != NULL) {
        memcpy(x, smooth, sizeof x);
        assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_OK);
        assert_close(y, branch_c(x, 2, op), 1e-15);
        g_op = op;
        check_grad(branch_op_c, x, 2, g);
    } else {
        memcpy(x, same, sizeof x);
        assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_OK);
        assert_close(y, branch_c(x, 2, op), 1e-15);
    }
    cr_prepared_free(p);
}

static void test_comparisons(void **state)
{
    fixture *f = *state;
    check_cmp(f, CR_CMP_LE, "<=", (double[]){1, 2}, (double[]){3, 3}, (double[]){4, 2},
              (double[]){0.5, 1.5});
    check_cmp(f, CR_CMP_GE, ">=", (double[]){2, 1}, (double[]){3, 3}, (double[]){1, 2},
              (double[]){2.5, 0.5});
    check_cmp(f, CR_CMP_EQ, "==", (double[]){2, 2}, (double[]){-1.5, -1.5}, (double[]){3, 4}, NULL);
    check_cmp(f, CR_CMP_NE, "!=", (double[]){1, 2}, (double[]){2, 1}, (double[]){5, 5},
              (double[]){0.3, 0.9});
    /* and the false outcomes: recorded false, true at the new inputs */
    check_cmp(f, CR_CMP_LE, "<=", (double[]){3, 2}, (double[]){4, 3.5}, (double[]){2, 2},
              (double[]){1.5, -0.5});
    check_cmp(f, CR_CMP_EQ, "==", (double[]){1, 2}, (double[]){2, 1}, (double[]){0.5, 0.5},
              (double[]){-0.25, 1.25});
}

/* ---- Array prepared gradients: the checks, a constant output, another tape's output ------- */

static double sumsq_c(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * x[i];
    return s;
}

static cr_status sumsq_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    *y = cr_av_dot(t, xs[0], xs[0]);
    return cr_tape_status(t);
}

static cr_status aconst_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)t;
    (void)xs;
    (void)n;
    (void)env;
    *y = cr_const(-2.0);
    return CR_OK;
}

static cr_status foreign_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)t;
    (void)xs;
    (void)n;
    *y = cr_mul(env, cr_tape_input(env, 2.0), cr_tape_input(env, 3.0));
    return CR_OK;
}

static void test_array_checks(void **state)
{
    fixture *f = *state;
    double x[3] = {0.5, -1.0, 2.0}, g[3] = {9, 9, 9}, y = 0;
    cr_array xa = cr_array_vector(x, 3), ga = cr_array_vector(g, 3);
    const cr_array *xs[1] = {&xa}, *nox[1] = {NULL};
    cr_array *gs[1] = {&ga}, *nog[1] = {NULL};
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, sumsq_t, NULL, xs, 1, NULL),
                     CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_prepare_gradient_arrays: out is NULL");
    assert_int_equal(cr_prepare_gradient_arrays(NULL, NULL, sumsq_t, NULL, xs, 1, &p), CR_EINVAL);
    assert_null(p);
    /* The output of another tape. */
    cr_tape *u;
    assert_int_equal(cr_tape_new(f->ctx, NULL, &u), CR_OK);
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, foreign_t, u, xs, 1, &p), CR_ETAPE);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "cr_prepare_gradient_arrays: the output belongs to another tape");
    cr_tape_free(u);
    /* The checks of a call. */
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, sumsq_t, NULL, xs, 1, &p), CR_OK);
    assert_int_equal(cr_prepared_value_and_gradient_arrays(NULL, xs, 1, &y, gs), CR_EINVAL);
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, nox, 1, &y, gs), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "input or gradient array 0 is NULL");
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, nog), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "input or gradient array 0 is NULL");
    assert_true(g[0] == 9);
    x[1] = 0.25;
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
    assert_close(y, sumsq_c(x, 3), 1e-15);
    check_grad(sumsq_c, x, 3, g);
    cr_prepared_free(p);
    /* A constant output: its value, zeros. */
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, NULL, aconst_t, NULL, xs, 1, &p), CR_OK);
    for (int rep = 0; rep < 2; rep++) {
        g[0] = g[1] = g[2] = 9;
        x[0] = 1.0 + rep;
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
        assert_true(y == -2.0 && g[0] == 0.0 && g[1] == 0.0 && g[2] == 0.0);
    }
    cr_prepared_free(p);
}

/* ---- User array functions whose results change at the new inputs ------------------------- */

/* The rules below take one f64 array X; "sel" is x[0]. */

/* A new f64 (or f32) array of a's shape holding c * a + d. */
static cr_status affine(cr_arena *arena, const cr_array *a, double c, double d, cr_dtype dt,
                        cr_array **out)
{
    size_t n = cr_array_numel(a);
    cr_status st = cr_array_new(arena, dt, a->ndim, a->shape, out);
    for (size_t i = 0; i < n && st == CR_OK; i++) {
        double v = c * creal(cr_array_get_linear(a, i)) + d;
        if (dt == CR_DT_F32)
            ((float *)(*out)->data)[i] = (float)v;
        else
            ((double *)(*out)->data)[i] = v;
    }
    return st;
}

static double sel(const cr_value *args)
{
    return creal(cr_array_get_linear(args[0].u.arr, 0));
}

/* The cotangent of X from an array cotangent dy (or a tuple's first element): dy itself,
 * as an f64 array of X's shape. */
typedef struct xenv {
    const cr_array *x;
} xenv;

static cr_status pass_array(cr_arena *arena, cr_tangent d, const cr_array *x, cr_tangent *dx)
{
    if (cr_tangent_is_thunk(d)) {
        cr_status st = cr_tangent_unthunk(d, &d);
        if (st != CR_OK)
            return st;
    }
    if (cr_tangent_is_zero(d) || d.tag == CR_TAN_ABSENT) {
        *dx = cr_tangent_zero();
        return CR_OK;
    }
    if (d.tag == CR_TAN_F64) { /* a scalar result: the gradient of sum(x) times it */
        cr_array *a;
        cr_status st = affine(arena, x, 0.0, d.u.f64, CR_DT_F64, &a);
        *dx = cr_tangent_array(a);
        return st;
    }
    if (d.tag != CR_TAN_ARRAY)
        return CR_ETANGENT;
    cr_array *a;
    cr_status st = affine(arena, d.u.arr, 1.0, 0.0, CR_DT_F64, &a);
    *dx = cr_tangent_array(a);
    return st;
}

static cr_status pass_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    const xenv *e = env;
    dx[0] = cr_tangent_none();
    cr_tangent d = dy->tag == CR_TAN_STRUCT ? cr_tangent_field(*dy, 0) : *dy;
    return pass_array(arena, d, e->x, &dx[1]);
}

static cr_status set_pass(cr_arena *arena, const cr_value *args, cr_pullback *pb)
{
    xenv *e = cr_arena_alloc(arena, sizeof *e, _Alignof(xenv));
    if (e == NULL)
        return CR_ENOMEM;
    e->x = args[0].u.arr;
    *pb = (cr_pullback){pass_pullback, e, "pass_pullback", 2};
    return CR_OK;
}

/* aflip(X) = X: f64 where x[0] > 0, f32 otherwise */
static const cr_function aflip_fn = {.name = "aflip", .arity = 1};

static cr_status aflip_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)fv;
    (void)nargs;
    (void)udata;
    cr_array *a;
    cr_status st =
        affine(arena, args[0].u.arr, 1.0, 0.0, sel(args) > 0 ? CR_DT_F64 : CR_DT_F32, &a);
    if (st == CR_OK)
        st = set_pass(arena, args, pb);
    *y = cr_value_array(a);
    return st;
}

/* sflip(X) = sum(X): an f64 where x[0] > 0, an f32 otherwise */
static const cr_function sflip_fn = {.name = "sflip", .arity = 1};

static cr_status sflip_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)fv;
    (void)nargs;
    (void)udata;
    double s = 0;
    for (size_t i = 0; i < cr_array_numel(args[0].u.arr); i++)
        s += creal(cr_array_get_linear(args[0].u.arr, i));
    *y = sel(args) > 0 ? cr_value_f64(s) : cr_value_f32((float)s);
    return set_pass(arena, args, pb);
}

/* tup(X) = (X, [x_i > 0 ? 1 : 0], x[0] > 1): an array, an integer array and a bool; a
 * plain array X where x[0] > 5 */
typedef struct tup {
    cr_array y, pos;
    bool big;
} tup;
static const cr_field k_tup_fields[3] = {{NULL, offsetof(tup, y), CR_KIND_ARRAY, NULL},
                                         {NULL, offsetof(tup, pos), CR_KIND_ARRAY, NULL},
                                         {NULL, offsetof(tup, big), CR_KIND_BOOL, NULL}};
static const cr_type k_tup_type = {"tuple(y, pos, big)", sizeof(tup), 3, k_tup_fields};
static const cr_function tup_fn = {.name = "tup", .arity = 1};

static cr_status tup_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    (void)fv;
    (void)nargs;
    (void)udata;
    const cr_array *x = args[0].u.arr;
    cr_array *a, *pos;
    cr_status st = affine(arena, x, 1.0, 0.0, CR_DT_F64, &a);
    if (st == CR_OK)
        st = set_pass(arena, args, pb);
    if (st != CR_OK)
        return st;
    if (sel(args) > 5) {
        *y = cr_value_array(a);
        return CR_OK;
    }
    size_t n = cr_array_numel(x);
    tup *r = cr_arena_alloc(arena, sizeof *r, _Alignof(tup));
    if (r == NULL || (st = cr_array_new(arena, CR_DT_I64, 1, &n, &pos)) != CR_OK)
        return r == NULL ? CR_ENOMEM : st;
    for (size_t i = 0; i < n; i++)
        ((int64_t *)pos->data)[i] = creal(cr_array_get_linear(x, i)) > 0;
    r->y = *a;
    r->pos = *pos;
    r->big = sel(args) > 1;
    *y = cr_value_struct(&k_tup_type, r);
    return CR_OK;
}

static const cr_argspec k_arr1[1] = {{CR_M_A_F64, NULL}};

static cr_engine *array_engine(cr_ctx *ctx, cr_registry **reg)
{
    cr_engine *eng;
    assert_int_equal(cr_registry_new(ctx, NULL, reg), CR_OK);
    assert_int_equal(cr_engine_new(ctx, *reg, &eng), CR_OK);
    const cr_function *fns[3] = {&aflip_fn, &sflip_fn, &tup_fn};
    const cr_rrule_fn rules[3] = {aflip_rrule, sflip_rrule, tup_rrule};
    for (size_t k = 0; k < 3; k++) {
        cr_rule_def def = {
            .struct_size = sizeof def, .fn = fns[k], .nargs = 1, .args = k_arr1, .rrule = rules[k]};
        assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    }
    return eng;
}

/* y = sum(f(X) .* f(X)) for f = aflip or tup (its first element), y = sflip(X)^2 for sflip */
static cr_status user_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    const cr_function *fn = env;
    cr_value fv = cr_value_function(fn, NULL);
    cr_targ a = cr_targ_arr(xs[0]), r[3];
    if (fn == &sflip_fn) {
        cr_var s = cr_tape_acall_s(t, &fv, &a, 1);
        *y = cr_mul(t, s, s);
    } else if (fn == &tup_fn) {
        if (cr_tape_acall_n(t, &fv, &a, 1, r, 3) == CR_OK)
            *y = cr_av_dot(t, r[0].u.a, r[0].u.a);
    } else {
        cr_avar Y = cr_tape_acall_a(t, &fv, &a, 1);
        *y = cr_av_dot(t, Y, Y);
    }
    return cr_tape_status(t);
}

static double sum2_c(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s * s;
}

/* Prepare user_t(fn) at x0, replay at each of bad (refused with status st and a message
 * containing msg), then at good: value and gradient against central differences of c. */
static void check_user(fixture *f, const cr_engine *eng, const cr_function *fn, plain_fn c,
                       const double *x0, const double *bad, cr_status st, const char *msg,
                       const double *good)
{
    enum { N = 3 };
    double x[N], g[N], y = 0;
    cr_array xa = cr_array_vector(x, N), ga = cr_array_vector(g, N);
    const cr_array *xs[1] = {&xa};
    cr_array *gs[1] = {&ga};
    cr_prepared *p;
    memcpy(x, x0, sizeof x);
    assert_int_equal(
        cr_prepare_gradient_arrays(f->ctx, eng, user_t, (void *)(uintptr_t)fn, xs, 1, &p), CR_OK);
    memcpy(x, bad, sizeof x);
    cr_status got = cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs);
    if (got != st)
        print_error("%s: %s\n", cr_status_name(got), cr_ctx_errmsg(f->ctx));
    assert_int_equal(got, st);
    assert_contains(cr_ctx_errmsg(f->ctx), msg);
    memcpy(x, good, sizeof x);
    assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
    assert_close(y, c(x, N), 1e-14);
    check_grad(c, x, N, g);
    cr_prepared_free(p);
}

static void test_user_array_results(void **state)
{
    fixture *f = *state;
    cr_registry *reg;
    cr_engine *eng = array_engine(f->ctx, &reg);
    const double x0[3] = {0.5, -1.0, 2.0};
    /* another dtype of array */
    check_user(f, eng, &aflip_fn, sumsq_c, x0, (double[]){-0.5, 1.0, 2.0}, CR_ESHAPE,
               "prepared gradient: aflip gives a f32 (3) array at these inputs, a f64 (3) array "
               "when recorded",
               (double[]){0.25, -3.0, 1.5});
    /* another kind of scalar */
    check_user(f, eng, &sflip_fn, sum2_c, x0, (double[]){-0.5, 1.0, 2.0}, CR_ESHAPE,
               "prepared gradient: sflip gives a f32 at these inputs, a f64 when recorded",
               (double[]){0.25, -3.0, 1.5});
    /* tuple elements: the integer array changes, the bool changes, no tuple at all */
    check_user(f, eng, &tup_fn, sumsq_c, x0, (double[]){0.5, 1.0, 2.0}, CR_EDOMAIN,
               "prepared gradient: tup (tuple element 1) (integers) differs from its value",
               (double[]){0.75, -2.0, 0.5});
    check_user(f, eng, &tup_fn, sumsq_c, x0, (double[]){1.5, -1.0, 2.0}, CR_EDOMAIN,
               "prepared gradient: tup (tuple element 2) (integers) differs from its value",
               (double[]){0.75, -2.0, 0.5});
    check_user(f, eng, &tup_fn, sumsq_c, x0, (double[]){6.0, -1.0, 2.0}, CR_ESHAPE,
               "prepared gradient: tup gives a array at these inputs, a tuple of 3 elements when "
               "recorded",
               (double[]){0.75, -2.0, 0.5});
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/* ---- User scalar functions kept as pullbacks ----------------------------------------------- */

/* slog(x) = log(x), failing for x <= 0 */
static cr_status slog_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata);
/* zpair(x) = x + 1i: a complex result */
/* pair(x) = (x, x^2) as a tuple of one of two descriptors of the same layout (x > 0 or not),
 * or of a third with an f32 element (x > 10); (x, x^2, 0) where x < -10 */
static const cr_field k_dd_fields[2] = {{NULL, 0, CR_KIND_F64, NULL},
                                        {NULL, sizeof(double), CR_KIND_F64, NULL}};
static const cr_field k_df_fields[2] = {{NULL, 0, CR_KIND_F64, NULL},
                                        {NULL, sizeof(double), CR_KIND_F32, NULL}};
static const cr_type k_pos_type = {"tuple(pos)", 2 * sizeof(double), 2, k_dd_fields};
static const cr_type k_neg_type = {"tuple(neg)", 2 * sizeof(double), 2, k_dd_fields};
static const cr_type k_big_type = {"tuple(big)", 2 * sizeof(double), 2, k_df_fields};
static const cr_field k_ddd_fields[3] = {{NULL, 0, CR_KIND_F64, NULL},
                                         {NULL, sizeof(double), CR_KIND_F64, NULL},
                                         {NULL, 2 * sizeof(double), CR_KIND_F64, NULL}};
static const cr_type k_three_type = {"tuple(three)", 3 * sizeof(double), 3, k_ddd_fields};

typedef struct senv {
    double x;
} senv;

static cr_status slog_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    (void)arena;
    const senv *e = env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(dy->u.f64 / e->x);
    return CR_OK;
}

static cr_status slog_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)fv;
    (void)nargs;
    (void)udata;
    double x = args[0].u.f64;
    if (!(x > 0))
        return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "slog: x = %g is not positive", x);
    senv *e = cr_arena_alloc(arena, sizeof *e, _Alignof(senv));
    if (e == NULL)
        return CR_ENOMEM;
    e->x = x;
    *y = cr_value_f64(log(x));
    *pb = (cr_pullback){slog_pullback, e, "slog_pullback", 2};
    return CR_OK;
}

static cr_status zpair_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)fv;
    (void)nargs;
    (void)udata;
    senv *e = cr_arena_alloc(arena, sizeof *e, _Alignof(senv));
    if (e == NULL)
        return CR_ENOMEM;
    e->x = args[0].u.f64;
    *y = cr_value_c128(CMPLX(args[0].u.f64, 1.0));
    *pb = (cr_pullback){slog_pullback, e, "zpair_pullback", 2};
    return CR_OK;
}

/* d(x, x^2) -> x̄ = ȳ0 + 2 x ȳ1 */
static cr_status pair_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    (void)arena;
    const senv *e = env;
    cr_tangent a = cr_tangent_field(*dy, 0), b = cr_tangent_field(*dy, 1);
    double ga = a.tag == CR_TAN_F64 ? a.u.f64 : 0.0, gb = b.tag == CR_TAN_F64 ? b.u.f64 : 0.0;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(ga + 2 * e->x * gb);
    return CR_OK;
}

static cr_status pair_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)fv;
    (void)nargs;
    (void)udata;
    double x = args[0].u.f64;
    senv *e = cr_arena_alloc(arena, sizeof *e, _Alignof(senv));
    double *r = cr_arena_alloc(arena, 3 * sizeof *r, _Alignof(double));
    if (e == NULL || r == NULL)
        return CR_ENOMEM;
    e->x = x;
    r[0] = x;
    if (x > 10) {
        float sq = (float)(x * x);
        memcpy(&r[1], &sq, sizeof sq);
    } else {
        r[1] = x * x;
    }
    r[2] = 0.0;
    *y = cr_value_struct(x > 10    ? &k_big_type
                         : x > 0   ? &k_pos_type
                         : x < -10 ? &k_three_type
                                   : &k_neg_type,
                         r);
    *pb = (cr_pullback){pair_pullback, e, "pair_pullback", 2};
    return CR_OK;
}

static const cr_function slog_fn = {.name = "slog", .arity = 1};
static const cr_function zpair_fn = {.name = "zpair", .arity = 1};
static const cr_function pair_fn = {.name = "pair", .arity = 1};

/* isign(x): the sign of x, an integer, zero-adjoint */
static cr_status isign_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_i64(args[0].u.f64 > 0 ? 1 : -1);
    return CR_OK;
}
static const cr_function isign_fn = {.name = "isign", .arity = 1, .primal = isign_primal};

static const cr_argspec k_f64_1[1] = {{CR_M_F64, NULL}};

static cr_engine *scalar_engine(cr_ctx *ctx, cr_registry **reg)
{
    cr_engine *eng;
    assert_int_equal(cr_registry_new(ctx, NULL, reg), CR_OK);
    assert_int_equal(cr_engine_new(ctx, *reg, &eng), CR_OK);
    const cr_function *fns[3] = {&slog_fn, &zpair_fn, &pair_fn};
    const cr_rrule_fn rules[3] = {slog_rrule, zpair_rrule, pair_rrule};
    for (size_t k = 0; k < 3; k++) {
        cr_rule_def def = {.struct_size = sizeof def,
                           .fn = fns[k],
                           .nargs = 1,
                           .args = k_f64_1,
                           .rrule = rules[k]};
        assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    }
    assert_int_equal(cr_engine_zero_adjoint(eng, &isign_fn), CR_OK);
    return eng;
}

/* y = x1 * fn(x0) (its first result), and two results asked of it when env says so */
typedef struct sarg {
    const cr_function *fn;
    size_t nout;
} sarg;

static cr_status scal_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const sarg *a = env;
    cr_value fv = cr_value_function(a->fn, NULL);
    cr_var r[3];
    if (cr_tape_call(t, &fv, &x[0], 1, r, a->nout) != CR_OK)
        return cr_tape_status(t);
    y[0] = a->fn == &pair_fn ? cr_add(t, cr_mul(t, x[1], r[0]), r[1]) : cr_mul(t, x[1], r[0]);
    return cr_tape_status(t);
}

static double pair_c(const double *x, size_t n)
{
    (void)n;
    return x[1] * x[0] + x[0] * x[0];
}

static void test_user_scalar_results(void **state)
{
    fixture *f = *state;
    cr_registry *reg;
    cr_engine *eng = scalar_engine(f->ctx, &reg);
    double x[2] = {-1.0, 2.0}, g[2], y;
    cr_prepared *p = NULL;
    /* A rule failing when recorded: refused, naming it. */
    sarg a = {&slog_fn, 1};
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, scal_t, &a, x, 2, &p), CR_EDOMAIN);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(f->ctx), "slog");
    assert_contains(cr_ctx_errmsg(f->ctx), "is not positive");
    /* A complex result. */
    a.fn = &zpair_fn;
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, scal_t, &a, x, 2, &p), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(f->ctx), "zpair returns a c128");
    /* Fewer results than asked. */
    a.fn = &slog_fn;
    a.nout = 3;
    x[0] = 2.0;
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, scal_t, &a, x, 2, &p), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "slog gives 1 result, 3 expected");
    /* More results than asked. */
    a.fn = &pair_fn;
    a.nout = 1;
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, scal_t, &a, x, 2, &p), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "pair gives 2 results, 1 expected");
    /* The same function prepared right. */
    a.fn = &slog_fn;
    a.nout = 1;
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, scal_t, &a, x, 2, &p), CR_OK);
    x[0] = 0.5;
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_OK);
    assert_close(y, x[1] * log(x[0]), 1e-15);
    cr_prepared_free(p);
    /* A tuple of another descriptor of the same layout is accepted; one with an element of
     * another kind is not. */
    a.fn = &pair_fn;
    a.nout = 2;
    x[0] = 1.5;
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, scal_t, &a, x, 2, &p), CR_OK);
    x[0] = -0.75;
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_OK);
    assert_close(y, pair_c(x, 2), 1e-15);
    check_grad(pair_c, x, 2, g);
    x[0] = 12.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "pair gives a tuple(big) at these inputs, a tuple(pos) when recorded");
    x[0] = -12.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "pair gives a tuple(three) at these inputs, a tuple(pos) when recorded");
    x[0] = 2.5;
    assert_int_equal(cr_prepared_value_and_gradient(p, x, 2, &y, g), CR_OK);
    check_grad(pair_c, x, 2, g);
    cr_prepared_free(p);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/* ---- Prepared H v: a zero-adjoint function whose value changes ---------------------------- */

/* y = isign(x0) x0^2 x1 (isign evaluated again, no derivative) */
static cr_status isq_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value fv = cr_value_function(&isign_fn, NULL);
    cr_var s = cr_tape_call1(t, &fv, &x[0], 1);
    y[0] = cr_mul(t, s, cr_mul(t, cr_mul(t, x[0], x[0]), x[1]));
    return cr_tape_status(t);
}

static double isq_c(const double *x, size_t n)
{
    (void)n;
    return (x[0] > 0 ? 1.0 : -1.0) * x[0] * x[0] * x[1];
}

static void test_hvp_zero_adjoint_changes(void **state)
{
    fixture *f = *state;
    cr_registry *reg;
    cr_engine *eng = scalar_engine(f->ctx, &reg);
    double x[2] = {1.5, -0.5}, v[2] = {0.75, 2.0}, hv[2], g[2], y = 0;
    cr_prepared *p;
    assert_int_equal(cr_prepare_hvp(f->ctx, eng, isq_t, NULL, x, 2, &p), CR_OK);
    x[0] = -1.0;
    assert_int_equal(cr_prepared_hvp(p, x, 2, v, hv, &y, g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "isign is -1 at these inputs and was 1 when recorded");
    x[0] = 0.8;
    x[1] = 1.25;
    assert_int_equal(cr_prepared_hvp(p, x, 2, v, hv, &y, g), CR_OK);
    assert_close(y, isq_c(x, 2), 1e-15);
    check_grad(isq_c, x, 2, g);
    /* H v against second central differences of isq_c */
    const double h = 1e-4;
    for (size_t i = 0; i < 2; i++) {
        double acc = 0, z[2];
        for (int sv = -1; sv <= 1; sv += 2)
            for (int si = -1; si <= 1; si += 2) {
                for (size_t j = 0; j < 2; j++)
                    z[j] = x[j] + sv * h * v[j];
                z[i] += si * h;
                acc += sv * si * isq_c(z, 2);
            }
        assert_close(hv[i], acc / (4 * h * h), 1e-6);
    }
    cr_prepared_free(p);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

static int run_prepared_edges(void)
{
    const struct CMUnitTest prepared_edges[] = {
        cmocka_unit_test_setup_teardown(test_scalar_checks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_comparisons, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_array_checks, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_user_array_results, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_user_scalar_results, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_hvp_zero_adjoint_changes, fixture_setup,
                                        fixture_teardown),
    };
    return cmocka_run_group_tests(prepared_edges, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_tape_prepared();
    failed += run_prepared_edges();
    return failed;
}
