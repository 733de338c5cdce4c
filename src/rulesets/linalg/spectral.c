/*
 * Spectral rules of the linear-algebra family: eigen and eigvals of Hermitian matrices, svd
 * and svdvals, and matfun_herm (a scalar function of a Hermitian matrix through its
 * eigendecomposition). Compiled with LAPACKE (CR_HAVE_LAPACKE); without it the function
 * values exist, their primal gives CR_EUNIMPL and no rule is registered. The
 * decompositions themselves are in decompositions.c.
 */
#include <float.h>
#include <math.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>

/* ---- Tuples ------------------------------------------------------------------------------ */

typedef struct tup2 {
    cr_array a, b;
} tup2;
typedef struct tup3 {
    cr_array a, b, c;
} tup3;
static const cr_field k_tup2_fields[2] = {{NULL, offsetof(tup2, a), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(tup2, b), CR_KIND_ARRAY, NULL}};
static const cr_field k_tup3_fields[3] = {{NULL, offsetof(tup3, a), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(tup3, b), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(tup3, c), CR_KIND_ARRAY, NULL}};
static const cr_type k_tup2 = {"tuple(array,array)", sizeof(tup2), 2, k_tup2_fields};
static const cr_type k_tup3 = {"tuple(array,array,array)", sizeof(tup3), 3, k_tup3_fields};

/* ---- eigen and eigvals of Hermitian matrices ---------------------------------------------- */

typedef struct eig_env {
    const cr_array *A;
    cr_project *pA;
    cr__cmat V;
    double *w;
    bool vectors;
} eig_env;

static cr_status eig_forward(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                             const cr_array **A, cr__cmat *V, double **w)
{
    bool cplx = false;
    cr_status st = cr__nargs(arena, who, nargs, 1, 1);
    if (st == CR_OK)
        st = cr__square_arg(arena, who, args, nargs, 0, A, &cplx);
    if (st == CR_OK)
        st = cr__herm_upper(arena, *A, cplx, V);
    if (st == CR_OK)
        st = cr__eigh(arena, who, V, w);
    return st;
}

static cr_status eig_output(cr_arena *arena, const cr_array *A, const cr__cmat *V, const double *w,
                            bool vectors, cr_value *y)
{
    size_t n = V->r;
    cr_dtype rdt = A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    cr_array *lw, *lo;
    cr_status st = cr__new(arena, CR_DT_F64, 1, &n, false, &lw);
    if (st != CR_OK)
        return st;
    if (n > 0)
        memcpy(lw->data, w, n * sizeof *w);
    st = cr__cast(arena, lw, rdt, &lo);
    if (st != CR_OK)
        return st;
    if (!vectors) {
        *y = cr_value_array(lo);
        return CR_OK;
    }
    cr_array *vo;
    st = cr__cmat_out(arena, V, false, (cr_dtype)A->dtype, &vo);
    if (st != CR_OK)
        return st;
    tup2 *t = cr_arena_alloc(arena, sizeof *t, _Alignof(tup2));
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    t->a = *lo;
    t->b = *vo;
    *y = cr_value_struct(&k_tup2, t);
    return CR_OK;
}

/* S = V (diag(λ̄) + F ∘ (Vᴴ V̄)) Vᴴ, Hermitised; F_ij = 1/(λ_j - λ_i), 0 on the diagonal
 * and between equal eigenvalues. */
static cr_status eig_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)nx;
    eig_env *e = env;
    const char *who = e->vectors ? "eigen_pullback" : "eigvals_pullback";
    dx[0] = cr_tangent_none();
    size_t n = e->V.r, shape[2] = {n, n};
    cr_tangent tl = *dy, tv = cr_tangent_zero();
    cr_status st = CR_OK;
    if (e->vectors) {
        st = cr__tuple_field(arena, who, *dy, 0, &tl);
        if (st == CR_OK)
            st = cr__tuple_field(arena, who, *dy, 1, &tv);
    }
    cr__cmat L, Vb, K, T, S;
    if (st == CR_OK)
        st = cr__cmat_tan(arena, who, tl, 1, &n, false, &L);
    if (st == CR_OK)
        st = cr__cmat_tan(arena, who, tv, 2, shape, e->V.cplx, &Vb);
    if (st != CR_OK)
        return st;
    if (L.p == NULL && Vb.p == NULL) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    if (Vb.p != NULL) {
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->V, &Vb, &K);
        if (st != CR_OK)
            return st;
        double scale = cr__spectrum_scale(e->w, n);
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++)
                cr__cmat_set(
                    &K, i, j,
                    i == j ? 0.0 : cr__cmat_get(&K, i, j) * cr__inv_gap(e->w[j], e->w[i], scale));
    } else {
        st = cr__cmat_new(arena, e->V.cplx, n, n, true, &K);
        if (st != CR_OK)
            return st;
    }
    for (size_t i = 0; i < n && L.p != NULL; i++)
        cr__cmat_set(&K, i, i, creal(cr__cmat_get(&L, i, 0)));
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e->V, &K, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', 1.0, &T, &e->V, &S);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i <= j; i++) {
            cr_complex h = 0.5 * (cr__cmat_get(&S, i, j) + conj(cr__cmat_get(&S, j, i)));
            cr__cmat_set(&S, i, j, h);
            cr__cmat_set(&S, j, i, conj(h));
        }
    return cr__herm_give(arena, e->A, e->pA, &S, &dx[1]);
}

static cr_status eig_rrule(cr_arena *arena, bool vectors, const cr_value *args, size_t nargs,
                           cr_value *y, cr_pullback *pb, const void *udata)
{
    const char *who = vectors ? "eigen" : "eigvals";
    eig_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(eig_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_status st = eig_forward(arena, who, args, nargs, &e->A, &e->V, &e->w);
    if (st == CR_OK)
        st = eig_output(arena, e->A, &e->V, e->w, vectors, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    e->vectors = vectors;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb =
        (cr_pullback){eig_pullback, e, vectors ? "eigen_pullback" : "eigvals_pullback", nargs + 1};
    return CR_OK;
}

/* frule: P = Vᴴ Ḣ V; λ̇_i = re P_ii; V̇ = V (F ∘ P). */
static cr_status eig_frule(cr_arena *arena, bool vectors, const cr_tangent *dargs,
                           const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    const char *who = vectors ? "eigen" : "eigvals";
    const cr_array *A;
    cr__cmat V, dH, T, P;
    double *w;
    cr_status st = eig_forward(arena, who, args, nargs, &A, &V, &w);
    if (st == CR_OK)
        st = eig_output(arena, A, &V, w, vectors, y);
    if (st != CR_OK)
        return st;
    const cr_array *t;
    st = cr__dx_array(arena, who, dargs, args, 0, V.cplx ? CR_DT_C128 : CR_DT_F64, &t);
    if (st != CR_OK || t == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    st = cr__herm_upper(arena, t, V.cplx, &dH);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &V, &dH, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &T, &V, &P);
    if (st != CR_OK)
        return st;
    size_t n = V.r;
    cr__cmat dl;
    st = cr__cmat_new(arena, false, n, 1, false, &dl);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        cr__cmat_set(&dl, i, 0, creal(cr__cmat_get(&P, i, i)));
    cr_dtype rdt = A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    cr_array *dlo;
    st = cr__cmat_out(arena, &dl, true, rdt, &dlo);
    if (st != CR_OK)
        return st;
    if (!vectors) {
        *dy = cr_tangent_array(dlo);
        return CR_OK;
    }
    double scale = cr__spectrum_scale(w, n);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&P, i, j,
                         i == j ? 0.0 : cr__cmat_get(&P, i, j) * cr__inv_gap(w[j], w[i], scale));
    cr__cmat dV;
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &V, &P, &dV);
    cr_array *dvo;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &dV, false, (cr_dtype)A->dtype, &dvo);
    if (st != CR_OK)
        return st;
    cr_tangent f[2] = {cr_tangent_array(dlo), cr_tangent_array(dvo)};
    return cr_tangent_struct(arena, &k_tup2, NULL, f, 2, dy);
}

#define EIG_RULES(NAME, VEC) CR__PARAM_RULES(NAME, eig_rrule, eig_frule, VEC, 1)

EIG_RULES(eigen, true)
EIG_RULES(eigvals, false)

/* ---- svd and svdvals ------------------------------------------------------------------- */

typedef struct svd_env {
    const cr_array *A;
    cr_project *pA;
    cr__svd f;
    cr__cmat V;  /* n x k */
    size_t *piv; /* complex: the row of each column of U made real positive (the gauge) */
    bool vectors;
} svd_env;

/* The gauge of a complex SVD: each pair (u_k, v_k) is multiplied by the phase that makes
 * the largest-magnitude entry of u_k (the first of equal ones) real positive; u_k v_kᴴ is
 * unchanged. Records that entry's row in e->piv. Locally (while the largest entry stays
 * the largest) this is a smooth choice, so U and V are differentiable functions of A. */
static cr_status svd_gauge(cr_arena *arena, svd_env *e)
{
    cr__svd *f = &e->f;
    e->piv = cr__arena_array(arena, "svd", f->k, sizeof *e->piv, _Alignof(size_t));
    if (e->piv == NULL)
        return CR__ALLOC_STATUS(arena);
    for (size_t k = 0; k < f->k; k++) {
        size_t r = 0;
        double best = -1;
        for (size_t i = 0; i < f->m; i++) {
            double a = cabs(cr__cmat_get(&f->U, i, k));
            if (a > best) {
                best = a;
                r = i;
            }
        }
        e->piv[k] = r;
        cr_complex u = cr__cmat_get(&f->U, r, k);
        if (best <= 0)
            continue;
        cr_complex ph = conj(u) / best;
        for (size_t i = 0; i < f->m; i++)
            cr__cmat_set(&f->U, i, k, cr__cmat_get(&f->U, i, k) * ph);
        for (size_t j = 0; j < f->n; j++)
            cr__cmat_set(&f->Vt, k, j, cr__cmat_get(&f->Vt, k, j) * conj(ph));
        cr__cmat_set(&f->U, r, k, best); /* exactly real */
    }
    return CR_OK;
}

static cr_status svd_forward(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                             bool vectors, svd_env *e)
{
    const cr_array *A;
    cr_status st = cr__nargs(arena, who, nargs, 1, 1);
    if (st == CR_OK)
        st = cr__array_arg(arena, who, args, nargs, 0, &A);
    if (st != CR_OK)
        return st;
    if (A->ndim != 2 || !cr_dtype_is_float((cr_dtype)A->dtype) ||
        !cr__lapack_size_ok(A->shape[0] * A->shape[1]))
        return CR__FAIL(arena, CR_ESHAPE, "%s: expected a float matrix", who);
    (void)vectors;
    cr__cmat Am;
    e->A = A;
    st = cr__cmat_from(arena, A, A->dtype == CR_DT_C128, &Am);
    if (st == CR_OK)
        st = cr__svd_of(arena, who, &Am, &e->f);
    if (st == CR_OK && A->dtype == CR_DT_C128)
        st = svd_gauge(arena, e);
    if (st == CR_OK)
        st = cr__cmat_adj(arena, &e->f.Vt, &e->V);
    return st;
}

static cr_status svd_output(cr_arena *arena, const svd_env *e, bool vectors, cr_value *y)
{
    size_t k = e->f.k;
    cr_dtype rdt = e->A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    cr_array *sw, *so;
    cr_status st = cr__new(arena, CR_DT_F64, 1, &k, false, &sw);
    if (st != CR_OK)
        return st;
    if (k > 0)
        memcpy(sw->data, e->f.s, k * sizeof(double));
    st = cr__cast(arena, sw, rdt, &so);
    if (st != CR_OK)
        return st;
    if (!vectors) {
        *y = cr_value_array(so);
        return CR_OK;
    }
    cr_array *uo, *vo;
    st = cr__cmat_out(arena, &e->f.U, false, (cr_dtype)e->A->dtype, &uo);
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e->V, false, (cr_dtype)e->A->dtype, &vo);
    if (st != CR_OK)
        return st;
    tup3 *t = cr_arena_alloc(arena, sizeof *t, _Alignof(tup3));
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    t->a = *uo;
    t->b = *so;
    t->c = *vo;
    *y = cr_value_struct(&k_tup3, t);
    return CR_OK;
}

/* svd: Ā = [U (F∘(UᴴŪ - ŪᴴU)) S + (I - UUᴴ) Ū S⁻¹ + U diag(s̄)
 *           + U S (F∘(VᴴV̄ - V̄ᴴV))] Vᴴ + U S⁻¹ V̄ᴴ (I - VVᴴ)
 * with F_ij = 1/(s_j² - s_i²): ChainRules' svd_rev, where equal singular values (F) and
 * zero ones (S⁻¹) contribute 0 instead of dividing by zero (ChainRules #664). Complex A
 * adds U diag(-i im(VᴴV̄)_ii / s_i) Vᴴ (Wan and Zhang) and the gauge's share (svd_gauge).
 * svdvals: Ā = U diag(s̄) Vᴴ. */
static cr_status svd_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)nx;
    svd_env *e = env;
    const char *who = e->vectors ? "svd_pullback" : "svdvals_pullback";
    dx[0] = cr_tangent_none();
    const cr__svd *f = &e->f;
    size_t m = f->m, n = f->n, k = f->k;
    bool cplx = f->U.cplx;
    cr_tangent tu = cr_tangent_zero(), ts = *dy, tv = cr_tangent_zero();
    cr_status st = CR_OK;
    if (e->vectors) {
        st = cr__tuple_field(arena, who, *dy, 0, &tu);
        if (st == CR_OK)
            st = cr__tuple_field(arena, who, *dy, 1, &ts);
        if (st == CR_OK)
            st = cr__tuple_field(arena, who, *dy, 2, &tv);
    }
    size_t su[2] = {m, k}, sv[2] = {n, k};
    cr__cmat Ub, Sb, Vb;
    if (st == CR_OK)
        st = cr__cmat_tan(arena, who, tu, 2, su, cplx, &Ub);
    if (st == CR_OK)
        st = cr__cmat_tan(arena, who, ts, 1, &k, false, &Sb);
    if (st == CR_OK)
        st = cr__cmat_tan(arena, who, tv, 2, sv, cplx, &Vb);
    if (st != CR_OK)
        return st;
    if (Ub.p == NULL && Sb.p == NULL && Vb.p == NULL) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    double smax = k > 0 ? f->s[0] : 0;
    if (cplx && e->vectors) {
        /* The gauge's share (svd_gauge): with c_k = u_kᴴ ū_k + v_kᴴ v̄_k, a loss that depends
         * on the phases (Im c_k != 0) sees u_k's pivot entry move: Ū[r_k, k] -= i Im c_k /
         * U[r_k, k]. Phase-invariant losses have Im c_k = 0 and skip this. */
        for (size_t j = 0; j < k; j++) {
            cr_complex c = 0;
            for (size_t i = 0; i < m && Ub.p != NULL; i++)
                c += conj(cr__cmat_get(&f->U, i, j)) * cr__cmat_get(&Ub, i, j);
            for (size_t i = 0; i < n && Vb.p != NULL; i++)
                c += conj(cr__cmat_get(&e->V, i, j)) * cr__cmat_get(&Vb, i, j);
            if (cimag(c) == 0)
                continue;
            if (Ub.p == NULL) {
                st = cr__cmat_new(arena, true, m, k, true, &Ub);
                if (st != CR_OK)
                    return st;
            }
            size_t r = e->piv[j];
            cr__cmat_set(&Ub, r, j,
                         cr__cmat_get(&Ub, r, j) -
                             cr__c(0, cimag(c) / creal(cr__cmat_get(&f->U, r, j))));
        }
    }
    /* inner = Jf S + diag(s̄) + S Kf (k x k) */
    cr__cmat inner, T, Abar, J;
    st = cr__cmat_new(arena, cplx, k, k, true, &inner);
    if (st != CR_OK)
        return st;
    for (int w = 0; w < 2; w++) {
        const cr__cmat *Xb = w == 0 ? &Ub : &Vb;
        const cr__cmat *X = w == 0 ? &f->U : &e->V;
        if (Xb->p == NULL)
            continue;
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, X, Xb, &J);
        if (st != CR_OK)
            return st;
        for (size_t j = 0; j < k; j++)
            for (size_t i = 0; i < k; i++) {
                if (i == j) {
                    /* Complex: V's phase moves against U's by i Im(dP_ii) / s_i, whose
                     * adjoint is -i Im((Vᴴ V̄)_ii) / s_i (Wan and Zhang's extra term). */
                    if (w == 1 && cplx)
                        cr__cmat_set(&inner, i, i,
                                     cr__cmat_get(&inner, i, i) +
                                         cr__c(0, -cimag(cr__cmat_get(&J, i, i)) *
                                                      cr__inv_sval(f->s[i], smax)));
                    continue;
                }
                double F = cr__inv_gap(f->s[j] * f->s[j], f->s[i] * f->s[i], smax * smax);
                cr_complex a = F * (cr__cmat_get(&J, i, j) - conj(cr__cmat_get(&J, j, i)));
                /* U-term: (F∘(UᵀŪ - ŪᵀU)) S scales column j by s_j; V-term: S (F∘...) scales
                 * row i by s_i. */
                cr_complex add = w == 0 ? a * f->s[j] : a * f->s[i];
                cr__cmat_set(&inner, i, j, cr__cmat_get(&inner, i, j) + add);
            }
    }
    for (size_t i = 0; i < k && Sb.p != NULL; i++)
        cr__cmat_set(&inner, i, i, cr__cmat_get(&inner, i, i) + cr__cmat_get(&Sb, i, 0));
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &f->U, &inner, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &T, &f->Vt, &Abar);
    if (st != CR_OK)
        return st;
    if (Ub.p != NULL && m > k) {
        /* (I - UUᵀ) Ū S⁻¹ Vᵀ */
        cr__cmat Q, W;
        st = cr__cmat_copy(arena, &Ub, &Q);
        if (st != CR_OK)
            return st;
        for (size_t j = 0; j < k; j++)
            for (size_t i = 0; i < m; i++)
                cr__cmat_set(&Q, i, j, cr__cmat_get(&Q, i, j) * cr__inv_sval(f->s[j], smax));
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &f->U, &Q, &W);
        if (st != CR_OK)
            return st;
        cr__cmat_gemm('N', 'N', -1.0, &f->U, &W, 1.0, &Q);
        cr__cmat_gemm('N', 'N', 1.0, &Q, &f->Vt, 1.0, &Abar);
    }
    if (Vb.p != NULL && n > k) {
        /* U S⁻¹ V̄ᵀ (I - VVᵀ) = U ((I - VVᵀ) V̄ S⁻¹)ᵀ */
        cr__cmat Q, W;
        st = cr__cmat_copy(arena, &Vb, &Q);
        if (st != CR_OK)
            return st;
        for (size_t j = 0; j < k; j++)
            for (size_t i = 0; i < n; i++)
                cr__cmat_set(&Q, i, j, cr__cmat_get(&Q, i, j) * cr__inv_sval(f->s[j], smax));
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->V, &Q, &W);
        if (st != CR_OK)
            return st;
        cr__cmat_gemm('N', 'N', -1.0, &e->V, &W, 1.0, &Q);
        cr__cmat_gemm('N', 'C', 1.0, &f->U, &Q, 1.0, &Abar);
    }
    cr_array *r = NULL;
    st = cr__cmat_to_array(arena, &Abar, false, &r);
    return st != CR_OK ? st : cr__give(arena, e->pA, r, &dx[1]);
}

static cr_status svd_rrule_common(cr_arena *arena, bool vectors, const cr_value *args, size_t nargs,
                                  cr_value *y, cr_pullback *pb, const void *udata)
{
    const char *who = vectors ? "svd" : "svdvals";
    svd_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(svd_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_status st = svd_forward(arena, who, args, nargs, vectors, e);
    if (st == CR_OK)
        st = svd_output(arena, e, vectors, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    e->vectors = vectors;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){svd_pullback, e, vectors ? "svd_pullback" : "svdvals_pullback", nargs + 1};
    return CR_OK;
}

/* frule: dP = Uᴴ Ȧ V; ṡ = re diag(dP); for svd
 * U̇ = U (F ∘ (dP S + S dPᴴ)) + (I - UUᴴ) Ȧ V S⁻¹,
 * V̇ = V (F ∘ (S dP + dPᴴ S) - i diag(im dP / s)) + (I - VVᴴ) Ȧᴴ U S⁻¹,
 * then for complex A the gauge's turn i w_k of both k-th vectors (svd_gauge). */
static cr_status svd_frule_common(cr_arena *arena, bool vectors, const cr_tangent *dargs,
                                  const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    const char *who = vectors ? "svd" : "svdvals";
    svd_env e;
    memset(&e, 0, sizeof e);
    cr_status st = svd_forward(arena, who, args, nargs, vectors, &e);
    if (st == CR_OK)
        st = svd_output(arena, &e, vectors, y);
    if (st != CR_OK)
        return st;
    const cr__svd *f = &e.f;
    size_t m = f->m, n = f->n, k = f->k;
    bool cplx = f->U.cplx;
    cr__cmat dA, T, dP;
    st = cr__cmat_dx(arena, who, dargs, args, 0, cplx, &dA);
    if (st != CR_OK || dA.p == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    st = cr__cmat_mul(arena, 'C', 'N', 1.0, &f->U, &dA, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &T, &e.V, &dP);
    if (st != CR_OK)
        return st;
    cr__cmat ds;
    st = cr__cmat_new(arena, false, k, 1, false, &ds);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < k; i++)
        cr__cmat_set(&ds, i, 0, creal(cr__cmat_get(&dP, i, i)));
    cr_dtype rdt = e.A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    cr_array *dso;
    st = cr__cmat_out(arena, &ds, true, rdt, &dso);
    if (st != CR_OK)
        return st;
    if (!vectors) {
        *dy = cr_tangent_array(dso);
        return CR_OK;
    }
    double smax = k > 0 ? f->s[0] : 0;
    cr__cmat Cu, Cv, dU, dV;
    st = cr__cmat_new(arena, cplx, k, k, false, &Cu);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, k, k, false, &Cv);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < k; i++) {
            double F =
                i == j ? 0.0 : cr__inv_gap(f->s[j] * f->s[j], f->s[i] * f->s[i], smax * smax);
            cr_complex pij = cr__cmat_get(&dP, i, j), pji = conj(cr__cmat_get(&dP, j, i));
            cr__cmat_set(&Cu, i, j, F * (pij * f->s[j] + f->s[i] * pji));
            cr__cmat_set(&Cv, i, j, F * (f->s[i] * pij + pji * f->s[j]));
        }
    /* Complex: Uᴴ U̇ has a zero diagonal before the gauge fix, Vᴴ V̇ then has
     * -i Im(dP_ii) / s_i (so that the diagonal of Uᴴ Ȧ V comes out right). */
    for (size_t i = 0; i < k && cplx; i++)
        cr__cmat_set(&Cv, i, i,
                     cr__c(0, -cimag(cr__cmat_get(&dP, i, i)) * cr__inv_sval(f->s[i], smax)));
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &f->U, &Cu, &dU);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e.V, &Cv, &dV);
    if (st != CR_OK)
        return st;
    if (m > k) {
        cr__cmat Q, W;
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &dA, &e.V, &Q);
        if (st != CR_OK)
            return st;
        for (size_t j = 0; j < k; j++)
            for (size_t i = 0; i < m; i++)
                cr__cmat_set(&Q, i, j, cr__cmat_get(&Q, i, j) * cr__inv_sval(f->s[j], smax));
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &f->U, &Q, &W);
        if (st != CR_OK)
            return st;
        cr__cmat_gemm('N', 'N', -1.0, &f->U, &W, 1.0, &Q);
        for (size_t j = 0; j < k; j++)
            for (size_t i = 0; i < m; i++)
                cr__cmat_set(&dU, i, j, cr__cmat_get(&dU, i, j) + cr__cmat_get(&Q, i, j));
    }
    if (n > k) {
        cr__cmat Q, W;
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &dA, &f->U, &Q);
        if (st != CR_OK)
            return st;
        for (size_t j = 0; j < k; j++)
            for (size_t i = 0; i < n; i++)
                cr__cmat_set(&Q, i, j, cr__cmat_get(&Q, i, j) * cr__inv_sval(f->s[j], smax));
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e.V, &Q, &W);
        if (st != CR_OK)
            return st;
        cr__cmat_gemm('N', 'N', -1.0, &e.V, &W, 1.0, &Q);
        for (size_t j = 0; j < k; j++)
            for (size_t i = 0; i < n; i++)
                cr__cmat_set(&dV, i, j, cr__cmat_get(&dV, i, j) + cr__cmat_get(&Q, i, j));
    }
    for (size_t j = 0; j < k && cplx; j++) {
        /* The gauge keeps U[r_j, j] real: both vectors turn by i w_j. */
        size_t r = e.piv[j];
        double w = -cimag(cr__cmat_get(&dU, r, j)) / creal(cr__cmat_get(&f->U, r, j));
        for (size_t i = 0; i < m; i++)
            cr__cmat_set(&dU, i, j,
                         cr__cmat_get(&dU, i, j) + cr__c(0, w) * cr__cmat_get(&f->U, i, j));
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&dV, i, j,
                         cr__cmat_get(&dV, i, j) + cr__c(0, w) * cr__cmat_get(&e.V, i, j));
    }
    cr_array *duo, *dvo;
    st = cr__cmat_out(arena, &dU, false, (cr_dtype)e.A->dtype, &duo);
    if (st == CR_OK)
        st = cr__cmat_out(arena, &dV, false, (cr_dtype)e.A->dtype, &dvo);
    if (st != CR_OK)
        return st;
    cr_tangent fl[3] = {cr_tangent_array(duo), cr_tangent_array(dso), cr_tangent_array(dvo)};
    return cr_tangent_struct(arena, &k_tup3, NULL, fl, 3, dy);
}

#define SVD_RULES(NAME, VEC) CR__PARAM_RULES(NAME, svd_rrule_common, svd_frule_common, VEC, 1)

SVD_RULES(svd, true)
SVD_RULES(svdvals, false)

/* ---- Functions of Hermitian matrices ----------------------------------------------------- */

/* f(H) = V diag(f(λ)) Vᴴ for a Hermitian H (A's upper triangle) and a scalar-table f. The
 * derivative is Daleckii-Krein's: Ḟ = V (F ∘ (Vᴴ Ḣ V)) Vᴴ with the divided differences
 * F_ij = (f(λ_i) - f(λ_j)) / (λ_i - λ_j), and f'((λ_i + λ_j)/2) where the two eigenvalues
 * are within 1e-5 of each other relatively (repeated ones included): there the quotient
 * would cancel, the midpoint derivative is accurate to O(gap²). */
typedef struct mf_env {
    const cr_array *A;
    cr_project *pA;
    cr__cmat V;
    double *w;
    cr__cmat F; /* the divided differences (real, n x n) */
} mf_env;

static cr_status matfun_forward(cr_arena *arena, const cr_value *args, size_t nargs, mf_env *e,
                                cr__cmat *Y)
{
    cr_status st = cr__nargs(arena, "matfun_herm", nargs, 2, 2);
    if (st != CR_OK)
        return st;
    const cr_scalar_rule *row =
        args[0].kind == CR_KIND_FUNC ? cr_scalar_rule_of(args[0].u.func.fn) : NULL;
    if (row == NULL || row->nin != 1 || row->nout != 1)
        return CR__FAIL(arena, CR_EINVAL,
                        "matfun_herm: f must be a scalar-table function of one argument");
    bool cplx = false;
    st = cr__square_arg(arena, "matfun_herm", args, nargs, 1, &e->A, &cplx);
    if (st == CR_OK)
        st = cr__herm_upper(arena, e->A, cplx, &e->V);
    if (st == CR_OK)
        st = cr__eigh(arena, "matfun_herm", &e->V, &e->w);
    size_t n = e->V.r;
    double *fv = cr__arena_array(arena, "matfun_herm", n, sizeof *fv, _Alignof(double));
    double *dv = cr__arena_array(arena, "matfun_herm", n, sizeof *dv, _Alignof(double));
    if (st == CR_OK && (fv == NULL || dv == NULL))
        st = CR__ALLOC_STATUS(arena);
    if (st == CR_OK)
        st = cr__cmat_new(arena, false, n, n, false, &e->F);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        row->f64(&e->w[i], &fv[i], &dv[i]);
        if (!isfinite(fv[i]))
            return CR__FAIL(arena, CR_EDOMAIN, "matfun_herm: %s is not finite at the eigenvalue %g",
                            row->name, e->w[i]);
    }
    double tol = cr__matfun_tol(e->w, n);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&e->F, i, j,
                         i == j ? dv[i] : cr__divdiff1(row, e->w[i], e->w[j], fv[i], fv[j], tol));
    /* Y = V diag(f(λ)) Vᴴ */
    cr__cmat T;
    st = cr__cmat_copy(arena, &e->V, &T);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&T, i, j, cr__cmat_get(&T, i, j) * fv[j]);
    return cr__cmat_mul(arena, 'N', 'C', 1.0, &T, &e->V, Y);
}

static cr_status matfun_output(cr_arena *arena, const cr_array *A, const cr__cmat *Y, cr_value *y)
{
    cr_array *o;
    cr_status st = cr__cmat_out(arena, Y, false, (cr_dtype)A->dtype, &o);
    if (st != CR_OK)
        return st;
    o->structure = (uint8_t)(A->dtype == CR_DT_C128 ? CR_MAT_HERMITIAN : CR_MAT_SYMMETRIC);
    *y = cr_value_array(o);
    return CR_OK;
}

/* V (F ∘ (Vᴴ X V)) Vᴴ, Hermitised. */
static cr_status dk_apply(cr_arena *arena, const mf_env *e, const cr__cmat *X, cr__cmat *out)
{
    cr__cmat T, G, R;
    cr_status st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->V, X, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &T, &e->V, &G);
    if (st != CR_OK)
        return st;
    size_t n = G.r;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&G, i, j, cr__cmat_get(&G, i, j) * cr__cmat_get(&e->F, i, j));
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e->V, &G, &R);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', 1.0, &R, &e->V, out);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i <= j; i++) {
            cr_complex h = 0.5 * (cr__cmat_get(out, i, j) + conj(cr__cmat_get(out, j, i)));
            cr__cmat_set(out, i, j, h);
            cr__cmat_set(out, j, i, conj(h));
        }
    return CR_OK;
}

static cr_status matfun_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    mf_env *e = env;
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    size_t n = e->V.r, shape[2] = {n, n};
    cr__cmat G, S;
    cr_status st = cr__cmat_tan(arena, "matfun_herm_pullback", *dy, 2, shape, e->V.cplx, &G);
    if (st != CR_OK)
        return st;
    if (G.p == NULL) {
        dx[2] = cr_tangent_zero();
        return CR_OK;
    }
    st = dk_apply(arena, e, &G, &S);
    return st != CR_OK ? st : cr__herm_give(arena, e->A, e->pA, &S, &dx[2]);
}

/* matfun_herm(f, A) = f(A) for Hermitian A. */
static cr_status matfun_herm_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                   const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                   const void *udata)
{
    (void)cfg;
    (void)f;
    mf_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(mf_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr__cmat Y;
    cr_status st = matfun_forward(arena, args, nargs, e, &Y);
    if (st == CR_OK)
        st = matfun_output(arena, e->A, &Y, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    st = cr_project_new(arena, &args[1], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){matfun_pullback, e, "matfun_herm_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(matfun_herm, "matfun_herm", 2)

static cr_status matfun_herm_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                   const cr_value *f, const cr_value *args, size_t nargs,
                                   cr_value *y, cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)udata;
    mf_env e;
    memset(&e, 0, sizeof e);
    cr__cmat Y, dH, R;
    cr_status st = matfun_forward(arena, args, nargs, &e, &Y);
    if (st == CR_OK)
        st = matfun_output(arena, e.A, &Y, y);
    const cr_array *t = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, "matfun_herm", dargs, args, 1, e.V.cplx ? CR_DT_C128 : CR_DT_F64,
                          &t);
    if (st != CR_OK || t == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    st = cr__herm_upper(arena, t, e.V.cplx, &dH);
    if (st == CR_OK)
        st = dk_apply(arena, &e, &dH, &R);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &R, false, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* ---- Test registrations ---------------------------------------------------------------- */

/* matfun_herm(f, A): f among exp, sin, cos, tanh (any Hermitian A), sqrt and log (A
 * positive definite, eigenvalues in [0.5, 3.5]). */
static cr_status sample_matfun(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                               void *env)
{
    (void)nargs;
    (void)env;
    static const char *const names[6] = {"exp", "sin", "cos", "tanh", "sqrt", "log"};
    size_t k = cr__rng_below(rng, 6);
    const cr_function *fn = cr_registry_find(cr_registry_builtin(), names[k]);
    if (fn == NULL)
        fn = cr_registry_find(cr_registry_builtin(), "exp");
    args[0] = cr_value_function(fn, NULL);
    cr_array *A;
    cr_status st = cr__rand_square(arena, rng, CR__SQ_HERM, &A);
    if (st != CR_OK)
        return st;
    /* Shift to eigenvalues in about [0.5, 3.5] for sqrt and log, scale for the others. */
    size_t n = A->shape[0];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            cr_complex v = cr__load(A, (ptrdiff_t)(i * n + j)) * 0.5;
            cr__store(A, (ptrdiff_t)(i * n + j), i == j ? v + (k >= 4 ? 0.75 : -0.5) : v);
        }
    args[1] = cr_value_array(A);
    return CR_OK;
}

static const cr_rule_test k_t_matfun = {.sample = sample_matfun};
static const cr_rule_test k_t_herm = {.sample = cr__sample_sq,
                                      .env = (void *)(uintptr_t)CR__SQ_HERM};
static const cr_rule_test k_t_realsym = {.sample = cr__sample_sq,
                                         .env = (void *)(uintptr_t)CR__SQ_REALSYM};
static const cr_rule_test k_t_rect = {.sample = cr__sample_sq,
                                      .env = (void *)(uintptr_t)CR__SQ_RECT};

cr_status cr__linalg_register_spectral(cr_registry *reg)
{
    static const cr_argspec a1[1] = {{CR__M_FARRAY, NULL}};
    static const struct {
        const cr_function *fn;
        cr_frule_fn frule;
        cr_rrule_fn rrule;
        const cr_rule_test *test;
        const cr_rule_form *form; /* the second-order form (forms_solve_spectral.c) */
    } k[] = {
        {&eigen_function, eigen_frule, eigen_rrule, &k_t_realsym, &cr__form_eigen},
        {&eigvals_function, eigvals_frule, eigvals_rrule, &k_t_herm, &cr__form_eigvals},
        {&svd_function, svd_frule, svd_rrule, &k_t_rect, &cr__form_svd},
        {&svdvals_function, svdvals_frule, svdvals_rrule, &k_t_rect, &cr__form_svdvals},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        cr_status st = cr__add_rule_so(reg, k[i].fn, a1, 1, false, k[i].frule, k[i].rrule,
                                       k[i].test, CR_NONLINEAR, k[i].form);
        if (st != CR_OK)
            return st;
    }
    static const cr_argspec fa[2] = {{CR_M_FUNC, NULL}, {CR__M_FARRAY, NULL}};
    return cr__add_rule_so(reg, &matfun_herm_function, fa, 2, false, matfun_herm_frule,
                           matfun_herm_rrule, &k_t_matfun, CR_NONLINEAR, &cr__form_matfun_herm);
}

#else /* !CR_HAVE_LAPACKE */

/* Without LAPACKE: the function values exist; calling them reports CR_EUNIMPL. */
CR__NO_LAPACK_FN(eigen, "eigen")
CR__NO_LAPACK_FN(eigvals, "eigvals")
CR__NO_LAPACK_FN(svd, "svd")
CR__NO_LAPACK_FN(svdvals, "svdvals")
CR__NO_LAPACK_FN(matfun_herm, "matfun_herm")

cr_status cr__linalg_register_spectral(cr_registry *reg)
{
    (void)reg;
    return CR_OK;
}

#endif /* CR_HAVE_LAPACKE */
