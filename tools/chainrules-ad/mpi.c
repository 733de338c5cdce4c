/*
 * MPI calls in the input: their adjoint and tangent communications.
 *
 * A call of MPI_Send, MPI_Recv, MPI_Sendrecv, MPI_Bcast, MPI_Reduce, MPI_Allreduce,
 * MPI_Gather(v), MPI_Scatter(v), MPI_Allgather(v), MPI_Alltoall, MPI_Isend, MPI_Irecv,
 * MPI_Wait or MPI_Waitall is a primitive whose derivative is a communication of the same
 * shape:
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
 *   (all)reduce-prod x to y     as sum, times the product of the other   sum of x_d times
 *                               ranks' x (from an allgather: no division) the others' product
 *   gatherv / scatterv /        scatterv / gatherv (summed into          the same call on
 *   allgatherv                  overlapping parts) / reduce-scatter       the tangents
 *   isend x, its wait           at the wait: irecv of the adjoint;       isend x_d with x
 *                               at the isend: wait, add into x_b
 *   irecv y, its wait           at the wait: isend of y_b, y_b = 0;      irecv y_d with y
 *                               at the irecv: wait, restore y            (wildcards: at the wait)
 *
 * The user's MPI_Request objects are mapped to the derivative messages by their addresses
 * (k_runtime below: a table in the generated file).
 *
 * The wrappers run on every rank whether or not the buffers are active there (a rank
 * whose buffer is inactive still sends zeros or receives into a scratch), so that the
 * derivative communications match whenever the primal ones do: the adjoint sweep performs
 * them in the reverse order of the primal's, each rank in the reverse order of its own,
 * which cannot deadlock when the primal does not (docs/mpi.md). Buffers whose data is
 * differentiated must be doubles sent as MPI_DOUBLE, and reductions must use MPI_SUM,
 * MPI_PROD, MPI_MAX or MPI_MIN;
 * otherwise the derivative is marked failed (NaN), the communications still matched.
 * Received data are treated as depending on the active inputs (varied), and sent data as
 * influencing the outputs (useful), on every rank alike.
 */
#include <stdlib.h>
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
    K_ALLTOALL,
    K_ISEND,
    K_IRECV,
    K_WAIT,
    K_WAITALL,
    K_GATHERV,
    K_SCATTERV,
    K_ALLGATHERV,
    K_TEST,
    K_TESTALL,
    K_WAITANY,
    K_TESTANY,
    K_WAITSOME,
    K_TESTSOME,
    K_SEND_INIT,
    K_RECV_INIT,
    K_START,
    K_STARTALL,
    K_REQUEST_FREE
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
    {"MPI_Isend", K_ISEND, 7, 0, 1, 2, -1, -1, -1},
    {"MPI_Irecv", K_IRECV, 7, -1, -1, -1, 0, 1, 2},
    {"MPI_Wait", K_WAIT, 2, -1, -1, -1, -1, -1, -1},
    {"MPI_Waitall", K_WAITALL, 3, -1, -1, -1, -1, -1, -1},
    /* the counts of the v variants are arrays (the receiver's and the root's) */
    {"MPI_Gatherv", K_GATHERV, 9, 0, 1, 2, 3, 4, 6},
    {"MPI_Scatterv", K_SCATTERV, 9, 0, 1, 3, 4, 5, 6},
    {"MPI_Allgatherv", K_ALLGATHERV, 8, 0, 1, 2, 3, 4, 6},
    /* the other completions of requests: as MPI_Wait / MPI_Waitall for those they complete */
    {"MPI_Test", K_TEST, 3, -1, -1, -1, -1, -1, -1},
    {"MPI_Testall", K_TESTALL, 4, -1, -1, -1, -1, -1, -1},
    {"MPI_Waitany", K_WAITANY, 4, -1, -1, -1, -1, -1, -1},
    {"MPI_Testany", K_TESTANY, 5, -1, -1, -1, -1, -1, -1},
    {"MPI_Waitsome", K_WAITSOME, 5, -1, -1, -1, -1, -1, -1},
    {"MPI_Testsome", K_TESTSOME, 5, -1, -1, -1, -1, -1, -1},
    /* persistent requests: a template made by the init, posted by each start */
    {"MPI_Send_init", K_SEND_INIT, 7, 0, 1, 2, -1, -1, -1},
    {"MPI_Ssend_init", K_SEND_INIT, 7, 0, 1, 2, -1, -1, -1},
    {"MPI_Bsend_init", K_SEND_INIT, 7, 0, 1, 2, -1, -1, -1},
    {"MPI_Rsend_init", K_SEND_INIT, 7, 0, 1, 2, -1, -1, -1},
    {"MPI_Recv_init", K_RECV_INIT, 7, -1, -1, -1, 0, 1, 2},
    {"MPI_Start", K_START, 1, -1, -1, -1, -1, -1, -1},
    {"MPI_Startall", K_STARTALL, 2, -1, -1, -1, -1, -1, -1},
    {"MPI_Request_free", K_REQUEST_FREE, 1, -1, -1, -1, -1, -1, -1},
};

/* A call that posts, completes or frees requests (the wrappers' table, below). */
static bool requests(int k)
{
    return k == K_ISEND || k == K_IRECV || k == K_SEND_INIT || k == K_RECV_INIT || k == K_START ||
           k == K_STARTALL || k == K_REQUEST_FREE;
}

/* A call that completes requests (the wrappers' table, below). */
static bool completes(int k)
{
    return k == K_WAIT || k == K_WAITALL || k == K_TEST || k == K_TESTALL || k == K_WAITANY ||
           k == K_TESTANY || k == K_WAITSOME || k == K_TESTSOME;
}

int ad_mpi_kind(const char *name)
{
    for (size_t i = 0; i < sizeof k_mpi / sizeof k_mpi[0]; i++)
        if (!strcmp(k_mpi[i].name, name))
            return (int)i;
    return -1;
}

/* MPI functions that move none of the program's data and complete no request: their calls
 * stay as they are. Any other MPI function the tool does not differentiate is refused
 * (ad_mpi_refused). */
static const char *const k_inert[] = {
    "MPI_Init",
    "MPI_Init_thread",
    "MPI_Finalize",
    "MPI_Initialized",
    "MPI_Finalized",
    "MPI_Abort",
    "MPI_Barrier",
    "MPI_Wtime",
    "MPI_Wtick",
    "MPI_Get_count",
    "MPI_Get_elements",
    "MPI_Get_elements_x",
    "MPI_Probe",
    "MPI_Iprobe",
    "MPI_Get_processor_name",
    "MPI_Get_version",
    "MPI_Get_library_version",
    "MPI_Query_thread",
    "MPI_Is_thread_main",
    "MPI_Dims_create",
    "MPI_Pcontrol",
    "MPI_Status_set_elements",
    "MPI_Status_set_cancelled",
    "MPI_Test_cancelled",
};

/* ... and the families of communicators, groups, datatypes, errors and topologies */
static const char *const k_inert_prefix[] = {
    "MPI_Comm_",
    "MPI_Group_",
    "MPI_Type_",
    "MPI_Errhandler_",
    "MPI_Error_",
    "MPI_Add_error_",
    "MPI_Cart_",
    "MPI_Graph_",
    "MPI_Topo_",
    "MPI_Info_",
    "MPI_Op_",
    "MPI_Keyval_",
    "MPI_Attr_",
    "MPI_Dist_graph_create",
    "MPI_Dist_graph_neighbors",
};

/* Requests cancelled */
static const char *const k_persistent[] = {"MPI_Cancel"};

static bool listed(const char *name, const char *const *list, size_t n, bool prefix)
{
    for (size_t i = 0; i < n; i++)
        if (prefix ? !strncmp(name, list[i], strlen(list[i])) : !strcmp(name, list[i]))
            return true;
    return false;
}

/* The argument under its casts (and an address taken, for the datatype's handle). */
static const ad_expr *bare(const ad_expr *a, bool addr)
{
    while (a && ((a->kind == EX_CAST && a->a) || (addr && a->kind == EX_ADDR && a->a)))
        a = a->a;
    return a;
}

/* Whether a datatype argument is MPI_DOUBLE, where the MPI library names it by a global
 * (OpenMPI: the address of ompi_mpi_double); false where it cannot be told. */
static bool is_double_type(const ad_expr *a)
{
    a = bare(a, true);
    if (!a || a->kind != EX_GLOBAL || !a->text)
        return false;
    size_t n = strlen(a->text);
    return n >= 10 && !strcmp(a->text + n - 10, "mpi_double");
}

/* A buffer argument that names an array of doubles of known length, with a constant count
 * of MPI_DOUBLE larger than it: an error at the call (true). */
static bool count_past(const ad_expr *call, int buf, int count, int type)
{
    if (buf < 0 || count < 0 || type < 0 || buf >= call->nargs || count >= call->nargs ||
        type >= call->nargs)
        return false;
    const ad_expr *b = bare(call->args[buf], false), *c = bare(call->args[count], false);
    if (!b || b->kind != EX_VAR || !b->var || b->var->type->kind != TY_ARRAY ||
        b->var->type->len <= 0 || !b->var->type->elem || b->var->type->elem->kind != TY_DOUBLE ||
        !c || c->kind != EX_NUM || !c->text || !is_double_type(call->args[type]))
        return false;
    char *end = NULL;
    long long n = strtoll(c->text, &end, 0);
    if (!end || end == c->text || (*end && strspn(end, "uUlL") != strlen(end)) ||
        n <= b->var->type->len)
        return false;
    ad_error(call->loc, "%s: a count of %lld doubles for '%s', an array of %lld",
             call->callee->name, n, b->var->name, b->var->type->len);
    return true;
}

bool ad_mpi_counts_past(const ad_expr *call)
{
    if (call->kind != EX_CALL || !call->callee || !call->callee->prim || !call->callee->prim->mpi)
        return false;
    const mpi_fn *m = &k_mpi[call->callee->prim->mpi - 1];
    /* the counts of these buffers count their own elements on every rank (not the other
     * ranks' blocks, nor the insignificant buffers of a root's partners) */
    bool in = m->kind != K_SCATTER && m->kind != K_SCATTERV;
    bool out = m->kind != K_GATHER && m->kind != K_REDUCE && m->kind != K_GATHERV &&
               m->kind != K_SCATTERV && m->kind != K_ALLGATHERV && m->kind != K_ALLGATHER &&
               m->kind != K_ALLTOALL;
    bool bad = in && count_past(call, m->in, m->in_count, m->in_type);
    bad |= out && m->out != m->in && count_past(call, m->out, m->out_count, m->out_type);
    return bad;
}

bool ad_mpi_refused(const ad_expr *call)
{
    const char *name = call->text;
    if (call->kind != EX_CALL || call->callee || !name || strncmp(name, "MPI_", 4) != 0 ||
        listed(name, k_inert, sizeof k_inert / sizeof *k_inert, false) ||
        listed(name, k_inert_prefix, sizeof k_inert_prefix / sizeof *k_inert_prefix, true))
        return false;
    if (listed(name, k_persistent, sizeof k_persistent / sizeof *k_persistent, false))
        ad_error(call->loc,
                 "%s is not covered by chainrules-ad: a cancelled request has no adjoint "
                 "here (its partner's adjoint message would have no match); complete each "
                 "request with a wait or a test",
                 name);
    else
        ad_error(call->loc,
                 "%s is an MPI function that chainrules-ad does not differentiate: the data it "
                 "moves or the requests it completes would have no derivative, and the partners' "
                 "adjoint messages no match (docs/mpi.md lists the calls covered)",
                 name);
    return true;
}

static bool g_bound; /* the unit declares MPI functions */

int ad_mpi_bind(ad_func *g, int kind)
{
    g_bound = true;
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

/* A parameter's declaration; an array of unknown size ("const int[]", the counts of the v
 * variants, the requests of MPI_Waitall) as the pointer it is adjusted to. */
static void decl(ad_buf *out, const ad_type *t, const char *name)
{
    size_t n = strlen(t->spelling);
    if (n > 2 && !strcmp(t->spelling + n - 2, "[]"))
        ad_buf_printf(out, "%.*s *%s", (int)(n - 2), t->spelling, name);
    else
        ad_emit_decl(out, t, name);
}

static void params(ad_buf *out, const ad_func *g, uint64_t mask, const char *sfx)
{
    for (int i = 0; i < g->nparams; i++) {
        if (i)
            ad_buf_put(out, ", ");
        decl(out, g->params[i]->type, arg(i));
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
static void checks(ad_buf *o, const mpi_fn *m, uint64_t mask, const char *fail)
{
    /* only buffers whose data is differentiated (an int's messages carry no derivative) */
    bool ain = m->in >= 0 && (mask >> m->in & 1), aout = m->out >= 0 && (mask >> m->out & 1);
    int t[2] = {m->in_type, m->out_type};
    bool act[2] = {ain || (aout && t[1] == t[0]), aout && t[1] != t[0]};
    for (int k = 0; k < 2; k++)
        if (t[k] >= 0 && act[k])
            ad_buf_printf(o, "    if (%s != MPI_DOUBLE)\n        %s;\n", arg(t[k]), fail);
    if ((m->kind == K_ALLREDUCE || m->kind == K_REDUCE) && (ain || aout))
        ad_buf_printf(o,
                      "    if (%s != MPI_SUM && %s != MPI_PROD && %s != MPI_MAX && %s != MPI_MIN)\n"
                      "        %s;\n",
                      arg(4), arg(4), arg(4), arg(4), fail);
}

/* Counts of another datatype than MPI_DOUBLE become 0 for the derivative's messages and
 * the values saved (they count elements of that type, not doubles: no access past the
 * buffers; the derivative has failed already, by checks()). */
static void zero_counts(ad_buf *o, const mpi_fn *m)
{
    if (m->in >= 0)
        ad_buf_printf(o, "    if (%s != MPI_DOUBLE)\n        %s = 0;\n", arg(m->in_type),
                      arg(m->in_count));
    if (m->out >= 0 && m->out_count != m->in_count)
        ad_buf_printf(o, "    if (%s != MPI_DOUBLE)\n        %s = 0;\n", arg(m->out_type),
                      arg(m->out_count));
}

/* MPI_MAX and MPI_MIN of an allreduce: each element's winning rank (MPI_MAXLOC and
 * MPI_MINLOC: the lowest rank among ties, the same on every rank) into w_[i].r, from the
 * input values (read before an in-place call overwrites them); me_ is the rank. */
static void winners(ad_buf *o, const char *comm)
{
    ad_buf_printf(
        o,
        "    const int loc_ = a3_ != MPI_DOUBLE ? 0 : a4_ == MPI_MAX ? 1 : a4_ == MPI_MIN ? 2 "
        ": 0;\n"
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
    /* MPI_PROD: the product of the other ranks' elements, from every rank's (no division,
     * so that a zero factor has its derivative too) */
    ad_buf_printf(o,
                  "    double *oth_ = NULL;\n"
                  "    if (a3_ == MPI_DOUBLE && a4_ == MPI_PROD) {\n"
                  "        int np_ = 1;\n        MPI_Comm_size(%s, &np_);\n"
                  "        const size_t n_ = (size_t)(a2_ > 0 ? a2_ : 1);\n"
                  "        double *all_ = malloc(n_ * (size_t)np_ * sizeof *all_);\n"
                  "        oth_ = malloc(n_ * sizeof *oth_);\n"
                  "        if (!all_ || !oth_)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n"
                  "        const double *src_ = a0_ == MPI_IN_PLACE ? (const double *)a1_ : "
                  "(const double *)a0_;\n"
                  "        MPI_Allgather(src_, a2_, MPI_DOUBLE, all_, a2_, MPI_DOUBLE, %s);\n"
                  "        for (int i_ = 0; i_ < a2_; i_++) {\n"
                  "            double p_ = 1;\n"
                  "            for (int q_ = 0; q_ < np_; q_++)\n"
                  "                if (q_ != me_)\n"
                  "                    p_ *= all_[(size_t)q_ * (size_t)a2_ + (size_t)i_];\n"
                  "            oth_[i_] = p_;\n        }\n"
                  "        free(all_);\n    }\n",
                  comm, comm);
}

/* After the primal: the winners found (collective: every rank takes part). */
static void winners_reduce(ad_buf *o, const char *comm)
{
    ad_buf_printf(o,
                  "    if (loc_)\n        MPI_Allreduce(MPI_IN_PLACE, w_, a2_, MPI_DOUBLE_INT, "
                  "loc_ == 1 ? MPI_MAXLOC : MPI_MINLOC, %s);\n",
                  comm);
}

/* ---- Non-blocking requests ---------------------------------------------------------------- */

/* The map from the user's request objects to the derivative messages, in the generated
 * file once (before the first wrapper that uses it). A request object is known by its
 * address, as the calls pass it: MPI_Isend / MPI_Irecv(..., &r) make an entry, the
 * MPI_Wait(&r) or MPI_Waitall(n, r) that completes it finds and removes it. Three phases
 * keep their entries apart: 0 the forward sweep of the reverse mode (what the adjoint will
 * need: kind, count, actual partner and tag, communicator, the shadow of a receive's
 * buffer, pushed on the value stack at the wait), 1 its adjoint sweep (the adjoint message
 * posted at the wait's adjoint, completed at the post's adjoint), 2 the forward (tangent)
 * mode (the tangent message posted with the primal one, completed at its wait). */
static const char *const k_runtime[] = {
    "/* chainrules-ad: the user's MPI requests and their derivative messages */\n"
    "typedef struct cr_ad_mreq_ {\n"
    "    const void *key; /* the user's request object */\n"
    "    int phase, kind, count, peer, tag, fail, deferred;\n"
    "    int orig; /* a tangent receive's count as posted (count: 0 for another datatype) */\n"
    "    MPI_Comm comm;\n"
    "    MPI_Datatype type; /* a receive's, for its count */\n"
    "    double *shadow, *tmp;\n"
    "    double *buf; /* a persistent request's buffer (its template) */\n"
    "    MPI_Request dreq;\n"
    "} cr_ad_mreq_;\n",
    "static cr_ad_mreq_ *cr_ad_mreqs_;\n"
    "static int cr_ad_nmreqs_, cr_ad_capmreqs_;\n\n"
    "static inline cr_ad_mreq_ *cr_ad_mreq_add_(const void *key, int phase, int kind, int count,\n"
    "                                    int tmp)\n{\n"
    "    if (cr_ad_nmreqs_ == cr_ad_capmreqs_) {\n"
    "        const int cap = cr_ad_capmreqs_ ? 2 * cr_ad_capmreqs_ : 16;\n"
    "        cr_ad_mreq_ *p = realloc(cr_ad_mreqs_, (size_t)cap * sizeof *p);\n"
    "        if (!p)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n"
    "        cr_ad_mreqs_ = p;\n        cr_ad_capmreqs_ = cap;\n    }\n"
    "    cr_ad_mreq_ *e = &cr_ad_mreqs_[cr_ad_nmreqs_++];\n"
    "    memset(e, 0, sizeof *e);\n"
    "    e->key = key;\n    e->phase = phase;\n    e->kind = kind;\n"
    "    e->count = count > 0 ? count : 0;\n    e->dreq = MPI_REQUEST_NULL;\n"
    "    e->comm = MPI_COMM_NULL;\n"
    "    if (tmp) {\n"
    "        e->tmp = calloc((size_t)(e->count > 0 ? e->count : 1), sizeof(double));\n"
    "        if (!e->tmp)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n    }\n"
    "    return e;\n}\n\n",
    "static inline cr_ad_mreq_ *cr_ad_mreq_find_(const void *key, int phase)\n{\n"
    "    for (int i = cr_ad_nmreqs_; i-- > 0;)\n"
    "        if (cr_ad_mreqs_[i].key == key && cr_ad_mreqs_[i].phase == phase)\n"
    "            return &cr_ad_mreqs_[i];\n"
    "    return NULL;\n}\n\n",
    "static inline void cr_ad_mreq_del_(cr_ad_mreq_ *e)\n{\n"
    "    free(e->tmp);\n"
    "    const int i = (int)(e - cr_ad_mreqs_);\n"
    "    memmove(e, e + 1, (size_t)(cr_ad_nmreqs_ - 1 - i) * sizeof *e);\n"
    "    if (--cr_ad_nmreqs_ == 0) {\n"
    "        free(cr_ad_mreqs_);\n        cr_ad_mreqs_ = NULL;\n        cr_ad_capmreqs_ = 0;\n"
    "    }\n}\n\n",
    "/* the elements a completed receive got (its count when from MPI_PROC_NULL) and whether\n"
    " * they are the count posted, without an error (rc: the wait's) */\n"
    "static inline int cr_ad_mreq_got_(const cr_ad_mreq_ *e, const MPI_Status *s, int rc, int "
    "*got)\n"
    "{\n"
    "    int c = e->count;\n"
    "    if (e->type != MPI_DOUBLE) { /* no derivative: nothing to send back */\n"
    "        *got = 0;\n        return rc == MPI_SUCCESS;\n    }\n"
    "    if (s->MPI_SOURCE != MPI_PROC_NULL &&\n"
    "        (MPI_Get_count(s, e->type, &c) != MPI_SUCCESS || c == MPI_UNDEFINED || c < 0))\n"
    "        c = e->count;\n"
    "    *got = c < e->count ? c : e->count;\n"
    "    return rc == MPI_SUCCESS && c == e->count;\n}\n\n",
    "/* forward sweep: the request at key completed (status s, rc its error or MPI_SUCCESS);\n"
    " * what its adjoint needs */\n"
    "static inline void cr_ad_mreq_fw_wait_(cr_adstack *stp_, const void *key, const MPI_Status "
    "*s,\n"
    "                                int rc)\n{\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 0);\n"
    "    if (!e) {\n        cr_adstack_push_i64(stp_, 0); /* not a request of the wrappers */\n"
    "        return;\n    }\n"
    "    int got = e->count, ok = rc == MPI_SUCCESS;\n"
    "    if (e->kind == 2)\n        ok = cr_ad_mreq_got_(e, s, rc, &got);\n"
    "    cr_adstack_push_ptr(stp_, e->shadow);\n"
    "    cr_adstack_push_i64(stp_, e->count);\n"
    "    cr_adstack_push_i64(stp_, got);\n"
    "    cr_adstack_push_i64(stp_, ok);\n"
    "    cr_adstack_push_i64(stp_, e->kind == 2 ? s->MPI_SOURCE : e->peer);\n"
    "    cr_adstack_push_i64(stp_, e->kind == 2 ? s->MPI_TAG : e->tag);\n"
    "    cr_adstack_push_i64(stp_, (int64_t)MPI_Comm_c2f(e->comm));\n"
    "    cr_adstack_push_i64(stp_, e->kind);\n"
    "    cr_ad_mreq_del_(e);\n}\n\n",
    "/* adjoint sweep of a wait: post the adjoint message (an isend's: a receive of the\n"
    " * adjoint; an irecv's: a send of the adjoint of the elements it got, which is then zero;\n"
    " * empty when the receive got another count or failed, so that the sender's derivative\n"
    " * fails too) */\n"
    "static inline void cr_ad_mreq_bw_wait_(cr_adstack *stp_, const void *key)\n{\n"
    "    const int kind = (int)cr_adstack_pop_i64(stp_);\n"
    "    if (kind == 0)\n        return;\n"
    "    const MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)cr_adstack_pop_i64(stp_));\n"
    "    const int tag = (int)cr_adstack_pop_i64(stp_);\n"
    "    const int peer = (int)cr_adstack_pop_i64(stp_);\n"
    "    const int ok = (int)cr_adstack_pop_i64(stp_);\n"
    "    const int got = (int)cr_adstack_pop_i64(stp_);\n"
    "    const int count = (int)cr_adstack_pop_i64(stp_);\n"
    "    double *shadow = cr_adstack_pop_ptr(stp_);\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_add_(key, 1, kind, count, 1);\n"
    "    e->peer = peer;\n"
    "    if (peer == MPI_PROC_NULL) /* no message, and the buffer was kept */\n"
    "        return;\n"
    "    if (kind == 1) {\n"
    "        MPI_Irecv(e->tmp, count, MPI_DOUBLE, peer, tag, comm, &e->dreq);\n"
    "        return;\n    }\n"
    "    for (int i = 0; i < got; i++) {\n"
    "        e->tmp[i] = shadow ? shadow[i] : 0;\n"
    "        if (shadow)\n            shadow[i] = 0;\n    }\n"
    "    if (!ok)\n        cr_ad_mpi_failed_ = 1;\n"
    "    MPI_Isend(e->tmp, ok ? got : 0, MPI_DOUBLE, peer, tag, comm, &e->dreq);\n}\n\n",
    "/* adjoint sweep of an isend or irecv: its adjoint message completes (an isend's is\n"
    " * added into the shadow of its buffer: NaN when it has another count) */\n"
    "static inline void cr_ad_mreq_bw_post_(cr_adstack *stp_, const void *key, double *shadow)\n{\n"
    "    (void)stp_;\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 1);\n"
    "    if (!e) { /* never completed in the primal: no adjoint */\n"
    "        cr_ad_mpi_failed_ = 1;\n        return;\n    }\n"
    "    if (e->peer == MPI_PROC_NULL) { /* nothing came, nothing to add */\n"
    "        cr_ad_mreq_del_(e);\n        return;\n    }\n"
    "    MPI_Status s;\n"
    "    const int rc = MPI_Wait(&e->dreq, &s);\n"
    "    int c = e->count;\n"
    "    if (e->kind == 1 && s.MPI_SOURCE != MPI_PROC_NULL &&\n"
    "        MPI_Get_count(&s, MPI_DOUBLE, &c) != MPI_SUCCESS)\n        c = -1;\n"
    "    if (e->kind == 1 && (rc != MPI_SUCCESS || c != e->count))\n"
    "        cr_ad_mpi_failed_ = 1;\n"
    "    if (e->kind == 1 && shadow)\n"
    "        for (int i = 0; i < e->count; i++)\n"
    "            shadow[i] += rc == MPI_SUCCESS && c == e->count ? e->tmp[i] : (double)NAN;\n"
    "    cr_ad_mreq_del_(e);\n}\n\n",
    "/* forward mode: the tangent message of the request at key completes (status s and rc\n"
    " * the primal's: a receive posted with wildcards takes its tangent from the actual source\n"
    " * and tag); the tangents NaN when the primal or the tangent message had another count */\n"
    "static inline void cr_ad_mreq_tan_wait_(const void *key, const MPI_Status *s, int rc)\n{\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 2);\n"
    "    if (!e)\n        return;\n"
    "    double *dst = e->shadow ? e->shadow : e->tmp;\n"
    "    int got = e->count, ok = e->kind != 2 || cr_ad_mreq_got_(e, s, rc, &got);\n"
    "    MPI_Status ts;\n"
    "    int trc, c = e->count;\n"
    "    if (e->deferred)\n"
    "        trc = MPI_Recv(dst, e->count, MPI_DOUBLE, s->MPI_SOURCE, s->MPI_TAG, e->comm, &ts);\n"
    "    else\n        trc = MPI_Wait(&e->dreq, &ts);\n"
    "    if (e->kind == 2 && ts.MPI_SOURCE != MPI_PROC_NULL &&\n"
    "        (trc != MPI_SUCCESS || MPI_Get_count(&ts, MPI_DOUBLE, &c) != MPI_SUCCESS))\n"
    "        c = -1;\n"
    "    if (e->kind == 2 && (e->fail || !ok || c != e->count) && e->shadow) {\n"
    "        for (int i = 0; i < e->count; i++)\n            e->shadow[i] = (double)NAN;\n"
    "        if (e->orig > 0) /* another datatype: its first element at least */\n"
    "            e->shadow[0] = (double)NAN;\n    }\n"
    "    cr_ad_mreq_del_(e);\n}\n\n",
    "/* persistent requests: the template of an init (phase 3 in the reverse mode, 4 in the\n"
    " * forward mode) */\n"
    "static inline void cr_ad_mreq_init_(const void *key, int phase, int kind, void *buf, int "
    "count,\n"
    "                                    MPI_Datatype type, int peer, int tag, MPI_Comm comm,\n"
    "                                    double *shadow, int fail)\n{\n"
    "    const int dbl = type == MPI_DOUBLE && !fail;\n"
    "    cr_ad_mreq_ *t = cr_ad_mreq_add_(key, phase, kind, dbl ? count : 0, 0);\n"
    "    t->buf = dbl ? (double *)buf : NULL;\n"
    "    t->type = type;\n    t->peer = peer;\n    t->tag = tag;\n    t->comm = comm;\n"
    "    t->shadow = dbl ? shadow : NULL;\n    t->fail = fail;\n    t->orig = count;\n}\n\n",
    "static inline void cr_ad_mreq_uninit_(const void *key, int phase)\n{\n"
    "    cr_ad_mreq_ *t = cr_ad_mreq_find_(key, phase);\n"
    "    if (t)\n        cr_ad_mreq_del_(t);\n}\n\n",
    "/* forward sweep of a start: the buffer of a receive saved, the request posted as an\n"
    " * isend or irecv would be (1 pushed; 0: not a template of the wrappers) */\n"
    "static inline void cr_ad_mreq_fw_start_(cr_adstack *stp_, const void *key)\n{\n"
    "    const cr_ad_mreq_ *t = cr_ad_mreq_find_(key, 3);\n"
    "    if (!t) {\n        cr_adstack_push_i64(stp_, 0);\n        return;\n    }\n"
    "    const cr_ad_mreq_ c = *t; /* (the table may move) */\n"
    "    for (int i = 0; c.kind == 2 && c.buf && i < c.count; i++)\n"
    "        cr_adstack_push_f64(stp_, c.buf[i]);\n"
    "    cr_adstack_push_i64(stp_, c.kind == 2 && c.buf ? c.count : 0);\n"
    "    cr_adstack_push_i64(stp_, 1);\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_add_(key, 0, c.kind, c.count, 0);\n"
    "    e->peer = c.peer;\n    e->tag = c.tag;\n    e->comm = c.comm;\n    e->type = c.type;\n"
    "    e->shadow = c.kind == 2 ? c.shadow : NULL;\n}\n\n",
    "/* adjoint sweep of a start: its adjoint message completes (a send's added into the\n"
    " * shadow of its buffer), a receive's buffer restored */\n"
    "static inline void cr_ad_mreq_bw_start_(cr_adstack *stp_, const void *key)\n{\n"
    "    if (!cr_adstack_pop_i64(stp_))\n        return;\n"
    "    const cr_ad_mreq_ *t = cr_ad_mreq_find_(key, 3);\n"
    "    double *buf = t ? t->buf : NULL, *shadow = t && t->kind == 1 ? t->shadow : NULL;\n"
    "    cr_ad_mreq_bw_post_(stp_, key, shadow);\n"
    "    for (int i = (int)cr_adstack_pop_i64(stp_); i-- > 0;) {\n"
    "        const double v = cr_adstack_pop_f64(stp_);\n"
    "        if (buf)\n            buf[i] = v;\n    }\n}\n\n",
    "/* forward sweep of MPI_Request_free: an active request completes here for its adjoint\n"
    " * (a send exactly; a receive, whose data arrive at an unknown point, fails the\n"
    " * derivative with an empty adjoint message), a template is saved and removed */\n"
    "static inline void cr_ad_mreq_fw_free_(cr_adstack *stp_, const void *key)\n{\n"
    "    const cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 0);\n"
    "    if (e) {\n"
    "        MPI_Status s;\n        memset(&s, 0, sizeof s);\n"
    "        s.MPI_SOURCE = e->peer == MPI_ANY_SOURCE ? MPI_PROC_NULL : e->peer;\n"
    "        s.MPI_TAG = e->tag;\n"
    "        MPI_Status_set_elements(&s, MPI_DOUBLE, 0);\n"
    "        cr_ad_mreq_fw_wait_(stp_, key, &s, e->kind == 1 ? MPI_SUCCESS : MPI_ERR_REQUEST);\n"
    "    }\n"
    "    cr_adstack_push_i64(stp_, e != NULL);\n"
    "    const cr_ad_mreq_ *t = cr_ad_mreq_find_(key, 3);\n"
    "    if (t) {\n"
    "        cr_adstack_push_ptr(stp_, t->buf);\n        cr_adstack_push_ptr(stp_, t->shadow);\n"
    "        cr_adstack_push_i64(stp_, t->count);\n        cr_adstack_push_i64(stp_, t->peer);\n"
    "        cr_adstack_push_i64(stp_, t->tag);\n"
    "        cr_adstack_push_i64(stp_, (int64_t)MPI_Comm_c2f(t->comm));\n"
    "        cr_adstack_push_i64(stp_, (int64_t)MPI_Type_c2f(t->type));\n"
    "        cr_adstack_push_i64(stp_, t->kind);\n"
    "        cr_ad_mreq_del_((cr_ad_mreq_ *)t);\n    }\n"
    "    cr_adstack_push_i64(stp_, t != NULL);\n}\n\n",
    "static inline void cr_ad_mreq_bw_free_(cr_adstack *stp_, const void *key)\n{\n"
    "    if (cr_adstack_pop_i64(stp_)) { /* the template again */\n"
    "        const int kind = (int)cr_adstack_pop_i64(stp_);\n"
    "        const MPI_Datatype type = MPI_Type_f2c((MPI_Fint)cr_adstack_pop_i64(stp_));\n"
    "        const MPI_Comm comm = MPI_Comm_f2c((MPI_Fint)cr_adstack_pop_i64(stp_));\n"
    "        const int tag = (int)cr_adstack_pop_i64(stp_);\n"
    "        const int peer = (int)cr_adstack_pop_i64(stp_);\n"
    "        const int count = (int)cr_adstack_pop_i64(stp_);\n"
    "        double *shadow = cr_adstack_pop_ptr(stp_);\n"
    "        double *buf = cr_adstack_pop_ptr(stp_);\n"
    "        cr_ad_mreq_ *t = cr_ad_mreq_add_(key, 3, kind, count, 0);\n"
    "        t->buf = buf;\n        t->shadow = shadow;\n        t->peer = peer;\n"
    "        t->tag = tag;\n        t->comm = comm;\n        t->type = type;\n    }\n"
    "    if (cr_adstack_pop_i64(stp_)) /* an active request: as at its wait */\n"
    "        cr_ad_mreq_bw_wait_(stp_, key);\n}\n\n",
    "/* forward mode: a start posts the tangent message beside the primal one */\n"
    "static inline void cr_ad_mreq_tan_start_(const void *key)\n{\n"
    "    const cr_ad_mreq_ *t = cr_ad_mreq_find_(key, 4);\n"
    "    if (!t)\n        return;\n"
    "    const cr_ad_mreq_ c = *t; /* (the table may move) */\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_add_(key, 2, c.kind, c.count, 1);\n"
    "    e->comm = c.comm;\n"
    "    if (c.kind == 1) {\n"
    "        if (c.shadow)\n"
    "            memcpy(e->tmp, c.shadow, (size_t)c.count * sizeof(double));\n"
    "        MPI_Isend(e->tmp, c.count, MPI_DOUBLE, c.peer, c.tag, c.comm, &e->dreq);\n"
    "        return;\n    }\n"
    "    e->shadow = c.shadow;\n    e->fail = c.fail;\n    e->orig = c.orig;\n    e->type = "
    "c.type;\n"
    "    if (c.peer == MPI_ANY_SOURCE || c.tag == MPI_ANY_TAG)\n        e->deferred = 1;\n"
    "    else\n"
    "        MPI_Irecv(e->shadow && !e->fail ? e->shadow : e->tmp, e->count, MPI_DOUBLE, c.peer,\n"
    "                  c.tag, c.comm, &e->dreq);\n}\n\n",
    "/* forward mode of MPI_Request_free: an active request's tangent message completes here\n"
    " * (MPI_Wait: the program must not need the free to return before its partner posts\n"
    " * the matching call); a template is removed */\n"
    "static inline void cr_ad_mreq_tan_free_(const void *key)\n{\n"
    "    cr_ad_mreq_ *e = cr_ad_mreq_find_(key, 2);\n"
    "    if (e) {\n"
    "        if (e->deferred)\n            e->fail = 1;\n"
    "        else\n            MPI_Wait(&e->dreq, MPI_STATUS_IGNORE);\n"
    "        if (e->kind == 2 && e->shadow)\n"
    "            for (int i = 0; i < e->count; i++)\n                e->shadow[i] = (double)NAN;\n"
    "        cr_ad_mreq_del_(e);\n    }\n"
    "    cr_ad_mreq_uninit_(key, 4);\n}\n\n",
    NULL};

/* The agreement of a blocking collective, before its primal call (every rank, in the
 * forward sweep of the reverse mode and in the forward mode): the ranks' byte counts
 * (count times MPI_Type_size) must be the same, the root's per-rank count (rn) equal to
 * each rank's, and each count times mul (the ranks, for the buffers of gathers, scatters and
 * alltoalls) must fit an int. When they do not, every rank learns it here, the call is
 * made with every count 0 (matched, nothing moved) and returns MPI_ERR_COUNT, and the
 * derivative fails: a rank with the wrong count would otherwise leave its partners
 * waiting or be written past its buffer, in the primal or in the adjoint. */
static const char k_agree[] =
    "/* chainrules-ad: the ranks agree on a collective's sizes before it (1: they do) */\n"
    "static inline int cr_ad_mpi_agree_(MPI_Comm comm, int mul, int sn, MPI_Datatype st,\n"
    "                                   int has_r, int rn, MPI_Datatype rt)\n{\n"
    "    int ss = 0, rs = 0, bad = sn < 0 || MPI_Type_size(st, &ss) != MPI_SUCCESS;\n"
    "    if (has_r)\n"
    "        bad |= rn < 0 || MPI_Type_size(rt, &rs) != MPI_SUCCESS;\n"
    "    const int64_t lim = (int64_t)(~0u >> 1) / (mul > 0 ? mul : 1); /* INT_MAX / mul */\n"
    "    bad |= sn > lim || (has_r && rn > lim);\n"
    "    const int64_t s = bad ? 0 : (int64_t)sn * ss, r = bad ? 0 : (int64_t)rn * rs;\n"
    "    int64_t v[5] = {bad, s, -s, has_r ? r : INT64_MIN, has_r ? -r : INT64_MIN};\n"
    "    if (MPI_Allreduce(MPI_IN_PLACE, v, 5, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS)\n"
    "        return 0;\n"
    "    return v[0] == 0 && v[1] == -v[2] &&\n"
    "           (v[3] == INT64_MIN || (v[3] == -v[4] && v[3] == v[1]));\n}\n\n";

/* The same for the v variants: the root's count for each rank (every rank's counts, for
 * allgatherv) against that rank's own, in bytes, by an MPI_Scatter (MPI_Allgather) of
 * int64_t and an MPI_Allreduce of the outcome; counts and displacements not negative, the
 * extent they address (*ext, the rank's, where it has them) within an int. */
static const char k_vagree[] =
    "/* chainrules-ad: a count in bytes (-2: a negative count or no datatype size) */\n"
    "static inline int64_t cr_ad_mpi_bytes_(int n, MPI_Datatype t)\n{\n"
    "    int ts = 0;\n"
    "    return n < 0 || MPI_Type_size(t, &ts) != MPI_SUCCESS ? -2 : (int64_t)n * ts;\n}\n\n"
    "/* chainrules-ad: the ranks agree on a v variant's counts (1: they do); own: this rank's\n"
    " * bytes (-1: in place), cnt and dsp of type t at the root (at every rank: all) */\n"
    "static inline int cr_ad_mpi_vagree_(MPI_Comm comm, int root, int all, int64_t own,\n"
    "                                    const int *cnt, const int *dsp, MPI_Datatype t,\n"
    "                                    int64_t *ext)\n{\n"
    "    int rank = 0, size = 1, ts = 0, bad = 0, rc = MPI_SUCCESS;\n"
    "    MPI_Comm_rank(comm, &rank);\n    MPI_Comm_size(comm, &size);\n"
    "    int64_t *e = malloc((size_t)(size > 0 ? size : 1) * sizeof *e), mine = -1;\n"
    "    int64_t *b = malloc((size_t)(size > 0 ? size : 1) * sizeof *b);\n"
    "    if (!e || !b)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n"
    "    *ext = 0;\n"
    "    if (all || rank == root) {\n"
    "        bad = !cnt || !dsp || MPI_Type_size(t, &ts) != MPI_SUCCESS;\n"
    "        for (int q = 0; q < size; q++) {\n"
    "            e[q] = bad ? -3 : (int64_t)cnt[q] * ts;\n"
    "            if (!bad && (cnt[q] < 0 || dsp[q] < 0))\n                bad = 1;\n"
    "            if (!bad && cnt[q] > 0 && (int64_t)dsp[q] + cnt[q] > *ext)\n"
    "                *ext = (int64_t)dsp[q] + cnt[q];\n        }\n"
    "        bad |= *ext > (int64_t)(~0u >> 1); /* INT_MAX */\n    }\n"
    "    if (all) {\n"
    "        rc = MPI_Allgather(&own, 1, MPI_INT64_T, b, 1, MPI_INT64_T, comm);\n"
    "        for (int q = 0; rc == MPI_SUCCESS && q < size; q++)\n"
    "            bad |= b[q] != -1 && b[q] != e[q];\n"
    "    } else {\n"
    "        rc = MPI_Scatter(e, 1, MPI_INT64_T, &mine, 1, MPI_INT64_T, root, comm);\n"
    "        bad |= own != -1 && own != mine;\n    }\n"
    "    bad |= rc != MPI_SUCCESS;\n"
    "    free(e);\n    free(b);\n"
    "    int any = 1;\n"
    "    if (MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)\n"
    "        any = 1;\n"
    "    return !any;\n}\n\n";

static bool g_runtime_done, g_flag_done, g_agree_done, g_vagree_done;

static void v_zero(ad_buf *o, int kind);

/* The agreement of a v variant (k_vagree) as agreed_, with ext0_ the extent of the rank's
 * result as given; where the ranks disagree, fail (a statement, run unless NULL) and every
 * count and displacement 0 (zc_, freed by the caller). */
static void v_agree(ad_buf *o, int kind, const char *comm, const char *fail)
{
    if (kind == K_GATHERV)
        ad_buf_printf(
            o,
            "    int64_t ext0_ = 0;\n"
            "    const int agreed_ = cr_ad_mpi_vagree_(%s, a7_, 0, rank_ == a7_ && a0_ == "
            "MPI_IN_PLACE ? -1 : cr_ad_mpi_bytes_(a1_, a2_), a4_, a5_, a6_, &ext0_);\n",
            comm);
    else if (kind == K_SCATTERV)
        ad_buf_printf(
            o,
            "    int64_t ext0_ = 0;\n"
            "    const int agreed_ = cr_ad_mpi_vagree_(%s, a7_, 0, rank_ == a7_ && a4_ == "
            "MPI_IN_PLACE ? -1 : cr_ad_mpi_bytes_(a5_, a6_), a1_, a2_, a3_, &ext0_);\n"
            "    ext0_ = rank_ == a7_ && a4_ == MPI_IN_PLACE ? 0 : a5_;\n",
            comm);
    else
        ad_buf_printf(
            o,
            "    int64_t ext0_ = 0;\n"
            "    const int agreed_ = cr_ad_mpi_vagree_(%s, 0, 1, a0_ == MPI_IN_PLACE ? -1 "
            ": cr_ad_mpi_bytes_(a1_, a2_), a4_, a5_, a6_, &ext0_);\n",
            comm);
    ad_buf_put(o, "    (void)ext0_;\n    int *zc_ = NULL;\n    if (!agreed_) {\n");
    if (fail)
        ad_buf_printf(o, "        %s;\n", fail);
    v_zero(o, kind);
    ad_buf_put(o, "    }\n");
}

/* The counts and displacements of a v variant whose ranks disagree: 0 (zc_). */
static void v_zero(ad_buf *o, int kind)
{
    ad_buf_put(o, "        zc_ = calloc((size_t)(size_ > 0 ? size_ : 1), sizeof *zc_);\n"
                  "        if (!zc_)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n");
    if (kind == K_SCATTERV)
        ad_buf_put(o, "        a5_ = 0;\n        a1_ = zc_;\n        a2_ = zc_;\n");
    else
        ad_buf_put(o, "        a1_ = 0;\n        a4_ = zc_;\n        a5_ = zc_;\n");
}

/* The counts of a collective whose ranks disagree: 0. */
static void zero_agreed(ad_buf *o, const mpi_fn *m)
{
    if (m->kind == K_BCAST)
        ad_buf_put(o, "        a1_ = 0;\n");
    else if (m->kind == K_REDUCE || m->kind == K_ALLREDUCE)
        ad_buf_put(o, "        a2_ = 0;\n");
    else
        ad_buf_put(o, "        a1_ = 0;\n        a4_ = 0;\n");
}

/* The agreement of a blocking collective (k_agree), as agreed_; the counts zeroed where
 * the ranks disagree (and fail, a statement, run unless NULL). */
static void agree(ad_buf *o, const mpi_fn *m, const char *comm, const char *fail)
{
    const char *args;
    switch (m->kind) {
    case K_BCAST:
        args = "1, a1_, a2_, 0, 0, a2_";
        break;
    case K_REDUCE:
    case K_ALLREDUCE:
        args = "1, a2_, a3_, 0, 0, a3_";
        break;
    case K_GATHER:
        args = "size_, rank_ == a6_ && a0_ == MPI_IN_PLACE ? a4_ : a1_, rank_ == a6_ && a0_ == "
               "MPI_IN_PLACE ? a5_ : a2_, rank_ == a6_, a4_, a5_";
        break;
    case K_SCATTER:
        args = "size_, rank_ == a6_ && a3_ == MPI_IN_PLACE ? a1_ : a4_, rank_ == a6_ && a3_ == "
               "MPI_IN_PLACE ? a2_ : a5_, rank_ == a6_, a1_, a2_";
        break;
    default: /* allgather, alltoall */
        args = "size_, a0_ == MPI_IN_PLACE ? a4_ : a1_, a0_ == MPI_IN_PLACE ? a5_ : a2_, 1, a4_, "
               "a5_";
        break;
    }
    ad_buf_printf(o, "    const int agreed_ = cr_ad_mpi_agree_(%s, %s);\n    if (!agreed_) {\n",
                  comm, args);
    if (fail)
        ad_buf_printf(o, "        %s;\n", fail);
    zero_agreed(o, m);
    ad_buf_put(o, "    }\n");
}

static bool agreed_kind(int k)
{
    return k == K_BCAST || k == K_REDUCE || k == K_ALLREDUCE || k == K_GATHER || k == K_SCATTER ||
           k == K_ALLGATHER || k == K_ALLTOALL;
}

/* A derivative that fails in an adjoint sweep (a datatype or operation not covered, a
 * request completed elsewhere than it was posted) sets this flag instead of failing the value
 * stack there: a failed stack gives the rest of the sweep nothing (no partners, tags or trip
 * counts), and the ranks' remaining adjoint messages would no longer match. The public
 * reverse function fails its stack when its sweep is over (reverse.c). */
static const char k_flag[] =
    "/* chainrules-ad: an MPI derivative failed in the adjoint sweep (the sweep goes on, so\n"
    " * that every adjoint message is matched; the stack is failed at its end) */\n"
    "#define CR_AD_MPI_FAILED_ 1\n"
    "static int cr_ad_mpi_failed_;\n\n";

/* MPI_Test, MPI_Testall, MPI_Waitany, MPI_Testany, MPI_Waitsome, MPI_Testsome: the primal,
 * then each request it completed as at a wait: done(key, status, rc) is
 * cr_ad_mreq_fw_wait_ (the forward sweep of the reverse mode, which also records which
 * requests completed: push true) or cr_ad_mreq_tan_wait_ (the forward mode). */
static void completion(ad_buf *o, const ad_func *g, int kind, bool push)
{
    const char *done = push ? "cr_ad_mreq_fw_wait_(stp_, " : "cr_ad_mreq_tan_wait_(";
    const char *rc = "r_ == MPI_ERR_IN_STATUS ? s_[i_].MPI_ERROR : r_";
    const bool many = kind == K_TESTALL || kind == K_WAITSOME || kind == K_TESTSOME;
    if (many)
        ad_buf_put(o, "    MPI_Status *s_ = malloc((size_t)(a0_ > 0 ? a0_ : 1) * sizeof *s_);\n"
                      "    if (!s_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n    const int r_ = ");
    else
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = ");
    call_primal(o, g, many ? "s_" : "&s_");
    ad_buf_put(o, ";\n");
    switch (kind) {
    case K_TEST:
        ad_buf_printf(
            o,
            "    const int done_ = *a1_ != 0;\n    if (done_) {\n        %sa0_, &s_, r_);\n"
            "        if (a2_ != MPI_STATUS_IGNORE)\n            *a2_ = s_;\n    }\n",
            done);
        if (push)
            ad_buf_put(o, "    cr_adstack_push_i64(stp_, done_);\n");
        break;
    case K_TESTALL:
        ad_buf_printf(o,
                      "    const int done_ = *a2_ != 0;\n"
                      "    for (int i_ = 0; i_ < (done_ ? a0_ : 0); i_++) {\n"
                      "        %s&a1_[i_], &s_[i_], %s);\n"
                      "        if (a3_ != MPI_STATUSES_IGNORE)\n            a3_[i_] = s_[i_];\n"
                      "    }\n    free(s_);\n",
                      done, rc);
        if (push)
            ad_buf_put(o, "    cr_adstack_push_i64(stp_, done_);\n");
        break;
    case K_WAITANY:
    case K_TESTANY: {
        const bool test = kind == K_TESTANY;
        ad_buf_printf(o,
                      "    const int k_ = *a2_ == MPI_UNDEFINED%s ? -1 : *a2_;\n"
                      "    if (k_ >= 0)\n        %s&a1_[k_], &s_, r_);\n"
                      "    if (%s != MPI_STATUS_IGNORE%s)\n        *%s = s_;\n",
                      test ? " || !*a3_" : "", done, arg(g->nparams - 1), test ? " && *a3_" : "",
                      arg(g->nparams - 1));
        if (push)
            ad_buf_put(o, "    cr_adstack_push_i64(stp_, k_);\n");
        break;
    }
    default: /* waitsome, testsome */
        ad_buf_printf(o,
                      "    const int n_ = *a2_ == MPI_UNDEFINED ? 0 : *a2_;\n"
                      "    for (int i_ = 0; i_ < n_; i_++) {\n"
                      "        %s&a1_[a3_[i_]], &s_[i_], %s);\n%s"
                      "        if (a4_ != MPI_STATUSES_IGNORE)\n            a4_[i_] = s_[i_];\n"
                      "    }\n    free(s_);\n",
                      done, rc, push ? "        cr_adstack_push_i64(stp_, a3_[i_]);\n" : "");
        if (push)
            ad_buf_put(o, "    cr_adstack_push_i64(stp_, n_);\n");
        break;
    }
}

/* The adjoint of completion(): the adjoint messages of the requests it completed, the last
 * first. */
static void completion_bw(ad_buf *o, int kind)
{
    switch (kind) {
    case K_TEST:
        ad_buf_put(o,
                   "    if (cr_adstack_pop_i64(stp_))\n        cr_ad_mreq_bw_wait_(stp_, a0_);\n");
        break;
    case K_TESTALL:
        ad_buf_put(o, "    if (cr_adstack_pop_i64(stp_))\n        for (int i_ = a0_; i_-- > 0;)\n"
                      "            cr_ad_mreq_bw_wait_(stp_, &a1_[i_]);\n");
        break;
    case K_WAITANY:
    case K_TESTANY:
        ad_buf_put(o, "    const int k_ = (int)cr_adstack_pop_i64(stp_);\n"
                      "    if (k_ >= 0)\n        cr_ad_mreq_bw_wait_(stp_, &a1_[k_]);\n");
        break;
    default:
        ad_buf_put(o, "    for (int n_ = (int)cr_adstack_pop_i64(stp_); n_ > 0; n_--) {\n"
                      "        const int k_ = (int)cr_adstack_pop_i64(stp_);\n"
                      "        cr_ad_mreq_bw_wait_(stp_, &a1_[k_]);\n    }\n");
        break;
    }
}

/* Isend, Irecv and the completions in the reverse mode: the forward and adjoint sweeps. */
static void nb_split(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    const bool post = m->kind == K_ISEND || m->kind == K_IRECV || m->kind == K_SEND_INIT ||
                      m->kind == K_RECV_INIT;
    const bool init = m->kind == K_SEND_INIT || m->kind == K_RECV_INIT;
    /* forward sweep (an irecv gets the shadow of its buffer: the adjoint of its wait sends
     * it) */
    ad_buf_printf(o, "static int cr_ad_%s_fw%s(", g->name, mn);
    params(o, g, m->kind == K_IRECV || init ? mask : 0, "_b");
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    switch (m->kind) {
    case K_ISEND:
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(
            o,
            ";\n    cr_ad_mreq_ *e_ = cr_ad_mreq_add_(a6_, 0, 1, a2_ == MPI_DOUBLE ? a1_ : 0, 0);\n"
            "    e_->peer = a3_;\n    e_->tag = a4_;\n    e_->comm = a5_;\n");
        break;
    case K_IRECV:
        /* the buffer's contents before the receive, for the adjoint to restore */
        ad_buf_printf(o,
                      "    const int dbl_ = a2_ == MPI_DOUBLE;\n    if (dbl_)\n"
                      "        for (int i_ = 0; i_ < a1_; i_++)\n"
                      "            cr_adstack_push_f64(stp_, %s[i_]);\n"
                      "    cr_adstack_push_i64(stp_, dbl_);\n    const int r_ = ",
                      dbl("a0_"));
        call_primal(o, g, NULL);
        ad_buf_printf(o,
                      ";\n    cr_ad_mreq_ *e_ = cr_ad_mreq_add_(a6_, 0, 2, dbl_ ? a1_ : 0, 0);\n"
                      "    e_->peer = a3_;\n    e_->tag = a4_;\n    e_->comm = a5_;\n"
                      "    e_->type = a2_;\n    e_->shadow = %s;\n",
                      mask & 1 ? "dbl_ ? (double *)(uintptr_t)a0__b : NULL" : "NULL");
        break;
    case K_WAIT:
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = ");
        call_primal(o, g, "&s_");
        ad_buf_put(o, ";\n    cr_ad_mreq_fw_wait_(stp_, a0_, &s_, r_);\n"
                      "    if (a1_ != MPI_STATUS_IGNORE)\n        *a1_ = s_;\n");
        break;
    case K_WAITALL:
        ad_buf_put(o, "    MPI_Status *s_ = malloc((size_t)(a0_ > 0 ? a0_ : 1) * sizeof *s_);\n"
                      "    if (!s_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n    const int r_ = ");
        call_primal(o, g, "s_");
        ad_buf_put(o,
                   ";\n    for (int i_ = 0; i_ < a0_; i_++) {\n"
                   "        cr_ad_mreq_fw_wait_(stp_, &a1_[i_], &s_[i_],\n"
                   "                            r_ == MPI_ERR_IN_STATUS ? s_[i_].MPI_ERROR : r_);\n"
                   "        if (a2_ != MPI_STATUSES_IGNORE)\n            a2_[i_] = s_[i_];\n"
                   "    }\n    free(s_);\n");
        break;
    case K_SEND_INIT:
    case K_RECV_INIT:
        /* the template (the buffer, its shadow) for the starts */
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_printf(o,
                      ";\n    cr_ad_mreq_init_(a6_, 3, %d, (void *)(uintptr_t)a0_, a1_, a2_, a3_, "
                      "a4_, a5_, %s, 0);\n",
                      m->kind == K_SEND_INIT ? 1 : 2,
                      mask & 1 ? "(double *)(uintptr_t)a0__b" : "NULL");
        break;
    case K_START:
        ad_buf_put(o, "    cr_ad_mreq_fw_start_(stp_, a0_);\n    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        break;
    case K_STARTALL:
        ad_buf_put(o, "    for (int i_ = 0; i_ < a0_; i_++)\n"
                      "        cr_ad_mreq_fw_start_(stp_, &a1_[i_]);\n    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        break;
    case K_REQUEST_FREE:
        ad_buf_put(o, "    cr_ad_mreq_fw_free_(stp_, a0_);\n    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        break;
    default:
        completion(o, g, m->kind, true);
        break;
    }
    ad_buf_put(o, "    return r_;\n}\n\n");

    /* adjoint sweep */
    ad_buf_printf(o, "static void cr_ad_%s_bw%s(", g->name, mn);
    params(o, g, mask, "_b");
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    if (post)
        checks(o, m, mask, "cr_ad_mpi_failed_ = 1");
    switch (m->kind) {
    case K_ISEND:
        ad_buf_printf(o, "    cr_ad_mreq_bw_post_(stp_, a6_, %s);\n",
                      mask & 1 ? "a2_ == MPI_DOUBLE ? (double *)(uintptr_t)a0__b : NULL" : "NULL");
        break;
    case K_IRECV:
        ad_buf_printf(o,
                      "    cr_ad_mreq_bw_post_(stp_, a6_, NULL);\n"
                      "    if (cr_adstack_pop_i64(stp_))\n"
                      "        for (int i_ = a1_; i_-- > 0;)\n"
                      "            %s[i_] = cr_adstack_pop_f64(stp_);\n",
                      dbl("a0_"));
        break;
    case K_WAIT:
        ad_buf_put(o, "    cr_ad_mreq_bw_wait_(stp_, a0_);\n");
        break;
    case K_WAITALL:
        ad_buf_put(o, "    for (int i_ = a0_; i_-- > 0;)\n"
                      "        cr_ad_mreq_bw_wait_(stp_, &a1_[i_]);\n");
        break;
    case K_SEND_INIT:
    case K_RECV_INIT:
        ad_buf_put(o, "    cr_ad_mreq_uninit_(a6_, 3);\n");
        break;
    case K_START:
        ad_buf_put(o, "    cr_ad_mreq_bw_start_(stp_, a0_);\n");
        break;
    case K_STARTALL:
        ad_buf_put(o, "    for (int i_ = a0_; i_-- > 0;)\n"
                      "        cr_ad_mreq_bw_start_(stp_, &a1_[i_]);\n");
        break;
    case K_REQUEST_FREE:
        ad_buf_put(o, "    cr_ad_mreq_bw_free_(stp_, a0_);\n");
        break;
    default:
        completion_bw(o, m->kind);
        break;
    }
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", arg(i));
    if (mask & 1)
        ad_buf_put(o, "    (void)a0__b;\n");
    ad_buf_put(o, "}\n\n");
}

/* Isend, Irecv and the completions in the forward mode: the tangent messages travel beside the
 * primal ones (a receive with a wildcard source or tag takes its tangent at the wait, from
 * the actual source and tag). */
static void nb_tangent(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    ad_buf_printf(o, "static int cr_ad_%s_tan%s(", g->name, mn);
    params(o, g, mask, "_d");
    ad_buf_put(o, ")\n{\n    int fail_ = 0;\n");
    checks(o, m, mask, "fail_ = 1");
    switch (m->kind) {
    case K_ISEND:
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n    cr_ad_mreq_ *e_ = cr_ad_mreq_add_(a6_, 2, 1, fail_ ? 0 : a1_, 1);\n");
        if (mask & 1)
            ad_buf_put(o, "    if (!fail_)\n        memcpy(e_->tmp, a0__d, (size_t)e_->count * "
                          "sizeof(double));\n");
        ad_buf_put(o, "    MPI_Isend(e_->tmp, e_->count, MPI_DOUBLE, a3_, a4_, a5_, &e_->dreq);\n");
        break;
    case K_IRECV:
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_printf(
            o,
            ";\n    cr_ad_mreq_ *e_ = cr_ad_mreq_add_(a6_, 2, 2, fail_ ? 0 : a1_, 1);\n"
            "    e_->shadow = %s;\n    e_->fail = fail_;\n    e_->comm = a5_;\n"
            "    e_->orig = a1_;\n"
            "    e_->type = a2_;\n"
            "    if (a3_ == MPI_ANY_SOURCE || a4_ == MPI_ANY_TAG)\n        e_->deferred = 1;\n"
            "    else\n        MPI_Irecv(e_->shadow && !fail_ ? e_->shadow : e_->tmp, e_->count, "
            "MPI_DOUBLE, a3_, a4_, a5_, &e_->dreq);\n",
            mask & 1 ? "(double *)(uintptr_t)a0__d" : "NULL");
        break;
    case K_WAIT:
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = ");
        call_primal(o, g, "&s_");
        ad_buf_put(o, ";\n    cr_ad_mreq_tan_wait_(a0_, &s_, r_);\n"
                      "    if (a1_ != MPI_STATUS_IGNORE)\n        *a1_ = s_;\n");
        break;
    case K_WAITALL:
        ad_buf_put(o, "    MPI_Status *s_ = malloc((size_t)(a0_ > 0 ? a0_ : 1) * sizeof *s_);\n"
                      "    if (!s_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n    const int r_ = ");
        call_primal(o, g, "s_");
        ad_buf_put(
            o, ";\n    for (int i_ = 0; i_ < a0_; i_++) {\n"
               "        cr_ad_mreq_tan_wait_(&a1_[i_], &s_[i_],\n"
               "                             r_ == MPI_ERR_IN_STATUS ? s_[i_].MPI_ERROR : r_);\n"
               "        if (a2_ != MPI_STATUSES_IGNORE)\n            a2_[i_] = s_[i_];\n"
               "    }\n    free(s_);\n");
        break;
    case K_SEND_INIT:
    case K_RECV_INIT:
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_printf(o,
                      ";\n    cr_ad_mreq_init_(a6_, 4, %d, (void *)(uintptr_t)a0_, a1_, a2_, a3_, "
                      "a4_, a5_, %s, fail_);\n",
                      m->kind == K_SEND_INIT ? 1 : 2,
                      mask & 1 ? "(double *)(uintptr_t)a0__d" : "NULL");
        break;
    case K_START:
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n    cr_ad_mreq_tan_start_(a0_);\n");
        break;
    case K_STARTALL:
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n    for (int i_ = 0; i_ < a0_; i_++)\n"
                      "        cr_ad_mreq_tan_start_(&a1_[i_]);\n");
        break;
    case K_REQUEST_FREE:
        ad_buf_put(o, "    cr_ad_mreq_tan_free_(a0_);\n    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        break;
    default:
        completion(o, g, m->kind, false);
        break;
    }
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", arg(i));
    ad_buf_put(o, "    (void)fail_;\n    return r_;\n}\n\n");
}

const char *ad_mpi_sweep_end(void)
{
    if (!g_bound)
        return "";
    return "#ifdef CR_AD_MPI_FAILED_\n    if (cr_ad_mpi_failed_) {\n"
           "        cr_ad_mpi_failed_ = 0;\n        cr_adstack_set_failed(&st_);\n    }\n"
           "#endif\n";
}

bool ad_mpi_fw_shadows(const ad_expr *c, uint64_t mask, bool split)
{
    if (!c->callee || !c->callee->prim || !c->callee->prim->mpi ||
        (k_mpi[c->callee->prim->mpi - 1].kind != K_IRECV &&
         k_mpi[c->callee->prim->mpi - 1].kind != K_SEND_INIT &&
         k_mpi[c->callee->prim->mpi - 1].kind != K_RECV_INIT) ||
        !(mask & 1))
        return false;
    if (split) {
        ad_error(c->loc,
                 "%s of a differentiated buffer in a function called by the function "
                 "differentiated: the adjoint of its request needs the buffer's adjoint, which "
                 "the forward sweep of a called function does not have; post the request in the "
                 "function differentiated",
                 c->callee->name);
        return false;
    }
    return true;
}

/* ---- The v variants ----------------------------------------------------------------------- */

/* The segments of a v variant's counts (cn) and displacements (dn): the extent ext_ of the
 * buffer they address and the packed displacements pd_ (their sum tot_), on the ranks
 * where the arrays are significant (cond). */
static void v_layout(ad_buf *o, const char *cond, const char *cn, const char *dn)
{
    ad_buf_printf(o,
                  "    int ext_ = 0, tot_ = 0, *pd_ = malloc((size_t)size_ * sizeof *pd_);\n"
                  "    if (!pd_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n"
                  "    for (int q_ = 0; q_ < size_; q_++) {\n"
                  "        pd_[q_] = tot_;\n"
                  "        if (%s) {\n"
                  "            tot_ += %s[q_];\n"
                  "            if (%s[q_] + %s[q_] > ext_)\n"
                  "                ext_ = %s[q_] + %s[q_];\n        }\n    }\n",
                  cond, cn, dn, cn, dn, cn);
}

/* For each segment q of buffer p (counts cn, displacements dn) where cond holds: body on
 * element p[dn[q] + j_] (forwards, or backwards for pops). */
static void v_segments(ad_buf *o, const char *cond, const char *cn, const char *dn, bool back,
                       const char *body)
{
    if (back)
        ad_buf_printf(o,
                      "    for (int q_ = size_; q_-- > 0;)\n        if (%s)\n"
                      "            for (int j_ = %s[q_]; j_-- > 0;) {\n"
                      "                const int k_ = %s[q_] + j_;\n                %s\n"
                      "            }\n",
                      cond, cn, dn, body);
    else
        ad_buf_printf(o,
                      "    for (int q_ = 0; q_ < size_; q_++)\n        if (%s)\n"
                      "            for (int j_ = 0; j_ < %s[q_]; j_++) {\n"
                      "                const int k_ = %s[q_] + j_;\n                %s\n"
                      "            }\n",
                      cond, cn, dn, body);
}

static void v_head(ad_buf *o, const char *comm)
{
    ad_buf_printf(o,
                  "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                  "    MPI_Comm_size(%s, &size_);\n    (void)rank_;\n    (void)size_;\n",
                  comm, comm);
}

/* The datatype checks of a v variant, where the datatypes are significant (not beside
 * MPI_IN_PLACE; the root's side only at the root). */
static void v_checks(ad_buf *o, int kind, uint64_t mask, const char *fail)
{
    /* the send buffer (bit 0) and the receive buffer (bit 3, or 4 for scatterv), where they
     * are differentiated */
    bool ax = mask & 1, ay = mask >> (kind == K_SCATTERV ? 4 : 3) & 1;
    const char *cx = kind == K_SCATTERV ? "(rank_ == a7_ && a3_ != MPI_DOUBLE)"
                                        : "(a0_ != MPI_IN_PLACE && a2_ != MPI_DOUBLE)";
    const char *cy = kind == K_GATHERV    ? "(rank_ == a7_ && a6_ != MPI_DOUBLE)"
                     : kind == K_SCATTERV ? "(a4_ != MPI_IN_PLACE && a6_ != MPI_DOUBLE)"
                                          : "a6_ != MPI_DOUBLE";
    if (ax)
        ad_buf_printf(o, "    if %s\n        %s;\n", cx, fail);
    if (ay)
        ad_buf_printf(o, "    if (%s)\n        %s;\n", cy, fail);
}

/* The derivative buffers of a v variant, xw_ and yw_: the shadows (or scratch) x and y, or
 * zeros of xn / yn doubles in their place for a buffer of another datatype (its counts
 * and displacements count that type's elements: the derivative's collective still takes
 * place, on buffers that hold them as doubles). xo_, yo_: whether they were replaced. */
static void v_substitute(ad_buf *o, int kind, const char *x, const char *y, const char *xn,
                         const char *yn)
{
    const char *xbad =
        kind == K_SCATTERV ? "a3_ != MPI_DOUBLE" : "a0_ != MPI_IN_PLACE && a2_ != MPI_DOUBLE";
    ad_buf_printf(o,
                  "    double *xw_ = %s, *yw_ = %s;\n"
                  "    const int xo_ = %s, yo_ = a6_ != MPI_DOUBLE;\n"
                  "    if (xo_)\n        xw_ = calloc((size_t)(%s > 0 ? %s : 1), sizeof(double));\n"
                  "    if (yo_)\n        yw_ = calloc((size_t)(%s > 0 ? %s : 1), sizeof(double));\n"
                  "    if (!xw_ || !yw_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n",
                  x, y, xbad, xn, xn, yn, yn);
}

/* MPI_Gatherv, MPI_Scatterv, MPI_Allgatherv in the reverse mode. In place (MPI_IN_PLACE at
 * the root, everywhere for allgatherv) the rank's own segment stays where it is. */
static void v_split(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    const char *comm = arg(g->nparams - 1);
    const char *xb = mask & 1 ? ad_fmt("%s_b", arg(m->in)) : "x_";
    const char *yb = mask >> m->out & 1 ? ad_fmt("%s_b", arg(m->out)) : "y_";
    const char *x = arg(m->in), *y = arg(m->out);
    /* the segments: counts and displacements, where they are read, which are moved */
    const char *cn, *dn, *where, *moved, *inplace;
    if (m->kind == K_GATHERV) {
        cn = "a4_", dn = "a5_", where = "rank_ == a7_";
        inplace = "(rank_ == a7_ && a0_ == MPI_IN_PLACE)";
    } else if (m->kind == K_SCATTERV) {
        cn = "a1_", dn = "a2_", where = "rank_ == a7_";
        inplace = "(rank_ == a7_ && a4_ == MPI_IN_PLACE)";
    } else {
        cn = "a4_", dn = "a5_", where = "1", inplace = "(a0_ == MPI_IN_PLACE)";
    }
    /* (a receive buffer of another datatype: nothing saved, its counts are not in doubles) */
    moved = ad_fmt("%s && a6_ == MPI_DOUBLE && !(%s && q_ == rank_)", where, inplace);
    /* forward sweep: the elements the call overwrites, then the call */
    ad_buf_printf(o, "static int cr_ad_%s_fw%s(", g->name, mn);
    params(o, g, 0, NULL);
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n");
    v_head(o, comm);
    v_agree(o, m->kind, comm, NULL); /* (the adjoint sweep fails the derivative) */
    if (m->kind == K_SCATTERV)
        ad_buf_printf(
            o,
            "    if (!%s && a6_ == MPI_DOUBLE)\n        for (int i_ = 0; i_ < a5_; i_++)\n"
            "            cr_adstack_push_f64(stp_, %s[i_]);\n",
            inplace, dbl(y));
    else
        v_segments(o, moved, cn, dn, false, ad_fmt("cr_adstack_push_f64(stp_, %s[k_]);", dbl(y)));
    ad_buf_put(o, "    const int r_ = ");
    call_primal(o, g, NULL);
    ad_buf_put(o, ";\n    cr_adstack_push_i64(stp_, agreed_);\n    free(zc_);\n"
                  "    return agreed_ ? r_ : MPI_ERR_COUNT;\n}\n\n");

    /* adjoint sweep */
    ad_buf_printf(o, "static void cr_ad_%s_bw%s(", g->name, mn);
    params(o, g, mask, "_b");
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    v_head(o, comm);
    /* the ranks disagreed in the forward sweep: every count was 0 there */
    ad_buf_put(o, "    int *zc_ = NULL;\n    if (!cr_adstack_pop_i64(stp_)) {\n"
                  "        cr_ad_mpi_failed_ = 1;\n");
    v_zero(o, m->kind);
    ad_buf_put(o, "    }\n");
    v_checks(o, m->kind, mask, "cr_ad_mpi_failed_ = 1");
    v_layout(o, where, cn, dn);
    /* scratch for the shadows the call does not have */
    const char *xn = m->kind == K_SCATTERV ? "ext_" : "a1_";
    const char *yn = m->kind == K_SCATTERV ? "a5_" : "ext_";
    if (!(mask & 1))
        ad_buf_printf(o,
                      "    double *x_ = calloc((size_t)(%s > 0 ? %s : 1), sizeof(double));\n"
                      "    if (!x_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n",
                      xn, xn);
    if (!(mask >> m->out & 1))
        ad_buf_printf(o,
                      "    double *y_ = calloc((size_t)(%s > 0 ? %s : 1), sizeof(double));\n"
                      "    if (!y_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n",
                      yn, yn);
    v_substitute(o, m->kind, dbl(xb), dbl(yb), xn, yn);
    const char *X = "xw_", *Y = "yw_";
    switch (m->kind) {
    case K_GATHERV:
        /* the root scatters the adjoints of the segments back, added into x_b */
        ad_buf_printf(o,
                      "    double *t_ = calloc((size_t)(a1_ > 0 ? a1_ : 1), sizeof(double));\n"
                      "    if (!t_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n"
                      "    if (rank_ == a7_)\n"
                      "        MPI_Scatterv(%s, a4_, a5_, MPI_DOUBLE, %s ? MPI_IN_PLACE : "
                      "(void *)t_, a1_, MPI_DOUBLE, a7_, %s);\n"
                      "    else\n        MPI_Scatterv(NULL, NULL, NULL, MPI_DOUBLE, t_, a1_, "
                      "MPI_DOUBLE, a7_, %s);\n"
                      "    if (!%s)\n        for (int i_ = 0; i_ < a1_; i_++)\n"
                      "            %s[i_] += t_[i_];\n    free(t_);\n",
                      Y, inplace, comm, comm, inplace, X);
        v_segments(o, moved, cn, dn, false, ad_fmt("%s[k_] = 0;", Y));
        break;
    case K_SCATTERV:
        /* the root gathers the adjoints of the parts, added into its segments of x_b */
        ad_buf_printf(o,
                      "    double *t_ = calloc((size_t)(tot_ > 0 ? tot_ : 1), sizeof(double));\n"
                      "    if (!t_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n"
                      "    if (rank_ == a7_)\n"
                      "        MPI_Gatherv(%s ? MPI_IN_PLACE : (const void *)%s, a5_, MPI_DOUBLE, "
                      "t_, a1_, pd_, MPI_DOUBLE, a7_, %s);\n"
                      "    else\n        MPI_Gatherv(%s, a5_, MPI_DOUBLE, NULL, NULL, NULL, "
                      "MPI_DOUBLE, a7_, %s);\n",
                      inplace, Y, comm, Y, comm);
        v_segments(o, moved, cn, dn, false, ad_fmt("%s[k_] += t_[pd_[q_] + j_];", X));
        ad_buf_printf(o,
                      "    free(t_);\n    if (!%s)\n        for (int i_ = 0; i_ < a5_; i_++)\n"
                      "            %s[i_] = 0;\n",
                      inplace, Y);
        break;
    default:
        /* every rank's adjoints of the segments, packed, reduced and scattered: rank q
         * gets the sum of segment q's */
        ad_buf_printf(o, "    double *t_ = calloc((size_t)(tot_ > 0 ? tot_ : 1), sizeof(double));\n"
                         "    double *u_ = calloc((size_t)(a4_[rank_] > 0 ? a4_[rank_] : 1), "
                         "sizeof(double));\n"
                         "    if (!t_ || !u_)\n        MPI_Abort(MPI_COMM_WORLD, 1);\n");
        v_segments(o, "1", cn, dn, false, ad_fmt("t_[pd_[q_] + j_] = %s[k_];", Y));
        ad_buf_printf(o, "    MPI_Reduce_scatter(t_, u_, a4_, MPI_DOUBLE, MPI_SUM, %s);\n", comm);
        v_segments(o, "1", cn, dn, false, ad_fmt("%s[k_] = 0;", Y));
        ad_buf_printf(o,
                      "    for (int i_ = 0; i_ < a4_[rank_]; i_++) {\n"
                      "        if (%s)\n            %s[a5_[rank_] + i_] = u_[i_];\n"
                      "        else\n            %s[i_] += u_[i_];\n    }\n"
                      "    free(t_);\n    free(u_);\n",
                      inplace, Y, X);
        break;
    }
    if (!(mask & 1))
        ad_buf_put(o, "    free(x_);\n");
    if (!(mask >> m->out & 1))
        ad_buf_put(o, "    free(y_);\n");
    ad_buf_put(o, "    if (xo_)\n        free(xw_);\n    if (yo_)\n        free(yw_);\n");
    ad_buf_put(o, "    free(pd_);\n    (void)ext_;\n");
    /* the overwritten elements restored (before zc_ is freed: the counts may be it) */
    if (m->kind == K_SCATTERV)
        ad_buf_printf(o,
                      "    if (!%s && a6_ == MPI_DOUBLE)\n        for (int i_ = a5_; i_-- > 0;)\n"
                      "            %s[i_] = cr_adstack_pop_f64(stp_);\n",
                      inplace, dbl(y));
    else
        v_segments(o, moved, cn, dn, true, ad_fmt("%s[k_] = cr_adstack_pop_f64(stp_);", dbl(y)));
    ad_buf_put(o, "    free(zc_);\n");
    (void)x;
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", arg(i));
    ad_buf_put(o, "}\n\n");
}

/* The v variants in the forward mode: the same call on the tangents. */
static void v_tangent(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    const char *comm = arg(g->nparams - 1);
    ad_buf_printf(o, "static int cr_ad_%s_tan%s(", g->name, mn);
    params(o, g, mask, "_d");
    ad_buf_put(o, ")\n{\n    int fail_ = 0;\n");
    v_head(o, comm);
    v_checks(o, m->kind, mask, "fail_ = 1");
    v_agree(o, m->kind, comm, "fail_ = 1");
    const char *where = m->kind == K_ALLGATHERV ? "1" : "rank_ == a7_";
    const char *cn = m->kind == K_SCATTERV ? "a1_" : "a4_",
               *dn = m->kind == K_SCATTERV ? "a2_" : "a5_";
    v_layout(o, where, cn, dn);
    const char *xn = m->kind == K_SCATTERV ? "ext_" : "a1_";
    const char *yn = m->kind == K_SCATTERV ? "a5_" : "ext_";
    const char *xd = shadow_or_scratch(o, mask, m->in, "_d", xn, "x_");
    const char *yd = shadow_or_scratch(o, mask, m->out, "_d", yn, "y_");
    v_substitute(o, m->kind, dbl(xd), dbl(yd), xn, yn);
    const char *X = "xw_", *Y = "yw_";
    ad_buf_put(o, "    int r_ = ");
    call_primal(o, g, NULL);
    ad_buf_put(o, ";\n    if (!agreed_)\n        r_ = MPI_ERR_COUNT;\n");
    switch (m->kind) {
    case K_GATHERV:
        ad_buf_printf(o,
                      "    MPI_Gatherv(a0_ == MPI_IN_PLACE ? MPI_IN_PLACE : (const void *)%s, a1_, "
                      "MPI_DOUBLE, %s, a4_, a5_, MPI_DOUBLE, a7_, %s);\n",
                      X, Y, comm);
        break;
    case K_SCATTERV:
        ad_buf_printf(o,
                      "    MPI_Scatterv(%s, a1_, a2_, MPI_DOUBLE, a4_ == MPI_IN_PLACE ? "
                      "MPI_IN_PLACE : (void *)%s, a5_, MPI_DOUBLE, a7_, %s);\n",
                      X, Y, comm);
        break;
    default:
        ad_buf_printf(o,
                      "    MPI_Allgatherv(a0_ == MPI_IN_PLACE ? MPI_IN_PLACE : (const void *)%s, "
                      "a1_, MPI_DOUBLE, %s, a4_, a5_, MPI_DOUBLE, %s);\n",
                      X, Y, comm);
        break;
    }
    if (mask >> m->out & 1)
        ad_buf_printf(o,
                      "    if (fail_) {\n        for (int i_ = 0; i_ < %s; i_++)\n"
                      "            %s[i_] = (double)NAN;\n"
                      "        if (yo_ && %s > 0) /* another datatype: its first element */\n"
                      "            %s[0] = (double)NAN;\n"
                      "        if (!agreed_ && a6_ == MPI_DOUBLE && ext0_ > 0) /* the ranks "
                      "disagreed */\n"
                      "            %s[0] = (double)NAN;\n    }\n",
                      yn, Y, yn, dbl(yd), dbl(yd));
    free_scratch(o, mask, m->in, "x_");
    free_scratch(o, mask, m->out, "y_");
    ad_buf_put(o, "    if (xo_)\n        free(xw_);\n    if (yo_)\n        free(yw_);\n");
    ad_buf_put(o, "    free(pd_);\n    free(zc_);\n    (void)tot_;\n");
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", arg(i));
    ad_buf_put(o, "    (void)fail_;\n    return r_;\n}\n\n");
}

/* The adjoint of a blocking send received into x_b (status s_, result r_): of another
 * count than sent (its receiver failed or got another count), or with an error, the
 * adjoint is NaN and the derivative fails. */
static void adjoint_count(ad_buf *o, const char *xb, const char *n, const char *peer)
{
    ad_buf_printf(o,
                  "    int c_ = %s;\n"
                  "    if (%s != MPI_PROC_NULL &&\n"
                  "        (r_ != MPI_SUCCESS || MPI_Get_count(&s_, MPI_DOUBLE, &c_) != "
                  "MPI_SUCCESS || c_ != %s)) {\n"
                  "        for (int i_ = 0; i_ < (%s); i_++)\n"
                  "            %s[i_] = (double)NAN;\n"
                  "        cr_ad_mpi_failed_ = 1;\n    }\n",
                  n, peer, n, n, dbl(xb));
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
    /* the forward sweep saves nothing of a buffer of another datatype (zero_counts) */
    const char *fw_n =
        out_n ? ad_fmt("(%s == MPI_DOUBLE ? %s : 0)", arg(m->out_type), out_n) : NULL;
    const char *fw_gathered = ad_fmt("size_ * %s", fw_n ? fw_n : "0");

    /* ---- forward sweep: the overwritten contents, the primal, the actual source and tag */
    ad_buf_printf(o, "static int cr_ad_%s_fw%s(", g->name, mn);
    params(o, g, 0, NULL);
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    if (rooted || m->kind == K_ALLGATHER || m->kind == K_BCAST || m->kind == K_ALLTOALL)
        ad_buf_printf(o,
                      "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                      "    MPI_Comm_size(%s, &size_);\n    (void)size_;\n    (void)rank_;\n",
                      comm, comm);
    if (agreed_kind(m->kind)) /* (the adjoint sweep fails the derivative) */
        agree(o, m, comm, NULL);
    if (m->kind == K_ALLREDUCE || m->kind == K_REDUCE)
        winners(o, comm);
    if (m->kind == K_RECV || m->kind == K_SENDRECV || m->kind == K_ALLREDUCE)
        loop_push(o, out, fw_n, "    ");
    else if (m->kind == K_BCAST)
        loop_push(o, out, fw_n, "    ");
    else if (m->kind == K_REDUCE || m->kind == K_GATHER)
        ad_buf_printf(o, "    if (rank_ == %s) {\n", root),
            loop_push(o, out, m->kind == K_GATHER ? fw_gathered : fw_n, "        "),
            ad_buf_put(o, "    }\n");
    else if (m->kind == K_SCATTER || m->kind == K_ALLGATHER || m->kind == K_ALLTOALL)
        loop_push(o, out, m->kind == K_SCATTER ? fw_n : fw_gathered, "    ");
    if (status) {
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = ");
        call_primal(o, g, "&s_");
        /* whether the receive got the count it posted, without an error: otherwise its
         * adjoint message is empty, which its sender takes for a failure */
        ad_buf_printf(o,
                      ";\n    cr_adstack_push_i64(stp_, s_.MPI_SOURCE);\n"
                      "    cr_adstack_push_i64(stp_, s_.MPI_TAG);\n"
                      "    int c_ = %s;\n"
                      "    if (r_ != MPI_SUCCESS || (s_.MPI_SOURCE != MPI_PROC_NULL &&\n"
                      "                              MPI_Get_count(&s_, %s, &c_) != MPI_SUCCESS))\n"
                      "        c_ = -1;\n"
                      "    cr_adstack_push_i64(stp_, c_ == %s);\n"
                      "    if (%s != MPI_STATUS_IGNORE)\n        *%s = s_;\n    return r_;\n}\n\n",
                      out_n, arg(m->out_type), out_n, arg(g->nparams - 1), arg(g->nparams - 1));
    } else if (m->kind == K_ALLREDUCE || m->kind == K_REDUCE) {
        /* the winners (known to every rank) go on the stack after the primal, so the adjoint
         * pops them first */
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n");
        winners_reduce(o, comm);
        ad_buf_put(o, "    if (loc_) {\n        for (int i_ = 0; i_ < a2_; i_++)\n"
                      "            cr_adstack_push_i64(stp_, w_[i_].r);\n"
                      "        free(w_);\n    }\n"
                      "    if (oth_) {\n        for (int i_ = 0; i_ < a2_; i_++)\n"
                      "            cr_adstack_push_f64(stp_, oth_[i_]);\n"
                      "        free(oth_);\n    }\n"
                      "    cr_adstack_push_i64(stp_, agreed_);\n"
                      "    return agreed_ ? r_ : MPI_ERR_COUNT;\n}\n\n");
    } else if (agreed_kind(m->kind)) {
        /* the agreement goes on the stack last, so the adjoint pops it first */
        ad_buf_put(o, "    const int r_ = ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n    cr_adstack_push_i64(stp_, agreed_);\n"
                      "    return agreed_ ? r_ : MPI_ERR_COUNT;\n}\n\n");
    } else {
        ad_buf_put(o, "    return ");
        call_primal(o, g, NULL);
        ad_buf_put(o, ";\n}\n\n");
    }

    /* ---- adjoint sweep */
    ad_buf_printf(o, "static void cr_ad_%s_bw%s(", g->name, mn);
    params(o, g, mask, "_b");
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    checks(o, m, mask, "cr_ad_mpi_failed_ = 1");
    zero_counts(o, m);
    if (rooted || m->kind == K_ALLGATHER || m->kind == K_BCAST || m->kind == K_ALLTOALL)
        ad_buf_printf(o,
                      "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                      "    MPI_Comm_size(%s, &size_);\n    (void)size_;\n",
                      comm, comm);
    if (agreed_kind(m->kind)) {
        /* the ranks disagreed in the forward sweep: every rank's counts were 0 there */
        ad_buf_put(o, "    if (!cr_adstack_pop_i64(stp_)) {\n        cr_ad_mpi_failed_ = 1;\n");
        zero_agreed(o, m);
        ad_buf_put(o, "    }\n");
    }
    const char *xb = NULL, *yb = NULL;
    switch (m->kind) {
    case K_SEND:
        /* receive the adjoint from the destination, added into x_b */
        xb = shadow_or_scratch(o, mask, m->in, "_b", in_n, "x_");
        loop_push(o, xb, in_n, "    ");
        ad_buf_printf(o,
                      "    MPI_Status s_;\n"
                      "    const int r_ = MPI_Recv(%s, %s, MPI_DOUBLE, %s, %s, %s, &s_);\n",
                      dbl(xb), in_n, arg(3), arg(4), comm);
        adjoint_count(o, xb, in_n, arg(3));
        loop_pop(o, xb, in_n, "+=", "    ");
        free_scratch(o, mask, m->in, "x_");
        break;
    case K_RECV:
    case K_SENDRECV:
        yb = shadow_or_scratch(o, mask, m->out, "_b", out_n, "y_");
        /* a receive from MPI_PROC_NULL has the tag MPI_ANY_TAG, which no send may carry */
        /* a receive that failed or got another count sends an empty adjoint (its sender
         * fails too: another count than it sent) */
        ad_buf_put(o, "    const int got_ = (int)cr_adstack_pop_i64(stp_);\n"
                      "    const int tag0_ = (int)cr_adstack_pop_i64(stp_);\n"
                      "    const int src_ = (int)cr_adstack_pop_i64(stp_);\n"
                      "    const int tag_ = src_ == MPI_PROC_NULL ? 0 : tag0_;\n"
                      "    if (!got_)\n        cr_ad_mpi_failed_ = 1;\n");
        if (m->kind == K_RECV) {
            ad_buf_printf(o, "    MPI_Send(%s, got_ ? %s : 0, MPI_DOUBLE, src_, tag_, %s);\n",
                          dbl(yb), out_n, comm);
        } else {
            /* the adjoint of the received part goes back to its source while the adjoint
             * of the sent part comes from the destination */
            xb = shadow_or_scratch(o, mask, m->in, "_b", in_n, "x_");
            loop_push(o, xb, in_n, "    ");
            ad_buf_printf(o,
                          "    MPI_Status s_;\n"
                          "    const int r_ = MPI_Sendrecv(%s, got_ ? %s : 0, MPI_DOUBLE, src_, "
                          "tag_, %s, %s, MPI_DOUBLE, %s, %s, %s, &s_);\n",
                          dbl(yb), out_n, dbl(xb), in_n, arg(3), arg(4), comm);
            adjoint_count(o, xb, in_n, arg(3));
            loop_pop(o, xb, in_n, "+=", "    ");
            free_scratch(o, mask, m->in, "x_");
        }
        /* a receive from MPI_PROC_NULL leaves the buffer, and its adjoint, as they were */
        ad_buf_printf(o,
                      "    if (src_ != MPI_PROC_NULL)\n        for (int i_ = 0; i_ < (%s); i_++)\n"
                      "            %s[i_] = 0;\n",
                      out_n, dbl(yb));
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
                          "        }\n    }\n"
                          "    if (a4_ == MPI_PROD)\n"
                          "        for (int i_ = (%s); i_-- > 0;)\n"
                          "            %s[i_] *= cr_adstack_pop_f64(stp_);\n",
                          dbl(yb), out_n, comm, comm, out_n, dbl(yb), out_n, dbl(yb));
        } else {
            /* the root's adjoint of y, broadcast; for MPI_MAX and MPI_MIN kept by each
             * element's winner only (the ranks popped from the forward sweep) */
            ad_buf_printf(o,
                          "    int me_ = 0, *wr_ = NULL;\n    MPI_Comm_rank(%s, &me_);\n"
                          "    if (a4_ == MPI_MAX || a4_ == MPI_MIN) {\n"
                          "        wr_ = malloc((size_t)(a2_ > 0 ? a2_ : 1) * sizeof *wr_);\n"
                          "        if (!wr_)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n"
                          "        for (int i_ = a2_; i_-- > 0;)\n"
                          "            wr_[i_] = (int)cr_adstack_pop_i64(stp_);\n    }\n"
                          "    double *ot_ = NULL;\n"
                          "    if (a4_ == MPI_PROD) {\n"
                          "        ot_ = malloc((size_t)(a2_ > 0 ? a2_ : 1) * sizeof *ot_);\n"
                          "        if (!ot_)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n"
                          "        for (int i_ = a2_; i_-- > 0;)\n"
                          "            ot_[i_] = cr_adstack_pop_f64(stp_);\n    }\n",
                          comm);
            ad_buf_printf(o,
                          "    if (rank_ != %s) {\n"
                          "        for (int i_ = 0; i_ < (%s); i_++)\n"
                          "            cr_adstack_push_f64(stp_, %s[i_]);\n"
                          "        MPI_Bcast(%s, %s, MPI_DOUBLE, %s, %s);\n"
                          "        for (int i_ = 0; wr_ && i_ < (%s); i_++)\n"
                          "            if (wr_[i_] != me_)\n                %s[i_] = 0;\n"
                          "        for (int i_ = 0; ot_ && i_ < (%s); i_++)\n"
                          "            %s[i_] *= ot_[i_];\n"
                          "        for (int i_ = (%s); i_-- > 0;)\n"
                          "            %s[i_] += cr_adstack_pop_f64(stp_);\n"
                          "    } else {\n        MPI_Bcast(%s, %s, MPI_DOUBLE, %s, %s);\n"
                          "        for (int i_ = 0; wr_ && i_ < (%s); i_++)\n"
                          "            if (wr_[i_] != me_ && %s == MPI_IN_PLACE)\n"
                          "                %s[i_] = 0;\n"
                          "        for (int i_ = 0; ot_ && i_ < (%s); i_++)\n"
                          "            %s[i_] *= ot_[i_];\n",
                          root, in_n, dbl(xb), dbl(xb), in_n, root, comm, in_n, dbl(xb), in_n,
                          dbl(xb), in_n, dbl(xb), dbl(yb), out_n, root, comm, out_n, in, dbl(yb),
                          out_n, dbl(yb));
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
            ad_buf_put(o, "    }\n    free(wr_);\n    free(ot_);\n");
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

/* The tangent of a blocking receive (statuses s_ of the primal, ts_ of the tangent
 * message, tr_ its result): of another count than posted, or with an error, in either
 * message, the tangent fails (NaN). on_: the primal count as posted, n: the tangent's. */
static void tangent_count(ad_buf *o, const mpi_fn *m, const char *n)
{
    ad_buf_printf(o,
                  "    int pc_ = on_, tc_ = %s;\n"
                  "    if (s_.MPI_SOURCE != MPI_PROC_NULL &&\n"
                  "        (r_ != MPI_SUCCESS || tr_ != MPI_SUCCESS ||\n"
                  "         MPI_Get_count(&s_, %s, &pc_) != MPI_SUCCESS || pc_ != on_ ||\n"
                  "         MPI_Get_count(&ts_, MPI_DOUBLE, &tc_) != MPI_SUCCESS || tc_ != %s))\n"
                  "        fail_ = 1;\n",
                  n, arg(m->out_type), n);
}

static void tangent(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    bool status = m->kind == K_RECV || m->kind == K_SENDRECV;
    const char *comm = arg(g->nparams - (status ? 2 : 1));
    ad_buf_printf(o, "static int cr_ad_%s_tan%s(", g->name, mn);
    params(o, g, mask, "_d");
    ad_buf_put(o, ")\n{\n    int fail_ = 0;\n");
    checks(o, m, mask, "fail_ = 1");
    bool sized = m->kind == K_GATHER || m->kind == K_SCATTER || m->kind == K_ALLGATHER ||
                 m->kind == K_ALLTOALL;
    if (sized)
        ad_buf_printf(o,
                      "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                      "    MPI_Comm_size(%s, &size_);\n    (void)rank_;\n",
                      comm, comm);
    const char *in_n = m->in >= 0 ? arg(m->in_count) : "0";
    if (agreed_kind(m->kind)) {
        /* the sizes agreed before any buffer is sized by them; on0_: the rank's own count,
         * for the NaN of a disagreement */
        ad_buf_printf(o, "    const int on0_ = %s;\n    (void)on0_;\n",
                      m->out >= 0 ? arg(m->out_count) : "0");
        agree(o, m, comm, "fail_ = 1");
    }
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
    else if (agreed_kind(m->kind))
        ad_buf_put(o, "    int r_ = "), call_primal(o, g, NULL),
            ad_buf_put(o, ";\n    if (!agreed_)\n        r_ = MPI_ERR_COUNT;\n");
    else
        ad_buf_put(o, "    const int r_ = "), call_primal(o, g, NULL), ad_buf_put(o, ";\n");
    ad_buf_printf(o, "    const int on_ = %s;\n    (void)on_;\n", out_n);
    zero_counts(o, m);
    switch (m->kind) {
    case K_SEND:
        ad_buf_printf(o, "    MPI_Send(%s, %s, MPI_DOUBLE, %s, %s, %s);\n", dbl(xd), in_n, arg(3),
                      arg(4), comm);
        break;
    case K_RECV:
        ad_buf_printf(o,
                      "    MPI_Status ts_;\n"
                      "    const int tr_ = MPI_Recv(%s, %s, MPI_DOUBLE, s_.MPI_SOURCE, s_.MPI_TAG, "
                      "%s, &ts_);\n",
                      dbl(yd), out_n, comm);
        tangent_count(o, m, out_n);
        break;
    case K_SENDRECV:
        ad_buf_printf(o,
                      "    MPI_Status ts_;\n"
                      "    const int tr_ = MPI_Sendrecv(%s, %s, MPI_DOUBLE, %s, %s, %s, %s, "
                      "MPI_DOUBLE, s_.MPI_SOURCE, s_.MPI_TAG, %s, &ts_);\n",
                      dbl(xd), in_n, arg(3), arg(4), dbl(yd), out_n, comm);
        tangent_count(o, m, out_n);
        break;
    case K_BCAST:
        ad_buf_printf(o, "    MPI_Bcast(%s, %s, MPI_DOUBLE, %s, %s);\n", dbl(xd), in_n, arg(3),
                      comm);
        break;
    case K_ALLREDUCE:
        /* MPI_MAX and MPI_MIN: the winner's tangent, summed with the others' zeros; MPI_PROD:
         * each rank's tangent times the others' product, summed */
        winners_reduce(o, comm);
        ad_buf_printf(o,
                      "    if (oth_) {\n        for (int i_ = 0; i_ < a2_; i_++)\n"
                      "            %s[i_] = oth_[i_] * (a0_ == MPI_IN_PLACE ? %s : %s)[i_];\n"
                      "        MPI_Allreduce(MPI_IN_PLACE, %s, a2_, MPI_DOUBLE, MPI_SUM, %s);\n"
                      "        free(oth_);\n    } else\n",
                      dbl(yd), dbl(yd), dbl(xd), dbl(yd), comm);
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
            /* MPI_MAX and MPI_MIN: the winners' tangents, summed at the root; MPI_PROD: the
             * tangents times the others' products */
            winners_reduce(o, comm);
            ad_buf_printf(
                o,
                "    if (loc_ || oth_) {\n"
                "        double *t_ = malloc((size_t)(a2_ > 0 ? a2_ : 1) * sizeof *t_);\n"
                "        if (!t_)\n            MPI_Abort(MPI_COMM_WORLD, 1);\n"
                "        for (int i_ = 0; i_ < a2_; i_++)\n"
                "            t_[i_] = oth_ ? oth_[i_] * (a0_ == MPI_IN_PLACE ? %s : %s)[i_]\n"
                "                 : w_[i_].r == me_ ? (a0_ == MPI_IN_PLACE ? %s : %s)[i_] : 0;\n"
                "        if (a0_ == MPI_IN_PLACE) {\n"
                "            memcpy(%s, t_, (size_t)(a2_ > 0 ? a2_ : 0) * sizeof *t_);\n"
                "            MPI_Reduce(MPI_IN_PLACE, %s, a2_, MPI_DOUBLE, MPI_SUM, %s, %s);\n"
                "        } else {\n"
                "            MPI_Reduce(t_, %s, a2_, MPI_DOUBLE, MPI_SUM, %s, %s);\n"
                "        }\n        free(t_);\n        free(w_);\n        free(oth_);\n    } "
                "else\n    ",
                dbl(yd), dbl(xd), dbl(yd), dbl(xd), dbl(yd), dbl(yd), arg(5), comm, dbl(yd), arg(5),
                comm);
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
                      "    if (fail_) {\n        for (int i_ = 0; i_ < (%s); i_++)\n"
                      "            %s[i_] = (double)NAN;\n"
                      "        if (%s > 0) /* another datatype, or the ranks disagreed: its "
                      "first element at least */\n"
                      "            %s[0] = (double)NAN;\n    }\n",
                      yn, dbl(yd), agreed_kind(m->kind) ? "on0_" : "on_", dbl(yd));
    if (m->in >= 0)
        free_scratch(o, mask, m->in, "x_");
    if (m->out >= 0 && m->out != m->in)
        free_scratch(o, mask, m->out, "y_");
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", arg(i));
    ad_buf_put(o, "    (void)fail_;\n    return r_;\n}\n\n");
}

void ad_mpi_emit(ad_buf *out, ad_buf *decls, const ad_func *g, uint64_t mask, int kind,
                 const char *mn)
{
    const int k = k_mpi[g->prim->mpi - 1].kind;
    /* (the requests' table refers to the flag in either mode) */
    const bool nb = requests(k) || completes(k);
    if ((kind == 0 || nb) && !g_flag_done)
        ad_buf_put(decls, k_flag);
    g_flag_done |= kind == 0 || nb;
    if (agreed_kind(k) && !g_agree_done)
        ad_buf_put(decls, k_agree);
    g_agree_done |= agreed_kind(k);
    const bool v = k == K_GATHERV || k == K_SCATTERV || k == K_ALLGATHERV;
    if (v && !g_vagree_done)
        ad_buf_put(decls, k_vagree);
    g_vagree_done |= v;
    if (nb) {
        for (int i = 0; !g_runtime_done && k_runtime[i]; i++)
            ad_buf_put(decls, k_runtime[i]);
        g_runtime_done = true;
        if (kind == 0)
            nb_split(out, g, mask, mn);
        else
            nb_tangent(out, g, mask, mn);
    } else if (k == K_GATHERV || k == K_SCATTERV || k == K_ALLGATHERV) {
        if (kind == 0)
            v_split(out, g, mask, mn);
        else
            v_tangent(out, g, mask, mn);
    } else if (kind == 0) {
        split(out, g, mask, mn);
    } else {
        tangent(out, g, mask, mn);
    }
}
