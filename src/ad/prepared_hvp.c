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
 * A prepared H·v replays rows (inline or through their function pointers), constants,
 * comparisons (checked as the first-order replay checks them), zero-adjoint or
 * non-differentiable functions evaluated again through their primal (no derivative, so no
 * second derivative either), and array functions and fused kernels: their rules (or loops)
 * are called again for the values, then their forward step (frule, or the kernel's) and
 * their second-order reverse step (array_call.c, kernel.c) run on the replay tape's array
 * state, as on a second-order tape. Scalar rules kept as pullbacks (GENERIC records of user
 * rules, rrule_via_ad, hypot of three arguments, evalpoly, tuple rules) are called again at
 * the new values as a second-order tape records them (cr__rrule_second, tape.c: the partials
 * from the pullback, their central differences from the rule at x ± h, 1 + 2k rule calls for
 * k variable arguments, their memory given back at once); the forward pass keeps the partials
 * and the symmetrised second derivatives (cr__greplay.so), the reverse pass applies them. The
 * replay tape refuses, when recording, the array functions and kernels without a
 * second-order form (CR__TAPE_SO_CHECK).
 *
 * This file drives the two passes run by run (prepared_impl.h): the scalar instructions' steps
 * are the scalar kind's (forward2, reverse2 in node_scalar_replay.c), the others' their node
 * kind's rerun2 and replay_pull2.
 */
#include <math.h>
#include <string.h>

#include "../rules/array_rule_impl.h"
#include "prepared_impl.h"

/* ---- The passes -------------------------------------------------------------------------- */

/* The recorded results back in the nodes of the rules (which the first-order replay and the
 * next call check new results against). */
static void restore_results(cr_prepared *p)
{
    if (p->yrec == NULL)
        return;
    for (size_t k = 0; k < p->nprog; k++)
        if (p->prog[k].code == CR__ROP_ARRAY)
            ((cr__anode *)p->prog[k].ptr)->y = p->yrec[k];
}

/* Forward: values, partials and tangents at the inputs in (dir: the direction, per input),
 * run by run: a compiled run by its kind's forward2 (the scalar rows'), another kind's
 * instruction by its rerun2 step. */
static cr_status forward2(cr_prepared *p, const double *in, const double *dir)
{
    for (size_t j = 0; j < p->nruns; j++) {
        const cr__prun *run = &p->runs[j];
        size_t end = j + 1 < p->nruns ? p->runs[j + 1].first : p->nprog;
        cr_status st;
        if (run->kind->replay != NULL) {
            st = run->kind->replay->forward2(p, run->first, end, in, dir);
        } else {
            const cr__rop *r = &p->prog[run->first];
            st = run->kind->rerun2(p, r, p->vals, p->tan, run->first + 1 == p->nprog);
        }
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

/* Reverse: adjoints and their tangents, from y (array records: the shadows and their
 * derivatives in the tape's sweep state), run by run from the one making y. */
static cr_status reverse2(cr_prepared *p)
{
    size_t nv = p->nws / 2;
    const double *vd = p->tan;
    double *adj = p->adj, *adjd = p->tan + nv;
    memset(adj, 0, nv * sizeof *adj);
    memset(adjd, 0, nv * sizeof *adjd);
    adj[p->y.idx] = 1.0;
    size_t first = p->nlead < p->ntop ? p->nlead : p->ntop; /* (leading inputs: no step) */
    for (size_t j = p->nruns; j-- > 0;) {
        const cr__prun *run = &p->runs[j];
        size_t lo = run->first > first ? run->first : first;
        size_t hi = j + 1 < p->nruns ? p->runs[j + 1].first : p->nprog;
        hi = hi < p->ntop ? hi : p->ntop;
        if (lo >= hi)
            continue;
        if (run->kind->replay != NULL) {
            cr_status st = run->kind->replay->reverse2(p, lo, hi);
            if (st != CR_OK)
                return st;
            continue;
        }
        for (size_t k = hi; k-- > lo;) {
            cr_status st = run->kind->replay_pull2(p, &p->prog[k], adj, adjd, vd);
            if (st != CR_OK)
                return st;
        }
    }
    return CR_OK;
}

/* ---- API ---------------------------------------------------------------------------------- */

/* The doubles of second-order data (cr__greplay.so) instruction r needs: for a rule kept as a
 * pullback with results, its partials and second derivatives per result (nv (k + k^2) for
 * its k variable arguments) and one more, so that so is never NULL for a rule that has it; 0
 * for every other instruction. */
static size_t so_size(const cr__rop *r)
{
    if (r->code != CR__ROP_GENERIC)
        return 0;
    const cr__greplay *g = r->ptr;
    if (g->mode != CR__GREPLAY_RRULE || r->nv == 0)
        return 0;
    size_t k = cr__rrule2_vars(g->node.args, g->node.nargs);
    return r->nv * k * (1 + k) + 1;
}

/* The second-order workspace of a newly prepared p (freed with p on failure). */
static cr_status finish_prepare(cr_prepared *p, const char *who, cr_prepared **out)
{
    cr_ctx *ctx = p->ctx;
    /* The doubles of second-order data the rules kept as pullbacks need. */
    size_t nso = 0;
    for (size_t k = 0; k < p->nprog; k++)
        nso += so_size(&p->prog[k]);
    cr_status st = CR_OK;
    if (nso > 0) {
        p->gso = cr_ctx_alloc(ctx, nso * sizeof *p->gso);
        if (p->gso == NULL)
            st = cr_ctx_error(ctx, CR_ENOMEM,
                              "%s: no memory for the second derivatives of %zu doubles", who, nso);
        else
            p->ngso = nso;
    }
    if (st == CR_OK) {
        p->tan = cr_ctx_alloc(ctx, p->nws * sizeof *p->tan);
        if (p->tan == NULL)
            st = cr_ctx_error(ctx, CR_ENOMEM, "%s: no memory for a workspace of %zu doubles", who,
                              p->nws);
        else
            p->ntan = p->nws; /* its size, for cr_prepared_free if what follows fails */
    }
    if (st == CR_OK && p->has_arrays) {
        p->yrec = cr_ctx_alloc(ctx, p->nprog * sizeof *p->yrec);
        if (p->yrec == NULL)
            st = cr_ctx_error(ctx, CR_ENOMEM, "%s: no memory for %zu recorded results", who,
                              p->nprog);
    }
    if (st != CR_OK) {
        cr_prepared_free(p);
        return st;
    }
    memset(p->tan, 0, p->ntan * sizeof *p->tan);
    /* Each rule kept as a pullback gets its part of gso. */
    for (size_t k = 0, at = 0; p->gso != NULL && k < p->nprog; k++) {
        const cr__rop *r = &p->prog[k];
        size_t n = so_size(r);
        if (n == 0)
            continue;
        cr__greplay *g = r->ptr;
        g->so = p->gso + at;
        memset(g->so, 0, n * sizeof *g->so);
        at += n;
    }
    for (size_t k = 0; p->yrec != NULL && k < p->nprog; k++) {
        p->yrec[k] = (cr_value){.kind = CR_KIND_NOTHING};
        if (p->prog[k].code == CR__ROP_ARRAY)
            p->yrec[k] = ((const cr__anode *)p->prog[k].ptr)->y;
    }
    *out = p;
    return CR_OK;
}

/* One second-order replay: the scalar inputs x along v, or (x NULL) the array inputs xs,
 * bound already, along vs. Leaves the scalar results in p's workspace and the array ones in
 * the tape's sweep state, which the caller ends (cr__array_sweep_end) once it has read
 * them, whatever the status. */
static cr_status run2(cr_prepared *p, const double *x, const double *v, const cr_array *const *xs,
                      const cr_array *const *vs)
{
    cr_tape *t = p->tape;
    cr_status st = CR_OK;
    if (p->has_arrays)
        st = cr__array_sweep_begin(t, 1, true);
    if (st == CR_OK && vs != NULL) {
        cr_avar few[4];
        cr_avar *as =
            p->n <= 4 ? few : cr_arena_alloc(t->arena, p->n * sizeof *as, _Alignof(cr_avar));
        if (as == NULL)
            return cr__tape_fail(t, CR__ALLOC_STATUS(t->arena),
                                 "cr_prepared_hvp_arrays: no room for %zu array inputs", p->n);
        for (size_t j = 0; j < p->n; j++) {
            as[j].a = xs[j];
            as[j].idx = p->aidx[j];
            as[j].tape = t->id;
        }
        st = cr__array_seed(t, as, p->n, vs);
    }
    if (st == CR_OK)
        st = forward2(p, x, v);
    if (st == CR_OK && p->y.idx != CR_VAR_CONST) /* a constant y: the comparisons only */
        st = reverse2(p);
    return st;
}

cr_status cr_prepare_hvp(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env, const double *x,
                         size_t n, cr_prepared **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "cr_prepare_hvp: out is NULL");
    *out = NULL;
    cr_prepared *p;
    cr_status st = cr__prepare_scalar(ctx, eng, f, env, x, n, "cr_prepare_hvp", true, &p);
    if (st != CR_OK)
        return st;
    return finish_prepare(p, "cr_prepare_hvp", out);
}

cr_status cr_prepare_hvp_arrays(cr_ctx *ctx, const cr_engine *eng, cr_ad_array_fn f, void *env,
                                const cr_array *const *xs, size_t n, cr_prepared **out)
{
    const char *who = "cr_prepare_hvp_arrays";
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "%s: out is NULL", who);
    *out = NULL;
    cr_prepared *p;
    cr_status st = cr__prepare_arrays(ctx, eng, f, env, xs, n, who, true, &p);
    if (st != CR_OK)
        return st;
    return finish_prepare(p, who, out);
}

/* CR_EINVAL unless p was prepared for H v with inputs of the kind the call gives. */
static cr_status check_kind(cr_prepared *p, const char *who, bool arrays)
{
    if (p->tan == NULL)
        return cr_ctx_error(p->ctx, CR_EINVAL,
                            "%s: prepared with %s, which is first order; prepare it with %s", who,
                            p->arrays ? "cr_prepare_gradient_arrays" : "cr_prepare_gradient",
                            p->arrays ? "cr_prepare_hvp_arrays" : "cr_prepare_hvp");
    if (p->arrays != arrays)
        return cr_ctx_error(p->ctx, CR_EINVAL, "%s: prepared for %s; call %s", who,
                            p->arrays ? "arrays" : "scalars",
                            p->arrays ? "cr_prepared_hvp_arrays" : "cr_prepared_hvp");
    return CR_OK;
}

cr_status cr_prepared_hvp(cr_prepared *p, const double *x, size_t n, const double *v, double *hv,
                          double *y, double *grad)
{
    const char *who = "cr_prepared_hvp";
    if (p == NULL)
        return CR_EINVAL;
    cr_status st = check_kind(p, who, false);
    if (st != CR_OK)
        return st;
    if (n > 0 && (x == NULL || v == NULL || hv == NULL))
        return cr_ctx_error(p->ctx, CR_EINVAL, "%s: NULL x, v or hv", who);
    if (n != p->n)
        return cr_ctx_error(p->ctx, CR_ESHAPE, "%s: prepared for %zu input%s, %zu given", who, p->n,
                            CR__S(p->n), n);
    for (size_t j = 0; j < n; j++)
        if (!isfinite(v[j]))
            return cr_ctx_error(p->ctx, CR_EDOMAIN, "%s: direction %zu is %g, not a finite number",
                                who, j, v[j]);
    cr__prepared_begin(p);
    /* A failed replay (a comparison that changed, a primal that failed) leaves values of two
     * points; the next call rewrites all of them before any sweep. */
    st = run2(p, x, v, NULL, NULL);
    if (st == CR_OK) {
        const double *adjd = p->tan + p->nws / 2;
        bool yc = p->y.idx == CR_VAR_CONST;
        for (size_t j = 0; j < n; j++) {
            hv[j] = yc ? 0.0 : adjd[p->xs[j].idx];
            if (grad != NULL)
                grad[j] = yc ? 0.0 : p->adj[p->xs[j].idx];
        }
        if (y != NULL)
            *y = yc ? p->y.v : p->vals[p->y.idx];
    }
    cr__array_sweep_end(p->tape);
    restore_results(p);
    return st;
}

cr_status cr_prepared_hvp_arrays(cr_prepared *p, const cr_array *const *xs, size_t n,
                                 const cr_array *const *vs, cr_array *const *hvs, double *y,
                                 cr_array *const *grads)
{
    const char *who = "cr_prepared_hvp_arrays";
    if (p == NULL)
        return CR_EINVAL;
    cr_status st = check_kind(p, who, true);
    if (st != CR_OK)
        return st;
    if (xs == NULL || vs == NULL || hvs == NULL)
        return cr_ctx_error(p->ctx, CR_EINVAL, "%s: NULL inputs, directions or H v arrays", who);
    cr_tape *t = p->tape;
    if ((st = cr__prepared_check_arrays(p, who, xs, n, hvs, "H v array")) != CR_OK ||
        (grads != NULL &&
         (st = cr__prepared_check_arrays(p, who, xs, n, grads, "gradient array")) != CR_OK))
        return st;
    for (size_t j = 0; j < n; j++)
        if ((st = cr__array_check_dir(t, who, "direction array", j, vs[j], xs[j])) != CR_OK)
            return st;
    cr__prepared_begin(p);
    for (size_t j = 0; j < n; j++)
        t->avars.slots[p->aidx[j]].val = xs[j];
    /* A constant y made from variables (all come from array records) may have been chosen
     * by comparisons: run2 checks them. */
    if (p->y.idx != CR_VAR_CONST || p->has_arrays)
        st = run2(p, NULL, NULL, xs, vs);
    if (p->y.idx == CR_VAR_CONST) {
        for (size_t j = 0; j < n && st == CR_OK; j++) {
            st = cr__array_write_out(t, who, "H v array", j, cr__tzero(), hvs[j], xs[j]);
            if (st == CR_OK && grads != NULL)
                st = cr__array_write_out(t, who, "gradient array", j, cr__tzero(), grads[j], xs[j]);
        }
        if (st == CR_OK && y != NULL)
            *y = p->y.v;
        cr__array_sweep_end(t);
        restore_results(p);
        return st;
    }
    for (size_t j = 0; j < n && st == CR_OK; j++) {
        uint32_t s = p->aidx[j];
        st = cr__array_write_out(t, who, "H v array", j, *cr__asweep_slot(t, s, 0, true), hvs[j],
                                 xs[j]);
        if (st == CR_OK && grads != NULL)
            st = cr__array_write_out(t, who, "gradient array", j, t->avars.slots[s].acc, grads[j],
                                     xs[j]);
    }
    if (st == CR_OK && y != NULL)
        *y = p->vals[p->y.idx];
    cr__array_sweep_end(t);
    restore_results(p);
    return st;
}
