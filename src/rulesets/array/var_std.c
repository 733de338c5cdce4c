/*
 * var and std (corrected: divided by n - 1), over all elements or along dims, computed in
 * two passes (the mean first) for accuracy; var_ex and std_ex, Julia's keyword forms
 * var(x; corrected, mean, dims): divided by n - corrected, about a mean that is computed or
 * given (then an argument of its own, with its cotangent).
 */
#include <math.h>

#include "reduce_impl.h"

/* ---- var and std --------------------------------------------------------------------------- */

typedef enum { VM_SQ, VM_PB, VM_FR } var_mode;

typedef struct var_ctx {
    var_mode mode;
    bool cplx;
    const void *x;
    const void *mu;  /* slice means (work dtype, oshape) */
    double *acc;     /* slice accumulators (oshape) */
    const double *c; /* slice coefficients (oshape) */
    void *out;       /* A-shaped result (work dtype) */
    const void *t;   /* A-shaped tangent (work dtype) */
} var_ctx;

/* Arrays: 0 x (A's strides), 1 slice-mapped, 2 A-shaped contiguous. */
static void var_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    var_ctx *c = vctx;
    for (size_t i = 0; i < n; i++) {
        ptrdiff_t ix = CR__AT(0), o = CR__AT(1), k = CR__AT(2);
        cr_complex d = c->cplx ? ((const cr_complex *)c->x)[ix] - ((const cr_complex *)c->mu)[o]
                               : ((const double *)c->x)[ix] - ((const double *)c->mu)[o];
        switch (c->mode) {
        case VM_SQ:
            c->acc[o] += creal(d) * creal(d) + cimag(d) * cimag(d);
            break;
        case VM_PB:
            if (c->cplx)
                ((cr_complex *)c->out)[k] = c->c[o] * d;
            else
                ((double *)c->out)[k] = c->c[o] * creal(d);
            break;
        case VM_FR: {
            cr_complex t = c->cplx ? ((const cr_complex *)c->t)[k] : ((const double *)c->t)[k];
            c->acc[o] += creal(conj(d) * t);
            break;
        }
        }
    }
}

static void var_run(const cr__red *r, var_ctx *c, const cr_array *slice)
{
    ptrdiff_t contig[CR_ARRAY_MAX_DIMS];
    cr__row_major(r->ndim, r->A->shape, contig);
    cr__nd nd;
    cr__nd_init(&nd, r->ndim, r->A->shape);
    cr__nd_add(&nd, r->Aw);
    cr__nd_add(&nd, slice);
    cr__nd_add_strides(&nd, contig);
    c->x = r->Aw->data;
    c->cplx = r->wdt == CR_DT_C128;
    cr__nd_run(&nd, var_inner, c);
}

typedef struct var_env {
    cr__red r;
    cr_project *pA;
    const cr_array *mu; /* work, oshape */
    const cr_array *v;  /* var (f64, oshape) */
    bool std;
} var_env;

/* mu and var (corrected: divided by n - 1) of each slice. */
static cr_status var_forward(cr_arena *arena, const cr__red *r, cr_array **mu, cr_array **v)
{
    cr_status st = cr__unbroadcast(arena, r->Aw, r->ndim, r->oshape, mu);
    if (st != CR_OK)
        return st;
    cr__scal(1.0 / (double)r->count, *mu);
    st = cr__new(arena, CR_DT_F64, r->ndim, r->oshape, true, v);
    if (st != CR_OK)
        return st;
    var_ctx c = {VM_SQ, false, NULL, (*mu)->data, (*v)->data, NULL, NULL, NULL};
    var_run(r, &c, *v);
    cr__scal(1.0 / ((double)r->count - 1), *v);
    return CR_OK;
}

/* The real output (var, or std = sqrt(var)) of dtype f64 (f32 for f32 A). */
static cr_status var_output_dt(cr_arena *arena, const cr__red *r, cr_array *v, bool std,
                               cr_dtype rdt, cr_value *y)
{
    size_t n = cr_array_numel(v);
    cr_array *w;
    cr_status st = cr__new_like(arena, CR_DT_F64, v, false, &w);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < n; i++)
        ((double *)w->data)[i] = std ? sqrt(((double *)v->data)[i]) : ((double *)v->data)[i];
    if (r->all) {
        *y = cr__scalar_value(rdt, ((double *)w->data)[0]);
        return CR_OK;
    }
    cr_array *o;
    st = cr__cast(arena, w, rdt, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

static cr_status var_output(cr_arena *arena, const cr__red *r, cr_array *v, bool std, cr_value *y)
{
    return var_output_dt(arena, r, v, std, r->A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64, y);
}

/* var: Ā = 2 (x - μ) ȳ / (n - 1); std: Ā = (x - μ) ȳ / ((n - 1) σ), 0 where σ = 0 (all
 * the slice's elements equal: the subgradient 0, not NaN). The mean's own dependence on x
 * cancels because Σ (x - μ) = 0. */
static cr_status var_pullback(CR__PULLBACK_PARAMS)
{
    var_env *e = env;
    const cr__red *r = &e->r;
    cr__dx_none(dx, nx);
    const char *who = e->std ? "std_pullback" : "var_pullback";
    const cr_array *g;
    cr_status st =
        r->all ? CR_OK : cr__tan_array(arena, who, *dy, r->ndim, r->oshape, CR_DT_F64, &g);
    cr_complex g0 = 0;
    bool nz = true;
    if (r->all)
        st = cr__tan_scalar(arena, who, *dy, &g0, &nz);
    if (st != CR_OK)
        return st;
    if ((r->all && !nz) || (!r->all && g == NULL)) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *c, *out;
    st = cr__new(arena, CR_DT_F64, r->ndim, r->oshape, false, &c);
    if (st == CR_OK)
        st = cr__new_like(arena, r->wdt, r->A, false, &out);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(c);
    double den = (double)r->count - 1;
    for (size_t i = 0; i < n; i++) {
        double gi = r->all ? creal(g0) : ((const double *)g->data)[i];
        double v = ((const double *)e->v->data)[i];
        double ci = e->std ? (v > 0 ? gi / (den * sqrt(v)) : 0.0) : 2 * gi / den;
        ((double *)c->data)[i] = ci;
    }
    var_ctx vc = {VM_PB, false, NULL, e->mu->data, NULL, c->data, out->data, NULL};
    var_run(r, &vc, c);
    return cr__give(arena, e->pA, out, &dx[1]);
}

/* The reduction r, the means mu, the variances v and the output y of var or std (args). */
static cr_status var_primal(cr_arena *arena, bool std, const cr_value *args, size_t nargs,
                            cr__red *r, cr_array **mu, cr_array **v, cr_value *y)
{
    cr_status st = cr__red_parse(arena, std ? "std" : "var", args, nargs, 2, false, r);
    if (st == CR_OK)
        st = var_forward(arena, r, mu, v);
    return st == CR_OK ? var_output(arena, r, *v, std, y) : st;
}

static cr_status var_rrule_common(cr_arena *arena, bool std, const cr_value *args, size_t nargs,
                                  cr_value *y, cr_pullback *pb, const void *udata)
{
    cr__red r;
    cr_array *mu = NULL, *v = NULL;
    cr_status st = var_primal(arena, std, args, nargs, &r, &mu, &v, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    CR__PB_START(var_env, pA, var_pullback, std ? "std_pullback" : "var_pullback", e, st);
    e->r = r;
    e->mu = mu;
    e->v = v;
    e->std = std;
    return CR_OK;
}

/* frule: var: ẏ = 2 Σ re(conj(x - μ) ẋ) / (n - 1); std: that / (2σ) (0 where σ = 0). */
static cr_status var_frule_common(cr_arena *arena, bool std, const cr_tangent *dargs,
                                  const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    cr__red r;
    cr_array *mu = NULL, *v = NULL;
    cr_status st = var_primal(arena, std, args, nargs, &r, &mu, &v, y);
    const cr_array *t = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, std ? "std" : "var", dargs, args, 0, r.wdt, &t);
    if (st != CR_OK || t == NULL) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *acc;
    st = cr__new(arena, CR_DT_F64, r.ndim, r.oshape, true, &acc);
    if (st != CR_OK)
        return st;
    var_ctx c = {VM_FR, false, NULL, mu->data, acc->data, NULL, NULL, t->data};
    var_run(&r, &c, acc);
    size_t n = cr_array_numel(acc);
    double den = (double)r.count - 1;
    for (size_t i = 0; i < n; i++) {
        double a = ((double *)acc->data)[i], vv = ((double *)v->data)[i];
        ((double *)acc->data)[i] = std ? (vv > 0 ? a / (den * sqrt(vv)) : 0.0) : 2 * a / den;
    }
    cr_dtype rdt = r.A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    if (r.all) {
        *dy = cr__scalar_tangent(rdt, ((double *)acc->data)[0]);
        return CR_OK;
    }
    cr_array *o;
    st = cr__cast(arena, acc, rdt, &o);
    if (st == CR_OK)
        *dy = cr_tangent_array(o);
    return st;
}

#define VAR_RULES(NAME, STD) CR__PARAM_RULES(NAME, var_rrule_common, var_frule_common, STD, -1)

VAR_RULES(var, false)
VAR_RULES(std, true)

/* ---- var_ex and std_ex: corrected, and a computed or given mean ------------------------ */

/* A parsed var_ex(x, corrected[, mean[, dims]]) or std_ex: the reduction, the divisor and
 * the mean of each slice. */
typedef struct varx {
    cr__red r;
    double den;   /* n - corrected */
    bool given;   /* the mean is an argument (not nothing) */
    cr_array *mu; /* the mean of each slice (work dtype, oshape) */
    cr_array *v;  /* Σ |x - μ|² / den (f64, oshape) */
    cr_dtype rdt; /* the output's dtype: f32 when x (and a given mean) are f32 */
} varx;

static bool varx_number(const cr_value *m)
{
    return m->kind == CR_KIND_F64 || m->kind == CR_KIND_F32 || m->kind == CR_KIND_C128 ||
           m->kind == CR_KIND_I64 || m->kind == CR_KIND_I32 || m->kind == CR_KIND_BOOL;
}

/* Parse the arguments into V and compute the means and variances. */
static cr_status varx_primal(cr_arena *arena, const char *who, const cr_value *args, size_t nargs,
                             varx *V)
{
    memset(V, 0, sizeof *V);
    cr_status st = cr__nargs(arena, who, nargs, 2, 4);
    if (st != CR_OK)
        return st;
    cr_value rargs[2] = {args[0], nargs == 4 ? args[3] : args[0]};
    cr__red *r = &V->r;
    st = cr__red_parse(arena, who, rargs, nargs == 4 ? 2 : 1, 2, false, r);
    if (st != CR_OK)
        return st;
    const cr_value *cv = &args[1];
    int64_t corr;
    if (cv->kind == CR_KIND_BOOL)
        corr = cv->u.b;
    else if (cv->kind == CR_KIND_I64 || cv->kind == CR_KIND_I32)
        corr = cv->u.i64;
    else
        return CR__FAIL(arena, CR_EINVAL, "%s: corrected is a %s, not a bool", who,
                        cr_kind_name(cv->kind));
    if (corr != 0 && corr != 1)
        return CR__FAIL(arena, CR_EINVAL, "%s: corrected is %lld, not false (0) or true (1)", who,
                        (long long)corr);
    V->den = (double)r->count - (double)corr;
    const cr_value *m = nargs >= 3 ? &args[2] : NULL;
    V->given = m != NULL && m->kind != CR_KIND_NOTHING;
    cr_dtype dt = (cr_dtype)r->A->dtype;
    if (V->given) {
        if (r->all && !varx_number(m))
            return CR__FAIL(arena, CR_EINVAL,
                            "%s: without dims the mean is a number or nothing, not a %s", who,
                            cr_kind_name(m->kind));
        if (!r->all) {
            if (m->kind != CR_KIND_ARRAY || m->u.arr == NULL)
                return CR__FAIL(arena, CR_EINVAL,
                                "%s: with dims the mean is an array of the reduced shape or "
                                "nothing, not a %s",
                                who, cr_kind_name(m->kind));
            const cr_array *M = m->u.arr;
            bool same = M->ndim == r->ndim && M->dtype != CR_DT_BOOL;
            for (size_t d = 0; d < r->ndim && same; d++)
                same = M->shape[d] == r->oshape[d];
            if (!same) {
                char a[96], b[96];
                return CR__FAIL(arena, CR_ESHAPE,
                                "%s: the mean is a %s array of shape %s, not a number array of "
                                "x's shape %s with the reduced dimensions of extent 1",
                                who, cr_dtype_name((cr_dtype)M->dtype),
                                cr__shape_str(M, a, sizeof a), cr__shape_str(r->A, b, sizeof b));
            }
        }
        dt = cr__promote(dt, cr__value_dtype(m));
    }
    V->rdt = dt == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
    cr_dtype wdt = cr__work(dt);
    if (wdt != r->wdt) { /* a complex mean for a real x */
        r->wdt = wdt;
        st = cr__strided(arena, r->A, wdt, &r->Aw);
    }
    if (st == CR_OK && V->given) {
        st = cr__new(arena, wdt, r->ndim, r->oshape, false, &V->mu);
        size_t n = st == CR_OK ? cr_array_numel(V->mu) : 0;
        for (size_t i = 0; i < n; i++)
            cr__store(V->mu, (ptrdiff_t)i,
                      m->kind == CR_KIND_ARRAY ? cr_array_get_linear(m->u.arr, i)
                                               : cr__scalar_of(m));
    } else if (st == CR_OK) {
        st = cr__unbroadcast(arena, r->Aw, r->ndim, r->oshape, &V->mu);
        if (st == CR_OK)
            cr__scal(1.0 / (double)r->count, V->mu);
    }
    if (st == CR_OK)
        st = cr__new(arena, CR_DT_F64, r->ndim, r->oshape, true, &V->v);
    if (st != CR_OK)
        return st;
    var_ctx vc = {VM_SQ, false, NULL, V->mu->data, V->v->data, NULL, NULL, NULL};
    var_run(r, &vc, V->v);
    cr__scal(1.0 / V->den, V->v);
    return CR_OK;
}

/* The coefficient of (x - μ) in the derivative of slice i: var 2/den, std 1/(den σ) (0 where
 * σ = 0: all of the slice at its mean, the subgradient 0). */
static double varx_coef(const varx *V, bool std, size_t i)
{
    double v = ((const double *)V->v->data)[i];
    return std ? (v > 0 ? 1.0 / (V->den * sqrt(v)) : 0.0) : 2.0 / V->den;
}

typedef struct varx_env {
    varx V;
    bool std;
    cr_project **proj; /* of every argument */
    cr_value mean;     /* args[2] (NOTHING when absent) */
} varx_env;

/* x̄ = c (x - μ) ȳ and, for a given mean, μ̄ = -Σ_slice c (x - μ) ȳ (the mean is an
 * independent argument: its sum does not vanish). A computed mean's own dependence on x
 * cancels, as in var's pullback. */
static cr_status varx_pullback(CR__PULLBACK_PARAMS)
{
    varx_env *e = env;
    const varx *V = &e->V;
    const cr__red *r = &V->r;
    const char *who = e->std ? "std_ex_pullback" : "var_ex_pullback";
    cr__dx_none(dx, nx);
    bool dmean = V->given && cr__is_diff(&e->mean);
    const cr_array *g = NULL;
    cr_complex g0 = 0;
    bool nz = true;
    cr_status st = r->all ? cr__tan_scalar(arena, who, *dy, &g0, &nz)
                          : cr__tan_array(arena, who, *dy, r->ndim, r->oshape, CR_DT_F64, &g);
    if (st != CR_OK)
        return st;
    if ((r->all && !nz) || (!r->all && g == NULL)) {
        dx[1] = cr_tangent_zero();
        if (dmean)
            dx[3] = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *c, *out;
    st = cr__new(arena, CR_DT_F64, r->ndim, r->oshape, false, &c);
    if (st == CR_OK)
        st = cr__new_like(arena, r->wdt, r->A, false, &out);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(c);
    for (size_t i = 0; i < n; i++)
        ((double *)c->data)[i] =
            varx_coef(V, e->std, i) * (r->all ? creal(g0) : ((const double *)g->data)[i]);
    var_ctx vc = {VM_PB, false, NULL, V->mu->data, NULL, c->data, out->data, NULL};
    var_run(r, &vc, c);
    if (dmean) {
        cr_array *mb;
        st = cr__unbroadcast(arena, out, r->ndim, r->oshape, &mb);
        if (st != CR_OK)
            return st;
        cr__scal(-1.0, mb);
        st = e->mean.kind == CR_KIND_ARRAY
                 ? cr__give(arena, e->proj[2], mb, &dx[3])
                 : cr_project_apply(arena, e->proj[2], cr__scalar_tangent(r->wdt, cr__load(mb, 0)),
                                    &dx[3]);
        if (st != CR_OK)
            return st;
    }
    return cr__give(arena, e->proj[0], out, &dx[1]);
}

static cr_status varx_rrule_common(cr_arena *arena, bool std, const cr_value *args, size_t nargs,
                                   cr_value *y, cr_pullback *pb, const void *udata)
{
    const char *who = std ? "std_ex" : "var_ex";
    varx V;
    cr_status st = varx_primal(arena, who, args, nargs, &V);
    if (st == CR_OK)
        st = var_output_dt(arena, &V.r, V.v, std, V.rdt, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    varx_env *e = cr_arena_calloc(arena, 1, sizeof *e, _Alignof(varx_env));
    if (e == NULL)
        return CR__ALLOC_STATUS(arena);
    st = cr__projectors(arena, args, nargs, &e->proj);
    if (st != CR_OK)
        return st;
    e->V = V;
    e->std = std;
    e->mean = nargs >= 3 ? args[2] : (cr_value){.kind = CR_KIND_NOTHING};
    *pb = (cr_pullback){varx_pullback, e, std ? "std_ex_pullback" : "var_ex_pullback", nargs + 1};
    return CR_OK;
}

/* frule: var: ẏ = 2 Σ re(conj(x - μ) (ẋ - μ̇)) / den, μ̇ the given mean's tangent (a computed
 * mean's drops out: Σ (x - μ) = 0); std: that / (2σ), 0 where σ = 0. */
static cr_status varx_frule_common(cr_arena *arena, bool std, const cr_tangent *dargs,
                                   const cr_value *args, size_t nargs, cr_value *y, cr_tangent *dy)
{
    const char *who = std ? "std_ex" : "var_ex";
    varx V;
    cr_status st = varx_primal(arena, who, args, nargs, &V);
    if (st == CR_OK)
        st = var_output_dt(arena, &V.r, V.v, std, V.rdt, y);
    const cr__red *r = &V.r;
    const cr_array *t = NULL, *tm = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, who, dargs, args, 0, r->wdt, &t);
    if (st == CR_OK && V.given && cr__is_diff(&args[2])) {
        if (args[2].kind == CR_KIND_ARRAY) {
            st = cr__dx_array(arena, who, dargs, args, 2, r->wdt, &tm);
        } else {
            cr_complex v;
            bool nz;
            cr_array *s = NULL;
            st = cr__tan_scalar(arena, who, dargs[3], &v, &nz);
            if (st == CR_OK && nz)
                st = cr__scalar_array(arena, r->wdt, v, &s);
            tm = s;
        }
    }
    if (st != CR_OK || (t == NULL && tm == NULL)) {
        *dy = cr_tangent_zero();
        return st;
    }
    cr_array *acc, *sx = NULL;
    st = cr__new(arena, CR_DT_F64, r->ndim, r->oshape, true, &acc);
    if (st == CR_OK && tm != NULL)
        st = cr__unbroadcast(arena, r->Aw, r->ndim, r->oshape, &sx);
    if (st != CR_OK)
        return st;
    if (t != NULL) {
        var_ctx c = {VM_FR, false, NULL, V.mu->data, acc->data, NULL, NULL, t->data};
        var_run(r, &c, acc);
    }
    size_t n = cr_array_numel(acc);
    for (size_t i = 0; i < n; i++) {
        double *a = &((double *)acc->data)[i];
        if (tm != NULL) {
            /* Σ (x - μ) over the slice, times the mean's tangent */
            cr_complex s =
                cr__load(sx, (ptrdiff_t)i) - (double)r->count * cr__load(V.mu, (ptrdiff_t)i);
            *a -= creal(conj(s) * cr_array_get_linear(tm, i));
        }
        *a *= std ? varx_coef(&V, true, i) : varx_coef(&V, false, i);
    }
    if (r->all) {
        *dy = cr__scalar_tangent(V.rdt, ((double *)acc->data)[0]);
        return CR_OK;
    }
    cr_array *o;
    st = cr__cast(arena, acc, V.rdt, &o);
    if (st == CR_OK)
        *dy = cr_tangent_array(o);
    return st;
}

CR__PARAM_RULES(var_ex, varx_rrule_common, varx_frule_common, false, -1)
CR__PARAM_RULES(std_ex, varx_rrule_common, varx_frule_common, true, -1)

/* var_ex / std_ex (x, corrected[, mean[, dims]]): x as the reductions draw it (with dims for
 * four arguments), corrected either way, and the mean nothing, the slices' own mean (μ̄ = 0
 * for var: a hard point), or that moved by up to 1/2 (in f32 or f64 as x, sometimes complex
 * for a real f64 x). One time in six, the hard point of slices of one element, uncorrected
 * (n - corrected = 1). */
static cr_complex varx_shift(uint64_t *rng, bool cplx)
{
    double re = cr__rng_unif(rng, -0.5, 0.5);
    return cr__c(re, cplx ? cr__rng_unif(rng, -0.5, 0.5) : 0.0);
}

static cr_status sample_varx(CR__SAMPLE_PARAMS)
{
    bool dims = nargs == 4;
    static const cr__red_sample_opts o_all = {false, false, false, false},
                                     o_dims = {true, false, false, false};
    cr_value a[2];
    bool single = cr__rng_below(rng, 6) == 0;
    cr_status st;
    if (single) {
        static const size_t s14[2] = {1, 4}, s1[1] = {1};
        cr_array *A;
        st = cr__rand_array(arena, rng, cr__rng_dtype(rng), dims ? 2 : 1, dims ? s14 : s1, -2, 2,
                            &A);
        a[0] = cr_value_array(A);
        a[1] = cr_value_i64(0);
    } else {
        st = cr__sample_red(arena, rng, a, dims ? 2 : 1, (void *)(dims ? &o_dims : &o_all));
    }
    if (st != CR_OK)
        return st;
    args[0] = a[0];
    args[1] = cr_value_bool(single ? false : cr__rng_below(rng, 2) != 0);
    if (dims)
        args[3] = a[1];
    if (nargs < 3)
        return CR_OK;
    size_t k = cr__rng_below(rng, 4);
    if (k == 0) {
        args[2] = (cr_value){.kind = CR_KIND_NOTHING};
        return CR_OK;
    }
    cr_value M;
    st = cr_function_call(arena, &cr_fn_mean, a, dims ? 2 : 1, &M);
    if (st != CR_OK)
        return st;
    const cr_array *A = a[0].u.arr;
    bool cplx = k == 3 && A->dtype == CR_DT_F64;
    cr_dtype mdt = cplx ? CR_DT_C128 : (cr_dtype)A->dtype;
    if (!dims) {
        cr_complex z = cr__scalar_of(&M);
        if (k >= 2)
            z += varx_shift(rng, cplx);
        args[2] = cr__scalar_value(mdt, z);
        return CR_OK;
    }
    cr_array *Mo;
    st = cr__new(arena, mdt, M.u.arr->ndim, M.u.arr->shape, false, &Mo);
    if (st != CR_OK)
        return st;
    for (size_t i = 0; i < cr_array_numel(Mo); i++) {
        cr_complex z = cr_array_get_linear(M.u.arr, i);
        if (k >= 2)
            z += varx_shift(rng, cplx);
        cr__store(Mo, (ptrdiff_t)i, z);
    }
    args[2] = cr_value_array(Mo);
    return CR_OK;
}

static const cr_rule_test k_test_varx = {.sample = sample_varx};

cr_status cr__array_register_var(cr_registry *reg)
{
    static const cr_argspec f1[1] = {{CR__M_FARRAY, NULL}};
    static const cr_argspec f2[2] = {{CR__M_FARRAY, NULL}, {CR_M_INT | CR_M_A_INT, NULL}};
    static const cr_argspec x2[2] = {{CR__M_FARRAY, NULL}, {CR_M_INT | CR_M_BOOL, NULL}};
    static const cr_argspec x3[3] = {
        {CR__M_FARRAY, NULL}, {CR_M_INT | CR_M_BOOL, NULL}, {CR__M_NUM | CR_M_NOTHING, NULL}};
    static const cr_argspec x4[4] = {{CR__M_FARRAY, NULL},
                                     {CR_M_INT | CR_M_BOOL, NULL},
                                     {CR__M_FARRAY | CR_M_A_INT | CR_M_NOTHING, NULL},
                                     {CR_M_INT | CR_M_A_INT, NULL}};
    static const cr__array_rule k[] = {
        {&var_function, f1, 1, var_frule, var_rrule, &cr__t_red_all, CR_NONLINEAR, &cr__form_var,
         false},
        {&var_function, f2, 2, var_frule, var_rrule, &cr__t_red_dims, CR_NONLINEAR, &cr__form_var,
         false},
        {&std_function, f1, 1, std_frule, std_rrule, &cr__t_red_all, CR_NONLINEAR, &cr__form_std,
         false},
        {&std_function, f2, 2, std_frule, std_rrule, &cr__t_red_dims, CR_NONLINEAR, &cr__form_std,
         false},
        {&var_ex_function, x2, 2, var_ex_frule, var_ex_rrule, &k_test_varx, CR_NONLINEAR, NULL,
         false},
        {&var_ex_function, x3, 3, var_ex_frule, var_ex_rrule, &k_test_varx, CR_NONLINEAR, NULL,
         false},
        {&var_ex_function, x4, 4, var_ex_frule, var_ex_rrule, &k_test_varx, CR_NONLINEAR, NULL,
         false},
        {&std_ex_function, x2, 2, std_ex_frule, std_ex_rrule, &k_test_varx, CR_NONLINEAR, NULL,
         false},
        {&std_ex_function, x3, 3, std_ex_frule, std_ex_rrule, &k_test_varx, CR_NONLINEAR, NULL,
         false},
        {&std_ex_function, x4, 4, std_ex_frule, std_ex_rrule, &k_test_varx, CR_NONLINEAR, NULL,
         false},
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
