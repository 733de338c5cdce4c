/*
 * MPI calls in the input: their adjoint and tangent communications.
 *
 * A call of MPI_Send, MPI_Recv, MPI_Sendrecv, MPI_Bcast, MPI_Reduce, MPI_Allreduce,
 * MPI_Gather, MPI_Scatter, MPI_Allgather or MPI_Alltoall is a primitive whose derivative is
 * a communication of the same shape:
 *
 *   primal                      adjoint (reverse mode)                   tangent
 *   send x to d                 receive from d, add into x_b             send x_d to d
 *   receive y from s            send y_b to s (the actual source), y_b=0  receive y_d
 *   bcast x from r              reduce-sum x_b to r; others x_b = 0      bcast x_d
 *   reduce-sum x to y at r      bcast y_b from r, add into x_b            reduce-sum x_d
 *   allreduce-sum x to y        allreduce-sum y_b, add into x_b, y_b = 0 allreduce-sum x_d
 *   gather x to y at r          scatter y_b from r, add into x_b          gather x_d
 *   scatter x at r to y         gather y_b to r, add into x_b (at r)      scatter x_d
 *   allgather x to y            reduce-scatter-sum y_b, add into x_b     allgather x_d
 *   alltoall x to y             alltoall y_b back, add into x_b          alltoall x_d
 *   (all)reduce-max/min x to y  (allreduce-sum / root's bcast of) y_b,   the winner's x_d
 *                               to each element's winner only
 *                               (MPI_MAXLOC/MINLOC rank)
 *
 * The wrappers run on every rank whether or not the buffers are active there (a rank
 * whose buffer is inactive still sends zeros or receives into a scratch), so that the
 * derivative communications match whenever the primal ones do: the adjoint sweep performs
 * them in the reverse order of the primal's, each rank in the reverse order of its own,
 * which cannot deadlock when the primal does not (docs/mpi.md). Buffers whose data is
 * differentiated must be doubles sent as MPI_DOUBLE, and reductions must use MPI_SUM,
 * MPI_MAX or MPI_MIN;
 * otherwise the derivative is marked failed (NaN), the communications still matched.
 * Received data are treated as depending on the active inputs (varied), and sent data as
 * influencing the outputs (useful), on every rank alike.
 */
#include <string.h>

#include "ad.h"

enum {
    K_SEND,
    K_RECV,
    K_SENDRECV,
    K_BCAST,
    K_REDUCE,
    K_ALLREDUCE,
    K_GATHER,
    K_SCATTER,
    K_ALLGATHER,
    K_ALLTOALL
};

typedef struct mpi_fn {
    const char *name;
    int kind, nparams;
    int in, in_count, in_type;    /* the buffer read (-1: none) and its count and datatype */
    int out, out_count, out_type; /* the buffer written (-1: none) */
} mpi_fn;

static const mpi_fn k_mpi[] = {
    {"MPI_Send", K_SEND, 6, 0, 1, 2, -1, -1, -1},
    {"MPI_Recv", K_RECV, 7, -1, -1, -1, 0, 1, 2},
    {"MPI_Sendrecv", K_SENDRECV, 12, 0, 1, 2, 5, 6, 7},
    {"MPI_Bcast", K_BCAST, 5, 0, 1, 2, 0, 1, 2},
    {"MPI_Reduce", K_REDUCE, 7, 0, 2, 3, 1, 2, 3},
    {"MPI_Allreduce", K_ALLREDUCE, 6, 0, 2, 3, 1, 2, 3},
    {"MPI_Gather", K_GATHER, 8, 0, 1, 2, 3, 4, 5},
    {"MPI_Scatter", K_SCATTER, 8, 0, 1, 2, 3, 4, 5},
    {"MPI_Allgather", K_ALLGATHER, 7, 0, 1, 2, 3, 4, 5},
    {"MPI_Alltoall", K_ALLTOALL, 7, 0, 1, 2, 3, 4, 5},
};

int ad_mpi_kind(const char *name)
{
    for (size_t i = 0; i < sizeof k_mpi / sizeof k_mpi[0]; i++)
        if (!strcmp(k_mpi[i].name, name))
            return (int)i;
    return -1;
}

int ad_mpi_bind(ad_func *g, int kind)
{
    const mpi_fn *m = &k_mpi[kind];
    if (g->nparams != m->nparams) {
        ad_error(g->loc, "%s is declared with %d parameters, not the %d of MPI-3", g->name,
                 g->nparams, m->nparams);
        return 1;
    }
    ad_prim *p = ad_alloc(sizeof *p);
    p->mpi = kind + 1;
    p->outp = m->out;
    g->prim = p;
    for (int j = 0; j < g->nparams && j < 64; j++)
        g->writes_param[j] = j == m->out;
    return 0;
}

/* Whether argument i of an MPI call is a buffer of doubles (under its implicit cast to
 * void *) whose variable is active. */
static bool active_buffer(const ad_expr *a)
{
    while (a && a->kind == EX_CAST && a->a && a->type->kind == TY_PTR &&
           a->type->elem->kind == TY_VOID)
        a = a->a;
    if (!a || (a->type->kind != TY_PTR && a->type->kind != TY_ARRAY) ||
        a->type->elem->kind != TY_DOUBLE)
        return false;
    const ad_var *v = ad_root(a);
    return v && v->active;
}

uint64_t ad_mpi_mask(const ad_expr *c)
{
    const mpi_fn *m = &k_mpi[c->callee->prim->mpi - 1];
    uint64_t mask = (uint64_t)1 << 63; /* the wrappers always run */
    if (m->in >= 0 && m->in < c->nargs && active_buffer(c->args[m->in]))
        mask |= (uint64_t)1 << m->in;
    if (m->out >= 0 && m->out < c->nargs && active_buffer(c->args[m->out]))
        mask |= (uint64_t)1 << m->out;
    return mask;
}

bool ad_mpi_buffer(const ad_func *g, int i)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    return i == m->in || i == m->out;
}

/* ---- The wrappers ------------------------------------------------------------------------- */

static const char *arg(int i)
{
    return ad_fmt("a%d_", i);
}

static void params(ad_buf *out, const ad_func *g, uint64_t mask, const char *sfx)
{
    for (int i = 0; i < g->nparams; i++) {
        if (i)
            ad_buf_put(out, ", ");
        ad_emit_decl(out, g->params[i]->type, arg(i));
        if (sfx && (mask >> i & 1))
            ad_buf_printf(out, ", const void *%s%s", arg(i), sfx);
    }
}

static void call_primal(ad_buf *out, const ad_func *g, const char *status)
{
    ad_buf_printf(out, "%s(", g->name);
    for (int i = 0; i < g->nparams; i++) {
        const char *a = arg(i);
        if (status && i == g->nparams - 1)
            a = status;
        ad_buf_printf(out, "%s%s", i ? ", " : "", a);
    }
    ad_buf_put(out, ")");
}

/* The double elements of buffer i, as an lvalue array. */
static const char *dbl(const char *p)
{
    return ad_fmt("((double *)(uintptr_t)(%s))", p);
}

static void loop_push(ad_buf *o, const char *p, const char *n, const char *ind)
{
    ad_buf_printf(o,
                  "%sfor (int i_ = 0; i_ < (%s); i_++)\n%s    cr_adstack_push_f64(stp_, %s[i_]);\n",
                  ind, n, ind, dbl(p));
}

static void loop_pop(ad_buf *o, const char *p, const char *n, const char *op, const char *ind)
{
    ad_buf_printf(o,
                  "%sfor (int i_ = (%s); i_-- > 0;)\n%s    %s[i_] %s cr_adstack_pop_f64(stp_);\n",
                  ind, n, ind, dbl(p), op);
}

/* Scratch of n doubles (zeroed) named s_ when the buffer has no shadow: the shadow's name. */
static const char *shadow_or_scratch(ad_buf *o, uint64_t mask, int i, const char *sfx,
                                     const char *n, const char *name)
{
    if (mask >> i & 1)
        return ad_fmt("%s%s", arg(i), sfx);
    ad_buf_printf(o,
                  "    double *%s = calloc((size_t)((%s) > 0 ? (%s) : 1), sizeof(double));\n"
                  "    if (!%s)\n        MPI_Abort(MPI_COMM_WORLD, 1); /* a rank that cannot take "
                  "part would leave its partners waiting */\n",
                  name, n, n, name);
    return name;
}

static void free_scratch(ad_buf *o, uint64_t mask, int i, const char *name)
{
    if (!(mask >> i & 1))
        ad_buf_printf(o, "    free(%s);\n", name);
}

/* The datatype and operation checks: a failed derivative, the communications kept. */
static void checks(ad_buf *o, const mpi_fn *m, const char *fail)
{
    int t[2] = {m->in_type, m->out_type};
    for (int k = 0; k < 2; k++)
        if (t[k] >= 0 && (k == 0 || t[1] != t[0]))
            ad_buf_printf(o, "    if (%s != MPI_DOUBLE)\n        %s;\n", arg(t[k]), fail);
    if (m->kind == K_ALLREDUCE || m->kind == K_REDUCE)
        ad_buf_printf(o, "    if (%s != MPI_SUM && %s != MPI_MAX && %s != MPI_MIN)\n        %s;\n",
                      arg(4), arg(4), arg(4), fail);
}

/* MPI_MAX and MPI_MIN of an allreduce: each element's winning rank (MPI_MAXLOC and
 * MPI_MINLOC: the lowest rank among ties, the same on every rank) into w_[i].r, from the
 * input values (read before an in-place call overwrites them); me_ is the rank. */
static void winners(ad_buf *o, const char *comm)
{
    ad_buf_printf(o,
                  "    const int loc_ = a4_ == MPI_MAX ? 1 : a4_ == MPI_MIN ? 2 : 0;\n"
                  "    struct {\n        double v;\n        int r;\n    } *w_ = NULL;\n"
                  "    int me_ = 0;\n    MPI_Comm_rank(%s, &me_);\n"
                  "    if (loc_) {\n"
                  "        w_ = malloc((size_t)(a2_ > 0 ? a2_ : 1) * sizeof *w_);\n"
                  "        if (!w_)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n"
                  "        const double *src_ = a0_ == MPI_IN_PLACE ? (const double *)a1_ : "
                  "(const double *)a0_;\n"
                  "        for (int i_ = 0; i_ < a2_; i_++) {\n"
                  "            w_[i_].v = src_[i_];\n            w_[i_].r = me_;\n        }\n"
                  "    }\n",
                  comm);
}

/* After the primal: the winners found (collective: every rank takes part). */
static void winners_reduce(ad_buf *o, const char *comm)
{
    ad_buf_printf(o,
                  "    if (loc_)\n        MPI_Allreduce(MPI_IN_PLACE, w_, a2_, MPI_DOUBLE_INT, "
                  "loc_ == 1 ? MPI_MAXLOC : MPI_MINLOC, %s);\n",
                  comm);
}

static void split(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    const char *in = m->in >= 0 ? arg(m->in) : NULL, *out = m->out >= 0 ? arg(m->out) : NULL;
    const char *in_n = m->in >= 0 ? arg(m->in_count) : NULL;
    const char *out_n = m->out >= 0 ? arg(m->out_count) : NULL;
    bool status = m->kind == K_RECV || m->kind == K_SENDRECV;
    bool rooted = m->kind == K_REDUCE || m->kind == K_GATHER || m->kind == K_SCATTER;
    const char *root = m->kind == K_BCAST ? arg(3) : m->kind == K_REDUCE ? arg(5) : arg(6);
    const char *comm = arg(g->nparams - (status ? 2 : 1));
    /* the receive count of a gather at the root is the size times the count */
    const char *gathered = ad_fmt("size_ * (%s)", out_n ? out_n : "0");
    const char *scattered = ad_fmt("size_ * (%s)", in_n ? in_n : "0");

    /* ---- forward sweep: the overwritten contents, the primal, the actual source and tag */
    ad_buf_printf(o, "static int cr_ad_%s_fw%s(", g->name, mn);
    params(o, g, 0, NULL);
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    if (rooted || m->kind == K_ALLGATHER || m->kind == K_BCAST || m->kind == K_ALLTOALL)
        ad_buf_printf(o,
                      "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                      "    MPI_Comm_size(%s, &size_);\n    (void)size_;\n    (void)rank_;\n",
                      comm, comm);
    if (m->kind == K_ALLREDUCE || m->kind == K_REDUCE)
        winners(o, comm);
    if (m->kind == K_RECV || m->kind == K_SENDRECV || m->kind == K_ALLREDUCE)
        loop_push(o, out, out_n, "    ");
    else if (m->kind == K_BCAST)
        loop_push(o, out, out_n, "    ");
    else if (m->kind == K_REDUCE || m->kind == K_GATHER)
        ad_buf_printf(o, "    if (rank_ == %s) {\n", root),
            loop_push(o, out, m->kind == K_GATHER ? gathered : out_n, "        "),
            ad_buf_put(o, "    }\n");
    else if (m->kind == K_SCATTER || m->kind == K_ALLGATHER || m->kind == K_ALLTOALL)
        loop_push(o, out, m->kind == K_SCATTER ? out_n : gathered, "    ");
    if (status) {
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = ");
        call_primal(o, g, "&s_");
        ad_buf_printf(o,
                      ";\n    cr_adstack_push_i64(stp_, s_.MPI_SOURCE);\n"
                      "    cr_adstack_push_i64(stp_, s_.MPI_TAG);\n"
                      "    if (%s != MPI_STATUS_IGNORE)\n        *%s = s_;\n    return r_;\n}\n\n",
                      arg(g->nparams - 1), arg(g->nparams - 1));
    } else if (m->kind == K_ALLREDUCE || m->kind == K_REDUCE) {
        /* the winners (known to every rank) go on the stack after the primal, so the adjoint
         * pops them first */
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        winners_reduce(o, comm);
        ad_buf_put(o, "    if (loc_) {\n        for (int i_ = 0; i_ < a2_; i_++)\n"
                      "            cr_adstack_push_i64(stp_, w_[i_].r);\n"
                      "        free(w_);\n    }\n    return r_;\n}\n\n");
    } else {
        ad_buf_put(o, "    return ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n}\n\n");
    }

    /* ---- adjoint sweep */
    ad_buf_printf(o, "static void cr_ad_%s_bw%s(", g->name, mn);
    params(o, g, mask, "_b");
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    checks(o, m, "cr_adstack_set_failed(stp_)");
    if (rooted || m->kind == K_ALLGATHER || m->kind == K_BCAST || m->kind == K_ALLTOALL)
        ad_buf_printf(o,
                      "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                      "    MPI_Comm_size(%s, &size_);\n    (void)size_;\n",
                      comm, comm);
    const char *xb = NULL, *yb = NULL;
    switch (m->kind) {
    case K_SEND:
        /* receive the adjoint from the destination, added into x_b */
        xb = shadow_or_scratch(o, mask, m->in, "_b", in_n, "x_");
        loop_push(o, xb, in_n, "    ");
        ad_buf_printf(o, "    MPI_Recv(%s, %s, MPI_DOUBLE, %s, %s, %s, MPI_STATUS_IGNORE);\n",
                      dbl(xb), in_n, arg(3), arg(4), comm);
        loop_pop(o, xb, in_n, "+=", "    ");
        free_scratch(o, mask, m->in, "x_");
        break;
    case K_RECV:
    case K_SENDRECV:
        yb = shadow_or_scratch(o, mask, m->out, "_b", out_n, "y_");
        ad_buf_put(o, "    const int tag_ = (int)cr_adstack_pop_i64(stp_);\n"
                      "    const int src_ = (int)cr_adstack_pop_i64(stp_);\n");
        if (m->kind == K_RECV) {
            ad_buf_printf(o, "    MPI_Send(%s, %s, MPI_DOUBLE, src_, tag_, %s);\n", dbl(yb), out_n,
                          comm);
        } else {
            /* the adjoint of the received part goes back to its source while the adjoint
             * of the sent part comes from the destination */
            xb = shadow_or_scratch(o, mask, m->in, "_b", in_n, "x_");
            loop_push(o, xb, in_n, "    ");
            ad_buf_printf(o,
                          "    MPI_Sendrecv(%s, %s, MPI_DOUBLE, src_, tag_, %s, %s, MPI_DOUBLE, "
                          "%s, %s, %s, MPI_STATUS_IGNORE);\n",
                          dbl(yb), out_n, dbl(xb), in_n, arg(3), arg(4), comm);
            loop_pop(o, xb, in_n, "+=", "    ");
            free_scratch(o, mask, m->in, "x_");
        }
        ad_buf_printf(o, "    for (int i_ = 0; i_ < (%s); i_++)\n        %s[i_] = 0;\n", out_n,
                      dbl(yb));
        free_scratch(o, mask, m->out, "y_");
        loop_pop(o, out, out_n, "=", "    ");
        break;
    case K_BCAST:
        /* the sum of every rank's adjoint at the root; the others' values were overwritten */
        xb = shadow_or_scratch(o, mask, m->in, "_b", in_n, "x_");
        ad_buf_printf(o,
                      "    if (rank_ == %s)\n        MPI_Reduce(MPI_IN_PLACE, %s, %s, MPI_DOUBLE, "
                      "MPI_SUM, %s, %s);\n    else {\n        MPI_Reduce(%s, NULL, %s, "
                      "MPI_DOUBLE, MPI_SUM, %s, %s);\n        for (int i_ = 0; i_ < (%s); i_++)\n"
                      "            %s[i_] = 0;\n    }\n",
                      root, dbl(xb), in_n, root, comm, dbl(xb), in_n, root, comm, in_n, dbl(xb));
        free_scratch(o, mask, m->in, "x_");
        loop_pop(o, out, out_n, "=", "    ");
        break;
    case K_ALLREDUCE:
    case K_REDUCE:
        /* y's adjoint (the root's, broadcast, for a reduce) added into x's; an in-place
         * call's buffer is its own input */
        yb = shadow_or_scratch(o, mask, m->out, "_b", out_n, "y_");
        xb = shadow_or_scratch(o, mask, m->in, "_b", in_n, "x_");
        if (m->kind == K_ALLREDUCE) {
            /* the sum of every rank's adjoint of y; for MPI_MAX and MPI_MIN it goes to each
             * element's winner only (its rank popped from the forward sweep) */
            ad_buf_printf(o,
                          "    MPI_Allreduce(MPI_IN_PLACE, %s, %s, MPI_DOUBLE, MPI_SUM, %s);\n"
                          "    int me_ = 0;\n    MPI_Comm_rank(%s, &me_);\n"
                          "    if (a4_ == MPI_MAX || a4_ == MPI_MIN) {\n"
                          "        for (int i_ = (%s); i_-- > 0;) {\n"
                          "            const int w_ = (int)cr_adstack_pop_i64(stp_);\n"
                          "            if (w_ != me_)\n                %s[i_] = 0;\n"
                          "        }\n    }\n",
                          dbl(yb), out_n, comm, comm, out_n, dbl(yb));
        } else {
            /* the root's adjoint of y, broadcast; for MPI_MAX and MPI_MIN kept by each
             * element's winner only (the ranks popped from the forward sweep) */
            ad_buf_printf(o,
                          "    int me_ = 0, *wr_ = NULL;\n    MPI_Comm_rank(%s, &me_);\n"
                          "    if (a4_ == MPI_MAX || a4_ == MPI_MIN) {\n"
                          "        wr_ = malloc((size_t)(a2_ > 0 ? a2_ : 1) * sizeof *wr_);\n"
                          "        if (!wr_)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n"
                          "        for (int i_ = a2_; i_-- > 0;)\n"
                          "            wr_[i_] = (int)cr_adstack_pop_i64(stp_);\n    }\n",
                          comm);
            ad_buf_printf(o,
                          "    if (rank_ != %s) {\n"
                          "        for (int i_ = 0; i_ < (%s); i_++)\n"
                          "            cr_adstack_push_f64(stp_, %s[i_]);\n"
                          "        MPI_Bcast(%s, %s, MPI_DOUBLE, %s, %s);\n"
                          "        for (int i_ = 0; wr_ && i_ < (%s); i_++)\n"
                          "            if (wr_[i_] != me_)\n                %s[i_] = 0;\n"
                          "        for (int i_ = (%s); i_-- > 0;)\n"
                          "            %s[i_] += cr_adstack_pop_f64(stp_);\n"
                          "    } else {\n        MPI_Bcast(%s, %s, MPI_DOUBLE, %s, %s);\n"
                          "        for (int i_ = 0; wr_ && i_ < (%s); i_++)\n"
                          "            if (wr_[i_] != me_ && %s == MPI_IN_PLACE)\n"
                          "                %s[i_] = 0;\n",
                          root, in_n, dbl(xb), dbl(xb), in_n, root, comm, in_n, dbl(xb), in_n,
                          dbl(xb), dbl(yb), out_n, root, comm, out_n, in, dbl(yb));
        }
        ad_buf_printf(o,
                      "%s    if (%s != MPI_IN_PLACE) {\n"
                      "%s        for (int i_ = 0; i_ < (%s); i_++) {\n"
                      "%s            %s[i_] += %s%s[i_];\n%s            %s[i_] = 0;\n%s        }\n"
                      "%s    }\n",
                      m->kind == K_REDUCE ? "    " : "", in, m->kind == K_REDUCE ? "    " : "",
                      out_n, m->kind == K_REDUCE ? "    " : "", dbl(xb),
                      m->kind == K_REDUCE ? "wr_ && wr_[i_] != me_ ? 0 : " : "", dbl(yb),
                      m->kind == K_REDUCE ? "    " : "", dbl(yb), m->kind == K_REDUCE ? "    " : "",
                      m->kind == K_REDUCE ? "    " : "");
        if (m->kind == K_REDUCE)
            ad_buf_put(o, "    }\n    free(wr_);\n");
        free_scratch(o, mask, m->in, "x_");
        free_scratch(o, mask, m->out, "y_");
        if (m->kind == K_ALLREDUCE)
            loop_pop(o, out, out_n, "=", "    ");
        else
            ad_buf_printf(o, "    if (rank_ == %s) {\n", root),
                loop_pop(o, out, out_n, "=", "        "), ad_buf_put(o, "    }\n");
        break;
    case K_GATHER:
    case K_SCATTER:
    case K_ALLGATHER:
    case K_ALLTOALL: {
        /* the adjoint of the blocks: scattered back (gather), gathered to the root (scatter),
         * reduced and scattered (allgather), sent back (alltoall), added into x_b */
        const char *yn = m->kind == K_SCATTER ? out_n : gathered;
        const char *xn = m->kind == K_SCATTER || m->kind == K_ALLTOALL ? scattered : in_n;
        yb = shadow_or_scratch(o, mask, m->out, "_b", yn, "y_");
        xb = shadow_or_scratch(o, mask, m->in, "_b", xn, "x_");
        const char *guard = m->kind == K_SCATTER ? ad_fmt("if (rank_ == %s) ", root) : "";
        ad_buf_printf(o, "    %s{\n", guard);
        loop_push(o, xb, xn, "        ");
        ad_buf_put(o, "    }\n");
        if (m->kind == K_GATHER)
            ad_buf_printf(o, "    MPI_Scatter(%s, %s, MPI_DOUBLE, %s, %s, MPI_DOUBLE, %s, %s);\n",
                          dbl(yb), out_n, dbl(xb), in_n, root, comm);
        else if (m->kind == K_SCATTER)
            ad_buf_printf(o, "    MPI_Gather(%s, %s, MPI_DOUBLE, %s, %s, MPI_DOUBLE, %s, %s);\n",
                          dbl(yb), out_n, dbl(xb), in_n, root, comm);
        else if (m->kind == K_ALLTOALL)
            ad_buf_printf(o, "    MPI_Alltoall(%s, %s, MPI_DOUBLE, %s, %s, MPI_DOUBLE, %s);\n",
                          dbl(yb), out_n, dbl(xb), in_n, comm);
        else
            ad_buf_printf(o, "    MPI_Reduce_scatter_block(%s, %s, %s, MPI_DOUBLE, MPI_SUM, %s);\n",
                          dbl(yb), dbl(xb), in_n, comm);
        ad_buf_printf(o, "    %s{\n", guard);
        loop_pop(o, xb, xn, "+=", "        ");
        ad_buf_put(o, "    }\n");
        const char *zero_guard = m->kind == K_GATHER ? ad_fmt("if (rank_ == %s) ", root) : "";
        ad_buf_printf(
            o,
            "    %s{\n        for (int i_ = 0; i_ < (%s); i_++)\n            %s[i_] = 0;\n    }\n",
            zero_guard, yn, dbl(yb));
        free_scratch(o, mask, m->in, "x_");
        free_scratch(o, mask, m->out, "y_");
        if (m->kind == K_GATHER)
            ad_buf_printf(o, "    if (rank_ == %s) {\n", root),
                loop_pop(o, out, yn, "=", "        "), ad_buf_put(o, "    }\n");
        else
            loop_pop(o, out, yn, "=", "    ");
        break;
    }
    }
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", arg(i));
    ad_buf_put(o, "}\n\n");
}

static void tangent(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    bool status = m->kind == K_RECV || m->kind == K_SENDRECV;
    const char *comm = arg(g->nparams - (status ? 2 : 1));
    ad_buf_printf(o, "static int cr_ad_%s_tan%s(", g->name, mn);
    params(o, g, mask, "_d");
    ad_buf_put(o, ")\n{\n    int fail_ = 0;\n");
    checks(o, m, "fail_ = 1");
    bool sized = m->kind == K_GATHER || m->kind == K_SCATTER || m->kind == K_ALLGATHER ||
                 m->kind == K_ALLTOALL;
    if (sized)
        ad_buf_printf(o,
                      "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                      "    MPI_Comm_size(%s, &size_);\n    (void)rank_;\n",
                      comm, comm);
    const char *in_n = m->in >= 0 ? arg(m->in_count) : "0";
    const char *out_n = m->out >= 0 ? arg(m->out_count) : "0";
    const char *xn =
        m->kind == K_SCATTER || m->kind == K_ALLTOALL ? ad_fmt("size_ * (%s)", in_n) : in_n;
    const char *yn = m->kind == K_GATHER || m->kind == K_ALLGATHER || m->kind == K_ALLTOALL
                         ? ad_fmt("size_ * (%s)", out_n)
                         : out_n;
    const char *xd = m->in >= 0 ? shadow_or_scratch(o, mask, m->in, "_d", xn, "x_") : NULL;
    const char *yd =
        m->out >= 0 && m->out != m->in ? shadow_or_scratch(o, mask, m->out, "_d", yn, "y_") : xd;
    if (m->kind == K_ALLREDUCE || m->kind == K_REDUCE)
        winners(o, comm);
    /* the primal, then the same communication of the tangents */
    if (status)
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = "), call_primal(o, g, "&s_"),
            ad_buf_put(o, ";\n");
    else
        ad_buf_put(o, "    const int r_ = "), call_primal(o, g, NULL), ad_buf_put(o, ";\n");
    switch (m->kind) {
    case K_SEND:
        ad_buf_printf(o, "    MPI_Send(%s, %s, MPI_DOUBLE, %s, %s, %s);\n", dbl(xd), in_n, arg(3),
                      arg(4), comm);
        break;
    case K_RECV:
        ad_buf_printf(o,
                      "    MPI_Recv(%s, %s, MPI_DOUBLE, s_.MPI_SOURCE, s_.MPI_TAG, %s, "
                      "MPI_STATUS_IGNORE);\n",
                      dbl(yd), out_n, comm);
        break;
    case K_SENDRECV:
        ad_buf_printf(o,
                      "    MPI_Sendrecv(%s, %s, MPI_DOUBLE, %s, %s, %s, %s, MPI_DOUBLE, "
                      "s_.MPI_SOURCE, s_.MPI_TAG, %s, MPI_STATUS_IGNORE);\n",
                      dbl(xd), in_n, arg(3), arg(4), dbl(yd), out_n, comm);
        break;
    case K_BCAST:
        ad_buf_printf(o, "    MPI_Bcast(%s, %s, MPI_DOUBLE, %s, %s);\n", dbl(xd), in_n, arg(3),
                      comm);
        break;
    case K_ALLREDUCE:
        /* MPI_MAX and MPI_MIN: the winner's tangent, summed with the others' zeros */
        winners_reduce(o, comm);
        ad_buf_printf(
            o,
            "    if (loc_) {\n        for (int i_ = 0; i_ < a2_; i_++)\n"
            "            %s[i_] = w_[i_].r == me_ ? (a0_ == MPI_IN_PLACE ? %s : %s)[i_] : 0;\n"
            "        MPI_Allreduce(MPI_IN_PLACE, %s, a2_, MPI_DOUBLE, MPI_SUM, %s);\n"
            "        free(w_);\n    } else\n    ",
            dbl(yd), dbl(yd), dbl(xd), dbl(yd), comm);
        /* FALLTHROUGH */
    case K_REDUCE:
        if (m->kind == K_REDUCE) {
            /* MPI_MAX and MPI_MIN: the winners' tangents, summed at the root */
            winners_reduce(o, comm);
            ad_buf_printf(
                o,
                "    if (loc_) {\n"
                "        double *t_ = malloc((size_t)(a2_ > 0 ? a2_ : 1) * sizeof *t_);\n"
                "        if (!t_)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n"
                "        for (int i_ = 0; i_ < a2_; i_++)\n"
                "            t_[i_] = w_[i_].r == me_ ? (a0_ == MPI_IN_PLACE ? %s : %s)[i_] : 0;\n"
                "        if (a0_ == MPI_IN_PLACE) {\n"
                "            memcpy(%s, t_, (size_t)(a2_ > 0 ? a2_ : 0) * sizeof *t_);\n"
                "            MPI_Reduce(MPI_IN_PLACE, %s, a2_, MPI_DOUBLE, MPI_SUM, %s, %s);\n"
                "        } else {\n"
                "            MPI_Reduce(t_, %s, a2_, MPI_DOUBLE, MPI_SUM, %s, %s);\n"
                "        }\n        free(t_);\n        free(w_);\n    } else\n    ",
                dbl(yd), dbl(xd), dbl(yd), dbl(yd), arg(5), comm, dbl(yd), arg(5), comm);
        }
        ad_buf_printf(o,
                      "    %s(%s == MPI_IN_PLACE ? MPI_IN_PLACE : (const void *)%s, %s, %s, "
                      "MPI_DOUBLE, MPI_SUM%s, %s);\n",
                      m->kind == K_REDUCE ? "MPI_Reduce" : "MPI_Allreduce", arg(0), dbl(xd),
                      dbl(yd), out_n, m->kind == K_REDUCE ? ad_fmt(", %s", arg(5)) : "", comm);
        break;
    case K_GATHER:
    case K_SCATTER:
        ad_buf_printf(o, "    %s(%s, %s, MPI_DOUBLE, %s, %s, MPI_DOUBLE, %s, %s);\n",
                      m->kind == K_GATHER ? "MPI_Gather" : "MPI_Scatter", dbl(xd), in_n, dbl(yd),
                      out_n, arg(6), comm);
        break;
    case K_ALLGATHER:
    case K_ALLTOALL:
        ad_buf_printf(o, "    %s(%s, %s, MPI_DOUBLE, %s, %s, MPI_DOUBLE, %s);\n",
                      m->kind == K_ALLGATHER ? "MPI_Allgather" : "MPI_Alltoall", dbl(xd), in_n,
                      dbl(yd), out_n, comm);
        break;
    }
    if (status)
        ad_buf_printf(o, "    if (%s != MPI_STATUS_IGNORE)\n        *%s = s_;\n",
                      arg(g->nparams - 1), arg(g->nparams - 1));
    if (m->out >= 0 && (mask >> m->out & 1))
        ad_buf_printf(o,
                      "    if (fail_)\n        for (int i_ = 0; i_ < (%s); i_++)\n"
                      "            %s[i_] = (double)NAN;\n",
                      yn, dbl(yd));
    if (m->in >= 0)
        free_scratch(o, mask, m->in, "x_");
    if (m->out >= 0 && m->out != m->in)
        free_scratch(o, mask, m->out, "y_");
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", arg(i));
    ad_buf_put(o, "    (void)fail_;\n    return r_;\n}\n\n");
}

void ad_mpi_emit(ad_buf *out, const ad_func *g, uint64_t mask, int kind, const char *mn)
{
    if (kind == 0)
        split(out, g, mask, mn);
    else
        tangent(out, g, mask, mn);
}
