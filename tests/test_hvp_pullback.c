/*
 * Second order through rules kept as pullbacks: on a CR_TAPE_SECOND_ORDER tape a function
 * with an rrule only (a user rule, hypot of three arguments, evalpoly, a rule with a tuple
 * result) is recorded with the partials its pullback gives and second derivatives taken by
 * central differences of those partials. Checked against central second differences of
 * plain-C versions of the functions; the edges: a rule that fails on one side of the point,
 * on both sides, more variable arguments than a record holds, cr_prepare_hvp's refusal.
 */
#include <math.h>
#include <stdio.h>

#include "test_fdhess.h"
#include "test_polar.h"
#include "test_util.h"

/* ---- The user rules ------------------------------------------------------------------------ */

/* bump(x, y, z) = x^2 y + sin(x) y^3 + exp(z x), with a hand-written pullback. */
static double bump_c(double x, double y, double z)
{
    return x * x * y + sin(x) * y * y * y + exp(z * x);
}

static cr_status bump_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(bump_c(args[0].u.f64, args[1].u.f64, args[2].u.f64));
    return CR_OK;
}
static const cr_function bump_fn = {.name = "bump", .arity = 3, .primal = bump_primal};

static cr_status bump_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    (void)arena;
    const double *a = env, x = a[0], y = a[1], z = a[2], g = dy->u.f64;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(g * (2 * x * y + cos(x) * y * y * y + z * exp(z * x)));
    dx[2] = cr_tangent_f64(g * (x * x + 3 * sin(x) * y * y));
    dx[3] = cr_tangent_f64(g * x * exp(z * x));
    return CR_OK;
}

static cr_status bump_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    double *e = cr_arena_alloc(arena, 3 * sizeof *e, _Alignof(double));
    if (e == NULL)
        return CR_ENOMEM;
    for (size_t j = 0; j < 3; j++)
        e[j] = args[j].u.f64;
    *pb = (cr_pullback){bump_pullback, e, "bump_pullback", 4};
    return bump_primal(arena, fv, args, nargs, y);
}

/* capped(x) = exp(x), defined for x <= 1 only (CR_EDOMAIN beyond); pinned(x) = 3 x^2,
 * defined at x = 0.5 only. Their pullbacks multiply by the partial kept in env. */
static cr_status scale_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    (void)arena;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(dy->u.f64 * *(const double *)env);
    return CR_OK;
}

static cr_status capped_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    if (args[0].u.f64 > 1.0)
        return CR_EDOMAIN;
    *out = cr_value_f64(exp(args[0].u.f64));
    return CR_OK;
}
static const cr_function capped_fn = {.name = "capped", .arity = 1, .primal = capped_primal};

static cr_status pinned_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    if (args[0].u.f64 != 0.5)
        return CR_EDOMAIN;
    *out = cr_value_f64(3 * 0.25);
    return CR_OK;
}
static const cr_function pinned_fn = {.name = "pinned", .arity = 1, .primal = pinned_primal};

static cr_status unary_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)udata;
    const cr_function *fn = fv->u.func.fn;
    cr_status st = fn->primal(arena, fv, args, nargs, y);
    if (st != CR_OK)
        return st;
    double *e = cr_arena_alloc(arena, sizeof *e, _Alignof(double));
    if (e == NULL)
        return CR_ENOMEM;
    *e = fn == &capped_fn ? y->u.f64 : 6 * args[0].u.f64;
    *pb = (cr_pullback){scale_pullback, e, "scale_pullback", 2};
    return CR_OK;
}

/* sum5(a, b, c, d, e) = a b + c d e: five arguments. */
static cr_status sum5_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    const cr_value *a = args;
    *out = cr_value_f64(a[0].u.f64 * a[1].u.f64 + a[2].u.f64 * a[3].u.f64 * a[4].u.f64);
    return CR_OK;
}
static const cr_function sum5_fn = {.name = "sum5", .arity = 5, .primal = sum5_primal};

static cr_status sum5_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    (void)arena;
    const double *a = env, g = dy->u.f64;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(g * a[1]);
    dx[2] = cr_tangent_f64(g * a[0]);
    dx[3] = cr_tangent_f64(g * a[3] * a[4]);
    dx[4] = cr_tangent_f64(g * a[2] * a[4]);
    dx[5] = cr_tangent_f64(g * a[2] * a[3]);
    return CR_OK;
}

static cr_status sum5_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    double *e = cr_arena_alloc(arena, 5 * sizeof *e, _Alignof(double));
    if (e == NULL)
        return CR_ENOMEM;
    for (size_t j = 0; j < 5; j++)
        e[j] = args[j].u.f64;
    *pb = (cr_pullback){sum5_pullback, e, "sum5_pullback", 6};
    return sum5_primal(arena, fv, args, nargs, y);
}

/* ---- Fixture: an engine with the rules --------------------------------------------------- */

typedef struct fixt {
    cr_ctx *ctx;
    cr_engine *eng;
} fixt;

static int env_setup(void **state)
{
    fixt *e = calloc(1, sizeof *e);
    static const cr_argspec f64s[5] = {
        {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL}};
    if (e == NULL || cr_ctx_new(NULL, &e->ctx) != CR_OK ||
        cr_engine_new(e->ctx, NULL, &e->eng) != CR_OK)
        return -1;
    static const struct {
        const cr_function *fn;
        size_t nargs;
        cr_rrule_fn rrule;
    } defs[] = {{&bump_fn, 3, bump_rrule},
                {&polar_fn, 2, polar_rrule},
                {&capped_fn, 1, unary_rrule},
                {&pinned_fn, 1, unary_rrule},
                {&sum5_fn, 5, sum5_rrule}};
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        cr_rule_def def = {.struct_size = sizeof def,
                           .fn = defs[i].fn,
                           .nargs = defs[i].nargs,
                           .args = f64s,
                           .rrule = defs[i].rrule};
        if (cr_engine_from_rrule(e->eng, &def) != CR_OK)
            return -1;
    }
    *state = e;
    return 0;
}

static int env_teardown(void **state)
{
    fixt *e = *state;
    cr_engine_free(e->eng);
    cr_ctx_free(e->ctx);
    free(e);
    return 0;
}

static cr_tape *so_tape(fixt *e)
{
    cr_tape *t = NULL;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER, .engine = e->eng};
    assert_int_equal(cr_tape_new(e->ctx, &p, &t), CR_OK);
    return t;
}

/* The Hessian of ft recorded on a second-order tape with e's engine (check_tape_hessian). */
static void check_hessian(fixt *e, cr_ad_fn ft, double (*fc)(const double *), const double *x,
                          size_t n, double rtol)
{
    cr_tape *t = so_tape(e);
    check_tape_hessian(t, ft, fc, x, n, 1e-13, rtol);
    cr_tape_free(t);
}

/* ---- Functions through the rules ---------------------------------------------------------- */

static const cr_value *fv_of(const cr_function *fn, cr_value *store)
{
    *store = cr_value_function(fn, NULL);
    return store;
}

/* bump(x0, x1 x2, x2) + bump(x0, x0, 0.5): distinct and repeated operands, a constant */
static double f1_c(const double *x)
{
    return bump_c(x[0], x[1] * x[2], x[2]) + bump_c(x[0], x[0], 0.5);
}

static cr_status f1_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var a[3] = {x[0], cr_mul(t, x[1], x[2]), x[2]}, b[3] = {x[0], x[0], cr_const(0.5)};
    y[0] = cr_add(t, cr_tape_call1(t, fv_of(&bump_fn, &f), a, 3),
                  cr_tape_call1(t, fv_of(&bump_fn, &f), b, 3));
    return cr_tape_status(t);
}

static void test_user_rule(void **state)
{
    const double x[3] = {0.7, -0.4, 0.9};
    check_hessian(*state, f1_t, f1_c, x, 3, 1e-6);
}

/* r theta + r^2 of polar(x0, x1): a rule with two results */
static double f2_c(const double *x)
{
    double r = hypot(x[0], x[1]), th = atan2(x[1], x[0]);
    return r * th + r * r;
}

static cr_status f2_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var rt[2];
    if (cr_tape_call(t, fv_of(&polar_fn, &f), x, 2, rt, 2) != CR_OK)
        return cr_tape_status(t);
    y[0] = cr_add(t, cr_mul(t, rt[0], rt[1]), cr_mul(t, rt[0], rt[0]));
    return cr_tape_status(t);
}

static void test_tuple_rule(void **state)
{
    const double x[2] = {0.8, 0.6};
    check_hessian(*state, f2_t, f2_c, x, 2, 1e-6);
}

/* hypot(x0, x1, x2) and evalpoly(x0, 1, x1, x2): built-in functions whose calls of these
 * counts go through their rules, kept as pullbacks */
static double f3_c(const double *x)
{
    return sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]) * (1 + x[1] * x[0] + x[2] * x[0] * x[0]);
}

static cr_status f3_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var p[4] = {x[0], cr_const(1.0), x[1], x[2]};
    y[0] = cr_mul(t, cr_tape_call1(t, &cr_fn_hypot, x, 3), cr_tape_call1(t, &cr_fn_evalpoly, p, 4));
    return cr_tape_status(t);
}

static void test_builtin_rules(void **state)
{
    const double x[3] = {0.3, -1.1, 0.5};
    check_hessian(*state, f3_t, f3_c, x, 3, 1e-6);
}

/* capped(x0 x1) at the edge of its domain: the one-sided difference (error O(h)) */
static double f4_c(const double *x)
{
    return exp(x[0] * x[1]);
}

static cr_status f4_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var a = cr_mul(t, x[0], x[1]);
    y[0] = cr_tape_call1(t, fv_of(&capped_fn, &f), &a, 1);
    return cr_tape_status(t);
}

static void test_domain_edge(void **state)
{
    const double x[2] = {1.0 - 1e-9, 1.0}; /* x0 x1 + h is outside */
    check_hessian(*state, f4_t, f4_c, x, 2, 1e-4);
}

/* pinned(x) is defined at 0.5 only: no second derivatives, a clear failure */
static void test_both_sides_fail(void **state)
{
    fixt *e = *state;
    cr_tape *t = so_tape(e);
    cr_value f;
    cr_var x = cr_tape_input(t, 0.5);
    cr_var y = cr_tape_call1(t, fv_of(&pinned_fn, &f), &x, 1);
    assert_true(isnan(y.v));
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "pinned");
    assert_contains(cr_tape_errmsg(t), "no second derivatives");
    /* sticky: later operations give NaN and keep the status */
    assert_true(isnan(cr_sin(t, x).v));
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    /* a first-order tape records it */
    cr_tape *r;
    cr_tape_params p = {.struct_size = sizeof p, .engine = e->eng};
    assert_int_equal(cr_tape_new(e->ctx, &p, &r), CR_OK);
    x = cr_tape_input(r, 0.5);
    y = cr_tape_call1(r, fv_of(&pinned_fn, &f), &x, 1);
    double g;
    assert_int_equal(cr_tape_gradient(r, y, &x, 1, &g), CR_OK);
    assert_close(g, 3.0, 1e-15);
    cr_tape_free(r);
    cr_tape_free(t);
}

/* Five variable arguments are more than a record holds: refused; four variables and a
 * constant are recorded. */
static double f5_c(const double *x)
{
    return x[0] * x[1] + x[2] * x[3] * 1.5;
}

static cr_status f5_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var a[5] = {x[0], x[1], x[2], x[3], cr_const(1.5)};
    y[0] = cr_tape_call1(t, fv_of(&sum5_fn, &f), a, 5);
    return cr_tape_status(t);
}

static void test_argument_limit(void **state)
{
    fixt *e = *state;
    const double x[4] = {0.2, 0.9, -0.3, 1.7};
    check_hessian(e, f5_t, f5_c, x, 4, 1e-6);

    cr_tape *t = so_tape(e);
    cr_var xs[5];
    cr_value f;
    for (size_t j = 0; j < 5; j++)
        xs[j] = cr_tape_input(t, 0.1 * (double)(j + 1));
    assert_true(isnan(cr_tape_call1(t, fv_of(&sum5_fn, &f), xs, 5).v));
    assert_int_equal(cr_tape_status(t), CR_EUNIMPL);
    assert_contains(cr_tape_errmsg(t), "sum5");
    assert_contains(cr_tape_errmsg(t), "at most 4 variable arguments");
    cr_tape_free(t);
}

/* cr_prepare_hvp still refuses a rule kept as a pullback (docs/engine.md) */
static void test_prepared_refuses(void **state)
{
    fixt *e = *state;
    const double x[3] = {0.7, -0.4, 0.9};
    cr_prepared *p = NULL;
    assert_int_equal(cr_prepare_hvp(e->ctx, e->eng, f1_t, NULL, x, 3, &p), CR_EUNIMPL);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(e->ctx), "bump");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_user_rule, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_tuple_rule, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_builtin_rules, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_domain_edge, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_both_sides_fail, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_argument_limit, env_setup, env_teardown),
        cmocka_unit_test_setup_teardown(test_prepared_refuses, env_setup, env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
