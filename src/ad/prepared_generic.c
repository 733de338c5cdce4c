/*
 * Prepared gradients of scalar functions kept as pullbacks (GENERIC records): on a replay
 * tape cr_tape_call() records, with the pullback, the function and its arguments, and each
 * replay calls the function's rrule again at the new values (the rules define the
 * derivatives; the new pullback is the derivative at the new point) in the tape's arena
 * above the mark taken after recording. Zero-adjoint and non-differentiable functions of
 * variables are evaluated again through their primal, with no derivative. Also the lookup,
 * once when preparing, of the rrule that array and GENERIC instructions call at each replay.
 */
#include <stdio.h>
#include <string.h>

#include "prepared_impl.h"

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

cr_status cr__prepared_grerun(cr_prepared *p, const cr__rop *r, double *v)
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

cr_status cr__prepared_gpull(cr_prepared *p, const cr__rop *r, double *adj)
{
    const cr__greplay *g = r->ptr;
    if (g->mode != CR__GREPLAY_RRULE || r->nv == 0) /* no derivative flows through it */
        return CR_OK;
    cr_status st = cr__generic_pull(p->tape, &g->node, &adj[r->res], adj);
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

cr_status cr__prepared_grerun2(cr_prepared *p, const cr__rop *r, double *v, double *vd)
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
