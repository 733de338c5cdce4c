/*
 * The pieces the LAPACK rule files of the linear-algebra family share (linalg_impl.h): a
 * square matrix argument, the Hermitian matrix of its upper triangle and the cotangent folded
 * back onto it, the singular-matrix error, the thin SVD (gesdd) and the Hermitian
 * eigendecomposition (syevd/heevd) of work matrices, and the random square matrices the rule
 * tests sample. Compiled with LAPACKE (CR_HAVE_LAPACKE).
 */
#include <float.h>
#include <math.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>

/* ---- Arguments ------------------------------------------------------------------------- */

/* A square float matrix argument; its work dtype. */
cr_status cr__square_arg(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                         size_t i, const cr_array **A, bool *cplx)
{
    cr_status st = cr__array_arg(arena, who, args, nargs, i, A);
    if (st != CR_OK)
        return st;
    if ((*A)->ndim != 2 || (*A)->shape[0] != (*A)->shape[1] ||
        !cr_dtype_is_float((cr_dtype)(*A)->dtype) || !cr__lapack_size_ok((*A)->shape[0]))
        return CR__FAIL(arena, CR_ESHAPE, "%s: expected a square f64, f32 or c128 matrix", who);
    if (cplx != NULL) {
        *cplx = (*A)->dtype == CR_DT_C128;
    }
    return CR_OK;
}

cr_status cr__square_arg1(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                          const cr_array **A, bool *cplx)
{
    cr_status st = cr__nargs(arena, who, nargs, 1, 1);
    return st != CR_OK ? st : cr__square_arg(arena, who, args, nargs, 0, A, cplx);
}

/* The Hermitian matrix whose upper triangle is that of A (the diagonal's real part), as
 * LAPACK's syev/heev/potrf read it. */
cr_status cr__herm_upper(cr_arena *arena, const cr_array *A, bool cplx, cr__cmat *m)
{
    cr_status st = cr__cmat_from(arena, A, cplx, m);
    if (st != CR_OK)
        return st;
    size_t n = m->r;
    for (size_t j = 0; j < n; j++) {
        cr__cmat_set(m, j, j, creal(cr__cmat_get(m, j, j)));
        for (size_t i = j + 1; i < n; i++)
            cr__cmat_set(m, i, j, conj(cr__cmat_get(m, j, i)));
    }
    return CR_OK;
}

/* The cotangent of A for a function of cr__herm_upper(A), given the Hermitian gradient S with
 * respect to that matrix: a Symmetric/Hermitian A takes S (its projector symmetrises); any
 * other A gets S folded onto the upper triangle it was read from. */
cr_status cr__herm_give(cr_arena *arena, const cr_array *A, cr_project *p, cr__cmat *S,
                        cr_tangent *out)
{
    size_t n = S->r;
    if (A->structure != CR_MAT_SYMMETRIC && A->structure != CR_MAT_HERMITIAN) {
        for (size_t j = 0; j < n; j++) {
            cr__cmat_set(S, j, j, creal(cr__cmat_get(S, j, j)));
            for (size_t i = 0; i < j; i++) {
                cr__cmat_set(S, i, j, cr__cmat_get(S, i, j) + conj(cr__cmat_get(S, j, i)));
                cr__cmat_set(S, j, i, 0.0);
            }
        }
    }
    cr_array *r = NULL;
    cr_status st = cr__cmat_to_array(arena, S, false, &r);
    return st != CR_OK ? st : cr__give(arena, p, r, out);
}

cr_status cr__singular(cr_arena *arena, const char *who)
{
    return CR__FAIL(arena, CR_EDOMAIN, "%s: the matrix is singular", who);
}

/* ---- SVD ---------------------------------------------------------------------------------- */

cr_status cr__svd_of(cr_arena *arena, const char *who, const cr__cmat *A0, cr__svd *out)
{
    size_t m = A0->r, n = A0->c, k = m < n ? m : n;
    bool cplx = A0->cplx;
    cr__cmat A;
    cr_status st = cr__lapack_finite(arena, who, A0);
    if (st == CR_OK)
        st = cr__cmat_copy(arena, A0, &A);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, m, k, false, &out->U);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, k, n, false, &out->Vt);
    if (st != CR_OK)
        return st;
    out->s = cr__arena_array(arena, who, k, sizeof(double), _Alignof(double));
    lapack_int *iwork = cr__arena_array(arena, who, 8 * k + 1, sizeof *iwork, _Alignof(lapack_int));
    if (out->s == NULL || iwork == NULL)
        return CR__ALLOC_STATUS(arena);
    out->m = m;
    out->n = n;
    out->k = k;
    if (k == 0)
        return CR_OK;
    lapack_int lm = (lapack_int)m, ln = (lapack_int)n, lk = (lapack_int)k, info;
    if (cplx) {
        cr_complex q;
        size_t lrw = k * (5 * k + 7) > 2 * k * (k + (m > n ? m : n)) + k
                         ? k * (5 * k + 7)
                         : 2 * k * (k + (m > n ? m : n)) + k;
        double *rwork = cr__arena_array(arena, who, lrw + 1, sizeof(double), _Alignof(double));
        if (rwork == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_zgesdd_work(LAPACK_COL_MAJOR, 'S', lm, ln, A.p, lm, out->s, out->U.p, lm,
                                   out->Vt.p, lk, &q, -1, rwork, iwork);
        size_t lw = (size_t)creal(q) + 1;
        cr_complex *work = cr__arena_array(arena, who, lw, sizeof *work, _Alignof(cr_complex));
        if (work == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_zgesdd_work(LAPACK_COL_MAJOR, 'S', lm, ln, A.p, lm, out->s, out->U.p, lm,
                                   out->Vt.p, lk, work, (lapack_int)lw, rwork, iwork);
    } else {
        double q;
        info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', lm, ln, A.p, lm, out->s, out->U.p, lm,
                                   out->Vt.p, lk, &q, -1, iwork);
        size_t lw = (size_t)q + 1;
        double *work = cr__arena_array(arena, who, lw, sizeof *work, _Alignof(double));
        if (work == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', lm, ln, A.p, lm, out->s, out->U.p, lm,
                                   out->Vt.p, lk, work, (lapack_int)lw, iwork);
    }
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

/* ---- Hermitian eigendecomposition --------------------------------------------------------- */

cr_status cr__eigh(cr_arena *arena, const char *who, cr__cmat *H, double **w)
{
    size_t n = H->r;
    cr_status st = cr__lapack_finite(arena, who, H);
    if (st != CR_OK)
        return st;
    *w = cr__arena_array(arena, who, n, sizeof(double), _Alignof(double));
    if (*w == NULL)
        return CR__ALLOC_STATUS(arena);
    if (n == 0)
        return CR_OK;
    lapack_int ln = (lapack_int)n, info, iq;
    if (H->cplx) {
        cr_complex q;
        double rq;
        info = LAPACKE_zheevd_work(LAPACK_COL_MAJOR, 'V', 'U', ln, H->p, ln, *w, &q, -1, &rq, -1,
                                   &iq, -1);
        size_t lw = (size_t)creal(q) + 1, lrw = (size_t)rq + 1, liw = (size_t)iq + 1;
        cr_complex *work = cr__arena_array(arena, who, lw, sizeof *work, _Alignof(cr_complex));
        double *rwork = cr__arena_array(arena, who, lrw, sizeof *rwork, _Alignof(double));
        lapack_int *iwork = cr__arena_array(arena, who, liw, sizeof *iwork, _Alignof(lapack_int));
        if (work == NULL || rwork == NULL || iwork == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_zheevd_work(LAPACK_COL_MAJOR, 'V', 'U', ln, H->p, ln, *w, work,
                                   (lapack_int)lw, rwork, (lapack_int)lrw, iwork, (lapack_int)liw);
    } else {
        double q;
        info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', ln, H->p, ln, *w, &q, -1, &iq, -1);
        size_t lw = (size_t)q + 1, liw = (size_t)iq + 1;
        double *work = cr__arena_array(arena, who, lw, sizeof *work, _Alignof(double));
        lapack_int *iwork = cr__arena_array(arena, who, liw, sizeof *iwork, _Alignof(lapack_int));
        if (work == NULL || iwork == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', ln, H->p, ln, *w, work,
                                   (lapack_int)lw, iwork, (lapack_int)liw);
    }
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

/* ---- Test samples ------------------------------------------------------------------------ */

cr_status cr__rand_square(cr_arena *arena, uint64_t *rng, cr__sq_kind kind, cr_array **out)
{
    size_t n = 2 + cr__rng_below(rng, 3), shape[2] = {n, n};
    cr_dtype dt = cr__rng_dtype(rng);
    if (kind == CR__SQ_REALSYM)
        dt = dt == CR_DT_C128 ? CR_DT_F64 : dt;
    if (kind == CR__SQ_RECT) {
        static const size_t shapes[4][2] = {{3, 2}, {2, 3}, {3, 3}, {4, 2}};
        const size_t *s = shapes[cr__rng_below(rng, 4)];
        return cr__rand_array(arena, rng, dt, 2, s, -1, 1, out);
    }
    cr_status st = cr__rand_array(arena, rng, dt, 2, shape, -1, 1, out);
    if (st != CR_OK)
        return st;
    cr_array *A = *out;
    size_t k = cr__rng_below(rng, 4);
    switch (kind) {
    case CR__SQ_GENERAL:
        for (size_t i = 0; i < n; i++)
            cr__store(A, (ptrdiff_t)(i * n + i), cr__load(A, (ptrdiff_t)(i * n + i)) + 3.0);
        if (k == 1)
            A->structure = CR_MAT_UPPER;
        if (k == 2)
            A->structure = (uint8_t)(dt == CR_DT_C128 ? CR_MAT_HERMITIAN : CR_MAT_SYMMETRIC);
        return CR_OK;
    case CR__SQ_SPD: {
        /* B Bᴴ + n I, then junk below the diagonal for the dense case. */
        cr_array *B = A;
        st = cr__new(arena, (cr_dtype)B->dtype, 2, shape, false, out);
        if (st != CR_OK)
            return st;
        A = *out;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                cr_complex acc = i == j ? (double)n : 0.0;
                for (size_t l = 0; l < n; l++)
                    acc += cr__load(B, (ptrdiff_t)(i * n + l)) *
                           conj(cr__load(B, (ptrdiff_t)(j * n + l)));
                cr__store(A, (ptrdiff_t)(i * n + j), i > j && k == 0 ? 7.0 : acc);
            }
        if (k != 0)
            A->structure = (uint8_t)(dt == CR_DT_C128 ? CR_MAT_HERMITIAN : CR_MAT_SYMMETRIC);
        return CR_OK;
    }
    default:
        /* Eigenvalues near 0, 2, 4, ... (well separated), in a random basis. */
        for (size_t i = 0; i < n; i++)
            cr__store(A, (ptrdiff_t)(i * n + i),
                      cr__load(A, (ptrdiff_t)(i * n + i)) * 0.3 + 2.0 * (double)i);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++)
                if (i != j)
                    cr__store(A, (ptrdiff_t)(i * n + j), cr__load(A, (ptrdiff_t)(i * n + j)) * 0.3);
        if (k != 0)
            A->structure = (uint8_t)(dt == CR_DT_C128 ? CR_MAT_HERMITIAN : CR_MAT_SYMMETRIC);
        return CR_OK;
    }
}

cr_status cr__sample_sq(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs, void *env)
{
    cr__sq_kind kind = (cr__sq_kind)(uintptr_t)env;
    cr_array *A;
    cr_status st = cr__rand_square(arena, rng, kind, &A);
    if (st != CR_OK)
        return st;
    args[0] = cr_value_array(A);
    if (nargs == 2) {
        /* solve: a vector or a matrix right-hand side. */
        size_t n = A->shape[0], shape[2] = {n, 2};
        cr_array *B;
        cr_dtype dt = cr__rng_below(rng, 2) ? (cr_dtype)A->dtype : cr__rng_dtype(rng);
        st = cr__rand_array(arena, rng, dt, cr__rng_below(rng, 2) ? 1 : 2, shape, -1, 1, &B);
        if (st != CR_OK)
            return st;
        if (cr__rng_below(rng, 4) == 0) {
            /* A Diagonal A. */
            A->structure = CR_MAT_DIAGONAL;
            A->strides[0] = (ptrdiff_t)n + 1;
            A->strides[1] = 0;
        }
        args[1] = cr_value_array(B);
    }
    return CR_OK;
}

/* ---- LU factors of any shape ----------------------------------------------------------------- */

cr_status cr__cmat_block(cr_arena *arena, const cr__cmat *M, size_t r0, size_t r, size_t c0,
                         size_t c, cr__cmat *out)
{
    cr_status st = cr__cmat_new(arena, M->cplx, r, c, false, out);
    for (size_t j = 0; st == CR_OK && j < c; j++)
        for (size_t i = 0; i < r; i++)
            cr__cmat_set(out, i, j, cr__cmat_get(M, r0 + i, c0 + j));
    return st;
}

/* M[r0.., c0..] := B. */
static void put_block(cr__cmat *M, size_t r0, size_t c0, const cr__cmat *B)
{
    for (size_t j = 0; j < B->c; j++)
        for (size_t i = 0; i < B->r; i++)
            cr__cmat_set(M, r0 + i, c0 + j, cr__cmat_get(B, i, j));
}

cr_status cr__tri_right(cr_arena *arena, const char *who, const cr__cmat *T, char uplo, char op,
                        char diag, cr__cmat *X)
{
    cr__cmat Xh;
    cr_status st = cr__cmat_adj(arena, X, &Xh);
    if (st == CR_OK)
        st = cr__tri_left(arena, who, T, uplo, op == 'N' ? 'C' : 'N', diag, &Xh);
    return st != CR_OK ? st : cr__cmat_adj(arena, &Xh, X);
}

/* P = opl(L₁) tril₋(Ls) and Q = triu(Us) opu(U₁), Ls and Us cut to those parts in place. */
static cr_status lu_parts(cr_arena *arena, const cr__cmat *L1, char opl, cr__cmat *Ls, cr__cmat *Us,
                          const cr__cmat *U1, char opu, cr__cmat *P, cr__cmat *Q)
{
    cr__cmat_tri(Ls, 'L', true);
    cr__cmat_tri(Us, 'U', false);
    cr_status st = cr__cmat_mul(arena, opl, 'N', 1.0, L1, Ls, P);
    return st != CR_OK ? st : cr__cmat_mul(arena, 'N', opu, 1.0, Us, U1, Q);
}

cr_status cr__lu_pullback(cr_arena *arena, const char *who, const cr__cmat *L, const cr__cmat *U,
                          const cr__cmat *Lb, const cr__cmat *Ub, cr__cmat *G)
{
    size_t m = L->r, k = L->c, n = U->c;
    bool cplx = L->cplx;
    cr__cmat L1, U1, Lbe, Ube, W, X, M, Z, Lb1, Ub1;
    cr_status st = cr__cmat_block(arena, L, 0, k, 0, k, &L1);
    if (st == CR_OK)
        st = cr__cmat_block(arena, U, 0, k, 0, k, &U1);
    if (st == CR_OK)
        st = Lb->p != NULL ? cr__cmat_copy_as(arena, Lb, cplx, &Lbe)
                           : cr__cmat_new(arena, cplx, m, k, true, &Lbe);
    if (st == CR_OK)
        st = Ub->p != NULL ? cr__cmat_copy_as(arena, Ub, cplx, &Ube)
                           : cr__cmat_new(arena, cplx, k, n, true, &Ube);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, m, n, true, G);
    if (st == CR_OK && n > k) { /* wide: U₂ = L⁻¹ (P A)₂ */
        st = cr__cmat_block(arena, &Ube, 0, k, k, n - k, &W);
        if (st == CR_OK)
            st = cr__cmat_block(arena, U, 0, k, k, n - k, &X);
        if (st == CR_OK)
            st = cr__tri_left(arena, who, &L1, 'L', 'C', 'U', &W); /* L⁻ᴴ Ū₂ */
        if (st == CR_OK) {
            put_block(G, 0, k, &W);
            cr__cmat_gemm('N', 'C', -1.0, &W, &X, 1.0, &Lbe);
        }
    }
    if (st == CR_OK && m > k) { /* tall: L₂ = (P A)₂ U⁻¹ */
        st = cr__cmat_block(arena, &Lbe, k, m - k, 0, k, &W);
        if (st == CR_OK)
            st = cr__cmat_block(arena, L, k, m - k, 0, k, &X);
        if (st == CR_OK)
            st = cr__tri_right(arena, who, &U1, 'U', 'C', 'N', &W); /* L̄₂ U⁻ᴴ */
        if (st == CR_OK) {
            put_block(G, k, 0, &W);
            cr__cmat_gemm('C', 'N', -1.0, &X, &W, 1.0, &Ube);
        }
    }
    if (st == CR_OK)
        st = cr__cmat_block(arena, &Lbe, 0, k, 0, k, &Lb1);
    if (st == CR_OK)
        st = cr__cmat_block(arena, &Ube, 0, k, 0, k, &Ub1);
    if (st == CR_OK)
        st = lu_parts(arena, &L1, 'C', &Lb1, &Ub1, &U1, 'C', &M, &Z);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&M, 'L', true);
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i <= j; i++)
            cr__cmat_set(&M, i, j, cr__cmat_get(&Z, i, j));
    st = cr__tri_left(arena, who, &L1, 'L', 'C', 'U', &M);
    if (st == CR_OK)
        st = cr__tri_right(arena, who, &U1, 'U', 'C', 'N', &M);
    if (st == CR_OK)
        put_block(G, 0, 0, &M);
    return st;
}

cr_status cr__lu_tangent(cr_arena *arena, const char *who, const cr__cmat *L, const cr__cmat *U,
                         const cr__cmat *PdA, cr__cmat *dL, cr__cmat *dU)
{
    size_t m = L->r, k = L->c, n = U->c;
    bool cplx = L->cplx;
    cr__cmat L1, U1, X, Xl, dL1, dU1, W, B;
    cr_status st = cr__cmat_block(arena, L, 0, k, 0, k, &L1);
    if (st == CR_OK)
        st = cr__cmat_block(arena, U, 0, k, 0, k, &U1);
    if (st == CR_OK)
        st = cr__cmat_block(arena, PdA, 0, k, 0, k, &X);
    if (st == CR_OK)
        st = cr__tri_left(arena, who, &L1, 'L', 'N', 'U', &X);
    if (st == CR_OK)
        st = cr__tri_right(arena, who, &U1, 'U', 'N', 'N', &X);
    if (st == CR_OK)
        st = cr__cmat_copy(arena, &X, &Xl);
    if (st == CR_OK)
        st = lu_parts(arena, &L1, 'N', &Xl, &X, &U1, 'N', &dL1, &dU1);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, m, k, true, dL);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, k, n, true, dU);
    if (st != CR_OK)
        return st;
    put_block(dL, 0, 0, &dL1);
    put_block(dU, 0, 0, &dU1);
    if (n > k) { /* U̇₂ = L⁻¹ ((P Ȧ)₂ - L̇ U₂) */
        st = cr__cmat_block(arena, PdA, 0, k, k, n - k, &W);
        if (st == CR_OK)
            st = cr__cmat_block(arena, U, 0, k, k, n - k, &B);
        if (st == CR_OK) {
            cr__cmat_gemm('N', 'N', -1.0, &dL1, &B, 1.0, &W);
            st = cr__tri_left(arena, who, &L1, 'L', 'N', 'U', &W);
        }
        if (st == CR_OK)
            put_block(dU, 0, k, &W);
    }
    if (st == CR_OK && m > k) { /* L̇₂ = ((P Ȧ)₂ - L₂ U̇) U⁻¹ */
        st = cr__cmat_block(arena, PdA, k, m - k, 0, k, &W);
        if (st == CR_OK)
            st = cr__cmat_block(arena, L, k, m - k, 0, k, &B);
        if (st == CR_OK) {
            cr__cmat_gemm('N', 'N', -1.0, &B, &dU1, 1.0, &W);
            st = cr__tri_right(arena, who, &U1, 'U', 'N', 'N', &W);
        }
        if (st == CR_OK)
            put_block(dL, k, 0, &W);
    }
    return st;
}

#endif /* CR_HAVE_LAPACKE */
