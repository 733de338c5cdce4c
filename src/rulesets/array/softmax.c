/*
 * softmax, logsoftmax and logsumexp, over all elements or along dims, computed with the
 * maximum of each slice shifted out so that no exponential overflows.
 */
#include <math.h>

#include "reduce_impl.h"

/* ---- softmax, logsoftmax, logsumexp ------------------------------------------------------ */

typedef enum {
    SM_MAX,        /* o1 = max(o1, x) */
    SM_SUMEXP,     /* o2 += exp(x - shift(o1)) */
    SM_SOFTMAX,    /* out = exp(x - shift(o1)) / o2 */
    SM_LOGSOFTMAX, /* out = x - shift(o1) - log(o2) */
    SM_DOT,        /* o1 += x * b */
    SM_SUM,        /* o1 += x */
    SM_EXPDOT,     /* o1 += exp(x) * b */
    SM_SOFTMAX_D,  /* out = x * (b - o1)          (x = y) */
    SM_LOGSM_D,    /* out = b - exp(x) * o1       (x = y) */
    SM_LOGSM_F,    /* out = b - o1 */
    SM_LSE_D       /* out = o2 * exp(x - o1)      (o1 = lse, o2 = cotangent) */
} sm_mode;

typedef struct sm_ctx {
    sm_mode mode;
    const double *x;
    double *o1, *o2;
    double *out;
    const double *b;
} sm_ctx;

/* The shift of a slice: its maximum when finite (so exp never overflows), else 0. */
static double sm_shift(double m)
{
    return isfinite(m) ? m : 0.0;
}

/* Arrays: 0 x (A strides), 1 slice-mapped (o1, o2 share it), 2 out (A shape, contiguous),
 * 3 b (A shape, contiguous). */
static void sm_inner(size_t n, const ptrdiff_t *off, const ptrdiff_t *step, void *vctx)
{
    sm_ctx *c = vctx;
    for (size_t i = 0; i < n; i++) {
        double x = c->x[CR__AT(0)];
        ptrdiff_t o = CR__AT(1);
        ptrdiff_t k = CR__AT(2), kb = CR__AT(3);
        switch (c->mode) {
        case SM_MAX:
            if (x > c->o1[o] || isnan(x))
                c->o1[o] = isnan(c->o1[o]) ? c->o1[o] : x;
            break;
        case SM_SUMEXP:
            c->o2[o] += exp(x - sm_shift(c->o1[o]));
            break;
        case SM_SOFTMAX:
            c->out[k] = exp(x - sm_shift(c->o1[o])) / c->o2[o];
            break;
        case SM_LOGSOFTMAX:
            c->out[k] = x - sm_shift(c->o1[o]) - log(c->o2[o]);
            break;
        case SM_DOT:
            c->o1[o] += x * c->b[kb];
            break;
        case SM_SUM:
            c->o1[o] += x;
            break;
        case SM_EXPDOT:
            c->o1[o] += exp(x) * c->b[kb];
            break;
        case SM_SOFTMAX_D:
            c->out[k] = x * (c->b[kb] - c->o1[o]);
            break;
        case SM_LOGSM_D:
            c->out[k] = c->b[kb] - exp(x) * c->o1[o];
            break;
        case SM_LSE_D:
            c->out[k] = c->o2[o] * exp(x - c->o1[o]);
            break;
        case SM_LOGSM_F:
            c->out[k] = c->b[kb] - c->o1[o];
            break;
        }
    }
}

/* Run a mode over A's shape: x (strides of xa), slice array, out and b (contiguous). */
static void sm_run(const cr__red *r, sm_ctx *c, const cr_array *xa, const cr_array *slice)
{
    ptrdiff_t contig[CR_ARRAY_MAX_DIMS];
    cr__row_major(r->ndim, r->A->shape, contig);
    cr__nd nd;
    cr__nd_init(&nd, r->ndim, r->A->shape);
    cr__nd_add_strides(&nd, xa->strides);
    cr__nd_add(&nd, slice);
    cr__nd_add_strides(&nd, contig);
    cr__nd_add_strides(&nd, contig);
    c->x = xa->data;
    cr__nd_run(&nd, sm_inner, c);
}

typedef enum { SMF_SOFTMAX, SMF_LOGSOFTMAX, SMF_LOGSUMEXP } sm_fn;
static const char *const k_sm_names[3] = {"softmax", "logsoftmax", "logsumexp"};
static const char *const k_sm_pb_names[3] = {"softmax_pullback", "logsoftmax_pullback",
                                             "logsumexp_pullback"};

/* A new slice-shaped f64 array filled with v. */
static cr_status slice_fill(cr_arena *arena, const cr__red *r, double v, cr_array **out)
{
    cr_status st = cr__new(arena, CR_DT_F64, r->ndim, r->oshape, false, out);
    if (st != CR_OK)
        return st;
    size_t n = cr_array_numel(*out);
    for (size_t i = 0; i < n; i++)
        ((double *)(*out)->data)[i] = v;
    return CR_OK;
}

/* Forward: y (work): softmax or logsoftmax of A's shape, or logsumexp of the slice shape. */
static cr_status sm_forward(cr_arena *arena, const cr__red *r, sm_fn fn, cr_array **y)
{
    cr_array *m, *s;
    cr_status st = slice_fill(arena, r, -HUGE_VAL, &m);
    if (st == CR_OK)
        st = slice_fill(arena, r, 0.0, &s);
    if (st != CR_OK)
        return st;
    sm_ctx c = {SM_MAX, NULL, m->data, s->data, NULL, NULL};
    sm_run(r, &c, r->Aw, m);
    c.mode = SM_SUMEXP;
    sm_run(r, &c, r->Aw, m);
    if (fn == SMF_LOGSUMEXP) {
        size_t n = cr_array_numel(m);
        double *mv = m->data, *sv = s->data;
        for (size_t i = 0; i < n; i++)
            mv[i] = sm_shift(mv[i]) + log(sv[i]);
        *y = m;
        return CR_OK;
    }
    st = cr__new_like(arena, CR_DT_F64, r->A, false, y);
    if (st != CR_OK)
        return st;
    c.mode = fn == SMF_SOFTMAX ? SM_SOFTMAX : SM_LOGSOFTMAX;
    c.out = (*y)->data;
    sm_run(r, &c, r->Aw, m);
    return CR_OK;
}

typedef struct sm_env {
    cr__red r;
    cr_project *pA;
    sm_fn fn;
    const cr_array *y; /* work output */
} sm_env;

/* softmax: Ā = y ⊙ (Ȳ - Σ(Ȳ ⊙ y)); logsoftmax: Ā = Ȳ - exp(y) ⊙ ΣȲ;
 * logsumexp: Ā = Ȳ ⊙ exp(x - y). Sums over each slice. */
static cr_status sm_pullback(CR__PULLBACK_PARAMS)
{
    sm_env *e = env;
    const cr__red *r = &e->r;
    cr__dx_none(dx, nx);
    const cr_array *g;
    cr_status st = e->fn == SMF_LOGSUMEXP ? cr__red_cot(arena, k_sm_pb_names[e->fn], r, *dy, &g)
                                          : cr__tan_array(arena, k_sm_pb_names[e->fn], *dy, r->ndim,
                                                          r->A->shape, CR_DT_F64, &g);
    if (st != CR_OK)
        return st;
    if (g == NULL) {
        dx[1] = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *out;
    st = cr__new_like(arena, CR_DT_F64, r->A, false, &out);
    if (st != CR_OK)
        return st;
    sm_ctx c = {SM_DOT, NULL, NULL, NULL, out->data, g->data};
    if (e->fn == SMF_LOGSUMEXP) {
        cr_array yv;
        cr_array_view_init(&yv, e->y->data, CR_DT_F64, r->ndim, r->oshape, NULL);
        c.mode = SM_LSE_D;
        c.o1 = yv.data;
        c.o2 = (double *)g->data;
        c.b = NULL;
        sm_run(r, &c, r->Aw, &yv);
    } else {
        cr_array *acc;
        st = slice_fill(arena, r, 0.0, &acc);
        if (st != CR_OK)
            return st;
        c.o1 = acc->data;
        c.mode = e->fn == SMF_SOFTMAX ? SM_DOT : SM_SUM;
        sm_run(r, &c, e->fn == SMF_SOFTMAX ? e->y : g, acc);
        c.mode = e->fn == SMF_SOFTMAX ? SM_SOFTMAX_D : SM_LOGSM_D;
        sm_run(r, &c, e->y, acc);
    }
    return cr__give(arena, e->pA, out, &dx[1]);
}

static cr_status sm_value(cr_arena *arena, const cr__red *r, sm_fn fn, const cr_array *w,
                          cr_value *y)
{
    if (fn == SMF_LOGSUMEXP)
        return cr__red_output(arena, r, w, y);
    cr_array *o;
    cr_status st = cr__cast(arena, w, (cr_dtype)r->A->dtype, &o);
    if (st == CR_OK)
        *y = cr_value_array(o);
    return st;
}

/* The reduction r, the work result w and the output y of fn(args). */
static cr_status sm_primal(cr_arena *arena, sm_fn fn, const cr_value *args, size_t nargs,
                           cr__red *r, cr_array **w, cr_value *y)
{
    cr_status st = cr__red_parse(arena, k_sm_names[fn], args, nargs, 2, true, r);
    if (st == CR_OK)
        st = sm_forward(arena, r, fn, w);
    return st == CR_OK ? sm_value(arena, r, fn, *w, y) : st;
}

static cr_status sm_rrule(cr_arena *arena, sm_fn fn, const cr_value *args, size_t nargs,
                          cr_value *y, cr_pullback *pb, const void *udata)
{
    cr__red r;
    cr_array *w = NULL;
    cr_status st = sm_primal(arena, fn, args, nargs, &r, &w, y);
    if (st != CR_OK || udata == CR__PRIMAL_ONLY)
        return st;
    CR__PB_START(sm_env, pA, sm_pullback, k_sm_pb_names[fn], e, st);
    e->r = r;
    e->fn = fn;
    e->y = w;
    return CR_OK;
}

/* softmax: Ẏ = y ⊙ (Ẋ - Σ(y ⊙ Ẋ)); logsoftmax: Ẏ = Ẋ - Σ(exp(y) ⊙ Ẋ);
 * logsumexp: Ẏ = Σ exp(x - y) ⊙ Ẋ (= Σ softmax ⊙ Ẋ). */
static cr_status sm_frule(cr_arena *arena, sm_fn fn, const cr_tangent *dargs, const cr_value *args,
                          size_t nargs, cr_value *y, cr_tangent *dy)
{
    cr__red r;
    cr_array *w = NULL;
    cr_status st = sm_primal(arena, fn, args, nargs, &r, &w, y);
    const cr_array *dA = NULL;
    if (st == CR_OK)
        st = cr__dx_array(arena, k_sm_names[fn], dargs, args, 0, CR_DT_F64, &dA);
    if (st != CR_OK)
        return st;
    if (dA == NULL) {
        *dy = cr_tangent_zero();
        return CR_OK;
    }
    cr_array *acc, *out = NULL;
    st = slice_fill(arena, &r, 0.0, &acc);
    if (st != CR_OK)
        return st;
    sm_ctx c = {SM_DOT, NULL, acc->data, NULL, NULL, dA->data};
    cr_value v = {0};
    if (fn == SMF_LOGSUMEXP) {
        /* exp(x - y) dx summed: the softmax weights, shifted by the output itself. */
        cr_array *ls;
        st = cr__new_like(arena, CR_DT_F64, r.A, false, &ls);
        if (st != CR_OK)
            return st;
        sm_ctx c2 = {SM_LSE_D, NULL, w->data, NULL, ls->data, NULL};
        cr_array *ones;
        st = slice_fill(arena, &r, 1.0, &ones);
        if (st != CR_OK)
            return st;
        c2.o2 = ones->data;
        sm_run(&r, &c2, r.Aw, w);
        c.mode = SM_DOT;
        sm_run(&r, &c, ls, acc);
        st = cr__red_output(arena, &r, acc, &v);
    } else {
        st = cr__new_like(arena, CR_DT_F64, r.A, false, &out);
        if (st != CR_OK)
            return st;
        c.mode = fn == SMF_SOFTMAX ? SM_DOT : SM_EXPDOT;
        sm_run(&r, &c, w, acc);
        c.out = out->data;
        c.mode = fn == SMF_SOFTMAX ? SM_SOFTMAX_D : SM_LOGSM_F;
        sm_run(&r, &c, w, acc);
        st = sm_value(arena, &r, SMF_SOFTMAX, out, &v);
    }
    if (st != CR_OK)
        return st;
    *dy = v.kind == CR_KIND_ARRAY ? cr_tangent_array(v.u.arr)
                                  : cr__scalar_tangent(cr__value_dtype(&v), cr__scalar_of(&v));
    return CR_OK;
}

#define SM_RULES(NAME, FN) CR__PARAM_RULES(NAME, sm_rrule, sm_frule, FN, -1)

SM_RULES(softmax, SMF_SOFTMAX)
SM_RULES(logsoftmax, SMF_LOGSOFTMAX)
SM_RULES(logsumexp, SMF_LOGSUMEXP)

cr_status cr__array_register_softmax(cr_registry *reg)
{
    static const cr_argspec r1[1] = {{CR__M_RARRAY, NULL}};
    static const cr_argspec r2[2] = {{CR__M_RARRAY, NULL}, {CR_M_INT | CR_M_A_INT, NULL}};
#define SM_ROWS(NAME)                                                                          \
    CR__ROWS2(NAME, NAME##_frule, r1, r2, &cr__t_red_real, &cr__t_red_real_dims, CR_NONLINEAR, \
              &cr__form_##NAME)
    static const cr__array_rule k[] = {SM_ROWS(softmax), SM_ROWS(logsoftmax), SM_ROWS(logsumexp)};
#undef SM_ROWS
    return cr__add_rules(reg, k, sizeof k / sizeof k[0]);
}
