/*
 * The linear-algebra rule family: its registration (cr__family_linalg, which calls the
 * registrations of the family's files, src/rulesets/linalg/) and the BLAS-level rules: dot (2 and 3
 * arguments), matmul (gemm/gemv), gemm (alpha A B + beta C) and tr. The matrix cotangents of matmul
 * and gemm are InplaceableThunks whose add! runs gemm with beta = 1 into the accumulator.
 */
#include <math.h>

#include "../array/family.h"
#include "linalg_impl.h"
#include "structured_impl.h"

cr_status cr__family_linalg(cr_registry *reg)
{
    static cr_status (*const k_files[])(cr_registry *) = {
        cr__linalg_register_blas,       cr__linalg_register_lapack,    cr__linalg_register_cholesky,
        cr__linalg_register_spectral,   cr__linalg_register_expm,      cr__linalg_register_fact,
        cr__linalg_register_blas_calls, cr__linalg_register_level,     cr__linalg_register_sparse,
        cr__linalg_register_blas_tri,   cr__linalg_register_blas_rank,
    };
    cr_status st = CR_OK;
    for (size_t i = 0; st == CR_OK && i < sizeof k_files / sizeof k_files[0]; i++)
        st = k_files[i](reg);
    return st;
}

/* ---- Products: shared pieces ------------------------------------------------------------ */

/* A product operand: the argument, its gemm view and whether it is perturbable. */
typedef struct operand {
    const cr_array *a;
    cr__mat m;
    bool diff;
} operand;

/* The cotangent of an operand of a product: X̄ = s * op(L) op(R), projected. */
typedef struct prod_thunk {
    const cr_array *like; /* the argument */
    cr_project *p;
    cr_dtype wdt;
    cr__mat L, R;
    cr_complex s;
} prod_thunk;

static cr_status prod_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    prod_thunk *t = env;
    cr_array *r = NULL;
    cr_status st = cr__new_like(arena, t->wdt, t->like, false, &r);
    if (st != CR_OK)
        return st;
    cr__gemm(t->wdt, &t->L, &t->R, t->s, 0.0, r->data, cr__mat_cols(&t->R));
    return cr__give(arena, t->p, r, out);
}

/* add!: dest += s * op(L) op(R) with gemm's beta = 1, no temporary. */
CR__THUNK_ADD(prod_thunk_add, prod_thunk, t->wdt, t->like,
              cr__gemm(t->wdt, &t->L, &t->R, t->s, 1.0, dest->data, cr__mat_cols(&t->R)),
              prod_thunk_fn)

static cr_status prod_thunk_new(cr_arena *arena, const cr_array *like, cr_project *p, cr_dtype wdt,
                                const cr__mat *L, const cr__mat *R, cr_complex s, cr_tangent *out)
{
    CR__ARENA_NEW(arena, prod_thunk, t);
    *t = (prod_thunk){like, p, wdt, *L, *R, s};
    return cr__thunk(arena, prod_thunk_fn, prod_thunk_add, t, "product_pullback_thunk", out);
}

/* The shapes of A B: A 2-d (m, k) or 1-d (a row of k: the result is 1-d), B 2-d (k, n) or
 * 1-d (a column: the result is 1-d). */
static cr_status product_shape(cr_arena *arena, const char *who, const cr_array *A,
                               const cr_array *B, size_t *ndim, size_t *shape)
{
    if ((A->ndim != 1 && A->ndim != 2) || (B->ndim != 1 && B->ndim != 2) ||
        (A->ndim == 1 && B->ndim == 1))
        return CR__FAIL(arena, CR_ESHAPE,
                        "%s: expected matrix-matrix, matrix-vector or vector-matrix operands "
                        "(got %u and %u dimension%s; use dot for two vectors)",
                        who, (unsigned)A->ndim, (unsigned)B->ndim, CR__S((unsigned)B->ndim));
    size_t k1 = A->shape[A->ndim - 1], k2 = B->shape[0];
    if (k1 != k2) {
        char s1[96], s2[96];
        return CR__FAIL(arena, CR_ESHAPE, "%s: shapes %s and %s do not conform", who,
                        cr__shape_str(A, s1, sizeof s1), cr__shape_str(B, s2, sizeof s2));
    }
    if (A->ndim == 1) {
        *ndim = 1;
        shape[0] = B->shape[1];
    } else if (B->ndim == 1) {
        *ndim = 1;
        shape[0] = A->shape[0];
    } else {
        *ndim = 2;
        shape[0] = A->shape[0];
        shape[1] = B->shape[1];
    }
    return CR_OK;
}

/* The two array arguments of a function of two (A, B). */
static cr_status two_arrays(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                            const cr_array **A, const cr_array **B)
{
    cr_status st = cr__nargs(arena, who, nargs, 2, 2);
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, 0, A);
    return st != CR_OK ? st : cr__array_arg(arena, who, args, nargs, 1, B);
}

/* The start of the pullback of a function of one array with a scalar output: dx[0] =
 * NoTangent, *g = ȳ; *nz false and dx[1] = ZeroTangent when ȳ is zero. */
static cr_status scalar_cot(cr_arena *arena, const char *who, const cr_tangent *dy, cr_tangent *dx,
                            cr_complex *g, bool *nz)
{
    dx[0] = cr_tangent_none();
    cr_status st = cr__tan_scalar(arena, who, *dy, g, nz);
    if (st != CR_OK || !*nz)
        dx[1] = cr_tangent_zero();
    return st;
}

/* The output cotangent of a product as a gemm operand (m x n). */
static cr_status cot_mat(cr_arena *arena, const char *who, cr_tangent dy, const cr_array *A,
                         size_t ndim, const size_t *shape, cr_dtype wdt, const cr_array **g,
                         cr__mat *gm)
{
    cr_status st = cr__tan_array(arena, who, dy, ndim, shape, wdt, g);
    if (st != CR_OK || *g == NULL)
        return st;
    return cr__as_mat(arena, *g, wdt, A->ndim == 1, gm);
}

/* ---- matmul of a band matrix ------------------------------------------------------------ */

/* matmul reads a Tridiagonal, SymTridiagonal or Bidiagonal operand through its three central
 * diagonals (in the work dtype: dl[i] = T(i+1, i), d[i] = T(i, i), du[i] = T(i, i+1); the
 * structure's logical zeros and SymTridiagonal's mirror applied), so that the product, the
 * other operand's cotangent and the tangent cost O(n) per column, and the band operand's
 * cotangent is formed on the three diagonals only before its projection. */
typedef struct band {
    size_t n;
    void *dl, *d, *du; /* n elements each of the work dtype (dl, du: n - 1 used) */
} band;

static bool is_band(unsigned s)
{
    return s == CR_MAT_TRIDIAGONAL || s == CR_MAT_SYMTRIDIAGONAL || s == CR_MAT_BIDIAG_UPPER ||
           s == CR_MAT_BIDIAG_LOWER;
}

/* The three diagonals of the n x n array a (any dtype and strides; a band tag, so that the
 * entries off the three diagonals are logically zero) in the work dtype. */
static cr_status band_of(cr_arena *arena, cr_dtype wdt, const cr_array *a, band *b)
{
    size_t n = a->shape[0], m = n ? n : 1, es = cr_dtype_size(wdt);
    b->n = n;
    b->dl = cr__arena_array(arena, "band", m, es, _Alignof(cr_complex));
    b->d = cr__arena_array(arena, "band", m, es, _Alignof(cr_complex));
    b->du = cr__arena_array(arena, "band", m, es, _Alignof(cr_complex));
    if (b->dl == NULL || b->d == NULL || b->du == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t i = 0; i < n; i++) {
        size_t ii = i * n + i;
        cr_complex v[3] = {i + 1 < n ? cr_array_get_linear(a, ii + n) : 0,
                           cr_array_get_linear(a, ii),
                           i + 1 < n ? cr_array_get_linear(a, ii + 1) : 0};
        void *dst[3] = {b->dl, b->d, b->du};
        for (int k = 0; k < 3; k++) {
            if (wdt == CR_DT_C128)
                ((cr_complex *)dst[k])[i] = v[k];
            else
                ((double *)dst[k])[i] = creal(v[k]);
        }
    }
    return CR_OK;
}

/* The band of a tangent array t of the band operand a when t carries a band tag (its
 * three diagonals, read in O(n)); *ok false when t is of another form. */
static cr_status band_of_tangent(cr_arena *arena, cr_dtype wdt, const cr_array *a, cr_tangent t,
                                 band *b, bool *ok)
{
    *ok = false;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK || t.tag != CR_TAN_ARRAY)
        return st;
    const cr_array *d = t.u.arr;
    if (d->ndim != 2 || !is_band(d->structure) || d->shape[0] != a->shape[0] ||
        d->shape[1] != a->shape[1] || !cr_dtype_is_float((cr_dtype)d->dtype))
        return CR_OK;
    *ok = true;
    return band_of(arena, wdt, d, b);
}

/* op(m) as a row step and a column step: op(m)(i, j) = data[i rs + j cs], conjugated when
 * m->trans is 2. */
static void mat_steps(const cr__mat *m, size_t *rs, size_t *cs)
{
    *rs = m->trans ? 1 : m->ld;
    *cs = m->trans ? m->ld : 1;
}

/* BAND_KERNELS(T, SFX, CJ): for the element type T (CJ its conjugation)
 * - band_left: Y = alpha op(T) X + beta Y, op(T) T or Tᴴ (adj), X = op(x) n x p;
 * - band_right: Y = alpha X op(T) + beta Y, X = op(x) m x n;
 * - band_cot: out(i, j) = s (op(L) op(R))(i, j) on the three central diagonals, out holding
 *   them compactly: (i, j) at 2 i + j (band_cot_new).
 * Y is row-major with leading dimension ldc. */
#define BAND_KERNELS(T, SFX, CJ)                                                                   \
    static void band_left_##SFX(const band *b, bool adj, const cr__mat *x, T alpha, T beta, T *Y,  \
                                size_t ldc)                                                        \
    {                                                                                              \
        const T *dl = b->dl, *d = b->d, *du = b->du, *X = x->data;                                 \
        size_t n = b->n, p = cr__mat_cols(x), rs, cs;                                              \
        mat_steps(x, &rs, &cs);                                                                    \
        bool cx = x->trans == 2;                                                                   \
        for (size_t i = 0; i < n; i++) {                                                           \
            T lo = i > 0 ? (adj ? CJ(du[i - 1]) : dl[i - 1]) : 0;                                  \
            T di = adj ? CJ(d[i]) : d[i];                                                          \
            T up = i + 1 < n ? (adj ? CJ(dl[i]) : du[i]) : 0;                                      \
            const T *x0 = X + i * rs;                                                              \
            for (size_t c = 0; c < p; c++) {                                                       \
                const T *xc = x0 + c * cs;                                                         \
                T v = di * (cx ? CJ(xc[0]) : xc[0]);                                               \
                if (i > 0)                                                                         \
                    v += lo * (cx ? CJ(xc[-(ptrdiff_t)rs]) : xc[-(ptrdiff_t)rs]);                  \
                if (i + 1 < n)                                                                     \
                    v += up * (cx ? CJ(xc[rs]) : xc[rs]);                                          \
                T *yc = Y + i * ldc + c;                                                           \
                *yc = alpha * v + (beta == 0 ? 0 : beta * *yc);                                    \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void band_right_##SFX(const cr__mat *x, const band *b, bool adj, T alpha, T beta, T *Y, \
                                 size_t ldc)                                                       \
    {                                                                                              \
        const T *dl = b->dl, *d = b->d, *du = b->du, *X = x->data;                                 \
        size_t m = cr__mat_rows(x), n = b->n, rs, cs;                                              \
        mat_steps(x, &rs, &cs);                                                                    \
        bool cx = x->trans == 2;                                                                   \
        for (size_t r = 0; r < m; r++) {                                                           \
            const T *x0 = X + r * rs;                                                              \
            for (size_t j = 0; j < n; j++) {                                                       \
                const T *xj = x0 + j * cs;                                                         \
                T x1 = cx ? CJ(xj[0]) : xj[0], t1 = adj ? CJ(d[j]) : d[j];                         \
                T v = x1 * t1;                                                                     \
                if (j > 0) {                                                                       \
                    T x0v = cx ? CJ(xj[-(ptrdiff_t)cs]) : xj[-(ptrdiff_t)cs];                      \
                    T t0 = adj ? CJ(dl[j - 1]) : du[j - 1];                                        \
                    v += x0v * t0;                                                                 \
                }                                                                                  \
                if (j + 1 < n) {                                                                   \
                    T x2 = cx ? CJ(xj[cs]) : xj[cs], t2 = adj ? CJ(du[j]) : dl[j];                 \
                    v += x2 * t2;                                                                  \
                }                                                                                  \
                T *yc = Y + r * ldc + j;                                                           \
                *yc = alpha * v + (beta == 0 ? 0 : beta * *yc);                                    \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
                                                                                                   \
    static void band_cot_##SFX(const cr__mat *L, const cr__mat *R, T s, T *out)                    \
    {                                                                                              \
        const T *l = L->data, *r = R->data;                                                        \
        size_t n = cr__mat_rows(L), k = cr__mat_cols(L), lr, lc, rr, rc;                           \
        mat_steps(L, &lr, &lc);                                                                    \
        mat_steps(R, &rr, &rc);                                                                    \
        bool cl = L->trans == 2, cq = R->trans == 2;                                               \
        for (size_t i = 0; i < n; i++)                                                             \
            for (size_t j = i > 0 ? i - 1 : 0; j < n && j <= i + 1; j++) {                         \
                T acc = 0;                                                                         \
                for (size_t q = 0; q < k; q++) {                                                   \
                    T a = l[i * lr + q * lc], c = r[q * rr + j * rc];                              \
                    T fa = cl ? CJ(a) : a, fc = cq ? CJ(c) : c;                                    \
                    acc += fa * fc;                                                                \
                }                                                                                  \
                out[i + i + j] = s * acc;                                                          \
            }                                                                                      \
    }

#define BAND_ID(x) (x)
BAND_KERNELS(double, f64, BAND_ID)
BAND_KERNELS(cr_complex, c128, conj)
#undef BAND_ID
#undef BAND_KERNELS

static void band_left(cr_dtype wdt, const band *b, bool adj, const cr__mat *x, cr_complex alpha,
                      cr_complex beta, void *Y, size_t ldc)
{
    if (wdt == CR_DT_C128)
        band_left_c128(b, adj, x, alpha, beta, Y, ldc);
    else
        band_left_f64(b, adj, x, creal(alpha), creal(beta), Y, ldc);
}

static void band_right(cr_dtype wdt, const cr__mat *x, const band *b, bool adj, cr_complex alpha,
                       cr_complex beta, void *Y, size_t ldc)
{
    if (wdt == CR_DT_C128)
        band_right_c128(x, b, adj, alpha, beta, Y, ldc);
    else
        band_right_f64(x, b, adj, creal(alpha), creal(beta), Y, ldc);
}

/* The cotangent of an operand of a product with a band operand, lazily: kind 0 the band
 * operand's (s op(L) op(R) on the band, zero elsewhere), kind 1 the right operand's
 * (s Tᴴ G, band_left), kind 2 the left operand's (s G Tᴴ, band_right). */
typedef struct band_thunk {
    const cr_array *like; /* the argument */
    cr_project *p;
    cr_dtype wdt;
    int kind;
    cr__mat L, R; /* kind 0: the factors; kinds 1, 2: L is G */
    const band *b;
    cr_complex s;
} band_thunk;

/* The band operand's cotangent s op(L) op(R), already projected onto the operand a: an
 * n x n array of a's structure and dtype whose strides (2, 1) put (i, i) at 3i, (i, i+1) at
 * 3i + 1 and (i+1, i) at 3i + 2, so that its 3n - 2 stored elements are the three central
 * diagonals (the entries off the band, logically zero, alias them: the array is never an
 * in-place destination). SymTridiagonal's off-diagonal is symmetrised, the diagonal a
 * Bidiagonal does not read is zero, a real operand's entries are real: ProjectTo's result in
 * O(n) memory and O(n k) time, k the inner extent. */
static cr_status band_cot_new(cr_arena *arena, const band_thunk *t, cr_tangent *out)
{
    const cr_array *a = t->like;
    size_t n = a->shape[0], m = n > 0 ? n + (n - 1) + (n - 1) : 1;
    cr_dtype dt = (cr_dtype)a->dtype;
    cr_array *w, *r;
    cr_status st = cr__new(arena, t->wdt, 1, &m, false, &w);
    if (st != CR_OK)
        return st;
    if (t->wdt == CR_DT_C128)
        band_cot_c128(&t->L, &t->R, t->s, w->data);
    else
        band_cot_f64(&t->L, &t->R, creal(t->s), w->data);
    r = w;
    if (dt != t->wdt && (st = cr__new(arena, dt, 1, &m, false, &r)) != CR_OK)
        return st;
    bool cplx = dt == CR_DT_C128;
    for (size_t i = 0, k = 0; i < n; i++, k += 3) {
        cr_complex v[3] = {cr__load(w, (ptrdiff_t)k), 0, 0};
        if (i + 1 < n) {
            v[1] = cr__load(w, (ptrdiff_t)k + 1);
            v[2] = cr__load(w, (ptrdiff_t)k + 2);
        }
        cr__band_store(r, k, m, a->structure, v, 3, cplx);
    }
    r->ndim = 2;
    r->shape[0] = r->shape[1] = n;
    r->strides[0] = 2;
    r->strides[1] = 1;
    r->structure = a->structure;
    r->flags = 0; /* aliased storage: never written in place */
    return cr__give(arena, t->p, r, out);
}

static cr_status band_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    band_thunk *t = env;
    if (t->kind == 0)
        return band_cot_new(arena, t, out);
    cr_array *r = NULL;
    cr_status st = cr__new_like(arena, t->wdt, t->like, false, &r);
    if (st != CR_OK)
        return st;
    if (t->kind == 1) {
        band_left(t->wdt, t->b, true, &t->L, t->s, 0.0, r->data, cr__mat_cols(&t->L));
    } else {
        band_right(t->wdt, &t->L, t->b, true, t->s, 0.0, r->data, t->b->n);
    }
    return cr__give(arena, t->p, r, out);
}

static cr_status band_thunk_new(cr_arena *arena, const band_thunk *v, cr_tangent *out)
{
    CR__ARENA_NEW(arena, band_thunk, t);
    *t = *v;
    return cr__thunk(arena, band_thunk_fn, NULL, t, "band_product_pullback_thunk", out);
}

/* ---- matmul ---------------------------------------------------------------------------- */

typedef struct matmul_env {
    operand A, B;
    cr_project *pA, *pB;
    cr_dtype wdt;
    size_t ndim;
    size_t shape[2];
    int band_side; /* 0; 1: A is a band matrix read as bd (A.m unset); 2: B is */
    band bd;
} matmul_env;

/* Ā = Ȳ Bᴴ, B̄ = Aᴴ Ȳ (thunks; add! accumulates with gemm). */
/* The cotangents of the perturbable operands of the product A B in m: Ā = s Ȳ Bᴴ into *dA,
 * B̄ = s Aᴴ Ȳ into *dB (thunks; G is Ȳ). */
static cr_status operand_cots(cr_arena *arena, const matmul_env *m, const cr__mat *G, cr_complex s,
                              cr_tangent *dA, cr_tangent *dB)
{
    cr__mat h = {0};
    cr_status st = CR_OK;
    if (m->band_side != 0) {
        bool left = m->band_side == 1;
        const operand *o = left ? &m->B : &m->A; /* the dense operand */
        if (left ? m->A.diff : m->B.diff) {      /* the band operand: on its band */
            st = cr__mat_adj(arena, m->wdt, &o->m, &h);
            band_thunk v = {left ? m->A.a : m->B.a, left ? m->pA : m->pB, m->wdt, 0,
                            left ? *G : h,          left ? h : *G,        &m->bd, s};
            if (st == CR_OK)
                st = band_thunk_new(arena, &v, left ? dA : dB);
        }
        if (st == CR_OK && o->diff) { /* B̄ = s Tᴴ Ȳ or Ā = s Ȳ Tᴴ */
            band_thunk v = {o->a, left ? m->pB : m->pA, m->wdt, left ? 1 : 2, *G, {0}, &m->bd, s};
            st = band_thunk_new(arena, &v, left ? dB : dA);
        }
        return st;
    }
    if (m->A.diff) {
        st = cr__mat_adj(arena, m->wdt, &m->B.m, &h);
        if (st == CR_OK)
            st = prod_thunk_new(arena, m->A.a, m->pA, m->wdt, G, &h, s, dA);
    }
    if (st == CR_OK && m->B.diff) {
        st = cr__mat_adj(arena, m->wdt, &m->A.m, &h);
        if (st == CR_OK)
            st = prod_thunk_new(arena, m->B.a, m->pB, m->wdt, &h, G, s, dB);
    }
    return st;
}

static cr_status matmul_pullback(CR__PULLBACK_PARAMS)
{
    matmul_env *e = env;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr__mat G;
    cr_status st =
        cot_mat(arena, "matmul_pullback", *dy, e->A.a, e->ndim, e->shape, e->wdt, &g, &G);
    if (st != CR_OK)
        return st;
    if (g == NULL) {
        dx[1] = e->A.diff ? cr_tangent_zero() : cr_tangent_none();
        dx[2] = e->B.diff ? cr_tangent_zero() : cr_tangent_none();
        return CR_OK;
    }
    return operand_cots(arena, e, &G, 1.0, &dx[1], &dx[2]);
}

/* Parse and compute Y = A B (work dtype). */
static cr_status matmul_forward(cr_arena *arena, const char *who, const cr_value *args,
                                size_t nargs, bool band_ok, matmul_env *e, cr_dtype *dt,
                                cr_array **w)
{
    const cr_array *A, *B;
    cr_status st = two_arrays(arena, who, args, nargs, &A, &B);
    if (st == CR_OK)
        st = product_shape(arena, who, A, B, &e->ndim, e->shape);
    if (st != CR_OK)
        return st;
    cr_dtype d = cr__promote(cr__value_dtype(&args[0]), cr__value_dtype(&args[1]));
    *dt = d == 0 ? CR_DT_F64 : d;
    e->wdt = cr__work(*dt);
    size_t numel; /* m x n of two arguments' extents: A (m x 0) B (0 x n) has no bound */
    st = cr__ck_numel(cr_arena_ctx(arena), who, e->ndim, e->shape, cr_dtype_size(e->wdt), &numel);
    if (st != CR_OK)
        return st;
    e->A = (operand){A, {0}, cr__is_diff(&args[0])};
    e->B = (operand){B, {0}, cr__is_diff(&args[1])};
    e->band_side = !band_ok ? 0 : is_band(A->structure) ? 1 : is_band(B->structure) ? 2 : 0;
    if (e->band_side != 1)
        st = cr__as_mat(arena, A, e->wdt, true, &e->A.m);
    if (st == CR_OK && e->band_side != 2)
        st = cr__as_mat(arena, B, e->wdt, false, &e->B.m);
    if (st == CR_OK && e->band_side != 0)
        st = band_of(arena, e->wdt, e->band_side == 1 ? A : B, &e->bd);
    if (st == CR_OK)
        st = cr__new(arena, e->wdt, e->ndim, e->shape, false, w);
    if (st != CR_OK)
        return st;
    if (e->band_side == 1)
        band_left(e->wdt, &e->bd, false, &e->B.m, 1.0, 0.0, (*w)->data, cr__mat_cols(&e->B.m));
    else if (e->band_side == 2)
        band_right(e->wdt, &e->A.m, &e->bd, false, 1.0, 0.0, (*w)->data, e->bd.n);
    else
        cr__gemm(e->wdt, &e->A.m, &e->B.m, 1.0, 0.0, (*w)->data, cr__mat_cols(&e->B.m));
    return CR_OK;
}

/* t (of the output's columns) = alpha (Ȧ B + A Ḃ) + beta t, for the tangents dA and dB (NULL
 * when zero) of the operands of m. */
static cr_status operand_tangents(cr_arena *arena, const matmul_env *m, const cr_array *dA,
                                  const cr_array *dB, cr_complex alpha, cr_complex beta, void *t)
{
    size_t ldc = cr__mat_cols(&m->B.m);
    cr__mat d;
    cr_status st = CR_OK;
    if (dA != NULL) {
        st = cr__as_mat(arena, dA, m->wdt, true, &d);
        if (st != CR_OK)
            return st;
        cr__gemm(m->wdt, &d, &m->B.m, alpha, beta, t, ldc);
        beta = 1.0;
    }
    if (dB != NULL) {
        st = cr__as_mat(arena, dB, m->wdt, false, &d);
        if (st == CR_OK)
            cr__gemm(m->wdt, &m->A.m, &d, alpha, beta, t, ldc);
    }
    return st;
}

typedef struct gemm_env gemm_env;
static cr_status gemm_forward(cr_arena *arena, const cr_value *args, size_t nargs, gemm_env *e,
                              cr_dtype *dt, cr_array **w);

/* *y = the output of matmul (g NULL; its parts in e) or gemm (in g, e its product): the forward
 * pass cast to the output's dtype. */
static cr_status prod_primal(cr_arena *arena, const cr_value *args, size_t nargs, matmul_env *e,
                             gemm_env *g, cr_value *y)
{
    cr_dtype dt = CR_DT_F64;
    cr_array *w, *o;
    cr_status st = g != NULL ? gemm_forward(arena, args, nargs, g, &dt, &w)
                             : matmul_forward(arena, "matmul", args, nargs, true, e, &dt, &w);
    if (st == CR_OK)
        st = cr__cast(arena, w, dt, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

/* matmul(A, B) = A B. */
static cr_status matmul_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, matmul_env, e);
    cr_status st = prod_primal(arena, args, nargs, e, NULL, y);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail2(arena, args, udata, &e->pA, &e->pB, y->u.arr, y, pb,
                           (cr_pullback){matmul_pullback, e, "matmul_pullback", nargs + 1});
}
CR__ARRAY_FN(matmul, "matmul", 2)

/* t = Ȧ B + A Ḃ with the band operand's tangent read on its band when it carries a band tag
 * (densified and through gemm otherwise), the other's applied to the band operand. */
static cr_status band_tangent(cr_arena *arena, const matmul_env *e, const cr_tangent *dargs,
                              const cr_value *args, void *t, bool *none)
{
    bool left = e->band_side == 1;
    size_t ib = left ? 0 : 1, io = 1 - ib; /* the band and the other argument */
    const cr_array *bt = NULL, *ot = NULL;
    band tb;
    bool have_b = false;
    cr_status st = CR_OK;
    if (cr__is_diff(&args[ib])) {
        st = band_of_tangent(arena, e->wdt, args[ib].u.arr, dargs[ib + 1], &tb, &have_b);
        if (st == CR_OK && !have_b)
            st = cr__dx_array(arena, "matmul", dargs, args, ib, e->wdt, &bt);
    }
    if (st == CR_OK)
        st = cr__dx_array(arena, "matmul", dargs, args, io, e->wdt, &ot);
    *none = st == CR_OK && !have_b && bt == NULL && ot == NULL;
    if (st != CR_OK || *none)
        return st;
    size_t ldc = left ? cr__mat_cols(&e->B.m) : e->bd.n;
    cr_complex beta = 0.0;
    cr__mat d = {0};
    if (have_b || bt != NULL) { /* the band operand's tangent times the other operand */
        if (bt != NULL)
            st = cr__as_mat(arena, bt, e->wdt, left, &d);
        if (st != CR_OK)
            return st;
        if (have_b && left)
            band_left(e->wdt, &tb, false, &e->B.m, 1.0, beta, t, ldc);
        else if (have_b)
            band_right(e->wdt, &e->A.m, &tb, false, 1.0, beta, t, ldc);
        else
            cr__gemm(e->wdt, left ? &d : &e->A.m, left ? &e->B.m : &d, 1.0, beta, t, ldc);
        beta = 1.0;
    }
    if (ot != NULL) { /* the band operand times the other's tangent */
        st = cr__as_mat(arena, ot, e->wdt, !left, &d);
        if (st != CR_OK)
            return st;
        if (left)
            band_left(e->wdt, &e->bd, false, &d, 1.0, beta, t, ldc);
        else
            band_right(e->wdt, &d, &e->bd, false, 1.0, beta, t, ldc);
    }
    return CR_OK;
}

/* frule: Ẏ = Ȧ B + A Ḃ. */
static cr_status matmul_frule(CR__FRULE_PARAMS)
{
    matmul_env e;
    memset(&e, 0, sizeof e);
    const cr_array *dA, *dB;
    bool none = false;
    cr_status st = prod_primal(arena, args, nargs, &e, NULL, y);
    if (st == CR_OK && e.band_side != 0) {
        cr_array *t;
        st = cr__new(arena, e.wdt, e.ndim, e.shape, false, &t);
        if (st == CR_OK)
            st = band_tangent(arena, &e, dargs, args, t->data, &none);
        if (st != CR_OK)
            return st;
        if (none) {
            *dy = cr_tangent_zero();
            return CR_OK;
        }
        return cr_project_tangent(arena, y, cr_tangent_array(t), dy);
    }
    if (st == CR_OK)
        st = cr__frule_pair(arena, "matmul", dargs, args, e.wdt, y->u.arr, y, &dA, &dB, dy, &none);
    if (st != CR_OK || none)
        return st;
    cr_array *t;
    st = cr__new(arena, e.wdt, e.ndim, e.shape, false, &t);
    if (st == CR_OK)
        st = operand_tangents(arena, &e, dA, dB, 1.0, 0.0, t->data);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(t), dy);
}

/* ---- gemm: alpha A B + beta C ------------------------------------------------------------ */

struct gemm_env {
    matmul_env mm;     /* A, B, shapes */
    const cr_array *P; /* A B (work) */
    const cr_array *C; /* C (work, contiguous) */
    cr_complex alpha, beta;
    bool d_alpha, d_beta, d_C;
    cr_project *p_alpha, *p_beta, *pC;
    const cr_array *Carg;
};

static cr_status gemm_forward(cr_arena *arena, const cr_value *args, size_t nargs, gemm_env *e,
                              cr_dtype *dt, cr_array **w)
{
    cr_status st = cr__nargs(arena, "gemm", nargs, 5, 5);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < 5; i += 3) {
        const cr_value *v = &args[i];
        bool num = v->kind == CR_KIND_F64 || v->kind == CR_KIND_F32 || v->kind == CR_KIND_C128 ||
                   v->kind == CR_KIND_I64 || v->kind == CR_KIND_I32 || v->kind == CR_KIND_BOOL;
        if (!num)
            return CR__FAIL(arena, CR_EINVAL, "gemm: argument %zu (%s) must be a number", i + 1,
                            i == 0 ? "alpha" : "beta");
    }
    const cr_array *C;
    st = cr__array_arg(arena, "gemm", args, nargs, 4, &C);
    if (st != CR_OK)
        return st;
    cr_value ab[2] = {args[1], args[2]};
    cr_array *P;
    cr_dtype pdt;
    st = matmul_forward(arena, "gemm", ab, 2, false, &e->mm, &pdt, &P);
    if (st != CR_OK)
        return st;
    if (C->ndim != e->mm.ndim || C->shape[0] != e->mm.shape[0] ||
        (C->ndim == 2 && C->shape[1] != e->mm.shape[1])) {
        char s1[96];
        return CR__FAIL(arena, CR_ESHAPE, "gemm: C has shape %s, A B does not",
                        cr__shape_str(C, s1, sizeof s1));
    }
    cr_dtype d = cr__promote(cr__promote(pdt, cr__value_dtype(&args[0])),
                             cr__promote(cr__value_dtype(&args[3]), cr__value_dtype(&args[4])));
    *dt = d;
    cr_dtype wdt = cr__work(d);
    if (wdt != e->mm.wdt) {
        /* A complex alpha, beta or C with real A and B: redo the product in complex. */
        const cr_array *Pc;
        st = cr__dense(arena, P, wdt, &Pc);
        if (st != CR_OK)
            return st;
        P = (cr_array *)Pc;
        st = cr__as_mat(arena, e->mm.A.a, wdt, true, &e->mm.A.m);
        if (st == CR_OK)
            st = cr__as_mat(arena, e->mm.B.a, wdt, false, &e->mm.B.m);
        if (st != CR_OK)
            return st;
        e->mm.wdt = wdt;
    }
    const cr_array *Cw;
    st = cr__dense(arena, C, wdt, &Cw);
    if (st != CR_OK)
        return st;
    e->P = P;
    e->C = Cw;
    e->Carg = C;
    e->alpha = cr__scalar_of(&args[0]);
    e->beta = cr__scalar_of(&args[3]);
    e->d_alpha = cr__is_diff(&args[0]);
    e->d_beta = cr__is_diff(&args[3]);
    e->d_C = cr__is_diff(&args[4]);
    st = cr__new_like(arena, wdt, Cw, false, w);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(Cw);
    if (wdt == CR_DT_C128) {
        const cr_complex *p = P->data, *c = Cw->data;
        cr_complex *y = (*w)->data;
        for (size_t i = 0; i < n; i++)
            y[i] = e->alpha * p[i] + (e->beta == 0 ? 0 : e->beta * c[i]);
    } else {
        const double *p = P->data, *c = Cw->data;
        double *y = (*w)->data, a = creal(e->alpha), b = creal(e->beta);
        for (size_t i = 0; i < n; i++)
            y[i] = a * p[i] + (b == 0 ? 0 : b * c[i]);
    }
    return CR_OK;
}

/* ᾱ = <A B, Ȳ>, Ā = conj(α) Ȳ Bᴴ, B̄ = conj(α) Aᴴ Ȳ, β̄ = <C, Ȳ>, C̄ = conj(β) Ȳ. */
static cr_status gemm_pullback(CR__PULLBACK_PARAMS)
{
    gemm_env *e = env;
    matmul_env *m = &e->mm;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr__mat G;
    cr_status st = cot_mat(arena, "gemm_pullback", *dy, m->A.a, m->ndim, m->shape, m->wdt, &g, &G);
    if (st != CR_OK || g == NULL) {
        dx[1] = e->d_alpha ? cr_tangent_zero() : cr_tangent_none();
        dx[2] = m->A.diff ? cr_tangent_zero() : cr_tangent_none();
        dx[3] = m->B.diff ? cr_tangent_zero() : cr_tangent_none();
        dx[4] = e->d_beta ? cr_tangent_zero() : cr_tangent_none();
        dx[5] = e->d_C ? cr_tangent_zero() : cr_tangent_none();
        return st;
    }
    size_t n = cr_array_numel(g);
    if (e->d_alpha) {
        cr_complex a = cr__dotc(m->wdt, n, e->P->data, g->data);
        st = cr_project_apply(arena, e->p_alpha, cr__scalar_tangent(m->wdt, a), &dx[1]);
        if (st != CR_OK)
            return st;
    }
    if (e->d_beta) {
        cr_complex b = cr__dotc(m->wdt, n, e->C->data, g->data);
        st = cr_project_apply(arena, e->p_beta, cr__scalar_tangent(m->wdt, b), &dx[4]);
        if (st != CR_OK)
            return st;
    }
    st = operand_cots(arena, m, &G, conj(e->alpha), &dx[2], &dx[3]);
    if (st != CR_OK)
        return st;
    if (e->d_C) {
        cr_array *c;
        st = cr__new_like(arena, m->wdt, g, false, &c);
        if (st != CR_OK)
            return st;
        cr__broadcast_into(c, g, conj(e->beta));
        st = cr__give(arena, e->pC, c, &dx[5]);
    }
    return st;
}

static cr_status gemm_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, gemm_env, e);
    cr_status st = prod_primal(arena, args, nargs, &e->mm, e, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    cr_project **p;
    st = cr__projectors(arena, args, nargs, &p);
    if (st != CR_OK)
        return st;
    e->p_alpha = p[0];
    e->mm.pA = p[1];
    e->mm.pB = p[2];
    e->p_beta = p[3];
    e->pC = p[4];
    *pb = (cr_pullback){gemm_pullback, e, "gemm_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(gemm, "gemm", 5)

/* frule: Ẏ = α̇ A B + α (Ȧ B + A Ḃ) + β̇ C + β Ċ. */
static cr_status gemm_frule(CR__FRULE_PARAMS)
{
    gemm_env e;
    memset(&e, 0, sizeof e);
    cr_status st = prod_primal(arena, args, nargs, &e.mm, &e, y);
    if (st != CR_OK)
        return st;
    cr_dtype wdt = e.mm.wdt;
    cr_complex da = 0, db = 0;
    bool nza = false, nzb = false;
    if (e.d_alpha)
        st = cr__tan_scalar(arena, "gemm", dargs[1], &da, &nza);
    if (st == CR_OK && e.d_beta)
        st = cr__tan_scalar(arena, "gemm", dargs[4], &db, &nzb);
    const cr_array *dA = NULL, *dB = NULL, *dC = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, "gemm", dargs, args, 1, wdt, &dA);
    if (st == CR_OK)
        st = cr__dx_array(arena, "gemm", dargs, args, 2, wdt, &dB);
    if (st == CR_OK)
        st = cr__dx_array(arena, "gemm", dargs, args, 4, wdt, &dC);
    if (st != CR_OK)
        return st;
    if (!nza && !nzb && dA == NULL && dB == NULL && dC == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *t;
    st = cr__new_like(arena, wdt, e.C, true, &t);
    if (st != CR_OK)
        return st;
    st = operand_tangents(arena, &e.mm, dA, dB, e.alpha, 1.0, t->data);
    if (st != CR_OK)
        return st;
    if (nza)
        cr__axpy(da, e.P, t);
    if (nzb)
        cr__axpy(db, e.C, t);
    if (dC != NULL)
        cr__axpy(e.beta, dC, t);
    return cr_project_tangent(arena, y, cr_tangent_array(t), dy);
}

/* ---- dot ------------------------------------------------------------------------------ */

typedef struct dot_env {
    const cr_value *args;         /* not kept: copied below */
    const cr_array *x, *A, *y;    /* work, contiguous (A may be NULL) */
    const cr_array *xa, *Aa, *ya; /* the arguments */
    const cr_array *Ay;           /* A y (3 arguments) */
    cr_project *px, *pA, *py;
    bool dx, dA, dy;
    cr_dtype wdt;
} dot_env;

/* dot(x, y): x̄ = y conj(ȳ), ȳ_y = x ȳ; dot(x, A, y): x̄ = A y conj(ȳ), Ā = ȳ x yᴴ,
 * ȳ_y = ȳ Aᴴ x. */
typedef struct dot_thunk {
    const dot_env *e;
    cr_complex g;
    int which; /* 0 x, 1 A, 2 y */
} dot_thunk;

static cr_status dot_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    dot_thunk *t = env;
    const dot_env *e = t->e;
    cr_dtype wdt = e->wdt;
    const cr_array *like = t->which == 0 ? e->xa : t->which == 1 ? e->Aa : e->ya;
    cr_project *p = t->which == 0 ? e->px : t->which == 1 ? e->pA : e->py;
    cr_array *r = NULL;
    cr_status st = cr__new_like(arena, wdt, like, false, &r);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(r);
    if (e->A == NULL) {
        /* x̄ = conj(ȳ) y, ȳ_y = ȳ x (elementwise, in the arguments' shapes). */
        const cr_array *src = t->which == 0 ? e->y : e->x;
        cr_complex s = t->which == 0 ? conj(t->g) : t->g;
        for (size_t i = 0; i < n; i++)
            cr__store(r, (ptrdiff_t)i, s * cr__load(src, (ptrdiff_t)i));
    } else if (t->which == 0) {
        for (size_t i = 0; i < n; i++)
            cr__store(r, (ptrdiff_t)i, conj(t->g) * cr__load(e->Ay, (ptrdiff_t)i));
    } else if (t->which == 1) {
        size_t m = e->x->shape[0], k = e->y->shape[0];
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < k; j++)
                cr__store(r, (ptrdiff_t)(i * k + j),
                          t->g * cr__load(e->x, (ptrdiff_t)i) * conj(cr__load(e->y, (ptrdiff_t)j)));
    } else {
        cr__mat Am, Ah, xm;
        st = cr__as_mat(arena, e->A, wdt, false, &Am);
        if (st == CR_OK)
            st = cr__mat_adj(arena, wdt, &Am, &Ah);
        if (st == CR_OK)
            st = cr__as_mat(arena, e->x, wdt, false, &xm);
        if (st != CR_OK)
            return st;
        cr__gemm(wdt, &Ah, &xm, t->g, 0.0, r->data, 1);
    }
    return cr__give(arena, p, r, out);
}

static cr_status dot_pullback(CR__PULLBACK_PARAMS)
{
    dot_env *e = env;
    cr__dx_none(dx, nx);
    cr_complex g;
    bool nz;
    cr_status st = cr__tan_scalar(arena, "dot_pullback", *dy, &g, &nz);
    if (st != CR_OK)
        return st;
    bool diffs[3] = {e->dx, e->dA, e->dy};
    size_t slot = 1;
    for (int which = 0; which < 3; which++) {
        if (which == 1 && e->A == NULL)
            continue;
        if (!diffs[which]) {
            slot++;
            continue;
        }
        if (!nz) {
            dx[slot++] = cr_tangent_zero();
            continue;
        }
        CR__ARENA_NEW(arena, dot_thunk, t);
        *t = (dot_thunk){e, g, which};
        st = cr__thunk(arena, dot_thunk_fn, NULL, t, "dot_pullback_thunk", &dx[slot++]);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status dot_forward(cr_arena *arena, const cr_value *args, size_t nargs, dot_env *e,
                             cr_dtype *dt, cr_complex *val)
{
    cr_status st = cr__nargs(arena, "dot", nargs, 2, 3);
    const cr_array *x, *y, *A = NULL;
    if (st == CR_OK)
        st = cr__array_arg(arena, "dot", args, nargs, 0, &x);
    if (st == CR_OK)
        st = cr__array_arg(arena, "dot", args, nargs, nargs - 1, &y);
    if (st == CR_OK && nargs == 3)
        st = cr__array_arg(arena, "dot", args, nargs, 1, &A);
    if (st != CR_OK)
        return st;
    cr_dtype d = (cr_dtype)0;
    for (size_t i = 0; i < nargs; i++)
        d = cr__promote(d, cr__value_dtype(&args[i]));
    *dt = d == 0 ? CR_DT_F64 : d;
    e->wdt = cr__work(*dt);
    e->xa = x;
    e->ya = y;
    e->Aa = A;
    e->dx = cr__is_diff(&args[0]);
    e->dy = cr__is_diff(&args[nargs - 1]);
    e->dA = nargs == 3 && cr__is_diff(&args[1]);
    st = cr__dense(arena, x, e->wdt, &e->x);
    if (st == CR_OK)
        st = cr__dense(arena, y, e->wdt, &e->y);
    if (st != CR_OK)
        return st;
    if (A == NULL) {
        if (cr_array_numel(x) != cr_array_numel(y))
            return CR__FAIL(arena, CR_ESHAPE, "dot: %zu and %zu element%s", cr_array_numel(x),
                            cr_array_numel(y), CR__S(cr_array_numel(y)));
        *val = cr__dotc(e->wdt, cr_array_numel(x), e->x->data, e->y->data);
        return CR_OK;
    }
    if (x->ndim != 1 || y->ndim != 1 || A->ndim != 2 || A->shape[0] != x->shape[0] ||
        A->shape[1] != y->shape[0])
        return CR__FAIL(arena, CR_ESHAPE,
                        "dot(x, A, y): x of length m, A m x n, y of length n expected");
    st = cr__dense(arena, A, e->wdt, &e->A);
    cr_array *Ay;
    if (st == CR_OK)
        st = cr__new(arena, e->wdt, 1, x->shape, false, &Ay);
    cr__mat Am, ym;
    if (st == CR_OK)
        st = cr__as_mat(arena, e->A, e->wdt, false, &Am);
    if (st == CR_OK)
        st = cr__as_mat(arena, e->y, e->wdt, false, &ym);
    if (st != CR_OK)
        return st;
    cr__gemm(e->wdt, &Am, &ym, 1.0, 0.0, Ay->data, 1);
    e->Ay = Ay;
    *val = cr__dotc(e->wdt, x->shape[0], e->x->data, Ay->data);
    return CR_OK;
}

static cr_status dot_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_ZNEW(arena, dot_env, e);
    cr_dtype dt = CR_DT_F64;
    cr_complex v;
    cr_status st = dot_forward(arena, args, nargs, e, &dt, &v);
    if (st != CR_OK)
        return st;
    *y = cr__scalar_value(dt, v);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    st = cr_project_new(arena, &args[nargs - 1], &e->py);
    if (st == CR_OK && nargs == 3)
        st = cr_project_new(arena, &args[1], &e->pA);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail1(arena, &args[0], udata, &e->px, pb,
                           (cr_pullback){dot_pullback, e, "dot_pullback", nargs + 1});
}
CR__ARRAY_FN(dot, "dot", -1)

/* frule: dot(ẋ, y) + dot(x, ẏ); with A: ẋᴴ A y + xᴴ Ȧ y + xᴴ A ẏ. */
static cr_status dot_frule(CR__FRULE_PARAMS)
{
    dot_env e;
    memset(&e, 0, sizeof e);
    cr_dtype dt = CR_DT_F64;
    cr_complex v;
    cr_status st = dot_forward(arena, args, nargs, &e, &dt, &v);
    if (st != CR_OK)
        return st;
    *y = cr__scalar_value(dt, v);
    const cr_array *tx, *ty, *tA = NULL;
    st = cr__dx_array(arena, "dot", dargs, args, 0, e.wdt, &tx);
    if (st == CR_OK)
        st = cr__dx_array(arena, "dot", dargs, args, nargs - 1, e.wdt, &ty);
    if (st == CR_OK && nargs == 3)
        st = cr__dx_array(arena, "dot", dargs, args, 1, e.wdt, &tA);
    if (st != CR_OK)
        return st;
    if (tx == NULL && ty == NULL && tA == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_complex t = 0;
    if (nargs == 2) {
        size_t n = cr_array_numel(e.x);
        if (tx != NULL)
            t += cr__dotc(e.wdt, n, tx->data, e.y->data);
        if (ty != NULL)
            t += cr__dotc(e.wdt, n, e.x->data, ty->data);
    } else {
        size_t m = e.x->shape[0], k = e.y->shape[0];
        if (tx != NULL)
            t += cr__dotc(e.wdt, m, tx->data, e.Ay->data);
        for (size_t i = 0; i < m && (tA != NULL || ty != NULL); i++) {
            cr_complex xi = conj(cr__load(e.x, (ptrdiff_t)i)), acc = 0;
            for (size_t j = 0; j < k; j++) {
                if (tA != NULL)
                    acc += cr__load(tA, (ptrdiff_t)(i * k + j)) * cr__load(e.y, (ptrdiff_t)j);
                if (ty != NULL)
                    acc += cr__load(e.A, (ptrdiff_t)(i * k + j)) * cr__load(ty, (ptrdiff_t)j);
            }
            t += xi * acc;
        }
    }
    *dy = cr__scalar_tangent(dt, t);
    return CR_OK;
}

/* ---- tr -------------------------------------------------------------------------------- */

typedef struct tr_env {
    const cr_array *A;
    cr_project *pA;
    cr_dtype wdt;
} tr_env;

/* Ā = ȳ I (ȳ the thunk's s), built as a Diagonal (n entries) and projected. */
static cr_status tr_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    const cr__pb_thunk *t = env;
    const tr_env *e = t->e;
    size_t n = e->A->shape[0];
    cr_array *d;
    cr_status st = cr__new(arena, e->wdt, 1, &n, false, &d);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        cr__store(d, (ptrdiff_t)i, t->s);
    d->ndim = 2;
    d->shape[1] = n;
    d->strides[0] = 1;
    d->strides[1] = 0;
    d->structure = CR_MAT_DIAGONAL;
    return cr__give(arena, e->pA, d, out);
}

/* The diagonal of dest += ȳ. */
static void tr_add_diag(const cr__pb_thunk *t, cr_array *dest)
{
    size_t n = ((const tr_env *)t->e)->A->shape[0];
    for (size_t i = 0; i < n; i++)
        cr__store(dest, (ptrdiff_t)(i * n + i), cr__load(dest, (ptrdiff_t)(i * n + i)) + t->s);
}

/* add!: the diagonal of dest += ȳ. */
CR__THUNK_ADD(tr_thunk_add, cr__pb_thunk, ((const tr_env *)t->e)->wdt, ((const tr_env *)t->e)->A,
              tr_add_diag(t, dest), tr_thunk_fn)

static cr_status tr_pullback(CR__PULLBACK_PARAMS)
{
    tr_env *e = env;
    cr_complex g;
    bool nz;
    cr_status st = scalar_cot(arena, "tr_pullback", dy, dx, &g, &nz);
    if (st != CR_OK || !nz)
        return st;
    return cr__pb_thunk_new(arena, tr_thunk_fn, tr_thunk_add, e, NULL, g, "tr_pullback_thunk",
                            &dx[1]);
}

/* tr(A) = Σ A_ii: Ā = ȳ I. */
static cr_status tr_rrule(CR__RRULE_PARAMS)
{
    const cr_array *A;
    cr_status st = cr__array_arg1(arena, "tr", args, nargs, &A);
    if (st != CR_OK)
        return st;
    if (A->ndim != 2 || A->shape[0] != A->shape[1] || !cr_dtype_is_float((cr_dtype)A->dtype))
        return CR__FAIL(arena, CR_ESHAPE, "tr: expected a square float matrix");
    size_t n = A->shape[0];
    cr_complex s = 0;
    for (size_t i = 0; i < n; i++)
        s += cr_array_get_linear(A, i * n + i);
    *y = cr__scalar_value((cr_dtype)A->dtype, s);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    CR__ARENA_NEW(arena, tr_env, e);
    e->A = A;
    e->wdt = cr__work((cr_dtype)A->dtype);
    return cr__rrule_tail1(arena, &args[0], udata, &e->pA, pb,
                           (cr_pullback){tr_pullback, e, "tr_pullback", nargs + 1});
}
CR__ARRAY_FN(tr, "tr", 1)

/* ---- kron and cross -------------------------------------------------------------------- */

/* A 1-d or 2-d argument as (rows, cols): a vector is a column. */
static void rc_of(const cr_array *a, size_t *r, size_t *c)
{
    *r = a->shape[0];
    *c = a->ndim == 2 ? a->shape[1] : 1;
}

typedef struct bil_env {
    const cr_array *A, *B; /* work, contiguous */
    const cr_array *Aa, *Ba;
    cr_project *pA, *pB;
    bool dA, dB;
    cr_dtype wdt;
    size_t ndim;
    size_t shape[2];
    bool cross; /* cross, else kron */
} bil_env;

static cr_complex ld(const cr_array *a, size_t i)
{
    return cr__load(a, (ptrdiff_t)i);
}

/* kron: C[(i p + k), (j q + l)] = A[i, j] B[k, l]; cross: c = a × b. out = f(X, Y). */
static void bil_apply(const bil_env *e, const cr_array *X, const cr_array *Y, cr_array *out,
                      bool accumulate)
{
    if (e->cross) {
        cr_complex a0 = ld(X, 0), a1 = ld(X, 1), a2 = ld(X, 2), b0 = ld(Y, 0), b1 = ld(Y, 1),
                   b2 = ld(Y, 2);
        cr_complex c[3] = {a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0};
        for (size_t i = 0; i < 3; i++)
            cr__store(out, (ptrdiff_t)i, c[i] + (accumulate ? ld(out, i) : 0));
        return;
    }
    size_t m, n, p, q;
    rc_of(e->Aa, &m, &n);
    rc_of(e->Ba, &p, &q);
    size_t cols = n * q;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            cr_complex a = ld(X, i * n + j);
            for (size_t k = 0; k < p; k++)
                for (size_t l = 0; l < q; l++) {
                    size_t o = (i * p + k) * cols + j * q + l;
                    cr__store(out, (ptrdiff_t)o,
                              a * ld(Y, k * q + l) + (accumulate ? ld(out, o) : 0));
                }
        }
}

typedef struct bil_thunk {
    const bil_env *e;
    const cr_array *g;
    int which; /* 0: A, 1: B */
} bil_thunk;

/* kron: Ā[i, j] = Σ_kl conj(B[k, l]) C̄[...], B̄[k, l] = Σ_ij conj(A[i, j]) C̄[...];
 * cross: ā = conj(b) × c̄, b̄ = c̄ × conj(a). */
static cr_status bil_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    bil_thunk *t = env;
    const bil_env *e = t->e;
    const cr_array *like = t->which == 0 ? e->Aa : e->Ba;
    cr_array *r = NULL;
    cr_status st = cr__new_like(arena, e->wdt, like, true, &r);
    if (st != CR_OK)
        return st;
    if (e->cross) {
        cr_array *cj;
        st = cr_array_copy(arena, t->which == 0 ? e->B : e->A, &cj);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < 3; i++)
            cr__store(cj, (ptrdiff_t)i, conj(ld(cj, i)));
        bil_env e2 = *e;
        if (t->which == 0)
            bil_apply(&e2, cj, t->g, r, false);
        else
            bil_apply(&e2, t->g, cj, r, false);
        return cr__give(arena, t->which == 0 ? e->pA : e->pB, r, out);
    }
    size_t m, n, p, q;
    rc_of(e->Aa, &m, &n);
    rc_of(e->Ba, &p, &q);
    size_t cols = n * q;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            for (size_t k = 0; k < p; k++)
                for (size_t l = 0; l < q; l++) {
                    cr_complex gv = ld(t->g, (i * p + k) * cols + j * q + l);
                    if (t->which == 0)
                        cr__store(r, (ptrdiff_t)(i * n + j),
                                  ld(r, i * n + j) + conj(ld(e->B, k * q + l)) * gv);
                    else
                        cr__store(r, (ptrdiff_t)(k * q + l),
                                  ld(r, k * q + l) + conj(ld(e->A, i * n + j)) * gv);
                }
    return cr__give(arena, t->which == 0 ? e->pA : e->pB, r, out);
}

static cr_status bil_pullback(CR__PULLBACK_PARAMS)
{
    bil_env *e = env;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st = cr__tan_array(arena, e->cross ? "cross_pullback" : "kron_pullback", *dy, e->ndim,
                                 e->shape, e->wdt, &g);
    if (st != CR_OK)
        return st;
    for (int w = 0; w < 2; w++) {
        if (!(w == 0 ? e->dA : e->dB))
            continue;
        if (g == NULL) {
            dx[w + 1] = cr_tangent_zero();
            continue;
        }
        CR__ARENA_NEW(arena, bil_thunk, t);
        *t = (bil_thunk){e, g, w};
        st = cr__thunk(arena, bil_thunk_fn, NULL, t,
                       e->cross ? "cross_pullback_thunk" : "kron_pullback_thunk", &dx[w + 1]);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

static cr_status bil_forward(cr_arena *arena, bool cross, const cr_value *args, size_t nargs,
                             bil_env *e, cr_dtype *dt, cr_array **w)
{
    const char *who = cross ? "cross" : "kron";
    const cr_array *A, *B;
    cr_status st = two_arrays(arena, who, args, nargs, &A, &B);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)A->dtype) || !cr_dtype_is_float((cr_dtype)B->dtype))
        return CR__FAIL(arena, CR_EINVAL, "%s: expected float arrays", who);
    if (cross ? (A->ndim != 1 || B->ndim != 1 || A->shape[0] != 3 || B->shape[0] != 3)
              : (A->ndim != B->ndim || A->ndim < 1 || A->ndim > 2))
        return CR__FAIL(arena, CR_ESHAPE,
                        cross ? "cross: expected two vectors of length 3"
                              : "kron: expected two vectors or two matrices");
    cr_dtype d = cr__promote((cr_dtype)A->dtype, (cr_dtype)B->dtype);
    *dt = d;
    e->wdt = cr__work(d);
    e->cross = cross;
    e->Aa = A;
    e->Ba = B;
    e->dA = cr__is_diff(&args[0]);
    e->dB = cr__is_diff(&args[1]);
    e->ndim = cross ? 1 : A->ndim;
    if (cross) {
        e->shape[0] = 3;
    } else {
        size_t m, n, p, q;
        rc_of(A, &m, &n);
        rc_of(B, &p, &q);
        cr_ctx *ctx = cr_arena_ctx(arena);
        size_t sh[2], numel;
        if ((st = cr__ck_mul(ctx, who, m, p, &sh[0])) != CR_OK ||
            (st = cr__ck_mul(ctx, who, n, q, &sh[1])) != CR_OK ||
            (st = cr__ck_numel(ctx, who, 2, sh, cr_dtype_size(e->wdt), &numel)) != CR_OK)
            return st;
        e->shape[0] = sh[0];
        e->shape[1] = sh[1];
    }
    st = cr__dense(arena, A, e->wdt, &e->A);
    if (st == CR_OK)
        st = cr__dense(arena, B, e->wdt, &e->B);
    if (st == CR_OK)
        st = cr__new(arena, e->wdt, e->ndim, e->shape, false, w);
    if (st != CR_OK)
        return st;
    bil_apply(e, e->A, e->B, *w, false);
    return CR_OK;
}

static cr_status bil_rrule(cr_arena *arena, bool cross, const cr_value *args, size_t nargs,
                           cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__ARENA_ZNEW(arena, bil_env, e);
    cr_dtype dt = CR_DT_F64;
    cr_array *w, *o;
    cr_status st = bil_forward(arena, cross, args, nargs, e, &dt, &w);
    if (st == CR_OK)
        st = cr__cast(arena, w, dt, &o);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail2(
        arena, args, udata, &e->pA, &e->pB, o, y, pb,
        (cr_pullback){bil_pullback, e, cross ? "cross_pullback" : "kron_pullback", nargs + 1});
}

/* frule: f(Ȧ, B) + f(A, Ḃ) (both are bilinear). */
static cr_status bil_frule(cr_arena *arena, bool cross, const cr_tangent *dargs,
                           const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    bil_env e;
    memset(&e, 0, sizeof e);
    cr_dtype dt = CR_DT_F64;
    cr_array *w, *o;
    cr_status st = bil_forward(arena, cross, args, nargs, &e, &dt, &w);
    if (st == CR_OK)
        st = cr__cast(arena, w, dt, &o);
    const cr_array *tA, *tB;
    bool none = false;
    if (st == CR_OK)
        st = cr__frule_pair(arena, cross ? "cross" : "kron", dargs, args, e.wdt, o, y, &tA, &tB, dy,
                            &none);
    if (st != CR_OK || none)
        return st;
    cr_array *t;
    st = cr__new(arena, e.wdt, e.ndim, e.shape, true, &t);
    if (st != CR_OK)
        return st;
    if (tA != NULL)
        bil_apply(&e, tA, e.B, t, true);
    if (tB != NULL)
        bil_apply(&e, e.A, tB, t, true);
    return cr_project_tangent(arena, y, cr_tangent_array(t), dy);
}

#define BIL_RULES(NAME, CROSS) CR__PARAM_RULES(NAME, bil_rrule, bil_frule, CROSS, 2)

BIL_RULES(kron, false)
BIL_RULES(cross, true)

/* ---- Structure constructors ---------------------------------------------------------------- */

/* Symmetric(A) / Hermitian(A): A's upper triangle read as a symmetric (Hermitian) matrix
 * (Symmetric(A, uplo) / Hermitian(A, uplo): the triangle uplo); Diagonal(v) of a vector,
 * Diagonal(A) of a square matrix's diagonal. Views of A (cr__wrap_rrule, structured.c). */
CR__WRAP_RULE(symmetric, "Symmetric", CR_MAT_SYMMETRIC, -1)
CR__WRAP_RULE(hermitian, "Hermitian", CR_MAT_HERMITIAN, -1)
CR__WRAP_RULE(diagonal, "Diagonal", CR_MAT_DIAGONAL, 1)

/* ---- asum ------------------------------------------------------------------------------ */

typedef struct asum_env {
    const cr_array *A, *Aw;
    cr_project *pA;
} asum_env;

static double sgn(double v)
{
    return (v > 0) - (v < 0);
}

/* asum(x) = Σ |re x_i| + |im x_i| (BLAS's asum): x̄_i = (sign re x_i + i sign im x_i) ȳ,
 * with sign 0 at 0 (the subgradient). */
static cr_status asum_pullback(CR__PULLBACK_PARAMS)
{
    cr_complex g;
    bool nz;
    cr_status st = scalar_cot(arena, "asum_pullback", dy, dx, &g, &nz);
    if (st != CR_OK || !nz)
        return st;
    const asum_env *e = env;
    cr_array *r = NULL;
    st = cr__new_like(arena, (cr_dtype)e->Aw->dtype, e->A, false, &r);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(e->A);
    for (size_t i = 0; i < n; i++) {
        cr_complex x = cr__load(e->Aw, (ptrdiff_t)i);
        cr__store(r, (ptrdiff_t)i, cr__c(sgn(creal(x)), sgn(cimag(x))) * creal(g));
    }
    return cr__give(arena, e->pA, r, &dx[1]);
}

static cr_status asum_forward(cr_arena *arena, const cr_value *args, size_t nargs, asum_env *e,
                              double *v)
{
    cr_status st = cr__array_arg1(arena, "asum", args, nargs, &e->A);
    if (st != CR_OK)
        return st;
    if (!cr_dtype_is_float((cr_dtype)e->A->dtype))
        return CR__FAIL(arena, CR_EINVAL, "asum: expected a float array");
    st = cr__dense(arena, e->A, cr__work((cr_dtype)e->A->dtype), &e->Aw);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(e->A);
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        cr_complex x = cr__load(e->Aw, (ptrdiff_t)i);
        s += fabs(creal(x)) + fabs(cimag(x));
    }
    *v = s;
    return CR_OK;
}

static cr_status asum_rrule(CR__RRULE_PARAMS)
{
    CR__ARENA_NEW(arena, asum_env, e);
    double v;
    cr_status st = asum_forward(arena, args, nargs, e, &v);
    if (st != CR_OK)
        return st;
    *y = cr__scalar_value(e->A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64, v);
    return cr__rrule_tail1(arena, &args[0], udata, &e->pA, pb,
                           (cr_pullback){asum_pullback, e, "asum_pullback", nargs + 1});
}
CR__ARRAY_FN(asum, "asum", 1)

static cr_status asum_frule(CR__FRULE_PARAMS)
{
    asum_env e;
    double v;
    cr_status st = asum_forward(arena, args, nargs, &e, &v);
    if (st != CR_OK)
        return st;
    cr_dtype rdt = e.A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    *y = cr__scalar_value(rdt, v);
    const cr_array *t;
    st = cr__dx_array(arena, "asum", dargs, args, 0, (cr_dtype)e.Aw->dtype, &t);
    if (st != CR_OK || t == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    size_t n = cr_array_numel(e.A);
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        cr_complex x = cr__load(e.Aw, (ptrdiff_t)i), d = cr__load(t, (ptrdiff_t)i);
        s += sgn(creal(x)) * creal(d) + sgn(cimag(x)) * cimag(d);
    }
    *dy = cr__scalar_tangent(rdt, s);
    return CR_OK;
}

/* ---- Test registrations ---------------------------------------------------------------- */

/* A random matrix of the shape, sometimes stored transposed (a strided view). */
static cr_status rand_mat(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t ndim, size_t r,
                          size_t c, cr_array **out)
{
    size_t shape[2] = {r, c};
    if (ndim == 1)
        return cr__rand_array(arena, rng, dt, 1, shape, -1.5, 1.5, out);
    bool transposed = cr__rng_below(rng, 3) == 0;
    size_t s[2] = {transposed ? c : r, transposed ? r : c};
    cr_status st = cr__rand_array(arena, rng, dt, 2, s, -1.5, 1.5, out);
    if (st != CR_OK || !transposed)
        return st;
    (*out)->shape[0] = r;
    (*out)->shape[1] = c;
    (*out)->strides[0] = 1;
    (*out)->strides[1] = (ptrdiff_t)r;
    return CR_OK;
}

static cr_status sample_matmul(CR__SAMPLE_PARAMS)
{
    size_t k = cr__rng_below(rng, 6);
    cr_dtype da = cr__rng_dtype(rng), db = cr__rng_below(rng, 2) ? da : cr__rng_dtype(rng);
    cr_array *A, *B;
    size_t off = nargs == 5 ? 1 : 0;
    cr_status st;
    switch (k) {
    case 0: /* matrix-vector */
        st = rand_mat(arena, rng, da, 2, 3, 4, &A);
        if (st == CR_OK)
            st = rand_mat(arena, rng, db, 1, 4, 1, &B);
        break;
    case 1: /* vector-matrix */
        st = rand_mat(arena, rng, da, 1, 3, 1, &A);
        if (st == CR_OK)
            st = rand_mat(arena, rng, db, 2, 3, 2, &B);
        break;
    case 2: /* a structured left operand */
        st = rand_mat(arena, rng, da, 2, 3, 3, &A);
        if (st == CR_OK) {
            static const cr_matstruct s[7] = {
                CR_MAT_UPPER,          CR_MAT_SYMMETRIC,    CR_MAT_DIAGONAL,    CR_MAT_TRIDIAGONAL,
                CR_MAT_SYMTRIDIAGONAL, CR_MAT_BIDIAG_UPPER, CR_MAT_BIDIAG_LOWER};
            A->structure = (uint8_t)s[cr__rng_below(rng, 7)];
            if (A->structure == CR_MAT_SYMMETRIC && da == CR_DT_C128)
                A->structure = CR_MAT_HERMITIAN;
            if (A->structure == CR_MAT_DIAGONAL) {
                A->strides[0] = A->strides[0] + A->strides[1];
                A->strides[1] = 0;
            }
            st = rand_mat(arena, rng, db, 2, 3, 2, &B);
        }
        break;
    case 3: /* a band right operand, after a matrix or a vector */
        if (cr__rng_below(rng, 2))
            st = rand_mat(arena, rng, da, 2, 2, 3, &A);
        else
            st = rand_mat(arena, rng, da, 1, 3, 1, &A);
        if (st == CR_OK)
            st = rand_mat(arena, rng, db, 2, 3, 3, &B);
        if (st == CR_OK) {
            static const cr_matstruct s[4] = {CR_MAT_TRIDIAGONAL, CR_MAT_SYMTRIDIAGONAL,
                                              CR_MAT_BIDIAG_UPPER, CR_MAT_BIDIAG_LOWER};
            B->structure = (uint8_t)s[cr__rng_below(rng, 4)];
        }
        break;
    default:
        st = rand_mat(arena, rng, da, 2, 3, 4, &A);
        if (st == CR_OK)
            st = rand_mat(arena, rng, db, 2, 4, 2, &B);
        break;
    }
    if (st != CR_OK)
        return st;
    args[off] = cr_value_array(A);
    args[off + 1] = cr_value_array(B);
    if (nargs != 5)
        return CR_OK;
    /* gemm(alpha, A, B, beta, C) */
    size_t cshape[2] = {A->ndim == 1 ? B->shape[1] : A->shape[0], B->ndim == 2 ? B->shape[1] : 1};
    size_t cnd = A->ndim == 1 || B->ndim == 1 ? 1 : 2;
    cr_array *C;
    st = cr__rand_array(arena, rng, cr__rng_dtype(rng), cnd, cshape, -1, 1, &C);
    if (st != CR_OK)
        return st;
    args[0] = cr__rng_below(rng, 4) == 0 ? cr_value_c128(cr__c(0.5, 0.25))
                                         : cr_value_f64(cr__rng_unif(rng, 0.5, 1.5));
    args[3] = cr__rng_below(rng, 4) == 0 ? cr_value_i64(2) : cr_value_f64(-0.75);
    args[4] = cr_value_array(C);
    return CR_OK;
}

static cr_status sample_dot(CR__SAMPLE_PARAMS)
{
    cr_dtype dx = cr__rng_dtype(rng), dy = cr__rng_below(rng, 2) ? dx : cr__rng_dtype(rng);
    cr_array *x = NULL, *y = NULL, *A = NULL;
    size_t m = 3, n = 4, s2[2] = {2, 3};
    cr_status st;
    if (nargs == 2) {
        bool mat = cr__rng_below(rng, 2) != 0;
        st = cr__rand_array(arena, rng, dx, mat ? 2 : 1, mat ? s2 : &n, -1.5, 1.5, &x);
        if (st == CR_OK)
            st = cr__rand_array(arena, rng, dy, mat ? 2 : 1, mat ? s2 : &n, -1.5, 1.5, &y);
        return cr__sampled(st, args, 2, (cr_array *[]){x, y});
    }
    st = cr__rand_array(arena, rng, dx, 1, &m, -1.5, 1.5, &x);
    if (st == CR_OK)
        st = rand_mat(arena, rng, cr__rng_dtype(rng), 2, m, n, &A);
    if (st == CR_OK)
        st = cr__rand_array(arena, rng, dy, 1, &n, -1.5, 1.5, &y);
    return cr__sampled(st, args, 3, (cr_array *[]){x, A, y});
}

static cr_status sample_square(CR__SAMPLE_PARAMS)
{
    cr_dtype dt = cr__rng_dtype(rng);
    cr_array *A;
    cr_status st = rand_mat(arena, rng, dt, 2, 3, 3, &A);
    if (st != CR_OK)
        return st;
    size_t k = cr__rng_below(rng, 4);
    if (k == 1)
        A->structure = CR_MAT_LOWER;
    if (k == 2) {
        A->structure = CR_MAT_DIAGONAL;
        A->strides[0] = A->strides[0] + A->strides[1];
        A->strides[1] = 0;
    }
    args[0] = cr_value_array(A);
    return CR_OK;
}

/* kron of two matrices or two vectors; cross of two 3-vectors. */
static cr_status sample_bilinear(CR__SAMPLE_PARAMS)
{
    bool cross = env != NULL;
    size_t s1[2] = {2, 3}, s2[2] = {3, 2}, n3 = 3;
    bool vec = cross || cr__rng_below(rng, 3) == 0;
    cr_array *A = NULL, *B = NULL;
    cr_status st =
        cr__rand_array(arena, rng, cr__rng_dtype(rng), vec ? 1 : 2, vec ? &n3 : s1, -1.5, 1.5, &A);
    if (st == CR_OK)
        st = cr__rand_array(arena, rng, cr__rng_dtype(rng), vec ? 1 : 2, vec ? &n3 : s2, -1.5, 1.5,
                            &B);
    return cr__sampled(st, args, 2, (cr_array *[]){A, B});
}

/* A square matrix (Symmetric, Hermitian, Diagonal), or a vector (Diagonal). */
static cr_status sample_wrap(CR__SAMPLE_PARAMS)
{
    size_t n = 3, shape[2] = {3, 3};
    bool vec = env != NULL && cr__rng_below(rng, 2) == 0;
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), vec ? 1 : 2, vec ? &n : shape,
                                  -1.5, 1.5, &A);
    if (st == CR_OK)
        args[0] = cr_value_array(A);
    return st;
}

static const cr_rule_test k_test_matmul = {.sample = sample_matmul};
static const cr_rule_test k_test_wrap = {.sample = sample_wrap};
static const cr_rule_test k_test_wrap_diag = {.sample = sample_wrap, .env = (void *)1};
static const cr_rule_test k_test_kron = {.sample = sample_bilinear};
static const cr_rule_test k_test_cross = {.sample = sample_bilinear, .env = (void *)1};
static const cr_rule_test k_test_dot = {.sample = sample_dot};

/* asum: entries away from 0 (its kink), either sign. */
static cr_status sample_asum(CR__SAMPLE_PARAMS)
{
    size_t n = 5;
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 1, &n, 0.25, 1.5, &A);
    if (st != CR_OK)
        return st;
    cr__flip_signs(rng, A);
    args[0] = cr_value_array(A);
    return CR_OK;
}
static const cr_rule_test k_test_dot_asum = {.sample = sample_asum};
static const cr_rule_test k_test_square = {.sample = sample_square};

cr_status cr__linalg_register_blas(cr_registry *reg)
{
    static const cr_argspec g5[5] = {{CR__M_NUM, NULL},
                                     {CR__M_FARRAY, NULL},
                                     {CR__M_FARRAY, NULL},
                                     {CR__M_NUM, NULL},
                                     {CR__M_FARRAY, NULL}};
    static const cr__array_rule k[] = {
        CR__LA_ROW(matmul, cr__linalg_fa, 2, &k_test_matmul, CR_MULTILINEAR),
        CR__LA_ROW(gemm, g5, 5, &k_test_matmul, CR_NONLINEAR),
        CR__LA_ROW(dot, cr__linalg_fa, 2, &k_test_dot, CR_MULTILINEAR),
        CR__LA_ROW(dot, cr__linalg_fa, 3, &k_test_dot, CR_MULTILINEAR),
        CR__LA_LINEAR_ROW(tr, cr__linalg_fa, 1, &k_test_square),
        CR__LA_ROW(kron, cr__linalg_fa, 2, &k_test_kron, CR_MULTILINEAR),
        CR__LA_ROW(cross, cr__linalg_fa, 2, &k_test_cross, CR_MULTILINEAR),
        CR__LA_LINEAR_ROW(symmetric, cr__linalg_fa, 1, &k_test_wrap),
        CR__LA_LINEAR_ROW(hermitian, cr__linalg_fa, 1, &k_test_wrap),
        CR__LA_LINEAR_ROW(diagonal, cr__linalg_fa, 1, &k_test_wrap_diag),
        CR__LA_ROW(asum, cr__linalg_fa, 1, &k_test_dot_asum, CR_PIECEWISE_LINEAR),
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
