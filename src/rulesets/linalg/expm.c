/*
 * expm, the exponential of a general matrix (scaling and squaring with Padé approximants,
 * Higham 2005), and its Fréchet derivative through the exponential of a 2n x 2n block
 * matrix, which gives the frule, the pullback and the second-order form. Compiled with LAPACKE
 * (CR_HAVE_LAPACKE); without it the function value exists and its primal gives CR_EUNIMPL.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include <chainrules/rules_linalg.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>

/* ---- exp of a general matrix -------------------------------------------------------------- */

/* Padé approximants of degree 3, 5, 7, 9, 13 and the 1-norm bounds up to which each is
 * accurate to double precision (Higham, "The scaling and squaring method for the matrix
 * exponential revisited", 2005). */
static const double k_pade3[4] = {120, 60, 12, 1};
static const double k_pade5[6] = {30240, 15120, 3360, 420, 30, 1};
static const double k_pade7[8] = {17297280, 8648640, 1995840, 277200, 25200, 1512, 56, 1};
static const double k_pade9[10] = {17643225600.0, 8821612800.0, 2075673600, 302702400, 30270240,
                                   2162160,       110880,       3960,       90,        1};
static const double k_pade13[14] = {64764752532480000.0,
                                    32382376266240000.0,
                                    7771770303897600.0,
                                    1187353796428800.0,
                                    129060195264000.0,
                                    10559470521600.0,
                                    670442572800.0,
                                    33522128640.0,
                                    1323241920,
                                    40840800,
                                    960960,
                                    16380,
                                    182,
                                    1};
static const double k_theta[5] = {1.495585217958292e-2, 2.539398330063230e-1, 9.504178996162932e-1,
                                  2.097847961257068e0, 5.371920351148152e0};

/* M += a X */
static void mat_axpy(cr__cmat *M, cr_complex a, const cr__cmat *X)
{
    for (size_t j = 0; j < M->c; j++)
        for (size_t i = 0; i < M->r; i++)
            cr__cmat_set(M, i, j, cr__cmat_get(M, i, j) + a * cr__cmat_get(X, i, j));
}

static double mat_norm1(const cr__cmat *M)
{
    double best = 0;
    for (size_t j = 0; j < M->c; j++) {
        double s = 0;
        for (size_t i = 0; i < M->r; i++)
            s += cabs(cr__cmat_get(M, i, j));
        best = fmax(best, s);
    }
    return best;
}

/* Two new zero n x n work matrices. */
static cr_status zeros2(cr_arena *arena, bool cplx, size_t n, cr__cmat *X, cr__cmat *Y)
{
    cr_status st = cr__cmat_new(arena, cplx, n, n, true, X);
    return st != CR_OK ? st : cr__cmat_new(arena, cplx, n, n, true, Y);
}

/* W += b[hi] P[0] + b[hi - 2] P[1] + ... over np terms: the sums of the degree-13 Padé
 * approximant, with P = (A⁶, A⁴, A², I). */
static void pade13_terms(cr__cmat *W, const double *b, int hi, const cr__cmat *const *P, int np)
{
    for (int k = 0; k < np; k++)
        mat_axpy(W, b[hi - 2 * k], P[k]);
}

/* exp(A) by scaling and squaring with a Padé approximant (A is not modified). */
static cr_status expm_of(cr_arena *arena, const cr__cmat *A0, cr__cmat *out)
{
    size_t n = A0->r;
    bool cplx = A0->cplx;
    cr__cmat A, Id, A2, U, V, T;
    cr_status st = cr__cmat_copy(arena, A0, &A);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, n, n, true, &Id);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        cr__cmat_set(&Id, i, i, 1.0);
    double nrm = mat_norm1(&A);
    if (!isfinite(nrm))
        return CR__FAIL(arena, CR_EDOMAIN, "expm: the matrix is not finite");
    int s = 0;
    const double *b = NULL;
    int m = 13;
    static const int degs[4] = {3, 5, 7, 9};
    static const double *const pades[4] = {k_pade3, k_pade5, k_pade7, k_pade9};
    for (int k = 0; k < 4; k++)
        if (nrm <= k_theta[k]) {
            m = degs[k];
            b = pades[k];
            break;
        }
    if (b == NULL) {
        b = k_pade13;
        if (nrm > k_theta[4])
            s = (int)ceil(log2(nrm / k_theta[4]));
        if (s > 0) {
            double sc = ldexp(1.0, -s);
            for (size_t j = 0; j < n; j++)
                for (size_t i = 0; i < n; i++)
                    cr__cmat_set(&A, i, j, cr__cmat_get(&A, i, j) * sc);
        }
    }
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &A, &A, &A2);
    if (st == CR_OK)
        st = zeros2(arena, cplx, n, &U, &V);
    if (st != CR_OK)
        return st;
    if (m < 13) {
        /* U = A Σ b_{2k+1} A^{2k}, V = Σ b_{2k} A^{2k}. */
        cr__cmat P, Su;
        st = cr__cmat_copy(arena, &Id, &P);
        if (st == CR_OK)
            st = cr__cmat_new(arena, cplx, n, n, true, &Su);
        if (st != CR_OK)
            return st;
        for (int k = 0; 2 * k <= m; k++) {
            mat_axpy(&V, b[2 * k], &P);
            if (2 * k + 1 <= m)
                mat_axpy(&Su, b[2 * k + 1], &P);
            if (2 * k + 2 <= m) {
                cr__cmat Pn;
                st = cr__cmat_mul(arena, 'N', 'N', 1.0, &P, &A2, &Pn);
                if (st != CR_OK)
                    return st;
                P = Pn;
            }
        }
        cr__cmat_gemm('N', 'N', 1.0, &A, &Su, 0.0, &U);
    } else {
        cr__cmat A4, A6, W1, W2;
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &A2, &A2, &A4);
        if (st == CR_OK)
            st = cr__cmat_mul(arena, 'N', 'N', 1.0, &A4, &A2, &A6);
        if (st == CR_OK)
            st = zeros2(arena, cplx, n, &W1, &W2);
        if (st != CR_OK)
            return st;
        /* U = A [A6 (b13 A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I] */
        const cr__cmat *P[4] = {&A6, &A4, &A2, &Id};
        pade13_terms(&W1, b, 13, P, 3);
        pade13_terms(&W2, b, 7, P, 4);
        cr__cmat_gemm('N', 'N', 1.0, &A6, &W1, 1.0, &W2);
        cr__cmat_gemm('N', 'N', 1.0, &A, &W2, 0.0, &U);
        /* V = A6 (b12 A6 + b10 A4 + b8 A2) + b6 A6 + b4 A4 + b2 A2 + b0 I */
        cr__cmat Z1;
        st = cr__cmat_new(arena, cplx, n, n, true, &Z1);
        if (st != CR_OK)
            return st;
        pade13_terms(&Z1, b, 12, P, 3);
        pade13_terms(&V, b, 6, P, 4);
        cr__cmat_gemm('N', 'N', 1.0, &A6, &Z1, 1.0, &V);
    }
    /* (V - U) R = (V + U) */
    cr__cmat Q, R;
    st = cr__cmat_copy(arena, &V, &Q);
    if (st == CR_OK)
        st = cr__cmat_copy(arena, &V, &R);
    if (st != CR_OK)
        return st;
    mat_axpy(&Q, -1.0, &U);
    mat_axpy(&R, 1.0, &U);
    lapack_int *ipiv = cr__arena_array(arena, "expm", n, sizeof *ipiv, _Alignof(lapack_int));
    if (ipiv == NULL)
        return CR__ALLOC_STATUS(arena);
    if (n > 0) {
        lapack_int ln = (lapack_int)n;
        lapack_int info = cplx ? LAPACKE_zgetrf_work(LAPACK_COL_MAJOR, ln, ln, Q.p, ln, ipiv)
                               : LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, ln, ln, Q.p, ln, ipiv);
        if (info == 0)
            info = cplx
                       ? LAPACKE_zgetrs_work(LAPACK_COL_MAJOR, 'N', ln, ln, Q.p, ln, ipiv, R.p, ln)
                       : LAPACKE_dgetrs_work(LAPACK_COL_MAJOR, 'N', ln, ln, Q.p, ln, ipiv, R.p, ln);
        if (info != 0)
            return cr__lapack_fail(arena, "expm", info);
    }
    for (int k = 0; k < s; k++) {
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &R, &R, &T);
        if (st != CR_OK)
            return st;
        R = T;
    }
    *out = R;
    return CR_OK;
}

/* The Fréchet derivative L(A, E) of exp at A in the direction E, and exp(A), from
 * exp([A E; 0 A]) = [exp(A) L(A, E); 0 exp(A)] (Najfeld and Havel; Higham, "Functions of
 * Matrices", §3.2). */
static cr_status expm_frechet(cr_arena *arena, const cr__cmat *A, const cr__cmat *E, cr__cmat *expA,
                              cr__cmat *L)
{
    size_t n = A->r;
    cr__cmat B, X;
    cr_status st = cr__cmat_new(arena, A->cplx || E->cplx, 2 * n, 2 * n, true, &B);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            cr__cmat_set(&B, i, j, cr__cmat_get(A, i, j));
            cr__cmat_set(&B, n + i, n + j, cr__cmat_get(A, i, j));
            cr__cmat_set(&B, i, n + j, cr__cmat_get(E, i, j));
        }
    st = expm_of(arena, &B, &X);
    if (st == CR_OK && expA != NULL)
        st = cr__cmat_new(arena, B.cplx, n, n, false, expA);
    if (st == CR_OK)
        st = cr__cmat_new(arena, B.cplx, n, n, false, L);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            if (expA != NULL)
                cr__cmat_set(expA, i, j, cr__cmat_get(&X, i, j));
            cr__cmat_set(L, i, j, cr__cmat_get(&X, i, n + j));
        }
    return CR_OK;
}

typedef struct expm_env {
    const cr_array *A;
    cr_project *pA;
    cr__cmat Am;
} expm_env;

static cr_status expm_forward(cr_arena *arena, const cr_value *args, size_t nargs,
                              const cr_array **A, cr__cmat *Am, cr__cmat *Y)
{
    bool cplx;
    cr_status st = cr__square_arg1(arena, "expm", args, nargs, A, &cplx);
    if (st == CR_OK)
        st = cr__cmat_from(arena, *A, cplx, Am);
    if (st == CR_OK)
        st = expm_of(arena, Am, Y);
    return st;
}

/* Ā = L(Aᴴ, Ȳ): the adjoint of the Fréchet derivative is the derivative at Aᴴ. */
static cr_status expm_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    (void)nx;
    expm_env *e = env;
    cr__cmat G, Ah, L;
    cr_status st =
        cr__pull_matrix(arena, "expm_pullback", dy, e->Am.r, e->Am.r, e->Am.cplx, dx, &G);
    if (st != CR_OK || G.p == NULL)
        return st;
    st = cr__cmat_adj(arena, &e->Am, &Ah);
    if (st == CR_OK)
        st = expm_frechet(arena, &Ah, &G, NULL, &L);
    return st != CR_OK ? st : cr__cmat_give(arena, e->pA, &L, false, &dx[1]);
}

/* expm(A) = exp(A) of a general square matrix. */
static cr_status expm_rrule1(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                             cr_value *y, cr_pullback *pb, const void *udata)
{
    (void)who;
    CR__LA_ENV(arena, expm_env, e);
    cr__cmat Y;
    cr_status st = expm_forward(arena, args, nargs, &e->A, &e->Am, &Y);
    if (st != CR_OK)
        return st;
    return cr__rrule_out1(arena, &Y, (cr_dtype)e->A->dtype, args, udata, &e->pA, y, pb,
                          (cr_pullback){expm_pullback, e, "expm_pullback", nargs + 1});
}

/* frule: Ẏ = L(A, Ȧ). */
static cr_status expm_frule1(cr_arena *arena, const char *who, const cr_tangent *dargs,
                             const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    (void)who;
    const cr_array *A;
    cr__cmat Am, Y, dA, L;
    cr_status st = expm_forward(arena, args, nargs, &A, &Am, &Y);
    if (st == CR_OK)
        st = cr__frule_out1(arena, "expm", &Y, (cr_dtype)A->dtype, dargs, args, y, &dA, dy);
    if (st != CR_OK || dA.p == NULL)
        return st;
    st = expm_frechet(arena, &Am, &dA, NULL, &L);
    return st != CR_OK ? st : cr__cmat_project(arena, y, &L, dy);
}
CR__LA_RULES(expm, 1)

/* ---- Test registrations ---------------------------------------------------------------- */

/* expm(A): a general matrix of 1-norm from 0.01 to about 8 (every Padé degree, and
 * scaling and squaring). */
static cr_status sample_expm(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                             void *env)
{
    (void)nargs;
    (void)env;
    size_t n = 2 + cr__rng_below(rng, 3), shape[2] = {n, n};
    static const double scales[5] = {0.003, 0.08, 0.3, 0.7, 2.5};
    double sc = scales[cr__rng_below(rng, 5)];
    cr_array *A;
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 2, shape, -sc, sc, &A);
    if (st == CR_OK)
        args[0] = cr_value_array(A);
    return st;
}

static const cr_rule_test k_t_expm = {.sample = sample_expm};

cr_status cr__linalg_register_expm(cr_registry *reg)
{
    static const cr_argspec a1[1] = {{CR__M_FARRAY, NULL}};
    return cr__add_rule_so(reg, &expm_function, a1, 1, false, expm_frule, expm_rrule, &k_t_expm,
                           CR_NONLINEAR, &cr__form_expm);
}

#else /* !CR_HAVE_LAPACKE */

/* Without LAPACKE: the function value exists; calling it reports CR_EUNIMPL. */
CR__NO_LAPACK_FN(expm, "expm")

CR__NO_LAPACK_REGISTER(expm)

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

/* ---- expm -------------------------------------------------------------------------------------
 */

typedef struct expm_state {
    cr__form F;
    const double *yb;
} expm_state;

/*
 * expm(A) = exp(A) of a real square A: the pullback is Ā = L(Aᵀ, Ȳ), the Fréchet derivative
 * of exp at Aᵀ in the direction Ȳ. Along Ȧ (Ȳ fixed: it is the cotangent) its derivative is
 * the second Fréchet derivative at Aᵀ in the directions Ȧᵀ and Ȳ:
 *     S = d/dε L(Aᵀ + ε Ȧᵀ, Ȳ) = L²(Aᵀ; Ȧᵀ, Ȳ).
 * It is one block of one exponential. For two scalars ε₁, ε₂ with ε₁² = ε₂² = 0 that commute
 * with everything, the power series of exp gives exactly
 *     exp(X + ε₁ E₁ + ε₂ E₂) = exp(X) + ε₁ L(X, E₁) + ε₂ L(X, E₂) + ε₁ ε₂ L²(X; E₁, E₂)
 * (the coefficient of ε₁ ε₂ is Σ_k 1/k! times the sum of the products of k factors X with
 * one E₁ and one E₂ among them, which is ∂²/∂s∂t exp(X + s E₁ + t E₂) at 0). The 4 x 4 block
 * matrices ε₁ = I₂ ⊗ N ⊗ I and ε₂ = N ⊗ I₂ ⊗ I, N = [0 1; 0 0], are such scalars: block j of
 * the four goes to block j + 1 (j = 0, 2) under ε₁, to j + 2 (j = 0, 1) under ε₂, and ε₁ ε₂ =
 * N ⊗ N ⊗ I takes block 0 to block 3 only. So with X = Aᵀ, E₁ = Ȧᵀ, E₂ = Ȳ:
 *         [Aᵀ Ȧᵀ Ȳ  0 ]
 *     M = [0  Aᵀ 0  Ȳ ],   exp(M) = [exp(Aᵀ) L(Aᵀ, Ȧᵀ) L(Aᵀ, Ȳ) S; ...],
 *         [0  0  Aᵀ Ȧᵀ]
 *         [0  0  0  Aᵀ]
 * S the top-right n x n block (Najfeld and Havel 1995; Higham and Relton, "Higher order
 * Fréchet derivatives of matrix functions", 2014). exp(M) is expm's own primal (scaling and
 * squaring): one 4n x 4n exponential per direction, nothing else written.
 */
static cr_status expm_init(const cr_form_point *p, void **state)
{
    CR__LA_FORM_STATE(p, state, expm_state, 0, z);
    const cr_array *x = z->F.x;
    if (x->ndim != 2 || x->shape[0] != x->shape[1])
        return CR_NOTHING; /* a matrix that is not square: the rule refused it when recorded */
    st = cr__form_like_x(&z->F, p->ybar, &z->yb);
    return st == CR_OK && z->yb == NULL ? CR_NOTHING : st;
}

static cr_status expm_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                          cr_tangent ydot, cr_tangent *S)
{
    const expm_state *z = state;
    const cr__form *F = &z->F;
    (void)p;
    (void)ydot;
    size_t n = F->x->shape[0], w = 4 * n, shape[2] = {w, w};
    const double *a = F->x->data, *yb = z->yb, *xd;
    cr_status st = cr__form_like_x(F, xdot[0], &xd);
    if (st != CR_OK || xd == NULL)
        return st;
    cr_array *M, *Sa;
    const cr_array *E;
    if ((st = cr__new(F->arena, CR_DT_F64, 2, shape, true, &M)) != CR_OK)
        return st;
    double *m = M->data;
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < n; c++) {
            for (size_t b = 0; b < 4; b++) /* Aᵀ on the diagonal */
                m[(b * n + r) * w + b * n + c] = a[c * n + r];
            for (size_t b = 0; b < 4; b += 2) /* Ȧᵀ at (0, 1) and (2, 3) */
                m[(b * n + r) * w + (b + 1) * n + c] = xd[c * n + r];
            for (size_t b = 0; b < 2; b++) /* Ȳ at (0, 2) and (1, 3) */
                m[(b * n + r) * w + (b + 2) * n + c] = yb[r * n + c];
        }
    cr_value mv = cr_value_array(M), ev;
    if ((st = cr_function_call(F->arena, &cr_fn_expm, &mv, 1, &ev)) != CR_OK ||
        (st = cr__dense(F->arena, ev.u.arr, CR_DT_F64, &E)) != CR_OK ||
        (st = cr__form_new_s(F, &Sa)) != CR_OK)
        return st;
    const double *e = E->data;
    double *s = Sa->data;
    for (size_t r = 0; r < n; r++)
        memcpy(s + r * n, e + r * w + 3 * n, n * sizeof *s);
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_expm = {cr__form_check_matrix, expm_init, expm_dir};
