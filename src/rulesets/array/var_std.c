/*
 * var and std (corrected: divided by n - 1), over all elements or along dims, computed in
 * two passes (the mean first) for accuracy.
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
static cr_status var_output(cr_arena *arena, const cr__red *r, cr_array *v, bool std, cr_value *y)
{
    cr_dtype rdt = r->A->dtype == CR_DT_F32 ? CR_DT_F32 : CR_DT_F64;
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

cr_status cr__array_register_var(cr_registry *reg)
{
    static const cr_argspec f1[1] = {{CR__M_FARRAY, NULL}};
    static const cr_argspec f2[2] = {{CR__M_FARRAY, NULL}, {CR_M_INT | CR_M_A_INT, NULL}};
    static const cr__array_rule k[] = {
        {&var_function, f1, 1, var_frule, var_rrule, &cr__t_red_all, CR_NONLINEAR, &cr__form_var,
         false},
        {&var_function, f2, 2, var_frule, var_rrule, &cr__t_red_dims, CR_NONLINEAR, &cr__form_var,
         false},
        {&std_function, f1, 1, std_frule, std_rrule, &cr__t_red_all, CR_NONLINEAR, &cr__form_std,
         false},
        {&std_function, f2, 2, std_frule, std_rrule, &cr__t_red_dims, CR_NONLINEAR, &cr__form_std,
         false},
    };
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
