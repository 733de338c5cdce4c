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
 * (mpi_requests.c: a table in the generated file).
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
#include "mpi.h"

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

const mpi_fn *mpi_fn_of(const ad_func *g)
{
    return &k_mpi[g->prim->mpi - 1];
}

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

const char *mpi_arg(int i)
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

void mpi_params(ad_buf *out, const ad_func *g, uint64_t mask, const char *sfx)
{
    for (int i = 0; i < g->nparams; i++) {
        if (i)
            ad_buf_put(out, ", ");
        decl(out, g->params[i]->type, mpi_arg(i));
        if (sfx && (mask >> i & 1))
            ad_buf_printf(out, ", const void *%s%s", mpi_arg(i), sfx);
    }
}

void mpi_call_primal(ad_buf *out, const ad_func *g, const char *status)
{
    ad_buf_printf(out, "%s(", g->name);
    for (int i = 0; i < g->nparams; i++) {
        const char *a = mpi_arg(i);
        if (status && i == g->nparams - 1)
            a = status;
        ad_buf_printf(out, "%s%s", i ? ", " : "", a);
    }
    ad_buf_put(out, ")");
}

/* The double elements of buffer i, as an lvalue array. */
const char *mpi_dbl(const char *p)
{
    return ad_fmt("((double *)(uintptr_t)(%s))", p);
}

static void loop_push(ad_buf *o, const char *p, const char *n, const char *ind)
{
    ad_buf_printf(o,
                  "%sfor (int i_ = 0; i_ < (%s); i_++)\n%s    cr_adstack_push_f64(stp_, %s[i_]);\n",
                  ind, n, ind, mpi_dbl(p));
}

static void loop_pop(ad_buf *o, const char *p, const char *n, const char *op, const char *ind)
{
    ad_buf_printf(o,
                  "%sfor (int i_ = (%s); i_-- > 0;)\n%s    %s[i_] %s cr_adstack_pop_f64(stp_);\n",
                  ind, n, ind, mpi_dbl(p), op);
}

/* Scratch of n doubles (zeroed) named s_ when the buffer has no shadow: the shadow's name. */
static const char *shadow_or_scratch(ad_buf *o, uint64_t mask, int i, const char *sfx,
                                     const char *n, const char *name)
{
    if (mask >> i & 1)
        return ad_fmt("%s%s", mpi_arg(i), sfx);
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
void mpi_checks(ad_buf *o, const mpi_fn *m, uint64_t mask, const char *fail)
{
    /* only buffers whose data is differentiated (an int's messages carry no derivative) */
    bool ain = m->in >= 0 && (mask >> m->in & 1), aout = m->out >= 0 && (mask >> m->out & 1);
    int t[2] = {m->in_type, m->out_type};
    bool act[2] = {ain || (aout && t[1] == t[0]), aout && t[1] != t[0]};
    for (int k = 0; k < 2; k++)
        if (t[k] >= 0 && act[k])
            ad_buf_printf(o, "    if (%s != MPI_DOUBLE)\n        %s;\n", mpi_arg(t[k]), fail);
    if ((m->kind == K_ALLREDUCE || m->kind == K_REDUCE) && (ain || aout))
        ad_buf_printf(o,
                      "    if (%s != MPI_SUM && %s != MPI_PROD && %s != MPI_MAX && %s != MPI_MIN)\n"
                      "        %s;\n",
                      mpi_arg(4), mpi_arg(4), mpi_arg(4), mpi_arg(4), fail);
}

/* Counts of another datatype than MPI_DOUBLE become 0 for the derivative's messages and
 * the values saved (they count elements of that type, not doubles: no access past the
 * buffers; the derivative has failed already, by mpi_checks()). */
static void zero_counts(ad_buf *o, const mpi_fn *m)
{
    if (m->in >= 0)
        ad_buf_printf(o, "    if (%s != MPI_DOUBLE)\n        %s = 0;\n", mpi_arg(m->in_type),
                      mpi_arg(m->in_count));
    if (m->out >= 0 && m->out_count != m->in_count)
        ad_buf_printf(o, "    if (%s != MPI_DOUBLE)\n        %s = 0;\n", mpi_arg(m->out_type),
                      mpi_arg(m->out_count));
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

const char *ad_mpi_sweep_begin(void)
{
    if (!g_bound)
        return "";
    return "#ifdef CR_AD_MPI_FAILED_\n    cr_ad_mpi_failed_ = 0;\n#endif\n";
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
    const char *comm = mpi_arg(g->nparams - 1);
    const char *xb = mask & 1 ? ad_fmt("%s_b", mpi_arg(m->in)) : "x_";
    const char *yb = mask >> m->out & 1 ? ad_fmt("%s_b", mpi_arg(m->out)) : "y_";
    const char *x = mpi_arg(m->in), *y = mpi_arg(m->out);
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
    mpi_params(o, g, 0, NULL);
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n");
    v_head(o, comm);
    mpi_v_agree(o, m->kind, comm, NULL); /* (the adjoint sweep fails the derivative) */
    if (m->kind == K_SCATTERV)
        ad_buf_printf(
            o,
            "    if (!%s && a6_ == MPI_DOUBLE)\n        for (int i_ = 0; i_ < a5_; i_++)\n"
            "            cr_adstack_push_f64(stp_, %s[i_]);\n",
            inplace, mpi_dbl(y));
    else
        v_segments(o, moved, cn, dn, false,
                   ad_fmt("cr_adstack_push_f64(stp_, %s[k_]);", mpi_dbl(y)));
    ad_buf_put(o, "    const int r_ = ");
    mpi_call_primal(o, g, NULL);
    ad_buf_put(o, ";\n    cr_adstack_push_i64(stp_, agreed_);\n    free(zc_);\n"
                  "    return agreed_ ? r_ : MPI_ERR_COUNT;\n}\n\n");

    /* adjoint sweep */
    ad_buf_printf(o, "static void cr_ad_%s_bw%s(", g->name, mn);
    mpi_params(o, g, mask, "_b");
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    v_head(o, comm);
    /* the ranks disagreed in the forward sweep: every count was 0 there */
    ad_buf_put(o, "    int *zc_ = NULL;\n    if (!cr_adstack_pop_i64(stp_)) {\n"
                  "        cr_ad_mpi_failed_ = 1;\n");
    mpi_v_zero(o, m->kind);
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
    v_substitute(o, m->kind, mpi_dbl(xb), mpi_dbl(yb), xn, yn);
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
                      inplace, mpi_dbl(y));
    else
        v_segments(o, moved, cn, dn, true,
                   ad_fmt("%s[k_] = cr_adstack_pop_f64(stp_);", mpi_dbl(y)));
    ad_buf_put(o, "    free(zc_);\n");
    (void)x;
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", mpi_arg(i));
    ad_buf_put(o, "}\n\n");
}

/* The v variants in the forward mode: the same call on the tangents. */
static void v_tangent(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    const char *comm = mpi_arg(g->nparams - 1);
    ad_buf_printf(o, "static int cr_ad_%s_tan%s(", g->name, mn);
    mpi_params(o, g, mask, "_d");
    ad_buf_put(o, ")\n{\n    int fail_ = 0;\n");
    v_head(o, comm);
    v_checks(o, m->kind, mask, "fail_ = 1");
    mpi_v_agree(o, m->kind, comm, "fail_ = 1");
    const char *where = m->kind == K_ALLGATHERV ? "1" : "rank_ == a7_";
    const char *cn = m->kind == K_SCATTERV ? "a1_" : "a4_",
               *dn = m->kind == K_SCATTERV ? "a2_" : "a5_";
    v_layout(o, where, cn, dn);
    const char *xn = m->kind == K_SCATTERV ? "ext_" : "a1_";
    const char *yn = m->kind == K_SCATTERV ? "a5_" : "ext_";
    const char *xd = shadow_or_scratch(o, mask, m->in, "_d", xn, "x_");
    const char *yd = shadow_or_scratch(o, mask, m->out, "_d", yn, "y_");
    v_substitute(o, m->kind, mpi_dbl(xd), mpi_dbl(yd), xn, yn);
    const char *X = "xw_", *Y = "yw_";
    ad_buf_put(o, "    int r_ = ");
    mpi_call_primal(o, g, NULL);
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
                      yn, Y, yn, mpi_dbl(yd), mpi_dbl(yd));
    free_scratch(o, mask, m->in, "x_");
    free_scratch(o, mask, m->out, "y_");
    ad_buf_put(o, "    if (xo_)\n        free(xw_);\n    if (yo_)\n        free(yw_);\n");
    ad_buf_put(o, "    free(pd_);\n    free(zc_);\n    (void)tot_;\n");
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", mpi_arg(i));
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
                  n, peer, n, n, mpi_dbl(xb));
}

static void split(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    const char *in = m->in >= 0 ? mpi_arg(m->in) : NULL,
               *out = m->out >= 0 ? mpi_arg(m->out) : NULL;
    const char *in_n = m->in >= 0 ? mpi_arg(m->in_count) : NULL;
    const char *out_n = m->out >= 0 ? mpi_arg(m->out_count) : NULL;
    bool status = m->kind == K_RECV || m->kind == K_SENDRECV;
    bool rooted = m->kind == K_REDUCE || m->kind == K_GATHER || m->kind == K_SCATTER;
    const char *root = m->kind == K_BCAST    ? mpi_arg(3)
                       : m->kind == K_REDUCE ? mpi_arg(5)
                                             : mpi_arg(6);
    const char *comm = mpi_arg(g->nparams - (status ? 2 : 1));
    /* the receive count of a gather at the root is the size times the count */
    const char *gathered = ad_fmt("size_ * (%s)", out_n ? out_n : "0");
    const char *scattered = ad_fmt("size_ * (%s)", in_n ? in_n : "0");
    /* the forward sweep saves nothing of a buffer of another datatype (zero_counts) */
    const char *fw_n =
        out_n ? ad_fmt("(%s == MPI_DOUBLE ? %s : 0)", mpi_arg(m->out_type), out_n) : NULL;
    const char *fw_gathered = ad_fmt("size_ * %s", fw_n ? fw_n : "0");

    /* ---- forward sweep: the overwritten contents, the primal, the actual source and tag */
    ad_buf_printf(o, "static int cr_ad_%s_fw%s(", g->name, mn);
    mpi_params(o, g, 0, NULL);
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    if (rooted || m->kind == K_ALLGATHER || m->kind == K_BCAST || m->kind == K_ALLTOALL)
        ad_buf_printf(o,
                      "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                      "    MPI_Comm_size(%s, &size_);\n    (void)size_;\n    (void)rank_;\n",
                      comm, comm);
    if (mpi_agreed_kind(m->kind)) /* (the adjoint sweep fails the derivative) */
        mpi_agree(o, m, comm, NULL);
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
        mpi_call_primal(o, g, "&s_");
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
                      out_n, mpi_arg(m->out_type), out_n, mpi_arg(g->nparams - 1),
                      mpi_arg(g->nparams - 1));
    } else if (m->kind == K_ALLREDUCE || m->kind == K_REDUCE) {
        /* the winners (known to every rank) go on the stack after the primal, so the adjoint
         * pops them first */
        ad_buf_put(o, "    const int r_ = ");
        mpi_call_primal(o, g, NULL);
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
    } else if (mpi_agreed_kind(m->kind)) {
        /* the agreement goes on the stack last, so the adjoint pops it first */
        ad_buf_put(o, "    const int r_ = ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(o, ";\n    cr_adstack_push_i64(stp_, agreed_);\n"
                      "    return agreed_ ? r_ : MPI_ERR_COUNT;\n}\n\n");
    } else {
        ad_buf_put(o, "    return ");
        mpi_call_primal(o, g, NULL);
        ad_buf_put(o, ";\n}\n\n");
    }

    /* ---- adjoint sweep */
    ad_buf_printf(o, "static void cr_ad_%s_bw%s(", g->name, mn);
    mpi_params(o, g, mask, "_b");
    ad_buf_put(o, ", cr_adstack *stp_)\n{\n    (void)stp_;\n");
    mpi_checks(o, m, mask, "cr_ad_mpi_failed_ = 1");
    zero_counts(o, m);
    if (rooted || m->kind == K_ALLGATHER || m->kind == K_BCAST || m->kind == K_ALLTOALL)
        ad_buf_printf(o,
                      "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                      "    MPI_Comm_size(%s, &size_);\n    (void)size_;\n",
                      comm, comm);
    if (mpi_agreed_kind(m->kind)) {
        /* the ranks disagreed in the forward sweep: every rank's counts were 0 there */
        ad_buf_put(o, "    if (!cr_adstack_pop_i64(stp_)) {\n        cr_ad_mpi_failed_ = 1;\n");
        mpi_zero_agreed(o, m);
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
                      mpi_dbl(xb), in_n, mpi_arg(3), mpi_arg(4), comm);
        adjoint_count(o, xb, in_n, mpi_arg(3));
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
                          mpi_dbl(yb), out_n, comm);
        } else {
            /* the adjoint of the received part goes back to its source while the adjoint
             * of the sent part comes from the destination */
            xb = shadow_or_scratch(o, mask, m->in, "_b", in_n, "x_");
            loop_push(o, xb, in_n, "    ");
            ad_buf_printf(o,
                          "    MPI_Status s_;\n"
                          "    const int r_ = MPI_Sendrecv(%s, got_ ? %s : 0, MPI_DOUBLE, src_, "
                          "tag_, %s, %s, MPI_DOUBLE, %s, %s, %s, &s_);\n",
                          mpi_dbl(yb), out_n, mpi_dbl(xb), in_n, mpi_arg(3), mpi_arg(4), comm);
            adjoint_count(o, xb, in_n, mpi_arg(3));
            loop_pop(o, xb, in_n, "+=", "    ");
            free_scratch(o, mask, m->in, "x_");
        }
        /* a receive from MPI_PROC_NULL leaves the buffer, and its adjoint, as they were */
        ad_buf_printf(o,
                      "    if (src_ != MPI_PROC_NULL)\n        for (int i_ = 0; i_ < (%s); i_++)\n"
                      "            %s[i_] = 0;\n",
                      out_n, mpi_dbl(yb));
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
                      root, mpi_dbl(xb), in_n, root, comm, mpi_dbl(xb), in_n, root, comm, in_n,
                      mpi_dbl(xb));
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
                          mpi_dbl(yb), out_n, comm, comm, out_n, mpi_dbl(yb), out_n, mpi_dbl(yb));
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
                          root, in_n, mpi_dbl(xb), mpi_dbl(xb), in_n, root, comm, in_n, mpi_dbl(xb),
                          in_n, mpi_dbl(xb), in_n, mpi_dbl(xb), mpi_dbl(yb), out_n, root, comm,
                          out_n, in, mpi_dbl(yb), out_n, mpi_dbl(yb));
        }
        ad_buf_printf(o,
                      "%s    if (%s != MPI_IN_PLACE) {\n"
                      "%s        for (int i_ = 0; i_ < (%s); i_++) {\n"
                      "%s            %s[i_] += %s%s[i_];\n%s            %s[i_] = 0;\n%s        }\n"
                      "%s    }\n",
                      m->kind == K_REDUCE ? "    " : "", in, m->kind == K_REDUCE ? "    " : "",
                      out_n, m->kind == K_REDUCE ? "    " : "", mpi_dbl(xb),
                      m->kind == K_REDUCE ? "wr_ && wr_[i_] != me_ ? 0 : " : "", mpi_dbl(yb),
                      m->kind == K_REDUCE ? "    " : "", mpi_dbl(yb),
                      m->kind == K_REDUCE ? "    " : "", m->kind == K_REDUCE ? "    " : "");
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
                          mpi_dbl(yb), out_n, mpi_dbl(xb), in_n, root, comm);
        else if (m->kind == K_SCATTER)
            ad_buf_printf(o, "    MPI_Gather(%s, %s, MPI_DOUBLE, %s, %s, MPI_DOUBLE, %s, %s);\n",
                          mpi_dbl(yb), out_n, mpi_dbl(xb), in_n, root, comm);
        else if (m->kind == K_ALLTOALL)
            ad_buf_printf(o, "    MPI_Alltoall(%s, %s, MPI_DOUBLE, %s, %s, MPI_DOUBLE, %s);\n",
                          mpi_dbl(yb), out_n, mpi_dbl(xb), in_n, comm);
        else
            ad_buf_printf(o, "    MPI_Reduce_scatter_block(%s, %s, %s, MPI_DOUBLE, MPI_SUM, %s);\n",
                          mpi_dbl(yb), mpi_dbl(xb), in_n, comm);
        ad_buf_printf(o, "    %s{\n", guard);
        loop_pop(o, xb, xn, "+=", "        ");
        ad_buf_put(o, "    }\n");
        const char *zero_guard = m->kind == K_GATHER ? ad_fmt("if (rank_ == %s) ", root) : "";
        ad_buf_printf(
            o,
            "    %s{\n        for (int i_ = 0; i_ < (%s); i_++)\n            %s[i_] = 0;\n    }\n",
            zero_guard, yn, mpi_dbl(yb));
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
        ad_buf_printf(o, "    (void)%s;\n", mpi_arg(i));
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
                  n, mpi_arg(m->out_type), n);
}

static void tangent(ad_buf *o, const ad_func *g, uint64_t mask, const char *mn)
{
    const mpi_fn *m = &k_mpi[g->prim->mpi - 1];
    bool status = m->kind == K_RECV || m->kind == K_SENDRECV;
    const char *comm = mpi_arg(g->nparams - (status ? 2 : 1));
    ad_buf_printf(o, "static int cr_ad_%s_tan%s(", g->name, mn);
    mpi_params(o, g, mask, "_d");
    ad_buf_put(o, ")\n{\n    int fail_ = 0;\n");
    mpi_checks(o, m, mask, "fail_ = 1");
    bool sized = m->kind == K_GATHER || m->kind == K_SCATTER || m->kind == K_ALLGATHER ||
                 m->kind == K_ALLTOALL;
    if (sized)
        ad_buf_printf(o,
                      "    int rank_ = 0, size_ = 1;\n    MPI_Comm_rank(%s, &rank_);\n"
                      "    MPI_Comm_size(%s, &size_);\n    (void)rank_;\n",
                      comm, comm);
    const char *in_n = m->in >= 0 ? mpi_arg(m->in_count) : "0";
    if (mpi_agreed_kind(m->kind)) {
        /* the sizes agreed before any buffer is sized by them; on0_: the rank's own count,
         * for the NaN of a disagreement */
        ad_buf_printf(o, "    const int on0_ = %s;\n    (void)on0_;\n",
                      m->out >= 0 ? mpi_arg(m->out_count) : "0");
        mpi_agree(o, m, comm, "fail_ = 1");
    }
    const char *out_n = m->out >= 0 ? mpi_arg(m->out_count) : "0";
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
        ad_buf_put(o, "    MPI_Status s_;\n    const int r_ = "), mpi_call_primal(o, g, "&s_"),
            ad_buf_put(o, ";\n");
    else if (mpi_agreed_kind(m->kind))
        ad_buf_put(o, "    int r_ = "), mpi_call_primal(o, g, NULL),
            ad_buf_put(o, ";\n    if (!agreed_)\n        r_ = MPI_ERR_COUNT;\n");
    else
        ad_buf_put(o, "    const int r_ = "), mpi_call_primal(o, g, NULL), ad_buf_put(o, ";\n");
    ad_buf_printf(o, "    const int on_ = %s;\n    (void)on_;\n", out_n);
    zero_counts(o, m);
    switch (m->kind) {
    case K_SEND:
        ad_buf_printf(o, "    MPI_Send(%s, %s, MPI_DOUBLE, %s, %s, %s);\n", mpi_dbl(xd), in_n,
                      mpi_arg(3), mpi_arg(4), comm);
        break;
    case K_RECV:
        ad_buf_printf(o,
                      "    MPI_Status ts_;\n"
                      "    const int tr_ = MPI_Recv(%s, %s, MPI_DOUBLE, s_.MPI_SOURCE, s_.MPI_TAG, "
                      "%s, &ts_);\n",
                      mpi_dbl(yd), out_n, comm);
        tangent_count(o, m, out_n);
        break;
    case K_SENDRECV:
        ad_buf_printf(o,
                      "    MPI_Status ts_;\n"
                      "    const int tr_ = MPI_Sendrecv(%s, %s, MPI_DOUBLE, %s, %s, %s, %s, "
                      "MPI_DOUBLE, s_.MPI_SOURCE, s_.MPI_TAG, %s, &ts_);\n",
                      mpi_dbl(xd), in_n, mpi_arg(3), mpi_arg(4), mpi_dbl(yd), out_n, comm);
        tangent_count(o, m, out_n);
        break;
    case K_BCAST:
        ad_buf_printf(o, "    MPI_Bcast(%s, %s, MPI_DOUBLE, %s, %s);\n", mpi_dbl(xd), in_n,
                      mpi_arg(3), comm);
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
                      mpi_dbl(yd), mpi_dbl(yd), mpi_dbl(xd), mpi_dbl(yd), comm);
        ad_buf_printf(
            o,
            "    if (loc_) {\n        for (int i_ = 0; i_ < a2_; i_++)\n"
            "            %s[i_] = w_[i_].r == me_ ? (a0_ == MPI_IN_PLACE ? %s : %s)[i_] : 0;\n"
            "        MPI_Allreduce(MPI_IN_PLACE, %s, a2_, MPI_DOUBLE, MPI_SUM, %s);\n"
            "        free(w_);\n    } else\n    ",
            mpi_dbl(yd), mpi_dbl(yd), mpi_dbl(xd), mpi_dbl(yd), comm);
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
                mpi_dbl(yd), mpi_dbl(xd), mpi_dbl(yd), mpi_dbl(xd), mpi_dbl(yd), mpi_dbl(yd),
                mpi_arg(5), comm, mpi_dbl(yd), mpi_arg(5), comm);
        }
        ad_buf_printf(o,
                      "    %s(%s == MPI_IN_PLACE ? MPI_IN_PLACE : (const void *)%s, %s, %s, "
                      "MPI_DOUBLE, MPI_SUM%s, %s);\n",
                      m->kind == K_REDUCE ? "MPI_Reduce" : "MPI_Allreduce", mpi_arg(0), mpi_dbl(xd),
                      mpi_dbl(yd), out_n, m->kind == K_REDUCE ? ad_fmt(", %s", mpi_arg(5)) : "",
                      comm);
        break;
    case K_GATHER:
    case K_SCATTER:
        ad_buf_printf(o, "    %s(%s, %s, MPI_DOUBLE, %s, %s, MPI_DOUBLE, %s, %s);\n",
                      m->kind == K_GATHER ? "MPI_Gather" : "MPI_Scatter", mpi_dbl(xd), in_n,
                      mpi_dbl(yd), out_n, mpi_arg(6), comm);
        break;
    case K_ALLGATHER:
    case K_ALLTOALL:
        ad_buf_printf(o, "    %s(%s, %s, MPI_DOUBLE, %s, %s, MPI_DOUBLE, %s);\n",
                      m->kind == K_ALLGATHER ? "MPI_Allgather" : "MPI_Alltoall", mpi_dbl(xd), in_n,
                      mpi_dbl(yd), out_n, comm);
        break;
    }
    if (status)
        ad_buf_printf(o, "    if (%s != MPI_STATUS_IGNORE)\n        *%s = s_;\n",
                      mpi_arg(g->nparams - 1), mpi_arg(g->nparams - 1));
    if (m->out >= 0 && (mask >> m->out & 1))
        ad_buf_printf(o,
                      "    if (fail_) {\n        for (int i_ = 0; i_ < (%s); i_++)\n"
                      "            %s[i_] = (double)NAN;\n"
                      "        if (%s > 0) /* another datatype, or the ranks disagreed: its "
                      "first element at least */\n"
                      "            %s[0] = (double)NAN;\n    }\n",
                      yn, mpi_dbl(yd), mpi_agreed_kind(m->kind) ? "on0_" : "on_", mpi_dbl(yd));
    if (m->in >= 0)
        free_scratch(o, mask, m->in, "x_");
    if (m->out >= 0 && m->out != m->in)
        free_scratch(o, mask, m->out, "y_");
    for (int i = 0; i < g->nparams; i++)
        ad_buf_printf(o, "    (void)%s;\n", mpi_arg(i));
    ad_buf_put(o, "    (void)fail_;\n    return r_;\n}\n\n");
}

void ad_mpi_emit(ad_buf *out, ad_buf *decls, const ad_func *g, uint64_t mask, int kind,
                 const char *mn)
{
    const int k = k_mpi[g->prim->mpi - 1].kind;
    /* (the requests' table refers to the flag in either mode) */
    const bool nb = requests(k) || completes(k);
    const bool v = k == K_GATHERV || k == K_SCATTERV || k == K_ALLGATHERV;
    mpi_emit_decls(decls, kind == 0 || nb, mpi_agreed_kind(k), v, nb);
    if (nb) {
        if (kind == 0)
            mpi_nb_split(out, g, mask, mn);
        else
            mpi_nb_tangent(out, g, mask, mn);
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
