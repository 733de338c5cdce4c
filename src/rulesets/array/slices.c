/*
 * Slices as tuples of views: eachrow, eachcol and eachslice. Their pullbacks add each
 * slice's cotangent into the argument's.
 */
#include "family.h"

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
    cr_status st = cr__nargs_array(arena, who, args, nargs, want, want, &A);
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

CR__THUNK_ADD(sl_add, sl_thunk, t->e->wdt, t->e->s.A, sl_scatter(t, dest), sl_thunk_fn)

/* Ā = zeros(A) with each slice's cotangent added at its slice; absent and zero fields of
 * the tuple's structural cotangent contribute nothing. */
static cr_status sl_pullback(CR__PULLBACK_PARAMS)
{
    sl_env *e = env;
    const char *who = k_sl_pb_names[e->kind];
    cr__dx_none(dx, nx);
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
    CR__ARENA_ZNEW(arena, sl_env, e);
    cr_status st = sl_parse(arena, k, args, nargs, &e->s);
    if (st == CR_OK)
        st = sl_tuple(arena, &e->s, e->s.src, y);
    if (st == CR_OK) {
        e->kind = k;
        e->wdt = cr__work((cr_dtype)e->s.A->dtype);
    }
    return cr__rrule_end(arena, st, udata, &args[0], &e->pA, sl_pullback, e, k_sl_pb_names[k],
                         nargs + 1, pb);
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

/* ---- Test registrations ---- */

/* Slices: a vector, a matrix or a 3-d array (sometimes transposed or Upper triangular). */
static cr_status sample_slices(CR__SAMPLE_PARAMS)
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

static const sl_kind k_sk_row = SL_ROW, k_sk_col = SL_COL, k_sk_slice = SL_SLICE;
static const cr_rule_test k_t_eachrow = {.sample = sample_slices, .env = (void *)&k_sk_row};
static const cr_rule_test k_t_eachcol = {.sample = sample_slices, .env = (void *)&k_sk_col};
static const cr_rule_test k_t_eachslice = {.sample = sample_slices, .env = (void *)&k_sk_slice};

cr_status cr__array_register_slices(cr_registry *reg)
{
    static const cr_argspec f1[1] = {{CR__M_FARRAY, NULL}};
    static const cr_argspec fd[2] = {{CR__M_FARRAY, NULL}, {CR_M_INT | CR_M_A_INT, NULL}};
    static const cr__array_rule k[] = {
        CR__ROW(eachrow, eachrow_frule, f1, 1, &k_t_eachrow, CR_NONLINEAR, NULL, false),
        CR__ROW(eachcol, eachcol_frule, f1, 1, &k_t_eachcol, CR_NONLINEAR, NULL, false),
        CR__ROW(eachslice, eachslice_frule, fd, 2, &k_t_eachslice, CR_NONLINEAR, NULL, false),
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
