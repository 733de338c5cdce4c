/*
 * Array variables on the reverse tape. An array function is recorded through its rrule
 * (the array and linear-algebra rule families): the tape keeps the pullback in a K_ARRAY
 * record. In the reverse sweep each array variable has a shadow, the cotangent accumulated
 * so far (cr__aslot.acc), which pullbacks add into with add!! (cr_tangent_accum): in place
 * once the shadow is a buffer the sweep owns, through the add! of an InplaceableThunk
 * without materialising it, and by adopting the first cotangent when the rule hands over a
 * fresh buffer. Scalar variables flow in and out of array functions through the same
 * records, so one tape holds scalar and array code.
 */
#include <complex.h>
#include <math.h>
#include <string.h>

#include <chainrules/rules_array.h>
#include <chainrules/rules_linalg.h>

#include "../rules/array_rule_impl.h"
#include "tape_impl.h"

#define MAX_ARGS 16

/* Scalar variables whose adjoints a sweep keeps on the stack. */
#define SMALL_WS 64

/* NULL too for a call that a checked tape refuses (cr__tape_misused). */
static inline cr_tape *tape_or_current(cr_tape *t)
{
    t = t != NULL ? t : cr_tape_current();
    return t != NULL && cr__tape_misused(t) ? NULL : t;
}

cr_targ cr_targ_var(cr_var x)
{
    cr_targ r;
    r.kind = CR_TARG_VAR;
    r.u.s = x;
    return r;
}

cr_targ cr_targ_arr(cr_avar x)
{
    cr_targ r;
    r.kind = CR_TARG_ARR;
    r.u.a = x;
    return r;
}

cr_targ cr_targ_value(cr_value v)
{
    cr_targ r;
    r.kind = CR_TARG_VALUE;
    r.u.v = v;
    return r;
}

static cr_avar bad_avar(const cr_array *a)
{
    cr_avar r;
    r.a = a;
    r.idx = CR_VAR_CONST;
    r.tape = 0;
    return r;
}

/* Room for one more array slot: the tape's own few (a reset points the table at them; a
 * new tape has none yet), then a table in the arena four times as large. Out of line: a
 * small recording never takes it after its first reset. */
static NOINLINE cr_status more_slots(cr_tape *t)
{
    if (t->aslot_cap == 0) {
        t->aslots = t->aslot_few;
        t->aslot_cap = CR__ASLOT_FEW;
        return CR_OK;
    }
    uint32_t cap = 4 * t->aslot_cap;
    if (cap >= CR__ASLOT_BIT)
        return cr__tape_fail(t, CR_EOVERFLOW, "tape: too many array variables");
    cr__aslot *s = cr_arena_alloc(t->arena, cap * sizeof *s, _Alignof(cr__aslot));
    if (s == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), "tape: array variables");
    if (t->naslots)
        memcpy(s, t->aslots, t->naslots * sizeof *s);
    t->aslots = s;
    t->aslot_cap = cap;
    return CR_OK;
}

/* A new array slot holding val; its index in *idx. Inline: one test and four stores. */
static ALWAYS_INLINE cr_status new_slot(cr_tape *t, const cr_array *val, bool input, uint32_t *idx)
{
    if (t->naslots == t->aslot_cap) {
        cr_status st = more_slots(t);
        if (st != CR_OK)
            return st;
    }
    cr__aslot *s = &t->aslots[t->naslots];
    s->val = val;
    s->acc = cr__tzero();
    s->dest = NULL;
    s->input = input;
    *idx = t->naslots++;
    return CR_OK;
}

cr_status cr__array_slot(cr_tape *t, const cr_array *val, uint32_t *idx)
{
    return new_slot(t, val, false, idx);
}

/* cr_tape_array_input on a tape (not NULL). Inline: cr_tape_value_and_gradient_arrays makes
 * its inputs without a call per input. */
static ALWAYS_INLINE cr_avar array_input(cr_tape *t, const cr_array *a)
{
    if (t->status != CR_OK)
        return bad_avar(a);
    if (a == NULL || !cr_dtype_is_float((cr_dtype)a->dtype)) {
        cr__tape_fail(t, CR_EINVAL, "cr_tape_array_input: %s",
                      a == NULL ? "NULL array" : "not a float array (f64, f32 or c128)");
        return bad_avar(a);
    }
    if (a->ndim > CR_ARRAY_MAX_DIMS || (a->data == NULL && cr_array_numel(a) > 0)) {
        cr__tape_fail(t, CR_EINVAL, "cr_tape_array_input: %s",
                      a->ndim > CR_ARRAY_MAX_DIMS ? "more than CR_ARRAY_MAX_DIMS dimensions"
                                                  : "NULL data with elements");
        return bad_avar(a);
    }
    uint32_t idx = 0;
    if (new_slot(t, a, true, &idx) != CR_OK)
        return bad_avar(a);
    cr_avar r;
    r.a = a;
    r.idx = idx;
    r.tape = t->id;
    return r;
}

cr_avar cr_tape_array_input(cr_tape *t, const cr_array *a)
{
    if ((t = tape_or_current(t)) == NULL)
        return bad_avar(a);
    return array_input(t, a);
}

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
        if (a->u.a.tape != t->id || a->u.a.idx >= t->naslots)
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
        *out = cr_targ_var(cr_const((double)NAN));
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
        *out = cr_targ_var(r);
        *aslot = CR_VAR_CONST;
        return CR_OK;
    }
    case CR_KIND_ARRAY:
        if (y->u.arr != NULL && cr_dtype_is_float((cr_dtype)y->u.arr->dtype)) {
            cr_avar r = cr_aconst(y->u.arr);
            if (is_var) {
                uint32_t idx;
                if (new_slot(t, y->u.arr, false, &idx) != CR_OK)
                    return t->status;
                r.idx = idx;
                r.tape = t->id;
                *aslot = idx;
            }
            *out = cr_targ_arr(r);
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
    uint32_t slot0 = t->naslots;
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
            out[k] = cr_targ_var(r);
            break;
        }
        case CR_KIND_ARRAY:
            if (e.u.arr != NULL && cr_dtype_is_float((cr_dtype)e.u.arr->dtype)) {
                cr_avar r = cr_aconst(e.u.arr);
                if (is_var) {
                    uint32_t idx;
                    if (new_slot(t, e.u.arr, false, &idx) != CR_OK) {
                        t->naslots = slot0;
                        return t->status;
                    }
                    r.idx = idx;
                    r.tape = t->id;
                    outs[k] = idx | CR__ASLOT_BIT;
                }
                out[k] = cr_targ_arr(r);
            } else {
                out[k] = cr_targ_value(e); /* integer indices or pivots: constants */
                outs[k] = CR_VAR_CONST;
            }
            break;
        case CR_KIND_I64:
        case CR_KIND_I32:
        case CR_KIND_BOOL:
            out[k] = cr_targ_value(e);
            outs[k] = CR_VAR_CONST;
            break;
        default:
            ok = false;
            break;
        }
        if (!ok) {
            t->naslots = slot0;
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
    if ((t = tape_or_current(t)) == NULL)
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
    if (nout == 1 && nargs >= 2 && nargs <= MAX_ARGS && !t->check_finite &&
        (f->u.func.fn == cr_fn_broadcast.u.func.fn ||
         (f->u.func.fn == cr_fn_map.u.func.fn && arrays_only(args + 1, nargs - 1))) &&
        args[0].kind == CR_TARG_VALUE && args[0].u.v.kind == CR_KIND_FUNC &&
        builtin_rule(t, f, args, nargs)) {
        cr_status st = cr__kernel_broadcast(t, f->u.func.fn->name, args[0].u.v.u.func.fn, args + 1,
                                            nargs - 1, out);
        if (st != CR_NOTHING)
            return st;
    } else if (nout == 1 && !t->check_finite &&
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
        if (t->check_finite && cr__tape_check_finite_values(t, fname, vals, nargs, &y, 1) != CR_OK)
            return t->status;
        if (y.kind == CR_KIND_STRUCT) {
            st = tuple_of(t, fname, &y, out, nout, false, outs, &ns);
            if (st == CR_OK && t->check_finite)
                st = check_tuple(t, fname, vals, nargs, out, nout);
        } else if (nout != 1)
            st = cr__tape_fail(t, CR_EINVAL, "%s returns one value, %zu result%s expected", fname,
                               nout, CR__S(nout));
        else
            st = result_of(t, fname, &y, out, false, &aslot);
        return st == CR_OK ? CR_OK : t->status;
    }
    /* Forward and second-order tapes keep what their sweeps need (tape_array2.c). */
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
    if (t->check_finite && cr__tape_check_finite_values(t, fname, vals, nargs, &y, 1) != CR_OK)
        return t->status;
    cr_targ res[CR_TAPE_MAX_TUPLE];
    uint32_t slot0 = t->naslots;
    bool tuple = y.kind == CR_KIND_STRUCT;
    if (tuple) {
        if (tuple_of(t, fname, &y, res, nout, true, outs, &ns) != CR_OK ||
            (t->check_finite && check_tuple(t, fname, vals, nargs, res, nout) != CR_OK)) {
            t->naslots = slot0;
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
        t->naslots = slot0;
        return nd == NULL || ai == NULL ? cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), fname)
                                        : t->status;
    }
    memcpy(ai, codes, nargs * sizeof *ai);
    memcpy(ai + nargs, outs, (tuple ? nout : 0) * sizeof *ai);
    nd->pb = pb;
    nd->pull = NULL;
    nd->custom = 0;
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
        return bad_avar(NULL);
    if (r.kind != CR_TARG_ARR) {
        cr__tape_fail(tape_or_current(t), CR_EINVAL, "%s gives a scalar, an array was expected",
                      f->u.func.fn->name);
        return bad_avar(NULL);
    }
    return r.u.a;
}

cr_var cr_tape_acall_s(cr_tape *t, const cr_value *f, const cr_targ *args, size_t nargs)
{
    cr_targ r;
    if (cr_tape_acall(t, f, args, nargs, &r) != CR_OK)
        return cr_const((double)NAN);
    if (r.kind != CR_TARG_VAR) {
        cr__tape_fail(tape_or_current(t), CR_EINVAL, "%s gives an array, a scalar was expected",
                      f->u.func.fn->name);
        return cr_const((double)NAN);
    }
    return r.u.s;
}

cr_avar cr_abroadcast1(cr_tape *t, const cr_value *f, cr_targ x)
{
    cr_targ a[2] = {cr_targ_value(*f), x};
    return cr_tape_acall_a(t, &cr_fn_broadcast, a, 2);
}

cr_avar cr_abroadcast2(cr_tape *t, const cr_value *f, cr_targ x, cr_targ y)
{
    cr_targ a[3] = {cr_targ_value(*f), x, y};
    return cr_tape_acall_a(t, &cr_fn_broadcast, a, 3);
}

cr_var cr_asum(cr_tape *t, cr_avar x)
{
    cr_targ a = cr_targ_arr(x);
    return cr_tape_acall_s(t, &cr_fn_sum, &a, 1);
}

cr_var cr_adot(cr_tape *t, cr_avar x, cr_avar y)
{
    cr_targ a[2] = {cr_targ_arr(x), cr_targ_arr(y)};
    return cr_tape_acall_s(t, &cr_fn_dot, a, 2);
}

cr_avar cr_aslice(cr_tape *t, cr_avar x, int64_t start, int64_t stop)
{
    cr_range *r;
    cr_tape *tt = tape_or_current(t);
    if (tt == NULL)
        return bad_avar(NULL);
    if (tt->status != CR_OK)
        return bad_avar(NULL);
    if ((r = cr_arena_alloc(tt->arena, sizeof *r, _Alignof(cr_range))) == NULL) {
        cr__tape_fail_ctx(tt, CR__ALLOC_STATUS(tt->arena), "cr_aslice");
        return bad_avar(NULL);
    }
    r->start = start;
    r->stop = stop;
    r->step = 1;
    cr_targ a[2] = {cr_targ_arr(x), cr_targ_value(cr_value_struct(&cr_range_type, r))};
    return cr_tape_acall_a(tt, &cr_fn_view, a, 2);
}

cr_avar cr_amatmul(cr_tape *t, cr_avar A, cr_avar B)
{
    cr_targ a[2] = {cr_targ_arr(A), cr_targ_arr(B)};
    return cr_tape_acall_a(t, &cr_fn_matmul, a, 2);
}

/* ---- The reverse step ------------------------------------------------------------------- */

void cr__array_clear(cr_tape *t)
{
    for (uint32_t s = 0; s < t->naslots; s++)
        t->aslots[s].acc = cr__tzero();
}

/* A writable array cotangent sharing memory with the seed or with another cotangent of the
 * same pullback must not be mutated by add!!: give it to the accumulator read only. */
cr_status cr__guard_alias(cr_arena *arena, const cr_tangent *dy, cr_tangent *dx, size_t nx,
                          size_t j)
{
    cr_tangent *d = &dx[j];
    if (d->tag != CR_TAN_ARRAY || !(d->u.arr->flags & CR_ARRAY_WRITABLE))
        return CR_OK;
    bool shared = dy->tag == CR_TAN_ARRAY && dy->u.arr->data == d->u.arr->data;
    for (size_t k = 1; k < nx && !shared; k++)
        shared = k != j && dx[k].tag == CR_TAN_ARRAY && dx[k].u.arr->data == d->u.arr->data;
    if (!shared)
        return CR_OK;
    cr_array *v;
    cr_status st = cr__view_of(arena, d->u.arr, &v);
    if (st == CR_OK)
        d->u.arr = v;
    return st;
}

/* The caller's gradient array dest as a shadow add!! may write in place: dest itself when
 * the caller flagged it CR_ARRAY_WRITABLE, else a writable copy of its descriptor (same
 * memory). Made only when a generic pullback adds into the shadow: the kernels' reverse
 * steps write into dest->data directly. */
static cr_status writable_dest(cr_arena *arena, cr_array *g, cr_array **out)
{
    if (g->flags & CR_ARRAY_WRITABLE) {
        *out = g;
        return CR_OK;
    }
    /* Field by field: a struct copy compiles to a string instruction whose start-up costs
     * more than the fields; the dimensions as fixed-size copies (a few vector moves). */
    cr_array *d = cr_arena_alloc(arena, sizeof *d, _Alignof(cr_array));
    if (d == NULL)
        return CR__ALLOC_STATUS(arena);
    d->data = g->data;
    memcpy(d->shape, g->shape, sizeof d->shape);
    memcpy(d->strides, g->strides, sizeof d->strides);
    d->dtype = g->dtype;
    d->ndim = g->ndim;
    d->structure = g->structure;
    d->flags = g->flags | CR_ARRAY_WRITABLE;
    *out = d;
    return CR_OK;
}

/* Add a cotangent into an array variable's shadow. The first one is adopted when the rule
 * handed over a buffer nobody else holds (a writable dense array of the work dtype);
 * otherwise the shadow is a zeroed buffer the sweep owns, and add!! writes into it in place
 * (an InplaceableThunk through its add!, without materialising its value). */
cr_status cr__shadow_accum(cr_arena *arena, cr__aslot *s, cr_tangent d)
{
    if (cr__tis_zero(d))
        return CR_OK;
    if (s->dest != NULL) {
        /* The caller's gradient array is the shadow (see cr__gradient_dests): zeroed when
         * it is fresh, given a writable descriptor for add!! (once). */
        if (cr__tis_zero(s->acc)) {
            memset(s->dest->data, 0, cr_array_numel(s->dest) * sizeof(double));
            s->acc = cr__tarray(s->dest);
        }
        if (s->acc.tag == CR_TAN_ARRAY && s->acc.u.arr == s->dest) {
            cr_array *w = NULL;
            cr_status st = writable_dest(arena, s->dest, &w);
            if (st != CR_OK)
                return st;
            s->acc = cr__tarray(w);
        }
    }
    if (cr__tis_zero(s->acc)) {
        const cr_array *v = s->val;
        cr_dtype wdt = cr__work((cr_dtype)v->dtype);
        if (d.tag == CR_TAN_ARRAY && (d.u.arr->flags & CR_ARRAY_WRITABLE) &&
            d.u.arr->dtype == (uint8_t)v->dtype && cr__is_contig_dense(d.u.arr) &&
            (v->dtype == CR_DT_F32 || d.u.arr->dtype == (uint8_t)wdt)) {
            s->acc = d;
            return CR_OK;
        }
        if (d.tag == CR_TAN_ARRAY || cr_tangent_is_thunk(d)) {
            cr_array *buf;
            cr_status st = cr__new(arena, v->dtype == CR_DT_F32 ? CR_DT_F32 : wdt, v->ndim,
                                   v->shape, true, &buf);
            if (st != CR_OK)
                return st;
            s->acc = cr__tarray(buf);
        }
    }
    return cr_tangent_accum(arena, s->acc, d, &s->acc);
}

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
                f[o] = t->aslots[s].acc;
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

cr_status cr__array_pull(cr_tape *t, const cr__anode *nd, const double *g, double *adj)
{
    if (nd->pull != NULL)
        return nd->pull(t, nd, g, adj);
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
        dy = t->aslots[nd->out].acc;
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
            cr__aslot *s = &t->aslots[c & ~CR__ASLOT_BIT];
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
                t->aslots[nd->outs[k] & ~CR__ASLOT_BIT].acc = cr__tzero();
    } else if (g == NULL) {
        t->aslots[nd->out].acc = cr__tzero();
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
        cr__aslot *s = &t->aslots[as[j].idx];
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
        for (uint32_t k = 0; k < t->naslots && ok; k++)
            ok = (inputs_only && !t->aslots[k].input) || !overlaps(glo, ghi, t->aslots[k].val);
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
        if (as[j].idx != CR_VAR_CONST && !t->aslots[as[j].idx].input)
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
    /* The accumulators are cleared here rather than by cr__sweep_reverse (t->aseeded), so
     * that the gradient destinations see them clear; an array seed goes into its
     * accumulator after that. */
    cr__array_clear(t);
    t->aseeded = true;
    if (st == CR_OK && ybar != NULL) {
        cr_array *seed;
        if ((st = cr__view_of(t->arena, ybar, &seed)) == CR_OK)
            t->aslots[ay.idx].acc = cr__tarray(seed);
    }
    if (st == CR_OK)
        gradient_dests(t, as, na, agrad, false);
    if (st == CR_OK)
        st = cr__sweep_reverse(t, adj, top);
    t->aseeded = false;
    for (size_t j = 0; j < n && st == CR_OK; j++)
        grad[j] = xs[j].idx == CR_VAR_CONST ? 0.0 : adj[xs[j].idx];
    for (size_t j = 0; j < na && st == CR_OK; j++) {
        /* The shadow is the destination (gradient_dests): tested on the fields, since a copy
         * of the whole accumulator would be one 16-byte load of its tag and pointer, which
         * waits for the reverse step's separate stores of the two. */
        const cr_tangent *acc = as[j].idx == CR_VAR_CONST ? NULL : &t->aslots[as[j].idx].acc;
        if (acc != NULL && acc->tag == CR_TAN_ARRAY && acc->u.arr == agrad[j])
            continue;
        st = cr__array_write_out(t, who, "gradient array", j, acc != NULL ? *acc : cr__tzero(),
                                 agrad[j], as[j].a);
    }
    /* Accumulators cleared and destinations forgotten, in one pass. */
    for (uint32_t k = 0; k < t->naslots; k++) {
        t->aslots[k].acc = cr__tzero();
        t->aslots[k].dest = NULL;
    }
    cr_arena_rewind(t->arena, mk);
    return st;
}

cr_status cr_tape_gradient_arrays(cr_tape *t, cr_var y, const cr_var *xs, size_t n, double *grad,
                                  const cr_avar *as, size_t na, cr_array *const *agrad)
{
    return sweep_mixed(t, "cr_tape_gradient_arrays", y, bad_avar(NULL), NULL, xs, n, grad, as, na,
                       agrad, false);
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
        (in = cr_arena_alloc(t->arena, n * sizeof *in, _Alignof(cr_avar))) == NULL)
        return cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), who);
    for (size_t j = 0; j < n; j++)
        in[j] = array_input(t, xs[j]);
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
        return sweep_mixed(t, "cr_tape_gradient_arrays", out, bad_avar(NULL), NULL, NULL, 0, NULL,
                           in, 1, grads, true);
    return sweep_mixed(t, "cr_tape_gradient_arrays", out, bad_avar(NULL), NULL, NULL, 0, NULL, in,
                       n, grads, true);
}

cr_status cr_tape_avjp(cr_tape *t, cr_avar y, const cr_array *ybar, const cr_var *xs, size_t n,
                       double *xbar, const cr_avar *as, size_t na, cr_array *const *abar)
{
    const char *who = "cr_tape_avjp";
    if (t == NULL)
        return CR_EINVAL;
    if (cr__tape_misused(t))
        return CR_EMISUSE;
    if (t->status != CR_OK)
        return t->status;
    if (ybar == NULL || y.a == NULL)
        return cr_ctx_error(t->ctx, CR_EINVAL, "%s: NULL output or seed", who);
    cr_status cst = cr__check_avars(t, who, &y, 1, "array output");
    if (cst != CR_OK)
        return cst;
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
