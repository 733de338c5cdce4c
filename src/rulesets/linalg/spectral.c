/*
 * Spectral rules of the linear-algebra family: eigen and eigvals of Hermitian matrices, svd
 * and svdvals, matfun_herm (a scalar function of a Hermitian matrix through its
 * eigendecomposition) and sincos_herm (sin and cos from one), with their second-order forms and
 * those of eigen_general and eigvals_general (factorizations.c has their rules). Compiled with
 * LAPACKE (CR_HAVE_LAPACKE); without it the function values exist, their primal gives CR_EUNIMPL
 * and no rule is registered. The decompositions themselves are in decompositions.c.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include <chainrules/rules_linalg.h>
#include <chainrules/rules_math.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>

/* ---- eigen, eigvals, svd and svdvals --------------------------------------------------------
 *
 * Both factor A = W diag(d) Zᴴ: eigen of the Hermitian matrix of A's upper triangle with
 * W = Z = V and d = λ (ascending), svd with W = U, Z = V and d = s (descending). Their rules
 * share the steps written once below: the values and the vectors as a tuple, the cotangent's
 * fields, the rotation P = Wᴴ Ȧ Z of a tangent into the factors' bases, the values' tangent
 * re diag(P), the gaps F_ij = 1/(d_j − d_i) (eigen) or 1/(d_j² − d_i²) (svd) and the
 * back-rotation W X Zᴴ of a cotangent; the kind gives the factorization, how Ȧ is read, the
 * vectors' tangents and the pullback.
 */

typedef struct spec_kind spec_kind;

/* eigen, eigvals, svd or svdvals: the kind and whether the vectors are returned. */
typedef struct spec_variant {
    const spec_kind *k;
    bool vectors;
    const char *name, *pb_name;
} spec_variant;

typedef struct spec_env {
    const spec_variant *v;
    const cr_array *A;
    cr_project *pA;
    cr__cmat W, Z;      /* m x k, n x k */
    const cr__cmat *Zr; /* the back-rotation's right factor: Z (op zop 'C') or svd's Vᴴ ('N') */
    char zop;
    double *d; /* the k values */
    size_t m, n, k;
    bool sq;      /* the gaps are those of d² (svd) */
    double scale; /* of cr__inv_gap */
    cr__svd f;    /* svd: the factorization */
    size_t *piv;  /* svd of a complex A: the row of each column of U made real positive */
} spec_env;

struct spec_kind {
    const char *layout; /* the tuple's fields: 'W', 'd' (the values) and 'Z' */
    cr_status (*forward)(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                         spec_env *e);
    /* The tangent of A as the factorization reads it (dA->p NULL when zero). */
    cr_status (*dx)(cr_arena *arena, const char *who, const cr_tangent *dargs, const cr_value *args,
                    const spec_env *e, cr__cmat *dA);
    /* The vectors' tangents from dA and P = Wᴴ dA Z (P may be overwritten). */
    cr_status (*dvec)(cr_arena *arena, const spec_env *e, const cr__cmat *dA, cr__cmat *P,
                      cr__cmat *dW, cr__cmat *dZ);
    cr_pullback_fn pullback;
};

/* F_ij = 1/(d_j − d_i), or 1/(d_j² − d_i²) when sq; 0 on the diagonal and between values equal
 * to working precision relative to scale (cr__inv_gap, spec_gap_scale). */
static double spec_gap(const double *d, size_t i, size_t j, bool sq, double scale)
{
    if (i == j)
        return 0.0;
    return sq ? cr__inv_gap(d[j] * d[j], d[i] * d[i], scale) : cr__inv_gap(d[j], d[i], scale);
}

/* The scale of spec_gap for k values d: max |d_i|, or d_0² for descending singular values. */
static double spec_gap_scale(const double *d, size_t k, bool sq)
{
    return sq ? (k > 0 ? d[0] * d[0] : 0.0) : cr__spectrum_scale(d, k);
}

/* M <- F ∘ M for the k x k matrix M (a zero diagonal). */
static void spec_gap_apply(const spec_env *e, cr__cmat *M)
{
    for (size_t j = 0; j < e->k; j++)
        for (size_t i = 0; i < e->k; i++)
            cr__cmat_set(M, i, j,
                         i == j ? 0.0
                                : cr__cmat_get(M, i, j) * spec_gap(e->d, i, j, e->sq, e->scale));
}

/* P = Wᴴ X Z: X (m x n) rotated into the factors' bases. */
static cr_status spec_rotate(cr_arena *arena, const spec_env *e, const cr__cmat *X, cr__cmat *P)
{
    cr__cmat T;
    cr_status st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->W, X, &T);
    return st != CR_OK ? st : cr__cmat_mul(arena, 'N', 'N', 1.0, &T, &e->Z, P);
}

/* out = W X Zᴴ: X (k x k) rotated back. */
static cr_status spec_back(cr_arena *arena, const spec_env *e, const cr__cmat *X, cr__cmat *out)
{
    cr__cmat T;
    cr_status st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e->W, X, &T);
    return st != CR_OK ? st : cr__cmat_mul(arena, 'N', e->zop, 1.0, &T, e->Zr, out);
}

/* S <- (S + Sᴴ) / 2 for a square S. */
static void herm_sym(cr__cmat *S)
{
    for (size_t j = 0; j < S->r; j++)
        for (size_t i = 0; i <= j; i++) {
            cr_complex h = 0.5 * (cr__cmat_get(S, i, j) + conj(cr__cmat_get(S, j, i)));
            cr__cmat_set(S, i, j, h);
            cr__cmat_set(S, j, i, conj(h));
        }
}

/* The k values v (f64) as an array of A's real dtype. */
static cr_status spec_values(cr_arena *arena, const spec_env *e, const double *v, cr_array **out)
{
    cr_dtype rdt = e->A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    cr_array *a;
    size_t k = e->k;
    cr_status st = cr__new(arena, CR_DT_F64, 1, &k, false, &a);
    if (st != CR_OK)
        return st;
    if (k > 0)
        memcpy(a->data, v, k * sizeof *v);
    return cr__cast(arena, a, rdt, out);
}

/* The tuple's fields in the kind's layout: the values' array d and the vectors W, Z as arrays
 * of A's dtype. */
static cr_status spec_fields(cr_arena *arena, const spec_env *e, const cr__cmat *W, cr_array *d,
                             const cr__cmat *Z, cr_array **o)
{
    const char *lay = e->v->k->layout;
    cr_status st = CR_OK;
    for (size_t i = 0; lay[i] != '\0' && st == CR_OK; i++) {
        o[i] = d;
        if (lay[i] != 'd')
            st = cr__cmat_out(arena, lay[i] == 'W' ? W : Z, false, (cr_dtype)e->A->dtype, &o[i]);
    }
    return st;
}

/* The factorization at args and the result y (the values, or the tuple). */
static cr_status spec_primal(cr_arena *arena, spec_env *e, const cr_value *args, size_t nargs,
                             cr_value *y)
{
    const spec_variant *v = e->v;
    cr_array *o[3], *d;
    cr_status st = v->k->forward(arena, v->name, args, nargs, e);
    if (st == CR_OK)
        st = spec_values(arena, e, e->d, &d);
    if (st != CR_OK)
        return st;
    e->scale = spec_gap_scale(e->d, e->k, e->sq);
    if (!v->vectors) {
        *y = cr_value_array(d);
        return CR_OK;
    }
    st = spec_fields(arena, e, &e->W, d, &e->Z, o);
    return st != CR_OK
               ? st
               : cr__tuple_value(arena, strlen(v->k->layout), (const cr_array *const *)o, y);
}

/* The cotangent's fields W̄, d̄ (k x 1, real) and Z̄ as work matrices (p NULL when zero or not
 * in the layout); eigvals' and svdvals' cotangent is d̄ alone. When all are zero (or on a
 * failure) dx[1] = ZeroTangent and *zero. */
static cr_status spec_cotangent(cr_arena *arena, const spec_env *e, const cr_tangent *dy,
                                cr_tangent *dx, cr__cmat *Wb, cr__cmat *db, cr__cmat *Zb,
                                bool *zero)
{
    const char *lay = e->v->k->layout;
    size_t nf = strlen(lay), only = 0;
    cr__field_spec spec[3];
    cr__cmat out[3];
    for (size_t i = 0; i < nf; i++) {
        bool vals = lay[i] == 'd';
        spec[i] = (cr__field_spec){vals ? 1 : 2,
                                   {vals            ? e->k
                                    : lay[i] == 'W' ? e->m
                                                    : e->n,
                                    vals ? 1 : e->k},
                                   !vals && e->W.cplx};
        only = vals ? i : only;
    }
    cr_status st = cr__tuple_cmats(arena, e->v->pb_name, *dy, nf, e->v->vectors ? CR__TUPLE : only,
                                   spec, out, zero);
    if (st != CR_OK || *zero) {
        dx[1] = cr_tangent_zero();
        *zero = true;
        return st;
    }
    Wb->p = NULL;
    for (size_t i = 0; i < nf; i++) {
        cr__cmat *dst = lay[i] == 'W' ? Wb : lay[i] == 'd' ? db : Zb;
        *dst = out[i];
    }
    return CR_OK;
}

static cr_status spec_rrule(cr_arena *arena, const spec_variant *v, const cr_value *args,
                            size_t nargs, cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__LA_ENV(arena, spec_env, e);
    e->v = v;
    cr_status st = spec_primal(arena, e, args, nargs, y);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail1(arena, &args[0], udata, &e->pA, pb,
                           (cr_pullback){v->k->pullback, e, v->pb_name, nargs + 1});
}

/* frule: P = Wᴴ Ȧ Z, ḋ = re diag(P), the vectors' tangents from the kind. */
static cr_status spec_frule(cr_arena *arena, const spec_variant *v, const cr_tangent *dargs,
                            const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    spec_env e;
    memset(&e, 0, sizeof e);
    e.v = v;
    cr__cmat dA, P, dd, dW = {.p = NULL}, dZ;
    cr_status st = spec_primal(arena, &e, args, nargs, y);
    if (st != CR_OK)
        return st;
    st = v->k->dx(arena, v->name, dargs, args, &e, &dA);
    if (st != CR_OK || dA.p == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    st = spec_rotate(arena, &e, &dA, &P);
    if (st == CR_OK)
        st = cr__cmat_new(arena, false, e.k, 1, false, &dd);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < e.k; i++)
        cr__cmat_set(&dd, i, 0, creal(cr__cmat_get(&P, i, i)));
    cr_dtype rdt = e.A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    cr_array *ddo, *o[3];
    if ((st = cr__cmat_out(arena, &dd, true, rdt, &ddo)) != CR_OK)
        return st;
    if (!v->vectors) {
        *dy = cr_tangent_array(ddo);
        return CR_OK;
    }
    st = v->k->dvec(arena, &e, &dA, &P, &dW, &dZ);
    if (st == CR_OK)
        st = spec_fields(arena, &e, &dW, ddo, &dZ, o);
    if (st != CR_OK)
        return st;
    cr_tangent f[3];
    size_t nf = strlen(v->k->layout);
    for (size_t i = 0; i < nf; i++)
        f[i] = cr_tangent_array(o[i]);
    return cr_tangent_struct(arena, nf == 2 ? &cr__k_tup2 : &cr__k_tup3, NULL, f, nf, dy);
}

/* ---- eigen and eigvals of Hermitian matrices ---------------------------------------------- */

static cr_status eig_forward(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                             spec_env *e)
{
    bool cplx;
    cr_status st = cr__square_arg1(arena, who, args, nargs, &e->A, &cplx);
    if (st == CR_OK)
        st = cr__herm_upper(arena, e->A, cplx, &e->W);
    if (st == CR_OK)
        st = cr__eigh(arena, who, &e->W, &e->d);
    e->Z = e->W;
    e->Zr = &e->Z;
    e->zop = 'C';
    e->m = e->n = e->k = e->W.r;
    return st;
}

/* Ḣ, the Hermitian matrix of Ȧ's upper triangle. */
static cr_status eig_dx(cr_arena *arena, const char *who, const cr_tangent *dargs,
                        const cr_value *args, const spec_env *e, cr__cmat *dA)
{
    const cr_array *t;
    cr_status st = cr__dx_array(arena, who, dargs, args, 0, e->W.cplx ? CR_DT_C128 : CR_DT_F64, &t);
    dA->p = NULL;
    return st != CR_OK || t == NULL ? st : cr__herm_upper(arena, t, e->W.cplx, dA);
}

/* V̇ = V (F ∘ P). */
static cr_status eig_dvec(cr_arena *arena, const spec_env *e, const cr__cmat *dA, cr__cmat *P,
                          cr__cmat *dW, cr__cmat *dZ)
{
    (void)dA;
    (void)dW;
    spec_gap_apply(e, P);
    return cr__cmat_mul(arena, 'N', 'N', 1.0, &e->W, P, dZ);
}

/* S = V (diag(λ̄) + F ∘ (Vᴴ V̄)) Vᴴ, Hermitised; F_ij = 1/(λ_j - λ_i), 0 on the diagonal
 * and between equal eigenvalues. */
static cr_status eig_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    spec_env *e = cr__pb_start(dx, nx, false, env);
    size_t n = e->k;
    cr__cmat Wb, L, Vb, K, S;
    bool zero;
    cr_status st = spec_cotangent(arena, e, dy, dx, &Wb, &L, &Vb, &zero);
    if (st != CR_OK || zero)
        return st;
    if (Vb.p != NULL) {
        st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->W, &Vb, &K);
        if (st == CR_OK)
            spec_gap_apply(e, &K);
    } else {
        st = cr__cmat_new(arena, e->W.cplx, n, n, true, &K);
    }
    for (size_t i = 0; i < n && L.p != NULL && st == CR_OK; i++)
        cr__cmat_set(&K, i, i, creal(cr__cmat_get(&L, i, 0)));
    if (st == CR_OK)
        st = spec_back(arena, e, &K, &S);
    if (st != CR_OK)
        return st;
    herm_sym(&S);
    return cr__herm_give(arena, e->A, e->pA, &S, &dx[1]);
}

/* ---- svd and svdvals ------------------------------------------------------------------- */

/* The gauge of a complex SVD: each pair (u_k, v_k) is multiplied by the phase that makes
 * the largest-magnitude entry of u_k (the first of equal ones) real positive; u_k v_kᴴ is
 * unchanged. Records that entry's row in e->piv. Locally (while the largest entry stays
 * the largest) this is a smooth choice, so U and V are differentiable functions of A. */
static cr_status svd_gauge(cr_arena *arena, spec_env *e)
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
                             spec_env *e)
{
    const cr_array *A;
    cr_status st = cr__array_arg1(arena, who, args, nargs, &A);
    if (st != CR_OK)
        return st;
    if (A->ndim != 2 || !cr_dtype_is_float((cr_dtype)A->dtype) ||
        !cr__lapack_size_ok(A->shape[0] * A->shape[1]))
        return CR__FAIL(arena, CR_ESHAPE, "%s: expected a float matrix", who);
    cr__cmat Am;
    e->A = A;
    st = cr__cmat_from(arena, A, A->dtype == CR_DT_C128, &Am);
    if (st == CR_OK)
        st = cr__svd_of(arena, who, &Am, &e->f);
    if (st == CR_OK && A->dtype == CR_DT_C128)
        st = svd_gauge(arena, e);
    if (st == CR_OK)
        st = cr__cmat_adj(arena, &e->f.Vt, &e->Z);
    e->W = e->f.U;
    e->Zr = &e->f.Vt;
    e->zop = 'N';
    e->d = e->f.s;
    e->m = e->f.m;
    e->n = e->f.n;
    e->k = e->f.k;
    e->sq = true;
    return st;
}

static cr_status svd_dx(cr_arena *arena, const char *who, const cr_tangent *dargs,
                        const cr_value *args, const spec_env *e, cr__cmat *dA)
{
    cr_tangent dy;
    return cr__frule_dx0(arena, who, dargs, args, e->W.cplx, dA, &dy);
}

/* Q <- (I - X Xᴴ) Q Σ⁻¹ for X (r x k) of orthonormal columns and Q (r x k): the part of
 * Q Σ⁻¹ outside X's columns, 1/s = 0 for a zero s (cr__inv_sval). */
static cr_status svd_perp(cr_arena *arena, const spec_env *e, const cr__cmat *X, cr__cmat *Q)
{
    double smax = e->k > 0 ? e->d[0] : 0;
    cr__cmat W;
    for (size_t j = 0; j < e->k; j++)
        for (size_t i = 0; i < Q->r; i++)
            cr__cmat_set(Q, i, j, cr__cmat_get(Q, i, j) * cr__inv_sval(e->d[j], smax));
    cr_status st = cr__cmat_mul(arena, 'C', 'N', 1.0, X, Q, &W);
    if (st == CR_OK)
        cr__cmat_gemm('N', 'N', -1.0, X, &W, 1.0, Q);
    return st;
}

/* out += Y for out, Y of the same shape. */
static void cmat_add(cr__cmat *out, const cr__cmat *Y)
{
    for (size_t j = 0; j < out->c; j++)
        for (size_t i = 0; i < out->r; i++)
            cr__cmat_set(out, i, j, cr__cmat_get(out, i, j) + cr__cmat_get(Y, i, j));
}

/* U̇ = U (F ∘ (dP S + S dPᴴ)) + (I - UUᴴ) Ȧ V S⁻¹,
 * V̇ = V (F ∘ (S dP + dPᴴ S) - i diag(im dP / s)) + (I - VVᴴ) Ȧᴴ U S⁻¹,
 * then for complex A the gauge's turn i w_k of both k-th vectors (svd_gauge). */
static cr_status svd_dvec(cr_arena *arena, const spec_env *e, const cr__cmat *dA, cr__cmat *dP,
                          cr__cmat *dU, cr__cmat *dV)
{
    const double *s = e->d;
    size_t m = e->m, n = e->n, k = e->k;
    bool cplx = e->W.cplx;
    double smax = k > 0 ? s[0] : 0;
    cr__cmat Cu, Cv, Q;
    cr_status st = cr__cmat_new(arena, cplx, k, k, false, &Cu);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, k, k, false, &Cv);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < k; i++) {
            double F = spec_gap(s, i, j, true, e->scale);
            cr_complex pij = cr__cmat_get(dP, i, j), pji = conj(cr__cmat_get(dP, j, i));
            cr__cmat_set(&Cu, i, j, F * (pij * s[j] + s[i] * pji));
            cr__cmat_set(&Cv, i, j, F * (s[i] * pij + pji * s[j]));
        }
    /* Complex: Uᴴ U̇ has a zero diagonal before the gauge fix, Vᴴ V̇ then has
     * -i Im(dP_ii) / s_i (so that the diagonal of Uᴴ Ȧ V comes out right). */
    for (size_t i = 0; i < k && cplx; i++)
        cr__cmat_set(&Cv, i, i,
                     cr__c(0, -cimag(cr__cmat_get(dP, i, i)) * cr__inv_sval(s[i], smax)));
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e->W, &Cu, dU);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e->Z, &Cv, dV);
    if (st == CR_OK && m > k && (st = cr__cmat_mul(arena, 'N', 'N', 1.0, dA, &e->Z, &Q)) == CR_OK &&
        (st = svd_perp(arena, e, &e->W, &Q)) == CR_OK)
        cmat_add(dU, &Q);
    if (st == CR_OK && n > k && (st = cr__cmat_mul(arena, 'C', 'N', 1.0, dA, &e->W, &Q)) == CR_OK &&
        (st = svd_perp(arena, e, &e->Z, &Q)) == CR_OK)
        cmat_add(dV, &Q);
    for (size_t j = 0; j < k && cplx && st == CR_OK; j++) {
        /* The gauge keeps U[r_j, j] real: both vectors turn by i w_j. */
        size_t r = e->piv[j];
        double w = -cimag(cr__cmat_get(dU, r, j)) / creal(cr__cmat_get(&e->W, r, j));
        for (size_t i = 0; i < m; i++)
            cr__cmat_set(dU, i, j,
                         cr__cmat_get(dU, i, j) + cr__c(0, w) * cr__cmat_get(&e->W, i, j));
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(dV, i, j,
                         cr__cmat_get(dV, i, j) + cr__c(0, w) * cr__cmat_get(&e->Z, i, j));
    }
    return st;
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
    spec_env *e = cr__pb_start(dx, nx, false, env);
    const double *s = e->d;
    size_t m = e->m, n = e->n, k = e->k;
    bool cplx = e->W.cplx, zero;
    cr__cmat Ub, Sb, Vb;
    cr_status st = spec_cotangent(arena, e, dy, dx, &Ub, &Sb, &Vb, &zero);
    if (st != CR_OK || zero)
        return st;
    double smax = k > 0 ? s[0] : 0;
    if (cplx && e->v->vectors) {
        /* The gauge's share (svd_gauge): with c_k = u_kᴴ ū_k + v_kᴴ v̄_k, a loss that depends
         * on the phases (Im c_k != 0) sees u_k's pivot entry move: Ū[r_k, k] -= i Im c_k /
         * U[r_k, k]. Phase-invariant losses have Im c_k = 0 and skip this. */
        for (size_t j = 0; j < k; j++) {
            cr_complex c = 0;
            for (size_t i = 0; i < m && Ub.p != NULL; i++)
                c += conj(cr__cmat_get(&e->W, i, j)) * cr__cmat_get(&Ub, i, j);
            for (size_t i = 0; i < n && Vb.p != NULL; i++)
                c += conj(cr__cmat_get(&e->Z, i, j)) * cr__cmat_get(&Vb, i, j);
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
                             cr__c(0, cimag(c) / creal(cr__cmat_get(&e->W, r, j))));
        }
    }
    /* inner = Jf S + diag(s̄) + S Kf (k x k) */
    cr__cmat inner, Abar, J, Q;
    st = cr__cmat_new(arena, cplx, k, k, true, &inner);
    if (st != CR_OK)
        return st;
    for (int w = 0; w < 2; w++) {
        const cr__cmat *Xb = w == 0 ? &Ub : &Vb;
        const cr__cmat *X = w == 0 ? &e->W : &e->Z;
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
                                                      cr__inv_sval(s[i], smax)));
                    continue;
                }
                double F = spec_gap(s, i, j, true, e->scale);
                cr_complex a = F * (cr__cmat_get(&J, i, j) - conj(cr__cmat_get(&J, j, i)));
                /* U-term: (F∘(UᵀŪ - ŪᵀU)) S scales column j by s_j; V-term: S (F∘...) scales
                 * row i by s_i. */
                cr_complex add = w == 0 ? a * s[j] : a * s[i];
                cr__cmat_set(&inner, i, j, cr__cmat_get(&inner, i, j) + add);
            }
    }
    for (size_t i = 0; i < k && Sb.p != NULL; i++)
        cr__cmat_set(&inner, i, i, cr__cmat_get(&inner, i, i) + cr__cmat_get(&Sb, i, 0));
    st = spec_back(arena, e, &inner, &Abar);
    /* (I - UUᵀ) Ū S⁻¹ Vᵀ, and U S⁻¹ V̄ᵀ (I - VVᵀ) = U ((I - VVᵀ) V̄ S⁻¹)ᵀ */
    if (st == CR_OK && Ub.p != NULL && m > k && (st = cr__cmat_copy(arena, &Ub, &Q)) == CR_OK &&
        (st = svd_perp(arena, e, &e->W, &Q)) == CR_OK)
        cr__cmat_gemm('N', 'N', 1.0, &Q, &e->f.Vt, 1.0, &Abar);
    if (st == CR_OK && Vb.p != NULL && n > k && (st = cr__cmat_copy(arena, &Vb, &Q)) == CR_OK &&
        (st = svd_perp(arena, e, &e->Z, &Q)) == CR_OK)
        cr__cmat_gemm('N', 'C', 1.0, &e->W, &Q, 1.0, &Abar);
    return st != CR_OK ? st : cr__cmat_give(arena, e->pA, &Abar, false, &dx[1]);
}

static const spec_kind k_eig = {"dZ", eig_forward, eig_dx, eig_dvec, eig_pullback};
static const spec_kind k_svd = {"WdZ", svd_forward, svd_dx, svd_dvec, svd_pullback};
static const spec_variant k_eigen = {&k_eig, true, "eigen", "eigen_pullback"};
static const spec_variant k_eigvals = {&k_eig, false, "eigvals", "eigvals_pullback"};
static const spec_variant k_svd_v = {&k_svd, true, "svd", "svd_pullback"};
static const spec_variant k_svdvals = {&k_svd, false, "svdvals", "svdvals_pullback"};

CR__PARAM_RULES(eigen, spec_rrule, spec_frule, &k_eigen, 1)
CR__PARAM_RULES(eigvals, spec_rrule, spec_frule, &k_eigvals, 1)
CR__PARAM_RULES(svd, spec_rrule, spec_frule, &k_svd_v, 1)
CR__PARAM_RULES(svdvals, spec_rrule, spec_frule, &k_svdvals, 1)

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
    cr__cmat F[2]; /* the divided differences (real, n x n) of f, or of sin and cos */
    bool pair;     /* sincos_herm: two outputs */
} mf_env;

/* The eigendecomposition of the Hermitian matrix of argument i's upper triangle. */
static cr_status mf_eig(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                        size_t i, mf_env *e)
{
    bool cplx = false;
    cr_status st = cr__square_arg(arena, who, args, nargs, i, &e->A, &cplx);
    if (st == CR_OK)
        st = cr__herm_upper(arena, e->A, cplx, &e->V);
    return st != CR_OK ? st : cr__eigh(arena, who, &e->V, &e->w);
}

/* Y = V diag(f(λ)) Vᴴ and F, the divided differences of f, from e's eigendecomposition. */
static cr_status mf_apply(cr_arena *arena, const char *who, const cr_scalar_rule *row, mf_env *e,
                          cr__cmat *F, cr__cmat *Y)
{
    size_t n = e->V.r;
    double *fv = cr__arena_array(arena, who, n, sizeof *fv, _Alignof(double));
    double *dv = cr__arena_array(arena, who, n, sizeof *dv, _Alignof(double));
    cr_status st = fv == NULL || dv == NULL ? CR__ALLOC_STATUS(arena) : CR_OK;
    if (st == CR_OK)
        st = cr__cmat_new(arena, false, n, n, false, F);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        row->f64(&e->w[i], &fv[i], &dv[i]);
        if (!isfinite(fv[i]))
            return CR__FAIL(arena, CR_EDOMAIN, "%s: %s is not finite at the eigenvalue %g", who,
                            row->name, e->w[i]);
    }
    double tol = cr__matfun_tol(e->w, n);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(F, i, j,
                         i == j ? dv[i] : cr__divdiff1(row, e->w[i], e->w[j], fv[i], fv[j], tol));
    cr__cmat T;
    st = cr__cmat_copy(arena, &e->V, &T);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&T, i, j, cr__cmat_get(&T, i, j) * fv[j]);
    return cr__cmat_mul(arena, 'N', 'C', 1.0, &T, &e->V, Y);
}

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
    st = mf_eig(arena, "matfun_herm", args, nargs, 1, e);
    return st != CR_OK ? st : mf_apply(arena, "matfun_herm", row, e, &e->F[0], Y);
}

/* sincos_herm(A) = (sin A, cos A) from one eigendecomposition (ChainRules' sincos of a
 * Symmetric/Hermitian matrix). */
static cr_status sincos_forward(cr_arena *arena, const cr_value *args, size_t nargs, mf_env *e,
                                cr__cmat *Y)
{
    const cr_scalar_rule *rows[2] = {cr_scalar_rule_of(cr_fn_sin.u.func.fn),
                                     cr_scalar_rule_of(cr_fn_cos.u.func.fn)};
    e->pair = true;
    cr_status st = cr__nargs(arena, "sincos_herm", nargs, 1, 1);
    if (st == CR_OK)
        st = mf_eig(arena, "sincos_herm", args, nargs, 0, e);
    for (size_t k = 0; k < 2 && st == CR_OK; k++)
        st = mf_apply(arena, "sincos_herm", rows[k], e, &e->F[k], &Y[k]);
    return st;
}

/* f(A) tagged Symmetric/Hermitian, or the tuple (sin A, cos A). */
static cr_status matfun_output(cr_arena *arena, const mf_env *e, const cr__cmat *Y, cr_value *y)
{
    cr_array *o[2];
    for (size_t k = 0; k < (e->pair ? 2u : 1u); k++) {
        cr_status st = cr__cmat_out(arena, &Y[k], false, (cr_dtype)e->A->dtype, &o[k]);
        if (st != CR_OK)
            return st;
        o[k]->structure =
            (uint8_t)(e->A->dtype == CR_DT_C128 ? CR_MAT_HERMITIAN : CR_MAT_SYMMETRIC);
    }
    if (!e->pair) {
        *y = cr_value_array(o[0]);
        return CR_OK;
    }
    return cr__tuple_value(arena, 2, (const cr_array *const *)o, y);
}

/* out (+)= V (F ∘ (Vᴴ X V)) Vᴴ, Hermitised (added to out when add). */
static cr_status dk_apply(cr_arena *arena, const mf_env *e, const cr__cmat *F, const cr__cmat *X,
                          bool add, cr__cmat *out)
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
            cr__cmat_set(&G, i, j, cr__cmat_get(&G, i, j) * cr__cmat_get(F, i, j));
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &e->V, &G, &R);
    if (st != CR_OK)
        return st;
    if (add)
        cr__cmat_gemm('N', 'C', 1.0, &R, &e->V, 1.0, out);
    else if ((st = cr__cmat_mul(arena, 'N', 'C', 1.0, &R, &e->V, out)) != CR_OK)
        return st;
    herm_sym(out);
    return CR_OK;
}

/* Ā from the cotangent of f(A), or the sum over the fields of (sin A, cos A). */
static cr_status matfun_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    mf_env *e = env;
    const char *who = e->pair ? "sincos_herm_pullback" : "matfun_herm_pullback";
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    size_t n = e->V.r, shape[2] = {n, n}, ia = nx - 1;
    cr__cmat S = {.p = NULL};
    cr_status st = CR_OK;
    for (size_t k = 0; k < (e->pair ? 2u : 1u) && st == CR_OK; k++) {
        cr_tangent t = *dy;
        cr__cmat G;
        if (e->pair)
            st = cr__tuple_field(arena, who, *dy, k, &t);
        if (st == CR_OK)
            st = cr__cmat_tan(arena, who, t, 2, shape, e->V.cplx, &G);
        if (st == CR_OK && G.p != NULL)
            st = dk_apply(arena, e, &e->F[k], &G, S.p != NULL, &S);
    }
    if (st != CR_OK)
        return st;
    if (S.p == NULL) {
        dx[ia] = cr_tangent_zero();
        return CR_OK;
    }
    return cr__herm_give(arena, e->A, e->pA, &S, &dx[ia]);
}

/* matfun_herm(f, A) = f(A) and sincos_herm(A) = (sin A, cos A) for Hermitian A. */
static cr_status mf_rrule(cr_arena *arena, bool pair, const cr_value *args, size_t nargs,
                          cr_value *y, cr_pullback *pb, const void *udata)
{
    CR__LA_ENV(arena, mf_env, e);
    cr__cmat Y[2];
    cr_status st =
        pair ? sincos_forward(arena, args, nargs, e, Y) : matfun_forward(arena, args, nargs, e, Y);
    if (st == CR_OK)
        st = matfun_output(arena, e, Y, y);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail1(arena, &args[nargs - 1], udata, &e->pA, pb,
                           (cr_pullback){matfun_pullback, e,
                                         pair ? "sincos_herm_pullback" : "matfun_herm_pullback",
                                         nargs + 1});
}

/* frule: Ẏ = V (F ∘ (Vᴴ Ḣ V)) Vᴴ for each output. */
static cr_status mf_frule(cr_arena *arena, bool pair, const cr_tangent *dargs, const cr_value *args,
                          size_t nargs, cr_value *y, cr_tangent *dy)
{
    const char *who = pair ? "sincos_herm" : "matfun_herm";
    mf_env e;
    memset(&e, 0, sizeof e);
    cr__cmat Y[2], dH, R;
    cr_status st = pair ? sincos_forward(arena, args, nargs, &e, Y)
                        : matfun_forward(arena, args, nargs, &e, Y);
    if (st == CR_OK)
        st = matfun_output(arena, &e, Y, y);
    const cr_array *t = NULL;
    if (st == CR_OK)
        st =
            cr__dx_array(arena, who, dargs, args, nargs - 1, e.V.cplx ? CR_DT_C128 : CR_DT_F64, &t);
    if (st != CR_OK || t == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    st = cr__herm_upper(arena, t, e.V.cplx, &dH);
    cr_tangent d[2];
    for (size_t k = 0; k < (pair ? 2u : 1u) && st == CR_OK; k++) {
        cr_array *r = NULL;
        st = dk_apply(arena, &e, &e.F[k], &dH, false, &R);
        if (st == CR_OK)
            st = cr__cmat_to_array(arena, &R, false, &r);
        if (st == CR_OK)
            d[k] = cr_tangent_array(r);
    }
    if (st != CR_OK)
        return st;
    if (!pair)
        return cr_project_tangent(arena, y, d[0], dy);
    const cr__tup2 *o = y->u.obj.ptr; /* each field projected onto its output */
    cr_value yk[2] = {cr_value_array((cr_array *)&o->a), cr_value_array((cr_array *)&o->b)};
    for (size_t k = 0; k < 2 && st == CR_OK; k++)
        st = cr_project_tangent(arena, &yk[k], d[k], &d[k]);
    return st != CR_OK ? st : cr_tangent_struct(arena, &cr__k_tup2, NULL, d, 2, dy);
}

CR__PARAM_RULES(matfun_herm, mf_rrule, mf_frule, false, 2)
CR__PARAM_RULES(sincos_herm, mf_rrule, mf_frule, true, 1)

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
/* sincos_herm: a Hermitian matrix with separated eigenvalues, halved (eigenvalues within
 * about 5, where the central differences of sin and cos keep 1e-9). */
static cr_status sample_sincos(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                               void *env)
{
    (void)nargs;
    (void)env;
    cr_array *A;
    cr_status st = cr__rand_square(arena, rng, CR__SQ_HERM, &A);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < cr_array_numel(A); i++)
        cr__store(A, (ptrdiff_t)i, 0.5 * cr__load(A, (ptrdiff_t)i));
    args[0] = cr_value_array(A);
    return CR_OK;
}

static const cr_rule_test k_t_sincos = {.sample = sample_sincos};
static const cr_rule_test k_t_realsym = {.sample = cr__sample_sq,
                                         .env = (void *)(uintptr_t)CR__SQ_REALSYM};
static const cr_rule_test k_t_rect = {.sample = cr__sample_sq,
                                      .env = (void *)(uintptr_t)CR__SQ_RECT};

cr_status cr__linalg_register_spectral(cr_registry *reg)
{
    static const cr__linalg_rule k[] = {
        {&eigen_function, cr__linalg_fa, 1, eigen_frule, eigen_rrule, &k_t_realsym,
         &cr__form_eigen},
        {&eigvals_function, cr__linalg_fa, 1, eigvals_frule, eigvals_rrule, &k_t_herm,
         &cr__form_eigvals},
        {&svd_function, cr__linalg_fa, 1, svd_frule, svd_rrule, &k_t_rect, &cr__form_svd},
        {&svdvals_function, cr__linalg_fa, 1, svdvals_frule, svdvals_rrule, &k_t_rect,
         &cr__form_svdvals},
        {&sincos_herm_function, cr__linalg_fa, 1, sincos_herm_frule, sincos_herm_rrule, &k_t_sincos,
         NULL},
    };
    static const cr_argspec fa[2] = {{CR_M_FUNC, NULL}, {CR__M_FARRAY, NULL}};
    static const cr__linalg_rule m = {
        &matfun_herm_function, fa, 2, matfun_herm_frule, matfun_herm_rrule, &k_t_matfun,
        &cr__form_matfun_herm};
    cr_status st = cr__linalg_add_rules(reg, k, sizeof k / sizeof k[0]);
    return st != CR_OK ? st : cr__linalg_add_rules(reg, &m, 1);
}

#else /* !CR_HAVE_LAPACKE */

/* Without LAPACKE: the function values exist; calling them reports CR_EUNIMPL. */
CR__NO_LAPACK_FN(eigen, "eigen")
CR__NO_LAPACK_FN(eigvals, "eigvals")
CR__NO_LAPACK_FN(svd, "svd")
CR__NO_LAPACK_FN(svdvals, "svdvals")
CR__NO_LAPACK_FN(matfun_herm, "matfun_herm")
CR__NO_LAPACK_FN(sincos_herm, "sincos_herm")

CR__NO_LAPACK_REGISTER(spectral)

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

/* ---- svdvals, opnorm(A, 2), eigvals -----------------------------------------------------------
 */

/* A spectral function's state: the factorization fact whose factors W, Z are elements wi and
 * zi of its tuple, the cotangent's coefficients c (nc of them), and whether to fold. */
typedef struct spectral_state {
    cr__form F; /* F.fact: the factorization */
    size_t wi, zi, nc;
    const double *c;
    bool fold;
} spectral_state;

/*
 * A spectral function's pullback Ā = W diag(c) Zᵀ, with W, Z the factors of A's
 * factorization fact (element wi and zi of its tuple) and c the cotangent's coefficients
 * (nc of them): svdvals, W = U, Z = V, c = s̄; opnorm(A, 2), the same with c = (ȳ, 0, ...);
 * eigvals of a symmetric A, W = Z = V (the eigenvectors), c = λ̄. Along Ȧ, c fixed (it is the
 * cotangent), its derivative is
 *     S = Ẇ diag(c) Zᵀ + W diag(c) Żᵀ,
 * Ẇ and Ż the factors' tangents from the factorization's frule at A along Ȧ. A sign (or
 * basis) chosen differently by the two factorizations cancels in each product. Where two
 * singular values (eigenvalues) coincide, the frule's tangents follow its convention for
 * them (docs/rules-linalg.md), and the function has no second derivative there in general.
 * fold: A is a matrix of which the rule reads the upper triangle (eigvals of a dense,
 * Diagonal or triangular A: the symmetric matrix of its logical matrix's upper triangle), so
 * its cotangent lives there, S_ij + S_ji above the diagonal, as the rule gives it (the engine
 * then projects it onto A's structure).
 */
static cr_status spectral_step(const void *state, const cr__form_along *d, double *sd)
{
    const spectral_state *z = state;
    const cr__form *F = &z->F;
    size_t m = F->x->shape[0], n = F->x->shape[1], nc = z->nc;
    const double *c = z->c;
    const cr_array *W, *Z, *Wd = NULL, *Zd = NULL;
    cr_status st;
    if ((st = cr__form_factor_of(F, d->y, z->wi, 2, &W)) != CR_OK ||
        (st = cr__form_factor_of(F, d->y, z->zi, 2, &Z)) != CR_OK)
        return st;
    if (W->shape[0] != m || Z->shape[0] != n || W->shape[1] < nc || Z->shape[1] < nc)
        return CR_EINVAL;
    if ((st = cr__tan_array(F->arena, F->who, cr_tangent_field(d->dy, z->wi), 2, W->shape,
                            CR_DT_F64, &Wd)) != CR_OK ||
        (st = cr__tan_array(F->arena, F->who, cr_tangent_field(d->dy, z->zi), 2, Z->shape,
                            CR_DT_F64, &Zd)) != CR_OK)
        return st;
    const double *w = W->data, *zz = Z->data;
    const double *wd = Wd != NULL ? Wd->data : NULL, *zd = Zd != NULL ? Zd->data : NULL;
    size_t rw = W->shape[1], rz = Z->shape[1];
    for (size_t a = 0; a < m; a++)
        for (size_t b = 0; b < n; b++) {
            double acc = 0.0;
            for (size_t i = 0; i < nc; i++) {
                double t = 0.0;
                if (wd != NULL)
                    t += wd[a * rw + i] * zz[b * rz + i];
                if (zd != NULL)
                    t += w[a * rw + i] * zd[b * rz + i];
                acc += c[i] * t;
            }
            sd[a * n + b] = acc;
        }
    if (z->fold)
        cr__form_fold_upper(sd, n);
    return CR_OK;
}

/* svdvals(A) or eigvals(A) (fact: svd or eigen) with an array cotangent ȳ = c. */
static cr_status spectral_values_init(const cr_form_point *p, void **state, const cr_value *fact,
                                      size_t wi, size_t zi)
{
    CR__LA_FORM_STATE(p, state, spectral_state, 0, z);
    if (z->F.x->ndim != 2)
        return CR_NOTHING;
    const cr_array *yv = p->y->u.arr, *Yb;
    if ((st = cr__tan_array(p->arena, p->name, p->ybar, yv->ndim, yv->shape, CR_DT_F64, &Yb)) !=
        CR_OK)
        return st;
    if (Yb == NULL)
        return CR_NOTHING;
    const cr_array *A = p->args[0].u.arr;
    z->F.fact = fact;
    z->F.step = spectral_step;
    z->wi = wi;
    z->zi = zi;
    z->c = Yb->data;
    z->nc = cr_array_numel(Yb);
    z->fold = fact == &cr_fn_eigen && A->structure != CR_MAT_SYMMETRIC &&
              A->structure != CR_MAT_HERMITIAN;
    return CR_OK;
}

/* svdvals(A) = s: Ā = U diag(s̄) Vᵀ, S from svd's frule (U, V: elements 0 and 2). */
static cr_status svdvals_init(const cr_form_point *p, void **state)
{
    return spectral_values_init(p, state, &cr_fn_svd, 0, 2);
}

/* eigvals(A) of a symmetric A = λ: Ā = V diag(λ̄) Vᵀ, S from eigen's frule (V: element 1). */
static cr_status eigvals_init(const cr_form_point *p, void **state)
{
    return spectral_values_init(p, state, &cr_fn_eigen, 1, 1);
}

/* opnorm(A[, p]): for p = 2, Ā = ȳ u₁ v₁ᵀ, S from svd's frule with c = (ȳ); for p = 1 and
 * Inf, the cotangent ȳ sgn(a) on the largest column (row) does not depend on A as long as
 * that column (row) stays the largest and the signs hold: S = 0, as for maximum. */
static cr_status opnorm_init(const cr_form_point *p, void **state)
{
    if (p->nargs > 1) {
        const cr_value *pv = &p->args[1];
        double v = pv->kind == CR_KIND_F64   ? pv->u.f64
                   : pv->kind == CR_KIND_I64 ? (double)pv->u.i64
                                             : 2.0;
        if (v != 2.0)
            return CR_NOTHING;
    }
    cr_status st = cr__form_state(p, sizeof(spectral_state), 0, NULL, state);
    spectral_state *z = *state;
    if (st == CR_OK)
        st = cr__form_ybar_slices(&z->F, &z->c);
    if (st != CR_OK)
        return st;
    if (z->F.x->ndim != 2)
        return CR_NOTHING;
    z->F.fact = &cr_fn_svd;
    z->F.step = spectral_step;
    z->wi = 0;
    z->zi = 2;
    z->nc = 1;
    z->fold = false;
    return CR_OK;
}

const cr_rule_form cr__form_svdvals = {cr__form_check_matrix, svdvals_init, cr__form_frule_dir};
const cr_rule_form cr__form_eigvals = {cr__form_check_matrix, eigvals_init, cr__form_frule_dir};
const cr_rule_form cr__form_opnorm = {cr__form_check_matrix, opnorm_init, cr__form_frule_dir};

/* ---- eigen (a tuple result) -------------------------------------------------------------------
 */

/* The r x r matrix Fm_ab = spec_gap(d, a, b) of the rules (eigen's gaps of d, svd's of d²). */
static void gap_matrix(const double *d, size_t r, bool sq, double *Fm)
{
    double scale = spec_gap_scale(d, r, sq);
    for (size_t a = 0; a < r; a++)
        for (size_t b = 0; b < r; b++)
            Fm[a * r + b] = spec_gap(d, a, b, sq, scale);
}

/* C = op(X) op(Y) of n x n row-major matrices, op transposing when tx (ty). */
static void mul_nn(size_t n, const double *X, bool tx, const double *Y, bool ty, double *C)
{
    cr__mat a = {X, n, n, n, tx}, b = {Y, n, n, n, ty};
    cr__gemm(CR_DT_F64, &a, &b, 1.0, 0.0, C, n);
}

typedef struct eigen_state {
    cr__form F;
    size_t n;
    bool fold;
    const double *lam, *v;
    const cr_array *Vb;
    double *K, *B, *Fm, *Bd, *Kd, *T, *Sd;
} eigen_state;

/* eigen along one direction (the derivation below). */
static cr_status eigen_step(const void *state, const cr__form_along *d, double *s)
{
    const eigen_state *z = state;
    const cr__form *F = &z->F;
    size_t n = z->n, nn = n * n, sh[2] = {n, n};
    const double *v = z->v, *K = z->K, *B = z->B, *Fm = z->Fm;
    double *Bd = z->Bd, *Kd = z->Kd, *T = z->T, *Sd = z->Sd;
    const cr_array *Vb = z->Vb, *ld, *Vd;
    cr_status st;
    if ((st = cr__tan_array(F->arena, F->who, cr_tangent_field(d->dy, 0), 1, sh, CR_DT_F64, &ld)) !=
            CR_OK ||
        (st = cr__tan_array(F->arena, F->who, cr_tangent_field(d->dy, 1), 2, sh, CR_DT_F64, &Vd)) !=
            CR_OK)
        return st;
    /* K̇ = F ∘ (V̇ᵀ V̄) + Ḟ ∘ (Vᵀ V̄) */
    memset(Kd, 0, nn * sizeof *Kd);
    if (Vb != NULL && Vd != NULL)
        mul_nn(n, Vd->data, true, Vb->data, false, Bd);
    for (size_t a = 0; a < n && Vb != NULL; a++)
        for (size_t b = 0; b < n; b++) {
            size_t q = a * n + b;
            double dl =
                ld != NULL ? ((const double *)ld->data)[b] - ((const double *)ld->data)[a] : 0.0;
            Kd[q] = (Vd != NULL ? Fm[q] * Bd[q] : 0.0) - dl * Fm[q] * Fm[q] * B[q];
        }
    /* Ṡ0 = V̇ K Vᵀ + V K̇ Vᵀ + V K V̇ᵀ, in Sd */
    memset(Sd, 0, nn * sizeof *Sd);
    if (Vd != NULL) {
        mul_nn(n, Vd->data, false, K, false, T); /* V̇ K */
        mul_nn(n, T, false, v, true, Bd);        /* (V̇ K) Vᵀ */
        for (size_t q = 0; q < nn; q++)
            Sd[q] += Bd[q];
        mul_nn(n, v, false, K, false, T);        /* V K */
        mul_nn(n, T, false, Vd->data, true, Bd); /* (V K) V̇ᵀ */
        for (size_t q = 0; q < nn; q++)
            Sd[q] += Bd[q];
    }
    mul_nn(n, v, false, Kd, false, T); /* V K̇ */
    mul_nn(n, T, false, v, true, Bd);  /* (V K̇) Vᵀ */
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            s[a * n + b] = 0.5 * (Sd[a * n + b] + Bd[a * n + b] + Sd[b * n + a] + Bd[b * n + a]);
    if (z->fold)
        cr__form_fold_upper(s, n);
    return CR_OK;
}

/*
 * eigen(A) = (λ, V) of a symmetric A. The rule's pullback of (λ̄, V̄) is
 *     Ā = sym(V K Vᵀ),  K = diag(λ̄) + F ∘ (Vᵀ V̄),  F_ij = 1/(λ_j − λ_i) (0 on the diagonal),
 * sym(X) = (X + Xᵀ)/2, folded onto the upper triangle for a dense, Diagonal or triangular A
 * (the rule reads the symmetric matrix of the logical matrix's upper triangle). Along Ȧ, with
 * λ̇ and V̇ from eigen's frule (λ̄, V̄ fixed: they are the cotangent), the product rule gives
 *     S = sym(V̇ K Vᵀ + V K̇ Vᵀ + V K V̇ᵀ),  K̇ = F ∘ (V̇ᵀ V̄) + Ḟ ∘ (Vᵀ V̄),
 *     Ḟ_ij = −(λ̇_j − λ̇_i) F_ij².
 * F takes the rule's gaps (cr__inv_gap): 0 between eigenvalues equal to working precision,
 * where no second derivative exists in general.
 */
static cr_status eigen_init(const cr_form_point *p, void **state)
{
    CR__LA_FORM_STATE(p, state, eigen_state, 0, z);
    z->F.fact = &cr_fn_eigen;
    z->F.step = eigen_step;
    const cr__form *F = &z->F;
    if (F->x->ndim != 2 || F->x->shape[0] != F->x->shape[1])
        return CR_NOTHING;
    size_t n = F->x->shape[0], nn = n * n, sh[2] = {n, n};
    const cr_array *lb, *L, *V;
    if ((st = cr__tan_array(F->arena, F->who, cr_tangent_field(p->ybar, 0), 1, sh, CR_DT_F64,
                            &lb)) != CR_OK ||
        (st = cr__tan_array(F->arena, F->who, cr_tangent_field(p->ybar, 1), 2, sh, CR_DT_F64,
                            &z->Vb)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 0, 1, &L)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 1, 2, &V)) != CR_OK)
        return st;
    const cr_array *A = p->args[0].u.arr;
    z->fold = A->structure != CR_MAT_SYMMETRIC && A->structure != CR_MAT_HERMITIAN;
    /* K, B = Vᵀ V̄ and F, once per record; then per direction K̇ and S. */
    double *w;
    if ((st = cr__form_work(F, 1, &(cr__form_term){7, n, n}, &w)) != CR_OK)
        return st;
    double *K = w, *B = K + nn, *Fm = B + nn;
    z->K = K;
    z->B = B;
    z->Fm = Fm;
    z->Bd = Fm + nn;
    z->Kd = z->Bd + nn;
    z->T = z->Kd + nn;
    z->Sd = z->T + nn;
    const double *lam = L->data, *v = V->data;
    gap_matrix(lam, n, false, Fm);
    if (z->Vb != NULL)
        mul_nn(n, v, true, z->Vb->data, false, B);
    for (size_t q = 0; q < nn; q++)
        K[q] = z->Vb != NULL ? Fm[q] * B[q] : 0.0;
    for (size_t a = 0; a < n && lb != NULL; a++)
        K[a * n + a] = ((const double *)lb->data)[a];
    z->n = n;
    z->lam = lam;
    z->v = v;
    return CR_OK;
}

const cr_rule_form cr__form_eigen = {cr__form_check_matrix, eigen_init, cr__form_frule_dir};

/* ---- svd (a tuple result) ---------------------------------------------------------------------
 */

/* Element e of a tuple cotangent or tangent (ndim dimensions, the given shape) in f64, zeros
 * for a zero one. */
static cr_status tuple_part(const cr__form *F, cr_tangent v, size_t e, size_t ndim,
                            const size_t *shape, const double **out)
{
    const cr_array *a;
    cr_status st =
        cr__tan_array(F->arena, F->who, cr_tangent_field(v, e), ndim, shape, CR_DT_F64, &a);
    if (st != CR_OK)
        return st;
    if (a != NULL) {
        *out = a->data;
        return CR_OK;
    }
    size_t N = ndim == 1 ? shape[0] : shape[0] * shape[1];
    double *z = cr_arena_calloc(F->arena, N ? N : 1, sizeof *z, _Alignof(double));
    if (z == NULL)
        return CR__ALLOC_STATUS(F->arena);
    *out = z;
    return CR_OK;
}

typedef struct svd_state {
    cr__form F;
    size_t m, n, r;
    bool pu, pv;
    const double *U, *s, *V, *Ub, *Vb;
    double *Fm, *Ku, *Kv, *C, *Ju, *Jv, *Jud, *Jvd, *Pu, *P2, *P1, *Pv, *PvS, *Rd, *si, *sid, *W;
} svd_state;

/* svd along one direction (the derivation below). */
static cr_status svd_step(const void *state, const cr__form_along *d, double *sm)
{
    const svd_state *z = state;
    const cr__form *F = &z->F;
    size_t m = z->m, n = z->n, r = z->r, su[2] = {m, r}, sv[2] = {n, r};
    const double *U = z->U, *s = z->s, *V = z->V, *Ub = z->Ub, *Vb = z->Vb;
    const double *Fm = z->Fm, *Ku = z->Ku, *Kv = z->Kv, *C = z->C, *Ju = z->Ju, *Jv = z->Jv;
    const double *Pu = z->Pu, *P2 = z->P2, *Pv = z->Pv, *PvS = z->PvS, *si = z->si;
    double *Jud = z->Jud, *Jvd = z->Jvd, *P1 = z->P1, *Rd = z->Rd, *sid = z->sid, *W = z->W;
    const double *Ud, *sd, *Vd;
    cr_status st;
    if ((st = tuple_part(F, d->dy, 0, 2, su, &Ud)) != CR_OK ||
        (st = tuple_part(F, d->dy, 1, 1, &r, &sd)) != CR_OK ||
        (st = tuple_part(F, d->dy, 2, 2, sv, &Vd)) != CR_OK)
        return st;
    for (size_t a = 0; a < r; a++)
        sid[a] = -sd[a] * si[a] * si[a]; /* (Σ⁻¹)˙ */
    cr__form_mm(1.0, Ud, m, r, 1, Ub, m, r, 0, 0.0, Jud);
    cr__form_mm(1.0, Vd, n, r, 1, Vb, n, r, 0, 0.0, Jvd);
    double *Cd = W; /* Ċ (r x r; W holds max(m, n) x r) */
    for (size_t a = 0; a < r; a++)
        for (size_t b = 0; b < r; b++) {
            size_t q = a * r + b, pp = b * r + a;
            double Fd = -2.0 * (s[b] * sd[b] - s[a] * sd[a]) * Fm[q] * Fm[q];
            double Kud = Jud[q] - Jud[pp], Kvd = Jvd[q] - Jvd[pp];
            Cd[q] = (Fd * Ku[q] + Fm[q] * Kud) * s[b] + Fm[q] * Ku[q] * sd[b] +
                    sd[a] * Fm[q] * Kv[q] + s[a] * (Fd * Kv[q] + Fm[q] * Kvd);
        }
    /* P1 = U̇ C + U Ċ + Ṗu Σ⁻¹ + Pu (Σ⁻¹)˙ */
    cr__form_mm(1.0, Ud, m, r, 0, C, r, r, 0, 0.0, P1);
    cr__form_mm(1.0, U, m, r, 0, Cd, r, r, 0, 1.0, P1);
    if (z->pu) {
        cr__form_mm(1.0, Ud, m, r, 0, Ju, r, r, 0, 0.0, W); /* W = U̇ Ju + U J̇u = −Ṗu */
        cr__form_mm(1.0, U, m, r, 0, Jud, r, r, 0, 1.0, W);
        for (size_t e = 0; e < m * r; e++)
            P1[e] += -W[e] * si[e % r] + Pu[e] * sid[e % r];
    }
    cr__form_mm(1.0, P1, m, r, 0, V, n, r, 1, 0.0, sm);  /* P1 Vᵀ */
    cr__form_mm(1.0, P2, m, r, 0, Vd, n, r, 1, 1.0, sm); /* (U C + Pu Σ⁻¹) V̇ᵀ */
    if (z->pv) {
        cr__form_mm(1.0, Vd, n, r, 0, Jv, r, r, 0, 0.0, W); /* W = V̇ Jv + V J̇v = −Ṗv */
        cr__form_mm(1.0, V, n, r, 0, Jvd, r, r, 0, 1.0, W);
        for (size_t e = 0; e < n * r; e++)
            Rd[e] = -W[e] * si[e % r] + Pv[e] * sid[e % r];   /* Ṗv Σ⁻¹ + Pv (Σ⁻¹)˙ */
        cr__form_mm(1.0, Ud, m, r, 0, PvS, n, r, 1, 1.0, sm); /* U̇ (Pv Σ⁻¹)ᵀ */
        cr__form_mm(1.0, U, m, r, 0, Rd, n, r, 1, 1.0, sm); /* U (Ṗv Σ⁻¹ + Pv (Σ⁻¹)˙)ᵀ */
    }
    return CR_OK;
}

/*
 * svd(A) = (U, s, V), the thin SVD of a real m x n A, r = min(m, n): U m x r, V n x r. With
 * the cotangent (Ū, s̄, V̄), Ju = Uᵀ Ū, Jv = Vᵀ V̄ (r x r), Ku = Ju − Juᵀ, Kv = Jv − Jvᵀ,
 * F_ij = 1/(s_j² − s_i²) (0 for i = j) and Σ⁻¹ = diag(1/s), the rule's pullback is
 *     Ā = U C Vᵀ + Pu Σ⁻¹ Vᵀ + U Σ⁻¹ Pvᵀ,
 *     C_ij = (F ∘ Ku)_ij s_j + s_i (F ∘ Kv)_ij + δ_ij s̄_i,
 *     Pu = (I − U Uᵀ) Ū = Ū − U Ju (m > r only),  Pv = (I − V Vᵀ) V̄ = V̄ − V Jv (n > r only).
 * Along Ȧ, with U̇, ṡ, V̇ from svd's frule at A along Ȧ (the cotangent fixed), the product
 * rule gives, term by term,
 *     J̇u = U̇ᵀ Ū,  J̇v = V̇ᵀ V̄,  K̇u = J̇u − J̇uᵀ,  K̇v = J̇v − J̇vᵀ,
 *     Ḟ_ij = −2 (s_j ṡ_j − s_i ṡ_i) F_ij²,  (Σ⁻¹)˙ = −diag(ṡ / s²),
 *     Ċ_ij = (Ḟ ∘ Ku + F ∘ K̇u)_ij s_j + (F ∘ Ku)_ij ṡ_j + ṡ_i (F ∘ Kv)_ij
 *            + s_i (Ḟ ∘ Kv + F ∘ K̇v)_ij,
 *     Ṗu = −(U̇ Ju + U J̇u),  Ṗv = −(V̇ Jv + V J̇v),
 *     S = (U̇ C + U Ċ + Ṗu Σ⁻¹ + Pu (Σ⁻¹)˙) Vᵀ + (U C + Pu Σ⁻¹) V̇ᵀ
 *         + U̇ (Pv Σ⁻¹)ᵀ + U (Ṗv Σ⁻¹ + Pv (Σ⁻¹)˙)ᵀ.
 * For a square (m = r) U, U Uᵀ = I and Pu = 0, as its derivative: the rule and the form skip
 * the term (likewise Pv for n = r). The conventions are the rule's: F_ij = 0 where s_i and
 * s_j are equal to working precision (cr__inv_gap) and 1/s = 0 where s is zero
 * (cr__inv_sval); both are constant there, so Ḟ and (Σ⁻¹)˙ are 0 too, and the frule's U̇, V̇
 * drop the same terms. At such points the form is the derivative of that convention's
 * pullback, not a second derivative of the loss (the singular vectors are not
 * differentiable there, and the loss in general not twice). svd's frule recomputes the same
 * factorization (the same LAPACK call on the same A), so its U̇, V̇ belong to the recorded U,
 * V and signs chosen by the factorization agree.
 */
static cr_status svd_init(const cr_form_point *p, void **state)
{
    CR__LA_FORM_STATE(p, state, svd_state, 0, z);
    const cr__form *F = &z->F;
    if (F->x->ndim != 2)
        return CR_NOTHING;
    size_t m = F->x->shape[0], n = F->x->shape[1], r = m < n ? m : n, rr = r * r;
    size_t su[2] = {m, r}, sv[2] = {n, r};
    const cr_array *Ua, *sa, *Va;
    const double *Ub, *sb, *Vb;
    if ((st = cr__form_factor_of(F, p->y, 0, 2, &Ua)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 1, 1, &sa)) != CR_OK ||
        (st = cr__form_factor_of(F, p->y, 2, 2, &Va)) != CR_OK ||
        (st = tuple_part(F, p->ybar, 0, 2, su, &Ub)) != CR_OK ||
        (st = tuple_part(F, p->ybar, 1, 1, &r, &sb)) != CR_OK ||
        (st = tuple_part(F, p->ybar, 2, 2, sv, &Vb)) != CR_OK)
        return st;
    if (Ua->shape[1] != r || Va->shape[1] != r || sa->shape[0] != r)
        return CR_EINVAL;
    const double *U = Ua->data, *s = sa->data, *V = Va->data;
    bool pu = m > r, pv = n > r;
    /* Once per record: F, Ku, Kv, C, Ju, Jv, Σ⁻¹, Pu, Pv, Pv Σ⁻¹ (PvS) and U C + Pu Σ⁻¹ (P2).
     * Per direction: J̇u, J̇v, (Σ⁻¹)˙, Ċ, P1 (the factor of Vᵀ), Rd (that of U) and W. */
    size_t mx = m > n ? m : n;
    double *wk;
    if ((st = cr__form_work(
             F, 5, (const cr__form_term[]){{8, r, r}, {3, m, r}, {3, n, r}, {2, r, 1}, {mx, r, 1}},
             &wk)) != CR_OK)
        return st;
    double *Fm = wk, *Ku = Fm + rr, *Kv = Ku + rr, *C = Kv + rr, *Ju = C + rr, *Jv = Ju + rr,
           *Jud = Jv + rr, *Jvd = Jud + rr, *Pu = Jvd + rr, *P2 = Pu + m * r, *P1 = P2 + m * r,
           *Pv = P1 + m * r, *PvS = Pv + n * r, *Rd = PvS + n * r, *si = Rd + n * r, *sid = si + r,
           *W = sid + r;
    double smax = r > 0 ? s[0] : 0.0;
    for (size_t a = 0; a < r; a++)
        si[a] = cr__inv_sval(s[a], smax);
    gap_matrix(s, r, true, Fm);
    cr__form_mm(1.0, U, m, r, 1, Ub, m, r, 0, 0.0, Ju);
    cr__form_mm(1.0, V, n, r, 1, Vb, n, r, 0, 0.0, Jv);
    for (size_t a = 0; a < r; a++)
        for (size_t b = 0; b < r; b++) {
            size_t q = a * r + b;
            Ku[q] = Ju[q] - Ju[b * r + a];
            Kv[q] = Jv[q] - Jv[b * r + a];
            C[q] = Fm[q] * Ku[q] * s[b] + s[a] * Fm[q] * Kv[q] + (a == b ? sb[a] : 0.0);
        }
    cr__form_mm(1.0, U, m, r, 0, C, r, r, 0, 0.0, P2); /* U C */
    if (pu) {                                          /* Pu = Ū − U Ju; P2 += Pu Σ⁻¹ */
        memcpy(Pu, Ub, m * r * sizeof *Pu);
        cr__form_mm(-1.0, U, m, r, 0, Ju, r, r, 0, 1.0, Pu);
        for (size_t e = 0; e < m * r; e++)
            P2[e] += Pu[e] * si[e % r];
    }
    if (pv) { /* Pv = V̄ − V Jv, PvS = Pv Σ⁻¹ */
        memcpy(Pv, Vb, n * r * sizeof *Pv);
        cr__form_mm(-1.0, V, n, r, 0, Jv, r, r, 0, 1.0, Pv);
        for (size_t e = 0; e < n * r; e++)
            PvS[e] = Pv[e] * si[e % r];
    }
    *z = (svd_state){z->F, m,  n,  r,   pu,  pv, U,  s,  V,  Ub,  Vb, Fm, Ku,  Kv,
                     C,    Ju, Jv, Jud, Jvd, Pu, P2, P1, Pv, PvS, Rd, si, sid, W};
    z->F.fact = &cr_fn_svd;
    z->F.step = svd_step;
    return CR_OK;
}

const cr_rule_form cr__form_svd = {cr__form_check_matrix, svd_init, cr__form_frule_dir};

/* ---- matfun_herm ------------------------------------------------------------------------------
 */

/* f'' at x from the scalar row (as sum(f, A)'s form takes it). */
static double row_f2(const cr_scalar_rule *row, double x)
{
    double Y[CR_SCALAR_MAX_OUT], D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
    double H[CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
    /* the partials at x (cr__row_hessian starts from them) */
    row->f64(&x, Y, D);
    cr__row_hessian(row, &x, D, H, 1u);
    return H[0];
}

/* The first divided difference f[a, b] as the rule takes it (cr__divdiff1). */
static double dd1(const cr_scalar_rule *row, double a, double b, double tol)
{
    double fa, fb, da, db;
    row->f64(&a, &fa, &da);
    row->f64(&b, &fb, &db);
    return cr__divdiff1(row, a, b, fa, fb, tol);
}

/* The second divided difference f[a, b, c] (symmetric in its arguments): f''(midpoint)/2
 * when all three are within tol, else (f[b, c] - f[a, b]) / (c - a) over the sorted values. */
static double dd2(const cr_scalar_rule *row, double a, double b, double c, double tol)
{
    double t;
    if (a > b)
        t = a, a = b, b = t;
    if (b > c)
        t = b, b = c, c = t;
    if (a > b)
        t = a, a = b, b = t;
    if (c - a <= tol)
        return 0.5 * row_f2(row, 0.5 * (a + c));
    return (dd1(row, b, c, tol) - dd1(row, a, b, tol)) / (c - a);
}

/* Why a real-matrix form does not cover A: A is complex (or NULL when it is covered). */
static const char *real_a(const cr_array *A)
{
    return A != NULL && A->dtype == CR_DT_C128 ? "A is complex; the form covers real matrices only"
                                               : NULL;
}

/* matfun_herm(f, A): f a scalar-table function of one argument; A real, of any structure
 * (the rule reads the symmetric matrix of the logical matrix's upper triangle and projects its
 * cotangent onto A's structure; the engine projects S the same way). */
static const char *matfun_check(const cr_value *args, size_t nargs, const bool *var,
                                uint32_t *linearity)
{
    (void)var;
    (void)linearity;
    const cr_scalar_rule *r = nargs < 2 || args[0].kind != CR_KIND_FUNC || args[0].u.func.fn == NULL
                                  ? NULL
                                  : cr_scalar_rule_of(args[0].u.func.fn);
    if (r == NULL || r->nin != 1 || r->nout != 1 || args[1].kind != CR_KIND_ARRAY)
        return "f is not a scalar-table function of one argument";
    return real_a(args[1].u.arr);
}

typedef struct matfun_state {
    cr__form F;
    size_t n;
    bool fold;
    const double *v;
    double *D2, *G, *Ad, *T, *At, *St;
} matfun_state;

/* matfun_herm along Ȧ (the derivation below; no frule: λ and V are fixed by the state). */
static cr_status matfun_step(const void *state, const cr__form_along *d, double *s)
{
    const double *xd = d->xd;
    const matfun_state *w = state;
    size_t n = w->n;
    const double *v = w->v, *D2 = w->D2, *G = w->G;
    double *Ad = w->Ad, *T = w->T, *At = w->At, *St = w->St;
    /* Ã = Vᵀ Ȧ V, Ȧ mirrored from its upper triangle */
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            Ad[a * n + b] = a <= b ? xd[a * n + b] : xd[b * n + a];
    mul_nn(n, v, true, Ad, false, T);
    mul_nn(n, T, false, v, false, At);
    for (size_t a = 0; a < n; a++)
        for (size_t c = 0; c < n; c++) {
            double acc = 0.0;
            for (size_t b = 0; b < n; b++)
                acc += D2[(a * n + c) * n + b] *
                       (At[a * n + b] * G[b * n + c] + G[a * n + b] * At[b * n + c]);
            St[a * n + c] = acc;
        }
    mul_nn(n, v, false, St, false, T);
    mul_nn(n, T, false, v, true, s);
    if (w->fold)
        cr__form_fold_upper(s, n);
    return CR_OK;
}

/*
 * matfun_herm(f, A) = f(A) = V diag(f(λ)) Vᵀ of a symmetric A (its upper triangle read, or a
 * Symmetric view). The pullback is the Daleckii-Krein derivative applied to Ḡ = sym(Ȳ):
 * Ā = Df(A)[Ḡ] = V (F ∘ (Vᵀ Ḡ V)) Vᵀ, F_ij = f[λ_i, λ_j] (folded onto the upper triangle for
 * a dense A). Its derivative along Ȧ is the second derivative of the matrix function,
 * symmetric in its two directions; in the eigenbasis (Ã = Vᵀ Ȧ V, G̃ = Vᵀ Ḡ V) it is
 *     S = V S̃ Vᵀ,   S̃_ij = Σ_k f[λ_i, λ_k, λ_j] (Ã_ik G̃_kj + G̃_ik Ã_kj)
 * (Daleckii-Krein for the second derivative: differentiate F_ij(λ(A)) and V together, or
 * check on f = x², where f[., ., .] = 1 and D²f[E, G] = E G + G E). f[a, b, c] is the second
 * divided difference of f, from f, f' and f'' (the scalar row, f'' as for sum(f, A)), so S
 * has no 1/(λ_i − λ_j) of its own and exists at repeated eigenvalues too. λ, V: eigen at A
 * (its frule's primal); Ȧ is read on its upper triangle as the rule reads A. A Diagonal or
 * triangular A is read as its logical dense matrix, S folded as for a dense A (the engine then
 * projects it onto A's structure, as the rule gives its cotangent).
 */
static cr_status matfun_init(const cr_form_point *p, void **state)
{
    const double *yb;
    CR__LA_FORM_STATE(p, state, matfun_state, 1, w);
    const cr__form *F = &w->F;
    if (F->x->ndim != 2 || F->x->shape[0] != F->x->shape[1])
        return CR_NOTHING;
    if ((st = cr__form_like_x(F, p->ybar, &yb)) != CR_OK)
        return st;
    if (yb == NULL)
        return CR_NOTHING;
    size_t n = F->x->shape[0], nn = n * n;
    cr_value y;
    cr_tangent dy;
    const cr_array *L, *V;
    if ((st = cr__form_frule_along(F, &cr_fn_eigen, cr_tangent_zero(), &y, &dy)) != CR_OK ||
        (st = cr__form_factor_of(F, &y, 0, 1, &L)) != CR_OK ||
        (st = cr__form_factor_of(F, &y, 1, 2, &V)) != CR_OK)
        return st;
    const cr_scalar_rule *row = cr_scalar_rule_of(p->args[0].u.func.fn);
    const double *lam = L->data, *v = V->data;
    double tol = cr__matfun_tol(lam, n); /* the rule's */
    double *wk;                          /* n³ is not bounded by the argument's n² elements */
    if ((st = cr__form_work(F, 2, (const cr__form_term[]){{n, n, n}, {5, n, n}}, &wk)) != CR_OK)
        return st;
    double *D2 = wk, *G = D2 + n * nn, *Ad = G + nn, *T = Ad + nn, *At = T + nn, *St = At + nn;
    for (size_t a = 0; a < n; a++)
        for (size_t c = 0; c < n; c++)
            for (size_t b = 0; b < n; b++)
                D2[(a * n + c) * n + b] = dd2(row, lam[a], lam[b], lam[c], tol);
    /* G̃ = Vᵀ sym(Ȳ) V */
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            T[a * n + b] = 0.5 * (yb[a * n + b] + yb[b * n + a]);
    mul_nn(n, v, true, T, false, At);
    mul_nn(n, At, false, v, false, G);
    uint8_t as = p->args[1].u.arr->structure; /* F->x is A's logical dense matrix */
    bool fold = as != CR_MAT_SYMMETRIC && as != CR_MAT_HERMITIAN;
    *w = (matfun_state){w->F, n, fold, v, D2, G, Ad, T, At, St};
    w->F.step = matfun_step;
    return CR_OK;
}

const cr_rule_form cr__form_matfun_herm = {matfun_check, matfun_init, cr__form_frule_dir};

/* ---- eigen_general, eigvals_general (complex results of a real matrix) ------------------------
 */

/* Element e of the tuple value y (a c128 array of ndim dimensions) as a work matrix. */
static cr_status geig_part(const cr__form *F, const cr_value *y, size_t e, size_t ndim, cr__cmat *m)
{
    cr_value v = {.kind = CR_KIND_F64};
    bool got = y->kind == CR_KIND_STRUCT &&
               cr_type_field_value(y->u.obj.type, y->u.obj.ptr, e, &v) == CR_OK;
    bool fits = got && v.kind == CR_KIND_ARRAY && v.u.arr != NULL && v.u.arr->ndim == ndim;
    return fits ? cr__cmat_from(F->arena, v.u.arr, true, m) : CR_EINVAL;
}

/* A tangent of a c128 array of `shape` (ndim 1 or 2) as a complex work matrix, zeros when it
 * is zero. */
static cr_status geig_tan(const cr__form *F, cr_tangent v, size_t ndim, const size_t *shape,
                          cr__cmat *m)
{
    cr_status st = cr__cmat_tan(F->arena, F->who, v, ndim, shape, true, m);
    if (st != CR_OK || m->p != NULL)
        return st;
    return cr__cmat_new(F->arena, true, shape[0], ndim == 1 ? 1 : shape[1], true, m);
}

/* The gauge component k_j of column j of eigen_general's V (each column has unit 2-norm and
 * its component of largest modulus, the first on a tie, real and positive): the row of that
 * component, as the rule picks it (the phase the rule applied does not change the moduli). */
static size_t geig_gauge_row(const cr__cmat *V, size_t j)
{
    size_t k = 0;
    double big = -1;
    for (size_t i = 0; i < V->r; i++) {
        double a = cabs(cr__cmat_get(V, i, j));
        if (a > big) {
            big = a;
            k = i;
        }
    }
    return k;
}

/* eigen_general, eigvals_general: a real A, of any structure (the rule reads a structured A
 * as its logical dense matrix and projects its cotangent, as the engine projects S); a
 * complex A is not a real matrix. */
CR__LA_FORM_CHECK(geig_check, 1, real_a(args[0].u.arr))

typedef struct geig_state {
    cr__form F;
    size_t n, *kr;
    cr__cmat V, Vi, Vb, Q, G, H, Fc;
    cr_complex *z, *g;
} geig_state;

/* eigen_general along Ȧ (the derivation below), with λ̇ and V̇ from its frule. */
static cr_status geig_step(const void *state, const cr__form_along *d, double *s)
{
    const geig_state *w = state;
    const cr__form *F = &w->F;
    size_t n = w->n, sh[2] = {n, n};
    const size_t *kr = w->kr;
    const cr_complex *z = w->z, *g = w->g;
    const cr__cmat *V = &w->V, *Vb = &w->Vb;
    cr__cmat Ld, Vd, M, T, Kd, Qd, U, Sm;
    cr_status st;
    if ((st = geig_tan(F, cr_tangent_field(d->dy, 0), 1, &n, &Ld)) != CR_OK ||
        (st = geig_tan(F, cr_tangent_field(d->dy, 1), 2, sh, &Vd)) != CR_OK ||
        (st = cr__cmat_mul(F->arena, 'N', 'N', 1.0, &w->Vi, &Vd, &M)) != CR_OK ||
        (st = cr__cmat_new(F->arena, true, n, n, true, &T)) != CR_OK)
        return st;
    /* T = Ġ off the diagonal */
    if (Vb->p != NULL) {
        if ((st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, &Vd, Vb, &Kd)) != CR_OK ||
            (st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, &Vd, V, &Qd)) != CR_OK)
            return st;
        cr__cmat_gemm('C', 'N', 1.0, V, &Vd, 1.0, &Qd); /* Q̇ = V̇ᴴ V + Vᴴ V̇ */
        const cr_complex *ld = Ld.p;
        for (size_t j = 0; j < n; j++) {
            size_t kj = kr[j];
            cr_complex gd = cr__cmat_get(&Kd, j, j), vk = cr__cmat_get(V, kj, j);
            cr_complex zd = cr__c(0, -cimag(gd)) / vk +
                            cr__c(0, cimag(g[j])) * cr__cmat_get(&Vd, kj, j) / (vk * vk);
            for (size_t a = 0; a < n; a++) {
                if (a == j)
                    continue;
                cr_complex fc = cr__cmat_get(&w->Fc, a, j);
                cr_complex hd = cr__cmat_get(&Kd, a, j) - cr__cmat_get(&Qd, a, j) * creal(g[j]) -
                                cr__cmat_get(&w->Q, a, j) * creal(gd) +
                                zd * conj(cr__cmat_get(V, kj, a)) +
                                z[j] * conj(cr__cmat_get(&Vd, kj, a));
                cr_complex fcd = -conj(ld[j] - ld[a]) * fc * fc;
                cr__cmat_set(&T, a, j, fcd * cr__cmat_get(&w->H, a, j) + fc * hd);
            }
        }
    }
    /* T += G Mᴴ − Mᴴ G; S = re(W T Vᴴ), W = V⁻ᴴ */
    cr__cmat_gemm('N', 'C', 1.0, &w->G, &M, 1.0, &T);
    cr__cmat_gemm('C', 'N', -1.0, &M, &w->G, 1.0, &T);
    if ((st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, &w->Vi, &T, &U)) != CR_OK ||
        (st = cr__cmat_mul(F->arena, 'N', 'C', 1.0, &U, V, &Sm)) != CR_OK)
        return st;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++)
            s[a * n + b] = creal(cr__cmat_get(&Sm, a, b));
    return CR_OK;
}

/*
 * eigen_general(A) = (λ, V) of a real n x n A (complex λ and V; each column of V of unit
 * 2-norm with its component k_j of largest modulus real and positive), and eigvals_general(A)
 * = λ (the same with V̄ = 0). With the cotangent (λ̄, V̄), the rule's pullback is
 *     Ā = re(Ā_c),  Ā_c = W G Vᴴ,  W = V⁻ᴴ,  G = diag(λ̄) + Fc ∘ H (off the diagonal),
 *     Fc_ij = conj(F_ij), F_ij = 1/(λ_j − λ_i) (cr__inv_gap_c: 0 between equal eigenvalues),
 *     H_ij = K_ij − Q_ij re(g_j) + z_j conj(V_{k_j i}),  K = Vᴴ V̄,  Q = Vᴴ V,  g_j = K_jj,
 *     z_j = −i im(g_j) / V_{k_j j}
 * (re: the projection onto a real A; the Q term is the unit norm, the z term the phase
 * convention). Along Ȧ, with λ̇ and V̇ from eigen_general's frule at A along Ȧ (λ̄, V̄ fixed:
 * they are the cotangent; k_j fixed: the largest component stays the largest nearby), the
 * product rule over each factor, with dW = −W V̇ᴴ W and M = V⁻¹ V̇ (so that V̇ᴴ W = Mᴴ and
 * V̇ᴴ = Mᴴ Vᴴ), gives
 *     S = re(W Ġ Vᴴ − W V̇ᴴ W G Vᴴ + W G V̇ᴴ) = re(W (Ġ + G Mᴴ − Mᴴ G) Vᴴ),
 *     Ġ = Ḟc ∘ H + Fc ∘ Ḣ (off the diagonal; λ̄ fixed, so 0 on it),
 *     Ḟc_ij = −conj(λ̇_j − λ̇_i) Fc_ij²,
 *     Ḣ_ij = K̇_ij − Q̇_ij re(g_j) − Q_ij re(ġ_j) + ż_j conj(V_{k_j i}) + z_j conj(V̇_{k_j i}),
 *     K̇ = V̇ᴴ V̄,  Q̇ = V̇ᴴ V + Vᴴ V̇,  ġ_j = K̇_jj,
 *     ż_j = −i im(ġ_j) / V_{k_j j} + i im(g_j) V̇_{k_j j} / V_{k_j j}².
 * For eigvals_general (V̄ = 0) only S = re(W (G Mᴴ − Mᴴ G) Vᴴ) with G = diag(λ̄) remains: the
 * eigenvalues do not depend on V's normalisation, and neither does S (the diagonal of M, the
 * gauge's part of V̇, cancels in G Mᴴ − Mᴴ G). V⁻¹ is matinv's primal of V, once per record.
 * Where two eigenvalues are equal to working precision, F and Ḟ are 0 as in the rule (and
 * the frule's V̇ drops the same terms): S is then the derivative of that convention's
 * pullback, not a second derivative (none exists there in general). A defective A (V
 * singular) is refused by eigen_general's frule (CR_EDOMAIN).
 */
static cr_status geig_init(const cr_form_point *p, void **state, cr_tangent lbt, cr_tangent vbt)
{
    CR__LA_FORM_STATE(p, state, geig_state, 0, w);
    const cr__form *F = &w->F;
    if (F->x->ndim != 2 || F->x->shape[0] != F->x->shape[1] || F->x->shape[0] == 0)
        return CR_NOTHING; /* the rule refused it when recorded, or nothing to add */
    size_t n = F->x->shape[0], sh[2] = {n, n};
    cr_value ev = *p->y, vv;
    if (p->y->kind != CR_KIND_STRUCT &&
        (st = cr_function_call(F->arena, &cr_fn_eigen_general, &p->args[0], 1, &ev)) != CR_OK)
        return st;
    cr__cmat L, K;
    cr__cmat *V = &w->V, *Vb = &w->Vb, *Q = &w->Q, *G = &w->G, *H = &w->H, *Fc = &w->Fc;
    cr__cmat Lb;
    if ((st = geig_part(F, &ev, 0, 1, &L)) != CR_OK || (st = geig_part(F, &ev, 1, 2, V)) != CR_OK ||
        (st = cr__cmat_tan(F->arena, F->who, lbt, 1, &n, true, &Lb)) != CR_OK ||
        (st = cr__cmat_tan(F->arena, F->who, vbt, 2, sh, true, Vb)) != CR_OK)
        return st;
    if (Lb.p == NULL && Vb->p == NULL)
        return CR_NOTHING;
    cr_array *Va;
    cr_value iv;
    if ((st = cr__cmat_to_array(F->arena, V, false, &Va)) != CR_OK)
        return st;
    vv = cr_value_array(Va);
    if ((st = cr_function_call(F->arena, &cr_fn_matinv, &vv, 1, &iv)) != CR_OK ||
        (st = cr__cmat_from(F->arena, iv.u.arr, true, &w->Vi)) != CR_OK)
        return st;
    /* Once per record: k_j, Fc, and with V̄: K, Q, g, z, H; then G. */
    size_t *kr = cr__arena_array(F->arena, F->who, n, sizeof *kr, _Alignof(size_t));
    cr_complex *z =
        cr__arena_array(F->arena, F->who, 2 * (n ? n : 1), sizeof *z, _Alignof(cr_complex));
    if (kr == NULL || z == NULL)
        return CR__ALLOC_STATUS(F->arena);
    cr_complex *lam = L.p, *g = z + n;
    double scale = cr__spectrum_scale_c(lam, n);
    if ((st = cr__cmat_new(F->arena, true, n, n, true, G)) != CR_OK ||
        (st = cr__cmat_new(F->arena, true, n, n, true, H)) != CR_OK ||
        (st = cr__cmat_new(F->arena, true, n, n, true, Fc)) != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++) {
        kr[j] = geig_gauge_row(V, j);
        for (size_t a = 0; a < n; a++)
            if (a != j)
                cr__cmat_set(Fc, a, j, conj(cr__inv_gap_c(lam[j], lam[a], scale)));
    }
    if (Vb->p != NULL) {
        if ((st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, V, Vb, &K)) != CR_OK ||
            (st = cr__cmat_mul(F->arena, 'C', 'N', 1.0, V, V, Q)) != CR_OK)
            return st;
        for (size_t j = 0; j < n; j++) {
            g[j] = cr__cmat_get(&K, j, j);
            z[j] = cr__c(0, -cimag(g[j])) / cr__cmat_get(V, kr[j], j);
            for (size_t a = 0; a < n; a++)
                if (a != j) {
                    cr_complex h = cr__cmat_get(&K, a, j) - cr__cmat_get(Q, a, j) * creal(g[j]) +
                                   z[j] * conj(cr__cmat_get(V, kr[j], a));
                    cr__cmat_set(H, a, j, h);
                    cr__cmat_set(G, a, j, cr__cmat_get(Fc, a, j) * h);
                }
        }
    }
    for (size_t a = 0; a < n && Lb.p != NULL; a++)
        cr__cmat_set(G, a, a, cr__cmat_get(&Lb, a, 0));
    w->n = n;
    w->kr = kr;
    w->z = z;
    w->g = g;
    w->F.fact = &cr_fn_eigen_general;
    w->F.step = geig_step;
    return CR_OK;
}

/* eigvals_general(A) = λ: its cotangent is ȳ = λ̄ (V̄ = 0). */
static cr_status eigvals_general_init(const cr_form_point *p, void **state)
{
    return geig_init(p, state, p->ybar, cr_tangent_zero());
}

/* eigen_general(A) = (λ, V): the tuple cotangent's elements λ̄ and V̄. */
static cr_status eigen_general_init(const cr_form_point *p, void **state)
{
    cr_tangent lb, vb;
    cr_status st = cr__tuple_field(p->arena, p->name, p->ybar, 0, &lb);
    if (st == CR_OK)
        st = cr__tuple_field(p->arena, p->name, p->ybar, 1, &vb);
    return st != CR_OK ? st : geig_init(p, state, lb, vb);
}

const cr_rule_form cr__form_eigen_general = {geig_check, eigen_general_init, cr__form_frule_dir};
const cr_rule_form cr__form_eigvals_general = {geig_check, eigvals_general_init,
                                               cr__form_frule_dir};
