/*
 * The K_ARRAY records' node kind (cr__array_kind): every phase of such a record (reverse,
 * forward and second-order sweeps; the prepared replays' evaluation again and their reverse
 * steps) is its node's own step, through the cr__anode_ops its record points at: an array
 * function's call (array_call.c), a fused kernel (kernel.c), an operation with its own steps
 * (tape_op.c). This file knows none of them.
 */
#include "prepared_impl.h"

/* ---- Sweeps --------------------------------------------------------------------------------- */

/* Each K_ARRAY record is swept by its node's own kind (cr__anode_ops): an array function's
 * call, a fused kernel, an operation with its own steps. */
static cr_status array_reverse(cr_tape *t, cr__rev *s)
{
    uint64_t h = s->p[-1].u;
    const cr__anode *nd = s->p[-2].p;
    uint32_t a = hdr_a(h);
    s->general = true;
    s->i -= a;
    cr_status st = nd->ops->pull(t, nd, a ? &s->adj[s->i] : NULL, s->adj);
    s->p -= 2 + s->pre;
    return st;
}

static cr_status array_forward(cr_tape *t, cr__fwd *s)
{
    uint64_t h = s->p[0].u;
    const cr__anode *nd = s->p[s->pre].p;
    cr_status st = CR_OK;
    /* The output's record, when its tangents go unread (out_unread), is left out if its
     * kind allows (a fused kernel, whose second-order step reads its arguments' tangents
     * only); the records that read its results come after top (it makes variables: i < top). */
    if (!(s->out_unread && s->i + rec_vars(h) == s->top && nd->ops->tail_free))
        st = nd->ops->forward(t, nd, s->tan, s->k, s->i);
    s->i += rec_vars(h);
    s->p += s->pre + rec_words(h);
    return st;
}

static cr_status array_second(cr_tape *t, cr__sec *s)
{
    uint64_t h = s->p[-1].u;
    const cr__anode *nd = s->p[-2].p;
    s->i -= hdr_a(h);
    cr_status st = nd->ops->pull2(t, nd, s->i, s->adj, s->adjd, s->tan, s->k);
    s->p -= rec_words(h) + 1;
    return st;
}

/* ---- Prepared replays ------------------------------------------------------------------------ */

static cr_status array_rerun(cr_prepared *p, const cr__rop *r, double *v)
{
    cr__anode *nd = r->ptr;
    return nd->ops->rerun(p->tape, nd, &r->rule, v, r->res, NULL);
}

static cr_status array_replay_pull(cr_prepared *p, const cr__rop *r, double *adj)
{
    const cr__anode *nd = r->ptr;
    return nd->ops->pull(p->tape, nd, r->nv ? &adj[r->res] : NULL, adj);
}

/* Forwards in a prepared H·v: the record evaluated again for the values, then its forward
 * step for the tangents of its results (added to zeros for scalar ones). The result of a
 * rule goes into its node for the second-order forms, which read it (prepared_hvp.c puts
 * the recorded one back after the call). A record whose kind allows it (a fused kernel)
 * that is the program's last operation (usually the one making the output) takes no
 * forward step, as on the tape (cr__sweep_forward's out_unread): its second-order step reads
 * its arguments' tangents only, and no operation after it reads its result's. */
static cr_status array_rerun2(cr_prepared *p, const cr__rop *r, double *v, double *vd, bool last)
{
    cr__anode *nd = r->ptr;
    cr_value y = p->yrec[r - p->prog]; /* (a kernel gives no new result) */
    nd->y = y;                         /* new results are checked against the recording's */
    cr_status st = nd->ops->rerun(p->tape, nd, &r->rule, v, r->res, &y);
    if (st != CR_OK)
        return st;
    nd->y = y;
    for (size_t o = 0; o < r->nv; o++)
        vd[r->res + o] = 0.0;
    if (last && nd->ops->tail_free)
        return CR_OK;
    return nd->ops->forward(p->tape, nd, vd, 1, r->res);
}

static cr_status array_replay_pull2(cr_prepared *p, const cr__rop *r, double *adj, double *adjd,
                                    const double *vd)
{
    const cr__anode *nd = r->ptr;
    return nd->ops->pull2(p->tape, nd, r->res, adj, adjd, vd, 1);
}

const cr__node_kind cr__array_kind = {
    array_reverse,     array_forward, array_second,       array_rerun,
    array_replay_pull, array_rerun2,  array_replay_pull2, NULL};
