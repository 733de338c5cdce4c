/*
 * Indexing: getindex (a copy) and view (a strided view where the indices allow it) with
 * integers, ranges, index arrays, masks and colons, Cartesian (one index per dimension) or
 * linear (one index). The pullback scatter-adds the cotangent into a zero array of the
 * argument's shape (repeated indices accumulate); it is an InplaceableThunk whose add!
 * scatters straight into the accumulator.
 */
#include "family.h"

/* The index values: a range start:step:stop (cr_range) and the colon. */
static const cr_field k_range_fields[3] = {
    {"start", offsetof(cr_range, start), CR_KIND_I64, NULL},
    {"stop", offsetof(cr_range, stop), CR_KIND_I64, NULL},
    {"step", offsetof(cr_range, step), CR_KIND_I64, NULL},
};
const cr_type cr_range_type = {"cr_range", sizeof(cr_range), 3, k_range_fields};
const cr_value cr_colon = {.kind = CR_KIND_NOTHING};

/* One dimension's index, resolved to a list. */
typedef struct index_dim {
    int64_t *list; /* indices along the dimension (or linear indices) */
    size_t n;
    bool drop;    /* an integer index: the dimension is dropped */
    bool strided; /* an integer, range or colon: a view can express it */
    int64_t start, step;
} index_dim;

/* The resolved indexing: the output shape and, for each output element in row-major
 * order, the row-major linear index into A. */
typedef struct indexing {
    size_t ondim;
    size_t oshape[CR_ARRAY_MAX_DIMS];
    size_t m;     /* output elements */
    int64_t *lin; /* m linear indices into A */
    bool scalar;  /* every dimension dropped: the output is a scalar */
    bool strided; /* a view can express it (Cartesian, integers/ranges/colons) */
    index_dim dims[CR_ARRAY_MAX_DIMS];
    size_t nidx;
} indexing;

static cr_status out_of_bounds(cr_arena *arena, const char *who, int64_t i, size_t n, size_t d)
{
    return CR__FAIL(arena, CR_EINVAL,
                    "%s: index %lld out of bounds for extent %zu (index %zu; indices count "
                    "from 0)",
                    who, (long long)i, n, d + 1);
}

/* Resolve index value v against extent n (the whole array's numel for linear indexing,
 * mask_like: the array a linear mask must match). */
static cr_status resolve(cr_arena *arena, const char *who, const cr_value *v, size_t n,
                         const cr_array *mask_like, size_t d, index_dim *out)
{
    memset(out, 0, sizeof *out);
    switch (v->kind) {
    case CR_KIND_I64:
    case CR_KIND_I32: {
        int64_t i = v->u.i64;
        if (i < 0 || (uint64_t)i >= n)
            return out_of_bounds(arena, who, i, n, d);
        out->list = cr_arena_alloc(arena, sizeof *out->list, _Alignof(int64_t));
        if (out->list == NULL)
            return CR__ALLOC_STATUS(arena);
        out->list[0] = i;
        out->n = 1;
        out->drop = true;
        out->strided = true;
        out->start = i;
        out->step = 1;
        return CR_OK;
    }
    case CR_KIND_NOTHING:
    case CR_KIND_STRUCT: {
        int64_t start = 0, stop = (int64_t)n, step = 1;
        if (v->kind == CR_KIND_STRUCT) {
            if (v->u.obj.type != &cr_range_type || v->u.obj.ptr == NULL)
                return CR__FAIL(arena, CR_EINVAL, "%s: index %zu is a struct, not a cr_range", who,
                                d + 1);
            const cr_range *r = v->u.obj.ptr;
            start = r->start;
            stop = r->stop;
            step = r->step;
            if (step == 0)
                return CR__FAIL(arena, CR_EINVAL, "%s: range with step 0", who);
        }
        /* The length is exact for any start, stop and step (cr__range_len). A range of
         * more than n elements leaves the extent; otherwise its last element lies between
         * start and stop, so start + (len - 1) * step cannot overflow. */
        uint64_t len = cr__range_len(start, stop, step);
        if (len > 0) {
            if (start < 0 || (uint64_t)start >= n)
                return out_of_bounds(arena, who, start, n, d);
            if (len > n)
                return out_of_bounds(arena, who, stop, n, d);
            int64_t last = start + (int64_t)(len - 1) * step;
            if (last < 0 || (uint64_t)last >= n)
                return out_of_bounds(arena, who, last, n, d);
        }
        out->n = (size_t)len;
        out->list =
            cr_arena_alloc(arena, (out->n ? out->n : 1) * sizeof *out->list, _Alignof(int64_t));
        if (out->list == NULL)
            return CR__ALLOC_STATUS(arena);
        for (size_t k = 0; k < out->n; k++)
            out->list[k] = start + (int64_t)k * step;
        out->strided = true;
        out->start = len > 0 ? start : 0;
        out->step = step;
        return CR_OK;
    }
    case CR_KIND_ARRAY: {
        const cr_array *a = v->u.arr;
        if (a == NULL)
            return CR__FAIL(arena, CR_EINVAL, "%s: NULL index array", who);
        if (a->dtype == CR_DT_I64) {
            cr_status st = cr__int_list(arena, who, v, &out->list, &out->n);
            if (st != CR_OK)
                return st;
            for (size_t k = 0; k < out->n; k++)
                if (out->list[k] < 0 || (uint64_t)out->list[k] >= n)
                    return out_of_bounds(arena, who, out->list[k], n, d);
            return CR_OK;
        }
        if (a->dtype == CR_DT_BOOL) {
            size_t numel = cr_array_numel(a);
            bool shape_ok = mask_like != NULL
                                ? cr_array_same_shape(a, mask_like) || (a->ndim == 1 && numel == n)
                                : numel == n;
            if (!shape_ok)
                return CR__FAIL(arena, CR_ESHAPE,
                                "%s: a mask of %zu element%s for an extent of %zu (index %zu)", who,
                                numel, CR__S(numel), n, d + 1);
            out->list =
                cr_arena_alloc(arena, (numel ? numel : 1) * sizeof *out->list, _Alignof(int64_t));
            if (out->list == NULL)
                return CR__ALLOC_STATUS(arena);
            out->n = 0;
            for (size_t k = 0; k < numel; k++)
                if (creal(cr_array_get_linear(a, k)) != 0)
                    out->list[out->n++] = (int64_t)k;
            return CR_OK;
        }
        break;
    }
    default:
        break;
    }
    return CR__FAIL(arena, CR_EINVAL,
                    "%s: index %zu must be an integer, a cr_range, an i64 array, a bool mask "
                    "or cr_colon (got %s)",
                    who, d + 1, cr_kind_name(v->kind));
}

static cr_status index_parse(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                             const cr_array **Aout, indexing *ix)
{
    memset(ix, 0, sizeof *ix);
    const cr_array *A;
    cr_status st = cr__array_arg(arena, who, args, nargs, 0, &A);
    if (st != CR_OK)
        return st;
    *Aout = A;
    if (!cr_dtype_is_float((cr_dtype)A->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an f64, f32 or c128 array", who);
    size_t nidx = nargs - 1;
    ix->nidx = nidx;
    if (nidx == 0)
        return CR__FAIL(arena, CR_EINVAL, "%s: no index given", who);
    bool linear = nidx == 1 && A->ndim != 1;
    if (!linear && nidx != A->ndim)
        return CR__FAIL(arena, CR_EINVAL,
                        "%s: %zu indices for an array of %u dimension%s (give one per dimension, "
                        "or one linear index)",
                        who, nidx, (unsigned)A->ndim, CR__S((unsigned)A->ndim));
    if (linear) {
        index_dim *d = &ix->dims[0];
        st = resolve(arena, who, &args[1], cr_array_numel(A), A, 0, d);
        if (st != CR_OK)
            return st;
        ix->scalar = d->drop;
        ix->ondim = d->drop ? 0 : 1;
        ix->oshape[0] = d->n;
        ix->m = d->n;
        ix->lin = d->list;
        ix->strided = false;
        return CR_OK;
    }
    ix->strided = true;
    size_t m = 1;
    for (size_t k = 0; k < nidx; k++) {
        index_dim *d = &ix->dims[k];
        st = resolve(arena, who, &args[k + 1], A->shape[k], NULL, k, d);
        if (st != CR_OK)
            return st;
        ix->strided = ix->strided && d->strided;
        if (!d->drop)
            ix->oshape[ix->ondim++] = d->n;
    }
    /* Index lists may repeat indices: their product is checked, not the array's. */
    st = cr__ck_numel(cr_arena_ctx(arena), who, ix->ondim, ix->oshape, sizeof *ix->lin, &m);
    if (st != CR_OK)
        return st;
    ix->scalar = ix->ondim == 0;
    ix->m = m;
    ix->lin = cr_arena_alloc(arena, (m ? m : 1) * sizeof *ix->lin, _Alignof(int64_t));
    if (ix->lin == NULL)
        return CR__ALLOC_STATUS(arena);
    ptrdiff_t rm[CR_ARRAY_MAX_DIMS];
    cr__row_major(A->ndim, A->shape, rm);
    size_t pos[CR_ARRAY_MAX_DIMS] = {0};
    for (size_t e = 0; e < m; e++) {
        int64_t l = 0;
        for (size_t k = 0; k < nidx; k++)
            l += ix->dims[k].list[pos[k]] * (int64_t)rm[k];
        ix->lin[e] = l;
        for (size_t k = nidx; k-- > 0;) {
            if (++pos[k] < ix->dims[k].n)
                break;
            pos[k] = 0;
        }
    }
    return CR_OK;
}

/* ---- Pullback: scatter-add ------------------------------------------------------------ */

typedef struct index_env {
    const cr_array *A;
    cr_project *pA;
    indexing ix;
    cr_dtype wdt;
} index_env;

typedef struct index_thunk {
    const index_env *e;
    const cr_array *g; /* cotangent, work dtype, contiguous, m elements */
} index_thunk;
CR__EG_THUNK_NEW(index_thunk_new, index_thunk, index_env)

static void scatter(const index_env *e, const cr_array *g, cr_array *dx)
{
    size_t m = e->ix.m;
    const int64_t *lin = e->ix.lin;
    if (dx->dtype == CR_DT_C128) {
        const cr_complex *s = g->data;
        cr_complex *d = dx->data;
        for (size_t k = 0; k < m; k++)
            d[lin[k]] += s[k];
    } else {
        const double *s = g->data;
        double *d = dx->data;
        for (size_t k = 0; k < m; k++)
            d[lin[k]] += s[k];
    }
}

static cr_status index_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    index_thunk *t = env;
    cr_array *dx;
    cr_status st = cr__new_like(arena, t->e->wdt, t->e->A, true, &dx);
    if (st != CR_OK)
        return st;
    scatter(t->e, t->g, dx);
    return cr__give(arena, t->e->pA, dx, out);
}

CR__THUNK_ADD(index_add, index_thunk, t->e->wdt, t->e->A, scatter(t->e, t->g, dest), index_thunk_fn)

/* Ā = zeros(A) with Ȳ scatter-added at the indices (repeats accumulate). */
static cr_status index_pullback(CR__PULLBACK_PARAMS)
{
    index_env *e = env;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st =
        cr__tan_array(arena, "getindex_pullback", *dy, e->ix.ondim, e->ix.oshape, e->wdt, &g);
    return st != CR_OK ? st
                       : index_thunk_new(arena, e, g, index_thunk_fn, index_add,
                                         "getindex_pullback_thunk", &dx[1]);
}

/* ---- getindex and view ------------------------------------------------------------------ */

static cr_status index_rrule(cr_arena *arena, bool view, const cr_value *args, size_t nargs,
                             cr_value *y, cr_pullback *pb, const void *udata)
{
    const char *who = view ? "view" : "getindex";
    const cr_array *A;
    indexing ix;
    cr_status st = index_parse(arena, who, args, nargs, &A, &ix);
    if (st != CR_OK)
        return st;
    if (ix.scalar) {
        *y = cr__scalar_value((cr_dtype)A->dtype, cr_array_get_linear(A, (size_t)ix.lin[0]));
    } else if (view && ix.strided && A->structure == CR_MAT_DENSE) {
        cr_array *r;
        st = cr__view_of(arena, A, &r);
        if (st != CR_OK)
            return st;
        ptrdiff_t off = 0;
        size_t k = 0;
        for (size_t d = 0; d < ix.nidx; d++) {
            const index_dim *id = &ix.dims[d];
            off += (ptrdiff_t)id->start * A->strides[d];
            if (id->drop)
                continue;
            r->shape[k] = id->n;
            /* A range of one element may have any step (INT64_MIN included); with two or
             * more its step is below the extent, so the product is below the array's size. */
            r->strides[k] = id->n > 1 ? (ptrdiff_t)id->step * A->strides[d] : A->strides[d];
            k++;
        }
        for (size_t d = k; d < CR_ARRAY_MAX_DIMS; d++) {
            r->shape[d] = 0;
            r->strides[d] = 0;
        }
        r->ndim = (uint8_t)k;
        r->data = (unsigned char *)A->data + off * (ptrdiff_t)cr_dtype_size((cr_dtype)A->dtype);
        *y = cr_value_array(r);
    } else {
        const cr_array *D;
        st = cr__dense(arena, A, (cr_dtype)A->dtype, &D);
        cr_array *r;
        if (st == CR_OK)
            st = cr__new(arena, (cr_dtype)A->dtype, ix.ondim, ix.oshape, false, &r);
        if (st != CR_OK)
            return st;
        size_t es = cr_dtype_size((cr_dtype)A->dtype);
        const unsigned char *src = D->data;
        unsigned char *dst = r->data;
        for (size_t k = 0; k < ix.m; k++)
            memcpy(dst + k * es, src + (size_t)ix.lin[k] * es, es);
        *y = cr_value_array(r);
    }
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    CR__ARENA_NEW(arena, index_env, e);
    e->A = A;
    e->ix = ix;
    e->wdt = cr__work((cr_dtype)A->dtype);
    return cr__rrule_end(arena, CR_OK, udata, &args[0], &e->pA, index_pullback, e,
                         view ? "view_pullback" : "getindex_pullback", nargs + 1, pb);
}

/* getindex(A, I...) = A[I...]: Ā = scatter-add of Ȳ. */
static cr_status getindex_rrule(CR__RRULE_PARAMS)
{
    return index_rrule(arena, false, args, nargs, y, pb, udata);
}
CR__ARRAY_FN(getindex, "getindex", -1)

/* view(A, I...): as getindex, a view of A where the indices allow it. */
static cr_status view_rrule(CR__RRULE_PARAMS)
{
    return index_rrule(arena, true, args, nargs, y, pb, udata);
}
CR__ARRAY_FN(view, "view", -1)

/* ---- Test registrations ---------------------------------------------------------------- */

/* A random index of one of the kinds for extent n (linear: mask of A's shape). */
static cr_status sample_index(cr_arena *arena, uint64_t *rng, size_t n, const cr_array *A,
                              bool linear, cr_value *out)
{
    size_t kind = cr__rng_below(rng, 5);
    switch (kind) {
    case 0:
        *out = cr_value_i64((int64_t)cr__rng_below(rng, n));
        return CR_OK;
    case 1: {
        CR__ARENA_NEW(arena, cr_range, r);
        if (cr__rng_below(rng, 2)) {
            *r = (cr_range){(int64_t)n - 1, -1, -2};
        } else {
            *r = (cr_range){(int64_t)cr__rng_below(rng, n), (int64_t)n, 1};
        }
        *out = cr_value_struct(&cr_range_type, r);
        return CR_OK;
    }
    case 2: {
        /* Repeated indices: their cotangents accumulate. */
        int64_t list[4] = {(int64_t)cr__rng_below(rng, n), (int64_t)cr__rng_below(rng, n), 0, 0};
        list[2] = list[0];
        list[3] = (int64_t)(n - 1);
        cr_array *a;
        cr_status st = cr__i64_array(arena, 4, list, &a);
        if (st == CR_OK)
            *out = cr_value_array(a);
        return st;
    }
    case 3: {
        cr_array *m;
        size_t shape1 = n;
        cr_status st = linear ? cr__new(arena, CR_DT_BOOL, A->ndim, A->shape, false, &m)
                              : cr__new(arena, CR_DT_BOOL, 1, &shape1, false, &m);
        if (st != CR_OK)
            return st;
        size_t numel = cr_array_numel(m);
        for (size_t k = 0; k < numel; k++)
            ((bool *)m->data)[k] = cr__rng_below(rng, 2) != 0;
        ((bool *)m->data)[0] = true;
        *out = cr_value_array(m);
        return CR_OK;
    }
    default:
        *out = cr_colon;
        return CR_OK;
    }
}

static cr_status sample_getindex(CR__SAMPLE_PARAMS)
{
    static const size_t s2[2] = {3, 4}, s4[4] = {2, 3, 2, 2};
    size_t five = 5;
    size_t nidx = nargs - 1, ndim;
    const size_t *shape;
    if (nidx == 1) {
        bool vec = cr__rng_below(rng, 2) != 0;
        ndim = vec ? 1 : 2;
        shape = vec ? &five : s2;
    } else {
        ndim = nidx;
        shape = nidx == 2 ? s2 : s4;
    }
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), ndim, shape, -2, 2, &A);
    if (st != CR_OK)
        return st;
    args[0] = cr_value_array(A);
    bool linear = nidx == 1 && ndim != 1;
    for (size_t k = 0; k < nidx && st == CR_OK; k++)
        st = sample_index(arena, rng, linear ? cr_array_numel(A) : shape[k], A, linear,
                          &args[k + 1]);
    return st;
}

static const cr_rule_test k_test_getindex = {.sample = sample_getindex};

cr_status cr__array_register_index(cr_registry *reg)
{
    const uint32_t idx = CR_M_INT | CR_M_A_INT | CR_M_A_BOOL | CR_M_STRUCT | CR_M_NOTHING;
    const cr_argspec a[5] = {{CR__M_FARRAY, NULL},
                             {idx, &cr_range_type},
                             {idx, &cr_range_type},
                             {idx, &cr_range_type},
                             {idx, &cr_range_type}};
    const cr_function *fns[2] = {&getindex_function, &view_function};
    const cr_rrule_fn rr[2] = {getindex_rrule, view_rrule};
    for (size_t i = 0; i < 2; i++) {
        cr_status st = cr__add_rule_so(reg, fns[i], a, 2, false, cr__linear_frule, rr[i],
                                       &k_test_getindex, CR_LINEAR, NULL);
        if (st == CR_OK)
            st = cr__add_rule_so(reg, fns[i], a, 3, false, cr__linear_frule, rr[i],
                                 &k_test_getindex, CR_LINEAR, NULL);
        if (st == CR_OK)
            st = cr__add_rule_so(reg, fns[i], a, 5, true, cr__linear_frule, rr[i], &k_test_getindex,
                                 CR_LINEAR, NULL);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}
