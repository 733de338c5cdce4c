/*
 * Tests of prepared gradients of functions whose scalar calls are kept as pullbacks
 * (GENERIC records: a user function with a registered rrule, a rule with two results): at
 * several new points against central differences of the same functions in plain C and
 * against recording again; a generic record fed by and feeding scalar operations and array
 * records, through both entry points; zero-adjoint and non-differentiable functions of
 * variables evaluated again; no allocation after the first call; the rule kept from
 * preparing; allocation failures at every point; and the refusals: a rule that fails at the
 * new inputs, a result of another kind, an integer result that changes, a zero-adjoint
 * function known only through its overlay. Each refusal is followed by a good replay. The
 * variadic hypot and evalpoly (a row for hypot's two arguments, GENERIC records for other
 * counts) prepared and replayed, and the H v replay of hypot(x, y).
 */
#include <math.h>
#include <stdio.h>

#include "test_alloc.h"
#include "test_fault_hook.h"
#include "test_polar.h"
#include "test_util.h"
#include "test_variadic.h"

#define FD_RTOL 1e-8

/* Central differences (the library's 5-point method) of a plain function of n variables. */
static void fd_grad(cr_arena *arena, cr_fd_vec_fn f, void *env, const double *x, size_t n,
                    double *g)
{
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, f, env, x, n, 1, arena, g, NULL), CR_OK);
}

static const cr_argspec k_f64_1[1] = {{CR_M_F64, NULL}};
static const cr_argspec k_f64_2[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};
static const cr_argspec k_real_2[2] = {{CR_M_F64 | CR_M_F32, NULL}, {CR_M_F64 | CR_M_F32, NULL}};

/* ---- The user functions and their rules -------------------------------------------------- */

/* wob(x, y) = x sin(y) + y^2, a C function with a registered rrule */
static double wob_c(double x, double y)
{
    return x * sin(y) + y * y;
}

static cr_status wob_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(wob_c(args[0].u.f64, args[1].u.f64));
    return CR_OK;
}
static const cr_function wob_fn = {.name = "wob", .arity = 2, .primal = wob_primal};

typedef struct xy_env {
    double x, y, scale;
} xy_env;

/* d/dx = sin(y), d/dy = x cos(y) + 2 y (times scale: 1 for the rule, 2 for the rule
 * registered after preparing, which a prepared gradient must not see) */
static cr_status wob_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)nx;
    (void)arena;
    const xy_env *e = env;
    double g = dy->u.f64 * e->scale;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(g * sin(e->y));
    dx[2] = cr_tangent_f64(g * (e->x * cos(e->y) + 2 * e->y));
    return CR_OK;
}

static cr_status wob_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    xy_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(xy_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->x = args[0].u.f64;
    e->y = args[1].u.f64;
    e->scale = udata != NULL ? *(const double *)udata : 1.0;
    *pb = (cr_pullback){wob_pullback, e, "wob_pullback", 3};
    return wob_primal(arena, fv, args, nargs, y);
}

/* slog(x) = log(x), whose rule fails for x <= 0 */
static cr_status slog_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)fv;
    (void)nargs;
    double x = args[0].u.f64;
    if (!(x > 0))
        return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "slog: x = %g is not positive", x);
    *out = cr_value_f64(log(x));
    return CR_OK;
}
static const cr_function slog_fn = {.name = "slog", .arity = 1, .primal = slog_primal};

static cr_status slog_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    (void)arena;
    const xy_env *e = env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(dy->u.f64 / e->x);
    return CR_OK;
}

static cr_status slog_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = slog_primal(arena, fv, args, nargs, y);
    if (st != CR_OK)
        return st;
    xy_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(xy_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->x = args[0].u.f64;
    *pb = (cr_pullback){slog_pullback, e, "slog_pullback", 2};
    return CR_OK;
}

/* sq(x) = x^2, whose pullback fails for x > 10 */
static cr_status sq_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                           cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(args[0].u.f64 * args[0].u.f64);
    return CR_OK;
}
static const cr_function sq_fn = {.name = "sq", .arity = 1, .primal = sq_primal};

static cr_status sq_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    (void)nx;
    const xy_env *e = env;
    if (e->x > 10)
        return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "sq_pullback: x = %g is too large",
                            e->x);
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(2 * e->x * dy->u.f64);
    return CR_OK;
}

static cr_status sq_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                          const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                          const void *udata)
{
    (void)cfg;
    (void)udata;
    xy_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(xy_env));
    if (e == NULL)
        return CR_ENOMEM;
    e->x = args[0].u.f64;
    *pb = (cr_pullback){sq_pullback, e, "sq_pullback", 2};
    return sq_primal(arena, fv, args, nargs, y);
}

/* flip(x) = x, given as an f64 for x > 0 and as an f32 otherwise: the kind of its result
 * depends on the value */
static cr_status flip_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                             size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    double x = args[0].u.f64;
    *out = x > 0 ? cr_value_f64(x) : cr_value_f32((float)x);
    return CR_OK;
}
static const cr_function flip_fn = {.name = "flip", .arity = 1, .primal = flip_primal};

static cr_status ident_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    (void)arena;
    (void)env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(dy->u.f64);
    return CR_OK;
}

static cr_status flip_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){ident_pullback, NULL, "flip_pullback", 2};
    return flip_primal(arena, fv, args, nargs, y);
}

/* Zero-adjoint and non-differentiable functions: flr(x) = floor(x) (an f64), isign(x) = the
 * sign of x (an integer), rnd(x) = round(x) (non-differentiable in a registry), hidden(x), an
 * overlay without primal */
static cr_status flr_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(floor(args[0].u.f64));
    return CR_OK;
}
static const cr_function flr_fn = {.name = "flr", .arity = 1, .primal = flr_primal};

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

static cr_status rnd_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(round(args[0].u.f64));
    return CR_OK;
}
static const cr_function rnd_fn = {.name = "rnd", .arity = 1, .primal = rnd_primal};

static const cr_function hidden_fn = {.name = "hidden", .arity = 1};

static cr_status hidden_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], x[0]);
    return cr_tape_status(t);
}

/* An engine with the rules of wob, polar, slog and flip, flr and isign zero-adjoint, rnd
 * non-differentiable (in the registry under the engine), hidden zero-adjoint with an
 * overlay only. */
typedef struct gfix {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_registry *reg;
    cr_engine *eng;
} gfix;

static void make_engine(cr_ctx *ctx, cr_registry **reg, cr_engine **eng)
{
    assert_int_equal(cr_registry_new(ctx, NULL, reg), CR_OK);
    assert_int_equal(cr_registry_non_differentiable(*reg, &rnd_fn, k_f64_1, 1, false), CR_OK);
    assert_int_equal(cr_engine_new(ctx, *reg, eng), CR_OK);
    const struct {
        const cr_function *fn;
        size_t nargs;
        cr_rrule_fn rrule;
    } rules[] = {{&wob_fn, 2, wob_rrule}, /* (real, real): see test_rule_kept */
                 {&polar_fn, 2, polar_rrule},
                 {&slog_fn, 1, slog_rrule},
                 {&flip_fn, 1, flip_rrule},
                 {&sq_fn, 1, sq_rrule}};
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
        cr_rule_def def = {.struct_size = sizeof def,
                           .fn = rules[k].fn,
                           .nargs = rules[k].nargs,
                           .args = k == 0                ? k_real_2
                                   : rules[k].nargs == 1 ? k_f64_1
                                                         : k_f64_2,
                           .rrule = rules[k].rrule};
        assert_int_equal(cr_engine_from_rrule(*eng, &def), CR_OK);
    }
    assert_int_equal(cr_engine_zero_adjoint(*eng, &flr_fn), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(*eng, &isign_fn), CR_OK);
    assert_int_equal(cr_engine_overlay(*eng, &hidden_fn, hidden_ad, 1, NULL), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(*eng, &hidden_fn), CR_OK);
}

static int gfix_setup(void **state)
{
    gfix *f = calloc(1, sizeof *f);
    if (f == NULL || cr_ctx_new(NULL, &f->ctx) != CR_OK ||
        cr_arena_new(f->ctx, NULL, &f->arena) != CR_OK)
        return -1;
    make_engine(f->ctx, &f->reg, &f->eng);
    *state = f;
    return 0;
}

static int gfix_teardown(void **state)
{
    gfix *f = *state;
    cr_engine_free(f->eng);
    cr_registry_free(f->reg);
    cr_arena_free(f->arena);
    cr_ctx_free(f->ctx);
    free(f);
    return 0;
}

static cr_var call1(cr_tape *t, const cr_function *fn, cr_var a)
{
    cr_value fv = cr_value_function(fn, NULL);
    return cr_tape_call1(t, &fv, &a, 1);
}

static cr_var call2(cr_tape *t, const cr_function *fn, cr_var a, cr_var b)
{
    cr_value fv = cr_value_function(fn, NULL);
    cr_var args[2] = {a, b};
    return cr_tape_call1(t, &fv, args, 2);
}

/* Record f on an ordinary tape with the same engine: the gradient without replay. */
static void rerecord(gfix *f, cr_ad_fn fn, void *env, const double *x, size_t n, double *y,
                     double *g)
{
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = f->eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    assert_ok(t, cr_tape_value_and_gradient(t, fn, env, x, n, y, g));
    cr_tape_free(t);
}

/* ---- A user rule and a two-result rule among scalar operations -------------------------- */

/* wob(x0 x1, exp(x2)) / (1 + r^2) + theta x2 + wob(theta, x0) with (r, theta) = polar(x0 + x2,
 * x1): generic records fed by scalar operations and by each other, feeding scalar operations */
static double prog_c(const double *x)
{
    double w = wob_c(x[0] * x[1], exp(x[2]));
    double a = x[0] + x[2], b = x[1];
    double r = sqrt(a * a + b * b), th = atan2(b, a);
    return w / (1 + r * r) + th * x[2] + wob_c(th, x[0]);
}

static cr_status prog_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = prog_c(x);
    return CR_OK;
}

static cr_status prog_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var w = call2(t, &wob_fn, cr_mul(t, x[0], x[1]), cr_exp(t, x[2]));
    cr_value polar = cr_value_function(&polar_fn, NULL);
    cr_var pa[2] = {cr_add(t, x[0], x[2]), x[1]}, rt[2];
    if (cr_tape_call(t, &polar, pa, 2, rt, 2) != CR_OK)
        return cr_tape_status(t);
    cr_var q = cr_div(t, w, cr_add(t, cr_const(1.0), cr_mul(t, rt[0], rt[0])));
    y[0] = cr_add(t, cr_add(t, q, cr_mul(t, rt[1], x[2])), call2(t, &wob_fn, rt[1], x[0]));
    return cr_tape_status(t);
}

static void test_user_rules_replay(void **state)
{
    gfix *f = *state;
    counter c = {0};
    cr_ctx *ctx;
    cr_ctx_params cp = {.struct_size = sizeof cp, .realloc_fn = counting_realloc, .alloc_env = &c};
    assert_int_equal(cr_ctx_new(&cp, &ctx), CR_OK);
    double x[3] = {0.7, -0.4, 0.3}, g[3], g2[3], fd[3], y, y2;
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(ctx, f->eng, prog_t, NULL, x, 3, &p), CR_OK);
    const double pts[5][3] = {
        {0.7, -0.4, 0.3}, {1.3, 0.8, -0.6}, {-0.5, 1.7, 0.2}, {2.1, -1.2, 1.1}, {0.2, 0.3, -1.4}};
    for (size_t k = 0; k < 5; k++) {
        size_t before = c.allocs;
        assert_int_equal(cr_prepared_value_and_gradient(p, pts[k], 3, &y, g), CR_OK);
        if (k > 0) /* after the first call, a replay allocates nothing */
            assert_int_equal(c.allocs, before);
        assert_close(y, prog_c(pts[k]), 1e-14);
        fd_grad(f->arena, prog_fd, NULL, pts[k], 3, fd);
        for (size_t j = 0; j < 3; j++)
            assert_close(g[j], fd[j], FD_RTOL);
        /* The same as recording again at this point. */
        rerecord(f, prog_t, NULL, pts[k], 3, &y2, g2);
        assert_true(y2 == y);
        for (size_t j = 0; j < 3; j++)
            assert_close(g[j], g2[j], 1e-15);
        cr_arena_reset(f->arena);
    }
    cr_prepared_free(p);
    cr_ctx_free(ctx);
    assert_int_equal(c.live, 0);
}

/* ---- Variadic functions ------------------------------------------------------------------ */

/*
 * hypot(x, y, ...) and evalpoly(x, c0, ...) of 2, 3, 5 and 10 arguments, prepared with the
 * built-in rules and with an engine's, replayed at new points against central differences
 * of the same program in plain C (hypot of two arguments is its row; other counts GENERIC
 * records calling the rule again). cr_prepare_hvp takes hypot(x, y)'s row and the rules'
 * pullbacks of 3, 5 and 10 variable arguments (H v against central differences of the
 * prepared gradient).
 */
static void test_variadic_replay(void **state)
{
    gfix *f = *state;
    const cr_value *fns[2] = {&cr_fn_hypot, &cr_fn_evalpoly};
    const cr_engine *engs[2] = {NULL, f->eng};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < 4; i++)
            for (size_t e = 0; e < 2; e++) {
                vcall v = {fns[k], NULL, NULL};
                size_t n = vcall_ns[i];
                cr_prepared *p;
                assert_int_equal(
                    cr_prepare_gradient(f->ctx, engs[e], vcall_tape, &v, vcall_pts[i], n, &p),
                    CR_OK);
                for (size_t q = 1; q <= 3; q++) {
                    double x[10], g[10], fd[10], y, y0;
                    for (size_t j = 0; j < n; j++)
                        x[j] = vcall_pts[i][j] * (1 + 0.05 * (double)q) +
                               ((j + q) % 2 ? 0.03 : -0.04) * (double)q;
                    assert_int_equal(cr_prepared_value_and_gradient(p, x, n, &y, g), CR_OK);
                    vcall_fd(x, n, &y0, 1, &v);
                    assert_close(y, y0, 1e-14);
                    vcall_fd_grad(f->arena, &v, x, n, fd);
                    for (size_t j = 0; j < n; j++)
                        assert_close(g[j], fd[j], FD_RTOL);
                    cr_arena_reset(f->arena);
                }
                cr_prepared_free(p);

                assert_int_equal(
                    cr_prepare_hvp(f->ctx, engs[e], vcall_tape, &v, vcall_pts[i], n, &p), CR_OK);
                double x[10], dir[10], hv[10], g[10], xp[10], xm[10], gp[10], gm[10], y, h = 1e-6;
                for (size_t j = 0; j < n; j++) {
                    x[j] = vcall_pts[i][j] * 0.9 + (j % 2 ? 0.05 : -0.03);
                    dir[j] = 0.6 - 0.17 * (double)j;
                }
                assert_int_equal(cr_prepared_hvp(p, x, n, dir, hv, &y, g), CR_OK);
                for (size_t j = 0; j < n; j++) {
                    xp[j] = x[j] + h * dir[j];
                    xm[j] = x[j] - h * dir[j];
                }
                assert_int_equal(cr_prepared_value_and_gradient(p, xp, n, &y, gp), CR_OK);
                assert_int_equal(cr_prepared_value_and_gradient(p, xm, n, &y, gm), CR_OK);
                for (size_t j = 0; j < n; j++)
                    assert_close(hv[j], (gp[j] - gm[j]) / (2 * h), 1e-7);
                cr_prepared_free(p);
            }
}

/* ---- Generic records next to array records ---------------------------------------------- */

static const double k_B[4] = {0.5, -1.0, 0.25, 2.0};

/* sum(exp.(x0 .* B)) and wob(.., x1), feeding sum(sin.(w .* B)): array records feed the
 * generic record, which feeds array records */
static double mixed_c(const double *x)
{
    double s = 0, u = 0;
    for (size_t i = 0; i < 4; i++)
        s += exp(x[0] * k_B[i]);
    double w = wob_c(s, x[1]);
    for (size_t i = 0; i < 4; i++)
        u += sin(w * k_B[i]);
    return u * x[0] + w;
}

static cr_status mixed_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = mixed_c(x);
    return CR_OK;
}

static cr_status mixed_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const cr_array *B = env;
    cr_avar e = cr_av_broadcast1(t, &cr_fn_exp,
                                 cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(x[0]),
                                                              cr_targ_arr(cr_av_const(B)))));
    cr_var w = call2(t, &wob_fn, cr_av_sum(t, e), x[1]);
    cr_avar s = cr_av_broadcast1(
        t, &cr_fn_sin,
        cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(w), cr_targ_arr(cr_av_const(B)))));
    y[0] = cr_add(t, cr_mul(t, cr_av_sum(t, s), x[0]), w);
    return cr_tape_status(t);
}

/* wob(sum(X), dot(X, X)) * sum(sin.(X)) + theta with (r, theta) = polar(X[0], r0 ...) */
static double arr_c(const double *x, size_t n)
{
    double s = 0, d = 0, u = 0;
    for (size_t i = 0; i < n; i++) {
        s += x[i];
        d += x[i] * x[i];
        u += sin(x[i]);
    }
    double w = wob_c(s, d);
    double r = sqrt(w * w + u * u), th = atan2(u, w);
    return w * u + r * th;
}

static cr_status arr_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)m;
    (void)env;
    y[0] = arr_c(x, n);
    return CR_OK;
}

static cr_status arr_t(cr_tape *t, const cr_avar *xs, size_t n, cr_var *y, void *env)
{
    (void)n;
    (void)env;
    cr_var w = call2(t, &wob_fn, cr_av_sum(t, xs[0]), cr_av_dot(t, xs[0], xs[0]));
    cr_var u = cr_av_sum(t, cr_av_broadcast1(t, &cr_fn_sin, cr_targ_arr(xs[0])));
    cr_value polar = cr_value_function(&polar_fn, NULL);
    cr_var pa[2] = {w, u}, rt[2];
    if (cr_tape_call(t, &polar, pa, 2, rt, 2) != CR_OK)
        return cr_tape_status(t);
    *y = cr_add(t, cr_mul(t, w, u), cr_mul(t, rt[0], rt[1]));
    return cr_tape_status(t);
}

static void test_with_array_records(void **state)
{
    gfix *f = *state;
    cr_array B = cr_array_vector((double *)(uintptr_t)k_B, 4);
    double x[2] = {0.3, 0.9}, y, y2, g[2], g2[2], fd[2];
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, f->eng, mixed_t, &B, x, 2, &p), CR_OK);
    const double pts[4][2] = {{0.3, 0.9}, {-0.6, 0.4}, {0.8, -1.3}, {0.1, 2.2}};
    for (size_t k = 0; k < 4; k++) {
        assert_int_equal(cr_prepared_value_and_gradient(p, pts[k], 2, &y, g), CR_OK);
        assert_close(y, mixed_c(pts[k]), 1e-13);
        fd_grad(f->arena, mixed_fd, NULL, pts[k], 2, fd);
        for (size_t j = 0; j < 2; j++)
            assert_close(g[j], fd[j], FD_RTOL);
        rerecord(f, mixed_t, &B, pts[k], 2, &y2, g2);
        assert_true(y2 == y);
        for (size_t j = 0; j < 2; j++)
            assert_close(g[j], g2[j], 1e-15);
        cr_arena_reset(f->arena);
    }
    cr_prepared_free(p);

    /* A function of an array: generic records between array records. */
    enum { N = 5 };
    double xa[N], ga[N], fda[N];
    cr_array X = cr_array_vector(xa, N), G = cr_array_vector(ga, N);
    const cr_array *xs[1] = {&X};
    cr_array *gs[1] = {&G};
    for (size_t i = 0; i < N; i++)
        xa[i] = 0.1 * (double)i - 0.15;
    assert_int_equal(cr_prepare_gradient_arrays(f->ctx, f->eng, arr_t, NULL, xs, 1, &p), CR_OK);
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < N; i++)
            xa[i] = 0.4 * sin(0.9 * (double)i + round) - 0.05 * round;
        assert_int_equal(cr_prepared_value_and_gradient_arrays(p, xs, 1, &y, gs), CR_OK);
        assert_close(y, arr_c(xa, N), 1e-13);
        fd_grad(f->arena, arr_fd, NULL, xa, N, fda);
        for (size_t i = 0; i < N; i++)
            assert_close(ga[i], fda[i], 1e-7);
        cr_arena_reset(f->arena);
    }
    cr_prepared_free(p);
}

/* ---- Zero-adjoint and non-differentiable functions of variables ------------------------- */

/* x0 flr(x1) + sin(x0 x1) rnd(x0) + isign(x1) x0: the zero-adjoint and non-differentiable
 * results are evaluated again at each replay (their derivatives are zero) */
static double zero_c(const double *x)
{
    return x[0] * floor(x[1]) + sin(x[0] * x[1]) * round(x[0]) + (x[1] > 0 ? 1 : -1) * x[0];
}

static cr_status zero_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = zero_c(x);
    return CR_OK;
}

static cr_status zero_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_var a = cr_mul(t, x[0], call1(t, &flr_fn, x[1]));
    cr_var b = cr_mul(t, cr_sin(t, cr_mul(t, x[0], x[1])), call1(t, &rnd_fn, x[0]));
    y[0] = cr_add(t, cr_add(t, a, b), cr_mul(t, call1(t, &isign_fn, x[1]), x[0]));
    return cr_tape_status(t);
}

/* x sin'(x) with sin declared zero-adjoint: the row evaluated again, no derivative through
 * it */
static cr_status zrow_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], cr_tape_call1(t, &cr_fn_sin, x, 1));
    return cr_tape_status(t);
}

/* picky(x) = x + 1 for x <= 5; its overlay fails with CR_EDOMAIN above. */
static const cr_function picky_fn = {.name = "picky", .arity = 1};

static cr_status picky_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    if (x[0].v > 5.0)
        return CR_EDOMAIN;
    y[0] = cr_add(t, x[0], cr_const(1.0));
    return cr_tape_status(t);
}

static cr_status picky_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], call1(t, &picky_fn, x[0]));
    return cr_tape_status(t);
}

static cr_status hidden_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], call1(t, &hidden_fn, x[0]));
    return cr_tape_status(t);
}

static void test_zero_adjoint(void **state)
{
    gfix *f = *state;
    double x[2] = {1.3, 0.6}, y, y2, g[2], g2[2], fd[2];
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, f->eng, zero_t, NULL, x, 2, &p), CR_OK);
    /* Points away from the jumps of floor and round, isign's sign as recorded. */
    const double pts[4][2] = {{1.3, 0.6}, {2.8, 1.4}, {-0.7, 2.3}, {0.2, 3.7}};
    for (size_t k = 0; k < 4; k++) {
        assert_int_equal(cr_prepared_value_and_gradient(p, pts[k], 2, &y, g), CR_OK);
        assert_close(y, zero_c(pts[k]), 1e-14);
        fd_grad(f->arena, zero_fd, NULL, pts[k], 2, fd);
        for (size_t j = 0; j < 2; j++)
            assert_close(g[j], fd[j], FD_RTOL);
        rerecord(f, zero_t, NULL, pts[k], 2, &y2, g2);
        assert_true(y2 == y);
        for (size_t j = 0; j < 2; j++)
            assert_close(g[j], g2[j], 1e-15);
        cr_arena_reset(f->arena);
    }
    /* isign's integer result changes: refused, nothing written; then usable again. */
    const double neg[2] = {0.5, -0.4};
    y = g[0] = g[1] = 42.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, neg, 2, &y, g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "isign is -1 at these inputs and was 1 when recorded");
    assert_true(y == 42.0 && g[0] == 42.0 && g[1] == 42.0);
    assert_int_equal(cr_prepared_value_and_gradient(p, pts[1], 2, &y, g), CR_OK);
    assert_close(y, zero_c(pts[1]), 1e-14);
    cr_prepared_free(p);

    /* A zero-adjoint row: evaluated again, same as recording again. */
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(eng, cr_fn_sin.u.func.fn), CR_OK);
    double x1 = 0.4, y1, g1, yr, gr;
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, zrow_t, NULL, &x1, 1, &p), CR_OK);
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    for (double v = -1.5; v < 2.0; v += 0.7) {
        assert_int_equal(cr_prepared_value_and_gradient(p, &v, 1, &y1, &g1), CR_OK);
        assert_ok(t, cr_tape_value_and_gradient(t, zrow_t, NULL, &v, 1, &yr, &gr));
        assert_close(y1, v * sin(v), 1e-15);
        assert_true(y1 == yr);
        assert_close(g1, gr, 1e-15);
    }
    cr_tape_free(t);
    cr_prepared_free(p);
    cr_engine_free(eng);

    /* A zero-adjoint function with an overlay and no primal is evaluated again through its
     * overlay, run on constants: x * hidden(x) with hidden(x) = x^2 of no derivative has the
     * value x^3 and the derivative hidden(x) = x^2 (a stale constant would give x0^2). */
    assert_int_equal(cr_prepare_gradient(f->ctx, f->eng, hidden_t, NULL, x, 1, &p), CR_OK);
    assert_int_equal(
        cr_tape_new(f->ctx,
                    &(cr_tape_params){.struct_size = sizeof(cr_tape_params), .engine = f->eng}, &t),
        CR_OK);
    for (double v = -1.5; v < 2.0; v += 0.7) {
        assert_int_equal(cr_prepared_value_and_gradient(p, &v, 1, &y1, &g1), CR_OK);
        assert_ok(t, cr_tape_value_and_gradient(t, hidden_t, NULL, &v, 1, &yr, &gr));
        assert_close(y1, v * v * v, 1e-15);
        assert_close(g1, v * v, 1e-15);
        assert_true(y1 == yr && g1 == gr);
    }
    cr_prepared_free(p);
    /* The same through a prepared H v: no second derivative through hidden either, as on a
     * second-order tape. */
    assert_int_equal(cr_prepare_hvp(f->ctx, f->eng, hidden_t, NULL, x, 1, &p), CR_OK);
    cr_tape *t2;
    cr_tape_params tp2 = {
        .struct_size = sizeof tp2, .engine = f->eng, .flags = CR_TAPE_SECOND_ORDER};
    assert_int_equal(cr_tape_new(f->ctx, &tp2, &t2), CR_OK);
    for (double v = -1.5; v < 2.0; v += 0.7) {
        double dir = 0.75, hv, hr, gh;
        assert_int_equal(cr_prepared_hvp(p, &v, 1, &dir, &hv, &y1, &gh), CR_OK);
        cr_var xv, yv;
        cr_tape_reset(t2);
        assert_ok(t2, cr_tape_record(t2, hidden_t, NULL, &v, 1, &xv, &yv, 1));
        assert_ok(t2, cr_tape_hvp(t2, yv, &xv, 1, &dir, &hr, &gr));
        assert_true(y1 == yv.v && gh == gr && hv == hr);
        assert_close(gh, v * v, 1e-15);
    }
    cr_tape_free(t2);
    cr_tape_free(t);
    cr_prepared_free(p);

    /* An overlay that fails at the new inputs: its status, named; nothing written; the next
     * call at good inputs works. */
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_overlay(eng, &picky_fn, picky_ad, 1, NULL), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(eng, &picky_fn), CR_OK);
    x1 = 1.0;
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, picky_t, NULL, &x1, 1, &p), CR_OK);
    double bad = 6.0, good = 2.0;
    y1 = g1 = 42;
    assert_int_equal(cr_prepared_value_and_gradient(p, &bad, 1, &y1, &g1), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "prepared gradient: picky failed at these inputs: picky (zero-adjoint "
                    "overlay) failed");
    assert_true(y1 == 42 && g1 == 42);
    assert_int_equal(cr_prepared_value_and_gradient(p, &good, 1, &y1, &g1), CR_OK);
    assert_close(y1, 6.0, 1e-15);
    assert_close(g1, 3.0, 1e-15);
    cr_prepared_free(p);
    cr_engine_free(eng);
}

/* ---- Refusals at replay --------------------------------------------------------------------- */

static cr_status slog_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, call1(t, &slog_fn, cr_sub(t, x[0], x[1])), x[1]);
    return cr_tape_status(t);
}

static cr_status slog_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = log(x[0] - x[1]) * x[1];
    return CR_OK;
}

static cr_status sq_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = sin(x[0] * x[0]);
    return CR_OK;
}

static cr_status flip_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, call1(t, &flip_fn, x[0]), x[0]);
    return cr_tape_status(t);
}

/* sin(sq(x)) */
static cr_status sq_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_sin(t, call1(t, &sq_fn, x[0]));
    return cr_tape_status(t);
}

/* polar called for one result: refused when recording */
static cr_status polar1_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = call2(t, &polar_fn, x[0], x[1]);
    return cr_tape_status(t);
}

static void test_refusals(void **state)
{
    gfix *f = *state;
    double x[2] = {2.0, 0.5}, y, g[2];
    cr_prepared *p;
    /* A rule that fails at the new inputs: its status, naming it; nothing written. */
    assert_int_equal(cr_prepare_gradient(f->ctx, f->eng, slog_t, NULL, x, 2, &p), CR_OK);
    const double bad[2] = {0.5, 1.0};
    y = g[0] = g[1] = 42.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, bad, 2, &y, g), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "prepared gradient: slog failed at these inputs: x = -0.5 is not "
                    "positive");
    assert_true(y == 42.0 && g[0] == 42.0 && g[1] == 42.0);
    const double good[2] = {3.0, 0.25};
    double fd[2];
    assert_int_equal(cr_prepared_value_and_gradient(p, good, 2, &y, g), CR_OK);
    assert_close(y, log(2.75) * 0.25, 1e-15);
    fd_grad(f->arena, slog_fd, NULL, good, 2, fd);
    for (size_t j = 0; j < 2; j++)
        assert_close(g[j], fd[j], FD_RTOL);
    cr_prepared_free(p);

    /* A result of another kind at the new inputs: refused; then usable again. */
    double x1 = 1.5, g1 = 42.0, y1 = 42.0;
    assert_int_equal(cr_prepare_gradient(f->ctx, f->eng, flip_t, NULL, &x1, 1, &p), CR_OK);
    x1 = -2.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x1, 1, &y1, &g1), CR_ESHAPE);
    assert_contains(cr_ctx_errmsg(f->ctx),
                    "prepared gradient: flip gives a f32 at these inputs, a f64 when recorded");
    assert_true(y1 == 42.0 && g1 == 42.0);
    x1 = 3.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x1, 1, &y1, &g1), CR_OK);
    assert_close(y1, 9.0, 0);
    assert_close(g1, 6.0, 0);
    cr_prepared_free(p);

    /* A pullback that fails at the new inputs: its status, naming it and its function. */
    x1 = 1.0;
    assert_int_equal(cr_prepare_gradient(f->ctx, f->eng, sq_t, NULL, &x1, 1, &p), CR_OK);
    x1 = 12.0;
    y1 = g1 = 42.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x1, 1, &y1, &g1), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(f->ctx), "prepared gradient: pullback sq_pullback (of sq) "
                                           "failed: sq_pullback: x = 12 is too large");
    assert_true(y1 == 42.0 && g1 == 42.0);
    x1 = 3.0;
    assert_int_equal(cr_prepared_value_and_gradient(p, &x1, 1, &y1, &g1), CR_OK);
    assert_close(y1, sin(9.0), 1e-15);
    fd_grad(f->arena, sq_fd, NULL, &x1, 1, fd);
    assert_close(g1, fd[0], FD_RTOL);
    cr_prepared_free(p);

    /* Two results where one is expected: refused when preparing. */
    p = (cr_prepared *)&x;
    assert_int_equal(cr_prepare_gradient(f->ctx, f->eng, polar1_t, NULL, x, 2, &p), CR_EINVAL);
    assert_null(p);
    assert_contains(cr_ctx_errmsg(f->ctx), "polar gives 2 results, 1 expected");
}

/* ---- The rules are those of the recording ----------------------------------------------- */

static cr_function k_dummy_fns[40];

static void test_rule_kept(void **state)
{
    gfix *f = *state;
    cr_registry *reg;
    cr_engine *eng;
    make_engine(f->ctx, &reg, &eng);
    double x[3] = {0.7, -0.4, 0.3}, y, y2, g[3], g2[3], fd[3];
    cr_prepared *p;
    assert_int_equal(cr_prepare_gradient(f->ctx, eng, prog_t, NULL, x, 3, &p), CR_OK);
    /* After preparing: a more specific rule for wob, whose pullback doubles its cotangents
     * (a new recording uses it), and enough other rules that the engine's registry moves
     * its entries to new storage. */
    static const double two = 2.0;
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &wob_fn,
                       .nargs = 2,
                       .args = k_f64_2,
                       .rrule = wob_rrule,
                       .udata = &two};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    for (size_t k = 0; k < sizeof k_dummy_fns / sizeof k_dummy_fns[0]; k++) {
        k_dummy_fns[k] = (cr_function){.name = "dummy", .arity = 1, .primal = flr_primal};
        cr_rule_def d = {.struct_size = sizeof d,
                         .fn = &k_dummy_fns[k],
                         .nargs = 1,
                         .args = k_f64_1,
                         .rrule = slog_rrule};
        assert_int_equal(cr_engine_from_rrule(eng, &d), CR_OK);
    }
    const double pt[3] = {1.1, 0.5, -0.3};
    assert_int_equal(cr_prepared_value_and_gradient(p, pt, 3, &y, g), CR_OK);
    fd_grad(f->arena, prog_fd, NULL, pt, 3, fd);
    for (size_t j = 0; j < 3; j++)
        assert_close(g[j], fd[j], FD_RTOL);
    /* A new recording sees the new rule: its gradient differs. */
    cr_tape *t;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &tp, &t), CR_OK);
    assert_ok(t, cr_tape_value_and_gradient(t, prog_t, NULL, pt, 3, &y2, g2));
    assert_true(y2 == y);
    assert_true(fabs(g2[0] - g[0]) > 1e-3);
    cr_tape_free(t);
    cr_prepared_free(p);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/* ---- Allocation failures ----------------------------------------------------------------- */

enum { BIG_N = 100, BIG_M = 20000 };

/* s = sum over i of wob(x_i, x_i+1) + theta_i + x_i flr(x_i+1), (r_i, theta_i) = polar(x_i,
 * x_i+1), then sum(sin.(s .* B) .* B) over a constant array B of BIG_M elements */
static cr_status big_t(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)m;
    cr_value polar = cr_value_function(&polar_fn, NULL);
    cr_var s = cr_const(0.0);
    for (size_t i = 0; i + 1 < n; i++) {
        cr_var rt[2];
        if (cr_tape_call(t, &polar, &x[i], 2, rt, 2) != CR_OK)
            return cr_tape_status(t);
        cr_var a = cr_add(t, call2(t, &wob_fn, x[i], x[i + 1]), rt[1]);
        s = cr_add(t, s, cr_add(t, a, cr_mul(t, x[i], call1(t, &flr_fn, x[i + 1]))));
    }
    /* Then array records over a constant array: their shadows are allocated only when the
     * reverse sweep runs, so the first call needs arena blocks of its own. */
    const cr_array *B = env;
    cr_avar a = cr_av_broadcast1(
        t, &cr_fn_sin,
        cr_targ_arr(cr_av_broadcast2(t, &cr_fn_mul, cr_targ_var(s), cr_targ_arr(cr_av_const(B)))));
    y[0] =
        cr_av_sum(t, cr_av_broadcast2(t, &cr_fn_mul, cr_targ_arr(a), cr_targ_arr(cr_av_const(B))));
    return cr_tape_status(t);
}

/* Allocation failures at every point of preparing big_t and of its first call: CR_ENOMEM,
 * nothing leaks, and a failed call is followed by a good one, which gives the value and
 * gradient of a recording in a context that does not fail. */
typedef struct fault_env {
    double x[BIG_N], g[BIG_N], want[BIG_N], b[BIG_M], y, yw;
    cr_array B;
    cr_registry *reg;
    cr_engine *eng;
} fault_env;

static void fault_setup(cr_ctx *ctx, void *env)
{
    fault_env *e = env;
    make_engine(ctx, &e->reg, &e->eng);
}

static cr_status fault_prepare(cr_ctx *ctx, void *env, cr_prepared **p)
{
    fault_env *e = env;
    return cr_prepare_gradient(ctx, e->eng, big_t, &e->B, e->x, BIG_N, p);
}

static cr_status fault_call(cr_prepared *p, void *env)
{
    fault_env *e = env;
    return cr_prepared_value_and_gradient(p, e->x, BIG_N, &e->y, e->g);
}

static void fault_check(void *env)
{
    fault_env *e = env;
    assert_true(e->y == e->yw);
    for (size_t i = 0; i < BIG_N; i++)
        assert_close(e->g[i], e->want[i], 1e-15);
}

static void fault_teardown(void *env)
{
    fault_env *e = env;
    cr_engine_free(e->eng);
    cr_registry_free(e->reg);
}

static void test_fault_injection(void **state)
{
    (void)state;
    static fault_env e;
    for (size_t i = 0; i < BIG_M; i++)
        e.b[i] = 0.01 * sin((double)i);
    e.B = cr_array_vector(e.b, BIG_M);
    for (size_t i = 0; i < BIG_N; i++)
        e.x[i] = 0.3 + 0.6 * cos((double)i);
    {
        cr_ctx *clean;
        assert_int_equal(cr_ctx_new(NULL, &clean), CR_OK);
        fault_setup(clean, &e);
        cr_tape *t;
        cr_tape_params tp = {.struct_size = sizeof tp, .engine = e.eng};
        assert_int_equal(cr_tape_new(clean, &tp, &t), CR_OK);
        assert_ok(t, cr_tape_value_and_gradient(t, big_t, &e.B, e.x, BIG_N, &e.yw, e.want));
        cr_tape_free(t);
        fault_teardown(&e);
        cr_ctx_free(clean);
    }
    const fault_case fc = {.setup = fault_setup,
                           .prepare = fault_prepare,
                           .call = fault_call,
                           .check = fault_check,
                           .teardown = fault_teardown,
                           .max_runs = 399};
    fault_tally n = fault_each_allocation(&fc, &e);
    assert_true(n.failed_call > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_user_rules_replay, gfix_setup, gfix_teardown),
        cmocka_unit_test_setup_teardown(test_with_array_records, gfix_setup, gfix_teardown),
        cmocka_unit_test_setup_teardown(test_zero_adjoint, gfix_setup, gfix_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, gfix_setup, gfix_teardown),
        cmocka_unit_test_setup_teardown(test_rule_kept, gfix_setup, gfix_teardown),
        cmocka_unit_test_setup_teardown(test_variadic_replay, gfix_setup, gfix_teardown),
        cmocka_unit_test(test_fault_injection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
