/*
 * LAPACK-level rules: det, logdet, logabsdet, inv (matinv), solve (A \ B), cholesky,
 * eigen and eigvals of Hermitian matrices, svd and svdvals. Compiled with LAPACKE
 * (CR_HAVE_LAPACKE); without it the function values exist, their primal gives
 * CR_EUNIMPL and no rule is registered.
 *
 * The work happens in column-major copies (the LAPACK layout) of f64 or c128, through the
 * LAPACKE `_work` routines with workspace from the arena: LAPACK never allocates, and the
 * row-major arguments are transposed once on the way in and out.
 */
#include <float.h>
#include <math.h>

#include "../forms_impl.h"
#include "linalg_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>

/* ---- Arguments ------------------------------------------------------------------------- */

/* A square float matrix argument; its work dtype. */
static cr_status square_arg(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                            size_t i, const cr_array **A, bool *cplx)
{
    cr_status st = cr__array_arg(arena, who, args, nargs, i, A);
    if (st != CR_OK)
        return st;
    if ((*A)->ndim != 2 || (*A)->shape[0] != (*A)->shape[1] ||
        !cr_dtype_is_float((cr_dtype)(*A)->dtype) || !cr__lapack_size_ok((*A)->shape[0]))
        return CR__FAIL(arena, CR_ESHAPE, "%s: expected a square f64, f32 or c128 matrix", who);
    *cplx = (*A)->dtype == CR_DT_C128;
    return CR_OK;
}

/* The Hermitian matrix whose upper triangle is that of A (the diagonal's real part), as
 * LAPACK's syev/heev/potrf read it. */
static cr_status herm_upper(cr_arena *arena, const cr_array *A, bool cplx, cr__cmat *m)
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

/* The cotangent of A for a function of herm_upper(A), given the Hermitian gradient S with
 * respect to that matrix: a Symmetric/Hermitian A takes S (its projector symmetrises); any
 * other A gets S folded onto the upper triangle it was read from. */
static cr_status herm_give(cr_arena *arena, const cr_array *A, cr_project *p, cr__cmat *S,
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

/* ---- LU --------------------------------------------------------------------------------- */

typedef struct lu {
    cr__cmat a; /* the factors */
    lapack_int *ipiv;
    bool singular; /* a zero pivot */
    cr_complex det;
    double logabs;    /* log|det| */
    cr_complex phase; /* det / |det| (1 when singular) */
} lu;

static cr_status lu_factor(cr_arena *arena, const char *who, const cr_array *A, bool cplx, lu *f)
{
    cr_status st = cr__cmat_from(arena, A, cplx, &f->a);
    if (st != CR_OK)
        return st;
    size_t n = f->a.r;
    f->ipiv = cr__arena_array(arena, who, n, sizeof *f->ipiv, _Alignof(lapack_int));
    if (f->ipiv == NULL)
        return CR__ALLOC_STATUS(arena);
    lapack_int info = n == 0 ? 0
                      : cplx ? LAPACKE_zgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n,
                                                   f->a.p, (lapack_int)n, f->ipiv)
                             : LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n,
                                                   f->a.p, (lapack_int)n, f->ipiv);
    if (info < 0)
        return cr__lapack_fail(arena, who, info);
    f->singular = info > 0;
    cr_complex det = 1, phase = 1;
    double logabs = 0;
    for (size_t i = 0; i < n; i++) {
        cr_complex u = cr__cmat_get(&f->a, i, i);
        if (f->ipiv[i] != (lapack_int)(i + 1)) {
            det = -det;
            phase = -phase;
        }
        det *= u;
        double au = cabs(u);
        logabs += log(au);
        if (au > 0)
            phase *= u / au;
    }
    f->det = det;
    f->logabs = logabs;
    f->phase = phase;
    return CR_OK;
}

/* X := op(A)^-1 X in place (X n x k), op 'N' or 'C'. */
static cr_status lu_solve(cr_arena *arena, const char *who, const lu *f, char op, cr__cmat *X)
{
    size_t n = f->a.r;
    if (n == 0 || X->c == 0)
        return CR_OK;
    char t = op == 'N' ? 'N' : (f->a.cplx ? 'C' : 'T');
    lapack_int info =
        f->a.cplx ? LAPACKE_zgetrs_work(LAPACK_COL_MAJOR, t, (lapack_int)n, (lapack_int)X->c,
                                        f->a.p, (lapack_int)n, f->ipiv, X->p, (lapack_int)n)
                  : LAPACKE_dgetrs_work(LAPACK_COL_MAJOR, t, (lapack_int)n, (lapack_int)X->c,
                                        f->a.p, (lapack_int)n, f->ipiv, X->p, (lapack_int)n);
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

/* A^-1 from the factors. */
static cr_status lu_inverse(cr_arena *arena, const char *who, const lu *f, cr__cmat *inv)
{
    size_t n = f->a.r;
    cr_status st = cr__cmat_new(arena, f->a.cplx, n, n, true, inv);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        cr__cmat_set(inv, i, i, 1.0);
    return lu_solve(arena, who, f, 'N', inv);
}

static cr_status singular(cr_arena *arena, const char *who)
{
    return CR__FAIL(arena, CR_EDOMAIN, "%s: the matrix is singular", who);
}

/* ---- SVD ---------------------------------------------------------------------------------- */

typedef struct svd {
    cr__cmat U;  /* m x k */
    double *s;   /* k, descending */
    cr__cmat Vt; /* k x n */
    size_t m, n, k;
} svd;

static cr_status svd_of(cr_arena *arena, const char *who, const cr__cmat *A0, svd *out)
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

static cr_status eigh(cr_arena *arena, const char *who, cr__cmat *H, double **w)
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

/* ---- Tuples ------------------------------------------------------------------------------ */

typedef struct tup2 {
    cr_array a, b;
} tup2;
typedef struct tup3 {
    cr_array a, b, c;
} tup3;
typedef struct sd_f64 {
    double l, s;
} sd_f64;
typedef struct sd_f32 {
    float l, s;
} sd_f32;
typedef struct sd_c128 {
    double l;
    cr_complex s;
} sd_c128;
static const cr_field k_tup2_fields[2] = {{NULL, offsetof(tup2, a), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(tup2, b), CR_KIND_ARRAY, NULL}};
static const cr_field k_tup3_fields[3] = {{NULL, offsetof(tup3, a), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(tup3, b), CR_KIND_ARRAY, NULL},
                                          {NULL, offsetof(tup3, c), CR_KIND_ARRAY, NULL}};
static const cr_field k_sd_f64_fields[2] = {{NULL, offsetof(sd_f64, l), CR_KIND_F64, NULL},
                                            {NULL, offsetof(sd_f64, s), CR_KIND_F64, NULL}};
static const cr_field k_sd_f32_fields[2] = {{NULL, offsetof(sd_f32, l), CR_KIND_F32, NULL},
                                            {NULL, offsetof(sd_f32, s), CR_KIND_F32, NULL}};
static const cr_field k_sd_c128_fields[2] = {{NULL, offsetof(sd_c128, l), CR_KIND_F64, NULL},
                                             {NULL, offsetof(sd_c128, s), CR_KIND_C128, NULL}};
static const cr_type k_tup2 = {"tuple(array,array)", sizeof(tup2), 2, k_tup2_fields};
static const cr_type k_tup3 = {"tuple(array,array,array)", sizeof(tup3), 3, k_tup3_fields};
static const cr_type k_sd_f64 = {"tuple(f64,f64)", sizeof(sd_f64), 2, k_sd_f64_fields};
static const cr_type k_sd_f32 = {"tuple(f32,f32)", sizeof(sd_f32), 2, k_sd_f32_fields};
static const cr_type k_sd_c128 = {"tuple(f64,c128)", sizeof(sd_c128), 2, k_sd_c128_fields};

/* The adjugate of a singular A through its SVD A = U S Vᴴ:
 * adj(A) = det(U) det(Vᴴ) V diag(Π_{j≠i} s_j) Uᴴ (no division by a zero singular value). */
static cr_status adjugate_singular(cr_arena *arena, const char *who, const cr__cmat *A,
                                   cr__cmat *adj)
{
    svd f;
    cr_status st = svd_of(arena, who, A, &f);
    if (st != CR_OK)
        return st;
    size_t n = f.k;
    lu lu_u, lu_v;
    cr__cmat V;
    st = cr__cmat_adj(arena, &f.Vt, &V);
    if (st != CR_OK)
        return st;
    /* det(U) and det(Vᴴ) from their LU factors. */
    cr__cmat Uc, Vc;
    st = cr__cmat_copy(arena, &f.U, &Uc);
    if (st == CR_OK)
        st = cr__cmat_copy(arena, &f.Vt, &Vc);
    if (st != CR_OK)
        return st;
    lu_u.a = Uc;
    lu_v.a = Vc;
    cr_complex d = 1;
    for (int w = 0; w < 2; w++) {
        lu *L = w == 0 ? &lu_u : &lu_v;
        L->ipiv = cr__arena_array(arena, who, n, sizeof *L->ipiv, _Alignof(lapack_int));
        if (L->ipiv == NULL)
            return CR__ALLOC_STATUS(arena);
        lapack_int info = A->cplx
                              ? LAPACKE_zgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n,
                                                    L->a.p, (lapack_int)n, L->ipiv)
                              : LAPACKE_dgetrf_work(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)n,
                                                    L->a.p, (lapack_int)n, L->ipiv);
        if (info < 0)
            return cr__lapack_fail(arena, who, info);
        for (size_t i = 0; i < n; i++) {
            d *= cr__cmat_get(&L->a, i, i);
            if (L->ipiv[i] != (lapack_int)(i + 1))
                d = -d;
        }
    }
    /* V diag(p) */
    for (size_t i = 0; i < n; i++) {
        cr_complex p = d;
        for (size_t j = 0; j < n; j++)
            if (j != i)
                p *= f.s[j];
        for (size_t r = 0; r < n; r++)
            cr__cmat_set(&V, r, i, cr__cmat_get(&V, r, i) * p);
    }
    return cr__cmat_mul(arena, 'N', 'C', 1.0, &V, &f.U, adj);
}

/* adj(A) = det(A) A⁻¹, or through the SVD when A is singular. */
static cr_status adjugate(cr_arena *arena, const char *who, const cr_array *A, bool cplx,
                          const lu *f, cr__cmat *adj)
{
    if (!f->singular) {
        cr_status st = lu_inverse(arena, who, f, adj);
        if (st != CR_OK)
            return st;
        size_t n = adj->r;
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++)
                cr__cmat_set(adj, i, j, f->det * cr__cmat_get(adj, i, j));
        return CR_OK;
    }
    cr__cmat Am;
    cr_status st = cr__cmat_from(arena, A, cplx, &Am);
    return st != CR_OK ? st : adjugate_singular(arena, who, &Am, adj);
}

typedef struct det_env {
    const cr_array *A;
    cr_project *pA;
    bool cplx;
    lu f;
    int kind; /* 0 det, 1 logdet, 2 logabsdet */
} det_env;

static const char *const k_det_names[3] = {"det", "logdet", "logabsdet"};

/* det: Ā = adj(A)ᴴ ȳ. logdet: Ā = A⁻ᴴ ȳ. logabsdet: Ā = c A⁻ᴴ, c = l̄ + i im(conj(s) s̄). */
static cr_status det_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                              void *env)
{
    (void)nx;
    det_env *e = env;
    const char *who = k_det_names[e->kind];
    dx[0] = cr_tangent_none();
    cr_complex c;
    bool nz;
    cr_status st;
    if (e->kind == 2) {
        cr_tangent tl, ts;
        cr_complex l = 0, s = 0;
        bool nzl = false, nzs = false;
        st = cr__tuple_field(arena, who, *dy, 0, &tl);
        if (st == CR_OK)
            st = cr__tuple_field(arena, who, *dy, 1, &ts);
        if (st == CR_OK)
            st = cr__tan_scalar(arena, who, tl, &l, &nzl);
        if (st == CR_OK)
            st = cr__tan_scalar(arena, who, ts, &s, &nzs);
        if (st != CR_OK)
            return st;
        c = creal(l) + (e->cplx ? cr__c(0, cimag(conj(e->f.phase) * s)) : 0);
        nz = nzl || (nzs && e->cplx);
    } else {
        st = cr__tan_scalar(arena, who, *dy, &c, &nz);
        if (st != CR_OK)
            return st;
    }
    if (!nz) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    cr__cmat M;
    if (e->kind == 0)
        st = adjugate(arena, who, e->A, e->cplx, &e->f, &M);
    else
        st = lu_inverse(arena, who, &e->f, &M);
    if (st != CR_OK)
        return st;
    /* Ā = c Mᴴ (M = adj(A) or A⁻¹) */
    size_t n = M.r;
    cr__cmat G;
    st = cr__cmat_new(arena, e->cplx, n, n, false, &G);
    if (st != CR_OK)
        return st;
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            cr__cmat_set(&G, i, j, c * conj(cr__cmat_get(&M, j, i)));
    cr_array *r = NULL;
    st = cr__cmat_to_array(arena, &G, false, &r);
    return st != CR_OK ? st : cr__give(arena, e->pA, r, &dx[1]);
}

static cr_status det_value(cr_arena *arena, int kind, const cr_array *A, const lu *f, cr_value *y)
{
    cr_dtype dt = (cr_dtype)A->dtype;
    bool cplx = dt == CR_DT_C128;
    if (kind == 0) {
        *y = cr__scalar_value(dt, f->det);
        return CR_OK;
    }
    if (f->singular)
        return singular(arena, k_det_names[kind]);
    if (kind == 1) {
        if (!cplx && creal(f->phase) < 0)
            return CR__FAIL(arena, CR_EDOMAIN, "logdet: the determinant is negative");
        *y = cr__scalar_value(dt, cplx ? cr__c(f->logabs, carg(f->phase)) : f->logabs);
        return CR_OK;
    }
    if (dt == CR_DT_F32) {
        sd_f32 *t = cr_arena_alloc(arena, sizeof *t, _Alignof(sd_f32));
        if (t == NULL)
            return CR__ALLOC_STATUS(arena);
        *t = (sd_f32){(float)f->logabs, (float)creal(f->phase)};
        *y = cr_value_struct(&k_sd_f32, t);
    } else if (cplx) {
        sd_c128 *t = cr_arena_alloc(arena, sizeof *t, _Alignof(sd_c128));
        if (t == NULL)
            return CR__ALLOC_STATUS(arena);
        *t = (sd_c128){f->logabs, f->phase};
        *y = cr_value_struct(&k_sd_c128, t);
    } else {
        sd_f64 *t = cr_arena_alloc(arena, sizeof *t, _Alignof(sd_f64));
        if (t == NULL)
            return CR__ALLOC_STATUS(arena);
        *t = (sd_f64){f->logabs, creal(f->phase)};
        *y = cr_value_struct(&k_sd_f64, t);
    }
    return CR_OK;
}

static cr_status det_rrule_common(cr_arena *arena, int kind, const cr_value *args, size_t nargs,
                                  cr_value *y, cr_pullback *pb, const void *udata)
{
    const char *who = k_det_names[kind];
    const cr_array *A;
    bool cplx = false;
    cr_status st = cr__nargs(arena, who, nargs, 1, 1);
    if (st == CR_OK)
        st = square_arg(arena, who, args, nargs, 0, &A, &cplx);
    if (st != CR_OK)
        return st;
    det_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(det_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    st = lu_factor(arena, who, A, cplx, &e->f);
    if (st == CR_OK)
        st = det_value(arena, kind, A, &e->f, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    e->A = A;
    e->cplx = cplx;
    e->kind = kind;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){det_pullback, e,
                        kind == 0   ? "det_pullback"
                        : kind == 1 ? "logdet_pullback"
                                    : "logabsdet_pullback",
                        nargs + 1};
    return CR_OK;
}

/* frule: det: tr(adj(A) Ȧ); logdet: tr(A⁻¹ Ȧ); logabsdet: (re t, s i im t), t = tr(A⁻¹ Ȧ). */
static cr_status det_frule_common(cr_arena *arena, int kind, const cr_tangent *dargs,
                                  const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    const char *who = k_det_names[kind];
    cr_pullback pb = {NULL, NULL, NULL, 0};
    cr_status st = det_rrule_common(arena, kind, args, nargs, y, &pb, NULL);
    if (st != CR_OK)
        return st;
    det_env *e = pb.env;
    cr__cmat dA;
    st = cr__cmat_dx(arena, who, dargs, args, 0, e->cplx, &dA);
    if (st != CR_OK)
        return st;
    if (dA.p == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr__cmat M;
    st = kind == 0 ? adjugate(arena, who, e->A, e->cplx, &e->f, &M)
                   : lu_inverse(arena, who, &e->f, &M);
    if (st != CR_OK)
        return st;
    size_t n = M.r;
    cr_complex t = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            t += cr__cmat_get(&M, i, j) * cr__cmat_get(&dA, j, i);
    cr_dtype dt = (cr_dtype)e->A->dtype;
    if (kind < 2) {
        *dy = cr__scalar_tangent(dt, t);
        return CR_OK;
    }
    cr_tangent f[2] = {cr__scalar_tangent(dt == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64, creal(t)),
                       cr__scalar_tangent(dt, e->cplx ? e->f.phase * cr__c(0, cimag(t)) : 0)};
    return cr_tangent_struct(arena, y->u.obj.type, NULL, f, 2, dy);
}

#define DET_RULES(NAME, KIND) CR__PARAM_RULES(NAME, det_rrule_common, det_frule_common, KIND, 1)

DET_RULES(det, 0)
DET_RULES(logdet, 1)
DET_RULES(logabsdet, 2)

/* ---- inv ---------------------------------------------------------------------------------- */

typedef struct inv_env {
    cr_project *pA;
    cr__cmat Y;
} inv_env;

/* Ā = -Yᴴ Ȳ Yᴴ */
static cr_status matinv_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)nx;
    inv_env *e = env;
    dx[0] = cr_tangent_none();
    size_t shape[2] = {e->Y.r, e->Y.c};
    cr__cmat G, T, R;
    cr_status st = cr__cmat_tan(arena, "matinv_pullback", *dy, 2, shape, e->Y.cplx, &G);
    if (st != CR_OK || G.p == NULL) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->Y, &G, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', -1.0, &T, &e->Y, &R);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &R, false, &r);
    return st != CR_OK ? st : cr__give(arena, e->pA, r, &dx[1]);
}

static cr_status matinv_forward(cr_arena *arena, const cr_value *args, size_t nargs,
                                const cr_array **A, cr__cmat *Y)
{
    bool cplx = false;
    cr_status st = cr__nargs(arena, "inv", nargs, 1, 1);
    if (st == CR_OK)
        st = square_arg(arena, "inv", args, nargs, 0, A, &cplx);
    lu f;
    if (st == CR_OK)
        st = lu_factor(arena, "inv", *A, cplx, &f);
    if (st != CR_OK)
        return st;
    if (f.singular)
        return singular(arena, "inv");
    return lu_inverse(arena, "inv", &f, Y);
}

static cr_status matinv_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    (void)cfg;
    (void)f;
    const cr_array *A;
    inv_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(inv_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_status st = matinv_forward(arena, args, nargs, &A, &e->Y);
    cr_array *o;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e->Y, false, (cr_dtype)A->dtype, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){matinv_pullback, e, "matinv_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(matinv, "inv", 1)

/* frule: Ẏ = -Y Ȧ Y. */
static cr_status matinv_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)udata;
    const cr_array *A;
    cr__cmat Y, dA, T, R;
    cr_status st = matinv_forward(arena, args, nargs, &A, &Y);
    cr_array *o;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &Y, false, (cr_dtype)A->dtype, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    st = cr__cmat_dx(arena, "inv", dargs, args, 0, Y.cplx, &dA);
    if (st != CR_OK || dA.p == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &Y, &dA, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', -1.0, &T, &Y, &R);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &R, false, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* ---- solve ------------------------------------------------------------------------------ */

typedef enum { FAC_DIAG, FAC_TRI, FAC_LU } fac_kind;

typedef struct fac {
    fac_kind kind;
    char uplo;  /* FAC_TRI */
    cr__cmat a; /* FAC_TRI: the matrix; FAC_DIAG: its diagonal (n x 1) */
    lu f;       /* FAC_LU */
} fac;

static cr_status fac_new(cr_arena *arena, const char *who, const cr_array *A, bool cplx, fac *F)
{
    memset(F, 0, sizeof *F);
    size_t n = A->shape[0];
    if (A->structure == CR_MAT_DIAGONAL) {
        F->kind = FAC_DIAG;
        cr_status st = cr__cmat_new(arena, cplx, n, 1, false, &F->a);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < n; i++) {
            cr_complex d = cr_array_get_linear(A, i * n + i);
            if (d == 0)
                return singular(arena, who);
            cr__cmat_set(&F->a, i, 0, d);
        }
        return CR_OK;
    }
    if (A->structure == CR_MAT_UPPER || A->structure == CR_MAT_LOWER) {
        F->kind = FAC_TRI;
        F->uplo = A->structure == CR_MAT_UPPER ? 'U' : 'L';
        cr_status st = cr__cmat_from(arena, A, cplx, &F->a);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < n; i++)
            if (cr__cmat_get(&F->a, i, i) == 0)
                return singular(arena, who);
        return CR_OK;
    }
    F->kind = FAC_LU;
    cr_status st = lu_factor(arena, who, A, cplx, &F->f);
    if (st == CR_OK && F->f.singular)
        return singular(arena, who);
    return st;
}

/* X := op(A)^-1 X, op 'N' or 'C'. */
static cr_status fac_solve(cr_arena *arena, const char *who, const fac *F, char op, cr__cmat *X)
{
    size_t n = X->r;
    switch (F->kind) {
    case FAC_DIAG:
        for (size_t j = 0; j < X->c; j++)
            for (size_t i = 0; i < n; i++) {
                cr_complex d = cr__cmat_get(&F->a, i, 0);
                cr__cmat_set(X, i, j, cr__cmat_get(X, i, j) / (op == 'N' ? d : conj(d)));
            }
        return CR_OK;
    case FAC_TRI: {
        if (n == 0 || X->c == 0)
            return CR_OK;
        char t = op == 'N' ? 'N' : (X->cplx ? 'C' : 'T');
        lapack_int info =
            X->cplx
                ? LAPACKE_ztrtrs_work(LAPACK_COL_MAJOR, F->uplo, t, 'N', (lapack_int)n,
                                      (lapack_int)X->c, F->a.p, (lapack_int)n, X->p, (lapack_int)n)
                : LAPACKE_dtrtrs_work(LAPACK_COL_MAJOR, F->uplo, t, 'N', (lapack_int)n,
                                      (lapack_int)X->c, F->a.p, (lapack_int)n, X->p, (lapack_int)n);
        return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
    }
    case FAC_LU:
        return lu_solve(arena, who, &F->f, op, X);
    }
    return CR_OK;
}

typedef struct solve_env {
    fac F;
    cr__cmat Y;
    const cr_array *A, *B;
    cr_project *pA, *pB;
    bool dA, dB, cplx;
} solve_env;

typedef struct solve_thunk {
    const solve_env *e;
    cr__cmat Bbar;
} solve_thunk;

/* Ā = -B̄ Yᴴ */
static cr_status solve_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    solve_thunk *t = env;
    cr__cmat R;
    cr_status st = cr__cmat_mul(arena, 'N', 'C', -1.0, &t->Bbar, &t->e->Y, &R);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &R, false, &r);
    return st != CR_OK ? st : cr__give(arena, t->e->pA, r, out);
}

/* B̄ = A⁻ᴴ Ȳ, Ā = -B̄ Yᴴ (a thunk). */
static cr_status solve_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    solve_env *e = env;
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    const cr_array *B = e->B;
    cr__cmat G;
    cr_status st = cr__cmat_tan(arena, "solve_pullback", *dy, B->ndim, B->shape, e->cplx, &G);
    if (st != CR_OK)
        return st;
    if (G.p == NULL) {
        dx[1] = e->dA ? cr_tangent_zero() : cr_tangent_none();
        dx[2] = e->dB ? cr_tangent_zero() : cr_tangent_none();
        return CR_OK;
    }
    st = fac_solve(arena, "solve_pullback", &e->F, 'C', &G);
    if (st != CR_OK)
        return st;
    if (e->dB) {
        cr_array *r;
        st = cr__cmat_to_array(arena, &G, B->ndim == 1, &r);
        if (st == CR_OK)
            st = cr__give(arena, e->pB, r, &dx[2]);
        if (st != CR_OK)
            return st;
    }
    if (e->dA) {
        solve_thunk *t = cr_arena_alloc(arena, sizeof *t, _Alignof(solve_thunk));
        if (t == NULL)
            return CR__ALLOC_STATUS(arena);
        *t = (solve_thunk){e, G};
        st = cr__thunk(arena, solve_thunk_fn, NULL, t, "solve_pullback_thunk", &dx[1]);
    }
    return st;
}

static cr_status solve_forward(cr_arena *arena, const cr_value *args, size_t nargs, solve_env *e,
                               cr_dtype *dt)
{
    const cr_array *A, *B;
    bool ca;
    cr_status st = cr__nargs(arena, "solve", nargs, 2, 2);
    if (st == CR_OK)
        st = square_arg(arena, "solve", args, nargs, 0, &A, &ca);
    if (st == CR_OK)
        st = cr__array_arg(arena, "solve", args, nargs, 1, &B);
    if (st != CR_OK)
        return st;
    if ((B->ndim != 1 && B->ndim != 2) || B->shape[0] != A->shape[0] ||
        !cr_dtype_is_float((cr_dtype)B->dtype))
        return CR__FAIL(arena, CR_ESHAPE,
                        "solve: B must be a float vector or matrix with as many rows as A");
    cr_dtype d = cr__promote((cr_dtype)A->dtype, (cr_dtype)B->dtype);
    *dt = d;
    e->cplx = d == CR_DT_C128;
    e->A = A;
    e->B = B;
    e->dA = true;
    e->dB = true;
    st = fac_new(arena, "solve", A, e->cplx, &e->F);
    if (st == CR_OK)
        st = cr__cmat_from(arena, B, e->cplx, &e->Y);
    if (st == CR_OK)
        st = fac_solve(arena, "solve", &e->F, 'N', &e->Y);
    return st;
}

/* solve(A, B) = A \ B. */
static cr_status solve_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                             const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                             const void *udata)
{
    (void)cfg;
    (void)f;
    solve_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(solve_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_dtype dt = CR_DT_F64;
    cr_status st = solve_forward(arena, args, nargs, e, &dt);
    cr_array *o;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e->Y, e->B->ndim == 1, dt, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st == CR_OK)
        st = cr_project_new(arena, &args[1], &e->pB);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){solve_pullback, e, "solve_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(solve, "solve", 2)

/* frule: Ẏ = A⁻¹ (Ḃ - Ȧ Y). */
static cr_status solve_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                             const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                             cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)udata;
    solve_env e;
    cr_dtype dt = CR_DT_F64;
    cr_status st = solve_forward(arena, args, nargs, &e, &dt);
    cr_array *o;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e.Y, e.B->ndim == 1, dt, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    cr__cmat dA, dB, R;
    st = cr__cmat_dx(arena, "solve", dargs, args, 0, e.cplx, &dA);
    if (st == CR_OK)
        st = cr__cmat_dx(arena, "solve", dargs, args, 1, e.cplx, &dB);
    if (st != CR_OK)
        return st;
    if (dA.p == NULL && dB.p == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    if (dB.p != NULL)
        st = cr__cmat_copy(arena, &dB, &R);
    else
        st = cr__cmat_new(arena, e.cplx, e.Y.r, e.Y.c, true, &R);
    if (st != CR_OK)
        return st;
    if (dA.p != NULL)
        cr__cmat_gemm('N', 'N', -1.0, &dA, &e.Y, 1.0, &R);
    st = fac_solve(arena, "solve", &e.F, 'N', &R);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &R, e.B->ndim == 1, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* ---- rdiv: B / A ------------------------------------------------------------------------- */

/* A row-major 1-d or 2-d B as a work matrix: a vector is one row. */
static cr_status row_mat(cr_arena *arena, const cr_array *b, bool cplx, cr__cmat *m)
{
    if (b->ndim == 2)
        return cr__cmat_from(arena, b, cplx, m);
    cr__cmat col;
    cr_status st = cr__cmat_from(arena, b, cplx, &col);
    if (st != CR_OK)
        return st;
    *m = col;
    m->r = 1;
    m->c = col.r;
    return CR_OK;
}

typedef struct rdiv_env {
    fac F;
    cr__cmat Y; /* m x n */
    const cr_array *A, *B;
    cr_project *pA, *pB;
    bool cplx;
} rdiv_env;

/* X := X op(A)^-1 for X m x n, through (X op(A)^-1)ᴴ = op(A)^-ᴴ Xᴴ. */
static cr_status right_solve(cr_arena *arena, const fac *F, char op, cr__cmat *X)
{
    cr__cmat Xh;
    cr_status st = cr__cmat_adj(arena, X, &Xh);
    if (st == CR_OK)
        st = fac_solve(arena, "rdiv", F, op == 'N' ? 'C' : 'N', &Xh);
    return st != CR_OK ? st : cr__cmat_adj(arena, &Xh, X);
}

static cr_status rdiv_out(cr_arena *arena, const cr__cmat *Y, bool vec, cr_dtype dt, cr_array **o)
{
    if (!vec)
        return cr__cmat_out(arena, Y, false, dt, o);
    cr__cmat c = *Y; /* a 1 x n row is, in column-major memory, an n x 1 column */
    c.r = Y->c;
    c.c = 1;
    return cr__cmat_out(arena, &c, true, dt, o);
}

static cr_status rdiv_forward(cr_arena *arena, const cr_value *args, size_t nargs, rdiv_env *e,
                              cr_dtype *dt)
{
    const cr_array *A, *B;
    bool ca = false;
    cr_status st = cr__nargs(arena, "rdiv", nargs, 2, 2);
    if (st == CR_OK)
        st = cr__array_arg(arena, "rdiv", args, nargs, 0, &B);
    if (st == CR_OK)
        st = square_arg(arena, "rdiv", args, nargs, 1, &A, &ca);
    if (st != CR_OK)
        return st;
    size_t nb = B->ndim == 2 ? B->shape[1] : B->shape[0];
    if ((B->ndim != 1 && B->ndim != 2) || nb != A->shape[0] ||
        !cr_dtype_is_float((cr_dtype)B->dtype))
        return CR__FAIL(arena, CR_ESHAPE,
                        "rdiv: B must be a float vector or matrix with as many columns as A");
    cr_dtype d = cr__promote((cr_dtype)A->dtype, (cr_dtype)B->dtype);
    *dt = d;
    e->cplx = d == CR_DT_C128;
    e->A = A;
    e->B = B;
    st = fac_new(arena, "rdiv", A, e->cplx, &e->F);
    if (st == CR_OK)
        st = row_mat(arena, B, e->cplx, &e->Y);
    if (st == CR_OK)
        st = right_solve(arena, &e->F, 'N', &e->Y);
    return st;
}

typedef struct rdiv_thunk {
    const rdiv_env *e;
    cr__cmat Bbar;
} rdiv_thunk;

/* Ā = -Yᴴ B̄ */
static cr_status rdiv_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    rdiv_thunk *t = env;
    cr__cmat R;
    cr_status st = cr__cmat_mul(arena, 'C', 'N', -1.0, &t->e->Y, &t->Bbar, &R);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &R, false, &r);
    return st != CR_OK ? st : cr__give(arena, t->e->pA, r, out);
}

/* Y = B A⁻¹: B̄ = Ȳ A⁻ᴴ, Ā = -Yᴴ B̄ (a thunk). */
static cr_status rdiv_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    rdiv_env *e = env;
    for (size_t i = 0; i < nx; i++)
        dx[i] = cr_tangent_none();
    const cr_array *g;
    size_t shape[2] = {e->Y.r, e->Y.c};
    bool vec = e->B->ndim == 1;
    cr_status st = cr__tan_array(arena, "rdiv_pullback", *dy, vec ? 1 : 2, vec ? &shape[1] : shape,
                                 e->cplx ? CR_DT_C128 : CR_DT_F64, &g);
    if (st != CR_OK)
        return st;
    if (g == NULL) {
        dx[1] = dx[2] = cr_tangent_zero();
        return CR_OK;
    }
    cr__cmat G;
    st = row_mat(arena, g, e->cplx, &G);
    if (st == CR_OK)
        st = right_solve(arena, &e->F, 'C', &G);
    if (st != CR_OK)
        return st;
    cr_array *r = NULL;
    st = rdiv_out(arena, &G, vec, e->cplx ? CR_DT_C128 : CR_DT_F64, &r);
    if (st == CR_OK)
        st = cr__give(arena, e->pB, r, &dx[1]);
    if (st != CR_OK)
        return st;
    rdiv_thunk *t = cr_arena_alloc(arena, sizeof *t, _Alignof(rdiv_thunk));
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    *t = (rdiv_thunk){e, G};
    return cr__thunk(arena, rdiv_thunk_fn, NULL, t, "rdiv_pullback_thunk", &dx[2]);
}

/* rdiv(B, A) = B / A = B A⁻¹. */
static cr_status rdiv_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)f;
    rdiv_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(rdiv_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_dtype dt = CR_DT_F64;
    cr_status st = rdiv_forward(arena, args, nargs, e, &dt);
    cr_array *o;
    if (st == CR_OK)
        st = rdiv_out(arena, &e->Y, e->B->ndim == 1, dt, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    st = cr_project_new(arena, &args[0], &e->pB);
    if (st == CR_OK)
        st = cr_project_new(arena, &args[1], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){rdiv_pullback, e, "rdiv_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(rdiv, "rdiv", 2)

/* frule: Ẏ = (Ḃ - Y Ȧ) A⁻¹. */
static cr_status rdiv_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)udata;
    rdiv_env e;
    memset(&e, 0, sizeof e);
    cr_dtype dt = CR_DT_F64;
    cr_status st = rdiv_forward(arena, args, nargs, &e, &dt);
    cr_array *o;
    bool vec = e.B != NULL && e.B->ndim == 1;
    if (st == CR_OK)
        st = rdiv_out(arena, &e.Y, vec, dt, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    const cr_array *tb, *ta;
    st = cr__dx_array(arena, "rdiv", dargs, args, 0, e.cplx ? CR_DT_C128 : CR_DT_F64, &tb);
    if (st == CR_OK)
        st = cr__dx_array(arena, "rdiv", dargs, args, 1, e.cplx ? CR_DT_C128 : CR_DT_F64, &ta);
    if (st != CR_OK)
        return st;
    if (tb == NULL && ta == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr__cmat R;
    if (tb != NULL)
        st = row_mat(arena, tb, e.cplx, &R);
    else
        st = cr__cmat_new(arena, e.cplx, e.Y.r, e.Y.c, true, &R);
    if (st != CR_OK)
        return st;
    if (ta != NULL) {
        cr__cmat dA;
        st = cr__cmat_from(arena, ta, e.cplx, &dA);
        if (st != CR_OK)
            return st;
        cr__cmat_gemm('N', 'N', -1.0, &e.Y, &dA, 1.0, &R);
    }
    st = right_solve(arena, &e.F, 'N', &R);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = rdiv_out(arena, &R, vec, e.cplx ? CR_DT_C128 : CR_DT_F64, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* ---- cholesky -------------------------------------------------------------------------- */

static cr_status cholesky_forward(cr_arena *arena, const cr_value *args, size_t nargs,
                                  const cr_array **A, cr__cmat *U)
{
    bool cplx = false;
    cr_status st = cr__nargs(arena, "cholesky", nargs, 1, 1);
    if (st == CR_OK)
        st = square_arg(arena, "cholesky", args, nargs, 0, A, &cplx);
    if (st == CR_OK)
        st = herm_upper(arena, *A, cplx, U);
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
    dx[0] = cr_tangent_none();
    size_t n = e->U.r, shape[2] = {n, n};
    cr__cmat Ub, P, X;
    cr_status st = cr__cmat_tan(arena, "cholesky_pullback", *dy, 2, shape, e->U.cplx, &Ub);
    if (st != CR_OK || Ub.p == NULL) {
        dx[1] = cr_tangent_zero();
        return st;
    }
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
    return herm_give(arena, e->A, e->pA, &X, &dx[1]);
}

static cr_status cholesky_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                                const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                                const void *udata)
{
    (void)cfg;
    (void)f;
    chol_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(chol_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr_status st = cholesky_forward(arena, args, nargs, &e->A, &e->U);
    if (st == CR_OK)
        st = cholesky_output(arena, e->A, &e->U, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){cholesky_pullback, e, "cholesky_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(cholesky, "cholesky", 1)

/* frule: with Ḣ the Hermitian matrix read from Ȧ's upper triangle, S = U⁻ᴴ Ḣ U⁻¹,
 * U̇ = Φ(S) U where Φ keeps the upper triangle and halves the diagonal. */
static cr_status cholesky_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                                const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                                cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)udata;
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
    st = herm_upper(arena, t, U.cplx, &dH);
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
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &R, false, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

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
        st = square_arg(arena, who, args, nargs, 0, A, &cplx);
    if (st == CR_OK)
        st = herm_upper(arena, *A, cplx, V);
    if (st == CR_OK)
        st = eigh(arena, who, V, w);
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
    return herm_give(arena, e->A, e->pA, &S, &dx[1]);
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
    st = herm_upper(arena, t, V.cplx, &dH);
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
    svd f;
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
    svd *f = &e->f;
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
        st = svd_of(arena, who, &Am, &e->f);
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
    const svd *f = &e->f;
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
    const svd *f = &e.f;
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
    st = square_arg(arena, "matfun_herm", args, nargs, 1, &e->A, &cplx);
    if (st == CR_OK)
        st = herm_upper(arena, e->A, cplx, &e->V);
    if (st == CR_OK)
        st = eigh(arena, "matfun_herm", &e->V, &e->w);
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
    return st != CR_OK ? st : herm_give(arena, e->A, e->pA, &S, &dx[2]);
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
    st = herm_upper(arena, t, e.V.cplx, &dH);
    if (st == CR_OK)
        st = dk_apply(arena, &e, &dH, &R);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &R, false, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

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
        st = cr__cmat_new(arena, cplx, n, n, true, &U);
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, n, n, true, &V);
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
            st = cr__cmat_new(arena, cplx, n, n, true, &W1);
        if (st == CR_OK)
            st = cr__cmat_new(arena, cplx, n, n, true, &W2);
        if (st != CR_OK)
            return st;
        /* U = A [A6 (b13 A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I] */
        mat_axpy(&W1, b[13], &A6);
        mat_axpy(&W1, b[11], &A4);
        mat_axpy(&W1, b[9], &A2);
        mat_axpy(&W2, b[7], &A6);
        mat_axpy(&W2, b[5], &A4);
        mat_axpy(&W2, b[3], &A2);
        mat_axpy(&W2, b[1], &Id);
        cr__cmat_gemm('N', 'N', 1.0, &A6, &W1, 1.0, &W2);
        cr__cmat_gemm('N', 'N', 1.0, &A, &W2, 0.0, &U);
        /* V = A6 (b12 A6 + b10 A4 + b8 A2) + b6 A6 + b4 A4 + b2 A2 + b0 I */
        cr__cmat Z1;
        st = cr__cmat_new(arena, cplx, n, n, true, &Z1);
        if (st != CR_OK)
            return st;
        mat_axpy(&Z1, b[12], &A6);
        mat_axpy(&Z1, b[10], &A4);
        mat_axpy(&Z1, b[8], &A2);
        mat_axpy(&V, b[6], &A6);
        mat_axpy(&V, b[4], &A4);
        mat_axpy(&V, b[2], &A2);
        mat_axpy(&V, b[0], &Id);
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
    bool cplx = false;
    cr_status st = cr__nargs(arena, "expm", nargs, 1, 1);
    if (st == CR_OK)
        st = square_arg(arena, "expm", args, nargs, 0, A, &cplx);
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
    dx[0] = cr_tangent_none();
    size_t n = e->Am.r, shape[2] = {n, n};
    cr__cmat G, Ah, L;
    cr_status st = cr__cmat_tan(arena, "expm_pullback", *dy, 2, shape, e->Am.cplx, &G);
    if (st != CR_OK || G.p == NULL) {
        dx[1] = cr_tangent_zero();
        return st;
    }
    st = cr__cmat_adj(arena, &e->Am, &Ah);
    if (st == CR_OK)
        st = expm_frechet(arena, &Ah, &G, NULL, &L);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &L, false, &r);
    return st != CR_OK ? st : cr__give(arena, e->pA, r, &dx[1]);
}

/* expm(A) = exp(A) of a general square matrix. */
static cr_status expm_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                            const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                            const void *udata)
{
    (void)cfg;
    (void)f;
    expm_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(expm_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    cr__cmat Y;
    cr_status st = expm_forward(arena, args, nargs, &e->A, &e->Am, &Y);
    cr_array *o;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &Y, false, (cr_dtype)e->A->dtype, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    st = cr_project_new(arena, &args[0], &e->pA);
    if (st != CR_OK)
        return st;
    *pb = (cr_pullback){expm_pullback, e, "expm_pullback", nargs + 1};
    return CR_OK;
}
CR__ARRAY_FN(expm, "expm", 1)

/* frule: Ẏ = L(A, Ȧ). */
static cr_status expm_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                            const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                            cr_tangent *dy, const void *udata)
{
    (void)cfg;
    (void)f;
    (void)udata;
    const cr_array *A;
    cr__cmat Am, Y, dA, L;
    cr_status st = expm_forward(arena, args, nargs, &A, &Am, &Y);
    cr_array *o;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &Y, false, (cr_dtype)A->dtype, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    st = cr__cmat_dx(arena, "expm", dargs, args, 0, Am.cplx, &dA);
    if (st != CR_OK || dA.p == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    st = expm_frechet(arena, &Am, &dA, NULL, &L);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &L, false, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* ---- Test registrations ---------------------------------------------------------------- */

typedef enum {
    SQ_GENERAL, /* diagonally dominant (well conditioned), det > 0; structures */
    SQ_SPD,     /* Hermitian positive definite; tagged or dense with junk below */
    SQ_HERM,    /* Hermitian with separated eigenvalues */
    SQ_REALSYM, /* real symmetric (eigen: vectors of complex Hermitian have a phase gauge) */
    SQ_RECT     /* rectangular (svd; complex ones have a fixed gauge) */
} sq_kind;

static cr_status rand_square(cr_arena *arena, uint64_t *rng, sq_kind kind, cr_array **out)
{
    size_t n = 2 + cr__rng_below(rng, 3), shape[2] = {n, n};
    cr_dtype dt = cr__rng_dtype(rng);
    if (kind == SQ_REALSYM)
        dt = dt == CR_DT_C128 ? CR_DT_F64 : dt;
    if (kind == SQ_RECT) {
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
    case SQ_GENERAL:
        for (size_t i = 0; i < n; i++)
            cr__store(A, (ptrdiff_t)(i * n + i), cr__load(A, (ptrdiff_t)(i * n + i)) + 3.0);
        if (k == 1)
            A->structure = CR_MAT_UPPER;
        if (k == 2)
            A->structure = (uint8_t)(dt == CR_DT_C128 ? CR_MAT_HERMITIAN : CR_MAT_SYMMETRIC);
        return CR_OK;
    case SQ_SPD: {
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

static cr_status sample_sq(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs, void *env)
{
    sq_kind kind = (sq_kind)(uintptr_t)env;
    cr_array *A;
    cr_status st = rand_square(arena, rng, kind, &A);
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
    cr_status st = rand_square(arena, rng, SQ_HERM, &A);
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

/* rdiv(B, A): the arguments of solve, swapped (B as rows). */
static cr_status sample_rdiv(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                             void *env)
{
    (void)env;
    cr_status st = sample_sq(arena, rng, args, nargs, (void *)(uintptr_t)SQ_GENERAL);
    if (st != CR_OK)
        return st;
    cr_array *B = args[1].u.arr;
    if (B->ndim == 2) {
        /* n x 2 -> 2 x n */
        size_t r = B->shape[0];
        B->shape[0] = 2;
        B->shape[1] = r;
        cr__row_major(2, B->shape, B->strides);
    }
    cr_value a = args[0];
    args[0] = args[1];
    args[1] = a;
    return CR_OK;
}

static const cr_rule_test k_t_rdiv = {.sample = sample_rdiv};
static const cr_rule_test k_t_matfun = {.sample = sample_matfun};
static const cr_rule_test k_t_expm = {.sample = sample_expm};
static const cr_rule_test k_t_general = {.sample = sample_sq, .env = (void *)(uintptr_t)SQ_GENERAL};
static const cr_rule_test k_t_spd = {.sample = sample_sq, .env = (void *)(uintptr_t)SQ_SPD};
static const cr_rule_test k_t_herm = {.sample = sample_sq, .env = (void *)(uintptr_t)SQ_HERM};
static const cr_rule_test k_t_realsym = {.sample = sample_sq, .env = (void *)(uintptr_t)SQ_REALSYM};
static const cr_rule_test k_t_rect = {.sample = sample_sq, .env = (void *)(uintptr_t)SQ_RECT};

cr_status cr__linalg_register_lapack(cr_registry *reg)
{
    static const cr_argspec a1[1] = {{CR__M_FARRAY, NULL}};
    static const cr_argspec a2[2] = {{CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL}};
    static const struct {
        const cr_function *fn;
        size_t n;
        cr_frule_fn frule;
        cr_rrule_fn rrule;
        const cr_rule_test *test;
        const cr_rule_form *form; /* the second-order form (linalg_forms.c), or NULL */
    } k[] = {
        {&det_function, 1, det_frule, det_rrule, &k_t_general, &cr__form_det},
        {&logdet_function, 1, logdet_frule, logdet_rrule, &k_t_general, &cr__form_logdet},
        {&logabsdet_function, 1, logabsdet_frule, logabsdet_rrule, &k_t_general, &cr__form_logdet},
        {&matinv_function, 1, matinv_frule, matinv_rrule, &k_t_general, &cr__form_inv},
        {&solve_function, 2, solve_frule, solve_rrule, &k_t_general, &cr__form_solve},
        {&cholesky_function, 1, cholesky_frule, cholesky_rrule, &k_t_spd, &cr__form_cholesky},
        {&eigen_function, 1, eigen_frule, eigen_rrule, &k_t_realsym, &cr__form_eigen},
        {&eigvals_function, 1, eigvals_frule, eigvals_rrule, &k_t_herm, &cr__form_eigvals},
        {&svd_function, 1, svd_frule, svd_rrule, &k_t_rect, &cr__form_svd},
        {&svdvals_function, 1, svdvals_frule, svdvals_rrule, &k_t_rect, &cr__form_svdvals},
        {&expm_function, 1, expm_frule, expm_rrule, &k_t_expm, &cr__form_expm},
        {&rdiv_function, 2, rdiv_frule, rdiv_rrule, &k_t_rdiv, &cr__form_rdiv},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        cr_status st = cr__add_rule_so(reg, k[i].fn, k[i].n == 1 ? a1 : a2, k[i].n, false,
                                       k[i].frule, k[i].rrule, k[i].test, CR_NONLINEAR, k[i].form);
        if (st != CR_OK)
            return st;
    }
    static const cr_argspec fa[2] = {{CR_M_FUNC, NULL}, {CR__M_FARRAY, NULL}};
    return cr__add_rule_so(reg, &matfun_herm_function, fa, 2, false, matfun_herm_frule,
                           matfun_herm_rrule, &k_t_matfun, CR_NONLINEAR, &cr__form_matfun_herm);
}

#else /* !CR_HAVE_LAPACKE */

/* Without LAPACKE: the function values exist; calling them reports CR_EUNIMPL. */
CR__NO_LAPACK_FN(det, "det")
CR__NO_LAPACK_FN(logdet, "logdet")
CR__NO_LAPACK_FN(logabsdet, "logabsdet")
CR__NO_LAPACK_FN(matinv, "inv")
CR__NO_LAPACK_FN(solve, "solve")
CR__NO_LAPACK_FN(cholesky, "cholesky")
CR__NO_LAPACK_FN(eigen, "eigen")
CR__NO_LAPACK_FN(eigvals, "eigvals")
CR__NO_LAPACK_FN(svd, "svd")
CR__NO_LAPACK_FN(svdvals, "svdvals")
CR__NO_LAPACK_FN(matfun_herm, "matfun_herm")
CR__NO_LAPACK_FN(expm, "expm")
CR__NO_LAPACK_FN(rdiv, "rdiv")

cr_status cr__linalg_register_lapack(cr_registry *reg)
{
    (void)reg;
    return CR_OK;
}

#endif /* CR_HAVE_LAPACKE */
