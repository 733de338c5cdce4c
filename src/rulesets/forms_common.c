/*
 * Shared parts of the built-in second-order forms (forms_impl.h): the array argument, its
 * slices, the cotangent and tangents in f64, and the calls of other rules a form makes.
 */
#include <complex.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "forms_impl.h"

cr_status cr__form_init(cr__form *F, const cr_form_point *p, size_t xj, const cr_value *dims)
{
    F->p = p;
    F->arena = p->arena;
    F->who = p->name;
    F->xj = xj;
    F->ns = 1;
    F->sl = NULL;
    F->fact = NULL;
    F->step = NULL;
    F->ydot = false;
    cr_status st = cr__dense(p->arena, p->args[xj].u.arr, CR_DT_F64, &F->x);
    if (st != CR_OK)
        return st;
    const cr_array *x = F->x;
    F->N = cr_array_numel(x);
    if (dims == NULL)
        return CR_OK;
    bool mask[CR_ARRAY_MAX_DIMS] = {false};
    if ((st = cr__dims_arg(p->arena, F->who, dims, x->ndim, mask)) != CR_OK)
        return st;
    /* The slice of element (i_0, ..., i_{n-1}) is its index in the result, whose reduced
     * dimensions have extent 1: Σ over the kept dimensions q of i_q times q's stride. */
    size_t ostride[CR_ARRAY_MAX_DIMS], ns = 1;
    for (size_t q = x->ndim; q-- > 0;) {
        ostride[q] = mask[q] ? 0 : ns;
        ns *= mask[q] ? 1 : x->shape[q];
    }
    F->ns = ns;
    if (ns == 1 || F->N == 0)
        return CR_OK;
    size_t *sl = cr__arena_array(p->arena, F->who, F->N, sizeof *sl, _Alignof(size_t));
    if (sl == NULL)
        return CR__ALLOC_STATUS(p->arena);
    size_t idx[CR_ARRAY_MAX_DIMS] = {0}, s = 0;
    for (size_t e = 0; e < F->N; e++) {
        sl[e] = s;
        for (size_t q = x->ndim; q-- > 0;) { /* the next index, row-major */
            s += ostride[q];
            if (++idx[q] < x->shape[q])
                break;
            s -= ostride[q] * idx[q];
            idx[q] = 0;
        }
    }
    F->sl = sl;
    return CR_OK;
}

cr_status cr__form_state(const cr_form_point *p, size_t size, size_t xj, const cr_value *dims,
                         void **out)
{
    *out = NULL;
    void *s = cr_arena_calloc(p->arena, 1, size, _Alignof(max_align_t));
    if (s == NULL)
        return CR__ALLOC_STATUS(p->arena);
    cr_status st = cr__form_init(s, p, xj, dims);
    if (st == CR_OK)
        *out = s;
    return st;
}

cr_status cr__form_ybar_slices(const cr__form *F, const double **yb)
{
    const cr_value *y = F->p->y;
    const cr_array *yv = y->kind == CR_KIND_ARRAY ? y->u.arr : NULL;
    static const size_t k_one[1] = {1};
    const cr_array *Yb;
    cr_status st = cr__tan_array(F->arena, F->who, F->p->ybar, yv != NULL ? yv->ndim : 0,
                                 yv != NULL ? yv->shape : k_one, CR_DT_F64, &Yb);
    if (st == CR_OK && Yb == NULL)
        return CR_EINVAL; /* the engine calls a form with a nonzero cotangent only */
    if (st == CR_OK)
        *yb = Yb->data;
    return st;
}

cr_status cr__form_like_x(const cr__form *F, cr_tangent v, const double **out)
{
    const cr_array *a;
    cr_status st = cr__tan_array(F->arena, F->who, v, F->x->ndim, F->x->shape, CR_DT_F64, &a);
    *out = st == CR_OK && a != NULL ? a->data : NULL;
    return st;
}

cr_status cr__form_like_x0(const cr__form *F, cr_tangent v, const double **out)
{
    cr_status st = cr__form_like_x(F, v, out);
    if (st == CR_OK && *out == NULL) {
        cr_array *z;
        if ((st = cr__form_new_s(F, &z)) == CR_OK)
            *out = z->data;
    }
    return st;
}

double cr__form_scalar(cr_tangent v)
{
    if (cr_tangent_is_thunk(v) && cr_tangent_unthunk(v, &v) != CR_OK)
        return 0.0;
    switch ((cr_tag)v.tag) {
    case CR_TAN_F64:
        return v.u.f64;
    case CR_TAN_F32:
        return v.u.f32;
    default:
        return 0.0;
    }
}

cr_status cr__form_y_dot_arr(const cr__form *F, cr_tangent ydot, const double **yd)
{
    const cr_array *yv = F->p->y->u.arr, *a;
    *yd = NULL;
    cr_status st = cr__tan_array(F->arena, F->who, ydot, yv->ndim, yv->shape, CR_DT_F64, &a);
    if (st == CR_OK && a != NULL)
        *yd = a->data;
    return st;
}

cr_status cr__form_y_array(const cr__form *F, const double **y)
{
    const cr_array *ya;
    cr_status st = cr__dense(F->arena, F->p->y->u.arr, CR_DT_F64, &ya);
    if (st == CR_OK)
        *y = ya->data;
    return st;
}

cr_status cr__form_new_s(const cr__form *F, cr_array **S)
{
    return cr__new(F->arena, CR_DT_F64, F->x->ndim, F->x->shape, true, S);
}

cr_status cr__form_pulled(const cr__form *F, const double **G)
{
    cr_tangent dx[CR__FORM_MAX_ARGS + 1];
    size_t nx = F->p->nargs + 1;
    if (nx > sizeof dx / sizeof dx[0])
        return CR_EINVAL;
    cr_status st = cr_pullback_call(F->arena, F->p->pb, &F->p->ybar, dx, nx);
    if (st != CR_OK)
        return st;
    return cr__form_like_x0(F, dx[F->xj + 1], G);
}

cr_status cr__form_frule_along(const cr__form *F, const cr_value *fn, cr_tangent raw, cr_value *y,
                               cr_tangent *dy)
{
    cr_tangent dargs[2] = {cr_tangent_none(), raw};
    cr_status st = cr_frule(F->p->cfg, F->arena, dargs, fn, &F->p->args[F->xj], 1, y, dy);
    if (st == CR_OK)
        return CR_OK;
    const char *msg = cr_ctx_errmsg(cr_arena_ctx(F->arena));
    char buf[512];
    snprintf(buf, sizeof buf, "%s", msg[0] != '\0' ? msg : cr_status_str(st));
    return cr__form_fail(F, st == CR_NOTHING ? CR_EUNIMPL : st,
                         "%s: the second-order form needs %s's frule: %s", F->who,
                         fn->u.func.fn->name, buf);
}

cr_status cr__form_dir_xy(const cr__form *F, cr_tangent xdot, cr_tangent ydot, const double **xd,
                          const double **yd, cr_array **S)
{
    *S = NULL;
    cr_status st = cr__form_like_x(F, xdot, xd);
    if (st == CR_OK)
        st = cr__form_y_dot_arr(F, ydot, yd);
    if (st != CR_OK || (*xd == NULL && *yd == NULL))
        return st;
    return cr__form_new_s(F, S);
}

cr_status cr__form_frule_dir(const cr_form_point *p, void *state, const cr_tangent *xdot,
                             cr_tangent ydot, cr_tangent *S)
{
    (void)p;
    const cr__form *F = state;
    cr_value y;
    cr__form_along d = {NULL, NULL, cr_tangent_zero(), NULL};
    cr_array *Sa;
    cr_status st = cr__form_like_x(F, xdot[F->xj], &d.xd);
    if (st != CR_OK || d.xd == NULL)
        return st;
    if (F->fact != NULL) {
        if ((st = cr__form_frule_along(F, F->fact, xdot[F->xj], &y, &d.dy)) != CR_OK)
            return st;
        d.y = &y;
    }
    if (F->ydot && (st = cr__form_y_dot_arr(F, ydot, &d.yd)) != CR_OK)
        return st;
    if ((st = cr__form_new_s(F, &Sa)) != CR_OK || (st = F->step(state, &d, Sa->data)) != CR_OK)
        return st;
    S[F->xj] = cr_tangent_array(Sa);
    return CR_OK;
}

cr_status cr__form_fail(const cr__form *F, cr_status st, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return cr_ctx_error(cr_arena_ctx(F->arena), st, "%s", buf);
}

const char *cr__form_check_leading(const cr_value *args, size_t nargs, const bool *var, size_t nvar)
{
    if (nargs < 1 || args[0].kind != CR_KIND_ARRAY)
        return "the first argument is not an array";
    for (size_t a = nvar; a < nargs; a++)
        if (var[a])
            return "an argument after the array is a variable";
    return NULL;
}

void cr__form_mm(double alpha, const double *A, size_t ar, size_t ac, int ta, const double *B,
                 size_t br, size_t bc, int tb, double beta, double *C)
{
    cr__mat a = {A, ar, ac, ac, ta}, b = {B, br, bc, bc, tb};
    cr__gemm(CR_DT_F64, &a, &b, alpha, beta, C, cr__mat_cols(&b));
}

cr_status cr__form_pullback_dense(const cr__form *F, size_t j, cr_pullback *pb)
{
    const cr_form_point *p = F->p;
    if (p->args[j].u.arr->structure == CR_MAT_DENSE) {
        *pb = *p->pb;
        return CR_OK;
    }
    cr_value vals[CR__FORM_MAX_ARGS], y;
    const cr_array *D;
    if (p->nargs > CR__FORM_MAX_ARGS)
        return CR_EINVAL;
    memcpy(vals, p->args, p->nargs * sizeof *vals);
    cr_status st = cr__dense(F->arena, p->args[j].u.arr, CR_DT_F64, &D);
    if (st != CR_OK)
        return st;
    vals[j] = cr_value_array((cr_array *)(uintptr_t)D); /* only read */
    return cr_rrule(p->cfg, F->arena, p->f, vals, p->nargs, &y, pb);
}

cr_status cr__form_factor_of(const cr__form *F, const cr_value *y, size_t e, size_t ndim,
                             const cr_array **out)
{
    cr_value v;
    if (y->kind != CR_KIND_STRUCT ||
        cr_type_field_value(y->u.obj.type, y->u.obj.ptr, e, &v) != CR_OK ||
        v.kind != CR_KIND_ARRAY || v.u.arr == NULL || v.u.arr->ndim != ndim)
        return CR_EINVAL;
    return cr__dense(F->arena, v.u.arr, CR_DT_F64, out);
}

cr_status cr__form_field_mat(const cr__form *F, cr_tangent t, size_t e, size_t r, size_t c,
                             const double **out)
{
    size_t sh[2] = {r, c};
    const cr_array *a;
    cr_status st = cr__tan_array(F->arena, F->who, cr_tangent_field(t, e), 2, sh, CR_DT_F64, &a);
    *out = st == CR_OK && a != NULL ? a->data : NULL;
    return st;
}

const char *cr__form_check_matrix(const cr_value *args, size_t nargs, const bool *var,
                                  uint32_t *linearity)
{
    (void)linearity;
    return cr__form_check_leading(args, nargs, var, 1);
}

cr_status cr__form_work(const cr__form *F, size_t nterms, const cr__form_term *terms, double **out)
{
    cr_ctx *ctx = cr_arena_ctx(F->arena);
    size_t total = 0, t;
    cr_status st = CR_OK;
    *out = NULL;
    for (size_t i = 0; i < nterms && st == CR_OK; i++)
        if ((st = cr__ck_mul(ctx, F->who, terms[i].c, terms[i].r, &t)) == CR_OK &&
            (st = cr__ck_mul(ctx, F->who, t, terms[i].s, &t)) == CR_OK)
            st = cr__ck_add(ctx, F->who, total, t, &total);
    if (st == CR_OK)
        st = cr__ck_mul(ctx, F->who, total, sizeof **out, &t);
    if (st != CR_OK)
        return st;
    *out = cr_arena_calloc(F->arena, total ? total : 1, sizeof **out, _Alignof(double));
    return *out != NULL ? CR_OK : CR__ALLOC_STATUS(F->arena);
}

void cr__form_fold_upper(double *s, size_t n)
{
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++) {
            s[a * n + b] += s[b * n + a];
            s[b * n + a] = 0.0;
        }
}

void cr__form_right_solve_upper_t(const double *T, size_t n, double *X, size_t r)
{
    for (size_t a = 0; a < r; a++) {
        double *x = X + a * n;
        for (size_t b = n; b-- > 0;) {
            double v = x[b];
            for (size_t j = b + 1; j < n; j++)
                v -= x[j] * T[b * n + j];
            x[b] = v / T[b * n + b];
        }
    }
}
