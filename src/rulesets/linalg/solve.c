/*
 * Rules of the linear-algebra family through an LU factorization: det, logdet, logabsdet,
 * inv (matinv), solve (A \ B) and rdiv (B / A), with their second-order forms. Compiled with
 * LAPACKE (CR_HAVE_LAPACKE); without it the function values exist, their primal gives
 * CR_EUNIMPL and no rule is registered.
 *
 * The work happens in column-major copies (the LAPACK layout) of f64 or c128, through the
 * LAPACKE `_work` routines with workspace from the arena: LAPACK never allocates, and the
 * row-major arguments are transposed once on the way in and out.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include <chainrules/rules_linalg.h>

#include "../forms_impl.h"
#include "linalg_impl.h"
#include "structured_impl.h"

#if defined(CR_HAVE_LAPACKE)
#include <lapacke.h>

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

/* ---- Tuples ------------------------------------------------------------------------------ */

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
/* The fields (l, s) of the tuple type T of kinds KL and KS. */
#define SD_FIELDS(T, KL, KS)               \
    {                                      \
        {NULL, offsetof(T, l), KL, NULL},  \
        {                                  \
            NULL, offsetof(T, s), KS, NULL \
        }                                  \
    }
static const cr_field k_sd_f64_fields[2] = SD_FIELDS(sd_f64, CR_KIND_F64, CR_KIND_F64);
static const cr_field k_sd_f32_fields[2] = SD_FIELDS(sd_f32, CR_KIND_F32, CR_KIND_F32);
static const cr_field k_sd_c128_fields[2] = SD_FIELDS(sd_c128, CR_KIND_F64, CR_KIND_C128);
#define SD_TYPE(T, NAME)                   \
    {                                      \
        NAME, sizeof(T), 2, k_##T##_fields \
    }
static const cr_type k_sd_f64 = SD_TYPE(sd_f64, "tuple(f64,f64)");
static const cr_type k_sd_f32 = SD_TYPE(sd_f32, "tuple(f32,f32)");
static const cr_type k_sd_c128 = SD_TYPE(sd_c128, "tuple(f64,c128)");

/* The adjugate of a singular A through its SVD A = U S Vᴴ:
 * adj(A) = det(U) det(Vᴴ) V diag(Π_{j≠i} s_j) Uᴴ (no division by a zero singular value). */
static cr_status adjugate_singular(cr_arena *arena, const char *who, const cr__cmat *A,
                                   cr__cmat *adj)
{
    cr__svd f;
    cr_status st = cr__svd_of(arena, who, A, &f);
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
    det_env *e = cr__pb_start(dx, nx, false, env);
    const char *who = k_det_names[e->kind];
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
    return cr__cmat_give(arena, e->pA, &G, false, &dx[1]);
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
        return cr__singular(arena, k_det_names[kind]);
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
    bool cplx;
    cr_status st = cr__square_arg1(arena, who, args, nargs, &A, &cplx);
    if (st != CR_OK)
        return st;
    CR__LA_ENV(arena, det_env, e);
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
    cr__cmat Y;
    cr_project *pA;
} inv_env;

/* Ā = -Yᴴ Ȳ Yᴴ */
static cr_status matinv_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                 void *env)
{
    (void)nx;
    inv_env *e = env;
    cr__cmat G, T, R;
    cr_status st = cr__pull_matrix(arena, "matinv_pullback", dy, e->Y.r, e->Y.c, e->Y.cplx, dx, &G);
    if (st != CR_OK || G.p == NULL)
        return st;
    st = cr__cmat_mul(arena, 'C', 'N', 1.0, &e->Y, &G, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'C', -1.0, &T, &e->Y, &R);
    return st != CR_OK ? st : cr__cmat_give(arena, e->pA, &R, false, &dx[1]);
}

static cr_status matinv_forward(cr_arena *arena, const cr_value *args, size_t nargs,
                                const cr_array **A, cr__cmat *Y)
{
    bool cplx;
    cr_status st = cr__square_arg1(arena, "inv", args, nargs, A, &cplx);
    lu f;
    if (st == CR_OK)
        st = lu_factor(arena, "inv", *A, cplx, &f);
    if (st != CR_OK)
        return st;
    if (f.singular)
        return cr__singular(arena, "inv");
    return lu_inverse(arena, "inv", &f, Y);
}

static cr_status matinv_rrule(const cr_config *cfg, cr_arena *arena, const cr_value *f,
                              const cr_value *args, size_t nargs, cr_value *y, cr_pullback *pb,
                              const void *udata)
{
    CR__LA_ENV(arena, inv_env, e);
    (void)cfg;
    (void)f;
    const cr_array *A;
    cr_status st = matinv_forward(arena, args, nargs, &A, &e->Y);
    if (st != CR_OK)
        return st;
    return cr__rrule_out1(arena, &e->Y, (cr_dtype)A->dtype, args, udata, &e->pA, y, pb,
                          (cr_pullback){matinv_pullback, e, "matinv_pullback", nargs + 1});
}

/* frule: Ẏ = -Y Ȧ Y. */
static cr_status matinv_frule(const cr_config *cfg, cr_arena *arena, const cr_tangent *dargs,
                              const cr_value *f, const cr_value *args, size_t nargs, cr_value *y,
                              cr_tangent *dy, const void *udata)
{
    const cr_array *A;
    cr__cmat Y, dA, T, R;
    (void)cfg;
    (void)f;
    (void)udata;
    cr_status st = matinv_forward(arena, args, nargs, &A, &Y);
    if (st == CR_OK)
        st = cr__frule_out1(arena, "inv", &Y, (cr_dtype)A->dtype, dargs, args, y, &dA, dy);
    if (st != CR_OK || dA.p == NULL)
        return st;
    st = cr__cmat_mul(arena, 'N', 'N', 1.0, &Y, &dA, &T);
    if (st == CR_OK)
        st = cr__cmat_mul(arena, 'N', 'N', -1.0, &T, &Y, &R);
    return st != CR_OK ? st : cr__cmat_project(arena, y, &R, dy);
}
CR__ARRAY_FN(matinv, "inv", 1)

/* ---- solve ------------------------------------------------------------------------------ */

typedef enum { FAC_DIAG, FAC_TRI, FAC_LU, FAC_GT } fac_kind;

typedef struct fac {
    fac_kind kind;
    char uplo;  /* FAC_TRI */
    cr__cmat a; /* FAC_TRI: the matrix; FAC_DIAG: its diagonal (n x 1) */
    lu f;       /* FAC_LU */
    cr__gtf gt; /* FAC_GT: Tridiagonal, SymTridiagonal (structured.c) */
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
                return cr__singular(arena, who);
            cr__cmat_set(&F->a, i, 0, d);
        }
        return CR_OK;
    }
    if (cr__gt_structure(A->structure) || A->structure == CR_MAT_BIDIAG_UPPER ||
        A->structure == CR_MAT_BIDIAG_LOWER) { /* gttrf on the band: O(n) */
        F->kind = FAC_GT;
        return cr__gt_factor(arena, who, A, cplx, &F->gt);
    }
    uint8_t s = A->structure;
    bool up = s == CR_MAT_UPPER || s == CR_MAT_UNIT_UPPER;
    if (up || s == CR_MAT_LOWER || s == CR_MAT_UNIT_LOWER) {
        F->kind = FAC_TRI; /* the dense value: a unit diagonal's ones */
        F->uplo = up ? 'U' : 'L';
        cr_status st = cr__cmat_from(arena, A, cplx, &F->a);
        if (st != CR_OK)
            return st;
        for (size_t i = 0; i < n; i++)
            if (cr__cmat_get(&F->a, i, i) == 0)
                return cr__singular(arena, who);
        return CR_OK;
    }
    F->kind = FAC_LU;
    cr_status st = lu_factor(arena, who, A, cplx, &F->f);
    if (st == CR_OK && F->f.singular)
        return cr__singular(arena, who);
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
    case FAC_GT:
        return cr__gt_solve(arena, who, &F->gt, op, X);
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

/* Entry (i, j) of -L Rᴴ (solve: L = G, R = Y, both n x k). */
static cr_complex neg_gyh(const cr__cmat *L, const cr__cmat *R, size_t i, size_t j)
{
    cr_complex acc = 0;
    for (size_t q = 0; q < L->c; q++)
        acc += cr__cmat_get(L, i, q) * conj(cr__cmat_get(R, j, q));
    return -acc;
}

/* Entry (i, j) of -Lᴴ R (rdiv: L = Y, R = G, both m x n). */
static cr_complex neg_yhg(const cr__cmat *L, const cr__cmat *R, size_t i, size_t j)
{
    cr_complex acc = 0;
    for (size_t q = 0; q < L->r; q++)
        acc += conj(cr__cmat_get(L, q, i)) * cr__cmat_get(R, q, j);
    return -acc;
}

/* Entry (i, j) of a product of two work matrices (neg_gyh, neg_yhg). */
typedef cr_complex (*band_entry_fn)(const cr__cmat *L, const cr__cmat *R, size_t i, size_t j);

/* Ā = entry(L, R) (-G Yᴴ for solve, -Yᴴ G for rdiv) for a Diagonal or band (Tridiagonal,
 * SymTridiagonal, Bidiagonal) A, formed on what A reads only and already projected onto it
 * (pA), in O(n) memory and O(n k) time (k the right-hand sides): a Diagonal of n entries,
 * or an n x n array of A's structure whose strides (2, 1) put (i, i) at 3i, (i, i+1) at
 * 3i + 1 and (i+1, i) at 3i + 2 (its 3n - 2 stored elements are the three central
 * diagonals; the entries off the band, logically zero, alias them, so the array is never an
 * in-place destination), as matmul's band cotangent. SymTridiagonal's off-diagonal is
 * symmetrised, the diagonal a Bidiagonal does not read is zero, a real A's entries are
 * real. */
static cr_status band_cot(cr_arena *arena, const cr_array *a, const cr_project *pA,
                          band_entry_fn entry, const cr__cmat *L, const cr__cmat *R,
                          cr_tangent *out)
{
    size_t n = a->shape[0];
    bool diag = a->structure == CR_MAT_DIAGONAL;
    size_t m = diag ? n : (n > 0 ? n + (n - 1) + (n - 1) : 1);
    cr_dtype dt = (cr_dtype)a->dtype;
    bool cplx = dt == CR_DT_C128;
    cr_array *r;
    cr_status st = cr__new(arena, dt, 1, &m, false, &r);
    if (st != CR_OK)
        return st;
    for (size_t i = 0, k = 0; i < n; i++, k += diag ? 1 : 3) {
        cr_complex v[3] = {entry(L, R, i, i), 0, 0};
        if (!diag && i + 1 < n) {
            v[1] = entry(L, R, i, i + 1);
            v[2] = entry(L, R, i + 1, i);
        }
        cr__band_store(r, k, m, a->structure, v, diag ? 1 : 3, cplx);
    }
    r->ndim = 2;
    r->shape[0] = r->shape[1] = n;
    r->strides[0] = diag ? 1 : 2;
    r->strides[1] = diag ? 0 : 1;
    r->structure = a->structure;
    if (!diag)
        r->flags = 0; /* aliased storage: never written in place */
    return cr__give(arena, pA, r, out);
}

/* Whether a is read on its diagonal or band only: a Diagonal, Tridiagonal, SymTridiagonal or
 * Bidiagonal tag (band_cot, band_tangent). */
static bool band_operand(const cr_array *a)
{
    uint8_t s = a->structure;
    return s == CR_MAT_DIAGONAL || s == CR_MAT_TRIDIAGONAL || s == CR_MAT_SYMTRIDIAGONAL ||
           s == CR_MAT_BIDIAG_UPPER || s == CR_MAT_BIDIAG_LOWER;
}

/* The tangent t of the square argument *arg read on its band when t is an n x n array with a
 * Diagonal or band tag (its entries off the three central diagonals logically zero), in
 * O(n): T n x 3, T(i, 0) = Ṫ(i, i-1), T(i, 1) = Ṫ(i, i), T(i, 2) = Ṫ(i, i+1) (zero outside
 * the matrix). *ok false, nothing read, when arg is not differentiable or t is of another
 * form (then densified by the caller), or complex for real work. */
static cr_status band_tangent(cr_arena *arena, const cr_value *arg, cr_tangent t, bool cplx,
                              cr__cmat *T, bool *ok)
{
    *ok = false;
    if (arg->kind != CR_KIND_ARRAY || !cr__is_diff(arg))
        return CR_OK;
    cr_status st = cr_tangent_unthunk(t, &t);
    if (st != CR_OK || t.tag != CR_TAN_ARRAY)
        return st;
    const cr_array *d = t.u.arr;
    size_t n = arg->u.arr->shape[0];
    if (d->ndim != 2 || !band_operand(d) || d->shape[0] != n || d->shape[1] != n ||
        !cr_dtype_is_float((cr_dtype)d->dtype) || (d->dtype == CR_DT_C128 && !cplx))
        return CR_OK;
    st = cr__cmat_new(arena, cplx, n, 3, true, T);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++) {
        size_t ii = i * n + i; /* n ≥ 1 here, and i * n + i < n * n, A's element count */
        if (i > 0)
            cr__cmat_set(T, i, 0, cr_array_get_linear(d, ii - 1));
        cr__cmat_set(T, i, 1, cr_array_get_linear(d, ii));
        if (i + 1 < n)
            cr__cmat_set(T, i, 2, cr_array_get_linear(d, ii + 1));
    }
    *ok = true;
    return CR_OK;
}

/* R := R - T Y (solve's frule), T the band tangent (band_tangent) n x n, Y n x k: O(n k). */
static void band_sub_left(const cr__cmat *T, const cr__cmat *Y, cr__cmat *R)
{
    size_t n = Y->r;
    for (size_t q = 0; q < Y->c; q++)
        for (size_t i = 0; i < n; i++) {
            cr_complex v = cr__cmat_get(T, i, 1) * cr__cmat_get(Y, i, q);
            if (i > 0)
                v += cr__cmat_get(T, i, 0) * cr__cmat_get(Y, i - 1, q);
            if (i + 1 < n)
                v += cr__cmat_get(T, i, 2) * cr__cmat_get(Y, i + 1, q);
            cr__cmat_set(R, i, q, cr__cmat_get(R, i, q) - v);
        }
}

/* R := R - Y T (rdiv's frule), Y m x n, T the band tangent n x n: O(m n). */
static void band_sub_right(const cr__cmat *Y, const cr__cmat *T, cr__cmat *R)
{
    size_t n = Y->c;
    for (size_t j = 0; j < n; j++)
        for (size_t p = 0; p < Y->r; p++) {
            /* (Y T)(p, j) = Y(p, j-1) T(j-1, j) + Y(p, j) T(j, j) + Y(p, j+1) T(j+1, j) */
            cr_complex v = cr__cmat_get(Y, p, j) * cr__cmat_get(T, j, 1);
            if (j > 0)
                v += cr__cmat_get(Y, p, j - 1) * cr__cmat_get(T, j - 1, 2);
            if (j + 1 < n)
                v += cr__cmat_get(Y, p, j + 1) * cr__cmat_get(T, j + 1, 0);
            cr__cmat_set(R, p, j, cr__cmat_get(R, p, j) - v);
        }
}

/* Ā = -B̄ Yᴴ */
static cr_status solve_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    const cr__la_thunk *t = env;
    const solve_env *e = t->e;
    if (band_operand(e->A))
        return band_cot(arena, e->A, e->pA, neg_gyh, &t->g, &e->Y, out);
    return cr__give_neg_product(arena, 'N', &t->g, 'C', &e->Y, e->pA, out);
}

/* B̄ = A⁻ᴴ Ȳ, Ā = -B̄ Yᴴ (a thunk). */
static cr_status solve_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                                void *env)
{
    solve_env *e = cr__pb_start(dx, nx, true, env);
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
        st = cr__la_thunk_new(arena, solve_thunk_fn, e, &G, "solve_pullback_thunk", &dx[1]);
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
        st = cr__square_arg(arena, "solve", args, nargs, 0, &A, &ca);
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
static cr_status solve_rrule1(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                              cr_value *y, cr_pullback *pb, const void *udata)
{
    (void)who;
    CR__LA_ENV(arena, solve_env, e);
    cr_dtype dt = CR_DT_F64;
    cr_status st = solve_forward(arena, args, nargs, e, &dt);
    cr_array *o;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e->Y, e->B->ndim == 1, dt, &o);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail2(arena, args, udata, &e->pA, &e->pB, o, y, pb,
                           (cr_pullback){solve_pullback, e, "solve_pullback", nargs + 1});
}

/* frule: Ẏ = A⁻¹ (Ḃ - Ȧ Y); Ȧ read on its band in O(n) when it has a Diagonal or band tag
 * (band_tangent), densified otherwise. */
static cr_status solve_frule1(cr_arena *arena, const char *who, const cr_tangent *dargs,
                              const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    (void)who;
    solve_env e;
    cr_dtype dt = CR_DT_F64;
    cr_status st = solve_forward(arena, args, nargs, &e, &dt);
    cr_array *o;
    if (st == CR_OK)
        st = cr__cmat_out(arena, &e.Y, e.B->ndim == 1, dt, &o);
    cr__cmat dA = {0}, dB, R, T;
    bool none = false, band = false;
    if (st == CR_OK)
        st = band_tangent(arena, &args[0], dargs[1], e.cplx, &T, &band);
    if (st == CR_OK && band) {
        *y = cr_value_array(o);
        st = cr__cmat_dx(arena, "solve", dargs, args, 1, e.cplx, &dB);
    } else if (st == CR_OK) {
        st = cr__frule_pair_cmat(arena, "solve", dargs, args, 0, 1, e.cplx, o, y, &dA, &dB, dy,
                                 &none);
    }
    if (st != CR_OK || none)
        return st;
    if (dB.p != NULL)
        st = cr__cmat_copy(arena, &dB, &R);
    else
        st = cr__cmat_new(arena, e.cplx, e.Y.r, e.Y.c, true, &R);
    if (st != CR_OK)
        return st;
    if (band)
        band_sub_left(&T, &e.Y, &R);
    else if (dA.p != NULL)
        cr__cmat_gemm('N', 'N', -1.0, &dA, &e.Y, 1.0, &R);
    st = fac_solve(arena, "solve", &e.F, 'N', &R);
    cr_array *r = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &R, e.B->ndim == 1, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}
CR__LA_RULES(solve, 2)

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
        st = cr__square_arg(arena, "rdiv", args, nargs, 1, &A, &ca);
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

/* Ā = -Yᴴ B̄ */
static cr_status rdiv_thunk_fn(cr_arena *arena, cr_tangent *out, void *env)
{
    const cr__la_thunk *t = env;
    const rdiv_env *e = t->e;
    if (band_operand(e->A))
        return band_cot(arena, e->A, e->pA, neg_yhg, &e->Y, &t->g, out);
    return cr__give_neg_product(arena, 'C', &e->Y, 'N', &t->g, e->pA, out);
}

/* Y = B A⁻¹: B̄ = Ȳ A⁻ᴴ, Ā = -Yᴴ B̄ (a thunk). */
static cr_status rdiv_pullback(const cr_tangent *dy, cr_tangent *dx, size_t nx, cr_arena *arena,
                               void *env)
{
    rdiv_env *e = cr__pb_start(dx, nx, true, env);
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
    return cr__la_thunk_new(arena, rdiv_thunk_fn, e, &G, "rdiv_pullback_thunk", &dx[2]);
}

/* rdiv(B, A) = B / A = B A⁻¹. */
static cr_status rdiv_rrule1(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                             cr_value *y, cr_pullback *pb, const void *udata)
{
    (void)who;
    CR__LA_ENV(arena, rdiv_env, e);
    cr_dtype dt = CR_DT_F64;
    cr_status st = rdiv_forward(arena, args, nargs, e, &dt);
    cr_array *o;
    if (st == CR_OK)
        st = rdiv_out(arena, &e->Y, e->B->ndim == 1, dt, &o);
    if (st != CR_OK)
        return st;
    return cr__rrule_tail2(arena, args, udata, &e->pB, &e->pA, o, y, pb,
                           (cr_pullback){rdiv_pullback, e, "rdiv_pullback", nargs + 1});
}

/* frule: Ẏ = (Ḃ - Y Ȧ) A⁻¹; Ȧ read on its band in O(n) when it has a Diagonal or band tag
 * (band_tangent), densified otherwise. */
static cr_status rdiv_frule1(cr_arena *arena, const char *who, const cr_tangent *dargs,
                             const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    (void)who;
    rdiv_env e;
    memset(&e, 0, sizeof e);
    cr_dtype dt = CR_DT_F64;
    cr_status st = rdiv_forward(arena, args, nargs, &e, &dt);
    cr_array *o;
    bool vec = e.B != NULL && e.B->ndim == 1;
    if (st == CR_OK)
        st = rdiv_out(arena, &e.Y, vec, dt, &o);
    const cr_array *tb = NULL, *ta = NULL;
    cr__cmat T;
    bool none = false, band = false;
    if (st == CR_OK)
        st = band_tangent(arena, &args[1], dargs[2], e.cplx, &T, &band);
    if (st == CR_OK && band) {
        *y = cr_value_array(o);
        st = cr__dx_array(arena, "rdiv", dargs, args, 0, e.cplx ? CR_DT_C128 : CR_DT_F64, &tb);
    } else if (st == CR_OK) {
        st = cr__frule_pair(arena, "rdiv", dargs, args, e.cplx ? CR_DT_C128 : CR_DT_F64, o, y, &tb,
                            &ta, dy, &none);
    }
    if (st != CR_OK || none)
        return st;
    cr__cmat R;
    if (tb != NULL)
        st = row_mat(arena, tb, e.cplx, &R);
    else
        st = cr__cmat_new(arena, e.cplx, e.Y.r, e.Y.c, true, &R);
    if (st != CR_OK)
        return st;
    if (band)
        band_sub_right(&e.Y, &T, &R);
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
CR__LA_RULES(rdiv, 2)

/* ---- Test registrations ---------------------------------------------------------------- */

/* rdiv(B, A): the arguments of solve, swapped (B as rows). */
static cr_status sample_rdiv(cr_arena *arena, uint64_t *rng, cr_value *args, size_t nargs,
                             void *env)
{
    (void)env;
    cr_status st = cr__sample_sq(arena, rng, args, nargs, (void *)(uintptr_t)CR__SQ_GENERAL);
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
static const cr_rule_test k_t_general = {.sample = cr__sample_sq,
                                         .env = (void *)(uintptr_t)CR__SQ_GENERAL};

cr_status cr__linalg_register_lapack(cr_registry *reg)
{
    static const cr__linalg_rule k[] = {
        {&det_function, cr__linalg_fa, 1, det_frule, det_rrule, &k_t_general, &cr__form_det},
        {&logdet_function, cr__linalg_fa, 1, logdet_frule, logdet_rrule, &k_t_general,
         &cr__form_logdet},
        {&logabsdet_function, cr__linalg_fa, 1, logabsdet_frule, logabsdet_rrule, &k_t_general,
         &cr__form_logdet},
        {&matinv_function, cr__linalg_fa, 1, matinv_frule, matinv_rrule, &k_t_general,
         &cr__form_inv},
        {&solve_function, cr__linalg_fa, 2, solve_frule, solve_rrule, &k_t_general,
         &cr__form_solve},
        {&rdiv_function, cr__linalg_fa, 2, rdiv_frule, rdiv_rrule, &k_t_rdiv, &cr__form_rdiv},
    };
    return cr__linalg_add_rules(reg, k, sizeof k / sizeof k[0]);
}

#else /* !CR_HAVE_LAPACKE */

/* Without LAPACKE: the function values exist; calling them reports CR_EUNIMPL. */
CR__NO_LAPACK_FN(det, "det")
CR__NO_LAPACK_FN(logdet, "logdet")
CR__NO_LAPACK_FN(logabsdet, "logabsdet")
CR__NO_LAPACK_FN(matinv, "inv")
CR__NO_LAPACK_FN(solve, "solve")
CR__NO_LAPACK_FN(rdiv, "rdiv")

CR__NO_LAPACK_REGISTER(lapack)

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

/* ---- det, logdet ------------------------------------------------------------------------------
 */

/*
 * det(A): the pullback is Ā = ȳ C(A), C the cofactor matrix. det is linear in each row of A
 * separately, and row i of C (∂det/∂(row i)) does not depend on row i and is linear in every
 * other row k. So, as for the multilinear functions, its derivative along Ȧ is
 *     S_i = ȳ Σ_{k≠i} C_i(A with row k replaced by row k of Ȧ),
 * each term a call of det's own rrule at that matrix, its pullback applied to ȳ (rows i ≠ k
 * kept). Nothing is written but calls of the rule, and a singular A is no exception (the rule
 * takes the adjugate from the SVD there); the cost is n rule calls, O(n^4), per direction.
 */
static cr_status det_init(const cr_form_point *p, void **state)
{
    cr_status st = cr__form_state(p, sizeof(cr__form), 0, NULL, state);
    const cr__form *F = *state;
    if (st != CR_OK)
        return st;
    size_t n = F->x->ndim == 2 ? F->x->shape[0] : 0;
    return n == 0 || F->x->shape[1] != n ? CR_NOTHING /* the rule refused it when recorded */
                                         : CR_OK;
}

static cr_status det_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                         cr_tangent ydot, cr_tangent *S)
{
    (void)ydot;
    const cr__form *F = state;
    size_t n = F->x->shape[0];
    const double *xd;
    cr_array *Sa, *Ak;
    cr_status st;
    if ((st = cr__form_like_x(F, xdot[0], &xd)) != CR_OK || xd == NULL)
        return st;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK || (st = cr__form_new_s(F, &Ak)) != CR_OK)
        return st;
    double *s = Sa->data, *ak = Ak->data;
    for (size_t r = 0; r < n; r++) {
        memcpy(ak, F->x->data, n * n * sizeof *ak);
        memcpy(ak + r * n, xd + r * n, n * sizeof *ak);
        cr_value av = cr_value_array(Ak), y;
        cr_pullback pb;
        cr_tangent dx[2];
        const double *C;
        st = cr_rrule(p->cfg, F->arena, &cr_fn_det, &av, 1, &y, &pb);
        if (st == CR_OK)
            st = cr_pullback_call(F->arena, &pb, &p->ybar, dx, 2);
        if (st == CR_OK)
            st = cr__form_like_x(F, dx[1], &C);
        if (st != CR_OK)
            return st;
        for (size_t q = 0; q < n && C != NULL; q++)
            if (q != r)
                for (size_t c = 0; c < n; c++)
                    s[q * n + c] += C[q * n + c];
    }
    S[0] = cr_tangent_array(Sa);
    return CR_OK;
}

const cr_rule_form cr__form_det = {cr__form_check_matrix, det_init, det_dir};

typedef struct logdet_state {
    cr__form F;
    double yb; /* ȳ (of the first element for logabsdet) */
} logdet_state;

/*
 * logdet(A) of a matrix with positive determinant: the pullback is Ā = ȳ A⁻ᵀ, so
 *     S = ȳ Ẏᵀ,   Ẏ = -A⁻¹ Ȧ A⁻¹, matinv's frule tangent at A along Ȧ.
 * logabsdet(A) = (log|det A|, sign det A) of a real A, of either sign: its pullback is the
 * same, Ā = ȳ₁ A⁻ᵀ with ȳ₁ the cotangent of the first element (the sign is piecewise
 * constant: its cotangent adds nothing), so its S is the same with ȳ₁ for ȳ.
 */
/* logdet along Ȧ: S = ȳ (d inv)ᵀ from matinv's frule (the derivation above). */
static cr_status logdet_step(const void *state, const cr__form_along *d, double *s)
{
    const logdet_state *w = state;
    const cr__form *F = &w->F;
    size_t n = F->x->ndim == 2 ? F->x->shape[0] : 0;
    const double *Yd;
    cr_status st = cr__form_like_x(F, d->dy, &Yd);
    for (size_t r = 0; r < n && Yd != NULL && st == CR_OK; r++)
        for (size_t c = 0; c < n; c++)
            s[r * n + c] = w->yb * Yd[c * n + r];
    return st;
}

static cr_status logdet_init(const cr_form_point *p, void **state)
{
    cr_tangent ybar = p->ybar;
    if (p->y->kind == CR_KIND_STRUCT && cr_tangent_is_zero(ybar = cr_tangent_field(ybar, 0)))
        return CR_NOTHING;
    CR__LA_FORM_STATE(p, state, logdet_state, 0, w);
    w->yb = cr__form_scalar(ybar);
    w->F.fact = &cr_fn_matinv;
    w->F.step = logdet_step;
    return CR_OK;
}

const cr_rule_form cr__form_logdet = {cr__form_check_matrix, logdet_init, cr__form_frule_dir};

/* ---- inv, solve, rdiv -------------------------------------------------------------------------
 */

/* solve(A, B), inv(A), rdiv(B, A) (a: A's position): A and B dense, Diagonal, Upper, Lower,
 * Symmetric or Hermitian (S projected by the engine as the rule projects the cotangent); real
 * arguments (complex variables are refused by the tape; a complex constant here too). */
static const char *real_a_b(const cr_value *args, size_t nargs, size_t a)
{
    for (size_t j = 0; j < nargs && j < 2; j++) {
        const cr_array *x = args[j].kind == CR_KIND_ARRAY ? args[j].u.arr : NULL;
        if (x != NULL && x->dtype == CR_DT_C128)
            return j == a ? "A is complex; the form covers real matrices"
                          : "B is complex; the form covers real B";
    }
    return NULL;
}

CR__LA_FORM_CHECK(inv_check, 1, real_a_b(args, nargs, 0))

CR__LA_FORM_CHECK(solve_check, 2, real_a_b(args, nargs, 0))

CR__LA_FORM_CHECK(rdiv_check, 2, real_a_b(args, nargs, 1))

typedef struct inv_state {
    cr__form F;
    cr_array *P, *Q;
} inv_state;

/*
 * inv(A) = Y: the pullback is Ā = -Yᵀ Ȳ Yᵀ (projected onto A's structure). Its derivative
 * along Ȧ, with Ẏ = -Y Ȧ Y the result's tangent (matinv's frule, from the forward sweep), by
 * the product rule:
 *     S = -(Ẏᵀ Ȳ Yᵀ + Yᵀ Ȳ Ẏᵀ) = -(Ẏᵀ P + Q Ẏᵀ),   P = Ȳ Yᵀ, Q = Yᵀ Ȳ (once per record).
 */
/* inv along Ȧ, from Ẏ (the derivation above). */
static cr_status inv_step(const void *state, const cr__form_along *d, double *s)
{
    const inv_state *w = state;
    size_t n = w->F.x->shape[0];
    if (d->yd != NULL) {
        cr__form_mm(-1.0, d->yd, n, n, 1, w->P->data, n, n, 0, 0.0, s);
        cr__form_mm(-1.0, w->Q->data, n, n, 0, d->yd, n, n, 1, 1.0, s);
    }
    return CR_OK;
}

static cr_status inv_init(const cr_form_point *p, void **state)
{
    const double *yb, *y;
    cr_status st = cr__form_state(p, sizeof(inv_state), 0, NULL, state);
    inv_state *w = *state;
    if (st == CR_OK) {
        w->F.step = inv_step;
        w->F.ydot = true;
    }
    if (st == CR_OK && (st = cr__form_like_x(&w->F, p->ybar, &yb)) == CR_OK && yb == NULL)
        return CR_NOTHING;
    if (st == CR_OK)
        st = cr__form_y_array(&w->F, &y);
    if (st == CR_OK && (st = cr__form_new_s(&w->F, &w->P)) == CR_OK)
        st = cr__form_new_s(&w->F, &w->Q);
    if (st != CR_OK)
        return st;
    size_t n = w->F.x->shape[0];
    cr__form_mm(1.0, yb, n, n, 0, y, n, n, 1, 0.0, w->P->data);
    cr__form_mm(1.0, y, n, n, 1, yb, n, n, 0, 0.0, w->Q->data);
    return CR_OK;
}

const cr_rule_form cr__form_inv = {inv_check, inv_init, cr__form_frule_dir};

/* solve's and rdiv's state: B's position, the pullback with B̄ unprojected, and B̄ = G. */
typedef struct solve_state {
    cr__form F; /* over A */
    size_t jb;
    cr_pullback pb;
    const cr_array *Bv;
    const double *bb;
} solve_state;

/* Both: A at position a, B at 1 - a; S = 0 when A is a constant (linear in B). */
static cr_status solve_rdiv_init(const cr_form_point *p, void **state, size_t a)
{
    if (!p->var[a])
        return CR_NOTHING;
    cr_status st = cr__form_state(p, sizeof(solve_state), a, NULL, state);
    solve_state *w = *state;
    if (st != CR_OK)
        return st;
    if (w->F.x->ndim != 2 || w->F.x->shape[0] != w->F.x->shape[1])
        return CR_NOTHING; /* the rule refused it when recorded */
    size_t jb = 1 - a;
    const cr_array *Bv = p->args[jb].u.arr, *Bb;
    cr_tangent dx[3];
    if ((st = cr__form_pullback_dense(&w->F, jb, &w->pb)) != CR_OK ||
        (st = cr_pullback_call(p->arena, &w->pb, &p->ybar, dx, 3)) != CR_OK ||
        (st = cr__tan_array(p->arena, p->name, dx[jb + 1], Bv->ndim, Bv->shape, CR_DT_F64, &Bb)) !=
            CR_OK)
        return st;
    if (Bb == NULL)
        return CR_NOTHING; /* Ȳ = 0 */
    w->jb = jb;
    w->Bv = Bv;
    w->bb = Bb->data;
    return CR_OK;
}

/*
 * solve(A, B) = A \ B = Y (B a vector or a matrix): the pullback is B̄ = P_B(G), G = A⁻ᵀ Ȳ,
 * Ā = P(-G Yᵀ), P and P_B the projections onto A's and B's structures (the identity for a
 * dense matrix). Along (Ȧ, Ḃ), with Ẏ the result's tangent (solve's frule, from the forward
 * sweep) and d(A⁻ᵀ) = -A⁻ᵀ Ȧᵀ A⁻ᵀ:
 *     dG = -A⁻ᵀ Ȧᵀ G = G(W),   W = -Ȧᵀ G,   S_B = P_B(G(W)),
 *     S_A = P(-dG Yᵀ - G Ẏᵀ) = Ā(W) - P(G Ẏᵀ),
 * where G(W) and Ā(W) are the pullback applied to W (one call gives both; Ā(W) is projected
 * already, and P(P(X)) = P(X)), the recorded one for a dense B, else the rule's at B's dense
 * matrix (pullback_dense: G unprojected). solve is linear in B: with A a constant, S = 0.
 *
 * rdiv(B, A) = B / A = B A⁻¹ = Y (A n x n; B m x n, or a vector of n taken as one row): the
 * pullback is B̄ = P_B(G), G = Ȳ A⁻ᵀ, Ā = P(-Yᵀ G). Along (Ȧ, Ḃ):
 *     dG = -Ȳ A⁻ᵀ Ȧᵀ A⁻ᵀ = G(W),   W = -G Ȧᵀ (m x n),   S_B = P_B(G(W)),
 *     S_A = P(-Ẏᵀ G - Yᵀ dG) = Ā(W) - P(Ẏᵀ G).
 */
static cr_status solve_init(const cr_form_point *p, void **state)
{
    return solve_rdiv_init(p, state, 0);
}

static cr_status rdiv_init(const cr_form_point *p, void **state)
{
    return solve_rdiv_init(p, state, 1);
}

static cr_status solve_rdiv_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                                cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    const solve_state *w = state;
    const cr__form *F = &w->F;
    size_t a = F->xj, jb = w->jb, n = F->x->shape[0];
    bool rdiv = a == 1;
    const cr_array *Bv = w->Bv;
    size_t m = Bv->ndim == 1 ? 1 : Bv->shape[rdiv ? 0 : 1];
    const double *xd, *yd, *Sa;
    cr_array *SA, *W;
    cr_tangent dw[3];
    cr_status st;
    if ((st = cr__form_like_x(F, xdot[a], &xd)) != CR_OK ||
        (st = cr__form_y_dot_arr(F, ydot, &yd)) != CR_OK)
        return st;
    if (xd == NULL && yd == NULL)
        return CR_OK;
    if ((st = cr__form_new_s(F, &SA)) != CR_OK)
        return st;
    if (xd != NULL) {
        if ((st = cr__new(F->arena, CR_DT_F64, Bv->ndim, Bv->shape, false, &W)) != CR_OK)
            return st;
        if (rdiv)
            cr__form_mm(-1.0, w->bb, m, n, 0, xd, n, n, 1, 0.0, W->data); /* W = -B̄ Ȧᵀ */
        else
            cr__form_mm(-1.0, xd, n, n, 1, w->bb, n, m, 0, 0.0, W->data); /* W = -Ȧᵀ B̄ */
        cr_tangent wt = cr_tangent_array(W);
        if ((st = cr_pullback_call(F->arena, &w->pb, &wt, dw, 3)) != CR_OK ||
            (st = cr__form_like_x(F, dw[a + 1], &Sa)) != CR_OK)
            return st;
        if (Sa != NULL)
            memcpy(SA->data, Sa, n * n * sizeof *Sa);
        S[jb] = dw[jb + 1];
    }
    if (yd != NULL && rdiv)
        cr__form_mm(-1.0, yd, m, n, 1, w->bb, m, n, 0, 1.0, SA->data); /* - Ẏᵀ B̄ */
    else if (yd != NULL)
        cr__form_mm(-1.0, w->bb, n, m, 0, yd, n, m, 1, 1.0, SA->data); /* - B̄ Ẏᵀ */
    S[a] = cr_tangent_array(SA);
    return CR_OK;
}

const cr_rule_form cr__form_solve = {solve_check, solve_init, solve_rdiv_dir};
const cr_rule_form cr__form_rdiv = {rdiv_check, rdiv_init, solve_rdiv_dir};
