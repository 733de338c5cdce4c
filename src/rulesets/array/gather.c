/*
 * Rearrangements: functions whose every output element is one element of an input (or
 * zero) — reverse, circshift, repeat, cat, stack, fill, dropdims, diag, diagm, triu, tril,
 * and sort and partialsort, whose map is the sorting permutation.
 * Each builds a gather map (for every output element: which input, which row-major linear
 * index, or none); one generic rrule gathers, its pullback scatter-adds the cotangent back
 * (elements used twice accumulate), its frule gathers the tangents. Multi-input pullbacks
 * (cat, stack) return thunks.
 */
#include <math.h>

#include "family.h"

#define G_MAX_IN 8

/* A gather map and the output it describes. */
typedef struct gmap {
    size_t ndim;
    size_t shape[CR_ARRAY_MAX_DIMS];
    size_t m;              /* output elements */
    int64_t *lin;          /* linear index into the input, or -1 for a zero */
    uint8_t *src;          /* which input (NULL: all from input 0) */
    size_t nin;            /* data inputs */
    size_t argi[G_MAX_IN]; /* their positions in args */
    bool scalar;           /* ndim 0 and the output is a scalar value (partialsort) */
} gmap;

typedef cr_status (*gmap_builder)(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g);

typedef struct gop {
    cr__op op; /* first: the function's udata is read as a cr__op */
    const char *name;
    const char *pb_name;
    gmap_builder build;
} gop;

static cr_status gmap_alloc(cr_arena *arena, const char *who, gmap *g, bool with_src)
{
    cr_status st = cr__ck_numel(cr_arena_ctx(arena), who, g->ndim, g->shape, sizeof *g->lin, &g->m);
    if (st != CR_OK)
        return st;
    g->lin = cr_arena_alloc(arena, (g->m ? g->m : 1) * sizeof *g->lin, _Alignof(int64_t));
    g->src = with_src ? cr_arena_calloc(arena, g->m ? g->m : 1, 1, 1) : NULL;
    if (g->lin == NULL || (with_src && g->src == NULL))
        return CR__ALLOC_STATUS(arena);
    return CR_OK;
}

/* The element count and row-major strides of an argument (a scalar: one element). */
static size_t arg_numel(const cr_value *v)
{
    return v->kind == CR_KIND_ARRAY ? cr_array_numel(v->u.arr) : 1;
}

/* Multi-index of linear index k in shape (row-major). */
static void unravel(size_t k, size_t ndim, const size_t *shape, size_t *idx)
{
    for (size_t d = ndim; d-- > 0;) {
        idx[d] = shape[d] ? k % shape[d] : 0;
        k = shape[d] ? k / shape[d] : 0;
    }
}

static int64_t ravel(size_t ndim, const size_t *shape, const size_t *idx)
{
    int64_t l = 0;
    for (size_t d = 0; d < ndim; d++)
        l = l * (int64_t)shape[d] + (int64_t)idx[d];
    return l;
}

static cr_status float_array(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                             size_t i, const cr_array **A)
{
    cr_status st = cr__array_arg(arena, who, args, nargs, i, A);
    if (st == CR_OK && !cr_dtype_is_float((cr_dtype)(*A)->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: argument %zu must be an f64, f32 or c128 array", who,
                        i + 1);
    return st;
}

/* An optional integer argument. */
static cr_status opt_int(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                         size_t i, int64_t dflt, int64_t *out)
{
    *out = dflt;
    return i < nargs ? cr__int_arg(arena, who, &args[i], out) : CR_OK;
}

/* ---- Builders ------------------------------------------------------------------------- */

/* reverse(A), reverse(A, dims): out[i] = A[i with reversed coordinates along dims]. */
static cr_status build_reverse(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    const cr_array *A;
    bool mask[CR_ARRAY_MAX_DIMS];
    cr_status st = cr__nargs(arena, "reverse", nargs, 1, 2);
    if (st == CR_OK)
        st = float_array(arena, "reverse", args, nargs, 0, &A);
    if (st == CR_OK && nargs == 2)
        st = cr__dims_arg(arena, "reverse", &args[1], A->ndim, mask);
    if (st != CR_OK)
        return st;
    if (nargs == 1)
        for (size_t d = 0; d < CR_ARRAY_MAX_DIMS; d++)
            mask[d] = true;
    g->ndim = A->ndim;
    memcpy(g->shape, A->shape, sizeof g->shape);
    if ((st = gmap_alloc(arena, "reverse", g, false)) != CR_OK)
        return st;
    size_t idx[CR_ARRAY_MAX_DIMS];
    for (size_t k = 0; k < g->m; k++) {
        unravel(k, g->ndim, g->shape, idx);
        for (size_t d = 0; d < g->ndim; d++)
            if (mask[d])
                idx[d] = g->shape[d] - 1 - idx[d];
        g->lin[k] = ravel(g->ndim, g->shape, idx);
    }
    return CR_OK;
}

/* who(A, v): the float array A and v, an integer (for a vector) or an i64 array, as one
 * integer per dimension of A in *list (`what` names them in messages). */
static cr_status array_and_per_dim(cr_arena *arena, const char *who, const char *what,
                                   const cr_value *args, size_t nargs, const cr_array **A,
                                   int64_t *one, int64_t **list)
{
    cr_status st = cr__nargs(arena, who, nargs, 2, 2);
    if (st == CR_OK)
        st = float_array(arena, who, args, nargs, 0, A);
    if (st != CR_OK)
        return st;
    size_t n = 1;
    *list = one;
    st = args[1].kind == CR_KIND_ARRAY ? cr__int_list(arena, who, &args[1], list, &n)
                                       : cr__int_arg(arena, who, &args[1], one);
    if (st == CR_OK && n != (*A)->ndim)
        st = CR__FAIL(arena, CR_EINVAL, "%s: %zu %s for %u dimension%s", who, n, what,
                      (unsigned)(*A)->ndim, CR__S((unsigned)(*A)->ndim));
    return st;
}

/* circshift(A, shifts): out[i] = A[(i - s) mod n] per dimension (elements move toward
 * higher indices, Julia's convention); shifts is an integer (for a vector) or an i64 array
 * with one shift per dimension. */
static cr_status build_circshift(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    const cr_array *A;
    int64_t one, *sh;
    cr_status st = array_and_per_dim(arena, "circshift", "shifts", args, nargs, &A, &one, &sh);
    if (st != CR_OK)
        return st;
    g->ndim = A->ndim;
    memcpy(g->shape, A->shape, sizeof g->shape);
    if ((st = gmap_alloc(arena, "circshift", g, false)) != CR_OK)
        return st;
    /* Each shift reduced modulo its extent first (to [0, e)): idx - s then cannot
     * overflow, whatever the shift (INT64_MIN included). */
    size_t s[CR_ARRAY_MAX_DIMS] = {0}, idx[CR_ARRAY_MAX_DIMS];
    for (size_t d = 0; d < g->ndim; d++) {
        int64_t e = (int64_t)g->shape[d], r = e > 0 ? sh[d] % e : 0;
        s[d] = (size_t)(r < 0 ? r + e : r);
    }
    for (size_t k = 0; k < g->m; k++) {
        unravel(k, g->ndim, g->shape, idx);
        for (size_t d = 0; d < g->ndim; d++)
            idx[d] = idx[d] >= s[d] ? idx[d] - s[d] : idx[d] + g->shape[d] - s[d];
        g->lin[k] = ravel(g->ndim, g->shape, idx);
    }
    return CR_OK;
}

/* repeat(A, counts): A tiled counts[d] times along each dimension (an i64 array with one
 * count per dimension). */
static cr_status build_repeat(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    const cr_array *A;
    int64_t one, *c;
    cr_status st = array_and_per_dim(arena, "repeat", "counts", args, nargs, &A, &one, &c);
    if (st != CR_OK)
        return st;
    g->ndim = A->ndim;
    cr_ctx *ctx = cr_arena_ctx(arena);
    for (size_t d = 0; d < g->ndim; d++) {
        size_t cd;
        if ((st = cr__ck_extent(ctx, "repeat", "count", c[d], &cd)) != CR_OK ||
            (st = cr__ck_mul(ctx, "repeat", A->shape[d], cd, &g->shape[d])) != CR_OK)
            return st;
    }
    if ((st = gmap_alloc(arena, "repeat", g, false)) != CR_OK)
        return st;
    size_t idx[CR_ARRAY_MAX_DIMS];
    for (size_t k = 0; k < g->m; k++) {
        unravel(k, g->ndim, g->shape, idx);
        for (size_t d = 0; d < g->ndim; d++)
            idx[d] %= A->shape[d];
        g->lin[k] = ravel(g->ndim, A->shape, idx);
    }
    return CR_OK;
}

/* cat(dim, A1, A2, ...): concatenation along dim (0-based; arrays of equal rank and equal
 * extents elsewhere). vcat is cat(0, ...), hcat of matrices cat(1, ...). */
static cr_status build_cat(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    int64_t dim;
    if (nargs < 2 || nargs - 1 > G_MAX_IN)
        return CR__FAIL(arena, CR_EINVAL, "cat: takes a dimension and 1 to %d array%s", G_MAX_IN,
                        CR__S(G_MAX_IN));
    cr_status st = cr__int_arg(arena, "cat", &args[0], &dim);
    const cr_array *A0;
    if (st == CR_OK)
        st = float_array(arena, "cat", args, nargs, 1, &A0);
    if (st != CR_OK)
        return st;
    if (dim < 0 || (size_t)dim >= A0->ndim)
        return CR__FAIL(arena, CR_EINVAL, "cat: dimension %lld out of range", (long long)dim);
    size_t dd = (size_t)dim, offs[G_MAX_IN + 1] = {0};
    g->ndim = A0->ndim;
    memcpy(g->shape, A0->shape, sizeof g->shape);
    g->shape[dd] = 0;
    g->nin = nargs - 1;
    for (size_t j = 0; j < g->nin; j++) {
        const cr_array *A;
        st = float_array(arena, "cat", args, nargs, j + 1, &A);
        if (st != CR_OK)
            return st;
        if (A->ndim != A0->ndim)
            return CR__FAIL(arena, CR_ESHAPE, "cat: arrays of %u and %u dimensions",
                            (unsigned)A0->ndim, (unsigned)A->ndim);
        for (size_t d = 0; d < A->ndim; d++)
            if (d != dd && A->shape[d] != A0->shape[d])
                return CR__FAIL(arena, CR_ESHAPE,
                                "cat: argument %zu differs in extent along dimension %zu", j + 2,
                                d);
        g->argi[j] = j + 1;
        if ((st = cr__ck_add(cr_arena_ctx(arena), "cat", offs[j], A->shape[dd], &offs[j + 1])) !=
            CR_OK)
            return st;
        g->shape[dd] = offs[j + 1];
    }
    if ((st = gmap_alloc(arena, "cat", g, true)) != CR_OK)
        return st;
    size_t idx[CR_ARRAY_MAX_DIMS];
    for (size_t k = 0; k < g->m; k++) {
        unravel(k, g->ndim, g->shape, idx);
        size_t j = 0;
        while (idx[dd] >= offs[j + 1])
            j++;
        idx[dd] -= offs[j];
        g->src[k] = (uint8_t)j;
        g->lin[k] = ravel(g->ndim, args[j + 1].u.arr->shape, idx);
    }
    return CR_OK;
}

/* stack(A1, A2, ...): equal-shaped arrays stacked along a new leading dimension (result[k]
 * is A_{k+1}; NumPy's default, Julia stacks along a new last dimension). */
static cr_status build_stack(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    if (nargs < 1 || nargs > G_MAX_IN)
        return CR__FAIL(arena, CR_EINVAL, "stack: takes 1 to %d array%s", G_MAX_IN,
                        CR__S(G_MAX_IN));
    const cr_array *A0;
    cr_status st = float_array(arena, "stack", args, nargs, 0, &A0);
    if (st != CR_OK)
        return st;
    if (A0->ndim + 1 > CR_ARRAY_MAX_DIMS)
        return CR__FAIL(arena, CR_EINVAL, "stack: too many dimensions");
    for (size_t j = 0; j < nargs; j++) {
        const cr_array *A;
        st = float_array(arena, "stack", args, nargs, j, &A);
        if (st != CR_OK)
            return st;
        if (!cr_array_same_shape(A, A0))
            return CR__FAIL(arena, CR_ESHAPE, "stack: arrays of different shapes");
        g->argi[j] = j;
    }
    g->nin = nargs;
    g->ndim = A0->ndim + 1;
    g->shape[0] = nargs;
    for (size_t d = 0; d < A0->ndim; d++)
        g->shape[d + 1] = A0->shape[d];
    if ((st = gmap_alloc(arena, "stack", g, true)) != CR_OK)
        return st;
    size_t per = cr_array_numel(A0);
    for (size_t k = 0; k < g->m; k++) {
        g->src[k] = (uint8_t)(per ? k / per : 0);
        g->lin[k] = (int64_t)(per ? k % per : 0);
    }
    return CR_OK;
}

/* fill(x, shape): an array of the shape (an integer or an i64 array) filled with the
 * number x; its cotangent is the sum of the output's. */
static cr_status build_fill(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    cr_status st = cr__nargs(arena, "fill", nargs, 2, 2);
    if (st != CR_OK)
        return st;
    cr_kind k = args[0].kind;
    if (k != CR_KIND_F64 && k != CR_KIND_F32 && k != CR_KIND_C128 && k != CR_KIND_I64 &&
        k != CR_KIND_I32 && k != CR_KIND_BOOL)
        return CR__FAIL(arena, CR_EINVAL, "fill: the value must be a number");
    int64_t one, *s = &one;
    size_t n = 1;
    st = args[1].kind == CR_KIND_ARRAY ? cr__int_list(arena, "fill", &args[1], &s, &n)
                                       : cr__int_arg(arena, "fill", &args[1], &one);
    if (st != CR_OK)
        return st;
    if (n > CR_ARRAY_MAX_DIMS)
        return CR__FAIL(arena, CR_EINVAL, "fill: too many dimensions");
    g->ndim = n;
    for (size_t d = 0; d < n; d++)
        if ((st = cr__ck_extent(cr_arena_ctx(arena), "fill", "extent", s[d], &g->shape[d])) !=
            CR_OK)
            return st;
    if ((st = gmap_alloc(arena, "fill", g, false)) != CR_OK)
        return st;
    for (size_t i = 0; i < g->m; i++)
        g->lin[i] = 0;
    return CR_OK;
}

/* dropdims(A, dims): the listed dimensions (of extent 1) removed. */
static cr_status build_dropdims(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    const cr_array *A;
    bool mask[CR_ARRAY_MAX_DIMS];
    cr_status st = cr__nargs(arena, "dropdims", nargs, 2, 2);
    if (st == CR_OK)
        st = float_array(arena, "dropdims", args, nargs, 0, &A);
    if (st == CR_OK)
        st = cr__dims_arg(arena, "dropdims", &args[1], A->ndim, mask);
    if (st != CR_OK)
        return st;
    g->ndim = 0;
    for (size_t d = 0; d < A->ndim; d++) {
        if (mask[d] && A->shape[d] != 1)
            return CR__FAIL(arena, CR_EINVAL, "dropdims: dimension %zu has extent %zu, not 1", d,
                            A->shape[d]);
        if (!mask[d])
            g->shape[g->ndim++] = A->shape[d];
    }
    if ((st = gmap_alloc(arena, "dropdims", g, false)) != CR_OK)
        return st;
    for (size_t k = 0; k < g->m; k++)
        g->lin[k] = (int64_t)k;
    return CR_OK;
}

static cr_status square_or_matrix(cr_arena *arena, const char *who, const cr_value *args,
                                  size_t nargs, const cr_array **A, int64_t *k)
{
    cr_status st = cr__nargs(arena, who, nargs, 1, 2);
    if (st == CR_OK)
        st = float_array(arena, who, args, nargs, 0, A);
    if (st == CR_OK)
        st = opt_int(arena, who, args, nargs, 1, 0, k);
    if (st == CR_OK && (*A)->ndim != 2)
        return CR__FAIL(arena, CR_ESHAPE, "%s: expected a matrix", who);
    return st;
}

/* diag(A), diag(A, k): the k-th diagonal of a matrix (k > 0 above, k < 0 below). */
static cr_status build_diag(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    const cr_array *A;
    int64_t k;
    cr_status st = square_or_matrix(arena, "diag", args, nargs, &A, &k);
    if (st != CR_OK)
        return st;
    /* The first element (i0, j0) in uint64_t: |k| is exact there, INT64_MIN included. */
    uint64_t r = A->shape[0], c = A->shape[1];
    uint64_t i0 = k >= 0 ? 0 : cr__abs_u64(k), j0 = k >= 0 ? (uint64_t)k : 0;
    uint64_t len = i0 < r && j0 < c ? (r - i0 < c - j0 ? r - i0 : c - j0) : 0;
    g->ndim = 1;
    g->shape[0] = (size_t)len;
    if ((st = gmap_alloc(arena, "diag", g, false)) != CR_OK)
        return st;
    for (size_t t = 0; t < g->m; t++)
        g->lin[t] = (int64_t)((i0 + t) * c + j0 + t);
    return CR_OK;
}

/* diagm(v), diagm(v, k): the square matrix with v on its k-th diagonal, zeros elsewhere. */
static cr_status build_diagm(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    const cr_array *v;
    int64_t k;
    cr_status st = cr__nargs(arena, "diagm", nargs, 1, 2);
    if (st == CR_OK)
        st = float_array(arena, "diagm", args, nargs, 0, &v);
    if (st == CR_OK)
        st = opt_int(arena, "diagm", args, nargs, 1, 0, &k);
    if (st != CR_OK)
        return st;
    if (v->ndim != 1)
        return CR__FAIL(arena, CR_ESHAPE, "diagm: expected a vector");
    uint64_t ak = cr__abs_u64(k);
    size_t n;
    if (ak > CR__MAX_BYTES)
        return CR__FAIL(arena, CR_EOVERFLOW, "diagm: diagonal %lld overflows (at most %zu)",
                        (long long)k, CR__MAX_BYTES);
    if ((st = cr__ck_add(cr_arena_ctx(arena), "diagm", v->shape[0], (size_t)ak, &n)) != CR_OK)
        return st;
    g->ndim = 2;
    g->shape[0] = g->shape[1] = n;
    if ((st = gmap_alloc(arena, "diagm", g, false)) != CR_OK)
        return st;
    for (size_t t = 0; t < g->m; t++) {
        int64_t i = (int64_t)(t / n), j = (int64_t)(t % n);
        int64_t p = k >= 0 ? i : j;
        g->lin[t] = j - i == k ? p : -1;
    }
    return CR_OK;
}

static cr_status build_tri(cr_arena *arena, const char *who, bool upper, const cr_value *args,
                           size_t nargs, gmap *g)
{
    const cr_array *A;
    int64_t k;
    cr_status st = square_or_matrix(arena, who, args, nargs, &A, &k);
    if (st != CR_OK)
        return st;
    g->ndim = 2;
    g->shape[0] = A->shape[0];
    g->shape[1] = A->shape[1];
    if ((st = gmap_alloc(arena, who, g, false)) != CR_OK)
        return st;
    size_t c = A->shape[1];
    for (size_t t = 0; t < g->m; t++) {
        int64_t d = (int64_t)(t % c) - (int64_t)(t / c);
        g->lin[t] = (upper ? d >= k : d <= k) ? (int64_t)t : -1;
    }
    return CR_OK;
}

/* triu(A, k): the entries on and above the k-th diagonal; tril(A, k) on and below. */
static cr_status build_triu(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    return build_tri(arena, "triu", true, args, nargs, g);
}

static cr_status build_tril(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    return build_tri(arena, "tril", false, args, nargs, g);
}

/* The order of sort: NaN last, as Julia's isless orders them (-0.0 and 0.0 equal). */
static bool sort_less(double a, double b)
{
    return isnan(b) ? !isnan(a) : a < b;
}

/* The sorting permutation of a real vector. */
static cr_status sort_perm(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                           int64_t **perm, size_t *n)
{
    const cr_array *v;
    cr_status st = float_array(arena, who, args, nargs, 0, &v);
    if (st != CR_OK)
        return st;
    if (v->ndim != 1 || v->dtype == CR_DT_C128)
        return CR__FAIL(arena, CR_EINVAL, "%s: expected a real vector", who);
    const cr_array *d;
    st = cr__dense(arena, v, CR_DT_F64, &d);
    if (st != CR_OK)
        return st;
    *n = v->shape[0];
    *perm = cr_arena_alloc(arena, (*n ? *n : 1) * sizeof **perm, _Alignof(int64_t));
    int64_t *tmp = cr_arena_alloc(arena, (*n ? *n : 1) * sizeof *tmp, _Alignof(int64_t));
    if (*perm == NULL || tmp == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < *n; i++)
        (*perm)[i] = (int64_t)i;
    cr__sort_index(*perm, tmp, *n, d->data, sort_less);
    return CR_OK;
}

/* sort(v): v's elements in ascending order (stable; NaN last). */
static cr_status build_sort(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    cr_status st = cr__nargs(arena, "sort", nargs, 1, 1);
    size_t n = 0;
    int64_t *perm = NULL;
    if (st == CR_OK)
        st = sort_perm(arena, "sort", args, nargs, &perm, &n);
    if (st != CR_OK)
        return st;
    g->ndim = 1;
    g->shape[0] = n;
    g->m = n;
    g->lin = perm;
    return CR_OK;
}

/* partialsort(v, k): the k-th smallest element (0-based), a scalar. */
static cr_status build_partialsort(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    cr_status st = cr__nargs(arena, "partialsort", nargs, 2, 2);
    size_t n = 0;
    int64_t *perm = NULL, k = 0;
    if (st == CR_OK)
        st = cr__int_arg(arena, "partialsort", &args[1], &k);
    if (st == CR_OK)
        st = sort_perm(arena, "partialsort", args, nargs, &perm, &n);
    if (st != CR_OK)
        return st;
    if (k < 0 || (uint64_t)k >= n)
        return CR__FAIL(arena, CR_EINVAL, "partialsort: k = %lld out of range for %zu element%s",
                        (long long)k, n, CR__S(n));
    g->ndim = 0;
    g->m = 1;
    g->lin = perm + k;
    g->scalar = true;
    return CR_OK;
}

/* vcat(A...): concatenation along the first dimension (vectors: one longer vector). */
static cr_status build_vcat(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    if (nargs < 1 || nargs > G_MAX_IN)
        return CR__FAIL(arena, CR_EINVAL, "vcat: takes 1 to %d array%s", G_MAX_IN, CR__S(G_MAX_IN));
    cr_value a[G_MAX_IN + 1];
    a[0] = cr_value_i64(0);
    memcpy(a + 1, args, nargs * sizeof *args);
    cr_status st = build_cat(arena, a, nargs + 1, g);
    for (size_t j = 0; j < g->nin; j++)
        g->argi[j] = j;
    return st;
}

/* hcat(A...): matrices side by side (cat along dimension 1); vectors become the columns
 * of a matrix, as in Julia. */
static cr_status build_hcat(cr_arena *arena, const cr_value *args, size_t nargs, gmap *g)
{
    if (nargs < 1 || nargs > G_MAX_IN)
        return CR__FAIL(arena, CR_EINVAL, "hcat: takes 1 to %d array%s", G_MAX_IN, CR__S(G_MAX_IN));
    const cr_array *A0;
    cr_status st = float_array(arena, "hcat", args, nargs, 0, &A0);
    if (st != CR_OK)
        return st;
    if (A0->ndim != 1) {
        cr_value a[G_MAX_IN + 1];
        a[0] = cr_value_i64(1);
        memcpy(a + 1, args, nargs * sizeof *args);
        st = build_cat(arena, a, nargs + 1, g);
        for (size_t j = 0; j < g->nin; j++)
            g->argi[j] = j;
        return st;
    }
    size_t n = A0->shape[0];
    for (size_t j = 0; j < nargs; j++) {
        const cr_array *A;
        st = float_array(arena, "hcat", args, nargs, j, &A);
        if (st != CR_OK)
            return st;
        if (A->ndim != 1 || A->shape[0] != n)
            return CR__FAIL(arena, CR_ESHAPE, "hcat: vectors of different lengths");
        g->argi[j] = j;
    }
    g->nin = nargs;
    g->ndim = 2;
    g->shape[0] = n;
    g->shape[1] = nargs;
    if ((st = gmap_alloc(arena, "hcat", g, true)) != CR_OK)
        return st;
    for (size_t k = 0; k < g->m; k++) {
        g->src[k] = (uint8_t)(k % nargs);
        g->lin[k] = (int64_t)(k / nargs);
    }
    return CR_OK;
}

/* ---- The generic rules ------------------------------------------------------------------ */

typedef struct gather_env {
    gmap g;
    const cr_value *args; /* copied below */
    cr_value in[G_MAX_IN];
    cr_project *proj[G_MAX_IN];
    cr_dtype wdt;
    const char *name;
} gather_env;

/* The inputs of a map: the data arguments (arg 0 when the builder set none). */
static void gmap_inputs(gmap *g)
{
    if (g->nin == 0) {
        g->nin = 1;
        g->argi[0] = 0;
    }
}

/* The values of the data inputs in the work dtype, contiguous (a scalar as one element). */
static cr_status inputs_work(cr_arena *arena, const gmap *g, const cr_value *args, cr_dtype wdt,
                             const cr_array **w)
{
    for (size_t j = 0; j < g->nin; j++) {
        const cr_value *v = &args[g->argi[j]];
        cr_status st;
        if (v->kind == CR_KIND_ARRAY) {
            st = cr__dense(arena, v->u.arr, wdt, &w[j]);
        } else {
            cr_array *s;
            st = cr__scalar_array(arena, wdt, cr__scalar_of(v), &s);
            w[j] = s;
        }
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

/* out[k] = in_{src k}[lin k] or 0, in the work dtype. */
static cr_status gather(cr_arena *arena, const gmap *g, const cr_array *const *in, cr_dtype wdt,
                        cr_array **out)
{
    cr_status st = cr__new(arena, wdt, g->ndim, g->shape, false, out);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < g->m; k++) {
        size_t j = g->src != NULL ? g->src[k] : 0;
        int64_t l = g->lin[k];
        if (wdt == CR_DT_C128)
            ((cr_complex *)(*out)->data)[k] =
                l < 0 || in[j] == NULL ? 0 : ((const cr_complex *)in[j]->data)[l];
        else
            ((double *)(*out)->data)[k] =
                l < 0 || in[j] == NULL ? 0 : ((const double *)in[j]->data)[l];
    }
    return CR_OK;
}

static cr_status gather_forward(cr_arena *arena, const gop *op, const cr_value *args, size_t nargs,
                                gmap *g, cr_dtype *dt, cr_dtype *wdt, cr_array **w)
{
    memset(g, 0, sizeof *g);
    cr_status st = op->build(arena, args, nargs, g);
    if (st != CR_OK)
        return st;
    gmap_inputs(g);
    cr_dtype d = (cr_dtype)0;
    for (size_t j = 0; j < g->nin; j++)
        d = cr__promote(d, cr__value_dtype(&args[g->argi[j]]));
    *dt = d == 0 ? CR_DT_F64 : d;
    *wdt = cr__work(*dt);
    const cr_array *in[G_MAX_IN];
    st = inputs_work(arena, g, args, *wdt, in);
    return st != CR_OK ? st : gather(arena, g, in, *wdt, w);
}

typedef struct gather_thunk {
    const gather_env *e;
    const cr_array *gy;
    size_t j;
} gather_thunk;

/* The cotangent of input j: zeros with Ȳ scatter-added at the gathered positions. */
static cr_status gather_give(cr_arena *arena, const gather_env *e, const cr_array *gy, size_t j,
                             cr_tangent *out)
{
    const gmap *g = &e->g;
    const cr_value *v = &e->in[j];
    size_t n = arg_numel(v);
    cr_array *r = NULL;
    cr_status st = v->kind == CR_KIND_ARRAY ? cr__new_like(arena, e->wdt, v->u.arr, true, &r)
                                            : cr__new(arena, e->wdt, 1, &n, true, &r);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < g->m; k++) {
        if (g->lin[k] < 0 || (g->src != NULL && g->src[k] != j))
            continue;
        if (e->wdt == CR_DT_C128)
            ((cr_complex *)r->data)[g->lin[k]] += ((const cr_complex *)gy->data)[k];
        else
            ((double *)r->data)[g->lin[k]] += ((const double *)gy->data)[k];
    }
    if (v->kind != CR_KIND_ARRAY)
        return cr_project_apply(arena, e->proj[j], cr__scalar_tangent(e->wdt, cr__load(r, 0)), out);
    return cr__give(arena, e->proj[j], r, out);
}

static cr_status gather_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    gather_thunk *t = env;
    return gather_give(arena, t->e, t->gy, t->j, out);
}

static cr_status gather_pullback(CR__PULLBACK_PARAMS)
{
    gather_env *e = env;
    cr__dx_none(dx, nx);
    const cr_array *gy;
    cr_status st = cr__tan_array(arena, e->name, *dy, e->g.ndim, e->g.shape, e->wdt, &gy);
    if (st != CR_OK)
        return st;
    size_t ndiff = 0;
    for (size_t j = 0; j < e->g.nin; j++)
        ndiff += cr__is_diff(&e->in[j]);
    for (size_t j = 0; j < e->g.nin; j++) {
        cr_tangent *slot = &dx[e->g.argi[j] + 1];
        if (!cr__is_diff(&e->in[j]))
            continue;
        if (gy == NULL) {
            *slot = cr_tangent_zero();
            continue;
        }
        if (ndiff == 1) {
            st = gather_give(arena, e, gy, j, slot);
        } else {
            CR__ARENA_NEW(arena, gather_thunk, t);
            *t = (gather_thunk){e, gy, j};
            st = cr__thunk(arena, gather_thunk_fn, NULL, t, e->name, slot);
        }
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status gather_rrule(CR__RRULE_PARAMS)
{
    const gop *op = f->u.func.fn->udata;
    CR__ARENA_ZNEW(arena, gather_env, e);
    cr_dtype dt = CR_DT_F64;
    cr_array *w, *o;
    cr_status st = gather_forward(arena, op, args, nargs, &e->g, &dt, &e->wdt, &w);
    if (st == CR_OK)
        st = cr__cast(arena, w, dt, &o);
    if (st != CR_OK)
        return st;
    *y = e->g.scalar ? cr__scalar_value(dt, cr__load(w, 0)) : cr_value_array(o);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    e->name = op->pb_name;
    for (size_t j = 0; j < e->g.nin; j++) {
        e->in[j] = args[e->g.argi[j]];
        st = cr_project_new(arena, &e->in[j], &e->proj[j]);
        if (st != CR_OK)
            return st;
    }
    *pb = (cr_pullback){gather_pullback, e, op->pb_name, nargs + 1};
    return CR_OK;
}

/* frule: the tangents gathered the same way. */
static cr_status gather_frule(CR__FRULE_PARAMS)
{
    const gop *op = f->u.func.fn->udata;
    gmap g;
    cr_dtype dt = CR_DT_F64, wdt = CR_DT_F64;
    cr_array *w, *o;
    cr_status st = gather_forward(arena, op, args, nargs, &g, &dt, &wdt, &w);
    if (st == CR_OK)
        st = cr__cast(arena, w, dt, &o);
    if (st != CR_OK)
        return st;
    *y = g.scalar ? cr__scalar_value(dt, cr__load(w, 0)) : cr_value_array(o);
    const cr_array *t[G_MAX_IN] = {NULL};
    bool any = false;
    for (size_t j = 0; j < g.nin; j++) {
        size_t i = g.argi[j];
        if (!cr__is_diff(&args[i]))
            continue;
        if (args[i].kind == CR_KIND_ARRAY) {
            st = cr__dx_array(arena, op->name, dargs, args, i, wdt, &t[j]);
        } else {
            cr_complex v;
            bool nz;
            st = cr__tan_scalar(arena, op->name, dargs[i + 1], &v, &nz);
            if (st == CR_OK && nz) {
                cr_array *s;
                st = cr__scalar_array(arena, wdt, v, &s);
                t[j] = s;
            }
        }
        if (st != CR_OK)
            return st;
        any = any || t[j] != NULL;
    }
    if (!any) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *r = NULL;
    st = gather(arena, &g, t, wdt, &r);
    if (st == CR_OK && g.scalar) {
        *dy = cr__scalar_tangent(dt, cr__load(r, 0));
        return CR_OK;
    }
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* ---- diagm of pairs --------------------------------------------------------------------- */

/* diagm(k1, v1, k2, v2, ...) and diagm(m, n, k1, v1, ...): Julia's diagm(k1 => v1, ...) and
 * diagm(m, n, k1 => v1, ...), the matrix holding each vector v_i on its diagonal k_i (a
 * diagonal given twice holds the sum). Without a size the matrix is square, of order
 * max(length(v_i) + |k_i|); with one, every diagonal must fit in the m x n matrix. Linear in
 * the vectors: the pullback of v_i is the cotangent's diagonal k_i (its first length(v_i)
 * entries), the frule the diagm of the tangents. */
#define DGM_MAX (CR_SIG_MAX_ARGS / 2)

typedef struct dgm {
    size_t np;          /* pairs */
    int64_t k[DGM_MAX]; /* their diagonals */
    size_t vi[DGM_MAX]; /* the argument index of each vector */
    const cr_array *v[DGM_MAX];
    size_t shape[2];  /* m x n */
    cr_dtype dt, wdt; /* the promoted element type and its work type */
    cr_project *proj[DGM_MAX];
} dgm;

/* Whether diagm's arguments are pairs (an integer first, then a vector or two more
 * integers) rather than (v[, k]). */
static bool dgm_is_pairs(const cr_value *args, size_t nargs)
{
    return nargs >= 2 && (args[0].kind == CR_KIND_I64 || args[0].kind == CR_KIND_I32);
}

/* The row-major index of element t of diagonal k of an m x n matrix with n columns. */
static size_t dgm_pos(int64_t k, size_t t, size_t n)
{
    uint64_t ak = cr__abs_u64(k);
    return k >= 0 ? t * n + t + (size_t)ak : (t + (size_t)ak) * n + t;
}

static cr_status dgm_parse(cr_arena *arena, const cr_value *args, size_t nargs, dgm *d)
{
    memset(d, 0, sizeof *d);
    cr_ctx *ctx = cr_arena_ctx(arena);
    bool sized = nargs >= 3 && args[1].kind != CR_KIND_ARRAY;
    size_t first = sized ? 2 : 0;
    if ((nargs - first) % 2 != 0 || nargs == first)
        return CR__FAIL(arena, CR_EINVAL,
                        "diagm: expected pairs of a diagonal and a vector (k1, v1, k2, v2, ...), "
                        "after the size m, n if given");
    d->np = (nargs - first) / 2;
    int64_t mn[2] = {0, 0};
    cr_status st = CR_OK;
    for (size_t a = 0; a < first && st == CR_OK; a++)
        if ((st = cr__int_arg(arena, "diagm", &args[a], &mn[a])) == CR_OK)
            st = cr__ck_extent(ctx, "diagm", a == 0 ? "row count" : "column count", mn[a],
                               &d->shape[a]);
    size_t mmax = 0, nmax = 0;
    cr_dtype dt = (cr_dtype)0;
    for (size_t i = 0, ka = first; i < d->np && st == CR_OK; i++, ka += 2) {
        d->vi[i] = ka + 1;
        if ((st = cr__int_arg(arena, "diagm", &args[ka], &d->k[i])) != CR_OK ||
            (st = float_array(arena, "diagm", args, nargs, ka + 1, &d->v[i])) != CR_OK)
            break;
        if (d->v[i]->ndim != 1)
            return CR__FAIL(arena, CR_ESHAPE, "diagm: argument %zu must be a vector", ka + 2);
        uint64_t ak = cr__abs_u64(d->k[i]);
        if (ak > CR__MAX_BYTES)
            return CR__FAIL(arena, CR_EOVERFLOW, "diagm: diagonal %lld overflows (at most %zu)",
                            (long long)d->k[i], CR__MAX_BYTES);
        size_t len = d->v[i]->shape[0], rows, cols;
        if ((st = cr__ck_add(ctx, "diagm", len, d->k[i] < 0 ? (size_t)ak : 0, &rows)) != CR_OK ||
            (st = cr__ck_add(ctx, "diagm", len, d->k[i] > 0 ? (size_t)ak : 0, &cols)) != CR_OK)
            break;
        mmax = rows > mmax ? rows : mmax;
        nmax = cols > nmax ? cols : nmax;
        dt = cr__promote(dt, (cr_dtype)d->v[i]->dtype);
    }
    if (st != CR_OK)
        return st;
    if (!sized)
        d->shape[0] = d->shape[1] = mmax > nmax ? mmax : nmax;
    else if (mmax > d->shape[0] || nmax > d->shape[1])
        return CR__FAIL(arena, CR_ESHAPE,
                        "diagm: the diagonals need a %zu x %zu matrix, the size given is %zu x %zu",
                        mmax, nmax, d->shape[0], d->shape[1]);
    d->dt = dt;
    d->wdt = cr__work(dt);
    return CR_OK;
}

/* out (m x n, work dtype, zeroed) += the vectors x[i] on their diagonals (x[i] NULL: none). */
static void dgm_scatter(const dgm *d, const cr_array *const *x, cr_array *out)
{
    for (size_t i = 0; i < d->np; i++) {
        if (x[i] == NULL)
            continue;
        for (size_t t = 0; t < d->v[i]->shape[0]; t++) {
            ptrdiff_t p = (ptrdiff_t)dgm_pos(d->k[i], t, d->shape[1]);
            cr__store(out, p, cr__load(out, p) + cr__load(x[i], (ptrdiff_t)t));
        }
    }
}

/* The matrix of the vectors x[i] (work dtype, contiguous) cast to the output dtype. */
static cr_status dgm_matrix(cr_arena *arena, const dgm *d, const cr_array *const *x, cr_array **out)
{
    cr_array *w;
    cr_status st = cr__new(arena, d->wdt, 2, d->shape, true, &w);
    if (st != CR_OK)
        return st;
    dgm_scatter(d, x, w);
    return cr__cast(arena, w, d->dt, out);
}

static cr_status dgm_forward(cr_arena *arena, const cr_value *args, size_t nargs, dgm *d,
                             cr_value *y)
{
    cr_status st = dgm_parse(arena, args, nargs, d);
    const cr_array *x[DGM_MAX] = {NULL};
    for (size_t i = 0; i < d->np && st == CR_OK; i++)
        st = cr__dense(arena, d->v[i], d->wdt, &x[i]);
    cr_array *o;
    if (st == CR_OK && (st = dgm_matrix(arena, d, x, &o)) == CR_OK)
        *y = cr_value_array(o);
    return st;
}

/* v̄_i = the cotangent's diagonal k_i, its first length(v_i) entries. */
static cr_status dgm_pullback(CR__PULLBACK_PARAMS)
{
    const dgm *d = env;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st = cr__tan_array(arena, "diagm_pullback", *dy, 2, d->shape, d->wdt, &g);
    for (size_t i = 0; i < d->np && st == CR_OK; i++) {
        cr_array *r = NULL;
        if (g != NULL && (st = cr__new(arena, d->wdt, 1, d->v[i]->shape, false, &r)) != CR_OK)
            break;
        for (size_t t = 0; r != NULL && t < d->v[i]->shape[0]; t++)
            cr__store(r, (ptrdiff_t)t, cr__load(g, (ptrdiff_t)dgm_pos(d->k[i], t, d->shape[1])));
        st = cr__give(arena, d->proj[i], r, &dx[d->vi[i] + 1]);
    }
    return st;
}

static cr_status dgm_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_NEW(arena, dgm, d);
    cr_status st = dgm_forward(arena, args, nargs, d, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    for (size_t i = 0; i < d->np && st == CR_OK; i++)
        st = cr_project_new(arena, &args[d->vi[i]], &d->proj[i]);
    if (st == CR_OK)
        *pb = (cr_pullback){dgm_pullback, d, "diagm_pullback", nargs + 1};
    return st;
}

/* frule: ẏ = diagm(k1, v̇1, k2, v̇2, ...). */
static cr_status dgm_frule(CR__FRULE_PARAMS)
{
    dgm d;
    cr_status st = dgm_forward(arena, args, nargs, &d, y);
    const cr_array *t[DGM_MAX] = {NULL};
    bool any = false;
    for (size_t i = 0; i < d.np && st == CR_OK; i++) {
        st = cr__dx_array(arena, "diagm", dargs, args, d.vi[i], d.wdt, &t[i]);
        any = any || t[i] != NULL;
    }
    if (st != CR_OK || !any) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *o;
    if ((st = dgm_matrix(arena, &d, t, &o)) == CR_OK)
        *dy = cr_tangent_array(o);
    return st;
}

/* diagm's primal and rrule: the pairs, or the gather map of diagm(v[, k]). */
static cr_status diagm_rrule(CR__RRULE_PARAMS)
{
    return (dgm_is_pairs(args, nargs) ? dgm_rrule : gather_rrule)(cfg, arena, f, args, nargs, y, pb,
                                                                  udata);
}

#define GATHER_FN(NAME, STR, ARITY)                                                             \
    static const gop NAME##_gop = {{gather_rrule}, STR, STR "_pullback", build_##NAME};         \
    static const cr_function NAME##_function = {                                                \
        .name = (STR), .arity = (ARITY), .primal = cr__primal_via_rrule, .udata = &NAME##_gop}; \
    const cr_value cr_fn_##NAME = {.kind = CR_KIND_FUNC, .u.func = {&NAME##_function, NULL}};

GATHER_FN(reverse, "reverse", -1)
GATHER_FN(circshift, "circshift", 2)
GATHER_FN(repeat, "repeat", 2)
GATHER_FN(cat, "cat", -1)
GATHER_FN(stack, "stack", -1)
GATHER_FN(fill, "fill", 2)
GATHER_FN(dropdims, "dropdims", 2)
GATHER_FN(diag, "diag", -1)
static const gop diagm_gop = {{diagm_rrule}, "diagm", "diagm_pullback", build_diagm};
static const cr_function diagm_function = {
    .name = "diagm", .arity = -1, .primal = cr__primal_via_rrule, .udata = &diagm_gop};
const cr_value cr_fn_diagm = {.kind = CR_KIND_FUNC, .u.func = {&diagm_function, NULL}};
GATHER_FN(triu, "triu", -1)
GATHER_FN(tril, "tril", -1)
GATHER_FN(sort, "sort", 1)
GATHER_FN(partialsort, "partialsort", 2)
GATHER_FN(vcat, "vcat", -1)
GATHER_FN(hcat, "hcat", -1)

/* ---- Test registrations ---------------------------------------------------------------- */

typedef enum {
    GS_REVERSE,
    GS_CIRCSHIFT,
    GS_REPEAT,
    GS_CAT,
    GS_STACK,
    GS_FILL,
    GS_DROPDIMS,
    GS_MATRIX,
    GS_VECTOR,
    GS_SORT,
    GS_HCAT,
    GS_DIAGM_PAIRS,
    GS_DIAGM_SIZED
} gsample;

/* diagm of pairs: diagonals in [-2, 2] (a diagonal may repeat: the sum), vectors of 1 to 3
 * entries of random dtypes; with a size, up to one row and one column more than needed. */
static cr_status sample_diagm_pairs(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                                    bool sized)
{
    size_t first = sized ? 2 : 0, mmax = 0, nmax = 0;
    for (size_t a = first; a + 1 < nargs; a += 2) {
        int64_t k = (int64_t)cr__rng_below(rng, 5) - 2;
        size_t len = 1 + cr__rng_below(rng, 3), ak = (size_t)(k < 0 ? -k : k);
        cr_array *v;
        cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 1, &len, -2, 2, &v);
        if (st != CR_OK)
            return st;
        args[a] = cr_value_i64(k);
        args[a + 1] = cr_value_array(v);
        mmax = len + (k < 0 ? ak : 0) > mmax ? len + (k < 0 ? ak : 0) : mmax;
        nmax = len + (k > 0 ? ak : 0) > nmax ? len + (k > 0 ? ak : 0) : nmax;
    }
    if (sized) {
        args[0] = cr_value_i64((int64_t)(mmax + cr__rng_below(rng, 2)));
        args[1] = cr_value_i64((int64_t)(nmax + cr__rng_below(rng, 2)));
    }
    return CR_OK;
}

static cr_status sample_gather(CR__SAMPLE_PARAMS)
{
    gsample kind = (gsample)(uintptr_t)env;
    static const size_t s23[2] = {2, 3}, s34[2] = {3, 4}, s1[3] = {2, 1, 3};
    cr_dtype dt = cr__rng_dtype(rng);
    cr_array *A, *B, *Iv;
    cr_status st;
    switch (kind) {
    case GS_REVERSE:
    case GS_CIRCSHIFT:
    case GS_REPEAT: {
        st = cr__rand_array(arena, rng, dt, 2, s23, -2, 2, &A);
        if (st != CR_OK)
            return st;
        args[0] = cr_value_array(A);
        if (nargs == 1)
            return CR_OK;
        int64_t v[2] = {kind == GS_REPEAT ? 2 : -1, kind == GS_REPEAT ? 1 : 4};
        if (kind == GS_REVERSE) {
            args[1] = cr_value_i64((int64_t)cr__rng_below(rng, 2));
            return CR_OK;
        }
        st = cr__i64_array(arena, 2, v, &Iv);
        if (st == CR_OK)
            args[1] = cr_value_array(Iv);
        return st;
    }
    case GS_CAT:
    case GS_STACK: {
        size_t off = kind == GS_CAT ? 1 : 0;
        int64_t dim = (int64_t)cr__rng_below(rng, 2);
        if (kind == GS_CAT)
            args[0] = cr_value_i64(dim);
        size_t sb[2] = {2, 3};
        if (kind == GS_CAT)
            sb[dim] = 1 + cr__rng_below(rng, 3);
        st = cr__rand_array(arena, rng, dt, 2, s23, -2, 2, &A);
        if (st == CR_OK)
            st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 2, sb, -2, 2, &B);
        if (st != CR_OK)
            return st;
        args[off] = cr_value_array(A);
        args[off + 1] = cr_value_array(B);
        return CR_OK;
    }
    case GS_FILL: {
        args[0] = dt == CR_DT_C128 ? cr_value_c128(cr__c(0.5, -1)) : cr_value_f64(1.25);
        int64_t v[2] = {2, 3};
        st = cr__i64_array(arena, 2, v, &Iv);
        if (st == CR_OK)
            args[1] = cr_value_array(Iv);
        return st;
    }
    case GS_DROPDIMS:
        st = cr__rand_array(arena, rng, dt, 3, s1, -2, 2, &A);
        if (st != CR_OK)
            return st;
        args[0] = cr_value_array(A);
        args[1] = cr_value_i64(1);
        return CR_OK;
    case GS_MATRIX:
        st = cr__rand_array(arena, rng, dt, 2, s34, -2, 2, &A);
        if (st != CR_OK)
            return st;
        args[0] = cr_value_array(A);
        if (nargs == 2)
            args[1] = cr_value_i64((int64_t)cr__rng_below(rng, 4) - 1);
        return CR_OK;
    case GS_HCAT: {
        /* Two vectors (columns of the result) or two matrices with 2 rows. */
        bool vec = cr__rng_below(rng, 2) != 0;
        size_t n3 = 3, sb[2] = {2, 1 + cr__rng_below(rng, 3)};
        st = cr__rand_array(arena, rng, dt, vec ? 1 : 2, vec ? &n3 : s23, -2, 2, &A);
        if (st == CR_OK)
            st = cr__rand_array(arena, rng, cr__rng_dtype(rng), vec ? 1 : 2, vec ? &n3 : sb, -2, 2,
                                &B);
        if (st != CR_OK)
            return st;
        args[0] = cr_value_array(A);
        args[1] = cr_value_array(B);
        return CR_OK;
    }
    case GS_SORT: {
        /* Distinct values 1/8 apart at least: finite differences never reorder them. */
        size_t n = 5;
        st = cr__new(arena, dt == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64, 1, &n, false, &A);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < n; i++) {
            size_t j = cr__rng_below(rng, i + 1);
            double vi = (double)i / 4 + cr__rng_unif(rng, 0, 0.125) - 0.5;
            if (j != i)
                cr__store(A, (ptrdiff_t)i, cr__load(A, (ptrdiff_t)j));
            cr__store(A, (ptrdiff_t)j, vi);
        }
        args[0] = cr_value_array(A);
        if (nargs == 2)
            args[1] = cr_value_i64((int64_t)cr__rng_below(rng, n));
        return CR_OK;
    }
    case GS_DIAGM_PAIRS:
    case GS_DIAGM_SIZED:
        return sample_diagm_pairs(arena, rng, args, nargs, kind == GS_DIAGM_SIZED);
    case GS_VECTOR: {
        size_t n = 3;
        st = cr__rand_array(arena, rng, dt, 1, &n, -2, 2, &A);
        if (st != CR_OK)
            return st;
        args[0] = cr_value_array(A);
        if (nargs == 2)
            args[1] = cr_value_i64((int64_t)cr__rng_below(rng, 3) - 1);
        return CR_OK;
    }
    }
    return CR_EINVAL;
}

#define GT(KIND)                                                  \
    {                                                             \
        .sample = sample_gather, .env = (void *)(uintptr_t)(KIND) \
    }
static const cr_rule_test k_gt[13] = {
    GT(GS_REVERSE), GT(GS_CIRCSHIFT),   GT(GS_REPEAT),     GT(GS_CAT),    GT(GS_STACK),
    GT(GS_FILL),    GT(GS_DROPDIMS),    GT(GS_MATRIX),     GT(GS_VECTOR), GT(GS_SORT),
    GT(GS_HCAT),    GT(GS_DIAGM_PAIRS), GT(GS_DIAGM_SIZED)};

cr_status cr__array_register_gather(cr_registry *reg)
{
    const cr_argspec FA = {CR__M_FARRAY, NULL}, RA = {CR__M_RARRAY, NULL}, IN = {CR_M_INT, NULL},
                     IA = {CR_M_INT | CR_M_A_INT, NULL}, NU = {CR__M_NUM, NULL};
    const struct {
        const cr_function *fn;
        cr_argspec a[3];
        size_t n;
        bool variadic;
        gsample t;
        uint32_t lin; /* the cr_linearity class */
    } k[] = {
        {&reverse_function, {FA}, 1, false, GS_REVERSE, CR_LINEAR},
        {&reverse_function, {FA, IA}, 2, false, GS_REVERSE, CR_LINEAR},
        {&circshift_function, {FA, IA}, 2, false, GS_CIRCSHIFT, CR_LINEAR},
        {&repeat_function, {FA, IA}, 2, false, GS_REPEAT, CR_LINEAR},
        {&cat_function, {IN, FA, FA}, 3, true, GS_CAT, CR_LINEAR},
        {&stack_function, {FA, FA}, 2, true, GS_STACK, CR_LINEAR},
        {&fill_function, {NU, IA}, 2, false, GS_FILL, CR_LINEAR},
        {&dropdims_function, {FA, IA}, 2, false, GS_DROPDIMS, CR_LINEAR},
        {&diag_function, {FA}, 1, false, GS_MATRIX, CR_LINEAR},
        {&diag_function, {FA, IN}, 2, false, GS_MATRIX, CR_LINEAR},
        {&diagm_function, {FA}, 1, false, GS_VECTOR, CR_LINEAR},
        {&diagm_function, {FA, IN}, 2, false, GS_VECTOR, CR_LINEAR},
        {&triu_function, {FA}, 1, false, GS_MATRIX, CR_LINEAR},
        {&triu_function, {FA, IN}, 2, false, GS_MATRIX, CR_LINEAR},
        {&tril_function, {FA}, 1, false, GS_MATRIX, CR_LINEAR},
        {&tril_function, {FA, IN}, 2, false, GS_MATRIX, CR_LINEAR},
        {&sort_function, {RA}, 1, false, GS_SORT, CR_PIECEWISE_LINEAR},
        {&partialsort_function, {RA, IN}, 2, false, GS_SORT, CR_PIECEWISE_LINEAR},
        {&vcat_function, {FA, FA}, 2, true, GS_STACK, CR_LINEAR},
        {&hcat_function, {FA, FA}, 2, true, GS_HCAT, CR_LINEAR},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        cr_status st = cr__add_rule_so(reg, k[i].fn, k[i].a, k[i].n, k[i].variadic, gather_frule,
                                       gather_rrule, &k_gt[k[i].t], k[i].lin, NULL);
        if (st != CR_OK)
            return st;
    }
    /* diagm of 1 to 4 pairs (k, v), and of 1 to 3 after a size (m, n) */
    cr_argspec a[CR_SIG_MAX_ARGS];
    for (size_t lead = 0; lead <= 2; lead += 2)
        for (size_t n = lead + 2; n <= CR_SIG_MAX_ARGS; n += 2) {
            bool sized = lead != 0;
            for (size_t i = 0; i < n; i++)
                a[i] = i < lead || (i - lead) % 2 == 0 ? IN : FA;
            cr_status st =
                cr__add_rule_so(reg, &diagm_function, a, n, false, dgm_frule, dgm_rrule,
                                &k_gt[sized ? GS_DIAGM_SIZED : GS_DIAGM_PAIRS], CR_LINEAR, NULL);
            if (st != CR_OK)
                return st;
        }
    return CR_OK;
}
