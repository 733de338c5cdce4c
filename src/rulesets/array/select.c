/*
 * Array functions that select, order or repeat elements: filter, sortslices, sort_ex and
 * partialsort_ex (sort with rev and by), unique_ex (unique slices along a dimension),
 * repeat_ex (repeat with inner and outer) and hvcat. Each works out which elements it
 * takes, then calls getindex (or hcat and vcat for hvcat) and its rules: the choice is held
 * fixed and the cotangent scatters back through getindex's pullback, repeated elements
 * accumulating.
 */
#include <chainrules/rules_math.h>

#include "../../core/checked.h"
#include "family.h"

/* ---- Orders ------------------------------------------------------------------------------ */

/* Julia's isless on reals: NaN after everything, NaNs equal. <0, 0, >0. */
static int isless_cmp(double a, double b)
{
    bool na = isnan(a), nb = isnan(b);
    if (na || nb)
        return na && nb ? 0 : na ? 1 : -1;
    return a < b ? -1 : a > b ? 1 : 0;
}

/* Julia's isequal on numbers: NaNs equal, -0.0 and 0.0 not. */
static bool isequal_c(cr_complex a, cr_complex b)
{
    double p[2] = {creal(a), cimag(a)}, q[2] = {creal(b), cimag(b)};
    for (int k = 0; k < 2; k++) {
        if (isnan(p[k]) && isnan(q[k]))
            continue;
        if (!(p[k] == q[k]) || signbit(p[k]) != signbit(q[k]))
            return false;
    }
    return true;
}

/* A comparison of items i and j (<0, 0, >0) with its context. */
typedef int (*cmp_fn)(size_t i, size_t j, const void *ctx);

/* Stable merge sort of the n indices in perm by cmp (rev: the reversed order, ties still in
 * input order). tmp has n entries. */
static void merge_sort(size_t *perm, size_t *tmp, size_t n, cmp_fn cmp, const void *ctx, bool rev)
{
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi) {
                int c = cmp(perm[b], perm[a], ctx);
                if (rev)
                    c = -c;
                tmp[k++] = c < 0 ? perm[b++] : perm[a++];
            }
            while (a < mid)
                tmp[k++] = perm[a++];
            while (b < hi)
                tmp[k++] = perm[b++];
        }
        memcpy(perm, tmp, n * sizeof *perm);
        if (w > n / 2)
            break;
    }
}

static int key_cmp(size_t i, size_t j, const void *ctx)
{
    const double *k = ctx;
    return isless_cmp(k[i], k[j]);
}

/* ---- Slices ------------------------------------------------------------------------------ */

/* The slices of a work array along dimension d: slice i is every element whose index along
 * d is i, in row-major order of the others. */
typedef struct slices {
    const cr_array *A; /* contiguous work array */
    size_t n;          /* slices */
    size_t len;        /* elements per slice */
    size_t inner;      /* row-major stride of dimension d */
} slices;

static cr_complex slice_at(const slices *s, size_t i, size_t k)
{
    /* element k of slice i: outer block k / inner, offset k % inner */
    size_t off = (k / s->inner) * (s->n * s->inner) + i * s->inner + k % s->inner;
    return cr__load(s->A, (ptrdiff_t)off);
}

static int slice_cmp(size_t i, size_t j, const void *ctx)
{
    const slices *s = ctx;
    for (size_t k = 0; k < s->len; k++) {
        int c = isless_cmp(creal(slice_at(s, i, k)), creal(slice_at(s, j, k)));
        if (c != 0)
            return c;
    }
    return 0;
}

static bool slice_equal(const slices *s, size_t i, size_t j)
{
    for (size_t k = 0; k < s->len; k++)
        if (!isequal_c(slice_at(s, i, k), slice_at(s, j, k)))
            return false;
    return true;
}

/* The slices of A along the dimension argument v. */
static cr_status slices_of(cr_arena *arena, const char *who, const cr_array *A, const cr_value *v,
                           size_t *d, slices *s)
{
    int64_t dim;
    cr_status st = cr__int_arg(arena, who, v, &dim);
    if (st != CR_OK)
        return st;
    if (dim < 0 || (uint64_t)dim >= A->ndim)
        return CR__FAIL(arena, CR_EINVAL, "%s: dimension %lld of an array of %u", who,
                        (long long)dim, (unsigned)A->ndim);
    *d = (size_t)dim;
    if ((st = cr__dense(arena, A, cr__work((cr_dtype)A->dtype), &s->A)) != CR_OK)
        return st;
    s->n = A->shape[*d];
    s->inner = 1;
    for (size_t k = *d + 1; k < A->ndim; k++)
        s->inner *= A->shape[k];
    size_t numel = cr_array_numel(A);
    s->len = s->n == 0 ? 0 : numel / s->n;
    return CR_OK;
}

/* getindex's arguments (A, :, ..., idx at d, ..., :), idx an i64 array of m entries. */
static cr_status index_at_dim(cr_arena *arena, const cr_value *A, size_t d, const size_t *idx,
                              size_t m, cr_value *gargs, size_t *ng)
{
    size_t nd = A->u.arr->ndim;
    int64_t *v = cr_arena_calloc(arena, m ? m : 1, sizeof *v, _Alignof(int64_t));
    if (v == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < m; k++)
        v[k] = (int64_t)idx[k];
    cr_array *Ix;
    cr_status st = cr__i64_array(arena, m, v, &Ix);
    if (st != CR_OK)
        return st;
    gargs[0] = *A;
    for (size_t k = 0; k < nd; k++)
        gargs[k + 1] = k == d ? cr_value_array(Ix) : cr_colon;
    *ng = nd + 1;
    return CR_OK;
}

/* ---- The selections ------------------------------------------------------------------------ */

/* How a function chooses: fills getindex's arguments (the array first). */
typedef cr_status (*choose_fn)(cr_arena *arena, const cr_value *args, size_t nargs, cr_value *gargs,
                               size_t *ng);

typedef struct sel_def {
    cr__op op;
    const char *name;
    choose_fn choose;
    size_t ai;       /* position of the array among the arguments */
    size_t min, max; /* arguments */
} sel_def;

/* The array argument at position i: a float array of at most CR_SIG_MAX_ARGS - 1
 * dimensions (getindex takes one index per dimension). */
static cr_status sel_array(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                           size_t i, bool real, const cr_array **A)
{
    cr_status st = cr__array_arg(arena, who, args, nargs, i, A);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)(*A)->dtype) || (real && (*A)->dtype == CR_DT_C128))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected an f64%s array", who,
                        real ? " or f32" : ", f32 or c128");
    if ((*A)->ndim == 0 || (*A)->ndim >= CR_SIG_MAX_ARGS)
        return CR__FAIL(arena, CR_EINVAL, "%s: an array of %u dimensions (1 to %d taken)", who,
                        (unsigned)(*A)->ndim, CR_SIG_MAX_ARGS - 1);
    return CR_OK;
}

/* filter(f, A): the elements for which f returns true, as a vector (row-major order). */
static cr_status choose_filter(cr_arena *arena, const cr_value *args, size_t nargs, cr_value *gargs,
                               size_t *ng)
{
    const cr_array *A;
    cr_status st = sel_array(arena, "filter", args, nargs, 1, false, &A);
    if (st != CR_OK)
        return st;
    if (args[0].kind != CR_KIND_FUNC)
        return CR__FAIL(arena, CR_EINVAL, "filter: the predicate must be a function");
    cr_array *M;
    if ((st = cr__new(arena, CR_DT_BOOL, A->ndim, A->shape, false, &M)) != CR_OK)
        return st;
    size_t n = cr_array_numel(A);
    for (size_t k = 0; k < n; k++) {
        cr_value x = cr__scalar_value((cr_dtype)A->dtype, cr_array_get_linear(A, k)), b;
        if ((st = cr_function_call(arena, &args[0], &x, 1, &b)) != CR_OK)
            return st;
        if (b.kind != CR_KIND_BOOL)
            return CR__FAIL(arena, CR_EINVAL, "filter: the predicate returned a %s, not a bool",
                            cr_kind_name(b.kind));
        ((bool *)M->data)[k] = b.u.b;
    }
    gargs[0] = args[1];
    gargs[1] = cr_value_array(M);
    *ng = 2;
    return CR_OK;
}

/* The array argument of `who` (real when `real`), its slices along the dims args[1] and a
 * list *idx of as many slice indices (uninitialised). */
static cr_status sel_slices(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                            bool real, size_t *d, slices *s, size_t **idx)
{
    const cr_array *A;
    cr_status st = sel_array(arena, who, args, nargs, 0, real, &A);
    if (st == CR_OK)
        st = slices_of(arena, who, A, &args[1], d, s);
    if (st == CR_OK &&
        (*idx = cr_arena_calloc(arena, s->n ? s->n : 1, sizeof **idx, _Alignof(size_t))) == NULL)
        st = CR__ALLOC_STATUS(arena);
    return st;
}

/* sortslices(A, dims): the slices along dims in lexicographic isless order (stable). */
static cr_status choose_sortslices(cr_arena *arena, const cr_value *args, size_t nargs,
                                   cr_value *gargs, size_t *ng)
{
    slices s;
    size_t d, *perm, *tmp = NULL;
    cr_status st = sel_slices(arena, "sortslices", args, nargs, true, &d, &s, &perm);
    if (st == CR_OK &&
        (tmp = cr_arena_calloc(arena, s.n ? s.n : 1, sizeof *tmp, _Alignof(size_t))) == NULL)
        st = CR__ALLOC_STATUS(arena);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < s.n; i++)
        perm[i] = i;
    merge_sort(perm, tmp, s.n, slice_cmp, &s, false);
    return index_at_dim(arena, &args[0], d, perm, s.n, gargs, ng);
}

/* unique_ex(A, dims): the first occurrence of each distinct slice along dims, in order. */
static cr_status choose_unique(cr_arena *arena, const cr_value *args, size_t nargs, cr_value *gargs,
                               size_t *ng)
{
    slices s;
    size_t d, *first, m = 0;
    cr_status st = sel_slices(arena, "unique_ex", args, nargs, false, &d, &s, &first);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < s.n; i++) {
        bool seen = false;
        for (size_t k = 0; k < m && !seen; k++)
            seen = slice_equal(&s, first[k], i);
        if (!seen)
            first[m++] = i;
    }
    return index_at_dim(arena, &args[0], d, first, m, gargs, ng);
}

/* The stable order of a vector v by the keys by(v[i]) (by absent: v itself), reversed with
 * rev; arguments (v, rev[, by]) start at position 0 after `skip` others. */
static cr_status sort_order(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                            size_t vi, size_t **perm, size_t *n)
{
    const cr_array *v;
    cr_status st = sel_array(arena, who, args, nargs, vi, false, &v);
    if (st != CR_OK)
        return st;
    if (v->ndim != 1)
        return CR__FAIL(arena, CR_EINVAL, "%s: expected a vector", who);
    int64_t rev = 0;
    if (args[vi + 1].kind == CR_KIND_BOOL)
        rev = args[vi + 1].u.b;
    else if ((st = cr__int_arg(arena, who, &args[vi + 1], &rev)) != CR_OK)
        return st;
    const cr_value *by = nargs > vi + 2 ? &args[vi + 2] : NULL;
    if (by != NULL && by->kind == CR_KIND_NOTHING)
        by = NULL;
    if (by != NULL && by->kind != CR_KIND_FUNC)
        return CR__FAIL(arena, CR_EINVAL, "%s: by must be a function", who);
    if (by == NULL && v->dtype == CR_DT_C128)
        return CR__FAIL(arena, CR_EINVAL, "%s: complex values have no order (give by)", who);
    *n = v->shape[0];
    double *keys = cr_arena_calloc(arena, *n ? *n : 1, sizeof *keys, _Alignof(double));
    *perm = cr_arena_calloc(arena, *n ? *n : 1, sizeof **perm, _Alignof(size_t));
    size_t *tmp = cr_arena_calloc(arena, *n ? *n : 1, sizeof *tmp, _Alignof(size_t));
    if (keys == NULL || *perm == NULL || tmp == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < *n; i++) {
        cr_complex x = cr_array_get_linear(v, i);
        (*perm)[i] = i;
        if (by == NULL) {
            keys[i] = creal(x);
            continue;
        }
        cr_value xv = cr__scalar_value((cr_dtype)v->dtype, x), k;
        if ((st = cr_function_call(arena, by, &xv, 1, &k)) != CR_OK)
            return st;
        if (k.kind == CR_KIND_F64)
            keys[i] = k.u.f64;
        else if (k.kind == CR_KIND_F32)
            keys[i] = (double)k.u.f32;
        else if (k.kind == CR_KIND_I64 || k.kind == CR_KIND_I32)
            keys[i] = (double)k.u.i64;
        else if (k.kind == CR_KIND_BOOL)
            keys[i] = k.u.b ? 1 : 0;
        else
            return CR__FAIL(arena, CR_EINVAL, "%s: by returned a %s, not a real number", who,
                            cr_kind_name(k.kind));
    }
    merge_sort(*perm, tmp, *n, key_cmp, keys, rev != 0);
    return CR_OK;
}

/* sort_ex(v, rev[, by]). */
static cr_status choose_sort(cr_arena *arena, const cr_value *args, size_t nargs, cr_value *gargs,
                             size_t *ng)
{
    size_t *perm, n;
    cr_status st = sort_order(arena, "sort_ex", args, nargs, 0, &perm, &n);
    if (st != CR_OK)
        return st;
    return index_at_dim(arena, &args[0], 0, perm, n, gargs, ng);
}

/* partialsort_ex(v, k, rev[, by]): element k of the sorted order (a number), or the
 * elements of a cr_range k (a vector). */
static cr_status choose_partialsort(cr_arena *arena, const cr_value *args, size_t nargs,
                                    cr_value *gargs, size_t *ng)
{
    const char *who = "partialsort_ex";
    cr_status st = cr__nargs(arena, who, nargs, 3, 4);
    if (st != CR_OK)
        return st;
    /* sort_order reads (v, rev, by): hand it those */
    cr_value a[3] = {args[0], args[2], nargs > 3 ? args[3] : (cr_value){.kind = CR_KIND_NOTHING}};
    size_t *perm, n;
    if ((st = sort_order(arena, who, a, 3, 0, &perm, &n)) != CR_OK)
        return st;
    const cr_value *k = &args[1];
    if (k->kind == CR_KIND_I64 || k->kind == CR_KIND_I32) {
        if (k->u.i64 < 0 || (uint64_t)k->u.i64 >= n)
            return CR__FAIL(arena, CR_EINVAL, "%s: k = %lld outside 0..%zu", who,
                            (long long)k->u.i64, n);
        gargs[0] = args[0];
        gargs[1] = cr_value_i64((int64_t)perm[k->u.i64]);
        *ng = 2;
        return CR_OK;
    }
    if (k->kind != CR_KIND_STRUCT || k->u.obj.type != &cr_range_type || k->u.obj.ptr == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s: k must be an integer or a cr_range", who);
    const cr_range *r = k->u.obj.ptr;
    if (r->step == 0)
        return CR__FAIL(arena, CR_EINVAL, "%s: a range of step 0", who);
    uint64_t len = cr__range_len(r->start, r->stop, r->step);
    if (len > n)
        return CR__FAIL(arena, CR_EINVAL, "%s: a range of %llu elements for %zu", who,
                        (unsigned long long)len, n);
    size_t *sel = cr_arena_calloc(arena, len ? len : 1, sizeof *sel, _Alignof(size_t));
    if (sel == NULL)
        return CR__ALLOC_STATUS(arena);
    int64_t at = r->start;
    for (uint64_t i = 0; i < len; i++) {
        if (at < 0 || (uint64_t)at >= n)
            return CR__FAIL(arena, CR_EINVAL, "%s: range element %lld outside 0..%zu", who,
                            (long long)at, n);
        sel[i] = perm[at];
        if (i + 1 < len)
            at += r->step; /* the next element: between start and stop, no overflow */
    }
    return index_at_dim(arena, &args[0], 0, sel, (size_t)len, gargs, ng);
}

/* repeat_ex(A, inner, outer): each element repeated inner[d] times along d, the result
 * tiled outer[d] times: getindex with idx_d[k] = (k mod n_d inner_d) / inner_d. */
static cr_status choose_repeat(cr_arena *arena, const cr_value *args, size_t nargs, cr_value *gargs,
                               size_t *ng)
{
    const char *who = "repeat_ex";
    const cr_array *A;
    cr_status st = sel_array(arena, who, args, nargs, 0, false, &A);
    if (st != CR_OK)
        return st;
    int64_t *cnt[2];
    for (size_t a = 0; a < 2; a++) {
        size_t m = 1;
        if (args[a + 1].kind == CR_KIND_ARRAY) {
            st = cr__int_list(arena, who, &args[a + 1], &cnt[a], &m);
        } else {
            cnt[a] = cr_arena_calloc(arena, 1, sizeof(int64_t), _Alignof(int64_t));
            st = cnt[a] == NULL ? CR__ALLOC_STATUS(arena)
                                : cr__int_arg(arena, who, &args[a + 1], cnt[a]);
        }
        if (st != CR_OK)
            return st;
        if (m != A->ndim)
            return CR__FAIL(arena, CR_EINVAL, "%s: %zu %s counts for %u dimension%s", who, m,
                            a == 0 ? "inner" : "outer", (unsigned)A->ndim,
                            CR__S((unsigned)A->ndim));
    }
    gargs[0] = args[0];
    for (size_t d = 0; d < A->ndim; d++) {
        if (cnt[0][d] < 0 || cnt[1][d] < 0)
            return CR__FAIL(arena, CR_EINVAL, "%s: a negative count", who);
        size_t block, len;
        if (!cr__mul_size(A->shape[d], (size_t)cnt[0][d], &block) ||
            !cr__mul_size(block, (size_t)cnt[1][d], &len) || len > (size_t)PTRDIFF_MAX / 8)
            return CR__FAIL(arena, CR_EOVERFLOW, "%s: dimension %zu overflows", who, d);
        int64_t *v = cr_arena_calloc(arena, len ? len : 1, sizeof *v, _Alignof(int64_t));
        if (v == NULL)
            return CR__ALLOC_STATUS(arena);
        for (size_t k = 0; k < len; k++)
            v[k] = (int64_t)((k % block) / (size_t)cnt[0][d]);
        cr_array *Ix;
        if ((st = cr__i64_array(arena, len, v, &Ix)) != CR_OK)
            return st;
        gargs[d + 1] = cr_value_array(Ix);
    }
    *ng = A->ndim + 1;
    return CR_OK;
}

/* ---- The rules: getindex's, on the chosen indices ---------------------------------------- */

static const sel_def *def_of(const cr_value *f)
{
    return f->u.func.fn->udata;
}

typedef struct sel_env {
    cr_pullback inner;
    size_t ai;
    uint32_t nd;
} sel_env;

static cr_status sel_pullback(CR__PULLBACK_PARAMS)
{
    const sel_env *e = env;
    cr_tangent idx[CR_SIG_MAX_ARGS + 1];
    cr_status st = cr_pullback_call(arena, &e->inner, dy, idx, e->inner.nx);
    if (st == CR_OK && e->ai + 1 < nx)
        dx[e->ai + 1] = idx[1];
    cr__mark_nondiff(dx, nx, e->nd);
    return st;
}

/* A selection as a getindex call: the definition d of f and getindex's arguments. */
typedef struct sel_call {
    const sel_def *d;
    cr_value gargs[CR_SIG_MAX_ARGS];
    size_t ng;
} sel_call;

static cr_status sel_prepare(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                             sel_call *c)
{
    c->d = def_of(f);
    c->ng = 0;
    cr_status st = cr__nargs(arena, c->d->name, nargs, c->d->min, c->d->max);
    return st == CR_OK ? c->d->choose(arena, args, nargs, c->gargs, &c->ng) : st;
}

static cr_status sel_rrule(CR__RRULE_PARAMS)
{
    sel_call c;
    cr_status st = sel_prepare(arena, f, args, nargs, &c);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st == CR_OK ? cr_function_call(arena, &cr_fn_getindex, c.gargs, c.ng, y) : st;
    CR__ARENA_ZNEW(arena, sel_env, e);
    e->ai = c.d->ai;
    e->nd = cr__nondiff_mask(args, nargs, cr__arg_perturbable);
    if ((st = cr_rrule(cfg, arena, &cr_fn_getindex, c.gargs, c.ng, y, &e->inner)) != CR_OK)
        return st;
    *pb = (cr_pullback){sel_pullback, e, c.d->name, nargs + 1};
    return CR_OK;
}

static cr_status sel_frule(CR__FRULE_PARAMS)
{
    sel_call c;
    cr_tangent gd[CR_SIG_MAX_ARGS + 1] = {cr_tangent_zero()};
    cr_status st = sel_prepare(arena, f, args, nargs, &c);
    if (st != CR_OK)
        return st;
    gd[1] = dargs[c.d->ai + 1];
    for (size_t k = 2; k <= c.ng; k++)
        gd[k] = cr_tangent_none();
    return cr_frule(cfg, arena, gd, &cr_fn_getindex, c.gargs, c.ng, y, dy);
}

#define SEL(NAME, STR, CHOOSE, AI, MIN, MAX, ARITY)                                         \
    static const sel_def NAME##_def = {{sel_rrule}, STR, CHOOSE, AI, MIN, MAX};             \
    static const cr_function NAME##_function = {                                            \
        .name = STR, .arity = ARITY, .primal = cr__primal_via_rrule, .udata = &NAME##_def}; \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

SEL(filter, "filter", choose_filter, 1, 2, 2, 2)
SEL(sortslices, "sortslices", choose_sortslices, 0, 2, 2, 2)
SEL(unique_ex, "unique_ex", choose_unique, 0, 2, 2, 2)
SEL(sort_ex, "sort_ex", choose_sort, 0, 2, 3, -1)
SEL(partialsort_ex, "partialsort_ex", choose_partialsort, 0, 3, 4, -1)
SEL(repeat_ex, "repeat_ex", choose_repeat, 0, 3, 3, 3)

/* ---- hvcat(rows, A...) ------------------------------------------------------------------- */

/* The number of blocks in each block row: rows an integer (every row) or an i64 array. */
static cr_status hv_rows(cr_arena *arena, const cr_value *args, size_t nargs, int64_t **rows,
                         size_t *nrows)
{
    const char *who = "hvcat";
    cr_status st = cr__nargs(arena, who, nargs, 2, CR_SIG_MAX_ARGS);
    if (st != CR_OK)
        return st;
    size_t nb = nargs - 1;
    if (args[0].kind == CR_KIND_ARRAY) {
        if ((st = cr__int_list(arena, who, &args[0], rows, nrows)) != CR_OK)
            return st;
    } else {
        int64_t per;
        if ((st = cr__int_arg(arena, who, &args[0], &per)) != CR_OK)
            return st;
        if (per <= 0 || nb % (uint64_t)per != 0)
            return CR__FAIL(arena, CR_EINVAL, "hvcat: %zu blocks in rows of %lld", nb,
                            (long long)per);
        *nrows = nb / (size_t)per;
        *rows = cr_arena_calloc(arena, *nrows, sizeof **rows, _Alignof(int64_t));
        if (*rows == NULL)
            return CR__ALLOC_STATUS(arena);
        for (size_t r = 0; r < *nrows; r++)
            (*rows)[r] = per;
    }
    size_t total = 0;
    for (size_t r = 0; r < *nrows; r++) {
        if ((*rows)[r] <= 0 || (uint64_t)(*rows)[r] > nb - total)
            return CR__FAIL(arena, CR_EINVAL, "hvcat: row sizes do not add up to %zu blocks", nb);
        total += (size_t)(*rows)[r];
    }
    if (total != nb || *nrows == 0)
        return CR__FAIL(arena, CR_EINVAL, "hvcat: row sizes do not add up to %zu blocks", nb);
    return CR_OK;
}

typedef struct hv_env {
    size_t nrows;
    int64_t *rows;
    cr_pullback *row_pb; /* hcat of each block row */
    cr_pullback col_pb;  /* vcat of the rows */
    uint32_t nd;
} hv_env;

static cr_status hv_pullback(CR__PULLBACK_PARAMS)
{
    const hv_env *e = env;
    cr_tangent rb[CR_SIG_MAX_ARGS + 1], bb[CR_SIG_MAX_ARGS + 1];
    cr_status st = cr_pullback_call(arena, &e->col_pb, dy, rb, e->nrows + 1);
    size_t at = 2;
    for (size_t r = 0; r < e->nrows && st == CR_OK; r++) {
        size_t k = (size_t)e->rows[r];
        st = cr_pullback_call(arena, &e->row_pb[r], &rb[r + 1], bb, k + 1);
        for (size_t j = 0; j < k && st == CR_OK && at < nx; j++)
            dx[at++] = bb[j + 1];
    }
    cr__mark_nondiff(dx, nx, e->nd);
    return st;
}

static cr_status hvcat_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, hv_env, e);
    cr_status st = hv_rows(arena, args, nargs, &e->rows, &e->nrows);
    if (st != CR_OK)
        return st;
    bool primal = udata == CR__PRIMAL_ONLY;
    e->row_pb = cr_arena_calloc(arena, e->nrows, sizeof *e->row_pb, _Alignof(cr_pullback));
    if (e->row_pb == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_value rowv[CR_SIG_MAX_ARGS];
    size_t at = 1;
    for (size_t r = 0; r < e->nrows; r++) {
        size_t k = (size_t)e->rows[r];
        st = primal ? cr_function_call(arena, &cr_fn_hcat, &args[at], k, &rowv[r])
                    : cr_rrule(cfg, arena, &cr_fn_hcat, &args[at], k, &rowv[r], &e->row_pb[r]);
        if (st != CR_OK)
            return st;
        at += k;
    }
    if (primal)
        return cr_function_call(arena, &cr_fn_vcat, rowv, e->nrows, y);
    if ((st = cr_rrule(cfg, arena, &cr_fn_vcat, rowv, e->nrows, y, &e->col_pb)) != CR_OK)
        return st;
    e->nd = cr__nondiff_mask(args, nargs, cr__arg_perturbable);
    *pb = (cr_pullback){hv_pullback, e, "hvcat_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(hvcat, "hvcat", -1)

static cr_status hvcat_frule(CR__FRULE_PARAMS)
{
    int64_t *rows;
    size_t nrows;
    cr_status st = hv_rows(arena, args, nargs, &rows, &nrows);
    if (st != CR_OK)
        return st;
    cr_value rowv[CR_SIG_MAX_ARGS];
    cr_tangent rowd[CR_SIG_MAX_ARGS + 1], bd[CR_SIG_MAX_ARGS + 1];
    rowd[0] = cr_tangent_zero();
    size_t at = 1;
    for (size_t r = 0; r < nrows; r++) {
        size_t k = (size_t)rows[r];
        bd[0] = cr_tangent_zero();
        for (size_t j = 0; j < k; j++)
            bd[j + 1] = dargs[at + j + 1];
        if ((st = cr_frule(cfg, arena, bd, &cr_fn_hcat, &args[at], k, &rowv[r], &rowd[r + 1])) !=
            CR_OK)
            return st;
        at += k;
    }
    return cr_frule(cfg, arena, rowd, &cr_fn_vcat, rowv, nrows, y, dy);
}

/* ---- Test registrations ------------------------------------------------------------------- */

/* x > 0 (the real part), the predicate of filter's samples. */
static cr_status positive_primal(cr_arena *arena, const cr_value *f, const cr_value *args,
                                 size_t nargs, cr_value *out)
{
    (void)arena;
    (void)f;
    (void)nargs;
    *out = cr_value_bool(creal(cr__scalar_of(&args[0])) > 0);
    return CR_OK;
}
static const cr_function k_positive = {.name = "positive", .arity = 1, .primal = positive_primal};

enum { SS_FILTER, SS_SORTSLICES, SS_UNIQUE, SS_SORT, SS_PARTIALSORT, SS_REPEAT, SS_HVCAT };

/* An array whose entries are well apart (so that no finite-difference step changes an order
 * or a sign): a shuffled grid of spacing 0.25 away from 0, with repeats when `repeats`. */
static cr_status spaced(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t nd, const size_t *shape,
                        bool repeats, cr_array **out)
{
    cr_status st = cr__rand_array(arena, rng, dt, nd, shape, -1, 1, out);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(*out);
    size_t *lev = cr_arena_calloc(arena, n ? n : 1, sizeof *lev, _Alignof(size_t));
    if (lev == NULL)
        return CR__ALLOC_STATUS(arena);
    /* distinct magnitudes (a shuffle of 1..n), or three levels with repeats */
    for (size_t k = 0; k < n; k++)
        lev[k] = repeats ? cr__rng_below(rng, 3) : k;
    for (size_t k = n; !repeats && k-- > 1;) {
        size_t j = cr__rng_below(rng, k + 1), t = lev[k];
        lev[k] = lev[j];
        lev[j] = t;
    }
    for (size_t k = 0; k < n; k++) {
        double v = 0.25 * (double)(1 + lev[k]) * (cr__rng_below(rng, 2) ? 1 : -1);
        cr_complex z = cr__load(*out, (ptrdiff_t)k);
        cr__store(*out, (ptrdiff_t)k, dt == CR_DT_C128 ? cr__c(v, cimag(z)) : v);
    }
    return CR_OK;
}

static cr_status sample_select(CR__SAMPLE_PARAMS)
{
    int what = *(const int *)env;
    cr_dtype dt = cr__rng_dtype(rng);
    size_t shape[3], nd = cr__rng_shape3(rng, 4, shape);
    cr_array *A;
    cr_status st;
    switch (what) {
    case SS_FILTER:
        st = spaced(arena, rng, dt, nd, shape, false, &A);
        args[0] = cr_value_function(&k_positive, NULL);
        args[1] = cr_value_array(A);
        return st;
    case SS_SORTSLICES:
    case SS_UNIQUE:
        if (what == SS_SORTSLICES && dt == CR_DT_C128)
            dt = CR_DT_F64;
        /* distinct values: at a tie the order (sortslices) or the number of distinct slices
         * (unique_ex) jumps, so finite differences cannot be taken there; ties and equal
         * slices are tested by hand (tests/rulesets/test_rules_select.c) */
        st = spaced(arena, rng, dt, nd, shape, false, &A);
        args[0] = cr_value_array(A);
        args[1] = cr_value_i64((int64_t)cr__rng_below(rng, nd));
        return st;
    case SS_SORT:
    case SS_PARTIALSORT: {
        size_t n = cr__rng_below(rng, 7);
        if (what == SS_PARTIALSORT && n == 0)
            n = 1;
        if (dt == CR_DT_C128)
            dt = CR_DT_F64;
        if ((st = spaced(arena, rng, dt, 1, &n, false, &A)) != CR_OK)
            return st;
        args[0] = cr_value_array(A);
        bool rev = cr__rng_below(rng, 2) != 0;
        size_t b = what == SS_SORT ? 2 : 3; /* position of by */
        args[b - 1] = cr_value_bool(rev);
        if (nargs > b)
            args[b] = cr__rng_below(rng, 3) == 0 ? (cr_value){.kind = CR_KIND_NOTHING} : cr_fn_fabs;
        if (what == SS_PARTIALSORT) {
            if (cr__rng_below(rng, 2) == 0) {
                args[1] = cr_value_i64((int64_t)cr__rng_below(rng, n));
            } else {
                CR__ARENA_ZNEW(arena, cr_range, r);
                r->start = (int64_t)cr__rng_below(rng, n);
                r->stop = r->start + 1 + (int64_t)cr__rng_below(rng, n - (size_t)r->start);
                r->step = 1;
                args[1] = cr_value_struct(&cr_range_type, r);
            }
        }
        return CR_OK;
    }
    case SS_REPEAT: {
        int64_t in[3], out[3];
        for (size_t k = 0; k < nd; k++) {
            in[k] = (int64_t)cr__rng_below(rng, 3);
            out[k] = 1 + (int64_t)cr__rng_below(rng, 2);
        }
        cr_array *Ii, *Io;
        st = cr__rand_array(arena, rng, dt, nd, shape, -2, 2, &A);
        if (st == CR_OK)
            st = cr__i64_array(arena, nd, in, &Ii);
        if (st == CR_OK)
            st = cr__i64_array(arena, nd, out, &Io);
        if (st != CR_OK)
            return st;
        args[0] = cr_value_array(A);
        args[1] = cr_value_array(Ii);
        args[2] = cr_value_array(Io);
        return CR_OK;
    }
    case SS_HVCAT:
    default: {
        if (nargs == 2) {
            /* one block */
            size_t s2[2] = {1 + cr__rng_below(rng, 3), 1 + cr__rng_below(rng, 3)};
            args[0] = cr_value_i64(1);
            st = cr__rand_array(arena, rng, dt, 2, s2, -2, 2, &A);
            args[1] = cr_value_array(A);
            return st;
        }
        /* a 2 x 2 block matrix of blocks r_i x c_j */
        size_t r[2] = {1 + cr__rng_below(rng, 2), 1 + cr__rng_below(rng, 2)},
               c[2] = {1 + cr__rng_below(rng, 2), 1 + cr__rng_below(rng, 2)};
        args[0] = cr_value_i64(2);
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 2; j++) {
                size_t s[2] = {r[i], c[j]};
                if ((st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 2, s, -2, 2, &A)) != CR_OK)
                    return st;
                args[1 + 2 * i + j] = cr_value_array(A);
            }
        return nargs == 5 ? CR_OK : CR_EDOMAIN;
    }
    }
}

#define ST(NAME, E)                   \
    static const int k_ss_##NAME = E; \
    static const cr_rule_test k_t_##NAME = {.sample = sample_select, .env = (void *)&k_ss_##NAME};
ST(filter, SS_FILTER)
ST(sortslices, SS_SORTSLICES)
ST(unique, SS_UNIQUE)
ST(sort, SS_SORT)
ST(partialsort, SS_PARTIALSORT)
ST(repeat, SS_REPEAT)
ST(hvcat, SS_HVCAT)

cr_status cr__array_register_select(cr_registry *reg)
{
#define FA                 \
    {                      \
        CR__M_FARRAY, NULL \
    }
#define RA                 \
    {                      \
        CR__M_RARRAY, NULL \
    }
#define IN             \
    {                  \
        CR_M_INT, NULL \
    }
#define FLAG                       \
    {                              \
        CR_M_INT | CR_M_BOOL, NULL \
    }
#define DIMS                        \
    {                               \
        CR_M_INT | CR_M_A_INT, NULL \
    }
#define BY                             \
    {                                  \
        CR_M_FUNC | CR_M_NOTHING, NULL \
    }
#define K                                      \
    {                                          \
        CR_M_INT | CR_M_STRUCT, &cr_range_type \
    }
    static const cr_argspec a_filter[2] = {{CR_M_FUNC, NULL}, FA};
    static const cr_argspec a_slices[2] = {RA, IN};
    static const cr_argspec a_unique[2] = {FA, IN};
    static const cr_argspec a_sort2[2] = {RA, FLAG};
    static const cr_argspec a_sort3[3] = {FA, FLAG, BY};
    static const cr_argspec a_ps3[3] = {RA, K, FLAG};
    static const cr_argspec a_ps4[4] = {FA, K, FLAG, BY};
    static const cr_argspec a_repeat[3] = {FA, DIMS, DIMS};
    static const cr_argspec a_hv[2] = {DIMS, FA};
    static const cr_argspec a_hv5[5] = {DIMS, FA, FA, FA, FA};
#undef FA
#undef RA
#undef IN
#undef FLAG
#undef DIMS
#undef BY
#undef K
    static const struct {
        const cr_function *fn;
        const cr_argspec *args;
        size_t n;
        bool variadic;
        cr_frule_fn frule;
        cr_rrule_fn rrule;
        const cr_rule_test *test;
        uint32_t lin;
    } k[] = {
    /* The selections (piecewise linear): FN for the signature S of N arguments. */
#define SELECTION(FN, S, N, TEST) \
    {&FN##_function, S, N, false, sel_frule, sel_rrule, &k_t_##TEST, CR_PIECEWISE_LINEAR}
        SELECTION(filter, a_filter, 2, filter),
        SELECTION(sortslices, a_slices, 2, sortslices),
        SELECTION(unique_ex, a_unique, 2, unique),
        SELECTION(sort_ex, a_sort2, 2, sort),
        SELECTION(sort_ex, a_sort3, 3, sort),
        SELECTION(partialsort_ex, a_ps3, 3, partialsort),
        SELECTION(partialsort_ex, a_ps4, 4, partialsort),
#undef SELECTION
        {&repeat_ex_function, a_repeat, 3, false, sel_frule, sel_rrule, &k_t_repeat, CR_LINEAR},
        {&hvcat_function, a_hv, 2, true, hvcat_frule, hvcat_rrule, &k_t_hvcat, CR_LINEAR},
        {&hvcat_function, a_hv5, 5, false, hvcat_frule, hvcat_rrule, &k_t_hvcat, CR_LINEAR},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        cr_status st = cr__add_rule_so(reg, k[i].fn, k[i].args, k[i].n, k[i].variadic, k[i].frule,
                                       k[i].rrule, k[i].test, k[i].lin, NULL);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}
