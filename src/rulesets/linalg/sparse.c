/*
 * Sparse matrices in compressed-column form (cr_sparse, rules_sparse.h) and their rules:
 * construction from COO triplets (sparse) and from a diagonal (spdiagm), findnz, the dense
 * matrix, products with dense vectors and matrices, and det/logdet/logabsdet through the
 * dense rules. A sparse argument's cotangent is a structural tangent whose nzval field lives
 * on the argument's pattern (ChainRules' ProjectTo of a SparseMatrixCSC).
 */
#include <stdlib.h>

#include <chainrules/rules_sparse.h>

#include "../../core/checked.h"
#include "../array/family.h"
#include "linalg_impl.h"

/* Whether an argument has coordinates to perturb: a float number, a non-empty float
 * array, a sparse matrix with stored entries. */
static bool sparse_perturbable(const cr_value *v)
{
    if (v->kind == CR_KIND_STRUCT)
        return v->u.obj.type == &cr_sparse_type && v->u.obj.ptr != NULL &&
               cr_array_numel(&((const cr_sparse *)v->u.obj.ptr)->nzval) > 0;
    return cr__arg_perturbable(v);
}

static const cr_field k_sparse_fields[5] = {
    {"m", offsetof(cr_sparse, m), CR_KIND_I64, NULL},
    {"n", offsetof(cr_sparse, n), CR_KIND_I64, NULL},
    {"colptr", offsetof(cr_sparse, colptr), CR_KIND_ARRAY, NULL},
    {"rowval", offsetof(cr_sparse, rowval), CR_KIND_ARRAY, NULL},
    {"nzval", offsetof(cr_sparse, nzval), CR_KIND_ARRAY, NULL},
};
const cr_type cr_sparse_type = {"cr_sparse", sizeof(cr_sparse), 5, k_sparse_fields};

enum { NZVAL_FIELD = 4 };

/* ---- Reading a sparse argument --------------------------------------------------------- */

/* A validated sparse matrix: its sizes, its index arrays (contiguous copies) and its values
 * in the work dtype. */
typedef struct spm {
    const cr_sparse *S;
    size_t m, n, nnz;
    int64_t *colptr, *rowval;
    const cr_array *val; /* contiguous, work dtype */
    cr_dtype dt;         /* nzval's dtype */
} spm;

cr_status cr__sparse_pattern(cr_arena *arena, const char *who, const cr_value *v, cr__sparse_pat *s)
{
    if (v->kind != CR_KIND_STRUCT || v->u.obj.type != &cr_sparse_type || v->u.obj.ptr == NULL)
        return CR__FAIL(arena, CR_EINVAL, "%s: expected a cr_sparse matrix, got a %s", who,
                        v->kind == CR_KIND_STRUCT && v->u.obj.type != NULL &&
                                v->u.obj.type->name != NULL
                            ? v->u.obj.type->name
                            : cr_kind_name(v->kind));
    const cr_sparse *S = v->u.obj.ptr;
    s->S = S;
    if (S->m < 0 || S->n < 0 || S->n == INT64_MAX)
        return CR__FAIL(arena, CR_EINVAL, "%s: a sparse matrix of size %lld x %lld", who,
                        (long long)S->m, (long long)S->n);
    s->m = (size_t)S->m;
    s->n = (size_t)S->n;
    cr_value cp = cr_value_array((cr_array *)&S->colptr);
    cr_value rv = cr_value_array((cr_array *)&S->rowval);
    size_t ncp, nrv;
    cr_status st = cr__int_list(arena, who, &cp, &s->colptr, &ncp);
    if (st == CR_OK)
        st = cr__int_list(arena, who, &rv, &s->rowval, &nrv);
    if (st != CR_OK)
        return st;
    if (ncp != s->n + 1)
        return CR__FAIL(arena, CR_EINVAL, "%s: colptr has %zu entries, %zu expected (n + 1)", who,
                        ncp, s->n + 1);
    const cr_array *nz = &S->nzval;
    if (!cr_dtype_is_float((cr_dtype)nz->dtype) || nz->ndim != 1 || nz->structure != CR_MAT_DENSE)
        return CR__FAIL(arena, CR_EINVAL, "%s: nzval must be a 1-d f64, f32 or c128 array", who);
    if (nz->shape[0] != nrv)
        return CR__FAIL(arena, CR_EINVAL, "%s: %zu values (nzval) for %zu row indices (rowval)",
                        who, nz->shape[0], nrv);
    if (s->colptr[0] != 0 || s->colptr[s->n] < 0 || (uint64_t)s->colptr[s->n] != nrv)
        return CR__FAIL(arena, CR_EINVAL,
                        "%s: colptr must start at 0 and end at the number of entries (%zu)", who,
                        nrv);
    /* monotone from 0 to nnz: every column's range is inside rowval */
    for (size_t j = 0; j < s->n; j++)
        if (s->colptr[j + 1] < s->colptr[j])
            return CR__FAIL(arena, CR_EINVAL, "%s: colptr decreases at column %zu", who, j);
    for (size_t j = 0; j < s->n; j++) {
        for (int64_t p = s->colptr[j]; p < s->colptr[j + 1]; p++) {
            int64_t r = s->rowval[p];
            if (r < 0 || (uint64_t)r >= s->m)
                return CR__FAIL(arena, CR_EINVAL, "%s: row index %lld outside 0..%zu (column %zu)",
                                who, (long long)r, s->m, j);
            if (p > s->colptr[j] && r <= s->rowval[p - 1])
                return CR__FAIL(arena, CR_EINVAL,
                                "%s: row indices of column %zu are not strictly increasing", who,
                                j);
        }
    }
    s->nnz = nrv;
    return CR_OK;
}

static cr_status sp_read(cr_arena *arena, const char *who, const cr_value *v, spm *s)
{
    cr__sparse_pat pat;
    cr_status st = cr__sparse_pattern(arena, who, v, &pat);
    if (st != CR_OK)
        return st;
    s->S = pat.S;
    s->m = pat.m;
    s->n = pat.n;
    s->nnz = pat.nnz;
    s->colptr = pat.colptr;
    s->rowval = pat.rowval;
    s->dt = (cr_dtype)pat.S->nzval.dtype;
    return cr__dense(arena, &pat.S->nzval, cr__work(s->dt), &s->val);
}

/* A new sparse matrix m x n from sorted, distinct triplets (col-major order: colptr built by
 * counting), values `val` (work array) rounded to dt. */
static cr_status sp_build(cr_arena *arena, size_t m, size_t n, size_t nnz, const int64_t *rows,
                          const int64_t *cols, const cr_array *val, cr_dtype dt, cr_value *y)
{
    CR__ARENA_ZNEW(arena, cr_sparse, S);
    size_t np1 = n + 1;
    cr_array *cp, *rv, *o;
    cr_status st = cr__new(arena, CR_DT_I64, 1, &np1, true, &cp);
    if (st == CR_OK)
        st = cr__new(arena, CR_DT_I64, 1, &nnz, false, &rv);
    if (st == CR_OK)
        st = cr__cast(arena, val, dt, &o);
    if (st != CR_OK)
        return st;
    int64_t *c = cp->data, *r = rv->data;
    for (size_t k = 0; k < nnz; k++) {
        c[cols[k] + 1]++;
        r[k] = rows[k];
    }
    for (size_t j = 0; j < n; j++)
        c[j + 1] += c[j];
    S->m = (int64_t)m;
    S->n = (int64_t)n;
    S->colptr = *cp;
    S->rowval = *rv;
    S->nzval = *o;
    S->colptr.flags = S->rowval.flags = S->nzval.flags = 0;
    *y = cr_value_struct(&cr_sparse_type, S);
    return CR_OK;
}

static cr_status sp_gather(cr_arena *arena, const char *who, const spm *s, cr_tangent t,
                           cr_array **out);

/* The nzval part of a (co)tangent of the sparse matrix s: a contiguous work array of nnz
 * values, or NULL for a zero. A structural tangent gives its nzval field, a dense m x n
 * array its entries at the stored positions (ProjectTo of a SparseMatrixCSC); a tangent of
 * another kind is refused. */
static cr_status sp_tan(cr_arena *arena, const char *who, cr_tangent t, const spm *s,
                        const cr_array **out)
{
    *out = NULL;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK)
        return st;
    if (t.tag == CR_TAN_ZERO || t.tag == CR_TAN_NONE || t.tag == CR_TAN_ABSENT)
        return CR_OK;
    if (t.tag == CR_TAN_ARRAY) {
        cr_array *g;
        st = sp_gather(arena, who, s, t, &g);
        *out = g;
        return st;
    }
    if (t.tag != CR_TAN_STRUCT || t.u.s.type != &cr_sparse_type)
        return CR__FAIL(arena, CR_ETANGENT,
                        "%s: the tangent of a sparse matrix must be a structural tangent of "
                        "cr_sparse (its nzval field) or a dense m x n array, got %s",
                        who, cr_tag_name((cr_tag)t.tag));
    return cr__tan_array(arena, who, cr_tangent_field(t, NZVAL_FIELD), 1, &s->nnz, cr__work(s->dt),
                         out);
}

/* The structural tangent of a sparse matrix with the stored values' tangents `raw` (a work
 * array of nnz values, or NULL for zero), projected by p (the projector of nzval). */
static cr_status sp_give(cr_arena *arena, const cr_project *p, cr_array *raw, cr_tangent *out)
{
    if (raw == NULL) {
        *out = cr_tangent_zero();
        return CR_OK;
    }
    cr_tangent nz;
    cr_status st = cr__give(arena, p, raw, &nz);
    if (st != CR_OK)
        return st;
    static const char *const names[1] = {"nzval"};
    return cr_tangent_struct(arena, &cr_sparse_type, names, &nz, 1, out);
}

/* The projector of s's nzval (real, f32 or complex stored values). */
static cr_status sp_projector(cr_arena *arena, const spm *s, cr_project **out)
{
    cr_value v = cr_value_array((cr_array *)&s->S->nzval);
    return cr_project_new(arena, &v, out);
}

/* ---- sparse(I, J, V[, m, n]) and spdiagm([k,] v): values scattered onto a pattern ------------
 */

/* The result's stored value slot[k] receives V[k] (NO_SLOT: a zero of sparse(A), not
 * stored); the pullback gathers V̄[k] from there. */
#define NO_SLOT SIZE_MAX

typedef struct scatter_env {
    const char *who;
    size_t vi; /* index of V among the arguments */
    const cr_array *V;
    cr_project *pV;
    size_t K;     /* number of values */
    size_t nnz;   /* stored entries of the result */
    size_t *slot; /* K slots */
    cr_dtype dt;  /* the result's dtype */
    spm out;      /* the result's pattern (for sp_tan) */
    uint32_t nd;  /* nondiff_mask of the arguments */
} scatter_env;

typedef struct trip {
    int64_t i, j;
    size_t k;
} trip;

static int trip_cmp(const void *a, const void *b)
{
    const trip *x = a, *y = b;
    if (x->j != y->j)
        return x->j < y->j ? -1 : 1;
    if (x->i != y->i)
        return x->i < y->i ? -1 : 1;
    return x->k < y->k ? -1 : (x->k > y->k);
}

/* Sorts the K triplets (I, J) into column order, finds the distinct positions and fills
 * e->slot, then builds the result with the summed values. */
static cr_status scatter_build(cr_arena *arena, scatter_env *e, size_t m, size_t n,
                               const int64_t *Ir, const int64_t *Jc, const cr_array *Vw,
                               cr_value *y)
{
    size_t K = e->K, bytes;
    if (!cr__mul_size(K ? K : 1, sizeof(trip), &bytes))
        return CR__FAIL(arena, CR_EOVERFLOW, "%s: %zu entries", e->who, K);
    trip *t = cr_arena_alloc(arena, bytes, _Alignof(trip));
    e->slot = cr_arena_calloc(arena, K ? K : 1, sizeof *e->slot, _Alignof(size_t));
    int64_t *ri = cr_arena_calloc(arena, K ? K : 1, sizeof *ri, _Alignof(int64_t));
    int64_t *ci = cr_arena_calloc(arena, K ? K : 1, sizeof *ci, _Alignof(int64_t));
    if (t == NULL || e->slot == NULL || ri == NULL || ci == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < K; k++)
        t[k] = (trip){Ir[k], Jc[k], k};
    if (K > 1)
        qsort(t, K, sizeof *t, trip_cmp);
    size_t nnz = 0;
    for (size_t k = 0; k < K; k++) {
        if (k == 0 || t[k].i != t[k - 1].i || t[k].j != t[k - 1].j) {
            ri[nnz] = t[k].i;
            ci[nnz] = t[k].j;
            nnz++;
        }
        e->slot[t[k].k] = nnz - 1;
    }
    e->nnz = nnz;
    cr_array *val;
    cr_status st = cr__new(arena, cr__work(e->dt), 1, &nnz, true, &val);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < K; k++)
        cr__wset(val, e->slot[k], cr__wget(val, e->slot[k]) + cr__wget(Vw, k));
    st = sp_build(arena, m, n, nnz, ri, ci, val, e->dt, y);
    if (st == CR_OK)
        st = sp_read(arena, e->who, y, &e->out);
    return st;
}

/* sparse(A): the nonzero entries of a dense matrix (a vector: a column), in column order;
 * slot[k] of A's element k (row-major) is its stored slot, or NO_SLOT for a zero. */
static cr_status sparse_of_dense(cr_arena *arena, const cr_value *args, scatter_env *e, cr_value *y)
{
    const char *who = "sparse";
    e->vi = 0;
    cr_status st = cr__array_arg(arena, who, args, 1, 0, &e->V);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)e->V->dtype) || e->V->ndim < 1 || e->V->ndim > 2)
        return CR__FAIL(arena, CR_EINVAL, "sparse: A must be an f64, f32 or c128 matrix or vector");
    size_t m = e->V->shape[0], n = e->V->ndim == 2 ? e->V->shape[1] : 1;
    e->dt = (cr_dtype)e->V->dtype;
    const cr_array *Aw;
    if ((st = cr__dense(arena, e->V, cr__work(e->dt), &Aw)) != CR_OK)
        return st;
    size_t K = cr_array_numel(Aw), nz = 0;
    for (size_t k = 0; k < K; k++)
        if (cr__wget(Aw, k) != 0)
            nz++;
    int64_t *Ir = cr_arena_calloc(arena, nz ? nz : 1, sizeof *Ir, _Alignof(int64_t));
    int64_t *Jc = cr_arena_calloc(arena, nz ? nz : 1, sizeof *Jc, _Alignof(int64_t));
    size_t *pos = cr_arena_calloc(arena, nz ? nz : 1, sizeof *pos, _Alignof(size_t));
    size_t *full = cr_arena_calloc(arena, K ? K : 1, sizeof *full, _Alignof(size_t));
    cr_array *Vn;
    if (Ir == NULL || Jc == NULL || pos == NULL || full == NULL)
        return CR__ALLOC_STATUS(arena);
    if ((st = cr__new(arena, cr__work(e->dt), 1, &nz, false, &Vn)) != CR_OK)
        return st;
    size_t q = 0;
    for (size_t k = 0; k < K; k++) {
        full[k] = NO_SLOT;
        if (cr__wget(Aw, k) == 0)
            continue;
        Ir[q] = (int64_t)(k / n);
        Jc[q] = (int64_t)(k % n);
        pos[q] = k;
        cr__wset(Vn, q++, cr__wget(Aw, k));
    }
    e->K = nz;
    if ((st = scatter_build(arena, e, m, n, Ir, Jc, Vn, y)) != CR_OK)
        return st;
    for (size_t k = 0; k < nz; k++)
        full[pos[k]] = e->slot[k];
    e->slot = full;
    e->K = K;
    return CR_OK;
}

/* sparse's arguments: I, J (i64), V (float), and m, n or their defaults; or a dense A. */
static cr_status sparse_forward(cr_arena *arena, const cr_value *args, size_t nargs, scatter_env *e,
                                cr_value *y)
{
    const char *who = "sparse";
    e->who = who;
    e->vi = 2;
    if (nargs == 1)
        return sparse_of_dense(arena, args, e, y);
    cr_status st = cr__nargs(arena, who, nargs, 1, 5);
    if (st == CR_OK && nargs == 2)
        st = CR__FAIL(arena, CR_EINVAL, "sparse: give A, or I, J, V[, m, n]");
    if (st == CR_OK && nargs == 4)
        st = CR__FAIL(arena, CR_EINVAL, "sparse: give both sizes m and n, or neither");
    int64_t *Ir, *Jc;
    size_t nI, nJ;
    if (st == CR_OK)
        st = cr__int_list(arena, who, &args[0], &Ir, &nI);
    if (st == CR_OK)
        st = cr__int_list(arena, who, &args[1], &Jc, &nJ);
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, 2, &e->V);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)e->V->dtype))
        return CR__FAIL(arena, CR_EINVAL, "sparse: V must be an f64, f32 or c128 array");
    e->K = cr_array_numel(e->V);
    if (nI != e->K || nJ != e->K)
        return CR__FAIL(arena, CR_ESHAPE, "sparse: %zu row and %zu column indices for %zu values",
                        nI, nJ, e->K);
    int64_t m = 0, n = 0;
    if (nargs == 5) {
        st = cr__int_arg(arena, who, &args[3], &m);
        if (st == CR_OK)
            st = cr__int_arg(arena, who, &args[4], &n);
        if (st != CR_OK)
            return st;
        if (m < 0 || n < 0 || n == INT64_MAX)
            return CR__FAIL(arena, CR_EINVAL, "sparse: a size %lld x %lld", (long long)m,
                            (long long)n);
    } else {
        for (size_t k = 0; k < e->K; k++) {
            if (Ir[k] >= m)
                m = Ir[k] == INT64_MAX ? INT64_MAX : Ir[k] + 1;
            if (Jc[k] >= n)
                n = Jc[k] == INT64_MAX ? INT64_MAX : Jc[k] + 1;
        }
        if (n == INT64_MAX)
            return CR__FAIL(arena, CR_EINVAL, "sparse: a column index of INT64_MAX");
    }
    for (size_t k = 0; k < e->K; k++)
        if (Ir[k] < 0 || Ir[k] >= m || Jc[k] < 0 || Jc[k] >= n)
            return CR__FAIL(arena, CR_EINVAL,
                            "sparse: entry %zu at (%lld, %lld) outside the %lld x %lld matrix", k,
                            (long long)Ir[k], (long long)Jc[k], (long long)m, (long long)n);
    e->dt = (cr_dtype)e->V->dtype;
    const cr_array *Vw;
    st = cr__dense(arena, e->V, cr__work(e->dt), &Vw);
    if (st != CR_OK)
        return st;
    return scatter_build(arena, e, (size_t)m, (size_t)n, Ir, Jc, Vw, y);
}

/* spdiagm([k,] v): I = 0..len-1 shifted below (k < 0) or J shifted right (k > 0). */
static cr_status spdiagm_forward(cr_arena *arena, const cr_value *args, size_t nargs,
                                 scatter_env *e, cr_value *y)
{
    const char *who = "spdiagm";
    e->who = who;
    cr_status st = cr__nargs(arena, who, nargs, 1, 2);
    int64_t k = 0;
    if (st == CR_OK && nargs == 2)
        st = cr__int_arg(arena, who, &args[0], &k);
    e->vi = nargs - 1;
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, e->vi, &e->V);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)e->V->dtype) || e->V->ndim != 1)
        return CR__FAIL(arena, CR_EINVAL, "spdiagm: v must be a 1-d f64, f32 or c128 array");
    e->K = e->V->shape[0];
    uint64_t ak = cr__abs_u64(k);
    size_t N;
    if (ak > (uint64_t)INT64_MAX - 1 || !cr__add_size(e->K, (size_t)ak, &N) ||
        N >= (size_t)INT64_MAX)
        return CR__FAIL(arena, CR_EOVERFLOW, "spdiagm: diagonal %lld of %zu entries", (long long)k,
                        e->K);
    int64_t *Ir = cr_arena_calloc(arena, e->K ? e->K : 1, sizeof *Ir, _Alignof(int64_t));
    int64_t *Jc = cr_arena_calloc(arena, e->K ? e->K : 1, sizeof *Jc, _Alignof(int64_t));
    if (Ir == NULL || Jc == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < e->K; i++) {
        Ir[i] = (int64_t)i + (k < 0 ? (int64_t)ak : 0);
        Jc[i] = (int64_t)i + (k > 0 ? (int64_t)ak : 0);
    }
    e->dt = (cr_dtype)e->V->dtype;
    const cr_array *Vw;
    st = cr__dense(arena, e->V, cr__work(e->dt), &Vw);
    if (st != CR_OK)
        return st;
    return scatter_build(arena, e, N, N, Ir, Jc, Vw, y);
}

/* V̄[k] = S̄'s stored value at slot[k]. */
static cr_status scatter_pullback_body(CR__PULLBACK_PARAMS)
{
    const scatter_env *e = env;
    const cr_array *g;
    cr_status st = sp_tan(arena, e->who, *dy, &e->out, &g);
    if (st != CR_OK || g == NULL)
        return st;
    cr_array *raw;
    st = cr__new(arena, cr__work(e->dt), e->V->ndim, e->V->shape, false, &raw);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < e->K; k++)
        cr__wset(raw, k, e->slot[k] == NO_SLOT ? 0 : cr__wget(g, e->slot[k]));
    return cr__give(arena, e->pV, raw, &dx[e->vi + 1]);
}

CR__MASKED_PULLBACK(scatter, scatter_env)

typedef cr_status (*scatter_fwd)(cr_arena *, const cr_value *, size_t, scatter_env *, cr_value *);

static cr_status scatter_rrule(cr_arena *arena, scatter_fwd fwd, const cr_value *args, size_t nargs,
                               cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__ARENA_ZNEW(arena, scatter_env, e);
    cr_status st = fwd(arena, args, nargs, e, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    st = cr_project_new(arena, &args[e->vi], &e->pV);
    if (st != CR_OK)
        return st;
    e->nd = cr__nondiff_mask(args, nargs, sparse_perturbable);
    *pb = (cr_pullback){scatter_pullback, e,
                        fwd == sparse_forward ? "sparse_pullback" : "spdiagm_pullback", nargs + 1};
    return CR_OK;
}

/* frule: Ṡ's stored value slot[k] accumulates V̇[k]. */
static cr_status scatter_frule(cr_arena *arena, scatter_fwd fwd, const cr_tangent *dargs,
                               const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    scatter_env e;
    memset(&e, 0, sizeof e);
    cr_status st = fwd(arena, args, nargs, &e, y);
    const cr_array *dv = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, e.who, dargs, args, e.vi, cr__work(e.dt), &dv);
    if (st != CR_OK || dv == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *raw;
    st = cr__new(arena, cr__work(e.dt), 1, &e.nnz, true, &raw);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < e.K; k++)
        if (e.slot[k] != NO_SLOT)
            cr__wset(raw, e.slot[k], cr__wget(raw, e.slot[k]) + cr__wget(dv, k));
    cr_project *p;
    st = sp_projector(arena, &e.out, &p);
    return st == CR_OK ? sp_give(arena, p, raw, dy) : st;
}

CR__PARAM_RULES(sparse, scatter_rrule, scatter_frule, sparse_forward, -1)
CR__PARAM_RULES(spdiagm, scatter_rrule, scatter_frule, spdiagm_forward, -1)

/* ---- findnz(S) and sparse_dense(S): the stored values read out --------------------------- */

typedef struct tup3 {
    cr_array a, b, c;
} tup3;
static const cr_field k_tup3_fields[3] = {{NULL, offsetof(tup3, a), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(tup3, b), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(tup3, c), CR_KIND_ARRAY, NULL}};
static const cr_type k_tup3 = {"tuple(array,array,array)", sizeof(tup3), 3, k_tup3_fields};

typedef struct read_env {
    spm s;
    cr_project *p;
    bool dense;  /* sparse_dense (else findnz) */
    uint32_t nd; /* nondiff_mask of the arguments */
} read_env;

/* The dense m x n work matrix (row-major) of the stored values val on s's pattern. */
static cr_status sp_densify(cr_arena *arena, const char *who, const spm *s, const cr_array *val,
                            cr_array **out)
{
    size_t shape[2] = {s->m, s->n}, numel;
    if (!cr__shape_numel(2, shape, cr_dtype_size(cr__work(s->dt)), &numel))
        return CR__FAIL(arena, CR_EOVERFLOW, "%s: a dense %zu x %zu matrix", who, s->m, s->n);
    cr_status st = cr__new(arena, cr__work(s->dt), 2, shape, true, out);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < s->n; j++)
        for (int64_t p = s->colptr[j]; p < s->colptr[j + 1]; p++)
            cr__wset(*out, (size_t)s->rowval[p] * s->n + j, cr__wget(val, (size_t)p));
    return CR_OK;
}

/* The stored entries' part of a dense m x n (co)tangent: g[p] = G[row(p), col(p)]. */
static cr_status sp_gather(cr_arena *arena, const char *who, const spm *s, cr_tangent t,
                           cr_array **out)
{
    *out = NULL;
    size_t shape[2] = {s->m, s->n};
    const cr_array *G;
    cr_status st = cr__tan_array(arena, who, t, 2, shape, cr__work(s->dt), &G);
    if (st != CR_OK || G == NULL)
        return st;
    st = cr__new(arena, cr__work(s->dt), 1, &s->nnz, false, out);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < s->n; j++)
        for (int64_t p = s->colptr[j]; p < s->colptr[j + 1]; p++)
            cr__wset(*out, (size_t)p, cr__wget(G, (size_t)s->rowval[p] * s->n + j));
    return CR_OK;
}

static cr_status read_forward(cr_arena *arena, const cr_value *args, size_t nargs, read_env *e,
                              cr_value *y)
{
    const char *who = e->dense ? "sparse_dense" : "findnz";
    cr_status st = cr__nargs(arena, who, nargs, 1, 1);
    if (st == CR_OK)
        st = sp_read(arena, who, &args[0], &e->s);
    if (st != CR_OK)
        return st;
    if (e->dense) {
        cr_array *D, *o;
        st = sp_densify(arena, who, &e->s, e->s.val, &D);
        if (st == CR_OK)
            st = cr__cast(arena, D, e->s.dt, &o);
        if (st == CR_OK)
            *y = cr_value_array(o);
        return st;
    }
    CR__ARENA_ZNEW(arena, tup3, t);
    cr_array *Ir, *Jc, *V;
    st = cr__new(arena, CR_DT_I64, 1, &e->s.nnz, false, &Ir);
    if (st == CR_OK)
        st = cr__new(arena, CR_DT_I64, 1, &e->s.nnz, false, &Jc);
    if (st == CR_OK)
        st = cr__cast(arena, e->s.val, e->s.dt, &V);
    if (st != CR_OK)
        return st;
    if (V == e->s.val || V->data == e->s.S->nzval.data) {
        /* a copy: the result never aliases the argument */
        cr_array *c;
        if ((st = cr_array_copy(arena, V, &c)) != CR_OK)
            return st;
        V = c;
    }
    for (size_t j = 0; j < e->s.n; j++)
        for (int64_t p = e->s.colptr[j]; p < e->s.colptr[j + 1]; p++) {
            ((int64_t *)Ir->data)[p] = e->s.rowval[p];
            ((int64_t *)Jc->data)[p] = (int64_t)j;
        }
    t->a = *Ir;
    t->b = *Jc;
    t->c = *V;
    t->a.flags = t->b.flags = t->c.flags = 0;
    *y = cr_value_struct(&k_tup3, t);
    return CR_OK;
}

static cr_status read_pullback_body(CR__PULLBACK_PARAMS)
{
    const read_env *e = env;
    const char *who = e->dense ? "sparse_dense" : "findnz";
    cr_array *raw = NULL;
    cr_status st;
    if (e->dense) {
        st = sp_gather(arena, who, &e->s, *dy, &raw);
    } else {
        cr_tangent t;
        st = cr_tangent_unthunk(*dy, &t);
        if (st != CR_OK)
            return st;
        if (t.tag != CR_TAN_ZERO && t.tag != CR_TAN_NONE && t.tag != CR_TAN_STRUCT)
            return CR__FAIL(arena, CR_ETANGENT, "findnz: a %s cotangent for a tuple",
                            cr_tag_name((cr_tag)t.tag));
        const cr_array *g = NULL;
        st = cr__tan_array(arena, who, cr_tangent_field(t, 2), 1, &e->s.nnz, cr__work(e->s.dt), &g);
        if (st == CR_OK && g != NULL)
            st = cr_array_copy(arena, g, &raw);
    }
    if (st != CR_OK)
        return st;
    return sp_give(arena, e->p, raw, &dx[1]);
}

CR__MASKED_PULLBACK(read, read_env)

static cr_status read_rrule(cr_arena *arena, bool dense, const cr_value *args, size_t nargs,
                            cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__ARENA_ZNEW(arena, read_env, e);
    e->dense = dense;
    cr_status st = read_forward(arena, args, nargs, e, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    st = sp_projector(arena, &e->s, &e->p);
    if (st != CR_OK)
        return st;
    e->nd = cr__nondiff_mask(args, nargs, sparse_perturbable);
    *pb = (cr_pullback){read_pullback, e, dense ? "sparse_dense_pullback" : "findnz_pullback",
                        nargs + 1};
    return CR_OK;
}

/* frule: the same reading applied to Ṡ's stored values. */
static cr_status read_frule(cr_arena *arena, bool dense, const cr_tangent *dargs,
                            const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    read_env e;
    memset(&e, 0, sizeof e);
    e.dense = dense;
    cr_status st = read_forward(arena, args, nargs, &e, y);
    const cr_array *ds = NULL;
    if (st == CR_OK)
        st = sp_tan(arena, dense ? "sparse_dense" : "findnz", dargs[1], &e.s, &ds);
    if (st != CR_OK || ds == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *o;
    if (dense) {
        cr_array *D;
        st = sp_densify(arena, "sparse_dense", &e.s, ds, &D);
        if (st == CR_OK)
            st = cr__cast(arena, D, e.s.dt, &o);
        if (st == CR_OK)
            *dy = cr_tangent_array(o);
        return st;
    }
    st = cr__cast(arena, ds, e.s.dt, &o);
    if (st == CR_OK && o == ds) {
        cr_array *c;
        st = cr_array_copy(arena, ds, &c);
        o = c;
    }
    if (st != CR_OK)
        return st;
    cr_tangent f[3] = {cr_tangent_none(), cr_tangent_none(), cr_tangent_array(o)};
    return cr_tangent_struct(arena, &k_tup3, NULL, f, 3, dy);
}

#define READ_RULES(NAME, DENSE) CR__PARAM_RULES(NAME, read_rrule, read_frule, DENSE, 1)

READ_RULES(findnz, false)
READ_RULES(sparse_dense, true)

/* ---- sparse_mul(S, B[, trans]) ------------------------------------------------------------ */

/* Y += op(S) B over the stored entries, op by (transpose, conjugate); B is rows x nc
 * (row-major work array), Y is the result (row-major work array, zeroed by the caller). */
static void spmm(const spm *s, const cr_array *val, bool tr, bool cj, const cr_array *B, size_t nc,
                 cr_array *Y)
{
    if (val->dtype == CR_DT_F64 && B->dtype == CR_DT_F64 && Y->dtype == CR_DT_F64) {
        /* real: plain double loops (no complex products, no dtype tests per element) */
        const double *vp = val->data, *bp = B->data;
        double *yp = Y->data;
        for (size_t j = 0; j < s->n; j++)
            for (int64_t p = s->colptr[j]; p < s->colptr[j + 1]; p++) {
                size_t i = (size_t)s->rowval[p];
                const double *brow = bp + (tr ? i : j) * nc;
                double *yrow = yp + (tr ? j : i) * nc, v = vp[p];
                for (size_t c = 0; c < nc; c++)
                    yrow[c] += v * brow[c];
            }
        return;
    }
    for (size_t j = 0; j < s->n; j++)
        for (int64_t p = s->colptr[j]; p < s->colptr[j + 1]; p++) {
            size_t i = (size_t)s->rowval[p];
            cr_complex v = cr__wget(val, (size_t)p);
            if (cj)
                v = conj(v);
            size_t in = tr ? i : j, out = tr ? j : i;
            for (size_t c = 0; c < nc; c++)
                cr__wset(Y, out * nc + c, cr__wget(Y, out * nc + c) + v * cr__wget(B, in * nc + c));
        }
}

cr_status cr__sparse_trans(cr_arena *arena, const char *who, const cr_value *v, char *trans)
{
    int64_t t;
    cr_status st = cr__int_arg(arena, who, v, &t);
    if (st != CR_OK)
        return st;
    if (t >= 'a' && t <= 'z')
        t -= 'a' - 'A';
    if (t != 'N' && t != 'T' && t != 'C')
        return CR__FAIL(arena, CR_EINVAL, "%s: trans must be 'N', 'T' or 'C'", who);
    *trans = (char)t;
    return CR_OK;
}

/* The optional trans flag of sparse_mul and sparse_rmul (argument 3), 'N' when absent. */
static cr_status sp_trans(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                          char *trans)
{
    *trans = 'N';
    return nargs < 3 ? CR_OK : cr__sparse_trans(arena, who, &args[2], trans);
}

/* *dt the dtype of the product of s and the dense B, *wdt its work dtype; s's values converted
 * to it. */
static cr_status sp_work(cr_arena *arena, spm *s, const cr_array *B, cr_dtype *dt, cr_dtype *wdt)
{
    *dt = cr__promote(s->dt, (cr_dtype)B->dtype);
    *wdt = cr__work(*dt);
    if (*wdt == cr__work(s->dt))
        return CR_OK;
    const cr_array *v;
    cr_status st = cr__dense(arena, &s->S->nzval, *wdt, &v);
    if (st == CR_OK)
        s->val = v;
    return st;
}

/* The cotangent of the stored values of s from a product's: S̄[p] = Σ_c x(X[a, c]) y(Y[b, c])
 * for the entry (i, j) stored at p, (a, b) = (i, j), or (j, i) when swap; x and y conjugate
 * when cx and cy. X and Y are row-major work arrays (dtype wdt) of nc columns. */
static cr_status sp_pattern_bar(cr_arena *arena, const spm *s, cr_dtype wdt, const cr_array *X,
                                bool cx, const cr_array *Y, bool cy, bool swap, size_t nc,
                                cr_array **out)
{
    cr_status st = cr__new(arena, wdt, 1, &s->nnz, false, out);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < s->n; j++)
        for (int64_t p = s->colptr[j]; p < s->colptr[j + 1]; p++) {
            size_t i = (size_t)s->rowval[p], a = swap ? j : i, b = swap ? i : j;
            if (wdt == CR_DT_F64) { /* real: no conjugates */
                const double *u = (const double *)X->data + a * nc,
                             *w = (const double *)Y->data + b * nc;
                double acc = 0;
                for (size_t c = 0; c < nc; c++)
                    acc += u[c] * w[c];
                ((double *)(*out)->data)[p] = acc;
                continue;
            }
            cr_complex acc = 0;
            for (size_t c = 0; c < nc; c++) {
                cr_complex x = cr__wget(X, a * nc + c), y = cr__wget(Y, b * nc + c);
                acc += (cx ? conj(x) : x) * (cy ? conj(y) : y);
            }
            cr__wset(*out, (size_t)p, acc);
        }
    return CR_OK;
}

/* The end of the rrule of sparse_mul or sparse_rmul whose forward pass returned st: unless
 * only the primal is asked, the projectors of the sparse argument s (into *pS) and of B
 * (args[ib], into *pB), the arguments' nondiff mask *nd and *pb = pbv. */
static cr_status sp_mul_end(cr_arena *arena, cr_status st, const void *udata, const cr_value *args,
                            size_t nargs, const spm *s, cr_project **pS, size_t ib, cr_project **pB,
                            uint32_t *nd, cr_pullback pbv, cr_pullback *pb)
{
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    if ((st = sp_projector(arena, s, pS)) != CR_OK ||
        (st = cr_project_new(arena, &args[ib], pB)) != CR_OK)
        return st;
    *nd = cr__nondiff_mask(args, nargs, sparse_perturbable);
    *pb = pbv;
    return CR_OK;
}

/* NAME_rrule: the forward pass FWD into a new ENV `e`, then sp_mul_end with B at argument IB
 * and the pullback PB; the function value cr_fn_NAME. */
#define SP_MUL_RULE(NAME, ENV, FWD, IB, PB)                                                  \
    static cr_status NAME##_rrule(CR__RRULE_PARAMS)                                          \
    {                                                                                        \
        CR__ARENA_ZNEW(arena, ENV, e);                                                       \
        return sp_mul_end(arena, FWD, udata, args, nargs, &e->s, &e->pS, IB, &e->pB, &e->nd, \
                          (cr_pullback){PB, e, #NAME "_pullback", nargs + 1}, pb);           \
    }                                                                                        \
    CR__ARRAY_FN(NAME, #NAME, -1)

typedef struct mul_env {
    spm s;
    char trans;
    const cr_array *B;  /* work dtype, contiguous */
    const cr_array *Bv; /* the argument */
    size_t nc;          /* columns of B (1 for a vector) */
    size_t yshape[2];
    size_t yndim;
    cr_dtype wdt;
    cr_project *pS, *pB;
    uint32_t nd; /* nondiff_mask of the arguments */
} mul_env;

static cr_status mul_forward(cr_arena *arena, const cr_value *args, size_t nargs, mul_env *e,
                             cr_value *y, cr_array **Yw)
{
    const char *who = "sparse_mul";
    cr_status st = cr__nargs(arena, who, nargs, 2, 3);
    if (st == CR_OK)
        st = sp_read(arena, who, &args[0], &e->s);
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, 1, &e->Bv);
    if (st == CR_OK)
        st = sp_trans(arena, who, args, nargs, &e->trans);
    if (st != CR_OK)
        return st;
    const cr_array *B = e->Bv;
    if (!cr_dtype_is_float((cr_dtype)B->dtype) || B->ndim < 1 || B->ndim > 2)
        return CR__FAIL(arena, CR_EINVAL, "sparse_mul: B must be a float vector or matrix");
    bool tr = e->trans != 'N';
    size_t rows = tr ? e->s.n : e->s.m, inner = tr ? e->s.m : e->s.n;
    if (B->shape[0] != inner)
        return CR__FAIL(arena, CR_ESHAPE, "sparse_mul: op(S) has %zu columns, B has %zu rows",
                        inner, B->shape[0]);
    e->nc = B->ndim == 2 ? B->shape[1] : 1;
    e->yndim = B->ndim;
    e->yshape[0] = rows;
    e->yshape[1] = e->nc;
    cr_dtype dt;
    if ((st = sp_work(arena, &e->s, B, &dt, &e->wdt)) != CR_OK ||
        (st = cr__dense(arena, B, e->wdt, &e->B)) != CR_OK)
        return st;
    cr_array *Y, *o;
    if ((st = cr__new(arena, e->wdt, e->yndim, e->yshape, true, &Y)) != CR_OK)
        return st;
    spmm(&e->s, e->s.val, tr, e->trans == 'C', e->B, e->nc, Y);
    if ((st = cr__cast(arena, Y, dt, &o)) != CR_OK)
        return st;
    *y = cr_value_array(o);
    if (Yw != NULL)
        *Yw = Y;
    return CR_OK;
}

/* B̄ = op(S)ᴴ Ȳ; S̄ on the pattern: 'N' Σ Ȳ[i,c] conj(B[j,c]), 'T' Σ conj(B[i,c]) Ȳ[j,c],
 * 'C' Σ B[i,c] conj(Ȳ[j,c]). */
static cr_status mul_pullback_body(CR__PULLBACK_PARAMS)
{
    const mul_env *e = env;
    const cr_array *G;
    cr_status st = cr__tan_array(arena, "sparse_mul", *dy, e->yndim, e->yshape, e->wdt, &G);
    if (st != CR_OK || G == NULL)
        return st;
    if (e->pB != NULL) {
        cr_array *Bb;
        if ((st = cr__new_like(arena, e->wdt, e->B, true, &Bb)) != CR_OK)
            return st;
        /* op 'N': Sᴴ; 'T': conj(S); 'C': S */
        spmm(&e->s, e->s.val, e->trans == 'N', e->trans != 'C', G, e->nc, Bb);
        if ((st = cr__give(arena, e->pB, Bb, &dx[2])) != CR_OK)
            return st;
    }
    /* 'N' Ȳ[i,c] conj(B[j,c]), 'T' conj(B[i,c]) Ȳ[j,c], 'C' B[i,c] conj(Ȳ[j,c]) */
    bool n = e->trans == 'N';
    cr_array *Sb;
    st = sp_pattern_bar(arena, &e->s, e->wdt, n ? G : e->B, e->trans == 'T', n ? e->B : G,
                        e->trans != 'T', false, e->nc, &Sb);
    return st != CR_OK ? st : sp_give(arena, e->pS, Sb, &dx[1]);
}

CR__MASKED_PULLBACK(mul, mul_env)

SP_MUL_RULE(sparse_mul, mul_env, mul_forward(arena, args, nargs, e, y, NULL), 1, mul_pullback)

/* frule: Ẏ = op(Ṡ) B + op(S) Ḃ. */
static cr_status sparse_mul_frule(CR__FRULE_PARAMS)
{
    mul_env e;
    memset(&e, 0, sizeof e);
    cr_status st = mul_forward(arena, args, nargs, &e, y, NULL);
    const cr_array *dS = NULL, *dB = NULL;
    if (st == CR_OK)
        st = sp_tan(arena, "sparse_mul", dargs[1], &e.s, &dS);
    if (st == CR_OK)
        st = cr__dx_array(arena, "sparse_mul", dargs, args, 1, e.wdt, &dB);
    if (st != CR_OK || (dS == NULL && dB == NULL)) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *Y, *o;
    if ((st = cr__new(arena, e.wdt, e.yndim, e.yshape, true, &Y)) != CR_OK)
        return st;
    bool tr = e.trans != 'N', cj = e.trans == 'C';
    if (dS != NULL) {
        const cr_array *v = dS;
        if (dS->dtype != e.wdt && (st = cr__dense(arena, dS, e.wdt, &v)) != CR_OK)
            return st;
        spmm(&e.s, v, tr, cj, e.B, e.nc, Y);
    }
    if (dB != NULL)
        spmm(&e.s, e.s.val, tr, cj, dB, e.nc, Y);
    st = cr__cast(arena, Y, (cr_dtype)y->u.arr->dtype, &o);
    if (st == CR_OK)
        *dy = cr_tangent_array(o);
    return st;
}

/* ---- sparse_rmul(B, S[, trans]): B op(S) ------------------------------------------------ */

/* Y = B M with M = op(S) is Yᵀ = Mᵀ Bᵀ: spmm on Bᵀ with Mᵀ = Sᵀ ('N'), S ('T'), conj(S) ('C'). */

/* A new row-major work array: the transpose of the r x c row-major work array X (1-d, of r
 * elements, when vec: c is 1). */
static cr_status transpose_of(cr_arena *arena, const cr_array *X, size_t r, size_t c, bool vec,
                              cr_array **out)
{
    size_t shape[2] = {c, r};
    cr_status st = cr__new(arena, (cr_dtype)X->dtype, 2, shape, false, out);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < c; j++)
            cr__wset(*out, j * r + i, cr__wget(X, i * c + j));
    if (vec) {
        (*out)->ndim = 1;
        (*out)->shape[0] = r;
        (*out)->strides[0] = 1;
    }
    return CR_OK;
}

typedef struct rmul_env {
    spm s;
    char trans;
    const cr_array *Bt; /* Bᵀ: p x r, work dtype */
    size_t r, p, q;     /* B is r x p, op(S) p x q */
    bool vec;           /* B (and Y) 1-d */
    cr_dtype wdt;
    cr_project *pS, *pB;
    uint32_t nd;
} rmul_env;

static cr_status rmul_forward(cr_arena *arena, const cr_value *args, size_t nargs, rmul_env *e,
                              cr_value *y)
{
    const char *who = "sparse_rmul";
    const cr_array *B;
    cr_status st = cr__nargs(arena, who, nargs, 2, 3);
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, 0, &B);
    if (st == CR_OK)
        st = sp_read(arena, who, &args[1], &e->s);
    if (st == CR_OK)
        st = sp_trans(arena, who, args, nargs, &e->trans);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)B->dtype) || B->ndim < 1 || B->ndim > 2)
        return CR__FAIL(arena, CR_EINVAL, "sparse_rmul: B must be a float vector or matrix");
    bool tr = e->trans != 'N';
    e->p = tr ? e->s.n : e->s.m;
    e->q = tr ? e->s.m : e->s.n;
    e->vec = B->ndim == 1;
    e->r = e->vec ? 1 : B->shape[0];
    size_t bp = B->shape[B->ndim - 1];
    if (bp != e->p)
        return CR__FAIL(arena, CR_ESHAPE, "sparse_rmul: B has %zu columns, op(S) has %zu rows", bp,
                        e->p);
    cr_dtype dt;
    const cr_array *Bw;
    cr_array *Bt, *Zt, *Y, *o;
    if ((st = sp_work(arena, &e->s, B, &dt, &e->wdt)) != CR_OK ||
        (st = cr__dense(arena, B, e->wdt, &Bw)) != CR_OK ||
        (st = transpose_of(arena, Bw, e->r, e->p, false, &Bt)) != CR_OK)
        return st;
    e->Bt = Bt;
    size_t zs[2] = {e->q, e->r};
    if ((st = cr__new(arena, e->wdt, 2, zs, true, &Zt)) != CR_OK)
        return st;
    /* Mᵀ: 'N' Sᵀ, 'T' S, 'C' conj(S) */
    spmm(&e->s, e->s.val, e->trans == 'N', e->trans == 'C', Bt, e->r, Zt);
    if ((st = transpose_of(arena, Zt, e->q, e->r, e->vec, &Y)) != CR_OK)
        return st;
    if ((st = cr__cast(arena, Y, dt, &o)) != CR_OK)
        return st;
    *y = cr_value_array(o);
    return CR_OK;
}

/* B̄ᵀ = conj(M) Ȳᵀ; S̄ on the pattern: 'N' Σ_c conj(B[c,i]) Ȳ[c,j], 'T' Σ_c conj(B[c,j])
 * Ȳ[c,i], 'C' Σ_c B[c,j] conj(Ȳ[c,i]). */
static cr_status rmul_pullback_body(CR__PULLBACK_PARAMS)
{
    const rmul_env *e = env;
    size_t ys[2] = {e->r, e->q};
    const cr_array *G;
    cr_status st = e->vec ? cr__tan_array(arena, "sparse_rmul", *dy, 1, &e->q, e->wdt, &G)
                          : cr__tan_array(arena, "sparse_rmul", *dy, 2, ys, e->wdt, &G);
    if (st != CR_OK || G == NULL)
        return st;
    cr_array *Gt, *Bbt, *Bb;
    if ((st = transpose_of(arena, G, e->r, e->q, false, &Gt)) != CR_OK)
        return st;
    size_t bs[2] = {e->p, e->r};
    if ((st = cr__new(arena, e->wdt, 2, bs, true, &Bbt)) != CR_OK)
        return st;
    /* conj(M): 'N' conj(S), 'T' conj(Sᵀ), 'C' Sᵀ */
    spmm(&e->s, e->s.val, e->trans != 'N', e->trans != 'C', Gt, e->r, Bbt);
    if ((st = transpose_of(arena, Bbt, e->p, e->r, e->vec, &Bb)) != CR_OK)
        return st;
    if ((st = cr__give(arena, e->pB, Bb, &dx[1])) != CR_OK)
        return st;
    /* B[c, k] is Bt[k, c]; Ȳ[c, k] is Gt[k, c]: 'N' conj(Bt[i,c]) Gt[j,c], 'T' conj(Bt[j,c])
     * Gt[i,c], 'C' Bt[j,c] conj(Gt[i,c]) */
    cr_array *Sb;
    st = sp_pattern_bar(arena, &e->s, e->wdt, e->Bt, e->trans != 'C', Gt, e->trans == 'C',
                        e->trans != 'N', e->r, &Sb);
    return st != CR_OK ? st : sp_give(arena, e->pS, Sb, &dx[2]);
}

CR__MASKED_PULLBACK(rmul, rmul_env)

SP_MUL_RULE(sparse_rmul, rmul_env, rmul_forward(arena, args, nargs, e, y), 0, rmul_pullback)

/* frule: Ẏ = Ḃ op(S) + B op(Ṡ), each as its transpose through spmm. */
static cr_status sparse_rmul_frule(CR__FRULE_PARAMS)
{
    rmul_env e;
    memset(&e, 0, sizeof e);
    cr_status st = rmul_forward(arena, args, nargs, &e, y);
    const cr_array *dB = NULL, *dS = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, "sparse_rmul", dargs, args, 0, e.wdt, &dB);
    if (st == CR_OK)
        st = sp_tan(arena, "sparse_rmul", dargs[2], &e.s, &dS);
    if (st != CR_OK || (dB == NULL && dS == NULL)) {
        *dy = cr_tangent_zero();
        return st;
    }
    size_t zs[2] = {e.q, e.r};
    cr_array *Zt, *Y, *o;
    if ((st = cr__new(arena, e.wdt, 2, zs, true, &Zt)) != CR_OK)
        return st;
    bool tr = e.trans == 'N', cj = e.trans == 'C';
    if (dB != NULL) {
        cr_array *dBt;
        if ((st = transpose_of(arena, dB, e.r, e.p, false, &dBt)) != CR_OK)
            return st;
        spmm(&e.s, e.s.val, tr, cj, dBt, e.r, Zt);
    }
    if (dS != NULL) {
        const cr_array *v = dS;
        if (dS->dtype != e.wdt && (st = cr__dense(arena, dS, e.wdt, &v)) != CR_OK)
            return st;
        spmm(&e.s, v, tr, cj, e.Bt, e.r, Zt);
    }
    if ((st = transpose_of(arena, Zt, e.q, e.r, e.vec, &Y)) != CR_OK)
        return st;
    st = cr__cast(arena, Y, (cr_dtype)y->u.arr->dtype, &o);
    if (st == CR_OK)
        *dy = cr_tangent_array(o);
    return st;
}

/* ---- det, logdet, logabsdet: the dense rules on the dense matrix --------------------------- */

typedef struct dense_env {
    const char *who;
    spm s;
    cr_pullback inner;
    cr_project *p;
    uint32_t nd; /* nondiff_mask of the arguments */
} dense_env;

/* The dense matrix of S (dtype of its values) as a value. */
static cr_status dense_arg(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                           spm *s, cr_value *out)
{
    cr_status st = cr__nargs(arena, who, nargs, 1, 1);
    if (st == CR_OK)
        st = sp_read(arena, who, &args[0], s);
    if (st != CR_OK)
        return st;
    if (s->m != s->n)
        return CR__FAIL(arena, CR_ESHAPE, "%s: a %zu x %zu matrix is not square", who, s->m, s->n);
    cr_array *D, *o;
    st = sp_densify(arena, who, s, s->val, &D);
    if (st == CR_OK)
        st = cr__cast(arena, D, s->dt, &o);
    if (st == CR_OK)
        *out = cr_value_array(o);
    return st;
}

static cr_status dense_pullback_body(CR__PULLBACK_PARAMS)
{
    const dense_env *e = env;
    cr_tangent inner[2];
    cr_status st = cr_pullback_call(arena, &e->inner, dy, inner, 2);
    cr_array *raw = NULL;
    if (st == CR_OK)
        st = sp_gather(arena, e->who, &e->s, inner[1], &raw);
    if (st != CR_OK)
        return st;
    return sp_give(arena, e->p, raw, &dx[1]);
}

CR__MASKED_PULLBACK(dense, dense_env)

static cr_status dense_rrule(const cr_config *cfg, cr_arena *arena, const char *who,
                             const char *pbname, const cr_value *fn, const cr_value *args,
                             size_t nargs, cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__ARENA_ZNEW(arena, dense_env, e);
    e->who = who;
    cr_value D;
    cr_status st = dense_arg(arena, who, args, nargs, &e->s, &D);
    if (st != CR_OK)
        return st;
    if (udata == CR__PRIMAL_ONLY)
        return cr_function_call(arena, fn, &D, 1, y);
    st = cr_rrule(cfg, arena, fn, &D, 1, y, &e->inner);
    if (st == CR_OK)
        st = sp_projector(arena, &e->s, &e->p);
    if (st != CR_OK)
        return st;
    e->nd = cr__nondiff_mask(args, nargs, sparse_perturbable);
    *pb = (cr_pullback){dense_pullback, e, pbname, nargs + 1};
    return CR_OK;
}

static cr_status dense_frule(const cr_config *cfg, cr_arena *arena, const char *who,
                             const cr_value *fn, const cr_tangent *dargs, const cr_value *args,
                             size_t nargs, cr_value *y, cr_tangent *dy)
{
    spm s;
    cr_value D;
    cr_status st = dense_arg(arena, who, args, nargs, &s, &D);
    const cr_array *ds = NULL;
    if (st == CR_OK)
        st = sp_tan(arena, who, dargs[1], &s, &ds);
    if (st != CR_OK)
        return st;
    cr_tangent din[2] = {cr_tangent_zero(), cr_tangent_zero()};
    if (ds != NULL) {
        cr_array *Dd, *o;
        st = sp_densify(arena, who, &s, ds, &Dd);
        if (st == CR_OK)
            st = cr__cast(arena, Dd, s.dt, &o);
        if (st != CR_OK)
            return st;
        din[1] = cr_tangent_array(o);
    }
    return cr_frule(cfg, arena, din, fn, &D, 1, y, dy);
}

#define DENSE_RULES(NAME, FN)                                                               \
    static cr_status NAME##_rrule(CR__RRULE_PARAMS)                                         \
    {                                                                                       \
        return dense_rrule(cfg, arena, #NAME, #NAME "_pullback", &(FN), args, nargs, y, pb, \
                           udata);                                                          \
    }                                                                                       \
    static cr_status NAME##_frule(CR__FRULE_PARAMS)                                         \
    {                                                                                       \
        return dense_frule(cfg, arena, #NAME, &(FN), dargs, args, nargs, y, dy);            \
    }                                                                                       \
    CR__ARRAY_FN(NAME, #NAME, 1)

DENSE_RULES(sparse_det, cr_fn_det)
DENSE_RULES(sparse_logdet, cr_fn_logdet)
DENSE_RULES(sparse_logabsdet, cr_fn_logabsdet)

/* ---- Test registrations ------------------------------------------------------------------- */

/* What a sampler makes. */
typedef enum sp_sample {
    SS_SPARSE,  /* COO triplets (some repeated), with or without sizes */
    SS_SPDIAGM, /* a diagonal, with or without its offset */
    SS_READ,    /* a random sparse matrix */
    SS_MUL,     /* a sparse matrix and a dense B, with or without trans */
    SS_RMUL,    /* a dense B and a sparse matrix, with or without trans */
    SS_DET,     /* a square sparse matrix; singular, 1 x 1 or empty now and then */
    SS_LOGDET,  /* a square sparse matrix with a positive determinant */
    SS_NONSING  /* a square nonsingular sparse matrix, 1 x 1 or empty now and then */
} sp_sample;

/* A random m x n sparse matrix of dtype dt: each entry stored with probability 1/2, plus
 * the diagonal when diag is true (shifted by shift so that the matrix is well conditioned). */
static cr_status rand_sparse(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t m, size_t n,
                             bool diag, double shift, cr_value *out)
{
    size_t cap;
    if (!cr__mul_size(m, n, &cap))
        return CR_EOVERFLOW;
    int64_t *ri = cr_arena_calloc(arena, cap ? cap : 1, sizeof *ri, _Alignof(int64_t));
    int64_t *ci = cr_arena_calloc(arena, cap ? cap : 1, sizeof *ci, _Alignof(int64_t));
    if (ri == NULL || ci == NULL)
        return CR__ALLOC_STATUS(arena);
    size_t nnz = 0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < m; i++)
            if ((diag && i == j) || cr__rng_below(rng, 2) == 0) {
                ri[nnz] = (int64_t)i;
                ci[nnz] = (int64_t)j;
                nnz++;
            }
    cr_array *val;
    cr_status st = cr__rand_array(arena, rng, cr__work(dt), 1, &nnz, -1, 1, &val);
    if (st != CR_OK)
        return st;
    for (size_t k = 0; k < nnz && diag; k++)
        if (ri[k] == ci[k])
            cr__wset(val, k, cr__wget(val, k) + shift);
    return sp_build(arena, m, n, nnz, ri, ci, val, dt, out);
}

static cr_status sample_sparse(CR__SAMPLE_PARAMS)
{
    sp_sample what = *(const sp_sample *)env;
    cr_dtype dt = cr__rng_dtype(rng);
    cr_status st = CR_OK;
    switch (what) {
    case SS_SPARSE: {
        if (nargs == 1) {
            /* a dense matrix or vector without zeros: perturbing a zero would store it */
            size_t sh[2] = {1 + cr__rng_below(rng, 4), 1 + cr__rng_below(rng, 4)};
            cr_array *A;
            if ((st = cr__rand_array(arena, rng, dt, 1 + cr__rng_below(rng, 2), sh, 0.25, 2, &A)) !=
                CR_OK)
                return st;
            cr__flip_signs(rng, A);
            args[0] = cr_value_array(A);
            return CR_OK;
        }
        size_t K = cr__rng_below(rng, 7), m = 1 + cr__rng_below(rng, 4),
               n = 1 + cr__rng_below(rng, 4);
        int64_t Ir[6], Jc[6];
        for (size_t k = 0; k < K; k++) {
            Ir[k] = (int64_t)cr__rng_below(rng, m);
            Jc[k] = (int64_t)cr__rng_below(rng, n);
        }
        cr_array *Ia = NULL, *Ja = NULL, *V = NULL;
        st = cr__i64_array(arena, K, Ir, &Ia);
        if (st == CR_OK)
            st = cr__i64_array(arena, K, Jc, &Ja);
        if (st == CR_OK)
            st = cr__rand_array(arena, rng, dt, 1, &K, -2, 2, &V);
        st = cr__sampled(st, args, 3, (cr_array *[]){Ia, Ja, V});
        if (st == CR_OK && nargs == 5) {
            args[3] = cr_value_i64((int64_t)m);
            args[4] = cr_value_i64((int64_t)n + (int64_t)cr__rng_below(rng, 2));
        }
        return st;
    }
    case SS_SPDIAGM: {
        size_t K = cr__rng_below(rng, 5);
        cr_array *V;
        if ((st = cr__rand_array(arena, rng, dt, 1, &K, -2, 2, &V)) != CR_OK)
            return st;
        args[nargs - 1] = cr_value_array(V);
        if (nargs == 2)
            args[0] = cr_value_i64((int64_t)cr__rng_below(rng, 5) - 2);
        return CR_OK;
    }
    case SS_READ:
        return rand_sparse(arena, rng, dt, cr__rng_below(rng, 5), cr__rng_below(rng, 5), false, 0,
                           &args[0]);
    case SS_MUL: {
        size_t m = cr__rng_below(rng, 5), n = cr__rng_below(rng, 5);
        char t = nargs == 3 ? "NTC"[cr__rng_below(rng, 3)] : 'N';
        if ((st = rand_sparse(arena, rng, dt, m, n, false, 0, &args[0])) != CR_OK)
            return st;
        size_t shape[2] = {t == 'N' ? n : m, 1 + cr__rng_below(rng, 3)};
        cr_array *B;
        st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 1 + cr__rng_below(rng, 2), shape, -2, 2,
                            &B);
        if (st == CR_OK && nargs == 3)
            args[2] = cr_value_i64(t);
        return cr__sampled(st, args + 1, 1, &B);
    }
    case SS_RMUL: {
        size_t m = cr__rng_below(rng, 5), n = cr__rng_below(rng, 5);
        char t = nargs == 3 ? "NTC"[cr__rng_below(rng, 3)] : 'N';
        if ((st = rand_sparse(arena, rng, dt, m, n, false, 0, &args[1])) != CR_OK)
            return st;
        size_t shape[2] = {1 + cr__rng_below(rng, 3), t == 'N' ? m : n};
        size_t nd = 1 + cr__rng_below(rng, 2);
        if (nd == 1)
            shape[0] = shape[1];
        cr_array *B;
        st = cr__rand_array(arena, rng, cr__rng_dtype(rng), nd, shape, -2, 2, &B);
        if (st == CR_OK && nargs == 3)
            args[2] = cr_value_i64(t);
        return cr__sampled(st, args, 1, &B);
    }
    case SS_DET:
    case SS_LOGDET:
    case SS_NONSING:
    default: {
        size_t n = cr__rng_below(rng, 8);
        n = n > 4 ? 1 + n % 4 : n; /* 0 and 1 often */
        if (what == SS_DET && cr__rng_below(rng, 4) == 0 && n > 1) {
            /* singular: a stored zero column */
            size_t K = n, j0 = cr__rng_below(rng, n);
            int64_t Ir[5], Jc[5];
            for (size_t k = 0; k < K; k++) {
                Ir[k] = (int64_t)k;
                Jc[k] = (int64_t)(k == j0 ? (j0 + 1) % n : k);
            }
            cr_array *Ia, *Ja, *V;
            st = cr__i64_array(arena, K, Ir, &Ia);
            if (st == CR_OK)
                st = cr__i64_array(arena, K, Jc, &Ja);
            if (st == CR_OK)
                st = cr__rand_array(arena, rng, dt, 1, &K, 0.5, 2, &V);
            if (st != CR_OK)
                return st;
            cr_value a[5] = {cr_value_array(Ia), cr_value_array(Ja), cr_value_array(V),
                             cr_value_i64((int64_t)n), cr_value_i64((int64_t)n)};
            return cr_function_call(arena, &cr_fn_sparse, a, 5, &args[0]);
        }
        /* diagonally dominant with a positive diagonal: nonsingular, positive determinant
         * for real matrices (logdet's domain) */
        return rand_sparse(
            arena, rng, dt == CR_DT_C128 && what == SS_LOGDET ? CR_DT_F64 : dt, n, n, true,
            (what == SS_NONSING && cr__rng_below(rng, 2) ? -2.0 : 2.0) * (double)(n + 1), &args[0]);
    }
    }
}

static const sp_sample k_ss_sparse = SS_SPARSE, k_ss_spdiagm = SS_SPDIAGM, k_ss_read = SS_READ,
                       k_ss_mul = SS_MUL, k_ss_det = SS_DET, k_ss_logdet = SS_LOGDET,
                       k_ss_nonsing = SS_NONSING;
static const cr_rule_test k_t_sparse = {.sample = sample_sparse, .env = (void *)&k_ss_sparse};
static const cr_rule_test k_t_spdiagm = {.sample = sample_sparse, .env = (void *)&k_ss_spdiagm};
static const cr_rule_test k_t_read = {.sample = sample_sparse, .env = (void *)&k_ss_read};
static const cr_rule_test k_t_mul = {.sample = sample_sparse, .env = (void *)&k_ss_mul};
static const sp_sample k_ss_rmul = SS_RMUL;
static const cr_rule_test k_t_rmul = {.sample = sample_sparse, .env = (void *)&k_ss_rmul};
static const cr_rule_test k_t_det = {.sample = sample_sparse, .env = (void *)&k_ss_det};
static const cr_rule_test k_t_logdet = {.sample = sample_sparse, .env = (void *)&k_ss_logdet};
static const cr_rule_test k_t_nonsing = {.sample = sample_sparse, .env = (void *)&k_ss_nonsing};

/* A row of the rules through the dense ones (LAPACK's). */
#define DENSE_ROW(NAME, TEST)                                                                  \
    {                                                                                          \
        &NAME##_function, a_s, 1, NAME##_frule, NAME##_rrule, (TEST), CR_NONLINEAR, NULL, true \
    }

cr_status cr__linalg_register_sparse(cr_registry *reg)
{
    static const cr_argspec a_dense[1] = {CR__SPEC(CR__M_FARRAY)};
    static const cr_argspec a_coo3[3] = {CR__SPEC(CR_M_A_INT), CR__SPEC(CR_M_A_INT),
                                         CR__SPEC(CR__M_FARRAY)};
    static const cr_argspec a_coo5[5] = {CR__SPEC(CR_M_A_INT), CR__SPEC(CR_M_A_INT),
                                         CR__SPEC(CR__M_FARRAY), CR__SPEC(CR_M_INT),
                                         CR__SPEC(CR_M_INT)};
    static const cr_argspec a_kv[2] = {CR__SPEC(CR_M_INT), CR__SPEC(CR__M_FARRAY)};
    static const cr_argspec a_s[1] = {{CR_M_STRUCT, &cr_sparse_type}};
    static const cr_argspec a_sb[2] = {{CR_M_STRUCT, &cr_sparse_type}, CR__SPEC(CR__M_FARRAY)};
    static const cr_argspec a_sbt[3] = {
        {CR_M_STRUCT, &cr_sparse_type}, CR__SPEC(CR__M_FARRAY), CR__SPEC(CR_M_INT)};
    static const cr_argspec a_bs[2] = {CR__SPEC(CR__M_FARRAY), {CR_M_STRUCT, &cr_sparse_type}};
    static const cr_argspec a_bst[3] = {
        CR__SPEC(CR__M_FARRAY), {CR_M_STRUCT, &cr_sparse_type}, CR__SPEC(CR_M_INT)};
    static const cr__array_rule k[] = {
        CR__LA_ROW(sparse, a_dense, 1, &k_t_sparse, CR_LINEAR),
        CR__LA_ROW(sparse, a_coo3, 3, &k_t_sparse, CR_LINEAR),
        CR__LA_ROW(sparse, a_coo5, 5, &k_t_sparse, CR_LINEAR),
        CR__LA_ROW(spdiagm, a_dense, 1, &k_t_spdiagm, CR_LINEAR),
        CR__LA_ROW(spdiagm, a_kv, 2, &k_t_spdiagm, CR_LINEAR),
        CR__LA_ROW(findnz, a_s, 1, &k_t_read, CR_LINEAR),
        CR__LA_ROW(sparse_dense, a_s, 1, &k_t_read, CR_LINEAR),
        CR__LA_ROW(sparse_mul, a_sb, 2, &k_t_mul, CR_NONLINEAR),
        CR__LA_ROW(sparse_mul, a_sbt, 3, &k_t_mul, CR_NONLINEAR),
        CR__LA_ROW(sparse_rmul, a_bs, 2, &k_t_rmul, CR_NONLINEAR),
        CR__LA_ROW(sparse_rmul, a_bst, 3, &k_t_rmul, CR_NONLINEAR),
        DENSE_ROW(sparse_det, &k_t_det),
        DENSE_ROW(sparse_logdet, &k_t_logdet),
        DENSE_ROW(sparse_logabsdet, &k_t_nonsing),
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
