/*
 * Scalar and array code mixed on the tape without cr_value arguments: scalar variables packed
 * into an array variable (cr_av_pack) and read back one by one (cr_av_getindex, cr_av_unpack), the
 * concatenation of any number of arrays (cr_av_cat), and dims and shapes given as C integers
 * (cr_targ_ints, cr_av_reshape, cr_av_sum_dims), and contractions by an index spec (cr_av_einsum,
 * cr_av_einsum1, cr_av_bmm).
 *
 * A pack on a first-order or forward tape is one operation with its own steps
 * (cr_tape_op_record: the reverse step copies the array's cotangent to the scalars', the
 * forward step the scalars' tangents to the array's). Second-order tapes and prepared
 * gradients do not take such operations, so there a pack is made of calls of array
 * functions with rules: vect (a vector of numbers, linear) of up to VECT_FAN scalars each,
 * and a tree of cats of at most PACK_FAN of those vectors (about n / 16 + n / 112 records;
 * each element is copied once per level, 1 + ceil(log8(n / 16)) levels), which every sweep
 * and replay takes as it takes any array function. Everything
 * else here is calls of array functions (cat, reshape, getindex, sum) through
 * cr_tape_acall(); a cat of more arrays than the rule takes is the same tree of cats.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <chainrules/rules_array.h>

#include "tape_impl.h"

#include "../core/checked.h"

/* Most arrays one call of cat takes (the rule's limit, rules_array.h). */
#define PACK_FAN 8

/* Most numbers one call of vect takes on the tape (cr_tape_acall takes at most 16 arguments). */
#define VECT_FAN 16

/* An i64 vector holding v[0..n) in the tape's arena (failing the tape on error). */
static cr_status ints_array(cr_tape *t, const char *who, const int64_t *v, size_t n, cr_array **out)
{
    if (n > 0 && v == NULL)
        return cr__tape_fail(t, CR_EINVAL, "%s: %zu integer%s given by a NULL pointer", who, n,
                             CR__S(n));
    cr_status st = cr_array_new(t->arena, CR_DT_I64, 1, &n, out);
    if (st != CR_OK)
        return cr__tape_fail_ctx(t, st, who);
    int64_t *d = (*out)->data;
    for (size_t i = 0; i < n; i++)
        d[i] = v[i];
    (*out)->flags = 0; /* read only, as the caller's dims were */
    return CR_OK;
}

cr_targ cr_targ_ints(cr_tape *t, const int64_t *v, size_t n)
{
    cr_value none;
    memset(&none, 0, sizeof none); /* CR_KIND_NOTHING */
    cr_targ bad = cr_targ_value(none);
    cr_tape *tt = cr__tape_or_current(t);
    cr_array *a;
    if (tt == NULL || tt->status != CR_OK || ints_array(tt, "cr_targ_ints", v, n, &a) != CR_OK)
        return bad;
    return cr_targ_value(cr_value_array(a));
}

/* Room for n array variables in the tape's arena (NULL, the tape failed, on error). */
static cr_avar *avars(cr_tape *t, const char *who, size_t n)
{
    cr_avar *a = cr__arena_array(t->arena, who, n, sizeof *a, _Alignof(cr_avar));
    if (a == NULL)
        cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), who);
    return a;
}

/* cat(dim, xs...) of n >= 1 arrays as a tree of calls of at most PACK_FAN arrays. The
 * level being reduced is kept in the arena (n may be large). */
static cr_avar cat_tree(cr_tape *t, const char *who, int64_t dim, const cr_avar *xs, size_t n)
{
    cr_targ args[PACK_FAN + 1];
    args[0] = cr_targ_value(cr_value_i64(dim));
    if (n <= PACK_FAN) {
        for (size_t j = 0; j < n; j++)
            args[j + 1] = cr_targ_arr(xs[j]);
        return cr_tape_acall_a(t, &cr_fn_cat, args, n + 1);
    }
    size_t m = n / PACK_FAN + (n % PACK_FAN != 0);
    cr_avar *lv = avars(t, who, m);
    if (lv == NULL)
        return cr__bad_avar(NULL);
    for (size_t g = 0, lo = 0; g < m; g++, lo += PACK_FAN) {
        size_t k = n - lo < PACK_FAN ? n - lo : PACK_FAN;
        for (size_t j = 0; j < k; j++)
            args[j + 1] = cr_targ_arr(xs[lo + j]);
        lv[g] = k == 1 ? xs[lo] : cr_tape_acall_a(t, &cr_fn_cat, args, k + 1);
        if (t->status != CR_OK)
            return cr__bad_avar(NULL);
    }
    return cat_tree(t, who, dim, lv, m);
}

cr_avar cr_av_cat(cr_tape *t, int64_t dim, const cr_avar *xs, size_t n)
{
    cr_tape *tt = cr__tape_or_current(t);
    if (tt == NULL || tt->status != CR_OK)
        return cr__bad_avar(NULL);
    if (n == 0 || xs == NULL) {
        cr__tape_fail(tt, CR_EINVAL, "cr_av_cat: %s", n == 0 ? "no arrays" : "xs is NULL");
        return cr__bad_avar(NULL);
    }
    return cat_tree(tt, "cr_av_cat", dim, xs, n);
}

/* The extents of a pack's result: shape[0..ndim) as sizes, their product checked against
 * n. shape NULL with ndim 0 is a vector of n. */
static cr_status pack_shape(cr_tape *t, size_t n, const int64_t *shape, size_t ndim, size_t *ext,
                            size_t *nd)
{
    if (shape == NULL && ndim == 0) {
        ext[0] = n;
        *nd = 1;
        return CR_OK;
    }
    if (shape == NULL)
        return cr__tape_fail(t, CR_EINVAL, "cr_av_pack: shape is NULL with %zu dimension%s", ndim,
                             CR__S(ndim));
    if (ndim > CR_ARRAY_MAX_DIMS)
        return cr__tape_fail(t, CR_EINVAL, "cr_av_pack: %zu dimensions (at most %d)", ndim,
                             CR_ARRAY_MAX_DIMS);
    size_t p = 1;
    for (size_t d = 0; d < ndim; d++) {
        if (!cr__i64_to_size(shape[d], &ext[d]))
            return cr__tape_fail(t, CR_EINVAL, "cr_av_pack: extent %zu is negative (%lld)", d,
                                 (long long)shape[d]);
        if (!cr__mul_size(p, ext[d], &p))
            return cr__tape_fail(t, CR_EOVERFLOW,
                                 "cr_av_pack: the shape's element count overflows");
    }
    if (p != n)
        return cr__tape_fail(t, CR_ESHAPE,
                             "cr_av_pack: a shape of %zu element%s for %zu variable%s", p, CR__S(p),
                             n, CR__S(n));
    *nd = ndim;
    return CR_OK;
}

/* The steps of a pack recorded as one operation: element i of the array is scalar i. */
static cr_status pack_copy(cr_tape *t, void *env, const double *in, double *out)
{
    (void)t;
    size_t n = *(const size_t *)env;
    for (size_t i = 0; i < n; i++)
        out[i] = in[i];
    return CR_OK;
}

static const cr_tape_op pack_steps = {"cr_av_pack", pack_copy, pack_copy};

/* A pack on a first-order or forward tape: one record, the array's values copied from the
 * scalars. */
static cr_avar pack_op(cr_tape *t, const cr_var *xs, size_t n, const size_t *ext, size_t nd)
{
    cr_array *y;
    size_t *env = cr_arena_alloc(t->arena, sizeof *env, _Alignof(size_t));
    cr_targ *in = NULL;
    cr_status st = cr_array_new(t->arena, CR_DT_F64, nd, ext, &y);
    if (st != CR_OK) {
        cr__tape_fail_ctx(t, st, "cr_av_pack");
        return cr__bad_avar(NULL);
    }
    in = cr__arena_array(t->arena, "cr_av_pack", n, sizeof *in, _Alignof(cr_targ));
    if (env == NULL || in == NULL) {
        cr__tape_fail_ctx(t, CR__ALLOC_STATUS(t->arena), "cr_av_pack");
        return cr__bad_avar(NULL);
    }
    *env = n;
    double *d = y->data;
    for (size_t i = 0; i < n; i++) {
        in[i] = cr_targ_var(xs[i]);
        d[i] = xs[i].v;
    }
    y->flags = 0; /* read only: pullbacks of later operations may keep it */
    cr_targ val = cr_targ_arr(cr_av_const(y)), out;
    if (cr_tape_op_record(t, &pack_steps, env, in, n, &val, &out, 1) != CR_OK)
        return cr__bad_avar(NULL);
    return out.u.a;
}

cr_avar cr_av_pack(cr_tape *t, const cr_var *xs, size_t n, const int64_t *shape, size_t ndim)
{
    cr_tape *tt = cr__tape_or_current(t);
    if (tt == NULL || tt->status != CR_OK)
        return cr__bad_avar(NULL);
    size_t ext[CR_ARRAY_MAX_DIMS], nd = 0;
    if (n > 0 && xs == NULL) {
        cr__tape_fail(tt, CR_EINVAL, "cr_av_pack: xs is NULL with %zu variable%s", n, CR__S(n));
        return cr__bad_avar(NULL);
    }
    if (pack_shape(tt, n, shape, ndim, ext, &nd) != CR_OK)
        return cr__bad_avar(NULL);
    if (n == 0) { /* nothing to differentiate: an empty constant of the shape */
        cr_array *e;
        cr_status st = cr_array_new(tt->arena, CR_DT_F64, nd, ext, &e);
        if (st != CR_OK) {
            cr__tape_fail_ctx(tt, st, "cr_av_pack");
            return cr__bad_avar(NULL);
        }
        return cr_av_const(e);
    }
    if (!(tt->flags & (CR_TAPE_SECOND_ORDER | CR__TAPE_SO_CHECK)) && tt->pre <= 1)
        return pack_op(tt, xs, n, ext, nd);
    size_t m = n / VECT_FAN + (n % VECT_FAN != 0);
    cr_avar *part = avars(tt, "cr_av_pack", m);
    if (part == NULL)
        return cr__bad_avar(NULL);
    for (size_t g = 0, lo = 0; g < m; g++, lo += VECT_FAN) {
        size_t k = n - lo < VECT_FAN ? n - lo : VECT_FAN;
        cr_targ a[VECT_FAN];
        for (size_t j = 0; j < k; j++)
            a[j] = cr_targ_var(xs[lo + j]);
        part[g] = cr_tape_acall_a(tt, &cr_fn_vect, a, k);
        if (tt->status != CR_OK)
            return cr__bad_avar(NULL);
    }
    cr_avar v = m == 1 ? part[0] : cat_tree(tt, "cr_av_pack", 0, part, m);
    if (tt->status != CR_OK || (nd == 1 && ext[0] == n))
        return v;
    return cr_av_reshape(tt, v, shape, ndim);
}

cr_var cr_av_getindex(cr_tape *t, cr_avar x, int64_t i)
{
    cr_targ a[2] = {cr_targ_arr(x), cr_targ_value(cr_value_i64(i))};
    return cr_tape_acall_s(t, &cr_fn_getindex, a, 2);
}

cr_status cr_av_unpack(cr_tape *t, cr_avar x, cr_var *out, size_t n)
{
    for (size_t i = 0; out != NULL && i < n; i++)
        out[i] = cr_const((double)NAN);
    cr_tape *tt = cr__tape_or_current(t);
    if (tt == NULL)
        return CR_EMISUSE;
    if (tt->status != CR_OK)
        return tt->status;
    if ((n > 0 && out == NULL) || x.a == NULL)
        return cr__tape_fail(tt, CR_EINVAL, "cr_av_unpack: %s",
                             x.a == NULL ? "x is a NULL array" : "out is NULL");
    size_t numel = cr_array_numel(x.a);
    if (numel != n)
        return cr__tape_fail(tt, CR_ESHAPE,
                             "cr_av_unpack: %zu variable%s for an array of %zu element%s", n,
                             CR__S(n), numel, CR__S(numel));
    for (size_t i = 0; i < n; i++) {
        if (i > (size_t)INT64_MAX)
            return cr__tape_fail(tt, CR_EOVERFLOW, "cr_av_unpack: index %zu", i);
        out[i] = cr_av_getindex(tt, x, (int64_t)i);
        if (tt->status != CR_OK)
            return tt->status;
    }
    return CR_OK;
}

/* fn(x, ints) with the n integers as a constant array (who names the call). */
static cr_avar with_ints(cr_tape *t, const char *who, const cr_value *fn, cr_avar x,
                         const int64_t *ints, size_t n)
{
    cr_tape *tt = cr__tape_or_current(t);
    cr_array *s;
    if (tt == NULL || tt->status != CR_OK || ints_array(tt, who, ints, n, &s) != CR_OK)
        return cr__bad_avar(NULL);
    cr_targ a[2] = {cr_targ_arr(x), cr_targ_value(cr_value_array(s))};
    return cr_tape_acall_a(tt, fn, a, 2);
}

cr_avar cr_av_reshape(cr_tape *t, cr_avar x, const int64_t *shape, size_t ndim)
{
    return with_ints(t, "cr_av_reshape", &cr_fn_reshape, x, shape, ndim);
}

cr_avar cr_av_sum_dims(cr_tape *t, cr_avar x, const int64_t *dims, size_t ndims)
{
    return with_ints(t, "cr_av_sum_dims", &cr_fn_sum, x, dims, ndims);
}

/* einsum(spec, xs...) of n = 1 or 2 arrays: the spec copied into the tape's arena, so that
 * the recording (and a prepared replay) may read it after the caller's string is gone. */
static cr_avar einsum_n(cr_tape *t, const char *who, const char *spec, const cr_avar *xs, size_t n)
{
    cr_tape *tt = cr__tape_or_current(t);
    if (tt == NULL || tt->status != CR_OK)
        return cr__bad_avar(NULL);
    if (spec == NULL) {
        cr__tape_fail(tt, CR_EINVAL, "%s: spec is NULL", who);
        return cr__bad_avar(NULL);
    }
    size_t len = strlen(spec);
    char *copy = cr__arena_array(tt->arena, who, len + 1, 1, 1);
    cr_einsum_spec *s = cr_arena_alloc(tt->arena, sizeof *s, _Alignof(cr_einsum_spec));
    if (copy == NULL || s == NULL) {
        cr__tape_fail_ctx(tt, CR__ALLOC_STATUS(tt->arena), who);
        return cr__bad_avar(NULL);
    }
    memcpy(copy, spec, len + 1);
    s->spec = copy;
    cr_targ args[3] = {cr_targ_value(cr_value_struct(&cr_einsum_spec_type, s))};
    for (size_t k = 0; k < n; k++)
        args[k + 1] = cr_targ_arr(xs[k]);
    return cr_tape_acall_a(tt, &cr_fn_einsum, args, n + 1);
}

cr_avar cr_av_einsum(cr_tape *t, const char *spec, cr_avar a, cr_avar b)
{
    cr_avar xs[2] = {a, b};
    return einsum_n(t, "cr_av_einsum", spec, xs, 2);
}

cr_avar cr_av_einsum1(cr_tape *t, const char *spec, cr_avar a)
{
    return einsum_n(t, "cr_av_einsum1", spec, &a, 1);
}

cr_avar cr_av_bmm(cr_tape *t, cr_avar A, cr_avar B)
{
    cr_tape *tt = cr__tape_or_current(t);
    if (tt == NULL || tt->status != CR_OK)
        return cr__bad_avar(NULL);
    if (A.a == NULL || B.a == NULL) {
        cr__tape_fail(tt, CR_EINVAL, "cr_av_bmm: %s is a NULL array", A.a == NULL ? "A" : "B");
        return cr__bad_avar(NULL);
    }
    if (A.a->ndim != 3 || B.a->ndim != 3) {
        cr__tape_fail(tt, CR_ESHAPE,
                      "cr_av_bmm: expected two 3-d arrays (batch x rows x cols), got %u-d and %u-d",
                      (unsigned)A.a->ndim, (unsigned)B.a->ndim);
        return cr__bad_avar(NULL);
    }
    return einsum_n(tt, "cr_av_bmm", "bij,bjk->bik", (cr_avar[2]){A, B}, 2);
}
