/*
 * Forward mode on dual numbers: every operation evaluates its row once for value and
 * partials and pushes all directions through them; other functions use their frule
 * (per direction) or frule_via_ad. Drivers seed directions for derivative, jvp and
 * Jacobians by chunks.
 */
#include <string.h>

#include <chainrules/dual.h>
#include <chainrules/rules_math.h>

#include "tape_impl.h"

cr_dual cr_dual_const(double v)
{
    cr_dual r;
    memset(&r, 0, sizeof r);
    r.v = v;
    return r;
}

cr_dual cr_dual_var(double v, size_t dir)
{
    cr_dual r = cr_dual_const(v);
    if (dir < CR_DUAL_MAX_CHUNK) {
        r.d[dir] = 1.0;
        r.n = (uint32_t)dir + 1;
    }
    return r;
}

cr_dual cr_dual_make(double v, const double *d, size_t n)
{
    cr_dual r = cr_dual_const(v);
    if (n > CR_DUAL_MAX_CHUNK)
        n = CR_DUAL_MAX_CHUNK;
    for (size_t k = 0; k < n && d != NULL; k++)
        r.d[k] = d[k];
    r.n = d != NULL ? (uint32_t)n : 0;
    return r;
}

static inline const cr_scalar_rule *row_of(const cr_value *f)
{
    return (const cr_scalar_rule *)f->u.func.fn->udata;
}

/* Entries of d past n are zero, so the loops run over every slot without branches. */
static inline cr_dual dual1(const cr_value *f, cr_dual a)
{
    double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    row_of(f)->f64(&a.v, Y, D);
    cr_dual r;
    r.v = Y[0];
    r.n = a.n;
    for (size_t k = 0; k < CR_DUAL_MAX_CHUNK; k++)
        r.d[k] = D[0] * a.d[k];
    return r;
}

static inline cr_dual dual2(const cr_value *f, cr_dual a, cr_dual b)
{
    double x[2] = {a.v, b.v}, Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    row_of(f)->f64(x, Y, D);
    cr_dual r;
    r.v = Y[0];
    r.n = a.n > b.n ? a.n : b.n;
    /* A constant operand contributes nothing, even where its partial is inf or NaN. */
    if (b.n == 0)
        for (size_t k = 0; k < CR_DUAL_MAX_CHUNK; k++)
            r.d[k] = D[0] * a.d[k];
    else if (a.n == 0)
        for (size_t k = 0; k < CR_DUAL_MAX_CHUNK; k++)
            r.d[k] = D[1] * b.d[k];
    else
        for (size_t k = 0; k < CR_DUAL_MAX_CHUNK; k++)
            r.d[k] = D[0] * a.d[k] + D[1] * b.d[k];
    return r;
}

cr_dual cr_dual_add(cr_dual a, cr_dual b)
{
    return dual2(&cr_fn_add, a, b);
}

cr_dual cr_dual_sub(cr_dual a, cr_dual b)
{
    return dual2(&cr_fn_sub, a, b);
}

cr_dual cr_dual_mul(cr_dual a, cr_dual b)
{
    return dual2(&cr_fn_mul, a, b);
}

cr_dual cr_dual_div(cr_dual a, cr_dual b)
{
    return dual2(&cr_fn_div, a, b);
}

cr_dual cr_dual_neg(cr_dual a)
{
    return dual1(&cr_fn_neg, a);
}

cr_dual cr_dual_sin(cr_dual a)
{
    return dual1(&cr_fn_sin, a);
}

cr_dual cr_dual_cos(cr_dual a)
{
    return dual1(&cr_fn_cos, a);
}

cr_dual cr_dual_exp(cr_dual a)
{
    return dual1(&cr_fn_exp, a);
}

cr_dual cr_dual_log(cr_dual a)
{
    return dual1(&cr_fn_log, a);
}

cr_dual cr_dual_sqrt(cr_dual a)
{
    return dual1(&cr_fn_sqrt, a);
}

cr_dual cr_dual_asin(cr_dual a)
{
    return dual1(&cr_fn_asin, a);
}

/* ---- Generic calls ----------------------------------------------------------------------- */

#define MAX_ARGS 64

/* The real scalars of a result value (a number or a tuple of numbers). */
static cr_status result_reals(cr_arena *arena, const char *fname, const cr_value *y, double *v,
                              size_t cap, size_t *k)
{
    switch (y->kind) {
    case CR_KIND_F64:
        v[0] = y->u.f64;
        *k = 1;
        return CR_OK;
    case CR_KIND_F32:
        v[0] = (double)y->u.f32;
        *k = 1;
        return CR_OK;
    case CR_KIND_STRUCT: {
        const cr_type *ty = y->u.obj.type;
        if (ty->nfields > cap)
            break;
        size_t i = cr__tuple_reals(y, v);
        if (i < ty->nfields)
            return CR__FAIL(arena, CR_EUNIMPL, "%s: result field %zu is a %s, not real", fname, i,
                            cr_kind_name(ty->fields[i].kind));
        *k = ty->nfields;
        return CR_OK;
    }
    default:
        break;
    }
    return CR__FAIL(arena, CR_EUNIMPL,
                    "%s returns a %s: forward mode on duals handles real "
                    "results (and tuples of up to %d) only",
                    fname, cr_kind_name(y->kind), CR__MAX_TUPLE);
}

/* Whether the rule cfg's registry gives for a call of row's function is the row itself (as
 * the tape decides, tape.c), so that it is evaluated once for every direction, with no
 * arena. */
static bool row_is_rule(const cr_config *cfg, const cr_value *f, const cr_dual *args, size_t nargs,
                        const cr_scalar_rule *row)
{
    cr_value vals[CR_SCALAR_MAX_IN];
    for (size_t j = 0; j < nargs; j++)
        vals[j] = cr_value_f64(args[j].v);
    cr_rule_match m;
    return cr_registry_lookup(cfg->registry, cfg, CR_MODE_FRULE, f, vals, nargs, &m) == CR_OK &&
           !m.opted_out && m.def != NULL && m.def->udata == row;
}

cr_status cr_dual_call(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                       const cr_dual *args, size_t nargs, cr_dual *out, size_t nout)
{
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL || out == NULL ||
        (nargs > 0 && args == NULL) || nargs > MAX_ARGS)
        return arena != NULL ? CR__FAIL(arena, CR_EINVAL, "cr_dual_call: invalid arguments")
                             : CR_EINVAL;
    const cr_function *fn = f->u.func.fn;
    /* A function the engine declared zero-adjoint has a zero tangent whatever its rules,
     * as on the engine's tapes: its row gives the value alone; otherwise frule_via_ad,
     * which evaluates it as a constant, is called without trying the frule. */
    const bool zero = cr__config_zero_adjoint(cfg, fn);
    /* A variadic function's row covers one count (hypot(x, y) of hypot(x...)): a call of
     * another count goes through the function's frule. Under a registry the row is used
     * when it is the rule the registry gives (no user rule overrides it). */
    const cr_scalar_rule *row = cr__row_for(fn, nargs);
    if (row != NULL && !zero && cfg != NULL && cfg->registry != NULL && nargs == row->nin &&
        nout == row->nout && !row_is_rule(cfg, f, args, nargs, row))
        row = NULL;
    if (row != NULL) {
        if (nargs != row->nin || nout != row->nout)
            return arena != NULL ? CR__FAIL(arena, CR_EINVAL,
                                            "%s takes %u argument%s and gives %u result%s "
                                            "(%zu, %zu given)",
                                            fn->name, (unsigned)row->nin, CR__S(row->nin),
                                            (unsigned)row->nout, CR__S(row->nout), nargs, nout)
                                 : CR_EINVAL;
        double x[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
        uint32_t n = 0;
        for (size_t j = 0; j < nargs; j++) {
            x[j] = args[j].v;
            if (args[j].n > n)
                n = args[j].n;
        }
        row->f64(x, Y, D);
        for (size_t o = 0; o < nout; o++) {
            cr_dual r = cr_dual_const(Y[o]);
            r.n = n;
            for (size_t j = 0; j < nargs && !zero; j++)
                if (args[j].n > 0)
                    for (size_t k = 0; k < CR_DUAL_MAX_CHUNK; k++)
                        r.d[k] += D[o * nargs + j] * args[j].d[k];
            out[o] = r;
        }
        return CR_OK;
    }
    if (arena == NULL)
        return CR_EINVAL;
    cr_value vals[MAX_ARGS];
    cr_tangent dargs[MAX_ARGS + 1];
    uint32_t n = 0;
    for (size_t j = 0; j < nargs; j++) {
        vals[j] = cr_value_f64(args[j].v);
        if (args[j].n > n)
            n = args[j].n;
    }
    /* One frule call per direction (at least one, for the value). The results are made in
     * res and written at the end: out may be args, whose tangents every direction reads. */
    double yv[CR__MAX_TUPLE];
    cr_dual res[CR__MAX_TUPLE];
    size_t k = 0;
    for (uint32_t dir = 0; dir < (n ? n : 1); dir++) {
        dargs[0] = cr_tangent_zero();
        for (size_t j = 0; j < nargs; j++)
            dargs[j + 1] = args[j].n > dir ? cr_tangent_f64(args[j].d[dir]) : cr_tangent_zero();
        cr_arena_mark mk = cr_arena_get_mark(arena);
        cr_value y;
        cr_tangent dy;
        cr_status st = zero ? CR_NOTHING : cr_frule(cfg, arena, dargs, f, vals, nargs, &y, &dy);
        if (st == CR_NOTHING && cfg != NULL && (cfg->caps & CR_CAP_FORWARD))
            st = cr_frule_via_ad(cfg, arena, dargs, f, vals, nargs, &y, &dy);
        if (st == CR_NOTHING) {
            cr_status ast = cr__variadic_args(arena, f, vals, nargs);
            cr_arena_rewind(arena, mk);
            if (ast != CR_OK)
                return ast;
            char sig[256];
            cr__call_str(f, vals, nargs, sig, sizeof sig);
            return CR__FAIL(arena, CR_ENORULE,
                            "no frule for %s (give cr_dual_call an engine's configuration to "
                            "differentiate it with frule_via_ad)",
                            sig);
        }
        if (st == CR_OK)
            st = result_reals(arena, fn->name, &y, yv, CR__MAX_TUPLE, &k);
        if (st == CR_OK && k != nout)
            st =
                CR__FAIL(arena, CR_EINVAL, "%s gives %zu results, %zu expected", fn->name, k, nout);
        if (st == CR_OK && dir == 0)
            for (size_t o = 0; o < nout; o++) {
                res[o] = cr_dual_const(yv[o]);
                res[o].n = n;
            }
        /* A tuple result (even of one element) has a structural tangent: one field each. */
        for (size_t o = 0; o < nout && st == CR_OK && n > 0; o++) {
            cr_tangent to = y.kind == CR_KIND_STRUCT ? cr_tangent_field(dy, o) : dy;
            st = cr__accum_real(arena, fn->name, to, &res[o].d[dir]);
        }
        cr_arena_rewind(arena, mk);
        if (st != CR_OK)
            return st;
    }
    memcpy(out, res, nout * sizeof *out);
    return CR_OK;
}

/* ---- Drivers ----------------------------------------------------------------------------- */

cr_status cr_dual_derivative(cr_dual_fn f, void *env, double x, double *y, double *dy)
{
    if (f == NULL || dy == NULL)
        return CR_EINVAL;
    cr_dual in = cr_dual_var(x, 0), out = cr_dual_const((double)NAN);
    cr_status st = f(&in, 1, &out, 1, env);
    if (st != CR_OK)
        return st;
    if (y != NULL)
        *y = out.v;
    *dy = out.d[0];
    return CR_OK;
}

#define SMALL 32

typedef struct duals {
    cr_dual small[SMALL];
    cr_dual *x, *y;
    cr_arena_mark mark;
    cr_arena *arena;
} duals;

static cr_status duals_get(duals *b, cr_arena *scratch, size_t n, size_t m)
{
    b->arena = scratch;
    size_t nm, bytes;
    if (!cr__add_size(n, m, &nm) || !cr__mul_size(nm, sizeof(cr_dual), &bytes))
        return scratch != NULL ? CR__FAIL(scratch, CR_EOVERFLOW,
                                          "cr_dual: %zu inputs and %zu outputs overflow", n, m)
                               : CR_EOVERFLOW;
    if (nm <= SMALL) {
        b->x = b->small;
        b->y = b->small + n;
        return CR_OK;
    }
    if (scratch == NULL)
        return CR_EINVAL;
    b->mark = cr_arena_get_mark(scratch);
    b->x = cr_arena_alloc(scratch, bytes, _Alignof(cr_dual));
    if (b->x == NULL)
        return CR__ALLOC_STATUS(scratch);
    b->y = b->x + n;
    return CR_OK;
}

static void duals_put(duals *b)
{
    if (b->x != b->small && b->x != NULL)
        cr_arena_rewind(b->arena, b->mark);
}

cr_status cr_dual_jvp(cr_dual_fn f, void *env, const double *x, size_t n, const double *v, size_t m,
                      cr_arena *scratch, double *y, double *jv)
{
    if (f == NULL || (n > 0 && (x == NULL || v == NULL)) || (m > 0 && jv == NULL))
        return scratch != NULL ? CR__FAIL(scratch, CR_EINVAL, "cr_dual_jvp: NULL argument")
                               : CR_EINVAL;
    for (size_t j = 0; j < n; j++)
        if (!isfinite(v[j]))
            return scratch != NULL
                       ? CR__FAIL(scratch, CR_EDOMAIN,
                                  "cr_dual_jvp: direction %zu is %g, not finite", j, v[j])
                       : CR_EDOMAIN;
    duals b;
    cr_status st = duals_get(&b, scratch, n, m);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        b.x[j] = cr_dual_make(x[j], &v[j], 1);
    for (size_t i = 0; i < m; i++)
        b.y[i] = cr_dual_const((double)NAN);
    st = f(b.x, n, b.y, m, env);
    for (size_t i = 0; i < m && st == CR_OK; i++) {
        if (y != NULL)
            y[i] = b.y[i].v;
        jv[i] = b.y[i].d[0];
    }
    duals_put(&b);
    return st;
}

cr_status cr_dual_jacobian(cr_dual_fn f, void *env, const double *x, size_t n, size_t m,
                           cr_arena *scratch, double *y, double *jac)
{
    size_t mn;
    if (!cr__mul_size(m, n, &mn))
        return scratch != NULL
                   ? CR__FAIL(scratch, CR_EOVERFLOW, "cr_dual_jacobian: %zu x %zu overflows", m, n)
                   : CR_EOVERFLOW;
    if (f == NULL || (n > 0 && x == NULL) || (mn > 0 && jac == NULL))
        return scratch != NULL ? CR__FAIL(scratch, CR_EINVAL, "cr_dual_jacobian: NULL argument")
                               : CR_EINVAL;
    duals b;
    cr_status st = duals_get(&b, scratch, n, m);
    if (st != CR_OK)
        return st;
    for (size_t c0 = 0; c0 < (n ? n : 1) && st == CR_OK; c0 += CR_DUAL_MAX_CHUNK) {
        for (size_t j = 0; j < n; j++)
            b.x[j] = j >= c0 && j - c0 < CR_DUAL_MAX_CHUNK ? cr_dual_var(x[j], j - c0)
                                                           : cr_dual_const(x[j]);
        for (size_t i = 0; i < m; i++)
            b.y[i] = cr_dual_const((double)NAN);
        st = f(b.x, n, b.y, m, env);
        for (size_t i = 0; i < m && st == CR_OK; i++) {
            if (y != NULL && c0 == 0)
                y[i] = b.y[i].v;
            for (size_t j = c0; j < n && j - c0 < CR_DUAL_MAX_CHUNK; j++)
                jac[i * n + j] = b.y[i].d[j - c0];
        }
    }
    duals_put(&b);
    return st;
}
