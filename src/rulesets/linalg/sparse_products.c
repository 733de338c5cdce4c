/*
 * The product of two compressed-column sparse matrices (cr_sparse, rules_sparse.h):
 * sparse_spmul(A, B[, ta, tb]) = op(A) op(B), op by the flags 'N', 'T' (transpose) or 'C'
 * (adjoint): a sparse matrix on the structural pattern of the product (entry (i, j) stored
 * when some k has op(A)[i, k] and op(B)[k, j] stored, whatever their values), computed column
 * by column (Gustavson) after a transposed operand is rearranged into the columns of op(A)
 * (a counting pass, O(nnz + n)). The cotangents keep the arguments' patterns (ChainRules'
 * ProjectTo of a SparseMatrixCSC): op(A)'s cotangent C̄ op(B)ᴴ and op(B)'s op(A)ᴴ C̄ are
 * computed only at the stored entries, in one pass over the product's terms, and carried back
 * through op (moved to their entries, conjugated for 'C').
 */
#include <stdlib.h>

#include <chainrules/rules_sparse.h>

#include "../../core/checked.h"
#include "linalg_impl.h"

enum { NZVAL = 4 }; /* nzval's field in cr_sparse_type */

/* A validated sparse argument: sizes, index arrays and values (complex, contiguous). */
typedef struct spp {
    const cr_sparse *S;
    size_t m, n, nnz;
    int64_t *colptr, *rowval;
    cr_complex *val;
    cr_dtype dt; /* nzval's dtype */
    /* op(S) for a flag 'T' or 'C' (spp_op): the fields above describe op(S); entry q of op(S)
     * is entry perm[q] of S (conjugated when conj); S's own pattern is m0 x n0, cp0, rv0 */
    int64_t *perm;
    bool conj;
    size_t m0, n0;
    int64_t *cp0, *rv0;
} spp;

static cr_status spp_read(cr_arena *arena, const char *who, const cr_value *v, spp *s)
{
    cr__sparse_pat pat;
    cr_status st = cr__sparse_pattern(arena, who, v, &pat);
    if (st != CR_OK)
        return st;
    s->S = pat.S;
    s->m = pat.m;
    s->n = pat.n;
    s->nnz = pat.nnz;
    s->colptr = s->cp0 = pat.colptr;
    s->rowval = s->rv0 = pat.rowval;
    s->m0 = pat.m;
    s->n0 = pat.n;
    s->perm = NULL;
    s->conj = false;
    const cr_array *nz = &pat.S->nzval;
    s->dt = (cr_dtype)nz->dtype;
    s->val = cr__arena_array(arena, who, s->nnz, sizeof *s->val, _Alignof(cr_complex));
    if (s->val == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t p = 0; p < s->nnz; p++)
        s->val[p] = cr_array_get_linear(nz, p);
    return CR_OK;
}

/* The stored values of a (co)tangent of s: nnz complex numbers, or NULL for a zero. A
 * structural tangent of cr_sparse gives its nzval field, a dense m x n array its entries at
 * the stored positions (ProjectTo of a SparseMatrixCSC); anything else is refused. */
static cr_status spp_tan(cr_arena *arena, const char *who, cr_tangent t, const spp *s,
                         const cr_complex **out)
{
    *out = NULL;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK || cr_tangent_is_zero(t))
        return st;
    const cr_array *a = NULL;
    if (t.tag == CR_TAN_ARRAY) {
        size_t sh[2] = {s->m, s->n};
        const cr_array *d;
        st = cr__tan_array(arena, who, t, 2, sh, CR_DT_C128, &d);
        if (st != CR_OK || d == NULL)
            return st;
        cr_complex *g = cr__arena_array(arena, who, s->nnz, sizeof *g, _Alignof(cr_complex));
        if (g == NULL)
            return CR__ALLOC_STATUS(arena);
        const cr_complex *D = d->data;
        for (size_t j = 0; j < s->n; j++)
            for (int64_t p = s->colptr[j]; p < s->colptr[j + 1]; p++)
                g[p] = D[(size_t)s->rowval[p] * s->n + j]; /* row-major m x n */
        *out = g;
        return CR_OK;
    }
    if (t.tag != CR_TAN_STRUCT || t.u.s.type != &cr_sparse_type)
        return CR__FAIL(arena, CR_ETANGENT,
                        "%s: the tangent of a sparse matrix must be a structural tangent of "
                        "cr_sparse (its nzval field) or a dense m x n array, got %s",
                        who, cr_tag_name((cr_tag)t.tag));
    st = cr__tan_array(arena, who, cr_tangent_field(t, NZVAL), 1, &s->nnz, CR_DT_C128, &a);
    if (st == CR_OK && a != NULL)
        *out = a->data;
    return st;
}

/* s becomes op(s) for the flag trans: for 'T' and 'C' the columns of sᵀ (a counting pass
 * over s's rows; each column's rows increasing, as s's columns are visited in order), the
 * values moved (and conjugated for 'C'), perm recording where each came from. */
static cr_status spp_op(cr_arena *arena, const char *who, spp *s, char trans)
{
    if (trans == 'N')
        return CR_OK;
    size_t m = s->n, n = s->m, nnz = s->nnz;
    int64_t *cp = cr__arena_array(arena, who, n + 1, sizeof *cp, _Alignof(int64_t));
    int64_t *next = cr__arena_array(arena, who, n + 1, sizeof *next, _Alignof(int64_t));
    int64_t *rv = cr__arena_array(arena, who, nnz, sizeof *rv, _Alignof(int64_t));
    int64_t *perm = cr__arena_array(arena, who, nnz, sizeof *perm, _Alignof(int64_t));
    cr_complex *val = cr__arena_array(arena, who, nnz, sizeof *val, _Alignof(cr_complex));
    if (cp == NULL || next == NULL || rv == NULL || perm == NULL || val == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i <= n; i++)
        cp[i] = 0;
    for (size_t p = 0; p < nnz; p++)
        cp[s->rowval[p] + 1]++;
    for (size_t i = 0; i < n; i++)
        cp[i + 1] += cp[i];
    for (size_t i = 0; i <= n; i++)
        next[i] = cp[i];
    bool cj = trans == 'C';
    for (size_t k = 0; k < s->n; k++)
        for (int64_t p = s->colptr[k]; p < s->colptr[k + 1]; p++) {
            int64_t q = next[s->rowval[p]]++;
            rv[q] = (int64_t)k;
            perm[q] = p;
            val[q] = cj ? conj(s->val[p]) : s->val[p];
        }
    s->m = m;
    s->n = n;
    s->colptr = cp;
    s->rowval = rv;
    s->val = val;
    s->perm = perm;
    s->conj = cj;
    return CR_OK;
}

/* The stored values of the tangent t of the argument of s, in op(s)'s order (op applied);
 * NULL for a zero. */
static cr_status spp_tan_op(cr_arena *arena, const char *who, cr_tangent t, const spp *s,
                            const cr_complex **out)
{
    spp o = *s;
    o.m = s->m0;
    o.n = s->n0;
    o.colptr = s->cp0;
    o.rowval = s->rv0;
    const cr_complex *v;
    cr_status st = spp_tan(arena, who, t, &o, &v);
    if (st != CR_OK || v == NULL || s->perm == NULL) {
        *out = v;
        return st;
    }
    cr_complex *w = cr__arena_array(arena, who, s->nnz, sizeof *w, _Alignof(cr_complex));
    if (w == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t q = 0; q < s->nnz; q++)
        w[q] = s->conj ? conj(v[s->perm[q]]) : v[s->perm[q]];
    *out = w;
    return CR_OK;
}

/* The cotangent of op(s)'s stored values g (op(s)'s order) carried back to s's entries:
 * moved by perm, conjugated for 'C' (in place when op is the identity). */
static cr_status spp_back(cr_arena *arena, const char *who, const spp *s, cr_complex *g,
                          cr_complex **out)
{
    *out = g;
    if (s->perm == NULL)
        return CR_OK;
    cr_complex *w = cr__arena_array(arena, who, s->nnz, sizeof *w, _Alignof(cr_complex));
    if (w == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t q = 0; q < s->nnz; q++)
        w[s->perm[q]] = s->conj ? conj(g[q]) : g[q];
    *out = w;
    return CR_OK;
}

/* The structural tangent of a sparse matrix whose nzval is `raw` (nnz complex values, or
 * NULL for zero), projected onto the nzval `like` (real, f32 or complex). */
static cr_status spp_give(cr_arena *arena, const cr_array *like, const cr_complex *raw, size_t nnz,
                          cr_tangent *out)
{
    if (raw == NULL) {
        *out = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *w;
    cr_status st = cr__new(arena, CR_DT_C128, 1, &nnz, false, &w);
    if (st != CR_OK)
        return st;
    if (nnz > 0)
        memcpy(w->data, raw, nnz * sizeof *raw);
    cr_value lv = cr_value_array((cr_array *)like);
    cr_project *p;
    cr_tangent nz;
    st = cr_project_new(arena, &lv, &p);
    if (st == CR_OK)
        st = cr__give(arena, p, w, &nz);
    if (st != CR_OK)
        return st;
    static const char *const names[1] = {"nzval"};
    return cr_tangent_struct(arena, &cr_sparse_type, names, &nz, 1, out);
}

/* n complex zeros in the arena (NULL when that fails). */
static cr_complex *spp_zeros(cr_arena *arena, size_t n)
{
    return cr_arena_calloc(arena, n ? n : 1, sizeof(cr_complex), _Alignof(cr_complex));
}

/* ---- The product's pattern and values ---------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The rows of column j of C = A B (those of A's columns k over the rows k of B's column j),
 * each once: marked with j in mark, written to rv (NULL: only counted); returns how many. */
static size_t spp_col_rows(const spp *A, const spp *B, size_t j, size_t *mark, int64_t *rv)
{
    size_t cnt = 0;
    for (int64_t p = B->colptr[j]; p < B->colptr[j + 1]; p++) {
        size_t k = (size_t)B->rowval[p];
        for (int64_t q = A->colptr[k]; q < A->colptr[k + 1]; q++) {
            size_t i = (size_t)A->rowval[q];
            if (mark[i] != j) {
                mark[i] = j;
                if (rv != NULL)
                    rv[cnt] = (int64_t)i;
                cnt++;
            }
        }
    }
    return cnt;
}

/* The pattern of C = A B: colptr (n + 1) and sorted row indices, from a marker pass. */
static cr_status spp_pattern(cr_arena *arena, const char *who, const spp *A, const spp *B,
                             int64_t **colptr, int64_t **rowval, size_t *nnz)
{
    size_t m = A->m, n = B->n;
    int64_t *cp = cr__arena_array(arena, who, n + 1, sizeof *cp, _Alignof(int64_t));
    size_t *mark = cr__arena_array(arena, who, m, sizeof *mark, _Alignof(size_t));
    if (cp == NULL || mark == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < m; i++)
        mark[i] = SIZE_MAX;
    size_t total = 0;
    cr_status st = CR_OK;
    cp[0] = 0;
    /* first pass: the number of rows of each column */
    for (size_t j = 0; j < n && st == CR_OK; j++) {
        st = cr__ck_add(cr_arena_ctx(arena), who, total, spp_col_rows(A, B, j, mark, NULL), &total);
        cp[j + 1] = (int64_t)total;
    }
    if (st != CR_OK)
        return st;
    int64_t *rv = cr__arena_array(arena, who, total, sizeof *rv, _Alignof(int64_t));
    if (rv == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < m; i++)
        mark[i] = SIZE_MAX;
    /* second pass: the rows, sorted in each column (a counting pass over the marks would
     * cost m per column; the columns' rows are sorted instead) */
    for (size_t j = 0; j < n; j++) {
        spp_col_rows(A, B, j, mark, rv + cp[j]);
        qsort(rv + cp[j], (size_t)(cp[j + 1] - cp[j]), sizeof *rv, cmp_i64);
    }
    *colptr = cp;
    *rowval = rv;
    *nnz = total;
    return CR_OK;
}

/* The values of C = A B (av, bv: A's and B's stored values) on C's pattern (colptr, rowval),
 * added into cv; w is an m-vector of zeros, left zero. */
static void spp_values(const spp *A, const spp *B, const cr_complex *av, const cr_complex *bv,
                       const int64_t *colptr, const int64_t *rowval, cr_complex *w, cr_complex *cv)
{
    for (size_t j = 0; j < B->n; j++) {
        for (int64_t p = B->colptr[j]; p < B->colptr[j + 1]; p++) {
            size_t k = (size_t)B->rowval[p];
            for (int64_t q = A->colptr[k]; q < A->colptr[k + 1]; q++)
                w[A->rowval[q]] += av[q] * bv[p];
        }
        for (int64_t r = colptr[j]; r < colptr[j + 1]; r++) {
            cv[r] += w[rowval[r]];
            w[rowval[r]] = 0;
        }
    }
}

/* A parsed product and its result's pattern. */
typedef struct spmul {
    spp A, B;
    size_t nnz;
    int64_t *colptr, *rowval;
    cr_dtype dt; /* the result's dtype */
} spmul;

static cr_status spmul_forward(cr_arena *arena, const cr_value *args, size_t nargs, spmul *P,
                               cr_complex **cv, cr_complex **w)
{
    const char *who = "sparse_spmul";
    char ta = 'N', tb = 'N';
    cr_status st = cr__nargs(arena, who, nargs, 2, 4);
    if (st == CR_OK && nargs == 3)
        st = CR__FAIL(arena, CR_EINVAL, "%s: takes both trans flags or neither", who);
    if (st == CR_OK && nargs == 4)
        st = cr__sparse_trans(arena, who, &args[2], &ta);
    if (st == CR_OK && nargs == 4)
        st = cr__sparse_trans(arena, who, &args[3], &tb);
    if (st == CR_OK)
        st = spp_read(arena, who, &args[0], &P->A);
    if (st == CR_OK)
        st = spp_read(arena, who, &args[1], &P->B);
    if (st == CR_OK)
        st = spp_op(arena, who, &P->A, ta);
    if (st == CR_OK)
        st = spp_op(arena, who, &P->B, tb);
    if (st != CR_OK)
        return st;
    if (P->A.n != P->B.m)
        return CR__FAIL(arena, CR_ESHAPE,
                        "%s: op(A) is %zu x %zu, op(B) %zu x %zu (op(A)'s columns must be "
                        "op(B)'s rows)",
                        who, P->A.m, P->A.n, P->B.m, P->B.n);
    P->dt = cr__promote(P->A.dt, P->B.dt);
    st = spp_pattern(arena, who, &P->A, &P->B, &P->colptr, &P->rowval, &P->nnz);
    if (st != CR_OK)
        return st;
    *cv = spp_zeros(arena, P->nnz);
    *w = spp_zeros(arena, P->A.m);
    if (*cv == NULL || *w == NULL)
        return CR__ALLOC_STATUS(arena);
    spp_values(&P->A, &P->B, P->A.val, P->B.val, P->colptr, P->rowval, *w, *cv);
    return CR_OK;
}

/* The result: a new cr_sparse of the promoted dtype. */
static cr_status spmul_output(cr_arena *arena, const spmul *P, const cr_complex *cv, cr_value *y)
{
    cr_sparse *S = cr_arena_calloc(arena, 1, sizeof *S, _Alignof(cr_sparse));
    if (S == NULL)
        return CR__ALLOC_STATUS(arena);
    size_t np1 = P->B.n + 1, nnz = P->nnz;
    cr_array *cp, *rv, *nz;
    cr_status st = cr__new(arena, CR_DT_I64, 1, &np1, false, &cp);
    if (st == CR_OK)
        st = cr__new(arena, CR_DT_I64, 1, &nnz, false, &rv);
    if (st == CR_OK)
        st = cr__new(arena, P->dt, 1, &nnz, false, &nz);
    if (st != CR_OK)
        return st;
    memcpy(cp->data, P->colptr, np1 * sizeof(int64_t));
    if (nnz > 0)
        memcpy(rv->data, P->rowval, nnz * sizeof(int64_t));
    for (size_t r = 0; r < nnz; r++)
        cr__store(nz, (ptrdiff_t)r, cv[r]);
    S->m = (int64_t)P->A.m;
    S->n = (int64_t)P->B.n;
    S->colptr = *cp;
    S->rowval = *rv;
    S->nzval = *nz;
    S->colptr.flags = S->rowval.flags = S->nzval.flags = 0;
    *y = cr_value_struct(&cr_sparse_type, S);
    return CR_OK;
}

typedef struct spmul_env {
    spmul P;
} spmul_env;

/* Ā[i, k] = Σ_j C̄[i, j] conj(B[k, j]) at A's stored (i, k), and B̄[k, j] = Σ_i conj(A[i, k])
 * C̄[i, j] at B's stored (k, j): per column j, C̄(:, j) is scattered into a dense m-vector,
 * then every term A[i, k] B[k, j] of the product adds its share to both. */
static cr_status spmul_pullback(CR__PULLBACK_PARAMS)
{
    spmul_env *e = env;
    const spmul *P = &e->P;
    const char *who = "sparse_spmul_pullback";
    cr__dx_none(dx, nx);
    spp Cs = {.m = P->A.m, .n = P->B.n, .nnz = P->nnz, .colptr = P->colptr, .rowval = P->rowval};
    const cr_complex *g;
    cr_status st = spp_tan(arena, who, *dy, &Cs, &g);
    if (st != CR_OK)
        return st;
    bool da = P->A.nnz > 0, db = P->B.nnz > 0;
    if (g == NULL) {
        dx[1] = da ? cr_tangent_zero() : dx[1];
        dx[2] = db ? cr_tangent_zero() : dx[2];
        return CR_OK;
    }
    cr_complex *abar = spp_zeros(arena, P->A.nnz), *bbar = spp_zeros(arena, P->B.nnz);
    cr_complex *w = spp_zeros(arena, P->A.m);
    if (abar == NULL || bbar == NULL || w == NULL)
        return CR__ALLOC_STATUS(arena);
    const spp *A = &P->A, *B = &P->B;
    for (size_t j = 0; j < B->n; j++) {
        for (int64_t r = P->colptr[j]; r < P->colptr[j + 1]; r++)
            w[P->rowval[r]] = g[r];
        for (int64_t p = B->colptr[j]; p < B->colptr[j + 1]; p++) {
            size_t k = (size_t)B->rowval[p];
            cr_complex bk = conj(B->val[p]), s = 0;
            for (int64_t q = A->colptr[k]; q < A->colptr[k + 1]; q++) {
                cr_complex gi = w[A->rowval[q]];
                abar[q] += gi * bk;
                s += conj(A->val[q]) * gi;
            }
            bbar[p] += s;
        }
        for (int64_t r = P->colptr[j]; r < P->colptr[j + 1]; r++)
            w[P->rowval[r]] = 0;
    }
    if (da && (st = spp_back(arena, who, A, abar, &abar)) == CR_OK)
        st = spp_give(arena, &A->S->nzval, abar, A->nnz, &dx[1]);
    if (st == CR_OK && db && (st = spp_back(arena, who, B, bbar, &bbar)) == CR_OK)
        st = spp_give(arena, &B->S->nzval, bbar, B->nnz, &dx[2]);
    return st;
}

static cr_status sparse_spmul_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, spmul_env, e);
    cr_complex *cv, *w;
    cr_status st = spmul_forward(arena, args, nargs, &e->P, &cv, &w);
    if (st == CR_OK)
        st = spmul_output(arena, &e->P, cv, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    *pb = (cr_pullback){spmul_pullback, e, "sparse_spmul_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(sparse_spmul, "sparse_spmul", -1)

/* frule: Ċ = op(Ȧ) op(B) + op(A) op(Ḃ) on C's pattern (Ȧ and Ḃ live on A's and B's
 * patterns, so their products fall inside it). */
static cr_status sparse_spmul_frule(CR__FRULE_PARAMS)
{
    spmul P;
    cr_complex *cv, *w;
    cr_status st = spmul_forward(arena, args, nargs, &P, &cv, &w);
    if (st == CR_OK)
        st = spmul_output(arena, &P, cv, y);
    const cr_complex *ta = NULL, *tb = NULL;
    if (st == CR_OK)
        st = spp_tan_op(arena, "sparse_spmul", dargs[1], &P.A, &ta);
    if (st == CR_OK)
        st = spp_tan_op(arena, "sparse_spmul", dargs[2], &P.B, &tb);
    if (st != CR_OK || (ta == NULL && tb == NULL)) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_complex *tc = spp_zeros(arena, P.nnz);
    if (tc == NULL)
        return CR__ALLOC_STATUS(arena);
    if (ta != NULL)
        spp_values(&P.A, &P.B, ta, P.B.val, P.colptr, P.rowval, w, tc);
    if (tb != NULL)
        spp_values(&P.A, &P.B, P.A.val, tb, P.colptr, P.rowval, w, tc);
    const cr_sparse *C = y->u.obj.ptr;
    return spp_give(arena, &C->nzval, tc, P.nnz, dy);
}

/* ---- Test registration ------------------------------------------------------------------ */

/* A random m x n sparse matrix of dtype dt, each entry stored with probability 1/2 (all of
 * them, or none, now and then: the hard points of a dense and of an empty pattern). */
static cr_status rand_sp(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t m, size_t n,
                         size_t fill, cr_value *out)
{
    cr_sparse *S = cr_arena_calloc(arena, 1, sizeof *S, _Alignof(cr_sparse));
    size_t np1 = n + 1, cap = 16; /* m, n <= 4 */
    cr_array *cp, *rv, *nz;
    if (S == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_status st = cr__new(arena, CR_DT_I64, 1, &np1, true, &cp);
    if (st == CR_OK)
        st = cr__new(arena, CR_DT_I64, 1, &cap, false, &rv);
    if (st != CR_OK)
        return st;
    int64_t *c = cp->data, *r = rv->data;
    size_t nnz = 0;
    for (size_t j = 0; j < n; j++) {
        for (size_t i = 0; i < m; i++)
            if (fill == 1 || (fill == 2 && cr__rng_below(rng, 2) == 0))
                r[nnz++] = (int64_t)i;
        c[j + 1] = (int64_t)nnz;
    }
    rv->shape[0] = nnz;
    st = cr__rand_array(arena, rng, dt, 1, &nnz, -1.5, 1.5, &nz);
    if (st != CR_OK)
        return st;
    S->m = (int64_t)m;
    S->n = (int64_t)n;
    S->colptr = *cp;
    S->rowval = *rv;
    S->nzval = *nz;
    *out = cr_value_struct(&cr_sparse_type, S);
    return CR_OK;
}

/* (A, B) or (A, B, ta, tb): op(A) m x k, op(B) k x n, the flags drawn from 'N', 'T', 'C'. */
static cr_status sample_spmul(CR__SAMPLE_PARAMS)
{
    size_t m = 1 + cr__rng_below(rng, 4), k = cr__rng_below(rng, 5), n = 1 + cr__rng_below(rng, 4);
    k = k == 0 && cr__rng_below(rng, 2) ? 1 : k; /* an inner dimension 0 now and then */
    /* each factor: a random pattern mostly, full or empty one time in eight */
    size_t fa = cr__rng_below(rng, 8), fb = cr__rng_below(rng, 8);
    static const char k_flags[3] = {'N', 'T', 'C'};
    char ta = nargs == 4 ? k_flags[cr__rng_below(rng, 3)] : 'N';
    char tb = nargs == 4 ? k_flags[cr__rng_below(rng, 3)] : 'N';
    cr_status st = rand_sp(arena, rng, cr__rng_dtype(rng), ta == 'N' ? m : k, ta == 'N' ? k : m,
                           fa == 0   ? 0
                           : fa == 1 ? 1
                                     : 2,
                           &args[0]);
    if (st == CR_OK)
        st = rand_sp(arena, rng, cr__rng_dtype(rng), tb == 'N' ? k : n, tb == 'N' ? n : k,
                     fb == 0   ? 0
                     : fb == 1 ? 1
                               : 2,
                     &args[1]);
    if (nargs == 4) {
        args[2] = cr_value_i64(ta);
        args[3] = cr_value_i64(tb);
    }
    return st;
}

static const cr_rule_test k_t_spmul = {.sample = sample_spmul};

/* The family of the sparse-sparse product (builtin.c). */
CR_INTERNAL cr_status cr__family_spmul(cr_registry *reg);
cr_status cr__family_spmul(cr_registry *reg)
{
    static const cr_argspec a[4] = {{CR_M_STRUCT, &cr_sparse_type},
                                    {CR_M_STRUCT, &cr_sparse_type},
                                    {CR_M_INT, NULL},
                                    {CR_M_INT, NULL}};
    cr_status st = cr__add_rule_so(reg, &sparse_spmul_function, a, 2, false, sparse_spmul_frule,
                                   sparse_spmul_rrule, &k_t_spmul, CR_NONLINEAR, NULL);
    if (st == CR_OK)
        st = cr__add_rule_so(reg, &sparse_spmul_function, a, 4, false, sparse_spmul_frule,
                             sparse_spmul_rrule, &k_t_spmul, CR_NONLINEAR, NULL);
    return st;
}
