/*
 * Factorization rules of the linear-algebra family: lu (with partial pivoting), thin qr,
 * eigen and eigvals of general (non-Hermitian) matrices, pinv, sylvester and lyap, and the
 * second-order forms of pinv and qr (spectral.c has eigen_general's, forms_factors.c the
 * others). Compiled with
 * LAPACKE (CR_HAVE_LAPACKE); without it the function values exist, their primal gives CR_EUNIMPL
 * and no rule is registered (the policy of solve.c).
 *
 * As in solve.c, the work happens in column-major copies of f64 or c128 through
 * the LAPACKE `_work` routines, with every workspace taken from the arena.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include <chainrules/rules_linalg.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>

/* ---- Arguments and tangents -------------------------------------------------------------- */

/* A float matrix argument (any shape). */
static cr_status matrix_arg(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                            size_t i, const cr_array **A)
{
    cr_status st = cr__array_arg(arena, who, args, nargs, i, A);
    if (st != CR_OK)
        return st;
    if ((*A)->ndim != 2 || !cr_dtype_is_float((cr_dtype)(*A)->dtype) ||
        !cr__lapack_size_ok((*A)->shape[0] * (*A)->shape[1]))
        return CR__FAIL(arena, CR_ESHAPE, "%s: expected an f64, f32 or c128 matrix", who);
    return CR_OK;
}

/* ---- lu ------------------------------------------------------------------------------------ */

typedef struct lu_env {
    const cr_array *A;
    cr_project *pA;
    cr__cmat L, U; /* m x k unit lower, k x n upper (k = min(m, n)) */
    int64_t *p;    /* row i of L U is row p[i] of A */
    cr_array *oL;  /* the outputs */
    cr_array *oU;
} lu_env;

/* P A = L U by getrf for an m x n A; a zero pivot (singular A) is a domain error, as Julia's
 * lu throws. */
static cr_status lu_forward(cr_arena *arena, const cr_value *args, size_t nargs, lu_env *e)
{
    cr_status st = cr__nargs(arena, "lu", nargs, 1, 1);
    if (st == CR_OK)
        st = cr__matrix32_arg(arena, "lu", args, nargs, 0, false, &e->A);
    if (st != CR_OK)
        return st;
    bool cplx = e->A->dtype == CR_DT_C128;
    size_t m = e->A->shape[0], n = e->A->shape[1], k = m < n ? m : n;
    cr__cmat F;
    st = cr__cmat_new(arena, cplx, m, k, true, &e->L);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, k, n, true, &e->U);
    if (st == CR_OK)
        st = cr__cmat_from(arena, e->A, cplx, &F);
    if (st != CR_OK)
        return st;
    lapack_int *ipiv = cr__arena_array(arena, "lu", k, sizeof *ipiv, _Alignof(lapack_int));
    e->p = cr__arena_array(arena, "lu", m, sizeof *e->p, _Alignof(int64_t));
    if ((k > 0 && ipiv == NULL) || (m > 0 && e->p == NULL))
        return CR__ALLOC_STATUS(arena);
    lapack_int lm = (lapack_int)m, ln = (lapack_int)n;
    lapack_int info = k == 0 ? 0
                      : cplx ? LAPACKE_zgetrf_work(LAPACK_COL_MAJOR, lm, ln, F.p, lm, ipiv)
                             : LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, lm, ln, F.p, lm, ipiv);
    if (info < 0)
        return cr__lapack_fail(arena, "lu", info);
    if (info > 0)
        return CR__FAIL(arena, CR_EDOMAIN,
                        "lu: the matrix is singular (U[%d][%d] is zero); its factorization has "
                        "no derivative there",
                        (int)info - 1, (int)info - 1);
    for (size_t i = 0; i < m; i++)
        e->p[i] = (int64_t)i;
    for (size_t i = 0; i < k; i++) {
        size_t r = (size_t)ipiv[i] - 1;
        int64_t t = e->p[i];
        e->p[i] = e->p[r];
        e->p[r] = t;
    }
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < m; i++) {
            if (i > j && j < k)
                cr__cmat_set(&e->L, i, j, cr__cmat_get(&F, i, j));
            else if (i <= j && i < k)
                cr__cmat_set(&e->U, i, j, cr__cmat_get(&F, i, j));
            if (i == j)
                cr__cmat_set(&e->L, i, i, 1.0);
        }
    return CR_OK;
}

static cr_status lu_output(cr_arena *arena, lu_env *e, cr_value *y)
{
    cr_dtype dt = (cr_dtype)e->A->dtype;
    size_t m = e->L.r;
    cr_array *op;
    cr_status st = cr__cmat_out(arena, &e->L, false, dt, &e->oL);
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e->U, false, dt, &e->oU);
    if (st == CR_OK)
        st = cr__i64_array(arena, m, e->p, &op);
    if (st != CR_OK)
        return st;
    if (e->L.r == e->U.c) { /* a rectangular A's factors are dense trapezoids, as Julia's */
        e->oL->structure = CR_MAT_LOWER;
        e->oU->structure = CR_MAT_UPPER;
    }
    return cr__tuple_value(arena, 3, (const cr_array *const[]){e->oL, e->oU, op}, y);
}

/* lu's result *y, its factors kept in e. */
static cr_status lu_primal(cr_arena *arena, const cr_value *args, size_t nargs, lu_env *e,
                           cr_value *y)
{
    cr_status st = lu_forward(arena, args, nargs, e);
    return st != CR_OK ? st : lu_output(arena, e, y);
}

/* With P A = L U: Ā = Pᵀ L⁻ᴴ (tril(Lᴴ L̄, -1) + triu(Ū Uᴴ)) U⁻ᴴ for a square A (only the
 * strictly lower part of L̄ and the upper part of Ū enter: L's unit diagonal is constant),
 * extended to rectangular ones by cr__lu_pullback. */
static cr_status lu_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    lu_env *e = cr__pb_start(dx, nx, false, env);
    const char *who = "lu_pullback";
    size_t m = e->L.r, n = e->U.c;
    bool cplx = e->L.cplx, zero;
    const cr__field_spec spec[2] = {{2, {m, e->L.c}, cplx}, {2, {e->U.r, n}, cplx}};
    cr__cmat LU[2], G, T;
    cr_status st = cr__tuple_cmats(arena, who, *dy, 2, CR__TUPLE, spec, LU, &zero);
    if (st != CR_OK || zero) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    st = cr__lu_pullback(arena, who, &e->L, &e->U, &LU[0], &LU[1], &G);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, m, n, false, &T);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            cr__cmat_set(&T, (size_t)e->p[i], j, cr__cmat_get(&G, i, j));
    return cr__cmat_give(arena, e->pA, &T, false, &dx[1]);
}

CR__LA_RRULE1(lu, lu_env, lu_primal, lu_pullback)

/* *dy = the tuple tangent of a factorization's two matrix factors, d0 and d1 like the outputs
 * o0 and o1 (cr__tangent_like), and NoTangent for a third field (lu's permutation) when nf is
 * 3. */
static cr_status factors_tangent(cr_arena *arena, cr_array *o0, const cr__cmat *d0, cr_array *o1,
                                 const cr__cmat *d1, size_t nf, cr_tangent *dy)
{
    cr_tangent t[3] = {cr_tangent_zero(), cr_tangent_zero(), cr_tangent_none()};
    cr_status st = cr__tangent_like(arena, o0, d0, false, &t[0]);
    if (st == CR_OK)
        st = cr__tangent_like(arena, o1, d1, false, &t[1]);
    return st != CR_OK
               ? st
               : cr_tangent_struct(arena, nf == 3 ? &cr__k_tup3 : &cr__k_tup2, NULL, t, nf, dy);
}

/* frule: with P Ȧ, cr__lu_tangent (square: F = L⁻¹ P Ȧ U⁻¹, L̇ = L tril(F, -1),
 * U̇ = triu(F) U); ṗ is NoTangent. */
static cr_status lu_frule1(cr_arena *arena, const char *who, const cr_tangent *dargs,
                           const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    lu_env e = {0};
    cr__cmat dA, F, dL, dU;
    cr_status st = lu_primal(arena, args, nargs, &e, y);
    if (st == CR_OK)
        st = cr__frule_dx0(arena, who, dargs, args, e.L.cplx, &dA, dy);
    if (st != CR_OK || dA.p == NULL)
        return st;
    size_t m = e.L.r, n = e.U.c;
    st = cr__cmat_new(arena, e.L.cplx, m, n, false, &F);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            cr__cmat_set(&F, i, j, cr__cmat_get(&dA, (size_t)e.p[i], j));
    st = cr__lu_tangent(arena, who, &e.L, &e.U, &F, &dL, &dU);
    return st != CR_OK ? st : factors_tangent(arena, e.oL, &dL, e.oU, &dU, 3, dy);
}
CR__LA_RULES(lu, 1)

/* ---- qr ------------------------------------------------------------------------------------ */

typedef struct qr_env {
    const cr_array *A;
    cr_project *pA;
    cr__cmat Q, R; /* m x k, k x n (k = min(m, n)) */
    cr_array *oQ, *oR;
} qr_env;

/* The thin QR of an m x n A: geqrf, then orgqr/ungqr for Q (m x k, k = min(m, n)); R is
 * k x n, upper trapezoidal for a wide A (m < n). R's diagonal is real (LAPACK's convention,
 * also for complex A) but may be negative, as in Julia. */
static cr_status qr_forward(cr_arena *arena, const cr_value *args, size_t nargs, qr_env *e)
{
    cr_status st = cr__nargs(arena, "qr", nargs, 1, 1);
    if (st == CR_OK)
        st = matrix_arg(arena, "qr", args, nargs, 0, &e->A);
    if (st != CR_OK)
        return st;
    size_t m = e->A->shape[0], n = e->A->shape[1], k = m < n ? m : n;
    bool cplx = e->A->dtype == CR_DT_C128;
    st = cr__cmat_from(arena, e->A, cplx, &e->Q);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, k, n, true, &e->R);
    if (st != CR_OK)
        return st;
    e->Q.c = k;
    if (k == 0)
        return CR_OK;
    lapack_int lm = (lapack_int)m, ln = (lapack_int)n, lk = (lapack_int)k, info;
    size_t es = cplx ? sizeof(cr_complex) : sizeof(double);
    void *tau = cr__arena_array(arena, "qr", k, es, 0);
    if (tau == NULL)
        return CR__ALLOC_STATUS(arena);
    /* One workspace for both calls: the larger of the two queries. */
    size_t lw = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (cplx) {
            cr_complex q = 0;
            info = pass == 0
                       ? LAPACKE_zgeqrf_work(LAPACK_COL_MAJOR, lm, ln, e->Q.p, lm, tau, &q, -1)
                       : LAPACKE_zungqr_work(LAPACK_COL_MAJOR, lm, lk, lk, e->Q.p, lm, tau, &q, -1);
            lw = creal(q) > (double)lw ? (size_t)creal(q) : lw;
        } else {
            double q = 0;
            info = pass == 0
                       ? LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, lm, ln, e->Q.p, lm, tau, &q, -1)
                       : LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, lm, lk, lk, e->Q.p, lm, tau, &q, -1);
            lw = q > (double)lw ? (size_t)q : lw;
        }
        if (info != 0)
            return cr__lapack_fail(arena, "qr", info);
    }
    lw += 1;
    void *work = cr__arena_array(arena, "qr", lw, es, 0);
    if (work == NULL)
        return CR__ALLOC_STATUS(arena);
    info =
        cplx ? LAPACKE_zgeqrf_work(LAPACK_COL_MAJOR, lm, ln, e->Q.p, lm, tau, work, (lapack_int)lw)
             : LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, lm, ln, e->Q.p, lm, tau, work, (lapack_int)lw);
    if (info != 0)
        return cr__lapack_fail(arena, "qr", info);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i <= j && i < k; i++)
            cr__cmat_set(&e->R, i, j, cr__cmat_get(&e->Q, i, j));
    info = cplx ? LAPACKE_zungqr_work(LAPACK_COL_MAJOR, lm, lk, lk, e->Q.p, lm, tau, work,
                                      (lapack_int)lw)
                : LAPACKE_dorgqr_work(LAPACK_COL_MAJOR, lm, lk, lk, e->Q.p, lm, tau, work,
                                      (lapack_int)lw);
    if (info != 0)
        return cr__lapack_fail(arena, "qr", info);
    return CR_OK;
}

static cr_status qr_output(cr_arena *arena, qr_env *e, cr_value *y)
{
    cr_dtype dt = (cr_dtype)e->A->dtype;
    cr_status st = cr__cmat_out(arena, &e->Q, false, dt, &e->oQ);
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e->R, false, dt, &e->oR);
    if (st != CR_OK)
        return st;
    if (e->R.r == e->R.c) /* a wide A's R is a dense upper trapezoid, as Julia's */
        e->oR->structure = CR_MAT_UPPER;
    return cr__tuple_value(arena, 2, (const cr_array *const[]){e->oQ, e->oR}, y);
}

/* qr's result *y, its factors kept in e. */
static cr_status qr_primal(cr_arena *arena, const cr_value *args, size_t nargs, qr_env *e,
                           cr_value *y)
{
    cr_status st = qr_forward(arena, args, nargs, e);
    return st != CR_OK ? st : qr_output(arena, e, y);
}

/* Whether a triangular factor is numerically singular: a diagonal entry at or below
 * 64 eps times the largest (the threshold of the spectrum code in spectral.c). */
static bool tri_singular(const cr__cmat *T, size_t *at)
{
    double big = 0;
    for (size_t i = 0; i < T->r; i++)
        big = fmax(big, cabs(cr__cmat_get(T, i, i)));
    for (size_t i = 0; i < T->r; i++)
        if (cabs(cr__cmat_get(T, i, i)) <= 64 * DBL_EPSILON * big) {
            *at = i;
            return true;
        }
    return false;
}

/* The derivative needs R⁻¹: a (numerically) zero diagonal entry of R, a rank-deficient A,
 * is a domain error. */
static cr_status qr_check_rank(cr_arena *arena, const cr__cmat *R)
{
    size_t i;
    if (tri_singular(R, &i))
        return CR__FAIL(arena, CR_EDOMAIN,
                        "qr: A is rank deficient (R[%zu][%zu] is zero to working precision); the "
                        "derivative of its thin QR factorization is not defined there",
                        i, i);
    return CR_OK;
}

/* Columns [j0, j0 + c) of a column-major work matrix, sharing its storage. */
static cr__cmat cols_of(const cr__cmat *M, size_t j0, size_t c)
{
    size_t es = M->cplx ? sizeof(cr_complex) : sizeof(double);
    return (cr__cmat){(char *)M->p + j0 * M->r * es, M->r, c, M->cplx};
}

/* M = R R̄ᴴ - Q̄ᴴ Q; Ā = (Q̄ + Q copyltu(M)) R⁻ᴴ, copyltu(M) the Hermitian matrix of M's
 * lower triangle with a real diagonal (R's diagonal is real: the imaginary part there is
 * the gauge LAPACK fixes). A wide A = [X Y] (m < n) has R = [U V] with X = Q U, Y = Q V:
 * the square rule on X with Q̄ + Y V̄ᴴ and Ū gives X̄, and Ȳ = Q V̄ (ChainRules' qr_rev). */
static cr_status qr_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                             void *env)
{
    qr_env *e = cr__pb_start(dx, nx, false, env);
    const char *who = "qr_pullback";
    size_t m = e->Q.r, n = e->Q.c, nn = e->R.c;
    bool cplx = e->Q.cplx, zero;
    const cr__field_spec spec[2] = {{2, {m, n}, cplx}, {2, {n, nn}, cplx}};
    cr__cmat QR[2], M, G, Rs = cols_of(&e->R, 0, n), V = cols_of(&e->R, n, nn - n), Vb, YVb, Ga;
    cr_status st = cr__tuple_cmats(arena, who, *dy, 2, CR__TUPLE, spec, QR, &zero);
    if (st != CR_OK || zero) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    cr__cmat Qb = QR[0], Rb = QR[1];
    st = qr_check_rank(arena, &Rs);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, m, nn, true, &Ga);
    if (st == CR_OK && Qb.p == NULL && nn > n && Rb.p != NULL)
        st = cr__cmat_new(arena, cplx, m, n, true, &Qb);
    if (st == CR_OK && Rb.p != NULL && nn > n) { /* Q̄ += Y V̄ᴴ = Q V V̄ᴴ, Ȳ = Q V̄ */
        Vb = cols_of(&Rb, n, nn - n);
        st = cr__cmat_mul(arena, 'N', 'C', 1.0, &V, &Vb, &YVb);
        if (st == CR_OK) {
            cr__cmat Yb = cols_of(&Ga, n, nn - n);
            cr__cmat_gemm('N', 'N', 1.0, &e->Q, &YVb, 1.0, &Qb);
            cr__cmat_gemm('N', 'N', 1.0, &e->Q, &Vb, 0.0, &Yb);
        }
    }
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, n, n, true, &M);
    if (st != CR_OK)
        return st;
    if (Rb.p != NULL) {
        Rb.c = n; /* Ū, the square part */
        cr__cmat_tri(&Rb, 'U', false);
        cr__cmat_gemm('N', 'C', 1.0, &Rs, &Rb, 0.0, &M);
    }
    if (Qb.p != NULL)
        cr__cmat_gemm('C', 'N', -1.0, &Qb, &e->Q, 1.0, &M);
    for (size_t j = 0; j < n; j++) {
        cr__cmat_set(&M, j, j, creal(cr__cmat_get(&M, j, j)));
        for (size_t i = j + 1; i < n; i++)
            cr__cmat_set(&M, j, i, conj(cr__cmat_get(&M, i, j)));
    }
    if (Qb.p != NULL)
        st = cr__cmat_copy_as(arena, &Qb, cplx, &G);
    else
        st = cr__cmat_new(arena, cplx, m, n, true, &G);
    if (st != CR_OK)
        return st;
    cr__cmat_gemm('N', 'N', 1.0, &e->Q, &M, 1.0, &G);
    st = cr__tri_right(arena, who, &Rs, 'U', 'C', 'N', &G);
    if (st != CR_OK)
        return st;
    if (nn == n)
        return cr__cmat_give(arena, e->pA, &G, false, &dx[1]);
    for (size_t j = 0; j < n; j++) /* X̄, the first n columns */
        for (size_t i = 0; i < m; i++)
            cr__cmat_set(&Ga, i, j, cr__cmat_get(&G, i, j));
    return cr__cmat_give(arena, e->pA, &Ga, false, &dx[1]);
}

CR__LA_RRULE1(qr, qr_env, qr_primal, qr_pullback)

/* frule: E = Ȧ R⁻¹, C = Qᴴ E; Qᴴ Q̇ = Ω is skew-Hermitian with Ω's strictly lower part
 * that of C and an imaginary diagonal, Ṙ R⁻¹ = Ψ is upper triangular with a real
 * diagonal: Ω + Ψ = C. Q̇ = E + Q (Ω - C), Ṙ = Ψ R. */
static cr_status qr_frule1(cr_arena *arena, const char *who, const cr_tangent *dargs,
                           const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    qr_env e = {0};
    cr__cmat E, dA, C, W, Psi, dR;
    cr_status st = qr_primal(arena, args, nargs, &e, y);
    if (st == CR_OK)
        st = cr__frule_dx0(arena, who, dargs, args, e.Q.cplx, &dA, dy);
    if (st != CR_OK || dA.p == NULL)
        return st;
    bool cplx = e.Q.cplx;
    size_t n = e.Q.c, nn = e.R.c;
    cr__cmat Rs = cols_of(&e.R, 0, n);
    E = cols_of(&dA, 0, n); /* Ẋ; a wide A's Ẏ = the other columns */
    st = qr_check_rank(arena, &Rs);
    if (st == CR_OK)
        st = cr__tri_right(arena, who, &Rs, 'U', 'N', 'N', &E);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e.Q, &E, &C);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, n, n, true, &W);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, n, n, true, &Psi);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++) {
        cr_complex cjj = cr__cmat_get(&C, j, j);
        cr__cmat_set(&W, j, j, -creal(cjj));
        cr__cmat_set(&Psi, j, j, creal(cjj));
        for (size_t i = 0; i < j; i++) {
            cr_complex v = cr__cmat_get(&C, i, j) + conj(cr__cmat_get(&C, j, i));
            cr__cmat_set(&W, i, j, -v);
            cr__cmat_set(&Psi, i, j, v);
        }
    }
    cr__cmat_gemm('N', 'N', 1.0, &e.Q, &W, 1.0, &E);
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &Psi, &e.R, &dR); /* [U̇ Ψ V] */
    if (st == CR_OK && nn > n) {                              /* V̇ = Qᴴ (Ẏ - Q̇ V) */
        cr__cmat V = cols_of(&e.R, n, nn - n), dY = cols_of(&dA, n, nn - n), dV;
        cr__cmat_gemm('N', 'N', -1.0, &E, &V, 1.0, &dY);
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e.Q, &dY, &dV);
        for (size_t j = 0; st == CR_OK && j < nn - n; j++)
            for (size_t i = 0; i < n; i++)
                cr__cmat_set(&dR, i, n + j, cr__cmat_get(&dV, i, j));
    }
    return st != CR_OK ? st : factors_tangent(arena, e.oQ, &E, e.oR, &dR, 2, dy);
}
CR__LA_RULES(qr, 1)

/* ---- eigen and eigvals of general matrices ------------------------------------------------ */

/* A V = V diag(λ) for a general square A: λ sorted by (real part, imaginary part) as Julia
 * sorts them, each column of V of unit 2-norm with its component of largest modulus (the
 * first on a tie) real and positive. */
typedef struct geig_env {
    const cr_array *A;
    cr_project *pA;
    cr__cmat V;    /* n x n complex */
    cr_complex *w; /* n eigenvalues */
    size_t *k;     /* column j's gauge component */
    cr__cmat Vf;   /* LU factors of V (for V⁻¹), when computed */
    lapack_int *ipiv;
    bool factored;
    bool vectors;
} geig_env;

static bool eig_before(cr_complex a, cr_complex b)
{
    return creal(a) < creal(b) || (creal(a) == creal(b) && cimag(a) < cimag(b));
}

static cr_status geig_forward(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                              geig_env *e)
{
    cr_status st = cr__square_arg1(arena, who, args, nargs, &e->A, NULL);
    if (st != CR_OK)
        return st;
    bool cplx = e->A->dtype == CR_DT_C128;
    size_t n = e->A->shape[0];
    cr__cmat F, R;
    st = cr__cmat_from(arena, e->A, cplx, &F);
    if (st == CR_OK)
        st = cr__lapack_finite(arena, who, &F);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, n, n, false, &R);
    if (st == CR_OK)
        st = cr__cmat_new(arena, true, n, n, false, &e->V);
    if (st != CR_OK)
        return st;
    cr_complex *w = cr__arena_array(arena, who, n, sizeof *w, _Alignof(cr_complex));
    e->w = cr__arena_array(arena, who, n, sizeof *e->w, _Alignof(cr_complex));
    e->k = cr__arena_array(arena, who, n, sizeof *e->k, _Alignof(size_t));
    size_t *idx = cr__arena_array(arena, who, n, sizeof *idx, _Alignof(size_t));
    if (w == NULL || e->w == NULL || e->k == NULL || idx == NULL)
        return CR__ALLOC_STATUS(arena);
    if (n == 0)
        return CR_OK;
    lapack_int ln = (lapack_int)n, info;
    cr__cmat Vc; /* unsorted complex eigenvectors */
    st = cr__cmat_new(arena, true, n, n, false, &Vc);
    if (st != CR_OK)
        return st;
    if (cplx) {
        cr_complex q, dummy = 0;
        double *rwork = cr__arena_array(arena, who, 2 * n, sizeof *rwork, _Alignof(double));
        if (rwork == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_zgeev_work(LAPACK_COL_MAJOR, 'N', 'V', ln, F.p, ln, w, &dummy, 1, Vc.p, ln,
                                  &q, -1, rwork);
        size_t lw = (size_t)creal(q) + 1;
        cr_complex *work = cr__arena_array(arena, who, lw, sizeof *work, _Alignof(cr_complex));
        if (work == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_zgeev_work(LAPACK_COL_MAJOR, 'N', 'V', ln, F.p, ln, w, &dummy, 1, Vc.p, ln,
                                  work, (lapack_int)lw, rwork);
    } else {
        double q, dummy = 0;
        double *wr = cr__arena_array(arena, who, 2 * n, sizeof *wr, _Alignof(double));
        if (wr == NULL)
            return CR__ALLOC_STATUS(arena);
        double *wi = wr + n;
        info = LAPACKE_dgeev_work(LAPACK_COL_MAJOR, 'N', 'V', ln, F.p, ln, wr, wi, &dummy, 1, R.p,
                                  ln, &q, -1);
        size_t lw = (size_t)q + 1;
        double *work = cr__arena_array(arena, who, lw, sizeof *work, _Alignof(double));
        if (work == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_dgeev_work(LAPACK_COL_MAJOR, 'N', 'V', ln, F.p, ln, wr, wi, &dummy, 1, R.p,
                                  ln, work, (lapack_int)lw);
        /* Complex pairs come as (re, im) columns j, j + 1 for λ_j = wr + i wi, wi > 0. */
        for (size_t j = 0; info == 0 && j < n; j++) {
            w[j] = cr__c(wr[j], wi[j]);
            if (wi[j] != 0 && j + 1 < n) {
                w[j + 1] = cr__c(wr[j + 1], wi[j + 1]);
                for (size_t i = 0; i < n; i++) {
                    double re = ((double *)R.p)[i + j * n], im = ((double *)R.p)[i + (j + 1) * n];
                    cr__cmat_set(&Vc, i, j, cr__c(re, im));
                    cr__cmat_set(&Vc, i, j + 1, cr__c(re, -im));
                }
                j++;
            } else {
                for (size_t i = 0; i < n; i++)
                    cr__cmat_set(&Vc, i, j, cr__cmat_get(&R, i, j));
            }
        }
    }
    if (info != 0)
        return info > 0 ? CR__FAIL(arena, CR_EBACKEND,
                                   "%s: the QR algorithm did not converge (LAPACK info = %d)", who,
                                   (int)info)
                        : cr__lapack_fail(arena, who, info);
    /* Sort (insertion sort: n is small next to the O(n³) decomposition). */
    for (size_t j = 0; j < n; j++) {
        size_t t = j;
        while (t > 0 && eig_before(w[j], w[idx[t - 1]])) {
            idx[t] = idx[t - 1];
            t--;
        }
        idx[t] = j;
    }
    for (size_t j = 0; j < n; j++) {
        size_t s = idx[j];
        e->w[j] = w[s];
        double nrm = 0, big = -1;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            double a = cabs(cr__cmat_get(&Vc, i, s));
            nrm += a * a;
            if (a > big) {
                big = a;
                k = i;
            }
        }
        nrm = sqrt(nrm);
        cr_complex vk = cr__cmat_get(&Vc, k, s);
        cr_complex ph = big > 0 && nrm > 0 ? conj(vk) / (big * nrm) : 1.0;
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&e->V, i, j, cr__cmat_get(&Vc, i, s) * ph);
        cr__cmat_set(&e->V, k, j, creal(cr__cmat_get(&e->V, k, j)));
        e->k[j] = k;
    }
    return CR_OK;
}

/* V's LU factors, once; a singular V (a defective A) is a domain error. */
static cr_status geig_factor(cr_arena *arena, const char *who, geig_env *e)
{
    if (e->factored)
        return CR_OK;
    size_t n = e->V.r;
    cr_status st = cr__cmat_copy_as(arena, &e->V, true, &e->Vf);
    if (st != CR_OK)
        return st;
    e->ipiv = cr__arena_array(arena, who, n, sizeof *e->ipiv, _Alignof(lapack_int));
    if (e->ipiv == NULL)
        return CR__ALLOC_STATUS(arena);
    lapack_int ln = (lapack_int)n;
    lapack_int info =
        n == 0 ? 0 : LAPACKE_zgetrf_work(LAPACK_COL_MAJOR, ln, ln, e->Vf.p, ln, e->ipiv);
    if (info < 0)
        return cr__lapack_fail(arena, who, info);
    size_t at;
    if (info > 0 || tri_singular(&e->Vf, &at))
        return CR__FAIL(arena, CR_EDOMAIN,
                        "%s: the eigenvector matrix is singular to working precision (A is "
                        "defective: a repeated eigenvalue without a full set of eigenvectors); "
                        "the derivative is not defined there",
                        who);
    e->factored = true;
    return CR_OK;
}

/* X := op(V)⁻¹ X (op 'N' or 'C'). */
static cr_status geig_solve(cr_arena *arena, const char *who, geig_env *e, char op, cr__cmat *X)
{
    cr_status st = geig_factor(arena, who, e);
    size_t n = e->V.r;
    if (st != CR_OK || n == 0 || X->c == 0)
        return st;
    lapack_int ln = (lapack_int)n;
    lapack_int info = LAPACKE_zgetrs_work(LAPACK_COL_MAJOR, op, ln, (lapack_int)X->c, e->Vf.p, ln,
                                          e->ipiv, X->p, ln);
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

static double geig_scale(const geig_env *e)
{
    return cr__spectrum_scale_c(e->w, e->V.r);
}

static cr_status geig_output(cr_arena *arena, const geig_env *e, cr_value *y)
{
    size_t n = e->V.r;
    cr_array *lo, *vo;
    cr_status st = cr__new(arena, CR_DT_C128, 1, &n, false, &lo);
    if (st != CR_OK)
        return st;
    if (n > 0)
        memcpy(lo->data, e->w, n * sizeof *e->w);
    if (!e->vectors) {
        *y = cr_value_array(lo);
        return CR_OK;
    }
    st = cr__cmat_to_array(arena, &e->V, false, &vo);
    return st != CR_OK ? st : cr__tuple_value(arena, 2, (const cr_array *const[]){lo, vo}, y);
}

/* Ā = V⁻ᴴ G Vᴴ with G = diag(λ̄) + conj(F) ∘ H off the diagonal, F_ij = 1/(λ_j - λ_i) and
 * H = Vᴴ V̄ - Vᴴ V diag(re g) + Z, g = diag(Vᴴ V̄): the second term is the unit-norm
 * constraint, Z (column j: -i im(g_j) / V_kj conj(V[k, :]), k the gauge component) the
 * phase convention. Z is zero for losses that do not depend on the phases (ChainRules'
 * rule has no Z and assumes that). */
static cr_status geig_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    geig_env *e = cr__pb_start(dx, nx, false, env);
    const char *who = e->vectors ? "eigen_general_pullback" : "eigvals_general_pullback";
    size_t n = e->V.r;
    const cr__field_spec spec[2] = {{1, {n, 1}, true}, {2, {n, n}, true}};
    cr__cmat LV[2], G, K, VhV, T;
    bool zero;
    cr_status st = cr__tuple_cmats(arena, who, *dy, 2, e->vectors ? CR__TUPLE : 0, spec, LV, &zero);
    if (st != CR_OK || zero) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    const cr__cmat Lb = LV[0], Vb = LV[1];
    st = cr__cmat_new(arena, true, n, n, true, &G);
    if (st != CR_OK)
        return st;
    if (Vb.p != NULL) {
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->V, &Vb, &K);
        if (st == CR_OK)
            st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->V, &e->V, &VhV);
        if (st != CR_OK)
            return st;
        double scale = geig_scale(e);
        for (size_t j = 0; j < n; j++) {
            cr_complex g = cr__cmat_get(&K, j, j);
            size_t k = e->k[j];
            cr_complex z = cr__c(0, -cimag(g)) / cr__cmat_get(&e->V, k, j);
            for (size_t i = 0; i < n; i++) {
                if (i == j)
                    continue;
                cr_complex h = cr__cmat_get(&K, i, j) - cr__cmat_get(&VhV, i, j) * creal(g) +
                               z * conj(cr__cmat_get(&e->V, k, i));
                cr__cmat_set(&G, i, j, conj(cr__inv_gap_c(e->w[j], e->w[i], scale)) * h);
            }
        }
    }
    for (size_t i = 0; i < n && Lb.p != NULL; i++)
        cr__cmat_set(&G, i, i, cr__cmat_get(&Lb, i, 0));
    st = cr__cmat_mul(arena, 'N', 'C', 1.0, &G, &e->V, &T);
    /* V's factors are made in this call's arena, which the caller may rewind after it (a
     * tape's sweep does): factor on a copy of the environment, never keep them */
    geig_env ef = *e;
    ef.factored = false;
    if (st == CR_OK)
        st = geig_solve(arena, who, &ef, 'C', &T);
    return st != CR_OK ? st : cr__cmat_give(arena, e->pA, &T, false, &dx[1]);
}

static cr_status geig_rrule(cr_arena *arena, bool vectors, const cr_value *args, size_t nargs,
                            cr_value *y, cr_pullback *pb, const void *udata)
{
    const char *who = vectors ? "eigen_general" : "eigvals_general";
    CR__LA_ENV(arena, geig_env, e);
    e->vectors = vectors;
    cr_status st = geig_forward(arena, who, args, nargs, e);
    if (st == CR_OK)
        st = geig_output(arena, e, y);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail1(
        arena, &args[0], udata, &e->pA, pb,
        (cr_pullback){geig_pullback, e,
                      vectors ? "eigen_general_pullback" : "eigvals_general_pullback", nargs + 1});
}

/* frule: P = V⁻¹ Ȧ V; λ̇ = diag(P); K = F ∘ P (zero diagonal); V̇ = V K + V D with D
 * diagonal keeping the gauge: re D_jj = -re (Vᴴ V K)_jj (unit norm), im D_jj =
 * -im (V K)_kj / V_kj (component k stays real). */
static cr_status geig_frule(cr_arena *arena, bool vectors, const cr_tangent *dargs,
                            const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    const char *who = vectors ? "eigen_general" : "eigvals_general";
    geig_env e;
    memset(&e, 0, sizeof e);
    e.vectors = vectors;
    cr_status st = geig_forward(arena, who, args, nargs, &e);
    if (st == CR_OK)
        st = geig_output(arena, &e, y);
    if (st != CR_OK)
        return st;
    size_t n = e.V.r;
    cr__cmat dA, P, dl, VK;
    st = cr__frule_dx0(arena, who, dargs, args, true, &dA, dy);
    if (st != CR_OK || dA.p == NULL)
        return st;
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &dA, &e.V, &P);
    if (st == CR_OK)
        st = geig_solve(arena, who, &e, 'N', &P);
    if (st == CR_OK)
        st = cr__cmat_new(arena, true, n, 1, false, &dl);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        cr__cmat_set(&dl, i, 0, cr__cmat_get(&P, i, i));
    cr_array *dlo;
    st = cr__cmat_to_array(arena, &dl, true, &dlo);
    if (st != CR_OK)
        return st;
    if (!vectors) {
        *dy = cr_tangent_array(dlo);
        return CR_OK;
    }
    double scale = geig_scale(&e);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&P, i, j,
                         i == j ? 0.0
                                : cr__cmat_get(&P, i, j) * cr__inv_gap_c(e.w[j], e.w[i], scale));
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e.V, &P, &VK);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++) {
        cr_complex d1 = 0;
        for (size_t l = 0; l < n; l++)
            d1 += conj(cr__cmat_get(&e.V, l, j)) * cr__cmat_get(&VK, l, j);
        size_t k = e.k[j];
        cr_complex d = -creal(d1) +
                       cr__c(0, -cimag(cr__cmat_get(&VK, k, j)) / creal(cr__cmat_get(&e.V, k, j)));
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&VK, i, j, cr__cmat_get(&VK, i, j) + cr__cmat_get(&e.V, i, j) * d);
    }
    cr_array *dvo;
    st = cr__cmat_to_array(arena, &VK, false, &dvo);
    if (st != CR_OK)
        return st;
    cr_tangent t[2] = {cr_tangent_array(dlo), cr_tangent_array(dvo)};
    return cr_tangent_struct(arena, &cr__k_tup2, NULL, t, 2, dy);
}

#define GEIG_RULES(NAME, VEC) CR__PARAM_RULES(NAME, geig_rrule, geig_frule, VEC, 1)

GEIG_RULES(eigen_general, true)
GEIG_RULES(eigvals_general, false)

/* ---- pinv ------------------------------------------------------------------------------------ */

typedef struct pinv_env {
    cr_project *pA;
    cr__cmat Y;    /* n x m */
    cr__cmat P, Q; /* I - U_r U_rᴴ (m x m), I - V_r V_rᴴ (n x n) */
    bool vec;      /* A a vector (an m x 1 matrix) */
    bool diff[3];  /* pinv_ex: whether atol and rtol are perturbable */
} pinv_env;

/* pinv_ex's tolerance: max(atol, rtol s_max), rtol by default (two arguments) Julia's,
 * eps min(m, n) when atol is zero and 0 otherwise. */
static cr_status pinv_tols(cr_arena *arena, const cr_value *args, size_t nargs, double *atol,
                           double *rtol)
{
    for (size_t i = 1; i < nargs; i++) {
        cr_kind k = args[i].kind;
        double v = creal(cr__scalar_of(&args[i]));
        if ((k != CR_KIND_F64 && k != CR_KIND_F32 && k != CR_KIND_I64 && k != CR_KIND_I32 &&
             k != CR_KIND_BOOL) ||
            isnan(v))
            return CR__FAIL(arena, CR_EINVAL, "pinv_ex: argument %zu (%s) must be a real number",
                            i + 1, i == 1 ? "atol" : "rtol");
        *(i == 1 ? atol : rtol) = v;
    }
    return CR_OK;
}

/* Y = V_r diag(1/s) U_rᴴ over the singular values s > tol from the thin SVD (gesdd): pinv's
 * tol = eps * min(m, n) * s_max (Julia's default rtol, eps of the argument's precision),
 * pinv_ex's (A, atol[, rtol]) max(atol, rtol * s_max). A vector is an m x 1 matrix (Julia's
 * pinv of a vector: xᴴ / |x|², zero at zero), its pseudo-inverse 1 x m. */
static cr_status pinv_forward(cr_arena *arena, bool ex, const cr_value *args, size_t nargs,
                              const cr_array **A, pinv_env *e)
{
    const char *who = ex ? "pinv_ex" : "pinv";
    double atol = 0, rtol = NAN;
    cr_status st = cr__nargs(arena, who, nargs, ex ? 2 : 1, ex ? 3 : 1);
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, 0, A);
    if (st == CR_OK && ((*A)->ndim != 1 || !cr_dtype_is_float((cr_dtype)(*A)->dtype) ||
                        !cr__lapack_size_ok((*A)->shape[0])))
        st = matrix_arg(arena, who, args, nargs, 0, A);
    if (st == CR_OK && ex)
        st = pinv_tols(arena, args, nargs, &atol, &rtol);
    if (st != CR_OK)
        return st;
    e->vec = (*A)->ndim == 1;
    for (size_t i = 1; i < nargs; i++)
        e->diff[i] = cr__is_diff(&args[i]);
    bool cplx = (*A)->dtype == CR_DT_C128;
    size_t m = (*A)->shape[0], n = e->vec ? 1 : (*A)->shape[1], k = m < n ? m : n;
    /* P (m x m) and Q (n x n) are not bounded by A's m x n elements (a 0 x n matrix) */
    size_t es = cplx ? sizeof(cr_complex) : sizeof(double), pm[2] = {m, m}, qn[2] = {n, n}, cnt;
    if ((st = cr__ck_numel(cr_arena_ctx(arena), who, 2, pm, es, &cnt)) != CR_OK ||
        (st = cr__ck_numel(cr_arena_ctx(arena), who, 2, qn, es, &cnt)) != CR_OK)
        return st;
    cr__cmat F, U, Vt;
    st = cr__cmat_from(arena, *A, cplx, &F);
    if (st == CR_OK)
        st = cr__lapack_finite(arena, who, &F);
    /* U, Vt (written by LAPACK), then Y, P and Q, zeroed */
    const size_t dims[5][2] = {{m, k}, {k, n}, {n, m}, {m, m}, {n, n}};
    cr__cmat *mats[5] = {&U, &Vt, &e->Y, &e->P, &e->Q};
    for (size_t i = 0; i < 5 && st == CR_OK; i++)
        st = cr__cmat_new(arena, cplx, dims[i][0], dims[i][1], i >= 2, mats[i]);
    if (st != CR_OK)
        return st;
    double *s = cr__arena_array(arena, who, k, sizeof *s, _Alignof(double));
    lapack_int *iwork = cr__arena_array(arena, who, 8 * k + 1, sizeof *iwork, _Alignof(lapack_int));
    if (s == NULL || iwork == NULL)
        return CR__ALLOC_STATUS(arena);
    lapack_int lm = (lapack_int)m, ln = (lapack_int)n, lk = (lapack_int)k, info = 0;
    if (k > 0 && cplx) {
        size_t mx = m > n ? m : n, a1 = k * (5 * k + 7), a2 = 2 * k * (k + mx) + k;
        double *rwork = cr__arena_array(arena, who, ((a1 > a2 ? a1 : a2) + 1), sizeof(double),
                                        _Alignof(double));
        cr_complex q;
        if (rwork == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_zgesdd_work(LAPACK_COL_MAJOR, 'S', lm, ln, F.p, lm, s, U.p, lm, Vt.p, lk, &q,
                                   -1, rwork, iwork);
        size_t lw = (size_t)creal(q) + 1;
        cr_complex *work = cr__arena_array(arena, who, lw, sizeof *work, _Alignof(cr_complex));
        if (work == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_zgesdd_work(LAPACK_COL_MAJOR, 'S', lm, ln, F.p, lm, s, U.p, lm, Vt.p, lk,
                                   work, (lapack_int)lw, rwork, iwork);
    } else if (k > 0) {
        double q;
        info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', lm, ln, F.p, lm, s, U.p, lm, Vt.p, lk, &q,
                                   -1, iwork);
        size_t lw = (size_t)q + 1;
        double *work = cr__arena_array(arena, who, lw, sizeof *work, _Alignof(double));
        if (work == NULL)
            return CR__ALLOC_STATUS(arena);
        info = LAPACKE_dgesdd_work(LAPACK_COL_MAJOR, 'S', lm, ln, F.p, lm, s, U.p, lm, Vt.p, lk,
                                   work, (lapack_int)lw, iwork);
    }
    if (info != 0)
        return cr__lapack_fail(arena, who, info);
    double eps = (*A)->dtype == CR_DT_F32 ? (double)FLT_EPSILON : DBL_EPSILON;
    if (isnan(rtol)) /* not given */
        rtol = atol == 0 ? eps * (double)k : 0;
    double tol = k > 0 ? fmax(atol, rtol * s[0]) : 0;
    for (size_t i = 0; i < m; i++)
        cr__cmat_set(&e->P, i, i, 1.0);
    for (size_t i = 0; i < n; i++)
        cr__cmat_set(&e->Q, i, i, 1.0);
    for (size_t l = 0; l < k && s[l] > tol; l++) {
        for (size_t j = 0; j < m; j++) {
            cr_complex uj = conj(cr__cmat_get(&U, j, l));
            for (size_t i = 0; i < n; i++)
                cr__cmat_set(&e->Y, i, j,
                             cr__cmat_get(&e->Y, i, j) + conj(cr__cmat_get(&Vt, l, i)) * uj / s[l]);
            for (size_t i = 0; i < m; i++)
                cr__cmat_set(&e->P, i, j, cr__cmat_get(&e->P, i, j) - cr__cmat_get(&U, i, l) * uj);
        }
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++)
                cr__cmat_set(&e->Q, i, j,
                             cr__cmat_get(&e->Q, i, j) -
                                 conj(cr__cmat_get(&Vt, l, i)) * cr__cmat_get(&Vt, l, j));
    }
    return CR_OK;
}

/* Ā = -Yᴴ Ȳ Yᴴ + (I - A Y) Ȳᴴ Y Yᴴ + Yᴴ Y Ȳᴴ (I - Y A) (Golub and Pereyra; ChainRules'
 * rule). At a rank-deficient A it is the derivative of the truncated pseudo-inverse, which
 * is what pinv computes (singular values below the tolerance stay truncated nearby). */
static cr_status pinv_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    pinv_env *e = cr__pb_start(dx, nx, false, env);
    for (size_t i = 2; i < nx; i++)
        dx[i] = e->diff[i - 1] ? cr_tangent_zero() : cr_tangent_none();
    cr__cmat G, T1, T2, YYh, YhY, R;
    cr_status st = cr__pull_matrix(arena, "pinv_pullback", dy, e->Y.r, e->Y.c, e->Y.cplx, dx, &G);
    if (st != CR_OK || G.p == NULL)
        return st;
    st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->Y, &G, &T1); /* Yᴴ Ȳ */
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', -1.0, &T1, &e->Y, &R); /* -Yᴴ Ȳ Yᴴ */
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', 1.0, &e->Y, &e->Y, &YYh);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->Y, &e->Y, &YhY);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', 1.0, &e->P, &G, &T1); /* P Ȳᴴ */
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', 1.0, &YhY, &G, &T2); /* Yᴴ Y Ȳᴴ */
    if (st != CR_OK)
        return st;
    cr__cmat_gemm('N', 'N', 1.0, &T1, &YYh, 1.0, &R);
    cr__cmat_gemm('N', 'N', 1.0, &T2, &e->Q, 1.0, &R);
    return cr__cmat_give(arena, e->pA, &R, e->vec, &dx[1]);
}

static cr_status pinv_rrule_common(cr_arena *arena, bool ex, const cr_value *args, size_t nargs,
                                   cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__LA_ENV(arena, pinv_env, e);
    const cr_array *A;
    cr_status st = pinv_forward(arena, ex, args, nargs, &A, e);
    if (st != CR_OK)
        return st;
    return cr__rrule_out1(
        arena, &e->Y, (cr_dtype)A->dtype, args, udata, &e->pA, y, pb,
        (cr_pullback){pinv_pullback, e, ex ? "pinv_ex_pullback" : "pinv_pullback", nargs + 1});
}

/* frule: Ẏ = -Y Ȧ Y + Y Yᴴ Ȧᴴ (I - A Y) + (I - Y A) Ȧᴴ Yᴴ Y. */
static cr_status pinv_frule_common(cr_arena *arena, bool ex, const cr_tangent *dargs,
                                   const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    pinv_env e;
    const cr_array *A;
    cr__cmat dA, T, R, YYh, YhY;
    cr_status st = pinv_forward(arena, ex, args, nargs, &A, &e);
    if (st == CR_OK)
        st = cr__frule_out1(arena, ex ? "pinv_ex" : "pinv", &e.Y, (cr_dtype)A->dtype, dargs, args,
                            y, &dA, dy);
    if (st != CR_OK || dA.p == NULL)
        return st;
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e.Y, &dA, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', -1.0, &T, &e.Y, &R);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', 1.0, &e.Y, &e.Y, &YYh);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e.Y, &e.Y, &YhY);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', 1.0, &YYh, &dA, &T); /* Y Yᴴ Ȧᴴ */
    if (st != CR_OK)
        return st;
    cr__cmat_gemm('N', 'N', 1.0, &T, &e.P, 1.0, &R);
    st = cr__cmat_mul(arena, 'N', 'C', 1.0, &e.Q, &dA, &T); /* (I - Y A) Ȧᴴ */
    if (st != CR_OK)
        return st;
    cr__cmat_gemm('N', 'N', 1.0, &T, &YhY, 1.0, &R);
    return cr__tangent_like(arena, y->u.arr, &R, false, dy);
}

#define PINV_RULES(NAME, EX) CR__PARAM_RULES(NAME, pinv_rrule_common, pinv_frule_common, EX, -1)

PINV_RULES(pinv, false)
PINV_RULES(pinv_ex, true)

/* ---- sylvester and lyap -------------------------------------------------------------------- */

/* A complex Schur form M = Q T Qᴴ (gees). */
typedef struct schur {
    cr__cmat Q, T;
} schur;

static cr_status schur_of(cr_arena *arena, const char *who, const cr__cmat *M, schur *s)
{
    size_t n = M->r;
    cr_status st = cr__lapack_finite(arena, who, M);
    if (st == CR_OK)
        st = cr__cmat_copy_as(arena, M, true, &s->T);
    if (st == CR_OK)
        st = cr__cmat_new(arena, true, n, n, false, &s->Q);
    if (st != CR_OK || n == 0)
        return st;
    cr_complex *w = cr__arena_array(arena, who, n, sizeof *w, _Alignof(cr_complex));
    double *rwork = cr__arena_array(arena, who, n, sizeof *rwork, _Alignof(double));
    if (w == NULL || rwork == NULL)
        return CR__ALLOC_STATUS(arena);
    lapack_int ln = (lapack_int)n, sdim = 0;
    cr_complex q;
    lapack_int info = LAPACKE_zgees_work(LAPACK_COL_MAJOR, 'V', 'N', NULL, ln, s->T.p, ln, &sdim, w,
                                         s->Q.p, ln, &q, -1, rwork, NULL);
    size_t lw = (size_t)creal(q) + 1;
    cr_complex *work = cr__arena_array(arena, who, lw, sizeof *work, _Alignof(cr_complex));
    if (work == NULL)
        return CR__ALLOC_STATUS(arena);
    info = LAPACKE_zgees_work(LAPACK_COL_MAJOR, 'V', 'N', NULL, ln, s->T.p, ln, &sdim, w, s->Q.p,
                              ln, work, (lapack_int)lw, rwork, NULL);
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

/* The operators of A X + X B (sylvester) or A X + X Aᴴ (lyap): A = Qa Ta Qaᴴ and
 * B = Qb op(Tb) Qbᴴ, op(T) = Tᴴ when b_adj (lyap reuses A's Schur form for B = Aᴴ). */
typedef struct sylv {
    schur a, b;
    bool b_adj;
} sylv;

/* Solves A X + X B + C = 0 (op 'N') or Aᴴ X + X Bᴴ + C = 0 (op 'C') by Bartels-Stewart:
 * Schur forms, then the triangular equation (trsyl). */
static cr_status sylv_solve(cr_arena *arena, const char *who, const sylv *S, char op,
                            const cr__cmat *C, cr__cmat *X)
{
    size_t m = C->r, n = C->c;
    cr__cmat Cc, T, F;
    cr_status st = cr__cmat_copy_as(arena, C, true, &Cc);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'C', 'N', -1.0, &S->a.Q, &Cc, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &T, &S->b.Q, &F); /* -Qaᴴ C Qb */
    if (st != CR_OK)
        return st;
    if (m > 0 && n > 0) {
        char ta = op == 'N' ? 'N' : 'C';
        bool badj = S->b_adj != (op != 'N');
        double scale = 1;
        lapack_int info = LAPACKE_ztrsyl_work(LAPACK_COL_MAJOR, ta, badj ? 'C' : 'N', 1,
                                              (lapack_int)m, (lapack_int)n, S->a.T.p, (lapack_int)m,
                                              S->b.T.p, (lapack_int)n, F.p, (lapack_int)m, &scale);
        if (info < 0)
            return cr__lapack_fail(arena, who, info);
        if (info > 0)
            return CR__FAIL(arena, CR_EDOMAIN,
                            "%s: A and -B have common or nearly common eigenvalues; the equation "
                            "has no unique solution",
                            who);
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < m; i++)
                cr__cmat_set(&F, i, j, cr__cmat_get(&F, i, j) / scale);
    }
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &S->a.Q, &F, &T);
    return st != CR_OK ? st : cr__cmat_mul(arena, 'N', 'C', 1.0, &T, &S->b.Q, X);
}

typedef struct sylv_env {
    int kind; /* 0 sylvester(A, B, C), 1 lyap(A, C) */
    sylv S;
    cr__cmat X; /* complex work; real when the problem is */
    const cr_array *A, *B, *C;
    cr_project *pA, *pB, *pC;
    cr_dtype dt;
    cr_array *o;
} sylv_env;

static const char *sylv_name(int kind)
{
    return kind == 0 ? "sylvester" : "lyap";
}

static cr_status sylv_forward(cr_arena *arena, int kind, const cr_value *args, size_t nargs,
                              sylv_env *e)
{
    const char *who = sylv_name(kind);
    size_t na = kind == 0 ? 3 : 2;
    cr_status st = cr__nargs(arena, who, nargs, na, na);
    if (st == CR_OK)
        st = cr__square_arg(arena, who, args, nargs, 0, &e->A, NULL);
    if (st == CR_OK && kind == 0)
        st = cr__square_arg(arena, who, args, nargs, 1, &e->B, NULL);
    if (st == CR_OK)
        st = matrix_arg(arena, who, args, nargs, na - 1, &e->C);
    if (st != CR_OK)
        return st;
    e->kind = kind;
    size_t n = e->A->shape[0], m = kind == 0 ? e->B->shape[0] : n;
    if (e->C->shape[0] != n || e->C->shape[1] != m)
        return CR__FAIL(arena, CR_ESHAPE, "%s: C must be %zu x %zu", who, n, m);
    e->dt = cr__promote((cr_dtype)e->A->dtype, (cr_dtype)e->C->dtype);
    if (kind == 0)
        e->dt = cr__promote(e->dt, (cr_dtype)e->B->dtype);
    cr__cmat Am, Bm, Cm;
    st = cr__cmat_from(arena, e->A, true, &Am);
    if (st == CR_OK)
        st = schur_of(arena, who, &Am, &e->S.a);
    if (st == CR_OK && kind == 0) {
        st = cr__cmat_from(arena, e->B, true, &Bm);
        if (st == CR_OK)
            st = schur_of(arena, who, &Bm, &e->S.b);
    } else if (st == CR_OK) {
        e->S.b = e->S.a;
        e->S.b_adj = true;
    }
    if (st == CR_OK)
        st = cr__cmat_from(arena, e->C, true, &Cm);
    if (st == CR_OK)
        st = sylv_solve(arena, who, &e->S, 'N', &Cm, &e->X);
    if (st != CR_OK)
        return st;
    /* A real problem has a real solution: drop the rounding left in the imaginary parts. */
    for (size_t j = 0; e->dt != CR_DT_C128 && j < e->X.c; j++)
        for (size_t i = 0; i < e->X.r; i++)
            cr__cmat_set(&e->X, i, j, creal(cr__cmat_get(&e->X, i, j)));
    return cr__cmat_out(arena, &e->X, false, e->dt, &e->o);
}

typedef struct sylv_thunk {
    const sylv_env *e;
    cr__cmat L;
    int which; /* 0: Ā, 1: B̄ */
} sylv_thunk;

/* sylvester: Ā = Λ Xᴴ, B̄ = Xᴴ Λ; lyap: Ā = Λ Xᴴ + Λᴴ X. */
static cr_status sylv_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    sylv_thunk *t = env;
    const sylv_env *e = t->e;
    cr__cmat R;
    cr_status st = t->which == 0 ? cr__cmat_mul(arena, 'N', 'C', 1.0, &t->L, &e->X, &R)
                                 : cr__cmat_mul(arena, 'C', 'N', 1.0, &e->X, &t->L, &R);
    if (st != CR_OK)
        return st;
    if (e->kind == 1)
        cr__cmat_gemm('C', 'N', 1.0, &t->L, &e->X, 1.0, &R);
    return cr__cmat_give(arena, t->which == 0 ? e->pA : e->pB, &R, false, out);
}

/* The adjoint equation: Aᴴ Λ + Λ Bᴴ + X̄ = 0 (lyap: Aᴴ Λ + Λ A + X̄ = 0); C̄ = Λ, and Ā, B̄
 * from Λ (thunks). */
static cr_status sylv_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    sylv_env *e = env;
    const char *who = e->kind == 0 ? "sylvester_pullback" : "lyap_pullback";
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    size_t shape[2] = {e->X.r, e->X.c}, ic = e->kind == 0 ? 3 : 2;
    cr__cmat G, L;
    cr_status st = cr__cmat_tan(arena, who, *dy, 2, shape, true, &G);
    if (st != CR_OK)
        return st;
    if (G.p == NULL) {
        for (size_t i = 1; i < nx; i++)
            dx[i] = cr_tangent_zero();
        return CR_OK;
    }
    st = sylv_solve(arena, who, &e->S, 'C', &G, &L);
    if (st == CR_OK)
        st = cr__cmat_give(arena, e->pC, &L, false, &dx[ic]);
    for (int w = 0; w < (e->kind == 0 ? 2 : 1) && st == CR_OK; w++) {
        sylv_thunk *t = cr_arena_alloc(arena, sizeof *t, _Alignof(sylv_thunk));
        if (t == NULL)
            return CR__ALLOC_STATUS(arena);
        *t = (sylv_thunk){e, L, w};
        st = cr__thunk(arena, sylv_thunk_fn, NULL, t,
                       e->kind == 1 ? "lyap_pullback_thunk"
                       : w == 0     ? "sylvester_pullback_thunk_A"
                                    : "sylvester_pullback_thunk_B",
                       &dx[1 + (size_t)w]);
    }
    return st;
}

static cr_status sylv_rrule(cr_arena *arena, int kind, const cr_value *args, size_t nargs,
                            cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__LA_ENV(arena, sylv_env, e);
    cr_status st = sylv_forward(arena, kind, args, nargs, e);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(e->o);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st == CR_OK && kind == 0)
        st = cr_project_new(arena, &args[1], &e->pB);
    if (st == CR_OK)
        st = cr_project_new(arena, &args[kind == 0 ? 2 : 1], &e->pC);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){sylv_pullback, e, kind == 0 ? "sylvester_pullback" : "lyap_pullback",
                        nargs + 1};
    return CR_OK;
}

/* frule: Ẋ solves A Ẋ + Ẋ B + (Ȧ X + X Ḃ + Ċ) = 0 (lyap: Ḃ = Ȧᴴ). */
static cr_status sylv_frule(cr_arena *arena, int kind, const cr_tangent *dargs,
                            const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    const char *who = sylv_name(kind);
    sylv_env e;
    memset(&e, 0, sizeof e);
    cr_status st = sylv_forward(arena, kind, args, nargs, &e);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(e.o);
    size_t ic = kind == 0 ? 2 : 1;
    cr__cmat dA, dB, dC, R, dX;
    dB.p = NULL;
    st = cr__cmat_dx(arena, who, dargs, args, 0, true, &dA);
    if (st == CR_OK && kind == 0)
        st = cr__cmat_dx(arena, who, dargs, args, 1, true, &dB);
    if (st == CR_OK)
        st = cr__cmat_dx(arena, who, dargs, args, ic, true, &dC);
    if (st != CR_OK)
        return st;
    if (dA.p == NULL && dB.p == NULL && dC.p == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    if (dC.p != NULL)
        st = cr__cmat_copy_as(arena, &dC, true, &R);
    else
        st = cr__cmat_new(arena, true, e.X.r, e.X.c, true, &R);
    if (st != CR_OK)
        return st;
    if (dA.p != NULL) {
        cr__cmat_gemm('N', 'N', 1.0, &dA, &e.X, 1.0, &R);
        if (kind == 1)
            cr__cmat_gemm('N', 'C', 1.0, &e.X, &dA, 1.0, &R);
    }
    if (dB.p != NULL)
        cr__cmat_gemm('N', 'N', 1.0, &e.X, &dB, 1.0, &R);
    st = sylv_solve(arena, who, &e.S, 'N', &R, &dX);
    return st != CR_OK ? st : cr__tangent_like(arena, e.o, &dX, false, dy);
}

#define SYLV_RULES(NAME, KIND, ARITY) CR__PARAM_RULES(NAME, sylv_rrule, sylv_frule, KIND, ARITY)

SYLV_RULES(sylvester, 0, 3)
SYLV_RULES(lyap, 1, 2)

/* ---- Test registrations ------------------------------------------------------------------ */

/* An r x c matrix of entries in [-1, 1) of dtype dt, plus `diag` on the diagonal. */
static cr_status rand_mat(cr_arena *arena, uint64_t *rng, cr_dtype dt, size_t r, size_t c,
                          double diag, cr_array **out)
{
    size_t shape[2] = {r, c};
    cr_status st = cr__rand_array(arena, rng, dt, 2, shape, -1, 1, out);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < r && i < c; i++)
        cr__store(*out, (ptrdiff_t)(i * c + i), cr__load(*out, (ptrdiff_t)(i * c + i)) + diag);
    return CR_OK;
}

/* lu: a diagonally dominant matrix (square half of the time, else of 1 to 4 rows and
 * columns) with its rows permuted, so that partial pivoting permutes (with clear pivots: no
 * tie that a finite-difference step could flip). */
static cr_status sample_lu(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs, void *env)
{
    (void)nargs;
    (void)env;
    size_t n = 1 + cr__rng_below(rng, 4);
    size_t c = cr__rng_below(rng, 2) ? n : 1 + cr__rng_below(rng, 4);
    cr_array *D, *A;
    cr_status st = rand_mat(arena, rng, cr__rng_dtype(rng), n, c, 4.0, &D);
    if (st == CR_OK)
        st = cr__new_like(arena, (cr_dtype)D->dtype, D, false, &A);
    if (st != CR_OK)
        return st;
    size_t perm[4] = {0, 1, 2, 3};
    for (size_t i = n; i > 1; i--) {
        size_t j = cr__rng_below(rng, i), t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < c; j++)
            cr__store(A, (ptrdiff_t)(perm[i] * c + j), cr__load(D, (ptrdiff_t)(i * c + j)));
    args[0] = cr_value_array(A);
    return CR_OK;
}

/* qr and pinv (env NULL): well-conditioned rectangular matrices, tall or wide; pinv's are
 * sometimes vectors. */
static cr_status sample_rect(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                             void *env)
{
    (void)nargs;
    static const size_t shapes[6][2] = {{3, 2}, {4, 2}, {3, 3}, {4, 3}, {2, 1}, {2, 3}};
    bool qr = env != NULL;
    const size_t *s = shapes[cr__rng_below(rng, 6)];
    bool wide = cr__rng_below(rng, 2) == 0;
    cr_dtype dt = cr__rng_dtype(rng);
    if (qr && wide && s[0] != s[1] && dt == CR_DT_F32) /* too coarse for the differences */
        dt = CR_DT_F64;
    cr_array *A;
    cr_status st = rand_mat(arena, rng, dt, wide ? s[1] : s[0], wide ? s[0] : s[1], 2.0, &A);
    if (st != CR_OK)
        return st;
    if (!qr && cr__rng_below(rng, 4) == 0) { /* a vector: A's first row */
        A->ndim = 1;
        A->shape[0] = A->shape[1];
        A->strides[0] = A->strides[1];
    }
    args[0] = cr_value_array(A);
    /* pinv_ex: atol in [0, 0.3), rtol (when given) in [0, 0.1): below the sampled matrices'
     * singular values (about 1 and more), so nothing is truncated nearby */
    for (size_t i = 1; i < nargs; i++)
        args[i] = cr_value_f64(
            cr__rng_below(rng, 3) == 0 ? 0.0 : cr__rng_unif(rng, 0, i == 1 ? 0.3 : 0.1));
    return CR_OK;
}

/* eigen_general: D + 0.3 R with D = diag(4, 6, ...) and, half of the time, a block
 * [1 2; -0.8 1] giving a complex pair 1 ± 1.26i whose eigenvector components have clearly
 * different moduli (the gauge component is not near a tie). Real most of the time, f32 or
 * c128 sometimes. */
static cr_status sample_geig(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                             void *env)
{
    (void)nargs;
    (void)env;
    size_t n = 1 + cr__rng_below(rng, 4);
    cr_array *A;
    cr_status st = rand_mat(arena, rng, cr__rng_dtype(rng), n, n, 0.0, &A);
    if (st != CR_OK)
        return st;
    bool pair = n >= 2 && cr__rng_below(rng, 2) == 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            cr_complex v = 0.3 * cr__load(A, (ptrdiff_t)(i * n + j));
            if (i == j)
                v += pair && i < 2 ? 1.0 : 2.0 * (double)i + 4.0;
            if (pair && i == 0 && j == 1)
                v += 2.0;
            if (pair && i == 1 && j == 0)
                v -= 0.8;
            cr__store(A, (ptrdiff_t)(i * n + j), v);
        }
    args[0] = cr_value_array(A);
    return CR_OK;
}

/* sylvester(A, B, C): A = 2 I + 0.5 R (n x n), B = I + 0.5 R (m x m), so λ(A) + λ(B) stays
 * near 3; lyap(A, C): A = 1.5 I + 0.5 R. C random. The arguments share a dtype most of the
 * time. */
static cr_status sample_sylv(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                             void *env)
{
    (void)env;
    size_t n = 1 + cr__rng_below(rng, 3), m = nargs == 3 ? 1 + cr__rng_below(rng, 3) : n;
    cr_dtype dt = cr__rng_dtype(rng);
    bool mixed = cr__rng_below(rng, 4) == 0;
    cr_array *A, *B, *C;
    cr_status st = rand_mat(arena, rng, dt, n, n, 0.0, &A);
    if (st == CR_OK)
        st = rand_mat(arena, rng, mixed ? cr__rng_dtype(rng) : dt, n, m, 0.0, &C);
    if (st == CR_OK && nargs == 3)
        st = rand_mat(arena, rng, mixed ? cr__rng_dtype(rng) : dt, m, m, 0.0, &B);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            cr_complex v = 0.5 * cr__load(A, (ptrdiff_t)(i * n + j));
            cr__store(A, (ptrdiff_t)(i * n + j), i == j ? v + (nargs == 3 ? 2.0 : 1.5) : v);
        }
    args[0] = cr_value_array(A);
    if (nargs == 3) {
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < m; j++) {
                cr_complex v = 0.5 * cr__load(B, (ptrdiff_t)(i * m + j));
                cr__store(B, (ptrdiff_t)(i * m + j), i == j ? v + 1.0 : v);
            }
        args[1] = cr_value_array(B);
    }
    args[nargs - 1] = cr_value_array(C);
    return CR_OK;
}

static const cr_rule_test k_t_lu = {.sample = sample_lu};
static const cr_rule_test k_t_qr = {.sample = sample_rect, .env = (void *)&k_t_lu};
static const cr_rule_test k_t_pinv = {.sample = sample_rect};
static const cr_rule_test k_t_geig = {.sample = sample_geig};
static const cr_rule_test k_t_sylv = {.sample = sample_sylv};

cr_status cr__linalg_register_fact(cr_registry *reg)
{
    enum { REAL = CR_M_F64 | CR_M_F32 | CR_M_INT | CR_M_BOOL };
    static const cr_argspec s_pinv_ex[3] = {{CR__M_FARRAY, NULL}, {REAL, NULL}, {REAL, NULL}};
    static const cr__linalg_rule k[] = {
        {&lu_function, cr__linalg_fa, 1, lu_frule, lu_rrule, &k_t_lu, &cr__form_lu},
        {&qr_function, cr__linalg_fa, 1, qr_frule, qr_rrule, &k_t_qr, &cr__form_qr},
        {&eigen_general_function, cr__linalg_fa, 1, eigen_general_frule, eigen_general_rrule,
         &k_t_geig, &cr__form_eigen_general},
        {&eigvals_general_function, cr__linalg_fa, 1, eigvals_general_frule, eigvals_general_rrule,
         &k_t_geig, &cr__form_eigvals_general},
        {&pinv_function, cr__linalg_fa, 1, pinv_frule, pinv_rrule, &k_t_pinv, &cr__form_pinv},
        {&pinv_ex_function, s_pinv_ex, 2, pinv_ex_frule, pinv_ex_rrule, &k_t_pinv, NULL},
        {&pinv_ex_function, s_pinv_ex, 3, pinv_ex_frule, pinv_ex_rrule, &k_t_pinv, NULL},
        {&sylvester_function, cr__linalg_fa, 3, sylvester_frule, sylvester_rrule, &k_t_sylv,
         &cr__form_sylvester},
        {&lyap_function, cr__linalg_fa, 2, lyap_frule, lyap_rrule, &k_t_sylv, &cr__form_lyap},
    };
    return cr__linalg_add_rules(reg, k, sizeof k / sizeof *k);
}

#else /* !CR_HAVE_LAPACKE */

/* Without LAPACKE: the function values exist; calling them reports CR_EUNIMPL. */
CR__NO_LAPACK_FN(lu, "lu")
CR__NO_LAPACK_FN(qr, "qr")
CR__NO_LAPACK_FN(eigen_general, "eigen_general")
CR__NO_LAPACK_FN(eigvals_general, "eigvals_general")
CR__NO_LAPACK_FN(pinv, "pinv")
CR__NO_LAPACK_FN(pinv_ex, "pinv_ex")
CR__NO_LAPACK_FN(sylvester, "sylvester")
CR__NO_LAPACK_FN(lyap, "lyap")

CR__NO_LAPACK_REGISTER(fact)

#endif /* CR_HAVE_LAPACKE */

/* ---- Second-order forms -------------------------------------------------------------------
 *
 * For a call y = f(A, ...) whose result has the cotangent ȳ, a form gives, along each
 * direction, S = d/dε [pullback at x + ε ẋ](ȳ); the engine adds pullback(ȳ̇) separately
 * (docs/second-order-forms.md). First derivatives come from the rules (the recorded pullback,
 * the result's tangent ẏ from the frule in the forward sweep, other frules); what is written
 * here is the second derivative, with its derivation. A structured matrix argument is read by
 * the rules as its logical dense matrix; the forms work on that dense matrix and write S
 * unprojected: the engine projects it as the rule projects the cotangent. The forms are
 * compiled with or without LAPACKE (they call the rules through their function values).
 */

/* ---- pinv -------------------------------------------------------------------------------------
 */

typedef struct pinv_state {
    cr__form F;
    size_t m, n;
    const double *Y;
    double *P, *Q, *W1, *W2, *W3, *W4, *W5, *W6, *Pd, *Fd, *Qd, *Ed, *Yz, *Sd;
} pinv_state;

/* pinv along Ȧ, with Ẏ (the derivation below). */
static cr_status pinv_step(const void *state, const cr__form_along *d, double *s)
{
    const pinv_state *z = state;
    size_t m = z->m, n = z->n;
    const double *Ad = d->xd, *Yd = d->yd != NULL ? d->yd : z->Yz, *A = z->F.x->data, *Y = z->Y;
    double *Pd = z->Pd, *Qd = z->Qd, *Ed = z->Ed, *Fd = z->Fd, *Sd = z->Sd;
    /* Ṗ, Q̇, Ė, Ḟ */
    cr__form_mm(-1.0, Ad, m, n, 0, Y, n, m, 0, 0.0, Pd);
    cr__form_mm(-1.0, A, m, n, 0, Yd, n, m, 0, 1.0, Pd);
    cr__form_mm(-1.0, Yd, n, m, 0, A, m, n, 0, 0.0, Qd);
    cr__form_mm(-1.0, Y, n, m, 0, Ad, m, n, 0, 1.0, Qd);
    cr__form_mm(1.0, Yd, n, m, 0, Y, n, m, 1, 0.0, Ed);
    cr__form_mm(1.0, Y, n, m, 0, Yd, n, m, 1, 1.0, Ed);
    cr__form_mm(1.0, Yd, n, m, 1, Y, n, m, 0, 0.0, Fd);
    cr__form_mm(1.0, Y, n, m, 1, Yd, n, m, 0, 1.0, Fd);
    /* the six terms of S */
    cr__form_mm(-1.0, Yd, n, m, 1, z->W5, n, n, 0, 0.0, Sd);
    cr__form_mm(-1.0, z->W6, m, m, 0, Yd, n, m, 1, 1.0, Sd);
    cr__form_mm(1.0, Pd, m, m, 0, z->W1, m, n, 0, 1.0, Sd);
    cr__form_mm(1.0, z->W4, m, n, 0, Ed, n, n, 0, 1.0, Sd);
    cr__form_mm(1.0, Fd, m, m, 0, z->W2, m, n, 0, 1.0, Sd);
    cr__form_mm(1.0, z->W3, m, n, 0, Qd, n, n, 0, 1.0, Sd);
    memcpy(s, Sd, m * n * sizeof *Sd);
    return CR_OK;
}

/*
 * pinv(A) = Y, A m x n of full rank (Y n x m). The rule's pullback (Golub and Pereyra) is
 *     Ā = -Yᵀ Ȳ Yᵀ + P Ȳᵀ Y Yᵀ + Yᵀ Y Ȳᵀ Q,   P = I - A Y (m x m), Q = I - Y A (n x n).
 * Along Ȧ, with Ẏ the result's tangent (pinv's frule, from the forward sweep), Ȳ fixed, the
 * product rule gives, with Ṗ = -(Ȧ Y + A Ẏ), Q̇ = -(Ẏ A + Y Ȧ), Ė = Ẏ Yᵀ + Y Ẏᵀ
 * (= d(Y Yᵀ)), Ḟ = Ẏᵀ Y + Yᵀ Ẏ (= d(Yᵀ Y)):
 *     S = -Ẏᵀ (Ȳ Yᵀ) - (Yᵀ Ȳ) Ẏᵀ + Ṗ (Ȳᵀ Y Yᵀ) + (P Ȳᵀ) Ė + Ḟ (Ȳᵀ Q) + (Yᵀ Y Ȳᵀ) Q̇,
 * the parenthesized products once per record. At a rank-deficient A (rank(A) = tr(A Y) <
 * min(m, n): pinv truncated singular values) the pseudo-inverse is not continuous (a small
 * change of A restores the rank, and any step above the truncation's tolerance does): no
 * second derivative exists there, and the form refuses it (CR_EDOMAIN).
 */
static cr_status pinv_init(const cr_form_point *p, void **state)
{
    const double *Yb, *Y;
    CR__LA_FORM_STATE(p, state, pinv_state, 0, z);
    const cr__form *F = &z->F;
    if (F->x->ndim != 2)
        return CR_NOTHING;
    size_t m = F->x->shape[0], n = F->x->shape[1], r = m < n ? m : n;
    if ((st = cr__form_y_array(F, &Y)) != CR_OK)
        return st;
    {
        size_t sh[2] = {n, m};
        const cr_array *a;
        if ((st = cr__tan_array(F->arena, F->who, p->ybar, 2, sh, CR_DT_F64, &a)) != CR_OK)
            return st;
        if (a == NULL)
            return CR_NOTHING;
        Yb = a->data;
    }
    const double *A = F->x->data;
    double rank = 0.0; /* tr(A Y): A Y projects onto A's (truncated) range */
    for (size_t a = 0; a < m; a++)
        for (size_t b = 0; b < n; b++)
            rank += A[a * n + b] * Y[b * m + a];
    if (rank < (double)r - 0.5)
        return cr__form_fail(F, CR_EDOMAIN,
                             "%s: no second derivative at a rank-deficient matrix (rank %.0f < "
                             "%zu: the pseudo-inverse is not continuous there)",
                             F->who, rank, r);
    double *w; /* m² and n² are not bounded by the argument's m n elements */
    if ((st = cr__form_work(F, 3, (const cr__form_term[]){{6, m, n}, {4, m, m}, {4, n, n}}, &w)) !=
        CR_OK)
        return st;
    size_t mm_ = m * m, nn = n * n, mn = m * n;
    double *P = w, *Q = P + mm_, *W5 = Q + nn, *W6 = W5 + nn, *W1 = W6 + mm_, *W2 = W1 + mn,
           *W3 = W2 + mn, *W4 = W3 + mn, *Pd = W4 + mn, *Fd = Pd + mm_, *Qd = Fd + mm_,
           *Ed = Qd + nn, *Yz = Ed + nn, *Sd = Yz + mn; /* Yz: a zero Ẏ */
    /* P = I - A Y, Q = I - Y A; W5 = Ȳ Yᵀ, W6 = Yᵀ Ȳ; W1 = Ȳᵀ (Y Yᵀ), W2 = Ȳᵀ Q,
     * W3 = (Yᵀ Y) Ȳᵀ, W4 = P Ȳᵀ */
    cr__form_mm(-1.0, A, m, n, 0, Y, n, m, 0, 0.0, P);
    cr__form_mm(-1.0, Y, n, m, 0, A, m, n, 0, 0.0, Q);
    for (size_t a = 0; a < m; a++)
        P[a * m + a] += 1.0;
    for (size_t a = 0; a < n; a++)
        Q[a * n + a] += 1.0;
    cr__form_mm(1.0, Yb, n, m, 0, Y, n, m, 1, 0.0, W5);
    cr__form_mm(1.0, Y, n, m, 1, Yb, n, m, 0, 0.0, W6);
    cr__form_mm(1.0, Y, n, m, 0, Y, n, m, 1, 0.0, Ed); /* Y Yᵀ, for now */
    cr__form_mm(1.0, Yb, n, m, 1, Ed, n, n, 0, 0.0, W1);
    cr__form_mm(1.0, Yb, n, m, 1, Q, n, n, 0, 0.0, W2);
    cr__form_mm(1.0, Y, n, m, 1, Y, n, m, 0, 0.0, Fd); /* Yᵀ Y, for now */
    cr__form_mm(1.0, Fd, m, m, 0, Yb, n, m, 1, 0.0, W3);
    cr__form_mm(1.0, P, m, m, 0, Yb, n, m, 1, 0.0, W4);
    *z = (pinv_state){z->F, m, n, Y, P, Q, W1, W2, W3, W4, W5, W6, Pd, Fd, Qd, Ed, Yz, Sd};
    z->F.step = pinv_step;
    z->F.ydot = true;
    return CR_OK;
}

/* pinv's form is that of a matrix argument (pinv of a vector has none). */
static const char *pinv_check(const cr_value *args, size_t nargs, const bool *var,
                              uint32_t *linearity)
{
    const char *why = cr__form_check_matrix(args, nargs, var, linearity);
    if (why == NULL && args[0].u.arr->ndim != 2)
        why = "pinv of a vector has no second-order form";
    return why;
}

const cr_rule_form cr__form_pinv = {pinv_check, pinv_init, cr__form_frule_dir};

/* ---- qr ---------------------------------------------------------------------------------------
 */

/* copyltu(M) of a real n x n M in place: its lower triangle mirrored onto the upper one. */
static void copyltu(double *M, size_t n)
{
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++)
            M[a * n + b] = M[b * n + a];
}

typedef struct qr_state {
    cr__form F;
    size_t m, n;
    const double *Q, *R, *Qb, *Rb, *G;
    double *C, *Md, *W;
} qr_state;

/* qr along Ȧ, with Q̇ and Ṙ from qr's frule (the derivation below). */
static cr_status qr_step(const void *state, const cr__form_along *d, double *s)
{
    const qr_state *z = state;
    const cr__form *F = &z->F;
    size_t m = z->m, n = z->n;
    const double *Qd, *Rd, *Q = z->Q, *Qb = z->Qb, *Rb = z->Rb;
    double *Md = z->Md, *W = z->W;
    cr_status st;
    if ((st = cr__form_field_mat(F, d->dy, 0, m, n, &Qd)) != CR_OK ||
        (st = cr__form_field_mat(F, d->dy, 1, n, n, &Rd)) != CR_OK)
        return st;
    /* Ṁ = Ṙ R̄ᵀ - Q̄ᵀ Q̇, then copyltu */
    memset(Md, 0, n * n * sizeof *Md);
    if (Rd != NULL && Rb != NULL)
        cr__form_mm(1.0, Rd, n, n, 0, Rb, n, n, 1, 0.0, Md);
    if (Qd != NULL && Qb != NULL)
        cr__form_mm(-1.0, Qb, m, n, 1, Qd, m, n, 0, 1.0, Md);
    copyltu(Md, n);
    /* W = Q̇ C + Q Ṁ - G Ṙᵀ, then S = W R⁻ᵀ */
    cr__form_mm(1.0, Q, m, n, 0, Md, n, n, 0, 0.0, W);
    if (Qd != NULL)
        cr__form_mm(1.0, Qd, m, n, 0, z->C, n, n, 0, 1.0, W);
    if (Rd != NULL)
        cr__form_mm(-1.0, z->G, m, n, 0, Rd, n, n, 1, 1.0, W);
    memcpy(s, W, m * n * sizeof *W);
    cr__form_right_solve_upper_t(z->R, n, s, m);
    return CR_OK;
}

/*
 * qr(A) = (Q, R), A m x n with m >= n, of full rank. With the cotangent (Q̄, R̄), the pullback
 * is
 *     M = R R̄ᵀ - Q̄ᵀ Q,   B = Q̄ + Q copyltu(M),   Ā = B R⁻ᵀ = G.
 * Along Ȧ, with Q̇, Ṙ from qr's frule (Q̄, R̄ fixed: they are the cotangent), the product rule
 * and d(R⁻ᵀ) = -R⁻ᵀ Ṙᵀ R⁻ᵀ give
 *     Ṁ = Ṙ R̄ᵀ - Q̄ᵀ Q̇,   Ḃ = Q̇ copyltu(M) + Q copyltu(Ṁ)   (copyltu is linear),
 *     S = Ḃ R⁻ᵀ - B R⁻ᵀ Ṙᵀ R⁻ᵀ = (Ḃ - G Ṙᵀ) R⁻ᵀ,
 * with G the pullback applied to (Q̄, R̄), unprojected (pullback_dense). The rule reads R̄ on
 * its upper triangle; R and Ṙ being upper triangular, the lower triangles of R R̄ᵀ and Ṙ R̄ᵀ,
 * all copyltu reads, involve no other element of R̄, so R̄ is used as it comes. A
 * rank-deficient A is refused by the rule (its pullback and frule need R⁻¹). A structured A:
 * G unprojected (pullback_dense: a rule call at A's dense matrix).
 */
static cr_status qr_init(const cr_form_point *p, void **state)
{
    CR__LA_FORM_STATE(p, state, qr_state, 0, z);
    const cr__form *F = &z->F;
    if (F->x->ndim != 2 || F->x->shape[0] < F->x->shape[1])
        return CR_NOTHING; /* the rule refused it when recorded */
    size_t m = F->x->shape[0], n = F->x->shape[1];
    const cr_array *Qa, *Ra;
    const double *Qb, *Rb;
    cr_tangent dx[2];
    cr_pullback pb;
    if ((st = cr__form_factor_of(F, p->y, 0, 2, &Qa)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 1, 2, &Ra)) != CR_OK ||
        (st = cr__form_field_mat(F, p->ybar, 0, m, n, &Qb)) != CR_OK ||
        (st = cr__form_field_mat(F, p->ybar, 1, n, n, &Rb)) != CR_OK ||
        (st = cr__form_pullback_dense(F, 0, &pb)) != CR_OK ||
        (st = cr_pullback_call(F->arena, &pb, &p->ybar, dx, 2)) != CR_OK ||
        (st = cr__form_like_x0(F, dx[1], &z->G)) != CR_OK)
        return st;
    const double *Q = Qa->data, *R = Ra->data;
    double *w;
    if ((st = cr__form_work(F, 2, (const cr__form_term[]){{2, n, n}, {1, m, n}}, &w)) != CR_OK)
        return st;
    double *C = w, *Md = C + n * n, *W = Md + n * n;
    /* C = copyltu(M), M = R R̄ᵀ - Q̄ᵀ Q, once per record */
    if (Rb != NULL)
        cr__form_mm(1.0, R, n, n, 0, Rb, n, n, 1, 0.0, C);
    if (Qb != NULL)
        cr__form_mm(-1.0, Qb, m, n, 1, Q, m, n, 0, 1.0, C);
    copyltu(C, n);
    *z = (qr_state){z->F, m, n, Q, R, Qb, Rb, z->G, C, Md, W};
    z->F.fact = &cr_fn_qr;
    z->F.step = qr_step;
    return CR_OK;
}

/* qr's form is that of a tall (or square) A: a wide one has none. */
static const char *qr_check(const cr_value *args, size_t nargs, const bool *var,
                            uint32_t *linearity)
{
    const char *why = cr__form_check_matrix(args, nargs, var, linearity);
    if (why == NULL && args[0].u.arr->ndim == 2 &&
        args[0].u.arr->shape[0] < args[0].u.arr->shape[1])
        why = "qr of a wide matrix has no second-order form";
    return why;
}

const cr_rule_form cr__form_qr = {qr_check, qr_init, cr__form_frule_dir};
