/*
 * Tests of the engine's configuration on the tape: overlays (Mooncake's worked example:
 * scale(x) = 2x overlaid with 3x), user functions recorded inside, rules making a function
 * a primitive (is_primitive; the rule wins over an overlay), rules taken in the generic
 * rrule form (one and two results), zero-adjoint and non-differentiable declarations,
 * failing pullbacks, rrule_via_ad / frule_via_ad, and a higher-order rule (a functor
 * applying a user function twice) that needs them; the variadic hypot and evalpoly (a row
 * for hypot's two arguments, rules for other counts) on every kind of tape. Gradients are
 * checked against central differences of the same functions in plain C.
 */
#include <math.h>
#include <stdio.h>

#include "test_polar.h"
#include "test_util.h"
#include "test_variadic.h"
#include "test_wave.h"

#define FD_RTOL 1e-8

static double fd1(cr_fd_fn f, void *env, double x)
{
    cr_fdm m;
    double d = (double)NAN;
    if (cr_fdm_central(5, 1, &m) != CR_OK ||
        cr_fd_derivative(&m, NULL, f, env, x, &d, NULL) != CR_OK)
        return (double)NAN;
    return d;
}

static const cr_argspec k_f64_1[1] = {{CR_M_F64, NULL}};
static const cr_argspec k_f64_2[2] = {{CR_M_F64, NULL}, {CR_M_F64, NULL}};

/* ---- Mooncake's overlay example ------------------------------------------------------------ */

static cr_status scale_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(2 * args[0].u.f64);
    return CR_OK;
}
static const cr_function scale_fn = {.name = "scale", .arity = 1, .primal = scale_primal};

static cr_status scale_overlay(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m,
                               void *env)
{
    (void)n;
    (void)m;
    int *calls = env;
    if (calls != NULL)
        (*calls)++;
    y[0] = cr_mul(t, cr_const(3.0), x[0]);
    return cr_tape_status(t);
}

static void test_overlay(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    int calls = 0;
    assert_int_equal(cr_engine_overlay(eng, &scale_fn, scale_overlay, 1, &calls), CR_OK);
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    cr_value scale = cr_value_function(&scale_fn, NULL);
    cr_var x = cr_tape_input(t, 5.0);
    cr_var y = cr_tape_call1(t, &scale, &x, 1);
    /* (15.0, 3.0): the AD sees the overlay. */
    assert_close(y.v, 15.0, 0);
    double g;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    assert_close(g, 3.0, 0);
    assert_int_equal(calls, 1);
    assert_false(cr_engine_is_primitive(eng, &scale, &(cr_value){.kind = CR_KIND_F64}, 1));
    /* Outside the AD the primal is unchanged. */
    cr_value yv, xv = cr_value_f64(5.0);
    assert_int_equal(cr_function_call(f->arena, &scale, &xv, 1, &yv), CR_OK);
    assert_close(yv.u.f64, 10.0, 0);
    /* Wrong result count for an overlay */
    cr_var two[2];
    assert_int_equal(cr_tape_call(t, &scale, &x, 1, two, 2), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "scale gives 1 result, 2 expected");
    cr_tape_reset(t);
    assert_int_equal(cr_engine_overlay(eng, &scale_fn, scale_overlay, 0, NULL), CR_EINVAL);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- A rule makes a function a primitive ---------------------------------------------------- */

/* hyp(x, y) = sqrt(x^2 + y^2): an rrule written in the generic form */
static double hyp_c(double x, double y)
{
    return sqrt(x * x + y * y);
}

static cr_status hyp_primal(cr_arena *arena, const cr_value *fv, const cr_value *args, size_t nargs,
                            cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    *out = cr_value_f64(hyp_c(args[0].u.f64, args[1].u.f64));
    return CR_OK;
}
static const cr_function hyp_fn = {.name = "hyp", .arity = 2, .primal = hyp_primal};

typedef struct hyp_env {
    double x, y, r;
} hyp_env;

/* d hyp = (x dx + y dy) / r */
static cr_status hyp_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)nx;
    (void)arena;
    const hyp_env *e = env;
    double g = dy->u.f64;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_f64(g * e->x / e->r);
    dx[2] = cr_tangent_f64(g * e->y / e->r);
    return CR_OK;
}

static cr_status hyp_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    (void)udata;
    hyp_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(hyp_env));
    if (e == NULL)
        return CR_ENOMEM;
    cr_status st = hyp_primal(arena, fv, args, nargs, y);
    e->x = args[0].u.f64;
    e->y = args[1].u.f64;
    e->r = y->u.f64;
    *pb = (cr_pullback){hyp_pullback, e, "hyp_pullback", 3};
    return st;
}

static cr_status hyp_overlay(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    int *calls = env;
    (*calls)++;
    y[0] = cr_sqrt(t, cr_add(t, cr_mul(t, x[0], x[0]), cr_mul(t, x[1], x[1])));
    return cr_tape_status(t);
}

static cr_status hyp_of_x(double x, double *y, void *env)
{
    (void)env;
    *y = sin(hyp_c(x, 0.5 * x + 1.0));
    return CR_OK;
}

static void test_primitive_rule(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    int calls = 0;
    assert_int_equal(cr_engine_overlay(eng, &hyp_fn, hyp_overlay, 1, &calls), CR_OK);
    cr_value hyp = cr_value_function(&hyp_fn, NULL);
    cr_value two[2] = {cr_value_f64(1), cr_value_f64(2)};
    assert_false(cr_engine_is_primitive(eng, &hyp, two, 2));
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &hyp_fn, .nargs = 2, .args = k_f64_2, .rrule = hyp_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    assert_true(cr_engine_is_primitive(eng, &hyp, two, 2));
    assert_true(cr_engine_is_primitive(eng, &cr_fn_sin, two, 1));
    assert_false(cr_engine_is_primitive(NULL, &hyp, two, 2));

    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    const double pts[] = {0.3, -1.7, 2.2};
    for (size_t i = 0; i < 3; i++) {
        cr_tape_reset(t);
        cr_var x = cr_tape_input(t, pts[i]);
        cr_var args[2] = {x, cr_add(t, cr_mul(t, cr_const(0.5), x), cr_const(1.0))};
        cr_var y = cr_sin(t, cr_tape_call1(t, &hyp, args, 2));
        double g;
        assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
        assert_close(g, fd1(hyp_of_x, NULL, pts[i]), FD_RTOL);
    }
    assert_int_equal(calls, 0); /* the rule, not the overlay */

    /* The forward sweep goes through the pullback too (its Jacobian, one call per result). */
    cr_tape *fw;
    p.flags = CR_TAPE_FORWARD;
    assert_int_equal(cr_tape_new(f->ctx, &p, &fw), CR_OK);
    cr_var x = cr_tape_input(fw, 0.8);
    cr_var args[2] = {x, cr_add(fw, cr_mul(fw, cr_const(0.5), x), cr_const(1.0))};
    cr_var y = cr_sin(fw, cr_tape_call1(fw, &hyp, args, 2));
    double one = 1.0, jv;
    assert_int_equal(cr_tape_jvp(fw, &x, &one, 1, &y, 1, &jv), CR_OK);
    assert_close(jv, fd1(hyp_of_x, NULL, 0.8), FD_RTOL);
    cr_tape_free(fw);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* r * cos(theta) + theta^2 as a function of (x, y) */
static cr_status polar_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    double r = sqrt(x[0] * x[0] + x[1] * x[1]), th = atan2(x[1], x[0]);
    y[0] = r * cos(th) + th * th;
    return CR_OK;
}

static void test_tuple_rule(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &polar_fn,
                       .nargs = 2,
                       .args = k_f64_2,
                       .rrule = polar_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    const double x0[2] = {0.6, -1.1};
    cr_var x[2], rt[2];
    assert_int_equal(cr_tape_inputs(t, x0, 2, x), CR_OK);
    cr_value polar = cr_value_function(&polar_fn, NULL);
    assert_int_equal(cr_tape_call(t, &polar, x, 2, rt, 2), CR_OK);
    cr_var y = cr_add(t, cr_mul(t, rt[0], cr_cos(t, rt[1])), cr_mul(t, rt[1], rt[1]));
    double g[2], fd[2];
    assert_int_equal(cr_tape_gradient(t, y, x, 2, g), CR_OK);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, polar_fd, NULL, x0, 2, 1, f->arena, fd, NULL), CR_OK);
    assert_close(g[0], fd[0], FD_RTOL);
    assert_close(g[1], fd[1], FD_RTOL);
    /* Only theta used: r's cotangent is zero; a constant argument gets nothing. */
    cr_tape_reset(t);
    cr_var a[2] = {cr_tape_input(t, 0.6), cr_const(-1.1)};
    assert_int_equal(cr_tape_call(t, &polar, a, 2, rt, 2), CR_OK);
    double gt;
    assert_int_equal(cr_tape_gradient(t, rt[1], a, 1, &gt), CR_OK);
    assert_close(gt, 1.1 / (0.36 + 1.21), 1e-14);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- Zero adjoint, non-differentiable, failing pullbacks ------------------------------------ */

static int g_counted;
static cr_status count_primal(cr_arena *arena, const cr_value *fv, const cr_value *args,
                              size_t nargs, cr_value *out)
{
    (void)arena;
    (void)fv;
    (void)nargs;
    g_counted++;
    *out = cr_value_f64(floor(args[0].u.f64));
    return CR_OK;
}
static const cr_function count_fn = {.name = "count", .arity = 1, .primal = count_primal};
static const cr_function round_fn = {.name = "myround", .arity = 1, .primal = count_primal};

static cr_status bad_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)dy;
    (void)dx;
    (void)nx;
    (void)env;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "bad: derivative undefined here");
}

static cr_status bad_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                           const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                           const void *udata)
{
    (void)cfg;
    (void)udata;
    *pb = (cr_pullback){bad_pullback, NULL, "bad_pullback", 2};
    return count_primal(arena, fv, args, nargs, y);
}
static const cr_function bad_fn = {.name = "bad", .arity = 1, .primal = count_primal};

static void test_zero_adjoint_and_failures(void **state)
{
    fixture *f = *state;
    cr_registry *reg;
    assert_int_equal(cr_registry_new(f->ctx, NULL, &reg), CR_OK);
    assert_int_equal(cr_registry_non_differentiable(reg, &round_fn, k_f64_1, 1, false), CR_OK);
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, reg, &eng), CR_OK);
    assert_int_equal(cr_engine_zero_adjoint(eng, &count_fn), CR_OK);
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &bad_fn, .nargs = 1, .args = k_f64_1, .rrule = bad_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    cr_value count = cr_value_function(&count_fn, NULL), rnd = cr_value_function(&round_fn, NULL);
    cr_var x = cr_tape_input(t, 2.7);
    cr_tape_stats before, after;
    cr_tape_stats_get(t, &before);
    g_counted = 0;
    cr_var c = cr_tape_call1(t, &count, &x, 1);
    cr_var r = cr_tape_call1(t, &rnd, &x, 1);
    cr_tape_stats_get(t, &after);
    assert_int_equal(g_counted, 2);
    assert_true(cr_var_is_const(c) && cr_var_is_const(r));
    assert_close(c.v, 2.0, 0);
    assert_int_equal(before.nrecords, after.nrecords); /* nothing recorded */
    assert_true(cr_engine_is_primitive(eng, &count, &(cr_value){.kind = CR_KIND_F64}, 1));
    cr_var y = cr_add(t, cr_mul(t, c, x), r); /* 2 x + 2 */
    double g;
    assert_int_equal(cr_tape_gradient(t, y, &x, 1, &g), CR_OK);
    assert_close(g, 2.0, 0);

    /* A failing pullback stops the sweep, fails the tape and names the pullback. */
    cr_value bad = cr_value_function(&bad_fn, NULL);
    cr_var b = cr_tape_call1(t, &bad, &x, 1);
    assert_int_equal(cr_tape_status(t), CR_OK);
    assert_int_equal(cr_tape_gradient(t, cr_mul(t, b, x), &x, 1, &g), CR_EDOMAIN);
    assert_int_equal(cr_tape_status(t), CR_EDOMAIN);
    assert_contains(cr_tape_errmsg(t), "bad_pullback");
    assert_contains(cr_tape_errmsg(t), "derivative undefined");
    cr_tape_free(t);
    cr_engine_free(eng);
    cr_registry_free(reg);
}

/* ---- rrule_via_ad, frule_via_ad and a higher-order rule ------------------------------------ */

static cr_status wave_wave(double x, double *y, void *env)
{
    (void)env;
    double w = x * sin(x);
    *y = w * sin(w);
    return CR_OK;
}

/* twice_g: a functor whose field g is a function; twice_g(x) = g(g(x)). Its rrule needs
 * CR_CAP_REVERSE: it differentiates g with rrule_via_ad, as ChainRules' map rules do. */
typedef struct twice_self {
    const cr_function *g;
} twice_self;
static const cr_field twice_fields[1] = {{"g", offsetof(twice_self, g), CR_KIND_FUNC, NULL}};
static const cr_type twice_type = {"twice_g", sizeof(twice_self), 1, twice_fields};
static const cr_function twice_fn = {.name = "twice_g", .arity = 1, .self_type = &twice_type};

typedef struct twice_env {
    cr_pullback inner, outer;
} twice_env;

static cr_status twice_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    (void)nx;
    twice_env *e = env;
    cr_tangent d2[2], d1[2];
    cr_status st = cr_pullback_call(arena, &e->outer, dy, d2, 2);
    if (st == CR_OK)
        st = cr_pullback_call(arena, &e->inner, &d2[1], d1, 2);
    dx[0] = cr_tangent_zero(); /* the field g is a function: nothing to differentiate */
    dx[1] = d1[1];
    return st;
}

static cr_status twice_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)nargs;
    (void)udata;
    const twice_self *self = fv->u.func.self;
    cr_value g = cr_value_function(self->g, NULL), mid;
    twice_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(twice_env));
    if (e == NULL)
        return CR_ENOMEM;
    cr_status st = cr_rrule_via_ad(cfg, arena, &g, args, 1, &mid, &e->inner);
    if (st == CR_OK)
        st = cr_rrule_via_ad(cfg, arena, &g, &mid, 1, y, &e->outer);
    *pb = (cr_pullback){twice_pullback, e, "twice_g_pullback", 2};
    return st;
}

static void test_via_ad(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    assert_int_equal(cr_engine_overlay(eng, &wave_fn, wave_ad, 1, NULL), CR_OK);
    const cr_config *cfg = cr_engine_config(eng);
    assert_true(cfg->caps & CR_CAP_REVERSE);
    assert_true(cfg->caps & CR_CAP_FORWARD);
    cr_value wave = cr_value_function(&wave_fn, NULL);

    /* rrule_via_ad records wave on a sub-tape; its pullback sweeps it. */
    cr_value x = cr_value_f64(0.7), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule_via_ad(cfg, f->arena, &wave, &x, 1, &y, &pb), CR_OK);
    assert_close(y.u.f64, 0.7 * sin(0.7), 1e-15);
    cr_tangent dy = cr_tangent_f64(2.0), dx[2];
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[0].tag, CR_TAN_NONE);
    assert_close(dx[1].u.f64, 2.0 * (sin(0.7) + 0.7 * cos(0.7)), 1e-14);
    /* Called again (pullbacks are linear and reusable). */
    dy = cr_tangent_f64(1.0);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    assert_close(dx[1].u.f64, sin(0.7) + 0.7 * cos(0.7), 1e-14);
    /* An f32 argument gets an f32 cotangent; an integer argument NoTangent. */
    cr_value xf = cr_value_f32(0.5f), yf;
    assert_int_equal(cr_rrule_via_ad(cfg, f->arena, &wave, &xf, 1, &yf, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    assert_int_equal(dx[1].tag, CR_TAN_F32);

    /* frule_via_ad: a forward sweep of the sub-tape. */
    cr_tangent dargs[2] = {cr_tangent_zero(), cr_tangent_f64(3.0)}, dyf;
    assert_int_equal(cr_frule_via_ad(cfg, f->arena, dargs, &wave, &x, 1, &y, &dyf), CR_OK);
    assert_close(dyf.u.f64, 3.0 * (sin(0.7) + 0.7 * cos(0.7)), 1e-14);

    /* A primitive goes to its own rule. */
    assert_int_equal(cr_rrule_via_ad(cfg, f->arena, &cr_fn_exp, &x, 1, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(f->arena, &pb, &dy, dx, 2), CR_OK);
    assert_close(dx[1].u.f64, exp(0.7), 1e-15);

    /* Without the engine, wave cannot be differentiated. */
    assert_int_equal(cr_rrule_via_ad(cr_engine_config(NULL), f->arena, &wave, &x, 1, &y, &pb),
                     CR_ENORULE);
    assert_contains(cr_ctx_errmsg(f->ctx), "wave(f64)");
    /* A configuration without reverse mode */
    assert_int_equal(cr_rrule_via_ad(NULL, f->arena, &wave, &x, 1, &y, &pb), CR_ENOCAP);

    /* The higher-order rule on a tape: twice_g with g = wave. */
    static const cr_argspec any1[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &twice_fn,
                       .nargs = 1,
                       .args = any1,
                       .caps = CR_CAP_REVERSE,
                       .rrule = twice_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    twice_self self = {&wave_fn};
    cr_value tw = cr_value_function(&twice_fn, &self);
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    const double pts[] = {0.7, -1.3, 2.1};
    for (size_t i = 0; i < 3; i++) {
        cr_tape_reset(t);
        cr_var v = cr_tape_input(t, pts[i]);
        cr_var w = cr_tape_call1(t, &tw, &v, 1);
        double wv;
        wave_wave(pts[i], &wv, NULL);
        assert_close(w.v, wv, 1e-14);
        double g;
        assert_int_equal(cr_tape_gradient(t, w, &v, 1, &g), CR_OK);
        assert_close(g, fd1(wave_wave, NULL, pts[i]), FD_RTOL);
    }
    /* A configuration without CR_CAP_REVERSE does not see the rule. */
    cr_config nocap = *cfg;
    nocap.caps = 0;
    assert_int_equal(cr_rrule(&nocap, f->arena, &tw, &x, 1, &y, &pb), CR_NOTHING);
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- Variadic functions: a row for one count, rules for the others ------------------------ */

/* The gradient of the first-order tape t at x, n inputs (checked against central differences
 * by the caller at the recorded point). */
static void vcall_tape_grad(cr_tape *t, vcall *v, const double *x, size_t n, double *g)
{
    double y;
    assert_ok(t, cr_tape_value_and_gradient(t, vcall_tape, v, x, n, &y, g));
}

/*
 * hypot(x, y, ...) and evalpoly(x, c0, ...) of 2, 3, 5 and 10 arguments on a first-order tape
 * (built-in rules, and an engine's configuration, which looks rules up in its registry) and
 * a forward tape, against central differences of the same program in plain C. hypot of two
 * arguments takes its row (a record of atan2's size; a second-order tape takes it, H v
 * against central differences of the gradient); other counts go through the rule (a GENERIC
 * record, not of the size of fma's three-argument row record), which a second-order tape
 * takes with second derivatives from differences of its partials up to 4 variable arguments
 * and refuses past them (CR_EUNIMPL, naming the function). A call with one argument is refused with
 * the function's own message (CR_EINVAL), and a fixed-arity function given another count with its
 * row's.
 */
static void test_variadic(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &hyp_fn, .nargs = 2, .args = k_f64_2, .rrule = hyp_rrule};
    assert_int_equal(cr_engine_from_rrule(eng, &def), CR_OK);
    cr_tape *t, *et, *fw, *so;
    cr_tape_params p = {.struct_size = sizeof p};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    p.flags = CR_TAPE_FORWARD;
    assert_int_equal(cr_tape_new(f->ctx, &p, &fw), CR_OK);
    p.flags = CR_TAPE_SECOND_ORDER;
    assert_int_equal(cr_tape_new(f->ctx, &p, &so), CR_OK);
    p.flags = 0;
    p.engine = eng;
    assert_int_equal(cr_tape_new(f->ctx, &p, &et), CR_OK);
    const cr_value *fns[2] = {&cr_fn_hypot, &cr_fn_evalpoly};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < 4; i++) {
            vcall v = {fns[k], NULL, NULL};
            size_t n = vcall_ns[i];
            const double *x = vcall_pts[i];
            double fd[10], g[10], y, y0;
            vcall_fd_grad(f->arena, &v, x, n, fd);
            vcall_fd(x, n, &y0, 1, &v);
            cr_tape *first[2] = {t, et};
            for (size_t e = 0; e < 2; e++) {
                assert_ok(first[e],
                          cr_tape_value_and_gradient(first[e], vcall_tape, &v, x, n, &y, g));
                assert_close(y, y0, 1e-14);
                for (size_t j = 0; j < n; j++)
                    assert_close(g[j], fd[j], FD_RTOL);
            }
            /* cr_tape_jvp along dir */
            cr_var xs[10], ys;
            double dir[10], want = 0, jv;
            for (size_t j = 0; j < n; j++) {
                dir[j] = 0.5 - 0.3 * (double)j;
                want += fd[j] * dir[j];
            }
            assert_ok(fw, cr_tape_record(fw, vcall_tape, &v, x, n, xs, &ys, 1));
            assert_ok(fw, cr_tape_jvp(fw, xs, dir, n, &ys, 1, &jv));
            assert_close(jv, want, FD_RTOL);
            /* The second-order tape: hypot(x, y)'s row; the rules' pullbacks of 3, 5 and 10
             * variable arguments with their partials' differences. */
            assert_ok(so, cr_tape_record(so, vcall_tape, &v, x, n, xs, &ys, 1));
            double hv[10], gso[10], xp[10], xm[10], gp[10], gm[10], h = 1e-6;
            assert_ok(so, cr_tape_hvp(so, ys, xs, n, dir, hv, gso));
            for (size_t j = 0; j < n; j++) {
                xp[j] = x[j] + h * dir[j];
                xm[j] = x[j] - h * dir[j];
            }
            vcall_tape_grad(t, &v, xp, n, gp);
            vcall_tape_grad(t, &v, xm, n, gm);
            for (size_t j = 0; j < n; j++) {
                assert_close(gso[j], fd[j], FD_RTOL);
                assert_close(hv[j], (gp[j] - gm[j]) / (2 * h), 1e-7);
            }
        }

    /* Record sizes: hypot(x, y) is a row record as atan2(x, y) is; hypot(x, y, z) a GENERIC
     * record, not a row record as fma(x, y, z) is. */
    cr_tape_reset(t);
    cr_var a[3];
    const double xa[3] = {0.6, -1.9, 1.1};
    assert_ok(t, cr_tape_inputs(t, xa, 3, a));
    const cr_value *calls[4] = {&cr_fn_atan2, &cr_fn_hypot, &cr_fn_fma, &cr_fn_hypot};
    const size_t cn[4] = {2, 2, 3, 3};
    size_t bytes[4];
    for (size_t c = 0; c < 4; c++) {
        cr_tape_stats s0, s1;
        assert_ok(t, cr_tape_stats_get(t, &s0));
        cr_var r = cr_tape_call1(t, calls[c], a, cn[c]);
        assert_ok(t, cr_tape_status(t));
        assert_true(r.idx != CR_VAR_CONST);
        assert_ok(t, cr_tape_stats_get(t, &s1));
        bytes[c] = s1.record_bytes - s0.record_bytes;
    }
    assert_int_equal(bytes[1], bytes[0]);
    assert_true(bytes[3] != bytes[2]);

    /* One argument: refused, naming the function (a variable, on either tape; a constant;
     * evalpoly with no coefficient); sin of two arguments as before. */
    cr_tape *both[2] = {t, et};
    for (size_t e = 0; e < 2; e++) {
        cr_tape_reset(both[e]);
        cr_var x1 = cr_tape_input(both[e], 0.5);
        cr_var r = cr_tape_call1(both[e], &cr_fn_hypot, &x1, 1);
        assert_true(isnan(r.v));
        assert_int_equal(cr_tape_status(both[e]), CR_EINVAL);
        assert_contains(cr_tape_errmsg(both[e]), "hypot takes two or more real arguments");
    }
    cr_tape_reset(t);
    cr_var c1 = cr_const(0.5);
    cr_tape_call1(t, &cr_fn_hypot, &c1, 1);
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "hypot");
    cr_tape_reset(t);
    cr_var x1 = cr_tape_input(t, 0.5);
    cr_tape_call1(t, &cr_fn_evalpoly, &x1, 1);
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "evalpoly takes a number x and one or more");
    cr_tape_reset(t);
    cr_var x2[2] = {cr_tape_input(t, 0.5), cr_tape_input(t, 1.5)};
    cr_tape_call1(t, &cr_fn_sin, x2, 2);
    assert_int_equal(cr_tape_status(t), CR_EINVAL);
    assert_contains(cr_tape_errmsg(t), "sin takes 1 argument, 2 given");

    cr_tape_free(t);
    cr_tape_free(et);
    cr_tape_free(fw);
    cr_tape_free(so);
    cr_engine_free(eng);
}

static int run_tape_engine(void)
{
    const struct CMUnitTest tape_engine[] = {
        cmocka_unit_test_setup_teardown(test_overlay, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_primitive_rule, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_tuple_rule, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_zero_adjoint_and_failures, fixture_setup,
                                        fixture_teardown),
        cmocka_unit_test_setup_teardown(test_via_ad, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_variadic, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tape_engine, NULL, NULL);
}

/*
 * The engine's configuration and its rrule_via_ad / frule_via_ad, the paths the other
 * engine tests leave out: argument checks of the engine functions, an engine with more
 * overlays than its first table holds, boolean arguments, user functions with two results
 * (tuple values, structural tangents), cotangents that are not structural, thunks that
 * fail, NotImplemented cotangents, closure overlays that fail, and a pullback whose
 * sub-tape sweep fails. Derivatives are checked against central differences of plain-C
 * versions of the same functions.
 */

#define FD_RTOL 1e-8

/* ---- Engine arguments ---------------------------------------------------------------------- */

static cr_status lin_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    const double *c = env;
    y[0] = cr_mul(t, cr_const(*c), cr_sin(t, x[0]));
    return cr_tape_status(t);
}

static cr_status lin_c(double x, double *y, void *env)
{
    const double *c = env;
    *y = *c * sin(x);
    return CR_OK;
}

enum { NLIN = 11 };
#define LIN(i)                       \
    {                                \
        .name = "lin" #i, .arity = 1 \
    }
static const cr_function lin_fns[NLIN] = {LIN(0), LIN(1), LIN(2), LIN(3), LIN(4), LIN(5),
                                          LIN(6), LIN(7), LIN(8), LIN(9), LIN(10)};

static void test_engine_arguments(void **state)
{
    fixture *f = *state;
    cr_engine *eng = (cr_engine *)f; /* overwritten (set to NULL) on failure */
    assert_int_equal(cr_engine_new(f->ctx, NULL, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_engine_new: out is NULL");
    assert_int_equal(cr_engine_new(NULL, NULL, &eng), CR_EINVAL);
    assert_null(eng);
    cr_engine_free(NULL);

    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    double c = 2.0;
    assert_int_equal(cr_engine_overlay(NULL, &lin_fns[0], lin_ad, 1, &c), CR_EINVAL);
    assert_int_equal(cr_engine_overlay_closure(NULL, &lin_fns[0], lin_ad, 1, &c), CR_EINVAL);
    assert_int_equal(cr_engine_zero_adjoint(NULL, &lin_fns[0]), CR_EINVAL);
    cr_ctx_clear_error(f->ctx);
    assert_int_equal(cr_engine_zero_adjoint(eng, NULL), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(f->ctx), "cr_engine_zero_adjoint: NULL function");
    static const cr_argspec a1[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {.struct_size = sizeof def, .fn = &lin_fns[0], .nargs = 1, .args = a1};
    assert_int_equal(cr_engine_from_rrule(NULL, &def), CR_EINVAL);

    /* Not a function: never a primitive. */
    cr_value num = cr_value_f64(1.0), x1 = cr_value_f64(0.5);
    assert_false(cr_engine_is_primitive(eng, NULL, &x1, 1));
    assert_false(cr_engine_is_primitive(eng, &num, &x1, 1));
    assert_false(cr_engine_is_primitive(NULL, &(cr_value){.kind = CR_KIND_FUNC}, &x1, 1));

    /* The engine is still usable: a zero-adjoint declaration and an overlay. */
    assert_int_equal(cr_engine_zero_adjoint(eng, &lin_fns[1]), CR_OK);
    cr_value l1 = cr_value_function(&lin_fns[1], NULL);
    assert_true(cr_engine_is_primitive(eng, &l1, &x1, 1));
    cr_engine_free(eng);
}

/* More overlays than the first table holds: every one is still found after it grows. */
static void test_many_overlays(void **state)
{
    fixture *f = *state;
    cr_engine *eng;
    assert_int_equal(cr_engine_new(f->ctx, NULL, &eng), CR_OK);
    double coef[NLIN];
    for (size_t i = 0; i < NLIN; i++) {
        coef[i] = 0.5 + (double)i;
        assert_int_equal(cr_engine_overlay(eng, &lin_fns[i], lin_ad, 1, &coef[i]), CR_OK);
    }
    cr_tape *t;
    cr_tape_params p = {.struct_size = sizeof p, .engine = eng};
    assert_int_equal(cr_tape_new(f->ctx, &p, &t), CR_OK);
    for (size_t i = 0; i < NLIN; i++) {
        cr_tape_reset(t);
        cr_value li = cr_value_function(&lin_fns[i], NULL);
        cr_var x = cr_tape_input(t, 0.9);
        cr_var y = cr_tape_call1(t, &li, &x, 1);
        double g, yc;
        assert_ok(t, cr_tape_gradient(t, y, &x, 1, &g));
        lin_c(0.9, &yc, &coef[i]);
        assert_close(y.v, yc, 1e-15);
        assert_close(g, fd1(lin_c, &coef[i], 0.9), FD_RTOL);
    }
    cr_tape_free(t);
    cr_engine_free(eng);
}

/* ---- Boolean arguments, two results ----------------------------------------------------- */

/* sel(x, flag) = flag ? x^3 : sin(x) */
static double sel_c(double x, bool flag)
{
    return flag ? x * x * x : sin(x);
}
static cr_status sel_c_true(double x, double *y, void *env)
{
    (void)env;
    *y = sel_c(x, true);
    return CR_OK;
}
static cr_status sel_c_false(double x, double *y, void *env)
{
    (void)env;
    *y = sel_c(x, false);
    return CR_OK;
}
static const cr_function sel_fn = {.name = "sel", .arity = 2};
static cr_status sel_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = x[1].v != 0.0 ? cr_mul(t, x[0], cr_mul(t, x[0], x[0])) : cr_sin(t, x[0]);
    return cr_tape_status(t);
}

/* sc2(x, y) = (x y, sin(x) + y) */
static void sc2_c(double x, double y, double *a, double *b)
{
    *a = x * y;
    *b = sin(x) + y;
}
static cr_status sc2_fd(const double *x, size_t n, double *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    sc2_c(x[0], x[1], &y[0], &y[1]);
    return CR_OK;
}
static const cr_function sc2_fn = {.name = "sc2", .arity = 2};
static cr_status sc2_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    y[0] = cr_mul(t, x[0], x[1]);
    y[1] = cr_add(t, cr_sin(t, x[0]), x[1]);
    return cr_tape_status(t);
}

static cr_status bad_rrule_engine_edges(const cr_config *cfg, cr_arena *arena, const cr_value *fv,
                                        const cr_value *args, size_t nargs, cr_value *y,
                                        cr_pullback *pb, const void *udata)
{
    (void)cfg;
    (void)arena;
    (void)fv;
    (void)nargs;
    (void)udata;
    *y = args[0];
    *pb = (cr_pullback){bad_pullback, NULL, "bad_pullback", 2};
    return CR_OK;
}
static const cr_function bad_fn_engine_edges = {.name = "bad", .arity = 1};
static const cr_function usebad_fn = {.name = "usebad", .arity = 1};
static cr_status usebad_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value bad = cr_value_function(&bad_fn_engine_edges, NULL);
    y[0] = cr_mul(t, cr_tape_call1(t, &bad, x, 1), x[0]);
    return cr_tape_status(t);
}

/* A closure cl(x) = c x whose overlay fails in the way g_cl_mode selects. */
typedef struct cl_self {
    double c;
} cl_self;
static const cr_field cl_fields[1] = {{"c", offsetof(cl_self, c), CR_KIND_F64, NULL}};
static const cr_type cl_type = {"cl", sizeof(cl_self), 1, cl_fields};
static const cr_function cl_fn = {.name = "cl", .arity = 1, .self_type = &cl_type};
static const cr_function norule_fn = {.name = "norule", .arity = 1};
enum { CL_OK, CL_RETURN, CL_TAPE };
static int g_cl_mode;
static cr_status cl_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    if (g_cl_mode == CL_RETURN)
        return CR_EDOMAIN;
    if (g_cl_mode == CL_TAPE) {
        cr_value nr = cr_value_function(&norule_fn, NULL);
        y[0] = cr_tape_call1(t, &nr, &x[1], 1);
        return cr_tape_status(t);
    }
    y[0] = cr_mul(t, x[0], x[1]);
    return cr_tape_status(t);
}

typedef struct efix {
    cr_ctx *ctx;
    cr_arena *arena;
    cr_engine *eng;
    const cr_config *cfg;
} efix;

#define CR_EFIX(state) ((efix *)*(state))

static int efix_setup(void **state)
{
    efix *h = calloc(1, sizeof *h);
    if (h == NULL || cr_ctx_new(NULL, &h->ctx) != CR_OK ||
        cr_arena_new(h->ctx, NULL, &h->arena) != CR_OK ||
        cr_engine_new(h->ctx, NULL, &h->eng) != CR_OK)
        return -1;
    static const cr_argspec a1[1] = {{CR_M_F64, NULL}};
    cr_rule_def def = {.struct_size = sizeof def,
                       .fn = &bad_fn_engine_edges,
                       .nargs = 1,
                       .args = a1,
                       .rrule = bad_rrule_engine_edges};
    if (cr_engine_overlay(h->eng, &sel_fn, sel_ad, 1, NULL) != CR_OK ||
        cr_engine_overlay(h->eng, &sc2_fn, sc2_ad, 2, NULL) != CR_OK ||
        cr_engine_overlay(h->eng, &usebad_fn, usebad_ad, 1, NULL) != CR_OK ||
        cr_engine_overlay_closure(h->eng, &cl_fn, cl_ad, 1, NULL) != CR_OK ||
        cr_engine_from_rrule(h->eng, &def) != CR_OK)
        return -1;
    h->cfg = cr_engine_config(h->eng);
    g_cl_mode = CL_OK;
    *state = h;
    return 0;
}

static int efix_teardown(void **state)
{
    efix *h = *state;
    cr_engine_free(h->eng);
    cr_arena_free(h->arena);
    cr_ctx_free(h->ctx);
    free(h);
    return 0;
}

/* A boolean argument is a constant of the sub-tape (1 or 0), with NoTangent. */
static void test_via_ad_bool(void **state)
{
    efix *h = CR_EFIX(state);
    cr_value sel = cr_value_function(&sel_fn, NULL);
    const bool flags[2] = {true, false};
    for (size_t i = 0; i < 2; i++) {
        cr_value args[2] = {cr_value_f64(0.7), cr_value_bool(flags[i])}, y;
        cr_fd_fn fc = flags[i] ? sel_c_true : sel_c_false;
        cr_pullback pb;
        assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &sel, args, 2, &y, &pb), CR_OK);
        assert_int_equal(y.kind, CR_KIND_F64);
        assert_close(y.u.f64, sel_c(0.7, flags[i]), 1e-15);
        cr_tangent dy = cr_tangent_f64(1.5), dx[3];
        assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 3), CR_OK);
        assert_int_equal(dx[1].tag, CR_TAN_F64);
        assert_close(dx[1].u.f64, 1.5 * fd1(fc, NULL, 0.7), FD_RTOL);
        assert_int_equal(dx[2].tag, CR_TAN_NONE);
        /* Forward: the boolean's tangent is NoTangent. */
        cr_tangent dargs[3] = {cr_tangent_zero(), cr_tangent_f64(-2.0), cr_tangent_none()}, dyf;
        assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, dargs, &sel, args, 2, &y, &dyf), CR_OK);
        assert_close(y.u.f64, sel_c(0.7, flags[i]), 1e-15);
        assert_int_equal(dyf.tag, CR_TAN_F64);
        assert_close(dyf.u.f64, -2.0 * fd1(fc, NULL, 0.7), FD_RTOL);
    }
}

/* Two results: the value is a tuple of f64, the pullback takes a structural cotangent and
 * the pushforward gives a structural tangent; a zero tangent in gives ZeroTangent out. */
static void test_via_ad_tuple(void **state)
{
    efix *h = CR_EFIX(state);
    cr_value sc2 = cr_value_function(&sc2_fn, NULL);
    const double x0[2] = {0.6, -1.2};
    cr_value args[2] = {cr_value_f64(x0[0]), cr_value_f64(x0[1])}, y;
    double a, b, J[4];
    sc2_c(x0[0], x0[1], &a, &b);
    cr_fdm m;
    assert_int_equal(cr_fdm_central(5, 1, &m), CR_OK);
    assert_int_equal(cr_fd_jacobian(&m, NULL, sc2_fd, NULL, x0, 2, 2, h->arena, J, NULL), CR_OK);

    cr_pullback pb;
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &sc2, args, 2, &y, &pb), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    assert_int_equal(y.u.obj.type->nfields, 2);
    const double *yv = y.u.obj.ptr;
    assert_close(yv[0], a, 1e-15);
    assert_close(yv[1], b, 1e-15);
    const double g[2] = {0.7, -1.9};
    cr_tangent gt[2] = {cr_tangent_f64(g[0]), cr_tangent_f64(g[1])}, ct, dx[3];
    assert_int_equal(cr_tangent_struct(h->arena, y.u.obj.type, NULL, gt, 2, &ct), CR_OK);
    assert_int_equal(cr_pullback_call(h->arena, &pb, &ct, dx, 3), CR_OK);
    for (size_t j = 0; j < 2; j++)
        assert_close(dx[j + 1].u.f64, g[0] * J[0 * 2 + j] + g[1] * J[1 * 2 + j], FD_RTOL);

    /* A cotangent that is not structural is refused, naming the function. */
    cr_tangent bad = cr_tangent_f64(1.0);
    assert_int_equal(cr_pullback_call(h->arena, &pb, &bad, dx, 3), CR_ETANGENT);
    assert_contains(cr_ctx_errmsg(h->ctx), "rrule_via_ad(sc2): the result is a tuple");
    /* A zero cotangent is fine: zero cotangents out. */
    cr_tangent z = cr_tangent_zero();
    assert_int_equal(cr_pullback_call(h->arena, &pb, &z, dx, 3), CR_OK);
    assert_true(dx[1].u.f64 == 0.0 && dx[2].u.f64 == 0.0);
    /* The pullback still works after the refusal. */
    assert_int_equal(cr_pullback_call(h->arena, &pb, &ct, dx, 3), CR_OK);
    assert_close(dx[1].u.f64, g[0] * J[0] + g[1] * J[2], FD_RTOL);

    /* Forward: a structural tangent of the tuple. */
    const double v[2] = {1.1, 0.4};
    cr_tangent dargs[3] = {cr_tangent_zero(), cr_tangent_f64(v[0]), cr_tangent_f64(v[1])}, dy;
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, dargs, &sc2, args, 2, &y, &dy), CR_OK);
    assert_int_equal(y.kind, CR_KIND_STRUCT);
    yv = y.u.obj.ptr;
    assert_close(yv[0], a, 1e-15);
    assert_close(yv[1], b, 1e-15);
    assert_int_equal(dy.tag, CR_TAN_STRUCT);
    for (size_t i = 0; i < 2; i++) {
        cr_tangent di = cr_tangent_field(dy, i);
        assert_int_equal(di.tag, CR_TAN_F64);
        assert_close(di.u.f64, J[i * 2] * v[0] + J[i * 2 + 1] * v[1], FD_RTOL);
    }
    /* Zero tangents in: ZeroTangent out (nothing allocated for it). */
    cr_tangent zargs[3] = {cr_tangent_zero(), cr_tangent_zero(), cr_tangent_f64(0.0)};
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, zargs, &sc2, args, 2, &y, &dy), CR_OK);
    assert_int_equal(dy.tag, CR_TAN_ZERO);
    yv = y.u.obj.ptr;
    assert_close(yv[1], b, 1e-15);

    /* Through the duals: both results with their derivatives. */
    double d0[1] = {v[0]}, d1[1] = {v[1]};
    cr_dual xd[2] = {cr_dual_make(x0[0], d0, 1), cr_dual_make(x0[1], d1, 1)}, yd[2];
    assert_int_equal(cr_dual_call(h->cfg, h->arena, &sc2, xd, 2, yd, 2), CR_OK);
    assert_close(yd[0].v, a, 1e-15);
    assert_close(yd[1].d[0], J[2] * v[0] + J[3] * v[1], FD_RTOL);
}

static cr_status refusing_thunk(cr_arena *arena, cr_tangent *out, void *env)
{
    (void)out;
    (void)env;
    return cr_ctx_error(cr_arena_ctx(arena), CR_EDOMAIN, "refusing_thunk: no value");
}

static const cr_notimpl k_ni = {__FILE__, __LINE__, "a missing cotangent"};

/* Cotangents the pullback cannot use: a thunk that fails, NotImplemented, an array. */
static void test_via_ad_bad_cotangents(void **state)
{
    efix *h = CR_EFIX(state);
    cr_value sel = cr_value_function(&sel_fn, NULL), sc2 = cr_value_function(&sc2_fn, NULL);
    cr_value args[2] = {cr_value_f64(0.7), cr_value_bool(true)}, y;
    cr_pullback pb, pb2;
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &sel, args, 2, &y, &pb), CR_OK);
    cr_tangent th, dx[3];
    assert_int_equal(cr_tangent_thunk(h->arena, refusing_thunk, NULL, "refusing", &th), CR_OK);
    assert_int_equal(cr_pullback_call(h->arena, &pb, &th, dx, 3), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "refusing_thunk: no value");
    cr_tangent ni = cr_tangent_notimpl(&k_ni);
    assert_int_equal(cr_pullback_call(h->arena, &pb, &ni, dx, 3), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(h->ctx), "rrule_via_ad_pullback: tangent is NotImplemented");
    /* A tuple's field that is not a scalar. */
    cr_value a2[2] = {cr_value_f64(0.6), cr_value_f64(-1.2)};
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &sc2, a2, 2, &y, &pb2), CR_OK);
    cr_tangent fields[2] = {cr_tangent_f64(1.0), cr_tangent_notimpl(&k_ni)}, ct;
    assert_int_equal(cr_tangent_struct(h->arena, y.u.obj.type, NULL, fields, 2, &ct), CR_OK);
    assert_int_equal(cr_pullback_call(h->arena, &pb2, &ct, dx, 3), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(h->ctx), "a missing cotangent");
    /* The first pullback still works with a real cotangent. */
    cr_tangent dy = cr_tangent_f64(1.0);
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 3), CR_OK);
    assert_close(dx[1].u.f64, fd1(sel_c_true, NULL, 0.7), FD_RTOL);
}

/* The invalid-argument checks of the engine's callbacks. */
static void test_via_ad_invalid(void **state)
{
    efix *h = CR_EFIX(state);
    cr_value num = cr_value_f64(1.0), x = cr_value_f64(0.5), y;
    cr_value sel = cr_value_function(&sel_fn, NULL);
    cr_pullback pb;
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &num, &x, 1, &y, &pb), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "rrule_via_ad: invalid arguments");
    cr_ctx_clear_error(h->ctx);
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &sel, &x, 1, NULL, &pb), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "rrule_via_ad: invalid arguments");
    cr_tangent dargs[2] = {cr_tangent_zero(), cr_tangent_f64(1.0)}, dy;
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, dargs, &num, &x, 1, &y, &dy), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "frule_via_ad: invalid arguments");
    cr_ctx_clear_error(h->ctx);
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, NULL, &sel, &x, 1, &y, &dy), CR_EINVAL);
    assert_contains(cr_ctx_errmsg(h->ctx), "frule_via_ad: invalid arguments");
}

/* A closure overlay that fails: by its status alone, by failing the sub-tape, or given an
 * argument that is not a number. Each names the closure; the same call then succeeds. */
static void test_closure_overlay_failures(void **state)
{
    efix *h = CR_EFIX(state);
    cl_self self = {1.7};
    cr_value cl = cr_value_function(&cl_fn, &self), x = cr_value_f64(0.4), y;
    cr_pullback pb;
    cr_tangent dargs[2] = {cr_tangent_zero(), cr_tangent_f64(1.0)}, dy;
    g_cl_mode = CL_RETURN;
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &cl, &x, 1, &y, &pb), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "cl (overlay) failed: ");
    cr_ctx_clear_error(h->ctx);
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, dargs, &cl, &x, 1, &y, &dy), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "cl (overlay) failed: ");
    g_cl_mode = CL_TAPE;
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &cl, &x, 1, &y, &pb), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(h->ctx), "norule");
    cr_ctx_clear_error(h->ctx);
    assert_int_equal(cr_frule_via_ad(h->cfg, h->arena, dargs, &cl, &x, 1, &y, &dy), CR_ENORULE);
    assert_contains(cr_ctx_errmsg(h->ctx), "norule");
    g_cl_mode = CL_OK;
    cr_value fnarg = cr_value_function(&sel_fn, NULL);
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &cl, &fnarg, 1, &y, &pb), CR_EUNIMPL);
    assert_contains(cr_ctx_errmsg(h->ctx), "via_ad(cl): argument 1 is a function");
    /* Now it works: d(c x)/dx = c, d/dc = x. */
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &cl, &x, 1, &y, &pb), CR_OK);
    assert_close(y.u.f64, 1.7 * 0.4, 1e-15);
    cr_tangent one = cr_tangent_f64(1.0), dx[2];
    assert_int_equal(cr_pullback_call(h->arena, &pb, &one, dx, 2), CR_OK);
    assert_close(dx[1].u.f64, 1.7, 1e-15);
    assert_close(cr_tangent_field(dx[0], 0).u.f64, 0.4, 1e-15);
}

/* The sub-tape's sweep fails inside the pullback: its status and message come back. */
static void test_pullback_sweep_fails(void **state)
{
    efix *h = CR_EFIX(state);
    cr_value ub = cr_value_function(&usebad_fn, NULL), x = cr_value_f64(0.8), y;
    cr_pullback pb;
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &ub, &x, 1, &y, &pb), CR_OK);
    assert_close(y.u.f64, 0.64, 1e-15);
    size_t used = cr_arena_used(h->arena);
    cr_tangent dy = cr_tangent_f64(1.0), dx[3];
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 2), CR_EDOMAIN);
    assert_contains(cr_ctx_errmsg(h->ctx), "bad_pullback");
    assert_contains(cr_ctx_errmsg(h->ctx), "derivative undefined here");
    assert_int_equal(cr_arena_used(h->arena), used);
    /* The arena and engine stay usable. */
    cr_value sel = cr_value_function(&sel_fn, NULL);
    cr_value args[2] = {cr_value_f64(0.7), cr_value_bool(false)};
    assert_int_equal(cr_rrule_via_ad(h->cfg, h->arena, &sel, args, 2, &y, &pb), CR_OK);
    assert_int_equal(cr_pullback_call(h->arena, &pb, &dy, dx, 3), CR_OK);
    assert_close(dx[1].u.f64, fd1(sel_c_false, NULL, 0.7), FD_RTOL);
}

static int run_engine_edges(void)
{
    const struct CMUnitTest engine_edges[] = {
        cmocka_unit_test_setup_teardown(test_engine_arguments, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_many_overlays, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_via_ad_bool, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_via_ad_tuple, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_via_ad_bad_cotangents, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_via_ad_invalid, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_closure_overlay_failures, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_pullback_sweep_fails, efix_setup, efix_teardown),
    };
    return cmocka_run_group_tests(engine_edges, NULL, NULL);
}

int main(void)
{
    int failed = 0;
    failed += run_tape_engine();
    failed += run_engine_edges();
    return failed;
}
