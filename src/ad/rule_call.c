/*
 * The generic rule call, one node kind with all its phases: cr_tape_call() of any function
 * value on scalar variables (a scalar row evaluated and recorded as partials; an overlay or
 * a zero-adjoint function run on constants; any other rule's rrule kept as a pullback in a
 * GENERIC record, or on a second-order tape its first and second derivatives by
 * cr__rrule_second), the reverse pull and the Jacobian of a GENERIC record (driven by the
 * sweeps, sweep.c), and its prepared replay: on a replay tape cr_tape_call() records, with
 * the pullback, the function and its arguments, and each replay calls the function's rrule
 * again at the new values (the rules define the derivatives; the new pullback is the
 * derivative at the new point) in the tape's arena above the mark taken after recording.
 * Zero-adjoint and non-differentiable functions of variables are evaluated again through
 * their primal, with no derivative. Also the lookup, once when preparing, of the rrule that
 * array and GENERIC instructions call at each replay.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <chainrules/rules_math.h>
#include <chainrules/rules_special.h>

#include "prepared_impl.h"

/* The tape of a call (NULL: the current one); NULL too when a checked tape's call must not
 * go on (cr__tape_misused). */
/* ---- Recording ------------------------------------------------------------------------- */

/* ---- Reverse: the pull and the Jacobian of a GENERIC record ----------------------------- */

/* The cotangent of a GENERIC record's results: one f64, or a tuple of them. */
static cr_status generic_dy(cr_arena *arena, const cr__gen_node *nd, const double *g,
                            cr_tangent *dy, bool *zero)
{
    *zero = true;
    for (size_t o = 0; o < nd->nout; o++)
        if (g[o] != 0.0)
            *zero = false;
    if (nd->nout == 1) {
        *dy = cr_tangent_f64(g[0]);
        return CR_OK;
    }
    cr_tangent f[CR__MAX_TUPLE];
    for (size_t o = 0; o < nd->nout; o++)
        f[o] = cr_tangent_f64(g[o]);
    return cr_tangent_struct(arena, nd->tuple, NULL, f, nd->nout, dy);
}

/* The cotangents of a pullback of nx - 1 arguments, beyond the few kept on the stack. */
static cr_tangent *pullback_dx(cr_arena *arena, size_t nx)
{
    return cr_arena_alloc(arena, nx * sizeof(cr_tangent), _Alignof(cr_tangent));
}

/* Call a GENERIC record's pullback with the results' cotangents g and add what it gives
 * to the arguments' adjoints. */
static cr_status generic_pull(cr_tape *t, const cr__gen_node *nd, const double *g, double *adj)
{
    cr_arena *arena = t->arena;
    cr_tangent dy;
    bool zero;
    cr_status st = generic_dy(arena, nd, g, &dy, &zero);
    if (st != CR_OK || zero)
        return st;
    size_t nx = (size_t)nd->nargs + 1;
    cr_tangent dxs[9], *dx = nx <= 9 ? dxs : pullback_dx(arena, nx);
    if (dx == NULL)
        return CR__ALLOC_STATUS(arena);
    st = cr_pullback_call(arena, &nd->pb, &dy, dx, nx);
    for (size_t j = 0; j < nd->nargs && st == CR_OK; j++)
        if (nd->args[j] != CR_VAR_CONST)
            st = cr__accum_real(arena, nd->pb.name, dx[j + 1], &adj[nd->args[j]]);
    return st;
}

/* The Jacobian of a GENERIC record's results in its arguments, by calling the (linear)
 * pullback once per result: J[o * nargs + j]. A constant argument's column is 0 and its
 * cotangent is not read (as in the reverse sweep): it may be NotImplemented (gamma_inc's
 * order). */
static cr_status generic_jacobian(cr_tape *t, const cr__gen_node *nd, double *J)
{
    cr_arena *arena = t->arena;
    size_t nx = (size_t)nd->nargs + 1;
    cr_tangent dxs[9], *dx = nx <= 9 ? dxs : pullback_dx(arena, nx);
    if (dx == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t o = 0; o < nd->nout; o++) {
        double g[CR__MAX_TUPLE] = {0};
        g[o] = 1.0;
        cr_tangent dy;
        bool zero;
        cr_status st = generic_dy(arena, nd, g, &dy, &zero);
        if (st == CR_OK)
            st = cr_pullback_call(arena, &nd->pb, &dy, dx, nx);
        for (size_t j = 0; j < nd->nargs && st == CR_OK; j++) {
            J[o * nd->nargs + j] = 0.0;
            if (nd->args[j] != CR_VAR_CONST)
                st = cr__accum_real(arena, nd->pb.name, dx[j + 1], &J[o * nd->nargs + j]);
        }
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

/* ---- The sweeps' steps (cr__generic_kind) ------------------------------------------------ */

static cr_status generic_failed(cr_tape *t, const cr__gen_node *nd, cr_status st)
{
    const char *msg = cr_ctx_errmsg(t->ctx);
    return cr__tape_fail(t, st, "pullback %s (of %s) failed: %s", nd->pb.name, nd->fname,
                         msg[0] != '\0' ? cr__after_name(msg, nd->fname) : cr_status_str(st));
}

/* Reverse: the pullback called with the results' adjoints. */
static cr_status generic_reverse(cr_tape *t, cr__rev *s)
{
    const cr__gen_node *nd = s->p[-2].p;
    s->general = true;
    s->i -= nd->nout;
    cr_status st = generic_pull(t, nd, &s->adj[s->i], s->adj);
    if (st != CR_OK)
        return generic_failed(t, nd, st);
    s->p -= 2 + s->pre;
    return CR_OK;
}

/* Forward: the results' tangents from the Jacobian, the pullback called once per result. */
static cr_status generic_forward(cr_tape *t, cr__fwd *s)
{
    const cr__gen_node *nd = s->p[s->pre].p;
    size_t k = s->k;
    double *ti = s->tan + s->i * k;
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    double *J = cr_arena_alloc(t->arena, (size_t)nd->nout * (nd->nargs ? nd->nargs : 1) * sizeof *J,
                               _Alignof(double));
    cr_status st = J == NULL ? CR__ALLOC_STATUS(t->arena) : generic_jacobian(t, nd, J);
    if (st != CR_OK) {
        cr_arena_rewind(t->arena, mk);
        return generic_failed(t, nd, st);
    }
    for (size_t o = 0; o < nd->nout; o++)
        for (size_t j = 0; j < nd->nargs; j++) {
            if (nd->args[j] == CR_VAR_CONST)
                continue;
            const double *tj = s->tan + (size_t)nd->args[j] * k;
            double Jo = J[o * nd->nargs + j];
            for (size_t d = 0; d < k; d++)
                ti[o * k + d] += Jo * tj[d];
        }
    cr_arena_rewind(t->arena, mk);
    uint64_t h = s->p[0].u;
    s->i += rec_vars(h);
    s->p += s->pre + rec_words(h);
    return CR_OK;
}

/* Second order: never reached (a second-order tape keeps a rule's partials and their
 * differences as a row's record, cr__rrule_second). */
static cr_status generic_second(cr_tape *t, cr__sec *s)
{
    (void)s;
    return cr__tape_fail(t, CR_EINVAL, "tape: pullback record on a second-order tape");
}

size_t cr__tuple_reals(const cr_value *y, double *v)
{
    const cr_type *ty = y->u.obj.type;
    for (size_t i = 0; i < ty->nfields; i++) {
        const unsigned char *p = (const unsigned char *)y->u.obj.ptr + ty->fields[i].offset;
        if (ty->fields[i].kind == CR_KIND_F64) {
            memcpy(&v[i], p, sizeof(double));
        } else if (ty->fields[i].kind == CR_KIND_F32) {
            float f;
            memcpy(&f, p, sizeof f);
            v[i] = (double)f;
        } else {
            return i;
        }
    }
    return ty->nfields;
}

cr_status cr__unpack_result(cr_ctx *ctx, const char *fname, const cr_value *y, double *vals,
                            size_t cap, size_t *k, bool *constant)
{
    *constant = false;
    switch (y->kind) {
    case CR_KIND_F64:
        vals[0] = y->u.f64;
        *k = 1;
        return CR_OK;
    case CR_KIND_F32:
        vals[0] = (double)y->u.f32;
        *k = 1;
        return CR_OK;
    case CR_KIND_I64:
    case CR_KIND_I32:
        vals[0] = (double)y->u.i64;
        *k = 1;
        *constant = true;
        return CR_OK;
    case CR_KIND_BOOL:
        vals[0] = y->u.b ? 1.0 : 0.0;
        *k = 1;
        *constant = true;
        return CR_OK;
    case CR_KIND_STRUCT: {
        const cr_type *ty = y->u.obj.type;
        if (ty == NULL || ty->nfields == 0 || ty->nfields > cap)
            break;
        size_t i = cr__tuple_reals(y, vals);
        if (i < ty->nfields)
            return cr_ctx_error(ctx, CR_EUNIMPL,
                                "%s returns a %s whose field %zu is a %s: the scalar tape "
                                "holds real results only",
                                fname, ty->name, i, cr_kind_name(ty->fields[i].kind));
        *k = ty->nfields;
        return CR_OK;
    }
    default:
        break;
    }
    return cr_ctx_error(ctx, CR_EUNIMPL,
                        "%s returns a %s: the scalar tape holds real results (and tuples of "
                        "up to %d of them) only",
                        fname, cr_kind_name(y->kind), CR__MAX_TUPLE);
}

/* cr__unpack_result, a failure recorded on the tape. */
static cr_status unpack_result(cr_tape *t, const char *fname, const cr_value *y, double *vals,
                               size_t cap, size_t *k, bool *constant)
{
    cr_status st = cr__unpack_result(t->ctx, fname, y, vals, cap, k, constant);
    return st == CR_OK ? CR_OK : cr__tape_fail(t, st, "%s", cr_ctx_errmsg(t->ctx));
}

cr_status cr__check_nout(cr_tape *t, const char *fname, size_t k, size_t nout, size_t *got)
{
    if (got != NULL) {
        *got = k;
        if (k <= nout)
            return CR_OK;
    } else if (k == nout) {
        return CR_OK;
    }
    return cr__tape_fail(t, CR_EINVAL, "%s gives %zu result%s, %zu expected", fname, k, CR__S(k),
                         nout);
}

/* Call f with its primal (or its overlay on constants): the results are constants. */
/* Run an overlay on the tape. A closure's overlay receives the closure's real fields
 * first: constants here (their values in the function value's self). */
static cr_status run_overlay(cr_tape *t, const cr__impl *im, const cr_value *f, const cr_var *args,
                             size_t nargs, cr_var *out, size_t k)
{
    if (!im->closure)
        return im->impl(t, args, nargs, out, k, im->env);
    const cr_function *fn = f->u.func.fn;
    size_t nf = cr_type_real_fields(fn->self_type);
    if (nf > 0 && f->u.func.self == NULL)
        return cr__tape_fail(t, CR_EINVAL, "%s: a closure value without fields (self is NULL)",
                             fn->name);
    cr_var *x =
        cr_arena_alloc(t->arena, (nf + nargs ? nf + nargs : 1) * sizeof *x, _Alignof(cr_var));
    if (x == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), fn->name);
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    double *v = cr_arena_alloc(t->arena, (nf ? nf : 1) * sizeof *v, _Alignof(double));
    if (v == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), fn->name);
    cr_status st = cr__struct_values(t->ctx, fn->self_type, f->u.func.self, v);
    for (size_t j = 0; j < nf && st == CR_OK; j++)
        x[j] = cr_const(v[j]);
    cr_arena_rewind(t->arena, mk);
    if (st != CR_OK)
        return cr__tape_fail_ctx(t, st, fn->name);
    if (nargs > 0)
        memcpy(x + nf, args, nargs * sizeof *x);
    return im->impl(t, x, nf + nargs, out, k, im->env);
}

cr_status cr__overlay_values(cr_tape *t, const cr__impl *im, const cr_value *f,
                             const cr_value *vals, size_t nargs, double *yv)
{
    const char *fname = f->u.func.fn->name;
    cr_var cargs[16], out[CR__MAX_TUPLE];
    if (nargs > 16 || im->nout > CR__MAX_TUPLE)
        return cr_ctx_error(t->ctx, CR_EINVAL,
                            "%s: too many arguments or results (%zu and %zu; at most 16 and %d)",
                            fname, nargs, im->nout, CR__MAX_TUPLE);
    /* A scratch tape in t's arena, given back with whatever the overlay allocated: only the
     * values are kept. */
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    cr_tape *sub;
    cr_status st = cr__tape_new_in(t->arena, t->engine, t->config, 0, &sub);
    if (st != CR_OK)
        return cr_ctx_error(t->ctx, st, "%s (zero-adjoint overlay): no room for its tape", fname);
    for (size_t j = 0; j < nargs; j++)
        cargs[j] = cr_const(vals[j].u.f64);
    st = run_overlay(sub, im, f, cargs, nargs, out, im->nout);
    if (st == CR_OK)
        st = sub->status;
    if (st != CR_OK)
        cr_ctx_error(t->ctx, st, "%s (zero-adjoint overlay) failed: %s", fname,
                     sub->errmsg[0] != '\0' ? cr__after_name(sub->errmsg, fname)
                                            : cr_status_str(st));
    for (size_t o = 0; o < im->nout && st == CR_OK; o++)
        yv[o] = out[o].v;
    cr_arena_rewind(t->arena, mk);
    return st;
}

static cr_status call_constant(cr_tape *t, const cr_value *f, const cr__impl *im,
                               const cr_var *args, const cr_value *vals, size_t nargs, cr_var *out,
                               size_t nout, size_t *got)
{
    const cr_function *fn = f->u.func.fn;
    const cr_scalar_rule *row = cr_scalar_rule_of(fn);
    /* A replay evaluates f again where an argument is a variable (prepared_generic.c). */
    for (size_t j = 0; j < nargs && t->pre > 1; j++)
        if (args[j].idx != CR_VAR_CONST)
            return cr__replay_call(t, f, row != NULL && row->nin == nargs ? row : NULL, im, args,
                                   vals, nargs, out, nout, got, true);
    if (row != NULL && row->nin == nargs) {
        double x[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
        for (size_t j = 0; j < nargs; j++)
            x[j] = args[j].v;
        row->f64(x, Y, D);
        if (cr__check_nout(t, fn->name, row->nout, nout, got) != CR_OK)
            return t->status;
        for (size_t o = 0; o < row->nout; o++)
            out[o] = cr_const(Y[o]);
        return CR_OK;
    }
    if (fn->primal != NULL) {
        cr_value y;
        cr_status st = cr_function_call(t->arena, f, vals, nargs, &y);
        if (st != CR_OK)
            return cr__tape_fail_ctx(t, st, fn->name);
        double yv[CR__MAX_TUPLE];
        size_t k = 0;
        bool c;
        if (unpack_result(t, fn->name, &y, yv, CR__MAX_TUPLE, &k, &c) != CR_OK ||
            cr__check_nout(t, fn->name, k, nout, got) != CR_OK)
            return t->status;
        for (size_t o = 0; o < k; o++)
            out[o] = cr_const(yv[o]);
        return CR_OK;
    }
    if (im != NULL && im->impl != NULL) {
        /* The overlay on constants (a replay evaluates it the same way). */
        double yv[CR__MAX_TUPLE];
        if (cr__check_nout(t, fn->name, im->nout, nout, got) != CR_OK)
            return t->status;
        cr_status st = cr__overlay_values(t, im, f, vals, nargs, yv);
        if (st != CR_OK)
            return cr__tape_fail(t, st, "%s", cr_ctx_errmsg(t->ctx));
        for (size_t o = 0; o < im->nout; o++)
            out[o] = cr_const(yv[o]);
        return CR_OK;
    }
    return cr__tape_fail(t, CR_EINVAL, "%s is zero-adjoint but has no primal to call", fn->name);
}

/* The rule q looks up (or cr_rrule's lookup) called at vals. */
static cr_status call_rrule(cr_tape *t, const cr__rrule2 *q, const cr_value *vals, cr_value *y,
                            cr_pullback *pb)
{
    cr_status st = q->rrule != NULL ? cr__rrule_with(t->config, t->arena, q->rrule, q->udata, q->f,
                                                     vals, q->nargs, y, pb)
                                    : cr_rrule(t->config, t->arena, q->f, vals, q->nargs, y, pb);
    return st == CR_NOTHING ? CR_ENORULE : st;
}

/* q's rrule called at vals, and the partials of its nd->nout results from its pullback (one
 * call per result): J[o * nargs + j], 0 for the constant arguments (nd->args). */
static cr_status rrule_partials(cr_tape *t, const cr__rrule2 *q, const cr_value *vals,
                                cr__gen_node *nd, double *J)
{
    cr_value y;
    cr_status st = call_rrule(t, q, vals, &y, &nd->pb);
    if (st != CR_OK)
        return st;
    double yv[CR__MAX_TUPLE];
    size_t k = 0;
    bool constant;
    st = cr__unpack_result(t->ctx, nd->fname, &y, yv, CR__MAX_TUPLE, &k, &constant);
    if (st == CR_OK && (constant || k != nd->nout))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s gives another kind of result at a nearby point",
                            nd->fname);
    return st != CR_OK ? st : generic_jacobian(t, nd, J);
}

/* A failure whose message (if any, for this status) is on the context: "name: message". */
static cr_status named_failure(cr_ctx *ctx, cr_status st, const char *name)
{
    char msg[CR_ERRMSG_SIZE];
    const char *m = cr_ctx_errmsg(ctx);
    snprintf(msg, sizeof msg, "%s",
             cr_ctx_errcode(ctx) == st && m[0] != '\0' ? m : cr_status_str(st));
    if (cr__names(msg, name))
        return cr_ctx_error(ctx, st, "%s", msg);
    return cr_ctx_error(ctx, st, "%s: %s", name, msg);
}

cr_status cr__rrule_second(cr_tape *t, cr__rrule2 *q)
{
    const char *name = q->f->u.func.fn->name;
    size_t nargs = q->nargs, k = 0;
    for (size_t j = 0; j < nargs; j++)
        if (q->args[j] != CR_VAR_CONST)
            q->slot[k++] = j;
    q->k = k;
    q->nres = 0;
    q->constant = false;
    cr__gen_node nd = {
        .nargs = (uint32_t)nargs, .args = (uint32_t *)(uintptr_t)q->args, .fname = name};
    cr_status st = call_rrule(t, q, q->vals, &q->y, &nd.pb);
    if (st != CR_OK)
        return named_failure(t->ctx, st, name);
    if ((st = cr__unpack_result(t->ctx, name, &q->y, q->yv, CR__MAX_TUPLE, &q->nres,
                                &q->constant)) != CR_OK ||
        (q->check != NULL && (st = q->check(q)) != CR_OK))
        return st;
    if (q->constant || k == 0)
        return CR_OK;
    size_t nres = q->nres, nj = nres * nargs;
    nd.nout = (uint32_t)nres;
    nd.tuple = nres > 1 ? cr__tuple_f64(nres) : NULL;
    double *J = cr_arena_alloc(t->arena, 3 * nj * sizeof *J, _Alignof(double));
    if (J == NULL)
        return named_failure(t->ctx, CR__ALLOC_STATUS(t->arena), name);
    double *Jp = J + nj, *Jm = Jp + nj;
    if ((st = generic_jacobian(t, &nd, J)) != CR_OK)
        return named_failure(t->ctx, st, name);
    for (size_t o = 0; o < nres; o++)
        for (size_t c = 0; c < k; c++)
            q->P[o * k + c] = J[o * nargs + q->slot[c]];
    cr_value xv[CR__MAX_GENERIC_ARGS];
    memcpy(xv, q->vals, nargs * sizeof *xv);
    for (size_t l = 0; l < k; l++) {
        size_t s = q->slot[l];
        double x = q->vals[s].u.f64, h = cr__fd_step(x);
        xv[s] = cr_value_f64(x + h);
        cr_status sp = rrule_partials(t, q, xv, &nd, Jp);
        xv[s] = cr_value_f64(x - h);
        cr_status sm = rrule_partials(t, q, xv, &nd, Jm);
        double hp = (x + h) - x, hm = x - (x - h); /* the steps actually taken */
        xv[s] = q->vals[s];
        if (sp == CR_ENOMEM || sp == CR_EARENA || sm == CR_ENOMEM || sm == CR_EARENA)
            return named_failure(t->ctx, sp == CR_ENOMEM || sp == CR_EARENA ? sp : sm, name);
        if (sp != CR_OK && sm != CR_OK)
            return cr_ctx_error(t->ctx, sp,
                                "%s: no second derivatives in argument %zu at %g: the rule fails "
                                "on both sides (%s)",
                                name, s + 1, x, cr_ctx_errmsg(t->ctx));
        for (size_t o = 0; o < nres; o++)
            for (size_t c = 0; c < k; c++) {
                size_t i = o * nargs + q->slot[c];
                q->H[(o * k + c) * k + l] = sp != CR_OK ? (J[i] - Jm[i]) / hm
                                            : sm != CR_OK
                                                ? (Jp[i] - J[i]) / hp
                                                : cr__fd_second(Jp[i], J[i], Jm[i], hp, hm);
            }
    }
    return CR_OK;
}

/* On a second-order tape: the nout check of the call at x (its environment). */
typedef struct nout_env {
    cr_tape *t;
    size_t nout;
    size_t *got;
} nout_env;

static cr_status second_nout(const cr__rrule2 *q)
{
    const nout_env *e = q->env;
    return cr__check_nout(e->t, q->f->u.func.fn->name, q->nres, e->nout, e->got);
}

/*
 * A rule kept as a pullback, on a second-order tape: each result becomes a general record
 * (emit_general) whose partials come from the pullback at x and whose second derivatives are
 * central differences of those partials, from the rrule called again at x ± h e_l for each
 * variable argument l (cr__rrule_second, which a prepared H·v replays too). The pullbacks
 * are not kept: the 2k + 1 calls' memory is rewound.
 */
static cr_status record_rrule_second(cr_tape *t, const cr_value *f, const cr_var *args,
                                     const cr_value *vals, size_t nargs, cr_var *out, size_t nout,
                                     size_t *got)
{
    uint32_t ai[CR__MAX_GENERIC_ARGS];
    for (size_t j = 0; j < nargs; j++)
        ai[j] = args[j].idx;
    /* At most nb results (the nout check and the tuples' size bound them). Their records'
     * room is taken first, so that writing them allocates nothing above the mark: the rule
     * calls' memory and the scratch (P, H, emit_general's) are given back after. */
    size_t k = cr__rrule2_vars(ai, nargs), nb = nout < CR__MAX_TUPLE ? nout : CR__MAX_TUPLE;
    size_t need = nb * cr__general_words(t, k);
    if (k > 0 && !cr__tape_room(t, need) && cr__tape_grow(t, need) != CR_OK)
        return t->status;
    nout_env e = {t, nout, got};
    cr__rrule2 q = {
        .f = f, .vals = vals, .nargs = nargs, .args = ai, .check = second_nout, .env = &e};
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    if (k > 0) {
        q.P = cr_arena_alloc(t->arena, (nb * k * (k + 1) + k * k) * sizeof *q.P, _Alignof(double));
        if (q.P == NULL)
            return cr__tape_fail(t, CR__ALLOC_STATUS(t->arena),
                                 "%s: no room for the second derivatives in %zu argument%s",
                                 f->u.func.fn->name, k, CR__S(k));
        q.H = q.P + nb * k;
    }
    cr_status st = cr__rrule_second(t, &q);
    if (st == CR_OK && !q.constant && k > 0) {
        uint32_t vi[CR__MAX_GENERIC_ARGS];
        for (size_t c = 0; c < k; c++)
            vi[c] = ai[q.slot[c]];
        for (size_t o = 0; o < q.nres; o++)
            out[o] =
                cr__emit_general(t, q.yv[o], k, vi, q.P + o * k, q.H + o * k * k, q.H + nb * k * k);
    }
    cr_arena_rewind(t->arena, mk);
    if (st != CR_OK)
        return t->status != CR_OK ? t->status : cr__tape_fail(t, st, "%s", cr_ctx_errmsg(t->ctx));
    if (q.constant || k == 0)
        for (size_t o = 0; o < q.nres; o++)
            out[o] = cr_const(q.yv[o]);
    return t->status;
}

/* Record f's rrule: the pullback is kept in a GENERIC record (on a second-order tape, its
 * partials and their differences: record_rrule_second). */
static cr_status record_rrule(cr_tape *t, const cr_value *f, const cr_var *args,
                              const cr_value *vals, size_t nargs, cr_var *out, size_t nout,
                              size_t *got)
{
    const cr_function *fn = f->u.func.fn;
    if (t->pre > 1) /* a replay tape: the rule is called again at each replay */
        return cr__replay_call(t, f, NULL, NULL, args, vals, nargs, out, nout, got, false);
    if (t->flags & CR_TAPE_SECOND_ORDER)
        return record_rrule_second(t, f, args, vals, nargs, out, nout, got);
    cr_value y;
    cr_pullback pb;
    cr_status st = cr_rrule(t->config, t->arena, f, vals, nargs, &y, &pb);
    if (st != CR_OK)
        return cr__tape_fail_ctx(t, st == CR_NOTHING ? CR_ENORULE : st, fn->name);
    double yv[CR__MAX_TUPLE];
    size_t k = 0;
    bool constant;
    if (unpack_result(t, fn->name, &y, yv, CR__MAX_TUPLE, &k, &constant) != CR_OK ||
        cr__check_nout(t, fn->name, k, nout, got) != CR_OK)
        return t->status;
    if (constant) {
        out[0] = cr_const(yv[0]);
        return CR_OK;
    }
    if (t->nvars + k + 1 >= CR_TAPE_MAX_VARS)
        return cr__tape_fail(t, CR_EOVERFLOW, "tape: more than %zu variable%s in one recording",
                             CR_TAPE_MAX_VARS - 1, CR__S(CR_TAPE_MAX_VARS - 1));
    cr__gen_node *node = cr_arena_alloc(t->arena, sizeof *node, _Alignof(cr__gen_node));
    uint32_t *ai = cr_arena_alloc(t->arena, (nargs ? nargs : 1) * sizeof *ai, _Alignof(uint32_t));
    if (node == NULL || ai == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), fn->name);
    for (size_t j = 0; j < nargs; j++)
        ai[j] = args[j].idx;
    node->pb = pb;
    node->nargs = (uint32_t)nargs;
    node->nout = (uint32_t)k;
    node->args = ai;
    node->tuple = k > 1 ? cr__tuple_f64(k) : NULL;
    node->fname = fn->name;
    if (!cr__tape_room(t, 2 + t->pre) && cr__tape_grow(t, 2 + t->pre) != CR_OK)
        return t->status;
    uint64_t h = hdr_make(K_GENERIC, (uint32_t)k, 0);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    (w++)->p = node;
    (w++)->u = h;
    t->cur = w;
    for (size_t o = 0; o < k; o++) {
        out[o].v = yv[o];
        out[o].idx = t->nvars++;
        out[o].tape = t->id;
    }
    return CR_OK;
}

static cr_status record_row(cr_tape *t, const char *fname, const cr_scalar_rule *row,
                            const cr_var *args, size_t nargs, cr_var *out, size_t nout, size_t *got)
{
    if (nargs != row->nin)
        return cr__tape_fail(t, CR_EINVAL, "%s takes %u argument%s, %zu given", fname,
                             (unsigned)row->nin, CR__S((unsigned)row->nin), nargs);
    if (cr__check_nout(t, fname, row->nout, nout, got) != CR_OK)
        return t->status;
    double x[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    for (size_t j = 0; j < nargs; j++)
        x[j] = args[j].v;
    row->f64(x, Y, D);
    return cr__record_evaluated(t, fname, row, args, x, Y, D, out);
}

static cr_status tape_call(cr_tape *t, const cr_value *f, const cr_var *args, size_t nargs,
                           cr_var *out, size_t nout, size_t *got);

cr_status cr__tape_call_any(cr_tape *t, const cr_value *f, const cr_var *args, size_t nargs,
                            cr_var *out, size_t nout, size_t *got)
{
    if ((t = cr__tape_or_current(t)) == NULL)
        return CR_EMISUSE;
    cr_status st = tape_call(t, f, args, nargs, out, nout, got);
    if (st != CR_OK || !t->check.finite)
        return st;
    /* The checking mode: the values of the arguments and of the results. */
    double x[CR__MAX_GENERIC_ARGS], y[CR__MAX_TUPLE];
    size_t ny = got != NULL ? *got : nout;
    for (size_t j = 0; j < nargs; j++)
        x[j] = args[j].v;
    for (size_t o = 0; o < ny && o < CR__MAX_TUPLE; o++)
        y[o] = out[o].v;
    st = cr__tape_check_finite(t, f->u.func.fn->name, x, nargs, y,
                               ny < CR__MAX_TUPLE ? ny : CR__MAX_TUPLE);
    for (size_t o = 0; o < nout && st != CR_OK; o++)
        out[o] = cr__nan_const();
    return st;
}

static cr_status tape_call(cr_tape *t, const cr_value *f, const cr_var *args, size_t nargs,
                           cr_var *out, size_t nout, size_t *got)
{
    for (size_t o = 0; o < nout && out != NULL; o++)
        out[o] = cr__nan_const();
    if (t->status != CR_OK)
        return t->status;
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL)
        return cr__tape_fail(t, CR_EINVAL, "cr_tape_call: f is not a function value");
    if ((nargs > 0 && args == NULL) || out == NULL || nout == 0)
        return cr__tape_fail(t, CR_EINVAL, "cr_tape_call(%s): NULL arguments or no results",
                             cr__fname(f));
    if (nargs > CR__MAX_GENERIC_ARGS)
        return cr__tape_fail(t, CR_EINVAL, "cr_tape_call(%s): more than %d argument%s",
                             cr__fname(f), CR__MAX_GENERIC_ARGS, CR__S(CR__MAX_GENERIC_ARGS));
    const cr_function *fn = f->u.func.fn;
    bool all_const = true;
    for (size_t j = 0; j < nargs; j++) {
        if (args[j].idx == CR_VAR_CONST)
            continue;
        all_const = false;
        if (!cr__var_ours(t, args[j])) {
            cr__tape_foreign(t, fn->name, args[j]);
            return t->status;
        }
    }
    const cr__impl *im = t->engine != NULL ? cr__engine_find(t->engine, fn) : NULL;
    /* A variadic function's row covers one count (hypot(x, y) of hypot(x...)): a call of
     * another count goes through the function's rules (a GENERIC record). */
    const cr_scalar_rule *row = cr__row_for(fn, nargs);
    /* Built-in rules only: a row is its own rule, no lookup needed. */
    if (row != NULL && t->config->registry == NULL && (im == NULL || im->kind != CR__IMPL_ZERO))
        return record_row(t, fn->name, row, args, nargs, out, nout, got);
    cr_value vals[CR__MAX_GENERIC_ARGS];
    for (size_t j = 0; j < nargs; j++)
        vals[j] = cr_value_f64(args[j].v);
    if ((im != NULL && im->kind == CR__IMPL_ZERO) || all_const)
        if (im != NULL || fn->primal != NULL || row != NULL)
            return call_constant(t, f, im, args, vals, nargs, out, nout, got);
    cr_rule_match m;
    cr_status st =
        cr_registry_lookup(t->config->registry, t->config, CR_MODE_RRULE, f, vals, nargs, &m);
    if (st == CR_EMISUSE) {
        char sig[256];
        cr__call_str(f, vals, nargs, sig, sizeof sig);
        return cr__tape_fail(t, CR_EMISUSE, "rrule for %s is ambiguous: several rules match", sig);
    }
    if (st == CR_OK && !m.opted_out && m.def != NULL) {
        if (row != NULL && m.def->udata == row)
            return record_row(t, fn->name, row, args, nargs, out, nout, got);
        if (m.def->rrule == cr__nondiff_rrule)
            return call_constant(t, f, im, args, vals, nargs, out, nout, got);
        if (m.def->rrule != NULL)
            return record_rrule(t, f, args, vals, nargs, out, nout, got);
    }
    if (im != NULL && im->kind == CR__IMPL_OVERLAY) {
        size_t k = im->nout;
        if (cr__check_nout(t, fn->name, k, nout, got) != CR_OK)
            return t->status;
        st = run_overlay(t, im, f, args, nargs, out, k);
        if (st != CR_OK && t->status == CR_OK)
            return cr__tape_fail(t, st, "%s (overlay) failed: %s", fn->name, cr_status_str(st));
        return t->status;
    }
    if (row != NULL) /* an opted-out row: the row itself is still the function */
        return record_row(t, fn->name, row, args, nargs, out, nout, got);
    if ((st = cr__variadic_args(t->arena, f, vals, nargs)) != CR_OK)
        return cr__tape_fail_ctx(t, st, fn->name);
    char sig[256];
    cr__call_str(f, vals, nargs, sig, sizeof sig);
    return cr__tape_fail(t, CR_ENORULE,
                         "no rrule for %s and no implementation to record (register a rule, "
                         "or an overlay with cr_engine_overlay())",
                         sig);
}

cr_status cr_tape_call(cr_tape *t, const cr_value *f, const cr_var *args, size_t nargs, cr_var *out,
                       size_t nout)
{
    return cr__tape_call_any(t, f, args, nargs, out, nout, NULL);
}

cr_var cr_tape_call1(cr_tape *t, const cr_value *f, const cr_var *args, size_t nargs)
{
    cr_var r = cr__nan_const();
    cr__tape_call_any(t, f, args, nargs, &r, 1, NULL);
    return r;
}

/* ---- Prepared replay --------------------------------------------------------------------- */

/* The context's message when it is about this failure (st), else st's description; copied
 * into buf, since the caller writes a new message. */
static const char *ctx_msg(cr_ctx *ctx, cr_status st, char *buf, size_t size)
{
    const char *msg = cr_ctx_errmsg(ctx);
    snprintf(buf, size, "%s",
             cr_ctx_errcode(ctx) == st && msg[0] != '\0' ? msg : cr_status_str(st));
    return buf;
}

void cr__prepared_resolve(cr_prepared *p, cr__rop *r, const cr_value *f, const cr_value *vals,
                          size_t nargs)
{
    cr_rule_match m;
    r->rule.rrule = NULL;
    r->rule.udata = NULL;
    /* The lookup cr_rrule() makes (the configuration's registry, or the built-ins). */
    if (cr_registry_lookup(NULL, p->tape->config, CR_MODE_RRULE, f, vals, nargs, &m) == CR_OK &&
        !m.opted_out && m.def != NULL && m.def->rrule != NULL) {
        r->rule.rrule = m.def->rrule;
        r->rule.udata = m.def->udata;
    }
}

/* ---- Evaluating the call ---------------------------------------------------------------- */

/* Evaluate g's call at its argument values (g->vals): through the rrule (rrule, udata: the
 * rule looked up when preparing, or NULL to look it up), the row or the primal. The result
 * in *y (CR_KIND_NOTHING for a row, whose values go to yv), a new pullback in *pb. Errors
 * on the context. */
static cr_status evaluate(cr_tape *t, const cr__greplay *g, cr_rrule_fn rrule, const void *udata,
                          cr_value *y, cr_pullback *pb, double *yv)
{
    size_t nargs = g->node.nargs;
    memset(y, 0, sizeof *y);
    y->kind = CR_KIND_NOTHING;
    *pb = (cr_pullback){NULL, NULL, NULL, 0};
    if (g->mode == CR__GREPLAY_RRULE) {
        cr_status st = rrule != NULL ? cr__rrule_with(t->config, t->arena, rrule, udata, &g->fv,
                                                      g->vals, nargs, y, pb)
                                     : cr_rrule(t->config, t->arena, &g->fv, g->vals, nargs, y, pb);
        return st == CR_NOTHING ? CR_ENORULE : st;
    }
    if (g->im != NULL)
        return cr__overlay_values(t, g->im, &g->fv, g->vals, nargs, yv);
    if (g->row != NULL) {
        double x[CR_SCALAR_MAX_IN], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
        for (size_t j = 0; j < nargs; j++)
            x[j] = g->vals[j].u.f64;
        g->row->f64(x, yv, D);
        return CR_OK;
    }
    return cr_function_call(t->arena, &g->fv, g->vals, nargs, y);
}

/* The value of an integer (or bool) result, exactly. */
static int64_t int_value(const cr_value *y)
{
    return y->kind == CR_KIND_BOOL ? (y->u.b ? 1 : 0) : y->u.i64;
}

/* ---- Recording -------------------------------------------------------------------------- */

cr_status cr__replay_call(cr_tape *t, const cr_value *f, const cr_scalar_rule *row,
                          const cr__impl *im, const cr_var *args, const cr_value *vals,
                          size_t nargs, cr_var *out, size_t nout, size_t *got, bool zero)
{
    const cr_function *fn = f->u.func.fn;
    /* Evaluated again through its row, its primal, or else its overlay run on constants. */
    if (!zero || row != NULL || fn->primal != NULL || im == NULL || im->impl == NULL)
        im = NULL;
    if (zero && row == NULL && fn->primal == NULL && im == NULL)
        return cr__tape_fail(t, CR_EUNIMPL,
                             "%s is zero-adjoint or non-differentiable with neither a row, a "
                             "primal nor an overlay: a prepared gradient cannot evaluate it "
                             "again",
                             fn->name);
    if (t->nvars + CR__MAX_TUPLE + 1 >= CR_TAPE_MAX_VARS)
        return cr__tape_fail(t, CR_EOVERFLOW, "tape: more than %zu variable%s in one recording",
                             CR_TAPE_MAX_VARS - 1, CR__S(CR_TAPE_MAX_VARS - 1));
    /* The arguments stay with the record: a replay writes the variables' new values into
     * them and calls the rule with them (rules may keep the list until their pullback runs). */
    cr__greplay *g = cr_arena_alloc(t->arena, sizeof *g, _Alignof(cr__greplay));
    cr_value *cv = cr_arena_alloc(t->arena, (nargs ? nargs : 1) * sizeof *cv, _Alignof(cr_value));
    uint32_t *ai = cr_arena_alloc(t->arena, (nargs ? nargs : 1) * sizeof *ai, _Alignof(uint32_t));
    if (g == NULL || cv == NULL || ai == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), fn->name);
    memset(g, 0, sizeof *g);
    for (size_t j = 0; j < nargs; j++) {
        cv[j] = vals[j];
        ai[j] = args[j].idx;
    }
    g->fv = *f;
    g->vals = cv;
    g->row = zero ? row : NULL;
    g->im = im;
    g->mode = zero ? CR__GREPLAY_PRIMAL : CR__GREPLAY_RRULE;
    g->node.nargs = (uint32_t)nargs;
    g->node.args = ai;
    g->node.fname = fn->name;
    double yv[CR__MAX_TUPLE > CR_SCALAR_MAX_OUT ? CR__MAX_TUPLE : CR_SCALAR_MAX_OUT];
    cr_pullback pb;
    cr_status st = evaluate(t, g, NULL, NULL, &g->y, &pb, yv);
    if (st != CR_OK)
        return cr__tape_fail_ctx(t, st, fn->name);
    size_t nres = 0; /* results; an integer result is one constant */
    bool constant = false;
    if (g->row != NULL)
        nres = g->row->nout;
    else if (g->im != NULL)
        nres = g->im->nout;
    else if ((st = cr__unpack_result(t->ctx, fn->name, &g->y, yv, CR__MAX_TUPLE, &nres,
                                     &constant)) != CR_OK)
        return cr__tape_fail(t, st, "%s", cr_ctx_errmsg(t->ctx));
    if (cr__check_nout(t, fn->name, nres, nout, got) != CR_OK)
        return t->status;
    size_t k = constant ? 0 : nres; /* the record's variables */
    g->node.pb = pb;
    g->node.nout = (uint32_t)k;
    g->node.tuple = k > 1 ? cr__tuple_f64(k) : NULL;
    /* The record: [header][g][g][header]. Its payload is the pullback node (g->node, the
     * first member); the replay information is g, read by the program's builder. */
    size_t need = 2 + t->pre;
    if ((size_t)(t->lim - t->cur) < need && cr__tape_grow(t, need) != CR_OK)
        return t->status;
    uint64_t h = hdr_make(K_GENERIC, (uint32_t)k, 0);
    cr__word *w = t->cur;
    (w++)->u = h;
    (w++)->cp = g;
    (w++)->p = &g->node;
    (w++)->u = h;
    t->cur = w;
    if (k == 0) {
        out[0] = cr_const(yv[0]);
        return CR_OK;
    }
    for (size_t o = 0; o < k; o++) {
        out[o].v = yv[o];
        out[o].idx = t->nvars++;
        out[o].tape = t->id;
    }
    return CR_OK;
}

/* ---- Replay ----------------------------------------------------------------------------- */

/* Whether two tuple types have the same number of fields of the same kinds. */
static bool same_tuple(const cr_type *a, const cr_type *b)
{
    if (a == b)
        return true;
    if (a == NULL || b == NULL || a->nfields != b->nfields)
        return false;
    for (size_t i = 0; i < a->nfields; i++)
        if (a->fields[i].kind != b->fields[i].kind)
            return false;
    return true;
}

/* The result y of g's call at new inputs, checked against the recorded one: its real values
 * into yv. */
static cr_status check_result(cr_prepared *p, const cr__greplay *g, const cr_value *y, double *yv)
{
    const char *fname = g->node.fname;
    const cr_value *yr = &g->y;
    if (y->kind != yr->kind ||
        (y->kind == CR_KIND_STRUCT && !same_tuple(y->u.obj.type, yr->u.obj.type))) {
        char now[64], then[64];
        snprintf(now, sizeof now, "%s",
                 y->kind == CR_KIND_STRUCT && y->u.obj.type != NULL ? y->u.obj.type->name
                                                                    : cr_kind_name(y->kind));
        snprintf(then, sizeof then, "%s",
                 yr->kind == CR_KIND_STRUCT ? yr->u.obj.type->name : cr_kind_name(yr->kind));
        return cr_ctx_error(p->ctx, CR_ESHAPE,
                            "prepared gradient: %s gives a %s at these inputs, a %s when "
                            "recorded; prepare it again",
                            fname, now, then);
    }
    size_t k;
    bool constant;
    cr_status st = cr__unpack_result(p->ctx, fname, y, yv, CR__MAX_TUPLE, &k, &constant);
    if (st != CR_OK || !constant)
        return st;
    int64_t ival = int_value(y), irec = int_value(yr);
    if (ival == irec)
        return CR_OK;
    return cr_ctx_error(p->ctx, CR_EDOMAIN,
                        "prepared gradient: %s is %lld at these inputs and was %lld when "
                        "recorded; the function may use it as a constant (an index): prepare "
                        "it again at these inputs",
                        fname, (long long)ival, (long long)irec);
}

/* The variable arguments' new values into the rule's argument list (the constants stay). */
static void load_args(cr__greplay *g, const double *v)
{
    const uint32_t *ai = g->node.args;
    for (size_t j = 0; j < g->node.nargs; j++)
        if (ai[j] != CR_VAR_CONST)
            g->vals[j] = cr_value_f64(v[ai[j]]);
}

/* The first-order replay's forward step (cr__node_kind.rerun): the call evaluated again at
 * the current values v, its results into v, a new pullback kept for the reverse step; a
 * result of another kind or structure than when recorded, an integer result that changed,
 * or a failing rule stop the replay (errors on the context). */
static cr_status generic_rerun(cr_prepared *p, const cr__rop *r, double *v)
{
    cr_tape *t = p->tape;
    cr__greplay *g = r->ptr;
    load_args(g, v);
    cr_value y;
    cr_pullback pb;
    char msg[256];
    double yv[CR__MAX_TUPLE > CR_SCALAR_MAX_OUT ? CR__MAX_TUPLE : CR_SCALAR_MAX_OUT];
    cr_status st = evaluate(t, g, r->rule.rrule, r->rule.udata, &y, &pb, yv);
    if (st != CR_OK)
        return cr_ctx_error(p->ctx, st, "prepared gradient: %s failed at these inputs: %s",
                            g->node.fname,
                            cr__after_name(ctx_msg(p->ctx, st, msg, sizeof msg), g->node.fname));
    if (g->row == NULL && g->im == NULL && (st = check_result(p, g, &y, yv)) != CR_OK)
        return st;
    for (size_t o = 0; o < r->nv; o++)
        v[r->res + o] = yv[o];
    g->node.pb = pb;
    return CR_OK;
}

/* Its reverse step (cr__node_kind.replay_pull): the pullback's cotangents added to adj. */
static cr_status generic_replay_pull(cr_prepared *p, const cr__rop *r, double *adj)
{
    const cr__greplay *g = r->ptr;
    if (g->mode != CR__GREPLAY_RRULE || r->nv == 0) /* no derivative flows through it */
        return CR_OK;
    cr_status st = generic_pull(p->tape, &g->node, &adj[r->res], adj);
    if (st == CR_OK)
        return CR_OK;
    char msg[256];
    return cr_ctx_error(p->ctx, st, "prepared gradient: pullback %s (of %s) failed: %s",
                        g->node.pb.name != NULL ? g->node.pb.name : "(unnamed)", g->node.fname,
                        cr__after_name(ctx_msg(p->ctx, st, msg, sizeof msg), g->node.fname));
}

/* ---- Second order (prepared H·v) ---------------------------------------------------------- */

/* The result at the new values checked against the recorded one (cr__rrule_second's check):
 * its failure has its whole message, which the caller keeps. */
typedef struct grerun2_env {
    cr_prepared *p;
    const cr__greplay *g;
    size_t nv; /* the results recorded, which g->so has room for */
    bool failed;
} grerun2_env;

static cr_status grerun2_check(const cr__rrule2 *q)
{
    grerun2_env *e = q->env;
    double yv[CR__MAX_TUPLE];
    cr_status st = check_result(e->p, e->g, &q->y, yv);
    if (st == CR_OK && q->nres != e->nv) /* the same kind of result gives as many */
        st = cr_ctx_error(e->p->ctx, CR_ESHAPE,
                          "prepared Hessian-vector product: %s gives %zu result%s at these "
                          "inputs, %zu when recorded; prepare it again",
                          e->g->node.fname, q->nres, CR__S(q->nres), e->nv);
    e->failed = st != CR_OK;
    return st;
}

/* A GENERIC instruction of RRULE mode with results, forwards, in a prepared H·v: its rule
 * called again at the current values v as a second-order tape records it (cr__rrule_second:
 * the partials from the pullback, their central differences from the rule at x ± h), the
 * results into v and their tangents along the direction into vd (tangents of the variables
 * in vd), the partials and second derivatives into g->so for the reverse pass. The rules'
 * memory is given back before it returns. Errors as generic_rerun's (on the context). */
static cr_status grerun2(cr_prepared *p, const cr__rop *r, double *v, double *vd)
{
    cr_tape *t = p->tape;
    cr__greplay *g = r->ptr;
    const uint32_t *ai = g->node.args;
    load_args(g, v);
    /* The partials and second derivatives go straight into g->so (nv k partials, then nv
     * k^2 second derivatives: so_size in prepared_hvp.c). */
    size_t k = cr__rrule2_vars(ai, g->node.nargs), nv = r->nv;
    grerun2_env e = {p, g, nv, false};
    cr__rrule2 q = {.f = &g->fv,
                    .rrule = r->rule.rrule,
                    .udata = r->rule.udata,
                    .vals = g->vals,
                    .nargs = g->node.nargs,
                    .args = ai,
                    .check = grerun2_check,
                    .env = &e,
                    .P = g->so,
                    .H = g->so + nv * k};
    /* The 2k + 1 calls' memory (results, pullbacks, the partials' scratch) goes back. */
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    cr_status st = cr__rrule_second(t, &q);
    cr_arena_rewind(t->arena, mk);
    if (st != CR_OK) {
        if (e.failed)
            return st;
        char msg[256];
        return cr_ctx_error(p->ctx, st, "prepared Hessian-vector product at these inputs: %s",
                            ctx_msg(p->ctx, st, msg, sizeof msg));
    }
    for (size_t o = 0; o < nv; o++) {
        double td = 0.0, *Ho = q.H + o * k * k;
        for (size_t c = 0; c < k; c++) {
            td += q.P[o * k + c] * vd[ai[q.slot[c]]];
            /* symmetrised, as a second-order tape keeps it */
            for (size_t l = c + 1; l < k; l++)
                Ho[c * k + l] = Ho[l * k + c] = 0.5 * (Ho[c * k + l] + Ho[l * k + c]);
        }
        v[r->res + o] = q.yv[o];
        vd[r->res + o] = td;
    }
    return CR_OK;
}

/* The H·v replay's forward step (cr__node_kind.rerun2): a rule kept as a pullback gives its
 * partials and Hessian (grerun2); a call evaluated through its primal (or its rule, for a
 * constant result) passes no derivative, and its results' tangents are zero. */
static cr_status generic_rerun2(cr_prepared *p, const cr__rop *r, double *v, double *vd, bool last)
{
    (void)last;
    const cr__greplay *g = r->ptr;
    if (g->so != NULL)
        return grerun2(p, r, v, vd);
    cr_status st = generic_rerun(p, r, v);
    if (st != CR_OK)
        return st;
    for (size_t o = 0; o < r->nv; o++)
        vd[r->res + o] = 0.0;
    return CR_OK;
}

/* The H·v replay's reverse step (cr__node_kind.replay_pull2): the partials and second
 * derivatives of this evaluation (grerun2), per result o and variable argument q. */
static cr_status generic_replay_pull2(cr_prepared *p, const cr__rop *r, double *adj, double *adjd,
                                      const double *vd)
{
    (void)p;
    const cr__greplay *g = r->ptr;
    if (g->so == NULL) /* no derivative */
        return CR_OK;
    uint32_t a[CR__MAX_GENERIC_ARGS];
    size_t k = 0, nres = r->nv;
    for (size_t j = 0; j < g->node.nargs; j++)
        if (g->node.args[j] != CR_VAR_CONST)
            a[k++] = g->node.args[j];
    const double *P = g->so, *H = P + nres * k;
    for (size_t o = 0; o < nres; o++) {
        double gy = adj[r->res + o], gyd = adjd[r->res + o];
        for (size_t q = 0; q < k; q++) {
            double hd = 0.0;
            for (size_t l = 0; l < k; l++)
                hd += H[(o * k + q) * k + l] * vd[a[l]];
            adj[a[q]] += P[o * k + q] * gy;
            adjd[a[q]] += P[o * k + q] * gyd + gy * hd;
        }
    }
    return CR_OK;
}

const cr__node_kind cr__generic_kind = {
    generic_reverse,     generic_forward, generic_second,       generic_rerun,
    generic_replay_pull, generic_rerun2,  generic_replay_pull2, NULL};

/* ---- Named operations of the rows of three inputs or two results (tape_ops.h) ------------- */

/* The rows of one and two inputs and one result are tape.c's (the scalar records' paths). */
#define OP_1_1(OP, NAME)
#define OP_2_1(OP, NAME)
#define OP_3_1(OP, NAME)                                 \
    cr_var OP(cr_tape *t, cr_var x, cr_var y, cr_var z)  \
    {                                                    \
        cr_var args[3] = {x, y, z};                      \
        return cr_tape_call1(t, &cr_fn_##NAME, args, 3); \
    }
#define OP_1_2(OP, NAME)                                      \
    cr_status OP(cr_tape *t, cr_var x, cr_var *out)           \
    {                                                         \
        if (out != NULL)                                      \
            out[0] = out[1] = cr__nan_const();                \
        return cr_tape_call(t, &cr_fn_##NAME, &x, 1, out, 2); \
    }
CR_TAPE_SCALAR_OPS(CR__DEFINE_TAPE_OP)
#undef OP_1_2
#undef OP_3_1
#undef OP_2_1
#undef OP_1_1
