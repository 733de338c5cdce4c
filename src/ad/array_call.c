/*
 * The array call node (K_ARRAY records of array functions), all its phases in one file.
 * Recording: an array function is recorded through its rrule (the array and linear-algebra
 * rule families): the tape keeps the pullback in a K_ARRAY record. Reverse: each array
 * variable has a shadow, the cotangent accumulated so far (cr__aslot.acc, array_slots.c),
 * which pullbacks add into with add!! (cr_tangent_accum): in place once the shadow is a
 * buffer the sweep owns, through the add! of an InplaceableThunk without materialising it,
 * and by adopting the first cotangent when the rule hands over a fresh buffer. Scalar
 * variables flow in and out of array functions through the same records, so one tape holds
 * scalar and array code.
 * Forward: each record's result tangent comes from the function's frule, called on the
 * recorded arguments with their tangents. Second order (forward-over-reverse): each record's
 * arguments get x̄ += pullback(ȳ) and x̄̇ += pullback(ȳ̇) + S, where S, the derivative of the
 * pullback along the tangents ẋ applied to ȳ, comes from the rule the call dispatched to
 * (cr_rule_def.linearity and .form, docs/second-order-forms.md): zero for linear and
 * piecewise-linear functions, calls of the same rrule at tangents for multilinear ones, and
 * the rule's form otherwise, run here once per direction.
 * Replay: a prepared gradient calls the rrule again at the new values (call_rerun). The sweeps
 * (sweep.c) and the prepared replays reach the four steps through the node's ops (k_call_ops).
 * Also the gradient, vjp, jvp and hvp entry points of tapes with array variables.
 */
#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <chainrules/project.h>
#include <chainrules/rules_array.h>
#include <chainrules/rules_complex.h>
#include <chainrules/rules_linalg.h>
#include <chainrules/rules_math.h>

#include "../rules/array_rule_impl.h"
#include "prepared_impl.h"

#define MAX_ARGS 16

/* The steps of an array call's record (end of the file). */
static const cr__anode_ops k_call_ops;

/* Scalar variables whose adjoints a sweep keeps on the stack. */
#define SMALL_WS 64

/* The value of an argument (any kind; arg_of checks it). */
static cr_value targ_value(const cr_targ *a)
{
    return a->kind == CR_TARG_VAR   ? cr_value_f64(a->u.s.v)
           : a->kind == CR_TARG_ARR ? cr_value_array((cr_array *)(uintptr_t)a->u.a.a)
                                    : a->u.v;
}

/* The value of an argument, and its encoding in a K_ARRAY record. */
static cr_status arg_of(cr_tape *t, const char *fname, const cr_targ *a, size_t j, cr_value *v,
                        uint32_t *code)
{
    *v = targ_value(a);
    switch (a->kind) {
    case CR_TARG_VAR:
        *code = a->u.s.idx;
        if (a->u.s.idx != CR_VAR_CONST && (a->u.s.tape != t->id || a->u.s.idx >= t->nvars))
            return cr__tape_fail(t, CR_ETAPE,
                                 "%s: argument %zu (variable %u) belongs to another tape, or to "
                                 "this tape before its last reset",
                                 fname, j, (unsigned)a->u.s.idx);
        return CR_OK;
    case CR_TARG_ARR:
        if (a->u.a.a == NULL)
            return cr__tape_fail(t, CR_EINVAL, "%s: argument %zu is a NULL array", fname, j);
        if (a->u.a.idx == CR_VAR_CONST) {
            *code = CR_VAR_CONST;
            return CR_OK;
        }
        if (a->u.a.tape != t->id || a->u.a.idx >= t->avars.n)
            return cr__tape_fail(t, CR_ETAPE,
                                 "%s: argument %zu (array variable %u) belongs to another tape, "
                                 "or to this tape before its last reset",
                                 fname, j, (unsigned)a->u.a.idx);
        *code = a->u.a.idx | CR__ASLOT_BIT;
        return CR_OK;
    case CR_TARG_VALUE:
        *code = CR_VAR_CONST;
        return CR_OK;
    }
    return cr__tape_fail(t, CR_EINVAL, "%s: argument %zu has an unknown kind %d", fname, j,
                         (int)a->kind);
}

static void set_nan(cr_targ *out)
{
    if (out != NULL)
        *out = cr__targ_var(cr_const((double)NAN));
}

/* The result of a call: a scalar or array constant, or a new variable (is_var). */
static cr_status result_of(cr_tape *t, const char *fname, const cr_value *y, cr_targ *out,
                           bool is_var, uint32_t *aslot)
{
    switch (y->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32: {
        double v = y->kind == CR_KIND_F64 ? y->u.f64 : (double)y->u.f32;
        cr_var r = cr_const(v);
        if (is_var) {
            r.idx = t->nvars;
            r.tape = t->id;
        }
        *out = cr__targ_var(r);
        *aslot = CR_VAR_CONST;
        return CR_OK;
    }
    case CR_KIND_ARRAY:
        if (y->u.arr != NULL && cr_dtype_is_float((cr_dtype)y->u.arr->dtype)) {
            cr_avar r = cr_av_const(y->u.arr);
            if (is_var) {
                uint32_t idx;
                if (cr__new_aslot(t, y->u.arr, false, &idx) != CR_OK)
                    return t->status;
                r.idx = idx;
                r.tape = t->id;
                *aslot = idx;
            }
            *out = cr__targ_arr(r);
            return CR_OK;
        }
        break;
    default:
        break;
    }
    return cr__tape_fail(t, CR_EUNIMPL,
                         "%s returns a %s: the tape records functions with a float scalar or "
                         "float array result",
                         fname,
                         y->kind == CR_KIND_ARRAY && y->u.arr != NULL
                             ? cr_dtype_name((cr_dtype)y->u.arr->dtype)
                             : cr_kind_name(y->kind));
}

/* The elements of a tuple result y: each float scalar a new scalar variable, each float
 * array a new array variable (or constants when !is_var), each integer scalar or array a
 * constant value; outs[k] encodes them as cr__anode.outs does; *ns counts the scalar
 * variables. */
static cr_status tuple_of(cr_tape *t, const char *fname, const cr_value *y, cr_targ *out,
                          size_t nout, bool is_var, uint32_t *outs, uint32_t *ns)
{
    const cr_type *ty = y->u.obj.type;
    size_t nf = ty != NULL ? ty->nfields : 0;
    if (nout != nf)
        return cr__tape_fail(t, CR_EINVAL,
                             "%s returns a tuple of %zu element%s, %zu result%s expected "
                             "(cr_tape_acall_n gives one per element)",
                             fname, nf, CR__S(nf), nout, CR__S(nout));
    uint32_t slot0 = t->avars.n;
    *ns = 0;
    for (size_t k = 0; k < nf; k++) {
        cr_value e;
        if (cr_type_field_value(ty, y->u.obj.ptr, k, &e) != CR_OK)
            e.kind = CR_KIND_NOTHING;
        bool ok = true;
        switch (e.kind) {
        case CR_KIND_F64:
        case CR_KIND_F32: {
            cr_var r = cr_const(e.kind == CR_KIND_F64 ? e.u.f64 : (double)e.u.f32);
            if (is_var) {
                r.idx = t->nvars + *ns;
                r.tape = t->id;
                outs[k] = (*ns)++;
            }
            out[k] = cr__targ_var(r);
            break;
        }
        case CR_KIND_ARRAY:
            if (e.u.arr != NULL && cr_dtype_is_float((cr_dtype)e.u.arr->dtype)) {
                cr_avar r = cr_av_const(e.u.arr);
                if (is_var) {
                    uint32_t idx;
                    if (cr__new_aslot(t, e.u.arr, false, &idx) != CR_OK) {
                        t->avars.n = slot0;
                        return t->status;
                    }
                    r.idx = idx;
                    r.tape = t->id;
                    outs[k] = idx | CR__ASLOT_BIT;
                }
                out[k] = cr__targ_arr(r);
            } else {
                out[k] = cr__targ_value(e); /* integer indices or pivots: constants */
                outs[k] = CR_VAR_CONST;
            }
            break;
        case CR_KIND_I64:
        case CR_KIND_I32:
        case CR_KIND_BOOL:
            out[k] = cr__targ_value(e);
            outs[k] = CR_VAR_CONST;
            break;
        default:
            ok = false;
            break;
        }
        if (!ok) {
            t->avars.n = slot0;
            return cr__tape_fail(t, CR_EUNIMPL,
                                 "%s returns a tuple whose element %zu is a %s: the tape records "
                                 "float scalars and arrays and integer constants",
                                 fname, k, cr_kind_name(e.kind));
        }
    }
    return CR_OK;
}

/* Whether every argument is an array (map takes arrays only: its rule refuses scalars). */
static bool arrays_only(const cr_targ *args, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (args[j].kind != CR_TARG_ARR)
            return false;
    return true;
}

/* Whether the tape's rules take f(args...) with the built-in rule: the kernels of
 * cr__kernel_broadcast and cr__kernel_sum stand in for the built-in broadcast, map, sum and
 * dot only. A user registry's own rule (or opt-out) for the call, reverse or, on tapes with forward
 * sweeps, forward, takes it through the generic path. */
static bool builtin_rule(const cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs)
{
    const cr_registry *reg = t->config != NULL ? t->config->registry : NULL;
    if (reg == NULL)
        return true;
    const cr_registry *builtin = cr_registry_builtin();
    if (reg == builtin)
        return true;
    cr_value v[MAX_ARGS];
    for (size_t j = 0; j < nargs; j++)
        v[j] = targ_value(&args[j]);
    int nmodes = (t->flags & (CR_TAPE_FORWARD | CR_TAPE_SECOND_ORDER)) ? 2 : 1;
    for (int i = 0; i < nmodes; i++) {
        cr_rule_mode mode = i == 0 ? CR_MODE_RRULE : CR_MODE_FRULE;
        cr_rule_match mine, theirs;
        if (cr_registry_lookup(reg, t->config, mode, f, v, nargs, &mine) != CR_OK ||
            cr_registry_lookup(builtin, t->config, mode, f, v, nargs, &theirs) != CR_OK ||
            mine.opted_out || mine.def != theirs.def)
            return false;
    }
    return true;
}

/* The checking mode over the results of a tuple (cr__tape_check_finite_values). */
static cr_status check_tuple(cr_tape *t, const char *fname, const cr_value *vals, size_t nargs,
                             const cr_targ *res, size_t nout)
{
    cr_value outv[CR_TAPE_MAX_TUPLE];
    for (size_t k = 0; k < nout && k < CR_TAPE_MAX_TUPLE; k++)
        outv[k] = res[k].kind == CR_TARG_VAR   ? cr_value_f64(res[k].u.s.v)
                  : res[k].kind == CR_TARG_ARR ? cr_value_array((cr_array *)res[k].u.a.a)
                                               : res[k].u.v;
    return cr__tape_check_finite_values(t, fname, vals, nargs, outv,
                                        nout < CR_TAPE_MAX_TUPLE ? nout : CR_TAPE_MAX_TUPLE);
}

/* cr_tape_acall() and cr_tape_acall_n(): nout results (nout > 1 for a tuple). */
static cr_status acall_any(cr_tape *t, const char *who, const cr_value *f, const cr_targ *args,
                           size_t nargs, cr_targ *out, size_t nout)
{
    for (size_t k = 0; out != NULL && k < nout; k++)
        set_nan(&out[k]);
    if ((t = cr__tape_or_current(t)) == NULL)
        return CR_EMISUSE;
    if (t->status != CR_OK)
        return t->status;
    if (f == NULL || f->kind != CR_KIND_FUNC || f->u.func.fn == NULL || out == NULL || nout == 0 ||
        (nargs > 0 && args == NULL))
        return cr__tape_fail(t, CR_EINVAL, "%s: NULL or non-function argument, or no results", who);
    /* An array with elements and no data (a constant: inputs are checked when made) is
     * refused before a kernel or a rule reads it. */
    for (size_t j = 0; j < nargs; j++)
        if (args[j].kind == CR_TARG_ARR && args[j].u.a.a != NULL && args[j].u.a.a->data == NULL &&
            cr_array_numel(args[j].u.a.a) > 0)
            return cr__tape_fail(t, CR_EINVAL,
                                 "%s: argument %zu is an array of %zu element%s "
                                 "with NULL data",
                                 f->u.func.fn->name, j, cr_array_numel(args[j].u.a.a),
                                 CR__S(cr_array_numel(args[j].u.a.a)));
    /* Broadcasts and maps of scalar functions, sums and dot products over f64 arrays: fused
     * kernels (no rule, no pullback, no tangent values). */
    if (nout == 1 && nargs >= 2 && nargs <= MAX_ARGS && !t->check.finite &&
        (f->u.func.fn == cr_fn_broadcast.u.func.fn ||
         (f->u.func.fn == cr_fn_map.u.func.fn && arrays_only(args + 1, nargs - 1))) &&
        args[0].kind == CR_TARG_VALUE && args[0].u.v.kind == CR_KIND_FUNC &&
        builtin_rule(t, f, args, nargs)) {
        cr_status st = cr__kernel_broadcast(t, f->u.func.fn->name, args[0].u.v.u.func.fn, args + 1,
                                            nargs - 1, out);
        if (st != CR_NOTHING)
            return st;
    } else if (nout == 1 && !t->check.finite &&
               ((nargs == 1 && f->u.func.fn == cr_fn_sum.u.func.fn) ||
                (nargs == 2 && f->u.func.fn == cr_fn_dot.u.func.fn)) &&
               builtin_rule(t, f, args, nargs)) {
        cr_status st = cr__kernel_sum(t, args, nargs, out);
        if (st != CR_NOTHING)
            return st;
    }
    const char *fname = f->u.func.fn->name;
    if (nargs > MAX_ARGS)
        return cr__tape_fail(t, CR_EINVAL, "%s: more than %d argument%s", fname, MAX_ARGS,
                             CR__S(MAX_ARGS));
    /* Rules may keep the argument list itself (not only the arrays) until their pullback
     * runs, as Julia's closures capture their arguments: it lives in the tape's arena. */
    cr_value *vals =
        cr_arena_alloc(t->arena, (nargs ? nargs : 1) * sizeof *vals, _Alignof(cr_value));
    if (vals == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), fname);
    uint32_t codes[MAX_ARGS];
    bool any = false;
    for (size_t j = 0; j < nargs; j++) {
        if (arg_of(t, fname, &args[j], j, &vals[j], &codes[j]) != CR_OK)
            return t->status;
        any |= codes[j] != CR_VAR_CONST;
    }
    cr_value y;
    uint32_t aslot = CR_VAR_CONST, ns = 0;
    uint32_t outs[CR_TAPE_MAX_TUPLE];
    if (nout > CR_TAPE_MAX_TUPLE)
        return cr__tape_fail(t, CR_EINVAL, "%s: more than %d result%s", fname, CR_TAPE_MAX_TUPLE,
                             CR__S(CR_TAPE_MAX_TUPLE));
    if (!any) { /* nothing to differentiate: the primal */
        cr_status st = cr_function_call(t->arena, f, vals, nargs, &y);
        if (st != CR_OK)
            return cr__tape_fail_ctx(t, st, fname);
        if (t->check.finite && cr__tape_check_finite_values(t, fname, vals, nargs, &y, 1) != CR_OK)
            return t->status;
        if (y.kind == CR_KIND_STRUCT) {
            st = tuple_of(t, fname, &y, out, nout, false, outs, &ns);
            if (st == CR_OK && t->check.finite)
                st = check_tuple(t, fname, vals, nargs, out, nout);
        } else if (nout != 1)
            st = cr__tape_fail(t, CR_EINVAL, "%s returns one value, %zu result%s expected", fname,
                               nout, CR__S(nout));
        else
            st = result_of(t, fname, &y, out, false, &aslot);
        return st == CR_OK ? CR_OK : t->status;
    }
    /* Forward and second-order tapes keep what their sweeps need (array_call.c). */
    const cr__aext *ext = NULL;
    if ((t->flags & CR_TAPE_FORWARD) && cr__array_ext(t, f, vals, codes, nargs, &ext) != CR_OK)
        return t->status;
    if (t->nvars + nout + 1 >= CR_TAPE_MAX_VARS)
        return cr__tape_fail(t, CR_EOVERFLOW, "tape: more than %zu variable%s in one recording",
                             CR_TAPE_MAX_VARS - 1, CR__S(CR_TAPE_MAX_VARS - 1));
    cr_pullback pb;
    cr_status st = cr_rrule(t->config, t->arena, f, vals, nargs, &y, &pb);
    if (st == CR_NOTHING) {
        char sig[256];
        cr__call_str(f, vals, nargs, sig, sizeof sig);
        return cr__tape_fail(t, CR_ENORULE, "no rrule for %s", sig);
    }
    if (st != CR_OK)
        return cr__tape_fail_ctx(t, st, fname);
    if (t->check.finite && cr__tape_check_finite_values(t, fname, vals, nargs, &y, 1) != CR_OK)
        return t->status;
    cr_targ res[CR_TAPE_MAX_TUPLE];
    uint32_t slot0 = t->avars.n;
    bool tuple = y.kind == CR_KIND_STRUCT;
    if (tuple) {
        if (tuple_of(t, fname, &y, res, nout, true, outs, &ns) != CR_OK ||
            (t->check.finite && check_tuple(t, fname, vals, nargs, res, nout) != CR_OK)) {
            t->avars.n = slot0;
            return t->status;
        }
    } else if (nout != 1) {
        return cr__tape_fail(t, CR_EINVAL, "%s returns one value, %zu result%s expected", fname,
                             nout, CR__S(nout));
    } else {
        if (result_of(t, fname, &y, res, true, &aslot) != CR_OK)
            return t->status;
        ns = aslot == CR_VAR_CONST ? 1u : 0u;
    }
    cr__anode *nd = cr_arena_alloc(t->arena, sizeof *nd, _Alignof(cr__anode));
    uint32_t *ai = cr_arena_alloc(t->arena, (nargs + nout) * sizeof *ai, _Alignof(uint32_t));
    size_t need = 2 + t->pre;
    if (nd == NULL || ai == NULL ||
        ((size_t)(t->lim - t->cur) < need && cr__tape_grow(t, need) != CR_OK)) {
        t->avars.n = slot0;
        return nd == NULL || ai == NULL ? cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), fname)
                                        : t->status;
    }
    memcpy(ai, codes, nargs * sizeof *ai);
    memcpy(ai + nargs, outs, (tuple ? nout : 0) * sizeof *ai);
    nd->pb = pb;
    nd->ops = &k_call_ops;
    nd->fname = fname;
    nd->nargs = (uint32_t)nargs;
    nd->out = aslot;
    nd->args = ai;
    nd->nout = tuple ? (uint32_t)nout : 0;
    nd->outs = tuple ? ai + nargs : NULL;
    nd->fv = *f;
    nd->vals = vals;
    nd->y = y;
    nd->ext = ext;
    uint64_t h = hdr_make(K_ARRAY, ns, 0);
    cr__word *w = t->cur;
    if (t->pre)
        (w++)->u = h;
    if (t->pre > 1)
        (w++)->cp = NULL; /* a replay tape's information: the node itself (prepared.c) */
    (w++)->cp = nd;
    (w++)->u = h;
    t->cur = w;
    t->nvars += ns;
    memcpy(out, res, nout * sizeof *out);
    return CR_OK;
}

cr_status cr_tape_acall(cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs,
                        cr_targ *out)
{
    return acall_any(t, "cr_tape_acall", f, args, nargs, out, 1);
}

cr_status cr_tape_acall_n(cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs,
                          cr_targ *out, size_t nout)
{
    return acall_any(t, "cr_tape_acall_n", f, args, nargs, out, nout);
}

cr_avar cr_tape_acall_a(cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs)
{
    cr_targ r;
    if (cr_tape_acall(t, f, args, nargs, &r) != CR_OK)
        return cr__bad_avar(NULL);
    if (r.kind != CR_TARG_ARR) {
        cr__tape_fail(cr__tape_or_current(t), CR_EINVAL, "%s gives a scalar, an array was expected",
                      f->u.func.fn->name);
        return cr__bad_avar(NULL);
    }
    return r.u.a;
}

cr_var cr_tape_acall_s(cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs)
{
    cr_targ r;
    if (cr_tape_acall(t, f, args, nargs, &r) != CR_OK)
        return cr_const((double)NAN);
    if (r.kind != CR_TARG_VAR) {
        cr__tape_fail(cr__tape_or_current(t), CR_EINVAL, "%s gives an array, a scalar was expected",
                      f->u.func.fn->name);
        return cr_const((double)NAN);
    }
    return r.u.s;
}

cr_avar cr_av_broadcast1(cr_tape *t, const cr_value *f, cr_targ x)
{
    cr_targ a[2] = {cr__targ_value(*f), x};
    return cr_tape_acall_a(t, &cr_fn_broadcast, a, 2);
}

cr_avar cr_av_broadcast2(cr_tape *t, const cr_value *f, cr_targ x, cr_targ y)
{
    cr_targ a[3] = {cr__targ_value(*f), x, y};
    return cr_tape_acall_a(t, &cr_fn_broadcast, a, 3);
}

cr_var cr_av_sum(cr_tape *t, cr_avar x)
{
    cr_targ a = cr__targ_arr(x);
    return cr_tape_acall_s(t, &cr_fn_sum, &a, 1);
}

cr_var cr_av_dot(cr_tape *t, cr_avar x, cr_avar y)
{
    cr_targ a[2] = {cr__targ_arr(x), cr__targ_arr(y)};
    return cr_tape_acall_s(t, &cr_fn_dot, a, 2);
}

cr_avar cr_av_slice(cr_tape *t, cr_avar x, int64_t start, int64_t stop)
{
    cr_range *r;
    cr_tape *tt = cr__tape_or_current(t);
    if (tt == NULL)
        return cr__bad_avar(NULL);
    if (tt->status != CR_OK)
        return cr__bad_avar(NULL);
    if ((r = cr_arena_alloc(tt->arena, sizeof *r, _Alignof(cr_range))) == NULL) {
        cr__tape_fail_ctx(tt, CR__ALLOC_STATUS(tt->arena), "cr_av_slice");
        return cr__bad_avar(NULL);
    }
    r->start = start;
    r->stop = stop;
    r->step = 1;
    cr_targ a[2] = {cr__targ_arr(x), cr__targ_value(cr_value_struct(&cr_range_type, r))};
    return cr_tape_acall_a(tt, &cr_fn_view, a, 2);
}

cr_avar cr_av_matmul(cr_tape *t, cr_avar A, cr_avar B)
{
    cr_targ a[2] = {cr__targ_arr(A), cr__targ_arr(B)};
    return cr_tape_acall_a(t, &cr_fn_matmul, a, 2);
}

/* ---- The reverse step ------------------------------------------------------------------- */

static cr_status pull_failed(cr_tape *t, const cr__anode *nd, cr_status st)
{
    const char *msg = cr_ctx_errmsg(t->ctx);
    return cr__tape_fail(t, st, "pullback %s (of %s) failed: %s", nd->pb.name, nd->fname,
                         msg[0] != '\0' ? cr__after_name(msg, nd->fname) : cr_status_str(st));
}

cr_status cr__tuple_cot(cr_tape *t, const cr__anode *nd, const double *g, size_t gs,
                        cr_tangent *accd, size_t k, size_t d, cr_tangent *dy, bool *zero)
{
    cr_tangent f[CR_TAPE_MAX_TUPLE];
    *zero = true;
    for (size_t o = 0; o < nd->nout; o++) {
        uint32_t c = nd->outs[o];
        if (c == CR_VAR_CONST) {
            f[o] = cr_tangent_none();
            continue;
        }
        if (c & CR__ASLOT_BIT) {
            size_t s = c & ~CR__ASLOT_BIT;
            if (accd == NULL) {
                f[o] = t->avars.slots[s].acc;
            } else {
                f[o] = accd[s * k + d];
                accd[s * k + d] = cr__tzero(); /* consumed */
            }
        } else {
            double v = g[(size_t)c * gs];
            f[o] = v == 0.0 ? cr__tzero() : cr_tangent_f64(v);
        }
        if (!cr__tis_zero(f[o]))
            *zero = false;
    }
    if (*zero)
        return CR_OK;
    return cr_tangent_struct(t->arena, nd->y.u.obj.type, NULL, f, nd->nout, dy);
}

static cr_status call_pull(cr_tape *t, const cr__anode *nd, const double *g, double *adj)
{
    cr_arena *arena = t->arena;
    cr_tangent dy;
    if (nd->nout > 0) {
        bool zero;
        cr_status st = cr__tuple_cot(t, nd, g, 1, NULL, 0, 0, &dy, &zero);
        if (st != CR_OK)
            return pull_failed(t, nd, st);
        if (zero)
            return CR_OK;
    } else if (g != NULL) {
        if (*g == 0.0)
            return CR_OK;
        dy = cr_tangent_f64(*g);
    } else {
        dy = t->avars.slots[nd->out].acc;
        if (cr__tis_zero(dy))
            return CR_OK;
    }
    size_t nx = (size_t)nd->nargs + 1;
    cr_tangent dx[MAX_ARGS + 1];
    cr_status st = cr_pullback_call(arena, &nd->pb, &dy, dx, nx);
    for (size_t j = 0; j < nd->nargs && st == CR_OK; j++) {
        uint32_t c = nd->args[j];
        if (c == CR_VAR_CONST)
            continue;
        if (c & CR__ASLOT_BIT) {
            cr__aslot *s = &t->avars.slots[c & ~CR__ASLOT_BIT];
            st = cr__guard_alias(arena, &dy, dx, nx, j + 1);
            if (st == CR_OK)
                st = cr__shadow_accum(arena, s, dx[j + 1]);
        } else {
            st = cr__accum_real(arena, nd->pb.name, dx[j + 1], &adj[c]);
        }
    }
    if (nd->nout > 0) { /* consumed: its record made them */
        for (size_t k = 0; k < nd->nout; k++)
            if (nd->outs[k] != CR_VAR_CONST && (nd->outs[k] & CR__ASLOT_BIT))
                t->avars.slots[nd->outs[k] & ~CR__ASLOT_BIT].acc = cr__tzero();
    } else if (g == NULL) {
        t->avars.slots[nd->out].acc = cr__tzero();
    }
    return st == CR_OK ? CR_OK : pull_failed(t, nd, st);
}

/* ---- Gradients ---------------------------------------------------------------------------- */

/* Whether two lists of n sizes (shapes or strides) are equal: n is a few, a loop beats a
 * call of memcmp. */
static bool same_dims(const void *a, const void *b, size_t n)
{
    const size_t *x = a, *y = b; /* size_t and ptrdiff_t lists alike: compare the bits */
    for (size_t d = 0; d < n; d++)
        if (x[d] != y[d])
            return false;
    return true;
}

/* Write the accumulated cotangent acc into the caller's array dst (zeros when acc is). */
cr_status cr__array_write_out(cr_tape *t, const char *who, const char *what, size_t j,
                              cr_tangent acc, cr_array *dst, const cr_array *like)
{
    if (acc.tag == CR_TAN_ARRAY && acc.u.arr == dst)
        return CR_OK; /* the shadow was the destination itself (cr__gradient_dests) */
    if (dst == NULL || dst->data == NULL || !cr_dtype_is_float((cr_dtype)dst->dtype) ||
        dst->structure != CR_MAT_DENSE)
        return cr_ctx_error(t->ctx, CR_EINVAL,
                            "%s: %s %zu is NULL, structured or not a float array", who, what, j);
    /* Another shape of as many elements is written in row-major order (Julia's copyto!). */
    if (like != NULL && cr_array_numel(dst) != cr_array_numel(like)) {
        char b1[64], b2[64];
        return cr_ctx_error(t->ctx, CR_ESHAPE, "%s: %s %zu is %s, its variable is %s", who, what, j,
                            cr__shape_str(dst, b1, sizeof b1), cr__shape_str(like, b2, sizeof b2));
    }
    /* The shadow already lives in the destination (cr__gradient_dests). */
    if (acc.tag == CR_TAN_ARRAY && acc.u.arr->data == dst->data && acc.u.arr->dtype == dst->dtype &&
        acc.u.arr->ndim == dst->ndim && same_dims(acc.u.arr->strides, dst->strides, dst->ndim))
        return CR_OK;
    /* A contiguous destination of the work dtype is zeroed and accumulated into directly. */
    if (cr__is_contig_dense(dst) && dst->dtype == (uint8_t)cr__work((cr_dtype)dst->dtype)) {
        cr_array d = *dst;
        d.flags |= CR_ARRAY_WRITABLE;
        size_t bytes = cr_array_numel(&d) * cr_dtype_size((cr_dtype)d.dtype);
        if (acc.tag == CR_TAN_ARRAY && acc.u.arr->dtype == d.dtype &&
            cr__is_contig_dense(acc.u.arr) && cr_array_numel(acc.u.arr) == cr_array_numel(&d)) {
            memcpy(d.data, acc.u.arr->data, bytes);
            return CR_OK;
        }
        memset(d.data, 0, bytes);
        return cr__tis_zero(acc) ? CR_OK : cr__add_into(t->arena, &d, acc);
    }
    /* Otherwise accumulate into a dense work buffer, then convert into dst's dtype and
     * strides. */
    cr_array *w;
    cr_dtype wdt = cr__work((cr_dtype)dst->dtype);
    cr_status st = cr__new(t->arena, wdt, dst->ndim, dst->shape, true, &w);
    if (st == CR_OK && !cr__tis_zero(acc))
        st = cr__add_into(t->arena, w, acc);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(dst);
    size_t idx[CR_ARRAY_MAX_DIMS] = {0};
    for (size_t e = 0; e < n; e++) {
        ptrdiff_t off = 0;
        for (size_t d = 0; d < dst->ndim; d++)
            off += (ptrdiff_t)idx[d] * dst->strides[d];
        unsigned char *p =
            (unsigned char *)dst->data + off * (ptrdiff_t)cr_dtype_size((cr_dtype)dst->dtype);
        switch ((cr_dtype)dst->dtype) {
        case CR_DT_F64:
            memcpy(p, (const double *)w->data + e, sizeof(double));
            break;
        case CR_DT_F32: {
            float v = (float)((const double *)w->data)[e];
            memcpy(p, &v, sizeof v);
            break;
        }
        default:
            memcpy(p, (const cr_complex *)w->data + e, sizeof(cr_complex));
            break;
        }
        for (size_t d = dst->ndim; d-- > 0;) {
            if (++idx[d] < dst->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return CR_OK;
}

/* The bytes [*lo, *hi) an array's elements span. */
static ALWAYS_INLINE void extent(const cr_array *a, uintptr_t *lo, uintptr_t *hi)
{
    ptrdiff_t mn = 0, mx = 0;
    for (size_t d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 0) {
            *lo = *hi = (uintptr_t)a->data;
            return;
        }
        ptrdiff_t span = a->strides[d] * (ptrdiff_t)(a->shape[d] - 1);
        if (span < 0)
            mn += span;
        else
            mx += span;
    }
    ptrdiff_t sz = (ptrdiff_t)cr_dtype_size((cr_dtype)a->dtype);
    *lo = (uintptr_t)a->data + (uintptr_t)(mn * sz);
    *hi = (uintptr_t)a->data + (uintptr_t)((mx + 1) * sz);
}

/* Whether b's elements meet the bytes [alo, ahi). */
static ALWAYS_INLINE bool overlaps(uintptr_t alo, uintptr_t ahi, const cr_array *b)
{
    uintptr_t blo, bhi;
    extent(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

/* Let the shadows of array inputs live in the caller's gradient arrays when that is safe:
 * a dense row-major f64 destination of the input's shape that overlaps no array of the tape
 * and no other destination. Saves allocating the shadow and copying it out (one pass over
 * the data); the kernels' reverse steps write into it without zeroing it first. The slot
 * keeps the caller's array itself (dest): no descriptor is copied unless a generic pullback
 * adds into it (cr__shadow_accum), and an accumulator that is dest is written out as it is
 * (cr__array_write_out). */
static ALWAYS_INLINE void gradient_dests(cr_tape *t, const cr_avar *as, size_t na,
                                         cr_array *const *agrad, bool inputs_only)
{
    for (size_t j = 0; j < na; j++) {
        cr_array *g = agrad[j];
        if (as[j].idx == CR_VAR_CONST || g == NULL || g->data == NULL)
            continue;
        cr__aslot *s = &t->avars.slots[as[j].idx];
        const cr_array *v = s->val;
        size_t nd = v->ndim;
        if (!s->input || s->dest != NULL || !cr__tis_zero(s->acc) || g->dtype != CR_DT_F64 ||
            g->structure != CR_MAT_DENSE || g->ndim != nd)
            continue;
        /* v's shape and row-major strides (cr__row_major's), compared in one pass from the
         * last dimension; the elements span [data, data + numel) then. */
        bool ok = true;
        ptrdiff_t rm = 1;
        size_t numel = 1;
        for (size_t d = nd; d-- > 0;) {
            size_t e = v->shape[d];
            ok &= g->shape[d] == e && g->strides[d] == rm;
            rm *= (ptrdiff_t)(e == 0 ? 1 : e);
            numel *= e;
        }
        if (!ok)
            continue;
        uintptr_t glo = (uintptr_t)g->data, ghi = glo + numel * sizeof(double);
        for (uint32_t k = 0; k < t->avars.n && ok; k++)
            ok = (inputs_only && !t->avars.slots[k].input) ||
                 !overlaps(glo, ghi, t->avars.slots[k].val);
        for (size_t i = 0; i < na && ok; i++)
            ok = i == j || agrad[i] == NULL || agrad[i]->data == NULL ||
                 !overlaps(glo, ghi, agrad[i]);
        if (ok)
            s->dest = g;
    }
}

cr_status cr__gradient_dests(cr_tape *t, const cr_avar *as, size_t na, cr_array *const *agrad)
{
    if (na == 1) /* the usual case (a prepared call of one array), its loops unrolled */
        gradient_dests(t, as, 1, agrad, true);
    else
        gradient_dests(t, as, na, agrad, true);
    return CR_OK;
}

/* One reverse sweep seeded either at the scalar y (ybar == NULL) or at the array y. Inlined
 * into the entry points: the gradient's is the small calls' path, with ybar NULL. own is
 * true when as[] are the array inputs cr_tape_value_and_gradient_arrays made in this
 * recording (checked there as a whole: the recording's id is the one they were made in), so
 * that they are not checked again one by one. */
static ALWAYS_INLINE cr_status sweep_mixed(cr_tape *t, const char *who, cr_var y, cr_avar ay,
                                           const cr_array *ybar, const cr_var *xs, size_t n,
                                           double *grad, const cr_avar *as, size_t na,
                                           cr_array *const *agrad, bool own)
{
    if (t == NULL)
        return CR_EINVAL;
    if (t->status != CR_OK)
        return t->status;
    if (t->rec.open) /* the cursor's records since it last left the library are not counted */
        return cr_ctx_error(t->ctx, CR_EMISUSE,
                            "%s: a recording cursor is open on the tape (close it first: "
                            "cr_rec_close)",
                            who);
    if ((n > 0 && (xs == NULL || grad == NULL)) || (na > 0 && (as == NULL || agrad == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: NULL inputs or gradients", who);
    cr_status cst = cr__check_vars(t, who, xs, n, "input");
    if (cst == CR_OK && !own)
        cst = cr__check_avars(t, who, as, na, "array input");
    if (cst != CR_OK)
        return cst;
    for (size_t j = 0; j < na && !own; j++) {
        /* The sweep hands an intermediate's cotangent on to what made it (its buffer may
         * become an argument's): it is not there to read afterwards. */
        if (as[j].idx != CR_VAR_CONST && !t->avars.slots[as[j].idx].input)
            return cr_ctx_error(t->ctx, CR_EINVAL,
                                "%s: array variable %zu is not an input of the tape but the "
                                "result of an operation: array gradients are taken with respect "
                                "to inputs (cr_tape_array_input)",
                                who, j);
    }
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    size_t top = t->nvars;
    /* Small recordings sweep over a workspace on the stack (as cr_tape_vjp does). */
    double small[SMALL_WS];
    double *adj = small;
    if (top <= 4)
        memset(small, 0, 4 * sizeof *small); /* a few stores, no call */
    else if (top <= SMALL_WS)
        memset(small, 0, top * sizeof *small);
    else
        adj = cr_arena_calloc(t->arena, top, sizeof(double), _Alignof(double));
    if (adj == NULL) {
        cr_status st = cr__tape_fail(t, CR__ALLOC_STATUS(t->arena),
                                     "tape: no room for a sweep workspace of %zu doubles", top);
        cr_arena_rewind(t->arena, mk);
        return st;
    }
    cr_status st = CR_OK;
    if (ybar == NULL && (st = cr__check_vars(t, who, &y, 1, "output")) == CR_OK &&
        y.idx != CR_VAR_CONST)
        adj[y.idx] = 1.0;
    /* The accumulators are cleared here rather than by cr__sweep_reverse (t->avars.seeded), so
     * that the gradient destinations see them clear; an array seed goes into its
     * accumulator after that. */
    cr__array_clear(t);
    t->avars.seeded = true;
    if (st == CR_OK && ybar != NULL) {
        cr_array *seed;
        if ((st = cr__view_of(t->arena, ybar, &seed)) == CR_OK)
            t->avars.slots[ay.idx].acc = cr__tarray(seed);
    }
    if (st == CR_OK)
        gradient_dests(t, as, na, agrad, false);
    if (st == CR_OK)
        st = cr__sweep_reverse(t, adj, top);
    t->avars.seeded = false;
    for (size_t j = 0; j < n && st == CR_OK; j++)
        grad[j] = xs[j].idx == CR_VAR_CONST ? 0.0 : adj[xs[j].idx];
    for (size_t j = 0; j < na && st == CR_OK; j++) {
        /* The shadow is the destination (gradient_dests): tested on the fields, since a copy
         * of the whole accumulator would be one 16-byte load of its tag and pointer, which
         * waits for the reverse step's separate stores of the two. */
        const cr_tangent *acc = as[j].idx == CR_VAR_CONST ? NULL : &t->avars.slots[as[j].idx].acc;
        if (acc != NULL && acc->tag == CR_TAN_ARRAY && acc->u.arr == agrad[j])
            continue;
        st = cr__array_write_out(t, who, "gradient array", j, acc != NULL ? *acc : cr__tzero(),
                                 agrad[j], as[j].a);
    }
    /* Accumulators cleared and destinations forgotten, in one pass. */
    for (uint32_t k = 0; k < t->avars.n; k++) {
        t->avars.slots[k].acc = cr__tzero();
        t->avars.slots[k].dest = NULL;
    }
    cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_gradient_arrays(cr_tape *t, cr_var y, const cr_var *xs, size_t n, double *grad,
                                  const cr_avar *as, size_t na, cr_array *const *agrad)
{
    return sweep_mixed(t, "cr_tape_gradient_arrays", y, cr__bad_avar(NULL), NULL, xs, n, grad, as,
                       na, agrad, false);
}

cr_status cr_tape_value_and_gradient_arrays(cr_tape *t, cr_ad_array_fn f, void *env,
                                            const cr_array *const *xs, size_t n, double *y,
                                            cr_array *const *grads)
{
    const char *who = "cr_tape_value_and_gradient_arrays";
    if (t == NULL)
        return CR_EINVAL;
    if (f == NULL || xs == NULL || grads == NULL || n == 0)
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s", who,
                            n == 0 ? "no inputs" : "NULL function, inputs or gradients");
    for (size_t j = 0; j < n; j++)
        if (xs[j] == NULL || !cr_dtype_is_float((cr_dtype)xs[j]->dtype))
            return cr_ctx_error(t->ctx, CR_EINVAL, "%s: input %zu is %s", who, j,
                                xs[j] == NULL ? "NULL" : "not a float array (f64, f32 or c128)");
    cr_tape_reset(t);
    /* The inputs' variables: on the stack for a few, else scratch gone at the next reset. */
    cr_avar few[8], *in = few;
    if (n > sizeof few / sizeof few[0] &&
        (in = cr__arena_array(t->arena, who, n, sizeof *in, _Alignof(cr_avar))) == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), who);
    for (size_t j = 0; j < n; j++)
        in[j] = cr__array_input(t, xs[j]);
    if (t->status != CR_OK)
        return t->status;
    const uint32_t id = t->id;
    cr_var out = cr_const((double)NAN);
    cr_status st = f(t, in, n, &out, env);
    if (st != CR_OK && t->status == CR_OK)
        return cr__tape_fail(t, st, "the recorded function failed: %s", cr_status_str(st));
    if (t->status != CR_OK)
        return t->status;
    if (y != NULL)
        *y = out.v;
    /* The inputs are this recording's unless f reset the tape (a new id): then the checked
     * path says so. Otherwise the sweep of cr_tape_gradient_arrays, inline, without checking
     * each input again. */
    if (t->id != id)
        return cr_tape_gradient_arrays(t, out, NULL, 0, NULL, in, n, grads);
    /* One input, the usual case, as a sweep of its own: its loops over the inputs unrolled. */
    if (n == 1)
        return sweep_mixed(t, "cr_tape_gradient_arrays", out, cr__bad_avar(NULL), NULL, NULL, 0,
                           NULL, in, 1, grads, true);
    return sweep_mixed(t, "cr_tape_gradient_arrays", out, cr__bad_avar(NULL), NULL, NULL, 0, NULL,
                       in, n, grads, true);
}

cr_status cr_tape_avjp(cr_tape *t, cr_avar y, const cr_array *ybar, const cr_var *xs, size_t n,
                       double *xbar, const cr_avar *as, size_t na, cr_array *const *abar)
{
    const char *who = "cr_tape_avjp";
    cr_status st = cr__tape_entry_status(t);
    if (st != CR_OK)
        return st;
    if (ybar == NULL || y.a == NULL)
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: NULL output or seed", who);
    if (t->rec.open) /* checked before the seed is read against the output's shape */
        return sweep_mixed(t, who, cr_const(0.0), y, ybar, xs, n, xbar, as, na, abar, false);
    if ((st = cr__check_avars(t, who, &y, 1, "array output")) != CR_OK)
        return st;
    if (cr_array_numel(ybar) != cr_array_numel(y.a) || ybar->ndim != y.a->ndim) {
        char b1[64], b2[64];
        return cr_ctx_error(t->ctx, CR_ESHAPE, "%s: the seed is %s, the output %s", who,
                            cr__shape_str(ybar, b1, sizeof b1), cr__shape_str(y.a, b2, sizeof b2));
    }
    size_t m = cr_array_numel(ybar);
    for (size_t e = 0; e < m; e++) {
        cr_complex v = cr_array_get_linear(ybar, e);
        if (!isfinite(creal(v)) || !isfinite(cimag(v)))
            return cr_ctx_error(t->ctx, CR_EDOMAIN, "%s: seed element %zu is not finite", who, e);
    }
    if (y.idx == CR_VAR_CONST) { /* nothing flows: zeros */
        for (size_t j = 0; j < n; j++)
            xbar[j] = 0.0;
        ybar = NULL;
    }
    return sweep_mixed(t, who, cr_const(0.0), y, ybar, xs, n, xbar, as, na, abar, false);
}

#define MAX_DIRS 8 /* directions per second-order sweep (cr_tape_hessian's chunk) */

/* ---- Forward and second-order steps: second-order classes
 * --------------------------------------------------------------- */

enum {
    SO_NONE = 0, /* no second-order form: refused on a second-order tape */
    SO_LINEAR,   /* linear in its differentiable arguments: S = 0 */
    SO_MULTI,    /* multilinear: S from the rrule called with one argument replaced by its
                    tangent */
    SO_RFORM     /* a nonlinear function whose rule declares a form (cr_rule_def.form) */
};

/*
 * No rule of f matches these arguments: the form of another of f's rules (the first found,
 * from the configuration's registry down to the built-ins) says why, if it has a check that
 * refuses them (prod of a number: "the first argument is not an array"); *why is its reason.
 */
static bool other_form_refuses(const cr_tape *t, const cr_value *f, const cr_value *vals,
                               size_t nargs, const bool *var, const char **why)
{
    const cr_registry *reg = t->config != NULL && t->config->registry != NULL
                                 ? t->config->registry
                                 : cr_registry_builtin();
    for (; reg != NULL; reg = cr_registry_parent(reg)) {
        size_t n = cr_registry_size(reg);
        for (size_t e = 0; e < n; e++) {
            cr_rule_info info;
            if (cr_registry_get(reg, e, &info) != CR_OK || info.fn != f->u.func.fn ||
                info.def == NULL || info.def->form == NULL || info.def->form->check == NULL)
                continue;
            uint32_t lin = CR_NONLINEAR;
            return (*why = info.def->form->check(vals, nargs, var, &lin)) != NULL;
        }
    }
    return false;
}

/*
 * The class the rule that f(vals...) dispatches to declares: its linearity, refined by its
 * form's check at these arguments, or its form (*rform). SO_NONE when the rule declares
 * neither, or with *why (else NULL) when the form's check refuses the call.
 */
static int so_class(const cr_tape *t, const cr_value *f, const cr_value *vals,
                    const uint32_t *codes, size_t nargs, const cr_rule_form **rform,
                    const char **why)
{
    cr_rule_match m;
    bool var[MAX_ARGS];
    for (size_t j = 0; j < nargs; j++)
        var[j] = codes[j] != CR_VAR_CONST;
    *rform = NULL;
    *why = NULL;
    if (cr_registry_lookup(NULL, t->config, CR_MODE_RRULE, f, vals, nargs, &m) != CR_OK ||
        m.def == NULL) {
        (void)other_form_refuses(t, f, vals, nargs, var, why);
        return SO_NONE;
    }
    const cr_rule_def *def = m.def;
    cr_rule_match b;
    /* A user's rule that overrides a built-in one and declares nothing of its own keeps the
     * built-in rule's class and form: they belong to the function it computes. */
    if (def->linearity == CR_NONLINEAR && def->form == NULL && t->config != NULL &&
        t->config->registry != NULL &&
        cr_registry_lookup(cr_registry_builtin(), t->config, CR_MODE_RRULE, f, vals, nargs, &b) ==
            CR_OK &&
        b.def != NULL)
        def = b.def;
    uint32_t lin = def->linearity;
    if (def->form != NULL && def->form->check != NULL &&
        (*why = def->form->check(vals, nargs, var, &lin)) != NULL)
        return SO_NONE;
    if (lin == CR_LINEAR || lin == CR_PIECEWISE_LINEAR)
        return SO_LINEAR;
    if (lin == CR_MULTILINEAR)
        return SO_MULTI;
    if (def->form != NULL) {
        *rform = def->form;
        return SO_RFORM;
    }
    return SO_NONE;
}

struct cr__aext {
    cr_value f;                /* the function called (a copy) */
    const cr_value *vals;      /* its arguments' values (the tape's copy, in the arena) */
    const cr_rule_form *rform; /* SO_RFORM: the form its rule declares */
    int cls;                   /* SO_*; SO_NONE on forward tapes for unknown functions */
};

static bool is_complex(const cr_value *v)
{
    return v->kind == CR_KIND_C128 ||
           (v->kind == CR_KIND_ARRAY && v->u.arr != NULL && v->u.arr->dtype == CR_DT_C128);
}

cr_status cr__array_ext(cr_tape *t, const cr_value *f, const cr_value *vals, const uint32_t *codes,
                        size_t nargs, const cr__aext **out)
{
    const char *fname = f->u.func.fn->name;
    const cr_rule_form *rform = NULL;
    const char *why;
    int cls = so_class(t, f, vals, codes, nargs, &rform, &why);
    if (t->flags & (CR_TAPE_SECOND_ORDER | CR__TAPE_SO_CHECK)) {
        if (cls == SO_NONE && why != NULL)
            return cr__tape_fail(t, CR_EUNIMPL, "%s: no second-order form on the tape: %s", fname,
                                 why);
        if (cls == SO_NONE)
            return cr__tape_fail(t, CR_EUNIMPL,
                                 "%s: no second-order form on the tape (second-order tapes record "
                                 "linear and multilinear array functions, broadcasts of "
                                 "scalar-table functions and the functions of docs/engine.md's "
                                 "table)",
                                 fname);
        for (size_t j = 0; j < nargs && cls != SO_LINEAR; j++) /* S = 0 whatever the dtype */
            if (codes[j] != CR_VAR_CONST && is_complex(&vals[j]))
                return cr__tape_fail(t, CR_EUNIMPL,
                                     "%s: argument %zu is complex: second-order tapes record "
                                     "real array functions only",
                                     fname, j);
    }
    cr__aext *e = cr_arena_alloc(t->arena, sizeof *e, _Alignof(cr__aext));
    if (e == NULL)
        return cr__tape_fail(t, CR__ALLOC_STATUS(t->arena), "%s: no room for the record", fname);
    e->f = *f;
    e->vals = vals;
    e->rform = rform;
    e->cls = cls;
    *out = e;
    return CR_OK;
}

/* The tangent of argument `code` of a record along direction d. */
static cr_tangent arg_tangent(const cr_tape *t, uint32_t code, const double *tan, size_t k,
                              size_t d)
{
    if (code == CR_VAR_CONST)
        return cr_tangent_zero();
    if (code & CR__ASLOT_BIT) {
        const cr__asweep *w = t->fwd.asw;
        return w == NULL ? cr_tangent_zero() : w->tan[(size_t)(code & ~CR__ASLOT_BIT) * k + d];
    }
    double v = tan[(size_t)code * k + d];
    return v == 0.0 ? cr_tangent_zero() : cr_tangent_f64(v);
}

/* A failure of a rule called by a sweep: its message is on the context. */
static cr_status rule_failed(cr_tape *t, const cr__anode *nd, const char *what, cr_status st)
{
    const char *msg = cr_ctx_errmsg(t->ctx);
    return cr__tape_fail(t, st, "%s of %s failed: %s", what, nd->fname,
                         msg[0] != '\0' ? cr__after_name(msg, nd->fname) : cr_status_str(st));
}

/* A record without forward or second-order information: one made on a first-order tape. */
static cr_status no_form(cr_tape *t, const cr__anode *nd, const char *what)
{
    return cr__tape_fail(t, CR_EUNIMPL, "%s: recorded without CR_TAPE_FORWARD (%s sweeps need it)",
                         nd->fname, what);
}

/* ---- Forward ------------------------------------------------------------------------------- */

/* Add the tangent dy of a tuple result along direction d to its elements' variables: a
 * scalar element c of the record making scalar variables from i is variable i + c, an array
 * element has its slot; integer elements (constants) have no tangent. */
static cr_status tuple_tangents(cr_tape *t, const cr__anode *nd, cr_tangent dy, double *tan,
                                size_t k, size_t i, size_t d)
{
    if (cr_tangent_is_zero(dy))
        return CR_OK;
    if (dy.tag != CR_TAN_STRUCT)
        return cr__tape_fail(t, CR_EINVAL, "%s: its frule gave a %s tangent for a tuple result",
                             nd->fname, cr_tag_name((cr_tag)dy.tag));
    cr__asweep *w = t->fwd.asw;
    for (size_t o = 0; o < nd->nout; o++) {
        uint32_t c = nd->outs[o];
        cr_tangent e = cr_tangent_field(dy, o);
        cr_status st = CR_OK;
        if (c == CR_VAR_CONST || cr_tangent_is_zero(e))
            continue;
        if (cr_tangent_is_thunk(e) && (st = cr_tangent_unthunk(e, &e)) != CR_OK)
            return rule_failed(t, nd, "the frule", st);
        if (!(c & CR__ASLOT_BIT)) {
            st = cr__accum_real(t->arena, nd->fname, e, &tan[(i + c) * k + d]);
        } else if (w == NULL) {
            return cr__tape_fail(t, CR_EINVAL, "tape: %s: forward sweep without array tangents",
                                 nd->fname);
        } else {
            cr_tangent *slot = &w->tan[(size_t)(c & ~CR__ASLOT_BIT) * k + d];
            st = cr_tangent_is_zero(*slot) ? (*slot = e, CR_OK)
                                           : cr_tangent_add(t->arena, *slot, e, slot);
        }
        if (st != CR_OK)
            return rule_failed(t, nd, "the frule", st);
    }
    return CR_OK;
}

static cr_status call_forward(cr_tape *t, const cr__anode *nd, double *tan, size_t k, size_t i)
{
    const cr__aext *e = nd->ext;
    if (e == NULL)
        return no_form(t, nd, "forward");
    cr__asweep *w = t->fwd.asw;
    size_t nargs = nd->nargs;
    bool scalar = nd->out == CR_VAR_CONST;
    if (!scalar && nd->nout == 0 && w == NULL)
        return cr__tape_fail(t, CR_EINVAL, "tape: %s: forward sweep without array tangents",
                             nd->fname);
    cr_tangent dargs[MAX_ARGS + 1];
    for (size_t d = 0; d < k; d++) {
        bool any = false;
        dargs[0] = cr_tangent_none(); /* the function called has no fields */
        for (size_t j = 0; j < nargs; j++) {
            dargs[j + 1] = arg_tangent(t, nd->args[j], tan, k, d);
            any = any || !cr_tangent_is_zero(dargs[j + 1]);
        }
        if (!any)
            continue; /* a zero tangent */
        cr_value y;
        cr_tangent dy;
        cr_status st = cr_frule(t->config, t->arena, dargs, &e->f, e->vals, nargs, &y, &dy);
        if (st == CR_NOTHING)
            return cr__tape_fail(
                t, CR_EUNIMPL, "%s has no frule: a forward sweep cannot go through it", nd->fname);
        if (st == CR_OK && cr_tangent_is_thunk(dy))
            st = cr_tangent_unthunk(dy, &dy);
        if (st != CR_OK)
            return rule_failed(t, nd, "the frule", st);
        if (nd->nout > 0) {
            if ((st = tuple_tangents(t, nd, dy, tan, k, i, d)) != CR_OK)
                return st;
            continue;
        }
        if (scalar) {
            st = cr__accum_real(t->arena, nd->fname, dy, &tan[i * k + d]);
        } else {
            cr_tangent *slot = &w->tan[(size_t)nd->out * k + d];
            st = cr_tangent_is_zero(*slot) ? (*slot = dy, CR_OK)
                                           : cr_tangent_add(t->arena, *slot, dy, slot);
        }
        if (st != CR_OK)
            return rule_failed(t, nd, "the frule", st);
    }
    return CR_OK;
}

/* ---- Second order ---------------------------------------------------------------------------- */

/* Add the cotangent-derivative dx of argument j along direction d. */
static cr_status add_d(cr_tape *t, const cr__anode *nd, size_t j, cr_tangent dx, double *adjd,
                       size_t k, size_t d)
{
    uint32_t c = nd->args[j];
    if (c == CR_VAR_CONST || cr_tangent_is_zero(dx))
        return CR_OK;
    if (!(c & CR__ASLOT_BIT))
        return cr__accum_real(t->arena, nd->pb.name, dx, &adjd[(size_t)c * k + d]);
    size_t s = c & ~CR__ASLOT_BIT;
    cr__aslot tmp = {t->avars.slots[s].val, t->fwd.asw->accd[s * k + d], NULL, false};
    cr_status st = cr__shadow_accum(t->arena, &tmp, dx);
    t->fwd.asw->accd[s * k + d] = tmp.acc;
    return st;
}

/* The value of a tangent, as an argument of a rule (a scalar or an array). */
static cr_status value_of(cr_tape *t, const cr__anode *nd, cr_tangent v, cr_value *out)
{
    cr_status st = cr_tangent_unthunk(v, &v);
    if (st != CR_OK)
        return st;
    switch ((cr_tag)v.tag) {
    case CR_TAN_F64:
        *out = cr_value_f64(v.u.f64);
        return CR_OK;
    case CR_TAN_F32:
        *out = cr_value_f32(v.u.f32);
        return CR_OK;
    case CR_TAN_ARRAY:
        *out = cr_value_array(v.u.arr);
        return CR_OK;
    default:
        return cr__tape_fail(t, CR_EUNIMPL, "%s: a tangent of kind %s cannot be used as a point",
                             nd->fname, cr_tag_name((cr_tag)v.tag));
    }
}

/*
 * S of a multilinear function: for each variable argument l and direction d, the rrule at
 * the point with argument l replaced by its tangent, pulled back with ȳ, gives the
 * derivative of every other argument's cotangent along ẋ_l.
 */
static cr_status second_multi(cr_tape *t, const cr__anode *nd, cr_tangent ybar, double *adjd,
                              const double *tan, size_t k)
{
    const cr__aext *e = nd->ext;
    size_t nargs = nd->nargs, nvar = 0;
    for (size_t j = 0; j < nargs; j++)
        nvar += nd->args[j] != CR_VAR_CONST;
    if (nvar < 2)
        return CR_OK; /* linear in its only variable argument */
    cr_value vals[MAX_ARGS];
    cr_tangent dx[MAX_ARGS + 1];
    size_t nx = nargs + 1;
    for (size_t l = 0; l < nargs; l++) {
        if (nd->args[l] == CR_VAR_CONST)
            continue;
        for (size_t d = 0; d < k; d++) {
            cr_tangent tl = arg_tangent(t, nd->args[l], tan, k, d);
            if (cr_tangent_is_zero(tl))
                continue;
            memcpy(vals, e->vals, nargs * sizeof *vals);
            cr_status st = value_of(t, nd, tl, &vals[l]);
            if (st != CR_OK)
                return t->status != CR_OK ? t->status : rule_failed(t, nd, "a tangent", st);
            cr_value y;
            cr_pullback pb;
            st = cr_rrule(t->config, t->arena, &e->f, vals, nargs, &y, &pb);
            if (st == CR_OK)
                st = cr_pullback_call(t->arena, &pb, &ybar, dx, nx);
            for (size_t j = 0; j < nargs && st == CR_OK; j++) {
                if (j == l || nd->args[j] == CR_VAR_CONST)
                    continue;
                st = cr__guard_alias(t->arena, &ybar, dx, nx, j + 1);
                if (st == CR_OK)
                    st = add_d(t, nd, j, dx[j + 1], adjd, k, d);
            }
            if (st != CR_OK)
                return rule_failed(t, nd, "the second-order term", st);
        }
    }
    return CR_OK;
}

/* A failure of a rule's form: a message that names the function is kept as the form wrote
 * it; any other is put after "the second-order term of f failed". */
static cr_status form_failed(cr_tape *t, const cr__anode *nd, cr_status st)
{
    if (t->status != CR_OK)
        return t->status;
    const char *msg = cr_ctx_errmsg(t->ctx);
    if (cr_ctx_errcode(t->ctx) == st && cr__names(msg, nd->fname))
        return cr__tape_fail(t, st, "%s", msg);
    return rule_failed(t, nd, "the second-order term", st);
}

/*
 * S of a function whose rule declares a form (cr_rule_form): the form's preparation once,
 * then, for each direction along which an argument moves, its step with the arguments' and
 * the result's tangents; each variable argument's S_j, projected onto the argument's
 * structure as the rule projects its cotangent, is added into the derivative of its
 * cotangent along that direction.
 */
static cr_status second_form(cr_tape *t, const cr__anode *nd, size_t i, cr_tangent ybar,
                             double *adjd, const double *tan, size_t k)
{
    const cr__aext *e = nd->ext;
    const cr_rule_form *fm = e->rform;
    size_t nargs = nd->nargs;
    bool var[MAX_ARGS];
    for (size_t j = 0; j < nargs; j++)
        var[j] = nd->args[j] != CR_VAR_CONST;
    cr_form_point p = {t->config, t->arena, nd->fname, &e->f,   nd->vals,
                       nargs,     var,      &nd->y,    &nd->pb, ybar};
    void *state = NULL;
    cr_status st = fm->init != NULL ? fm->init(&p, &state) : CR_OK;
    if (st == CR_NOTHING)
        return CR_OK; /* S = 0 at this point */
    /* the result's tangent: scalar variable i, or the array slot (none for a tuple) */
    uint32_t ycode = nd->nout > 0              ? CR_VAR_CONST
                     : nd->out == CR_VAR_CONST ? (uint32_t)i
                                               : nd->out | CR__ASLOT_BIT;
    cr_tangent xd[MAX_ARGS], S[MAX_ARGS];
    for (size_t d = 0; d < k && st == CR_OK; d++) {
        bool any = false;
        for (size_t j = 0; j < nargs; j++) {
            xd[j] = var[j] ? arg_tangent(t, nd->args[j], tan, k, d) : cr_tangent_zero();
            any = any || !cr_tangent_is_zero(xd[j]);
            S[j] = cr_tangent_zero();
        }
        if (!any)
            continue;
        st = fm->dir(&p, state, xd, arg_tangent(t, ycode, tan, k, d), S);
        for (size_t j = 0; j < nargs && st == CR_OK; j++) {
            const cr_value *v = &nd->vals[j];
            if (!var[j] || cr_tangent_is_zero(S[j]))
                continue;
            if (v->kind == CR_KIND_ARRAY && v->u.arr != NULL && v->u.arr->structure != CR_MAT_DENSE)
                st = cr_project_tangent(t->arena, v, S[j], &S[j]);
            if (st == CR_OK)
                st = add_d(t, nd, j, S[j], adjd, k, d);
        }
    }
    return st == CR_OK ? CR_OK : form_failed(t, nd, st);
}

/* pullback(dy) added into the derivatives along direction d. */
static cr_status pull_d(cr_tape *t, const cr__anode *nd, cr_tangent dy, double *adjd, size_t k,
                        size_t d)
{
    size_t nx = (size_t)nd->nargs + 1;
    cr_tangent dx[MAX_ARGS + 1];
    cr_status st = cr_pullback_call(t->arena, &nd->pb, &dy, dx, nx);
    for (size_t j = 0; j < nd->nargs && st == CR_OK; j++) {
        if (nd->args[j] == CR_VAR_CONST)
            continue;
        st = cr__guard_alias(t->arena, &dy, dx, nx, j + 1);
        if (st == CR_OK)
            st = add_d(t, nd, j, dx[j + 1], adjd, k, d);
    }
    return st == CR_OK ? CR_OK : rule_failed(t, nd, "the pullback", st);
}

/* The cotangent ȳ of a record's result and its derivatives ȳ̇ along the k directions (those of
 * an array result and of a tuple's array elements are consumed); *anyd when one is not zero. */
static cr_status result_cots(cr_tape *t, const cr__anode *nd, size_t i, double *adj, double *adjd,
                             size_t k, cr_tangent *ybar, cr_tangent *ybd, bool *anyd)
{
    cr__asweep *w = t->fwd.asw;
    *anyd = false;
    if (nd->nout > 0) {
        bool zero;
        cr_status st = cr__tuple_cot(t, nd, &adj[i], 1, NULL, 0, 0, ybar, &zero);
        if (st == CR_OK && zero)
            *ybar = cr_tangent_zero();
        for (size_t d = 0; d < k && st == CR_OK; d++) {
            st = cr__tuple_cot(t, nd, &adjd[i * k + d], k, w != NULL ? w->accd : NULL, k, d,
                               &ybd[d], &zero);
            if (zero)
                ybd[d] = cr_tangent_zero();
            *anyd = *anyd || !zero;
        }
        return st == CR_OK ? CR_OK : rule_failed(t, nd, "the cotangent", st);
    }
    bool scalar = nd->out == CR_VAR_CONST;
    *ybar = scalar ? (adj[i] == 0.0 ? cr_tangent_zero() : cr_tangent_f64(adj[i]))
                   : t->avars.slots[nd->out].acc;
    for (size_t d = 0; d < k; d++) {
        if (scalar) {
            double g = adjd[i * k + d];
            ybd[d] = g == 0.0 ? cr_tangent_zero() : cr_tangent_f64(g);
        } else {
            ybd[d] = w->accd[(size_t)nd->out * k + d];
            w->accd[(size_t)nd->out * k + d] = cr_tangent_zero(); /* consumed */
        }
        *anyd = *anyd || !cr_tangent_is_zero(ybd[d]);
    }
    return CR_OK;
}

static cr_status call_pull2(cr_tape *t, const cr__anode *nd, size_t i, double *adj, double *adjd,
                            const double *tan, size_t k)
{
    const cr__aext *e = nd->ext;
    cr__asweep *w = t->fwd.asw;
    bool scalar = nd->out == CR_VAR_CONST; /* one scalar, or a tuple's scalars from i on */
    bool arrays = !scalar;                 /* an array result or a tuple's array element */
    for (size_t o = 0; o < nd->nout; o++)
        arrays = arrays || (nd->outs[o] != CR_VAR_CONST && (nd->outs[o] & CR__ASLOT_BIT));
    if (e == NULL)
        return no_form(t, nd, "second-order");
    if ((arrays && (w == NULL || w->accd == NULL)) || k > MAX_DIRS)
        return cr__tape_fail(t, CR_EINVAL, "tape: %s: array record without second-order state",
                             nd->fname);
    cr_tangent ybar, ybd[MAX_DIRS];
    bool anyd;
    cr_status st = result_cots(t, nd, i, adj, adjd, k, &ybar, ybd, &anyd);
    if (st == CR_OK && !cr_tangent_is_zero(ybar)) {
        if (e->cls == SO_MULTI)
            st = second_multi(t, nd, ybar, adjd, tan, k);
        else if (e->cls == SO_RFORM)
            st = second_form(t, nd, i, ybar, adjd, tan, k);
        /* the ordinary reverse step: x̄ += pullback(ȳ) */
        if (st == CR_OK)
            st = call_pull(t, nd, scalar ? &adj[i] : NULL, adj);
    }
    for (size_t d = 0; d < k && anyd && st == CR_OK; d++)
        if (!cr_tangent_is_zero(ybd[d]))
            st = pull_d(t, nd, ybd[d], adjd, k, d);
    return st;
}

/* ---- Public sweeps --------------------------------------------------------------------------- */

/* Check a direction or tangent array (what, as the caller names it) against its variable
 * (shape, finite values). */
static cr_status check_dir(cr_tape *t, const char *who, const char *what, size_t j,
                           const cr_array *v, const cr_array *like)
{
    if (v == NULL || v->data == NULL || !cr_dtype_is_float((cr_dtype)v->dtype))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s %zu is NULL or not a float array", who, what,
                            j);
    bool same = like == NULL || v->ndim == like->ndim;
    for (size_t q = 0; same && like != NULL && q < v->ndim; q++)
        same = v->shape[q] == like->shape[q];
    if (!same) {
        char b1[64], b2[64];
        return cr_ctx_error(t->ctx, CR_ESHAPE, "%s: %s %zu is %s, its variable is %s", who, what, j,
                            cr__shape_str(v, b1, sizeof b1), cr__shape_str(like, b2, sizeof b2));
    }
    size_t m = cr_array_numel(v);
    if (v->dtype == CR_DT_F64 && cr__is_contig_dense(v)) { /* the common case, directly */
        const double *p = v->data;
        double acc[4] = {0.0, 0.0, 0.0, 0.0}; /* four chains: not bound by add latency */
        size_t e = 0;
        for (; e + 4 <= m; e += 4)
            for (size_t l = 0; l < 4; l++)
                acc[l] += p[e + l] * 0.0; /* NaN or infinite elements make it NaN */
        for (; e < m; e++)
            acc[0] += p[e] * 0.0;
        if ((acc[0] + acc[1]) + (acc[2] + acc[3]) == 0.0)
            return CR_OK;
    }
    for (size_t e = 0; e < m; e++) {
        cr_complex z = cr_array_get_linear(v, e);
        if (!isfinite(creal(z)) || !isfinite(cimag(z)))
            return cr_ctx_error(t->ctx, CR_EDOMAIN, "%s: element %zu of %s %zu is not finite", who,
                                e, what, j);
    }
    return CR_OK;
}

/* Seed the array inputs' tangents (direction 0) with v, converted to their dtypes. */
static cr_status seed_arrays(cr_tape *t, const cr_avar *as, size_t na, const cr_array *const *v)
{
    for (size_t j = 0; j < na; j++) {
        if (as[j].idx == CR_VAR_CONST)
            continue;
        const cr_array *like = t->avars.slots[as[j].idx].val;
        const cr_array *w;
        cr_array *c;
        cr_dtype dt = (cr_dtype)like->dtype;
        cr_status st = cr__dense(t->arena, v[j], cr__work(dt), &w);
        if (st == CR_OK && like->ndim == 2 && like->structure != CR_MAT_DENSE) {
            /* The direction as the input reads it: data changed by v read through the
             * input's structure (Symmetric: the upper triangle mirrored; Upper, Lower: one
             * triangle; Diagonal: the diagonal), which is what finite differences of the
             * input's data see. */
            cr_array s = *w;
            s.structure = cr__matstruct_tangent(like->structure); /* a unit diagonal is fixed */
            if (like->structure == CR_MAT_DIAGONAL)
                s.strides[0] = (ptrdiff_t)w->shape[1] + 1;
            st = cr__dense(t->arena, &s, cr__work(dt), &w);
        }
        if (st == CR_OK)
            st = cr__cast(t->arena, w, dt == CR_DT_F32 ? CR_DT_F32 : cr__work(dt), &c);
        cr_array *r;
        if (st == CR_OK)
            st = cr__view_of(t->arena, c, &r); /* never written through */
        if (st != CR_OK)
            return cr__tape_fail(t, st, "array tangents: %s", cr_ctx_errmsg(t->ctx));
        cr_tangent *slot = &t->fwd.asw->tan[as[j].idx];
        st = cr_tangent_is_zero(*slot) ? (*slot = cr_tangent_array(r), CR_OK)
                                       : cr_tangent_add(t->arena, *slot, cr_tangent_array(r), slot);
        if (st != CR_OK)
            return cr__tape_fail(t, st, "array tangents: %s", cr_ctx_errmsg(t->ctx));
    }
    return CR_OK;
}

/* The checks on entry of a sweep over array variables: a tape, not misused, not failed,
 * created with `flag` (named flag_name in the message). */
static cr_status sweep_entry(cr_tape *t, const char *who, uint32_t flag, const char *flag_name)
{
    cr_status st = cr__tape_entry_status(t);
    if (st != CR_OK)
        return st;
    if (!(t->flags & flag))
        return cr_ctx_error(t->ctx, CR_EMISUSE, "%s: the tape was not created with %s", who,
                            flag_name);
    return CR_OK;
}

/* check_dir for each of the na direction arrays dirs of the array variables as. */
static cr_status check_dirs(cr_tape *t, const char *who, const char *what, const cr_avar *as,
                            size_t na, const cr_array *const *dirs)
{
    for (size_t j = 0; j < na; j++) {
        cr_status st = check_dir(t, who, what, j, dirs[j], as[j].a);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

cr_status cr_tape_ajvp(cr_tape *t, const cr_var *xs, const double *xdot, size_t n,
                       const cr_avar *as, const cr_array *const *adot, size_t na, const cr_var *ys,
                       size_t m, double *ydot, const cr_avar *bs, size_t nb, cr_array *const *bdot)
{
    const char *who = "cr_tape_ajvp";
    cr_status st = sweep_entry(t, who, CR_TAPE_FORWARD, "CR_TAPE_FORWARD");
    if (st != CR_OK)
        return st;
    if ((n > 0 && (xs == NULL || xdot == NULL)) || (na > 0 && (as == NULL || adot == NULL)) ||
        (m > 0 && (ys == NULL || ydot == NULL)) || (nb > 0 && (bs == NULL || bdot == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s is NULL", who,
                            n > 0 && xs == NULL      ? "xs"
                            : n > 0 && xdot == NULL  ? "xdot"
                            : na > 0 && as == NULL   ? "as"
                            : na > 0 && adot == NULL ? "adot"
                            : m > 0 && ys == NULL    ? "ys"
                            : m > 0 && ydot == NULL  ? "ydot"
                            : bs == NULL             ? "bs"
                                                     : "bdot");
    if ((st = cr__check_vars(t, who, xs, n, "input")) != CR_OK ||
        (st = cr__check_vars(t, who, ys, m, "output")) != CR_OK ||
        (st = cr__check_avars(t, who, as, na, "array input")) != CR_OK ||
        (st = cr__check_avars(t, who, bs, nb, "array output")) != CR_OK ||
        (st = cr__check_finite(t, who, xdot, n, "tangent")) != CR_OK)
        return st;
    if ((st = check_dirs(t, who, "tangent array", as, na, adot)) != CR_OK)
        return st;
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    size_t top = t->nvars;
    double *tan = cr__sweep_workspace(t, top, &st);
    if (tan == NULL)
        return st;
    for (size_t j = 0; j < n; j++)
        if (xs[j].idx != CR_VAR_CONST)
            tan[xs[j].idx] += xdot[j];
    st = cr__array_sweep_begin(t, 1, false);
    if (st == CR_OK)
        st = seed_arrays(t, as, na, adot);
    /* every record: array records after the last scalar variable make array outputs */
    if (st == CR_OK)
        st = cr__sweep_forward(t, tan, 1, (size_t)-1, false);
    for (size_t j = 0; j < m && st == CR_OK; j++)
        ydot[j] = ys[j].idx == CR_VAR_CONST ? 0.0 : tan[ys[j].idx];
    for (size_t j = 0; j < nb && st == CR_OK; j++) {
        cr_tangent v = bs[j].idx == CR_VAR_CONST ? cr_tangent_zero() : t->fwd.asw->tan[bs[j].idx];
        st = cr__array_write_out(t, who, "output tangent array", j, v, bdot[j], bs[j].a);
    }
    cr__array_sweep_end(t);
    cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_ahvp(cr_tape *t, cr_var y, const cr_var *xs, size_t n, const double *v,
                       double *hv, const cr_avar *as, size_t na, const cr_array *const *av,
                       cr_array *const *ahv)
{
    const char *who = "cr_tape_ahvp";
    cr_status st = sweep_entry(t, who, CR_TAPE_SECOND_ORDER, "CR_TAPE_SECOND_ORDER");
    if (st != CR_OK)
        return st;
    if ((n > 0 && (xs == NULL || v == NULL || hv == NULL)) ||
        (na > 0 && (as == NULL || av == NULL || ahv == NULL)))
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: %s is NULL", who,
                            n > 0 && xs == NULL    ? "xs"
                            : n > 0 && v == NULL   ? "v"
                            : n > 0 && hv == NULL  ? "hv"
                            : na > 0 && as == NULL ? "as"
                            : na > 0 && av == NULL ? "av"
                                                   : "ahv");
    if ((st = cr__check_vars(t, who, &y, 1, "output")) != CR_OK ||
        (st = cr__check_vars(t, who, xs, n, "input")) != CR_OK ||
        (st = cr__check_avars(t, who, as, na, "array input")) != CR_OK ||
        (st = cr__check_finite(t, who, v, n, "direction")) != CR_OK)
        return st;
    if ((st = check_dirs(t, who, "direction array", as, na, av)) != CR_OK)
        return st;
    cr_arena_mark mk = cr_arena_get_mark(t->arena);
    size_t top = y.idx == CR_VAR_CONST ? 0 : cr__sweep_top(t, (size_t)y.idx + 1);
    double *adj = cr__sweep_workspace(t, top, &st), *tan = NULL, *adjd = NULL;
    if (adj != NULL)
        tan = cr__sweep_workspace(t, top, &st);
    if (tan != NULL)
        adjd = cr__sweep_workspace(t, top, &st);
    if (adjd == NULL) {
        cr_arena_rewind(t->arena, mk);
        return st;
    }
    st = cr__array_sweep_begin(t, 1, true);
    if (top > 0) {
        for (size_t j = 0; j < n; j++)
            if (xs[j].idx != CR_VAR_CONST && xs[j].idx < top)
                tan[xs[j].idx] += v[j];
        if (st == CR_OK)
            st = seed_arrays(t, as, na, av);
        if (st == CR_OK)
            st = cr__sweep_forward(t, tan, 1, top, true);
        adj[y.idx] = 1.0;
        if (st == CR_OK)
            st = cr__sweep_second(t, adj, adjd, tan, 1, top);
    }
    for (size_t j = 0; j < n && st == CR_OK; j++)
        hv[j] = xs[j].idx == CR_VAR_CONST || xs[j].idx >= top ? 0.0 : adjd[xs[j].idx];
    for (size_t j = 0; j < na && st == CR_OK; j++) {
        cr_tangent a = as[j].idx == CR_VAR_CONST ? cr_tangent_zero() : t->fwd.asw->accd[as[j].idx];
        st = cr__array_write_out(t, who, "result array", j, a, ahv[j], as[j].a);
    }
    cr__array_sweep_end(t);
    cr_arena_rewind(t->arena, mk);
    return st;
}

/* For the prepared Hessian-vector products of array inputs (prepared_hvp.c). */
cr_status cr__array_check_dir(cr_tape *t, const char *who, const char *what, size_t j,
                              const cr_array *v, const cr_array *like)
{
    return check_dir(t, who, what, j, v, like);
}

cr_status cr__array_seed(cr_tape *t, const cr_avar *as, size_t na, const cr_array *const *v)
{
    return seed_arrays(t, as, na, v);
}

/* ---- Prepared replay ----------------------------------------------------------------------- */

/* An array function's record is replayed by calling its rrule again with the new argument
 * values (the rules define the derivatives; the new pullback is the derivative at the new
 * point), in the tape's arena above the mark taken after recording, rewound at each call. A
 * result of another shape, kind or dtype than when recorded, or an integer tuple element
 * that changed, stops the replay. */

static bool same_shape(const cr_array *a, const cr_array *b)
{
    return a->dtype == b->dtype && a->ndim == b->ndim && a->structure == b->structure &&
           cr__same_extents(a, b);
}

/* Whether two integer (or bool) arrays of the same shape hold the same elements. */
static bool same_ints(const cr_array *a, const cr_array *b)
{
    size_t n = cr_array_numel(a);
    for (size_t e = 0; e < n; e++) {
        cr_complex u = cr_array_get_linear(a, e), w = cr_array_get_linear(b, e);
        if (u != w)
            return false;
    }
    return true;
}

/* Install element k (-1: the only result) of a new result yn, recorded as yr, encoded as
 * code (cr__anode.outs, or for the only result: its slot or CR_VAR_CONST for a scalar). */
static cr_status install(cr_tape *t, const cr__anode *nd, long k, const cr_value *yr,
                         const cr_value *yn, uint32_t code, double *v, uint32_t first)
{
    char el[48] = "";
    if (k >= 0)
        snprintf(el, sizeof el, " (tuple element %ld)", k);
    if (yr->kind != yn->kind)
        return cr_ctx_error(t->ctx, CR_ESHAPE,
                            "prepared gradient: %s gives a %s%s at these inputs, a %s when "
                            "recorded; prepare it again",
                            nd->fname, cr_kind_name(yn->kind), el, cr_kind_name(yr->kind));
    switch (yn->kind) {
    case CR_KIND_F64:
    case CR_KIND_F32:
        v[first + (code == CR_VAR_CONST ? 0 : code)] =
            yn->kind == CR_KIND_F64 ? yn->u.f64 : (double)yn->u.f32;
        return CR_OK;
    case CR_KIND_ARRAY: {
        const cr_array *a = yn->u.arr, *b = yr->u.arr;
        if (a == NULL || !same_shape(a, b)) {
            char s1[96], s2[96];
            return cr_ctx_error(t->ctx, CR_ESHAPE,
                                "prepared gradient: %s gives a %s array%s at these inputs, a %s "
                                "array when recorded; prepare it again",
                                nd->fname, a ? cr__dtype_shape_str(a, s1, sizeof s1) : "NULL", el,
                                cr__dtype_shape_str(b, s2, sizeof s2));
        }
        if (code != CR_VAR_CONST) {
            t->avars.slots[code & ~CR__ASLOT_BIT].val = a;
            return CR_OK;
        }
        if (same_ints(a, b))
            return CR_OK;
        break;
    }
    case CR_KIND_I64:
    case CR_KIND_I32:
        if (yn->u.i64 == yr->u.i64)
            return CR_OK;
        return cr_ctx_error(t->ctx, CR_EDOMAIN,
                            "prepared gradient: %s%s is %lld at these inputs and was %lld when "
                            "recorded; the function may use it as a constant (an index): "
                            "prepare it again at these inputs",
                            nd->fname, el, (long long)yn->u.i64, (long long)yr->u.i64);
    case CR_KIND_BOOL:
        if (yn->u.b == yr->u.b)
            return CR_OK;
        break;
    default:
        break;
    }
    return cr_ctx_error(t->ctx, CR_EDOMAIN,
                        "prepared gradient: %s%s (integers) differs from its value when "
                        "recorded; the function may use it as a constant: prepare it again at "
                        "these inputs",
                        nd->fname, el);
}

/* The rerun step (cr__anode_ops): the rrule called again at the current values (the rule
 * looked up when preparing: the arguments' kinds are those of the recording), the new result
 * checked against the recorded one and installed. */
static cr_status call_rerun(cr_tape *t, cr__anode *nd, const cr__rule_ref *rule, double *v,
                            uint32_t res, cr_value *ynew)
{
    for (size_t j = 0; j < nd->nargs; j++) {
        uint32_t c = nd->args[j];
        if (c == CR_VAR_CONST)
            continue;
        if (c & CR__ASLOT_BIT)
            nd->vals[j] =
                cr_value_array((cr_array *)(uintptr_t)t->avars.slots[c & ~CR__ASLOT_BIT].val);
        else
            nd->vals[j] = cr_value_f64(v[c]);
    }
    cr_value y;
    cr_pullback pb;
    cr_status st = rule->rrule != NULL
                       ? cr__rrule_with(t->config, t->arena, rule->rrule, rule->udata, &nd->fv,
                                        nd->vals, nd->nargs, &y, &pb)
                       : cr_rrule(t->config, t->arena, &nd->fv, nd->vals, nd->nargs, &y, &pb);
    if (st != CR_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", cr_ctx_errmsg(t->ctx));
        if (st == CR_NOTHING)
            st = CR_ENORULE;
        return cr_ctx_error(t->ctx, st, "prepared gradient: %s failed at these inputs: %s",
                            nd->fname,
                            msg[0] != '\0' ? cr__after_name(msg, nd->fname) : cr_status_str(st));
    }
    if (nd->nout == 0) {
        st = install(t, nd, -1, &nd->y, &y, nd->out, v, res);
    } else {
        const cr_type *ty = y.kind == CR_KIND_STRUCT ? y.u.obj.type : NULL;
        if (ty == NULL || ty->nfields != nd->nout)
            return cr_ctx_error(t->ctx, CR_ESHAPE,
                                "prepared gradient: %s gives a %s at these inputs, a tuple of %u "
                                "elements when recorded",
                                nd->fname, ty ? ty->name : cr_kind_name(y.kind),
                                (unsigned)nd->nout);
        for (size_t k = 0; k < nd->nout && st == CR_OK; k++) {
            cr_value en, er;
            if (cr_type_field_value(ty, y.u.obj.ptr, k, &en) != CR_OK ||
                cr_type_field_value(nd->y.u.obj.type, nd->y.u.obj.ptr, k, &er) != CR_OK)
                return cr_ctx_error(t->ctx, CR_EINVAL,
                                    "prepared gradient: %s: unreadable tuple element %zu",
                                    nd->fname, k);
            st = install(t, nd, (long)k, &er, &en, nd->outs[k], v, res);
        }
    }
    if (st == CR_OK) {
        nd->pb = pb;
        if (ynew != NULL)
            *ynew = y;
    }
    return st;
}

/* ---- Array inputs ----------------------------------------------------------------------- */

/* The steps of an array call's record, as the sweeps and prepared replays call them. */
static const cr__anode_ops k_call_ops = {call_pull, call_forward, call_pull2, call_rerun,
                                         .calls_rule = true};
