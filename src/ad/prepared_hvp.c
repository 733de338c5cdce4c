/*
 * Prepared Hessian-vector products: forward-over-reverse on a prepared gradient's program,
 * as cr_tape_hvp does on a second-order tape. One forward pass carries the values, the
 * partials and the tangents along the direction; one reverse pass carries the adjoints and
 * their tangents. For an instruction y = f(x) with partials p (of this evaluation) and
 * second derivatives H:
 *
 *     ẏ     = Σ_j p_j ẋ_j
 *     x̄_j  += p_j ȳ
 *     x̄̇_j += p_j ȳ̇ + ȳ Σ_l H_jl ẋ_l
 *
 * H comes from the instruction's row as the second-order tape takes it (cr__row_hessian:
 * the complex step on the row's complex instantiation, or central differences of the
 * partials for real-only rows); the arithmetic rows are expanded inline, from their one
 * definition (CR__ARITH_ROWS) instantiated for complex numbers, with the same steps. No
 * derivative is written here.
 *
 * A prepared H·v replays scalar programs: rows (inline or through their function pointers),
 * constants, comparisons (checked as the first-order replay checks them) and zero-adjoint
 * or non-differentiable functions evaluated again through their primal (no derivative, so
 * no second derivative either). Scalar rules kept as pullbacks and array functions are
 * refused when preparing (CR_EUNIMPL): a pullback has no second-order form, and the array
 * records' second-order steps need the forward and second-order tape's state
 * (tape_array2.c), which a replay tape does not keep.
 */
#include <math.h>
#include <string.h>

#include <chainrules/rules_math.h>

#include "../rulesets/array_impl.h"
#include "prepared_impl.h"

/* ---- Second derivatives of the arithmetic rows ------------------------------------------ */

/* hcol_NAME(xr, l, w, hd): column l of the row's Hessian at xr times w, added to hd:
 * hd[j] += ∂D_j/∂x_l w for each argument j. ∂D_j/∂x_l is the imaginary part of partial j of
 * the row's body evaluated at x + i h e_l over complex numbers (as the row's c128
 * instantiation, CR_SCALAR_EVALS, evaluates it) over h. A linear row's partials are
 * constants, whose imaginary parts the compiler folds to zero, and the terms with them. */
#define HCOL(NAME, NIN, NOUT, PRIMAL, ...)                                             \
    static inline void hcol_##NAME(const double *xr, size_t l, double w, double *hd)   \
    {                                                                                  \
        cr_complex x_[2], Y[1], D[2];                                                  \
        double h = cr__cstep(xr[l]);                                                   \
        x_[0] = cr__c(xr[0], l == 0 ? h : 0.0);                                        \
        x_[1] = cr__c((NIN) > 1 ? xr[1] : 0.0, l == 1 ? h : 0.0);                      \
        {                                                                              \
            const cr_complex *x = x_;                                                  \
            PRIMAL;                                                                    \
            __VA_ARGS__;                                                               \
        }                                                                              \
        (void)Y;                                                                       \
        double im0 = cimag(D[0]), im1 = (NIN) > 1 ? cimag(D[(NIN) > 1 ? 1 : 0]) : 0.0; \
        if (im0 != 0.0)                                                                \
            hd[0] += im0 / h * w;                                                      \
        if (im1 != 0.0)                                                                \
            hd[1] += im1 / h * w;                                                      \
    }
CR__ARITH_ROWS(HCOL)
#undef HCOL

/* ---- The passes -------------------------------------------------------------------------- */

/* Forward: values, partials and tangents at the inputs in (dir: the direction, per input). Tangents
 * of constant slots stay zero. */
static cr_status forward2(cr_prepared *p, const double *in, const double *dir)
{
    double *v = p->vals, *vd = p->tan;
    cr__rop *r = p->prog + p->nlead, *end = p->prog + p->nprog;
    if (p->nlead > 0) {
        memcpy(v, in, p->nlead * sizeof *v);
        memcpy(vd, dir, p->nlead * sizeof *vd);
    }
    for (; r < end; r++) {
        switch (r->code) {
#define ARITH(NAME, NIN, NOUT, PRIMAL, ...)             \
    case CR__ROP_##NAME: {                              \
        double x_[2], Y[1], D[2];                       \
        x_[0] = v[r->src[0]];                           \
        x_[1] = (NIN) > 1 ? v[r->src[1]] : 0.0;         \
        {                                               \
            const double *x = x_;                       \
            PRIMAL;                                     \
            __VA_ARGS__;                                \
        }                                               \
        v[r->res] = Y[0];                               \
        r->p[0] = D[0];                                 \
        double t_ = D[0] * vd[r->src[0]];               \
        if ((NIN) > 1) {                                \
            r->p[1] = D[1];                             \
            t_ += D[(NIN) > 1 ? 1 : 0] * vd[r->src[1]]; \
        }                                               \
        vd[r->res] = t_;                                \
        break;                                          \
    }
            CR__ARITH_ROWS(ARITH)
#undef ARITH
        case CR__ROP_ROW: {
            cr__row_forward(r, v);
            double t = 0.0;
            for (size_t j = 0; j < r->nin; j++)
                t += r->p[j] * vd[r->src[j]];
            vd[r->res] = t;
            break;
        }
        case CR__ROP_INPUT:
            v[r->res] = in[r->src[0]];
            vd[r->res] = dir[r->src[0]];
            break;
        case CR__ROP_GUARD: {
            cr_status st = cr__prepared_guard(p, r, v);
            if (st != CR_OK)
                return st;
            break;
        }
        default: { /* CR__ROP_GENERIC, evaluated through its primal: no derivative */
            cr_status st = cr__prepared_grerun(p, r, v);
            if (st != CR_OK)
                return st;
            for (size_t o = 0; o < r->nv; o++)
                vd[r->res + o] = 0.0;
            break;
        }
        }
    }
    return CR_OK;
}

/* Reverse: adjoints and their tangents, from y. */
static void reverse2(cr_prepared *p)
{
    size_t nv = p->nws / 2;
    const double *v = p->vals, *vd = p->tan;
    double *adj = p->adj, *adjd = p->tan + nv;
    uint32_t nvar = p->tape->nvars; /* sources at or above are constant slots */
    memset(adj, 0, nv * sizeof *adj);
    memset(adjd, 0, nv * sizeof *adjd);
    adj[p->y.idx] = 1.0;
    const cr__rop *first = p->prog + (p->nlead < p->ntop ? p->nlead : p->ntop);
    for (const cr__rop *r = p->prog + p->ntop; r-- > first;) {
        switch (r->code) {
#define ARITH2(NAME, NIN, NOUT, PRIMAL, ...)                                      \
    case CR__ROP_##NAME: {                                                        \
        double g = adj[r->res], gd = adjd[r->res];                                \
        double xr[2], hd[2] = {0.0, 0.0};                                         \
        uint32_t s0 = r->src[0], s1 = (NIN) > 1 ? r->src[1] : s0;                 \
        xr[0] = v[s0];                                                            \
        xr[1] = v[s1];                                                            \
        for (size_t l = 0; l < (NIN); l++) {                                      \
            uint32_t sl = l == 0 ? s0 : s1;                                       \
            if (sl >= nvar) /* a constant: not a column */                        \
                continue;                                                         \
            hcol_##NAME(xr, l, vd[sl], hd);                                       \
        }                                                                         \
        adj[s0] += r->p[0] * g;                                                   \
        adjd[s0] += r->p[0] * gd + g * hd[0];                                     \
        if ((NIN) > 1) {                                                          \
            adj[s1] += r->p[(NIN) > 1 ? 1 : 0] * g;                               \
            adjd[s1] += r->p[(NIN) > 1 ? 1 : 0] * gd + g * hd[(NIN) > 1 ? 1 : 0]; \
        }                                                                         \
        break;                                                                    \
    }
            CR__ARITH_ROWS(ARITH2)
#undef ARITH2
        case CR__ROP_ROW: {
            const cr__rinfo *info = r->ptr;
            const cr_scalar_rule *row = info->row;
            size_t nin = r->nin, o = r->o;
            double g = adj[r->res], gd = adjd[r->res];
            double xin[CR_SCALAR_MAX_IN], Y[CR_SCALAR_MAX_OUT];
            double D[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN];
            double H[CR_SCALAR_MAX_OUT * CR_SCALAR_MAX_IN * CR_SCALAR_MAX_IN];
            unsigned cols = 0;
            for (size_t j = 0; j < nin; j++) {
                xin[j] = v[r->src[j]];
                if (info->map[j] >= 0)
                    cols |= 1u << j;
            }
            /* All the partials at x (cr__row_hessian starts from them). */
            row->f64(xin, Y, D);
            cr__row_hessian(row, xin, D, H, cols);
            /* The symmetric part, as the second-order tape keeps it (central differences
             * give the two mixed partials to about ten digits each). */
            const double *Ho = H + o * nin * nin;
            for (size_t j = 0; j < nin; j++) {
                double hd = 0.0;
                for (size_t l = 0; l < nin; l++)
                    if (cols & (1u << l))
                        hd += ((cols & (1u << j)) ? 0.5 * (Ho[j * nin + l] + Ho[l * nin + j])
                                                  : Ho[j * nin + l]) *
                              vd[r->src[l]];
                adj[r->src[j]] += r->p[j] * g;
                adjd[r->src[j]] += r->p[j] * gd + g * hd;
            }
            break;
        }
        default: /* inputs, comparisons, functions of no derivative */
            break;
        }
    }
}

/* ---- API ---------------------------------------------------------------------------------- */

/* CR_EUNIMPL, when preparing, for an instruction the second-order replay cannot run. */
static cr_status check_program(cr_prepared *p)
{
    for (size_t k = 0; k < p->nprog; k++) {
        const cr__rop *r = &p->prog[k];
        if (r->code == CR__ROP_ARRAY) {
            const cr__anode *nd = r->ptr;
            return cr_ctx_error(p->ctx, CR_EUNIMPL,
                                "cr_prepare_hvp: %s (record %zu) is an array function; a "
                                "prepared Hessian-vector product replays scalar programs only "
                                "(use cr_tape_hvp or cr_tape_ahvp on a CR_TAPE_SECOND_ORDER "
                                "tape)",
                                nd->fname != NULL ? nd->fname : "(unnamed)", k);
        }
        if (r->code == CR__ROP_GENERIC) {
            const cr__greplay *g = r->ptr;
            if (g->mode == CR__GREPLAY_RRULE)
                return cr_ctx_error(p->ctx, CR_EUNIMPL,
                                    "cr_prepare_hvp: %s (record %zu) is kept as its rrule's "
                                    "pullback, which has no second-order form; a prepared "
                                    "Hessian-vector product replays scalar-table functions "
                                    "and implementations written against the tape",
                                    g->node.fname, k);
        }
    }
    return CR_OK;
}

cr_status cr_prepare_hvp(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env, const double *x,
                         size_t n, cr_prepared **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "cr_prepare_hvp: out is NULL");
    *out = NULL;
    cr_prepared *p;
    cr_status st = cr__prepare_scalar(ctx, eng, f, env, x, n, "cr_prepare_hvp", &p);
    if (st != CR_OK)
        return st;
    st = check_program(p);
    if (st == CR_OK) {
        p->tan = cr_ctx_alloc(ctx, p->nws * sizeof *p->tan);
        if (p->tan == NULL)
            st = cr_ctx_error(ctx, CR_ENOMEM,
                              "cr_prepare_hvp: no memory for a workspace of %zu doubles", p->nws);
    }
    if (st != CR_OK) {
        cr_prepared_free(p);
        return st;
    }
    p->ntan = p->nws;
    memset(p->tan, 0, p->ntan * sizeof *p->tan);
    *out = p;
    return CR_OK;
}

cr_status cr_prepared_hvp(cr_prepared *p, const double *x, size_t n, const double *v, double *hv,
                          double *y, double *grad)
{
    const char *who = "cr_prepared_hvp";
    if (p == NULL)
        return CR_EINVAL;
    if (p->tan == NULL)
        return cr_ctx_error(p->ctx, CR_EINVAL,
                            "%s: prepared with %s, which is first order; prepare it with "
                            "cr_prepare_hvp",
                            who, p->arrays ? "cr_prepare_gradient_arrays" : "cr_prepare_gradient");
    if (n > 0 && (x == NULL || v == NULL || hv == NULL))
        return cr_ctx_error(p->ctx, CR_EINVAL, "%s: NULL x, v or hv", who);
    if (n != p->n)
        return cr_ctx_error(p->ctx, CR_ESHAPE, "%s: prepared for %zu inputs, %zu given", who, p->n,
                            n);
    for (size_t j = 0; j < n; j++)
        if (!isfinite(v[j]))
            return cr_ctx_error(p->ctx, CR_EDOMAIN, "%s: direction %zu is %g, not a finite number",
                                who, j, v[j]);
    if (p->y.idx == CR_VAR_CONST) {
        if (y != NULL)
            *y = p->y.v;
        memset(hv, 0, n * sizeof *hv);
        if (grad != NULL)
            memset(grad, 0, n * sizeof *grad);
        return CR_OK;
    }
    cr__prepared_begin(p);
    /* A failed replay (a comparison that changed, a primal that failed) leaves values of two
     * points; the next call rewrites all of them before any sweep. */
    cr_status st = forward2(p, x, v);
    if (st != CR_OK)
        return st;
    reverse2(p);
    const double *adjd = p->tan + p->nws / 2;
    for (size_t j = 0; j < n; j++) {
        hv[j] = adjd[p->xs[j].idx];
        if (grad != NULL)
            grad[j] = p->adj[p->xs[j].idx];
    }
    if (y != NULL)
        *y = p->vals[p->y.idx];
    return CR_OK;
}
