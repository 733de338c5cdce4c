/*
 * Prepared gradients: a replay tape records f once, keeping with each operation its row,
 * which result it holds and its constants. Preparing turns the records into a flat program
 * (prepared_impl.h); a call evaluates it forwards at the new inputs, checks the recorded
 * comparisons, and sweeps back over it. No call of f, no recording; nothing allocated after
 * the first call.
 *
 * This file is the driver: it walks the records, has the node kind of each compile it (the
 * scalar rows', cr__scalar_kind.replay) or keeps it as an instruction that its kind replays
 * (array functions and rules kept as pullbacks, through their rerun and replay_pull steps),
 * groups the instructions into runs of one kind, and runs a pass by calling each run's kind:
 * one call per run of compiled instructions, which the kind's own loops run, one per
 * instruction of the others.
 */
#include <string.h>

#include "prepared_impl.h"

void cr_prepared_free(cr_prepared *p)
{
    if (p == NULL)
        return;
    cr_tape_free(p->tape);
    cr_ctx_dealloc(p->ctx, p->xs, (p->n ? p->n : 1) * sizeof *p->xs);
    cr_ctx_dealloc(p->ctx, p->vals, p->nws * sizeof *p->vals);
    cr_ctx_dealloc(p->ctx, p->tan, p->ntan * sizeof *p->tan);
    cr_ctx_dealloc(p->ctx, p->prog, p->nprog * sizeof *p->prog);
    cr_ctx_dealloc(p->ctx, p->runs, (p->nruns ? p->nruns : 1) * sizeof *p->runs);
    cr_ctx_dealloc(p->ctx, p->fops, p->nfops * sizeof *p->fops);
    cr_ctx_dealloc(p->ctx, p->fcodes, 2 * p->nfops);
    cr_ctx_dealloc(p->ctx, p->ain, p->n * sizeof *p->ain);
    cr_ctx_dealloc(p->ctx, p->aidx, p->n * sizeof *p->aidx);
    cr_ctx_dealloc(p->ctx, p->yrec, p->nprog * sizeof *p->yrec);
    cr_ctx_dealloc(p->ctx, p->gso, p->ngso * sizeof *p->gso);
    cr_ctx_dealloc(p->ctx, p->lrows, p->nlrows * sizeof *p->lrows);
    cr_ctx_dealloc(p->ctx, p->lguards, p->nlguards * sizeof *p->lguards);
    cr_ctx_dealloc(p->ctx, p, sizeof *p);
}

/* ---- The program ------------------------------------------------------------------------ */

/* The node kind of a record of the stream whose header is h. */
static const cr__node_kind *record_kind(uint64_t h)
{
    switch (hdr_kind(h)) {
    case K_ARRAY:
        return &cr__array_kind;
    case K_GENERIC:
        return &cr__generic_kind;
    default:
        return &cr__scalar_kind;
    }
}

/* The instruction of an array function's (K_ARRAY) or a rule kept as a pullback's
 * (K_GENERIC) record w, which their node kind replays: the node (or cr__greplay), its
 * variables and the rule looked up once. */
static void keep_node(cr_prepared *p, const cr__word *w, size_t i, bool fill, cr__rop *r)
{
    uint64_t h = w[0].u;
    r->res = (uint32_t)i;
    r->nv = (uint8_t)hdr_a(h);
    if (hdr_kind(h) == K_ARRAY) {
        const cr__anode *nd = w[2].p;
        r->code = CR__ROP_ARRAY;
        r->ptr = w[2].p;
        if (fill) {
            if (nd->ops->calls_rule) /* an rrule (not a fused kernel) */
                cr__prepared_resolve(p, r, &nd->fv, nd->vals, nd->nargs);
            p->has_arrays = true;
            p->nres_slots += nd->out != CR_VAR_CONST;
            for (size_t e = 0; e < nd->nout; e++)
                p->nres_slots += nd->outs[e] != CR_VAR_CONST && (nd->outs[e] & CR__ASLOT_BIT) != 0;
        }
    } else {
        /* Every GENERIC record of a replay tape is written by cr__replay_call. */
        cr__greplay *g = (cr__greplay *)(uintptr_t)w[1].cp;
        r->code = CR__ROP_GENERIC;
        r->ptr = g;
        if (fill) {
            if (g->mode == CR__GREPLAY_RRULE)
                cr__prepared_resolve(p, r, &g->fv, g->vals, g->node.nargs);
            p->has_arrays = true;
        }
    }
}

/* Walk the records of p's tape; with prog == NULL only count instructions, constants and
 * runs (a run: instructions of one kind in a row, each of a kind without replay steps of its
 * own in a run of its own). */
static cr_status walk(cr_prepared *p, cr__rop *prog, size_t *nrec, size_t *nconst, size_t *nruns)
{
    cr_tape *t = p->tape;
    cr__cpos s = {.fill = prog != NULL};
    const cr__node_kind *last = NULL;
    size_t nr = 0;
    for (cr__chunk *c = t->store.first; c != NULL; c = c->next) {
        cr__word *w = c->base;
        cr__word *end = c == t->store.chunk ? t->cur : c->end;
        while (w < end) {
            uint64_t h = w[0].u;
            const cr__node_kind *kind = record_kind(h);
            cr__rop r;
            memset(&r, 0, sizeof r);
            s.w = w;
            if (kind->replay != NULL) {
                cr_status st = kind->replay->compile(p, &s, &r);
                if (st != CR_OK)
                    return st;
            } else {
                keep_node(p, w, s.i, s.fill, &r);
            }
            if (kind != last || kind->replay == NULL) {
                if (s.fill)
                    p->runs[nr] = (cr__prun){.kind = kind, .first = s.k};
                nr++;
                last = kind;
            }
            if (s.fill) {
                prog[s.k] = r;
                if (rec_vars(h) > 0 && p->y.idx != CR_VAR_CONST && p->y.idx >= s.i &&
                    p->y.idx < s.i + rec_vars(h))
                    p->ntop = s.k + 1;
            }
            s.i += rec_vars(h);
            w += t->pre + rec_words(h);
            s.k++;
        }
    }
    *nrec = s.k;
    *nconst = s.nc;
    *nruns = nr;
    return CR_OK;
}

cr_status cr__prepared_build(cr_prepared *p)
{
    size_t nrec, nconst, nruns;
    cr_status st = walk(p, NULL, &nrec, &nconst, &nruns);
    if (st != CR_OK)
        return st;
    size_t nv = (size_t)p->tape->nvars + nconst;
    p->nws = 2 * (nv ? nv : 1);
    p->nprog = nrec ? nrec : 1;
    p->nruns = nruns;
    p->vals = cr_ctx_alloc(p->ctx, p->nws * sizeof *p->vals);
    p->prog = cr_ctx_alloc(p->ctx, p->nprog * sizeof *p->prog);
    p->runs = cr_ctx_alloc(p->ctx, (nruns ? nruns : 1) * sizeof *p->runs);
    if (p->vals == NULL || p->prog == NULL || p->runs == NULL) {
        if (p->vals == NULL)
            p->nws = 0;
        if (p->prog == NULL)
            p->nprog = 0;
        return CR_ENOMEM;
    }
    memset(p->vals, 0, p->nws * sizeof *p->vals);
    memset(p->prog, 0, p->nprog * sizeof *p->prog);
    p->adj = p->vals + p->nws / 2;
    p->nvar = p->tape->nvars;
    p->ntop = 0;
    p->nres_slots = 0;
    st = walk(p, p->prog, &nrec, &nconst, &nruns);
    p->mark = cr_arena_get_mark(p->tape->arena);
    /* Each kind that compiled records builds what its passes read. */
    static const cr__node_kind *const kinds[] = {&cr__scalar_kind, &cr__array_kind,
                                                 &cr__generic_kind};
    for (size_t j = 0; j < sizeof kinds / sizeof *kinds && st == CR_OK; j++)
        if (kinds[j]->replay != NULL)
            st = kinds[j]->replay->link(p, nrec);
    p->solo = nruns == 1 ? p->runs[0].kind->replay : NULL;
    return st;
}

/* Release the program and the replay tape of a lean first-order program (prepared_impl.h):
 * a call reads only the compact program, its rows and comparisons and the workspace. */
static void make_lean(cr_prepared *p)
{
    if (p->has_arrays || p->arrays || p->tan != NULL || (p->tape->flags & CR__TAPE_SO_CHECK) != 0 ||
        !p->compact)
        return;
    cr_ctx_dealloc(p->ctx, p->prog, p->nprog * sizeof *p->prog);
    p->prog = NULL;
    p->nprog = 0;
    cr_tape_free(p->tape);
    p->tape = NULL;
    p->lean = true;
}

void cr__prepared_begin(cr_prepared *p)
{
    if (p->tape == NULL) /* a lean program: no tape, nothing to clear or rewind */
        return;
    if (p->tape->status != CR_OK) /* (a tape without error has nothing to clear) */
        cr_tape_clear_error(p->tape);
    if (p->has_arrays)
        cr_arena_rewind(p->tape->arena, p->mark);
}

/* ---- Replay ----------------------------------------------------------------------------- */

/* Evaluate the program forwards at the scalar inputs x (NULL for array inputs): each run by
 * its kind, a compiled run in one call, another kind's instruction by its rerun step (rules
 * called again, kernels' loops run again). */
static cr_status forward(cr_prepared *p, const double *x)
{
    cr__rpos *s = &p->pos;
    *s = (cr__rpos){0};
    if (p->solo != NULL) /* one run, compiled (a lean program): its kind runs it all */
        return p->solo->forward(p, x);
    for (size_t j = 0; j < p->nruns; j++) {
        const cr__prun *run = &p->runs[j];
        cr_status st;
        if (run->kind->replay != NULL) {
            st = run->kind->replay->forward(p, x);
        } else {
            const cr__rop *q = &p->prog[run->first];
            st = run->kind->rerun(p, q, p->vals);
            s->k = run->first + 1;
            s->res = q->res + q->nv;
        }
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

/* Sweep back over the instructions that can reach y, run by run from the one making y. */
static cr_status reverse(cr_prepared *p)
{
    double *adj = p->adj;
    /* Each step clears its result's adjoint once read, and the gradient's reader those of
     * the inputs: a lean program starts with every adjoint 0 but the constant slots' (which
     * receive contributions nobody reads: cleared here so that they never overflow). Other
     * programs' rules may leave adjoints behind: all are cleared. */
    if (p->lean)
        memset(adj + p->nvar, 0, (p->nws / 2 - p->nvar) * sizeof *adj);
    else
        memset(adj, 0, p->nws / 2 * sizeof *adj);
    adj[p->y.idx] = 1.0;
    /* (cr_prepared_value_and_gradient_arrays leaves the accumulators clear after each call) */
    if (p->has_arrays && !p->arrays)
        cr__array_clear(p->tape);
    cr__rpos *s = &p->pos;
    *s = p->rtop;
    if (p->solo != NULL) /* one run, compiled (a lean program): its kind sweeps it all */
        return p->solo->reverse(p);
    size_t first = p->nlead < p->ntop ? p->nlead : p->ntop; /* (leading inputs: no step) */
    size_t j = p->nruns;
    while (s->k > first) {
        do /* the run of instruction s->k - 1 */
            j--;
        while (p->runs[j].first >= s->k);
        const cr__prun *run = &p->runs[j];
        cr_status st;
        if (run->kind->replay != NULL) {
            st = run->kind->replay->reverse(p);
        } else {
            const cr__rop *q = &p->prog[s->k - 1];
            st = run->kind->replay_pull(p, q, adj);
            s->k--;
            s->res = q->res;
        }
        if (st != CR_OK)
            return st;
    }
    return CR_OK;
}

cr_status cr__prepared_run(cr_prepared *p, const double *x)
{
    cr_status st = forward(p, x);
    /* A constant y (a branch chose a constant) has no sweep, but the forward pass still
     * checks the comparisons that chose it. */
    return st == CR_OK && p->y.idx != CR_VAR_CONST ? reverse(p) : st;
}

cr_status cr__prepared_new(cr_ctx *ctx, const cr_engine *eng, size_t n, bool second,
                           cr_prepared **out)
{
    cr_prepared *p = cr_ctx_alloc(ctx, sizeof *p);
    *out = p;
    if (p == NULL)
        return CR_ENOMEM;
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->n = n;
    cr_tape_params tp = {.struct_size = sizeof tp, .engine = eng};
    cr_status st = cr_tape_new(ctx, &tp, &p->tape);
    if (st == CR_OK) {
        cr__tape_make_replay(p->tape);
        if (second)
            p->tape->flags |= CR__TAPE_SO_CHECK;
    }
    return st;
}

/* ---- Scalar inputs ---------------------------------------------------------------------- */

cr_status cr__prepare_scalar(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                             const double *x, size_t n, const char *who, bool second,
                             cr_prepared **out)
{
    if (out == NULL)
        return cr_ctx_error(ctx, CR_EINVAL, "%s: out is NULL", who);
    *out = NULL;
    if (ctx == NULL)
        return CR_EINVAL;
    if (f == NULL || (n > 0 && x == NULL))
        return cr_ctx_error(ctx, CR_EINVAL, "%s: NULL function or inputs", who);
    if (n >= CR_TAPE_MAX_VARS) /* (before n variables are allocated: n * size could wrap) */
        return cr_ctx_error(ctx, CR_EOVERFLOW, "%s: %zu input%s, more than a recording holds (%zu)",
                            who, n, CR__S(n), (size_t)CR_TAPE_MAX_VARS - 1);
    cr_prepared *p;
    cr_status st = cr__prepared_new(ctx, eng, n, second, &p);
    if (p == NULL)
        return st;
    if (st == CR_OK) {
        p->xs = cr_ctx_alloc(ctx, (n ? n : 1) * sizeof *p->xs);
        if (p->xs == NULL)
            st = CR_ENOMEM;
    }
    if (st == CR_OK) {
        st = cr_tape_record(p->tape, f, env, x, n, p->xs, &p->y, 1);
        if (st != CR_OK && cr_tape_status(p->tape) != CR_OK)
            cr_ctx_error(ctx, st, "%s", cr_tape_errmsg(p->tape));
    }
    if (st == CR_OK && p->tape->ninputs != n)
        st = cr_ctx_error(ctx, CR_EINVAL,
                          "%s: the function made %zu input%s of its own; a "
                          "prepared gradient replays with the given inputs only",
                          who, p->tape->ninputs - n, CR__S(p->tape->ninputs - n));
    if (st == CR_OK)
        st = cr__prepared_build(p);
    if (st == CR_OK && p->tape->avars.n != p->nres_slots)
        st = cr_ctx_error(ctx, CR_EINVAL,
                          "%s: the function made %zu array input%s of its own; "
                          "a prepared gradient replays with the given inputs only",
                          who, (size_t)(p->tape->avars.n - p->nres_slots),
                          CR__S(p->tape->avars.n - p->nres_slots));
    if (st != CR_OK) {
        cr_prepared_free(p);
        return st;
    }
    if (!second)
        make_lean(p);
    *out = p;
    return CR_OK;
}

cr_status cr_prepare_gradient(cr_ctx *ctx, const cr_engine *eng, cr_ad_fn f, void *env,
                              const double *x, size_t n, cr_prepared **out)
{
    return cr__prepare_scalar(ctx, eng, f, env, x, n, "cr_prepare_gradient", false, out);
}

cr_status cr_prepared_value_and_gradient(cr_prepared *p, const double *x, size_t n, double *y,
                                         double *grad)
{
    if (p == NULL)
        return CR_EINVAL;
    if (p->arrays)
        return cr_ctx_error(p->ctx, CR_EINVAL,
                            "cr_prepared_value_and_gradient: prepared for arrays; call "
                            "cr_prepared_value_and_gradient_arrays");
    if ((n > 0 && (x == NULL || grad == NULL)))
        return cr_ctx_error(p->ctx, CR_EINVAL, "cr_prepared_value_and_gradient: NULL x or grad");
    if (n != p->n)
        return cr_ctx_error(p->ctx, CR_ESHAPE,
                            "cr_prepared_value_and_gradient: prepared for %zu input%s, %zu given",
                            p->n, CR__S(p->n), n);
    cr__prepared_begin(p);
    /* A failed replay (a comparison that changed) leaves values and partials of two
     * points; the next replay rewrites all of them before any sweep, so the prepared
     * gradient stays usable. */
    cr_status st = cr__prepared_run(p, x);
    if (st != CR_OK)
        return st;
    bool yc = p->y.idx == CR_VAR_CONST;
    for (size_t j = 0; j < n; j++)
        grad[j] = yc ? 0.0 : p->adj[p->xs[j].idx];
    for (size_t j = 0; j < n && !yc; j++) /* (the next call starts from 0: reverse()) */
        p->adj[p->xs[j].idx] = 0.0;
    if (y != NULL)
        *y = yc ? p->y.v : p->vals[p->y.idx];
    if (p->has_arrays)
        cr__array_clear(p->tape);
    return CR_OK;
}
