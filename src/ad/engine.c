/*
 * The engine's configuration: registry, overlays, zero-adjoint declarations, rules taken
 * in the generic rrule form, and the RuleConfig callbacks rrule_via_ad / frule_via_ad,
 * which record the function they are given on a sub-tape in the rule's arena. The tapes
 * are made here (cr_tape_new), since each carries its engine's configuration.
 */
#include <math.h>
#include <string.h>

#include "tape_impl.h"

static cr_status engine_rrule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                     const cr_value *args, size_t nargs, cr_value *y,
                                     cr_pullback *pb, void *ad_env);
static cr_status engine_frule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                     const cr_value *f, const cr_value *args, size_t nargs,
                                     cr_value *y, cr_tangent *dy, void *ad_env);

static const cr_config k_default_config = {
    .struct_size = sizeof(cr_config),
    .caps = CR_CAP_REVERSE | CR_CAP_FORWARD,
    .registry = NULL,
    .frule_via_ad = engine_frule_via_ad,
    .rrule_via_ad = engine_rrule_via_ad,
    .ad_env = NULL,
};

const cr_config *cr_engine_config(const cr_engine *eng)
{
    return eng == NULL ? &k_default_config : &eng->config;
}

const cr_config *cr_tape_config(const cr_tape *t)
{
    return t == NULL ? cr_engine_config(NULL) : t->config;
}

cr_status cr_tape_new(cr_ctx *ctx, const cr_tape_params *params, cr_tape **out)
{
    return cr__tape_open(ctx, params, cr_engine_config, out);
}

cr_status cr_engine_new(cr_ctx *ctx, const cr_registry *registry, cr_engine **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "cr_engine_new: out is NULL");
    *out = NULL;
    if (ctx == NULL)
        return CR_EINVAL;
    cr_engine *e = cr_ctx_alloc(ctx, sizeof *e);
    if (e == NULL)
        return CR_ENOMEM;
    memset(e, 0, sizeof *e);
    e->ctx = ctx;
    e->registry = registry;
    e->config = k_default_config;
    e->config.registry = registry;
    e->config.ad_env = e;
    *out = e;
    return CR_OK;
}

void cr_engine_free(cr_engine *eng)
{
    if (eng == NULL)
        return;
    cr_registry_free(eng->own);
    cr_ctx_dealloc(eng->ctx, eng->impls, eng->cap * sizeof *eng->impls);
    cr_ctx_dealloc(eng->ctx, eng->friendly, eng->cap_friendly * sizeof *eng->friendly);
    cr_ctx_dealloc(eng->ctx, eng, sizeof *eng);
}

/* A full table *p of n elements of size sz, capacity *cap, made twice as large (first when
 * empty); the elements copied. CR_ENOMEM leaves it as it was. */
static cr_status grow_table(cr_ctx *ctx, void **p, size_t *cap, size_t n, size_t sz, size_t first)
{
    size_t c = *cap ? 2 * *cap : first;
    void *q = cr_ctx_alloc(ctx, c * sz);
    if (q == NULL)
        return CR_ENOMEM;
    if (n > 0)
        memcpy(q, *p, n * sz);
    cr_ctx_dealloc(ctx, *p, *cap * sz);
    *p = q;
    *cap = c;
    return CR_OK;
}

static cr_status set_impl(cr_engine *eng, const cr_function *fn, int kind, cr_ad_fn impl,
                          size_t nout, void *env)
{
    cr__impl *slot = (cr__impl *)cr__engine_find(eng, fn);
    if (slot == NULL) {
        if (eng->nimpls == eng->cap && grow_table(eng->ctx, (void **)&eng->impls, &eng->cap,
                                                  eng->nimpls, sizeof *eng->impls, 8) != CR_OK)
            return CR_ENOMEM;
        slot = &eng->impls[eng->nimpls++];
        memset(slot, 0, sizeof *slot);
        slot->fn = fn;
    }
    if (kind == CR__IMPL_OVERLAY) {
        /* An overlay keeps a zero-adjoint declaration (used to compute the primal). */
        if (slot->kind != CR__IMPL_ZERO)
            slot->kind = kind;
        slot->impl = impl;
        slot->nout = nout;
        slot->env = env;
        slot->closure = false;
    } else {
        slot->kind = kind;
    }
    return CR_OK;
}

cr_status cr_engine_friendly(cr_engine *eng, const cr_type *type, cr_friendly_fn fn, void *udata)
{
    if (eng == NULL)
        return CR_EINVAL;
    if (type == NULL || fn == NULL)
        return cr_ctx_error(eng->ctx, CR_EINVAL, "cr_engine_friendly: NULL type or function");
    cr_status st = cr__type_check(eng->ctx, type);
    if (st != CR_OK)
        return st;
    cr__friendly *slot = (cr__friendly *)cr__engine_friendly_of(eng, type);
    if (slot == NULL) {
        if (eng->nfriendly == eng->cap_friendly &&
            grow_table(eng->ctx, (void **)&eng->friendly, &eng->cap_friendly, eng->nfriendly,
                       sizeof *eng->friendly, 4) != CR_OK)
            return CR_ENOMEM;
        slot = &eng->friendly[eng->nfriendly++];
        slot->type = type;
    }
    slot->fn = fn;
    slot->udata = udata;
    return CR_OK;
}

cr_status cr_engine_overlay(cr_engine *eng, const cr_function *fn, cr_ad_fn impl, size_t nout,
                            void *env)
{
    if (eng == NULL)
        return CR_EINVAL;
    if (fn == NULL || impl == NULL || nout == 0 || nout > CR__MAX_TUPLE)
        return cr_ctx_error(eng->ctx, CR_EINVAL,
                            "cr_engine_overlay: NULL function or implementation, or a number "
                            "of results outside 1..%d",
                            CR__MAX_TUPLE);
    return set_impl(eng, fn, CR__IMPL_OVERLAY, impl, nout, env);
}

cr_status cr_engine_overlay_closure(cr_engine *eng, const cr_function *fn, cr_ad_fn impl,
                                    size_t nout, void *env)
{
    if (eng == NULL)
        return CR_EINVAL;
    if (fn == NULL || fn->self_type == NULL)
        return cr_ctx_error(eng->ctx, CR_EINVAL,
                            "cr_engine_overlay_closure: %s has no self_type (use "
                            "cr_engine_overlay for plain functions)",
                            fn != NULL ? fn->name : "NULL function");
    cr_status st = cr__type_check(eng->ctx, fn->self_type);
    if (st == CR_OK)
        st = cr_engine_overlay(eng, fn, impl, nout, env);
    if (st != CR_OK)
        return st;
    ((cr__impl *)cr__engine_find(eng, fn))->closure = true;
    return CR_OK;
}

cr_status cr_engine_zero_adjoint(cr_engine *eng, const cr_function *fn)
{
    if (eng == NULL)
        return CR_EINVAL;
    if (fn == NULL)
        return cr_ctx_error(eng->ctx, CR_EINVAL, "cr_engine_zero_adjoint: NULL function");
    return set_impl(eng, fn, CR__IMPL_ZERO, NULL, 0, NULL);
}

cr_status cr_engine_from_rrule(cr_engine *eng, const cr_rule_def *def)
{
    if (eng == NULL)
        return CR_EINVAL;
    if (eng->own == NULL) {
        cr_status st = cr_registry_new(eng->ctx, eng->registry, &eng->own);
        if (st != CR_OK)
            return st;
        eng->config.registry = eng->own;
    }
    return cr_registry_add(eng->own, def);
}

bool cr__config_zero_adjoint(const cr_config *cfg, const cr_function *fn)
{
    if (cfg == NULL || cfg->frule_via_ad != engine_frule_via_ad || cfg->ad_env == NULL)
        return false;
    const cr__impl *im = cr__engine_find(cfg->ad_env, fn);
    return im != NULL && im->kind == CR__IMPL_ZERO;
}

bool cr_engine_is_primitive(const cr_engine *eng, const cr_value *f, const cr_value *args,
                            size_t nargs)
{
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL)
        return false;
    if (eng != NULL) {
        const cr__impl *im = cr__engine_find(eng, f->u.func.fn);
        if (im != NULL && im->kind == CR__IMPL_ZERO)
            return true;
    }
    const cr_config *cfg = cr_engine_config(eng);
    cr_rule_match m;
    return cr_registry_lookup(cfg->registry, cfg, CR_MODE_RRULE, f, args, nargs, &m) == CR_OK &&
           !m.opted_out && m.def != NULL;
}

/* ---- rrule_via_ad / frule_via_ad --------------------------------------------------------- */

/* The sub-tape's inputs: real arguments become variables, integers and bools constants. */
static cr_status via_inputs(cr_arena *arena, cr_tape *sub, const cr_value *f, const cr_value *args,
                            size_t nargs, cr_var *ins)
{
    for (size_t j = 0; j < nargs; j++) {
        switch (args[j].kind) {
        case CR_KIND_F64:
            ins[j] = cr_tape_input(sub, args[j].u.f64);
            break;
        case CR_KIND_F32:
            ins[j] = cr_tape_input(sub, (double)args[j].u.f32);
            break;
        case CR_KIND_I64:
        case CR_KIND_I32:
            ins[j] = cr_const((double)args[j].u.i64);
            break;
        case CR_KIND_BOOL:
            ins[j] = cr_const(args[j].u.b ? 1.0 : 0.0);
            break;
        default:
            return CR__FAIL(arena, CR_EUNIMPL,
                            "via_ad(%s): argument %zu is a %s; the engine differentiates "
                            "functions of real scalars so far",
                            cr__fname(f), j + 1, cr_kind_name(args[j].kind));
        }
    }
    return cr_tape_status(sub);
}

/* The results as a value: a double, or a tuple of doubles in the arena. */
static cr_status via_result(cr_arena *arena, const double *yv, size_t k, cr_value *y)
{
    if (k == 1) {
        *y = cr_value_f64(yv[0]);
        return CR_OK;
    }
    double *mem = cr_arena_alloc(arena, k * sizeof *mem, _Alignof(double));
    if (mem == NULL)
        return CR__ALLOC_STATUS(arena);
    memcpy(mem, yv, k * sizeof *mem);
    *y = cr_value_struct(cr__tuple_f64(k), mem);
    return CR_OK;
}

typedef struct via_env {
    cr_tape *sub;
    size_t nargs;
    size_t nout;
    cr_var *ins;
    cr_var outs[CR__MAX_TUPLE];
    uint8_t *kinds;
    const cr_function *fn;
    size_t nfields; /* a closure overlay's real fields: the first sub-tape inputs */
    bool zero;      /* f is zero-adjoint: its fields' cotangent is zero too */
} via_env;

/* The cotangent of the results as nout doubles. */
static cr_status via_seeds(cr_arena *arena, const via_env *e, const cr_tangent *dy, double *g)
{
    cr_tangent d;
    cr_status st = cr_tangent_unthunk(*dy, &d);
    if (st != CR_OK)
        return st;
    for (size_t o = 0; o < e->nout; o++) {
        g[o] = 0.0;
        cr_tangent to = e->nout == 1 ? d : cr_tangent_field(d, o);
        if (e->nout > 1 && d.tag != CR_TAN_STRUCT && !cr_tangent_is_zero(d))
            return CR__FAIL(arena, CR_ETANGENT,
                            "rrule_via_ad(%s): the result is a tuple, its cotangent must be "
                            "structural (got %s)",
                            e->fn->name, cr_tag_name((cr_tag)d.tag));
        st = cr__accum_real(arena, "rrule_via_ad_pullback", to, &g[o]);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_tangent arg_tangent(uint8_t kind, double v)
{
    if (kind == CR_KIND_F64)
        return cr_tangent_f64(v);
    if (kind == CR_KIND_F32)
        return cr_tangent_f32((float)v);
    return cr_tangent_none();
}

/* Real fields a closure overlay reads as variables (0 for other implementations). */
static bool closure_overlay(const cr__impl *im)
{
    return im != NULL && im->kind == CR__IMPL_OVERLAY && im->closure;
}
static size_t closure_fields(const cr__impl *im)
{
    return closure_overlay(im) ? cr_type_real_fields(im->fn->self_type) : 0;
}

/* Record a closure's overlay on sub: its real fields become the first inputs (read from
 * the function value's self), the arguments follow them in ins. */
static cr_status via_closure(cr_arena *arena, cr_tape *sub, const cr__impl *im, const cr_value *f,
                             const cr_value *args, size_t nargs, cr_var *ins, cr_var *outs,
                             size_t *got)
{
    const cr_function *fn = f->u.func.fn;
    size_t nf = cr_type_real_fields(fn->self_type);
    cr_status st = CR_OK;
    if (nf > 0) {
        if (f->u.func.self == NULL)
            return CR__FAIL(arena, CR_EINVAL,
                            "via_ad(%s): a closure value without fields (self is NULL)", fn->name);
        st = cr_tape_struct_inputs(sub, fn->self_type, f->u.func.self, ins, nf);
    }
    if (st == CR_OK)
        st = via_inputs(arena, sub, f, args, nargs, ins + nf);
    if (st != CR_OK)
        return st;
    for (size_t o = 0; o < im->nout; o++)
        outs[o] = cr_const((double)NAN);
    st = im->impl(sub, ins, nf + nargs, outs, im->nout, im->env);
    if (st != CR_OK && cr_tape_status(sub) == CR_OK)
        return CR__FAIL(arena, st, "%s (overlay) failed: %s", fn->name, cr_status_str(st));
    if (cr_tape_status(sub) != CR_OK)
        return cr_tape_status(sub);
    *got = im->nout;
    return CR_OK;
}

static const cr_notimpl k_self_notimpl = {
    __FILE__, __LINE__,
    "the derivative with respect to the fields of a closure recorded by rrule_via_ad"};

static cr_status rrule_via_ad_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx,
                                       cr_arena *arena, void *env)
{
    via_env *e = env;
    double g[CR__MAX_TUPLE];
    cr_status st = via_seeds(arena, e, dy, g);
    if (st != CR_OK)
        return st;
    size_t nf = e->nfields, nin = nf + e->nargs;
    /* A closure's field cotangents outlive the scratch: they go into dx[0]. */
    cr_arena_mark mk0 = cr_arena_get_mark(arena);
    double *xbar =
        nf > 0 ? cr__arena_array(arena, "rrule_via_ad", nin, sizeof *xbar, _Alignof(double)) : NULL;
    cr_arena_mark mk = cr_arena_get_mark(arena);
    if (nf == 0)
        xbar = cr__arena_array(arena, "rrule_via_ad", nin, sizeof *xbar, _Alignof(double));
    if (xbar == NULL)
        return CR__ALLOC_STATUS(arena);
    st = cr_tape_vjp(e->sub, e->outs, g, e->nout, e->ins, nin, xbar);
    if (st == CR_OK) {
        cr_arena_rewind(arena, mk);
        if (nf > 0)
            st = cr__struct_tangent(arena, e->fn->self_type, xbar, &dx[0]);
        else
            dx[0] = e->fn->self_type == NULL ? cr_tangent_none()
                    : e->zero                ? cr_tangent_zero()
                                             : cr_tangent_notimpl(&k_self_notimpl);
        for (size_t j = 0; j < e->nargs && j + 1 < nx; j++)
            dx[j + 1] = arg_tangent(e->kinds[j], xbar[nf + j]);
        if (st != CR_OK)
            cr_arena_rewind(arena, mk0);
        return st;
    } else if (cr_tape_status(e->sub) != CR_OK) {
        cr_ctx_error(cr_arena_ctx(arena), st, "%s", cr_tape_errmsg(e->sub));
    }
    cr_arena_rewind(arena, mk);
    return st;
}

static cr_status engine_rrule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                     const cr_value *args, size_t nargs, cr_value *y,
                                     cr_pullback *pb, void *ad_env)
{
    (void)cfg;
    const cr_engine *eng = ad_env;
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL || y == NULL || pb == NULL ||
        (nargs > 0 && args == NULL))
        return CR__FAIL(arena, CR_EINVAL, "rrule_via_ad: invalid arguments");
    /* A primitive: its own rule (unless the engine declared it zero-adjoint). */
    const cr__impl *im = eng != NULL ? cr__engine_find(eng, f->u.func.fn) : NULL;
    if (im == NULL || im->kind != CR__IMPL_ZERO) {
        cr_status st = cr_rrule(cr_engine_config(eng), arena, f, args, nargs, y, pb);
        if (st != CR_NOTHING)
            return st;
    }
    size_t nf = closure_fields(im);
    via_env *e = cr_arena_alloc(arena, sizeof *e, _Alignof(via_env));
    cr_var *ins = cr__arena_array(arena, "rrule_via_ad", nf + nargs, sizeof *ins, _Alignof(cr_var));
    uint8_t *kinds = cr_arena_alloc(arena, nargs ? nargs : 1, 1);
    if (e == NULL || ins == NULL || kinds == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_tape *sub;
    cr_status st = cr__tape_new_in(arena, eng, cr_engine_config(eng), 0, &sub);
    if (st != CR_OK)
        return st;
    size_t got = 0;
    if (closure_overlay(im))
        st = via_closure(arena, sub, im, f, args, nargs, ins, e->outs, &got);
    else if ((st = via_inputs(arena, sub, f, args, nargs, ins)) == CR_OK)
        st = cr__tape_call_any(sub, f, ins, nargs, e->outs, CR__MAX_TUPLE, &got);
    if (st != CR_OK)
        return st;
    double yv[CR__MAX_TUPLE];
    for (size_t o = 0; o < got; o++)
        yv[o] = e->outs[o].v;
    st = via_result(arena, yv, got, y);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < nargs; j++)
        kinds[j] = (uint8_t)args[j].kind;
    e->sub = sub;
    e->nargs = nargs;
    e->nout = got;
    e->ins = ins;
    e->kinds = kinds;
    e->fn = f->u.func.fn;
    e->nfields = nf;
    e->zero = im != NULL && im->kind == CR__IMPL_ZERO;
    pb->fn = rrule_via_ad_pullback;
    pb->env = e;
    pb->name = "rrule_via_ad_pullback";
    pb->nx = nargs + 1;
    return CR_OK;
}

static cr_status engine_frule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                     const cr_value *f, const cr_value *args, size_t nargs,
                                     cr_value *y, cr_tangent *dy, void *ad_env)
{
    (void)cfg;
    const cr_engine *eng = ad_env;
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL || y == NULL || dy == NULL ||
        dargs == NULL || (nargs > 0 && args == NULL))
        return CR__FAIL(arena, CR_EINVAL, "frule_via_ad: invalid arguments");
    const cr__impl *im = eng != NULL ? cr__engine_find(eng, f->u.func.fn) : NULL;
    size_t nf = closure_fields(im);
    if (f->u.func.fn->self_type != NULL && nf == 0 && !cr_tangent_is_zero(dargs[0]))
        return CR__FAIL(arena, CR_EUNIMPL,
                        "frule_via_ad(%s): a tangent of the closure's fields needs an overlay "
                        "that reads them (cr_engine_overlay_closure)",
                        f->u.func.fn->name);
    if (im == NULL || im->kind != CR__IMPL_ZERO) {
        cr_status st = cr_frule(cr_engine_config(eng), arena, dargs, f, args, nargs, y, dy);
        if (st != CR_NOTHING)
            return st;
    }
    double yv[CR__MAX_TUPLE], ydot[CR__MAX_TUPLE];
    size_t got = 0;
    /* Everything the recording needs is scratch: only the results are kept. */
    cr_arena_mark mk = cr_arena_get_mark(arena);
    size_t nin = nf + nargs;
    cr_var *ins = cr__arena_array(arena, "frule_via_ad", nin, sizeof *ins, _Alignof(cr_var));
    double *xdot = cr__arena_array(arena, "frule_via_ad", nin, sizeof *xdot, _Alignof(double));
    cr_status st = ins == NULL || xdot == NULL ? CR__ALLOC_STATUS(arena) : CR_OK;
    cr_tape *sub = NULL;
    cr_var outs[CR__MAX_TUPLE];
    if (st == CR_OK)
        st = cr__tape_new_in(arena, eng, cr_engine_config(eng), CR_TAPE_FORWARD, &sub);
    if (st == CR_OK && nf > 0)
        st = cr__struct_tangent_values(arena, "frule_via_ad", f->u.func.fn->self_type, dargs[0],
                                       xdot);
    for (size_t j = 0; j < nargs && st == CR_OK; j++) {
        xdot[nf + j] = 0.0;
        st = cr__accum_real(arena, "frule_via_ad", dargs[j + 1], &xdot[nf + j]);
    }
    if (st == CR_OK && closure_overlay(im))
        st = via_closure(arena, sub, im, f, args, nargs, ins, outs, &got);
    else if (st == CR_OK && (st = via_inputs(arena, sub, f, args, nargs, ins)) == CR_OK)
        st = cr__tape_call_any(sub, f, ins, nargs, outs, CR__MAX_TUPLE, &got);
    if (st == CR_OK)
        st = cr_tape_jvp(sub, ins, xdot, nin, outs, got, ydot);
    for (size_t o = 0; o < got && st == CR_OK; o++)
        yv[o] = outs[o].v;
    cr_arena_rewind(arena, mk);
    if (st != CR_OK)
        return st;
    st = via_result(arena, yv, got, y);
    if (st != CR_OK)
        return st;
    bool zero = true;
    for (size_t o = 0; o < got; o++)
        zero = zero && ydot[o] == 0.0;
    if (zero) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    if (got == 1) {
        *dy = cr_tangent_f64(ydot[0]);
        return CR_OK;
    }
    cr_tangent fields[CR__MAX_TUPLE];
    for (size_t o = 0; o < got; o++)
        fields[o] = cr_tangent_f64(ydot[o]);
    return cr_tangent_struct(arena, cr__tuple_f64(got), NULL, fields, got, dy);
}
