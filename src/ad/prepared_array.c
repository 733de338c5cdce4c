/*
 * Prepared gradients of functions of arrays: preparing (the recording on a replay tape),
 * checking the new inputs against the recorded ones, and the value-and-gradient calls. Each
 * array function's record is replayed by its node's rerun step (node_array.c).
 */
#include <stdio.h>
#include <string.h>

#include "../rules/array_rule_impl.h"
#include "prepared_impl.h"

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
    size_t bin = 0, bidx = 0;
    if (st == CR_OK && (st = cr__ck_mul(ctx, who, n, sizeof *p->ain, &bin)) == CR_OK)
        st = cr__ck_mul(ctx, who, n, sizeof *p->aidx, &bidx);
    if (st == CR_OK) {
        p->ain = cr_ctx_alloc(ctx, bin);
        p->aidx = cr_ctx_alloc(ctx, bidx);
        av = cr__arena_array(t->arena, who, n, sizeof *av, _Alignof(cr_avar));
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
    if (st == CR_OK && t->avars.n != n + p->nres_slots)
        st = cr_ctx_error(ctx, CR_EINVAL,
                          "%s: the function made %zu array input%s of its own; a prepared "
                          "gradient replays with the given inputs only",
                          who, (size_t)t->avars.n - n - p->nres_slots,
                          CR__S((size_t)t->avars.n - n - p->nres_slots));
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
            !cr__same_extents(xs[j], &p->ain[j])) {
            char s1[96], s2[96];
            return cr_ctx_error(p->ctx, CR_ESHAPE, "%s: input %zu is %s, prepared for %s", who, j,
                                cr__dtype_shape_str(xs[j], s1, sizeof s1),
                                cr__dtype_shape_str(&p->ain[j], s2, sizeof s2));
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
                                cr__dtype_shape_str(outs[j], s1, sizeof s1),
                                cr__dtype_shape_str(xs[j], s2, sizeof s2));
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
        t->avars.slots[p->aidx[j]].val = xs[j];
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
        const cr_tangent *acc = &t->avars.slots[p->aidx[j]].acc;
        if (acc->tag == CR_TAN_ARRAY && acc->u.arr == grads[j])
            continue;
        st = cr__array_write_out(t, who, "gradient array", j, *acc, grads[j], xs[j]);
    }
    /* Accumulators cleared and destinations forgotten, in one pass: the next call finds
     * them clear (cr__prepared_run need not clear them again). */
    for (uint32_t k = 0; k < t->avars.n; k++) {
        t->avars.slots[k].acc = cr__tzero();
        t->avars.slots[k].dest = NULL;
    }
    if (st == CR_OK && y != NULL)
        *y = yv;
    return st;
}
