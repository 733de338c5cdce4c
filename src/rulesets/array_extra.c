/*
 * Array rules beyond the core set: eachrow, eachcol and eachslice (tuples of views), unique
 * (first occurrences), opnorm (p = 1, 2, Inf), normalize, and the operations of a matrix
 * with a UniformScaling λI (add_uniform, sub_uniform, mul_uniform, ldiv_uniform,
 * rdiv_uniform), whose λ is passed as a plain scalar. opnorm(A, 2), normalize and the
 * λA⁻¹ forms reuse the rules of svdvals, norm and matinv through dispatch.
 */
#include <float.h>
#include <math.h>

#include "forms_impl.h"

/* ---- Shared helpers ------------------------------------------------------------------------ */

/* dest (any strides, work dtype) += g (contiguous, same shape and dtype). */
static void add_into_view(cr_array *dest, const cr_array *g)
{
    size_t nd = dest->ndim, idx[CR_ARRAY_MAX_DIMS] = {0}, n = cr_array_numel(dest);
    ptrdiff_t off = 0;
    bool cplx = dest->dtype == CR_DT_C128;
    for (size_t i = 0; i < n; i++) {
        if (cplx)
            ((cr_complex *)dest->data)[off] += ((const cr_complex *)g->data)[i];
        else
            ((double *)dest->data)[off] += ((const double *)g->data)[i];
        for (size_t d = nd; d-- > 0;) {
            off += dest->strides[d];
            if (++idx[d] < dest->shape[d])
                break;
            off -= (ptrdiff_t)dest->shape[d] * dest->strides[d];
            idx[d] = 0;
        }
    }
}

/* A scalar tangent of the work dtype wdt holding v (real part for real wdt). */
static cr_tangent work_scalar(cr_dtype wdt, cr_complex v)
{
    return wdt == CR_DT_C128 ? cr_tangent_c128(v) : cr_tangent_f64(creal(v));
}

/* Σ conj(x_i) y_i over two contiguous work arrays of n elements. */
static cr_complex dotc(const cr_array *x, const cr_array *y, size_t n)
{
    return cr__dotc((cr_dtype)x->dtype, n, x->data, y->data);
}

/* ---- eachrow, eachcol, eachslice ---------------------------------------------------------- */

typedef enum { SL_ROW, SL_COL, SL_SLICE } sl_kind;

/* Most slices a tuple may hold (see k_sl_types). */
#define SL_MAX 1024
static const char *const k_sl_names[3] = {"eachrow", "eachcol", "eachslice"};
static const char *const k_sl_pb_names[3] = {"eachrow_pullback", "eachcol_pullback",
                                             "eachslice_pullback"};

/* The slicing of A: slice k fixes the iterated dimensions kd (in the order listed) at the
 * k-th multi-index in row-major order, and keeps the remaining dimensions rd in order. */
typedef struct slicing {
    const cr_array *A;
    const cr_array *src; /* A, or a dense copy of a structured A */
    size_t n;            /* number of slices */
    size_t kdim, kd[CR_ARRAY_MAX_DIMS];
    size_t rdim, rd[CR_ARRAY_MAX_DIMS];
    size_t rshape[CR_ARRAY_MAX_DIMS];
} slicing;

static cr_status sl_parse(cr_arena *arena, sl_kind k, const cr_value *args, size_t nargs,
                          slicing *s)
{
    const char *who = k_sl_names[k];
    size_t want = k == SL_SLICE ? 2 : 1;
    const cr_array *A;
    cr_status st = cr__nargs(arena, who, nargs, want, want);
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, 0, &A);
    if (st != CR_OK)
        return st;
    memset(s, 0, sizeof *s);
    s->A = A;
    bool used[CR_ARRAY_MAX_DIMS] = {false};
    if (k != SL_SLICE) {
        if (A->ndim != 1 && A->ndim != 2)
            return CR__FAIL(arena, CR_ESHAPE,
                            "%s: expected a vector or a matrix, got %u dimension%s", who,
                            (unsigned)A->ndim, CR__S((unsigned)A->ndim));
        /* eachrow iterates dimension 0; eachcol dimension 1 (a vector is one column). */
        size_t d = k == SL_ROW ? 0 : 1;
        if (d < A->ndim) {
            s->kd[s->kdim++] = d;
            used[d] = true;
        }
    } else {
        int64_t one = 0, *list = &one;
        size_t n = 1;
        st = args[1].kind == CR_KIND_ARRAY ? cr__int_list(arena, who, &args[1], &list, &n)
                                           : cr__int_arg(arena, who, &args[1], &one);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < n; i++) {
            if (list[i] < 0 || list[i] >= (int64_t)A->ndim || used[list[i]])
                return CR__FAIL(arena, CR_EINVAL,
                                "eachslice: dimension %lld is out of range or repeated (the array "
                                "has %u dimension%s)",
                                (long long)list[i], (unsigned)A->ndim, CR__S(A->ndim));
            used[list[i]] = true;
            s->kd[s->kdim++] = (size_t)list[i];
        }
    }
    s->n = 1;
    for (size_t j = 0; j < s->kdim; j++) {
        size_t ext = A->shape[s->kd[j]];
        if (ext > SL_MAX || s->n * ext > SL_MAX)
            return CR__FAIL(arena, CR_EUNIMPL,
                            "%s: at most %d slices are supported (index the array instead)", who,
                            SL_MAX);
        s->n *= ext;
    }
    for (size_t d = 0; d < A->ndim; d++)
        if (!used[d]) {
            s->rshape[s->rdim] = A->shape[d];
            s->rd[s->rdim++] = d;
        }
    if (A->structure == CR_MAT_DENSE) {
        s->src = A;
        return CR_OK;
    }
    cr_array *c;
    st = cr__densify(arena, A, 0, &c);
    if (st == CR_OK) {
        c->flags = 0;
        s->src = c;
    }
    return st;
}

/* Slice k of `src`, an array of A's shape (any strides), as a view (flags 0). */
static void sl_view(const slicing *s, const cr_array *src, size_t k, cr_array *out)
{
    ptrdiff_t off = 0;
    size_t rem = k;
    for (size_t j = s->kdim; j-- > 0;) {
        size_t ext = s->A->shape[s->kd[j]];
        off += (ptrdiff_t)(rem % ext) * src->strides[s->kd[j]];
        rem /= ext;
    }
    memset(out, 0, sizeof *out);
    out->data = (char *)src->data + off * (ptrdiff_t)cr_dtype_size((cr_dtype)src->dtype);
    out->dtype = src->dtype;
    out->ndim = (uint8_t)s->rdim;
    for (size_t i = 0; i < s->rdim; i++) {
        out->shape[i] = s->rshape[i];
        out->strides[i] = src->strides[s->rd[i]];
    }
    out->structure = CR_MAT_DENSE;
    out->flags = 0;
}

/* The tuple types of 0 to SL_MAX slices. The tangent algebra identifies a struct type by
 * its address, so every call slicing into n parts must return the same type: they are
 * static (a tuple of n cr_array fields; the type of n slices is k_sl_types[n]). */
#define SL_F1(b)                                                  \
    {                                                             \
        NULL, (size_t)(b) * sizeof(cr_array), CR_KIND_ARRAY, NULL \
    }
#define SL_F2(b)    SL_F1(b), SL_F1((b) + 1)
#define SL_F4(b)    SL_F2(b), SL_F2((b) + 2)
#define SL_F8(b)    SL_F4(b), SL_F4((b) + 4)
#define SL_F16(b)   SL_F8(b), SL_F8((b) + 8)
#define SL_F32(b)   SL_F16(b), SL_F16((b) + 16)
#define SL_F64(b)   SL_F32(b), SL_F32((b) + 32)
#define SL_F128(b)  SL_F64(b), SL_F64((b) + 64)
#define SL_F256(b)  SL_F128(b), SL_F128((b) + 128)
#define SL_F512(b)  SL_F256(b), SL_F256((b) + 256)
#define SL_F1024(b) SL_F512(b), SL_F512((b) + 512)
static const cr_field k_sl_fields[SL_MAX] = {SL_F1024(0)};
#define SL_T1(b)                                                              \
    {                                                                         \
        "eachslice", (size_t)(b) * sizeof(cr_array), (size_t)(b), k_sl_fields \
    }
#define SL_T2(b)    SL_T1(b), SL_T1((b) + 1)
#define SL_T4(b)    SL_T2(b), SL_T2((b) + 2)
#define SL_T8(b)    SL_T4(b), SL_T4((b) + 4)
#define SL_T16(b)   SL_T8(b), SL_T8((b) + 8)
#define SL_T32(b)   SL_T16(b), SL_T16((b) + 16)
#define SL_T64(b)   SL_T32(b), SL_T32((b) + 32)
#define SL_T128(b)  SL_T64(b), SL_T64((b) + 64)
#define SL_T256(b)  SL_T128(b), SL_T128((b) + 128)
#define SL_T512(b)  SL_T256(b), SL_T256((b) + 256)
#define SL_T1024(b) SL_T512(b), SL_T512((b) + 512)
static const cr_type k_sl_types[SL_MAX + 1] = {SL_T1024(0), SL_T1(SL_MAX)};

/* The tuple of the n slices of src (n <= SL_MAX, checked by sl_parse). */
static cr_status sl_tuple(cr_arena *arena, const slicing *s, const cr_array *src, cr_value *y)
{
    size_t cnt = s->n ? s->n : 1;
    cr_array *vals = cr_arena_calloc(arena, cnt, sizeof *vals, _Alignof(cr_array));
    if (vals == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < s->n; i++)
        sl_view(s, src, i, &vals[i]);
    *y = cr_value_struct(&k_sl_types[s->n], vals);
    return CR_OK;
}

typedef struct sl_env {
    slicing s;
    cr_project *pA;
    cr_dtype wdt;
    sl_kind kind;
} sl_env;

typedef struct sl_thunk {
    const sl_env *e;
    const cr_array **g; /* n slice cotangents (work dtype, contiguous) or NULL */
} sl_thunk;

/* dest (A's shape, contiguous, work dtype) += each slice cotangent at its slice. */
static void sl_scatter(const sl_thunk *t, cr_array *dest)
{
    for (size_t k = 0; k < t->e->s.n; k++) {
        if (t->g[k] == NULL)
            continue;
        cr_array v;
        sl_view(&t->e->s, dest, k, &v);
        add_into_view(&v, t->g[k]);
    }
}

static cr_status sl_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    sl_thunk *t = env;
    cr_array *dx;
    cr_status st = cr__new_like(arena, t->e->wdt, t->e->s.A, true, &dx);
    if (st != CR_OK)
        return st;
    sl_scatter(t, dx);
    return cr__give(arena, t->e->pA, dx, out);
}

static cr_status sl_add(cr_arena *arena, cr_array *dest, void *env)
{
    sl_thunk *t = env;
    if (cr__dest_ok(dest, t->e->wdt, t->e->s.A)) {
        sl_scatter(t, dest);
        return CR_OK;
    }
    cr_tangent v;
    cr_status st = sl_thunk_fn(arena, &v, env);
    return st != CR_OK ? st : cr__add_into(arena, dest, v);
}

/* Ā = zeros(A) with each slice's cotangent added at its slice; absent and zero fields of
 * the tuple's structural cotangent contribute nothing. */
static cr_status sl_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    sl_env *e = env;
    const char *who = k_sl_pb_names[e->kind];
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    dx[1] = cr_tangent_zero();
    cr_tangent t;
    cr_status st = cr_tangent_unthunk(*dy, &t);
    if (st != CR_OK)
        return st;
    if (cr_tangent_is_zero(t))
        return CR_OK;
    if (t.tag != CR_TAN_STRUCT || t.u.s.type->nfields != e->s.n)
        return CR__FAIL(arena, CR_ETANGENT,
                        "%s: the output is a tuple of %zu slices, its cotangent must be a "
                        "structural tangent of as many fields (got %s)",
                        who, e->s.n, cr_tag_name((cr_tag)t.tag));
    size_t cnt = e->s.n ? e->s.n : 1;
    sl_thunk *th = cr_arena_alloc(arena, sizeof *th, _Alignof(sl_thunk));
    const cr_array **g = cr_arena_calloc(arena, cnt, sizeof *g, _Alignof(const cr_array *));
    if (th == NULL || g == NULL)
        return CR__ALLOC_STATUS(arena);
    bool any = false;
    for (size_t k = 0; k < e->s.n; k++) {
        st = cr__tan_array(arena, who, cr_tangent_field(t, k), e->s.rdim, e->s.rshape, e->wdt,
                           &g[k]);
        if (st != CR_OK)
            return st;
        any = any || g[k] != NULL;
    }
    if (!any)
        return CR_OK;
    th->e = e;
    th->g = g;
    return cr__thunk(arena, sl_thunk_fn, sl_add, th, "eachslice_pullback_thunk", &dx[1]);
}

static cr_status sl_rrule(cr_arena *arena, sl_kind k, const cr_value *args, size_t nargs,
                          cr_value *y, cr_pullback *pb, const void *udata)
{
    sl_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(sl_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_status st = sl_parse(arena, k, args, nargs, &e->s);
    if (st == CR_OK)
        st = sl_tuple(arena, &e->s, e->s.src, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    e->kind = k;
    e->wdt = cr__work((cr_dtype)e->s.A->dtype);
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){sl_pullback, e, k_sl_pb_names[k], nargs + 1};
    return CR_OK;
}

/* frule: the slices of Ȧ (a tuple tangent of views of one array of A's element type). */
static cr_status sl_frule(cr_arena *arena, sl_kind k, const cr_tangent *dargs, const cr_value *args,
                          size_t nargs, cr_value *y, cr_tangent *dy)
{
    slicing s;
    cr_status st = sl_parse(arena, k, args, nargs, &s);
    if (st == CR_OK)
        st = sl_tuple(arena, &s, s.src, y);
    const cr_array *dA = NULL;
    if (st == CR_OK)
        st =
            cr__dx_array(arena, k_sl_names[k], dargs, args, 0, cr__work((cr_dtype)s.A->dtype), &dA);
    if (st != CR_OK || dA == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *dc;
    st = cr__cast(arena, dA, (cr_dtype)s.A->dtype, &dc);
    if (st != CR_OK)
        return st;
    size_t cnt = s.n ? s.n : 1;
    cr_tangent *fl = cr_arena_calloc(arena, cnt, sizeof *fl, _Alignof(cr_tangent));
    cr_array *views = cr_arena_calloc(arena, cnt, sizeof *views, _Alignof(cr_array));
    if (fl == NULL || views == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < s.n; i++) {
        sl_view(&s, dc, i, &views[i]);
        fl[i] = cr_tangent_array(&views[i]);
    }
    return cr_tangent_struct(arena, y->u.obj.type, NULL, fl, s.n, dy);
}

#define SL_RULES(NAME, KIND, ARITY) CR__PARAM_RULES(NAME, sl_rrule, sl_frule, KIND, ARITY)

SL_RULES(eachrow, SL_ROW, 1)
SL_RULES(eachcol, SL_COL, 1)
SL_RULES(eachslice, SL_SLICE, 2)

/* ---- unique -------------------------------------------------------------------------------- */

/* Julia's isless on floats: -0.0 < 0.0, NaN after everything. */
static bool fl_isless(double a, double b)
{
    if (isnan(a))
        return false;
    if (isnan(b))
        return true;
    if (a < b)
        return true;
    return a == b && signbit(a) && !signbit(b);
}

/* Stable bottom-up merge sort of the indices ix[0..n) by the values v. */
static void sort_indices(int64_t *ix, int64_t *tmp, size_t n, const double *v)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                tmp[o++] = fl_isless(v[ix[j]], v[ix[i]]) ? ix[j++] : ix[i++];
            while (i < mid)
                tmp[o++] = ix[i++];
            while (j < hi)
                tmp[o++] = ix[j++];
        }
        memcpy(ix, tmp, n * sizeof *ix);
    }
}

typedef struct uq_env {
    const cr_array *x;
    cr_project *px;
    int64_t *first; /* m indices into x, ascending */
    size_t m;
} uq_env;

/* The first occurrences of x's distinct values (isequal: NaNs equal, -0.0 and 0.0 not),
 * in order of appearance: sort the indices stably, keep the first of each run of equal
 * values, then list the kept indices in ascending order. O(n log n). */
static cr_status uq_forward(cr_arena *arena, const cr_value *args, size_t nargs, uq_env *e,
                            cr_value *y)
{
    const cr_array *x;
    cr_status st = cr__nargs(arena, "unique", nargs, 1, 1);
    if (st == CR_OK)
        st = cr__array_arg(arena, "unique", args, nargs, 0, &x);
    if (st != CR_OK)
        return st;
    if (x->ndim != 1 || (x->dtype != CR_DT_F64 && x->dtype != CR_DT_F32))
        return CR__FAIL(arena, CR_EINVAL, "unique: expected a real (f64 or f32) vector");
    const cr_array *xw;
    st = cr__dense(arena, x, CR_DT_F64, &xw);
    if (st != CR_OK)
        return st;
    size_t n = x->shape[0], cnt = n ? n : 1;
    const double *v = xw->data;
    int64_t *ix = cr_arena_alloc(arena, cnt * sizeof *ix, _Alignof(int64_t));
    int64_t *tmp = cr_arena_alloc(arena, cnt * sizeof *tmp, _Alignof(int64_t));
    bool *keep = cr_arena_calloc(arena, cnt, sizeof *keep, _Alignof(bool));
    if (ix == NULL || tmp == NULL || keep == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < n; i++)
        ix[i] = (int64_t)i;
    sort_indices(ix, tmp, n, v);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        bool same = i > 0 && !fl_isless(v[ix[i - 1]], v[ix[i]]);
        if (!same) {
            keep[ix[i]] = true;
            m++;
        }
    }
    e->x = x;
    e->m = m;
    e->first = tmp; /* reused: the sort is done */
    for (size_t i = 0, o = 0; i < n; i++)
        if (keep[i])
            e->first[o++] = (int64_t)i;
    cr_array *yw, *yo;
    st = cr__new(arena, CR_DT_F64, 1, &m, false, &yw);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < m; k++)
        ((double *)yw->data)[k] = v[e->first[k]];
    st = cr__cast(arena, yw, (cr_dtype)x->dtype, &yo);
    if (st == CR_OK)
        *y = cr_value_array(yo);
    return st;
}

typedef struct uq_thunk {
    const uq_env *e;
    const cr_array *g; /* m elements, f64 */
} uq_thunk;

static void uq_scatter(const uq_thunk *t, cr_array *dest)
{
    const double *g = t->g->data;
    double *d = dest->data;
    for (size_t k = 0; k < t->e->m; k++)
        d[t->e->first[k]] += g[k];
}

static cr_status uq_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    uq_thunk *t = env;
    cr_array *dx;
    cr_status st = cr__new_like(arena, CR_DT_F64, t->e->x, true, &dx);
    if (st != CR_OK)
        return st;
    uq_scatter(t, dx);
    return cr__give(arena, t->e->px, dx, out);
}

static cr_status uq_add(cr_arena *arena, cr_array *dest, void *env)
{
    uq_thunk *t = env;
    if (cr__dest_ok(dest, CR_DT_F64, t->e->x)) {
        uq_scatter(t, dest);
        return CR_OK;
    }
    cr_tangent v;
    cr_status st = uq_thunk_fn(arena, &v, env);
    return st != CR_OK ? st : cr__add_into(arena, dest, v);
}

/* x̄[first[k]] += ȳ[k]: each output's cotangent goes to the first occurrence of its value
 * only (the derivative of "the value at the first index holding it"). */
static cr_status uq_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    (void)nx;
    uq_env *e = env;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_zero();
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "unique_pullback", *dy, 1, &e->m, CR_DT_F64, &g);
    if (st != CR_OK || g == NULL)
        return st;
    uq_thunk *t = cr_arena_alloc(arena, sizeof *t, _Alignof(uq_thunk));
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    t->e = e;
    t->g = g;
    return cr__thunk(arena, uq_thunk_fn, uq_add, t, "unique_pullback_thunk", &dx[1]);
}

static cr_status unique_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    (void)f;
    uq_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(uq_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_status st = uq_forward(arena, args, nargs, e, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    st = cr_project_new(arena, &args[0], &e->px);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){uq_pullback, e, "unique_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(unique, "unique", 1)

/* frule: ẏ[k] = ẋ[first[k]]. */
static cr_status unique_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)udata;
    uq_env e;
    memset(&e, 0, sizeof e);
    cr_status st = uq_forward(arena, args, nargs, &e, y);
    const cr_array *dx = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, "unique", dargs, args, 0, CR_DT_F64, &dx);
    if (st != CR_OK || dx == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *o, *oc;
    st = cr__new(arena, CR_DT_F64, 1, &e.m, false, &o);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < e.m; k++)
        ((double *)o->data)[k] = ((const double *)dx->data)[e.first[k]];
    st = cr__cast(arena, o, (cr_dtype)e.x->dtype, &oc);
    if (st == CR_OK)
        *dy = cr_tangent_array(oc);
    return st;
}

/* ---- opnorm -------------------------------------------------------------------------------- */

typedef struct opn_env {
    const cr_array *A;
    const cr_array *Aw; /* dense work copy (p = 1, Inf) */
    cr_project *pA;
    int p;       /* 1, 2, or 0 for Inf */
    size_t star; /* the maximal column (p = 1) or row (Inf); SIZE_MAX when A is empty */
    double y;
    cr_pullback sv; /* svdvals' pullback (p = 2) */
    size_t k;       /* number of singular values */
    cr_dtype sdt;   /* their dtype */
    cr_dtype odt;   /* the output's dtype (f32 or f64) */
    size_t nargs;
} opn_env;

static cr_status opn_parse(cr_arena *arena, const cr_value *args, size_t nargs, opn_env *e)
{
    const cr_array *A;
    cr_status st = cr__nargs(arena, "opnorm", nargs, 1, 2);
    if (st == CR_OK)
        st = cr__array_arg(arena, "opnorm", args, nargs, 0, &A);
    if (st != CR_OK)
        return st;
    if (A->ndim != 2 || !cr_dtype_is_float((cr_dtype)A->dtype))
        return CR__FAIL(arena, CR_ESHAPE, "opnorm: expected an f64, f32 or c128 matrix");
    e->A = A;
    e->nargs = nargs;
    e->odt = A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    e->p = 2;
    if (nargs == 2) {
        cr_kind k = args[1].kind;
        if (k != CR_KIND_F64 && k != CR_KIND_F32 && k != CR_KIND_I64 && k != CR_KIND_I32)
            return CR__FAIL(arena, CR_EINVAL, "opnorm: p must be a real number (1, 2 or Inf)");
        double p = creal(cr__scalar_of(&args[1]));
        if (p == 1 || p == 2)
            e->p = (int)p;
        else if (isinf(p) && p > 0)
            e->p = 0;
        else
            return CR__FAIL(arena, CR_EINVAL, "opnorm: p must be 1, 2 or Inf (got %g)", p);
    }
    return CR_OK;
}

/* sign(a) = a/|a|, 0 at 0: ∂|a|/∂a in the conj convention. */
static cr_complex sgn(cr_complex a)
{
    double m = cabs(a);
    return m == 0 ? 0 : a / m;
}

/* p = 1: the largest column sum of |a_ij|; p = Inf: the largest row sum. Ties go to the
 * first (lowest-index) column or row; a NaN sum counts as the largest. */
static cr_status opn_abs_sums(cr_arena *arena, opn_env *e)
{
    cr_status st = cr__dense(arena, e->A, cr__work((cr_dtype)e->A->dtype), &e->Aw);
    if (st != CR_OK)
        return st;
    size_t r = e->A->shape[0], c = e->A->shape[1];
    size_t outer = e->p == 1 ? c : r, inner = e->p == 1 ? r : c;
    e->star = SIZE_MAX;
    e->y = 0;
    if (r == 0 || c == 0)
        return CR_OK;
    for (size_t j = 0; j < outer; j++) {
        double s = 0;
        for (size_t i = 0; i < inner; i++) {
            size_t off = e->p == 1 ? i * c + j : j * c + i;
            s += cabs(cr__load(e->Aw, (ptrdiff_t)off));
        }
        if (e->star == SIZE_MAX || s > e->y || (isnan(s) && !isnan(e->y))) {
            e->y = s;
            e->star = j;
        }
    }
    return CR_OK;
}

/* Offset of element i of the selected column / row. */
static size_t opn_off(const opn_env *e, size_t i)
{
    size_t c = e->A->shape[1];
    return e->p == 1 ? i * c + e->star : e->star * c + i;
}

static size_t opn_len(const opn_env *e)
{
    return e->p == 1 ? e->A->shape[0] : e->A->shape[1];
}

static cr_status opn_forward(cr_arena *arena, const cr_value *args, size_t nargs, bool pullback,
                             opn_env *e, cr_value *y)
{
    cr_status st = opn_parse(arena, args, nargs, e);
    if (st != CR_OK)
        return st;
    if (e->p != 2) {
        st = opn_abs_sums(arena, e);
        if (st == CR_OK)
            *y = cr__scalar_value(e->odt, e->y);
        return st;
    }
    /* p = 2: the largest singular value, through svdvals' rules. */
    cr_value s;
    st = pullback ? cr_rrule(NULL, arena, &cr_fn_svdvals, &args[0], 1, &s, &e->sv)
                  : cr_function_call(arena, &cr_fn_svdvals, &args[0], 1, &s);
    if (st == CR_NOTHING)
        return CR__FAIL(arena, CR_EUNIMPL, "opnorm: p = 2 needs svdvals (built without LAPACKE)");
    if (st != CR_OK)
        return st;
    e->k = cr_array_numel(s.u.arr);
    e->sdt = (cr_dtype)s.u.arr->dtype;
    e->y = e->k > 0 ? creal(cr_array_get_linear(s.u.arr, 0)) : 0.0;
    *y = cr__scalar_value(e->odt, e->y);
    return CR_OK;
}

typedef struct opn_thunk {
    const opn_env *e;
    double g;
} opn_thunk;

static void opn_scatter(const opn_thunk *t, cr_array *dest)
{
    const opn_env *e = t->e;
    for (size_t i = 0; i < opn_len(e); i++) {
        size_t off = opn_off(e, i);
        cr_complex v = sgn(cr__load(e->Aw, (ptrdiff_t)off)) * t->g;
        cr__store(dest, (ptrdiff_t)off, cr__load(dest, (ptrdiff_t)off) + v);
    }
}

static cr_status opn_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    opn_thunk *t = env;
    cr_array *dx;
    cr_status st = cr__new_like(arena, (cr_dtype)t->e->Aw->dtype, t->e->A, true, &dx);
    if (st != CR_OK)
        return st;
    opn_scatter(t, dx);
    return cr__give(arena, t->e->pA, dx, out);
}

static cr_status opn_add(cr_arena *arena, cr_array *dest, void *env)
{
    opn_thunk *t = env;
    if (cr__dest_ok(dest, (cr_dtype)t->e->Aw->dtype, t->e->A)) {
        opn_scatter(t, dest);
        return CR_OK;
    }
    cr_tangent v;
    cr_status st = opn_thunk_fn(arena, &v, env);
    return st != CR_OK ? st : cr__add_into(arena, dest, v);
}

/* p = 1, Inf: Ā = sign(A) ȳ on the maximal column / row, 0 elsewhere (an InplaceableThunk
 * that adds one column or row). p = 2: svdvals' pullback with s̄ = (ȳ, 0, ..., 0), which is
 * u₁ v₁ᴴ ȳ for the top singular pair LAPACK returned. */
static cr_status opn_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    opn_env *e = env;
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    dx[1] = cr_tangent_zero();
    cr_complex g;
    bool nz;
    cr_status st = cr__tan_scalar(arena, "opnorm_pullback", *dy, &g, &nz);
    if (st != CR_OK || !nz)
        return st;
    if (e->p == 2) {
        if (e->k == 0)
            return CR_OK;
        cr_array *S;
        st = cr__new(arena, e->sdt, 1, &e->k, true, &S);
        if (st != CR_OK)
            return st;
        cr__store(S, 0, creal(g));
        cr_tangent seed = cr_tangent_array(S), d[2];
        st = cr_pullback_call(arena, &e->sv, &seed, d, 2);
        if (st == CR_OK)
            dx[1] = d[1];
        return st;
    }
    if (e->star == SIZE_MAX)
        return CR_OK;
    opn_thunk *t = cr_arena_alloc(arena, sizeof *t, _Alignof(opn_thunk));
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    t->e = e;
    t->g = creal(g);
    return cr__thunk(arena, opn_thunk_fn, opn_add, t, "opnorm_pullback_thunk", &dx[1]);
}

static cr_status opnorm_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    (void)f;
    opn_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(opn_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    bool primal = udata == CR__PRIMAL_ONLY;
    cr_status st = opn_forward(arena, args, nargs, !primal, e, y);
    if (st != CR_OK || primal)
        return st;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){opn_pullback, e, "opnorm_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(opnorm, "opnorm", -1)

/* frule: p = 1, Inf: ẏ = Σ re(conj(sign a) ȧ) over the maximal column / row; p = 2: the
 * first component of svdvals' frule, re(u₁ᴴ Ȧ v₁). p itself has no tangent. */
static cr_status opnorm_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)udata;
    opn_env e;
    memset(&e, 0, sizeof e);
    cr_status st = opn_parse(arena, args, nargs, &e);
    if (st != CR_OK)
        return st;
    *dy = cr_tangent_zero();
    if (e.p == 2) {
        cr_tangent d2[2] = {cr_tangent_none(), dargs[1]}, ds;
        cr_value s;
        st = cr_frule(NULL, arena, d2, &cr_fn_svdvals, &args[0], 1, &s, &ds);
        if (st == CR_NOTHING)
            return CR__FAIL(arena, CR_EUNIMPL,
                            "opnorm: p = 2 needs svdvals (built without LAPACKE)");
        if (st != CR_OK)
            return st;
        size_t k = cr_array_numel(s.u.arr);
        *y = cr__scalar_value(e.odt, k > 0 ? creal(cr_array_get_linear(s.u.arr, 0)) : 0.0);
        const cr_array *dsa;
        st = cr__tan_array(arena, "opnorm", ds, 1, &k, CR_DT_F64, &dsa);
        if (st == CR_OK && dsa != NULL && k > 0)
            *dy = cr__scalar_tangent(e.odt, ((const double *)dsa->data)[0]);
        return st;
    }
    st = opn_abs_sums(arena, &e);
    if (st != CR_OK)
        return st;
    *y = cr__scalar_value(e.odt, e.y);
    const cr_array *dA;
    st = cr__dx_array(arena, "opnorm", dargs, args, 0, (cr_dtype)e.Aw->dtype, &dA);
    if (st != CR_OK || dA == NULL || e.star == SIZE_MAX)
        return st;
    double s = 0;
    for (size_t i = 0; i < opn_len(&e); i++) {
        size_t off = opn_off(&e, i);
        s += creal(conj(sgn(cr__load(e.Aw, (ptrdiff_t)off))) * cr__load(dA, (ptrdiff_t)off));
    }
    *dy = cr__scalar_tangent(e.odt, s);
    return CR_OK;
}

/* ---- normalize ----------------------------------------------------------------------------- */

typedef struct nz_env {
    const cr_array *A;
    cr_project *pA;
    cr_array *Y; /* A / n, work dtype */
    double n;
    cr_pullback npb; /* norm's pullback */
    size_t nargs;
} nz_env;

/* y = A / n with n = norm(A, p) from norm's rules. A zero (or NaN) norm is CR_EDOMAIN:
 * the direction of a zero array is undefined (Julia returns NaNs). */
static cr_status nz_forward(cr_arena *arena, const cr_value *args, size_t nargs, double n,
                            nz_env *e, cr_value *y)
{
    if (!(n > 0))
        return CR__FAIL(arena, CR_EDOMAIN, "normalize: the norm of the array is %g", n);
    e->A = args[0].u.arr;
    e->n = n;
    e->nargs = nargs;
    const cr_array *Aw;
    cr_dtype wdt = cr__work((cr_dtype)e->A->dtype);
    cr_status st = cr__dense(arena, e->A, wdt, &Aw);
    if (st == CR_OK)
        st = cr__new_like(arena, wdt, e->A, false, &e->Y);
    if (st != CR_OK)
        return st;
    size_t m = cr_array_numel(e->A);
    for (size_t i = 0; i < m; i++)
        cr__store(e->Y, (ptrdiff_t)i, cr__load(Aw, (ptrdiff_t)i) / n);
    cr_array *o;
    st = cr__cast(arena, e->Y, (cr_dtype)e->A->dtype, &o);
    if (st != CR_OK)
        return st;
    if (o == e->Y) { /* the output is not the pullback's copy */
        st = cr_array_copy(arena, e->Y, &o);
        if (st != CR_OK)
            return st;
    }
    *y = cr_value_array(o);
    return CR_OK;
}

static cr_status nz_check(cr_arena *arena, const cr_value *args, size_t nargs)
{
    const cr_array *A;
    cr_status st = cr__nargs(arena, "normalize", nargs, 1, 2);
    if (st == CR_OK)
        st = cr__array_arg(arena, "normalize", args, nargs, 0, &A);
    if (st == CR_OK && !cr_dtype_is_float((cr_dtype)A->dtype))
        return CR__FAIL(arena, CR_EINVAL, "normalize: expected an f64, f32 or c128 array");
    return st;
}

/* Ā = Ȳ / n + norm's pullback at n̄ = -re⟨y, Ȳ⟩ / n (which also gives p̄ for a float p). */
static cr_status nz_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    (void)nx;
    nz_env *e = env;
    const cr_array *g;
    cr_dtype wdt = (cr_dtype)e->Y->dtype;
    size_t m = cr_array_numel(e->A);
    cr_status st =
        cr__tan_array(arena, "normalize_pullback", *dy, e->A->ndim, e->A->shape, wdt, &g);
    if (st != CR_OK)
        return st;
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_zero();
    if (e->nargs == 2)
        dx[2] = cr_tangent_zero();
    if (g == NULL)
        return CR_OK;
    double nbar = -creal(dotc(e->Y, g, m)) / e->n;
    cr_tangent seed = cr_tangent_f64(nbar), d[3];
    st = cr_pullback_call(arena, &e->npb, &seed, d, e->nargs + 1);
    cr_array *raw;
    if (st == CR_OK)
        st = cr__new_like(arena, wdt, e->A, false, &raw);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < m; i++)
        cr__store(raw, (ptrdiff_t)i, cr__load(g, (ptrdiff_t)i) / e->n);
    st = cr__add_into(arena, raw, d[1]);
    if (st == CR_OK)
        st = cr__give(arena, e->pA, raw, &dx[1]);
    if (st == CR_OK && e->nargs == 2)
        dx[2] = d[2];
    return st;
}

static cr_status normalize_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                 const void *udata)
{
    (void)cfg;
    (void)f;
    nz_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(nz_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    bool primal = udata == CR__PRIMAL_ONLY;
    cr_value nv;
    cr_status st = nz_check(arena, args, nargs);
    if (st == CR_OK)
        st = primal ? cr_function_call(arena, &cr_fn_norm, args, nargs, &nv)
                    : cr_rrule(NULL, arena, &cr_fn_norm, args, nargs, &nv, &e->npb);
    if (st == CR_OK)
        st = nz_forward(arena, args, nargs, creal(cr__scalar_of(&nv)), e, y);
    if (st != CR_OK || primal)
        return st;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){nz_pullback, e, "normalize_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(normalize, "normalize", -1)

/* frule: ẏ = (Ȧ - y ṅ) / n with ṅ from norm's frule (which includes ṗ for a float p). */
static cr_status normalize_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                 const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                                 cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)udata;
    nz_env e;
    memset(&e, 0, sizeof e);
    cr_value nv;
    cr_tangent dn = cr_tangent_zero();
    cr_status st = nz_check(arena, args, nargs);
    if (st == CR_OK)
        st = cr_frule(NULL, arena, dargs, &cr_fn_norm, args, nargs, &nv, &dn);
    if (st == CR_OK)
        st = nz_forward(arena, args, nargs, creal(cr__scalar_of(&nv)), &e, y);
    cr_dtype wdt = cr__work((cr_dtype)args[0].u.arr->dtype);
    const cr_array *dA = NULL;
    cr_complex ndot = 0;
    bool nzn = false;
    if (st == CR_OK)
        st = cr__dx_array(arena, "normalize", dargs, args, 0, wdt, &dA);
    if (st == CR_OK)
        st = cr__tan_scalar(arena, "normalize", dn, &ndot, &nzn);
    if (st != CR_OK)
        return st;
    if (dA == NULL && !nzn) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    size_t m = cr_array_numel(e.A);
    cr_array *o, *oc;
    st = cr__new_like(arena, wdt, e.A, false, &o);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < m; i++) {
        cr_complex a = dA != NULL ? cr__load(dA, (ptrdiff_t)i) : 0;
        cr__store(o, (ptrdiff_t)i, (a - cr__load(e.Y, (ptrdiff_t)i) * creal(ndot)) / e.n);
    }
    st = cr__cast(arena, o, (cr_dtype)e.A->dtype, &oc);
    if (st == CR_OK)
        *dy = cr_tangent_array(oc);
    return st;
}

/* ---- UniformScaling: A ± λI, λA, A / λ, λ A⁻¹ ----------------------------------------------- */

typedef enum { U_ADD, U_SUB, U_MUL, U_LDIV, U_RDIV } u_op;
static const char *const k_u_names[5] = {"add_uniform", "sub_uniform", "mul_uniform",
                                         "ldiv_uniform", "rdiv_uniform"};
static const char *const k_u_pb_names[5] = {"add_uniform_pullback", "sub_uniform_pullback",
                                            "mul_uniform_pullback", "ldiv_uniform_pullback",
                                            "rdiv_uniform_pullback"};

/* What the operation computes, given which argument is λ. */
typedef enum {
    UK_SHIFT, /* sa A + sl λ I */
    UK_SCALE, /* λ A */
    UK_DIV,   /* A / λ */
    UK_INV    /* λ A⁻¹ */
} u_kind;

typedef struct u_env {
    u_op op;
    u_kind kind;
    size_t ia, il; /* argument positions of A and λ */
    double sa, sl;
    const cr_array *A;
    const cr_array *Aw; /* dense work copy of A (of A⁻¹ for UK_INV) */
    cr_array *Y;        /* the output, work dtype */
    cr_complex lam;
    cr_dtype odt, wdt;
    cr_project *pA, *pl, *pZ;
    cr_pullback inv_pb; /* matinv's pullback (UK_INV) */
} u_env;

static cr_status u_parse(cr_arena *arena, u_op op, const cr_value *args, size_t nargs, u_env *e)
{
    const char *who = k_u_names[op];
    cr_status st = cr__nargs(arena, who, nargs, 2, 2);
    if (st != CR_OK)
        return st;
    e->op = op;
    e->ia = args[0].kind == CR_KIND_ARRAY ? 0 : 1;
    e->il = 1 - e->ia;
    cr_kind lk = args[e->il].kind;
    if (args[e->ia].kind != CR_KIND_ARRAY ||
        (lk != CR_KIND_F64 && lk != CR_KIND_F32 && lk != CR_KIND_C128 && lk != CR_KIND_I64 &&
         lk != CR_KIND_I32 && lk != CR_KIND_BOOL))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an array and a number (λ of λI)", who);
    e->A = args[e->ia].u.arr;
    if (!cr_dtype_is_float((cr_dtype)e->A->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an f64, f32 or c128 array", who);
    e->lam = cr__scalar_of(&args[e->il]);
    cr_dtype ld = cr__value_dtype(&args[e->il]);
    e->odt = cr__promote((cr_dtype)e->A->dtype, ld);
    e->wdt = cr__work(e->odt);
    if (e->wdt != CR_DT_C128)
        e->lam = creal(e->lam);
    bool lam_first = e->il == 0;
    e->sa = 1;
    e->sl = 1;
    switch (op) {
    case U_ADD:
        e->kind = UK_SHIFT;
        break;
    case U_SUB:
        e->kind = UK_SHIFT;
        if (lam_first)
            e->sa = -1;
        else
            e->sl = -1;
        break;
    case U_MUL:
        e->kind = UK_SCALE;
        break;
    case U_LDIV: /* (λI) \ A = A / λ;  A \ (λI) = λ A⁻¹ */
        e->kind = lam_first ? UK_DIV : UK_INV;
        break;
    case U_RDIV: /* A / (λI) = A / λ;  (λI) / A = λ A⁻¹ */
        e->kind = lam_first ? UK_INV : UK_DIV;
        break;
    }
    bool square = e->A->ndim == 2 && e->A->shape[0] == e->A->shape[1];
    if ((e->kind == UK_SHIFT || e->kind == UK_INV) && !square) {
        char buf[96];
        return CR__FAIL(arena, CR_ESHAPE, "%s: λI needs a square matrix, got shape %s", who,
                        cr__shape_str(e->A, buf, sizeof buf));
    }
    if (e->kind == UK_DIV && e->lam == 0)
        return CR__FAIL(arena, CR_EDOMAIN, "%s: division by λ = 0", who);
    return CR_OK;
}

/* The output Y (work dtype) and its value of dtype odt. For UK_INV, A⁻¹ comes from matinv's
 * rrule (with its pullback when `pullback`) or its frule (tangent in *dZ when dZ != NULL). */
static cr_status u_forward(cr_arena *arena, const cr_value *args, bool pullback,
                           const cr_tangent *dargs, cr_tangent *dZ, u_env *e, cr_value *y)
{
    const char *who = k_u_names[e->op];
    cr_status st;
    if (e->kind == UK_INV) {
        cr_value Z;
        if (dZ != NULL) {
            cr_tangent d2[2] = {cr_tangent_none(), dargs[e->ia + 1]};
            st = cr_frule(NULL, arena, d2, &cr_fn_matinv, &args[e->ia], 1, &Z, dZ);
        } else if (pullback) {
            st = cr_rrule(NULL, arena, &cr_fn_matinv, &args[e->ia], 1, &Z, &e->inv_pb);
        } else {
            st = cr_function_call(arena, &cr_fn_matinv, &args[e->ia], 1, &Z);
        }
        if (st == CR_NOTHING)
            return CR__FAIL(arena, CR_EUNIMPL, "%s: λ A⁻¹ needs matinv (built without LAPACKE)",
                            who);
        if (st == CR_OK && pullback)
            st = cr_project_new(arena, &Z, &e->pZ);
        if (st == CR_OK)
            st = cr__dense(arena, Z.u.arr, e->wdt, &e->Aw);
    } else {
        st = cr__dense(arena, e->A, e->wdt, &e->Aw);
    }
    if (st == CR_OK)
        st = cr__new_like(arena, e->wdt, e->Aw, false, &e->Y);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(e->Aw);
    for (size_t i = 0; i < n; i++) {
        cr_complex a = cr__load(e->Aw, (ptrdiff_t)i);
        cr_complex v = e->kind == UK_SHIFT ? e->sa * a
                       : e->kind == UK_DIV ? a / e->lam
                                           : e->lam * a;
        cr__store(e->Y, (ptrdiff_t)i, v);
    }
    if (e->kind == UK_SHIFT) {
        size_t m = e->A->shape[0];
        for (size_t i = 0; i < m; i++)
            cr__store(e->Y, (ptrdiff_t)(i * m + i),
                      cr__load(e->Y, (ptrdiff_t)(i * m + i)) + e->sl * e->lam);
    }
    cr_array *o;
    st = cr__cast(arena, e->Y, e->odt, &o);
    if (st == CR_OK && o == e->Y)
        st = cr_array_copy(arena, e->Y, &o); /* the pullback keeps Y */
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

typedef struct u_thunk {
    const u_env *e;
    const cr_array *g; /* Ȳ, work dtype, contiguous */
    cr_complex s;      /* Ā = s Ȳ (UK_SCALE, UK_DIV) */
} u_thunk;

static cr_status u_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    u_thunk *t = env;
    const u_env *e = t->e;
    cr_array *r;
    cr_status st = cr__new_like(arena, e->wdt, t->g, false, &r);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(t->g);
    for (size_t i = 0; i < n; i++)
        cr__store(r, (ptrdiff_t)i, t->s * cr__load(t->g, (ptrdiff_t)i));
    if (e->kind != UK_INV)
        return cr__give(arena, e->pA, r, out);
    /* Z̄ = conj(λ) Ȳ projected onto A⁻¹, then matinv's pullback. */
    cr_tangent zb, d[2];
    st = cr_project_apply(arena, e->pZ, cr_tangent_array(r), &zb);
    if (st == CR_OK)
        st = cr_pullback_call(arena, &e->inv_pb, &zb, d, 2);
    if (st == CR_OK)
        *out = d[1];
    return st;
}

static cr_status u_add(cr_arena *arena, cr_array *dest, void *env)
{
    u_thunk *t = env;
    if (cr__dest_ok(dest, t->e->wdt, t->e->A)) {
        cr__axpy(t->s, t->g, dest);
        return CR_OK;
    }
    cr_tangent v;
    cr_status st = u_thunk_fn(arena, &v, env);
    return st != CR_OK ? st : cr__add_into(arena, dest, v);
}

/* Cotangents (conj convention; λ̄ projected onto λ, Ā onto A):
 *   sa A + sl λI:  Ā = sa Ȳ (Ȳ itself for sa = 1),  λ̄ = sl tr Ȳ;
 *   λ A:           Ā = conj(λ) Ȳ,                   λ̄ = Σ conj(A) Ȳ;
 *   A / λ:         Ā = Ȳ / conj(λ),                 λ̄ = -Σ conj(Y / λ) Ȳ;
 *   λ A⁻¹ = λ Z:   Ā = matinv's pullback at conj(λ) Ȳ,  λ̄ = Σ conj(Z) Ȳ.
 * The array cotangent is an InplaceableThunk (add! is an axpy) except for the shift. */
static cr_status u_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                            void *env)
{
    (void)nx;
    u_env *e = env;
    const char *who = k_u_pb_names[e->op];
    dx[0] = cr_tangent_none();
    dx[1] = cr_tangent_zero();
    dx[2] = cr_tangent_zero();
    const cr_array *g;
    cr_status st = cr__tan_array(arena, who, *dy, e->Y->ndim, e->Y->shape, e->wdt, &g);
    if (st != CR_OK || g == NULL)
        return st;
    size_t n = cr_array_numel(e->Y);
    cr_complex lb;
    if (e->kind == UK_SHIFT) {
        size_t m = e->A->shape[0];
        lb = 0;
        for (size_t i = 0; i < m; i++)
            lb += cr__load(g, (ptrdiff_t)(i * m + i));
        lb *= e->sl;
    } else if (e->kind == UK_DIV) {
        lb = -dotc(e->Y, g, n) / conj(e->lam);
    } else {
        lb = dotc(e->Aw, g, n);
    }
    st = cr_project_apply(arena, e->pl, work_scalar(e->wdt, lb), &dx[1 + e->il]);
    if (st != CR_OK)
        return st;
    cr_tangent *da = &dx[1 + e->ia];
    if (e->kind == UK_SHIFT) {
        if (e->sa > 0)
            return cr__give_alias(arena, e->pA, (cr_array *)g, da);
        cr_array *r;
        st = cr__new_like(arena, e->wdt, g, false, &r);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < n; i++)
            cr__store(r, (ptrdiff_t)i, -cr__load(g, (ptrdiff_t)i));
        return cr__give(arena, e->pA, r, da);
    }
    u_thunk *t = cr_arena_alloc(arena, sizeof *t, _Alignof(u_thunk));
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    t->e = e;
    t->g = g;
    t->s = e->kind == UK_DIV ? 1 / conj(e->lam) : conj(e->lam);
    return cr__thunk(arena, u_thunk_fn, e->kind == UK_INV ? NULL : u_add, t,
                     "uniform_pullback_thunk", da);
}

static cr_status u_rrule(cr_arena *arena, u_op op, const cr_value *args, size_t nargs, cr_value *y,
                         cr_pullback *pb, const void *udata)
{
    u_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(u_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    bool primal = udata == CR__PRIMAL_ONLY;
    cr_status st = u_parse(arena, op, args, nargs, e);
    if (st == CR_OK)
        st = u_forward(arena, args, !primal, NULL, NULL, e, y);
    if (st != CR_OK || primal)
        return st;
    st = cr_project_new(arena, &args[e->ia], &e->pA);
    if (st == CR_OK)
        st = cr_project_new(arena, &args[e->il], &e->pl);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){u_pullback, e, k_u_pb_names[op], nargs + 1};
    return CR_OK;
}

/* frule: Ẏ = sa Ȧ + sl λ̇ I;  λ̇ A + λ Ȧ;  Ȧ / λ - λ̇ Y / λ;  λ̇ Z + λ Ż. */
static cr_status u_frule(cr_arena *arena, u_op op, const cr_tangent *dargs, const cr_value *args,
                         size_t nargs, cr_value *y, cr_tangent *dy)
{
    u_env e;
    memset(&e, 0, sizeof e);
    cr_tangent dZ = cr_tangent_zero();
    cr_status st = u_parse(arena, op, args, nargs, &e);
    if (st == CR_OK)
        st = u_forward(arena, args, false, dargs, e.kind == UK_INV ? &dZ : NULL, &e, y);
    const cr_array *dA = NULL;
    cr_complex dl = 0;
    bool nzl = false;
    if (st == CR_OK) {
        if (e.kind == UK_INV)
            st = cr__tan_array(arena, k_u_names[op], dZ, e.Y->ndim, e.Y->shape, e.wdt, &dA);
        else
            st = cr__dx_array(arena, k_u_names[op], dargs, args, e.ia, e.wdt, &dA);
    }
    if (st == CR_OK && cr__is_diff(&args[e.il]))
        st = cr__tan_scalar(arena, k_u_names[op], dargs[e.il + 1], &dl, &nzl);
    if (st != CR_OK)
        return st;
    if (e.wdt != CR_DT_C128)
        dl = creal(dl);
    if (dA == NULL && !nzl) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    size_t n = cr_array_numel(e.Y);
    cr_array *o, *oc;
    st = cr__new_like(arena, e.wdt, e.Y, true, &o);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        cr_complex a = dA != NULL ? cr__load(dA, (ptrdiff_t)i) : 0, v;
        switch (e.kind) {
        case UK_SHIFT:
            v = e.sa * a;
            break;
        case UK_DIV:
            v = (a - dl * cr__load(e.Y, (ptrdiff_t)i)) / e.lam;
            break;
        default: /* λ̇ A + λ Ȧ, A = Z for UK_INV */
            v = dl * cr__load(e.Aw, (ptrdiff_t)i) + e.lam * a;
            break;
        }
        cr__store(o, (ptrdiff_t)i, v);
    }
    if (e.kind == UK_SHIFT) {
        size_t m = e.A->shape[0];
        for (size_t i = 0; i < m; i++)
            cr__store(o, (ptrdiff_t)(i * m + i), cr__load(o, (ptrdiff_t)(i * m + i)) + e.sl * dl);
    }
    st = cr__cast(arena, o, e.odt, &oc);
    if (st == CR_OK)
        *dy = cr_tangent_array(oc);
    return st;
}

#define U_RULES(NAME, OP) CR__PARAM_RULES(NAME, u_rrule, u_frule, OP, 2)

U_RULES(add_uniform, U_ADD)
U_RULES(sub_uniform, U_SUB)
U_RULES(mul_uniform, U_MUL)
U_RULES(ldiv_uniform, U_LDIV)
U_RULES(rdiv_uniform, U_RDIV)

/* ---- Test registrations -------------------------------------------------------------------- */

/* Slices: a vector, a matrix or a 3-d array (sometimes transposed or Upper triangular). */
static cr_status sample_slices(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                               void *env)
{
    const sl_kind *k = env;
    static const size_t shapes[3][3] = {{4, 0, 0}, {3, 4, 0}, {2, 3, 2}};
    size_t which = *k == SL_SLICE ? cr__rng_below(rng, 3) : cr__rng_below(rng, 2);
    size_t nd = which + 1;
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), nd, shapes[which], -2, 2, &A);
    if (st != CR_OK)
        return st;
    if (nd == 2 && cr__rng_below(rng, 3) == 0) {
        /* A transposed view (strides swapped). */
        size_t t = A->shape[0];
        A->shape[0] = A->shape[1];
        A->shape[1] = t;
        ptrdiff_t s = A->strides[0];
        A->strides[0] = A->strides[1];
        A->strides[1] = s;
    } else if (nd == 2 && cr__rng_below(rng, 4) == 0) {
        A->shape[1] = A->shape[0]; /* 3 x 3 Upper triangular (row stride 4 kept) */
        A->structure = CR_MAT_UPPER;
    }
    args[0] = cr_value_array(A);
    if (nargs < 2)
        return CR_OK;
    if (cr__rng_below(rng, 2) == 0 || nd == 1) {
        args[1] = cr_value_i64((int64_t)cr__rng_below(rng, nd));
        return CR_OK;
    }
    int64_t dims[2] = {(int64_t)nd - 1, 0};
    cr_array *D;
    st = cr__i64_array(arena, 2, dims, &D);
    if (st == CR_OK)
        args[1] = cr_value_array(D);
    return st;
}

/* unique: distinct values (a shuffled grid with jitter), so finite differences never
 * create or break a tie. */
static cr_status sample_unique(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                               void *env)
{
    (void)nargs;
    (void)env;
    size_t n = 2 + cr__rng_below(rng, 6);
    cr_dtype dt = cr__rng_below(rng, 4) == 0 ? CR_DT_F32 : CR_DT_F64;
    cr_array *x;
    cr_status st = cr__new(arena, dt, 1, &n, false, &x);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        size_t j = cr__rng_below(rng, i + 1);
        double v = ((double)i - (double)n / 2) / 4 + cr__rng_unif(rng, 0, 0.125);
        if (j != i)
            cr__store(x, (ptrdiff_t)i, cr__load(x, (ptrdiff_t)j));
        cr__store(x, (ptrdiff_t)j, v);
    }
    args[0] = cr_value_array(x);
    return CR_OK;
}

/* opnorm: matrices whose column (row) abs-sums are well separated and entries away from
 * zero, so that neither the maximal column nor a sign changes under finite differences;
 * for p = 2, random matrices (their top singular value is simple almost surely). */
static cr_status sample_opnorm(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                               void *env)
{
    (void)env;
    size_t shape[2] = {1 + cr__rng_below(rng, 4), 1 + cr__rng_below(rng, 4)};
    cr_dtype dt = cr__rng_dtype(rng);
#if defined(CR_HAVE_LAPACKE)
    int p = nargs < 2 ? 2 : (int)cr__rng_below(rng, 3); /* 0 (Inf), 1, 2 */
#else
    int p = (int)cr__rng_below(rng, 2); /* 0 (Inf), 1 */
#endif
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, dt, 2, shape, 0.5, 1.5, &A);
    if (st != CR_OK)
        return st;
    size_t r = shape[0], c = shape[1];
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++) {
            ptrdiff_t off = (ptrdiff_t)(i * c + j);
            cr_complex a = cr__load(A, off);
            /* Column j (p = 1) or row i (Inf) scaled by its index: sums well apart. */
            double scale = 1 + (double)(p == 1 ? j : i);
            if (cr__rng_below(rng, 2))
                a = -a;
            cr__store(A, off, a * scale);
        }
    args[0] = cr_value_array(A);
    if (nargs < 2)
        return CR_OK;
    args[1] = p == 0 ? cr_value_f64((double)INFINITY) : cr_value_i64(p);
    return CR_OK;
}

/* normalize: a random array and p among 1, 2, 3 (integers) and 1.5, 2.5 (perturbed). */
static cr_status sample_normalize(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                                  void *env)
{
    (void)env;
    static const size_t shapes[2][2] = {{5, 0}, {2, 3}};
    size_t k = cr__rng_below(rng, 2);
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), k + 1, shapes[k], 0.25, 2, &A);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(A);
    for (size_t i = 0; i < n; i++)
        if (cr__rng_below(rng, 2))
            cr__store(A, (ptrdiff_t)i, -cr__load(A, (ptrdiff_t)i));
    args[0] = cr_value_array(A);
    if (nargs < 2)
        return CR_OK;
    static const double ps[5] = {1, 2, 3, 1.5, 2.5};
    size_t j = cr__rng_below(rng, 5);
    args[1] = j < 3 ? cr_value_i64((int64_t)ps[j]) : cr_value_f64(ps[j]);
    return CR_OK;
}

/* UniformScaling operations: A square (shift, inverse: diagonally dominant) or of any shape
 * (scale, divide); λ an f64 (mostly), f32, c128 or integer of magnitude 0.5 to 2. */
typedef struct u_sample {
    u_op op;
    bool lam_first;
} u_sample;

static cr_status sample_uniform(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                                void *env)
{
    (void)nargs;
    const u_sample *o = env;
    bool square = o->op == U_ADD || o->op == U_SUB || (o->op == U_LDIV && !o->lam_first) ||
                  (o->op == U_RDIV && o->lam_first);
    bool inv = square && (o->op == U_LDIV || o->op == U_RDIV);
    size_t shape[2], nd = 2;
    if (square) {
        shape[0] = shape[1] = 1 + cr__rng_below(rng, 4);
    } else {
        nd = 1 + cr__rng_below(rng, 2);
        shape[0] = 2 + cr__rng_below(rng, 3);
        shape[1] = 1 + cr__rng_below(rng, 3);
    }
    cr_dtype dt = cr__rng_dtype(rng);
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, dt, nd, shape, -1, 1, &A);
    if (st != CR_OK)
        return st;
    if (inv)
        for (size_t i = 0; i < shape[0]; i++) {
            ptrdiff_t off = (ptrdiff_t)(i * shape[0] + i);
            cr__store(A, off, cr__load(A, off) + 2.0 * (double)shape[0]);
        }
    else if (square && shape[0] > 1 && cr__rng_below(rng, 4) == 0)
        A->structure = cr__rng_below(rng, 2) ? CR_MAT_UPPER : CR_MAT_SYMMETRIC;
    double mag = cr__rng_unif(rng, 0.5, 2.0) * (cr__rng_below(rng, 2) ? 1 : -1);
    cr_value lam;
    switch (cr__rng_below(rng, 6)) {
    case 0:
        lam = cr_value_c128(cr__c(mag, cr__rng_unif(rng, -1, 1)));
        break;
    case 1:
        lam = cr_value_i64(mag > 0 ? 2 : -1);
        break;
    case 2:
        lam = dt == CR_DT_F32 ? cr_value_f32((float)mag) : cr_value_f64(mag);
        break;
    default:
        lam = cr_value_f64(mag);
        break;
    }
    args[o->lam_first ? 1 : 0] = cr_value_array(A);
    args[o->lam_first ? 0 : 1] = lam;
    return CR_OK;
}

static const sl_kind k_sk_row = SL_ROW, k_sk_col = SL_COL, k_sk_slice = SL_SLICE;
static const cr_rule_test k_t_eachrow = {.sample = sample_slices, .env = (void *)&k_sk_row};
static const cr_rule_test k_t_eachcol = {.sample = sample_slices, .env = (void *)&k_sk_col};
static const cr_rule_test k_t_eachslice = {.sample = sample_slices, .env = (void *)&k_sk_slice};
static const cr_rule_test k_t_unique = {.sample = sample_unique};
static const cr_rule_test k_t_opnorm = {.sample = sample_opnorm};
static const cr_rule_test k_t_normalize = {.sample = sample_normalize};

#define U_SAMPLE(NAME, OP, FIRST)                    \
    static const u_sample k_us_##NAME = {OP, FIRST}; \
    static const cr_rule_test k_t_##NAME = {.sample = sample_uniform, .env = (void *)&k_us_##NAME};
U_SAMPLE(add_al, U_ADD, false)
U_SAMPLE(add_la, U_ADD, true)
U_SAMPLE(sub_al, U_SUB, false)
U_SAMPLE(sub_la, U_SUB, true)
U_SAMPLE(mul_al, U_MUL, false)
U_SAMPLE(mul_la, U_MUL, true)
U_SAMPLE(ldiv_al, U_LDIV, false)
U_SAMPLE(ldiv_la, U_LDIV, true)
U_SAMPLE(rdiv_al, U_RDIV, false)
U_SAMPLE(rdiv_la, U_RDIV, true)

cr_status cr__array_register_extra(cr_registry *reg)
{
#define U_NUM (CR_M_F64 | CR_M_F32 | CR_M_C128 | CR_M_INT | CR_M_BOOL)
    static const cr_argspec f1[1] = {{CR__M_FARRAY, NULL}};
    static const cr_argspec fd[2] = {{CR__M_FARRAY, NULL}, {CR_M_INT | CR_M_A_INT, NULL}};
    static const cr_argspec r1[1] = {{CR__M_RARRAY, NULL}};
    static const cr_argspec fp[2] = {{CR__M_FARRAY, NULL}, {CR_M_F64 | CR_M_F32 | CR_M_INT, NULL}};
    static const cr_argspec al[2] = {{CR__M_FARRAY, NULL}, {U_NUM, NULL}};
    static const cr_argspec la[2] = {{U_NUM, NULL}, {CR__M_FARRAY, NULL}};
#undef U_NUM
    static const struct {
        const cr_function *fn;
        const cr_argspec *args;
        size_t n;
        cr_frule_fn frule;
        cr_rrule_fn rrule;
        const cr_rule_test *test;
        bool lapack;              /* needs the LAPACK rules (matinv) */
        uint32_t lin;             /* the cr_linearity class */
        const cr_rule_form *form; /* the second-order form */
    } k[] = {
        {&eachrow_function, f1, 1, eachrow_frule, eachrow_rrule, &k_t_eachrow, false, CR_NONLINEAR,
         NULL},
        {&eachcol_function, f1, 1, eachcol_frule, eachcol_rrule, &k_t_eachcol, false, CR_NONLINEAR,
         NULL},
        {&eachslice_function, fd, 2, eachslice_frule, eachslice_rrule, &k_t_eachslice, false,
         CR_NONLINEAR, NULL},
        {&unique_function, r1, 1, unique_frule, unique_rrule, &k_t_unique, false,
         CR_PIECEWISE_LINEAR, NULL},
        {&opnorm_function, f1, 1, opnorm_frule, opnorm_rrule, &k_t_opnorm, true, CR_NONLINEAR,
         &cr__form_opnorm},
        {&opnorm_function, fp, 2, opnorm_frule, opnorm_rrule, &k_t_opnorm, false, CR_NONLINEAR,
         &cr__form_opnorm},
        {&normalize_function, f1, 1, normalize_frule, normalize_rrule, &k_t_normalize, false,
         CR_NONLINEAR, &cr__form_normalize},
        {&normalize_function, fp, 2, normalize_frule, normalize_rrule, &k_t_normalize, false,
         CR_NONLINEAR, &cr__form_normalize},
        {&add_uniform_function, al, 2, add_uniform_frule, add_uniform_rrule, &k_t_add_al, false,
         CR_LINEAR, NULL},
        {&add_uniform_function, la, 2, add_uniform_frule, add_uniform_rrule, &k_t_add_la, false,
         CR_LINEAR, NULL},
        {&sub_uniform_function, al, 2, sub_uniform_frule, sub_uniform_rrule, &k_t_sub_al, false,
         CR_LINEAR, NULL},
        {&sub_uniform_function, la, 2, sub_uniform_frule, sub_uniform_rrule, &k_t_sub_la, false,
         CR_LINEAR, NULL},
        {&mul_uniform_function, al, 2, mul_uniform_frule, mul_uniform_rrule, &k_t_mul_al, false,
         CR_MULTILINEAR, NULL},
        {&mul_uniform_function, la, 2, mul_uniform_frule, mul_uniform_rrule, &k_t_mul_la, false,
         CR_MULTILINEAR, NULL},
        {&ldiv_uniform_function, la, 2, ldiv_uniform_frule, ldiv_uniform_rrule, &k_t_ldiv_la, false,
         CR_NONLINEAR, NULL},
        {&ldiv_uniform_function, al, 2, ldiv_uniform_frule, ldiv_uniform_rrule, &k_t_ldiv_al, true,
         CR_NONLINEAR, NULL},
        {&rdiv_uniform_function, al, 2, rdiv_uniform_frule, rdiv_uniform_rrule, &k_t_rdiv_al, false,
         CR_NONLINEAR, NULL},
        {&rdiv_uniform_function, la, 2, rdiv_uniform_frule, rdiv_uniform_rrule, &k_t_rdiv_la, true,
         CR_NONLINEAR, NULL},
    };
#if defined(CR_HAVE_LAPACKE)
    const bool have_lapack = true;
#else
    const bool have_lapack = false;
#endif
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        if (k[i].lapack && !have_lapack)
            continue;
        cr_status st = cr__add_rule_so(reg, k[i].fn, k[i].args, k[i].n, false, k[i].frule,
                                       k[i].rrule, k[i].test, k[i].lin, k[i].form);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}
