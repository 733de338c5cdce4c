/*
 * Prepared gradients of functions of arrays: an array function's record is replayed by
 * calling its rrule again with the new argument values (the rules define the derivatives;
 * the new pullback is the derivative at the new point), in the tape's arena above the mark
 * taken after recording, rewound at each call. A result of another shape, kind or dtype
 * than when recorded, or an integer tuple element that changed, stops the replay.
 */
#include <stdio.h>
#include <string.h>

#include "../rules/array_rule_impl.h"
#include "prepared_impl.h"

/* "f64 3x4" */
static const char *shape_of(const cr_array *a, char *buf, size_t size)
{
    char s[64];
    snprintf(buf, size, "%s %s", cr_dtype_name((cr_dtype)a->dtype), cr__shape_str(a, s, sizeof s));
    return buf;
}

/* Whether a and b (of the same ndim) have the same extents: a loop over a few dimensions,
 * cheaper than a call of memcmp. */
static inline bool same_extents(const cr_array *a, const cr_array *b)
{
    for (size_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
}

static bool same_shape(const cr_array *a, const cr_array *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim || a->structure != b->structure)
        return false;
    for (size_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return false;
    return true;
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
static cr_status install(cr_prepared *p, const cr__anode *nd, long k, const cr_value *yr,
                         const cr_value *yn, uint32_t code, double *v, uint32_t first)
{
    cr_tape *t = p->tape;
    char el[48] = "";
    if (k >= 0)
        snprintf(el, sizeof el, " (tuple element %ld)", k);
    if (yr->kind != yn->kind)
        return cr_ctx_error(p->ctx, CR_ESHAPE,
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
            return cr_ctx_error(p->ctx, CR_ESHAPE,
                                "prepared gradient: %s gives a %s array%s at these inputs, a %s "
                                "array when recorded; prepare it again",
                                nd->fname, a ? shape_of(a, s1, sizeof s1) : "NULL", el,
                                shape_of(b, s2, sizeof s2));
        }
        if (code != CR_VAR_CONST) {
            t->aslots[code & ~CR__ASLOT_BIT].val = a;
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
        return cr_ctx_error(p->ctx, CR_EDOMAIN,
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
    return cr_ctx_error(p->ctx, CR_EDOMAIN,
                        "prepared gradient: %s%s (integers) differs from its value when "
                        "recorded; the function may use it as a constant: prepare it again at "
                        "these inputs",
                        nd->fname, el);
}

cr_status cr__prepared_rerun(cr_prepared *p, const cr__rop *r, double *v, cr_value *ynew)
{
    cr_tape *t = p->tape;
    cr__anode *nd = r->ptr;
    if (nd->pull != NULL) /* a fused kernel: its loops, not a rule */
        return cr__kernel_rerun(t, nd, v, r->res);
    for (size_t j = 0; j < nd->nargs; j++) {
        uint32_t c = nd->args[j];
        if (c == CR_VAR_CONST)
            continue;
        if (c & CR__ASLOT_BIT)
            nd->vals[j] = cr_value_array((cr_array *)(uintptr_t)t->aslots[c & ~CR__ASLOT_BIT].val);
        else
            nd->vals[j] = cr_value_f64(v[c]);
    }
    cr_value y;
    cr_pullback pb;
    /* The rule looked up when preparing (the arguments' kinds are those of the recording). */
    cr_status st = r->rule.rrule != NULL
                       ? cr__rrule_with(t->config, t->arena, r->rule.rrule, r->rule.udata, &nd->fv,
                                        nd->vals, nd->nargs, &y, &pb)
                       : cr_rrule(t->config, t->arena, &nd->fv, nd->vals, nd->nargs, &y, &pb);
    if (st != CR_OK) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s", cr_ctx_errmsg(p->ctx));
        if (st == CR_NOTHING)
            st = CR_ENORULE;
        return cr_ctx_error(p->ctx, st, "prepared gradient: %s failed at these inputs: %s",
                            nd->fname,
                            msg[0] != '\0' ? cr__after_name(msg, nd->fname) : cr_status_str(st));
    }
    if (nd->nout == 0) {
        st = install(p, nd, -1, &nd->y, &y, nd->out, v, r->res);
    } else {
        const cr_type *ty = y.kind == CR_KIND_STRUCT ? y.u.obj.type : NULL;
        if (ty == NULL || ty->nfields != nd->nout)
            return cr_ctx_error(p->ctx, CR_ESHAPE,
                                "prepared gradient: %s gives a %s at these inputs, a tuple of %u "
                                "elements when recorded",
                                nd->fname, ty ? ty->name : cr_kind_name(y.kind),
                                (unsigned)nd->nout);
        for (size_t k = 0; k < nd->nout && st == CR_OK; k++) {
            cr_value en, er;
            if (cr_type_field_value(ty, y.u.obj.ptr, k, &en) != CR_OK ||
                cr_type_field_value(nd->y.u.obj.type, nd->y.u.obj.ptr, k, &er) != CR_OK)
                return cr_ctx_error(p->ctx, CR_EINVAL,
                                    "prepared gradient: %s: unreadable tuple element %zu",
                                    nd->fname, k);
            st = install(p, nd, (long)k, &er, &en, nd->outs[k], v, r->res);
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

cr_status cr__prepare_arrays(cr_ctx *ctx, const cr_engine *eng, cr_ad_array_fn f, void *env,
                             const cr_array *const *xs, size_t n, const char *who, bool second,
                             cr_prepared **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "%s: out is NULL", who);
    *out = NULL;
    if (ctx == NULL)
        return CR_EINVAL;
    if (f == NULL || n == 0 || xs == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "%s: NULL function or no inputs", who);
    for (size_t j = 0; j < n; j++)
        if (xs[j] == NULL || !cr_dtype_is_float((cr_dtype)xs[j]->dtype))
            return cr_ctx_error(ctx, CR_EINVAL, "%s: input %zu is %s", who, j,
                                xs[j] == NULL ? "NULL" : "not a float array (f64, f32, c128)");
    cr_prepared *p;
    cr_status st = cr__prepared_new(ctx, eng, n, second, &p);
    if (p == NULL)
        return st;
    p->arrays = true;
    p->y = cr_const(0.0);
    cr_avar *av = NULL;
    cr_tape *t = p->tape;
    if (st == CR_OK) {
        p->ain = cr_ctx_alloc(ctx, n * sizeof *p->ain);
        p->aidx = cr_ctx_alloc(ctx, n * sizeof *p->aidx);
        av = cr_arena_alloc(t->arena, n * sizeof *av, _Alignof(cr_avar));
        if (p->ain == NULL || p->aidx == NULL || av == NULL)
            st = CR_ENOMEM;
    }
    for (size_t j = 0; j < n && st == CR_OK; j++) {
        av[j] = cr_tape_array_input(t, xs[j]);
        if ((st = cr_tape_status(t)) != CR_OK)
            break;
        p->ain[j] = *xs[j];
        p->ain[j].data = NULL;
        p->aidx[j] = av[j].idx;
    }
    if (st == CR_OK) {
        st = f(t, av, n, &p->y, env);
        if (st == CR_OK)
            st = cr_tape_status(t);
        if (st != CR_OK && cr_tape_status(t) != CR_OK)
            cr_ctx_error(ctx, st, "%s", cr_tape_errmsg(t));
    }
    if (st == CR_OK && p->y.idx != CR_VAR_CONST && (p->y.tape != t->id || p->y.idx >= t->nvars))
        st = cr_ctx_error(ctx, CR_ETAPE, "%s: the output belongs to another tape", who);
    if (st == CR_OK && t->ninputs != 0)
        st = cr_ctx_error(ctx, CR_EINVAL,
                          "%s: the function made %zu scalar input%s of its own; a prepared "
                          "gradient replays with the given inputs only",
                          who, t->ninputs, CR__S(t->ninputs));
    if (st == CR_OK)
        st = cr__prepared_build(p);
    if (st == CR_OK && t->naslots != n + p->nres_slots)
        st = cr_ctx_error(ctx, CR_EINVAL,
                          "%s: the function made %zu array input%s of its own; a prepared "
                          "gradient replays with the given inputs only",
                          who, (size_t)t->naslots - n - p->nres_slots,
                          CR__S((size_t)t->naslots - n - p->nres_slots));
    if (st != CR_OK) {
        cr_prepared_free(p);
        return st;
    }
    cr__array_clear(t);
    *out = p;
    return CR_OK;
}

cr_status cr_prepare_gradient_arrays(cr_ctx *ctx, const cr_engine *eng, cr_ad_array_fn f, void *env,
                                     const cr_array *const *xs, size_t n, cr_prepared **out)
{
    return cr__prepare_arrays(ctx, eng, f, env, xs, n, "cr_prepare_gradient_arrays", false, out);
}

cr_status cr__prepared_check_arrays(cr_prepared *p, const char *who, const cr_array *const *xs,
                                    size_t n, cr_array *const *outs, const char *what)
{
    if (n != p->n)
        return cr_ctx_error(p->ctx, CR_ESHAPE, "%s: prepared for %zu array%s, %zu given", who, p->n,
                            CR__S(p->n), n);
    for (size_t j = 0; j < n; j++) {
        if (xs[j] == NULL || (outs != NULL && outs[j] == NULL))
            return cr_ctx_error(p->ctx, CR_EINVAL, "%s: input or %s %zu is NULL", who, what, j);
        if (xs[j]->dtype != p->ain[j].dtype || xs[j]->ndim != p->ain[j].ndim ||
            !same_extents(xs[j], &p->ain[j])) {
            char s1[96], s2[96];
            return cr_ctx_error(p->ctx, CR_ESHAPE, "%s: input %zu is %s, prepared for %s", who, j,
                                shape_of(xs[j], s1, sizeof s1),
                                shape_of(&p->ain[j], s2, sizeof s2));
        }
        /* The rules and forms chosen when recording are those of the structure recorded (a
         * second-order form may not cover another one). */
        if (xs[j]->structure != p->ain[j].structure)
            return cr_ctx_error(p->ctx, CR_ESHAPE,
                                "%s: input %zu is a %s matrix, prepared for a %s one", who, j,
                                cr_matstruct_name((cr_matstruct)xs[j]->structure),
                                cr_matstruct_name((cr_matstruct)p->ain[j].structure));
        if (xs[j]->data == NULL && cr_array_numel(xs[j]) > 0)
            return cr_ctx_error(p->ctx, CR_EINVAL, "%s: input %zu has NULL data", who, j);
        if (outs != NULL && (outs[j]->ndim > CR_ARRAY_MAX_DIMS ||
                             cr_array_numel(outs[j]) != cr_array_numel(xs[j]))) {
            char s1[96], s2[96];
            return cr_ctx_error(p->ctx, CR_ESHAPE, "%s: %s %zu is %s, its input %s", who, what, j,
                                shape_of(outs[j], s1, sizeof s1), shape_of(xs[j], s2, sizeof s2));
        }
        /* Refused here, before anything is evaluated or written, rather than when written
         * (cr__array_write_out), after the outputs before it. */
        if (outs != NULL &&
            (outs[j]->data == NULL || !cr_dtype_is_float((cr_dtype)outs[j]->dtype) ||
             outs[j]->structure != CR_MAT_DENSE))
            return cr_ctx_error(p->ctx, CR_EINVAL,
                                "%s: %s %zu is NULL, structured or not a float array", who, what,
                                j);
    }
    return CR_OK;
}

cr_status cr_prepared_value_and_gradient_arrays(cr_prepared *p, const cr_array *const *xs, size_t n,
                                                double *y, cr_array *const *grads)
{
    const char *who = "cr_prepared_value_and_gradient_arrays";
    if (p == NULL)
        return CR_EINVAL;
    if (!p->arrays)
        return cr_ctx_error(p->ctx, CR_EINVAL,
                            "%s: prepared for scalars; call cr_prepared_value_and_gradient", who);
    if (xs == NULL || grads == NULL)
        return cr_ctx_error(p->ctx, CR_EINVAL, "%s: NULL inputs or gradients", who);
    cr_status st = cr__prepared_check_arrays(p, who, xs, n, grads, "gradient array");
    if (st != CR_OK)
        return st;
    cr_tape *t = p->tape;
    cr__prepared_begin(p);
    for (size_t j = 0; j < n; j++)
        t->aslots[p->aidx[j]].val = xs[j];
    double yv = p->y.v;
    if (p->y.idx != CR_VAR_CONST) {
        /* The shadows may live in the gradient arrays (as in cr_tape_gradient_arrays). */
        cr_avar few[4];
        cr_avar *as = n <= 4 ? few : cr_arena_alloc(t->arena, n * sizeof *as, _Alignof(cr_avar));
        if (as == NULL)
            st = CR__ALLOC_STATUS(t->arena);
        for (size_t j = 0; j < n && st == CR_OK; j++) {
            as[j].a = xs[j];
            as[j].idx = p->aidx[j];
            as[j].tape = t->id;
        }
        if (st == CR_OK)
            st = cr__gradient_dests(t, as, n, grads);
        if (st == CR_OK)
            st = cr__prepared_run(p, NULL);
        yv = p->vals[p->y.idx];
    } else {
        cr__array_clear(t);
        if (p->has_arrays) /* the comparisons that may have chosen the constant */
            st = cr__prepared_run(p, NULL);
    }
    for (size_t j = 0; j < n && st == CR_OK; j++) {
        /* The shadow is the gradient array (cr__gradient_dests): tested on the fields, as
         * cr_tape_gradient_arrays does (a copy of the accumulator would load its tag and
         * pointer as one word that waits for the reverse step's two stores). */
        const cr_tangent *acc = &t->aslots[p->aidx[j]].acc;
        if (acc->tag == CR_TAN_ARRAY && acc->u.arr == grads[j])
            continue;
        st = cr__array_write_out(t, who, "gradient array", j, *acc, grads[j], xs[j]);
    }
    /* Accumulators cleared and destinations forgotten, in one pass: the next call finds
     * them clear (cr__prepared_run need not clear them again). */
    for (uint32_t k = 0; k < t->naslots; k++) {
        t->aslots[k].acc = cr__tzero();
        t->aslots[k].dest = NULL;
    }
    if (st == CR_OK && y != NULL)
        *y = yv;
    return st;
}
