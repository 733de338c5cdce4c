/*
 * The engine's configuration and its rrule_via_ad / frule_via_ad, the paths the other
 * engine tests leave out: argument checks of the engine functions, an engine with more
 * overlays than its first table holds, boolean arguments, user functions with two results
 * (tuple values, structural tangents), cotangents that are not structural, thunks that
 * fail, NotImplemented cotangents, closure overlays that fail, and a pullback whose
 * sub-tape sweep fails. Derivatives are checked against central differences of plain-C
 * versions of the same functions.
 */
#include <math.h>
#include <stdio.h>

#include "test_util.h"

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

/* bad(x) = x with a pullback that fails; usebad(x) = bad(x) x, an overlay calling it. */
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
    (void)arena;
    (void)fv;
    (void)nargs;
    (void)udata;
    *y = args[0];
    *pb = (cr_pullback){bad_pullback, NULL, "bad_pullback", 2};
    return CR_OK;
}
static const cr_function bad_fn = {.name = "bad", .arity = 1};
static const cr_function usebad_fn = {.name = "usebad", .arity = 1};
static cr_status usebad_ad(cr_tape *t, const cr_var *x, size_t n, cr_var *y, size_t m, void *env)
{
    (void)n;
    (void)m;
    (void)env;
    cr_value bad = cr_value_function(&bad_fn, NULL);
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
    cr_rule_def def = {
        .struct_size = sizeof def, .fn = &bad_fn, .nargs = 1, .args = a1, .rrule = bad_rrule};
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_engine_arguments, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_many_overlays, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_via_ad_bool, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_via_ad_tuple, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_via_ad_bad_cotangents, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_via_ad_invalid, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_closure_overlay_failures, efix_setup, efix_teardown),
        cmocka_unit_test_setup_teardown(test_pullback_sweep_fails, efix_setup, efix_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
