/*
 * Shared helpers of the LAPACK-level linear-algebra rule files (linalg_impl.h): column-major
 * work matrices, their conversion from and to row-major arrays, gemm on them, (co)tangents
 * as work matrices, tuple cotangent fields and the LAPACK error helpers.
 */
#include <math.h>
#include <string.h>

#include "linalg_impl.h"

#if defined(CR_HAVE_CBLAS)
#include <cblas.h>
#endif

/* ---- Column-major work matrices ---------------------------------------------------------- */

cr_status cr__cmat_new(cr_arena *arena, bool cplx, size_t r, size_t c, bool zero, cr__cmat *m)
{
    size_t n, es = cplx ? sizeof(cr_complex) : sizeof(double), shape[2] = {r, c};
    m->p = NULL;
    cr_status st = cr__ck_numel(cr_arena_ctx(arena), "linalg work matrix", 2, shape, es, &n);
    if (st != CR_OK)
        return st;
    m->p = zero ? cr_arena_calloc(arena, n ? n : 1, es, 0)
                : cr__arena_array(arena, "linalg work matrix", n, es, 0);
    m->r = r;
    m->c = c;
    m->cplx = cplx;
    return m->p == NULL ? CR__ALLOC_STATUS(arena) : CR_OK;
}

cr_status cr__cmat_from(cr_arena *arena, const cr_array *a, bool cplx, cr__cmat *m)
{
    const cr_array *d;
    cr_status st = cr__dense(arena, a, cplx ? CR_DT_C128 : CR_DT_F64, &d);
    size_t r = a->ndim == 0 ? 1 : a->shape[0], c = a->ndim == 2 ? a->shape[1] : 1;
    if (st == CR_OK)
        st = cr__cmat_new(arena, cplx, r, c, false, m);
    if (st != CR_OK)
        return st;
    if (cplx) {
        const cr_complex *s = d->data;
        cr_complex *o = m->p;
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < c; j++)
                o[i + j * r] = s[i * c + j];
    } else {
        const double *s = d->data;
        double *o = m->p;
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < c; j++)
                o[i + j * r] = s[i * c + j];
    }
    return CR_OK;
}

cr_status cr__cmat_copy_as(cr_arena *arena, const cr__cmat *s, bool cplx, cr__cmat *m)
{
    cr_status st = cr__cmat_new(arena, cplx, s->r, s->c, false, m);
    if (st != CR_OK)
        return st;
    if (cplx == s->cplx) {
        memcpy(m->p, s->p, s->r * s->c * (cplx ? sizeof(cr_complex) : sizeof(double)));
        return CR_OK;
    }
    for (size_t j = 0; j < s->c; j++)
        for (size_t i = 0; i < s->r; i++)
            cr__cmat_set(m, i, j, cr__cmat_get(s, i, j));
    return CR_OK;
}

cr_status cr__cmat_op(cr_arena *arena, char op, const cr__cmat *s, cr__cmat *m)
{
    if (op == 'N')
        return cr__cmat_copy(arena, s, m);
    cr_status st = cr__cmat_new(arena, s->cplx, s->c, s->r, false, m);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < s->r; i++)
        for (size_t j = 0; j < s->c; j++) {
            cr_complex v = cr__cmat_get(s, i, j);
            cr__cmat_set(m, j, i, op == 'C' ? conj(v) : v);
        }
    return CR_OK;
}

void cr__cmat_conj(cr__cmat *m)
{
    if (!m->cplx)
        return;
    cr_complex *p = m->p;
    for (size_t i = 0; i < m->r * m->c; i++)
        p[i] = conj(p[i]);
}

void cr__cmat_tri(cr__cmat *m, char uplo, bool strict)
{
    for (size_t j = 0; j < m->c; j++)
        for (size_t i = 0; i < m->r; i++) {
            bool keep = uplo == 'U' ? (strict ? i < j : i <= j) : (strict ? i > j : i >= j);
            if (!keep)
                cr__cmat_set(m, i, j, 0.0);
        }
}

cr_status cr__cmat_to_array(cr_arena *arena, const cr__cmat *m, bool vec, cr_array **out)
{
    size_t shape[2] = {m->r, m->c};
    cr_status st = cr__new(arena, m->cplx ? CR_DT_C128 : CR_DT_F64, vec ? 1 : 2, shape, false, out);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < m->r; i++)
        for (size_t j = 0; j < m->c; j++)
            cr__store(*out, (ptrdiff_t)(i * m->c + j), cr__cmat_get(m, i, j));
    return CR_OK;
}

cr_status cr__cmat_out(cr_arena *arena, const cr__cmat *m, bool vec, cr_dtype dt, cr_array **out)
{
    cr__cmat w = *m;
    cr_status st = CR_OK;
    if (m->cplx && dt != CR_DT_C128)
        st = cr__cmat_copy_as(arena, m, false, &w);
    cr_array *a = NULL;
    if (st == CR_OK)
        st = cr__cmat_to_array(arena, &w, vec, &a);
    return st != CR_OK ? st : cr__cast(arena, a, dt, out);
}

cr_status cr__cmat_give(cr_arena *arena, const cr_project *p, const cr__cmat *m, bool vec,
                        cr_tangent *out)
{
    cr_array *r;
    cr_status st = cr__cmat_to_array(arena, m, vec, &r);
    return st != CR_OK ? st : cr__give(arena, p, r, out);
}

void cr__cmat_gemm(char ta, char tb, cr_complex alpha, const cr__cmat *A, const cr__cmat *B,
                   cr_complex beta, cr__cmat *C)
{
    size_t m = ta == 'N' ? A->r : A->c, k = ta == 'N' ? A->c : A->r;
    size_t n = tb == 'N' ? B->c : B->r;
    if (m == 0 || n == 0)
        return;
#if defined(CR_HAVE_CBLAS)
    if (k > 0 && A->cplx == C->cplx && B->cplx == C->cplx) {
        enum CBLAS_TRANSPOSE a = ta == 'N' ? CblasNoTrans : ta == 'T' ? CblasTrans : CblasConjTrans;
        enum CBLAS_TRANSPOSE b = tb == 'N' ? CblasNoTrans : tb == 'T' ? CblasTrans : CblasConjTrans;
        int lda = (int)(A->r ? A->r : 1), ldb = (int)(B->r ? B->r : 1),
            ldc = (int)(C->r ? C->r : 1);
        if (C->cplx)
            cblas_zgemm(CblasColMajor, a, b, (int)m, (int)n, (int)k, &alpha, A->p, lda, B->p, ldb,
                        &beta, C->p, ldc);
        else
            cblas_dgemm(CblasColMajor, a, b, (int)m, (int)n, (int)k, creal(alpha), A->p, lda, B->p,
                        ldb, creal(beta), C->p, ldc);
        return;
    }
#endif
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            cr_complex acc = 0;
            for (size_t l = 0; l < k; l++) {
                cr_complex a = ta == 'N' ? cr__cmat_get(A, i, l) : cr__cmat_get(A, l, i);
                cr_complex b = tb == 'N' ? cr__cmat_get(B, l, j) : cr__cmat_get(B, j, l);
                if (ta == 'C')
                    a = conj(a);
                if (tb == 'C')
                    b = conj(b);
                acc += a * b;
            }
            cr_complex c0 = beta == 0 ? 0 : beta * cr__cmat_get(C, i, j);
            cr__cmat_set(C, i, j, alpha * acc + c0);
        }
}

cr_status cr__cmat_mul(cr_arena *arena, char ta, char tb, cr_complex alpha, const cr__cmat *A,
                       const cr__cmat *B, cr__cmat *C)
{
    size_t m = ta == 'N' ? A->r : A->c, n = tb == 'N' ? B->c : B->r;
    cr_status st = cr__cmat_new(arena, A->cplx || B->cplx, m, n, true, C);
    if (st == CR_OK)
        cr__cmat_gemm(ta, tb, alpha, A, B, 0.0, C);
    return st;
}

/* ---- Tangents ---------------------------------------------------------------------------- */

/* m from the (co)tangent array a that a call returning st gave (p NULL when a is). */
static cr_status cmat_of(cr_arena *arena, cr_status st, const cr_array *a, bool cplx, cr__cmat *m)
{
    m->p = NULL;
    return st != CR_OK || a == NULL ? st : cr__cmat_from(arena, a, cplx, m);
}

cr_status cr__cmat_tan(cr_arena *arena, const char *who, cr_tangent t, size_t ndim,
                       const size_t *shape, bool cplx, cr__cmat *m)
{
    const cr_array *g = NULL;
    cr_status st = cr__tan_array(arena, who, t, ndim, shape, cplx ? CR_DT_C128 : CR_DT_F64, &g);
    return cmat_of(arena, st, g, cplx, m);
}

cr_status cr__cmat_dx(cr_arena *arena, const char *who, const cr_tangent *dargs,
                      const cr_value *args, size_t i, bool cplx, cr__cmat *m)
{
    const cr_array *t = NULL;
    cr_status st = cr__dx_array(arena, who, dargs, args, i, cplx ? CR_DT_C128 : CR_DT_F64, &t);
    return cmat_of(arena, st, t, cplx, m);
}

cr_status cr__array_arg1(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                         const cr_array **A)
{
    cr_status st = cr__nargs(arena, who, nargs, 1, 1);
    return st != CR_OK ? st : cr__array_arg(arena, who, args, nargs, 0, A);
}

cr_status cr__tangent_like(cr_arena *arena, cr_array *o, const cr__cmat *m, bool vec,
                           cr_tangent *out)
{
    cr_array *r = NULL;
    cr_status st = cr__cmat_to_array(arena, m, vec, &r);
    if (st != CR_OK)
        return st;
    cr_value v = cr_value_array(o);
    return cr_project_tangent(arena, &v, cr_tangent_array(r), out);
}

const cr_argspec cr__linalg_fa[3] = {
    {CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL}, {CR__M_FARRAY, NULL}};

cr_status cr__linalg_add_rules(cr_registry *reg, const cr__linalg_rule *k, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cr_status st = cr__add_rule_so(reg, k[i].fn, k[i].args, k[i].n, false, k[i].frule,
                                       k[i].rrule, k[i].test, CR_NONLINEAR, k[i].form);
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

cr_status cr__rrule_tail(cr_arena *arena, const cr_value *args, size_t nargs, const void *udata,
                         cr_project ***p, cr_array *o, cr_value *y, cr_pullback *pb,
                         cr_pullback pbv)
{
    *y = cr_value_array(o);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    cr_status st = cr__projectors(arena, args, nargs, p);
    if (st == CR_OK)
        *pb = pbv;
    return st;
}

cr_status cr__rrule_tail1(cr_arena *arena, const cr_value *arg, const void *udata, cr_project **p,
                          cr_pullback *pb, cr_pullback pbv)
{
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    cr_status st = cr_project_new(arena, arg, p);
    if (st == CR_OK)
        *pb = pbv;
    return st;
}

cr_status cr__rrule_tail2(cr_arena *arena, const cr_value *args, const void *udata, cr_project **p0,
                          cr_project **p1, cr_array *o, cr_value *y, cr_pullback *pb,
                          cr_pullback pbv)
{
    *y = cr_value_array(o);
    if (udata == CR__PRIMAL_ONLY)
        return CR_OK;
    cr_status st = cr_project_new(arena, &args[0], p0);
    if (st == CR_OK)
        st = cr_project_new(arena, &args[1], p1);
    if (st == CR_OK)
        *pb = pbv;
    return st;
}

cr_status cr__frule_pair(cr_arena *arena, const char *who, const cr_tangent *dargs,
                         const cr_value *args, cr_dtype wdt, cr_array *o, cr_value *y,
                         const cr_array **t0, const cr_array **t1, cr_tangent *dy, bool *none)
{
    *y = cr_value_array(o);
    cr_status st = cr__dx_array(arena, who, dargs, args, 0, wdt, t0);
    if (st == CR_OK)
        st = cr__dx_array(arena, who, dargs, args, 1, wdt, t1);
    *none = st == CR_OK && *t0 == NULL && *t1 == NULL;
    if (*none)
        *dy = cr_tangent_zero();
    return st;
}

cr_status cr__frule_pair_cmat(cr_arena *arena, const char *who, const cr_tangent *dargs,
                              const cr_value *args, size_t i0, size_t i1, bool cplx, cr_array *o,
                              cr_value *y, cr__cmat *t0, cr__cmat *t1, cr_tangent *dy, bool *none)
{
    *y = cr_value_array(o);
    cr_status st = cr__cmat_dx(arena, who, dargs, args, i0, cplx, t0);
    if (st == CR_OK)
        st = cr__cmat_dx(arena, who, dargs, args, i1, cplx, t1);
    *none = st == CR_OK && t0->p == NULL && t1->p == NULL;
    if (*none)
        *dy = cr_tangent_zero();
    return st;
}

cr_status cr__tuple_field(cr_arena *arena, const char *who, cr_tangent dy, size_t i,
                          cr_tangent *out)
{
    cr_status st = cr__tuple_cotangent(arena, who, "a tuple", dy, &dy);
    if (st == CR_OK)
        *out = cr_tangent_is_zero(dy) ? cr_tangent_zero() : cr_tangent_field(dy, i);
    return st;
}

cr_status cr__la_thunk_new(cr_arena *arena, cr_thunk_fn fn, const void *e, const cr__cmat *g,
                           const char *name, cr_tangent *out)
{
    cr__la_thunk *t = cr_arena_alloc(arena, sizeof *t, _Alignof(cr__la_thunk));
    if (t == NULL)
        return CR__ALLOC_STATUS(arena);
    *t = (cr__la_thunk){e, *g};
    return cr__thunk(arena, fn, NULL, t, name, out);
}

cr_status cr__give_neg_product(cr_arena *arena, char tx, const cr__cmat *X, char ty,
                               const cr__cmat *Y, const cr_project *p, cr_tangent *out)
{
    cr__cmat R;
    cr_status st = cr__cmat_mul(arena, tx, ty, -1.0, X, Y, &R);
    return st != CR_OK ? st : cr__cmat_give(arena, p, &R, false, out);
}

cr_status cr__pull_matrix(cr_arena *arena, const char *who, const cr_tangent *dy, size_t r,
                          size_t c, bool cplx, cr_tangent *dx, cr__cmat *G)
{
    size_t shape[2] = {r, c};
    dx[0] = cr_tangent_none();
    cr_status st = cr__cmat_tan(arena, who, *dy, 2, shape, cplx, G);
    if (st != CR_OK || G->p == NULL) {
        G->p = NULL;
        dx[1] = cr_tangent_zero();
    }
    return st;
}

cr_status cr__rrule_out1(cr_arena *arena, const cr__cmat *Y, cr_dtype dt, const cr_value *args,
                         const void *udata, cr_project **p, cr_value *y, cr_pullback *pb,
                         cr_pullback pbv)
{
    cr_array *o;
    cr_status st = cr__cmat_out(arena, Y, false, dt, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    return cr__rrule_tail1(arena, &args[0], udata, p, pb, pbv);
}

cr_status cr__frule_out1(cr_arena *arena, const char *who, const cr__cmat *Y, cr_dtype dt,
                         const cr_tangent *dargs, const cr_value *args, cr_value *y, cr__cmat *dA,
                         cr_tangent *dy)
{
    cr_array *o;
    dA->p = NULL;
    cr_status st = cr__cmat_out(arena, Y, false, dt, &o);
    if (st != CR_OK)
        return st;
    *y = cr_value_array(o);
    return cr__frule_dx0(arena, who, dargs, args, Y->cplx, dA, dy);
}

cr_status cr__frule_dx0(cr_arena *arena, const char *who, const cr_tangent *dargs,
                        const cr_value *args, bool cplx, cr__cmat *dA, cr_tangent *dy)
{
    cr_status st = cr__cmat_dx(arena, who, dargs, args, 0, cplx, dA);
    if (st != CR_OK || dA->p == NULL) {
        dA->p = NULL;
        *dy = cr_tangent_zero();
    }
    return st;
}

cr_status cr__cmat_project(cr_arena *arena, const cr_value *y, const cr__cmat *m, cr_tangent *dy)
{
    cr_array *r;
    cr_status st = cr__cmat_to_array(arena, m, false, &r);
    return st != CR_OK ? st : cr_project_tangent(arena, y, cr_tangent_array(r), dy);
}

/* ---- LAPACK ------------------------------------------------------------------------------ */

#if defined(CR_HAVE_LAPACKE)

cr_status cr__tri_left(cr_arena *arena, const char *who, const cr__cmat *T, char uplo, char op,
                       char diag, cr__cmat *X)
{
    size_t n = T->r;
    if (n == 0 || X->c == 0)
        return CR_OK;
    cr__cmat Tc = *T;
    cr_status st = CR_OK;
    if (X->cplx && !T->cplx)
        st = cr__cmat_copy_as(arena, T, true, &Tc);
    if (st != CR_OK)
        return st;
    char t = op == 'N' ? 'N' : (X->cplx ? 'C' : 'T');
    lapack_int ln = (lapack_int)n,
               info = X->cplx ? LAPACKE_ztrtrs_work(LAPACK_COL_MAJOR, uplo, t, diag, ln,
                                                    (lapack_int)X->c, Tc.p, ln, X->p, ln)
                              : LAPACKE_dtrtrs_work(LAPACK_COL_MAJOR, uplo, t, diag, ln,
                                                    (lapack_int)X->c, Tc.p, ln, X->p, ln);
    return info != 0 ? cr__lapack_fail(arena, who, info) : CR_OK;
}

cr_status cr__lapack_fail(cr_arena *arena, const char *who, lapack_int info)
{
    return CR__FAIL(arena, CR_EBACKEND, "%s: LAPACK reported info = %d", who, (int)info);
}

cr_status cr__lapack_finite(cr_arena *arena, const char *who, const cr__cmat *A)
{
    size_t n = A->r * A->c;
    for (size_t e = 0; e < n; e++) {
        bool ok = A->cplx ? isfinite(creal(((const cr_complex *)A->p)[e])) &&
                                isfinite(cimag(((const cr_complex *)A->p)[e]))
                          : isfinite(((const double *)A->p)[e]);
        if (!ok)
            return CR__FAIL(arena, CR_EDOMAIN,
                            "%s: element (%zu, %zu) of the matrix is not finite; the "
                            "decomposition is not defined there",
                            who, e % A->r, e / A->r);
    }
    return CR_OK;
}

#else /* !CR_HAVE_LAPACKE */

cr_status cr__no_lapack(cr_arena *arena, const cr_value *f, const cr_value *args, size_t nargs,
                        cr_value *out)
{
    (void)args;
    (void)nargs;
    (void)out;
    return CR__FAIL(arena, CR_EUNIMPL, "%s needs LAPACKE, which this build of chainrules lacks",
                    f->u.func.fn->name);
}

#endif /* CR_HAVE_LAPACKE */
