/*
 * Writing a rule for your own function (docs/writing-rules.md):
 *
 *     logaddexp(x, y) = log(exp(x) + exp(y)),
 *
 * computed without overflow. Its rrule has a named pullback that accepts thunks and
 * projects each cotangent onto its argument (an integer argument gets NoTangent, an f32
 * one an f32); its frule pushes (ẋ, ẏ) forward. Both are registered in a user registry
 * over the built-ins, which is frozen and passed to cr_rrule / cr_frule in a cr_config.
 * The derivatives are checked against central finite differences of the primal.
 */
#include <math.h>
#include <stdio.h>

#include <chainrules.h>

/* ---- The function --------------------------------------------------------------------- */

static double logaddexp(double x, double y)
{
    double m = x > y ? x : y;
    return m + log1p(exp(-fabs(x - y)));
}

/* A real number from a real argument of any kind (f64, f32, integer, bool). */
static double as_double(const cr_value *v)
{
    switch (v->kind) {
    case CR_KIND_F32:
        return (double)v->u.f32;
    case CR_KIND_I64:
    case CR_KIND_I32:
        return (double)v->u.i64;
    case CR_KIND_BOOL:
        return v->u.b ? 1.0 : 0.0;
    default:
        return v->u.f64;
    }
}

static cr_status logaddexp_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                  size_t nargs, cr_value *out)
{
    (void)arena;
    (void)f;
    (void)nargs; /* cr_function_call checked the arity, dispatch the kinds */
    *out = cr_value_f64(logaddexp(as_double(&args[0]), as_double(&args[1])));
    return CR_OK;
}

static const cr_function logaddexp_fn = {
    .name = "logaddexp", .arity = 2, .primal = logaddexp_primal};

/* ---- Its rrule -------------------------------------------------------------------------- */

/* What the pullback needs, computed in the rrule and kept in the arena. */
typedef struct logaddexp_env {
    double wx, wy;       /* ∂Ω/∂x = exp(x - Ω), ∂Ω/∂y = exp(y - Ω) */
    cr_project *px, *py; /* ProjectTo(x), ProjectTo(y), built outside the pullback */
} logaddexp_env;

static cr_status logaddexp_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                    cr_arena *arena, void *env)
{
    (void)nx;
    const logaddexp_env *e = env;
    cr_tangent ybar;
    cr_status st = cr_tangent_unthunk(*dy, &ybar); /* accept thunks */
    if (st != CR_OK)
        return st;
    double g;
    if (ybar.tag == CR_TAN_F64)
        g = ybar.u.f64;
    else if (ybar.tag == CR_TAN_F32)
        g = (double)ybar.u.f32;
    else
        return cr_ctx_error(cr_arena_ctx(arena), CR_ETANGENT,
                            "logaddexp_pullback: a real cotangent was expected, not %s",
                            cr_tag_name((cr_tag)ybar.tag));
    dx[0] = cr_tangent_none(); /* a plain function has no fields */
    /* Two scalars: computing them is cheaper than a thunk, so no thunks here. */
    st = cr_project_apply(arena, e->px, cr_tangent_f64(e->wx * g), &dx[1]);
    if (st == CR_OK)
        st = cr_project_apply(arena, e->py, cr_tangent_f64(e->wy * g), &dx[2]);
    return st;
}

static cr_status logaddexp_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                 const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    logaddexp_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(logaddexp_env));
    if (e == NULL)
        return cr_ctx_errcode(cr_arena_ctx(arena));
    e->wx = exp(as_double(&args[0]) - y->u.f64);
    e->wy = exp(as_double(&args[1]) - y->u.f64);
    st = cr_project_new(arena, &args[0], &e->px);
    if (st == CR_OK)
        st = cr_project_new(arena, &args[1], &e->py);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){
        .fn = logaddexp_pullback, .env = e, .name = "logaddexp_pullback", .nx = nargs + 1};
    return CR_OK;
}

/* ---- Its frule -------------------------------------------------------------------------- */

/* The real number in a tangent (zeros, NoTangent: 0). */
static cr_status tangent_real(cr_arena *arena, cr_tangent t, double *out)
{
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    if (cr_tangent_is_zero(t))
        *out = 0.0;
    else if (t.tag == CR_TAN_F64)
        *out = t.u.f64;
    else if (t.tag == CR_TAN_F32)
        *out = (double)t.u.f32;
    else
        return cr_ctx_error(cr_arena_ctx(arena), CR_ETANGENT,
                            "logaddexp frule: a real tangent was expected, not %s",
                            cr_tag_name((cr_tag)t.tag));
    return CR_OK;
}

static cr_status logaddexp_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                 const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                                 cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)udata;
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    double xdot = 0, ydot = 0; /* dargs[0] is Δself: nothing to push for a plain function */
    st = tangent_real(arena, dargs[1], &xdot);
    if (st == CR_OK)
        st = tangent_real(arena, dargs[2], &ydot);
    if (st != CR_OK)
        return st;
    double wx = exp(as_double(&args[0]) - y->u.f64), wy = exp(as_double(&args[1]) - y->u.f64);
    *dy = cr_tangent_f64(wx * xdot + wy * ydot);
    return CR_OK;
}

/* ---- Using it ----------------------------------------------------------------------------- */

static int fail(cr_ctx *ctx, cr_status st, const char *what)
{
    fprintf(stderr, "%s: %s: %s\n", what, cr_status_name(st), cr_ctx_errmsg(ctx));
    return 1;
}

int main(void)
{
    cr_ctx *ctx;
    cr_arena *arena;
    cr_registry *reg;
    if (cr_ctx_new(NULL, &ctx) != CR_OK)
        return 1;
    cr_status st = cr_arena_new(ctx, NULL, &arena);
    if (st == CR_OK)
        st = cr_registry_new(ctx, NULL, &reg); /* over the built-in rules */
    if (st != CR_OK)
        return fail(ctx, st, "setup");

    /* Register logaddexp(real, real): rrule and frule. */
    const cr_argspec sig[2] = {CR_ARG_REAL, CR_ARG_REAL};
    cr_rule_def def = {0};
    def.struct_size = sizeof def;
    def.fn = &logaddexp_fn;
    def.nargs = 2;
    def.args = sig;
    def.rrule = logaddexp_rrule;
    def.frule = logaddexp_frule;
    st = cr_registry_add(reg, &def);
    if (st == CR_OK)
        st = cr_registry_freeze(reg); /* read-only from here: shareable between threads */
    if (st != CR_OK)
        return fail(ctx, st, "register");
    const cr_config cfg = {.struct_size = sizeof(cr_config), .registry = reg};

    const cr_value f = cr_value_function(&logaddexp_fn, NULL);
    cr_value args[2] = {cr_value_f64(0.5), cr_value_f64(-1.25)}, y;
    cr_pullback pb;

    /* The built-in registry does not know logaddexp: CR_NOTHING, not an error. */
    st = cr_rrule(NULL, arena, &f, args, 2, &y, &pb);
    printf("rrule without the user registry: %s\n", cr_status_name(st));

    /* rrule, then the pullback with ȳ = 1. */
    st = cr_rrule(&cfg, arena, &f, args, 2, &y, &pb);
    if (st != CR_OK)
        return fail(ctx, st, "rrule");
    cr_tangent ybar = cr_tangent_f64(1.0), grad[3];
    st = cr_pullback_call(arena, &pb, &ybar, grad, 3);
    if (st != CR_OK)
        return fail(ctx, st, pb.name);

    /* frule with (ẋ, ẏ) = (1, 0) and (0, 1). */
    cr_tangent d1[3] = {cr_tangent_none(), cr_tangent_f64(1.0), cr_tangent_zero()};
    cr_tangent d2[3] = {cr_tangent_none(), cr_tangent_zero(), cr_tangent_f64(1.0)};
    cr_tangent dy1, dy2;
    st = cr_frule(&cfg, arena, d1, &f, args, 2, &y, &dy1);
    if (st == CR_OK)
        st = cr_frule(&cfg, arena, d2, &f, args, 2, &y, &dy2);
    if (st != CR_OK)
        return fail(ctx, st, "frule");

    /* Central finite differences of the primal: the independent check. */
    const double x0 = 0.5, y0 = -1.25, h = 1e-6;
    double fdx = (logaddexp(x0 + h, y0) - logaddexp(x0 - h, y0)) / (2 * h);
    double fdy = (logaddexp(x0, y0 + h) - logaddexp(x0, y0 - h)) / (2 * h);

    printf("logaddexp(%g, %g) = %.15f\n", x0, y0, y.u.f64);
    printf("pullback %-20s  dx = %.12f  dy = %.12f\n", pb.name, grad[1].u.f64, grad[2].u.f64);
    printf("frule                          dx = %.12f  dy = %.12f\n", dy1.u.f64, dy2.u.f64);
    printf("finite differences             dx = %.12f  dy = %.12f\n", fdx, fdy);
    double err = fmax(fmax(fabs(grad[1].u.f64 - fdx), fabs(grad[2].u.f64 - fdy)),
                      fmax(fabs(dy1.u.f64 - fdx), fabs(dy2.u.f64 - fdy)));
    printf("largest difference from finite differences: %.1e\n", err);

    /* Mixed kinds: an integer argument gets NoTangent, an f32 one an f32 cotangent. */
    cr_value mixed[2] = {cr_value_f32(0.5f), cr_value_i64(2)};
    st = cr_rrule(&cfg, arena, &f, mixed, 2, &y, &pb);
    if (st == CR_OK)
        st = cr_pullback_call(arena, &pb, &ybar, grad, 3);
    if (st != CR_OK)
        return fail(ctx, st, "rrule (f32, int)");
    printf("logaddexp(0.5f, 2): cotangents %s (%g) and %s\n", cr_tag_name((cr_tag)grad[1].tag),
           (double)grad[1].u.f32, cr_tag_name((cr_tag)grad[2].tag));

    cr_registry_free(reg);
    cr_arena_free(arena);
    cr_ctx_free(ctx);
    return err < 1e-7 ? 0 : 1;
}
