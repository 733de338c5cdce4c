/*
 * Shared machinery of the array and linear-algebra rule families: canonicalisation of
 * array arguments and tangents at the rule boundary, dtype promotion, outputs in the
 * arena, projections, the n-ary strided loop and the BLAS wrappers (array_impl.h).
 */
#include <stdio.h>
#include <string.h>

#include "family.h"

#if defined(CR_HAVE_CBLAS)
#include <cblas.h>
#endif

const char cr__primal_only_tag = 0;

/* ---- Function values and registration --------------------------------------------------- */

cr_status cr__primal_via_rrule(cr_arena *arena, const cr_value *f, const cr_value *args,
                               size_t nargs, cr_value *out)
{
    const cr__op *op = f->u.func.fn->udata;
    cr_pullback pb = {NULL, NULL, NULL, 0};
    return op->rrule(NULL, arena, f, args, nargs, out, &pb, CR__PRIMAL_ONLY);
}

cr_status cr__add_rule(cr_registry *reg, const cr_function *fn, const cr_argspec *args, size_t n,
                       bool variadic, cr_frule_fn frule, cr_rrule_fn rrule,
                       const cr_rule_test *test)
{
    return cr__add_rule_so(reg, fn, args, n, variadic, frule, rrule, test, CR_NONLINEAR, NULL);
}

cr_status cr__add_rule_so(cr_registry *reg, const cr_function *fn, const cr_argspec *args, size_t n,
                          bool variadic, cr_frule_fn frule, cr_rrule_fn rrule,
                          const cr_rule_test *test, uint32_t linearity, const cr_rule_form *form)
{
    cr_rule_def d = {0};
    d.struct_size = sizeof d;
    d.fn = fn;
    d.nargs = n;
    d.args = args;
    d.variadic = variadic;
    d.frule = frule;
    d.rrule = rrule;
    d.test = test;
    d.linearity = linearity;
    d.form = form;
    return cr_registry_add(reg, &d);
}

cr_status cr__add_rules(cr_registry *reg, const cr__array_rule *k, size_t n)
{
#if defined(CR_HAVE_LAPACKE)
    const bool have_lapack = true;
#else
    const bool have_lapack = false;
#endif
    for (size_t i = 0; i < n; i++) {
        if (k[i].lapack && !have_lapack)
            continue;
        cr_status st = cr__add_rule_so(reg, k[i].fn, k[i].args, k[i].n, false, k[i].frule,
                                       k[i].rrule, k[i].test, k[i].lin, k[i].form);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

cr_status cr__struct_copy(cr_arena *arena, const cr_type *type, const void *src, size_t size,
                          size_t align, cr_value *y)
{
    void *t = cr_arena_alloc(arena, size, align);
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    memcpy(t, src, size);
    *y = cr_value_struct(type, t);
    return CR_OK;
}

cr_status cr__rrule_end(cr_arena *arena, cr_status st, const void *udata, const cr_value *arg,
                        cr_project **pa, cr_pullback_fn fn, void *env, const char *name, size_t nx,
                        cr_pullback *pb)
{
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    if ((st = cr_project_new(arena, arg, pa)) == CR_OK)
        *pb = (cr_pullback){fn, env, name, nx};
    return st;
}

cr_status cr__nargs_array(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                          size_t lo, size_t hi, const cr_array **A)
{
    cr_status st = cr__nargs(arena, who, nargs, lo, hi);
    return st == CR_OK ? cr__array_arg(arena, who, args, nargs, 0, A) : st;
}

cr_status cr__nargs_float_array(cr_arena *arena, const char *who, const cr_value *args,
                                size_t nargs, size_t lo, size_t hi, const cr_array **A)
{
    cr_status st = cr__nargs_array(arena, who, args, nargs, lo, hi, A);
    if (st == CR_OK && !cr_dtype_is_float((cr_dtype)(*A)->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an f64, f32 or c128 array", who);
    return st;
}

void cr__sort_index(int64_t *ix, int64_t *tmp, size_t n, const double *v,
                    bool (*less)(double, double))
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = less(v[ix[j]], v[ix[i]]) ? ix[j++] : ix[i++];
            while (i < mid)
                tmp[o++] = ix[i++];
            while (j < hi)
                tmp[o++] = ix[j++];
        }
        memcpy(ix, tmp, n * sizeof *ix);
    }
}

void cr__fill_distinct(uint64_t *rng, cr_array *A, double base)
{
    size_t n = cr_array_numel(A);
    for (size_t i = 0; i < n; i++) {
        size_t j = cr__rng_below(rng, i + 1);
        double v = ((double)i - base) / 4 + cr__rng_unif(rng, 0, 0.125);
        if (j != i)
            cr__store(A, (ptrdiff_t)i, cr__load(A, (ptrdiff_t)j));
        cr__store(A, (ptrdiff_t)j, v);
    }
}

/* ---- Element types ---------------------------------------------------------------------- */

cr_dtype cr__promote(cr_dtype a, cr_dtype b)
{
    if (a == CR_DT_C128 || b == CR_DT_C128)
        return CR_DT_C128;
    if (a == CR_DT_F64 || b == CR_DT_F64)
        return CR_DT_F64;
    if (a == CR_DT_F32 || b == CR_DT_F32)
        return CR_DT_F32;
    return (cr_dtype)0;
}

cr_dtype cr__value_dtype(const cr_value *v)
{
    switch (v->kind) {
    case CR_KIND_F64:
        return CR_DT_F64;
    case CR_KIND_F32:
        return CR_DT_F32;
    case CR_KIND_C128:
        return CR_DT_C128;
    case CR_KIND_ARRAY:
        if (v->u.arr != NULL && cr_dtype_is_float((cr_dtype)v->u.arr->dtype))
            return (cr_dtype)v->u.arr->dtype;
        return (cr_dtype)0;
    default:
        return (cr_dtype)0;
    }
}

bool cr__is_diff(const cr_value *v)
{
    return cr__value_dtype(v) != 0;
}

cr_complex cr__scalar_of(const cr_value *v)
{
    cr_complex z;
    (void)cr__value_number(v, &z);
    return z;
}

/* PREFIX_f32, PREFIX_c128 or PREFIX_f64 (the default) of v, by dtype dt. */
#define BY_DTYPE(PREFIX, dt, v)                           \
    ((dt) == CR_DT_F32    ? PREFIX##_f32((float)creal(v)) \
     : (dt) == CR_DT_C128 ? PREFIX##_c128(v)              \
                          : PREFIX##_f64(creal(v)))

cr_value cr__scalar_value(cr_dtype dt, cr_complex v)
{
    return BY_DTYPE(cr_value, dt, v);
}

cr_tangent cr__scalar_tangent(cr_dtype dt, cr_complex v)
{
    return BY_DTYPE(cr_tangent, dt, v);
}
#undef BY_DTYPE

/* ---- Arrays ----------------------------------------------------------------------------- */

cr_status cr__new(cr_arena *arena, cr_dtype dt, size_t ndim, const size_t *shape, bool zero,
                  cr_array **out)
{
    if (zero)
        return cr_array_new(arena, dt, ndim, shape, out);
    *out = NULL;
    if (ndim > CR_ARRAY_MAX_DIMS)
        return CR__FAIL(arena, CR_EINVAL, "array of %zu dimension%s (at most %d)", ndim,
                        CR__S(ndim), CR_ARRAY_MAX_DIMS);
    size_t n, bytes;
    cr_status st = cr__ck_numel(cr_arena_ctx(arena), "array", ndim, shape, cr_dtype_size(dt), &n);
    if (st != CR_OK)
        return st;
    bytes = n * cr_dtype_size(dt); /* checked above */
    CR__ARENA_NEW(arena, cr_array, a);
    void *data = cr_arena_alloc(arena, bytes, 0);
    if (data == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_array_view_init(a, data, dt, ndim, shape, NULL);
    a->flags = CR_ARRAY_WRITABLE;
    *out = a;
    return CR_OK;
}

bool cr__is_contig_dense(const cr_array *a)
{
    return a->structure == CR_MAT_DENSE && cr_array_is_contiguous(a);
}

cr_status cr__dense(cr_arena *arena, const cr_array *a, cr_dtype wdt, const cr_array **out)
{
    if (a->dtype == wdt && cr__is_contig_dense(a)) {
        *out = a;
        return CR_OK;
    }
    cr_array *c = NULL;
    cr_status st = cr__densify(arena, a, wdt, &c);
    *out = c;
    return st;
}

cr_status cr__strided(cr_arena *arena, const cr_array *a, cr_dtype wdt, const cr_array **out)
{
    if (a->dtype == wdt && a->structure == CR_MAT_DENSE) {
        *out = a;
        return CR_OK;
    }
    return cr__dense(arena, a, wdt, out);
}

cr_status cr__cast(cr_arena *arena, const cr_array *w, cr_dtype dt, cr_array **out)
{
    if (w->dtype == dt) {
        *out = (cr_array *)w;
        return CR_OK;
    }
    cr_array *r = NULL;
    cr_status st = cr__new(arena, dt, w->ndim, w->shape, false, &r);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(w);
    if (cr__is_contig_dense(w) && w->dtype == CR_DT_F64 && dt == CR_DT_F32) {
        const double *s = w->data;
        float *d = r->data;
        for (size_t i = 0; i < n; i++)
            d[i] = (float)s[i];
    } else {
        cr_array *c;
        st = cr__densify(arena, w, dt, &c);
        if (st != CR_OK)
            return st;
        r = c;
    }
    *out = r;
    return CR_OK;
}

cr_status cr__view_of(cr_arena *arena, const cr_array *a, cr_array **out)
{
    CR__ARENA_NEW(arena, cr_array, v);
    *v = *a;
    v->flags = 0;
    *out = v;
    return CR_OK;
}

const char *cr__shape_str(const cr_array *a, char *buf, size_t size)
{
    size_t k = 0;
    buf[0] = '\0';
    k += (size_t)snprintf(buf, size, "(");
    for (size_t d = 0; d < a->ndim && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, d == 0 ? "%zu" : ",%zu", a->shape[d]);
    if (k < size)
        snprintf(buf + k, size - k, ")");
    return buf;
}

/* ---- Integer arguments -------------------------------------------------------------- */

cr_status cr__int_arg(cr_arena *arena, const char *who, const cr_value *v, int64_t *out)
{
    if (v->kind == CR_KIND_I64 || v->kind == CR_KIND_I32) {
        *out = v->u.i64;
        return CR_OK;
    }
    return CR__FAIL(arena, CR_EINVAL, "%s: expected an integer, got a %s", who,
                    cr_kind_name(v->kind));
}

cr_status cr__int_list(cr_arena *arena, const char *who, const cr_value *v, int64_t **out,
                       size_t *n)
{
    if (v->kind == CR_KIND_ARRAY && v->u.arr != NULL && v->u.arr->dtype != CR_DT_I64)
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an i64 array, got a %s array", who,
                        cr_dtype_name((cr_dtype)v->u.arr->dtype));
    if (v->kind != CR_KIND_ARRAY || v->u.arr == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an i64 array, got a %s", who,
                        cr_kind_name(v->kind));
    const cr_array *a = v->u.arr;
    size_t m;
    cr_status st =
        a->ndim <= CR_ARRAY_MAX_DIMS
            ? cr__ck_numel(cr_arena_ctx(arena), who, a->ndim, a->shape, sizeof(int64_t), &m)
            : CR__FAIL(arena, CR_EINVAL, "%s: an index array of %u dimension%s", who,
                       (unsigned)a->ndim, CR__S((unsigned)a->ndim));
    if (st != CR_OK)
        return st;
    int64_t *r = cr_arena_alloc(arena, (m ? m : 1) * sizeof(int64_t), _Alignof(int64_t));
    if (r == NULL)
        return CR__ALLOC_STATUS(arena);
    if (m > 0) {
        const cr_array *arrs[1] = {a};
        cr__iter it;
        cr__iter_init(&it, arrs, 1);
        size_t k = 0;
        do
            r[k++] = ((const int64_t *)a->data)[it.off[0]];
        while (cr__iter_next(&it));
    }
    *out = r;
    *n = m;
    return CR_OK;
}

cr_status cr__dims_arg(cr_arena *arena, const char *who, const cr_value *v, size_t ndim, bool *mask)
{
    for (size_t d = 0; d < CR_ARRAY_MAX_DIMS; d++)
        mask[d] = false;
    int64_t one, *list = &one;
    size_t n = 1;
    cr_status st;
    if (v->kind == CR_KIND_ARRAY)
        st = cr__int_list(arena, who, v, &list, &n);
    else
        st = cr__int_arg(arena, who, v, &one);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < n; k++) {
        if (list[k] < 0 || (uint64_t)list[k] >= ndim)
            return CR__FAIL(arena, CR_EINVAL,
                            "%s: dimension %lld out of range for an array of %zu dimension%s "
                            "(dimensions count from 0)",
                            who, (long long)list[k], ndim, CR__S(ndim));
        if (mask[list[k]])
            return CR__FAIL(arena, CR_EINVAL, "%s: dimension %lld listed twice", who,
                            (long long)list[k]);
        mask[list[k]] = true;
    }
    return CR_OK;
}

/* ---- Tangents ------------------------------------------------------------------------- */

static size_t numel_of(size_t ndim, const size_t *shape)
{
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    return n;
}

cr_status cr__tan_array(cr_arena *arena, const char *who, cr_tangent t, size_t ndim,
                        const size_t *shape, cr_dtype wdt, const cr_array **out)
{
    *out = NULL;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    size_t n = numel_of(ndim, shape);
    if (cr_tangent_is_zero(t) || t.tag == CR_TAN_ABSENT)
        return CR_OK;
    switch ((cr_tag)t.tag) {
    case CR_TAN_NOTIMPL:
        return cr__notimpl_error(arena, who, t);
    case CR_TAN_F64:
    case CR_TAN_F32:
    case CR_TAN_C128: {
        if (n != 1)
            return CR__FAIL(arena, CR_ETANGENT,
                            "%s: a scalar tangent for an array of %zu element%s", who, n, CR__S(n));
        cr_array *a;
        st = cr__new(arena, wdt, ndim, shape, false, &a);
        if (st != CR_OK)
            return st;
        cr_complex v = t.tag == CR_TAN_F64   ? t.u.f64
                       : t.tag == CR_TAN_F32 ? (double)t.u.f32
                                             : t.u.c128;
        if (wdt == CR_DT_C128)
            ((cr_complex *)a->data)[0] = v;
        else
            ((double *)a->data)[0] = creal(v);
        *out = a;
        return CR_OK;
    }
    case CR_TAN_ARRAY: {
        const cr_array *a = t.u.arr;
        if (cr_array_numel(a) != n) {
            char s1[96], s2[96];
            cr_array tmp;
            cr_array_view_init(&tmp, NULL, CR_DT_F64, 0, NULL, NULL);
            tmp.ndim = (uint8_t)ndim;
            for (size_t d = 0; d < ndim; d++)
                tmp.shape[d] = shape[d];
            return CR__FAIL(arena, CR_ESHAPE, "%s: tangent of shape %s for an array of shape %s",
                            who, cr__shape_str(a, s1, sizeof s1),
                            cr__shape_str(&tmp, s2, sizeof s2));
        }
        const cr_array *d;
        st = cr__dense(arena, a, wdt, &d);
        if (st != CR_OK)
            return st;
        bool same = d->ndim == ndim;
        for (size_t k = 0; same && k < ndim; k++)
            same = d->shape[k] == shape[k];
        if (!same) {
            CR__ARENA_NEW(arena, cr_array, v);
            cr_array_view_init(v, d->data, wdt, ndim, shape, NULL);
            v->flags = (uint8_t)(d == a ? 0u : CR_ARRAY_WRITABLE);
            d = v;
        }
        *out = d;
        return CR_OK;
    }
    default:
        return CR__FAIL(arena, CR_ETANGENT, "%s: expected an array tangent, got %s", who,
                        cr_tag_name((cr_tag)t.tag));
    }
}

cr_status cr__tan_scalar(cr_arena *arena, const char *who, cr_tangent t, cr_complex *v, bool *nz)
{
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    if (t.tag == CR_TAN_ARRAY && cr_array_numel(t.u.arr) == 1) { /* a 1-element array */
        *nz = true;
        *v = cr_array_get_linear(t.u.arr, 0);
        return CR_OK;
    }
    return cr__tangent_scalar(arena, who, t, v, nz);
}

cr_status cr__dx_array(cr_arena *arena, const char *who, const cr_tangent *dargs,
                       const cr_value *args, size_t i, cr_dtype wdt, const cr_array **out)
{
    *out = NULL;
    if (args[i].kind != CR_KIND_ARRAY || !cr__is_diff(&args[i]))
        return CR_OK;
    const cr_array *a = args[i].u.arr;
    return cr__tan_array(arena, who, dargs[i + 1], a->ndim, a->shape, wdt, out);
}

cr_status cr__projectors(cr_arena *arena, const cr_value *args, size_t nargs, cr_project ***out)
{
    cr_project **p = cr__arena_array(arena, "projection", nargs, sizeof *p, _Alignof(cr_project *));
    if (p == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < nargs; i++) {
        cr_status st = cr_project_new(arena, &args[i], &p[i]);
        if (st != CR_OK)
            return st;
    }
    *out = p;
    return CR_OK;
}

cr_status cr__give(cr_arena *arena, const cr_project *p, cr_array *raw, cr_tangent *out)
{
    if (raw == NULL) {
        *out = cr_tangent_zero();
        return CR_OK;
    }
    return cr_project_apply(arena, p, cr_tangent_array(raw), out);
}

bool cr__dest_ok(const cr_array *dest, cr_dtype dt, const cr_array *like)
{
    return dest->dtype == dt && like->dtype == dt && like->structure == CR_MAT_DENSE &&
           cr__is_contig_dense(dest) && (dest->flags & CR_ARRAY_WRITABLE) &&
           cr_array_same_shape(dest, like);
}

cr_status cr__add_into(cr_arena *arena, cr_array *dest, cr_tangent t)
{
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    if (cr_tangent_is_zero(t))
        return CR_OK;
    const cr_array *v;
    st = cr__tan_array(arena, "add!", t, dest->ndim, dest->shape, (cr_dtype)dest->dtype, &v);
    if (st != CR_OK || v == NULL)
        return st;
    size_t n = cr_array_numel(dest);
    if (n == 0)
        return CR_OK;
    if (dest->structure != CR_MAT_DENSE)
        return CR__FAIL(arena, CR_EINVAL, "add!: a structured destination");
    if (dest->dtype == v->dtype && cr__is_contig_dense(dest) && cr__is_contig_dense(v)) {
        /* dest += v element by element, both contiguous arrays of T */
#define ADD_CONTIG(T)                  \
    do {                               \
        T *d = dest->data;             \
        const T *s = v->data;          \
        for (size_t i = 0; i < n; i++) \
            d[i] += s[i];              \
        return CR_OK;                  \
    } while (0)
        if (dest->dtype == CR_DT_F64)
            ADD_CONTIG(double);
        if (dest->dtype == CR_DT_C128)
            ADD_CONTIG(cr_complex);
#undef ADD_CONTIG
    }
    const cr_array *arrs[2] = {dest, v};
    cr__iter it;
    cr__iter_init(&it, arrs, 2);
    do
        cr__store(dest, it.off[0], cr__load(dest, it.off[0]) + cr__load(v, it.off[1]));
    while (cr__iter_next(&it));
    return CR_OK;
}

cr_status cr__thunk(cr_arena *arena, cr_thunk_fn fn, cr_thunk_add_fn add, void *env,
                    const char *name, cr_tangent *out)
{
    if (add != NULL)
        return cr_tangent_inplaceable_thunk(arena, fn, add, env, name, out);
    return cr_tangent_thunk(arena, fn, env, name, out);
}

/* ---- Strided n-ary loops --------------------------------------------------------------- */

void cr__nd_init(cr__nd *nd, size_t ndim, const size_t *shape)
{
    /* Only what is read: the strides of array k are written by cr__nd_add (720 bytes of
     * clearing took longer than a small array's whole loop). */
    nd->narr = 0;
    nd->ndim = ndim;
    for (size_t d = 0; d < ndim; d++)
        nd->shape[d] = shape[d];
}

size_t cr__nd_add(cr__nd *nd, const cr_array *a)
{
    size_t k = nd->narr++;
    size_t lead = nd->ndim - a->ndim;
    for (size_t d = 0; d < nd->ndim; d++) {
        if (d < lead) {
            nd->strides[k][d] = 0;
            continue;
        }
        size_t da = d - lead;
        nd->strides[k][d] = a->shape[da] == 1 ? 0 : a->strides[da];
    }
    return k;
}

size_t cr__nd_add_strides(cr__nd *nd, const ptrdiff_t *strides)
{
    size_t k = nd->narr++;
    for (size_t d = 0; d < nd->ndim; d++)
        nd->strides[k][d] = strides[d];
    return k;
}

void cr__nd_run(const cr__nd *nd, cr__inner_fn fn, void *ctx)
{
    size_t shape[CR_ARRAY_MAX_DIMS];
    ptrdiff_t st[CR__ND_MAX][CR_ARRAY_MAX_DIMS];
    size_t nd_n = 0, narr = nd->narr;
    for (size_t d = 0; d < nd->ndim; d++)
        if (nd->shape[d] == 0)
            return;
    /* Drop extent-1 dimensions, merge dimensions contiguous for every array. */
    for (size_t d = 0; d < nd->ndim; d++) {
        if (nd->shape[d] == 1)
            continue;
        if (nd_n > 0) {
            size_t p = nd_n - 1;
            bool merge = true;
            for (size_t k = 0; k < narr && merge; k++)
                merge = st[k][p] == nd->strides[k][d] * (ptrdiff_t)nd->shape[d];
            if (merge) {
                shape[p] *= nd->shape[d];
                for (size_t k = 0; k < narr; k++)
                    st[k][p] = nd->strides[k][d];
                continue;
            }
        }
        shape[nd_n] = nd->shape[d];
        for (size_t k = 0; k < narr; k++)
            st[k][nd_n] = nd->strides[k][d];
        nd_n++;
    }
    ptrdiff_t off[CR__ND_MAX] = {0}, step[CR__ND_MAX] = {0};
    if (nd_n == 0) {
        fn(1, off, step, ctx);
        return;
    }
    size_t inner = shape[nd_n - 1];
    for (size_t k = 0; k < narr; k++)
        step[k] = st[k][nd_n - 1];
    size_t idx[CR_ARRAY_MAX_DIMS] = {0};
    size_t outer = nd_n - 1;
    for (;;) {
        fn(inner, off, step, ctx);
        size_t d = outer;
        for (;;) {
            if (d == 0)
                return;
            d--;
            if (++idx[d] < shape[d]) {
                for (size_t k = 0; k < narr; k++)
                    off[k] += st[k][d];
                break;
            }
            for (size_t k = 0; k < narr; k++)
                off[k] -= (ptrdiff_t)(shape[d] - 1) * st[k][d];
            idx[d] = 0;
        }
    }
}

cr_status cr__bc_shape(cr_arena *arena, const char *who, const cr_array *const *a, size_t n,
                       size_t *ndim, size_t *shape)
{
    size_t nd = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != NULL && a[i]->ndim > nd)
            nd = a[i]->ndim;
    for (size_t d = 0; d < nd; d++)
        shape[d] = 1;
    for (size_t i = 0; i < n; i++) {
        if (a[i] == NULL)
            continue;
        size_t lead = nd - a[i]->ndim;
        for (size_t d = 0; d < a[i]->ndim; d++) {
            size_t e = a[i]->shape[d], *s = &shape[lead + d];
            if (e == *s || e == 1)
                continue;
            if (*s == 1) {
                *s = e;
                continue;
            }
            char buf[96];
            return CR__FAIL(arena, CR_ESHAPE,
                            "%s: argument of shape %s does not broadcast with extent %zu in "
                            "dimension %zu",
                            who, cr__shape_str(a[i], buf, sizeof buf), *s, lead + d);
        }
    }
    *ndim = nd;
    /* Each argument fits the size invariant, their broadcast need not ([n, 1] with [1, n]):
     * its element count is checked here, before any caller multiplies the extents. */
    size_t m;
    return cr__ck_numel(cr_arena_ctx(arena), who, nd, shape, sizeof(cr_complex), &m);
}

typedef struct acc_ctx {
    void *dst;
    const void *src;
    cr_complex s;
    bool cplx;
} acc_ctx;

/* d and s: the destination and the source of an inner loop over the acc_ctx c, at the
 * offsets off, as arrays of T. */
#define ACC_PTRS(T)              \
    T *d = (T *)c->dst + off[0]; \
    const T *s = (const T *)c->src + off[1]

/* dst[o] += src[i] (dst may have stride 0: a reduction). */
static void acc_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    acc_ctx *c = vctx;
    if (c->cplx) {
        ACC_PTRS(cr_complex);
        for (size_t i = 0; i < n; i++)
            d[(ptrdiff_t)i * step[0]] += s[(ptrdiff_t)i * step[1]];
    } else {
        ACC_PTRS(double);
        if (step[0] == 0) {
            double acc = 0;
            for (size_t i = 0; i < n; i++)
                acc += s[(ptrdiff_t)i * step[1]];
            *d += acc;
        } else if (step[0] == 1 && step[1] == 1) { /* contiguous: a loop that vectorizes */
            for (size_t i = 0; i < n; i++)
                d[i] += s[i];
        } else {
            for (size_t i = 0; i < n; i++)
                d[(ptrdiff_t)i * step[0]] += s[(ptrdiff_t)i * step[1]];
        }
    }
}

/* dst[o] += s * src[i] (src may have stride 0: broadcasting). */
static void axpy_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    acc_ctx *c = vctx;
    if (c->cplx) {
        ACC_PTRS(cr_complex);
        for (size_t i = 0; i < n; i++)
            d[(ptrdiff_t)i * step[0]] += c->s * s[(ptrdiff_t)i * step[1]];
    } else {
        ACC_PTRS(double);
        double sc = creal(c->s);
        if (step[0] == 1 && step[1] == 1) { /* contiguous: a loop that vectorizes */
            for (size_t i = 0; i < n; i++)
                d[i] += sc * s[i];
        } else if (step[0] == 1 && step[1] == 0) { /* a scalar broadcast */
            double v = sc * s[0];
            for (size_t i = 0; i < n; i++)
                d[i] += v;
        } else {
            for (size_t i = 0; i < n; i++)
                d[(ptrdiff_t)i * step[0]] += sc * s[(ptrdiff_t)i * step[1]];
        }
    }
}

/* fn over dst and src broadcast to the shape of `over` (dst's, or src's for a reduction into
 * dst), with the factor s. */
static void pair_run(const cr_array *over, cr_array *dst, const cr_array *src, cr_complex s,
                     cr__inner_fn fn)
{
    cr__nd nd;
    cr__nd_init(&nd, over->ndim, over->shape);
    cr__nd_add(&nd, dst);
    cr__nd_add(&nd, src);
    acc_ctx c = {dst->data, src->data, s, dst->dtype == CR_DT_C128};
    cr__nd_run(&nd, fn, &c);
}

/* fn over dst and src broadcast to dst's shape, with the factor s. */
static void broadcast_run(cr_array *dst, const cr_array *src, cr_complex s, cr__inner_fn fn)
{
    pair_run(dst, dst, src, s, fn);
}

void cr__broadcast_axpy(cr_array *dst, const cr_array *src, cr_complex s)
{
    broadcast_run(dst, src, s, axpy_inner);
}

cr_status cr__scalar_array(cr_arena *arena, cr_dtype wdt, cr_complex v, cr_array **out)
{
    cr_status st = cr__new(arena, wdt, 0, NULL, false, out);
    if (st != CR_OK)
        return st;
    if (wdt == CR_DT_C128)
        *(cr_complex *)(*out)->data = v;
    else
        *(double *)(*out)->data = creal(v);
    return CR_OK;
}

/* dst[o] = s * src[i] (src may have stride 0: broadcasting). */
static void set_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    acc_ctx *c = vctx;
    if (c->cplx) {
        ACC_PTRS(cr_complex);
        for (size_t i = 0; i < n; i++)
            d[(ptrdiff_t)i * step[0]] = c->s * s[(ptrdiff_t)i * step[1]];
    } else {
        ACC_PTRS(double);
        double sc = creal(c->s);
        if (step[0] == 1 && step[1] == 1) { /* contiguous: a loop that vectorizes */
            for (size_t i = 0; i < n; i++)
                d[i] = sc * s[i];
        } else {
            for (size_t i = 0; i < n; i++)
                d[(ptrdiff_t)i * step[0]] = sc * s[(ptrdiff_t)i * step[1]];
        }
    }
}

cr_status cr__unbroadcast(cr_arena *arena, const cr_array *full, size_t ndim, const size_t *shape,
                          cr_array **out)
{
    cr_array *r = NULL;
    cr_status st = cr__new(arena, (cr_dtype)full->dtype, ndim, shape, true, &r);
    if (st != CR_OK)
        return st;
    pair_run(full, r, full, 1.0, acc_inner);
    *out = r;
    return CR_OK;
}

void cr__broadcast_into(cr_array *dst, const cr_array *src, cr_complex s)
{
    broadcast_run(dst, src, s, set_inner);
}

/* y[i] += A x[i] for the n elements of y and x, of type T (the loop without BLAS). */
#define AXPY_LOOP(T, A)                \
    do {                               \
        const T *xs = x->data;         \
        T *ys = y->data;               \
        for (size_t i = 0; i < n; i++) \
            ys[i] += (A)*xs[i];        \
    } while (0)

void cr__axpy(cr_complex s, const cr_array *x, cr_array *y)
{
    size_t n = cr_array_numel(y);
    if (y->dtype == CR_DT_C128) {
#if defined(CR_HAVE_CBLAS)
        if (n <= (size_t)INT32_MAX) {
            cblas_zaxpy((int)n, &s, x->data, 1, y->data, 1);
            return;
        }
#endif
        AXPY_LOOP(cr_complex, s);
    } else {
        double a = creal(s);
#if defined(CR_HAVE_CBLAS)
        if (n <= (size_t)INT32_MAX) {
            cblas_daxpy((int)n, a, x->data, 1, y->data, 1);
            return;
        }
#endif
        AXPY_LOOP(double, a);
    }
}

void cr__scal(cr_complex s, cr_array *x)
{
    size_t n = cr_array_numel(x);
    if (x->dtype == CR_DT_C128) {
        cr_complex *xs = x->data;
        for (size_t i = 0; i < n; i++)
            xs[i] *= s;
    } else {
        double a = creal(s);
        double *xs = x->data;
        for (size_t i = 0; i < n; i++)
            xs[i] *= a;
    }
}

/* ---- BLAS ---------------------------------------------------------------------------- */

cr_status cr__as_mat(cr_arena *arena, const cr_array *a, cr_dtype wdt, bool as_row, cr__mat *out)
{
    if (a->ndim == 2 && a->dtype == wdt && a->structure == CR_MAT_DENSE) {
        size_t r = a->shape[0], c = a->shape[1];
        ptrdiff_t s0 = a->strides[0], s1 = a->strides[1];
        if (r == 0 || c == 0) {
            /* No element is read, whatever the strides: an r x 0 matrix with strides
             * (0, 1) counts as contiguous, so densifying it would give it back unchanged
             * and this function would call itself without end. */
            *out = (cr__mat){a->data, r, c, c ? c : 1, 0};
            return CR_OK;
        }
        if ((s1 == 1 || c <= 1) && (s0 >= (ptrdiff_t)(c ? c : 1) || r <= 1)) {
            *out = (cr__mat){a->data, r, c, r <= 1 ? (c ? c : 1) : (size_t)s0, 0};
            return CR_OK;
        }
        if ((s0 == 1 || r <= 1) && (s1 >= (ptrdiff_t)(r ? r : 1) || c <= 1)) {
            *out = (cr__mat){a->data, c, r, c <= 1 ? (r ? r : 1) : (size_t)s1, 1};
            return CR_OK;
        }
    }
    if (a->ndim == 1 && a->dtype == wdt && (a->strides[0] == 1 || a->shape[0] <= 1)) {
        size_t n = a->shape[0];
        if (as_row)
            *out = (cr__mat){a->data, 1, n, n ? n : 1, 0};
        else
            *out = (cr__mat){a->data, n, 1, 1, 0};
        return CR_OK;
    }
    if (a->ndim != 1 && a->ndim != 2)
        return CR__FAIL(arena, CR_ESHAPE, "expected a vector or a matrix, got %u dimension%s",
                        (unsigned)a->ndim, CR__S((unsigned)a->ndim));
    const cr_array *d;
    cr_status st = cr__dense(arena, a, wdt, &d);
    if (st != CR_OK)
        return st;
    return cr__as_mat(arena, d, wdt, as_row, out);
}

cr_status cr__mat_adj(cr_arena *arena, cr_dtype wdt, const cr__mat *m, cr__mat *out)
{
    *out = *m;
    if (wdt != CR_DT_C128) {
        out->trans = m->trans ? 0 : 1;
        return CR_OK;
    }
    if (m->trans != 1) {
        out->trans = m->trans == 0 ? 2 : 0;
        return CR_OK;
    }
    /* op(m) = stored^T, so its adjoint is conj(stored), which BLAS cannot express. */
    size_t n = m->rows * m->cols;
    cr_complex *c = cr_arena_alloc(arena, (n ? n : 1) * sizeof *c, _Alignof(cr_complex));
    if (c == NULL)
        return CR__ALLOC_STATUS(arena);
    const cr_complex *s = m->data;
    for (size_t i = 0; i < m->rows; i++)
        for (size_t j = 0; j < m->cols; j++)
            c[i * m->cols + j] = conj(s[i * m->ld + j]);
    *out = (cr__mat){c, m->rows, m->cols, m->cols ? m->cols : 1, 0};
    return CR_OK;
}

#if !defined(CR_HAVE_CBLAS)
static cr_complex mat_at(cr_dtype wdt, const cr__mat *m, size_t i, size_t j)
{
    /* Element (i, j) of op(m). */
    size_t r = m->trans ? j : i, c = m->trans ? i : j;
    if (wdt == CR_DT_C128) {
        cr_complex v = ((const cr_complex *)m->data)[r * m->ld + c];
        return m->trans == 2 ? conj(v) : v;
    }
    return ((const double *)m->data)[r * m->ld + c];
}
#endif

void cr__gemm(cr_dtype wdt, const cr__mat *A, const cr__mat *B, cr_complex alpha, cr_complex beta,
              void *C, size_t ldc)
{
    size_t m = A->trans ? A->cols : A->rows;
    size_t k = A->trans ? A->rows : A->cols;
    size_t n = B->trans ? B->rows : B->cols;
#if defined(CR_HAVE_CBLAS)
    static const enum CBLAS_TRANSPOSE tr[3] = {CblasNoTrans, CblasTrans, CblasConjTrans};
    if (m == 0 || n == 0)
        return;
    if (wdt == CR_DT_C128) {
        if (k == 0) {
            cr_complex *c = C;
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    c[i * ldc + j] = beta == 0 ? 0 : beta * c[i * ldc + j];
            return;
        }
        cblas_zgemm(CblasRowMajor, tr[A->trans], tr[B->trans], (int)m, (int)n, (int)k, &alpha,
                    A->data, (int)A->ld, B->data, (int)B->ld, &beta, C, (int)ldc);
    } else {
        if (k == 0) {
            double *c = C;
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    c[i * ldc + j] = creal(beta) == 0 ? 0 : creal(beta) * c[i * ldc + j];
            return;
        }
        if (n == 1 && B->trans == 0 && B->ld == 1 && ldc == 1) {
            /* Matrix-vector: gemv is faster than a one-column gemm. */
            cblas_dgemv(CblasRowMajor, A->trans ? CblasTrans : CblasNoTrans, (int)A->rows,
                        (int)A->cols, creal(alpha), A->data, (int)A->ld, B->data, 1, creal(beta), C,
                        1);
            return;
        }
        cblas_dgemm(CblasRowMajor, tr[A->trans], tr[B->trans], (int)m, (int)n, (int)k, creal(alpha),
                    A->data, (int)A->ld, B->data, (int)B->ld, creal(beta), C, (int)ldc);
    }
#else
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            cr_complex acc = 0;
            for (size_t l = 0; l < k; l++)
                acc += mat_at(wdt, A, i, l) * mat_at(wdt, B, l, j);
            if (wdt == CR_DT_C128) {
                cr_complex *c = (cr_complex *)C + i * ldc + j;
                *c = alpha * acc + (beta == 0 ? 0 : beta * *c);
            } else {
                double *c = (double *)C + i * ldc + j;
                *c = creal(alpha * acc) + (creal(beta) == 0 ? 0 : creal(beta) * *c);
            }
        }
#endif
}

cr_complex cr__dotc(cr_dtype wdt, size_t n, const void *x, const void *y)
{
    if (wdt == CR_DT_C128) {
#if defined(CR_HAVE_CBLAS)
        if (n <= (size_t)INT32_MAX) {
            cr_complex r;
            cblas_zdotc_sub((int)n, x, 1, y, 1, &r);
            return r;
        }
#endif
        const cr_complex *a = x, *b = y;
        cr_complex acc = 0;
        for (size_t i = 0; i < n; i++)
            acc += conj(a[i]) * b[i];
        return acc;
    }
#if defined(CR_HAVE_CBLAS)
    if (n <= (size_t)INT32_MAX)
        return cblas_ddot((int)n, x, 1, y, 1);
#endif
    const double *a = x, *b = y;
    double acc = 0;
    for (size_t i = 0; i < n; i++)
        acc += a[i] * b[i];
    return acc;
}

/* ---- Linear functions ---------------------------------------------------------------- */

cr_status cr__linear_frule(CR__FRULE_PARAMS)
{
    const cr__op *op = f->u.func.fn->udata;
    cr_pullback pb = {NULL, NULL, NULL, 0};
    cr_status st = op->rrule(NULL, arena, f, args, nargs, y, &pb, CR__PRIMAL_ONLY);
    if (st != CR_OK)
        return st;
    const cr_array *dA = NULL;
    if (nargs > 0 && args[0].kind == CR_KIND_ARRAY)
        st = cr__dx_array(arena, f->u.func.fn->name, dargs, args, 0, (cr_dtype)args[0].u.arr->dtype,
                          &dA);
    if (st != CR_OK)
        return st;
    if (dA == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_value targs[CR_SIG_MAX_ARGS + 1];
    if (nargs > CR_SIG_MAX_ARGS + 1)
        return CR__FAIL(arena, CR_EINVAL, "%s: too many arguments", f->u.func.fn->name);
    for (size_t i = 0; i < nargs; i++)
        targs[i] = args[i];
    targs[0] = cr_value_array((cr_array *)dA);
    cr_value ty;
    st = op->rrule(NULL, arena, f, targs, nargs, &ty, &pb, CR__PRIMAL_ONLY);
    if (st != CR_OK)
        return st;
    cr_tangent t;
    if (ty.kind == CR_KIND_ARRAY)
        t = cr_tangent_array(ty.u.arr);
    else
        t = cr__scalar_tangent(cr__value_dtype(&ty), cr__scalar_of(&ty));
    return cr_project_tangent(arena, y, t, dy);
}

cr_status cr__give_alias(cr_arena *arena, const cr_project *p, cr_array *raw, cr_tangent *out)
{
    cr_status st = cr__give(arena, p, raw, out);
    if (st != CR_OK || out->tag != CR_TAN_ARRAY || !(out->u.arr->flags & CR_ARRAY_WRITABLE) ||
        out->u.arr->data != raw->data)
        return st;
    cr_array *v = NULL;
    st = cr__view_of(arena, out->u.arr, &v);
    if (st == CR_OK)
        *out = cr_tangent_array(v);
    return st;
}

cr_status cr__array_arg(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                        size_t i, const cr_array **out)
{
    if (i >= nargs || args[i].kind != CR_KIND_ARRAY || args[i].u.arr == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s: argument %zu must be an array", who, i + 1);
    /* A descriptor the caller built may claim any extents: its element count must fit the
     * library's invariant before any product of them is taken. */
    const cr_array *a = args[i].u.arr;
    size_t n;
    if (a->ndim > CR_ARRAY_MAX_DIMS)
        return CR__FAIL(arena, CR_EINVAL, "%s: argument %zu has %u dimension%s (at most %d)", who,
                        i + 1, (unsigned)a->ndim, CR__S((unsigned)a->ndim), CR_ARRAY_MAX_DIMS);
    if (!cr__shape_numel(a->ndim, a->shape, 0, &n)) {
        char buf[96];
        return CR__FAIL(arena, CR_EOVERFLOW, "%s: argument %zu has shape %s, which overflows", who,
                        i + 1, cr__shape_str(a, buf, sizeof buf));
    }
    *out = a;
    return CR_OK;
}

cr_status cr__nargs(cr_arena *arena, const char *who, size_t nargs, size_t lo, size_t hi)
{
    if (nargs < lo || nargs > hi) {
        if (lo == hi)
            return CR__FAIL(arena, CR_EINVAL, "%s takes %zu argument%s, %zu given", who, lo,
                            CR__S(lo), nargs);
        return CR__FAIL(arena, CR_EINVAL, "%s takes %zu to %zu argument%s, %zu given", who, lo, hi,
                        CR__S(hi), nargs);
    }
    return CR_OK;
}

/* ---- Random arguments for the test registrations ------------------------------------------ */

uint64_t cr__rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

size_t cr__rng_shape3(uint64_t *rng, size_t max, size_t shape[3])
{
    size_t nd = 1 + cr__rng_below(rng, 3);
    for (size_t k = 0; k < 3; k++)
        shape[k] = 1 + cr__rng_below(rng, max);
    return nd;
}

double cr__rng_unif(uint64_t *s, double lo, double hi)
{
    double u = (double)(cr__rng_next(s) >> 11) * 0x1.0p-53;
    return lo + (hi - lo) * u;
}

size_t cr__rng_below(uint64_t *s, size_t n)
{
    return n == 0 ? 0 : (size_t)(cr__rng_next(s) % n);
}

cr_dtype cr__rng_dtype(uint64_t *s)
{
    size_t k = cr__rng_below(s, 8);
    return k < 5 ? CR_DT_F64 : k < 6 ? CR_DT_F32 : CR_DT_C128;
}

cr_status cr__rand_array(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t ndim,
                         const size_t *shape, double lo, double hi, cr_array **out)
{
    cr_status st = cr__new(arena, dt, ndim, shape, false, out);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(*out);
    for (size_t i = 0; i < n; i++) {
        double re = cr__rng_unif(rng, lo, hi);
        switch (dt) {
        case CR_DT_F32:
            ((float *)(*out)->data)[i] = (float)re;
            break;
        case CR_DT_C128:
            ((cr_complex *)(*out)->data)[i] = cr__c(re, cr__rng_unif(rng, lo, hi));
            break;
        default:
            ((double *)(*out)->data)[i] = re;
            break;
        }
    }
    return CR_OK;
}

cr_status cr__i64_array(cr_arena *arena, size_t n, const int64_t *vals, cr_array **out)
{
    cr_status st = cr__new(arena, CR_DT_I64, 1, &n, false, out);
    if (st != CR_OK)
        return st;
    if (n > 0)
        memcpy((*out)->data, vals, n * sizeof *vals);
    return CR_OK;
}

bool cr__arg_perturbable(const cr_value *v)
{
    if (v->kind == CR_KIND_ARRAY)
        return v->u.arr != NULL && cr_dtype_is_float((cr_dtype)v->u.arr->dtype) &&
               cr_array_numel(v->u.arr) > 0;
    return cr__is_diff(v);
}

uint32_t cr__nondiff_mask(const cr_value *args, size_t nargs, bool (*perturbable)(const cr_value *))
{
    uint32_t m = 0;
    for (size_t i = 0; i < nargs && i < 32; i++)
        if (!perturbable(&args[i]))
            m |= 1u << i;
    return m;
}

void cr__mark_nondiff(cr_tangent *dx, size_t nx, uint32_t mask)
{
    dx[0] = cr_tangent_none();
    for (size_t i = 0; i + 1 < nx && i < 32; i++)
        if (mask >> i & 1u)
            dx[i + 1] = cr_tangent_none();
}
