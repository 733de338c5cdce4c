/*
 * Array descriptors: construction, copies, element access with matrix structure applied,
 * and the multi-index iterator that the elementwise tangent algebra runs on.
 */
#include <string.h>

#define CR__ARRAY_IMPL /* the functions themselves */
#include "core_impl.h"

size_t cr_dtype_size(cr_dtype dtype)
{
    return cr__dtype_size(dtype);
}

/* names[i], or "?" past the end of the n names. */
static const char *name_of(const char *const *names, size_t n, size_t i)
{
    return i < n ? names[i] : "?";
}

const char *cr_dtype_name(cr_dtype dtype)
{
    static const char *const k_names[] = {"?", "f64", "f32", "c128", "i64", "bool"};
    return name_of(k_names, sizeof k_names / sizeof k_names[0], (size_t)dtype);
}

bool cr_dtype_is_float(cr_dtype dtype)
{
    return cr__dtype_is_float(dtype);
}

const char *cr_matstruct_name(cr_matstruct s)
{
    static const char *const k_names[] = {
        "dense",      "diagonal",    "symmetric",       "hermitian",        "upper",
        "lower",      "tridiagonal", "symtridiagonal",  "bidiagonal_upper", "bidiagonal_lower",
        "unit_upper", "unit_lower",  "symmetric_lower", "hermitian_lower"};
    return name_of(k_names, sizeof k_names / sizeof k_names[0], (size_t)s);
}

static void set_row_major(cr_array *a)
{
    ptrdiff_t s = 1;
    for (size_t d = a->ndim; d-- > 0;) {
        a->strides[d] = s;
        s *= (ptrdiff_t)(a->shape[d] == 0 ? 1 : a->shape[d]);
    }
}

cr_status cr_array_view_init(cr_array *out, void *data, cr_dtype dtype, size_t ndim,
                             const size_t *shape, const ptrdiff_t *strides)
{
    if (out == NULL || ndim > CR_ARRAY_MAX_DIMS || cr_dtype_size(dtype) == 0 ||
        (ndim > 0 && shape == NULL))
        return CR_EINVAL;
    memset(out, 0, sizeof *out);
    size_t n;
    if (!cr__shape_numel(ndim, shape, cr_dtype_size(dtype), &n))
        return CR_EOVERFLOW; /* the element or byte count (or a row-major stride) overflows */
    out->dtype = (uint8_t)dtype;
    out->ndim = (uint8_t)ndim;
    for (size_t d = 0; d < ndim; d++)
        out->shape[d] = shape[d];
    if (strides != NULL) {
        for (size_t d = 0; d < ndim; d++)
            out->strides[d] = strides[d];
    } else {
        set_row_major(out);
    }
    out->data = data;
    if (data == NULL && cr_array_numel(out) != 0)
        return CR_EINVAL;
    return CR_OK;
}

cr_array cr_array_vector(double *data, size_t n)
{
    cr_array a;
    cr_array_view_init(&a, data, CR_DT_F64, 1, &n, NULL);
    return a;
}

cr_array cr_array_matrix(double *data, size_t rows, size_t cols)
{
    cr_array a;
    size_t shape[2] = {rows, cols};
    cr_array_view_init(&a, data, CR_DT_F64, 2, shape, NULL);
    return a;
}

size_t cr_array_numel(const cr_array *a)
{
    return cr__array_numel(a);
}

size_t cr_array_nstored(const cr_array *a)
{
    if (a->structure == CR_MAT_DIAGONAL)
        return a->shape[0];
    return cr_array_numel(a);
}

bool cr_array_is_contiguous(const cr_array *a)
{
    return cr__array_is_contiguous(a);
}

bool cr_array_same_shape(const cr_array *a, const cr_array *b)
{
    size_t d = 0;
    while (d < a->ndim && a->ndim == b->ndim && a->shape[d] == b->shape[d])
        d++;
    return a->ndim == b->ndim && d == a->ndim;
}

/* Allocates descriptor + data for `nstored` elements, contiguous; shape set by caller. */
static cr_status alloc_array(cr_arena *arena, cr_dtype dtype, size_t ndim, const size_t *shape,
                             cr_array **out)
{
    *out = NULL;
    if (ndim > CR_ARRAY_MAX_DIMS || cr_dtype_size(dtype) == 0 || (ndim > 0 && shape == NULL))
        return CR__FAIL(arena, CR_EINVAL, "cr_array_new: invalid dtype %d or ndim %zu", (int)dtype,
                        ndim);
    size_t n, bytes;
    cr_status st =
        cr__ck_numel(cr_arena_ctx(arena), "cr_array_new", ndim, shape, cr_dtype_size(dtype), &n);
    if (st != CR_OK)
        return st;
    bytes = n * cr_dtype_size(dtype); /* checked above */
    cr_array *a = cr_arena_alloc(arena, sizeof *a, _Alignof(cr_array));
    if (a == NULL)
        return CR__ALLOC_STATUS(arena);
    void *data = cr_arena_calloc(arena, 1, bytes, 0);
    if (data == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_array_view_init(a, data, dtype, ndim, shape, NULL);
    a->flags = CR_ARRAY_WRITABLE;
    *out = a;
    return CR_OK;
}

cr_status cr_array_new(cr_arena *arena, cr_dtype dtype, size_t ndim, const size_t *shape,
                       cr_array **out)
{
    if (out == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_array_new: out is NULL");
    return alloc_array(arena, dtype, ndim, shape, out);
}

cr_array cr__storage_view(const cr_array *a)
{
    cr_array v = *a;
    if (a->structure == CR_MAT_DIAGONAL) {
        v.ndim = 1;
        v.shape[1] = 0;
        v.strides[1] = 0;
    }
    v.structure = CR_MAT_DENSE;
    return v;
}

cr_complex cr__load(const cr_array *a, ptrdiff_t off)
{
    switch ((cr_dtype)a->dtype) {
    case CR_DT_F64:
        return ((const double *)a->data)[off];
    case CR_DT_F32:
        return (double)((const float *)a->data)[off];
    case CR_DT_C128:
        return ((const cr_complex *)a->data)[off];
    case CR_DT_I64:
        return (double)((const int64_t *)a->data)[off];
    case CR_DT_BOOL:
        return ((const bool *)a->data)[off] ? 1.0 : 0.0;
    }
    return 0.0;
}

void cr__store(cr_array *a, ptrdiff_t off, cr_complex v)
{
    switch ((cr_dtype)a->dtype) {
    case CR_DT_F64:
        ((double *)a->data)[off] = creal(v);
        break;
    case CR_DT_F32:
        ((float *)a->data)[off] = (float)creal(v);
        break;
    case CR_DT_C128:
        ((cr_complex *)a->data)[off] = v;
        break;
    case CR_DT_I64:
        ((int64_t *)a->data)[off] = (int64_t)creal(v);
        break;
    case CR_DT_BOOL:
        ((bool *)a->data)[off] = creal(v) != 0.0;
        break;
    }
}

void cr__iter_init(cr__iter *it, const cr_array *const *a, size_t narr)
{
    memset(it, 0, sizeof *it);
    it->ndim = a[0]->ndim;
    it->narr = narr;
    it->total = 1;
    for (size_t d = 0; d < it->ndim; d++) {
        it->shape[d] = a[0]->shape[d];
        it->total *= it->shape[d];
    }
    for (size_t k = 0; k < narr; k++)
        for (size_t d = 0; d < it->ndim; d++)
            it->strides[k][d] = a[k]->strides[d];
}

bool cr__iter_next(cr__iter *it)
{
    if (++it->count >= it->total)
        return false;
    for (size_t d = it->ndim; d-- > 0;) {
        if (++it->idx[d] < it->shape[d]) {
            for (size_t k = 0; k < it->narr; k++)
                it->off[k] += it->strides[k][d];
            return true;
        }
        for (size_t k = 0; k < it->narr; k++)
            it->off[k] -= (ptrdiff_t)(it->shape[d] - 1) * it->strides[k][d];
        it->idx[d] = 0;
    }
    return false;
}

cr_complex cr_array_get_linear(const cr_array *a, size_t index)
{
    if (a->ndim == 0)
        return cr__load(a, 0);
    if (a->structure == CR_MAT_DENSE || a->ndim != 2) {
        ptrdiff_t off = 0;
        for (size_t d = a->ndim; d-- > 0;) {
            size_t n = a->shape[d];
            off += (ptrdiff_t)(index % n) * a->strides[d];
            index /= n;
        }
        return cr__load(a, off);
    }
    size_t cols = a->shape[1];
    size_t i = index / cols, j = index % cols;
    if (a->structure == CR_MAT_DIAGONAL)
        return i == j ? cr__load(a, (ptrdiff_t)i * a->strides[0]) : 0.0;
    size_t r, c;
    cr__rd how = cr__struct_read(a->structure, i, j, &r, &c);
    if (how == CR__RD_ZERO)
        return 0.0;
    if (how == CR__RD_ONE)
        return 1.0;
    cr_complex v = cr__load(a, (ptrdiff_t)r * a->strides[0] + (ptrdiff_t)c * a->strides[1]);
    return how == CR__RD_CONJ ? conj(v) : how == CR__RD_REAL ? creal(v) : v;
}

cr_status cr__densify(cr_arena *arena, const cr_array *a, cr_dtype dtype, cr_array **out)
{
    if (dtype == 0)
        dtype = (cr_dtype)a->dtype;
    cr_status st = alloc_array(arena, dtype, a->ndim, a->shape, out);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(a);
    if (a->structure == CR_MAT_DENSE) {
        const cr_array *arrs[2] = {a, *out};
        cr__iter it;
        cr__iter_init(&it, arrs, 2);
        if (n == 0)
            return CR_OK;
        do
            cr__store(*out, it.off[1], cr__load(a, it.off[0]));
        while (cr__iter_next(&it));
        return CR_OK;
    }
    for (size_t k = 0; k < n; k++)
        cr__store(*out, (ptrdiff_t)k, cr_array_get_linear(a, k));
    return CR_OK;
}

cr_status cr_array_copy(cr_arena *arena, const cr_array *src, cr_array **out)
{
    if (out == NULL || src == NULL)
        return CR__FAIL(arena, CR_EINVAL, "cr_array_copy: NULL argument");
    if (src->structure == CR_MAT_DENSE)
        return cr__densify(arena, src, 0, out);
    cr_array sv = cr__storage_view(src);
    cr_status st = cr__densify(arena, &sv, 0, out);
    if (st != CR_OK)
        return st;
    (*out)->ndim = src->ndim;
    (*out)->shape[0] = src->shape[0];
    (*out)->shape[1] = src->shape[1];
    if (src->structure == CR_MAT_DIAGONAL) {
        (*out)->strides[0] = 1;
        (*out)->strides[1] = 0;
    } else {
        (*out)->strides[0] = (ptrdiff_t)src->shape[1];
        (*out)->strides[1] = 1;
    }
    (*out)->structure = src->structure;
    return CR_OK;
}
