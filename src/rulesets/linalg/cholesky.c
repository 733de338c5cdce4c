/*
 * cholesky and the functions of a Cholesky factor: cholesky(A) = U with A = Uᴴ U (A's upper
 * triangle read; √x of a real number x), cholesky_solve(U, B) = (Uᴴ U)⁻¹ B, cholesky_rdiv(B,
 * U) = B (Uᴴ U)⁻¹, cholesky_det(U) = |det U|² and cholesky_logdet(U) = 2 log |det U|. Compiled with
 * LAPACKE (CR_HAVE_LAPACKE); without it the function values exist, their primal gives CR_EUNIMPL
 * and no rule is registered.
 */
#include <float.h>
#include <math.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>

/* ---- cholesky -------------------------------------------------------------------------- */

static cr_status cholesky_forward(cr_arena *arena, const cr_value *args, size_t nargs,
                                  const cr_array **A, cr__cmat *U)
{
    bool cplx;
    cr_status st = cr__square_arg1(arena, "cholesky", args, nargs, A, &cplx);
    if (st == CR_OK)
        st = cr__herm_upper(arena, *A, cplx, U);
    if (st != CR_OK)
        return st;
    size_t n = U->r;
    if (n == 0)
        return CR_OK;
    lapack_int info =
        cplx ? LAPACKE_zpotrf_work(LAPACK_COL_MAJOR, 'U', (lapack_int)n, U->p, (lapack_int)n)
             : LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', (lapack_int)n, U->p, (lapack_int)n);
    if (info > 0)
        return CR__FAIL(arena, CR_EDOMAIN,
                        "cholesky: the matrix is not positive definite "
                        "(leading minor %d)",
                        (int)info);
    if (info < 0)
        return cr__lapack_fail(arena, "cholesky", info);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j + 1; i < n; i++)
            cr__cmat_set(U, i, j, 0.0);
    return CR_OK;
}

static cr_status cholesky_output(cr_arena *arena, const cr_array *A, const cr__cmat *U, cr_value *y)
{
    cr_array *o;
    cr_status st = cr__cmat_out(arena, U, false, (cr_dtype)A->dtype, &o);
    if (st != CR_OK)
        return st;
    o->structure = CR_MAT_UPPER;
    *y = cr_value_array(o);
    return CR_OK;
}

/* B := U^-1 B (trans 'N') or U^-ᴴ B ('C'). */
static cr_status tri_solve(cr_arena *arena, const cr__cmat *U, char t, cr__cmat *B)
{
    size_t n = U->r;
    if (n == 0 || B->c == 0)
        return CR_OK;
    char tt = t == 'N' ? 'N' : (U->cplx ? 'C' : 'T');
    lapack_int info =
        U->cplx ? LAPACKE_ztrtrs_work(LAPACK_COL_MAJOR, 'U', tt, 'N', (lapack_int)n,
                                      (lapack_int)B->c, U->p, (lapack_int)n, B->p, (lapack_int)n)
                : LAPACKE_dtrtrs_work(LAPACK_COL_MAJOR, 'U', tt, 'N', (lapack_int)n,
                                      (lapack_int)B->c, U->p, (lapack_int)n, B->p, (lapack_int)n);
    return info != 0 ? cr__lapack_fail(arena, "cholesky", info) : CR_OK;
}

typedef struct chol_env {
    const cr_array *A;
    cr_project *pA;
    cr__cmat U;
} chol_env;

/* With A = Uᴴ U (Seeger et al., ChainRules): Φ = the Hermitian matrix of the upper
 * triangle of triu(Ū) Uᴴ (diagonal real), M = U⁻¹ Φ U⁻ᴴ; the gradient with respect to the
 * Hermitian matrix is S = M / 2. */
static cr_status cholesky_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                   void *env)
{
    (void)nx;
    chol_env *e = env;
    size_t n = e->U.r;
    cr__cmat Ub, P, X;
    cr_status st = cr__pull_matrix(arena, "cholesky_pullback", dy, n, n, e->U.cplx, dx, &Ub);
    if (st != CR_OK || Ub.p == NULL)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j + 1; i < n; i++)
            cr__cmat_set(&Ub, i, j, 0.0);
    st = cr__cmat_mul(arena, 'N', 'C', 1.0, &Ub, &e->U, &P);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++) {
        cr__cmat_set(&P, j, j, creal(cr__cmat_get(&P, j, j)));
        for (size_t i = j + 1; i < n; i++)
            cr__cmat_set(&P, i, j, conj(cr__cmat_get(&P, j, i)));
    }
    st = tri_solve(arena, &e->U, 'N', &P); /* U⁻¹ Φ */
    if (st == CR_OK)
        st = cr__cmat_adj(arena, &P, &X); /* Φ U⁻ᴴ */
    if (st == CR_OK)
        st = tri_solve(arena, &e->U, 'N', &X); /* U⁻¹ Φ U⁻ᴴ */
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&X, i, j, 0.5 * cr__cmat_get(&X, i, j));
    return cr__herm_give(arena, e->A, e->pA, &X, &dx[1]);
}

/* cholesky of a real number x > 0 (a 1 x 1 matrix): u = √x, of x's precision; Julia's
 * cholesky(x::Real) and ChainRules' rule x̄ = ū / (2u). */
static cr_status scalar_forward(cr_arena *arena, const cr_value *args, size_t nargs, double *u,
                                cr_dtype *dt)
{
    cr_status st = cr__nargs(arena, "cholesky", nargs, 1, 1);
    if (st != CR_OK)
        return st;
    double x = creal(cr__scalar_of(&args[0]));
    if (x <= 0)
        return CR__FAIL(arena, CR_EDOMAIN,
                        "cholesky: the number %g is not positive (not positive definite)", x);
    *u = sqrt(x);
    *dt = args[0].kind == CR_KIND_F32 ? CR_DT_F32 : CR_DT_F64;
    return CR_OK;
}

static cr_status scalar_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)nx;
    const cr_value *y = env;
    dx[0] = cr_tangent_none();
    cr_complex g;
    bool nz;
    cr_status st = cr__tan_scalar(arena, "cholesky_pullback", *dy, &g, &nz);
    dx[1] = st == CR_OK && nz
                ? cr__scalar_tangent(cr__value_dtype(y), creal(g) / (2 * creal(cr__scalar_of(y))))
                : cr_tangent_zero();
    return st;
}

static cr_status scalar_rrule(cr_arena *arena, const cr_value *args, size_t nargs, cr_value *y,
                              cr_pullback *pb, const void *udata)
{
    double u;
    cr_dtype dt = CR_DT_F64;
    cr_status st = scalar_forward(arena, args, nargs, &u, &dt);
    if (st == CR_OK)
        *y = cr__scalar_value(dt, u);
    cr_value *e = st == CR_OK && udata != CR__PRIMAL_ONLY
                      ? cr_arena_alloc(arena, sizeof *e, _Alignof(cr_value))
                      : NULL;
    if (st != CR_OK || udata == CR__PRIMAL_ONLY || e == NULL)
        return st != CR_OK || udata == CR__PRIMAL_ONLY ? st : CR__ALLOC_STATUS(arena);
    *e = *y;
    *pb = (cr_pullback){scalar_pullback, e, "cholesky_pullback", nargs + 1};
    return CR_OK;
}

static cr_status cholesky_rrule1(cr_arena *arena, const char *who, const cr_value *args,
                                 size_t nargs, cr_value *y, cr_pullback *pb, const void *udata)
{
    (void)who;
    if (nargs == 1 && args[0].kind != CR_KIND_ARRAY)
        return scalar_rrule(arena, args, nargs, y, pb, udata);
    CR__LA_ENV(arena, chol_env, e);
    cr_status st = cholesky_forward(arena, args, nargs, &e->A, &e->U);
    if (st == CR_OK)
        st = cholesky_output(arena, e->A, &e->U, y);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail1(arena, &args[0], udata, &e->pA, pb,
                           (cr_pullback){cholesky_pullback, e, "cholesky_pullback", nargs + 1});
}

/* frule: with Ḣ the Hermitian matrix read from Ȧ's upper triangle, S = U⁻ᴴ Ḣ U⁻¹,
 * U̇ = Φ(S) U where Φ keeps the upper triangle and halves the diagonal. */
static cr_status cholesky_frule1(cr_arena *arena, const char *who, const cr_tangent *dargs,
                                 const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    (void)who;
    if (nargs == 1 && args[0].kind != CR_KIND_ARRAY) {
        double u;
        cr_dtype dt = CR_DT_F64;
        cr_complex dx = 0;
        bool nz = false;
        cr_status st = scalar_forward(arena, args, nargs, &u, &dt);
        if (st == CR_OK)
            st = cr__tan_scalar(arena, "cholesky", dargs[1], &dx, &nz);
        if (st != CR_OK)
            return st;
        *y = cr__scalar_value(dt, u);
        *dy = nz ? cr__scalar_tangent(dt, creal(dx) / (2 * u)) : cr_tangent_zero();
        return CR_OK;
    }
    const cr_array *A;
    cr__cmat U, dH, W, S, R;
    cr_status st = cholesky_forward(arena, args, nargs, &A, &U);
    if (st == CR_OK)
        st = cholesky_output(arena, A, &U, y);
    if (st != CR_OK)
        return st;
    size_t n = U.r;
    const cr_array *t;
    st = cr__dx_array(arena, "cholesky", dargs, args, 0, U.cplx ? CR_DT_C128 : CR_DT_F64, &t);
    if (st != CR_OK || t == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    st = cr__herm_upper(arena, t, U.cplx, &dH);
    if (st == CR_OK)
        st = tri_solve(arena, &U, 'C', &dH); /* U⁻ᴴ Ḣ */
    if (st == CR_OK)
        st = cr__cmat_adj(arena, &dH, &W); /* Ḣ U⁻¹ */
    if (st == CR_OK)
        st = tri_solve(arena, &U, 'C', &W); /* U⁻ᴴ Ḣ U⁻¹ */
    if (st != CR_OK)
        return st;
    S = W;
    for (size_t j = 0; j < n; j++) {
        cr__cmat_set(&S, j, j, 0.5 * creal(cr__cmat_get(&S, j, j)));
        for (size_t i = j + 1; i < n; i++)
            cr__cmat_set(&S, i, j, 0.0);
    }
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &S, &U, &R);
    return st != CR_OK ? st : cr__cmat_project(arena, y, &R, dy);
}
CR__LA_RULES(cholesky, 1)

/* ---- cholesky_solve, cholesky_det and cholesky_logdet ------------------------------------ */

/* A Cholesky factor argument U (A = Uᴴ U): its upper triangle is read, the rest is zero
 * whatever memory holds (cholesky returns it tagged Upper). With `nonsingular`, a zero on
 * the diagonal is a domain error. */
static cr_status factor_arg(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                            size_t i, bool cplx, bool nonsingular, const cr_array **U, cr__cmat *Um)
{
    cr_status st = cr__square_arg(arena, who, args, nargs, i, U, NULL);
    if (st == CR_OK)
        st = cr__cmat_from(arena, *U, cplx, Um);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(Um, 'U', false);
    for (size_t k = 0; nonsingular && k < Um->r; k++)
        if (cr__cmat_get(Um, k, k) == 0)
            return CR__FAIL(arena, CR_EDOMAIN, "%s: the factor is singular (U[%zu][%zu] = 0)", who,
                            k, k);
    return CR_OK;
}

/* X := (Uᴴ U)⁻¹ X. */
static cr_status chol_apply_inv(cr_arena *arena, const char *who, const cr__cmat *U, cr__cmat *X)
{
    cr_status st = cr__tri_left(arena, who, U, 'U', 'C', 'N', X);
    return st != CR_OK ? st : cr__tri_left(arena, who, U, 'U', 'N', 'N', X);
}

/* cholesky_solve(U, B) = H⁻¹ B and cholesky_rdiv(B, U) = B H⁻¹ (B / cholesky(A) in
 * Julia), H = Uᴴ U. The right division is the solve of the adjoint, Y = (H⁻¹ Bᴴ)ᴴ: its rules
 * work on Z = H⁻¹ Bᴴ with Z̄ = Ȳᴴ and take B̄ back through the same flip. */
typedef struct csolve_env {
    const cr_array *U, *B;
    cr_project *pU, *pB;
    cr__cmat Um, Y; /* Y holds H⁻¹ B, or Z = H⁻¹ Bᴴ for the right division */
    bool cplx, right;
} csolve_env;

static const char *csolve_name(bool right)
{
    return right ? "cholesky_rdiv" : "cholesky_solve";
}

/* For the right division, m := mᴴ (a vector B is a row: its flip conjugates the column). */
static cr_status csolve_flip(cr_arena *arena, const csolve_env *e, cr__cmat *m)
{
    if (!e->right || m->p == NULL)
        return CR_OK;
    if (e->B->ndim == 1) {
        cr__cmat_conj(m);
        return CR_OK;
    }
    cr__cmat t;
    cr_status st = cr__cmat_adj(arena, m, &t);
    if (st == CR_OK)
        *m = t;
    return st;
}

static cr_status csolve_forward(cr_arena *arena, bool right, const cr_value *args, size_t nargs,
                                csolve_env *e, cr_dtype *dt)
{
    const char *who = csolve_name(right);
    size_t iu = right ? 1 : 0, ib = right ? 0 : 1;
    e->right = right;
    cr_status st = cr__nargs(arena, who, nargs, 2, 2);
    if (st == CR_OK)
        st = cr__square_arg(arena, who, args, nargs, iu, &e->U, NULL);
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, ib, &e->B);
    if (st != CR_OK)
        return st;
    const cr_array *B = e->B;
    size_t len = right && B->ndim == 2 ? B->shape[1] : B->shape[0];
    if ((B->ndim != 1 && B->ndim != 2) || len != e->U->shape[0] ||
        !cr_dtype_is_float((cr_dtype)B->dtype))
        return CR__FAIL(arena, CR_ESHAPE,
                        "%s: B must be a float vector or matrix with as many %s as U", who,
                        right ? "columns" : "rows");
    *dt = cr__promote((cr_dtype)e->U->dtype, (cr_dtype)B->dtype);
    e->cplx = *dt == CR_DT_C128;
    st = factor_arg(arena, who, args, nargs, iu, e->cplx, true, &e->U, &e->Um);
    if (st == CR_OK)
        st = cr__cmat_from(arena, B, e->cplx, &e->Y);
    if (st == CR_OK)
        st = csolve_flip(arena, e, &e->Y);
    if (st == CR_OK)
        st = chol_apply_inv(arena, who, &e->Um, &e->Y);
    return st;
}

/* The output array: Y, or Zᴴ for the right division. */
static cr_status csolve_out(cr_arena *arena, const csolve_env *e, cr_dtype dt, cr_array **o)
{
    cr__cmat Y = e->Y;
    cr_status st = CR_OK;
    if (e->right)
        st = cr__cmat_copy(arena, &e->Y, &Y);
    if (st == CR_OK)
        st = csolve_flip(arena, e, &Y);
    return st != CR_OK ? st : cr__cmat_out(arena, &Y, e->B->ndim == 1, dt, o);
}

/* Ū = triu(U (Ā + Āᴴ)) with Ā = -B̄ Yᴴ, the cotangent of A = Uᴴ U. */
static cr_status csolve_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    const cr__la_thunk *t = env;
    const csolve_env *e = t->e;
    size_t n = e->Um.r;
    cr__cmat S, R;
    cr_status st = cr__cmat_mul(arena, 'N', 'C', -1.0, &t->g, &e->Y, &S);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i <= j; i++) {
            cr_complex h = cr__cmat_get(&S, i, j) + conj(cr__cmat_get(&S, j, i));
            cr__cmat_set(&S, i, j, h);
            cr__cmat_set(&S, j, i, conj(h));
        }
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e->Um, &S, &R);
    if (st != CR_OK)
        return st;
    cr__cmat_tri(&R, 'U', false);
    return cr__cmat_give(arena, e->pU, &R, false, out);
}

/* B̄ = (Uᴴ U)⁻¹ Ȳ; Ū (a thunk). */
static cr_status csolve_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    csolve_env *e = cr__pb_start(dx, nx, true, env);
    const cr_array *B = e->B;
    size_t iu = e->right ? 2 : 1, ib = e->right ? 1 : 2;
    const char *who = e->right ? "cholesky_rdiv_pullback" : "cholesky_solve_pullback";
    cr__cmat G, Bb;
    cr_status st = cr__cmat_tan(arena, who, *dy, B->ndim, B->shape, e->cplx, &G);
    if (st != CR_OK)
        return st;
    if (G.p == NULL) {
        dx[1] = dx[2] = cr_tangent_zero();
        return CR_OK;
    }
    st = csolve_flip(arena, e, &G);
    if (st == CR_OK)
        st = chol_apply_inv(arena, who, &e->Um, &G);
    if (st == CR_OK)
        st = cr__cmat_copy(arena, &G, &Bb);
    if (st == CR_OK)
        st = csolve_flip(arena, e, &Bb);
    if (st == CR_OK)
        st = cr__cmat_give(arena, e->pB, &Bb, B->ndim == 1, &dx[ib]);
    if (st != CR_OK)
        return st;
    return cr__la_thunk_new(
        arena, csolve_thunk_fn, e, &G,
        e->right ? "cholesky_rdiv_pullback_thunk" : "cholesky_solve_pullback_thunk", &dx[iu]);
}

static cr_status csolve_rrule(cr_arena *arena, bool right, const cr_value *args, size_t nargs,
                              cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__LA_ENV(arena, csolve_env, e);
    cr_dtype dt = CR_DT_F64;
    cr_status st = csolve_forward(arena, right, args, nargs, e, &dt);
    cr_array *o;
    if (st == CR_OK)
        st = csolve_out(arena, e, dt, &o);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail2(
        arena, args, udata, right ? &e->pB : &e->pU, right ? &e->pU : &e->pB, o, y, pb,
        (cr_pullback){csolve_pullback, e,
                      right ? "cholesky_rdiv_pullback" : "cholesky_solve_pullback", nargs + 1});
}

/* frule: Ẏ = (Uᴴ U)⁻¹ (Ḃ - U̇ᴴ U Y - Uᴴ U̇ Y), U̇ read on the upper triangle (on Z and Ḃᴴ for
 * the right division, then flipped back). */
static cr_status csolve_frule(cr_arena *arena, bool right, const cr_tangent *dargs,
                              const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    const char *who = csolve_name(right);
    csolve_env e;
    memset(&e, 0, sizeof e);
    cr_dtype dt = CR_DT_F64;
    cr_status st = csolve_forward(arena, right, args, nargs, &e, &dt);
    cr_array *o;
    if (st == CR_OK)
        st = csolve_out(arena, &e, dt, &o);
    if (st != CR_OK)
        return st;
    cr__cmat dU, dB, R, W;
    bool none = false;
    st = cr__frule_pair_cmat(arena, who, dargs, args, right ? 1 : 0, right ? 0 : 1, e.cplx, o, y,
                             &dU, &dB, dy, &none);
    if (st != CR_OK || none)
        return st;
    if (dB.p != NULL) {
        st = cr__cmat_copy_as(arena, &dB, e.cplx, &R);
        if (st == CR_OK)
            st = csolve_flip(arena, &e, &R);
    } else {
        st = cr__cmat_new(arena, e.cplx, e.Y.r, e.Y.c, true, &R);
    }
    if (st != CR_OK)
        return st;
    if (dU.p != NULL) {
        cr__cmat_tri(&dU, 'U', false);
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e.Um, &e.Y, &W);
        if (st != CR_OK)
            return st;
        cr__cmat_gemm('C', 'N', -1.0, &dU, &W, 1.0, &R);
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &dU, &e.Y, &W);
        if (st != CR_OK)
            return st;
        cr__cmat_gemm('C', 'N', -1.0, &e.Um, &W, 1.0, &R);
    }
    st = chol_apply_inv(arena, who, &e.Um, &R);
    if (st == CR_OK)
        st = csolve_flip(arena, &e, &R);
    return st != CR_OK ? st : cr__tangent_like(arena, o, &R, e.B->ndim == 1, dy);
}

#define CSOLVE_RULES(NAME, RIGHT) CR__PARAM_RULES(NAME, csolve_rrule, csolve_frule, RIGHT, 2)

CSOLVE_RULES(cholesky_solve, false)
CSOLVE_RULES(cholesky_rdiv, true)

/* det(Uᴴ U) = Π |u_ii|² and logdet(Uᴴ U) = 2 Σ log |u_ii| (real for complex U too). */
typedef struct cdet_env {
    cr_project *pU;
    cr__cmat Um;
    bool lg;
} cdet_env;

static const char *cdet_name(bool lg)
{
    return lg ? "cholesky_logdet" : "cholesky_det";
}

/* Π_{j≠i} |u_jj|² for every i, by prefix and suffix products (no division: zeros allowed). */
static cr_status cdet_others(cr_arena *arena, const cr__cmat *U, double **out)
{
    size_t n = U->r;
    double *o = cr__arena_array(arena, "cholesky_det", n, sizeof *o, _Alignof(double));
    if (o == NULL)
        return CR__ALLOC_STATUS(arena);
    double acc = 1;
    for (size_t i = 0; i < n; i++) {
        o[i] = acc;
        double a = cabs(cr__cmat_get(U, i, i));
        acc *= a * a;
    }
    acc = 1;
    for (size_t i = n; i-- > 0;) {
        o[i] *= acc;
        double a = cabs(cr__cmat_get(U, i, i));
        acc *= a * a;
    }
    *out = o;
    return CR_OK;
}

static cr_status cdet_forward(cr_arena *arena, bool lg, const cr_value *args, size_t nargs,
                              cr__cmat *Um, cr_value *y)
{
    const char *who = cdet_name(lg);
    const cr_array *U;
    cr_status st = cr__square_arg1(arena, who, args, nargs, &U, NULL);
    if (st == CR_OK)
        st = factor_arg(arena, who, args, nargs, 0, U->dtype == CR_DT_C128, lg, &U, Um);
    if (st != CR_OK)
        return st;
    double v = lg ? 0.0 : 1.0;
    for (size_t i = 0; i < Um->r; i++) {
        double a = cabs(cr__cmat_get(Um, i, i));
        if (lg)
            v += 2 * log(a);
        else
            v *= a * a;
    }
    *y = cr__scalar_value(U->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64, v);
    return CR_OK;
}

/* det: Ū_ii = 2 ȳ u_ii Π_{j≠i} |u_jj|²; logdet: Ū_ii = 2 ȳ / conj(u_ii); zero elsewhere. */
static cr_status cdet_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    cdet_env *e = cr__pb_start(dx, nx, false, env);
    cr_complex c;
    bool nz;
    cr_status st = cr__tan_scalar(arena, cdet_name(e->lg), *dy, &c, &nz);
    if (st != CR_OK || !nz) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    size_t n = e->Um.r;
    cr__cmat G;
    double *others = NULL;
    st = cr__cmat_new(arena, e->Um.cplx, n, n, true, &G);
    if (st == CR_OK && !e->lg)
        st = cdet_others(arena, &e->Um, &others);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        cr_complex u = cr__cmat_get(&e->Um, i, i);
        cr__cmat_set(&G, i, i, e->lg ? 2 * creal(c) / conj(u) : 2 * creal(c) * u * others[i]);
    }
    return cr__cmat_give(arena, e->pU, &G, false, &dx[1]);
}

static cr_status cdet_rrule(cr_arena *arena, bool lg, const cr_value *args, size_t nargs,
                            cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__LA_ENV(arena, cdet_env, e);
    e->lg = lg;
    cr_status st = cdet_forward(arena, lg, args, nargs, &e->Um, y);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail1(arena, &args[0], udata, &e->pU, pb,
                           (cr_pullback){cdet_pullback, e,
                                         lg ? "cholesky_logdet_pullback" : "cholesky_det_pullback",
                                         nargs + 1});
}

/* frule: det: Σ_i 2 re(conj(u_ii) u̇_ii) Π_{j≠i} |u_jj|²; logdet: 2 Σ re(u̇_ii / u_ii). */
static cr_status cdet_frule(cr_arena *arena, bool lg, const cr_tangent *dargs, const cr_value *args,
                            size_t nargs, cr_value *y, cr_tangent *dy)
{
    cr__cmat Um, dU;
    cr_status st = cdet_forward(arena, lg, args, nargs, &Um, y);
    if (st == CR_OK)
        st = cr__frule_dx0(arena, cdet_name(lg), dargs, args, Um.cplx, &dU, dy);
    if (st != CR_OK || dU.p == NULL)
        return st;
    double *others = NULL;
    if (!lg && (st = cdet_others(arena, &Um, &others)) != CR_OK)
        return st;
    double t = 0;
    for (size_t i = 0; i < Um.r; i++) {
        cr_complex u = cr__cmat_get(&Um, i, i), du = cr__cmat_get(&dU, i, i);
        t += lg ? 2 * creal(du / u) : 2 * creal(conj(u) * du) * others[i];
    }
    *dy = cr__scalar_tangent(y->kind == CR_KIND_F32 ? CR_DT_F32 : CR_DT_F64, t);
    return CR_OK;
}

#define CDET_RULES(NAME, LOG) CR__PARAM_RULES(NAME, cdet_rrule, cdet_frule, LOG, 1)

CDET_RULES(cholesky_det, false)
CDET_RULES(cholesky_logdet, true)

/* ---- Test registrations ---------------------------------------------------------------- */

/* A Cholesky factor: upper triangular with a real diagonal in [1.5, 2.5); tagged Upper or
 * dense with junk below the diagonal (which must not be read). cholesky_solve adds a vector
 * or matrix right-hand side. */
static cr_status sample_factor(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                               void *env)
{
    size_t n = 1 + cr__rng_below(rng, 4);
    cr_array *U;
    size_t shape[2] = {n, n};
    cr_status st = cr__rand_array(arena, rng, cr__rng_dtype(rng), 2, shape, -1, 1, &U);
    if (st != CR_OK)
        return st;
    bool tagged = cr__rng_below(rng, 2) == 0;
    for (size_t i = 0; i < n; i++) {
        cr_complex d = cr__load(U, (ptrdiff_t)(i * n + i));
        cr__store(U, (ptrdiff_t)(i * n + i), 2.0 + 0.5 * creal(d));
        for (size_t j = 0; j < i; j++)
            cr__store(U, (ptrdiff_t)(i * n + j), 7.0);
    }
    if (tagged)
        U->structure = CR_MAT_UPPER;
    args[0] = cr_value_array(U);
    bool right = env != NULL;
    if (nargs == 2) {
        shape[1] = 2;
        if (right) {
            shape[0] = 2;
            shape[1] = n;
        }
        cr_array *B;
        cr_dtype dt = cr__rng_below(rng, 2) ? (cr_dtype)U->dtype : cr__rng_dtype(rng);
        size_t nd = cr__rng_below(rng, 2) ? 1 : 2;
        st = cr__rand_array(arena, rng, dt, nd, right && nd == 1 ? shape + 1 : shape, -1, 1, &B);
        if (st != CR_OK)
            return st;
        args[right ? 1 : 0] = cr_value_array(U);
        args[right ? 0 : 1] = cr_value_array(B);
    }
    return CR_OK;
}

static const cr_rule_test k_t_spd = {.sample = cr__sample_sq, .env = (void *)(uintptr_t)CR__SQ_SPD};
static const cr_rule_test k_t_factor = {.sample = sample_factor};
static const cr_rule_test k_t_rdiv = {.sample = sample_factor, .env = (void *)&k_t_rdiv};
/* cholesky of a real number: the box [0.05, 5] and the points 1, 0.01 and 1e4. */
static const double k_scalar_lo[1] = {0.05}, k_scalar_hi[1] = {5},
                    k_scalar_points[3] = {1, 0.01, 1e4};
static const cr_rule_test k_t_scalar = {
    .npoints = 3, .points = k_scalar_points, .lo = k_scalar_lo, .hi = k_scalar_hi};

cr_status cr__linalg_register_cholesky(cr_registry *reg)
{
    static const cr_argspec s_real[1] = {{CR_M_F64 | CR_M_F32, NULL}};
    static const cr__linalg_rule k[] = {
        {&cholesky_function, cr__linalg_fa, 1, cholesky_frule, cholesky_rrule, &k_t_spd,
         &cr__form_cholesky},
        {&cholesky_solve_function, cr__linalg_fa, 2, cholesky_solve_frule, cholesky_solve_rrule,
         &k_t_factor, &cr__form_cholesky_solve},
        {&cholesky_det_function, cr__linalg_fa, 1, cholesky_det_frule, cholesky_det_rrule,
         &k_t_factor, &cr__form_cholesky_det},
        {&cholesky_logdet_function, cr__linalg_fa, 1, cholesky_logdet_frule, cholesky_logdet_rrule,
         &k_t_factor, &cr__form_cholesky_logdet},
        {&cholesky_rdiv_function, cr__linalg_fa, 2, cholesky_rdiv_frule, cholesky_rdiv_rrule,
         &k_t_rdiv, NULL},
        {&cholesky_function, s_real, 1, cholesky_frule, cholesky_rrule, &k_t_scalar, NULL},
    };
    return cr__linalg_add_rules(reg, k, sizeof k / sizeof k[0]);
}

#else /* !CR_HAVE_LAPACKE */

/* Without LAPACKE: the function values exist; calling them reports CR_EUNIMPL. */
CR__NO_LAPACK_FN(cholesky, "cholesky")
CR__NO_LAPACK_FN(cholesky_solve, "cholesky_solve")
CR__NO_LAPACK_FN(cholesky_det, "cholesky_det")
CR__NO_LAPACK_FN(cholesky_logdet, "cholesky_logdet")
CR__NO_LAPACK_FN(cholesky_rdiv, "cholesky_rdiv")

CR__NO_LAPACK_REGISTER(cholesky)

#endif /* CR_HAVE_LAPACKE */
