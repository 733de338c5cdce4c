/*
 * frule / rrule entry points over the registry, pullback calls (zero short-circuit,
 * debug-mode chain of pullback names, debug-mode projection checks), RuleConfig's
 * via_ad calls, non-differentiable rules and ignore_derivatives.
 */
#include <stdio.h>
#include <string.h>

#include <chainrules/project.h>

#include "rules_impl.h"

const char *cr__fname(const cr_value *f)
{
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL || f->u.func.fn->name == NULL)
        return "?";
    return f->u.func.fn->name;
}

void cr__call_str(const cr_value *f, const cr_value *args, size_t nargs, char *buf, size_t size)
{
    cr_argspec specs[CR_SIG_MAX_ARGS];
    size_t n = nargs < CR_SIG_MAX_ARGS ? nargs : CR_SIG_MAX_ARGS;
    for (size_t i = 0; i < n; i++)
        specs[i] = cr_argspec_of(&args[i]);
    cr_signature_str(cr__fname(f), specs, n, nargs > n, buf, size);
}

cr_status cr_function_call(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                           cr_value *out)
{
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL || out == NULL ||
        (nargs > 0 && args == NULL))
        return CR__FAIL(arena, CR_EINVAL, "cr_function_call: not a function value");
    const cr_function *fn = f->u.func.fn;
    if (fn->arity >= 0 && (size_t)fn->arity != nargs)
        return CR__FAIL(arena, CR_EINVAL, "%s takes %d argument%s, %zu given", fn->name, fn->arity,
                        CR__S(fn->arity), nargs);
    if (fn->primal == NULL)
        return CR__FAIL(arena, CR_ENORULE, "%s has no primal implementation", fn->name);
    return fn->primal(arena, f, args, nargs, out);
}

/* Append " <- in NAME" to the context's message (debug mode's chain of pullbacks). */
static void chain_name(cr_arena *arena, const char *name)
{
    cr_ctx *ctx = cr_arena_ctx(arena);
    if (!cr_ctx_debug(ctx))
        return;
    char msg[CR_ERRMSG_SIZE];
    snprintf(msg, sizeof msg, "%s", cr_ctx_errmsg(ctx));
    cr_status code = cr_ctx_errcode(ctx);
    cr_ctx_error(ctx, code == CR_OK ? CR_EINVAL : code, "%s\n  in pullback %s", msg,
                 name != NULL ? name : "(unnamed)");
}

cr_status cr_pullback_call(cr_arena *arena, const cr_pullback *pb, const cr_tangent *dy,
                           cr_tangent *dx, size_t nx)
{
    if (pb == NULL || pb->fn == NULL || dy == NULL || dx == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_pullback_call: NULL pullback or tangents");
    if (nx != pb->nx)
        return CR__FAIL(arena, CR_EINVAL, "pullback %s returns %zu cotangents, %zu expected",
                        pb->name, pb->nx, nx);
    for (size_t i = 0; i < nx; i++)
        dx[i] = (cr_tangent){.tag = CR_TAN_ZERO};
    if (dy->tag == CR_TAN_ZERO || dy->tag == CR_TAN_NONE)
        return CR_OK;
    cr_status st = pb->fn(dy, dx, nx, arena, pb->env);
    if (st != CR_OK) {
        if (cr_ctx_errcode(cr_arena_ctx(arena)) != st)
            CR__FAIL(arena, st, "%s", cr_status_str(st));
        chain_name(arena, pb->name);
    }
    return st;
}

cr_status cr_rrule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                          const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb)
{
    if (cfg == NULL || !(cfg->caps & CR_CAP_REVERSE) || cfg->rrule_via_ad == NULL)
        return CR__FAIL(arena, CR_ENOCAP,
                        "rrule_via_ad(%s): the rule configuration has no reverse mode "
                        "(CR_CAP_REVERSE and an rrule_via_ad callback are required)",
                        cr__fname(f));
    return cfg->rrule_via_ad(cfg, arena, f, args, nargs, y, pb, cfg->ad_env);
}

cr_status cr_frule_via_ad(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                          const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                          cr_tangent *dy)
{
    if (cfg == NULL || !(cfg->caps & CR_CAP_FORWARD) || cfg->frule_via_ad == NULL)
        return CR__FAIL(arena, CR_ENOCAP,
                        "frule_via_ad(%s): the rule configuration has no forward mode "
                        "(CR_CAP_FORWARD and an frule_via_ad callback are required)",
                        cr__fname(f));
    return cfg->frule_via_ad(cfg, arena, dargs, f, args, nargs, y, dy, cfg->ad_env);
}

static cr_status lookup(const cr_config *cfg, cr_arena *arena, cr_rule_mode mode, const cr_value *f,
                        const cr_value *args, size_t nargs, cr_rule_match *m)
{
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL || (nargs > 0 && !args))
        return CR__FAIL(arena, CR_EINVAL, "%s: f must be a function value",
                        mode == CR_MODE_FRULE ? "frule" : "rrule");
    cr_status st = cr_registry_lookup(NULL, cfg, mode, f, args, nargs, m);
    if (st == CR_EMISUSE) {
        char sig[200];
        cr__call_str(f, args, nargs, sig, sizeof sig);
        return CR__FAIL(arena, CR_EMISUSE, "%s for %s is ambiguous: several rules match",
                        mode == CR_MODE_FRULE ? "frule" : "rrule", sig);
    }
    if (st == CR_OK && m->opted_out)
        return CR_NOTHING;
    return st;
}

cr_status cr_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                   const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                   cr_tangent *dy)
{
    if (dargs == NULL || y == NULL || dy == NULL)
        return CR__FAIL(arena, CR_EINVAL, "frule: NULL argument");
    cr_rule_match m;
    cr_status st = lookup(cfg, arena, CR_MODE_FRULE, f, args, nargs, &m);
    if (st != CR_OK)
        return st;
    return m.def->frule(cfg, arena, dargs, f, args, nargs, y, dy, m.def->udata);
}

/* Debug mode: a pullback wrapper that checks each cotangent against its projection. */
typedef struct checked_env {
    cr_pullback inner;
    const cr_function *fn; /* not the caller's cr_value: it may be gone by now */
    size_t nargs;
    cr_project **proj; /* nargs projectors */
} checked_env;

static cr_status checked_pullback(CR__PULLBACK_PARAMS)
{
    checked_env *e = env;
    /* Called through cr_pullback_call() on the wrapper, which checked nx, skipped zero
     * cotangents and names the pullback on failure: call the inner function directly, so
     * that a failure is named once in the chain. */
    cr_status st = e->inner.fn(dy, dx, nx, arena, e->inner.env);
    if (st != CR_OK)
        return st;
    const cr_function *fn = e->fn;
    if (fn->self_type == NULL && dx[0].tag != CR_TAN_NONE && dx[0].tag != CR_TAN_ZERO)
        return CR__FAIL(arena, CR_ETANGENT,
                        "pullback %s returned a %s for self, but %s has no fields "
                        "(expected NoTangent)",
                        e->inner.name, cr_tag_name((cr_tag)dx[0].tag), fn->name);
    for (size_t i = 0; i < e->nargs && i + 1 < nx; i++)
        if (!cr_project_fits(e->proj[i], dx[i + 1]))
            return CR__FAIL(arena, CR_ETANGENT,
                            "pullback %s returned a %s cotangent for argument %zu of %s, "
                            "outside the argument's tangent space (use ProjectTo)",
                            e->inner.name, cr_tag_name((cr_tag)dx[i + 1].tag), i + 1, fn->name);
    return CR_OK;
}

static cr_status wrap_checked(cr_arena *arena, const cr_value *f, const cr_value *args,
                              size_t nargs, cr_pullback *pb)
{
    CR__ARENA_NEW(arena, checked_env, e);
    e->inner = *pb;
    e->fn = f->u.func.fn;
    e->nargs = nargs;
    e->proj = cr__arena_array(arena, e->fn->name, nargs, sizeof *e->proj, _Alignof(cr_project *));
    if (e->proj == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < nargs; i++) {
        cr_status st = cr_project_new(arena, &args[i], &e->proj[i]);
        if (st != CR_OK)
            return st;
    }
    pb->fn = checked_pullback;
    pb->env = e;
    return CR_OK;
}

cr_status cr_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f, const cr_value *args,
                   size_t nargs, cr_value *y, cr_pullback *pb)
{
    if (y == NULL || pb == NULL)
        return CR__FAIL(arena, CR_EINVAL, "rrule: NULL argument");
    cr_rule_match m;
    cr_status st = lookup(cfg, arena, CR_MODE_RRULE, f, args, nargs, &m);
    if (st != CR_OK)
        return st;
    return cr__rrule_with(cfg, arena, m.def->rrule, m.def->udata, f, args, nargs, y, pb);
}

cr_status cr__rrule_with(const cr_config *cfg, cr_arena *arena, cr_rrule_fn rrule,
                         const void *udata, const cr_value *f, const cr_value *args, size_t nargs,
                         cr_value *y, cr_pullback *pb)
{
    *pb = (cr_pullback){NULL, NULL, NULL, 0}; /* a rule may leave nx to us */
    cr_status st = rrule(cfg, arena, f, args, nargs, y, pb, udata);
    if (st != CR_OK)
        return st;
    if (pb->nx == 0)
        pb->nx = nargs + 1;
    if (cr_ctx_debug(cr_arena_ctx(arena)))
        return wrap_checked(arena, f, args, nargs, pb);
    return CR_OK;
}

/* ---- Non-differentiable functions ------------------------------------------------------ */

cr_status cr__nondiff_frule(CR__FRULE_PARAMS)
{
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    *dy = cr_tangent_none();
    return CR_OK;
}

static cr_status nondiff_pullback(CR__PULLBACK_PARAMS)
{
    cr__dx_none(dx, nx);
    return CR_OK;
}

cr_status cr__nondiff_rrule(CR__RRULE_PARAMS)
{
    cr_status st = cr_function_call(arena, f, args, nargs, y);
    if (st != CR_OK)
        return st;
    pb->fn = nondiff_pullback;
    pb->env = NULL;
    pb->name = "non_differentiable_pullback";
    pb->nx = nargs + 1;
    return CR_OK;
}

/* ---- ignore_derivatives ---------------------------------------------------------------- */

static cr_status identity_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                 size_t nargs, cr_value *out)
{
    (void)f;
    if (nargs != 1)
        return CR__FAIL(arena, CR_EINVAL, "ignore_derivatives takes one argument");
    *out = args[0];
    return CR_OK;
}

const cr_function cr_function_ignore_derivatives = {
    .name = "ignore_derivatives", .arity = 1, .primal = identity_primal};

cr_status cr_ignore_derivatives(cr_status (*fn)(void *env), void *env)
{
    if (fn == NULL)
        return CR_EINVAL;
    return fn(env);
}
