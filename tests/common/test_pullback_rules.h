/*
 * Rules kept as pullbacks and programs through them, shared by the tests of second order
 * through them (test_hvp_pullback.c: second-order tapes; test_prepared_hvp_pullback.c:
 * prepared H v): user rules with hand-written pullbacks (bump of three arguments, capped
 * and pinned with a domain, sum5 of five, wide of seven with two results), polar
 * (test_polar.h), a fixture with an engine holding them, and programs with their plain-C
 * versions.
 */
#ifndef TEST_PULLBACK_RULES_H
#define TEST_PULLBACK_RULES_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "test_fdhess.h"
#include "test_polar.h"
#include "test_util.h"

/* ---- The user rules ------------------------------------------------------------------------ */

/* bump(x, y, z) = x^2 y + sin(x) y^3 + exp(z x), with a hand-written pullback. */
static inline double bump_c(double x, double y, double z)
{
    return x * x * y + sin(x) * y * y * y + exp(z * x);
}

static inline cr_status bump_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                                    size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(bump_c(args[0].u.f64, args[1].u.f64, args[2].u.f64));
    return CR_OK;
}
static const cr_function bump_fn = {.name = "bump", .arity = 3, .primal = bump_primal};

static inline cr_status bump_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                      cr_arena *arena, void *env)
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

static inline cr_status bump_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
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
static inline cr_status scale_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                       cr_arena *arena, void *env)
{
    (void)nx;
    (void)arena;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(dy->u.f64 * *(const double *)env);
    return CR_OK;
}

static inline cr_status capped_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
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

static inline cr_status pinned_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
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

static inline cr_status unary_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                                    const cr_value *args, size_t nargs, cr_value *y,
                                    cr_pullback *pb, const void *udata)
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
static inline cr_status sum5_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
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

static inline cr_status sum5_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                      cr_arena *arena, void *env)
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

static inline cr_status sum5_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
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

/* wide(a0..a6) = (log sum_j exp(w_j a_j), a0 a1 a2 + sin(a3 a6) + a4 a5 (a0 + a6)), w_j =
 * 0.3 + 0.1 j: seven arguments, two results, every second derivative nonzero somewhere. */
#define WIDE_N 7
static const cr_field wide_fields[2] = {{NULL, 0, CR_KIND_F64, NULL},
                                        {NULL, sizeof(double), CR_KIND_F64, NULL}};
static const cr_type wide_type = {"tuple(lse,poly)", 2 * sizeof(double), 2, wide_fields};

static inline void wide_c(const double *a, double *y)
{
    double m = -INFINITY, s = 0;
    for (size_t j = 0; j < WIDE_N; j++)
        m = fmax(m, (0.3 + 0.1 * (double)j) * a[j]);
    for (size_t j = 0; j < WIDE_N; j++)
        s += exp((0.3 + 0.1 * (double)j) * a[j] - m);
    y[0] = m + log(s);
    y[1] = a[0] * a[1] * a[2] + sin(a[3] * a[6]) + a[4] * a[5] * (a[0] + a[6]);
}

static inline cr_status wide_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                                    size_t nargs, cr_value *out)
{
    (void)fv;
    (void)nargs;
    double *y = cr_arena_alloc(arena, 2 * sizeof *y, _Alignof(double)), a[WIDE_N];
    if (y == NULL)
        return CR_ENOMEM;
    for (size_t j = 0; j < WIDE_N; j++)
        a[j] = args[j].u.f64;
    wide_c(a, y);
    *out = cr_value_struct(&wide_type, y);
    return CR_OK;
}
static const cr_function wide_fn = {.name = "wide", .arity = WIDE_N, .primal = wide_primal};

static inline cr_status wide_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                      cr_arena *arena, void *env)
{
    (void)nx;
    (void)arena;
    const double *a = env;
    cr_tangent t0 = cr_tangent_field(*dy, 0), t1 = cr_tangent_field(*dy, 1);
    double g0 = t0.tag == CR_TAN_F64 ? t0.u.f64 : 0.0, g1 = t1.tag == CR_TAN_F64 ? t1.u.f64 : 0.0;
    double y[2], d1[WIDE_N];
    wide_c(a, y);
    d1[0] = a[1] * a[2] + a[4] * a[5];
    d1[1] = a[0] * a[2];
    d1[2] = a[0] * a[1];
    d1[3] = cos(a[3] * a[6]) * a[6];
    d1[4] = a[5] * (a[0] + a[6]);
    d1[5] = a[4] * (a[0] + a[6]);
    d1[6] = cos(a[3] * a[6]) * a[3] + a[4] * a[5];
    dx[0] = cr_tangent_none();
    for (size_t j = 0; j < WIDE_N; j++) {
        double w = 0.3 + 0.1 * (double)j;
        dx[j + 1] = cr_tangent_f64(g0 * w * exp(w * a[j] - y[0]) + g1 * d1[j]);
    }
    return CR_OK;
}

static inline cr_status wide_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                                   const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                   const void *udata)
{
    (void)cfg;
    (void)udata;
    double *e = cr_arena_alloc(arena, WIDE_N * sizeof *e, _Alignof(double));
    if (e == NULL)
        return CR_ENOMEM;
    for (size_t j = 0; j < WIDE_N; j++)
        e[j] = args[j].u.f64;
    *pb = (cr_pullback){wide_pullback, e, "wide_pullback", WIDE_N + 1};
    return wide_primal(arena, fv, args, nargs, y);
}

/* ---- Fixture: an engine with the rules --------------------------------------------------- */

typedef struct fixt {
    cr_ctx *ctx;
    cr_engine *eng;
} fixt;

/* An engine with the rules, in e->ctx (made by the caller). */
static inline int env_setup_in(fixt *e)
{
    static const cr_argspec f64s[WIDE_N] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL},
                                            {CR_M_F64, NULL}, {CR_M_F64, NULL}, {CR_M_F64, NULL},
                                            {CR_M_F64, NULL}};
    if (cr_engine_new(e->ctx, NULL, &e->eng) != CR_OK)
        return -1;
    static const struct {
        const cr_function *fn;
        size_t nargs;
        cr_rrule_fn rrule;
    } defs[] = {{&bump_fn, 3, bump_rrule},    {&polar_fn, 2, polar_rrule},
                {&capped_fn, 1, unary_rrule}, {&pinned_fn, 1, unary_rrule},
                {&sum5_fn, 5, sum5_rrule},    {&wide_fn, WIDE_N, wide_rrule}};
    for (size_t i = 0; i < sizeof defs / sizeof defs[0]; i++) {
        cr_rule_def def = {.struct_size = sizeof def,
                           .fn = defs[i].fn,
                           .nargs = defs[i].nargs,
                           .args = f64s,
                           .rrule = defs[i].rrule};
        if (cr_engine_from_rrule(e->eng, &def) != CR_OK)
            return -1;
    }
    return 0;
}

/* The engine and the context of env_setup_in. */
static inline void env_teardown_in(fixt *e)
{
    cr_engine_free(e->eng);
    cr_ctx_free(e->ctx);
}

static inline int env_setup(void **state)
{
    fixt *e = calloc(1, sizeof *e);
    if (e == NULL || cr_ctx_new(NULL, &e->ctx) != CR_OK || env_setup_in(e) != 0)
        return -1;
    *state = e;
    return 0;
}

static inline int env_teardown(void **state)
{
    fixt *e = *state;
    env_teardown_in(e);
    free(e);
    return 0;
}

static inline cr_tape *so_tape(fixt *e)
{
    cr_tape *t = NULL;
    cr_tape_params p = {.struct_size = sizeof p, .flags = CR_TAPE_SECOND_ORDER, .engine = e->eng};
    assert_int_equal(cr_tape_new(e->ctx, &p, &t), CR_OK);
    return t;
}

/* The Hessian of ft recorded on a second-order tape with e's engine (check_tape_hessian). */
static inline void check_hessian(fixt *e, cr_ad_fn ft, double (*fc)(const double *),
                                 const double *x, size_t n, double rtol)
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
static inline double f1_c(const double *x)
{
    return bump_c(x[0], x[1] * x[2], x[2]) + bump_c(x[0], x[0], 0.5);
}

static inline cr_status f1_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
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

/* r theta + r^2 of polar(x0, x1): a rule with two results */
static inline double f2_c(const double *x)
{
    double r = hypot(x[0], x[1]), th = atan2(x[1], x[0]);
    return r * th + r * r;
}

static inline cr_status f2_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
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

/* hypot(x0, x1, x2) and evalpoly(x0, 1, x1, x2): built-in functions whose calls of these
 * counts go through their rules, kept as pullbacks */
static inline double f3_c(const double *x)
{
    return sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]) * (1 + x[1] * x[0] + x[2] * x[0] * x[0]);
}

static inline cr_status f3_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var p[4] = {x[0], cr_const(1.0), x[1], x[2]};
    y[0] = cr_mul(t, cr_tape_call1(t, &cr_fn_hypot, x, 3), cr_tape_call1(t, &cr_fn_evalpoly, p, 4));
    return cr_tape_status(t);
}

/* capped(x0 x1): at the edge of its domain (x0 x1 near 1), the one-sided difference */
static inline double f4_c(const double *x)
{
    return exp(x[0] * x[1]);
}

static inline cr_status f4_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var a = cr_mul(t, x[0], x[1]);
    y[0] = cr_tape_call1(t, fv_of(&capped_fn, &f), &a, 1);
    return cr_tape_status(t);
}

/* sum5 of four variables and a constant */
static inline double f5_c(const double *x)
{
    return x[0] * x[1] + x[2] * x[3] * 1.5;
}

static inline cr_status f5_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var a[5] = {x[0], x[1], x[2], x[3], cr_const(1.5)};
    y[0] = cr_tape_call1(t, fv_of(&sum5_fn, &f), a, 5);
    return cr_tape_status(t);
}

/* sum5 of five variables: more variable arguments than a row has */
static inline double f5v_c(const double *x)
{
    return x[0] * x[1] + x[2] * x[3] * x[4];
}

static inline cr_status f5v_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    y[0] = cr_tape_call1(t, fv_of(&sum5_fn, &f), x, 5);
    return cr_tape_status(t);
}

/* wide of seven variables, both results: r0 r1 + r1 */
static inline double f6_c(const double *x)
{
    double y[2];
    wide_c(x, y);
    return y[0] * y[1] + y[1];
}

static inline cr_status f6_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var r[2] = {cr_const(NAN), cr_const(NAN)};
    cr_tape_call(t, fv_of(&wide_fn, &f), x, WIDE_N, r, 2);
    y[0] = cr_add(t, cr_mul(t, r[0], r[1]), r[1]);
    return cr_tape_status(t);
}

/* wide(x0, x1 x2, x0, 1.5, x3, x2, x4): six variable arguments, x0 twice, a constant */
static inline void f7_args(const double *x, double *a)
{
    const double v[WIDE_N] = {x[0], x[1] * x[2], x[0], 1.5, x[3], x[2], x[4]};
    memcpy(a, v, sizeof v);
}

static inline double f7_c(const double *x)
{
    double a[WIDE_N], y[2];
    f7_args(x, a);
    wide_c(a, y);
    return y[1] - 2 * y[0];
}

static inline cr_status f7_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value f;
    cr_var a[WIDE_N] = {x[0], cr_mul(t, x[1], x[2]), x[0], cr_const(1.5), x[3], x[2], x[4]};
    cr_var r[2] = {cr_const(NAN), cr_const(NAN)};
    cr_tape_call(t, fv_of(&wide_fn, &f), a, WIDE_N, r, 2);
    y[0] = cr_sub(t, r[1], cr_mul(t, cr_const(2.0), r[0]));
    return cr_tape_status(t);
}

#endif /* TEST_PULLBACK_RULES_H */
